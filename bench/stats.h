/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Statistics for the benchmark harness: descriptive statistics, Student-t
 * critical values and intervals, the ratio of two means with a percentile
 * bootstrap interval and a Fieller interval, lag-1 autocorrelation, a
 * least-squares trend test, and the "is this measurement phase stable?"
 * flag.  All functions are pure (no I/O, no global state); the few that
 * need scratch memory say so and return SL_ENOMEM when it is unavailable.
 * The method is DESIGN.md section 9; see bench/README.md.
 */
#ifndef SL_BENCH_STATS_H
#define SL_BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Seeded random numbers.                                               */
/* ------------------------------------------------------------------ */

/*
 * xoshiro256** (Blackman and Vigna 2018), seeded through splitmix64.  The
 * whole state is in the struct, so a stream is reproducible given its seed
 * and no two callers share hidden state.
 */
typedef struct sl_bench_rng_s {
  uint64_t s[4];
} sl_bench_rng_t;

/** @brief Advance a splitmix64 state and return the next output.
 *  @thread any @locks none */
uint64_t sl_bench_splitmix64(uint64_t *state);
/** @brief Seed rng from one 64-bit value.  @thread any @locks none */
void sl_bench_rng_seed(sl_bench_rng_t *rng, uint64_t seed);
/** @brief Next 64 random bits.  @thread owner of rng @locks none */
uint64_t sl_bench_rng_next(sl_bench_rng_t *rng);
/** @brief Uniform double in [0, 1) with 53 random bits. */
double sl_bench_rng_uniform(sl_bench_rng_t *rng);
/** @brief Uniform integer in [0, n) without modulo bias; n > 0. */
uint64_t sl_bench_rng_below(sl_bench_rng_t *rng, uint64_t n);
/** @brief Standard normal deviate (Marsaglia polar method). */
double sl_bench_rng_normal(sl_bench_rng_t *rng);

/* ------------------------------------------------------------------ */
/* Descriptive statistics.                                              */
/* ------------------------------------------------------------------ */
/*
 * These return NaN when the statistic is undefined (n == 0, or n < 2 for
 * the variance).  @thread any @locks none
 */
double sl_bench_mean(const double *x, size_t n);
/** @brief Sample variance, divisor n - 1 (two-pass, for accuracy). */
double sl_bench_variance(const double *x, size_t n);
double sl_bench_stddev(const double *x, size_t n);
double sl_bench_min(const double *x, size_t n);
double sl_bench_max(const double *x, size_t n);

/** @brief Sort ascending in place (NaN is not allowed in x). */
void sl_bench_sort(double *x, size_t n);

/**
 * @brief Quantile q in [0, 1] of an ascending array, by linear interpolation
 * between order statistics (Hyndman and Fan type 7, the R and NumPy
 * default): h = (n - 1) q, result x[floor h] + (h - floor h) (x[floor h + 1]
 * - x[floor h]).  q = 0 gives the minimum and q = 1 the maximum.
 * @return the quantile, or NaN if n == 0 or q is outside [0, 1].
 */
double sl_bench_quantile_sorted(const double *sorted, size_t n, double q);

/**
 * @brief Quantile of an unsorted array (sorts a private copy).
 * @param[out] out_q written only on success.
 * @return SL_OK, SL_EINVAL (n == 0, q outside [0, 1]), SL_ENOMEM.
 */
int sl_bench_quantile(const double *x, size_t n, double q, double *out_q);
/** @brief Median, as sl_bench_quantile(x, n, 0.5, out_median). */
int sl_bench_median(const double *x, size_t n, double *out_median);

/* ------------------------------------------------------------------ */
/* Distributions.                                                       */
/* ------------------------------------------------------------------ */

/**
 * @brief Regularized incomplete beta function I_x(a, b), for a, b > 0 and
 * x in [0, 1], by the continued fraction of Numerical Recipes (modified
 * Lentz), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where that
 * converges faster.  Relative accuracy is about 1e-14.
 * @return NaN for invalid arguments.
 */
double sl_bench_incbeta(double a, double b, double x);

/** @brief Standard normal CDF.  */
double sl_bench_normal_cdf(double z);
/** @brief Standard normal quantile, p in (0, 1). */
double sl_bench_normal_quantile(double p);

/**
 * @brief Student-t CDF with df > 0 degrees of freedom (df need not be an
 * integer, so Welch-Satterthwaite degrees of freedom can be used).
 */
double sl_bench_t_cdf(double t, double df);

