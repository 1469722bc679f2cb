/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the Kafka source's record -> row decode
 * (src/connectors/kafka/kafka_decode.c).  Byte 0: the format (bits 0-1:
 * json, csv, string, bytes) and whether the metadata fields are asked for
 * (bit 2); the rest is split at 0xff bytes into the value, the key, then
 * header name/value pairs (a header value "\xfe" alone stands for null).
 * A record that decodes must give a valid row of the output schema; one
 * that does not must give an error with a message.
 */
#include "connectors/kafka/kafka_decode.h"
#include "fuzz_schema.h"

static const sl_schema_t *one_field(sl_type_id_t t) {
  static sl_schema_t *s[2];
  int i = t == SL_TYPE_STRING ? 0 : 1;
  if (s[i]) return s[i];
  sl_field_t f = {.name = "v", .type = {.id = (uint8_t)t, .nullable = true}};
  SL_FUZZ_CHECK(sl_schema_create(&f, 1, &s[i], NULL) == SL_OK);
  return s[i];
}

/* value_schema + ts, headers, key, partition, offset. */
static const sl_schema_t *with_meta(const sl_schema_t *v, int slot) {
  static sl_schema_t *s[3];
  if (s[slot]) return s[slot];
  uint32_t n = sl_schema_n_fields(v);
  sl_field_t f[16];
  for (uint32_t i = 0; i < n; i++) f[i] = *sl_schema_field(v, i);
  static const char *names[] = {"_ts", "_headers", "_key", "_part", "_off"};
  static const uint8_t types[] = {SL_TYPE_TIMESTAMP, SL_TYPE_STRING,
                                  SL_TYPE_STRING, SL_TYPE_INT32,
                                  SL_TYPE_INT64};
  for (int k = 0; k < 5; k++)
    f[n + (uint32_t)k] = (sl_field_t){
        .name = names[k], .type = {.id = types[k], .nullable = true}};
  SL_FUZZ_CHECK(sl_schema_create(f, n + 5, &s[slot], NULL) == SL_OK);
  return s[slot];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_fuzz_setup();
  if (size < 1 || size > (1u << 20)) return 0;
  sl_kafka_format_t fmt = (sl_kafka_format_t)(data[0] & 3);
  bool meta = (data[0] & 4) != 0;
  const sl_schema_t *vs =
      fmt == SL_KAFKA_FORMAT_STRING  ? one_field(SL_TYPE_STRING)
      : fmt == SL_KAFKA_FORMAT_BYTES ? one_field(SL_TYPE_BYTES)
                                     : sl_fuzz_schema();
  int slot = fmt >= SL_KAFKA_FORMAT_STRING ? (int)fmt - 1 : 0;
  const sl_schema_t *os = meta ? with_meta(vs, slot) : vs;
  /* Split the rest at 0xff; names need a NUL, so copy. */
  size_t n = size - 1;
  uint8_t *buf = malloc(n + 1);
  SL_FUZZ_CHECK(buf != NULL);
  if (n) memcpy(buf, data + 1, n);
  buf[n] = 0;
  const uint8_t *part[64];
  size_t plen[64], np = 0, start = 0;
  for (size_t i = 0; i <= n && np < 64; i++) {
    if (i == n || buf[i] == 0xff) {
      part[np] = buf + start;
      plen[np++] = i - start;
      buf[i] = 0;
      start = i + 1;
    }
  }
  sl_kafka_hdr_t hdrs[31];
  size_t nh = 0;
  for (size_t i = 2; i + 1 < np && nh < 31; i += 2, nh++) {
    hdrs[nh].name = (const char *)part[i];
    bool is_null = plen[i + 1] == 1 && part[i + 1][0] == 0xfe;
    hdrs[nh].value = is_null ? NULL : part[i + 1];
    hdrs[nh].len = is_null ? 0 : plen[i + 1];
  }
  sl_kafka_rec_t rec = {np > 0 ? part[0] : NULL, np > 0 ? plen[0] : 0,
                        np > 1 ? part[1] : NULL, np > 1 ? plen[1] : 0,
                        (int64_t)size * 1000, 3, (int64_t)size, hdrs, nh};
  sl_kafka_decoder_t d;
  SL_FUZZ_CHECK(sl__kafka_decoder_init(&d, fmt, ',', vs, os, NULL) ==
                SL_OK);
  if (meta) {
    uint32_t nv = sl_schema_n_fields(vs);
    d.f_timestamp = (int)nv;
    d.f_headers = (int)nv + 1;
    d.f_key = (int)nv + 2;
    d.f_partition = (int)nv + 3;
    d.f_offset = (int)nv + 4;
  }
  sl_row_builder_t b;
  SL_FUZZ_CHECK(sl_row_builder_init(&b, os) == SL_OK);
  sl_error_t *err = NULL;
  sl_row_t row;
  int rc = sl__kafka_decode(&d, &rec, &b, &err);
  if (rc == SL_OK) rc = sl_row_builder_finish(&b, &row, &err);
  if (rc == SL_OK) {
    SL_FUZZ_CHECK(sl_row_validate(os, row.data, row.len) == SL_OK);
  } else {
    SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
  }
  sl_error_destroy(err);
  sl_row_builder_close(&b);
  sl__kafka_decoder_close(&d);
  free(buf);
  return 0;
}
