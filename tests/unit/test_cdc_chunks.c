/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB CDC source's snapshot pieces that need no server
 * (src/connectors/mariadb/cdc_*.c): the type mapping, the chunk list codec
 * (round trip, every truncation and corruption refused with a message),
 * the chunk WHERE condition, binlog position order and the backfill merge
 * with hand-made changes.  The server-side half is
 * tests/integration/test_cdc_mariadb.c.
 */
#include "connectors/mariadb/cdc_int.h"
#include "core/inject.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Types. */

static sl_type_t map_ok(const char *d, const char *ct, long p, long s,
                        sl__cdc_conv_t want_conv) {
  sl_type_t t;
  sl__cdc_conv_t conv;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_map_type(d, ct, p, s, "col", &t, &conv, &err), err);
  SL_ASSERT_EQ_INT(conv, want_conv);
  return t;
}

static void map_fails(const char *d, const char *ct, long p, long s,
                      const char *want) {
  sl_type_t t;
  sl__cdc_conv_t conv;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__cdc_map_type(d, ct, p, s, "column `c` of `db`.`t`",
                                    &t, &conv, &err),
                   SL_ENOTSUP);
  SL_ASSERT_TRUE(err != NULL);
  if (strstr(sl_error_message(err), want) == NULL)
    SL_TEST_FAIL("message '%s' lacks '%s'", sl_error_message(err), want);
  sl_error_destroy(err);
}

SL_TEST(type_map) {
  /* The binlog side's types (binlog_map.c): every integer is int64. */
  SL_ASSERT_EQ_INT(map_ok("tinyint", "tinyint(4)", 3, 0, SL_CDC_CONV_INT).id,
                   SL_TYPE_INT64);
  SL_ASSERT_EQ_INT(map_ok("int", "int(11)", 10, 0, SL_CDC_CONV_INT).id,
                   SL_TYPE_INT64);
  SL_ASSERT_EQ_INT(
      map_ok("bigint", "bigint(20) unsigned", 20, 0, SL_CDC_CONV_INT).id,
      SL_TYPE_INT64);
  SL_ASSERT_EQ_INT(map_ok("year", "year(4)", 0, 0, SL_CDC_CONV_INT).id,
                   SL_TYPE_INT64);
  SL_ASSERT_EQ_INT(map_ok("bit", "bit(1)", 1, 0, SL_CDC_CONV_BIT).id,
                   SL_TYPE_INT64);
  SL_ASSERT_EQ_INT(map_ok("bit", "bit(64)", 64, 0, SL_CDC_CONV_BIT).id,
                   SL_TYPE_INT64);
  SL_ASSERT_EQ_INT(map_ok("time", "time(3)", 0, 0, SL_CDC_CONV_TIME).id,
                   SL_TYPE_INT64);
  sl_type_t d = map_ok("decimal", "decimal(18,4)", 18, 4,
                       SL_CDC_CONV_DECIMAL);
  SL_ASSERT_EQ_INT(d.id, SL_TYPE_DECIMAL);
  SL_ASSERT_EQ_INT(d.precision, 18);
  SL_ASSERT_EQ_INT(d.scale, 4);
  SL_ASSERT_EQ_INT(
      map_ok("decimal", "decimal(30,2)", 30, 2, SL_CDC_CONV_STRING).id,
      SL_TYPE_STRING);
  SL_ASSERT_EQ_INT(map_ok("json", "longtext", 0, 0, SL_CDC_CONV_STRING).id,
                   SL_TYPE_STRING);
  SL_ASSERT_EQ_INT(map_ok("point", "point", 0, 0, SL_CDC_CONV_BYTES).id,
                   SL_TYPE_BYTES);
  SL_ASSERT_EQ_INT(map_ok("date", "date", 0, 0, SL_CDC_CONV_DATE).id,
                   SL_TYPE_TIMESTAMP);
  map_fails("uuid", "uuid", 0, 0,
            "column `c` of `db`.`t`: type uuid is not supported by "
            "mariadb-cdc (the binlog carries it in the server's internal "
            "binary form, which sluice does not map yet");
  map_fails("inet6", "inet6", 0, 0, "type inet6 is not supported");
  map_fails("vector", "vector(3)", 0, 0,
            "type vector(3) is not supported by mariadb-cdc (no sluice type "
            "holds its values");
}

