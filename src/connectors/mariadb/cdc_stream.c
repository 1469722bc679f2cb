/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change stream (cdc_stream.h): binlog events from a resumable
 * position to row changes of the captured tables.  One replication
 * connection (binlog_reader.c) at a time; a short-lived control
 * connection for the checks (the start state against the server's, the
 * tables' column facts).  docs/cdc-mariadb.md "Change stream".
 *
 * Position bookkeeping, the heart of it:
 *
 *   st            GTID state of the last completed transaction
 *   in_txn        a GTID event was read and its end (XID, COMMIT,
 *                 ROLLBACK, XA_PREPARE, the QUERY of a standalone group)
 *                 not yet
 *   ev_index      index of the transaction's current event (GTID = 0);
 *                 events outside transactions (ROTATE, FORMAT_DESCRIPTION,
 *                 GTID_LIST, BINLOG_CHECKPOINT, HEARTBEAT, ...) are not
 *                 counted: they differ between two reads of the same
 *                 transaction
 *   done_events,  what of the current transaction was consumed: events
 *   done_rows     [0, done_events) whole, done_rows rows of the next
 *   has_skip,     the position the stream (re)started from: in the first
 *   skip_events,  transaction read, events before skip_events and the
 *   skip_rows     first skip_rows rows of event skip_events are consumed
 *                 without being returned
 *
 * pos() = st + max(done, skip) while that transaction runs, st + skip
 * before its GTID event arrives, st + 0 between transactions.  A
 * reconnect takes pos() as its start, so it is the same code path as a
 * restart from a checkpoint.
 */
#include "connectors/mariadb/cdc_stream.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include "connectors/mariadb/binlog_reader.h"
#include "connectors/mariadb/mariadb_int.h"
#include "core/core.h"
#include "core/inject.h"

/* A captured table's facts that MariaDB's default binlog_row_metadata=
 * NO_LOG leaves out of the TABLE_MAP. */
typedef struct {
  int is_unsigned;  /* 1 / 0 */
  uint16_t charset; /* a collation id of the column's character set; 0 */
  char **names;     /* ENUM/SET values, from COLUMN_TYPE */
  uint32_t n_names;
} colfact_t;

typedef struct {
  colfact_t *cols;
  sl_row_builder_t before, after;
  sl_row_t before_row, after_row; /* the rows last returned */
  bool has_builders;
} tstate_t;

typedef struct {
  uint64_t id;
  int32_t idx; /* captured table index, -1: not captured */
} tid_t;

struct sl__cdc_stream_s {
  /* Options (owned copies). */
  char *host, *user, *password, *server;
  int port;
  uint32_t server_id;
  sl__cdc_table_t **tables;
  uint32_t n_tables;
  bool is_non_blocking;
  uint32_t heartbeat_ms, connect_timeout_ms, max_reconnect_ms;
  tstate_t *ts;
  uint32_t max_cols;
  sl_binlog_value_t *bv, *av;
  sl_bytes_t scratch;

  /* mu protects reader (written by the stream's thread under mu, read
   * under mu by interrupt) and is_interrupted; cv wakes a backoff. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sl_binlog_reader_t *reader;
  bool is_interrupted;

  /* The rest belongs to the stream's thread. */
  sl_binlog_decoder_t dec;
  tid_t *tids;
  uint32_t n_tids, cap_tids;
  bool is_eof;
  bool is_file_mode;       /* started from file/offset (no GTID state) */
  sl_binlog_gtid_state_t st;
  char file[512];          /* after the last completed transaction */
  uint64_t offset;
  bool in_txn;
  sl_binlog_gtid_t gtid;   /* the running transaction's */
  uint8_t gtid_flags;
  char txn_file[512];      /* its GTID event's place */
  uint64_t txn_offset;
  uint32_t ev_index;
  uint64_t done_events, done_rows;
  bool has_skip, skip_active;
  uint64_t skip_events, skip_rows;
  bool has_expect;         /* reconnected inside this transaction */
  sl_binlog_gtid_t expect;
  /* The rows event being returned row by row (its bytes are the reader's
   * buffer, valid until the next read). */
  bool in_rows;
  sl_binlog_event_t rev;
  sl_binlog_rows_iter_t it;
  uint32_t rows_table, rows_ev_index, row_index;
  bool replay;             /* dispatch rev again (a GTID that ended the
                              previous transaction) */
  uint32_t n_quiet;        /* events consumed since something returned */
};

#define QUIET_MAX 1000u

static bool ieq(const char *a, const char *b) {
  return strcasecmp(a, b) == 0;
}

static void fmt_state(const sl_binlog_gtid_state_t *st, char *buf,
                      size_t size) {
  size_t o = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < st->n && o < size; i++)
    o += (size_t)snprintf(buf + o, size - o, "%s%" PRIu32 "-%" PRIu32
                          "-%" PRIu64, i ? "," : "", st->g[i].domain,
                          st->g[i].server_id, st->g[i].seq);
  if (st->n == 0) snprintf(buf, size, "(empty)");
}

static void fmt_gtid(const sl_binlog_gtid_t *g, char *buf, size_t size) {
  snprintf(buf, size, "%" PRIu32 "-%" PRIu32 "-%" PRIu64, g->domain,
           g->server_id, g->seq);
}

/* ------------------------------------------------------------------ */
/* Column facts.                                                        */

/* The values of an enum('a','it''s') / set(...) COLUMN_TYPE. */
static int parse_names(const char *ct, colfact_t *f) {
  const char *p = strchr(ct, '(');
  if (p == NULL) return SL_OK;
  p++;
  uint32_t cap = 8;
  f->names = sl_calloc(cap, sizeof(*f->names));
  if (f->names == NULL) return SL_ENOMEM;
  while (*p == '\'') {
    const char *q = p + 1;
    size_t len = 0;
    char *v = sl_malloc(strlen(q) + 1);
    if (v == NULL) return SL_ENOMEM;
    while (*q) {
      if (*q == '\'' && q[1] == '\'') {
        v[len++] = '\'';
        q += 2;
        continue;
      }
      if (*q == '\'') break;
      v[len++] = *q++;
    }
    v[len] = '\0';
    if (f->n_names == cap) {
      char **nn = sl_realloc(f->names, 2 * cap * sizeof(*nn));
      if (nn == NULL) {
        sl_free(v);
        return SL_ENOMEM;
      }
      f->names = nn;
      cap *= 2;
    }
    f->names[f->n_names++] = v;
    if (*q != '\'') break;
    p = q + 1;
    if (*p == ',') p++;
  }
  return SL_OK;
}

