/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the heap keyed-state backend (src/state/heap_backend.c): value,
 * list, map and reducing state of the current key; namespaces; the
 * backend's key-group range; declarations and their conflicts; snapshots
 * pinned while the owner keeps writing (copy-on-write, invariant C1 of
 * README.md); iteration over every (key, namespace); and restore, also
 * into a narrower key-group range as on rescale.
 */
#include "sl_test.h"
#include "state/state.h"

#define MAX_PAR 128

/* Make key k (a C string) current; fails the test if it is outside. */
static void set_key(sl_kstate_t *be, const char *k) {
  uint32_t n = (uint32_t)strlen(k);
  SL_ASSERT_OK(sl__kstate_set_key(be, k, n, sl__key_hash64(k, n)));
}

static uint32_t kg_of(const char *k) {
  uint32_t n = (uint32_t)strlen(k);
  return sl_key_group_of_hash(sl__key_hash_fold(sl__key_hash64(k, n)),
                              MAX_PAR);
}

/* A key (k0, k1, ...) whose key group lies in [lo, hi], or not. */
static void find_key(char *buf, size_t size, uint32_t lo, uint32_t hi,
                     bool inside, int start) {
  for (int i = start; i < start + 100000; i++) {
    snprintf(buf, size, "k%d", i);
    uint32_t kg = kg_of(buf);
    if ((kg >= lo && kg <= hi) == inside) return;
  }
  SL_TEST_FAIL("no key found");
}

static sl_state_t *declare(sl_kstate_t *be, const char *name,
                           sl_state_kind_t kind) {
  sl_state_desc_t d = {.name = name, .kind = kind};
  sl_state_t *st = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__kstate_register(be, &d, &st, &err), err);
  return st;
}

static sl_kstate_t *backend(uint32_t lo, uint32_t hi) {
  sl_kstate_t *be = NULL;
  SL_ASSERT_OK(sl__kstate_create(MAX_PAR, lo, hi, &be));
  return be;
}

static void assert_value(sl_state_t *st, const char *want) {
  sl_slice_t v;
  if (want == NULL) {
    SL_ASSERT_EQ_INT(sl_value_get(st, &v), SL_ENOTFOUND);
    return;
  }
  SL_ASSERT_OK(sl_value_get(st, &v));
  SL_ASSERT_EQ_INT(v.len, strlen(want));
  SL_ASSERT_TRUE(memcmp(v.ptr, want, v.len) == 0);
}

SL_TEST(value_state) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  sl_slice_t v;
  /* No current key yet. */
  SL_ASSERT_EQ_INT(sl_value_get(st, &v), SL_ESTATE);
  SL_ASSERT_EQ_INT(sl_value_put(st, "x", 1), SL_ESTATE);
  set_key(be, "alice");
  assert_value(st, NULL);
  SL_ASSERT_OK(sl_value_put(st, "one", 3));
  assert_value(st, "one");
  SL_ASSERT_OK(sl_value_put(st, "a longer value than inline", 26));
  assert_value(st, "a longer value than inline");
  SL_ASSERT_OK(sl_value_put(st, "", 0));
  assert_value(st, "");
  /* Keys are separate. */
  set_key(be, "bob");
  assert_value(st, NULL);
  SL_ASSERT_OK(sl_value_put_i64(st, -42));
  int64_t i;
  SL_ASSERT_OK(sl_value_get_i64(st, &i));
  SL_ASSERT_EQ_INT(i, -42);
  set_key(be, "alice");
  assert_value(st, "");
  SL_ASSERT_EQ_INT(sl_value_get_i64(st, &i), SL_ETYPE); /* not 8 bytes */
  SL_ASSERT_OK(sl_state_clear(st));
  assert_value(st, NULL);
  SL_ASSERT_OK(sl_state_clear(st)); /* clearing nothing is fine */
  SL_ASSERT_EQ_INT(sl__state_size(st), 1);
  /* The wrong kind of call. */
  SL_ASSERT_EQ_INT(sl_list_add(st, "x", 1), SL_ETYPE);
  SL_ASSERT_EQ_INT(sl_map_put(st, "k", 1, "v", 1), SL_ETYPE);
  sl__kstate_destroy(be);
}

