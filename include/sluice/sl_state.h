/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Keyed state for process functions.  A state is declared by name in the
 * open() callback; its values are addressed by the current key (the key of
 * the row or timer being processed).  Values are bytes; the helpers for
 * int64 and double store 8 little-endian bytes.  See src/state/README.md.
 *
 * Borrowed values (sl_slice_t results) stay valid until the next write to
 * the same state or the end of the callback, whichever comes first.
 */
#ifndef SLUICE_SL_STATE_H
#define SLUICE_SL_STATE_H

#include "sl_common.h"
#include "sl_job.h"
#include "sl_row.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_state_kind_e {
  SL_STATE_VALUE = 1,
  SL_STATE_LIST = 2,
  SL_STATE_MAP = 3,
  SL_STATE_REDUCING = 4
} sl_state_kind_t;

/** Combine two values into out (reducing state).  Must be associative. */
typedef int (*sl_reduce_fn)(void *user, sl_slice_t a, sl_slice_t b,
                            sl_bytes_t *out);

/*
 * A state's identity on restore is (operator uid, state name), and its
 * compatibility is its schema: kind, version and layout.  A checkpoint
 * stores all three with a 64-bit fingerprint of them; a restore compares
 * the checkpoint's with the declaration before any value is read, and a
 * difference is an error that names the operator, the state and both
 * layouts (sluice does not migrate state yet).  Raise `version` or change
 * `layout` whenever the bytes you store change meaning.
 */
typedef struct sl_state_desc_s {
  const char *name;      /* unique within the operator */
  sl_state_kind_t kind;
  uint32_t version;      /* serializer version of the values (default 1) */
  sl_reduce_fn reduce;   /* reducing state only */
  void *reduce_user;
  /* Optional: a human-readable description of the value bytes, such as
   * "count:int64, total:float64"; NULL means none (only kind and version
   * are then compared).  Copied by sl_ctx_state. */
  const char *layout;
} sl_state_desc_t;

/**
 * @brief Declare (or look up) a keyed state.  Call from open().
 * @return SL_OK, SL_ESTATE (operator is not keyed, or not in open()),
 * SL_EINVAL (same name declared with another kind or layout, or restored
 * from a checkpoint whose kind, version or layout differs: the operator
 * fails with a fatal error, which no restart retries), SL_ENOMEM.
 * @ownership *out_state is owned by the operator.
 */
SL_API int sl_ctx_state(sl_ctx_t *ctx, const sl_state_desc_t *desc,
                        sl_state_t **out_state);

/** @brief Remove the current key's value of any kind of state. */
SL_API int sl_state_clear(sl_state_t *st);

/* Value state.  sl_value_get returns SL_ENOTFOUND when there is none. */
SL_API int sl_value_get(sl_state_t *st, sl_slice_t *out_value);
SL_API int sl_value_put(sl_state_t *st, const void *p, size_t len);
SL_API int sl_value_get_i64(sl_state_t *st, int64_t *out_value);
SL_API int sl_value_put_i64(sl_state_t *st, int64_t v);

/* List state: appended values in order. */
typedef struct sl_list_iter_s {
  const uint8_t *p;
  const uint8_t *end;
} sl_list_iter_t;
SL_API int sl_list_add(sl_state_t *st, const void *p, size_t len);
/** @brief Iterate the current key's list (empty list: SL_OK, no items). */
SL_API int sl_list_iter(sl_state_t *st, sl_list_iter_t *out_it);
SL_API bool sl_list_next(sl_list_iter_t *it, sl_slice_t *out_item);

/* Map state: user keys to values, per current key. */
typedef struct sl_map_iter_s {
  const uint8_t *p;
  const uint8_t *end;
} sl_map_iter_t;
SL_API int sl_map_get(sl_state_t *st, const void *k, size_t klen,
                      sl_slice_t *out_value);
SL_API int sl_map_put(sl_state_t *st, const void *k, size_t klen, const void *v,
                      size_t vlen);
/** @brief Remove one entry; SL_ENOTFOUND if absent. */
SL_API int sl_map_remove(sl_state_t *st, const void *k, size_t klen);
SL_API int sl_map_iter(sl_state_t *st, sl_map_iter_t *out_it);
SL_API bool sl_map_next(sl_map_iter_t *it, sl_slice_t *out_key,
                        sl_slice_t *out_value);

/* Reducing state: add() folds the value in with desc->reduce. */
SL_API int sl_reducing_add(sl_state_t *st, const void *p, size_t len);
SL_API int sl_reducing_get(sl_state_t *st, sl_slice_t *out_value);

#ifdef __cplusplus
}
#endif
#endif
