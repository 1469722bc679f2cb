/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pgoutput decoder (src/connectors/postgres/pgoutput_decode.c) on
 * hand-built messages: each field of each message type, the exact error
 * of each malformed input, every prefix of a valid message rejected, the
 * replication framing, and the text-value conversions; golden tests over
 * the streams PostgreSQL 15 sent to tests/integration/test_pgoutput.c
 * (captured into tests/fuzz/corpus/pgoutput/), which need no server.
 */
#include <stdlib.h>
#include <string.h>

#include "connectors/postgres/pgoutput_decode.h"
#include "pgo_events.h"
#include "sl_test.h"

/* A message under construction, big-endian as on the wire. */
typedef struct {
  uint8_t b[4096];
  size_t n;
} msg_t;

static void u8(msg_t *m, uint8_t v) { m->b[m->n++] = v; }
static void u16(msg_t *m, uint16_t v) {
  u8(m, (uint8_t)(v >> 8));
  u8(m, (uint8_t)v);
}
static void u32(msg_t *m, uint32_t v) {
  u16(m, (uint16_t)(v >> 16));
  u16(m, (uint16_t)v);
}
static void u64(msg_t *m, uint64_t v) {
  u32(m, (uint32_t)(v >> 32));
  u32(m, (uint32_t)v);
}
static void str(msg_t *m, const char *s) {
  size_t n = strlen(s) + 1;
  memcpy(m->b + m->n, s, n);
  m->n += n;
}
static void text(msg_t *m, const char *s) {
  u8(m, 't');
  u32(m, (uint32_t)strlen(s));
  memcpy(m->b + m->n, s, strlen(s));
  m->n += strlen(s);
}

/* Relation 16384 public.t (id int4 key, v text, n numeric(10,2)). */
static msg_t relation_msg(void) {
  msg_t m = {.n = 0};
  u8(&m, 'R');
  u32(&m, 16384);
  str(&m, "public");
  str(&m, "t");
  u8(&m, 'd');
  u16(&m, 3);
  u8(&m, 1);
  str(&m, "id");
  u32(&m, SL_PG_OID_INT4);
  u32(&m, 0xffffffff);
  u8(&m, 0);
  str(&m, "v");
  u32(&m, SL_PG_OID_TEXT);
  u32(&m, 0xffffffff);
  u8(&m, 0);
  str(&m, "n");
  u32(&m, SL_PG_OID_NUMERIC);
  u32(&m, ((10u << 16) | 2u) + 4u);
  return m;
}

static void decode_ok(sl_pgo_decoder_t *d, const msg_t *m, sl_pgo_msg_t *out) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgo_decode(d, m->b, m->n, out, &err), err);
}

/* Decoding fails with code and a message that contains want. */
static void decode_err(sl_pgo_decoder_t *d, const uint8_t *p, size_t n,
                       int code, const char *want) {
  sl_error_t *err = NULL;
  sl_pgo_msg_t out;
  int rc = sl__pgo_decode(d, p, n, &out, &err);
  if (rc != code || err == NULL || strstr(sl_error_message(err), want) == NULL)
    SL_TEST_FAIL("decode of %zu bytes: rc %d (want %d), message '%s' (want "
                 "'%s')",
                 n, rc, code, err ? sl_error_message(err) : "(none)", want);
  sl_error_destroy(err);
}

static void every_prefix_fails(sl_pgo_decoder_t *d, const msg_t *m) {
  for (size_t k = 0; k < m->n; k++) {
    sl_error_t *err = NULL;
    sl_pgo_msg_t out;
    uint8_t *copy = sl_malloc(k ? k : 1); /* exact size: ASan sees overreads */
    memcpy(copy, m->b, k);
    int rc = sl__pgo_decode(d, copy, k, &out, &err);
    if (rc != SL_ECORRUPT || err == NULL ||
        strstr(sl_error_message(err), "at byte") == NULL)
      SL_TEST_FAIL("prefix %zu of %zu: rc %d, '%s'", k, m->n, rc,
                   err ? sl_error_message(err) : "(none)");
    sl_error_destroy(err);
    sl_free(copy);
  }
}

