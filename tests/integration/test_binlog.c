/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binlog transport (src/connectors/mariadb/binlog_reader.c) and
 * sluice's own event decoder (binlog_decode.c) against a real MariaDB
 * 10.11: the test writes rows of every common column type, updates,
 * deletes, DDL and a multi-statement transaction, reads the binlog from the
 * GTID position it took before, decodes it, and checks every decoded value
 * against the values its own SQL wrote (never against the decoder).  Then
 * every prefix of every event read is fed to the decoder, which must reject
 * it with a message that names the event.  Groundwork of the mariadb-cdc
 * source; docs/cdc-mariadb.md "Binlog decoding".
 *
 * SL_BINLOG_CAPTURE_DIR=<dir> writes the streams read into <dir> in the
 * fuzz target's input format (tests/fuzz/fuzz_binlog_event.c), which is how
 * tests/fuzz/corpus/binlog_event/ was made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "connectors/mariadb/binlog_decode.h"
#include "connectors/mariadb/binlog_reader.h"
#include "sl_servers.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

static sl_server_t *start_maria(const char *row_metadata) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  char set[64];
  snprintf(set, sizeof(set), "binlog-row-metadata=%s", row_metadata);
  const char *extra[] = {set, NULL};
  o.extra_settings = extra;
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  return srv;
}

static MYSQL *direct(const sl_server_t *srv) {
  MYSQL *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(srv, sl_server_port(srv), &m, &err), err);
  SL_ASSERT_OK(sl_my_exec(m, "USE sluice", NULL, NULL));
  SL_ASSERT_OK(sl_my_exec(m, "SET time_zone = '+00:00'", NULL, NULL));
  return m;
}

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static char *gtid_pos(MYSQL *m) {
  char *s = NULL;
  sl_error_t *err = NULL;
  int rc = sl_my_query_text(m, "SELECT @@gtid_binlog_pos", &s, &err);
  if (rc == SL_ENOTFOUND) return sl_strdup("");
  SL_ASSERT_OK_E(rc, err);
  return s;
}

/* The raw events of one stream, copied. */
typedef struct {
  uint8_t **ev;
  size_t *len;
  size_t n, cap;
  sl_binlog_checksum_t checksum;
} stream_t;

static void stream_free(stream_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->ev[i]);
  free(s->ev);
  free(s->len);
}

/* Reads the binlog after gtid to its end (non-blocking dump). */
static stream_t read_stream(const sl_server_t *srv, const char *gtid) {
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(srv),
                               .user = "root",
                               .server_id = 4242,
                               .gtid_start = gtid,
                               .is_non_blocking = true};
  sl_binlog_reader_t *r = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_reader_open(&o, &r, &err), err);
  stream_t s = {.checksum = sl__binlog_reader_checksum(r)};
  for (;;) {
    const uint8_t *p;
    size_t len;
    int rc = sl__binlog_reader_next(r, &p, &len, &err);
    if (rc == SL_ENOTFOUND) break;
    SL_ASSERT_OK_E(rc, err);
    if (s.n == s.cap) {
      s.cap = s.cap ? s.cap * 2 : 64;
      s.ev = realloc(s.ev, s.cap * sizeof(*s.ev));
      s.len = realloc(s.len, s.cap * sizeof(*s.len));
      SL_ASSERT_TRUE(s.ev != NULL && s.len != NULL);
    }
    s.ev[s.n] = malloc(len);
    SL_ASSERT_TRUE(s.ev[s.n] != NULL);
    memcpy(s.ev[s.n], p, len);
    s.len[s.n++] = len;
  }
  sl__binlog_reader_close(r);
  return s;
}

/* The fuzz target's format: byte 0 the checksum, then per event a 4-byte
 * little-endian length and the bytes.  Events [from, to) plus, first, the
 * FORMAT_DESCRIPTION and the TABLE_MAPs before from (their state). */
static void capture(const stream_t *s, size_t from, size_t to,
                    const char *name) {
  const char *dir = getenv("SL_BINLOG_CAPTURE_DIR");
  if (dir == NULL) return;
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  SL_ASSERT_TRUE(f != NULL);
  fputc((int)s->checksum, f);
  for (size_t i = 0; i < to; i++) {
    uint8_t t = s->len[i] > 4 ? s->ev[i][4] : 0;
    if (i < from && t != SL_BLE_FORMAT_DESCRIPTION && t != SL_BLE_TABLE_MAP)
      continue;
    uint8_t l[4] = {(uint8_t)s->len[i], (uint8_t)(s->len[i] >> 8),
                    (uint8_t)(s->len[i] >> 16), (uint8_t)(s->len[i] >> 24)};
    fwrite(l, 1, 4, f);
    fwrite(s->ev[i], 1, s->len[i], f);
  }
  SL_ASSERT_EQ_INT(fclose(f), 0);
}

/* One decoded row change, its values copied out as text for checks. */
#define MAXC 48
typedef struct {
  char table[64];
  uint8_t kind; /* 0 write, 1 update, 2 delete */
  uint32_t n;
  char *names[MAXC];
  sl_binlog_value_t before[MAXC], after[MAXC];
  sl_value_t sl_after[MAXC];
  bool sl_ok[MAXC];
  char *sl_str[MAXC];
  uint32_t gtid_seq; /* of its transaction */
  /* The image as a sluice row (sl__binlog_image_to_row). */
  int row_rc;
  char row_msg[512];
  sl_schema_t *schema;
  uint8_t *row;
  uint32_t row_len;
} change_t;

typedef struct {
  change_t ch[64];
  size_t n_ch;
  char *queries[64];
  size_t n_q;
  uint64_t gtid_seqs[64];
  size_t n_gtid;
  size_t n_xid, n_fde, n_rotate, n_gtid_list, n_annotate;
  size_t first_gtid_event; /* index of the first GTID event */
} decoded_t;

static char *dupn(const void *p, size_t n) {
  char *s = malloc(n + 1);
  SL_ASSERT_TRUE(s != NULL);
  memcpy(s, p, n);
  s[n] = 0;
  return s;
}

