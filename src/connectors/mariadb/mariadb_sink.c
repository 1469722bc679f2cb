/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB sink, through Connector/C.  Exactly-once: every epoch of a
 * sink subtask is one XA branch, started at the epoch's first row with an
 * xid derived from (job, sink uid, subtask, epoch id) and the connection
 * id; prepare writes a marker row into the commit-log table inside the
 * branch, ends and prepares it, and closes the connection (MariaDB refuses
 * XA COMMIT from another connection with 1397 while the preparing one
 * lives); the committer commits from its own connection and resolves 1397
 * through the marker (present: already committed), XA RECOVER (listed: a
 * live holder, killed, then committed) or fails loudly (lost).  recover()
 * rolls back lingering branches of the owned subtasks and kills writers
 * of older attempts, found by the per-subtask writer lock (GET_LOCK) every
 * writer connection holds.  At-least-once: batched upserts committed at
 * every flush, guarded by an epoch column that never goes back.  See
 * src/connectors/README.md and docs/connectors.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include "sluice/sluice.h"

#define MAX_STMT_BYTES (1024u * 1024u)
#define XID_PART_MAX 64u
#define LOCK_WAIT_S 10

typedef struct msink_s {
  char *host, *user, *password, *database, *table, *commit_table,
      *epoch_column;
  char **key;
  uint32_t n_key;
  int port;
  sl_mariadb_mode_t mode;
  sl_delivery_t delivery;
  uint32_t batch_rows;
  uint32_t connect_timeout_ms;
  /* The newest epoch committed per origin subtask (committers write it,
   * writers read it), under mu. */
  pthread_mutex_t mu;
  uint64_t *committed;
  uint32_t n_committed;
} msink_t;

/* Record that the epoch of origin subtask `subtask` is committed. */
static void mark_committed(msink_t *s, uint32_t subtask, uint64_t epoch) {
  pthread_mutex_lock(&s->mu);
  if (subtask >= s->n_committed) {
    uint32_t n = subtask + 1u;
    uint64_t *p = sl_realloc(s->committed, n * sizeof(uint64_t));
    if (p != NULL) {
      memset(p + s->n_committed, 0,
             (n - s->n_committed) * sizeof(uint64_t));
      s->committed = p;
      s->n_committed = n;
    }
  }
  if (subtask < s->n_committed && s->committed[subtask] < epoch)
    s->committed[subtask] = epoch;
  pthread_mutex_unlock(&s->mu);
}

static bool is_committed(msink_t *s, uint32_t subtask, uint64_t epoch) {
  pthread_mutex_lock(&s->mu);
  bool yes = subtask < s->n_committed && s->committed[subtask] >= epoch;
  pthread_mutex_unlock(&s->mu);
  return yes;
}

/* ------------------------------------------------------------------ */
/* Small helpers. */

static bool is_eo(const msink_t *s) {
  return s->delivery == SL_DELIVERY_EXACTLY_ONCE;
}

static int append_ident(sl_bytes_t *b, const char *name) {
  int rc = sl_bytes_append(b, "`", 1);
  for (const char *p = name; rc == SL_OK && *p; p++)
    rc = *p == '`' ? sl_bytes_append(b, "``", 2) : sl_bytes_append(b, p, 1);
  return rc == SL_OK ? sl_bytes_append(b, "`", 1) : rc;
}

