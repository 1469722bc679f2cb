/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two-phase-commit sink framework (src/ops/sink_2pc.c, invariants
 * S1-S6) against the test store of tx_sink.h: a bounded generator of two
 * splits, rate-limited so that several checkpoints fall inside the run,
 * into the test sink.  Each test fails a protocol step or answers
 * RETRY/LOST, and checks the committed rows exactly once, the leftover
 * prepared transactions (none) and the commit counts.
 */
#include "core/inject.h"
#include "tx_sink.h"

enum { SPLITS = 2, PER_SPLIT = 3000 };

static char store[4200], ckdir[4200];

static void setup(void) {
  sl_inject_reset();
  snprintf(store, sizeof(store), "%s/store", sl_test_dir());
  snprintf(ckdir, sizeof(ckdir), "%s/ck", sl_test_dir());
  txs_reset(store);
}

typedef struct opts_s {
  uint32_t sink_par;
  int64_t interval_ms;
  bool is_restarting;
  bool is_resume;
  double rate;
  uint32_t max_attempts;
  sl_ckpt_mode_t mode;
  int64_t alignment_timeout_ms;
} opts_t;

static sl_job_t *make_job(const opts_t *o) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "tx";
  cfg.parallelism = 2;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = ckdir;
  cfg.checkpoint.interval_ms = o->interval_ms;
  cfg.checkpoint.sink_commit_backoff_ms = 5;
  cfg.checkpoint.sink_commit_max_attempts = o->max_attempts;
  cfg.checkpoint.mode = o->mode;
  cfg.checkpoint.alignment_timeout_ms = o->alignment_timeout_ms;
  cfg.resume_latest = o->is_resume;
  if (o->is_restarting) {
    cfg.restart.kind = SL_RESTART_FIXED_DELAY;
    cfg.restart.max_attempts = 20;
    cfg.restart.delay_ms = 0;
  }
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.seed = 7;
  g.count = SPLITS * PER_SPLIT;
  g.rate = o->rate > 0 ? o->rate : 30000;
  g.splits = SPLITS;
  g.columns = SL_GEN_COL_SEQ | SL_GEN_COL_SPLIT;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&g, &vt, &ctx, &schema, NULL));
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "gen", vt, ctx, schema);
  SL_ASSERT_OK(sl_stream_sink(s, "txsink", &txs_vt, store));
  SL_ASSERT_OK(sl_stream_set_sink_parallelism(s, o->sink_par));
  sl_schema_unref(schema);
  return job;
}

static int run(const opts_t *o, sl_error_t **err) {
  sl_job_t *job = make_job(o);
  int rc = sl_job_run(job, err);
  sl_job_destroy(job);
  return rc;
}

static void expect_exactly_once(void) {
  txs_check_exactly_once(store, SPLITS, PER_SPLIT);
  SL_ASSERT_EQ_INT(txs_count_files(store, "prepared"), 0);
  SL_ASSERT_EQ_INT(txs.lost, 0);
  SL_ASSERT_EQ_INT(txs.name_reused, 0);
  SL_ASSERT_EQ_INT(txs.foreign_commits, 0);
}

/* A bounded job commits its last epoch through the final checkpoint: no
 * periodic checkpoint at all, yet every row is committed. */