static void decode_stream(const stream_t *s, decoded_t *out) {
  memset(out, 0, sizeof(*out));
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, s->checksum);
  uint64_t seq = 0;
  sl_bytes_t buf;
  sl_bytes_init(&buf);
  for (size_t i = 0; i < s->n; i++) {
    sl_binlog_event_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, s->ev[i], s->len[i], &ev, &err),
                   err);
    switch (ev.type) {
    case SL_BLE_FORMAT_DESCRIPTION:
      out->n_fde++;
      SL_ASSERT_EQ_INT(ev.u.fde.flavor, SL_BINLOG_FLAVOR_MARIADB);
      SL_ASSERT_EQ_INT(ev.u.fde.checksum, SL_BINLOG_CHECKSUM_CRC32);
      SL_ASSERT_TRUE(strncmp(ev.u.fde.server_version, "10.11.", 6) == 0);
      break;
    case SL_BLE_ROTATE:
      out->n_rotate++;
      /* MariaDB's files are binlog.NNNNNN (docs/testing-servers.md). */
      SL_ASSERT_TRUE(ev.u.rotate.name.len == 13);
      SL_ASSERT_TRUE(memcmp(ev.u.rotate.name.p, "binlog.", 7) == 0);
      SL_ASSERT_EQ_STR(sl__binlog_decoder_file(&d), "binlog.000001");
      break;
    case SL_BLE_GTID_LIST:
      out->n_gtid_list++;
      break;
    case SL_BLE_GTID:
      if (out->n_gtid == 0) out->first_gtid_event = i;
      SL_ASSERT_EQ_INT(ev.u.gtid.gtid.domain, 0);
      SL_ASSERT_EQ_INT(ev.u.gtid.gtid.server_id, 1);
      seq = ev.u.gtid.gtid.seq;
      out->gtid_seqs[out->n_gtid++] = seq;
      break;
    case SL_BLE_XID:
      out->n_xid++;
      break;
    case SL_BLE_ANNOTATE_ROWS:
      out->n_annotate++;
      break;
    case SL_BLE_QUERY:
      SL_ASSERT_TRUE(out->n_q < 64);
      out->queries[out->n_q++] = dupn(ev.u.query.sql.p, ev.u.query.sql.len);
      break;
    case SL_BLE_WRITE_ROWS_V1:
    case SL_BLE_UPDATE_ROWS_V1:
    case SL_BLE_DELETE_ROWS_V1:
    case SL_BLE_WRITE_ROWS_V2:
    case SL_BLE_UPDATE_ROWS_V2:
    case SL_BLE_DELETE_ROWS_V2: {
      const sl_binlog_table_t *t = ev.u.rows.table;
      sl_binlog_rows_iter_t it;
      sl__binlog_rows_begin(&it, &ev);
      for (;;) {
        SL_ASSERT_TRUE(out->n_ch < 64);
        change_t *c = &out->ch[out->n_ch];
        memset(c, 0, sizeof(*c));
        SL_ASSERT_TRUE(t->n_cols <= MAXC);
        int rc = sl__binlog_rows_next(&d, &it, c->before, c->after, &err);
        if (rc == SL_ENOTFOUND) break;
        SL_ASSERT_OK_E(rc, err);
        snprintf(c->table, sizeof(c->table), "%s", t->table);
        c->kind = ev.u.rows.kind;
        c->n = t->n_cols;
        c->gtid_seq = (uint32_t)seq;
        for (uint32_t k = 0; k < t->n_cols; k++) {
          SL_ASSERT_TRUE(t->cols[k].name != NULL);
          c->names[k] = strdup(t->cols[k].name);
          /* And the sluice value of the after image (or before). */
          const sl_binlog_value_t *v =
              c->kind == 2 ? &c->before[k] : &c->after[k];
          sl_type_t ty;
          sl_error_t *e2 = NULL;
          if (sl__binlog_col_sl_type(&t->cols[k], &ty, &e2) == SL_OK &&
              sl__binlog_value_to_sl(&t->cols[k], v, ty, &buf,
                                     &c->sl_after[k], &e2) == SL_OK) {
            c->sl_ok[k] = true;
            if ((ty.id == SL_TYPE_STRING || ty.id == SL_TYPE_BYTES) &&
                !c->sl_after[k].is_null) {
              c->sl_str[k] = dupn(c->sl_after[k].u.s.ptr,
                                  c->sl_after[k].u.s.len);
              c->sl_after[k].u.s.ptr = (const uint8_t *)c->sl_str[k];
            }
          }
          sl_error_destroy(e2);
        }
        /* And the whole image as a sluice row. */
        sl_error_t *e3 = NULL;
        SL_ASSERT_OK_E(sl__binlog_table_schema(t, &c->schema, &e3), e3);
        sl_row_builder_t rb;
        SL_ASSERT_OK(sl_row_builder_init(&rb, c->schema));
        sl_row_t row;
        c->row_rc = sl__binlog_image_to_row(
            t, c->kind == 2 ? c->before : c->after,
            c->kind == 2 ? SL_ROW_DELETE : SL_ROW_INSERT, &rb, &buf, &row,
            &e3);
        if (c->row_rc == SL_OK) {
          SL_ASSERT_OK(sl_row_validate(c->schema, row.data, row.len));
          c->row = malloc(row.len);
          SL_ASSERT_TRUE(c->row != NULL);
          memcpy(c->row, row.data, row.len);
          c->row_len = row.len;
        } else {
          SL_ASSERT_TRUE(e3 != NULL);
          snprintf(c->row_msg, sizeof(c->row_msg), "%s",
                   sl_error_message(e3));
        }
        sl_error_destroy(e3);
        sl_row_builder_close(&rb);
        out->n_ch++;
      }
      break;
    }
    default:
      break;
    }
  }
  sl_bytes_close(&buf);
  sl__binlog_decoder_close(&d);
}

static void decoded_free(decoded_t *dd) {
  for (size_t i = 0; i < dd->n_ch; i++) {
    free(dd->ch[i].row);
    sl_schema_unref(dd->ch[i].schema);
  }
  for (size_t i = 0; i < dd->n_ch; i++)
    for (uint32_t k = 0; k < dd->ch[i].n; k++) {
      free(dd->ch[i].names[k]);
      free(dd->ch[i].sl_str[k]);
    }
  for (size_t i = 0; i < dd->n_q; i++) free(dd->queries[i]);
}

static int col_of(const change_t *c, const char *name) {
  for (uint32_t k = 0; k < c->n; k++)
    if (strcmp(c->names[k], name) == 0) return (int)k;
  SL_TEST_FAIL("no column %s in %s", name, c->table);
  return -1;
}

static const sl_binlog_value_t *av(const change_t *c, const char *name) {
  return &c->after[col_of(c, name)];
}
static const sl_binlog_value_t *bv(const change_t *c, const char *name) {
  return &c->before[col_of(c, name)];
}
static const sl_value_t *sv(const change_t *c, const char *name) {
  int k = col_of(c, name);
  if (!c->sl_ok[k]) SL_TEST_FAIL("column %s did not convert", name);
  return &c->sl_after[k];
}

#define ASSERT_I(v, x)                                                   \
  do {                                                                   \
    SL_ASSERT_EQ_INT((v)->kind, SL_BV_INT);                              \
    SL_ASSERT_TRUE(!(v)->is_unsigned);                                   \
    SL_ASSERT_TRUE((v)->u.i == (int64_t)(x));                            \
  } while (0)
#define ASSERT_U(v, x)                                                   \
  do {                                                                   \
    SL_ASSERT_EQ_INT((v)->kind, SL_BV_INT);                              \
    SL_ASSERT_TRUE((v)->is_unsigned);                                    \
    SL_ASSERT_TRUE((v)->u.u == (uint64_t)(x));                           \
  } while (0)
