/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Evaluation of compiled expressions, once per record: a recursive switch
 * over the nodes that expr.c built, reading fields in place from the binary
 * row.  Type rules were applied at compile time, so each node knows the
 * representation of its operands and nothing here allocates (except the
 * first growth of a lower/upper scratch buffer).  See README.md.
 */
#include <math.h>

#include "ops/expr_int.h"

/* ------------------------------------------------------------------------
 * Evaluation
 *
 * ev() evaluates a node into *out: on SL_OK out->is_null is set and, when
 * it is false, the member of out->u that the node's type uses.  Nothing
 * else of out is written (the public entry points add type and scale).
 */

static int rt_overflow(const node_t *n, sl_error_t **out_err) {
  return sl_error_set(out_err, SL_EOVERFLOW, "%s overflow in '%s' at column %u",
                      n->ovf, n->sym, n->col);
}

static int rt_divzero(const node_t *n, sl_error_t **out_err) {
  return sl_error_set(out_err, SL_EINVAL, "division by zero at column %u",
                      n->col);
}

static int cmp_slices(sl_slice_t a, sl_slice_t b) {
  uint32_t m = a.len < b.len ? a.len : b.len;
  int c = m ? memcmp(a.ptr, b.ptr, m) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  return (a.len > b.len) - (a.len < b.len);
}

/* Compare a*ma with b*mb exactly.  At most one factor exceeds 1, and when
 * its product overflows int64 it is larger in magnitude than any int64, so
 * the sign of that operand decides. */
static int cmp_scaled(int64_t a, int64_t ma, int64_t b, int64_t mb) {
  int64_t x, y;
  if (__builtin_mul_overflow(a, ma, &x)) return a > 0 ? 1 : -1;
  if (__builtin_mul_overflow(b, mb, &y)) return b > 0 ? -1 : 1;
  return (x > y) - (x < y);
}

static bool cmp_result(uint8_t cmp, int c) {
  switch (cmp) {
  case CMP_EQ:
    return c == 0;
  case CMP_NE:
    return c != 0;
  case CMP_LT:
    return c < 0;
  case CMP_LE:
    return c <= 0;
  case CMP_GT:
    return c > 0;
  default:
    return c >= 0;
  }
}

static bool cmp_f64(uint8_t cmp, double a, double b) {
  switch (cmp) {
  case CMP_EQ:
    return a == b;
  case CMP_NE:
    return a != b;
  case CMP_LT:
    return a < b;
  case CMP_LE:
    return a <= b;
  case CMP_GT:
    return a > b;
  default:
    return a >= b;
  }
}

static int ev(node_t *n, const sl_row_t *row, sl_value_t *out,
              sl_error_t **out_err);

/* Evaluate both operands of n into l and r; a null operand makes the
 * result null without evaluating the right one. */
#define EV_OPERANDS(n, row, l, r, out, out_err)                          \
  do {                                                                   \
    int rc_ = ev((n)->a, (row), &(l), (out_err));                        \
    if (SL_UNLIKELY(rc_ != SL_OK)) return rc_;                           \
    if ((l).is_null) {                                                   \
      (out)->is_null = true;                                             \
      return SL_OK;                                                      \
    }                                                                    \
    rc_ = ev((n)->b, (row), &(r), (out_err));                            \
    if (SL_UNLIKELY(rc_ != SL_OK)) return rc_;                           \
    if ((r).is_null) {                                                   \
      (out)->is_null = true;                                             \
      return SL_OK;                                                      \
    }                                                                    \
  } while (0)

