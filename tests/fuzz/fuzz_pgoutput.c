/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: PostgreSQL's logical replication stream as sluice decodes
 * it (src/connectors/postgres/pgoutput_decode.c).  The input is a
 * sequence of CopyData frames, each a big-endian u32 length and the frame
 * (the last frame takes whatever is left when a length overruns), as the
 * PostgreSQL tests capture them (SL_PGOUTPUT_CAPTURE,
 * tests/integration/test_pgoutput.c).  One decoder reads the whole
 * sequence, so Relation messages feed the Inserts that follow.  Every
 * column value of a decoded change is converted to its sluice type.
 * Invariants: a rejected input has an error with a message; a decoded
 * tuple has its relation's column count and points inside the input; a
 * converted value makes a valid row; every strict prefix of a decoded
 * message (up to 512 bytes) is rejected.
 */
#include "connectors/postgres/pgoutput_decode.h"
#include "fuzz_util.h"

static const sl_schema_t *one_field(sl_type_t t) {
  static struct {
    sl_type_t t;
    sl_schema_t *s;
  } cache[64];
  static int n;
  for (int i = 0; i < n; i++)
    if (cache[i].t.id == t.id && cache[i].t.precision == t.precision &&
        cache[i].t.scale == t.scale)
      return cache[i].s;
  SL_FUZZ_CHECK(n < 64);
  sl_field_t f = {.name = "v", .type = t};
  SL_FUZZ_CHECK(sl_schema_create(&f, 1, &cache[n].s, NULL) == SL_OK);
  cache[n].t = t;
  return cache[n++].s;
}

static void check_tuple(const sl_pgo_relation_t *rel, const sl_pgo_tuple_t *t,
                        const uint8_t *p, size_t len) {
  SL_FUZZ_CHECK(t->n_cols == rel->n_cols);
  for (uint16_t i = 0; i < t->n_cols; i++) {
    const sl_pgo_datum_t *d = &t->cols[i];
    if (d->kind == SL_PGO_TEXT || d->kind == SL_PGO_BINARY)
      SL_FUZZ_CHECK(d->data >= p && d->len <= len &&
                    (size_t)(d->data - p) <= len - d->len);
    sl_type_t ty;
    sl_error_t *err = NULL;
    if (sl__pgo_column_type(rel, i, &ty, &err) != SL_OK) {
      SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
      sl_error_destroy(err);
      continue;
    }
    const sl_schema_t *s = one_field(ty);
    sl_row_builder_t b;
    SL_FUZZ_CHECK(sl_row_builder_init(&b, s) == SL_OK);
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    sl_row_t row;
    int rc = sl__pgo_value(rel, i, d, &b, 0, &err);
    if (rc == SL_OK) rc = sl_row_builder_finish(&b, &row, &err);
    if (rc == SL_OK) {
      SL_FUZZ_CHECK(sl_row_validate(s, row.data, row.len) == SL_OK);
    } else {
      SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
    }
    SL_FUZZ_CHECK(rc != SL_OK || d->kind == SL_PGO_TEXT ||
                  d->kind == SL_PGO_NULL);
    sl_error_destroy(err);
    sl_row_builder_close(&b);
  }
}

static void one_message(sl_pgo_decoder_t *d, const uint8_t *p, size_t len) {
  sl_pgo_msg_t m;
  sl_error_t *err = NULL;
  if (sl__pgo_decode(d, p, len, &m, &err) != SL_OK) {
    SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
    sl_error_destroy(err);
    return;
  }
  switch (m.type) {
  case 'I':
    check_tuple(m.u.change.rel, &m.u.change.new_, p, len);
    break;
  case 'U':
    if (m.u.change.old_kind)
      check_tuple(m.u.change.rel, &m.u.change.old, p, len);
    check_tuple(m.u.change.rel, &m.u.change.new_, p, len);
    break;
  case 'D':
    check_tuple(m.u.change.rel, &m.u.change.old, p, len);
    break;
  case 'R':
    SL_FUZZ_CHECK(sl__pgo_relation(d, m.u.relation->oid) == m.u.relation);
    break;
  default:
    break;
  }
  if (len > 512) return;
  /* Every strict prefix is rejected (in its own allocation, so that a
   * read past its end is an ASan report). */
  for (size_t k = 0; k < len; k++) {
    uint8_t *cut = malloc(k ? k : 1);
    SL_FUZZ_CHECK(cut != NULL);
    memcpy(cut, p, k);
    SL_FUZZ_CHECK(sl__pgo_decode(d, cut, k, &m, &err) == SL_ECORRUPT);
    SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
    sl_error_destroy(err);
    err = NULL;
    free(cut);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_fuzz_setup();
  if (size > (1u << 20)) return 0;
  sl_pgo_decoder_t d;
  sl__pgo_decoder_init(&d);
  size_t off = 0;
  while (off < size) {
    size_t n = size - off;
    const uint8_t *frame = data + off;
    if (n >= 4) {
      uint32_t k = (uint32_t)data[off] << 24 | (uint32_t)data[off + 1] << 16 |
                   (uint32_t)data[off + 2] << 8 | data[off + 3];
      if (k <= n - 4) n = k;
      else n -= 4;
      frame += 4;
      off += 4;
    }
    off += n;
    /* The frame alone in its own allocation: reads past it are caught. */
    uint8_t *copy = malloc(n ? n : 1);
    SL_FUZZ_CHECK(copy != NULL);
    if (n) memcpy(copy, frame, n);
    sl_pg_copy_t c;
    sl_error_t *err = NULL;
    if (sl__pg_copy_decode(copy, n, &c, &err) != SL_OK) {
      SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
      sl_error_destroy(err);
    } else if (c.kind == 'w') {
      SL_FUZZ_CHECK(c.data == copy + 25 && c.len == n - 25);
      one_message(&d, c.data, c.len);
    } else {
      SL_FUZZ_CHECK(c.kind == 'k' && n == 18);
    }
    free(copy);
  }
  sl__pgo_decoder_close(&d);
  return 0;
}
