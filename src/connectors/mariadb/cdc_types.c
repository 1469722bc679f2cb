/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDC source's column types: information_schema.COLUMNS to sluice
 * types (the table in docs/cdc-mariadb.md, "Types"), the table description
 * (columns, primary key, chunk key) and the conversion of text-protocol
 * values into row fields.  See cdc_int.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cdc_int.h"
#include "mariadb_int.h"

static bool is_one_of(const char *s, const char *const *list) {
  for (; *list; list++)
    if (strcmp(s, *list) == 0) return true;
  return false;
}

static const char *const STRING_TYPES[] = {
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
    "set", "json", NULL};
static const char *const BYTES_TYPES[] = {
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
    "geometry", "point", "linestring", "polygon", "multipoint",
    "multilinestring", "multipolygon", "geometrycollection", NULL};
static const char *const INT_TYPES[] = {
    "tinyint", "smallint", "mediumint", "int", "bigint", "year", NULL};

static int unsupported(sl_error_t **out_err, const char *what,
                       const char *column_type, const char *why) {
  return sl_error_set(out_err, SL_ENOTSUP,
                      "%s: type %s is not supported by mariadb-cdc (%s; "
                      "docs/cdc-mariadb.md lists the supported types)",
                      what, column_type, why);
}

/*
 * The same sluice types as the binlog side gives
 * (sl__binlog_col_sl_type in binlog_map.c): a table's snapshot rows and
 * its binlog rows share one schema.
 */
int sl__cdc_map_type(const char *d, const char *column_type, long precision,
                     long scale, const char *what, sl_type_t *out_type,
                     sl__cdc_conv_t *out_conv, sl_error_t **out_err) {
  sl_type_t t = {0};
  sl__cdc_conv_t conv = SL_CDC_CONV_INT;
  if (is_one_of(d, INT_TYPES)) {
    /* bigint unsigned too: a value above 2^63-1 is an error naming the
     * column when it is read, as in the binlog. */
    t.id = SL_TYPE_INT64;
  } else if (!strcmp(d, "bit")) {
    t.id = SL_TYPE_INT64; /* bit(64) at or above 2^63: two's complement */
    conv = SL_CDC_CONV_BIT;
  } else if (!strcmp(d, "time")) {
    t.id = SL_TYPE_INT64; /* signed microseconds */
    conv = SL_CDC_CONV_TIME;
  } else if (!strcmp(d, "float") || !strcmp(d, "double")) {
    t.id = SL_TYPE_FLOAT64;
    conv = SL_CDC_CONV_FLOAT;
  } else if (!strcmp(d, "decimal")) {
    if (precision < 1 || scale < 0 || scale > precision)
      return unsupported(out_err, what, column_type,
                         "its precision and scale are not known");
    if (precision <= SL_DECIMAL_MAX_PRECISION) {
      t.id = SL_TYPE_DECIMAL;
      t.precision = (uint8_t)precision;
      t.scale = (uint8_t)scale;
      conv = SL_CDC_CONV_DECIMAL;
    } else {
      t.id = SL_TYPE_STRING; /* exact text */
      conv = SL_CDC_CONV_STRING;
    }
  } else if (is_one_of(d, STRING_TYPES)) {
    t.id = SL_TYPE_STRING;
    conv = SL_CDC_CONV_STRING;
  } else if (is_one_of(d, BYTES_TYPES)) {
    t.id = SL_TYPE_BYTES;
    conv = SL_CDC_CONV_BYTES;
  } else if (!strcmp(d, "date")) {
    t.id = SL_TYPE_TIMESTAMP;
    conv = SL_CDC_CONV_DATE;
  } else if (!strcmp(d, "datetime") || !strcmp(d, "timestamp")) {
    t.id = SL_TYPE_TIMESTAMP;
    conv = SL_CDC_CONV_DATETIME;
  } else if (!strcmp(d, "uuid") || !strcmp(d, "inet4") ||
             !strcmp(d, "inet6")) {
    return unsupported(out_err, what, column_type,
                       "the binlog carries it in the server's internal "
                       "binary form, which sluice does not map yet");
  } else {
    return unsupported(out_err, what, column_type,
                       "no sluice type holds its values");
  }
  t.nullable = true;
  *out_type = t;
  *out_conv = conv;
  return SL_OK;
}

/* The character sets whose text the binlog side maps (binlog_map.c). */
static bool charset_ok(const char *cs) {
  static const char *const ok[] = {"utf8mb3", "utf8", "utf8mb4", "ascii",
                                   "latin1", "binary", NULL};
  return cs == NULL || is_one_of(cs, ok);
}

