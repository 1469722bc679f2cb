/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Versioned copy-on-write hash map (a flat open-addressing table split into
 * segments) that backs the heap state backend: one map per (state, key
 * group).  A snapshot pins the current version in O(1); writes after it
 * copy only the segments and entries they touch, so a background thread can
 * iterate the pinned version while the owning task goes on writing.  See
 * README.md for the design notes.
 */
#ifndef SL_STATE_COWMAP_H
#define SL_STATE_COWMAP_H

#include <stdatomic.h>

#include "core/core.h"

/*
 * An entry.  Fields are read-only outside cowmap.c except through
 * sl__cowmap_entry_set_value()/_reserve_value(), which require an entry
 * returned by sl__cowmap_upsert() or one for which sl__cowmap_is_writable()
 * holds.
 */
typedef struct sl_cowmap_entry_s {
  uint64_t hash;
  uint64_t version; /* map version that created this entry */
  uint8_t *val;     /* inline after the key, or a separate allocation */
  uint32_t klen;    /* composite key: key bytes then namespace bytes */
  uint32_t nslen;   /* trailing namespace bytes inside key */
  uint32_t vlen;
  uint32_t vcap;
  uint8_t key[];
} sl_cowmap_entry_t;

typedef struct sl_cowmap_s sl_cowmap_t;
typedef struct sl_cowmap_snap_s sl_cowmap_snap_t;

/** @thread owner.  @return SL_OK or SL_ENOMEM. */
int sl__cowmap_create(sl_cowmap_t **out_map);
/**
 * @brief Drop the owner's reference.  Memory is freed when every snapshot
 * has been released too.  @thread owner.
 */
void sl__cowmap_destroy(sl_cowmap_t *m);

/** @brief Look up a composite key.  Borrowed until the next write. */
const sl_cowmap_entry_t *sl__cowmap_get(const sl_cowmap_t *m, uint64_t hash,
                                        const void *key, uint32_t klen);
/**
 * @brief Find or create the entry for a key and make it writable (copying
 * it, its segment and the directory when a snapshot shares them).  A new
 * entry has vlen 0.
 * @return SL_OK or SL_ENOMEM.  @thread owner.
 */
int sl__cowmap_upsert(sl_cowmap_t *m, uint64_t hash, const void *key,
                      uint32_t klen, uint32_t nslen, uint32_t val_hint,
                      sl_cowmap_entry_t **out_entry, bool *out_created);
/**
 * @brief Whether an entry of this map may be written in place (no live
 * snapshot shares it).  Lets a caller that just looked an entry up update
 * it without a second lookup.
 */
bool sl__cowmap_is_writable(const sl_cowmap_t *m, const sl_cowmap_entry_t *e);
/**
 * @brief A counter that changes whenever an entry leaves the table (removed
 * or replaced by a copy; growing the table moves no entry).  An entry pointer read while it had one value is
 * still valid while it has the same value.
 */
uint64_t sl__cowmap_epoch(const sl_cowmap_t *m);
/** @brief Replace the value of a writable entry. */
int sl__cowmap_entry_set_value(sl_cowmap_entry_t *e, const void *p,
                               uint32_t len);
/** @brief Make room for len more value bytes in a writable entry. */
int sl__cowmap_entry_reserve_value(sl_cowmap_entry_t *e, uint32_t more);
/** @brief Remove a key.  @return SL_OK, SL_ENOTFOUND, SL_ENOMEM. */
int sl__cowmap_remove(sl_cowmap_t *m, uint64_t hash, const void *key,
                      uint32_t klen);
size_t sl__cowmap_size(const sl_cowmap_t *m);
/**
 * @brief Pre-size the table for n entries in all, so that inserting up to
 * n entries never grows it (a restore that knows its entry count builds
 * each map in one pass).  Never shrinks.  @return SL_OK, SL_ENOMEM,
 * SL_EOVERFLOW.  @thread owner.
 */
int sl__cowmap_reserve(sl_cowmap_t *m, size_t n);


/**
 * @brief Pin the current version.  O(1) in the map size.
 * @thread owner.  @ownership release with sl__cowmap_snap_release().
 */
int sl__cowmap_snapshot(sl_cowmap_t *m, sl_cowmap_snap_t **out_snap);
/** @brief Number of entries in the pinned version. */
size_t sl__cowmap_snap_size(const sl_cowmap_snap_t *s);
/** @brief Release a snapshot.  @thread any, once. */
void sl__cowmap_snap_release(sl_cowmap_snap_t *s);
/**
 * @brief Free nodes that no live snapshot can reach any more.  Called by
 * the owner; cheap when nothing was released.  @thread owner.
 */
void sl__cowmap_gc(sl_cowmap_t *m);

/* Iteration over a pinned version (any thread holding the snapshot) or the
 * current version (owner, no writes during iteration). */
typedef struct sl_cowmap_iter_s {
  const void *dir; /* the table iterated */
  uint64_t pos;    /* next slot */
} sl_cowmap_iter_t;

void sl__cowmap_snap_iter(const sl_cowmap_snap_t *s, sl_cowmap_iter_t *it);
void sl__cowmap_iter(const sl_cowmap_t *m, sl_cowmap_iter_t *it);
const sl_cowmap_entry_t *sl__cowmap_next(sl_cowmap_iter_t *it);

/*
 * Statistics for tests: nodes (directories, segments, entries) copied on
 * write since creation; nodes awaiting gc; slots of the current table;
 * slots that inserts probed past their home slot.  One
 * write copies at most SL_COWMAP_MAX_WRITE_COPIES nodes (the directory,
 * one segment, the entry).
 */
#define SL_COWMAP_MAX_WRITE_COPIES 3
uint64_t sl__cowmap_copies(const sl_cowmap_t *m);
size_t sl__cowmap_retired(const sl_cowmap_t *m);
size_t sl__cowmap_capacity(const sl_cowmap_t *m);
uint64_t sl__cowmap_insert_probes(const sl_cowmap_t *m);

#endif
