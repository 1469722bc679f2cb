/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Versioned copy-on-write hash array mapped trie.  One map holds the
 * entries of one (state, key group); the heap backend snapshots every map of
 * a subtask in its sync phase.  See README.md.
 *
 * DESIGN NOTES
 *
 * Versions.  The map has a current version V (starts at 1).  Every node
 * (branch or entry) records the version that created it.  A snapshot pins
 * the root and takes the version s = V, then V becomes s + 1.  A node
 * created at version c is part of snapshot s exactly when c <= s and it was
 * still in the tree when s was taken.
 *
 *     node state        may be written in place?    freed when
 *     ----------        ------------------------    ----------
 *     LIVE, c > L       yes                         removed from the tree
 *     LIVE, c <= L      no: copy, then RETIRE old   -
 *     RETIRED(c, r)     never                       no live s with c <= s < r
 *
 * where L is the largest version of a live snapshot (0 if none) and r is V
 * at the moment the node left the tree.
 *
 * Transitions: map_copy_branch()/entry_copy() retire shared nodes;
 * retire_or_free() moves a removed node to RETIRED or frees it; gc() frees
 * RETIRED nodes and forgets released snapshots.
 *
 * Invariants:
 *  C1. A node reachable from a live snapshot is never modified or freed.
 *  C2. Every node is freed exactly once: as LIVE at destroy, when removed
 *      while no snapshot shares it, or from the retired list.
 *  C3. Freeing a retired node never frees its children; they are LIVE or
 *      RETIRED in their own right.
 *  C4. Snapshot is O(1): it stores the root pointer and bumps V.
 *
 * Threads: the owner thread does every write, snapshot and gc.  Another
 * thread may iterate a snapshot and release it; releasing only stores an
 * atomic flag and drops a reference, so the owner frees memory later.
 *
 * Trie shape: level d uses hash bits [5d, 5d + 5); 12 levels cover 60 bits.
 * Entries whose hashes agree on those 60 bits form a chain at depth 12.
 */
#include <stdatomic.h>

#include "state/cowmap.h"

#define BITS 5
#define FANOUT 32
#define MAX_DEPTH SL_COWMAP_MAX_DEPTH

typedef struct branch_s {
  uint64_t version;
  uint32_t bitmap;
  uint32_t cap;
  uintptr_t child[]; /* bit 0 set: sl_cowmap_entry_t *, else branch_t * */
} branch_t;

typedef struct retired_s {
  uintptr_t node; /* tagged like a child */
  uint64_t created;
  uint64_t retired_at;
} retired_t;

struct sl_cowmap_snap_s {
  sl_cowmap_t *map;
  branch_t *root;
  uint64_t version;
  size_t size;
  _Atomic bool is_released; /* set by the releasing thread */
  struct sl_cowmap_snap_s *next; /* owner only */
};

struct sl_cowmap_s {
  /* Owner-thread fields. */
  branch_t *root;
  uint64_t version;     /* V */
  uint64_t max_live;    /* L, possibly stale-high until gc */
  size_t size;
  uint64_t n_copies;
  uint64_t epoch;       /* bumped whenever an entry leaves the tree */
  retired_t *retired;
  size_t n_retired, cap_retired;
  sl_cowmap_snap_t *snaps; /* live or released-not-yet-collected */
  /* Shared fields. */
  _Atomic uint32_t refs;          /* owner + each unreleased snapshot */
  _Atomic uint32_t n_released;    /* releases not yet collected */
};

