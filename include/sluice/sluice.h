/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice public API, in one header.  Start with sl_job.h (building and
 * running jobs), then sl_row.h (rows), sl_state.h (keyed state) and
 * sl_connector.h (sources and sinks).
 */
#ifndef SLUICE_H
#define SLUICE_H

#include "sl_common.h"
#include "sl_row.h"
#include "sl_keygroup.h"
#include "sl_job.h"
#include "sl_state.h"
#include "sl_connector.h"
#include "sl_format.h"
#include "sl_metrics.h"
#include "sl_ops.h"
#include "sl_time.h"
#include "sl_window.h"

#endif
