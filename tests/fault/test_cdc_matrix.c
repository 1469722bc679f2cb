/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The failover matrix of the mariadb-cdc source (issue 15, point 7): a
 * MariaDB table captured into PostgreSQL exactly once by `sluice run` from
 * a pipeline file, through
 *
 *   {snapshot phase, binlog phase} x {task failure, whole-process SIGKILL}
 *   x {parallelism 1, 4}
 *
 * with a writer thread running inserts, upserts, updates (also of the
 * primary key, which moves a row into another chunk), deletes, range
 * updates and multi-statement transactions against the source table the
 * whole time, also while sluice is dead between a kill and --resume.
 *
 * Each cell (one CTest entry, sl-fault-cdc-matrix-<phase>-<fault>-p<P>):
 *
 *   - a MariaDB server with shop.t (id BIGINT PRIMARY KEY, c BIGINT, v
 *     VARCHAR(40) NULL), 3000 rows, and a PostgreSQL server with the
 *     target table t (same columns);
 *   - the pipeline: `type: mariadb-cdc` (chunk_rows 100: 30 chunks,
 *     parallelism P) -> `type: postgres` (mode upsert, key id, delivery
 *     exactly-once), checkpoints every 200 ms, and for the task-failure
 *     rows a restart strategy (the job restarts in-process);
 *   - the faults, at injection points (docs/injection-points.md), never
 *     at moments:
 *       snapshot x fail  one run, SL_INJECT failing cdc.snapshot.before_low,
 *                        .before_high and .after_high at different hits
 *                        (3, 15, 28: different chunks, early and late);
 *       snapshot x kill  run 1 held (pause) at cdc.snapshot.before_low of
 *                        its 6th chunk until a checkpoint completes, then
 *                        SIGKILLed there; run 2 (--resume) killed at its
 *                        first .before_high; run 3 (--resume) held at its
 *                        first .after_high (HIGH read, backfill not merged)
 *                        until a checkpoint completes, then SIGKILLed;
 *                        run 4 (--resume) lives;
 *       binlog x fail    one run, cdc.binlog.before_push (a batch of
 *                        binlog rows held before the task emits it) fails
 *                        at its 200th hit, which the writer (held at 150
 *                        statements until two checkpoints of the binlog
 *                        phase completed) makes come after them;
 *       binlog x kill    run 1 held at its 60th cdc.binlog.before_push
 *                        until a checkpoint of the binlog phase completes,
 *                        then SIGKILLed; run 2 (--resume, restored there)
 *                        killed at its 40th; run 3 (--resume) lives;
 *     every hit is reached whatever the machine's speed (a snapshot has at
 *     least 30 chunk reads, a restored one at least one unfinished chunk;
 *     the writer makes a non-empty binlog batch per transaction).  A held
 *     run is killed only after two checkpoints complete while it is held,
 *     so its restore point is certainly inside the phase: a chunk
 *     unfinished, or a binlog position; so is the binlog task failure's.
 *     The snapshot's task failures come at hit counts of chunk reads,
 *     which nothing outside holds, so where the newest completed
 *     checkpoint lies when they come is not fixed (the early one usually
 *     restarts from no checkpoint, the later ones from one inside the
 *     snapshot);
 *   - then: the faults are over (the killed runs have exited, or the
 *     restarts are in the log and, for the snapshot rows, the binlog phase
 *     has started after them); a sentinel row written now reaches
 *     PostgreSQL (the pipeline is live); the writer runs 150 more
 *     operations and stops; the test polls, bounded, until PostgreSQL's
 *     t equals `SELECT *` of shop.t, field by field (NULLs included);
 *     the server has exactly one binlog dump connection (one binlog
 *     reader: a binlog split streamed twice would not show in an upsert
 *     table); SIGTERM cancels sluice (exit 143, docs/cli.md) and the
 *     tables are compared again.
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
#include <mysql.h>

#include "sl_servers.h"
#include "sl_test.h"
#include "sluice/sluice.h"

#define N_ROWS 3000
#define FIRST_ID 100
#define SENTINEL_ID 900000000LL

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
/* The servers and the tables */

typedef struct env_s {
  sl_server_t *my, *pg;
  MYSQL *m;
  PGconn *p;
  char pipeline[4300], bin[4300], name[64];
  int run; /* the current run's number (stderr-<run>.txt) */
  /* The writer. */
  pthread_t wt;
  atomic_bool stop;
  atomic_uint_fast64_t ops;
  /* Statements written; while cap is not 0 the writer waits before an
   * operation once stmts reaches cap. */
  atomic_uint_fast64_t stmts, cap;
  uint64_t seed;
} env_t;

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static void pg_ok(PGconn *p, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(p, sql, NULL, &err), err);
}

/* "id|c|v\n" per row ordered by id, "\N" for NULL. */
static char *my_table(MYSQL *m) {
  if (mysql_query(m, "SELECT id, c, v FROM shop.t ORDER BY id") != 0)
    SL_TEST_FAIL("SELECT shop.t: %s", mysql_error(m));
  MYSQL_RES *r = mysql_store_result(m);
  if (r == NULL) SL_TEST_FAIL("SELECT shop.t: %s", mysql_error(m));
  sl_bytes_t b;
  sl_bytes_init(&b);
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL)
    SL_ASSERT_OK(sl_bytes_printf(&b, "%s|%s|%s\n", row[0],
                                 row[1] ? row[1] : "\\N",
                                 row[2] ? row[2] : "\\N"));
  mysql_free_result(r);
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

