/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The failover matrix of the postgres-cdc source (issue 16, point 4): a
 * PostgreSQL table captured into another database of the same server
 * exactly once by `sluice run` from a pipeline file, through
 *
 *   {snapshot phase, stream phase} x {task failure, whole-process SIGKILL}
 *   x {parallelism 1, 4}
 *
 * with a writer thread running inserts, upserts, updates (also of the
 * primary key, which moves a row into another chunk), deletes, range
 * updates, multi-statement transactions and transactions of several
 * hundred rows (which the stream's batches of 512 rows split) against the
 * source table the whole time, also while sluice is dead between a kill
 * and --resume.  And two cells (flush-lsn, flush-lsn-retain-5) that
 * watch the slot's confirmed_flush_lsn while a job runs with the writer.
 *
 * Each matrix cell (one CTest entry, sl-fault-pgcdc-matrix-<phase>-<fault>-
 * p<P>):
 *
 *   - a PostgreSQL server (wal_level=logical) with database shop and
 *     public.t (id bigint PRIMARY KEY, c bigint NOT NULL, v varchar(40),
 *     REPLICA IDENTITY FULL), 3000 rows, and database sink with the
 *     target table t (same columns);
 *   - the pipeline: `type: postgres-cdc` (chunk_rows 100: 30 chunks,
 *     parallelism P, slot sluice_matrix) -> `type: postgres` (mode
 *     upsert, key id, delivery exactly-once), checkpoints every 200 ms,
 *     and for the task-failure rows a restart strategy (the job restarts
 *     in-process);
 *   - the faults, at injection points (docs/injection-points.md), never
 *     at moments:
 *       snapshot x fail  one run, SL_INJECT failing
 *                        pgcdc.snapshot.before_read, .after_snapshot,
 *                        .before_high and .after_read at different hits
 *                        (3, 10, 18, 26: different chunks, early and late);
 *       snapshot x kill  run 1 held (pause) at pgcdc.snapshot.before_read
 *                        of its 6th chunk until two checkpoints complete,
 *                        then SIGKILLed there; then a transaction that
 *                        changes one row of each chunk is held committing
 *                        (its commit record written, still in the proc
 *                        array: a synchronous standby that never comes)
 *                        until the stream runs, so every chunk read from
 *                        now on has it in its snapshot's xip and its commit
 *                        LSN below its HIGH; run 2 (--resume) killed at
 *                        its first .before_high; run 3 (--resume) held at
 *                        its first .after_read (rows, snapshot and HIGH
 *                        read, nothing emitted) until two checkpoints
 *                        complete, then SIGKILLed; run 4 (--resume) lives;
 *       stream x fail    one run (pgcdc.stream.before_push can only be
 *                        held or killed: the source ignores a failure
 *                        there): pgcdc.stream.after_batch_in_txn (the
 *                        task emitted a batch that ends inside a
 *                        transaction) fails at its 13th hit; the writer is
 *                        held at 150 statements of at most 40 rows each
 *                        (so at most 12 hits) until the stream runs and
 *                        two checkpoints of it have completed, then writes
 *                        transactions of 600 to 900 rows, each of which
 *                        makes at least one hit;
 *       stream x kill    run 1 held at its 60th pgcdc.stream.before_push
 *                        (a batch of stream rows held before it is queued
 *                        to the task) until two checkpoints complete, then
 *                        SIGKILLed; run 2 (--resume) killed at its 40th;
 *                        run 3 (--resume) lives until the writer is held
 *                        and a marker row written after it has reached the
 *                        sink (so a completed checkpoint's position is past
 *                        every change but the ones to come), then is
 *                        SIGKILLed; with sluice dead, one transaction of
 *                        1200 inserts and 20 updates; run 4 (--resume) is
 *                        held at its 2nd before_push (the transaction's
 *                        second batch of 512 rows) until the sink has the
 *                        first 512 inserts committed, so a completed
 *                        checkpoint lies inside the transaction, and is
 *                        SIGKILLed there; the writer goes on; run 5
 *                        (--resume, restored inside the transaction) lives;
 *     every hit is reached whatever the machine's speed (a snapshot has at
 *     least 30 chunk reads, a restored one at least one unfinished chunk;
 *     the writer makes a non-empty stream batch per transaction).  A held
 *     run is killed only after two checkpoints complete while it is held
 *     (or, run 4 of stream x kill, after the sink shows a checkpoint past
 *     the first batch), so its restore point is certainly inside the
 *     phase: a chunk unfinished, or a stream position;
 *   - then: the faults are over; a sentinel row written now reaches the
 *     sink (the pipeline is live); the writer runs 150 more operations
 *     and stops; the test polls, bounded, until the sink's t equals the
 *     source's t, field by field (NULLs included); the server has exactly
 *     one WAL sender (one stream reader); SIGTERM cancels sluice (exit
 *     143, docs/cli.md) and the tables are compared again.
 *
 * Each cell prints "matrix: <cell>: pass in S s" for the closing note.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "sl_servers.h"
#include "sl_test.h"
#include "sluice/sluice.h"

#define N_ROWS 3000
#define FIRST_ID 100
#define SENTINEL_ID 900000000LL
#define MARKER_ID 900000001LL
#define BIG_FIRST 800000000LL /* the test's own large transaction */
#define BIG_N 1200
#define SLOT "sluice_matrix"
/* Rows with id % 100 == HELD_MOD (one per chunk of 100) are the held
 * transaction's alone among the first N_ROWS: the writer never changes
 * them (its fresh ids are above). */
#define HELD_MOD 55

/* ------------------------------------------------------------------ */
/* Small helpers */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The child running sluice, killed when the test fails mid-way (an
 * unbounded job would otherwise outlive it). */
static pid_t g_child = -1;
static pid_t g_self = -1;

static void kill_child(void) {
  if (getpid() == g_self && g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
    g_child = -1;
  }
}

static size_t count_str(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

/* ------------------------------------------------------------------ */
/* The server, the databases and the tables */

typedef struct env_s {
  sl_server_t *pg;
  PGconn *s; /* database shop (the source) */
  PGconn *k; /* database sink */
  char src_ci[600], sink_ci[600];
  char pipeline[4300], bin[4300], name[64];
  int run; /* the current run's number (stderr-<run>.txt) */
  /* The writer. */
  pthread_t wt;
  atomic_bool stop;
  atomic_bool big;  /* transactions of several hundred rows allowed */
  atomic_bool idle; /* waiting at cap */
  atomic_uint_fast64_t ops;
  /* Statements written; while cap is not 0 the writer waits before an
   * operation once stmts reaches cap. */
  atomic_uint_fast64_t stmts, cap;
  atomic_uint_fast64_t bigs; /* large transactions committed */
  uint64_t seed;
  PGconn *held; /* a transaction whose COMMIT waits for a standby */
} env_t;

static void pg_ok(PGconn *p, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(p, sql, NULL, &err), err);
}

