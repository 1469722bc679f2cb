/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TABLE_MAP events: schema and table names, column types, the per-type
 * metadata (lengths, precision and scale, fractional seconds, the real
 * type of STRING columns), the nullability bitmap, and the optional
 * metadata MariaDB 10.5+ and MySQL 8 write with binlog_row_metadata
 * (signedness, character sets, column names, ENUM/SET values, primary
 * key).  Part of the binlog decoder (binlog_decode.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "connectors/mariadb/binlog_int.h"

/* Optional metadata field types. */
enum {
  OM_SIGNEDNESS = 1,
  OM_DEFAULT_CHARSET = 2,
  OM_COLUMN_CHARSET = 3,
  OM_COLUMN_NAME = 4,
  OM_SET_STR_VALUE = 5,
  OM_ENUM_STR_VALUE = 6,
  OM_GEOMETRY_TYPE = 7,
  OM_SIMPLE_PRIMARY_KEY = 8,
  OM_PRIMARY_KEY_WITH_PREFIX = 9,
  OM_ENUM_AND_SET_DEFAULT_CHARSET = 10,
  OM_ENUM_AND_SET_COLUMN_CHARSET = 11,
  OM_COLUMN_VISIBILITY = 12
};

const char *sl__binlog_type_name(uint8_t type) {
  switch (type) {
  case SL_BLT_DECIMAL: return "DECIMAL (old)";
  case SL_BLT_TINY: return "TINYINT";
  case SL_BLT_SHORT: return "SMALLINT";
  case SL_BLT_LONG: return "INT";
  case SL_BLT_FLOAT: return "FLOAT";
  case SL_BLT_DOUBLE: return "DOUBLE";
  case SL_BLT_NULL: return "NULL";
  case SL_BLT_TIMESTAMP: return "TIMESTAMP (old)";
  case SL_BLT_LONGLONG: return "BIGINT";
  case SL_BLT_INT24: return "MEDIUMINT";
  case SL_BLT_DATE: return "DATE";
  case SL_BLT_TIME: return "TIME (old)";
  case SL_BLT_DATETIME: return "DATETIME (old)";
  case SL_BLT_YEAR: return "YEAR";
  case SL_BLT_NEWDATE: return "NEWDATE";
  case SL_BLT_VARCHAR: return "VARCHAR";
  case SL_BLT_BIT: return "BIT";
  case SL_BLT_TIMESTAMP2: return "TIMESTAMP";
  case SL_BLT_DATETIME2: return "DATETIME";
  case SL_BLT_TIME2: return "TIME";
  case SL_BLT_TYPED_ARRAY: return "TYPED_ARRAY";
  case SL_BLT_JSON: return "JSON";
  case SL_BLT_NEWDECIMAL: return "DECIMAL";
  case SL_BLT_ENUM: return "ENUM";
  case SL_BLT_SET: return "SET";
  case SL_BLT_TINY_BLOB: return "TINYBLOB";
  case SL_BLT_MEDIUM_BLOB: return "MEDIUMBLOB";
  case SL_BLT_LONG_BLOB: return "LONGBLOB";
  case SL_BLT_BLOB: return "BLOB";
  case SL_BLT_VAR_STRING: return "VAR_STRING";
  case SL_BLT_STRING: return "CHAR";
  case SL_BLT_GEOMETRY: return "GEOMETRY";
  default: return "unknown type";
  }
}

/* The columns the SIGNEDNESS field has a bit for.  MariaDB counts YEAR
 * (its YEAR is a TINYINT underneath; observed on 10.11: without it every
 * later column's bit is off by one), MySQL does not. */
static bool is_numeric(uint8_t t, sl_binlog_flavor_t flavor) {
  if (t == SL_BLT_YEAR) return flavor != SL_BINLOG_FLAVOR_MYSQL;
  switch (t) {
  case SL_BLT_TINY: case SL_BLT_SHORT: case SL_BLT_INT24: case SL_BLT_LONG:
  case SL_BLT_LONGLONG: case SL_BLT_FLOAT: case SL_BLT_DOUBLE:
  case SL_BLT_NEWDECIMAL: case SL_BLT_DECIMAL:
    return true;
  default:
    return false;
  }
}

/* Columns that carry a character set in the optional metadata (binary
 * ones included, as the binary set 63).  GEOMETRY too: the server's
 * is_character_type counts it ("base class is blob for geom type"), so a
 * table with a geometry column among text columns has one charset more
 * than the text columns (seen with MariaDB 10.11, binlog_row_metadata
 * FULL: "optional metadata field 3: 1 bytes left over" before). */
static bool is_character(uint8_t t) {
  switch (t) {
  case SL_BLT_STRING: case SL_BLT_VAR_STRING: case SL_BLT_VARCHAR:
  case SL_BLT_BLOB: case SL_BLT_TINY_BLOB: case SL_BLT_MEDIUM_BLOB:
  case SL_BLT_LONG_BLOB: case SL_BLT_GEOMETRY:
    return true;
  default:
    return false;
  }
}

static bool is_enum_set(uint8_t t) {
  return t == SL_BLT_ENUM || t == SL_BLT_SET;
}

/* Reads the type's metadata from m (bounds checked by the caller's
 * cursor) into col. */
static int read_meta(sl_binlog_cur_t *c, sl_binlog_col_t *col, uint32_t i,
                     sl_error_t **out_err) {
  int rc;
  const uint8_t *m;
  char field[64];
  snprintf(field, sizeof(field), "the metadata of column %u (%s)", i,
           sl__binlog_type_name(col->type));
  switch (col->type) {
  case SL_BLT_FLOAT:
  case SL_BLT_DOUBLE:
  case SL_BLT_BLOB:
  case SL_BLT_TINY_BLOB:
  case SL_BLT_MEDIUM_BLOB:
  case SL_BLT_LONG_BLOB:
  case SL_BLT_GEOMETRY:
  case SL_BLT_JSON:
  case SL_BLT_TIME2:
  case SL_BLT_DATETIME2:
  case SL_BLT_TIMESTAMP2:
    if ((rc = sl__binlog_need(c, 1, field, out_err)) != SL_OK) return rc;
    m = c->p + c->off++;
    col->meta = m[0];
    if (col->type == SL_BLT_FLOAT || col->type == SL_BLT_DOUBLE) {
      if (m[0] != (col->type == SL_BLT_FLOAT ? 4 : 8))
        return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                               "%s: pack length %u", field, m[0]);
    } else if (col->type >= SL_BLT_TIMESTAMP2 && col->type <= SL_BLT_TIME2) {
      if (m[0] > 6)
        return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                               "%s: fractional digits %u (at most 6)",
                               field, m[0]);
      col->fsp = m[0];
    } else {
      if (m[0] < 1 || m[0] > 4)
        return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                               "%s: length bytes %u (1 to 4)", field, m[0]);
      col->max_len = m[0];
    }
    return SL_OK;
  case SL_BLT_VARCHAR:
  case SL_BLT_VAR_STRING:
    if ((rc = sl__binlog_need(c, 2, field, out_err)) != SL_OK) return rc;
    col->meta = sl__le16(c->p + c->off);
    col->max_len = col->meta;
    c->off += 2;
    return SL_OK;
  case SL_BLT_BIT:
    if ((rc = sl__binlog_need(c, 2, field, out_err)) != SL_OK) return rc;
    m = c->p + c->off;
    c->off += 2;
    col->meta = (uint16_t)(m[0] | (m[1] << 8));
    if (m[0] > 7 || (uint32_t)m[1] * 8 + m[0] > 64 ||
        (uint32_t)m[1] * 8 + m[0] == 0)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: %u bytes and %u bits (1 to 64 bits)",
                             field, m[1], m[0]);
    col->max_len = (uint32_t)m[1] * 8 + m[0];
    return SL_OK;
  case SL_BLT_NEWDECIMAL:
    if ((rc = sl__binlog_need(c, 2, field, out_err)) != SL_OK) return rc;
    m = c->p + c->off;
    c->off += 2;
    col->meta = (uint16_t)(m[0] << 8 | m[1]);
    col->precision = m[0];
    col->scale = m[1];
    if (m[0] < 1 || m[0] > 65 || m[1] > 38 || m[1] > m[0])
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: precision %u and scale %u out of range "
                             "(precision 1 to 65, scale 0 to 38 and at "
                             "most the precision)", field, m[0], m[1]);
    return SL_OK;
  case SL_BLT_STRING:
  case SL_BLT_ENUM:
  case SL_BLT_SET: {
    if ((rc = sl__binlog_need(c, 2, field, out_err)) != SL_OK) return rc;
    m = c->p + c->off;
    c->off += 2;
    col->meta = (uint16_t)(m[0] << 8 | m[1]);
    uint8_t real = m[0];
    uint32_t len = m[1];
    /* CHAR longer than 255 bytes keeps two high bits of its length in
     * bits 4-5 of the real type, inverted (MySQL bug 37426). */
    if ((real & 0x30) != 0x30) {
      len |= (uint32_t)((real & 0x30) ^ 0x30) << 4;
      real |= 0x30;
    }
    if (real != SL_BLT_STRING && real != SL_BLT_ENUM && real != SL_BLT_SET)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: real type %u (CHAR, ENUM or SET expected)",
                             field, real);
    col->type = real;
    col->max_len = len;
    if (real == SL_BLT_ENUM && len != 1 && len != 2)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: ENUM of %u bytes (1 or 2)", field, len);
    if (real == SL_BLT_SET && (len < 1 || len > 8))
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: SET of %u bytes (1 to 8)", field, len);
    return SL_OK;
  }
  default:
    return SL_OK;
  }
}

