/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mariadb-cdc change stream (src/connectors/mariadb/cdc_stream.c)
 * against a real MariaDB 10.11 started by each test (tests/tools/
 * sl_servers), with MariaDB's default binlog_row_metadata=NO_LOG (the
 * column facts come from the description): row changes equal to a SELECT
 * field by field; positions cut everywhere in a 10,000-row transaction
 * and resumed, giving exactly the rest; starts from GTID states (several
 * domains), from a purged GTID and from one never written (error 1236),
 * after RESET MASTER (refused, both states named); DDL on a captured table
 * refused with its exact message, on other tables ignored; a server
 * restart and a crash mid-stream without loss or duplicates; heartbeats;
 * interrupt from another thread; giving up a reconnect.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "connectors/mariadb/cdc_int.h"
#include "connectors/mariadb/cdc_stream.h"
#include "core/inject.h"
#include "sl_servers.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

typedef struct fx_s {
  sl_server_t *srv;
  MYSQL *m;
  char server[64];
} fx_t;

static void fx_open(fx_t *f) {
  memset(f, 0, sizeof(*f));
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &f->srv, &err), err);
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &f->m, &err),
                 err);
  SL_ASSERT_OK(sl_my_exec(f->m, "SET NAMES utf8mb4", NULL, NULL));
  snprintf(f->server, sizeof(f->server), "127.0.0.1:%d",
           sl_server_port(f->srv));
  SL_ASSERT_OK(sl_my_exec(f->m, "CREATE DATABASE shop", NULL, NULL));
  SL_ASSERT_OK(sl_my_exec(f->m, "USE shop", NULL, NULL));
}

static void fx_reconnect(fx_t *f) {
  mysql_close(f->m);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &f->m, &err),
                 err);
  SL_ASSERT_OK(sl_my_exec(f->m, "USE shop", NULL, NULL));
}

static void fx_close(fx_t *f) {
  mysql_close(f->m);
  sl_server_destroy(f->srv);
}

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static char *my_text(MYSQL *m, const char *sql) {
  char *s = NULL;
  sl_error_t *err = NULL;
  int rc = sl_my_query_text(m, sql, &s, &err);
  if (rc == SL_ENOTFOUND) return sl_strdup("");
  SL_ASSERT_OK_E(rc, err);
  return s;
}

static sl_binlog_pos_t pos_at(MYSQL *m) {
  sl_binlog_pos_t p;
  memset(&p, 0, sizeof(p));
  char *g = my_text(m, "SELECT @@gtid_binlog_pos");
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_gtid_state_parse(g, &p.gtid, &err), err);
  sl_free(g);
  return p;
}

static sl_binlog_pos_t pos_of(const char *text) {
  sl_binlog_pos_t p;
  memset(&p, 0, sizeof(p));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_gtid_state_parse(text, &p.gtid, &err), err);
  return p;
}

static void state_text(const sl_binlog_gtid_state_t *st, char *buf,
                       size_t size) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__binlog_gtid_state_format(st, &b));
  snprintf(buf, size, "%.*s", (int)b.len, (const char *)b.data);
  sl_bytes_close(&b);
}

static sl__cdc_table_t *describe(fx_t *f, const char *table) {
  sl__cdc_table_t *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_table_describe(f->m, f->server, "shop", table, NULL,
                                        &t, &err),
                 err);
  return t;
}

typedef struct {
  bool is_non_blocking;
  uint32_t heartbeat_ms, max_reconnect_ms;
} sopts_t;

static int open_rc(fx_t *f, sl__cdc_table_t **t, uint32_t n,
                   const sl_binlog_pos_t *start, const sopts_t *so,
                   sl__cdc_stream_t **out, sl_error_t **out_err) {
  sl__cdc_stream_opts_t o = {
      .host = "127.0.0.1",
      .port = sl_server_port(f->srv),
      .user = "root",
      .server = f->server,
      .server_id = 7001,
      .start = start,
      .tables = t,
      .n_tables = n,
      .is_non_blocking = so ? so->is_non_blocking : true,
      .heartbeat_ms = so ? so->heartbeat_ms : 0,
      .max_reconnect_ms = so ? so->max_reconnect_ms : 0};
  return sl__cdc_stream_open(&o, out, out_err);
}

static sl__cdc_stream_t *open_at(fx_t *f, sl__cdc_table_t **t, uint32_t n,
                                 const sl_binlog_pos_t *start,
                                 const sopts_t *so) {
  sl__cdc_stream_t *s = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(open_rc(f, t, n, start, so, &s, &err), err);
  return s;
}

/* A row as text: fields joined by '|', NULL as "~". */
static char *row_text(const sl_row_t *r) {
  if (r == NULL) return NULL;
  sl_bytes_t b;
  sl_bytes_init(&b);
  for (uint32_t i = 0; i < sl_schema_n_fields(r->schema); i++) {
    if (i) SL_ASSERT_OK(sl_bytes_append(&b, "|", 1));
    if (sl_row_is_null(r, i)) SL_ASSERT_OK(sl_bytes_append(&b, "~", 1));
    else SL_ASSERT_OK(sl_value_format(r, i, &b));
  }
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  char *s = sl_strdup((const char *)b.data);
  sl_bytes_close(&b);
  return s;
}

/* One event read, with the position after it. */
typedef struct {
  sl__cdc_ev_kind_t kind;
  uint32_t table;
  sl_row_kind_t rk;
  sl_binlog_gtid_t gtid;
  uint32_t ei, ri;
  int64_t key; /* field 0 of the after image, else the before image */
  int64_t when_us;
  char *before, *after;
  sl_binlog_pos_t pos;
} rec_t;

typedef struct {
  rec_t *r;
  size_t n, cap;
  sl__cdc_rows_t *copies; /* when set: every row image copied (merge) */
  sl__cdc_change_t *changes;
} recs_t;

static void recs_free(recs_t *rs) {
  for (size_t i = 0; i < rs->n; i++) {
    sl_free(rs->r[i].before);
    sl_free(rs->r[i].after);
  }
  free(rs->r);
  memset(rs, 0, sizeof(*rs));
}