SL_TEST(final_checkpoint_commits_bounded_job) {
  setup();
  opts_t o = {2, 0, false, false, 0, 0};
  sl_error_t *err = NULL;
  int rc = run(&o, &err);
  if (rc != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once();
  SL_ASSERT_TRUE(txs.ok >= 1);
  SL_ASSERT_EQ_INT(txs.already, 0);
  SL_ASSERT_EQ_INT(txs.retry, 0);
}

/* The final checkpoint stays aligned and in band in unaligned mode and
 * with an alignment timeout: rows in flight would otherwise miss it. */
SL_TEST(final_checkpoint_in_unaligned_modes) {
  for (int m = 0; m < 2; m++) {
    setup();
    /* A store and checkpoints of their own per mode. */
    snprintf(store, sizeof(store), "%s/store-%d", sl_test_dir(), m);
    snprintf(ckdir, sizeof(ckdir), "%s/ck-%d", sl_test_dir(), m);
    txs_reset(store);
    opts_t o = {3, 10, false, false, 0, 0, SL_CKPT_ALIGNED, 0};
    if (m == 0) o.mode = SL_CKPT_UNALIGNED;
    else o.alignment_timeout_ms = 1;
    sl_error_t *err = NULL;
    if (run(&o, &err) != SL_OK)
      SL_TEST_FAIL("mode %d: %s", m, sl_error_message(err));
    expect_exactly_once();
  }
}

/* The final checkpoint aborted: the sink fails its task, the job restarts
 * and the next attempt's final checkpoint commits everything once. */
SL_TEST(final_checkpoint_aborted_restarts) {
  setup();
  SL_ASSERT_OK(sl_inject_arm("coordinator.before_metadata_rename",
                             SL_INJECT_FAIL, 1, false));
  opts_t o = {2, 0, true, false, 0, 0, SL_CKPT_ALIGNED, 0};
  sl_job_t *job = make_job(&o);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  if (rc != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  SL_ASSERT_EQ_INT(restarts, 1);
  SL_ASSERT_EQ_INT(sl_inject_hits("coordinator.before_metadata_rename"), 2);
  expect_exactly_once();
  SL_ASSERT_EQ_INT(txs.recovered, 2); /* the first final's transactions */
}

/* Periodic checkpoints and the final one: every epoch commits once. */
SL_TEST(periodic_checkpoints_commit_each_epoch_once) {
  setup();
  opts_t o = {2, 15, false, false, 0, 0};
  sl_error_t *err = NULL;
  if (run(&o, &err) != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once();
  SL_ASSERT_TRUE(txs.ok >= 3); /* several epochs */
  SL_ASSERT_EQ_INT(txs.commit_calls, txs.ok);
}

/* W6: checkpoint N aborted after the sinks prepared it; the job goes on
 * and the next completed checkpoint commits epoch N too, once. */
SL_TEST(aborted_checkpoint_commits_with_the_next) {
  setup();
  SL_ASSERT_OK(sl_inject_arm("coordinator.before_metadata_rename",
                             SL_INJECT_FAIL, 2, false));
  /* About a second of input at 15 ms checkpoints: the aborted one is far
   * from the final checkpoint even on a slow, loaded machine (an aborted
   * final checkpoint restarts the job, see below). */
  opts_t o = {2, 15, false, false, 6000, 0};
  sl_error_t *err = NULL;
  if (run(&o, &err) != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  SL_ASSERT_TRUE(sl_inject_hits("coordinator.before_metadata_rename") >= 2);
  expect_exactly_once();
  SL_ASSERT_EQ_INT(txs.commit_calls, txs.ok); /* once each, no restart */
  SL_ASSERT_EQ_INT(txs.already, 0);
}

/* A failure at each step of the protocol: the job restarts from its latest
 * completed checkpoint and the output is still exactly once. */
static void fail_at(const char *point, uint32_t hit, const char *first) {
  setup();
  if (first) SL_ASSERT_OK(sl_inject_arm(first, SL_INJECT_FAIL, 4, false));
  SL_ASSERT_OK(sl_inject_arm(point, SL_INJECT_FAIL, hit, false));
  /* About a second of input at 15 ms checkpoints, so that the point is
   * reached `hit` times before the input ends even on a loaded machine. */
  opts_t o = {2, 15, true, false, 6000, 0};
  sl_job_t *job = make_job(&o);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  if (rc != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  if (sl_inject_hits(point) < hit)
    SL_TEST_FAIL("%s reached %u times, expected >= %u", point,
                 sl_inject_hits(point), hit);
  SL_ASSERT_TRUE(restarts >= 1);
  expect_exactly_once();
}

SL_TEST(fail_before_prepare) { fail_at("sink.before_prepare", 3, NULL); }
SL_TEST(fail_after_prepare) { fail_at("sink.after_prepare", 3, NULL); }
SL_TEST(fail_before_commit) {
  fail_at("sink.before_commit", 2, NULL);
  /* That commit never reached the store; the restore commits it (OK)
   * and those of the same checkpoint that other subtasks had committed
   * before the failure again (ALREADY). */
  SL_ASSERT_EQ_INT(txs.commit_calls, txs.ok + txs.already);
}
/* W4: committed, the engine failed before it removed the entry: the
 * restore commits it again and the store answers ALREADY. */
SL_TEST(fail_after_commit_ok) {
  fail_at("sink.after_commit_ok", 1, NULL);
  SL_ASSERT_TRUE(txs.already >= 1);
  SL_ASSERT_EQ_INT(txs.commit_calls, txs.ok + txs.already);
}
SL_TEST(fail_restore_before_commit) {
  fail_at("sink.restore.before_commit", 1, "sink.before_commit");
}
SL_TEST(fail_restore_before_recover) {
  fail_at("sink.restore.before_recover", 3, "sink.after_prepare");
}
SL_TEST(fail_restore_after_recover) {
  fail_at("sink.restore.after_recover", 3, "sink.after_prepare");
}

/* W2: prepared, the checkpoint never completes, the job fails: recover
 * rolls the prepared transaction back and the replay commits it anew. */
SL_TEST(prepared_then_failure_is_recovered) {
  setup();
  /* Fail after the sinks prepared the first checkpoint and before it can
   * complete (the async phase never acknowledges it). */
  SL_ASSERT_OK(sl_inject_arm("task.async_before_ack", SL_INJECT_FAIL, 1,
                             false));
  SL_ASSERT_OK(sl_inject_arm("sink.after_prepare", SL_INJECT_FAIL, 2, false));
  opts_t o = {2, 15, true, false, 0, 0};
  sl_error_t *err = NULL;
  if (run(&o, &err) != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once();
  SL_ASSERT_TRUE(txs.recovered >= 1);
}

/* Rescale 4 -> 2 with pending committables: the first run completes a
 * checkpoint whose commit fails (no restart), the second resumes it at
 * sink parallelism 2: old subtask i's committables are committed by new
 * subtask i % 2, lingering ones are rolled back by their new owner. */
SL_TEST(rescale_4_to_2_with_pending_committables) {
  setup();
  SL_ASSERT_OK(sl_inject_arm("sink.before_commit", SL_INJECT_FAIL, 1, true));
  opts_t o = {4, 15, false, false, 0, 0};
  sl_error_t *err = NULL;
  int rc = run(&o, &err);
  SL_ASSERT_TRUE(rc != SL_OK);
  sl_error_destroy(err);
  err = NULL;
  uint32_t prepared = txs_count_files(store, "prepared");
  SL_ASSERT_TRUE(prepared >= 1);
  SL_ASSERT_EQ_INT(txs_count_files(store, "committed"), 0);
  sl_inject_reset();
  txs.commit_calls = 0;
  opts_t o2 = {2, 15, false, true, 0, 0};
  if (run(&o2, &err) != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once(); /* includes foreign_commits == 0: i % 2 */
}

/* W8: the prepared transaction vanished before its commit: LOST fails the
 * job loudly (no restart), naming the sink, subtask and checkpoint. */
SL_TEST(lost_fails_loudly) {
  setup();
  SL_ASSERT_OK(sl_inject_arm("sink.before_commit", SL_INJECT_PAUSE, 1,
                             false));
  opts_t o = {1, 15, true, false, 0, 0};
  sl_job_t *job = make_job(&o);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  SL_ASSERT_OK(sl_inject_wait_paused("sink.before_commit", 60000));
  /* Someone else rolls the prepared transactions back. */
  char d[4400];
  snprintf(d, sizeof(d), "%s/prepared", store);
  DIR *dd = opendir(d);
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[4700];
    snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
    unlink(p);
  }
  closedir(dd);
  sl_inject_release("sink.before_commit");
  sl_error_t *err = NULL;
  int rc = sl_job_wait(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  SL_ASSERT_TRUE(rc != SL_OK);
  const char *msg = sl_error_message(err);
  if (!strstr(msg, "sink 'txsink' (subtask 1 of 1)") ||
      !strstr(msg, "checkpoint") || !strstr(msg, "LOST") ||
      !strstr(msg, "neither prepared nor committed"))
    SL_TEST_FAIL("unexpected message: %s", msg);
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  SL_ASSERT_EQ_INT(restarts, 0);
  SL_ASSERT_EQ_INT(txs.lost, 1);
  sl_error_destroy(err);
}

/* RETRY three times, then OK: the commit is retried on the scheduler's
 * wake-ups (backoff 5, 10, 20 ms) and the job finishes without restart. */
SL_TEST(retry_with_backoff_succeeds) {
  setup();
  txs.retry_left = 3;
  opts_t o = {1, 15, false, false, 0, 0};
  sl_job_t *job = make_job(&o);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  if (rc != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once();
  SL_ASSERT_EQ_INT(txs.retry, 3);
  SL_ASSERT_EQ_INT(txs.max_attempt, 4);
  SL_ASSERT_EQ_INT(restarts, 0);
}

/* RETRY forever: after max attempts the task fails with a message. */
SL_TEST(retry_past_max_attempts_fails) {
  setup();
  txs.retry_forever = 1;
  opts_t o = {1, 15, false, false, 0, 3};
  sl_error_t *err = NULL;
  int rc = run(&o, &err);
  SL_ASSERT_TRUE(rc != SL_OK);
  const char *msg = sl_error_message(err);
  if (!strstr(msg, "still answers RETRY after 3 attempt(s)") ||
      !strstr(msg, "test store busy"))
    SL_TEST_FAIL("unexpected message: %s", msg);
  SL_ASSERT_EQ_INT(txs.max_attempt, 3);
  sl_error_destroy(err);
}

/* A transactional sink without checkpoints would never commit: refused. */
SL_TEST(transactional_sink_without_checkpoints_is_refused) {
  setup();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = 10;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&g, &vt, &ctx, &schema, NULL));
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "gen", vt, ctx, schema);
  SL_ASSERT_OK(sl_stream_sink(s, "txsink", &txs_vt, store));
  sl_schema_unref(schema);
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_job_run(job, &err), SL_EINVAL);
  if (!strstr(sl_error_message(err), "sink 'txsink' is transactional") ||
      !strstr(sl_error_message(err), "checkpoint.dir"))
    SL_TEST_FAIL("unexpected message: %s", sl_error_message(err));
  sl_error_destroy(err);
  sl_job_destroy(job);
}