SL_TEST(list_state) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "l", SL_STATE_LIST);
  set_key(be, "k");
  sl_list_iter_t it;
  sl_slice_t item;
  SL_ASSERT_OK(sl_list_iter(st, &it));
  SL_ASSERT_TRUE(!sl_list_next(&it, &item)); /* empty */
  const char *items[] = {"first", "", "third, somewhat longer than inline"};
  for (int i = 0; i < 3; i++)
    SL_ASSERT_OK(sl_list_add(st, items[i], strlen(items[i])));
  set_key(be, "other");
  SL_ASSERT_OK(sl_list_add(st, "x", 1));
  set_key(be, "k");
  SL_ASSERT_OK(sl_list_iter(st, &it));
  for (int i = 0; i < 3; i++) {
    SL_ASSERT_TRUE(sl_list_next(&it, &item));
    SL_ASSERT_EQ_INT(item.len, strlen(items[i]));
    SL_ASSERT_TRUE(memcmp(item.ptr, items[i], item.len) == 0);
  }
  SL_ASSERT_TRUE(!sl_list_next(&it, &item));
  SL_ASSERT_EQ_INT(sl_value_put(st, "x", 1), SL_ETYPE);
  SL_ASSERT_OK(sl_state_clear(st));
  SL_ASSERT_OK(sl_list_iter(st, &it));
  SL_ASSERT_TRUE(!sl_list_next(&it, &item));
  sl__kstate_destroy(be);
}

static bool map_has(sl_state_t *st, const char *k, const char *want) {
  sl_slice_t v;
  int rc = sl_map_get(st, k, strlen(k), &v);
  if (want == NULL) return rc == SL_ENOTFOUND;
  return rc == SL_OK && v.len == strlen(want) &&
         memcmp(v.ptr, want, v.len) == 0;
}

SL_TEST(map_state) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "m", SL_STATE_MAP);
  set_key(be, "user");
  SL_ASSERT_TRUE(map_has(st, "a", NULL));
  SL_ASSERT_OK(sl_map_put(st, "a", 1, "1", 1));
  SL_ASSERT_OK(sl_map_put(st, "b", 1, "22", 2));
  SL_ASSERT_OK(sl_map_put(st, "c", 1, "", 0));
  SL_ASSERT_OK(sl_map_put(st, "a", 1, "9", 1));     /* same length */
  SL_ASSERT_OK(sl_map_put(st, "b", 1, "333", 3));   /* other length */
  SL_ASSERT_TRUE(map_has(st, "a", "9"));
  SL_ASSERT_TRUE(map_has(st, "b", "333"));
  SL_ASSERT_TRUE(map_has(st, "c", ""));
  /* Iteration yields each user key once. */
  sl_map_iter_t it;
  sl_slice_t k, v;
  int seen = 0, n = 0;
  SL_ASSERT_OK(sl_map_iter(st, &it));
  while (sl_map_next(&it, &k, &v)) {
    SL_ASSERT_EQ_INT(k.len, 1);
    seen |= 1 << (((const char *)k.ptr)[0] - 'a');
    n++;
  }
  SL_ASSERT_EQ_INT(n, 3);
  SL_ASSERT_EQ_INT(seen, 7);
  SL_ASSERT_OK(sl_map_remove(st, "b", 1));
  SL_ASSERT_EQ_INT(sl_map_remove(st, "b", 1), SL_ENOTFOUND);
  SL_ASSERT_TRUE(map_has(st, "b", NULL));
  SL_ASSERT_TRUE(map_has(st, "a", "9"));
  /* Removing the last user key removes the entry. */
  SL_ASSERT_OK(sl_map_remove(st, "a", 1));
  SL_ASSERT_OK(sl_map_remove(st, "c", 1));
  SL_ASSERT_EQ_INT(sl__state_size(st), 0);
  SL_ASSERT_OK(sl_map_iter(st, &it));
  SL_ASSERT_TRUE(!sl_map_next(&it, &k, &v));
  sl__kstate_destroy(be);
}