SL_TEST(relation_and_insert) {
  sl_pgo_decoder_t d;
  sl__pgo_decoder_init(&d);
  msg_t r = relation_msg();
  sl_pgo_msg_t m;
  decode_ok(&d, &r, &m);
  SL_ASSERT_EQ_INT(m.type, 'R');
  const sl_pgo_relation_t *rel = m.u.relation;
  SL_ASSERT_EQ_INT(rel->oid, 16384);
  SL_ASSERT_EQ_STR(rel->nspname, "public");
  SL_ASSERT_EQ_STR(rel->relname, "t");
  SL_ASSERT_EQ_INT(rel->replident, 'd');
  SL_ASSERT_EQ_INT(rel->n_cols, 3);
  SL_ASSERT_EQ_INT(rel->cols[0].flags, SL_PGO_COL_KEY);
  SL_ASSERT_EQ_STR(rel->cols[2].name, "n");
  SL_ASSERT_EQ_INT(rel->cols[1].type_mod, -1);
  sl_type_t t;
  SL_ASSERT_OK(sl__pgo_column_type(rel, 2, &t, NULL));
  SL_ASSERT_EQ_INT(t.id, SL_TYPE_DECIMAL);
  SL_ASSERT_EQ_INT(t.precision, 10);
  SL_ASSERT_EQ_INT(t.scale, 2);

  msg_t i = {.n = 0};
  u8(&i, 'I');
  u32(&i, 16384);
  u8(&i, 'N');
  u16(&i, 3);
  text(&i, "7");
  u8(&i, 'u');
  u8(&i, 'n');
  decode_ok(&d, &i, &m);
  SL_ASSERT_EQ_INT(m.type, 'I');
  SL_ASSERT_EQ_PTR(m.u.change.rel, rel);
  SL_ASSERT_EQ_INT(m.u.change.new_.n_cols, 3);
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[0].kind, SL_PGO_TEXT);
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[0].len, 1);
  /* Unchanged TOAST and NULL stay distinct. */
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[1].kind, SL_PGO_UNCHANGED);
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[2].kind, SL_PGO_NULL);
  every_prefix_fails(&d, &i);
  every_prefix_fails(&d, &r);
  /* A failed Relation prefix left the cached relation alone. */
  SL_ASSERT_EQ_PTR(sl__pgo_relation(&d, 16384), rel);
  sl__pgo_decoder_close(&d);
}

SL_TEST(update_delete_truncate_message) {
  sl_pgo_decoder_t d;
  sl__pgo_decoder_init(&d);
  msg_t r = relation_msg();
  sl_pgo_msg_t m;
  decode_ok(&d, &r, &m);

  msg_t u = {.n = 0};
  u8(&u, 'U');
  u32(&u, 16384);
  u8(&u, 'O');
  u16(&u, 3);
  text(&u, "1");
  text(&u, "old");
  u8(&u, 'n');
  u8(&u, 'N');
  u16(&u, 3);
  text(&u, "2");
  u8(&u, 'u');
  text(&u, "1.50");
  decode_ok(&d, &u, &m);
  SL_ASSERT_EQ_INT(m.u.change.old_kind, 'O');
  SL_ASSERT_EQ_INT(m.u.change.old.cols[1].len, 3);
  SL_ASSERT_TRUE(memcmp(m.u.change.old.cols[1].data, "old", 3) == 0);
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[1].kind, 'u');
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[2].len, 4);
  every_prefix_fails(&d, &u);

  msg_t del = {.n = 0};
  u8(&del, 'D');
  u32(&del, 16384);
  u8(&del, 'K');
  u16(&del, 3);
  text(&del, "2");
  u8(&del, 'n');
  u8(&del, 'n');
  decode_ok(&d, &del, &m);
  SL_ASSERT_EQ_INT(m.u.change.old_kind, 'K');
  every_prefix_fails(&d, &del);

  msg_t t = {.n = 0};
  u8(&t, 'T');
  u32(&t, 2);
  u8(&t, 3);
  u32(&t, 16384);
  u32(&t, 16390);
  decode_ok(&d, &t, &m);
  SL_ASSERT_EQ_INT(m.u.truncate.n_rels, 2);
  SL_ASSERT_EQ_INT(m.u.truncate.options, 3);
  SL_ASSERT_EQ_INT(m.u.truncate.rel_oids[1], 16390);
  every_prefix_fails(&d, &t);

  msg_t mm = {.n = 0};
  u8(&mm, 'M');
  u8(&mm, 1);
  u64(&mm, 0x100000028ull);
  str(&mm, "sluice");
  u32(&mm, 3);
  memcpy(mm.b + mm.n, "a\0b", 3);
  mm.n += 3;
  decode_ok(&d, &mm, &m);
  SL_ASSERT_TRUE(m.u.message.is_transactional);
  SL_ASSERT_EQ_INT(m.u.message.lsn, 0x100000028ull);
  SL_ASSERT_EQ_STR(m.u.message.prefix, "sluice");
  SL_ASSERT_EQ_INT(m.u.message.len, 3);
  SL_ASSERT_TRUE(memcmp(m.u.message.content, "a\0b", 3) == 0);
  every_prefix_fails(&d, &mm);

  msg_t b = {.n = 0};
  u8(&b, 'B');
  u64(&b, 0x1000000a0ull);
  u64(&b, 12345);
  u32(&b, 777);
  decode_ok(&d, &b, &m);
  SL_ASSERT_EQ_INT(m.u.begin.final_lsn, 0x1000000a0ull);
  SL_ASSERT_EQ_INT(m.u.begin.commit_time, 12345);
  SL_ASSERT_EQ_INT(m.u.begin.xid, 777);
  every_prefix_fails(&d, &b);

  msg_t c = {.n = 0};
  u8(&c, 'C');
  u8(&c, 0);
  u64(&c, 0x1000000a0ull);
  u64(&c, 0x1000000d8ull);
  u64(&c, 12345);
  decode_ok(&d, &c, &m);
  SL_ASSERT_EQ_INT(m.u.commit.commit_lsn, 0x1000000a0ull);
  SL_ASSERT_EQ_INT(m.u.commit.end_lsn, 0x1000000d8ull);
  every_prefix_fails(&d, &c);

  msg_t o = {.n = 0};
  u8(&o, 'O');
  u64(&o, 42);
  str(&o, "upstream");
  decode_ok(&d, &o, &m);
  SL_ASSERT_EQ_STR(m.u.origin.name, "upstream");
  every_prefix_fails(&d, &o);

  msg_t y = {.n = 0};
  u8(&y, 'Y');
  u32(&y, 90000);
  str(&y, "public");
  str(&y, "mood");
  decode_ok(&d, &y, &m);
  SL_ASSERT_EQ_INT(m.u.type.oid, 90000);
  SL_ASSERT_EQ_STR(m.u.type.name, "mood");
  every_prefix_fails(&d, &y);
  sl__pgo_decoder_close(&d);
}

