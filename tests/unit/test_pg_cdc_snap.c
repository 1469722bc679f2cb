/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres-cdc source's snapshot pieces that need no server
 * (src/connectors/postgres/pg_cdc_snap.c): the snapshot text and its codec,
 * visibility of a 32-bit xid (epoch widening near 2^32), the chunk list
 * codec (round trip, every truncation and corruption refused with a
 * message and an offset) and chunk membership against a linear scan.
 * The server-side half is tests/integration/test_pg_cdc_snap.c.
 */
#include "connectors/postgres/pg_cdc_int.h"
#include "core/inject.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Snapshots. */

static void snap_ok(const char *text, uint64_t xmin, uint64_t xmax,
                    uint32_t n, const uint64_t *xip) {
  sl__pgc_snap_t s;
  SL_ASSERT_OK(sl__pgc_snap_parse(text, &s));
  SL_ASSERT_TRUE(s.xmin == xmin && s.xmax == xmax);
  SL_ASSERT_EQ_INT(s.n_xip, n);
  for (uint32_t i = 0; i < n; i++) SL_ASSERT_TRUE(s.xip[i] == xip[i]);
  sl__pgc_snap_free(&s);
}

SL_TEST(snap_parse) {
  snap_ok("10:10:", 10, 10, 0, NULL);
  snap_ok("10:20:", 10, 20, 0, NULL);
  static const uint64_t a[] = {12, 15};
  snap_ok("10:20:12,15", 10, 20, 2, a);
  snap_ok("10:20:15,12", 10, 20, 2, a); /* sorted */
  snap_ok("10:20:15,12,15", 10, 20, 2, a); /* without duplicates */
  static const uint64_t big[] = {UINT64_C(4294967290), UINT64_C(4294967300)};
  snap_ok("4294967280:4294967305:4294967300,4294967290", UINT64_C(4294967280),
          UINT64_C(4294967305), 2, big);
  static const char *const bad[] = {
      "", "10", "10:", "10:20", "a:20:", "10:b:", "20:10:", "10:20:5",
      "10:20:20", "10:20:12,", "10:20:,12", "10:20:12,,13", "10:20:12 ",
      " 10:20:", "10:20:12x", "-1:20:", "18446744073709551616:1:",
      "10:20:12;13"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    sl__pgc_snap_t s;
    if (sl__pgc_snap_parse(bad[i], &s) != SL_EPARSE)
      SL_TEST_FAIL("'%s' parsed", bad[i]);
  }
}

static sl__pgc_snap_t mk_snap(uint64_t xmin, uint64_t xmax, uint32_t n,
                              const uint64_t *xip) {
  sl__pgc_snap_t s = {xmin, xmax, n, NULL};
  if (n) {
    s.xip = sl_calloc(n, sizeof(uint64_t));
    memcpy(s.xip, xip, n * sizeof(uint64_t));
  }
  return s;
}

SL_TEST(snap_visible) {
  static const uint64_t x1[] = {150};
  sl__pgc_snap_t s = mk_snap(100, 200, 1, x1);
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 3));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 99));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 100));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 150));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 151));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 199));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 200));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 250));
  /* Epoch 0, an xid from far "above": nearest xmax would be epoch -1,
   * which does not exist: it is in the future. */
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 0xFFFFFF00u));
  sl__pgc_snap_free(&s);

  /* Across the wrap of the 32-bit counter: xmin in epoch 0, xmax in
   * epoch 1. */
  const uint64_t E = UINT64_C(1) << 32;
  static uint64_t x2[2];
  x2[0] = E - 3;
  x2[1] = E + 2;
  s = mk_snap(E - 10, E + 5, 2, x2);
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0xFFFFFFF0u));  /* E-16 < xmin */
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0xFFFFFFF6u));  /* E-10 = xmin */
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 0xFFFFFFFDu)); /* in xip */
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0xFFFFFFFEu));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0xFFFFFFFFu));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0u));           /* E */
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 1u));           /* E+1 */
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 2u));          /* in xip */
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 4u));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 5u));          /* xmax */
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 6u));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 0x7FFFFFFFu)); /* E + 2^31 - 1 */
  /* Half the counter back from xmax is the older epoch: long committed. */
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0x80000010u));
  sl__pgc_snap_free(&s);

  /* Both in epoch 1, far from the wrap: xids of epoch 0 read as old. */
  s = mk_snap(E + 1000, E + 2000, 0, NULL);
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 999u));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 1999u));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&s, 2000u));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&s, 0xFFFFFF00u)); /* E - 256 */
  sl__pgc_snap_free(&s);
}

