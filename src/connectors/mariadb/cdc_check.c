/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDC source's start checks (binary log, its format and row image,
 * GTIDs, privileges, SELECT per table) and the table patterns.  Every
 * message names the server (host:port) and the setting or privilege, and
 * says how to fix it.  See cdc_int.h and docs/cdc-mariadb.md, "Start
 * checks".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdc_int.h"
#include "mariadb_int.h"

int sl__cdc_connect(const char *host, int port, const char *user,
                    const char *password, uint32_t connect_timeout_ms,
                    MYSQL **out, sl_error_t **out_err) {
  /* The sink's connect, with the source's settings (a sink object on the
   * stack: only these fields are read). */
  msink_t s;
  memset(&s, 0, sizeof(s));
  s.host = (char *)host;
  s.user = (char *)user;
  s.password = (char *)password;
  s.port = port;
  s.connect_timeout_ms = connect_timeout_ms ? connect_timeout_ms : 10000;
  return sl__mariadb_connect(&s, "mariadb-cdc", out, out_err);
}

static int var_text(MYSQL *c, const char *server, const char *sql, char *buf,
                    size_t size, sl_error_t **out_err) {
  bool found;
  unsigned e;
  if (sl__mariadb_query_text(c, sql, buf, size, &found, &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s failed: error "
                        "%u: %s", server, sql, e, mysql_error(c));
  if (!found) buf[0] = '\0';
  return SL_OK;
}

static bool ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
      return false;
  return *a == *b;
}

/* Whether SHOW GRANTS gives `priv` on *.* (directly, through ALL
 * PRIVILEGES, or through a role the session has enabled). */
static int has_global_priv(MYSQL *c, const char *server, const char *priv,
                           bool *out, sl_error_t **out_err) {
  *out = false;
  if (mysql_query(c, "SHOW GRANTS") != 0)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SHOW GRANTS "
                        "failed: error %u: %s", server, mysql_errno(c),
                        mysql_error(c));
  MYSQL_RES *r = mysql_store_result(c);
  if (r == NULL)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SHOW GRANTS "
                        "failed: error %u: %s", server, mysql_errno(c),
                        mysql_error(c));
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL) {
    const char *g = row[0];
    if (g == NULL || strncmp(g, "GRANT ", 6) != 0) continue;
    const char *on = strstr(g, " ON *.* ");
    if (on == NULL) continue;
    size_t n = (size_t)(on - (g + 6));
    char privs[1024];
    if (n >= sizeof(privs)) n = sizeof(privs) - 1;
    memcpy(privs, g + 6, n);
    privs[n] = '\0';
    /* The list is "A, B, C" (upper case); match whole entries. */
    char *save = NULL;
    for (char *tok = strtok_r(privs, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
      while (*tok == ' ') tok++;
      if (ieq(tok, priv) || ieq(tok, "ALL PRIVILEGES") || ieq(tok, "ALL"))
        *out = true;
    }
  }
  mysql_free_result(r);
  return SL_OK;
}

