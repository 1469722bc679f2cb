/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint ids and the commit's failure paths (coordinator.c K2, K5;
 * ckpt_store.c S6).  Ids are never reused after a crash, not even before
 * the first checkpoint completes (two-phase-commit sinks name their
 * transactions by them); a stray chk-<huge> directory neither wraps the
 * next id nor stops checkpoints; a damaged high-water file is a clear
 * error; a failure after _metadata was renamed never deletes the
 * checkpoint.
 */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "seq_job.h"
#include "state/state.h"

static char warnings[8192];
static size_t warnings_len;

static void log_cb(sl_log_level_t level, const char *msg, void *user) {
  (void)user;
  if (level < SL_LOG_WARN) return;
  int n = snprintf(warnings + warnings_len, sizeof(warnings) - warnings_len,
                   "%s\n", msg);
  if (n > 0 && warnings_len + (size_t)n < sizeof(warnings))
    warnings_len += (size_t)n;
}

static sl_job_config_t config(void) {
  static char dir[4300];
  snprintf(dir, sizeof(dir), "%s/ckpt", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "ids";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  return cfg;
}

static const char *jobdir(void) {
  static char d[4400];
  snprintf(d, sizeof(d), "%s/ckpt/ids", sl_test_dir());
  return d;
}

static bool exists(const char *rel) {
  char p[4600];
  snprintf(p, sizeof(p), "%s/%s", jobdir(), rel);
  struct stat st;
  return stat(p, &st) == 0;
}

/* Trigger one checkpoint (retrying while one is in flight); its result. */
static int checkpoint(sl_job_t *job, uint64_t *out_id) {
  sl_error_t *err = NULL;
  int rc;
  /* SL_ESTATE until the first attempt is attached. */
  while ((rc = sl_job_trigger_checkpoint(job, out_id, &err)) == SL_EAGAIN ||
         rc == SL_ESTATE) {
    sl_error_destroy(err);
    err = NULL;
  }
  if (rc != SL_OK)
    SL_TEST_FAIL("trigger failed: %s", sl_error_message(err));
  return sl_job_wait_checkpoint(job, *out_id, 20000, NULL);
}

static sl_job_t *start(void) {
  seq_reset();
  sl_job_config_t cfg = config();
  sl_job_t *job = seq_job(&cfg, 0);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_start(job, &err), err);
  set_gate(PER_SPLIT / 4);
  return job;
}

static void stop(sl_job_t *job) {
  sl_job_cancel(job);
  sl_error_t *err = NULL;
  sl_job_wait(job, &err);
  sl_error_destroy(err);
  sl_job_destroy(job);
}

/* K2: checkpoint 1 aborts (its directory is removed) and the process
 * "crashes" before any checkpoint completed; the next run must not hand
 * out id 1 again. */
SL_TEST(ids_are_not_reused_before_the_first_completion) {
  sl_inject_reset();
  sl_job_t *job = start();
  SL_ASSERT_OK(sl_inject_arm("task.async_before_ack", SL_INJECT_FAIL, 1,
                             true));
  uint64_t id;
  SL_ASSERT_NE_INT(checkpoint(job, &id), SL_OK);
  SL_ASSERT_EQ_INT(id, 1);
  stop(job);
  sl_inject_reset();
  SL_ASSERT_TRUE(!exists("chk-1")); /* the aborted one is gone */
  SL_ASSERT_TRUE(exists("_checkpoint_ids"));
  job = start();
  SL_ASSERT_OK(checkpoint(job, &id));
  SL_ASSERT_EQ_INT(id, 2);
  stop(job);
}

/* A stray chk-18446744073709551615 (or chk--1, which strtoull reads as
 * UINT64_MAX) must not wrap the next id to 0: it is ignored with a
 * warning naming it, and checkpoints complete. */
