/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDC source's chunk planning (even ranges over a dense integer key,
 * sampled bounds otherwise), the chunk's WHERE condition and the chunk
 * list codec that the enumerator keeps in its state.  See cdc_int.h and
 * docs/cdc-mariadb.md, "Chunks".
 *
 * Codec (version 1, integers little-endian, str = u32 length + bytes):
 *   "SLCK" u8 version  str db  str table
 *   u32 n_key  { u8 kind  str name } * n_key
 *   u32 n      { u32 id  u8 flags (1: low, 2: high)  [low] [high] } * n
 *   a bound is n_key values: i64 (SL_CDC_KEY_INT) or str (the others)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdc_int.h"
#include "mariadb_int.h"

#define CHUNKS_MAGIC "SLCK"
#define CHUNKS_VERSION 1
#define MAX_KEY 64u
#define MAX_CHUNKS (1u << 24)

/* ------------------------------------------------------------------ */
/* Lists and bounds.                                                   */

static void bound_free(sl__cdc_kv_t *v, uint32_t n) {
  if (v == NULL) return;
  for (uint32_t i = 0; i < n; i++) sl_free(v[i].p);
  sl_free(v);
}

void sl__cdc_chunks_free(sl__cdc_chunks_t *cl) {
  if (cl == NULL) return;
  for (uint32_t i = 0; i < cl->n; i++) {
    bound_free(cl->chunks[i].low, cl->n_key);
    bound_free(cl->chunks[i].high, cl->n_key);
  }
  sl_free(cl->chunks);
  for (uint32_t k = 0; cl->key_names && k < cl->n_key; k++)
    sl_free(cl->key_names[k]);
  sl_free(cl->key_names);
  sl_free(cl->key_kind);
  sl_free(cl->db);
  sl_free(cl->table);
  sl_free(cl);
}

static sl__cdc_kv_t *bound_copy(const sl__cdc_kv_t *v, uint32_t n) {
  sl__cdc_kv_t *c = sl_calloc(n, sizeof(*c));
  if (c == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    c[i].i = v[i].i;
    c[i].len = v[i].len;
    if (v[i].p != NULL) {
      c[i].p = sl_malloc(v[i].len ? v[i].len : 1);
      if (c[i].p == NULL) {
        bound_free(c, n);
        return NULL;
      }
      memcpy(c[i].p, v[i].p, v[i].len);
    }
  }
  return c;
}

static bool bound_eq(const sl__cdc_kv_t *a, const sl__cdc_kv_t *b,
                     const uint8_t *kind, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (kind[i] == SL_CDC_KEY_INT) {
      if (a[i].i != b[i].i) return false;
    } else if (a[i].len != b[i].len ||
               (a[i].len && memcmp(a[i].p, b[i].p, a[i].len) != 0)) {
      return false;
    }
  }
  return true;
}

/* Lexicographic a < b when every key is an integer. */
static bool int_bound_lt(const sl__cdc_kv_t *a, const sl__cdc_kv_t *b,
                         uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (a[i].i != b[i].i) return a[i].i < b[i].i;
  return false;
}

static bool text_ok(const uint8_t *p, uint32_t len) {
  if (len == 0) return false;
  for (uint32_t i = 0; i < len; i++) {
    uint8_t ch = p[i];
    if (!((ch >= '0' && ch <= '9') || ch == ' ' || ch == '.' || ch == ':' ||
          ch == '+' || ch == '-'))
      return false;
  }
  return true;
}

static sl__cdc_chunks_t *chunks_new(const sl__cdc_table_t *t) {
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  if (cl == NULL) return NULL;
  cl->db = sl_strdup(t->db);
  cl->table = sl_strdup(t->name);
  cl->n_key = t->n_key;
  cl->key_names = sl_calloc(t->n_key, sizeof(char *));
  cl->key_kind = sl_calloc(t->n_key, 1);
  if (!cl->db || !cl->table || !cl->key_names || !cl->key_kind) goto fail;
  for (uint32_t k = 0; k < t->n_key; k++) {
    cl->key_names[k] = sl_strdup(t->cols[t->key[k]].name);
    if (cl->key_names[k] == NULL) goto fail;
    cl->key_kind[k] = t->key_kind[k];
  }
  return cl;
fail:
  sl__cdc_chunks_free(cl);
  return NULL;
}

