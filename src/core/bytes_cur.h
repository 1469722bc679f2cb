/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounds-checked reader over bytes and the matching writers, for the
 * connectors' checkpointed states (little-endian u8/u32/u64, u32-length-
 * prefixed blobs and strings).  A read past the end, or a string with a
 * NUL or too long for its buffer, sets `bad` and returns zero/NULL; every
 * later read fails too, so a decoder checks `bad` (and that `off` reached
 * `len`) once at the end.  Internal.
 * @thread any (a cursor is used by one thread).
 */
#ifndef SL_CORE_BYTES_CUR_H
#define SL_CORE_BYTES_CUR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "sluice/sluice.h"

typedef struct sl__rcur_s {
  const uint8_t *p;
  size_t len, off;
  bool bad;
} sl__rcur_t;

static inline const uint8_t *sl__cur_take(sl__rcur_t *c, size_t n) {
  if (c->bad || c->len - c->off < n) {
    c->bad = true;
    return NULL;
  }
  const uint8_t *p = c->p + c->off;
  c->off += n;
  return p;
}
static inline uint8_t sl__cur_u8(sl__rcur_t *c) {
  const uint8_t *p = sl__cur_take(c, 1);
  return p ? p[0] : 0;
}
static inline uint32_t sl__cur_u32(sl__rcur_t *c) {
  const uint8_t *p = sl__cur_take(c, 4);
  return p ? sl__get_u32le(p) : 0;
}
static inline uint64_t sl__cur_u64(sl__rcur_t *c) {
  const uint8_t *p = sl__cur_take(c, 8);
  return p ? sl__get_u64le(p) : 0;
}
/* A u32-length-prefixed blob (borrowed). */
static inline const uint8_t *sl__cur_blob(sl__rcur_t *c, uint32_t *out_len) {
  uint32_t n = sl__cur_u32(c);
  const uint8_t *p = sl__cur_take(c, n);
  *out_len = p ? n : 0;
  return p;
}
/* A u32-length-prefixed string without NUL, copied into buf. */
static inline bool sl__cur_str(sl__rcur_t *c, char *buf, size_t size) {
  uint32_t n;
  const uint8_t *p = sl__cur_blob(c, &n);
  if (p == NULL || n >= size || memchr(p, 0, n)) {
    c->bad = true;
    return false;
  }
  memcpy(buf, p, n);
  buf[n] = 0;
  return true;
}

static inline int sl__put_u8(sl_bytes_t *b, uint8_t v) {
  return sl_bytes_append(b, &v, 1);
}
static inline int sl__put_u32(sl_bytes_t *b, uint32_t v) {
  uint8_t x[4];
  sl__put_u32le(x, v);
  return sl_bytes_append(b, x, 4);
}
static inline int sl__put_blob(sl_bytes_t *b, const void *p, size_t n) {
  int rc = sl__put_u32(b, (uint32_t)n);
  return rc == SL_OK && n ? sl_bytes_append(b, p, n) : rc;
}
static inline int sl__put_str(sl_bytes_t *b, const char *s) {
  return sl__put_blob(b, s, strlen(s));
}

#endif
