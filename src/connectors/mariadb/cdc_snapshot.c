/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDC source's chunk reader: LOW (the binlog position of a consistent
 * snapshot), the chunk's SELECT in key order, HIGH (the position after
 * it), rows converted to sluice rows; binlog positions and their order;
 * and the backfill seam that merges decoded changes into a chunk's rows
 * by primary key.  See cdc_int.h and docs/cdc-mariadb.md, "Chunks".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdc_int.h"
#include "core/inject.h"
#include "mariadb_int.h"

/* ------------------------------------------------------------------ */
/* Positions.                                                          */

static int fail_q(MYSQL *c, const char *server, const char *what,
                  sl_error_t **out_err) {
  return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s failed: error "
                      "%u: %s", server, what, mysql_errno(c), mysql_error(c));
}

int sl__cdc_pos_current(MYSQL *c, const char *server, sl__cdc_pos_t *out,
                        sl_error_t **out_err) {
  memset(out, 0, sizeof(*out));
  /* The GTID position first, then the file and offset: the offset is then
   * at or after the end of the last transaction the GTID position names
   * (a backfill reads up to the offset and keeps what the GTIDs allow). */
  bool found;
  unsigned e;
  if (sl__mariadb_query_text(c, "SELECT @@gtid_binlog_pos", out->gtid,
                             sizeof(out->gtid), &found, &e) != SL_OK)
    return fail_q(c, server, "SELECT @@gtid_binlog_pos", out_err);
  if (!found) out->gtid[0] = '\0';
  if (mysql_query(c, "SHOW MASTER STATUS") != 0)
    return fail_q(c, server, "SHOW MASTER STATUS", out_err);
  MYSQL_RES *r = mysql_store_result(c);
  if (r == NULL) return fail_q(c, server, "SHOW MASTER STATUS", out_err);
  MYSQL_ROW row = mysql_fetch_row(r);
  if (row == NULL || row[0] == NULL || row[1] == NULL) {
    mysql_free_result(r);
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: %s: SHOW MASTER "
                        "STATUS gives no binlog file (is log_bin on?)",
                        server);
  }
  snprintf(out->file, sizeof(out->file), "%s", row[0]);
  out->offset = strtoull(row[1], NULL, 10);
  mysql_free_result(r);
  return SL_OK;
}

typedef struct gtid_s {
  uint32_t domain;
  uint64_t seq;
} gtid_t;

#define MAX_DOMAINS 64

/* "d-s-n[,d-s-n]..." (spaces and newlines allowed around commas). */
static int parse_gtids(const char *s, gtid_t *out, uint32_t *out_n) {
  uint32_t n = 0;
  const char *p = s;
  while (*p == ' ' || *p == '\n' || *p == ',') p++;
  while (*p) {
    char *end;
    unsigned long long d, srv, seq;
    errno = 0;
    d = strtoull(p, &end, 10);
    if (end == p || *end != '-' || errno) return SL_EINVAL;
    p = end + 1;
    srv = strtoull(p, &end, 10);
    if (end == p || *end != '-' || errno) return SL_EINVAL;
    p = end + 1;
    seq = strtoull(p, &end, 10);
    if (end == p || errno || d > UINT32_MAX || srv > UINT32_MAX)
      return SL_EINVAL;
    p = end;
    for (uint32_t i = 0; i < n; i++)
      if (out[i].domain == d) return SL_EINVAL; /* one GTID per domain */
    if (n == MAX_DOMAINS) return SL_EINVAL;
    out[n].domain = (uint32_t)d;
    out[n].seq = seq;
    n++;
    while (*p == ' ' || *p == '\n') p++;
    if (*p == ',') p++;
    else if (*p) return SL_EINVAL;
    while (*p == ' ' || *p == '\n') p++;
  }
  *out_n = n;
  return SL_OK;
}

static uint64_t seq_of(const gtid_t *g, uint32_t n, uint32_t domain) {
  for (uint32_t i = 0; i < n; i++)
    if (g[i].domain == domain) return g[i].seq;
  return 0;
}

/* The number after the last '.' of a binlog file name. */
static uint64_t file_no(const char *f) {
  const char *dot = strrchr(f, '.');
  return dot ? strtoull(dot + 1, NULL, 10) : 0;
}

