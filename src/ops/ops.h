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

#endif
