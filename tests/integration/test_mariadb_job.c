/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seed's running example into a real MariaDB, exactly once, from a
 * pipeline file run by the sluice command: two splits (files) of account
 * deltas, a keyed balance emitting updates, the mariadb sink upserting by
 * account.
 *
 * sigkill_soak: the process is killed with SIGKILL again and again, at a
 * random moment or at a named injection point (sink and checkpoint steps),
 * and resumed; then a last run completes.  The table must equal the
 * balances the test computed from the files it wrote, no XA branch of the
 * job may be left, and the marker table must agree (one marker per
 * committed epoch, epochs and checkpoints rising together per subtask).
 * SL_MARIADB_KILL_ROUNDS sets the rounds (default 50).
 *
 * commit_reply_held: the hold proxy keeps the reply to the first XA COMMIT
 * after the server made it durable; the job is killed while it waits,
 * resumed, commits the same xid again (1397, resolved through the marker
 * as already committed), and the held reply is let go.  Attempts for that
 * xid >= 2, logical commits == 1, the table exact.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_holdproxy.h"
#include "sl_servers.h"
#include "sl_test.h"


enum { LINES = 200000, N_KEYS = 300 };

static uint64_t rng = 0xba1a;
static uint64_t next_rand(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int64_t want_sum[N_KEYS], want_n[N_KEYS];

/* Two input files (the two splits) and the expected balances. */
static void write_inputs(char paths[2][4400]) {
  for (int f = 0; f < 2; f++) {
    snprintf(paths[f], sizeof(paths[f]), "%s/deltas-%d.csv", sl_test_dir(),
             f);
    FILE *fp = fopen(paths[f], "w");
    SL_ASSERT_TRUE(fp != NULL);
    for (int i = 0; i < LINES; i++) {
      int64_t k = (int64_t)(next_rand() % N_KEYS);
      int64_t a = (int64_t)(next_rand() % 2001) - 1000;
      if (a == 0) a = 1;
      fprintf(fp, "%lld,%lld\n", (long long)k, (long long)a);
      want_sum[k] += a;
      want_n[k]++;
    }
    fclose(fp);
  }
}

static void write_pipeline(const char *path, char in[2][4400], int port,
                           int interval_ms, int sink_par) {
  char text[16384];
  snprintf(text, sizeof(text),
           "name: balances\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: %d, retain: 2}\n"
           "source:\n  type: file\n  uid: deltas\n  path: [%s, %s]\n"
           "  schema: [{name: account, type: int64}, "
           "{name: amount, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount), n: count()}\n"
           "      emit: updates\n    uid: balance\n"
           "sink:\n  type: mariadb\n  uid: db\n  host: 127.0.0.1\n"
           "  port: %d\n  user: root\n  database: sluice\n"
           "  table: balances\n  key: [account]\n  mode: upsert\n"
           "  delivery: exactly-once\n  batch_size: 200\n"
           "  parallelism: %d\n",
           sl_test_dir(), interval_ms, in[0], in[1], port, sink_par);
  sl_test_write_file(path, text);
}

static pid_t spawn_sluice(const char *pipeline, const char *inject) {
  char bin[4096], errp[4300];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet", NULL};
  return sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_APPEND);
}

static int wait_sluice(pid_t pid) { return sl_test_wait(pid); }

static void fail_with_log(const char *what, int st) {
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *e = sl_test_read_file(ep, NULL);
  SL_TEST_FAIL("%s: sluice exited with status %d:\n%s", what, st, e ? e : "");
}

static MYSQL *direct(const sl_server_t *srv) {
  MYSQL *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(srv, sl_server_port(srv), &m, &err), err);
  SL_ASSERT_OK(sl_my_exec(m, "USE sluice", NULL, NULL));
  return m;
}

static int64_t my_int(MYSQL *m, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_query_int64(m, sql, &v, &err), err);
  return v;
}

/* Branches of the job's sink "db" that XA RECOVER lists. */
static int job_branches(MYSQL *m, const char *bqual_prefix) {
  SL_ASSERT_EQ_INT(mysql_query(m, "XA RECOVER"), 0);
  MYSQL_RES *r = mysql_store_result(m);
  SL_ASSERT_TRUE(r != NULL);
  int n = 0;
  MYSQL_ROW row;
  const char *g = "sl/balances/db";
  while ((row = mysql_fetch_row(r)) != NULL) {
    long gl = strtol(row[1], NULL, 10);
    if (gl != (long)strlen(g) || strncmp(row[3], g, (size_t)gl) != 0)
      continue;
    if (bqual_prefix == NULL ||
        strncmp(row[3] + gl, bqual_prefix, strlen(bqual_prefix)) == 0)
      n++;
  }
  mysql_free_result(r);
  return n;
}

