/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The expression compiler behind `filter` and `project`.  A recursive-
 * descent parser reads tokens from expr_lex.c and builds a tree of typed
 * nodes directly; type rules are applied as each node is made, so an
 * operator node always knows the representation of its operands
 * (conversions such as int to float or a decimal rescale are explicit
 * nodes) and evaluation (expr_eval.c) is a switch per node with no type
 * dispatch, no lookups and no allocation.  The language and its type rules
 * are in docs/expressions.md.  See README.md.
 */
#include <stdio.h>

#include "ops/expr_int.h"

static const int64_t pow10_tab[19] = {1LL,
                                      10LL,
                                      100LL,
                                      1000LL,
                                      10000LL,
                                      100000LL,
                                      1000000LL,
                                      10000000LL,
                                      100000000LL,
                                      1000000000LL,
                                      10000000000LL,
                                      100000000000LL,
                                      1000000000000LL,
                                      10000000000000LL,
                                      100000000000000LL,
                                      1000000000000000LL,
                                      10000000000000000LL,
                                      100000000000000000LL,
                                      1000000000000000000LL};

static enum cls cls_of(uint8_t id) {
  switch (id) {
  case SL_TYPE_BOOL:
    return C_BOOL;
  case SL_TYPE_INT32:
  case SL_TYPE_INT64:
    return C_INT;
  case SL_TYPE_FLOAT64:
    return C_FLOAT;
  case SL_TYPE_DECIMAL:
    return C_DEC;
  case SL_TYPE_STRING:
  case SL_TYPE_BYTES:
    return C_STR;
  case SL_TYPE_TIMESTAMP:
    return C_TS;
  default:
    return C_NULL;
  }
}

static bool is_numeric(enum cls c) {
  return c == C_INT || c == C_FLOAT || c == C_DEC;
}

static sl_type_t mk_type(uint8_t id, bool nullable) {
  sl_type_t t = {id, 0, 0, nullable};
  return t;
}

static sl_type_t mk_decimal(int precision, int scale, bool nullable) {
  sl_type_t t = {SL_TYPE_DECIMAL, (uint8_t)precision, (uint8_t)scale,
                 nullable};
  return t;
}

static const char *type_str(sl_type_t t, char *buf, size_t size) {
  if (t.id == TYPE_NULL) return "null";
  return sl_type_format(t, buf, size);
}

static bool same_type(sl_type_t a, sl_type_t b) {
  return a.id == b.id && (a.id != SL_TYPE_DECIMAL ||
                          (a.precision == b.precision && a.scale == b.scale));
}

/* ------------------------------------------------------------------------
 * Nodes
 */

static void node_free(node_t *n) {
  if (n == NULL) return;
  node_free(n->a);
  node_free(n->b);
  for (uint32_t i = 0; i < n->n_args; i++) node_free(n->args[i]);
  sl_free(n->args);
  sl_free(n->str);
  sl_bytes_close(&n->scratch);
  sl_free(n);
}

/* ------------------------------------------------------------------------
 * Node construction with type rules
 */

static node_t *new_node(parser_t *p, enum op op, uint32_t col,
                        uint32_t start_col) {
  node_t *n = sl_calloc(1, sizeof(*n));
  if (n == NULL) {
    fail_nomem(p);
    return NULL;
  }
  n->op = (uint8_t)op;
  n->col = col;
  n->start_col = start_col;
  n->depth = 1;
  sl_bytes_init(&n->scratch);
  return n;
}

/* Record the depth of n from its operands; fails when the tree gets too
 * deep for the recursive evaluator. */
static bool set_depth(parser_t *p, node_t *n) {
  uint32_t d = 0;
  if (n->a && n->a->depth > d) d = n->a->depth;
  if (n->b && n->b->depth > d) d = n->b->depth;
  for (uint32_t i = 0; i < n->n_args; i++)
    if (n->args[i]->depth > d) d = n->args[i]->depth;
  if (d + 1 > EXPR_MAX_TREE_DEPTH) {
    fail(p, SL_EPARSE, n->start_col, "expression is too deeply nested");
    return false;
  }
  n->depth = (uint16_t)(d + 1);
  return true;
}

/* A node with operands a (and b); on failure frees them. */
static node_t *new_op(parser_t *p, enum op op, uint32_t col, node_t *a,
                      node_t *b, sl_type_t type) {
  node_t *n = new_node(p, op, col, a->start_col);
  if (n == NULL) {
    node_free(a);
    node_free(b);
    return NULL;
  }
  n->a = a;
  n->b = b;
  n->type = type;
  if (!set_depth(p, n)) {
    node_free(n);
    return NULL;
  }
  return n;
}

/* A constant null of type t (TYPE_NULL while nothing implies a type). */
static node_t *null_const(parser_t *p, sl_type_t t, uint32_t col,
                          uint32_t start_col) {
  node_t *n = new_node(p, OP_CONST, col, start_col);
  if (n == NULL) return NULL;
  n->type = t;
  n->type.nullable = true;
  n->cval.is_null = true;
  return n;
}

/* Replace operands by a null constant; used when an operand is the null
 * literal, so that the result is null whatever the row. */
static node_t *fold_null(parser_t *p, sl_type_t t, node_t *a, node_t *b) {
  uint32_t start = a->start_col, col = a->col;
  node_free(a);
  node_free(b);
  return null_const(p, t, col, start);
}

