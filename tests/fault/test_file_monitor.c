/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A monitored file source (sl_file_source_config_t.monitor_interval_ms)
 * picks up each new file exactly once, across an in-process restart and
 * across a restore in a new job.  Files hold rows (key, seq) whose seq
 * continues per key from file to file; the keyed checker of seq_job.h
 * fails on a duplicate or a gap in its restored state, and the final
 * counts are exact.  Files are written elsewhere and renamed into the
 * directory, as the source requires.  The test waits for observable
 * effects (records processed), never for time to pass.
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seq_job.h"

enum { K = 20, R = 50 }; /* keys, rows per key and file */

static void dir_path(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", sl_test_dir(), name);
}

/* File number f (0-based): seq f*R .. f*R+R-1 for every key, moved into
 * in/ by a rename once complete. */
static void add_file(int f) {
  char tmp[4300], fin[4300];
  snprintf(tmp, sizeof(tmp), "%s/f%d.tmp", sl_test_dir(), f);
  snprintf(fin, sizeof(fin), "%s/in/f%d.csv", sl_test_dir(), f);
  FILE *fp = fopen(tmp, "w");
  SL_ASSERT_TRUE(fp != NULL);
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) fprintf(fp, "%d,%d\n", k, f * R + r);
  SL_ASSERT_EQ_INT(fclose(fp), 0);
  SL_ASSERT_EQ_INT(rename(tmp, fin), 0);
}

static void wait_processed(int64_t n) {
  for (int i = 0; seq_processed() < n; i++) {
    if (i > 60000)
      SL_TEST_FAIL("timed out: %lld records processed, waiting for %lld",
                   (long long)seq_processed(), (long long)n);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static bool counts_are(int64_t c) {
  pthread_mutex_lock(&lock);
  bool ok = true;
  for (int k = 0; k < K; k++) ok &= out_count[k] == c;
  pthread_mutex_unlock(&lock);
  return ok;
}

static void wait_counts(int64_t c) {
  for (int i = 0; !counts_are(c); i++) {
    if (violations) SL_TEST_FAIL("%s", violation_msg);
    if (i > 60000) SL_TEST_FAIL("timed out waiting for counts %lld",
                                (long long)c);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static sl_job_t *monitor_job_n(const char *restore_from,
                               uint32_t max_restarts) {
  static char ckdir[4300];
  dir_path(ckdir, sizeof(ckdir), "ck");
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "monitor";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = ckdir;
  cfg.restore_from = restore_from;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = max_restarts;
  sl_field_t f[2] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                     {"seq", {SL_TYPE_INT64, 0, 0, false}}};
  sl_field_t of[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                      {"count", {SL_TYPE_INT64, 0, 0, false}},
                      {"sum", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema, *out_schema;
  SL_ASSERT_OK(sl_schema_create(f, 2, &schema, NULL));
  SL_ASSERT_OK(sl_schema_create(of, 3, &out_schema, NULL));
  static char in[4300];
  dir_path(in, sizeof(in), "in");
  const char *paths[] = {in};
  sl_file_source_config_t fc = {0};
  fc.paths = paths;
  fc.n_paths = 1;
  fc.format = SL_FORMAT_CSV;
  fc.schema = schema;
  fc.monitor_interval_ms = 5;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_file_source_create(&fc, &vt, &ctx, &err), err);
  SL_ASSERT_TRUE(vt->enumerator != NULL);
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "files", vt, ctx, schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {chk_open, chk_process, NULL, NULL, NULL, NULL};
  s = sl_stream_process(s, checker_uid, out_schema, &fns, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "upsert", &sink_vt, NULL));
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  (void)src_vt; /* seq_job.h's source is not used here */
  return job;
}

static sl_job_t *monitor_job(const char *restore_from) {
  return monitor_job_n(restore_from, 2);
}

static uint64_t ckpt(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(job, &id, &err), err);
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, id, 60000, NULL));
  return id;
}

static void stop(sl_job_t *job) {
  sl_job_cancel(job);
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_job_wait(job, &err), SL_ECANCELED);
  sl_error_destroy(err);
}

/*
 * f0, checkpoint 1, f1, checkpoint 2, then f2 with the checker failing in
 * its middle: the job restarts from checkpoint 2 in the same process.  f2
 * was assigned after checkpoint 2, so it goes back to the enumerator and is
 * read again from its start; f0 and f1 are not read again.
 */
