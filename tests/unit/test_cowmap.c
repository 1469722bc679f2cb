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
  SL_ASSERT_LE_INT(after_first - before, SL_COWMAP_MAX_DEPTH + 2);
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
