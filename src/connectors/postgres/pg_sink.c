/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PostgreSQL sink (libpq): changelog rows into a table by COPY (mode
 * insert) or multi-row INSERT ... ON CONFLICT and DELETE by key (mode
 * upsert), exactly once through two-phase commit, or at least once with a
 * version column that never goes back.  It uses the public API only.
 *
 * DESIGN NOTES (exactly-once).  One writer connection per sink subtask,
 * one committer connection per sink subtask (the committer's is never
 * inside a transaction block, COMMIT PREPARED needs that).
 *
 *   writer:  IDLE --first row--> OPEN (BEGIN sent, rows in the txn)
 *            OPEN --prepare(N)--> IDLE (marker row, PREPARE TRANSACTION
 *                                 gid(E); E := N)
 *            IDLE --prepare(N)--> IDLE (empty epoch: no txn, no committable;
 *                                 E := N)
 *            any statement error --> FAILED (the task fails; writer_close
 *                                 rolls back what is open)
 *
 *   gid(E) = "sl/<job>/<sink uid>/<subtask>/<E>", E the epoch id the writer
 *   fills (sl_sink_init_t.epoch_id, then each prepare's checkpoint id).
 *   The engine never reuses an epoch id, so a gid names one epoch of one
 *   subtask of one sink of one job, in every attempt.
 *
 * Invariants:
 *   P1  the marker row (job, sink_uid, subtask, epoch) is inserted in the
 *       epoch's transaction, so it is visible if and only if the epoch
 *       committed: it is the proof commit() uses after "not found" (42704).
 *   P2  prepare succeeds only when the server's command tag is PREPARE
 *       TRANSACTION; PostgreSQL answers ROLLBACK (and no error) for a
 *       transaction that had failed, and that must fail the task.
 *   P3  commit answers OK or ALREADY only with proof (the command tag, or
 *       the marker row); when neither the prepared transaction nor the
 *       marker exists the answer is LOST, logged with every name.
 *   P4  recover rolls back only gids of this job and sink whose subtask is
 *       owned and that no committable given to commit() names.
 *
 * Fencing (pg_fence.c; failure window W9, a writer of an older attempt
 * still connected).  The fence table holds a row (job, sink_uid, subtask,
 * epoch).  committer_open terminates the sessions of the owned subtasks
 * that another sink instance opened (a foreign nonce in their
 * application_name); recover then loops: roll back the lingering gids
 * (P4), bump the owned rows' epochs waiting at most lock_timeout_ms for
 * their row locks, and on a lock timeout (55P03) roll back again, since
 * the older writer may have prepared meanwhile.  The epochs it set go to
 * the writer of the same subtask through the instance's registry.
 *   P5  every transaction of a writer starts by reading its fence row FOR
 *       SHARE and fails the task (fatally) unless the row holds the epoch
 *       its attempt's recover set; the shared lock lasts as long as the
 *       transaction, prepared or not.
 *   P6  a bump succeeds only when no transaction of an older writer, open
 *       or prepared, holds the row; so after recover every transaction of
 *       an older writer has ended, and each later one fails P5.
 *   P7  writer_open (exactly-once) fails unless recover ran for its
 *       subtask in this sink instance: a writer never runs unfenced.
 *
 * The single commit point of an epoch is the server's COMMIT PREPARED.
 * See src/connectors/README.md and docs/connectors.md.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <libpq-fe.h>

#include "pg_int.h"
#include "sluice/sluice.h"

#define DEFAULT_BATCH 1000u
/* recover gives up fencing after this many rounds of at most 1 s each
 * (the task fails, and the next attempt tries again) and names the
 * sessions that hold the fence. */
#define FENCE_ROUNDS 60u
#define MAX_PARAMS 65535u
#define COMMITTABLE_VERSION 1u

/* ------------------------------------------------------------------ */
/* Configuration                                                        */

typedef struct pgsink_s {
  char *conninfo;
  char *table;
  char **key;
  uint32_t n_key;
  sl_pg_mode_t mode;
  sl_delivery_t delivery;
  uint32_t batch_size;
  char *commit_table;
  char *epoch_column;
  char *version_field;
  uint32_t max_concurrent;
  uint32_t connect_timeout_s;
  uint32_t lock_timeout_ms;
  char *fence_table;
  sl__pg_fences_t *fences; /* recover -> writer_open hand-over, and the
                              instance's nonce (pg_int.h) */
} pgsink_t;

/* A column of the sink schema as the table has it. */
typedef struct pgcol_s {
  char *qname;   /* quoted identifier */
  char *pgtype;  /* format_type() of the table's column */
} pgcol_t;

typedef struct entry_s {
  size_t off;     /* row bytes in batch.rows */
  uint32_t len;
  uint8_t kind;   /* sl_row_kind_t, or DEAD */
} entry_t;

#define DEAD 0xffu

typedef struct pgwriter_s {
  pgsink_t *s;
  PGconn *conn;
  char *job;
  char *uid;
  uint32_t subtask;
  const sl_schema_t *schema;
  uint32_t n_fields;
  pgcol_t *cols;           /* n_fields */
  uint32_t *key_idx;       /* n_key field indexes */
  int version_idx;         /* at-least-once version field, or -1 */
  uint64_t epoch;          /* E: the epoch being filled */
  bool is_open;            /* a transaction is open (BEGIN sent) */
  bool is_failed;
  bool has_rows;           /* rows were sent in the open transaction */
  bool is_own_wait;        /* prepare sends while its own are prepared:
                              prepare names the lock on a timeout */
  int64_t fence_epoch;     /* exactly-once: the epoch recover set (P5) */
  char *fence_sql;         /* BEGIN and the fence row FOR SHARE */
  /* The batch: row bytes, entries, and (upsert) a map from key to the
   * entry holding the key's last change. */
  sl_bytes_t rows;
  entry_t *ents;
  uint32_t n_ents, cap_ents;
  uint32_t n_live;
  uint32_t *slots;          /* entry index + 1, 0 = empty */
  uint32_t n_slots;
  uint32_t send_at;         /* send the batch when it has this many rows */
  sl_bytes_t keybuf, keybuf2;
  sl_bytes_t sql, vals;
} pgwriter_t;

typedef struct pgcommitter_s {
  pgsink_t *s;
  PGconn *conn;
  char *job;
  char *uid;
  uint32_t subtask;
  uint32_t *owned;
  uint32_t n_owned;
  char app[SL_PG_APP_SIZE]; /* its connection's application_name */
  char **named;             /* gids given to commit() */
  uint32_t n_named, cap_named;
  sl_sink_counters_t *counters; /* the engine's, or NULL */
} pgcommitter_t;

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */

static char *quote_ident(const char *name) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  int rc = sl_bytes_append(&b, "\"", 1);
  for (const char *p = name; rc == SL_OK && *p; p++) {
    rc = sl_bytes_append(&b, p, 1);
    if (rc == SL_OK && *p == '"') rc = sl_bytes_append(&b, "\"", 1);
  }
  if (rc == SL_OK) rc = sl_bytes_append(&b, "\"", 2);
  if (rc != SL_OK) {
    sl_bytes_close(&b);
    return NULL;
  }
  return (char *)b.data;
}

/* "schema.table" or "table" quoted part by part (a dot splits them). */
static char *quote_table(const char *table) {
  const char *dot = strchr(table, '.');
  if (dot == NULL) return quote_ident(table);
  char *sch = sl_strndup(table, (size_t)(dot - table));
  char *a = sch ? quote_ident(sch) : NULL;
  char *b = quote_ident(dot + 1);
  char *out = NULL;
  if (a && b) {
    size_t n = strlen(a) + strlen(b) + 2;
    out = sl_malloc(n);
    if (out) snprintf(out, n, "%s.%s", a, b);
  }
  sl_free(sch);
  sl_free(a);
  sl_free(b);
  return out;
}

/* A libpq message on one line, without its trailing newline. */
static void one_line(const char *msg, char *buf, size_t size) {
  size_t j = 0;
  bool is_space = false;
  for (size_t i = 0; msg && msg[i] && j + 1 < size; i++) {
    char c = msg[i];
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (is_space || j == 0)) continue;
    is_space = c == ' ';
    buf[j++] = c;
  }
  while (j > 0 && buf[j - 1] == ' ') j--;
  buf[j] = '\0';
}

static const char *sqlstate(const PGresult *res) {
  const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  return st ? st : "";
}

/* Fill *out_err from a failed result: "<what>: SQLSTATE <s>: <message>". */
static int res_error(sl_error_t **out_err, PGconn *conn, PGresult *res,
                     const char *who, const char *what) {
  char msg[1024];
  const char *m = res ? PQresultErrorMessage(res) : NULL;
  one_line(m && m[0] ? m : PQerrorMessage(conn), msg, sizeof(msg));
  const char *st = sqlstate(res);
  if (st[0])
    return sl_error_set(out_err, SL_EIO, "%s: %s: SQLSTATE %s: %s", who, what,
                        st, msg);
  return sl_error_set(out_err, SL_EIO, "%s: %s: %s", who, what,
                      msg[0] ? msg : "connection lost");
}

char *sl__pg_quote_table(const char *table) { return quote_table(table); }
int sl__pg_res_error(sl_error_t **out_err, PGconn *conn, PGresult *res,
                     const char *who, const char *what) {
  return res_error(out_err, conn, res, who, what);
}
const char *sl__pg_sqlstate(const PGresult *res) { return sqlstate(res); }

static bool is_connection_error(PGconn *conn, const char *st) {
  if (conn == NULL || PQstatus(conn) != CONNECTION_OK) return true;
  return st[0] == '\0' || strncmp(st, "08", 2) == 0 ||
         strcmp(st, "57P01") == 0 || strcmp(st, "57P02") == 0 ||
         strcmp(st, "57P03") == 0;
}

/*
 * Connect with a bounded connect_timeout (the conninfo's own value wins)
 * and an application_name that names the sink.  A failure names host:port
 * and libpq's reason (the OS error, or the server's, such as a failed
 * password authentication).
 */
static int pg_connect(const pgsink_t *s, const char *who, const char *app,
                      PGconn **out_conn, sl_error_t **out_err) {
  char timeout[16];
  snprintf(timeout, sizeof(timeout), "%u", s->connect_timeout_s);
  const char *keys[] = {"connect_timeout", "dbname", "application_name",
                        "client_encoding", NULL};
  const char *vals[] = {timeout, s->conninfo, app, "UTF8", NULL};
  PGconn *conn = PQconnectdbParams(keys, vals, 1);
  if (conn == NULL) return sl_error_set(out_err, SL_ENOMEM, "%s: out of memory "
                                        "connecting", who);
  if (PQstatus(conn) != CONNECTION_OK) {
    char msg[1024];
    one_line(PQerrorMessage(conn), msg, sizeof(msg));
    const char *host = PQhost(conn), *port = PQport(conn);
    int rc = sl_error_set(out_err, SL_EIO,
                          "%s: cannot connect to %s:%s (connect_timeout %u "
                          "s): %s", who, host && host[0] ? host : "localhost",
                          port && port[0] ? port : "5432",
                          s->connect_timeout_s, msg);
    PQfinish(conn);
    return rc;
  }
  /* Rows are written as text in UTC: timestamps carry their zone ("Z"),
   * and the session's zone only matters for timestamp without zone. */
  PGresult *res = PQexec(conn, "SET TIME ZONE 'UTC'");
  if (PQresultStatus(res) != PGRES_COMMAND_OK) {
    int rc = res_error(out_err, conn, res, who, "SET TIME ZONE");
    PQclear(res);
    PQfinish(conn);
    return rc;
  }
  PQclear(res);
  *out_conn = conn;
  return SL_OK;
}

