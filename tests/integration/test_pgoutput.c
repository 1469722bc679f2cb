/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pgoutput decoder and the replication transport
 * (src/connectors/postgres/pgoutput_decode.c, pg_repl.c) against a real
 * PostgreSQL 15 started by each test: the test writes rows of known values,
 * streams them through a slot of its own, and compares what the decoder
 * gives with the values its own SQL wrote (asking the server, never the
 * decoder, where a value needs computing).  Every captured message is then
 * cut at every length and must be rejected with an error.  With
 * SL_PGOUTPUT_CAPTURE=<dir> the captured streams are also written there
 * (the seed corpus of sl-fuzz-pgoutput, tests/fuzz/corpus/pgoutput).
 */
#include <time.h>

#include "connectors/postgres/pg_repl.h"
#include "connectors/postgres/pgoutput_decode.h"
#include "pg_fx.h"
#include "unit/pgo_events.h"

/* ------------------------------------------------------------------ */
/* Fixture: a server, a plain connection, a replication connection      */

typedef struct rfx_s {
  sl_server_t *srv;
  PGconn *c;
  sl_pg_repl_t *r;
  uint64_t slot_lsn; /* the slot's consistent point */
  sl_pgo_decoder_t d;
  sl_bytes_t capture; /* [u32be len][CopyData]... */
  size_t n_captured;
  sl_bytes_t events; /* what the stream said, one event a line */
  char *big;         /* the last long string value seen */
} rfx_t;

static void rfx_open_with(rfx_t *f, const char *ddl,
                          const char *const *settings) {
  memset(f, 0, sizeof(*f));
  f->srv = start_pg(0, settings);
  f->c = direct(f->srv);
  sql_ok(f->c, ddl);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pg_repl_connect(sl_server_conninfo(f->srv), &f->r, &err),
                 err);
  sl_pg_sysid_t id;
  SL_ASSERT_OK_E(sl__pg_repl_identify(f->r, &id, &err), err);
  SL_ASSERT_EQ_STR(id.dbname, "postgres");
  SL_ASSERT_TRUE(id.timeline >= 1 && id.xlogpos > 0);
  SL_ASSERT_OK_E(
      sl__pg_repl_create_slot(f->r, "sl_test", false, &f->slot_lsn, &err),
      err);
  sl__pgo_decoder_init(&f->d);
  sl_bytes_init(&f->capture);
  sl_bytes_init(&f->events);
}

static void rfx_open(rfx_t *f, const char *ddl) { rfx_open_with(f, ddl, NULL); }

static void rfx_close(rfx_t *f, const char *capture_name) {
  const char *dir = getenv("SL_PGOUTPUT_CAPTURE");
  if (dir && capture_name) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, capture_name);
    FILE *fp = fopen(path, "wb");
    SL_ASSERT_TRUE(fp != NULL);
    SL_ASSERT_EQ_INT(fwrite(f->capture.data, 1, f->capture.len, fp),
                     f->capture.len);
    SL_ASSERT_EQ_INT(fclose(fp), 0);
  }
  sl__pg_repl_destroy(f->r);
  PQfinish(f->c);
  sl_server_destroy(f->srv);
  sl__pgo_decoder_close(&f->d);
  sl_bytes_close(&f->capture);
  sl_bytes_close(&f->events);
  sl_free(f->big);
}

static void rfx_start(rfx_t *f) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(
      sl__pg_repl_start(f->r, "sl_test", f->slot_lsn, "sl_pub", true, &err),
      err);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next CopyData (keepalives included), within 60 s. */
static void next_copy(rfx_t *f, sl_pg_copy_t *out) {
  int64_t end = mono_ms() + 60000;
  for (;;) {
    sl_error_t *err = NULL;
    int rc = sl__pg_repl_read(f->r, 1000, out, &err);
    if (rc == SL_OK) return;
    if (rc != SL_EAGAIN) SL_ASSERT_OK_E(rc, err);
    if (mono_ms() > end) SL_TEST_FAIL("no replication data within 60 s");
  }
}

