/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writer fencing of the PostgreSQL exactly-once sink (failure window W9: a
 * writer of an older attempt still connected, in another process or
 * behind a network partition).  A fence table holds one row per (job,
 * sink uid, subtask) with an epoch.  recover terminates the sessions of
 * the owned subtasks that another sink instance opened (their
 * application_name carries its nonce), rolls back the lingering prepared
 * transactions, then bumps the rows' epochs; every epoch's transaction of
 * a writer starts by reading its row FOR SHARE and comparing it with the
 * epoch its attempt's recover set.  How the pieces fit is in the design
 * notes of pg_sink.c (invariants P5-P7); see src/connectors/README.md.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "pg_int.h"

/* How long pg_terminate_backend waits for a session to exit, so that its
 * transaction is rolled back and its locks are gone when it returns. */
#define TERMINATE_WAIT_MS 5000

typedef struct fence_ent_s {
  char *job;
  char *uid;
  uint32_t subtask;
  int64_t epoch;
} fence_ent_t;

struct sl__pg_fences_s {
  uint64_t nonce;         /* set at create, then read-only */
  pthread_mutex_t mu;     /* guards ents, n_ents, cap_ents */
  fence_ent_t *ents;
  uint32_t n_ents, cap_ents;
};

/* A random nonce; when the kernel has none to give, the clock, the
 * process id and an address, hashed (it has to differ between instances,
 * not to be secret). */
static uint64_t make_nonce(const void *addr) {
  uint64_t n = 0;
  if (getrandom(&n, sizeof(n), GRND_NONBLOCK) == (ssize_t)sizeof(n) && n)
    return n;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t mix[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec,
                     (uint64_t)getpid(), (uint64_t)(uintptr_t)addr};
  n = sl_hash64(mix, sizeof(mix));
  return n ? n : 1;
}

int sl__pg_fences_create(sl__pg_fences_t **out_fences) {
  sl__pg_fences_t *f = sl_calloc(1, sizeof(*f));
  if (f == NULL) return SL_ENOMEM;
  if (pthread_mutex_init(&f->mu, NULL) != 0) {
    sl_free(f);
    return SL_ENOMEM;
  }
  f->nonce = make_nonce(f);
  *out_fences = f;
  return SL_OK;
}

void sl__pg_fences_destroy(sl__pg_fences_t *f) {
  if (f == NULL) return;
  for (uint32_t i = 0; i < f->n_ents; i++) {
    sl_free(f->ents[i].job);
    sl_free(f->ents[i].uid);
  }
  sl_free(f->ents);
  pthread_mutex_destroy(&f->mu);
  sl_free(f);
}

uint64_t sl__pg_fences_nonce(const sl__pg_fences_t *f) { return f->nonce; }

static fence_ent_t *find_ent(sl__pg_fences_t *f, const char *job,
                             const char *uid, uint32_t subtask) {
  for (uint32_t i = 0; i < f->n_ents; i++)
    if (f->ents[i].subtask == subtask && strcmp(f->ents[i].job, job) == 0 &&
        strcmp(f->ents[i].uid, uid) == 0)
      return &f->ents[i];
  return NULL;
}

int sl__pg_fences_put(sl__pg_fences_t *f, const char *job, const char *uid,
                      uint32_t subtask, int64_t epoch) {
  int rc = SL_OK;
  pthread_mutex_lock(&f->mu);
  fence_ent_t *e = find_ent(f, job, uid, subtask);
  if (e == NULL) {
    if (f->n_ents == f->cap_ents) {
      uint32_t cap = f->cap_ents ? 2 * f->cap_ents : 8;
      fence_ent_t *n = sl_realloc(f->ents, cap * sizeof(*n));
      if (n == NULL) {
        rc = SL_ENOMEM;
        goto done;
      }
      f->ents = n;
      f->cap_ents = cap;
    }
    char *j = sl_strdup(job), *u = sl_strdup(uid);
    if (j == NULL || u == NULL) {
      sl_free(j);
      sl_free(u);
      rc = SL_ENOMEM;
      goto done;
    }
    e = &f->ents[f->n_ents++];
    *e = (fence_ent_t){j, u, subtask, 0};
  }
  e->epoch = epoch;
done:
  pthread_mutex_unlock(&f->mu);
  return rc;
}

