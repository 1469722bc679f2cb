/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDC source's chunk membership checker (cdc_member.c) where it needs
 * no server: binary collations compared in sluice with PAD SPACE and NO
 * PAD semantics, the search over many chunks against a linear scan of
 * sl__cdc_chunk_contains, NULL keys, and the refusals at open.  The
 * server-side collations are tested in tests/integration/
 * test_cdc_mariadb.c (member-*, chunks-*, phases-*).
 */
#include <inttypes.h>

#include "connectors/mariadb/cdc_int.h"
#include "core/inject.h"
#include "sl_test.h"

/* A one-column table `db`.`t` whose key column `k` is of the given kind,
 * with collation coll (strings). */
static sl__cdc_table_t *table_of(uint8_t kind, const char *coll) {
  sl__cdc_table_t *t = sl_calloc(1, sizeof(*t));
  t->db = sl_strdup("db");
  t->name = sl_strdup("t");
  t->n_cols = 1;
  t->cols = sl_calloc(1, sizeof(*t->cols));
  t->cols[0].name = sl_strdup("k");
  bool is_int = kind == SL_CDC_KEY_INT;
  snprintf(t->cols[0].data_type, sizeof(t->cols[0].data_type), "%s",
           is_int ? "bigint" : "varchar");
  t->cols[0].type.id = is_int ? SL_TYPE_INT64 : SL_TYPE_STRING;
  t->cols[0].type.nullable = true;
  t->cols[0].conv = is_int ? SL_CDC_CONV_INT : SL_CDC_CONV_STRING;
  if (coll) {
    snprintf(t->cols[0].collation, sizeof(t->cols[0].collation), "%s", coll);
    snprintf(t->cols[0].charset, sizeof(t->cols[0].charset), "utf8mb4");
  }
  sl_field_t f = {.name = "k", .type = t->cols[0].type};
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_schema_create(&f, 1, &t->schema, &err), err);
  t->n_pk = t->n_key = 1;
  t->pk = sl_calloc(1, sizeof(uint32_t));
  t->key = sl_calloc(1, sizeof(uint32_t));
  t->key_kind = sl_calloc(1, 1);
  t->key_kind[0] = kind;
  return t;
}

/* Chunks of t split at the n bounds (strings: s[i], ints: v[i]). */
static sl__cdc_chunks_t *list_of(const sl__cdc_table_t *t,
                                 const char *const *s, const int64_t *v,
                                 uint32_t n) {
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  cl->db = sl_strdup(t->db);
  cl->table = sl_strdup(t->name);
  cl->n_key = 1;
  cl->key_names = sl_calloc(1, sizeof(char *));
  cl->key_names[0] = sl_strdup("k");
  cl->key_kind = sl_calloc(1, 1);
  cl->key_kind[0] = t->key_kind[0];
  cl->n = n + 1;
  cl->chunks = sl_calloc(n + 1, sizeof(*cl->chunks));
  for (uint32_t i = 0; i <= n; i++) {
    cl->chunks[i].id = i;
    for (int side = 0; side < 2; side++) {
      uint32_t b = side ? i : i - 1; /* high: bound i; low: bound i-1 */
      if ((side && i == n) || (!side && i == 0)) continue;
      sl__cdc_kv_t *kv = sl_calloc(1, sizeof(*kv));
      if (s) {
        kv->len = (uint32_t)strlen(s[b]);
        kv->p = sl_malloc(kv->len + 1);
        memcpy(kv->p, s[b], kv->len + 1);
      } else {
        kv->i = v[b];
      }
      if (side) cl->chunks[i].high = kv;
      else cl->chunks[i].low = kv;
    }
  }
  return cl;
}

typedef struct rowbuf_s {
  uint8_t data[256];
  sl_row_t row;
} rowbuf_t;

static const sl_row_t *str_row(rowbuf_t *rb, const sl_schema_t *s,
                               const char *v) {
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  if (v == NULL) sl_row_builder_set_null(&b, 0);
  else SL_ASSERT_OK(sl_row_builder_set_str(&b, 0, v, (uint32_t)strlen(v)));
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  memcpy(rb->data, r.data, r.len);
  sl_row_view(&rb->row, s, rb->data, r.len);
  sl_row_builder_close(&b);
  return &rb->row;
}