int sl__cdc_pos_cmp(const sl__cdc_pos_t *a, const sl__cdc_pos_t *b,
                    int *out_cmp, sl_error_t **out_err) {
  gtid_t ga[MAX_DOMAINS], gb[MAX_DOMAINS];
  uint32_t na = 0, nb = 0;
  if (parse_gtids(a->gtid, ga, &na) != SL_OK)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: GTID position "
                        "'%.200s' does not parse", a->gtid);
  if (parse_gtids(b->gtid, gb, &nb) != SL_OK)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: GTID position "
                        "'%.200s' does not parse", b->gtid);
  if (na > 0 || nb > 0) {
    bool lt = false, gt = false;
    for (uint32_t i = 0; i < na; i++) {
      uint64_t x = ga[i].seq, y = seq_of(gb, nb, ga[i].domain);
      lt |= x < y;
      gt |= x > y;
    }
    for (uint32_t i = 0; i < nb; i++) {
      uint64_t x = seq_of(ga, na, gb[i].domain), y = gb[i].seq;
      lt |= x < y;
      gt |= x > y;
    }
    if (lt && gt)
      return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: GTID positions "
                          "'%.200s' and '%.200s' are not ordered (each is "
                          "ahead in some domain)", a->gtid, b->gtid);
    *out_cmp = lt ? -1 : gt ? 1 : 0;
    return SL_OK;
  }
  uint64_t fa = file_no(a->file), fb = file_no(b->file);
  if (fa != fb) *out_cmp = fa < fb ? -1 : 1;
  else *out_cmp = a->offset < b->offset ? -1 : a->offset > b->offset ? 1 : 0;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Rows.                                                               */

void sl__cdc_rows_init(sl__cdc_rows_t *r, const sl_schema_t *schema) {
  memset(r, 0, sizeof(*r));
  r->schema = schema;
}

void sl__cdc_rows_close(sl__cdc_rows_t *r) {
  for (uint32_t i = 0; i < r->n; i++) sl_free(r->data[i]);
  sl_free(r->data);
  sl_free(r->len);
  memset(r, 0, sizeof(*r));
}

