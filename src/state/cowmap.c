/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Versioned copy-on-write hash table.  One map holds the entries of one
 * (state, key group); the heap backend snapshots every map of a subtask in
 * its sync phase.  See README.md.
 *
 * DESIGN NOTES
 *
 * Shape.  A flat open-addressing table of 2^b slots, each {64-bit hash,
 * entry pointer}, probed linearly from a home slot, the top b bits of the
 * hash times a multiplier of the size (home_of()).  The slots
 * are cut into segments of at most SEG_SLOTS; a directory holds the segment
 * pointers.  A lookup reads the directory (small, hot), one slot line and
 * the entry: one cache miss for the slot and one for the entry.  The full
 * hash in the slot means an entry is only read when its hash matches.  A
 * removed key leaves a tombstone; the table is rebuilt (doubled when the
 * live entries need it) when entries plus tombstones pass 3/4 of the slots.
 *
 * Versions.  The map has a current version V (starts at 1).  Every node
 * (directory, segment or entry) records the version that created it.  A
 * snapshot pins the directory and takes the version s = V, then V becomes
 * s + 1.  A node created at version c is part of snapshot s exactly when
 * c <= s and it was still in the table when s was taken.
 *
 *     node state        may be written in place?    freed when
 *     ----------        ------------------------    ----------
 *     LIVE, c > L       yes                         it leaves the table
 *     LIVE, c <= L      no: copy, then RETIRE old   -
 *     RETIRED(c, r)     never                       no live s with c <= s < r
 *
 * where L is the largest version of a live snapshot (0 if none) and r is V
 * at the moment the node left the table.  A write to a slot first makes the
 * directory writable (copied once after a snapshot), then the segment
 * (copied on the first write to it after a snapshot), then, for an update,
 * the entry.  A rebuild makes a new directory and new segments that point
 * to the same entries; the old directory and segments leave the table.
 *
 * Transitions: dir_writable()/seg_writable()/entry_copy() retire shared
 * nodes; retire_or_free() moves a node that left the table to RETIRED or
 * frees it; gc() frees RETIRED nodes and forgets released snapshots.
 *
 * Invariants:
 *  C1. A node reachable from a live snapshot is never modified or freed.
 *  C2. Every node is freed exactly once: as LIVE at destroy, when it leaves
 *      the table while no snapshot shares it, or from the retired list.
 *  C3. Freeing a retired directory never frees its segments, and freeing a
 *      retired segment never frees its entries; they are LIVE or RETIRED in
 *      their own right.
 *  C4. Snapshot is O(1): it stores the directory pointer and bumps V.
 *
 * Why a node reachable from a snapshot s has c <= s: a node is created at
 * the then current V, and s >= V when s is taken.  A segment or directory is
 * written in place only while c > L, so it cannot gain a pointer to a newer
 * node after a live snapshot saw it.
 *
 * Threads: the owner thread does every write, snapshot and gc.  Another
 * thread may iterate a snapshot and release it; releasing only stores an
 * atomic flag and drops a reference, so the owner frees memory later.
 * There is no shared mutable global: different maps may be built on
 * different threads at once.
 */
#include <stdatomic.h>

#include "state/cowmap.h"

#define SEG_LOG2 7 /* 128 slots of 16 bytes: 2 KiB copied per segment */
#define MIN_LOG2 3
#define MAX_LOG2 40

typedef struct slot_s {
  uint64_t hash;
  sl_cowmap_entry_t *e; /* NULL: empty; TOMB: removed */
} slot_t;

#define TOMB ((sl_cowmap_entry_t *)(uintptr_t)1)
static inline bool is_live(const sl_cowmap_entry_t *e) {
  return (uintptr_t)e > (uintptr_t)1;
}

typedef struct seg_s {
  uint64_t version;
  slot_t slot[];
} seg_t;

typedef struct dir_s {
  uint64_t version;
  uint64_t mul;      /* home_of(): mul_for(log2) */
  uint32_t log2;     /* 2^log2 slots */
  uint32_t seg_log2; /* 2^seg_log2 slots per segment */
  size_t n_seg;
  seg_t *seg[];
} dir_t;

