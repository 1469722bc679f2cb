/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A log-linear latency histogram in the style of HdrHistogram: values are
 * int64 nanoseconds; each power of two is split into 2^SUB_BITS equal
 * sub-buckets, so every bucket is at most 2^-SUB_BITS of its lower bound
 * wide.  The histogram is one fixed-size struct (about 57 KiB) that covers
 * the whole non-negative int64 range (0 ns to 292 years) with no
 * allocation; recording is an index computation and an increment.  See
 * bench/README.md.
 *
 * Bucket layout, with S = SL_BENCH_HIST_SUB_BITS = 7:
 *
 *   index 0 .. 2^(S+1) - 1   one bucket per value 0 .. 255 (exact)
 *   then, for k = 1, 2, ...  the range [2^(S+k), 2^(S+k+1)) in 2^S buckets
 *                            of width 2^k
 *
 * Accuracy.  A value v >= 2^(S+1) lies in a bucket of width w = 2^k with
 * lower bound >= 2^(S+k) = 2^S w.  Quantiles are reported as the bucket's
 * midpoint (clamped to the exact min and max), so the reported value is
 * within w/2 <= v / 2^(S+1) of a recorded value v that the exact
 * nearest-rank quantile would return: a relative error of at most
 * 2^-(S+1) = 1/256 ~ 0.39%.  The bucket resolution itself, 2^-S = 1/128
 * ~ 0.78%, is the bound we document to users.  Values below 256 ns are
 * exact.
 */
#ifndef SL_BENCH_HIST_H
#define SL_BENCH_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice/sl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_BENCH_HIST_SUB_BITS 7
#define SL_BENCH_HIST_SUB_COUNT (1 << SL_BENCH_HIST_SUB_BITS)
/* Linear part (2^(S+1) exact buckets) plus 2^S buckets for each k = 1 ..
 * 62 - S (the top bit of a non-negative int64 is bit 62). */
#define SL_BENCH_HIST_N_BUCKETS \
  (2 * SL_BENCH_HIST_SUB_COUNT +  \
   (62 - SL_BENCH_HIST_SUB_BITS) * SL_BENCH_HIST_SUB_COUNT)

/*
 * Caller-allocated (it is large: prefer static or heap storage to the
 * stack of a small thread).  Not thread-safe: one histogram per recording
 * thread, merged afterwards.  Fields are read through the functions below.
 */
typedef struct sl_bench_hist_s {
  uint64_t count;
  uint64_t n_clamped; /* negative values recorded as 0 */
  int64_t min;
  int64_t max;
  double sum; /* for the mean; double because int64 ns sums overflow */
  uint64_t buckets[SL_BENCH_HIST_N_BUCKETS];
} sl_bench_hist_t;

/** @brief Initialize (empty).  @thread owner @locks none */
void sl_bench_hist_init(sl_bench_hist_t *h);
/** @brief Forget all values; as init. */
void sl_bench_hist_reset(sl_bench_hist_t *h);

/** @brief Bucket index of a value (negative values map to bucket 0). */
size_t sl_bench_hist_index(int64_t v);
/** @brief Smallest and largest value of bucket i.
 *  @param[out] out_lo, out_hi may be NULL. */
void sl_bench_hist_bucket_range(size_t i, int64_t *out_lo, int64_t *out_hi);

/**
 * @brief Record one value in nanoseconds.  Negative values (a clock step,
 * or skew between processes) are recorded as 0 and counted in n_clamped.
 * No allocation; a handful of instructions.
 */
static inline void sl_bench_hist_record_n(sl_bench_hist_t *h, int64_t v,
                                          uint64_t n) {
  if (n == 0) return;
  if (v < 0) {
    v = 0;
    h->n_clamped += n;
  }
  uint64_t u = (uint64_t)v;
  size_t idx;
  if (u < 2u * SL_BENCH_HIST_SUB_COUNT) {
    idx = (size_t)u;
  } else {
    int msb = 63 - __builtin_clzll(u);
    int k = msb - SL_BENCH_HIST_SUB_BITS;
    idx = (size_t)(2 * SL_BENCH_HIST_SUB_COUNT) +
          (size_t)(k - 1) * SL_BENCH_HIST_SUB_COUNT +
          (size_t)((u >> k) - SL_BENCH_HIST_SUB_COUNT);
  }
  h->buckets[idx] += n;
  if (h->count == 0 || v < h->min) h->min = v;
  if (h->count == 0 || v > h->max) h->max = v;
  h->count += n;
  h->sum += (double)v * (double)n;
}

static inline void sl_bench_hist_record(sl_bench_hist_t *h, int64_t v) {
  sl_bench_hist_record_n(h, v, 1);
}

/** @brief Add every value of src to dst (min, max and counts exact). */
void sl_bench_hist_merge(sl_bench_hist_t *dst, const sl_bench_hist_t *src);

uint64_t sl_bench_hist_count(const sl_bench_hist_t *h);
/** @brief Exact smallest / largest recorded value; 0 when empty. */
int64_t sl_bench_hist_min(const sl_bench_hist_t *h);
int64_t sl_bench_hist_max(const sl_bench_hist_t *h);
/** @brief Mean of the recorded values (exact up to double rounding);
 *  NaN when empty. */
double sl_bench_hist_mean(const sl_bench_hist_t *h);

/**
 * @brief Nearest-rank quantile: the value of rank ceil(q * count) (at least
 * 1, computed in double arithmetic) in ascending order, reported as its
 * bucket's midpoint clamped to [min, max].  q = 0 gives min and q = 1
 * gives max, exactly.
 * @return the quantile, or 0 when empty or q is outside [0, 1].
 */
int64_t sl_bench_hist_quantile(const sl_bench_hist_t *h, double q);

/**
 * @brief Export the non-empty buckets in ascending order as three parallel
 * arrays (JSON-friendly: lower bound, upper bound, count per bucket).
 * Pass cap 0 to learn the number of non-empty buckets in *out_n.
 * @param[out] out_lo, out_hi, out_count arrays of cap entries.
 * @param[out] out_n number of non-empty buckets (always written).
 * @return SL_OK, or SL_EOVERFLOW when cap is too small (then nothing
 *   beyond cap is written and *out_n is the number needed).
 */
int sl_bench_hist_export(const sl_bench_hist_t *h, int64_t *out_lo,
                         int64_t *out_hi, uint64_t *out_count, size_t cap,
                         size_t *out_n);

/**
 * @brief Write the histogram as one JSON object to f: {"unit": "ns",
 * "sub_bucket_bits": 7, "count", "min", "max", "mean", "p50", "p90", "p99",
 * "p999", "n_clamped", "buckets": {"lo": [...], "hi": [...], "count":
 * [...]}}.  No trailing newline.
 * @return SL_OK or SL_EIO.
 */
int sl_bench_hist_write_json(const sl_bench_hist_t *h, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
