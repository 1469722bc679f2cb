/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An upsert sink whose parallelism differs from the keyed aggregate
 * before it (docs/pipeline.md, "Sink parallelism and keys"), against a
 * real PostgreSQL and a real MariaDB (tests/tools/sl_servers): the
 * running example (two generator splits of account deltas, a keyed
 * balance that emits every update, the sink upserting each account's
 * row) runs exactly-once as a `sluice` process, job parallelism 2 and
 * sink parallelism 4, then job parallelism 3 and sink parallelism 1.
 *
 * The sink's input is keyed by its key, so each account has one sink
 * subtask.  Fed round robin instead, one account's updates reach several
 * subtasks: exactly-once subtasks then wait for each other's prepared row
 * locks (PostgreSQL: forever without the writer's lock_timeout; MariaDB:
 * error 1205), and an older update can overwrite a newer one.
 *
 * Checked: the run ends by itself with status 0 within a bound (a hang
 * is killed at the bound and fails the test; the bound is far above the
 * run's few seconds, so a loaded machine does not fail it), the table
 * equals an independent computation (the same generator summed in this
 * process), a trigger recorded no update that moved an account's update
 * count n backwards, and no prepared transaction (XA branch) is left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_servers.h"
#include "sl_balances.h"
#include "sl_test.h"
#include "sluice/sluice.h"

enum { KEYS = 50, COUNT = 20000, BOUND_S = 120 };

/* ------------------------------------------------------------------ */
/* The independent computation: the same generator, summed per key.    */

/* "account=balance/n;..." ordered by account. */
static char *expected_table(void) {
  sl_balances_t b;
  sl_balances_compute(COUNT, KEYS, false, &b);
  char *t = sl_balances_table(&b);
  sl_balances_free(&b);
  return t;
}

/* ------------------------------------------------------------------ */
/* The database.                                                        */

typedef struct db_s {
  sl_server_kind_t kind;
  sl_server_t *srv;
  PGconn *pg;
  MYSQL *my;
} db_t;

static bool is_pg(const db_t *db) { return db->kind == SL_SERVER_POSTGRES; }

static void db_exec(db_t *db, const char *sql) {
  sl_error_t *err = NULL;
  if (is_pg(db))
    SL_ASSERT_OK_E(sl_pg_exec(db->pg, sql, NULL, &err), err);
  else
    SL_ASSERT_OK_E(sl_my_exec(db->my, sql, NULL, &err), err);
}

static int64_t db_int(db_t *db, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  if (is_pg(db))
    SL_ASSERT_OK_E(sl_pg_query_int64(db->pg, sql, &v, &err), err);
  else
    SL_ASSERT_OK_E(sl_my_query_int64(db->my, sql, &v, &err), err);
  return v;
}

static const char *PG_DDL[] = {
    "CREATE TABLE balances (account bigint PRIMARY KEY, balance bigint NOT "
    "NULL, n bigint NOT NULL)",
    "CREATE TABLE violations (account bigint, old_n bigint, new_n bigint)",
    "CREATE FUNCTION check_n() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.n <= OLD.n THEN INSERT INTO violations VALUES (OLD.account, "
    "OLD.n, NEW.n); END IF; RETURN NEW; END $$",
    "CREATE TRIGGER balances_n BEFORE UPDATE ON balances FOR EACH ROW "
    "EXECUTE FUNCTION check_n()",
    NULL};

static const char *MY_DDL[] = {
    "CREATE TABLE balances (account BIGINT PRIMARY KEY, balance BIGINT NOT "
    "NULL, n BIGINT NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE violations (account BIGINT, old_n BIGINT, new_n BIGINT) "
    "ENGINE=InnoDB",
    "CREATE TRIGGER balances_n BEFORE UPDATE ON balances FOR EACH ROW BEGIN "
    "IF NEW.n <= OLD.n THEN INSERT INTO violations VALUES (OLD.account, "
    "OLD.n, NEW.n); END IF; END",
    NULL};

static void db_start(db_t *db, sl_server_kind_t kind) {
  memset(db, 0, sizeof(*db));
  db->kind = kind;
  sl_server_opts_t o;
  sl_server_opts_init(&o, kind);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &db->srv, &err), err);
  if (is_pg(db)) {
    SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(db->srv), &db->pg, &err),
                   err);
  } else {
    SL_ASSERT_OK_E(sl_my_connect(db->srv, sl_server_port(db->srv), &db->my,
                                 &err),
                   err);
    db_exec(db, "USE sluice");
  }
  for (const char **d = is_pg(db) ? PG_DDL : MY_DDL; *d; d++) db_exec(db, *d);
}

static void db_stop(db_t *db) {
  if (db->pg) PQfinish(db->pg);
  if (db->my) mysql_close(db->my);
  sl_server_destroy(db->srv);
}