/* A collation id of a character set name: binlog_map.c only tells the
 * set apart (UTF-8, ASCII, latin1, binary). */
static uint16_t charset_id(const char *cs) {
  if (cs == NULL) return 0;
  if (ieq(cs, "utf8mb4")) return 45;
  if (ieq(cs, "utf8mb3") || ieq(cs, "utf8")) return 33;
  if (ieq(cs, "ascii")) return 11;
  if (ieq(cs, "latin1")) return 8;
  if (ieq(cs, "binary")) return SL_BL_CHARSET_BINARY;
  return 0;
}

static int load_facts(sl__cdc_stream_t *s, MYSQL *c, uint32_t ti,
                      sl_error_t **out_err) {
  const sl__cdc_table_t *t = s->tables[ti];
  tstate_t *ts = &s->ts[ti];
  ts->cols = sl_calloc(t->n_cols ? t->n_cols : 1, sizeof(*ts->cols));
  if (ts->cols == NULL) return SL_ENOMEM;
  for (uint32_t i = 0; i < t->n_cols; i++) {
    const sl__cdc_col_t *col = &t->cols[i];
    ts->cols[i].is_unsigned = strstr(col->column_type, "unsigned") != NULL;
    if (col->conv == SL_CDC_CONV_BYTES)
      ts->cols[i].charset = SL_BL_CHARSET_BINARY;
    if ((!strcmp(col->data_type, "enum") || !strcmp(col->data_type, "set")) &&
        parse_names(col->column_type, &ts->cols[i]) != SL_OK)
      return SL_ENOMEM;
  }
  /* Character sets: the description keeps the sluice type only. */
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(
      &q, "SELECT COLUMN_NAME, CHARACTER_SET_NAME FROM "
          "information_schema.COLUMNS WHERE TABLE_SCHEMA = '");
  char *e1 = sl_malloc(2 * strlen(t->db) + 1);
  char *e2 = sl_malloc(2 * strlen(t->name) + 1);
  if (e1 == NULL || e2 == NULL) rc = SL_ENOMEM;
  if (rc == SL_OK) {
    mysql_real_escape_string(c, e1, t->db, (unsigned long)strlen(t->db));
    mysql_real_escape_string(c, e2, t->name, (unsigned long)strlen(t->name));
    rc = sl_bytes_printf(&q, "%s' AND TABLE_NAME = '%s' ORDER BY "
                         "ORDINAL_POSITION", e1, e2);
  }
  sl_free(e1);
  sl_free(e2);
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return SL_ENOMEM;
  }
  MYSQL_RES *res = NULL;
  if (mysql_query(c, sql) != 0 || (res = mysql_store_result(c)) == NULL) {
    rc = sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: %s failed: error "
                      "%u: %s", s->server, sql, mysql_errno(c),
                      mysql_error(c));
    sl_bytes_close(&q);
    return rc;
  }
  sl_bytes_close(&q);
  /* By name: a table changed since it was described (a DDL ahead in
   * the binlog) is reported where the stream meets the change, with its
   * place and statement, not here. */
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(res)) != NULL)
    for (uint32_t i = 0; i < t->n_cols; i++)
      if (row[0] != NULL && ieq(row[0], t->cols[i].name) &&
          t->cols[i].conv == SL_CDC_CONV_STRING && row[1] != NULL)
        s->ts[ti].cols[i].charset = charset_id(row[1]);
  mysql_free_result(res);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Connecting.                                                          */

static bool is_lost(unsigned e) {
  return sl__mariadb_is_conn_error(e) || e == CR_SERVER_LOST_EXTENDED ||
         e == ER_NET_READ_ERROR || e == ER_NET_READ_INTERRUPTED ||
         e == ER_CON_COUNT_ERROR || e == ER_QUERY_INTERRUPTED;
}

/* The start state against the server's @@gtid_binlog_pos: every domain
 * of st there, at or after st's sequence number. */
static int check_state(sl__cdc_stream_t *s, MYSQL *c, bool *out_retry,
                       sl_error_t **out_err) {
  char buf[SL_CDC_GTID_MAX];
  bool found;
  unsigned e;
  if (sl__mariadb_query_text(c, "SELECT @@gtid_binlog_pos", buf, sizeof(buf),
                             &found, &e) != SL_OK) {
    *out_retry = is_lost(e);
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SELECT "
                        "@@gtid_binlog_pos failed: error %u: %s", s->server,
                        e, mysql_error(c));
  }
  if (!found) buf[0] = '\0';
  sl_binlog_gtid_state_t srv;
  int rc = sl__binlog_gtid_state_parse(buf, &srv, out_err);
  if (rc != SL_OK) {
    if (out_err && *out_err)
      sl_error_prefix(*out_err, "mariadb-cdc: %s: @@gtid_binlog_pos '%s'",
                      s->server, buf);
    return rc;
  }
  for (uint32_t i = 0; i < s->st.n; i++) {
    const sl_binlog_gtid_t *g = &s->st.g[i];
    const sl_binlog_gtid_t *h = NULL;
    for (uint32_t k = 0; k < srv.n; k++)
      if (srv.g[k].domain == g->domain) h = &srv.g[k];
    if (h != NULL && h->seq >= g->seq) continue;
    char a[1024], b[1024], why[128];
    fmt_state(&s->st, a, sizeof(a));
    fmt_state(&srv, b, sizeof(b));
    if (h == NULL)
      snprintf(why, sizeof(why), "domain %" PRIu32 " is not in the "
               "server's state", g->domain);
    else
      snprintf(why, sizeof(why), "domain %" PRIu32 ": %" PRIu64 " > %"
               PRIu64, g->domain, g->seq, h->seq);
    return sl_error_set(out_err, SL_EIO,
                        "mariadb-cdc: the binlog of %s is behind the "
                        "position to resume from: the position's GTID state "
                        "is %s, the server's (@@gtid_binlog_pos) is %s (%s); "
                        "the server's identity or history changed (RESET "
                        "MASTER, a restore from a backup, or another server "
                        "at this address): the job cannot resume without "
                        "loss or duplicates; start it again with a new "
                        "snapshot",
                        s->server, a, b, why);
  }
  return SL_OK;
}