/* The table equals the balances computed from the input. */
static void check_table(MYSQL *m) {
  SL_ASSERT_EQ_INT(mysql_query(m, "SELECT account, balance, n FROM "
                                  "balances ORDER BY account"),
                   0);
  MYSQL_RES *r = mysql_store_result(m);
  SL_ASSERT_TRUE(r != NULL);
  int rows = 0;
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL) {
    long long k = strtoll(row[0], NULL, 10);
    SL_ASSERT_TRUE(k >= 0 && k < N_KEYS);
    long long b = strtoll(row[1], NULL, 10), n = strtoll(row[2], NULL, 10);
    if (b != want_sum[k] || n != want_n[k])
      SL_TEST_FAIL("account %lld: balance %lld n %lld, expected %lld and "
                   "%lld", k, b, n, (long long)want_sum[k],
                   (long long)want_n[k]);
    rows++;
  }
  mysql_free_result(r);
  int want_rows = 0;
  for (int i = 0; i < N_KEYS; i++) want_rows += want_n[i] > 0;
  SL_ASSERT_EQ_INT(rows, want_rows);
}

/* One marker per committed epoch; per subtask, checkpoint ids rise with
 * epochs (an epoch is committed under the checkpoint that closed it, and
 * the next epoch is named by that checkpoint). */
static int check_markers(MYSQL *m) {
  SL_ASSERT_EQ_INT(mysql_query(m, "SELECT subtask, epoch, checkpoint_id "
                                  "FROM sluice_xa_commits WHERE job = "
                                  "'balances' AND sink_uid = 'db' ORDER BY "
                                  "subtask, epoch"),
                   0);
  MYSQL_RES *r = mysql_store_result(m);
  SL_ASSERT_TRUE(r != NULL);
  long long last_sub = -1, last_ck = 0, last_ep = 0;
  int n = 0;
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL) {
    long long s = strtoll(row[0], NULL, 10), e = strtoll(row[1], NULL, 10);
    long long c = strtoll(row[2], NULL, 10);
    SL_ASSERT_TRUE(s >= 0 && s < 2);
    SL_ASSERT_TRUE(e < c); /* epoch e is closed by a later checkpoint */
    if (s == last_sub) {
      SL_ASSERT_TRUE(c > last_ck);
      SL_ASSERT_TRUE(e > last_ep);
    }
    last_sub = s;
    last_ck = c;
    last_ep = e;
    n++;
  }
  mysql_free_result(r);
  SL_ASSERT_TRUE(n > 0);
  return n;
}

static sl_server_t *start_maria(void) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  return srv;
}

static const char *DDL = "CREATE TABLE balances (account BIGINT PRIMARY "
                         "KEY, balance BIGINT NOT NULL, n BIGINT NOT NULL)"
                         " ENGINE=InnoDB";

static const char *points[] = {
    "sink.before_prepare",          "sink.after_prepare",
    "sink.before_commit",           "sink.after_commit_ok",
    "sink.restore.before_commit",   "sink.restore.before_recover",
    "sink.restore.after_recover",   "task.after_sync_snapshot",
    "coordinator.before_metadata_rename",
    "coordinator.after_metadata_rename",
    "coordinator.before_complete_notify",
};

