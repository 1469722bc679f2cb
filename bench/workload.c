/* SPDX-License-Identifier: Apache-2.0 */
/* The driver's workloads and their rings (workload.h). */
#include "workload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Slot sizes (head + payload) from the bounds of the encoded sizes of
 * Nexmark events (bench/nexmark.h, checked by its tests).  An event that
 * does not fit is counted as dropped, which fails the run. */
static uint32_t slot_size(const sl_workload_t *w, uint32_t stream) {
  if (w->kind != SL_WORKLOAD_NEXMARK) return SL_RING_HEAD_SIZE;
  uint32_t max = stream == SL_NEX_AUCTION  ? SL_NEXMARK_MAX_AUCTION
                 : stream == SL_NEX_PERSON ? SL_NEXMARK_MAX_PERSON
                                           : SL_NEXMARK_MAX_BID;
  return SL_RING_HEAD_SIZE + max;
}

void sl_workload_defaults(sl_workload_t *w) {
  memset(w, 0, sizeof(*w));
  w->kind = SL_WORKLOAD_KEYS;
  w->splits = 1;
  w->keys = 100000;
  w->capacity = 1u << 20;
  sl_nexmark_config_init(&w->nexmark);
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int sl_workload_init(sl_workload_t *w) {
  if (w->splits == 0 || w->splits > SL_WORKLOAD_MAX_SPLITS || w->keys == 0 ||
      w->zipf < 0 || w->capacity == 0)
    return -EINVAL;
  memset(w->next_split, 0, sizeof(w->next_split));
  switch (w->kind) {
  case SL_WORKLOAD_KEYS:
    w->n_streams = 1;
    w->stream_names[0] = "keys";
    break;
  case SL_WORKLOAD_PAIRS:
    w->n_streams = 2;
    w->stream_names[0] = "left";
    w->stream_names[1] = "right";
    break;
  case SL_WORKLOAD_NEXMARK:
    /* Stream index = sl_nex_kind_t. */
    w->n_streams = 3;
    w->stream_names[SL_NEX_PERSON] = "person";
    w->stream_names[SL_NEX_AUCTION] = "auction";
    w->stream_names[SL_NEX_BID] = "bid";
    break;
  default:
    return -EINVAL;
  }
  uint32_t needed = w->needed ? w->needed : (1u << w->n_streams) - 1;
  if (needed >> w->n_streams) return -EINVAL;
  w->n_rings = 0;
  for (uint32_t i = 0; i < SL_WORKLOAD_MAX_STREAMS; i++) {
    w->first_ring[i] = -1;
    if (i < w->n_streams && (needed >> i & 1)) {
      w->first_ring[i] = (int32_t)w->n_rings;
      w->n_rings += w->splits;
    }
  }
  w->zipf_cdf = NULL;
  if (w->kind != SL_WORKLOAD_NEXMARK && w->zipf > 0) {
    /* P(rank k) proportional to 1 / k^s, k = 1..keys; key = rank - 1.
     * Inverted by binary search over the cumulative table. */
    if (w->keys > (1u << 26)) return -EINVAL;
    w->zipf_cdf = malloc(w->keys * sizeof(double));
    if (w->zipf_cdf == NULL) return -ENOMEM;
    double sum = 0;
    for (uint64_t k = 0; k < w->keys; k++) {
      sum += pow((double)(k + 1), -w->zipf);
      w->zipf_cdf[k] = sum;
    }
    for (uint64_t k = 0; k < w->keys; k++) w->zipf_cdf[k] /= sum;
    w->zipf_cdf[w->keys - 1] = 1.0;
  }
  return 0;
}

void sl_workload_close(sl_workload_t *w) {
  free(w->zipf_cdf);
  w->zipf_cdf = NULL;
}

int sl_workload_stream(const sl_workload_t *w, const char *name) {
  for (uint32_t i = 0; i < w->n_streams; i++)
    if (strcmp(w->stream_names[i], name) == 0) return (int)i;
  return -1;
}

void sl_workload_ring_path(const sl_workload_t *w, const char *prefix,
                           uint32_t stream, uint32_t split, char *buf,
                           size_t size) {
  snprintf(buf, size, "%s.%s.%u", prefix, w->stream_names[stream], split);
}

static uint32_t ring_stream(const sl_workload_t *w, uint32_t ring) {
  uint32_t s = 0;
  for (uint32_t i = 0; i < w->n_streams; i++)
    if (w->first_ring[i] >= 0 && (uint32_t)w->first_ring[i] <= ring) s = i;
  return s;
}

int sl_workload_create_rings(const sl_workload_t *w, const char *prefix,
                             sl_ring_t *rings) {
  memset(rings, 0, w->n_rings * sizeof(rings[0]));
  for (uint32_t i = 0; i < w->n_rings; i++) {
    char path[4096];
    uint32_t stream = ring_stream(w, i);
    sl_workload_ring_path(w, prefix, stream, i % w->splits, path,
                          sizeof(path));
    int rc = sl_ring_create(path, w->capacity, slot_size(w, stream),
                            &rings[i]);
    if (rc != 0) {
      sl_workload_remove_rings(w, prefix, rings);
      return rc;
    }
  }
  return 0;
}

void sl_workload_remove_rings(const sl_workload_t *w, const char *prefix,
                              sl_ring_t *rings) {
  for (uint32_t i = 0; i < w->n_rings; i++) {
    char path[4096];
    sl_workload_ring_path(w, prefix, ring_stream(w, i), i % w->splits, path,
                          sizeof(path));
    if (rings[i].hdr) unlink(path);
    sl_ring_close(&rings[i]);
  }
}

uint64_t sl_workload_zipf_key(const sl_workload_t *w, double u) {
  uint64_t lo = 0, hi = w->keys - 1;
  while (lo < hi) { /* first k with cdf[k] > u */
    uint64_t mid = lo + (hi - lo) / 2;
    if (w->zipf_cdf[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

static uint64_t pick_key(const sl_workload_t *w, uint64_t seq) {
  uint64_t r = mix(seq);
  if (w->zipf_cdf == NULL) return r % w->keys;
  return sl_workload_zipf_key(w, (double)(r >> 11) * 0x1.0p-53);
}

static uint32_t next_ring(sl_workload_t *w, uint32_t stream) {
  if (w->first_ring[stream] < 0) return SL_DRIVER_SKIP;
  uint32_t split = (uint32_t)(w->next_split[stream]++ % w->splits);
  return (uint32_t)w->first_ring[stream] + split;
}

uint32_t sl_workload_fill(void *user, sl_ring_event_t *e, uint8_t *payload,
                          uint32_t payload_cap) {
  sl_workload_t *w = user;
  if (w->kind == SL_WORKLOAD_NEXMARK) {
    sl_nex_event_t ev;
    uint32_t kind = (uint32_t)sl_nexmark_kind(&w->nexmark, e->seq);
    if (w->first_ring[kind] < 0) return SL_DRIVER_SKIP;
    sl_nexmark_generate(&w->nexmark, e->seq, e->gen_ns / 1000, &ev);
    size_t n = sl_nexmark_encode(&ev, payload, payload_cap);
    if (n == 0) return SL_DRIVER_DROP;
    e->len = (uint32_t)n;
    e->kind = (uint32_t)ev.kind;
    return next_ring(w, (uint32_t)ev.kind);
  }
  e->key = pick_key(w, e->seq);
  e->value = (int64_t)(mix(e->seq ^ 0x5bd1e995u) % 1000);
  return next_ring(w, w->kind == SL_WORKLOAD_PAIRS ? (uint32_t)(e->seq & 1) : 0);
}