int sl__cdc_rows_add(sl__cdc_rows_t *r, const sl_row_t *row) {
  if (r->n == r->cap) {
    uint32_t nc = r->cap ? r->cap * 2 : 64;
    uint8_t **d = sl_realloc(r->data, nc * sizeof(*d));
    if (d == NULL) return SL_ENOMEM;
    r->data = d;
    uint32_t *l = sl_realloc(r->len, nc * sizeof(*l));
    if (l == NULL) return SL_ENOMEM;
    r->len = l;
    r->cap = nc;
  }
  uint8_t *p = sl_malloc(row->len);
  if (p == NULL) return SL_ENOMEM;
  memcpy(p, row->data, row->len);
  r->data[r->n] = p;
  r->len[r->n] = row->len;
  r->n++;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The chunk reader.                                                   */

static int run(MYSQL *c, const char *server, const char *sql,
               sl_error_t **out_err) {
  unsigned e;
  if (sl__mariadb_run(c, sql, strlen(sql), &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s failed: error "
                        "%u: %s", server, sql, e, mysql_error(c));
  return SL_OK;
}

/* The binlog position of the transaction's consistent snapshot. */
static int snapshot_low(MYSQL *c, const char *server, sl__cdc_pos_t *low,
                        bool want_gtid, sl_error_t **out_err) {
  memset(low, 0, sizeof(*low));
  const char *q = "SHOW SESSION STATUS LIKE 'binlog_snapshot_%'";
  if (mysql_query(c, q) != 0) return fail_q(c, server, q, out_err);
  MYSQL_RES *r = mysql_store_result(c);
  if (r == NULL) return fail_q(c, server, q, out_err);
  MYSQL_ROW row;
  bool has_file = false, has_pos = false;
  while ((row = mysql_fetch_row(r)) != NULL) {
    if (row[0] == NULL || row[1] == NULL) continue;
    if (strcasecmp(row[0], "Binlog_snapshot_file") == 0) {
      snprintf(low->file, sizeof(low->file), "%s", row[1]);
      has_file = row[1][0] != '\0';
    } else if (strcasecmp(row[0], "Binlog_snapshot_position") == 0) {
      low->offset = strtoull(row[1], NULL, 10);
      has_pos = true;
    }
  }
  mysql_free_result(r);
  if (!has_file || !has_pos)
    return sl_error_set(out_err, SL_ENOTSUP, "mariadb-cdc: %s gives no "
                        "Binlog_snapshot_file/Binlog_snapshot_position for "
                        "a consistent snapshot (MariaDB with log_bin is "
                        "needed)", server);
  if (!want_gtid) return SL_OK;
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = sl_bytes_append_str(&sql, "SELECT BINLOG_GTID_POS(");
  if (rc == SL_OK) rc = sl__mariadb_hex(&sql, low->file, strlen(low->file));
  if (rc == SL_OK) rc = sl_bytes_printf(&sql, ", %" PRIu64 ")", low->offset);
  const char *s = rc == SL_OK ? sl__mariadb_cstr(&sql) : NULL;
  bool found = false;
  unsigned e;
  if (s == NULL) rc = SL_ENOMEM;
  else if (sl__mariadb_query_text(c, s, low->gtid, sizeof(low->gtid), &found,
                                  &e) != SL_OK)
    rc = fail_q(c, server, s, out_err);
  else if (!found)
    rc = sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s gave NULL (the "
                      "snapshot's binlog position %s:%" PRIu64 " is not an "
                      "event boundary or the file is gone)",
                      server, s, low->file, low->offset);
  sl_bytes_close(&sql);
  return rc;
}

static int chunk_select(const sl__cdc_table_t *t, const sl__cdc_chunks_t *cl,
                        const sl__cdc_chunk_t *ch, sl_bytes_t *sql) {
  int rc = sl_bytes_append_str(sql, "SELECT ");
  for (uint32_t i = 0; rc == SL_OK && i < t->n_cols; i++) {
    if (i) rc = sl_bytes_append(sql, ", ", 2);
    /* A FLOAT's text has 6 digits; as a DOUBLE the server prints the
     * float's exact value, which is what the binlog carries. */
    bool is_float = strcmp(t->cols[i].data_type, "float") == 0;
    if (rc == SL_OK && is_float) rc = sl_bytes_append_str(sql, "CAST(");
    if (rc == SL_OK) rc = sl__mariadb_ident(sql, t->cols[i].name);
    if (rc == SL_OK && is_float) rc = sl_bytes_append_str(sql, " AS DOUBLE)");
  }
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " FROM ");
  if (rc == SL_OK) rc = sl__mariadb_ident(sql, t->db);
  if (rc == SL_OK) rc = sl_bytes_append(sql, ".", 1);
  if (rc == SL_OK) rc = sl__mariadb_ident(sql, t->name);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " WHERE ");
  if (rc == SL_OK) rc = sl__cdc_chunk_where(cl, ch, sql);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " ORDER BY ");
  for (uint32_t k = 0; rc == SL_OK && k < t->n_key; k++) {
    if (k) rc = sl_bytes_append(sql, ", ", 2);
    if (rc == SL_OK) rc = sl__mariadb_ident(sql, t->cols[t->key[k]].name);
  }
  return rc;
}

static int read_rows(MYSQL *c, const char *server, const sl__cdc_table_t *t,
                     sl_bytes_t *sql, sl__cdc_rows_t *out,
                     sl_error_t **out_err) {
  const char *q = sl__mariadb_cstr(sql);
  if (q == NULL) return SL_ENOMEM;
  if (mysql_real_query(c, q, (unsigned long)sql->len) != 0)
    return fail_q(c, server, q, out_err);
  MYSQL_RES *r = mysql_use_result(c);
  if (r == NULL) return fail_q(c, server, q, out_err);
  int rc = SL_OK;
  if (mysql_num_fields(r) != t->n_cols)
    rc = sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: the chunk SELECT of "
                      "`%s`.`%s` gave %u columns, not %u (did the table "
                      "change?)", server, t->db, t->name,
                      mysql_num_fields(r), t->n_cols);
  sl_row_builder_t b;
  if (rc == SL_OK) rc = sl_row_builder_init(&b, t->schema);
  else memset(&b, 0, sizeof(b));
  bool has_builder = rc == SL_OK;
  MYSQL_ROW row;
  while (rc == SL_OK && (row = mysql_fetch_row(r)) != NULL) {
    unsigned long *lens = mysql_fetch_lengths(r);
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    for (uint32_t i = 0; rc == SL_OK && i < t->n_cols; i++)
      rc = sl__cdc_set_field(t, i, row[i], lens[i], &b, i, out_err);
    sl_row_t out_row;
    if (rc == SL_OK) rc = sl_row_builder_finish(&b, &out_row, out_err);
    if (rc == SL_OK) rc = sl__cdc_rows_add(out, &out_row);
  }
  if (rc == SL_OK && mysql_errno(c) != 0) rc = fail_q(c, server, q, out_err);
  /* Drain what is left, so the connection stays usable. */
  while (rc != SL_OK && mysql_fetch_row(r) != NULL) {
  }
  mysql_free_result(r);
  if (has_builder) sl_row_builder_close(&b);
  return rc;
}