static void reset_decoder(sl__cdc_stream_t *s, sl_binlog_checksum_t cs) {
  sl__binlog_decoder_close(&s->dec);
  sl__binlog_decoder_init(&s->dec, cs);
  s->n_tids = 0;
}

/*
 * One attempt: control connection, the state check (GTID start), the
 * replication connection from pos().  *out_retry: the failure is a lost
 * or refused connection (try again later).
 */
static int connect_once(sl__cdc_stream_t *s, MYSQL **keep_ctl,
                        bool *out_retry, sl_error_t **out_err) {
  *out_retry = false;
  MYSQL *c = NULL;
  int rc = sl__cdc_connect(s->host, s->port, s->user, s->password,
                           s->connect_timeout_ms, &c, out_err);
  if (rc != SL_OK) {
    *out_retry = rc == SL_EIO;
    return rc;
  }
  if (!s->is_file_mode && s->st.n > 0 &&
      (rc = check_state(s, c, out_retry, out_err)) != SL_OK) {
    mysql_close(c);
    return rc;
  }
  if (keep_ctl != NULL) *keep_ctl = c;
  else mysql_close(c);
  char start[SL_CDC_GTID_MAX];
  start[0] = '\0';
  if (s->st.n > 0) fmt_state(&s->st, start, sizeof(start));
  unsigned eno = 0;
  uint32_t hb = s->heartbeat_ms;
  /* Without a heartbeat an idle stream would hit the read timeout and
   * reconnect: an internal one (not returned) keeps it alive. */
  if (hb == 0 && !s->is_non_blocking) hb = 5000;
  sl_binlog_reader_opts_t ro = {
      .host = s->host,
      .port = s->port,
      .user = s->user,
      .password = s->password,
      .server_id = s->server_id,
      .gtid_start = s->is_file_mode ? NULL : start,
      .file = s->is_file_mode ? s->file : NULL,
      .pos = (uint32_t)s->offset,
      .is_non_blocking = s->is_non_blocking,
      .heartbeat_ms = hb,
      .read_timeout_s = hb ? 3 * (hb / 1000) + 10 : 0,
      .connect_timeout_s = (s->connect_timeout_ms + 999) / 1000,
      .out_errno = &eno};
  sl_binlog_reader_t *r = NULL;
  rc = sl__binlog_reader_open(&ro, &r, out_err);
  if (rc != SL_OK) {
    *out_retry = rc == SL_EIO && is_lost(eno);
    if (out_err && *out_err)
      sl_error_prefix(*out_err, "mariadb-cdc: %s", s->server);
    return rc;
  }
  reset_decoder(s, sl__binlog_reader_checksum(r));
  pthread_mutex_lock(&s->mu);
  bool is_cancelled = s->is_interrupted;
  if (!is_cancelled) s->reader = r;
  pthread_mutex_unlock(&s->mu);
  if (is_cancelled) {
    sl__binlog_reader_close(r);
    return sl_error_set(out_err, SL_ECANCELED, "mariadb-cdc: %s: the "
                        "change stream was interrupted", s->server);
  }
  return SL_OK;
}

static void drop_reader(sl__cdc_stream_t *s) {
  pthread_mutex_lock(&s->mu);
  sl_binlog_reader_t *r = s->reader;
  s->reader = NULL;
  pthread_mutex_unlock(&s->mu);
  sl__binlog_reader_close(r);
}

static bool interrupted(sl__cdc_stream_t *s) {
  pthread_mutex_lock(&s->mu);
  bool is = s->is_interrupted;
  pthread_mutex_unlock(&s->mu);
  return is;
}

static int cancelled(sl__cdc_stream_t *s, sl_error_t **out_err) {
  return sl_error_set(out_err, SL_ECANCELED, "mariadb-cdc: %s: the change "
                      "stream was interrupted", s->server);
}

/* The position as the restart point of a (re)connect: the running
 * transaction is read again from its GTID event. */
static void restart_here(sl__cdc_stream_t *s) {
  sl_binlog_pos_t p;
  sl__cdc_stream_pos(s, &p);
  if (s->in_txn) {
    s->has_expect = true;
    s->expect = s->gtid;
    snprintf(s->file, sizeof(s->file), "%s", s->txn_file);
    s->offset = s->txn_offset;
  }
  s->has_skip = p.skip_events > 0 || p.skip_rows > 0;
  s->skip_events = p.skip_events;
  s->skip_rows = p.skip_rows;
  s->in_txn = false;
  s->skip_active = false;
  s->in_rows = false;
  s->replay = false;
}

/* Waits ms or until interrupted.  @return true when interrupted. */
static bool backoff_wait(sl__cdc_stream_t *s, uint32_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&s->mu);
  while (!s->is_interrupted &&
         pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {
  }
  bool is = s->is_interrupted;
  pthread_mutex_unlock(&s->mu);
  return is;
}

/* After a lost connection (first_err, which this takes): reconnect with
 * backoff from pos(), up to max_reconnect_ms. */
static int reconnect(sl__cdc_stream_t *s, sl_error_t *first_err,
                     sl_error_t **out_err) {
  drop_reader(s);
  restart_here(s);
  int64_t t0 = sl__clock_monotonic_ns();
  uint32_t delay = 100, n = 0;
  sl_error_t *last = first_err;
  for (;;) {
    if (backoff_wait(s, delay)) {
      sl_error_destroy(last);
      return cancelled(s, out_err);
    }
    n++;
    sl_error_t *e = NULL;
    bool retry = false;
    int rc = connect_once(s, NULL, &retry, &e);
    if (rc == SL_OK) {
      sl_error_destroy(last);
      sl_log(SL_LOG_INFO, "mariadb-cdc: %s: binlog stream reconnected after "
             "%u attempts", s->server, n);
      return SL_OK;
    }
    if (!retry) {
      sl_error_destroy(last);
      if (out_err) *out_err = e;
      else sl_error_destroy(e);
      return rc;
    }
    sl_error_destroy(last);
    last = e;
    int64_t el_ms = (sl__clock_monotonic_ns() - t0) / 1000000;
    if (el_ms >= (int64_t)s->max_reconnect_ms) {
      rc = sl_error_set(out_err, SL_EIO,
                        "mariadb-cdc: lost the binlog stream of %s and could "
                        "not reconnect within %u ms (%u attempts); last "
                        "error: %s",
                        s->server, s->max_reconnect_ms, n,
                        last ? sl_error_message(last) : "(none)");
      sl_error_destroy(last);
      return rc;
    }
    delay = delay * 2 > 5000 ? 5000 : delay * 2;
  }
}