static void rec_add(recs_t *rs, const sl__cdc_stream_t *s,
                    const sl__cdc_ev_t *ev) {
  if (rs->n == rs->cap) {
    rs->cap = rs->cap ? 2 * rs->cap : 256;
    rs->r = realloc(rs->r, rs->cap * sizeof(*rs->r));
    SL_ASSERT_TRUE(rs->r != NULL);
  }
  rec_t *r = &rs->r[rs->n++];
  memset(r, 0, sizeof(*r));
  r->kind = ev->kind;
  r->table = ev->table;
  r->rk = ev->row_kind;
  r->gtid = ev->gtid;
  r->ei = ev->event_index;
  r->ri = ev->row_index;
  r->when_us = ev->when_us;
  if (ev->kind == SL_CDC_EV_ROW) {
    SL_ASSERT_TRUE(ev->before != NULL || ev->after != NULL);
    r->before = row_text(ev->before);
    r->after = row_text(ev->after);
    r->key = sl_row_get_i64(ev->after ? ev->after : ev->before, 0);
  }
  sl__cdc_stream_pos(s, &r->pos);
}

/* Reads a non-blocking stream to its end. */
static void read_all(sl__cdc_stream_t *s, recs_t *rs) {
  for (;;) {
    sl__cdc_ev_t ev;
    sl_error_t *err = NULL;
    int rc = sl__cdc_stream_next(s, &ev, &err);
    if (rc == SL_ENOTFOUND) {
      sl_error_destroy(err);
      return;
    }
    SL_ASSERT_OK_E(rc, err);
    if (ev.kind == SL_CDC_EV_HEARTBEAT) continue;
    rec_add(rs, s, &ev);
  }
}

/* Reads n events (heartbeats not counted; at most max_hb of them). */
static void read_n(sl__cdc_stream_t *s, recs_t *rs, size_t n, int max_hb) {
  int n_hb = 0;
  size_t want = rs->n + n;
  while (rs->n < want) {
    sl__cdc_ev_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__cdc_stream_next(s, &ev, &err), err);
    if (ev.kind == SL_CDC_EV_HEARTBEAT) {
      if (++n_hb > max_hb)
        SL_TEST_FAIL("%d heartbeats and %zu of %zu events", n_hb,
                     rs->n - (want - n), n);
      continue;
    }
    rec_add(rs, s, &ev);
  }
}

/* "I1 I2 T U2 D3 ...": the events' kinds and keys. */
static void sig(const recs_t *rs, size_t from, char *buf, size_t size) {
  size_t o = 0;
  buf[0] = 0;
  for (size_t i = from; i < rs->n && o < size; i++) {
    const rec_t *r = &rs->r[i];
    if (r->kind == SL_CDC_EV_TXN_END) {
      o += (size_t)snprintf(buf + o, size - o, "%sT", o ? " " : "");
      continue;
    }
    char c = r->rk == SL_ROW_INSERT ? 'I' : r->rk == SL_ROW_DELETE ? 'D' : 'U';
    o += (size_t)snprintf(buf + o, size - o, "%s%c%" PRId64, o ? " " : "", c,
                          r->key);
  }
}

static bool same_rec(const rec_t *a, const rec_t *b) {
  return a->kind == b->kind && a->table == b->table && a->rk == b->rk &&
         a->gtid.domain == b->gtid.domain &&
         a->gtid.server_id == b->gtid.server_id && a->gtid.seq == b->gtid.seq &&
         a->ei == b->ei && a->ri == b->ri &&
         ((a->before == NULL && b->before == NULL) ||
          (a->before && b->before && !strcmp(a->before, b->before))) &&
         ((a->after == NULL && b->after == NULL) ||
          (a->after && b->after && !strcmp(a->after, b->after)));
}

/* got equals want[from..] event by event. */
static void expect_rest(const recs_t *want, size_t from, const recs_t *got,
                        const char *what) {
  if (got->n != want->n - from)
    SL_TEST_FAIL("%s: %zu events, want %zu", what, got->n, want->n - from);
  for (size_t i = 0; i < got->n; i++)
    if (!same_rec(&got->r[i], &want->r[from + i]))
      SL_TEST_FAIL("%s: event %zu differs (gtid seq %" PRIu64 " ei %u ri %u "
                   "key %" PRId64 ", want seq %" PRIu64 " ei %u ri %u key %"
                   PRId64 ")", what, i, got->r[i].gtid.seq, got->r[i].ei,
                   got->r[i].ri, got->r[i].key, want->r[from + i].gtid.seq,
                   want->r[from + i].ei, want->r[from + i].ri,
                   want->r[from + i].key);
}

/* The stream resumed from pos gives exactly want's events from `from`. */
static void resume_from(fx_t *f, sl__cdc_table_t **t, uint32_t n,
                        const sl_binlog_pos_t *pos, const recs_t *want,
                        size_t from, const char *what) {
  sl__cdc_stream_t *s = open_at(f, t, n, pos, NULL);
  recs_t got = {0};
  read_all(s, &got);
  sl__cdc_stream_close(s);
  char w[160];
  snprintf(w, sizeof(w), "%s (from event %zu: skip %" PRIu64 "/%" PRIu64 ")",
           what, from, pos->skip_events, pos->skip_rows);
  expect_rest(want, from, &got, w);
  recs_free(&got);
}

/* The stream resumed from want's position after event k gives exactly
 * the events after k. */
static void resume_check(fx_t *f, sl__cdc_table_t **t, uint32_t n,
                         const recs_t *want, size_t k, const char *what) {
  resume_from(f, t, n, &want->r[k].pos, want, k + 1, what);
}

/* err's message equals want with "%S" replaced by the server. */
static void expect_msg(const fx_t *f, int rc, int want_rc, sl_error_t *err,
                       const char *want) {
  char buf[4096];
  const char *s = strstr(want, "%S");
  if (s != NULL)
    snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(s - want), want, f->server,
             s + 2);
  else
    snprintf(buf, sizeof(buf), "%s", want);
  if (rc != want_rc)
    SL_TEST_FAIL("rc %d (%s), want %d; message: %s", rc, sl_errname(rc),
                 want_rc, err ? sl_error_message(err) : "(none)");
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_STR(sl_error_message(err), buf);
  sl_error_destroy(err);
}

