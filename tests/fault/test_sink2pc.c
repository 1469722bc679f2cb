/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two-phase-commit sink framework (src/ops/sink_2pc.c, invariants
 * S1-S6) against the test store of tx_sink.h: a bounded generator of two
 * splits, rate-limited so that several checkpoints fall inside the run,
 * into the test sink.  Each test fails a protocol step or answers
 * RETRY/LOST, and checks the committed rows exactly once, the leftover
 * prepared transactions (none) and the commit counts.
 */
#include <time.h>

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
  const char *restore_from;
  bool is_allow_dup;
  bool is_unbounded;
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
  cfg.restore_from = o->restore_from;
  cfg.allow_duplicate_sink_output = o->is_allow_dup;
  if (o->is_restarting) {
    cfg.restart.kind = SL_RESTART_FIXED_DELAY;
    cfg.restart.max_attempts = 20;
    cfg.restart.delay_ms = 0;
  }
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.seed = 7;
  g.count = o->is_unbounded ? 0 : SPLITS * PER_SPLIT;
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

/* RESTART (the connector can commit only from a restore, as the Kafka
 * sink after its transaction expired): the task fails retriably at once,
 * the committable stays pending, the restart restores the checkpoint that
 * holds it and the restore commits it: exactly once, one restart, no
 * RETRY backoff. */