int sl__cdc_read_chunk(MYSQL *c, const char *server, const sl__cdc_table_t *t,
                       const sl__cdc_chunks_t *cl, const sl__cdc_chunk_t *ch,
                       sl__cdc_pos_t *out_low, sl__cdc_pos_t *out_high,
                       sl__cdc_rows_t *out, sl_error_t **out_err) {
  return sl__cdc_read_chunk_ex(c, server, t, cl, ch, 0, out_low, out_high,
                               out, out_err);
}

int sl__cdc_read_chunk_ex(MYSQL *c, const char *server,
                          const sl__cdc_table_t *t, const sl__cdc_chunks_t *cl,
                          const sl__cdc_chunk_t *ch, unsigned flags,
                          sl__cdc_pos_t *out_low, sl__cdc_pos_t *out_high,
                          sl__cdc_rows_t *out, sl_error_t **out_err) {
  int rc = sl__cdc_session_setup(c, server, out_err);
  if (rc == SL_OK)
    rc = run(c, server,
             "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
             out_err);
  if (rc == SL_OK)
    rc = run(c, server, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
             out_err);
  if (rc != SL_OK) return rc;
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  rc = snapshot_low(c, server, out_low,
                    (flags & SL_CDC_READ_NO_LOW_GTID) == 0, out_err);
  if (rc == SL_OK) rc = SL_INJECT("cdc.snapshot.after_low");
  if (rc == SL_OK) rc = chunk_select(t, cl, ch, &sql);
  if (rc == SL_OK) rc = read_rows(c, server, t, &sql, out, out_err);
  sl_bytes_close(&sql);
  int rc2 = run(c, server, rc == SL_OK ? "COMMIT" : "ROLLBACK",
                rc == SL_OK ? out_err : NULL);
  if (rc == SL_OK) rc = rc2;
  if (rc == SL_OK) rc = SL_INJECT("cdc.snapshot.before_high");
  if (rc == SL_OK) rc = sl__cdc_pos_current(c, server, out_high, out_err);
  if (rc != SL_OK && out_err && *out_err == NULL)
    sl_error_set(out_err, rc, "mariadb-cdc: %s: reading chunk %u of "
                 "`%s`.`%s` failed", server, ch->id, t->db, t->name);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The backfill merge.                                                  */

typedef struct mrg_s {
  sl__cdc_rows_t *rows;
  sl_bytes_t *keys; /* per row (kept when the row is removed) */
  uint32_t n_keys, cap_keys;
  uint32_t *slots; /* row index + 1, 0 empty */
  uint32_t n_slots; /* a power of two */
  const uint32_t *pk;
  uint32_t n_pk;
} mrg_t;

static int key_of(const mrg_t *m, const sl_row_t *row, sl_bytes_t *out) {
  sl_bytes_clear(out);
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < m->n_pk; k++)
    rc = sl_key_add_field(out, row, m->pk[k]);
  return rc;
}

/* The slot holding key (or the empty slot where it would go). */
static uint32_t find_slot(const mrg_t *m, const sl_bytes_t *key) {
  uint32_t mask = m->n_slots - 1;
  uint32_t i = (uint32_t)sl_hash64(key->data, key->len) & mask;
  for (;; i = (i + 1) & mask) {
    uint32_t s = m->slots[i];
    if (s == 0) return i;
    const sl_bytes_t *k = &m->keys[s - 1];
    if (k->len == key->len && memcmp(k->data, key->data, key->len) == 0)
      return i;
  }
}

static void remove_key(mrg_t *m, const sl_bytes_t *key) {
  uint32_t s = m->slots[find_slot(m, key)];
  if (s == 0 || m->rows->data[s - 1] == NULL) return;
  sl_free(m->rows->data[s - 1]);
  m->rows->data[s - 1] = NULL;
}