static void snap_corrupt(const uint8_t *p, size_t n, const char *want) {
  uint8_t *cut = sl_malloc(n ? n : 1);
  memcpy(cut, p, n);
  sl__pgc_snap_t s;
  memset(&s, 0x5a, sizeof(s));
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__pgc_snap_decode(cut, n, &s, NULL, &err), SL_ECORRUPT);
  SL_ASSERT_TRUE(err != NULL);
  const char *m = sl_error_message(err);
  if (strstr(m, "postgres-cdc snapshot: ") != m || strstr(m, " at byte ") == NULL ||
      (want && strstr(m, want) == NULL))
    SL_TEST_FAIL("message '%s' (want '%s')", m, want ? want : "");
  sl_error_destroy(err);
  sl_free(cut);
}

SL_TEST(snap_codec) {
  static const uint64_t x[] = {12, 15, 19};
  sl__pgc_snap_t s = mk_snap(10, 20, 3, x);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__pgc_snap_encode(&s, &b));
  SL_ASSERT_EQ_INT(b.len, 8 + 8 + 4 + 3 * 8);
  SL_ASSERT_OK(sl_bytes_append(&b, "tail", 4)); /* the caller's next field */
  sl__pgc_snap_t d;
  size_t used = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_snap_decode(b.data, b.len, &d, &used, &err), err);
  SL_ASSERT_EQ_INT(used, b.len - 4);
  SL_ASSERT_TRUE(d.xmin == 10 && d.xmax == 20 && d.n_xip == 3);
  for (int i = 0; i < 3; i++) SL_ASSERT_TRUE(d.xip[i] == x[i]);
  sl__pgc_snap_free(&d);
  for (size_t k = 0; k < used; k++) snap_corrupt(b.data, k, NULL);

  /* Inconsistent snapshots. */
  uint8_t *p = b.data;
  sl_bytes_t c;
  sl_bytes_init(&c);
  SL_ASSERT_OK(sl_bytes_append(&c, p, used));
  c.data[0] = 30; /* xmin 30 > xmax 20 */
  snap_corrupt(c.data, c.len, "xmin above xmax");
  memcpy(c.data, p, used);
  c.data[20] = 25; /* xip 25 >= xmax */
  snap_corrupt(c.data, c.len, "outside [xmin, xmax)");
  memcpy(c.data, p, used);
  c.data[20] = 5; /* xip 5 < xmin */
  snap_corrupt(c.data, c.len, "outside [xmin, xmax)");
  memcpy(c.data, p, used);
  c.data[28] = 12; /* 12, 12: not ascending */
  snap_corrupt(c.data, c.len, "not ascending");
  memcpy(c.data, p, used);
  c.data[16] = 0xff; /* count past the bytes */
  snap_corrupt(c.data, c.len, "xip count");
  sl_bytes_close(&c);

  /* No xip. */
  sl__pgc_snap_t e = mk_snap(7, 7, 0, NULL);
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl__pgc_snap_encode(&e, &b));
  SL_ASSERT_OK_E(sl__pgc_snap_decode(b.data, b.len, &d, &used, &err), err);
  SL_ASSERT_TRUE(d.xmin == 7 && d.xmax == 7 && d.n_xip == 0 && used == 20);
  sl__pgc_snap_free(&d);
  sl_bytes_close(&b);
  sl__pgc_snap_free(&s);
}

/* ------------------------------------------------------------------ */
/* A table without a server. */

typedef struct col_spec_s {
  const char *name;
  uint32_t oid;
} col_spec_t;

