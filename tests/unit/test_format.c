/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the text formats (src/core/format_value.c, format_csv.c,
 * format_json.c): the text form of every type, CSV and JSON round trips,
 * quoting and escaping, changelog rows, the exact text of error messages,
 * and allocation failures while parsing and formatting.  The forms are
 * specified in docs/formats.md.
 */
#include <math.h>

#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Fixture                                                             */

/* A schema, a builder and an output buffer for one test. */
typedef struct fx_s {
  sl_schema_t *schema;
  sl_row_builder_t b;
  sl_bytes_t out;
  sl_error_t *err;
  sl_row_t row;
} fx_t;

/* spec: "name:type[?];..." where '?' marks a nullable field. */
static void fx_init(fx_t *fx, const char *spec) {
  sl_field_t fields[16];
  char names[16][32];
  uint32_t n = 0;
  const char *p = spec;
  while (*p) {
    const char *colon = strchr(p, ':');
    const char *end = strchr(p, ';');
    if (end == NULL) end = p + strlen(p);
    SL_ASSERT_TRUE(colon != NULL && colon < end && n < 16);
    char type[32];
    size_t tl = (size_t)(end - colon - 1);
    bool is_nullable = tl > 0 && colon[tl] == '?';
    if (is_nullable) tl--;
    snprintf(names[n], sizeof(names[n]), "%.*s", (int)(colon - p), p);
    snprintf(type, sizeof(type), "%.*s", (int)tl, colon + 1);
    fields[n].name = names[n];
    SL_ASSERT_OK(sl_type_parse(type, &fields[n].type));
    fields[n].type.nullable = is_nullable;
    n++;
    p = *end ? end + 1 : end;
  }
  memset(fx, 0, sizeof(*fx));
  SL_ASSERT_OK(sl_schema_create(fields, n, &fx->schema, NULL));
  SL_ASSERT_OK(sl_row_builder_init(&fx->b, fx->schema));
  sl_bytes_init(&fx->out);
}

static void fx_close(fx_t *fx) {
  sl_error_destroy(fx->err);
  sl_bytes_close(&fx->out);
  sl_row_builder_close(&fx->b);
  sl_schema_unref(fx->schema);
}

/* The output so far as a C string (kept NUL-terminated past its end). */
static const char *fx_text(fx_t *fx) {
  SL_ASSERT_OK(sl_bytes_append(&fx->out, "", 1));
  fx->out.len--;
  return (const char *)fx->out.data;
}

static void fx_clear_err(fx_t *fx) {
  sl_error_destroy(fx->err);
  fx->err = NULL;
}

static void csv_parse_ok(fx_t *fx, const char *line, char delim,
                         bool changelog) {
  fx_clear_err(fx);
  SL_ASSERT_OK_E(
      sl_csv_parse(line, strlen(line), delim, changelog, &fx->b, &fx->err),
      fx->err);
  SL_ASSERT_OK_E(sl_row_builder_finish(&fx->b, &fx->row, &fx->err), fx->err);
}

static void json_parse_ok(fx_t *fx, const char *line, bool changelog) {
  fx_clear_err(fx);
  SL_ASSERT_OK_E(
      sl_json_parse(line, strlen(line), changelog, &fx->b, &fx->err),
      fx->err);
  SL_ASSERT_OK_E(sl_row_builder_finish(&fx->b, &fx->row, &fx->err), fx->err);
}

/* Parse a CSV line and format the row again. */
static const char *csv_rt(fx_t *fx, const char *line, bool changelog) {
  csv_parse_ok(fx, line, ',', changelog);
  sl_bytes_clear(&fx->out);
  SL_ASSERT_OK(sl_csv_format(&fx->row, ',', changelog, &fx->out));
  return fx_text(fx);
}

/* Parse a JSON line and format the row again. */
static const char *json_rt(fx_t *fx, const char *line, bool changelog) {
  json_parse_ok(fx, line, changelog);
  sl_bytes_clear(&fx->out);
  SL_ASSERT_OK(sl_json_format(&fx->row, changelog, &fx->out));
  return fx_text(fx);
}

/* Parse a line that must fail with SL_EPARSE; returns the message. */
static const char *csv_err(fx_t *fx, const char *line, bool changelog) {
  fx_clear_err(fx);
  int rc = sl_csv_parse(line, strlen(line), ',', changelog, &fx->b, &fx->err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  SL_ASSERT_TRUE(fx->err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(fx->err), SL_EPARSE);
  return sl_error_message(fx->err);
}

static const char *json_err(fx_t *fx, const char *line, bool changelog) {
  fx_clear_err(fx);
  int rc = sl_json_parse(line, strlen(line), changelog, &fx->b, &fx->err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  SL_ASSERT_TRUE(fx->err != NULL);
  return sl_error_message(fx->err);
}

/* Parse text as field 0 with sl_value_parse, then format it again. */
static const char *value_rt(fx_t *fx, const char *text) {
  fx_clear_err(fx);
  sl_row_builder_reset(&fx->b, SL_ROW_INSERT);
  SL_ASSERT_OK_E(sl_value_parse(text, strlen(text),
                                sl_schema_field(fx->schema, 0)->type, &fx->b,
                                0, &fx->err),
                 fx->err);
  SL_ASSERT_OK_E(sl_row_builder_finish(&fx->b, &fx->row, &fx->err), fx->err);
  sl_bytes_clear(&fx->out);
  SL_ASSERT_OK(sl_value_format(&fx->row, 0, &fx->out));
  return fx_text(fx);
}

static const char *value_err(fx_t *fx, const char *text) {
  fx_clear_err(fx);
  sl_row_builder_reset(&fx->b, SL_ROW_INSERT);
  int rc = sl_value_parse(text, strlen(text),
                          sl_schema_field(fx->schema, 0)->type, &fx->b, 0,
                          &fx->err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  SL_ASSERT_TRUE(fx->err != NULL);
  return sl_error_message(fx->err);
}

/* ------------------------------------------------------------------ */
/* Values                                                              */

SL_TEST(value_bool_forms) {
  fx_t fx;
  fx_init(&fx, "b:bool");
  SL_ASSERT_EQ_STR(value_rt(&fx, "true"), "true");
  SL_ASSERT_EQ_STR(value_rt(&fx, "TRUE"), "true");
  SL_ASSERT_EQ_STR(value_rt(&fx, "False"), "false");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1"), "true");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0"), "false");
  SL_ASSERT_EQ_STR(value_err(&fx, "yes"), "expected bool, got 'yes'");
  SL_ASSERT_EQ_STR(value_err(&fx, "2"), "expected bool, got '2'");
  fx_close(&fx);
}

SL_TEST(value_integer_limits) {
  fx_t fx;
  fx_init(&fx, "i:int32");
  SL_ASSERT_EQ_STR(value_rt(&fx, "2147483647"), "2147483647");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-2147483648"), "-2147483648");
  SL_ASSERT_EQ_STR(value_rt(&fx, "+007"), "7");
  SL_ASSERT_EQ_STR(value_err(&fx, "2147483648"),
                   "'2147483648' is out of range for int32");
  SL_ASSERT_EQ_STR(value_err(&fx, "-2147483649"),
                   "'-2147483649' is out of range for int32");
  SL_ASSERT_EQ_STR(value_err(&fx, ""), "expected int32, got ''");
  SL_ASSERT_EQ_STR(value_err(&fx, "-"), "expected int32, got '-'");
  SL_ASSERT_EQ_STR(value_err(&fx, " 1"), "expected int32, got ' 1'");
  SL_ASSERT_EQ_STR(value_err(&fx, "1.0"), "expected int32, got '1.0'");
  fx_close(&fx);

  fx_init(&fx, "j:int64");
  SL_ASSERT_EQ_STR(value_rt(&fx, "9223372036854775807"),
                   "9223372036854775807");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-9223372036854775808"),
                   "-9223372036854775808");
  SL_ASSERT_EQ_STR(value_err(&fx, "9223372036854775808"),
                   "'9223372036854775808' is out of range for int64");
  SL_ASSERT_EQ_STR(value_err(&fx, "-9223372036854775809"),
                   "'-9223372036854775809' is out of range for int64");
  /* A syntax error wins over the range: the text is not an integer. */
  SL_ASSERT_EQ_STR(value_err(&fx, "99999999999999999999x"),
                   "expected int64, got '99999999999999999999x'");
  fx_close(&fx);
}

