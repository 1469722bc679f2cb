/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal interface of the core module: assertions, corruption reports,
 * panics, little-endian helpers and the clock used by schedulers.  Other
 * modules include this header, never core_int.h.  See README.md.
 */
#ifndef SL_CORE_H
#define SL_CORE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sl_common.h"
#include "sluice/sl_row.h"

#define SL_UNUSED(x) ((void)(x))
#define SL_LIKELY(x) __builtin_expect(!!(x), 1)
#define SL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SL_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Broken invariant where going on would corrupt state. */
__attribute__((noreturn, format(printf, 3, 4))) void
sl_panic_at(const char *file, int line, const char *fmt, ...);
#define sl_panic(...) sl_panic_at(__FILE__, __LINE__, __VA_ARGS__)

#ifdef SL_DEBUG
#define SL_ASSERT(x)                                                     \
  do {                                                                   \
    if (!(x)) sl_panic("assertion failed: %s", #x);                      \
  } while (0)
#define SL_ALWAYS(x) ((x) ? 1 : (sl_panic("assertion failed: %s", #x), 0))
#define SL_NEVER(x) ((x) ? (sl_panic("assertion failed: !(%s)", #x), 1) : 0)
#else
#define SL_ASSERT(x) ((void)0)
#define SL_ALWAYS(x) (x)
#define SL_NEVER(x) (x)
#endif

/* Report corruption with file and line; evaluates to SL_ECORRUPT. */
int sl__corrupt_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define SL_CORRUPT(...) sl__corrupt_at(__FILE__, __LINE__, __VA_ARGS__)

/*
 * Error classes, set where the cause is known and read by the restart
 * strategy (graph/run.c): a fatal error (a malformed input record, a bad
 * configuration) fails the same way after any restart, so the job is not
 * restarted; a retriable one (an I/O hiccup) may succeed on a retry.  Both
 * mark *out_err (if there is one) and return code, for
 *     return sl__error_fatal(out_err, sl_error_set(out_err, ...));
 */
int sl__error_fatal(sl_error_t **out_err, int code);
int sl__error_retriable(sl_error_t **out_err, int code);

/* Text-format helpers shared by format_value.c, format_csv.c and
 * format_json.c.  sl__format_echo quotes up to 40 bytes of input text in a
 * message, escaping bytes a reader cannot see (each to at most 4), cut
 * with "..."; buf should hold SL_ECHO_SIZE bytes. */
#define SL_ECHO_SIZE 164
int sl__format_f64(double v, char *buf, size_t size);
void sl__format_echo(const char *text, size_t len, char *buf, size_t size);

/* Clocks: only schedulers and the metrics reporter read these. */
int64_t sl__clock_realtime_ns(void);
int64_t sl__clock_monotonic_ns(void);

/* Little-endian and big-endian helpers. */
static inline void sl__put_u32le(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline uint32_t sl__get_u32le(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline void sl__put_u64le(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint64_t sl__get_u64le(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void sl__put_u32be(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
static inline void sl__put_u64be(uint8_t *p, uint64_t v) {
  sl__put_u32be(p, (uint32_t)(v >> 32));
  sl__put_u32be(p + 4, (uint32_t)v);
}

/* Varints (LEB128) and zig-zag. */
static inline uint64_t sl__zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t sl__unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}
#define SL_VARINT_MAX 10 /* bytes of the longest varint (a uint64_t) */
/** @brief Encode v at p (room for SL_VARINT_MAX); returns bytes written. */
size_t sl__put_varint(uint8_t *p, uint64_t v);
int sl__bytes_put_varint(sl_bytes_t *b, uint64_t v)
    __attribute__((warn_unused_result));

/*
 * A byte accumulator: a builder with a sticky error (SQLite's
 * StrAccum.accError).  The first failed append records its code; every
 * later append is a no-op.
 * The caller checks once, with sl__acc_status() or sl__acc_finish(),
 * before the bytes are hashed, written, renamed or acknowledged, so a
 * half-built encoding can never be mistaken for a whole one.  The appends
 * return nothing on purpose: there is no result to forget.
 */
typedef struct sl_acc_s {
  sl_bytes_t b; /* the bytes so far; b.data is owned */
  int rc;       /* SL_OK, or the first error (sticky) */
} sl_acc_t;

void sl__acc_init(sl_acc_t *w);
void sl__acc_close(sl_acc_t *w);
void sl__acc_put(sl_acc_t *w, const void *p, size_t n);
void sl__acc_put_u8(sl_acc_t *w, uint8_t v);
void sl__acc_put_u32le(sl_acc_t *w, uint32_t v);
void sl__acc_put_u64le(sl_acc_t *w, uint64_t v);
void sl__acc_put_varint(sl_acc_t *w, uint64_t v);
/** @brief A varint length, then the bytes of s (NULL: empty). */
void sl__acc_put_str(sl_acc_t *w, const char *s);
void sl__acc_printf(sl_acc_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** @brief SL_OK, or the first error of an append (SL_ENOMEM...). */
int sl__acc_status(const sl_acc_t *w) __attribute__((warn_unused_result));
/**
 * @brief Check the builder and, on SL_OK, move its bytes out: *out_data
 * (owned by the caller, NUL-terminated past *out_len) and *out_len.  On
 * an error the builder's bytes are freed and nothing is written.
 */
int sl__acc_finish(sl_acc_t *w, uint8_t **out_data, size_t *out_len)
    __attribute__((warn_unused_result));
/* Returns bytes consumed, or 0 on truncated/overlong input. */
size_t sl__get_varint(const uint8_t *p, size_t len, uint64_t *out);

/* The key hash in two steps: xxh3-64 of the canonical bytes (also used by
 * state tables), then the fold to the 32-bit key hash of sl_key_hash(). */
uint64_t sl__key_hash64(const void *key, size_t len);
uint32_t sl__key_hash_fold(uint64_t h64);

/* Number of online CPUs (>= 1). */
uint32_t sl__cpu_count(void);

/* Schema internals used by the row code. */
uint64_t sl__schema_nonnull_mask_word(const sl_schema_t *s, uint32_t word);

#endif