/* The first failure of a non-blocking stream from start. */
static int first_error(fx_t *f, sl__cdc_table_t **t, uint32_t n,
                       const sl_binlog_pos_t *start, sl_error_t **out_err) {
  sl__cdc_stream_t *s = NULL;
  int rc = open_rc(f, t, n, start, NULL, &s, out_err);
  if (rc != SL_OK) return rc;
  for (;;) {
    sl__cdc_ev_t ev;
    rc = sl__cdc_stream_next(s, &ev, out_err);
    if (rc != SL_OK) break;
  }
  sl__cdc_stream_close(s);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Rows. */

/* Inserts, updates, deletes and a primary key change of a table with
 * columns whose facts NO_LOG leaves out (unsigned, latin1 and utf8mb4
 * text, ENUM, SET): the events come in order with their GTIDs and
 * indexes, rows of another table are skipped, and the changes applied to
 * an empty table equal what the snapshot's SELECT reads, field by
 * field. */
SL_TEST(rows_equal_select) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY, u INT UNSIGNED NOT NULL, "
             "v VARCHAR(20) CHARACTER SET utf8mb4, l VARCHAR(10) CHARACTER "
             "SET latin1, e ENUM('a','b','it''s'), st SET('x','y'), "
             "d DECIMAL(10,2), ts DATETIME(3), b VARBINARY(8), n INT, "
             "bu BIGINT UNSIGNED) ENGINE=InnoDB");
  my_ok(f.m, "CREATE TABLE other (id INT PRIMARY KEY, x INT)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl_binlog_pos_t start = pos_at(f.m);
  my_ok(f.m, "INSERT INTO t VALUES "
             "(1, 4294967295, 'v\xc3\xa4', _latin1 X'E9', 'it''s', 'x,y', "
             "-12.5, '2024-02-29 12:34:56.789', X'00FF', 7, "
             "9223372036854775807),"
             "(2, 0, '', NULL, 'a', '', 0, '1970-01-01 00:00:00', X'', "
             "NULL, 0),"
             "(3, 1, 'three', 'x', 'b', 'y', 1.01, NULL, NULL, -1, 1),"
             "(4, 2, 'four', 'y', NULL, NULL, NULL, '2000-01-01', X'01', 4, "
             "NULL)");
  my_ok(f.m, "INSERT INTO other VALUES (1, 1)");
  my_ok(f.m, "UPDATE t SET v = 'upd', n = NULL WHERE id = 2");
  my_ok(f.m, "DELETE FROM t WHERE id = 3");
  my_ok(f.m, "UPDATE t SET id = 10 WHERE id = 4");
  my_ok(f.m, "BEGIN");
  my_ok(f.m, "INSERT INTO t (id, u) VALUES (5, 5)");
  my_ok(f.m, "UPDATE other SET x = 2");
  my_ok(f.m, "UPDATE t SET d = d + 1 WHERE id = 1");
  my_ok(f.m, "COMMIT");
  sl_binlog_pos_t end = pos_at(f.m);
  sl__cdc_table_t *tabs[] = {t};
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, NULL);
  recs_t rs = {0};
  read_all(s, &rs);
  sl__cdc_stream_close(s);
  char got[512];
  sig(&rs, 0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "I1 I2 I3 I4 T T U2 T D3 T U10 T I5 U1 T");
  /* Indexes, GTIDs, kinds, positions. */
  uint64_t seq0 = start.gtid.g[0].seq;
  SL_ASSERT_EQ_INT(rs.r[0].gtid.seq, seq0 + 1);
  for (int i = 0; i < 4; i++) {
    SL_ASSERT_EQ_INT(rs.r[i].ri, i);
    SL_ASSERT_EQ_INT(rs.r[i].ei, rs.r[0].ei);
    SL_ASSERT_TRUE(rs.r[i].before == NULL && rs.r[i].after != NULL);
    SL_ASSERT_EQ_INT(rs.r[i].pos.gtid.g[0].seq, seq0);
    SL_ASSERT_EQ_INT(rs.r[i].pos.skip_events, rs.r[0].ei);
    SL_ASSERT_EQ_INT(rs.r[i].pos.skip_rows, i + 1);
  }
  SL_ASSERT_TRUE(rs.r[0].ei >= 1);
  SL_ASSERT_EQ_INT(rs.r[4].gtid.seq, seq0 + 1);
  SL_ASSERT_EQ_INT(rs.r[4].pos.gtid.g[0].seq, seq0 + 1);
  SL_ASSERT_EQ_INT(rs.r[4].pos.skip_events, 0);
  SL_ASSERT_EQ_INT(rs.r[5].gtid.seq, seq0 + 2); /* the other table's */
  SL_ASSERT_EQ_STR(rs.r[0].after,
                   "1|4294967295|v\xc3\xa4|\xc3\xa9|it's|x,y|-12.50|"
                   "2024-02-29T12:34:56.789000Z|AP8=|7|9223372036854775807");
  SL_ASSERT_EQ_INT(rs.r[6].rk, SL_ROW_UPDATE_AFTER);
  SL_ASSERT_TRUE(rs.r[6].before != NULL && rs.r[6].after != NULL);
  SL_ASSERT_EQ_INT(rs.r[8].rk, SL_ROW_DELETE);
  SL_ASSERT_TRUE(rs.r[8].before != NULL && rs.r[8].after == NULL);
  SL_ASSERT_TRUE(strncmp(rs.r[10].before, "4|", 2) == 0);
  SL_ASSERT_TRUE(strncmp(rs.r[10].after, "10|", 3) == 0);
  /* The multi-statement transaction: its rows events count the other
   * table's events between them. */
  SL_ASSERT_TRUE(rs.r[13].ei > rs.r[12].ei + 2);
  SL_ASSERT_EQ_INT(rs.r[14].gtid.seq, end.gtid.g[0].seq);
  SL_ASSERT_TRUE(rs.r[0].when_us > 1600000000LL * 1000000 &&
                 rs.r[0].when_us % 1000000 == 0);
  char a[256], b[256];
  state_text(&rs.r[rs.n - 1].pos.gtid, a, sizeof(a));
  state_text(&end.gtid, b, sizeof(b));
  SL_ASSERT_EQ_STR(a, b);
  /* Apply the changes (the snapshot's merge, by primary key) to an empty
   * table and compare with the SELECT. */
  s = open_at(&f, tabs, 1, &start, NULL);
  sl__cdc_rows_t copies, mat;
  sl__cdc_rows_init(&copies, t->schema);
  sl__cdc_rows_init(&mat, t->schema);
  int kinds[64];
  int32_t bi[64], ai[64];
  size_t n_ch = 0;
  for (;;) {
    sl__cdc_ev_t ev;
    sl_error_t *err = NULL;
    int rc = sl__cdc_stream_next(s, &ev, &err);
    if (rc == SL_ENOTFOUND) break;
    SL_ASSERT_OK_E(rc, err);
    if (ev.kind != SL_CDC_EV_ROW) continue;
    SL_ASSERT_TRUE(n_ch < 64);
    kinds[n_ch] = ev.row_kind;
    bi[n_ch] = ai[n_ch] = -1;
    if (ev.before) {
      bi[n_ch] = (int32_t)copies.n;
      SL_ASSERT_OK(sl__cdc_rows_add(&copies, ev.before));
    }
    if (ev.after) {
      ai[n_ch] = (int32_t)copies.n;
      SL_ASSERT_OK(sl__cdc_rows_add(&copies, ev.after));
    }
    n_ch++;
  }
  sl__cdc_stream_close(s);
  sl_row_t rows[128];
  sl__cdc_change_t ch[64];
  for (size_t i = 0; i < n_ch; i++) {
    ch[i].kind = (sl_row_kind_t)kinds[i];
    ch[i].before = ch[i].after = NULL;
    if (bi[i] >= 0) {
      sl__cdc_rows_get(&copies, (uint32_t)bi[i], &rows[2 * i]);
      ch[i].before = &rows[2 * i];
    }
    if (ai[i] >= 0) {
      sl__cdc_rows_get(&copies, (uint32_t)ai[i], &rows[2 * i + 1]);
      ch[i].after = &rows[2 * i + 1];
    }
  }
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_merge(&mat, t->pk, t->n_pk, ch, n_ch, NULL, NULL,
                               &err), err);
  sl__cdc_chunks_t *cl = NULL;
  SL_ASSERT_OK_E(sl__cdc_plan_chunks(f.m, f.server, t, NULL, &cl, NULL, &err),
                 err);
  SL_ASSERT_EQ_INT(cl->n, 1);
  sl__cdc_rows_t snap;
  sl__cdc_rows_init(&snap, t->schema);
  sl__cdc_pos_t low, high;
  SL_ASSERT_OK_E(sl__cdc_read_chunk(f.m, f.server, t, cl, &cl->chunks[0], &low,
                                    &high, &snap, &err), err);
  SL_ASSERT_EQ_INT(snap.n, 4); /* 1, 2, 5, 10 */
  SL_ASSERT_EQ_INT(mat.n, snap.n);
  for (uint32_t i = 0; i < snap.n; i++) {
    sl_row_t r;
    sl__cdc_rows_get(&snap, i, &r);
    char *want = row_text(&r);
    bool found = false;
    for (uint32_t k = 0; k < mat.n; k++) {
      sl_row_t m;
      sl__cdc_rows_get(&mat, k, &m);
      if (sl_row_get_i64(&m, 0) != sl_row_get_i64(&r, 0)) continue;
      char *have = row_text(&m);
      SL_ASSERT_EQ_STR(have, want);
      sl_free(have);
      found = true;
    }
    if (!found) SL_TEST_FAIL("row %s not in the stream's result", want);
    sl_free(want);
  }
  sl__cdc_rows_close(&snap);
  sl__cdc_chunks_free(cl);
  sl__cdc_rows_close(&mat);
  sl__cdc_rows_close(&copies);
  recs_free(&rs);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* A TABLE_MAP that does not match the description (the table changed
 * after the rows were written and before it was described) stops the
 * stream with the table and the difference named. */