static inline bool is_entry(uintptr_t c) { return (c & 1u) != 0; }
static inline sl_cowmap_entry_t *as_entry(uintptr_t c) {
  return (sl_cowmap_entry_t *)(c & ~(uintptr_t)1);
}
static inline branch_t *as_branch(uintptr_t c) { return (branch_t *)c; }
static inline uintptr_t tag_entry(sl_cowmap_entry_t *e) {
  return (uintptr_t)e | 1u;
}
static inline uint32_t slot_of(uint64_t hash, int depth) {
  return (uint32_t)(hash >> (BITS * depth)) & (FANOUT - 1);
}
/* popcount without a libgcc call on CPUs built for plain x86-64. */
static inline uint32_t popcount32(uint32_t x) {
#if defined(__POPCNT__)
  return (uint32_t)__builtin_popcount(x);
#else
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  return (((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
#endif
}

static inline uint32_t pos_of(uint32_t bitmap, uint32_t bit) {
  return popcount32(bitmap & (bit - 1));
}
static inline uint64_t node_version(uintptr_t c) {
  return is_entry(c) ? as_entry(c)->version : as_branch(c)->version;
}

static branch_t *branch_new(uint64_t version, uint32_t cap) {
  branch_t *b = sl_malloc(sizeof(*b) + cap * sizeof(uintptr_t));
  if (b == NULL) return NULL;
  b->version = version;
  b->bitmap = 0;
  b->cap = cap;
  return b;
}

/*
 * An entry is one allocation: the struct, the key, and an inline area for
 * the value sized when the entry is made.  e->val points there until the
 * value outgrows it.
 */
static inline uint32_t align8(uint32_t n) { return (n + 7u) & ~7u; }
static inline uint8_t *inline_val(const sl_cowmap_entry_t *e) {
  return (uint8_t *)e + sizeof(*e) + align8(e->klen);
}

static void entry_free(sl_cowmap_entry_t *e) {
  if (e->val != inline_val(e)) sl_free(e->val);
  sl_free(e);
}

static void node_free_one(uintptr_t c) {
  if (is_entry(c)) entry_free(as_entry(c));
  else sl_free(as_branch(c));
}

/* Frees a LIVE subtree (destroy only). */
static void tree_free(uintptr_t c) {
  if (is_entry(c)) {
    sl_cowmap_entry_t *e = as_entry(c);
    while (e) {
      sl_cowmap_entry_t *n = e->next;
      entry_free(e);
      e = n;
    }
    return;
  }
  branch_t *b = as_branch(c);
  uint32_t n = popcount32(b->bitmap);
  for (uint32_t i = 0; i < n; i++) tree_free(b->child[i]);
  sl_free(b);
}

static bool is_shared(const sl_cowmap_t *m, uint64_t created) {
  return created <= m->max_live;
}

/*
 * Make room for k retirements, so that a write, once it starts changing the
 * tree, cannot fail half way.
 */
static int retired_reserve(sl_cowmap_t *m, size_t k) {
  if (m->cap_retired - m->n_retired >= k) return SL_OK;
  size_t cap = m->cap_retired ? m->cap_retired : 64;
  while (cap - m->n_retired < k) cap *= 2;
  retired_t *r = sl_realloc(m->retired, cap * sizeof(*r));
  if (r == NULL) return SL_ENOMEM;
  m->retired = r;
  m->cap_retired = cap;
  return SL_OK;
}

/* A node left the tree: free it, or keep it for the snapshots that see it.
 * The caller reserved room with retired_reserve(). */
static void retire_or_free(sl_cowmap_t *m, uintptr_t c) {
  uint64_t created = node_version(c);
  if (is_entry(c)) m->epoch++;
  if (!is_shared(m, created)) {
    node_free_one(c);
    return;
  }
  if (SL_NEVER(m->n_retired == m->cap_retired))
    sl_panic("cowmap: retirement without reservation");
  m->retired[m->n_retired++] = (retired_t){c, created, m->version};
}

static sl_cowmap_entry_t *entry_alloc(uint32_t klen, uint32_t vcap) {
  vcap = align8(vcap < 8 ? 8 : vcap);
  if (vcap > 4096) vcap = 4096; /* large values live outside */
  sl_cowmap_entry_t *e = sl_malloc(sizeof(*e) + align8(klen) + vcap);
  if (e == NULL) return NULL;
  e->klen = klen;
  e->val = inline_val(e);
  e->vcap = vcap;
  e->vlen = 0;
  e->next = NULL;
  return e;
}

static sl_cowmap_entry_t *entry_new(sl_cowmap_t *m, uint64_t hash,
                                    const void *key, uint32_t klen,
                                    uint32_t nslen, uint32_t val_hint) {
  sl_cowmap_entry_t *e = entry_alloc(klen, val_hint);
  if (e == NULL) return NULL;
  e->hash = hash;
  e->version = m->version;
  e->nslen = nslen;
  memcpy(e->key, key, klen);
  return e;
}

static sl_cowmap_entry_t *entry_copy(sl_cowmap_t *m,
                                     const sl_cowmap_entry_t *o) {
  sl_cowmap_entry_t *e = entry_alloc(o->klen, o->vlen);
  if (e == NULL) return NULL;
  if (o->vlen > e->vcap) {
    e->val = sl_malloc(o->vlen);
    if (e->val == NULL) {
      sl_free(e);
      return NULL;
    }
    e->vcap = o->vlen;
  }
  e->hash = o->hash;
  e->version = m->version;
  e->next = o->next;
  e->nslen = o->nslen;
  e->vlen = o->vlen;
  memcpy(e->key, o->key, o->klen);
  if (o->vlen) memcpy(e->val, o->val, o->vlen);
  m->n_copies++;
  return e;
}

int sl__cowmap_create(sl_cowmap_t **out) {
  sl_cowmap_t *m = sl_calloc(1, sizeof(*m));
  if (m == NULL) return SL_ENOMEM;
  m->version = 1;
  m->root = branch_new(1, 4);
  if (m->root == NULL) {
    sl_free(m);
    return SL_ENOMEM;
  }
  atomic_init(&m->refs, 1);
  atomic_init(&m->n_released, 0);
  *out = m;
  return SL_OK;
}

static void map_free(sl_cowmap_t *m) {
  tree_free((uintptr_t)m->root);
  for (size_t i = 0; i < m->n_retired; i++) node_free_one(m->retired[i].node);
  sl_free(m->retired);
  sl_cowmap_snap_t *s = m->snaps;
  while (s) {
    sl_cowmap_snap_t *n = s->next;
    sl_free(s);
    s = n;
  }
  sl_free(m);
}

static void map_unref(sl_cowmap_t *m) {
  /* acq_rel: the thread that frees must see all writes of the others. */
  if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
    map_free(m);
}

void sl__cowmap_destroy(sl_cowmap_t *m) {
  if (m == NULL) return;
  map_unref(m);
}

size_t sl__cowmap_size(const sl_cowmap_t *m) { return m->size; }

uint64_t sl__cowmap_epoch(const sl_cowmap_t *m) { return m->epoch; }

bool sl__cowmap_is_writable(const sl_cowmap_t *m,
                            const sl_cowmap_entry_t *e) {
  return !is_shared(m, e->version);
}
uint64_t sl__cowmap_copies(const sl_cowmap_t *m) { return m->n_copies; }
size_t sl__cowmap_retired(const sl_cowmap_t *m) { return m->n_retired; }

static inline bool key_eq(const sl_cowmap_entry_t *e, uint64_t hash,
                          const void *key, uint32_t klen) {
  return e->hash == hash && e->klen == klen && memcmp(e->key, key, klen) == 0;
}

const sl_cowmap_entry_t *sl__cowmap_get(const sl_cowmap_t *m, uint64_t hash,
                                        const void *key, uint32_t klen) {
  const branch_t *b = m->root;
  for (int depth = 0;; depth++) {
    uint32_t bit = 1u << slot_of(hash, depth);
    if (!(b->bitmap & bit)) return NULL;
    uintptr_t c = b->child[pos_of(b->bitmap, bit)];
    if (is_entry(c)) {
      for (const sl_cowmap_entry_t *e = as_entry(c); e; e = e->next)
        if (key_eq(e, hash, key, klen)) return e;
      return NULL;
    }
    b = as_branch(c);
  }
}

/*
 * Make the branch in *slot writable, copying it if a snapshot shares it,
 * with room for one more child when grow is set.
 */
static branch_t *branch_writable(sl_cowmap_t *m, uintptr_t *slot, bool grow) {
  branch_t *b = as_branch(*slot);
  uint32_t n = popcount32(b->bitmap);
  uint32_t need = n + (grow ? 1u : 0u);
  if (!is_shared(m, b->version)) {
    if (need <= b->cap) return b;
    uint32_t cap = b->cap * 2 > FANOUT ? FANOUT : b->cap * 2;
    branch_t *g = sl_realloc(b, sizeof(*b) + cap * sizeof(uintptr_t));
    if (g == NULL) return NULL;
    g->cap = cap;
    *slot = (uintptr_t)g;
    return g;
  }
  if (retired_reserve(m, 1) != SL_OK) return NULL;
  branch_t *c = branch_new(m->version, need < 4 ? 4 : need);
  if (c == NULL) return NULL;
  c->bitmap = b->bitmap;
  memcpy(c->child, b->child, n * sizeof(uintptr_t));
  retire_or_free(m, (uintptr_t)b);
  m->n_copies++;
  *slot = (uintptr_t)c;
  return c;
}

static void branch_insert(branch_t *b, uint32_t bit, uintptr_t child) {
  uint32_t n = popcount32(b->bitmap);
  uint32_t pos = pos_of(b->bitmap, bit);
  memmove(&b->child[pos + 1], &b->child[pos], (n - pos) * sizeof(uintptr_t));
  b->child[pos] = child;
  b->bitmap |= bit;
}

/*
 * Rewrite a chain so that the entry at index `target` is writable: copy it
 * and every entry before it when any of them is shared (their next links
 * change).  Returns the writable entry, or NULL when memory ran out (the
 * tree is then unchanged).
 */
#define MAX_CHAIN_COPY 64
static sl_cowmap_entry_t *chain_make_writable(sl_cowmap_t *m, uintptr_t *slot,
                                              int target) {
  sl_cowmap_entry_t *head = as_entry(*slot);
  bool any_shared = false;
  sl_cowmap_entry_t *e = head;
  for (int i = 0; i <= target; i++, e = e->next)
    if (is_shared(m, e->version)) any_shared = true;
  e = head;
  if (!any_shared) {
    for (int i = 0; i < target; i++) e = e->next;
    return e;
  }
  if (target >= MAX_CHAIN_COPY) return NULL; /* 64 full 60-bit collisions */
  if (retired_reserve(m, (size_t)target + 1) != SL_OK) return NULL;
  sl_cowmap_entry_t *copies[MAX_CHAIN_COPY], *olds[MAX_CHAIN_COPY];
  int n = 0;
  for (; n <= target; n++, e = e->next) {
    olds[n] = e;
    copies[n] = entry_copy(m, e);
    if (copies[n] == NULL) {
      for (int k = 0; k < n; k++) entry_free(copies[k]);
      return NULL;
    }
  }
  for (int i = 0; i + 1 < n; i++) copies[i]->next = copies[i + 1];
  copies[n - 1]->next = olds[n - 1]->next;
  for (int i = 0; i < n; i++) retire_or_free(m, tag_entry(olds[i]));
  *slot = tag_entry(copies[0]);
  return copies[n - 1];
}

int sl__cowmap_upsert(sl_cowmap_t *m, uint64_t hash, const void *key,
                      uint32_t klen, uint32_t nslen, uint32_t val_hint,
                      sl_cowmap_entry_t **out_entry, bool *out_created) {
  if (m->max_live &&
      atomic_load_explicit(&m->n_released, memory_order_relaxed))
    sl__cowmap_gc(m);
  uintptr_t root_slot = (uintptr_t)m->root;
  uintptr_t *slot = &root_slot;
  int rc = SL_ENOMEM;
  for (int depth = 0;; depth++) {
    uint32_t bit = 1u << slot_of(hash, depth);
    bool will_insert = !(as_branch(*slot)->bitmap & bit);
    branch_t *b = branch_writable(m, slot, will_insert);
    if (b == NULL) goto out;
    if (will_insert) {
      sl_cowmap_entry_t *e = entry_new(m, hash, key, klen, nslen, val_hint);
      if (e == NULL) goto out;
      branch_insert(b, bit, tag_entry(e));
      m->size++;
      *out_entry = e;
      *out_created = true;
      rc = SL_OK;
      goto out;
    }
    uintptr_t *child = &b->child[pos_of(b->bitmap, bit)];
    if (!is_entry(*child)) {
      slot = child;
      continue;
    }
    /* An entry chain: look for the key. */
    int idx = 0;
    for (sl_cowmap_entry_t *e = as_entry(*child); e; e = e->next, idx++) {
      if (key_eq(e, hash, key, klen)) {
        sl_cowmap_entry_t *w = chain_make_writable(m, child, idx);
        if (w == NULL) goto out;
        *out_entry = w;
        *out_created = false;
        rc = SL_OK;
        goto out;
      }
    }
    if (depth == MAX_DEPTH) {
      /* All 60 bits agree: prepend to the chain; the old chain stays
       * shared unchanged, so nothing is copied. */
      sl_cowmap_entry_t *ne = entry_new(m, hash, key, klen, nslen, val_hint);
      if (ne == NULL) goto out;
      ne->next = as_entry(*child);
      *child = tag_entry(ne);
      m->size++;
      *out_entry = ne;
      *out_created = true;
      rc = SL_OK;
      goto out;
    }
    /* Push the existing entry one level down into a new branch and go on
     * there.  The entry itself is not modified, so it may stay shared. */
    branch_t *nb = branch_new(m->version, 4);
    if (nb == NULL) goto out;
    nb->bitmap = 1u << slot_of(as_entry(*child)->hash, depth + 1);
    nb->child[0] = *child;
    *child = (uintptr_t)nb;
    slot = child;
  }
out:
  m->root = as_branch(root_slot);
  return rc;
}

/* Move the value out of line (or grow it there) to hold cap bytes. */
static int value_grow(sl_cowmap_entry_t *e, uint32_t cap) {
  uint8_t *v;
  if (e->val == inline_val(e)) {
    v = sl_malloc(cap);
    if (v == NULL) return SL_ENOMEM;
    memcpy(v, e->val, e->vlen);
  } else {
    v = sl_realloc(e->val, cap);
    if (v == NULL) return SL_ENOMEM;
  }
  e->val = v;
  e->vcap = cap;
  return SL_OK;
}

int sl__cowmap_entry_set_value(sl_cowmap_entry_t *e, const void *p,
                               uint32_t len) {
  if (len > e->vcap) {
    int rc = value_grow(e, len < 16 ? 16 : len);
    if (rc != SL_OK) return rc;
  }
  if (len) memcpy(e->val, p, len);
  e->vlen = len;
  return SL_OK;
}

int sl__cowmap_entry_reserve_value(sl_cowmap_entry_t *e, uint32_t more) {
  if (e->vcap - e->vlen >= more) return SL_OK;
  uint64_t need = (uint64_t)e->vlen + more;
  if (need > UINT32_MAX / 2) return SL_EOVERFLOW;
  uint32_t cap = e->vcap ? e->vcap : 16;
  while (cap < need) cap *= 2;
  return value_grow(e, cap);
}

int sl__cowmap_remove(sl_cowmap_t *m, uint64_t hash, const void *key,
                      uint32_t klen) {
  if (sl__cowmap_get(m, hash, key, klen) == NULL) return SL_ENOTFOUND;
  /* Reserve first: path copies plus the victim. */
  if (retired_reserve(m, MAX_DEPTH + 2) != SL_OK) return SL_ENOMEM;
  uintptr_t root_slot = (uintptr_t)m->root;
  uintptr_t *slots[MAX_DEPTH + 1];
  uint32_t bits[MAX_DEPTH + 1];
  uintptr_t *slot = &root_slot;
  int rc = SL_ENOMEM;
  int depth = 0;
  uintptr_t *child;
  for (;; depth++) {
    branch_t *b = branch_writable(m, slot, false);
    if (b == NULL) goto out;
    slots[depth] = slot;
    uint32_t bit = 1u << slot_of(hash, depth);
    bits[depth] = bit;
    child = &b->child[pos_of(b->bitmap, bit)];
    if (is_entry(*child)) break;
    slot = child;
  }
  int idx = 0;
  sl_cowmap_entry_t *e = as_entry(*child);
  for (; !key_eq(e, hash, key, klen); e = e->next) idx++;
  sl_cowmap_entry_t *victim;
  if (idx == 0) {
    victim = e;
    if (victim->next) {
      *child = tag_entry(victim->next);
    } else {
      /* Remove the slot; drop branches that become empty, upward.  Every
       * branch on the path was made writable, so none is shared. */
      for (int d = depth; d >= 0; d--) {
        branch_t *b = as_branch(*slots[d]);
        uint32_t n = popcount32(b->bitmap);
        uint32_t pos = pos_of(b->bitmap, bits[d]);
        memmove(&b->child[pos], &b->child[pos + 1],
                (n - pos - 1) * sizeof(uintptr_t));
        b->bitmap &= ~bits[d];
        if (b->bitmap != 0 || d == 0) break;
        sl_free(b);
      }
    }
  } else {
    sl_cowmap_entry_t *prev = chain_make_writable(m, child, idx - 1);
    if (prev == NULL) goto out;
    victim = prev->next;
    prev->next = victim->next;
  }
  m->size--;
  retire_or_free(m, tag_entry(victim));
  rc = SL_OK;
out:
  m->root = as_branch(root_slot);
  return rc;
}

int sl__cowmap_snapshot(sl_cowmap_t *m, sl_cowmap_snap_t **out) {
  sl_cowmap_snap_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  s->map = m;
  s->root = m->root;
  s->version = m->version;
  s->size = m->size;
  atomic_init(&s->is_released, false);
  s->next = m->snaps;
  m->snaps = s;
  m->max_live = m->version;
  m->version++;
  atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
  *out = s;
  return SL_OK;
}

size_t sl__cowmap_snap_size(const sl_cowmap_snap_t *s) { return s->size; }

void sl__cowmap_snap_release(sl_cowmap_snap_t *s) {
  if (s == NULL) return;
  sl_cowmap_t *m = s->map; /* read before the flag: s may be freed after */
  atomic_fetch_add_explicit(&m->n_released, 1, memory_order_relaxed);
  /* release: the owner's gc must see that we are done reading s's nodes. */
  atomic_store_explicit(&s->is_released, true, memory_order_release);
  map_unref(m);
}

void sl__cowmap_gc(sl_cowmap_t *m) {
  uint32_t seen = atomic_load_explicit(&m->n_released, memory_order_relaxed);
  if (seen == 0 && m->n_retired == 0) return;
  /* Forget released snapshots; recompute L. */
  uint64_t max_live = 0;
  sl_cowmap_snap_t **link = &m->snaps;
  uint32_t collected = 0;
  while (*link) {
    sl_cowmap_snap_t *s = *link;
    /* acquire: pairs with the release store in sl__cowmap_snap_release. */
    if (atomic_load_explicit(&s->is_released, memory_order_acquire)) {
      *link = s->next;
      sl_free(s);
      collected++;
      continue;
    }
    if (s->version > max_live) max_live = s->version;
    link = &s->next;
  }
  atomic_fetch_sub_explicit(&m->n_released, collected, memory_order_relaxed);
  m->max_live = max_live;
  /* Free retired nodes that no live snapshot can see. */
  size_t keep = 0;
  for (size_t i = 0; i < m->n_retired; i++) {
    retired_t r = m->retired[i];
    bool is_visible = false;
    for (sl_cowmap_snap_t *s = m->snaps; s; s = s->next)
      if (r.created <= s->version && s->version < r.retired_at) {
        is_visible = true;
        break;
      }
    if (is_visible) m->retired[keep++] = r;
    else node_free_one(r.node);
  }
  m->n_retired = keep;
}

/* Iteration: depth-first over branches, then along each chain. */
static void iter_init(sl_cowmap_iter_t *it, const branch_t *root) {
  it->depth = 0;
  it->stack[0] = root;
  it->pos[0] = 0;
  it->chain = NULL;
}

void sl__cowmap_snap_iter(const sl_cowmap_snap_t *s, sl_cowmap_iter_t *it) {
  iter_init(it, s->root);
}

void sl__cowmap_iter(const sl_cowmap_t *m, sl_cowmap_iter_t *it) {
  iter_init(it, m->root);
}

const sl_cowmap_entry_t *sl__cowmap_next(sl_cowmap_iter_t *it) {
  if (it->chain) {
    const sl_cowmap_entry_t *e = it->chain;
    it->chain = e->next;
    return e;
  }
  while (it->depth >= 0) {
    const branch_t *b = it->stack[it->depth];
    uint32_t n = popcount32(b->bitmap);
    if (it->pos[it->depth] >= n) {
      it->depth--;
      continue;
    }
    uintptr_t c = b->child[it->pos[it->depth]++];
    if (is_entry(c)) {
      const sl_cowmap_entry_t *e = as_entry(c);
      it->chain = e->next;
      return e;
    }
    it->depth++;
    it->stack[it->depth] = as_branch(c);
    it->pos[it->depth] = 0;
  }
  return NULL;
}