/* Run a statement that returns no rows; *out_res gets the result on
 * success when non-NULL. */
static int exec_cmd(PGconn *conn, const char *sql, const char *who,
                    const char *what, sl_error_t **out_err) {
  PGresult *res = PQexec(conn, sql);
  if (PQresultStatus(res) != PGRES_COMMAND_OK &&
      PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = res_error(out_err, conn, res, who, what);
    PQclear(res);
    return rc;
  }
  PQclear(res);
  return SL_OK;
}

static char *who_name(const char *uid, uint32_t subtask) {
  size_t n = strlen(uid) + 64;
  char *w = sl_malloc(n);
  if (w) snprintf(w, n, "postgres sink '%s' subtask %u", uid, subtask);
  return w;
}

/* ------------------------------------------------------------------ */
/* Start checks                                                         */

/* A failed start check is a configuration error: restarting the job does
 * not help, so the error is fatal (no restart).  Failures to talk to the
 * server (SL_EIO) stay retriable. */
static int config_error(sl_error_t **out_err, int rc) {
  if (rc != SL_OK && rc != SL_EIO && rc != SL_ENOMEM && *out_err)
    sl_error_set_fatal(*out_err, true);
  return rc;
}

/*
 * The type mapping (docs/connectors.md): a sink field of type T may go into
 * a column whose format_type() is one of these.
 */
static bool type_fits(sl_type_t t, const char *pg) {
  switch ((sl_type_id_t)t.id) {
  case SL_TYPE_BOOL:
    return strcmp(pg, "boolean") == 0;
  case SL_TYPE_INT32:
    return strcmp(pg, "integer") == 0 || strcmp(pg, "bigint") == 0 ||
           strcmp(pg, "numeric") == 0;
  case SL_TYPE_INT64:
    return strcmp(pg, "bigint") == 0 || strcmp(pg, "numeric") == 0;
  case SL_TYPE_FLOAT64:
    return strcmp(pg, "double precision") == 0;
  case SL_TYPE_DECIMAL: {
    if (strcmp(pg, "numeric") == 0) return true;
    unsigned p, sc;
    if (sscanf(pg, "numeric(%u,%u)", &p, &sc) != 2) return false;
    return sc == t.scale && p - sc >= (unsigned)(t.precision - t.scale);
  }
  case SL_TYPE_STRING:
    return strcmp(pg, "text") == 0 ||
           strncmp(pg, "character varying", 17) == 0;
  case SL_TYPE_BYTES:
    return strcmp(pg, "bytea") == 0;
  case SL_TYPE_TIMESTAMP:
    return strcmp(pg, "timestamp with time zone") == 0 ||
           strcmp(pg, "timestamp without time zone") == 0;
  }
  return false;
}

static const char *type_expect(sl_type_t t) {
  switch ((sl_type_id_t)t.id) {
  case SL_TYPE_BOOL: return "boolean";
  case SL_TYPE_INT32: return "integer, bigint or numeric";
  case SL_TYPE_INT64: return "bigint or numeric";
  case SL_TYPE_FLOAT64: return "double precision";
  case SL_TYPE_DECIMAL: return "numeric with the same scale and room for "
                               "the integer digits";
  case SL_TYPE_STRING: return "text or character varying";
  case SL_TYPE_BYTES: return "bytea";
  case SL_TYPE_TIMESTAMP: return "timestamp with or without time zone";
  }
  return "?";
}

/*
 * The table exists, every field of schema is a column of a fitting type,
 * (upsert) the key columns carry a unique index, (at-least-once) the epoch
 * column is a bigint.  Fills cols (quoted name, column type) when given.
 */
static int check_table(PGconn *conn, const pgsink_t *s, const char *who,
                       const sl_schema_t *schema, pgcol_t *cols,
                       sl_error_t **out_err) {
  const char *params[1] = {s->table};
  PGresult *res = PQexecParams(
      conn,
      "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) "
      "FROM pg_attribute a WHERE a.attrelid = to_regclass($1) "
      "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
      1, NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = res_error(out_err, conn, res, who, "reading the table's columns");
    PQclear(res);
    return rc;
  }
  int n = PQntuples(res);
  int rc = SL_OK;
  if (n == 0) {
    rc = sl_error_set(out_err, SL_ENOTFOUND,
                      "%s: table '%s' does not exist (create it before "
                      "starting the job; docs/connectors.md)", who, s->table);
    goto done;
  }
  uint32_t nf = sl_schema_n_fields(schema);
  for (uint32_t i = 0; i < nf && rc == SL_OK; i++) {
    const sl_field_t *f = sl_schema_field(schema, i);
    int row = -1;
    for (int r = 0; r < n; r++)
      if (strcmp(PQgetvalue(res, r, 0), f->name) == 0) row = r;
    if (row < 0) {
      rc = sl_error_set(out_err, SL_ENOTFOUND,
                        "%s: table '%s' has no column '%s' (field %u of the "
                        "sink's schema)", who, s->table, f->name, i + 1);
      break;
    }
    const char *pg = PQgetvalue(res, row, 1);
    if (!type_fits(f->type, pg)) {
      char tn[64];
      rc = sl_error_set(out_err, SL_ETYPE,
                        "%s: column '%s' of table '%s' is %s, but field '%s' "
                        "is %s, which needs %s", who, f->name, s->table, pg,
                        f->name, sl_type_format(f->type, tn, sizeof(tn)),
                        type_expect(f->type));
      break;
    }
    if (cols) {
      cols[i].qname = quote_ident(f->name);
      cols[i].pgtype = sl_strdup(pg);
      if (!cols[i].qname || !cols[i].pgtype) rc = SL_ENOMEM;
    }
  }
  if (rc == SL_OK && s->delivery == SL_DELIVERY_AT_LEAST_ONCE) {
    int row = -1;
    for (int r = 0; r < n; r++)
      if (strcmp(PQgetvalue(res, r, 0), s->epoch_column) == 0) row = r;
    if (row < 0)
      rc = sl_error_set(out_err, SL_ENOTFOUND,
                        "%s: table '%s' has no column '%s'; at-least-once "
                        "delivery keeps each row's version there (add it: "
                        "%s bigint NOT NULL)", who, s->table, s->epoch_column,
                        s->epoch_column);
    else if (strcmp(PQgetvalue(res, row, 1), "bigint") != 0)
      rc = sl_error_set(out_err, SL_ETYPE,
                        "%s: column '%s' of table '%s' is %s; the version "
                        "column must be bigint", who, s->epoch_column,
                        s->table, PQgetvalue(res, row, 1));
  }
done:
  PQclear(res);
  if (rc != SL_OK || s->mode != SL_PG_MODE_UPSERT) return rc;
  /* A unique index whose columns are exactly the key (ON CONFLICT needs
   * one). */
  sl_bytes_t arr;
  sl_bytes_init(&arr);
  rc = sl_bytes_append_str(&arr, "{");
  for (uint32_t k = 0; k < s->n_key && rc == SL_OK; k++) {
    rc = sl_bytes_append_str(&arr, k ? ",\"" : "\"");
    for (const char *p = s->key[k]; rc == SL_OK && *p; p++)
      rc = (*p == '"' || *p == '\\') ? sl_bytes_append(&arr, "\\", 1) : SL_OK,
      rc = rc ? rc : sl_bytes_append(&arr, p, 1);
    if (rc == SL_OK) rc = sl_bytes_append_str(&arr, "\"");
  }
  if (rc == SL_OK) rc = sl_bytes_append(&arr, "}", 2);
  if (rc != SL_OK) {
    sl_bytes_close(&arr);
    return sl_error_set(out_err, SL_ENOMEM, "%s: out of memory", who);
  }
  const char *p2[2] = {s->table, (const char *)arr.data};
  res = PQexecParams(
      conn,
      "SELECT count(*) FROM pg_index i WHERE i.indrelid = to_regclass($1) "
      "AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL AND "
      "(SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM "
      "pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = "
      "ANY(i.indkey)) = (SELECT array_agg(x ORDER BY x) FROM "
      "unnest($2::text[]) x)",
      2, NULL, p2, NULL, NULL, 0);
  sl_bytes_close(&arr);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    rc = res_error(out_err, conn, res, who, "reading the table's indexes");
  } else if (strcmp(PQgetvalue(res, 0, 0), "0") == 0) {
    sl_bytes_t ks;
    sl_bytes_init(&ks);
    for (uint32_t k = 0; k < s->n_key; k++)
      (void)sl_bytes_printf(&ks, "%s%s", k ? ", " : "", s->key[k]);
    (void)sl_bytes_append(&ks, "", 1);
    rc = sl_error_set(out_err, SL_EINVAL,
                      "%s: table '%s' has no primary key or unique index on "
                      "exactly the key (%s); mode upsert needs one",
                      who, s->table, ks.data ? (char *)ks.data : "");
    sl_bytes_close(&ks);
  }
  PQclear(res);
  return rc;
}

/* max_prepared_transactions >= parallelism x (concurrent checkpoints + 1). */
static int check_prepared(PGconn *conn, const pgsink_t *s, const char *who,
                          uint32_t parallelism, sl_error_t **out_err) {
  PGresult *res = PQexec(conn, "SHOW max_prepared_transactions");
  if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
    int rc = res_error(out_err, conn, res, who,
                       "SHOW max_prepared_transactions");
    PQclear(res);
    return rc;
  }
  long have = strtol(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  uint64_t need = (uint64_t)parallelism * (s->max_concurrent + 1u);
  if (have <= 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: prepared transactions are disabled on the server "
                        "(SQLSTATE 55000: max_prepared_transactions = 0); "
                        "exactly-once delivery needs max_prepared_transactions "
                        ">= %" PRIu64 ": set it in postgresql.conf and restart "
                        "the server, or use delivery: at-least-once", who,
                        need);
  if ((uint64_t)have < need)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: max_prepared_transactions = %ld is too small: "
                        "parallelism %u x (%u concurrent checkpoints + 1) "
                        "needs at least %" PRIu64, who, have, parallelism,
                        s->max_concurrent, need);
  return SL_OK;
}

static size_t gid_prefix_len(const char *job, const char *uid) {
  return 3 + strlen(job) + 1 + strlen(uid) + 1;
}

/* The longest gid: the prefix, a subtask id and an epoch id of 20 digits. */
static int check_gid(const char *job, const char *uid, const char *who,
                     sl_error_t **out_err) {
  size_t max = gid_prefix_len(job, uid) + 10 + 1 + 20;
  if (max > SL_PG_MAX_GID)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: transaction ids \"sl/<job>/<sink uid>/<subtask>/"
                        "<epoch>\" would be up to %zu bytes, over PostgreSQL's "
                        "limit of %d; shorten the job name (%zu bytes) or the "
                        "sink uid (%zu bytes) by %zu", who, max, SL_PG_MAX_GID,
                        strlen(job), strlen(uid), max - SL_PG_MAX_GID);
  return SL_OK;
}