SL_TEST(restart_answer_commits_after_a_restore) {
  setup();
  txs.restart_left = 1;
  opts_t o = {1, 15, true, false, 0, 0};
  sl_job_t *job = make_job(&o);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  if (rc != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once();
  SL_ASSERT_EQ_INT(txs.restart, 1);
  SL_ASSERT_EQ_INT(txs.retry, 0);
  SL_ASSERT_EQ_INT(restarts, 1);
}

/* RESTART without a restart strategy fails the job with the message,
 * retriable (not fatal: --resume commits it). */
SL_TEST(restart_answer_without_restarts_fails_retriably) {
  setup();
  txs.restart_left = 1;
  opts_t o = {1, 15, false, false, 0, 0};
  sl_error_t *err = NULL;
  int rc = run(&o, &err);
  SL_ASSERT_TRUE(rc != SL_OK);
  const char *msg = sl_error_message(err);
  if (!strstr(msg, "answered RESTART: it is committed again after a "
                   "restore") ||
      !strstr(msg, "test store wants a restore"))
    SL_TEST_FAIL("unexpected message: %s", msg);
  SL_ASSERT_TRUE(!sl_error_is_fatal(err));
  sl_error_destroy(err);
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

/* ---- Rule 0.3-7: restoring a checkpoint older than committed output ---- */

/* The smallest and largest chk-N of the job "tx"; asserts there are two. */
static void chk_range(uint64_t *out_min, uint64_t *out_max) {
  char d[4400];
  snprintf(d, sizeof(d), "%s/tx", ckdir);
  DIR *dd = opendir(d);
  SL_ASSERT_TRUE(dd != NULL);
  uint64_t lo = UINT64_MAX, hi = 0;
  uint32_t n = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    unsigned long long id;
    char m[4800];
    if (sscanf(e->d_name, "chk-%llu", &id) != 1) continue;
    snprintf(m, sizeof(m), "%s/%s/_metadata", d, e->d_name);
    if (access(m, F_OK) != 0) continue;
    n++;
    if (id < lo) lo = id;
    if (id > hi) hi = id;
  }
  closedir(dd);
  if (n < 2) SL_TEST_FAIL("%u completed checkpoints retained, need 2", n);
  *out_min = lo;
  *out_max = hi;
}

/* W11: a job ran to its end; restoring its oldest retained checkpoint C
 * would emit again what the final checkpoint F > C committed.  Refused,
 * fatal (no restart), before anything is committed or rolled back; with
 * allow_duplicate_sink_output it runs (and the duplicates appear); a
 * restore of the newest checkpoint is never refused. */
SL_TEST(restore_older_than_committed_is_refused) {
  setup();
  opts_t o = {2, 15, false, false, 6000, 0};
  sl_error_t *err = NULL;
  if (run(&o, &err) != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  expect_exactly_once();
  uint64_t c, f;
  chk_range(&c, &f);
  SL_ASSERT_EQ_INT(txs.max_committed_ckpt, f); /* the final checkpoint */
  uint32_t n_committed = txs_count_files(store, "committed");

  char from[4600];
  snprintf(from, sizeof(from), "%s/tx/chk-%llu", ckdir, (unsigned long long)c);
  txs.commit_calls = 0;
  txs.committed_max_calls = 0;
  opts_t o2 = {2, 15, true, false, 6000, 0};
  o2.restore_from = from;
  sl_job_t *job = make_job(&o2);
  int rc = sl_job_run(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  SL_ASSERT_EQ_INT(rc, SL_ESTATE);
  char want[300];
  snprintf(want, sizeof(want), "sink 'txsink' already committed checkpoint "
           "%llu > %llu; restoring checkpoint %llu re-emits output",
           (unsigned long long)f, (unsigned long long)c,
           (unsigned long long)c);
  const char *msg = sl_error_message(err);
  if (!strstr(msg, want) || !strstr(msg, "--allow-duplicate-sink-output") ||
      !strstr(msg, "the test store committed checkpoint"))
    SL_TEST_FAIL("unexpected message: %s", msg);
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(restarts, 0);
  SL_ASSERT_TRUE(txs.committed_max_calls >= 1);
  SL_ASSERT_EQ_INT(txs.commit_calls, 0);  /* nothing committed */
  SL_ASSERT_EQ_INT(txs.recovered, 0);     /* nothing rolled back */
  SL_ASSERT_EQ_INT(txs_count_files(store, "committed"), n_committed);
  SL_ASSERT_EQ_INT(txs_count_files(store, "prepared"), 0);
  expect_exactly_once();

  /* Allowed: the restore runs and re-emits what followed C. */
  o2.is_allow_dup = true;
  o2.is_restarting = false;
  if (run(&o2, &err) != SL_OK)
    SL_TEST_FAIL("allowed run: %s", sl_error_message(err));
  SL_ASSERT_TRUE(txs.commit_calls >= 1);
  SL_ASSERT_TRUE(txs_count_files(store, "committed") > n_committed);
  SL_ASSERT_EQ_INT(txs.lost, 0);

  /* The newest checkpoint (the allowed run's final one): fine. */
  uint32_t calls = txs.committed_max_calls;
  opts_t o3 = {2, 15, false, true, 6000, 0};
  if (run(&o3, &err) != SL_OK)
    SL_TEST_FAIL("resume: %s", sl_error_message(err));
  SL_ASSERT_TRUE(txs.committed_max_calls > calls);
}

/* An aborted checkpoint, then a failure: the restore of the latest
 * completed checkpoint is not refused (the aborted epoch was committed by
 * the next completed checkpoint, never by itself). */
SL_TEST(restore_after_aborted_checkpoint_is_not_refused) {
  setup();
  SL_ASSERT_OK(sl_inject_arm("coordinator.before_metadata_rename",
                             SL_INJECT_FAIL, 2, false));
  SL_ASSERT_OK(sl_inject_arm("sink.after_prepare", SL_INJECT_FAIL, 5, false));
  opts_t o = {2, 15, true, false, 6000, 0};
  sl_job_t *job = make_job(&o);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  uint32_t restarts = sl_job_restarts(job);
  sl_job_destroy(job);
  if (rc != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  SL_ASSERT_TRUE(restarts >= 1);
  SL_ASSERT_TRUE(txs.committed_max_calls >= 1);
  expect_exactly_once();
}

/* A fresh start is a new run, not a restore: not checked, even with
 * committed output of the same job and sink in the store. */
SL_TEST(fresh_start_is_not_checked) {
  setup();
  opts_t o = {1, 15, false, false, 0, 0};
  sl_error_t *err = NULL;
  if (run(&o, &err) != SL_OK) SL_TEST_FAIL("run: %s", sl_error_message(err));
  SL_ASSERT_TRUE(txs.max_committed_ckpt > 0);
  txs.committed_max_calls = 0;
  if (run(&o, &err) != SL_OK) SL_TEST_FAIL("run 2: %s", sl_error_message(err));
  SL_ASSERT_EQ_INT(txs.committed_max_calls, 0);
}

/* ---- Rule 0.3-9: the sink's metrics ------------------------------------ */

static bool sink_metrics(sl_job_t *job, sl_sink_metrics_t *out,
                         uint64_t *out_rows) {
  sl_metrics_t m;
  if (sl_job_metrics(job, &m) != SL_OK) return false;
  bool found = m.n_sinks == 1;
  if (found) *out = m.sinks[0];
  *out_rows = 0;
  for (uint32_t i = 0; i < m.n_ops; i++)
    if (strcmp(m.ops[i].uid, "txsink") == 0) *out_rows += m.ops[i].records_in;
  sl_metrics_close(&m);
  return found;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Poll the metrics until cond holds (at most a minute). */
#define WAIT_METRICS(job, k, rows, cond)                                  \
  do {                                                                    \
    int64_t until_ = now_ms() + 60000;                            \
    for (;;) {                                                            \
      if (sink_metrics(job, &(k), &(rows)) && (cond)) break;              \
      if (now_ms() > until_)                                      \
        SL_TEST_FAIL("timed out waiting for %s", #cond);                  \
      usleep(1000);                                                       \
    }                                                                     \
  } while (0)

static void trigger_and_wait(sl_job_t *job, int want_rc) {
  uint64_t id;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(job, &id, &err), err);
  int rc = sl_job_wait_checkpoint(job, id, 60000, NULL);
  if (want_rc == SL_OK) SL_ASSERT_EQ_INT(rc, SL_OK);
  else SL_ASSERT_TRUE(rc != SL_OK && rc != SL_EAGAIN);
}

/* Every value after: a completed checkpoint A, an aborted B (its epoch
 * pending), D completing (commits B and D), a failure right after the sink
 * prepared E, the restart restoring D (B and D again: ALREADY; E rolled
 * back: lingering_aborted), then F completing. */
SL_TEST(metrics_after_aborted_checkpoint_and_restore) {
  setup();
  opts_t o = {1, 0, true, false, 4000, 0};
  o.is_unbounded = true;
  sl_job_t *job = make_job(&o);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  sl_sink_metrics_t k;
  uint64_t rows = 0, seen;
  WAIT_METRICS(job, k, rows, rows > 0);
  trigger_and_wait(job, SL_OK); /* A */
  WAIT_METRICS(job, k, rows, k.committed == 1);
  seen = rows; /* rows after this are in B's epoch: A's barrier passed */
  WAIT_METRICS(job, k, rows, rows > seen);
  SL_ASSERT_OK(sl_inject_arm("coordinator.before_metadata_rename",
                             SL_INJECT_FAIL, 1, false));
  trigger_and_wait(job, SL_EFAILED); /* B, aborted after every ack */
  SL_ASSERT_TRUE(sink_metrics(job, &k, &rows));
  SL_ASSERT_EQ_INT(k.pending, 1);
  SL_ASSERT_TRUE(k.oldest_pending_age_ns > 0);
  SL_ASSERT_EQ_INT(k.commit_attempts, 1);
  seen = rows;
  WAIT_METRICS(job, k, rows, rows > seen);
  trigger_and_wait(job, SL_OK); /* D: commits B, then D */
  WAIT_METRICS(job, k, rows, k.committed == 3);
  SL_ASSERT_EQ_INT(k.pending, 0);
  SL_ASSERT_EQ_INT(k.oldest_pending_age_ns, 0);
  SL_ASSERT_EQ_INT(k.commit_attempts, 3);
  SL_ASSERT_EQ_INT(k.already_committed, 0);
  SL_ASSERT_EQ_INT(k.lingering_aborted, 0);
  seen = rows;
  WAIT_METRICS(job, k, rows, rows > seen);
  SL_ASSERT_OK(sl_inject_arm("sink.after_prepare", SL_INJECT_FAIL, 1, false));
  uint64_t e_id;
  SL_ASSERT_OK(sl_job_trigger_checkpoint(job, &e_id, NULL)); /* E */
  /* The restart restores D, whose state holds B and D. */
  WAIT_METRICS(job, k, rows, sl_job_restarts(job) == 1 &&
                                 k.already_committed == 2 &&
                                 k.lingering_aborted == 1);
  trigger_and_wait(job, SL_OK); /* F */
  WAIT_METRICS(job, k, rows, k.committed == 1);
  sl_job_cancel(job);
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_job_wait(job, &err), SL_ECANCELED);
  sl_error_destroy(err);
  /* Read after the end: the last attempt's values stay. */
  SL_ASSERT_TRUE(sink_metrics(job, &k, &rows));
  SL_ASSERT_EQ_INT(k.subtask, 0);
  SL_ASSERT_EQ_STR(k.uid, "txsink"); /* borrowed from the job */
  sl_job_destroy(job);
  SL_ASSERT_EQ_INT(k.already_committed, 2);
  SL_ASSERT_EQ_INT(k.lingering_aborted, 1);
  SL_ASSERT_EQ_INT(k.commit_attempts, 3); /* B, D at restore; F */
  SL_ASSERT_EQ_INT(k.committed, 1);
  SL_ASSERT_EQ_INT(k.lost, 0);
  SL_ASSERT_EQ_INT(k.retries, 0);
  SL_ASSERT_EQ_INT(k.pending, 0);
  SL_ASSERT_EQ_INT(txs.lost, 0);
  SL_ASSERT_EQ_INT(txs.recovered, 1); /* E, the one lingering_aborted */
}