/* Digits an integer operand needs as a decimal. */
static int int_precision(const node_t *x) {
  if (x->op == OP_CONST && !x->cval.is_null) {
    uint64_t v = x->cval.u.i < 0 ? 0 - (uint64_t)x->cval.u.i
                                 : (uint64_t)x->cval.u.i;
    int d = 1;
    while (v >= 10) {
      v /= 10;
      d++;
    }
    return d > SL_DECIMAL_MAX_PRECISION ? SL_DECIMAL_MAX_PRECISION : d;
  }
  return x->type.id == SL_TYPE_INT32 ? 10 : SL_DECIMAL_MAX_PRECISION;
}

static int dec_precision(const node_t *x) {
  return x->type.id == SL_TYPE_DECIMAL ? x->type.precision : int_precision(x);
}
static int dec_scale(const node_t *x) {
  return x->type.id == SL_TYPE_DECIMAL ? x->type.scale : 0;
}

/*
 * Convert x to the representation of type `to` (same class, or a numeric
 * widening: int to float, decimal to float, int or decimal to a decimal of
 * larger scale).  sym and col name the operator for runtime messages.
 * Constants are converted here; on failure x is freed.
 */
static node_t *convert(parser_t *p, node_t *x, sl_type_t to, const char *sym,
                       uint32_t col) {
  if (x->type.id == TYPE_NULL) {
    x->type = to;
    x->type.nullable = true;
    return x;
  }
  enum cls from = cls_of(x->type.id);
  enum op op;
  int64_t mul = 1;
  double fdiv = 1;
  if (to.id == SL_TYPE_FLOAT64 && from == C_INT) {
    op = OP_I2F;
  } else if (to.id == SL_TYPE_FLOAT64 && from == C_DEC) {
    op = OP_D2F;
    fdiv = (double)pow10_tab[x->type.scale];
  } else if (to.id == SL_TYPE_DECIMAL && (from == C_INT || from == C_DEC) &&
             to.scale > dec_scale(x)) {
    op = OP_RESCALE;
    mul = pow10_tab[to.scale - dec_scale(x)];
  } else {
    /* Same representation: int32 as int64, int as decimal of scale 0. */
    return x;
  }
  if (x->op == OP_CONST) {
    sl_value_t *v = &x->cval;
    bool ok = true;
    if (op == OP_I2F)
      v->u.f = (double)v->u.i;
    else if (op == OP_D2F)
      v->u.f = (double)v->u.i / fdiv;
    else if (!v->is_null) {
      int64_t scaled;
      ok = !__builtin_mul_overflow(v->u.i, mul, &scaled);
      if (ok) v->u.i = scaled;
    }
    if (ok) {
      bool nullable = x->type.nullable;
      x->type = to;
      x->type.nullable = nullable;
      return x;
    }
    /* A constant that overflows when rescaled is left to fail at runtime,
     * where only rows that reach it report the overflow. */
  }
  sl_type_t t = to;
  t.nullable = x->type.nullable;
  node_t *n = new_op(p, op, col, x, NULL, t);
  if (n == NULL) return NULL;
  n->sym = sym;
  n->ovf = "decimal";
  n->mul[0] = mul;
  n->fdiv = fdiv;
  return n;
}

static void fail_operands(parser_t *p, uint32_t col, const char *sym,
                          sl_type_t a, sl_type_t b) {
  char ba[32], bb[32];
  if (same_type(a, b))
    fail(p, SL_ETYPE, col, "operator '%s' does not apply to %s", sym,
         type_str(a, ba, sizeof(ba)));
  else
    fail(p, SL_ETYPE, col, "operator '%s' does not apply to %s and %s", sym,
         type_str(a, ba, sizeof(ba)), type_str(b, bb, sizeof(bb)));
}

/*
 * Arithmetic: + - * / %.  The rules (docs/expressions.md, "Types"):
 * integers give int64; a float64 operand gives float64; decimals give a
 * decimal for + - * and float64 for /; % takes integers only; timestamps
 * take ts - ts, ts + int, int + ts and ts - int.
 */
