/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the copy-on-write state map (src/state/cowmap.c): basic map
 * behaviour against a reference array, snapshot isolation (invariant C1),
 * O(1) snapshots (C4), memory reclamation (C2), forced hash collisions, and
 * a snapshot iterated on another thread while the owner keeps writing.
 */
#include <pthread.h>

#include "sl_test.h"
#include "state/cowmap.h"

static uint64_t rng_state = 12345;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t hash_of(uint64_t k, uint64_t mask) {
  return sl__key_hash64(&k, 8) & mask;
}

static void put_u64(sl_cowmap_t *m, uint64_t k, uint64_t v, uint64_t mask) {
  sl_cowmap_entry_t *e;
  bool created;
  SL_ASSERT_OK(sl__cowmap_upsert(m, hash_of(k, mask), &k, 8, 0, 8, &e, &created));
  SL_ASSERT_OK(sl__cowmap_entry_set_value(e, &v, 8));
}

static bool get_u64(const sl_cowmap_t *m, uint64_t k, uint64_t *v,
                    uint64_t mask) {
  const sl_cowmap_entry_t *e = sl__cowmap_get(m, hash_of(k, mask), &k, 8);
  if (e == NULL) return false;
  SL_ASSERT_EQ_INT(e->vlen, 8);
  memcpy(v, e->val, 8);
  return true;
}

/* Random puts and removes checked against a plain array; mask limits the
 * hash bits so that collisions and deep chains happen. */
static void check_against_reference(uint64_t mask, uint32_t n_keys,
                                    uint32_t n_ops) {
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  uint64_t *ref = calloc(n_keys, sizeof(uint64_t)); /* 0 = absent */
  size_t n_present = 0;
  for (uint32_t op = 0; op < n_ops; op++) {
    uint64_t k = rnd() % n_keys;
    if (rnd() % 4 == 0) {
      uint64_t kk = k;
      int rc = sl__cowmap_remove(m, hash_of(kk, mask), &kk, 8);
      if (ref[k]) {
        SL_ASSERT_OK(rc);
        ref[k] = 0;
        n_present--;
      } else {
        SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
      }
    } else {
      uint64_t v = rnd() | 1;
      if (!ref[k]) n_present++;
      ref[k] = v;
      put_u64(m, k, v, mask);
    }
  }
  SL_ASSERT_EQ_INT(sl__cowmap_size(m), n_present);
  size_t seen = 0;
  for (uint64_t k = 0; k < n_keys; k++) {
    uint64_t v;
    bool found = get_u64(m, k, &v, mask);
    SL_ASSERT_EQ_INT(found, ref[k] != 0);
    if (found) {
      SL_ASSERT_EQ_INT(v, ref[k]);
      seen++;
    }
  }
  /* Iteration yields every entry exactly once. */
  sl_cowmap_iter_t it;
  sl__cowmap_iter(m, &it);
  const sl_cowmap_entry_t *e;
  size_t iterated = 0;
  while ((e = sl__cowmap_next(&it)) != NULL) {
    uint64_t k, v;
    memcpy(&k, e->key, 8);
    memcpy(&v, e->val, 8);
    SL_ASSERT_TRUE(k < n_keys);
    SL_ASSERT_EQ_INT(v, ref[k]);
    iterated++;
  }
  SL_ASSERT_EQ_INT(iterated, seen);
  sl__cowmap_destroy(m);
  free(ref);
}

SL_TEST(map_matches_reference) {
  check_against_reference(~0ull, 5000, 60000);
}

SL_TEST(map_with_forced_collisions) {
  /* Only 6 hash bits: most keys share a 60-bit prefix and form chains. */
  check_against_reference(0x3full, 500, 20000);
}

/* A snapshot sees exactly the version at the time it was taken, whatever
 * the owner writes later (invariant C1). */
