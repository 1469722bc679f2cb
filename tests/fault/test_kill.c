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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_test.h"


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
  pid_t pid = sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_APPEND);
  if (delay_us > 0) {
    /* The kill moment is random; correctness must not depend on it. */
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
  }
  return sl_test_wait(pid);
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
  /* A resumed run appends to the file, so final rows written after the
   * checkpoint it restored appear again: every row must be right, and
   * every key there. */
  while (fscanf(fp, "%lld,%lld,%lld\n", &k, &n, &total) == 3) {
    SL_ASSERT_TRUE(k >= 0 && k < N_KEYS);
    if (n != want_count[k] || total != want_sum[k])
      SL_TEST_FAIL("key %lld: count %lld sum %lld, expected %lld and %lld", k,
                   n, total, (long long)want_count[k], (long long)want_sum[k]);
    if (!seen[k]) rows++;
    seen[k] = true;
  }
  SL_ASSERT_TRUE(feof(fp));
  fclose(fp);
  int want_rows = 0;
  for (int i = 0; i < N_KEYS; i++) want_rows += want_count[i] > 0;
  SL_ASSERT_EQ_INT(rows, want_rows);
}

/* The row count and the last +I/+U value of each key in a changelog file
 * "op,key,n,total"; fails on a line that does not parse. */
static void read_changelog(const char *path, int64_t n_keys, int64_t *count,
                           int64_t *sum, bool *seen) {
  FILE *fp = fopen(path, "r");
  if (fp == NULL) SL_TEST_FAIL("cannot open %s", path);
  memset(seen, 0, (size_t)n_keys * sizeof(bool));
  char line[256];
  long line_no = 0;
  while (fgets(line, sizeof(line), fp)) {
    line_no++;
    char op[3];
    long long k, n, total;
    if (sscanf(line, "%2[-+IUD],%lld,%lld,%lld", op, &k, &n, &total) != 4 ||
        k < 0 || k >= n_keys)
      SL_TEST_FAIL("%s:%ld: bad row '%s'", path, line_no, line);
    if (strcmp(op, "+I") != 0 && strcmp(op, "+U") != 0) continue;
    seen[k] = true;
    count[k] = n;
    sum[k] = total;
  }
  fclose(fp);
}

/* rm -r path; 0 when it is gone (or never existed). */
static int remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        continue;
      char sub[8192];
      snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
      if (remove_tree(sub) != 0) {
        closedir(d);
        return -1;
      }
    }
    closedir(d);
    return rmdir(path);
  }
  return unlink(path);
}

static int count_resumes(void) {
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *log = sl_test_read_file(ep, NULL);
  int n = 0;
  for (char *p = log; p && (p = strstr(p, "resuming from checkpoint")); p++)
    n++;
  free(log);
  return n;
}

static void check_changelog(const char *out, int64_t n_keys,
                            const int64_t *want_count,
                            const int64_t *want_sum) {
  int64_t *count = calloc((size_t)n_keys, sizeof(int64_t));
  int64_t *sum = calloc((size_t)n_keys, sizeof(int64_t));
  bool *seen = calloc((size_t)n_keys, sizeof(bool));
  read_changelog(out, n_keys, count, sum, seen);
  int64_t n_missing = 0;
  for (int64_t k = 0; k < n_keys; k++) {
    if (!seen[k]) {
      n_missing++;
      continue;
    }
    if (count[k] != want_count[k] || sum[k] != want_sum[k])
      SL_TEST_FAIL("key %lld: last row has count %lld sum %lld, expected "
                   "%lld and %lld", (long long)k, (long long)count[k],
                   (long long)sum[k], (long long)want_count[k],
                   (long long)want_sum[k]);
  }
  if (n_missing)
    SL_TEST_FAIL("%lld of %lld keys are missing from %s",
                 (long long)n_missing, (long long)n_keys, out);
  free(count);
  free(sum);
  free(seen);
}

/*
 * Issue 12: SIGKILL and --resume of a keyed `emit: updates` job into a
 * changelog file lost every key whose last update came before the restored
 * checkpoint (the file was truncated at each start), and a --resume after
 * the job had finished clobbered the complete output with its tail.  Keys
 * here live in short runs of lines, so most of them are finished long
 * before the end.
 */