/* ------------------------------------------------------------------ */
/* Open and close.                                                      */

void sl__cdc_stream_close(sl__cdc_stream_t *s) {
  if (s == NULL) return;
  drop_reader(s);
  sl__binlog_decoder_close(&s->dec);
  if (s->ts != NULL)
    for (uint32_t i = 0; i < s->n_tables; i++) {
      tstate_t *ts = &s->ts[i];
      if (ts->cols != NULL)
        for (uint32_t k = 0; k < s->tables[i]->n_cols; k++) {
          for (uint32_t j = 0; j < ts->cols[k].n_names; j++)
            sl_free(ts->cols[k].names[j]);
          sl_free(ts->cols[k].names);
        }
      sl_free(ts->cols);
      if (ts->has_builders) {
        sl_row_builder_close(&ts->before);
        sl_row_builder_close(&ts->after);
      }
    }
  sl_free(s->ts);
  sl_free(s->tables);
  sl_free(s->tids);
  sl_free(s->bv);
  sl_free(s->av);
  sl_bytes_close(&s->scratch);
  sl_free(s->host);
  sl_free(s->user);
  sl_free(s->password);
  sl_free(s->server);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  sl_free(s);
}

int sl__cdc_stream_open(const sl__cdc_stream_opts_t *o, sl__cdc_stream_t **out,
                        sl_error_t **out_err) {
  if (o->host == NULL || o->user == NULL || o->server == NULL ||
      o->start == NULL || o->server_id == 0 ||
      (o->n_tables > 0 && o->tables == NULL))
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: change stream: "
                        "host, user, server, a start position and a server "
                        "id other than 0 are required");
  sl__cdc_stream_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  sl__binlog_decoder_init(&s->dec, SL_BINLOG_CHECKSUM_OFF);
  sl_bytes_init(&s->scratch);
  int rc = SL_OK;
  MYSQL *c = NULL;
  s->host = sl_strdup(o->host);
  s->user = sl_strdup(o->user);
  s->password = o->password ? sl_strdup(o->password) : NULL;
  s->server = sl_strdup(o->server);
  s->tables = sl_calloc(o->n_tables ? o->n_tables : 1, sizeof(*s->tables));
  s->ts = sl_calloc(o->n_tables ? o->n_tables : 1, sizeof(*s->ts));
  if (s->host == NULL || s->user == NULL || s->server == NULL ||
      (o->password && s->password == NULL) || s->tables == NULL ||
      s->ts == NULL) {
    rc = SL_ENOMEM;
    goto fail;
  }
  s->port = o->port;
  s->server_id = o->server_id;
  s->n_tables = o->n_tables;
  for (uint32_t i = 0; i < o->n_tables; i++) {
    s->tables[i] = o->tables[i];
    if (s->tables[i]->n_cols > s->max_cols)
      s->max_cols = s->tables[i]->n_cols;
  }
  s->is_non_blocking = o->is_non_blocking;
  s->heartbeat_ms = o->heartbeat_ms;
  s->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms
                                                : 10000;
  s->max_reconnect_ms = o->max_reconnect_ms ? o->max_reconnect_ms : 60000;
  s->bv = sl_calloc(s->max_cols ? s->max_cols : 1, sizeof(*s->bv));
  s->av = sl_calloc(s->max_cols ? s->max_cols : 1, sizeof(*s->av));
  if (s->bv == NULL || s->av == NULL) {
    rc = SL_ENOMEM;
    goto fail;
  }
  for (uint32_t i = 0; i < s->n_tables; i++) {
    if ((rc = sl_row_builder_init(&s->ts[i].before,
                                  s->tables[i]->schema)) != SL_OK)
      goto fail;
    if ((rc = sl_row_builder_init(&s->ts[i].after,
                                  s->tables[i]->schema)) != SL_OK) {
      sl_row_builder_close(&s->ts[i].before);
      goto fail;
    }
    s->ts[i].has_builders = true;
  }
  /* The start. */
  s->st = o->start->gtid;
  s->is_file_mode = o->start->gtid.n == 0 && o->start->file[0] != '\0';
  snprintf(s->file, sizeof(s->file), "%s", o->start->file);
  s->offset = s->is_file_mode ? (o->start->offset ? o->start->offset : 4)
                              : o->start->offset;
  if (s->is_file_mode && s->offset > UINT32_MAX) {
    rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: %s: binlog offset "
                      "%" PRIu64 " of %s is out of range", s->server,
                      s->offset, s->file);
    goto fail;
  }
  s->has_skip = o->start->skip_events > 0 || o->start->skip_rows > 0;
  s->skip_events = o->start->skip_events;
  s->skip_rows = o->start->skip_rows;
  bool retry;
  if ((rc = connect_once(s, &c, &retry, out_err)) != SL_OK) goto fail;
  for (uint32_t i = 0; i < s->n_tables; i++)
    if ((rc = load_facts(s, c, i, out_err)) != SL_OK) goto fail;
  mysql_close(c);
  *out = s;
  return SL_OK;
fail:
  if (c != NULL) mysql_close(c);
  sl__cdc_stream_close(s);
  return rc;
}

