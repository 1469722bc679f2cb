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
} sl_op_cfg_t;

extern const sl_op_vt_t sl__op_source_vt;
extern const sl_op_vt_t sl__op_map_vt;
extern const sl_op_vt_t sl__op_filter_vt;
extern const sl_op_vt_t sl__op_flat_map_vt;
extern const sl_op_vt_t sl__op_process_vt;
extern const sl_op_vt_t sl__op_union_vt;
extern const sl_op_vt_t sl__op_sink_vt;

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

#endif