/* A table of the given columns; pk lists column indexes. */
static sl__pgc_table_t *mk_table(const col_spec_t *cols, uint32_t n,
                                 const uint32_t *pk, uint32_t n_pk) {
  sl__pgc_table_t *t = sl_calloc(1, sizeof(*t));
  t->schema = sl_strdup("public");
  t->name = sl_strdup("t");
  t->oid = 16384;
  t->replident = 'f';
  t->rel.oid = 16384;
  t->rel.nspname = sl_strdup("public");
  t->rel.relname = sl_strdup("t");
  t->rel.replident = 'f';
  t->rel.n_cols = (uint16_t)n;
  t->rel.cols = sl_calloc(n, sizeof(*t->rel.cols));
  t->n_cols = n;
  sl_field_t f[8];
  for (uint32_t i = 0; i < n; i++) {
    t->rel.cols[i].name = sl_strdup(cols[i].name);
    t->rel.cols[i].type_oid = cols[i].oid;
    t->rel.cols[i].type_mod = -1;
    SL_ASSERT_OK(sl__pgo_column_type(&t->rel, (uint16_t)i, &f[i].type, NULL));
    f[i].name = cols[i].name;
  }
  SL_ASSERT_OK(sl_schema_create(f, n, &t->schema_, NULL));
  t->n_pk = n_pk;
  t->pk = sl_calloc(n_pk, sizeof(uint32_t));
  t->key_kind = sl_calloc(n_pk, 1);
  for (uint32_t k = 0; k < n_pk; k++) {
    t->pk[k] = pk[k];
    t->rel.cols[pk[k]].flags = SL_PGO_COL_KEY;
    uint32_t oid = cols[pk[k]].oid;
    t->key_kind[k] = oid == SL_PG_OID_INT2 || oid == SL_PG_OID_INT4 ||
                             oid == SL_PG_OID_INT8
                         ? SL_PGC_KEY_INT
                         : SL_PGC_KEY_TEXT;
  }
  return t;
}

/* A bound value: an integer, or text when s is not NULL. */
typedef struct bv_s {
  int64_t i;
  const char *s;
} bv_t;

/* A chunk list of t with n_bounds bounds (n_key values each). */
static sl__pgc_chunks_t *mk_chunks(const sl__pgc_table_t *t, const bv_t *bv,
                                   uint32_t n_bounds) {
  sl__pgc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  cl->n_key = t->n_pk;
  cl->key_kind = sl_calloc(t->n_pk, 1);
  memcpy(cl->key_kind, t->key_kind, t->n_pk);
  cl->n = n_bounds + 1;
  cl->chunks = sl_calloc(cl->n, sizeof(*cl->chunks));
  for (uint32_t i = 0; i < cl->n; i++) {
    cl->chunks[i].id = i;
    for (int side = 0; side < 2; side++) {
      uint32_t bi = side == 0 ? i - 1 : i;
      if ((side == 0 && i == 0) || (side == 1 && i == n_bounds)) continue;
      sl__pgc_kv_t *v = sl_calloc(t->n_pk, sizeof(*v));
      for (uint32_t k = 0; k < t->n_pk; k++) {
        const bv_t *x = &bv[bi * t->n_pk + k];
        if (x->s) {
          v[k].len = (uint32_t)strlen(x->s);
          v[k].p = (uint8_t *)sl_strdup(x->s);
        } else {
          v[k].i = x->i;
        }
      }
      if (side == 0) cl->chunks[i].low = v;
      else cl->chunks[i].high = v;
    }
  }
  return cl;
}

/* A row of t with the key values (others NULL). */
static const sl_row_t *mk_row(sl_row_builder_t *b, const sl__pgc_table_t *t,
                              const bv_t *key) {
  static sl_row_t row;
  sl_row_builder_reset(b, SL_ROW_INSERT);
  for (uint32_t i = 0; i < t->n_cols; i++) sl_row_builder_set_null(b, i);
  for (uint32_t k = 0; k < t->n_pk; k++) {
    if (key[k].s)
      SL_ASSERT_OK(sl_row_builder_set_str(b, t->pk[k], key[k].s,
                                          (uint32_t)strlen(key[k].s)));
    else
      sl_row_builder_set_i64(b, t->pk[k], key[k].i);
  }
  SL_ASSERT_OK(sl_row_builder_finish(b, &row, NULL));
  return &row;
}

static uint32_t find(const sl__pgc_chunks_t *cl, const sl__pgc_table_t *t,
                     sl_row_builder_t *b, const bv_t *key) {
  uint32_t ch = UINT32_MAX;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_chunk_find(cl, t, mk_row(b, t, key), &ch, &err), err);
  return ch;
}

