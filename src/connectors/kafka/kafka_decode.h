/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka source's record -> row decode (kafka_source.c), apart from
 * librdkafka so that the fuzz target can drive it.  Internal.
 */
#ifndef SL_KAFKA_DECODE_H
#define SL_KAFKA_DECODE_H

#include "sluice/sluice.h"

typedef struct sl_kafka_hdr_s {
  const char *name;
  const void *value; /* NULL: a null header value */
  size_t len;
} sl_kafka_hdr_t;

typedef struct sl_kafka_decoder_s {
  sl_kafka_format_t format;
  char delim;
  const sl_schema_t *value_schema; /* the fields the value fills */
  const sl_schema_t *schema;       /* value fields + metadata fields */
  /* Index in schema of each metadata field, -1 when not asked for. */
  int f_timestamp, f_headers, f_key, f_partition, f_offset;
  sl_row_builder_t vb; /* for value_schema when metadata fields exist */
  bool has_meta;
} sl_kafka_decoder_t;

typedef struct sl_kafka_rec_s {
  const void *value;
  size_t value_len;
  const void *key;
  size_t key_len;
  int64_t timestamp_ms; /* -1: none */
  int32_t partition;
  int64_t offset;
  const sl_kafka_hdr_t *headers;
  size_t n_headers;
} sl_kafka_rec_t;

/* value_schema and schema are borrowed and must outlive the decoder. */
int sl__kafka_decoder_init(sl_kafka_decoder_t *d, sl_kafka_format_t format,
                           char delim, const sl_schema_t *value_schema,
                           const sl_schema_t *schema, sl_error_t **out_err);
void sl__kafka_decoder_close(sl_kafka_decoder_t *d);
/* Decode rec into b (a builder of d->schema; reset here).  Errors carry
 * the codec's message (the caller names topic, partition and offset). */
int sl__kafka_decode(sl_kafka_decoder_t *d, const sl_kafka_rec_t *rec,
                     sl_row_builder_t *b, sl_error_t **out_err);

#endif
