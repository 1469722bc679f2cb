/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The keyed aggregate (count, sum, min, max, avg) as a keyed process
 * function.  Per key, one value state holds an accumulator row (binary row
 * format) with the key fields, the number of rows, and per aggregate a
 * count of non-null inputs and a running value.  Rows of kind -U and -D
 * retract; when a key's row count drops to zero its state is cleared and a
 * -D is emitted.  With emit updates, a row that leaves a key's output row as
 * it was emits nothing (as Flink suppresses unchanged +U rows).  avg of an
 * integer or decimal column keeps its sum in 128 bits (16 bytes in the
 * accumulator), so it cannot overflow where the average itself is fine.
 * See README.md.
 */
#include <math.h>
#include <stdio.h>

#include "ops/ops.h"
#include "sluice/sl_ops.h"
#include "sluice/sl_state.h"
#include "state/state.h"

typedef struct agg_col_s {
  sl_agg_fn_t fn;
  int in_field;       /* -1 for count() */
  uint8_t in_type;
  uint8_t out_type;   /* of its output field */
  double unit;        /* decimal input: 10^scale, its integer per unit */
  char *name;
} agg_col_t;

typedef struct agg_cfg_s {
  uint32_t *key_fields;
  uint32_t *acc_keys; /* 0..n_keys-1: the key fields inside acc_schema */
  uint32_t n_keys;
  /* Bit k (k < 64): key k is one 8-byte slot (bool, int32, int64,
   * float64, timestamp) that the output row takes as is. */
  uint64_t key_raw;
  agg_col_t *cols;
  uint32_t n_cols;
  sl_agg_emit_t emit;
  sl_schema_t *acc_schema; /* keys, n_rows, then (count, value) per col */
  sl_schema_t *out_schema;
  char *layout; /* of the accumulator state: checked on restore */
  char *uid;
} agg_cfg_t;

typedef struct agg_val_s {
  int64_t count;
  bool is_null;
  int64_t i;
  double f;
  sl_slice_t s;
  __int128 wide;      /* avg of an integer or decimal column: the sum */
  uint8_t wide_le[16]; /* wide as stored (little-endian), for set_val */
} agg_val_t;

/* An output value of one aggregate column, to compare old and new. */
typedef struct out_val_s {
  bool is_null;
  int64_t i;
  double f;
  sl_slice_t s;
} out_val_t;

typedef struct agg_local_s {
  sl_state_t *acc;
  sl_row_builder_t b;
  agg_val_t *vals;
  out_val_t *before; /* per column: the output before the current row */
  sl_ctx_t *ctx;
} agg_local_t;

void sl__agg_config_destroy(void *p) {
  agg_cfg_t *c = p;
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->n_cols; i++) sl_free(c->cols[i].name);
  sl_free(c->cols);
  sl_free(c->key_fields);
  sl_free(c->acc_keys);
  sl_schema_unref(c->acc_schema);
  sl_schema_unref(c->out_schema);
  sl_free(c->layout);
  sl_free(c->uid);
  sl_free(c);
}

static const char *fn_name(sl_agg_fn_t fn) {
  switch (fn) {
  case SL_AGG_COUNT: return "count";
  case SL_AGG_SUM: return "sum";
  case SL_AGG_MIN: return "min";
  case SL_AGG_MAX: return "max";
  case SL_AGG_AVG: return "avg";
  }
  return "?";
}

/* avg of an integer or decimal column: a 128-bit sum. */
static bool is_wide(const agg_col_t *c) {
  return c->fn == SL_AGG_AVG && c->in_type != SL_TYPE_FLOAT64;
}