void sl__cdc_stream_interrupt(sl__cdc_stream_t *s) {
  pthread_mutex_lock(&s->mu);
  s->is_interrupted = true;
  if (s->reader != NULL) sl__binlog_reader_interrupt(s->reader);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------ */
/* Positions.                                                           */

static bool pair_lt(uint64_t ae, uint64_t ar, uint64_t be, uint64_t br) {
  return ae < be || (ae == be && ar < br);
}

void sl__cdc_stream_pos(const sl__cdc_stream_t *s, sl_binlog_pos_t *out) {
  memset(out, 0, sizeof(*out));
  /* In file mode the state holds only the domains seen since the start:
   * resuming from it would send every other domain from its beginning,
   * so the position stays file/offset. */
  if (!s->is_file_mode) out->gtid = s->st;
  if (s->in_txn) {
    out->skip_events = s->done_events;
    out->skip_rows = s->done_rows;
    if (s->skip_active &&
        pair_lt(out->skip_events, out->skip_rows, s->skip_events,
                s->skip_rows)) {
      out->skip_events = s->skip_events;
      out->skip_rows = s->skip_rows;
    }
    snprintf(out->file, sizeof(out->file), "%s", s->txn_file);
    out->offset = s->txn_offset;
  } else {
    if (s->has_skip) {
      out->skip_events = s->skip_events;
      out->skip_rows = s->skip_rows;
    }
    snprintf(out->file, sizeof(out->file), "%s", s->file);
    out->offset = s->offset;
  }
}

/* ------------------------------------------------------------------ */
/* Events.                                                              */

static const char *ev_file(const sl__cdc_stream_t *s) {
  const char *f = sl__binlog_decoder_file(&s->dec);
  return f[0] ? f : "(unknown file)";
}

static uint64_t ev_start(const sl_binlog_event_t *e) {
  return e->next_pos >= e->event_len ? e->next_pos - e->event_len : 0;
}

static int find_table(const sl__cdc_stream_t *s, const char *db,
                      const char *name) {
  for (uint32_t i = 0; i < s->n_tables; i++)
    if (strcmp(s->tables[i]->db, db) == 0 &&
        strcmp(s->tables[i]->name, name) == 0)
      return (int)i;
  return -1;
}

static int set_tid(sl__cdc_stream_t *s, uint64_t id, int32_t idx) {
  for (uint32_t i = 0; i < s->n_tids; i++)
    if (s->tids[i].id == id) {
      s->tids[i].idx = idx;
      return SL_OK;
    }
  if (s->n_tids == s->cap_tids) {
    uint32_t cap = s->cap_tids ? 2 * s->cap_tids : 16;
    tid_t *n = sl_realloc(s->tids, cap * sizeof(*n));
    if (n == NULL) return SL_ENOMEM;
    s->tids = n;
    s->cap_tids = cap;
  }
  s->tids[s->n_tids++] = (tid_t){id, idx};
  return SL_OK;
}

static int32_t get_tid(const sl__cdc_stream_t *s, uint64_t id) {
  for (uint32_t i = 0; i < s->n_tids; i++)
    if (s->tids[i].id == id) return s->tids[i].idx;
  return -1;
}

static int changed(sl__cdc_stream_t *s, const sl__cdc_table_t *t,
                   const sl_binlog_event_t *e, const char *what,
                   sl_error_t **out_err) {
  char g[64];
  fmt_gtid(&s->gtid, g, sizeof(g));
  return sl_error_set(out_err, SL_ENOTSUP,
                      "mariadb-cdc: table `%s`.`%s` in the binlog of %s at "
                      "%s:%" PRIu64 " (GTID %s) does not match the job's "
                      "description of it: %s; the table changed (sluice "
                      "cannot change a running job's schema): start the "
                      "job again with a new snapshot",
                      t->db, t->name, s->server, ev_file(s), ev_start(e), g,
                      what);
}

/* A TABLE_MAP of a captured table: the facts it lacks, then the check
 * against the description. */
static int on_table_map(sl__cdc_stream_t *s, const sl_binlog_event_t *e,
                        sl_error_t **out_err) {
  const sl_binlog_table_t *bt = e->u.table_map.table;
  int idx = find_table(s, bt->schema, bt->table);
  int rc = set_tid(s, bt->table_id, idx);
  if (rc != SL_OK || idx < 0) return rc;
  const sl__cdc_table_t *t = s->tables[idx];
  const tstate_t *ts = &s->ts[idx];
  char what[512];
  if (bt->n_cols != t->n_cols) {
    snprintf(what, sizeof(what), "%u columns in the binlog, %u described",
             bt->n_cols, t->n_cols);
    return changed(s, t, e, what, out_err);
  }
  for (uint32_t i = 0; i < t->n_cols; i++) {
    const sl_binlog_col_t *bc = &bt->cols[i];
    const colfact_t *f = &ts->cols[i];
    if (bc->name != NULL && !ieq(bc->name, t->cols[i].name)) {
      snprintf(what, sizeof(what), "column %u is `%s` in the binlog, `%s` "
               "described", i, bc->name, t->cols[i].name);
      return changed(s, t, e, what, out_err);
    }
    rc = sl__binlog_table_set_col(
        &s->dec, bt->table_id, i, bc->name ? NULL : t->cols[i].name,
        bc->has_sign ? -1 : f->is_unsigned, bc->charset ? 0 : f->charset,
        (bc->type == SL_BLT_ENUM || bc->type == SL_BLT_SET) &&
                bc->n_names == 0 && f->n_names > 0
            ? (const char *const *)f->names
            : NULL,
        f->n_names, out_err);
    if (rc != SL_OK) return rc;
    sl_type_t ty;
    sl_error_t *te = NULL;
    rc = sl__binlog_col_sl_type(bc, &ty, &te);
    if (rc != SL_OK) {
      snprintf(what, sizeof(what), "column `%s`: %s", t->cols[i].name,
               sl_error_message(te));
      sl_error_destroy(te);
      return changed(s, t, e, what, out_err);
    }
    const sl_type_t *dt = &t->cols[i].type;
    if (ty.id != dt->id || ty.nullable != dt->nullable ||
        (ty.id == SL_TYPE_DECIMAL &&
         (ty.precision != dt->precision || ty.scale != dt->scale))) {
      char a[48], b[48];
      sl_type_format(ty, a, sizeof(a));
      sl_type_format(*dt, b, sizeof(b));
      snprintf(what, sizeof(what), "column `%s` is %s%s in the binlog, "
               "%s%s described", t->cols[i].name, a,
               ty.nullable ? " (nullable)" : " (not null)", b,
               dt->nullable ? " (nullable)" : " (not null)");
      return changed(s, t, e, what, out_err);
    }
  }
  return SL_OK;
}

typedef struct {
  sl__cdc_stream_t *s;
  int hit; /* captured table index */
} ddl_ctx_t;

static int ddl_hit(void *ctx, const char *db, const char *table) {
  ddl_ctx_t *d = ctx;
  for (uint32_t i = 0; i < d->s->n_tables; i++) {
    const sl__cdc_table_t *t = d->s->tables[i];
    /* Names compare without case: a server with lower_case_table_names=0
     * tells `T` from `t`, and the refusal errs on the safe side. */
    if ((db == NULL || db[0] == '\0' || ieq(db, t->db)) &&
        (table == NULL || ieq(table, t->name))) {
      d->hit = (int)i;
      return 1;
    }
  }
  return 0;
}

/* The first word of a statement, for BEGIN/COMMIT/XA ... */
static bool starts_with_word(const uint8_t *p, uint32_t n, const char *w) {
  uint32_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' ||
                   p[i] == '\r'))
    i++;
  size_t l = strlen(w);
  if (n - i < l || strncasecmp((const char *)p + i, w, l) != 0) return false;
  return n - i == l || !((p[i + l] >= 'A' && p[i + l] <= 'Z') ||
                         (p[i + l] >= 'a' && p[i + l] <= 'z') ||
                         p[i + l] == '_');
}