/* ------------------------------------------------------------------ */
/* The table description.                                              */

static int append_quoted(MYSQL *c, sl_bytes_t *b, const char *s) {
  size_t n = strlen(s);
  int rc = sl_bytes_reserve(b, 2 * n + 3);
  if (rc != SL_OK) return rc;
  b->data[b->len++] = '\'';
  b->len += mysql_real_escape_string(c, (char *)b->data + b->len, s,
                                     (unsigned long)n);
  b->data[b->len++] = '\'';
  return SL_OK;
}

void sl__cdc_table_destroy(sl__cdc_table_t *t) {
  if (t == NULL) return;
  for (uint32_t i = 0; i < t->n_cols; i++) sl_free(t->cols[i].name);
  sl_free(t->cols);
  if (t->schema) sl_schema_unref(t->schema);
  sl_free(t->pk);
  sl_free(t->key);
  sl_free(t->key_kind);
  sl_free(t->db);
  sl_free(t->name);
  sl_free(t);
}

static int find_col(const sl__cdc_table_t *t, const char *name) {
  for (uint32_t i = 0; i < t->n_cols; i++)
    if (strcmp(t->cols[i].name, name) == 0) return (int)i;
  return -1;
}

static int key_kind_of(const sl__cdc_col_t *col, uint8_t *out) {
  const char *d = col->data_type;
  if (col->conv == SL_CDC_CONV_INT) *out = SL_CDC_KEY_INT;
  else if (!strcmp(d, "char") || !strcmp(d, "varchar"))
    *out = SL_CDC_KEY_STR;
  else if (!strcmp(d, "binary") || !strcmp(d, "varbinary"))
    *out = SL_CDC_KEY_BIN;
  else if (col->conv == SL_CDC_CONV_DECIMAL || col->conv == SL_CDC_CONV_DATE ||
           col->conv == SL_CDC_CONV_DATETIME)
    *out = SL_CDC_KEY_TEXT;
  else return SL_ENOTSUP;
  return SL_OK;
}

static int query(MYSQL *c, const char *server, sl_bytes_t *sql,
                 MYSQL_RES **out, sl_error_t **out_err) {
  const char *q = sl__mariadb_cstr(sql);
  if (q == NULL) return SL_ENOMEM;
  if (mysql_real_query(c, q, (unsigned long)sql->len) != 0 ||
      (*out = mysql_store_result(c)) == NULL)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s failed: "
                        "error %u: %s", server, q, mysql_errno(c),
                        mysql_error(c));
  return SL_OK;
}

