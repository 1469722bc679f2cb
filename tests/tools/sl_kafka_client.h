/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdkafka client steps against a real broker, for the broker tests and
 * for sl-kafka-check (the broker-version compatibility check): producers,
 * a transactional producer, read_committed reads of whole partitions, and
 * the whole feature check.  Errors are SL_EIO with librdkafka's error name
 * and text.  See docs/testing-servers.md.
 */
#ifndef SL_KAFKA_CLIENT_H
#define SL_KAFKA_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "sluice/sluice.h"

/** @brief A handle of type with bootstrap.servers and a quiet log; more
 * settings as NULL-terminated name, value pairs. */
int sl_kc_new(const char *bootstrap, rd_kafka_type_t type,
              const char *const *settings, rd_kafka_t **out_rk,
              sl_error_t **out_err);

/** @brief A producer with transactional.id txn_id after
 * rd_kafka_init_transactions.  settings as for sl_kc_new. */
int sl_kc_txn_producer(const char *bootstrap, const char *txn_id,
                       const char *const *settings, rd_kafka_t **out_rk,
                       sl_error_t **out_err);

/** @brief Produce n values "<prefix><i>" (i from first) to
 * topic/partition; with wait, flush and check every delivery report. */
int sl_kc_produce(rd_kafka_t *rk, const char *topic, int partition,
                  const char *prefix, int first, int n, bool wait,
                  sl_error_t **out_err);

/** @brief rd_kafka_error_t of a transactional call into an sl error
 * (consumes error); SL_OK for NULL. */
int sl_kc_txn_result(rd_kafka_error_t *error, const char *what,
                     sl_error_t **out_err);

/** @brief The values read from topic/partition from the beginning to its
 * end (the last stable offset for read_committed), through assign().
 * *out_values holds *out_n strings; free with sl_kc_values_free. */
int sl_kc_read_partition(const char *bootstrap, const char *topic,
                         int partition, bool read_committed,
                         char ***out_values, int *out_n,
                         sl_error_t **out_err);
void sl_kc_values_free(char **values, int n);

/* One record of a partition: key (NULL when the record has none) and
 * value as NUL-terminated copies, and the offset. */
typedef struct sl_kc_record_s {
  char *key;
  size_t key_len;
  char *value;
  size_t len;
  int64_t offset;
} sl_kc_record_t;

/** @brief Like sl_kc_read_partition, with keys and offsets; free with
 * sl_kc_records_free. */
int sl_kc_read_records(const char *bootstrap, const char *topic,
                       int partition, bool read_committed,
                       sl_kc_record_t **out_records, int *out_n,
                       sl_error_t **out_err);
void sl_kc_records_free(sl_kc_record_t *records, int n);

/** @brief The last stable offset (ListOffsets with read_committed: below
 * the first record of a transaction still open) and the high watermark of
 * topic/partition.  An open transaction holds *out_lso below *out_high
 * until it is committed or aborted (by its producer or by the broker's
 * transaction timeout). */
int sl_kc_offsets(const char *bootstrap, const char *topic, int partition,
                  int64_t *out_lso, int64_t *out_high, sl_error_t **out_err);

/** @brief The Java client's Utils.murmur2, and the partition its default
 * partitioner gives a non-null key ((murmur2 & 0x7fffffff) % partitions),
 * which sluice's Kafka sink also uses. */
int32_t sl_kc_murmur2(const void *key, size_t len);
int sl_kc_java_partition(const void *key, size_t len, int partitions);

/** @brief The committed offset (and its metadata, may be NULL; caller
 * frees) of group for topic/partition, read_committed; -1 when none. */
int sl_kc_committed(const char *bootstrap, const char *group,
                    const char *topic, int partition, int64_t *out_offset,
                    char **out_metadata, sl_error_t **out_err);

/* The number of steps sl_kafka_client_check runs. */
#define SL_KAFKA_CHECK_STEPS 14

/**
 * @brief Run every client feature sluice's Kafka connectors use against
 * the broker at bootstrap, one line per step on out ("ok  step" or
 * "FAIL step: message"), on a fresh topic.  @return the number of steps
 * that failed.
 */
int sl_kafka_client_check(const char *bootstrap, FILE *out);

#endif
