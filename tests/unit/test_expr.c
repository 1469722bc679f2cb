/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the expression language (src/ops/expr.c, docs/expressions.md):
 * literals and field references, precedence, three-valued logic, every
 * arithmetic type rule, runtime overflow and division by zero, string,
 * decimal and timestamp comparisons, functions, compile errors with their
 * exact messages and columns, cloning, and evaluation without allocation.
 */
#include <math.h>

#include "ops/expr.h"
#include "sl_test.h"

/* ------------------------------------------------------------------------
 * Fixture: one schema with a field of every type and one row.
 */

enum {
  F_I,     /* int64 nullable = 10 */
  F_J,     /* int32 = 3 */
  F_N,     /* int64 nullable, null */
  F_F,     /* float64 = 2.5 */
  F_D,     /* decimal(10,2) = 12.34 */
  F_E,     /* decimal(18,4) nullable = 1.5 */
  F_S,     /* string = "Hello" */
  F_T,     /* string nullable, null */
  F_TS,    /* timestamp */
  F_TS2,   /* timestamp = ts + 1.5 s */
  F_B,     /* bool = true */
  F_NB,    /* bool nullable, null */
  F_MY,    /* "my field" int64 = 7 */
  F_BIG,   /* int64 = INT64_MAX */
  F_SMALL, /* int64 = INT64_MIN */
  F_Z,     /* int64 = 0 */
  F_BS,    /* bytes = "ab\0c" */
  F_U,     /* string with UTF-8 */
  F_NF,    /* float64 nullable, null */
  F_ND,    /* decimal(10,2) nullable, null */
  F_AND,   /* "and" int64 = 42 */
  F_ZF,    /* float64 = 0.0 */
  F_WIDE,  /* decimal(18,10) = 1.0 */
  F_COUNT
};

#define TS0 INT64_C(1700000000000000)
/* "\u00dcn\u00efcode": 7 characters in 9 bytes. */
#define UTF8_TEXT "\xc3\x9c" "n\xc3\xaf" "code"

static sl_schema_t *schema;
static sl_row_builder_t builder;
static sl_row_t row;
static sl_expr_t *last; /* expression of the last eval helper call */

static sl_type_t ty(uint8_t id, bool nullable) {
  sl_type_t t = {id, 0, 0, nullable};
  return t;
}

static sl_type_t dec(uint8_t p, uint8_t s, bool nullable) {
  sl_type_t t = {SL_TYPE_DECIMAL, p, s, nullable};
  return t;
}

static void fx_open(void) {
  sl_field_t f[F_COUNT] = {
      [F_I] = {"i", ty(SL_TYPE_INT64, true)},
      [F_J] = {"j", ty(SL_TYPE_INT32, false)},
      [F_N] = {"n", ty(SL_TYPE_INT64, true)},
      [F_F] = {"f", ty(SL_TYPE_FLOAT64, false)},
      [F_D] = {"d", dec(10, 2, false)},
      [F_E] = {"e", dec(18, 4, true)},
      [F_S] = {"s", ty(SL_TYPE_STRING, false)},
      [F_T] = {"t", ty(SL_TYPE_STRING, true)},
      [F_TS] = {"ts", ty(SL_TYPE_TIMESTAMP, false)},
      [F_TS2] = {"ts2", ty(SL_TYPE_TIMESTAMP, false)},
      [F_B] = {"b", ty(SL_TYPE_BOOL, false)},
      [F_NB] = {"nb", ty(SL_TYPE_BOOL, true)},
      [F_MY] = {"my field", ty(SL_TYPE_INT64, false)},
      [F_BIG] = {"big", ty(SL_TYPE_INT64, false)},
      [F_SMALL] = {"small", ty(SL_TYPE_INT64, false)},
      [F_Z] = {"z", ty(SL_TYPE_INT64, false)},
      [F_BS] = {"bs", ty(SL_TYPE_BYTES, false)},
      [F_U] = {"u", ty(SL_TYPE_STRING, false)},
      [F_NF] = {"nf", ty(SL_TYPE_FLOAT64, true)},
      [F_ND] = {"nd", dec(10, 2, true)},
      [F_AND] = {"and", ty(SL_TYPE_INT64, false)},
      [F_ZF] = {"zf", ty(SL_TYPE_FLOAT64, false)},
      [F_WIDE] = {"wide", dec(18, 10, false)},
  };
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_schema_create(f, F_COUNT, &schema, &err), err);
  SL_ASSERT_OK(sl_row_builder_init(&builder, schema));
  sl_row_builder_reset(&builder, SL_ROW_INSERT);
  sl_row_builder_set_i64(&builder, F_I, 10);
  sl_row_builder_set_i32(&builder, F_J, 3);
  sl_row_builder_set_f64(&builder, F_F, 2.5);
  sl_row_builder_set_i64(&builder, F_D, 1234);
  sl_row_builder_set_i64(&builder, F_E, 15000);
  SL_ASSERT_OK(sl_row_builder_set_str(&builder, F_S, "Hello", 5));
  sl_row_builder_set_i64(&builder, F_TS, TS0);
  sl_row_builder_set_i64(&builder, F_TS2, TS0 + 1500000);
  sl_row_builder_set_bool(&builder, F_B, true);
  sl_row_builder_set_i64(&builder, F_MY, 7);
  sl_row_builder_set_i64(&builder, F_BIG, INT64_MAX);
  sl_row_builder_set_i64(&builder, F_SMALL, INT64_MIN);
  sl_row_builder_set_i64(&builder, F_Z, 0);
  SL_ASSERT_OK(sl_row_builder_set_str(&builder, F_BS, "ab\0c", 4));
  SL_ASSERT_OK(sl_row_builder_set_str(&builder, F_U, UTF8_TEXT,
                                      (uint32_t)strlen(UTF8_TEXT)));
  sl_row_builder_set_i64(&builder, F_AND, 42);
  sl_row_builder_set_f64(&builder, F_ZF, 0.0);
  sl_row_builder_set_i64(&builder, F_WIDE, INT64_C(10000000000));
  SL_ASSERT_OK_E(sl_row_builder_finish(&builder, &row, &err), err);
}

static void fx_close(void) {
  sl__expr_destroy(last);
  last = NULL;
  sl_row_builder_close(&builder);
  sl_schema_unref(schema);
  schema = NULL;
}

/* ------------------------------------------------------------------------
 * Helpers
 */

static sl_expr_t *compile_ok(const char *text) {
  sl_expr_t *e = NULL;
  sl_error_t *err = NULL;
  uint32_t col = 0;
  int rc = sl__expr_compile(text, schema, &e, &col, &err);
  if (rc != SL_OK)
    SL_TEST_FAIL("compile '%s': %s: %s", text, sl_errname(rc),
                 err ? sl_error_message(err) : "");
  return e;
}

/* Compile and evaluate text on the fixture row; the expression stays
 * alive (in `last`) so that borrowed strings remain valid. */
static sl_value_t eval_ok(const char *text) {
  sl__expr_destroy(last);
  last = compile_ok(text);
  sl_value_t v;
  sl_error_t *err = NULL;
  int rc = sl__expr_eval(last, &row, &v, &err);
  if (rc != SL_OK)
    SL_TEST_FAIL("eval '%s': %s: %s", text, sl_errname(rc),
                 err ? sl_error_message(err) : "");
  SL_ASSERT_EQ_INT(v.type, sl__expr_type(last).id);
  return v;
}

