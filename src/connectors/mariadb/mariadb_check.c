/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB sink's start checks, run when a committer or a writer opens
 * and by sl_mariadb_sink_check (sluice validate --connect): the server
 * version and XA RECOVER, binlog_format, the target table, its engine and
 * its column types against the sink's rows, the epoch column of
 * at-least-once; and the creation of the commit-log table.  Every error
 * names the sink, host:port, table and column.  See mariadb_int.h and
 * docs/connectors.md (start checks, type mapping).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mariadb_int.h"

typedef struct colinfo_s {
  char data_type[32];
  char column_type[96];
  long precision, scale, dt_precision;
} colinfo_t;

static bool type_fits(sl_type_t t, const colinfo_t *ci, char *need,
                      size_t need_size) {
  const char *d = ci->data_type;
  bool is_unsigned = strstr(ci->column_type, "unsigned") != NULL;
  switch ((sl_type_id_t)t.id) {
  case SL_TYPE_BOOL:
    snprintf(need, need_size, "an integer type (tinyint(1))");
    return !strcmp(d, "tinyint") || !strcmp(d, "smallint") ||
           !strcmp(d, "mediumint") || !strcmp(d, "int") ||
           !strcmp(d, "bigint");
  case SL_TYPE_INT32:
    snprintf(need, need_size, "int or bigint (signed)");
    return !is_unsigned && (!strcmp(d, "int") || !strcmp(d, "bigint"));
  case SL_TYPE_INT64:
    snprintf(need, need_size, "bigint (signed)");
    return !is_unsigned && !strcmp(d, "bigint");
  case SL_TYPE_FLOAT64:
    snprintf(need, need_size, "double");
    return !strcmp(d, "double");
  case SL_TYPE_DECIMAL:
    snprintf(need, need_size, "decimal(P,%u) with P-%u >= %u", t.scale,
             t.scale, (unsigned)(t.precision - t.scale));
    return !strcmp(d, "decimal") && ci->scale == t.scale &&
           ci->precision - ci->scale >= (long)t.precision - t.scale;
  case SL_TYPE_STRING:
    snprintf(need, need_size, "char, varchar or a text type");
    return !strcmp(d, "char") || !strcmp(d, "varchar") ||
           !strcmp(d, "tinytext") || !strcmp(d, "text") ||
           !strcmp(d, "mediumtext") || !strcmp(d, "longtext");
  case SL_TYPE_BYTES:
    snprintf(need, need_size, "binary, varbinary or a blob type");
    return !strcmp(d, "binary") || !strcmp(d, "varbinary") ||
           !strcmp(d, "tinyblob") || !strcmp(d, "blob") ||
           !strcmp(d, "mediumblob") || !strcmp(d, "longblob");
  case SL_TYPE_TIMESTAMP:
    snprintf(need, need_size, "datetime(6) or timestamp(6)");
    return (!strcmp(d, "datetime") || !strcmp(d, "timestamp")) &&
           ci->dt_precision == 6;
  }
  snprintf(need, need_size, "a supported type");
  return false;
}

/* The sink's sessions write in READ COMMITTED, which cannot be logged as
 * statements. */
static int check_binlog(MYSQL *c, const msink_t *s, const char *pfx,
                        sl_error_t **out_err) {
  char v[64];
  bool found;
  unsigned e;
  if (sl__mariadb_query_text(c,
                             "SELECT IF(@@log_bin = 1, @@binlog_format, "
                             "'OFF')",
                             v, sizeof(v), &found, &e) == SL_OK &&
      found && strcmp(v, "STATEMENT") == 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: %s:%d logs the binlog as statements "
                        "(binlog_format=STATEMENT); the sink writes in READ "
                        "COMMITTED transactions, which need binlog_format="
                        "ROW or MIXED",
                        pfx, s->host, s->port);
  return SL_OK;
}