/* The type a running value is kept in. */
static sl_type_t acc_type(const agg_col_t *c, sl_type_t in) {
  sl_type_t t = {SL_TYPE_INT64, 0, 0, true};
  switch (c->fn) {
  case SL_AGG_COUNT:
    break;
  case SL_AGG_AVG:
    if (in.id != SL_TYPE_FLOAT64) {
      t.id = SL_TYPE_BYTES; /* 16 bytes: the sum as a little-endian int128 */
      break;
    }
    /* fall through */
  case SL_AGG_SUM:
    if (in.id == SL_TYPE_FLOAT64) t.id = SL_TYPE_FLOAT64;
    else if (in.id == SL_TYPE_DECIMAL) t = (sl_type_t){SL_TYPE_DECIMAL, 18, in.scale, true};
    break;
  case SL_AGG_MIN:
  case SL_AGG_MAX:
    t = in;
    t.nullable = true;
    break;
  }
  return t;
}

static sl_type_t out_type(const agg_col_t *c, sl_type_t in) {
  if (c->fn == SL_AGG_COUNT) return (sl_type_t){SL_TYPE_INT64, 0, 0, false};
  if (c->fn == SL_AGG_AVG) return (sl_type_t){SL_TYPE_FLOAT64, 0, 0, true};
  return acc_type(c, in);
}

/*
 * The layout of the accumulator state, from what defines its bytes: the
 * key fields, then per aggregate its function, input field and the type
 * of its running value ("key region:string; sum(amount):int64,
 * count():int64").  Functions and fields are named because two layouts
 * with the same types (values reordered, count -> avg) still mean
 * different things.
 */
static char *acc_layout(const agg_cfg_t *c, const sl_agg_t *aggs) {
  sl_acc_t b;
  sl__acc_init(&b);
  sl__acc_printf(&b, "key ");
  for (uint32_t k = 0; k < c->n_keys; k++) {
    const sl_field_t *f = sl_schema_field(c->acc_schema, k);
    char tb[48];
    sl__acc_printf(&b, "%s%s:%s", k ? ", " : "", f->name,
                   sl_type_format(f->type, tb, sizeof(tb)));
  }
  sl__acc_printf(&b, ";");
  for (uint32_t i = 0; i < c->n_cols; i++) {
    const agg_col_t *col = &c->cols[i];
    const sl_field_t *v = sl_schema_field(c->acc_schema, c->n_keys + 2 + 2 * i);
    char tb[48];
    sl__acc_printf(&b, "%s %s(%s):%s", i ? "," : "", fn_name(col->fn),
                   col->in_field >= 0 ? aggs[i].field : "",
                   sl_type_format(v->type, tb, sizeof(tb)));
  }
  return sl__state_layout_finish(&b);
}