/* The next pgoutput message (decoded; captured). */
static void next_msg(rfx_t *f, sl_pgo_msg_t *m) {
  sl_pg_copy_t c;
  do {
    next_copy(f, &c);
  } while (c.kind != 'w');
  /* The framing is re-encoded: the CopyData buffer is libpq's. */
  uint8_t hdr[25];
  hdr[0] = 'w';
  for (int i = 0; i < 8; i++) {
    hdr[1 + i] = (uint8_t)(c.wal_start >> (56 - 8 * i));
    hdr[9 + i] = (uint8_t)(c.wal_end >> (56 - 8 * i));
    hdr[17 + i] = (uint8_t)((uint64_t)c.send_time >> (56 - 8 * i));
  }
  uint32_t n = (uint32_t)(25 + c.len);
  uint8_t len_be[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16),
                       (uint8_t)(n >> 8), (uint8_t)n};
  SL_ASSERT_OK(sl_bytes_append(&f->capture, len_be, 4));
  SL_ASSERT_OK(sl_bytes_append(&f->capture, hdr, 25));
  SL_ASSERT_OK(sl_bytes_append(&f->capture, c.data, c.len));
  f->n_captured++;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgo_decode(&f->d, c.data, c.len, m, &err), err);
}

/*
 * Read messages until n_commits Commit messages (and n_plain
 * non-transactional messages) went by, writing one line per event into
 * f->events: "B", "C", "I t (..)", "U t K(..) N(..)", "D t O(..)",
 * "T opts=2 t_a,t_b", "M tx sluice 'in-tx'".  Relation messages are
 * checked (they must precede the first use) but not listed.  Returns the
 * end LSN of the last commit.
 */
static uint64_t stream_events(rfx_t *f, int n_commits, int n_plain) {
  uint64_t end = 0;
  bool in_tx = false;
  while (n_commits > 0 || n_plain > 0) {
    sl_pgo_msg_t m;
    next_msg(f, &m);
    switch (m.type) {
    case 'B':
      SL_ASSERT_TRUE(m.u.begin.xid != 0 &&
                     m.u.begin.final_lsn > f->slot_lsn);
      break;
    case 'C':
      SL_ASSERT_TRUE(m.u.commit.end_lsn > m.u.commit.commit_lsn);
      end = m.u.commit.end_lsn;
      n_commits--;
      break;
    case 'R':
      SL_ASSERT_EQ_STR(m.u.relation->nspname, "public");
      break;
    case 'M':
      if (!in_tx) n_plain--;
      break;
    default:
      break;
    }
    pgo_event(&f->d, &m, &in_tx, &f->big, &f->events);
  }
  SL_ASSERT_OK(sl_bytes_append(&f->events, "", 1));
  f->events.len--;
  return end;
}

static void assert_events(rfx_t *f, const char *want) {
  SL_ASSERT_OK(sl_bytes_append(&f->events, "", 1));
  const char *got = (const char *)f->events.data;
  if (strcmp(got, want) != 0)
    SL_TEST_FAIL("events differ.\n--- got:\n%s--- want:\n%s", got, want);
  sl_bytes_clear(&f->events);
}

/*
 * Every captured message cut short must be rejected with an error that
 * names a byte offset, and never read out of bounds (each cut is its own
 * allocation of exactly that size, so ASan sees an overread).  Messages
 * above 4 KiB are cut at every length up to 4 KiB, then every 509 bytes
 * and at each of their last 64 lengths.
 */
