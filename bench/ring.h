/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The streaming driver's queue: a single-producer single-consumer ring of
 * fixed-size event records in a shared-memory file, so that the driver
 * runs as a separate process and never waits for its consumer.  The ring
 * is large; when it is full the driver does not block (that would hide
 * latency: coordinated omission) but counts the events it could not
 * enqueue as overflow, which makes the run unsustainable.
 *
 * Counters are monotonic 64-bit event counts: `head` (written by the
 * driver), `tail` (read by the consumer), `overflow`.  The backlog is
 * head - tail; generated = head + overflow.  Each event carries its
 * generation stamp: the time the schedule says it is due (t0 + seq / rate),
 * not the time it was written, so a late driver shows up as latency.
 * Threads/processes: one producer, one consumer; the counters are
 * accessed with acquire/release atomics.
 */
#ifndef SL_BENCH_RING_H
#define SL_BENCH_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SL_RING_MAGIC 0x31474e5245434c53ull /* "SLCERNG1" */

typedef struct sl_ring_event_s {
  int64_t gen_ns;   /* scheduled generation time, CLOCK_MONOTONIC */
  uint64_t seq;     /* 0, 1, 2, ... */
  uint64_t key;
  int64_t value;
  uint8_t pad[32];  /* 64 bytes per event */
} sl_ring_event_t;

typedef struct sl_ring_hdr_s {
  uint64_t magic;
  uint64_t capacity;           /* events, a power of two */
  _Atomic uint64_t head;       /* events written */
  uint8_t pad0[40];
  _Atomic uint64_t tail;       /* events consumed */
  uint8_t pad1[56];
  _Atomic uint64_t overflow;   /* events the driver could not enqueue */
  _Atomic uint64_t is_done;    /* the driver finished */
  double rate;                 /* events per second */
  int64_t t0_ns;               /* schedule origin */
} sl_ring_hdr_t;

typedef struct sl_ring_s {
  sl_ring_hdr_t *hdr;
  sl_ring_event_t *ev;
  size_t map_len;
} sl_ring_t;

/** @brief Create (truncate) the ring file at path with capacity events
 * (rounded up to a power of two).  @return 0 or -errno. */
int sl_ring_create(const char *path, uint64_t capacity, sl_ring_t *out);
/** @brief Open an existing ring.  @return 0, -errno, or -EPROTO (not a ring). */
int sl_ring_open(const char *path, sl_ring_t *out);
void sl_ring_close(sl_ring_t *r);

/** @brief Backlog: written and not yet consumed. */
static inline uint64_t sl_ring_backlog(const sl_ring_t *r) {
  uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
  uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
  return head - tail;
}

/** @brief Consumer: copy up to max events out; returns how many. */
size_t sl_ring_read(sl_ring_t *r, sl_ring_event_t *out, size_t max);

/* ---- the driver ----------------------------------------------------- */

typedef struct sl_driver_report_s {
  double t_s;           /* seconds since t0 */
  uint64_t generated;   /* head + overflow */
  uint64_t consumed;    /* tail */
  uint64_t backlog;     /* head - tail, read once */
  uint64_t overflow;
} sl_driver_report_t;

/** Called about every report_ms with the driver's counters. */
typedef void (*sl_driver_report_fn)(void *user, const sl_driver_report_t *r);

typedef struct sl_driver_opts_s {
  double rate;          /* events per second, > 0 */
  double duration_s;    /* > 0 */
  uint64_t keys;        /* key = splitmix(seq) % keys */
  int64_t report_ms;    /* default 1000 */
  sl_driver_report_fn report;
  void *user;
  _Atomic bool *stop;   /* optional: stop early when set */
} sl_driver_opts_t;

/**
 * @brief Generate events on schedule until duration_s has passed: event
 * seq is due at t0 + seq / rate and is written as soon as it is due (the
 * driver sleeps at most 1 ms between batches).  The final report has
 * t_s >= duration_s.  @return 0.
 */
int sl_driver_run(sl_ring_t *r, const sl_driver_opts_t *o,
                  sl_driver_report_t *out_final);

#ifdef __cplusplus
}
#endif
#endif