static char *pg_table(PGconn *p) {
  PGresult *r = PQexec(p, "SELECT id, c, v FROM t ORDER BY id");
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    SL_TEST_FAIL("SELECT t: %s", PQerrorMessage(p));
  sl_bytes_t b;
  sl_bytes_init(&b);
  for (int i = 0; i < PQntuples(r); i++) {
    const char *f[3];
    for (int k = 0; k < 3; k++)
      f[k] = PQgetisnull(r, i, k) ? "\\N" : PQgetvalue(r, i, k);
    SL_ASSERT_OK(sl_bytes_printf(&b, "%s|%s|%s\n", f[0], f[1], f[2]));
  }
  PQclear(r);
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

/* Rows of a query as "a|b|...\n" text, "\N" for NULL. */
static char *my_text(MYSQL *m, const char *sql) {
  if (mysql_query(m, sql) != 0) SL_TEST_FAIL("%s: %s", sql, mysql_error(m));
  MYSQL_RES *r = mysql_store_result(m);
  if (r == NULL) SL_TEST_FAIL("%s: %s", sql, mysql_error(m));
  unsigned nf = mysql_num_fields(r);
  sl_bytes_t b;
  sl_bytes_init(&b);
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL)
    for (unsigned i = 0; i < nf; i++)
      SL_ASSERT_OK(sl_bytes_printf(&b, "%s%s", row[i] ? row[i] : "\\N",
                                   i + 1 < nf ? "|" : "\n"));
  mysql_free_result(r);
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

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
  snprintf(out, n, "line %zu: mariadb '%.*s', postgres '%.*s'", line, ea, la,
           eb, lb);
}

static void env_open(env_t *e, const char *name, uint64_t seed) {
  memset(e, 0, sizeof(*e));
  snprintf(e->name, sizeof(e->name), "%s", name);
  e->seed = seed;
  g_self = getpid();
  atexit(kill_child);
  sl_server_opts_t o;
  sl_error_t *err = NULL;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  SL_ASSERT_OK_E(sl_server_start(&o, &e->my, &err), err);
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  SL_ASSERT_OK_E(sl_server_start(&o, &e->pg, &err), err);
  SL_ASSERT_OK_E(sl_my_connect(e->my, sl_server_port(e->my), &e->m, &err),
                 err);
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(e->pg), &e->p, &err), err);
  my_ok(e->m, "CREATE DATABASE shop");
  my_ok(e->m, "CREATE TABLE shop.t (id BIGINT PRIMARY KEY, c BIGINT NOT "
              "NULL, v VARCHAR(40) NULL) ENGINE=InnoDB");
  char sql[300];
  snprintf(sql, sizeof(sql), "INSERT INTO shop.t SELECT seq, seq %% 97, "
           "IF(seq %% 10 = 0, NULL, CONCAT('v', seq)) FROM seq_%d_to_%d",
           FIRST_ID, FIRST_ID + N_ROWS - 1);
  my_ok(e->m, sql);
  pg_ok(e->p, "CREATE TABLE t (id bigint PRIMARY KEY, c bigint NOT NULL, "
              "v varchar(40))");
  snprintf(e->bin, sizeof(e->bin), "%s/sluice", sl_test_bin_dir());
  snprintf(e->pipeline, sizeof(e->pipeline), "%s/matrix.yaml",
           sl_test_dir());
}