static int describe_columns(MYSQL *c, const char *server, sl__cdc_table_t *t,
                            sl_bytes_t *sql, sl_error_t **out_err) {
  sl_bytes_clear(sql);
  int rc = sl_bytes_append_str(
      sql, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION, "
           "NUMERIC_SCALE, IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME "
           "FROM "
           "information_schema.COLUMNS "
           "WHERE TABLE_SCHEMA = ");
  if (rc == SL_OK) rc = append_quoted(c, sql, t->db);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " AND TABLE_NAME = ");
  if (rc == SL_OK) rc = append_quoted(c, sql, t->name);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " ORDER BY ORDINAL_POSITION");
  if (rc != SL_OK) return rc;
  MYSQL_RES *res = NULL;
  rc = query(c, server, sql, &res, out_err);
  if (rc != SL_OK) return rc;
  uint64_t n = mysql_num_rows(res);
  if (n == 0) {
    mysql_free_result(res);
    return sl_error_set(out_err, SL_ENOTFOUND,
                        "mariadb-cdc: table `%s`.`%s` does not exist at %s "
                        "(or the user cannot see it)",
                        t->db, t->name, server);
  }
  if (n > SL_SCHEMA_MAX_FIELDS) {
    mysql_free_result(res);
    return sl_error_set(out_err, SL_ENOTSUP,
                        "mariadb-cdc: table `%s`.`%s` at %s has %llu "
                        "columns; sluice rows hold at most %d",
                        t->db, t->name, server, (unsigned long long)n,
                        SL_SCHEMA_MAX_FIELDS);
  }
  t->cols = sl_calloc((size_t)n, sizeof(*t->cols));
  sl_field_t *fields = sl_calloc((size_t)n, sizeof(*fields));
  if (t->cols == NULL || fields == NULL) {
    mysql_free_result(res);
    sl_free(fields);
    return SL_ENOMEM;
  }
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(res)) != NULL) {
    sl__cdc_col_t *col = &t->cols[t->n_cols];
    col->name = sl_strdup(row[0] ? row[0] : "");
    if (col->name == NULL) {
      rc = SL_ENOMEM;
      break;
    }
    t->n_cols++;
    snprintf(col->data_type, sizeof(col->data_type), "%s",
             row[1] ? row[1] : "");
    snprintf(col->column_type, sizeof(col->column_type), "%s",
             row[2] ? row[2] : "");
    snprintf(col->charset, sizeof(col->charset), "%s", row[6] ? row[6] : "");
    snprintf(col->collation, sizeof(col->collation), "%s",
             row[7] ? row[7] : "");
    for (char *p = col->data_type; *p; p++)
      if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    char what[512];
    snprintf(what, sizeof(what), "mariadb-cdc: column `%s` of `%s`.`%s` at %s",
             col->name, t->db, t->name, server);
    sl__cdc_conv_t conv;
    rc = sl__cdc_map_type(col->data_type, col->column_type,
                          row[3] ? atol(row[3]) : 0, row[4] ? atol(row[4]) : 0,
                          what, &col->type, &conv, out_err);
    if (rc != SL_OK) break;
    if (conv == SL_CDC_CONV_STRING && !charset_ok(row[6])) {
      rc = sl_error_set(out_err, SL_ENOTSUP,
                        "%s: character set %s is not supported by "
                        "mariadb-cdc (utf8mb3, utf8mb4, ascii, latin1 and "
                        "binary are)",
                        what, row[6]);
      break;
    }
    col->conv = (uint8_t)conv;
    col->type.nullable = !(row[5] && strcmp(row[5], "NO") == 0);
    fields[t->n_cols - 1].name = col->name;
    fields[t->n_cols - 1].type = col->type;
  }
  mysql_free_result(res);
  if (rc == SL_OK)
    rc = sl_schema_create(fields, t->n_cols, &t->schema, out_err);
  sl_free(fields);
  return rc;
}

/* The table exists and is InnoDB: the chunk reader's consistent snapshot
 * and its binlog position hold for InnoDB tables only. */
static int describe_engine(MYSQL *c, const char *server, sl__cdc_table_t *t,
                           sl_bytes_t *sql, sl_error_t **out_err) {
  sl_bytes_clear(sql);
  int rc = sl_bytes_append_str(
      sql, "SELECT ENGINE, TABLE_TYPE FROM information_schema.TABLES WHERE "
           "TABLE_SCHEMA = ");
  if (rc == SL_OK) rc = append_quoted(c, sql, t->db);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " AND TABLE_NAME = ");
  if (rc == SL_OK) rc = append_quoted(c, sql, t->name);
  if (rc != SL_OK) return rc;
  MYSQL_RES *res = NULL;
  rc = query(c, server, sql, &res, out_err);
  if (rc != SL_OK) return rc;
  MYSQL_ROW row = mysql_fetch_row(res);
  if (row == NULL)
    rc = sl_error_set(out_err, SL_ENOTFOUND,
                      "mariadb-cdc: table `%s`.`%s` does not exist at %s "
                      "(or the user cannot see it)",
                      t->db, t->name, server);
  else if (row[1] == NULL || strcmp(row[1], "BASE TABLE") != 0)
    rc = sl_error_set(out_err, SL_ENOTSUP,
                      "mariadb-cdc: `%s`.`%s` at %s is a %s, not a base "
                      "table; only tables are captured",
                      t->db, t->name, server, row[1] ? row[1] : "(null)");
  else if (row[0] == NULL || strcasecmp(row[0], "InnoDB") != 0)
    rc = sl_error_set(out_err, SL_ENOTSUP,
                      "mariadb-cdc: table `%s`.`%s` at %s uses the engine "
                      "%s; the snapshot reads each chunk in a consistent "
                      "snapshot at an exact binlog position, which only "
                      "InnoDB gives (ALTER TABLE `%s`.`%s` ENGINE=InnoDB)",
                      t->db, t->name, server, row[0] ? row[0] : "(none)",
                      t->db, t->name);
  mysql_free_result(res);
  return rc;
}

