/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Event time.  Event times are microseconds since the epoch (the unit of
 * the timestamp type).  A source with a watermark strategy reads each
 * record's event time from a field and emits watermarks: a watermark W
 * says that no more records with event time <= W are expected.  Every task
 * with several inputs takes the minimum over its inputs, leaving out idle
 * ones; at the end of bounded input the watermark becomes INT64_MAX, which
 * fires every pending event-time timer.  See docs/event-time.md.
 */
#ifndef SLUICE_SL_TIME_H
#define SLUICE_SL_TIME_H

#include "sl_common.h"
#include "sl_job.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_WATERMARK_MIN INT64_MIN /* no watermark yet */
#define SL_WATERMARK_MAX INT64_MAX /* end of input */

typedef enum sl_wm_strategy_e {
  /* Watermark = largest event time seen - max_out_of_orderness_us - 1. */
  SL_WM_BOUNDED = 0,
  /* Event times never decrease: the bounded strategy with no delay. */
  SL_WM_MONOTONOUS = 1
} sl_wm_strategy_t;

typedef struct sl_watermark_config_s {
  const char *time_field;          /* timestamp or int64 field (us) */
  sl_wm_strategy_t strategy;
  int64_t max_out_of_orderness_us; /* SL_WM_BOUNDED */
  /* A split without records for this long is idle and does not hold the
   * watermark back.  0: splits never become idle. */
  int64_t idle_timeout_ms;
  /* Watermarks are emitted every interval_ms of processing time (default
   * 200); with per_record, after every record that advances one. */
  int64_t interval_ms;
  bool per_record;
} sl_watermark_config_t;

SL_API void sl_watermark_config_init(sl_watermark_config_t *cfg);

/**
 * @brief Give a source a watermark strategy.  `source` must be the stream
 * of sl_job_source(); the watermark of a source subtask is the minimum over
 * the splits it reads that are neither idle nor finished.  A record whose
 * event-time field is null fails the job.
 */
SL_API sl_stream_t *sl_source_watermarks(sl_stream_t *source,
                                         const sl_watermark_config_t *cfg);

/** @brief The operator's current watermark (SL_WATERMARK_MIN at first). */
SL_API int64_t sl_ctx_watermark(const sl_ctx_t *ctx);
/**
 * @brief Register an event-time timer (microseconds) for the current key;
 * it fires through sl_process_fns_t.on_event_timer once the watermark
 * reaches it.  Timers are part of checkpoints.
 */
SL_API int sl_ctx_event_timer_register(sl_ctx_t *ctx, int64_t ts_us);
SL_API int sl_ctx_event_timer_delete(sl_ctx_t *ctx, int64_t ts_us);

#ifdef __cplusplus
}
#endif
#endif