static int concat(void *user, sl_slice_t a, sl_slice_t b, sl_bytes_t *out) {
  (*(int *)user)++;
  int rc = sl_bytes_append(out, a.ptr, a.len);
  return rc == SL_OK ? sl_bytes_append(out, b.ptr, b.len) : rc;
}

SL_TEST(reducing_state) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  int calls = 0;
  sl_state_desc_t d = {.name = "r", .kind = SL_STATE_REDUCING,
                       .reduce = concat, .reduce_user = &calls};
  sl_state_t *st;
  SL_ASSERT_OK(sl__kstate_register(be, &d, &st, NULL));
  set_key(be, "k");
  sl_slice_t v;
  SL_ASSERT_EQ_INT(sl_reducing_get(st, &v), SL_ENOTFOUND);
  SL_ASSERT_OK(sl_reducing_add(st, "a", 1));
  SL_ASSERT_EQ_INT(calls, 0); /* the first value is stored as it is */
  SL_ASSERT_OK(sl_reducing_add(st, "bc", 2));
  SL_ASSERT_OK(sl_reducing_add(st, "d", 1));
  SL_ASSERT_EQ_INT(calls, 2);
  SL_ASSERT_OK(sl_reducing_get(st, &v));
  SL_ASSERT_EQ_INT(v.len, 4);
  SL_ASSERT_TRUE(memcmp(v.ptr, "abcd", 4) == 0);
  sl__kstate_destroy(be);
}

SL_TEST(declarations) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *a = declare(be, "a", SL_STATE_VALUE);
  SL_ASSERT_EQ_PTR(declare(be, "a", SL_STATE_VALUE), a);
  SL_ASSERT_EQ_INT(sl__kstate_n_states(be), 1);
  SL_ASSERT_EQ_PTR(sl__kstate_state(be, 0), a);
  SL_ASSERT_EQ_PTR(sl__kstate_state(be, 1), NULL);
  SL_ASSERT_EQ_INT(sl__state_desc(a)->version, 1); /* 0 means 1 */
  sl_state_t *st = NULL;
  sl_error_t *err = NULL;
  sl_state_desc_t d = {.name = "a", .kind = SL_STATE_LIST};
  SL_ASSERT_EQ_INT(sl__kstate_register(be, &d, &st, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "different kinds") != NULL);
  sl_error_destroy(err);
  err = NULL;
  d = (sl_state_desc_t){.name = "", .kind = SL_STATE_VALUE};
  SL_ASSERT_EQ_INT(sl__kstate_register(be, &d, &st, &err), SL_EINVAL);
  sl_error_destroy(err);
  err = NULL;
  d = (sl_state_desc_t){.name = "k", .kind = (sl_state_kind_t)9};
  SL_ASSERT_EQ_INT(sl__kstate_register(be, &d, &st, &err), SL_EINVAL);
  sl_error_destroy(err);
  err = NULL;
  d = (sl_state_desc_t){.name = "r", .kind = SL_STATE_REDUCING};
  SL_ASSERT_EQ_INT(sl__kstate_register(be, &d, &st, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "reduce function") != NULL);
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT(sl__kstate_n_states(be), 1);
  sl__kstate_destroy(be);
}

