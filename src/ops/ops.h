/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface of the ops module: the built-in operator implementations that
 * the planner instantiates per subtask.  Each is an sl_op_vt_t whose cfg is
 * an sl_op_cfg_t owned by the job.  See README.md.
 */
#ifndef SL_OPS_OPS_H
#define SL_OPS_OPS_H

#include "runtime/runtime.h"

typedef struct sl_op_cfg_s {
  sl_map_fn map;
  sl_filter_fn filter;
  sl_flat_map_fn flat_map;
  sl_process_fns_t fns;
  void *user;
  const sl_sink_vt_t *sink_vt;
  void *sink_ctx;
  /* Operators with their own per-subtask setup (expressions). */
  int (*impl_create)(const struct sl_op_cfg_s *cfg, void **out_impl);
  void (*impl_destroy)(void *impl);
  void *impl_cfg;
  void (*cfg_destroy)(void *impl_cfg);
  /* Two-phase-commit sinks: commit retries (sl_checkpoint_config_t). */
  uint32_t commit_max_attempts;
  int64_t commit_backoff_ms;
  int64_t commit_max_backoff_ms;
  /* sl_job_config_t.allow_duplicate_sink_output (rule 0.3-7). */
  bool allow_duplicate_output;
} sl_op_cfg_t;

extern const sl_op_vt_t sl__op_source_vt;
extern const sl_op_vt_t sl__op_map_vt;
extern const sl_op_vt_t sl__op_filter_vt;
extern const sl_op_vt_t sl__op_flat_map_vt;
extern const sl_op_vt_t sl__op_process_vt;
extern const sl_op_vt_t sl__op_union_vt;
extern const sl_op_vt_t sl__op_sink_vt;
/* Two-phase-commit sinks (sink_2pc.c): the operator and its per-subtask
 * data (cfg.impl_create / impl_destroy). */
extern const sl_op_vt_t sl__op_sink2pc_vt;
int sl__sink2pc_impl_create(const sl_op_cfg_t *cfg, void **out_impl);
void sl__sink2pc_impl_destroy(void *impl);
struct sl_ckpt_meta_s;
struct sl_ckpt_op_s;
/**
 * @brief Give sink subtask op the committables of the checkpoint's old
 * subtasks it now owns (old i goes to new i % p') and the largest
 * parallelism recorded.  @return SL_OK, SL_ENOMEM, SL_ECORRUPT.
 * @thread the planner, before the run.
 */
int sl__sink2pc_restore(const struct sl_ckpt_meta_s *m,
                        const struct sl_ckpt_op_s *mop, sl_op_t *op,
                        sl_error_t **out_err);
struct sl_sink_metrics_s;
/**
 * @brief Fill out with the metrics of op when it is a two-phase-commit
 * sink subtask (uid and subtask too); now_ns is the snapshot's realtime
 * clock.  @return false for any other operator.
 * @thread any (atomic loads; the plan is immutable while the job runs).
 */
bool sl__sink2pc_metrics(const sl_op_t *op, int64_t now_ns,
                         struct sl_sink_metrics_s *out);

/* The keyed aggregate (aggregate.c): config for sl__agg_fns. */
#include "sluice/sl_ops.h"
int sl__agg_config_create(const sl_schema_t *in, const uint32_t *key_fields,
                          uint32_t n_keys, const sl_agg_t *aggs,
                          uint32_t n_aggs, sl_agg_emit_t emit,
                          const char *uid, void **out_cfg,
                          sl_schema_t **out_schema, sl_error_t **out_err);
void sl__agg_config_destroy(void *cfg);
extern const sl_process_fns_t sl__agg_fns;

/* Event-time arithmetic shared by windows and joins. */
static inline int64_t sl__sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

/* a mod b in [0, b) for b > 0, also for negative a. */
static inline int64_t sl__floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

/*
 * The tumbling or sliding windows that hold event time ts start at
 * *out_last, *out_last - slide, ... down to *out_lo (inclusive: ts - size
 * + 1, or INT64_MIN when that is below).  Fails (false) when one of them
 * would start below INT64_MIN, or end, or have its last timer (end - 1 +
 * lateness) at or past INT64_MAX: an event time that close to the limits
 * (some 292,000 years away) cannot be windowed, and the caller reports it
 * instead of overflowing or silently leaving out a window.  Iterate with
 * sl__window_next_start, which never steps below *out_lo.
 */