/**
 * @brief Student-t quantile: the t with P(T <= t) = p, p in (0, 1).  It
 * inverts the CDF, which is computed from the regularized incomplete beta
 * function, by bracketing and bisection to full double precision; for
 * df > 1e7 the normal quantile is used (they agree to about 1e-7).
 * @return the quantile, or NaN for invalid arguments.
 */
double sl_bench_t_quantile(double p, double df);

/**
 * @brief Two-sided critical value: t_{(1 + confidence) / 2, df}.  For
 * confidence 0.95: df 1 -> 12.706, 4 -> 2.776, 9 -> 2.262, 29 -> 2.045.
 */
double sl_bench_t_critical(double confidence, double df);

/* ------------------------------------------------------------------ */
/* Intervals.                                                           */
/* ------------------------------------------------------------------ */

/*
 * An estimate with a two-sided confidence interval.  is_bounded is false
 * when no finite interval exists (a Fieller interval whose denominator is
 * not significantly different from zero); lo and hi are then -inf and
 * +inf.  df is the degrees of freedom used for the t critical value (NaN
 * when none was used).
 */
typedef struct sl_bench_interval_s {
  double estimate;
  double lo;
  double hi;
  double confidence;
  double df;
  size_t n;
  bool is_bounded;
} sl_bench_interval_t;

/**
 * @brief Student-t interval of the mean: mean +- t_{(1+c)/2, n-1} s/sqrt(n).
 * @param[out] out written only on success.
 * @return SL_OK, SL_EINVAL (n < 2, confidence outside (0, 1)).
 */
int sl_bench_t_interval(const double *x, size_t n, double confidence,
                        sl_bench_interval_t *out);

/* Options of the bootstrap ratio interval.  See sl_bench_boot_opts_init. */
typedef struct sl_bench_boot_opts_s {
  double confidence;   /* two-sided, default 0.95 */
  size_t n_resamples;  /* default 10000 */
  uint64_t seed;       /* default 1; same seed, same interval */
  bool is_expanded;    /* default true: small-sample expansion, see below */
} sl_bench_boot_opts_t;

/** @brief Fill o with the defaults above.  @thread any @locks none */
void sl_bench_boot_opts_init(sl_bench_boot_opts_t *o);

/**
 * @brief Ratio mean(cand) / mean(base) with a percentile bootstrap
 * interval over the given per-fork values.
 *
 * Each resample draws n_base values from base and n_cand values from cand
 * with replacement (the two groups are independent forks) and computes the
 * ratio of the resampled means; the interval is the pair of empirical
 * quantiles alpha'/2 and 1 - alpha'/2 of the resampled ratios.
 *
 * With is_expanded false, alpha' = 1 - confidence: the plain percentile
 * interval.  With few forks that interval is too narrow (resampling shrinks
 * each group's variance by (n - 1)/n and it uses normal instead of t
 * quantiles); with 10 forks per side its coverage is about 92% instead of
 * 95%.  With is_expanded true (the default), alpha' is widened as in
 * Hesterberg's "expanded percentile interval" (Hesterberg 2015, "What
 * teachers should know about the bootstrap"):
 *
 *   alpha'/2 = Phi(-sqrt(m / (m - 1)) t_{1 - alpha/2, df})
 *
 * with m = min(n_base, n_cand) and df the Welch-Satterthwaite degrees of
 * freedom of mean(cand) - r mean(base) at the point estimate r (the same df
 * as the Fieller interval).  For equal group sizes the sqrt factor undoes
 * the variance shrinkage exactly; for unequal sizes using the smaller group
 * is conservative.
 *
 * Values should be positive (throughputs or times).  opts may be NULL for
 * the defaults.  Scratch memory of n_resamples doubles is allocated and
 * freed.
 * @param[out] out written only on success; out->n is n_base + n_cand.
 * @return SL_OK, SL_EINVAL (a group with fewer than 2 values, mean(base)
 *   <= 0, bad options), SL_ENOMEM.
 */
int sl_bench_ratio_bootstrap(const double *base, size_t n_base,
                             const double *cand, size_t n_cand,
                             const sl_bench_boot_opts_t *opts,
                             sl_bench_interval_t *out);

/**
 * @brief Ratio mean(cand) / mean(base) with Fieller's interval.
 *
 * With independent groups, a = mean(base), b = mean(cand), va and vb the
 * squared standard errors of those means, the interval is the set of r for
 * which (b - r a)^2 <= t^2 (vb + r^2 va), i.e. the roots of
 *
 *   r^2 (a^2 - t^2 va) - 2 r a b + (b^2 - t^2 vb) = 0,
 *
 *   r = [a b +- t sqrt(a^2 vb + b^2 va - t^2 va vb)] / (a^2 - t^2 va).
 *
 * t is the two-sided critical value with Welch-Satterthwaite degrees of
 * freedom of b - r a at the point estimate r = b / a.  When g = t^2 va / a^2
 * >= 1 the denominator is not significantly different from zero and the
 * set is unbounded: out->is_bounded is false.
 * @param[out] out written only on success.
 * @return SL_OK, SL_EINVAL (a group with fewer than 2 values, mean(base)
 *   == 0, confidence outside (0, 1)).
 */