int sl__agg_config_create(const sl_schema_t *in, const uint32_t *key_fields,
                          uint32_t n_keys, const sl_agg_t *aggs,
                          uint32_t n_aggs, sl_agg_emit_t emit,
                          const char *uid, void **out_cfg,
                          sl_schema_t **out_schema, sl_error_t **out_err) {
  agg_cfg_t *c = sl_calloc(1, sizeof(*c));
  sl_field_t *acc_f = sl_calloc(n_keys + 1 + 2 * n_aggs, sizeof(sl_field_t));
  sl_field_t *out_f = sl_calloc(n_keys + n_aggs + 1, sizeof(sl_field_t));
  char **names = sl_calloc(2 * n_aggs + 1, sizeof(char *));
  int rc = SL_ENOMEM;
  if (!c || !acc_f || !out_f || !names) goto fail;
  c->emit = emit;
  c->uid = sl_strdup(uid ? uid : "aggregate");
  c->key_fields = sl_calloc(n_keys, sizeof(uint32_t));
  c->acc_keys = sl_calloc(n_keys, sizeof(uint32_t));
  c->cols = sl_calloc(n_aggs ? n_aggs : 1, sizeof(agg_col_t));
  if (!c->uid || !c->key_fields || !c->acc_keys || !c->cols) goto fail;
  c->n_keys = n_keys;
  memcpy(c->key_fields, key_fields, n_keys * sizeof(uint32_t));
  for (uint32_t k = 0; k < n_keys; k++) c->acc_keys[k] = k;
  for (uint32_t k = 0; k < n_keys; k++) {
    acc_f[k] = *sl_schema_field(in, key_fields[k]);
    out_f[k] = acc_f[k];
    uint8_t t = acc_f[k].type.id;
    if (k < 64 && (t == SL_TYPE_BOOL || t == SL_TYPE_INT32 ||
                   t == SL_TYPE_INT64 || t == SL_TYPE_FLOAT64 ||
                   t == SL_TYPE_TIMESTAMP))
      c->key_raw |= (uint64_t)1 << k;
  }
  acc_f[n_keys] = (sl_field_t){"$rows", {SL_TYPE_INT64, 0, 0, false}};
  for (uint32_t i = 0; i < n_aggs; i++) {
    agg_col_t *col = &c->cols[i];
    col->fn = aggs[i].fn;
    col->in_field = -1;
    if (aggs[i].fn < SL_AGG_COUNT || aggs[i].fn > SL_AGG_AVG) {
      rc = sl_error_set(out_err, SL_EINVAL, "aggregate %u: unknown function",
                        i + 1);
      goto fail;
    }
    if (aggs[i].name == NULL || aggs[i].name[0] == '\0') {
      rc = sl_error_set(out_err, SL_EINVAL, "aggregate %u has no name", i + 1);
      goto fail;
    }
    if ((col->name = sl_strdup(aggs[i].name)) == NULL) goto fail;
    c->n_cols++;
    sl_type_t in_t = {SL_TYPE_INT64, 0, 0, false};
    if (aggs[i].field) {
      int idx = sl_schema_index(in, aggs[i].field);
      if (idx < 0) {
        rc = sl_error_set(out_err, SL_EINVAL,
                          "%s(%s): no field '%s' in the input",
                          fn_name(aggs[i].fn), aggs[i].field, aggs[i].field);
        goto fail;
      }
      col->in_field = idx;
      in_t = sl_schema_field(in, (uint32_t)idx)->type;
    } else if (aggs[i].fn != SL_AGG_COUNT) {
      rc = sl_error_set(out_err, SL_EINVAL, "%s() needs a field",
                        fn_name(aggs[i].fn));
      goto fail;
    }
    col->in_type = in_t.id;
    col->unit = pow(10, in_t.scale);
    bool is_numeric = in_t.id == SL_TYPE_INT32 || in_t.id == SL_TYPE_INT64 ||
                      in_t.id == SL_TYPE_FLOAT64 || in_t.id == SL_TYPE_DECIMAL;
    if ((col->fn == SL_AGG_SUM || col->fn == SL_AGG_AVG) && !is_numeric) {
      char tb[32];
      rc = sl_error_set(out_err, SL_ETYPE, "%s(%s): %s is not numeric",
                        fn_name(col->fn), aggs[i].field,
                        sl_type_format(in_t, tb, sizeof(tb)));
      goto fail;
    }
    if ((col->fn == SL_AGG_MIN || col->fn == SL_AGG_MAX) &&
        in_t.id == SL_TYPE_BYTES) {
      rc = sl_error_set(out_err, SL_ETYPE, "%s(%s): bytes are not ordered",
                        fn_name(col->fn), aggs[i].field);
      goto fail;
    }
    char nb[64];
    snprintf(nb, sizeof(nb), "$n%u", i);
    names[2 * i] = sl_strdup(nb);
    snprintf(nb, sizeof(nb), "$v%u", i);
    names[2 * i + 1] = sl_strdup(nb);
    if (!names[2 * i] || !names[2 * i + 1]) goto fail;
    acc_f[n_keys + 1 + 2 * i] =
        (sl_field_t){names[2 * i], {SL_TYPE_INT64, 0, 0, false}};
    acc_f[n_keys + 2 + 2 * i] =
        (sl_field_t){names[2 * i + 1], acc_type(col, in_t)};
    out_f[n_keys + i] = (sl_field_t){col->name, out_type(col, in_t)};
    col->out_type = out_f[n_keys + i].type.id;
  }
  rc = sl_schema_create(acc_f, n_keys + 1 + 2 * n_aggs, &c->acc_schema,
                        out_err);
  if (rc == SL_OK)
    rc = sl_schema_create(out_f, n_keys + n_aggs, &c->out_schema, out_err);
  if (rc != SL_OK) goto fail;
  rc = SL_ENOMEM;
  if ((c->layout = acc_layout(c, aggs)) == NULL) goto fail;
  for (uint32_t i = 0; i < 2 * n_aggs; i++) sl_free(names[i]);
  sl_free(names);
  sl_free(acc_f);
  sl_free(out_f);
  *out_cfg = c;
  *out_schema = sl_schema_ref(c->out_schema);
  return SL_OK;
fail:
  if (rc == SL_ENOMEM) sl_error_set(out_err, rc, "out of memory");
  if (names)
    for (uint32_t i = 0; i < 2 * n_aggs; i++) sl_free(names[i]);
  sl_free(names);
  sl_free(acc_f);
  sl_free(out_f);
  sl__agg_config_destroy(c);
  return rc;
}