SL_TEST(namespaces) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  set_key(be, "k");
  SL_ASSERT_OK(sl_value_put(st, "none", 4));
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "w1", 2));
  assert_value(st, NULL);
  SL_ASSERT_OK(sl_value_put(st, "in w1", 5));
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "w2", 2));
  SL_ASSERT_OK(sl_value_put(st, "in w2", 5));
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "w1", 2));
  assert_value(st, "in w1");
  /* The current key is the key alone, whatever the namespace. */
  sl_slice_t ck = sl__kstate_current_key(be);
  SL_ASSERT_EQ_INT(ck.len, 1);
  SL_ASSERT_TRUE(memcmp(ck.ptr, "k", 1) == 0);
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "", 0));
  assert_value(st, "none");
  /* A new key starts in the empty namespace. */
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "w2", 2));
  set_key(be, "k");
  assert_value(st, "none");
  SL_ASSERT_EQ_INT(sl__state_size(st), 3);
  /* Clearing one namespace leaves the others. */
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "w2", 2));
  SL_ASSERT_OK(sl_state_clear(st));
  SL_ASSERT_EQ_INT(sl__state_size(st), 2);
  SL_ASSERT_OK(sl__kstate_set_namespace(be, "w1", 2));
  assert_value(st, "in w1");
  sl__kstate_destroy(be);
}

SL_TEST(key_groups) {
  sl_kstate_t *be = NULL;
  SL_ASSERT_EQ_INT(sl__kstate_create(MAX_PAR, 10, 9, &be), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl__kstate_create(MAX_PAR, 0, MAX_PAR, &be), SL_EINVAL);
  be = backend(32, 63);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  char in[32], out[32];
  find_key(in, sizeof(in), 32, 63, true, 0);
  find_key(out, sizeof(out), 32, 63, false, 0);
  set_key(be, in);
  SL_ASSERT_EQ_INT(sl__kstate_current_key_group(be), kg_of(in));
  SL_ASSERT_OK(sl_value_put(st, "x", 1));
  /* A key of another subtask's key group is refused; the current key
   * stays. */
  uint32_t n = (uint32_t)strlen(out);
  SL_ASSERT_EQ_INT(sl__kstate_set_key(be, out, n, sl__key_hash64(out, n)),
                   SL_EINVAL);
  SL_ASSERT_EQ_INT(sl__kstate_current_key_group(be), kg_of(in));
  assert_value(st, "x");
  sl__kstate_destroy(be);
}

typedef struct visit_s {
  sl_state_t *st;
  int n;
  int n_ns;
} visit_t;

static int visit(void *user, sl_slice_t key, sl_slice_t ns) {
  visit_t *v = user;
  v->n++;
  if (ns.len) v->n_ns++;
  /* The entry is current: its value reads back, and it may be written. */
  sl_slice_t val;
  SL_ASSERT_OK(sl_value_get(v->st, &val));
  SL_ASSERT_EQ_INT(val.len, key.len + ns.len);
  SL_ASSERT_TRUE(memcmp(val.ptr, key.ptr, key.len) == 0);
  SL_ASSERT_TRUE(ns.len == 0 ||
                 memcmp((const uint8_t *)val.ptr + key.len, ns.ptr, ns.len) ==
                     0);
  return sl_value_put(v->st, val.ptr, val.len);
}

/* Stores value = key + namespace for n keys, half of them also in "ns". */
static void fill(sl_kstate_t *be, sl_state_t *st, int n) {
  char key[32], val[64];
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof(key), "key-%d", i);
    set_key(be, key);
    SL_ASSERT_OK(sl_value_put(st, key, strlen(key)));
    if (i % 2) {
      SL_ASSERT_OK(sl__kstate_set_namespace(be, "ns", 2));
      snprintf(val, sizeof(val), "%sns", key);
      SL_ASSERT_OK(sl_value_put(st, val, strlen(val)));
    }
  }
}

SL_TEST(iteration) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  fill(be, st, 500);
  SL_ASSERT_EQ_INT(sl__state_size(st), 750);
  visit_t v = {st, 0, 0};
  SL_ASSERT_OK(sl__state_for_each(st, visit, &v));
  SL_ASSERT_EQ_INT(v.n, 750);
  SL_ASSERT_EQ_INT(v.n_ns, 250);
  SL_ASSERT_EQ_INT(sl__state_size(st), 750);
  sl__kstate_destroy(be);
}

