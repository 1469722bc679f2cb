/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Joins (sl_window.h) as two-input keyed process functions.  Every join
 * emits the left row's fields, then the right row's (a right field whose
 * name the left already uses gets the suffix "_right").
 *
 *  interval  per key and side, the rows by event time: list state
 *            "join.rows" (namespace: side byte, big-endian time) and a
 *            sorted index of the times in "join.index" (namespace: side).
 *            A left row at t matches right rows in [t + lower, t + upper];
 *            it is dropped when the watermark passes t + upper (a right
 *            row at t when it passes t - lower): one event-time timer at
 *            that time; the handler trims both indexes.
 *  window    per key, side and window the rows ("join.rows", namespace:
 *            side, start, end); at the window's end the cross product is
 *            emitted and the window cleared.
 *  regular   per key and side a multiset of rows (map state "join.left" /
 *            "join.right": row bytes -> count).  An insert (+I, +U) on one
 *            side emits one row per matching row of the other, with the
 *            input's kind; a retraction (-U, -D) removes the row and emits
 *            the retracted joined rows with its kind.
 * Rows behind the watermark (event time <= watermark) are dropped by the
 * interval and window joins.  See docs/windows.md.
 */
#include <stdio.h>

#include "ops/ops.h"
#include "sluice/sl_state.h"
#include "sluice/sl_time.h"
#include "sluice/sl_window.h"
#include "state/state.h"

typedef enum jkind_e { J_INTERVAL = 0, J_WINDOW = 1, J_REGULAR = 2 } jkind_t;

typedef struct jcfg_s {
  jkind_t kind;
  uint32_t time_field[2];
  int64_t lower_us, upper_us;   /* interval */
  sl_window_spec_t spec;        /* window: tumbling or sliding */
  const sl_schema_t *in[2];
  sl_schema_t *out;
  uint32_t n_left;              /* fields of the left input */
  bool has_window_cols;         /* window_start, window_end at the end */
  char *uid;
} jcfg_t;

typedef struct jlocal_s {
  sl_ctx_t *ctx;
  sl_state_t *rows, *index, *side[2];
  sl_bytes_t idx, tmp;
  sl_row_builder_t *b;
} jlocal_t;

void sl__join_config_destroy(void *p) {
  jcfg_t *c = p;
  if (c == NULL) return;
  sl_schema_unref(c->out);
  sl_free((char *)c->spec.time_field);
  sl_free(c->uid);
  sl_free(c);
}

/* ------------------------------------------------------------------ */
/* Configuration. */

static int time_field(const sl_schema_t *s, const char *name, const char *side,
                      uint32_t *out, sl_error_t **out_err) {
  int idx = name ? sl_schema_index(s, name) : -1;
  if (idx < 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "no event-time field '%s' in the %s input",
                        name ? name : "", side);
  uint8_t t = sl_schema_field(s, (uint32_t)idx)->type.id;
  if (t != SL_TYPE_TIMESTAMP && t != SL_TYPE_INT64)
    return sl_error_set(out_err, SL_ETYPE,
                        "event-time field '%s' of the %s input is %s; it must "
                        "be timestamp or int64 (microseconds)",
                        name, side, sl_type_name((sl_type_id_t)t));
  *out = (uint32_t)idx;
  return SL_OK;
}

static int out_schema(jcfg_t *c, sl_error_t **out_err) {
  uint32_t nl = sl_schema_n_fields(c->in[0]), nr = sl_schema_n_fields(c->in[1]);
  uint32_t n = nl + nr + (c->has_window_cols ? 2 : 0);
  sl_field_t *f = sl_calloc(n, sizeof(*f));
  char **names = sl_calloc(nr + 1, sizeof(char *));
  int rc = SL_ENOMEM;
  if (f == NULL || names == NULL) goto out;
  for (uint32_t i = 0; i < nl; i++) f[i] = *sl_schema_field(c->in[0], i);
  for (uint32_t i = 0; i < nr; i++) {
    f[nl + i] = *sl_schema_field(c->in[1], i);
    if (sl_schema_index(c->in[0], f[nl + i].name) >= 0) {
      size_t len = strlen(f[nl + i].name) + 7;
      if ((names[i] = sl_malloc(len)) == NULL) goto out;
      snprintf(names[i], len, "%s_right", f[nl + i].name);
      f[nl + i].name = names[i];
    }
  }
  if (c->has_window_cols) {
    sl_type_t ts = {SL_TYPE_TIMESTAMP, 0, 0, false};
    f[nl + nr] = (sl_field_t){"window_start", ts};
    f[nl + nr + 1] = (sl_field_t){"window_end", ts};
  }
  c->n_left = nl;
  rc = sl_schema_create(f, n, &c->out, out_err);
out:
  if (rc == SL_ENOMEM) sl_error_set(out_err, rc, "out of memory");
  for (uint32_t i = 0; names && i < nr; i++) sl_free(names[i]);
  sl_free(names);
  sl_free(f);
  return rc;
}

