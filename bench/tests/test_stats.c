/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the benchmark harness: the statistics (t critical values and
 * intervals, ratio intervals and their coverage, the stability flag), the
 * latency histogram (quantile error bound, merge, export), and the fork
 * runner (per-fork means, warm-up exclusion, failed and timed-out forks,
 * A/B interleaving, external commands, JSON).  Every random input comes
 * from a fixed seed; nothing asserts on timing.  See bench/README.md.
 */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <unistd.h>

#include "harness.h"
#include "hist.h"
#include "sl_test.h"
#include "stats.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------ */
/* Descriptive statistics and the t distribution.                      */
/* ------------------------------------------------------------------ */

/*
 * x = {10, 12, 9, 11, 13, 10, 12, 11}, n = 8.
 *   sum 88, mean 11.
 *   deviations -1 1 -2 0 2 -1 1 0, squares sum to 12.
 *   s^2 = 12 / 7 = 1.7142857, s = 1.3093073, s / sqrt(8) = 0.4629100.
 *   t_{0.975, 7} = 2.3646243 (tables: 2.365).
 *   half width = 2.3646243 * 0.4629100 = 1.0946083.
 *   95% CI = [9.9053917, 12.0946083].
 */
SL_TEST(t_interval_known_sample) {
  const double x[] = {10, 12, 9, 11, 13, 10, 12, 11};
  size_t n = ARRAY_LEN(x);
  SL_ASSERT_EQ_DBL(sl_bench_mean(x, n), 11.0, 1e-12);
  SL_ASSERT_EQ_DBL(sl_bench_variance(x, n), 12.0 / 7.0, 1e-12);
  SL_ASSERT_EQ_DBL(sl_bench_stddev(x, n), 1.3093073, 1e-6);
  SL_ASSERT_EQ_DBL(sl_bench_min(x, n), 9.0, 0);
  SL_ASSERT_EQ_DBL(sl_bench_max(x, n), 13.0, 0);

  sl_bench_interval_t ci;
  SL_ASSERT_OK(sl_bench_t_interval(x, n, 0.95, &ci));
  SL_ASSERT_EQ_DBL(ci.estimate, 11.0, 1e-12);
  SL_ASSERT_EQ_DBL(ci.lo, 9.9053917, 1e-6);
  SL_ASSERT_EQ_DBL(ci.hi, 12.0946083, 1e-6);
  SL_ASSERT_EQ_DBL(ci.df, 7.0, 0);
  SL_ASSERT_TRUE(ci.is_bounded);

  /* 99%: t_{0.995, 7} = 3.4994833, half width 1.6199463. */
  SL_ASSERT_OK(sl_bench_t_interval(x, n, 0.99, &ci));
  SL_ASSERT_EQ_DBL(ci.hi - ci.estimate, 1.6199463, 1e-6);

  /* Sorted: 9 10 10 11 11 12 12 13.  Type 7: q=0.25 -> h=1.75 -> 10;
   * q=0.9 -> h=6.3 -> 12 + 0.3 = 12.3; median 11. */
  double q;
  SL_ASSERT_OK(sl_bench_median(x, n, &q));
  SL_ASSERT_EQ_DBL(q, 11.0, 1e-12);
  SL_ASSERT_OK(sl_bench_quantile(x, n, 0.25, &q));
  SL_ASSERT_EQ_DBL(q, 10.0, 1e-12);
  SL_ASSERT_OK(sl_bench_quantile(x, n, 0.9, &q));
  SL_ASSERT_EQ_DBL(q, 12.3, 1e-12);
  SL_ASSERT_OK(sl_bench_quantile(x, n, 1.0, &q));
  SL_ASSERT_EQ_DBL(q, 13.0, 0);
  SL_ASSERT_EQ_INT(sl_bench_quantile(x, n, 1.5, &q), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl_bench_t_interval(x, 1, 0.95, &ci), SL_EINVAL);
  SL_ASSERT_TRUE(isnan(sl_bench_mean(x, 0)));
  SL_ASSERT_TRUE(isnan(sl_bench_variance(x, 1)));
}

SL_TEST(t_critical_table) {
  /* Two-sided 95% from printed tables (3 decimals). */
  static const struct {
    double df, t95, t99;
  } table[] = {
      {1, 12.706, 63.657}, {2, 4.303, 9.925},  {4, 2.776, 4.604},
      {9, 2.262, 3.250},   {10, 2.228, 3.169}, {29, 2.045, 2.756},
      {30, 2.042, 2.750},  {120, 1.980, 2.617}, {1000, 1.962, 2.581},
  };
  for (size_t i = 0; i < ARRAY_LEN(table); i++) {
    SL_ASSERT_EQ_DBL(sl_bench_t_critical(0.95, table[i].df), table[i].t95,
                     5e-4);
    SL_ASSERT_EQ_DBL(sl_bench_t_critical(0.99, table[i].df), table[i].t99,
                     5e-4);
  }
  /* Closed forms: df 1 is Cauchy, t = tan(pi (p - 1/2)); df 2 has
   * t = (2p - 1) sqrt(2 / (4 p (1 - p))). */
  const double ps[] = {0.6, 0.75, 0.9, 0.975, 0.999, 0.9999};
  for (size_t i = 0; i < ARRAY_LEN(ps); i++) {
    double p = ps[i];
    double c1 = tan(M_PI * (p - 0.5));
    double c2 = (2 * p - 1) * sqrt(2.0 / (4 * p * (1 - p)));
    SL_ASSERT_EQ_DBL(sl_bench_t_quantile(p, 1), c1, 1e-9 * c1);
    SL_ASSERT_EQ_DBL(sl_bench_t_quantile(p, 2), c2, 1e-9 * c2);
    SL_ASSERT_EQ_DBL(sl_bench_t_quantile(1 - p, 2), -c2, 1e-9 * c2);
  }
  /* Large df tends to the normal: z_{0.975} = 1.959964. */
  SL_ASSERT_EQ_DBL(sl_bench_t_critical(0.95, 1e9), 1.959964, 1e-6);
  SL_ASSERT_EQ_DBL(sl_bench_normal_quantile(0.975), 1.959964, 1e-6);
  /* The CDF inverts the quantile, also for non-integer df (Welch). */
  const double dfs[] = {0.7, 1.5, 3.3, 17.25, 250.5};
  for (size_t i = 0; i < ARRAY_LEN(dfs); i++)
    for (size_t j = 0; j < ARRAY_LEN(ps); j++)
      SL_ASSERT_EQ_DBL(sl_bench_t_cdf(sl_bench_t_quantile(ps[j], dfs[i]),
                                      dfs[i]),
                       ps[j], 1e-12);
  /* Critical values decrease with df. */
  for (double df = 1; df < 200; df += 1)
    SL_ASSERT_TRUE(sl_bench_t_critical(0.95, df + 1) <
                   sl_bench_t_critical(0.95, df));
  /* Incomplete beta identities. */
  SL_ASSERT_EQ_DBL(sl_bench_incbeta(3.5, 3.5, 0.5), 0.5, 1e-14);
  SL_ASSERT_EQ_DBL(sl_bench_incbeta(1, 1, 0.3), 0.3, 1e-14);
  SL_ASSERT_EQ_DBL(sl_bench_incbeta(4, 1, 0.7), pow(0.7, 4), 1e-14);
  SL_ASSERT_TRUE(isnan(sl_bench_t_quantile(0.975, 0)));
  SL_ASSERT_TRUE(isnan(sl_bench_t_critical(1.0, 5)));
}

