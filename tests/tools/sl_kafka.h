/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A real Apache Kafka broker for tests: the broker's jars from Maven
 * Central (resolved once by tools/kafka-jars into a cache directory outside
 * the repository), run with `java -cp` in KRaft mode.  A start makes one
 * fresh temporary directory per node, formats its storage with a random
 * cluster id and starts each node as a combined broker and controller on
 * free 127.0.0.1 ports; one node by default, or a cluster of several with
 * a static controller quorum (leader changes).  Every node is owned by a
 * guard process (sl_guard.h), as the PostgreSQL and MariaDB servers of
 * sl_servers.h are, so a killed test leaves no broker behind.  Small
 * librdkafka helpers serve the tests' set-up and assertions.  See
 * docs/testing-servers.md.
 */
#ifndef SL_KAFKA_H
#define SL_KAFKA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <librdkafka/rdkafka.h>

#include "sl_servers.h"
#include "sluice/sluice.h"

#define SL_KAFKA_MAX_NODES 5

typedef struct sl_kafka_opts_s {
  int nodes; /* 0 selects 1; at most SL_KAFKA_MAX_NODES */
  /*
   * The directory of the broker's jars.  NULL: $SL_KAFKA_JARS, else
   * ${XDG_CACHE_HOME:-$HOME/.cache}/sluice/kafka-<default version>, where
   * tools/kafka-jars puts them.
   */
  const char *jars_dir;
  /* NULL: $SL_KAFKA_JAVA, else $JAVA_HOME/bin/java, else java in PATH. */
  const char *java;
  int ready_timeout_ms; /* 0 selects 60000: start-up and stop bound */
  const char *base_dir; /* NULL: $TMPDIR, else /tmp */
  /* NULL-terminated "name=value" lines added to every node's
   * server.properties (after sluice's, so they win).  Borrowed during
   * sl_kafka_start. */
  const char *const *extra_settings;
} sl_kafka_opts_t;

typedef struct sl_kafka_s sl_kafka_t;

/** @brief Defaults: one node.  @thread any */
void sl_kafka_opts_init(sl_kafka_opts_t *opts);

/**
 * @brief Format and start every node and wait until each one is up and
 * every broker is listed in the cluster's metadata.
 * @param[out] out_k written on success only.
 * @return SL_OK; SL_EINVAL (options); SL_ENOTFOUND (no jars: the message
 * says to run tools/kafka-jars; no java); -ETIMEDOUT; SL_EIO (the format
 * or a node failed: the message quotes the last lines of its log).  On
 * error nothing is left running and the directories are removed
 * (SL_TEST_KEEP keeps them).
 * @ownership the caller destroys *out_k with sl_kafka_destroy.
 */
int sl_kafka_start(const sl_kafka_opts_t *opts, sl_kafka_t **out_k,
                   sl_error_t **out_err);

/**
 * @brief Stop node id (1..nodes) and wait until it has exited.  CLEAN:
 * SIGTERM (a controlled shutdown: the controller moves its partition
 * leaderships first); CRASH: SIGKILL.  The node's data and ports stay for
 * sl_kafka_node_start_again.  Stopping a stopped node does nothing.
 * @return SL_OK; SL_EINVAL (id); -ETIMEDOUT (it was then killed).
 */
int sl_kafka_node_stop(sl_kafka_t *k, int id, sl_server_stop_mode_t mode,
                       sl_error_t **out_err);

/** @brief Start a stopped node again on its data and ports and wait until
 * it is up and listed.  SL_ESTATE when it runs. */
int sl_kafka_node_start_again(sl_kafka_t *k, int id, sl_error_t **out_err);

/** @brief Kill every node (the data is thrown away), remove the
 * directories, free.  NULL does nothing.  Brokers not destroyed are killed
 * at exit, and by their guards when the process dies. */
void sl_kafka_destroy(sl_kafka_t *k);

/* Facts.  Strings are borrowed, valid until destroy. */
int sl_kafka_node_count(const sl_kafka_t *k);
/* "127.0.0.1:P1,127.0.0.1:P2,..." of every node, running or not. */
const char *sl_kafka_bootstrap(const sl_kafka_t *k);
/* The broker (client) port of node id; 0 for a bad id. */
int sl_kafka_node_port(const sl_kafka_t *k, int id);
const char *sl_kafka_node_dir(const sl_kafka_t *k, int id);
const char *sl_kafka_node_log_path(const sl_kafka_t *k, int id);
/* The node's JVM, or -1 when stopped. */
pid_t sl_kafka_node_pid(const sl_kafka_t *k, int id);
pid_t sl_kafka_node_guard_pid(const sl_kafka_t *k, int id);
/* The broker's version, from the jar's name ("4.1.1"). */
const char *sl_kafka_version(const sl_kafka_t *k);
const char *sl_kafka_cluster_id(const sl_kafka_t *k);

/* ------------------------------------------------------------------ */
/* librdkafka helpers for set-up and assertions.  librdkafka's errors
 * become SL_EIO with the librdkafka error name and text. */

/**
 * @brief A configuration with bootstrap.servers set to the cluster and
 * librdkafka's log kept quiet (a stopped node's refused connections are
 * expected in these tests); NULL when out of memory.
 */
rd_kafka_conf_t *sl_kafka_conf_new(const sl_kafka_t *k);

/** @brief Set name=value on conf; SL_EINVAL names the setting. */
int sl_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                      const char *value, sl_error_t **out_err);

/**
 * @brief Create topic with the Admin API (rd_kafka_CreateTopics) and wait
 * until every partition has a leader in the metadata.  configs: NULL or
 * NULL-terminated "name=value" topic settings.
 */
int sl_kafka_create_topic(const sl_kafka_t *k, const char *topic,
                          int partitions, int replication,
                          const char *const *configs, sl_error_t **out_err);

/**
 * @brief Grow topic to total partitions (rd_kafka_CreatePartitions) and
 * wait until every partition has a leader in the metadata.
 */
int sl_kafka_add_partitions(const sl_kafka_t *k, const char *topic,
                            int total, sl_error_t **out_err);

/**
 * @brief The leader of topic/partition from the metadata, as a node id;
 * -1 when it has none.  SL_ENOTFOUND when the topic or partition is
 * unknown.
 */
int sl_kafka_partition_leader(const sl_kafka_t *k, const char *topic,
                              int partition, int *out_leader,
                              sl_error_t **out_err);

/**
 * @brief Wait until the leader of topic/partition is a running node other
 * than not_id (not_id -1: any leader), within timeout_ms.
 * @return SL_OK with *out_leader; -ETIMEDOUT naming the last leader seen.
 */
int sl_kafka_wait_leader(const sl_kafka_t *k, const char *topic,
                         int partition, int not_id, int timeout_ms,
                         int *out_leader, sl_error_t **out_err);

/** @brief Low and high watermark of topic/partition (ListOffsets). */
int sl_kafka_watermarks(const sl_kafka_t *k, const char *topic,
                        int partition, int64_t *out_low, int64_t *out_high,
                        sl_error_t **out_err);

/** @brief The default broker version of the tests (tests/tools/kafka/
 * pom.xml), for messages. */
const char *sl_kafka_default_version(void);

#endif