/* ------------------------------------------------------------------ */
/* The chunk list codec. */

static sl__cdc_kv_t *ints(int64_t a, int64_t b, uint32_t n) {
  sl__cdc_kv_t *v = sl_calloc(n, sizeof(*v));
  v[0].i = a;
  if (n > 1) v[1].i = b;
  return v;
}

static sl__cdc_kv_t *strs(const char *a) {
  sl__cdc_kv_t *v = sl_calloc(1, sizeof(*v));
  v->len = (uint32_t)strlen(a);
  v->p = (uint8_t *)sl_strdup(a);
  return v;
}

/* A list over (a INT, b INT) with bounds 10/1, 20/5, 20/9. */
static sl__cdc_chunks_t *make_int_list(void) {
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  cl->db = sl_strdup("shop");
  cl->table = sl_strdup("orders");
  cl->n_key = 2;
  cl->key_names = sl_calloc(2, sizeof(char *));
  cl->key_names[0] = sl_strdup("a");
  cl->key_names[1] = sl_strdup("b");
  cl->key_kind = sl_calloc(2, 1);
  cl->key_kind[0] = cl->key_kind[1] = SL_CDC_KEY_INT;
  cl->n = 4;
  cl->chunks = sl_calloc(4, sizeof(*cl->chunks));
  int64_t bounds[3][2] = {{10, 1}, {20, 5}, {20, 9}};
  for (uint32_t i = 0; i < 4; i++) {
    cl->chunks[i].id = i;
    if (i > 0)
      cl->chunks[i].low = ints(bounds[i - 1][0], bounds[i - 1][1], 2);
    if (i < 3) cl->chunks[i].high = ints(bounds[i][0], bounds[i][1], 2);
  }
  return cl;
}

static sl__cdc_chunks_t *make_str_list(void) {
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  cl->db = sl_strdup("db");
  cl->table = sl_strdup("t");
  cl->n_key = 1;
  cl->key_names = sl_calloc(1, sizeof(char *));
  cl->key_names[0] = sl_strdup("name");
  cl->key_kind = sl_calloc(1, 1);
  cl->key_kind[0] = SL_CDC_KEY_STR;
  cl->n = 2;
  cl->chunks = sl_calloc(2, sizeof(*cl->chunks));
  cl->chunks[0].id = 0;
  cl->chunks[0].high = strs("k'\\x");
  cl->chunks[1].id = 1;
  cl->chunks[1].low = strs("k'\\x");
  return cl;
}

static void where_is(const sl__cdc_chunks_t *cl, uint32_t i,
                     const char *want) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__cdc_chunk_where(cl, &cl->chunks[i], &b));
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  SL_ASSERT_EQ_STR((const char *)b.data, want);
  sl_bytes_close(&b);
}