SL_TEST(a_stray_huge_checkpoint_directory_does_not_wrap_the_ids) {
  sl_log_set_callback(log_cb, NULL);
  char d[4600];
  SL_ASSERT_OK(sl__ckpt_mkdirs(jobdir(), NULL));
  snprintf(d, sizeof(d), "%s/chk-18446744073709551615", jobdir());
  SL_ASSERT_EQ_INT(mkdir(d, 0755), 0);
  snprintf(d, sizeof(d), "%s/chk--1", jobdir());
  SL_ASSERT_EQ_INT(mkdir(d, 0755), 0);
  snprintf(d, sizeof(d), "%s/chk-3", jobdir());
  SL_ASSERT_EQ_INT(mkdir(d, 0755), 0);
  sl_job_t *job = start();
  uint64_t id;
  SL_ASSERT_OK(checkpoint(job, &id));
  SL_ASSERT_EQ_INT(id, 4);
  SL_ASSERT_OK(checkpoint(job, &id));
  SL_ASSERT_EQ_INT(id, 5);
  stop(job);
  sl_log_set_callback(NULL, NULL);
  if (strstr(warnings, "chk-18446744073709551615") == NULL)
    SL_TEST_FAIL("expected a warning naming the stray directory, got:\n%s",
                 warnings);
  /* Neither stray directory is touched by retention. */
  SL_ASSERT_TRUE(exists("chk-18446744073709551615"));
  SL_ASSERT_TRUE(exists("chk--1"));
}

/* The high-water mark counts even when the directories are gone. */
SL_TEST(ids_continue_above_the_high_water_mark) {
  SL_ASSERT_OK(sl__ckpt_mkdirs(jobdir(), NULL));
  SL_ASSERT_OK(sl__ckpt_write_high_water(jobdir(), 41, false, NULL));
  uint64_t next = 0, hw = 0;
  SL_ASSERT_OK(sl__ckpt_next_id(jobdir(), &next, &hw, NULL));
  SL_ASSERT_EQ_INT(next, 42);
  SL_ASSERT_EQ_INT(hw, 41);
  sl_job_t *job = start();
  uint64_t id;
  SL_ASSERT_OK(checkpoint(job, &id));
  SL_ASSERT_EQ_INT(id, 42);
  stop(job);
  SL_ASSERT_OK(sl__ckpt_read_high_water(jobdir(), &hw, NULL));
  SL_ASSERT_EQ_INT(hw, 42); /* recorded before the id was used */
}

SL_TEST(a_damaged_high_water_file_is_a_clear_error) {
  SL_ASSERT_OK(sl__ckpt_mkdirs(jobdir(), NULL));
  char p[4600];
  snprintf(p, sizeof(p), "%s/_checkpoint_ids", jobdir());
  sl_test_write_file(p, "not a high-water mark at all...");
  sl_job_config_t cfg = config();
  sl_job_t *job;
  sl_error_t *err = NULL;
  int rc = sl_job_create(&cfg, &job, &err);
  if (rc == SL_OK) {
    sl_job_destroy(job);
    SL_TEST_FAIL("a job started over a damaged _checkpoint_ids");
  }
  SL_ASSERT_EQ_INT(rc, SL_ECORRUPT);
  if (strstr(sl_error_message(err), "_checkpoint_ids") == NULL)
    SL_TEST_FAIL("the error does not name the file: %s",
                 sl_error_message(err));
  sl_error_destroy(err);
}

/* K5: a failure after the rename of _metadata (here injected after the
 * directory fsyncs) leaves a FAILED checkpoint whose files are kept and
 * read back; it is not reported complete. */
SL_TEST(a_failure_after_the_rename_keeps_the_checkpoint) {
  sl_inject_reset();
  sl_job_t *job = start();
  uint64_t id;
  SL_ASSERT_OK(checkpoint(job, &id));
  SL_ASSERT_OK(sl_inject_arm("coordinator.after_metadata_rename",
                             SL_INJECT_FAIL, 1, false));
  set_gate(PER_SPLIT / 2);
  int rc = checkpoint(job, &id);
  SL_ASSERT_EQ_INT(id, 2);
  SL_ASSERT_EQ_INT(rc, SL_EFAILED);
  stop(job);
  sl_inject_reset();
  char d[4600];
  snprintf(d, sizeof(d), "%s/chk-2", jobdir());
  sl_ckpt_meta_t m;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__ckpt_read_meta(d, &m, &err), err);
  SL_ASSERT_OK_E(sl__ckpt_check_files(&m, &err), err);
  SL_ASSERT_EQ_INT(m.id, 2);
  sl__ckpt_meta_clear(&m);
}

