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
  int rc = sl__agg_config_create(sl__stream_schema(keyed), keyed->keysel->fields,
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
  n->schema = sl_schema_ref(sl__stream_schema(in));
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

/* ------------------------------------------------------------------ */
/* Windows (sl_window.h). */

static sl_stream_t *add_window(sl_stream_t *keyed, const char *uid,
                               const sl_window_spec_t *spec,
                               const sl_agg_t *aggs, uint32_t n_aggs,
                               sl_schema_t *user_schema,
                               const sl_window_agg_fns_t *fns,
                               sl_window_process_fn fn, void *user) {
  if (keyed == NULL) return NULL;
  sl_job_t *job = keyed->job;
  const char *u = uid ? uid : "";
  if (keyed->part != SL_PART_HASH || keyed->keysel == NULL ||
      (aggs && keyed->keysel->fn != NULL)) {
    sl__job_set_error(job, SL_EINVAL,
                      "window '%s' needs a keyed stream%s", u,
                      aggs ? " (keyed by fields)" : "");
    return NULL;
  }
  if (spec == NULL || (aggs && n_aggs == 0) ||
      (!aggs && user_schema == NULL) ||
      (fns && (fns->add == NULL || fns->result == NULL))) {
    sl__job_set_error(job, SL_EINVAL,
                      "window '%s': missing %s", u,
                      spec == NULL ? "window spec"
                      : aggs       ? "aggregates"
                      : user_schema == NULL ? "output schema"
                                            : "add or result function");
    return NULL;
  }
  if (fns && spec->kind == SL_WINDOW_SESSION && fns->merge == NULL) {
    sl__job_set_error(job, SL_EINVAL,
                      "window '%s': session windows need a merge function", u);
    return NULL;
  }
  void *cfg;
  sl_schema_t *out = NULL;
  sl_error_t *err = NULL;
  const sl_keysel_t *ks = keyed->keysel;
  int rc = sl__window_config_create(sl__stream_schema(keyed), ks->fields,
                                    ks->fn ? 0 : ks->n_fields, spec, aggs,
                                    n_aggs, uid, &cfg, &out, &err);
  if (rc != SL_OK) {
    sl__job_set_error(job, rc, "window '%s': %s", u, sl_error_message(err));
    sl_error_destroy(err);
    return NULL;
  }
  if (!aggs) {
    sl__window_config_set_user(cfg, fns, fn, user);
    out = sl_schema_ref(user_schema);
  }
  sl_stream_t *s = sl_stream_process(keyed, uid, out, &sl__window_fns, cfg);
  sl_schema_unref(out);
  if (s == NULL) {
    sl__window_config_destroy(cfg);
    return NULL;
  }
  s->node->cfg.impl_cfg = cfg;
  s->node->cfg.cfg_destroy = sl__window_config_destroy;
  s->node->side_schema = sl_schema_ref(sl__stream_schema(keyed));
  return s;
}

sl_stream_t *sl_stream_window_aggregate(sl_stream_t *keyed, const char *uid,
                                        const sl_window_spec_t *spec,
                                        const sl_agg_t *aggs,
                                        uint32_t n_aggs) {
  if (keyed && aggs == NULL) {
    sl__job_set_error(keyed->job, SL_EINVAL, "window '%s' has no aggregates",
                      uid ? uid : "");
    return NULL;
  }
  return add_window(keyed, uid, spec, aggs, n_aggs, NULL, NULL, NULL, NULL);
}

sl_stream_t *sl_stream_window_reduce(sl_stream_t *keyed, const char *uid,
                                     const sl_window_spec_t *spec,
                                     sl_schema_t *out_schema,
                                     const sl_window_agg_fns_t *fns,
                                     void *user) {
  if (keyed && fns == NULL) {
    sl__job_set_error(keyed->job, SL_EINVAL,
                      "window '%s' has no aggregate functions", uid ? uid : "");
    return NULL;
  }
  return add_window(keyed, uid, spec, NULL, 0, out_schema, fns, NULL, user);
}

sl_stream_t *sl_stream_window_process(sl_stream_t *keyed, const char *uid,
                                      const sl_window_spec_t *spec,
                                      sl_schema_t *out_schema,
                                      sl_window_process_fn fn, void *user) {
  if (keyed && fn == NULL) {
    sl__job_set_error(keyed->job, SL_EINVAL,
                      "window '%s' has no process function", uid ? uid : "");
    return NULL;
  }
  return add_window(keyed, uid, spec, NULL, 0, out_schema, NULL, fn, user);
}

sl_stream_t *sl_stream_late_rows(sl_stream_t *windowed) {
  if (windowed == NULL) return NULL;
  if (windowed->node->side_schema == NULL || windowed->port != 0) {
    sl__job_set_error(windowed->job, SL_EINVAL,
                      "'%s' has no late rows: it is not a window operator",
                      windowed->node->uid);
    return NULL;
  }
  sl_stream_t *s = sl__job_new_handle(windowed->job, windowed->node);
  if (s) s->port = 1;
  return s;
}

/* ------------------------------------------------------------------ */
/* Joins. */

static bool same_keys(const sl_stream_t *a, const sl_stream_t *b) {
  const sl_keysel_t *x = a->keysel, *y = b->keysel;
  if (x == NULL || y == NULL || x->fn || y->fn || x->n_fields != y->n_fields)
    return false;
  for (uint32_t i = 0; i < x->n_fields; i++)
    if (x->types[i] != y->types[i]) return false;
  return true;
}

static sl_stream_t *add_join(sl_stream_t *left, sl_stream_t *right,
                             const char *uid, int kind, const char *lt,
                             const char *rt, int64_t lower, int64_t upper,
                             const sl_window_spec_t *spec) {
  if (left == NULL || right == NULL) return NULL;
  sl_job_t *job = left->job;
  const char *u = uid ? uid : "";
  if (left->part != SL_PART_HASH || right->part != SL_PART_HASH ||
      !same_keys(left, right)) {
    sl__job_set_error(job, SL_EINVAL,
                      "join '%s' needs both inputs keyed by fields of the "
                      "same types", u);
    return NULL;
  }
  void *cfg;
  sl_schema_t *out;
  sl_error_t *err = NULL;
  int rc = sl__join_config_create(kind, sl__stream_schema(left),
                                  sl__stream_schema(right), lt, rt, lower,
                                  upper, spec, uid, &cfg, &out, &err);
  if (rc != SL_OK) {
    sl__job_set_error(job, rc, "join '%s': %s", u, sl_error_message(err));
    sl_error_destroy(err);
    return NULL;
  }
  sl_stream_t *s = sl_stream_connect(left, right, uid, out, &sl__join_fns, cfg);
  sl_schema_unref(out);
  if (s == NULL) {
    sl__join_config_destroy(cfg);
    return NULL;
  }
  s->node->cfg.impl_cfg = cfg;
  s->node->cfg.cfg_destroy = sl__join_config_destroy;
  return s;
}

sl_stream_t *sl_stream_interval_join(sl_stream_t *left, sl_stream_t *right,
                                     const char *uid,
                                     const sl_interval_join_spec_t *spec) {
  if (left && spec == NULL) {
    sl__job_set_error(left->job, SL_EINVAL, "join '%s': no interval",
                      uid ? uid : "");
    return NULL;
  }
  return add_join(left, right, uid, 0, spec ? spec->left_time_field : NULL,
                  spec ? spec->right_time_field : NULL,
                  spec ? spec->lower_us : 0, spec ? spec->upper_us : 0, NULL);
}

sl_stream_t *sl_stream_window_join(sl_stream_t *left, sl_stream_t *right,
                                   const char *uid,
                                   const sl_window_spec_t *spec,
                                   const char *right_time_field) {
  if (left && spec == NULL) {
    sl__job_set_error(left->job, SL_EINVAL, "join '%s': no window",
                      uid ? uid : "");
    return NULL;
  }
  return add_join(left, right, uid, 1, spec ? spec->time_field : NULL,
                  right_time_field ? right_time_field
                                   : spec ? spec->time_field : NULL,
                  0, 0, spec);
}

sl_stream_t *sl_stream_join(sl_stream_t *left, sl_stream_t *right,
                            const char *uid) {
  return add_join(left, right, uid, 2, NULL, NULL, 0, 0, NULL);
}