/* ------------------------------------------------------------------ */

static int agg_open(sl_ctx_t *ctx, void *user) {
  agg_cfg_t *c = user;
  agg_local_t *l = sl_calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  l->ctx = ctx;
  sl_ctx_set_local(ctx, l);
  l->vals = sl_calloc(c->n_cols + 1, sizeof(agg_val_t));
  l->before = sl_calloc(c->n_cols + 1, sizeof(out_val_t));
  if (l->vals == NULL || l->before == NULL ||
      sl_row_builder_init(&l->b, c->acc_schema) != SL_OK)
    return SL_ENOMEM;
  sl_state_desc_t d = {.name = "accumulator", .kind = SL_STATE_VALUE,
                       .version = 1, .layout = c->layout};
  return sl_ctx_state(ctx, &d, &l->acc);
}

static void agg_close(sl_ctx_t *ctx, void *user) {
  SL_UNUSED(user);
  agg_local_t *l = sl_ctx_local(ctx);
  if (l == NULL) return;
  sl_row_builder_close(&l->b);
  sl_free(l->vals);
  sl_free(l->before);
  sl_free(l);
}

/* Read an accumulator row into l->vals (slices borrow acc's bytes). */
static void read_acc(const agg_cfg_t *c, agg_local_t *l, const sl_row_t *acc) {
  for (uint32_t i = 0; i < c->n_cols; i++) {
    agg_val_t *x = &l->vals[i];
    uint32_t vf = c->n_keys + 2 + 2 * i;
    x->count = sl_row_get_i64(acc, c->n_keys + 1 + 2 * i);
    x->is_null = sl_row_is_null(acc, vf);
    if (x->is_null) continue;
    uint8_t t = sl_schema_field(c->acc_schema, vf)->type.id;
    if (is_wide(&c->cols[i])) {
      sl_slice_t b = sl_row_get_str(acc, vf);
      unsigned __int128 u = 0;
      /* Written by set_val as 16 bytes; anything else reads as 0. */
      if (SL_ALWAYS(b.len == 16))
        for (int k = 15; k >= 0; k--) u = (u << 8) | b.ptr[k];
      x->wide = (__int128)u;
    } else if (t == SL_TYPE_FLOAT64) x->f = sl_row_get_f64(acc, vf);
    else if (t == SL_TYPE_STRING || t == SL_TYPE_BYTES) x->s = sl_row_get_str(acc, vf);
    else x->i = sl_row_get_i64(acc, vf);
  }
}

/* Load the accumulator of the current key into l->vals; false if none. */
static bool load(const agg_cfg_t *c, agg_local_t *l, sl_row_t *acc,
                 int64_t *n_rows) {
  sl_slice_t v;
  if (sl_value_get(l->acc, &v) != SL_OK) {
    memset(l->vals, 0, c->n_cols * sizeof(agg_val_t));
    for (uint32_t i = 0; i < c->n_cols; i++) l->vals[i].is_null = true;
    *n_rows = 0;
    return false;
  }
  sl_row_view(acc, c->acc_schema, v.ptr, v.len);
  *n_rows = sl_row_get_i64(acc, c->n_keys);
  read_acc(c, l, acc);
  return true;
}