int sl__mariadb_check_server_xa(MYSQL *c, const msink_t *s, const char *pfx,
                                sl_error_t **out_err) {
  char v[128];
  bool found;
  unsigned e;
  if (sl__mariadb_query_text(c, "SELECT VERSION()", v, sizeof(v), &found,
                             &e) != SL_OK ||
      !found)
    return sl_error_set(out_err, SL_EIO, "%s: SELECT VERSION() failed: %s",
                        pfx, mysql_error(c));
  unsigned a = 0, b = 0, d = 0;
  if (sscanf(v, "%u.%u.%u", &a, &b, &d) == 3) {
    bool is_maria = strstr(v, "MariaDB") != NULL;
    unsigned long n = a * 10000ul + b * 100ul + d;
    if (is_maria && n < 100502ul)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: %s:%d runs MariaDB %s; exactly-once needs "
                          "10.5.2 or later (older servers roll back "
                          "prepared XA transactions on disconnect)",
                          pfx, s->host, s->port, v);
    if (!is_maria && n < 50707ul)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: %s:%d runs MySQL %s; exactly-once needs "
                          "5.7.7 or later",
                          pfx, s->host, s->port, v);
  }
  if (sl__mariadb_run(c, "XA RECOVER", 10, &e) != SL_OK)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: user '%s' cannot run XA RECOVER at %s:%d "
                        "(error %u: %s); exactly-once needs it (MySQL 8: "
                        "GRANT XA_RECOVER_ADMIN)",
                        pfx, s->user, s->host, s->port, e, mysql_error(c));
  return SL_OK;
}

int sl__mariadb_check_table(MYSQL *c, const msink_t *s,
                            const sl_schema_t *schema, const char *pfx,
                            sl_error_t **out_err) {
  int rc = check_binlog(c, s, pfx, out_err);
  if (rc != SL_OK) return rc;
  sl_bytes_t q;
  sl_bytes_init(&q);
  rc = sl_bytes_append_str(&q, "SELECT ENGINE FROM information_schema."
                                   "TABLES WHERE TABLE_SCHEMA = DATABASE() "
                                   "AND TABLE_NAME = ");
  if (rc == SL_OK) rc = sl__mariadb_hex(&q, s->table, strlen(s->table));
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  char engine[64];
  bool found;
  unsigned e;
  rc = sl__mariadb_query_text(c, sql, engine, sizeof(engine), &found, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EIO, "%s: reading the tables of %s "
                        "failed: error %u: %s", pfx, s->database, e,
                        mysql_error(c));
  if (!found)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: table %s.%s does not exist at %s:%d", pfx,
                        s->database, s->table, s->host, s->port);
  if (is_eo(s) && strcmp(engine, "InnoDB") != 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: table %s.%s uses the %s engine; exactly-once "
                        "needs InnoDB (XA transactions)",
                        pfx, s->database, s->table, engine);
  uint32_t n = schema != NULL ? sl_schema_n_fields(schema) : 0;
  bool need_epoch = !is_eo(s);
  for (uint32_t i = 0; i < n + (need_epoch ? 1u : 0u); i++) {
    const char *name = i < n ? sl_schema_field(schema, i)->name
                             : s->epoch_column;
    sl_bytes_init(&q);
    rc = sl_bytes_append_str(&q,
                             "SELECT DATA_TYPE, COLUMN_TYPE, "
                             "IFNULL(NUMERIC_PRECISION, -1), "
                             "IFNULL(NUMERIC_SCALE, -1), "
                             "IFNULL(DATETIME_PRECISION, -1) FROM "
                             "information_schema.COLUMNS WHERE TABLE_SCHEMA"
                             " = DATABASE() AND TABLE_NAME = ");
    if (rc == SL_OK) rc = sl__mariadb_hex(&q, s->table, strlen(s->table));
    if (rc == SL_OK) rc = sl_bytes_append_str(&q, " AND COLUMN_NAME = ");
    if (rc == SL_OK) rc = sl__mariadb_hex(&q, name, strlen(name));
    sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
    if (sql == NULL) {
      sl_bytes_close(&q);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    if (mysql_query(c, sql) != 0) {
      sl_bytes_close(&q);
      return sl_error_set(out_err, SL_EIO, "%s: reading the columns of "
                          "%s.%s failed: %s", pfx, s->database, s->table,
                          mysql_error(c));
    }
    sl_bytes_close(&q);
    MYSQL_RES *r = mysql_store_result(c);
    MYSQL_ROW row = r != NULL ? mysql_fetch_row(r) : NULL;
    colinfo_t ci;
    memset(&ci, 0, sizeof(ci));
    if (row != NULL) {
      snprintf(ci.data_type, sizeof(ci.data_type), "%s", row[0]);
      snprintf(ci.column_type, sizeof(ci.column_type), "%s", row[1]);
      ci.precision = strtol(row[2], NULL, 10);
      ci.scale = strtol(row[3], NULL, 10);
      ci.dt_precision = strtol(row[4], NULL, 10);
    }
    if (r != NULL) mysql_free_result(r);
    if (row == NULL) {
      if (i >= n)
        return sl_error_set(out_err, SL_EINVAL,
                            "%s: table %s.%s has no column `%s`; delivery "
                            "at-least-once needs it (BIGINT NOT NULL: the "
                            "epoch that keeps a row from going back)",
                            pfx, s->database, s->table, name);
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: table %s.%s has no column `%s` (a field of "
                          "the sink's rows)",
                          pfx, s->database, s->table, name);
    }
    char need[96];
    sl_type_t t;
    if (i < n) t = sl_schema_field(schema, i)->type;
    else {
      memset(&t, 0, sizeof(t));
      t.id = SL_TYPE_INT64;
    }
    if (!type_fits(t, &ci, need, sizeof(need))) {
      char tb[48];
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: column `%s` of table %s.%s is %s, but the "
                          "sink writes %s there (needs %s)",
                          pfx, name, s->database, s->table, ci.column_type,
                          i < n ? sl_type_format(t, tb, sizeof(tb))
                                : "the epoch (int64)",
                          need);
    }
  }
  return SL_OK;
}