static void snapshot_isolation(uint64_t mask) {
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  enum { N = 3000 };
  for (uint64_t k = 0; k < N; k++) put_u64(m, k, k * 10, mask);
  sl_cowmap_snap_t *s1;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s1));
  /* Overwrite half, remove a quarter, add new keys. */
  for (uint64_t k = 0; k < N; k += 2) put_u64(m, k, k * 10 + 1, mask);
  for (uint64_t k = 1; k < N; k += 4) {
    uint64_t kk = k;
    SL_ASSERT_OK(sl__cowmap_remove(m, hash_of(kk, mask), &kk, 8));
  }
  for (uint64_t k = N; k < N + 500; k++) put_u64(m, k, k * 10, mask);
  sl_cowmap_snap_t *s2;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s2));
  for (uint64_t k = 0; k < N + 500; k++) put_u64(m, k, 7, mask);

  /* s1: every key 0..N-1 with its first value. */
  SL_ASSERT_EQ_INT(sl__cowmap_snap_size(s1), N);
  bool seen[N] = {false};
  sl_cowmap_iter_t it;
  sl__cowmap_snap_iter(s1, &it);
  const sl_cowmap_entry_t *e;
  size_t n = 0;
  while ((e = sl__cowmap_next(&it)) != NULL) {
    uint64_t k, v;
    memcpy(&k, e->key, 8);
    memcpy(&v, e->val, 8);
    SL_ASSERT_TRUE(k < N);
    SL_ASSERT_TRUE(!seen[k]);
    seen[k] = true;
    SL_ASSERT_EQ_INT(v, k * 10);
    n++;
  }
  SL_ASSERT_EQ_INT(n, N);
  /* s2: the state after the second round of writes. */
  sl__cowmap_snap_iter(s2, &it);
  n = 0;
  while ((e = sl__cowmap_next(&it)) != NULL) {
    uint64_t k, v;
    memcpy(&k, e->key, 8);
    memcpy(&v, e->val, 8);
    SL_ASSERT_TRUE(k >= N || k % 4 != 1);
    uint64_t want = (k < N && k % 2 == 0) ? k * 10 + 1 : k * 10;
    SL_ASSERT_EQ_INT(v, want);
    n++;
  }
  SL_ASSERT_EQ_INT(n, N - N / 4 + 500);
  SL_ASSERT_EQ_INT(sl__cowmap_snap_size(s2), n);
  /* Current version: everything 7. */
  for (uint64_t k = 0; k < N + 500; k++) {
    uint64_t v;
    SL_ASSERT_TRUE(get_u64(m, k, &v, mask));
    SL_ASSERT_EQ_INT(v, 7);
  }
  sl__cowmap_snap_release(s1);
  sl__cowmap_snap_release(s2);
  sl__cowmap_gc(m);
  /* C2: after every snapshot is released nothing stays retired. */
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  sl__cowmap_destroy(m);
}

SL_TEST(snapshot_isolation) { snapshot_isolation(~0ull); }
SL_TEST(snapshot_isolation_with_collisions) { snapshot_isolation(0xffull); }

/* C4: taking a snapshot copies nothing, whatever the size; only the first
 * write to a path after it copies, and later writes to it do not. */
SL_TEST(snapshot_is_constant_time) {
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  for (uint64_t k = 0; k < 100000; k++) put_u64(m, k, k, ~0ull);
  uint64_t before = sl__cowmap_copies(m);
  sl_cowmap_snap_t *s;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s));
  SL_ASSERT_EQ_INT(sl__cowmap_copies(m), before);
  put_u64(m, 42, 1, ~0ull);
  uint64_t after_first = sl__cowmap_copies(m);
  SL_ASSERT_TRUE(after_first > before);
  SL_ASSERT_LE_INT(after_first - before, SL_COWMAP_MAX_WRITE_COPIES);
  put_u64(m, 42, 2, ~0ull);
  SL_ASSERT_EQ_INT(sl__cowmap_copies(m), after_first);
  sl__cowmap_snap_release(s);
  sl__cowmap_gc(m);
  /* Without live snapshots writes happen in place. */
  uint64_t c = sl__cowmap_copies(m);
  for (uint64_t k = 0; k < 1000; k++) put_u64(m, k, k + 1, ~0ull);
  SL_ASSERT_EQ_INT(sl__cowmap_copies(m), c);
  sl__cowmap_destroy(m);
}

/* The owner may destroy the map while a snapshot is still held; the memory
 * lives until the snapshot is released. */
SL_TEST(destroy_before_release) {
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  for (uint64_t k = 0; k < 1000; k++) put_u64(m, k, k, ~0ull);
  sl_cowmap_snap_t *s;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s));
  for (uint64_t k = 0; k < 1000; k++) put_u64(m, k, k + 1, ~0ull);
  sl__cowmap_destroy(m);
  sl_cowmap_iter_t it;
  sl__cowmap_snap_iter(s, &it);
  size_t n = 0;
  const sl_cowmap_entry_t *e;
  while ((e = sl__cowmap_next(&it)) != NULL) {
    uint64_t k, v;
    memcpy(&k, e->key, 8);
    memcpy(&v, e->val, 8);
    SL_ASSERT_EQ_INT(v, k);
    n++;
  }
  SL_ASSERT_EQ_INT(n, 1000);
  sl__cowmap_snap_release(s);
}

