/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key groups: the unit in which keyed state is partitioned, stored and
 * rescaled (DESIGN.md section 4).  A key's group is a function of its
 * canonical key bytes (sl_row.h, sl_key_add_*) only, fixed forever; a
 * subtask owns a contiguous range of groups.  Included by sl_row.h.  The
 * key hash is implemented in src/core/keygroup.c; see src/core/README.md.
 */
#ifndef SLUICE_SL_KEYGROUP_H
#define SLUICE_SL_KEYGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "sl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Key groups (DESIGN.md section 4).  A key's group is its 32-bit hash modulo
 * max_parallelism; subtask i of p owns the contiguous range
 * [ceil(i*m/p), ceil((i+1)*m/p) - 1].
 */
/** @brief 32-bit hash of canonical key bytes (xxh3, murmur3 finalizer). */
SL_API uint32_t sl_key_hash(const void *key, size_t len);
static inline uint32_t sl_key_group_of_hash(uint32_t hash,
                                            uint32_t max_parallelism) {
  /* A power of two (the default 128) needs no division. */
  if ((max_parallelism & (max_parallelism - 1)) == 0)
    return hash & (max_parallelism - 1);
  return hash % max_parallelism;
}
static inline uint32_t sl_key_group(const void *key, size_t len,
                                    uint32_t max_parallelism) {
  return sl_key_group_of_hash(sl_key_hash(key, len), max_parallelism);
}
/** @brief Subtask that owns key group kg: floor(kg * p / m). */
static inline uint32_t sl_key_group_owner(uint32_t kg, uint32_t max_parallelism,
                                          uint32_t parallelism) {
  uint64_t x = (uint64_t)kg * parallelism;
  if ((max_parallelism & (max_parallelism - 1)) == 0)
    return (uint32_t)(x >> __builtin_ctz(max_parallelism));
  return (uint32_t)(x / max_parallelism);
}
/** @brief First key group owned by subtask i: ceil(i*m/p). */
static inline uint32_t sl_key_group_range_start(uint32_t i, uint32_t m,
                                                uint32_t p) {
  return (uint32_t)(((uint64_t)i * m + p - 1) / p);
}
/** @brief Last key group owned by subtask i: ceil((i+1)*m/p) - 1. */
static inline uint32_t sl_key_group_range_end(uint32_t i, uint32_t m,
                                              uint32_t p) {
  return sl_key_group_range_start(i + 1, m, p) - 1;
}

#ifdef __cplusplus
}
#endif
#endif
