/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoded binlog values -> sluice values: the type a column maps to and the
 * conversion of one value, with the table of docs/cdc-mariadb.md.
 * Character data comes out as UTF-8: utf8mb3/utf8mb4 and ascii columns are
 * checked and passed through, latin1 (MySQL's latin1 is Windows-1252) is
 * converted; binary columns become bytes; other character sets are not
 * supported.  Part of the binlog decoder (binlog_decode.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "connectors/mariadb/binlog_int.h"

typedef enum { CS_UNKNOWN, CS_BINARY, CS_UTF8, CS_ASCII, CS_LATIN1 } cs_t;

/* Character set of a collation id (MySQL's and MariaDB's ids; MariaDB
 * 10.10+'s UCA 14.0 collations encode the set in the id's low byte
 * range, see the docs). */
static cs_t cs_of(uint16_t id) {
  if (id == 0) return CS_UNKNOWN;
  if (id == SL_BL_CHARSET_BINARY) return CS_BINARY;
  if (id == 11 || id == 65) return CS_ASCII;
  if (id == 5 || id == 8 || id == 15 || id == 31 || id == 47 || id == 48 ||
      id == 49 || id == 94 || id == 1032 || id == 1029)
    return CS_LATIN1;
  if (id == 33 || id == 83 || (id >= 192 && id <= 215) || id == 223 ||
      id == 76)
    return CS_UTF8; /* utf8mb3 */
  if (id == 45 || id == 46 || (id >= 224 && id <= 247) ||
      (id >= 255 && id <= 323))
    return CS_UTF8; /* utf8mb4 */
  /* MariaDB: utf8mb3 and utf8mb4 _nopad_ and UCA 14.0 collations. */
  if (id == 1057 || id == 1069 || id == 1070 || id == 1101 ||
      (id >= 1216 && id <= 1247) || (id >= 2048 && id <= 2367))
    return CS_UTF8;
  return CS_UNKNOWN;
}

static const char *name_of(const sl_binlog_col_t *col) {
  return col->name != NULL ? col->name : "?";
}

static bool is_text_type(uint8_t t) {
  return t == SL_BLT_VARCHAR || t == SL_BLT_VAR_STRING ||
         t == SL_BLT_STRING || t == SL_BLT_BLOB || t == SL_BLT_TINY_BLOB ||
         t == SL_BLT_MEDIUM_BLOB || t == SL_BLT_LONG_BLOB;
}

int sl__binlog_col_sl_type(const sl_binlog_col_t *col, sl_type_t *out_type,
                           sl_error_t **out_err) {
  sl_type_t t = {.nullable = col->is_nullable};
  switch (col->type) {
  case SL_BLT_TINY: case SL_BLT_SHORT: case SL_BLT_INT24: case SL_BLT_LONG:
  case SL_BLT_LONGLONG: case SL_BLT_YEAR: case SL_BLT_BIT: case SL_BLT_TIME:
  case SL_BLT_TIME2: case SL_BLT_NULL:
    t.id = SL_TYPE_INT64;
    break;
  case SL_BLT_ENUM:
  case SL_BLT_SET:
    t.id = col->n_names > 0 ? SL_TYPE_STRING : SL_TYPE_INT64;
    break;
  case SL_BLT_FLOAT:
  case SL_BLT_DOUBLE:
    t.id = SL_TYPE_FLOAT64;
    break;
  case SL_BLT_NEWDECIMAL:
    if (col->precision <= SL_DECIMAL_MAX_PRECISION) {
      t.id = SL_TYPE_DECIMAL;
      t.precision = col->precision;
      t.scale = col->scale;
    } else {
      t.id = SL_TYPE_STRING;
    }
    break;
  case SL_BLT_DATE: case SL_BLT_NEWDATE: case SL_BLT_DATETIME:
  case SL_BLT_DATETIME2: case SL_BLT_TIMESTAMP: case SL_BLT_TIMESTAMP2:
    t.id = SL_TYPE_TIMESTAMP;
    break;
  case SL_BLT_GEOMETRY:
    t.id = SL_TYPE_BYTES;
    break;
  default:
    if (is_text_type(col->type)) {
      cs_t cs = cs_of(col->charset);
      if (cs == CS_UNKNOWN)
        return sl_error_set(out_err, SL_ENOTSUP,
                            "column '%s' (%s): character set (collation id "
                            "%u) %s", name_of(col),
                            sl__binlog_type_name(col->type), col->charset,
                            col->charset == 0
                                ? "not known: the binlog has no optional "
                                  "metadata (binlog_row_metadata=FULL) and "
                                  "none was set from information_schema"
                                : "not supported (utf8mb3, utf8mb4, ascii, "
                                  "latin1 and binary are)");
      t.id = cs == CS_BINARY ? SL_TYPE_BYTES : SL_TYPE_STRING;
      break;
    }
    return sl_error_set(out_err, SL_ENOTSUP,
                        "column '%s': type %s is not supported",
                        name_of(col), sl__binlog_type_name(col->type));
  }
  *out_type = t;
  return SL_OK;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static bool utf8_ok(const uint8_t *p, uint32_t n) {
  uint32_t i = 0;
  while (i < n) {
    uint8_t c = p[i];
    uint32_t k, cp;
    if (c < 0x80) { i++; continue; }
    if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
    else return false;
    if (n - i <= k) return false;
    for (uint32_t j = 1; j <= k; j++) {
      if ((p[i + j] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + j] & 0x3F);
    }
    if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += k + 1;
  }
  return true;
}

/* Windows-1252 0x80-0x9F (MySQL's latin1); the five undefined bytes map
 * to the C1 controls of the same value, as MySQL does. */
static const uint16_t cp1252[32] = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
    0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
    0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
    0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};

static int latin1_to_utf8(const uint8_t *p, uint32_t n, sl_bytes_t *buf) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t cp = p[i] >= 0x80 && p[i] < 0xA0 ? cp1252[p[i] - 0x80] : p[i];
    uint8_t o[3];
    size_t k;
    if (cp < 0x80) { o[0] = (uint8_t)cp; k = 1; }
    else if (cp < 0x800) {
      o[0] = (uint8_t)(0xC0 | (cp >> 6));
      o[1] = (uint8_t)(0x80 | (cp & 0x3F));
      k = 2;
    } else {
      o[0] = (uint8_t)(0xE0 | (cp >> 12));
      o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
      o[2] = (uint8_t)(0x80 | (cp & 0x3F));
      k = 3;
    }
    int rc = sl_bytes_append(buf, o, k);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static int bad(sl_error_t **out_err, const sl_binlog_col_t *col,
               const char *what) {
  return sl_error_set(out_err, SL_ETYPE, "column '%s' (%s): %s",
                      name_of(col), sl__binlog_type_name(col->type), what);
}

/* "123.45" (at most 18 digits) -> unscaled int64. */
static int64_t dec_unscaled(const char *s) {
  bool neg = *s == '-';
  int64_t v = 0;
  for (s += neg; *s; s++)
    if (*s != '.') v = v * 10 + (*s - '0');
  return neg ? -v : v;
}

int sl__binlog_value_to_sl(const sl_binlog_col_t *col,
                           const sl_binlog_value_t *v, sl_type_t t,
                           sl_bytes_t *buf, sl_value_t *out,
                           sl_error_t **out_err) {
  memset(out, 0, sizeof(*out));
  out->type = t.id;
  sl_bytes_clear(buf);
  if (v->kind == SL_BV_NULL || v->kind == SL_BV_ABSENT) {
    out->is_null = true;
    return SL_OK;
  }
  switch (v->kind) {
  case SL_BV_INT:
    if (t.id != SL_TYPE_INT64) break;
    if (v->is_unsigned && v->u.u > (uint64_t)INT64_MAX)
      return bad(out_err, col, "unsigned value above the int64 range");
    out->u.i = v->u.i;
    return SL_OK;
  case SL_BV_YEAR:
  case SL_BV_BIT: /* the bits, as two's complement for BIT(64) */
    if (t.id != SL_TYPE_INT64) break;
    out->u.i = v->u.i;
    return SL_OK;
  case SL_BV_TIME:
    if (t.id != SL_TYPE_INT64) break;
    out->u.i = (((int64_t)v->t.hour * 60 + v->t.minute) * 60 + v->t.second) *
                   1000000 + v->t.usec;
    if (v->t.is_negative) out->u.i = -out->u.i;
    return SL_OK;
  case SL_BV_DOUBLE:
    if (t.id != SL_TYPE_FLOAT64) break;
    out->u.f = v->u.f;
    return SL_OK;
  case SL_BV_DECIMAL:
    if (t.id == SL_TYPE_DECIMAL) {
      if (col->precision > SL_DECIMAL_MAX_PRECISION || t.scale != col->scale)
        return bad(out_err, col, "decimal does not fit the sluice type");
      out->scale = t.scale;
      out->u.i = dec_unscaled(v->dec);
      return SL_OK;
    }
    if (t.id == SL_TYPE_STRING) {
      out->u.s = (sl_slice_t){(const uint8_t *)v->dec,
                              (uint32_t)strlen(v->dec)};
      return SL_OK;
    }
    break;
  case SL_BV_DATE:
  case SL_BV_DATETIME:
    if (t.id != SL_TYPE_TIMESTAMP) break;
    if (v->t.month == 0 || v->t.day == 0)
      return bad(out_err, col, "zero or partial date has no timestamp");
    out->u.i = (days_from_civil(v->t.year, v->t.month, v->t.day) * 86400 +
                ((int64_t)v->t.hour * 60 + v->t.minute) * 60 + v->t.second) *
                   1000000 + v->t.usec;
    return SL_OK;
  case SL_BV_TIMESTAMP:
    if (t.id != SL_TYPE_TIMESTAMP) break;
    if (v->u.ts.sec == 0 && v->u.ts.usec == 0)
      return bad(out_err, col, "zero timestamp has no value");
    out->u.i = v->u.ts.sec * 1000000 + v->u.ts.usec;
    return SL_OK;
  case SL_BV_ENUM:
  case SL_BV_SET:
    if (t.id == SL_TYPE_INT64) {
      out->u.i = (int64_t)v->u.u;
      return SL_OK;
    }
    if (t.id != SL_TYPE_STRING) break;
    if (v->kind == SL_BV_ENUM) {
      if (v->u.u > col->n_names)
        return bad(out_err, col, "ENUM index beyond the known values");
      if (v->u.u > 0 &&
          sl_bytes_append_str(buf, col->names[v->u.u - 1]) != SL_OK)
        return SL_ENOMEM;
    } else {
      for (uint32_t i = 0; i < 64; i++) {
        if (!((v->u.u >> i) & 1)) continue;
        if (i >= col->n_names)
          return bad(out_err, col, "SET member beyond the known values");
        if ((buf->len && sl_bytes_append(buf, ",", 1) != SL_OK) ||
            sl_bytes_append_str(buf, col->names[i]) != SL_OK)
          return SL_ENOMEM;
      }
    }
    out->u.s = (sl_slice_t){buf->len ? buf->data : (const uint8_t *)"",
                            (uint32_t)buf->len};
    return SL_OK;
  case SL_BV_STRING:
  case SL_BV_BLOBLIKE:
    if (t.id == SL_TYPE_BYTES && v->kind == SL_BV_STRING &&
        col->type == SL_BLT_STRING && cs_of(col->charset) == CS_BINARY &&
        v->u.s.len < col->max_len) {
      /* BINARY(n): the server logs the value without its trailing zero
       * bytes (as CHAR without its trailing spaces); SELECT gives all n. */
      static const uint8_t zeros[64];
      if (sl_bytes_append(buf, v->u.s.p, v->u.s.len) != SL_OK)
        return SL_ENOMEM;
      for (uint32_t left = col->max_len - v->u.s.len; left > 0;) {
        uint32_t n = left < sizeof(zeros) ? left : (uint32_t)sizeof(zeros);
        if (sl_bytes_append(buf, zeros, n) != SL_OK) return SL_ENOMEM;
        left -= n;
      }
      out->u.s = (sl_slice_t){buf->data, (uint32_t)buf->len};
      return SL_OK;
    }
    if (t.id == SL_TYPE_BYTES) {
      out->u.s = (sl_slice_t){v->u.s.p, v->u.s.len};
      return SL_OK;
    }
    if (t.id != SL_TYPE_STRING) break;
    switch (cs_of(col->charset)) {
    case CS_UTF8:
    case CS_ASCII:
      if (!utf8_ok(v->u.s.p, v->u.s.len))
        return bad(out_err, col, "invalid UTF-8");
      out->u.s = (sl_slice_t){v->u.s.p, v->u.s.len};
      return SL_OK;
    case CS_LATIN1:
      if (latin1_to_utf8(v->u.s.p, v->u.s.len, buf) != SL_OK)
        return SL_ENOMEM;
      out->u.s = (sl_slice_t){buf->len ? buf->data : (const uint8_t *)"",
                              (uint32_t)buf->len};
      return SL_OK;
    default:
      return bad(out_err, col, "character set not supported");
    }
  default:
    break;
  }
  char msg[96];
  snprintf(msg, sizeof(msg), "value kind %u does not convert to %s", v->kind,
           sl_type_name((sl_type_id_t)t.id));
  return bad(out_err, col, msg);
}

int sl__binlog_table_schema(const sl_binlog_table_t *t,
                            sl_schema_t **out_schema, sl_error_t **out_err) {
  if (t->n_cols > SL_SCHEMA_MAX_FIELDS)
    return sl_error_set(out_err, SL_ENOTSUP,
                        "table %s.%s: %u columns (sluice rows hold at most "
                        "%u)", t->schema, t->table, t->n_cols,
                        SL_SCHEMA_MAX_FIELDS);
  sl_field_t *f = sl_calloc(t->n_cols, sizeof(*f));
  char *names = sl_calloc(t->n_cols, 16);
  int rc = SL_OK;
  if (f == NULL || names == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "binlog decoder: out of memory");
    goto done;
  }
  for (uint32_t i = 0; i < t->n_cols; i++) {
    if ((rc = sl__binlog_col_sl_type(&t->cols[i], &f[i].type, out_err)) !=
        SL_OK) {
      if (out_err != NULL && *out_err != NULL)
        sl_error_prefix(*out_err, "table %s.%s", t->schema, t->table);
      goto done;
    }
    if (t->cols[i].name != NULL) {
      f[i].name = t->cols[i].name;
    } else {
      snprintf(names + 16 * i, 16, "col%u", i);
      f[i].name = names + 16 * i;
    }
  }
  rc = sl_schema_create(f, t->n_cols, out_schema, out_err);
done:
  sl_free(f);
  sl_free(names);
  return rc;
}

int sl__binlog_image_to_row(const sl_binlog_table_t *t,
                            const sl_binlog_value_t *vals, sl_row_kind_t kind,
                            sl_row_builder_t *b, sl_bytes_t *scratch,
                            sl_row_t *out_row, sl_error_t **out_err) {
  const sl_schema_t *schema = b->schema;
  if (sl_schema_n_fields(schema) != t->n_cols)
    return sl_error_set(out_err, SL_EINVAL,
                        "table %s.%s: %u columns, the row's schema has %u",
                        t->schema, t->table, t->n_cols,
                        sl_schema_n_fields(schema));
  sl_row_builder_reset(b, kind);
  for (uint32_t i = 0; i < t->n_cols; i++) {
    const sl_field_t *f = sl_schema_field(schema, i);
    if (vals[i].kind == SL_BV_ABSENT)
      return sl_error_set(out_err, SL_EINVAL,
                          "table %s.%s: column '%s' is not in the row "
                          "image (the server needs binlog_row_image=FULL)",
                          t->schema, t->table, f->name);
    sl_value_t v;
    int rc = sl__binlog_value_to_sl(&t->cols[i], &vals[i], f->type, scratch,
                                    &v, out_err);
    if (rc != SL_OK) {
      if (out_err != NULL && *out_err != NULL)
        sl_error_prefix(*out_err, "table %s.%s", t->schema, t->table);
      return rc;
    }
    if (v.is_null) {
      sl_row_builder_set_null(b, i);
      continue;
    }
    /* String values may live in scratch, which the next column reuses:
     * the builder copies them now. */
    rc = sl_row_builder_set_value(b, i, &v);
    if (rc != SL_OK) break;
  }
  return sl_row_builder_finish(b, out_row, out_err);
}