static void env_close(env_t *e) {
  mysql_close(e->m);
  PQfinish(e->p);
  sl_server_destroy(e->my);
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

static struct env_s *e_of_writer;

typedef struct wstate_s {
  uint64_t s;      /* RNG */
  uint64_t k;      /* next position in the permutation */
  int64_t next_id; /* next fresh id */
} wstate_t;

static int64_t next_perm(wstate_t *w) {
  for (;;) {
    int64_t id = FIRST_ID + (int64_t)((w->k++ * 1237u) % N_ROWS);
    if (id >= FIRST_ID + HOT) return id;
  }
}

/* One statement of the mix. */
static void write_one(MYSQL *m, wstate_t *w, uint64_t n) {
  char sql[1024], v[48];
  if (rnd(&w->s) % 8 == 0) snprintf(v, sizeof(v), "NULL");
  else snprintf(v, sizeof(v), "'w%llu-%llu'", (unsigned long long)n,
                (unsigned long long)(rnd(&w->s) % 1000));
  long long c = (long long)(rnd(&w->s) % 1000);
  switch (rnd(&w->s) % 10) {
  case 0:
  case 1: /* a fresh row (the last chunk's range) */
    snprintf(sql, sizeof(sql), "INSERT INTO shop.t VALUES (%lld, %lld, %s)",
             (long long)w->next_id++, c, v);
    break;
  case 2: /* an existing row through an upsert */
    snprintf(sql, sizeof(sql), "INSERT INTO shop.t VALUES (%lld, %lld, %s) "
             "ON DUPLICATE KEY UPDATE c = c + VALUES(c), v = VALUES(v)",
             (long long)next_perm(w), c, v);
    break;
  case 3:
  case 4:
    snprintf(sql, sizeof(sql), "UPDATE shop.t SET c = c + %lld, v = %s "
             "WHERE id = %lld", c + 1, v, (long long)next_perm(w));
    break;
  case 5: /* the primary key changes: the row moves to the last chunk */
    snprintf(sql, sizeof(sql), "UPDATE shop.t SET id = %lld WHERE id = %lld",
             (long long)w->next_id++, (long long)next_perm(w));
    break;
  case 6:
  case 7:
    snprintf(sql, sizeof(sql), "DELETE FROM shop.t WHERE id = %lld",
             (long long)next_perm(w));
    break;
  case 8: { /* many rows of many chunks in one rows event */
    int o = snprintf(sql, sizeof(sql), "UPDATE shop.t SET c = c + 1 WHERE "
                     "id IN (%lld", (long long)next_perm(w));
    for (int i = 0; i < 19; i++)
      o += snprintf(sql + o, sizeof(sql) - (size_t)o, ", %lld",
                    (long long)next_perm(w));
    snprintf(sql + o, sizeof(sql) - (size_t)o, ")");
    break;
  }
  default: /* a hot row */
    snprintf(sql, sizeof(sql), "UPDATE shop.t SET c = c + 1, v = %s WHERE "
             "id = %lld", v, (long long)(FIRST_ID + (int64_t)(rnd(&w->s) %
                                                            HOT)));
    break;
  }
  sl_error_t *err = NULL;
  if (sl_my_exec(m, sql, NULL, &err) != SL_OK)
    SL_TEST_FAIL("writer: %s: %s", sql, sl_error_message(err));
  atomic_fetch_add(&e_of_writer->stmts, 1);
}

static void *writer_main(void *arg) {
  env_t *e = arg;
  mysql_thread_init();
  MYSQL *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(e->my, sl_server_port(e->my), &m, &err), err);
  wstate_t w = {e->seed ? e->seed : 1, 0, FIRST_ID + N_ROWS};
  for (uint64_t n = 0; !atomic_load(&e->stop); n++) {
    uint64_t cap;
    while ((cap = atomic_load(&e->cap)) != 0 &&
           atomic_load(&e->stmts) >= cap && !atomic_load(&e->stop))
      nap_ms(5);
    if (rnd(&w.s) % 10 == 0) {
      /* A transaction of several statements (a position inside it is a
       * GTID state plus events and rows to skip). */
      my_ok(m, "BEGIN");
      uint64_t k = 2 + rnd(&w.s) % 5;
      for (uint64_t i = 0; i < k; i++) write_one(m, &w, n);
      my_ok(m, "COMMIT");
    } else {
      write_one(m, &w, n);
    }
    atomic_fetch_add(&e->ops, 1);
    nap_ms(3); /* pacing, not a window */
  }
  mysql_close(m);
  mysql_thread_end();
  return NULL;
}

static void writer_start(env_t *e) {
  e_of_writer = e;
  atomic_store(&e->stop, false);
  SL_ASSERT_EQ_INT(pthread_create(&e->wt, NULL, writer_main, e), 0);
}

static void writer_stop(env_t *e) {
  atomic_store(&e->stop, true);
  pthread_join(e->wt, NULL);
}

/* ------------------------------------------------------------------ */
/* Runs of sluice */