static char *db_table(db_t *db) {
  const char *sql = "SELECT account, balance, n FROM balances ORDER BY "
                    "account";
  sl_bytes_t b;
  sl_bytes_init(&b);
  if (is_pg(db)) {
    PGresult *r = PQexec(db->pg, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
      SL_TEST_FAIL("%s: %s", sql, PQerrorMessage(db->pg));
    for (int i = 0; i < PQntuples(r); i++)
      SL_ASSERT_OK(sl_bytes_printf(&b, "%s%s=%s/%s", i ? ";" : "",
                                   PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                                   PQgetvalue(r, i, 2)));
    PQclear(r);
  } else {
    if (mysql_query(db->my, sql) != 0)
      SL_TEST_FAIL("%s: %s", sql, mysql_error(db->my));
    MYSQL_RES *r = mysql_store_result(db->my);
    if (r == NULL) SL_TEST_FAIL("%s: %s", sql, mysql_error(db->my));
    MYSQL_ROW row;
    for (int i = 0; (row = mysql_fetch_row(r)) != NULL; i++)
      SL_ASSERT_OK(sl_bytes_printf(&b, "%s%s=%s/%s", i ? ";" : "", row[0],
                                   row[1], row[2]));
    mysql_free_result(r);
  }
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

/* ------------------------------------------------------------------ */
/* The run.                                                             */

/* Wait for pid at most BOUND_S seconds; a run still going then is killed
 * and fails the test (sluice hung). */
static int wait_bounded(pid_t pid, const char *errp) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0) SL_TEST_FAIL("waitpid: %s", strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec >= BOUND_S) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      char *err = sl_test_read_file(errp, NULL);
      SL_TEST_FAIL("sluice did not finish within %d s (hung: sink subtasks "
                   "waiting for each other's row locks?); stderr:\n%s",
                   BOUND_S, err ? err : "");
    }
    struct timespec d = {0, 50 * 1000 * 1000};
    nanosleep(&d, NULL);
  }
}

static void run(sl_server_kind_t kind, uint32_t job_par, uint32_t sink_par) {
  db_t db;
  db_start(&db, kind);
  char *want = expected_table();
  char sink[1200], text[8192], pipeline[4300], bin[4300], errp[4300];
  if (is_pg(&db))
    snprintf(sink, sizeof(sink),
             "sink: {type: postgres, uid: bal, conninfo: \"%s\",\n"
             "       table: balances, mode: upsert, key: [account],\n"
             "       delivery: exactly-once, parallelism: %u}\n",
             sl_server_conninfo(db.srv), sink_par);
  else
    snprintf(sink, sizeof(sink),
             "sink: {type: mariadb, uid: bal, host: 127.0.0.1, port: %d,\n"
             "       user: root, database: sluice, table: balances,\n"
             "       key: [account], mode: upsert, delivery: exactly-once,\n"
             "       parallelism: %u}\n",
             sl_server_port(db.srv), sink_par);
  snprintf(text, sizeof(text),
           "name: keyed\nparallelism: %u\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 20}\n"
           "source: {type: generator, uid: deltas, seed: 42, count: %d,\n"
           "         splits: 2, keys: %d, columns: [key, amount]}\n"
           "transforms:\n"
           "  - project: {account: key, amount: amount}\n"
           "  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount), n: count()}\n"
           "      emit: updates\n    uid: balances\n"
           "%s",
           job_par, sl_test_dir(), COUNT, KEYS, sink);
  snprintf(pipeline, sizeof(pipeline), "%s/keyed.yaml", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  sl_test_write_file(pipeline, text);
  const char *argv[] = {bin, "run", pipeline, "--quiet", NULL};
  pid_t pid = sl_test_spawn(argv, NULL, errp, SL_TEST_SPAWN_NO_STDOUT);
  int st = wait_bounded(pid, errp);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char *err = sl_test_read_file(errp, NULL);
    SL_TEST_FAIL("sluice ended with status %d:\n%s", st, err ? err : "");
  }
  char *got = db_table(&db);
  SL_ASSERT_EQ_STR(got, want);
  SL_ASSERT_EQ_INT(db_int(&db, "SELECT count(*) FROM violations"), 0);
  if (is_pg(&db))
    SL_ASSERT_EQ_INT(db_int(&db, "SELECT count(*) FROM pg_prepared_xacts"),
                     0);
  if (!is_pg(&db)) {
    /* XA RECOVER lists the branches still prepared. */
    SL_ASSERT_OK(mysql_query(db.my, "XA RECOVER"));
    MYSQL_RES *r = mysql_store_result(db.my);
    SL_ASSERT_TRUE(r != NULL);
    SL_ASSERT_EQ_INT(mysql_num_rows(r), 0);
    mysql_free_result(r);
  }
  free(got);
  free(want);
  db_stop(&db);
}

SL_TEST(pg_job_par_2_sink_par_4) { run(SL_SERVER_POSTGRES, 2, 4); }
SL_TEST(pg_job_par_3_sink_par_1) { run(SL_SERVER_POSTGRES, 3, 1); }
SL_TEST(mariadb_job_par_2_sink_par_4) { run(SL_SERVER_MARIADB, 2, 4); }
SL_TEST(mariadb_job_par_3_sink_par_1) { run(SL_SERVER_MARIADB, 3, 1); }
