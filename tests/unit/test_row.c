/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of rows (src/core/schema.c, row.c, codec.c): schema creation
 * errors, fingerprints and the schema storage encoding, including every
 * truncation and every single-byte corruption of an encoding; the binary
 * row builder for every type, row kinds and the non-nullable check; row
 * validation of good rows and of every single-byte corruption of a sample
 * row; the compact codec over many seeded random rows and its truncations;
 * canonical key bytes; and the conversions of sl_row_builder_set_value.
 * Decoders are always handed a heap copy of exactly the bytes under test,
 * so that ASan catches any read past the end.
 */
#include <math.h>

#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s; }
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static sl_type_t ty(sl_type_id_t id, bool nullable) {
  sl_type_t t = {(uint8_t)id, 0, 0, nullable};
  return t;
}

static sl_type_t dec(uint8_t precision, uint8_t scale, bool nullable) {
  sl_type_t t = {SL_TYPE_DECIMAL, precision, scale, nullable};
  return t;
}

static sl_schema_t *make_schema(const sl_field_t *f, uint32_t n) {
  sl_schema_t *s = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_schema_create(f, n, &s, &err), err);
  SL_ASSERT_TRUE(s != NULL);
  return s;
}

/* A heap copy of exactly len bytes (len 0 still gives a valid pointer). */
static uint8_t *dup_exact(const void *p, size_t len) {
  uint8_t *d = malloc(len ? len : 1);
  SL_ASSERT_TRUE(d != NULL);
  if (len) memcpy(d, p, len);
  return d;
}

static bool contains(const char *hay, const char *needle) {
  return hay != NULL && strstr(hay, needle) != NULL;
}

#define SL_ASSERT_CONTAINS(hay, needle)                                  \
  do {                                                                   \
    const char *sl_h_ = (hay);                                           \
    if (!contains(sl_h_, (needle)))                                      \
      SL_TEST_FAIL("'%s' does not contain '%s'", sl_h_ ? sl_h_ : "(null)", \
                   (needle));                                            \
  } while (0)

/* Every type, each non-nullable and nullable: 16 fields. */
static const sl_field_t all_fields[] = {
    {"b", {SL_TYPE_BOOL, 0, 0, false}},
    {"i32", {SL_TYPE_INT32, 0, 0, false}},
    {"i64", {SL_TYPE_INT64, 0, 0, false}},
    {"f64", {SL_TYPE_FLOAT64, 0, 0, false}},
    {"dec", {SL_TYPE_DECIMAL, 10, 2, false}},
    {"str", {SL_TYPE_STRING, 0, 0, false}},
    {"bin", {SL_TYPE_BYTES, 0, 0, false}},
    {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}},
    {"nb", {SL_TYPE_BOOL, 0, 0, true}},
    {"ni32", {SL_TYPE_INT32, 0, 0, true}},
    {"ni64", {SL_TYPE_INT64, 0, 0, true}},
    {"nf64", {SL_TYPE_FLOAT64, 0, 0, true}},
    {"ndec", {SL_TYPE_DECIMAL, 18, 0, true}},
    {"nstr", {SL_TYPE_STRING, 0, 0, true}},
    {"nbin", {SL_TYPE_BYTES, 0, 0, true}},
    {"nts", {SL_TYPE_TIMESTAMP, 0, 0, true}},
};
#define N_ALL ((uint32_t)(sizeof(all_fields) / sizeof(all_fields[0])))

static bool same_f64_bits(double a, double b) {
  return memcmp(&a, &b, 8) == 0;
}

/* ------------------------------------------------------------------ */
/* Schemas. */

static void expect_schema_einval(const sl_field_t *f, uint32_t n,
                                 const char *msg_part) {
  sl_schema_t *sentinel = (sl_schema_t *)&rng_state;
  sl_schema_t *s = sentinel;
  sl_error_t *err = NULL;
  int rc = sl_schema_create(f, n, &s, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_EQ_PTR(s, sentinel); /* out-parameters only written on success */
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(err), SL_EINVAL);
  SL_ASSERT_CONTAINS(sl_error_message(err), msg_part);
  sl_error_destroy(err);
  /* Without an error object the code is the same. */
  SL_ASSERT_EQ_INT(sl_schema_create(f, n, &s, NULL), SL_EINVAL);
  SL_ASSERT_EQ_PTR(s, sentinel);
}

SL_TEST(schema_create_errors) {
  sl_field_t dup[3] = {{"a", ty(SL_TYPE_INT64, false)},
                       {"b", ty(SL_TYPE_STRING, true)},
                       {"a", ty(SL_TYPE_BOOL, false)}};
  expect_schema_einval(dup, 3, "'a'");

  sl_field_t empty[2] = {{"a", ty(SL_TYPE_INT64, false)},
                         {"", ty(SL_TYPE_INT64, false)}};
  expect_schema_einval(empty, 2, "empty name");
  sl_field_t null_name[1] = {{NULL, ty(SL_TYPE_INT64, false)}};
  expect_schema_einval(null_name, 1, "empty name");

  /* Decimal precision must be 1..18 and the scale at most the precision. */
  uint8_t bad[][2] = {{0, 0}, {19, 2}, {255, 0}, {4, 5}, {1, 2}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    sl_field_t f[1] = {{"amount", dec(bad[i][0], bad[i][1], false)}};
    expect_schema_einval(f, 1, "amount");
  }

  /* Type ids outside the enum. */
  sl_field_t t0[1] = {{"x", ty((sl_type_id_t)0, false)}};
  expect_schema_einval(t0, 1, "'x'");
  sl_field_t t9[1] = {{"x", ty((sl_type_id_t)9, false)}};
  expect_schema_einval(t9, 1, "'x'");

  /* More than SL_SCHEMA_MAX_FIELDS fields. */
  uint32_t n = SL_SCHEMA_MAX_FIELDS + 1;
  sl_field_t *many = calloc(n, sizeof(*many));
  char (*names)[16] = calloc(n, 16);
  for (uint32_t i = 0; i < n; i++) {
    snprintf(names[i], 16, "f%u", i);
    many[i].name = names[i];
    many[i].type = ty(SL_TYPE_INT64, true);
  }
  expect_schema_einval(many, n, "1024");
  /* Exactly the limit is fine. */
  sl_schema_t *s = make_schema(many, SL_SCHEMA_MAX_FIELDS);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(s), SL_SCHEMA_MAX_FIELDS);
  SL_ASSERT_EQ_INT(sl_schema_index(s, "f1023"), 1023);
  SL_ASSERT_EQ_INT(sl_schema_index(s, "f1024"), -1);
  sl_schema_unref(s);
  free(many);
  free(names);

  /* The boundary decimals are accepted. */
  sl_field_t good[3] = {{"a", dec(1, 0, false)},
                        {"b", dec(18, 18, true)},
                        {"c", dec(18, 0, false)}};
  s = make_schema(good, 3);
  SL_ASSERT_EQ_INT(sl_schema_field(s, 1)->type.precision, 18);
  SL_ASSERT_EQ_INT(sl_schema_field(s, 1)->type.scale, 18);
  SL_ASSERT_TRUE(sl_schema_field(s, 1)->type.nullable);
  SL_ASSERT_TRUE(sl_schema_field(s, 3) == NULL);
  sl_schema_unref(s);

  /* A schema without fields is valid. */
  s = make_schema(NULL, 0);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(s), 0);
  sl_schema_unref(s);
}

SL_TEST(schema_accessors_and_refs) {
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(s), N_ALL);
  SL_ASSERT_EQ_INT(sl_schema_version(s), 1);
  for (uint32_t i = 0; i < N_ALL; i++) {
    const sl_field_t *f = sl_schema_field(s, i);
    SL_ASSERT_EQ_STR(f->name, all_fields[i].name);
    SL_ASSERT_TRUE(f->name != all_fields[i].name); /* names are copied */
    SL_ASSERT_EQ_INT(f->type.id, all_fields[i].type.id);
    SL_ASSERT_EQ_INT(f->type.nullable, all_fields[i].type.nullable);
    SL_ASSERT_EQ_INT(sl_schema_index(s, all_fields[i].name), (int)i);
  }
  SL_ASSERT_EQ_INT(sl_schema_index(s, "nope"), -1);
  SL_ASSERT_EQ_PTR(sl_schema_ref(s), s);
  sl_schema_unref(s);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(s), N_ALL); /* still referenced */
  sl_schema_unref(s);
  sl_schema_unref(NULL);
  SL_ASSERT_TRUE(sl_schema_ref(NULL) == NULL);

  /* Type names and parsing. */
  char buf[32];
  SL_ASSERT_EQ_STR(sl_type_format(dec(10, 2, false), buf, sizeof(buf)),
                   "decimal(10,2)");
  SL_ASSERT_EQ_STR(sl_type_format(ty(SL_TYPE_TIMESTAMP, true), buf,
                                  sizeof(buf)),
                   "timestamp");
  sl_type_t t;
  SL_ASSERT_OK(sl_type_parse("decimal(18,4)", &t));
  SL_ASSERT_EQ_INT(t.id, SL_TYPE_DECIMAL);
  SL_ASSERT_EQ_INT(t.precision, 18);
  SL_ASSERT_EQ_INT(t.scale, 4);
  SL_ASSERT_EQ_INT(sl_type_parse("decimal(19,4)", &t), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl_type_parse("decimal(4,5)", &t), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl_type_parse("decimal(4,2)x", &t), SL_EPARSE);
  SL_ASSERT_EQ_INT(sl_type_parse("int128", &t), SL_EPARSE);
  for (int id = SL_TYPE_BOOL; id <= SL_TYPE_TIMESTAMP; id++) {
    if (id == SL_TYPE_DECIMAL) continue;
    SL_ASSERT_OK(sl_type_parse(sl_type_name((sl_type_id_t)id), &t));
    SL_ASSERT_EQ_INT(t.id, id);
  }
}