SL_TEST(table_changed_refused) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY, v INT)");
  sl_binlog_pos_t start = pos_at(f.m);
  my_ok(f.m, "INSERT INTO t VALUES (1, 1)");
  char *g = my_text(f.m, "SELECT @@gtid_binlog_pos");
  my_ok(f.m, "ALTER TABLE t MODIFY v VARCHAR(10)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_error_t *err = NULL;
  int rc = first_error(&f, tabs, 1, &start, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTSUP);
  const char *msg = sl_error_message(err);
  fprintf(stderr, "%s\n", msg);
  char want[512];
  snprintf(want, sizeof(want), "mariadb-cdc: table `shop`.`t` in the binlog "
           "of %s at binlog.000001:", f.server);
  SL_ASSERT_TRUE(strncmp(msg, want, strlen(want)) == 0);
  snprintf(want, sizeof(want), " (GTID %s) does not match the job's "
           "description of it: column `v` is int64 (nullable) in the binlog, "
           "string (nullable) described; the table changed (sluice cannot "
           "change a running job's schema): start the job again with a new "
           "snapshot", g);
  SL_ASSERT_TRUE(strstr(msg, want) != NULL);
  sl_error_destroy(err);
  sl_free(g);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Positions. */

/* A transaction of 10,000 row changes (inserts, updates, inserts) between
 * two small ones: the stream is cut after its first row, its middle row,
 * the last row of a rows event, the first of the next, its last row,
 * right after its TXN_END and before anything; each cut resumed gives
 * exactly the rest.  A position taken from a resumed stream (still inside
 * the skipped part's transaction) resumes exactly too. */
SL_TEST(positions_in_10k_transaction) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(40), n INT)");
  sl__cdc_table_t *t = describe(&f, "big");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  my_ok(f.m, "INSERT INTO big VALUES (0, 'before', 0)");
  my_ok(f.m, "BEGIN");
  my_ok(f.m, "INSERT INTO big SELECT seq, CONCAT('row-', seq), seq FROM "
             "seq_1_to_6000");
  my_ok(f.m, "UPDATE big SET n = n + 1 WHERE id BETWEEN 1 AND 2000");
  my_ok(f.m, "INSERT INTO big SELECT seq, CONCAT('row-', seq), seq FROM "
             "seq_6001_to_8000");
  my_ok(f.m, "COMMIT");
  my_ok(f.m, "INSERT INTO big VALUES (100000, 'after', 0)");
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, NULL);
  recs_t all = {0};
  read_all(s, &all);
  sl__cdc_stream_close(s);
  /* I0 T, 10,000 rows T, I100000 T */
  SL_ASSERT_EQ_INT(all.n, 2 + 10001 + 2);
  size_t first = 2, last = first + 9999, end = last + 1;
  SL_ASSERT_EQ_INT(all.r[end].kind, SL_CDC_EV_TXN_END);
  uint32_t n_events = 1;
  size_t ev_end = 0; /* the last row of the first rows event */
  for (size_t i = first + 1; i <= last; i++) {
    SL_ASSERT_EQ_INT(all.r[i].kind, SL_CDC_EV_ROW);
    SL_ASSERT_EQ_INT(all.r[i].gtid.seq, all.r[first].gtid.seq);
    if (all.r[i].ei != all.r[i - 1].ei) {
      n_events++;
      SL_ASSERT_EQ_INT(all.r[i].ri, 0);
      if (ev_end == 0) ev_end = i - 1;
    } else {
      SL_ASSERT_EQ_INT(all.r[i].ri, all.r[i - 1].ri + 1);
    }
  }
  fprintf(stderr, "10,000 rows in %u rows events\n", n_events);
  SL_ASSERT_TRUE(n_events >= 3 && ev_end > first);
  struct {
    size_t k;
    const char *what;
  } cuts[] = {{first - 1, "before the transaction"},
              {first, "first row"},
              {first + 5000, "middle row"},
              {ev_end, "last row of a rows event"},
              {ev_end + 1, "first row of the next rows event"},
              {last - 1, "second-last row"},
              {last, "last row"},
              {end, "right after TXN_END"}};
  for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++)
    resume_check(&f, tabs, 1, &all, cuts[c].k, cuts[c].what);
  /* A cut of a resumed stream. */
  s = open_at(&f, tabs, 1, &all.r[first + 100].pos, NULL);
  recs_t part = {0};
  read_n(s, &part, 50, 0);
  sl__cdc_stream_close(s);
  for (size_t i = 0; i < 50; i++)
    SL_ASSERT_TRUE(same_rec(&part.r[i], &all.r[first + 101 + i]));
  SL_ASSERT_EQ_INT(part.r[49].pos.skip_rows, all.r[first + 150].pos.skip_rows);
  resume_from(&f, tabs, 1, &part.r[49].pos, &all, first + 151,
              "a cut of a resumed stream");
  /* The position right after the open, before any event: the start. */
  s = open_at(&f, tabs, 1, &all.r[first + 7].pos, NULL);
  sl_binlog_pos_t p;
  sl__cdc_stream_pos(s, &p);
  SL_ASSERT_EQ_INT(p.skip_events, all.r[first + 7].pos.skip_events);
  SL_ASSERT_EQ_INT(p.skip_rows, all.r[first + 7].pos.skip_rows);
  sl__cdc_stream_close(s);
  /* A position that does not fit the transaction is refused. */
  sl_binlog_pos_t bad = all.r[first].pos;
  bad.skip_rows = 1000000;
  sl_error_t *err = NULL;
  int rc = first_error(&f, tabs, 1, &bad, &err);
  SL_ASSERT_EQ_INT(rc, SL_ECORRUPT);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "the position skips 1000000 "
                        "rows of event") != NULL);
  sl_error_destroy(err);
  recs_free(&part);
  recs_free(&all);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* A start from the server's GTID state text gives the later transactions
 * only. */
