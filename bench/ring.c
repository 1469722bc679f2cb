/* SPDX-License-Identifier: Apache-2.0 */
/* The shared-memory event ring and the fixed-rate driver (ring.h). */
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static size_t map_size(uint64_t capacity) {
  return sizeof(sl_ring_hdr_t) + (size_t)capacity * sizeof(sl_ring_event_t);
}

static int map_file(int fd, size_t len, sl_ring_t *out) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  out->hdr = p;
  out->ev = (sl_ring_event_t *)((char *)p + sizeof(sl_ring_hdr_t));
  out->map_len = len;
  return 0;
}

int sl_ring_create(const char *path, uint64_t capacity, sl_ring_t *out) {
  uint64_t cap = 1;
  while (cap < capacity) cap <<= 1;
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  size_t len = map_size(cap);
  int rc = ftruncate(fd, (off_t)len) == 0 ? map_file(fd, len, out) : -errno;
  close(fd);
  if (rc != 0) return rc;
  memset(out->hdr, 0, sizeof(*out->hdr));
  out->hdr->capacity = cap;
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
      map_size(out->hdr->capacity) != out->map_len) {
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
  uint64_t mask = r->hdr->capacity - 1;
  for (size_t i = 0; i < n; i++) out[i] = r->ev[(tail + i) & mask];
  atomic_store_explicit(&r->hdr->tail, tail + n, memory_order_release);
  return n;
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void report(sl_ring_t *r, const sl_driver_opts_t *o, int64_t now,
                   sl_driver_report_t *out) {
  sl_ring_hdr_t *h = r->hdr;
  uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
  uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
  uint64_t ovf = atomic_load_explicit(&h->overflow, memory_order_relaxed);
  out->t_s = (double)(now - h->t0_ns) / 1e9;
  out->generated = head + ovf;
  out->consumed = tail;
  out->backlog = head - tail;
  out->overflow = ovf;
  if (o->report) o->report(o->user, out);
}

int sl_driver_run(sl_ring_t *r, const sl_driver_opts_t *o,
                  sl_driver_report_t *out_final) {
  sl_ring_hdr_t *h = r->hdr;
  uint64_t mask = h->capacity - 1;
  int64_t t0 = sl_bench_now_ns();
  h->rate = o->rate;
  h->t0_ns = t0;
  int64_t end = t0 + (int64_t)(o->duration_s * 1e9);
  int64_t report_ns = (o->report_ms > 0 ? o->report_ms : 1000) * 1000000;
  int64_t next_report = t0 + report_ns;
  uint64_t seq = 0, head = 0, ovf = 0;
  uint64_t keys = o->keys ? o->keys : 1;
  for (;;) {
    int64_t now = sl_bench_now_ns();
    if (now > end) now = end;
    /* Every event due by now: seq with t0 + seq / rate <= now. */
    uint64_t due = (uint64_t)((double)(now - t0) * 1e-9 * o->rate) + 1;
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    for (; seq < due; seq++) {
      if (head - tail == h->capacity) {
        tail = atomic_load_explicit(&h->tail, memory_order_acquire);
        if (head - tail == h->capacity) {
          ovf++; /* never wait for the consumer */
          continue;
        }
      }
      sl_ring_event_t *e = &r->ev[head & mask];
      e->gen_ns = t0 + (int64_t)((double)seq * 1e9 / o->rate);
      e->seq = seq;
      e->key = mix(seq) % keys;
      e->value = (int64_t)(mix(seq ^ 0x5bd1e995u) % 1000);
      head++;
    }
    atomic_store_explicit(&h->head, head, memory_order_release);
    atomic_store_explicit(&h->overflow, ovf, memory_order_relaxed);
    bool is_stop = o->stop && atomic_load(o->stop);
    if (now >= end || is_stop) break;
    if (now >= next_report) {
      sl_driver_report_t rep;
      report(r, o, now, &rep);
      next_report += report_ns;
    }
    struct timespec ts = {0, 200000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
  }
  atomic_store_explicit(&h->is_done, 1, memory_order_release);
  sl_driver_report_t fin;
  report(r, o, end, &fin);
  if (out_final) *out_final = fin;
  return 0;
}
