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

SL_TEST(alo_broker_restart_during_checkpoint) {
  kw_scenario_broker_restart(ALO, "task.on_first_barrier", 9);
}

SL_TEST(alo_leader_change_3_nodes) {
  kw_scenario_leader_change(ALO, "task.on_first_barrier", 9);
}