SL_TEST(schema_fingerprint) {
  sl_schema_t *a = make_schema(all_fields, N_ALL);
  sl_schema_t *b = make_schema(all_fields, N_ALL);
  /* Stable: independent objects with the same fields agree. */
  SL_ASSERT_TRUE(a != b);
  SL_ASSERT_EQ_INT(sl_schema_fingerprint(a), sl_schema_fingerprint(b));
  SL_ASSERT_EQ_INT(sl_schema_fingerprint(a), sl_schema_fingerprint(a));
  SL_ASSERT_TRUE(sl_schema_equal(a, b));
  SL_ASSERT_TRUE(sl_schema_equal(a, a));

  /* Each kind of difference changes both equality and the fingerprint. */
  sl_field_t f[N_ALL];
  for (int variant = 0; variant < 7; variant++) {
    memcpy(f, all_fields, sizeof(f));
    uint32_t n = N_ALL;
    switch (variant) {
    case 0: f[3].name = "f64x"; break;                   /* name */
    case 1: f[2].type.id = SL_TYPE_TIMESTAMP; break;     /* type */
    case 2: f[0].type.nullable = true; break;            /* nullability */
    case 3: f[4].type.precision = 11; break;             /* precision */
    case 4: f[4].type.scale = 3; break;                  /* scale */
    case 5: n = N_ALL - 1; break;                        /* field count */
    case 6: {                                            /* order */
      sl_field_t x = f[1];
      f[1] = f[2];
      f[2] = x;
      break;
    }
    }
    sl_schema_t *c = make_schema(f, n);
    if (sl_schema_equal(a, c))
      SL_TEST_FAIL("variant %d compares equal", variant);
    if (sl_schema_fingerprint(a) == sl_schema_fingerprint(c))
      SL_TEST_FAIL("variant %d has the same fingerprint", variant);
    sl_schema_unref(c);
  }

  /* The version is part of the fingerprint. */
  sl_schema_t *v2;
  SL_ASSERT_OK(sl_schema_create_versioned(all_fields, N_ALL, 2, &v2, NULL));
  SL_ASSERT_EQ_INT(sl_schema_version(v2), 2);
  SL_ASSERT_NE_INT(sl_schema_fingerprint(a), sl_schema_fingerprint(v2));
  sl_schema_unref(v2);
  sl_schema_unref(a);
  sl_schema_unref(b);
}

/*
 * The storage encoding is a format: "SLSC", u8 1, varint version, varint n,
 * then per field varint name length, name, type id, nullable, precision,
 * scale.  Build the expected bytes by hand.
 */
SL_TEST(schema_encoding_bytes) {
  sl_field_t f[2] = {{"id", ty(SL_TYPE_INT64, false)},
                     {"price", dec(12, 3, true)}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create_versioned(f, 2, 300, &s, NULL));
  const uint8_t expect[] = {'S', 'L', 'S', 'C', 1,
                            0xac, 0x02, /* 300 */
                            2,
                            2, 'i', 'd', SL_TYPE_INT64, 0, 0, 0,
                            5, 'p', 'r', 'i', 'c', 'e', SL_TYPE_DECIMAL, 1, 12,
                            3};
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl_schema_encode(s, &b));
  SL_ASSERT_EQ_INT(b.len, sizeof(expect));
  SL_ASSERT_TRUE(memcmp(b.data, expect, sizeof(expect)) == 0);
  /* Encoding appends. */
  SL_ASSERT_OK(sl_schema_encode(s, &b));
  SL_ASSERT_EQ_INT(b.len, 2 * sizeof(expect));
  SL_ASSERT_TRUE(memcmp(b.data + sizeof(expect), expect, sizeof(expect)) == 0);
  sl_bytes_close(&b);
  sl_schema_unref(s);
}

static void check_roundtrip(const sl_field_t *f, uint32_t n, uint32_t version) {
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create_versioned(f, n, version, &s, NULL));
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl_schema_encode(s, &b));
  size_t enc_len = b.len;
  /* Trailing bytes are not consumed. */
  SL_ASSERT_OK(sl_bytes_append(&b, "\xff\x00\x17", 3));
  uint8_t *p = dup_exact(b.data, b.len);
  sl_schema_t *d = NULL;
  size_t consumed = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_schema_decode(p, b.len, &consumed, &d, &err), err);
  SL_ASSERT_EQ_INT(consumed, enc_len);
  SL_ASSERT_TRUE(sl_schema_equal(s, d));
  SL_ASSERT_EQ_INT(sl_schema_version(d), version);
  SL_ASSERT_EQ_INT(sl_schema_fingerprint(d), sl_schema_fingerprint(s));
  for (uint32_t i = 0; i < n; i++) {
    SL_ASSERT_EQ_STR(sl_schema_field(d, i)->name, f[i].name);
    SL_ASSERT_EQ_INT(sl_schema_field(d, i)->type.precision,
                     f[i].type.precision);
    SL_ASSERT_EQ_INT(sl_schema_field(d, i)->type.scale, f[i].type.scale);
  }
  /* out_consumed may be NULL. */
  sl_schema_t *d2 = NULL;
  SL_ASSERT_OK(sl_schema_decode(p, enc_len, NULL, &d2, NULL));
  SL_ASSERT_TRUE(sl_schema_equal(s, d2));
  sl_schema_unref(d2);
  sl_schema_unref(d);
  free(p);
  sl_bytes_close(&b);
  sl_schema_unref(s);
}

SL_TEST(schema_encode_decode_roundtrip) {
  check_roundtrip(all_fields, N_ALL, 1);
  check_roundtrip(all_fields, N_ALL, UINT32_MAX);
  check_roundtrip(NULL, 0, 7);
  /* A name longer than 127 bytes needs a two-byte varint length. */
  char longname[300];
  memset(longname, 'n', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  sl_field_t f[2] = {{longname, ty(SL_TYPE_STRING, true)},
                     {"x", dec(18, 18, false)}};
  check_roundtrip(f, 2, 128);
  /* The maximum number of fields (a two-byte varint count). */
  sl_field_t *many = calloc(SL_SCHEMA_MAX_FIELDS, sizeof(*many));
  char (*names)[16] = calloc(SL_SCHEMA_MAX_FIELDS, 16);
  for (uint32_t i = 0; i < SL_SCHEMA_MAX_FIELDS; i++) {
    snprintf(names[i], 16, "c%u", i);
    many[i].name = names[i];
    many[i].type = i % 3 ? ty((sl_type_id_t)(1 + i % 8), i % 2 == 0)
                         : dec((uint8_t)(1 + i % 18), 0, true);
    if (many[i].type.id == SL_TYPE_DECIMAL && many[i].type.precision == 0)
      many[i].type.precision = 5;
  }
  check_roundtrip(many, SL_SCHEMA_MAX_FIELDS, 3);
  free(many);
  free(names);
}

static void encode_sample(sl_bytes_t *b) {
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create_versioned(all_fields, N_ALL, 200, &s, NULL));
  sl_bytes_init(b);
  SL_ASSERT_OK(sl_schema_encode(s, b));
  sl_schema_unref(s);
}

SL_TEST(schema_decode_truncated) {
  sl_bytes_t b;
  encode_sample(&b);
  for (size_t len = 0; len < b.len; len++) {
    uint8_t *p = dup_exact(b.data, len);
    sl_schema_t *sentinel = (sl_schema_t *)&rng_state, *d = sentinel;
    size_t consumed = 12345;
    sl_error_t *err = NULL;
    int rc = sl_schema_decode(p, len, &consumed, &d, &err);
    if (rc != SL_ECORRUPT)
      SL_TEST_FAIL("truncated to %zu of %zu bytes: %s", len, b.len,
                   sl_errname(rc));
    SL_ASSERT_EQ_PTR(d, sentinel);
    SL_ASSERT_EQ_INT(consumed, 12345);
    SL_ASSERT_TRUE(err != NULL);
    SL_ASSERT_EQ_INT(sl_error_code(err), SL_ECORRUPT);
    sl_error_destroy(err);
    /* Also without an error object. */
    SL_ASSERT_EQ_INT(sl_schema_decode(p, len, NULL, &d, NULL), SL_ECORRUPT);
    free(p);
  }
  sl_bytes_close(&b);
}

/*
 * Every single-byte change of an encoding either decodes to some schema or
 * is reported as corruption, with an error object of the same code.
 */