/* Concurrent: a reader thread iterates snapshot after snapshot and checks
 * each one is internally consistent (every value of snapshot r equals
 * key * 1000 + r) while the owner keeps rewriting every key. */
enum { CONC_KEYS = 20000, CONC_ROUNDS = 30 };

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  sl_cowmap_snap_t *snap; /* handed to the reader */
  uint64_t round;
  bool is_done;
  uint64_t failures;
  uint64_t checked;
} conc_t;

static void *reader_main(void *arg) {
  conc_t *c = arg;
  for (;;) {
    pthread_mutex_lock(&c->lock);
    while (c->snap == NULL && !c->is_done)
      pthread_cond_wait(&c->cond, &c->lock);
    sl_cowmap_snap_t *s = c->snap;
    uint64_t round = c->round;
    c->snap = NULL;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (s == NULL) return NULL;
    sl_cowmap_iter_t it;
    sl__cowmap_snap_iter(s, &it);
    const sl_cowmap_entry_t *e;
    uint64_t n = 0, bad = 0;
    while ((e = sl__cowmap_next(&it)) != NULL) {
      uint64_t k, v;
      memcpy(&k, e->key, 8);
      memcpy(&v, e->val, 8);
      if (v != k * 1000 + round) bad++;
      n++;
    }
    if (n != CONC_KEYS) bad++;
    sl__cowmap_snap_release(s);
    pthread_mutex_lock(&c->lock);
    c->failures += bad;
    c->checked++;
    pthread_mutex_unlock(&c->lock);
  }
}

SL_TEST(concurrent_snapshot_iteration) {
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  conc_t c;
  memset(&c, 0, sizeof(c));
  pthread_mutex_init(&c.lock, NULL);
  pthread_cond_init(&c.cond, NULL);
  for (uint64_t k = 0; k < CONC_KEYS; k++) put_u64(m, k, k * 1000, ~0ull);
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, reader_main, &c), 0);
  for (uint64_t r = 0; r < CONC_ROUNDS; r++) {
    sl_cowmap_snap_t *s;
    sl__cowmap_gc(m);
    SL_ASSERT_OK(sl__cowmap_snapshot(m, &s));
    pthread_mutex_lock(&c.lock);
    while (c.snap != NULL) pthread_cond_wait(&c.cond, &c.lock);
    c.snap = s;
    c.round = r;
    pthread_cond_broadcast(&c.cond);
    pthread_mutex_unlock(&c.lock);
    /* Write the next round while the reader iterates this one. */
    for (uint64_t k = 0; k < CONC_KEYS; k++)
      put_u64(m, k, k * 1000 + r + 1, ~0ull);
  }
  pthread_mutex_lock(&c.lock);
  while (c.snap != NULL) pthread_cond_wait(&c.cond, &c.lock);
  c.is_done = true;
  pthread_cond_broadcast(&c.cond);
  pthread_mutex_unlock(&c.lock);
  pthread_join(th, NULL);
  SL_ASSERT_EQ_INT(c.failures, 0);
  SL_ASSERT_EQ_INT(c.checked, CONC_ROUNDS);
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  for (uint64_t k = 0; k < CONC_KEYS; k++) {
    uint64_t v;
    SL_ASSERT_TRUE(get_u64(m, k, &v, ~0ull));
    SL_ASSERT_EQ_INT(v, k * 1000 + CONC_ROUNDS);
  }
  sl__cowmap_destroy(m);
  pthread_mutex_destroy(&c.lock);
  pthread_cond_destroy(&c.cond);
}

/* ------------------------------------------------------------------ */
/* The flat table: segment copy-on-write, growth, tombstones, fixed-width
 * keys, bulk reserve, and a differential test against a reference. */

/* Iterate a snapshot into want-or-absent form: vals[k] = value + 1, 0 when
 * absent; fails on a key seen twice or out of range. */