/* Append a chunk [low, high) (copies of the bounds; NULL = unbounded). */
static int chunks_add(sl__cdc_chunks_t *cl, uint32_t *cap,
                    const sl__cdc_kv_t *low, const sl__cdc_kv_t *high) {
  if (cl->n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 16;
    void *p = sl_realloc(cl->chunks, nc * sizeof(*cl->chunks));
    if (p == NULL) return SL_ENOMEM;
    cl->chunks = p;
    *cap = nc;
  }
  sl__cdc_chunk_t *ch = &cl->chunks[cl->n];
  memset(ch, 0, sizeof(*ch));
  ch->id = cl->n;
  if (low && (ch->low = bound_copy(low, cl->n_key)) == NULL) return SL_ENOMEM;
  if (high && (ch->high = bound_copy(high, cl->n_key)) == NULL) {
    bound_free(ch->low, cl->n_key);
    ch->low = NULL;
    return SL_ENOMEM;
  }
  cl->n++;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* SQL.                                                                */

static int append_value(sl_bytes_t *b, uint8_t kind, const sl__cdc_kv_t *v) {
  switch ((sl__cdc_key_kind_t)kind) {
  case SL_CDC_KEY_INT:
    return sl_bytes_printf(b, "%" PRId64, v->i);
  case SL_CDC_KEY_STR: {
    /* A coercible utf8mb4 literal: the comparison takes the column's
     * collation, as ORDER BY does. */
    int rc = sl_bytes_append_str(b, "_utf8mb4 ");
    return rc == SL_OK ? sl__mariadb_hex(b, v->p, v->len) : rc;
  }
  case SL_CDC_KEY_BIN:
    return sl__mariadb_hex(b, v->p, v->len);
  case SL_CDC_KEY_TEXT: {
    int rc = sl_bytes_append(b, "'", 1);
    if (rc == SL_OK) rc = sl_bytes_append(b, v->p, v->len);
    if (rc == SL_OK) rc = sl_bytes_append(b, "'", 1);
    return rc;
  }
  }
  return SL_EINVAL;
}

static int append_keys(sl_bytes_t *b, const sl__cdc_chunks_t *cl) {
  int rc = cl->n_key > 1 ? sl_bytes_append(b, "(", 1) : SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++) {
    if (k) rc = sl_bytes_append(b, ", ", 2);
    if (rc == SL_OK) rc = sl__mariadb_ident(b, cl->key_names[k]);
  }
  if (rc == SL_OK && cl->n_key > 1) rc = sl_bytes_append(b, ")", 1);
  return rc;
}

static int append_bound(sl_bytes_t *b, const sl__cdc_chunks_t *cl,
                        const sl__cdc_kv_t *v) {
  int rc = cl->n_key > 1 ? sl_bytes_append(b, "(", 1) : SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++) {
    if (k) rc = sl_bytes_append(b, ", ", 2);
    if (rc == SL_OK) rc = append_value(b, cl->key_kind[k], &v[k]);
  }
  if (rc == SL_OK && cl->n_key > 1) rc = sl_bytes_append(b, ")", 1);
  return rc;
}

/* key op bound.  With several key columns, the row comparison is led by
 * the same comparison (not strict) on the first column alone, which the
 * optimizer reads as a range of the key's index; the meaning is the same. */
static int append_cmp(sl_bytes_t *b, const sl__cdc_chunks_t *cl,
                      const char *op, const sl__cdc_kv_t *v) {
  int rc = SL_OK;
  if (cl->n_key > 1) {
    const char *lead = op[1] == '<' ? " <= " : " >= ";
    rc = sl_bytes_append(b, "(", 1);
    if (rc == SL_OK) rc = sl__mariadb_ident(b, cl->key_names[0]);
    if (rc == SL_OK) rc = sl_bytes_append_str(b, lead);
    if (rc == SL_OK) rc = append_value(b, cl->key_kind[0], &v[0]);
    if (rc == SL_OK) rc = sl_bytes_append_str(b, " AND ");
  }
  if (rc == SL_OK) rc = append_keys(b, cl);
  if (rc == SL_OK) rc = sl_bytes_append_str(b, op);
  if (rc == SL_OK) rc = append_bound(b, cl, v);
  if (rc == SL_OK && cl->n_key > 1) rc = sl_bytes_append(b, ")", 1);
  return rc;
}