#define ASSERT_S(v, str_)                                                \
  do {                                                                   \
    SL_ASSERT_EQ_INT((v)->kind, SL_BV_STRING);                           \
    SL_ASSERT_EQ_INT((v)->u.s.len, sizeof(str_) - 1);                    \
    SL_ASSERT_TRUE(memcmp((v)->u.s.p, str_, sizeof(str_) - 1) == 0);     \
  } while (0)
#define ASSERT_NULL(v) SL_ASSERT_EQ_INT((v)->kind, SL_BV_NULL)
#define ASSERT_SL_STR(c, name, str_)                                     \
  do {                                                                   \
    const sl_value_t *sv_ = sv(c, name);                                 \
    SL_ASSERT_TRUE(!sv_->is_null);                                       \
    SL_ASSERT_EQ_INT(sv_->u.s.len, sizeof(str_) - 1);                    \
    SL_ASSERT_TRUE(memcmp(sv_->u.s.ptr, str_, sizeof(str_) - 1) == 0);   \
  } while (0)

/* Every prefix of every event is refused with a message naming it, and a
 * prefix whose header length and checksum are made to match it is either
 * refused the same way or decodes (a QUERY cut inside its text is still a
 * well-formed QUERY), and then its rows decode or are refused with a
 * message; never a crash or a read out of bounds (ASan). */
static void check_prefixes(const stream_t *s) {
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, s->checksum);
  size_t n_refused = 0, n_fixed_refused = 0;
  sl_binlog_value_t *b = calloc(SL_BINLOG_MAX_COLUMNS, sizeof(*b));
  sl_binlog_value_t *a = calloc(SL_BINLOG_MAX_COLUMNS, sizeof(*a));
  SL_ASSERT_TRUE(a != NULL && b != NULL);
  for (size_t i = 0; i < s->n; i++) {
    char nb[32];
    const char *name = sl__binlog_event_name(s->ev[i][4], nb, sizeof(nb));
    for (size_t l = 0; l < s->len[i]; l++) {
      /* An exact-size copy, so that ASan sees a read past the end. */
      uint8_t *p = malloc(l ? l : 1);
      SL_ASSERT_TRUE(p != NULL);
      memcpy(p, s->ev[i], l);
      sl_binlog_event_t ev;
      sl_error_t *err = NULL;
      int rc = sl__binlog_decode(&d, p, l, &ev, &err);
      SL_ASSERT_TRUE(rc != SL_OK);
      SL_ASSERT_TRUE(err != NULL);
      if (l >= 19 && strstr(sl_error_message(err), name) == NULL)
        SL_TEST_FAIL("event %zu prefix %zu: '%s' does not name %s", i, l,
                     sl_error_message(err), name);
      sl_error_destroy(err);
      n_refused++;
      /* The same prefix with a matching length and checksum. */
      if (l >= 23 && s->ev[i][4] != SL_BLE_FORMAT_DESCRIPTION) {
        p[9] = (uint8_t)l;
        p[10] = (uint8_t)(l >> 8);
        p[11] = (uint8_t)(l >> 16);
        p[12] = (uint8_t)(l >> 24);
        /* The decoder's own CRC32 is checked against captured events in
         * decode_stream; here it only makes prefixes reach the fields. */
        d.verify_checksum = false;
        err = NULL;
        rc = sl__binlog_decode(&d, p, l, &ev, &err);
        d.verify_checksum = true;
        if (rc != SL_OK) {
          SL_ASSERT_TRUE(err != NULL);
          SL_ASSERT_TRUE(strstr(sl_error_message(err), name) != NULL);
          sl_error_destroy(err);
          n_fixed_refused++;
        } else if (ev.type >= SL_BLE_WRITE_ROWS_V1 &&
                   ev.type <= SL_BLE_DELETE_ROWS_V2 &&
                   ev.type != SL_BLE_INCIDENT &&
                   ev.type != SL_BLE_HEARTBEAT &&
                   ev.type != SL_BLE_IGNORABLE &&
                   ev.type != SL_BLE_ROWS_QUERY) {
          sl_binlog_rows_iter_t it;
          sl__binlog_rows_begin(&it, &ev);
          while ((rc = sl__binlog_rows_next(&d, &it, b, a, &err)) == SL_OK) {
          }
          if (rc != SL_ENOTFOUND) {
            SL_ASSERT_TRUE(err != NULL);
            SL_ASSERT_TRUE(strstr(sl_error_message(err), name) != NULL);
            sl_error_destroy(err);
            n_fixed_refused++;
          }
        }
      }
      free(p);
    }
    /* Then the whole event, which moves the decoder's state on. */
    sl_binlog_event_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, s->ev[i], s->len[i], &ev, &err),
                   err);
  }
  fprintf(stderr, "prefixes refused: %zu; with fixed lengths: %zu\n",
          n_refused, n_fixed_refused);
  SL_ASSERT_TRUE(n_fixed_refused > 100);
  free(a);
  free(b);
  sl__binlog_decoder_close(&d);
}

/* ------------------------------------------------------------------ */

#define TYPES_TABLE                                                          \
  "CREATE TABLE t_types (id INT PRIMARY KEY, ti TINYINT, tu TINYINT "        \
  "UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT " \
  "UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, "        \
  "d1 DECIMAL(10,2), d2 DECIMAL(30,10), d3 DECIMAL(5,0), d4 DECIMAL(4,4), "  \
  "f FLOAT, db DOUBLE, vc VARCHAR(20), vl VARCHAR(300), c CHAR(5), "         \
  "tx TEXT, bl BLOB, vb VARBINARY(10), l1 VARCHAR(10) CHARACTER SET latin1, " \
  "dt DATE, tm TIME(3), tm0 TIME, dtm DATETIME(6), dt0 DATETIME, "           \
  "ts TIMESTAMP(2) NULL, y YEAR, yu INT UNSIGNED, b BIT(10), e ENUM('red','green','blue'), "  \
  "st SET('a','b','c','d'), j JSON, n INT, nu INT UNSIGNED, tm1 TIME(1), " \
  "tm6 TIME(6), dt3 DATETIME(3), ts6 TIMESTAMP(6) NULL) "                   \
  "DEFAULT CHARSET=utf8mb4"