static size_t snap_collect(const sl_cowmap_snap_t *s, uint64_t *vals,
                           uint64_t n_keys) {
  memset(vals, 0, n_keys * sizeof(uint64_t));
  sl_cowmap_iter_t it;
  sl__cowmap_snap_iter(s, &it);
  const sl_cowmap_entry_t *e;
  size_t n = 0;
  while ((e = sl__cowmap_next(&it)) != NULL) {
    uint64_t k, v;
    SL_ASSERT_EQ_INT(e->klen, 8);
    SL_ASSERT_EQ_INT(e->vlen, 8);
    memcpy(&k, e->key, 8);
    memcpy(&v, e->val, 8);
    SL_ASSERT_TRUE(k < n_keys);
    SL_ASSERT_EQ_INT(vals[k], 0);
    vals[k] = v + 1;
    n++;
  }
  return n;
}

/* Rewriting every key under a snapshot copies each entry once and each
 * segment at most once (plus the directory); the pinned version keeps
 * exactly the old contents, and gc frees every copy's original after the
 * release. */
SL_TEST(segment_copy_on_write) {
  enum { N = 20000 };
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  for (uint64_t k = 0; k < N; k++) put_u64(m, k, k, ~0ull);
  size_t cap = sl__cowmap_capacity(m);
  uint64_t c0 = sl__cowmap_copies(m);
  SL_ASSERT_EQ_INT(c0, 0);
  sl_cowmap_snap_t *s;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s));
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  for (uint64_t k = 0; k < N; k++) put_u64(m, k, k + 5, ~0ull);
  SL_ASSERT_EQ_INT(sl__cowmap_capacity(m), cap); /* no growth */
  uint64_t copies = sl__cowmap_copies(m) - c0;
  /* N entries, at most one copy per 128-slot segment, one directory. */
  SL_ASSERT_TRUE(copies >= N);
  SL_ASSERT_LE_INT(copies, N + cap / 128 + 1);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), copies);
  /* Writing again copies nothing: every node is the owner's now. */
  for (uint64_t k = 0; k < N; k++) put_u64(m, k, k + 6, ~0ull);
  SL_ASSERT_EQ_INT(sl__cowmap_copies(m) - c0, copies);
  uint64_t *vals = calloc(N, sizeof(uint64_t));
  SL_ASSERT_EQ_INT(snap_collect(s, vals, N), N);
  for (uint64_t k = 0; k < N; k++) SL_ASSERT_EQ_INT(vals[k], k + 1);
  for (uint64_t k = 0; k < N; k++) {
    uint64_t v;
    SL_ASSERT_TRUE(get_u64(m, k, &v, ~0ull));
    SL_ASSERT_EQ_INT(v, k + 6);
  }
  /* gc before the release frees nothing the snapshot can see. */
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), copies);
  SL_ASSERT_EQ_INT(snap_collect(s, vals, N), N);
  sl__cowmap_snap_release(s);
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  free(vals);
  sl__cowmap_destroy(m);
}

/* The table grows (several rebuilds) while a snapshot pins a small old
 * version: the snapshot keeps its directory and segments, the rebuilt
 * table shares the entries, and everything old is freed after release. */
SL_TEST(growth_under_snapshot) {
  enum { OLD = 50, N = 30000 };
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  for (uint64_t k = 0; k < OLD; k++) put_u64(m, k, k * 3, ~0ull);
  size_t cap0 = sl__cowmap_capacity(m);
  sl_cowmap_snap_t *s;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s));
  uint64_t epoch = sl__cowmap_epoch(m);
  for (uint64_t k = OLD; k < N; k++) put_u64(m, k, k * 3, ~0ull);
  /* Growing moves no entry: pointers read before stay valid. */
  SL_ASSERT_EQ_INT(sl__cowmap_epoch(m), epoch);
  SL_ASSERT_TRUE(sl__cowmap_capacity(m) >= (size_t)N * 4 / 3);
  SL_ASSERT_TRUE(sl__cowmap_capacity(m) > cap0);
  SL_ASSERT_TRUE(sl__cowmap_retired(m) > 0); /* the pinned dir + segments */
  for (uint64_t k = 0; k < OLD; k++) put_u64(m, k, 1, ~0ull);
  SL_ASSERT_EQ_INT(sl__cowmap_snap_size(s), OLD);
  uint64_t *vals = calloc(N, sizeof(uint64_t));
  SL_ASSERT_EQ_INT(snap_collect(s, vals, N), OLD);
  for (uint64_t k = 0; k < OLD; k++) SL_ASSERT_EQ_INT(vals[k], k * 3 + 1);
  SL_ASSERT_EQ_INT(sl__cowmap_size(m), N);
  for (uint64_t k = 0; k < N; k++) {
    uint64_t v;
    SL_ASSERT_TRUE(get_u64(m, k, &v, ~0ull));
    SL_ASSERT_EQ_INT(v, k < OLD ? 1 : k * 3);
  }
  sl__cowmap_snap_release(s);
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  free(vals);
  sl__cowmap_destroy(m);
}

