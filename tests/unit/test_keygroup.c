/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the key-group formulas of sl_keygroup.h (DESIGN.md section 4): the
 * ranges of many (max parallelism, parallelism) pairs tile [0, m) with
 * contiguous, non-empty ranges; sl_key_group_owner agrees with them; the
 * rescale case of the issue (m = 12, parallelism 3 -> 4); and the key hash,
 * which is checked against its documented composition written out here
 * (xxh3-64 from libxxhash, the 64 -> 32 bit fold, murmur3's fmix32), plus
 * a chi-square check of the key-group distribution of sequential keys.
 */
#include <xxhash.h>

#include "core/core.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Ranges. */

/* Subtask ranges of (m, p) tile [0, m) exactly once, in order. */
static void check_tiling(uint32_t m, uint32_t p) {
  uint32_t next = 0;
  for (uint32_t i = 0; i < p; i++) {
    uint32_t start = sl_key_group_range_start(i, m, p);
    uint32_t end = sl_key_group_range_end(i, m, p);
    if (start != next)
      SL_TEST_FAIL("m=%u p=%u: subtask %u starts at %u, expected %u", m, p,
                   i, start, next);
    if (end < start || end >= m)
      SL_TEST_FAIL("m=%u p=%u: subtask %u has range [%u, %u]", m, p, i,
                   start, end);
    /* Sizes differ by at most one: floor(m/p) or ceil(m/p). */
    uint32_t size = end - start + 1;
    if (size != m / p && size != (m + p - 1) / p)
      SL_TEST_FAIL("m=%u p=%u: subtask %u owns %u key groups", m, p, i, size);
    /* The documented formula, computed here in 64 bits. */
    uint64_t want_start = ((uint64_t)i * m + p - 1) / p;
    uint64_t want_next = ((uint64_t)(i + 1) * m + p - 1) / p;
    SL_ASSERT_EQ_INT(start, want_start);
    SL_ASSERT_EQ_INT(end, want_next - 1);
    next = end + 1;
  }
  if (next != m)
    SL_TEST_FAIL("m=%u p=%u: ranges end at %u", m, p, next);
}

/* Every key group's owner is the subtask whose range holds it. */
static void check_owner(uint32_t m, uint32_t p) {
  uint32_t i = 0;
  for (uint32_t kg = 0; kg < m; kg++) {
    while (kg > sl_key_group_range_end(i, m, p)) i++;
    uint32_t owner = sl_key_group_owner(kg, m, p);
    if (owner != i)
      SL_TEST_FAIL("m=%u p=%u: key group %u owned by %u, range says %u", m,
                   p, kg, owner, i);
    SL_ASSERT_TRUE(kg >= sl_key_group_range_start(owner, m, p));
  }
  SL_ASSERT_EQ_INT(i, p - 1);
}

SL_TEST(keygroup_ranges_tile) {
  /* Every pair with m <= 300. */
  for (uint32_t m = 1; m <= 300; m++) {
    for (uint32_t p = 1; p <= m; p++) {
      check_tiling(m, p);
      check_owner(m, p);
    }
  }
  /* Large max parallelism, up to the limit, where i * m needs 64 bits in
   * the formula only for much larger values; check it anyway. */
  static const uint32_t ms[] = {1000, 4096, 10007, SL_MAX_PARALLELISM_LIMIT};
  static const uint32_t ps[] = {1, 2, 3, 7, 64, 127, 999, 1000, 4095, 10007,
                                32767, 32768};
  for (size_t a = 0; a < sizeof(ms) / sizeof(ms[0]); a++) {
    for (size_t b = 0; b < sizeof(ps) / sizeof(ps[0]); b++) {
      if (ps[b] > ms[a]) continue;
      check_tiling(ms[a], ps[b]);
      check_owner(ms[a], ps[b]);
    }
  }
  /* The formulas do not overflow for 32-bit sizes either. */
  uint32_t big = 0x80000000u;
  check_tiling(big, 3);
  SL_ASSERT_EQ_INT(sl_key_group_owner(big - 1, big, 3), 2);
  SL_ASSERT_EQ_INT(sl_key_group_owner(0, big, 3), 0);
  SL_ASSERT_EQ_INT(sl_key_group_range_end(2, UINT32_MAX, 3), UINT32_MAX - 1);
}

/* The rescale case of the issue: m = 12, parallelism 3 -> 4. */
SL_TEST(keygroup_rescale_3_to_4) {
  const uint32_t m = 12;
  /* New subtask 1 owns key groups 3..5. */
  SL_ASSERT_EQ_INT(sl_key_group_range_start(1, m, 4), 3);
  SL_ASSERT_EQ_INT(sl_key_group_range_end(1, m, 4), 5);
  /* The full tables. */
  for (uint32_t i = 0; i < 3; i++) {
    SL_ASSERT_EQ_INT(sl_key_group_range_start(i, m, 3), 4 * i);
    SL_ASSERT_EQ_INT(sl_key_group_range_end(i, m, 3), 4 * i + 3);
  }
  for (uint32_t i = 0; i < 4; i++) {
    SL_ASSERT_EQ_INT(sl_key_group_range_start(i, m, 4), 3 * i);
    SL_ASSERT_EQ_INT(sl_key_group_range_end(i, m, 4), 3 * i + 2);
  }
  for (uint32_t kg = 0; kg < m; kg++) {
    SL_ASSERT_EQ_INT(sl_key_group_owner(kg, m, 3), kg / 4);
    SL_ASSERT_EQ_INT(sl_key_group_owner(kg, m, 4), kg / 3);
  }
  /* So new subtask 1 restores from old subtasks 0 (group 3) and 1
   * (groups 4 and 5), and nothing else. */
  uint32_t from[12], n_from = 0;
  for (uint32_t kg = sl_key_group_range_start(1, m, 4);
       kg <= sl_key_group_range_end(1, m, 4); kg++) {
    uint32_t old = sl_key_group_owner(kg, m, 3);
    if (n_from == 0 || from[n_from - 1] != old) from[n_from++] = old;
  }
  SL_ASSERT_EQ_INT(n_from, 2);
  SL_ASSERT_EQ_INT(from[0], 0);
  SL_ASSERT_EQ_INT(from[1], 1);
  /* Rescaling never splits a key group: each old range maps to whole
   * groups of new owners, and every group has one owner at each p. */
  for (uint32_t kg = 0; kg < m; kg++) {
    uint32_t o3 = sl_key_group_owner(kg, m, 3);
    uint32_t o4 = sl_key_group_owner(kg, m, 4);
    SL_ASSERT_TRUE(kg >= sl_key_group_range_start(o3, m, 3) &&
                   kg <= sl_key_group_range_end(o3, m, 3));
    SL_ASSERT_TRUE(kg >= sl_key_group_range_start(o4, m, 4) &&
                   kg <= sl_key_group_range_end(o4, m, 4));
  }
}

/* ------------------------------------------------------------------ */
/* The key hash. */

/* The documented composition, written out independently of codec.c:
 * xxh3-64 of the bytes, folded to 32 bits (low ^ high), then murmur3's
 * fmix32 finalizer. */
static uint32_t ref_fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

static uint32_t ref_fold(uint64_t h64) {
  return (uint32_t)h64 ^ (uint32_t)(h64 >> 32);
}

static uint32_t ref_key_hash(const void *p, size_t len) {
  return ref_fmix32(ref_fold(XXH3_64bits(p, len)));
}

SL_TEST(key_hash_composition) {
  /* XXH3-64 of the empty input is the published test vector, so the
   * library behind the reference is the standard xxh3. */
  SL_ASSERT_EQ_INT(XXH3_64bits("", 0), 0x2D06800538D394C2ull);
  SL_ASSERT_EQ_INT(sl_key_hash("", 0),
                   ref_fmix32(ref_fold(0x2D06800538D394C2ull)));
  /* fmix32 has known fixed points and values. */
  SL_ASSERT_EQ_INT(ref_fmix32(0), 0);
  SL_ASSERT_EQ_INT(ref_fmix32(1), 0x514e28b7u);

  /* Pinned inputs: canonical keys of a few values and plain strings. */
  sl_bytes_t k;
  sl_bytes_init(&k);
  int64_t ints[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, 1000000007};
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
    sl_bytes_clear(&k);
    SL_ASSERT_OK(sl_key_add_i64(&k, ints[i]));
    SL_ASSERT_EQ_INT(sl_key_hash(k.data, k.len), ref_key_hash(k.data, k.len));
  }
  const char *strs[] = {"a", "hello", "sluice", "the quick brown fox"};
  for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
    sl_bytes_clear(&k);
    SL_ASSERT_OK(sl_key_add_str(&k, strs[i], (uint32_t)strlen(strs[i])));
    SL_ASSERT_EQ_INT(sl_key_hash(k.data, k.len), ref_key_hash(k.data, k.len));
    SL_ASSERT_EQ_INT(sl_key_hash(strs[i], strlen(strs[i])),
                     ref_key_hash(strs[i], strlen(strs[i])));
  }

  /* Every length from 0 to 400 (xxh3 has separate paths for 0, 1-3, 4-8,
   * 9-16, 17-128, 129-240 and longer inputs), at every alignment. */
  uint8_t buf[512 + 8];
  uint64_t z = 0x1234;
  for (size_t i = 0; i < sizeof(buf); i++) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    buf[i] = (uint8_t)(z >> 56);
  }
  for (size_t len = 0; len <= 400; len++) {
    for (size_t off = 0; off < 8; off++) {
      uint32_t h = sl_key_hash(buf + off, len);
      if (h != ref_key_hash(buf + off, len))
        SL_TEST_FAIL("len %zu off %zu: 0x%08x != 0x%08x", len, off, h,
                     ref_key_hash(buf + off, len));
    }
    /* The internal two steps, used by the partitioner and the state
     * backend, compose to the same hash. */
    SL_ASSERT_EQ_INT(sl__key_hash64(buf, len), XXH3_64bits(buf, len));
    SL_ASSERT_EQ_INT(sl__key_hash_fold(sl__key_hash64(buf, len)),
                     sl_key_hash(buf, len));
    /* And the key group is the hash modulo m. */
    SL_ASSERT_EQ_INT(sl_key_group(buf, len, 128), sl_key_hash(buf, len) % 128);
    SL_ASSERT_EQ_INT(sl_key_group(buf, len, 12), sl_key_hash(buf, len) % 12);
  }
  /* The fold alone, on values with distinct halves. */
  uint64_t hs[] = {0, 1, 0xffffffff00000000ull, 0x0123456789abcdefull,
                   UINT64_MAX};
  for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
    SL_ASSERT_EQ_INT(sl__key_hash_fold(hs[i]), ref_fmix32(ref_fold(hs[i])));
  sl_bytes_close(&k);
}