SL_TEST(malformed_messages) {
  sl_pgo_decoder_t d;
  sl__pgo_decoder_init(&d);
  uint8_t z = 'Z';
  decode_err(&d, &z, 1, SL_ECORRUPT,
             "pgoutput message: unknown message type 0x5a at byte 0");
  uint8_t s[] = {'S', 0, 0, 0, 1, 1};
  decode_err(&d, s, sizeof(s), SL_ENOTSUP,
             "pgoutput Stream Start message (type 'S' at byte 0) is not "
             "supported");
  /* An Insert before its Relation. */
  msg_t i = {.n = 0};
  u8(&i, 'I');
  u32(&i, 99);
  u8(&i, 'N');
  u16(&i, 0);
  decode_err(&d, i.b, i.n, SL_ECORRUPT,
             "pgoutput Insert message: relation oid 99 at byte 1 was not "
             "described by a Relation message before");
  msg_t r = relation_msg();
  sl_pgo_msg_t m;
  decode_ok(&d, &r, &m);
  /* A tuple with a column count other than the relation's. */
  msg_t w = {.n = 0};
  u8(&w, 'I');
  u32(&w, 16384);
  u8(&w, 'N');
  u16(&w, 2);
  u8(&w, 'n');
  u8(&w, 'n');
  decode_err(&d, w.b, w.n, SL_ECORRUPT,
             "pgoutput Insert message: tuple at byte 6 has 2 columns, "
             "relation public.t (oid 16384) has 3");
  /* A bad column kind. */
  msg_t k = {.n = 0};
  u8(&k, 'I');
  u32(&k, 16384);
  u8(&k, 'N');
  u16(&k, 3);
  u8(&k, 'n');
  u8(&k, 'x');
  decode_err(&d, k.b, k.n, SL_ECORRUPT,
             "column 1 of the tuple has kind 0x78 at byte 9");
  /* A column length beyond the message. */
  msg_t l = {.n = 0};
  u8(&l, 'I');
  u32(&l, 16384);
  u8(&l, 'N');
  u16(&l, 3);
  u8(&l, 't');
  u32(&l, 0x7fffffff);
  u8(&l, '1');
  decode_err(&d, l.b, l.n, SL_ECORRUPT,
             "pgoutput Insert message: truncated at byte 13 (tuple column "
             "value): 2147483647 bytes needed, 1 left");
  /* A wrong marker. */
  msg_t mk = {.n = 0};
  u8(&mk, 'U');
  u32(&mk, 16384);
  u8(&mk, 'X');
  decode_err(&d, mk.b, mk.n, SL_ECORRUPT,
             "pgoutput Update message: tuple marker is 0x58 at byte 5");
  /* Trailing bytes. */
  msg_t b = {.n = 0};
  u8(&b, 'B');
  u64(&b, 1);
  u64(&b, 2);
  u32(&b, 3);
  u8(&b, 0);
  decode_err(&d, b.b, b.n, SL_ECORRUPT,
             "pgoutput Begin message: 1 unexpected bytes after the "
             "message's last field at byte 21");
  /* A Relation whose column count the message cannot hold. */
  msg_t rc = {.n = 0};
  u8(&rc, 'R');
  u32(&rc, 5);
  str(&rc, "");
  str(&rc, "x");
  u8(&rc, 'f');
  u16(&rc, 60000);
  decode_err(&d, rc.b, rc.n, SL_ECORRUPT,
             "pgoutput Relation message: truncated at byte 11 (columns)");
  /* A bad replica identity; a truncate with unknown options. */
  rc.n = 0;
  u8(&rc, 'R');
  u32(&rc, 5);
  str(&rc, "");
  str(&rc, "x");
  u8(&rc, 'q');
  decode_err(&d, rc.b, rc.n, SL_ECORRUPT,
             "replica identity is 0x71 at byte 8");
  msg_t t = {.n = 0};
  u8(&t, 'T');
  u32(&t, 0);
  u8(&t, 4);
  decode_err(&d, t.b, t.n, SL_ECORRUPT, "options 0x04 at byte 5");
  /* A message of 0 bytes. */
  decode_err(&d, (const uint8_t *)"", 0, SL_ECORRUPT,
             "pgoutput message: truncated at byte 0 (message type)");
  sl__pgo_decoder_close(&d);
}