int sl__cdc_chunk_where(const sl__cdc_chunks_t *cl, const sl__cdc_chunk_t *ch,
                        sl_bytes_t *b) {
  int rc = SL_OK;
  if (ch->low == NULL && ch->high == NULL) return sl_bytes_append_str(b, "1=1");
  if (ch->low != NULL) rc = append_cmp(b, cl, " >= ", ch->low);
  if (rc == SL_OK && ch->low != NULL && ch->high != NULL)
    rc = sl_bytes_append_str(b, " AND ");
  if (rc == SL_OK && ch->high != NULL) {
    /* The first chunk also takes the rows whose (single) key is NULL. */
    bool with_null = ch->low == NULL && cl->n_key == 1;
    if (with_null) rc = sl_bytes_append(b, "(", 1);
    if (rc == SL_OK) rc = append_cmp(b, cl, " < ", ch->high);
    if (rc == SL_OK && with_null) {
      rc = sl_bytes_append_str(b, " OR ");
      if (rc == SL_OK) rc = sl__mariadb_ident(b, cl->key_names[0]);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, " IS NULL)");
    }
  }
  return rc;
}

static int append_table(sl_bytes_t *b, const sl__cdc_table_t *t) {
  int rc = sl__mariadb_ident(b, t->db);
  if (rc == SL_OK) rc = sl_bytes_append(b, ".", 1);
  if (rc == SL_OK) rc = sl__mariadb_ident(b, t->name);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Planning.                                                           */

static int run_query(MYSQL *c, const char *server, sl_bytes_t *sql,
                     MYSQL_RES **out, sl_error_t **out_err) {
  const char *q = sl__mariadb_cstr(sql);
  if (q == NULL) return SL_ENOMEM;
  if (mysql_real_query(c, q, (unsigned long)sql->len) != 0 ||
      (*out = mysql_store_result(c)) == NULL)
    return sl_error_set(out_err, SL_EIO,
                        "mariadb-cdc: %s: planning chunks: %s failed: error "
                        "%u: %s", server, q, mysql_errno(c), mysql_error(c));
  return SL_OK;
}

static int parse_i64(const char *s, int64_t *out) {
  if (s == NULL || *s == '\0') return SL_EPARSE;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0') return SL_EPARSE;
  *out = v;
  return SL_OK;
}

/* A fetched key tuple (n_key columns from column 0) as a bound. */
static int row_to_bound(const sl__cdc_chunks_t *cl, const char *server,
                        MYSQL_ROW row, const unsigned long *lens,
                        sl__cdc_kv_t **out, sl_error_t **out_err) {
  sl__cdc_kv_t *v = sl_calloc(cl->n_key, sizeof(*v));
  if (v == NULL) return SL_ENOMEM;
  for (uint32_t k = 0; k < cl->n_key; k++) {
    if (row[k] == NULL) {
      bound_free(v, cl->n_key);
      return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: planning "
                          "chunks of `%s`.`%s`: a NULL key value in column "
                          "`%s`", server, cl->db, cl->table,
                          cl->key_names[k]);
    }
    if (cl->key_kind[k] == SL_CDC_KEY_INT) {
      if (parse_i64(row[k], &v[k].i) != SL_OK) {
        bound_free(v, cl->n_key);
        return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: planning "
                            "chunks of `%s`.`%s`: key `%s` value '%.40s' is "
                            "not an int64", server, cl->db, cl->table,
                            cl->key_names[k], row[k]);
      }
      continue;
    }
    if (lens[k] > UINT32_MAX ||
        (cl->key_kind[k] == SL_CDC_KEY_TEXT &&
         !text_ok((const uint8_t *)row[k], (uint32_t)lens[k]))) {
      bound_free(v, cl->n_key);
      return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: planning chunks "
                          "of `%s`.`%s`: key `%s` value '%.40s' cannot be a "
                          "bound", server, cl->db, cl->table,
                          cl->key_names[k], row[k]);
    }
    v[k].len = (uint32_t)lens[k];
    v[k].p = sl_malloc(lens[k] ? lens[k] : 1);
    if (v[k].p == NULL) {
      bound_free(v, cl->n_key);
      return SL_ENOMEM;
    }
    memcpy(v[k].p, row[k], lens[k]);
  }
  *out = v;
  return SL_OK;
}