static void check_prefixes(rfx_t *f) {
  size_t off = 0, n_checked = 0;
  while (off < f->capture.len) {
    const uint8_t *q = f->capture.data + off;
    uint32_t n = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 |
                 (uint32_t)q[2] << 8 | q[3];
    const uint8_t *frame = q + 4;
    off += 4 + n;
    for (uint32_t k = 0; k < n; k++) {
      if (k > 4096 && k % 509 != 0 && k + 64 < n) continue;
      uint8_t *cut = sl_malloc(k ? k : 1);
      memcpy(cut, frame, k);
      sl_error_t *err = NULL;
      sl_pg_copy_t c;
      sl_pgo_msg_t m;
      int rc = sl__pg_copy_decode(cut, k, &c, &err);
      if (rc == SL_OK) rc = sl__pgo_decode(&f->d, c.data, c.len, &m, &err);
      if (rc != SL_ECORRUPT || err == NULL ||
          strstr(sl_error_message(err), "byte") == NULL)
        SL_TEST_FAIL("message '%c' of %u bytes cut at %u: rc %d, '%s'",
                     n > 25 ? frame[25] : '?', n, k, rc,
                     err ? sl_error_message(err) : "(no error)");
      sl_error_destroy(err);
      sl_free(cut);
      n_checked++;
    }
  }
  SL_ASSERT_TRUE(n_checked > 100);
}

/* ------------------------------------------------------------------ */
/* Types                                                                 */

#define TYPES_DDL                                                         \
  "CREATE TABLE t_types (id int PRIMARY KEY, b bool, i2 smallint, "       \
  "i4 int, i8 bigint, f4 real, f8 double precision, n numeric(12,3), "    \
  "nu numeric, tx text, vc varchar(20), bc char(5), by bytea, d date, "   \
  "ts timestamp, tz timestamptz, u uuid, j json, jb jsonb);"              \
  "CREATE TYPE mood AS ENUM ('sad', 'ok');"                                \
  "CREATE TABLE t_odd (id int PRIMARY KEY, p point, m mood);"             \
  "CREATE PUBLICATION sl_pub FOR TABLE t_types, t_odd"