static int cmp_value(uint8_t t, const agg_val_t *a, const sl_value_t *b) {
  switch (t) {
  case SL_TYPE_FLOAT64:
    return a->f < b->u.f ? -1 : a->f > b->u.f;
  case SL_TYPE_STRING: {
    uint32_t n = a->s.len < b->u.s.len ? a->s.len : b->u.s.len;
    int r = memcmp(a->s.ptr, b->u.s.ptr, n);
    if (r) return r;
    return a->s.len < b->u.s.len ? -1 : a->s.len > b->u.s.len;
  }
  case SL_TYPE_BOOL:
    return (int)(a->i != 0) - (int)b->u.b;
  default:
    return a->i < b->u.i ? -1 : a->i > b->u.i;
  }
}

static int fold(const agg_cfg_t *c, agg_local_t *l, const sl_row_t *row,
                int sign) {
  for (uint32_t i = 0; i < c->n_cols; i++) {
    const agg_col_t *col = &c->cols[i];
    agg_val_t *x = &l->vals[i];
    if (col->in_field < 0) { /* count() */
      x->count += sign;
      continue;
    }
    sl_value_t v;
    sl_row_get_value(row, (uint32_t)col->in_field, &v);
    if (v.is_null) continue;
    x->count += sign;
    switch (col->fn) {
    case SL_AGG_COUNT:
      break;
    case SL_AGG_SUM:
    case SL_AGG_AVG:
      if (col->in_type == SL_TYPE_FLOAT64) {
        x->f = (x->is_null ? 0 : x->f) + sign * v.u.f;
      } else if (is_wide(col)) {
        /* |sum| < 2^63 rows * 2^63: no overflow in 128 bits. */
        x->wide = (x->is_null ? 0 : x->wide) +
                  (sign > 0 ? (__int128)v.u.i : -(__int128)v.u.i);
      } else {
        int64_t cur = x->is_null ? 0 : x->i, d = sign > 0 ? v.u.i : -v.u.i;
        if (__builtin_add_overflow(cur, d, &x->i) ||
            (col->in_type == SL_TYPE_DECIMAL &&
             (x->i >= 1000000000000000000ll || x->i <= -1000000000000000000ll)))
          return sl_ctx_fail(l->ctx, SL_EOVERFLOW,
                             "%s(...) of column '%s' overflows %s",
                             fn_name(col->fn), col->name,
                             col->in_type == SL_TYPE_DECIMAL ? "decimal(18)"
                                                             : "int64");
      }
      x->is_null = false;
      break;
    case SL_AGG_MIN:
    case SL_AGG_MAX: {
      if (sign < 0)
        return sl_ctx_fail(l->ctx, SL_ENOTSUP,
                           "%s for column '%s' cannot retract a row (-U/-D "
                           "input); use count, sum or avg",
                           fn_name(col->fn), col->name);
      bool take = x->is_null;
      if (!take) {
        int r = cmp_value(col->in_type, x, &v);
        take = col->fn == SL_AGG_MIN ? r > 0 : r < 0;
      }
      if (take) {
        x->is_null = false;
        if (col->in_type == SL_TYPE_FLOAT64) x->f = v.u.f;
        else if (col->in_type == SL_TYPE_STRING) x->s = v.u.s;
        else if (col->in_type == SL_TYPE_BOOL) x->i = v.u.b;
        else x->i = v.u.i;
      }
      break;
    }
    }
    if (x->count == 0 && col->fn != SL_AGG_COUNT) x->is_null = true;
  }
  return SL_OK;
}

static void set_val(sl_row_builder_t *b, uint32_t f, uint8_t type,
                    agg_val_t *x, bool is_wide_sum) {
  if (x->is_null) return; /* reset left it null */
  if (is_wide_sum) {
    unsigned __int128 u = (unsigned __int128)x->wide;
    for (int k = 0; k < 16; k++, u >>= 8) x->wide_le[k] = (uint8_t)u;
    sl_row_builder_set_str(b, f, x->wide_le, 16);
  } else if (type == SL_TYPE_FLOAT64) sl_row_builder_set_f64(b, f, x->f);
  else if (type == SL_TYPE_STRING || type == SL_TYPE_BYTES)
    sl_row_builder_set_str(b, f, x->s.ptr, x->s.len);
  else sl_row_builder_set_i64(b, f, x->i);
}

