/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Restoring a checkpoint older than output a transactional sink already
 * committed (window W11 of the connectors note, rule 0.3-7), from a
 * pipeline file run by the sluice command, into a real PostgreSQL, a real
 * MariaDB (tests/tools/sl_servers) and exactly-once files: a bounded
 * generator job runs to its end; then
 *   - --from-checkpoint of its oldest retained checkpoint C is refused,
 *     exit 1, with a message naming the sink, the committed checkpoint
 *     K > C, C and --allow-duplicate-sink-output, and the output is
 *     untouched (rows, markers, nothing prepared);
 *   - the same with --allow-duplicate-sink-output runs, and the rows after
 *     C appear a second time (what the user accepted);
 *   - --resume (the newest checkpoint) runs.
 * And the sink metrics of --metrics-json after a run with an aborted
 * checkpoint and a kill, resumed (rule 0.3-9).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_servers.h"
#include "sl_test.h"

enum { COUNT = 20000 };

typedef enum { K_PG, K_MY, K_FILE } kind_t;

typedef struct env_s {
  kind_t kind;
  sl_server_t *srv;
  PGconn *pg;
  MYSQL *my;
  char pipeline[4400], errp[4400], out[4400], ck[4400], bin[4400];
} env_t;

static int64_t pg_int(PGconn *c, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(c, sql, &v, &err), err);
  return v;
}

static int64_t my_int(MYSQL *c, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_query_int64(c, sql, &v, &err), err);
  return v;
}

/* Rows in the finished part files (names not starting with '.'). */
static int64_t file_rows(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  int64_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[4700];
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    size_t len = 0;
    char *t = sl_test_read_file(p, &len);
    for (size_t i = 0; i < len; i++) n += t[i] == '\n';
    free(t);
  }
  closedir(d);
  return n;
}

/* Hidden (in-progress or pending) part files left in the directory. */
static int64_t file_hidden(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  int64_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strncmp(e->d_name, ".part-", 6) == 0;
  closedir(d);
  return n;
}

static int64_t rows(env_t *v) {
  switch (v->kind) {
  case K_PG: return pg_int(v->pg, "SELECT count(*) FROM t");
  case K_MY: return my_int(v->my, "SELECT COUNT(*) FROM t");
  case K_FILE: return file_rows(v->out);
  }
  return -1;
}

/* Commit-log markers (files: finished part files). */
static int64_t markers(env_t *v) {
  switch (v->kind) {
  case K_PG: return pg_int(v->pg, "SELECT count(*) FROM sluice_sink_commits");
  case K_MY: return my_int(v->my, "SELECT COUNT(*) FROM sluice_xa_commits");
  case K_FILE: {
    DIR *d = opendir(v->out);
    int64_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
  }
  }
  return -1;
}

/* Transactions left prepared (files: hidden part files). */
static int64_t prepared(env_t *v) {
  switch (v->kind) {
  case K_PG: return pg_int(v->pg, "SELECT count(*) FROM pg_prepared_xacts");
  case K_MY: {
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl_my_exec(v->my, "XA RECOVER", NULL, &err), err);
    MYSQL_RES *r = mysql_store_result(v->my);
    int64_t n = r ? (int64_t)mysql_num_rows(r) : 0;
    if (r) mysql_free_result(r);
    return n;
  }
  case K_FILE: return file_hidden(v->out);
  }
  return -1;
}

