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
