/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON lines to and from rows.  Parsing uses jansson, then maps each
 * member to the field of the same name, looking fields up by name so that
 * the work is linear in the number of fields.  Formatting writes the text
 * directly, in schema order, with our own string escaping: it is faster
 * than building a jansson tree, and it lets decimals be written exactly
 * from their unscaled value.  jansson allocates with malloc, not
 * sl_malloc; every tree is released with json_decref before returning.
 * The format is specified in docs/formats.md.  See README.md.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <jansson.h>

#include "core.h"
#include "sluice/sl_format.h"

/*
 * A decimal written as a JSON number reaches us as a double.  Doubles
 * carry any 15 significant decimal digits exactly, so decimals of up to 15
 * digits are written as numbers and read back exactly; wider ones with a
 * fraction are written as strings (see docs/formats.md).
 */
#define EXACT_DOUBLE_DIGITS 15

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

static const char *json_kind_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "object";
  case JSON_ARRAY:
    return "array";
  case JSON_STRING:
    return "string";
  case JSON_INTEGER:
  case JSON_REAL:
    return "number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "boolean";
  case JSON_NULL:
    return "null";
  }
  return "unknown";
}

__attribute__((format(printf, 3, 4))) static int
member_error(sl_error_t **out_err, const char *name, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return sl_error_set(out_err, SL_EPARSE, "member '%s': %s", name, msg);
}

static int type_error(sl_error_t **out_err, const sl_field_t *f,
                      const json_t *v) {
  char what[32];
  sl_type_format(f->type, what, sizeof(what));
  return member_error(out_err, f->name, "expected %s, got %s", what,
                      json_kind_name(v));
}

/* Parse a JSON string member with the text rules of format_value.c. */
static int parse_text(const char *text, size_t len, const sl_field_t *f,
                      sl_row_builder_t *b, uint32_t i, sl_error_t **out_err) {
  sl_error_t *err = NULL;
  int rc = sl_value_parse(text, len, f->type, b, i, &err);
  if (rc == SL_OK) return SL_OK;
  sl_error_prefix(err, "member '%s'", f->name);
  if (out_err && *out_err == NULL) {
    *out_err = err;
  } else {
    sl_error_destroy(err);
  }
  return rc;
}

/*
 * An integer member: a JSON integer, or a real with no fraction (1e3).
 * The range checks compare doubles against 2^63 exactly.
 */
static int get_integral(const json_t *v, const sl_field_t *f, int64_t lo,
                        int64_t hi, int64_t *out, sl_error_t **out_err) {
  char what[32], num[32];
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
      return member_error(out_err, f->name, "%lld is out of range for %s",
                          (long long)x,
                          sl_type_format(f->type, what, sizeof(what)));
    *out = (int64_t)x;
    return SL_OK;
  }
  double d = json_real_value(v);
  bool is_integral = d == floor(d);
  if (is_integral && d >= (double)lo && d < -(double)INT64_MIN &&
      (int64_t)d >= lo && (int64_t)d <= hi) {
    *out = (int64_t)d;
    return SL_OK;
  }
  sl__format_f64(d, num, sizeof(num));
  sl_type_format(f->type, what, sizeof(what));
  if (!is_integral)
    return member_error(out_err, f->name,
                        "expected %s, got non-integral number %s", what, num);
  return member_error(out_err, f->name, "%s is out of range for %s", num,
                      what);
}

static int parse_decimal_member(const json_t *v, const sl_field_t *f,
                                sl_row_builder_t *b, uint32_t i,
                                sl_error_t **out_err) {
  char what[32], num[32];
  if (json_is_integer(v)) {
    /* Exact: scale up and check the precision. */
    int64_t x = (int64_t)json_integer_value(v), lim = 1;
    bool is_over = false;
    for (unsigned k = 0; k < f->type.scale; k++)
      is_over |= __builtin_mul_overflow(x, (int64_t)10, &x);
    for (unsigned k = 0; k < f->type.precision; k++) lim *= 10;
    if (is_over || x >= lim || x <= -lim)
      return member_error(out_err, f->name, "%lld is out of range for %s",
                          (long long)json_integer_value(v),
                          sl_type_format(f->type, what, sizeof(what)));
    sl_row_builder_set_i64(b, i, x);
    return SL_OK;
  }
  /*
   * A real: its shortest decimal form is the number as written when that
   * had at most 15 significant digits.  A longer one may already have been
   * rounded by the conversion to double, so refuse it rather than guess.
   */
  double d = json_real_value(v);
  int digits = sl__format_f64(d, num, sizeof(num));
  if (digits > EXACT_DOUBLE_DIGITS)
    return member_error(out_err, f->name,
                        "number %s has too many digits to be read exactly "
                        "as %s; write it as a string",
                        num, sl_type_format(f->type, what, sizeof(what)));
  return parse_text(num, strlen(num), f, b, i, out_err);
}