/* ------------------------------------------------------------------ */
/* Ratio intervals.                                                     */
/* ------------------------------------------------------------------ */

#define COV_TRIALS 100
#define COV_FORKS 10
#define COV_RATIO 1.1

/* Synthetic fork means: baseline N(100, 5^2), candidate N(110, 5.5^2). */
static void gen_forks(sl_bench_rng_t *rng, double *a, double *b) {
  for (int i = 0; i < COV_FORKS; i++) {
    a[i] = 100.0 + 5.0 * sl_bench_rng_normal(rng);
    b[i] = 100.0 * COV_RATIO + 5.5 * sl_bench_rng_normal(rng);
  }
}

/*
 * Coverage check.  The delta-method standard error of the ratio is
 * 1.1 sqrt(2 * 0.05^2 / 10) = 0.0246, so a correct 95% interval has a
 * half width near t_{0.975, ~18} * 0.0246 = 0.052; we also require the
 * average half width to be in [0.035, 0.075] so that an interval cannot
 * pass by being uselessly wide.
 */
static void check_coverage(int method, int *out_covered,
                           double *out_mean_half) {
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, 20240607);
  int covered = 0;
  double sum_half = 0;
  for (int t = 0; t < COV_TRIALS; t++) {
    double a[COV_FORKS], b[COV_FORKS];
    gen_forks(&rng, a, b);
    sl_bench_interval_t iv;
    if (method == 2) {
      SL_ASSERT_OK(sl_bench_ratio_fieller(a, COV_FORKS, b, COV_FORKS, 0.95,
                                          &iv));
    } else {
      sl_bench_boot_opts_t bo;
      sl_bench_boot_opts_init(&bo);
      bo.seed = 1000 + (uint64_t)t;
      bo.n_resamples = 4000;
      bo.is_expanded = method == 0;
      SL_ASSERT_OK(sl_bench_ratio_bootstrap(a, COV_FORKS, b, COV_FORKS, &bo,
                                            &iv));
    }
    SL_ASSERT_TRUE(iv.is_bounded);
    SL_ASSERT_TRUE(iv.lo <= iv.estimate && iv.estimate <= iv.hi);
    SL_ASSERT_EQ_DBL(iv.estimate,
                     sl_bench_mean(b, COV_FORKS) / sl_bench_mean(a, COV_FORKS),
                     1e-12);
    if (iv.lo <= COV_RATIO && COV_RATIO <= iv.hi) covered++;
    sum_half += (iv.hi - iv.lo) / 2;
  }
  *out_covered = covered;
  *out_mean_half = sum_half / COV_TRIALS;
}

SL_TEST(ratio_bootstrap_coverage) {
  int covered;
  double half;
  check_coverage(0, &covered, &half);
  printf("expanded percentile bootstrap: %d/%d covered, mean half %.4f\n",
         covered, COV_TRIALS, half);
  SL_ASSERT_LE_INT(93, covered);
  SL_ASSERT_TRUE(half > 0.035 && half < 0.075);

  /* The plain percentile interval is narrower (documented: about 92%
   * coverage with 10 forks); it must still be a sensible interval. */
  int covered_plain;
  double half_plain;
  check_coverage(1, &covered_plain, &half_plain);
  printf("plain percentile bootstrap: %d/%d covered, mean half %.4f\n",
         covered_plain, COV_TRIALS, half_plain);
  SL_ASSERT_LE_INT(80, covered_plain);
  SL_ASSERT_TRUE(half_plain < half);
}

SL_TEST(ratio_fieller_coverage) {
  int covered;
  double half;
  check_coverage(2, &covered, &half);
  printf("fieller: %d/%d covered, mean half %.4f\n", covered, COV_TRIALS,
         half);
  SL_ASSERT_LE_INT(93, covered);
  SL_ASSERT_TRUE(half > 0.035 && half < 0.075);
}