SL_TEST(types_from_gtid) {
  sl_server_t *srv = start_maria("FULL");
  MYSQL *m = direct(srv);
  my_ok(m, TYPES_TABLE);
  my_ok(m, "CREATE TABLE t2 (k INT PRIMARY KEY, v VARCHAR(10))");
  char *start = gtid_pos(m);
  /* Row 1: the extremes; row 2: zeros and NULLs. */
  my_ok(m,
        "INSERT INTO t_types VALUES (1, -128, 255, -32768, 65535, -8388608, "
        "16777215, -2147483648, 4294967295, -9223372036854775808, "
        "18446744073709551615, -12345678.91, "
        "'12345678901234567890.0123456789', 99999, -0.0001, 1.5, -2.25e100, "
        "'h\xc3\xa9llo', REPEAT('x', 300), 'ab', 'some text', X'00FF10', "
        "X'0102', 'caf\xc3\xa9', '2024-02-29', '-838:59:58.123', '12:34:56', "
        "'2023-12-31 23:59:59.999999', '1000-01-01 00:00:00', "
        "'2038-01-19 03:14:07.99', 2155, 3000000000, b'1010101010', 'green', "
        "'a,d', "
        "'{\"k\": [1, 2]}', NULL, 4000000000, '-00:00:00.5', "
        "'-12:00:00.000001', '2000-02-29 00:00:00.001', "
        "'1970-01-01 00:00:01.000001')");
  my_ok(m,
        "INSERT INTO t_types (id, ti, tu, i, bu, d1, d2, vc, c, dt, tm, dtm, "
        "y, b, e, st) VALUES (2, 0, 0, 0, 0, 0, 0, '', '', '1970-01-01', "
        "'00:00:00', '1970-01-01 00:00:00', 0, b'0', 'red', '')");
  my_ok(m, "UPDATE t_types SET i = i + 1, vc = 'upd' WHERE id = 1");
  my_ok(m, "DELETE FROM t_types WHERE id = 2");
  my_ok(m, "ALTER TABLE t2 ADD COLUMN extra INT DEFAULT 7");
  my_ok(m, "BEGIN");
  my_ok(m, "INSERT INTO t2 (k, v) VALUES (10, 'a'), (11, 'b')");
  my_ok(m, "UPDATE t2 SET v = 'c' WHERE k = 10");
  my_ok(m, "DELETE FROM t2 WHERE k = 11");
  my_ok(m, "COMMIT");

  stream_t s = read_stream(srv, start);
  SL_ASSERT_EQ_INT(s.checksum, SL_BINLOG_CHECKSUM_CRC32);
  capture(&s, 0, s.n, "stream-types");
  decoded_t dd;
  decode_stream(&s, &dd);
  if (getenv("SL_BINLOG_CAPTURE_DIR") != NULL) {
    /* One file per transaction, after its state (FDE, TABLE_MAPs). */
    size_t from = dd.first_gtid_event, k = 0;
    for (size_t i = from + 1; i <= s.n; i++) {
      if (i == s.n || (s.len[i] > 4 && s.ev[i][4] == SL_BLE_GTID)) {
        char name[32];
        snprintf(name, sizeof(name), "txn-%zu", k++);
        capture(&s, from, i, name);
        from = i;
      }
    }
  }

  /* Six transactions after the start: 2 inserts, update, delete, the DDL
   * and the multi-statement one, in GTID order after the start. */
  int64_t start_seq = 0;
  const char *dash = strrchr(start, '-');
  if (dash != NULL) start_seq = strtoll(dash + 1, NULL, 10);
  SL_ASSERT_EQ_INT(dd.n_gtid, 6);
  for (size_t i = 0; i < dd.n_gtid; i++)
    SL_ASSERT_EQ_INT(dd.gtid_seqs[i], start_seq + 1 + (int64_t)i);
  SL_ASSERT_EQ_INT(dd.n_xid, 5);
  SL_ASSERT_TRUE(dd.n_fde >= 1);
  SL_ASSERT_TRUE(dd.n_rotate >= 1);
  SL_ASSERT_TRUE(dd.n_gtid_list >= 1);
  SL_ASSERT_EQ_INT(dd.n_annotate, 7); /* one per row statement */
  /* The DDL is a QUERY, with its text as written. */
  bool seen_ddl = false;
  for (size_t i = 0; i < dd.n_q; i++)
    if (strcmp(dd.queries[i],
               "ALTER TABLE t2 ADD COLUMN extra INT DEFAULT 7") == 0)
      seen_ddl = true;
  SL_ASSERT_TRUE(seen_ddl);

  /* Changes: W1, W2, U1, D2, then W10, W11, U10, D11. */
  SL_ASSERT_EQ_INT(dd.n_ch, 8);
  change_t *w1 = &dd.ch[0], *w2 = &dd.ch[1], *u1 = &dd.ch[2], *d2 = &dd.ch[3];
  SL_ASSERT_EQ_STR(w1->table, "t_types");
  SL_ASSERT_EQ_INT(w1->kind, 0);
  SL_ASSERT_EQ_INT(w2->kind, 0);
  SL_ASSERT_EQ_INT(u1->kind, 1);
  SL_ASSERT_EQ_INT(d2->kind, 2);
  SL_ASSERT_EQ_INT(av(w1, "id")->kind, SL_BV_INT);
  ASSERT_I(av(w1, "id"), 1);
  ASSERT_I(av(w1, "ti"), -128);
  ASSERT_U(av(w1, "tu"), 255);
  ASSERT_I(av(w1, "si"), -32768);
  ASSERT_U(av(w1, "su"), 65535);
  ASSERT_I(av(w1, "mi"), -8388608);
  ASSERT_U(av(w1, "mu"), 16777215);
  ASSERT_I(av(w1, "i"), INT32_MIN);
  ASSERT_U(av(w1, "iu"), 4294967295u);
  ASSERT_I(av(w1, "bi"), INT64_MIN);
  ASSERT_U(av(w1, "bu"), UINT64_MAX);
  SL_ASSERT_EQ_STR(av(w1, "d1")->dec, "-12345678.91");
  SL_ASSERT_EQ_STR(av(w1, "d2")->dec, "12345678901234567890.0123456789");
  SL_ASSERT_EQ_STR(av(w1, "d3")->dec, "99999");
  SL_ASSERT_EQ_STR(av(w1, "d4")->dec, "-0.0001");
  SL_ASSERT_EQ_INT(av(w1, "f")->kind, SL_BV_DOUBLE);
  SL_ASSERT_TRUE(av(w1, "f")->u.f == 1.5);
  SL_ASSERT_TRUE(av(w1, "db")->u.f == -2.25e100);
  ASSERT_S(av(w1, "vc"), "h\xc3\xa9llo");
  SL_ASSERT_EQ_INT(av(w1, "vl")->u.s.len, 300);
  ASSERT_S(av(w1, "c"), "ab");
  ASSERT_S(av(w1, "tx"), "some text");
  ASSERT_S(av(w1, "bl"), "\x00\xff\x10");
  ASSERT_S(av(w1, "vb"), "\x01\x02");
  ASSERT_S(av(w1, "l1"), "caf\xe9"); /* latin1 bytes in the binlog */
  const sl_binlog_value_t *v = av(w1, "dt");
  SL_ASSERT_EQ_INT(v->kind, SL_BV_DATE);
  SL_ASSERT_EQ_INT(v->t.year, 2024);
  SL_ASSERT_EQ_INT(v->t.month, 2);
  SL_ASSERT_EQ_INT(v->t.day, 29);
  v = av(w1, "tm");
  SL_ASSERT_EQ_INT(v->kind, SL_BV_TIME);
  SL_ASSERT_TRUE(v->t.is_negative);
  SL_ASSERT_EQ_INT(v->t.hour, 838);
  SL_ASSERT_EQ_INT(v->t.minute, 59);
  SL_ASSERT_EQ_INT(v->t.second, 58);
  SL_ASSERT_EQ_INT(v->t.usec, 123000);
  v = av(w1, "tm0");
  SL_ASSERT_TRUE(!v->t.is_negative);
  SL_ASSERT_EQ_INT(v->t.hour, 12);
  SL_ASSERT_EQ_INT(v->t.minute, 34);
  SL_ASSERT_EQ_INT(v->t.second, 56);
  v = av(w1, "dtm");
  SL_ASSERT_EQ_INT(v->kind, SL_BV_DATETIME);
  SL_ASSERT_EQ_INT(v->t.year, 2023);
  SL_ASSERT_EQ_INT(v->t.month, 12);
  SL_ASSERT_EQ_INT(v->t.day, 31);
  SL_ASSERT_EQ_INT(v->t.hour, 23);
  SL_ASSERT_EQ_INT(v->t.minute, 59);
  SL_ASSERT_EQ_INT(v->t.second, 59);
  SL_ASSERT_EQ_INT(v->t.usec, 999999);
  v = av(w1, "dt0");
  SL_ASSERT_EQ_INT(v->t.year, 1000);
  SL_ASSERT_EQ_INT(v->t.month, 1);
  SL_ASSERT_EQ_INT(v->t.day, 1);
  v = av(w1, "ts");
  SL_ASSERT_EQ_INT(v->kind, SL_BV_TIMESTAMP);
  SL_ASSERT_EQ_INT(v->u.ts.sec, 2147483647);
  SL_ASSERT_EQ_INT(v->u.ts.usec, 990000);
  SL_ASSERT_EQ_INT(av(w1, "y")->kind, SL_BV_YEAR);
  SL_ASSERT_EQ_INT(av(w1, "y")->u.i, 2155);
  SL_ASSERT_EQ_INT(av(w1, "b")->kind, SL_BV_BIT);
  SL_ASSERT_EQ_INT(av(w1, "b")->u.u, 0x2AA);
  SL_ASSERT_EQ_INT(av(w1, "e")->kind, SL_BV_ENUM);
  SL_ASSERT_EQ_INT(av(w1, "e")->u.u, 2);
  SL_ASSERT_EQ_INT(av(w1, "st")->kind, SL_BV_SET);
  SL_ASSERT_EQ_INT(av(w1, "st")->u.u, 9); /* a and d */
  ASSERT_S(av(w1, "j"), "{\"k\": [1, 2]}"); /* MariaDB JSON is text */
  ASSERT_NULL(av(w1, "n"));
  /* After YEAR and BIT: the signedness bits count numeric columns only. */
  ASSERT_U(av(w1, "yu"), 3000000000u);
  ASSERT_U(av(w1, "nu"), 4000000000u);
  /* Negative TIMEs whose fraction borrows from the seconds (each
   * fractional width has its own packing). */
  v = av(w1, "tm1");
  SL_ASSERT_TRUE(v->t.is_negative);
  SL_ASSERT_EQ_INT(v->t.hour, 0);
  SL_ASSERT_EQ_INT(v->t.second, 0);
  SL_ASSERT_EQ_INT(v->t.usec, 500000);
  SL_ASSERT_EQ_INT(sv(w1, "tm1")->u.i, -500000);
  v = av(w1, "tm6");
  SL_ASSERT_TRUE(v->t.is_negative);
  SL_ASSERT_EQ_INT(v->t.hour, 12);
  SL_ASSERT_EQ_INT(v->t.minute, 0);
  SL_ASSERT_EQ_INT(v->t.usec, 1);
  v = av(w1, "dt3");
  SL_ASSERT_EQ_INT(v->t.year, 2000);
  SL_ASSERT_EQ_INT(v->t.month, 2);
  SL_ASSERT_EQ_INT(v->t.day, 29);
  SL_ASSERT_EQ_INT(v->t.usec, 1000);
  v = av(w1, "ts6");
  SL_ASSERT_EQ_INT(v->u.ts.sec, 1);
  SL_ASSERT_EQ_INT(v->u.ts.usec, 1);
  SL_ASSERT_EQ_INT(sv(w1, "ts6")->u.i, 1000001);
  /* The same row as sluice values (docs/cdc-mariadb.md's table). */
  SL_ASSERT_EQ_INT(sv(w1, "ti")->u.i, -128);
  SL_ASSERT_EQ_INT(sv(w1, "iu")->u.i, 4294967295LL);
  SL_ASSERT_TRUE(!w1->sl_ok[col_of(w1, "bu")]); /* above int64 */
  SL_ASSERT_EQ_INT(sv(w1, "d1")->type, SL_TYPE_DECIMAL);
  SL_ASSERT_EQ_INT(sv(w1, "d1")->u.i, -1234567891);
  SL_ASSERT_EQ_INT(sv(w1, "d1")->scale, 2);
  ASSERT_SL_STR(w1, "d2", "12345678901234567890.0123456789");
  ASSERT_SL_STR(w1, "vc", "h\xc3\xa9llo");
  ASSERT_SL_STR(w1, "l1", "caf\xc3\xa9"); /* latin1 -> UTF-8 */
  ASSERT_SL_STR(w1, "e", "green");
  ASSERT_SL_STR(w1, "st", "a,d");
  SL_ASSERT_EQ_INT(sv(w1, "bl")->type, SL_TYPE_BYTES);
  SL_ASSERT_EQ_INT(sv(w1, "dt")->u.i, 1709164800LL * 1000000);
  SL_ASSERT_EQ_INT(sv(w1, "dtm")->u.i, 1704067199999999LL);
  SL_ASSERT_EQ_INT(sv(w1, "ts")->u.i, 2147483647990000LL);
  SL_ASSERT_EQ_INT(sv(w1, "tm")->u.i,
                   -((838LL * 3600 + 59 * 60 + 58) * 1000000 + 123000));
  SL_ASSERT_TRUE(sv(w1, "n")->is_null);
  /* Row 2: zeros, the empty string, NULLs where nothing was written. */
  ASSERT_I(av(w2, "id"), 2);
  ASSERT_I(av(w2, "ti"), 0);
  SL_ASSERT_EQ_STR(av(w2, "d1")->dec, "0.00");
  SL_ASSERT_EQ_STR(av(w2, "d2")->dec, "0.0000000000");
  ASSERT_S(av(w2, "vc"), "");
  ASSERT_NULL(av(w2, "si"));
  ASSERT_NULL(av(w2, "tx"));
  ASSERT_NULL(av(w2, "j"));
  SL_ASSERT_EQ_INT(av(w2, "y")->u.i, 0);
  SL_ASSERT_EQ_INT(av(w2, "b")->u.u, 0);
  SL_ASSERT_EQ_INT(av(w2, "st")->u.u, 0);
  SL_ASSERT_EQ_INT(sv(w2, "dt")->u.i, 0);
  /* The update: the full before and after images (binlog_row_image). */
  ASSERT_I(bv(u1, "i"), INT32_MIN);
  ASSERT_I(av(u1, "i"), INT32_MIN + 1);
  ASSERT_S(bv(u1, "vc"), "h\xc3\xa9llo");
  ASSERT_S(av(u1, "vc"), "upd");
  ASSERT_U(bv(u1, "bu"), UINT64_MAX);
  ASSERT_U(av(u1, "bu"), UINT64_MAX);
  /* The delete: the before image only. */
  ASSERT_I(bv(d2, "id"), 2);
  SL_ASSERT_EQ_INT(av(d2, "id")->kind, SL_BV_ABSENT);
  /* Whole images as sluice rows: row 1 holds a BIGINT UNSIGNED above the
   * int64 range, so it is refused, naming table and column; row 2 and the
   * t2 rows build, with the schema's names and types. */
  SL_ASSERT_EQ_INT(w1->row_rc, SL_ETYPE);
  SL_ASSERT_EQ_STR(w1->row_msg,
                   "table sluice.t_types: column 'bu' (BIGINT): unsigned "
                   "value above the int64 range");
  SL_ASSERT_OK(w2->row_rc);
  {
    sl_row_t r;
    sl_row_view(&r, w2->schema, w2->row, w2->row_len);
    SL_ASSERT_EQ_INT(sl_row_kind(&r), SL_ROW_INSERT);
    SL_ASSERT_EQ_INT(sl_schema_index(w2->schema, "bu"), col_of(w2, "bu"));
    SL_ASSERT_EQ_INT(sl_row_get_i64(&r, (uint32_t)col_of(w2, "id")), 2);
    SL_ASSERT_TRUE(sl_row_is_null(&r, (uint32_t)col_of(w2, "si")));
    sl_slice_t e = sl_row_get_str(&r, (uint32_t)col_of(w2, "e"));
    SL_ASSERT_TRUE(e.len == 3 && memcmp(e.ptr, "red", 3) == 0);
    sl_slice_t st = sl_row_get_str(&r, (uint32_t)col_of(w2, "st"));
    SL_ASSERT_EQ_INT(st.len, 0);
    SL_ASSERT_EQ_INT(sl_schema_field(w2->schema,
                                     (uint32_t)col_of(w2, "d1"))->type.id,
                     SL_TYPE_DECIMAL);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&r, (uint32_t)col_of(w2, "d1")), 0);
  }
  SL_ASSERT_EQ_INT(d2->row_rc, SL_OK);
  {
    sl_row_t r;
    sl_row_view(&r, d2->schema, d2->row, d2->row_len);
    SL_ASSERT_EQ_INT(sl_row_kind(&r), SL_ROW_DELETE);
  }
  /* The multi-statement transaction: one GTID, in order. */
  change_t *c = &dd.ch[4];
  SL_ASSERT_EQ_STR(c[0].table, "t2");
  SL_ASSERT_EQ_INT(c[0].gtid_seq, c[3].gtid_seq);
  SL_ASSERT_EQ_INT(c[0].kind, 0);
  SL_ASSERT_OK(c[0].row_rc);
  {
    sl_row_t r;
    sl_row_view(&r, c[0].schema, c[0].row, c[0].row_len);
    SL_ASSERT_EQ_INT(sl_schema_n_fields(c[0].schema), 3);
    SL_ASSERT_EQ_STR(sl_schema_field(c[0].schema, 1)->name, "v");
    SL_ASSERT_TRUE(!sl_schema_field(c[0].schema, 0)->type.nullable);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 0), 10);
    sl_slice_t vs = sl_row_get_str(&r, 1);
    SL_ASSERT_TRUE(vs.len == 1 && vs.ptr[0] == 'a');
    SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 2), 7);
  }
  ASSERT_I(av(&c[0], "k"), 10);
  ASSERT_S(av(&c[0], "v"), "a");
  ASSERT_I(av(&c[0], "extra"), 7);
  SL_ASSERT_EQ_INT(c[1].kind, 0);
  ASSERT_I(av(&c[1], "k"), 11);
  SL_ASSERT_EQ_INT(c[2].kind, 1);
  ASSERT_S(bv(&c[2], "v"), "a");
  ASSERT_S(av(&c[2], "v"), "c");
  SL_ASSERT_EQ_INT(c[3].kind, 2);
  ASSERT_I(bv(&c[3], "k"), 11);
  ASSERT_S(bv(&c[3], "v"), "b");

  check_prefixes(&s);
  decoded_free(&dd);
  stream_free(&s);
  free(start);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* A real ROTATE (FLUSH BINARY LOGS), the event Connector/C 3.3.20 decodes
 * wrong after the first FORMAT_DESCRIPTION: position 4 and the next
 * file's name, up to the checksum; the stream goes on in the new file. */
