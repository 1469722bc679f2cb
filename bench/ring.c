/* SPDX-License-Identifier: Apache-2.0 */
/* The shared-memory event ring and the fixed-rate driver (ring.h). */
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static size_t map_size(uint64_t capacity, uint64_t slot_size) {
  return sizeof(sl_ring_hdr_t) + (size_t)capacity * (size_t)slot_size;
}

static int map_file(int fd, size_t len, sl_ring_t *out) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  out->hdr = p;
  out->ev = (sl_ring_event_t *)((char *)p + sizeof(sl_ring_hdr_t));
  out->map_len = len;
  return 0;
}

int sl_ring_create(const char *path, uint64_t capacity, uint32_t slot_size,
                   sl_ring_t *out) {
  uint64_t cap = 1;
  while (cap < capacity) cap <<= 1;
  uint64_t slot = slot_size < SL_RING_HEAD_SIZE ? SL_RING_HEAD_SIZE
                                                : (slot_size + 63u) & ~63u;
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  size_t len = map_size(cap, slot);
  int rc = ftruncate(fd, (off_t)len) == 0 ? map_file(fd, len, out) : -errno;
  close(fd);
  if (rc != 0) return rc;
  memset(out->hdr, 0, sizeof(*out->hdr));
  out->hdr->capacity = cap;
  out->hdr->slot_size = slot;
  atomic_store_explicit(&out->hdr->head, 0, memory_order_relaxed);
  atomic_store_explicit(&out->hdr->tail, 0, memory_order_relaxed);
  atomic_store_explicit(&out->hdr->overflow, 0, memory_order_relaxed);
  atomic_store_explicit(&out->hdr->is_done, 0, memory_order_relaxed);
  /* The magic last: an opener that sees it sees the rest. */
  atomic_thread_fence(memory_order_release);
  out->hdr->magic = SL_RING_MAGIC;
  return 0;
}

int sl_ring_open(const char *path, sl_ring_t *out) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) rc = -errno;
  else if ((size_t)st.st_size < sizeof(sl_ring_hdr_t)) rc = -EPROTO;
  if (rc == 0) rc = map_file(fd, (size_t)st.st_size, out);
  close(fd);
  if (rc != 0) return rc;
  atomic_thread_fence(memory_order_acquire);
  if (out->hdr->magic != SL_RING_MAGIC ||
      out->hdr->slot_size < SL_RING_HEAD_SIZE ||
      map_size(out->hdr->capacity, out->hdr->slot_size) != out->map_len) {
    sl_ring_close(out);
    return -EPROTO;
  }
  return 0;
}

void sl_ring_close(sl_ring_t *r) {
  if (r->hdr) munmap(r->hdr, r->map_len);
  memset(r, 0, sizeof(*r));
}

