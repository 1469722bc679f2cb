/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exactly-once checker.  Each split of a test source produces records
 * (key, seq) where every key belongs to one split and its sequence numbers
 * run 0, 1, 2, ...; a keyed function keeps (count, sum of seq) per key and
 * checks, on every record, that seq == count: a duplicate or a lost record
 * in the restored state is caught at the record that reveals it.  For every
 * named injection point, the test arms a failure during the second of three
 * checkpoints (the sources wait at a gate while it is taken), lets the job
 * restart from the latest completed checkpoint, and requires the final
 * per-key results to equal an independent computation — in aligned and
 * unaligned modes, at parallelism 1 and 4.
 */
#include "seq_job.h"

/* ---- one run --------------------------------------------------------- */

static const char *points[] = {
    NULL, /* the failure-free reference run */
    "task.on_first_barrier",
    "task.before_sync_snapshot",
    "task.after_sync_snapshot",
    "task.before_barrier_forward",
    "task.after_barrier_forward",
    "task.state_file_before_fsync",
    "task.async_before_ack",
    "coordinator.before_trigger",
    "coordinator.before_metadata_write",
    "coordinator.before_metadata_rename",
    "coordinator.after_metadata_rename",
    "coordinator.before_complete_notify",
};

/* Trigger a checkpoint and wait for its outcome; returns its id or 0. */
static uint64_t checkpoint(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  int rc = sl_job_trigger_checkpoint(job, &id, &err);
  sl_error_destroy(err);
  if (rc != SL_OK) return 0;
  sl_job_wait_checkpoint(job, id, 60000, NULL);
  return id;
}

static void run_one(sl_ckpt_mode_t mode, int64_t alignment_timeout_ms,
                    uint32_t par, const char *point, int run) {
  sl_inject_reset();
  seq_reset();
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/run-%d", sl_test_dir(), run);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "eo";
  cfg.parallelism = par;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  cfg.checkpoint.mode = mode;
  cfg.checkpoint.alignment_timeout_ms = alignment_timeout_ms;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  sl_job_t *job = seq_job(&cfg, 0);
  SL_ASSERT_OK(sl_job_start(job, NULL));

  /* Checkpoint 1 with a third of the input. */
  set_gate(PER_SPLIT / 3);
  while (checkpoint(job) == 0) {
  }
  /* Checkpoint 2 with two thirds, with the failure armed. */
  if (point) SL_ASSERT_OK(sl_inject_arm(point, SL_INJECT_FAIL, 1, false));
  set_gate(2 * PER_SPLIT / 3);
  checkpoint(job);
  /* Checkpoint 3, then the rest. */
  checkpoint(job);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  int rc = sl_job_wait(job, &err);
  if (rc != SL_OK)
    SL_TEST_FAIL("point %s: job failed: %s%s%s", point ? point : "(none)",
                 sl_error_message(err), violations ? "; " : "",
                 violations ? violation_msg : "");
  if (point && sl_inject_hits(point) == 0)
    SL_TEST_FAIL("point %s was never reached", point);
  seq_check_results(point ? point : "failure-free run");
  printf("%-40s restarts %u\n", point ? point : "(failure-free)",
         sl_job_restarts(job));
  sl_job_destroy(job);
  sl_inject_reset();
}

static void run_all(sl_ckpt_mode_t mode, int64_t alignment_timeout_ms,
                    uint32_t par) {
  for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
    run_one(mode, alignment_timeout_ms, par, points[i], (int)i);
}

SL_TEST(aligned_parallelism_1) { run_all(SL_CKPT_ALIGNED, 0, 1); }
SL_TEST(aligned_parallelism_4) { run_all(SL_CKPT_ALIGNED, 0, 4); }
SL_TEST(unaligned_parallelism_1) { run_all(SL_CKPT_UNALIGNED, 0, 1); }
SL_TEST(unaligned_parallelism_4) { run_all(SL_CKPT_UNALIGNED, 0, 4); }
/* An alignment timeout of 0 ms... is "never"; 1 ms switches almost every
 * checkpoint to unaligned while it aligns. */
SL_TEST(aligned_timeout_parallelism_4) { run_all(SL_CKPT_ALIGNED, 1, 4); }
