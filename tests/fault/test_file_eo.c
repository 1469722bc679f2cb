/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exactly-once file sink (src/connectors/file/file_sink_2pc.c, F1-F4):
 * its commit answers on damaged or missing part files, recover, rolling
 * and buckets, the pipeline options, and a whole-process SIGKILL soak of
 * the running example (two generator splits of account deltas -> keyed
 * balance emitting updates -> files exactly once) killed at injection
 * points chosen by a seeded RNG: the finished files' changelog, applied in
 * epoch order, gives exactly the balances computed here from the same
 * generator, and no in-progress or pending file is left.  SL_EO_ROUNDS
 * sets the rounds (default 50).
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/inject.h"
#include "sl_balances.h"
#include "sl_test.h"
#include "sluice/sluice.h"


/* ---- helpers -------------------------------------------------------- */

static uint32_t count_matching(const char *dir, const char *prefix,
                               const char *suffix) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  uint32_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name), sl = strlen(suffix);
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && l >= sl &&
        strcmp(e->d_name + l - sl, suffix) == 0)
      n++;
  }
  closedir(d);
  return n;
}

static sl_schema_t *kv_schema(void) {
  sl_field_t f[2] = {{"k", {SL_TYPE_INT64, 0, 0, false}},
                     {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, 2, &s, NULL));
  return s;
}

/* A writer of the sink ctx at subtask 0 of 1, epoch 10. */
static void *open_writer(const sl_sink_vt_t *vt, void *ctx,
                         const sl_schema_t *schema) {
  sl_sink_init_t init = {0, 1, schema, "out", false, 0, "job", 10};
  void *w;
  sl_error_t *err = NULL;
  if (vt->writer_open(ctx, &init, &w, &err) != SL_OK)
    SL_TEST_FAIL("writer_open: %s", sl_error_message(err));
  return w;
}

static void write_kv(const sl_sink_vt_t *vt, void *w,
                     const sl_schema_t *schema, int64_t k, int64_t ts) {
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, schema));
  sl_row_builder_set_i64(&b, 0, k);
  sl_row_builder_set_i64(&b, 1, ts);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
  sl_error_t *err = NULL;
  if (vt->write(w, &row, &err) != SL_OK)
    SL_TEST_FAIL("write: %s", sl_error_message(err));
  sl_row_builder_close(&b);
}

static void *open_committer(const sl_sink_vt_t *vt, void *ctx, uint32_t j,
                            uint32_t p) {
  uint32_t owned[8];
  uint32_t n = 0;
  for (uint32_t i = j; i < 8; i += p) owned[n++] = i;
  sl_committer_init_t ci = {"job", "out", j, p, 0, 0, owned, n, 20};
  void *c;
  SL_ASSERT_OK(vt->committer_open(ctx, &ci, &c, NULL));
  return c;
}

static sl_commit_status_t commit(const sl_sink_vt_t *vt, void *c,
                                 const sl_bytes_t *b, char *msg, size_t n) {
  sl_commit_status_t st = SL_COMMIT_FATAL;
  sl_error_t *err = NULL;
  int rc = vt->commit(c, 10, 0, b->data, b->len, 1, &st, &err);
  if (rc != SL_OK) st = SL_COMMIT_FATAL;
  snprintf(msg, n, "%s", err ? sl_error_message(err) : "");
  sl_error_destroy(err);
  return st;
}

static const sl_sink_vt_t *make_sink(const char *dir, void **ctx,
                                     sl_file_bucket_t bucket,
                                     const char *field, uint64_t roll) {
  sl_file_sink_config_t cfg = {0};
  cfg.path = dir;
  cfg.delivery = SL_DELIVERY_EXACTLY_ONCE;
  cfg.bucket = bucket;
  cfg.bucket_field = field;
  cfg.roll_size = roll;
  const sl_sink_vt_t *vt;
  SL_ASSERT_OK(sl_file_sink_create(&cfg, &vt, ctx, NULL));
  SL_ASSERT_TRUE(sl_sink_is_transactional(vt));
  return vt;
}