SL_TEST(copy_framing_and_status) {
  msg_t w = {.n = 0};
  u8(&w, 'w');
  u64(&w, 0x10);
  u64(&w, 0x20);
  u64(&w, 0x30);
  u8(&w, 'B');
  sl_pg_copy_t c;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pg_copy_decode(w.b, w.n, &c, &err), err);
  SL_ASSERT_EQ_INT(c.kind, 'w');
  SL_ASSERT_EQ_INT(c.wal_start, 0x10);
  SL_ASSERT_EQ_INT(c.wal_end, 0x20);
  SL_ASSERT_EQ_INT(c.send_time, 0x30);
  SL_ASSERT_EQ_INT(c.len, 1);
  SL_ASSERT_EQ_INT(c.data[0], 'B');
  for (size_t k = 0; k < 25; k++) {
    SL_ASSERT_EQ_INT(sl__pg_copy_decode(w.b, k, &c, &err), SL_ECORRUPT);
    SL_ASSERT_TRUE(strstr(sl_error_message(err), "at byte") != NULL);
    sl_error_destroy(err);
    err = NULL;
  }
  msg_t k = {.n = 0};
  u8(&k, 'k');
  u64(&k, 0x99);
  u64(&k, 0x98);
  u8(&k, 1);
  SL_ASSERT_OK_E(sl__pg_copy_decode(k.b, k.n, &c, &err), err);
  SL_ASSERT_EQ_INT(c.kind, 'k');
  SL_ASSERT_EQ_INT(c.wal_end, 0x99);
  SL_ASSERT_TRUE(c.reply_requested);
  for (size_t j = 0; j < k.n; j++) {
    SL_ASSERT_EQ_INT(sl__pg_copy_decode(k.b, j, &c, &err), SL_ECORRUPT);
    SL_ASSERT_TRUE(strstr(sl_error_message(err), "primary keepalive") ||
                   j == 0);
    sl_error_destroy(err);
    err = NULL;
  }
  k.b[17] = 2;
  SL_ASSERT_EQ_INT(sl__pg_copy_decode(k.b, k.n, &c, &err), SL_ECORRUPT);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "replication primary keepalive ('k'): reply-requested "
                   "flag 2 at byte 17 is neither 0 nor 1");
  sl_error_destroy(err);
  err = NULL;
  uint8_t q = 'q';
  SL_ASSERT_EQ_INT(sl__pg_copy_decode(&q, 1, &c, &err), SL_ECORRUPT);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "replication CopyData: unknown kind 0x71 at byte 0 "
                   "(expected 'w' XLogData or 'k' keepalive)");
  sl_error_destroy(err);

  uint8_t st[SL_PG_STATUS_SIZE];
  sl__pg_status_encode(st, 0x0102030405060708ull, 0x1112131415161718ull,
                       0x2122232425262728ull, 0x3132333435363738ll, true);
  static const uint8_t want[SL_PG_STATUS_SIZE] = {
      'r',  0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21,
      0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x32,
      0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 1};
  SL_ASSERT_TRUE(memcmp(st, want, sizeof(want)) == 0);
}