static int64_t pg_int(PGconn *p, const char *sql) {
  int64_t n = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(p, sql, &n, &err), err);
  return n;
}

/* Rows of a query as "a|b|...\n" text, "\N" for NULL. */
static char *pg_text(PGconn *p, const char *sql) {
  PGresult *r = PQexec(p, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    SL_TEST_FAIL("%s: %s", sql, PQerrorMessage(p));
  sl_bytes_t b;
  sl_bytes_init(&b);
  int nf = PQnfields(r);
  for (int i = 0; i < PQntuples(r); i++)
    for (int k = 0; k < nf; k++)
      SL_ASSERT_OK(sl_bytes_printf(
          &b, "%s%s", PQgetisnull(r, i, k) ? "\\N" : PQgetvalue(r, i, k),
          k + 1 < nf ? "|" : "\n"));
  PQclear(r);
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

#define TABLE_SQL "SELECT id, c, v FROM t ORDER BY id"

/* The first line where two table texts differ, for the failure message. */
static void first_diff(const char *a, const char *b, char *out, size_t n) {
  size_t line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') {
      line++;
      la = a + 1;
      lb = b + 1;
    }
    a++, b++;
  }
  int ea = (int)strcspn(la, "\n"), eb = (int)strcspn(lb, "\n");
  snprintf(out, n, "line %zu: source '%.*s', sink '%.*s'", line, ea, la, eb,
           lb);
}

/* conninfo of the server with dbname=db. */
static void conninfo_db(const env_t *e, const char *db, char *out, size_t n) {
  snprintf(out, n, "host=%s port=%d user=%s dbname=%s sslmode=disable "
           "gssencmode=disable", sl_server_host(e->pg),
           sl_server_port(e->pg), sl_server_user(e->pg), db);
}

static void env_open(env_t *e, const char *name, uint64_t seed,
                     bool with_position) {
  memset(e, 0, sizeof(*e));
  snprintf(e->name, sizeof(e->name), "%s", name);
  e->seed = seed;
  atomic_store(&e->big, true);
  g_self = getpid();
  atexit(kill_child);
  sl_server_opts_t o;
  sl_error_t *err = NULL;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  SL_ASSERT_OK_E(sl_server_start(&o, &e->pg, &err), err);
  PGconn *admin = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(e->pg), &admin, &err), err);
  pg_ok(admin, "CREATE DATABASE shop");
  pg_ok(admin, "CREATE DATABASE sink");
  /* Sessions of these databases never wait for a synchronous standby
   * (the held transaction asks for one itself; the server's command line
   * says synchronous_commit=on, which a database setting overrides). */
  pg_ok(admin, "ALTER DATABASE shop SET synchronous_commit = local");
  pg_ok(admin, "ALTER DATABASE sink SET synchronous_commit = local");
  PQfinish(admin);
  conninfo_db(e, "shop", e->src_ci, sizeof(e->src_ci));
  conninfo_db(e, "sink", e->sink_ci, sizeof(e->sink_ci));
  SL_ASSERT_OK_E(sl_pg_connect(e->src_ci, &e->s, &err), err);
  SL_ASSERT_OK_E(sl_pg_connect(e->sink_ci, &e->k, &err), err);
  pg_ok(e->s, "CREATE TABLE public.t (id bigint PRIMARY KEY, c bigint NOT "
              "NULL, v varchar(40))");
  pg_ok(e->s, "ALTER TABLE public.t REPLICA IDENTITY FULL");
  char sql[300];
  snprintf(sql, sizeof(sql), "INSERT INTO public.t SELECT g, g %% 97, CASE "
           "WHEN g %% 10 = 0 THEN NULL ELSE 'v' || g END FROM "
           "generate_series(%d, %d) g", FIRST_ID, FIRST_ID + N_ROWS - 1);
  pg_ok(e->s, sql);
  pg_ok(e->k, with_position
                  ? "CREATE TABLE t (id bigint PRIMARY KEY, c bigint NOT "
                    "NULL, v varchar(40), _position text)"
                  : "CREATE TABLE t (id bigint PRIMARY KEY, c bigint NOT "
                    "NULL, v varchar(40))");
  snprintf(e->bin, sizeof(e->bin), "%s/sluice", sl_test_bin_dir());
  snprintf(e->pipeline, sizeof(e->pipeline), "%s/matrix.yaml",
           sl_test_dir());
}

static void env_close(env_t *e) {
  PQfinish(e->s);
  PQfinish(e->k);
  sl_server_destroy(e->pg);
}

/* ------------------------------------------------------------------ */
/* The writer: one connection, a seeded mix of changes, paced. */

static uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/*
 * The writer's rows.  Apart from a few hot rows, each row of the table is
 * changed at most once (the writer walks a permutation of the initial ids):
 * a change lost on the way stays visible in the end.  A CDC row image is
 * the whole row, so any later change of a row would heal an earlier lost
 * one, and the final comparison could not see the loss.  The hot rows
 * (ids 100..109, chunk 0) are changed again and again.
 */
#define HOT 10

typedef struct wstate_s {
  uint64_t s;      /* RNG */
  uint64_t k;      /* next position in the permutation */
  int64_t next_id; /* next fresh id */
} wstate_t;

static int64_t next_perm(wstate_t *w) {
  for (;;) {
    int64_t id = FIRST_ID + (int64_t)((w->k++ * 1237u) % N_ROWS);
    if (id >= FIRST_ID + HOT && id % 100 != HELD_MOD) return id;
  }
}

static void w_exec(env_t *e, PGconn *p, const char *sql) {
  sl_error_t *err = NULL;
  if (sl_pg_exec(p, sql, NULL, &err) != SL_OK)
    SL_TEST_FAIL("writer: %s: %s", sql, sl_error_message(err));
  atomic_fetch_add(&e->stmts, 1);
}