static int append_hex(sl_bytes_t *b, const void *p, size_t n) {
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
static const char *bytes_cstr(sl_bytes_t *b) {
  if (sl_bytes_reserve(b, 1) != SL_OK) return NULL;
  b->data[b->len] = '\0';
  return (const char *)b->data;
}

static uint64_t fnv64(const void *p, size_t n, uint64_t h) {
  const uint8_t *u = p;
  for (size_t i = 0; i < n; i++) h = (h ^ u[i]) * 0x100000001b3ull;
  return h;
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

static bool is_conn_error(unsigned e) {
  return e == CR_SERVER_GONE_ERROR || e == CR_SERVER_LOST ||
         e == CR_CONNECTION_ERROR || e == CR_CONN_HOST_ERROR ||
         e == ER_CONNECTION_KILLED || e == ER_SERVER_SHUTDOWN ||
         e == CR_COMMANDS_OUT_OF_SYNC;
}

/* Run one statement and discard any result. */
static int run(MYSQL *c, const char *sql, size_t len, unsigned *out_errno) {
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
static int query_text(MYSQL *c, const char *sql, char *buf, size_t size,
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

static int my_connect(const msink_t *s, const char *pfx, MYSQL **out,
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
    if (e == ER_ACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR)
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

/* ------------------------------------------------------------------ */
/* Start checks. */

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
  if (query_text(c, "SELECT IF(@@log_bin = 1, @@binlog_format, 'OFF')", v,
                 sizeof(v), &found, &e) == SL_OK &&
      found && strcmp(v, "STATEMENT") == 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: %s:%d logs the binlog as statements "
                        "(binlog_format=STATEMENT); the sink writes in READ "
                        "COMMITTED transactions, which need binlog_format="
                        "ROW or MIXED",
                        pfx, s->host, s->port);
  return SL_OK;
}

static int check_server_xa(MYSQL *c, const msink_t *s, const char *pfx,
                           sl_error_t **out_err) {
  char v[128];
  bool found;
  unsigned e;
  if (query_text(c, "SELECT VERSION()", v, sizeof(v), &found, &e) != SL_OK ||
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
  if (run(c, "XA RECOVER", 10, &e) != SL_OK)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: user '%s' cannot run XA RECOVER at %s:%d "
                        "(error %u: %s); exactly-once needs it (MySQL 8: "
                        "GRANT XA_RECOVER_ADMIN)",
                        pfx, s->user, s->host, s->port, e, mysql_error(c));
  return SL_OK;
}

static int check_table(MYSQL *c, const msink_t *s, const sl_schema_t *schema,
                       const char *pfx, sl_error_t **out_err) {
  int rc = check_binlog(c, s, pfx, out_err);
  if (rc != SL_OK) return rc;
  sl_bytes_t q;
  sl_bytes_init(&q);
  rc = sl_bytes_append_str(&q, "SELECT ENGINE FROM information_schema."
                                   "TABLES WHERE TABLE_SCHEMA = DATABASE() "
                                   "AND TABLE_NAME = ");
  if (rc == SL_OK) rc = append_hex(&q, s->table, strlen(s->table));
  const char *sql = rc == SL_OK ? bytes_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  char engine[64];
  bool found;
  unsigned e;
  rc = query_text(c, sql, engine, sizeof(engine), &found, &e);
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
    if (rc == SL_OK) rc = append_hex(&q, s->table, strlen(s->table));
    if (rc == SL_OK) rc = sl_bytes_append_str(&q, " AND COLUMN_NAME = ");
    if (rc == SL_OK) rc = append_hex(&q, name, strlen(name));
    sql = rc == SL_OK ? bytes_cstr(&q) : NULL;
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

static int create_commit_table(MYSQL *c, const msink_t *s, const char *pfx,
                               sl_error_t **out_err) {
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "CREATE TABLE IF NOT EXISTS ");
  if (rc == SL_OK) rc = append_ident(&q, s->commit_table);
  if (rc == SL_OK)
    rc = sl_bytes_append_str(
        &q, " (job VARBINARY(64) NOT NULL, sink_uid VARBINARY(64) NOT NULL,"
            " subtask INT UNSIGNED NOT NULL, epoch BIGINT UNSIGNED NOT NULL,"
            " checkpoint_id BIGINT UNSIGNED NOT NULL, prepared_at "
            "DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY"
            " (job, sink_uid, subtask, epoch)) ENGINE=InnoDB");
  const char *sql = rc == SL_OK ? bytes_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  unsigned e;
  rc = run(c, sql, q.len, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: cannot create the commit-log table %s.%s "
                        "(error %u: %s); grant CREATE on %s or create it "
                        "as docs/connectors.md shows",
                        pfx, s->database, s->commit_table, e, mysql_error(c),
                        s->database);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Xids.  gtrid "sl/<job>/<uid>", bqual "<subtask>/<epoch>/<conn id>". */

typedef struct xid_s {
  char gtrid[XID_PART_MAX + 1];
  char bqual[XID_PART_MAX + 1];
  size_t gl, bl;
} xid_t;

static int make_gtrid(const char *job, const char *uid, const char *pfx,
                      xid_t *x, sl_error_t **out_err) {
  int n = snprintf(x->gtrid, sizeof(x->gtrid), "sl/%s/%s", job, uid);
  if (n < 0 || (size_t)n > XID_PART_MAX)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: the XA transaction id \"sl/%s/%s\" is %d bytes; "
                        "MariaDB allows %u: shorten the job name or the "
                        "sink uid",
                        pfx, job, uid, n, XID_PART_MAX);
  x->gl = (size_t)n;
  return SL_OK;
}

static void make_bqual(xid_t *x, uint32_t subtask, uint64_t epoch,
                       uint64_t conn_id) {
  int n = snprintf(x->bqual, sizeof(x->bqual), "%" PRIu32 "/%" PRIu64
                   "/%" PRIu64, subtask, epoch, conn_id);
  x->bl = (size_t)n;
}

static bool parse_bqual(const char *p, size_t n, uint32_t *out_subtask,
                        uint64_t *out_epoch, uint64_t *out_conn) {
  char buf[XID_PART_MAX + 1];
  if (n == 0 || n > XID_PART_MAX) return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  unsigned long long a, b, c;
  char tail;
  if (sscanf(buf, "%llu/%llu/%llu%c", &a, &b, &c, &tail) != 3 ||
      a > UINT32_MAX)
    return false;
  *out_subtask = (uint32_t)a;
  *out_epoch = b;
  *out_conn = c;
  return true;
}

static int xid_sql(sl_bytes_t *b, const char *verb, const xid_t *x,
                   const char *suffix) {
  int rc = sl_bytes_append_str(b, verb);
  if (rc == SL_OK) rc = append_hex(b, x->gtrid, x->gl);
  if (rc == SL_OK) rc = sl_bytes_append(b, ",", 1);
  if (rc == SL_OK) rc = append_hex(b, x->bqual, x->bl);
  if (rc == SL_OK)
    rc = sl_bytes_printf(b, ",%d%s", SL_MARIADB_XA_FORMAT, suffix);
  return rc == SL_OK && bytes_cstr(b) != NULL ? SL_OK : SL_ENOMEM;
}

static int run_xa(MYSQL *c, const char *verb, const xid_t *x,
                  const char *suffix, unsigned *out_errno) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  int rc = xid_sql(&b, verb, x, suffix);
  if (rc == SL_OK) rc = run(c, (const char *)b.data, b.len, out_errno);
  else *out_errno = 0;
  sl_bytes_close(&b);
  return rc;
}

/* The writer lock of (gtrid, subtask): every writer connection holds it
 * (GET_LOCK), so recover() finds writers of older attempts with
 * IS_USED_LOCK and kills them. */
static void lock_name(const char *gtrid, uint32_t subtask, char *buf,
                      size_t size) {
  uint64_t h = fnv64(gtrid, strlen(gtrid), 0xcbf29ce484222325ull);
  h = fnv64(&subtask, sizeof(subtask), h);
  snprintf(buf, size, "sluice.%016" PRIx64, h);
}

/* ------------------------------------------------------------------ */
/* Writer. */

enum { BATCH_NONE = 0, BATCH_UPSERT = 1, BATCH_DELETE = 2 };

typedef struct mwriter_s {
  msink_t *s;
  char pfx[256];
  const sl_schema_t *schema;
  uint32_t n_fields;
  int *key_idx;
  bool *is_key;
  uint32_t subtask;
  MYSQL *conn;
  xid_t xid;
  uint64_t epoch;    /* exactly-once: the epoch being filled */
  bool is_xa_open;   /* XA START done, not yet prepared */
  int64_t alo_epoch; /* at-least-once: this writer's version */
  sl_bytes_t stmt;
  int batch;
  uint32_t n_batched;
  /*
   * Finished statements not yet sent: {u32 rows, u32 len, text}.  While
   * the epoch this writer prepared last (wait_epoch) is not committed,
   * its branch holds the locks of the rows it wrote, and a statement of
   * the next epoch touching one of them would wait for that commit, which
   * runs on this same thread: the writer keeps the statements until the
   * commit (or until prepare, which must send them).
   */
  sl_bytes_t queue;
  uint64_t wait_epoch;
  char lock[40];
  char job[XID_PART_MAX + 1], uid[XID_PART_MAX + 1];
} mwriter_t;

static int writer_connect(mwriter_t *w, sl_error_t **out_err) {
  int rc = my_connect(w->s, w->pfx, &w->conn, out_err);
  if (rc != SL_OK) return rc;
  if (!is_eo(w->s)) return SL_OK;
  char sql[128], v[32];
  bool found;
  unsigned e;
  snprintf(sql, sizeof(sql), "SELECT GET_LOCK('%s', %d)", w->lock,
           LOCK_WAIT_S);
  rc = query_text(w->conn, sql, v, sizeof(v), &found, &e);
  if (rc != SL_OK || !found || strcmp(v, "1") != 0) {
    char holder[32] = "?";
    if (rc == SL_OK) {
      snprintf(sql, sizeof(sql), "SELECT IS_USED_LOCK('%s')", w->lock);
      (void)query_text(w->conn, sql, holder, sizeof(holder), &found, &e);
    }
    rc = sl_error_set(out_err, SL_EIO,
                      "%s: another writer of this sink subtask holds its "
                      "writer lock %s (connection %s) after %d s: a writer "
                      "of an earlier attempt is still connected (error %u: "
                      "%s)",
                      w->pfx, w->lock, holder, LOCK_WAIT_S, e,
                      mysql_error(w->conn));
    mysql_close(w->conn);
    w->conn = NULL;
    return rc;
  }
  return SL_OK;
}

static int writer_start(mwriter_t *w, sl_error_t **out_err) {
  int rc;
  if (w->conn == NULL && (rc = writer_connect(w, out_err)) != SL_OK)
    return rc;
  if (!is_eo(w->s) || w->is_xa_open) return SL_OK;
  make_bqual(&w->xid, w->subtask, w->epoch, mysql_thread_id(w->conn));
  unsigned e;
  if (run_xa(w->conn, "XA START ", &w->xid, "", &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: XA START '%s','%s' failed: error %u (%s): %s",
                        w->pfx, w->xid.gtrid, w->xid.bqual, e,
                        mysql_sqlstate(w->conn), mysql_error(w->conn));
  w->is_xa_open = true;
  return SL_OK;
}

static int append_value(mwriter_t *w, const sl_row_t *row, uint32_t i,
                        sl_error_t **out_err) {
  sl_bytes_t *b = &w->stmt;
  sl_value_t v;
  sl_row_get_value(row, i, &v);
  if (v.is_null) return sl_bytes_append(b, "NULL", 4);
  switch ((sl_type_id_t)v.type) {
  case SL_TYPE_BOOL:
    return sl_bytes_append(b, v.u.b ? "1" : "0", 1);
  case SL_TYPE_INT32:
  case SL_TYPE_INT64:
    return sl_bytes_printf(b, "%" PRId64, v.u.i);
  case SL_TYPE_FLOAT64:
    if (v.u.f != v.u.f || v.u.f - v.u.f != 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: field %s is %g, which MariaDB cannot store",
                          w->pfx, sl_schema_field(w->schema, i)->name,
                          v.u.f);
    return sl_bytes_printf(b, "%.17g", v.u.f);
  case SL_TYPE_DECIMAL: {
    uint64_t m = v.u.i < 0 ? 0 - (uint64_t)v.u.i : (uint64_t)v.u.i;
    uint64_t p10 = 1;
    for (unsigned k = 0; k < v.scale; k++) p10 *= 10u;
    if (v.scale == 0)
      return sl_bytes_printf(b, "%s%" PRIu64, v.u.i < 0 ? "-" : "", m);
    return sl_bytes_printf(b, "%s%" PRIu64 ".%0*" PRIu64,
                           v.u.i < 0 ? "-" : "", m / p10, (int)v.scale,
                           m % p10);
  }
  case SL_TYPE_STRING: {
    int rc = sl_bytes_reserve(b, 2u * (size_t)v.u.s.len + 3u);
    if (rc != SL_OK) return rc;
    b->data[b->len++] = '\'';
    b->len += mysql_real_escape_string(w->conn, (char *)b->data + b->len,
                                       (const char *)v.u.s.ptr, v.u.s.len);
    b->data[b->len++] = '\'';
    return SL_OK;
  }
  case SL_TYPE_BYTES:
    return append_hex(b, v.u.s.ptr, v.u.s.len);
  case SL_TYPE_TIMESTAMP: {
    int64_t us = v.u.i;
    int64_t sec = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
      frac += 1000000;
      sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL)
      return sl_error_set(out_err, SL_EINVAL, "%s: field %s: timestamp %"
                          PRId64 " out of range", w->pfx,
                          sl_schema_field(w->schema, i)->name, us);
    return sl_bytes_printf(b, "'%04d-%02d-%02d %02d:%02d:%02d.%06" PRId64
                           "'", tm.tm_year + 1900, tm.tm_mon + 1,
                           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                           frac);
  }
  }
  return sl_error_set(out_err, SL_ETYPE, "%s: field %s has an unknown type",
                      w->pfx, sl_schema_field(w->schema, i)->name);
}

static int flush_batch(mwriter_t *w, sl_error_t **out_err) {
  if (w->n_batched == 0) return SL_OK;
  const msink_t *s = w->s;
  sl_bytes_t *b = &w->stmt;
  int rc = SL_OK;
  if (w->batch == BATCH_UPSERT && s->mode == SL_MARIADB_UPSERT) {
    rc = sl_bytes_append_str(b, " ON DUPLICATE KEY UPDATE ");
    bool any = false;
    for (uint32_t i = 0; rc == SL_OK && i < w->n_fields; i++) {
      if (w->is_key[i]) continue;
      const char *name = sl_schema_field(w->schema, i)->name;
      if (any) rc = sl_bytes_append(b, ",", 1);
      any = true;
      if (rc == SL_OK) rc = append_ident(b, name);
      if (rc != SL_OK) break;
      if (is_eo(s)) {
        rc = sl_bytes_append_str(b, "=VALUES(");
        if (rc == SL_OK) rc = append_ident(b, name);
        if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
      } else {
        /* The epoch column is assigned last: the conditions before it
         * compare with the row's old epoch. */
        rc = sl_bytes_append_str(b, "=IF(VALUES(");
        if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
        if (rc == SL_OK) rc = sl_bytes_append_str(b, ")>=");
        if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
        if (rc == SL_OK) rc = sl_bytes_append_str(b, ",VALUES(");
        if (rc == SL_OK) rc = append_ident(b, name);
        if (rc == SL_OK) rc = sl_bytes_append_str(b, "),");
        if (rc == SL_OK) rc = append_ident(b, name);
        if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
      }
    }
    if (rc == SL_OK && !is_eo(s)) {
      if (any) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, "=GREATEST(");
      if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, ",VALUES(");
      if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, "))");
      any = true;
    }
    if (rc == SL_OK && !any) {
      rc = append_ident(b, sl_schema_field(w->schema, w->key_idx[0])->name);
      if (rc == SL_OK) rc = sl_bytes_append(b, "=", 1);
      if (rc == SL_OK)
        rc = append_ident(b, sl_schema_field(w->schema, w->key_idx[0])->name);
    }
  } else if (w->batch == BATCH_DELETE) {
    rc = sl_bytes_append(b, ")", 1);
    if (rc == SL_OK && !is_eo(s)) {
      rc = sl_bytes_append_str(b, " AND ");
      if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
      if (rc == SL_OK)
        rc = sl_bytes_printf(b, " <= %" PRId64, w->alo_epoch);
    }
  }
  uint32_t hdr[2] = {w->n_batched, (uint32_t)b->len};
  if (rc == SL_OK) rc = sl_bytes_append(&w->queue, hdr, sizeof(hdr));
  if (rc == SL_OK) rc = sl_bytes_append(&w->queue, b->data, b->len);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  b->len = 0;
  w->n_batched = 0;
  w->batch = BATCH_NONE;
  return SL_OK;
}