SL_TEST(rotate_after_flush) {
  sl_server_t *srv = start_maria("FULL");
  MYSQL *m = direct(srv);
  my_ok(m, "CREATE TABLE t (k INT PRIMARY KEY)");
  char *start = gtid_pos(m);
  my_ok(m, "INSERT INTO t VALUES (1)");
  my_ok(m, "FLUSH BINARY LOGS");
  my_ok(m, "INSERT INTO t VALUES (2)");
  stream_t s = read_stream(srv, start);
  capture(&s, 0, s.n, "stream-rotate");
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, s.checksum);
  int n_real_rotate = 0, n_fde = 0;
  int64_t keys[4];
  int n_keys = 0;
  sl_binlog_value_t a[4], b[4];
  for (size_t i = 0; i < s.n; i++) {
    sl_binlog_event_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, s.ev[i], s.len[i], &ev, &err),
                   err);
    if (ev.type == SL_BLE_FORMAT_DESCRIPTION) n_fde++;
    if (ev.type == SL_BLE_ROTATE && !(ev.flags & SL_BLF_ARTIFICIAL)) {
      /* The rotate at the end of binlog.000001, after its FDE. */
      SL_ASSERT_TRUE(n_fde >= 1);
      n_real_rotate++;
      SL_ASSERT_EQ_INT(ev.u.rotate.position, 4);
      SL_ASSERT_EQ_INT(ev.u.rotate.name.len, 13);
      SL_ASSERT_TRUE(memcmp(ev.u.rotate.name.p, "binlog.000002", 13) == 0);
      SL_ASSERT_EQ_STR(sl__binlog_decoder_file(&d), "binlog.000002");
    }
    if (ev.type == SL_BLE_WRITE_ROWS_V1) {
      sl_binlog_rows_iter_t it;
      sl__binlog_rows_begin(&it, &ev);
      SL_ASSERT_OK_E(sl__binlog_rows_next(&d, &it, b, a, &err), err);
      SL_ASSERT_TRUE(n_keys < 4);
      keys[n_keys++] = a[0].u.i;
      SL_ASSERT_EQ_INT(sl__binlog_rows_next(&d, &it, b, a, &err),
                       SL_ENOTFOUND);
    }
  }
  SL_ASSERT_EQ_INT(n_real_rotate, 1);
  SL_ASSERT_TRUE(n_fde >= 2); /* binlog.000002 starts with its own */
  SL_ASSERT_EQ_INT(n_keys, 2);
  SL_ASSERT_EQ_INT(keys[0], 1);
  SL_ASSERT_EQ_INT(keys[1], 2);
  SL_ASSERT_EQ_STR(sl__binlog_decoder_file(&d), "binlog.000002");
  sl__binlog_decoder_close(&d);
  stream_free(&s);
  free(start);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* Opens a reader at gtid and returns the first read's result. */
