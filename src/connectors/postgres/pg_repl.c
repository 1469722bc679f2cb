/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The logical replication transport over libpq (pg_repl.h): one blocking
 * replication=database connection, its replication commands, the COPY_BOTH
 * read loop driven by poll() on PQsocket, and the standby status updates,
 * whose flush LSN is only ever the one the caller set.  See
 * src/connectors/README.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "connectors/postgres/pg_int.h"
#include "connectors/postgres/pg_repl.h"

struct sl_pg_repl_s {
  PGconn *conn;
  char *copy_buf;     /* the last CopyData, freed at the next read */
  bool is_streaming;  /* START_REPLICATION succeeded, the stream is open */
  uint64_t flush;     /* the caller's flush LSN */
  uint64_t flush_sent; /* the flush LSN of the last status sent */
  uint64_t received;  /* highest WAL end seen */
};

static const char *who = "postgres replication";

char *sl__pg_lsn_format(uint64_t lsn, char *buf) {
  snprintf(buf, SL_PG_LSN_SIZE, "%X/%X", (unsigned)(lsn >> 32),
           (unsigned)lsn);
  return buf;
}

int sl__pg_lsn_parse(const char *s, uint64_t *out_lsn) {
  uint64_t hi = 0, lo = 0;
  size_t i = 0, n = 0;
  for (; s[i] && s[i] != '/'; i++, n++) {
    int v = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
            : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
            : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                                         : -1;
    if (v < 0 || n >= 8) return SL_EPARSE;
    hi = hi * 16 + (uint64_t)v;
  }
  if (n == 0 || s[i] != '/') return SL_EPARSE;
  i++;
  for (n = 0; s[i]; i++, n++) {
    int v = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
            : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
            : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                                         : -1;
    if (v < 0 || n >= 8) return SL_EPARSE;
    lo = lo * 16 + (uint64_t)v;
  }
  if (n == 0) return SL_EPARSE;
  *out_lsn = hi << 32 | lo;
  return SL_OK;
}

/* Names go into replication commands unquoted: keep them to what needs
 * no quoting. */
static int check_name(const char *what, const char *name, bool is_list,
                      sl_error_t **out_err) {
  size_t n = name ? strlen(name) : 0;
  bool is_ok = n > 0 && n < 64 * (is_list ? 16 : 1);
  for (size_t i = 0; is_ok && i < n; i++) {
    char c = name[i];
    is_ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
            (is_list && c == ',');
  }
  if (!is_ok)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: %s '%s' must be 1-63 characters of a-z, 0-9 "
                        "and _%s",
                        who, what, name ? name : "(null)",
                        is_list ? " (several separated by commas)" : "");
  return SL_OK;
}

int sl__pg_repl_connect(const char *conninfo, sl_pg_repl_t **out_repl,
                        sl_error_t **out_err) {
  sl_pg_repl_t *r = sl_calloc(1, sizeof(*r));
  if (r == NULL) return sl_error_set(out_err, SL_ENOMEM, "%s: out of memory",
                                     who);
  /* The text of every value is decoded in these settings, whatever the
   * server's or the role's defaults. */
  const char *keys[] = {"dbname", "replication", "client_encoding", "options",
                        NULL};
  const char *vals[] = {conninfo, "database", "UTF8",
                        "-c DateStyle=ISO -c TimeZone=UTC "
                        "-c IntervalStyle=postgres -c extra_float_digits=3 "
                        "-c bytea_output=hex",
                        NULL};
  r->conn = PQconnectdbParams(keys, vals, 1);
  if (r->conn == NULL) {
    sl_free(r);
    return sl_error_set(out_err, SL_ENOMEM, "%s: out of memory", who);
  }
  if (PQstatus(r->conn) != CONNECTION_OK) {
    const char *host = PQhost(r->conn), *port = PQport(r->conn);
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", PQerrorMessage(r->conn));
    for (char *c = msg; *c; c++)
      if (*c == '\n') *c = ' ';
    int rc = sl_error_set(out_err, SL_EIO,
                          "%s: cannot connect to %s:%s: %s", who,
                          host && host[0] ? host : "localhost",
                          port && port[0] ? port : "5432", msg);
    sl__pg_repl_destroy(r);
    return rc;
  }
  *out_repl = r;
  return SL_OK;
}

void sl__pg_repl_destroy(sl_pg_repl_t *r) {
  if (r == NULL) return;
  if (r->copy_buf) PQfreemem(r->copy_buf);
  PQfinish(r->conn);
  sl_free(r);
}