SL_TEST(value_float_shortest_round_trip) {
  fx_t fx;
  fx_init(&fx, "f:float64");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0.1"), "0.1");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1.5"), "1.5");
  SL_ASSERT_EQ_STR(value_rt(&fx, "5"), "5");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1e300"), "1e+300");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0.30000000000000004"),
                   "0.30000000000000004");               /* needs 17 */
  SL_ASSERT_EQ_STR(value_rt(&fx, "0.3333333333333333"),
                   "0.3333333333333333");                /* needs 16 */
  SL_ASSERT_EQ_STR(value_rt(&fx, "-0"), "-0");
  SL_ASSERT_TRUE(signbit(sl_row_get_f64(&fx.row, 0)));
  SL_ASSERT_EQ_STR(value_rt(&fx, "NaN"), "NaN");
  SL_ASSERT_TRUE(isnan(sl_row_get_f64(&fx.row, 0)));
  SL_ASSERT_EQ_STR(value_rt(&fx, "nan"), "NaN");
  SL_ASSERT_EQ_STR(value_rt(&fx, "Infinity"), "Infinity");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-Infinity"), "-Infinity");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-inf"), "-Infinity");
  SL_ASSERT_EQ_STR(value_err(&fx, "1e999"),
                   "'1e999' is out of range for float64");
  SL_ASSERT_EQ_STR(value_err(&fx, "1.5x"), "expected float64, got '1.5x'");
  SL_ASSERT_EQ_STR(value_err(&fx, " 1.5"), "expected float64, got ' 1.5'");
  SL_ASSERT_EQ_STR(value_err(&fx, ""), "expected float64, got ''");

  /* Every double survives text exactly. */
  double vals[] = {1.0 / 3, 2.0 / 3, 1e-310, 123456789.123456789,
                   -9007199254740993.0, 4.35, 0.1 + 0.7};
  for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
    char text[64];
    snprintf(text, sizeof(text), "%.17g", vals[k]);
    value_rt(&fx, text);
    SL_ASSERT_TRUE(sl_row_get_f64(&fx.row, 0) == vals[k]);
    char again[64];
    snprintf(again, sizeof(again), "%s", fx_text(&fx));
    value_rt(&fx, again);
    SL_ASSERT_TRUE(sl_row_get_f64(&fx.row, 0) == vals[k]);
  }
  fx_close(&fx);
}

SL_TEST(value_decimal_exact) {
  fx_t fx;
  fx_init(&fx, "d:decimal(10,2)");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-123.45"), "-123.45");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -12345);
  SL_ASSERT_EQ_STR(value_rt(&fx, "7"), "7.00");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), 700);
  SL_ASSERT_EQ_STR(value_rt(&fx, "-0.5"), "-0.50");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-.05"), "-0.05");
  SL_ASSERT_EQ_STR(value_rt(&fx, "+3."), "3.00");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0"), "0.00");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-0.00"), "0.00");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1.5e2"), "150.00");
  SL_ASSERT_EQ_STR(value_rt(&fx, "125e-2"), "1.25");
  SL_ASSERT_EQ_STR(value_rt(&fx, "00012345678.99"), "12345678.99");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-99999999.99"), "-99999999.99");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -9999999999ll);
  SL_ASSERT_EQ_STR(value_err(&fx, "1.234"),
                   "'1.234' has more fraction digits than decimal(10,2) "
                   "allows");
  SL_ASSERT_EQ_STR(value_err(&fx, "1.230"),
                   "'1.230' has more fraction digits than decimal(10,2) "
                   "allows");
  SL_ASSERT_EQ_STR(value_err(&fx, "125e-3"),
                   "'125e-3' has more fraction digits than decimal(10,2) "
                   "allows");
  SL_ASSERT_EQ_STR(value_err(&fx, "123456789"),
                   "'123456789' is out of range for decimal(10,2)");
  SL_ASSERT_EQ_STR(value_err(&fx, "1e9"),
                   "'1e9' is out of range for decimal(10,2)");
  SL_ASSERT_EQ_STR(value_err(&fx, "1.2.3"),
                   "expected decimal(10,2), got '1.2.3'");
  SL_ASSERT_EQ_STR(value_err(&fx, "."), "expected decimal(10,2), got '.'");
  SL_ASSERT_EQ_STR(value_err(&fx, "1e"), "expected decimal(10,2), got '1e'");
  SL_ASSERT_EQ_STR(value_err(&fx, "$5"), "expected decimal(10,2), got '$5'");
  fx_close(&fx);

  fx_init(&fx, "d:decimal(18,0)");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-999999999999999999"),
                   "-999999999999999999");
  SL_ASSERT_EQ_STR(value_err(&fx, "1000000000000000000"),
                   "'1000000000000000000' is out of range for decimal(18,0)");
  fx_close(&fx);

  fx_init(&fx, "d:decimal(18,18)");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-0.000000000000000001"),
                   "-0.000000000000000001");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0.999999999999999999"),
                   "0.999999999999999999");
  SL_ASSERT_EQ_STR(value_err(&fx, "1"),
                   "'1' is out of range for decimal(18,18)");
  fx_close(&fx);
}