static node_t *mk_arith(parser_t *p, enum tok_kind k, uint32_t col, node_t *a,
                        node_t *b) {
  const char *sym = k == TK_PLUS    ? "+"
                    : k == TK_MINUS ? "-"
                    : k == TK_STAR  ? "*"
                    : k == TK_SLASH ? "/"
                                    : "%";
  bool nullable = a->type.nullable || b->type.nullable;
  if (a->type.id == TYPE_NULL && b->type.id == TYPE_NULL)
    return fold_null(p, mk_type(TYPE_NULL, true), a, b);
  /* A null literal takes the type of the other side, except that next to
   * a timestamp it stands for the int64 of `ts + n` or `ts - n` (and for
   * the timestamp of `null - ts`). */
  sl_type_t ta = a->type, tb = b->type;
  if (a->type.id == TYPE_NULL)
    ta = (b->type.id == SL_TYPE_TIMESTAMP && k != TK_MINUS)
             ? mk_type(SL_TYPE_INT64, true)
             : b->type;
  if (b->type.id == TYPE_NULL)
    tb = a->type.id == SL_TYPE_TIMESTAMP ? mk_type(SL_TYPE_INT64, true)
                                         : a->type;
  enum cls ca = cls_of(ta.id), cb = cls_of(tb.id);
  sl_type_t rt;
  enum op op;
  const char *ovf = "integer";
  int64_t lim = 0;
  if (ca == C_TS || cb == C_TS) {
    if (k == TK_MINUS && ca == C_TS && cb == C_TS) {
      rt = mk_type(SL_TYPE_INT64, nullable);
    } else if ((k == TK_PLUS && ((ca == C_TS && cb == C_INT) ||
                                 (ca == C_INT && cb == C_TS))) ||
               (k == TK_MINUS && ca == C_TS && cb == C_INT)) {
      rt = mk_type(SL_TYPE_TIMESTAMP, nullable);
      ovf = "timestamp";
    } else {
      goto bad;
    }
    op = k == TK_PLUS ? OP_ADD_I : OP_SUB_I;
  } else if (!is_numeric(ca) || !is_numeric(cb)) {
    goto bad;
  } else if (k == TK_PERCENT) {
    if (ca != C_INT || cb != C_INT) goto bad;
    rt = mk_type(SL_TYPE_INT64, nullable);
    op = OP_MOD_I;
  } else if (ca == C_INT && cb == C_INT) {
    rt = mk_type(SL_TYPE_INT64, nullable);
    op = k == TK_PLUS    ? OP_ADD_I
         : k == TK_MINUS ? OP_SUB_I
         : k == TK_STAR  ? OP_MUL_I
                         : OP_DIV_I;
  } else if (ca == C_FLOAT || cb == C_FLOAT || k == TK_SLASH) {
    rt = mk_type(SL_TYPE_FLOAT64, nullable);
    op = k == TK_PLUS    ? OP_ADD_F
         : k == TK_MINUS ? OP_SUB_F
         : k == TK_STAR  ? OP_MUL_F
                         : OP_DIV_F;
  } else {
    /* Decimal + - * (the other side a decimal or an integer). */
    int pa = a->type.id == TYPE_NULL ? tb.precision : dec_precision(a);
    int sa = a->type.id == TYPE_NULL ? tb.scale : dec_scale(a);
    int pb = b->type.id == TYPE_NULL ? ta.precision : dec_precision(b);
    int sb = b->type.id == TYPE_NULL ? ta.scale : dec_scale(b);
    int prec, scale;
    if (k == TK_STAR) {
      scale = sa + sb;
      prec = pa + pb;
      op = OP_MUL_I;
    } else {
      scale = SL_MAX(sa, sb);
      prec = SL_MAX(pa - sa, pb - sb) + 1 + scale;
      op = k == TK_PLUS ? OP_ADD_I : OP_SUB_I;
    }
    if (scale > SL_DECIMAL_MAX_PRECISION) {
      fail(p, SL_ETYPE, col,
           "result of '%s' needs decimal scale %d; the limit is %d", sym,
           scale, SL_DECIMAL_MAX_PRECISION);
      goto fail;
    }
    if (prec > SL_DECIMAL_MAX_PRECISION) prec = SL_DECIMAL_MAX_PRECISION;
    if (prec < scale) prec = scale;
    if (prec < 1) prec = 1;
    rt = mk_decimal(prec, scale, nullable);
    ovf = "decimal";
    lim = pow10_tab[prec];
  }
  if (a->type.id == TYPE_NULL || b->type.id == TYPE_NULL)
    return fold_null(p, rt, a, b);
  /* Bring both operands to the representation the operator works on. */
  if (rt.id == SL_TYPE_FLOAT64) {
    sl_type_t f = mk_type(SL_TYPE_FLOAT64, false);
    a = convert(p, a, f, sym, col);
    b = a ? convert(p, b, f, sym, col) : b;
  } else if (rt.id == SL_TYPE_DECIMAL && op != OP_MUL_I) {
    a = convert(p, a, mk_decimal(18, rt.scale, false), sym, col);
    b = a ? convert(p, b, mk_decimal(18, rt.scale, false), sym, col) : b;
  }
  if (a == NULL || b == NULL) {
    node_free(a);
    node_free(b);
    return NULL;
  }
  node_t *n = new_op(p, op, col, a, b, rt);
  if (n == NULL) return NULL;
  n->sym = sym;
  n->ovf = ovf;
  n->lim = lim;
  return n;
bad:
  fail_operands(p, col, sym, ta, tb);
fail:
  node_free(a);
  node_free(b);
  return NULL;
}

static node_t *mk_neg(parser_t *p, uint32_t col, node_t *a) {
  enum cls c = cls_of(a->type.id);
  if (a->type.id == TYPE_NULL) {
    a->start_col = col;
    return a;
  }
  if (!is_numeric(c)) {
    fail_operands(p, col, "-", a->type, a->type);
    node_free(a);
    return NULL;
  }
  sl_type_t t = a->type;
  if (c == C_INT) t = mk_type(SL_TYPE_INT64, a->type.nullable);
  node_t *n = new_op(p, c == C_FLOAT ? OP_NEG_F : OP_NEG_I, col, a, NULL, t);
  if (n == NULL) return NULL;
  n->start_col = col;
  n->sym = "-";
  n->ovf = c == C_DEC ? "decimal" : "integer";
  return n;
}

/*
 * A field compared with a constant is the most common filter; such a
 * comparison reads the field itself instead of evaluating two operands.
 * The operands stay in place (a the field, b the constant) for their
 * metadata, swapped and with the comparison mirrored when the constant was
 * written first.
 */