static int parse_member(const json_t *v, const sl_field_t *f,
                        sl_row_builder_t *b, uint32_t i,
                        sl_error_t **out_err) {
  int64_t x = 0;
  int rc;
  switch (f->type.id) {
  case SL_TYPE_BOOL:
    if (!json_is_boolean(v)) return type_error(out_err, f, v);
    sl_row_builder_set_bool(b, i, json_is_true(v));
    return SL_OK;
  case SL_TYPE_INT32:
  case SL_TYPE_INT64:
    if (!json_is_number(v)) return type_error(out_err, f, v);
    rc = f->type.id == SL_TYPE_INT32
             ? get_integral(v, f, INT32_MIN, INT32_MAX, &x, out_err)
             : get_integral(v, f, INT64_MIN, INT64_MAX, &x, out_err);
    if (rc != SL_OK) return rc;
    sl_row_builder_set_i64(b, i, x);
    return SL_OK;
  case SL_TYPE_TIMESTAMP:
    if (json_is_string(v))
      return parse_text(json_string_value(v), json_string_length(v), f, b, i,
                        out_err);
    if (!json_is_number(v)) return type_error(out_err, f, v);
    rc = get_integral(v, f, INT64_MIN, INT64_MAX, &x, out_err);
    if (rc != SL_OK) return rc;
    sl_row_builder_set_i64(b, i, x);
    return SL_OK;
  case SL_TYPE_FLOAT64:
    if (json_is_string(v)) /* "NaN", "Infinity", "-Infinity", "1.5" */
      return parse_text(json_string_value(v), json_string_length(v), f, b, i,
                        out_err);
    if (!json_is_number(v)) return type_error(out_err, f, v);
    sl_row_builder_set_f64(b, i, json_number_value(v));
    return SL_OK;
  case SL_TYPE_DECIMAL:
    if (json_is_string(v))
      return parse_text(json_string_value(v), json_string_length(v), f, b, i,
                        out_err);
    if (!json_is_number(v)) return type_error(out_err, f, v);
    return parse_decimal_member(v, f, b, i, out_err);
  case SL_TYPE_STRING:
  case SL_TYPE_BYTES:
    if (!json_is_string(v)) return type_error(out_err, f, v);
    return parse_text(json_string_value(v), json_string_length(v), f, b, i,
                      out_err);
  }
  return sl_error_set(out_err, SL_EINVAL, "unknown type id %u", f->type.id);
}

static int parse_op(const json_t *v, sl_row_builder_t *b,
                    sl_error_t **out_err) {
  char echo[SL_ECHO_SIZE], text[3];
  sl_row_kind_t kind;
  if (v == NULL || json_is_null(v))
    return sl_error_set(out_err, SL_EPARSE, "member 'op' is missing or null");
  if (!json_is_string(v))
    return member_error(out_err, "op",
                        "expected a row kind (+I, -U, +U, -D), got %s",
                        json_kind_name(v));
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (n == 2) {
    memcpy(text, s, 2);
    text[2] = '\0';
    if (sl_row_kind_parse(text, &kind) == SL_OK) {
      sl_row_builder_set_kind(b, kind);
      return SL_OK;
    }
  }
  sl__format_echo(s, n, echo, sizeof(echo));
  return member_error(out_err, "op",
                      "expected a row kind (+I, -U, +U, -D), got '%s'", echo);
}

/* The first member that names no field; called only when one exists. */
static int unknown_member_error(const json_t *obj, const sl_schema_t *schema,
                                bool changelog, sl_error_t **out_err) {
  const char *key;
  size_t key_len;
  json_t *v;
  json_object_keylen_foreach((json_t *)obj, key, key_len, v) {
    bool is_known = strlen(key) == key_len &&
                    ((changelog && strcmp(key, "op") == 0) ||
                     sl_schema_index(schema, key) >= 0);
    if (!is_known) {
      char echo[SL_ECHO_SIZE];
      sl__format_echo(key, key_len, echo, sizeof(echo));
      return sl_error_set(out_err, SL_EPARSE, "unknown member '%s'", echo);
    }
  }
  return sl_error_set(out_err, SL_EPARSE, "unknown member");
}