static int ev_case_map(node_t *n, const sl_row_t *row, sl_value_t *out,
                       sl_error_t **out_err) {
  sl_value_t v;
  int rc = ev(n->a, row, &v, out_err);
  if (rc != SL_OK) return rc;
  if (v.is_null) {
    out->is_null = true;
    return SL_OK;
  }
  sl_bytes_clear(&n->scratch);
  if (sl_bytes_reserve(&n->scratch, (size_t)v.u.s.len + 1) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory in '%s'", n->sym);
  uint8_t *d = n->scratch.data;
  if (n->op == OP_LOWER) {
    for (uint32_t i = 0; i < v.u.s.len; i++) {
      uint8_t c = v.u.s.ptr[i];
      d[i] = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
    }
  } else {
    for (uint32_t i = 0; i < v.u.s.len; i++) {
      uint8_t c = v.u.s.ptr[i];
      d[i] = (c >= 'a' && c <= 'z') ? (uint8_t)(c - 32) : c;
    }
  }
  n->scratch.len = v.u.s.len;
  out->is_null = false;
  out->u.s.ptr = d;
  out->u.s.len = v.u.s.len;
  return SL_OK;
}

static int ev(node_t *n, const sl_row_t *row, sl_value_t *out,
              sl_error_t **out_err) {
  sl_value_t l, r;
  int rc;
  int64_t v;
  switch ((enum op)n->op) {
  case OP_CONST:
    *out = n->cval;
    return SL_OK;
  case OP_FIELD_I64:
    if (n->type.nullable && sl_row_is_null(row, n->field)) break;
    out->is_null = false;
    out->u.i = sl_row_get_i64(row, n->field);
    return SL_OK;
  case OP_FIELD_F64:
    if (n->type.nullable && sl_row_is_null(row, n->field)) break;
    out->is_null = false;
    out->u.f = sl_row_get_f64(row, n->field);
    return SL_OK;
  case OP_FIELD_BOOL:
    if (n->type.nullable && sl_row_is_null(row, n->field)) break;
    out->is_null = false;
    out->u.b = sl_row_get_bool(row, n->field);
    return SL_OK;
  case OP_FIELD_STR:
    if (n->type.nullable && sl_row_is_null(row, n->field)) break;
    out->is_null = false;
    out->u.s = sl_row_get_str(row, n->field);
    return SL_OK;

  case OP_I2F:
    rc = ev(n->a, row, out, out_err);
    if (rc == SL_OK && !out->is_null) out->u.f = (double)out->u.i;
    return rc;
  case OP_D2F:
    rc = ev(n->a, row, out, out_err);
    if (rc == SL_OK && !out->is_null) out->u.f = (double)out->u.i / n->fdiv;
    return rc;
  case OP_RESCALE:
    rc = ev(n->a, row, out, out_err);
    if (rc == SL_OK && !out->is_null &&
        __builtin_mul_overflow(out->u.i, n->mul[0], &out->u.i))
      return rt_overflow(n, out_err);
    return rc;

  case OP_NEG_I:
  case OP_ABS_I:
    rc = ev(n->a, row, out, out_err);
    if (rc != SL_OK || out->is_null) return rc;
    if (n->op == OP_ABS_I && out->u.i >= 0) return SL_OK;
    if (out->u.i == INT64_MIN) return rt_overflow(n, out_err);
    out->u.i = -out->u.i;
    return SL_OK;
  case OP_NEG_F:
    rc = ev(n->a, row, out, out_err);
    if (rc == SL_OK && !out->is_null) out->u.f = -out->u.f;
    return rc;
  case OP_ABS_F:
    rc = ev(n->a, row, out, out_err);
    if (rc == SL_OK && !out->is_null) out->u.f = fabs(out->u.f);
    return rc;

  case OP_ADD_I:
    EV_OPERANDS(n, row, l, r, out, out_err);
    if (__builtin_add_overflow(l.u.i, r.u.i, &v))
      return rt_overflow(n, out_err);
    goto int_result;
  case OP_SUB_I:
    EV_OPERANDS(n, row, l, r, out, out_err);
    if (__builtin_sub_overflow(l.u.i, r.u.i, &v))
      return rt_overflow(n, out_err);
    goto int_result;
  case OP_MUL_I:
    EV_OPERANDS(n, row, l, r, out, out_err);
    if (__builtin_mul_overflow(l.u.i, r.u.i, &v))
      return rt_overflow(n, out_err);
    goto int_result;
  case OP_DIV_I:
    EV_OPERANDS(n, row, l, r, out, out_err);
    if (r.u.i == 0) return rt_divzero(n, out_err);
    if (l.u.i == INT64_MIN && r.u.i == -1) return rt_overflow(n, out_err);
    v = l.u.i / r.u.i;
    goto int_result;
  case OP_MOD_I:
    EV_OPERANDS(n, row, l, r, out, out_err);
    if (r.u.i == 0) return rt_divzero(n, out_err);
    v = r.u.i == -1 ? 0 : l.u.i % r.u.i;
    goto int_result;

  case OP_ADD_F:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.f = l.u.f + r.u.f;
    out->is_null = false;
    return SL_OK;
  case OP_SUB_F:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.f = l.u.f - r.u.f;
    out->is_null = false;
    return SL_OK;
  case OP_MUL_F:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.f = l.u.f * r.u.f;
    out->is_null = false;
    return SL_OK;
  case OP_DIV_F:
    EV_OPERANDS(n, row, l, r, out, out_err);
    if (r.u.f == 0.0) return rt_divzero(n, out_err);
    out->u.f = l.u.f / r.u.f;
    out->is_null = false;
    return SL_OK;

  case OP_CMP_I:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.b = cmp_result(n->cmp, (l.u.i > r.u.i) - (l.u.i < r.u.i));
    out->is_null = false;
    return SL_OK;
  case OP_CMP_F:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.b = cmp_f64(n->cmp, l.u.f, r.u.f);
    out->is_null = false;
    return SL_OK;
  case OP_CMP_D:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.b =
        cmp_result(n->cmp, cmp_scaled(l.u.i, n->mul[0], r.u.i, n->mul[1]));
    out->is_null = false;
    return SL_OK;
  case OP_CMP_S:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.b = cmp_result(n->cmp, cmp_slices(l.u.s, r.u.s));
    out->is_null = false;
    return SL_OK;
  case OP_CMP_B:
    EV_OPERANDS(n, row, l, r, out, out_err);
    out->u.b = (l.u.b == r.u.b) == (n->cmp == CMP_EQ);
    out->is_null = false;
    return SL_OK;

  case OP_CMP_I_FK:
    if (n->a->type.nullable && sl_row_is_null(row, n->field)) break;
    v = sl_row_get_i64(row, n->field);
    out->u.b = cmp_result(n->cmp, (v > n->b->cval.u.i) - (v < n->b->cval.u.i));
    out->is_null = false;
    return SL_OK;
  case OP_CMP_F_FK:
    if (n->a->type.nullable && sl_row_is_null(row, n->field)) break;
    out->u.b = cmp_f64(n->cmp, sl_row_get_f64(row, n->field), n->b->cval.u.f);
    out->is_null = false;
    return SL_OK;
  case OP_CMP_D_FK:
    if (n->a->type.nullable && sl_row_is_null(row, n->field)) break;
    out->u.b = cmp_result(n->cmp, cmp_scaled(sl_row_get_i64(row, n->field),
                                             n->mul[0], n->b->cval.u.i,
                                             n->mul[1]));
    out->is_null = false;
    return SL_OK;
  case OP_CMP_S_FK:
    if (n->a->type.nullable && sl_row_is_null(row, n->field)) break;
    out->u.b = cmp_result(
        n->cmp, cmp_slices(sl_row_get_str(row, n->field), n->b->cval.u.s));
    out->is_null = false;
    return SL_OK;

  /* Three-valued logic; the right side is not evaluated when the left
   * side decides, so `d != 0 and x / d > 1` never divides by zero. */
  case OP_AND:
    rc = ev(n->a, row, &l, out_err);
    if (rc != SL_OK) return rc;
    if (!l.is_null && !l.u.b) goto bool_false;
    rc = ev(n->b, row, &r, out_err);
    if (rc != SL_OK) return rc;
    if (!r.is_null && !r.u.b) goto bool_false;
    if (l.is_null || r.is_null) break;
    out->is_null = false;
    out->u.b = true;
    return SL_OK;
  case OP_OR:
    rc = ev(n->a, row, &l, out_err);
    if (rc != SL_OK) return rc;
    if (!l.is_null && l.u.b) goto bool_true;
    rc = ev(n->b, row, &r, out_err);
    if (rc != SL_OK) return rc;
    if (!r.is_null && r.u.b) goto bool_true;
    if (l.is_null || r.is_null) break;
    goto bool_false;
  case OP_NOT:
    rc = ev(n->a, row, out, out_err);
    if (rc == SL_OK && !out->is_null) out->u.b = !out->u.b;
    return rc;
  case OP_IS_NULL:
  case OP_IS_NOT_NULL:
    rc = ev(n->a, row, &l, out_err);
    if (rc != SL_OK) return rc;
    out->is_null = false;
    out->u.b = l.is_null == (n->op == OP_IS_NULL);
    return SL_OK;

  case OP_LOWER:
  case OP_UPPER:
    return ev_case_map(n, row, out, out_err);
  case OP_LENGTH_S:
  case OP_LENGTH_B:
    rc = ev(n->a, row, &l, out_err);
    if (rc != SL_OK || l.is_null) {
      out->is_null = true;
      return rc;
    }
    v = l.u.s.len;
    if (n->op == OP_LENGTH_S) {
      /* Count the bytes that start a UTF-8 sequence. */
      for (uint32_t i = 0; i < l.u.s.len; i++)
        if ((l.u.s.ptr[i] & 0xC0) == 0x80) v--;
    }
    out->is_null = false;
    out->u.i = v;
    return SL_OK;
  case OP_COALESCE:
    for (uint32_t i = 0; i < n->n_args; i++) {
      rc = ev(n->args[i], row, out, out_err);
      if (rc != SL_OK || !out->is_null) return rc;
    }
    break;
  }
  out->is_null = true;
  return SL_OK;
int_result:
  if (n->lim != 0 && (v >= n->lim || v <= -n->lim))
    return rt_overflow(n, out_err);
  out->is_null = false;
  out->u.i = v;
  return SL_OK;
bool_true:
  out->is_null = false;
  out->u.b = true;
  return SL_OK;
bool_false:
  out->is_null = false;
  out->u.b = false;
  return SL_OK;
}

int sl__expr_eval(const sl_expr_t *e, const sl_row_t *row, sl_value_t *out,
                  sl_error_t **out_err) {
  SL_ASSERT(row->schema == e->schema ||
            sl_schema_equal(row->schema, e->schema));
  /* Zeroed so that the bytes of u the result type does not use are 0. */
  sl_value_t v;
  memset(&v, 0, sizeof(v));
  int rc = ev(e->root, row, &v, out_err);
  if (SL_UNLIKELY(rc != SL_OK)) return rc;
  if (v.is_null) memset(&v.u, 0, sizeof(v.u));
  v.type = e->type.id;
  v.scale = e->type.id == SL_TYPE_DECIMAL ? e->type.scale : 0;
  *out = v;
  return SL_OK;
}

int sl__expr_eval_bool(const sl_expr_t *e, const sl_row_t *row,
                       bool *out_keep, sl_error_t **out_err) {
  SL_ASSERT(e->type.id == SL_TYPE_BOOL);
  SL_ASSERT(row->schema == e->schema ||
            sl_schema_equal(row->schema, e->schema));
  sl_value_t v;
  int rc = ev(e->root, row, &v, out_err);
  if (SL_UNLIKELY(rc != SL_OK)) return rc;
  *out_keep = !v.is_null && v.u.b;
  return SL_OK;
}