size_t sl_ring_read(sl_ring_t *r, sl_ring_event_t *out, size_t max) {
  uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
  size_t n = head - tail < max ? (size_t)(head - tail) : max;
  for (size_t i = 0; i < n; i++) out[i] = *sl_ring_slot(r, tail + i);
  atomic_store_explicit(&r->hdr->tail, tail + n, memory_order_release);
  return n;
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#define SCRATCH_CAP 65536u

/* Driver state per ring: what it wrote, what it could not. */
typedef struct ring_w_s {
  uint64_t head, tail, ovf;
} ring_w_t;

static void report(sl_ring_t *rings, uint32_t n, const sl_driver_opts_t *o,
                   int64_t t0, int64_t now, uint64_t dropped,
                   uint64_t skipped, int64_t lag, sl_driver_report_t *out) {
  memset(out, 0, sizeof(*out));
  for (uint32_t i = 0; i < n; i++) {
    sl_ring_hdr_t *h = rings[i].hdr;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    uint64_t ovf = atomic_load_explicit(&h->overflow, memory_order_relaxed);
    out->generated += head + ovf;
    out->consumed += tail;
    out->backlog += head - tail;
    out->overflow += ovf;
  }
  out->generated += dropped + skipped;
  out->dropped = dropped;
  out->skipped = skipped;
  out->max_lag_ns = lag;
  out->t_s = (double)(now - t0) / 1e9;
  if (o->report) o->report(o->user, out);
}

typedef struct default_fill_s {
  uint64_t keys;
  uint32_t n_rings;
} default_fill_t;

static uint32_t default_fill(void *user, sl_ring_event_t *e, uint8_t *payload,
                             uint32_t cap) {
  (void)payload, (void)cap;
  const default_fill_t *d = user;
  e->key = mix(e->seq) % d->keys;
  e->value = (int64_t)(mix(e->seq ^ 0x5bd1e995u) % 1000);
  return (uint32_t)(e->seq % d->n_rings);
}

int sl_driver_run_rings(sl_ring_t *rings, uint32_t n_rings,
                        const sl_driver_opts_t *o,
                        sl_driver_report_t *out_final) {
  ring_w_t w[64];
  if (n_rings == 0 || n_rings > 64) return -EINVAL;
  memset(w, 0, sizeof(w));
  default_fill_t df = {o->keys ? o->keys : 1, n_rings};
  sl_driver_fill_fn fill = o->fill ? o->fill : default_fill;
  void *fill_user = o->fill ? o->fill_user : &df;
  uint32_t cap = UINT32_MAX;
  for (uint32_t i = 0; i < n_rings; i++)
    if (sl_ring_payload_cap(&rings[i]) < cap) cap = sl_ring_payload_cap(&rings[i]);
  int64_t t0 = sl_bench_now_ns();
  for (uint32_t i = 0; i < n_rings; i++) {
    rings[i].hdr->rate = o->rate;
    rings[i].hdr->t0_ns = t0;
  }
  int64_t end = t0 + (int64_t)(o->duration_s * 1e9);
  int64_t report_ns = (o->report_ms > 0 ? o->report_ms : 1000) * 1000000;
  int64_t next_report = t0 + report_ns;
  uint64_t seq = 0, dropped = 0, skipped = 0;
  int64_t max_lag = 0;
  sl_ring_event_t scratch; /* where an event goes that finds its ring full */
  uint8_t *scratch_payload = malloc(SCRATCH_CAP);
  if (scratch_payload == NULL) return -ENOMEM;
  for (;;) {
    int64_t now = sl_bench_now_ns();
    if (now > end) now = end;
    /* Every event due by now: seq with t0 + seq / rate <= now. */
    uint64_t due = (uint64_t)((double)(now - t0) * 1e-9 * o->rate) + 1;
    for (uint32_t i = 0; i < n_rings; i++)
      w[i].tail = atomic_load_explicit(&rings[i].hdr->tail, memory_order_acquire);
    for (; seq < due; seq++) {
      /* Fill first (the fill picks the ring), into the ring's next slot if
       * the default workload's ring is known to have room, else scratch;
       * a full ring never makes the driver wait. */
      sl_ring_event_t *e = &scratch;
      uint8_t *payload = scratch_payload;
      uint32_t ri = n_rings == 1 ? 0 : UINT32_MAX;
      if (ri == 0 && w[0].head - w[0].tail < rings[0].hdr->capacity) {
        e = sl_ring_slot(&rings[0], w[0].head);
        payload = sl_ring_payload(e);
      }
      int64_t gen = t0 + (int64_t)((double)seq * 1e9 / o->rate);
      memset(e, 0, sizeof(*e));
      e->gen_ns = gen;
      e->seq = seq;
      uint32_t to = fill(fill_user, e, payload,
                         e == &scratch ? SCRATCH_CAP : cap);
      if (to == SL_DRIVER_SKIP) {
        skipped++;
        continue;
      }
      if (to >= n_rings || e->len > sl_ring_payload_cap(&rings[to])) {
        dropped++;
        continue;
      }
      ring_w_t *rw = &w[to];
      sl_ring_t *r = &rings[to];
      if (rw->head - rw->tail == r->hdr->capacity) {
        rw->tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
        if (rw->head - rw->tail == r->hdr->capacity) {
          rw->ovf++; /* never wait for the consumer */
          continue;
        }
      }
      if (e == &scratch) {
        sl_ring_event_t *d = sl_ring_slot(r, rw->head);
        memcpy(sl_ring_payload(d), payload, e->len);
        *d = *e;
      }
      rw->head++;
    }
    int64_t lag = sl_bench_now_ns() - (t0 + (int64_t)((double)(seq - 1) * 1e9 /
                                                      o->rate));
    if (lag > max_lag) max_lag = lag;
    for (uint32_t i = 0; i < n_rings; i++) {
      atomic_store_explicit(&rings[i].hdr->head, w[i].head, memory_order_release);
      atomic_store_explicit(&rings[i].hdr->overflow, w[i].ovf,
                            memory_order_relaxed);
      atomic_store_explicit(&rings[i].hdr->sequence, seq,
                            memory_order_release);
    }
    bool is_stop = o->stop && atomic_load(o->stop);
    if (now >= end || is_stop) break;
    if (now >= next_report) {
      sl_driver_report_t rep;
      report(rings, n_rings, o, t0, now, dropped, skipped, max_lag, &rep);
      next_report += report_ns;
    }
    struct timespec ts = {0, 200000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
  }
  for (uint32_t i = 0; i < n_rings; i++)
    atomic_store_explicit(&rings[i].hdr->is_done, 1, memory_order_release);
  free(scratch_payload);
  sl_driver_report_t fin;
  report(rings, n_rings, o, t0, end, dropped, skipped, max_lag, &fin);
  if (out_final) *out_final = fin;
  return 0;
}

int sl_driver_run(sl_ring_t *r, const sl_driver_opts_t *o,
                  sl_driver_report_t *out_final) {
  return sl_driver_run_rings(r, 1, o, out_final);
}