int sl_json_parse(const char *line, size_t len, bool changelog,
                  sl_row_builder_t *b, sl_error_t **out_err) {
  const sl_schema_t *schema = b->schema;
  uint32_t n_fields = sl_schema_n_fields(schema);
  json_error_t jerr;
  int rc = SL_OK;

  sl_row_builder_reset(b, SL_ROW_INSERT);
  if (changelog && sl_schema_index(schema, "op") >= 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "field 'op' clashes with the changelog member 'op'");
  json_t *root = json_loadb(
      line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
      &jerr);
  if (root == NULL) {
    if (json_error_code(&jerr) == json_error_out_of_memory)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    return sl_error_set(out_err, SL_EPARSE, "invalid JSON at column %d: %s",
                        jerr.column, jerr.text);
  }
  if (!json_is_object(root)) {
    rc = sl_error_set(out_err, SL_EPARSE, "expected a JSON object, got %s",
                      json_kind_name(root));
    goto done;
  }

  /* Unknown members first: a misspelt name explains a missing field. */
  size_t n_known = 0;
  if (changelog && json_object_get(root, "op") != NULL) n_known++;
  for (uint32_t i = 0; i < n_fields; i++)
    if (json_object_get(root, sl_schema_field(schema, i)->name) != NULL)
      n_known++;
  if (n_known != json_object_size(root)) {
    rc = unknown_member_error(root, schema, changelog, out_err);
    goto done;
  }

  if (changelog) {
    rc = parse_op(json_object_get(root, "op"), b, out_err);
    if (rc != SL_OK) goto done;
  }
  for (uint32_t i = 0; i < n_fields; i++) {
    const sl_field_t *f = sl_schema_field(schema, i);
    json_t *v = json_object_get(root, f->name);
    if (v == NULL || json_is_null(v)) {
      if (f->type.nullable) continue; /* reset left it null */
      rc = sl_error_set(out_err, SL_EPARSE,
                        "member '%s' is missing or null but the field is "
                        "not nullable",
                        f->name);
      goto done;
    }
    rc = parse_member(v, f, b, i, out_err);
    if (rc != SL_OK) goto done;
  }
done:
  json_decref(root);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Formatting                                                          */

/*
 * Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0.
 */
static size_t utf8_len(const uint8_t *p, size_t n) {
  uint8_t c = p[0];
  if (c < 0xc2) return 0;
  if (c < 0xe0) return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
  if (c < 0xf0) {
    if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && p[1] < 0xa0) return 0;  /* overlong */
    if (c == 0xed && p[1] >= 0xa0) return 0; /* surrogate */
    return 3;
  }
  if (c < 0xf5) {
    if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
        (p[3] & 0xc0) != 0x80)
      return 0;
    if (c == 0xf0 && p[1] < 0x90) return 0;  /* overlong */
    if (c == 0xf4 && p[1] >= 0x90) return 0; /* above U+10FFFF */
    return 4;
  }
  return 0;
}

/*
 * A JSON string: quote, backslash and control characters escaped, UTF-8
 * kept as it is.  JSON cannot carry bytes that are not UTF-8, so each byte
 * of a malformed sequence becomes U+FFFD (docs/formats.md).
 */
static int json_append_string(sl_bytes_t *out, const uint8_t *p, size_t n) {
  static const char hex[] = "0123456789abcdef";
  int rc = sl_bytes_reserve(out, n + 2);
  if (rc != SL_OK) return rc;
  out->data[out->len++] = '"';
  size_t start = 0, i = 0;
  while (i < n) {
    uint8_t c = p[i];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      i++;
      continue;
    }
    if (c >= 0x80) {
      size_t k = utf8_len(p + i, n - i);
      if (k > 0) {
        i += k;
        continue;
      }
    }
    rc = sl_bytes_append(out, p + start, i - start);
    if (rc != SL_OK) return rc;
    char esc[8];
    size_t n_esc = 2;
    esc[0] = '\\';
    switch (c) {
    case '"':
      esc[1] = '"';
      break;
    case '\\':
      esc[1] = '\\';
      break;
    case '\b':
      esc[1] = 'b';
      break;
    case '\f':
      esc[1] = 'f';
      break;
    case '\n':
      esc[1] = 'n';
      break;
    case '\r':
      esc[1] = 'r';
      break;
    case '\t':
      esc[1] = 't';
      break;
    default:
      if (c < 0x20) {
        memcpy(esc + 1, "u00", 3);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        n_esc = 6;
      } else {
        memcpy(esc, "\xef\xbf\xbd", 3); /* U+FFFD */
        n_esc = 3;
      }
      break;
    }
    rc = sl_bytes_append(out, esc, n_esc);
    if (rc != SL_OK) return rc;
    start = ++i;
  }
  rc = sl_bytes_append(out, p + start, n - start);
  if (rc == SL_OK) rc = sl_bytes_append(out, "\"", 1);
  return rc;
}