static int upsert(mrg_t *m, const sl_bytes_t *key, const sl_row_t *row) {
  uint32_t i = find_slot(m, key);
  uint8_t *p = sl_malloc(row->len);
  if (p == NULL) return SL_ENOMEM;
  memcpy(p, row->data, row->len);
  p[0] = (uint8_t)SL_ROW_INSERT;
  if (m->slots[i] != 0) {
    uint32_t r = m->slots[i] - 1;
    sl_free(m->rows->data[r]);
    m->rows->data[r] = p;
    m->rows->len[r] = row->len;
    return SL_OK;
  }
  /* A new row at the end (rows_add copies; hand it the bytes). */
  sl_row_t view = *row;
  view.data = p;
  int rc = sl__cdc_rows_add(m->rows, &view);
  sl_free(p);
  if (rc != SL_OK) return rc;
  uint32_t r = m->rows->n - 1;
  sl_bytes_init(&m->keys[r]);
  rc = sl_bytes_append(&m->keys[r], key->data, key->len);
  if (rc != SL_OK) return rc;
  m->n_keys = r + 1;
  m->slots[i] = r + 1;
  return SL_OK;
}

int sl__cdc_merge(sl__cdc_rows_t *rows, const uint32_t *pk, uint32_t n_pk,
                  const sl__cdc_change_t *changes, size_t n_changes,
                  sl__cdc_in_chunk_fn in_chunk, void *ctx,
                  sl_error_t **out_err) {
  if (n_pk == 0)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: merging a chunk "
                        "needs a primary key");
  mrg_t m = {.rows = rows, .pk = pk, .n_pk = n_pk};
  size_t most = (size_t)rows->n + n_changes;
  if (most > (UINT32_MAX >> 2))
    return sl_error_set(out_err, SL_EOVERFLOW, "mariadb-cdc: too many rows "
                        "and changes to merge (%zu)", most);
  m.n_slots = 16;
  while (m.n_slots < 2 * most) m.n_slots <<= 1;
  m.slots = sl_calloc(m.n_slots, sizeof(*m.slots));
  m.keys = sl_calloc(most ? most : 1, sizeof(*m.keys));
  sl_bytes_t ka, kb;
  sl_bytes_init(&ka);
  sl_bytes_init(&kb);
  int rc = m.slots && m.keys ? SL_OK : SL_ENOMEM;
  for (uint32_t i = 0; rc == SL_OK && i < rows->n; i++) {
    sl_row_t row;
    sl__cdc_rows_get(rows, i, &row);
    sl_bytes_init(&m.keys[i]);
    m.n_keys = i + 1;
    rc = key_of(&m, &row, &m.keys[i]);
    if (rc != SL_OK) break;
    uint32_t s = find_slot(&m, &m.keys[i]);
    if (m.slots[s] != 0) {
      rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: two rows of the "
                        "chunk have the same primary key (rows %u and %u)",
                        m.slots[s] - 1, i);
      break;
    }
    m.slots[s] = i + 1;
  }
  for (size_t j = 0; rc == SL_OK && j < n_changes; j++) {
    const sl__cdc_change_t *ch = &changes[j];
    bool is_update = ch->kind == SL_ROW_UPDATE_AFTER ||
                     ch->kind == SL_ROW_UPDATE_BEFORE;
    if ((ch->kind == SL_ROW_DELETE || is_update) && ch->before == NULL)
      rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: change %zu (%s) "
                        "has no before image", j, sl_row_kind_name(ch->kind));
    else if (ch->kind != SL_ROW_DELETE && ch->after == NULL)
      rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: change %zu (%s) "
                        "has no after image", j, sl_row_kind_name(ch->kind));
    if (rc != SL_OK) break;
    if (ch->before != NULL && ch->kind != SL_ROW_INSERT) {
      rc = key_of(&m, ch->before, &kb);
      if (rc != SL_OK) break;
    }
    if (ch->kind == SL_ROW_DELETE) {
      remove_key(&m, &kb);
      continue;
    }
    rc = key_of(&m, ch->after, &ka);
    if (rc != SL_OK) break;
    if (is_update &&
        (ka.len != kb.len || memcmp(ka.data, kb.data, ka.len) != 0))
      remove_key(&m, &kb);
    if (in_chunk == NULL || in_chunk(ctx, ch->after)) rc = upsert(&m, &ka, ch->after);
    else remove_key(&m, &ka);
  }
  /* Compact: drop removed rows, keep the order. */
  uint32_t w = 0;
  for (uint32_t i = 0; i < rows->n; i++) {
    if (rows->data[i] == NULL) continue;
    rows->data[w] = rows->data[i];
    rows->len[w] = rows->len[i];
    w++;
  }
  rows->n = w;
  for (uint32_t i = 0; i < m.n_keys; i++) sl_bytes_close(&m.keys[i]);
  sl_free(m.keys);
  sl_free(m.slots);
  sl_bytes_close(&ka);
  sl_bytes_close(&kb);
  return rc;
}
