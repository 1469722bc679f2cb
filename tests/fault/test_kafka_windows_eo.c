/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exactly-once Kafka sink through failures against a real broker: the
 * scenarios of test_kafka_windows.c (harness kafka_windows.h) with
 * `delivery: exactly-once`, where the read_committed output must be
 * exactly every account's sequence of updates, each once, in order, and
 * the windows of the sink's commit protocol (the connector notes' K1-K5):
 *
 *   open transaction                records of epoch N written, no
 *                                   barrier yet (task.on_first_barrier),
 *                                   or flushed at the barrier
 *                                   (sink.before_prepare);
 *   flushed and marked              sink.after_prepare: N prepared (the
 *                                   marker sent inside the transaction),
 *                                   N not complete;
 *   completed, before commit        sink.before_commit, and
 *                                   coordinator.before_complete_notify;
 *   commit sent, reply lost         kafka.sink.after_commit_transaction:
 *                                   the broker committed, the process dies
 *                                   before the engine learns it;
 *   commit answered                 sink.after_commit_ok;
 *   restore with pending epochs     a completion not told to the sink
 *                                   (so two epochs are pending), killed
 *                                   before the commit, then killed again
 *                                   before the restore's commits;
 *   transaction expired             killed before the commit with
 *                                   transaction.timeout.ms 3000; the broker
 *                                   aborts the open transaction (the test
 *                                   waits until the last stable offset
 *                                   reaches the high watermark), then
 *                                   --resume re-sends the epoch.
 *
 * Not under TSan (librdkafka's C11 threads).
 */
#include "kafka_windows.h"
#include "sl_test.h"

#define EO "exactly-once"

SL_TEST(eo_kill_open_transaction_records_in_flight) {
  kw_scenario_kill_window(EO, "task.on_first_barrier=kill:10",
                          "task.on_first_barrier");
}
SL_TEST(eo_kill_open_transaction_flushed_before_prepare) {
  kw_scenario_kill_window(EO, "sink.before_prepare=kill:5",
                          "sink.before_prepare");
}
SL_TEST(eo_kill_flushed_and_marked_before_completion) {
  kw_scenario_kill_window(EO, "sink.after_prepare=kill:5",
                          "sink.after_prepare");
}
SL_TEST(eo_kill_completed_before_notify) {
  kw_scenario_kill_window(EO, "coordinator.before_complete_notify=kill:3",
                          "coordinator.before_complete_notify");
}
SL_TEST(eo_kill_completed_before_commit) {
  kw_scenario_kill_window(EO, "sink.before_commit=kill:3",
                          "sink.before_commit");
}
SL_TEST(eo_kill_commit_sent_reply_lost) {
  kw_scenario_kill_window(EO, "kafka.sink.after_commit_transaction=kill:3",
                          "kafka.sink.after_commit_transaction");
}
SL_TEST(eo_kill_commit_answered_before_removed) {
  kw_scenario_kill_window(EO, "sink.after_commit_ok=kill:3",
                          "sink.after_commit_ok");
}

/* The second completion is not told to the sinks, so at the third the
 * epochs of both are pending: killed before their commit; the resume is
 * killed again before the restore commits them; the last run commits. */
SL_TEST(eo_restore_with_pending_epochs) {
  static const kw_kill_t kills[] = {
      {"coordinator.before_complete_notify=fail:2,sink.before_commit=kill:3",
       "sink.before_commit"},
      {"sink.restore.before_commit=kill:1", "sink.restore.before_commit"},
  };
  kw_scenario_kill_runs(EO, kills, 2);
}

/* K5: the broker aborts the transaction of a completed epoch whose
 * commit never came (transaction.timeout.ms 3000, the broker's expiry
 * scan every 500 ms); the resume must re-send that epoch. */
SL_TEST(eo_transaction_expired_by_broker) {
  static const char *const broker[] = {
      "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
      NULL};
  kw_opts_t o = {.delivery = EO,
                 .broker_settings = broker,
                 .sink_properties = "transaction.timeout.ms: '3000'",
                 /* The timing check refuses a transaction timeout this
                  * short; here it is the point. */
                 .sink_extra = "  check_timing: warn\n"};
  kw_t *w = kw_start(&o);
  kw_produce(w, KW_DELTAS / 4);
  kw_run_killed(w, "sink.before_commit=kill:3", "sink.before_commit");
  kw_check(w, false);
  /* The open transactions are aborted by the broker, not by sluice: the
   * process is gone and nothing runs until the resume. */
  int open = kw_wait_no_open_transaction(w, 60000);
  printf("transactions open at the kill on %d output partitions; all "
         "aborted by the broker\n", open);
  SL_ASSERT_TRUE(open > 0);
  kw_finish_run(w, kw_spawn(w, NULL));
  kw_destroy(w);
}

static const kw_point_t eo_points[] = {
    {"task.on_first_barrier", 12},
    {"sink.before_prepare", 6},
    {"sink.after_prepare", 6},
    {"task.after_sync_snapshot", 12},
    {"coordinator.before_metadata_rename", 3},
    {"coordinator.after_metadata_rename", 3},
    {"coordinator.before_complete_notify", 3},
    {"sink.before_commit", 6},
    {"kafka.sink.after_commit_transaction", 6},
    {"sink.after_commit_ok", 6},
    {"sink.restore.before_recover", 2},
    {"sink.restore.after_recover", 2},
};

SL_TEST(eo_sigkill_soak) {
  kw_scenario_soak(EO, eo_points,
                   (int)(sizeof(eo_points) / sizeof(eo_points[0])));
}

SL_TEST(eo_partition_added_while_running) {
  kw_scenario_partition_added(EO);
}

SL_TEST(eo_partition_added_while_down) {
  kw_scenario_partition_added_while_down(EO);
}

/* The broker killed while the job is held with epoch N prepared (flushed,
 * marked, N not complete), then while held with N complete and not
 * committed. */
SL_TEST(eo_broker_restart_after_prepare) {
  kw_scenario_broker_restart(EO, "sink.after_prepare", 5);
}
SL_TEST(eo_broker_restart_before_commit) {
  kw_scenario_broker_restart(EO, "sink.before_commit", 3);
}

SL_TEST(eo_leader_change_3_nodes) {
  kw_scenario_leader_change(EO, "sink.before_commit", 3);
}