/* ---- commit answers (F3) --------------------------------------------- */

SL_TEST(commit_ok_then_already_then_lost) {
  char dir[4200], p[4400], f[4400], msg[512];
  snprintf(dir, sizeof(dir), "%s/o", sl_test_dir());
  void *ctx;
  const sl_sink_vt_t *vt = make_sink(dir, &ctx, SL_FILE_BUCKET_NONE, NULL, 0);
  sl_schema_t *schema = kv_schema();
  void *w = open_writer(vt, ctx, schema);
  write_kv(vt, w, schema, 1, 0);
  write_kv(vt, w, schema, 2, 0);
  snprintf(p, sizeof(p), "%s/.part-out-0-10-0.csv.inprogress", dir);
  SL_ASSERT_TRUE(access(p, F_OK) == 0); /* in progress, hidden */
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(vt->prepare(w, 11, &b, NULL));
  snprintf(p, sizeof(p), "%s/.part-out-0-10-0.csv.pending", dir);
  snprintf(f, sizeof(f), "%s/part-out-0-10-0.csv", dir);
  SL_ASSERT_TRUE(access(p, F_OK) == 0);  /* pending */
  SL_ASSERT_TRUE(access(f, F_OK) != 0);  /* not visible yet */
  /* The next epoch is named 11. */
  write_kv(vt, w, schema, 3, 0);
  char p2[4400];
  snprintf(p2, sizeof(p2), "%s/.part-out-0-11-0.csv.inprogress", dir);
  SL_ASSERT_TRUE(access(p2, F_OK) == 0);
  void *c = open_committer(vt, ctx, 0, 1);
  /* A pending file longer than recorded is cut (F3). */
  FILE *fp = fopen(p, "a");
  fputs("garbage\n", fp);
  fclose(fp);
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_OK);
  char *text = sl_test_read_file(f, NULL);
  SL_ASSERT_EQ_STR(text, "1,1970-01-01T00:00:00.000000Z\n"
                         "2,1970-01-01T00:00:00.000000Z\n");
  free(text);
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_ALREADY);
  /* The finished file changed length: not provably this commit. */
  fp = fopen(f, "a");
  fputs("x\n", fp);
  fclose(fp);
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_LOST);
  if (!strstr(msg, "neither the pending part file"))
    SL_TEST_FAIL("message: %s", msg);
  unlink(f);
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_LOST);
  vt->committer_close(c);
  /* Closing the writer deletes the unprepared epoch's part. */
  SL_ASSERT_OK(vt->writer_close(w, false, NULL));
  SL_ASSERT_TRUE(access(p2, F_OK) != 0);
  sl_bytes_close(&b);
  sl_schema_unref(schema);
  vt->destroy(ctx);
}

SL_TEST(commit_of_a_short_pending_file_is_lost) {
  char dir[4200], p[4400], msg[512];
  snprintf(dir, sizeof(dir), "%s/o", sl_test_dir());
  void *ctx;
  const sl_sink_vt_t *vt = make_sink(dir, &ctx, SL_FILE_BUCKET_NONE, NULL, 0);
  sl_schema_t *schema = kv_schema();
  void *w = open_writer(vt, ctx, schema);
  write_kv(vt, w, schema, 1, 0);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(vt->prepare(w, 11, &b, NULL));
  snprintf(p, sizeof(p), "%s/.part-out-0-10-0.csv.pending", dir);
  SL_ASSERT_OK(truncate(p, 3));
  void *c = open_committer(vt, ctx, 0, 1);
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_LOST);
  if (!strstr(msg, "has 3 bytes, the checkpoint recorded"))
    SL_TEST_FAIL("message: %s", msg);
  /* A malformed committable is FATAL, never a silent skip. */
  sl_bytes_t bad;
  sl_bytes_init(&bad);
  sl_bytes_append(&bad, b.data, b.len - 1);
  SL_ASSERT_EQ_INT(commit(vt, c, &bad, msg, sizeof(msg)), SL_COMMIT_FATAL);
  vt->committer_close(c);
  SL_ASSERT_OK(vt->writer_close(w, true, NULL));
  sl_bytes_close(&b);
  sl_bytes_close(&bad);
  sl_schema_unref(schema);
  vt->destroy(ctx);
}