static void setup(env_t *v, kind_t kind) {
  memset(v, 0, sizeof(*v));
  v->kind = kind;
  snprintf(v->pipeline, sizeof(v->pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(v->errp, sizeof(v->errp), "%s/stderr.txt", sl_test_dir());
  snprintf(v->out, sizeof(v->out), "%s/out", sl_test_dir());
  snprintf(v->ck, sizeof(v->ck), "%s/ckpt/guard", sl_test_dir());
  snprintf(v->bin, sizeof(v->bin), "%s/sluice", sl_test_bin_dir());
  char sink[4800];
  sl_error_t *err = NULL;
  if (kind != K_FILE) {
    sl_server_opts_t o;
    sl_server_opts_init(&o, kind == K_PG ? SL_SERVER_POSTGRES
                                         : SL_SERVER_MARIADB);
    SL_ASSERT_OK_E(sl_server_start(&o, &v->srv, &err), err);
  }
  if (kind == K_PG) {
    SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(v->srv), &v->pg, &err),
                   err);
    SL_ASSERT_OK_E(sl_pg_exec(v->pg, "CREATE TABLE t (seq bigint, split "
                              "integer)", NULL, &err), err);
    snprintf(sink, sizeof(sink), "{type: postgres, uid: out, conninfo: "
             "\"%s\", table: t, mode: insert, delivery: exactly-once}",
             sl_server_conninfo(v->srv));
  } else if (kind == K_MY) {
    SL_ASSERT_OK_E(sl_my_connect(v->srv, 0, &v->my, &err), err);
    SL_ASSERT_OK_E(sl_my_exec(v->my, "USE sluice", NULL, &err), err);
    SL_ASSERT_OK_E(sl_my_exec(v->my, "CREATE TABLE t (seq BIGINT, split "
                              "INT) ENGINE=InnoDB", NULL, &err), err);
    snprintf(sink, sizeof(sink), "{type: mariadb, uid: out, host: "
             "127.0.0.1, port: %d, user: root, database: sluice, table: t, "
             "mode: insert, delivery: exactly-once}",
             sl_server_port(v->srv));
  } else {
    snprintf(sink, sizeof(sink), "{type: file, uid: out, path: %s, "
             "delivery: exactly-once, parallelism: 2}", v->out);
  }
  char text[16384];
  snprintf(text, sizeof(text),
           "name: guard\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 20, retain: 5}\n"
           "source: {type: generator, uid: gen, seed: 3, count: %d, "
           "splits: 2, rate: 40000, columns: [seq, split]}\n"
           "sink: %s\n",
           sl_test_dir(), COUNT, sink);
  sl_test_write_file(v->pipeline, text);
}

static void teardown(env_t *v) {
  if (v->pg) PQfinish(v->pg);
  if (v->my) mysql_close(v->my);
  sl_server_destroy(v->srv);
}

/* Run sluice run PIPELINE with extra arguments; returns the exit status
 * (fails the test on a signal) and leaves stderr in v->errp. */
static int run(env_t *v, const char *inject, const char *a1, const char *a2,
               const char *a3) {
  const char *argv[] = {v->bin, "run", v->pipeline, "--quiet", a1, a2, a3,
                        NULL};
  unlink(v->errp);
  return sl_test_wait(sl_test_spawn(argv, inject, v->errp, 0));
}

static int exit_code(env_t *v, int st) {
  if (!WIFEXITED(st)) {
    char *e = sl_test_read_file(v->errp, NULL);
    SL_TEST_FAIL("sluice did not exit (status %d):\n%s", st, e ? e : "");
  }
  return WEXITSTATUS(st);
}

static void expect_exit(env_t *v, int st, int want, const char *what) {
  if (exit_code(v, st) != want) {
    char *e = sl_test_read_file(v->errp, NULL);
    SL_TEST_FAIL("%s: exit %d, expected %d:\n%s", what, WEXITSTATUS(st), want,
                 e ? e : "");
  }
}

/* The oldest and newest completed checkpoints kept. */
static void chk_range(env_t *v, uint64_t *lo, uint64_t *hi) {
  DIR *d = opendir(v->ck);
  SL_ASSERT_TRUE(d != NULL);
  *lo = UINT64_MAX;
  *hi = 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned long long id;
    char m[4800];
    if (sscanf(e->d_name, "chk-%llu", &id) != 1) continue;
    snprintf(m, sizeof(m), "%s/%s/_metadata", v->ck, e->d_name);
    if (access(m, F_OK) != 0) continue;
    n++;
    if (id < *lo) *lo = id;
    if (id > *hi) *hi = id;
  }
  closedir(d);
  if (n < 2) SL_TEST_FAIL("%d completed checkpoints kept, need 2", n);
}

/* The newest committed checkpoint as the sink's own proof names it. */
static uint64_t committed_max(env_t *v) {
  switch (v->kind) {
  case K_PG:
    return (uint64_t)pg_int(v->pg, "SELECT max(checkpoint) FROM "
                                   "sluice_sink_commits");
  case K_MY:
    return (uint64_t)my_int(v->my, "SELECT MAX(checkpoint_id) FROM "
                                   "sluice_xa_commits");
  case K_FILE: {
    /* part-out-<s>-<epoch>-<n>.csv: epoch E, committed after E */
    DIR *d = opendir(v->out);
    uint64_t k = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      unsigned s;
      unsigned long long ep, n;
      if (sscanf(e->d_name, "part-out-%u-%llu-%llu", &s, &ep, &n) == 3 &&
          ep + 1 > k)
        k = ep + 1;
    }
    if (d) closedir(d);
    return k;
  }
  }
  return 0;
}