enum { NODE_ENTRY, NODE_SEG, NODE_DIR };

typedef struct retired_s {
  void *node;
  uint32_t kind;
  uint64_t created;
  uint64_t retired_at;
} retired_t;

struct sl_cowmap_snap_s {
  sl_cowmap_t *map;
  dir_t *dir;
  uint64_t version;
  size_t size;
  _Atomic bool is_released; /* set by the releasing thread */
  struct sl_cowmap_snap_s *next; /* owner only */
};

struct sl_cowmap_s {
  /* Owner-thread fields. */
  dir_t *dir;
  uint64_t version;     /* V */
  uint64_t max_live;    /* L, possibly stale-high until gc */
  size_t size;
  size_t n_tombs;
  uint64_t n_copies;
  uint64_t n_insert_probes; /* slots passed by inserts (statistics) */
  uint64_t epoch;       /* bumped whenever an entry leaves the table */
  retired_t *retired;
  size_t n_retired, cap_retired;
  sl_cowmap_snap_t *snaps; /* live or released-not-yet-collected */
  /* Shared fields. */
  _Atomic uint32_t refs;          /* owner + each unreleased snapshot */
  _Atomic uint32_t n_released;    /* releases not yet collected */
};

static inline size_t dir_cap(const dir_t *d) { return (size_t)1 << d->log2; }
static inline size_t seg_slots(const dir_t *d) {
  return (size_t)1 << d->seg_log2;
}
/*
 * The home slot: the top bits of hash times an odd multiplier that depends
 * on the table size.  A map is often filled in another map's iteration
 * (slot) order: a restore inserts entries in the order the checkpoint wrote
 * them.  Were homes the plain top bits, that order would be sorted by home,
 * and while the new table is still smaller its first entries would all
 * have homes near slot 0: one cluster, quadratic inserts.  Were they the
 * low bits, a smaller table would see the order wrap around and pile a
 * second pass on its first half.  With a multiplier per size, another
 * size's order is unrelated to this one's homes; the same size's order is
 * sorted by home, which linear probing fills in linear time.
 */