/*
 * The output value of column i.  An average of integers is the quotient
 * and remainder of the 128-bit sum by the count, so that only the last
 * step rounds: avg of values near INT64_MAX is exact to a double.
 */
static void out_value(const agg_cfg_t *c, const agg_val_t *x, uint32_t i,
                      out_val_t *o) {
  const agg_col_t *col = &c->cols[i];
  memset(o, 0, sizeof(*o));
  if (col->fn == SL_AGG_COUNT) {
    o->i = x->count;
  } else if (col->fn == SL_AGG_AVG) {
    o->is_null = x->is_null || x->count == 0;
    if (o->is_null) return;
    if (col->in_type == SL_TYPE_FLOAT64) {
      o->f = x->f / (double)x->count;
    } else {
      __int128 q = x->wide / x->count, r = x->wide % x->count;
      o->f = (double)q + (double)r / (double)x->count;
      if (col->in_type == SL_TYPE_DECIMAL) o->f /= col->unit;
    }
  } else {
    o->is_null = x->is_null;
    o->i = x->i;
    o->f = x->f;
    o->s = x->s;
  }
}

/* Would the output row of l's values differ from the one in a? */
static bool is_changed(const agg_cfg_t *c, const out_val_t *a,
                       const agg_local_t *l) {
  for (uint32_t i = 0; i < c->n_cols; i++) {
    out_val_t o;
    out_value(c, &l->vals[i], i, &o);
    if (o.is_null != a[i].is_null) return true;
    if (o.is_null) continue;
    /* Bit patterns: -0.0 and 0.0 differ, NaN equals itself. */
    if (o.i != a[i].i || memcmp(&o.f, &a[i].f, sizeof(o.f)) != 0 ||
        o.s.len != a[i].s.len ||
        (o.s.len && memcmp(o.s.ptr, a[i].s.ptr, o.s.len) != 0))
      return true;
  }
  return false;
}

/* Write the output row for the current values (keys from `keys`). */
static int emit_out(sl_ctx_t *ctx, const agg_cfg_t *c, const agg_local_t *l,
                    const sl_row_t *keys, const uint32_t *key_idx,
                    sl_row_kind_t kind) {
  sl_row_builder_t *b = &ctx->out_b; /* sl_ctx_builder, of this kind */
  sl_row_builder_reset(b, kind);
  for (uint32_t k = 0; k < c->n_keys; k++) {
    if (k < 64 && (c->key_raw >> k) & 1) {
      /* The same type in and out: copy the slot (reset left it null). */
      if (!sl_row_is_null(keys, key_idx[k]))
        sl_row_builder_set_i64(b, k, sl_row_get_i64(keys, key_idx[k]));
      continue;
    }
    sl_value_t v;
    sl_row_get_value(keys, key_idx[k], &v);
    sl_row_builder_set_value(b, k, &v);
  }
  for (uint32_t i = 0; i < c->n_cols; i++) {
    const agg_col_t *col = &c->cols[i];
    uint32_t f = c->n_keys + i;
    out_val_t o;
    out_value(c, &l->vals[i], i, &o);
    if (o.is_null) continue; /* reset left it null */
    uint8_t t = col->out_type;
    if (col->fn == SL_AGG_COUNT) sl_row_builder_set_i64(b, f, o.i);
    else if (t == SL_TYPE_FLOAT64) sl_row_builder_set_f64(b, f, o.f);
    else if (t == SL_TYPE_STRING || t == SL_TYPE_BYTES)
      sl_row_builder_set_str(b, f, o.s.ptr, o.s.len);
    else sl_row_builder_set_i64(b, f, o.i);
  }
  return sl_ctx_emit_builder(ctx);
}