/* ------------------------------------------------------------------ */
/* Chunk membership. */

SL_TEST(chunk_find_int) {
  static const col_spec_t cols[] = {{"id", SL_PG_OID_INT4},
                                    {"v", SL_PG_OID_TEXT}};
  static const uint32_t pk[] = {0};
  sl__pgc_table_t *t = mk_table(cols, 2, pk, 1);
  static const bv_t bounds[] = {{10, NULL}, {20, NULL}, {30, NULL}};
  sl__pgc_chunks_t *cl = mk_chunks(t, bounds, 3);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, t->schema_));
  struct {
    int64_t k;
    uint32_t want;
  } cases[] = {{INT32_MIN, 0}, {-5, 0}, {9, 0},  {10, 1},       {19, 1},
               {20, 2},        {29, 2}, {30, 3}, {INT32_MAX, 3}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    bv_t key = {cases[i].k, NULL};
    SL_ASSERT_EQ_INT(find(cl, t, &b, &key), cases[i].want);
  }
  /* One unbounded chunk takes everything. */
  sl__pgc_chunks_t *one = mk_chunks(t, NULL, 0);
  bv_t key = {123, NULL};
  SL_ASSERT_EQ_INT(find(one, t, &b, &key), 0);
  sl__pgc_chunks_free(one);

  /* A NULL key is refused, and so is a list of another key. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_row_builder_set_null(&b, 0);
  sl_row_builder_set_null(&b, 1);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
  uint32_t ch;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__pgc_chunk_find(cl, t, &row, &ch, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres-cdc: table public.t: a row whose primary-key "
                   "column \"id\" is NULL");
  sl_error_destroy(err);
  err = NULL;
  cl->key_kind[0] = SL_PGC_KEY_TEXT;
  key.i = 5;
  SL_ASSERT_EQ_INT(sl__pgc_chunk_find(cl, t, mk_row(&b, t, &key), &ch, &err),
                   SL_EINVAL);
  SL_ASSERT_TRUE(err != NULL);
  sl_error_destroy(err);
  cl->key_kind[0] = SL_PGC_KEY_INT;
  sl_row_builder_close(&b);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
}

SL_TEST(chunk_find_text) {
  static const col_spec_t cols[] = {{"v", SL_PG_OID_INT8},
                                    {"k", SL_PG_OID_VARCHAR}};
  static const uint32_t pk[] = {1};
  sl__pgc_table_t *t = mk_table(cols, 2, pk, 1);
  /* Byte order: "B" < "a" < "ab" < "abc" < "z" < "é" (c3 a9). */
  static const bv_t bounds[] = {{0, "a"}, {0, "abc"}, {0, "\xc3\xa9"}};
  sl__pgc_chunks_t *cl = mk_chunks(t, bounds, 3);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, t->schema_));
  struct {
    const char *k;
    uint32_t want;
  } cases[] = {{"", 0},          {"B", 0},         {"Zebra", 0},
               {"a", 1},         {"ab", 1},        {"abb", 1},
               {"abc", 2},       {"abd", 2},       {"z", 2},
               {"zzz", 2},       {"\xc3\xa9", 3},  {"\xc3\xa9t\xc3\xa9", 3},
               {"\xc3\xa8", 2},  {"\xf0\x9f\x98\x80", 3}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    bv_t key = {0, cases[i].k};
    if (find(cl, t, &b, &key) != cases[i].want)
      SL_TEST_FAIL("'%s' not in chunk %u", cases[i].k, cases[i].want);
  }
  sl_row_builder_close(&b);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
}