int sl__cdc_check_server(MYSQL *c, const char *server, const char *user,
                         sl_error_t **out_err) {
  char v[SL_CDC_GTID_MAX];
  int rc = var_text(c, server, "SELECT @@global.log_bin", v, sizeof(v),
                    out_err);
  if (rc != SL_OK) return rc;
  if (strcmp(v, "1") != 0 && !ieq(v, "ON"))
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: %s has the binary log off "
                        "(log_bin=OFF); change data capture reads the binary "
                        "log: start the server with --log-bin",
                        server);
  rc = var_text(c, server, "SELECT @@global.binlog_format", v, sizeof(v),
                out_err);
  if (rc != SL_OK) return rc;
  if (!ieq(v, "ROW"))
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: %s logs binlog_format=%s; change data "
                        "capture needs binlog_format=ROW (SET GLOBAL "
                        "binlog_format=ROW and in the server's configuration)",
                        server, v);
  rc = var_text(c, server, "SELECT @@global.binlog_row_image", v, sizeof(v),
                out_err);
  if (rc != SL_OK) return rc;
  if (!ieq(v, "FULL"))
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: %s logs binlog_row_image=%s; change "
                        "data capture needs binlog_row_image=FULL (whole "
                        "before and after images; SET GLOBAL "
                        "binlog_row_image=FULL and in the server's "
                        "configuration)",
                        server, v);
  bool found;
  unsigned e;
  if (sl__mariadb_query_text(c, "SELECT @@gtid_binlog_pos", v, sizeof(v),
                             &found, &e) != SL_OK)
    return sl_error_set(out_err, SL_ENOTSUP,
                        "mariadb-cdc: %s cannot read @@gtid_binlog_pos "
                        "(error %u: %s); sluice needs MariaDB GTIDs "
                        "(MariaDB 10.0 or later)",
                        server, e, mysql_error(c));
  bool has;
  rc = has_global_priv(c, server, "REPLICATION SLAVE", &has, out_err);
  if (rc != SL_OK) return rc;
  if (!has)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: user '%s' lacks the privilege "
                        "REPLICATION SLAVE at %s (SHOW GRANTS lists none on "
                        "*.*); change data capture reads the binary log as a "
                        "replica: GRANT REPLICATION SLAVE ON *.* TO the user",
                        user, server);
  if (sl__mariadb_run(c, "SHOW MASTER STATUS", 18, &e) != SL_OK)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: user '%s' cannot run SHOW MASTER "
                        "STATUS at %s (error %u: %s); change data capture "
                        "reads binlog positions with it: GRANT REPLICATION "
                        "CLIENT (BINLOG MONITOR from MariaDB 10.5) ON *.* TO "
                        "the user",
                        user, server, e, mysql_error(c));
  return SL_OK;
}

