/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Window operators (sl_window.h) as keyed process functions on event-time
 * timers, in two layouts.
 *
 * Slices (tumbling, sliding and cumulate windows with built-in aggregates,
 * or a user aggregate with merge): per key one value of "window.acc" (no
 * namespace) holds partial accumulators per slice of time, and one timer
 * per key is pending; a window fires by combining its slices.  The layout
 * and invariants are in the "Slicing" section below.
 *
 * Per window (process functions, user aggregates without merge, session
 * windows): per (key, window) the state "window.acc" (namespace: the
 * window as 16 big-endian bytes start, end) holds a header and a payload:
 *
 *   header   i64 rows, i64 largest event time, u8 fired, 7 bytes padding
 *   payload  built-in aggregates: per column i64 count and 8 bytes value,
 *            then the key fields as a row; user aggregates: their bytes;
 *            process functions: nothing (the rows are in "window.rows").
 *
 * The slices combine into this same accumulator format to be emitted.
 * Session windows keep, per key, the sorted list of their windows in
 * "window.sessions" (pairs of i64 start, end).  A window's timer at end - 1
 * fires it; with allowed lateness the state stays until end - 1 +
 * lateness, when a second timer clears it.  Timers are (time, key): the
 * window is found again from the time (tumbling, sliding: end = time + 1,
 * start = end - size; cumulate: start = the size-aligned start of end - 1)
 * or in the session list.  See docs/windows.md.
 */
#include <math.h>
#include <stdio.h>

#include "ops/ops.h"
#include "sluice/sl_state.h"
#include "sluice/sl_time.h"
#include "sluice/sl_window.h"
#include "state/state.h"

#define HDR 24u

typedef enum wmode_e { WM_AGG = 0, WM_REDUCE = 1, WM_PROCESS = 2 } wmode_t;

typedef struct wcol_s {
  sl_agg_fn_t fn;
  int in_field;    /* -1: count() */
  uint8_t in_type;
  uint8_t scale;
  bool is_float;   /* value kept as double */
  char *name;
} wcol_t;

typedef struct wcfg_s {
  sl_window_spec_t spec;
  uint32_t time_field;
  wmode_t mode;
  /* Built-in aggregates. */
  uint32_t *key_fields;
  uint32_t n_keys;
  wcol_t *cols;
  uint32_t n_cols;
  sl_schema_t *key_schema;
  /* User functions. */
  sl_window_agg_fns_t fns;
  sl_window_process_fn fn;
  void *user;
  const sl_schema_t *in_schema;
  char *uid;
  /* Slicing (tumbling, sliding, cumulate with built-in aggregates or a
   * user aggregate with merge): slice length, the spacing of window ends,
   * and the ends' residue modulo it. */
  bool is_sliced;
  int64_t g, fs, eoff;
} wcfg_t;

typedef struct wlocal_s {
  sl_ctx_t *ctx;
  sl_state_t *acc, *rows, *sessions;
  sl_bytes_t a, b, m;   /* accumulators: current, old/other, merged */
  sl_bytes_t u;         /* user payload */
  sl_bytes_t sess;      /* session list */
  sl_bytes_t moved;     /* rows moved between session windows */
  sl_row_builder_t kb;  /* key row */
  /* Slicing: the key's slices, the windows of a row and their old results
   * (scratch, reused: nothing is allocated per record once they grew). */
  sl_bytes_t ks, wins, old;
} wlocal_t;

static void slicing_setup(wcfg_t *c);

struct sl_window_rows_s {
  sl_list_iter_t it;
  const sl_schema_t *schema;
};

void sl_window_spec_init(sl_window_spec_t *spec) {
  memset(spec, 0, sizeof(*spec));
  spec->kind = SL_WINDOW_TUMBLING;
}

bool sl_window_rows_next(sl_window_rows_t *rows, sl_row_t *out) {
  sl_slice_t s;
  if (!sl_list_next(&rows->it, &s)) return false;
  sl_row_view(out, rows->schema, s.ptr, s.len);
  return true;
}

/* ------------------------------------------------------------------ */
/* Configuration. */

void sl__window_config_destroy(void *p) {
  wcfg_t *c = p;
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->n_cols; i++) sl_free(c->cols[i].name);
  sl_free(c->cols);
  sl_free(c->key_fields);
  sl_schema_unref(c->key_schema);
  sl_free((char *)c->spec.time_field);
  sl_free(c->uid);
  sl_free(c);
}

static const char *agg_name(sl_agg_fn_t fn) {
  switch (fn) {
  case SL_AGG_COUNT: return "count";
  case SL_AGG_SUM: return "sum";
  case SL_AGG_MIN: return "min";
  case SL_AGG_MAX: return "max";
  case SL_AGG_AVG: return "avg";
  }
  return "?";
}

static int check_spec(const sl_window_spec_t *s, const sl_schema_t *in,
                      uint32_t *out_field, sl_error_t **out_err) {
  switch (s->kind) {
  case SL_WINDOW_TUMBLING:
    if (s->size_us <= 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "a tumbling window needs a size > 0");
    break;
  case SL_WINDOW_SLIDING:
    if (s->size_us <= 0 || s->slide_us <= 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "a sliding window needs a size > 0 and a slide > 0");
    if (s->size_us / s->slide_us > 100000)
      return sl_error_set(out_err, SL_EINVAL,
                          "a sliding window of size %lld us and slide %lld us "
                          "puts each row into more than 100000 windows",
                          (long long)s->size_us, (long long)s->slide_us);
    break;
  case SL_WINDOW_CUMULATE:
    if (s->size_us <= 0 || s->step_us <= 0 || s->size_us % s->step_us != 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "a cumulate window needs a step > 0 and a size "
                          "that is a multiple of it");
    if (s->size_us / s->step_us > 100000)
      return sl_error_set(out_err, SL_EINVAL,
                          "a cumulate window of size %lld us and step %lld us "
                          "puts each row into more than 100000 windows",
                          (long long)s->size_us, (long long)s->step_us);
    break;
  case SL_WINDOW_SESSION:
    if (s->gap_us <= 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "a session window needs a gap > 0");
    break;
  default:
    return sl_error_set(out_err, SL_EINVAL, "unknown window kind %d",
                        (int)s->kind);
  }
  if (s->allowed_lateness_us < 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "allowed lateness must not be negative");
  if (s->time_field == NULL)
    return sl_error_set(out_err, SL_EINVAL, "no event-time field given");
  int idx = sl_schema_index(in, s->time_field);
  if (idx < 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "no event-time field '%s' in the input",
                        s->time_field);
  uint8_t t = sl_schema_field(in, (uint32_t)idx)->type.id;
  if (t != SL_TYPE_TIMESTAMP && t != SL_TYPE_INT64)
    return sl_error_set(out_err, SL_ETYPE,
                        "event-time field '%s' is %s; it must be timestamp "
                        "or int64 (microseconds)",
                        s->time_field, sl_type_name((sl_type_id_t)t));
  *out_field = (uint32_t)idx;
  return SL_OK;
}

static sl_type_t col_out_type(const wcol_t *c, sl_type_t in) {
  switch (c->fn) {
  case SL_AGG_COUNT: return (sl_type_t){SL_TYPE_INT64, 0, 0, false};
  case SL_AGG_AVG: return (sl_type_t){SL_TYPE_FLOAT64, 0, 0, true};
  case SL_AGG_SUM:
    if (in.id == SL_TYPE_FLOAT64) return (sl_type_t){SL_TYPE_FLOAT64, 0, 0, true};
    if (in.id == SL_TYPE_DECIMAL)
      return (sl_type_t){SL_TYPE_DECIMAL, 18, in.scale, true};
    return (sl_type_t){SL_TYPE_INT64, 0, 0, true};
  default:
    in.nullable = true;
    return in;
  }
}