SL_TEST(schema_decode_corrupted) {
  sl_bytes_t b;
  encode_sample(&b);
  uint32_t n_ok = 0, n_corrupt = 0;
  for (size_t pos = 0; pos < b.len; pos++) {
    for (unsigned v = 0; v < 256; v++) {
      if (v == b.data[pos]) continue;
      uint8_t *p = dup_exact(b.data, b.len);
      p[pos] = (uint8_t)v;
      sl_schema_t *d = NULL;
      sl_error_t *err = NULL;
      size_t consumed = 0;
      int rc = sl_schema_decode(p, b.len, &consumed, &d, &err);
      if (rc == SL_OK) {
        n_ok++;
        SL_ASSERT_TRUE(d != NULL);
        SL_ASSERT_TRUE(consumed <= b.len);
        SL_ASSERT_TRUE(err == NULL);
        sl_schema_unref(d);
      } else {
        n_corrupt++;
        if (rc != SL_ECORRUPT)
          SL_TEST_FAIL("byte %zu = 0x%02x: %s", pos, v, sl_errname(rc));
        if (err != NULL && sl_error_code(err) != rc)
          SL_TEST_FAIL("byte %zu = 0x%02x: returned %s but the error says "
                       "%s: %s",
                       pos, v, sl_errname(rc),
                       sl_errname(sl_error_code(err)),
                       sl_error_message(err));
        sl_error_destroy(err);
      }
      free(p);
    }
  }
  /* Both outcomes occur (renamed fields decode; bad magic does not). */
  SL_ASSERT_TRUE(n_ok > 0);
  SL_ASSERT_TRUE(n_corrupt > 0);
  sl_bytes_close(&b);

  /* Specific malformed inputs. */
  static const struct {
    const char *what;
    const char *bytes;
    size_t len;
  } cases[] = {
      {"bad magic", "SLSX\x01\x01\x00", 7},
      {"encoding version 2", "SLSC\x02\x01\x00", 7},
      {"too many fields", "SLSC\x01\x01\x81\x08", 8}, /* n = 1025 */
      {"overlong version varint",
       "SLSC\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f\x00", 16},
      {"version above u32", "SLSC\x01\x80\x80\x80\x80\x10\x00", 11},
      {"name longer than the input", "SLSC\x01\x01\x01\x7f" "ab", 10},
      {"huge name length",
       "SLSC\x01\x01\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 17},
      {"type id 0", "SLSC\x01\x01\x01\x01" "a\x00\x00\x00\x00", 13},
      {"type id 9", "SLSC\x01\x01\x01\x01" "a\x09\x00\x00\x00", 13},
      {"decimal(19,0)", "SLSC\x01\x01\x01\x01" "a\x05\x00\x13\x00", 13},
      {"duplicate names",
       "SLSC\x01\x01\x02\x01" "a\x03\x00\x00\x00\x01" "a\x03\x00\x00\x00", 19},
      {"empty name", "SLSC\x01\x01\x01\x00\x03\x00\x00\x00", 12},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint8_t *p = dup_exact(cases[i].bytes, cases[i].len);
    sl_schema_t *d = NULL;
    sl_error_t *err = NULL;
    int rc = sl_schema_decode(p, cases[i].len, NULL, &d, &err);
    if (rc != SL_ECORRUPT)
      SL_TEST_FAIL("%s: %s", cases[i].what, sl_errname(rc));
    SL_ASSERT_TRUE(d == NULL);
    if (err != NULL && sl_error_code(err) != SL_ECORRUPT)
      SL_TEST_FAIL("%s: error object has code %s: %s", cases[i].what,
                   sl_errname(sl_error_code(err)), sl_error_message(err));
    sl_error_destroy(err);
    free(p);
  }
  /* Sanity of the hand-made encodings: a good one decodes. */
  uint8_t *p = dup_exact("SLSC\x01\x01\x01\x01" "a\x03\x00\x00\x00", 13);
  sl_schema_t *d = NULL;
  SL_ASSERT_OK(sl_schema_decode(p, 13, NULL, &d, NULL));
  SL_ASSERT_EQ_STR(sl_schema_field(d, 0)->name, "a");
  sl_schema_unref(d);
  free(p);
}

/* ------------------------------------------------------------------ */
/* The row builder. */

SL_TEST(row_kinds) {
  static const char *names[4] = {"+I", "-U", "+U", "-D"};
  for (int k = 0; k < 4; k++) {
    SL_ASSERT_EQ_STR(sl_row_kind_name((sl_row_kind_t)k), names[k]);
    sl_row_kind_t kind = SL_ROW_DELETE;
    SL_ASSERT_OK(sl_row_kind_parse(names[k], &kind));
    SL_ASSERT_EQ_INT(kind, k);
  }
  sl_row_kind_t kind = SL_ROW_UPDATE_AFTER;
  SL_ASSERT_EQ_INT(sl_row_kind_parse("+X", &kind), SL_EPARSE);
  SL_ASSERT_EQ_INT(sl_row_kind_parse("", &kind), SL_EPARSE);
  SL_ASSERT_EQ_INT(sl_row_kind_parse("+I ", &kind), SL_EPARSE);
  SL_ASSERT_EQ_INT(kind, SL_ROW_UPDATE_AFTER);

  sl_field_t f[1] = {{"x", ty(SL_TYPE_INT64, false)}};
  sl_schema_t *s = make_schema(f, 1);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  for (int k = 0; k < 4; k++) {
    sl_row_builder_reset(&b, (sl_row_kind_t)k);
    sl_row_builder_set_i64(&b, 0, k * 10);
    sl_row_t row;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
    SL_ASSERT_EQ_INT(sl_row_kind(&row), k);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&row, 0), k * 10);
    SL_ASSERT_OK(sl_row_validate(s, row.data, row.len));
  }
  /* set_kind changes only the kind. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_row_builder_set_i64(&b, 0, 99);
  sl_row_builder_set_kind(&b, SL_ROW_DELETE);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
  SL_ASSERT_EQ_INT(sl_row_kind(&row), SL_ROW_DELETE);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&row, 0), 99);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

/* Fill every field of the all_fields schema with fixed values. */
static const char k_str[] = "h\xc3\xa9llo";
static const uint8_t k_bin[5] = {0, 1, 0, 0xff, 0};

static void fill_all(sl_row_builder_t *b, bool nulls) {
  sl_row_builder_set_bool(b, 0, true);
  sl_row_builder_set_i32(b, 1, INT32_MIN);
  sl_row_builder_set_i64(b, 2, INT64_MAX);
  sl_row_builder_set_f64(b, 3, -0.0);
  sl_row_builder_set_i64(b, 4, -12345); /* -123.45 */
  SL_ASSERT_OK(sl_row_builder_set_str(b, 5, k_str, sizeof(k_str) - 1));
  SL_ASSERT_OK(sl_row_builder_set_str(b, 6, k_bin, sizeof(k_bin)));
  sl_row_builder_set_i64(b, 7, 1767225600000000);
  if (nulls) {
    for (uint32_t i = 8; i < 16; i++) sl_row_builder_set_null(b, i);
    return;
  }
  sl_row_builder_set_bool(b, 8, false);
  sl_row_builder_set_i32(b, 9, INT32_MAX);
  sl_row_builder_set_i64(b, 10, INT64_MIN);
  sl_row_builder_set_f64(b, 11, INFINITY);
  sl_row_builder_set_i64(b, 12, 999999999999999999ll);
  SL_ASSERT_OK(sl_row_builder_set_str(b, 13, "", 0));
  SL_ASSERT_OK(sl_row_builder_set_str(b, 14, "\0\0", 2));
  sl_row_builder_set_i64(b, 15, -1);
}

static void check_all(const sl_row_t *r, bool nulls) {
  SL_ASSERT_EQ_INT(sl_row_is_null(r, 0), 0);
  SL_ASSERT_EQ_INT(sl_row_get_bool(r, 0), 1);
  SL_ASSERT_EQ_INT(sl_row_get_i32(r, 1), INT32_MIN);
  SL_ASSERT_EQ_INT(sl_row_get_i64(r, 2), INT64_MAX);
  SL_ASSERT_TRUE(same_f64_bits(sl_row_get_f64(r, 3), -0.0));
  SL_ASSERT_EQ_INT(sl_row_get_i64(r, 4), -12345);
  sl_slice_t s = sl_row_get_str(r, 5);
  SL_ASSERT_EQ_INT(s.len, sizeof(k_str) - 1);
  SL_ASSERT_TRUE(memcmp(s.ptr, k_str, s.len) == 0);
  s = sl_row_get_str(r, 6);
  SL_ASSERT_EQ_INT(s.len, sizeof(k_bin));
  SL_ASSERT_TRUE(memcmp(s.ptr, k_bin, s.len) == 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(r, 7), 1767225600000000);
  for (uint32_t i = 0; i < 8; i++) SL_ASSERT_EQ_INT(sl_row_is_null(r, i), 0);
  for (uint32_t i = 8; i < 16; i++)
    SL_ASSERT_EQ_INT(sl_row_is_null(r, i), nulls);
  if (nulls) return;
  SL_ASSERT_EQ_INT(sl_row_get_bool(r, 8), 0);
  SL_ASSERT_EQ_INT(sl_row_get_i32(r, 9), INT32_MAX);
  SL_ASSERT_EQ_INT(sl_row_get_i64(r, 10), INT64_MIN);
  SL_ASSERT_TRUE(isinf(sl_row_get_f64(r, 11)) && sl_row_get_f64(r, 11) > 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(r, 12), 999999999999999999ll);
  SL_ASSERT_EQ_INT(sl_row_get_str(r, 13).len, 0);
  s = sl_row_get_str(r, 14);
  SL_ASSERT_EQ_INT(s.len, 2);
  SL_ASSERT_TRUE(s.ptr[0] == 0 && s.ptr[1] == 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(r, 15), -1);
}

