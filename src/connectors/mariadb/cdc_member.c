/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Chunk membership for every chunk key kind: which chunk holds a row, as
 * the chunks' WHERE conditions decide on the server.  Integer, binary,
 * decimal and temporal key columns compare here (sl__cdc_key_cmp);
 * char/varchar columns compare in the column's collation: the binary
 * collations of UTF-8 and ascii here, byte by byte with PAD SPACE or NO
 * PAD, every other collation by asking the server.  Answers are cached by
 * the row's key value.  See cdc_int.h and docs/cdc-mariadb.md, "Chunk
 * membership".
 *
 * Finding the chunk: chunk i holds the keys k with high[i-1] <= k <
 * high[i], so the chunk's id is the number of bounds (the chunks' high
 * bounds, increasing) at or below k.  A search over the bounds narrows
 * [lo, hi] with up to PIVOTS comparisons a step: every comparison that
 * needs the server in one step goes in one query, so a list of n chunks
 * takes about log_65(n) round trips per distinct key value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdc_int.h"
#include "mariadb_int.h"

#define PIVOTS 64u
#define CACHE_MAX (1u << 16) /* entries before the cache starts over */

enum {
  MODE_LOCAL = 0,   /* sl__cdc_key_cmp */
  MODE_PAD_BIN = 1, /* bytes, shorter side padded with spaces */
  MODE_NOPAD_BIN = 2, /* bytes, then length */
  MODE_SERVER = 3   /* the server, in the column's collation */
};

typedef struct slot_s {
  uint8_t *key; /* NULL: empty */
  uint32_t len;
  uint32_t chunk;
  uint64_t h;
} slot_t;

struct sl__cdc_member_s {
  MYSQL *c;
  char *server;
  const sl__cdc_table_t *t;
  const sl__cdc_chunks_t *cl;
  uint8_t *mode; /* per key column */
  bool has_server;
  slot_t *slots;
  uint32_t cap, n_used;
  sl_bytes_t key, sql;
  uint64_t n_queries;
};

static bool is_one_of(const char *s, const char *const *list) {
  for (; *list; list++)
    if (strcmp(s, *list) == 0) return true;
  return false;
}

static bool ident_ok(const char *s) {
  if (*s == '\0') return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

void sl__cdc_member_close(sl__cdc_member_t *m) {
  if (m == NULL) return;
  for (uint32_t i = 0; i < m->cap; i++) sl_free(m->slots[i].key);
  sl_free(m->slots);
  sl_free(m->mode);
  sl_free(m->server);
  sl_bytes_close(&m->key);
  sl_bytes_close(&m->sql);
  sl_free(m);
}

uint64_t sl__cdc_member_queries(const sl__cdc_member_t *m) {
  return m->n_queries;
}

int sl__cdc_member_open(MYSQL *c, const char *server, const sl__cdc_table_t *t,
                        const sl__cdc_chunks_t *cl, sl__cdc_member_t **out,
                        sl_error_t **out_err) {
  static const char *const pad_bin[] = {"utf8mb4_bin", "utf8mb3_bin",
                                        "utf8_bin", "ascii_bin", NULL};
  static const char *const nopad_bin[] = {"utf8mb4_nopad_bin",
                                          "utf8mb3_nopad_bin",
                                          "utf8_nopad_bin",
                                          "ascii_nopad_bin", NULL};
  if (t->n_key != cl->n_key)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: the chunk list of "
                        "`%s`.`%s` has %u key columns, the table %u",
                        cl->db, cl->table, cl->n_key, t->n_key);
  sl__cdc_member_t *m = sl_calloc(1, sizeof(*m));
  if (m == NULL) return SL_ENOMEM;
  sl_bytes_init(&m->key);
  sl_bytes_init(&m->sql);
  m->c = c;
  m->t = t;
  m->cl = cl;
  m->server = sl_strdup(server);
  m->mode = sl_calloc(cl->n_key, 1);
  m->slots = sl_calloc(64, sizeof(*m->slots));
  if (m->slots != NULL) m->cap = 64;
  if (!m->server || !m->mode || !m->slots) {
    sl__cdc_member_close(m);
    return SL_ENOMEM;
  }
  for (uint32_t k = 0; k < cl->n_key; k++) {
    const sl__cdc_col_t *col = &t->cols[t->key[k]];
    if (cl->key_kind[k] != SL_CDC_KEY_STR) continue;
    if (is_one_of(col->collation, pad_bin)) m->mode[k] = MODE_PAD_BIN;
    else if (is_one_of(col->collation, nopad_bin)) m->mode[k] = MODE_NOPAD_BIN;
    else m->mode[k] = MODE_SERVER;
    if (m->mode[k] != MODE_SERVER) continue;
    if (!ident_ok(col->collation) || !ident_ok(col->charset)) {
      int rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: chunk key `%s` "
                            "of `%s`.`%s` at %s has no usable character set "
                            "and collation ('%s', '%s')", col->name, t->db,
                            t->name, server, col->charset, col->collation);
      sl__cdc_member_close(m);
      return rc;
    }
    if (c == NULL) {
      int rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: chunk key `%s` "
                            "of `%s`.`%s` at %s compares in %s, which needs "
                            "a connection to the server", col->name, t->db,
                            t->name, server, col->collation);
      sl__cdc_member_close(m);
      return rc;
    }
    m->has_server = true;
  }
  *out = m;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The cache: key value -> chunk id.                                   */