/* Convert one text value of a one-column relation of type oid. */
static int conv(uint32_t oid, int32_t mod, const char *txt, sl_value_t *out,
                sl_error_t **out_err) {
  sl_pgo_column_t col = {0, "c", oid, mod};
  sl_pgo_relation_t rel = {1, "public", "r", 'd', 1, &col};
  sl_type_t t;
  int rc = sl__pgo_column_type(&rel, 0, &t, out_err);
  if (rc != SL_OK) return rc;
  sl_field_t f = {"c", t};
  sl_schema_t *s = NULL;
  SL_ASSERT_OK(sl_schema_create(&f, 1, &s, NULL));
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_pgo_datum_t dt = {SL_PGO_TEXT, (uint32_t)strlen(txt),
                       (const uint8_t *)txt};
  rc = sl__pgo_value(&rel, 0, &dt, &b, 0, out_err);
  if (rc == SL_OK) {
    sl_row_t row;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
    static uint8_t keep[256];
    SL_ASSERT_TRUE(row.len <= sizeof(keep));
    memcpy(keep, row.data, row.len);
    sl_row_view(&row, s, keep, row.len);
    sl_row_get_value(&row, 0, out);
  }
  sl_row_builder_close(&b);
  sl_schema_unref(s);
  return rc;
}

static int64_t ts_of(const char *txt, uint32_t oid) {
  sl_value_t v;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(conv(oid, -1, txt, &v, &err), err);
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_TIMESTAMP);
  return v.u.i;
}