/* Remove and reinsert under snapshots: each snapshot keeps its version,
 * tombstones are reused or rebuilt away (the table does not grow without
 * bound under churn), and gc frees all after the releases. */
SL_TEST(remove_reinsert_under_snapshot) {
  enum { N = 4000 };
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  for (uint64_t k = 0; k < N; k++) put_u64(m, k, 100, ~0ull);
  sl_cowmap_snap_t *s1, *s2;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s1));
  for (uint64_t k = 0; k < N; k += 2) {
    uint64_t kk = k;
    SL_ASSERT_OK(sl__cowmap_remove(m, hash_of(kk, ~0ull), &kk, 8));
    SL_ASSERT_EQ_INT(sl__cowmap_remove(m, hash_of(kk, ~0ull), &kk, 8),
                     SL_ENOTFOUND);
  }
  SL_ASSERT_EQ_INT(sl__cowmap_size(m), N / 2);
  for (uint64_t k = 0; k < N; k += 4) put_u64(m, k, 200, ~0ull);
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s2));
  for (uint64_t k = 0; k < N; k++) {
    uint64_t kk = k;
    int rc = sl__cowmap_remove(m, hash_of(kk, ~0ull), &kk, 8);
    SL_ASSERT_EQ_INT(rc, (k % 4 == 2) ? SL_ENOTFOUND : SL_OK);
  }
  SL_ASSERT_EQ_INT(sl__cowmap_size(m), 0);
  for (uint64_t k = 0; k < N; k++) SL_ASSERT_TRUE(!get_u64(m, k, &(uint64_t){0}, ~0ull));
  for (uint64_t k = 0; k < N; k += 3) put_u64(m, k, 300, ~0ull);
  uint64_t *vals = calloc(N, sizeof(uint64_t));
  SL_ASSERT_EQ_INT(snap_collect(s1, vals, N), N);
  for (uint64_t k = 0; k < N; k++) SL_ASSERT_EQ_INT(vals[k], 101);
  size_t n2 = snap_collect(s2, vals, N);
  SL_ASSERT_EQ_INT(n2, sl__cowmap_snap_size(s2));
  for (uint64_t k = 0; k < N; k++)
    SL_ASSERT_EQ_INT(vals[k], k % 4 == 0 ? 201 : k % 2 == 1 ? 101 : 0);
  sl__cowmap_snap_release(s2);
  sl__cowmap_gc(m);
  SL_ASSERT_TRUE(sl__cowmap_retired(m) > 0); /* s1 still sees old nodes */
  SL_ASSERT_EQ_INT(snap_collect(s1, vals, N), N);
  sl__cowmap_snap_release(s1);
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  /* Churn without snapshots: the tombstones never make the table grow
   * past what its live entries need. */
  size_t cap = sl__cowmap_capacity(m);
  for (int round = 0; round < 200; round++) {
    for (uint64_t k = 0; k < N; k += 3) {
      uint64_t kk = k;
      SL_ASSERT_OK(sl__cowmap_remove(m, hash_of(kk, ~0ull), &kk, 8));
    }
    for (uint64_t k = 0; k < N; k += 3) put_u64(m, k, (uint64_t)round, ~0ull);
  }
  SL_ASSERT_LE_INT(sl__cowmap_capacity(m), cap);
  SL_ASSERT_EQ_INT(sl__cowmap_size(m), (N + 2) / 3);
  for (uint64_t k = 0; k < N; k++) {
    uint64_t v;
    SL_ASSERT_EQ_INT(get_u64(m, k, &v, ~0ull), k % 3 == 0);
    if (k % 3 == 0) SL_ASSERT_EQ_INT(v, 199);
  }
  free(vals);
  sl__cowmap_destroy(m);
}