/* Create the marker table if absent; an advisory lock keeps concurrent
 * subtasks from racing in CREATE TABLE IF NOT EXISTS. */
static int ensure_commit_table(PGconn *conn, const pgsink_t *s,
                               const char *who, sl_error_t **out_err) {
  /* Only when absent: CREATE TABLE IF NOT EXISTS needs CREATE on the
   * schema even when the table exists. */
  const char *params[1] = {s->commit_table};
  PGresult *res = PQexecParams(conn, "SELECT to_regclass($1) IS NOT NULL", 1,
                               NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = res_error(out_err, conn, res, who,
                       "looking up the commit-log table");
    PQclear(res);
    return rc;
  }
  bool exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
  PQclear(res);
  if (exists) return SL_OK;
  char *qt = quote_table(s->commit_table);
  if (qt == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_printf(
      &q,
      "BEGIN; SELECT pg_advisory_xact_lock(7306021515); "
      "CREATE TABLE IF NOT EXISTS %s (job text NOT NULL, sink_uid text NOT "
      "NULL, subtask integer NOT NULL, epoch bigint NOT NULL, checkpoint "
      "bigint NOT NULL, gid text NOT NULL, committed_at timestamptz NOT NULL "
      "DEFAULT now(), PRIMARY KEY (job, sink_uid, subtask, epoch)); COMMIT",
      qt);
  sl_free(qt);
  if (rc == SL_OK)
    rc = exec_cmd(conn, (char *)q.data, who, "creating the commit-log table",
                  out_err);
  else
    rc = sl_error_set(out_err, rc, "out of memory");
  if (rc != SL_OK) {
    PGresult *r = PQexec(conn, "ROLLBACK");
    PQclear(r);
    sl_error_prefix(*out_err, "table '%s'", s->commit_table);
  }
  sl_bytes_close(&q);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Values as text                                                       */

/* Append field i as PostgreSQL text input (no quoting). */
static int value_text(const sl_row_t *row, uint32_t i, const char *who,
                      sl_bytes_t *out, sl_error_t **out_err) {
  const sl_field_t *f = sl_schema_field(row->schema, i);
  if (f->type.id == SL_TYPE_BYTES) {
    static const char hex[] = "0123456789abcdef";
    sl_slice_t v = sl_row_get_str(row, i);
    int rc = sl_bytes_reserve(out, 2 + 2 * (size_t)v.len);
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
    out->data[out->len++] = '\\';
    out->data[out->len++] = 'x';
    for (uint32_t k = 0; k < v.len; k++) {
      out->data[out->len++] = (uint8_t)hex[v.ptr[k] >> 4];
      out->data[out->len++] = (uint8_t)hex[v.ptr[k] & 15];
    }
    return SL_OK;
  }
  if (f->type.id == SL_TYPE_STRING) {
    sl_slice_t v = sl_row_get_str(row, i);
    if (memchr(v.ptr, 0, v.len) != NULL)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: field '%s' holds a NUL byte, which PostgreSQL "
                          "text cannot store", who, f->name);
  }
  int rc = sl_value_format(row, i, out);
  return rc == SL_OK ? rc : sl_error_set(out_err, rc, "out of memory");
}

/* COPY text format: backslash, tab, newline and CR escaped. */
static int copy_escape(sl_bytes_t *out, const uint8_t *p, size_t n) {
  int rc = sl_bytes_reserve(out, 2 * n);
  if (rc != SL_OK) return rc;
  for (size_t k = 0; k < n; k++) {
    uint8_t c = p[k];
    if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
      out->data[out->len++] = '\\';
      c = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
    }
    out->data[out->len++] = c;
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The batch                                                            */

static void batch_reset(pgwriter_t *w) {
  sl_bytes_clear(&w->rows);
  w->send_at = w->s->batch_size;
  w->n_ents = 0;
  w->n_live = 0;
  if (w->slots) memset(w->slots, 0, w->n_slots * sizeof(uint32_t));
}

static int key_of(pgwriter_t *w, const sl_row_t *row, sl_bytes_t *key) {
  sl_bytes_clear(key);
  for (uint32_t k = 0; k < w->s->n_key; k++) {
    int rc = sl_key_add_field(key, row, w->key_idx[k]);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static void entry_row(const pgwriter_t *w, uint32_t e, sl_row_t *out) {
  sl_row_view(out, w->schema, w->rows.data + w->ents[e].off, w->ents[e].len);
}

/* The slot of key (found or the empty one where it would go). */
static int find_slot(pgwriter_t *w, const sl_bytes_t *key, uint32_t *out) {
  uint64_t h = sl_hash64(key->data, key->len);
  uint32_t mask = w->n_slots - 1;
  for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
    if (w->slots[i] == 0) {
      *out = i;
      return 0;
    }
    sl_row_t r;
    entry_row(w, w->slots[i] - 1, &r);
    int rc = key_of(w, &r, &w->keybuf2);
    if (rc != SL_OK) return rc;
    if (w->keybuf2.len == key->len &&
        memcmp(w->keybuf2.data, key->data, key->len) == 0) {
      *out = i;
      return 1;
    }
  }
}

static int map_grow(pgwriter_t *w) {
  uint32_t n = w->n_slots * 2;
  uint32_t *slots = sl_calloc(n, sizeof(uint32_t));
  if (slots == NULL) return SL_ENOMEM;
  uint32_t *old = w->slots;
  w->slots = slots;
  w->n_slots = n;
  sl_free(old);
  for (uint32_t e = 0; e < w->n_ents; e++) {
    if (w->ents[e].kind == DEAD) continue;
    sl_row_t r;
    entry_row(w, e, &r);
    uint32_t slot;
    int rc = key_of(w, &r, &w->keybuf);
    if (rc != SL_OK) return rc;
    if ((rc = find_slot(w, &w->keybuf, &slot)) < 0) return rc;
    w->slots[slot] = e + 1;
  }
  return SL_OK;
}

static int batch_add(pgwriter_t *w, const sl_row_t *row, sl_row_kind_t kind) {
  if (w->n_ents == w->cap_ents) {
    uint32_t cap = w->cap_ents ? 2 * w->cap_ents : 256;
    entry_t *e = sl_realloc(w->ents, cap * sizeof(*e));
    if (e == NULL) return SL_ENOMEM;
    w->ents = e;
    w->cap_ents = cap;
  }
  /* The map keeps at least twice as many slots as entries (a power of 2);
   * a deferred batch (see send_or_defer) grows past batch_size. */
  int rc;
  if (w->s->mode == SL_PG_MODE_UPSERT && 2u * (w->n_ents + 1) > w->n_slots &&
      (rc = map_grow(w)) != SL_OK)
    return rc;
  size_t off = (w->rows.len + 7) & ~(size_t)7;
  rc = sl_bytes_reserve(&w->rows, off - w->rows.len + row->len);
  if (rc != SL_OK) return rc;
  memset(w->rows.data + w->rows.len, 0, off - w->rows.len);
  memcpy(w->rows.data + off, row->data, row->len);
  w->rows.len = off + row->len;
  uint32_t e = w->n_ents++;
  w->ents[e] = (entry_t){off, row->len, (uint8_t)kind};
  w->n_live++;
  if (w->s->mode != SL_PG_MODE_UPSERT) return SL_OK;
  if ((rc = key_of(w, row, &w->keybuf)) != SL_OK) return rc;
  uint32_t slot;
  int found = find_slot(w, &w->keybuf, &slot);
  if (found < 0) return found;
  if (found) {
    w->ents[w->slots[slot] - 1].kind = DEAD;
    w->n_live--;
  }
  w->slots[slot] = e + 1;
  return SL_OK;
}

/* The version (at-least-once) of a row. */
static int64_t row_version(const pgwriter_t *w, const sl_row_t *row) {
  if (w->version_idx < 0) return (int64_t)w->epoch;
  return sl_row_get_i64(row, (uint32_t)w->version_idx);
}

/* Param values as NUL-terminated strings in w->vals; offsets in offs, -1
 * for null. */
typedef struct params_s {
  size_t *offs;
  const char **ptrs;
  uint32_t n, cap;
} params_t;

static int param_push(params_t *p, size_t off) {
  if (p->n == p->cap) {
    uint32_t cap = p->cap ? 2 * p->cap : 1024;
    size_t *o = sl_realloc(p->offs, cap * sizeof(*o));
    if (o == NULL) return SL_ENOMEM;
    p->offs = o;
    const char **q = sl_realloc(p->ptrs, cap * sizeof(*q));
    if (q == NULL) return SL_ENOMEM;
    p->ptrs = q;
    p->cap = cap;
  }
  p->offs[p->n++] = off;
  return SL_OK;
}

static int param_field(pgwriter_t *w, params_t *p, const sl_row_t *row,
                       uint32_t i, const char *who, sl_error_t **out_err) {
  if (sl_row_is_null(row, i)) {
    if (param_push(p, SIZE_MAX) != SL_OK) goto oom;
    return SL_OK;
  }
  size_t off = w->vals.len;
  int rc = value_text(row, i, who, &w->vals, out_err);
  if (rc != SL_OK) return rc;
  if (sl_bytes_append(&w->vals, "", 1) != SL_OK ||
      param_push(p, off) != SL_OK)
    goto oom;
  return SL_OK;
oom:
  return sl_error_set(out_err, SL_ENOMEM, "%s: out of memory", who);
}

static int param_i64(pgwriter_t *w, params_t *p, int64_t v) {
  size_t off = w->vals.len;
  if (sl_bytes_printf(&w->vals, "%" PRId64, v) != SL_OK ||
      sl_bytes_append(&w->vals, "", 1) != SL_OK)
    return SL_ENOMEM;
  return param_push(p, off);
}

static int run_params(pgwriter_t *w, params_t *p, const char *who,
                      const char *what, sl_error_t **out_err) {
  for (uint32_t i = 0; i < p->n; i++)
    p->ptrs[i] = p->offs[i] == SIZE_MAX ? NULL
                                        : (const char *)w->vals.data +
                                              p->offs[i];
  PGresult *res = PQexecParams(w->conn, (const char *)w->sql.data, (int)p->n,
                               NULL, p->ptrs, NULL, NULL, 0);
  int rc = SL_OK;
  if (PQresultStatus(res) != PGRES_COMMAND_OK)
    rc = res_error(out_err, w->conn, res, who, what);
  PQclear(res);
  return rc;
}

/* Statements of mode upsert for the live entries of kind +I/+U (is_delete
 * false) or -D (true), at most max_rows rows each. */
static int send_upserts(pgwriter_t *w, bool is_delete, const char *who,
                        const char *qtable, sl_error_t **out_err) {
  const pgsink_t *s = w->s;
  bool is_alo = s->delivery == SL_DELIVERY_AT_LEAST_ONCE;
  uint32_t per_row = is_delete ? s->n_key + (is_alo ? 1 : 0)
                               : w->n_fields + (is_alo ? 1 : 0);
  uint32_t max_rows = MAX_PARAMS / per_row;
  if (max_rows > s->batch_size) max_rows = s->batch_size;
  params_t p = {0};
  int rc = SL_OK;
  uint32_t e = 0;
  while (rc == SL_OK && e < w->n_ents) {
    sl_bytes_clear(&w->sql);
    sl_bytes_clear(&w->vals);
    p.n = 0;
    uint32_t n_rows = 0;
    if (is_delete) {
      rc = sl_bytes_printf(&w->sql, "DELETE FROM %s AS t WHERE (", qtable);
      for (uint32_t k = 0; k < s->n_key && rc == SL_OK; k++)
        rc = sl_bytes_printf(&w->sql, "%st.%s", k ? ", " : "",
                             w->cols[w->key_idx[k]].qname);
      if (rc == SL_OK) rc = sl_bytes_append_str(&w->sql, ") IN (");
    } else {
      rc = sl_bytes_printf(&w->sql, "INSERT INTO %s AS t (", qtable);
      for (uint32_t i = 0; i < w->n_fields && rc == SL_OK; i++)
        rc = sl_bytes_printf(&w->sql, "%s%s", i ? ", " : "", w->cols[i].qname);
      if (rc == SL_OK && is_alo)
        rc = sl_bytes_printf(&w->sql, ", \"%s\"", s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(&w->sql, ") VALUES ");
    }
    for (; rc == SL_OK && e < w->n_ents && n_rows < max_rows; e++) {
      uint8_t kind = w->ents[e].kind;
      bool is_del = kind == SL_ROW_DELETE;
      if (kind == DEAD || is_del != is_delete) continue;
      sl_row_t row;
      entry_row(w, e, &row);
      rc = sl_bytes_append_str(&w->sql, n_rows ? ", (" : "(");
      uint32_t nc = is_delete ? s->n_key : w->n_fields;
      for (uint32_t c = 0; c < nc && rc == SL_OK; c++) {
        uint32_t fi = is_delete ? w->key_idx[c] : c;
        rc = param_field(w, &p, &row, fi, who, out_err);
        if (rc == SL_OK)
          rc = sl_bytes_printf(&w->sql, "%s$%u::%s", c ? ", " : "", p.n,
                               w->cols[fi].pgtype);
      }
      if (rc == SL_OK && is_alo && !is_delete) {
        rc = param_i64(w, &p, row_version(w, &row));
        if (rc == SL_OK) rc = sl_bytes_printf(&w->sql, ", $%u::bigint", p.n);
      }
      if (rc == SL_OK) rc = sl_bytes_append_str(&w->sql, ")");
      n_rows++;
      if (rc == SL_OK && is_alo && is_delete) {
        /* A delete at version v applies only where the stored version is
         * not newer (t.epoch <= v), so deletes at-least-once go one row per
         * statement. */
        rc = param_i64(w, &p, row_version(w, &row));
        e++;
        break;
      }
    }
    if (rc != SL_OK) break;
    if (n_rows == 0) break;
    if (is_delete) {
      rc = sl_bytes_append_str(&w->sql, ")");
      if (rc == SL_OK && is_alo)
        rc = sl_bytes_printf(&w->sql, " AND t.\"%s\" <= $%u::bigint",
                             s->epoch_column, p.n);
    } else {
      rc = sl_bytes_append_str(&w->sql, " ON CONFLICT (");
      for (uint32_t k = 0; k < s->n_key && rc == SL_OK; k++)
        rc = sl_bytes_printf(&w->sql, "%s%s", k ? ", " : "",
                             w->cols[w->key_idx[k]].qname);
      if (rc == SL_OK) rc = sl_bytes_append_str(&w->sql, ") DO ");
      uint32_t n_set = 0;
      for (uint32_t i = 0; i < w->n_fields && rc == SL_OK; i++) {
        bool is_key = false;
        for (uint32_t k = 0; k < s->n_key; k++)
          is_key |= w->key_idx[k] == i;
        if (is_key) continue;
        rc = sl_bytes_printf(&w->sql, "%s%s = EXCLUDED.%s",
                             n_set++ ? ", " : "UPDATE SET ", w->cols[i].qname,
                             w->cols[i].qname);
      }
      if (rc == SL_OK && is_alo)
        rc = sl_bytes_printf(&w->sql, "%s\"%s\" = EXCLUDED.\"%s\" WHERE "
                             "t.\"%s\" <= EXCLUDED.\"%s\"",
                             n_set++ ? ", " : "UPDATE SET ", s->epoch_column,
                             s->epoch_column, s->epoch_column,
                             s->epoch_column);
      if (rc == SL_OK && n_set == 0) rc = sl_bytes_append_str(&w->sql,
                                                              "NOTHING");
    }
    if (rc == SL_OK) rc = sl_bytes_append(&w->sql, "", 1);
    if (rc == SL_OK)
      rc = run_params(w, &p, who, is_delete ? "DELETE" : "INSERT ... ON "
                      "CONFLICT", out_err);
    else if (!*out_err || rc == SL_ENOMEM)
      rc = sl_error_set(out_err, rc, "%s: out of memory", who);
  }
  sl_free(p.offs);
  sl_free(p.ptrs);
  return rc;
}

static int send_copy(pgwriter_t *w, const char *who, const char *qtable,
                     sl_error_t **out_err) {
  sl_bytes_clear(&w->sql);
  int rc = sl_bytes_printf(&w->sql, "COPY %s (", qtable);
  for (uint32_t i = 0; i < w->n_fields && rc == SL_OK; i++)
    rc = sl_bytes_printf(&w->sql, "%s%s", i ? ", " : "", w->cols[i].qname);
  if (rc == SL_OK) rc = sl_bytes_append(&w->sql, ") FROM STDIN", 13);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "%s: out of memory", who);
  PGresult *res = PQexec(w->conn, (const char *)w->sql.data);
  if (PQresultStatus(res) != PGRES_COPY_IN) {
    rc = res_error(out_err, w->conn, res, who, "COPY");
    PQclear(res);
    return rc;
  }
  PQclear(res);
  sl_bytes_clear(&w->vals);
  const char *err_msg = NULL;
  for (uint32_t e = 0; e < w->n_ents && rc == SL_OK; e++) {
    sl_row_t row;
    entry_row(w, e, &row);
    for (uint32_t i = 0; i < w->n_fields && rc == SL_OK; i++) {
      if (i) rc = sl_bytes_append(&w->vals, "\t", 1);
      if (rc != SL_OK) break;
      if (sl_row_is_null(&row, i)) {
        rc = sl_bytes_append(&w->vals, "\\N", 2);
        continue;
      }
      sl_bytes_t t;
      sl_bytes_init(&t);
      rc = value_text(&row, i, who, &t, out_err);
      if (rc == SL_OK) rc = copy_escape(&w->vals, t.data, t.len);
      sl_bytes_close(&t);
    }
    if (rc == SL_OK) rc = sl_bytes_append(&w->vals, "\n", 1);
    if (rc == SL_OK && w->vals.len >= 256 * 1024) {
      if (PQputCopyData(w->conn, (const char *)w->vals.data,
                        (int)w->vals.len) != 1)
        rc = SL_EIO;
      sl_bytes_clear(&w->vals);
    }
  }
  if (rc == SL_OK && w->vals.len &&
      PQputCopyData(w->conn, (const char *)w->vals.data, (int)w->vals.len) !=
          1)
    rc = SL_EIO;
  if (rc != SL_OK && *out_err == NULL && rc != SL_EIO)
    rc = sl_error_set(out_err, rc, "%s: out of memory", who);
  if (rc != SL_OK) err_msg = "sluice: the batch failed";
  if (PQputCopyEnd(w->conn, err_msg) != 1 && rc == SL_OK) rc = SL_EIO;
  res = PQgetResult(w->conn);
  if (rc == SL_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
    rc = res_error(out_err, w->conn, res, who, "COPY");
  else if (rc == SL_EIO && *out_err == NULL)
    rc = res_error(out_err, w->conn, res, who, "COPY");
  PQclear(res);
  while ((res = PQgetResult(w->conn)) != NULL) PQclear(res);
  return rc;
}

static int writer_begin(pgwriter_t *w, const char *who, sl_error_t **out_err) {
  if (w->is_open) return SL_OK;
  if (w->s->delivery != SL_DELIVERY_EXACTLY_ONCE) {
    int rc = exec_cmd(w->conn, "BEGIN", who, "BEGIN", out_err);
    if (rc == SL_OK) w->is_open = true;
    return rc;
  }
  /* P5: the fence check is the transaction's first statement.  A failed
   * one rolls the transaction back at once: a fenced-off writer must not
   * prepare it, even if a prepare came after the failure. */
  int rc = sl__pg_fence_begin(w->conn, w->fence_sql, w->s->fence_table,
                              w->job, w->subtask, w->fence_epoch, w->epoch,
                              who, out_err);
  if (rc == SL_OK) {
    w->is_open = true;
  } else {
    w->is_failed = true;
    if (PQstatus(w->conn) == CONNECTION_OK) {
      PGresult *res = PQexec(w->conn, "ROLLBACK");
      PQclear(res);
    }
  }
  return rc;
}

/* Send the batch (in the open transaction, which it begins if needed). */
static int send_batch(pgwriter_t *w, sl_error_t **out_err) {
  if (w->n_live == 0) {
    batch_reset(w);
    return SL_OK;
  }
  char *who = who_name(w->uid, w->subtask);
  char *qt = quote_table(w->s->table);
  int rc = who && qt ? SL_OK : SL_ENOMEM;
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, rc, "postgres sink: out of memory");
    goto done;
  }
  if ((rc = writer_begin(w, who, out_err)) != SL_OK) goto done;
  if (w->s->mode == SL_PG_MODE_INSERT) {
    rc = send_copy(w, who, qt, out_err);
  } else {
    rc = send_upserts(w, true, who, qt, out_err);
    if (rc == SL_OK) rc = send_upserts(w, false, who, qt, out_err);
  }
  if (rc == SL_OK) w->has_rows = true;
  /* The session's lock_timeout (writer_open) ended a wait for a row lock:
   * say whose lock it can be, not only the server's message. */
  if (rc != SL_OK && !w->is_own_wait && *out_err &&
      strstr(sl_error_message(*out_err), "55P03"))
    sl_error_prefix(*out_err, "epoch %" PRIu64 " waited lock_timeout_ms = %u "
                    "for a row lock held by another session or prepared "
                    "transaction (another job, or another subtask of this "
                    "sink writing the same key: an upsert sink keys its "
                    "input by its key so that each key has one subtask)",
                    w->epoch, w->s->lock_timeout_ms);
done:
  if (rc != SL_OK) w->is_failed = true;
  batch_reset(w);
  sl_free(who);
  sl_free(qt);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Writer                                                               */

static void writer_free(pgwriter_t *w) {
  if (w == NULL) return;
  if (w->conn) PQfinish(w->conn);
  for (uint32_t i = 0; w->cols && i < w->n_fields; i++) {
    sl_free(w->cols[i].qname);
    sl_free(w->cols[i].pgtype);
  }
  sl_free(w->cols);
  sl_free(w->key_idx);
  sl_free(w->fence_sql);
  sl_free(w->job);
  sl_free(w->uid);
  sl_free(w->ents);
  sl_free(w->slots);
  sl_bytes_close(&w->rows);
  sl_bytes_close(&w->keybuf);
  sl_bytes_close(&w->keybuf2);
  sl_bytes_close(&w->sql);
  sl_bytes_close(&w->vals);
  sl_free(w);
}

/* Fields named by the configuration exist in the schema. */
static int resolve_fields(const pgsink_t *s, const sl_schema_t *schema,
                          const char *who, uint32_t *key_idx, int *version_idx,
                          sl_error_t **out_err) {
  for (uint32_t k = 0; k < s->n_key; k++) {
    int idx = sl_schema_index(schema, s->key[k]);
    if (idx < 0)
      return sl_error_set(out_err, SL_ENOTFOUND,
                          "%s: key column '%s' is not a field of the sink's "
                          "schema", who, s->key[k]);
    if (key_idx) key_idx[k] = (uint32_t)idx;
  }
  *version_idx = -1;
  if (s->version_field) {
    int idx = sl_schema_index(schema, s->version_field);
    if (idx < 0)
      return sl_error_set(out_err, SL_ENOTFOUND,
                          "%s: version_field '%s' is not a field of the "
                          "sink's schema", who, s->version_field);
    sl_type_t t = sl_schema_field(schema, (uint32_t)idx)->type;
    if ((t.id != SL_TYPE_INT32 && t.id != SL_TYPE_INT64 &&
         t.id != SL_TYPE_TIMESTAMP) || t.nullable)
      return sl_error_set(out_err, SL_ETYPE,
                          "%s: version_field '%s' must be a non-null int32, "
                          "int64 or timestamp", who, s->version_field);
    *version_idx = idx;
  }
  return SL_OK;
}

static int writer_open_impl(void *ctx, const sl_sink_init_t *init,
                          void **out_writer, sl_error_t **out_err) {
  pgsink_t *s = ctx;
  const char *job = init->job ? init->job : "job";
  pgwriter_t *w = sl_calloc(1, sizeof(*w));
  char *who = who_name(init->uid, init->subtask);
  if (w == NULL || who == NULL) goto oom;
  w->s = s;
  w->subtask = init->subtask;
  w->schema = init->schema;
  w->n_fields = sl_schema_n_fields(init->schema);
  w->epoch = init->epoch_id;
  w->send_at = s->batch_size;
  w->job = sl_strdup(job);
  w->uid = sl_strdup(init->uid);
  w->cols = sl_calloc(w->n_fields ? w->n_fields : 1, sizeof(*w->cols));
  w->key_idx = sl_calloc(s->n_key ? s->n_key : 1, sizeof(uint32_t));
  if (!w->job || !w->uid || !w->cols || !w->key_idx) goto oom;
  int rc;
  if ((rc = config_error(out_err, resolve_fields(s, init->schema, who,
                                                 w->key_idx, &w->version_idx,
                                                 out_err))) != SL_OK)
    goto fail;
  if (s->delivery == SL_DELIVERY_EXACTLY_ONCE &&
      (rc = config_error(out_err, check_gid(job, init->uid, who, out_err))) !=
          SL_OK)
    goto fail;
  if (s->mode == SL_PG_MODE_UPSERT) {
    uint32_t n = 16;
    while (n < 2 * s->batch_size) n *= 2;
    w->slots = sl_calloc(n, sizeof(uint32_t));
    if (w->slots == NULL) goto oom;
    w->n_slots = n;
  }
  char app[SL_PG_APP_SIZE];
  sl__pg_app_name(app, job, init->uid, init->subtask,
                  sl__pg_fences_nonce(s->fences), false);
  if ((rc = pg_connect(s, who, app, &w->conn, out_err)) != SL_OK ||
      (rc = config_error(out_err, check_table(w->conn, s, who, init->schema,
                                              w->cols, out_err))) != SL_OK)
    goto fail;
  /* Every statement of the writer waits for a row lock at most
   * lock_timeout_ms (prepare sets it again, SET LOCAL): a lock that is
   * never released (a prepared transaction that only a checkpoint this
   * task blocks would commit) fails the task instead of hanging it. */
  char lt[64];
  snprintf(lt, sizeof(lt), "SET lock_timeout = %u", s->lock_timeout_ms);
  if ((rc = exec_cmd(w->conn, lt, who, "SET lock_timeout", out_err)) !=
      SL_OK)
    goto fail;
  /* P7: the epoch this subtask's recover set in this instance. */
  bool is_eo = s->delivery == SL_DELIVERY_EXACTLY_ONCE;
  if (is_eo && !sl__pg_fences_get(s->fences, job, init->uid, init->subtask,
                                  &w->fence_epoch)) {
    rc = sl_error_set(out_err, SL_ESTATE, "%s: writer_open before recover: "
                      "an exactly-once writer takes its fence epoch from "
                      "the recover of its subtask's committer in the same "
                      "sink instance (committer_open, the restored commits, "
                      "recover, then writer_open)", who);
    goto fail;
  }
  if (is_eo && (w->fence_sql = sl__pg_fence_check_sql(
                    w->conn, s->fence_table, job, init->uid,
                    init->subtask)) == NULL)
    goto oom;
  sl_bytes_init(&w->rows);
  *out_writer = w;
  sl_free(who);
  return SL_OK;
oom:
  rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
fail:
  writer_free(w);
  sl_free(who);
  return rc;
}

/*
 * How many transactions this writer's subtask has prepared that are not
 * committed yet (1 or more), 0, or an error.  Their row locks block any
 * statement of the open epoch that touches the same rows, and they are
 * committed on this very thread (commit() after the checkpoint completes):
 * a statement that waited for them would wait forever.  So while some are
 * prepared, the writer keeps its batch (send_or_defer), and prepare waits
 * for locks at most lock_timeout_ms.
 */
static char *make_gid(const char *job, const char *uid, uint32_t subtask,
                      uint64_t epoch);

static int own_prepared(pgwriter_t *w, sl_error_t **out_err) {
  char *prefix = make_gid(w->job, w->uid, w->subtask, 0);
  if (prefix == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  prefix[strlen(prefix) - 1] = '\0'; /* "sl/<job>/<uid>/<s>/" */
  char n[24];
  snprintf(n, sizeof(n), "%u", (unsigned)strlen(prefix));
  const char *params[2] = {prefix, n};
  PGresult *res = PQexecParams(w->conn, "SELECT count(*) FROM "
                               "pg_prepared_xacts WHERE left(gid, $2::int) = "
                               "$1 AND database = current_database()",
                               2, NULL, params, NULL, NULL, 0);
  int rc;
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    char *who = who_name(w->uid, w->subtask);
    rc = res_error(out_err, w->conn, res, who ? who : "postgres sink",
                   "reading pg_prepared_xacts");
    sl_free(who);
    w->is_failed = true;
  } else {
    rc = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
  }
  PQclear(res);
  sl_free(prefix);
  return rc;
}

static int send_or_defer(pgwriter_t *w, sl_error_t **out_err) {
  if (w->s->delivery == SL_DELIVERY_EXACTLY_ONCE) {
    int n = own_prepared(w, out_err);
    if (n < 0) return n;
    if (n > 0) { /* keep the rows; try again when the batch doubled */
      w->send_at = w->n_ents * 2;
      return SL_OK;
    }
  }
  return send_batch(w, out_err);
}

static int write_impl(void *writer, const sl_row_t *row, sl_error_t **out_err) {
  pgwriter_t *w = writer;
  if (w->is_failed)
    return sl_error_set(out_err, SL_EFAILED, "postgres sink '%s' subtask %u: "
                        "the writer failed earlier", w->uid, w->subtask);
  sl_row_kind_t kind = sl_row_kind(row);
  if (w->s->mode == SL_PG_MODE_INSERT && kind != SL_ROW_INSERT)
    return sl_error_set(out_err, SL_EINVAL,
                        "postgres sink '%s' subtask %u: mode insert got a %s "
                        "row; updates and deletes need mode upsert with a "
                        "key", w->uid, w->subtask, sl_row_kind_name(kind));
  if (kind == SL_ROW_UPDATE_BEFORE) return SL_OK;
  int rc = batch_add(w, row, kind);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "postgres sink '%s' subtask %u: %s",
                        w->uid, w->subtask, sl_strerror(rc));
  if (w->n_ents >= w->send_at) return send_or_defer(w, out_err);
  return SL_OK;
}

static int writer_commit_plain(pgwriter_t *w, sl_error_t **out_err) {
  if (!w->is_open) return SL_OK;
  char *who = who_name(w->uid, w->subtask);
  int rc = exec_cmd(w->conn, "COMMIT", who ? who : "postgres sink", "COMMIT",
                    out_err);
  sl_free(who);
  w->is_open = false;
  w->has_rows = false;
  if (rc != SL_OK) w->is_failed = true;
  return rc;
}

static int flush_impl(void *writer, sl_error_t **out_err) {
  pgwriter_t *w = writer;
  if (w->is_failed)
    return sl_error_set(out_err, SL_EFAILED, "postgres sink '%s' subtask %u: "
                        "the writer failed earlier", w->uid, w->subtask);
  if (w->s->delivery == SL_DELIVERY_EXACTLY_ONCE)
    return SL_OK; /* prepare sends the batch, right after flush */
  int rc = send_batch(w, out_err);
  if (rc == SL_OK) rc = writer_commit_plain(w, out_err);
  return rc;
}

static int encode_committable(sl_bytes_t *out, uint64_t epoch,
                              uint64_t ckpt, uint32_t subtask,
                              const char *gid) {
  size_t n = strlen(gid);
  uint8_t hdr[4] = {COMMITTABLE_VERSION, 0, (uint8_t)(n & 0xff),
                    (uint8_t)(n >> 8)};
  int rc = sl_bytes_append(out, hdr, 4);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, epoch);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, ckpt);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, subtask);
  if (rc == SL_OK) rc = sl_bytes_append(out, gid, n);
  return rc;
}

