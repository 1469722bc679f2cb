/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key hash behind key groups (include/sluice/sl_keygroup.h, where the
 * group and range arithmetic is inline): sl_key_hash and its two steps,
 * sl__key_hash64 (also the hash of state tables) and sl__key_hash_fold.
 * See README.md and DESIGN.md section 4.
 */

/* Inline xxh3 from the Debian header: the key hash runs twice per record. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core.h"

/*
 * The key hash: xxh3-64 of the canonical bytes, folded to 32 bits and mixed
 * once more with murmur3's finalizer so that the low bits, which pick the
 * key group, depend on every input bit.  Fixed forever: changing it would
 * move keys between key groups and break every stored checkpoint.
 */
uint64_t sl__key_hash64(const void *key, size_t len) {
  return XXH3_64bits(key, len);
}

uint32_t sl__key_hash_fold(uint64_t h64) {
  uint32_t h = (uint32_t)(h64 ^ (h64 >> 32));
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

uint32_t sl_key_hash(const void *key, size_t len) {
  return sl__key_hash_fold(sl__key_hash64(key, len));
}
