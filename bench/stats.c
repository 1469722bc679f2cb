/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Statistics of the benchmark harness: seeded random numbers, descriptive
 * statistics, the Student-t distribution (through the regularized
 * incomplete beta function), t intervals, bootstrap and Fieller intervals of
 * a ratio of means, and the stability tests of a measurement phase.  The
 * interface and the threshold choices are documented in stats.h; the method
 * in bench/README.md.
 *
 * Memory comes from malloc rather than sl_malloc: the harness must not
 * depend on (or be perturbed by) the engine it measures, and sl_bench
 * does not link libsluice.
 */
#include "stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Random numbers.                                                      */
/* ------------------------------------------------------------------ */

uint64_t sl_bench_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void sl_bench_rng_seed(sl_bench_rng_t *rng, uint64_t seed) {
  uint64_t sm = seed;
  for (int i = 0; i < 4; i++) rng->s[i] = sl_bench_splitmix64(&sm);
}

static inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t sl_bench_rng_next(sl_bench_rng_t *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double sl_bench_rng_uniform(sl_bench_rng_t *rng) {
  return (double)(sl_bench_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint64_t sl_bench_rng_below(sl_bench_rng_t *rng, uint64_t n) {
  /* Reject the top partial copy of [0, n) so that every value is equally
   * likely; at most half the draws are rejected, usually almost none. */
  uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  uint64_t r;
  do {
    r = sl_bench_rng_next(rng);
  } while (r >= limit);
  return r % n;
}

double sl_bench_rng_normal(sl_bench_rng_t *rng) {
  double u, v, s;
  do {
    u = 2.0 * sl_bench_rng_uniform(rng) - 1.0;
    v = 2.0 * sl_bench_rng_uniform(rng) - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  /* The second deviate v * f is discarded to keep the state in the struct
   * simple; speed does not matter here. */
  return u * sqrt(-2.0 * log(s) / s);
}

/* ------------------------------------------------------------------ */
/* Descriptive statistics.                                              */
/* ------------------------------------------------------------------ */

double sl_bench_mean(const double *x, size_t n) {
  if (n == 0) return NAN;
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) sum += x[i];
  return sum / (double)n;
}

double sl_bench_variance(const double *x, size_t n) {
  if (n < 2) return NAN;
  double m = sl_bench_mean(x, n);
  double ss = 0.0, comp = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = x[i] - m;
    ss += d * d;
    comp += d;
  }
  /* Corrected two-pass formula (Chan, Golub and LeVeque): comp is the
   * rounding error left in the mean. */
  return (ss - comp * comp / (double)n) / (double)(n - 1);
}

double sl_bench_stddev(const double *x, size_t n) {
  double v = sl_bench_variance(x, n);
  return v > 0.0 ? sqrt(v) : (v == 0.0 ? 0.0 : v);
}

double sl_bench_min(const double *x, size_t n) {
  if (n == 0) return NAN;
  double m = x[0];
  for (size_t i = 1; i < n; i++)
    if (x[i] < m) m = x[i];
  return m;
}

double sl_bench_max(const double *x, size_t n) {
  if (n == 0) return NAN;
  double m = x[0];
  for (size_t i = 1; i < n; i++)
    if (x[i] > m) m = x[i];
  return m;
}

static int cmp_double(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

void sl_bench_sort(double *x, size_t n) {
  if (n > 1) qsort(x, n, sizeof(*x), cmp_double);
}

double sl_bench_quantile_sorted(const double *sorted, size_t n, double q) {
  if (n == 0 || !(q >= 0.0 && q <= 1.0)) return NAN;
  double h = (double)(n - 1) * q;
  size_t lo = (size_t)floor(h);
  if (lo >= n - 1) return sorted[n - 1];
  double frac = h - (double)lo;
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

int sl_bench_quantile(const double *x, size_t n, double q, double *out_q) {
  if (n == 0 || !(q >= 0.0 && q <= 1.0)) return SL_EINVAL;
  double *tmp = malloc(n * sizeof(*tmp));
  if (tmp == NULL) return SL_ENOMEM;
  memcpy(tmp, x, n * sizeof(*tmp));
  sl_bench_sort(tmp, n);
  *out_q = sl_bench_quantile_sorted(tmp, n, q);
  free(tmp);
  return SL_OK;
}

int sl_bench_median(const double *x, size_t n, double *out_median) {
  return sl_bench_quantile(x, n, 0.5, out_median);
}

/* ------------------------------------------------------------------ */
/* Distributions.                                                       */
/* ------------------------------------------------------------------ */

/*
 * Continued fraction for I_x(a, b), evaluated by the modified Lentz method
 * (Numerical Recipes in C, 2nd ed., section 6.4, betacf).  It converges
 * quickly for x < (a + 1) / (a + b + 2); the caller uses the symmetry
 * otherwise.  y is 1 - x, passed separately so that it keeps full relative
 * precision when x is close to 1 (the t CDF computes both from t
 * directly).
 */
static double incbeta_cf(double a, double b, double x, double y) {
  const int max_iter = 20000;
  const double eps = 1e-16, tiny = 1e-300;
  double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0, d = 1.0 - qab * x / qap;
  if (fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= max_iter; m++) {
    double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (fabs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1.0) < eps) break;
  }
  /* Front factor x^a y^b / (a B(a, b)), in logs to avoid overflow. */
  double lfront = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) +
                  b * log(y);
  return exp(lfront) * h / a;
}

/* I_x(a, b) with y = 1 - x given separately (see incbeta_cf). */
static double incbeta2(double a, double b, double x, double y) {
  if (x <= 0.0) return 0.0;
  if (y <= 0.0) return 1.0;
  if (x < (a + 1.0) / (a + b + 2.0)) return incbeta_cf(a, b, x, y);
  return 1.0 - incbeta_cf(b, a, y, x);
}

double sl_bench_incbeta(double a, double b, double x) {
  if (!(a > 0.0) || !(b > 0.0) || !(x >= 0.0 && x <= 1.0)) return NAN;
  return incbeta2(a, b, x, 1.0 - x);
}

double sl_bench_normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

/*
 * Find t >= 0 with tail(t) = target, where tail is decreasing from 0.5 at
 * t = 0 to 0 at infinity.  Bracket by doubling, then bisect until the
 * bracket stops shrinking in double precision.  Bisection is slow (about
 * 60-110 evaluations) but cannot fail, and these are called a handful of
 * times per report.
 */
static double invert_tail(double (*tail)(double t, double df), double df,
                          double target) {
  double lo = 0.0, hi = 1.0;
  while (tail(hi, df) > target) {
    lo = hi;
    hi *= 2.0;
    if (hi > 1e300) return INFINITY;
  }
  for (int i = 0; i < 2000; i++) {
    double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (tail(mid, df) > target)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

/* Upper tail P(Z > z) for z >= 0 (df is unused). */
static double normal_tail(double z, double df) {
  (void)df;
  return 0.5 * erfc(z / sqrt(2.0));
}

/* Upper tail P(T > t) of Student-t for t >= 0:
 * 0.5 I_{df/(df+t^2)}(df/2, 1/2). */
static double t_tail(double t, double df) {
  double t2 = t * t;
  double x = df / (df + t2), y = t2 / (df + t2);
  return 0.5 * incbeta2(df / 2.0, 0.5, x, y);
}

double sl_bench_normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) return NAN;
  if (p == 0.5) return 0.0;
  double tail = p < 0.5 ? p : 1.0 - p;
  double z = invert_tail(normal_tail, 0.0, tail);
  return p < 0.5 ? -z : z;
}

double sl_bench_t_cdf(double t, double df) {
  if (!(df > 0.0) || isnan(t)) return NAN;
  if (df > 1e7) return sl_bench_normal_cdf(t);
  if (isinf(t)) return t > 0 ? 1.0 : 0.0;
  double tail = t_tail(fabs(t), df);
  return t >= 0.0 ? 1.0 - tail : tail;
}

double sl_bench_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || !(df > 0.0)) return NAN;
  if (df > 1e7) return sl_bench_normal_quantile(p);
  if (p == 0.5) return 0.0;
  /* Work with the smaller tail so that 1 - p never loses precision. */
  double tail = p < 0.5 ? p : 1.0 - p;
  double t = invert_tail(t_tail, df, tail);
  return p < 0.5 ? -t : t;
}

