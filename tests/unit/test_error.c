/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error objects: corruption reports at warning level with file and line,
 * and error classes (fatal, retriable) set where the cause is known and
 * read by the restart strategy.
 */
#include <sys/stat.h>

#include "core/core.h"
#include "sl_test.h"

static char logged[4096];
static sl_log_level_t logged_level;

static void log_cb(sl_log_level_t level, const char *msg, void *user) {
  (void)user;
  snprintf(logged, sizeof(logged), "%s", msg);
  logged_level = level;
}

SL_TEST(corrupt_is_logged_as_a_warning_with_file_and_line) {
  sl_log_set_callback(log_cb, NULL);
  int line = __LINE__ + 1;
  int rc = SL_CORRUPT("state %s", "index");
  sl_log_set_callback(NULL, NULL);
  SL_ASSERT_EQ_INT(rc, SL_ECORRUPT);
  SL_ASSERT_EQ_INT(logged_level, SL_LOG_WARN);
  char want[256];
  snprintf(want, sizeof(want), "corruption detected at %s:%d: state index",
           __FILE__, line);
  SL_ASSERT_EQ_STR(logged, want);
}

SL_TEST(error_classes_are_marked_where_known) {
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__error_fatal(&err, SL_EPARSE), SL_EPARSE); /* none */
  SL_ASSERT_EQ_INT(sl__error_retriable(NULL, SL_EIO), SL_EIO);
  sl_error_set(&err, -5, "disk hiccup");
  SL_ASSERT_EQ_INT(sl__error_retriable(&err, -5), -5);
  SL_ASSERT_TRUE(sl_error_is_retriable(err) && !sl_error_is_fatal(err));
  sl__error_fatal(&err, -5); /* fatal wins and clears retriable */
  SL_ASSERT_TRUE(sl_error_is_fatal(err) && !sl_error_is_retriable(err));
  sl__error_retriable(&err, -5);
  SL_ASSERT_TRUE(!sl_error_is_retriable(err));
  sl_error_prefix(err, "context"); /* the class survives a prefix */
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  sl_error_destroy(err);
}

/* A job over a file with a malformed record and a restart strategy of 3
 * attempts: the record fails every attempt the same way, so the job fails
 * at once, with the fatal error, and is never restarted. */
static int run_bad_file(uint32_t *out_restarts, sl_error_t **out_err) {
  char in[4200], ck[4200];
  snprintf(in, sizeof(in), "%s/in.csv", sl_test_dir());
  snprintf(ck, sizeof(ck), "%s/ckpt", sl_test_dir());
  sl_test_write_file(in, "1,2\n3,x\n");
  sl_field_t f[2] = {{"a", {SL_TYPE_INT64, 0, 0, false}},
                     {"b", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_schema_create(f, 2, &schema, NULL));
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "bad";
  cfg.parallelism = 1;
  cfg.checkpoint.dir = ck;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  cfg.restart.delay_ms = 1;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  const char *paths[] = {in};
  sl_file_source_config_t fc = {paths, 1, SL_FORMAT_CSV, false, ',', schema};
  const sl_source_vt_t *vt;
  void *ctx;
  SL_ASSERT_OK(sl_file_source_create(&fc, &vt, &ctx, NULL));
  sl_stream_t *s = sl_job_source(job, "orders", vt, ctx, schema);
  const sl_sink_vt_t *svt;
  void *sctx;
  SL_ASSERT_OK(sl_null_sink_create(&svt, &sctx));
  SL_ASSERT_OK(sl_stream_sink(s, "out", svt, sctx));
  int rc = sl_job_run(job, out_err);
  *out_restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  return rc;
}

SL_TEST(a_malformed_record_does_not_restart_the_job) {
  uint32_t n;
  sl_error_t *err = NULL;
  int rc = run_bad_file(&n, &err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  if (strstr(sl_error_message(err), "line 2") == NULL)
    SL_TEST_FAIL("unexpected message: %s", sl_error_message(err));
  SL_ASSERT_EQ_INT(n, 0);
  sl_error_destroy(err);
}
