/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoints under backpressure.  A slow keyed checker (a busy loop per
 * record) keeps every channel in front of it full: with 16 credits of 4 KiB
 * per channel, a barrier queued behind the data waits for about 3600
 * records, i.e. for hundreds of milliseconds of processing.  An aligned
 * checkpoint with a 60 ms timeout therefore expires; an unaligned one, and
 * an aligned one with a 5 ms alignment timeout, complete (the first
 * barrier overtakes the queues; the queued records become channel state).
 * After each completed checkpoint the checker fails once, the job restarts
 * from it — replaying the channel state — and the per-key results must be
 * exact (the checker also rejects any duplicate or gap in the state).
 *
 * The margins are wide on purpose: a barrier behind full channels needs at
 * least 3600 x 40 us = 144 ms (more under sanitizers), more than twice the
 * 60 ms timeout, while the unaligned barrier is seen within 64 records.
 */
#include "seq_job.h"

static sl_job_config_t config(sl_ckpt_mode_t mode, int64_t align_timeout_ms,
                              const char *sub) {
  static char dir[4300];
  snprintf(dir, sizeof(dir), "%s/%s", sl_test_dir(), sub);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "bp";
  cfg.parallelism = 2;
  cfg.n_workers = 2;
  cfg.buffer_size = 4096;
  cfg.channel_buffers = 16;
  cfg.checkpoint.dir = dir;
  cfg.checkpoint.mode = mode;
  /* Aligned: 60 ms, well under the backlog.  The others only need to
   * complete, also in slow sanitizer builds. */
  cfg.checkpoint.timeout_ms =
      mode == SL_CKPT_ALIGNED && align_timeout_ms == 0 ? 60 : 30000;
  cfg.checkpoint.alignment_timeout_ms = align_timeout_ms;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 2;
  return cfg;
}

/* Wait until the checker has applied n records (a latch on progress). */
static void wait_processed(int64_t n) {
  while (seq_processed() < n) sched_yield();
}

static void run_case(sl_ckpt_mode_t mode, int64_t align_timeout_ms,
                     bool expect_complete, const char *sub) {
  sl_inject_reset();
  seq_reset();
  slow_spin = 30000; /* ~40 us per record */
  sl_job_config_t cfg = config(mode, align_timeout_ms, sub);
  sl_job_t *job = seq_job(&cfg, 1);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_gate(PER_SPLIT);
  /* Let the sources fill every channel: they are far faster. */
  wait_processed(200);
  uint64_t id = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(job, &id, &err), err);
  sl_checkpoint_stats_t st;
  int rc = sl_job_wait_checkpoint(job, id, 60000, &st);
  printf("checkpoint %llu: result %s, %.1f ms, alignment %.1f ms, processed "
         "%lld at its end\n", (unsigned long long)id, sl_errname(rc),
         st.duration_ns / 1e6, st.max_alignment_ns / 1e6,
         (long long)seq_processed());
  if (!expect_complete) {
    /* Aligned: the barrier is stuck behind the backlog past the timeout. */
    SL_ASSERT_EQ_INT(rc, SL_ECANCELED);
    slow_spin = 0;
  } else {
    SL_ASSERT_OK(rc);
    SL_ASSERT_TRUE(st.is_unaligned);
    SL_ASSERT_TRUE(st.channel_bytes > 0); /* in-flight records were kept */
    printf("checkpoint %llu: %llu bytes of channel state, %.1f ms\n",
           (unsigned long long)id, (unsigned long long)st.channel_bytes,
           st.duration_ns / 1e6);
    /* Fail once soon after; recovery replays the channel state. */
    slow_spin = 0;
    pthread_mutex_lock(&lock);
    fail_at = n_processed + 10;
    pthread_mutex_unlock(&lock);
  }
  rc = sl_job_wait(job, &err);
  if (rc != SL_OK)
    SL_TEST_FAIL("job failed: %s%s%s", sl_error_message(err),
                 violations ? "; " : "", violations ? violation_msg : "");
  if (expect_complete) SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  seq_check_results(sub);
  sl_job_destroy(job);
}

SL_TEST(aligned_times_out_under_backpressure) {
  run_case(SL_CKPT_ALIGNED, 0, false, "aligned");
}

SL_TEST(unaligned_completes_and_recovers) {
  run_case(SL_CKPT_UNALIGNED, 0, true, "unaligned");
}

SL_TEST(alignment_timeout_switches_and_recovers) {
  run_case(SL_CKPT_ALIGNED, 5, true, "timeout");
}