static void specialize_cmp(node_t *n) {
  node_t *f = n->a, *k = n->b;
  bool is_swapped = f->op == OP_CONST;
  if (is_swapped) {
    node_t *t = f;
    f = k;
    k = t;
  }
  if (k->op != OP_CONST || k->cval.is_null) return;
  enum op op;
  if (n->op == OP_CMP_I && f->op == OP_FIELD_I64)
    op = OP_CMP_I_FK;
  else if (n->op == OP_CMP_F && f->op == OP_FIELD_F64)
    op = OP_CMP_F_FK;
  else if (n->op == OP_CMP_D && f->op == OP_FIELD_I64)
    op = OP_CMP_D_FK;
  else if (n->op == OP_CMP_S && f->op == OP_FIELD_STR)
    op = OP_CMP_S_FK;
  else
    return;
  if (is_swapped) {
    static const uint8_t mirror[] = {[CMP_EQ] = CMP_EQ, [CMP_NE] = CMP_NE,
                                     [CMP_LT] = CMP_GT, [CMP_LE] = CMP_GE,
                                     [CMP_GT] = CMP_LT, [CMP_GE] = CMP_LE};
    int64_t m = n->mul[0];
    n->a = f;
    n->b = k;
    n->cmp = mirror[n->cmp];
    n->mul[0] = n->mul[1];
    n->mul[1] = m;
  }
  n->op = (uint8_t)op;
  n->field = f->field;
}

static node_t *mk_cmp(parser_t *p, enum tok_kind k, uint32_t col,
                      const char *sym, node_t *a, node_t *b) {
  bool nullable = a->type.nullable || b->type.nullable;
  sl_type_t rt = mk_type(SL_TYPE_BOOL, nullable);
  if (a->type.id == TYPE_NULL && b->type.id == TYPE_NULL)
    return fold_null(p, rt, a, b);
  sl_type_t ta = a->type.id == TYPE_NULL ? b->type : a->type;
  sl_type_t tb = b->type.id == TYPE_NULL ? a->type : b->type;
  enum cls ca = cls_of(ta.id), cb = cls_of(tb.id);
  enum op op;
  if (is_numeric(ca) && is_numeric(cb)) {
    if (ca == C_FLOAT || cb == C_FLOAT)
      op = OP_CMP_F;
    else if (ca == C_DEC || cb == C_DEC)
      op = OP_CMP_D;
    else
      op = OP_CMP_I;
  } else if (ca == C_STR && cb == C_STR) {
    op = OP_CMP_S;
  } else if (ca == C_TS && cb == C_TS) {
    op = OP_CMP_I;
  } else if (ca == C_BOOL && cb == C_BOOL) {
    if (k != TK_EQ && k != TK_NE) {
      fail_operands(p, col, sym, ta, tb);
      goto fail;
    }
    op = OP_CMP_B;
  } else {
    char ba[32], bb[32];
    fail(p, SL_ETYPE, col, "cannot compare %s with %s",
         type_str(ta, ba, sizeof(ba)), type_str(tb, bb, sizeof(bb)));
    goto fail;
  }
  if (a->type.id == TYPE_NULL || b->type.id == TYPE_NULL)
    return fold_null(p, rt, a, b);
  int64_t mul_a = 1, mul_b = 1;
  if (op == OP_CMP_F) {
    sl_type_t f = mk_type(SL_TYPE_FLOAT64, false);
    a = convert(p, a, f, sym, col);
    b = a ? convert(p, b, f, sym, col) : b;
    if (a == NULL || b == NULL) goto fail;
  } else if (op == OP_CMP_D) {
    int sa = dec_scale(a), sb = dec_scale(b);
    int s = SL_MAX(sa, sb);
    mul_a = pow10_tab[s - sa];
    mul_b = pow10_tab[s - sb];
  }
  node_t *n = new_op(p, op, col, a, b, rt);
  if (n == NULL) return NULL;
  n->sym = sym;
  n->mul[0] = mul_a;
  n->mul[1] = mul_b;
  n->cmp = (uint8_t)(k == TK_EQ   ? CMP_EQ
                     : k == TK_NE ? CMP_NE
                     : k == TK_LT ? CMP_LT
                     : k == TK_LE ? CMP_LE
                     : k == TK_GT ? CMP_GT
                                  : CMP_GE);
  specialize_cmp(n);
  return n;
fail:
  node_free(a);
  node_free(b);
  return NULL;
}

static bool is_boolish(const node_t *x) {
  return x->type.id == SL_TYPE_BOOL || x->type.id == TYPE_NULL;
}

static node_t *mk_logic(parser_t *p, enum op op, uint32_t col, node_t *a,
                        node_t *b) {
  const char *sym = op == OP_AND ? "and" : "or";
  if (!is_boolish(a) || !is_boolish(b)) {
    sl_type_t ta = a->type.id == TYPE_NULL ? b->type : a->type;
    sl_type_t tb = b->type.id == TYPE_NULL ? a->type : b->type;
    fail_operands(p, col, sym, ta, tb);
    node_free(a);
    node_free(b);
    return NULL;
  }
  if (a->type.id == TYPE_NULL) a->type.id = SL_TYPE_BOOL;
  if (b->type.id == TYPE_NULL) b->type.id = SL_TYPE_BOOL;
  return new_op(p, op, col, a, b,
                mk_type(SL_TYPE_BOOL, a->type.nullable || b->type.nullable));
}

static node_t *mk_not(parser_t *p, uint32_t col, node_t *a) {
  if (!is_boolish(a)) {
    fail_operands(p, col, "not", a->type, a->type);
    node_free(a);
    return NULL;
  }
  if (a->type.id == TYPE_NULL) a->type.id = SL_TYPE_BOOL;
  node_t *n = new_op(p, OP_NOT, col, a, NULL, a->type);
  if (n) n->start_col = col;
  return n;
}