SL_TEST(ratio_edge_cases) {
  const double a[] = {100, 102, 98, 101, 99};
  const double b[] = {150, 153, 147, 151, 149};
  sl_bench_interval_t iv1, iv2;
  sl_bench_boot_opts_t bo;
  sl_bench_boot_opts_init(&bo);
  bo.seed = 42;
  /* Deterministic given the seed; a different seed moves the ends. */
  SL_ASSERT_OK(sl_bench_ratio_bootstrap(a, 5, b, 5, &bo, &iv1));
  SL_ASSERT_OK(sl_bench_ratio_bootstrap(a, 5, b, 5, &bo, &iv2));
  SL_ASSERT_EQ_DBL(iv1.lo, iv2.lo, 0);
  SL_ASSERT_EQ_DBL(iv1.hi, iv2.hi, 0);
  bo.seed = 43;
  SL_ASSERT_OK(sl_bench_ratio_bootstrap(a, 5, b, 5, &bo, &iv2));
  SL_ASSERT_TRUE(iv1.lo != iv2.lo || iv1.hi != iv2.hi);
  SL_ASSERT_EQ_DBL(iv1.estimate, 1.5, 1e-12);
  SL_ASSERT_TRUE(iv1.lo < 1.5 && iv1.hi > 1.5);

  /* Fieller with zero variance collapses to the point. */
  const double c[] = {10, 10, 10};
  const double d[] = {12, 12, 12};
  SL_ASSERT_OK(sl_bench_ratio_fieller(c, 3, d, 3, 0.95, &iv1));
  SL_ASSERT_EQ_DBL(iv1.lo, 1.2, 1e-12);
  SL_ASSERT_EQ_DBL(iv1.hi, 1.2, 1e-12);

  /* A baseline not significantly different from 0: unbounded. */
  const double e[] = {1, -1, 2, -1.5, 0.2};
  SL_ASSERT_OK(sl_bench_ratio_fieller(e, 5, b, 5, 0.95, &iv1));
  SL_ASSERT_TRUE(!iv1.is_bounded);
  SL_ASSERT_TRUE(isinf(iv1.lo) && isinf(iv1.hi));

  /* Fieller and the delta method agree when the noise is small. */
  SL_ASSERT_OK(sl_bench_ratio_fieller(a, 5, b, 5, 0.95, &iv1));
  double va = sl_bench_variance(a, 5) / 5, vb = sl_bench_variance(b, 5) / 5;
  double r = 1.5, se = r * sqrt(va / (100.0 * 100.0) + vb / (150.0 * 150.0));
  double half = sl_bench_t_critical(0.95, iv1.df) * se;
  SL_ASSERT_EQ_DBL((iv1.hi - iv1.lo) / 2, half, 0.02 * half);

  SL_ASSERT_EQ_INT(sl_bench_ratio_fieller(a, 1, b, 5, 0.95, &iv1), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl_bench_ratio_bootstrap(e, 5, b, 1, &bo, &iv1),
                   SL_EINVAL);
}

/* ------------------------------------------------------------------ */
/* Stability flag.                                                      */
/* ------------------------------------------------------------------ */

#define PHASE_N 30

SL_TEST(unstable_flag_trend) {
  for (uint64_t seed = 1; seed <= 50; seed++) {
    sl_bench_rng_t rng;
    sl_bench_rng_seed(&rng, seed);
    double x[PHASE_N];
    /* Drifts by 0.2 per iteration (5.8% over the phase), noise sd 1. */
    for (int i = 0; i < PHASE_N; i++)
      x[i] = 100.0 + 0.2 * i + sl_bench_rng_normal(&rng);
    unsigned reason = 0;
    SL_ASSERT_TRUE(sl_bench_phase_is_unstable(x, PHASE_N, &reason));
    SL_ASSERT_TRUE(reason & SL_BENCH_UNSTABLE_TREND);
    sl_bench_trend_t tr;
    SL_ASSERT_OK(sl_bench_trend(x, PHASE_N, &tr));
    SL_ASSERT_TRUE(tr.slope > 0.1 && tr.slope < 0.3);
    SL_ASSERT_TRUE(tr.p_value < 0.01);
  }
  /* A decreasing exact line. */
  double y[PHASE_N];
  for (int i = 0; i < PHASE_N; i++) y[i] = 1000.0 - 3.0 * i;
  unsigned reason = 0;
  SL_ASSERT_TRUE(sl_bench_phase_is_unstable(y, PHASE_N, &reason));
  SL_ASSERT_TRUE(reason & SL_BENCH_UNSTABLE_TREND);
  SL_ASSERT_EQ_STR(sl_bench_unstable_reason_str(reason),
                   (reason & SL_BENCH_UNSTABLE_AUTOCORR)
                       ? "trend+autocorrelation"
                       : "trend");
}

SL_TEST(unstable_flag_autocorrelation) {
  for (uint64_t seed = 1; seed <= 50; seed++) {
    sl_bench_rng_t rng;
    sl_bench_rng_seed(&rng, seed);
    double x[50], e = 0;
    /* AR(1) with phi 0.9 around 100. */
    for (int i = 0; i < 50; i++) {
      e = 0.9 * e + sl_bench_rng_normal(&rng);
      x[i] = 100.0 + e;
    }
    unsigned reason = 0;
    SL_ASSERT_TRUE(sl_bench_phase_is_unstable(x, 50, &reason));
    SL_ASSERT_TRUE(reason & SL_BENCH_UNSTABLE_AUTOCORR);
    SL_ASSERT_TRUE(sl_bench_autocorr_lag1(x, 50) > 0.3);
  }
  /* Strict alternation (e.g. two interfering caches) is autocorrelated
   * too, with r1 close to -1. */
  double alt[20];
  for (int i = 0; i < 20; i++) alt[i] = 100.0 + ((i & 1) ? 1.0 : -1.0);
  unsigned reason = 0;
  SL_ASSERT_TRUE(sl_bench_phase_is_unstable(alt, 20, &reason));
  SL_ASSERT_EQ_INT(reason, SL_BENCH_UNSTABLE_AUTOCORR);
  SL_ASSERT_TRUE(sl_bench_autocorr_lag1(alt, 20) < -0.9);
}

SL_TEST(unstable_flag_white_noise) {
  int n_flagged = 0;
  for (uint64_t seed = 1; seed <= 100; seed++) {
    sl_bench_rng_t rng;
    sl_bench_rng_seed(&rng, 7000 + seed);
    double x[PHASE_N];
    for (int i = 0; i < PHASE_N; i++)
      x[i] = 100.0 + 2.0 * sl_bench_rng_normal(&rng);
    unsigned reason = 0;
    if (sl_bench_phase_is_unstable(x, PHASE_N, &reason)) n_flagged++;
  }
  printf("white noise flagged: %d/100\n", n_flagged);
  SL_ASSERT_LE_INT(n_flagged, 10);

  /* A constant phase (a deterministic benchmark) is stable. */
  double c[PHASE_N];
  for (int i = 0; i < PHASE_N; i++) c[i] = 42.0;
  unsigned reason = 99;
  SL_ASSERT_TRUE(!sl_bench_phase_is_unstable(c, PHASE_N, &reason));
  SL_ASSERT_EQ_INT(reason, 0);
  SL_ASSERT_EQ_DBL(sl_bench_autocorr_lag1(c, PHASE_N), 0.0, 0);
  /* Too few samples: never flagged. */
  double d[] = {1, 2, 3, 4, 5};
  SL_ASSERT_TRUE(!sl_bench_phase_is_unstable(d, 5, &reason));
  /* A drift below the 0.5% floor is not flagged even when exact. */
  double f[PHASE_N];
  for (int i = 0; i < PHASE_N; i++) f[i] = 1000.0 + 0.1 * i; /* 0.29% */
  SL_ASSERT_TRUE(!(sl_bench_phase_is_unstable(f, PHASE_N, &reason) &&
                   (reason & SL_BENCH_UNSTABLE_TREND)));
}

