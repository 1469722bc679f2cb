/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the JSON-lines parser (sl_json_parse,
 * src/core/format_json.c) into a schema with every type (fuzz_schema.h).
 * The first byte says whether "op" carries the row kind; the rest is one
 * line.  A line that parses must be a valid row, and format -> parse ->
 * format must give the same text.
 */
#include "fuzz_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_fuzz_setup();
  if (size < 1 || size > (1u << 20)) return 0;
  const sl_schema_t *schema = sl_fuzz_schema();
  bool changelog = data[0] & 1;
  size_t n = size - 1;
  char *line = malloc(n ? n : 1);
  SL_FUZZ_CHECK(line != NULL);
  if (n) memcpy(line, data + 1, n);
  sl_row_builder_t b;
  SL_FUZZ_CHECK(sl_row_builder_init(&b, schema) == SL_OK);
  sl_error_t *err = NULL;
  sl_row_t row;
  sl_bytes_t t1, t2;
  sl_bytes_init(&t1);
  sl_bytes_init(&t2);
  int rc = sl_json_parse(line, n, changelog, &b, &err);
  if (rc == SL_OK) rc = sl_row_builder_finish(&b, &row, &err);
  if (rc == SL_OK) {
    SL_FUZZ_CHECK(sl_row_validate(schema, row.data, row.len) == SL_OK);
    SL_FUZZ_CHECK(sl_json_format(&row, changelog, &t1) == SL_OK);
    SL_FUZZ_CHECK(t1.len > 0 && t1.data[t1.len - 1] == '\n');
    sl_error_t *err2 = NULL;
    int rc2 = sl_json_parse((const char *)t1.data, t1.len - 1, changelog, &b,
                            &err2);
    if (rc2 == SL_OK) rc2 = sl_row_builder_finish(&b, &row, &err2);
    if (rc2 != SL_OK)
      fprintf(stderr, "fuzz: '%.*s' does not parse back: %s\n",
              (int)t1.len - 1, (const char *)t1.data,
              sl_error_message(err2));
    SL_FUZZ_CHECK(rc2 == SL_OK);
    SL_FUZZ_CHECK(sl_json_format(&row, changelog, &t2) == SL_OK);
    SL_FUZZ_CHECK(t1.len == t2.len && memcmp(t1.data, t2.data, t1.len) == 0);
  } else {
    SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
  }
  sl_error_destroy(err);
  sl_bytes_close(&t1);
  sl_bytes_close(&t2);
  sl_row_builder_close(&b);
  free(line);
  return 0;
}