/* ------------------------------------------------------------------------
 * Functions
 */

static void fail_func_arg(parser_t *p, const char *name, const node_t *x) {
  char buf[32];
  fail(p, SL_ETYPE, x->start_col, "function '%s' does not apply to %s", name,
       type_str(x->type, buf, sizeof(buf)));
}

/*
 * The type coalesce() returns: all arguments of one family (numbers, text,
 * bool, timestamp), numbers widened as arithmetic would.  Returns false
 * after failing on the first argument that does not fit.
 */
static bool coalesce_type(parser_t *p, node_t **args, uint32_t n,
                          sl_type_t *out_type) {
  sl_type_t t = mk_type(TYPE_NULL, true);
  const node_t *first = NULL;
  int int_digits = 0, scale = 0;
  bool nullable = true;
  for (uint32_t i = 0; i < n; i++) {
    const node_t *x = args[i];
    if (!x->type.nullable) nullable = false;
    if (x->type.id == TYPE_NULL) continue;
    enum cls c = cls_of(x->type.id);
    if (first == NULL) {
      first = x;
      t = x->type;
    } else {
      enum cls ct = cls_of(t.id);
      bool ok;
      if (is_numeric(c) && is_numeric(ct)) {
        ok = true;
        if (c == C_FLOAT || ct == C_FLOAT)
          t = mk_type(SL_TYPE_FLOAT64, false);
        else if (c == C_DEC || ct == C_DEC)
          t.id = SL_TYPE_DECIMAL;
        else if (x->type.id != t.id)
          t = mk_type(SL_TYPE_INT64, false);
      } else {
        ok = x->type.id == t.id;
      }
      if (!ok) {
        char ba[32], bb[32];
        fail(p, SL_ETYPE, x->start_col,
             "coalesce arguments have different types: %s and %s",
             type_str(first->type, ba, sizeof(ba)),
             type_str(x->type, bb, sizeof(bb)));
        return false;
      }
    }
    if (c == C_INT || c == C_DEC) {
      int s = dec_scale(x);
      int_digits = SL_MAX(int_digits, dec_precision(x) - s);
      scale = SL_MAX(scale, s);
    }
  }
  if (t.id == SL_TYPE_DECIMAL) {
    int prec = SL_MIN(int_digits + scale, SL_DECIMAL_MAX_PRECISION);
    t = mk_decimal(SL_MAX(prec, 1), scale, false);
  }
  t.nullable = nullable;
  *out_type = t;
  return true;
}

static node_t *mk_call(parser_t *p, const char *name, uint32_t col,
                       node_t **args, uint32_t n_args) {
  node_t *n = NULL;
  bool is_coalesce = strcmp(name, "coalesce") == 0;
  if (is_coalesce ? n_args < 2 : n_args != 1) {
    if (is_coalesce)
      fail(p, SL_ETYPE, col,
           "function 'coalesce' takes at least 2 arguments, got %u", n_args);
    else
      fail(p, SL_ETYPE, col, "function '%s' takes 1 argument, got %u", name,
           n_args);
    goto fail;
  }
  if (is_coalesce) {
    sl_type_t t;
    if (!coalesce_type(p, args, n_args, &t)) goto fail;
    for (uint32_t i = 0; i < n_args; i++) {
      args[i] = convert(p, args[i], t, "coalesce", col);
      if (args[i] == NULL) goto fail;
    }
    n = new_node(p, OP_COALESCE, col, col);
    if (n == NULL) goto fail;
    n->args = args;
    n->n_args = n_args;
    n->type = t;
    args = NULL;
    n_args = 0;
    if (!set_depth(p, n)) goto fail;
    return n;
  }
  node_t *x = args[0];
  sl_type_t t = x->type;
  enum cls c = cls_of(t.id);
  enum op op;
  if (strcmp(name, "abs") == 0) {
    if (t.id == TYPE_NULL) goto null_result;
    if (!is_numeric(c)) goto bad_arg;
    op = c == C_FLOAT ? OP_ABS_F : OP_ABS_I;
    if (c == C_INT) t = mk_type(SL_TYPE_INT64, x->type.nullable);
  } else if (strcmp(name, "lower") == 0 || strcmp(name, "upper") == 0) {
    t = mk_type(SL_TYPE_STRING, x->type.nullable);
    if (x->type.id == TYPE_NULL) goto null_result;
    if (x->type.id != SL_TYPE_STRING) goto bad_arg;
    op = name[0] == 'l' ? OP_LOWER : OP_UPPER;
  } else {
    SL_ASSERT(strcmp(name, "length") == 0);
    t = mk_type(SL_TYPE_INT64, x->type.nullable);
    if (x->type.id == TYPE_NULL) goto null_result;
    if (c != C_STR) goto bad_arg;
    op = x->type.id == SL_TYPE_STRING ? OP_LENGTH_S : OP_LENGTH_B;
  }
  sl_free(args);
  n = new_op(p, op, col, x, NULL, t);
  if (n == NULL) return NULL;
  n->start_col = col;
  n->sym = name;
  n->ovf = c == C_DEC ? "decimal" : "integer";
  return n;
null_result:
  n = null_const(p, t, col, col);
  goto fail;
bad_arg:
  fail_func_arg(p, name, x);
fail:
  for (uint32_t i = 0; i < n_args; i++) node_free(args[i]);
  sl_free(args);
  if (p->rc != SL_OK) {
    node_free(n);
    return NULL;
  }
  return n;
}