/* One statement of the mix: at most 20 rows changed (40 changelog rows). */
static void write_one(env_t *e, PGconn *p, wstate_t *w, uint64_t n) {
  char sql[1024], v[48];
  if (rnd(&w->s) % 8 == 0) snprintf(v, sizeof(v), "NULL");
  else snprintf(v, sizeof(v), "'w%llu-%llu'", (unsigned long long)n,
                (unsigned long long)(rnd(&w->s) % 1000));
  long long c = (long long)(rnd(&w->s) % 1000);
  switch (rnd(&w->s) % 10) {
  case 0:
  case 1: /* a fresh row (the last chunk's range) */
    snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%lld, %lld, %s)",
             (long long)w->next_id++, c, v);
    break;
  case 2: /* an existing row through an upsert */
    snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%lld, %lld, %s) "
             "ON CONFLICT (id) DO UPDATE SET c = t.c + EXCLUDED.c, v = "
             "EXCLUDED.v", (long long)next_perm(w), c, v);
    break;
  case 3:
  case 4:
    snprintf(sql, sizeof(sql), "UPDATE t SET c = c + %lld, v = %s WHERE id "
             "= %lld", c + 1, v, (long long)next_perm(w));
    break;
  case 5: /* the primary key changes: the row moves to the last chunk */
    snprintf(sql, sizeof(sql), "UPDATE t SET id = %lld WHERE id = %lld",
             (long long)w->next_id++, (long long)next_perm(w));
    break;
  case 6:
  case 7:
    snprintf(sql, sizeof(sql), "DELETE FROM t WHERE id = %lld",
             (long long)next_perm(w));
    break;
  case 8: { /* many rows of many chunks in one statement */
    int o = snprintf(sql, sizeof(sql), "UPDATE t SET c = c + 1 WHERE id IN "
                     "(%lld", (long long)next_perm(w));
    for (int i = 0; i < 19; i++)
      o += snprintf(sql + o, sizeof(sql) - (size_t)o, ", %lld",
                    (long long)next_perm(w));
    snprintf(sql + o, sizeof(sql) - (size_t)o, ")");
    break;
  }
  default: /* a hot row */
    snprintf(sql, sizeof(sql), "UPDATE t SET c = c + 1, v = %s WHERE id = "
             "%lld", v, (long long)(FIRST_ID + (int64_t)(rnd(&w->s) % HOT)));
    break;
  }
  w_exec(e, p, sql);
}

/* A transaction of 600 to 899 fresh rows and 20 updates of existing ones
 * (at least 640 changelog rows: a stream batch of 512 ends inside it). */
static void write_big(env_t *e, PGconn *p, wstate_t *w) {
  char sql[1024];
  int64_t n = 600 + (int64_t)(rnd(&w->s) % 300);
  w_exec(e, p, "BEGIN");
  snprintf(sql, sizeof(sql), "INSERT INTO t SELECT g, g %% 1000, CASE WHEN "
           "g %% 7 = 0 THEN NULL ELSE 'big' || g END FROM "
           "generate_series(%lld, %lld) g", (long long)w->next_id,
           (long long)(w->next_id + n - 1));
  w->next_id += n;
  w_exec(e, p, sql);
  int o = snprintf(sql, sizeof(sql), "UPDATE t SET c = c + 7 WHERE id IN "
                   "(%lld", (long long)next_perm(w));
  for (int i = 0; i < 19; i++)
    o += snprintf(sql + o, sizeof(sql) - (size_t)o, ", %lld",
                  (long long)next_perm(w));
  snprintf(sql + o, sizeof(sql) - (size_t)o, ")");
  w_exec(e, p, sql);
  w_exec(e, p, "COMMIT");
  atomic_fetch_add(&e->bigs, 1);
}

static void *writer_main(void *arg) {
  env_t *e = arg;
  PGconn *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(e->src_ci, &p, &err), err);
  wstate_t w = {e->seed ? e->seed : 1, 0, FIRST_ID + N_ROWS};
  for (uint64_t n = 0; !atomic_load(&e->stop); n++) {
    uint64_t cap;
    while ((cap = atomic_load(&e->cap)) != 0 &&
           atomic_load(&e->stmts) >= cap && !atomic_load(&e->stop)) {
      atomic_store(&e->idle, true);
      nap_ms(5);
    }
    atomic_store(&e->idle, false);
    if (atomic_load(&e->stop)) break;
    uint64_t r = rnd(&w.s) % 25;
    if (r == 0 && atomic_load(&e->big)) {
      write_big(e, p, &w);
    } else if (r < 3) {
      /* A transaction of several statements (a position inside it is a
       * commit LSN plus changes to skip). */
      w_exec(e, p, "BEGIN");
      uint64_t k = 2 + rnd(&w.s) % 5;
      for (uint64_t i = 0; i < k; i++) write_one(e, p, &w, n);
      w_exec(e, p, "COMMIT");
    } else {
      write_one(e, p, &w, n);
    }
    atomic_fetch_add(&e->ops, 1);
    nap_ms(3); /* pacing, not a window */
  }
  atomic_store(&e->idle, true);
  PQfinish(p);
  return NULL;
}

static void writer_start(env_t *e) {
  atomic_store(&e->stop, false);
  SL_ASSERT_EQ_INT(pthread_create(&e->wt, NULL, writer_main, e), 0);
}

static void writer_stop(env_t *e) {
  atomic_store(&e->stop, true);
  pthread_join(e->wt, NULL);
}

/* Hold the writer at its next operation boundary and wait until it is
 * there (no transaction open). */
static void writer_hold(env_t *e) {
  atomic_store(&e->idle, false);
  atomic_store(&e->cap, atomic_load(&e->stmts) ? atomic_load(&e->stmts) : 1);
  double t0 = now_s();
  while (!atomic_load(&e->idle)) {
    if (now_s() - t0 > 60) SL_TEST_FAIL("the writer never stopped");
    nap_ms(5);
  }
}

/* ------------------------------------------------------------------ */
/* Runs of sluice */

/* retain 0: checkpoint.retain left to its default. */
static void write_pipeline(env_t *e, uint32_t par, bool restart,
                           bool with_position, uint32_t retain) {
  char ck[4600];
  if (retain)
    snprintf(ck, sizeof(ck), "{dir: %s/ckpt, interval_ms: 200, retain: %u}",
             sl_test_dir(), retain);
  else
    snprintf(ck, sizeof(ck), "{dir: %s/ckpt, interval_ms: 200}",
             sl_test_dir());
  char text[8192];
  snprintf(text, sizeof(text),
           "name: matrix\n"
           "parallelism: %u\n"
           "checkpoint: %s\n"
           "%s"
           "source:\n"
           "  type: postgres-cdc\n"
           "  uid: shop\n"
           "  conninfo: \"%s\"\n"
           "  tables: [public.t]\n"
           "  slot: " SLOT "\n"
           "  chunk_rows: 100\n"
           "  heartbeat: 1s\n"
           "%s"
           "sink:\n"
           "  type: postgres\n"
           "  uid: pg\n"
           "  conninfo: \"%s\"\n"
           "  table: t\n"
           "  mode: upsert\n"
           "  key: [id]\n"
           "  delivery: exactly-once\n",
           par, ck,
           restart ? "restart: {strategy: fixed-delay, max_attempts: 10, "
                     "delay_ms: 50}\n"
                   : "",
           e->src_ci, with_position ? "  metadata: [position]\n" : "",
           e->sink_ci);
  sl_test_write_file(e->pipeline, text);
}