static void older_checkpoint_refused(kind_t kind) {
  env_t v;
  setup(&v, kind);
  expect_exit(&v, run(&v, NULL, NULL, NULL, NULL), 0, "first run");
  SL_ASSERT_EQ_INT(rows(&v), COUNT);
  uint64_t c, f;
  chk_range(&v, &c, &f);
  uint64_t k = committed_max(&v);
  SL_ASSERT_TRUE(k > c && k <= f + 1);
  int64_t n_markers = markers(&v);
  SL_ASSERT_EQ_INT(prepared(&v), 0);

  /* The checkpoint just before the newest, C2: the epoch after it is named
   * C2 and was committed by a later checkpoint, so whenever that epoch
   * had rows the restore must be refused, although no epoch id exceeds
   * C2 (a check of epoch ids would let it through). */
  uint64_t c2 = 0;
  {
    DIR *d = opendir(v.ck);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      unsigned long long id;
      if (sscanf(e->d_name, "chk-%llu", &id) == 1 && id < f && id > c2)
        c2 = id;
    }
    if (d) closedir(d);
  }
  SL_ASSERT_TRUE(c2 >= c);
  char from2[4800];
  snprintf(from2, sizeof(from2), "%s/chk-%llu", v.ck, (unsigned long long)c2);
  int st2 = run(&v, NULL, "--from-checkpoint", from2, NULL);
  printf("restore of checkpoint %llu (committed up to %llu): exit %d\n",
         (unsigned long long)c2, (unsigned long long)k, exit_code(&v, st2));
  expect_exit(&v, st2, k > c2 ? 1 : 0, "restore of the second newest");
  if (k > c2) {
    SL_ASSERT_EQ_INT(rows(&v), COUNT);
    SL_ASSERT_EQ_INT(markers(&v), n_markers);
  }
  n_markers = markers(&v);
  SL_ASSERT_EQ_INT(prepared(&v), 0);

  /* Older checkpoint: refused, nothing touched. */
  char from[4800];
  snprintf(from, sizeof(from), "%s/chk-%llu", v.ck, (unsigned long long)c);
  expect_exit(&v, run(&v, NULL, "--from-checkpoint", from, NULL), 1,
              "restore of an older checkpoint");
  char *e = sl_test_read_file(v.errp, NULL);
  char want[300];
  snprintf(want, sizeof(want), "sink 'out' already committed checkpoint "
           "%llu > %llu; restoring checkpoint %llu re-emits output",
           (unsigned long long)k, (unsigned long long)c,
           (unsigned long long)c);
  const char *proof = kind == K_PG   ? "sluice_sink_commits"
                      : kind == K_MY ? "sluice_xa_commits"
                                     : "finished part file";
  if (!strstr(e, want) || !strstr(e, "--allow-duplicate-sink-output") ||
      !strstr(e, proof))
    SL_TEST_FAIL("expected \"%s\" with the flag and %s in:\n%s", want, proof,
                 e);
  free(e);
  SL_ASSERT_EQ_INT(rows(&v), COUNT);
  SL_ASSERT_EQ_INT(markers(&v), n_markers);
  SL_ASSERT_EQ_INT(prepared(&v), 0);

  /* Allowed: runs, and emits the rows after C again. */
  expect_exit(&v, run(&v, NULL, "--from-checkpoint", from,
                      "--allow-duplicate-sink-output"),
              0, "allowed restore");
  e = sl_test_read_file(v.errp, NULL);
  SL_ASSERT_TRUE(strstr(e, "allowed by --allow-duplicate-sink-output") !=
                 NULL);
  free(e);
  int64_t n_dup = rows(&v);
  SL_ASSERT_TRUE(n_dup > COUNT);
  SL_ASSERT_TRUE(markers(&v) > n_markers);
  SL_ASSERT_EQ_INT(prepared(&v), 0);

  /* The newest checkpoint: fine, and nothing more is emitted. */
  expect_exit(&v, run(&v, NULL, "--resume", NULL, NULL), 0, "resume");
  SL_ASSERT_EQ_INT(rows(&v), n_dup);
  SL_ASSERT_EQ_INT(prepared(&v), 0);
  teardown(&v);
}