SL_TEST(value_timestamp_forms) {
  fx_t fx;
  fx_init(&fx, "t:timestamp");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0"), "1970-01-01T00:00:00.000000Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-1"), "1969-12-31T23:59:59.999999Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1969-07-20T20:17:40Z"),
                   "1969-07-20T20:17:40.000000Z");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -14182940ll * 1000000);
  SL_ASSERT_EQ_STR(value_rt(&fx, "1900-01-01T00:00:00Z"),
                   "1900-01-01T00:00:00.000000Z");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -2208988800ll * 1000000);
  SL_ASSERT_EQ_STR(value_rt(&fx, "1969-12-31T23:59:59.5Z"),
                   "1969-12-31T23:59:59.500000Z");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -500000);
  /* Offsets are applied; output is always UTC. */
  SL_ASSERT_EQ_STR(value_rt(&fx, "2024-02-29T12:00:00+05:30"),
                   "2024-02-29T06:30:00.000000Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "2000-01-01 00:00:00.25-01:00"),
                   "2000-01-01T01:00:00.250000Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1970-01-01T00:30:00+01:00"),
                   "1969-12-31T23:30:00.000000Z");
  /* Nanoseconds are dropped, toward the past. */
  SL_ASSERT_EQ_STR(value_rt(&fx, "2021-06-01T10:11:12.123456789Z"),
                   "2021-06-01T10:11:12.123456Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1600-02-29T00:00:00Z"),
                   "1600-02-29T00:00:00.000000Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "1582-10-04T00:00:00z"),
                   "1582-10-04T00:00:00.000000Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "0000-01-01T00:00:00Z"),
                   "0000-01-01T00:00:00.000000Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-0001-12-31T23:59:59.999999Z"),
                   "-0001-12-31T23:59:59.999999Z");
  /* The extremes of int64 microseconds format and parse back. */
  SL_ASSERT_EQ_STR(value_rt(&fx, "9223372036854775807"),
                   "+294247-01-10T04:00:54.775807Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "+294247-01-10T04:00:54.775807Z"),
                   "+294247-01-10T04:00:54.775807Z");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), INT64_MAX);
  SL_ASSERT_EQ_STR(value_rt(&fx, "-9223372036854775808"),
                   "-290308-12-21T19:59:05.224192Z");
  SL_ASSERT_EQ_STR(value_rt(&fx, "-290308-12-21T19:59:05.224192Z"),
                   "-290308-12-21T19:59:05.224192Z");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), INT64_MIN);
  SL_ASSERT_EQ_STR(value_err(&fx, "+294247-01-10T04:00:54.775808Z"),
                   "'+294247-01-10T04:00:54.775808Z' is out of range for "
                   "timestamp");
  SL_ASSERT_EQ_STR(value_err(&fx, "2023-02-29T00:00:00Z"),
                   "expected timestamp, got '2023-02-29T00:00:00Z'");
  SL_ASSERT_EQ_STR(value_err(&fx, "2023-01-01T00:00:00"),
                   "expected timestamp, got '2023-01-01T00:00:00'");
  SL_ASSERT_EQ_STR(value_err(&fx, "2023-01-01T24:00:00Z"),
                   "expected timestamp, got '2023-01-01T24:00:00Z'");
  SL_ASSERT_EQ_STR(value_err(&fx, "2023-01-01T00:00:00.Z"),
                   "expected timestamp, got '2023-01-01T00:00:00.Z'");
  SL_ASSERT_EQ_STR(value_err(&fx, "2023-01-01T00:00:00.1234567890Z"),
                   "expected timestamp, got '2023-01-01T00:00:00.1234567890Z'");
  SL_ASSERT_EQ_STR(value_err(&fx, "2023-01-01T00:00:00+0100"),
                   "expected timestamp, got '2023-01-01T00:00:00+0100'");

  /* Every day from 1968 to 1972 at a time near midnight. */
  int64_t day_us = 86400ll * 1000000;
  for (int64_t d = -731; d < 1100; d++) {
    int64_t us = d * day_us - 1;
    char text[32], again[64];
    snprintf(text, sizeof(text), "%" PRId64, us);
    snprintf(again, sizeof(again), "%s", value_rt(&fx, text));
    value_rt(&fx, again);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), us);
  }
  fx_close(&fx);
}

SL_TEST(value_base64_bytes) {
  static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba",
                                "foobar"};
  static const char *coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  fx_t fx;
  fx_init(&fx, "by:bytes");
  for (size_t k = 0; k < 7; k++) {
    SL_ASSERT_EQ_STR(value_rt(&fx, coded[k]), coded[k]);
    sl_slice_t s = sl_row_get_str(&fx.row, 0);
    SL_ASSERT_EQ_INT(s.len, strlen(plain[k]));
    SL_ASSERT_TRUE(memcmp(s.ptr, plain[k], s.len) == 0);
  }
  SL_ASSERT_EQ_STR(value_rt(&fx, "AP8A/w=="), "AP8A/w==");
  sl_slice_t s = sl_row_get_str(&fx.row, 0);
  SL_ASSERT_EQ_INT(s.len, 4);
  SL_ASSERT_TRUE(memcmp(s.ptr, "\x00\xff\x00\xff", 4) == 0);
  SL_ASSERT_EQ_STR(value_err(&fx, "Zg="), "expected base64 bytes, got 'Zg='");
  SL_ASSERT_EQ_STR(value_err(&fx, "Zh=="),
                   "expected base64 bytes, got 'Zh=='");      /* stray bits */
  SL_ASSERT_EQ_STR(value_err(&fx, "Zg==Zg=="),
                   "expected base64 bytes, got 'Zg==Zg=='");  /* inner pad */
  SL_ASSERT_EQ_STR(value_err(&fx, "Zm9v!A=="),
                   "expected base64 bytes, got 'Zm9v!A=='");
  SL_ASSERT_EQ_STR(value_err(&fx, "Zm9v\nYg=="),
                   "expected base64 bytes, got 'Zm9v\\nYg=='");

  /* All byte values, at lengths that exercise each padding case; large
   * enough to use the heap buffer. */
  uint8_t raw[300];
  for (size_t k = 0; k < sizeof(raw); k++) raw[k] = (uint8_t)(k * 7);
  for (size_t n = 298; n <= 300; n++) {
    sl_row_builder_reset(&fx.b, SL_ROW_INSERT);
    SL_ASSERT_OK(sl_row_builder_set_str(&fx.b, 0, raw, (uint32_t)n));
    SL_ASSERT_OK(sl_row_builder_finish(&fx.b, &fx.row, NULL));
    sl_bytes_clear(&fx.out);
    SL_ASSERT_OK(sl_value_format(&fx.row, 0, &fx.out));
    SL_ASSERT_EQ_INT(fx.out.len, (n + 2) / 3 * 4);
    char *text = sl_strdup(fx_text(&fx));
    value_rt(&fx, text);
    sl_free(text);
    s = sl_row_get_str(&fx.row, 0);
    SL_ASSERT_EQ_INT(s.len, n);
    SL_ASSERT_TRUE(memcmp(s.ptr, raw, n) == 0);
  }
  fx_close(&fx);
}