int sl__window_config_create(const sl_schema_t *in, const uint32_t *key_fields,
                             uint32_t n_keys, const sl_window_spec_t *spec,
                             const sl_agg_t *aggs, uint32_t n_aggs,
                             const char *uid, void **out_cfg,
                             sl_schema_t **out_schema, sl_error_t **out_err) {
  wcfg_t *c = sl_calloc(1, sizeof(*c));
  sl_field_t *kf = sl_calloc(n_keys + 1, sizeof(sl_field_t));
  sl_field_t *of = sl_calloc(n_keys + 3 + n_aggs, sizeof(sl_field_t));
  int rc = SL_ENOMEM;
  if (c == NULL || kf == NULL || of == NULL) goto fail;
  c->mode = aggs ? WM_AGG : WM_REDUCE; /* the caller sets process */
  c->in_schema = in;
  c->spec = *spec;
  c->spec.time_field = NULL;
  if ((rc = check_spec(spec, in, &c->time_field, out_err)) != SL_OK) goto fail;
  rc = SL_ENOMEM;
  if ((c->spec.time_field = sl_strdup(spec->time_field)) == NULL ||
      (c->uid = sl_strdup(uid ? uid : "window")) == NULL)
    goto fail;
  if (aggs == NULL) {
    slicing_setup(c);
    *out_cfg = c;
    sl_free(kf);
    sl_free(of);
    return SL_OK;
  }
  c->key_fields = sl_calloc(n_keys + 1, sizeof(uint32_t));
  c->cols = sl_calloc(n_aggs + 1, sizeof(wcol_t));
  if (c->key_fields == NULL || c->cols == NULL) goto fail;
  c->n_keys = n_keys;
  memcpy(c->key_fields, key_fields, n_keys * sizeof(uint32_t));
  for (uint32_t k = 0; k < n_keys; k++) {
    kf[k] = *sl_schema_field(in, key_fields[k]);
    of[k] = kf[k];
  }
  sl_type_t ts_t = {SL_TYPE_TIMESTAMP, 0, 0, false};
  of[n_keys] = (sl_field_t){"window_start", ts_t};
  of[n_keys + 1] = (sl_field_t){"window_end", ts_t};
  of[n_keys + 2] = (sl_field_t){"event_time", ts_t};
  for (uint32_t i = 0; i < n_aggs; i++) {
    wcol_t *col = &c->cols[i];
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
                          agg_name(col->fn), aggs[i].field, aggs[i].field);
        goto fail;
      }
      col->in_field = idx;
      in_t = sl_schema_field(in, (uint32_t)idx)->type;
    } else if (col->fn != SL_AGG_COUNT) {
      rc = sl_error_set(out_err, SL_EINVAL, "%s() needs a field",
                        agg_name(col->fn));
      goto fail;
    }
    col->in_type = in_t.id;
    col->scale = in_t.scale;
    col->is_float = in_t.id == SL_TYPE_FLOAT64;
    bool is_num = in_t.id == SL_TYPE_INT32 || in_t.id == SL_TYPE_INT64 ||
                  in_t.id == SL_TYPE_FLOAT64 || in_t.id == SL_TYPE_DECIMAL;
    if ((col->fn == SL_AGG_SUM || col->fn == SL_AGG_AVG) && !is_num) {
      rc = sl_error_set(out_err, SL_ETYPE, "%s(%s): %s is not numeric",
                        agg_name(col->fn), aggs[i].field,
                        sl_type_name((sl_type_id_t)in_t.id));
      goto fail;
    }
    if ((col->fn == SL_AGG_MIN || col->fn == SL_AGG_MAX) &&
        (in_t.id == SL_TYPE_STRING || in_t.id == SL_TYPE_BYTES)) {
      rc = sl_error_set(out_err, SL_ENOTSUP,
                        "%s(%s) over windows takes numeric, bool and "
                        "timestamp fields, not %s",
                        agg_name(col->fn), aggs[i].field,
                        sl_type_name((sl_type_id_t)in_t.id));
      goto fail;
    }
    of[n_keys + 3 + i] = (sl_field_t){col->name, col_out_type(col, in_t)};
  }
  rc = sl_schema_create(kf, n_keys, &c->key_schema, out_err);
  if (rc == SL_OK) rc = sl_schema_create(of, n_keys + 3 + n_aggs, out_schema,
                                         out_err);
  if (rc != SL_OK) goto fail;
  sl_free(kf);
  sl_free(of);
  slicing_setup(c);
  *out_cfg = c;
  return SL_OK;
fail:
  if (rc == SL_ENOMEM) sl_error_set(out_err, rc, "out of memory");
  sl_free(kf);
  sl_free(of);
  sl__window_config_destroy(c);
  return rc;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Whether the windows are kept as slices, and their grid (window.c's
 * "Slicing" section). */
static void slicing_setup(wcfg_t *c) {
  const sl_window_spec_t *s = &c->spec;
  c->is_sliced = s->kind != SL_WINDOW_SESSION &&
                 (c->mode == WM_AGG ||
                  (c->mode == WM_REDUCE && c->fns.merge != NULL));
  switch (s->kind) {
  case SL_WINDOW_TUMBLING:
    c->g = c->fs = s->size_us;
    break;
  case SL_WINDOW_SLIDING:
    c->g = gcd64(s->size_us, s->slide_us);
    c->fs = s->slide_us;
    break;
  case SL_WINDOW_CUMULATE:
    c->g = c->fs = s->step_us;
    break;
  default:
    c->is_sliced = false;
    return;
  }
  /* Window ends: offset + size + k*slide, or offset + k*step. */
  c->eoff = sl__floor_mod(s->offset_us, c->fs);
  if (s->kind != SL_WINDOW_CUMULATE)
    c->eoff = (c->eoff + sl__floor_mod(s->size_us, c->fs)) % c->fs;
}

void sl__window_config_set_user(void *cfg, const sl_window_agg_fns_t *fns,
                                sl_window_process_fn fn, void *user) {
  wcfg_t *c = cfg;
  if (fns) c->fns = *fns;
  c->fn = fn;
  c->user = user;
  c->mode = fn ? WM_PROCESS : c->mode;
  slicing_setup(c);
}

/* ------------------------------------------------------------------ */
/* Accumulators. */

static int64_t get64(const uint8_t *p) {
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}

static void put64(uint8_t *p, int64_t v) { memcpy(p, &v, 8); }

static int set_ns(wlocal_t *l, const sl_window_t *w) {
  uint8_t ns[16];
  sl__put_u64be(ns, (uint64_t)w->start_us ^ 0x8000000000000000ull);
  sl__put_u64be(ns + 8, (uint64_t)w->end_us ^ 0x8000000000000000ull);
  return sl__kstate_set_namespace(l->ctx->kstate, ns, 16);
}

static int clear_ns(wlocal_t *l) {
  return sl__kstate_set_namespace(l->ctx->kstate, NULL, 0);
}

/* Load the accumulator of w into dst; *exists says whether there was one. */
static int acc_load(wlocal_t *l, const sl_window_t *w, sl_bytes_t *dst,
                    bool *exists) {
  int rc = set_ns(l, w);
  if (rc != SL_OK) return rc;
  dst->len = 0;
  sl_slice_t v;
  rc = sl_value_get(l->acc, &v);
  if (rc == SL_ENOTFOUND) {
    *exists = false;
    return SL_OK;
  }
  if (rc != SL_OK) return rc;
  if (v.len < HDR)
    return sl_ctx_fail(l->ctx, SL_ECORRUPT, "window state of %u bytes is "
                       "shorter than its header", v.len);
  *exists = true;
  return sl_bytes_append(dst, v.ptr, v.len);
}

/* The key row of `row` (the key fields, in the builder kb; valid until
 * the builder's next use).  A failure fails the task. */
static int key_row(const wcfg_t *c, wlocal_t *l, const sl_row_t *row,
                   sl_row_t *kr) {
  sl_row_builder_reset(&l->kb, SL_ROW_INSERT);
  for (uint32_t k = 0; k < c->n_keys; k++) {
    sl_value_t v;
    sl_row_get_value(row, c->key_fields[k], &v);
    sl_row_builder_set_value(&l->kb, k, &v);
  }
  sl_error_t *err = NULL;
  int rc = sl_row_builder_finish(&l->kb, kr, &err);
  if (rc == SL_OK) return SL_OK;
  rc = sl_ctx_fail(l->ctx, rc, "%s", sl_error_message(err));
  sl_error_destroy(err);
  return rc;
}

/* A fresh accumulator: header, then the payload of a new window. */
static int acc_init(const wcfg_t *c, wlocal_t *l, sl_bytes_t *dst,
                    const sl_row_t *row) {
  dst->len = 0;
  uint8_t h[HDR] = {0};
  put64(h + 8, INT64_MIN);
  int rc = sl_bytes_append(dst, h, HDR);
  if (rc != SL_OK || c->mode != WM_AGG) return rc;
  uint8_t z[16] = {0};
  for (uint32_t i = 0; i < c->n_cols; i++)
    if ((rc = sl_bytes_append(dst, z, 16)) != SL_OK) return rc;
  if (row == NULL) return SL_OK; /* merged: keys come from a part */
  sl_row_t kr;
  if ((rc = key_row(c, l, row, &kr)) != SL_OK) return rc;
  return sl_bytes_append(dst, kr.data, kr.len);
}