static void write_pipeline(env_t *e, uint32_t par, bool restart) {
  char text[8192];
  snprintf(text, sizeof(text),
           "name: matrix\n"
           "parallelism: %u\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 200}\n"
           "%s"
           "source:\n"
           "  type: mariadb-cdc\n"
           "  uid: shop\n"
           "  host: 127.0.0.1\n"
           "  port: %d\n"
           "  user: root\n"
           "  tables: [shop.t]\n"
           "  chunk_rows: 100\n"
           "  heartbeat: 1s\n"
           "sink:\n"
           "  type: postgres\n"
           "  uid: pg\n"
           "  conninfo: \"%s\"\n"
           "  table: t\n"
           "  mode: upsert\n"
           "  key: [id]\n"
           "  delivery: exactly-once\n",
           par, sl_test_dir(),
           restart ? "restart: {strategy: fixed-delay, max_attempts: 10, "
                     "delay_ms: 50}\n"
                   : "",
           sl_server_port(e->my), sl_server_conninfo(e->pg));
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

/* The newest completed checkpoint (a chk-N with its _metadata: the
 * rename of _metadata is the commit point), 0 when none. */
static uint64_t newest_completed_in(const char *d) {
  DIR *dd = opendir(d);
  if (dd == NULL) return 0;
  uint64_t best = 0;
  struct dirent *de;
  while ((de = readdir(dd)) != NULL) {
    unsigned long long id;
    char tail;
    if (sscanf(de->d_name, "chk-%llu%c", &id, &tail) != 1) continue;
    char m[4700];
    snprintf(m, sizeof(m), "%s/%s/_metadata", d, de->d_name);
    if (id > best && access(m, F_OK) == 0) best = id;
  }
  closedir(dd);
  return best;
}

static uint64_t newest_completed(void) {
  char d[4400];
  snprintf(d, sizeof(d), "%s/ckpt/matrix", sl_test_dir());
  return newest_completed_in(d);
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

/*
 * The current run holds a thread at point (SL_INJECT "point=pause:N"):
 * wait until it says so, then until a checkpoint newer than every one
 * completed before completes (it holds the step's work unfinished: a
 * chunk not read to the end, or the binlog position before the held
 * batch), then SIGKILL the process there.  Returns that checkpoint.
 */
static uint64_t kill_at_pause(env_t *e, const char *point) {
  char line[200];
  snprintf(line, sizeof(line), "sluice: injection point %s: paused", point);
  wait_log(e, line, 1);
  /* Two completions: with one checkpoint at a time (the default), the
   * second was triggered after the first completed, after the hold. */
  uint64_t now = newest_completed();
  double t0 = now_s();
  for (int i = 0; i < 2; i++) {
    uint64_t before = now;
    while ((now = newest_completed()) <= before) {
      assert_running(e, "waiting for a checkpoint while held");
      if (now_s() - t0 > 240)
        SL_TEST_FAIL("run %d: no checkpoint completed while held at %s",
                     e->run, point);
      nap_ms(20);
    }
  }
  SL_ASSERT_EQ_INT(kill(g_child, SIGKILL), 0);
  int st = wait_child(e, 60, point);
  SL_ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
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

/* Poll (bounded) until PostgreSQL's t equals shop.t field by field. */
static void wait_equal(env_t *e, double timeout_s) {
  double t0 = now_s();
  char *want = my_table(e->m), *got = NULL;
  for (;;) {
    free(got);
    got = pg_table(e->p);
    if (strcmp(got, want) == 0) break;
    assert_running(e, "waiting for the tables to agree");
    if (now_s() - t0 > timeout_s) {
      char d[400], pa[4400], pb[4400];
      first_diff(want, got, d, sizeof(d));
      snprintf(pa, sizeof(pa), "%s/want.txt", sl_test_dir());
      snprintf(pb, sizeof(pb), "%s/got.txt", sl_test_dir());
      sl_test_write_file(pa, want);
      sl_test_write_file(pb, got);
      SL_TEST_FAIL("PostgreSQL's t never equalled shop.t within %.0f s "
                   "(%zu vs %zu bytes; %s; both in %s)", timeout_s,
                   strlen(got), strlen(want), d, sl_test_dir());
    }
    nap_ms(100);
  }
  free(want);
  free(got);
}

static bool pg_has(env_t *e, long long id) {
  char sql[100];
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE id = %lld", id);
  int64_t n = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(e->p, sql, &n, &err), err);
  return n == 1;
}

/*
 * Wait (bounded) until the server has exactly n binlog dump connections:
 * one binlog reader per source (a binlog split handed to two readers
 * would stream every change twice, which the upsert table could not
 * show).  A dump of a killed run ends when the server next writes to its
 * closed socket (the writer's changes, heartbeats).
 */
static void wait_dumps(env_t *e, int n) {
  double t0 = now_s();
  for (;;) {
    int64_t k = -1;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl_my_query_int64(e->m, "SELECT COUNT(*) FROM "
                                     "information_schema.PROCESSLIST WHERE "
                                     "COMMAND LIKE 'Binlog Dump%'", &k, &err),
                   err);
    if (k == n) return;
    if (now_s() - t0 > 60) {
      char *t = my_text(e->m, "SELECT ID, USER, COMMAND, TIME, STATE FROM "
                        "information_schema.PROCESSLIST");
      SL_TEST_FAIL("%lld binlog dump connections, not %d:\n%s",
                   (long long)k, n, t);
    }
    nap_ms(50);
  }
}

/*
 * The end of every cell: a sentinel row reaches PostgreSQL, the writer
 * runs 150 more operations and stops, the tables agree; SIGTERM; they
 * still agree.
 */
static void finish(env_t *e) {
  char sql[200];
  snprintf(sql, sizeof(sql), "INSERT INTO shop.t VALUES (%lld, 1, "
           "'sentinel')", SENTINEL_ID);
  my_ok(e->m, sql);
  double t0 = now_s();
  while (!pg_has(e, SENTINEL_ID)) {
    assert_running(e, "waiting for the sentinel row");
    if (now_s() - t0 > 240)
      SL_TEST_FAIL("the sentinel row never reached PostgreSQL");
    nap_ms(50);
  }
  uint64_t base = atomic_load(&e->ops);
  while (atomic_load(&e->ops) < base + 150) nap_ms(10);
  writer_stop(e);
  wait_equal(e, 120);
  wait_dumps(e, 1);
  SL_ASSERT_EQ_INT(kill(g_child, SIGTERM), 0);
  int st = wait_child(e, 120, "SIGTERM");
  char *t = run_err(e, e->run);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 143 &&
        strstr(t, "sluice: job 'matrix' cancelled by SIGTERM")))
    SL_TEST_FAIL("SIGTERM: run %d ended with status 0x%x:\n%s", e->run, st,
                 t);
  free(t);
  char *want = my_table(e->m), *got = pg_table(e->p);
  if (strcmp(want, got) != 0) {
    char d[400];
    first_diff(want, got, d, sizeof(d));
    SL_TEST_FAIL("after SIGTERM the tables differ: %s", d);
  }
  size_t rows = count_str(got, "\n");
  SL_ASSERT_TRUE(rows > N_ROWS / 2);
  free(want);
  free(got);
}

/* Every "failed (" line of the log names an injected failure. */
static size_t check_failures(const char *log) {
  size_t n = 0;
  for (const char *p = log; (p = strstr(p, "' failed (")) != NULL; p++) {
    size_t len = strcspn(p, "\n");
    char line[1200];
    snprintf(line, sizeof(line), "%.*s", (int)len, p);
    if (strstr(line, "injected failure at cdc.") == NULL &&
        strstr(line, "reading chunk") == NULL)
      SL_TEST_FAIL("a failure that was not injected: %s", line);
    n++;
  }
  return n;
}

/* ------------------------------------------------------------------ */
/* The cells */