static char *make_gid(const char *job, const char *uid, uint32_t subtask,
                      uint64_t epoch) {
  size_t n = gid_prefix_len(job, uid) + 40;
  char *g = sl_malloc(n);
  if (g) snprintf(g, n, "sl/%s/%s/%u/%" PRIu64, job, uid, subtask, epoch);
  return g;
}

static int prepare_impl(void *writer, uint64_t checkpoint_id,
                      sl_bytes_t *out_committable, sl_error_t **out_err) {
  pgwriter_t *w = writer;
  /* After a failed statement the transaction is aborted on the server.
   * The engine fails the task before it prepares; should a prepare come
   * anyway, the server decides: it answers PREPARE TRANSACTION with the
   * tag ROLLBACK, and invariant P2 fails the prepare. */
  bool is_aborted = w->is_failed && w->is_open && w->conn &&
                    PQstatus(w->conn) == CONNECTION_OK;
  if (w->is_failed && !is_aborted)
    return sl_error_set(out_err, SL_EFAILED, "postgres sink '%s' subtask %u: "
                        "cannot prepare checkpoint %" PRIu64 ": the writer "
                        "failed earlier", w->uid, w->subtask, checkpoint_id);
  int rc = SL_OK;
  if (!is_aborted && w->n_live > 0) {
    int n = own_prepared(w, out_err);
    if (n < 0) return n;
    char q[64];
    snprintf(q, sizeof(q), "SET LOCAL lock_timeout = %u", w->s->lock_timeout_ms);
    if (n > 0) {
      char *pw = who_name(w->uid, w->subtask);
      const char *wn = pw ? pw : "postgres sink";
      if ((rc = writer_begin(w, wn, out_err)) == SL_OK)
        rc = exec_cmd(w->conn, q, wn, "SET LOCAL", out_err);
      sl_free(pw);
      if (rc != SL_OK) {
        w->is_failed = true;
        return rc;
      }
    }
    w->is_own_wait = n > 0; /* the message below says whose lock */
    rc = send_batch(w, out_err);
    w->is_own_wait = false;
    if (rc != SL_OK && n > 0 && strstr(sl_error_message(*out_err), "55P03"))
      sl_error_prefix(*out_err, "epoch %" PRIu64 " changes rows that a "
                      "prepared transaction of this subtask still locks (its "
                      "checkpoint has not completed, or was aborted); waited "
                      "lock_timeout_ms = %u; the restore commits or rolls it "
                      "back", w->epoch, w->s->lock_timeout_ms);
    if (rc != SL_OK) return rc;
  }
  if (!w->is_open) { /* an empty epoch: nothing to commit */
    w->epoch = checkpoint_id;
    return SL_OK;
  }
  char *who = who_name(w->uid, w->subtask);
  char *gid = make_gid(w->job, w->uid, w->subtask, w->epoch);
  char *qt = quote_table(w->s->commit_table);
  char *lit = gid ? PQescapeLiteral(w->conn, gid, strlen(gid)) : NULL;
  sl_bytes_t q;
  sl_bytes_init(&q);
  if (!who || !gid || !qt || !lit) {
    rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
    goto done;
  }
  char sub[16], ep[24], ck[24];
  snprintf(sub, sizeof(sub), "%u", w->subtask);
  snprintf(ep, sizeof(ep), "%" PRIu64, w->epoch);
  snprintf(ck, sizeof(ck), "%" PRIu64, checkpoint_id);
  const char *params[6] = {w->job, w->uid, sub, ep, ck, gid};
  if (is_aborted) goto prepare;
  if ((rc = sl_bytes_printf(&q, "INSERT INTO %s (job, sink_uid, subtask, "
                            "epoch, checkpoint, gid) VALUES ($1, $2, $3, $4, "
                            "$5, $6)", qt)) != SL_OK) {
    rc = sl_error_set(out_err, rc, "postgres sink: out of memory");
    goto done;
  }
  PGresult *res = PQexecParams(w->conn, (const char *)q.data, 6, NULL, params,
                               NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_COMMAND_OK) {
    rc = res_error(out_err, w->conn, res, who, "inserting the commit-log "
                   "marker");
    PQclear(res);
    goto done;
  }
  PQclear(res);
prepare:
  sl_bytes_clear(&q);
  if ((rc = sl_bytes_printf(&q, "PREPARE TRANSACTION %s", lit)) != SL_OK) {
    rc = sl_error_set(out_err, rc, "postgres sink: out of memory");
    goto done;
  }
  res = PQexec(w->conn, (const char *)q.data);
  w->is_open = false; /* prepared, rolled back or failed: no longer open */
  if (PQresultStatus(res) != PGRES_COMMAND_OK) {
    const char *st = sqlstate(res);
    rc = res_error(out_err, w->conn, res, who, "PREPARE TRANSACTION");
    if (strcmp(st, "53200") == 0)
      sl_error_prefix(*out_err, "the server's limit of prepared transactions "
                      "(max_prepared_transactions) is reached; raise it or "
                      "commit or roll back the prepared transactions that "
                      "hold it (pg_prepared_xacts)");
    PQclear(res);
    goto done;
  }
  /* Invariant P2: the tag, not the status, says whether it was prepared. */
  if (strcmp(PQcmdStatus(res), "PREPARE TRANSACTION") != 0) {
    rc = sl_error_set(out_err, SL_EIO,
                      "%s: PREPARE TRANSACTION '%s' for checkpoint %" PRIu64
                      " answered %s: the transaction had failed and was "
                      "rolled back, epoch %" PRIu64 " is not prepared", who,
                      gid, checkpoint_id, PQcmdStatus(res), w->epoch);
    PQclear(res);
    goto done;
  }
  PQclear(res);
  rc = encode_committable(out_committable, w->epoch, checkpoint_id,
                          w->subtask, gid);
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, rc, "postgres sink: out of memory");
    goto done;
  }
  w->has_rows = false;
  w->epoch = checkpoint_id;