static int describe_pk(MYSQL *c, const char *server, sl__cdc_table_t *t,
                       sl_bytes_t *sql, sl_error_t **out_err) {
  sl_bytes_clear(sql);
  int rc = sl_bytes_append_str(
      sql, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE "
           "INDEX_NAME = 'PRIMARY' AND TABLE_SCHEMA = ");
  if (rc == SL_OK) rc = append_quoted(c, sql, t->db);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " AND TABLE_NAME = ");
  if (rc == SL_OK) rc = append_quoted(c, sql, t->name);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " ORDER BY SEQ_IN_INDEX");
  if (rc != SL_OK) return rc;
  MYSQL_RES *res = NULL;
  rc = query(c, server, sql, &res, out_err);
  if (rc != SL_OK) return rc;
  uint64_t n = mysql_num_rows(res);
  t->pk = sl_calloc(n ? (size_t)n : 1, sizeof(*t->pk));
  if (t->pk == NULL) {
    mysql_free_result(res);
    return SL_ENOMEM;
  }
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(res)) != NULL) {
    int i = row[0] ? find_col(t, row[0]) : -1;
    if (i < 0) {
      rc = sl_error_set(out_err, SL_EIO,
                        "mariadb-cdc: %s: the primary key of `%s`.`%s` names "
                        "column `%s`, which information_schema.COLUMNS does "
                        "not list",
                        server, t->db, t->name, row[0] ? row[0] : "(null)");
      break;
    }
    t->pk[t->n_pk++] = (uint32_t)i;
  }
  mysql_free_result(res);
  return rc;
}

/* A declared chunk key needs an index that starts with it: planning and
 * every chunk's SELECT range over it. */
static int check_key_index(MYSQL *c, const char *server,
                           const sl__cdc_table_t *t, const char *key,
                           sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = sl_bytes_append_str(
      &sql, "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE "
            "SEQ_IN_INDEX = 1 AND TABLE_SCHEMA = ");
  if (rc == SL_OK) rc = append_quoted(c, &sql, t->db);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " AND TABLE_NAME = ");
  if (rc == SL_OK) rc = append_quoted(c, &sql, t->name);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " AND COLUMN_NAME = ");
  if (rc == SL_OK) rc = append_quoted(c, &sql, key);
  MYSQL_RES *res = NULL;
  if (rc == SL_OK) rc = query(c, server, &sql, &res, out_err);
  sl_bytes_close(&sql);
  if (rc != SL_OK) return rc;
  MYSQL_ROW row = mysql_fetch_row(res);
  bool has = row && row[0] && atol(row[0]) > 0;
  mysql_free_result(res);
  if (!has)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: the chunk key `%s` of `%s`.`%s` at %s "
                        "has no index that starts with it; planning and "
                        "every chunk would scan the whole table (CREATE "
                        "INDEX ... ON `%s`.`%s` (`%s`))",
                        key, t->db, t->name, server, t->db, t->name, key);
  return SL_OK;
}

int sl__cdc_table_describe(MYSQL *c, const char *server, const char *db,
                           const char *table, const char *chunk_key,
                           sl__cdc_table_t **out, sl_error_t **out_err) {
  sl__cdc_table_t *t = sl_calloc(1, sizeof(*t));
  if (t == NULL) return SL_ENOMEM;
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = SL_OK;
  t->db = sl_strdup(db);
  t->name = sl_strdup(table);
  if (t->db == NULL || t->name == NULL) rc = SL_ENOMEM;
  if (rc == SL_OK) rc = describe_engine(c, server, t, &sql, out_err);
  if (rc == SL_OK) rc = describe_columns(c, server, t, &sql, out_err);
  if (rc == SL_OK) rc = describe_pk(c, server, t, &sql, out_err);
  sl_bytes_close(&sql);
  if (rc != SL_OK) goto fail;

  if (chunk_key != NULL) {
    int i = find_col(t, chunk_key);
    if (i < 0) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: the chunk key `%s` of `%s`.`%s` is not "
                        "a column of that table at %s",
                        chunk_key, db, table, server);
      goto fail;
    }
    t->key = sl_calloc(1, sizeof(*t->key));
    if (t->key == NULL) {
      rc = SL_ENOMEM;
      goto fail;
    }
    t->key[0] = (uint32_t)i;
    t->n_key = 1;
    t->is_declared_key = true;
    rc = check_key_index(c, server, t, chunk_key, out_err);
    if (rc != SL_OK) goto fail;
  } else if (t->n_pk > 0) {
    t->key = sl_calloc(t->n_pk, sizeof(*t->key));
    if (t->key == NULL) {
      rc = SL_ENOMEM;
      goto fail;
    }
    memcpy(t->key, t->pk, t->n_pk * sizeof(*t->key));
    t->n_key = t->n_pk;
  } else {
    rc = sl_error_set(out_err, SL_EINVAL,
                      "mariadb-cdc: table `%s`.`%s` at %s has no primary "
                      "key; change data capture needs one (each chunk's "
                      "binlog window is merged, and updates are applied, by "
                      "primary key; a declared chunk_key only chooses how "
                      "the snapshot is cut)",
                      db, table, server);
    goto fail;
  }
  t->key_kind = sl_calloc(t->n_key, 1);
  if (t->key_kind == NULL) {
    rc = SL_ENOMEM;
    goto fail;
  }
  for (uint32_t k = 0; k < t->n_key; k++) {
    const sl__cdc_col_t *col = &t->cols[t->key[k]];
    if (key_kind_of(col, &t->key_kind[k]) != SL_OK) {
      rc = sl_error_set(out_err, SL_ENOTSUP,
                        "mariadb-cdc: column `%s` of `%s`.`%s` at %s has "
                        "type %s, which cannot be a chunk key (a chunk key "
                        "is an integer, char, varchar, binary, varbinary, "
                        "decimal, date, datetime or timestamp column)",
                        col->name, db, table, server, col->column_type);
      goto fail;
    }
  }
  *out = t;
  return SL_OK;