SL_TEST(values) {
  sl_value_t v;
  sl_error_t *err = NULL;
  SL_ASSERT_OK(conv(SL_PG_OID_BOOL, -1, "t", &v, NULL));
  SL_ASSERT_TRUE(v.u.b);
  SL_ASSERT_OK(conv(SL_PG_OID_INT2, -1, "-32768", &v, NULL));
  SL_ASSERT_EQ_INT(v.u.i, -32768);
  SL_ASSERT_OK(conv(SL_PG_OID_INT8, -1, "-9223372036854775808", &v, NULL));
  SL_ASSERT_EQ_INT(v.u.i, INT64_MIN);
  SL_ASSERT_OK(conv(SL_PG_OID_FLOAT8, -1, "-Infinity", &v, NULL));
  SL_ASSERT_TRUE(v.u.f < -1e308);
  SL_ASSERT_OK(conv(SL_PG_OID_NUMERIC, ((12 << 16) | 3) + 4, "-123.450", &v,
                    NULL));
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_DECIMAL);
  SL_ASSERT_EQ_INT(v.u.i, -123450);
  /* Unconstrained numeric: the exact text. */
  SL_ASSERT_OK(conv(SL_PG_OID_NUMERIC, -1, "3.14159265358979323846", &v,
                    NULL));
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_STRING);
  SL_ASSERT_EQ_INT(v.u.s.len, 22);
  SL_ASSERT_OK(conv(SL_PG_OID_BYTEA, -1, "\\x00ff41", &v, NULL));
  SL_ASSERT_EQ_INT(v.u.s.len, 3);
  SL_ASSERT_TRUE(memcmp(v.u.s.ptr, "\x00\xff" "A", 3) == 0);
  SL_ASSERT_OK(conv(SL_PG_OID_BYTEA, -1, "a\\\\b\\001", &v, NULL));
  SL_ASSERT_EQ_INT(v.u.s.len, 4);
  SL_ASSERT_TRUE(memcmp(v.u.s.ptr, "a\\b\001", 4) == 0);

  SL_ASSERT_EQ_INT(ts_of("1970-01-02", SL_PG_OID_DATE), 86400000000ll);
  SL_ASSERT_EQ_INT(ts_of("2000-01-01 00:00:00", SL_PG_OID_TIMESTAMP),
                   SL_PG_EPOCH_US);
  SL_ASSERT_EQ_INT(ts_of("1970-01-01 00:00:01.5", SL_PG_OID_TIMESTAMP),
                   1500000);
  SL_ASSERT_EQ_INT(ts_of("1970-01-01 05:30:00+05:30", SL_PG_OID_TIMESTAMPTZ),
                   0);
  SL_ASSERT_EQ_INT(ts_of("1969-12-31 23:59:59.999999-00:00:01",
                         SL_PG_OID_TIMESTAMPTZ),
                   1000000 - 1);
  /* 0001-01-01 BC is year 0: 366 days before 0001-01-01 AD. */
  SL_ASSERT_EQ_INT(ts_of("0001-01-01", SL_PG_OID_DATE) -
                       ts_of("0001-01-01 BC", SL_PG_OID_DATE),
                   366ll * 86400000000ll);
  SL_ASSERT_EQ_INT(ts_of("2024-02-29", SL_PG_OID_DATE), 1709164800000000ll);

  static const struct {
    uint32_t oid;
    int32_t mod;
    const char *in;
    int code;
    const char *msg;
  } bad[] = {
      {SL_PG_OID_BOOL, -1, "true", SL_EPARSE,
       "pgoutput: relation public.r column \"c\" (type boolean, oid 16): "
       "expected 't' or 'f', got: true"},
      {SL_PG_OID_INT2, -1, "x1", SL_EPARSE, "column \"c\" (type smallint"},
      {SL_PG_OID_INT4, -1, "2147483648", SL_EPARSE, "oid 23"},
      {SL_PG_OID_DATE, -1, "2023-02-29", SL_EPARSE,
       "not an ISO date/time (DateStyle ISO): 2023-02-29"},
      {SL_PG_OID_DATE, -1, "5874897-12-31", SL_EOVERFLOW,
       "out of the range of sluice timestamps: 5874897-12-31"},
      {SL_PG_OID_DATE, -1, "infinity", SL_ENOTSUP,
       "sluice timestamps cannot hold infinity"},
      {SL_PG_OID_TIMESTAMP, -1, "2023-01-01T00:00:00", SL_EPARSE,
       "not an ISO date/time"},
      {SL_PG_OID_TIMESTAMPTZ, -1, "2023-01-01 00:00:00+5", SL_EPARSE,
       "not an ISO date/time"},
      {SL_PG_OID_NUMERIC, ((12 << 16) | 3) + 4, "NaN", SL_ENOTSUP,
       "a sluice decimal cannot hold NaN"},
      {SL_PG_OID_BYTEA, -1, "\\x0", SL_EPARSE,
       "not a bytea in hex or escape format: \\x0"},
      {600 /* point */, -1, "(1,2)", SL_ENOTSUP,
       "pgoutput: relation public.r column \"c\" (type unsupported, oid "
       "600): type not supported"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int rc = conv(bad[i].oid, bad[i].mod, bad[i].in, &v, &err);
    if (rc != bad[i].code || err == NULL ||
        strstr(sl_error_message(err), bad[i].msg) == NULL)
      SL_TEST_FAIL("case %zu '%s': rc %d, '%s' (want '%s')", i, bad[i].in,
                   rc, err ? sl_error_message(err) : "(none)", bad[i].msg);
    sl_error_destroy(err);
    err = NULL;
  }

  /* 'u' and 'b' are refused by name; 'n' becomes a null. */
  sl_pgo_column_t col = {0, "big", SL_PG_OID_TEXT, -1};
  sl_pgo_relation_t rel = {1, "public", "r", 'd', 1, &col};
  sl_pgo_datum_t u = {SL_PGO_UNCHANGED, 0, NULL};
  SL_ASSERT_EQ_INT(sl__pgo_value(&rel, 0, &u, NULL, 0, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "unchanged TOAST") != NULL);
  sl_error_destroy(err);
}

/* ------------------------------------------------------------------ */
/* Allocation failures                                                 */

static long alloc_budget = -1; /* allocations left; -1 = unlimited */

static bool alloc_take(void) {
  if (alloc_budget < 0) return true;
  if (alloc_budget == 0) return false;
  alloc_budget--;
  return true;
}
static void *fail_malloc(size_t n) { return alloc_take() ? malloc(n) : NULL; }
static void *fail_calloc(size_t n, size_t m) {
  return alloc_take() ? calloc(n, m) : NULL;
}
static void *fail_realloc(void *p, size_t n) {
  return alloc_take() ? realloc(p, n) : NULL;
}

