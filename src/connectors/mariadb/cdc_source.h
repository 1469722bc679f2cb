/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the pipeline builder needs of the mariadb-cdc source beyond the
 * public API (sl_connector.h): the primary key of the captured tables,
 * for the reconciler a declared non-primary-key chunk key adds
 * (src/ops/cdc_reconcile.c).
 */
#ifndef SL_MARIADB_CDC_SOURCE_H
#define SL_MARIADB_CDC_SOURCE_H

#include "sluice/sluice.h"

/* The primary key's field indexes in the source's output (borrowed from
 * ctx, the source's context). */
void sl__mariadb_cdc_pk(const void *ctx, const uint32_t **out_pk,
                        uint32_t *out_n);

/* The reconciler (src/ops/cdc_reconcile.c). */
sl_stream_t *sl__cdc_reconcile(sl_stream_t *in, const char *uid,
                               const uint32_t *pk, uint32_t n_pk);

#endif