static int plan_even(MYSQL *c, const char *server, const sl__cdc_table_t *t,
                     const sl__cdc_plan_opts_t *o, sl__cdc_chunks_t *cl,
                     uint32_t *cap, bool *out_is_even, sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  const char *k = t->cols[t->key[0]].name;
  int rc = sl_bytes_append_str(&sql, "SELECT MIN(");
  if (rc == SL_OK) rc = sl__mariadb_ident(&sql, k);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, "), MAX(");
  if (rc == SL_OK) rc = sl__mariadb_ident(&sql, k);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, "), COUNT(*) FROM ");
  if (rc == SL_OK) rc = append_table(&sql, t);
  MYSQL_RES *r = NULL;
  if (rc == SL_OK) rc = run_query(c, server, &sql, &r, out_err);
  sl_bytes_close(&sql);
  if (rc != SL_OK) return rc;
  MYSQL_ROW row = mysql_fetch_row(r);
  int64_t lo = 0, hi = 0, cnt = 0;
  bool has = row && row[0] && row[1] && row[2] &&
             parse_i64(row[0], &lo) == SL_OK &&
             parse_i64(row[1], &hi) == SL_OK &&
             parse_i64(row[2], &cnt) == SL_OK && cnt > 0;
  mysql_free_result(r);
  *out_is_even = false;
  if (!has) return SL_ENOTFOUND; /* empty: one chunk */
  double factor = ((double)hi - (double)lo + 1.0) / (double)cnt;
  if (factor < o->even_factor_min || factor > o->even_factor_max)
    return SL_EAGAIN; /* not dense: sample */
  double dstep = factor * (double)o->chunk_rows;
  int64_t step = dstep >= 9.0e18 ? INT64_MAX : (int64_t)dstep;
  if (step < 1) step = 1;
  *out_is_even = true;
  sl__cdc_kv_t prev = {0}, cur = {0};
  bool has_prev = false;
  for (int64_t b = lo;;) {
    if (b > INT64_MAX - step) break;
    b += step;
    if (b > hi) break;
    cur.i = b;
    rc = chunks_add(cl, cap, has_prev ? &prev : NULL, &cur);
    if (rc != SL_OK) return rc;
    prev = cur;
    has_prev = true;
    if (cl->n >= MAX_CHUNKS - 1)
      return sl_error_set(out_err, SL_EOVERFLOW, "mariadb-cdc: `%s`.`%s` at "
                          "%s needs more than %u chunks; raise the chunk size",
                          t->db, t->name, server, MAX_CHUNKS);
  }
  return chunks_add(cl, cap, has_prev ? &prev : NULL, NULL);
}

static int plan_sampled(MYSQL *c, const char *server,
                        const sl__cdc_table_t *t, const sl__cdc_plan_opts_t *o,
                        sl__cdc_chunks_t *cl, uint32_t *cap,
                        sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  sl__cdc_kv_t *prev = NULL;
  int rc = SL_OK;
  for (;;) {
    /* The next bound: the chunk_rows-th key after prev (strictly greater
     * than prev in the server's own order), or the chunk_rows-th key of
     * the table for the first bound. */
    sl_bytes_clear(&sql);
    rc = sl_bytes_append_str(&sql, "SELECT ");
    for (uint32_t k = 0; rc == SL_OK && k < t->n_key; k++) {
      if (k) rc = sl_bytes_append(&sql, ", ", 2);
      if (rc == SL_OK) rc = sl__mariadb_ident(&sql, cl->key_names[k]);
    }
    if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " FROM ");
    if (rc == SL_OK) rc = append_table(&sql, t);
    if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " WHERE ");
    if (rc == SL_OK && prev) rc = append_cmp(&sql, cl, " > ", prev);
    for (uint32_t k = 0; rc == SL_OK && !prev && k < t->n_key; k++) {
      if (k) rc = sl_bytes_append_str(&sql, " AND ");
      if (rc == SL_OK) rc = sl__mariadb_ident(&sql, cl->key_names[k]);
      if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " IS NOT NULL");
    }
    if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " ORDER BY ");
    for (uint32_t k = 0; rc == SL_OK && k < t->n_key; k++) {
      if (k) rc = sl_bytes_append(&sql, ", ", 2);
      if (rc == SL_OK) rc = sl__mariadb_ident(&sql, cl->key_names[k]);
    }
    if (rc == SL_OK)
      rc = sl_bytes_printf(&sql, " LIMIT 1 OFFSET %" PRIu64,
                           prev ? o->chunk_rows - 1 : o->chunk_rows);
    MYSQL_RES *r = NULL;
    if (rc == SL_OK) rc = run_query(c, server, &sql, &r, out_err);
    if (rc != SL_OK) break;
    MYSQL_ROW row = mysql_fetch_row(r);
    sl__cdc_kv_t *next = NULL;
    if (row != NULL)
      rc = row_to_bound(cl, server, row, mysql_fetch_lengths(r), &next,
                        out_err);
    mysql_free_result(r);
    if (rc != SL_OK || next == NULL) break;
    rc = chunks_add(cl, cap, prev, next);
    bound_free(prev, cl->n_key);
    prev = next;
    if (rc == SL_OK && cl->n >= MAX_CHUNKS - 1)
      rc = sl_error_set(out_err, SL_EOVERFLOW, "mariadb-cdc: `%s`.`%s` at "
                        "%s needs more than %u chunks; raise the chunk size",
                        t->db, t->name, server, MAX_CHUNKS);
    if (rc != SL_OK) break;
  }
  if (rc == SL_OK) rc = chunks_add(cl, cap, prev, NULL);
  bound_free(prev, cl->n_key);
  sl_bytes_close(&sql);
  return rc;
}