static inline uint64_t mul_for(uint32_t log2) {
  uint64_t z = 0x9e3779b97f4a7c15ull * (log2 + 1u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) | 1u;
}
static inline size_t home_of(const dir_t *d, uint64_t hash) {
  return (size_t)((hash * d->mul) >> (64 - d->log2));
}
static inline slot_t *slot_at(const dir_t *d, size_t p) {
  return &d->seg[p >> d->seg_log2]->slot[p & (seg_slots(d) - 1)];
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

static void node_free(void *node, uint32_t kind) {
  if (kind == NODE_ENTRY) entry_free(node);
  else sl_free(node);
}

static seg_t *seg_new(uint64_t version, size_t n_slots) {
  seg_t *s = sl_calloc(1, sizeof(*s) + n_slots * sizeof(slot_t));
  if (s != NULL) s->version = version;
  return s;
}

/* A directory of 2^log2 slots with empty segments; NULL when out of
 * memory (nothing allocated is left). */
static dir_t *dir_new(uint64_t version, uint32_t log2) {
  uint32_t seg_log2 = log2 < SEG_LOG2 ? log2 : SEG_LOG2;
  size_t n_seg = (size_t)1 << (log2 - seg_log2);
  dir_t *d = sl_malloc(sizeof(*d) + n_seg * sizeof(seg_t *));
  if (d == NULL) return NULL;
  d->version = version;
  d->log2 = log2;
  d->mul = mul_for(log2);
  d->seg_log2 = seg_log2;
  d->n_seg = n_seg;
  for (size_t i = 0; i < n_seg; i++) {
    d->seg[i] = seg_new(version, (size_t)1 << seg_log2);
    if (d->seg[i] == NULL) {
      for (size_t k = 0; k < i; k++) sl_free(d->seg[k]);
      sl_free(d);
      return NULL;
    }
  }
  return d;
}

static bool is_shared(const sl_cowmap_t *m, uint64_t created) {
  return created <= m->max_live;
}

/*
 * Make room for k retirements, so that a write, once it starts changing the
 * table, cannot fail half way.
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

/* A node left the table: free it, or keep it for the snapshots that see
 * it.  The caller reserved room with retired_reserve(). */
static void retire_or_free(sl_cowmap_t *m, void *node, uint32_t kind,
                           uint64_t created) {
  if (kind == NODE_ENTRY) m->epoch++;
  if (!is_shared(m, created)) {
    node_free(node, kind);
    return;
  }
  if (SL_NEVER(m->n_retired == m->cap_retired))
    sl_panic("cowmap: retirement without reservation");
  m->retired[m->n_retired++] = (retired_t){node, kind, created, m->version};
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
  e->nslen = o->nslen;
  e->vlen = o->vlen;
  memcpy(e->key, o->key, o->klen);
  if (o->vlen) memcpy(e->val, o->val, o->vlen);
  return e;
}

int sl__cowmap_create(sl_cowmap_t **out) {
  sl_cowmap_t *m = sl_calloc(1, sizeof(*m));
  if (m == NULL) return SL_ENOMEM;
  m->version = 1;
  m->dir = dir_new(1, MIN_LOG2);
  if (m->dir == NULL) {
    sl_free(m);
    return SL_ENOMEM;
  }
  atomic_init(&m->refs, 1);
  atomic_init(&m->n_released, 0);
  *out = m;
  return SL_OK;
}

static void map_free(sl_cowmap_t *m) {
  dir_t *d = m->dir;
  for (size_t i = 0; i < d->n_seg; i++) {
    seg_t *s = d->seg[i];
    for (size_t k = 0; k < seg_slots(d); k++)
      if (is_live(s->slot[k].e)) entry_free(s->slot[k].e);
    sl_free(s);
  }
  sl_free(d);
  for (size_t i = 0; i < m->n_retired; i++)
    node_free(m->retired[i].node, m->retired[i].kind);
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
size_t sl__cowmap_capacity(const sl_cowmap_t *m) { return dir_cap(m->dir); }
uint64_t sl__cowmap_insert_probes(const sl_cowmap_t *m) {
  return m->n_insert_probes;
}

static inline uint64_t load64(const void *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/*
 * Key comparison once the hashes agree.  Keys of 8 to 16 bytes (an int64
 * key is 9: a tag byte and 8 big-endian bytes) compare with two possibly
 * overlapping 8-byte loads instead of a call to memcmp.
 */
static inline bool key_eq(const sl_cowmap_entry_t *e, const void *key,
                          uint32_t klen) {
  if (e->klen != klen) return false;
  if (klen >= 8 && klen <= 16) {
    const uint8_t *a = e->key, *b = key;
    return ((load64(a) ^ load64(b)) |
            (load64(a + klen - 8) ^ load64(b + klen - 8))) == 0;
  }
  return memcmp(e->key, key, klen) == 0;
}

/* The slot holding the key, or the index of the empty slot that ends its
 * probe sequence (found false). */
static inline size_t probe(const dir_t *d, uint64_t hash, const void *key,
                           uint32_t klen, bool *out_found) {
  size_t mask = dir_cap(d) - 1;
  for (size_t p = home_of(d, hash);; p = (p + 1) & mask) {
    const slot_t *s = slot_at(d, p);
    if (s->e == NULL) {
      *out_found = false;
      return p;
    }
    if (s->hash == hash && s->e != TOMB && key_eq(s->e, key, klen)) {
      *out_found = true;
      return p;
    }
  }
}

const sl_cowmap_entry_t *sl__cowmap_get(const sl_cowmap_t *m, uint64_t hash,
                                        const void *key, uint32_t klen) {
  const dir_t *d = m->dir;
  size_t mask = dir_cap(d) - 1;
  for (size_t p = home_of(d, hash);; p = (p + 1) & mask) {
    const slot_t *s = slot_at(d, p);
    if (s->e == NULL) return NULL;
    if (s->hash == hash && s->e != TOMB && key_eq(s->e, key, klen))
      return s->e;
  }
}

/* Make the directory writable, copying it if a snapshot shares it.  The
 * caller reserved one retirement. */
static dir_t *dir_writable(sl_cowmap_t *m) {
  dir_t *d = m->dir;
  if (!is_shared(m, d->version)) return d;
  size_t sz = sizeof(*d) + d->n_seg * sizeof(seg_t *);
  dir_t *c = sl_malloc(sz);
  if (c == NULL) return NULL;
  memcpy(c, d, sz);
  c->version = m->version;
  retire_or_free(m, d, NODE_DIR, d->version);
  m->n_copies++;
  m->dir = c;
  return c;
}

/* Make the slot at p writable: the directory and then its segment.  The
 * caller reserved two retirements. */
static slot_t *slot_writable(sl_cowmap_t *m, size_t p) {
  dir_t *d = dir_writable(m);
  if (d == NULL) return NULL;
  size_t si = p >> d->seg_log2;
  seg_t *s = d->seg[si];
  if (is_shared(m, s->version)) {
    size_t sz = sizeof(*s) + seg_slots(d) * sizeof(slot_t);
    seg_t *c = sl_malloc(sz);
    if (c == NULL) return NULL;
    memcpy(c, s, sz);
    c->version = m->version;
    retire_or_free(m, s, NODE_SEG, s->version);
    m->n_copies++;
    d->seg[si] = s = c;
  }
  return &s->slot[p & (seg_slots(d) - 1)];
}

/*
 * Rebuild the table with 2^log2 slots: a new directory and new segments
 * pointing to the same entries (so entry pointers and the epoch stay
 * valid).  The old directory and segments leave the table.
 */
static int rebuild(sl_cowmap_t *m, uint32_t log2) {
  dir_t *o = m->dir;
  if (retired_reserve(m, o->n_seg + 1) != SL_OK) return SL_ENOMEM;
  dir_t *d = dir_new(m->version, log2);
  if (d == NULL) return SL_ENOMEM;
  size_t mask = dir_cap(d) - 1;
  for (size_t i = 0; i < o->n_seg; i++) {
    seg_t *s = o->seg[i];
    for (size_t k = 0; k < seg_slots(o); k++) {
      slot_t v = s->slot[k];
      if (!is_live(v.e)) continue;
      size_t p = home_of(d, v.hash);
      while (slot_at(d, p)->e != NULL) p = (p + 1) & mask;
      *slot_at(d, p) = v;
    }
    retire_or_free(m, s, NODE_SEG, s->version);
  }
  retire_or_free(m, o, NODE_DIR, o->version);
  m->dir = d;
  m->n_tombs = 0;
  return SL_OK;
}

/* The smallest table that holds n entries below 3/4 load. */
static uint32_t log2_for(size_t n) {
  uint32_t b = MIN_LOG2;
  while (b < MAX_LOG2 && ((size_t)3 << b) < (n + 1) * 4) b++;
  return b;
}

int sl__cowmap_reserve(sl_cowmap_t *m, size_t n) {
  if (n < m->size) n = m->size;
  if (n > ((size_t)3 << (MAX_LOG2 - 2))) return SL_EOVERFLOW;
  uint32_t b = log2_for(n);
  if (b <= m->dir->log2) return SL_OK;
  return rebuild(m, b);
}

int sl__cowmap_upsert(sl_cowmap_t *m, uint64_t hash, const void *key,
                      uint32_t klen, uint32_t nslen, uint32_t val_hint,
                      sl_cowmap_entry_t **out_entry, bool *out_created) {
  if (m->max_live &&
      atomic_load_explicit(&m->n_released, memory_order_relaxed))
    sl__cowmap_gc(m);
  bool found;
  size_t p = probe(m->dir, hash, key, klen, &found);
  if (found) {
    sl_cowmap_entry_t *e = slot_at(m->dir, p)->e;
    if (!is_shared(m, e->version)) {
      *out_entry = e;
      *out_created = false;
      return SL_OK;
    }
    if (retired_reserve(m, 3) != SL_OK) return SL_ENOMEM;
    sl_cowmap_entry_t *c = entry_copy(m, e);
    if (c == NULL) return SL_ENOMEM;
    slot_t *s = slot_writable(m, p);
    if (s == NULL) {
      entry_free(c);
      return SL_ENOMEM;
    }
    s->e = c;
    m->n_copies++;
    retire_or_free(m, e, NODE_ENTRY, e->version);
    *out_entry = c;
    *out_created = false;
    return SL_OK;
  }
  if ((m->size + m->n_tombs + 1) * 4 > dir_cap(m->dir) * 3) {
    if (m->size + 1 > ((size_t)3 << (MAX_LOG2 - 2))) return SL_ENOMEM;
    int rc = rebuild(m, log2_for(m->size + 1 + (m->size + 1) / 2));
    if (rc != SL_OK) return rc;
    p = probe(m->dir, hash, key, klen, &found);
  } else {
    /* Reuse the first tombstone of the probe sequence, if any. */
    const dir_t *d = m->dir;
    size_t mask = dir_cap(d) - 1;
    for (size_t q = home_of(d, hash); q != p; q = (q + 1) & mask)
      if (slot_at(d, q)->e == TOMB) {
        p = q;
        break;
      }
  }
  if (retired_reserve(m, 2) != SL_OK) return SL_ENOMEM;
  sl_cowmap_entry_t *e = entry_new(m, hash, key, klen, nslen, val_hint);
  if (e == NULL) return SL_ENOMEM;
  slot_t *s = slot_writable(m, p);
  if (s == NULL) {
    entry_free(e);
    return SL_ENOMEM;
  }
  if (s->e == TOMB) m->n_tombs--;
  m->n_insert_probes += (p - home_of(m->dir, hash)) & (dir_cap(m->dir) - 1);
  s->hash = hash;
  s->e = e;
  m->size++;
  *out_entry = e;
  *out_created = true;
  return SL_OK;
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
  bool found;
  size_t p = probe(m->dir, hash, key, klen, &found);
  if (!found) return SL_ENOTFOUND;
  if (retired_reserve(m, 3) != SL_OK) return SL_ENOMEM;
  /* The next slot empty: no probe sequence passes this one, so it can be
   * emptied instead of becoming a tombstone. */
  bool is_end = slot_at(m->dir, (p + 1) & (dir_cap(m->dir) - 1))->e == NULL;
  slot_t *s = slot_writable(m, p);
  if (s == NULL) return SL_ENOMEM;
  sl_cowmap_entry_t *victim = s->e;
  if (is_end) {
    s->e = NULL;
  } else {
    s->e = TOMB;
    m->n_tombs++;
  }
  m->size--;
  retire_or_free(m, victim, NODE_ENTRY, victim->version);
  return SL_OK;
}

int sl__cowmap_snapshot(sl_cowmap_t *m, sl_cowmap_snap_t **out) {
  sl_cowmap_snap_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  s->map = m;
  s->dir = m->dir;
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
    else node_free(r.node, r.kind);
  }
  m->n_retired = keep;
}

/* Iteration: the slots of one directory in order. */
void sl__cowmap_snap_iter(const sl_cowmap_snap_t *s, sl_cowmap_iter_t *it) {
  it->dir = s->dir;
  it->pos = 0;
}

void sl__cowmap_iter(const sl_cowmap_t *m, sl_cowmap_iter_t *it) {
  it->dir = m->dir;
  it->pos = 0;
}

const sl_cowmap_entry_t *sl__cowmap_next(sl_cowmap_iter_t *it) {
  const dir_t *d = it->dir;
  size_t cap = dir_cap(d);
  while (it->pos < cap) {
    const sl_cowmap_entry_t *e = slot_at(d, (size_t)it->pos++)->e;
    if (is_live(e)) return e;
  }
  return NULL;
}