static slot_t *cache_slot(sl__cdc_member_t *m, const uint8_t *p, uint32_t len,
                          uint64_t h) {
  uint32_t mask = m->cap - 1;
  for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
    slot_t *s = &m->slots[i];
    if (s->key == NULL) return s;
    if (s->h == h && s->len == len && memcmp(s->key, p, len) == 0) return s;
  }
}

static void cache_clear(sl__cdc_member_t *m) {
  for (uint32_t i = 0; i < m->cap; i++) {
    sl_free(m->slots[i].key);
    m->slots[i].key = NULL;
  }
  m->n_used = 0;
}

static int cache_put(sl__cdc_member_t *m, const uint8_t *p, uint32_t len,
                     uint64_t h, uint32_t chunk) {
  if (m->n_used >= CACHE_MAX) cache_clear(m);
  if ((m->n_used + 1) * 2 > m->cap) {
    uint32_t nc = m->cap * 2;
    slot_t *ns = sl_calloc(nc, sizeof(*ns));
    if (ns == NULL) return SL_ENOMEM;
    slot_t *old = m->slots;
    uint32_t oc = m->cap;
    m->slots = ns;
    m->cap = nc;
    for (uint32_t i = 0; i < oc; i++)
      if (old[i].key) *cache_slot(m, old[i].key, old[i].len, old[i].h) = old[i];
    sl_free(old);
  }
  slot_t *s = cache_slot(m, p, len, h);
  if (s->key != NULL) {
    s->chunk = chunk;
    return SL_OK;
  }
  s->key = sl_malloc(len ? len : 1);
  if (s->key == NULL) return SL_ENOMEM;
  if (len) memcpy(s->key, p, len);
  s->len = len;
  s->h = h;
  s->chunk = chunk;
  m->n_used++;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Comparisons.                                                        */

/* MariaDB's binary PAD SPACE comparison (my_strnncollsp_mb_bin): bytes
 * over the common length, then the rest of the longer string against
 * spaces. */
static int cmp_pad_bin(const uint8_t *a, uint32_t alen, const uint8_t *b,
                       uint32_t blen) {
  uint32_t n = alen < blen ? alen : blen;
  int c = n ? memcmp(a, b, n) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  int sign = 1;
  const uint8_t *rest = a + n;
  uint32_t left = alen - n;
  if (blen > alen) {
    sign = -1;
    rest = b + n;
    left = blen - n;
  }
  for (uint32_t i = 0; i < left; i++)
    if (rest[i] != ' ') return rest[i] < ' ' ? -sign : sign;
  return 0;
}

static int cmp_nopad_bin(const uint8_t *a, uint32_t alen, const uint8_t *b,
                         uint32_t blen) {
  uint32_t n = alen < blen ? alen : blen;
  int c = n ? memcmp(a, b, n) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  return (alen > blen) - (alen < blen);
}

/* Key column k of row against bound value v, for a column that does not
 * need the server. */
static int cmp_here(sl__cdc_member_t *m, uint32_t k, const sl_row_t *row,
                    const sl__cdc_kv_t *v, int *out, sl_error_t **out_err) {
  if (m->mode[k] == MODE_LOCAL)
    return sl__cdc_key_cmp(m->cl, m->t, k, row, v, out, out_err);
  sl_slice_t s = sl_row_get_str(row, m->t->key[k]);
  *out = m->mode[k] == MODE_PAD_BIN
             ? cmp_pad_bin((const uint8_t *)s.ptr, s.len, v->p, v->len)
             : cmp_nopad_bin((const uint8_t *)s.ptr, s.len, v->p, v->len);
  return SL_OK;
}

/* `CONVERT(_utf8mb4 X'..' USING cs) COLLATE coll`: the UTF-8 text in the
 * column's character set and collation. */
static int append_str(sl_bytes_t *b, const sl__cdc_col_t *col,
                      const void *p, uint32_t len) {
  int rc = sl_bytes_append_str(b, "CONVERT(_utf8mb4 ");
  if (rc == SL_OK) rc = sl__mariadb_hex(b, p, len);
  if (rc == SL_OK)
    rc = sl_bytes_printf(b, " USING %s) COLLATE %s", col->charset,
                         col->collation);
  return rc;
}

/* One pivot's comparison in progress: the sign once decided, or the key
 * column where the server has to continue. */
typedef struct piv_s {
  uint32_t bound; /* index into the bounds: chunks[bound].high */
  int cmp;
  bool is_done;
  uint32_t at;  /* next key column to compare */
  uint32_t col; /* first result column of this pivot in the query */
} piv_t;

/* Compare locally from column p->at on, until decided or a server
 * column. */
static int piv_local(sl__cdc_member_t *m, piv_t *p, const sl_row_t *row,
                     sl_error_t **out_err) {
  const sl__cdc_kv_t *b = m->cl->chunks[p->bound].high;
  for (; p->at < m->cl->n_key; p->at++) {
    if (m->mode[p->at] == MODE_SERVER) return SL_OK;
    int c = 0;
    int rc = cmp_here(m, p->at, row, &b[p->at], &c, out_err);
    if (rc != SL_OK) return rc;
    if (c != 0) {
      p->cmp = c;
      p->is_done = true;
      return SL_OK;
    }
  }
  p->cmp = 0;
  p->is_done = true;
  return SL_OK;
}

/* Decide every pivot: local comparisons, then one query for the string
 * columns that must decide (every server column from where each pivot
 * stopped; the rest of the row is then compared here). */
static int decide(sl__cdc_member_t *m, piv_t *pv, uint32_t n,
                  const sl_row_t *row, sl_error_t **out_err) {
  const sl__cdc_chunks_t *cl = m->cl;
  const sl__cdc_table_t *t = m->t;
  bool need = false;
  for (uint32_t i = 0; i < n; i++) {
    int rc = piv_local(m, &pv[i], row, out_err);
    if (rc != SL_OK) return rc;
    need |= !pv[i].is_done;
  }
  if (!need) return SL_OK;
  sl_bytes_t *q = &m->sql;
  sl_bytes_clear(q);
  int rc = sl_bytes_append_str(q, "SELECT ");
  uint32_t ncol = 0;
  for (uint32_t i = 0; rc == SL_OK && i < n; i++) {
    if (pv[i].is_done) continue;
    pv[i].col = ncol;
    const sl__cdc_kv_t *b = cl->chunks[pv[i].bound].high;
    for (uint32_t k = pv[i].at; rc == SL_OK && k < cl->n_key; k++) {
      if (m->mode[k] != MODE_SERVER) continue;
      const sl__cdc_col_t *col = &t->cols[t->key[k]];
      sl_slice_t s = sl_row_get_str(row, t->key[k]);
      /* (v > b) - (v < b): the operators the chunk's WHERE uses. */
      for (int side = 0; rc == SL_OK && side < 2; side++) {
        rc = sl_bytes_append_str(q, ncol || side ? (side ? " - (" : ", (")
                                                 : "(");
        if (rc == SL_OK) rc = append_str(q, col, s.ptr, s.len);
        if (rc == SL_OK) rc = sl_bytes_append_str(q, side ? " < " : " > ");
        if (rc == SL_OK) rc = append_str(q, col, b[k].p, b[k].len);
        if (rc == SL_OK) rc = sl_bytes_append_str(q, ")");
      }
      ncol++;
    }
  }
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(q) : NULL;
  if (sql == NULL) return rc == SL_OK ? SL_ENOMEM : rc;
  m->n_queries++;
  MYSQL_RES *res = NULL;
  if (mysql_real_query(m->c, sql, (unsigned long)q->len) != 0 ||
      (res = mysql_store_result(m->c)) == NULL)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: comparing a chunk "
                        "key of `%s`.`%s` with chunk bounds in the column's "
                        "collation failed: error %u: %s", m->server, t->db,
                        t->name, mysql_errno(m->c), mysql_error(m->c));
  MYSQL_ROW r = mysql_fetch_row(res);
  if (r == NULL || mysql_num_fields(res) != ncol) {
    mysql_free_result(res);
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: comparing a chunk "
                        "key of `%s`.`%s`: the server returned no row of %u "
                        "columns", m->server, t->db, t->name, ncol);
  }
  for (uint32_t i = 0; rc == SL_OK && i < n; i++) {
    if (pv[i].is_done) continue;
    uint32_t col = pv[i].col;
    const sl__cdc_kv_t *b = cl->chunks[pv[i].bound].high;
    for (uint32_t k = pv[i].at; k < cl->n_key; k++) {
      int c = 0;
      if (m->mode[k] == MODE_SERVER) {
        const char *v = r[col++];
        if (v == NULL || (strcmp(v, "-1") && strcmp(v, "0") && strcmp(v, "1"))) {
          rc = sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: comparing "
                            "chunk key `%s` of `%s`.`%s`: the server answered "
                            "'%s'", m->server, t->cols[t->key[k]].name, t->db,
                            t->name, v ? v : "NULL");
          break;
        }
        c = atoi(v);
      } else {
        rc = cmp_here(m, k, row, &b[k], &c, out_err);
        if (rc != SL_OK) break;
      }
      if (c != 0) {
        pv[i].cmp = c;
        break;
      }
    }
    pv[i].is_done = true;
  }
  mysql_free_result(res);
  return rc;
}