static void err_path(const env_t *e, int run, char *out, size_t n) {
  snprintf(out, n, "%s/stderr-%d.txt", sl_test_dir(), run);
  (void)e;
}

static char *run_err(const env_t *e, int run) {
  char p[4400];
  err_path(e, run, p, sizeof(p));
  char *t = sl_test_read_file(p, NULL);
  return t ? t : strdup("");
}

/* Start run n (--resume from run 2 on) with inject (may be NULL). */
static void spawn_run(env_t *e, int n, const char *inject) {
  char p[4400];
  err_path(e, n, p, sizeof(p));
  const char *a1[] = {e->bin, "run", e->pipeline, "--quiet", NULL};
  const char *an[] = {e->bin, "run", e->pipeline, "--resume", "--quiet",
                      NULL};
  e->run = n;
  g_child = sl_test_spawn(n == 1 ? a1 : an, inject, p,
                          SL_TEST_SPAWN_NO_STDOUT);
}

/* Wait (bounded) for the child to exit; its wait status. */
static int wait_child(env_t *e, double timeout_s, const char *what) {
  if (g_child <= 0) SL_TEST_FAIL("%s: no sluice process", what);
  double t0 = now_s();
  for (;;) {
    int st;
    pid_t r = waitpid(g_child, &st, WNOHANG);
    if (r == g_child) {
      g_child = -1;
      return st;
    }
    if (r < 0) SL_TEST_FAIL("waitpid: %s", strerror(errno));
    if (now_s() - t0 > timeout_s) {
      char *t = run_err(e, e->run);
      SL_TEST_FAIL("%s: sluice (run %d) did not exit within %.0f s:\n%s",
                   what, e->run, timeout_s, t);
    }
    nap_ms(20);
  }
}

/* Wait until the child is killed at point; fails on any other end. */
static void wait_killed(env_t *e, const char *point) {
  int st = wait_child(e, 240, point);
  char *t = run_err(e, e->run);
  char line[200];
  snprintf(line, sizeof(line), "sluice: injection point %s: killing the "
           "process", point);
  if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && strstr(t, line)))
    SL_TEST_FAIL("run %d was to be killed at %s; it ended with status 0x%x:"
                 "\n%s", e->run, point, st, t);
  free(t);
}

static void assert_running(env_t *e, const char *when);

/* The completed checkpoints (a chk-N with its _metadata: the rename of
 * _metadata is the commit point), ascending; their number. */
static size_t completed_ids(uint64_t *ids, size_t cap) {
  char d[4400];
  snprintf(d, sizeof(d), "%s/ckpt/matrix", sl_test_dir());
  DIR *dd = opendir(d);
  if (dd == NULL) return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(dd)) != NULL) {
    unsigned long long id;
    char tail;
    if (sscanf(de->d_name, "chk-%llu%c", &id, &tail) != 1) continue;
    char m[4700];
    snprintf(m, sizeof(m), "%s/%s/_metadata", d, de->d_name);
    if (access(m, F_OK) != 0) continue;
    if (n == cap) SL_TEST_FAIL("more than %zu completed checkpoints", cap);
    size_t i = n++;
    while (i > 0 && ids[i - 1] > id) {
      ids[i] = ids[i - 1];
      i--;
    }
    ids[i] = id;
  }
  closedir(dd);
  return n;
}

/* The newest completed checkpoint, 0 when none. */
static uint64_t newest_completed(void) {
  uint64_t ids[256];
  size_t n = completed_ids(ids, 256);
  return n ? ids[n - 1] : 0;
}

/* Wait (bounded) until the current run's stderr has `n` of needle; fails
 * when the child exits first. */
static void wait_log(env_t *e, const char *needle, size_t n) {
  double t0 = now_s();
  for (;;) {
    char *t = run_err(e, e->run);
    size_t k = count_str(t, needle);
    if (k >= n) {
      free(t);
      return;
    }
    int st = 0;
    if (g_child <= 0 || waitpid(g_child, &st, WNOHANG) == g_child) {
      g_child = -1;
      SL_TEST_FAIL("run %d ended (status 0x%x) before its log had %zu x "
                   "'%s':\n%s", e->run, st, n, needle, t);
    }
    if (now_s() - t0 > 240)
      SL_TEST_FAIL("run %d: the log never had %zu x '%s' (%zu):\n%s", e->run,
                   n, needle, k, t);
    free(t);
    nap_ms(50);
  }
}

/* Wait (bounded) until a checkpoint newer than every one completed before
 * completes, `times` times; the newest. */
static uint64_t wait_completions(env_t *e, int times, const char *what) {
  uint64_t now = newest_completed();
  double t0 = now_s();
  for (int i = 0; i < times; i++) {
    uint64_t before = now;
    while ((now = newest_completed()) <= before) {
      assert_running(e, what);
      if (now_s() - t0 > 240)
        SL_TEST_FAIL("run %d: no checkpoint completed (%s)", e->run, what);
      nap_ms(20);
    }
  }
  return now;
}

