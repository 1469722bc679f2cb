/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CSV records (RFC 4180 quoting) to and from rows.  A record is one line
 * without its line end, unless a quoted field holds line ends
 * (sl_csv_record_end finds where it ends); each column holds the text form
 * of one field
 * (format_value.c), with an optional leading row-kind column for
 * changelogs.  Parsing makes two passes over the line: the first counts
 * the columns and checks the quoting, so that a wrong column count is
 * reported before any value error; the second converts the values.  The
 * format is specified in docs/formats.md.  See README.md.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core.h"
#include "sluice/sl_format.h"

typedef struct csv_field_s {
  const char *p; /* the text between the quotes, escapes still doubled */
  size_t len;
  bool is_quoted;
  bool has_escapes; /* contains "" */
} csv_field_t;

/*
 * Read the field that starts at *pos.  On success *pos is at the delimiter
 * that ends the field, or at len.  Returns NULL, or what is wrong.
 */
static const char *csv_next(const char *line, size_t len, char delim,
                            size_t *pos, csv_field_t *f) {
  size_t i = *pos;
  f->is_quoted = false;
  f->has_escapes = false;
  if (i < len && line[i] == '"') {
    size_t start = ++i;
    for (;;) {
      const char *q = i < len ? memchr(line + i, '"', len - i) : NULL;
      if (q == NULL) return "unterminated quoted field";
      size_t k = (size_t)(q - line);
      if (k + 1 < len && line[k + 1] == '"') {
        f->has_escapes = true;
        i = k + 2;
        continue;
      }
      f->p = line + start;
      f->len = k - start;
      f->is_quoted = true;
      i = k + 1;
      break;
    }
    if (i < len && line[i] != delim) return "text after the closing quote";
  } else {
    const char *d = i < len ? memchr(line + i, delim, len - i) : NULL;
    size_t end = d ? (size_t)(d - line) : len;
    f->p = line + i;
    f->len = end - i;
    i = end;
  }
  *pos = i;
  return NULL;
}

/* Name of 1-based column col: a field name, "op", or NULL past the end. */
static const char *column_name(const sl_schema_t *schema, bool changelog,
                               uint32_t col) {
  if (changelog && col == 1) return "op";
  uint32_t fi = col - 1 - (changelog ? 1u : 0u);
  if (fi >= sl_schema_n_fields(schema)) return NULL;
  return sl_schema_field(schema, fi)->name;
}

__attribute__((format(printf, 5, 6))) static int
column_error(sl_error_t **out_err, const sl_schema_t *schema, bool changelog,
             uint32_t col, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char *name = column_name(schema, changelog, col);
  if (name == NULL)
    return sl_error_set(out_err, SL_EPARSE, "column %u: %s", col, msg);
  return sl_error_set(out_err, SL_EPARSE, "column %u (%s): %s", col, name,
                      msg);
}

/* Hand err (possibly NULL) to the caller, or drop it if they have one. */
static int pass_error(sl_error_t **out_err, sl_error_t *err, int rc) {
  if (out_err && *out_err == NULL) {
    *out_err = err;
  } else {
    sl_error_destroy(err);
  }
  return rc;
}

static int parse_kind(const char *p, size_t len, sl_row_kind_t *out_kind) {
  char text[3];
  if (len != 2) return SL_EPARSE;
  memcpy(text, p, 2);
  text[2] = '\0';
  return sl_row_kind_parse(text, out_kind);
}