SL_TEST(start_from_gtid_state) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  my_ok(f.m, "INSERT INTO t VALUES (1)");
  char *g = my_text(f.m, "SELECT @@gtid_binlog_pos");
  my_ok(f.m, "INSERT INTO t VALUES (2)");
  my_ok(f.m, "INSERT INTO t VALUES (3)");
  sl_binlog_pos_t p = pos_of(g);
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &p, NULL);
  recs_t rs = {0};
  read_all(s, &rs);
  sl__cdc_stream_close(s);
  char got[128];
  sig(&rs, 0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "I2 T I3 T");
  recs_free(&rs);
  sl_free(g);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* A purged position and a GTID the server never wrote: error 1236 with
 * the server's message; a state ahead of the server's: refused before
 * streaming, both states named. */
SL_TEST(purged_and_unknown_gtid) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  my_ok(f.m, "INSERT INTO t VALUES (1)");
  sl_binlog_pos_t old = pos_of("0-1-1");
  char *now = my_text(f.m, "SELECT @@gtid_binlog_pos");
  /* A GTID never written: server 7 never wrote in domain 0. */
  sl_binlog_pos_t never = pos_of("0-7-2");
  sl_error_t *err = NULL;
  int rc = first_error(&f, tabs, 1, &never, &err);
  char want[2048];
  snprintf(want, sizeof(want),
           "mariadb-cdc: reading the binlog of %%S from GTID state 0-7-2: "
           "binlog reader %s: reading the binlog stream: error 1236 (HY000): "
           "Error: connecting slave requested to start from GTID 0-7-2, "
           "which is not in the master's binlog. Since the master's binlog "
           "contains GTIDs with higher sequence numbers, it probably means "
           "that the slave has diverged due to executing extra erroneous "
           "transactions; the position is not (or no "
           "longer) in the server's binlogs: the job cannot resume from it "
           "without loss; start it again with a new snapshot (and keep "
           "binlogs longer than a job may be stopped)", f.server);
  expect_msg(&f, rc, SL_EIO, err, want);
  /* Ahead of the server. */
  sl_binlog_pos_t ahead = pos_of("0-1-999");
  err = NULL;
  rc = first_error(&f, tabs, 1, &ahead, &err);
  snprintf(want, sizeof(want),
           "mariadb-cdc: the binlog of %%S is behind the position to resume "
           "from: the position's GTID state is 0-1-999, the server's "
           "(@@gtid_binlog_pos) is %s (domain 0: 999 > %" PRIu64 "); the "
           "server's "
           "identity or history changed (RESET MASTER, a restore from a "
           "backup, or another server at this address): the job cannot "
           "resume without loss or duplicates; start it again with a new "
           "snapshot", now, pos_of(now).gtid.g[0].seq);
  expect_msg(&f, rc, SL_EIO, err, want);
  /* Purge the first file. */
  my_ok(f.m, "FLUSH BINARY LOGS");
  my_ok(f.m, "INSERT INTO t VALUES (2)");
  my_ok(f.m, "FLUSH BINARY LOGS");
  int n_files = 0;
  for (int i = 0; i < 600; i++) {
    my_ok(f.m, "PURGE BINARY LOGS TO 'binlog.000003'");
    SL_ASSERT_EQ_INT(mysql_query(f.m, "SHOW BINARY LOGS"), 0);
    MYSQL_RES *res = mysql_store_result(f.m);
    SL_ASSERT_TRUE(res != NULL);
    n_files = (int)mysql_num_rows(res);
    mysql_free_result(res);
    if (n_files == 1) break;
    usleep(50000); /* the binlog checkpoint has to pass the file first */
  }
  SL_ASSERT_EQ_INT(n_files, 1);
  err = NULL;
  rc = first_error(&f, tabs, 1, &old, &err);
  snprintf(want, sizeof(want),
           "mariadb-cdc: reading the binlog of %%S from GTID state 0-1-1: "
           "binlog reader %s: reading the binlog stream: error 1236 (HY000): "
           "Could not find GTID state requested by slave in any binlog "
           "files. Probably the slave state is too old and required binlog "
           "files have been purged.; the position is not (or no longer) in "
           "the server's binlogs: the job cannot resume from it without "
           "loss; start it again with a new snapshot (and keep binlogs "
           "longer than a job may be stopped)", f.server);
  expect_msg(&f, rc, SL_EIO, err, want);
  sl_free(now);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* Transactions in two domains (SET gtid_domain_id): positions keep both;
 * a cut at every event resumes exactly; the last position's state is the
 * server's @@gtid_binlog_pos. */
