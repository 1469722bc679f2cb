/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the row codecs (src/core/codec.c, row.c, schema.c).  An
 * input is an encoded schema (sl_schema_encode) followed by row bytes; when
 * the schema does not decode, a fixed schema with every type is used for
 * the whole input.  The row bytes go to
 *  - the compact decoder: a row it accepts must be a valid binary row, and
 *    encode -> decode -> encode must give the same bytes;
 *  - the binary row validator: a row it accepts must be readable field by
 *    field and printable as CSV and JSON.
 * A schema that decodes must survive its own round trip.
 */
#include "core/core.h"
#include "fuzz_util.h"

static sl_schema_t *fallback;

static void setup(void) {
  if (fallback != NULL) return;
  static const sl_field_t f[] = {
      {.name = "b", .type = {.id = SL_TYPE_BOOL}},
      {.name = "i32", .type = {.id = SL_TYPE_INT32, .nullable = true}},
      {.name = "i64", .type = {.id = SL_TYPE_INT64}},
      {.name = "f", .type = {.id = SL_TYPE_FLOAT64, .nullable = true}},
      {.name = "d",
       .type = {.id = SL_TYPE_DECIMAL, .precision = 10, .scale = 2}},
      {.name = "s", .type = {.id = SL_TYPE_STRING, .nullable = true}},
      {.name = "y", .type = {.id = SL_TYPE_BYTES}},
      {.name = "t", .type = {.id = SL_TYPE_TIMESTAMP, .nullable = true}}};
  SL_FUZZ_CHECK(sl_schema_create(f, 8, &fallback, NULL) == SL_OK);
}

static void check_compact(const sl_schema_t *schema, const uint8_t *p,
                          size_t n) {
  sl_row_builder_t b, b2;
  if (sl_row_builder_init(&b, schema) != SL_OK) return;
  if (sl_row_builder_init(&b2, schema) != SL_OK) {
    sl_row_builder_close(&b);
    return;
  }
  size_t used = 0;
  sl_row_t row, row2;
  sl_error_t *err = NULL;
  sl_bytes_t e1, e2;
  sl_bytes_init(&e1);
  sl_bytes_init(&e2);
  if (sl_row_decode_compact(&b, p, n, &used) == SL_OK) {
    SL_FUZZ_CHECK(used <= n);
    if (sl_row_builder_finish(&b, &row, &err) == SL_OK) {
      SL_FUZZ_CHECK(sl_row_validate(schema, row.data, row.len) == SL_OK);
      SL_FUZZ_CHECK(sl_row_encode_compact(&row, &e1) == SL_OK);
      size_t used2 = 0;
      SL_FUZZ_CHECK(sl_row_decode_compact(&b2, e1.data, e1.len, &used2) ==
                    SL_OK);
      SL_FUZZ_CHECK(used2 == e1.len);
      SL_FUZZ_CHECK(sl_row_builder_finish(&b2, &row2, NULL) == SL_OK);
      SL_FUZZ_CHECK(sl_row_encode_compact(&row2, &e2) == SL_OK);
      SL_FUZZ_CHECK(e1.len == e2.len && memcmp(e1.data, e2.data, e1.len) == 0);
    }
  }
  sl_error_destroy(err);
  sl_bytes_close(&e1);
  sl_bytes_close(&e2);
  sl_row_builder_close(&b);
  sl_row_builder_close(&b2);
}

static void check_binary(const sl_schema_t *schema, const uint8_t *p,
                         size_t n) {
  if (n > UINT32_MAX || sl_row_validate(schema, p, (uint32_t)n) != SL_OK)
    return;
  sl_row_t row;
  sl_row_view(&row, schema, p, (uint32_t)n);
  for (uint32_t i = 0; i < sl_schema_n_fields(schema); i++) {
    sl_value_t v;
    sl_row_get_value(&row, i, &v);
    if (!v.is_null && (v.type == SL_TYPE_STRING || v.type == SL_TYPE_BYTES))
      SL_FUZZ_CHECK(v.u.s.len == 0 ||
                    (v.u.s.ptr >= p && v.u.s.ptr + v.u.s.len <= p + n));
  }
  sl_bytes_t out;
  sl_bytes_init(&out);
  (void)sl_csv_format(&row, ',', true, &out);
  (void)sl_json_format(&row, true, &out);
  (void)sl_row_encode_compact(&row, &out);
  sl_bytes_close(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  if (size > (1u << 20)) return 0;
  sl_fuzz_setup();
  sl_schema_t *schema = NULL;
  sl_error_t *err = NULL;
  size_t used = 0;
  const sl_schema_t *use = fallback;
  if (sl_schema_decode(data, size, &used, &schema, &err) == SL_OK) {
    SL_FUZZ_CHECK(used <= size);
    sl_bytes_t enc;
    sl_bytes_init(&enc);
    SL_FUZZ_CHECK(sl_schema_encode(schema, &enc) == SL_OK);
    sl_schema_t *again = NULL;
    size_t used2 = 0;
    SL_FUZZ_CHECK(sl_schema_decode(enc.data, enc.len, &used2, &again, NULL) ==
                  SL_OK);
    SL_FUZZ_CHECK(used2 == enc.len && sl_schema_equal(schema, again));
    sl_schema_unref(again);
    sl_bytes_close(&enc);
    use = schema;
  } else {
    used = 0;
  }
  sl_error_destroy(err);
  /* The row bytes in their own allocation, so reads past them are seen. */
  size_t n = size - used;
  uint8_t *p = malloc(n ? n : 1);
  SL_FUZZ_CHECK(p != NULL);
  if (n) memcpy(p, data + used, n);
  check_compact(use, p, n);
  check_binary(use, p, n);
  free(p);
  sl_schema_unref(schema);
  return 0;
}