done:
  if (rc != SL_OK) w->is_failed = true;
  if (lit) PQfreemem(lit);
  sl_bytes_close(&q);
  sl_free(who);
  sl_free(gid);
  sl_free(qt);
  return rc;
}

static int writer_close_impl(void *writer, bool is_success,
                           sl_error_t **out_err) {
  pgwriter_t *w = writer;
  int rc = SL_OK;
  if (w->s->delivery == SL_DELIVERY_AT_LEAST_ONCE && is_success && !w->is_failed) {
    rc = send_batch(w, out_err);
    if (rc == SL_OK) rc = writer_commit_plain(w, out_err);
  }
  if (w->is_open || w->is_failed) {
    /* Rows after the last prepare (or a failed epoch) are never committed:
     * a restore replays them.  Closing the connection rolls back too. */
    if (w->s->delivery == SL_DELIVERY_EXACTLY_ONCE && is_success &&
        (w->has_rows || w->n_live))
      sl_log(SL_LOG_WARN, "postgres sink '%s' subtask %u: rows written after "
             "the last checkpoint were rolled back at close", w->uid,
             w->subtask);
    if (w->conn && PQstatus(w->conn) == CONNECTION_OK) {
      PGresult *res = PQexec(w->conn, "ROLLBACK");
      PQclear(res);
    }
  }
  writer_free(w);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Committer                                                            */

static void committer_free(pgcommitter_t *c) {
  if (c == NULL) return;
  if (c->conn) PQfinish(c->conn);
  sl_free(c->job);
  sl_free(c->uid);
  sl_free(c->owned);
  for (uint32_t i = 0; i < c->n_named; i++) sl_free(c->named[i]);
  sl_free(c->named);
  sl_free(c);
}

static int committer_open_impl(void *ctx, const sl_committer_init_t *init,
                             void **out_committer, sl_error_t **out_err) {
  pgsink_t *s = ctx;
  const char *job = init->job ? init->job : "job";
  pgcommitter_t *c = sl_calloc(1, sizeof(*c));
  char *who = who_name(init->uid, init->subtask);
  int rc;
  if (c == NULL || who == NULL) goto oom;
  c->s = s;
  c->subtask = init->subtask;
  c->counters = init->counters;
  c->job = sl_strdup(job);
  c->uid = sl_strdup(init->uid);
  c->n_owned = init->n_owned_subtasks;
  c->owned = sl_calloc(c->n_owned ? c->n_owned : 1, sizeof(uint32_t));
  if (!c->job || !c->uid || !c->owned) goto oom;
  if (c->n_owned)
    memcpy(c->owned, init->owned_subtasks, c->n_owned * sizeof(uint32_t));
  sl__pg_app_name(c->app, job, init->uid, init->subtask,
                  sl__pg_fences_nonce(s->fences), true);
  /* A.3 step 6a, before the restored commits: end the sessions of older
   * attempts' writers and committers of the owned subtasks. */
  if ((rc = config_error(out_err, check_gid(job, init->uid, who, out_err))) !=
          SL_OK ||
      (rc = pg_connect(s, who, c->app, &c->conn, out_err)) != SL_OK ||
      (rc = config_error(out_err, check_prepared(c->conn, s, who,
                                                 init->parallelism,
                                                 out_err))) != SL_OK ||
      (rc = ensure_commit_table(c->conn, s, who, out_err)) != SL_OK ||
      (rc = sl__pg_fence_ensure_table(c->conn, s->fence_table, who,
                                      out_err)) != SL_OK ||
      (rc = sl__pg_fence_terminate(c->conn, c->job, c->uid, c->owned,
                                   c->n_owned, sl__pg_fences_nonce(s->fences),
                                   who, out_err)) != SL_OK)
    goto fail;
  *out_committer = c;
  sl_free(who);
  return SL_OK;
oom:
  rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
fail:
  committer_free(c);
  sl_free(who);
  return rc;
}

static int remember_gid(pgcommitter_t *c, const char *gid) {
  for (uint32_t i = 0; i < c->n_named; i++)
    if (strcmp(c->named[i], gid) == 0) return SL_OK;
  if (c->n_named == c->cap_named) {
    uint32_t cap = c->cap_named ? 2 * c->cap_named : 8;
    char **n = sl_realloc(c->named, cap * sizeof(*n));
    if (n == NULL) return SL_ENOMEM;
    c->named = n;
    c->cap_named = cap;
  }
  char *g = sl_strdup(gid);
  if (g == NULL) return SL_ENOMEM;
  c->named[c->n_named++] = g;
  return SL_OK;
}

/* Reconnect a lost committer connection; false when that fails too. */
static bool committer_ensure_conn(pgcommitter_t *c, const char *who) {
  if (c->conn && PQstatus(c->conn) == CONNECTION_OK) return true;
  if (c->conn) {
    PQreset(c->conn);
    if (PQstatus(c->conn) == CONNECTION_OK) {
      PGresult *res = PQexec(c->conn, "SET TIME ZONE 'UTC'");
      PQclear(res);
      return true;
    }
  }
  sl_error_t *err = NULL;
  PGconn *conn = NULL;
  if (pg_connect(c->s, who, c->app, &conn, &err) != SL_OK) {
    sl_log(SL_LOG_WARN, "%s", err ? sl_error_message(err) : who);
    sl_error_destroy(err);
    return false;
  }
  if (c->conn) PQfinish(c->conn);
  c->conn = conn;
  return true;
}

/* Query returning rows: 1 when it returned one or more, 0 none, <0 error
 * (then *out_err), and *out_is_conn when the connection failed. */
static int query_exists(pgcommitter_t *c, const char *sql, int n,
                        const char *const *params, const char *who,
                        const char *what, bool *out_is_conn,
                        sl_error_t **out_err) {
  PGresult *res = PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    *out_is_conn = is_connection_error(c->conn, sqlstate(res));
    int rc = res_error(out_err, c->conn, res, who, what);
    PQclear(res);
    return rc;
  }
  int found = PQntuples(res) > 0;
  PQclear(res);
  return found;
}