SL_TEST(pg_older_checkpoint_refused) { older_checkpoint_refused(K_PG); }
SL_TEST(mariadb_older_checkpoint_refused) { older_checkpoint_refused(K_MY); }
SL_TEST(file_older_checkpoint_refused) { older_checkpoint_refused(K_FILE); }

/* The flag belongs to run: validate refuses it as a usage error. */
SL_TEST(validate_refuses_the_flag) {
  env_t v;
  setup(&v, K_FILE);
  const char *argv[] = {v.bin, "validate", v.pipeline,
                        "--allow-duplicate-sink-output", NULL};
  int st = sl_test_wait(sl_test_spawn(argv, NULL, v.errp, 0));
  expect_exit(&v, st, 2, "validate --allow-duplicate-sink-output");
  char *e = sl_test_read_file(v.errp, NULL);
  SL_ASSERT_TRUE(strstr(e, "validate takes only --set and --connect") !=
                 NULL);
  free(e);
  teardown(&v);
}

/* --metrics-json "sinks" after checkpoint 2 of the run aborted and the
 * process was killed right after the sink's second successful commit,
 * before it dropped that committable: the resumed run commits it again
 * (already_committed 1), commits the rest (every pending committable is
 * gone at the end), and loses nothing.  Sink parallelism 1. */
SL_TEST(pg_metrics_after_aborted_checkpoint_and_kill) {
  env_t v;
  setup(&v, K_PG);
  char text[16384];
  snprintf(text, sizeof(text),
           "name: guard\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 20, retain: 5}\n"
           "source: {type: generator, uid: gen, seed: 3, count: %d, "
           "splits: 2, rate: 20000, columns: [seq, split]}\n"
           "sink: {type: postgres, uid: out, conninfo: \"%s\", table: t, "
           "mode: insert, delivery: exactly-once, parallelism: 1}\n",
           sl_test_dir(), COUNT, sl_server_conninfo(v.srv));
  sl_test_write_file(v.pipeline, text);
  int st = run(&v, "coordinator.before_metadata_rename=fail:2,"
               "sink.after_commit_ok=kill:2", NULL, NULL, NULL);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
    char *e = sl_test_read_file(v.errp, NULL);
    SL_TEST_FAIL("expected a kill at sink.after_commit_ok, status %d:\n%s",
                 st, e ? e : "");
  }
  char mj[4500];
  snprintf(mj, sizeof(mj), "%s/metrics.json", sl_test_dir());
  expect_exit(&v, run(&v, NULL, "--resume", "--metrics-json", mj), 0,
              "resume");
  SL_ASSERT_EQ_INT(rows(&v), COUNT);
  SL_ASSERT_EQ_INT(prepared(&v), 0);
  json_error_t je;
  json_t *root = json_load_file(mj, 0, &je);
  if (root == NULL) SL_TEST_FAIL("%s: %s", mj, je.text);
  json_t *sinks = json_object_get(root, "sinks");
  SL_ASSERT_TRUE(json_is_array(sinks));
  SL_ASSERT_EQ_INT(json_array_size(sinks), 1);
  json_t *s = json_array_get(sinks, 0);
  SL_ASSERT_EQ_STR(json_string_value(json_object_get(s, "uid")), "out");
  int64_t already = json_integer_value(json_object_get(s, "already_committed"));
  int64_t attempts = json_integer_value(json_object_get(s, "commit_attempts"));
  int64_t ok = json_integer_value(json_object_get(s, "committed"));
  SL_ASSERT_EQ_INT(already, 1);
  SL_ASSERT_TRUE(ok >= 1); /* at least the final checkpoint's epoch */
  SL_ASSERT_EQ_INT(attempts, ok + already);
  SL_ASSERT_EQ_INT(json_integer_value(json_object_get(s, "lost")), 0);
  SL_ASSERT_EQ_INT(json_integer_value(json_object_get(s, "retries")), 0);
  SL_ASSERT_EQ_INT(json_integer_value(json_object_get(s, "pending")), 0);
  SL_ASSERT_EQ_INT(
      json_integer_value(json_object_get(s, "oldest_pending_age_ns")), 0);
  SL_ASSERT_TRUE(json_is_integer(json_object_get(s, "lingering_aborted")));
  json_decref(root);
  teardown(&v);
}
