/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The harness of the Kafka failure-window tests (test_kafka_windows.c for
 * delivery at-least-once, test_kafka_windows_eo.c for exactly-once): the
 * seed's running example against a real broker (tests/tools/sl_kafka.h),
 *
 *   topic "deltas" (2 partitions; JSON {"account": A, "delta": D}, every
 *   account in one partition)
 *     -> keyed balance (aggregate sum(delta), count(), emit: updates)
 *     -> Kafka sink keyed by account into topic "balances" (3 partitions,
 *        JSON {"account": A, "balance": B, "n": N})
 *
 * from a pipeline file, run either as `sluice run --resume` processes
 * (killed at injection points through SL_INJECT) or in this process
 * (sl_pipeline_build; latches with sl_inject_arm).  The source is
 * unbounded, so a run armed to be killed at a checkpoint step is always
 * killed there; a run "to the end" goes until the output is complete,
 * then it is cancelled.  While a run is to be killed (or the job in this
 * process to be held at a latch) the test keeps producing input, so that
 * the step falls while records flow, and steps only epochs with records
 * reach (an exactly-once commit) are reached.
 *
 * The checker reads "balances" with a read_committed consumer and
 * compares, per account, the sequence of updates with an independent
 * computation here (the deltas the test produced, summed in order).  Every
 * record must be keyed by its account, in the partition the Java client's
 * partitioner gives that key, and carry the balance after its n-th delta.
 * Per account:
 *
 *   at-least-once  every update 1..N present and in order; a record may
 *                  only repeat an earlier update as the start of a replay
 *                  (n goes back, then continues n+1, n+2, ...), and the
 *                  replays per account are at most the restores (runs
 *                  resumed plus restarts in a process);
 *   exactly-once   exactly the updates 1..N, each once, in order.
 */
#ifndef SL_KAFKA_WINDOWS_H
#define SL_KAFKA_WINDOWS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sl_kafka.h"
#include "sl_kafka_client.h"
#include "sluice/sluice.h"

/*
 * Extra keys of the exactly-once Kafka sink in the pipeline file (a YAML
 * fragment of block-mapping lines indented by two spaces, e.g.
 * "  transactional_id_prefix: kw\n"), if the sink needs any; the tests
 * give none by default.
 */
#ifndef KW_EO_SINK_EXTRA
#define KW_EO_SINK_EXTRA ""
#endif

typedef enum kw_delivery_e { KW_ALO = 0, KW_EO = 1 } kw_delivery_t;

typedef struct kw_opts_s {
  const char *delivery;      /* "at-least-once" or "exactly-once" */
  int nodes;                 /* 0: 1; 3 for the cluster (replication 3,
                                min.insync.replicas 2) */
  const char *const *broker_settings; /* extra server.properties lines */
  int accounts;              /* accounts of partitions 0 and 1; 0: 40 */
  int interval_ms;           /* checkpoint interval; 0: 50 */
  const char *discovery;     /* source discovery_interval; NULL: 1s */
  /* Extra sink properties, as YAML flow-mapping pairs ("a: '1', b: '2'"). */
  const char *sink_properties;
  /* Extra sink keys, block-mapping lines indented by two spaces
   * ("  check_timing: warn\n"). */
  const char *sink_extra;
} kw_opts_t;

typedef struct kw_s kw_t;

/** Start the broker(s), create the topics, write the pipeline file. */
kw_t *kw_start(const kw_opts_t *opts);
/** Stop everything; the broker's data is thrown away. */
void kw_destroy(kw_t *w);

kw_delivery_t kw_delivery(const kw_t *w);
sl_kafka_t *kw_kafka(kw_t *w);
const char *kw_pipeline(const kw_t *w);

/** Produce n deltas over the base accounts (account a in input partition
 * a % 2), flushed; the expectation follows. */
void kw_produce(kw_t *w, int n);
/** Produce n deltas over accounts [first, first + count) into partition
 * part of the input topic. */