/* ------------------------------------------------------------------ */
/* Histogram.                                                           */
/* ------------------------------------------------------------------ */

static sl_bench_hist_t hist_a, hist_b, hist_c;

static int cmp_i64(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return (a > b) - (a < b);
}

#define HIST_N 200000

/* Exact nearest-rank quantile of sorted v: rank ceil(q n), at least 1. */
static int64_t exact_quantile(const int64_t *v, size_t n, double q) {
  size_t rank = (size_t)ceil(q * (double)n);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return v[rank - 1];
}

static void check_hist_quantiles(int64_t *v, size_t n, const char *what) {
  sl_bench_hist_init(&hist_a);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    sl_bench_hist_record(&hist_a, v[i]);
    sum += (double)v[i];
  }
  qsort(v, n, sizeof(*v), cmp_i64);
  SL_ASSERT_EQ_INT(sl_bench_hist_count(&hist_a), n);
  SL_ASSERT_EQ_INT(sl_bench_hist_min(&hist_a), v[0]);
  SL_ASSERT_EQ_INT(sl_bench_hist_max(&hist_a), v[n - 1]);
  SL_ASSERT_EQ_DBL(sl_bench_hist_mean(&hist_a), sum / (double)n,
                   1e-9 * sum / (double)n);
  const double qs[] = {0,   0.001, 0.01, 0.1,  0.25,  0.5,    0.75,
                       0.9, 0.99,  0.999, 0.9999, 0.99999, 1};
  double worst = 0;
  for (size_t i = 0; i < ARRAY_LEN(qs); i++) {
    int64_t exact = exact_quantile(v, n, qs[i]);
    int64_t got = sl_bench_hist_quantile(&hist_a, qs[i]);
    double err = fabs((double)(got - exact)) / (double)(exact ? exact : 1);
    if (err > worst) worst = err;
    /* Documented: within 2^-(S+1) = 1/256 of the exact value, and exact
     * below 256 ns. */
    if (err > 1.0 / 256)
      SL_TEST_FAIL("%s q=%g: got %lld, exact %lld, rel error %.5f", what,
                   qs[i], (long long)got, (long long)exact, err);
    if (exact < 256) SL_ASSERT_EQ_INT(got, exact);
  }
  printf("%s: worst relative quantile error %.5f (bound %.5f)\n", what,
         worst, 1.0 / 256);
}

SL_TEST(hist_quantile_error_bound) {
  int64_t *v = malloc(HIST_N * sizeof(*v));
  SL_ASSERT_TRUE(v != NULL);
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, 99);

  /* Uniform over 1 ns .. 1 s. */
  for (size_t i = 0; i < HIST_N; i++)
    v[i] = 1 + (int64_t)sl_bench_rng_below(&rng, 1000000000);
  check_hist_quantiles(v, HIST_N, "uniform");

  /* Exponential with mean 50 us. */
  for (size_t i = 0; i < HIST_N; i++)
    v[i] = (int64_t)(-50000.0 * log(1.0 - sl_bench_rng_uniform(&rng)));
  check_hist_quantiles(v, HIST_N, "exponential");

  /* Log-normal: median 100 us, sigma 2 (tails from ns to minutes). */
  for (size_t i = 0; i < HIST_N; i++)
    v[i] = (int64_t)exp(log(1e5) + 2.0 * sl_bench_rng_normal(&rng));
  check_hist_quantiles(v, HIST_N, "log-normal");

  /* Small values are exact. */
  for (size_t i = 0; i < HIST_N; i++)
    v[i] = (int64_t)sl_bench_rng_below(&rng, 300);
  check_hist_quantiles(v, HIST_N, "small");
  free(v);
}

SL_TEST(hist_bucket_layout) {
  /* Every value lies in its bucket, the bucket is at most 1/128 of its
   * lower bound wide, and indices increase with the value. */
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, 5);
  size_t prev_idx = 0;
  int64_t prev_v = -1;
  for (int b = 0; b < 63; b++) {
    int64_t base = (int64_t)1 << b;
    int64_t vs[] = {base - 1, base, base + 1,
                    base + (int64_t)(sl_bench_rng_next(&rng) % (uint64_t)base)};
    for (size_t j = 0; j < ARRAY_LEN(vs); j++) {
      int64_t v = vs[j];
      size_t idx = sl_bench_hist_index(v);
      SL_ASSERT_TRUE(idx < SL_BENCH_HIST_N_BUCKETS);
      int64_t lo, hi;
      sl_bench_hist_bucket_range(idx, &lo, &hi);
      SL_ASSERT_TRUE(lo <= v && v <= hi);
      if (lo >= 256)
        SL_ASSERT_TRUE((double)(hi - lo + 1) <= (double)lo / 128.0);
      else
        SL_ASSERT_EQ_INT(lo, hi);
      if (v > prev_v) SL_ASSERT_TRUE(idx >= prev_idx);
      if (v > prev_v) {
        prev_idx = idx;
        prev_v = v;
      }
    }
  }
  SL_ASSERT_EQ_INT(sl_bench_hist_index(INT64_MAX), SL_BENCH_HIST_N_BUCKETS - 1);
  int64_t lo, hi;
  sl_bench_hist_bucket_range(SL_BENCH_HIST_N_BUCKETS - 1, &lo, &hi);
  SL_ASSERT_EQ_INT(hi, INT64_MAX);
  /* Consecutive buckets tile the range without gaps. */
  for (size_t i = 0; i + 1 < SL_BENCH_HIST_N_BUCKETS; i++) {
    int64_t lo2, hi2;
    sl_bench_hist_bucket_range(i, &lo, &hi);
    sl_bench_hist_bucket_range(i + 1, &lo2, &hi2);
    SL_ASSERT_EQ_INT(lo2, hi + 1);
  }

  /* An hour and more; negative values are clamped and counted. */
  sl_bench_hist_init(&hist_a);
  int64_t hour = 3600LL * 1000000000LL;
  sl_bench_hist_record(&hist_a, hour);
  sl_bench_hist_record(&hist_a, 24 * hour);
  sl_bench_hist_record(&hist_a, -5);
  sl_bench_hist_record_n(&hist_a, 7, 0);
  SL_ASSERT_EQ_INT(sl_bench_hist_count(&hist_a), 3);
  SL_ASSERT_EQ_INT(hist_a.n_clamped, 1);
  SL_ASSERT_EQ_INT(sl_bench_hist_min(&hist_a), 0);
  SL_ASSERT_EQ_INT(sl_bench_hist_max(&hist_a), 24 * hour);
  int64_t p50 = sl_bench_hist_quantile(&hist_a, 0.5);
  SL_ASSERT_TRUE(fabs((double)(p50 - hour)) <= (double)hour / 256);
  sl_bench_hist_reset(&hist_a);
  SL_ASSERT_EQ_INT(sl_bench_hist_count(&hist_a), 0);
  SL_ASSERT_EQ_INT(sl_bench_hist_quantile(&hist_a, 0.5), 0);
  SL_ASSERT_TRUE(isnan(sl_bench_hist_mean(&hist_a)));
}