int sl__cdc_check_select(MYSQL *c, const char *server, const char *user,
                         const char *db, const char *table,
                         sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = sl_bytes_append_str(&sql, "SELECT 1 FROM ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&sql, db);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, ".");
  if (rc == SL_OK) rc = sl__mariadb_ident(&sql, table);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " LIMIT 0");
  const char *q = rc == SL_OK ? sl__mariadb_cstr(&sql) : NULL;
  if (q == NULL) {
    sl_bytes_close(&sql);
    return SL_ENOMEM;
  }
  unsigned e;
  if (sl__mariadb_run(c, q, sql.len, &e) != SL_OK)
    rc = sl_error_set(out_err, e == 1142 || e == 1044 ? SL_EINVAL : SL_EIO,
                      "mariadb-cdc: user '%s' cannot SELECT from `%s`.`%s` "
                      "at %s (error %u: %s); the snapshot reads the table: "
                      "GRANT SELECT ON `%s`.`%s` TO the user",
                      user, db, table, server, e, mysql_error(c), db, table);
  sl_bytes_close(&sql);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Table patterns.                                                     */

/* A glob part (`*`, `?`) as a quoted LIKE pattern with '\' escapes. */
static int like_of(sl_bytes_t *b, const char *s, size_t n) {
  int rc = sl_bytes_append(b, "'", 1);
  for (size_t i = 0; rc == SL_OK && i < n; i++) {
    char ch = s[i];
    if (ch == '*') rc = sl_bytes_append(b, "%", 1);
    else if (ch == '?') rc = sl_bytes_append(b, "_", 1);
    else if (ch == '%' || ch == '_') {
      char e[3] = {'\\', '\\', ch};
      rc = sl_bytes_append(b, e, 3);
    } else if (ch == '\\') rc = sl_bytes_append(b, "\\\\\\\\", 4);
    else if (ch == '\'') rc = sl_bytes_append(b, "''", 2);
    else rc = sl_bytes_append(b, &ch, 1);
  }
  if (rc == SL_OK) rc = sl_bytes_append(b, "'", 1);
  return rc;
}

void sl__cdc_table_names_free(sl__cdc_table_name_t *names, uint32_t n) {
  if (names == NULL) return;
  for (uint32_t i = 0; i < n; i++) {
    sl_free(names[i].db);
    sl_free(names[i].table);
  }
  sl_free(names);
}

static int name_cmp(const void *a, const void *b) {
  const sl__cdc_table_name_t *x = a, *y = b;
  int c = strcmp(x->db, y->db);
  return c ? c : strcmp(x->table, y->table);
}

int sl__cdc_resolve_tables(MYSQL *c, const char *server,
                           const char *const *patterns, uint32_t n_patterns,
                           sl__cdc_table_name_t **out_names, uint32_t *out_n,
                           sl_error_t **out_err) {
  sl__cdc_table_name_t *names = NULL;
  uint32_t n = 0, cap = 0;
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = SL_OK;
  if (n_patterns == 0)
    rc = sl_error_set(out_err, SL_EINVAL,
                      "mariadb-cdc: no tables given for %s", server);
  for (uint32_t k = 0; rc == SL_OK && k < n_patterns; k++) {
    const char *pat = patterns[k];
    const char *dot = pat ? strchr(pat, '.') : NULL;
    if (dot == NULL || dot == pat || dot[1] == '\0' || strchr(dot + 1, '.')) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "mariadb-cdc: table pattern '%s' is not "
                        "<database>.<table> (one dot; `*` and `?` match "
                        "within a part, e.g. shop.* or shop.order_?)",
                        pat ? pat : "(null)");
      break;
    }
    sl_bytes_clear(&sql);
    rc = sl_bytes_append_str(
        &sql, "SELECT TABLE_SCHEMA, TABLE_NAME FROM "
              "information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
              "AND TABLE_SCHEMA LIKE ");
    if (rc == SL_OK) rc = like_of(&sql, pat, (size_t)(dot - pat));
    if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " AND TABLE_NAME LIKE ");
    if (rc == SL_OK) rc = like_of(&sql, dot + 1, strlen(dot + 1));
    const char *q = rc == SL_OK ? sl__mariadb_cstr(&sql) : NULL;
    if (q == NULL) {
      rc = SL_ENOMEM;
      break;
    }
    MYSQL_RES *r = NULL;
    if (mysql_real_query(c, q, (unsigned long)sql.len) != 0 ||
        (r = mysql_store_result(c)) == NULL) {
      rc = sl_error_set(out_err, SL_EIO,
                        "mariadb-cdc: %s: listing tables for '%s' failed: "
                        "error %u: %s", server, pat, mysql_errno(c),
                        mysql_error(c));
      break;
    }
    uint32_t before = n;
    MYSQL_ROW row;
    while (rc == SL_OK && (row = mysql_fetch_row(r)) != NULL) {
      if (n == cap) {
        uint32_t nc = cap ? cap * 2 : 8;
        void *p = sl_realloc(names, nc * sizeof(*names));
        if (p == NULL) {
          rc = SL_ENOMEM;
          break;
        }
        names = p;
        cap = nc;
      }
      names[n].db = sl_strdup(row[0] ? row[0] : "");
      names[n].table = sl_strdup(row[1] ? row[1] : "");
      n++;
      if (names[n - 1].db == NULL || names[n - 1].table == NULL)
        rc = SL_ENOMEM;
    }
    mysql_free_result(r);
    if (rc == SL_OK && n == before)
      rc = sl_error_set(out_err, SL_ENOTFOUND,
                        "mariadb-cdc: table pattern '%s' matches no base "
                        "table at %s (or the user cannot see it)",
                        pat, server);
  }
  sl_bytes_close(&sql);
  if (rc != SL_OK) {
    sl__cdc_table_names_free(names, n);
    return rc;
  }
  qsort(names, n, sizeof(*names), name_cmp);
  uint32_t w = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (w > 0 && name_cmp(&names[w - 1], &names[i]) == 0) {
      sl_free(names[i].db);
      sl_free(names[i].table);
      continue;
    }
    names[w++] = names[i];
  }
  *out_names = names;
  *out_n = w;
  return SL_OK;
}