SL_TEST(row_builder_every_type) {
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  for (int nulls = 0; nulls < 2; nulls++) {
    sl_row_builder_reset(&b, SL_ROW_UPDATE_AFTER);
    fill_all(&b, nulls);
    sl_row_t r;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl_row_builder_finish(&b, &r, &err), err);
    SL_ASSERT_TRUE(r.schema == s);
    /* The documented layout. */
    SL_ASSERT_EQ_INT(r.data[0], SL_ROW_UPDATE_AFTER);
    SL_ASSERT_EQ_INT(r.data[1], SL_ROW_FORMAT_VERSION);
    SL_ASSERT_EQ_INT(r.data[2] | (r.data[3] << 8), N_ALL);
    SL_ASSERT_EQ_INT(r.fixed_off, sl_row_header_size(N_ALL));
    SL_ASSERT_EQ_INT(sl_row_header_size(N_ALL), 8);
    SL_ASSERT_EQ_INT(r.data[4], 0x00);
    SL_ASSERT_EQ_INT(r.data[5], nulls ? 0xff : 0x00);
    SL_ASSERT_TRUE(r.len >= r.fixed_off + 8 * N_ALL);
    check_all(&r, nulls);
    SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
    /* A view over a copy of the bytes reads the same. */
    uint8_t *copy = dup_exact(r.data, r.len);
    sl_row_t v;
    sl_row_view(&v, s, copy, r.len);
    SL_ASSERT_EQ_INT(v.fixed_off, r.fixed_off);
    check_all(&v, nulls);
    /* Generic values. */
    sl_value_t val;
    sl_row_get_value(&v, 4, &val);
    SL_ASSERT_EQ_INT(val.type, SL_TYPE_DECIMAL);
    SL_ASSERT_EQ_INT(val.scale, 2);
    SL_ASSERT_EQ_INT(val.u.i, -12345);
    SL_ASSERT_TRUE(!val.is_null);
    sl_row_get_value(&v, 5, &val);
    SL_ASSERT_EQ_INT(val.type, SL_TYPE_STRING);
    SL_ASSERT_EQ_INT(val.u.s.len, sizeof(k_str) - 1);
    sl_row_get_value(&v, 0, &val);
    SL_ASSERT_TRUE(val.u.b);
    sl_row_get_value(&v, 3, &val);
    SL_ASSERT_TRUE(same_f64_bits(val.u.f, -0.0));
    sl_row_get_value(&v, 13, &val);
    SL_ASSERT_EQ_INT(val.is_null, nulls);
    /* Copying a row into a builder gives the same bytes. */
    sl_row_builder_t b2;
    SL_ASSERT_OK(sl_row_builder_init(&b2, s));
    SL_ASSERT_OK(sl_row_builder_copy(&b2, &v));
    sl_row_t r2;
    SL_ASSERT_OK(sl_row_builder_finish(&b2, &r2, NULL));
    SL_ASSERT_EQ_INT(r2.len, r.len);
    SL_ASSERT_TRUE(memcmp(r2.data, r.data, r.len) == 0);
    sl_row_builder_close(&b2);
    free(copy);
  }
  /* Large strings grow the buffer; earlier fields keep their values. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  fill_all(&b, false);
  size_t big = 1u << 20;
  char *text = malloc(big);
  for (size_t i = 0; i < big; i++) text[i] = (char)('a' + i % 26);
  SL_ASSERT_OK(sl_row_builder_set_str(&b, 13, text, (uint32_t)big));
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
  sl_slice_t sl = sl_row_get_str(&r, 13);
  SL_ASSERT_EQ_INT(sl.len, big);
  SL_ASSERT_TRUE(memcmp(sl.ptr, text, big) == 0);
  SL_ASSERT_EQ_INT(sl_row_get_str(&r, 5).len, sizeof(k_str) - 1);
  SL_ASSERT_TRUE(memcmp(sl_row_get_str(&r, 5).ptr, k_str,
                        sizeof(k_str) - 1) == 0);
  free(text);
  /* Setting a field twice keeps the last value. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  fill_all(&b, true);
  SL_ASSERT_OK(sl_row_builder_set_str(&b, 5, "second", 6));
  sl_row_builder_set_i64(&b, 2, 5);
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_str(&r, 5).len, 6);
  SL_ASSERT_TRUE(memcmp(sl_row_get_str(&r, 5).ptr, "second", 6) == 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 2), 5);
  SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

SL_TEST(row_builder_zero_fields) {
  sl_schema_t *s = make_schema(NULL, 0);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_DELETE);
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(r.len, sl_row_header_size(0));
  SL_ASSERT_EQ_INT(sl_row_kind(&r), SL_ROW_DELETE);
  SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
  sl_bytes_t c;
  sl_bytes_init(&c);
  SL_ASSERT_OK(sl_row_encode_compact(&r, &c));
  SL_ASSERT_EQ_INT(c.len, 1);
  sl_row_builder_t d;
  SL_ASSERT_OK(sl_row_builder_init(&d, s));
  size_t consumed = 0;
  SL_ASSERT_OK(sl_row_decode_compact(&d, c.data, c.len, &consumed));
  SL_ASSERT_EQ_INT(consumed, 1);
  SL_ASSERT_OK(sl_row_builder_finish(&d, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_kind(&r), SL_ROW_DELETE);
  SL_ASSERT_EQ_INT(sl_row_decode_compact(&d, c.data, 0, NULL), SL_ECORRUPT);
  sl_row_builder_close(&d);
  sl_bytes_close(&c);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

static void expect_missing(sl_row_builder_t *b, const char *field) {
  sl_row_t r;
  memset(&r, 0, sizeof(r));
  sl_error_t *err = NULL;
  int rc = sl_row_builder_finish(b, &r, &err);
  SL_ASSERT_EQ_INT(rc, SL_ETYPE);
  SL_ASSERT_TRUE(r.data == NULL); /* not written on failure */
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(err), SL_ETYPE);
  char quoted[64];
  snprintf(quoted, sizeof(quoted), "'%s'", field);
  SL_ASSERT_CONTAINS(sl_error_message(err), quoted);
  SL_ASSERT_CONTAINS(sl_error_message(err), "not nullable");
  sl_error_destroy(err);
  /* Also without an error object. */
  SL_ASSERT_EQ_INT(sl_row_builder_finish(b, &r, NULL), SL_ETYPE);
}

SL_TEST(row_builder_nullability) {
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  /* Leaving out (or nulling) each non-nullable field in turn. */
  for (uint32_t miss = 0; miss < 8; miss++) {
    for (int how = 0; how < 2; how++) {
      sl_row_builder_reset(&b, SL_ROW_INSERT);
      if (how == 0) {
        /* Never set. */
        for (uint32_t i = 0; i < 8; i++) {
          if (i == miss) continue;
          if (i == 5 || i == 6)
            SL_ASSERT_OK(sl_row_builder_set_str(&b, i, "x", 1));
          else if (i == 3) sl_row_builder_set_f64(&b, i, 1.5);
          else sl_row_builder_set_i64(&b, i, 1);
        }
      } else {
        /* Set, then nulled again. */
        fill_all(&b, true);
        sl_row_builder_set_null(&b, miss);
      }
      expect_missing(&b, all_fields[miss].name);
    }
  }
  /* Nullable fields may stay null; the row is then fine. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  fill_all(&b, true);
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
  /* The first missing field is named when several are missing. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  expect_missing(&b, "b");
  sl_row_builder_close(&b);
  sl_schema_unref(s);

  /* More than 64 fields takes the word-by-word path. */
  enum { N = 150 };
  sl_field_t f[N];
  char names[N][8];
  for (uint32_t i = 0; i < N; i++) {
    snprintf(names[i], sizeof(names[i]), "c%u", i);
    f[i].name = names[i];
    f[i].type = ty(SL_TYPE_INT64, !(i == 70 || i == 149 || i == 3));
  }
  s = make_schema(f, N);
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  SL_ASSERT_EQ_INT(sl_row_header_size(N), 24);
  uint32_t required[3] = {3, 70, 149};
  for (uint32_t k = 0; k < 3; k++) {
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    for (uint32_t j = 0; j < 3; j++)
      if (j != k) sl_row_builder_set_i64(&b, required[j], j);
    expect_missing(&b, names[required[k]]);
  }
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  for (uint32_t j = 0; j < 3; j++) sl_row_builder_set_i64(&b, required[j], j);
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
  for (uint32_t i = 0; i < N; i++) {
    bool is_req = i == 3 || i == 70 || i == 149;
    SL_ASSERT_EQ_INT(sl_row_is_null(&r, i), !is_req);
  }
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 149), 2);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

/* ------------------------------------------------------------------ */
/* Validation. */