static void sigkill_child(env_t *e, const char *what) {
  SL_ASSERT_EQ_INT(kill(g_child, SIGKILL), 0);
  int st = wait_child(e, 60, what);
  SL_ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/*
 * The current run holds a thread at point (SL_INJECT "point=pause:N"):
 * wait until it says so, then until two checkpoints complete (with one
 * checkpoint at a time, the default, the second was triggered after the
 * first completed, after the hold: the held step's work is unfinished in
 * it), then SIGKILL the process there.  Returns that checkpoint.
 */
static uint64_t kill_at_pause(env_t *e, const char *point) {
  char line[200];
  snprintf(line, sizeof(line), "sluice: injection point %s: paused", point);
  wait_log(e, line, 1);
  uint64_t now = wait_completions(e, 2, "waiting for a checkpoint while "
                                  "held");
  sigkill_child(e, point);
  return now;
}

/* The current run restored checkpoint >= id. */
static void assert_resumed(env_t *e, uint64_t id) {
  wait_log(e, "resuming from checkpoint ", 1);
  char *t = run_err(e, e->run);
  const char *p = strstr(t, "resuming from checkpoint ");
  unsigned long long got = 0;
  if (p == NULL ||
      sscanf(p, "resuming from checkpoint %llu", &got) != 1 || got < id)
    SL_TEST_FAIL("run %d was to resume from checkpoint %llu or newer:\n%s",
                 e->run, (unsigned long long)id, t);
  free(t);
}

/* The child must still run (a failed job would exit 1). */
static void assert_running(env_t *e, const char *when) {
  int st = 0;
  if (g_child <= 0 || waitpid(g_child, &st, WNOHANG) == g_child) {
    g_child = -1;
    char *t = run_err(e, e->run);
    SL_TEST_FAIL("%s: run %d ended with status 0x%x:\n%s", when, e->run, st,
                 t);
  }
}

/* Poll (bounded) until the sink's t equals the source's t field by
 * field. */
static void wait_equal(env_t *e, double timeout_s) {
  double t0 = now_s();
  char *want = pg_text(e->s, TABLE_SQL), *got = NULL;
  for (;;) {
    free(got);
    got = pg_text(e->k, TABLE_SQL);
    if (strcmp(got, want) == 0) break;
    assert_running(e, "waiting for the tables to agree");
    if (now_s() - t0 > timeout_s) {
      char d[400], pa[4400], pb[4400];
      first_diff(want, got, d, sizeof(d));
      snprintf(pa, sizeof(pa), "%s/want.txt", sl_test_dir());
      snprintf(pb, sizeof(pb), "%s/got.txt", sl_test_dir());
      sl_test_write_file(pa, want);
      sl_test_write_file(pb, got);
      SL_TEST_FAIL("the sink's t never equalled the source's t within %.0f "
                   "s (%zu vs %zu bytes; %s; both in %s)", timeout_s,
                   strlen(got), strlen(want), d, sl_test_dir());
    }
    nap_ms(100);
  }
  free(want);
  free(got);
}

static bool sink_has(env_t *e, long long id) {
  char sql[100];
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE id = %lld", id);
  return pg_int(e->k, sql) == 1;
}

static void wait_sink_has(env_t *e, long long id, const char *what) {
  double t0 = now_s();
  while (!sink_has(e, id)) {
    assert_running(e, what);
    if (now_s() - t0 > 240) SL_TEST_FAIL("%s: row %lld never reached the "
                                         "sink", what, id);
    nap_ms(50);
  }
}

/*
 * Wait (bounded) until the server has exactly n WAL senders: one stream
 * reader per source (a stream split handed to two readers would stream
 * every change twice, which the upsert table could not show).  The sender
 * of a killed run ends when the server sees its closed socket.
 */
static void wait_senders(env_t *e, int n) {
  double t0 = now_s();
  for (;;) {
    int64_t k = pg_int(e->s, "SELECT count(*) FROM pg_stat_activity WHERE "
                       "backend_type = 'walsender'");
    if (k == n) return;
    if (now_s() - t0 > 60) {
      char *t = pg_text(e->s, "SELECT pid, application_name, state, "
                        "backend_type FROM pg_stat_activity");
      SL_TEST_FAIL("%lld WAL senders, not %d:\n%s", (long long)k, n, t);
    }
    nap_ms(50);
  }
}

/*
 * The end of every cell: a sentinel row reaches the sink, the writer runs
 * 150 more operations and stops, the tables agree; SIGTERM; they still
 * agree.
 */
static void finish(env_t *e) {
  char sql[200];
  snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%lld, 1, 'sentinel')",
           SENTINEL_ID);
  pg_ok(e->s, sql);
  wait_sink_has(e, SENTINEL_ID, "waiting for the sentinel row");
  uint64_t base = atomic_load(&e->ops);
  while (atomic_load(&e->ops) < base + 150) nap_ms(10);
  writer_stop(e);
  wait_equal(e, 120);
  wait_senders(e, 1);
  SL_ASSERT_EQ_INT(kill(g_child, SIGTERM), 0);
  int st = wait_child(e, 120, "SIGTERM");
  char *t = run_err(e, e->run);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 143 &&
        strstr(t, "sluice: job 'matrix' cancelled by SIGTERM")))
    SL_TEST_FAIL("SIGTERM: run %d ended with status 0x%x:\n%s", e->run, st,
                 t);
  free(t);
  char *want = pg_text(e->s, TABLE_SQL), *got = pg_text(e->k, TABLE_SQL);
  if (strcmp(want, got) != 0) {
    char d[400];
    first_diff(want, got, d, sizeof(d));
    SL_TEST_FAIL("after SIGTERM the tables differ: %s", d);
  }
  size_t rows = count_str(got, "\n");
  SL_ASSERT_TRUE(rows > N_ROWS / 2);
  free(want);
  free(got);
  /* The writer's large transactions ran (batches split them). */
  SL_ASSERT_LE_INT(1, atomic_load(&e->bigs));
}

/* Every "failed (" line of the log names an injected failure. */
static size_t check_failures(const char *log) {
  size_t n = 0;
  for (const char *p = log; (p = strstr(p, "' failed (")) != NULL; p++) {
    size_t len = strcspn(p, "\n");
    char line[1200];
    snprintf(line, sizeof(line), "%.*s", (int)len, p);
    if (strstr(line, "injected failure") == NULL)
      SL_TEST_FAIL("a failure that was not injected: %s", line);
    n++;
  }
  return n;
}

#define STREAM_STARTS "postgres-cdc: the stream phase starts"

/*
 * A transaction whose commit record is written but which stays in the
 * proc array (so in the xip of every snapshot taken meanwhile): its
 * session asks for synchronous commit and synchronous_standby_names names
 * a standby that never comes.  It updates the rows with id % 100 ==
 * HELD_MOD of the first N_ROWS, one in each chunk, which nothing else
 * changes.  A chunk read
 * while it is held does not see it, and its commit LSN is below the
 * chunk's HIGH: only the visibility test of the stream filter lets its
 * changes of that chunk through (docs/cdc-postgres.md).  The server
 * applies synchronous_standby_names after a reload, so a COMMIT that
 * returns at once was not held: it is a change like any other, and the
 * transaction is made again.
 */