int sl__cdc_plan_chunks(MYSQL *c, const char *server,
                        const sl__cdc_table_t *t,
                        const sl__cdc_plan_opts_t *opts,
                        sl__cdc_chunks_t **out, bool *out_is_even,
                        sl_error_t **out_err) {
  sl__cdc_plan_opts_t o = {0};
  if (opts) o = *opts;
  if (o.chunk_rows == 0) o.chunk_rows = 8096;
  if (o.even_factor_min <= 0) o.even_factor_min = 0.05;
  if (o.even_factor_max <= 0) o.even_factor_max = 1000.0;
  if (t->n_key == 0 || t->n_key > MAX_KEY)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: `%s`.`%s`: a chunk "
                        "key has 1 to %u columns", t->db, t->name, MAX_KEY);
  int rc = sl__cdc_session_setup(c, server, out_err);
  if (rc != SL_OK) return rc;
  sl__cdc_chunks_t *cl = chunks_new(t);
  if (cl == NULL) return SL_ENOMEM;
  uint32_t cap = 0;
  bool is_even = false;
  rc = SL_EAGAIN;
  if (t->n_key == 1 && t->key_kind[0] == SL_CDC_KEY_INT) {
    rc = plan_even(c, server, t, &o, cl, &cap, &is_even, out_err);
    if (rc == SL_ENOTFOUND) rc = chunks_add(cl, &cap, NULL, NULL);
  }
  if (rc == SL_EAGAIN)
    rc = plan_sampled(c, server, t, &o, cl, &cap, out_err);
  if (rc != SL_OK) {
    sl__cdc_chunks_free(cl);
    return rc;
  }
  if (out_is_even) *out_is_even = is_even;
  *out = cl;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Membership.                                                         */

/* A decimal's text ("-12.5") as its unscaled value at scale. */
static int parse_unscaled(const uint8_t *p, uint32_t len, unsigned scale,
                          int64_t *out) {
  uint32_t i = 0;
  bool is_neg = false, has_digit = false;
  if (i < len && (p[i] == '-' || p[i] == '+')) is_neg = p[i++] == '-';
  int64_t v = 0;
  unsigned frac = 0;
  bool in_frac = false;
  for (; i < len; i++) {
    if (p[i] == '.' && !in_frac) {
      in_frac = true;
      continue;
    }
    if (p[i] < '0' || p[i] > '9') return SL_EINVAL;
    if (in_frac && ++frac > scale) return SL_EINVAL;
    if (v > (INT64_MAX - 9) / 10) return SL_EINVAL;
    v = v * 10 + (p[i] - '0');
    has_digit = true;
  }
  if (!has_digit) return SL_EINVAL;
  for (; frac < scale; frac++) {
    if (v > INT64_MAX / 10) return SL_EINVAL;
    v *= 10;
  }
  *out = is_neg ? -v : v;
  return SL_OK;
}