/* A row that passed validation must be safe to read in every way. */
static void read_everything(const sl_schema_t *s, const uint8_t *data,
                            uint32_t len) {
  sl_row_t r;
  sl_row_view(&r, s, data, len);
  uint64_t acc = 0;
  for (uint32_t i = 0; i < sl_schema_n_fields(s); i++) {
    if (sl_row_is_null(&r, i)) continue;
    sl_value_t v;
    sl_row_get_value(&r, i, &v);
    uint8_t id = sl_schema_field(s, i)->type.id;
    if (id == SL_TYPE_STRING || id == SL_TYPE_BYTES) {
      SL_ASSERT_TRUE(v.u.s.ptr >= data + r.fixed_off);
      SL_ASSERT_TRUE(v.u.s.ptr + v.u.s.len <= data + len);
      for (uint32_t k = 0; k < v.u.s.len; k++) acc += v.u.s.ptr[k];
    }
    if (id == SL_TYPE_BOOL) SL_ASSERT_TRUE(sl_row_get_i64(&r, i) == 0 ||
                                           sl_row_get_i64(&r, i) == 1);
    if (id == SL_TYPE_INT32)
      SL_ASSERT_TRUE(sl_row_get_i64(&r, i) >= INT32_MIN &&
                     sl_row_get_i64(&r, i) <= INT32_MAX);
  }
  (void)acc;
  sl_bytes_t k;
  sl_bytes_init(&k);
  for (uint32_t i = 0; i < sl_schema_n_fields(s); i++)
    SL_ASSERT_OK(sl_key_add_field(&k, &r, i));
  sl_bytes_clear(&k);
  SL_ASSERT_OK(sl_row_encode_compact(&r, &k));
  sl_bytes_close(&k);
}

static void build_sample(sl_row_builder_t *b, sl_row_t *r) {
  sl_row_builder_reset(b, SL_ROW_UPDATE_BEFORE);
  fill_all(b, false);
  SL_ASSERT_OK(sl_row_builder_set_str(b, 13, "abc", 3));
  sl_row_builder_set_null(b, 10);
  SL_ASSERT_OK(sl_row_builder_finish(b, r, NULL));
}