/* ------------------------------------------------------------------------
 * Parser
 *
 *   or_expr   := and_expr { OR and_expr }
 *   and_expr  := not_expr { AND not_expr }
 *   not_expr  := NOT not_expr | is_expr
 *   is_expr   := cmp_expr { IS [NOT] NULL }
 *   cmp_expr  := add_expr [ cmp_op add_expr ]        (no chaining)
 *   add_expr  := mul_expr { (+|-) mul_expr }
 *   mul_expr  := unary { (*|/|%) unary }
 *   unary     := - unary | primary
 *   primary   := literal | field | name ( [or_expr {, or_expr}] )
 *              | ( or_expr )
 */

static node_t *parse_or(parser_t *p);

static bool enter(parser_t *p) {
  if (++p->nesting > EXPR_MAX_NESTING) {
    fail(p, SL_EPARSE, p->tok.col, "expression is too deeply nested");
    return false;
  }
  return true;
}

static node_t *field_ref(parser_t *p, const char *name, size_t len,
                         uint32_t col) {
  uint32_t nf = sl_schema_n_fields(p->schema);
  for (uint32_t i = 0; i < nf; i++) {
    const sl_field_t *f = sl_schema_field(p->schema, i);
    if (strlen(f->name) == len && memcmp(f->name, name, len) == 0) {
      enum op op;
      switch (f->type.id) {
      case SL_TYPE_FLOAT64:
        op = OP_FIELD_F64;
        break;
      case SL_TYPE_BOOL:
        op = OP_FIELD_BOOL;
        break;
      case SL_TYPE_STRING:
      case SL_TYPE_BYTES:
        op = OP_FIELD_STR;
        break;
      default:
        op = OP_FIELD_I64;
        break;
      }
      node_t *n = new_node(p, op, col, col);
      if (n == NULL) return NULL;
      n->field = i;
      n->type = f->type;
      return n;
    }
  }
  if (len > 64)
    fail(p, SL_ETYPE, col, "unknown field '%.*s...'", 61, name);
  else
    fail(p, SL_ETYPE, col, "unknown field '%.*s'", (int)len, name);
  return NULL;
}

static node_t *parse_call(parser_t *p, const char *s, size_t len,
                          uint32_t col) {
  static const char *names[] = {"abs", "lower", "upper", "length",
                                "coalesce"};
  const char *name = NULL;
  for (size_t i = 0; i < SL_ARRAY_LEN(names); i++)
    if (word_is(s, len, names[i])) name = names[i];
  if (name == NULL) {
    if (len > 64)
      fail(p, SL_ETYPE, col, "unknown function '%.*s...'", 61, s);
    else
      fail(p, SL_ETYPE, col, "unknown function '%.*s'", (int)len, s);
    return NULL;
  }
  if (!enter(p)) return NULL;
  lex(p); /* ( */
  node_t **args = NULL;
  uint32_t n_args = 0;
  if (p->tok.kind != TK_RPAREN) {
    for (;;) {
      if (n_args == EXPR_MAX_ARGS) {
        fail(p, SL_EPARSE, p->tok.col, "too many arguments");
        goto fail;
      }
      node_t *x = parse_or(p);
      if (x == NULL) goto fail;
      if (n_args % 4 == 0) {
        node_t **na = sl_realloc(args, (n_args + 4) * sizeof(*na));
        if (na == NULL) {
          node_free(x);
          fail_nomem(p);
          goto fail;
        }
        args = na;
      }
      args[n_args++] = x;
      if (p->tok.kind != TK_COMMA) break;
      lex(p);
    }
  }
  if (p->tok.kind != TK_RPAREN) {
    fail(p, SL_EPARSE, p->tok.col, "expected ')'");
    goto fail;
  }
  lex(p);
  p->nesting--;
  return mk_call(p, name, col, args, n_args);
fail:
  for (uint32_t i = 0; i < n_args; i++) node_free(args[i]);
  sl_free(args);
  return NULL;
}

static node_t *parse_primary(parser_t *p) {
  tok_t t = p->tok;
  node_t *n;
  char buf[48];
  switch (t.kind) {
  case TK_INT:
    if (t.ival > (uint64_t)INT64_MAX) {
      fail(p, SL_EPARSE, t.col, "integer literal out of range");
      return NULL;
    }
    n = new_node(p, OP_CONST, t.col, t.col);
    if (n == NULL) return NULL;
    n->type = mk_type(SL_TYPE_INT64, false);
    n->cval.u.i = (int64_t)t.ival;
    lex(p);
    return n;
  case TK_FLOAT:
    n = new_node(p, OP_CONST, t.col, t.col);
    if (n == NULL) return NULL;
    n->type = mk_type(SL_TYPE_FLOAT64, false);
    n->cval.u.f = t.fval;
    lex(p);
    return n;
  case TK_STRING:
    n = new_node(p, OP_CONST, t.col, t.col);
    if (n == NULL) return NULL;
    n->type = mk_type(SL_TYPE_STRING, false);
    /* At least one byte, so that the slice never has a NULL pointer. */
    n->str = sl_malloc(p->sbuf.len + 1);
    if (n->str == NULL) {
      node_free(n);
      fail_nomem(p);
      return NULL;
    }
    if (p->sbuf.len) memcpy(n->str, p->sbuf.data, p->sbuf.len);
    n->cval.u.s.ptr = n->str;
    n->cval.u.s.len = (uint32_t)p->sbuf.len;
    lex(p);
    return n;
  case TK_TRUE:
  case TK_FALSE:
    n = new_node(p, OP_CONST, t.col, t.col);
    if (n == NULL) return NULL;
    n->type = mk_type(SL_TYPE_BOOL, false);
    n->cval.u.b = t.kind == TK_TRUE;
    lex(p);
    return n;
  case TK_NULL:
    n = null_const(p, mk_type(TYPE_NULL, true), t.col, t.col);
    if (n) lex(p);
    return n;
  case TK_QIDENT:
    n = field_ref(p, p->text + t.off, t.len, t.col);
    if (n == NULL) return NULL;
    n->start_col = t.col;
    lex(p);
    return n;
  case TK_IDENT:
    lex(p);
    if (p->tok.kind == TK_LPAREN)
      return parse_call(p, p->text + t.off, t.len, t.col);
    return field_ref(p, p->text + t.off, t.len, t.col);
  case TK_LPAREN:
    if (!enter(p)) return NULL;
    lex(p);
    n = parse_or(p);
    if (n == NULL) return NULL;
    if (p->tok.kind != TK_RPAREN) {
      fail(p, SL_EPARSE, p->tok.col, "expected ')'");
      node_free(n);
      return NULL;
    }
    p->nesting--;
    n->start_col = t.col;
    lex(p);
    return n;
  default:
    fail(p, SL_EPARSE, t.col, "expected an expression, got %s",
         tok_desc(p, buf, sizeof(buf)));
    return NULL;
  }
}