SL_TEST(hist_merge_and_export) {
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, 17);
  sl_bench_hist_init(&hist_a);
  sl_bench_hist_init(&hist_b);
  sl_bench_hist_init(&hist_c);
  for (int i = 0; i < 50000; i++) {
    int64_t v = (int64_t)exp(log(2e4) + 1.5 * sl_bench_rng_normal(&rng));
    /* Give the two halves different extremes. */
    if (i == 100) v = 3;
    if (i == 200) v = 90000000000LL;
    sl_bench_hist_record(&hist_c, v);
    sl_bench_hist_record(i % 3 ? &hist_a : &hist_b, v);
  }
  sl_bench_hist_record_n(&hist_b, 12345, 10);
  sl_bench_hist_record_n(&hist_c, 12345, 10);
  sl_bench_hist_t *m = calloc(1, sizeof(*m));
  SL_ASSERT_TRUE(m != NULL);
  sl_bench_hist_init(m);
  sl_bench_hist_merge(m, &hist_a); /* into an empty histogram */
  SL_ASSERT_EQ_INT(sl_bench_hist_min(m), sl_bench_hist_min(&hist_a));
  sl_bench_hist_merge(m, &hist_b);
  SL_ASSERT_EQ_INT(sl_bench_hist_count(m), sl_bench_hist_count(&hist_c));
  SL_ASSERT_EQ_INT(sl_bench_hist_min(m), 3);
  SL_ASSERT_EQ_INT(sl_bench_hist_max(m), 90000000000LL);
  SL_ASSERT_EQ_INT(memcmp(m->buckets, hist_c.buckets, sizeof(m->buckets)), 0);
  SL_ASSERT_EQ_DBL(sl_bench_hist_mean(m), sl_bench_hist_mean(&hist_c),
                   1e-9 * sl_bench_hist_mean(&hist_c));
  const double qs[] = {0.01, 0.5, 0.99, 0.999};
  for (size_t i = 0; i < ARRAY_LEN(qs); i++)
    SL_ASSERT_EQ_INT(sl_bench_hist_quantile(m, qs[i]),
                     sl_bench_hist_quantile(&hist_c, qs[i]));

  /* Export: ascending non-empty buckets whose counts sum to the total. */
  size_t n = 0;
  SL_ASSERT_EQ_INT(sl_bench_hist_export(m, NULL, NULL, NULL, 0, &n),
                   SL_EOVERFLOW);
  SL_ASSERT_TRUE(n > 100);
  int64_t *lo = malloc(n * sizeof(*lo)), *hi = malloc(n * sizeof(*hi));
  uint64_t *cnt = malloc(n * sizeof(*cnt));
  size_t n2 = 0;
  SL_ASSERT_OK(sl_bench_hist_export(m, lo, hi, cnt, n, &n2));
  SL_ASSERT_EQ_INT(n2, n);
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    SL_ASSERT_TRUE(cnt[i] > 0);
    SL_ASSERT_TRUE(lo[i] <= hi[i]);
    if (i > 0) SL_ASSERT_TRUE(lo[i] > hi[i - 1]);
    total += cnt[i];
  }
  SL_ASSERT_EQ_INT(total, sl_bench_hist_count(m));
  SL_ASSERT_EQ_INT(lo[0], 3);

  /* JSON round trip through jansson. */
  char path[4200];
  snprintf(path, sizeof(path), "%s/hist.json", sl_test_dir());
  FILE *f = fopen(path, "w");
  SL_ASSERT_TRUE(f != NULL);
  SL_ASSERT_OK(sl_bench_hist_write_json(m, f));
  fclose(f);
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (root == NULL) SL_TEST_FAIL("bad json: %s", jerr.text);
  SL_ASSERT_EQ_INT(json_integer_value(json_object_get(root, "count")),
                   sl_bench_hist_count(m));
  SL_ASSERT_EQ_INT(json_integer_value(json_object_get(root, "max")),
                   90000000000LL);
  json_t *b = json_object_get(root, "buckets");
  SL_ASSERT_EQ_INT(json_array_size(json_object_get(b, "count")), n);
  SL_ASSERT_EQ_INT(
      json_integer_value(json_array_get(json_object_get(b, "hi"), n - 1)),
      hi[n - 1]);
  json_decref(root);
  free(lo);
  free(hi);
  free(cnt);
  free(m);
}

/* ------------------------------------------------------------------ */
/* Harness.                                                             */
/* ------------------------------------------------------------------ */

/* Deterministic pseudo-noise in [-1, 1) from (fork, iteration). */
static double noise(int fork, int iteration) {
  uint64_t st = (uint64_t)fork * 100003u + (uint64_t)iteration;
  return (double)(sl_bench_splitmix64(&st) >> 11) * 0x1.0p-52 - 1.0;
}