SL_TEST(value_error_text_is_truncated) {
  fx_t fx;
  fx_init(&fx, "i:int64");
  SL_ASSERT_EQ_STR(
      value_err(&fx, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
      "expected int64, got 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN...'");
  /* Exactly 40 characters are shown whole. */
  SL_ASSERT_EQ_STR(value_err(&fx, "x123456789012345678901234567890123456789"),
                   "expected int64, got "
                   "'x123456789012345678901234567890123456789'");
  /* The echo in a range error is cut the same way. */
  SL_ASSERT_EQ_STR(value_err(&fx, "12345678901234567890123456789012345678901"),
                   "'1234567890123456789012345678901234567890...' is out of "
                   "range for int64");
  /* The cut does not split a UTF-8 sequence: 39 x, then a 2-byte e-acute. */
  SL_ASSERT_EQ_STR(value_err(&fx, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                  "\xc3\xa9yz"),
                   "expected int64, got "
                   "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'");
  fx_close(&fx);
}

/*
 * Issue 12: bytes a reader cannot see are escaped in messages (a UTF-8 byte
 * order mark was echoed invisibly; control characters became '?').
 */
SL_TEST(value_error_text_escapes_invisible_bytes) {
  fx_t fx;
  fx_init(&fx, "i:int64");
  SL_ASSERT_EQ_STR(value_err(&fx, "\xEF\xBB\xBF" "1"),
                   "expected int64, got '\\xEF\\xBB\\xBF1'");
  SL_ASSERT_EQ_STR(value_err(&fx, "1\t2\r\x01\x7f"),
                   "expected int64, got '1\\t2\\r\\x01\\x7F'");
  /* Not UTF-8, a zero-width space, and visible UTF-8 kept as it is. */
  SL_ASSERT_EQ_STR(value_err(&fx, "\xff\xc3(\xE2\x80\x8B" "caf\xc3\xa9"),
                   "expected int64, got "
                   "'\\xFF\\xC3(\\xE2\\x80\\x8Bcaf\xc3\xa9'");
  /* 40 input bytes at most; an escape is never cut in half. */
  SL_ASSERT_EQ_STR(value_err(&fx, "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
                                  "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
                                  "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
                                  "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
                                  "\x01"),
                   "expected int64, got '"
                   "\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01"
                   "\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01"
                   "\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01"
                   "\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01...'");
  fx_close(&fx);
}

SL_TEST(value_empty_text_is_not_null) {
  fx_t fx;
  fx_init(&fx, "s:string?");
  SL_ASSERT_EQ_STR(value_rt(&fx, ""), "");
  SL_ASSERT_TRUE(!sl_row_is_null(&fx.row, 0));
  SL_ASSERT_EQ_INT(sl_row_get_str(&fx.row, 0).len, 0);
  fx_close(&fx);
}

/* Empty bytes into an output buffer that has never been allocated (its
 * data pointer is NULL): nothing is written and nothing is touched.  The
 * encoder used to compute NULL + 0, which is undefined behaviour (clang's
 * -fsanitize=pointer-overflow reports it; gcc's UBSan does not check it). */
SL_TEST(value_empty_bytes_into_an_empty_buffer) {
  fx_t fx;
  fx_init(&fx, "by:bytes");
  sl_row_builder_reset(&fx.b, SL_ROW_INSERT);
  SL_ASSERT_OK(sl_row_builder_set_str(&fx.b, 0, "", 0));
  SL_ASSERT_OK(sl_row_builder_finish(&fx.b, &fx.row, NULL));
  SL_ASSERT_TRUE(fx.out.data == NULL);
  SL_ASSERT_OK(sl_value_format(&fx.row, 0, &fx.out));
  SL_ASSERT_EQ_INT(fx.out.len, 0);
  SL_ASSERT_TRUE(fx.out.data == NULL);
  /* And after other text: the text is kept, nothing is added. */
  SL_ASSERT_OK(sl_bytes_append(&fx.out, "x", 1));
  SL_ASSERT_OK(sl_value_format(&fx.row, 0, &fx.out));
  SL_ASSERT_EQ_STR(fx_text(&fx), "x");
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* CSV                                                                 */

#define ALL_TYPES                                                         \
  "b:bool?;i:int32?;j:int64?;f:float64?;d:decimal(10,2)?;s:string?;"      \
  "by:bytes?;t:timestamp?"

SL_TEST(csv_round_trip_every_type) {
  fx_t fx;
  fx_init(&fx, ALL_TYPES);
  SL_ASSERT_EQ_STR(
      csv_rt(&fx,
             "true,-5,9007199254740993,0.1,-123.45,hello,AAEC,"
             "1969-12-31T23:59:59.999999Z",
             false),
      "true,-5,9007199254740993,0.1,-123.45,hello,AAEC,"
      "1969-12-31T23:59:59.999999Z\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_INSERT);
  SL_ASSERT_EQ_INT(sl_row_get_bool(&fx.row, 0), 1);
  SL_ASSERT_EQ_INT(sl_row_get_i32(&fx.row, 1), -5);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 2), 9007199254740993ll);
  SL_ASSERT_EQ_DBL(sl_row_get_f64(&fx.row, 3), 0.1, 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 4), -12345);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 7), -1);

  /* Every field null. */
  SL_ASSERT_EQ_STR(csv_rt(&fx, ",,,,,,,", false), ",,,,,,,\n");
  for (uint32_t i = 0; i < 8; i++) SL_ASSERT_TRUE(sl_row_is_null(&fx.row, i));

  /* Non-finite floats, offsets, quoted numbers. */
  SL_ASSERT_EQ_STR(csv_rt(&fx,
                          "0,2147483647,\"-1\",NaN,\"7\",,,"
                          "1960-01-01 12:00:00+02:00",
                          false),
                   "false,2147483647,-1,NaN,7.00,,,"
                   "1960-01-01T10:00:00.000000Z\n");
  SL_ASSERT_EQ_STR(csv_rt(&fx, ",,,-Infinity,,,,", false),
                   ",,,-Infinity,,,,\n");
  SL_ASSERT_TRUE(isinf(sl_row_get_f64(&fx.row, 3)) &&
                 sl_row_get_f64(&fx.row, 3) < 0);
  fx_close(&fx);
}

SL_TEST(csv_null_versus_empty_string) {
  fx_t fx;
  fx_init(&fx, "a:string?;b:string?;c:bytes?");
  SL_ASSERT_EQ_STR(csv_rt(&fx, ",\"\",\"\"", false), ",\"\",\"\"\n");
  SL_ASSERT_TRUE(sl_row_is_null(&fx.row, 0));
  SL_ASSERT_TRUE(!sl_row_is_null(&fx.row, 1));
  SL_ASSERT_EQ_INT(sl_row_get_str(&fx.row, 1).len, 0);
  SL_ASSERT_TRUE(!sl_row_is_null(&fx.row, 2));
  SL_ASSERT_EQ_INT(sl_row_get_str(&fx.row, 2).len, 0);
  /* A trailing delimiter is one more (null) column. */
  SL_ASSERT_EQ_STR(csv_rt(&fx, "x,,", false), "x,,\n");
  SL_ASSERT_TRUE(sl_row_is_null(&fx.row, 1) && sl_row_is_null(&fx.row, 2));
  fx_close(&fx);
}