/* Send the queued statements: always when force, else once the epoch
 * prepared last is committed. */
static int send_queue(mwriter_t *w, bool force, sl_error_t **out_err) {
  if (w->queue.len == 0) return SL_OK;
  if (!force && w->wait_epoch != 0 &&
      !is_committed(w->s, w->subtask, w->wait_epoch))
    return SL_OK;
  w->wait_epoch = 0;
  size_t off = 0;
  int rc = SL_OK;
  while (off < w->queue.len) {
    uint32_t hdr[2];
    memcpy(hdr, w->queue.data + off, sizeof(hdr));
    off += sizeof(hdr);
    unsigned e;
    if (run(w->conn, (const char *)w->queue.data + off, hdr[1], &e) !=
        SL_OK) {
      rc = sl_error_set(out_err, SL_EIO,
                        "%s: writing %u rows to table %s.%s failed: error "
                        "%u (%s): %s",
                        w->pfx, hdr[0], w->s->database, w->s->table, e,
                        mysql_sqlstate(w->conn), mysql_error(w->conn));
      break;
    }
    off += hdr[1];
  }
  w->queue.len = 0;
  return rc;
}

/* Finish the statement being built and send what may be sent. */
static int flush_rows(mwriter_t *w, bool force, sl_error_t **out_err) {
  int rc = flush_batch(w, out_err);
  return rc == SL_OK ? send_queue(w, force || !is_eo(w->s), out_err) : rc;
}

