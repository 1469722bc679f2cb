/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timer service of a keyed operator: a min-heap of (time, key) with a hash
 * set that makes (time, key) unique.  Deleting a timer removes it from the
 * set and leaves a tombstone in the heap that pop() skips.  See README.md.
 */
#include <xxhash.h>

#include "time/time.h"

typedef struct timer_s {
  int64_t ts;
  uint64_t hash;
  struct timer_s *chain; /* hash set bucket chain */
  bool is_deleted;
  uint32_t len;
  uint8_t key[];
} timer_t_;

/* Heap slots keep the time next to the timer, so that sifting compares
 * without following pointers. */
typedef struct hslot_s {
  int64_t ts;
  timer_t_ *x;
} hslot_t;

struct sl_timers_s {
  hslot_t *heap;
  size_t n_heap, cap_heap;
  timer_t_ **buckets;
  size_t n_buckets;
  size_t n_live; /* timers in the set */
};

static uint64_t timer_hash(int64_t ts, const void *key, uint32_t len) {
  return XXH3_64bits_withSeed(key, len, (uint64_t)ts);
}

int sl__timers_create(sl_timers_t **out) {
  sl_timers_t *t = sl_calloc(1, sizeof(*t));
  if (t == NULL) return SL_ENOMEM;
  t->n_buckets = 64;
  t->buckets = sl_calloc(t->n_buckets, sizeof(timer_t_ *));
  if (t->buckets == NULL) {
    sl_free(t);
    return SL_ENOMEM;
  }
  *out = t;
  return SL_OK;
}

void sl__timers_destroy(sl_timers_t *t) {
  if (t == NULL) return;
  for (size_t i = 0; i < t->n_heap; i++) sl_free(t->heap[i].x);
  sl_free(t->heap);
  sl_free(t->buckets);
  sl_free(t);
}

static timer_t_ **find_slot(sl_timers_t *t, int64_t ts, uint64_t h,
                            const void *key, uint32_t len) {
  timer_t_ **pp = &t->buckets[h & (t->n_buckets - 1)];
  for (; *pp; pp = &(*pp)->chain) {
    timer_t_ *x = *pp;
    if (x->hash == h && x->ts == ts && x->len == len &&
        memcmp(x->key, key, len) == 0)
      return pp;
  }
  return pp;
}

static int grow_buckets(sl_timers_t *t) {
  size_t n = t->n_buckets * 2;
  timer_t_ **b = sl_calloc(n, sizeof(timer_t_ *));
  if (b == NULL) return SL_ENOMEM;
  for (size_t i = 0; i < t->n_buckets; i++) {
    timer_t_ *x = t->buckets[i];
    while (x) {
      timer_t_ *next = x->chain;
      x->chain = b[x->hash & (n - 1)];
      b[x->hash & (n - 1)] = x;
      x = next;
    }
  }
  sl_free(t->buckets);
  t->buckets = b;
  t->n_buckets = n;
  return SL_OK;
}

static void heap_up(sl_timers_t *t, size_t i) {
  hslot_t v = t->heap[i];
  while (i > 0 && t->heap[(i - 1) / 2].ts > v.ts) {
    t->heap[i] = t->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  t->heap[i] = v;
}

static void heap_down(sl_timers_t *t, size_t i) {
  hslot_t v = t->heap[i];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    int64_t mts = v.ts;
    if (l < t->n_heap && t->heap[l].ts < mts) m = l, mts = t->heap[l].ts;
    if (r < t->n_heap && t->heap[r].ts < mts) m = r;
    if (m == i) break;
    t->heap[i] = t->heap[m];
    i = m;
  }
  t->heap[i] = v;
}

int sl__timers_add(sl_timers_t *t, int64_t ts, const void *key, uint32_t len) {
  uint64_t h = timer_hash(ts, key, len);
  timer_t_ **slot = find_slot(t, ts, h, key, len);
  if (*slot) return SL_OK; /* already registered */
  if (t->n_heap == t->cap_heap) {
    size_t cap = t->cap_heap ? t->cap_heap * 2 : 64;
    hslot_t *hp = sl_realloc(t->heap, cap * sizeof(*hp));
    if (hp == NULL) return SL_ENOMEM;
    t->heap = hp;
    t->cap_heap = cap;
  }
  timer_t_ *x = sl_malloc(sizeof(*x) + len);
  if (x == NULL) return SL_ENOMEM;
  x->ts = ts;
  x->hash = h;
  x->chain = NULL;
  x->is_deleted = false;
  x->len = len;
  memcpy(x->key, key, len);
  *slot = x;
  t->heap[t->n_heap].ts = ts;
  t->heap[t->n_heap].x = x;
  heap_up(t, t->n_heap++);
  t->n_live++;
  if (t->n_live > t->n_buckets && grow_buckets(t) != SL_OK) {
    /* The set stays correct with long chains; nothing to undo. */
  }
  return SL_OK;
}

int sl__timers_delete(sl_timers_t *t, int64_t ts, const void *key,
                      uint32_t len) {
  uint64_t h = timer_hash(ts, key, len);
  timer_t_ **slot = find_slot(t, ts, h, key, len);
  if (*slot == NULL) return SL_ENOTFOUND;
  timer_t_ *x = *slot;
  *slot = x->chain;
  x->chain = NULL;
  x->is_deleted = true; /* freed when it reaches the top of the heap */
  t->n_live--;
  return SL_OK;
}

/* Remove the heap's top and free it. */
static void pop_top(sl_timers_t *t) {
  sl_free(t->heap[0].x);
  t->heap[0] = t->heap[--t->n_heap];
  if (t->n_heap) heap_down(t, 0);
}

static void drop_deleted_top(sl_timers_t *t) {
  while (t->n_heap && t->heap[0].x->is_deleted) pop_top(t);
}

int64_t sl__timers_next(const sl_timers_t *t) {
  drop_deleted_top((sl_timers_t *)t);
  return t->n_heap ? t->heap[0].ts : INT64_MAX;
}

int sl__timers_pop(sl_timers_t *t, int64_t now, int64_t *out_ts,
                   sl_bytes_t *out_key) {
  drop_deleted_top(t);
  if (t->n_heap == 0 || t->heap[0].ts > now) return 0;
  timer_t_ *x = t->heap[0].x;
  out_key->len = 0;
  if (sl_bytes_append(out_key, x->key, x->len) != SL_OK) return SL_ENOMEM;
  *out_ts = x->ts;
  /* Unlink it from the set by its stored hash, then free it. */
  timer_t_ **pp = &t->buckets[x->hash & (t->n_buckets - 1)];
  while (*pp && *pp != x) pp = &(*pp)->chain;
  if (*pp) {
    *pp = x->chain;
    t->n_live--;
  }
  pop_top(t);
  return 1;
}

size_t sl__timers_size(const sl_timers_t *t) { return t->n_live; }

int sl__timers_export(const sl_timers_t *t,
                      int (*fn)(void *user, int64_t ts, const uint8_t *key,
                                uint32_t len),
                      void *user) {
  for (size_t i = 0; i < t->n_heap; i++) {
    const timer_t_ *x = t->heap[i].x;
    if (x->is_deleted) continue;
    int rc = fn(user, x->ts, x->key, x->len);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}