double sl_bench_t_critical(double confidence, double df) {
  if (!(confidence > 0.0 && confidence < 1.0)) return NAN;
  return sl_bench_t_quantile(0.5 + 0.5 * confidence, df);
}

/* ------------------------------------------------------------------ */
/* Intervals.                                                           */
/* ------------------------------------------------------------------ */

int sl_bench_t_interval(const double *x, size_t n, double confidence,
                        sl_bench_interval_t *out) {
  if (n < 2 || !(confidence > 0.0 && confidence < 1.0)) return SL_EINVAL;
  double m = sl_bench_mean(x, n);
  double se = sl_bench_stddev(x, n) / sqrt((double)n);
  double df = (double)(n - 1);
  double half = sl_bench_t_critical(confidence, df) * se;
  out->estimate = m;
  out->lo = m - half;
  out->hi = m + half;
  out->confidence = confidence;
  out->df = df;
  out->n = n;
  out->is_bounded = true;
  return SL_OK;
}

void sl_bench_boot_opts_init(sl_bench_boot_opts_t *o) {
  o->confidence = 0.95;
  o->n_resamples = 10000;
  o->seed = 1;
  o->is_expanded = true;
}

/*
 * Welch-Satterthwaite degrees of freedom of b - r a, where va and vb are
 * the squared standard errors of the group means:
 *   (vb + r^2 va)^2 / (vb^2 / (nb - 1) + r^4 va^2 / (na - 1)).
 * With both variances zero the df is irrelevant; return na + nb - 2.
 */