static void hold_start(env_t *e) {
  pg_ok(e->s, "ALTER SYSTEM SET synchronous_standby_names = "
              "'sluice_test_nobody'");
  pg_ok(e->s, "SELECT pg_reload_conf()");
  double t0 = now_s();
  for (;;) {
    sl_error_t *err = NULL;
    PGconn *h = NULL;
    SL_ASSERT_OK_E(sl_pg_connect(e->src_ci, &h, &err), err);
    pg_ok(h, "SET synchronous_commit = on");
    pg_ok(h, "BEGIN");
    char sql[200];
    snprintf(sql, sizeof(sql), "UPDATE t SET c = c + 5000, v = 'held' WHERE "
             "id %% 100 = %d AND id < %d", HELD_MOD, FIRST_ID + N_ROWS);
    pg_ok(h, sql);
    SL_ASSERT_EQ_INT(PQsendQuery(h, "COMMIT"), 1);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE "
             "pid = %d AND wait_event = 'SyncRep'", PQbackendPID(h));
    for (;;) {
      if (pg_int(e->s, sql) == 1) {
        e->held = h;
        return;
      }
      SL_ASSERT_EQ_INT(PQconsumeInput(h), 1);
      if (!PQisBusy(h)) break; /* committed without waiting */
      if (now_s() - t0 > 60) SL_TEST_FAIL("no COMMIT waited for a standby");
      nap_ms(10);
    }
    PGresult *r;
    while ((r = PQgetResult(h)) != NULL) PQclear(r);
    PQfinish(h);
    if (now_s() - t0 > 60) SL_TEST_FAIL("no COMMIT waited for a standby");
    nap_ms(50);
  }
}

static void hold_release(env_t *e) {
  pg_ok(e->s, "ALTER SYSTEM RESET synchronous_standby_names");
  pg_ok(e->s, "SELECT pg_reload_conf()");
  double t0 = now_s();
  for (;;) {
    SL_ASSERT_EQ_INT(PQconsumeInput(e->held), 1);
    if (!PQisBusy(e->held)) break;
    if (now_s() - t0 > 60) SL_TEST_FAIL("the held COMMIT never returned");
    nap_ms(10);
  }
  PGresult *r = PQgetResult(e->held);
  if (PQresultStatus(r) != PGRES_COMMAND_OK)
    SL_TEST_FAIL("the held COMMIT: %s", PQresultErrorMessage(r));
  PQclear(r);
  while ((r = PQgetResult(e->held)) != NULL) PQclear(r);
  PQfinish(e->held);
  e->held = NULL;
}

/* ------------------------------------------------------------------ */
/* The cells */

/*
 * Stream x kill, runs 3 to 5: a completed checkpoint inside a large
 * transaction, restored by a fresh process.
 */
static void kill_inside_big_txn(env_t *e, int run) {
  /* Run `run` lives until the writer is held and a marker row written
   * after it is in the sink: the sink commits at a checkpoint's
   * completion, so a completed checkpoint's position is past every change
   * written so far. */
  writer_hold(e);
  char sql[400];
  snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%lld, 2, 'marker')",
           MARKER_ID);
  pg_ok(e->s, sql);
  wait_sink_has(e, MARKER_ID, "waiting for the marker row");
  sigkill_child(e, "after the marker");
  /* One transaction of BIG_N inserts then 20 updates, while sluice is
   * dead: its stream batches are rows 1-512 (inserts), 513-1024, ... */
  pg_ok(e->s, "BEGIN");
  snprintf(sql, sizeof(sql), "INSERT INTO t SELECT g, 3, 'in-txn' || g FROM "
           "generate_series(%lld, %lld) g", BIG_FIRST,
           BIG_FIRST + BIG_N - 1);
  pg_ok(e->s, sql);
  pg_ok(e->s, "UPDATE t SET c = c + 100 WHERE id BETWEEN 1000 AND 1019");
  pg_ok(e->s, "COMMIT");
  /* The next run: nothing to stream before the transaction (every change
   * before it is behind the restored position), so its 2nd batch is the
   * transaction's second; held there until the sink has the first batch
   * committed, i.e. a checkpoint whose position is inside the transaction
   * (after its 512th change) completed. */
  spawn_run(e, run + 1, "pgcdc.stream.before_push=pause:2");
  wait_log(e, "sluice: injection point pgcdc.stream.before_push: paused", 1);
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE id BETWEEN %lld "
           "AND %lld", BIG_FIRST, BIG_FIRST + BIG_N - 1);
  double t0 = now_s();
  int64_t n;
  while ((n = pg_int(e->k, sql)) == 0) {
    assert_running(e, "waiting for the first batch of the transaction");
    if (now_s() - t0 > 240)
      SL_TEST_FAIL("the transaction's first batch never reached the sink");
    nap_ms(20);
  }
  /* With several sink subtasks the epochs commit one by one. */
  while ((n = pg_int(e->k, sql)) < 512) {
    assert_running(e, "waiting for the first batch of the transaction");
    if (now_s() - t0 > 240)
      SL_TEST_FAIL("the transaction's first batch never reached the sink "
                   "whole (%lld rows)", (long long)n);
    nap_ms(20);
  }
  SL_ASSERT_EQ_INT(n, 512);
  uint64_t k = newest_completed();
  sigkill_child(e, "inside the transaction");
  SL_ASSERT_EQ_INT(pg_int(e->k, sql), 512);
  /* The writer goes on while sluice is dead. */
  atomic_store(&e->cap, 0);
  spawn_run(e, run + 2, NULL);
  assert_resumed(e, k);
}