/*
 * Fail the k-th allocation for every k while a decoder reads a Relation,
 * an Update with an old tuple and a Truncate, and converts a long bytea:
 * each call succeeds or says SL_ENOMEM, and nothing leaks
 * (LeakSanitizer), a failed Relation included.
 */
SL_TEST(allocation_failures_are_clean) {
  static const sl_allocator_t failing = {fail_malloc, fail_calloc,
                                         fail_realloc, free};
  msg_t r = relation_msg();
  msg_t u = {.n = 0};
  u8(&u, 'U');
  u32(&u, 16384);
  u8(&u, 'O');
  u16(&u, 3);
  text(&u, "1");
  text(&u, "old");
  u8(&u, 'n');
  u8(&u, 'N');
  u16(&u, 3);
  text(&u, "2");
  u8(&u, 'u');
  text(&u, "1.50");
  msg_t t = {.n = 0};
  u8(&t, 'T');
  u32(&t, 40);
  u8(&t, 0);
  for (uint32_t i = 0; i < 40; i++) u32(&t, 16384 + i);
  char hex[1 + 2 + 2 * 400];
  hex[0] = '\\';
  hex[1] = 'x';
  for (int i = 0; i < 800; i++) hex[2 + i] = "0123456789abcdef"[i % 16];
  hex[802] = 0;
  sl_pgo_column_t col = {0, "b", SL_PG_OID_BYTEA, -1};
  sl_pgo_relation_t brel = {1, "public", "r", 'd', 1, &col};
  sl_field_t f = {"b", {SL_TYPE_BYTES, 0, 0, true}};
  sl_schema_t *s = NULL;
  SL_ASSERT_OK(sl_schema_create(&f, 1, &s, NULL));
  bool saw_failure = false, saw_success = false;
  for (long k = 0; k < 40; k++) {
    sl_pgo_decoder_t d;
    sl__pgo_decoder_init(&d);
    sl_row_builder_t b;
    SL_ASSERT_OK(sl_row_builder_init(&b, s));
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    sl_set_allocator(&failing);
    alloc_budget = k;
    sl_pgo_msg_t m;
    sl_error_t *err = NULL;
    int rc = sl__pgo_decode(&d, r.b, r.n, &m, &err);
    if (rc == SL_OK) rc = sl__pgo_decode(&d, u.b, u.n, &m, &err);
    if (rc == SL_OK) rc = sl__pgo_decode(&d, t.b, t.n, &m, &err);
    sl_pgo_datum_t dt = {SL_PGO_TEXT, 802, (const uint8_t *)hex};
    if (rc == SL_OK) rc = sl__pgo_value(&brel, 0, &dt, &b, 0, &err);
    alloc_budget = -1;
    sl_set_allocator(NULL);
    SL_ASSERT_TRUE(rc == SL_OK || rc == SL_ENOMEM);
    if (rc == SL_OK) {
      saw_success = true;
      SL_ASSERT_EQ_INT(m.u.truncate.n_rels, 40);
    } else {
      saw_failure = true;
    }
    sl_error_destroy(err);
    sl_row_builder_close(&b);
    sl__pgo_decoder_close(&d);
  }
  SL_ASSERT_TRUE(saw_failure && saw_success);
  sl_schema_unref(s);
}

/* ------------------------------------------------------------------ */
/* Golden: streams captured from PostgreSQL 15                           */

typedef struct {
  uint8_t *data;
  size_t len, off;
  sl_pgo_decoder_t d;
  sl_bytes_t events;
  char *big;
  uint64_t last_end;
} golden_t;

static void golden_open(golden_t *g, const char *name) {
  memset(g, 0, sizeof(*g));
  char path[1024];
  snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/pgoutput/%s",
           sl_test_src_dir(), name);
  FILE *fp = fopen(path, "rb");
  if (fp == NULL) SL_TEST_FAIL("cannot open %s", path);
  g->data = sl_malloc(1 << 20);
  g->len = fread(g->data, 1, 1 << 20, fp);
  fclose(fp);
  SL_ASSERT_TRUE(g->len > 0 && g->len < (1 << 20));
  sl__pgo_decoder_init(&g->d);
  sl_bytes_init(&g->events);
}