static double welch_df(double va, size_t na, double vb, size_t nb, double r) {
  double wa = r * r * va, wb = vb;
  double den = wa * wa / (double)(na - 1) + wb * wb / (double)(nb - 1);
  if (!(den > 0.0)) return (double)(na + nb - 2);
  return (wa + wb) * (wa + wb) / den;
}

int sl_bench_ratio_bootstrap(const double *base, size_t n_base,
                             const double *cand, size_t n_cand,
                             const sl_bench_boot_opts_t *opts,
                             sl_bench_interval_t *out) {
  sl_bench_boot_opts_t def;
  if (opts == NULL) {
    sl_bench_boot_opts_init(&def);
    opts = &def;
  }
  if (n_base < 2 || n_cand < 2 || opts->n_resamples < 100 ||
      !(opts->confidence > 0.0 && opts->confidence < 1.0))
    return SL_EINVAL;
  double ma = sl_bench_mean(base, n_base), mb = sl_bench_mean(cand, n_cand);
  if (!(ma > 0.0) || !isfinite(mb)) return SL_EINVAL;
  double r = mb / ma;

  double alpha = 1.0 - opts->confidence;
  double df = welch_df(sl_bench_variance(base, n_base) / (double)n_base,
                       n_base,
                       sl_bench_variance(cand, n_cand) / (double)n_cand,
                       n_cand, r);
  double tail = alpha / 2.0;
  if (opts->is_expanded) {
    size_t m = n_base < n_cand ? n_base : n_cand;
    double z = sqrt((double)m / (double)(m - 1)) *
               sl_bench_t_quantile(1.0 - alpha / 2.0, df);
    tail = sl_bench_normal_cdf(-z);
  }

  double *ratios = malloc(opts->n_resamples * sizeof(*ratios));
  if (ratios == NULL) return SL_ENOMEM;
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, opts->seed);
  size_t n_ok = 0;
  for (size_t k = 0; k < opts->n_resamples; k++) {
    double sa = 0.0, sb = 0.0;
    for (size_t i = 0; i < n_base; i++)
      sa += base[sl_bench_rng_below(&rng, n_base)];
    for (size_t i = 0; i < n_cand; i++)
      sb += cand[sl_bench_rng_below(&rng, n_cand)];
    /* A resample whose baseline mean is not positive has no meaningful
     * ratio; with positive data it cannot happen. */
    if (sa > 0.0)
      ratios[n_ok++] = (sb / (double)n_cand) / (sa / (double)n_base);
  }
  if (n_ok < opts->n_resamples / 2) {
    free(ratios);
    return SL_EINVAL;
  }
  sl_bench_sort(ratios, n_ok);
  out->estimate = r;
  out->lo = sl_bench_quantile_sorted(ratios, n_ok, tail);
  out->hi = sl_bench_quantile_sorted(ratios, n_ok, 1.0 - tail);
  out->confidence = opts->confidence;
  out->df = opts->is_expanded ? df : NAN;
  out->n = n_base + n_cand;
  out->is_bounded = true;
  free(ratios);
  return SL_OK;
}