/* Pre-sizing: inserting up to the reserved count never rebuilds. */
SL_TEST(reserve_then_fill) {
  enum { N = 50000 };
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  put_u64(m, 7, 7, ~0ull);
  SL_ASSERT_OK(sl__cowmap_reserve(m, N));
  size_t cap = sl__cowmap_capacity(m);
  SL_ASSERT_TRUE(cap * 3 / 4 >= N);
  SL_ASSERT_LE_INT(cap, (size_t)N * 8 / 3 + 8); /* no more than needed */
  uint64_t v;
  SL_ASSERT_TRUE(get_u64(m, 7, &v, ~0ull)); /* kept across the rebuild */
  SL_ASSERT_EQ_INT(v, 7);
  for (uint64_t k = 0; k < N; k++) put_u64(m, k, k, ~0ull);
  SL_ASSERT_EQ_INT(sl__cowmap_capacity(m), cap);
  /* Smaller or equal requests change nothing; absurd ones are refused. */
  SL_ASSERT_OK(sl__cowmap_reserve(m, 10));
  SL_ASSERT_EQ_INT(sl__cowmap_capacity(m), cap);
  SL_ASSERT_EQ_INT(sl__cowmap_reserve(m, SIZE_MAX / 2), SL_EOVERFLOW);
  SL_ASSERT_EQ_INT(sl__cowmap_capacity(m), cap);
  for (uint64_t k = 0; k < N; k++) {
    SL_ASSERT_TRUE(get_u64(m, k, &v, ~0ull));
    SL_ASSERT_EQ_INT(v, k);
  }
  /* Reserving under a snapshot rebuilds into new segments; the snapshot
   * keeps the old ones. */
  sl_cowmap_snap_t *s;
  SL_ASSERT_OK(sl__cowmap_snapshot(m, &s));
  SL_ASSERT_OK(sl__cowmap_reserve(m, 4 * N));
  SL_ASSERT_TRUE(sl__cowmap_capacity(m) > cap);
  SL_ASSERT_TRUE(sl__cowmap_retired(m) > 0);
  uint64_t *vals = calloc(N, sizeof(uint64_t));
  SL_ASSERT_EQ_INT(snap_collect(s, vals, N), N);
  sl__cowmap_snap_release(s);
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  free(vals);
  sl__cowmap_destroy(m);
}

/* The fixed-width comparison: keys of 1..24 bytes that differ only in
 * their last byte or only in their first, all with one hash, and keys that
 * are prefixes of each other.  Every one must stay distinct. */