SL_TEST(chunk_find_composite) {
  static const col_spec_t cols[] = {{"a", SL_PG_OID_INT8},
                                    {"x", SL_PG_OID_BOOL},
                                    {"b", SL_PG_OID_TEXT}};
  static const uint32_t pk[] = {0, 2};
  sl__pgc_table_t *t = mk_table(cols, 3, pk, 2);
  static const bv_t bounds[] = {{1, NULL}, {0, "b"}, {2, NULL}, {0, "a"},
                                {2, NULL}, {0, "ab"}};
  sl__pgc_chunks_t *cl = mk_chunks(t, bounds, 3);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, t->schema_));
  struct {
    int64_t a;
    const char *b;
    uint32_t want;
  } cases[] = {{0, "zzz", 0}, {1, "a", 0},  {1, "b", 1},   {1, "c", 1},
               {2, "", 1},    {2, "a", 2},  {2, "aa", 2},  {2, "ab", 3},
               {2, "b", 3},   {3, "", 3},   {-9, "b", 0},  {1, "ba", 1}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    bv_t key[2] = {{cases[i].a, NULL}, {0, cases[i].b}};
    if (find(cl, t, &b, key) != cases[i].want)
      SL_TEST_FAIL("(%lld, '%s') not in chunk %u", (long long)cases[i].a,
                   cases[i].b, cases[i].want);
  }
  sl_row_builder_close(&b);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
}

/* Random integer bounds and keys: the binary search agrees with a scan of
 * every chunk's [low, high). */
SL_TEST(chunk_find_scan) {
  static const col_spec_t cols[] = {{"a", SL_PG_OID_INT2},
                                    {"b", SL_PG_OID_INT4}};
  static const uint32_t pk[] = {0, 1};
  sl__pgc_table_t *t = mk_table(cols, 2, pk, 2);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, t->schema_));
  uint64_t seed = 0x9e3779b97f4a7c15u;
  for (int round = 0; round < 200; round++) {
    uint32_t nb = (uint32_t)(round % 9);
    bv_t bv[16];
    /* Increasing tuples. */
    int64_t a = -3, bb = 0;
    for (uint32_t i = 0; i < nb; i++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      if ((seed >> 33) % 2) {
        a += (int64_t)((seed >> 40) % 3) + 1;
        bb = (int64_t)((seed >> 20) % 5) - 2;
      } else {
        bb += (int64_t)((seed >> 20) % 3) + 1;
      }
      bv[2 * i] = (bv_t){a, NULL};
      bv[2 * i + 1] = (bv_t){bb, NULL};
    }
    sl__pgc_chunks_t *cl = mk_chunks(t, bv, nb);
    for (int64_t x = -4; x <= a + 1; x++) {
      for (int64_t y = -3; y <= 20; y++) {
        bv_t key[2] = {{x, NULL}, {y, NULL}};
        uint32_t got = find(cl, t, &b, key);
        uint32_t want = UINT32_MAX;
        for (uint32_t i = 0; i < cl->n; i++) {
          const sl__pgc_kv_t *lo = cl->chunks[i].low, *hi = cl->chunks[i].high;
          bool ge = lo == NULL || x > lo[0].i || (x == lo[0].i && y >= lo[1].i);
          bool lt = hi == NULL || x < hi[0].i || (x == hi[0].i && y < hi[1].i);
          if (ge && lt) {
            SL_ASSERT_EQ_INT(want, UINT32_MAX); /* exactly one */
            want = i;
          }
        }
        SL_ASSERT_EQ_INT(got, want);
      }
    }
    sl__pgc_chunks_free(cl);
  }
  sl_row_builder_close(&b);
  sl__pgc_table_destroy(t);
}

/* ------------------------------------------------------------------ */
/* The chunk list codec. */

static void chunks_corrupt(const uint8_t *p, size_t n, const char *want) {
  uint8_t *cut = sl_malloc(n ? n : 1);
  memcpy(cut, p, n);
  sl__pgc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__pgc_chunks_decode(cut, n, &cl, &err), SL_ECORRUPT);
  SL_ASSERT_TRUE(cl == NULL && err != NULL);
  const char *m = sl_error_message(err);
  if (strstr(m, "postgres-cdc chunk list: ") != m ||
      strstr(m, " at byte ") == NULL || (want && strstr(m, want) == NULL))
    SL_TEST_FAIL("message '%s' (want '%s')", m, want ? want : "");
  sl_error_destroy(err);
  sl_free(cut);
}

