/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Progress reporting of the sluice command: a status line on a terminal or
 * a log line every few seconds, a summary at the end, and the same data as
 * JSON (docs/metrics.md).  Built on sl_job_metrics().
 */
#ifndef SL_CLI_PROGRESS_H
#define SL_CLI_PROGRESS_H

#include <stdio.h>

#include "sluice/sluice.h"

typedef struct sl_progress_s sl_progress_t;

/** @brief Start a reporter thread (interval 0: none). */
int sl_progress_start(sl_job_t *job, const char *name, double interval_s,
                      bool is_tty, sl_progress_t **out);
/** @brief Stop and join the reporter (NULL: nothing). */
void sl_progress_stop(sl_progress_t *p);
/** @brief Print the final per-operator and per-task summary. */
void sl_progress_summary(sl_job_t *job, const char *name, FILE *f);
/**
 * @brief Write the final metrics as JSON to fd, which the caller opened for
 * writing (before the job, so that a path that cannot be written is
 * reported before the job runs); the file is truncated first.  path is for
 * messages.  The caller closes fd.
 */
int sl_progress_write_json(sl_job_t *job, const char *name, int result,
                           int fd, const char *path, char **out_msg);

#endif