int sl__cdc_key_cmp(const sl__cdc_chunks_t *cl, const sl__cdc_table_t *t,
                   uint32_t k, const sl_row_t *row, const sl__cdc_kv_t *v,
                   int *out_cmp, sl_error_t **out_err) {
  const sl__cdc_col_t *col = &t->cols[t->key[k]];
  uint32_t f = t->key[k];
  int64_t x, y;
  switch ((sl__cdc_key_kind_t)cl->key_kind[k]) {
  case SL_CDC_KEY_INT:
    x = sl_row_get_i64(row, f);
    y = v->i;
    break;
  case SL_CDC_KEY_BIN: {
    /* MariaDB compares binary strings byte by byte, then by length. */
    sl_slice_t s = sl_row_get_str(row, f);
    uint32_t n = s.len < v->len ? s.len : v->len;
    int c = n ? memcmp(s.ptr, v->p, n) : 0;
    *out_cmp = c != 0 ? c : (s.len > v->len) - (s.len < v->len);
    return SL_OK;
  }
  case SL_CDC_KEY_TEXT: {
    int rc;
    x = sl_row_get_i64(row, f);
    if (col->conv == SL_CDC_CONV_DECIMAL)
      rc = parse_unscaled(v->p, v->len, col->type.scale, &y);
    else
      rc = sl__cdc_parse_temporal((const char *)v->p, v->len,
                                  col->conv == SL_CDC_CONV_DATE, &y);
    if (rc != SL_OK)
      return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: chunk bound "
                          "'%.*s' of `%s`.`%s` is not a %s value",
                          (int)(v->len > 64 ? 64 : v->len),
                          (const char *)v->p, cl->db, cl->table,
                          col->column_type);
    break;
  }
  default:
    return sl_error_set(out_err, SL_ENOTSUP, "mariadb-cdc: the chunk key "
                        "`%s` of `%s`.`%s` (%s) compares in its collation, "
                        "which sluice does not evaluate",
                        col->name, cl->db, cl->table, col->column_type);
  }
  *out_cmp = (x > y) - (x < y);
  return SL_OK;
}

/* Compare the row's key tuple with a bound, left to right. */
static int cmp_bound(const sl__cdc_chunks_t *cl, const sl__cdc_table_t *t,
                     const sl_row_t *row, const sl__cdc_kv_t *b,
                     int *out_cmp, sl_error_t **out_err) {
  for (uint32_t k = 0; k < cl->n_key; k++) {
    int c = 0;
    int rc = sl__cdc_key_cmp(cl, t, k, row, &b[k], &c, out_err);
    if (rc != SL_OK) return rc;
    if (c != 0) {
      *out_cmp = c;
      return SL_OK;
    }
  }
  *out_cmp = 0;
  return SL_OK;
}

int sl__cdc_chunk_contains(const sl__cdc_chunks_t *cl,
                           const sl__cdc_chunk_t *ch, const sl__cdc_table_t *t,
                           const sl_row_t *row, bool *out_is_in,
                           sl_error_t **out_err) {
  if (t->n_key != cl->n_key)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: the chunk list of "
                        "`%s`.`%s` has %u key columns, the table %u",
                        cl->db, cl->table, cl->n_key, t->n_key);
  for (uint32_t k = 0; k < cl->n_key; k++) {
    if (sl_row_is_null(row, t->key[k])) {
      /* Only a single declared key can be NULL; the first chunk has it. */
      *out_is_in = ch->low == NULL;
      return SL_OK;
    }
  }
  int c = 0, rc;
  if (ch->low != NULL) {
    rc = cmp_bound(cl, t, row, ch->low, &c, out_err);
    if (rc != SL_OK) return rc;
    if (c < 0) {
      *out_is_in = false;
      return SL_OK;
    }
  }
  if (ch->high != NULL) {
    rc = cmp_bound(cl, t, row, ch->high, &c, out_err);
    if (rc != SL_OK) return rc;
    if (c >= 0) {
      *out_is_in = false;
      return SL_OK;
    }
  }
  *out_is_in = true;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Codec.                                                              */

static int put_u32(sl_bytes_t *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  return sl_bytes_append(b, x, 4);
}

static int put_str(sl_bytes_t *b, const void *p, uint32_t n) {
  int rc = put_u32(b, n);
  return rc == SL_OK && n ? sl_bytes_append(b, p, n) : rc;
}

static int put_bound(sl_bytes_t *b, const sl__cdc_chunks_t *cl,
                     const sl__cdc_kv_t *v) {
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++)
    rc = cl->key_kind[k] == SL_CDC_KEY_INT
             ? sl_bytes_append_u64le(b, (uint64_t)v[k].i)
             : put_str(b, v[k].p, v[k].len);
  return rc;
}