static inline bool sl__window_starts(int64_t ts, int64_t size, int64_t slide,
                                     int64_t offset, int64_t lateness,
                                     int64_t *out_last, int64_t *out_lo) {
  int64_t rel, last, end, cleanup;
  if (__builtin_sub_overflow(ts, offset, &rel) ||
      __builtin_sub_overflow(ts, sl__floor_mod(rel, slide), &last) ||
      __builtin_add_overflow(last, size, &end) ||
      __builtin_add_overflow(end - 1, lateness, &cleanup) ||
      cleanup == INT64_MAX) /* a timer at INT64_MAX names no window */
    return false;
  int64_t lo;
  if (__builtin_sub_overflow(ts, size - 1, &lo)) {
    /* lo is cut at INT64_MIN: the window before the earliest start at or
     * above it must not hold ts (it would start below INT64_MIN).  Only
     * here, so the division stays off the per-record path; with lo not
     * cut that window ends at or before ts.  Every difference here is
     * below size. */
    lo = INT64_MIN;
    int64_t first = last - (last - lo) / slide * slide;
    if ((first - ts) + (size - slide) > 0) return false;
  }
  *out_last = last;
  *out_lo = lo;
  return true;
}

/* Step *start to the next earlier window start, or false when that would
 * be below lo.  start - lo < size, so nothing overflows. */
static inline bool sl__window_next_start(int64_t *start, int64_t lo,
                                         int64_t slide) {
  if (*start - lo < slide) return false;
  *start -= slide;
  return true;
}

/* Windows (window.c): config for sl__window_fns.  aggs NULL: a user
 * aggregate or process function, set with sl__window_config_set_user. */
#include "sluice/sl_window.h"
int sl__window_config_create(const sl_schema_t *in, const uint32_t *key_fields,
                             uint32_t n_keys, const sl_window_spec_t *spec,
                             const sl_agg_t *aggs, uint32_t n_aggs,
                             const char *uid, void **out_cfg,
                             sl_schema_t **out_schema, sl_error_t **out_err);
void sl__window_config_set_user(void *cfg, const sl_window_agg_fns_t *fns,
                                sl_window_process_fn fn, void *user);
void sl__window_config_destroy(void *cfg);
extern const sl_process_fns_t sl__window_fns;

/* Joins (join.c): kind 0 interval, 1 window, 2 regular. */
int sl__join_config_create(int kind, const sl_schema_t *left,
                           const sl_schema_t *right, const char *left_time,
                           const char *right_time, int64_t lower_us,
                           int64_t upper_us, const sl_window_spec_t *spec,
                           const char *uid, void **out_cfg,
                           sl_schema_t **out, sl_error_t **out_err);
void sl__join_config_destroy(void *cfg);
extern const sl_process_fns_t sl__join_fns;

/* Expression operators (expr_ops.c). */
struct sl_expr_s;
int sl__xcfg_create(struct sl_expr_s **exprs, uint32_t n, void **out_cfg);
void sl__xcfg_destroy(void *cfg);
/** @brief Make cfg evaluate xcfg's expressions (per-subtask clones). */
void sl__xcfg_install(sl_op_cfg_t *cfg, void *xcfg);
extern const sl_op_vt_t sl__op_xfilter_vt;
extern const sl_op_vt_t sl__op_xproject_vt;

/* The reconciler of a CDC source with a non-primary-key chunk key
 * (cdc_reconcile.c, docs/cdc-mariadb.md): appended after `in`, a CDC
 * source's stream whose last field is `_sl_version` (bytes); keyed by the
 * primary key fields pk[0..n_pk) (field indexes of in's schema), it keeps
 * per (table index, key) the version of the last applied row, whether the
 * row is present, and the row, and emits a changelog without the
 * `_sl_version` field.  uid names the operator.  NULL (the job's error
 * set) on bad arguments. */
sl_stream_t *sl__cdc_reconcile(sl_stream_t *in, const char *uid,
                               const uint32_t *pk, uint32_t n_pk);

#endif