/* Fork f yields 1000 (f + 1) + noise; warm-up yields 1e9 so that any
 * leak of warm-up data into the statistics is obvious. */
static int iter_det(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  int *n_setup = ctx->state;
  if (n_setup == NULL || *n_setup != 1) return -1; /* setup must have run */
  if (ctx->is_warmup)
    *out_value = 1e9;
  else
    *out_value = 1000.0 * (ctx->fork + 1) + noise(ctx->fork, ctx->iteration);
  return 0;
}

static int n_setup_calls;
static int setup_det(void *arg, sl_bench_ctx_t *ctx) {
  n_setup_calls++;
  ctx->state = &n_setup_calls;
  return 0;
}

static void init_opts(sl_bench_opts_t *o, int forks, int warm, int iters) {
  sl_bench_opts_init(o);
  o->name = "test";
  o->unit = "widgets/s";
  o->n_forks = forks;
  o->n_warmup = warm;
  o->n_iterations = iters;
  o->fork_timeout_sec = 60;
}

SL_TEST(harness_fork_means) {
  sl_bench_opts_t o;
  init_opts(&o, 5, 3, 12);
  char path[4200];
  snprintf(path, sizeof(path), "%s/run.json", sl_test_dir());
  o.json_path = path;
  char *text = NULL;
  size_t text_len = 0;
  FILE *sf = open_memstream(&text, &text_len);
  SL_ASSERT_TRUE(sf != NULL);
  o.summary = sf;
  sl_bench_fn_t fn = {.setup = setup_det, .iter = iter_det};
  sl_bench_result_t *res = NULL;
  SL_ASSERT_OK(sl_bench_run(&o, &fn, &res));
  fclose(sf);
  /* Setup ran in the children only. */
  SL_ASSERT_EQ_INT(n_setup_calls, 0);
  SL_ASSERT_EQ_INT(res->n_forks, 5);
  SL_ASSERT_EQ_INT(res->n_ok, 5);
  SL_ASSERT_EQ_INT(res->n_failed, 0);
  double expect[5];
  for (int f = 0; f < 5; f++) {
    double sum = 0;
    for (int i = 3; i < 15; i++) sum += 1000.0 * (f + 1) + noise(f, i);
    expect[f] = sum / 12;
    const sl_bench_fork_t *fk = &res->forks[f];
    SL_ASSERT_TRUE(fk->is_ok);
    SL_ASSERT_EQ_INT(fk->exit_code, 0);
    SL_ASSERT_EQ_INT(fk->n_values, 15);
    SL_ASSERT_EQ_DBL(fk->values[0], 1e9, 0);
    /* %.17g round-trips, so the values are bit-exact. */
    SL_ASSERT_EQ_DBL(fk->values[3], 1000.0 * (f + 1) + noise(f, 3), 0);
    SL_ASSERT_EQ_DBL(fk->mean, expect[f], 1e-9);
    SL_ASSERT_TRUE(fk->pid > 0 && fk->pid != (long)getpid());
  }
  sl_bench_interval_t ci;
  SL_ASSERT_OK(sl_bench_t_interval(expect, 5, 0.95, &ci));
  SL_ASSERT_EQ_DBL(res->mean_ci.estimate, ci.estimate, 1e-9);
  SL_ASSERT_EQ_DBL(res->mean_ci.lo, ci.lo, 1e-9);
  SL_ASSERT_EQ_DBL(res->mean_ci.hi, ci.hi, 1e-9);
  SL_ASSERT_EQ_DBL(res->median, expect[2], 1e-9);
  SL_ASSERT_EQ_DBL(res->min, expect[0], 1e-9);
  SL_ASSERT_EQ_DBL(res->max, expect[4], 1e-9);
  SL_ASSERT_TRUE(strstr(text, "benchmark test") != NULL);
  SL_ASSERT_TRUE(strstr(text, "5 forks (5 ok, 0 failed)") != NULL);
  SL_ASSERT_TRUE(strstr(text, "widgets/s") != NULL);

  /* The JSON file holds the raw data, warm-up separate. */
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (root == NULL) SL_TEST_FAIL("bad json: %s", jerr.text);
  SL_ASSERT_EQ_STR(json_string_value(json_object_get(root, "format")),
                   "sluice-bench/1");
  json_t *r = json_object_get(root, "result");
  SL_ASSERT_TRUE(json_is_true(json_object_get(r, "larger_is_better")));
  json_t *f2 = json_array_get(json_object_get(r, "forks"), 2);
  SL_ASSERT_EQ_INT(json_array_size(json_object_get(f2, "warmup")), 3);
  json_t *meas = json_object_get(f2, "measurement");
  SL_ASSERT_EQ_INT(json_array_size(meas), 12);
  SL_ASSERT_EQ_DBL(json_real_value(json_array_get(meas, 4)),
                   3000.0 + noise(2, 7), 0);
  SL_ASSERT_EQ_DBL(
      json_real_value(json_object_get(json_object_get(r, "summary"), "mean")),
      ci.estimate, 1e-9);
  json_decref(root);
  sl_bench_result_destroy(res);
  free(text);

  /* Invalid options are rejected before anything is forked. */
  o.json_path = NULL;
  o.summary = NULL;
  o.n_iterations = 0;
  SL_ASSERT_EQ_INT(sl_bench_run(&o, &fn, &res), SL_EINVAL);
  init_opts(&o, 1, 0, 1);
  sl_bench_fn_t empty = {0};
  SL_ASSERT_EQ_INT(sl_bench_run(&o, &empty, &res), SL_EINVAL);
}

/* Fork 1 crashes (abort) at iteration 3; fork 3 reports an error. */
static int iter_crashy(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  if (ctx->fork == 1 && ctx->iteration == 3) abort();
  if (ctx->fork == 3 && ctx->iteration == 5) return -5;
  *out_value = 10.0 + noise(ctx->fork, ctx->iteration);
  return 0;
}

