/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Expression operators: a filter on a bool expression and a projection to
 * computed fields.  The job owns the compiled template; each subtask
 * evaluates its own clone (expressions carry scratch buffers).  Bare field
 * references are copied without evaluation.  See README.md.
 */
#include "ops/expr.h"
#include "ops/ops.h"

/* Template: n expressions (filter: 1). */
typedef struct xcfg_s {
  sl_expr_t **exprs;
  uint32_t n;
} xcfg_t;

typedef struct ximpl_s {
  sl_expr_t **exprs;
  int32_t *field; /* bare field reference, or -1 */
  uint32_t n;
} ximpl_t;

void sl__xcfg_destroy(void *p) {
  xcfg_t *c = p;
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->n; i++) sl__expr_destroy(c->exprs[i]);
  sl_free(c->exprs);
  sl_free(c);
}

int sl__xcfg_create(sl_expr_t **exprs, uint32_t n, void **out) {
  xcfg_t *c = sl_calloc(1, sizeof(*c));
  if (c == NULL) return SL_ENOMEM;
  c->exprs = sl_calloc(n ? n : 1, sizeof(sl_expr_t *));
  if (c->exprs == NULL) {
    sl_free(c);
    return SL_ENOMEM;
  }
  memcpy(c->exprs, exprs, n * sizeof(sl_expr_t *));
  c->n = n;
  *out = c;
  return SL_OK;
}

static void ximpl_destroy(void *p) {
  ximpl_t *x = p;
  if (x == NULL) return;
  for (uint32_t i = 0; i < x->n; i++) sl__expr_destroy(x->exprs[i]);
  sl_free(x->exprs);
  sl_free(x->field);
  sl_free(x);
}

static int ximpl_create(const sl_op_cfg_t *cfg, void **out) {
  const xcfg_t *c = cfg->impl_cfg;
  ximpl_t *x = sl_calloc(1, sizeof(*x));
  if (x == NULL) return SL_ENOMEM;
  x->exprs = sl_calloc(c->n ? c->n : 1, sizeof(sl_expr_t *));
  x->field = sl_calloc(c->n ? c->n : 1, sizeof(int32_t));
  if (x->exprs == NULL || x->field == NULL) {
    ximpl_destroy(x);
    return SL_ENOMEM;
  }
  for (uint32_t i = 0; i < c->n; i++) {
    if (sl__expr_clone(c->exprs[i], &x->exprs[i]) != SL_OK) {
      ximpl_destroy(x);
      return SL_ENOMEM;
    }
    x->n++;
    uint32_t f;
    x->field[i] = sl__expr_is_field(x->exprs[i], &f) ? (int32_t)f : -1;
  }
  *out = x;
  return SL_OK;
}

void sl__xcfg_install(sl_op_cfg_t *cfg, void *xcfg) {
  cfg->impl_cfg = xcfg;
  cfg->cfg_destroy = sl__xcfg_destroy;
  cfg->impl_create = ximpl_create;
  cfg->impl_destroy = ximpl_destroy;
}

static int eval_error(sl_op_t *op, int rc, sl_error_t *err, const sl_expr_t *e) {
  if (err) sl_error_prefix(err, "expression '%s'", sl__expr_text(e));
  return sl__op_fail_err(op, err, rc);
}

static int xfilter_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  ximpl_t *x = op->impl;
  bool keep;
  sl_error_t *err = NULL;
  int rc = sl__expr_eval_bool(x->exprs[0], row, &keep, &err);
  if (SL_UNLIKELY(rc != SL_OK)) return eval_error(op, rc, err, x->exprs[0]);
  return keep ? sl__op_emit(op, row) : SL_OK;
}

const sl_op_vt_t sl__op_xfilter_vt = {"filter", NULL, xfilter_process,
                                      NULL,     NULL, NULL};

static int xproject_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  ximpl_t *x = op->impl;
  sl_row_builder_t *b = &op->out_b;
  sl_row_builder_reset(b, sl_row_kind(row));
  for (uint32_t i = 0; i < x->n; i++) {
    sl_value_t v;
    if (x->field[i] >= 0) {
      sl_row_get_value(row, (uint32_t)x->field[i], &v);
    } else {
      sl_error_t *err = NULL;
      int rc = sl__expr_eval(x->exprs[i], row, &v, &err);
      if (SL_UNLIKELY(rc != SL_OK)) return eval_error(op, rc, err, x->exprs[i]);
    }
    int rc = sl_row_builder_set_value(b, i, &v);
    if (SL_UNLIKELY(rc != SL_OK))
      return sl__op_fail(op, rc, "cannot set output field %u", i + 1);
  }
  sl_row_t out;
  sl_error_t *err = NULL;
  int rc = sl_row_builder_finish(b, &out, &err);
  if (SL_UNLIKELY(rc != SL_OK)) return sl__op_fail_err(op, err, rc);
  return sl__op_emit(op, &out);
}

const sl_op_vt_t sl__op_xproject_vt = {"project", NULL, xproject_process,
                                       NULL,      NULL, NULL};

/* Public wrappers of the compiler (sl_ops.h). */
int sl_expr_compile(const char *text, const sl_schema_t *schema,
                    sl_expr_t **out, uint32_t *out_col, sl_error_t **out_err) {
  return sl__expr_compile(text, schema, out, out_col, out_err);
}

sl_type_t sl_expr_result_type(const sl_expr_t *e) { return sl__expr_type(e); }

void sl_expr_destroy(sl_expr_t *e) { sl__expr_destroy(e); }