bool sl__pg_fences_get(sl__pg_fences_t *f, const char *job, const char *uid,
                       uint32_t subtask, int64_t *out_epoch) {
  pthread_mutex_lock(&f->mu);
  fence_ent_t *e = find_ent(f, job, uid, subtask);
  if (e) *out_epoch = e->epoch;
  pthread_mutex_unlock(&f->mu);
  return e != NULL;
}

/* ------------------------------------------------------------------ */
/* Session names                                                        */

static uint64_t name_hash(const char *job, const char *uid) {
  size_t nj = strlen(job), nu = strlen(uid);
  uint8_t small[256];
  uint8_t *b = nj + nu + 1 <= sizeof(small) ? small : sl_malloc(nj + nu + 1);
  if (b == NULL) return 0; /* a hash of nothing: still one per instance */
  memcpy(b, job, nj);
  b[nj] = 0;
  memcpy(b + nj + 1, uid, nu);
  uint64_t h = sl_hash64(b, nj + nu + 1);
  if (b != small) sl_free(b);
  return h;
}

void sl__pg_app_name(char buf[SL_PG_APP_SIZE], const char *job,
                     const char *uid, uint32_t subtask, uint64_t nonce,
                     bool is_committer) {
  snprintf(buf, SL_PG_APP_SIZE, "sluice/%016" PRIx64 "/%u/%016" PRIx64 "%s",
           name_hash(job, uid), subtask, nonce, is_committer ? "/c" : "");
}

/* The subtask and nonce of "<subtask>/<nonce>[/c]" (the rest of an
 * application_name after "sluice/<h>/"). */
static bool parse_app_tail(const char *t, uint32_t *out_subtask,
                           uint64_t *out_nonce) {
  char *end;
  if (*t < '0' || *t > '9') return false;
  unsigned long s = strtoul(t, &end, 10);
  if (*end != '/' || s > UINT32_MAX) return false;
  t = end + 1;
  for (int i = 0; i < 16; i++)
    if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
      return false;
  if (t[16] != '\0' && strcmp(t + 16, "/c") != 0) return false;
  *out_subtask = (uint32_t)s;
  *out_nonce = strtoull(t, NULL, 16);
  return true;
}

/* ------------------------------------------------------------------ */
/* The fence table                                                      */

