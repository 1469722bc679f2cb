/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Growable byte buffers, varints and checksums.  See README.md.
 */
#include <stdarg.h>
#include <stdio.h>

#include <xxhash.h>

#include "core.h"

void sl_bytes_init(sl_bytes_t *b) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void sl_bytes_close(sl_bytes_t *b) {
  sl_free(b->data);
  sl_bytes_init(b);
}

int sl_bytes_reserve(sl_bytes_t *b, size_t n) {
  if (b->cap - b->len >= n) return SL_OK;
  size_t need = b->len + n;
  if (need < b->len) return SL_EOVERFLOW;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  uint8_t *d = sl_realloc(b->data, cap);
  if (d == NULL) return SL_ENOMEM;
  b->data = d;
  b->cap = cap;
  return SL_OK;
}

int sl_bytes_append(sl_bytes_t *b, const void *p, size_t n) {
  int rc = sl_bytes_reserve(b, n);
  if (rc != SL_OK) return rc;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  return SL_OK;
}

int sl_bytes_append_str(sl_bytes_t *b, const char *s) {
  return sl_bytes_append(b, s, strlen(s));
}

int sl_bytes_append_u64le(sl_bytes_t *b, uint64_t v) {
  uint8_t p[8];
  for (int i = 0; i < 8; i++, v >>= 8) p[i] = (uint8_t)v;
  return sl_bytes_append(b, p, 8);
}

/* The formatted text is appended; the NUL after it is kept in the
 * capacity, not counted in len. */
static int bytes_vprintf(sl_bytes_t *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return SL_EINVAL;
  int rc = sl_bytes_reserve(b, (size_t)n + 1);
  if (rc != SL_OK) return rc;
  vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return SL_OK;
}

int sl_bytes_printf(sl_bytes_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = bytes_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

size_t sl__put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    p[n++] = (uint8_t)(c | (v ? 0x80 : 0));
  } while (v);
  return n;
}

int sl__bytes_put_varint(sl_bytes_t *b, uint64_t v) {
  uint8_t tmp[SL_VARINT_MAX];
  return sl_bytes_append(b, tmp, sl__put_varint(tmp, v));
}

size_t sl__get_varint(const uint8_t *p, size_t len, uint64_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < len && i < 10; i++) {
    uint64_t c = p[i] & 0x7f;
    if (i == 9 && c > 1) return 0; /* more than 64 bits */
    v |= c << (7 * i);
    if ((p[i] & 0x80) == 0) {
      *out = v;
      return i + 1;
    }
  }
  return 0;
}

uint64_t sl_hash64(const void *p, size_t len) { return XXH3_64bits(p, len); }

/* ---- the sticky byte builder (core.h) ---- */

void sl__acc_init(sl_acc_t *w) {
  sl_bytes_init(&w->b);
  w->rc = SL_OK;
}

void sl__acc_close(sl_acc_t *w) {
  sl_bytes_close(&w->b);
  w->rc = SL_OK;
}

void sl__acc_put(sl_acc_t *w, const void *p, size_t n) {
  if (w->rc != SL_OK) return;
  int rc = sl_bytes_append(&w->b, p, n);
  if (rc != SL_OK) w->rc = rc;
}

void sl__acc_put_u8(sl_acc_t *w, uint8_t v) { sl__acc_put(w, &v, 1); }

void sl__acc_put_u32le(sl_acc_t *w, uint32_t v) {
  uint8_t x[4];
  sl__put_u32le(x, v);
  sl__acc_put(w, x, 4);
}

void sl__acc_put_u64le(sl_acc_t *w, uint64_t v) {
  uint8_t x[8];
  sl__put_u64le(x, v);
  sl__acc_put(w, x, 8);
}

void sl__acc_put_varint(sl_acc_t *w, uint64_t v) {
  uint8_t tmp[SL_VARINT_MAX];
  sl__acc_put(w, tmp, sl__put_varint(tmp, v));
}

void sl__acc_put_str(sl_acc_t *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  sl__acc_put_varint(w, n);
  sl__acc_put(w, s, n);
}

void sl__acc_printf(sl_acc_t *w, const char *fmt, ...) {
  if (w->rc != SL_OK) return;
  va_list ap;
  va_start(ap, fmt);
  w->rc = bytes_vprintf(&w->b, fmt, ap);
  va_end(ap);
}

int sl__acc_status(const sl_acc_t *w) { return w->rc; }

int sl__acc_finish(sl_acc_t *w, uint8_t **out_data, size_t *out_len) {
  if (w->rc == SL_OK) sl__acc_put(w, "", 1); /* the NUL past the end */
  int rc = w->rc;
  if (rc != SL_OK) {
    sl__acc_close(w);
    return rc;
  }
  *out_data = w->b.data;
  *out_len = w->b.len - 1;
  sl_bytes_init(&w->b);
  return SL_OK;
}