int sl__cdc_chunks_encode(const sl__cdc_chunks_t *cl, sl_bytes_t *out) {
  uint8_t ver = CHUNKS_VERSION;
  int rc = sl_bytes_append(out, CHUNKS_MAGIC, 4);
  if (rc == SL_OK) rc = sl_bytes_append(out, &ver, 1);
  if (rc == SL_OK) rc = put_str(out, cl->db, (uint32_t)strlen(cl->db));
  if (rc == SL_OK) rc = put_str(out, cl->table, (uint32_t)strlen(cl->table));
  if (rc == SL_OK) rc = put_u32(out, cl->n_key);
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++) {
    rc = sl_bytes_append(out, &cl->key_kind[k], 1);
    if (rc == SL_OK)
      rc = put_str(out, cl->key_names[k], (uint32_t)strlen(cl->key_names[k]));
  }
  if (rc == SL_OK) rc = put_u32(out, cl->n);
  for (uint32_t i = 0; rc == SL_OK && i < cl->n; i++) {
    const sl__cdc_chunk_t *ch = &cl->chunks[i];
    uint8_t flags = (uint8_t)((ch->low ? 1 : 0) | (ch->high ? 2 : 0));
    rc = put_u32(out, ch->id);
    if (rc == SL_OK) rc = sl_bytes_append(out, &flags, 1);
    if (rc == SL_OK && ch->low) rc = put_bound(out, cl, ch->low);
    if (rc == SL_OK && ch->high) rc = put_bound(out, cl, ch->high);
  }
  return rc;
}

typedef struct rd_s {
  const uint8_t *p;
  size_t len, off;
  sl_error_t **err;
} rd_t;

static int bad(rd_t *r, const char *what) {
  return sl_error_set(r->err, SL_ECORRUPT,
                      "mariadb-cdc chunk list: %s at byte %zu of %zu", what,
                      r->off, r->len);
}

static int get_u8(rd_t *r, uint8_t *v, const char *what) {
  if (r->len - r->off < 1) return bad(r, what);
  *v = r->p[r->off++];
  return SL_OK;
}

static int get_u32(rd_t *r, uint32_t *v, const char *what) {
  if (r->len - r->off < 4) return bad(r, what);
  const uint8_t *q = r->p + r->off;
  *v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
       (uint32_t)q[3] << 24;
  r->off += 4;
  return SL_OK;
}

/* A length-prefixed string; as_cstr: NUL-terminated, no NUL inside,
 * not empty. */
static int get_str(rd_t *r, uint8_t **out, uint32_t *out_len, bool as_cstr,
                   const char *what) {
  uint32_t n;
  int rc = get_u32(r, &n, what);
  if (rc != SL_OK) return rc;
  if (n > r->len - r->off) return bad(r, what);
  if (as_cstr && (n == 0 || memchr(r->p + r->off, 0, n) != NULL))
    return bad(r, what);
  uint8_t *p = sl_malloc((size_t)n + 1);
  if (p == NULL) return SL_ENOMEM;
  if (n) memcpy(p, r->p + r->off, n);
  p[n] = 0;
  r->off += n;
  *out = p;
  if (out_len) *out_len = n;
  return SL_OK;
}

static int get_bound(rd_t *r, const sl__cdc_chunks_t *cl,
                     sl__cdc_kv_t **out) {
  sl__cdc_kv_t *v = sl_calloc(cl->n_key, sizeof(*v));
  if (v == NULL) return SL_ENOMEM;
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++) {
    if (cl->key_kind[k] == SL_CDC_KEY_INT) {
      if (r->len - r->off < 8) rc = bad(r, "a truncated integer bound");
      else {
        v[k].i = (int64_t)sl_load_u64le(r->p + r->off);
        r->off += 8;
      }
      continue;
    }
    size_t at = r->off;
    rc = get_str(r, &v[k].p, &v[k].len, false, "a truncated bound value");
    if (rc == SL_OK && cl->key_kind[k] == SL_CDC_KEY_TEXT &&
        !text_ok(v[k].p, v[k].len)) {
      r->off = at;
      rc = bad(r, "a text bound with characters other than [0-9 .:+-]");
    }
  }
  if (rc != SL_OK) {
    bound_free(v, cl->n_key);
    return rc;
  }
  *out = v;
  return SL_OK;
}