SL_TEST(sigkill_soak) {
  const char *env = getenv("SL_MARIADB_KILL_ROUNDS");
  int rounds = env ? (int)strtol(env, NULL, 10) : 50;
  sl_server_t *srv = start_maria();
  MYSQL *m = direct(srv);
  SL_ASSERT_OK(sl_my_exec(m, DDL, NULL, NULL));
  char in[2][4400], pipeline[4400];
  write_inputs(in);
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline(pipeline, in, sl_server_port(srv), 20, 2);
  int n_killed = 0, n_point = 0, n_completed = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int r = 0; r < rounds; r++) {
    char inject[160];
    const char *inj = NULL;
    long delay_us = 0;
    if (r % 2 == 1) {
      const char *p =
          points[next_rand() % (sizeof(points) / sizeof(points[0]))];
      snprintf(inject, sizeof(inject), "%s=kill:%u", p,
               (unsigned)(1 + next_rand() % 3));
      inj = inject;
    } else {
      delay_us = 20000 + (long)(next_rand() % 300000);
    }
    pid_t pid = spawn_sluice(pipeline, inj);
    if (delay_us > 0) {
      /* The kill moment is random; correctness must not depend on it. */
      struct timespec ts = {0, delay_us * 1000};
      nanosleep(&ts, NULL);
      kill(pid, SIGKILL);
    }
    int st = wait_sluice(pid);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      n_killed++;
      if (inj) n_point++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      n_completed++;
    } else {
      char what[64];
      snprintf(what, sizeof(what), "round %d", r);
      fail_with_log(what, st);
    }
  }
  int st = wait_sluice(spawn_sluice(pipeline, NULL));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("final run", st);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  check_table(m);
  SL_ASSERT_EQ_INT(job_branches(m, NULL), 0);
  int n_markers = check_markers(m);
  printf("%d rounds: %d killed (%d at injection points), %d completed; "
         "%d epochs committed; %.1f s\n",
         rounds, n_killed, n_point, n_completed, n_markers,
         (double)(t1.tv_sec - t0.tv_sec) +
             (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  SL_ASSERT_TRUE(n_killed > 0);
  mysql_close(m);
  sl_server_destroy(srv);
}

SL_TEST(commit_reply_held) {
  sl_server_t *srv = start_maria();
  MYSQL *m = direct(srv);
  SL_ASSERT_OK(sl_my_exec(m, DDL, NULL, NULL));
  sl_proxy_t *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_proxy_start(SL_PROXY_MYSQL, sl_server_port(srv), 0, &p,
                                &err),
                 err);
  sl_proxy_rule_t rule;
  memset(&rule, 0, sizeof(rule));
  rule.match = "XA COMMIT";
  rule.action = SL_PROXY_HOLD;
  rule.times = 1;
  int hold = -1;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &rule, &hold, &err), err);
  char in[2][4400], pipeline[4400];
  write_inputs(in);
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline(pipeline, in, sl_proxy_port(p), 50, 1);
  pid_t pid = spawn_sluice(pipeline, NULL);
  if (sl_proxy_wait_paused(p, hold, 30000) != SL_OK) {
    kill(pid, SIGKILL);
    fail_with_log("no XA COMMIT held within 30 s", wait_sluice(pid));
  }
  /* One sink subtask: its committer waits for the held reply, so no
   * other commit happens.  The commit is durable (its marker is visible,
   * its branch no longer prepared) and its reply held. */
  SL_ASSERT_EQ_INT(my_int(m, "SELECT COUNT(*) FROM sluice_xa_commits"), 1);
  int64_t sub = my_int(m, "SELECT subtask FROM sluice_xa_commits");
  int64_t ep = my_int(m, "SELECT epoch FROM sluice_xa_commits");
  char bq[64];
  snprintf(bq, sizeof(bq), "%lld/%lld/", (long long)sub, (long long)ep);
  SL_ASSERT_EQ_INT(job_branches(m, bq), 0);
  /* Count the later attempts for this xid: XA COMMIT X'<gtrid hex>',
   * X'<hex of "s/e/">... */
  char match[256];
  int off = snprintf(match, sizeof(match), "XA COMMIT X'");
  for (const char *g = "sl/balances/db"; *g; g++)
    off += snprintf(match + off, sizeof(match) - (size_t)off, "%02x",
                    (unsigned char)*g);
  off += snprintf(match + off, sizeof(match) - (size_t)off, "',X'");
  for (const char *g = bq; *g; g++)
    off += snprintf(match + off, sizeof(match) - (size_t)off, "%02x",
                    (unsigned char)*g);
  sl_proxy_rule_t again;
  memset(&again, 0, sizeof(again));
  again.match = match;
  again.action = SL_PROXY_PASS;
  int count = -1;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &again, &count, &err), err);
  /* Kill the commit owner, resume, then let the held reply go. */
  kill(pid, SIGKILL);
  int st = wait_sluice(pid);
  SL_ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  pid = spawn_sluice(pipeline, NULL);
  st = wait_sluice(pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("resumed run", st);
  SL_ASSERT_TRUE(sl_proxy_release(p, hold) >= 0);
  sl_proxy_counts_t c0, c1;
  SL_ASSERT_OK(sl_proxy_count(p, hold, &c0));
  SL_ASSERT_OK(sl_proxy_count(p, count, &c1));
  printf("held %llu, attempts for the held xid after the kill %llu\n",
         (unsigned long long)c0.held, (unsigned long long)c1.attempts);
  SL_ASSERT_EQ_INT(c0.held, 1);
  /* The held attempt plus at least one after the restart. */
  SL_ASSERT_TRUE(1 + c1.attempts >= 2);
  char sql[200];
  snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM sluice_xa_commits WHERE "
           "subtask = %lld AND epoch = %lld", (long long)sub, (long long)ep);
  SL_ASSERT_EQ_INT(my_int(m, sql), 1);
  check_table(m);
  SL_ASSERT_EQ_INT(job_branches(m, NULL), 0);
  check_markers(m);
  /* The resumed run said it found the epoch already committed. */
  char ep_path[4300];
  snprintf(ep_path, sizeof(ep_path), "%s/stderr.txt", sl_test_dir());
  char *log = sl_test_read_file(ep_path, NULL);
  printf("%s\n", log ? log : "");
  free(log);
  sl_proxy_stop(p);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* examples/pipelines/balances-mariadb.yaml, against the test server: every
 * delta is counted once (the sum of n over the accounts is the count). */