/* Run a replication command that returns rows. */
static int query(sl_pg_repl_t *r, const char *sql, const char *what,
                 PGresult **out_res, sl_error_t **out_err) {
  PGresult *res = PQexec(r->conn, sql);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = sl__pg_res_error(out_err, r->conn, res, who, what);
    PQclear(res);
    return rc;
  }
  *out_res = res;
  return SL_OK;
}

int sl__pg_repl_identify(sl_pg_repl_t *r, sl_pg_sysid_t *out_id,
                         sl_error_t **out_err) {
  PGresult *res = NULL;
  int rc = query(r, "IDENTIFY_SYSTEM", "IDENTIFY_SYSTEM", &res, out_err);
  if (rc != SL_OK) return rc;
  sl_pg_sysid_t id;
  memset(&id, 0, sizeof(id));
  if (PQntuples(res) != 1 || PQnfields(res) < 4 ||
      sl__pg_lsn_parse(PQgetvalue(res, 0, 2), &id.xlogpos) != SL_OK) {
    PQclear(res);
    return sl_error_set(out_err, SL_EIO,
                        "%s: IDENTIFY_SYSTEM: unexpected answer (%d rows, "
                        "%d columns)",
                        who, PQntuples(res), PQnfields(res));
  }
  snprintf(id.systemid, sizeof(id.systemid), "%s", PQgetvalue(res, 0, 0));
  id.timeline = (uint32_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
  snprintf(id.dbname, sizeof(id.dbname), "%s", PQgetvalue(res, 0, 3));
  PQclear(res);
  *out_id = id;
  return SL_OK;
}

int sl__pg_repl_create_slot(sl_pg_repl_t *r, const char *slot,
                            bool is_temporary, uint64_t *out_consistent_lsn,
                            sl_error_t **out_err) {
  int rc = check_name("slot name", slot, false, out_err);
  if (rc != SL_OK) return rc;
  char sql[256], what[128];
  snprintf(sql, sizeof(sql),
           "CREATE_REPLICATION_SLOT %s %sLOGICAL pgoutput NOEXPORT_SNAPSHOT",
           slot, is_temporary ? "TEMPORARY " : "");
  snprintf(what, sizeof(what), "creating the replication slot %s", slot);
  PGresult *res = NULL;
  if ((rc = query(r, sql, what, &res, out_err)) != SL_OK) return rc;
  uint64_t lsn = 0;
  if (PQntuples(res) != 1 || PQnfields(res) < 2 ||
      sl__pg_lsn_parse(PQgetvalue(res, 0, 1), &lsn) != SL_OK) {
    PQclear(res);
    return sl_error_set(out_err, SL_EIO, "%s: %s: unexpected answer", who,
                        what);
  }
  PQclear(res);
  if (out_consistent_lsn) *out_consistent_lsn = lsn;
  return SL_OK;
}

int sl__pg_repl_start(sl_pg_repl_t *r, const char *slot, uint64_t start_lsn,
                      const char *publication, bool is_messages,
                      sl_error_t **out_err) {
  int rc = check_name("slot name", slot, false, out_err);
  if (rc == SL_OK) rc = check_name("publication", publication, true, out_err);
  if (rc != SL_OK) return rc;
  if (r->is_streaming)
    return sl_error_set(out_err, SL_ESTATE, "%s: already streaming", who);
  char sql[1400], lsn[SL_PG_LSN_SIZE], what[128];
  snprintf(sql, sizeof(sql),
           "START_REPLICATION SLOT %s LOGICAL %s (proto_version '1', "
           "publication_names '%s'%s)",
           slot, sl__pg_lsn_format(start_lsn, lsn), publication,
           is_messages ? ", messages 'true'" : "");
  snprintf(what, sizeof(what), "START_REPLICATION of slot %s at %s", slot,
           lsn);
  PGresult *res = PQexec(r->conn, sql);
  if (PQresultStatus(res) != PGRES_COPY_BOTH) {
    rc = sl__pg_res_error(out_err, r->conn, res, who, what);
    PQclear(res);
    return rc;
  }
  PQclear(res);
  r->is_streaming = true;
  r->flush = start_lsn;
  return SL_OK;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_pg_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 - SL_PG_EPOCH_US;
}

static int conn_error(sl_pg_repl_t *r, const char *what,
                      sl_error_t **out_err) {
  char msg[512];
  snprintf(msg, sizeof(msg), "%s", PQerrorMessage(r->conn));
  for (char *c = msg; *c; c++)
    if (*c == '\n') *c = ' ';
  return sl_error_set(out_err, SL_EIO, "%s: %s: %s", who, what,
                      msg[0] ? msg : "connection lost");
}

int sl__pg_repl_send_status(sl_pg_repl_t *r, bool reply_requested,
                            sl_error_t **out_err) {
  if (!r->is_streaming)
    return sl_error_set(out_err, SL_ESTATE, "%s: not streaming", who);
  uint8_t msg[SL_PG_STATUS_SIZE];
  uint64_t write = r->received > r->flush ? r->received : r->flush;
  sl__pg_status_encode(msg, write, r->flush, r->flush, now_pg_us(),
                       reply_requested);
  if (PQputCopyData(r->conn, (const char *)msg, (int)sizeof(msg)) != 1 ||
      PQflush(r->conn) != 0)
    return conn_error(r, "sending a standby status update", out_err);
  r->flush_sent = r->flush;
  return SL_OK;
}

int sl__pg_repl_set_flush(sl_pg_repl_t *r, uint64_t flush_lsn,
                          sl_error_t **out_err) {
  if (flush_lsn < r->flush) {
    char a[SL_PG_LSN_SIZE], b[SL_PG_LSN_SIZE];
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: flush LSN %s is behind the one already set (%s)",
                        who, sl__pg_lsn_format(flush_lsn, a),
                        sl__pg_lsn_format(r->flush, b));
  }
  r->flush = flush_lsn;
  return SL_OK;
}