static int first_read(const sl_server_t *srv, const char *gtid,
                      unsigned *out_errno, char *msg, size_t size) {
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(srv),
                               .user = "root",
                               .server_id = 4243,
                               .gtid_start = gtid,
                               .is_non_blocking = true};
  sl_binlog_reader_t *r = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_reader_open(&o, &r, &err), err);
  const uint8_t *p;
  size_t len;
  int rc;
  while ((rc = sl__binlog_reader_next(r, &p, &len, &err)) == SL_OK) {
  }
  *out_errno = sl__binlog_reader_errno(r);
  snprintf(msg, size, "%s", err ? sl_error_message(err) : "");
  sl_error_destroy(err);
  sl__binlog_reader_close(r);
  return rc;
}

/* A GTID the server never wrote and a purged one: error 1236 with the
 * server's message, each its own (the CDC source stops on both, naming
 * the server's words). */
SL_TEST(gtid_start_errors) {
  sl_server_t *srv = start_maria("FULL");
  MYSQL *m = direct(srv);
  my_ok(m, "CREATE TABLE t (k INT PRIMARY KEY)");
  my_ok(m, "INSERT INTO t VALUES (1)");
  unsigned eno = 0;
  char msg[1024];
  int rc = first_read(srv, "0-1-999", &eno, msg, sizeof(msg));
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  SL_ASSERT_EQ_INT(eno, 1236);
  fprintf(stderr, "future: %s\n", msg);
  SL_ASSERT_TRUE(strstr(msg, "0-1-999") != NULL);
  SL_ASSERT_TRUE(strstr(msg, "error 1236") != NULL);
  /* Purge the first file: its GTIDs can no longer be served. */
  char *old = gtid_pos(m);
  my_ok(m, "FLUSH BINARY LOGS");
  my_ok(m, "INSERT INTO t VALUES (2)");
  my_ok(m, "FLUSH BINARY LOGS");
  /* MariaDB keeps a file until its binlog checkpoint has passed (InnoDB
   * flushed what it covers); PURGE leaves it alone until then.  Wait for
   * the condition itself, bounded. */
  int n_files = 0;
  for (int i = 0; i < 600; i++) {
    my_ok(m, "PURGE BINARY LOGS TO 'binlog.000003'");
    SL_ASSERT_EQ_INT(mysql_query(m, "SHOW BINARY LOGS"), 0);
    MYSQL_RES *res = mysql_store_result(m);
    SL_ASSERT_TRUE(res != NULL);
    n_files = (int)mysql_num_rows(res);
    mysql_free_result(res);
    if (n_files == 1) break;
    usleep(50000);
  }
  SL_ASSERT_EQ_INT(n_files, 1);
  rc = first_read(srv, "0-1-1", &eno, msg, sizeof(msg));
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  SL_ASSERT_EQ_INT(eno, 1236);
  fprintf(stderr, "purged: %s\n", msg);
  SL_ASSERT_TRUE(strstr(msg, "purged") != NULL);
  /* The current position still works: an empty stream, no error. */
  char *now = gtid_pos(m);
  rc = first_read(srv, now, &eno, msg, sizeof(msg));
  SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
  SL_ASSERT_EQ_INT(eno, 0);
  free(old);
  free(now);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* An idle stream in blocking mode brings HEARTBEAT events (with the
 * stream's checksum); the decoder reads the file name they carry. */
SL_TEST(heartbeat_on_idle_stream) {
  sl_server_t *srv = start_maria("FULL");
  MYSQL *m = direct(srv);
  char *start = gtid_pos(m);
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(srv),
                               .user = "root",
                               .server_id = 4244,
                               .gtid_start = start,
                               .heartbeat_ms = 50,
                               .read_timeout_s = 60};
  sl_binlog_reader_t *r = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_reader_open(&o, &r, &err), err);
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, sl__binlog_reader_checksum(r));
  int n_hb = 0;
  for (int i = 0; i < 1000 && n_hb < 2; i++) {
    const uint8_t *p;
    size_t len;
    SL_ASSERT_OK_E(sl__binlog_reader_next(r, &p, &len, &err), err);
    sl_binlog_event_t ev;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, p, len, &ev, &err), err);
    if (ev.type == SL_BLE_HEARTBEAT) {
      n_hb++;
      SL_ASSERT_EQ_INT(ev.u.heartbeat.log_name.len, 13);
      SL_ASSERT_TRUE(memcmp(ev.u.heartbeat.log_name.p, "binlog.000001",
                            13) == 0);
      SL_ASSERT_TRUE(ev.next_pos > 4);
    }
  }
  SL_ASSERT_EQ_INT(n_hb, 2);
  sl__binlog_decoder_close(&d);
  sl__binlog_reader_close(r);
  free(start);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* Without optional metadata (MariaDB's default binlog_row_metadata=
 * NO_LOG) the TABLE_MAP has no names, signedness or character sets: a
 * text column does not map until its facts are set (from
 * information_schema in the source), and an unsigned column reads signed
 * until then. */
