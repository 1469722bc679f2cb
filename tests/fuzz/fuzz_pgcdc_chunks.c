/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the postgres-cdc source's chunk list and chunk snapshot as
 * its state keeps them (src/connectors/postgres/pg_cdc_snap.c): bytes from
 * a checkpoint, so anything.  The first byte chooses the decoder: even
 * sl__pgc_chunks_decode, odd sl__pgc_snap_decode; the rest is its input.
 *
 * A rejected input has SL_ECORRUPT (or SL_ENOMEM) and a message.  A
 * decoded chunk list encodes to exactly the input bytes; its chunks chain
 * (the first unbounded below, the last above, each low bound the previous
 * high bound); and sl__pgc_chunk_find, on a table whose key has the list's
 * kinds, puts a row equal to each chunk's low bound in that chunk.  A
 * decoded snapshot encodes to exactly the bytes it used; its xip ascend
 * within [xmin, xmax); an xip is not visible and xmin - 1 is (when the
 * 32-bit xid is unambiguous).
 */
#include "connectors/postgres/pg_cdc_int.h"
#include "fuzz_util.h"

/* A table t(k0 int8 | text, k1 ...) whose primary key is every column, of
 * the list's kinds. */
static sl__pgc_table_t *table_of(const sl__pgc_chunks_t *cl) {
  sl__pgc_table_t *t = sl_calloc(1, sizeof(*t));
  SL_FUZZ_CHECK(t != NULL);
  t->schema = sl_strdup("public");
  t->name = sl_strdup("t");
  t->rel.nspname = sl_strdup("public");
  t->rel.relname = sl_strdup("t");
  t->rel.n_cols = (uint16_t)cl->n_key;
  t->rel.cols = sl_calloc(cl->n_key, sizeof(*t->rel.cols));
  t->n_cols = cl->n_key;
  t->n_pk = cl->n_key;
  t->pk = sl_calloc(cl->n_key, sizeof(uint32_t));
  t->key_kind = sl_calloc(cl->n_key, 1);
  sl_field_t *f = sl_calloc(cl->n_key, sizeof(*f));
  SL_FUZZ_CHECK(t->schema && t->name && t->rel.nspname && t->rel.relname &&
                t->rel.cols && t->pk && t->key_kind && f);
  for (uint32_t k = 0; k < cl->n_key; k++) {
    char name[16];
    snprintf(name, sizeof(name), "k%u", k);
    t->rel.cols[k].name = sl_strdup(name);
    SL_FUZZ_CHECK(t->rel.cols[k].name != NULL);
    t->rel.cols[k].flags = SL_PGO_COL_KEY;
    t->rel.cols[k].type_mod = -1;
    t->rel.cols[k].type_oid = cl->key_kind[k] == SL_PGC_KEY_INT
                                  ? SL_PG_OID_INT8
                                  : SL_PG_OID_TEXT;
    SL_FUZZ_CHECK(sl__pgo_column_type(&t->rel, (uint16_t)k, &f[k].type,
                                      NULL) == SL_OK);
    f[k].name = t->rel.cols[k].name;
    t->pk[k] = k;
    t->key_kind[k] = cl->key_kind[k];
  }
  SL_FUZZ_CHECK(sl_schema_create(f, cl->n_key, &t->schema_, NULL) == SL_OK);
  sl_free(f);
  return t;
}

