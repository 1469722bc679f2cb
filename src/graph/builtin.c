/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Builder calls of the built-in relational operators (sl_ops.h): the keyed
 * aggregate, expression filters and projections.  They add ordinary nodes
 * whose configuration is owned by the job.  See README.md.
 */
#include "graph/graph.h"
#include "ops/expr.h"

sl_stream_t *sl_stream_aggregate(sl_stream_t *keyed, const char *uid,
                                 const sl_agg_t *aggs, uint32_t n_aggs,
                                 sl_agg_emit_t emit) {
  if (keyed == NULL) return NULL;
  sl_job_t *job = keyed->job;
  if (keyed->part != SL_PART_HASH || keyed->keysel == NULL ||
      keyed->keysel->fn != NULL) {
    sl__job_set_error(job, SL_EINVAL,
                      "aggregate '%s' needs a stream keyed by fields "
                      "(sl_stream_key_by_fields)",
                      uid ? uid : "");
    return NULL;
  }
  if (n_aggs == 0) {
    sl__job_set_error(job, SL_EINVAL, "aggregate '%s' has no aggregates",
                      uid ? uid : "");
    return NULL;
  }
  void *cfg;
  sl_schema_t *out;
  sl_error_t *err = NULL;
  int rc = sl__agg_config_create(keyed->node->schema, keyed->keysel->fields,
                                 keyed->keysel->n_fields, aggs, n_aggs, emit,
                                 uid, &cfg, &out, &err);
  if (rc != SL_OK) {
    sl__job_set_error(job, rc, "aggregate '%s': %s", uid ? uid : "",
                      sl_error_message(err));
    sl_error_destroy(err);
    return NULL;
  }
  sl_stream_t *s = sl_stream_process(keyed, uid, out, &sl__agg_fns, cfg);
  sl_schema_unref(out);
  if (s == NULL) {
    sl__agg_config_destroy(cfg);
    return NULL;
  }
  s->node->cfg.impl_cfg = cfg;
  s->node->cfg.cfg_destroy = sl__agg_config_destroy;
  return s;
}

sl_stream_t *sl_stream_filter_expr(sl_stream_t *in, const char *uid,
                                   sl_expr_t *cond) {
  if (in == NULL || cond == NULL) {
    sl__expr_destroy(cond);
    return NULL;
  }
  sl_job_t *job = in->job;
  if (sl__expr_type(cond).id != SL_TYPE_BOOL) {
    sl__job_set_error(job, SL_ETYPE, "filter '%s': the condition '%s' is not "
                      "bool", uid ? uid : "", sl__expr_text(cond));
    sl__expr_destroy(cond);
    return NULL;
  }
  void *cfg;
  if (sl__xcfg_create(&cond, 1, &cfg) != SL_OK) {
    sl__expr_destroy(cond);
    sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
    return NULL;
  }
  sl_node_t *n = sl__job_new_node(job, SL_NODE_FILTER, uid, in);
  if (n == NULL) {
    sl__xcfg_destroy(cfg);
    return NULL;
  }
  n->vt = &sl__op_xfilter_vt;
  n->schema = sl_schema_ref(in->node->schema);
  sl__xcfg_install(&n->cfg, cfg);
  return sl__job_new_handle(job, n);
}

sl_stream_t *sl_stream_project(sl_stream_t *in, const char *uid,
                               const char *const *names, sl_expr_t **exprs,
                               uint32_t n_exprs) {
  if (in == NULL) {
    for (uint32_t i = 0; i < n_exprs; i++) sl__expr_destroy(exprs[i]);
    return NULL;
  }
  sl_job_t *job = in->job;
  sl_field_t *fields = sl_calloc(n_exprs ? n_exprs : 1, sizeof(sl_field_t));
  void *cfg = NULL;
  sl_schema_t *schema = NULL;
  sl_error_t *err = NULL;
  if (fields == NULL) goto nomem;
  for (uint32_t i = 0; i < n_exprs; i++) {
    fields[i].name = names[i];
    fields[i].type = sl__expr_type(exprs[i]);
  }
  int rc = sl_schema_create(fields, n_exprs, &schema, &err);
  sl_free(fields);
  if (rc != SL_OK) {
    sl__job_set_error(job, rc, "project '%s': %s", uid ? uid : "",
                      sl_error_message(err));
    sl_error_destroy(err);
    for (uint32_t i = 0; i < n_exprs; i++) sl__expr_destroy(exprs[i]);
    return NULL;
  }
  if (sl__xcfg_create(exprs, n_exprs, &cfg) != SL_OK) goto nomem;
  sl_node_t *n = sl__job_new_node(job, SL_NODE_MAP, uid, in);
  if (n == NULL) {
    sl__xcfg_destroy(cfg);
    sl_schema_unref(schema);
    return NULL;
  }
  n->vt = &sl__op_xproject_vt;
  n->schema = schema;
  sl__xcfg_install(&n->cfg, cfg);
  return sl__job_new_handle(job, n);
nomem:
  for (uint32_t i = 0; i < n_exprs; i++) sl__expr_destroy(exprs[i]);
  sl_schema_unref(schema);
  sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
  return NULL;
}
