/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's workloads and their rings (bench/ring.h): which events the
 * streaming driver writes and into which shared-memory ring files.
 *
 *   keys      one stream: (key, value), key uniform or Zipf over `keys`;
 *             rings PREFIX.keys.<i>
 *   pairs     two streams for a windowed join (Karimov et al.'s ads and
 *             purchases): even events to PREFIX.left.<i>, odd ones to
 *             PREFIX.right.<i>, both keyed like `keys`
 *   nexmark   persons, auctions and bids from the Nexmark generator
 *             (bench/nexmark.h), each kind in its own rings
 *             PREFIX.person.<i>, PREFIX.auction.<i>, PREFIX.bid.<i>, so that
 *             a query reads only the kinds it needs
 *
 * Every stream has `splits` rings; the driver deals a stream's events to
 * them round-robin (one sluice source subtask reads each ring: SPSC).
 * Event times are the generation stamps (CLOCK_MONOTONIC, microseconds),
 * so events are in order within a ring.
 */
#ifndef SL_BENCH_WORKLOAD_H
#define SL_BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "nexmark.h"
#include "ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_workload_kind_e {
  SL_WORKLOAD_KEYS = 0,
  SL_WORKLOAD_PAIRS = 1,
  SL_WORKLOAD_NEXMARK = 2
} sl_workload_kind_t;

#define SL_WORKLOAD_MAX_STREAMS 3
#define SL_WORKLOAD_MAX_SPLITS 16

typedef struct sl_workload_s {
  sl_workload_kind_t kind;
  uint32_t splits;          /* rings per stream, 1..SL_WORKLOAD_MAX_SPLITS */
  uint64_t keys;            /* keys, pairs: distinct keys */
  double zipf;              /* keys, pairs: 0 = uniform, else the exponent */
  uint64_t capacity;        /* events per ring */
  sl_nexmark_config_t nexmark;
  uint32_t needed;          /* bit i: stream i is read and gets rings;
                               0 = every stream.  Events of the others are
                               generated and skipped (SL_DRIVER_SKIP). */
  /* Filled by sl_workload_init: */
  uint32_t n_streams;
  const char *stream_names[SL_WORKLOAD_MAX_STREAMS];
  double *zipf_cdf;         /* keys entries, when zipf > 0 */
  uint64_t next_split[SL_WORKLOAD_MAX_STREAMS];
  int32_t first_ring[SL_WORKLOAD_MAX_STREAMS]; /* -1: not needed */
  uint32_t n_rings;
} sl_workload_t;

/** @brief Defaults: keys, 1 split, 100,000 uniform keys, 2^20 events. */
void sl_workload_defaults(sl_workload_t *w);
/** @brief Check the fields and build the Zipf table.  @return 0, -EINVAL
 * or -ENOMEM. */
int sl_workload_init(sl_workload_t *w);
void sl_workload_close(sl_workload_t *w);
/** @brief Stream index of a name ("bid", "keys", ...), or -1. */
int sl_workload_stream(const sl_workload_t *w, const char *name);
/** @brief The ring file of (stream, split) under prefix, into buf. */
void sl_workload_ring_path(const sl_workload_t *w, const char *prefix,
                           uint32_t stream, uint32_t split, char *buf,
                           size_t size);
/**
 * @brief Create the rings of the needed streams (n_rings of them,
 * stream-major: first_ring[stream] + split) under prefix.  @return 0 or -errno; on error none is left open.
 */
int sl_workload_create_rings(const sl_workload_t *w, const char *prefix,
                             sl_ring_t *rings);
void sl_workload_remove_rings(const sl_workload_t *w, const char *prefix,
                              sl_ring_t *rings);
/** @brief The driver fill (sl_driver_fill_fn) of this workload; user is the
 * sl_workload_t. */
uint32_t sl_workload_fill(void *user, sl_ring_event_t *e, uint8_t *payload,
                          uint32_t payload_cap);
/** @brief The Zipf key for a uniform u in [0, 1): exposed for tests. */
uint64_t sl_workload_zipf_key(const sl_workload_t *w, double u);

#ifdef __cplusplus
}
#endif
#endif