static void chunks_one(const uint8_t *data, size_t size) {
  sl__pgc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  int rc = sl__pgc_chunks_decode(data, size, &cl, &err);
  if (rc != SL_OK) {
    SL_FUZZ_CHECK(cl == NULL);
    SL_FUZZ_CHECK(rc == SL_ECORRUPT || rc == SL_ENOMEM);
    SL_FUZZ_CHECK(rc == SL_ENOMEM ||
                  (err != NULL && sl_error_message(err) != NULL));
    sl_error_destroy(err);
    return;
  }
  SL_FUZZ_CHECK(err == NULL && cl != NULL && cl->n >= 1 && cl->n_key >= 1);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_FUZZ_CHECK(sl__pgc_chunks_encode(cl, &b) == SL_OK);
  SL_FUZZ_CHECK(b.len == size && memcmp(b.data, data, size) == 0);
  sl_bytes_close(&b);
  sl__pgc_table_t *t = table_of(cl);
  sl_row_builder_t rb;
  SL_FUZZ_CHECK(sl_row_builder_init(&rb, t->schema_) == SL_OK);
  for (uint32_t i = 0; i < cl->n; i++) {
    const sl__pgc_chunk_t *ch = &cl->chunks[i];
    SL_FUZZ_CHECK(ch->id == i);
    SL_FUZZ_CHECK((ch->low == NULL) == (i == 0));
    SL_FUZZ_CHECK((ch->high == NULL) == (i + 1 == cl->n));
    if (ch->low == NULL) continue;
    sl_row_builder_reset(&rb, SL_ROW_INSERT);
    for (uint32_t k = 0; k < cl->n_key; k++) {
      if (cl->key_kind[k] == SL_PGC_KEY_INT)
        sl_row_builder_set_i64(&rb, k, ch->low[k].i);
      else
        SL_FUZZ_CHECK(sl_row_builder_set_str(&rb, k, ch->low[k].p,
                                             ch->low[k].len) == SL_OK);
    }
    sl_row_t row;
    SL_FUZZ_CHECK(sl_row_builder_finish(&rb, &row, NULL) == SL_OK);
    uint32_t at = UINT32_MAX;
    SL_FUZZ_CHECK(sl__pgc_chunk_find(cl, t, &row, &at, NULL) == SL_OK);
    SL_FUZZ_CHECK(at == i);
  }
  sl_row_builder_close(&rb);
  sl__pgc_table_destroy(t);
  sl__pgc_chunks_free(cl);
}

static void snap_one(const uint8_t *data, size_t size) {
  sl__pgc_snap_t s;
  size_t used = 0;
  sl_error_t *err = NULL;
  int rc = sl__pgc_snap_decode(data, size, &s, &used, &err);
  if (rc != SL_OK) {
    SL_FUZZ_CHECK(rc == SL_ECORRUPT || rc == SL_ENOMEM);
    SL_FUZZ_CHECK(rc == SL_ENOMEM ||
                  (err != NULL && sl_error_message(err) != NULL));
    sl_error_destroy(err);
    return;
  }
  SL_FUZZ_CHECK(err == NULL && used <= size && s.xmin <= s.xmax);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_FUZZ_CHECK(sl__pgc_snap_encode(&s, &b) == SL_OK);
  SL_FUZZ_CHECK(b.len == used && memcmp(b.data, data, used) == 0);
  sl_bytes_close(&b);
  /* Within half the 32-bit counter of xmax, a widened xid is exact. */
  bool is_narrow = s.xmax - s.xmin < (UINT64_C(1) << 31);
  for (uint32_t i = 0; i < s.n_xip; i++) {
    SL_FUZZ_CHECK(s.xip[i] >= s.xmin && s.xip[i] < s.xmax);
    SL_FUZZ_CHECK(i == 0 || s.xip[i] > s.xip[i - 1]);
    if (is_narrow) SL_FUZZ_CHECK(!sl__pgc_snap_visible(&s, (uint32_t)s.xip[i]));
  }
  if (is_narrow && s.xmin > 0 && s.xmax - s.xmin + 1 < (UINT64_C(1) << 31))
    SL_FUZZ_CHECK(sl__pgc_snap_visible(&s, (uint32_t)(s.xmin - 1)));
  if (is_narrow) SL_FUZZ_CHECK(!sl__pgc_snap_visible(&s, (uint32_t)s.xmax));
  sl__pgc_snap_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_fuzz_setup();
  if (size == 0) return 0;
  if (data[0] % 2 == 0) chunks_one(data + 1, size - 1);
  else snap_one(data + 1, size - 1);
  return 0;
}