SL_TEST(harness_failed_fork) {
  sl_bench_opts_t o;
  init_opts(&o, 5, 2, 6);
  char *text = NULL;
  size_t text_len = 0;
  FILE *sf = open_memstream(&text, &text_len);
  o.summary = sf;
  sl_bench_fn_t fn = {.iter = iter_crashy};
  sl_bench_result_t *res = NULL;
  SL_ASSERT_OK(sl_bench_run(&o, &fn, &res));
  fclose(sf);
  SL_ASSERT_EQ_INT(res->n_ok, 3);
  SL_ASSERT_EQ_INT(res->n_failed, 2);

  const sl_bench_fork_t *crashed = &res->forks[1];
  SL_ASSERT_TRUE(!crashed->is_ok);
  SL_ASSERT_EQ_INT(crashed->term_signal, SIGABRT);
  SL_ASSERT_EQ_INT(crashed->exit_code, -1);
  SL_ASSERT_EQ_INT(crashed->n_values, 3); /* what it sent before dying */
  SL_ASSERT_TRUE(strstr(crashed->error, "killed by signal") != NULL);
  SL_ASSERT_TRUE(isnan(crashed->mean));

  const sl_bench_fork_t *errored = &res->forks[3];
  SL_ASSERT_TRUE(!errored->is_ok);
  SL_ASSERT_EQ_INT(errored->exit_code, SL_BENCH_EXIT_ITER);
  SL_ASSERT_TRUE(strstr(errored->error, "iteration 5 returned -5") != NULL);

  /* Statistics use the ok forks only. */
  double m[3] = {res->forks[0].mean, res->forks[2].mean, res->forks[4].mean};
  SL_ASSERT_EQ_DBL(res->mean_ci.estimate, sl_bench_mean(m, 3), 1e-12);
  SL_ASSERT_EQ_INT(res->mean_ci.n, 3);
  SL_ASSERT_TRUE(strstr(text, "FAILED: killed by signal") != NULL);
  SL_ASSERT_TRUE(strstr(text, "2 of 5 forks FAILED") != NULL);
  sl_bench_result_destroy(res);
  free(text);
}

static int iter_hang(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  if (ctx->fork == 0 && ctx->iteration == 1)
    for (;;) pause();
  *out_value = 1.0;
  return 0;
}

static int setup_fails(void *arg, sl_bench_ctx_t *ctx) {
  return ctx->fork == 1 ? 7 : 0;
}

SL_TEST(harness_timeout_and_setup_failure) {
  sl_bench_opts_t o;
  init_opts(&o, 2, 0, 3);
  o.fork_timeout_sec = 0.3;
  sl_bench_fn_t fn = {.setup = setup_fails, .iter = iter_hang};
  sl_bench_result_t *res = NULL;
  SL_ASSERT_OK(sl_bench_run(&o, &fn, &res));
  SL_ASSERT_EQ_INT(res->n_ok, 0);
  SL_ASSERT_TRUE(res->forks[0].is_timed_out);
  SL_ASSERT_EQ_INT(res->forks[0].term_signal, SIGKILL);
  SL_ASSERT_TRUE(strstr(res->forks[0].error, "timed out") != NULL);
  SL_ASSERT_EQ_INT(res->forks[1].exit_code, SL_BENCH_EXIT_SETUP);
  SL_ASSERT_TRUE(strstr(res->forks[1].error, "setup") != NULL);
  SL_ASSERT_TRUE(strstr(res->forks[1].error, "7") != NULL);
  SL_ASSERT_TRUE(isnan(res->median));
  SL_ASSERT_TRUE(!res->mean_ci.is_bounded);
  sl_bench_result_destroy(res);
}

/* A: 100 + f(seed); B: 120 + f(seed).  Equal seeds per pair make the
 * per-fork difference exactly 20. */
static int iter_ab(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  double base = *(const double *)arg;
  *out_value = base + (double)(ctx->seed % 1000) / 100.0 +
               0.1 * noise(ctx->fork, ctx->iteration);
  return 0;
}

SL_TEST(harness_compare_interleaved) {
  sl_bench_opts_t o;
  init_opts(&o, 6, 1, 5);
  o.n_resamples = 2000;
  char path[4200];
  snprintf(path, sizeof(path), "%s/cmp.json", sl_test_dir());
  o.json_path = path;
  char *text = NULL;
  size_t text_len = 0;
  FILE *sf = open_memstream(&text, &text_len);
  o.summary = sf;
  double base_a = 100, base_b = 120;
  sl_bench_fn_t a = {.iter = iter_ab, .arg = &base_a};
  sl_bench_fn_t b = {.iter = iter_ab, .arg = &base_b};
  sl_bench_cmp_t *cmp = NULL;
  SL_ASSERT_OK(sl_bench_compare(&o, &a, &b, &cmp));
  fclose(sf);
  SL_ASSERT_EQ_STR(cmp->order, "ABABABABABAB");
  SL_ASSERT_EQ_STR(cmp->baseline->label, "baseline");
  SL_ASSERT_EQ_STR(cmp->candidate->label, "candidate");
  for (int i = 0; i < 6; i++) {
    SL_ASSERT_EQ_INT(cmp->baseline->forks[i].seq, 2 * i);
    SL_ASSERT_EQ_INT(cmp->candidate->forks[i].seq, 2 * i + 1);
    SL_ASSERT_EQ_DBL(cmp->candidate->forks[i].mean -
                         cmp->baseline->forks[i].mean,
                     20.0, 1e-9);
  }
  double ratio =
      cmp->candidate->mean_ci.estimate / cmp->baseline->mean_ci.estimate;
  SL_ASSERT_OK(cmp->rc_bootstrap);
  SL_ASSERT_OK(cmp->rc_fieller);
  SL_ASSERT_EQ_DBL(cmp->ratio_bootstrap.estimate, ratio, 1e-12);
  SL_ASSERT_EQ_DBL(cmp->ratio_fieller.estimate, ratio, 1e-12);
  SL_ASSERT_TRUE(ratio > 1.15 && ratio < 1.21);
  SL_ASSERT_TRUE(cmp->ratio_bootstrap.lo > 1.0);
  SL_ASSERT_TRUE(cmp->ratio_fieller.lo > 1.0);
  SL_ASSERT_TRUE(cmp->ratio_fieller.lo < ratio &&
                 ratio < cmp->ratio_fieller.hi);
  SL_ASSERT_EQ_INT(cmp->verdict, 1);
  SL_ASSERT_TRUE(strstr(text, "verdict: candidate is BETTER") != NULL);

  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (root == NULL) SL_TEST_FAIL("bad json: %s", jerr.text);
  SL_ASSERT_EQ_STR(json_string_value(json_object_get(root, "kind")),
                   "compare");
  json_t *r = json_object_get(root, "ratio");
  SL_ASSERT_EQ_STR(json_string_value(json_object_get(r, "verdict")),
                   "better");
  SL_ASSERT_EQ_DBL(
      json_real_value(json_object_get(json_object_get(r, "fieller"), "lo")),
      cmp->ratio_fieller.lo, 0);
  json_decref(root);
  sl_bench_cmp_destroy(cmp);
  free(text);

  /* Smaller is better: the same data is a regression. */
  o.larger_is_better = false;
  o.json_path = NULL;
  o.summary = NULL;
  o.shuffle_pairs = true;
  SL_ASSERT_OK(sl_bench_compare(&o, &a, &b, &cmp));
  SL_ASSERT_EQ_INT(cmp->verdict, -1);
  /* Shuffled: each pair still holds one A and one B. */
  SL_ASSERT_EQ_INT(strlen(cmp->order), 12);
  for (int i = 0; i < 6; i++)
    SL_ASSERT_TRUE(cmp->order[2 * i] != cmp->order[2 * i + 1]);
  sl_bench_cmp_destroy(cmp);
}