/* The chunk of row: the number of bounds at or below its key. */
static int search(sl__cdc_member_t *m, const sl_row_t *row, uint32_t *out,
                  sl_error_t **out_err) {
  uint32_t lo = 0, hi = m->cl->n - 1; /* the answer lies in [lo, hi] */
  piv_t pv[PIVOTS];
  while (lo < hi) {
    /* Bounds lo..hi-1 split [lo, hi]: key >= bound j means chunk > j. */
    uint32_t span = hi - lo, n = span < PIVOTS ? span : PIVOTS;
    for (uint32_t i = 0; i < n; i++) {
      memset(&pv[i], 0, sizeof(pv[i]));
      pv[i].bound = n == span ? lo + i
                              : lo + (uint32_t)(((uint64_t)span * (i + 1)) /
                                                (n + 1));
    }
    int rc = decide(m, pv, n, row, out_err);
    if (rc != SL_OK) return rc;
    /* Pivots increase; the key is >= a prefix of them. */
    uint32_t nlo = lo, nhi = hi;
    for (uint32_t i = 0; i < n; i++) {
      if (pv[i].cmp >= 0) nlo = pv[i].bound + 1;
      else {
        nhi = pv[i].bound;
        break;
      }
    }
    lo = nlo;
    hi = nhi;
  }
  *out = lo;
  return SL_OK;
}