/* F4: recover deletes leftovers of owned subtasks only. */
SL_TEST(recover_deletes_owned_leftovers_only) {
  char dir[4200], p[4400];
  snprintf(dir, sizeof(dir), "%s/o", sl_test_dir());
  mkdir(dir, 0755);
  const char *files[] = {".part-out-0-5-0.csv.pending",
                         ".part-out-2-5-0.csv.inprogress",
                         ".part-out-1-5-0.csv.pending",
                         ".part-other-0-5-0.csv.pending",
                         "part-out-0-4-0.csv"};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
    sl_test_write_file(p, "x\n");
  }
  void *ctx;
  const sl_sink_vt_t *vt = make_sink(dir, &ctx, SL_FILE_BUCKET_NONE, NULL, 0);
  void *c = open_committer(vt, ctx, 0, 2); /* owns 0, 2, 4, 6 */
  SL_ASSERT_OK(vt->recover(c, NULL));
  vt->committer_close(c);
  bool want[] = {false, false, true, true, true};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
    if ((access(p, F_OK) == 0) != want[i])
      SL_TEST_FAIL("%s: expected %s", files[i], want[i] ? "kept" : "deleted");
  }
  vt->destroy(ctx);
}

/* Rolling by size and buckets by field and by event-time date. */
SL_TEST(rolls_by_size_and_buckets_by_field_and_date) {
  char dir[4200], p[4400];
  snprintf(dir, sizeof(dir), "%s/f", sl_test_dir());
  void *ctx;
  const sl_sink_vt_t *vt = make_sink(dir, &ctx, SL_FILE_BUCKET_FIELD, "k", 40);
  sl_schema_t *schema = kv_schema();
  void *w = open_writer(vt, ctx, schema);
  for (int i = 0; i < 6; i++) write_kv(vt, w, schema, i % 2, 0);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(vt->prepare(w, 11, &b, NULL));
  void *c = open_committer(vt, ctx, 0, 1);
  char msg[256];
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_OK);
  /* 3 rows of 23 bytes per bucket, rolled at 40 bytes: 2 parts each. */
  snprintf(p, sizeof(p), "%s/k=0", dir);
  SL_ASSERT_EQ_INT(count_matching(p, "part-out-0-10-", ".csv"), 2);
  snprintf(p, sizeof(p), "%s/k=1", dir);
  SL_ASSERT_EQ_INT(count_matching(p, "part-out-0-10-", ".csv"), 2);
  SL_ASSERT_EQ_INT(count_matching(p, ".", ".pending"), 0);
  vt->committer_close(c);
  SL_ASSERT_OK(vt->writer_close(w, true, NULL));
  vt->destroy(ctx);
  sl_bytes_close(&b);

  snprintf(dir, sizeof(dir), "%s/d", sl_test_dir());
  vt = make_sink(dir, &ctx, SL_FILE_BUCKET_DATE, "ts", 0);
  w = open_writer(vt, ctx, schema);
  write_kv(vt, w, schema, 1, 1700000000000000ll); /* 2023-11-14 */
  write_kv(vt, w, schema, 2, 1700100000000000ll); /* 2023-11-16 */
  sl_bytes_init(&b);
  SL_ASSERT_OK(vt->prepare(w, 11, &b, NULL));
  c = open_committer(vt, ctx, 0, 1);
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_OK);
  snprintf(p, sizeof(p), "%s/2023-11-14/part-out-0-10-0.csv", dir);
  SL_ASSERT_TRUE(access(p, F_OK) == 0);
  snprintf(p, sizeof(p), "%s/2023-11-16/part-out-0-10-1.csv", dir);
  SL_ASSERT_TRUE(access(p, F_OK) == 0);
  vt->committer_close(c);
  SL_ASSERT_OK(vt->writer_close(w, true, NULL));
  vt->destroy(ctx);
  sl_bytes_close(&b);

  /* A date bucket of a column that is not a timestamp: refused at open. */
  vt = make_sink(dir, &ctx, SL_FILE_BUCKET_DATE, "k", 0);
  sl_sink_init_t init = {0, 1, schema, "out", false, 0, "job", 10};
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(vt->writer_open(ctx, &init, &w, &err), SL_EINVAL);
  if (!strstr(sl_error_message(err), "'k' is not one"))
    SL_TEST_FAIL("message: %s", sl_error_message(err));
  sl_error_destroy(err);
  vt->destroy(ctx);
  sl_schema_unref(schema);
}