static int64_t eval_int(const char *text) {
  sl_value_t v = eval_ok(text);
  if (v.type != SL_TYPE_INT64 || v.is_null)
    SL_TEST_FAIL("'%s': want a non-null int64, got type %s%s", text,
                 sl_type_name((sl_type_id_t)v.type),
                 v.is_null ? " (null)" : "");
  return v.u.i;
}

static double eval_f64(const char *text) {
  sl_value_t v = eval_ok(text);
  if (v.type != SL_TYPE_FLOAT64 || v.is_null)
    SL_TEST_FAIL("'%s': want a non-null float64, got type %s%s", text,
                 sl_type_name((sl_type_id_t)v.type),
                 v.is_null ? " (null)" : "");
  return v.u.f;
}

/* 1 true, 0 false, -1 null. */
static int eval_tri(const char *text) {
  sl_value_t v = eval_ok(text);
  if (v.type != SL_TYPE_BOOL)
    SL_TEST_FAIL("'%s': want bool, got %s", text,
                 sl_type_name((sl_type_id_t)v.type));
  return v.is_null ? -1 : v.u.b ? 1 : 0;
}

static void expect_str(const char *text, const char *want, uint32_t want_len) {
  sl_value_t v = eval_ok(text);
  if (v.type != SL_TYPE_STRING && v.type != SL_TYPE_BYTES)
    SL_TEST_FAIL("'%s': want a string, got %s", text,
                 sl_type_name((sl_type_id_t)v.type));
  SL_ASSERT_TRUE(!v.is_null);
  if (v.u.s.len != want_len || memcmp(v.u.s.ptr, want, want_len) != 0)
    SL_TEST_FAIL("'%s': got '%.*s', want '%s'", text, (int)v.u.s.len,
                 (const char *)v.u.s.ptr, want);
}

static void expect_null(const char *text, uint8_t type_id) {
  sl_value_t v = eval_ok(text);
  if (!v.is_null) SL_TEST_FAIL("'%s': want null", text);
  SL_ASSERT_EQ_INT(v.type, type_id);
  SL_ASSERT_TRUE(sl__expr_type(last).nullable);
}

static void expect_type(const char *text, sl_type_t want) {
  sl_expr_t *e = compile_ok(text);
  sl_type_t t = sl__expr_type(e);
  char a[32], b[32];
  if (t.id != want.id || t.nullable != want.nullable ||
      (t.id == SL_TYPE_DECIMAL &&
       (t.precision != want.precision || t.scale != want.scale)))
    SL_TEST_FAIL("type of '%s': %s%s, want %s%s", text,
                 sl_type_format(t, a, sizeof(a)), t.nullable ? "?" : "",
                 sl_type_format(want, b, sizeof(b)),
                 want.nullable ? "?" : "");
  sl__expr_destroy(e);
}

static void expect_compile_error_mode(bool is_filter, const char *text,
                                      int code, uint32_t col,
                                      const char *msg) {
  sl_expr_t *e = NULL;
  sl_error_t *err = NULL;
  uint32_t got_col = 12345;
  int rc = is_filter ? sl__expr_compile_filter(text, schema, &e, &got_col,
                                               &err)
                     : sl__expr_compile(text, schema, &e, &got_col, &err);
  if (rc == SL_OK) SL_TEST_FAIL("'%s' compiled; want '%s'", text, msg);
  SL_ASSERT_TRUE(e == NULL);
  SL_ASSERT_TRUE(err != NULL);
  if (rc != code)
    SL_TEST_FAIL("'%s': code %s, want %s (%s)", text, sl_errname(rc),
                 sl_errname(code), sl_error_message(err));
  SL_ASSERT_EQ_INT(sl_error_code(err), code);
  SL_ASSERT_EQ_STR(sl_error_message(err), msg);
  SL_ASSERT_EQ_INT(got_col, col);
  sl_error_destroy(err);
}

static void expect_compile_error(const char *text, int code, uint32_t col,
                                 const char *msg) {
  expect_compile_error_mode(false, text, code, col, msg);
}

static void expect_eval_error(const char *text, int code, const char *msg) {
  sl_expr_t *e = compile_ok(text);
  sl_value_t v;
  v.type = 99;
  sl_error_t *err = NULL;
  int rc = sl__expr_eval(e, &row, &v, &err);
  if (rc == SL_OK) SL_TEST_FAIL("'%s' evaluated; want '%s'", text, msg);
  SL_ASSERT_EQ_INT(v.type, 99); /* out is written only on success */
  SL_ASSERT_TRUE(err != NULL);
  if (rc != code)
    SL_TEST_FAIL("'%s': code %s, want %s (%s)", text, sl_errname(rc),
                 sl_errname(code), sl_error_message(err));
  SL_ASSERT_EQ_STR(sl_error_message(err), msg);
  sl_error_destroy(err);
  /* Without an error object only the code comes back. */
  SL_ASSERT_EQ_INT(sl__expr_eval(e, &row, &v, NULL), code);
  sl__expr_destroy(e);
}

/* ------------------------------------------------------------------------
 * Literals and fields
 */

SL_TEST(literals) {
  fx_open();
  SL_ASSERT_EQ_INT(eval_int("42"), 42);
  SL_ASSERT_EQ_INT(eval_int("-42"), -42);
  SL_ASSERT_EQ_INT(eval_int("9223372036854775807"), INT64_MAX);
  SL_ASSERT_EQ_INT(eval_int("-9223372036854775808"), INT64_MIN);
  SL_ASSERT_EQ_DBL(eval_f64("1.5"), 1.5, 0);
  SL_ASSERT_EQ_DBL(eval_f64("2e3"), 2000.0, 0);
  SL_ASSERT_EQ_DBL(eval_f64("2.5E-1"), 0.25, 0);
  SL_ASSERT_EQ_DBL(eval_f64("-0.5"), -0.5, 0);
  expect_str("'it\\'s'", "it's", 4);
  expect_str("\"say \\\"hi\\\"\"", "say \"hi\"", 8);
  expect_str("'a\\\\b\\nc\\td'", "a\\b\nc\td", 7);
  expect_str("\"it's\"", "it's", 4);
  expect_str("''", "", 0);
  SL_ASSERT_EQ_INT(eval_tri("true"), 1);
  SL_ASSERT_EQ_INT(eval_tri("false"), 0);
  SL_ASSERT_EQ_INT(eval_tri("TRUE"), 1);
  SL_ASSERT_EQ_INT(eval_tri("False"), 0);
  /* A bare null has no type of its own and reports bool. */
  expect_null("null", SL_TYPE_BOOL);
  expect_null("NULL", SL_TYPE_BOOL);
  expect_type("1", ty(SL_TYPE_INT64, false));
  expect_type("1.0", ty(SL_TYPE_FLOAT64, false));
  expect_type("'x'", ty(SL_TYPE_STRING, false));
  fx_close();
}

