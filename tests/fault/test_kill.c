/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole-process recovery: `sluice run --resume` of a checkpointed pipeline
 * is killed with SIGKILL again and again — at a random moment, or at a
 * named injection point chosen at random (SL_INJECT=point=kill:n) — and
 * restarted each time from the newest usable checkpoint.  After the rounds
 * a last run completes, and its output (one row per key, emitted when the
 * input ends) must equal the per-key count and sum the test computed from
 * the input files it wrote.  SL_KILL_ROUNDS sets the number of rounds
 * (default 20; a soak uses 500).
 */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_test.h"

extern char **environ;

enum { N_FILES = 4, LINES = 150000, N_KEYS = 997 };

static uint64_t rng = 0x5eed;
static uint64_t next_rand(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static const char *points[] = {
    "task.on_first_barrier",        "task.after_sync_snapshot",
    "task.after_barrier_forward",   "task.state_file_before_fsync",
    "task.async_before_ack",        "coordinator.before_metadata_rename",
    "coordinator.after_metadata_rename",
    "coordinator.before_complete_notify",
};

/* Start sluice; kill it after delay_us (if > 0); return the wait status. */
static int run_sluice(const char *pipeline, const char *inject,
                      long delay_us) {
  char bin[4096], errp[4300];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet", NULL};
  char envbuf[512];
  char *env[64];
  int n = 0;
  for (char **e = environ; *e && n < 60; e++)
    if (strncmp(*e, "SL_INJECT=", 10) != 0) env[n++] = *e;
  if (inject) {
    snprintf(envbuf, sizeof(envbuf), "SL_INJECT=%s", inject);
    env[n++] = envbuf;
  }
  env[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  pid_t pid;
  int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) SL_TEST_FAIL("cannot run sluice: %s", strerror(rc));
  if (delay_us > 0) {
    /* The kill moment is random; correctness must not depend on it. */
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) SL_TEST_FAIL("waitpid failed");
  return status;
}

SL_TEST(sigkill_rounds_then_exact_result) {
  const char *env = getenv("SL_KILL_ROUNDS");
  int rounds = env ? atoi(env) : 20;
  /* The input, and the expected result computed from it here. */
  static int64_t want_count[N_KEYS], want_sum[N_KEYS];
  char list[8][4400];
  for (int f = 0; f < N_FILES; f++) {
    snprintf(list[f], sizeof(list[f]), "%s/in-%d.csv", sl_test_dir(), f);
    FILE *fp = fopen(list[f], "w");
    for (int i = 0; i < LINES; i++) {
      int64_t k = (int64_t)(next_rand() % N_KEYS);
      int64_t a = (int64_t)(next_rand() % 2001) - 1000;
      fprintf(fp, "%lld,%lld\n", (long long)k, (long long)a);
      want_count[k]++;
      want_sum[k] += a;
    }
    fclose(fp);
  }
  char pipeline[4300], text[32768], out[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out/result.csv", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: kill\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 15, retain: 2}\n"
           "source:\n  type: file\n  uid: input\n"
           "  path: [%s, %s, %s, %s]\n"
           "  schema: [{name: key, type: int64}, {name: amount, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [key]\n"
           "      values: {n: count(), total: sum(amount)}\n"
           "      emit: final\n    uid: totals\n"
           "sink: {type: file, path: %s}\n",
           sl_test_dir(), list[0], list[1], list[2], list[3], out);
  sl_test_write_file(pipeline, text);

  int n_killed = 0, n_completed = 0, n_point = 0;
  for (int r = 0; r < rounds; r++) {
    char inject[160];
    const char *inj = NULL;
    long delay = 0;
    if (r % 2 == 1) {
      const char *p = points[next_rand() % (sizeof(points) / sizeof(points[0]))];
      snprintf(inject, sizeof(inject), "%s=kill:%u", p,
               (unsigned)(1 + next_rand() % 2));
      inj = inject;
    } else {
      delay = 2000 + (long)(next_rand() % 60000);
    }
    int st = run_sluice(pipeline, inj, delay);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      n_killed++;
      if (inj) n_point++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      n_completed++;
    } else {
      char ep[4300];
      snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
      char *e = sl_test_read_file(ep, NULL);
      SL_TEST_FAIL("round %d: sluice exited with status %d:\n%s", r, st,
                   e ? e : "");
    }
  }
  /* The last run completes. */
  int st = run_sluice(pipeline, NULL, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char ep[4300];
    snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
    char *e = sl_test_read_file(ep, NULL);
    SL_TEST_FAIL("final run failed with status %d:\n%s", st, e ? e : "");
  }
  /* Runs after the first resumed from a checkpoint, not from scratch. */
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *log = sl_test_read_file(ep, NULL);
  int n_resumed = 0;
  for (char *p = log; p && (p = strstr(p, "resuming from checkpoint")); p++)
    n_resumed++;
  free(log);
  printf("%d rounds: %d killed (%d at injection points), %d completed, "
         "%d resumed from a checkpoint\n",
         rounds, n_killed, n_point, n_completed, n_resumed);
  SL_ASSERT_TRUE(n_killed > 0);
  SL_ASSERT_TRUE(n_resumed > 0);
  /* Compare the output with the expected totals. */
  FILE *fp = fopen(out, "r");
  SL_ASSERT_TRUE(fp != NULL);
  static bool seen[N_KEYS];
  long long k, n, total;
  int rows = 0;
  while (fscanf(fp, "%lld,%lld,%lld\n", &k, &n, &total) == 3) {
    SL_ASSERT_TRUE(k >= 0 && k < N_KEYS);
    SL_ASSERT_TRUE(!seen[k]);
    seen[k] = true;
    if (n != want_count[k] || total != want_sum[k])
      SL_TEST_FAIL("key %lld: count %lld sum %lld, expected %lld and %lld", k,
                   n, total, (long long)want_count[k], (long long)want_sum[k]);
    rows++;
  }
  fclose(fp);
  int want_rows = 0;
  for (int i = 0; i < N_KEYS; i++) want_rows += want_count[i] > 0;
  SL_ASSERT_EQ_INT(rows, want_rows);
}