static int agg_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  agg_cfg_t *c = user;
  agg_local_t *l = sl_ctx_local(ctx);
  sl_row_t acc;
  int64_t n_rows;
  bool existed = load(c, l, &acc, &n_rows);
  sl_row_kind_t kind = sl_row_kind(row);
  int sign = (kind == SL_ROW_UPDATE_BEFORE || kind == SL_ROW_DELETE) ? -1 : 1;
  if (sign < 0 && !existed)
    return sl_ctx_fail(ctx, SL_ESTATE,
                       "a retraction (%s) arrived for a key that has no "
                       "rows; the input changelog is not consistent",
                       sl_row_kind_name(kind));
  /* The output before this row (slices borrow the old state or the row,
   * both valid until the new accumulator is stored). */
  out_val_t *before = NULL;
  if (existed && c->emit == SL_AGG_EMIT_UPDATES) {
    before = l->before;
    for (uint32_t i = 0; i < c->n_cols; i++)
      out_value(c, &l->vals[i], i, &before[i]);
  }
  int rc = fold(c, l, row, sign);
  if (rc != SL_OK) return rc;
  bool is_unchanged = before && !is_changed(c, before, l);
  n_rows += sign;
  if (n_rows == 0) {
    if ((rc = sl_state_clear(l->acc)) != SL_OK) return rc;
    if (c->emit == SL_AGG_EMIT_UPDATES)
      return emit_out(ctx, c, l, row, c->key_fields, SL_ROW_DELETE);
    return SL_OK;
  }
  /* Build the new accumulator, then store it. */
  sl_row_builder_t *b = &l->b;
  sl_row_builder_reset(b, SL_ROW_INSERT);
  for (uint32_t k = 0; k < c->n_keys; k++) {
    sl_value_t v;
    sl_row_get_value(row, c->key_fields[k], &v);
    sl_row_builder_set_value(b, k, &v);
  }
  sl_row_builder_set_i64(b, c->n_keys, n_rows);
  for (uint32_t i = 0; i < c->n_cols; i++) {
    uint32_t nf = c->n_keys + 1 + 2 * i;
    sl_row_builder_set_i64(b, nf, l->vals[i].count);
    set_val(b, nf + 1, sl_schema_field(c->acc_schema, nf + 1)->type.id,
            &l->vals[i], is_wide(&c->cols[i]));
  }
  sl_row_t nacc;
  sl_error_t *err = NULL;
  if ((rc = sl_row_builder_finish(b, &nacc, &err)) != SL_OK) {
    int r = sl_ctx_fail(ctx, rc, "%s", sl_error_message(err));
    sl_error_destroy(err);
    return r;
  }
  if ((rc = sl_value_put(l->acc, nacc.data, nacc.len)) != SL_OK) return rc;
  if (c->emit != SL_AGG_EMIT_UPDATES || is_unchanged) return SL_OK;
  /* The values may borrow the old state bytes; re-read the new row. */
  read_acc(c, l, &nacc);
  return emit_out(ctx, c, l, row, c->key_fields,
                  existed ? SL_ROW_UPDATE_AFTER : SL_ROW_INSERT);
}

typedef struct final_s {
  sl_ctx_t *ctx;
  agg_cfg_t *c;
  agg_local_t *l;
} final_t;

static int emit_final(void *user, sl_slice_t key, sl_slice_t ns) {
  SL_UNUSED(key);
  SL_UNUSED(ns);
  final_t *f = user;
  sl_row_t acc;
  int64_t n_rows;
  if (!load(f->c, f->l, &acc, &n_rows)) return SL_OK;
  return emit_out(f->ctx, f->c, f->l, &acc, f->c->acc_keys, SL_ROW_INSERT);
}

static int agg_end_input(sl_ctx_t *ctx, void *user) {
  agg_cfg_t *c = user;
  if (c->emit != SL_AGG_EMIT_FINAL) return SL_OK;
  agg_local_t *l = sl_ctx_local(ctx);
  final_t f = {ctx, c, l};
  return sl__state_for_each(l->acc, emit_final, &f);
}

const sl_process_fns_t sl__agg_fns = {agg_open, agg_process, NULL, NULL,
                                      agg_end_input, agg_close};