SL_TEST(field_references) {
  fx_open();
  sl_value_t v = eval_ok("j");
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_INT32);
  SL_ASSERT_EQ_INT(v.u.i, 3);
  SL_ASSERT_EQ_INT(eval_int("`my field`"), 7);
  SL_ASSERT_EQ_INT(eval_int("`and` + 1"), 43);
  v = eval_ok("d");
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_DECIMAL);
  SL_ASSERT_EQ_INT(v.scale, 2);
  SL_ASSERT_EQ_INT(v.u.i, 1234);
  v = eval_ok("ts");
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_TIMESTAMP);
  SL_ASSERT_EQ_INT(v.u.i, TS0);
  SL_ASSERT_EQ_INT(eval_tri("b"), 1);
  SL_ASSERT_EQ_INT(eval_tri("nb"), -1);
  expect_null("n", SL_TYPE_INT64);
  expect_null("t", SL_TYPE_STRING);
  /* A string field is borrowed from the row. */
  v = eval_ok("s");
  SL_ASSERT_TRUE(v.u.s.ptr >= row.data && v.u.s.ptr < row.data + row.len);
  expect_str("bs", "ab\0c", 4);
  /* Types come from the schema, nullability included. */
  expect_type("i", ty(SL_TYPE_INT64, true));
  expect_type("e", dec(18, 4, true));
  expect_type("ts", ty(SL_TYPE_TIMESTAMP, false));

  uint32_t field = 999;
  sl_expr_t *e = compile_ok("`my field`");
  SL_ASSERT_TRUE(sl__expr_is_field(e, &field));
  SL_ASSERT_EQ_INT(field, F_MY);
  sl__expr_destroy(e);
  e = compile_ok(" ( s ) ");
  SL_ASSERT_TRUE(sl__expr_is_field(e, &field));
  SL_ASSERT_EQ_INT(field, F_S);
  sl__expr_destroy(e);
  e = compile_ok("i + 0");
  field = 999;
  SL_ASSERT_TRUE(!sl__expr_is_field(e, &field));
  SL_ASSERT_EQ_INT(field, 999);
  SL_ASSERT_EQ_STR(sl__expr_text(e), "i + 0");
  sl__expr_destroy(e);
  e = compile_ok("42");
  SL_ASSERT_TRUE(!sl__expr_is_field(e, NULL));
  sl__expr_destroy(e);
  fx_close();
}

/* ------------------------------------------------------------------------
 * Precedence and associativity
 */