SL_TEST(row_validate_good_rows) {
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_t r;
  build_sample(&b, &r);
  uint8_t *p = dup_exact(r.data, r.len);
  SL_ASSERT_OK(sl_row_validate(s, p, r.len));
  read_everything(s, p, r.len);
  free(p);
  /* Extra bytes at the end of a row are allowed (unreferenced data). */
  uint8_t *q = malloc(r.len + 16);
  memcpy(q, r.data, r.len);
  memset(q + r.len, 0xee, 16);
  SL_ASSERT_OK(sl_row_validate(s, q, r.len + 16));
  free(q);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

static void set_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void set_i64(uint8_t *p, int64_t v) { memcpy(p, &v, 8); }

SL_TEST(row_validate_targeted_corruption) {
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_t r;
  build_sample(&b, &r);
  const uint32_t h = r.fixed_off;
  for (int c = 0; c < 14; c++) {
    uint8_t *p = dup_exact(r.data, r.len);
    uint32_t len = r.len;
    switch (c) {
    case 0: p[0] = 4; break;                            /* row kind */
    case 1: p[1] = 2; break;                            /* format version */
    case 2: p[2] = N_ALL + 1; break;                    /* field count */
    case 3: p[4] |= 1u << 2; break;                     /* null in i64 */
    case 4: set_i64(p + h + 8 * 0, 2); break;           /* bool 2 */
    case 5: set_i64(p + h + 8 * 8, -1); break;          /* nullable bool */
    case 6: set_i64(p + h + 8 * 1, (int64_t)INT32_MAX + 1); break;
    case 7: set_i64(p + h + 8 * 9, (int64_t)INT32_MIN - 1); break;
    case 8: set_u32(p + h + 8 * 5, 4); break;           /* offset in header */
    case 9: set_u32(p + h + 8 * 5, h + 8 * N_ALL - 1); break; /* in slots */
    case 10: set_u32(p + h + 8 * 6 + 4, len); break;    /* length too big */
    case 11: /* offset + length wraps around */
      set_u32(p + h + 8 * 13, len - 1);
      set_u32(p + h + 8 * 13 + 4, UINT32_MAX);
      break;
    case 12: set_u32(p + h + 8 * 14, len + 1); break;   /* offset past end */
    case 13: len = h + 8 * N_ALL - 1; break;            /* too short */
    }
    int rc = sl_row_validate(s, p, len);
    if (rc != SL_ECORRUPT)
      SL_TEST_FAIL("corruption %d: %s", c, sl_errname(rc));
    free(p);
  }
  /* A string of length zero may sit exactly at the end of the row. */
  uint8_t *p = dup_exact(r.data, r.len);
  set_u32(p + h + 8 * 13, r.len);
  set_u32(p + h + 8 * 13 + 4, 0);
  SL_ASSERT_OK(sl_row_validate(s, p, r.len));
  read_everything(s, p, r.len);
  free(p);
  /* A schema with another field count rejects the row. */
  sl_schema_t *s2 = make_schema(all_fields, N_ALL - 1);
  SL_ASSERT_EQ_INT(sl_row_validate(s2, r.data, r.len), SL_ECORRUPT);
  sl_schema_unref(s2);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

/*
 * Every single-byte corruption of a sample row, and every truncation,
 * either validates or is SL_ECORRUPT; what validates is safe to read.
 */
SL_TEST(row_validate_every_byte) {
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_t r;
  build_sample(&b, &r);
  uint32_t n_ok = 0, n_bad = 0;
  for (uint32_t pos = 0; pos < r.len; pos++) {
    for (unsigned v = 0; v < 256; v++) {
      if (v == r.data[pos]) continue;
      uint8_t *p = dup_exact(r.data, r.len);
      p[pos] = (uint8_t)v;
      int rc = sl_row_validate(s, p, r.len);
      if (rc == SL_OK) {
        n_ok++;
        read_everything(s, p, r.len);
      } else if (rc == SL_ECORRUPT) {
        n_bad++;
      } else {
        SL_TEST_FAIL("byte %u = 0x%02x: %s", pos, v, sl_errname(rc));
      }
      free(p);
    }
  }
  SL_ASSERT_TRUE(n_ok > 0);
  SL_ASSERT_TRUE(n_bad > 0);
  for (uint32_t len = 0; len < r.len; len++) {
    uint8_t *p = dup_exact(r.data, len);
    int rc = sl_row_validate(s, p, len);
    if (len < r.fixed_off + 8 * N_ALL) SL_ASSERT_EQ_INT(rc, SL_ECORRUPT);
    if (rc == SL_OK) read_everything(s, p, len);
    else SL_ASSERT_EQ_INT(rc, SL_ECORRUPT);
    free(p);
  }
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

/* ------------------------------------------------------------------ */
/* The compact codec. */

static int64_t rnd_i64_edge(void) {
  static const int64_t edges[] = {0,         1,         -1,
                                  63,        64,        -64,
                                  -65,       127,       128,
                                  INT64_MAX, INT64_MIN, INT64_MAX - 1,
                                  INT64_MIN + 1, INT32_MAX, INT32_MIN};
  uint64_t r = rnd();
  switch (r % 4) {
  case 0: return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
  case 1: return (int64_t)(rnd() >> (1 + rnd() % 63)) * ((r >> 7) & 1 ? -1 : 1);
  default: return (int64_t)rnd();
  }
}

static double rnd_f64(void) {
  static const double edges[] = {0.0, -0.0, 1.0, -1.5, 1e308, -1e-308,
                                 5e-324, INFINITY, -INFINITY};
  uint64_t r = rnd();
  if (r % 5 == 0) return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
  if (r % 5 == 1) {
    uint64_t bits = 0x7ff0000000000000ull | (rnd() & 0x000fffffffffffffull) |
                    1; /* a NaN with a payload */
    if (r & 0x100) bits |= 1ull << 63;
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  uint64_t bits = rnd();
  double d;
  memcpy(&d, &bits, 8);
  return d;
}

static void fill_random(sl_row_builder_t *b, const sl_schema_t *s,
                        char *scratch) {
  sl_row_builder_reset(b, (sl_row_kind_t)(rnd() % 4));
  for (uint32_t i = 0; i < sl_schema_n_fields(s); i++) {
    const sl_field_t *f = sl_schema_field(s, i);
    if (f->type.nullable && rnd() % 3 == 0) {
      sl_row_builder_set_null(b, i);
      continue;
    }
    switch (f->type.id) {
    case SL_TYPE_BOOL: sl_row_builder_set_bool(b, i, rnd() & 1); break;
    case SL_TYPE_INT32:
      sl_row_builder_set_i32(b, i, (int32_t)rnd_i64_edge());
      break;
    case SL_TYPE_FLOAT64: sl_row_builder_set_f64(b, i, rnd_f64()); break;
    case SL_TYPE_DECIMAL: {
      int64_t lim = 1;
      for (int k = 0; k < f->type.precision; k++) lim *= 10;
      sl_row_builder_set_i64(b, i, (int64_t)(rnd() % (uint64_t)(2 * lim - 1)) -
                                       (lim - 1));
      break;
    }
    case SL_TYPE_STRING:
    case SL_TYPE_BYTES: {
      uint32_t len = rnd() % 8 == 0 ? (uint32_t)(rnd() % 4000)
                                    : (uint32_t)(rnd() % 20);
      for (uint32_t k = 0; k < len; k++) scratch[k] = (char)rnd();
      SL_ASSERT_OK(sl_row_builder_set_str(b, i, scratch, len));
      break;
    }
    default: sl_row_builder_set_i64(b, i, rnd_i64_edge()); break;
    }
  }
}

static void assert_rows_equal(const sl_row_t *a, const sl_row_t *b,
                              uint32_t row_no) {
  if (sl_row_kind(a) != sl_row_kind(b))
    SL_TEST_FAIL("row %u: kind %d != %d", row_no, sl_row_kind(a),
                 sl_row_kind(b));
  const sl_schema_t *s = a->schema;
  for (uint32_t i = 0; i < sl_schema_n_fields(s); i++) {
    bool na = sl_row_is_null(a, i), nb = sl_row_is_null(b, i);
    if (na != nb)
      SL_TEST_FAIL("row %u field %u: null %d != %d", row_no, i, na, nb);
    if (na) continue;
    uint8_t id = sl_schema_field(s, i)->type.id;
    if (id == SL_TYPE_STRING || id == SL_TYPE_BYTES) {
      sl_slice_t x = sl_row_get_str(a, i), y = sl_row_get_str(b, i);
      if (x.len != y.len || (x.len && memcmp(x.ptr, y.ptr, x.len) != 0))
        SL_TEST_FAIL("row %u field %u: bytes differ", row_no, i);
    } else if (sl_row_get_i64(a, i) != sl_row_get_i64(b, i)) {
      /* Fixed slots compared bit for bit, so float NaN payloads and -0.0
       * must survive too. */
      SL_TEST_FAIL("row %u field %u: %lld != %lld", row_no, i,
                   (long long)sl_row_get_i64(a, i),
                   (long long)sl_row_get_i64(b, i));
    }
  }
}

SL_TEST(compact_roundtrip_random) {
  rng_seed(20260101);
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b, d;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  SL_ASSERT_OK(sl_row_builder_init(&d, s));
  char *scratch = malloc(4096);
  sl_bytes_t all, one, again;
  sl_bytes_init(&all);
  sl_bytes_init(&one);
  sl_bytes_init(&again);
  enum { N_ROWS = 20000 };
  size_t *ends = calloc(N_ROWS, sizeof(size_t));
  uint64_t seed_of_stream = rng_state;
  for (uint32_t n = 0; n < N_ROWS; n++) {
    fill_random(&b, s, scratch);
    sl_row_t r;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
    SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));
    sl_bytes_clear(&one);
    SL_ASSERT_OK(sl_row_encode_compact(&r, &one));
    uint8_t *p = dup_exact(one.data, one.len);
    size_t consumed = 0;
    SL_ASSERT_OK(sl_row_decode_compact(&d, p, one.len, &consumed));
    SL_ASSERT_EQ_INT(consumed, one.len);
    sl_row_t x;
    SL_ASSERT_OK(sl_row_builder_finish(&d, &x, NULL));
    SL_ASSERT_OK(sl_row_validate(s, x.data, x.len));
    assert_rows_equal(&r, &x, n);
    /* Encoding the decoded row gives the same bytes. */
    sl_bytes_clear(&again);
    SL_ASSERT_OK(sl_row_encode_compact(&x, &again));
    SL_ASSERT_EQ_INT(again.len, one.len);
    SL_ASSERT_TRUE(memcmp(again.data, one.data, one.len) == 0);
    free(p);
    /* Encoding appends: build one stream of every row. */
    SL_ASSERT_OK(sl_row_encode_compact(&r, &all));
    ends[n] = all.len;
  }
  /* Decode the stream row after row and compare with a regenerated row. */
  rng_state = seed_of_stream;
  uint8_t *p = dup_exact(all.data, all.len);
  size_t off = 0;
  for (uint32_t n = 0; n < N_ROWS; n++) {
    fill_random(&b, s, scratch);
    sl_row_t r, x;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
    size_t consumed = 0;
    SL_ASSERT_OK(sl_row_decode_compact(&d, p + off, all.len - off, &consumed));
    off += consumed;
    SL_ASSERT_EQ_INT(off, ends[n]);
    SL_ASSERT_OK(sl_row_builder_finish(&d, &x, NULL));
    assert_rows_equal(&r, &x, n);
  }
  SL_ASSERT_EQ_INT(off, all.len);
  free(p);
  free(ends);
  free(scratch);
  sl_bytes_close(&all);
  sl_bytes_close(&one);
  sl_bytes_close(&again);
  sl_row_builder_close(&b);
  sl_row_builder_close(&d);
  sl_schema_unref(s);
}

/* The documented compact layout of one small row. */
SL_TEST(compact_layout) {
  sl_field_t f[4] = {{"a", ty(SL_TYPE_INT64, false)},
                     {"b", ty(SL_TYPE_STRING, true)},
                     {"c", ty(SL_TYPE_FLOAT64, false)},
                     {"d", ty(SL_TYPE_INT32, true)}};
  sl_schema_t *s = make_schema(f, 4);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_UPDATE_AFTER);
  sl_row_builder_set_i64(&b, 0, -3); /* zig-zag 5 */
  SL_ASSERT_OK(sl_row_builder_set_str(&b, 1, "hi", 2));
  sl_row_builder_set_f64(&b, 2, 1.0);
  sl_row_builder_set_null(&b, 3);
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  sl_bytes_t c;
  sl_bytes_init(&c);
  SL_ASSERT_OK(sl_row_encode_compact(&r, &c));
  uint8_t expect[1 + 1 + 1 + 3 + 8];
  double one = 1.0;
  expect[0] = SL_ROW_UPDATE_AFTER;
  expect[1] = 0x08; /* field 3 null */
  expect[2] = 5;
  expect[3] = 2;
  expect[4] = 'h';
  expect[5] = 'i';
  memcpy(expect + 6, &one, 8);
  SL_ASSERT_EQ_INT(c.len, 14);
  SL_ASSERT_TRUE(memcmp(c.data, expect, 14) == 0);
  sl_bytes_close(&c);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

SL_TEST(compact_decode_truncated_and_corrupt) {
  rng_seed(7);
  sl_schema_t *s = make_schema(all_fields, N_ALL);
  sl_row_builder_t b, d;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  SL_ASSERT_OK(sl_row_builder_init(&d, s));
  char *scratch = malloc(4096);
  sl_bytes_t c;
  sl_bytes_init(&c);
  for (int n = 0; n < 200; n++) {
    fill_random(&b, s, scratch);
    sl_row_t r;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
    sl_bytes_clear(&c);
    SL_ASSERT_OK(sl_row_encode_compact(&r, &c));
    for (size_t len = 0; len < c.len; len++) {
      uint8_t *p = dup_exact(c.data, len);
      size_t consumed = 999999;
      int rc = sl_row_decode_compact(&d, p, len, &consumed);
      if (rc != SL_ECORRUPT)
        SL_TEST_FAIL("row %d truncated to %zu of %zu: %s", n, len, c.len,
                     sl_errname(rc));
      SL_ASSERT_EQ_INT(consumed, 999999);
      free(p);
    }
    /* Single-byte corruptions of small rows: decode or SL_ECORRUPT; what
     * decodes is a valid row. */
    if (c.len > 200) continue;
    for (size_t pos = 0; pos < c.len; pos++) {
      for (unsigned v = 0; v < 256; v += 5) {
        if (v == c.data[pos]) continue;
        uint8_t *p = dup_exact(c.data, c.len);
        p[pos] = (uint8_t)v;
        size_t consumed = 0;
        int rc = sl_row_decode_compact(&d, p, c.len, &consumed);
        if (rc == SL_OK) {
          SL_ASSERT_TRUE(consumed <= c.len);
          sl_row_t x;
          SL_ASSERT_OK(sl_row_builder_finish(&d, &x, NULL));
          SL_ASSERT_OK(sl_row_validate(s, x.data, x.len));
        } else if (rc != SL_ECORRUPT) {
          SL_TEST_FAIL("row %d byte %zu = 0x%02x: %s", n, pos, v,
                       sl_errname(rc));
        }
        free(p);
      }
    }
  }
  /* Specific bad inputs for a one-field schema. */
  sl_field_t f1[1] = {{"x", ty(SL_TYPE_BOOL, false)}};
  sl_schema_t *s1 = make_schema(f1, 1);
  sl_row_builder_t d1;
  SL_ASSERT_OK(sl_row_builder_init(&d1, s1));
  static const struct {
    const char *bytes;
    size_t len;
  } bad[] = {
      {"\x04\x00\x00", 3},          /* row kind 4 */
      {"\x00\x01", 2},              /* null in a non-nullable field */
      {"\x00\x00\x04", 3},          /* bool 2 (zig-zag 4) */
      {"\x00\x00\x01", 3},          /* bool -1 (zig-zag 1) */
      {"\x00\x00\x80", 3},          /* unterminated varint */
      {"\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 12}, /* overlong */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint8_t *p = dup_exact(bad[i].bytes, bad[i].len);
    int rc = sl_row_decode_compact(&d1, p, bad[i].len, NULL);
    if (rc != SL_ECORRUPT) SL_TEST_FAIL("case %zu: %s", i, sl_errname(rc));
    free(p);
  }
  uint8_t *p = dup_exact("\x02\x00\x02", 3); /* +U, true */
  SL_ASSERT_OK(sl_row_decode_compact(&d1, p, 3, NULL));
  sl_row_t x;
  SL_ASSERT_OK(sl_row_builder_finish(&d1, &x, NULL));
  SL_ASSERT_EQ_INT(sl_row_kind(&x), SL_ROW_UPDATE_AFTER);
  SL_ASSERT_EQ_INT(sl_row_get_bool(&x, 0), 1);
  free(p);
  /* int32 out of range, and a string length beyond the input. */
  sl_field_t f2[2] = {{"i", ty(SL_TYPE_INT32, false)},
                      {"s", ty(SL_TYPE_STRING, false)}};
  sl_schema_t *s2 = make_schema(f2, 2);
  sl_row_builder_t d2;
  SL_ASSERT_OK(sl_row_builder_init(&d2, s2));
  p = dup_exact("\x00\x00\x80\x80\x80\x80\x10\x00", 8); /* 2^32 zig-zag */
  SL_ASSERT_EQ_INT(sl_row_decode_compact(&d2, p, 8, NULL), SL_ECORRUPT);
  free(p);
  p = dup_exact("\x00\x00\x02\x05" "abcd", 8); /* length 5, 4 bytes */
  SL_ASSERT_EQ_INT(sl_row_decode_compact(&d2, p, 8, NULL), SL_ECORRUPT);
  free(p);
  p = dup_exact("\x00\x00\x02\xff\xff\xff\xff\x0f" "ab", 10); /* 4 GiB */
  SL_ASSERT_EQ_INT(sl_row_decode_compact(&d2, p, 10, NULL), SL_ECORRUPT);
  free(p);
  sl_row_builder_close(&d2);
  sl_schema_unref(s2);
  sl_row_builder_close(&d1);
  sl_schema_unref(s1);
  free(scratch);
  sl_bytes_close(&c);
  sl_row_builder_close(&b);
  sl_row_builder_close(&d);
  sl_schema_unref(s);
}

/* ------------------------------------------------------------------ */
/* Canonical key bytes. */

static void key_f64(sl_bytes_t *k, double v) {
  sl_bytes_clear(k);
  SL_ASSERT_OK(sl_key_add_f64(k, v));
}

static bool same_bytes(const sl_bytes_t *a, const sl_bytes_t *b) {
  return a->len == b->len &&
         (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

SL_TEST(key_bytes_documented_layout) {
  sl_bytes_t k;
  sl_bytes_init(&k);
  SL_ASSERT_OK(sl_key_add_i64(&k, 0x0102030405060708ll));
  const uint8_t e1[] = {1, 1, 2, 3, 4, 5, 6, 7, 8};
  SL_ASSERT_EQ_INT(k.len, 9);
  SL_ASSERT_TRUE(memcmp(k.data, e1, 9) == 0);
  sl_bytes_clear(&k);
  SL_ASSERT_OK(sl_key_add_i64(&k, -1));
  const uint8_t e2[] = {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  SL_ASSERT_TRUE(k.len == 9 && memcmp(k.data, e2, 9) == 0);
  sl_bytes_clear(&k);
  SL_ASSERT_OK(sl_key_add_str(&k, "ab", 2));
  const uint8_t e3[] = {1, 0, 0, 0, 2, 'a', 'b'};
  SL_ASSERT_TRUE(k.len == 7 && memcmp(k.data, e3, 7) == 0);
  sl_bytes_clear(&k);
  SL_ASSERT_OK(sl_key_add_null(&k));
  SL_ASSERT_TRUE(k.len == 1 && k.data[0] == 0);
  sl_bytes_clear(&k);
  SL_ASSERT_OK(sl_key_add_f64(&k, 1.0)); /* 0x3ff0000000000000 */
  const uint8_t e4[] = {1, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
  SL_ASSERT_TRUE(k.len == 9 && memcmp(k.data, e4, 9) == 0);
  /* Appending composes. */
  SL_ASSERT_OK(sl_key_add_null(&k));
  SL_ASSERT_EQ_INT(k.len, 10);

  /* Fields of a row: int32 is 4 bytes, bool one byte, others 8. */
  sl_field_t f[5] = {{"i", ty(SL_TYPE_INT32, false)},
                     {"b", ty(SL_TYPE_BOOL, false)},
                     {"t", ty(SL_TYPE_TIMESTAMP, false)},
                     {"d", dec(9, 3, false)},
                     {"s", ty(SL_TYPE_BYTES, true)}};
  sl_schema_t *s = make_schema(f, 5);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_row_builder_set_i32(&b, 0, -2);
  sl_row_builder_set_bool(&b, 1, true);
  sl_row_builder_set_i64(&b, 2, 0x1122334455667788ll);
  sl_row_builder_set_i64(&b, 3, 42);
  SL_ASSERT_OK(sl_row_builder_set_str(&b, 4, "\x00z", 2));
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  sl_bytes_clear(&k);
  for (uint32_t i = 0; i < 5; i++) SL_ASSERT_OK(sl_key_add_field(&k, &r, i));
  const uint8_t e5[] = {1, 0xff, 0xff, 0xff, 0xfe,                   /* i */
                        1, 1,                                        /* b */
                        1, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                        1, 0, 0, 0, 0, 0, 0, 0, 42,                  /* d */
                        1, 0, 0, 0, 2, 0, 'z'};                      /* s */
  SL_ASSERT_EQ_INT(k.len, sizeof(e5));
  SL_ASSERT_TRUE(memcmp(k.data, e5, sizeof(e5)) == 0);
  /* A null field is the single marker byte. */
  sl_row_builder_set_null(&b, 4);
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  sl_bytes_clear(&k);
  SL_ASSERT_OK(sl_key_add_field(&k, &r, 4));
  SL_ASSERT_TRUE(k.len == 1 && k.data[0] == 0);
  sl_row_builder_close(&b);
  sl_schema_unref(s);
  sl_bytes_close(&k);
}

SL_TEST(key_bytes_equality) {
  sl_bytes_t a, b;
  sl_bytes_init(&a);
  sl_bytes_init(&b);
  /* -0.0 and 0.0 are one key. */
  key_f64(&a, 0.0);
  key_f64(&b, -0.0);
  SL_ASSERT_TRUE(same_bytes(&a, &b));
  /* Every NaN is one key: quiet, signalling, negative, with payloads. */
  uint64_t nans[] = {0x7ff8000000000000ull, 0x7ff0000000000001ull,
                     0xfff8000000000000ull, 0x7fffffffffffffffull,
                     0xfff0000000000abcull, 0x7ff4000000000000ull};
  double ref_nan;
  memcpy(&ref_nan, &nans[0], 8);
  key_f64(&a, ref_nan);
  for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
    double d;
    memcpy(&d, &nans[i], 8);
    SL_ASSERT_TRUE(isnan(d));
    key_f64(&b, d);
    if (!same_bytes(&a, &b))
      SL_TEST_FAIL("NaN 0x%016llx differs", (unsigned long long)nans[i]);
  }
  key_f64(&b, NAN);
  SL_ASSERT_TRUE(same_bytes(&a, &b));
  /* NaN is not infinity, and not 0. */
  key_f64(&b, INFINITY);
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  key_f64(&b, 0.0);
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  /* Small differences matter. */
  key_f64(&a, 1.0);
  key_f64(&b, nextafter(1.0, 2.0));
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  key_f64(&a, 5e-324);
  key_f64(&b, -5e-324);
  SL_ASSERT_TRUE(!same_bytes(&a, &b));

  /* Floats from rows follow the same rules as sl_key_add_f64. */
  sl_field_t f[2] = {{"x", ty(SL_TYPE_FLOAT64, true)},
                     {"y", ty(SL_TYPE_FLOAT64, true)}};
  sl_schema_t *s = make_schema(f, 2);
  sl_row_builder_t rb;
  SL_ASSERT_OK(sl_row_builder_init(&rb, s));
  sl_row_builder_reset(&rb, SL_ROW_INSERT);
  sl_row_builder_set_f64(&rb, 0, -0.0);
  double nan2;
  memcpy(&nan2, &nans[4], 8);
  sl_row_builder_set_f64(&rb, 1, nan2);
  sl_row_t r;
  SL_ASSERT_OK(sl_row_builder_finish(&rb, &r, NULL));
  sl_bytes_clear(&a);
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl_key_add_field(&a, &r, 0));
  SL_ASSERT_OK(sl_key_add_field(&a, &r, 1));
  SL_ASSERT_OK(sl_key_add_f64(&b, 0.0));
  SL_ASSERT_OK(sl_key_add_f64(&b, NAN));
  SL_ASSERT_TRUE(same_bytes(&a, &b));
  /* A null float is not 0.0 and not NaN. */
  sl_row_builder_set_null(&rb, 0);
  SL_ASSERT_OK(sl_row_builder_finish(&rb, &r, NULL));
  sl_bytes_clear(&a);
  SL_ASSERT_OK(sl_key_add_field(&a, &r, 0));
  key_f64(&b, 0.0);
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  key_f64(&b, NAN);
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  sl_row_builder_close(&rb);
  sl_schema_unref(s);

  /* Null is distinct from 0 and from the empty string. */
  sl_bytes_clear(&a);
  SL_ASSERT_OK(sl_key_add_null(&a));
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl_key_add_i64(&b, 0));
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl_key_add_str(&b, "", 0));
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  /* Composite keys: the length prefix keeps ("ab","c") and ("a","bc")
   * apart, and (null, 0) apart from (0, null). */
  sl_bytes_clear(&a);
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl_key_add_str(&a, "ab", 2));
  SL_ASSERT_OK(sl_key_add_str(&a, "c", 1));
  SL_ASSERT_OK(sl_key_add_str(&b, "a", 1));
  SL_ASSERT_OK(sl_key_add_str(&b, "bc", 2));
  SL_ASSERT_TRUE(!same_bytes(&a, &b));
  sl_bytes_clear(&a);
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl_key_add_null(&a));
  SL_ASSERT_OK(sl_key_add_i64(&a, 0));
  SL_ASSERT_OK(sl_key_add_i64(&b, 0));
  SL_ASSERT_OK(sl_key_add_null(&b));
  SL_ASSERT_TRUE(!same_bytes(&a, &b));

  /* Many distinct int64 and string keys have distinct bytes; equal keys
   * built separately have equal bytes. */
  rng_seed(99);
  for (int i = 0; i < 20000; i++) {
    int64_t x = rnd_i64_edge(), y = rnd_i64_edge();
    sl_bytes_clear(&a);
    sl_bytes_clear(&b);
    SL_ASSERT_OK(sl_key_add_i64(&a, x));
    SL_ASSERT_OK(sl_key_add_i64(&b, y));
    SL_ASSERT_EQ_INT(same_bytes(&a, &b), x == y);
    sl_bytes_clear(&b);
    SL_ASSERT_OK(sl_key_add_i64(&b, x));
    SL_ASSERT_TRUE(same_bytes(&a, &b));
    char s1[8], s2[8];
    uint32_t l1 = (uint32_t)(rnd() % 4), l2 = (uint32_t)(rnd() % 4);
    for (uint32_t k = 0; k < l1; k++) s1[k] = (char)('a' + rnd() % 2);
    for (uint32_t k = 0; k < l2; k++) s2[k] = (char)('a' + rnd() % 2);
    sl_bytes_clear(&a);
    sl_bytes_clear(&b);
    SL_ASSERT_OK(sl_key_add_str(&a, s1, l1));
    SL_ASSERT_OK(sl_key_add_str(&b, s2, l2));
    SL_ASSERT_EQ_INT(same_bytes(&a, &b), l1 == l2 && memcmp(s1, s2, l1) == 0);
  }
  sl_bytes_close(&a);
  sl_bytes_close(&b);
}

/* ------------------------------------------------------------------ */
/* sl_row_builder_set_value conversions. */

static sl_value_t vint(sl_type_id_t t, int64_t i) {
  sl_value_t v;
  memset(&v, 0, sizeof(v));
  v.type = (uint8_t)t;
  v.u.i = i;
  return v;
}

static sl_value_t vdec(int64_t unscaled, uint8_t scale) {
  sl_value_t v = vint(SL_TYPE_DECIMAL, unscaled);
  v.scale = scale;
  return v;
}

/* Set field i from v, expect an error code naming the field, then check
 * that finish reports the same error and a reset clears it. */
static void expect_set_error(sl_row_builder_t *b, uint32_t i,
                             const sl_value_t *v, int code,
                             const char *field) {
  sl_row_builder_reset(b, SL_ROW_INSERT);
  SL_ASSERT_EQ_INT(sl_row_builder_set_value(b, i, v), code);
  sl_row_t r;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_row_builder_finish(b, &r, &err), code);
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(err), code);
  char quoted[64];
  snprintf(quoted, sizeof(quoted), "'%s'", field);
  SL_ASSERT_CONTAINS(sl_error_message(err), quoted);
  sl_error_destroy(err);
}