SL_TEST(csv_quoting_of_special_text) {
  fx_t fx;
  fx_init(&fx, "id:int64;s:string");
  SL_ASSERT_EQ_STR(csv_rt(&fx, "1,\"a,b\"", false), "1,\"a,b\"\n");
  SL_ASSERT_EQ_STR(csv_rt(&fx, "2,\"say \"\"hi\"\"\"", false),
                   "2,\"say \"\"hi\"\"\"\n");
  sl_slice_t s = sl_row_get_str(&fx.row, 1);
  SL_ASSERT_EQ_INT(s.len, 8);
  SL_ASSERT_TRUE(memcmp(s.ptr, "say \"hi\"", 8) == 0);
  SL_ASSERT_EQ_STR(csv_rt(&fx, "3,\"\"\"\"", false), "3,\"\"\"\"\n");
  SL_ASSERT_EQ_INT(sl_row_get_str(&fx.row, 1).len, 1);
  SL_ASSERT_EQ_STR(csv_rt(&fx, "4, padded ", false), "4,\" padded \"\n");
  SL_ASSERT_EQ_STR(csv_rt(&fx, "5,tab\t", false), "5,\"tab\t\"\n");
  SL_ASSERT_EQ_STR(csv_rt(&fx, "6,\"two\nlines\r\"", false),
                   "6,\"two\nlines\r\"\n");
  /* A bare quote inside an unquoted field is kept as text. */
  SL_ASSERT_EQ_STR(csv_rt(&fx, "7,5\" pipe", false), "7,\"5\"\" pipe\"\n");
  /* A CR line end is stripped (CRLF files). */
  SL_ASSERT_EQ_STR(csv_rt(&fx, "8,plain\r", false), "8,plain\n");
  SL_ASSERT_EQ_INT(sl_row_get_str(&fx.row, 1).len, 5);
  SL_ASSERT_EQ_STR(csv_rt(&fx, "9,\"quoted\"\r", false), "9,quoted\n");
  /* UTF-8 passes through untouched. */
  SL_ASSERT_EQ_STR(csv_rt(&fx, "10,gr\xc3\xbc\xc3\x9f" "e", false),
                   "10,gr\xc3\xbc\xc3\x9f" "e\n");
  fx_close(&fx);
}

SL_TEST(csv_other_delimiters) {
  fx_t fx;
  fx_init(&fx, "a:string;b:decimal(6,3);c:string?");
  csv_parse_ok(&fx, "x,y;1.5;\"p;q\"", ';', false);
  sl_slice_t s = sl_row_get_str(&fx.row, 0);
  SL_ASSERT_EQ_INT(s.len, 3);
  SL_ASSERT_TRUE(memcmp(s.ptr, "x,y", 3) == 0);
  sl_bytes_clear(&fx.out);
  SL_ASSERT_OK(sl_csv_format(&fx.row, ';', false, &fx.out));
  SL_ASSERT_EQ_STR(fx_text(&fx), "x,y;1.500;\"p;q\"\n");
  csv_parse_ok(&fx, "a\t2\t", '\t', false);
  sl_bytes_clear(&fx.out);
  SL_ASSERT_OK(sl_csv_format(&fx.row, '\t', false, &fx.out));
  SL_ASSERT_EQ_STR(fx_text(&fx), "a\t2.000\t\n");
  fx_close(&fx);
}

