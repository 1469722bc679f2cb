/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface of the state module: the heap keyed-state backend of one
 * operator subtask.  It owns a copy-on-write map per (state, key group) of
 * the subtask's key-group range, tracks the current key and namespace, and
 * implements the public sl_state.h calls.  See README.md.
 */
#ifndef SL_STATE_STATE_H
#define SL_STATE_STATE_H

#include "core/core.h"
#include "sluice/sl_state.h"
#include "state/cowmap.h"

typedef struct sl_kstate_s sl_kstate_t;

/**
 * @brief Create the backend of a subtask that owns key groups
 * [kg_start, kg_end] of max_parallelism.  @thread the task.
 */
int sl__kstate_create(uint32_t max_parallelism, uint32_t kg_start,
                      uint32_t kg_end, sl_kstate_t **out_be);
void sl__kstate_destroy(sl_kstate_t *be);

/**
 * @brief Declare a state.  Re-declaring a name returns the same state if
 * the kind matches, SL_EINVAL otherwise.
 */
int sl__kstate_register(sl_kstate_t *be, const sl_state_desc_t *desc,
                        sl_state_t **out_state, sl_error_t **out_err);

/**
 * @brief Set the current key (canonical bytes) with its 64-bit hash from
 * sl__key_hash64().  The key group must lie in the backend's range.
 * @return SL_OK, SL_EINVAL (key group outside the range), SL_ENOMEM.
 */
int sl__kstate_set_key(sl_kstate_t *be, const void *key, uint32_t len,
                       uint64_t hash64);
/** @brief Set the namespace (e.g. a window); empty by default. */
int sl__kstate_set_namespace(sl_kstate_t *be, const void *ns, uint32_t len);
sl_slice_t sl__kstate_current_key(const sl_kstate_t *be);
uint32_t sl__kstate_current_key_group(const sl_kstate_t *be);
uint32_t sl__kstate_n_states(const sl_kstate_t *be);
sl_state_t *sl__kstate_state(const sl_kstate_t *be, uint32_t i);
const sl_state_desc_t *sl__state_desc(const sl_state_t *st);

/** @brief Number of entries of a state over all key groups. */
size_t sl__state_size(const sl_state_t *st);

/**
 * @brief Call fn for every (key, namespace) of a state, with that key and
 * namespace made current.  fn must not write to this state's other keys.
 * @thread the task.
 */
typedef int (*sl_state_visit_cb)(void *user, sl_slice_t key, sl_slice_t ns);
int sl__state_for_each(sl_state_t *st, sl_state_visit_cb fn, void *user);

/*
 * Restore.  States found in a checkpoint are created before the operator
 * opens, with the kind, version and layout stored there; the operator's
 * declaration in open() must then match them (sl__state_check_compat).
 */
/**
 * @brief Create (or find) a restored state.  fingerprint: the one the
 * checkpoint stored, or NULL for files written before layouts were stored.
 * @return SL_OK, SL_ECORRUPT (unknown kind, a fingerprint that does not
 * match its layout, or two files of one checkpoint that disagree),
 * SL_ENOMEM.
 */
int sl__kstate_restore_state(sl_kstate_t *be, const sl_state_desc_t *desc,
                             const uint64_t *fingerprint,
                             sl_state_t **out_state, sl_error_t **out_err);
/**
 * @brief Insert a restored entry (composite key: key bytes then namespace)
 * of key group kg.  @return SL_OK, SL_ECORRUPT (the key does not belong to
 * kg, kg is outside the range, or a list or map value is malformed),
 * SL_ENOMEM.
 */
int sl__kstate_restore_entry(sl_state_t *st, uint32_t kg, const uint8_t *key,
                             uint32_t klen, uint32_t nslen, const uint8_t *val,
                             uint32_t vlen);
/**
 * @brief Before restoring key group kg of st: the number of entries about
 * to be restored into it (sl__kstate_restore_entry), so that its map is
 * sized once instead of growing while it fills.  Optional; the caller
 * bounds n by what it can still read (a corrupt count must not allocate).
 * @return SL_OK, SL_ECORRUPT (kg outside the range), SL_ENOMEM,
 * SL_EOVERFLOW.
 */
int sl__kstate_restore_reserve(sl_state_t *st, uint32_t kg, uint64_t n);
/** @brief A restored state the operator did not declare, or NULL. */
const char *sl__kstate_undeclared(const sl_kstate_t *be);

/*
 * Compatibility (state_compat.c).  A state's schema is (kind, version,
 * layout); its fingerprint is a 64-bit hash of the three.
 */
/* The longest layout a state file stores (docs/checkpoint-format.md). */
#define SL_STATE_LAYOUT_MAX 65536u
/** @brief Fingerprint of desc's kind, version (0 counts as 1) and layout. */
uint64_t sl__state_fingerprint(const sl_state_desc_t *desc);
/**
 * @brief Check a declaration against a restored state's schema.  has_fp
 * false: the checkpoint predates layouts; only kind and version are
 * compared (and a warning says so).  @return SL_OK, or SL_EINVAL with a
 * fatal *out_err naming the state and both layouts.  @thread the task.
 */
int sl__state_check_compat(const sl_state_desc_t *stored, uint64_t stored_fp,
                           bool has_fp, const sl_state_desc_t *declared,
                           sl_error_t **out_err);
/** @brief Append "name:type, ..." of schema (nullable types end in '?'). */
void sl__state_layout_schema(sl_acc_t *b, const sl_schema_t *schema);
/**
 * @brief End a layout built in b: the NUL-terminated string, owned by the
 * caller, or NULL (b closed) when an append failed.
 */
char *sl__state_layout_finish(sl_acc_t *b);

/*
 * Snapshots: pin every map of every state in O(states * key groups),
 * independent of the amount of state.  The pinned maps can then be read
 * from another thread.
 */
typedef struct sl_kstate_snap_s sl_kstate_snap_t;
int sl__kstate_snapshot(sl_kstate_t *be, sl_kstate_snap_t **out_snap);
/** @brief Maps of the snapshot: state i, key group kg (absolute). */
const sl_cowmap_snap_t *sl__kstate_snap_map(const sl_kstate_snap_t *s,
                                            uint32_t state, uint32_t kg);
uint32_t sl__kstate_snap_n_states(const sl_kstate_snap_t *s);
const sl_state_desc_t *sl__kstate_snap_desc(const sl_kstate_snap_t *s,
                                            uint32_t state);
/** @brief Release.  @thread any. */
void sl__kstate_snap_release(sl_kstate_snap_t *s);
/** @brief Collect memory of released snapshots.  @thread the task. */
void sl__kstate_gc(sl_kstate_t *be);

#endif