SL_TEST(new_file_once_across_restart) {
  seq_reset();
  char in[4300];
  dir_path(in, sizeof(in), "in");
  SL_ASSERT_EQ_INT(mkdir(in, 0755), 0);
  add_file(0);
  sl_job_t *job = monitor_job(NULL);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_processed(K * R);
  ckpt(job);
  add_file(1);
  wait_processed(2 * K * R);
  ckpt(job);
  pthread_mutex_lock(&lock);
  fail_at = 2 * K * R + K * R / 2;
  pthread_mutex_unlock(&lock);
  add_file(2);
  wait_counts(3 * R);
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  /* f2's first half twice (before and after the restart), nothing else. */
  SL_ASSERT_EQ_INT(seq_processed(), 3 * K * R + K * R / 2 + 1);
  stop(job);
  SL_ASSERT_EQ_INT(violations, 0);
  sl_job_destroy(job);
}

/*
 * f0 and f1 are read and covered by checkpoint 2; the job stops; f2
 * appears while it is down; a new job restores checkpoint 2: it reads f2
 * once and neither f0 nor f1 again (the enumerator's state has seen them,
 * the readers' states no longer hold them).
 */
SL_TEST(new_file_once_across_restore) {
  seq_reset();
  char in[4300];
  dir_path(in, sizeof(in), "in");
  SL_ASSERT_EQ_INT(mkdir(in, 0755), 0);
  add_file(0);
  sl_job_t *job = monitor_job(NULL);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_processed(K * R);
  ckpt(job);
  add_file(1);
  wait_processed(2 * K * R);
  uint64_t id = ckpt(job);
  stop(job);
  sl_job_destroy(job);
  add_file(2);
  char from[4400];
  snprintf(from, sizeof(from), "%s/ck/monitor/chk-%llu", sl_test_dir(),
           (unsigned long long)id);
  pthread_mutex_lock(&lock);
  n_processed = 0;
  pthread_mutex_unlock(&lock);
  job = monitor_job(from);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_counts(3 * R);
  SL_ASSERT_EQ_INT(seq_processed(), K * R);
  /* A fourth file while it runs: read once too. */
  add_file(3);
  wait_counts(4 * R);
  SL_ASSERT_EQ_INT(seq_processed(), 2 * K * R);
  stop(job);
  SL_ASSERT_EQ_INT(violations, 0);
  sl_job_destroy(job);
}

/*
 * The monitored directory is removed while the reader waits for a new
 * file: the next listing fails, and the job fails (it does not wait for
 * good) with a message naming the directory, after the restart strategy's
 * restarts (each new enumerator's first listing fails alike).
 */
typedef struct jwait_s {
  sl_job_t *job;
  sl_error_t *err;
  int rc;
  atomic_bool is_done;
} jwait_t;

static void *jwait_main(void *arg) {
  jwait_t *w = arg;
  w->rc = sl_job_wait(w->job, &w->err);
  atomic_store(&w->is_done, true);
  return NULL;
}

SL_TEST(monitored_directory_removed_fails_the_job) {
  seq_reset();
  char in[4300], f0[4400];
  dir_path(in, sizeof(in), "in");
  SL_ASSERT_EQ_INT(mkdir(in, 0755), 0);
  add_file(0);
  sl_job_t *job = monitor_job_n(NULL, 1);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_processed(K * R);
  snprintf(f0, sizeof(f0), "%s/f0.csv", in);
  SL_ASSERT_EQ_INT(unlink(f0), 0);
  SL_ASSERT_EQ_INT(rmdir(in), 0);
  /* sl_job_wait returns within a minute (it hung before). */
  jwait_t w = {job, NULL, 0, false};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, jwait_main, &w), 0);
  for (int i = 0; !atomic_load(&w.is_done); i++) {
    if (i > 60000) SL_TEST_FAIL("the job did not fail within a minute");
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  pthread_join(th, NULL);
  sl_error_t *err = w.err;
  SL_ASSERT_EQ_INT(w.rc, -ENOENT);
  SL_ASSERT_TRUE(err != NULL);
  char want[9000];
  snprintf(want, sizeof(want), "operator 'files' (subtask 1 of 1): "
           "enumerator of source 'files': cannot list the monitored "
           "inputs: cannot open input '%s': No such file or directory", in);
  if (strcmp(sl_error_message(err), want) != 0)
    SL_TEST_FAIL("expected '%s', got '%s'", want, sl_error_message(err));
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  SL_ASSERT_EQ_INT(violations, 0);
  sl_job_destroy(job);
}