static int format_quoted_value(const sl_row_t *row, uint32_t i,
                               sl_bytes_t *out) {
  int rc = sl_bytes_append(out, "\"", 1);
  if (rc == SL_OK) rc = sl_value_format(row, i, out);
  if (rc == SL_OK) rc = sl_bytes_append(out, "\"", 1);
  return rc;
}

static int format_member_value(const sl_row_t *row, uint32_t i,
                               sl_bytes_t *out) {
  const sl_field_t *f = sl_schema_field(row->schema, i);
  if (sl_row_is_null(row, i)) return sl_bytes_append(out, "null", 4);
  switch (f->type.id) {
  case SL_TYPE_BOOL:
  case SL_TYPE_INT32:
  case SL_TYPE_INT64:
    return sl_value_format(row, i, out);
  case SL_TYPE_DECIMAL:
    if (f->type.scale > 0 && f->type.precision > EXACT_DOUBLE_DIGITS)
      return format_quoted_value(row, i, out);
    return sl_value_format(row, i, out);
  case SL_TYPE_FLOAT64: {
    /* Reals keep a point or an exponent, so -0.0 stays -0.0 and readers
     * see a real; JSON has no NaN or infinity, so those are strings. */
    char num[40];
    if (sl__format_f64(sl_row_get_f64(row, i), num, 32) == 0) {
      int rc = sl_bytes_append(out, "\"", 1);
      if (rc == SL_OK) rc = sl_bytes_append_str(out, num);
      if (rc == SL_OK) rc = sl_bytes_append(out, "\"", 1);
      return rc;
    }
    size_t n = strlen(num);
    if (strpbrk(num, ".eE") == NULL) {
      memcpy(num + n, ".0", 2);
      n += 2;
    }
    return sl_bytes_append(out, num, n);
  }
  case SL_TYPE_STRING: {
    sl_slice_t s = sl_row_get_str(row, i);
    return json_append_string(out, s.ptr, s.len);
  }
  case SL_TYPE_BYTES:     /* base64: nothing to escape */
  case SL_TYPE_TIMESTAMP: /* ISO-8601: nothing to escape */
    return format_quoted_value(row, i, out);
  }
  return SL_EINVAL;
}

int sl_json_format(const sl_row_t *row, bool changelog, sl_bytes_t *out) {
  const sl_schema_t *schema = row->schema;
  uint32_t n_fields = sl_schema_n_fields(schema);
  size_t start = out->len;
  int rc;
  if (changelog && sl_schema_index(schema, "op") >= 0) return SL_EINVAL;
  rc = sl_bytes_append(out, "{", 1);
  if (rc != SL_OK) goto fail;
  if (changelog) {
    rc = sl_bytes_printf(out, "\"op\":\"%s\"",
                         sl_row_kind_name(sl_row_kind(row)));
    if (rc != SL_OK) goto fail;
  }
  for (uint32_t i = 0; i < n_fields; i++) {
    const char *name = sl_schema_field(schema, i)->name;
    if (i > 0 || changelog) {
      rc = sl_bytes_append(out, ",", 1);
      if (rc != SL_OK) goto fail;
    }
    rc = json_append_string(out, (const uint8_t *)name, strlen(name));
    if (rc == SL_OK) rc = sl_bytes_append(out, ":", 1);
    if (rc == SL_OK) rc = format_member_value(row, i, out);
    if (rc != SL_OK) goto fail;
  }
  rc = sl_bytes_append(out, "}\n", 2);
  if (rc != SL_OK) goto fail;
  return SL_OK;
fail:
  out->len = start; /* no partial record */
  return rc;
}