int sl__join_config_create(int kind, const sl_schema_t *left,
                           const sl_schema_t *right, const char *left_time,
                           const char *right_time, int64_t lower_us,
                           int64_t upper_us, const sl_window_spec_t *spec,
                           const char *uid, void **out_cfg,
                           sl_schema_t **out, sl_error_t **out_err) {
  jcfg_t *c = sl_calloc(1, sizeof(*c));
  if (c == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  c->kind = (jkind_t)kind;
  c->in[0] = left;
  c->in[1] = right;
  c->lower_us = lower_us;
  c->upper_us = upper_us;
  int rc = SL_OK;
  if ((c->uid = sl_strdup(uid ? uid : "join")) == NULL) rc = SL_ENOMEM;
  if (rc == SL_OK && kind != J_REGULAR) {
    rc = time_field(left, left_time, "left", &c->time_field[0], out_err);
    if (rc == SL_OK)
      rc = time_field(right, right_time, "right", &c->time_field[1], out_err);
  }
  if (rc == SL_OK && kind == J_INTERVAL && lower_us > upper_us)
    rc = sl_error_set(out_err, SL_EINVAL,
                      "the interval's lower bound %lld us is above its upper "
                      "bound %lld us", (long long)lower_us,
                      (long long)upper_us);
  if (rc == SL_OK && kind == J_WINDOW) {
    c->spec = *spec;
    c->spec.time_field = NULL;
    c->has_window_cols = true;
    if (spec->kind != SL_WINDOW_TUMBLING && spec->kind != SL_WINDOW_SLIDING)
      rc = sl_error_set(out_err, SL_ENOTSUP,
                        "window joins take tumbling or sliding windows");
    else if (spec->size_us <= 0 ||
             (spec->kind == SL_WINDOW_SLIDING && spec->slide_us <= 0))
      rc = sl_error_set(out_err, SL_EINVAL,
                        "a window join needs a size > 0 (and a slide > 0)");
  }
  if (rc == SL_OK) rc = out_schema(c, out_err);
  if (rc != SL_OK) {
    if (rc == SL_ENOMEM) sl_error_set(out_err, rc, "out of memory");
    sl__join_config_destroy(c);
    return rc;
  }
  *out_cfg = c;
  *out = sl_schema_ref(c->out);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Shared pieces. */

/*
 * Layouts of the join states (checked on restore, state_compat.c): the
 * stored rows are rows of the two inputs, found again by the join's kind
 * (and for a window join by its window: [end - size, end)).
 */
static char *j_layout(const jcfg_t *c, int side) {
  static const char *const kinds[] = {"interval join", "window join",
                                      "regular join"};
  sl_acc_t b;
  sl__acc_init(&b);
  sl__acc_printf(&b, "%s", kinds[c->kind]);
  if (c->kind == J_WINDOW)
    sl__acc_printf(&b, " %s %lld us",
                   c->spec.kind == SL_WINDOW_SLIDING ? "sliding" : "tumbling",
                   (long long)c->spec.size_us);
  for (int i = 0; i < 2; i++) {
    if (side >= 0 && side != i) continue;
    sl__acc_printf(&b, "; %s ", i ? "right" : "left");
    sl__state_layout_schema(&b, c->in[i]);
  }
  if (c->kind == J_REGULAR) sl__acc_printf(&b, " -> count:int64");
  return sl__state_layout_finish(&b);
}

static int j_open(sl_ctx_t *ctx, void *user) {
  jcfg_t *c = user;
  jlocal_t *l = sl_calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  l->ctx = ctx;
  sl_ctx_set_local(ctx, l);
  sl_bytes_init(&l->idx);
  sl_bytes_init(&l->tmp);
  int rc = SL_OK;
  if (c->kind == J_REGULAR) {
    /* The layouts are copied by sl_ctx_state. */
    static const char *const names[] = {"join.left", "join.right"};
    for (int i = 0; i < 2 && rc == SL_OK; i++) {
      char *layout = j_layout(c, i);
      if (layout == NULL) return SL_ENOMEM;
      sl_state_desc_t a = {.name = names[i], .kind = SL_STATE_MAP,
                           .version = 1, .layout = layout};
      rc = sl_ctx_state(ctx, &a, &l->side[i]);
      sl_free(layout);
    }
    return rc;
  }
  char *layout = j_layout(c, -1);
  if (layout == NULL) return SL_ENOMEM;
  sl_state_desc_t r = {.name = "join.rows", .kind = SL_STATE_LIST,
                       .version = 1, .layout = layout};
  rc = sl_ctx_state(ctx, &r, &l->rows);
  sl_free(layout);
  if (rc == SL_OK && c->kind == J_INTERVAL) {
    sl_state_desc_t x = {.name = "join.index", .kind = SL_STATE_VALUE,
                         .version = 1, .layout = "interval join; times:int64"};
    rc = sl_ctx_state(ctx, &x, &l->index);
  }
  return rc;
}

static void j_close(sl_ctx_t *ctx, void *user) {
  SL_UNUSED(user);
  jlocal_t *l = sl_ctx_local(ctx);
  if (l == NULL) return;
  sl_bytes_close(&l->idx);
  sl_bytes_close(&l->tmp);
  sl_free(l);
}

/* Emit left ++ right (+ window columns) with the given kind. */
static int emit_pair(const jcfg_t *c, jlocal_t *l, const sl_row_t *a,
                     const sl_row_t *b, sl_row_kind_t kind,
                     const sl_window_t *w) {
  sl_row_builder_t *out = sl_ctx_builder(l->ctx);
  sl_row_builder_set_kind(out, kind);
  uint32_t na = sl_schema_n_fields(a->schema), nb = sl_schema_n_fields(b->schema);
  for (uint32_t i = 0; i < na; i++) {
    sl_value_t v;
    sl_row_get_value(a, i, &v);
    sl_row_builder_set_value(out, i, &v);
  }
  for (uint32_t i = 0; i < nb; i++) {
    sl_value_t v;
    sl_row_get_value(b, i, &v);
    sl_row_builder_set_value(out, c->n_left + i, &v);
  }
  if (w) {
    sl_row_builder_set_i64(out, na + nb, w->start_us);
    sl_row_builder_set_i64(out, na + nb + 1, w->end_us);
  }
  return sl_ctx_emit_builder(l->ctx);
}

static int emit_ordered(const jcfg_t *c, jlocal_t *l, uint32_t side,
                        const sl_row_t *mine, const sl_row_t *other,
                        sl_row_kind_t kind, const sl_window_t *w) {
  return side == 0 ? emit_pair(c, l, mine, other, kind, w)
                   : emit_pair(c, l, other, mine, kind, w);
}

static int check_insert_only(const jcfg_t *c, jlocal_t *l,
                             const sl_row_t *row) {
  sl_row_kind_t k = sl_row_kind(row);
  if (k == SL_ROW_UPDATE_BEFORE || k == SL_ROW_DELETE)
    return sl_ctx_fail(l->ctx, SL_ENOTSUP,
                       "join '%s' got a %s row; interval and window joins take "
                       "insert-only input (use a regular join for changelogs)",
                       c->uid, sl_row_kind_name(k));
  return SL_OK;
}

static int row_time(const jcfg_t *c, jlocal_t *l, uint32_t side,
                    const sl_row_t *row, int64_t *out) {
  uint32_t f = c->time_field[side];
  if (sl_row_is_null(row, f))
    return sl_ctx_fail(l->ctx, SL_EINVAL,
                       "join '%s': a %s row has a null event time in field "
                       "'%s'", c->uid, side ? "right" : "left",
                       sl_schema_field(c->in[side], f)->name);
  *out = sl_row_get_i64(row, f);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Interval join. */

static int set_ns_side_ts(jlocal_t *l, uint32_t side, int64_t ts) {
  uint8_t ns[9];
  ns[0] = (uint8_t)side;
  sl__put_u64be(ns + 1, (uint64_t)ts ^ 0x8000000000000000ull);
  return sl__kstate_set_namespace(l->ctx->kstate, ns, 9);
}

static int set_ns_side(jlocal_t *l, uint32_t side) {
  uint8_t ns = (uint8_t)side;
  return sl__kstate_set_namespace(l->ctx->kstate, &ns, 1);
}

/* Load the sorted times of side into l->idx. */
static int idx_load(jlocal_t *l, uint32_t side) {
  int rc = set_ns_side(l, side);
  if (rc != SL_OK) return rc;
  l->idx.len = 0;
  sl_slice_t v;
  rc = sl_value_get(l->index, &v);
  if (rc == SL_ENOTFOUND) return SL_OK;
  if (rc != SL_OK) return rc;
  return sl_bytes_append(&l->idx, v.ptr, v.len);
}

static int idx_store(jlocal_t *l, uint32_t side) {
  int rc = set_ns_side(l, side);
  if (rc != SL_OK) return rc;
  if (l->idx.len == 0) return sl_state_clear(l->index);
  return sl_value_put(l->index, l->idx.data, l->idx.len);
}

static int64_t idx_at(const jlocal_t *l, size_t i) {
  int64_t v;
  memcpy(&v, l->idx.data + 8 * i, 8);
  return v;
}

/* First index i with time >= t. */
static size_t idx_lower(const jlocal_t *l, int64_t t) {
  size_t lo = 0, hi = l->idx.len / 8;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (idx_at(l, mid) < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* When a row of side at ts can no longer match anything. */
static int64_t expiry(const jcfg_t *c, uint32_t side, int64_t ts) {
  return side == 0 ? sl__sat_add(ts, c->upper_us) : sl__sat_add(ts, -c->lower_us);
}

static int interval_row(const jcfg_t *c, jlocal_t *l, uint32_t side,
                        const sl_row_t *row) {
  int64_t ts;
  int rc = check_insert_only(c, l, row);
  if (rc == SL_OK) rc = row_time(c, l, side, row, &ts);
  if (rc != SL_OK) return rc;
  int64_t wm = sl_ctx_watermark(l->ctx);
  if (ts <= wm) return SL_OK; /* late */
  /* Match against the other side first: its rows in the window. */
  uint32_t other = 1 - side;
  int64_t lo = side == 0 ? sl__sat_add(ts, c->lower_us) : sl__sat_add(ts, -c->upper_us);
  int64_t hi = side == 0 ? sl__sat_add(ts, c->upper_us) : sl__sat_add(ts, -c->lower_us);
  if ((rc = idx_load(l, other)) != SL_OK) return rc;
  size_t n = l->idx.len / 8;
  /* Copy the matching times: emitting may not touch state, but keep the
   * loop independent of l->idx all the same. */
  l->tmp.len = 0;
  for (size_t i = idx_lower(l, lo); i < n && idx_at(l, i) <= hi; i++)
    if ((rc = sl_bytes_append(&l->tmp, l->idx.data + 8 * i, 8)) != SL_OK)
      return rc;
  for (size_t k = 0; k < l->tmp.len / 8; k++) {
    int64_t t;
    memcpy(&t, l->tmp.data + 8 * k, 8);
    if ((rc = set_ns_side_ts(l, other, t)) != SL_OK) return rc;
    sl_list_iter_t it;
    if ((rc = sl_list_iter(l->rows, &it)) != SL_OK) return rc;
    sl_slice_t s;
    while (sl_list_next(&it, &s)) {
      sl_row_t o;
      sl_row_view(&o, c->in[other], s.ptr, s.len);
      if ((rc = emit_ordered(c, l, side, row, &o, SL_ROW_INSERT, NULL)) !=
          SL_OK)
        return rc;
    }
  }
  /* Keep the row while a row of the other side may still match it. */
  int64_t exp = expiry(c, side, ts);
  if (exp <= wm) return SL_OK;
  if ((rc = idx_load(l, side)) != SL_OK) return rc;
  size_t pos = idx_lower(l, ts);
  if (pos == l->idx.len / 8 || idx_at(l, pos) != ts) {
    if ((rc = sl_bytes_reserve(&l->idx, l->idx.len + 8)) != SL_OK) return rc;
    memmove(l->idx.data + 8 * (pos + 1), l->idx.data + 8 * pos,
            l->idx.len - 8 * pos);
    memcpy(l->idx.data + 8 * pos, &ts, 8);
    l->idx.len += 8;
    if ((rc = idx_store(l, side)) != SL_OK) return rc;
  }
  if ((rc = set_ns_side_ts(l, side, ts)) != SL_OK ||
      (rc = sl_list_add(l->rows, row->data, row->len)) != SL_OK)
    return rc;
  return sl_ctx_event_timer_register(l->ctx, exp);
}

/* Drop the rows of both sides that expired by time t. */
static int interval_timer(const jcfg_t *c, jlocal_t *l, int64_t t) {
  for (uint32_t side = 0; side < 2; side++) {
    int rc = idx_load(l, side);
    if (rc != SL_OK) return rc;
    size_t n = l->idx.len / 8, k = 0;
    while (k < n && expiry(c, side, idx_at(l, k)) <= t) {
      if ((rc = set_ns_side_ts(l, side, idx_at(l, k))) != SL_OK ||
          (rc = sl_state_clear(l->rows)) != SL_OK)
        return rc;
      k++;
    }
    if (k == 0) continue;
    memmove(l->idx.data, l->idx.data + 8 * k, l->idx.len - 8 * k);
    l->idx.len -= 8 * k;
    if ((rc = idx_store(l, side)) != SL_OK) return rc;
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Window join. */

static int set_ns_window(jlocal_t *l, uint32_t side, const sl_window_t *w) {
  uint8_t ns[17];
  ns[0] = (uint8_t)side;
  sl__put_u64be(ns + 1, (uint64_t)w->start_us ^ 0x8000000000000000ull);
  sl__put_u64be(ns + 9, (uint64_t)w->end_us ^ 0x8000000000000000ull);
  return sl__kstate_set_namespace(l->ctx->kstate, ns, 17);
}

static int window_row(const jcfg_t *c, jlocal_t *l, uint32_t side,
                      const sl_row_t *row) {
  int64_t ts;
  int rc = check_insert_only(c, l, row);
  if (rc == SL_OK) rc = row_time(c, l, side, row, &ts);
  if (rc != SL_OK) return rc;
  int64_t wm = sl_ctx_watermark(l->ctx);
  const sl_window_spec_t *s = &c->spec;
  int64_t slide = s->kind == SL_WINDOW_SLIDING ? s->slide_us : s->size_us;
  int64_t start, lo;
  if (!sl__window_starts(ts, s->size_us, slide, s->offset_us, 0, &start,
                         &lo))
    return sl_ctx_fail(l->ctx, SL_EOVERFLOW,
                       "join '%s': event time %lld of a %s row is too close "
                       "to the limits of int64 for a window of %lld us",
                       c->uid, (long long)ts, side == 0 ? "left" : "right",
                       (long long)s->size_us);
  for (bool more = start >= lo; more;
       more = sl__window_next_start(&start, lo, slide)) {
    sl_window_t w = {start, start + s->size_us, 0};
    if (w.end_us - 1 <= wm) continue; /* late for this window */
    if ((rc = set_ns_window(l, side, &w)) != SL_OK ||
        (rc = sl_list_add(l->rows, row->data, row->len)) != SL_OK ||
        (rc = sl_ctx_event_timer_register(l->ctx, w.end_us - 1)) != SL_OK)
      return rc;
  }
  return SL_OK;
}

static int window_timer(const jcfg_t *c, jlocal_t *l, int64_t t) {
  /* t = end - 1 < INT64_MAX (sl__window_starts): no overflow. */
  sl_window_t w = {t + 1 - c->spec.size_us, t + 1, 0};
  /* Copy the left rows out: iterating two lists of one state at once. */
  int rc = set_ns_window(l, 0, &w);
  if (rc != SL_OK) return rc;
  sl_list_iter_t it;
  if ((rc = sl_list_iter(l->rows, &it)) != SL_OK) return rc;
  l->tmp.len = 0;
  sl_slice_t s;
  while (sl_list_next(&it, &s)) {
    uint32_t len = s.len;
    if ((rc = sl_bytes_append(&l->tmp, &len, 4)) != SL_OK ||
        (rc = sl_bytes_append(&l->tmp, s.ptr, s.len)) != SL_OK)
      return rc;
  }
  if ((rc = sl_state_clear(l->rows)) != SL_OK) return rc;
  if ((rc = set_ns_window(l, 1, &w)) != SL_OK) return rc;
  for (size_t off = 0; off < l->tmp.len;) {
    uint32_t len;
    memcpy(&len, l->tmp.data + off, 4);
    sl_row_t a;
    sl_row_view(&a, c->in[0], l->tmp.data + off + 4, len);
    off += 4 + len;
    if ((rc = sl_list_iter(l->rows, &it)) != SL_OK) return rc;
    while (sl_list_next(&it, &s)) {
      sl_row_t b;
      sl_row_view(&b, c->in[1], s.ptr, s.len);
      if ((rc = emit_pair(c, l, &a, &b, SL_ROW_INSERT, &w)) != SL_OK)
        return rc;
    }
  }
  return sl_state_clear(l->rows);
}

/* ------------------------------------------------------------------ */
/* Regular join on changelogs. */

static int regular_row(const jcfg_t *c, jlocal_t *l, uint32_t side,
                       const sl_row_t *row) {
  sl_row_kind_t kind = sl_row_kind(row);
  bool is_retract = kind == SL_ROW_UPDATE_BEFORE || kind == SL_ROW_DELETE;
  /* The stored form is the row with kind +I, so that +I and -D of the
   * same row are the same multiset element. */
  l->tmp.len = 0;
  int rc = sl_bytes_append(&l->tmp, row->data, row->len);
  if (rc != SL_OK) return rc;
  l->tmp.data[0] = (uint8_t)((l->tmp.data[0] & ~3u) | SL_ROW_INSERT);
  sl_state_t *mine = l->side[side], *other = l->side[1 - side];
  sl_slice_t v;
  int64_t count = 0;
  rc = sl_map_get(mine, l->tmp.data, l->tmp.len, &v);
  if (rc == SL_OK) memcpy(&count, v.ptr, 8);
  else if (rc != SL_ENOTFOUND) return rc;
  if (is_retract) {
    if (count == 0)
      return sl_ctx_fail(l->ctx, SL_ESTATE,
                         "join '%s': a %s on the %s input retracts a row that "
                         "was never inserted; the changelog is not consistent",
                         c->uid, sl_row_kind_name(kind),
                         side ? "right" : "left");
    count--;
    rc = count ? sl_map_put(mine, l->tmp.data, l->tmp.len, &count, 8)
               : sl_map_remove(mine, l->tmp.data, l->tmp.len);
  } else {
    count++;
    rc = sl_map_put(mine, l->tmp.data, l->tmp.len, &count, 8);
  }
  if (rc != SL_OK) return rc;
  sl_map_iter_t it;
  if ((rc = sl_map_iter(other, &it)) != SL_OK) return rc;
  sl_slice_t k, cv;
  while (sl_map_next(&it, &k, &cv)) {
    int64_t n;
    memcpy(&n, cv.ptr, 8);
    sl_row_t o;
    sl_row_view(&o, c->in[1 - side], k.ptr, k.len);
    for (int64_t r = 0; r < n; r++)
      if ((rc = emit_ordered(c, l, side, row, &o, kind, NULL)) != SL_OK)
        return rc;
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */

static int j_row(sl_ctx_t *ctx, void *user, uint32_t side,
                 const sl_row_t *row) {
  const jcfg_t *c = user;
  jlocal_t *l = sl_ctx_local(ctx);
  switch (c->kind) {
  case J_INTERVAL: return interval_row(c, l, side, row);
  case J_WINDOW: return window_row(c, l, side, row);
  default: return regular_row(c, l, side, row);
  }
}

static int j_left(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  return j_row(ctx, user, 0, row);
}

static int j_right(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  return j_row(ctx, user, 1, row);
}

static int j_timer(sl_ctx_t *ctx, void *user, int64_t t) {
  const jcfg_t *c = user;
  jlocal_t *l = sl_ctx_local(ctx);
  return c->kind == J_INTERVAL ? interval_timer(c, l, t)
                               : window_timer(c, l, t);
}

const sl_process_fns_t sl__join_fns = {j_open, j_left,  j_right, NULL, NULL,
                                       j_close, NULL, NULL, j_timer};
