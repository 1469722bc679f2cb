/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the channel-state codec (src/runtime/chanstate.c): what the
 * writer appends the reader returns entry by entry; the validator accepts
 * it, and rejects every truncation inside an entry, unknown kinds, inputs
 * and output channels the task does not have, frames that overrun their
 * buffer and malformed rows.  Inputs are heap copies of exactly the bytes
 * under test, so that ASan catches any read past the end.
 */
#include "runtime/chanstate.h"
#include "sl_test.h"

static sl_schema_t *one_int_schema(void) {
  sl_field_t f[] = {{"x", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *s = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_schema_create(f, 1, &s, &err), err);
  return s;
}

/* A binary row of s with x = v, appended to out. */
static void add_row(sl_bytes_t *out, const sl_schema_t *s, int64_t v) {
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_row_builder_set_i64(&b, 0, v);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
  SL_ASSERT_OK(sl_bytes_append(out, row.data, row.len));
  sl_row_builder_close(&b);
}

/* The shape of a task with input 1 and output channel (2, 3), hashed. */
static const sl_schema_t *g_schema;
static bool out_channel(const void *user, uint32_t writer, uint32_t channel,
                        const sl_schema_t **out_schema, bool *out_has_hash) {
  (void)user;
  if (writer != 2 || channel != 3) return false;
  *out_schema = g_schema;
  *out_has_hash = true;
  return true;
}

static int validate_copy(const uint8_t *p, size_t n,
                         const sl_chanstate_shape_t *shape) {
  uint8_t *d = malloc(n ? n : 1);
  SL_ASSERT_TRUE(d != NULL);
  if (n) memcpy(d, p, n);
  int rc = sl__chanstate_validate(d, n, shape);
  free(d);
  return rc;
}

/* A record on input 1 and a buffer of two hashed frames on (2, 3). */
static void sample(sl_bytes_t *cs, const sl_schema_t *s, size_t *out_first) {
  sl_bytes_t row, buf;
  sl_bytes_init(&row);
  sl_bytes_init(&buf);
  add_row(&row, s, 42);
  SL_ASSERT_OK(sl__chanstate_put_record(cs, 1, row.data, (uint32_t)row.len));
  *out_first = cs->len;
  for (int64_t v = 7; v <= 8; v++) {
    sl_bytes_t r;
    sl_bytes_init(&r);
    add_row(&r, s, v);
    uint8_t hdr[12];
    sl__put_u32le(hdr, (uint32_t)r.len);
    sl__put_u64le(hdr + 4, (uint64_t)v * 1000);
    SL_ASSERT_OK(sl_bytes_append(&buf, hdr, sizeof(hdr)));
    SL_ASSERT_OK(sl_bytes_append(&buf, r.data, r.len));
    sl_bytes_close(&r);
  }
  SL_ASSERT_OK(sl__chanstate_put_buffer(cs, 2, 3, buf.data,
                                        (uint32_t)buf.len));
  sl_bytes_close(&row);
  sl_bytes_close(&buf);
}

SL_TEST(chanstate_round_trip) {
  sl_schema_t *s = one_int_schema();
  g_schema = s;
  sl_bytes_t cs;
  sl_bytes_init(&cs);
  size_t first;
  sample(&cs, s, &first);
  size_t pos = 0;
  sl_chanstate_entry_t e;
  SL_ASSERT_EQ_INT(sl__chanstate_next(cs.data, cs.len, &pos, &e), 1);
  SL_ASSERT_EQ_INT(e.kind, SL_CHANSTATE_RECORD);
  SL_ASSERT_EQ_INT(e.input, 1);
  SL_ASSERT_EQ_INT(pos, first);
  sl_row_t row;
  sl_row_view(&row, s, e.data, e.len);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&row, 0), 42);
  SL_ASSERT_EQ_INT(sl__chanstate_next(cs.data, cs.len, &pos, &e), 1);
  SL_ASSERT_EQ_INT(e.kind, SL_CHANSTATE_BUFFER);
  SL_ASSERT_EQ_INT(e.writer, 2);
  SL_ASSERT_EQ_INT(e.channel, 3);
  SL_ASSERT_EQ_INT(pos, cs.len);
  SL_ASSERT_EQ_INT(sl__chanstate_next(cs.data, cs.len, &pos, &e), 0);
  sl_chanstate_shape_t shape = {{NULL, s}, out_channel, NULL};
  SL_ASSERT_OK(validate_copy(cs.data, cs.len, &shape));
  SL_ASSERT_OK(validate_copy(cs.data, 0, &shape)); /* empty: no entries */
  sl_bytes_close(&cs);
  sl_schema_unref(s);
}