static char *dupn(const uint8_t *p, size_t n) {
  char *s = sl_malloc(n + 1);
  if (s == NULL) return NULL;
  if (n) memcpy(s, p, n);
  s[n] = 0;
  return s;
}

/* A name of length l at the cursor, followed by a NUL. */
static int read_name(sl_binlog_cur_t *c, const char *field, char **out,
                     sl_error_t **out_err) {
  int rc;
  if ((rc = sl__binlog_need(c, 1, field, out_err)) != SL_OK) return rc;
  size_t l = c->p[c->off];
  c->off++;
  if ((rc = sl__binlog_need(c, l + 1, field, out_err)) != SL_OK) return rc;
  if (c->p[c->off + l] != 0)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err, "%s not NUL-terminated",
                           field);
  if ((*out = dupn(c->p + c->off, l)) == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "binlog decoder: out of memory");
  c->off += l + 1;
  return SL_OK;
}

/* The next column (index >= from) that pred accepts, or n. */
static uint32_t next_col(const sl_binlog_table_t *t, uint32_t from,
                         bool (*pred)(uint8_t)) {
  while (from < t->n_cols && !pred(t->cols[from].type)) from++;
  return from;
}

static int read_str_list(sl_binlog_cur_t *c, sl_binlog_col_t *col,
                         const char *field, sl_error_t **out_err) {
  uint64_t n;
  int rc = sl__binlog_packed(c, &n, field, out_err);
  if (rc != SL_OK) return rc;
  if (n > 65535 || n > c->end - c->off)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err, "%s: %" PRIu64
                           " values for %zu bytes", field, n,
                           c->end - c->off);
  char **names = sl_calloc(n ? (size_t)n : 1, sizeof(*names));
  if (names == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "binlog decoder: out of memory");
  for (uint64_t i = 0; i < n; i++) {
    uint64_t l;
    if ((rc = sl__binlog_packed(c, &l, field, out_err)) != SL_OK ||
        (rc = sl__binlog_need(c, (size_t)l, field, out_err)) != SL_OK) {
      for (uint64_t k = 0; k < i; k++) sl_free(names[k]);
      sl_free(names);
      return rc;
    }
    if ((names[i] = dupn(c->p + c->off, (size_t)l)) == NULL) {
      for (uint64_t k = 0; k < i; k++) sl_free(names[k]);
      sl_free(names);
      return sl_error_set(out_err, SL_ENOMEM,
                          "binlog decoder: out of memory");
    }
    c->off += (size_t)l;
  }
  for (uint32_t i = 0; i < col->n_names; i++) sl_free(col->names[i]);
  sl_free(col->names);
  col->names = names;
  col->n_names = (uint32_t)n;
  return SL_OK;
}