SL_TEST(facts_without_row_metadata) {
  sl_server_t *srv = start_maria("NO_LOG");
  MYSQL *m = direct(srv);
  my_ok(m, "CREATE TABLE t (k INT UNSIGNED PRIMARY KEY, v VARCHAR(10), "
           "e ENUM('x','y')) DEFAULT CHARSET=utf8mb4");
  char *start = gtid_pos(m);
  my_ok(m, "INSERT INTO t VALUES (4294967295, 'v\xc3\xa4', 'y')");
  stream_t s = read_stream(srv, start);
  capture(&s, 0, s.n, "stream-no-metadata");
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, s.checksum);
  int n_rows = 0;
  sl_bytes_t buf;
  sl_bytes_init(&buf);
  for (size_t i = 0; i < s.n; i++) {
    sl_binlog_event_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, s.ev[i], s.len[i], &ev, &err),
                   err);
    if (ev.type == SL_BLE_TABLE_MAP) {
      const sl_binlog_table_t *t = ev.u.table_map.table;
      SL_ASSERT_EQ_STR(t->schema, "sluice");
      SL_ASSERT_EQ_STR(t->table, "t");
      SL_ASSERT_EQ_INT(t->n_cols, 3);
      SL_ASSERT_TRUE(!t->has_optional_meta);
      SL_ASSERT_TRUE(t->cols[0].name == NULL && !t->cols[0].has_sign);
      SL_ASSERT_EQ_INT(t->cols[1].charset, 0);
      SL_ASSERT_TRUE(!t->cols[0].is_nullable);
      SL_ASSERT_TRUE(t->cols[1].is_nullable);
      sl_type_t ty;
      SL_ASSERT_EQ_INT(sl__binlog_col_sl_type(&t->cols[1], &ty, &err),
                       SL_ENOTSUP);
      SL_ASSERT_TRUE(strstr(sl_error_message(err),
                            "binlog_row_metadata=FULL") != NULL);
      sl_error_destroy(err);
      err = NULL;
    }
    if (ev.type != SL_BLE_WRITE_ROWS_V1) continue;
    uint64_t id = ev.u.rows.table_id;
    sl_binlog_value_t b[3], a[3];
    sl_binlog_rows_iter_t it;
    sl__binlog_rows_begin(&it, &ev);
    SL_ASSERT_OK_E(sl__binlog_rows_next(&d, &it, b, a, &err), err);
    ASSERT_I(&a[0], -1); /* signed until told */
    /* The facts, as the source reads them from information_schema. */
    const char *names[] = {"x", "y"};
    SL_ASSERT_OK_E(sl__binlog_table_set_col(&d, id, 0, "k", 1, 0, NULL, 0,
                                            &err), err);
    SL_ASSERT_OK_E(sl__binlog_table_set_col(&d, id, 1, "v", -1, 45, NULL, 0,
                                            &err), err);
    SL_ASSERT_OK_E(sl__binlog_table_set_col(&d, id, 2, "e", -1, 45, names,
                                            2, &err), err);
    SL_ASSERT_EQ_INT(sl__binlog_table_set_col(&d, id, 3, "z", -1, 0, NULL,
                                              0, &err), SL_EINVAL);
    sl_error_destroy(err);
    err = NULL;
    sl__binlog_rows_begin(&it, &ev);
    SL_ASSERT_OK_E(sl__binlog_rows_next(&d, &it, b, a, &err), err);
    ASSERT_U(&a[0], 4294967295u);
    const sl_binlog_table_t *t = ev.u.rows.table;
    sl_type_t ty;
    sl_value_t sv;
    SL_ASSERT_OK_E(sl__binlog_col_sl_type(&t->cols[1], &ty, &err), err);
    SL_ASSERT_EQ_INT(ty.id, SL_TYPE_STRING);
    SL_ASSERT_OK_E(sl__binlog_value_to_sl(&t->cols[1], &a[1], ty, &buf, &sv,
                                          &err), err);
    SL_ASSERT_EQ_INT(sv.u.s.len, 3);
    SL_ASSERT_TRUE(memcmp(sv.u.s.ptr, "v\xc3\xa4", 3) == 0);
    SL_ASSERT_OK_E(sl__binlog_col_sl_type(&t->cols[2], &ty, &err), err);
    SL_ASSERT_EQ_INT(ty.id, SL_TYPE_STRING);
    SL_ASSERT_OK_E(sl__binlog_value_to_sl(&t->cols[2], &a[2], ty, &buf, &sv,
                                          &err), err);
    SL_ASSERT_EQ_INT(sv.u.s.len, 1);
    SL_ASSERT_TRUE(sv.u.s.ptr[0] == 'y');
    n_rows++;
  }
  SL_ASSERT_EQ_INT(n_rows, 1);
  sl_bytes_close(&buf);
  sl__binlog_decoder_close(&d);
  stream_free(&s);
  free(start);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* GTIDs of the stream from start, as "d-s-n;" text. */