static int commit_impl(void *committer, uint64_t checkpoint_id,
                     uint32_t origin_subtask, const uint8_t *bytes, size_t len,
                     uint32_t attempt, sl_commit_status_t *out_status,
                     sl_error_t **out_err) {
  pgcommitter_t *c = committer;
  if (len < 28 || bytes[0] != COMMITTABLE_VERSION ||
      len != 28u + (size_t)(bytes[2] | (bytes[3] << 8)))
    return sl_error_set(out_err, SL_ECORRUPT,
                        "postgres sink '%s' subtask %u: the committable of "
                        "subtask %u for checkpoint %" PRIu64 " is malformed "
                        "(%zu bytes, version %u)", c->uid, c->subtask,
                        origin_subtask, checkpoint_id, len,
                        len ? bytes[0] : 0u);
  uint64_t epoch = sl_load_u64le(bytes + 4);
  uint64_t sub64 = sl_load_u64le(bytes + 20);
  char *gid = sl_strndup((const char *)bytes + 28, len - 28);
  char *who = who_name(c->uid, c->subtask);
  char *lit = NULL, *qt = NULL;
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = SL_OK;
  if (gid == NULL || who == NULL || remember_gid(c, gid) != SL_OK) {
    rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
    goto done;
  }
  if (!committer_ensure_conn(c, who)) {
    (void)sl_error_set(out_err, SL_EIO, "%s: COMMIT PREPARED '%s' "
                       "(checkpoint %" PRIu64 ", attempt %u): no connection",
                       who, gid, checkpoint_id, attempt);
    *out_status = SL_COMMIT_RETRY;
    goto done;
  }
  lit = PQescapeLiteral(c->conn, gid, strlen(gid));
  qt = quote_table(c->s->commit_table);
  if (!lit || !qt ||
      sl_bytes_printf(&q, "COMMIT PREPARED %s", lit) != SL_OK) {
    rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
    goto done;
  }
  PGresult *res = PQexec(c->conn, (const char *)q.data);
  if (PQresultStatus(res) == PGRES_COMMAND_OK) {
    PQclear(res);
    *out_status = SL_COMMIT_OK;
    goto done;
  }
  char st[6];
  snprintf(st, sizeof(st), "%s", sqlstate(res));
  const char *emsg = res ? PQresultErrorMessage(res) : "";
  if (is_connection_error(c->conn, st)) {
    char m[512];
    one_line(emsg && emsg[0] ? emsg : PQerrorMessage(c->conn), m, sizeof(m));
    (void)sl_error_set(out_err, SL_EIO, "%s: COMMIT PREPARED '%s' "
                       "(checkpoint %" PRIu64 ", attempt %u) lost its "
                       "connection (%s); the next attempt resolves the "
                       "outcome", who, gid, checkpoint_id, attempt, m);
    PQclear(res);
    *out_status = SL_COMMIT_RETRY;
    goto done;
  }
  if (strcmp(st, "55000") == 0 && emsg && strstr(emsg, "is busy")) {
    (void)res_error(out_err, c->conn, res, who, "COMMIT PREPARED");
    PQclear(res);
    *out_status = SL_COMMIT_RETRY;
    goto done;
  }
  if (strcmp(st, "42704") != 0) {
    rc = res_error(out_err, c->conn, res, who, "COMMIT PREPARED");
    sl_error_prefix(*out_err, "checkpoint %" PRIu64 ", gid '%s'",
                    checkpoint_id, gid);
    PQclear(res);
    *out_status = SL_COMMIT_FATAL;
    goto done;
  }
  PQclear(res);
  /* 42704: no prepared transaction named gid.  Invariant P3: the marker
   * row proves a commit; without it, a prepared gid means someone else is
   * finishing it, and neither means the epoch is lost. */
  char sub[16], ep[24];
  snprintf(sub, sizeof(sub), "%" PRIu64, sub64);
  snprintf(ep, sizeof(ep), "%" PRIu64, epoch);
  const char *mp[4] = {c->job, c->uid, sub, ep};
  sl_bytes_clear(&q);
  if (sl_bytes_printf(&q, "SELECT 1 FROM %s WHERE job = $1 AND sink_uid = $2 "
                      "AND subtask = $3 AND epoch = $4", qt) != SL_OK) {
    rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
    goto done;
  }
  bool is_conn = false;
  int found = query_exists(c, (const char *)q.data, 4, mp, who,
                           "reading the commit-log marker", &is_conn, out_err);
  if (found == 0) {
    const char *gp[1] = {gid};
    found = query_exists(c, "SELECT 1 FROM pg_prepared_xacts WHERE gid = $1",
                         1, gp, who, "reading pg_prepared_xacts", &is_conn,
                         out_err);
    if (found == 1) {
      (void)sl_error_set(out_err, SL_EAGAIN, "%s: COMMIT PREPARED '%s' "
                         "answered 42704 while pg_prepared_xacts lists it "
                         "(another session is finishing it)", who, gid);
      *out_status = SL_COMMIT_RETRY;
    } else if (found == 0) {
      (void)sl_error_set(out_err, SL_ENOTFOUND,
                         "%s: COMMIT PREPARED '%s' answered SQLSTATE 42704 "
                         "(no such prepared transaction) and the commit-log "
                         "table '%s' has no marker for epoch %s: the "
                         "transaction was rolled back outside sluice",
                         who, gid, c->s->commit_table, ep);
      *out_status = SL_COMMIT_LOST;
    }
  } else if (found == 1) {
    *out_status = SL_COMMIT_ALREADY;
  }
  if (found < 0) {
    if (is_conn) { /* *out_err says what failed */
      *out_status = SL_COMMIT_RETRY;
    } else {
      rc = found;
      *out_status = SL_COMMIT_FATAL;
    }
  }
done:
  if (lit) PQfreemem(lit);
  sl_bytes_close(&q);
  sl_free(qt);
  sl_free(gid);
  sl_free(who);
  return rc;
}