static int read_charsets(sl_binlog_cur_t *c, sl_binlog_table_t *t,
                         bool (*pred)(uint8_t), bool is_default,
                         const char *field, sl_error_t **out_err) {
  int rc;
  uint64_t v;
  if (is_default) {
    if ((rc = sl__binlog_packed(c, &v, field, out_err)) != SL_OK) return rc;
    if (v == 0 || v > 65535)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: collation %" PRIu64, field, v);
    for (uint32_t i = next_col(t, 0, pred); i < t->n_cols;
         i = next_col(t, i + 1, pred))
      t->cols[i].charset = (uint16_t)v;
    /* Then (index among those columns, collation) for the others. */
    while (c->off < c->end) {
      uint64_t idx, coll;
      if ((rc = sl__binlog_packed(c, &idx, field, out_err)) != SL_OK ||
          (rc = sl__binlog_packed(c, &coll, field, out_err)) != SL_OK)
        return rc;
      uint32_t i = next_col(t, 0, pred);
      for (uint64_t k = 0; k < idx && i < t->n_cols; k++)
        i = next_col(t, i + 1, pred);
      if (i >= t->n_cols || coll == 0 || coll > 65535)
        return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                               "%s: column %" PRIu64 " collation %" PRIu64
                               " (no such column or collation)", field, idx,
                               coll);
      t->cols[i].charset = (uint16_t)coll;
    }
    return SL_OK;
  }
  for (uint32_t i = next_col(t, 0, pred); i < t->n_cols;
       i = next_col(t, i + 1, pred)) {
    if ((rc = sl__binlog_packed(c, &v, field, out_err)) != SL_OK) return rc;
    if (v == 0 || v > 65535)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%s: collation %" PRIu64 " of column %u",
                             field, v, i);
    t->cols[i].charset = (uint16_t)v;
  }
  return SL_OK;
}