SL_TEST(types) {
  rfx_t f;
  rfx_open(&f, TYPES_DDL);
  /* The server's session runs in another zone than the stream (UTC), so
   * a timestamptz is an instant, whatever zone it was written in. */
  sql_ok(f.c, "SET TIME ZONE 'America/New_York'");
  sql_ok(f.c,
         "INSERT INTO t_types VALUES (1, true, -32768, 2147483647, "
         "-9223372036854775808, 1.5, -2.25e-300, -123456789.125, "
         "3.14159265358979323846264338327950288, 'h\xc3\xa9llo \xe2\x9c\x93', "
         "'varchar', 'ab', '\\x00ff41', '2024-02-29', "
         "'2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.5+05:30', "
         "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2]}', "
         "'{\"b\": {\"c\": null}, \"a\": 1}')");
  sql_ok(f.c, "INSERT INTO t_types (id) VALUES (2)");
  sql_ok(f.c,
         "INSERT INTO t_types (id, d, ts, tz) VALUES (3, '0044-03-15 BC', "
         "'1969-12-31 23:59:59.999999', '1970-01-01 00:00:00+00')");
  /* The instants, computed by the server. */
  SL_ASSERT_EQ_INT(sql_int(f.c, "SELECT (extract(epoch FROM d::timestamp) "
                                "* 1000000)::bigint FROM t_types WHERE id=1"),
                   1709164800000000ll);
  SL_ASSERT_EQ_INT(sql_int(f.c, "SELECT (extract(epoch FROM ts) * 1000000)"
                                "::bigint FROM t_types WHERE id=1"),
                   1709212455123456ll);
  SL_ASSERT_EQ_INT(sql_int(f.c, "SELECT (extract(epoch FROM tz) * 1000000)"
                                "::bigint FROM t_types WHERE id=1"),
                   1709192655500000ll);
  int64_t bc = sql_int(f.c, "SELECT (extract(epoch FROM d::timestamp) * "
                            "1000000)::bigint FROM t_types WHERE id=3");
  char *jb = sql_text(f.c, "SELECT jb::text FROM t_types WHERE id=1");
  SL_ASSERT_EQ_STR(jb, "{\"a\": 1, \"b\": {\"c\": null}}");
  sl_free(jb);
  sql_ok(f.c, "INSERT INTO t_odd VALUES (1, '(1,2)', 'ok')");
  int64_t mood_oid = sql_int(f.c, "SELECT 'mood'::regtype::oid");

  rfx_start(&f);
  stream_events(&f, 3, 0);
  /* The floats as written in the INSERT, read back exactly
   * (extra_float_digits=3). */
  char f4[32], f8[32];
  snprintf(f4, sizeof(f4), "f%.17g", 1.5);
  snprintf(f8, sizeof(f8), "f%.17g", -2.25e-300);
  SL_ASSERT_EQ_STR(f4, PGO_F4);
  SL_ASSERT_EQ_STR(f8, PGO_F8);
  SL_ASSERT_EQ_INT(bc, -63517824000000000ll); /* PGO_BC_US */
  assert_events(&f, PGO_TYPES_EVENTS);

  /* A type of the user's: a Type message names it before the Relation
   * that uses it. */
  sl_pgo_msg_t m;
  next_msg(&f, &m);
  SL_ASSERT_EQ_INT(m.type, 'B');
  next_msg(&f, &m);
  SL_ASSERT_EQ_INT(m.type, 'Y');
  SL_ASSERT_EQ_INT(m.u.type.oid, mood_oid);
  SL_ASSERT_EQ_STR(m.u.type.nspname, "public");
  SL_ASSERT_EQ_STR(m.u.type.name, "mood");
  next_msg(&f, &m);
  SL_ASSERT_EQ_INT(m.type, 'R');
  SL_ASSERT_EQ_INT(m.u.relation->cols[2].type_oid, mood_oid);
  next_msg(&f, &m);
  SL_ASSERT_EQ_INT(m.type, 'I');
  /* Unsupported types: a clear error naming relation, column, oid. */
  sl_type_t t;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__pgo_column_type(m.u.change.rel, 2, &t, &err),
                   SL_ENOTSUP);
  char want_m[256];
  snprintf(want_m, sizeof(want_m),
           "pgoutput: relation public.t_odd column \"m\" (type unsupported, "
           "oid %lld): type not supported by sluice's PostgreSQL CDC (see "
           "docs/connectors.md for the supported types)",
           (long long)mood_oid);
  SL_ASSERT_EQ_STR(sl_error_message(err), want_m);
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(sl__pgo_column_type(m.u.change.rel, 1, &t, &err),
                   SL_ENOTSUP);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "pgoutput: relation public.t_odd column \"p\" (type "
                   "unsupported, oid 600): type not supported by sluice's "
                   "PostgreSQL CDC (see docs/connectors.md for the "
                   "supported types)");
  sl_error_destroy(err);
  check_prefixes(&f);
  rfx_close(&f, "types");
}

/* ------------------------------------------------------------------ */
/* Changes: TOAST, old tuples, a multi-statement transaction, logical    */
/* messages, truncate                                                    */

#define CHANGES_DDL                                                       \
  "CREATE TABLE t_toast (id int PRIMARY KEY, big text, small int);"       \
  "CREATE TABLE t_key (id int PRIMARY KEY, v text);"                      \
  "CREATE TABLE t_full (id int PRIMARY KEY, v text);"                     \
  "ALTER TABLE t_full REPLICA IDENTITY FULL;"                             \
  "CREATE TABLE t_ftoast (id int PRIMARY KEY, big text, small int);"      \
  "ALTER TABLE t_ftoast REPLICA IDENTITY FULL;"                           \
  "CREATE PUBLICATION sl_pub FOR TABLE t_toast, t_key, t_full, t_ftoast"

