/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres sink exactly once through process kills, against a real
 * PostgreSQL (tests/tools/sl_servers): the seed's running example (two
 * generator splits of account deltas, a keyed balance that emits every
 * update, the sink upserting each account's row) run by the sluice command
 * from a pipeline file and SIGKILLed at the sink's and the checkpoint's
 * injection points again and again (SL_PG_EO_ROUNDS rounds, 50 by
 * default); and the seed 000 §10.3 ambiguous commit through the hold
 * proxy (tests/tools/sl_holdproxy): the reply to COMMIT PREPARED is held
 * after the server made the commit durable, the commit owner is killed,
 * the job resumes, the proxy lets go.
 *
 * What exactly once means here, checked in the table itself: every row
 * carries n, the number of deltas its balance sums, and a trigger records
 * in pg_violations any committed update that does not move n forward (an
 * epoch committed twice, or a replay committed over newer output).  At
 * the end the table equals an independent computation, no prepared
 * transaction of the job is left, and every commit-log marker names a
 * committed gid.
 */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_holdproxy.h"
#include "sl_servers.h"
#include "sl_balances.h"
#include "sl_test.h"
#include "sluice/sluice.h"


enum { KEYS = 50, COUNT = 40000 };

static pid_t spawn_bg(const char *const *argv, const char *inject,
                      const char *errp) {
  return sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_APPEND);
}

static int wait_pid(pid_t pid) {
  int status;
  if (waitpid(pid, &status, 0) != pid) SL_TEST_FAIL("waitpid failed");
  return status;
}

static uint64_t rng = 0x5eed13;
static uint64_t next_rand(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static const char *kill_points[] = {
    "sink.before_prepare",        "sink.after_prepare",
    "sink.before_commit",         "sink.after_commit_ok",
    "sink.restore.before_commit", "sink.restore.before_recover",
    "sink.restore.after_recover", "task.after_sync_snapshot",
    "task.async_before_ack",      "coordinator.before_metadata_rename",
    "coordinator.after_metadata_rename",
    "coordinator.before_complete_notify",
};

/* ---- the independent computation: the same generator, per key -------- */

/* "account=balance/n;..." of the independent computation. */
static char *expected_table(void) {
  sl_balances_t b;
  sl_balances_compute(COUNT, KEYS, false, &b);
  char *t = sl_balances_table(&b);
  sl_balances_free(&b);
  return t;
}

/* ---- the server side ----------------------------------------------------- */

static void sql_ok(PGconn *c, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(c, sql, NULL, &err), err);
}

static int64_t sql_int(PGconn *c, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(c, sql, &v, &err), err);
  return v;
}

static char *sql_text(PGconn *c, const char *sql) {
  char *t = NULL;
  sl_error_t *err = NULL;
  int rc = sl_pg_query_text(c, sql, &t, &err);
  if (rc == SL_ENOTFOUND) {
    sl_error_destroy(err);
    return sl_strdup("");
  }
  SL_ASSERT_OK_E(rc, err);
  return t;
}

static void create_tables(PGconn *db) {
  sql_ok(db, "CREATE TABLE balances (account bigint PRIMARY KEY, balance "
             "bigint NOT NULL, n bigint NOT NULL)");
  sql_ok(db, "CREATE TABLE pg_violations (account bigint, old_n bigint, "
             "new_n bigint)");
  sql_ok(db, "CREATE FUNCTION check_n() RETURNS trigger LANGUAGE plpgsql AS "
             "$$ BEGIN IF NEW.n <= OLD.n THEN INSERT INTO pg_violations "
             "VALUES (OLD.account, OLD.n, NEW.n); END IF; RETURN NEW; END $$");
  sql_ok(db, "CREATE TRIGGER balances_n BEFORE UPDATE ON balances FOR EACH "
             "ROW EXECUTE FUNCTION check_n()");
}

static void reset_tables(PGconn *db) {
  sql_ok(db, "TRUNCATE balances, pg_violations");
  sql_ok(db, "DROP TABLE IF EXISTS sluice_sink_commits");
}