/* Entries of state i of a snapshot, over all of its key groups. */
static size_t snap_count(const sl_kstate_snap_t *s, uint32_t state,
                         uint32_t lo, uint32_t hi) {
  size_t n = 0;
  for (uint32_t kg = lo; kg <= hi; kg++) {
    const sl_cowmap_snap_t *m = sl__kstate_snap_map(s, state, kg);
    if (m) n += sl__cowmap_snap_size(m);
  }
  return n;
}

static bool snap_value(const sl_kstate_snap_t *s, const char *key,
                       const char *want) {
  uint32_t kl = (uint32_t)strlen(key);
  const sl_cowmap_snap_t *m = sl__kstate_snap_map(s, 0, kg_of(key));
  sl_cowmap_iter_t it;
  sl__cowmap_snap_iter(m, &it);
  const sl_cowmap_entry_t *e;
  while ((e = sl__cowmap_next(&it)) != NULL)
    if (e->klen == kl && e->nslen == 0 && memcmp(e->key, key, kl) == 0)
      return want != NULL && e->vlen == strlen(want) &&
             memcmp(e->val, want, e->vlen) == 0;
  return want == NULL;
}

/* Checks invariant C1 through the backend: a pinned snapshot keeps what
 * it saw while the owner overwrites, adds and removes. */
SL_TEST(snapshot_copy_on_write) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  set_key(be, "a");
  SL_ASSERT_OK(sl_value_put(st, "a1", 2));
  set_key(be, "b");
  SL_ASSERT_OK(sl_value_put(st, "b1", 2));
  sl_kstate_snap_t *s1;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &s1));
  SL_ASSERT_EQ_INT(sl__kstate_snap_n_states(s1), 1);
  SL_ASSERT_EQ_STR(sl__kstate_snap_desc(s1, 0)->name, "v");
  SL_ASSERT_EQ_PTR(sl__kstate_snap_desc(s1, 1), NULL);
  set_key(be, "a");
  SL_ASSERT_OK(sl_value_put(st, "a2 -- now longer than before", 28));
  set_key(be, "b");
  SL_ASSERT_OK(sl_state_clear(st));
  set_key(be, "c");
  SL_ASSERT_OK(sl_value_put(st, "c2", 2));
  sl_kstate_snap_t *s2;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &s2));
  set_key(be, "a");
  SL_ASSERT_OK(sl_value_put(st, "a3", 2));
  /* Each snapshot sees its own moment; the live state the newest. */
  SL_ASSERT_EQ_INT(snap_count(s1, 0, 0, MAX_PAR - 1), 2);
  SL_ASSERT_TRUE(snap_value(s1, "a", "a1"));
  SL_ASSERT_TRUE(snap_value(s1, "b", "b1"));
  SL_ASSERT_TRUE(snap_value(s1, "c", NULL));
  SL_ASSERT_EQ_INT(snap_count(s2, 0, 0, MAX_PAR - 1), 2);
  SL_ASSERT_TRUE(snap_value(s2, "a", "a2 -- now longer than before"));
  SL_ASSERT_TRUE(snap_value(s2, "b", NULL));
  SL_ASSERT_TRUE(snap_value(s2, "c", "c2"));
  assert_value(st, "a3");
  /* Released out of order and collected: the live state is intact. */
  sl__kstate_snap_release(s1);
  sl__kstate_gc(be);
  SL_ASSERT_TRUE(snap_value(s2, "a", "a2 -- now longer than before"));
  sl__kstate_snap_release(s2);
  sl__kstate_gc(be);
  assert_value(st, "a3");
  set_key(be, "c");
  assert_value(st, "c2");
  /* Out-of-range lookups in a snapshot give NULL. */
  sl_kstate_snap_t *s3;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &s3));
  SL_ASSERT_EQ_PTR(sl__kstate_snap_map(s3, 1, 0), NULL);
  SL_ASSERT_EQ_PTR(sl__kstate_snap_map(s3, 0, MAX_PAR), NULL);
  sl__kstate_snap_release(s3);
  sl__kstate_destroy(be);
}