int sl_csv_parse(const char *line, size_t len, char delim, bool changelog,
                 sl_row_builder_t *b, sl_error_t **out_err) {
  const sl_schema_t *schema = b->schema;
  uint32_t n_fields = sl_schema_n_fields(schema);
  uint32_t n_expected = n_fields + (changelog ? 1u : 0u);
  sl_bytes_t scratch;
  csv_field_t f;
  size_t pos;
  uint32_t col;
  int rc = SL_OK;

  sl_row_builder_reset(b, SL_ROW_INSERT);
  if (delim == '"' || delim == '\r' || delim == '\n')
    return sl_error_set(out_err, SL_EINVAL, "invalid CSV delimiter");
  if (len > 0 && line[len - 1] == '\r') len--;

  /* Pass 1: count the columns and check the quoting. */
  for (pos = 0, col = 1;; col++) {
    const char *why = csv_next(line, len, delim, &pos, &f);
    if (why) return column_error(out_err, schema, changelog, col, "%s", why);
    if (pos == len) break;
    pos++;
  }
  if (col != n_expected)
    return sl_error_set(out_err, SL_EPARSE, "expected %u columns, got %u",
                        n_expected, col);

  /* Pass 2: convert.  Columns are known to be well formed now. */
  sl_bytes_init(&scratch);
  for (pos = 0, col = 1; col <= n_expected; col++, pos++) {
    csv_next(line, len, delim, &pos, &f);
    const char *text = f.p;
    size_t n = f.len;
    if (f.has_escapes) {
      sl_bytes_clear(&scratch);
      rc = sl_bytes_reserve(&scratch, n);
      if (rc != SL_OK) {
        rc = sl_error_set(out_err, rc, "out of memory");
        goto done;
      }
      for (size_t k = 0; k < n; k++) {
        scratch.data[scratch.len++] = (uint8_t)f.p[k];
        if (f.p[k] == '"') k++; /* the second quote of "" */
      }
      text = (const char *)scratch.data;
      n = scratch.len;
    }
    if (changelog && col == 1) {
      sl_row_kind_t kind;
      if (parse_kind(text, n, &kind) != SL_OK) {
        char echo[SL_ECHO_SIZE];
        sl__format_echo(text, n, echo, sizeof(echo));
        rc = column_error(out_err, schema, changelog, col,
                          "expected a row kind (+I, -U, +U, -D), got '%s'",
                          echo);
        goto done;
      }
      sl_row_builder_set_kind(b, kind);
      continue;
    }
    uint32_t fi = col - 1 - (changelog ? 1u : 0u);
    const sl_field_t *field = sl_schema_field(schema, fi);
    if (!f.is_quoted && n == 0) {
      if (field->type.nullable) continue; /* reset left it null */
      rc = column_error(out_err, schema, changelog, col,
                        "null in a non-nullable field");
      goto done;
    }
    sl_error_t *err = NULL;
    rc = sl_value_parse(text, n, field->type, b, fi, &err);
    if (rc != SL_OK) {
      sl_error_prefix(err, "column %u (%s)", col, field->name);
      pass_error(out_err, err, rc);
      goto done;
    }
  }
done:
  sl_bytes_close(&scratch);
  return rc;
}

int sl_csv_record_end(const char *text, size_t len, char delim, bool is_eof,
                      size_t *out_len, size_t *out_consumed,
                      uint32_t *out_n_breaks) {
  /* Fast path: a line without quotes is a record. */
  const char *nl = memchr(text, '\n', len);
  size_t upto = nl ? (size_t)(nl - text) : len;
  if (memchr(text, '"', upto) == NULL) {
    if (nl == NULL && !is_eof) return SL_EAGAIN;
    *out_len = upto;
    *out_consumed = nl ? upto + 1 : len;
    *out_n_breaks = 0;
    return SL_OK;
  }
  /* A field is quoted when it starts with a quote (at the start of the
   * record or after a delimiter); it ends at a lone quote.  Line ends
   * elsewhere end the record. */
  uint32_t n_breaks = 0;
  bool is_field_start = true;
  size_t i = 0;
  while (i < len) {
    char c = text[i];
    if (is_field_start && c == '"') {
      for (i++;;) {
        const char *q = i < len ? memchr(text + i, '"', len - i) : NULL;
        size_t end = q ? (size_t)(q - text) : len;
        for (const char *b = text + i;
             (b = memchr(b, '\n', (size_t)(text + end - b))) != NULL; b++)
          n_breaks++;
        if (q == NULL) {
          if (!is_eof) return SL_EAGAIN;
          /* Unterminated: the rest is the record; parsing says why. */
          *out_len = *out_consumed = len;
          *out_n_breaks = n_breaks;
          return SL_OK;
        }
        if (end + 1 == len && !is_eof) return SL_EAGAIN; /* "" or "? */
        if (end + 1 < len && text[end + 1] == '"') {
          i = end + 2;
          continue;
        }
        i = end + 1;
        break;
      }
      is_field_start = false;
      continue;
    }
    if (c == '\n') {
      *out_len = i;
      *out_consumed = i + 1;
      *out_n_breaks = n_breaks;
      return SL_OK;
    }
    is_field_start = c == delim;
    i++;
  }
  if (!is_eof) return SL_EAGAIN;
  *out_len = *out_consumed = len;
  *out_n_breaks = n_breaks;
  return SL_OK;
}