static void golden_close(golden_t *g) {
  sl_free(g->data);
  sl__pgo_decoder_close(&g->d);
  sl_bytes_close(&g->events);
  sl_free(g->big);
}

/* The next captured message, decoded. */
static bool golden_next(golden_t *g, sl_pgo_msg_t *m) {
  if (g->off == g->len) return false;
  SL_ASSERT_TRUE(g->len - g->off >= 4);
  const uint8_t *q = g->data + g->off;
  uint32_t n = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 |
               (uint32_t)q[2] << 8 | q[3];
  SL_ASSERT_TRUE(n <= g->len - g->off - 4);
  g->off += 4 + n;
  sl_pg_copy_t c;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pg_copy_decode(q + 4, n, &c, &err), err);
  SL_ASSERT_EQ_INT(c.kind, 'w');
  SL_ASSERT_OK_E(sl__pgo_decode(&g->d, c.data, c.len, m, &err), err);
  return true;
}

/* Decode n_commits transactions (and what comes between) into events;
 * commit LSNs must grow. */
static void golden_events(golden_t *g, int n_commits) {
  bool in_tx = false;
  sl_pgo_msg_t m;
  while (n_commits > 0 && golden_next(g, &m)) {
    if (m.type == 'C') {
      SL_ASSERT_TRUE(m.u.commit.end_lsn > m.u.commit.commit_lsn &&
                     m.u.commit.commit_lsn > g->last_end);
      g->last_end = m.u.commit.end_lsn;
      n_commits--;
    }
    pgo_event(&g->d, &m, &in_tx, &g->big, &g->events);
  }
  SL_ASSERT_EQ_INT(n_commits, 0);
  SL_ASSERT_OK(sl_bytes_append(&g->events, "", 1));
}

SL_TEST(golden_captured_types) {
  golden_t g;
  golden_open(&g, "types");
  golden_events(&g, 3);
  SL_ASSERT_EQ_STR((const char *)g.events.data, PGO_TYPES_EVENTS);
  /* Then the table with a point and an enum: Type, Relation, Insert. */
  sl_pgo_msg_t m;
  SL_ASSERT_TRUE(golden_next(&g, &m) && m.type == 'B');
  SL_ASSERT_TRUE(golden_next(&g, &m) && m.type == 'Y');
  SL_ASSERT_EQ_STR(m.u.type.name, "mood");
  uint32_t mood = m.u.type.oid;
  SL_ASSERT_TRUE(golden_next(&g, &m) && m.type == 'R');
  SL_ASSERT_EQ_STR(m.u.relation->relname, "t_odd");
  SL_ASSERT_EQ_INT(m.u.relation->cols[1].type_oid, 600);
  SL_ASSERT_EQ_INT(m.u.relation->cols[2].type_oid, mood);
  SL_ASSERT_TRUE(golden_next(&g, &m) && m.type == 'I');
  SL_ASSERT_EQ_INT(m.u.change.new_.cols[2].len, 2);
  SL_ASSERT_TRUE(memcmp(m.u.change.new_.cols[2].data, "ok", 2) == 0);
  /* The capture ends there: the test read no further. */
  SL_ASSERT_TRUE(!golden_next(&g, &m));
  golden_close(&g);
}

SL_TEST(golden_captured_changes) {
  golden_t g;
  golden_open(&g, "changes");
  golden_events(&g, 8);
  SL_ASSERT_EQ_STR((const char *)g.events.data, PGO_CHANGES_EVENTS);
  /* The TOAST value: 300 md5 digests in hex. */
  SL_ASSERT_TRUE(g.big != NULL);
  SL_ASSERT_EQ_INT(strlen(g.big), 9600);
  SL_ASSERT_EQ_INT(strspn(g.big, "0123456789abcdef"), 9600);
  sl_pgo_msg_t m;
  SL_ASSERT_TRUE(!golden_next(&g, &m));
  golden_close(&g);
}

SL_TEST(golden_captured_flush) {
  golden_t g;
  golden_open(&g, "flush");
  golden_events(&g, 4);
  SL_ASSERT_EQ_STR((const char *)g.events.data,
                   "B\nI t_key (1,'a')\nC\nB\nI t_key (2,'b')\nC\n"
                   "B\nI t_key (3,'c')\nC\nB\nI t_key (4,'d')\nC\n");
  sl_pgo_msg_t m;
  SL_ASSERT_TRUE(!golden_next(&g, &m));
  golden_close(&g);
}