/* Copy every entry of a snapshot into be, as a restore from a state file
 * does (sl__ckpt_read_state's callbacks); returns the first error. */
static int restore_from(sl_kstate_t *be, const sl_kstate_snap_t *s,
                        uint32_t lo, uint32_t hi, uint32_t version) {
  uint32_t n = sl__kstate_snap_n_states(s);
  for (uint32_t i = 0; i < n; i++) {
    sl_state_desc_t d = *sl__kstate_snap_desc(s, i);
    d.version = version;
    sl_state_t *st;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl__kstate_restore_state(be, &d, NULL, &st, &err), err);
    for (uint32_t kg = lo; kg <= hi; kg++) {
      const sl_cowmap_snap_t *m = sl__kstate_snap_map(s, i, kg);
      sl_cowmap_iter_t it;
      sl__cowmap_snap_iter(m, &it);
      const sl_cowmap_entry_t *e;
      while ((e = sl__cowmap_next(&it)) != NULL) {
        int rc = sl__kstate_restore_entry(st, kg, e->key, e->klen, e->nslen,
                                          e->val, e->vlen);
        if (rc != SL_OK) return rc;
      }
    }
  }
  return SL_OK;
}

SL_TEST(restore) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  int calls = 0;
  sl_state_desc_t dr = {.name = "r", .kind = SL_STATE_REDUCING,
                        .reduce = concat, .reduce_user = &calls};
  sl_state_t *sr;
  SL_ASSERT_OK(sl__kstate_register(be, &dr, &sr, NULL));
  fill(be, st, 200);
  set_key(be, "key-1");
  SL_ASSERT_OK(sl_reducing_add(sr, "x", 1));
  sl_kstate_snap_t *s;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &s));

  /* Same range: everything comes back once the operator declares it. */
  sl_kstate_t *be2 = backend(0, MAX_PAR - 1);
  SL_ASSERT_OK(restore_from(be2, s, 0, MAX_PAR - 1, 1));
  SL_ASSERT_EQ_STR(sl__kstate_undeclared(be2), "v");
  sl_state_t *st2 = declare(be2, "v", SL_STATE_VALUE);
  SL_ASSERT_EQ_STR(sl__kstate_undeclared(be2), "r");
  sl_state_t *sr2;
  SL_ASSERT_OK(sl__kstate_register(be2, &dr, &sr2, NULL));
  SL_ASSERT_EQ_PTR(sl__kstate_undeclared(be2), NULL);
  SL_ASSERT_EQ_INT(sl__state_size(st2), 300);
  visit_t v = {st2, 0, 0};
  SL_ASSERT_OK(sl__state_for_each(st2, visit, &v));
  SL_ASSERT_EQ_INT(v.n, 300);
  set_key(be2, "key-1");
  SL_ASSERT_OK(sl_reducing_add(sr2, "y", 1)); /* the declared function */
  sl_slice_t val;
  SL_ASSERT_OK(sl_reducing_get(sr2, &val));
  SL_ASSERT_EQ_INT(val.len, 2);
  SL_ASSERT_TRUE(memcmp(val.ptr, "xy", 2) == 0);
  sl__kstate_destroy(be2);

  /* A declaration that does not match the checkpoint is refused. */
  be2 = backend(0, MAX_PAR - 1);
  SL_ASSERT_OK(restore_from(be2, s, 0, MAX_PAR - 1, 2));
  sl_state_desc_t d = {.name = "v", .kind = SL_STATE_LIST};
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__kstate_register(be2, &d, &st2, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "value state in the "
                                               "checkpoint") != NULL);
  sl_error_destroy(err);
  err = NULL;
  d.kind = SL_STATE_VALUE; /* version 1, stored 2 */
  SL_ASSERT_EQ_INT(sl__kstate_register(be2, &d, &st2, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "the checkpoint holds "
                                               "version 2") != NULL);
  sl_error_destroy(err);
  err = NULL;
  sl__kstate_destroy(be2);

  /* Rescale: a subtask with half the key groups takes only its own; an
   * entry of another key group is corrupt for it. */
  be2 = backend(0, MAX_PAR / 2 - 1);
  SL_ASSERT_OK(restore_from(be2, s, 0, MAX_PAR / 2 - 1, 1));
  st2 = declare(be2, "v", SL_STATE_VALUE);
  size_t half = sl__state_size(st2);
  SL_ASSERT_TRUE(half > 0 && half < 300);
  SL_ASSERT_EQ_INT(half, snap_count(s, 0, 0, MAX_PAR / 2 - 1));
  SL_ASSERT_EQ_INT(restore_from(be2, s, MAX_PAR / 2, MAX_PAR - 1, 1),
                   SL_ECORRUPT);
  /* An entry filed under the wrong key group, or a namespace longer than
   * its key, is corrupt too. */
  char key[32];
  find_key(key, sizeof(key), 1, MAX_PAR / 2 - 1, true, 0);
  uint32_t kl = (uint32_t)strlen(key);
  uint32_t wrong = kg_of(key) == 1 ? 2 : 1;
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(st2, wrong, (const uint8_t *)key,
                                            kl, 0, (const uint8_t *)"v", 1),
                   SL_ECORRUPT);
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(st2, kg_of(key),
                                            (const uint8_t *)key, kl, kl + 1,
                                            (const uint8_t *)"v", 1),
                   SL_ECORRUPT);
  sl__kstate_destroy(be2);

  /* A state of an unknown kind in a checkpoint is corrupt. */
  be2 = backend(0, MAX_PAR - 1);
  d = (sl_state_desc_t){.name = "q", .kind = (sl_state_kind_t)7};
  SL_ASSERT_EQ_INT(sl__kstate_restore_state(be2, &d, NULL, &st2, &err),
                   SL_ECORRUPT);
  sl_error_destroy(err);
  sl__kstate_destroy(be2);
  sl__kstate_snap_release(s);
  sl__kstate_destroy(be);
}

