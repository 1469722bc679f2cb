/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB sink's statements and connections: quoting of identifiers
 * and binary literals, running a statement or a one-value query through
 * Connector/C, and connecting with the sink's settings (charset, UTC, strict
 * mode, READ COMMITTED), with errors that name the host, the user or the
 * database and, for a failed connect, the OS error.  See mariadb_int.h.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <errmsg.h>
#include <mysqld_error.h>

#include "mariadb_int.h"

int sl__mariadb_ident(sl_bytes_t *b, const char *name) {
  int rc = sl_bytes_append(b, "`", 1);
  for (const char *p = name; rc == SL_OK && *p; p++)
    rc = *p == '`' ? sl_bytes_append(b, "``", 2) : sl_bytes_append(b, p, 1);
  return rc == SL_OK ? sl_bytes_append(b, "`", 1) : rc;
}

int sl__mariadb_hex(sl_bytes_t *b, const void *p, size_t n) {
  static const char hx[] = "0123456789abcdef";
  const uint8_t *u = p;
  if (n == 0) return sl_bytes_append(b, "''", 2);
  int rc = sl_bytes_append(b, "X'", 2);
  for (size_t i = 0; rc == SL_OK && i < n; i++) {
    char two[2] = {hx[u[i] >> 4], hx[u[i] & 15]};
    rc = sl_bytes_append(b, two, 2);
  }
  return rc == SL_OK ? sl_bytes_append(b, "'", 1) : rc;
}

/* A NUL-terminated view of the buffer (one spare byte). */
const char *sl__mariadb_cstr(sl_bytes_t *b) {
  if (sl_bytes_reserve(b, 1) != SL_OK) return NULL;
  b->data[b->len] = '\0';
  return (const char *)b->data;
}

/*
 * The OS error behind a failed connect.  Connector/C connects without
 * blocking and reports errno EINPROGRESS (115) for a refused connection,
 * so the sink connects once more by itself, bounded by timeout_ms, and
 * returns what the OS says (NULL when that connection works or the name
 * does not resolve).
 */
static const char *probe_os_error(const char *host, int port,
                                  uint32_t timeout_ms, char *buf,
                                  size_t size) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  char ps[16];
  snprintf(ps, sizeof(ps), "%d", port);
  int g = getaddrinfo(host, ps, &hints, &res);
  if (g != 0) {
    snprintf(buf, size, "%s", gai_strerror(g));
    return buf;
  }
  int err = 0;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  0);
  if (fd < 0) err = errno;
  else if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      int n = poll(&p, 1, (int)timeout_ms);
      socklen_t l = sizeof(err);
      if (n == 0) err = ETIMEDOUT;
      else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
        err = errno;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  if (err == 0) return NULL;
  snprintf(buf, size, "%s", strerror(err));
  return buf;
}

bool sl__mariadb_is_conn_error(unsigned e) {
  return e == CR_SERVER_GONE_ERROR || e == CR_SERVER_LOST ||
         e == CR_CONNECTION_ERROR || e == CR_CONN_HOST_ERROR ||
         e == ER_CONNECTION_KILLED || e == ER_SERVER_SHUTDOWN ||
         e == CR_COMMANDS_OUT_OF_SYNC;
}

/* Run one statement and discard any result. */
int sl__mariadb_run(MYSQL *c, const char *sql, size_t len,
                    unsigned *out_errno) {
  *out_errno = 0;
  if (mysql_real_query(c, sql, (unsigned long)len) != 0) {
    *out_errno = mysql_errno(c);
    return SL_EIO;
  }
  do {
    MYSQL_RES *r = mysql_store_result(c);
    if (r != NULL) mysql_free_result(r);
    else if (mysql_field_count(c) != 0) {
      *out_errno = mysql_errno(c);
      return SL_EIO;
    }
  } while (mysql_next_result(c) == 0);
  if (mysql_errno(c) != 0) {
    *out_errno = mysql_errno(c);
    return SL_EIO;
  }
  return SL_OK;
}

/* First column of the first row of a query as text (NULL when no row or
 * NULL), into buf. */
int sl__mariadb_query_text(MYSQL *c, const char *sql, char *buf, size_t size,
                           bool *out_found, unsigned *out_errno) {
  *out_found = false;
  *out_errno = 0;
  if (mysql_query(c, sql) != 0) {
    *out_errno = mysql_errno(c);
    return SL_EIO;
  }
  MYSQL_RES *r = mysql_store_result(c);
  if (r == NULL) {
    *out_errno = mysql_errno(c);
    return *out_errno != 0 ? SL_EIO : SL_OK;
  }
  MYSQL_ROW row = mysql_fetch_row(r);
  if (row != NULL && row[0] != NULL) {
    snprintf(buf, size, "%s", row[0]);
    *out_found = true;
  }
  mysql_free_result(r);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Connections. */

int sl__mariadb_connect(const msink_t *s, const char *pfx, MYSQL **out,
                        sl_error_t **out_err) {
  MYSQL *c = mysql_init(NULL);
  if (c == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  unsigned to = (s->connect_timeout_ms + 999u) / 1000u;
  if (to == 0) to = 1;
  mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &to);
  mysql_options(c, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  /* READ COMMITTED: the sink only writes (blind upserts and deletes by
   * key), and under REPEATABLE READ the gap locks of one subtask's
   * prepared branch block another subtask's inserts until the checkpoint
   * completes, which waits for that other subtask: a lock wait timeout. */
  mysql_options(c, MYSQL_INIT_COMMAND,
                "SET SESSION time_zone = '+00:00', "
                "sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')");
  mysql_options(c, MYSQL_INIT_COMMAND,
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  if (mysql_real_connect(c, s->host, s->user, s->password, s->database,
                         (unsigned)s->port, NULL, 0) == NULL) {
    unsigned e = mysql_errno(c);
    const char *m = mysql_error(c);
    int rc;
    if ((e == ER_ACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR) &&
        s->database == NULL) /* the CDC source connects without one */
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: access denied for user '%s' at %s:%d (wrong "
                        "user or password): %s",
                        pfx, s->user, s->host, s->port, m);
    else if (e == ER_ACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR)
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: access denied for user '%s' at %s:%d (wrong "
                        "user or password, or no grant on database '%s'): "
                        "%s",
                        pfx, s->user, s->host, s->port, s->database, m);
    else if (e == ER_BAD_DB_ERROR)
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: database '%s' does not exist at %s:%d", pfx,
                        s->database, s->host, s->port);
    else {
      char osb[128];
      const char *os = NULL;
      if (e == CR_CONNECTION_ERROR || e == CR_CONN_HOST_ERROR ||
          e == CR_UNKNOWN_HOST)
        os = probe_os_error(s->host, s->port, s->connect_timeout_ms, osb,
                            sizeof(osb));
      if (os != NULL)
        rc = sl_error_set(out_err, SL_EIO,
                          "%s: cannot connect to %s:%d: %s (error %u: %s)",
                          pfx, s->host, s->port, os, e, m);
      else
        rc = sl_error_set(out_err, SL_EIO,
                          "%s: cannot connect to %s:%d (error %u: %s)", pfx,
                          s->host, s->port, e, m);
    }
    mysql_close(c);
    return rc;
  }
  *out = c;
  return SL_OK;
}