static void cell(bool binlog, bool kill_, uint32_t par) {
  char name[64];
  snprintf(name, sizeof(name), "%s-%s-p%u", binlog ? "binlog" : "snapshot",
           kill_ ? "kill" : "fail", par);
  double t0 = now_s();
  env_t e;
  env_open(&e, name, 0x9e3779b97f4a7c15ull ^ (binlog ? 2u : 0u) ^
                         (kill_ ? 4u : 0u) ^ par);
  write_pipeline(&e, par, !kill_);
  writer_start(&e);
  if (!binlog && !kill_) {
    /* Three failures in different chunks; a failure that comes while
     * the job is already going down for another is part of that
     * restart, so 1 to 3 restarts. */
    spawn_run(&e, 1, "cdc.snapshot.before_low=fail:3,"
                     "cdc.snapshot.before_high=fail:15,"
                     "cdc.snapshot.after_high=fail:28");
    /* Every hit count is reached before the last chunk finishes (at
     * least 30 successful chunk reads), so the faults are over when the
     * binlog phase has started after the last restart. */
    wait_log(&e, "restart 1 from", 1);
    for (;;) {
      char *t = run_err(&e, 1);
      const char *last = t, *p;
      while ((p = strstr(last, "' failed (")) != NULL) last = p + 1;
      bool started = strstr(last, "the binlog phase starts") != NULL;
      free(t);
      if (started) break;
      assert_running(&e, "waiting for the binlog phase");
      nap_ms(50);
    }
  } else if (!binlog) {
    /* Run 1 held before a chunk's LOW until a checkpoint completes, then
     * killed; run 2 killed at its first HIGH (a restored run); run 3
     * held after a HIGH, before the backfill, until a checkpoint
     * completes, then killed.  Each restored checkpoint has a chunk
     * unfinished (the held one). */
    spawn_run(&e, 1, "cdc.snapshot.before_low=pause:6");
    uint64_t k1 = kill_at_pause(&e, "cdc.snapshot.before_low");
    spawn_run(&e, 2, "cdc.snapshot.before_high=kill:1");
    wait_killed(&e, "cdc.snapshot.before_high");
    assert_resumed(&e, k1);
    spawn_run(&e, 3, "cdc.snapshot.after_high=pause:1");
    uint64_t k3 = kill_at_pause(&e, "cdc.snapshot.after_high");
    assert_resumed(&e, k1);
    spawn_run(&e, 4, NULL);
    assert_resumed(&e, k3);
    /* Run 3 died with a chunk unfinished in every checkpoint, so run 4
     * passes the gate itself. */
    wait_log(&e, "the binlog phase starts", 1);
  } else if (!kill_) {
    /* A non-empty binlog batch ends at a statement's rows at the latest,
     * so there are at most as many hits as statements written: the
     * writer stops at 150 statements (a transaction may take it to 156)
     * until the binlog phase runs and two checkpoints of it have
     * completed; the 200th hit, the failure, comes after them. */
    atomic_store(&e.cap, 150);
    spawn_run(&e, 1, "cdc.binlog.before_push=fail:200");
    wait_log(&e, "the binlog phase starts", 1);
    uint64_t now = newest_completed();
    for (int i = 0; i < 2; i++) {
      uint64_t before = now;
      double w0 = now_s();
      while ((now = newest_completed()) <= before) {
        assert_running(&e, "waiting for a checkpoint of the binlog phase");
        if (now_s() - w0 > 240) SL_TEST_FAIL("no checkpoint completed");
        nap_ms(20);
      }
    }
    char *t = run_err(&e, 1);
    SL_ASSERT_TRUE(strstr(t, "' failed (") == NULL);
    free(t);
    atomic_store(&e.cap, 0);
    wait_log(&e, "restart 1 from", 1);
  } else {
    /* Run 1 held with a batch of binlog rows until a checkpoint in the
     * binlog phase completes, then killed; run 2 (restored there) killed
     * at its 40th batch; run 3 lives. */
    spawn_run(&e, 1, "cdc.binlog.before_push=pause:60");
    uint64_t k1 = kill_at_pause(&e, "cdc.binlog.before_push");
    spawn_run(&e, 2, "cdc.binlog.before_push=kill:40");
    wait_killed(&e, "cdc.binlog.before_push");
    assert_resumed(&e, k1);
    spawn_run(&e, 3, NULL);
    assert_resumed(&e, k1);
  }
  finish(&e);
  char *t = run_err(&e, e.run);
  size_t fails = check_failures(t);
  if (kill_) {
    SL_ASSERT_EQ_INT(fails, 0);
  } else {
    SL_ASSERT_LE_INT(1, fails);
    SL_ASSERT_LE_INT(fails, binlog ? 1 : 3);
    SL_ASSERT_EQ_INT(count_str(t, "; restart "), fails);
  }
  free(t);
  env_close(&e);
  printf("matrix: %s: pass in %.1f s (writer: %llu operations)\n", name,
         now_s() - t0, (unsigned long long)atomic_load(&e.ops));
}

SL_TEST(snapshot_fail_p1) { cell(false, false, 1); }
SL_TEST(snapshot_fail_p4) { cell(false, false, 4); }
SL_TEST(snapshot_kill_p1) { cell(false, true, 1); }
SL_TEST(snapshot_kill_p4) { cell(false, true, 4); }
SL_TEST(binlog_fail_p1) { cell(true, false, 1); }
SL_TEST(binlog_fail_p4) { cell(true, false, 4); }
SL_TEST(binlog_kill_p1) { cell(true, true, 1); }
SL_TEST(binlog_kill_p4) { cell(true, true, 4); }

/* ------------------------------------------------------------------ */
/* The example pipeline */