uint64_t sl__pg_repl_flush_sent(const sl_pg_repl_t *r) {
  return r->flush_sent;
}
uint64_t sl__pg_repl_received(const sl_pg_repl_t *r) { return r->received; }

/* The stream ended (CopyDone or an error): SL_ECLOSED with the server's
 * last word. */
static int stream_end(sl_pg_repl_t *r, sl_error_t **out_err) {
  r->is_streaming = false;
  PGresult *res = PQgetResult(r->conn);
  int rc;
  if (res && PQresultStatus(res) != PGRES_COMMAND_OK) {
    sl_error_t *e = NULL;
    (void)sl__pg_res_error(&e, r->conn, res, who,
                           "the replication stream ended");
    rc = sl_error_set(out_err, SL_ECLOSED, "%s",
                      e ? sl_error_message(e) : "out of memory");
    sl_error_destroy(e);
  } else {
    rc = sl_error_set(out_err, SL_ECLOSED,
                      "%s: the server ended the replication stream", who);
  }
  while (res) {
    PQclear(res);
    res = PQgetResult(r->conn);
  }
  return rc;
}

int sl__pg_repl_read(sl_pg_repl_t *r, int timeout_ms, sl_pg_copy_t *out,
                     sl_error_t **out_err) {
  if (r->copy_buf) {
    PQfreemem(r->copy_buf);
    r->copy_buf = NULL;
  }
  if (!r->is_streaming)
    return sl_error_set(out_err, SL_ESTATE, "%s: not streaming", who);
  int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
  for (;;) {
    char *buf = NULL;
    int n = PQgetCopyData(r->conn, &buf, 1);
    if (n > 0) {
      r->copy_buf = buf;
      sl_pg_copy_t c;
      int rc = sl__pg_copy_decode((const uint8_t *)buf, (size_t)n, &c,
                                  out_err);
      if (rc != SL_OK) return rc;
      if (c.wal_end > r->received) r->received = c.wal_end;
      if (c.kind == 'k' && c.reply_requested &&
          (rc = sl__pg_repl_send_status(r, false, out_err)) != SL_OK)
        return rc;
      *out = c;
      return SL_OK;
    }
    if (n == -1) return stream_end(r, out_err);
    if (n == -2) return conn_error(r, "reading the replication stream",
                                   out_err);
    if (timeout_ms == 0) return SL_EAGAIN;
    int wait = -1;
    if (timeout_ms > 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) return SL_EAGAIN;
      wait = (int)left;
    }
    struct pollfd pfd = {.fd = PQsocket(r->conn), .events = POLLIN};
    int k = poll(&pfd, 1, wait);
    if (k < 0 && errno != EINTR)
      return sl_error_set(out_err, -errno, "%s: poll: %s", who,
                          strerror(errno));
    if (k == 0) return SL_EAGAIN;
    if (!PQconsumeInput(r->conn))
      return conn_error(r, "reading the replication stream", out_err);
  }
}