SL_TEST(sigkill_resume_changelog_converges) {
  enum { CL_FILES = 2, CL_LINES = 120000, CL_RUN = 4 };
  const int64_t n_keys = (int64_t)CL_FILES * CL_LINES / CL_RUN;
  int64_t *want_count = calloc((size_t)n_keys, sizeof(int64_t));
  int64_t *want_sum = calloc((size_t)n_keys, sizeof(int64_t));
  char list[CL_FILES][4400];
  for (int f = 0; f < CL_FILES; f++) {
    snprintf(list[f], sizeof(list[f]), "%s/in-%d.csv", sl_test_dir(), f);
    FILE *fp = fopen(list[f], "w");
    for (int i = 0; i < CL_LINES; i++) {
      int64_t k = ((int64_t)f * CL_LINES + i) / CL_RUN;
      int64_t a = (int64_t)(next_rand() % 2001) - 1000;
      fprintf(fp, "%lld,%lld\n", (long long)k, (long long)a);
      want_count[k]++;
      want_sum[k] += a;
    }
    fclose(fp);
  }
  char pipeline[4300], text[16384], out[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out/changes.csv", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: changes\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 10, retain: 2}\n"
           "source:\n  type: file\n  uid: input\n"
           "  path: [%s, %s]\n"
           "  schema: [{name: key, type: int64}, {name: amount, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [key]\n"
           "      values: {n: count(), total: sum(amount)}\n"
           "      emit: updates\n    uid: totals\n"
           "sink: {type: file, path: %s, changelog: true}\n",
           sl_test_dir(), list[0], list[1], out);
  sl_test_write_file(pipeline, text);

  /* Kill at checkpoint injection points until a run resumed from a
   * checkpoint has been killed too: output from before the first kill and
   * output of a resumed run both have to survive.  How many checkpoints a
   * run takes before its input ends depends on the machine (slow fsyncs
   * mean few checkpoints), so a run may finish before it was killed often
   * enough: then the scenario starts again from nothing (no output, no
   * checkpoints, an empty log), and the kills counted all belong to the
   * history whose output is checked. */
  int n_killed = 0, n_fresh = 0;
  char ep[4300], ckdir[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  snprintf(ckdir, sizeof(ckdir), "%s/ckpt", sl_test_dir());
  for (int r = 0; r < 200 && (n_killed < 3 || count_resumes() < 2); r++) {
    char inject[160];
    const char *p = points[next_rand() % (sizeof(points) / sizeof(points[0]))];
    snprintf(inject, sizeof(inject), "%s=kill:%u", p,
             (unsigned)(2 + next_rand() % 3));
    int st = run_sluice(pipeline, inject, 0);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      n_killed++;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      char *e = sl_test_read_file(ep, NULL);
      SL_TEST_FAIL("round %d: sluice exited with status %d:\n%s", r, st,
                   e ? e : "");
    } else if (n_killed < 3 || count_resumes() < 2) {
      SL_ASSERT_EQ_INT(remove_tree(ckdir), 0);
      SL_ASSERT_TRUE(unlink(out) == 0 || errno == ENOENT);
      sl_test_write_file(ep, "");
      n_killed = 0;
      n_fresh++;
    }
  }
  if (n_fresh) printf("%d run(s) finished before their kills; started "
                      "again\n", n_fresh);
  SL_ASSERT_TRUE(n_killed >= 3);
  SL_ASSERT_TRUE(count_resumes() >= 2);
  int st = run_sluice(pipeline, NULL, 0);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  check_changelog(out, n_keys, want_count, want_sum);

  /* The job has finished; --resume restores its newest checkpoint and runs
   * the tail again.  The complete output stays. */
  int before = count_resumes();
  st = run_sluice(pipeline, NULL, 0);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  SL_ASSERT_EQ_INT(count_resumes(), before + 1);
  check_changelog(out, n_keys, want_count, want_sum);
  free(want_count);
  free(want_sum);
}

/*
 * The file sink buffers rows.  What a checkpoint covers must be in the file
 * when the checkpoint completes, or a kill right after it loses those rows
 * for good (the resumed run starts after them).  A slow generator keeps the
 * output far below the buffer size; the kill comes right after the first
 * checkpoint's metadata is renamed into place.
 */
SL_TEST(sigkill_after_checkpoint_keeps_buffered_rows) {
  enum { N = 600 };
  char pipeline[4300], text[8192], out[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out.csv", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: buffered\nparallelism: 1\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 50}\n"
           "source: {type: generator, count: %d, rate: 2000, splits: 1,\n"
           "         columns: [seq]}\n"
           "sink: {type: file, path: %s}\n",
           sl_test_dir(), N, out);
  sl_test_write_file(pipeline, text);
  int st = run_sluice(pipeline, "coordinator.after_metadata_rename=kill:1", 0);
  SL_ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  st = run_sluice(pipeline, NULL, 0);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  SL_ASSERT_EQ_INT(count_resumes(), 1);
  static bool seen[N];
  FILE *fp = fopen(out, "r");
  SL_ASSERT_TRUE(fp != NULL);
  long long seq;
  while (fscanf(fp, "%lld\n", &seq) == 1) {
    SL_ASSERT_TRUE(seq >= 0 && seq < N);
    seen[seq] = true;
  }
  SL_ASSERT_TRUE(feof(fp));
  fclose(fp);
  for (int i = 0; i < N; i++)
    if (!seen[i]) SL_TEST_FAIL("row %d is missing from %s", i, out);
}

/*
 * A kill in the middle of a write can leave a partly written last row (here
 * one whose quoted field holds a line end).  A resumed run cuts it before
 * appending, so no torn row sits in the middle of the output, and says so.
 */
SL_TEST(resume_cuts_partly_written_row) {
  enum { N = 400 };
  char pipeline[4300], text[8192], out[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out.csv", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: torn\nparallelism: 1\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 30}\n"
           "source: {type: generator, count: %d, rate: 2000, splits: 1,\n"
           "         columns: [seq]}\n"
           "sink: {type: file, path: %s}\n",
           sl_test_dir(), N, out);
  sl_test_write_file(pipeline, text);
  int st = run_sluice(pipeline, NULL, 0);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  FILE *fp = fopen(out, "a");
  SL_ASSERT_TRUE(fp != NULL);
  fputs("\"12\n3", fp); /* torn inside a quoted field */
  fclose(fp);
  st = run_sluice(pipeline, NULL, 0);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  SL_ASSERT_EQ_INT(count_resumes(), 1);
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *log = sl_test_read_file(ep, NULL);
  SL_ASSERT_TRUE(log && strstr(log, "ended in a partly written row"));
  free(log);
  static bool seen[N];
  fp = fopen(out, "r");
  SL_ASSERT_TRUE(fp != NULL);
  char line[64];
  while (fgets(line, sizeof(line), fp)) {
    char *end;
    long long seq = strtoll(line, &end, 10);
    if (end == line || *end != '\n' || seq < 0 || seq >= N)
      SL_TEST_FAIL("bad line '%s' in %s", line, out);
    seen[seq] = true;
  }
  fclose(fp);
  for (int i = 0; i < N; i++)
    if (!seen[i]) SL_TEST_FAIL("row %d is missing from %s", i, out);
}