static void cell(bool stream, bool kill_, uint32_t par) {
  char name[64];
  snprintf(name, sizeof(name), "%s-%s-p%u", stream ? "stream" : "snapshot",
           kill_ ? "kill" : "fail", par);
  double t0 = now_s();
  env_t e;
  env_open(&e, name, 0x9e3779b97f4a7c15ull ^ (stream ? 2u : 0u) ^
                         (kill_ ? 4u : 0u) ^ par, false);
  write_pipeline(&e, par, !kill_, false, 0);
  if (stream && !kill_) atomic_store(&e.big, false);
  writer_start(&e);
  if (!stream && !kill_) {
    /* Four failures in different chunks; a failure that comes while the
     * job is already going down for another is part of that restart, so
     * 1 to 4 restarts. */
    spawn_run(&e, 1, "pgcdc.snapshot.before_read=fail:3,"
                     "pgcdc.snapshot.after_snapshot=fail:10,"
                     "pgcdc.snapshot.before_high=fail:18,"
                     "pgcdc.snapshot.after_read=fail:26");
    /* Every hit count is reached before the last chunk finishes (at
     * least 30 successful chunk reads), so the faults are over when the
     * stream phase has started after the last restart. */
    wait_log(&e, "restart 1 from", 1);
    for (;;) {
      char *t = run_err(&e, 1);
      const char *last = t, *p;
      while ((p = strstr(last, "' failed (")) != NULL) last = p + 1;
      bool started = strstr(last, STREAM_STARTS) != NULL;
      free(t);
      if (started) break;
      assert_running(&e, "waiting for the stream phase");
      nap_ms(50);
    }
  } else if (!stream) {
    /* Run 1 held before a chunk's read until checkpoints complete, then
     * killed; run 2 killed at its first HIGH (a restored run); run 3 held
     * after a chunk's read (rows and HIGH in hand, nothing emitted) until
     * checkpoints complete, then killed.  Each restored checkpoint has a
     * chunk unfinished (the held one). */
    spawn_run(&e, 1, "pgcdc.snapshot.before_read=pause:6");
    uint64_t k1 = kill_at_pause(&e, "pgcdc.snapshot.before_read");
    /* The slot exists (making one waits for running transactions): from
     * now on until the stream runs, every chunk is read with the held
     * transaction in its snapshot's xip. */
    hold_start(&e);
    spawn_run(&e, 2, "pgcdc.snapshot.before_high=kill:1");
    wait_killed(&e, "pgcdc.snapshot.before_high");
    assert_resumed(&e, k1);
    spawn_run(&e, 3, "pgcdc.snapshot.after_read=pause:1");
    uint64_t k3 = kill_at_pause(&e, "pgcdc.snapshot.after_read");
    assert_resumed(&e, k1);
    spawn_run(&e, 4, NULL);
    assert_resumed(&e, k3);
    /* Run 3 died with a chunk unfinished in every checkpoint, so run 4
     * passes the gate itself. */
    wait_log(&e, STREAM_STARTS, 1);
    hold_release(&e);
  } else if (!kill_) {
    /* A batch ends inside a transaction only at 512 rows: the writer
     * stops at 150 statements (a transaction may take it to 155) of at
     * most 40 changelog rows each, at most 12 such batches, until the
     * stream runs and two checkpoints of it have completed; then its
     * transactions of 600 rows and more make a hit each, and the 13th,
     * the failure, comes after those checkpoints. */
    atomic_store(&e.cap, 150);
    spawn_run(&e, 1, "pgcdc.stream.after_batch_in_txn=fail:13");
    wait_log(&e, STREAM_STARTS, 1);
    (void)wait_completions(&e, 2, "waiting for a checkpoint of the stream "
                           "phase");
    char *t = run_err(&e, 1);
    SL_ASSERT_TRUE(strstr(t, "' failed (") == NULL);
    free(t);
    atomic_store(&e.big, true);
    atomic_store(&e.cap, 0);
    wait_log(&e, "restart 1 from", 1);
  } else {
    /* Run 1 held with a batch of stream rows until checkpoints of the
     * stream phase complete, then killed; run 2 (restored there) killed at
     * its 40th batch; run 3 lives, then the checkpoint inside a large
     * transaction (runs 3 to 5). */
    spawn_run(&e, 1, "pgcdc.stream.before_push=pause:60");
    uint64_t k1 = kill_at_pause(&e, "pgcdc.stream.before_push");
    spawn_run(&e, 2, "pgcdc.stream.before_push=kill:40");
    wait_killed(&e, "pgcdc.stream.before_push");
    assert_resumed(&e, k1);
    spawn_run(&e, 3, NULL);
    assert_resumed(&e, k1);
    kill_inside_big_txn(&e, 3);
  }
  finish(&e);
  char *t = run_err(&e, e.run);
  size_t fails = check_failures(t);
  if (kill_) {
    SL_ASSERT_EQ_INT(fails, 0);
  } else {
    SL_ASSERT_LE_INT(1, fails);
    SL_ASSERT_LE_INT(fails, stream ? 1 : 4);
    SL_ASSERT_EQ_INT(count_str(t, "; restart "), fails);
  }
  free(t);
  if (!stream && kill_) {
    /* The held transaction's changes reached the sink, also those of the
     * chunks read while it was held (nothing else changes these rows). */
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE id %% 100 = %d "
             "AND id < %d AND v = 'held'", HELD_MOD, FIRST_ID + N_ROWS);
    SL_ASSERT_EQ_INT(pg_int(e.k, sql), N_ROWS / 100);
  }
  env_close(&e);
  printf("matrix: %s: pass in %.1f s (writer: %llu operations, %llu large "
         "transactions)\n", name, now_s() - t0,
         (unsigned long long)atomic_load(&e.ops),
         (unsigned long long)atomic_load(&e.bigs));
}

SL_TEST(snapshot_fail_p1) { cell(false, false, 1); }
SL_TEST(snapshot_fail_p4) { cell(false, false, 4); }
SL_TEST(snapshot_kill_p1) { cell(false, true, 1); }
SL_TEST(snapshot_kill_p4) { cell(false, true, 4); }
SL_TEST(stream_fail_p1) { cell(true, false, 1); }
SL_TEST(stream_fail_p4) { cell(true, false, 4); }
SL_TEST(stream_kill_p1) { cell(true, true, 1); }
SL_TEST(stream_kill_p4) { cell(true, true, 4); }

/* ------------------------------------------------------------------ */
/* The flush LSN */

typedef struct sample_s {
  char flush[32];   /* confirmed_flush_lsn */
  uint64_t oldest;  /* the oldest retained completed checkpoint, 0: none */
  uint64_t newest;
  int64_t below;    /* sink changes with commit LSN below flush, then */
} sample_t;

/*
 * flush_lsn, flush_lsn_retain_5 (checkpoint.retain 3, the default, and
 * 5): the slot's confirmed_flush_lsn is never past the position of the
 * oldest retained completed checkpoint (issue 16 point 2: the flush LSN is
 * a completed checkpoint's position, lagged by checkpoint.retain, so
 * every retained checkpoint stays restorable).
 *
 * The pipeline adds metadata [position] (_position "<commit LSN>:<index>")
 * and the sink table keeps it; a trigger appends every row version the
 * sink writes, with its _position, to audit, in the sink's own
 * transaction, so an audit row's xmin is the transaction of one sink
 * epoch, whose marker row in sluice_sink_commits (same xmin) names the
 * checkpoint that committed it.  While the job runs with the writer
 * (parallelism 2), the test samples, in this order: F, the slot's
 * confirmed_flush_lsn; the completed checkpoints on disk, the newest N
 * and the oldest retained R (the retain-th newest: every completed
 * checkpoint stays on disk until retain newer ones completed); the number
 * of audit rows whose commit LSN is below F.  Afterwards, when every
 * change is in the sink, for every sample: every audit row whose commit
 * LSN is below F was already there at the sample (the count did not
 * grow) and was committed by a checkpoint <= R (so <= N - (retain - 1)).
 *
 * Reading F before the listing keeps the check sound: sluice sends a
 * flush only after the completions it knows of, which the listing taken
 * later includes.  The sink commits checkpoint C's epoch when it learns
 * C completed, before it takes a later barrier (the task delivers
 * completions before its input), so by the time C + 1 completed C's rows
 * are committed; sluice confirms C's position only once retain - 1 later
 * checkpoints completed (or, before that many completed, the position
 * where the stream starts, below every change).  A source that confirmed
 * the newest completed checkpoint's position, or any newer than the
 * oldest retained one, fails the bound (rows of epochs after R are below
 * F); one that confirmed the received position fails both.
 */