SL_TEST(multi_domain_positions) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY, v INT)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  MYSQL *m5 = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f.srv, sl_server_port(f.srv), &m5, &err), err);
  my_ok(m5, "SET SESSION gtid_domain_id = 5");
  my_ok(f.m, "INSERT INTO t VALUES (1, 0), (2, 0)");
  my_ok(m5, "INSERT INTO shop.t VALUES (51, 5), (52, 5)");
  my_ok(f.m, "UPDATE t SET v = 1 WHERE id = 1");
  my_ok(m5, "BEGIN");
  my_ok(m5, "UPDATE shop.t SET v = 6 WHERE id = 51");
  my_ok(m5, "DELETE FROM shop.t WHERE id = 52");
  my_ok(m5, "COMMIT");
  my_ok(f.m, "DELETE FROM t WHERE id = 2");
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, NULL);
  recs_t all = {0};
  read_all(s, &all);
  sl__cdc_stream_close(s);
  char got[256];
  sig(&all, 0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "I1 I2 T I51 I52 T U1 T U51 D52 T D2 T");
  SL_ASSERT_EQ_INT(all.r[3].gtid.domain, 5);
  SL_ASSERT_EQ_INT(all.r[3].gtid.seq, 1);
  /* Inside the domain-5 transaction: both domains in the state. */
  char a[256], b[256];
  state_text(&all.r[8].pos.gtid, a, sizeof(a));
  snprintf(b, sizeof(b), "0-1-%" PRIu64 ",5-1-1",
           start.gtid.g[0].seq + 2);
  SL_ASSERT_EQ_STR(a, b);
  SL_ASSERT_TRUE(all.r[8].pos.skip_events > 0);
  char *now = my_text(f.m, "SELECT @@gtid_binlog_pos");
  state_text(&all.r[all.n - 1].pos.gtid, a, sizeof(a));
  SL_ASSERT_EQ_STR(a, now);
  for (size_t k = 0; k + 1 < all.n; k++)
    resume_check(&f, tabs, 1, &all, k, "multi-domain");
  sl_free(now);
  mysql_close(m5);
  recs_free(&all);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* RESET MASTER: the server's state is behind the position (or empty);
 * the stream refuses to start, naming both states. */
SL_TEST(reset_master_detected) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  my_ok(f.m, "INSERT INTO t VALUES (1)");
  my_ok(f.m, "INSERT INTO t VALUES (2)");
  sl_binlog_pos_t p = pos_at(f.m);
  char pt[64], want[2048];
  state_text(&p.gtid, pt, sizeof(pt));
  SL_ASSERT_TRUE(p.gtid.n == 1 && p.gtid.g[0].seq > 1);
  my_ok(f.m, "RESET MASTER");
  sl_error_t *err = NULL;
  sl__cdc_stream_t *s = NULL;
  int rc = open_rc(&f, tabs, 1, &p, NULL, &s, &err);
  snprintf(want, sizeof(want),
           "mariadb-cdc: the binlog of %%S is behind the position to resume "
           "from: the position's GTID state is %s, the server's "
           "(@@gtid_binlog_pos) is (empty) (domain 0 is not in the "
           "server's state); the server's identity or history changed "
           "(RESET MASTER, a restore from a backup, or another server at "
           "this address): the job cannot resume without loss or "
           "duplicates; start it again with a new snapshot", pt);
  expect_msg(&f, rc, SL_EIO, err, want);
  my_ok(f.m, "INSERT INTO t VALUES (3)");
  err = NULL;
  rc = open_rc(&f, tabs, 1, &p, NULL, &s, &err);
  snprintf(want, sizeof(want),
           "mariadb-cdc: the binlog of %%S is behind the position to resume "
           "from: the position's GTID state is %s, the server's "
           "(@@gtid_binlog_pos) is 0-1-1 (domain 0: %" PRIu64 " > 1); the "
           "server's identity or history changed (RESET MASTER, a restore "
           "from a backup, or another server at this address): the job "
           "cannot resume without loss or duplicates; start it again with a "
           "new snapshot", pt, p.gtid.g[0].seq);
  expect_msg(&f, rc, SL_EIO, err, want);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* DDL. */

/* DDL on other tables passes (their transactions end as usual); DDL on
 * the captured table stops the stream with the table, the place, the
 * GTID and the statement, every time it is resumed before it. */
SL_TEST(ddl_on_captured_table_refused) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE o (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  my_ok(f.m, "INSERT INTO t VALUES (1)");
  my_ok(f.m, "CREATE TABLE o2 (id INT PRIMARY KEY)");
  my_ok(f.m, "ALTER TABLE o ADD COLUMN c INT");
  my_ok(f.m, "RENAME TABLE o2 TO o3");
  my_ok(f.m, "TRUNCATE o");
  my_ok(f.m, "DROP TABLE o3");
  my_ok(f.m, "CREATE INDEX i ON o (c)");
  my_ok(f.m, "CREATE VIEW v AS SELECT * FROM t");
  my_ok(f.m, "INSERT INTO t VALUES (2)");
  char *before = my_text(f.m, "SELECT @@gtid_binlog_pos");
  my_ok(f.m, "ALTER TABLE t ADD COLUMN c INT");
  char *g = my_text(f.m, "SELECT @@gtid_binlog_pos");
  /* The DDL's place: the last QUERY event of the binlog. */
  SL_ASSERT_EQ_INT(mysql_query(f.m, "SHOW BINLOG EVENTS IN 'binlog.000001'"),
                   0);
  MYSQL_RES *res = mysql_store_result(f.m);
  SL_ASSERT_TRUE(res != NULL);
  MYSQL_ROW row;
  char at[32] = "";
  while ((row = mysql_fetch_row(res)) != NULL)
    if (row[2] && !strcmp(row[2], "Query") && row[5] &&
        strstr(row[5], "ALTER TABLE t ADD") != NULL)
      snprintf(at, sizeof(at), "%s", row[1]);
  mysql_free_result(res);
  SL_ASSERT_TRUE(at[0] != 0);
  my_ok(f.m, "INSERT INTO t VALUES (3, 3)");
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, NULL);
  recs_t rs = {0};
  sl_error_t *err = NULL;
  int rc;
  for (;;) {
    sl__cdc_ev_t ev;
    rc = sl__cdc_stream_next(s, &ev, &err);
    if (rc != SL_OK) break;
    if (ev.kind != SL_CDC_EV_HEARTBEAT) rec_add(&rs, s, &ev);
  }
  char want[2048];
  snprintf(want, sizeof(want),
           "mariadb-cdc: DDL on captured table `shop`.`t` at "
           "binlog.000001:%s (GTID %s): ALTER TABLE t ADD COLUMN c INT; "
           "sluice cannot change a running job's schema (adding a column is "
           "refused too: no sluice sink follows a schema change yet): start "
           "the job again without its checkpoint, with a new snapshot of "
           "the table", at, g);
  expect_msg(&f, rc, SL_ENOTSUP, err, want);
  char got[256];
  sig(&rs, 0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "I1 T T T T T T T T I2 T");
  /* The position stays before the DDL: resumed, it stops there again. */
  sl_binlog_pos_t p;
  sl__cdc_stream_pos(s, &p);
  sl__cdc_stream_close(s);
  char a[64];
  state_text(&p.gtid, a, sizeof(a));
  SL_ASSERT_EQ_STR(a, before);
  err = NULL;
  rc = first_error(&f, tabs, 1, &p, &err);
  expect_msg(&f, rc, SL_ENOTSUP, err, want);
  /* DROP DATABASE names every table of it. */
  my_ok(f.m, "CREATE DATABASE keep");
  my_ok(f.m, "DROP DATABASE keep");
  sl_binlog_pos_t p2 = pos_at(f.m);
  my_ok(f.m, "DROP DATABASE shop");
  err = NULL;
  rc = first_error(&f, tabs, 1, &p2, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTSUP);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "DDL on captured table "
                        "`shop`.`t`") != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "): DROP DATABASE shop; ") !=
                 NULL);
  sl_error_destroy(err);
  recs_free(&rs);
  sl_free(before);
  sl_free(g);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Failures and blocking streams. */