SL_TEST(chunks_roundtrip_and_where) {
  sl__cdc_chunks_t *lists[2] = {make_int_list(), make_str_list()};
  for (int l = 0; l < 2; l++) {
    sl_bytes_t b, b2;
    sl_bytes_init(&b);
    sl_bytes_init(&b2);
    SL_ASSERT_OK(sl__cdc_chunks_encode(lists[l], &b));
    sl__cdc_chunks_t *back = NULL;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__cdc_chunks_decode(b.data, b.len, &back, &err), err);
    SL_ASSERT_EQ_STR(back->db, lists[l]->db);
    SL_ASSERT_EQ_STR(back->table, lists[l]->table);
    SL_ASSERT_EQ_INT(back->n, lists[l]->n);
    SL_ASSERT_EQ_INT(back->n_key, lists[l]->n_key);
    SL_ASSERT_OK(sl__cdc_chunks_encode(back, &b2));
    SL_ASSERT_EQ_INT(b2.len, b.len);
    SL_ASSERT_TRUE(memcmp(b.data, b2.data, b.len) == 0);
    /* The decoded list writes the same WHERE conditions. */
    for (uint32_t i = 0; i < back->n; i++) {
      sl_bytes_t w1, w2;
      sl_bytes_init(&w1);
      sl_bytes_init(&w2);
      SL_ASSERT_OK(sl__cdc_chunk_where(lists[l], &lists[l]->chunks[i], &w1));
      SL_ASSERT_OK(sl__cdc_chunk_where(back, &back->chunks[i], &w2));
      SL_ASSERT_EQ_INT(w1.len, w2.len);
      SL_ASSERT_TRUE(memcmp(w1.data, w2.data, w1.len) == 0);
      sl_bytes_close(&w1);
      sl_bytes_close(&w2);
    }
    sl__cdc_chunks_free(back);
    sl_bytes_close(&b);
    sl_bytes_close(&b2);
  }
  where_is(lists[0], 0, "(`a` <= 10 AND (`a`, `b`) < (10, 1))");
  where_is(lists[0], 1,
           "(`a` >= 10 AND (`a`, `b`) >= (10, 1)) AND "
           "(`a` <= 20 AND (`a`, `b`) < (20, 5))");
  where_is(lists[0], 3, "(`a` >= 20 AND (`a`, `b`) >= (20, 9))");
  where_is(lists[1], 0, "(`name` < _utf8mb4 X'6b275c78' OR `name` IS NULL)");
  where_is(lists[1], 1, "`name` >= _utf8mb4 X'6b275c78'");
  sl__cdc_chunks_free(lists[0]);
  sl__cdc_chunks_free(lists[1]);
}

static void decode_fails(const uint8_t *p, size_t len, const char *want) {
  sl__cdc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  int rc = sl__cdc_chunks_decode(p, len, &cl, &err);
  if (rc != SL_ECORRUPT)
    SL_TEST_FAIL("decode of %zu bytes gave %d, want SL_ECORRUPT", len, rc);
  SL_ASSERT_TRUE(cl == NULL);
  SL_ASSERT_TRUE(err != NULL);
  const char *m = sl_error_message(err);
  SL_ASSERT_TRUE(strncmp(m, "mariadb-cdc chunk list: ", 24) == 0);
  if (want && strstr(m, want) == NULL)
    SL_TEST_FAIL("message '%s' lacks '%s'", m, want);
  sl_error_destroy(err);
}