static void roundtrip(const sl__pgc_chunks_t *cl, sl_bytes_t *b) {
  sl_bytes_clear(b);
  SL_ASSERT_OK(sl__pgc_chunks_encode(cl, b));
  sl__pgc_chunks_t *d = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_chunks_decode(b->data, b->len, &d, &err), err);
  SL_ASSERT_EQ_INT(d->n, cl->n);
  SL_ASSERT_EQ_INT(d->n_key, cl->n_key);
  sl_bytes_t again;
  sl_bytes_init(&again);
  SL_ASSERT_OK(sl__pgc_chunks_encode(d, &again));
  SL_ASSERT_TRUE(again.len == b->len &&
                 memcmp(again.data, b->data, b->len) == 0);
  for (uint32_t i = 0; i < d->n; i++) {
    SL_ASSERT_EQ_INT(d->chunks[i].id, i);
    SL_ASSERT_TRUE((d->chunks[i].low == NULL) == (i == 0));
    SL_ASSERT_TRUE((d->chunks[i].high == NULL) == (i + 1 == d->n));
  }
  sl_bytes_close(&again);
  sl__pgc_chunks_free(d);
  /* Every proper prefix is refused. */
  for (size_t k = 0; k < b->len; k++) chunks_corrupt(b->data, k, NULL);
}

SL_TEST(chunks_codec) {
  static const col_spec_t cols[] = {{"a", SL_PG_OID_INT8},
                                    {"b", SL_PG_OID_UUID}};
  static const uint32_t pk[] = {0, 1};
  sl__pgc_table_t *t = mk_table(cols, 2, pk, 2);
  static const bv_t bounds[] = {
      {-7, NULL}, {0, "00000000-0000-0000-0000-000000000001"},
      {-7, NULL}, {0, "0a000000-0000-0000-0000-000000000000"},
      {INT64_MAX, NULL}, {0, ""}};
  sl__pgc_chunks_t *cl = mk_chunks(t, bounds, 3);
  sl_bytes_t b;
  sl_bytes_init(&b);
  roundtrip(cl, &b);

  /* Layout: "SLPC" 1 | n_key 2 | kinds 1 2 | n 4 | chunk 0: id, flags 2,
   * high (8 + 4 + 36) | chunk 1: id, flags 3, low, high ... */
  SL_ASSERT_EQ_INT(b.len, 4 + 1 + 4 + 2 + 4 + (5 + 48) + (5 + 96) +
                              (5 + 48 + 8 + 4) + (5 + 12));
  sl_bytes_t c;
  sl_bytes_init(&c);
#define CORRUPT(at, val, want)                                           \
  do {                                                                   \
    sl_bytes_clear(&c);                                                  \
    SL_ASSERT_OK(sl_bytes_append(&c, b.data, b.len));                    \
    c.data[at] = (uint8_t)(val);                                         \
    chunks_corrupt(c.data, c.len, want);                                 \
  } while (0)
  CORRUPT(0, 'X', "no SLPC magic");
  CORRUPT(4, 2, "unknown version");
  CORRUPT(5, 0, "key count outside");
  CORRUPT(5, 33, "key count outside");
  CORRUPT(9, 3, "unknown key kind");
  CORRUPT(11, 0, "chunk count");
  CORRUPT(11, 200, "chunk count");
  CORRUPT(15, 1, "chunk ids not running");
  CORRUPT(19, 3, "do not chain");
  /* Chunk 1's low integer differs from chunk 0's high. */
  CORRUPT(15 + 53 + 5, 0xf0, "previous chunk's high");
  /* A NUL byte inside the text of chunk 0's high bound. */
  CORRUPT(15 + 5 + 8 + 4 + 3, 0, "NUL byte");
  /* Chunk 1's high text above the bytes left. */
  CORRUPT(15 + 53 + 5 + 48 + 8 + 3, 0x7f, "longer than the bytes left");
  /* Trailing bytes. */
  sl_bytes_clear(&c);
  SL_ASSERT_OK(sl_bytes_append(&c, b.data, b.len));
  SL_ASSERT_OK(sl_bytes_append(&c, "x", 1));
  chunks_corrupt(c.data, c.len, "trailing bytes");

  /* Bounds that do not increase: chunk 1 = [(-7, "0a.."), (-7, "0a..")). */
  sl__pgc_chunks_t *eq = mk_chunks(
      t, (const bv_t[]){{-7, NULL}, {0, "0a"}, {-7, NULL}, {0, "0a"}}, 2);
  sl_bytes_clear(&c);
  SL_ASSERT_OK(sl__pgc_chunks_encode(eq, &c));
  chunks_corrupt(c.data, c.len, "not above its low bound");
  sl__pgc_chunks_free(eq);
  /* And decreasing text ("b" then "a", same integer). */
  sl__pgc_chunks_t *dec = mk_chunks(
      t, (const bv_t[]){{1, NULL}, {0, "b"}, {1, NULL}, {0, "a"}}, 2);
  sl_bytes_clear(&c);
  SL_ASSERT_OK(sl__pgc_chunks_encode(dec, &c));
  chunks_corrupt(c.data, c.len, "not above its low bound");
  sl__pgc_chunks_free(dec);

  /* One unbounded chunk; an integer key. */
  sl__pgc_chunks_t *one = mk_chunks(t, NULL, 0);
  roundtrip(one, &b);
  SL_ASSERT_EQ_INT(b.len, 4 + 1 + 4 + 2 + 4 + 5);
  sl__pgc_chunks_free(one);
  static const col_spec_t icols[] = {{"id", SL_PG_OID_INT4}};
  static const uint32_t ipk[] = {0};
  sl__pgc_table_t *ti = mk_table(icols, 1, ipk, 1);
  sl__pgc_chunks_t *ic = mk_chunks(
      ti, (const bv_t[]){{INT64_MIN, NULL}, {0, NULL}, {5, NULL}}, 3);
  roundtrip(ic, &b);
  sl__pgc_chunks_free(ic);
  sl__pgc_table_destroy(ti);

  sl_bytes_close(&c);
  sl_bytes_close(&b);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
}