static node_t *parse_unary(parser_t *p) {
  if (p->tok.kind != TK_MINUS) return parse_primary(p);
  uint32_t col = p->tok.col;
  lex(p);
  /* Negative literals are constants, which also admits INT64_MIN. */
  if (p->tok.kind == TK_INT && p->tok.ival <= (UINT64_C(1) << 63)) {
    node_t *n = new_node(p, OP_CONST, col, col);
    if (n == NULL) return NULL;
    n->type = mk_type(SL_TYPE_INT64, false);
    n->cval.u.i = (int64_t)(0 - p->tok.ival);
    lex(p);
    return n;
  }
  if (p->tok.kind == TK_FLOAT) {
    node_t *n = new_node(p, OP_CONST, col, col);
    if (n == NULL) return NULL;
    n->type = mk_type(SL_TYPE_FLOAT64, false);
    n->cval.u.f = -p->tok.fval;
    lex(p);
    return n;
  }
  if (!enter(p)) return NULL;
  node_t *a = parse_unary(p);
  if (a == NULL) return NULL;
  p->nesting--;
  return mk_neg(p, col, a);
}

static node_t *parse_mul(parser_t *p) {
  node_t *a = parse_unary(p);
  while (a && (p->tok.kind == TK_STAR || p->tok.kind == TK_SLASH ||
               p->tok.kind == TK_PERCENT)) {
    enum tok_kind k = p->tok.kind;
    uint32_t col = p->tok.col;
    lex(p);
    node_t *b = parse_unary(p);
    if (b == NULL) {
      node_free(a);
      return NULL;
    }
    a = mk_arith(p, k, col, a, b);
  }
  return a;
}

static node_t *parse_add(parser_t *p) {
  node_t *a = parse_mul(p);
  while (a && (p->tok.kind == TK_PLUS || p->tok.kind == TK_MINUS)) {
    enum tok_kind k = p->tok.kind;
    uint32_t col = p->tok.col;
    lex(p);
    node_t *b = parse_mul(p);
    if (b == NULL) {
      node_free(a);
      return NULL;
    }
    a = mk_arith(p, k, col, a, b);
  }
  return a;
}

static bool is_cmp_tok(enum tok_kind k) {
  return k == TK_EQ || k == TK_NE || k == TK_LT || k == TK_LE ||
         k == TK_GT || k == TK_GE;
}

static node_t *parse_cmp(parser_t *p) {
  node_t *a = parse_add(p);
  if (a == NULL || !is_cmp_tok(p->tok.kind)) return a;
  enum tok_kind k = p->tok.kind;
  uint32_t col = p->tok.col;
  char sym[4];
  snprintf(sym, sizeof(sym), "%.*s", (int)p->tok.len, p->text + p->tok.off);
  /* sym must outlive the parse: use the canonical spelling. */
  const char *csym = strcmp(sym, "=") == 0    ? "="
                     : strcmp(sym, "==") == 0 ? "=="
                     : strcmp(sym, "!=") == 0 ? "!="
                     : strcmp(sym, "<>") == 0 ? "<>"
                     : strcmp(sym, "<") == 0  ? "<"
                     : strcmp(sym, "<=") == 0 ? "<="
                     : strcmp(sym, ">") == 0  ? ">"
                                              : ">=";
  lex(p);
  node_t *b = parse_add(p);
  if (b == NULL) {
    node_free(a);
    return NULL;
  }
  if (is_cmp_tok(p->tok.kind)) {
    fail(p, SL_EPARSE, p->tok.col, "comparisons cannot be chained; use 'and'");
    node_free(a);
    node_free(b);
    return NULL;
  }
  return mk_cmp(p, k, col, csym, a, b);
}

static node_t *parse_is(parser_t *p) {
  node_t *a = parse_cmp(p);
  while (a && p->tok.kind == TK_IS) {
    uint32_t col = p->tok.col;
    lex(p);
    bool is_not = false;
    if (p->tok.kind == TK_NOT) {
      is_not = true;
      lex(p);
    }
    if (p->tok.kind != TK_NULL) {
      fail(p, SL_EPARSE, p->tok.col, "expected 'null' after '%s'",
           is_not ? "is not" : "is");
      node_free(a);
      return NULL;
    }
    lex(p);
    a = new_op(p, is_not ? OP_IS_NOT_NULL : OP_IS_NULL, col, a, NULL,
               mk_type(SL_TYPE_BOOL, false));
  }
  return a;
}