static int begin_batch(mwriter_t *w, int kind) {
  const msink_t *s = w->s;
  sl_bytes_t *b = &w->stmt;
  int rc;
  w->batch = kind;
  if (kind == BATCH_UPSERT) {
    rc = sl_bytes_append_str(b, "INSERT INTO ");
    if (rc == SL_OK) rc = append_ident(b, s->table);
    if (rc == SL_OK) rc = sl_bytes_append(b, " (", 2);
    for (uint32_t i = 0; rc == SL_OK && i < w->n_fields; i++) {
      if (i > 0) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK)
        rc = append_ident(b, sl_schema_field(w->schema, i)->name);
    }
    if (rc == SL_OK && !is_eo(s)) {
      rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = append_ident(b, s->epoch_column);
    }
    if (rc == SL_OK) rc = sl_bytes_append_str(b, ") VALUES ");
    return rc;
  }
  rc = sl_bytes_append_str(b, "DELETE FROM ");
  if (rc == SL_OK) rc = append_ident(b, s->table);
  if (rc == SL_OK) rc = sl_bytes_append_str(b, " WHERE (");
  for (uint32_t k = 0; rc == SL_OK && k < s->n_key; k++) {
    if (k > 0) rc = sl_bytes_append(b, ",", 1);
    if (rc == SL_OK)
      rc = append_ident(b, sl_schema_field(w->schema, w->key_idx[k])->name);
  }
  if (rc == SL_OK) rc = sl_bytes_append_str(b, ") IN (");
  return rc;
}

static int mw_write(void *writer, const sl_row_t *row, sl_error_t **out_err) {
  mwriter_t *w = writer;
  const msink_t *s = w->s;
  sl_row_kind_t kind = sl_row_kind(row);
  int want;
  if (s->mode == SL_MARIADB_INSERT) {
    if (kind != SL_ROW_INSERT)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: mode insert got a %s row; a changelog with "
                          "updates or deletes needs mode upsert and a key",
                          w->pfx, sl_row_kind_name(kind));
    want = BATCH_UPSERT;
  } else if (kind == SL_ROW_UPDATE_BEFORE) {
    return SL_OK; /* the +U that follows replaces the row */
  } else {
    want = kind == SL_ROW_DELETE ? BATCH_DELETE : BATCH_UPSERT;
  }
  for (uint32_t k = 0; k < s->n_key; k++)
    if (sl_row_is_null(row, (uint32_t)w->key_idx[k]))
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: key column %s is null in a %s row", w->pfx,
                          s->key[k], sl_row_kind_name(kind));
  int rc = writer_start(w, out_err);
  if (rc != SL_OK) return rc;
  if (w->batch != want && w->n_batched > 0 &&
      (rc = flush_rows(w, false, out_err)) != SL_OK)
    return rc;
  if (w->n_batched == 0) {
    w->stmt.len = 0;
    if ((rc = begin_batch(w, want)) != SL_OK)
      return sl_error_set(out_err, rc, "out of memory");
  }
  sl_bytes_t *b = &w->stmt;
  rc = sl_bytes_append_str(b, w->n_batched > 0 ? ",(" : "(");
  if (want == BATCH_UPSERT) {
    for (uint32_t i = 0; rc == SL_OK && i < w->n_fields; i++) {
      if (i > 0) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = append_value(w, row, i, out_err);
    }
    if (rc == SL_OK && !is_eo(s))
      rc = sl_bytes_printf(b, ",%" PRId64, w->alo_epoch);
  } else {
    for (uint32_t k = 0; rc == SL_OK && k < s->n_key; k++) {
      if (k > 0) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = append_value(w, row, (uint32_t)w->key_idx[k],
                                         out_err);
    }
  }
  if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  w->n_batched++;
  if (w->n_batched >= s->batch_rows || b->len >= MAX_STMT_BYTES)
    return flush_rows(w, false, out_err);
  return SL_OK;
}

static int mw_flush(void *writer, sl_error_t **out_err) {
  mwriter_t *w = writer;
  return flush_rows(w, false, out_err);
}

static void writer_free(mwriter_t *w) {
  if (w == NULL) return;
  if (w->conn != NULL) {
    if (w->is_xa_open) {
      unsigned e;
      (void)run_xa(w->conn, "XA END ", &w->xid, "", &e);
      (void)run_xa(w->conn, "XA ROLLBACK ", &w->xid, "", &e);
    }
    mysql_close(w->conn);
  }
  sl_bytes_close(&w->stmt);
  sl_bytes_close(&w->queue);
  sl_free(w->key_idx);
  sl_free(w->is_key);
  sl_free(w);
}

static int mw_close(void *writer, bool is_success, sl_error_t **out_err) {
  mwriter_t *w = writer;
  int rc = SL_OK;
  /* At-least-once: what was written is kept; the rest of an exactly-once
   * epoch after its last prepare is never committed. */
  if (is_success && !is_eo(w->s)) rc = flush_rows(w, true, out_err);
  writer_free(w);
  return rc;
}

static int mw_open(void *ctx, const sl_sink_init_t *init, void **out_writer,
                   sl_error_t **out_err) {
  msink_t *s = ctx;
  mwriter_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->s = s;
  w->schema = init->schema;
  w->subtask = init->subtask;
  w->epoch = init->epoch_id;
  sl_bytes_init(&w->stmt);
  sl_bytes_init(&w->queue);
  const char *uid = init->uid != NULL ? init->uid : "";
  const char *job = init->job != NULL ? init->job : "";
  snprintf(w->pfx, sizeof(w->pfx), "mariadb sink '%s' subtask %" PRIu32,
           uid, init->subtask);
  int rc = SL_OK;
  w->n_fields = sl_schema_n_fields(init->schema);
  w->key_idx = sl_calloc(s->n_key + 1u, sizeof(int));
  w->is_key = sl_calloc(w->n_fields + 1u, sizeof(bool));
  if (w->key_idx == NULL || w->is_key == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto fail;
  }
  for (uint32_t k = 0; k < s->n_key; k++) {
    int i = sl_schema_index(init->schema, s->key[k]);
    if (i < 0) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: key column %s is not a field of the sink's "
                        "rows", w->pfx, s->key[k]);
      goto fail;
    }
    w->key_idx[k] = i;
    w->is_key[i] = true;
  }
  if (is_eo(s)) {
    if (init->epoch_id == 0) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: exactly-once needs checkpoints (the engine "
                        "gave no epoch id); enable checkpointing or use "
                        "delivery at-least-once", w->pfx);
      goto fail;
    }
    if ((rc = make_gtrid(job, uid, w->pfx, &w->xid, out_err)) != SL_OK)
      goto fail;
    lock_name(w->xid.gtrid, w->subtask, w->lock, sizeof(w->lock));
    snprintf(w->job, sizeof(w->job), "%s", job);
    snprintf(w->uid, sizeof(w->uid), "%s", uid);
  }
  if ((rc = writer_connect(w, out_err)) != SL_OK) goto fail;
  if ((rc = check_table(w->conn, s, init->schema, w->pfx, out_err)) !=
      SL_OK)
    goto fail;
  if (!is_eo(s)) {
    /* This writer's epoch: above every epoch in the table, so a writer of
     * an earlier attempt still writing can never replace its rows. */
    sl_bytes_t q;
    sl_bytes_init(&q);
    rc = sl_bytes_append_str(&q, "SELECT IFNULL(MAX(");
    if (rc == SL_OK) rc = append_ident(&q, s->epoch_column);
    if (rc == SL_OK) rc = sl_bytes_append_str(&q, "), 0) + 1 FROM ");
    if (rc == SL_OK) rc = append_ident(&q, s->table);
    const char *sql = rc == SL_OK ? bytes_cstr(&q) : NULL;
    char v[32];
    bool found = false;
    unsigned e = 0;
    rc = sql == NULL ? SL_ENOMEM
                     : query_text(w->conn, sql, v, sizeof(v), &found, &e);
    sl_bytes_close(&q);
    if (rc != SL_OK || !found) {
      rc = sl_error_set(out_err, SL_EIO, "%s: reading the largest %s of "
                        "%s.%s failed: %s", w->pfx, s->epoch_column,
                        s->database, s->table, mysql_error(w->conn));
      goto fail;
    }
    w->alo_epoch = strtoll(v, NULL, 10);
  }
  *out_writer = w;
  return SL_OK;