SL_TEST(fixed_width_keys_of_equal_hash) {
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  const uint64_t h = 0x0123456789abcdefull;
  uint8_t key[24];
  uint32_t n = 0;
  for (uint32_t len = 1; len <= 24; len++)
    for (uint32_t which = 0; which < 2; which++)
      for (uint32_t b = 0; b < 4; b++) {
        memset(key, 0xa5, sizeof(key));
        key[which ? 0 : len - 1] = (uint8_t)b;
        sl_cowmap_entry_t *e;
        bool created;
        SL_ASSERT_OK(sl__cowmap_upsert(m, h, key, len, 0, 4, &e, &created));
        uint32_t tag = len * 16 + which * 4 + b;
        /* b < 4 never equals the 0xa5 filler, so all keys differ except
         * at len 1, where the first byte is the last. */
        if (len == 1 && which == 1) {
          SL_ASSERT_TRUE(!created);
          continue;
        }
        SL_ASSERT_TRUE(created);
        SL_ASSERT_OK(sl__cowmap_entry_set_value(e, &tag, 4));
        n++;
      }
  SL_ASSERT_EQ_INT(sl__cowmap_size(m), n);
  for (uint32_t len = 1; len <= 24; len++)
    for (uint32_t which = 0; which < 2; which++)
      for (uint32_t b = 0; b < 4; b++) {
        memset(key, 0xa5, sizeof(key));
        key[which ? 0 : len - 1] = (uint8_t)b;
        const sl_cowmap_entry_t *e = sl__cowmap_get(m, h, key, len);
        SL_ASSERT_TRUE(e != NULL);
        SL_ASSERT_EQ_INT(e->klen, len);
        uint32_t tag;
        memcpy(&tag, e->val, 4);
        uint32_t want = len * 16 + (len == 1 ? 0 : which * 4) + b;
        SL_ASSERT_EQ_INT(tag, want);
        /* A different byte in the middle is a different key. */
        if (len >= 3) {
          key[len / 2] ^= 0x10;
          SL_ASSERT_TRUE(sl__cowmap_get(m, h, key, len) == NULL);
        }
      }
  /* int64 keys as the key codec writes them (tag byte, 8 bytes big
   * endian): consecutive values differ only in the last byte. */
  for (int64_t v = 0; v < 300; v++) {
    uint8_t k9[9] = {1};
    for (int i = 0; i < 8; i++) k9[1 + i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
    sl_cowmap_entry_t *e;
    bool created;
    SL_ASSERT_OK(sl__cowmap_upsert(m, h ^ 1, k9, 9, 0, 8, &e, &created));
    SL_ASSERT_TRUE(created);
    SL_ASSERT_OK(sl__cowmap_entry_set_value(e, &v, 8));
  }
  for (int64_t v = 0; v < 300; v++) {
    uint8_t k9[9] = {1};
    for (int i = 0; i < 8; i++) k9[1 + i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
    const sl_cowmap_entry_t *e = sl__cowmap_get(m, h ^ 1, k9, 9);
    SL_ASSERT_TRUE(e != NULL);
    int64_t got;
    memcpy(&got, e->val, 8);
    SL_ASSERT_EQ_INT(got, v);
    SL_ASSERT_TRUE(sl__cowmap_get(m, h, k9, 9) == NULL); /* other hash */
  }
  sl__cowmap_destroy(m);
}

/*
 * Differential test: random upserts (values of 0..40 bytes, some out of
 * line), removes, reserves, snapshots taken and released at random points,
 * gc, against a plain array per version.  Runs with full hashes and with
 * only the low 8 bits of the hash kept (about 6 keys per hash value, long
 * probe clusters).  Seeded: a failure names its seed.
 */
enum { DIFF_KEYS = 1500, DIFF_SNAPS = 6 };
typedef struct {
  uint8_t len[DIFF_KEYS]; /* value length + 1; 0 = absent */
  uint8_t val[DIFF_KEYS][40];
} diff_ref_t;

static void diff_check(const diff_ref_t *r, sl_cowmap_iter_t *it,
                       size_t want_n, uint64_t seed) {
  static bool seen[DIFF_KEYS];
  memset(seen, 0, sizeof(seen));
  const sl_cowmap_entry_t *e;
  size_t n = 0;
  while ((e = sl__cowmap_next(it)) != NULL) {
    uint64_t k;
    SL_ASSERT_EQ_INT(e->klen, 8);
    memcpy(&k, e->key, 8);
    if (k >= DIFF_KEYS || seen[k] || r->len[k] == 0 ||
        e->vlen != (uint32_t)r->len[k] - 1u ||
        memcmp(e->val, r->val[k], e->vlen) != 0)
      SL_TEST_FAIL("seed %llu: key %llu differs from the reference",
               (unsigned long long)seed, (unsigned long long)k);
    seen[k] = true;
    n++;
  }
  SL_ASSERT_EQ_INT(n, want_n);
}

static void differential(uint64_t seed, uint64_t mask) {
  rng_state = seed;
  sl_cowmap_t *m;
  SL_ASSERT_OK(sl__cowmap_create(&m));
  diff_ref_t *cur = calloc(1, sizeof(*cur));
  diff_ref_t *refs = calloc(DIFF_SNAPS, sizeof(*refs));
  sl_cowmap_snap_t *snaps[DIFF_SNAPS] = {NULL};
  size_t snap_n[DIFF_SNAPS] = {0};
  size_t n_cur = 0;
  for (int op = 0; op < 15000; op++) {
    uint64_t r = rnd() % 1000;
    uint64_t k = rnd() % DIFF_KEYS;
    if (r < 600) {
      uint32_t len = (uint32_t)(rnd() % 41);
      uint8_t v[40];
      for (uint32_t i = 0; i < len; i++) v[i] = (uint8_t)rnd();
      sl_cowmap_entry_t *e;
      bool created;
      uint64_t kk = k;
      SL_ASSERT_OK(sl__cowmap_upsert(m, hash_of(kk, mask), &kk, 8, 0,
                                     (uint32_t)(rnd() % 16), &e, &created));
      SL_ASSERT_EQ_INT(created, cur->len[k] == 0);
      SL_ASSERT_TRUE(sl__cowmap_is_writable(m, e));
      SL_ASSERT_OK(sl__cowmap_entry_set_value(e, v, len));
      if (created) n_cur++;
      cur->len[k] = (uint8_t)(len + 1);
      memcpy(cur->val[k], v, len);
    } else if (r < 900) {
      uint64_t kk = k;
      int rc = sl__cowmap_remove(m, hash_of(kk, mask), &kk, 8);
      SL_ASSERT_EQ_INT(rc, cur->len[k] ? SL_OK : SL_ENOTFOUND);
      if (cur->len[k]) n_cur--;
      cur->len[k] = 0;
    } else if (r < 950) {
      int i = (int)(rnd() % DIFF_SNAPS);
      if (snaps[i] == NULL) {
        SL_ASSERT_OK(sl__cowmap_snapshot(m, &snaps[i]));
        refs[i] = *cur;
        snap_n[i] = n_cur;
      } else {
        sl_cowmap_iter_t it;
        sl__cowmap_snap_iter(snaps[i], &it);
        diff_check(&refs[i], &it, snap_n[i], seed);
        sl__cowmap_snap_release(snaps[i]);
        snaps[i] = NULL;
      }
    } else if (r < 980) {
      sl__cowmap_gc(m);
    } else if (r < 990) {
      SL_ASSERT_OK(sl__cowmap_reserve(m, n_cur + rnd() % 3000));
    } else {
      sl_cowmap_iter_t it;
      sl__cowmap_iter(m, &it);
      diff_check(cur, &it, n_cur, seed);
      SL_ASSERT_EQ_INT(sl__cowmap_size(m), n_cur);
      for (int i = 0; i < DIFF_SNAPS; i++) {
        if (snaps[i] == NULL) continue;
        SL_ASSERT_EQ_INT(sl__cowmap_snap_size(snaps[i]), snap_n[i]);
        sl__cowmap_snap_iter(snaps[i], &it);
        diff_check(&refs[i], &it, snap_n[i], seed);
      }
    }
    /* Every lookup agrees with the reference. */
    uint64_t q = rnd() % DIFF_KEYS;
    const sl_cowmap_entry_t *e = sl__cowmap_get(m, hash_of(q, mask), &q, 8);
    SL_ASSERT_EQ_INT(e != NULL, cur->len[q] != 0);
    if (e != NULL) {
      SL_ASSERT_EQ_INT(e->vlen, cur->len[q] - 1u);
      SL_ASSERT_TRUE(memcmp(e->val, cur->val[q], e->vlen) == 0);
    }
  }
  for (int i = 0; i < DIFF_SNAPS; i++) {
    if (snaps[i] == NULL) continue;
    sl_cowmap_iter_t it;
    sl__cowmap_snap_iter(snaps[i], &it);
    diff_check(&refs[i], &it, snap_n[i], seed);
    sl__cowmap_snap_release(snaps[i]);
  }
  sl__cowmap_gc(m);
  SL_ASSERT_EQ_INT(sl__cowmap_retired(m), 0);
  free(cur);
  free(refs);
  sl__cowmap_destroy(m);
}

SL_TEST(differential_against_reference) {
  for (uint64_t seed = 1; seed <= 2; seed++) differential(seed, ~0ull);
}

SL_TEST(differential_with_equal_hashes) {
  for (uint64_t seed = 11; seed <= 12; seed++)
    differential(seed, 0xffull);
}

/* Filling a map in another map's iteration order (what a restore does)
 * stays linear: inserts probe a few slots each on average, not a cluster
 * that grows with the map (found by the recovery benchmark: homes taken
 * from the top hash bits made a 100 MB restore 70x slower, from the low
 * bits 5x slower). */
SL_TEST(fill_in_iteration_order_of_another_map) {
  /* At 0.72 load of 2^18 slots: the table being filled passes through
   * 2^17 slots while a half of the entries is in. */
  enum { N = 190000 };
  sl_cowmap_t *a, *b;
  SL_ASSERT_OK(sl__cowmap_create(&a));
  SL_ASSERT_OK(sl__cowmap_create(&b));
  for (uint64_t k = 0; k < N; k++) put_u64(a, k, k, ~0ull);
  sl_cowmap_iter_t it;
  sl__cowmap_iter(a, &it);
  const sl_cowmap_entry_t *e;
  while ((e = sl__cowmap_next(&it)) != NULL) {
    sl_cowmap_entry_t *ne;
    bool created;
    SL_ASSERT_OK(sl__cowmap_upsert(b, e->hash, e->key, e->klen, 0, 8, &ne,
                                   &created));
    SL_ASSERT_TRUE(created);
    SL_ASSERT_OK(sl__cowmap_entry_set_value(ne, e->val, e->vlen));
  }
  SL_ASSERT_EQ_INT(sl__cowmap_size(b), N);
  SL_ASSERT_EQ_INT(sl__cowmap_capacity(a), 1u << 18);
  /* Random order at the same loads probes about 1-2 slots per insert. */
  SL_ASSERT_LE_INT(sl__cowmap_insert_probes(b), 8 * (uint64_t)N);
  SL_ASSERT_LE_INT(sl__cowmap_insert_probes(a), 8 * (uint64_t)N);
  sl__cowmap_destroy(a);
  sl__cowmap_destroy(b);
}