static int read_optional(sl_binlog_cur_t *c, sl_binlog_table_t *t,
                         sl_binlog_flavor_t flavor, sl_error_t **out_err) {
  int rc;
  while (c->off < c->end) {
    uint8_t type = c->p[c->off++];
    uint64_t l;
    char field[64];
    snprintf(field, sizeof(field), "optional metadata field %u", type);
    if ((rc = sl__binlog_packed(c, &l, field, out_err)) != SL_OK) return rc;
    if ((rc = sl__binlog_need(c, (size_t)l, field, out_err)) != SL_OK)
      return rc;
    /* A cursor over this field only. */
    sl_binlog_cur_t f = *c;
    f.end = c->off + (size_t)l;
    c->off += (size_t)l;
    t->has_optional_meta = true;
    switch (type) {
    case OM_SIGNEDNESS: {
      uint32_t k = 0;
      for (uint32_t i = 0; i < t->n_cols; i++) {
        if (!is_numeric(t->cols[i].type, flavor)) continue;
        if (k / 8 >= l)
          return sl__binlog_fail(&f, SL_ECORRUPT, out_err,
                                 "%s (signedness): %" PRIu64 " bytes for "
                                 "more numeric columns", field, l);
        /* The first numeric column is the highest bit. */
        t->cols[i].is_unsigned = (f.p[f.off + k / 8] >> (7 - k % 8)) & 1;
        t->cols[i].has_sign = true;
        k++;
      }
      if (l != (k + 7) / 8)
        return sl__binlog_fail(&f, SL_ECORRUPT, out_err,
                               "%s (signedness): %" PRIu64 " bytes for %u "
                               "numeric columns", field, l, k);
      f.off = f.end;
      break;
    }
    case OM_DEFAULT_CHARSET:
      rc = read_charsets(&f, t, is_character, true, field, out_err);
      break;
    case OM_COLUMN_CHARSET:
      rc = read_charsets(&f, t, is_character, false, field, out_err);
      break;
    case OM_ENUM_AND_SET_DEFAULT_CHARSET:
      rc = read_charsets(&f, t, is_enum_set, true, field, out_err);
      break;
    case OM_ENUM_AND_SET_COLUMN_CHARSET:
      rc = read_charsets(&f, t, is_enum_set, false, field, out_err);
      break;
    case OM_COLUMN_NAME:
      for (uint32_t i = 0; i < t->n_cols; i++) {
        uint64_t nl;
        if ((rc = sl__binlog_packed(&f, &nl, field, out_err)) != SL_OK ||
            (rc = sl__binlog_need(&f, (size_t)nl, field, out_err)) != SL_OK)
          return rc;
        char *n = dupn(f.p + f.off, (size_t)nl);
        if (n == NULL)
          return sl_error_set(out_err, SL_ENOMEM,
                              "binlog decoder: out of memory");
        sl_free(t->cols[i].name);
        t->cols[i].name = n;
        f.off += (size_t)nl;
      }
      break;
    case OM_SET_STR_VALUE:
    case OM_ENUM_STR_VALUE: {
      uint8_t want = type == OM_SET_STR_VALUE ? SL_BLT_SET : SL_BLT_ENUM;
      for (uint32_t i = 0; i < t->n_cols && rc == SL_OK; i++)
        if (t->cols[i].type == want)
          rc = read_str_list(&f, &t->cols[i], field, out_err);
      break;
    }
    case OM_SIMPLE_PRIMARY_KEY:
    case OM_PRIMARY_KEY_WITH_PREFIX: {
      uint32_t n = 0;
      uint32_t *pk = sl_calloc(t->n_cols ? t->n_cols : 1, sizeof(*pk));
      if (pk == NULL)
        return sl_error_set(out_err, SL_ENOMEM,
                            "binlog decoder: out of memory");
      while (f.off < f.end) {
        uint64_t idx, prefix;
        if ((rc = sl__binlog_packed(&f, &idx, field, out_err)) != SL_OK)
          break;
        if (type == OM_PRIMARY_KEY_WITH_PREFIX &&
            (rc = sl__binlog_packed(&f, &prefix, field, out_err)) != SL_OK)
          break;
        if (idx >= t->n_cols || n >= t->n_cols) {
          rc = sl__binlog_fail(&f, SL_ECORRUPT, out_err,
                               "%s (primary key): column %" PRIu64
                               " of %u", field, idx, t->n_cols);
          break;
        }
        pk[n++] = (uint32_t)idx;
      }
      if (rc != SL_OK) {
        sl_free(pk);
        return rc;
      }
      sl_free(t->pk);
      t->pk = pk;
      t->n_pk = n;
      break;
    }
    default:
      /* GEOMETRY_TYPE, COLUMN_VISIBILITY and later fields: not needed. */
      f.off = f.end;
      break;
    }
    if (rc != SL_OK) return rc;
    if (f.off != f.end)
      return sl__binlog_fail(&f, SL_ECORRUPT, out_err,
                             "%s: %zu bytes left over", field,
                             f.end - f.off);
  }
  return SL_OK;
}