int sl__cdc_chunks_decode(const uint8_t *p, size_t len,
                          sl__cdc_chunks_t **out, sl_error_t **out_err) {
  rd_t r = {p, len, 0, out_err};
  if (len < 5 || memcmp(p, CHUNKS_MAGIC, 4) != 0)
    return bad(&r, "no SLCK magic");
  r.off = 4;
  uint8_t ver;
  int rc = get_u8(&r, &ver, "no version");
  if (rc != SL_OK) return rc;
  if (ver != CHUNKS_VERSION) {
    r.off = 4;
    return bad(&r, "an unknown version (this sluice reads version 1)");
  }
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  if (cl == NULL) return SL_ENOMEM;
  uint32_t n_key = 0, n = 0;
  rc = get_str(&r, (uint8_t **)&cl->db, NULL, true, "a bad database name");
  if (rc == SL_OK)
    rc = get_str(&r, (uint8_t **)&cl->table, NULL, true, "a bad table name");
  if (rc == SL_OK) rc = get_u32(&r, &n_key, "a truncated key count");
  if (rc == SL_OK && (n_key == 0 || n_key > MAX_KEY))
    rc = bad(&r, "a key count outside 1..64");
  if (rc == SL_OK) {
    cl->key_names = sl_calloc(n_key, sizeof(char *));
    cl->key_kind = sl_calloc(n_key, 1);
    if (!cl->key_names || !cl->key_kind) rc = SL_ENOMEM;
    else cl->n_key = n_key;
  }
  for (uint32_t k = 0; rc == SL_OK && k < n_key; k++) {
    rc = get_u8(&r, &cl->key_kind[k], "a truncated key kind");
    if (rc == SL_OK &&
        (cl->key_kind[k] < SL_CDC_KEY_INT || cl->key_kind[k] > SL_CDC_KEY_TEXT))
      rc = bad(&r, "an unknown key kind");
    if (rc == SL_OK)
      rc = get_str(&r, (uint8_t **)&cl->key_names[k], NULL, true,
                   "a bad key column name");
  }
  if (rc == SL_OK) rc = get_u32(&r, &n, "a truncated chunk count");
  /* Every chunk takes at least 5 bytes: the count cannot exceed that. */
  if (rc == SL_OK && (n == 0 || n > MAX_CHUNKS || n > (len - r.off) / 5))
    rc = bad(&r, "a chunk count that is 0 or larger than the bytes hold");
  if (rc == SL_OK) {
    cl->chunks = sl_calloc(n, sizeof(*cl->chunks));
    if (cl->chunks == NULL) rc = SL_ENOMEM;
  }
  bool all_int = true;
  for (uint32_t k = 0; k < cl->n_key; k++)
    if (cl->key_kind[k] != SL_CDC_KEY_INT) all_int = false;
  for (uint32_t i = 0; rc == SL_OK && i < n; i++) {
    sl__cdc_chunk_t *ch = &cl->chunks[i];
    uint32_t id;
    uint8_t flags;
    size_t at = r.off;
    rc = get_u32(&r, &id, "a truncated chunk id");
    if (rc == SL_OK && id != i) {
      r.off = at;
      rc = bad(&r, "chunk ids not running 0, 1, ...");
    }
    ch->id = id;
    at = r.off;
    if (rc == SL_OK) rc = get_u8(&r, &flags, "truncated chunk flags");
    if (rc != SL_OK) break;
    bool want_low = i > 0, want_high = i + 1 < n;
    if (flags != (uint8_t)((want_low ? 1 : 0) | (want_high ? 2 : 0))) {
      r.off = at;
      rc = bad(&r, "chunk bounds that do not chain (the first chunk has no "
                   "low bound, the last no high bound, the others both)");
      break;
    }
    cl->n = i + 1;
    at = r.off;
    if (want_low) rc = get_bound(&r, cl, &ch->low);
    if (rc == SL_OK && want_low &&
        !bound_eq(ch->low, cl->chunks[i - 1].high, cl->key_kind, cl->n_key)) {
      r.off = at;
      rc = bad(&r, "a chunk whose low bound is not the previous chunk's high "
                   "bound");
    }
    at = r.off;
    if (rc == SL_OK && want_high) rc = get_bound(&r, cl, &ch->high);
    if (rc == SL_OK && want_high && want_low && all_int &&
        !int_bound_lt(ch->low, ch->high, cl->n_key)) {
      r.off = at;
      rc = bad(&r, "a chunk whose high bound is not above its low bound");
    }
  }
  if (rc == SL_OK && r.off != len) rc = bad(&r, "trailing bytes");
  if (rc != SL_OK) {
    sl__cdc_chunks_free(cl);
    return rc;
  }
  *out = cl;
  return SL_OK;
}