/* A restored list or map value must have the layout its readers trust:
 * the readers do not check lengths again (found by fuzzing the state-file
 * reader: a crafted file with valid checksums read past the value). */
SL_TEST(restore_malformed_values) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *sl, *sm, *sv;
  sl_state_desc_t dl = {.name = "l", .kind = SL_STATE_LIST};
  sl_state_desc_t dm = {.name = "m", .kind = SL_STATE_MAP};
  sl_state_desc_t dv = {.name = "v", .kind = SL_STATE_VALUE};
  SL_ASSERT_OK(sl__kstate_restore_state(be, &dl, NULL, &sl, NULL));
  SL_ASSERT_OK(sl__kstate_restore_state(be, &dm, NULL, &sm, NULL));
  SL_ASSERT_OK(sl__kstate_restore_state(be, &dv, NULL, &sv, NULL));
  const uint8_t *key = (const uint8_t *)"k";
  uint32_t kg = kg_of("k");
  /* [u32 len][bytes]: lengths past the end, or a torn length. */
  static const uint8_t list_bad1[] = {5, 0, 0, 0, 'a'};
  static const uint8_t list_bad2[] = {1, 0, 0, 0, 'a', 0, 0};
  static const uint8_t list_ok[] = {1, 0, 0, 0, 'a', 0, 0, 0, 0};
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(sl, kg, key, 1, 0, list_bad1, 5),
                   SL_ECORRUPT);
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(sl, kg, key, 1, 0, list_bad2, 7),
                   SL_ECORRUPT);
  SL_ASSERT_OK(sl__kstate_restore_entry(sl, kg, key, 1, 0, list_ok, 9));
  /* [u32 klen][k][u32 vlen][v]: a user key whose value length is missing
   * or too long, a huge key length. */
  static const uint8_t map_bad1[] = {1, 0, 0, 0, 'x'};
  static const uint8_t map_bad2[] = {1, 0, 0, 0, 'x', 9, 0, 0, 0, 'y'};
  static const uint8_t map_bad3[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
  static const uint8_t map_ok[] = {1, 0, 0, 0, 'x', 1, 0, 0, 0, 'y'};
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(sm, kg, key, 1, 0, map_bad1, 5),
                   SL_ECORRUPT);
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(sm, kg, key, 1, 0, map_bad2, 10),
                   SL_ECORRUPT);
  SL_ASSERT_EQ_INT(sl__kstate_restore_entry(sm, kg, key, 1, 0, map_bad3, 8),
                   SL_ECORRUPT);
  SL_ASSERT_OK(sl__kstate_restore_entry(sm, kg, key, 1, 0, map_ok, 10));
  /* A value state holds any bytes. */
  SL_ASSERT_OK(sl__kstate_restore_entry(sv, kg, key, 1, 0, map_bad1, 5));
  /* What was accepted reads back. */
  sl_state_t *x;
  SL_ASSERT_OK(sl__kstate_register(be, &dm, &x, NULL));
  set_key(be, "k");
  SL_ASSERT_TRUE(map_has(sm, "x", "y"));
  sl__kstate_destroy(be);
}