static int exec_ok(PGconn *conn, const char *sql, const char *who,
                   const char *what, sl_error_t **out_err) {
  PGresult *res = PQexec(conn, sql);
  int rc = SL_OK;
  if (PQresultStatus(res) != PGRES_COMMAND_OK &&
      PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = sl__pg_res_error(out_err, conn, res, who, what);
  PQclear(res);
  return rc;
}

static void rollback(PGconn *conn) {
  PGresult *res = PQexec(conn, "ROLLBACK");
  PQclear(res);
}

int sl__pg_fence_ensure_table(PGconn *conn, const char *table,
                              const char *who, sl_error_t **out_err) {
  /* Only when absent: CREATE TABLE IF NOT EXISTS needs CREATE on the
   * schema even when the table exists, and a role without it may use a
   * table created for it beforehand. */
  const char *params[1] = {table};
  PGresult *res = PQexecParams(conn, "SELECT to_regclass($1) IS NOT NULL", 1,
                               NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = sl__pg_res_error(out_err, conn, res, who,
                              "looking up the fence table");
    PQclear(res);
    return rc;
  }
  bool exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
  PQclear(res);
  if (exists) return SL_OK;
  char *qt = sl__pg_quote_table(table);
  if (qt == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_printf(
      &q,
      "BEGIN; SELECT pg_advisory_xact_lock(7306021515); "
      "CREATE TABLE IF NOT EXISTS %s (job text NOT NULL, sink_uid text NOT "
      "NULL, subtask integer NOT NULL, epoch bigint NOT NULL, updated_at "
      "timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, sink_uid, "
      "subtask)); COMMIT",
      qt);
  sl_free(qt);
  if (rc == SL_OK)
    rc = exec_ok(conn, (const char *)q.data, who, "creating the fence table",
                 out_err);
  else
    rc = sl_error_set(out_err, rc, "out of memory");
  sl_bytes_close(&q);
  if (rc != SL_OK) {
    rollback(conn);
    if (strstr(sl_error_message(*out_err), "42501"))
      sl_error_prefix(*out_err, "table '%s' (create it beforehand, see "
                      "docs/connectors.md, or grant CREATE on its schema)",
                      table);
    else
      sl_error_prefix(*out_err, "table '%s'", table);
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* Terminating older writers (A.3 step 6a)                              */

static bool is_owned(const uint32_t *owned, uint32_t n_owned, uint32_t s) {
  for (uint32_t i = 0; i < n_owned; i++)
    if (owned[i] == s) return true;
  return false;
}

int sl__pg_fence_terminate(PGconn *conn, const char *job, const char *uid,
                           const uint32_t *owned, uint32_t n_owned,
                           uint64_t nonce, const char *who,
                           sl_error_t **out_err) {
  char prefix[40];
  snprintf(prefix, sizeof(prefix), "sluice/%016" PRIx64 "/",
           name_hash(job, uid));
  char plen[24];
  snprintf(plen, sizeof(plen), "%zu", strlen(prefix));
  const char *params[2] = {prefix, plen};
  PGresult *res = PQexecParams(
      conn,
      "SELECT pid::text, application_name FROM pg_stat_activity WHERE "
      "datname = current_database() AND pid <> pg_backend_pid() AND "
      "left(application_name, $2::int) = $1 ORDER BY pid",
      2, NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = sl__pg_res_error(out_err, conn, res, who,
                              "reading pg_stat_activity");
    PQclear(res);
    return rc;
  }
  int rc = SL_OK;
  for (int r = 0; r < PQntuples(res) && rc == SL_OK; r++) {
    const char *pid = PQgetvalue(res, r, 0);
    const char *app = PQgetvalue(res, r, 1);
    uint32_t sub;
    uint64_t n;
    if (!parse_app_tail(app + strlen(prefix), &sub, &n) || n == nonce ||
        !is_owned(owned, n_owned, sub))
      continue;
    char ms[16];
    snprintf(ms, sizeof(ms), "%d", TERMINATE_WAIT_MS);
    const char *tp[2] = {pid, ms};
    PGresult *t = PQexecParams(conn, "SELECT pg_terminate_backend($1::int, "
                               "$2::bigint)", 2, NULL, tp, NULL, NULL, 0);
    if (PQresultStatus(t) == PGRES_TUPLES_OK) {
      if (strcmp(PQgetvalue(t, 0, 0), "t") == 0)
        sl_log(SL_LOG_INFO, "%s: terminated session pid %s ('%s') of an "
               "older attempt of subtask %u", who, pid, app, sub);
      else
        sl_log(SL_LOG_WARN, "%s: session pid %s ('%s') of an older attempt "
               "of subtask %u did not end within %d ms of "
               "pg_terminate_backend; the fence row stops it", who, pid, app,
               sub, TERMINATE_WAIT_MS);
    } else if (PQstatus(conn) != CONNECTION_OK) {
      rc = sl__pg_res_error(out_err, conn, t, who, "pg_terminate_backend");
    } else {
      char *m = NULL;
      sl_error_t *e = NULL;
      (void)sl__pg_res_error(&e, conn, t, who, "pg_terminate_backend");
      m = e ? sl_strdup(sl_error_message(e)) : NULL;
      sl_log(SL_LOG_WARN, "%s: cannot terminate session pid %s ('%s'), a "
             "writer or committer of an older attempt of subtask %u (%s); "
             "grant the sink's role pg_signal_backend or run every attempt "
             "as the same role; meanwhile the fence row stops that writer "
             "at its next epoch, and recover waits for its locks", who, pid,
             app, sub, m ? m : "out of memory");
      sl_free(m);
      sl_error_destroy(e);
    }
    PQclear(t);
  }
  PQclear(res);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The bump (A.3 step 6c) and the writer's check (step 3)               */

int sl__pg_fence_bump(PGconn *conn, const char *table, const char *job,
                      const char *uid, const uint32_t *owned,
                      uint32_t n_owned, uint32_t lock_timeout_ms,
                      int64_t *out_epochs, const char *who,
                      sl_error_t **out_err) {
  char *qt = sl__pg_quote_table(table);
  sl_bytes_t q, arr;
  sl_bytes_init(&q);
  sl_bytes_init(&arr);
  int rc = qt ? sl_bytes_append_str(&arr, "{") : SL_ENOMEM;
  for (uint32_t i = 0; i < n_owned && rc == SL_OK; i++)
    rc = sl_bytes_printf(&arr, "%s%u", i ? "," : "", owned[i]);
  if (rc == SL_OK) rc = sl_bytes_append(&arr, "}", 2);
  if (rc == SL_OK)
    rc = sl_bytes_printf(&q, "INSERT INTO %s AS f (job, sink_uid, subtask, "
                         "epoch) SELECT $1, $2, s, 1 FROM unnest($3::int[]) "
                         "s ON CONFLICT (job, sink_uid, subtask) DO UPDATE "
                         "SET epoch = f.epoch + 1, updated_at = now() "
                         "RETURNING subtask, epoch", qt);
  sl_free(qt);
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto done;
  }
  char set[64];
  snprintf(set, sizeof(set), "SET LOCAL lock_timeout = %u", lock_timeout_ms);
  if ((rc = exec_ok(conn, "BEGIN", who, "BEGIN", out_err)) != SL_OK ||
      (rc = exec_ok(conn, set, who, "SET LOCAL lock_timeout", out_err)) !=
          SL_OK)
    goto fail;
  const char *params[3] = {job, uid, (const char *)arr.data};
  PGresult *res = PQexecParams(conn, (const char *)q.data, 3, NULL, params,
                               NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    bool is_timeout = strcmp(sl__pg_sqlstate(res), "55P03") == 0;
    rc = sl__pg_res_error(out_err, conn, res, who, "bumping the fence");
    PQclear(res);
    if (is_timeout) rc = SL_EAGAIN;
    goto fail;
  }
  for (uint32_t i = 0; i < n_owned; i++) out_epochs[i] = 0;
  for (int r = 0; r < PQntuples(res); r++) {
    uint32_t s = (uint32_t)strtoul(PQgetvalue(res, r, 0), NULL, 10);
    for (uint32_t i = 0; i < n_owned; i++)
      if (owned[i] == s) out_epochs[i] = strtoll(PQgetvalue(res, r, 1), NULL,
                                                 10);
  }
  PQclear(res);
  rc = exec_ok(conn, "COMMIT", who, "COMMIT of the fence", out_err);
  if (rc != SL_OK) goto fail;
  for (uint32_t i = 0; i < n_owned && rc == SL_OK; i++)
    if (out_epochs[i] <= 0)
      rc = sl_error_set(out_err, SL_EIO, "%s: the fence of subtask %u came "
                        "back without an epoch", who, owned[i]);
  goto done;
fail:
  if (PQstatus(conn) == CONNECTION_OK) rollback(conn);
  if (rc != SL_EAGAIN) sl_error_prefix(*out_err, "table '%s'", table);
done:
  sl_bytes_close(&q);
  sl_bytes_close(&arr);
  return rc;
}

char *sl__pg_fence_holders(PGconn *conn, const char *table) {
  const char *params[1] = {table};
  PGresult *res = PQexecParams(
      conn,
      "SELECT coalesce(string_agg(h, ', ' ORDER BY h), '') FROM ("
      "SELECT 'pid ' || a.pid || ' (''' || a.application_name || ''', ' || "
      "coalesce(a.state, '?') || ')' AS h FROM pg_locks l JOIN "
      "pg_stat_activity a ON a.pid = l.pid WHERE l.relation = "
      "to_regclass($1) AND l.granted AND l.pid <> pg_backend_pid() "
      "UNION SELECT 'prepared transaction ''' || p.gid || '''' FROM "
      "pg_locks l JOIN pg_prepared_xacts p ON l.virtualtransaction = '-1/' "
      "|| p.transaction WHERE l.relation = to_regclass($1)) x",
      1, NULL, params, NULL, NULL, 0);
  char *out = NULL;
  if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
    out = sl_strdup(PQgetvalue(res, 0, 0));
  PQclear(res);
  return out;
}

char *sl__pg_fence_check_sql(PGconn *conn, const char *table,
                             const char *job, const char *uid,
                             uint32_t subtask) {
  char *qt = sl__pg_quote_table(table);
  char *lj = PQescapeLiteral(conn, job, strlen(job));
  char *lu = PQescapeLiteral(conn, uid, strlen(uid));
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = qt && lj && lu ? SL_OK : SL_ENOMEM;
  if (rc == SL_OK)
    rc = sl_bytes_printf(&q, "BEGIN; SELECT epoch FROM %s WHERE job = %s AND "
                         "sink_uid = %s AND subtask = %u FOR SHARE", qt, lj,
                         lu, subtask);
  if (rc == SL_OK) rc = sl_bytes_append(&q, "", 1);
  sl_free(qt);
  if (lj) PQfreemem(lj);
  if (lu) PQfreemem(lu);
  if (rc != SL_OK) {
    sl_bytes_close(&q);
    return NULL;
  }
  return (char *)q.data;
}

int sl__pg_fence_begin(PGconn *conn, const char *query, const char *table,
                       const char *job, uint32_t subtask, int64_t want,
                       uint64_t epoch, const char *who,
                       sl_error_t **out_err) {
  PGresult *res = PQexec(conn, query);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = sl__pg_res_error(out_err, conn, res, who, "reading the fence");
    sl_error_prefix(*out_err, "table '%s'", table);
    PQclear(res);
    return rc;
  }
  int rc = SL_OK;
  if (PQntuples(res) != 1) {
    rc = sl_error_set(out_err, SL_EFAILED,
                      "%s: fenced off: the fence table '%s' has no row for "
                      "job '%s' subtask %u, and this writer's attempt set "
                      "epoch %" PRId64 " there when it recovered; this "
                      "writer stops, and its epoch %" PRIu64 " is not "
                      "written", who, table, job, subtask, want, epoch);
  } else {
    int64_t have = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    if (have != want)
      rc = sl_error_set(out_err, SL_EFAILED,
                        "%s: fenced off: the fence table '%s' holds epoch "
                        "%" PRId64 " for job '%s' subtask %u, and this "
                        "writer's attempt set epoch %" PRId64 " when it "
                        "recovered: a newer attempt took the subtask over "
                        "(and rolled back what this writer left prepared), "
                        "so this writer belongs to an older attempt that is "
                        "still running; it stops, and its epoch %" PRIu64
                        " is not written", who, table, have, job, subtask,
                        want, epoch);
  }
  PQclear(res);
  /* Restarting would fence the newer attempt in turn, and the two would
   * take the subtask from each other forever: the older one stops. */
  if (rc != SL_OK) sl_error_set_fatal(*out_err, true);
  return rc;
}