/* Parse "<s>/<N>" (the rest of a gid after the prefix). */
static bool parse_tail(const char *t, uint32_t *out_s, uint64_t *out_n) {
  char *end;
  if (!isdigit((unsigned char)t[0])) return false;
  errno = 0;
  unsigned long s = strtoul(t, &end, 10);
  if (errno || *end != '/' || s > UINT32_MAX) return false;
  t = end + 1;
  if (!isdigit((unsigned char)t[0])) return false;
  unsigned long long n = strtoull(t, &end, 10);
  if (errno || *end != '\0') return false;
  *out_s = (uint32_t)s;
  *out_n = n;
  return true;
}

/* P4: roll back the lingering gids of the owned subtasks that no
 * committable given to commit() names. */
static int rollback_lingering(pgcommitter_t *c, const char *who,
                              sl_error_t **out_err) {
  PGresult *res = PQexec(c->conn, "SELECT gid FROM pg_prepared_xacts WHERE "
                         "database = current_database() ORDER BY gid");
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = res_error(out_err, c->conn, res, who, "reading pg_prepared_xacts");
    PQclear(res);
    return rc;
  }
  size_t plen = gid_prefix_len(c->job, c->uid);
  char *prefix = make_gid(c->job, c->uid, 0, 0);
  if (prefix == NULL) {
    PQclear(res);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  int rc = SL_OK;
  for (int r = 0; r < PQntuples(res) && rc == SL_OK; r++) {
    const char *gid = PQgetvalue(res, r, 0);
    uint32_t sub;
    uint64_t n;
    if (strncmp(gid, prefix, plen) != 0 || !parse_tail(gid + plen, &sub, &n))
      continue;
    bool is_owned = false, is_named = false;
    for (uint32_t i = 0; i < c->n_owned; i++) is_owned |= c->owned[i] == sub;
    for (uint32_t i = 0; i < c->n_named; i++)
      is_named |= strcmp(c->named[i], gid) == 0;
    if (!is_owned || is_named) continue;
    char *lit = PQescapeLiteral(c->conn, gid, strlen(gid));
    sl_bytes_t q;
    sl_bytes_init(&q);
    if (lit == NULL || sl_bytes_printf(&q, "ROLLBACK PREPARED %s", lit)) {
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    } else {
      PGresult *rr = PQexec(c->conn, (const char *)q.data);
      if (PQresultStatus(rr) == PGRES_COMMAND_OK) {
        sl_log(SL_LOG_INFO, "%s: rolled back the lingering prepared "
               "transaction '%s'", who, gid);
        sl_sink_counters_add_lingering_aborted(c->counters, 1);
      } else if (strcmp(sqlstate(rr), "42704") != 0) {
        rc = res_error(out_err, c->conn, rr, who, "ROLLBACK PREPARED");
        sl_error_prefix(*out_err, "gid '%s'", gid);
      }
      PQclear(rr);
    }
    if (lit) PQfreemem(lit);
    sl_bytes_close(&q);
  }
  sl_free(prefix);
  PQclear(res);
  return rc;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A.3 step 6c: roll back the lingering gids, then bump the fence rows of
 * the owned subtasks (P6).  A bump that waited lock_timeout_ms (at most
 * 1 s a round) for a row lock means a transaction of an older writer
 * holds it: still open (it may prepare meanwhile, which the next round's
 * rollback finds) or prepared after this round's rollback.  After
 * FENCE_ROUNDS rounds the task fails, naming the holders; the next
 * attempt tries again.
 */
static int recover_impl(void *committer, sl_error_t **out_err) {
  pgcommitter_t *c = committer;
  char *who = who_name(c->uid, c->subtask);
  int64_t *epochs = sl_calloc(c->n_owned ? c->n_owned : 1, sizeof(int64_t));
  int rc = SL_OK;
  if (who == NULL || epochs == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto done;
  }
  if (!committer_ensure_conn(c, who)) {
    rc = sl_error_set(out_err, SL_EIO, "%s: recover: cannot connect", who);
    goto done;
  }
  uint32_t wait_ms =
      c->s->lock_timeout_ms < 1000 ? c->s->lock_timeout_ms : 1000;
  int64_t t0 = mono_ms();
  for (uint32_t round = 1;; round++) {
    if ((rc = rollback_lingering(c, who, out_err)) != SL_OK) goto done;
    rc = sl__pg_fence_bump(c->conn, c->s->fence_table, c->job, c->uid,
                           c->owned, c->n_owned, wait_ms, epochs, who,
                           out_err);
    if (rc != SL_EAGAIN) break;
    int64_t waited = mono_ms() - t0;
    if (round == FENCE_ROUNDS) {
      char *h = sl__pg_fence_holders(c->conn, c->s->fence_table);
      sl_error_destroy(*out_err);
      *out_err = NULL;
      rc = sl_error_set(out_err, SL_EIO, "%s: cannot fence older writers: "
                        "after %u rounds of lock_timeout %u ms the fence "
                        "rows in '%s' are still locked by %s; end those "
                        "sessions (pg_terminate_backend) or transactions, "
                        "and the next attempt fences again", who, round,
                        wait_ms, c->s->fence_table,
                        h && h[0] ? h : "(unknown)");
      sl_free(h);
      goto done;
    }
    sl_log(SL_LOG_INFO, "%s: the fence is locked by a transaction of an "
           "older writer (round %u, %" PRId64 " ms); rolling back lingering "
           "transactions again", who, round, waited);
    sl_error_destroy(*out_err);
    *out_err = NULL;
  }
  if (rc != SL_OK) goto done;
  for (uint32_t i = 0; i < c->n_owned && rc == SL_OK; i++)
    if (sl__pg_fences_put(c->s->fences, c->job, c->uid, c->owned[i],
                          epochs[i]) != SL_OK)
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
done:
  sl_free(epochs);
  sl_free(who);
  return rc;
}

/*
 * Rule 0.3-7 (docs/connectors.md "Restoring an older checkpoint"): the
 * newest checkpoint whose marker row is committed, over every subtask of
 * this job and sink.  A marker row is written inside its epoch's prepared
 * transaction, so it is visible exactly when that epoch committed
 * (invariant P1); its column checkpoint is the id prepare() was given.
 */
static int committed_max_impl(void *committer, uint64_t *out_ckpt,
                              sl_bytes_t *out_evidence,
                              sl_error_t **out_err) {
  pgcommitter_t *c = committer;
  char *who = who_name(c->uid, c->subtask);
  char *qt = quote_table(c->s->commit_table);
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = SL_OK;
  *out_ckpt = 0;
  if (who == NULL || qt == NULL ||
      sl_bytes_printf(&q, "SELECT checkpoint, subtask, gid FROM %s WHERE job "
                      "= $1 AND sink_uid = $2 ORDER BY checkpoint DESC "
                      "LIMIT 1", qt) != SL_OK) {
    rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
    goto done;
  }
  if (!committer_ensure_conn(c, who)) {
    rc = sl_error_set(out_err, SL_EIO, "%s: cannot connect to read the "
                      "commit-log table '%s'", who, c->s->commit_table);
    goto done;
  }
  const char *params[2] = {c->job, c->uid};
  PGresult *res = PQexecParams(c->conn, (const char *)q.data, 2, NULL, params,
                               NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    rc = res_error(out_err, c->conn, res, who, "reading the commit-log table");
    sl_error_prefix(*out_err, "table '%s'", c->s->commit_table);
  } else if (PQntuples(res) == 1) {
    *out_ckpt = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    if (sl_bytes_printf(out_evidence, "the commit-log table '%s' holds the "
                        "marker of checkpoint %s, subtask %s, gid '%s'",
                        c->s->commit_table, PQgetvalue(res, 0, 0),
                        PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2)) != SL_OK)
      rc = sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
  }
  PQclear(res);
done:
  sl_bytes_close(&q);
  sl_free(qt);
  sl_free(who);
  return rc;
}