#define ORDERS_MY                                                          \
  "SELECT id, customer, amount, status, DATE_FORMAT(created, "            \
  "'%Y-%m-%d %H:%i:%s.%f') FROM shop.orders ORDER BY id"
#define ORDERS_PG                                                          \
  "SELECT id, customer, amount, status, to_char(created, "                \
  "'YYYY-MM-DD HH24:MI:SS.US') FROM orders ORDER BY id"

static void orders_wait_equal(env_t *e, double timeout_s) {
  char *want = my_text(e->m, ORDERS_MY), *got = NULL;
  double t0 = now_s();
  for (;;) {
    free(got);
    got = pg_text(e->p, ORDERS_PG);
    if (strcmp(want, got) == 0) break;
    assert_running(e, "waiting for orders to agree");
    if (now_s() - t0 > timeout_s) {
      char d[400];
      first_diff(want, got, d, sizeof(d));
      SL_TEST_FAIL("orders never agreed within %.0f s: %s", timeout_s, d);
    }
    nap_ms(100);
  }
  free(want);
  free(got);
}

/*
 * examples/pipelines/mariadb-cdc-to-postgres.yaml against the test
 * servers (--set for the ports, the user and the checkpoint dir): a
 * MariaDB database's orders captured into PostgreSQL exactly once.  DML
 * during the snapshot and the binlog phase (inserts, updates, a primary
 * key change, deletes, a transaction); run 1 held with a batch of binlog
 * rows until checkpoints complete and SIGKILLed there, more DML while it
 * is dead, run 2 with --resume; PostgreSQL's orders equal shop.orders
 * field by field (decimals and microsecond timestamps included) before
 * and after SIGTERM.
 */
SL_TEST(example_pipeline) {
  env_t e;
  env_open(&e, "example", 1);
  my_ok(e.m, "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer "
             "BIGINT NOT NULL, amount DECIMAL(12,2) NOT NULL, status "
             "VARCHAR(16) NOT NULL, created DATETIME(6) NOT NULL) "
             "ENGINE=InnoDB");
  my_ok(e.m, "INSERT INTO shop.orders SELECT seq, seq % 37, seq * 1.25, "
             "'new', TIMESTAMP '2026-12-01 00:00:00' + INTERVAL seq SECOND "
             "+ INTERVAL seq MICROSECOND FROM seq_1_to_20000");
  pg_ok(e.p, "CREATE TABLE orders (id bigint PRIMARY KEY, customer bigint "
             "NOT NULL, amount numeric(12,2) NOT NULL, status varchar(16) "
             "NOT NULL, created timestamp NOT NULL)");
  char example[4400], port[64], ck[4400], ci[600];
  snprintf(example, sizeof(example),
           "%s/examples/pipelines/mariadb-cdc-to-postgres.yaml",
           sl_test_src_dir());
  snprintf(port, sizeof(port), "source.port=%d", sl_server_port(e.my));
  snprintf(ck, sizeof(ck), "checkpoint.dir=%s/ckpt", sl_test_dir());
  snprintf(ci, sizeof(ci), "sink.conninfo='%s'", sl_server_conninfo(e.pg));
  SL_ASSERT_EQ_INT(setenv("SLUICE_MARIADB_PASSWORD", "", 1), 0);
  char errp[4400];
  const char *a1[] = {e.bin, "run", example, "--quiet", "--set", port,
                      "--set", "source.user=root", "--set", ck, "--set", ci,
                      "--set", "checkpoint.interval_ms=200", "--set",
                      "source.chunk_rows=1000", NULL};
  const char *a2[] = {e.bin, "run", example, "--resume", "--quiet", "--set",
                      port, "--set", "source.user=root", "--set", ck,
                      "--set", ci, "--set", "checkpoint.interval_ms=200",
                      "--set", "source.chunk_rows=1000", NULL};
  /* The job's checkpoints are in <dir>/shop-orders-cdc. */
  snprintf(errp, sizeof(errp), "%s/stderr-1.txt", sl_test_dir());
  e.run = 1;
  g_child = sl_test_spawn(a1, "cdc.binlog.before_push=pause:3", errp,
                          SL_TEST_SPAWN_NO_STDOUT);
  my_ok(e.m, "UPDATE shop.orders SET status = 'paid' WHERE id % 5 = 0");
  my_ok(e.m, "DELETE FROM shop.orders WHERE id % 7 = 0");
  wait_log(&e, "the binlog phase starts", 1);
  my_ok(e.m, "INSERT INTO shop.orders VALUES (30001, 1, 99.99, 'new', "
             "'2026-12-03 10:11:12.131415')");
  my_ok(e.m, "UPDATE shop.orders SET id = 30002 WHERE id = 1");
  my_ok(e.m, "BEGIN");
  my_ok(e.m, "UPDATE shop.orders SET amount = amount + 0.01 WHERE id < 300");
  my_ok(e.m, "DELETE FROM shop.orders WHERE id BETWEEN 300 AND 350");
  my_ok(e.m, "COMMIT");
  my_ok(e.m, "UPDATE shop.orders SET status = 'shipped' WHERE id % 5 = 0 "
             "AND id < 5000");
  wait_log(&e, "injection point cdc.binlog.before_push: paused", 1);
  uint64_t n0 = 0;
  char jd[4400];
  snprintf(jd, sizeof(jd), "%s/ckpt/shop-orders-cdc", sl_test_dir());
  for (int i = 0; i < 2; i++) {
    double t0 = now_s();
    uint64_t n;
    while ((n = newest_completed_in(jd)) <= n0) {
      assert_running(&e, "waiting for a checkpoint while held");
      if (now_s() - t0 > 240) SL_TEST_FAIL("no checkpoint completed");
      nap_ms(20);
    }
    n0 = n;
  }
  SL_ASSERT_EQ_INT(kill(g_child, SIGKILL), 0);
  (void)wait_child(&e, 60, "SIGKILL");
  my_ok(e.m, "UPDATE shop.orders SET status = 'late' WHERE id BETWEEN 10000 "
             "AND 10100");
  my_ok(e.m, "DELETE FROM shop.orders WHERE id = 30001");
  snprintf(errp, sizeof(errp), "%s/stderr-2.txt", sl_test_dir());
  e.run = 2;
  g_child = sl_test_spawn(a2, NULL, errp, SL_TEST_SPAWN_NO_STDOUT);
  assert_resumed(&e, n0);
  orders_wait_equal(&e, 120);
  wait_dumps(&e, 1);
  SL_ASSERT_EQ_INT(kill(g_child, SIGTERM), 0);
  int st = wait_child(&e, 120, "SIGTERM");
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 143);
  char *want = my_text(e.m, ORDERS_MY), *got = pg_text(e.p, ORDERS_PG);
  SL_ASSERT_TRUE(strcmp(want, got) == 0);
  SL_ASSERT_TRUE(strstr(got, "30002|1|1.25|new|2026-12-01 00:00:01.000001"));
  SL_ASSERT_TRUE(strstr(got, "30001|") == NULL);
  free(want);
  free(got);
  env_close(&e);
}