fail:
  writer_free(w);
  return rc;
}

static int encode_committable(const mwriter_t *w, sl_bytes_t *out) {
  uint8_t head[4] = {'M', 'X', 1, 0};
  uint8_t sub[4] = {(uint8_t)w->subtask, (uint8_t)(w->subtask >> 8),
                    (uint8_t)(w->subtask >> 16), (uint8_t)(w->subtask >> 24)};
  uint8_t gl = (uint8_t)w->xid.gl, bl = (uint8_t)w->xid.bl;
  int rc = sl_bytes_append(out, head, 4);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, w->epoch);
  if (rc == SL_OK) rc = sl_bytes_append(out, sub, 4);
  if (rc == SL_OK) rc = sl_bytes_append(out, &gl, 1);
  if (rc == SL_OK) rc = sl_bytes_append(out, w->xid.gtrid, gl);
  if (rc == SL_OK) rc = sl_bytes_append(out, &bl, 1);
  if (rc == SL_OK) rc = sl_bytes_append(out, w->xid.bqual, bl);
  return rc;
}

typedef struct committable_s {
  uint64_t epoch;
  uint32_t subtask;
  xid_t xid;
} committable_t;

static bool decode_committable(const uint8_t *p, size_t len,
                               committable_t *c) {
  if (len < 4 + 8 + 4 + 1 || memcmp(p, "MX\1\0", 4) != 0) return false;
  uint64_t e = 0;
  for (int i = 7; i >= 0; i--) e = (e << 8) | p[4 + i];
  c->epoch = e;
  c->subtask = (uint32_t)p[12] | (uint32_t)p[13] << 8 |
               (uint32_t)p[14] << 16 | (uint32_t)p[15] << 24;
  size_t off = 16;
  size_t gl = p[off++];
  if (gl == 0 || gl > XID_PART_MAX || off + gl + 1 > len) return false;
  memcpy(c->xid.gtrid, p + off, gl);
  c->xid.gtrid[gl] = '\0';
  c->xid.gl = gl;
  off += gl;
  size_t bl = p[off++];
  if (bl == 0 || bl > XID_PART_MAX || off + bl != len) return false;
  memcpy(c->xid.bqual, p + off, bl);
  c->xid.bqual[bl] = '\0';
  c->xid.bl = bl;
  uint32_t s;
  uint64_t ep, conn;
  return parse_bqual(c->xid.bqual, bl, &s, &ep, &conn) && s == c->subtask &&
         ep == c->epoch;
}

static int insert_marker(mwriter_t *w, uint64_t checkpoint_id,
                         sl_error_t **out_err) {
  const msink_t *s = w->s;
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "INSERT INTO ");
  if (rc == SL_OK) rc = append_ident(&q, s->commit_table);
  if (rc == SL_OK)
    rc = sl_bytes_append_str(&q, " (job, sink_uid, subtask, epoch, "
                                 "checkpoint_id) VALUES (");
  if (rc == SL_OK) rc = append_hex(&q, w->job, strlen(w->job));
  if (rc == SL_OK) rc = sl_bytes_append(&q, ",", 1);
  if (rc == SL_OK) rc = append_hex(&q, w->uid, strlen(w->uid));
  if (rc == SL_OK)
    rc = sl_bytes_printf(&q, ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ")",
                         w->subtask, w->epoch, checkpoint_id);
  const char *sql = rc == SL_OK ? bytes_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  unsigned e;
  rc = run(w->conn, sql, q.len, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: writing the marker of epoch %" PRIu64
                        " (checkpoint %" PRIu64 ") into %s failed: error "
                        "%u: %s",
                        w->pfx, w->epoch, checkpoint_id, s->commit_table, e,
                        mysql_error(w->conn));
  return SL_OK;
}