static void stream_gtids(const stream_t *s, char *out, size_t size,
                         sl_binlog_gtid_state_t *st) {
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, s->checksum);
  out[0] = 0;
  for (size_t i = 0; i < s->n; i++) {
    sl_binlog_event_t ev;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, s->ev[i], s->len[i], &ev, &err),
                   err);
    if (ev.type != SL_BLE_GTID) continue;
    size_t l = strlen(out);
    snprintf(out + l, size - l, "%u-%u-%llu;", ev.u.gtid.gtid.domain,
             ev.u.gtid.gtid.server_id,
             (unsigned long long)ev.u.gtid.gtid.seq);
    SL_ASSERT_OK(sl__binlog_gtid_state_update(st, &ev.u.gtid.gtid));
  }
  sl__binlog_decoder_close(&d);
}

/* A start state with two domains: the stream holds exactly the
 * transactions after it in each domain, and the state kept from the GTID
 * events read ends equal to the server's @@gtid_binlog_pos.  A domain
 * missing from the start state is sent from its beginning. */
SL_TEST(multi_domain_start) {
  sl_server_t *srv = start_maria("FULL");
  MYSQL *m = direct(srv);
  my_ok(m, "CREATE TABLE t (k INT PRIMARY KEY)");   /* 0-1-2 */
  my_ok(m, "INSERT INTO t VALUES (1)");             /* 0-1-3 */
  my_ok(m, "SET SESSION gtid_domain_id = 5");
  my_ok(m, "INSERT INTO t VALUES (2)");             /* 5-1-1 */
  my_ok(m, "SET SESSION gtid_domain_id = 0");
  my_ok(m, "INSERT INTO t VALUES (3)");             /* 0-1-4 */
  my_ok(m, "SET SESSION gtid_domain_id = 5");
  my_ok(m, "INSERT INTO t VALUES (4)");             /* 5-1-2 */
  char *now = gtid_pos(m);
  SL_ASSERT_EQ_STR(now, "0-1-4,5-1-2");
  char got[512];
  sl_binlog_gtid_state_t st;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_gtid_state_parse("0-1-3,5-1-1", &st, &err),
                 err);
  stream_t s = read_stream(srv, "0-1-3,5-1-1");
  stream_gtids(&s, got, sizeof(got), &st);
  SL_ASSERT_EQ_STR(got, "0-1-4;5-1-2;");
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__binlog_gtid_state_format(&st, &b));
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  SL_ASSERT_EQ_STR((const char *)b.data, now);
  sl_bytes_close(&b);
  stream_free(&s);
  /* Domain 5 absent from the start: all of it comes. */
  SL_ASSERT_OK_E(sl__binlog_gtid_state_parse("0-1-3", &st, &err), err);
  s = read_stream(srv, "0-1-3");
  stream_gtids(&s, got, sizeof(got), &st);
  SL_ASSERT_EQ_STR(got, "5-1-1;0-1-4;5-1-2;");
  stream_free(&s);
  free(now);
  mysql_close(m);
  sl_server_destroy(srv);
}