static int cmp_num(const wcol_t *col, const uint8_t *a, const sl_value_t *v) {
  if (col->is_float) {
    double x;
    memcpy(&x, a, 8);
    return x < v->u.f ? -1 : x > v->u.f;
  }
  int64_t x = get64(a);
  int64_t y = col->in_type == SL_TYPE_BOOL ? (int64_t)v->u.b : v->u.i;
  return x < y ? -1 : x > y;
}

static int fold_sum(wlocal_t *l, const wcol_t *col, uint8_t *val, bool is_f,
                    double f, int64_t i) {
  if (is_f) {
    double x;
    memcpy(&x, val, 8);
    x += f;
    memcpy(val, &x, 8);
    return SL_OK;
  }
  int64_t x = get64(val), r;
  if (__builtin_add_overflow(x, i, &r) ||
      (col->in_type == SL_TYPE_DECIMAL &&
       (r >= 1000000000000000000ll || r <= -1000000000000000000ll)))
    return sl_ctx_fail(l->ctx, SL_EOVERFLOW,
                       "%s(...) of column '%s' overflows %s",
                       agg_name(col->fn), col->name,
                       col->in_type == SL_TYPE_DECIMAL ? "decimal(18)"
                                                       : "int64");
  put64(val, r);
  return SL_OK;
}

/* Fold a row into the built-in columns of acc. */
static int agg_add(const wcfg_t *c, wlocal_t *l, uint8_t *p,
                   const sl_row_t *row) {
  for (uint32_t i = 0; i < c->n_cols; i++, p += 16) {
    const wcol_t *col = &c->cols[i];
    int64_t n = get64(p);
    if (col->in_field < 0) {
      put64(p, n + 1);
      continue;
    }
    sl_value_t v;
    sl_row_get_value(row, (uint32_t)col->in_field, &v);
    if (v.is_null) continue;
    int rc = SL_OK;
    switch (col->fn) {
    case SL_AGG_COUNT:
      break;
    case SL_AGG_SUM:
    case SL_AGG_AVG:
      rc = fold_sum(l, col, p + 8, col->is_float, v.u.f, v.u.i);
      break;
    case SL_AGG_MIN:
    case SL_AGG_MAX: {
      int r = n == 0 ? 0 : cmp_num(col, p + 8, &v);
      if (n == 0 || (col->fn == SL_AGG_MIN ? r > 0 : r < 0)) {
        if (col->is_float) memcpy(p + 8, &v.u.f, 8);
        else put64(p + 8, col->in_type == SL_TYPE_BOOL ? v.u.b : v.u.i);
      }
      break;
    }
    }
    if (rc != SL_OK) return rc;
    put64(p, n + 1);
  }
  return SL_OK;
}

/* Fold the built-in columns of `from` into `into`. */
static int agg_merge(const wcfg_t *c, wlocal_t *l, uint8_t *into,
                     const uint8_t *from) {
  for (uint32_t i = 0; i < c->n_cols; i++, into += 16, from += 16) {
    const wcol_t *col = &c->cols[i];
    int64_t n = get64(into), m = get64(from);
    if (m == 0) continue;
    int rc = SL_OK;
    if (col->fn == SL_AGG_SUM || col->fn == SL_AGG_AVG) {
      double f;
      memcpy(&f, from + 8, 8);
      rc = fold_sum(l, col, into + 8, col->is_float, f, get64(from + 8));
    } else if (col->fn == SL_AGG_MIN || col->fn == SL_AGG_MAX) {
      sl_value_t v = {0};
      if (col->is_float) memcpy(&v.u.f, from + 8, 8);
      else if (col->in_type == SL_TYPE_BOOL) v.u.b = get64(from + 8) != 0;
      else v.u.i = get64(from + 8);
      int r = n == 0 ? 0 : cmp_num(col, into + 8, &v);
      if (n == 0 || (col->fn == SL_AGG_MIN ? r > 0 : r < 0))
        memcpy(into + 8, from + 8, 8);
    }
    if (rc != SL_OK) return rc;
    put64(into, n + m);
  }
  return SL_OK;
}