void kw_produce_to(kw_t *w, int part, int first, int count, int n);

/* Runs of the sluice command, each `sluice run <pipeline> --resume` with
 * its stderr in <test dir>/run-<i>.txt. */

/** Run with SL_INJECT=inject and expect it killed at point (the line
 * "sluice: injection point <point>: killing the process"). */
void kw_run_killed(kw_t *w, const char *inject, const char *point);
/** Start a run (inject may be NULL); kw_wait_complete ends it. */
pid_t kw_spawn(kw_t *w, const char *inject);
/** Wait until the output is complete while run pid lives (it ending is a
 * failure), then SIGTERM it and check the output finally. */
void kw_finish_run(kw_t *w, pid_t pid);
/** The text of the last run's stderr (caller frees). */
char *kw_last_log(const kw_t *w);

/* The job in this process (the same pipeline file, --resume). */
void kw_job_start(kw_t *w);
/** Wait until the output is complete (the job failing for good is a
 * failure), cancel the job, check the output finally.  Returns the job's
 * restarts. */
uint32_t kw_job_finish(kw_t *w);
/** The latest completed checkpoint of the job in this process; 0: none. */
uint64_t kw_job_last_checkpoint(kw_t *w);

/**
 * Read and check the output.  A violation of the delivery's guarantee (a
 * wrong record, an update missing before a later one, an exactly-once
 * duplicate) fails the test at once.  Returns true when every update is
 * present.  is_final: the run is over; also checks the count of replays
 * (at-least-once) and that the output is complete.
 */
bool kw_check(kw_t *w, bool is_final);

/** Wait (a condition, bounded by timeout_ms) until no transaction is open
 * on any output partition (the last stable offset equals the high
 * watermark).  Returns the number of partitions that had one open at the
 * first look. */
int kw_wait_no_open_transaction(kw_t *w, int timeout_ms);

/* ------------------------------------------------------------------ */
/* The scenarios, each with its own broker; delivery "at-least-once" or
 * "exactly-once" sets the expectation (see the top). */

/* Deltas produced by a scenario (more in some). */
#define KW_DELTAS 20000

/** Killed once (SL_INJECT=inject, expected to die at point), then
 * --resume to the end. */
void kw_scenario_kill_window(const char *delivery, const char *inject,
                             const char *point);

typedef struct kw_kill_s {
  const char *inject; /* SL_INJECT of the run */
  const char *point;  /* where it must be killed */
} kw_kill_t;
/** Runs killed one after the other (each --resume), then --resume to the
 * end. */
void kw_scenario_kill_runs(const char *delivery, const kw_kill_t *kills,
                           int n_kills);

typedef struct kw_point_s {
  const char *name;
  int max_hit; /* a round kills at hit 1..max_hit, chosen by a seeded RNG */
} kw_point_t;
/** SIGKILL soak: SL_KAFKA_SOAK_ROUNDS (50) rounds, one broker; each round
 * adds input and runs --resume until killed at a point of points; then
 * --resume to the end. */
void kw_scenario_soak(const char *delivery, const kw_point_t *points,
                      int n_points);
/** A partition added to the input topic while the job (in this process)
 * runs; its records, written before discovery finds it, reach the
 * output. */
void kw_scenario_partition_added(const char *delivery);
/** The same with the job down: killed at a checkpoint step, the partition
 * added and filled, then --resume to the end. */
void kw_scenario_partition_added_while_down(const char *delivery);
/** The single broker killed while the job (in this process) is held at
 * point (hit), released, the broker started again; no loss. */
void kw_scenario_broker_restart(const char *delivery, const char *point,
                                uint32_t hit);
/** Three nodes: the leader of balances/0 killed while the job is held at
 * point (hit); no loss. */
void kw_scenario_leader_change(const char *delivery, const char *point,
                               uint32_t hit);

#endif