int sl__binlog_table_map(sl_binlog_decoder_t *d, sl_binlog_cur_t *c,
                         uint32_t pl, sl_binlog_table_t **out_t,
                         sl_error_t **out_err) {
  int rc;
  if ((rc = sl__binlog_need(c, pl, "the post-header", out_err)) != SL_OK)
    return rc;
  sl_binlog_table_t *t = sl_calloc(1, sizeof(*t));
  if (t == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "binlog decoder: out of memory");
  t->table_id = pl == 6 ? sl__le32(c->p + c->off) : sl__le48(c->p + c->off);
  c->off += pl;
  uint64_t n, ml;
  if ((rc = read_name(c, "the schema name", &t->schema, out_err)) != SL_OK ||
      (rc = read_name(c, "the table name", &t->table, out_err)) != SL_OK ||
      (rc = sl__binlog_packed(c, &n, "the column count", out_err)) != SL_OK)
    goto fail;
  if (n == 0 || n > SL_BINLOG_MAX_COLUMNS) {
    rc = sl__binlog_fail(c, SL_ECORRUPT, out_err,
                         "column count %" PRIu64 " (1 to %u)", n,
                         SL_BINLOG_MAX_COLUMNS);
    goto fail;
  }
  if ((rc = sl__binlog_need(c, (size_t)n, "the column types", out_err)) !=
      SL_OK)
    goto fail;
  if ((t->cols = sl_calloc((size_t)n, sizeof(*t->cols))) == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "binlog decoder: out of memory");
    goto fail;
  }
  t->n_cols = (uint32_t)n;
  for (uint32_t i = 0; i < t->n_cols; i++)
    t->cols[i].type = c->p[c->off + i];
  c->off += (size_t)n;
  if ((rc = sl__binlog_packed(c, &ml, "the metadata length", out_err)) !=
      SL_OK)
    goto fail;
  if ((rc = sl__binlog_need(c, (size_t)ml, "the metadata", out_err)) !=
      SL_OK)
    goto fail;
  {
    sl_binlog_cur_t m = *c;
    m.end = c->off + (size_t)ml;
    for (uint32_t i = 0; i < t->n_cols; i++)
      if ((rc = read_meta(&m, &t->cols[i], i, out_err)) != SL_OK) goto fail;
    if (m.off != m.end) {
      rc = sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "metadata of %" PRIu64 " bytes, the column types "
                           "use %zu", ml, m.off - c->off);
      goto fail;
    }
    c->off = m.end;
  }
  size_t bl = ((size_t)n + 7) / 8;
  if ((rc = sl__binlog_need(c, bl, "the nullability bitmap", out_err)) !=
      SL_OK)
    goto fail;
  for (uint32_t i = 0; i < t->n_cols; i++)
    t->cols[i].is_nullable = (c->p[c->off + i / 8] >> (i % 8)) & 1;
  c->off += bl;
  if ((rc = read_optional(c, t, d->flavor, out_err)) != SL_OK) goto fail;
  *out_t = t;
  return SL_OK;
fail:
  sl__binlog_table_free(t);
  return rc;
}