/* Whether word w occurs as a whole word in q (ASCII letters). */
static bool has_word(const uint8_t *q, uint32_t n, const char *w) {
  size_t l = strlen(w);
  for (uint32_t i = 0; i + l <= n; i++) {
    if (strncasecmp((const char *)q + i, w, l) != 0) continue;
    bool is_start = i == 0 || !(isalnum(q[i - 1]) || q[i - 1] == '_');
    bool is_stop = i + l == n || !(isalnum(q[i + l]) || q[i + l] == '_');
    if (is_start && is_stop) return true;
  }
  return false;
}

static int on_query(sl__cdc_stream_t *s, const sl_binlog_event_t *e,
                    bool *out_is_end, sl_error_t **out_err) {
  const uint8_t *q = e->u.query.sql.p;
  uint32_t n = e->u.query.sql.len;
  *out_is_end = false;
  bool is_standalone = (s->gtid_flags & SL_BL_GTID_STANDALONE) != 0;
  if (starts_with_word(q, n, "COMMIT")) {
    *out_is_end = true;
    return SL_OK;
  }
  if (starts_with_word(q, n, "ROLLBACK")) {
    /* ROLLBACK [WORK] TO [SAVEPOINT] x stays inside the transaction. */
    *out_is_end = !has_word(q, n, "TO");
    return SL_OK;
  }
  if (starts_with_word(q, n, "XA")) {
    /* XA PREPARE's group ends with an XA_PREPARE event; XA COMMIT and XA
     * ROLLBACK of a prepared transaction are groups of their own. */
    *out_is_end = is_standalone ||
                  ((s->gtid_flags & SL_BL_GTID_COMPLETED_XA) != 0 &&
                   (has_word(q, n, "COMMIT") || has_word(q, n, "ROLLBACK")));
    return SL_OK;
  }
  if (starts_with_word(q, n, "BEGIN") || starts_with_word(q, n, "SAVEPOINT") ||
      starts_with_word(q, n, "RELEASE")) {
    *out_is_end = is_standalone;
    return SL_OK;
  }
  char db[256];
  snprintf(db, sizeof(db), "%.*s", (int)e->u.query.schema.len,
           (const char *)e->u.query.schema.p);
  ddl_ctx_t d = {s, -1};
  (void)sl__cdc_ddl_targets((const char *)q, n, db[0] ? db : NULL, ddl_hit,
                            &d);
  if (d.hit >= 0) {
    const sl__cdc_table_t *t = s->tables[d.hit];
    char g[64];
    fmt_gtid(&s->gtid, g, sizeof(g));
    return sl_error_set(out_err, SL_ENOTSUP,
                        "mariadb-cdc: DDL on captured table `%s`.`%s` at "
                        "%s:%" PRIu64 " (GTID %s): %.*s%s; sluice cannot "
                        "change a running job's schema (adding a column is "
                        "refused too: no sluice sink follows a schema "
                        "change yet): start the job again without its "
                        "checkpoint, with a new snapshot of the table",
                        t->db, t->name, ev_file(s), ev_start(e), g,
                        n > 1024 ? 1024 : (int)n, (const char *)q,
                        n > 1024 ? "..." : "");
  }
  *out_is_end = is_standalone || !s->in_txn;
  return SL_OK;
}

static void end_txn(sl__cdc_stream_t *s, const sl_binlog_event_t *e,
                    sl__cdc_ev_t *ev) {
  s->in_txn = false;
  s->skip_active = false;
  snprintf(s->file, sizeof(s->file), "%s", sl__binlog_decoder_file(&s->dec));
  s->offset = e->next_pos;
  memset(ev, 0, sizeof(*ev));
  ev->kind = SL_CDC_EV_TXN_END;
  ev->gtid = s->gtid;
  ev->event_index = s->ev_index;
  ev->when_us = (int64_t)e->timestamp * 1000000;
}

static int txn_end(sl__cdc_stream_t *s, const sl_binlog_event_t *e,
                   sl__cdc_ev_t *ev, sl_error_t **out_err) {
  if (s->skip_active && s->ev_index < s->skip_events) {
    char g[64];
    fmt_gtid(&s->gtid, g, sizeof(g));
    return sl_error_set(out_err, SL_ECORRUPT,
                        "mariadb-cdc: %s: the position skips %" PRIu64
                        " events of transaction %s, which ends at its event "
                        "%u (the position does not belong to this server's "
                        "binlog)",
                        s->server, s->skip_events, g, s->ev_index);
  }
  int rc = sl__binlog_gtid_state_update(&s->st, &s->gtid);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "mariadb-cdc: %s: more than %u GTID "
                        "domains", s->server, SL_BINLOG_MAX_DOMAINS);
  end_txn(s, e, ev);
  return SL_OK;
}

/* A GTID event: a transaction begins. */
static int on_gtid(sl__cdc_stream_t *s, const sl_binlog_event_t *e,
                   sl_error_t **out_err) {
  sl_binlog_gtid_t g = e->u.gtid.gtid;
  char a[64], b[64];
  fmt_gtid(&g, a, sizeof(a));
  if (s->has_expect) {
    s->has_expect = false;
    if (g.domain != s->expect.domain || g.server_id != s->expect.server_id ||
        g.seq != s->expect.seq) {
      fmt_gtid(&s->expect, b, sizeof(b));
      return sl_error_set(out_err, SL_EIO,
                          "mariadb-cdc: after reconnecting to %s the binlog "
                          "went on with transaction %s instead of %s, which "
                          "was being read; the server's history changed: "
                          "the job cannot resume without loss or duplicates",
                          s->server, a, b);
    }
  }
  if (!s->is_file_mode)
    for (uint32_t i = 0; i < s->st.n; i++)
      if (s->st.g[i].domain == g.domain && s->st.g[i].seq >= g.seq) {
        fmt_gtid(&s->st.g[i], b, sizeof(b));
        return sl_error_set(out_err, SL_ECORRUPT,
                            "mariadb-cdc: %s sent transaction %s, which is "
                            "not after the position's %s in its domain",
                            s->server, a, b);
      }
  s->in_txn = true;
  s->gtid = g;
  s->gtid_flags = e->u.gtid.flags2;
  s->ev_index = 0;
  s->done_events = 1;
  s->done_rows = 0;
  snprintf(s->txn_file, sizeof(s->txn_file), "%s",
           sl__binlog_decoder_file(&s->dec));
  s->txn_offset = ev_start(e);
  s->skip_active = s->has_skip;
  s->has_skip = false;
  return SL_OK;
}