SL_TEST(chunks_corrupt_refused) {
  sl__cdc_chunks_t *cl = make_int_list();
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__cdc_chunks_encode(cl, &b));
  /* Every strict prefix. */
  for (size_t n = 0; n < b.len; n++) decode_fails(b.data, n, NULL);
  /* Trailing bytes. */
  uint8_t *x = sl_malloc(b.len + 1);
  memcpy(x, b.data, b.len);
  x[b.len] = 0;
  decode_fails(x, b.len + 1, "trailing bytes at byte");
  /* Magic and version. */
  memcpy(x, b.data, b.len);
  x[0] = 'X';
  decode_fails(x, b.len, "no SLCK magic");
  memcpy(x, b.data, b.len);
  x[4] = 2;
  decode_fails(x, b.len, "an unknown version (this sluice reads version 1)");
  /* Layout: magic 4, ver 1, db 4+4, table 4+6, n_key 4, key a 1+4+1,
   * key b 1+4+1, n 4, chunk 0 at 44: id 4, flags 1, high 16. */
  size_t kind0 = 4 + 1 + 8 + 10 + 4;
  memcpy(x, b.data, b.len);
  x[kind0] = 9;
  decode_fails(x, b.len, "an unknown key kind at byte 28");
  size_t chunk0 = kind0 + 6 + 6 + 4;
  memcpy(x, b.data, b.len);
  x[chunk0] = 1; /* id 1 */
  decode_fails(x, b.len, "chunk ids not running 0, 1, ...");
  memcpy(x, b.data, b.len);
  x[chunk0 + 4] = 3; /* a low bound on the first chunk */
  decode_fails(x, b.len, "chunk bounds that do not chain");
  /* Chunk 1's low bound differs from chunk 0's high bound. */
  size_t chunk1 = chunk0 + 5 + 16;
  memcpy(x, b.data, b.len);
  x[chunk1 + 5] ^= 1;
  decode_fails(x, b.len, "is not the previous chunk's high bound");
  /* Chunk 1's high bound (20, 5) lowered to (10, 0): not above its low. */
  memcpy(x, b.data, b.len);
  memset(x + chunk1 + 5 + 16, 0, 16);
  x[chunk1 + 5 + 16] = 10;
  decode_fails(x, b.len, "high bound is not above its low bound");
  /* A huge chunk count. */
  memcpy(x, b.data, b.len);
  memset(x + chunk0 - 4, 0xff, 4);
  decode_fails(x, b.len, "a chunk count that is 0 or larger");
  /* A key count of 0. */
  memcpy(x, b.data, b.len);
  memset(x + kind0 - 4, 0, 4);
  decode_fails(x, b.len, "a key count outside 1..64");
  /* A string length beyond the bytes. */
  memcpy(x, b.data, b.len);
  x[5 + 3] = 0x7f;
  decode_fails(x, b.len, "a bad database name at byte 9");
  sl_free(x);
  sl_bytes_close(&b);
  sl__cdc_chunks_free(cl);

  /* A text bound with a quote (it would reach SQL). */
  cl = make_str_list();
  cl->key_kind[0] = SL_CDC_KEY_TEXT;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__cdc_chunks_encode(cl, &b));
  decode_fails(b.data, b.len, "a text bound with characters other than");
  sl_bytes_close(&b);
  sl__cdc_chunks_free(cl);
}

/* ------------------------------------------------------------------ */
/* Positions. */

static int pos_cmp(const char *g1, const char *f1, uint64_t o1,
                   const char *g2, const char *f2, uint64_t o2) {
  sl__cdc_pos_t a = {0}, b = {0};
  snprintf(a.gtid, sizeof(a.gtid), "%s", g1);
  snprintf(a.file, sizeof(a.file), "%s", f1);
  a.offset = o1;
  snprintf(b.gtid, sizeof(b.gtid), "%s", g2);
  snprintf(b.file, sizeof(b.file), "%s", f2);
  b.offset = o2;
  int c = 99;
  sl_error_t *err = NULL;
  int rc = sl__cdc_pos_cmp(&a, &b, &c, &err);
  if (rc != SL_OK) {
    sl_error_destroy(err);
    return 100;
  }
  return c;
}

SL_TEST(positions_order) {
  SL_ASSERT_EQ_INT(pos_cmp("0-1-5", "b.000001", 9, "0-1-7", "b.000001", 4),
                   -1);
  SL_ASSERT_EQ_INT(pos_cmp("0-1-7", "", 0, "0-2-7", "", 0), 0);
  SL_ASSERT_EQ_INT(pos_cmp("0-1-9,1-1-3", "", 0, "0-1-9", "", 0), 1);
  SL_ASSERT_EQ_INT(pos_cmp("", "", 0, "0-1-1", "", 0), -1);
  /* Ahead in one domain, behind in the other: not ordered. */
  SL_ASSERT_EQ_INT(pos_cmp("0-1-9,1-1-3", "", 0, "0-1-8,1-1-4", "", 0), 100);
  SL_ASSERT_EQ_INT(pos_cmp("0-1", "", 0, "0-1-8", "", 0), 100);
  SL_ASSERT_EQ_INT(pos_cmp("0-1-1,0-1-2", "", 0, "0-1-8", "", 0), 100);
  /* No GTIDs: file number, then offset. */
  SL_ASSERT_EQ_INT(pos_cmp("", "b.000002", 4, "", "b.000010", 3), -1);
  SL_ASSERT_EQ_INT(pos_cmp("", "b.000002", 400, "", "b.000002", 3), 1);
  SL_ASSERT_EQ_INT(pos_cmp("", "b.000002", 4, "", "b.000002", 4), 0);
}