/* S6: removal takes _metadata first; a directory whose other files
 * cannot all be removed is no restore point any more. */
SL_TEST(removal_takes_the_metadata_first) {
  sl_inject_reset();
  sl_job_t *job = start();
  uint64_t id;
  SL_ASSERT_OK(checkpoint(job, &id));
  stop(job);
  char d[4600], sub[4700];
  snprintf(d, sizeof(d), "%s/chk-%llu", jobdir(), (unsigned long long)id);
  /* A subdirectory cannot be unlinked: the removal must fail, say so, and
   * still have removed _metadata. */
  snprintf(sub, sizeof(sub), "%s/zz-subdir", d);
  SL_ASSERT_EQ_INT(mkdir(sub, 0755), 0);
  sl_error_t *err = NULL;
  int rc = sl__ckpt_remove_dir(d, &err);
  SL_ASSERT_NE_INT(rc, SL_OK);
  SL_ASSERT_TRUE(err != NULL && strstr(sl_error_message(err), "zz-subdir"));
  sl_error_destroy(err);
  char m[4700];
  snprintf(m, sizeof(m), "%s/_metadata", d);
  struct stat st;
  SL_ASSERT_TRUE(stat(m, &st) != 0);
  SL_ASSERT_EQ_INT(rmdir(sub), 0);
  SL_ASSERT_OK(sl__ckpt_remove_dir(d, NULL));
  SL_ASSERT_TRUE(stat(d, &st) != 0);
}

/* A state file that cannot be written (here: larger than RLIMIT_FSIZE, so
 * write() fails with EFBIG) aborts with an error that names the cause, as
 * every other checkpoint I/O error does, and is retriable.  2 MiB of
 * state: the write fails in a flush of the 1 MiB buffer, not in wclose. */
SL_TEST(a_state_file_write_error_names_its_cause) {
  sl_kstate_t *be;
  SL_ASSERT_OK(sl__kstate_create(16, 0, 15, &be));
  sl_state_desc_t d = {.name = "big", .kind = SL_STATE_VALUE, .version = 1};
  sl_state_t *st;
  SL_ASSERT_OK(sl__kstate_register(be, &d, &st, NULL));
  static char val[4096];
  memset(val, 'x', sizeof(val));
  for (int i = 0; i < 512; i++) {
    char key[32];
    int n = snprintf(key, sizeof(key), "key-%d", i);
    SL_ASSERT_OK(sl__kstate_set_key(be, key, (uint32_t)n,
                                    sl__key_hash64(key, (size_t)n)));
    SL_ASSERT_OK(sl_value_put(st, val, sizeof(val)));
  }
  sl_kstate_snap_t *snap;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &snap));
  char path[4300];
  snprintf(path, sizeof(path), "%s/big.state", sl_test_dir());
  signal(SIGXFSZ, SIG_IGN); /* write() returns EFBIG instead */
  struct rlimit rl = {64 * 1024, 64 * 1024};
  SL_ASSERT_EQ_INT(setrlimit(RLIMIT_FSIZE, &rl), 0);
  uint64_t size = 0, ck = 0;
  sl_error_t *err = NULL;
  int rc = sl__ckpt_write_state(path, snap, 0, 15, NULL, 0, &size, &ck,
                                &err);
  SL_ASSERT_EQ_INT(rc, -EFBIG);
  if (err == NULL || strstr(sl_error_message(err), strerror(EFBIG)) == NULL)
    SL_TEST_FAIL("expected the cause '%s' in the error, got '%s'",
                 strerror(EFBIG), sl_error_message(err));
  SL_ASSERT_TRUE(sl_error_is_retriable(err));
  sl_error_destroy(err);
  sl__kstate_snap_release(snap);
  sl__kstate_destroy(be);
}