static const sl_row_t *int_row(rowbuf_t *rb, const sl_schema_t *s,
                               int64_t v) {
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_row_builder_set_i64(&b, 0, v);
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  memcpy(rb->data, r.data, r.len);
  sl_row_view(&rb->row, s, rb->data, r.len);
  sl_row_builder_close(&b);
  return &rb->row;
}

static void expect_chunk(sl__cdc_member_t *m, const sl__cdc_chunks_t *cl,
                         const sl_schema_t *s, const char *v, uint32_t want) {
  rowbuf_t rb;
  const sl_row_t *row = str_row(&rb, s, v);
  uint32_t got = UINT32_MAX;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_find(m, row, &got, &err), err);
  if (got != want)
    SL_TEST_FAIL("'%s': chunk %u, want %u", v ? v : "NULL", got, want);
  for (uint32_t j = 0; j < cl->n; j++) {
    bool in = false;
    SL_ASSERT_OK_E(sl__cdc_member_contains(m, &cl->chunks[j], row, &in, &err),
                   err);
    SL_ASSERT_TRUE(in == (j == want));
  }
}

/* utf8mb4_bin is PAD SPACE: the shorter string counts as padded with
 * spaces, so 'a' = 'a ' and 'a\t' < 'a' (a tab is below a space). */
SL_TEST(pad_space_binary) {
  sl__cdc_table_t *t = table_of(SL_CDC_KEY_STR, "utf8mb4_bin");
  const char *const bounds[] = {"a\x01", "a", "b"};
  sl__cdc_chunks_t *cl = list_of(t, bounds, NULL, 3);
  sl__cdc_member_t *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_open(NULL, "h:1", t, cl, &m, &err), err);
  expect_chunk(m, cl, t->schema, "", 0);
  expect_chunk(m, cl, t->schema, "Z", 0);
  expect_chunk(m, cl, t->schema, "a\x01", 1);
  expect_chunk(m, cl, t->schema, "a\t", 1);
  expect_chunk(m, cl, t->schema, "a\t ", 1);
  expect_chunk(m, cl, t->schema, "a", 2);
  expect_chunk(m, cl, t->schema, "a ", 2);
  expect_chunk(m, cl, t->schema, "a   ", 2);
  expect_chunk(m, cl, t->schema, "a!", 2);
  expect_chunk(m, cl, t->schema, "\xc3\xa1", 3); /* U+00E1 after 'b' */
  expect_chunk(m, cl, t->schema, "b", 3);
  expect_chunk(m, cl, t->schema, "b ", 3);
  expect_chunk(m, cl, t->schema, NULL, 0); /* NULL: the first chunk */
  SL_ASSERT_EQ_INT(sl__cdc_member_queries(m), 0);
  sl__cdc_member_close(m);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
}

/* utf8mb4_nopad_bin: bytes, then length: 'a' < 'a\x01' < 'a\t' < 'a '. */
SL_TEST(no_pad_binary) {
  sl__cdc_table_t *t = table_of(SL_CDC_KEY_STR, "utf8mb4_nopad_bin");
  const char *const bounds[] = {"a\x01", "a ", "b"};
  sl__cdc_chunks_t *cl = list_of(t, bounds, NULL, 3);
  sl__cdc_member_t *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_open(NULL, "h:1", t, cl, &m, &err), err);
  expect_chunk(m, cl, t->schema, "", 0);
  expect_chunk(m, cl, t->schema, "a", 0);
  expect_chunk(m, cl, t->schema, "a\x01", 1);
  expect_chunk(m, cl, t->schema, "a\t", 1);
  expect_chunk(m, cl, t->schema, "a ", 2);
  expect_chunk(m, cl, t->schema, "a  ", 2);
  expect_chunk(m, cl, t->schema, "a!", 2);
  expect_chunk(m, cl, t->schema, "b", 3);
  sl__cdc_member_close(m);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
}

/* The search over 1000 chunks (several steps of 64 pivots) agrees with a
 * linear scan of sl__cdc_chunk_contains for every value around every
 * bound. */