SL_TEST(csv_changelog_rows) {
  fx_t fx;
  fx_init(&fx, "id:int64;amount:decimal(8,2)?");
  SL_ASSERT_EQ_STR(csv_rt(&fx, "-U,1,2.50", true), "-U,1,2.50\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_UPDATE_BEFORE);
  SL_ASSERT_EQ_STR(csv_rt(&fx, "+U,1,", true), "+U,1,\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_UPDATE_AFTER);
  SL_ASSERT_EQ_STR(csv_rt(&fx, "\"-D\",1,3", true), "-D,1,3.00\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_DELETE);
  /* Without changelog the kind is always +I and not written. */
  SL_ASSERT_EQ_STR(csv_rt(&fx, "2,4", false), "2,4.00\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_INSERT);
  fx_close(&fx);
}

SL_TEST(csv_header_line) {
  fx_t fx;
  fx_init(&fx, "id:int64;amount:decimal(8,2)?;a b:string;x,y:string");
  SL_ASSERT_OK(sl_csv_format_header(fx.schema, ',', false, &fx.out));
  SL_ASSERT_EQ_STR(fx_text(&fx), "id,amount,a b,\"x,y\"\n");
  sl_bytes_clear(&fx.out);
  SL_ASSERT_OK(sl_csv_format_header(fx.schema, '|', true, &fx.out));
  SL_ASSERT_EQ_STR(fx_text(&fx), "op|id|amount|a b|x,y\n");
  fx_close(&fx);
}

/* Where a record ends, given text that may continue (is_eof false). */
static const char *rec_end(const char *text, bool is_eof, char delim) {
  static char res[64];
  size_t len = 99, consumed = 99;
  uint32_t n_breaks = 99;
  int rc = sl_csv_record_end(text, strlen(text), delim, is_eof, &len,
                             &consumed, &n_breaks);
  if (rc == SL_EAGAIN) return "again";
  SL_ASSERT_OK(rc);
  snprintf(res, sizeof(res), "%zu/%zu/%u", len, consumed, n_breaks);
  return res;
}

/* Issue 12: quoted fields may hold line ends (RFC 4180). */
SL_TEST(csv_record_end_spans_quoted_line_ends) {
  SL_ASSERT_EQ_STR(rec_end("1,a\n2,b\n", false, ','), "3/4/0");
  SL_ASSERT_EQ_STR(rec_end("1,a", false, ','), "again");
  SL_ASSERT_EQ_STR(rec_end("1,a", true, ','), "3/3/0");
  SL_ASSERT_EQ_STR(rec_end("1,\"a\nb\"\n2", false, ','), "7/8/1");
  SL_ASSERT_EQ_STR(rec_end("1,\"a\r\n\nb\",\"c\nd\"\r\n", false, ','),
                   "16/17/3"); /* the CR stays; the reader drops it */
  /* "" inside a quoted field is a quote; the field goes on. */
  SL_ASSERT_EQ_STR(rec_end("\"x\"\"\n\"\"y\"\nz", false, ','), "9/10/1");
  /* A quote that ends the text may be the first of "": read more. */
  SL_ASSERT_EQ_STR(rec_end("1,\"a\nb\"", false, ','), "again");
  SL_ASSERT_EQ_STR(rec_end("1,\"a\nb\"", true, ','), "7/7/1");
  SL_ASSERT_EQ_STR(rec_end("1,\"a\nb", false, ','), "again");
  /* Unterminated at the end of input: the rest, for the parser to refuse. */
  SL_ASSERT_EQ_STR(rec_end("1,\"a\nb\n", true, ','), "7/7/2");
  /* A quote inside an unquoted field is text and opens nothing. */
  SL_ASSERT_EQ_STR(rec_end("1,a\"b\n2,\"", false, ','), "5/6/0");
  /* A field starts after the delimiter in use. */
  SL_ASSERT_EQ_STR(rec_end("1;\"a\nb\"\n", false, ';'), "7/8/1");
  SL_ASSERT_EQ_STR(rec_end("1,\"a\nb\"\n", false, ';'), "4/5/0");
}

/* Issue 12: a quoted header was refused. */
SL_TEST(csv_header_check) {
  fx_t fx;
  fx_init(&fx, "id:int64;a\"b:string;x,y:string");
  static const char *const ok[] = {
      "id,\"a\"\"b\",\"x,y\"", "\"id\",\"a\"\"b\",\"x,y\"\r"};
  for (size_t i = 0; i < 2; i++)
    SL_ASSERT_OK(sl_csv_check_header(ok[i], strlen(ok[i]), ',', fx.schema,
                                     NULL));
  static const char *const bad[][2] = {
      {"id,a\"b,x", "header column 3 is 'x' but field 3 of the schema is "
                    "'x,y'"},
      {"ID,\"a\"\"b\",\"x,y\"", "header column 1 is 'ID' but field 1 of the "
                                "schema is 'id'"},
      {"id,\"a\"\"b\",\"x,y\",z", "the header has 4 columns but the schema "
                                  "has 3 fields"},
      {"id,\"a\"\"b\"", "the header has 2 columns but the schema has 3 "
                        "fields"},
      {"id,\"a\"x", "header column 2: text after the closing quote"},
      {"\xEF\xBB\xBFid,\"a\"\"b\",\"x,y\"", "header column 1 is "
       "'\\xEF\\xBB\\xBFid' but field 1 of the schema is 'id'"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    fx_clear_err(&fx);
    SL_ASSERT_EQ_INT(sl_csv_check_header(bad[i][0], strlen(bad[i][0]), ',',
                                         fx.schema, &fx.err),
                     SL_EPARSE);
    SL_ASSERT_EQ_STR(sl_error_message(fx.err), bad[i][1]);
  }
  fx_close(&fx);
}

SL_TEST(csv_parse_resets_the_builder) {
  fx_t fx;
  fx_init(&fx, "id:int64?;s:string?");
  csv_parse_ok(&fx, "-D,5,x", ',', true);
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_DELETE);
  csv_parse_ok(&fx, ",", ',', false);
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_INSERT);
  SL_ASSERT_TRUE(sl_row_is_null(&fx.row, 0) && sl_row_is_null(&fx.row, 1));
  /* A failed parse leaves no stale values for the next one either. */
  SL_ASSERT_EQ_STR(csv_err(&fx, "7,\"open", false),
                   "column 2 (s): unterminated quoted field");
  csv_parse_ok(&fx, ",", ',', false);
  SL_ASSERT_TRUE(sl_row_is_null(&fx.row, 0));
  fx_close(&fx);
}

SL_TEST(csv_error_messages) {
  fx_t fx;
  fx_init(&fx, "id:int32;amount:int64;note:string?");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,abc,x", false),
                   "column 2 (amount): expected int64, got 'abc'");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,2,3,4", false),
                   "expected 3 columns, got 4");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,2", false), "expected 3 columns, got 2");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,2,\"a,b\",", false),
                   "expected 3 columns, got 4");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,,x", false),
                   "column 2 (amount): null in a non-nullable field");
  SL_ASSERT_EQ_STR(csv_err(&fx, "3000000000,1,", false),
                   "column 1 (id): '3000000000' is out of range for int32");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,\"\",", false),
                   "column 2 (amount): expected int64, got ''");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,2,\"unterminated", false),
                   "column 3 (note): unterminated quoted field");
  SL_ASSERT_EQ_STR(csv_err(&fx, "\"1\"x,2,", false),
                   "column 1 (id): text after the closing quote");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,2,3,\"x", false),
                   "column 4: unterminated quoted field");
  SL_ASSERT_EQ_STR(csv_err(&fx, "1,2,x", true), "expected 4 columns, got 3");
  SL_ASSERT_EQ_STR(csv_err(&fx, "+X,1,2,x", true),
                   "column 1 (op): expected a row kind (+I, -U, +U, -D), "
                   "got '+X'");
  SL_ASSERT_EQ_STR(csv_err(&fx, ",1,2,x", true),
                   "column 1 (op): expected a row kind (+I, -U, +U, -D), "
                   "got ''");
  SL_ASSERT_EQ_STR(csv_err(&fx, "+I,1,x,", true),
                   "column 3 (amount): expected int64, got 'x'");
  fx_close(&fx);

  fx_init(&fx, "t:timestamp;d:decimal(5,2)");
  SL_ASSERT_EQ_STR(csv_err(&fx, "2024-13-01T00:00:00Z,1", false),
                   "column 1 (t): expected timestamp, got "
                   "'2024-13-01T00:00:00Z'");
  SL_ASSERT_EQ_STR(csv_err(&fx, "0,1.005", false),
                   "column 2 (d): '1.005' has more fraction digits than "
                   "decimal(5,2) allows");
  SL_ASSERT_EQ_STR(csv_err(&fx, "0,1000", false),
                   "column 2 (d): '1000' is out of range for decimal(5,2)");
  fx_close(&fx);
}

SL_TEST(csv_existing_error_is_kept) {
  fx_t fx;
  fx_init(&fx, "id:int64");
  fx.err = sl_error_create(SL_EIO, "first");
  SL_ASSERT_EQ_INT(sl_csv_parse("x", 1, ',', false, &fx.b, &fx.err),
                   SL_EPARSE);
  SL_ASSERT_EQ_STR(sl_error_message(fx.err), "first");
  SL_ASSERT_EQ_INT(sl_error_code(fx.err), SL_EIO);
  /* And a NULL out_err is allowed. */
  SL_ASSERT_EQ_INT(sl_csv_parse("x", 1, ',', false, &fx.b, NULL), SL_EPARSE);
  SL_ASSERT_EQ_INT(sl_json_parse("{\"id\":\"x\"}", 10, false, &fx.b, NULL),
                   SL_EPARSE);
  fx_close(&fx);
}

SL_TEST(csv_bad_delimiter_is_refused) {
  fx_t fx;
  fx_init(&fx, "id:int64");
  SL_ASSERT_EQ_INT(sl_csv_parse("1", 1, '"', false, &fx.b, &fx.err),
                   SL_EINVAL);
  csv_parse_ok(&fx, "1", ',', false);
  SL_ASSERT_EQ_INT(sl_csv_format(&fx.row, '\n', false, &fx.out), SL_EINVAL);
  SL_ASSERT_EQ_INT(fx.out.len, 0);
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */

SL_TEST(json_round_trip_every_type) {
  fx_t fx;
  fx_init(&fx, ALL_TYPES);
  const char *line =
      "{\"b\":true,\"i\":-5,\"j\":9007199254740993,\"f\":0.1,"
      "\"d\":-123.45,\"s\":\"hello\",\"by\":\"AAEC\","
      "\"t\":\"1969-12-31T23:59:59.999999Z\"}\n";
  SL_ASSERT_EQ_STR(json_rt(&fx, line, false), line);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 2), 9007199254740993ll);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 4), -12345);
  sl_slice_t s = sl_row_get_str(&fx.row, 6);
  SL_ASSERT_EQ_INT(s.len, 3);
  SL_ASSERT_TRUE(memcmp(s.ptr, "\x00\x01\x02", 3) == 0);

  /* Other accepted spellings; members in any order. */
  SL_ASSERT_EQ_STR(
      json_rt(&fx,
              "{\"t\":-1,\"f\":5,\"d\":\"7\",\"i\":1e3,\"j\":-0.0,"
              "\"b\":false}",
              false),
      "{\"b\":false,\"i\":1000,\"j\":0,\"f\":5.0,\"d\":7.00,\"s\":null,"
      "\"by\":null,\"t\":\"1969-12-31T23:59:59.999999Z\"}\n");
  SL_ASSERT_EQ_STR(
      json_rt(&fx, "{\"t\":\"2024-02-29 12:00:00+05:30\",\"d\":12}", false),
      "{\"b\":null,\"i\":null,\"j\":null,\"f\":null,\"d\":12.00,\"s\":null,"
      "\"by\":null,\"t\":\"2024-02-29T06:30:00.000000Z\"}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{}", false),
                   "{\"b\":null,\"i\":null,\"j\":null,\"f\":null,\"d\":null,"
                   "\"s\":null,\"by\":null,\"t\":null}\n");
  fx_close(&fx);
}