SL_TEST(harness_external_command) {
  sl_bench_opts_t o;
  init_opts(&o, 3, 2, 4);
  o.unit = "ms";
  o.larger_is_better = false;
  /* Prints 10 fork + i for i in 0 .. W + I - 1, with a comment line. */
  char *const ok[] = {
      "sh", "-c",
      "echo '# hello'; i=0; n=$((SL_BENCH_WARMUP + SL_BENCH_ITERATIONS)); "
      "while [ $i -lt $n ]; do echo $((SL_BENCH_FORK * 10 + i)); "
      "i=$((i + 1)); done",
      NULL};
  sl_bench_result_t *res = NULL;
  SL_ASSERT_OK(sl_bench_run_cmd(&o, ok, &res));
  SL_ASSERT_EQ_INT(res->n_ok, 3);
  for (int f = 0; f < 3; f++) {
    /* Measured values 10 f + 2 .. 10 f + 5: mean 10 f + 3.5. */
    SL_ASSERT_EQ_DBL(res->forks[f].mean, 10.0 * f + 3.5, 1e-12);
    SL_ASSERT_EQ_INT(res->forks[f].n_values, 6);
  }
  SL_ASSERT_EQ_DBL(res->mean_ci.estimate, 13.5, 1e-12);
  sl_bench_result_destroy(res);

  /* Failures: exit status, bad output, wrong count, missing program. */
  char *const bad_exit[] = {"sh", "-c", "echo 1; exit 3", NULL};
  char *const bad_line[] = {"sh", "-c", "echo 1; echo 2; echo abc", NULL};
  char *const too_few[] = {"sh", "-c", "echo 1; echo 2", NULL};
  char *const missing[] = {"sl-bench-no-such-program-xyz", NULL};
  struct {
    char *const *argv;
    const char *msg;
  } cases[] = {
      {bad_exit, "exited with status 3"},
      {bad_line, "not a number: 'abc'"},
      {too_few, "produced 2 values, expected 6"},
      {missing, "command not found"},
  };
  init_opts(&o, 1, 2, 4);
  for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
    SL_ASSERT_OK(sl_bench_run_cmd(&o, cases[i].argv, &res));
    SL_ASSERT_EQ_INT(res->n_failed, 1);
    if (strstr(res->forks[0].error, cases[i].msg) == NULL)
      SL_TEST_FAIL("case %zu: error '%s' lacks '%s'", i, res->forks[0].error,
                   cases[i].msg);
    sl_bench_result_destroy(res);
  }

  /* A command that leaves a background process holding its stdout: the
   * runner must stop reading once the command itself has exited instead
   * of waiting for EOF (it would hit the timeout).  The sleeper writes its
   * pid so that we can clean it up. */
  char script[4400];
  snprintf(script, sizeof(script),
           "echo 1; echo 2; sleep 60 2>/dev/null </dev/null & "
           "echo $! > '%s/bg.pid'; exit 0",
           sl_test_dir());
  char *const daemon[] = {"sh", "-c", script, NULL};
  init_opts(&o, 1, 0, 2);
  o.fork_timeout_sec = 20;
  SL_ASSERT_OK(sl_bench_run_cmd(&o, daemon, &res));
  char pidpath[4200];
  snprintf(pidpath, sizeof(pidpath), "%s/bg.pid", sl_test_dir());
  char *pidtext = sl_test_read_file(pidpath, NULL);
  if (pidtext != NULL) {
    long bg = strtol(pidtext, NULL, 10);
    if (bg > 0) kill((pid_t)bg, SIGKILL);
    free(pidtext);
  }
  SL_ASSERT_TRUE(!res->forks[0].is_timed_out);
  SL_ASSERT_TRUE(res->forks[0].is_ok);
  SL_ASSERT_EQ_DBL(res->forks[0].mean, 1.5, 1e-12);
  sl_bench_result_destroy(res);

  /* A/B of two commands. */
  char *const slow[] = {"sh", "-c", "for i in 1 2 3 4 5 6; do echo 200; done",
                        NULL};
  char *const fast[] = {"sh", "-c", "for i in 1 2 3 4 5 6; do echo 150; done",
                        NULL};
  init_opts(&o, 3, 2, 4);
  o.larger_is_better = false;
  sl_bench_cmp_t *cmp = NULL;
  SL_ASSERT_OK(sl_bench_compare_cmd(&o, slow, fast, &cmp));
  SL_ASSERT_EQ_DBL(cmp->ratio_fieller.estimate, 0.75, 1e-12);
  SL_ASSERT_EQ_DBL(cmp->ratio_fieller.lo, 0.75, 1e-12);
  SL_ASSERT_EQ_INT(cmp->verdict, 1); /* smaller is better */
  sl_bench_cmp_destroy(cmp);
}
