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

/* The fixed head of every slot.  A ring made with a slot size above 64
 * bytes carries `len` payload bytes right after the head (sl_ring_payload),
 * for events with more fields (the Nexmark workload). */
typedef struct sl_ring_event_s {
  int64_t gen_ns;   /* scheduled generation time, CLOCK_MONOTONIC */
  uint64_t seq;     /* 0, 1, 2, ... over every ring the driver writes */
  uint64_t key;
  int64_t value;
  uint32_t len;     /* payload bytes after the head */
  uint32_t kind;    /* workload-defined (Nexmark: person, auction, bid) */
  uint8_t pad[24];  /* 64 bytes */
} sl_ring_event_t;

#define SL_RING_HEAD_SIZE ((uint32_t)sizeof(sl_ring_event_t))

typedef struct sl_ring_hdr_s {
  uint64_t magic;
  uint64_t capacity;           /* events, a power of two */
  _Atomic uint64_t head;       /* events written */
  uint8_t pad0[40];
  _Atomic uint64_t tail;       /* events consumed */
  uint8_t pad1[56];
  _Atomic uint64_t overflow;   /* events the driver could not enqueue */
  _Atomic uint64_t is_done;    /* the driver finished */
  double rate;                 /* events per second over all rings */
  int64_t t0_ns;               /* schedule origin */
  uint64_t slot_size;          /* bytes per slot: head + payload capacity */
  /* Events the schedule has produced so far over all the driver's rings,
   * including those skipped (streams nobody reads) and dropped; written
   * after every batch.  The driver is behind its schedule by
   * rate * (now - t0_ns) - sequence events. */
  _Atomic uint64_t sequence;
  uint8_t pad2[80];            /* the slots start 64-byte aligned */
} sl_ring_hdr_t;

_Static_assert(sizeof(sl_ring_hdr_t) % 64 == 0,
               "ring slots must start on a cache line");

typedef struct sl_ring_s {
  sl_ring_hdr_t *hdr;
  sl_ring_event_t *ev;
  size_t map_len;
} sl_ring_t;

/** @brief Create (truncate) the ring file at path with capacity events
 * (rounded up to a power of two) of slot_size bytes each (rounded up to a
 * multiple of 64; 0 or 64: heads only).  @return 0 or -errno. */
int sl_ring_create(const char *path, uint64_t capacity, uint32_t slot_size,
                   sl_ring_t *out);
/** @brief Open an existing ring.  @return 0, -errno, or -EPROTO (not a ring). */
int sl_ring_open(const char *path, sl_ring_t *out);
void sl_ring_close(sl_ring_t *r);

/** @brief Backlog: written and not yet consumed. */
static inline uint64_t sl_ring_backlog(const sl_ring_t *r) {
  uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
  uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
  return head - tail;
}

/** @brief The slot of event number i (i counts from 0 over the ring's life). */
static inline sl_ring_event_t *sl_ring_slot(const sl_ring_t *r, uint64_t i) {
  return (sl_ring_event_t *)((char *)r->ev + (size_t)(i & (r->hdr->capacity - 1)) *
                                                 r->hdr->slot_size);
}
static inline uint8_t *sl_ring_payload(sl_ring_event_t *e) {
  return (uint8_t *)(e + 1);
}
static inline uint32_t sl_ring_payload_cap(const sl_ring_t *r) {
  return (uint32_t)(r->hdr->slot_size - SL_RING_HEAD_SIZE);
}

/** @brief Consumer: copy up to max event heads out; returns how many. */
size_t sl_ring_read(sl_ring_t *r, sl_ring_event_t *out, size_t max);

/**
 * @brief Consumer, zero copy: the events [*out_first, *out_first + n) are
 * readable in place (sl_ring_slot) until sl_ring_consume(r, n).  Returns
 * n <= max.
 */
static inline size_t sl_ring_peek(const sl_ring_t *r, uint64_t *out_first,
                                  size_t max) {
  uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
  *out_first = tail;
  return head - tail < max ? (size_t)(head - tail) : max;
}
static inline void sl_ring_consume(sl_ring_t *r, size_t n) {
  uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);
  atomic_store_explicit(&r->hdr->tail, tail + n, memory_order_release);
}
static inline bool sl_ring_is_done(const sl_ring_t *r) {
  return atomic_load_explicit(&r->hdr->is_done, memory_order_acquire) != 0;
}

/* ---- the driver ----------------------------------------------------- */

typedef struct sl_driver_report_s {
  double t_s;           /* seconds since t0 */
  uint64_t generated;   /* queued + overflow + skipped + dropped */
  uint64_t consumed;    /* tail */
  uint64_t backlog;     /* head - tail, read once */
  uint64_t overflow;
  uint64_t dropped;     /* events the fill could not encode (an error) */
  uint64_t skipped;     /* events of streams nobody reads (not queued) */
  int64_t max_lag_ns;   /* most the driver ever wrote an event after its
                           scheduled time: large means the driver, not the
                           consumer, limited the run */
} sl_driver_report_t;

/** Called about every report_ms with the driver's counters. */
typedef void (*sl_driver_report_fn)(void *user, const sl_driver_report_t *r);

/**
 * Fills event seq (head already set: gen_ns, seq; key/value/len/kind zero)
 * and returns the ring it goes to, < n_rings.  The payload has room for
 * sl_ring_payload_cap bytes of every ring; a fill that needs more for the
 * ring it picks must not write them and returns SL_DRIVER_DROP (the event
 * is counted as dropped, an error).  An event of a stream nobody reads is
 * SL_DRIVER_SKIP: generated and counted, not queued.
 */
#define SL_DRIVER_DROP UINT32_MAX
#define SL_DRIVER_SKIP (UINT32_MAX - 1)
typedef uint32_t (*sl_driver_fill_fn)(void *user, sl_ring_event_t *e,
                                      uint8_t *payload, uint32_t payload_cap);

typedef struct sl_driver_opts_s {
  double rate;          /* events per second over all rings, > 0 */
  double duration_s;    /* > 0 */
  uint64_t keys;        /* default fill: key = splitmix(seq) % keys */
  int64_t report_ms;    /* default 1000 */
  sl_driver_report_fn report;
  void *user;
  _Atomic bool *stop;   /* optional: stop early when set */
  /* Optional: the workload.  NULL: key/value as above, ring seq % n_rings. */
  sl_driver_fill_fn fill;
  void *fill_user;
} sl_driver_opts_t;

/**
 * @brief Generate events on schedule until duration_s has passed: event
 * seq is due at t0 + seq / rate and is written as soon as it is due (the
 * driver sleeps at most 0.2 ms between batches) into the ring the fill
 * picks.  Counters in the reports are sums over the rings.  The final
 * report has t_s >= duration_s.  @return 0.
 */
int sl_driver_run_rings(sl_ring_t *rings, uint32_t n_rings,
                        const sl_driver_opts_t *o,
                        sl_driver_report_t *out_final);
/** @brief One ring, the default workload. */
int sl_driver_run(sl_ring_t *r, const sl_driver_opts_t *o,
                  sl_driver_report_t *out_final);

#ifdef __cplusplus
}
#endif
#endif
