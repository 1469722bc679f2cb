/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the expression compiler (src/ops/expr*.c).  The input is
 * expression text, compiled against a schema with every type
 * (fuzz_schema.h) as a value and as a filter.  What compiles is evaluated
 * on rows with nulls, zeros and extreme values, and so is its clone;
 * runtime errors (overflow, division by zero) are fine, crashes and wrong
 * result types are not.
 */
#include "fuzz_schema.h"
#include "ops/expr.h"

#define N_ROWS 3

static sl_row_builder_t builders[N_ROWS];
static sl_row_t rows[N_ROWS];

static void setup_rows(const sl_schema_t *s) {
  static bool done;
  if (done) return;
  done = true;
  for (int r = 0; r < N_ROWS; r++) {
    sl_row_builder_t *b = &builders[r];
    SL_FUZZ_CHECK(sl_row_builder_init(b, s) == SL_OK);
    sl_row_builder_reset(b, SL_ROW_INSERT);
    sl_row_builder_set_bool(b, 0, r & 1);
    sl_row_builder_set_i64(b, 2, r == 0 ? 0 : r == 1 ? INT64_MIN : INT64_MAX);
    sl_row_builder_set_i64(b, 4, r == 0 ? 0 : r == 1 ? -99999999 : 99999999);
    SL_FUZZ_CHECK(sl_row_builder_set_str(b, 6, "\x00\xff", r ? 2 : 0) ==
                  SL_OK);
    if (r > 0) { /* row 0 keeps its nullable fields null */
      sl_row_builder_set_i32(b, 1, r == 1 ? INT32_MIN : INT32_MAX);
      sl_row_builder_set_f64(b, 3, r == 1 ? -0.0 : 1e308);
      SL_FUZZ_CHECK(sl_row_builder_set_str(b, 5, "Zürich ", 8) == SL_OK);
      sl_row_builder_set_i64(b, 7, r == 1 ? INT64_MIN : INT64_MAX);
    }
    SL_FUZZ_CHECK(sl_row_builder_finish(b, &rows[r], NULL) == SL_OK);
  }
}

static void run(const sl_expr_t *e, bool is_filter) {
  sl_type_t t = sl__expr_type(e);
  for (int r = 0; r < N_ROWS; r++) {
    sl_error_t *err = NULL;
    if (is_filter) {
      bool keep;
      (void)sl__expr_eval_bool(e, &rows[r], &keep, &err);
    } else {
      sl_value_t v;
      if (sl__expr_eval(e, &rows[r], &v, &err) == SL_OK) {
        SL_FUZZ_CHECK(v.type == t.id);
        SL_FUZZ_CHECK(!v.is_null || t.nullable);
      }
    }
    sl_error_destroy(err);
  }
  uint32_t field;
  if (sl__expr_is_field(e, &field))
    SL_FUZZ_CHECK(field < sl_schema_n_fields(sl_fuzz_schema()));
}

static void try_compile(const char *text, bool is_filter) {
  const sl_schema_t *s = sl_fuzz_schema();
  sl_expr_t *e = NULL, *c = NULL;
  uint32_t col = 0;
  sl_error_t *err = NULL;
  int rc = is_filter ? sl__expr_compile_filter(text, s, &e, &col, &err)
                     : sl__expr_compile(text, s, &e, &col, &err);
  if (rc != SL_OK) {
    SL_FUZZ_CHECK(rc == SL_EPARSE || rc == SL_ETYPE || rc == SL_EINVAL ||
                  rc == SL_ENOMEM);
    SL_FUZZ_CHECK(err != NULL);
    sl_error_destroy(err);
    return;
  }
  SL_FUZZ_CHECK(strcmp(sl__expr_text(e), text) == 0);
  run(e, is_filter);
  if (sl__expr_clone(e, &c) == SL_OK) {
    run(c, is_filter);
    sl__expr_destroy(c);
  }
  sl__expr_destroy(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_fuzz_setup();
  /* Longer texts only slow the fuzzer (the compiler limits nesting). */
  if (size > 65536) return 0;
  setup_rows(sl_fuzz_schema());
  char *text = malloc(size + 1);
  SL_FUZZ_CHECK(text != NULL);
  memcpy(text, data, size);
  text[size] = '\0';
  try_compile(text, false);
  try_compile(text, true);
  free(text);
  return 0;
}