/* Rolling by time: a part open for roll_interval_ms closes at the next
 * write.  The pause guarantees the interval has passed (monotonic clock);
 * nothing here depends on hitting a window. */
SL_TEST(rolls_by_time_at_the_next_write) {
  char dir[4200], p[4400];
  snprintf(dir, sizeof(dir), "%s/t", sl_test_dir());
  sl_file_sink_config_t cfg = {0};
  cfg.path = dir;
  cfg.delivery = SL_DELIVERY_EXACTLY_ONCE;
  cfg.roll_interval_ms = 1000;
  void *ctx;
  const sl_sink_vt_t *vt;
  SL_ASSERT_OK(sl_file_sink_create(&cfg, &vt, &ctx, NULL));
  sl_schema_t *schema = kv_schema();
  void *w = open_writer(vt, ctx, schema);
  write_kv(vt, w, schema, 1, 0);
  struct timespec pause = {1, 100000000};
  while (nanosleep(&pause, &pause) != 0) {
  }
  write_kv(vt, w, schema, 2, 0); /* the part of rows 1 and 2 closes */
  write_kv(vt, w, schema, 3, 0); /* a new part, young */
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(vt->prepare(w, 11, &b, NULL));
  void *c = open_committer(vt, ctx, 0, 1);
  char msg[256];
  SL_ASSERT_EQ_INT(commit(vt, c, &b, msg, sizeof(msg)), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(count_matching(dir, "part-out-0-10-", ".csv"), 2);
  snprintf(p, sizeof(p), "%s/part-out-0-10-0.csv", dir);
  char *first = sl_test_read_file(p, NULL);
  snprintf(p, sizeof(p), "%s/part-out-0-10-1.csv", dir);
  char *second = sl_test_read_file(p, NULL);
  SL_ASSERT_TRUE(first != NULL && second != NULL);
  if (strncmp(first, "1,", 2) != 0 || strstr(first, "\n2,") == NULL ||
      strstr(first, "3,") != NULL || strncmp(second, "3,", 2) != 0 ||
      strstr(second, "\n") != second + strlen(second) - 1)
    SL_TEST_FAIL("parts: [%s] [%s]", first, second);
  free(first);
  free(second);
  vt->committer_close(c);
  SL_ASSERT_OK(vt->writer_close(w, true, NULL));
  vt->destroy(ctx);
  sl_bytes_close(&b);
  sl_schema_unref(schema);
}

/* ---- the running example, through sluice, killed again and again ------ */

enum { KEYS = 50, COUNT = 40000 };

static int spawn_sluice(const char *const *argv, const char *inject,
                        const char *errp) {
  return sl_test_wait(sl_test_spawn(argv, inject, errp, 0));
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

/* The independent computation: the same generator, summed per key. */
static int64_t want[KEYS];

static void expected_balances(void) {
  sl_balances_t b;
  sl_balances_compute(COUNT, KEYS, false, &b);
  for (int k = 0; k < KEYS; k++) want[k] = b.bal[k];
  sl_balances_free(&b);
}

typedef struct part_name_s {
  unsigned long long epoch;
  unsigned n;
  char name[256];
} part_name_t;

static int part_cmp(const void *a, const void *b) {
  const part_name_t *x = a, *y = b;
  if (x->epoch != y->epoch) return x->epoch < y->epoch ? -1 : 1;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* Apply the finished files' changelog in epoch order: +I must find no
 * value, +U and -U one; then the balances and the row count must be
 * exact. */
static void check_output(const char *dir) {
  static part_name_t parts[4096];
  uint32_t n = 0, subtasks = 0;
  DIR *d = opendir(dir);
  SL_ASSERT_TRUE(d != NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') {
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        SL_TEST_FAIL("leftover hidden file %s", e->d_name);
      continue;
    }
    SL_ASSERT_TRUE(n < 4096);
    unsigned s;
    if (sscanf(e->d_name, "part-balances_out-%u-%llu-%u.csv", &s,
               &parts[n].epoch, &parts[n].n) != 3)
      SL_TEST_FAIL("unexpected file %s", e->d_name);
    if (s < 32) subtasks |= 1u << s;
    snprintf(parts[n].name, sizeof(parts[n].name), "%s", e->d_name);
    n++;
  }
  closedir(d);
  SL_ASSERT_EQ_INT(subtasks, 3); /* both sink subtasks wrote parts */
  /* A key's rows come from one aggregate subtask, forwarded to one sink
   * subtask: epoch order is each key's order. */
  qsort(parts, n, sizeof(parts[0]), part_cmp);
  static int64_t bal[KEYS];
  static bool has[KEYS];
  memset(bal, 0, sizeof(bal));
  memset(has, 0, sizeof(has));
  uint64_t rows = 0;
  for (uint32_t i = 0; i < n; i++) {
    char p[4600];
    snprintf(p, sizeof(p), "%s/%s", dir, parts[i].name);
    FILE *fp = fopen(p, "r");
    char line[256];
    while (fgets(line, sizeof(line), fp)) {
      char op[3];
      long long k, v;
      if (sscanf(line, "%2[-+IUD],%lld,%lld", op, &k, &v) != 3 || k < 0 ||
          k >= KEYS)
        SL_TEST_FAIL("%s: bad row '%s'", p, line);
      rows++;
      if (op[0] == '-') {
        if (!has[k] || bal[k] != v)
          SL_TEST_FAIL("%s: %s of key %lld value %lld, but the key holds "
                       "%lld (duplicate or lost update)", p, op, k, v,
                       has[k] ? (long long)bal[k] : -1ll);
        has[k] = false;
      } else if (strcmp(op, "+I") == 0) {
        if (has[k])
          SL_TEST_FAIL("%s: +I of key %lld over a value (duplicate)", p, k);
        has[k] = true;
        bal[k] = v;
      } else {
        if (!has[k])
          SL_TEST_FAIL("%s: %s of key %lld without a value (lost +I)", p, op,
                       k);
        bal[k] = v;
      }
    }
    fclose(fp);
  }
  expected_balances();
  for (int k = 0; k < KEYS; k++)
    if (!has[k] || bal[k] != want[k])
      SL_TEST_FAIL("key %d: balance %lld, expected %lld", k,
                   (long long)bal[k], (long long)want[k]);
  /* emit: updates writes +I for a key's first delta and +U for each
   * later one (no delta is 0, so none is suppressed): a duplicated or lost
   * epoch changes the count even where the last value agrees. */
  SL_ASSERT_EQ_INT(rows, (uint64_t)COUNT);
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  return remove(p);
}

/* A cycle ended with a completed run: check it, then start a new cycle
 * from nothing, so that kills keep falling in the middle of a job. */
static void check_and_reset(const char *out, const char *ck) {
  check_output(out);
  nftw(out, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  nftw(ck, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

SL_TEST(sigkill_soak_running_example_exactly_once) {
  const char *env = getenv("SL_EO_ROUNDS");
  int rounds = env ? atoi(env) : 50;
  char pipeline[4300], text[8192], out[4300], bin[4300], errp[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/p.yaml", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: balances\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 10, retain: 2}\n"
           "source: {type: generator, uid: deltas, seed: 42, count: %d,\n"
           "         splits: 2, keys: %d, rate: 100000,\n"
           "         columns: [key, amount]}\n"
           "transforms:\n"
           "  - project: {account: key, amount: amount}\n"
           "  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount)}\n"
           "      emit: updates\n    uid: balances\n"
           "sink: {type: file, uid: balances-out, delivery: exactly-once,\n"
           "       path: %s, changelog: true, roll_size: 65536,\n"
           "       parallelism: 2}\n",
           sl_test_dir(), COUNT, KEYS, out);
  sl_test_write_file(pipeline, text);
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet", NULL};
  char ck[4300];
  snprintf(ck, sizeof(ck), "%s/ckpt", sl_test_dir());
  int n_killed = 0, n_completed = 0;
  for (int r = 0; r < rounds; r++) {
    const char *p = kill_points[next_rand() % (sizeof(kill_points) /
                                               sizeof(kill_points[0]))];
    char inject[200];
    snprintf(inject, sizeof(inject), "%s=kill:%u", p,
             (unsigned)(1 + next_rand() % 3));
    int st = spawn_sluice(argv, inject, errp);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      n_killed++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      n_completed++;
      check_and_reset(out, ck);
    } else {
      char *e = sl_test_read_file(errp, NULL);
      SL_TEST_FAIL("round %d (%s): sluice exited with status %d:\n%s", r,
                   inject, st, e ? e : "");
    }
  }
  int st = spawn_sluice(argv, NULL, errp);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char *e = sl_test_read_file(errp, NULL);
    SL_TEST_FAIL("final run failed with status %d:\n%s", st, e ? e : "");
  }
  printf("%d rounds: %d killed at injection points, %d completed (each "
         "checked)\n", rounds, n_killed, n_completed);
  SL_ASSERT_TRUE(n_killed > rounds / 2);
  check_output(out);
}

/* ---- pipeline options -------------------------------------------------- */

static void expect_invalid(const char *sink, const char *extra,
                           const char *want_msg) {
  char pipeline[4300], text[4096], bin[4300], errp[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/v.yaml", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/verr.txt", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: v\n%s"
           "source: {type: generator, count: 10, columns: [key, ts]}\n"
           "sink: %s\n", extra, sink);
  sl_test_write_file(pipeline, text);
  const char *argv[] = {bin, "validate", pipeline, NULL};
  int st = spawn_sluice(argv, NULL, errp);
  char *e = sl_test_read_file(errp, NULL);
  if (!WIFEXITED(st) || WEXITSTATUS(st) == 0 || !e || !strstr(e, want_msg))
    SL_TEST_FAIL("sink %s: status %d, expected '%s' in:\n%s", sink, st,
                 want_msg, e ? e : "");
  free(e);
}

SL_TEST(pipeline_refuses_bad_delivery_options) {
  char ck[4400];
  snprintf(ck, sizeof(ck), "checkpoint: {dir: %s/ck}\n", sl_test_dir());
  expect_invalid("{type: file, path: o, delivery: exactly-once}", "",
                 "sink.delivery: 'delivery: exactly-once' commits the output "
                 "when a checkpoint completes, and this pipeline has no "
                 "'checkpoint: {dir: ...}'");
  expect_invalid("{type: file, path: o, roll_size: 10}", "",
                 "'roll_size' is an option of 'delivery: exactly-once'");
  expect_invalid("{type: stdout, delivery: exactly-once}", ck,
                 "only a file sink has a 'delivery'");
  expect_invalid("{type: file, path: o, delivery: exactly-once, "
                 "bucket_by: date, bucket_field: key}",
                 ck, "'bucket_by: date' needs a timestamp column; 'key' is "
                     "not one");
  expect_invalid("{type: file, path: o, delivery: exactly-once, "
                 "bucket_by: field, bucket_field: nope}",
                 ck, "no column 'nope'");
  expect_invalid("{type: file, path: o, delivery: twice}", ck,
                 "sink.delivery");
}
