/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Damaged checkpoints and restores that cannot map.  A first run of the
 * sequence job takes checkpoints 1 and 2 and is cancelled.  Then the newest
 * checkpoint is damaged — a flipped byte in a state file, a truncated state
 * file, a missing state file, a corrupt _metadata — and a second run with
 * resume_latest must warn, naming checkpoint 2 and what is wrong, fall back
 * to checkpoint 1, and still finish with exact results.  With every
 * checkpoint damaged it must fail with a clear message.  A restore into a
 * job whose operator uid, state name or state kind differs fails naming
 * both.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "seq_job.h"

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

static sl_job_config_t config(bool is_resume) {
  static char dir[4300];
  snprintf(dir, sizeof(dir), "%s/ckpt", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "corrupt";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  cfg.resume_latest = is_resume;
  return cfg;
}

static uint64_t checkpoint(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  while (sl_job_trigger_checkpoint(job, &id, &err) != SL_OK) {
    sl_error_destroy(err);
    err = NULL;
  }
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, id, 60000, NULL));
  return id;
}

/* First run: checkpoints 1 (a third of the input) and 2 (two thirds). */
static void make_checkpoints(void) {
  seq_reset();
  sl_job_config_t cfg = config(false);
  sl_job_t *job = seq_job(&cfg, 0);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_gate(PER_SPLIT / 3);
  SL_ASSERT_EQ_INT(checkpoint(job), 1);
  set_gate(2 * PER_SPLIT / 3);
  SL_ASSERT_EQ_INT(checkpoint(job), 2);
  sl_job_cancel(job);
  SL_ASSERT_EQ_INT(sl_job_wait(job, NULL), SL_ECANCELED);
  sl_job_destroy(job);
}

static void path_of(char *buf, size_t size, uint64_t id, const char *file) {
  snprintf(buf, size, "%s/ckpt/corrupt/chk-%llu/%s", sl_test_dir(),
           (unsigned long long)id, file);
}

/* Second run: resume, finish, and check the results. */
static void resume_and_finish(void) {
  warnings_len = 0;
  warnings[0] = '\0';
  sl_log_set_callback(log_cb, NULL);
  sl_job_config_t cfg = config(true);
  sl_job_t *job = seq_job(&cfg, 0);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  sl_log_set_callback(NULL, NULL);
  if (rc != SL_OK) SL_TEST_FAIL("resumed run failed: %s", sl_error_message(err));
  seq_check_results("resumed run");
  sl_job_destroy(job);
}

static void expect_warning(const char *want) {
  if (strstr(warnings, want) == NULL)
    SL_TEST_FAIL("expected a warning containing\n  %s\ngot:\n%s", want,
                 warnings);
}

static void flip_byte(const char *path, long off) {
  FILE *f = fopen(path, "r+b");
  SL_ASSERT_TRUE(f != NULL);
  SL_ASSERT_EQ_INT(fseek(f, off, SEEK_SET), 0);
  int c = fgetc(f);
  SL_ASSERT_TRUE(c != EOF);
  fseek(f, off, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

/* The header's length, from the state file's footer (u64 at size - 32). */
static long state_header_len(const char *path) {
  FILE *f = fopen(path, "rb");
  SL_ASSERT_TRUE(f != NULL);
  SL_ASSERT_EQ_INT(fseek(f, -32, SEEK_END), 0);
  uint8_t b[8];
  SL_ASSERT_EQ_INT(fread(b, 1, 8, f), 8);
  fclose(f);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return (long)v;
}

SL_TEST(flipped_state_byte_falls_back) {
  make_checkpoints();
  char p[4400];
  path_of(p, sizeof(p), 2, "checker-0.state");
  /* Inside the first key group's entries, just after the header. */
  flip_byte(p, state_header_len(p) + 4);
  resume_and_finish();
  expect_warning("checkpoint 2 is corrupt");
  expect_warning("fails its checksum); falling back to checkpoint 1");
}

SL_TEST(truncated_state_file_falls_back) {
  make_checkpoints();
  char p[4400];
  path_of(p, sizeof(p), 2, "checker-0.state");
  struct stat st;
  SL_ASSERT_EQ_INT(stat(p, &st), 0);
  SL_ASSERT_EQ_INT(truncate(p, st.st_size / 2), 0);
  resume_and_finish();
  char want[4600];
  snprintf(want, sizeof(want),
           "skipping checkpoint 2: checkpoint file '%s' is truncated: %lld "
           "bytes, expected %lld", p, (long long)(st.st_size / 2),
           (long long)st.st_size);
  expect_warning(want);
}

SL_TEST(missing_state_file_falls_back) {
  make_checkpoints();
  char p[4400];
  path_of(p, sizeof(p), 2, "checker-0.state");
  SL_ASSERT_EQ_INT(unlink(p), 0);
  resume_and_finish();
  char want[4600];
  snprintf(want, sizeof(want),
           "skipping checkpoint 2: checkpoint file '%s' is missing", p);
  expect_warning(want);
}

SL_TEST(corrupt_metadata_falls_back) {
  make_checkpoints();
  char p[4400];
  path_of(p, sizeof(p), 2, "_metadata");
  flip_byte(p, 20);
  resume_and_finish();
  char want[4600];
  snprintf(want, sizeof(want),
           "skipping checkpoint 2: checkpoint metadata '%s' is truncated or "
           "corrupt", p);
  expect_warning(want);
}

SL_TEST(no_usable_checkpoint_fails_clearly) {
  make_checkpoints();
  char p[4400];
  for (uint64_t id = 1; id <= 2; id++) {
    path_of(p, sizeof(p), id, "_metadata");
    SL_ASSERT_EQ_INT(truncate(p, 10), 0);
  }
  sl_log_set_callback(log_cb, NULL);
  sl_job_config_t cfg = config(true);
  sl_job_t *job = seq_job(&cfg, 0);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  sl_log_set_callback(NULL, NULL);
  SL_ASSERT_EQ_INT(rc, SL_ECORRUPT);
  char want[4600];
  snprintf(want, sizeof(want),
           "no usable checkpoint in '%s/ckpt/corrupt': every completed "
           "checkpoint is missing files or corrupt", sl_test_dir());
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
  sl_job_destroy(job);
}

/* Restores that cannot map: run with resume against checkpoint 2. */
static void expect_restore_error(const char *want) {
  sl_job_config_t cfg = config(true);
  sl_job_t *job = seq_job(&cfg, 0);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  SL_ASSERT_NE_INT(rc, SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
  sl_job_destroy(job);
  checker_uid = "checker";
  checker_state = "count_and_sum";
  checker_kind = SL_STATE_VALUE;
}

SL_TEST(missing_operator_uid_fails_naming_it) {
  make_checkpoints();
  checker_uid = "checker-v2";
  expect_restore_error("checkpoint 2 holds state of operator 'checker', which "
                       "this job does not have (operators map by uid)");
}

SL_TEST(undeclared_state_name_fails_naming_both) {
  make_checkpoints();
  checker_state = "counts";
  expect_restore_error("operator 'checker' (subtask 1 of 1): the checkpoint "
                       "holds state 'count_and_sum' of operator 'checker', "
                       "which the operator does not declare");
}

SL_TEST(state_kind_mismatch_fails_naming_both) {
  make_checkpoints();
  checker_kind = SL_STATE_LIST;
  expect_restore_error("operator 'checker' (subtask 1 of 1): state "
                       "'count_and_sum' is a value state in the checkpoint "
                       "but is declared as a list state");
}