int sl_bench_ratio_fieller(const double *base, size_t n_base,
                           const double *cand, size_t n_cand,
                           double confidence, sl_bench_interval_t *out) {
  if (n_base < 2 || n_cand < 2 || !(confidence > 0.0 && confidence < 1.0))
    return SL_EINVAL;
  double a = sl_bench_mean(base, n_base), b = sl_bench_mean(cand, n_cand);
  if (!(a != 0.0) || !isfinite(a) || !isfinite(b)) return SL_EINVAL;
  double va = sl_bench_variance(base, n_base) / (double)n_base;
  double vb = sl_bench_variance(cand, n_cand) / (double)n_cand;
  double r = b / a;
  double df = welch_df(va, n_base, vb, n_cand, r);
  double t = sl_bench_t_critical(confidence, df);
  double t2 = t * t;
  double g = t2 * va / (a * a);

  out->estimate = r;
  out->confidence = confidence;
  out->df = df;
  out->n = n_base + n_cand;
  if (g >= 1.0) {
    out->lo = -INFINITY;
    out->hi = INFINITY;
    out->is_bounded = false;
    return SL_OK;
  }
  double den = a * a - t2 * va;
  double disc = a * a * vb + b * b * va - t2 * va * vb;
  if (disc < 0.0) disc = 0.0; /* only by rounding: disc >= vb a^2 (1-g) */
  double root = t * sqrt(disc);
  double r1 = (a * b - root) / den, r2 = (a * b + root) / den;
  out->lo = r1 < r2 ? r1 : r2;
  out->hi = r1 < r2 ? r2 : r1;
  out->is_bounded = true;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Stability of a measurement phase.                                    */
/* ------------------------------------------------------------------ */

double sl_bench_autocorr_lag1(const double *x, size_t n) {
  if (n < 2) return NAN;
  double m = sl_bench_mean(x, n);
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = x[i] - m;
    den += d * d;
    if (i + 1 < n) num += d * (x[i + 1] - m);
  }
  if (!(den > 0.0)) return 0.0;
  return num / den;
}

int sl_bench_trend(const double *x, size_t n, sl_bench_trend_t *out) {
  if (n < 3) return SL_EINVAL;
  /* Regress on centred time so that the sums stay small. */
  double tbar = (double)(n - 1) / 2.0;
  double xbar = sl_bench_mean(x, n);
  double sxx = 0.0, sxy = 0.0;
  for (size_t i = 0; i < n; i++) {
    double dt = (double)i - tbar;
    sxx += dt * dt;
    sxy += dt * (x[i] - xbar);
  }
  double slope = sxy / sxx;
  double sse = 0.0;
  for (size_t i = 0; i < n; i++) {
    double e = x[i] - xbar - slope * ((double)i - tbar);
    sse += e * e;
  }
  double df = (double)(n - 2);
  double se = sqrt(sse / df / sxx);
  double t;
  /* An exact line: residuals are only rounding noise.  Compare against
   * the scale of the data rather than against zero. */
  double scale = fabs(xbar) + fabs(slope) * (double)n;
  if (se <= 1e-12 * scale || se == 0.0) {
    se = 0.0;
    t = slope == 0.0 ? 0.0 : (slope > 0.0 ? INFINITY : -INFINITY);
  } else {
    t = slope / se;
  }
  out->slope = slope;
  out->intercept = xbar - slope * tbar;
  out->se_slope = se;
  out->t = t;
  out->df = df;
  if (isinf(t))
    out->p_value = 0.0;
  else
    out->p_value = 2.0 * (1.0 - sl_bench_t_cdf(fabs(t), df));
  return SL_OK;
}

void sl_bench_stability_init(sl_bench_stability_t *s) {
  s->trend_alpha = 0.01;
  s->min_rel_drift = 0.005;
  s->autocorr_z = 2.0;
  s->autocorr_min = 0.3;
  s->min_samples = 8;
}

bool sl_bench_phase_is_unstable_ex(const double *x, size_t n,
                                   const sl_bench_stability_t *th,
                                   unsigned *out_reason) {
  unsigned reason = 0;
  if (n >= th->min_samples && n >= 3) {
    sl_bench_trend_t tr;
    if (sl_bench_trend(x, n, &tr) == SL_OK) {
      double drift = fabs(tr.slope) * (double)(n - 1);
      double floor_ = th->min_rel_drift * fabs(sl_bench_mean(x, n));
      if (tr.p_value < th->trend_alpha && drift >= floor_)
        reason |= SL_BENCH_UNSTABLE_TREND;
    }
    double r1 = sl_bench_autocorr_lag1(x, n);
    double bound = th->autocorr_z / sqrt((double)n);
    if (bound < th->autocorr_min) bound = th->autocorr_min;
    if (fabs(r1) > bound) reason |= SL_BENCH_UNSTABLE_AUTOCORR;
  }
  if (out_reason) *out_reason = reason;
  return reason != 0;
}

bool sl_bench_phase_is_unstable(const double *x, size_t n,
                                unsigned *out_reason) {
  sl_bench_stability_t th;
  sl_bench_stability_init(&th);
  return sl_bench_phase_is_unstable_ex(x, n, &th, out_reason);
}

const char *sl_bench_unstable_reason_str(unsigned reason) {
  switch (reason & (SL_BENCH_UNSTABLE_TREND | SL_BENCH_UNSTABLE_AUTOCORR)) {
  case 0:
    return "stable";
  case SL_BENCH_UNSTABLE_TREND:
    return "trend";
  case SL_BENCH_UNSTABLE_AUTOCORR:
    return "autocorrelation";
  default:
    return "trend+autocorrelation";
  }
}