SL_TEST(changes) {
  rfx_t f;
  rfx_open(&f, CHANGES_DDL);
  /* 9600 characters of md5 hex: pglz cannot squeeze it under the TOAST
   * threshold, so it is stored out of line. */
  sql_ok(f.c, "INSERT INTO t_toast SELECT 1, string_agg(md5(g::text), '' "
              "ORDER BY g), 1 FROM generate_series(1, 300) g");
  sql_ok(f.c, "INSERT INTO t_toast VALUES (2, NULL, 1)");
  SL_ASSERT_TRUE(sql_int(f.c, "SELECT pg_relation_size(reltoastrelid) FROM "
                              "pg_class WHERE relname = 't_toast'") > 0);
  sql_ok(f.c, "UPDATE t_toast SET small = small + 1");
  sql_ok(f.c,
         "BEGIN;"
         "INSERT INTO t_key VALUES (1, 'a'), (2, 'b');"
         "INSERT INTO t_full VALUES (1, 'x');"
         "UPDATE t_full SET v = 'y' WHERE id = 1;"
         "UPDATE t_key SET id = 3 WHERE id = 2;"
         "UPDATE t_key SET v = 'c' WHERE id = 3;"
         "DELETE FROM t_key WHERE id = 1;"
         "DELETE FROM t_full WHERE id = 1;"
         "SELECT pg_logical_emit_message(true, 'sluice', 'in-tx');"
         "COMMIT");
  sql_ok(f.c, "SELECT pg_logical_emit_message(false, 'sluice_hb', 'hb')");
  sql_ok(f.c, "TRUNCATE t_key, t_full RESTART IDENTITY");
  /* REPLICA IDENTITY FULL: the old tuple carries the TOAST value. */
  sql_ok(f.c, "INSERT INTO t_ftoast SELECT * FROM t_toast WHERE id = 1");
  sql_ok(f.c, "UPDATE t_ftoast SET small = 3");
  /* A transaction replayed from another server: an Origin message. */
  sql_ok(f.c, "SELECT pg_replication_origin_create('upstream')");
  sql_ok(f.c, "SELECT pg_replication_origin_session_setup('upstream')");
  sql_ok(f.c, "BEGIN; SELECT pg_replication_origin_xact_setup('0/12345678', "
              "now()); INSERT INTO t_key VALUES (9, 'o'); COMMIT");
  sql_ok(f.c, "SELECT pg_replication_origin_session_reset()");
  char *big = sql_text(f.c, "SELECT big FROM t_toast WHERE id = 1");
  SL_ASSERT_EQ_INT(strlen(big), 9600);

  rfx_start(&f);
  stream_events(&f, 8, 1);
  assert_events(&f, PGO_CHANGES_EVENTS);
  SL_ASSERT_TRUE(f.big != NULL);
  SL_ASSERT_EQ_STR(f.big, big);
  sl_free(big);
  check_prefixes(&f);
  rfx_close(&f, "changes");
}

/* ------------------------------------------------------------------ */
/* The slot's confirmed_flush_lsn follows the caller's flush LSN only    */

/* Poll until a count query answers 1 (a condition, not a time). */
static void wait_for(rfx_t *f, const char *sql) {
  int64_t end = mono_ms() + 30000;
  while (sql_int(f->c, sql) != 1) {
    if (mono_ms() > end) SL_TEST_FAIL("not within 30 s: %s", sql);
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static uint64_t confirmed(rfx_t *f) {
  char *s = sql_text(f->c, "SELECT confirmed_flush_lsn FROM "
                           "pg_replication_slots WHERE slot_name = "
                           "'sl_test'");
  uint64_t lsn = 0;
  SL_ASSERT_OK(sl__pg_lsn_parse(s, &lsn));
  sl_free(s);
  return lsn;
}

/*
 * Send a status update, then wait until the server has processed it: the
 * walsender shows the update's write and flush LSN in pg_stat_replication
 * before it confirms the flush LSN on the slot, in the same function,
 * and the reply to a keepalive request goes out before either, so a
 * keepalive is no proof.  (An update equal to the one before passes at
 * once, which is as good: the server already holds those values.)  A
 * wrong flush LSN in the update fails here, naming the expected one.
 */
static void status_processed(rfx_t *f) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pg_repl_send_status(f->r, false, &err), err);
  uint64_t flush = sl__pg_repl_flush_sent(f->r);
  uint64_t write = sl__pg_repl_received(f->r);
  if (write < flush) write = flush;
  char sql[256], a[SL_PG_LSN_SIZE], b[SL_PG_LSN_SIZE];
  snprintf(sql, sizeof(sql),
           "SELECT count(*) FROM pg_stat_replication WHERE write_lsn = '%s' "
           "AND flush_lsn = '%s'",
           sl__pg_lsn_format(write, a), sl__pg_lsn_format(flush, b));
  wait_for(f, sql);
}