/* Table exact, no violation, nothing prepared, markers all committed. */
static void check_server(PGconn *db, const char *want) {
  char *t = sql_text(db, "SELECT string_agg(account || '=' || balance || '/' "
                         "|| n, ';' ORDER BY account) FROM balances");
  SL_ASSERT_EQ_STR(t, want);
  sl_free(t);
  SL_ASSERT_EQ_INT(sql_int(db, "SELECT count(*) FROM pg_violations"), 0);
  SL_ASSERT_EQ_INT(sql_int(db, "SELECT count(*) FROM pg_prepared_xacts "
                               "WHERE gid LIKE 'sl/pgbal/%'"),
                   0);
  /* Every marker names its own gid, which is no longer prepared. */
  SL_ASSERT_EQ_INT(sql_int(db, "SELECT count(*) FROM sluice_sink_commits "
                               "WHERE gid <> 'sl/' || job || '/' || "
                               "sink_uid || '/' || subtask || '/' || epoch "
                               "OR job <> 'pgbal' OR sink_uid <> 'bal-pg'"),
                   0);
  SL_ASSERT_TRUE(sql_int(db, "SELECT count(*) FROM sluice_sink_commits") > 0);
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  return remove(p);
}

static void write_pipeline(const char *path, const char *conninfo,
                           const char *extra) {
  char text[8192];
  snprintf(text, sizeof(text),
           "name: pgbal\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 10, retain: 2}\n"
           "source: {type: generator, uid: deltas, seed: 42, count: %d,\n"
           "         splits: 2, keys: %d, rate: 100000,\n"
           "         columns: [key, amount]}\n"
           "transforms:\n"
           "  - project: {account: key, amount: amount}\n"
           "  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount), n: count()}\n"
           "      emit: updates\n    uid: balances\n"
           "sink: {type: postgres, uid: bal-pg, conninfo: \"%s\",\n"
           "       table: balances, mode: upsert, key: [account],\n"
           "       delivery: exactly-once%s}\n",
           sl_test_dir(), COUNT, KEYS, conninfo, extra);
  sl_test_write_file(path, text);
}

static void fail_with_log(const char *what, int st, const char *errp) {
  char *e = sl_test_read_file(errp, NULL);
  SL_TEST_FAIL("%s: sluice exited with status %d:\n%s", what, st, e ? e : "");
}

/* The running example, killed at a random injection point in most rounds;
 * a round whose job completes is checked and starts the next cycle from
 * nothing, so that kills keep falling in the middle of a job. */
SL_TEST(sigkill_soak_running_example) {
  const char *env = getenv("SL_PG_EO_ROUNDS");
  int rounds = env ? atoi(env) : 50;
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  PGconn *db = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(srv), &db, &err), err);
  create_tables(db);
  char *want = expected_table();
  char pipeline[4300], bin[4300], errp[4300], ck[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  snprintf(ck, sizeof(ck), "%s/ckpt", sl_test_dir());
  write_pipeline(pipeline, sl_server_conninfo(srv), "");
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet", NULL};
  int n_killed = 0, n_completed = 0;
  for (int r = 0; r < rounds; r++) {
    const char *p = kill_points[next_rand() % (sizeof(kill_points) /
                                               sizeof(kill_points[0]))];
    char inject[200];
    snprintf(inject, sizeof(inject), "%s=kill:%u", p,
             (unsigned)(1 + next_rand() % 3));
    unlink(errp);
    int st = wait_pid(spawn_bg(argv, inject, errp));
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      n_killed++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      n_completed++;
      check_server(db, want);
      reset_tables(db);
      nftw(ck, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    } else {
      char what[300];
      snprintf(what, sizeof(what), "round %d (%s)", r, inject);
      fail_with_log(what, st, errp);
    }
  }
  unlink(errp);
  int st = wait_pid(spawn_bg(argv, NULL, errp));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_with_log("final run", st, errp);
  printf("%d rounds: %d killed at injection points, %d completed (each "
         "checked)\n", rounds, n_killed, n_completed);
  SL_ASSERT_TRUE(n_killed > rounds / 2);
  check_server(db, want);
  sl_free(want);
  PQfinish(db);
  sl_server_destroy(srv);
}