static bool is_outside(uint8_t t) {
  return t == SL_BLE_ROTATE || t == SL_BLE_FORMAT_DESCRIPTION ||
         t == SL_BLE_GTID_LIST || t == SL_BLE_BINLOG_CHECKPOINT ||
         t == SL_BLE_HEARTBEAT || t == SL_BLE_START_ENCRYPTION ||
         t == SL_BLE_STOP || t == SL_BLE_MYSQL_HEARTBEAT_V2 ||
         t == SL_BLE_MYSQL_PREVIOUS_GTIDS;
}

static bool is_rows(uint8_t t) {
  return t == SL_BLE_WRITE_ROWS_V1 || t == SL_BLE_UPDATE_ROWS_V1 ||
         t == SL_BLE_DELETE_ROWS_V1 || t == SL_BLE_WRITE_ROWS_V2 ||
         t == SL_BLE_UPDATE_ROWS_V2 || t == SL_BLE_DELETE_ROWS_V2;
}

static void heartbeat(sl__cdc_stream_t *s, sl__cdc_ev_t *ev) {
  memset(ev, 0, sizeof(*ev));
  ev->kind = SL_CDC_EV_HEARTBEAT;
  s->n_quiet = 0;
}

/*
 * Dispatch s->rev.  *out_has: ev was filled (return it).
 */
static int dispatch(sl__cdc_stream_t *s, sl__cdc_ev_t *ev, bool *out_has,
                    sl_error_t **out_err) {
  const sl_binlog_event_t *e = &s->rev;
  *out_has = false;
  if (is_outside(e->type)) {
    /* A real event between transactions (GTID_LIST, BINLOG_CHECKPOINT, a
     * file's FORMAT_DESCRIPTION) moves the file position past it: MariaDB
     * writes a BINLOG_CHECKPOINT into a new file some time after a
     * rotation, and a backfill that stops at a HIGH just after it must
     * reach it.  ROTATE and HEARTBEAT name other places; artificial
     * events (next_pos 0) none. */
    if (!s->in_txn && e->next_pos != 0 && e->type != SL_BLE_ROTATE &&
        e->type != SL_BLE_HEARTBEAT &&
        e->type != SL_BLE_MYSQL_HEARTBEAT_V2) {
      snprintf(s->file, sizeof(s->file), "%s",
               sl__binlog_decoder_file(&s->dec));
      s->offset = e->next_pos;
    }
    if (e->type == SL_BLE_HEARTBEAT && s->heartbeat_ms > 0) {
      heartbeat(s, ev);
      *out_has = true;
    }
    return SL_OK;
  }
  if (e->type == SL_BLE_GTID) {
    if (s->in_txn) {
      /* The previous transaction had no end event of a kind known here:
       * it ends now, and this GTID is dispatched again next time. */
      int rc = txn_end(s, e, ev, out_err);
      if (rc != SL_OK) return rc;
      s->offset = ev_start(e);
      s->replay = true;
      *out_has = true;
      return SL_OK;
    }
    return on_gtid(s, e, out_err);
  }
  if (e->type == SL_BLE_MYSQL_GTID || e->type == SL_BLE_MYSQL_ANONYMOUS_GTID)
    return sl_error_set(out_err, SL_ENOTSUP, "mariadb-cdc: %s writes MySQL "
                        "GTIDs; the change stream reads MariaDB's only (MySQL "
                        "is not supported yet)", s->server);
  if (e->type == SL_BLE_INCIDENT)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: the binlog of %s has "
                        "an INCIDENT event at %s:%" PRIu64 " (the server "
                        "could not log some changes): the job cannot go on "
                        "without loss; start it again with a new snapshot",
                        s->server, ev_file(s), ev_start(e));
  bool is_counted = s->in_txn;
  if (is_counted) s->ev_index++;
  int rc = SL_OK;
  bool is_end = false;
  switch (e->type) {
  case SL_BLE_TABLE_MAP:
    rc = on_table_map(s, e, out_err);
    break;
  case SL_BLE_XID:
  case SL_BLE_XA_PREPARE:
    is_end = true;
    break;
  case SL_BLE_QUERY:
    rc = on_query(s, e, &is_end, out_err);
    break;
  default:
    if (is_rows(e->type) && s->in_txn) {
      int32_t idx = get_tid(s, e->u.rows.table_id);
      bool is_skipped = s->skip_active && s->ev_index < s->skip_events;
      if (idx >= 0 && !is_skipped) {
        s->in_rows = true;
        s->rows_table = (uint32_t)idx;
        s->rows_ev_index = s->ev_index;
        s->row_index = 0;
        sl__binlog_rows_begin(&s->it, &s->rev);
        return SL_OK; /* the rows come next */
      }
    }
    break;
  }
  if (rc != SL_OK) return rc;
  if (is_end) {
    if (!s->in_txn) {
      /* An end without a GTID (a stream started inside a group, file
       * mode): nothing to count. */
      snprintf(s->file, sizeof(s->file), "%s",
               sl__binlog_decoder_file(&s->dec));
      s->offset = e->next_pos;
      return SL_OK;
    }
    rc = txn_end(s, e, ev, out_err);
    if (rc == SL_OK) *out_has = true;
    return rc;
  }
  if (is_counted) {
    s->done_events = s->ev_index + 1;
    s->done_rows = 0;
  }
  return SL_OK;
}