SL_TEST(precedence) {
  fx_open();
  SL_ASSERT_EQ_INT(eval_int("1 + 2 * 3"), 7);
  SL_ASSERT_EQ_INT(eval_int("(1 + 2) * 3"), 9);
  SL_ASSERT_EQ_INT(eval_int("10 - 4 - 3"), 3);    /* left associative */
  SL_ASSERT_EQ_INT(eval_int("100 / 10 / 5"), 2);  /* left associative */
  SL_ASSERT_EQ_INT(eval_int("2 * 7 % 4"), 2);     /* (2*7) % 4 */
  SL_ASSERT_EQ_INT(eval_int("1 + 7 % 4"), 4);
  SL_ASSERT_EQ_INT(eval_int("-2 * 3"), -6);
  SL_ASSERT_EQ_INT(eval_int("-(2 + 3)"), -5);
  SL_ASSERT_EQ_INT(eval_int("- -3"), 3);
  SL_ASSERT_EQ_INT(eval_int("2 - -3"), 5);
  SL_ASSERT_EQ_INT(eval_int("-j * 2"), -6);
  SL_ASSERT_EQ_INT(eval_int("i - j * 2 + 1"), 5);
  /* Comparisons bind looser than arithmetic. */
  SL_ASSERT_EQ_INT(eval_tri("1 + 2 = 3"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i > j + 6"), 1);
  /* not binds looser than comparisons and tighter than and. */
  SL_ASSERT_EQ_INT(eval_tri("not 1 = 2"), 1);
  SL_ASSERT_EQ_INT(eval_tri("not false and false"), 0);
  SL_ASSERT_EQ_INT(eval_tri("not (false and false)"), 1);
  SL_ASSERT_EQ_INT(eval_tri("not not true"), 1);
  /* and binds tighter than or. */
  SL_ASSERT_EQ_INT(eval_tri("true or false and false"), 1);
  SL_ASSERT_EQ_INT(eval_tri("(true or false) and false"), 0);
  SL_ASSERT_EQ_INT(eval_tri("false and true or true"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i > 5 and j < 5 or false"), 1);
  /* is null applies to the whole comparison before it. */
  SL_ASSERT_EQ_INT(eval_tri("n + 1 is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i = n is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("not n is null"), 0);
  /* Whitespace is free; keywords are case-insensitive. */
  SL_ASSERT_EQ_INT(eval_int("\t1+2\n*3 "), 7);
  SL_ASSERT_EQ_INT(eval_tri("TRUE AnD NOT False Or FALSE"), 1);
  SL_ASSERT_EQ_INT(eval_tri("n IS NULL and i Is Not Null"), 1);
  fx_close();
}

/* ------------------------------------------------------------------------
 * Three-valued logic
 */

SL_TEST(three_valued_logic_tables) {
  fx_open();
  static const char *lit[3] = {"false", "true", "null"};
  static const char *fld[3] = {"(z = 1)", "b", "nb"}; /* same, as fields */
  /* want[x][y], with 0 false, 1 true, -1 null (index 2 is null). */
  static const int and_tab[3][3] = {{0, 0, 0}, {0, 1, -1}, {0, -1, -1}};
  static const int or_tab[3][3] = {{0, 1, -1}, {1, 1, 1}, {-1, 1, -1}};
  static const int not_tab[3] = {1, 0, -1};
  char buf[64];
  for (int x = 0; x < 3; x++) {
    for (int y = 0; y < 3; y++) {
      snprintf(buf, sizeof(buf), "%s and %s", lit[x], lit[y]);
      SL_ASSERT_EQ_INT(eval_tri(buf), and_tab[x][y]);
      snprintf(buf, sizeof(buf), "%s or %s", lit[x], lit[y]);
      SL_ASSERT_EQ_INT(eval_tri(buf), or_tab[x][y]);
      snprintf(buf, sizeof(buf), "%s and %s", fld[x], fld[y]);
      SL_ASSERT_EQ_INT(eval_tri(buf), and_tab[x][y]);
      snprintf(buf, sizeof(buf), "%s or %s", fld[x], fld[y]);
      SL_ASSERT_EQ_INT(eval_tri(buf), or_tab[x][y]);
    }
    snprintf(buf, sizeof(buf), "not %s", lit[x]);
    SL_ASSERT_EQ_INT(eval_tri(buf), not_tab[x]);
    snprintf(buf, sizeof(buf), "not %s", fld[x]);
    SL_ASSERT_EQ_INT(eval_tri(buf), not_tab[x]);
  }
  /* Comparisons with null are null, even null = null. */
  SL_ASSERT_EQ_INT(eval_tri("n = 1"), -1);
  SL_ASSERT_EQ_INT(eval_tri("n != 1"), -1);
  SL_ASSERT_EQ_INT(eval_tri("null = null"), -1);
  SL_ASSERT_EQ_INT(eval_tri("1 < null"), -1);
  SL_ASSERT_EQ_INT(eval_tri("s = t"), -1);
  SL_ASSERT_EQ_INT(eval_tri("nb = true"), -1);
  /* Nullability of the result type follows the operands. */
  expect_type("b and true", ty(SL_TYPE_BOOL, false));
  expect_type("b and nb", ty(SL_TYPE_BOOL, true));
  expect_type("j > 1", ty(SL_TYPE_BOOL, false));
  expect_type("i > 1", ty(SL_TYPE_BOOL, true));
  expect_type("not nb", ty(SL_TYPE_BOOL, true));
  fx_close();
}

SL_TEST(and_or_short_circuit) {
  fx_open();
  /* The right side is not evaluated when the left side decides. */
  SL_ASSERT_EQ_INT(eval_tri("z != 0 and i / z > 1"), 0);
  SL_ASSERT_EQ_INT(eval_tri("z = 0 or i / z > 1"), 1);
  expect_eval_error("z = 0 and i / z > 1", SL_EINVAL,
                    "division by zero at column 13");
  /* A null left side must look at the right side. */
  SL_ASSERT_EQ_INT(eval_tri("nb and false"), 0);
  SL_ASSERT_EQ_INT(eval_tri("nb or true"), 1);
  fx_close();
}

SL_TEST(is_null) {
  fx_open();
  SL_ASSERT_EQ_INT(eval_tri("n is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("n is not null"), 0);
  SL_ASSERT_EQ_INT(eval_tri("i is null"), 0);
  SL_ASSERT_EQ_INT(eval_tri("i is not null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("t is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("nb is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("null is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("NULL IS NOT NULL"), 0);
  SL_ASSERT_EQ_INT(eval_tri("(n * 2) is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("(i * 2) is null"), 0);
  SL_ASSERT_EQ_INT(eval_tri("(n = 1) is null"), 1);
  SL_ASSERT_EQ_INT(eval_tri("n is null is not null"), 1);
  /* is null is never null itself. */
  expect_type("n is null", ty(SL_TYPE_BOOL, false));
  fx_close();
}

/* ------------------------------------------------------------------------
 * Arithmetic type rules
 */

SL_TEST(integer_arithmetic) {
  fx_open();
  /* int32 and int64 operands give int64. */
  expect_type("j + j", ty(SL_TYPE_INT64, false));
  expect_type("j * 2", ty(SL_TYPE_INT64, false));
  expect_type("-j", ty(SL_TYPE_INT64, false));
  expect_type("i + j", ty(SL_TYPE_INT64, true));
  SL_ASSERT_EQ_INT(eval_int("j + j"), 6);
  SL_ASSERT_EQ_INT(eval_int("i - j"), 7);
  SL_ASSERT_EQ_INT(eval_int("i * j"), 30);
  /* int / int is integer division, truncating toward zero. */
  SL_ASSERT_EQ_INT(eval_int("7 / 2"), 3);
  SL_ASSERT_EQ_INT(eval_int("-7 / 2"), -3);
  SL_ASSERT_EQ_INT(eval_int("i / j"), 3);
  SL_ASSERT_EQ_INT(eval_int("7 % 3"), 1);
  SL_ASSERT_EQ_INT(eval_int("-7 % 3"), -1);
  SL_ASSERT_EQ_INT(eval_int("i % j"), 1);
  SL_ASSERT_EQ_INT(eval_int("small % -1"), 0);
  SL_ASSERT_EQ_INT(eval_int("big - 1 + 1"), INT64_MAX);
  SL_ASSERT_EQ_INT(eval_int("small + big"), -1);
  SL_ASSERT_EQ_INT(eval_int("-big - 1"), INT64_MIN);
  fx_close();
}

SL_TEST(integer_overflow) {
  fx_open();
  expect_eval_error("big + 1", SL_EOVERFLOW,
                    "integer overflow in '+' at column 5");
  expect_eval_error("small - 1", SL_EOVERFLOW,
                    "integer overflow in '-' at column 7");
  expect_eval_error("2 * big", SL_EOVERFLOW,
                    "integer overflow in '*' at column 3");
  expect_eval_error("small / -1", SL_EOVERFLOW,
                    "integer overflow in '/' at column 7");
  expect_eval_error("-small", SL_EOVERFLOW,
                    "integer overflow in '-' at column 1");
  expect_eval_error("abs(small)", SL_EOVERFLOW,
                    "integer overflow in 'abs' at column 1");
  expect_eval_error("1 + (big + j)", SL_EOVERFLOW,
                    "integer overflow in '+' at column 10");
  fx_close();
}

SL_TEST(division_by_zero) {
  fx_open();
  expect_eval_error("i / z", SL_EINVAL, "division by zero at column 3");
  expect_eval_error("i % z", SL_EINVAL, "division by zero at column 3");
  expect_eval_error("1 / 0", SL_EINVAL, "division by zero at column 3");
  expect_eval_error("f / zf", SL_EINVAL, "division by zero at column 3");
  expect_eval_error("f / 0", SL_EINVAL, "division by zero at column 3");
  expect_eval_error("d / 0", SL_EINVAL, "division by zero at column 3");
  expect_eval_error("j + (1 / z)", SL_EINVAL,
                    "division by zero at column 8");
  /* A null dividend gives null, not an error. */
  expect_null("n / z", SL_TYPE_INT64);
  expect_null("n / 0", SL_TYPE_INT64);
  fx_close();
}

SL_TEST(float_arithmetic) {
  fx_open();
  /* Any float64 operand gives float64. */
  expect_type("f + 1", ty(SL_TYPE_FLOAT64, false));
  expect_type("j * f", ty(SL_TYPE_FLOAT64, false));
  expect_type("d + f", ty(SL_TYPE_FLOAT64, false));
  expect_type("-f", ty(SL_TYPE_FLOAT64, false));
  SL_ASSERT_EQ_DBL(eval_f64("f + 1"), 3.5, 0);
  SL_ASSERT_EQ_DBL(eval_f64("1 + f"), 3.5, 0);
  SL_ASSERT_EQ_DBL(eval_f64("f * j"), 7.5, 0);
  SL_ASSERT_EQ_DBL(eval_f64("f - i"), -7.5, 0);
  SL_ASSERT_EQ_DBL(eval_f64("j / 2.0"), 1.5, 0);
  SL_ASSERT_EQ_DBL(eval_f64("f / 2"), 1.25, 0);
  SL_ASSERT_EQ_DBL(eval_f64("-f"), -2.5, 0);
  /* Decimal with float gives float. */
  SL_ASSERT_EQ_DBL(eval_f64("d + f"), 14.84, 1e-12);
  SL_ASSERT_EQ_DBL(eval_f64("d * 0.5"), 6.17, 1e-12);
  /* `/` gives float64 unless both sides are integers. */
  expect_type("d / 2", ty(SL_TYPE_FLOAT64, false));
  expect_type("d / e", ty(SL_TYPE_FLOAT64, true));
  expect_type("i / 2", ty(SL_TYPE_INT64, true));
  SL_ASSERT_EQ_DBL(eval_f64("d / 2"), 6.17, 1e-12);
  SL_ASSERT_EQ_DBL(eval_f64("j / d"), 3 / 12.34, 1e-12);
  SL_ASSERT_EQ_DBL(eval_f64("d / e"), 12.34 / 1.5, 1e-12);
  SL_ASSERT_EQ_INT(eval_int("1 / 2"), 0);
  fx_close();
}

SL_TEST(decimal_arithmetic) {
  fx_open();
  sl_value_t v;
  /* + and -: the larger scale, one more integer digit. */
  expect_type("d + 1", dec(11, 2, false));
  v = eval_ok("d + 1");
  SL_ASSERT_EQ_INT(v.scale, 2);
  SL_ASSERT_EQ_INT(v.u.i, 1334);
  v = eval_ok("1 - d");
  SL_ASSERT_EQ_INT(v.u.i, -1134);
  expect_type("d + j", dec(13, 2, false));
  v = eval_ok("d + j");
  SL_ASSERT_EQ_INT(v.u.i, 1534);
  /* Precision is capped at 18; the scale is kept. */
  expect_type("d - e", dec(18, 4, true));
  v = eval_ok("d - e");
  SL_ASSERT_EQ_INT(v.scale, 4);
  SL_ASSERT_EQ_INT(v.u.i, 108400); /* 12.34 - 1.5 = 10.84 */
  v = eval_ok("e + d");
  SL_ASSERT_EQ_INT(v.u.i, 138400);
  /* *: scales and precisions add. */
  expect_type("d * 2", dec(11, 2, false));
  v = eval_ok("d * 2");
  SL_ASSERT_EQ_INT(v.u.i, 2468);
  expect_type("d * d", dec(18, 4, false));
  v = eval_ok("d * d");
  SL_ASSERT_EQ_INT(v.scale, 4);
  SL_ASSERT_EQ_INT(v.u.i, 1522756); /* 152.2756 */
  expect_type("d * j", dec(18, 2, false));
  v = eval_ok("d * j");
  SL_ASSERT_EQ_INT(v.u.i, 3702);
  /* Unary minus and abs keep the type. */
  expect_type("-d", dec(10, 2, false));
  v = eval_ok("-d");
  SL_ASSERT_EQ_INT(v.u.i, -1234);
  v = eval_ok("abs(-d)");
  SL_ASSERT_EQ_INT(v.u.i, 1234);
  expect_type("abs(d)", dec(10, 2, false));
  /* Null propagates. */
  expect_null("nd + d", SL_TYPE_DECIMAL);
  expect_null("nd * 2", SL_TYPE_DECIMAL);
  fx_close();
}

SL_TEST(decimal_overflow) {
  fx_open();
  /* decimal(18,10) + 10^8 needs 19 digits; capped at 18, so it fails at
   * runtime when the value does not fit. */
  expect_type("wide + 100000000", dec(18, 10, false));
  expect_eval_error("wide + 100000000", SL_EOVERFLOW,
                    "decimal overflow in '+' at column 6");
  sl_value_t v = eval_ok("wide + 10000000");
  SL_ASSERT_EQ_INT(v.u.i, INT64_C(100000010000000000));
  /* Rescaling an int64 to scale 10 overflows int64. */
  expect_eval_error("wide - big", SL_EOVERFLOW,
                    "decimal overflow in '-' at column 6");
  expect_eval_error("wide * big", SL_EOVERFLOW,
                    "decimal overflow in '*' at column 6");
  fx_close();
}

SL_TEST(null_arithmetic) {
  fx_open();
  expect_null("n + 1", SL_TYPE_INT64);
  expect_null("1 - n", SL_TYPE_INT64);
  expect_null("n * f", SL_TYPE_FLOAT64);
  expect_null("-n", SL_TYPE_INT64);
  expect_null("null + 1", SL_TYPE_INT64);
  expect_null("null * 2.5", SL_TYPE_FLOAT64);
  expect_null("d + null", SL_TYPE_DECIMAL);
  expect_null("ts + null", SL_TYPE_TIMESTAMP);
  expect_null("ts - null", SL_TYPE_TIMESTAMP);
  expect_null("nf / 2", SL_TYPE_FLOAT64);
  expect_type("1 + null", ty(SL_TYPE_INT64, true));
  expect_type("d + null", dec(11, 2, true));
  fx_close();
}

/* ------------------------------------------------------------------------
 * Comparisons
 */

SL_TEST(numeric_comparisons) {
  fx_open();
  SL_ASSERT_EQ_INT(eval_tri("i = 10"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i == 10"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i != 10"), 0);
  SL_ASSERT_EQ_INT(eval_tri("i <> 11"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i < 11"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i <= 10"), 1);
  SL_ASSERT_EQ_INT(eval_tri("i > 10"), 0);
  SL_ASSERT_EQ_INT(eval_tri("i >= 10"), 1);
  SL_ASSERT_EQ_INT(eval_tri("j = 3"), 1); /* int32 with int64 */
  /* Different kinds compare numerically. */
  SL_ASSERT_EQ_INT(eval_tri("j = 3.0"), 1);
  SL_ASSERT_EQ_INT(eval_tri("1 = 1.0"), 1);
  SL_ASSERT_EQ_INT(eval_tri("f < j"), 1);
  SL_ASSERT_EQ_INT(eval_tri("f > 2"), 1);
  SL_ASSERT_EQ_INT(eval_tri("d > 12"), 1);
  SL_ASSERT_EQ_INT(eval_tri("d < 13"), 1);
  SL_ASSERT_EQ_INT(eval_tri("d = 12.34"), 1);
  SL_ASSERT_EQ_INT(eval_tri("d > f"), 1);
  SL_ASSERT_EQ_INT(eval_tri("e = 1.5"), 1);
  SL_ASSERT_EQ_INT(eval_tri("d > e"), 1);
  SL_ASSERT_EQ_INT(eval_tri("e * 1 = e"), 1);
  SL_ASSERT_EQ_INT(eval_tri("d - d = 0"), 1);
  /* Decimal against int64 extremes: exact even when rescaling would
   * overflow. */
  SL_ASSERT_EQ_INT(eval_tri("wide < big"), 1);
  SL_ASSERT_EQ_INT(eval_tri("wide > small"), 1);
  SL_ASSERT_EQ_INT(eval_tri("wide = 1"), 1);
  SL_ASSERT_EQ_INT(eval_tri("wide = j"), 0);
  /* Timestamps compare with timestamps. */
  SL_ASSERT_EQ_INT(eval_tri("ts < ts2"), 1);
  SL_ASSERT_EQ_INT(eval_tri("ts = ts2"), 0);
  SL_ASSERT_EQ_INT(eval_tri("ts >= ts"), 1);
  /* Bools compare with = and !=. */
  SL_ASSERT_EQ_INT(eval_tri("b = true"), 1);
  SL_ASSERT_EQ_INT(eval_tri("b != true"), 0);
  SL_ASSERT_EQ_INT(eval_tri("false <> b"), 1);
  SL_ASSERT_EQ_INT(eval_tri("(i > 1) = (j > 1)"), 1);
  fx_close();
}

/* A field compared with a constant is evaluated in place; with the
 * constant first the comparison must be mirrored. */
SL_TEST(field_constant_comparisons) {
  fx_open();
  static const struct {
    const char *text;
    int want;
  } cases[] = {
      {"i > 3", 1},       {"3 < i", 1},        {"3 > i", 0},
      {"10 <= i", 1},     {"10 >= i", 1},      {"9 >= i", 0},
      {"11 > i", 1},      {"10 = i", 1},       {"10 != i", 0},
      {"n > 3", -1},      {"3 < n", -1},       {"2.0 < f", 1},
      {"2.5 >= f", 1},    {"f > 2.5", 0},      {"nf < 1.0", -1},
      {"12 < d", 1},      {"d > 12", 1},       {"13 > d", 1},
      {"d >= 12.34", 1},  {"nd = 1", -1},      {"'Help' > s", 1},
      {"'Hello' = s", 1}, {"s < 'Hello!'", 1}, {"'a' < t", -1},
      {"ts2 > ts", 1},    {"j < 4", 1},        {"4 < j", 0},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    int got = eval_tri(cases[k].text);
    if (got != cases[k].want)
      SL_TEST_FAIL("'%s': got %d, want %d", cases[k].text, got,
                   cases[k].want);
  }
  fx_close();
}

SL_TEST(string_comparisons) {
  fx_open();
  SL_ASSERT_EQ_INT(eval_tri("s = 'Hello'"), 1);
  SL_ASSERT_EQ_INT(eval_tri("s == \"Hello\""), 1);
  SL_ASSERT_EQ_INT(eval_tri("s != 'hello'"), 1);
  SL_ASSERT_EQ_INT(eval_tri("s < 'Help'"), 1);
  SL_ASSERT_EQ_INT(eval_tri("s > 'Hell'"), 1); /* a prefix sorts first */
  SL_ASSERT_EQ_INT(eval_tri("s <= 'Hello'"), 1);
  SL_ASSERT_EQ_INT(eval_tri("s >= 'Hellp'"), 0);
  SL_ASSERT_EQ_INT(eval_tri("'' < 'a'"), 1);
  SL_ASSERT_EQ_INT(eval_tri("'' = ''"), 1);
  SL_ASSERT_EQ_INT(eval_tri("'B' < 'a'"), 1); /* bytewise */
  SL_ASSERT_EQ_INT(eval_tri("'\\t' < ' '"), 1);
  SL_ASSERT_EQ_INT(eval_tri("u > 'z'"), 1);    /* UTF-8 bytes >= 0x80 */
  SL_ASSERT_EQ_INT(eval_tri("bs = bs"), 1);
  SL_ASSERT_EQ_INT(eval_tri("bs > 'ab'"), 1);  /* embedded NUL counts */
  SL_ASSERT_EQ_INT(eval_tri("bs < 'ab\\\\'"), 1);
  SL_ASSERT_EQ_INT(eval_tri("t = 'x'"), -1);
  fx_close();
}

/* ------------------------------------------------------------------------
 * Timestamps
 */

SL_TEST(timestamps) {
  fx_open();
  expect_type("ts2 - ts", ty(SL_TYPE_INT64, false));
  SL_ASSERT_EQ_INT(eval_int("ts2 - ts"), 1500000);
  SL_ASSERT_EQ_INT(eval_int("ts - ts2"), -1500000);
  expect_type("ts + 1000000", ty(SL_TYPE_TIMESTAMP, false));
  expect_type("1000000 + ts", ty(SL_TYPE_TIMESTAMP, false));
  expect_type("ts - j", ty(SL_TYPE_TIMESTAMP, false));
  sl_value_t v = eval_ok("ts + 1000000");
  SL_ASSERT_EQ_INT(v.type, SL_TYPE_TIMESTAMP);
  SL_ASSERT_EQ_INT(v.u.i, TS0 + 1000000);
  v = eval_ok("1000000 + ts");
  SL_ASSERT_EQ_INT(v.u.i, TS0 + 1000000);
  v = eval_ok("ts - 1");
  SL_ASSERT_EQ_INT(v.u.i, TS0 - 1);
  SL_ASSERT_EQ_INT(eval_tri("ts + 1500000 = ts2"), 1);
  SL_ASSERT_EQ_INT(eval_tri("ts2 - 1500000 = ts"), 1);
  SL_ASSERT_EQ_INT(eval_tri("ts2 - ts > 1000000"), 1);
  expect_eval_error("ts + big", SL_EOVERFLOW,
                    "timestamp overflow in '+' at column 4");
  expect_eval_error("ts - small", SL_EOVERFLOW,
                    "timestamp overflow in '-' at column 4");
  fx_close();
}

/* ------------------------------------------------------------------------
 * Functions
 */

SL_TEST(functions) {
  fx_open();
  SL_ASSERT_EQ_INT(eval_int("abs(-5)"), 5);
  SL_ASSERT_EQ_INT(eval_int("abs(5)"), 5);
  SL_ASSERT_EQ_INT(eval_int("ABS(j - 10)"), 7);
  expect_type("abs(j)", ty(SL_TYPE_INT64, false));
  SL_ASSERT_EQ_DBL(eval_f64("abs(f - 10)"), 7.5, 0);
  expect_null("abs(n)", SL_TYPE_INT64);

  expect_str("lower(s)", "hello", 5);
  expect_str("upper(s)", "HELLO", 5);
  expect_str("Lower('MiXeD 123')", "mixed 123", 9);
  expect_str("upper('')", "", 0);
  /* ASCII only: the UTF-8 bytes are kept. */
  expect_str("upper(u)", "\xc3\x9cN\xc3\xaf" "CODE", 9);
  expect_null("lower(t)", SL_TYPE_STRING);
  expect_null("upper(null)", SL_TYPE_STRING);
  /* Each call has its own buffer. */
  SL_ASSERT_EQ_INT(eval_tri("lower(s) = upper(s)"), 0);
  SL_ASSERT_EQ_INT(eval_tri("upper(lower(s)) = upper(s)"), 1);
  SL_ASSERT_EQ_INT(eval_tri("lower(s) > upper(s)"), 1);

  SL_ASSERT_EQ_INT(eval_int("length(s)"), 5);
  SL_ASSERT_EQ_INT(eval_int("length(u)"), 7);  /* characters */
  SL_ASSERT_EQ_INT(eval_int("length(bs)"), 4); /* bytes */
  SL_ASSERT_EQ_INT(eval_int("length('')"), 0);
  expect_null("length(t)", SL_TYPE_INT64);

  SL_ASSERT_EQ_INT(eval_int("coalesce(n, 5)"), 5);
  SL_ASSERT_EQ_INT(eval_int("coalesce(i, 5)"), 10);
  SL_ASSERT_EQ_INT(eval_int("coalesce(null, n, 3)"), 3);
  expect_str("coalesce(t, 'none')", "none", 4);
  expect_str("coalesce(s, 'none')", "Hello", 5);
  SL_ASSERT_EQ_INT(eval_tri("coalesce(nb, false)"), 0);
  expect_null("coalesce(n, i * n)", SL_TYPE_INT64);
  /* Arguments widen like arithmetic operands. */
  expect_type("coalesce(n, 1)", ty(SL_TYPE_INT64, false));
  expect_type("coalesce(n, i)", ty(SL_TYPE_INT64, true));
  expect_type("coalesce(j, j)", ty(SL_TYPE_INT32, false));
  expect_type("coalesce(nf, 1)", ty(SL_TYPE_FLOAT64, false));
  SL_ASSERT_EQ_DBL(eval_f64("coalesce(nf, 1)"), 1.0, 0);
  expect_type("coalesce(nd, 1)", dec(10, 2, false));
  sl_value_t v = eval_ok("coalesce(nd, 1)");
  SL_ASSERT_EQ_INT(v.scale, 2);
  SL_ASSERT_EQ_INT(v.u.i, 100);
  v = eval_ok("coalesce(nd, e)");
  SL_ASSERT_EQ_INT(v.scale, 4);
  SL_ASSERT_EQ_INT(v.u.i, 15000);
  v = eval_ok("coalesce(d, e)");
  SL_ASSERT_EQ_INT(v.u.i, 123400);
  fx_close();
}

/* ------------------------------------------------------------------------
 * Filters
 */

SL_TEST(filter_keeps_only_true) {
  fx_open();
  static const struct {
    const char *text;
    bool keep;
  } cases[] = {{"i > 5", true},        {"i < 5", false},
               {"n > 5", false},       {"not (n > 5)", false},
               {"nb", false},          {"not nb", false},
               {"b", true},            {"null", false},
               {"nb or b", true},      {"s = 'Hello' and j = 3", true},
               {"t is null", true},    {"coalesce(nb, true)", true}};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    sl_expr_t *e = NULL;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__expr_compile_filter(cases[k].text, schema, &e, NULL,
                                           &err),
                   err);
    bool keep = !cases[k].keep;
    SL_ASSERT_OK(sl__expr_eval_bool(e, &row, &keep, NULL));
    if (keep != cases[k].keep)
      SL_TEST_FAIL("filter '%s': keep %d", cases[k].text, (int)keep);
    sl__expr_destroy(e);
  }
  /* Runtime errors come back from eval_bool too. */
  sl_expr_t *e = NULL;
  SL_ASSERT_OK(sl__expr_compile_filter("i / z = 1", schema, &e, NULL, NULL));
  bool keep = true;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__expr_eval_bool(e, &row, &keep, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "division by zero at column 3");
  sl_error_destroy(err);
  sl__expr_destroy(e);
  fx_close();
}

SL_TEST(filter_over_many_rows) {
  fx_open();
  sl_field_t f[2] = {{"k", ty(SL_TYPE_INT64, false)},
                     {"name", ty(SL_TYPE_STRING, true)}};
  sl_schema_t *s2;
  SL_ASSERT_OK(sl_schema_create(f, 2, &s2, NULL));
  sl_row_builder_t b2;
  SL_ASSERT_OK(sl_row_builder_init(&b2, s2));
  sl_expr_t *e = NULL;
  SL_ASSERT_OK(sl__expr_compile_filter(
      "k % 3 = 0 and (name is null or upper(name) <> 'SKIP')", s2, &e, NULL,
      NULL));
  int kept = 0;
  for (int k = 0; k < 300; k++) {
    sl_row_builder_reset(&b2, SL_ROW_INSERT);
    sl_row_builder_set_i64(&b2, 0, k);
    if (k % 2 == 0) {
      const char *nm = (k % 4 == 0) ? "skip" : "keep";
      SL_ASSERT_OK(sl_row_builder_set_str(&b2, 1, nm, 4));
    }
    sl_row_t r;
    SL_ASSERT_OK(sl_row_builder_finish(&b2, &r, NULL));
    bool keep;
    SL_ASSERT_OK(sl__expr_eval_bool(e, &r, &keep, NULL));
    bool want = k % 3 == 0 && (k % 2 == 1 || k % 4 != 0);
    SL_ASSERT_EQ_INT(keep, want);
    kept += keep;
  }
  SL_ASSERT_EQ_INT(kept, 75); /* multiples of 3 that are not of 4: 100-25 */
  sl__expr_destroy(e);
  sl_row_builder_close(&b2);
  sl_schema_unref(s2);
  fx_close();
}

/* ------------------------------------------------------------------------
 * Compile errors
 */

SL_TEST(compile_errors_types) {
  fx_open();
  expect_compile_error("i + amout", SL_ETYPE, 5,
                       "column 5: unknown field 'amout'");
  expect_compile_error("`no such`", SL_ETYPE, 1,
                       "column 1: unknown field 'no such'");
  expect_compile_error("I > 1", SL_ETYPE, 1, "column 1: unknown field 'I'");
  expect_compile_error("s + 1", SL_ETYPE, 3,
                       "column 3: operator '+' does not apply to string and "
                       "int64");
  expect_compile_error("s + s", SL_ETYPE, 3,
                       "column 3: operator '+' does not apply to string");
  expect_compile_error("-s", SL_ETYPE, 1,
                       "column 1: operator '-' does not apply to string");
  expect_compile_error("b + 1", SL_ETYPE, 3,
                       "column 3: operator '+' does not apply to bool and "
                       "int64");
  expect_compile_error("s = 1", SL_ETYPE, 3,
                       "column 3: cannot compare string with int64");
  expect_compile_error("d <= s", SL_ETYPE, 3,
                       "column 3: cannot compare decimal(10,2) with string");
  expect_compile_error("b < true", SL_ETYPE, 3,
                       "column 3: operator '<' does not apply to bool");
  expect_compile_error("f % 2", SL_ETYPE, 3,
                       "column 3: operator '%' does not apply to float64 "
                       "and int64");
  expect_compile_error("d % 2", SL_ETYPE, 3,
                       "column 3: operator '%' does not apply to "
                       "decimal(10,2) and int64");
  expect_compile_error("1 and true", SL_ETYPE, 3,
                       "column 3: operator 'and' does not apply to int64 "
                       "and bool");
  expect_compile_error("b or s", SL_ETYPE, 3,
                       "column 3: operator 'or' does not apply to bool and "
                       "string");
  expect_compile_error("not i", SL_ETYPE, 1,
                       "column 1: operator 'not' does not apply to int64");
  expect_compile_error("ts + ts", SL_ETYPE, 4,
                       "column 4: operator '+' does not apply to timestamp");
  expect_compile_error("1 - ts", SL_ETYPE, 3,
                       "column 3: operator '-' does not apply to int64 and "
                       "timestamp");
  expect_compile_error("ts * 2", SL_ETYPE, 4,
                       "column 4: operator '*' does not apply to timestamp "
                       "and int64");
  expect_compile_error("ts + 1.5", SL_ETYPE, 4,
                       "column 4: operator '+' does not apply to timestamp "
                       "and float64");
  expect_compile_error("ts = 1", SL_ETYPE, 4,
                       "column 4: cannot compare timestamp with int64");
  expect_compile_error("wide * wide", SL_ETYPE, 6,
                       "column 6: result of '*' needs decimal scale 20; the "
                       "limit is 18");
  expect_compile_error("foo(1)", SL_ETYPE, 1,
                       "column 1: unknown function 'foo'");
  expect_compile_error("abs(1, 2)", SL_ETYPE, 1,
                       "column 1: function 'abs' takes 1 argument, got 2");
  expect_compile_error("upper()", SL_ETYPE, 1,
                       "column 1: function 'upper' takes 1 argument, got 0");
  expect_compile_error("coalesce(n)", SL_ETYPE, 1,
                       "column 1: function 'coalesce' takes at least 2 "
                       "arguments, got 1");
  expect_compile_error("lower(i)", SL_ETYPE, 7,
                       "column 7: function 'lower' does not apply to int64");
  expect_compile_error("lower(bs)", SL_ETYPE, 7,
                       "column 7: function 'lower' does not apply to bytes");
  expect_compile_error("abs(s)", SL_ETYPE, 5,
                       "column 5: function 'abs' does not apply to string");
  expect_compile_error("length(1 + 2)", SL_ETYPE, 8,
                       "column 8: function 'length' does not apply to int64");
  expect_compile_error("coalesce(s, 1)", SL_ETYPE, 13,
                       "column 13: coalesce arguments have different types: "
                       "string and int64");
  expect_compile_error("coalesce(s, bs)", SL_ETYPE, 13,
                       "column 13: coalesce arguments have different types: "
                       "string and bytes");
  /* Columns count characters, not bytes. */
  expect_compile_error("'\xc3\xbc' = s and zz", SL_ETYPE, 13,
                       "column 13: unknown field 'zz'");
  fx_close();
}

SL_TEST(compile_errors_syntax) {
  fx_open();
  expect_compile_error("(i + 1", SL_EPARSE, 7, "column 7: expected ')'");
  expect_compile_error("abs(i + 1 + (j * 2)", SL_EPARSE, 20,
                       "column 20: expected ')'");
  expect_compile_error("abs(i j)", SL_EPARSE, 7, "column 7: expected ')'");
  expect_compile_error("", SL_EPARSE, 1,
                       "column 1: expected an expression, got end of input");
  expect_compile_error("   ", SL_EPARSE, 4,
                       "column 4: expected an expression, got end of input");
  expect_compile_error("i +", SL_EPARSE, 4,
                       "column 4: expected an expression, got end of input");
  expect_compile_error("i * )", SL_EPARSE, 5,
                       "column 5: expected an expression, got ')'");
  expect_compile_error("i )", SL_EPARSE, 3, "column 3: unexpected ')'");
  expect_compile_error("i j", SL_EPARSE, 3, "column 3: unexpected 'j'");
  expect_compile_error("`my field`(1)", SL_EPARSE, 11,
                       "column 11: unexpected '('");
  expect_compile_error("1 < 2 < 3", SL_EPARSE, 7,
                       "column 7: comparisons cannot be chained; use 'and'");
  expect_compile_error("i = j = 3", SL_EPARSE, 7,
                       "column 7: comparisons cannot be chained; use 'and'");
  expect_compile_error("i is 5", SL_EPARSE, 6,
                       "column 6: expected 'null' after 'is'");
  expect_compile_error("i is not true", SL_EPARSE, 10,
                       "column 10: expected 'null' after 'is not'");
  expect_compile_error("i # 2", SL_EPARSE, 3,
                       "column 3: unexpected character '#'");
  expect_compile_error("i ! 2", SL_EPARSE, 3,
                       "column 3: unexpected character '!'");
  expect_compile_error("s = 'abc", SL_EPARSE, 5,
                       "column 5: unterminated string");
  expect_compile_error("s = \"abc\\", SL_EPARSE, 5,
                       "column 5: unterminated string");
  expect_compile_error("'a\\qb'", SL_EPARSE, 3,
                       "column 3: unknown escape '\\q' in string");
  expect_compile_error("`my field", SL_EPARSE, 1,
                       "column 1: unterminated quoted field name");
  expect_compile_error("``", SL_EPARSE, 1, "column 1: empty field name");
  expect_compile_error("99999999999999999999", SL_EPARSE, 1,
                       "column 1: integer literal out of range");
  expect_compile_error("9223372036854775808", SL_EPARSE, 1,
                       "column 1: integer literal out of range");
  expect_compile_error("1 + 1.", SL_EPARSE, 7,
                       "column 7: expected a digit after '.'");
  expect_compile_error("2e", SL_EPARSE, 3,
                       "column 3: expected a digit in the exponent");
  expect_compile_error("12abc", SL_EPARSE, 1, "column 1: malformed number");
  expect_compile_error("1e999", SL_EPARSE, 1,
                       "column 1: number is out of range");
  /* The first error wins, and later text is not looked at. */
  expect_compile_error("amout + (", SL_ETYPE, 1,
                       "column 1: unknown field 'amout'");
  fx_close();
}

SL_TEST(compile_errors_filter) {
  fx_open();
  expect_compile_error_mode(true, "i + 1", SL_ETYPE, 1,
                            "column 1: a filter condition must be bool, got "
                            "int64");
  expect_compile_error_mode(true, "  (s)", SL_ETYPE, 3,
                            "column 3: a filter condition must be bool, got "
                            "string");
  expect_compile_error_mode(true, "d * 2", SL_ETYPE, 1,
                            "column 1: a filter condition must be bool, got "
                            "decimal(11,2)");
  /* Parse errors come first in filters too. */
  expect_compile_error_mode(true, "i >", SL_EPARSE, 4,
                            "column 4: expected an expression, got end of "
                            "input");
  fx_close();
}

SL_TEST(compile_errors_nesting) {
  fx_open();
  char buf[1024];
  /* Deep parentheses. */
  size_t k = 0;
  for (int d = 0; d < 100; d++) buf[k++] = '(';
  buf[k++] = '1';
  for (int d = 0; d < 100; d++) buf[k++] = ')';
  buf[k] = '\0';
  expect_compile_error(buf, SL_EPARSE, 65,
                       "column 65: expression is too deeply nested");
  /* A long chain builds a deep tree without deep parsing. */
  k = 0;
  buf[k++] = '1';
  for (int d = 0; d < 300; d++) {
    buf[k++] = '+';
    buf[k++] = '1';
  }
  buf[k] = '\0';
  expect_compile_error(buf, SL_EPARSE, 1,
                       "column 1: expression is too deeply nested");
  /* Moderate nesting is fine. */
  k = 0;
  for (int d = 0; d < 30; d++) buf[k++] = '(';
  buf[k++] = '1';
  for (int d = 0; d < 30; d++) buf[k++] = ')';
  buf[k] = '\0';
  SL_ASSERT_EQ_INT(eval_int(buf), 1);
  fx_close();
}

/* ------------------------------------------------------------------------
 * Cloning and allocation behaviour
 */

SL_TEST(clone) {
  fx_open();
  sl_expr_t *e = compile_ok("upper(s) = 'HELLO' and i + j = 13");
  sl_expr_t *c = NULL;
  SL_ASSERT_OK(sl__expr_clone(e, &c));
  SL_ASSERT_TRUE(c != e);
  SL_ASSERT_EQ_STR(sl__expr_text(c), sl__expr_text(e));
  sl__expr_destroy(e); /* the clone is independent */
  bool keep = false;
  SL_ASSERT_OK(sl__expr_eval_bool(c, &row, &keep, NULL));
  SL_ASSERT_TRUE(keep);
  sl__expr_destroy(c);
  sl__expr_destroy(NULL);
  fx_close();
}

static size_t n_allocs;
static void *count_malloc(size_t size) {
  n_allocs++;
  return malloc(size);
}
static void *count_calloc(size_t n, size_t size) {
  n_allocs++;
  return calloc(n, size);
}
static void *count_realloc(void *p, size_t size) {
  n_allocs++;
  return realloc(p, size);
}

SL_TEST(eval_does_not_allocate) {
  static const sl_allocator_t counting = {count_malloc, count_calloc,
                                          count_realloc, free};
  sl_set_allocator(&counting);
  fx_open();
  sl_expr_t *e = compile_ok(
      "(i * 2 + j > 5 and d * 2 > e and lower(s) = 'nope') or "
      "coalesce(t, upper(u)) = 'X' or ts2 - ts < 0 or f / 2 > 1.0");
  sl_value_t v;
  SL_ASSERT_OK(sl__expr_eval(e, &row, &v, NULL)); /* sizes the buffers */
  SL_ASSERT_TRUE(v.u.b);
  size_t before = n_allocs;
  for (int k = 0; k < 1000; k++) {
    SL_ASSERT_OK(sl__expr_eval(e, &row, &v, NULL));
    SL_ASSERT_TRUE(!v.is_null && v.u.b);
  }
  SL_ASSERT_EQ_INT(n_allocs, before);
  sl__expr_destroy(e);
  fx_close();
}

SL_TEST(compile_does_not_leak_on_errors) {
  fx_open();
  /* Errors at every stage, with operands already built; LeakSanitizer
   * checks that the partial trees are freed. */
  static const char *bad[] = {
      "abs(i) + coalesce(n, 1) + lower(s)", "coalesce(i, j, s)",
      "(i + 1) * (j - 2) = s",              "lower(s) = upper(s) and 1",
      "abs(1, 2, 3)",                       "coalesce(1, 2, 'x', 3)",
      "i + (j * (d - (e + ",                "not not not 5",
      "upper(lower(s)) +",                  "1 + 'a' + 2",
  };
  for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
    sl_expr_t *e = NULL;
    sl_error_t *err = NULL;
    int rc = sl__expr_compile(bad[k], schema, &e, NULL, &err);
    SL_ASSERT_TRUE(rc == SL_ETYPE || rc == SL_EPARSE);
    SL_ASSERT_TRUE(e == NULL);
    SL_ASSERT_TRUE(strncmp(sl_error_message(err), "column ", 7) == 0);
    sl_error_destroy(err);
  }
  fx_close();
}