static void flush_cell(uint32_t retain_set) {
  const uint32_t retain = retain_set ? retain_set : 3; /* the default */
  char name[64];
  if (retain_set) snprintf(name, sizeof(name), "flush-lsn-retain-%u", retain);
  else snprintf(name, sizeof(name), "flush-lsn");
  double t0 = now_s();
  env_t e;
  env_open(&e, name, 0x51ed2701u ^ retain, true);
  pg_ok(e.k, "CREATE TABLE audit (id bigint NOT NULL, pos text)");
  pg_ok(e.k, "CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql "
             "AS $$ BEGIN INSERT INTO audit VALUES (NEW.id, NEW._position); "
             "RETURN NULL; END $$");
  pg_ok(e.k, "CREATE TRIGGER t_audit AFTER INSERT OR UPDATE ON t FOR EACH "
             "ROW EXECUTE FUNCTION audit_row()");
  write_pipeline(&e, 2, false, true, retain_set);
  writer_start(&e);
  spawn_run(&e, 1, NULL);
  wait_log(&e, STREAM_STARTS, 1);
  uint64_t first = newest_completed();
  enum { MAX_SAMPLES = 20000 };
  sample_t *sm = calloc(MAX_SAMPLES, sizeof(*sm));
  SL_ASSERT_TRUE(sm != NULL);
  size_t n_sm = 0, moves = 0;
  int64_t max_ahead = 0; /* committed sink changes not below the flush */
  char last[32] = "";
  double s0 = now_s();
  /* At least 15 checkpoints of the stream phase and 8 moves of the flush
   * LSN while changes flow. */
  while (newest_completed() < first + 15 || moves < 8) {
    assert_running(&e, "sampling the slot");
    if (now_s() - s0 > 240)
      SL_TEST_FAIL("the flush LSN moved %zu times in 240 s", moves);
    if (n_sm == MAX_SAMPLES) SL_TEST_FAIL("too many samples");
    sample_t *s = &sm[n_sm];
    char *f = pg_text(e.s, "SELECT confirmed_flush_lsn FROM "
                      "pg_replication_slots WHERE slot_name = '" SLOT "'");
    if (strlen(f) < 2 || strlen(f) >= sizeof(s->flush))
      SL_TEST_FAIL("slot " SLOT ": '%s'", f);
    snprintf(s->flush, sizeof(s->flush), "%.*s", (int)strcspn(f, "\n"), f);
    free(f);
    uint64_t ids[256];
    size_t n = completed_ids(ids, 256);
    s->newest = n ? ids[n - 1] : 0;
    s->oldest = n == 0 ? 0 : n >= retain ? ids[n - retain] : ids[0];
    char sql[300];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM audit WHERE pos IS NOT "
             "NULL AND split_part(pos, ':', 1)::pg_lsn < '%s'", s->flush);
    s->below = pg_int(e.k, sql);
    int64_t vis = pg_int(e.k, "SELECT count(*) FROM audit WHERE pos IS NOT "
                         "NULL");
    if (vis - s->below > max_ahead) max_ahead = vis - s->below;
    nap_ms(10);
    /* A sample like the one before (same flush, same count) checks
     * nothing more: the one before has the older bound. */
    if (n_sm > 0 && strcmp(sm[n_sm - 1].flush, s->flush) == 0 &&
        sm[n_sm - 1].below == s->below)
      continue;
    if (strcmp(s->flush, last) != 0) {
      moves++;
      snprintf(last, sizeof(last), "%s", s->flush);
    }
    n_sm++;
  }
  finish(&e);
  /* Every row the sink wrote is of a committed epoch with its marker. */
  SL_ASSERT_EQ_INT(pg_int(e.k, "SELECT count(*) FROM audit a WHERE NOT "
                   "EXISTS (SELECT 1 FROM sluice_sink_commits m WHERE "
                   "m.xmin = a.xmin)"), 0);
  int64_t total = pg_int(e.k, "SELECT count(*) FROM audit WHERE pos IS NOT "
                         "NULL");
  int64_t max_below = 0;
  for (size_t i = 0; i < n_sm; i++) {
    const sample_t *s = &sm[i];
    char sql[600];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM audit WHERE pos IS NOT "
             "NULL AND split_part(pos, ':', 1)::pg_lsn < '%s'", s->flush);
    int64_t now_below = pg_int(e.k, sql);
    if (now_below != s->below)
      SL_TEST_FAIL("sample %zu: the slot had confirmed %s, but only %lld of "
                   "the %lld sink changes committed below it were in the "
                   "sink then (checkpoints %llu..%llu)", i, s->flush,
                   (long long)s->below, (long long)now_below,
                   (unsigned long long)s->oldest,
                   (unsigned long long)s->newest);
    snprintf(sql, sizeof(sql), "SELECT coalesce(max(m.checkpoint), 0) FROM "
             "audit a JOIN sluice_sink_commits m ON m.xmin = a.xmin WHERE "
             "a.pos IS NOT NULL AND split_part(a.pos, ':', 1)::pg_lsn < "
             "'%s'", s->flush);
    int64_t ck = pg_int(e.k, sql);
    if ((uint64_t)ck > s->oldest)
      SL_TEST_FAIL("sample %zu: the slot had confirmed %s, past changes "
                   "that checkpoint %lld committed, while the completed "
                   "checkpoints were %llu..%llu: the oldest retained one "
                   "(%llu) cannot be restored", i, s->flush, (long long)ck,
                   (unsigned long long)s->oldest,
                   (unsigned long long)s->newest,
                   (unsigned long long)s->oldest);
    if (s->below > max_below) max_below = s->below;
  }
  /* The check was not empty: many changes were below a confirmed LSN,
   * and at some sample many committed ones were not yet. */
  SL_ASSERT_LE_INT(100, max_below);
  SL_ASSERT_LE_INT(100, max_ahead);
  free(sm);
  env_close(&e);
  printf("matrix: %s: pass in %.1f s (%zu samples, %zu flush moves, "
         "%lld changes in the sink, at most %lld below a confirmed LSN, "
         "at most %lld committed ones not)\n", name, now_s() - t0, n_sm, moves,
         (long long)total, (long long)max_below, (long long)max_ahead);
}

SL_TEST(flush_lsn) { flush_cell(0); }
/* checkpoint.retain 5: the flush lags by five (a source that kept the
 * default would confirm past the oldest retained checkpoint). */
SL_TEST(flush_lsn_retain_5) { flush_cell(5); }