int sl__mariadb_create_commit_table(MYSQL *c, const msink_t *s, const char *pfx,
                                    sl_error_t **out_err) {
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "CREATE TABLE IF NOT EXISTS ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->commit_table);
  if (rc == SL_OK)
    rc = sl_bytes_append_str(
        &q, " (job VARBINARY(64) NOT NULL, sink_uid VARBINARY(64) NOT NULL,"
            " subtask INT UNSIGNED NOT NULL, epoch BIGINT UNSIGNED NOT NULL,"
            " checkpoint_id BIGINT UNSIGNED NOT NULL, prepared_at "
            "DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY"
            " (job, sink_uid, subtask, epoch)) ENGINE=InnoDB");
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  unsigned e;
  rc = sl__mariadb_run(c, sql, q.len, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: cannot create the commit-log table %s.%s "
                        "(error %u: %s); grant CREATE on %s or create it "
                        "as docs/connectors.md shows",
                        pfx, s->database, s->commit_table, e, mysql_error(c),
                        s->database);
  return sl__mariadb_check_innodb(c, s, s->commit_table,
                                  "the commit-log table", pfx, out_err);
}

/* A marker in a table that is not transactional would outlive a rolled
 * back branch (a false "already committed"), and a fence row's locks
 * would not hold: both tables must be InnoDB. */
int sl__mariadb_check_innodb(MYSQL *c, const msink_t *s, const char *table,
                             const char *what, const char *pfx,
                             sl_error_t **out_err) {
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "SELECT ENGINE FROM information_schema."
                                   "TABLES WHERE TABLE_SCHEMA = DATABASE() "
                                   "AND TABLE_NAME = ");
  if (rc == SL_OK) rc = sl__mariadb_hex(&q, table, strlen(table));
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  char engine[64];
  bool found;
  unsigned e;
  rc = sl__mariadb_query_text(c, sql, engine, sizeof(engine), &found, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EIO, "%s: reading the tables of %s "
                        "failed: error %u: %s", pfx, s->database, e,
                        mysql_error(c));
  if (found && strcmp(engine, "InnoDB") != 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: %s %s.%s uses the %s engine; exactly-once "
                        "needs InnoDB (its rows must commit and lock with "
                        "the XA branches)",
                        pfx, what, s->database, table, engine);
  return SL_OK;
}