SL_TEST(set_value_conversions) {
  sl_field_t f[8] = {{"f", ty(SL_TYPE_FLOAT64, true)},
                     {"d2", dec(10, 2, true)},
                     {"d4", dec(4, 2, true)},
                     {"i32", ty(SL_TYPE_INT32, true)},
                     {"i64", ty(SL_TYPE_INT64, true)},
                     {"s", ty(SL_TYPE_STRING, true)},
                     {"d18", dec(18, 2, true)},
                     {"bin", ty(SL_TYPE_BYTES, true)}};
  sl_schema_t *s = make_schema(f, 8);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_t r;

  /* int -> float64, decimal -> float64. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  sl_value_t v = vint(SL_TYPE_INT64, -7);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 0, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_DBL(sl_row_get_f64(&r, 0), -7.0, 0);
  v = vint(SL_TYPE_INT32, 3);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 0, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_DBL(sl_row_get_f64(&r, 0), 3.0, 0);
  v = vdec(12345, 2);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 0, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_DBL(sl_row_get_f64(&r, 0), 123.45, 1e-12);

  /* int -> decimal rescales: 5 -> 5.00 (unscaled 500). */
  v = vint(SL_TYPE_INT64, 5);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 1, &v));
  v = vint(SL_TYPE_INT32, -99);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 2, &v)); /* -99.00 fits (4,2) */
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 1), 500);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 2), -9900);
  /* decimal scale 1 -> 2 multiplies; scale 4 -> 2 divides when exact. */
  v = vdec(123, 1);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 1, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 1), 1230);
  v = vdec(-456700, 4);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 1, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 1), -4567);
  /* The largest values of decimal(4,2). */
  v = vdec(9999, 2);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 2, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 2), 9999);
  v = vdec(-9999, 2);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 2, &v));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 2), -9999);

  /* int32 <- int64 in range; int64 <- int32. */
  v = vint(SL_TYPE_INT64, INT32_MIN);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 3, &v));
  v = vint(SL_TYPE_INT32, -5);
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 4, &v));
  /* string <-> bytes. */
  sl_value_t sv;
  memset(&sv, 0, sizeof(sv));
  sv.type = SL_TYPE_BYTES;
  sv.u.s.ptr = (const uint8_t *)"xyz";
  sv.u.s.len = 3;
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 5, &sv));
  sv.type = SL_TYPE_STRING;
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 7, &sv));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_EQ_INT(sl_row_get_i32(&r, 3), INT32_MIN);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 4), -5);
  SL_ASSERT_EQ_INT(sl_row_get_str(&r, 5).len, 3);
  SL_ASSERT_TRUE(memcmp(sl_row_get_str(&r, 7).ptr, "xyz", 3) == 0);
  SL_ASSERT_OK(sl_row_validate(s, r.data, r.len));

  /* A null value makes the field null. */
  sl_value_t nv = vint(SL_TYPE_INT64, 0);
  nv.is_null = true;
  SL_ASSERT_OK(sl_row_builder_set_value(&b, 4, &nv));
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  SL_ASSERT_TRUE(sl_row_is_null(&r, 4));

  /* Decimal overflow: beyond the precision, lost digits, int64 overflow. */
  v = vint(SL_TYPE_INT64, 100);
  expect_set_error(&b, 2, &v, SL_EOVERFLOW, "d4"); /* 100.00 > 99.99 */
  v = vint(SL_TYPE_INT64, -100);
  expect_set_error(&b, 2, &v, SL_EOVERFLOW, "d4");
  v = vdec(10000, 2);
  expect_set_error(&b, 2, &v, SL_EOVERFLOW, "d4");
  v = vdec(12345, 3); /* 12.345 cannot be 12.34 exactly */
  expect_set_error(&b, 1, &v, SL_EOVERFLOW, "d2");
  v = vint(SL_TYPE_INT64, INT64_MAX / 10);
  expect_set_error(&b, 6, &v, SL_EOVERFLOW, "d18"); /* * 100 overflows */
  v = vint(SL_TYPE_INT64, INT64_MIN);
  expect_set_error(&b, 1, &v, SL_EOVERFLOW, "d2");
  v = vdec(INT64_MAX, 0);
  expect_set_error(&b, 6, &v, SL_EOVERFLOW, "d18");
  /* int32 range. */
  v = vint(SL_TYPE_INT64, (int64_t)INT32_MAX + 1);
  expect_set_error(&b, 3, &v, SL_EOVERFLOW, "i32");
  /* Type mismatches. */
  expect_set_error(&b, 4, &sv, SL_ETYPE, "i64");
  v = vint(SL_TYPE_FLOAT64, 0);
  v.u.f = 1.5;
  expect_set_error(&b, 1, &v, SL_ETYPE, "d2");
  expect_set_error(&b, 4, &v, SL_ETYPE, "i64");
  v = vint(SL_TYPE_INT64, 1);
  expect_set_error(&b, 5, &v, SL_ETYPE, "s");

  /* The first error of a row wins; a reset clears it. */
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  v = vint(SL_TYPE_INT64, 1000);
  SL_ASSERT_EQ_INT(sl_row_builder_set_value(&b, 2, &v), SL_EOVERFLOW);
  SL_ASSERT_EQ_INT(sl_row_builder_set_value(&b, 4, &sv), SL_ETYPE);
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_row_builder_finish(&b, &r, &err), SL_EOVERFLOW);
  SL_ASSERT_CONTAINS(sl_error_message(err), "'d4'");
  sl_error_destroy(err);
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  SL_ASSERT_OK(sl_row_builder_finish(&b, &r, NULL));
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}