/* Wait (polling, 30 s at most) until the slot is confirmed at other than
 * from, and return where. */
static uint64_t confirmed_moved(rfx_t *f, uint64_t from) {
  char sql[256], a[SL_PG_LSN_SIZE];
  snprintf(sql, sizeof(sql),
           "SELECT count(*) FROM pg_replication_slots WHERE slot_name = "
           "'sl_test' AND confirmed_flush_lsn <> '%s'",
           sl__pg_lsn_format(from, a));
  wait_for(f, sql);
  return confirmed(f);
}

SL_TEST(flush_only_what_reported) {
  rfx_t f;
  rfx_open(&f, "CREATE TABLE t_key (id int PRIMARY KEY, v text);"
               "CREATE PUBLICATION sl_pub FOR TABLE t_key");
  SL_ASSERT_EQ_INT(confirmed(&f), f.slot_lsn);
  sql_ok(f.c, "INSERT INTO t_key VALUES (1, 'a')");
  sql_ok(f.c, "INSERT INTO t_key VALUES (2, 'b')");
  rfx_start(&f);
  uint64_t end1 = stream_events(&f, 1, 0);
  uint64_t end2 = stream_events(&f, 1, 0);
  SL_ASSERT_TRUE(end1 > f.slot_lsn && end2 > end1);
  SL_ASSERT_TRUE(sl__pg_repl_received(f.r) >= end2);

  /* Received both transactions, reported nothing: the slot stays at its
   * consistent point. */
  status_processed(&f);
  SL_ASSERT_EQ_INT(sl__pg_repl_flush_sent(f.r), f.slot_lsn);
  SL_ASSERT_EQ_INT(confirmed(&f), f.slot_lsn);

  /* The caller's flush LSN: the end of the first transaction, exactly
   * (not the second's, which was received too). */
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pg_repl_set_flush(f.r, end1, &err), err);
  status_processed(&f);
  SL_ASSERT_EQ_INT(sl__pg_repl_flush_sent(f.r), end1);
  SL_ASSERT_EQ_INT(confirmed_moved(&f, f.slot_lsn), end1);

  /* Backwards is refused, and nothing moves. */
  SL_ASSERT_EQ_INT(sl__pg_repl_set_flush(f.r, f.slot_lsn, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "is behind") != NULL);
  sl_error_destroy(err);
  err = NULL;
  status_processed(&f);
  SL_ASSERT_EQ_INT(confirmed(&f), end1);

  /* More writes arrive; the slot still waits for the caller. */
  sql_ok(f.c, "INSERT INTO t_key VALUES (3, 'c')");
  uint64_t end3 = stream_events(&f, 1, 0);
  SL_ASSERT_TRUE(end3 > end2);
  status_processed(&f); /* its write LSN is past end3: this update */
  SL_ASSERT_EQ_INT(confirmed(&f), end1);
  SL_ASSERT_OK_E(sl__pg_repl_set_flush(f.r, end3, &err), err);
  status_processed(&f);
  SL_ASSERT_EQ_INT(confirmed_moved(&f, end1), end3);

  /* A new connection resumes after the confirmed position: only what
   * follows end3 arrives. */
  sl__pg_repl_destroy(f.r);
  f.r = NULL;
  sql_ok(f.c, "INSERT INTO t_key VALUES (4, 'd')");
  SL_ASSERT_OK_E(sl__pg_repl_connect(sl_server_conninfo(f.srv), &f.r, &err),
                 err);
  SL_ASSERT_OK_E(sl__pg_repl_start(f.r, "sl_test", end3, "sl_pub", false,
                                   &err),
                 err);
  sl_bytes_clear(&f.events);
  stream_events(&f, 1, 0);
  assert_events(&f, "B\nI t_key (4,'d')\nC\n");
  rfx_close(&f, "flush");
}

