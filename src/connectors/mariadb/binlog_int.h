/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the binlog decoder (binlog_decode.c, binlog_table.c,
 * binlog_value.c): the bounds-checked cursor, little- and big-endian
 * loads and the error helpers that name event, position and field.
 */
#ifndef SL_BINLOG_INT_H
#define SL_BINLOG_INT_H

#include <pthread.h>

#include "connectors/mariadb/binlog_decode.h"

/* A read position inside one event: p[off..end) may be read.  base is
 * added to off in messages (offsets count from the event's first byte). */
typedef struct sl_binlog_cur_s {
  const sl_binlog_decoder_t *d;
  const uint8_t *hdr; /* the event, for the message's coordinates */
  size_t hdr_len;
  const uint8_t *p;
  size_t off, end, base;
} sl_binlog_cur_t;

static inline uint16_t sl__le16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t sl__le24(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
}
static inline uint32_t sl__le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}
static inline uint64_t sl__le48(const uint8_t *p) {
  return (uint64_t)sl__le32(p) | ((uint64_t)sl__le16(p + 4) << 32);
}
static inline uint64_t sl__le64(const uint8_t *p) {
  return (uint64_t)sl__le32(p) | ((uint64_t)sl__le32(p + 4) << 32);
}
static inline uint64_t sl__be(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

uint32_t sl__binlog_crc32(const uint8_t *p, size_t len);

/* "WRITE_ROWS_V1 event at binlog.000001:1234" into buf. */
void sl__binlog_where(const sl_binlog_decoder_t *d, const uint8_t *hdr,
                      size_t len, char *buf, size_t size);
/* Sets *out_err to "<where>: <fmt>" and returns code. */
int sl__binlog_fail(const sl_binlog_cur_t *c, int code, sl_error_t **out_err,
                    const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* SL_OK when n bytes are left, else SL_ECORRUPT naming field. */
int sl__binlog_need(sl_binlog_cur_t *c, size_t n, const char *field,
                    sl_error_t **out_err);
/* A packed (length-encoded) integer. */
int sl__binlog_packed(sl_binlog_cur_t *c, uint64_t *out, const char *field,
                      sl_error_t **out_err);

void sl__binlog_table_free(sl_binlog_table_t *t);
/* TABLE_MAP from the post-header on (pl: its length, 6 or 8). */
int sl__binlog_table_map(sl_binlog_decoder_t *d, sl_binlog_cur_t *c,
                         uint32_t pl, sl_binlog_table_t **out_t,
                         sl_error_t **out_err);

#endif
