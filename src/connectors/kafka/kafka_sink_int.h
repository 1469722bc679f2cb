/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the Kafka sink's two writers share: the sink's configuration, the
 * row-to-record formatting, the producer configuration and the topic
 * check (kafka_sink.c), used by the at-least-once writer (kafka_sink.c)
 * and by the exactly-once writer and committer (kafka_sink_eos.c).
 * Internal.
 */
#ifndef SL_KAFKA_SINK_INT_H
#define SL_KAFKA_SINK_INT_H

#include <pthread.h>

#include <librdkafka/rdkafka.h>

#include "sluice/sluice.h"

struct keos_committer_s;

typedef struct sl__ksink_s {
  char *bootstrap;
  char *topic;
  char **key_fields;
  uint32_t n_key;
  sl_format_t format;
  char delim;
  bool changelog;
  int timeout_ms;
  char **props; /* name, value pairs */
  uint32_t n_props;
  /* Exactly-once only. */
  bool is_eos;
  char *txn_prefix;   /* NULL: sluice-<job>-<sink uid> */
  uint32_t pool_size; /* transactional ids per subtask */
  /* The committers of this sink's subtasks, by subtask: a writer uses its
   * committer's producers (a transaction can only be committed by the
   * producer that began it).  Guarded by mu: subtasks run on their own
   * threads. */
  pthread_mutex_t mu;
  struct keos_committer_s **subs;
  uint32_t n_subs;
} sl__ksink_t;

/* The indexes of s's key fields in schema (*out NULL without key
 * fields); SL_EINVAL (fatal) naming a missing field. */
int sl__ksink_key_idx(const sl__ksink_t *s, const sl_schema_t *schema,
                      uint32_t **out, sl_error_t **out_err);

/* The record of row: *val the formatted row without its line end, *key
 * the key fields' text joined with ','.  Both are cleared first. */
int sl__ksink_format(const sl__ksink_t *s, const uint32_t *key_idx,
                     const sl_row_t *row, sl_bytes_t *key, sl_bytes_t *val,
                     sl_error_t **out_err);

/* A producer with sluice's settings, extra (n_extra name, value pairs,
 * e.g. transactional.id) and the user's properties; delivery reports go to
 * dr with opaque. */
int sl__ksink_producer(const sl__ksink_t *s, const char *const (*extra)[2],
                       size_t n_extra,
                       void (*dr)(rd_kafka_t *, const rd_kafka_message_t *,
                                  void *),
                       void *opaque, rd_kafka_t **out_rk,
                       sl_error_t **out_err);

/* The partition count of s's topic (metadata through rk within the
 * sink's timeout), or an error naming the servers or the topic. */
int sl__ksink_partitions(const sl__ksink_t *s, rd_kafka_t *rk,
                         int32_t *out_n, sl_error_t **out_err);

/* librdkafka's log, silenced (the sink reports errors itself). */
void sl__ksink_log_quiet(const rd_kafka_t *rk, int level, const char *fac,
                         const char *buf);

/* The exactly-once sink's committable (its replay log), little-endian:
 * "K", version 2, u32 slot, u32 records, u16 length and bytes of the
 * transactional id prefix, the same for the topic, then per record u32
 * key length (UINT32_MAX: no key), key, u32 value length, value, i32
 * partition (-1: the partitioner's).  log_parse checks every bound (SL_OK
 * or SL_ECORRUPT); log_record then reads one record and returns the
 * next. */
typedef struct sl__klog_s {
  uint32_t slot, n;
  const char *prefix, *topic; /* not NUL-terminated */
  size_t prefix_len, topic_len;
  const uint8_t *rec; /* the first record */
} sl__klog_t;
typedef struct sl__klog_rec_s {
  bool has_key;
  const uint8_t *key, *val;
  uint32_t klen, vlen;
  int32_t part;
} sl__klog_rec_t;
int sl__kafka_eos_log_parse(const uint8_t *b, size_t len, sl__klog_t *out);
const uint8_t *sl__kafka_eos_log_record(const uint8_t *rec,
                                        sl__klog_rec_t *r);

/* The exactly-once sink's vtable (kafka_sink_eos.c). */
extern const sl_sink_vt_t sl__kafka_eos_vt;
void sl__ksink_destroy(void *ctx);

#endif
