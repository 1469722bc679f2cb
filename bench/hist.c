/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log-linear latency histogram: bucket arithmetic, merge, quantiles
 * and export.  Recording itself is inline in hist.h.  The layout and the
 * error bound are described at the top of hist.h; see bench/README.md.
 */
#include "hist.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define S SL_BENCH_HIST_SUB_BITS
#define SUB SL_BENCH_HIST_SUB_COUNT

void sl_bench_hist_init(sl_bench_hist_t *h) { memset(h, 0, sizeof(*h)); }

void sl_bench_hist_reset(sl_bench_hist_t *h) { sl_bench_hist_init(h); }

size_t sl_bench_hist_index(int64_t v) {
  if (v < 0) v = 0;
  uint64_t u = (uint64_t)v;
  if (u < 2u * SUB) return (size_t)u;
  int msb = 63 - __builtin_clzll(u);
  int k = msb - S;
  return (size_t)(2 * SUB) + (size_t)(k - 1) * SUB +
         (size_t)((u >> k) - SUB);
}

void sl_bench_hist_bucket_range(size_t i, int64_t *out_lo, int64_t *out_hi) {
  uint64_t lo, hi;
  if (i >= SL_BENCH_HIST_N_BUCKETS) i = SL_BENCH_HIST_N_BUCKETS - 1;
  if (i < 2u * SUB) {
    lo = hi = i;
  } else {
    size_t j = i - 2u * SUB;
    int k = (int)(j / SUB) + 1;
    uint64_t sub = j % SUB;
    lo = (SUB + sub) << k;
    hi = lo + ((1ull << k) - 1); /* the top bucket ends at INT64_MAX */
  }
  if (out_lo) *out_lo = (int64_t)lo;
  if (out_hi) *out_hi = (int64_t)hi;
}

void sl_bench_hist_merge(sl_bench_hist_t *dst, const sl_bench_hist_t *src) {
  if (src->count == 0) return;
  for (size_t i = 0; i < SL_BENCH_HIST_N_BUCKETS; i++)
    dst->buckets[i] += src->buckets[i];
  if (dst->count == 0 || src->min < dst->min) dst->min = src->min;
  if (dst->count == 0 || src->max > dst->max) dst->max = src->max;
  dst->count += src->count;
  dst->n_clamped += src->n_clamped;
  dst->sum += src->sum;
}

uint64_t sl_bench_hist_count(const sl_bench_hist_t *h) { return h->count; }

int64_t sl_bench_hist_min(const sl_bench_hist_t *h) {
  return h->count ? h->min : 0;
}

int64_t sl_bench_hist_max(const sl_bench_hist_t *h) {
  return h->count ? h->max : 0;
}

double sl_bench_hist_mean(const sl_bench_hist_t *h) {
  return h->count ? h->sum / (double)h->count : NAN;
}

int64_t sl_bench_hist_quantile(const sl_bench_hist_t *h, double q) {
  if (h->count == 0 || !(q >= 0.0 && q <= 1.0)) return 0;
  if (q == 0.0) return h->min;
  if (q == 1.0) return h->max;
  /* Rank in 1 .. count, computed in double (exact enough below 2^53
   * values; tests compute the exact quantile with the same expression). */
  double want = ceil(q * (double)h->count);
  uint64_t rank = want < 1.0 ? 1 : (uint64_t)want;
  if (rank > h->count) rank = h->count;
  uint64_t seen = 0;
  size_t first = sl_bench_hist_index(h->min);
  size_t last = sl_bench_hist_index(h->max);
  for (size_t i = first; i <= last; i++) {
    seen += h->buckets[i];
    if (seen >= rank) {
      int64_t lo, hi;
      sl_bench_hist_bucket_range(i, &lo, &hi);
      int64_t mid = lo + (int64_t)(((uint64_t)hi - (uint64_t)lo + 1) / 2);
      if (mid < h->min) mid = h->min;
      if (mid > h->max) mid = h->max;
      return mid;
    }
  }
  return h->max; /* unreachable when the counts are consistent */
}

int sl_bench_hist_export(const sl_bench_hist_t *h, int64_t *out_lo,
                         int64_t *out_hi, uint64_t *out_count, size_t cap,
                         size_t *out_n) {
  size_t n = 0;
  for (size_t i = 0; i < SL_BENCH_HIST_N_BUCKETS; i++) {
    if (h->buckets[i] == 0) continue;
    if (n < cap) {
      sl_bench_hist_bucket_range(i, &out_lo[n], &out_hi[n]);
      out_count[n] = h->buckets[i];
    }
    n++;
  }
  *out_n = n;
  return n <= cap ? SL_OK : SL_EOVERFLOW;
}

/* Print an array of the non-empty buckets' field: 0 lo, 1 hi, 2 count. */
static void write_bucket_array(const sl_bench_hist_t *h, FILE *f, int what) {
  bool is_first = true;
  fputc('[', f);
  for (size_t i = 0; i < SL_BENCH_HIST_N_BUCKETS; i++) {
    if (h->buckets[i] == 0) continue;
    int64_t lo, hi;
    sl_bench_hist_bucket_range(i, &lo, &hi);
    if (!is_first) fputs(", ", f);
    is_first = false;
    if (what == 0)
      fprintf(f, "%" PRId64, lo);
    else if (what == 1)
      fprintf(f, "%" PRId64, hi);
    else
      fprintf(f, "%" PRIu64, h->buckets[i]);
  }
  fputc(']', f);
}

int sl_bench_hist_write_json(const sl_bench_hist_t *h, FILE *f) {
  fprintf(f,
          "{\"unit\": \"ns\", \"sub_bucket_bits\": %d, \"count\": %" PRIu64
          ", \"min\": %" PRId64 ", \"max\": %" PRId64 ", ",
          S, h->count, sl_bench_hist_min(h), sl_bench_hist_max(h));
  if (h->count)
    fprintf(f, "\"mean\": %.17g, ", sl_bench_hist_mean(h));
  else
    fputs("\"mean\": null, ", f);
  fprintf(f,
          "\"p50\": %" PRId64 ", \"p90\": %" PRId64 ", \"p99\": %" PRId64
          ", \"p999\": %" PRId64 ", \"n_clamped\": %" PRIu64
          ", \"buckets\": {\"lo\": ",
          sl_bench_hist_quantile(h, 0.5), sl_bench_hist_quantile(h, 0.9),
          sl_bench_hist_quantile(h, 0.99), sl_bench_hist_quantile(h, 0.999),
          h->n_clamped);
  write_bucket_array(h, f, 0);
  fputs(", \"hi\": ", f);
  write_bucket_array(h, f, 1);
  fputs(", \"count\": ", f);
  write_bucket_array(h, f, 2);
  fputs("}}", f);
  return ferror(f) ? SL_EIO : SL_OK;
}