SL_TEST(chanstate_every_truncation_rejected) {
  sl_schema_t *s = one_int_schema();
  g_schema = s;
  sl_bytes_t cs;
  sl_bytes_init(&cs);
  size_t first;
  sample(&cs, s, &first);
  sl_chanstate_shape_t shape = {{NULL, s}, out_channel, NULL};
  for (size_t n = 1; n < cs.len; n++) {
    int rc = validate_copy(cs.data, n, &shape);
    SL_ASSERT_EQ_INT(rc, n == first ? SL_OK : SL_ECORRUPT);
  }
  sl_bytes_close(&cs);
  sl_schema_unref(s);
}

SL_TEST(chanstate_rejects_what_the_task_lacks) {
  sl_schema_t *s = one_int_schema();
  g_schema = s;
  sl_bytes_t row;
  sl_bytes_init(&row);
  add_row(&row, s, 1);
  sl_chanstate_shape_t shape = {{NULL, s}, out_channel, NULL};
  sl_bytes_t cs;
  sl_bytes_init(&cs);
  /* A record on input 0, which this task does not have. */
  SL_ASSERT_OK(sl__chanstate_put_record(&cs, 0, row.data, (uint32_t)row.len));
  SL_ASSERT_EQ_INT(validate_copy(cs.data, cs.len, &shape), SL_ECORRUPT);
  /* Input 2 does not exist in any task. */
  cs.len = 0;
  SL_ASSERT_OK(sl__chanstate_put_record(&cs, 2, row.data, (uint32_t)row.len));
  SL_ASSERT_EQ_INT(validate_copy(cs.data, cs.len, &shape), SL_ECORRUPT);
  /* A malformed row. */
  cs.len = 0;
  SL_ASSERT_OK(sl__chanstate_put_record(&cs, 1, row.data,
                                        (uint32_t)row.len - 1));
  SL_ASSERT_EQ_INT(validate_copy(cs.data, cs.len, &shape), SL_ECORRUPT);
  /* An output channel this task does not have. */
  cs.len = 0;
  SL_ASSERT_OK(sl__chanstate_put_buffer(&cs, 2, 4, NULL, 0));
  SL_ASSERT_EQ_INT(validate_copy(cs.data, cs.len, &shape), SL_ECORRUPT);
  /* A frame longer than its buffer. */
  cs.len = 0;
  uint8_t frame[12 + 64];
  memset(frame, 0, sizeof(frame));
  sl__put_u32le(frame, (uint32_t)row.len + 1);
  memcpy(frame + 12, row.data, row.len);
  SL_ASSERT_OK(sl__chanstate_put_buffer(&cs, 2, 3, frame,
                                        12 + (uint32_t)row.len));
  SL_ASSERT_EQ_INT(validate_copy(cs.data, cs.len, &shape), SL_ECORRUPT);
  /* A frame too short for its length and hash. */
  cs.len = 0;
  SL_ASSERT_OK(sl__chanstate_put_buffer(&cs, 2, 3, frame, 11));
  SL_ASSERT_EQ_INT(validate_copy(cs.data, cs.len, &shape), SL_ECORRUPT);
  /* An unknown entry kind. */
  uint8_t junk[16] = {2};
  SL_ASSERT_EQ_INT(validate_copy(junk, sizeof(junk), &shape), SL_ECORRUPT);
  sl_bytes_close(&cs);
  sl_bytes_close(&row);
  sl_schema_unref(s);
}