/* The next row of the rows event being returned.  *out_has: ev filled. */
static int rows_step(sl__cdc_stream_t *s, sl__cdc_ev_t *ev, bool *out_has,
                     sl_error_t **out_err) {
  *out_has = false;
  int rc = sl__binlog_rows_next(&s->dec, &s->it, s->bv, s->av, out_err);
  bool is_skip_event = s->skip_active && s->rows_ev_index == s->skip_events;
  if (rc == SL_ENOTFOUND) {
    s->in_rows = false;
    if (is_skip_event && s->row_index < s->skip_rows) {
      char g[64];
      fmt_gtid(&s->gtid, g, sizeof(g));
      return sl_error_set(out_err, SL_ECORRUPT,
                          "mariadb-cdc: %s: the position skips %" PRIu64
                          " rows of event %u of transaction %s, which has "
                          "%u (the position does not belong to this "
                          "server's binlog)",
                          s->server, s->skip_rows, s->rows_ev_index, g,
                          s->row_index);
    }
    s->done_events = s->rows_ev_index + 1;
    s->done_rows = 0;
    return SL_OK;
  }
  if (rc != SL_OK) {
    s->in_rows = false;
    if (out_err && *out_err)
      sl_error_prefix(*out_err, "mariadb-cdc: %s", s->server);
    return rc;
  }
  uint32_t r = s->row_index++;
  s->done_events = s->rows_ev_index;
  s->done_rows = (uint64_t)r + 1;
  if (is_skip_event && r < s->skip_rows) return SL_OK;
  const sl_binlog_table_t *bt = s->rev.u.rows.table;
  tstate_t *ts = &s->ts[s->rows_table];
  memset(ev, 0, sizeof(*ev));
  ev->kind = SL_CDC_EV_ROW;
  ev->table = s->rows_table;
  ev->gtid = s->gtid;
  ev->event_index = s->rows_ev_index;
  ev->row_index = r;
  ev->when_us = (int64_t)s->rev.timestamp * 1000000;
  uint8_t kind = s->rev.u.rows.kind;
  sl_row_t *rb = &ts->before_row, *ra = &ts->after_row;
  if (kind == 1 || kind == 2) {
    rc = sl__binlog_image_to_row(bt, s->bv,
                                 kind == 1 ? SL_ROW_UPDATE_BEFORE
                                           : SL_ROW_DELETE,
                                 &ts->before, &s->scratch, rb, out_err);
    if (rc != SL_OK) goto fail;
    ev->before = rb;
  }
  if (kind == 0 || kind == 1) {
    rc = sl__binlog_image_to_row(bt, s->av,
                                 kind == 1 ? SL_ROW_UPDATE_AFTER
                                           : SL_ROW_INSERT,
                                 &ts->after, &s->scratch, ra, out_err);
    if (rc != SL_OK) goto fail;
    ev->after = ra;
  }
  ev->row_kind = kind == 0 ? SL_ROW_INSERT
                 : kind == 1 ? SL_ROW_UPDATE_AFTER
                             : SL_ROW_DELETE;
  s->n_quiet = 0;
  *out_has = true;
  return SL_OK;
fail:
  s->in_rows = false;
  if (out_err && *out_err)
    sl_error_prefix(*out_err, "mariadb-cdc: %s: row %u of event %u of "
                    "transaction %" PRIu32 "-%" PRIu32 "-%" PRIu64, s->server,
                    r, s->rows_ev_index, s->gtid.domain, s->gtid.server_id,
                    s->gtid.seq);
  return rc;
}

/* Reads and decodes the next event into s->rev, reconnecting after a
 * lost connection. */
static int read_event(sl__cdc_stream_t *s, sl_error_t **out_err) {
  for (;;) {
    if (s->is_eof) return SL_ENOTFOUND;
    if (interrupted(s)) return cancelled(s, out_err);
    if (s->reader == NULL) {
      /* A reconnect gave up (or was interrupted) before: try again from
       * the same position, the caller asked for more. */
      int rc = reconnect(s, NULL, out_err);
      if (rc != SL_OK) return rc;
    }
    const uint8_t *p;
    size_t len;
    sl_error_t *e = NULL;
    int rc;
    unsigned eno;
    if (SL_INJECT("cdc.stream.before_read") != SL_OK) {
      /* A lost connection at this step (tests: inside a transaction). */
      rc = sl_error_set(&e, SL_EIO, "binlog reader %s: connection lost "
                        "(injected at cdc.stream.before_read)", s->server);
      eno = CR_SERVER_LOST;
    } else {
      rc = sl__binlog_reader_next(s->reader, &p, &len, &e);
      eno = sl__binlog_reader_errno(s->reader);
    }
    if (rc == SL_OK) {
      rc = sl__binlog_decode(&s->dec, p, len, &s->rev, out_err);
      if (rc != SL_OK && out_err && *out_err)
        sl_error_prefix(*out_err, "mariadb-cdc: %s", s->server);
      return rc;
    }
    if (rc == SL_ENOTFOUND) {
      sl_error_destroy(e);
      s->is_eof = true;
      return SL_ENOTFOUND;
    }
    if (interrupted(s)) {
      sl_error_destroy(e);
      return cancelled(s, out_err);
    }
    if (rc == SL_EIO && is_lost(eno)) {
      sl_log(SL_LOG_WARN, "mariadb-cdc: %s: binlog stream lost (%s); "
             "reconnecting", s->server, e ? sl_error_message(e) : "");
      rc = reconnect(s, e, out_err);
      if (rc != SL_OK) return rc;
      continue;
    }
    char st[1024];
    fmt_state(&s->st, st, sizeof(st));
    rc = sl_error_set(out_err, rc,
                      "mariadb-cdc: reading the binlog of %s from GTID state "
                      "%s: %s%s",
                      s->server, st, e ? sl_error_message(e) : "",
                      eno == 1236
                          ? "; the position is not (or no longer) in the "
                            "server's binlogs: the job cannot resume from it "
                            "without loss; start it again with a new "
                            "snapshot (and keep binlogs longer than a job "
                            "may be stopped)"
                          : "");
    sl_error_destroy(e);
    return rc;
  }
}

int sl__cdc_stream_next(sl__cdc_stream_t *s, sl__cdc_ev_t *ev,
                        sl_error_t **out_err) {
  if (interrupted(s)) return cancelled(s, out_err);
  for (;;) {
    int rc;
    bool has = false;
    if (s->in_rows) {
      rc = rows_step(s, ev, &has, out_err);
      if (rc != SL_OK || has) return rc;
      continue;
    }
    if (s->replay) {
      s->replay = false;
    } else {
      rc = read_event(s, out_err);
      if (rc != SL_OK) return rc;
    }
    rc = dispatch(s, ev, &has, out_err);
    if (rc != SL_OK) return rc;
    if (has) {
      s->n_quiet = 0;
      return SL_OK;
    }
    if (!s->in_rows && ++s->n_quiet >= QUIET_MAX) {
      heartbeat(s, ev);
      return SL_OK;
    }
  }
}