/* A blocking stream across a connection lost in the middle of a
 * transaction (injection point cdc.stream.before_read: the rest of the
 * transaction is read again and what was returned skipped exactly), a
 * clean restart of the server and a crash (SIGKILL): every change once,
 * in order.  (A restart alone cannot cut a transaction: the server has
 * sent it into the socket before it stops.) */
SL_TEST(server_restart_resumes) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  my_ok(f.m, "BEGIN");
  my_ok(f.m, "INSERT INTO t SELECT seq, 'a' FROM seq_1_to_60");
  my_ok(f.m, "INSERT INTO t SELECT seq, 'b' FROM seq_61_to_100");
  my_ok(f.m, "COMMIT");
  sopts_t so = {.is_non_blocking = false, .heartbeat_ms = 100};
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, &so);
  recs_t rs = {0};
  read_n(s, &rs, 50, 600);
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  sl_inject_reset();
  /* The next read (of the second rows event) loses the connection. */
  SL_ASSERT_OK(sl_inject_arm("cdc.stream.before_read", SL_INJECT_FAIL, 1,
                             false));
  read_n(s, &rs, 50 + 1, 600);
  SL_ASSERT_TRUE(sl_inject_hits("cdc.stream.before_read") >= 2);
  sl_inject_reset();
  char got[1024], want[1024];
  size_t o = 0;
  for (int i = 1; i <= 100; i++)
    o += (size_t)snprintf(want + o, sizeof(want) - o, "%sI%d", i > 1 ? " " : "",
                          i);
  snprintf(want + o, sizeof(want) - o, " T");
  sig(&rs, 0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, want);
  /* A clean restart while the stream waits. */
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_restart(f.srv, SL_SERVER_STOP_CLEAN, &err), err);
  fx_reconnect(&f);
  my_ok(f.m, "INSERT INTO t VALUES (101, 'c')");
  size_t n0 = rs.n;
  read_n(s, &rs, 2, 600);
  sig(&rs, n0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "I101 T");
  /* A crash (SIGKILL). */
  SL_ASSERT_OK_E(sl_server_restart(f.srv, SL_SERVER_STOP_CRASH, &err), err);
  fx_reconnect(&f);
  my_ok(f.m, "UPDATE t SET v = 'd' WHERE id = 101");
  n0 = rs.n;
  read_n(s, &rs, 2, 600);
  sig(&rs, n0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "U101 T");
  SL_ASSERT_EQ_STR(rs.r[n0].after, "101|d");
  char a[64];
  char *now = my_text(f.m, "SELECT @@gtid_binlog_pos");
  state_text(&rs.r[rs.n - 1].pos.gtid, a, sizeof(a));
  SL_ASSERT_EQ_STR(a, now);
  sl_free(now);
  sl__cdc_stream_close(s);
  recs_free(&rs);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* An idle blocking stream with a heartbeat gives SL_CDC_EV_HEARTBEAT,
 * its position unchanged. */
SL_TEST(heartbeat_on_idle_stream) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  sopts_t so = {.is_non_blocking = false, .heartbeat_ms = 50};
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, &so);
  for (int i = 0; i < 2; i++) {
    sl__cdc_ev_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__cdc_stream_next(s, &ev, &err), err);
    SL_ASSERT_EQ_INT(ev.kind, SL_CDC_EV_HEARTBEAT);
    sl_binlog_pos_t p;
    sl__cdc_stream_pos(s, &p);
    char a[64], b[64];
    state_text(&p.gtid, a, sizeof(a));
    state_text(&start.gtid, b, sizeof(b));
    SL_ASSERT_EQ_STR(a, b);
    SL_ASSERT_EQ_INT(p.skip_events, 0);
  }
  sl__cdc_stream_close(s);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

static void *interrupter(void *arg) {
  usleep(200000); /* either way (blocked or not yet) the result is the same */
  sl__cdc_stream_interrupt(arg);
  return NULL;
}

/* interrupt from another thread: a read blocked on an idle stream (no
 * heartbeat) and a reconnect backoff (server stopped) both return
 * SL_ECANCELED. */
SL_TEST(interrupt_from_another_thread) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  sopts_t so = {.is_non_blocking = false};
  for (int round = 0; round < 2; round++) {
    sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, &so);
    if (round == 1) {
      sl_error_t *err = NULL;
      SL_ASSERT_OK_E(sl_server_stop(f.srv, SL_SERVER_STOP_CLEAN, &err), err);
    }
    pthread_t th;
    SL_ASSERT_EQ_INT(pthread_create(&th, NULL, interrupter, s), 0);
    sl__cdc_ev_t ev;
    sl_error_t *err = NULL;
    int rc = sl__cdc_stream_next(s, &ev, &err);
    SL_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
    expect_msg(&f, rc, SL_ECANCELED, err,
               "mariadb-cdc: %S: the change stream was interrupted");
    err = NULL;
    rc = sl__cdc_stream_next(s, &ev, &err); /* stays cancelled */
    expect_msg(&f, rc, SL_ECANCELED, err,
               "mariadb-cdc: %S: the change stream was interrupted");
    sl__cdc_stream_close(s);
  }
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start_again(f.srv, &err), err);
  fx_reconnect(&f);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* A server that stays away: reconnecting gives up after max_reconnect_ms
 * with the server and the last error named. */