SL_TEST(search_many_chunks) {
  sl__cdc_table_t *t = table_of(SL_CDC_KEY_INT, NULL);
  enum { N = 999 };
  int64_t *v = sl_calloc(N, sizeof(int64_t));
  for (uint32_t i = 0; i < N; i++) v[i] = (int64_t)i * 7 - 3000;
  sl__cdc_chunks_t *cl = list_of(t, NULL, v, N);
  sl__cdc_member_t *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_open(NULL, "h:1", t, cl, &m, &err), err);
  for (int64_t x = -3010; x <= 7 * N - 2990; x++) {
    rowbuf_t rb;
    const sl_row_t *row = int_row(&rb, t->schema, x);
    uint32_t got = UINT32_MAX, want = UINT32_MAX;
    SL_ASSERT_OK_E(sl__cdc_member_find(m, row, &got, &err), err);
    for (uint32_t j = 0; j < cl->n; j++) {
      bool in = false;
      SL_ASSERT_OK_E(sl__cdc_chunk_contains(cl, &cl->chunks[j], t, row, &in,
                                            &err),
                     err);
      if (in) {
        SL_ASSERT_EQ_INT(want, UINT32_MAX);
        want = j;
      }
    }
    if (got != want)
      SL_TEST_FAIL("%" PRId64 ": chunk %u, want %u", x, got, want);
  }
  sl__cdc_member_close(m);
  sl__cdc_chunks_free(cl);
  sl_free(v);
  sl__cdc_table_destroy(t);
}

/* A collation only the server knows needs a connection; a string column
 * without a collation cannot be compared. */
SL_TEST(open_refusals) {
  sl__cdc_table_t *t = table_of(SL_CDC_KEY_STR, "utf8mb4_general_ci");
  const char *const bounds[] = {"m"};
  sl__cdc_chunks_t *cl = list_of(t, bounds, NULL, 1);
  sl__cdc_member_t *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__cdc_member_open(NULL, "h:1", t, cl, &m, &err),
                   SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "mariadb-cdc: chunk key `k` of "
                   "`db`.`t` at h:1 compares in utf8mb4_general_ci, which "
                   "needs a connection to the server");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_TRUE(m == NULL);
  t->cols[0].collation[0] = '\0';
  SL_ASSERT_EQ_INT(sl__cdc_member_open(NULL, "h:1", t, cl, &m, &err),
                   SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "mariadb-cdc: chunk key `k` of "
                   "`db`.`t` at h:1 has no usable character set and collation "
                   "('utf8mb4', '')");
  sl_error_destroy(err);
  /* A one-chunk list needs no comparison at all. */
  sl__cdc_chunks_t *one = list_of(t, NULL, NULL, 0);
  err = NULL;
  snprintf(t->cols[0].collation, sizeof(t->cols[0].collation), "utf8mb4_bin");
  SL_ASSERT_OK_E(sl__cdc_member_open(NULL, "h:1", t, one, &m, &err), err);
  expect_chunk(m, one, t->schema, "x", 0);
  sl__cdc_member_close(m);
  sl__cdc_chunks_free(one);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
}

/* Every allocation of open fails once in turn: SL_ENOMEM, no leak. */
SL_TEST(alloc_failures) {
  if (!sl_inject_is_enabled()) return;
  sl__cdc_table_t *t = table_of(SL_CDC_KEY_STR, "utf8mb4_bin");
  const char *const bounds[] = {"a", "b"};
  sl__cdc_chunks_t *cl = list_of(t, bounds, NULL, 2);
  uint32_t n_fail = 0;
  for (uint64_t k = 1;; k++) {
    sl__cdc_member_t *m = NULL;
    sl_error_t *err = NULL;
    sl_inject_alloc_fail(k, false);
    int rc = sl__cdc_member_open(NULL, "h:1", t, cl, &m, &err);
    uint64_t failed = sl_inject_alloc_failed();
    sl_inject_alloc_fail(0, false);
    if (failed == 0) {
      SL_ASSERT_OK_E(rc, err);
      expect_chunk(m, cl, t->schema, "a ", 1);
      sl__cdc_member_close(m);
      break;
    }
    n_fail++;
    SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
    SL_ASSERT_TRUE(m == NULL);
    sl_error_destroy(err);
  }
  SL_ASSERT_TRUE(n_fail >= 4);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
}