static int mw_prepare(void *writer, uint64_t checkpoint_id,
                      sl_bytes_t *out_committable, sl_error_t **out_err) {
  mwriter_t *w = writer;
  int rc;
  if (!w->is_xa_open) { /* an epoch without rows: nothing to commit */
    w->epoch = checkpoint_id;
    return SL_OK;
  }
  if ((rc = flush_rows(w, true, out_err)) != SL_OK) return rc;
  if ((rc = insert_marker(w, checkpoint_id, out_err)) != SL_OK) return rc;
  unsigned e;
  if (run_xa(w->conn, "XA END ", &w->xid, "", &e) != SL_OK ||
      run_xa(w->conn, "XA PREPARE ", &w->xid, "", &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: preparing XA '%s','%s' for checkpoint %" PRIu64
                        " failed: error %u (%s): %s",
                        w->pfx, w->xid.gtrid, w->xid.bqual, checkpoint_id, e,
                        mysql_sqlstate(w->conn), mysql_error(w->conn));
  w->is_xa_open = false;
  w->wait_epoch = w->epoch;
  rc = encode_committable(w, out_committable);
  /* Another connection can commit the branch only once this one is gone;
   * the next epoch starts on a new connection. */
  mysql_close(w->conn);
  w->conn = NULL;
  w->epoch = checkpoint_id;
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Committer. */

typedef struct mcommitter_s {
  msink_t *s;
  char pfx[256];
  xid_t xid; /* gtrid only */
  char *job, *uid;
  uint32_t subtask;
  uint32_t *owned;
  uint32_t n_owned;
  uint64_t epoch_id;
  MYSQL *conn;
  /* Xids handed to commit(): recover() never rolls them back. */
  uint64_t *seen; /* pairs (subtask, epoch) */
  size_t n_seen, cap_seen;
} mcommitter_t;

static void mc_close(void *committer) {
  mcommitter_t *m = committer;
  if (m == NULL) return;
  if (m->conn != NULL) mysql_close(m->conn);
  sl_free(m->owned);
  sl_free(m->seen);
  sl_free(m->job);
  sl_free(m->uid);
  sl_free(m);
}

static int mc_connect(mcommitter_t *m, sl_error_t **out_err) {
  if (m->conn != NULL) return SL_OK;
  return my_connect(m->s, m->pfx, &m->conn, out_err);
}

static void mc_drop_conn(mcommitter_t *m) {
  if (m->conn != NULL) mysql_close(m->conn);
  m->conn = NULL;
}

static int mc_open(void *ctx, const sl_committer_init_t *init,
                   void **out_committer, sl_error_t **out_err) {
  msink_t *s = ctx;
  mcommitter_t *m = sl_calloc(1, sizeof(*m));
  if (m == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  m->s = s;
  const char *uid = init->uid != NULL ? init->uid : "";
  const char *job = init->job != NULL ? init->job : "";
  snprintf(m->pfx, sizeof(m->pfx), "mariadb sink '%s' committer %" PRIu32,
           uid, init->subtask);
  m->subtask = init->subtask;
  m->epoch_id = init->epoch_id;
  m->job = sl_strdup(job);
  m->uid = sl_strdup(uid);
  m->n_owned = init->n_owned_subtasks;
  m->owned = sl_calloc(m->n_owned + 1u, sizeof(uint32_t));
  int rc;
  if (m->job == NULL || m->uid == NULL || m->owned == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto fail;
  }
  if (m->n_owned > 0)
    memcpy(m->owned, init->owned_subtasks, m->n_owned * sizeof(uint32_t));
  if ((rc = make_gtrid(job, uid, m->pfx, &m->xid, out_err)) != SL_OK)
    goto fail;
  if ((rc = mc_connect(m, out_err)) != SL_OK) goto fail;
  if ((rc = check_server_xa(m->conn, s, m->pfx, out_err)) != SL_OK ||
      (rc = create_commit_table(m->conn, s, m->pfx, out_err)) != SL_OK)
    goto fail;
  *out_committer = m;
  return SL_OK;
fail:
  mc_close(m);
  return rc;
}

static int remember(mcommitter_t *m, uint32_t subtask, uint64_t epoch) {
  for (size_t i = 0; i < m->n_seen; i++)
    if (m->seen[2 * i] == subtask && m->seen[2 * i + 1] == epoch)
      return SL_OK;
  if (m->n_seen == m->cap_seen) {
    size_t cap = m->cap_seen ? 2 * m->cap_seen : 8;
    uint64_t *p = sl_realloc(m->seen, cap * 2 * sizeof(uint64_t));
    if (p == NULL) return SL_ENOMEM;
    m->seen = p;
    m->cap_seen = cap;
  }
  m->seen[2 * m->n_seen] = subtask;
  m->seen[2 * m->n_seen + 1] = epoch;
  m->n_seen++;
  return SL_OK;
}

static bool was_seen(const mcommitter_t *m, uint32_t subtask,
                     uint64_t epoch) {
  for (size_t i = 0; i < m->n_seen; i++)
    if (m->seen[2 * i] == subtask && m->seen[2 * i + 1] == epoch)
      return true;
  return false;
}

/* Whether the marker of (subtask, epoch) is committed: 1, 0, or < 0 on a
 * failed query (*out_errno). */
static int marker_present(mcommitter_t *m, uint32_t subtask, uint64_t epoch,
                          unsigned *out_errno) {
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "SELECT COUNT(*) FROM ");
  if (rc == SL_OK) rc = append_ident(&q, m->s->commit_table);
  if (rc == SL_OK) rc = sl_bytes_append_str(&q, " WHERE job = ");
  if (rc == SL_OK) rc = append_hex(&q, m->job, strlen(m->job));
  if (rc == SL_OK) rc = sl_bytes_append_str(&q, " AND sink_uid = ");
  if (rc == SL_OK) rc = append_hex(&q, m->uid, strlen(m->uid));
  if (rc == SL_OK)
    rc = sl_bytes_printf(&q, " AND subtask = %" PRIu32
                         " AND epoch = %" PRIu64, subtask, epoch);
  const char *sql = rc == SL_OK ? bytes_cstr(&q) : NULL;
  char v[32];
  bool found = false;
  *out_errno = 0;
  rc = sql == NULL ? SL_ENOMEM
                   : query_text(m->conn, sql, v, sizeof(v), &found,
                                out_errno);
  sl_bytes_close(&q);
  if (rc != SL_OK) return rc;
  return found && strcmp(v, "0") != 0 ? 1 : 0;
}

/* One prepared branch as XA RECOVER lists it. */
typedef struct recovered_s {
  xid_t xid;
  uint32_t subtask;
  uint64_t epoch, conn;
} recovered_t;

/* XA RECOVER, keeping this sink's branches (our formatID and gtrid). */
static int xa_recover(mcommitter_t *m, recovered_t **out, size_t *out_n,
                      unsigned *out_errno) {
  *out = NULL;
  *out_n = 0;
  *out_errno = 0;
  if (mysql_query(m->conn, "XA RECOVER") != 0) {
    *out_errno = mysql_errno(m->conn);
    return SL_EIO;
  }
  MYSQL_RES *r = mysql_store_result(m->conn);
  if (r == NULL) {
    *out_errno = mysql_errno(m->conn);
    return SL_EIO;
  }
  size_t n = 0, cap = 0;
  recovered_t *v = NULL;
  MYSQL_ROW row;
  int rc = SL_OK;
  while ((row = mysql_fetch_row(r)) != NULL) {
    unsigned long *lens = mysql_fetch_lengths(r);
    if (row[0] == NULL || row[1] == NULL || row[2] == NULL || row[3] == NULL)
      continue;
    long fmt = strtol(row[0], NULL, 10);
    long gl = strtol(row[1], NULL, 10), bl = strtol(row[2], NULL, 10);
    if (fmt != SL_MARIADB_XA_FORMAT || gl != (long)m->xid.gl || bl <= 0 ||
        bl > (long)XID_PART_MAX || (unsigned long)(gl + bl) != lens[3] ||
        memcmp(row[3], m->xid.gtrid, (size_t)gl) != 0)
      continue;
    recovered_t one;
    memset(&one, 0, sizeof(one));
    memcpy(one.xid.gtrid, row[3], (size_t)gl);
    one.xid.gl = (size_t)gl;
    memcpy(one.xid.bqual, row[3] + gl, (size_t)bl);
    one.xid.bl = (size_t)bl;
    if (!parse_bqual(one.xid.bqual, one.xid.bl, &one.subtask, &one.epoch,
                     &one.conn))
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      recovered_t *p = sl_realloc(v, cap * sizeof(*v));
      if (p == NULL) {
        rc = SL_ENOMEM;
        break;
      }
      v = p;
    }
    v[n++] = one;
  }
  mysql_free_result(r);
  if (rc != SL_OK) {
    sl_free(v);
    return rc;
  }
  *out = v;
  *out_n = n;
  return SL_OK;
}

/*
 * Kill connection conn_id, and wait (at most KILL_WAIT_MS) until the
 * server has ended it: KILL only marks the connection, and until its
 * thread is gone it still holds its branch (1397) and its locks.
 */
#define KILL_WAIT_MS 5000
static int kill_holder(mcommitter_t *m, uint64_t conn_id,
                       unsigned *out_errno) {
  char sql[160];
  snprintf(sql, sizeof(sql), "KILL CONNECTION %" PRIu64, conn_id);
  int rc = run(m->conn, sql, strlen(sql), out_errno);
  if (rc != SL_OK && *out_errno == ER_NO_SUCH_THREAD) return SL_OK;
  if (rc != SL_OK) return rc;
  sl_log(SL_LOG_WARN, "%s: killed connection %" PRIu64 ", which held a "
         "prepared branch or the writer lock of this sink", m->pfx,
         conn_id);
  snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %" PRIu64, conn_id);
  for (int waited = 0; waited < KILL_WAIT_MS; waited += 10) {
    char v[32];
    bool found;
    if (query_text(m->conn, sql, v, sizeof(v), &found, out_errno) != SL_OK)
      return SL_EIO;
    if (!found || strcmp(v, "0") == 0) return SL_OK;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return SL_OK; /* still ending: the caller's next step says what to do */
}

/*
 * Wait (at most KILL_WAIT_MS) until connection conn_id has left the
 * process list.  MariaDB 10.11 answers an XA COMMIT from another
 * connection with OK, yet loses the branch, when the XA COMMIT arrives
 * while the session that prepared the branch is still ending after its
 * client closed (about one commit in a thousand issued right after the
 * close; sl-fault-mariadb-window-w2-after-prepare lost an epoch that
 * way).  Once the session is gone the branch is detached and the commit
 * is real.  A session still there after the bound is a live holder: the
 * 1397 path of mc_commit kills it and waits for it the same way.
 */
static void wait_session_gone(mcommitter_t *m, uint64_t conn_id) {
  char sql[160], v[32];
  snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %" PRIu64, conn_id);
  for (int waited = 0; waited < KILL_WAIT_MS; waited++) {
    bool found = false;
    unsigned e = 0;
    if (query_text(m->conn, sql, v, sizeof(v), &found, &e) != SL_OK ||
        !found || strcmp(v, "0") == 0)
      return; /* gone (a failed query: the XA COMMIT reports it) */
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
}

static bool xid_equal(const xid_t *a, const xid_t *b) {
  return a->gl == b->gl && a->bl == b->bl &&
         memcmp(a->gtrid, b->gtrid, a->gl) == 0 &&
         memcmp(a->bqual, b->bqual, a->bl) == 0;
}

static int mc_commit(void *committer, uint64_t checkpoint_id,
                     uint32_t origin_subtask, const uint8_t *bytes,
                     size_t len, uint32_t attempt,
                     sl_commit_status_t *out_status, sl_error_t **out_err) {
  mcommitter_t *m = committer;
  committable_t c;
  memset(&c, 0, sizeof(c));
  if (!decode_committable(bytes, len, &c) || c.subtask != origin_subtask)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "%s: the committable of subtask %" PRIu32
                        " for checkpoint %" PRIu64 " is malformed (%zu "
                        "bytes)", m->pfx, origin_subtask, checkpoint_id,
                        len);
  if (remember(m, c.subtask, c.epoch) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl_error_t *cerr = NULL;
  if (mc_connect(m, &cerr) != SL_OK) {
    sl_log(SL_LOG_WARN, "%s: commit of checkpoint %" PRIu64 " (attempt %"
           PRIu32 ") will be retried: %s", m->pfx, checkpoint_id, attempt,
           sl_error_message(cerr));
    sl_error_destroy(cerr);
    *out_status = SL_COMMIT_RETRY;
    return SL_OK;
  }
  uint32_t bq_subtask;
  uint64_t bq_epoch, bq_conn;
  if (parse_bqual(c.xid.bqual, c.xid.bl, &bq_subtask, &bq_epoch, &bq_conn))
    wait_session_gone(m, bq_conn);
  unsigned e = 0;
  for (int round = 0; round < 2; round++) {
    if (run_xa(m->conn, "XA COMMIT ", &c.xid, "", &e) == SL_OK) {
      mark_committed(m->s, c.subtask, c.epoch);
      *out_status = SL_COMMIT_OK;
      return SL_OK;
    }
    if (is_conn_error(e) || e == ER_XAER_RMFAIL || e == ER_LOCK_WAIT_TIMEOUT ||
        e == ER_LOCK_DEADLOCK) {
      sl_log(SL_LOG_WARN, "%s: XA COMMIT of checkpoint %" PRIu64 " (xid '%s',"
             "'%s', attempt %" PRIu32 ") will be retried: error %u: %s",
             m->pfx, checkpoint_id, c.xid.gtrid, c.xid.bqual, attempt, e,
             mysql_error(m->conn));
      mc_drop_conn(m);
      *out_status = SL_COMMIT_RETRY;
      return SL_OK;
    }
    if (e == ER_XA_RBROLLBACK) break; /* rolled back: lost */
    if (e != ER_XAER_NOTA)
      return sl_error_set(out_err, SL_EIO,
                          "%s: XA COMMIT of checkpoint %" PRIu64 " (xid '%s',"
                          "'%s') failed: error %u (%s): %s",
                          m->pfx, checkpoint_id, c.xid.gtrid, c.xid.bqual, e,
                          mysql_sqlstate(m->conn), mysql_error(m->conn));
    /* 1397: unknown to this connection.  Committed before (the marker), or
     * attached to a live connection (listed by XA RECOVER), or lost. */
    unsigned qe = 0;
    int present = marker_present(m, c.subtask, c.epoch, &qe);
    if (present == 1) {
      mark_committed(m->s, c.subtask, c.epoch);
      *out_status = SL_COMMIT_ALREADY;
      return SL_OK;
    }
    recovered_t *v = NULL;
    size_t n = 0;
    if (present < 0 || xa_recover(m, &v, &n, &qe) != SL_OK) {
      if (is_conn_error(qe)) {
        mc_drop_conn(m);
        *out_status = SL_COMMIT_RETRY;
        return SL_OK;
      }
      return sl_error_set(out_err, SL_EIO, "%s: resolving the XA COMMIT of "
                          "checkpoint %" PRIu64 " failed: error %u: %s",
                          m->pfx, checkpoint_id, qe, mysql_error(m->conn));
    }
    bool listed = false;
    uint64_t holder = 0;
    for (size_t i = 0; i < n; i++)
      if (xid_equal(&v[i].xid, &c.xid)) {
        listed = true;
        holder = v[i].conn;
      }
    sl_free(v);
    if (!listed) break;
    if (round == 1) {
      *out_status = SL_COMMIT_RETRY; /* the holder is going away */
      return SL_OK;
    }
    if (kill_holder(m, holder, &qe) != SL_OK) {
      if (is_conn_error(qe)) {
        mc_drop_conn(m);
        *out_status = SL_COMMIT_RETRY;
        return SL_OK;
      }
      return sl_error_set(out_err, SL_EIO,
                          "%s: the prepared branch of checkpoint %" PRIu64
                          " (xid '%s','%s') is held by connection %" PRIu64
                          ", which cannot be killed: error %u: %s",
                          m->pfx, checkpoint_id, c.xid.gtrid, c.xid.bqual,
                          holder, qe, mysql_error(m->conn));
    }
  }
  *out_status = SL_COMMIT_LOST;
  sl_error_set(out_err, SL_EIO,
               "%s: the output of checkpoint %" PRIu64 " of subtask %" PRIu32
               " is lost: XA COMMIT of xid '%s','%s' answered error %u, the "
               "branch is not prepared (XA RECOVER) and its marker (epoch %"
               PRIu64 ") is not in %s: it was rolled back by someone else",
               m->pfx, checkpoint_id, c.subtask, c.xid.gtrid, c.xid.bqual,
               e, c.epoch, m->s->commit_table);
  return SL_OK;
}

static bool is_owned(const mcommitter_t *m, uint32_t subtask) {
  for (uint32_t i = 0; i < m->n_owned; i++)
    if (m->owned[i] == subtask) return true;
  return false;
}

static int mc_recover(void *committer, sl_error_t **out_err) {
  mcommitter_t *m = committer;
  int rc = mc_connect(m, out_err);
  if (rc != SL_OK) return rc;
  unsigned e = 0;
  /* Writers of earlier attempts still connected: open branches hold row
   * locks, prepared ones stay attached.  Kill them first. */
  for (uint32_t i = 0; i < m->n_owned; i++) {
    char name[40], sql[96], v[32];
    bool found;
    lock_name(m->xid.gtrid, m->owned[i], name, sizeof(name));
    snprintf(sql, sizeof(sql), "SELECT IS_USED_LOCK('%s')", name);
    if (query_text(m->conn, sql, v, sizeof(v), &found, &e) != SL_OK)
      return sl_error_set(out_err, SL_EIO, "%s: %s failed: error %u: %s",
                          m->pfx, sql, e, mysql_error(m->conn));
    if (found && kill_holder(m, strtoull(v, NULL, 10), &e) != SL_OK)
      return sl_error_set(out_err, SL_EIO, "%s: killing connection %s, a "
                          "writer of an earlier attempt of subtask %" PRIu32
                          ", failed: error %u: %s", m->pfx, v, m->owned[i],
                          e, mysql_error(m->conn));
  }
  recovered_t *v = NULL;
  size_t n = 0;
  if (xa_recover(m, &v, &n, &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO, "%s: XA RECOVER failed: error %u: "
                        "%s", m->pfx, e, mysql_error(m->conn));
  rc = SL_OK;
  for (size_t i = 0; rc == SL_OK && i < n; i++) {
    recovered_t *r = &v[i];
    if (!is_owned(m, r->subtask) || was_seen(m, r->subtask, r->epoch))
      continue;
    if (m->epoch_id != 0 && r->epoch >= m->epoch_id) continue;
    for (int round = 0; round < 2; round++) {
      if (run_xa(m->conn, "XA ROLLBACK ", &r->xid, "", &e) == SL_OK) {
        sl_log(SL_LOG_INFO, "%s: rolled back the lingering XA branch '%s',"
               "'%s' (subtask %" PRIu32 ", epoch %" PRIu64 ")", m->pfx,
               r->xid.gtrid, r->xid.bqual, r->subtask, r->epoch);
        break;
      }
      if (e == ER_XAER_NOTA && round == 0 &&
          kill_holder(m, r->conn, &e) == SL_OK)
        continue;
      rc = sl_error_set(out_err, SL_EIO,
                        "%s: XA ROLLBACK of the lingering branch '%s','%s' "
                        "failed: error %u: %s", m->pfx, r->xid.gtrid,
                        r->xid.bqual, e, mysql_error(m->conn));
      break;
    }
  }
  sl_free(v);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The sink. */

static void ms_destroy(void *ctx) {
  msink_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->host);
  sl_free(s->user);
  sl_free(s->password);
  sl_free(s->database);
  sl_free(s->table);
  sl_free(s->commit_table);
  sl_free(s->epoch_column);
  for (uint32_t i = 0; i < s->n_key; i++) sl_free(s->key[i]);
  sl_free(s->key);
  sl_free(s->committed);
  pthread_mutex_destroy(&s->mu);
  sl_free(s);
}

static const sl_sink_vt_t mariadb_eo_vt = {
    "mariadb", mw_open, mw_write, mw_flush, mw_close, ms_destroy,
    mw_prepare, mc_open, mc_commit, mc_recover, mc_close};
static const sl_sink_vt_t mariadb_alo_vt = {
    "mariadb", mw_open, mw_write, mw_flush, mw_close, ms_destroy,
    NULL, NULL, NULL, NULL, NULL};

void sl_mariadb_sink_config_init(sl_mariadb_sink_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->port = SL_MARIADB_DEFAULT_PORT;
  cfg->mode = SL_MARIADB_UPSERT;
  cfg->delivery = SL_DELIVERY_EXACTLY_ONCE;
}

static int check_name(const char *what, const char *v, size_t max,
                      sl_error_t **out_err) {
  if (v == NULL || v[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "mariadb sink: no %s", what);
  if (strlen(v) > max)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: %s '%s' is longer than %zu bytes",
                        what, v, max);
  return SL_OK;
}

int sl_mariadb_sink_create(const sl_mariadb_sink_config_t *cfg,
                           const sl_sink_vt_t **out_vt, void **out_ctx,
                           sl_error_t **out_err) {
  int rc;
  if ((rc = check_name("host", cfg->host, 255, out_err)) != SL_OK ||
      (rc = check_name("user", cfg->user, 128, out_err)) != SL_OK ||
      (rc = check_name("database", cfg->database, 64, out_err)) != SL_OK ||
      (rc = check_name("table", cfg->table, 64, out_err)) != SL_OK)
    return rc;
  if (cfg->commit_table != NULL &&
      (rc = check_name("commit-log table", cfg->commit_table, 64,
                       out_err)) != SL_OK)
    return rc;
  if (cfg->epoch_column != NULL &&
      (rc = check_name("epoch column", cfg->epoch_column, 64, out_err)) !=
          SL_OK)
    return rc;
  if (cfg->port < 0 || cfg->port > 65535)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: port %d is not in 1..65535",
                        cfg->port);
  if (cfg->mode != SL_MARIADB_INSERT && cfg->mode != SL_MARIADB_UPSERT)
    return sl_error_set(out_err, SL_EINVAL, "mariadb sink: unknown mode %d",
                        (int)cfg->mode);
  if (cfg->delivery != SL_DELIVERY_EXACTLY_ONCE &&
      cfg->delivery != SL_DELIVERY_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: unknown delivery %d",
                        (int)cfg->delivery);
  if (cfg->mode == SL_MARIADB_UPSERT && cfg->n_key == 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: mode upsert needs key columns (the "
                        "table's primary or unique key)");
  if (cfg->delivery == SL_DELIVERY_AT_LEAST_ONCE &&
      cfg->mode != SL_MARIADB_UPSERT)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: delivery at-least-once needs mode "
                        "upsert (an insert replayed after a restore would "
                        "be written twice)");
  for (uint32_t k = 0; k < cfg->n_key; k++) {
    if ((rc = check_name("key column", cfg->key[k], 64, out_err)) != SL_OK)
      return rc;
    for (uint32_t j = 0; j < k; j++)
      if (strcmp(cfg->key[j], cfg->key[k]) == 0)
        return sl_error_set(out_err, SL_EINVAL,
                            "mariadb sink: key column %s is listed twice",
                            cfg->key[k]);
  }
  msink_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  pthread_mutex_init(&s->mu, NULL);
  s->port = cfg->port == 0 ? SL_MARIADB_DEFAULT_PORT : cfg->port;
  s->mode = cfg->mode;
  s->delivery = cfg->delivery;
  s->batch_rows = cfg->batch_rows ? cfg->batch_rows : SL_MARIADB_DEFAULT_BATCH;
  s->connect_timeout_ms =
      cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 10000u;
  s->host = sl_strdup(cfg->host);
  s->user = sl_strdup(cfg->user);
  s->password = sl_strdup(cfg->password != NULL ? cfg->password : "");
  s->database = sl_strdup(cfg->database);
  s->table = sl_strdup(cfg->table);
  s->commit_table = sl_strdup(cfg->commit_table != NULL
                                  ? cfg->commit_table
                                  : SL_MARIADB_DEFAULT_COMMIT_TABLE);
  s->epoch_column = sl_strdup(cfg->epoch_column != NULL
                                  ? cfg->epoch_column
                                  : SL_MARIADB_DEFAULT_EPOCH_COLUMN);
  s->key = sl_calloc(cfg->n_key + 1u, sizeof(char *));
  bool ok = s->host && s->user && s->password && s->database && s->table &&
            s->commit_table && s->epoch_column && s->key;
  for (uint32_t k = 0; ok && k < cfg->n_key; k++) {
    s->key[k] = sl_strdup(cfg->key[k]);
    if (s->key[k] == NULL) ok = false;
    else s->n_key = k + 1;
  }
  if (!ok) {
    ms_destroy(s);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  *out_vt = is_eo(s) ? &mariadb_eo_vt : &mariadb_alo_vt;
  *out_ctx = s;
  return SL_OK;
}

int sl_mariadb_sink_check(const sl_mariadb_sink_config_t *cfg,
                          const sl_schema_t *schema, sl_error_t **out_err) {
  const sl_sink_vt_t *vt;
  void *ctx = NULL;
  int rc = sl_mariadb_sink_create(cfg, &vt, &ctx, out_err);
  if (rc != SL_OK) return rc;
  msink_t *s = ctx;
  char pfx[300];
  snprintf(pfx, sizeof(pfx), "mariadb sink %s:%d/%s.%s", s->host, s->port,
           s->database, s->table);
  MYSQL *c = NULL;
  rc = my_connect(s, pfx, &c, out_err);
  if (rc == SL_OK && is_eo(s)) rc = check_server_xa(c, s, pfx, out_err);
  if (rc == SL_OK) rc = check_table(c, s, schema, pfx, out_err);
  if (c != NULL) mysql_close(c);
  ms_destroy(s);
  return rc;
}
