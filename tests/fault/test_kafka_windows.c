/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka source and the at-least-once Kafka sink through failures,
 * against a real broker (tests/tools/sl_kafka.h): the seed's running
 * example (two partitions of account deltas -> keyed balance -> Kafka
 * keyed by account) from a pipeline file, checked by a read_committed
 * reader against an independent computation of every account's sequence
 * of balances (kafka_windows.h).  At-least-once: every update present, in
 * order per account, a repeat only as the replay after a restore.
 *
 *   kill-*              `sluice` killed (SL_INJECT) at each step of the
 *                       at-least-once sink's checkpoint (records in flight
 *                       at the barrier; flushed and acknowledged, before
 *                       the snapshot; snapshot taken; before the
 *                       acknowledgement; before the checkpoint's commit
 *                       point; completed, before the tasks are told),
 *                       then --resume to the end;
 *   sigkill-soak        50 rounds (SL_KAFKA_SOAK_ROUNDS) on one broker,
 *                       each killed at a point and hit chosen by a seeded
 *                       RNG while the input grows, then to the end;
 *   partition-added     a partition added to the input topic while the job
 *                       runs, its records written before the discovery;
 *                       and while the job is down (killed, then
 *                       --resume);
 *   broker-restart      the single broker killed while the job is held at
 *                       a checkpoint step, the checkpoint released with the
 *                       broker down, the broker started again;
 *   leader-change       three nodes (replication 3, min.insync.replicas
 *                       2): the leader of an output partition killed while
 *                       the job is held at a checkpoint step.
 *
 * The exactly-once variants of the same scenarios are in
 * test_kafka_windows_eo.c.  Not under TSan (librdkafka's C11 threads;
 * docs/testing-servers.md).
 */
#include "kafka_windows.h"
#include "sl_test.h"

#define ALO "at-least-once"

SL_TEST(alo_kill_barrier_records_in_flight) {
  kw_scenario_kill_window(ALO, "task.on_first_barrier=kill:10",
                          "task.on_first_barrier");
}
SL_TEST(alo_kill_flushed_before_snapshot) {
  kw_scenario_kill_window(ALO, "task.before_sync_snapshot=kill:10",
                          "task.before_sync_snapshot");
}
SL_TEST(alo_kill_after_sync_snapshot) {
  kw_scenario_kill_window(ALO, "task.after_sync_snapshot=kill:10",
                          "task.after_sync_snapshot");
}
SL_TEST(alo_kill_before_ack) {
  kw_scenario_kill_window(ALO, "task.async_before_ack=kill:10",
                          "task.async_before_ack");
}
SL_TEST(alo_kill_before_metadata_rename) {
  kw_scenario_kill_window(ALO, "coordinator.before_metadata_rename=kill:3",
                          "coordinator.before_metadata_rename");
}
SL_TEST(alo_kill_completed_before_notify) {
  kw_scenario_kill_window(ALO, "coordinator.before_complete_notify=kill:3",
                          "coordinator.before_complete_notify");
}

static const kw_point_t alo_points[] = {
    {"task.on_first_barrier", 12},
    {"task.before_sync_snapshot", 12},
    {"task.after_sync_snapshot", 12},
    {"task.async_before_ack", 12},
    {"coordinator.before_metadata_rename", 3},
    {"coordinator.after_metadata_rename", 3},
    {"coordinator.before_complete_notify", 3},
};

SL_TEST(alo_sigkill_soak) {
  kw_scenario_soak(ALO, alo_points,
                   (int)(sizeof(alo_points) / sizeof(alo_points[0])));
}

SL_TEST(alo_partition_added_while_running) {
  kw_scenario_partition_added(ALO);
}

SL_TEST(alo_partition_added_while_down) {
  kw_scenario_partition_added_while_down(ALO);
}

SL_TEST(alo_broker_restart_during_checkpoint) {
  kw_scenario_broker_restart(ALO, "task.on_first_barrier", 9);
}

SL_TEST(alo_leader_change_3_nodes) {
  kw_scenario_leader_change(ALO, "task.on_first_barrier", 9);
}

/*
 * The harness's wait for a transaction the broker aborts (used by the
 * exactly-once "transaction expired" test), on its own: a transaction
 * left open by a producer with transaction.timeout.ms 3000 holds the last
 * stable offset of its partition below the high watermark until the
 * broker aborts it (its expiry scan every 500 ms here); then
 * read_committed readers see none of its records.
 */
SL_TEST(harness_broker_aborts_expired_transaction) {
  static const char *const broker[] = {
      "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
      NULL};
  kw_opts_t o = {.delivery = ALO, .broker_settings = broker};
  kw_t *w = kw_start(&o);
  const char *bs = sl_kafka_bootstrap(kw_kafka(w));
  const char *set[] = {"transaction.timeout.ms", "3000", NULL};
  rd_kafka_t *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_txn_producer(bs, "kw-harness", set, &p, &err), err);
  SL_ASSERT_OK_E(sl_kc_txn_result(rd_kafka_begin_transaction(p), "begin",
                                  &err),
                 err);
  SL_ASSERT_OK_E(sl_kc_produce(p, "balances", 1, "open-", 0, 10, true, &err),
                 err);
  int64_t lso = -1, high = -1;
  SL_ASSERT_OK_E(sl_kc_offsets(bs, "balances", 1, &lso, &high, &err), err);
  printf("open transaction: last stable offset %lld, high watermark %lld\n",
         (long long)lso, (long long)high);
  SL_ASSERT_EQ_INT(lso, 0);
  SL_ASSERT_EQ_INT(high, 10);
  SL_ASSERT_EQ_INT(kw_wait_no_open_transaction(w, 60000), 1);
  char **v = NULL;
  int n = -1;
  SL_ASSERT_OK_E(sl_kc_read_partition(bs, "balances", 1, true, &v, &n, &err),
                 err);
  SL_ASSERT_EQ_INT(n, 0); /* aborted */
  sl_kc_values_free(v, n);
  SL_ASSERT_OK_E(sl_kc_read_partition(bs, "balances", 1, false, &v, &n,
                                      &err),
                 err);
  SL_ASSERT_EQ_INT(n, 10);
  sl_kc_values_free(v, n);
  rd_kafka_destroy(p);
  kw_destroy(w);
}