/*
 * Seed 000 §10.3 (connectors note D.3): the commit is durable, its reply
 * is held by the proxy, the commit owner is killed, the job resumes from
 * the latest completed checkpoint, the proxy lets go.  Expected: the gid
 * was committed by two attempts (the second answered 42704 and the marker
 * made it ALREADY), one logical commit (one marker row), table exact.
 */
SL_TEST(commit_reply_lost_then_resume) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  o.is_durable = true; /* the held commit is durable on disk */
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  PGconn *db = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(srv), &db, &err), err);
  create_tables(db);
  char *want = expected_table();
  sl_proxy_t *px = NULL;
  SL_ASSERT_OK_E(sl_proxy_start(SL_PROXY_PG, sl_server_port(srv), 0, &px,
                                &err),
                 err);
  char ci[300];
  sl_pg_conninfo_port(srv, sl_proxy_port(px), ci, sizeof(ci));
  sl_proxy_rule_t hold = {0};
  hold.match = "COMMIT PREPARED 'sl/pgbal/bal-pg/0/";
  hold.action = SL_PROXY_HOLD;
  hold.pg_reply_tag = "COMMIT PREPARED";
  hold.times = 1;
  int r_hold;
  SL_ASSERT_OK_E(sl_proxy_arm(px, &hold, &r_hold, &err), err);

  char pipeline[4300], bin[4300], errp[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  write_pipeline(pipeline, ci, "");
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet", NULL};
  pid_t pid = spawn_bg(argv, NULL, errp);
  if (sl_proxy_wait_paused(px, r_hold, 60000) != SL_OK) {
    kill(pid, SIGKILL);
    fail_with_log("no COMMIT PREPARED of subtask 0 was held", wait_pid(pid),
                  errp);
  }
  /* Durable and not acknowledged: the only marker of subtask 0 names a gid
   * that is no longer prepared (committed), while its commit is held. */
  SL_ASSERT_EQ_INT(sql_int(db, "SELECT count(*) FROM sluice_sink_commits "
                               "WHERE subtask = 0"),
                   1);
  char *gid = sql_text(db, "SELECT gid FROM sluice_sink_commits WHERE "
                           "subtask = 0");
  char q[512];
  snprintf(q, sizeof(q), "SELECT count(*) FROM pg_prepared_xacts WHERE gid "
           "= '%s'", gid);
  SL_ASSERT_EQ_INT(sql_int(db, q), 0);
  /* Count the later attempts at exactly this gid. */
  char match[300];
  snprintf(match, sizeof(match), "COMMIT PREPARED '%s'", gid);
  sl_proxy_rule_t again = {0};
  again.match = match;
  again.action = SL_PROXY_PASS;
  int r_again;
  SL_ASSERT_OK_E(sl_proxy_arm(px, &again, &r_again, &err), err);
  /* Kill the commit owner. */
  SL_ASSERT_EQ_INT(kill(pid, SIGKILL), 0);
  int st = wait_pid(pid);
  SL_ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  /* Resume from the latest completed checkpoint, then let go of the held
   * reply (its client is gone: the proxy closes that connection). */
  pid = spawn_bg(argv, NULL, errp);
  SL_ASSERT_TRUE(sl_proxy_release(px, r_hold) >= 0);
  st = wait_pid(pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("resume", st, errp);
  sl_proxy_counts_t c1, c2;
  SL_ASSERT_OK(sl_proxy_count(px, r_hold, &c1));
  SL_ASSERT_OK(sl_proxy_count(px, r_again, &c2));
  printf("gid %s: held %llu, attempts after the kill %llu\n", gid,
         (unsigned long long)c1.held, (unsigned long long)c2.attempts);
  SL_ASSERT_EQ_INT(c1.held, 1);
  SL_ASSERT_TRUE(1 + c2.attempts >= 2); /* commit attempts for the gid */
  snprintf(q, sizeof(q), "SELECT count(*) FROM sluice_sink_commits WHERE "
           "gid = '%s'", gid);
  SL_ASSERT_EQ_INT(sql_int(db, q), 1); /* logical commits == 1 */
  check_server(db, want);
  sl_free(gid);
  sl_free(want);
  sl_proxy_stop(px);
  PQfinish(db);
  sl_server_destroy(srv);
}