SL_TEST(example_pipeline) {
  sl_server_t *srv = start_maria();
  MYSQL *m = direct(srv);
  SL_ASSERT_OK(sl_my_exec(m, DDL, NULL, NULL));
  char example[4400], port[64], dir[4400], bin[4096], errp[4300];
  snprintf(example, sizeof(example),
           "%s/examples/pipelines/balances-mariadb.yaml", sl_test_src_dir());
  snprintf(port, sizeof(port), "sink.port=%d", sl_server_port(srv));
  snprintf(dir, sizeof(dir), "checkpoint.dir=%s/ckpt", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", example, "--quiet",
                        "--set", port, "--set", "sink.user=root",
                        "--set", dir, "--set", "source.count=30000",
                        "--set", "checkpoint.interval_ms=50", NULL};
  SL_ASSERT_EQ_INT(setenv("SLUICE_DB_PASSWORD", "", 1), 0);
  int st = sl_test_wait(sl_test_spawn(argv, NULL, errp, SL_TEST_SPAWN_APPEND));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("example", st);
  SL_ASSERT_EQ_INT(my_int(m, "SELECT SUM(n) FROM balances"), 30000);
  SL_ASSERT_TRUE(my_int(m, "SELECT COUNT(*) FROM balances") <= 10000);
  SL_ASSERT_TRUE(my_int(m, "SELECT COUNT(*) FROM sluice_xa_commits") > 0);
  SL_ASSERT_EQ_INT(job_branches(m, NULL), 0);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* The reply to the first XA COMMIT is dropped and the connection closed
 * after the server committed; the process lives on: the committer answers
 * RETRY, reconnects, gets 1397 and resolves it through the marker as
 * already committed, and the job finishes with the table exact. */
SL_TEST(commit_reply_dropped) {
  sl_server_t *srv = start_maria();
  MYSQL *m = direct(srv);
  SL_ASSERT_OK(sl_my_exec(m, DDL, NULL, NULL));
  sl_proxy_t *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_proxy_start(SL_PROXY_MYSQL, sl_server_port(srv), 0, &p,
                                &err),
                 err);
  sl_proxy_rule_t rule;
  memset(&rule, 0, sizeof(rule));
  rule.match = "XA COMMIT";
  rule.action = SL_PROXY_DROP;
  rule.times = 1;
  int drop = -1;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &rule, &drop, &err), err);
  char in[2][4400], pipeline[4400];
  write_inputs(in);
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline(pipeline, in, sl_proxy_port(p), 50, 1);
  int st = wait_sluice(spawn_sluice(pipeline, NULL));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("run", st);
  sl_proxy_counts_t c;
  SL_ASSERT_OK(sl_proxy_count(p, drop, &c));
  SL_ASSERT_EQ_INT(c.dropped, 1);
  check_table(m);
  SL_ASSERT_EQ_INT(job_branches(m, NULL), 0);
  check_markers(m);
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *log = sl_test_read_file(ep, NULL);
  SL_ASSERT_TRUE(log != NULL && strstr(log, "will be retried: error 2013") !=
                                    NULL);
  free(log);
  sl_proxy_stop(p);
  mysql_close(m);
  sl_server_destroy(srv);
}