fail:
  sl__cdc_table_destroy(t);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Values.                                                             */

int sl__cdc_session_setup(MYSQL *c, const char *server, sl_error_t **out_err) {
  unsigned e;
  const char *q = "SET SESSION time_zone = '+00:00'";
  if (mysql_set_character_set(c, "utf8mb4") != 0)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SET NAMES utf8mb4 "
                        "failed: error %u: %s", server, mysql_errno(c),
                        mysql_error(c));
  if (sl__mariadb_run(c, q, strlen(q), &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s failed: error "
                        "%u: %s", server, q, e, mysql_error(c));
  return SL_OK;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static bool digits(const char *p, unsigned long len, unsigned long *i,
                   int n, unsigned *out) {
  unsigned v = 0;
  for (int k = 0; k < n; k++, (*i)++) {
    if (*i >= len || p[*i] < '0' || p[*i] > '9') return false;
    v = v * 10 + (unsigned)(p[*i] - '0');
  }
  *out = v;
  return true;
}

static bool lit(const char *p, unsigned long len, unsigned long *i, char ch) {
  if (*i >= len || p[*i] != ch) return false;
  (*i)++;
  return true;
}

/* MariaDB's DATE and DATETIME text: YYYY-MM-DD[ hh:mm:ss[.ffffff]]. */
int sl__cdc_parse_temporal(const char *p, unsigned long len, bool is_date,
                           int64_t *out_us) {
  unsigned long i = 0;
  unsigned y, mo, d, h = 0, mi = 0, s = 0;
  if (!digits(p, len, &i, 4, &y) || !lit(p, len, &i, '-') ||
      !digits(p, len, &i, 2, &mo) || !lit(p, len, &i, '-') ||
      !digits(p, len, &i, 2, &d))
    return SL_EPARSE;
  int64_t frac = 0;
  if (!is_date) {
    if (!lit(p, len, &i, ' ') || !digits(p, len, &i, 2, &h) ||
        !lit(p, len, &i, ':') || !digits(p, len, &i, 2, &mi) ||
        !lit(p, len, &i, ':') || !digits(p, len, &i, 2, &s))
      return SL_EPARSE;
    if (lit(p, len, &i, '.')) {
      int n = 0;
      for (; i < len && p[i] >= '0' && p[i] <= '9' && n < 6; i++, n++)
        frac = frac * 10 + (p[i] - '0');
      if (n == 0) return SL_EPARSE;
      for (; n < 6; n++) frac *= 10;
    }
  }
  if (i != len) return SL_EPARSE;
  if (mo == 0 || d == 0) return SL_EOVERFLOW; /* zero date */
  static const unsigned mdays[] = {31, 29, 31, 30, 31, 30,
                                   31, 31, 30, 31, 30, 31};
  bool is_leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo > 12 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !is_leap) ||
      h > 23 || mi > 59 || s > 59)
    return SL_EPARSE;
  int64_t secs = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 +
                 (int64_t)mi * 60 + s;
  *out_us = secs * 1000000 + frac;
  return SL_OK;
}