/* ------------------------------------------------------------------ */
/* Allocation failures: every allocation of the decoders fails once in
 * turn; the call returns SL_ENOMEM or succeeds, never crashes, and leaks
 * nothing (ASan's leak check). */

SL_TEST(alloc_failures) {
  if (!sl_inject_is_enabled()) return;
  static const col_spec_t cols[] = {{"a", SL_PG_OID_INT8},
                                    {"b", SL_PG_OID_TEXT}};
  static const uint32_t pk[] = {0, 1};
  sl__pgc_table_t *t = mk_table(cols, 2, pk, 2);
  sl__pgc_chunks_t *cl = mk_chunks(
      t, (const bv_t[]){{1, NULL}, {0, "b"}, {2, NULL}, {0, "a"}}, 2);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__pgc_chunks_encode(cl, &b));
  uint32_t n_fail = 0;
  for (uint64_t k = 1;; k++) {
    sl__pgc_chunks_t *d = NULL;
    sl_error_t *err = NULL;
    sl_inject_alloc_fail(k, false);
    int rc = sl__pgc_chunks_decode(b.data, b.len, &d, &err);
    uint64_t failed = sl_inject_alloc_failed();
    sl_inject_alloc_fail(0, false);
    if (failed == 0) {
      SL_ASSERT_OK_E(rc, err);
      sl__pgc_chunks_free(d);
      break;
    }
    n_fail++;
    SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
    SL_ASSERT_TRUE(d == NULL);
    sl_error_destroy(err);
  }
  SL_ASSERT_TRUE(n_fail >= 6);

  static const uint64_t x[] = {12, 15};
  sl__pgc_snap_t s = mk_snap(10, 20, 2, x);
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl__pgc_snap_encode(&s, &b));
  sl__pgc_snap_free(&s);
  for (uint64_t k = 1;; k++) {
    sl__pgc_snap_t d;
    sl_error_t *err = NULL;
    sl_inject_alloc_fail(k, false);
    int rc = sl__pgc_snap_decode(b.data, b.len, &d, NULL, &err);
    int rc2 = sl__pgc_snap_parse("10:20:15,12", &s);
    uint64_t failed = sl_inject_alloc_failed();
    sl_inject_alloc_fail(0, false);
    if (rc == SL_OK) sl__pgc_snap_free(&d);
    else SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
    if (rc2 == SL_OK) sl__pgc_snap_free(&s);
    else SL_ASSERT_EQ_INT(rc2, SL_ENOMEM);
    sl_error_destroy(err);
    if (failed == 0) {
      SL_ASSERT_TRUE(rc == SL_OK && rc2 == SL_OK);
      break;
    }
  }
  sl_bytes_close(&b);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
}