/* A restore that knows each key group's entry count sizes its maps first
 * (sl__kstate_restore_reserve); the state comes back the same, and a key
 * group outside the range is refused. */
SL_TEST(restore_with_reserve) {
  sl_kstate_t *be = backend(0, MAX_PAR - 1);
  sl_state_t *st = declare(be, "v", SL_STATE_VALUE);
  fill(be, st, 2000);
  sl_kstate_snap_t *s;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &s));
  sl_kstate_t *be2 = backend(0, MAX_PAR - 1);
  sl_state_t *st2;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__kstate_restore_state(be2, sl__kstate_snap_desc(s, 0),
                                          NULL, &st2, &err), err);
  for (uint32_t kg = 0; kg < MAX_PAR; kg++) {
    const sl_cowmap_snap_t *m = sl__kstate_snap_map(s, 0, kg);
    SL_ASSERT_OK(sl__kstate_restore_reserve(st2, kg, sl__cowmap_snap_size(m)));
    sl_cowmap_iter_t it;
    sl__cowmap_snap_iter(m, &it);
    const sl_cowmap_entry_t *e;
    while ((e = sl__cowmap_next(&it)) != NULL)
      SL_ASSERT_OK(sl__kstate_restore_entry(st2, kg, e->key, e->klen,
                                            e->nslen, e->val, e->vlen));
  }
  st2 = declare(be2, "v", SL_STATE_VALUE);
  SL_ASSERT_EQ_INT(sl__state_size(st2), 3000);
  visit_t v = {st2, 0, 0};
  SL_ASSERT_OK(sl__state_for_each(st2, visit, &v));
  SL_ASSERT_EQ_INT(v.n, 3000);
  SL_ASSERT_EQ_INT(v.n_ns, 1000);
  sl__kstate_destroy(be2);
  /* Outside the range of the backend restored into. */
  be2 = backend(0, 3);
  SL_ASSERT_OK_E(sl__kstate_restore_state(be2, sl__kstate_snap_desc(s, 0),
                                          NULL, &st2, &err), err);
  SL_ASSERT_EQ_INT(sl__kstate_restore_reserve(st2, 4, 10), SL_ECORRUPT);
  SL_ASSERT_OK(sl__kstate_restore_reserve(st2, 3, 10));
  sl__kstate_destroy(be2);
  sl__kstate_snap_release(s);
  sl__kstate_destroy(be);
}