/* Merge accumulator `from` (header and payload) into `into`. */
static int acc_merge(const wcfg_t *c, wlocal_t *l, sl_bytes_t *into,
                     const sl_bytes_t *from) {
  uint8_t *h = into->data;
  put64(h, get64(h) + get64(from->data));
  if (get64(from->data + 8) > get64(h + 8)) put64(h + 8, get64(from->data + 8));
  if (c->mode == WM_AGG) {
    bool has_keys = into->len > HDR + 16 * c->n_cols;
    int rc = agg_merge(c, l, into->data + HDR, from->data + HDR);
    if (rc != SL_OK || has_keys) return rc;
    size_t ko = HDR + 16 * (size_t)c->n_cols;
    return sl_bytes_append(into, from->data + ko, from->len - ko);
  }
  if (c->mode == WM_REDUCE) {
    if (c->fns.merge == NULL)
      return sl_ctx_fail(l->ctx, SL_EINVAL,
                         "session windows need a merge function");
    l->u.len = 0;
    int rc = sl_bytes_append(&l->u, into->data + HDR, into->len - HDR);
    if (rc != SL_OK) return rc;
    sl_slice_t f = {from->data + HDR, (uint32_t)(from->len - HDR)};
    if ((rc = c->fns.merge(c->user, f, &l->u)) != SL_OK)
      return sl_ctx_fail(l->ctx, rc, "window merge function failed");
    into->len = HDR;
    return sl_bytes_append(into, l->u.data, l->u.len);
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Results. */

static int emit_agg(const wcfg_t *c, wlocal_t *l, const sl_window_t *w,
                    const sl_bytes_t *acc, sl_row_kind_t kind) {
  sl_ctx_t *ctx = l->ctx;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_kind(b, kind);
  size_t ko = HDR + 16 * (size_t)c->n_cols;
  sl_row_t keys;
  sl_row_view(&keys, c->key_schema, acc->data + ko, (uint32_t)(acc->len - ko));
  for (uint32_t k = 0; k < c->n_keys; k++) {
    sl_value_t v;
    sl_row_get_value(&keys, k, &v);
    sl_row_builder_set_value(b, k, &v);
  }
  sl_row_builder_set_i64(b, c->n_keys, w->start_us);
  sl_row_builder_set_i64(b, c->n_keys + 1, w->end_us);
  sl_row_builder_set_i64(b, c->n_keys + 2, get64(acc->data + 8));
  const uint8_t *p = acc->data + HDR;
  for (uint32_t i = 0; i < c->n_cols; i++, p += 16) {
    const wcol_t *col = &c->cols[i];
    uint32_t f = c->n_keys + 3 + i;
    int64_t n = get64(p);
    if (col->fn == SL_AGG_COUNT) {
      sl_row_builder_set_i64(b, f, n);
      continue;
    }
    if (n == 0) continue; /* null */
    double x;
    memcpy(&x, p + 8, 8);
    if (col->fn == SL_AGG_AVG) {
      double sum = col->is_float ? x
                   : col->in_type == SL_TYPE_DECIMAL
                       ? (double)get64(p + 8) / pow(10, col->scale)
                       : (double)get64(p + 8);
      sl_row_builder_set_f64(b, f, sum / (double)n);
    } else if (col->is_float) {
      sl_row_builder_set_f64(b, f, x);
    } else if (col->in_type == SL_TYPE_BOOL && col->fn != SL_AGG_SUM) {
      sl_row_builder_set_bool(b, f, get64(p + 8) != 0);
    } else if (col->in_type == SL_TYPE_INT32 && col->fn != SL_AGG_SUM) {
      sl_row_builder_set_i32(b, f, (int32_t)get64(p + 8));
    } else {
      sl_row_builder_set_i64(b, f, get64(p + 8));
    }
  }
  return sl_ctx_emit_builder(ctx);
}

static int emit_result(const wcfg_t *c, wlocal_t *l, const sl_window_t *w0,
                       const sl_bytes_t *acc, sl_row_kind_t kind) {
  sl_window_t w = *w0;
  w.max_ts_us = get64(acc->data + 8);
  if (c->mode == WM_AGG) return emit_agg(c, l, &w, acc, kind);
  if (c->mode == WM_REDUCE) {
    sl_row_builder_t *b = sl_ctx_builder(l->ctx);
    sl_slice_t p = {acc->data + HDR, (uint32_t)(acc->len - HDR)};
    int rc = c->fns.result(l->ctx, c->user, &w, p, b);
    if (rc != SL_OK) return rc;
    sl_row_builder_set_kind(b, kind);
    return sl_ctx_emit_builder(l->ctx);
  }
  /* Process function: hand over the rows (namespace w is current). */
  int rc = set_ns(l, &w);
  if (rc != SL_OK) return rc;
  sl_window_rows_t rows;
  rows.schema = c->in_schema;
  if ((rc = sl_list_iter(l->rows, &rows.it)) != SL_OK) return rc;
  return c->fn(l->ctx, c->user, &w, &rows);
}

/* ------------------------------------------------------------------ */
/* Window life cycle. */

static int64_t fire_time(const sl_window_t *w) { return w->end_us - 1; }

static int64_t cleanup_time(const wcfg_t *c, const sl_window_t *w) {
  return sl__sat_add(w->end_us - 1, c->spec.allowed_lateness_us);
}

static int acc_store(wlocal_t *l, const sl_window_t *w, const sl_bytes_t *a) {
  int rc = set_ns(l, w);
  return rc == SL_OK ? sl_value_put(l->acc, a->data, a->len) : rc;
}

static int window_clear(const wcfg_t *c, wlocal_t *l, const sl_window_t *w) {
  int rc = set_ns(l, w);
  if (rc == SL_OK) rc = sl_state_clear(l->acc);
  if (rc == SL_OK && c->mode == WM_PROCESS) rc = sl_state_clear(l->rows);
  return rc;
}

static int window_fire(const wcfg_t *c, wlocal_t *l, const sl_window_t *w,
                       bool *out_removed);

/* Add a row to window w (not late). */
static int window_add(const wcfg_t *c, wlocal_t *l, const sl_window_t *w,
                      const sl_row_t *row, int64_t ts) {
  bool exists;
  int rc = acc_load(l, w, &l->a, &exists);
  if (rc == SL_OK && !exists) rc = acc_init(c, l, &l->a, row);
  if (rc != SL_OK) return rc;
  bool fired = l->a.data[16] != 0;
  if (fired && c->mode != WM_PROCESS) {
    l->b.len = 0;
    if ((rc = sl_bytes_append(&l->b, l->a.data, l->a.len)) != SL_OK) return rc;
  }
  uint8_t *h = l->a.data;
  put64(h, get64(h) + 1);
  if (ts > get64(h + 8)) put64(h + 8, ts);
  if (c->mode == WM_AGG) {
    rc = agg_add(c, l, l->a.data + HDR, row);
  } else if (c->mode == WM_REDUCE) {
    l->u.len = 0;
    rc = sl_bytes_append(&l->u, l->a.data + HDR, l->a.len - HDR);
    if (rc == SL_OK && (rc = c->fns.add(c->user, row, &l->u)) != SL_OK)
      rc = sl_ctx_fail(l->ctx, rc, "window add function failed");
    l->a.len = HDR;
    if (rc == SL_OK) rc = sl_bytes_append(&l->a, l->u.data, l->u.len);
  } else {
    rc = sl_list_add(l->rows, row->data, row->len);
  }
  if (rc == SL_OK) rc = acc_store(l, w, &l->a);
  if (rc != SL_OK) return rc;
  if (!fired) {
    /* The watermark already passed the window's end (a row within the
     * allowed lateness opening a window, or a session merge that moved
     * the end back): fire now, as Flink's event-time trigger does on an
     * element, instead of at the next watermark, which may be far off. */
    if (fire_time(w) <= sl_ctx_watermark(l->ctx)) {
      bool removed;
      return window_fire(c, l, w, &removed);
    }
    return exists ? SL_OK
                  : sl_ctx_event_timer_register(l->ctx, fire_time(w));
  }
  /* A late row within the allowed lateness updates the result. */
  if (c->mode == WM_PROCESS) return emit_result(c, l, w, &l->a, SL_ROW_INSERT);
  rc = emit_result(c, l, w, &l->b, SL_ROW_UPDATE_BEFORE);
  return rc == SL_OK ? emit_result(c, l, w, &l->a, SL_ROW_UPDATE_AFTER) : rc;
}

/* The timer at w's end fired: emit it, keep it for the lateness. */
static int window_fire(const wcfg_t *c, wlocal_t *l, const sl_window_t *w,
                       bool *out_removed) {
  bool exists;
  *out_removed = false;
  int rc = acc_load(l, w, &l->a, &exists);
  if (rc != SL_OK || !exists || l->a.data[16]) return rc;
  if ((rc = emit_result(c, l, w, &l->a, SL_ROW_INSERT)) != SL_OK) return rc;
  if (c->spec.allowed_lateness_us == 0) {
    *out_removed = true;
    return window_clear(c, l, w);
  }
  l->a.data[16] = 1;
  rc = acc_store(l, w, &l->a);
  return rc == SL_OK ? sl_ctx_event_timer_register(l->ctx, cleanup_time(c, w))
                     : rc;
}

/* ------------------------------------------------------------------ */
/* Session windows: the sorted list of a key's windows. */

static int sess_load(wlocal_t *l) {
  int rc = clear_ns(l);
  if (rc != SL_OK) return rc;
  l->sess.len = 0;
  sl_slice_t v;
  rc = sl_value_get(l->sessions, &v);
  if (rc == SL_ENOTFOUND) return SL_OK;
  if (rc != SL_OK) return rc;
  if (v.len % 16)
    return sl_ctx_fail(l->ctx, SL_ECORRUPT, "session list of %u bytes", v.len);
  return sl_bytes_append(&l->sess, v.ptr, v.len);
}

static int sess_store(wlocal_t *l) {
  int rc = clear_ns(l);
  if (rc != SL_OK) return rc;
  if (l->sess.len == 0) return sl_state_clear(l->sessions);
  return sl_value_put(l->sessions, l->sess.data, l->sess.len);
}

static uint32_t sess_n(const wlocal_t *l) { return (uint32_t)(l->sess.len / 16); }

static sl_window_t sess_at(const wlocal_t *l, uint32_t i) {
  sl_window_t w = {get64(l->sess.data + 16 * i),
                   get64(l->sess.data + 16 * i + 8), 0};
  return w;
}

static void sess_remove(wlocal_t *l, uint32_t i) {
  memmove(l->sess.data + 16 * i, l->sess.data + 16 * (i + 1),
          l->sess.len - 16 * (i + 1));
  l->sess.len -= 16;
}

static int sess_insert(wlocal_t *l, const sl_window_t *w) {
  uint32_t n = sess_n(l), i = 0;
  while (i < n && sess_at(l, i).start_us < w->start_us) i++;
  int rc = sl_bytes_reserve(&l->sess, l->sess.len + 16);
  if (rc != SL_OK) return rc;
  memmove(l->sess.data + 16 * (i + 1), l->sess.data + 16 * i,
          l->sess.len - 16 * i);
  put64(l->sess.data + 16 * i, w->start_us);
  put64(l->sess.data + 16 * i + 8, w->end_us);
  l->sess.len += 16;
  return SL_OK;
}

static bool intersects(const sl_window_t *a, const sl_window_t *b) {
  return a->start_us <= b->end_us && b->start_us <= a->end_us;
}

/* Move the parts' state into the merged window m (not yet stored). */
static int sess_merge(const wcfg_t *c, wlocal_t *l, const sl_window_t *m,
                      const uint32_t *parts, uint32_t n_parts) {
  int rc = acc_init(c, l, &l->m, NULL);
  l->moved.len = 0;
  for (uint32_t k = 0; k < n_parts && rc == SL_OK; k++) {
    sl_window_t s = sess_at(l, parts[k]);
    bool exists;
    if ((rc = acc_load(l, &s, &l->b, &exists)) != SL_OK) break;
    if (!exists) continue;
    bool fired = l->b.data[16] != 0;
    if (fired && c->mode != WM_PROCESS &&
        (rc = emit_result(c, l, &s, &l->b, SL_ROW_DELETE)) != SL_OK)
      break;
    if ((rc = acc_merge(c, l, &l->m, &l->b)) != SL_OK) break;
    if (c->mode == WM_PROCESS) {
      sl_list_iter_t it;
      sl_slice_t r;
      if ((rc = set_ns(l, &s)) != SL_OK ||
          (rc = sl_list_iter(l->rows, &it)) != SL_OK)
        break;
      while (rc == SL_OK && sl_list_next(&it, &r)) {
        uint32_t len = r.len;
        rc = sl_bytes_append(&l->moved, &len, 4);
        if (rc == SL_OK) rc = sl_bytes_append(&l->moved, r.ptr, r.len);
      }
      if (rc != SL_OK) break;
    }
    /* Its timer stays: timers are unique per (time, key), and another
     * window of the key may share this time.  The handler matches windows
     * by time, so a timer left behind does nothing. */
    rc = window_clear(c, l, &s);
  }
  if (rc != SL_OK) return rc;
  l->m.data[16] = 0; /* the merged window has not fired */
  if ((rc = acc_store(l, m, &l->m)) != SL_OK) return rc;
  for (size_t off = 0; c->mode == WM_PROCESS && off < l->moved.len;) {
    uint32_t len;
    memcpy(&len, l->moved.data + off, 4);
    if ((rc = sl_list_add(l->rows, l->moved.data + off + 4, len)) != SL_OK)
      return rc;
    off += 4 + len;
  }
  return sl_ctx_event_timer_register(l->ctx, fire_time(m));
}

static int session_add(const wcfg_t *c, wlocal_t *l, const sl_row_t *row,
                       int64_t ts, int64_t wm) {
  int rc = sess_load(l);
  if (rc != SL_OK) return rc;
  sl_window_t m = {ts, sl__sat_add(ts, c->spec.gap_us), 0};
  uint32_t n = sess_n(l), parts[64], n_parts = 0;
  uint32_t *pp = parts;
  if (n > 64 && (pp = sl_malloc(n * sizeof(uint32_t))) == NULL)
    return SL_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    sl_window_t s = sess_at(l, i);
    if (!intersects(&s, &m)) continue;
    if (s.start_us < m.start_us) m.start_us = s.start_us;
    if (s.end_us > m.end_us) m.end_us = s.end_us;
    pp[n_parts++] = i;
  }
  if (cleanup_time(c, &m) <= wm) {
    if (pp != parts) sl_free(pp);
    return sl__op_emit_side(l->ctx, 1, row);
  }
  sl_window_t only = n_parts == 1 ? sess_at(l, pp[0]) : m;
  if (n_parts == 1 && only.start_us == m.start_us && only.end_us == m.end_us) {
    /* Inside an existing session: an ordinary add. */
    if (pp != parts) sl_free(pp);
    return window_add(c, l, &m, row, ts);
  }
  if (n_parts) rc = sess_merge(c, l, &m, pp, n_parts);
  for (uint32_t k = n_parts; k-- > 0 && rc == SL_OK;) sess_remove(l, pp[k]);
  if (pp != parts) sl_free(pp);
  if (rc == SL_OK) rc = sess_insert(l, &m);
  if (rc == SL_OK) rc = sess_store(l);
  return rc == SL_OK ? window_add(c, l, &m, row, ts) : rc;
}

/* ------------------------------------------------------------------ */
/* Window enumeration shared by both layouts: the windows that hold event
 * time ts, latest start first (cumulate: largest first), as (start, end)
 * pairs in l->wins.  False when one of them would overflow int64 (see
 * sl__window_starts). */

static int64_t cum_base(const wcfg_t *c, int64_t x) {
  int64_t d = sl__floor_mod(x, c->spec.size_us) -
              sl__floor_mod(c->spec.offset_us, c->spec.size_us);
  if (d < 0) d += c->spec.size_us;
  return x - d;
}

static bool cum_check(const wcfg_t *c, int64_t ts, int64_t *out_base) {
  int64_t rel, base, end, cleanup;
  if (__builtin_sub_overflow(ts, c->spec.offset_us, &rel) ||
      __builtin_sub_overflow(ts, sl__floor_mod(rel, c->spec.size_us), &base) ||
      __builtin_add_overflow(base, c->spec.size_us, &end) ||
      __builtin_add_overflow(end - 1, c->spec.allowed_lateness_us, &cleanup) ||
      cleanup == INT64_MAX)
    return false;
  *out_base = base;
  return true;
}

static int wins_of(const wcfg_t *c, wlocal_t *l, int64_t ts, bool *out_ok) {
  const sl_window_spec_t *s = &c->spec;
  l->wins.len = 0;
  *out_ok = false;
  int rc = SL_OK;
  if (s->kind == SL_WINDOW_CUMULATE) {
    int64_t base;
    if (!cum_check(c, ts, &base)) return SL_OK;
    for (int64_t e = base + s->size_us; e > ts && rc == SL_OK;
         e -= s->step_us) {
      int64_t w[2] = {base, e};
      rc = sl_bytes_append(&l->wins, w, sizeof(w));
    }
    *out_ok = true;
    return rc;
  }
  int64_t size = s->size_us;
  int64_t slide = s->kind == SL_WINDOW_SLIDING ? s->slide_us : size;
  int64_t start, lo;
  if (!sl__window_starts(ts, size, slide, s->offset_us, s->allowed_lateness_us,
                         &start, &lo))
    return SL_OK;
  for (bool more = start >= lo; more && rc == SL_OK;
       more = sl__window_next_start(&start, lo, slide)) {
    int64_t w[2] = {start, start + size};
    rc = sl_bytes_append(&l->wins, w, sizeof(w));
  }
  *out_ok = true;
  return rc;
}

static uint32_t wins_n(const wlocal_t *l) {
  return (uint32_t)(l->wins.len / 16);
}

static sl_window_t wins_at(const wlocal_t *l, uint32_t i) {
  sl_window_t w = {get64(l->wins.data + 16 * i),
                   get64(l->wins.data + 16 * i + 8), 0};
  return w;
}

/* ------------------------------------------------------------------ */
/* Slicing (tumbling, sliding and cumulate windows with built-in aggregates,
 * or a user aggregate with merge).  Time is cut into slices of length g
 * (the size for tumbling, gcd(size, slide) for sliding, the step for
 * cumulate), aligned to the offset; every window is a run of whole slices.
 * Per key one value of "window.acc" (no namespace) holds
 *
 *   header  i64 fired end: windows ending at or before it have fired (or
 *               were due with nothing in them)
 *           i64 pending timer: the earliest event timer this key has
 *               registered and not yet seen fire (INT64_MAX: none)
 *           u32 slices, u32 key row length
 *   slices  by start: i64 start, i64 rows, i64 largest event time,
 *           u32 payload length, u32 zero, payload (built-in aggregates:
 *           per column i64 count and 8 bytes value; a user aggregate:
 *           its bytes)
 *   key row (built-in aggregates), as in the per-window layout.
 *
 * A row goes into one slice.  A window [start, end) fires by combining
 * its slices (agg_merge, or the user's merge) into the per-window
 * accumulator format above, so emitting is shared with the per-window
 * layout.  One event timer per key is pending at a time: at the end - 1
 * of the key's earliest window with rows that has not fired, or at the
 * time its oldest slice can go.  When it fires, the key emits every
 * window the watermark has passed, oldest first, drops the slices that
 * no window can be updated through any more (the last window holding it
 * is past end - 1 + allowed lateness), and registers the next timer.  The
 * timers stay exact over checkpoints: they are the timer service's, and
 * the pending time is in the value. */

#define SHDR 24u
#define SLH 32u
#define NO_END INT64_MAX

static uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Smallest window end >= x, or NO_END. */
static int64_t end_ceil(const wcfg_t *c, int64_t x) {
  int64_t d = c->eoff - sl__floor_mod(x, c->fs), r;
  if (d < 0) d += c->fs;
  return __builtin_add_overflow(x, d, &r) ? NO_END : r;
}

/* Largest window end <= x. */
static int64_t end_floor(const wcfg_t *c, int64_t x) {
  int64_t d = sl__floor_mod(x, c->fs) - c->eoff;
  if (d < 0) d += c->fs;
  return x - d;
}

static int64_t win_start(const wcfg_t *c, int64_t end) {
  return c->spec.kind == SL_WINDOW_CUMULATE ? cum_base(c, end - 1)
                                            : end - c->spec.size_us;
}

/* The windows holding slice a end in [first_end(a), last_end(a)]. */
static int64_t first_end(const wcfg_t *c, int64_t a) {
  return end_ceil(c, a + 1);
}

static int64_t last_end(const wcfg_t *c, int64_t a) {
  if (c->spec.kind == SL_WINDOW_CUMULATE)
    return sl__sat_add(cum_base(c, a), c->spec.size_us);
  return end_floor(c, sl__sat_add(a, c->spec.size_us));
}

/* When no window holding slice a can change any more. */
static int64_t slice_death(const wcfg_t *c, int64_t a) {
  return sl__sat_add(last_end(c, a) - 1, c->spec.allowed_lateness_us);
}

static uint32_t ks_n(const wlocal_t *l) { return get32(l->ks.data + 16); }

static size_t slice_size(const uint8_t *sp) { return SLH + get32(sp + 24); }

/* Load the current key's slices into l->ks; *exists says whether any. */
static int ks_load(wlocal_t *l, bool *exists) {
  int rc = clear_ns(l);
  if (rc != SL_OK) return rc;
  l->ks.len = 0;
  sl_slice_t v;
  rc = sl_value_get(l->acc, &v);
  if (rc == SL_ENOTFOUND) {
    *exists = false;
    return SL_OK;
  }
  if (rc != SL_OK) return rc;
  *exists = true;
  if ((rc = sl_bytes_append(&l->ks, v.ptr, v.len)) != SL_OK) return rc;
  /* Validate the walk once here; the rest trusts it. */
  if (v.len < SHDR) goto bad;
  size_t off = SHDR;
  for (uint32_t i = 0, n = ks_n(l); i < n; i++) {
    if (l->ks.len - off < SLH || l->ks.len - off < slice_size(l->ks.data + off))
      goto bad;
    off += slice_size(l->ks.data + off);
  }
  if (l->ks.len - off != get32(l->ks.data + 20)) goto bad;
  return SL_OK;
bad:
  return sl_ctx_fail(l->ctx, SL_ECORRUPT, "window state of a key (%u bytes) "
                     "does not hold whole slices", v.len);
}

/* A fresh value for the current key: the header and, for built-in
 * aggregates, the key row of `row`. */
static int ks_init(const wcfg_t *c, wlocal_t *l, const sl_row_t *row) {
  l->ks.len = 0;
  uint8_t h[SHDR] = {0};
  put64(h, INT64_MIN);
  put64(h + 8, INT64_MAX);
  int rc = sl_bytes_append(&l->ks, h, SHDR);
  if (rc != SL_OK || c->mode != WM_AGG) return rc;
  sl_row_t kr;
  if ((rc = key_row(c, l, row, &kr)) != SL_OK) return rc;
  put32(l->ks.data + 20, kr.len);
  return sl_bytes_append(&l->ks, kr.data, kr.len);
}

static int ks_store(wlocal_t *l) {
  int rc = clear_ns(l);
  if (rc != SL_OK) return rc;
  if (ks_n(l) == 0) return sl_state_clear(l->acc);
  return sl_value_put(l->acc, l->ks.data, l->ks.len);
}

/* Make the slice payload at offset `off` `len` bytes long. */
static int slice_resize(wlocal_t *l, size_t off, uint32_t len) {
  uint8_t *sp = l->ks.data + off;
  uint32_t old = get32(sp + 24);
  if (len > old) {
    int rc = sl_bytes_reserve(&l->ks, l->ks.len + (len - old));
    if (rc != SL_OK) return rc;
    sp = l->ks.data + off;
  }
  size_t tail = off + SLH + old;
  memmove(sp + SLH + len, l->ks.data + tail, l->ks.len - tail);
  l->ks.len = l->ks.len - old + len;
  put32(sp + 24, len);
  return SL_OK;
}

/* Fold a row at ts into slice a (created if missing). */
static int slice_add(const wcfg_t *c, wlocal_t *l, int64_t a,
                     const sl_row_t *row, int64_t ts) {
  size_t off = SHDR;
  uint32_t n = ks_n(l), i = 0;
  for (; i < n; i++) {
    int64_t s = get64(l->ks.data + off);
    if (s >= a) break;
    off += slice_size(l->ks.data + off);
  }
  if (i == n || get64(l->ks.data + off) != a) {
    uint32_t plen = c->mode == WM_AGG ? 16 * c->n_cols : 0;
    int rc = sl_bytes_reserve(&l->ks, l->ks.len + SLH + plen);
    if (rc != SL_OK) return rc;
    uint8_t *sp = l->ks.data + off;
    memmove(sp + SLH + plen, sp, l->ks.len - off);
    memset(sp, 0, SLH + plen);
    put64(sp, a);
    put64(sp + 16, INT64_MIN);
    put32(sp + 24, plen);
    l->ks.len += SLH + plen;
    put32(l->ks.data + 16, n + 1);
  }
  uint8_t *sp = l->ks.data + off;
  put64(sp + 8, get64(sp + 8) + 1);
  if (ts > get64(sp + 16)) put64(sp + 16, ts);
  if (c->mode == WM_AGG) return agg_add(c, l, sp + SLH, row);
  l->u.len = 0;
  int rc = sl_bytes_append(&l->u, sp + SLH, get32(sp + 24));
  if (rc == SL_OK && (rc = c->fns.add(c->user, row, &l->u)) != SL_OK)
    return sl_ctx_fail(l->ctx, rc, "window add function failed");
  if (rc == SL_OK) rc = slice_resize(l, off, (uint32_t)l->u.len);
  if (rc == SL_OK) memcpy(l->ks.data + off + SLH, l->u.data, l->u.len);
  return rc;
}

/* Combine the slices of the window ending at `end` into dst, in the
 * per-window accumulator format (header, payload, key row). */
static int combine(const wcfg_t *c, wlocal_t *l, int64_t end, sl_bytes_t *dst) {
  int64_t start = win_start(c, end);
  dst->len = 0;
  uint8_t h[HDR] = {0};
  put64(h + 8, INT64_MIN);
  int rc = sl_bytes_append(dst, h, HDR);
  if (rc == SL_OK && c->mode == WM_AGG) {
    rc = sl_bytes_reserve(dst, HDR + 16 * (size_t)c->n_cols);
    if (rc == SL_OK) {
      memset(dst->data + HDR, 0, 16 * (size_t)c->n_cols);
      dst->len += 16 * (size_t)c->n_cols;
    }
  }
  if (rc != SL_OK) return rc;
  bool is_first = true;
  size_t off = SHDR;
  for (uint32_t i = 0, n = ks_n(l); i < n && rc == SL_OK; i++) {
    const uint8_t *sp = l->ks.data + off;
    off += slice_size(sp);
    int64_t a = get64(sp);
    if (a < start) continue;
    if (a >= end) break;
    put64(dst->data, get64(dst->data) + get64(sp + 8));
    if (get64(sp + 16) > get64(dst->data + 8)) put64(dst->data + 8, get64(sp + 16));
    sl_slice_t p = {sp + SLH, get32(sp + 24)};
    if (c->mode == WM_AGG) {
      rc = agg_merge(c, l, dst->data + HDR, p.ptr);
    } else if (is_first) {
      l->u.len = 0;
      rc = sl_bytes_append(&l->u, p.ptr, p.len);
    } else if ((rc = c->fns.merge(c->user, p, &l->u)) != SL_OK) {
      rc = sl_ctx_fail(l->ctx, rc, "window merge function failed");
    }
    is_first = false;
  }
  if (rc != SL_OK) return rc;
  if (c->mode == WM_AGG) {
    uint32_t klen = get32(l->ks.data + 20);
    return sl_bytes_append(dst, l->ks.data + l->ks.len - klen, klen);
  }
  return is_first ? SL_OK : sl_bytes_append(dst, l->u.data, l->u.len);
}

/* The first window end >= x whose window holds a slice, or NO_END. */
static int64_t next_end(const wcfg_t *c, const wlocal_t *l, int64_t x) {
  int64_t cx = end_ceil(c, x);
  if (cx == NO_END) return NO_END;
  size_t off = SHDR;
  for (uint32_t i = 0, n = ks_n(l); i < n; i++) {
    const uint8_t *sp = l->ks.data + off;
    off += slice_size(sp);
    int64_t a = get64(sp), fe = first_end(c, a);
    int64_t e = fe > cx ? fe : cx;
    if (e <= last_end(c, a)) return e;
  }
  return NO_END;
}

static int emit_end(const wcfg_t *c, wlocal_t *l, int64_t end,
                    const sl_bytes_t *acc, sl_row_kind_t kind) {
  sl_window_t w = {win_start(c, end), end, 0};
  return emit_result(c, l, &w, acc, kind);
}

/* Register the key's timer at t unless an earlier one is pending. */
static int want_timer(wlocal_t *l, int64_t t) {
  if (t >= get64(l->ks.data + 8)) return SL_OK;
  put64(l->ks.data + 8, t);
  return sl_ctx_event_timer_register(l->ctx, t);
}

/* A row at ts that the watermark has passed: per window as the
 * per-window layout does (late rows skip the window; a window that fired
 * emits -U and +U; one the watermark passed with nothing in it fires at
 * once). */
static int sliced_add_behind(const wcfg_t *c, wlocal_t *l, const sl_row_t *row,
                             int64_t ts, int64_t a, int64_t wm) {
  uint32_t n = wins_n(l), n_late = 0;
  for (uint32_t i = 0; i < n; i++) {
    sl_window_t w = wins_at(l, i);
    if (cleanup_time(c, &w) <= wm) n_late++;
  }
  if (n_late == n) return sl__op_emit_side(l->ctx, 1, row);
  bool exists;
  int rc = ks_load(l, &exists);
  if (rc == SL_OK && !exists) rc = ks_init(c, l, row);
  if (rc != SL_OK) return rc;
  int64_t fired_end = get64(l->ks.data);
  /* The old results, one accumulator per window (length first). */
  l->old.len = 0;
  for (uint32_t i = 0; i < n && rc == SL_OK; i++) {
    sl_window_t w = wins_at(l, i);
    if (cleanup_time(c, &w) <= wm) continue;
    if ((rc = combine(c, l, w.end_us, &l->a)) != SL_OK) break;
    uint64_t len = get64(l->a.data) ? l->a.len : 0;
    rc = sl_bytes_append(&l->old, &len, 8);
    if (rc == SL_OK) rc = sl_bytes_append(&l->old, l->a.data, len);
  }
  if (rc == SL_OK) rc = slice_add(c, l, a, row, ts);
  int64_t need = slice_death(c, a);
  size_t off = 0;
  for (uint32_t i = 0; i < n && rc == SL_OK; i++) {
    sl_window_t w = wins_at(l, i);
    if (cleanup_time(c, &w) <= wm) continue;
    uint64_t len;
    memcpy(&len, l->old.data + off, 8);
    off += 8;
    if ((rc = combine(c, l, w.end_us, &l->a)) != SL_OK) break;
    if (len && w.end_us <= fired_end) {
      l->b.len = 0;
      rc = sl_bytes_append(&l->b, l->old.data + off, len);
      if (rc == SL_OK)
        rc = emit_end(c, l, w.end_us, &l->b, SL_ROW_UPDATE_BEFORE);
      if (rc == SL_OK)
        rc = emit_end(c, l, w.end_us, &l->a, SL_ROW_UPDATE_AFTER);
    } else if (len == 0 && fire_time(&w) <= wm) {
      rc = emit_end(c, l, w.end_us, &l->a, SL_ROW_INSERT);
    } else if (fire_time(&w) > wm && fire_time(&w) < need) {
      need = fire_time(&w);
    }
    off += len;
  }
  if (rc != SL_OK) return rc;
  /* Every window the watermark passed has fired or stays empty. */
  int64_t due = end_floor(c, sl__sat_add(wm, 1));
  if (due > fired_end) put64(l->ks.data, due);
  if ((rc = want_timer(l, need)) != SL_OK) return rc;
  return ks_store(l);
}

static int sliced_process(const wcfg_t *c, wlocal_t *l, const sl_row_t *row,
                          int64_t ts, int64_t wm) {
  const sl_window_spec_t *s = &c->spec;
  int64_t base, lo, a;
  bool ok;
  if (s->kind == SL_WINDOW_CUMULATE) ok = cum_check(c, ts, &base);
  else
    ok = sl__window_starts(ts, s->size_us,
                           s->kind == SL_WINDOW_SLIDING ? s->slide_us
                                                        : s->size_us,
                           s->offset_us, s->allowed_lateness_us, &base, &lo);
  if (!ok)
    return sl_ctx_fail(l->ctx, SL_EOVERFLOW,
                       "window '%s': event time %lld (field '%s') is too "
                       "close to the limits of int64 for a window of %lld "
                       "us", c->uid, (long long)ts, s->time_field,
                       (long long)s->size_us);
  /* A sliding window whose slide exceeds its size leaves gaps: a row in
   * one is in no window and goes, as a late row does, to the side
   * output. */
  if (s->kind != SL_WINDOW_CUMULATE && base < lo)
    return sl__op_emit_side(l->ctx, 1, row);
  /* ts - offset does not overflow (checked above). */
  a = ts - sl__floor_mod(ts - s->offset_us, c->g);
  if (ts <= wm) {
    int rc = wins_of(c, l, ts, &ok);
    return rc == SL_OK ? sliced_add_behind(c, l, row, ts, a, wm) : rc;
  }
  /* Ahead of the watermark: no window of ts is due, none is late. */
  bool exists;
  int rc = ks_load(l, &exists);
  if (rc == SL_OK && !exists) rc = ks_init(c, l, row);
  if (rc == SL_OK) rc = slice_add(c, l, a, row, ts);
  if (rc == SL_OK) rc = want_timer(l, first_end(c, a) - 1);
  return rc == SL_OK ? ks_store(l) : rc;
}

/* The key's timer at ts: fire what the watermark passed, drop dead slices,
 * register the next timer. */
static int sliced_timer(const wcfg_t *c, wlocal_t *l, int64_t ts) {
  bool exists;
  int rc = ks_load(l, &exists);
  if (rc != SL_OK || !exists) return rc;
  int64_t wm = sl_ctx_watermark(l->ctx);
  if (wm < ts) wm = ts;
  bool changed = false;
  if (get64(l->ks.data + 8) == ts) {
    put64(l->ks.data + 8, INT64_MAX); /* consumed */
    changed = true;
  }
  int64_t fired = get64(l->ks.data);
  int64_t e = next_end(c, l, fired == INT64_MAX ? INT64_MAX : fired + 1);
  while (e != NO_END && e - 1 <= wm) {
    if ((rc = combine(c, l, e, &l->a)) != SL_OK) return rc;
    if (get64(l->a.data) &&
        (rc = emit_end(c, l, e, &l->a, SL_ROW_INSERT)) != SL_OK)
      return rc;
    put64(l->ks.data, e);
    changed = true;
    e = e == NO_END ? NO_END : next_end(c, l, e + 1);
  }
  /* Drop the slices no window can be updated through any more. */
  size_t off = SHDR;
  uint32_t n = ks_n(l), k = 0;
  while (k < n && slice_death(c, get64(l->ks.data + off)) <= wm) {
    off += slice_size(l->ks.data + off);
    k++;
  }
  if (k) {
    memmove(l->ks.data + SHDR, l->ks.data + off, l->ks.len - off);
    l->ks.len -= off - SHDR;
    put32(l->ks.data + 16, n - k);
    changed = true;
  }
  if (ks_n(l) == 0) {
    if ((rc = clear_ns(l)) != SL_OK) return rc;
    return sl_state_clear(l->acc);
  }
  int64_t next = e == NO_END ? INT64_MAX : e - 1;
  int64_t d = slice_death(c, get64(l->ks.data + SHDR));
  if (d < next) next = d;
  if (next != INT64_MAX && next < get64(l->ks.data + 8)) {
    if ((rc = want_timer(l, next)) != SL_OK) return rc;
    changed = true;
  }
  return changed ? ks_store(l) : SL_OK;
}

/* ------------------------------------------------------------------ */
/* The process function. */

/*
 * Layouts of the window states (checked on restore, state_compat.c), from
 * what defines their bytes and how they are found again: the window kind
 * and size (a window is found from its timer as [end - size, end)), then
 * the payload: the built-in aggregates with the type of their 8-byte
 * value and the key fields, a user aggregate's bytes, or nothing (process
 * functions keep the rows, as rows of the input, in "window.rows").
 */
static void assigner_layout(const sl_window_spec_t *s, sl_acc_t *b) {
  switch (s->kind) {
  case SL_WINDOW_TUMBLING:
    sl__acc_printf(b, "tumbling %lld us", (long long)s->size_us);
    break;
  case SL_WINDOW_SLIDING:
    sl__acc_printf(b, "sliding %lld us", (long long)s->size_us);
    break;
  case SL_WINDOW_CUMULATE:
    sl__acc_printf(b, "cumulate %lld us", (long long)s->size_us);
    break;
  default:
    sl__acc_printf(b, "session");
  }
}

static char *acc_layout(const wcfg_t *c) {
  sl_acc_t b;
  sl__acc_init(&b);
  /* Slices: their length and alignment define which rows a slice holds;
   * the windows are combined from them when they fire, so a change of
   * slide or allowed lateness keeps the bytes' meaning (window.c,
   * "Slicing"). */
  if (c->is_sliced)
    sl__acc_printf(&b, "per key: slices of %lld us (offset %lld us), ",
                   (long long)c->g,
                   (long long)sl__floor_mod(c->spec.offset_us, c->g));
  assigner_layout(&c->spec, &b);
  if (c->mode == WM_REDUCE) sl__acc_printf(&b, "; user aggregate");
  if (c->mode == WM_PROCESS) sl__acc_printf(&b, "; rows in window.rows");
  if (c->mode == WM_AGG) {
    sl__acc_printf(&b, "; key ");
    sl__state_layout_schema(&b, c->key_schema);
    sl__acc_printf(&b, ";");
    for (uint32_t i = 0; i < c->n_cols; i++) {
      const wcol_t *col = &c->cols[i];
      /* avg keeps its sum; min and max the input's value. */
      wcol_t as = *col;
      if (as.fn == SL_AGG_AVG) as.fn = SL_AGG_SUM;
      sl_type_t in = {col->in_type, 18, col->scale, true};
      char tb[48];
      const char *field =
          col->in_field >= 0
              ? sl_schema_field(c->in_schema, (uint32_t)col->in_field)->name
              : "";
      sl__acc_printf(&b, "%s %s(%s):%s", i ? "," : "", agg_name(col->fn),
                     field, sl_type_format(col_out_type(&as, in), tb,
                                           sizeof(tb)));
    }
  }
  return sl__state_layout_finish(&b);
}

static char *rows_layout(const wcfg_t *c) {
  sl_acc_t b;
  sl__acc_init(&b);
  assigner_layout(&c->spec, &b);
  sl__acc_printf(&b, "; rows ");
  sl__state_layout_schema(&b, c->in_schema);
  return sl__state_layout_finish(&b);
}

static int w_open(sl_ctx_t *ctx, void *user) {
  wcfg_t *c = user;
  wlocal_t *l = sl_calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  l->ctx = ctx;
  sl_ctx_set_local(ctx, l);
  sl_bytes_init(&l->a);
  sl_bytes_init(&l->b);
  sl_bytes_init(&l->m);
  sl_bytes_init(&l->u);
  sl_bytes_init(&l->sess);
  sl_bytes_init(&l->moved);
  sl_bytes_init(&l->ks);
  sl_bytes_init(&l->wins);
  sl_bytes_init(&l->old);
  if (c->mode == WM_AGG && sl_row_builder_init(&l->kb, c->key_schema) != SL_OK)
    return SL_ENOMEM;
  /* The layouts are copied by sl_ctx_state. */
  char *layout = acc_layout(c);
  if (layout == NULL) return SL_ENOMEM;
  sl_state_desc_t d = {.name = "window.acc", .kind = SL_STATE_VALUE,
                       .version = c->is_sliced ? 2 : 1, .layout = layout};
  int rc = sl_ctx_state(ctx, &d, &l->acc);
  sl_free(layout);
  if (rc == SL_OK && c->mode == WM_PROCESS) {
    if ((layout = rows_layout(c)) == NULL) return SL_ENOMEM;
    sl_state_desc_t r = {.name = "window.rows", .kind = SL_STATE_LIST,
                         .version = 1, .layout = layout};
    rc = sl_ctx_state(ctx, &r, &l->rows);
    sl_free(layout);
  }
  if (rc == SL_OK && c->spec.kind == SL_WINDOW_SESSION) {
    sl_state_desc_t s = {.name = "window.sessions", .kind = SL_STATE_VALUE,
                         .version = 1, .layout = "(start:int64, end:int64)..."};
    rc = sl_ctx_state(ctx, &s, &l->sessions);
  }
  return rc;
}

static void w_close(sl_ctx_t *ctx, void *user) {
  wcfg_t *c = user;
  wlocal_t *l = sl_ctx_local(ctx);
  if (l == NULL) return;
  sl_bytes_close(&l->a);
  sl_bytes_close(&l->b);
  sl_bytes_close(&l->m);
  sl_bytes_close(&l->u);
  sl_bytes_close(&l->sess);
  sl_bytes_close(&l->moved);
  sl_bytes_close(&l->ks);
  sl_bytes_close(&l->wins);
  sl_bytes_close(&l->old);
  if (c->mode == WM_AGG) sl_row_builder_close(&l->kb);
  sl_free(l);
}

static int w_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  const wcfg_t *c = user;
  wlocal_t *l = sl_ctx_local(ctx);
  sl_row_kind_t kind = sl_row_kind(row);
  if (kind == SL_ROW_UPDATE_BEFORE || kind == SL_ROW_DELETE)
    return sl_ctx_fail(ctx, SL_ENOTSUP,
                       "window '%s' got a %s row; windows take insert-only "
                       "input", c->uid, sl_row_kind_name(kind));
  if (sl_row_is_null(row, c->time_field))
    return sl_ctx_fail(ctx, SL_EINVAL,
                       "window '%s': a row has a null event time in field "
                       "'%s'", c->uid, c->spec.time_field);
  int64_t ts = sl_row_get_i64(row, c->time_field);
  int64_t wm = sl_ctx_watermark(ctx);
  const sl_window_spec_t *s = &c->spec;
  if (s->kind == SL_WINDOW_SESSION) return session_add(c, l, row, ts, wm);
  if (c->is_sliced) return sliced_process(c, l, row, ts, wm);
  bool ok;
  int rc = wins_of(c, l, ts, &ok);
  if (rc != SL_OK) return rc;
  if (!ok)
    return sl_ctx_fail(ctx, SL_EOVERFLOW,
                       "window '%s': event time %lld (field '%s') is too "
                       "close to the limits of int64 for a window of %lld "
                       "us", c->uid, (long long)ts, s->time_field,
                       (long long)s->size_us);
  uint32_t n = wins_n(l), n_late = 0;
  for (uint32_t i = 0; i < n; i++) {
    sl_window_t w = wins_at(l, i);
    if (cleanup_time(c, &w) <= wm) {
      n_late++;
      continue;
    }
    if ((rc = window_add(c, l, &w, row, ts)) != SL_OK) return rc;
  }
  if (n_late == n) return sl__op_emit_side(ctx, 1, row);
  return SL_OK;
}