static void pg_committer_close(void *committer) {
  committer_free(committer);
}

/* ------------------------------------------------------------------ */
/* Creation                                                             */

static void pg_destroy(void *ctx) {
  pgsink_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->conninfo);
  sl_free(s->table);
  for (uint32_t k = 0; k < s->n_key; k++) sl_free(s->key[k]);
  sl_free(s->key);
  sl_free(s->commit_table);
  sl_free(s->epoch_column);
  sl_free(s->version_field);
  sl_free(s->fence_table);
  sl__pg_fences_destroy(s->fences);
  sl_free(s);
}

/* The entry points: the implementations above may dereference out_err,
 * the engine (or a test) may pass NULL. */
static int pass_err(sl_error_t *err, sl_error_t **out_err, int rc) {
  if (out_err) *out_err = err;
  else sl_error_destroy(err);
  return rc;
}

static int pg_writer_open(void *ctx, const sl_sink_init_t *init,
                          void **out_writer, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = writer_open_impl(ctx, init, out_writer, &e);
  return pass_err(e, out_err, rc);
}
static int pg_write(void *writer, const sl_row_t *row, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = write_impl(writer, row, &e);
  return pass_err(e, out_err, rc);
}
static int pg_flush(void *writer, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = flush_impl(writer, &e);
  return pass_err(e, out_err, rc);
}
static int pg_writer_close(void *writer, bool is_success,
                           sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = writer_close_impl(writer, is_success, &e);
  return pass_err(e, out_err, rc);
}
static int pg_prepare(void *writer, uint64_t checkpoint_id,
                      sl_bytes_t *out_committable, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = prepare_impl(writer, checkpoint_id, out_committable, &e);
  return pass_err(e, out_err, rc);
}
static int pg_committer_open(void *ctx, const sl_committer_init_t *init,
                             void **out_committer, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = committer_open_impl(ctx, init, out_committer, &e);
  return pass_err(e, out_err, rc);
}
static int pg_commit(void *committer, uint64_t checkpoint_id,
                     uint32_t origin_subtask, const uint8_t *bytes, size_t len,
                     uint32_t attempt, sl_commit_status_t *out_status,
                     sl_error_t **out_err) {
  sl_error_t *e = NULL;
  *out_status = SL_COMMIT_FATAL;
  int rc = commit_impl(committer, checkpoint_id, origin_subtask, bytes, len,
                       attempt, out_status, &e);
  return pass_err(e, out_err, rc);
}
static int pg_recover(void *committer, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = recover_impl(committer, &e);
  return pass_err(e, out_err, rc);
}

static int pg_committed_max(void *committer, uint64_t *out_ckpt,
                            sl_bytes_t *out_evidence, sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = committed_max_impl(committer, out_ckpt, out_evidence, &e);
  return pass_err(e, out_err, rc);
}

static const sl_sink_vt_t pg_vt_2pc = {
    "postgres",      pg_writer_open, pg_write,          pg_flush,
    pg_writer_close, pg_destroy,     pg_prepare,        pg_committer_open,
    pg_commit,       pg_recover,     pg_committer_close, pg_committed_max};

static const sl_sink_vt_t pg_vt_plain = {
    "postgres", pg_writer_open, pg_write, pg_flush, pg_writer_close,
    pg_destroy, NULL,           NULL,     NULL,     NULL,
    NULL};

void sl_pg_sink_config_init(sl_pg_sink_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->mode = SL_PG_MODE_INSERT;
  cfg->delivery = SL_DELIVERY_EXACTLY_ONCE;
}

int sl_pg_sink_create(const sl_pg_sink_config_t *cfg,
                      const sl_sink_vt_t **out_vt, void **out_ctx,
                      sl_error_t **out_err) {
  if (cfg == NULL || cfg->conninfo == NULL || cfg->conninfo[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: 'conninfo' is "
                        "required");
  if (cfg->table == NULL || cfg->table[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: 'table' is "
                        "required");
  if (cfg->mode != SL_PG_MODE_INSERT && cfg->mode != SL_PG_MODE_UPSERT)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: unknown mode %d",
                        (int)cfg->mode);
  if (cfg->delivery != SL_DELIVERY_EXACTLY_ONCE &&
      cfg->delivery != SL_DELIVERY_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: unknown "
                        "delivery %d", (int)cfg->delivery);
  if (cfg->mode == SL_PG_MODE_UPSERT && cfg->n_key == 0)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: mode upsert "
                        "needs 'key' (the columns of a primary key or unique "
                        "index)");
  if (cfg->mode == SL_PG_MODE_INSERT && cfg->n_key > 0)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: 'key' is for mode "
                        "upsert; mode insert appends rows");
  if (cfg->delivery == SL_DELIVERY_AT_LEAST_ONCE && cfg->mode != SL_PG_MODE_UPSERT)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: delivery "
                        "at-least-once needs mode upsert with a key: replayed "
                        "inserts would duplicate rows");
  if (cfg->version_field && cfg->delivery != SL_DELIVERY_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: 'version_field' "
                        "is for delivery at-least-once");
  if (cfg->batch_size > 1000000)
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: batch_size %u is "
                        "above 1000000", cfg->batch_size);
  for (uint32_t k = 0; k < cfg->n_key; k++)
    if (cfg->key[k] == NULL || cfg->key[k][0] == '\0')
      return sl_error_set(out_err, SL_EINVAL, "postgres sink: key column %u "
                          "is empty", k + 1);
  pgsink_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) goto oom;
  s->mode = cfg->mode;
  s->delivery = cfg->delivery;
  s->batch_size = cfg->batch_size ? cfg->batch_size : DEFAULT_BATCH;
  s->max_concurrent =
      cfg->max_concurrent_checkpoints ? cfg->max_concurrent_checkpoints : 1;
  s->connect_timeout_s = cfg->connect_timeout_s ? cfg->connect_timeout_s : 10;
  s->lock_timeout_ms = cfg->lock_timeout_ms ? cfg->lock_timeout_ms : 5000;
  s->conninfo = sl_strdup(cfg->conninfo);
  s->table = sl_strdup(cfg->table);
  s->commit_table =
      sl_strdup(cfg->commit_table ? cfg->commit_table : "sluice_sink_commits");
  s->epoch_column =
      sl_strdup(cfg->epoch_column ? cfg->epoch_column : "sluice_epoch");
  s->fence_table =
      sl_strdup(cfg->fence_table ? cfg->fence_table : "sluice_sink_fence");
  if (!s->conninfo || !s->table || !s->commit_table || !s->epoch_column ||
      !s->fence_table || sl__pg_fences_create(&s->fences) != SL_OK)
    goto oom;
  if (cfg->version_field &&
      (s->version_field = sl_strdup(cfg->version_field)) == NULL)
    goto oom;
  if (strchr(s->epoch_column, '"')) {
    pg_destroy(s);
    return sl_error_set(out_err, SL_EINVAL, "postgres sink: epoch_column must "
                        "not contain '\"'");
  }
  if (cfg->n_key) {
    s->key = sl_calloc(cfg->n_key, sizeof(char *));
    if (s->key == NULL) goto oom;
    for (uint32_t k = 0; k < cfg->n_key; k++) {
      s->key[k] = sl_strdup(cfg->key[k]);
      s->n_key++;
      if (s->key[k] == NULL) goto oom;
    }
  }
  *out_vt = s->delivery == SL_DELIVERY_EXACTLY_ONCE ? &pg_vt_2pc : &pg_vt_plain;
  *out_ctx = s;
  return SL_OK;
oom:
  pg_destroy(s);
  return sl_error_set(out_err, SL_ENOMEM, "postgres sink: out of memory");
}

static int check_impl(pgsink_t *s, const char *job, const char *uid,
                      const sl_schema_t *schema, uint32_t parallelism,
                      sl_error_t **out_err) {
  if (job == NULL) job = "job";
  char *who = who_name(uid, 0);
  if (who == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  /* "subtask 0" says nothing here: name the sink only. */
  char *sp = strstr(who, " subtask ");
  if (sp) *sp = '\0';
  int version_idx;
  PGconn *conn = NULL;
  int rc = resolve_fields(s, schema, who, NULL, &version_idx, out_err);
  if (rc == SL_OK && s->delivery == SL_DELIVERY_EXACTLY_ONCE)
    rc = check_gid(job, uid, who, out_err);
  if (rc == SL_OK) rc = pg_connect(s, who, "sluice/check", &conn, out_err);
  if (rc == SL_OK) rc = check_table(conn, s, who, schema, NULL, out_err);
  if (rc == SL_OK && s->delivery == SL_DELIVERY_EXACTLY_ONCE)
    rc = check_prepared(conn, s, who, parallelism ? parallelism : 1, out_err);
  if (conn) PQfinish(conn);
  sl_free(who);
  return rc;
}

int sl_pg_sink_check(void *ctx, const char *job, const char *uid,
                     const sl_schema_t *schema, uint32_t parallelism,
                     sl_error_t **out_err) {
  sl_error_t *e = NULL;
  int rc = check_impl(ctx, job, uid ? uid : "sink", schema, parallelism, &e);
  return pass_err(e, out_err, rc);
}