/* ------------------------------------------------------------------ */
/* Routes */

/* Run `sluice validate` on text; its exit status and stderr. */
static int validate_text(env_t *e, const char *text, char **out_err) {
  char p[4400], errp[4400];
  snprintf(p, sizeof(p), "%s/bad.yaml", sl_test_dir());
  snprintf(errp, sizeof(errp), "%s/validate.txt", sl_test_dir());
  sl_test_write_file(p, text);
  const char *argv[] = {e->bin, "validate", p, NULL};
  int st = sl_test_wait(sl_test_spawn(argv, NULL, errp,
                                      SL_TEST_SPAWN_NO_STDOUT));
  *out_err = sl_test_read_file(errp, NULL);
  return st;
}

/*
 * routes: two MariaDB tables of different shapes (shop.t and
 * shop.customers) into two PostgreSQL tables (t and clients) from one
 * pipeline file, one job: DML on both during the snapshot and the binlog
 * phase, a run held with a binlog batch until checkpoints complete and
 * SIGKILLed there, --resume; both tables equal their sources field by
 * field.  And the routes' bad inputs, by `sluice validate`.
 */
SL_TEST(routes) {
  env_t e;
  env_open(&e, "routes", 7);
  my_ok(e.m, "CREATE TABLE shop.customers (cid INT PRIMARY KEY, name "
             "VARCHAR(40) NOT NULL, city VARCHAR(40) NULL) ENGINE=InnoDB");
  my_ok(e.m, "INSERT INTO shop.customers SELECT seq, CONCAT('c', seq), "
             "IF(seq % 3 = 0, NULL, 'Oslo') FROM seq_1_to_500");
  pg_ok(e.p, "CREATE TABLE clients (cid bigint PRIMARY KEY, name text NOT "
             "NULL, city text)");
  char text[8192], tail[2048];
  snprintf(tail, sizeof(tail),
           "source:\n"
           "  type: mariadb-cdc\n"
           "  uid: shop\n"
           "  port: %d\n"
           "  user: root\n"
           "  chunk_rows: 100\n"
           "  parallelism: 2\n"
           "routes:\n"
           "  - tables: [shop.t]\n"
           "    table: t\n"
           "  - tables: [shop.customers]\n"
           "    table: clients\n"
           "    key: [cid]\n"
           "    uid: clients\n"
           "sink:\n"
           "  type: postgres\n"
           "  uid: pg\n"
           "  conninfo: \"%s\"\n"
           "  mode: upsert\n"
           "  key: [id]\n",
           sl_server_port(e.my), sl_server_conninfo(e.pg));
  snprintf(text, sizeof(text),
           "name: routes\ncheckpoint: {dir: %s/ckpt, interval_ms: 200}\n%s",
           sl_test_dir(), tail);
  sl_test_write_file(e.pipeline, text);
  writer_start(&e);
  char errp[4400];
  snprintf(errp, sizeof(errp), "%s/stderr-1.txt", sl_test_dir());
  const char *a1[] = {e.bin, "run", e.pipeline, "--quiet", NULL};
  const char *a2[] = {e.bin, "run", e.pipeline, "--resume", "--quiet", NULL};
  e.run = 1;
  g_child = sl_test_spawn(a1, "cdc.binlog.before_push=pause:20", errp,
                          SL_TEST_SPAWN_NO_STDOUT);
  my_ok(e.m, "UPDATE shop.customers SET city = 'Bergen' WHERE cid % 4 = 0");
  my_ok(e.m, "DELETE FROM shop.customers WHERE cid % 9 = 0");
  /* Both routes' binlog phases start (one source each). */
  wait_log(&e, "the binlog phase starts", 2);
  my_ok(e.m, "UPDATE shop.customers SET cid = cid + 1000 WHERE cid < 20");
  my_ok(e.m, "INSERT INTO shop.customers VALUES (2000, 'new', NULL)");
  wait_log(&e, "injection point cdc.binlog.before_push: paused", 1);
  char jd[4400];
  snprintf(jd, sizeof(jd), "%s/ckpt/routes", sl_test_dir());
  uint64_t n0 = 0;
  for (int i = 0; i < 2; i++) {
    double t0 = now_s();
    uint64_t n;
    while ((n = newest_completed_in(jd)) <= n0) {
      assert_running(&e, "waiting for a checkpoint while held");
      if (now_s() - t0 > 240) SL_TEST_FAIL("no checkpoint completed");
      nap_ms(20);
    }
    n0 = n;
  }
  SL_ASSERT_EQ_INT(kill(g_child, SIGKILL), 0);
  (void)wait_child(&e, 60, "SIGKILL");
  my_ok(e.m, "UPDATE shop.customers SET name = 'while dead' WHERE cid "
             "BETWEEN 100 AND 120");
  snprintf(errp, sizeof(errp), "%s/stderr-2.txt", sl_test_dir());
  e.run = 2;
  g_child = sl_test_spawn(a2, NULL, errp, SL_TEST_SPAWN_NO_STDOUT);
  assert_resumed(&e, n0);
  uint64_t base = atomic_load(&e.ops);
  while (atomic_load(&e.ops) < base + 100) nap_ms(10);
  writer_stop(&e);
  wait_equal(&e, 120);
  wait_dumps(&e, 2); /* one binlog reader per route */
  const char *cq_my = "SELECT cid, name, city FROM shop.customers ORDER BY "
                      "cid";
  const char *cq_pg = "SELECT cid, name, city FROM clients ORDER BY cid";
  char *want = my_text(e.m, cq_my), *got = NULL;
  double t0 = now_s();
  for (;;) {
    free(got);
    got = pg_text(e.p, cq_pg);
    if (strcmp(want, got) == 0) break;
    assert_running(&e, "waiting for clients to agree");
    if (now_s() - t0 > 120) {
      char d[400];
      first_diff(want, got, d, sizeof(d));
      SL_TEST_FAIL("clients never agreed: %s", d);
    }
    nap_ms(100);
  }
  free(got);
  SL_ASSERT_EQ_INT(kill(g_child, SIGTERM), 0);
  int st = wait_child(&e, 120, "SIGTERM");
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 143);
  got = pg_text(e.p, cq_pg);
  SL_ASSERT_EQ_STR(got, want);
  SL_ASSERT_TRUE(strstr(got, "1001|c1|Oslo\n") && strstr(got, "2000|new|\\N"));
  free(got);
  free(want);
  char *a = my_table(e.m), *b = pg_table(e.p);
  SL_ASSERT_EQ_STR(b, a);
  free(a);
  free(b);

  /* Bad inputs. */
  struct {
    const char *routes, *sink_extra, *source_extra, *want, *src_type,
        *snk_type;
  } bad[] = {
      {"routes: {tables: [shop.t]}\n", "", "",
       "routes: expected a list of routes such as '{tables: [shop.orders], "
       "table: orders}', got a mapping"},
      {"routes: []\n", "", "", "routes: needs at least one route"},
      {"routes: [{table: t}]\n", "", "",
       "routes[1]: missing required field 'tables'"},
      {"routes: [{tables: [shop.t]}]\n", "", "",
       "routes[1]: missing required field 'table'"},
      {"routes: [{tables: [shop.t], table: t, into: x}]\n", "", "",
       "routes[1].into: unknown field; expected one of: tables, table, "
       "key, uid"},
      {"routes: [{tables: [shop.t], table: t}]\n", "  table: t\n", "",
       "sink.table: with 'routes', each route names its sink table "
       "(routes[N].table), not the sink"},
      {"routes: [{tables: [shop.t], table: t}]\n", "", "  tables: [shop.t]\n",
       "source.tables: with 'routes', each route lists its tables "
       "(routes[N].tables), not the source"},
      {"routes: [{tables: [shop.t], table: t}, {tables: [shop.t], table: "
       "t}]\n", "", "",
       "routes[2].uid: 't' is the uid of routes[1] too; give each route a "
       "uid of its own (the default is its table)"},
      {"routes: [{tables: [shop.t], table: t}]\n", "", "",
       "source.type: 'routes' need a mariadb-cdc source", "generator", NULL},
      {"routes: [{tables: [shop.t], table: t}]\n", "", "",
       "sink: 'routes' need a postgres or mariadb sink (each route names its "
       "table)", NULL, "stdout"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(text, sizeof(text),
             "name: routes\ncheckpoint: {dir: %s/ckpt2}\n%s"
             "source:\n  type: %s\n  port: %d\n  user: root\n%s"
             "sink:\n  type: %s\n  conninfo: \"%s\"\n  mode: upsert\n"
             "  key: [id]\n%s",
             sl_test_dir(), bad[i].routes,
             bad[i].src_type ? bad[i].src_type : "mariadb-cdc",
             sl_server_port(e.my), bad[i].source_extra,
             bad[i].snk_type ? bad[i].snk_type : "postgres",
             sl_server_conninfo(e.pg), bad[i].sink_extra);
    char *msg = NULL;
    st = validate_text(&e, text, &msg);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 2 && msg &&
          strstr(msg, bad[i].want)))
      SL_TEST_FAIL("bad route %zu: status 0x%x, want '%s', got:\n%s", i, st,
                   bad[i].want, msg ? msg : "");
    free(msg);
  }
  env_close(&e);
}