static int w_on_event_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  const wcfg_t *c = user;
  wlocal_t *l = sl_ctx_local(ctx);
  const sl_window_spec_t *s = &c->spec;
  int64_t late = s->allowed_lateness_us;
  bool removed;
  int rc = SL_OK;
  if (c->is_sliced) return sliced_timer(c, l, ts);
  if (s->kind != SL_WINDOW_SESSION) {
    /* Timers are below INT64_MAX (sl__window_starts), and a window that
     * would start below INT64_MIN does not exist. */
    int64_t end = sl__sat_add(ts, 1), xe, xs;
    sl_window_t w = {s->kind == SL_WINDOW_CUMULATE
                         ? cum_base(c, end - 1)
                         : sl__sat_add(end, -s->size_us),
                     end, 0};
    rc = window_fire(c, l, &w, &removed);
    if (rc == SL_OK && late > 0 && !__builtin_sub_overflow(end, late, &xe) &&
        !__builtin_sub_overflow(xe, s->size_us, &xs)) {
      if (s->kind == SL_WINDOW_CUMULATE) xs = cum_base(c, xe - 1);
      sl_window_t x = {xs, xe, 0};
      bool exists;
      rc = acc_load(l, &x, &l->a, &exists);
      if (rc == SL_OK && exists && l->a.data[16])
        rc = window_clear(c, l, &x);
    }
    return rc;
  }
  if ((rc = sess_load(l)) != SL_OK) return rc;
  bool changed = false;
  for (uint32_t i = 0; i < sess_n(l) && rc == SL_OK;) {
    sl_window_t w = sess_at(l, i);
    bool drop = false;
    if (fire_time(&w) == ts) {
      rc = window_fire(c, l, &w, &removed);
      drop = removed;
    } else if (late > 0 && cleanup_time(c, &w) == ts) {
      rc = window_clear(c, l, &w);
      drop = true;
    }
    if (drop) {
      sess_remove(l, i);
      changed = true;
    } else {
      i++;
    }
  }
  if (rc == SL_OK && changed) rc = sess_store(l);
  return rc;
}

const sl_process_fns_t sl__window_fns = {
    w_open, w_process, NULL, NULL, NULL, w_close, NULL, NULL, w_on_event_timer};