/*
 * 100000 sequential int64 keys over 128 key groups.  With 127 degrees of
 * freedom the chi-square statistic has mean 127 and standard deviation
 * about 16; the bound 250 is more than seven deviations away, so only a
 * badly skewed hash fails.  The input is fixed, so the result is too.
 */
SL_TEST(key_group_distribution) {
  enum { N_KEYS = 100000, M = 128 };
  uint32_t count[M] = {0};
  sl_bytes_t k;
  sl_bytes_init(&k);
  for (int64_t key = 0; key < N_KEYS; key++) {
    sl_bytes_clear(&k);
    SL_ASSERT_OK(sl_key_add_i64(&k, key));
    count[sl_key_group(k.data, k.len, M)]++;
  }
  double expect = (double)N_KEYS / M, chi2 = 0;
  uint32_t lo = UINT32_MAX, hi = 0;
  for (int g = 0; g < M; g++) {
    double d = count[g] - expect;
    chi2 += d * d / expect;
    if (count[g] < lo) lo = count[g];
    if (count[g] > hi) hi = count[g];
  }
  printf("chi-square %.1f (min %u, max %u per group)\n", chi2, lo, hi);
  if (!(chi2 < 250.0)) SL_TEST_FAIL("chi-square %.1f >= 250", chi2);
  /* The same for the subtask of parallelism 8 (16 groups each). */
  uint32_t per[8] = {0};
  for (int g = 0; g < M; g++)
    per[sl_key_group_owner((uint32_t)g, M, 8)] += count[g];
  for (int i = 0; i < 8; i++) {
    SL_ASSERT_TRUE(per[i] > N_KEYS / 8 - 1000);
    SL_ASSERT_TRUE(per[i] < N_KEYS / 8 + 1000);
  }
  sl_bytes_close(&k);
}