int sl_bench_ratio_fieller(const double *base, size_t n_base,
                           const double *cand, size_t n_cand,
                           double confidence, sl_bench_interval_t *out);

/* ------------------------------------------------------------------ */
/* Independence and stationarity of a measurement phase.                */
/* ------------------------------------------------------------------ */

/**
 * @brief Lag-1 sample autocorrelation r1 = sum (x_t - m)(x_{t+1} - m) /
 * sum (x_t - m)^2.  Returns 0 for a constant series and NaN for n < 2.
 */
double sl_bench_autocorr_lag1(const double *x, size_t n);

/* Least-squares line x_t = intercept + slope t, t = 0 .. n-1. */
typedef struct sl_bench_trend_s {
  double slope;
  double intercept;
  double se_slope; /* standard error of the slope */
  double t;        /* slope / se_slope; +-inf for an exact non-flat line */
  double df;       /* n - 2 */
  double p_value;  /* two-sided, from Student-t with df */
} sl_bench_trend_t;

/**
 * @brief Fit the least-squares line and test slope == 0.
 * @param[out] out written only on success.
 * @return SL_OK, SL_EINVAL (n < 3).
 */
int sl_bench_trend(const double *x, size_t n, sl_bench_trend_t *out);

/* Reasons returned by sl_bench_phase_is_unstable (a bit set). */
#define SL_BENCH_UNSTABLE_TREND 0x1u    /* still drifting up or down */
#define SL_BENCH_UNSTABLE_AUTOCORR 0x2u /* iterations not independent */

/*
 * Thresholds of the stability flag.  The defaults (sl_bench_stability_init)
 * and the reasons for them:
 *
 *  - trend_alpha = 0.01: the slope is "significant" when the two-sided
 *    p-value of its t-statistic is below 1%.  We test every fork of every
 *    benchmark, so 5% would flag one fork in twenty of a perfectly stable
 *    benchmark.
 *  - min_rel_drift = 0.005: and the fitted line moves by at least 0.5% of
 *    the phase mean from the first to the last iteration.  A drift that is
 *    statistically clear but smaller than this is below what we care to
 *    resolve and far below typical fork-to-fork variation.
 *  - autocorr_z = 2 and autocorr_min = 0.3: |r1| must exceed both
 *    autocorr_z / sqrt(n), the approximate 95% bound of r1 for white noise
 *    (Bartlett), and 0.3, a practical floor: with many iterations a tiny
 *    but real correlation would otherwise always fire, and below 0.3 the
 *    variance of a mean is inflated by less than (1 + r)/(1 - r) ~ 1.9x.
 *  - min_samples = 8: below this nothing is flagged; the tests have no
 *    power and the caller should use more iterations.
 *
 * With the defaults, simulated white noise is flagged in about 2% of
 * phases of 8 iterations, 4.5% of 30 (1% trend, 3.6% autocorrelation), and
 * 1% of 100 or more (the 0.3 floor then dominates the 2/sqrt(n) bound).
 */
typedef struct sl_bench_stability_s {
  double trend_alpha;
  double min_rel_drift;
  double autocorr_z;
  double autocorr_min;
  size_t min_samples;
} sl_bench_stability_t;

/** @brief Fill s with the defaults above.  @thread any @locks none */
void sl_bench_stability_init(sl_bench_stability_t *s);

/**
 * @brief Does the measurement phase x[0..n) still trend, or are its
 * iterations strongly autocorrelated?  Uses the default thresholds.
 * @param[out] out_reason may be NULL; set to a bit set of
 *   SL_BENCH_UNSTABLE_* (0 when stable).  Always written.
 * @return true when unstable.
 */
bool sl_bench_phase_is_unstable(const double *x, size_t n,
                                unsigned *out_reason);
/** @brief As sl_bench_phase_is_unstable with explicit thresholds. */
bool sl_bench_phase_is_unstable_ex(const double *x, size_t n,
                                   const sl_bench_stability_t *th,
                                   unsigned *out_reason);

/** @brief "stable", "trend", "autocorrelation" or "trend+autocorrelation". */
const char *sl_bench_unstable_reason_str(unsigned reason);

#ifdef __cplusplus
}
#endif
#endif