/*
 * A keepalive that asks for a reply is answered inside the read, with the
 * caller's flush LSN: the server asks after half of wal_sender_timeout
 * without a status update (6 s here: long enough that a loaded machine
 * does not miss the deadline between two reads), and the slot then moves
 * to what the caller set, though the caller sent nothing itself.
 */
SL_TEST(keepalive_reply_carries_callers_flush) {
  static const char *const settings[] = {"wal_sender_timeout=6s", NULL};
  rfx_t f;
  rfx_open_with(&f, "CREATE TABLE t_key (id int PRIMARY KEY, v text);"
                    "CREATE PUBLICATION sl_pub FOR TABLE t_key",
                settings);
  sql_ok(f.c, "INSERT INTO t_key VALUES (1, 'a')");
  sql_ok(f.c, "INSERT INTO t_key VALUES (2, 'b')");
  rfx_start(&f);
  uint64_t end1 = stream_events(&f, 1, 0);
  stream_events(&f, 1, 0);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pg_repl_set_flush(f.r, end1, &err), err);
  SL_ASSERT_TRUE(sl__pg_repl_flush_sent(f.r) != end1); /* not sent */
  sl_pg_copy_t c;
  do {
    next_copy(&f, &c);
  } while (!(c.kind == 'k' && c.reply_requested));
  SL_ASSERT_EQ_INT(sl__pg_repl_flush_sent(f.r), end1);
  SL_ASSERT_EQ_INT(confirmed_moved(&f, f.slot_lsn), end1);
  rfx_close(&f, NULL);
}

/* ------------------------------------------------------------------ */
/* Transport errors                                                      */

SL_TEST(transport_errors) {
  rfx_t f;
  rfx_open(&f, "CREATE TABLE t_key (id int PRIMARY KEY, v text);"
              "CREATE PUBLICATION sl_pub FOR TABLE t_key");
  sl_error_t *err = NULL;
  /* The slot exists already. */
  SL_ASSERT_EQ_INT(
      sl__pg_repl_create_slot(f.r, "sl_test", false, NULL, &err), SL_EIO);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "creating the replication "
                                               "slot sl_test: SQLSTATE "
                                               "42710") != NULL);
  sl_error_destroy(err);
  err = NULL;
  /* Names that would need quoting. */
  SL_ASSERT_EQ_INT(
      sl__pg_repl_create_slot(f.r, "bad name", false, NULL, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres replication: slot name 'bad name' must be 1-63 "
                   "characters of a-z, 0-9 and _");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(sl__pg_repl_start(f.r, "sl_test", 0, "p'x", true, &err),
                   SL_EINVAL);
  sl_error_destroy(err);
  err = NULL;
  /* A slot that does not exist. */
  SL_ASSERT_EQ_INT(sl__pg_repl_start(f.r, "nope", 0, "sl_pub", true, &err),
                   SL_EIO);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "START_REPLICATION of slot "
                                               "nope at 0/0: SQLSTATE "
                                               "42704") != NULL);
  sl_error_destroy(err);
  err = NULL;
  /* The walsender terminated: the stream ends with the server's word. */
  rfx_start(&f);
  SL_ASSERT_EQ_INT(sql_int(f.c, "SELECT count(pg_terminate_backend(active_pid)) "
                                "FROM pg_replication_slots WHERE slot_name = "
                                "'sl_test'"),
                   1);
  sl_pg_copy_t c;
  int rc;
  int64_t end = mono_ms() + 60000;
  do {
    rc = sl__pg_repl_read(f.r, 1000, &c, &err);
    SL_ASSERT_TRUE(mono_ms() < end);
  } while (rc == SL_OK || rc == SL_EAGAIN);
  SL_ASSERT_TRUE(rc == SL_ECLOSED || rc == SL_EIO);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "postgres replication") !=
                 NULL);
  fprintf(stderr, "ended: %s\n", sl_error_message(err));
  sl_error_destroy(err);
  rfx_close(&f, NULL);
}