SL_TEST(json_floats_keep_their_identity) {
  fx_t fx;
  fx_init(&fx, "f:float64");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":\"NaN\"}", false), "{\"f\":\"NaN\"}\n");
  SL_ASSERT_TRUE(isnan(sl_row_get_f64(&fx.row, 0)));
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":\"Infinity\"}", false),
                   "{\"f\":\"Infinity\"}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":\"-Infinity\"}", false),
                   "{\"f\":\"-Infinity\"}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":-0.0}", false), "{\"f\":-0.0}\n");
  SL_ASSERT_TRUE(signbit(sl_row_get_f64(&fx.row, 0)));
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":1e300}", false), "{\"f\":1e+300}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":0.30000000000000004}", false),
                   "{\"f\":0.30000000000000004}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"f\":\"2.5\"}", false), "{\"f\":2.5}\n");
  /* Our own output parses back to the same double. */
  char again[64];
  snprintf(again, sizeof(again), "%s", json_rt(&fx, "{\"f\":1e300}", false));
  json_parse_ok(&fx, again, false);
  SL_ASSERT_TRUE(sl_row_get_f64(&fx.row, 0) == 1e300);
  fx_close(&fx);
}

SL_TEST(json_decimal_members) {
  fx_t fx;
  fx_init(&fx, "d:decimal(10,2)");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"d\":-0.5}", false), "{\"d\":-0.50}\n");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -50);
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"d\":12345678.99}", false),
                   "{\"d\":12345678.99}\n");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), 1234567899);
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"d\":1e2}", false), "{\"d\":100.00}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"d\":-42}", false), "{\"d\":-42.00}\n");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"d\":\"0.07\"}", false), "{\"d\":0.07}\n");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"d\":0.125}", false),
                   "member 'd': '0.125' has more fraction digits than "
                   "decimal(10,2) allows");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"d\":100000000}", false),
                   "member 'd': 100000000 is out of range for decimal(10,2)");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"d\":true}", false),
                   "member 'd': expected decimal(10,2), got boolean");
  fx_close(&fx);

  /* Wider than a double carries: written as a string, read exactly. */
  fx_init(&fx, "d:decimal(18,2);n:decimal(18,0)");
  SL_ASSERT_EQ_STR(json_rt(&fx,
                           "{\"d\":\"-9999999999999999.99\","
                           "\"n\":999999999999999999}",
                           false),
                   "{\"d\":\"-9999999999999999.99\","
                   "\"n\":999999999999999999}\n");
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 0), -999999999999999999ll);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&fx.row, 1), 999999999999999999ll);
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"d\":1.25,\"n\":3}", false),
                   "{\"d\":\"1.25\",\"n\":3}\n");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"d\":1234567890123456.78,\"n\":0}", false),
                   "member 'd': number 1234567890123456.8 has too many digits "
                   "to be read exactly as decimal(18,2); write it as a "
                   "string");
  fx_close(&fx);
}

SL_TEST(json_string_escaping) {
  fx_t fx;
  fx_init(&fx, "s:string;\"q\\:string?");
  /* Quotes, backslashes, control characters and NUL round trip. */
  const char *line =
      "{\"s\":\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\\u0000/\x7f"
      "\\u00e9\\ud83d\\ude00\",\"\\\"q\\\\\":null}";
  SL_ASSERT_EQ_STR(json_rt(&fx, line, false),
                   "{\"s\":\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\\u0000/"
                   "\x7f\xc3\xa9\xf0\x9f\x98\x80\",\"\\\"q\\\\\":null}\n");
  sl_slice_t s = sl_row_get_str(&fx.row, 0);
  static const char want[] = "a\"b\\c\n\r\t\b\f\x01\x1f\0/\x7f\xc3\xa9"
                             "\xf0\x9f\x98\x80";
  SL_ASSERT_EQ_INT(s.len, sizeof(want) - 1);
  SL_ASSERT_TRUE(memcmp(s.ptr, want, s.len) == 0);

  /* Bytes that are not UTF-8 become U+FFFD, one per byte. */
  static const char bad[] = "x\xff\xc3(\xed\xa0\x80y";
  sl_row_builder_reset(&fx.b, SL_ROW_INSERT);
  SL_ASSERT_OK(sl_row_builder_set_str(&fx.b, 0, bad, sizeof(bad) - 1));
  SL_ASSERT_OK(sl_row_builder_finish(&fx.b, &fx.row, NULL));
  sl_bytes_clear(&fx.out);
  SL_ASSERT_OK(sl_json_format(&fx.row, false, &fx.out));
  SL_ASSERT_EQ_STR(fx_text(&fx),
                   "{\"s\":\"x\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd"
                   "\xef\xbf\xbd\xef\xbf\xbdy\",\"\\\"q\\\\\":null}\n");
  /* and the result is valid JSON again. */
  char *text = sl_strdup(fx_text(&fx));
  json_parse_ok(&fx, text, false);
  sl_free(text);
  fx_close(&fx);
}

SL_TEST(json_changelog_rows) {
  fx_t fx;
  fx_init(&fx, "id:int64;v:string?");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"v\":\"x\",\"op\":\"-U\",\"id\":1}", true),
                   "{\"op\":\"-U\",\"id\":1,\"v\":\"x\"}\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_UPDATE_BEFORE);
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"op\":\"-D\",\"id\":2}", true),
                   "{\"op\":\"-D\",\"id\":2,\"v\":null}\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_DELETE);
  /* Without changelog, "op" is just an unknown member. */
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"op\":\"-D\",\"id\":2}", false),
                   "unknown member 'op'");
  SL_ASSERT_EQ_STR(json_rt(&fx, "{\"id\":3}", false),
                   "{\"id\":3,\"v\":null}\n");
  SL_ASSERT_EQ_INT(sl_row_kind(&fx.row), SL_ROW_INSERT);
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":2}", true),
                   "member 'op' is missing or null");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"op\":\"+X\",\"id\":2}", true),
                   "member 'op': expected a row kind (+I, -U, +U, -D), got "
                   "'+X'");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"op\":1,\"id\":2}", true),
                   "member 'op': expected a row kind (+I, -U, +U, -D), got "
                   "number");
  fx_close(&fx);

  /* A field called "op" cannot be told apart from the row kind. */
  fx_init(&fx, "op:string");
  fx_clear_err(&fx);
  SL_ASSERT_EQ_INT(sl_json_parse("{\"op\":\"+I\"}", 11, true, &fx.b, &fx.err),
                   SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(fx.err),
                   "field 'op' clashes with the changelog member 'op'");
  json_parse_ok(&fx, "{\"op\":\"+I\"}", false);
  SL_ASSERT_EQ_INT(sl_json_format(&fx.row, true, &fx.out), SL_EINVAL);
  SL_ASSERT_EQ_INT(fx.out.len, 0);
  fx_close(&fx);
}