/* ------------------------------------------------------------------ */
/* The backfill merge. */

static sl_schema_t *kv_schema(void) {
  sl_field_t f[3] = {{"id", {SL_TYPE_INT64, 0, 0, false}},
                     {"c", {SL_TYPE_INT64, 0, 0, true}},
                     {"v", {SL_TYPE_STRING, 0, 0, true}}};
  sl_schema_t *s = NULL;
  SL_ASSERT_OK(sl_schema_create(f, 3, &s, NULL));
  return s;
}

typedef struct rowbuf_s {
  uint8_t data[256];
  sl_row_t row;
} rowbuf_t;

static const sl_row_t *mk(rowbuf_t *rb, const sl_schema_t *s, int64_t id,
                          int64_t c, const char *v) {
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_row_builder_set_i64(&b, 0, id);
  sl_row_builder_set_i64(&b, 1, c);
  SL_ASSERT_OK(sl_row_builder_set_str(&b, 2, v, (uint32_t)strlen(v)));
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_TRUE(r.len <= sizeof(rb->data));
  memcpy(rb->data, r.data, r.len);
  sl_row_view(&rb->row, s, rb->data, r.len);
  sl_row_builder_close(&b);
  return &rb->row;
}

/* The chunk is c in [100, 200). */
static bool c_in_chunk(void *ctx, const sl_row_t *row) {
  (void)ctx;
  int64_t c = sl_row_get_i64(row, 1);
  return c >= 100 && c < 200;
}

static void expect_rows(const sl__cdc_rows_t *r, const char *want) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  for (uint32_t i = 0; i < r->n; i++) {
    sl_row_t row;
    sl__cdc_rows_get(r, i, &row);
    SL_ASSERT_EQ_INT(sl_row_kind(&row), SL_ROW_INSERT);
    sl_slice_t v = sl_row_get_str(&row, 2);
    SL_ASSERT_OK(sl_bytes_printf(&b, "%s%" PRId64 "/%" PRId64 "/%.*s",
                                 i ? " " : "", sl_row_get_i64(&row, 0),
                                 sl_row_get_i64(&row, 1), (int)v.len,
                                 (const char *)v.ptr));
  }
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  SL_ASSERT_EQ_STR((const char *)b.data, want);
  sl_bytes_close(&b);
}

SL_TEST(merge_by_primary_key) {
  sl_schema_t *s = kv_schema();
  sl__cdc_rows_t rows;
  sl__cdc_rows_init(&rows, s);
  rowbuf_t a, b2, c2;
  SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&a, s, 1, 110, "one")));
  SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&a, s, 2, 120, "two")));
  SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&a, s, 3, 130, "three")));
  SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&a, s, 4, 140, "four")));
  rowbuf_t r[16];
  sl__cdc_change_t ch[] = {
      /* an update in place */
      {SL_ROW_UPDATE_AFTER, mk(&r[0], s, 1, 110, "one"),
       mk(&r[1], s, 1, 110, "uno")},
      /* a delete */
      {SL_ROW_DELETE, mk(&r[2], s, 2, 120, "two"), NULL},
      /* an insert in the chunk, one outside it */
      {SL_ROW_INSERT, NULL, mk(&r[3], s, 5, 150, "five")},
      {SL_ROW_INSERT, NULL, mk(&r[4], s, 6, 250, "six")},
      /* a primary key change: 3 -> 7 */
      {SL_ROW_UPDATE_AFTER, mk(&r[5], s, 3, 130, "three"),
       mk(&r[6], s, 7, 130, "three")},
      /* the chunk key moves out of the chunk (4), and one moves in (8) */
      {SL_ROW_UPDATE_AFTER, mk(&r[7], s, 4, 140, "four"),
       mk(&r[8], s, 4, 300, "four")},
      {SL_ROW_UPDATE_AFTER, mk(&r[9], s, 8, 50, "eight"),
       mk(&r[10], s, 8, 160, "eight")},
      /* deleted, then inserted again */
      {SL_ROW_DELETE, mk(&r[11], s, 5, 150, "five"), NULL},
      {SL_ROW_INSERT, NULL, mk(&r[12], s, 5, 151, "cinq")},
  };
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_merge(&rows, (const uint32_t[]){0}, 1, ch,
                               sizeof(ch) / sizeof(ch[0]), c_in_chunk, NULL,
                               &err),
                 err);
  expect_rows(&rows, "1/110/uno 5/151/cinq 7/130/three 8/160/eight");

  /* A change without its before image is refused with a message. */
  sl__cdc_change_t badc = {SL_ROW_DELETE, NULL, NULL};
  SL_ASSERT_EQ_INT(
      sl__cdc_merge(&rows, (const uint32_t[]){0}, 1, &badc, 1, NULL, NULL,
                    &err),
      SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb-cdc: change 0 (-D) has no before image");
  sl_error_destroy(err);
  err = NULL;
  /* Two rows with one key. */
  SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&b2, s, 1, 111, "dup")));
  SL_ASSERT_EQ_INT(sl__cdc_merge(&rows, (const uint32_t[]){0}, 1, NULL, 0,
                                 NULL, NULL, &err),
                   SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "same primary key") != NULL);
  sl_error_destroy(err);
  (void)c2;
  sl__cdc_rows_close(&rows);
  sl_schema_unref(s);
}