int sl_csv_check_header(const char *line, size_t len, char delim,
                        const sl_schema_t *schema, sl_error_t **out_err) {
  uint32_t n_fields = sl_schema_n_fields(schema);
  char echo[SL_ECHO_SIZE];
  csv_field_t f;
  size_t pos = 0;
  uint32_t col = 1;
  if (delim == '"' || delim == '\r' || delim == '\n')
    return sl_error_set(out_err, SL_EINVAL, "invalid CSV delimiter");
  if (len > 0 && line[len - 1] == '\r') len--;
  for (;; col++) {
    const char *why = csv_next(line, len, delim, &pos, &f);
    if (why)
      return sl_error_set(out_err, SL_EPARSE, "header column %u: %s", col,
                          why);
    if (col <= n_fields) {
      /* Compare the text with "" read as one quote. */
      const char *name = sl_schema_field(schema, col - 1)->name;
      size_t k = 0, m = 0, n_name = strlen(name);
      for (; k < f.len && m < n_name; k++, m++) {
        if (f.p[k] != name[m]) break;
        if (f.is_quoted && f.p[k] == '"') k++;
      }
      if (k != f.len || m != n_name) {
        sl__format_echo(f.p, f.len, echo, sizeof(echo));
        return sl_error_set(out_err, SL_EPARSE, "header column %u is '%s' "
                            "but field %u of the schema is '%s'", col, echo,
                            col, name);
      }
    }
    if (pos == len) break;
    pos++;
  }
  if (col != n_fields)
    return sl_error_set(out_err, SL_EPARSE, "the header has %u columns but "
                        "the schema has %u fields", col, n_fields);
  return SL_OK;
}

static bool csv_needs_quotes(const uint8_t *p, size_t n, char delim) {
  if (n == 0) return true; /* a value, not null: "" */
  if (p[0] == ' ' || p[0] == '\t' || p[n - 1] == ' ' || p[n - 1] == '\t')
    return true;
  for (size_t k = 0; k < n; k++)
    if (p[k] == (uint8_t)delim || p[k] == '"' || p[k] == '\r' || p[k] == '\n')
      return true;
  return false;
}

/* Quote out->data[mark..len) in place when it needs it, doubling quotes. */
static int csv_quote_tail(sl_bytes_t *out, size_t mark, char delim) {
  size_t n = out->len - mark;
  if (!csv_needs_quotes(out->data + mark, n, delim)) return SL_OK;
  size_t n_quotes = 0;
  for (size_t k = 0; k < n; k++) n_quotes += out->data[mark + k] == '"';
  int rc = sl_bytes_reserve(out, n_quotes + 2);
  if (rc != SL_OK) return rc;
  uint8_t *p = out->data + mark;
  size_t src = n, dst = n + n_quotes + 2;
  p[--dst] = '"';
  while (src > 0) {
    uint8_t c = p[--src];
    p[--dst] = c;
    if (c == '"') p[--dst] = '"';
  }
  p[--dst] = '"';
  SL_ASSERT(dst == 0);
  out->len += n_quotes + 2;
  return SL_OK;
}

int sl_csv_format(const sl_row_t *row, char delim, bool changelog,
                  sl_bytes_t *out) {
  size_t start = out->len;
  uint32_t n_fields = sl_schema_n_fields(row->schema);
  int rc = SL_OK;
  if (delim == '"' || delim == '\r' || delim == '\n') return SL_EINVAL;
  if (changelog) {
    rc = sl_bytes_append(out, sl_row_kind_name(sl_row_kind(row)), 2);
    if (rc != SL_OK) goto fail;
  }
  for (uint32_t i = 0; i < n_fields; i++) {
    if (i > 0 || changelog) {
      rc = sl_bytes_append(out, &delim, 1);
      if (rc != SL_OK) goto fail;
    }
    if (sl_row_is_null(row, i)) continue; /* null is nothing */
    size_t mark = out->len;
    rc = sl_value_format(row, i, out);
    if (rc == SL_OK) rc = csv_quote_tail(out, mark, delim);
    if (rc != SL_OK) goto fail;
  }
  rc = sl_bytes_append(out, "\n", 1);
  if (rc != SL_OK) goto fail;
  return SL_OK;
fail:
  out->len = start; /* no partial record */
  return rc;
}

int sl_csv_format_header(const sl_schema_t *schema, char delim,
                         bool changelog, sl_bytes_t *out) {
  size_t start = out->len;
  uint32_t n_fields = sl_schema_n_fields(schema);
  int rc = SL_OK;
  if (delim == '"' || delim == '\r' || delim == '\n') return SL_EINVAL;
  if (changelog) {
    rc = sl_bytes_append(out, "op", 2);
    if (rc != SL_OK) goto fail;
  }
  for (uint32_t i = 0; i < n_fields; i++) {
    if (i > 0 || changelog) {
      rc = sl_bytes_append(out, &delim, 1);
      if (rc != SL_OK) goto fail;
    }
    size_t mark = out->len;
    rc = sl_bytes_append_str(out, sl_schema_field(schema, i)->name);
    if (rc == SL_OK) rc = csv_quote_tail(out, mark, delim);
    if (rc != SL_OK) goto fail;
  }
  rc = sl_bytes_append(out, "\n", 1);
  if (rc != SL_OK) goto fail;
  return SL_OK;
fail:
  out->len = start;
  return rc;
}