/* MariaDB's TIME text: [-]h+:mm:ss[.ffffff] (hours up to 838). */
static int parse_time(const char *p, unsigned long len, int64_t *out_us) {
  unsigned long i = 0;
  bool is_neg = false;
  if (i < len && p[i] == '-') {
    is_neg = true;
    i++;
  }
  int64_t h = 0;
  unsigned long start = i;
  for (; i < len && p[i] >= '0' && p[i] <= '9' && i - start < 4; i++)
    h = h * 10 + (p[i] - '0');
  unsigned m, s;
  if (i == start || !lit(p, len, &i, ':') || !digits(p, len, &i, 2, &m) ||
      !lit(p, len, &i, ':') || !digits(p, len, &i, 2, &s) || m > 59 ||
      s > 59)
    return SL_EPARSE;
  int64_t frac = 0;
  if (lit(p, len, &i, '.')) {
    int n = 0;
    for (; i < len && p[i] >= '0' && p[i] <= '9' && n < 6; i++, n++)
      frac = frac * 10 + (p[i] - '0');
    if (n == 0) return SL_EPARSE;
    for (; n < 6; n++) frac *= 10;
  }
  if (i != len) return SL_EPARSE;
  int64_t us = ((h * 60 + m) * 60 + s) * 1000000 + frac;
  *out_us = is_neg ? -us : us;
  return SL_OK;
}

int sl__cdc_set_field(const sl__cdc_table_t *t, uint32_t ci, const char *p,
                      unsigned long len, sl_row_builder_t *b, uint32_t field,
                      sl_error_t **out_err) {
  const sl__cdc_col_t *col = &t->cols[ci];
  if (p == NULL) {
    sl_row_builder_set_null(b, field);
    return SL_OK;
  }
  int rc;
  switch ((sl__cdc_conv_t)col->conv) {
  case SL_CDC_CONV_INT:
  case SL_CDC_CONV_FLOAT:
  case SL_CDC_CONV_DECIMAL:
    rc = sl_value_parse(p, len, col->type, b, field, out_err);
    break;
  case SL_CDC_CONV_STRING:
  case SL_CDC_CONV_BYTES:
    if (len > UINT32_MAX) {
      rc = sl_error_set(out_err, SL_EOVERFLOW, "a value of %lu bytes", len);
      break;
    }
    rc = sl_row_builder_set_str(b, field, p, (uint32_t)len);
    if (rc != SL_OK) rc = sl_error_set(out_err, rc, "out of memory");
    break;
  case SL_CDC_CONV_BIT: {
    uint64_t v = 0;
    if (len > 8) {
      rc = sl_error_set(out_err, SL_EPARSE, "a bit value of %lu bytes", len);
      break;
    }
    for (unsigned long k = 0; k < len; k++)
      v = (v << 8) | (uint8_t)p[k];
    if (col->type.id == SL_TYPE_BOOL) sl_row_builder_set_bool(b, field, v);
    else sl_row_builder_set_i64(b, field, (int64_t)v);
    rc = SL_OK;
    break;
  }
  case SL_CDC_CONV_TIME: {
    int64_t us = 0;
    rc = parse_time(p, len, &us);
    if (rc == SL_OK)
      sl_row_builder_set_i64(b, field, us);
    else
      rc = sl_error_set(out_err, SL_EPARSE, "'%.*s' is not a time value",
                        len > 64 ? 64 : (int)len, p);
    break;
  }
  case SL_CDC_CONV_DATE:
  case SL_CDC_CONV_DATETIME: {
    int64_t us = 0;
    rc = sl__cdc_parse_temporal(p, len, col->conv == SL_CDC_CONV_DATE, &us);
    int n = len > 64 ? 64 : (int)len;
    if (rc == SL_OK)
      sl_row_builder_set_i64(b, field, us);
    else if (rc == SL_EOVERFLOW)
      rc = sl_error_set(out_err, SL_EPARSE,
                        "'%.*s' (a zero date or a date with a zero month "
                        "or day) has no timestamp value",
                        n, p);
    else
      rc = sl_error_set(out_err, SL_EPARSE, "'%.*s' is not a %s value", n, p,
                        col->data_type);
    break;
  }
  default:
    rc = sl_error_set(out_err, SL_EINVAL, "unknown conversion %u", col->conv);
  }
  if (rc != SL_OK && out_err && *out_err)
    sl_error_prefix(*out_err, "mariadb-cdc: column `%s` of `%s`.`%s`",
                    col->name, t->db, t->name);
  return rc;
}