/* ------------------------------------------------------------------ */
/* Allocation failures: every allocation of the decoder and of the merge
 * fails once in turn; the call returns SL_ENOMEM or succeeds, never
 * crashes, and leaks nothing (ASan's leak check). */

SL_TEST(alloc_failures) {
  if (!sl_inject_is_enabled()) return;
  sl__cdc_chunks_t *lists[2] = {make_int_list(), make_str_list()};
  for (int l = 0; l < 2; l++) {
    sl_bytes_t b;
    sl_bytes_init(&b);
    SL_ASSERT_OK(sl__cdc_chunks_encode(lists[l], &b));
    uint32_t n_fail = 0;
    for (uint64_t k = 1;; k++) {
      sl__cdc_chunks_t *cl = NULL;
      sl_error_t *err = NULL;
      sl_inject_alloc_fail(k, false);
      int rc = sl__cdc_chunks_decode(b.data, b.len, &cl, &err);
      uint64_t failed = sl_inject_alloc_failed();
      sl_inject_alloc_fail(0, false);
      if (failed == 0) {
        SL_ASSERT_OK_E(rc, err);
        sl__cdc_chunks_free(cl);
        break;
      }
      n_fail++;
      SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
      SL_ASSERT_TRUE(cl == NULL);
      sl_error_destroy(err);
    }
    SL_ASSERT_TRUE(n_fail >= 6);
    sl_bytes_close(&b);
    sl__cdc_chunks_free(lists[l]);
  }

  sl_schema_t *s = kv_schema();
  rowbuf_t r[4];
  for (uint64_t k = 1;; k++) {
    sl__cdc_rows_t rows;
    sl__cdc_rows_init(&rows, s);
    SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&r[0], s, 1, 110, "one")));
    SL_ASSERT_OK(sl__cdc_rows_add(&rows, mk(&r[1], s, 2, 120, "two")));
    sl__cdc_change_t ch[] = {
        {SL_ROW_INSERT, NULL, mk(&r[2], s, 3, 130, "three")},
        {SL_ROW_DELETE, mk(&r[3], s, 1, 110, "one"), NULL},
    };
    sl_error_t *err = NULL;
    sl_inject_alloc_fail(k, false);
    int rc = sl__cdc_merge(&rows, (const uint32_t[]){0}, 1, ch, 2, NULL,
                           NULL, &err);
    uint64_t failed = sl_inject_alloc_failed();
    sl_inject_alloc_fail(0, false);
    sl_error_destroy(err);
    sl__cdc_rows_close(&rows);
    if (failed == 0) {
      SL_ASSERT_OK(rc);
      break;
    }
    SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
  }
  sl_schema_unref(s);
}