int sl__cdc_member_find(sl__cdc_member_t *m, const sl_row_t *row,
                        uint32_t *out_chunk, sl_error_t **out_err) {
  const sl__cdc_table_t *t = m->t;
  for (uint32_t k = 0; k < t->n_key; k++) {
    if (sl_row_is_null(row, t->key[k])) {
      *out_chunk = 0; /* only a single declared key can be NULL */
      return SL_OK;
    }
  }
  if (m->cl->n <= 1) {
    *out_chunk = 0;
    return SL_OK;
  }
  if (!m->has_server) return search(m, row, out_chunk, out_err);
  sl_bytes_clear(&m->key);
  for (uint32_t k = 0; k < t->n_key; k++) {
    int rc = sl_key_add_field(&m->key, row, t->key[k]);
    if (rc != SL_OK) return rc;
  }
  uint32_t len = (uint32_t)m->key.len;
  uint64_t h = sl_hash64(m->key.data, len);
  slot_t *s = cache_slot(m, m->key.data, len, h);
  if (s->key != NULL) {
    *out_chunk = s->chunk;
    return SL_OK;
  }
  uint32_t id = 0;
  int rc = search(m, row, &id, out_err);
  if (rc == SL_OK) rc = cache_put(m, m->key.data, len, h, id);
  if (rc == SL_OK) *out_chunk = id;
  return rc;
}

int sl__cdc_member_contains(sl__cdc_member_t *m, const sl__cdc_chunk_t *ch,
                            const sl_row_t *row, bool *out_in,
                            sl_error_t **out_err) {
  uint32_t id = 0;
  int rc = sl__cdc_member_find(m, row, &id, out_err);
  if (rc != SL_OK) return rc;
  *out_in = id == ch->id;
  return SL_OK;
}