SL_TEST(reconnect_gives_up) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  sl_binlog_pos_t start = pos_at(f.m);
  sopts_t so = {.is_non_blocking = false, .heartbeat_ms = 100,
                .max_reconnect_ms = 1500};
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, &so);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_stop(f.srv, SL_SERVER_STOP_CLEAN, &err), err);
  sl__cdc_ev_t ev;
  int rc;
  while ((rc = sl__cdc_stream_next(s, &ev, &err)) == SL_OK)
    SL_ASSERT_EQ_INT(ev.kind, SL_CDC_EV_HEARTBEAT);
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  const char *msg = sl_error_message(err);
  fprintf(stderr, "%s\n", msg);
  char want[256];
  snprintf(want, sizeof(want), "mariadb-cdc: lost the binlog stream of %s "
           "and could not reconnect within 1500 ms (", f.server);
  SL_ASSERT_TRUE(strncmp(msg, want, strlen(want)) == 0);
  snprintf(want, sizeof(want), "last error: mariadb-cdc: cannot connect to "
           "%s", f.server);
  SL_ASSERT_TRUE(strstr(msg, want) != NULL);
  sl_error_destroy(err);
  sl__cdc_stream_close(s);
  SL_ASSERT_OK_E(sl_server_start_again(f.srv, &err), err);
  fx_reconnect(&f);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* The fallback for servers without GTIDs: a position with an empty GTID
 * state and a file starts at that file and offset, keeps file/offset
 * positions (the state stays empty) and resumes exactly from each, inside
 * transactions too. */
SL_TEST(file_offset_fallback) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  /* After the CREATE TABLE (from the file's start the stream would stop
   * at it: DDL on the captured table). */
  SL_ASSERT_EQ_INT(mysql_query(f.m, "SHOW MASTER STATUS"), 0);
  MYSQL_RES *res = mysql_store_result(f.m);
  MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
  SL_ASSERT_TRUE(row != NULL && row[0] != NULL && row[1] != NULL);
  sl_binlog_pos_t start;
  memset(&start, 0, sizeof(start));
  snprintf(start.file, sizeof(start.file), "%s", row[0]);
  start.offset = strtoull(row[1], NULL, 10);
  mysql_free_result(res);
  SL_ASSERT_EQ_STR(start.file, "binlog.000001");
  my_ok(f.m, "INSERT INTO t VALUES (1), (2)");
  my_ok(f.m, "BEGIN");
  my_ok(f.m, "INSERT INTO t VALUES (3)");
  my_ok(f.m, "INSERT INTO t VALUES (4), (5)");
  my_ok(f.m, "COMMIT");
  my_ok(f.m, "DELETE FROM t WHERE id = 1");
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, NULL);
  recs_t all = {0};
  read_all(s, &all);
  sl__cdc_stream_close(s);
  char got[256];
  sig(&all, 0, got, sizeof(got));
  SL_ASSERT_EQ_STR(got, "I1 I2 T I3 I4 I5 T D1 T");
  for (size_t k = 0; k < all.n; k++) {
    SL_ASSERT_EQ_INT(all.r[k].pos.gtid.n, 0);
    SL_ASSERT_EQ_STR(all.r[k].pos.file, "binlog.000001");
    SL_ASSERT_TRUE(all.r[k].pos.offset >= start.offset);
  }
  SL_ASSERT_TRUE(all.r[4].pos.skip_events > 0); /* inside: after I4 */
  for (size_t k = 0; k + 1 < all.n; k++)
    resume_check(&f, tabs, 1, &all, k, "file/offset");
  recs_free(&all);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/*
 * Events between transactions move the file position.  Some time after a
 * rotation MariaDB writes a BINLOG_CHECKPOINT into the new file; a stream
 * read to the end of that file must stand at its end (the source's
 * backfill stops at HIGH's file and offset, which can lie just after that
 * event, and waited there for 30 s before this was fixed).
 */
SL_TEST(file_position_passes_events_between_transactions) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE TABLE t (id INT PRIMARY KEY)");
  sl__cdc_table_t *t = describe(&f, "t");
  sl__cdc_table_t *tabs[] = {t};
  my_ok(f.m, "FLUSH BINARY LOGS");
  /* Bounded wait for the server to write the checkpoint event. */
  for (int i = 0;; i++) {
    SL_ASSERT_EQ_INT(mysql_query(f.m, "SHOW BINLOG EVENTS IN 'binlog.000002'"),
                     0);
    MYSQL_RES *res = mysql_store_result(f.m);
    SL_ASSERT_TRUE(res != NULL);
    bool has = false;
    MYSQL_ROW row;
    while ((row = mysql_fetch_row(res)) != NULL)
      if (row[2] && strcmp(row[2], "Binlog_checkpoint") == 0) has = true;
    mysql_free_result(res);
    if (has) break;
    if (i > 10000) SL_TEST_FAIL("no Binlog_checkpoint in binlog.000002");
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  SL_ASSERT_EQ_INT(mysql_query(f.m, "SHOW MASTER STATUS"), 0);
  MYSQL_RES *res = mysql_store_result(f.m);
  MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
  SL_ASSERT_TRUE(row != NULL && row[0] != NULL && row[1] != NULL);
  char end_file[64];
  snprintf(end_file, sizeof(end_file), "%s", row[0]);
  uint64_t end_off = strtoull(row[1], NULL, 10);
  mysql_free_result(res);
  SL_ASSERT_EQ_STR(end_file, "binlog.000002");
  sl_binlog_pos_t start;
  memset(&start, 0, sizeof(start));
  snprintf(start.file, sizeof(start.file), "binlog.000002");
  start.offset = 4;
  sl__cdc_stream_t *s = open_at(&f, tabs, 1, &start, NULL);
  recs_t all = {0};
  read_all(s, &all);
  sl_binlog_pos_t at;
  sl__cdc_stream_pos(s, &at);
  sl__cdc_stream_close(s);
  SL_ASSERT_EQ_STR(at.file, "binlog.000002");
  SL_ASSERT_EQ_INT(at.offset, end_off);
  recs_free(&all);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}