static node_t *parse_not(parser_t *p) {
  if (p->tok.kind != TK_NOT) return parse_is(p);
  uint32_t col = p->tok.col;
  if (!enter(p)) return NULL;
  lex(p);
  node_t *a = parse_not(p);
  if (a == NULL) return NULL;
  p->nesting--;
  return mk_not(p, col, a);
}

static node_t *parse_and(parser_t *p) {
  node_t *a = parse_not(p);
  while (a && p->tok.kind == TK_AND) {
    uint32_t col = p->tok.col;
    lex(p);
    node_t *b = parse_not(p);
    if (b == NULL) {
      node_free(a);
      return NULL;
    }
    a = mk_logic(p, OP_AND, col, a, b);
  }
  return a;
}

static node_t *parse_or(parser_t *p) {
  node_t *a = parse_and(p);
  while (a && p->tok.kind == TK_OR) {
    uint32_t col = p->tok.col;
    lex(p);
    node_t *b = parse_and(p);
    if (b == NULL) {
      node_free(a);
      return NULL;
    }
    a = mk_logic(p, OP_OR, col, a, b);
  }
  return a;
}

/* ------------------------------------------------------------------------
 * Compilation entry points
 */

static int compile(const char *text, const sl_schema_t *schema,
                   bool is_filter, sl_expr_t **out, uint32_t *out_err_column,
                   sl_error_t **out_err) {
  size_t text_len = strlen(text);
  if (text_len > SL_EXPR_MAX_TEXT) {
    if (out_err_column) *out_err_column = 0;
    return sl_error_set(out_err, SL_EINVAL,
                        "expression of %zu bytes is too long; the limit is %u",
                        text_len, SL_EXPR_MAX_TEXT);
  }
  parser_t p;
  memset(&p, 0, sizeof(p));
  p.text = text;
  p.col = 1;
  p.schema = schema;
  sl_bytes_init(&p.sbuf);
  sl_expr_t *e = NULL;
  lex(&p);
  node_t *root = parse_or(&p);
  if (root && p.tok.kind != TK_END) {
    char buf[48];
    fail(&p, SL_EPARSE, p.tok.col, "unexpected %s",
         tok_desc(&p, buf, sizeof(buf)));
  }
  if (p.rc == SL_OK) {
    if (root->type.id == TYPE_NULL) root->type.id = SL_TYPE_BOOL;
    if (is_filter && root->type.id != SL_TYPE_BOOL) {
      char buf[32];
      fail(&p, SL_ETYPE, root->start_col,
           "a filter condition must be bool, got %s",
           type_str(root->type, buf, sizeof(buf)));
    }
  }
  if (p.rc == SL_OK) {
    e = sl_calloc(1, sizeof(*e));
    if (e) e->text = sl_strdup(text);
    if (e == NULL || e->text == NULL) fail_nomem(&p);
  }
  sl_bytes_close(&p.sbuf);
  if (p.rc != SL_OK) {
    node_free(root);
    if (e) sl_free(e->text);
    sl_free(e);
    if (out_err_column) *out_err_column = p.err_col;
    if (p.rc == SL_ENOMEM) return sl_error_set(out_err, p.rc, "%s", p.msg);
    return sl_error_set(out_err, p.rc, "column %u: %s", p.err_col, p.msg);
  }
  e->root = root;
  e->type = root->type;
  e->is_filter = is_filter;
  /* Schemas are shared immutable objects whose reference count is the one
   * mutable part; taking a reference through a const pointer is safe. */
  e->schema = sl_schema_ref((sl_schema_t *)schema);
  *out = e;
  return SL_OK;
}

int sl__expr_compile(const char *text, const sl_schema_t *schema,
                     sl_expr_t **out_expr, uint32_t *out_err_column,
                     sl_error_t **out_err) {
  return compile(text, schema, false, out_expr, out_err_column, out_err);
}

int sl__expr_compile_filter(const char *text, const sl_schema_t *schema,
                            sl_expr_t **out_expr, uint32_t *out_err_column,
                            sl_error_t **out_err) {
  return compile(text, schema, true, out_expr, out_err_column, out_err);
}

int sl__expr_clone(const sl_expr_t *e, sl_expr_t **out_expr) {
  /* The text compiled once, so compiling it again can fail only for lack
   * of memory. */
  int rc = compile(e->text, e->schema, e->is_filter, out_expr, NULL, NULL);
  return rc == SL_OK ? SL_OK : SL_ENOMEM;
}

sl_type_t sl__expr_type(const sl_expr_t *e) { return e->type; }

bool sl__expr_is_field(const sl_expr_t *e, uint32_t *out_field) {
  switch (e->root->op) {
  case OP_FIELD_I64:
  case OP_FIELD_F64:
  case OP_FIELD_BOOL:
  case OP_FIELD_STR:
    if (out_field) *out_field = e->root->field;
    return true;
  default:
    return false;
  }
}

const char *sl__expr_text(const sl_expr_t *e) { return e->text; }

void sl__expr_destroy(sl_expr_t *e) {
  if (e == NULL) return;
  node_free(e->root);
  sl_schema_unref(e->schema);
  sl_free(e->text);
  sl_free(e);
}