SL_TEST(json_error_messages) {
  fx_t fx;
  fx_init(&fx, "id:int32;amount:int64;x:string;b:bool?;t:timestamp?");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":\"12\",\"x\":\"\"}", false),
      "member 'amount': expected int64, got string");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1,\"amount\":2}", false),
                   "member 'x' is missing or null but the field is not "
                   "nullable");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1,\"amount\":2,\"x\":null}", false),
                   "member 'x' is missing or null but the field is not "
                   "nullable");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":2,\"x\":\"\",\"foo\":1}", false),
      "unknown member 'foo'");
  /* A misspelt member is reported rather than the field it leaves empty. */
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1,\"amuont\":2,\"x\":\"\"}", false),
                   "unknown member 'amuont'");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":1.5,\"x\":\"\"}", false),
      "member 'amount': expected int64, got non-integral number 1.5");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":3000000000,\"amount\":1,\"x\":\"\"}", false),
      "member 'id': 3000000000 is out of range for int32");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":1e19,\"x\":\"\"}", false),
      "member 'amount': 1e+19 is out of range for int64");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1,\"amount\":1,\"x\":5}", false),
                   "member 'x': expected string, got number");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":1,\"x\":\"\",\"b\":1}", false),
      "member 'b': expected bool, got number");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":1,\"x\":\"\",\"t\":\"noon\"}",
               false),
      "member 't': expected timestamp, got 'noon'");
  SL_ASSERT_EQ_STR(
      json_err(&fx, "{\"id\":1,\"amount\":1,\"x\":\"\",\"t\":[]}", false),
      "member 't': expected timestamp, got array");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1,", false),
                   "invalid JSON at column 8: string or '}' expected near "
                   "end of file");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1,\"id\":2}", false),
                   "invalid JSON at column 12: duplicate object key near "
                   "'\"id\"'");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"id\":1} x", false),
                   "invalid JSON at column 10: end of file expected near 'x'");
  SL_ASSERT_EQ_STR(json_err(&fx, "[1,2]", false),
                   "expected a JSON object, got array");
  SL_ASSERT_EQ_STR(json_err(&fx, "42", false),
                   "expected a JSON object, got number");
  fx_close(&fx);

  fx_init(&fx, "by:bytes");
  SL_ASSERT_EQ_STR(json_err(&fx, "{\"by\":\"not base64\"}", false),
                   "member 'by': expected base64 bytes, got 'not base64'");
  fx_close(&fx);
}

SL_TEST(json_accepts_surrounding_space) {
  fx_t fx;
  fx_init(&fx, "id:int64");
  SL_ASSERT_EQ_STR(json_rt(&fx, "  { \"id\" : 7 }\r\n", false),
                   "{\"id\":7}\n");
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* Allocation failures                                                 */

static long alloc_budget = -1; /* allocations left; -1 = unlimited */

static bool alloc_take(void) {
  if (alloc_budget < 0) return true;
  if (alloc_budget == 0) return false;
  alloc_budget--;
  return true;
}
static void *fail_malloc(size_t n) { return alloc_take() ? malloc(n) : NULL; }
static void *fail_calloc(size_t n, size_t m) {
  return alloc_take() ? calloc(n, m) : NULL;
}
static void *fail_realloc(void *p, size_t n) {
  return alloc_take() ? realloc(p, n) : NULL;
}

/*
 * Fail the k-th allocation for every k while parsing and formatting a row
 * with long values: no crash, no leak (LeakSanitizer), an error code that
 * says so, and no partial record in the output buffer.
 */
SL_TEST(allocation_failures_are_clean) {
  static const sl_allocator_t failing = {fail_malloc, fail_calloc,
                                         fail_realloc, free};
  char line[2048], json[2300];
  char big[600];
  memset(big, 'q', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  big[10] = '"';
  snprintf(line, sizeof(line), "+U,\"%s\"\"x\",%s,1.5", "pre", big);
  snprintf(json, sizeof(json), "{\"op\":\"+U\",\"a\":\"pre\\\"x\",\"b\":\"%s\","
           "\"f\":1.5}", "QUJD");
  bool saw_failure = false, saw_success = false, saw_format_failure = false;
  for (long k = 0; k < 64; k++) {
    fx_t fx;
    fx_init(&fx, "a:string;b:string;f:float64");
    SL_ASSERT_OK(sl_bytes_append(&fx.out, "keep", 4));
    sl_set_allocator(&failing);
    alloc_budget = k;
    int rc = sl_csv_parse(line, strlen(line), ',', true, &fx.b, &fx.err);
    if (rc == SL_OK) rc = sl_row_builder_finish(&fx.b, &fx.row, &fx.err);
    bool is_parsed = rc == SL_OK;
    if (rc == SL_OK) rc = sl_csv_format(&fx.row, ',', true, &fx.out);
    if (rc == SL_OK) rc = sl_json_format(&fx.row, true, &fx.out);
    alloc_budget = -1;
    sl_set_allocator(NULL);
    if (rc == SL_OK) {
      saw_success = true;
      SL_ASSERT_TRUE(fx.out.len > 4);
    } else {
      saw_failure = true;
      saw_format_failure |= is_parsed;
      SL_ASSERT_TRUE(rc == SL_ENOMEM || rc == SL_EOVERFLOW);
      /* Only whole records: "keep", or "keep" and the CSV record. */
      SL_ASSERT_TRUE(fx.out.len == 4 ||
                     (fx.out.len > 4 && fx.out.data[fx.out.len - 1] == '\n'));
    }
    SL_ASSERT_TRUE(memcmp(fx.out.data, "keep", 4) == 0);
    fx_close(&fx);

    fx_init(&fx, "a:string;b:bytes;f:float64");
    sl_set_allocator(&failing);
    alloc_budget = k;
    rc = sl_json_parse(json, strlen(json), true, &fx.b, &fx.err);
    alloc_budget = -1;
    sl_set_allocator(NULL);
    SL_ASSERT_TRUE(rc == SL_OK || rc == SL_ENOMEM || rc == SL_EOVERFLOW);
    fx_close(&fx);
  }
  SL_ASSERT_TRUE(saw_failure && saw_success && saw_format_failure);
}
