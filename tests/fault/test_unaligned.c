/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoints under backpressure.  The keyed checker is held: it applies a
 * record only for a token the test hands out (seq_job.h).  With no tokens
 * the sources fill every channel in front of it (16 credits of 4 KiB per
 * channel) until each of them has a buffer waiting for credit; the test
 * waits for that (a latch, not a sleep), then triggers a checkpoint, so
 * every barrier is queued behind all the records emitted so far.
 *  - Aligned, 60 ms checkpoint timeout: the checker gets no token until the
 *    checkpoint has expired, so its barriers cannot align: it must expire.
 *  - Unaligned, and aligned with a 5 ms alignment timeout: tokens are
 *    handed out one at a time (at most one per 100 us) until the checkpoint
 *    completes.  It must complete as an unaligned checkpoint, with channel
 *    state, after fewer records than were queued in front of its barriers:
 *    an aligned barrier could complete only after all of them, so the
 *    barrier overtook the queues.
 * After each completed checkpoint the checker fails once, the job restarts
 * from it, replaying the channel state, and the per-key results must be
 * exact (the checker also rejects any duplicate or gap in the state).
 * Nothing here depends on how fast the machine is: the aligned case makes
 * no progress at all, and the others count records, not time (the 5 ms
 * alignment timeout passes while tokens trickle out, however slowly).
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
  /* Aligned: 60 ms, only to end the test soon (nothing moves meanwhile).
   * The others must complete, also in slow sanitizer builds. */
  cfg.checkpoint.timeout_ms =
      mode == SL_CKPT_ALIGNED && align_timeout_ms == 0 ? 60 : 60000;
  cfg.checkpoint.alignment_timeout_ms = align_timeout_ms;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 2;
  return cfg;
}

static void run_case(sl_ckpt_mode_t mode, int64_t align_timeout_ms,
                     bool expect_complete, const char *sub) {
  sl_inject_reset();
  seq_reset();
  chk_tokens = 0; /* the checker applies nothing yet */
  sl_job_config_t cfg = config(mode, align_timeout_ms, sub);
  sl_job_t *job = seq_job(&cfg, 1);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_gate(PER_SPLIT);
  /* Latch: both source subtasks have output waiting for credit. */
  while (atomic_load(&n_src_full) < 2) sched_yield();
  int64_t queued = atomic_load(&n_emitted);
  uint64_t id = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(job, &id, &err), err);
  sl_checkpoint_stats_t st;
  int rc;
  int64_t granted = 0;
  if (!expect_complete) {
    rc = sl_job_wait_checkpoint(job, id, 60000, &st);
  } else {
    while ((rc = sl_job_wait_checkpoint(job, id, 0, &st)) == SL_EAGAIN) {
      atomic_fetch_add(&chk_tokens, 1);
      granted++;
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
  printf("checkpoint %llu: result %s, %.1f ms, alignment %.1f ms, %lld "
         "records queued in front of its barriers, %lld applied before its "
         "end\n", (unsigned long long)id, sl_errname(rc),
         st.duration_ns / 1e6, st.max_alignment_ns / 1e6, (long long)queued,
         (long long)granted);
  if (!expect_complete) {
    /* Aligned: the barriers are stuck behind the backlog. */
    SL_ASSERT_EQ_INT(rc, SL_ECANCELED);
    SL_ASSERT_EQ_INT(seq_processed(), 0);
    chk_tokens = -1;
  } else {
    SL_ASSERT_OK(rc);
    SL_ASSERT_TRUE(st.is_unaligned);
    SL_ASSERT_TRUE(st.channel_bytes > 0); /* in-flight records were kept */
    SL_ASSERT_TRUE(granted < queued);     /* the barrier overtook them */
    printf("checkpoint %llu: %llu bytes of channel state\n",
           (unsigned long long)id, (unsigned long long)st.channel_bytes);
    /* Fail once soon after; recovery replays the channel state. */
    pthread_mutex_lock(&lock);
    fail_at = n_processed + 10;
    pthread_mutex_unlock(&lock);
    chk_tokens = -1;
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
