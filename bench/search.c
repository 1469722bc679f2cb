/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sustainable-throughput search: a slope test that decides from one
 * fixed-rate trial's time series whether the backlog or the latency keeps
 * growing, and a search over offered rates (step down, bisect, confirm)
 * that finds the highest rate passing it.  Pure computation apart from the
 * trial callbacks and the CSV and summary writers.  Memory comes from
 * malloc, as in stats.c: sl_bench must not depend on the engine's
 * allocator.  See bench/README.md, section "Sustainable throughput".
 */
#include "search.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Least-squares slope against time.                                    */
/* ------------------------------------------------------------------ */

int sl_bench_trend_xy(const double *x, const double *y, size_t n,
                      sl_bench_trend_xy_t *out) {
  if (n < 3) return SL_EINVAL;
  double xbar = 0.0, ybar = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i])) return SL_EINVAL;
    xbar += x[i];
    ybar += y[i];
  }
  xbar /= (double)n;
  ybar /= (double)n;
  /* Centred sums, so that large times or counts lose no precision. */
  double sxx = 0.0, sxy = 0.0, syy = 0.0;
  for (size_t i = 0; i < n; i++) {
    double dx = x[i] - xbar, dy = y[i] - ybar;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (!(sxx > 0.0)) return SL_EINVAL;
  double slope = sxy / sxx;
  double sse = 0.0, lag = 0.0, prev = 0.0;
  for (size_t i = 0; i < n; i++) {
    double e = y[i] - ybar - slope * (x[i] - xbar);
    sse += e * e;
    if (i > 0) lag += prev * e;
    prev = e;
  }
  double df = (double)(n - 2);
  double se = sqrt(sse / df / sxx);
  double r1 = 0.0;
  /* An exact line leaves only rounding noise in the residuals: report a
   * zero standard error rather than a meaningless one. */
  if (sse <= 1e-24 * (syy + ybar * ybar * (double)n) || sse == 0.0) {
    se = 0.0;
  } else {
    r1 = lag / sse;
  }
  out->slope = slope;
  out->intercept = ybar - slope * xbar;
  out->se_slope = se;
  out->df = df;
  out->r1 = r1;
  out->n = n;
  return SL_OK;
}

static int cmp_double(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return (a > b) - (a < b);
}

/*
 * Theil-Sen slope: the median of (y_j - y_i) / (x_j - x_i) over all pairs
 * i < j.  Its breakdown point is 29%: that many samples can be moved
 * arbitrarily far (checkpoint bumps) before the median follows them.  For
 * long windows (n > 1024) the n^2/2 pairs would need too much scratch
 * space, so only the pairs (i, i + n/2) are used; their median is still
 * robust, with a breakdown point of 25%.
 */
static int theil_sen(const double *x, const double *y, size_t n,
                     double *out_slope) {
  size_t cap = n <= 1024 ? n * (n - 1) / 2 : n / 2;
  double *s = malloc(cap * sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  size_t k = 0;
  if (n <= 1024) {
    for (size_t i = 0; i < n; i++)
      for (size_t j = i + 1; j < n; j++)
        if (x[j] > x[i]) s[k++] = (y[j] - y[i]) / (x[j] - x[i]);
  } else {
    for (size_t i = 0; i + n / 2 < n; i++) {
      size_t j = i + n / 2;
      if (x[j] > x[i]) s[k++] = (y[j] - y[i]) / (x[j] - x[i]);
    }
  }
  if (k == 0) {
    free(s);
    return SL_EINVAL;
  }
  qsort(s, k, sizeof(*s), cmp_double);
  *out_slope = sl_bench_quantile_sorted(s, k, 0.5);
  free(s);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The slope test.                                                      */
/* ------------------------------------------------------------------ */

void sl_bench_slope_opts_init(sl_bench_slope_opts_t *o) {
  o->warmup_s = 10.0;
  o->confidence = 0.95;
  o->backlog_rel_slope = 0.01;
  o->latency_slope_ms = 2.0;
  o->max_r1 = 0.5;
  o->is_robust = true;
  o->max_window_shortfall = 0.10;
  o->min_generated_ratio = 0.99;
  o->min_samples = 10;
  o->max_end_backlog_s = 0.0;
  o->max_generator_lag_s = 0.1;
}

static void slope_untested(sl_bench_slope_t *s, size_t n, double threshold) {
  s->is_tested = false;
  s->is_growing = false;
  s->n = n;
  s->slope = s->lo = s->hi = NAN;
  s->se = s->df = s->r1 = NAN;
  s->robust_slope = NAN;
  s->threshold = threshold;
}

/*
 * Test one series (x = time, y = value, both finite, n values) for growth.
 *
 * The interval is the least-squares slope +- t s_b.  Residuals of a
 * measured series are rarely independent: a checkpoint pause raises the
 * backlog for the next few samples while it drains.  Positive lag-1
 * autocorrelation r makes the ordinary interval too narrow, so, following
 * Santer et al. (2000), the residual variance is divided by n_eff - 2
 * instead of n - 2, with n_eff = n (1 - r) / (1 + r), and the critical
 * value uses n_eff - 2 degrees of freedom.  r is clamped to [0, max_r1]:
 * a negative r would narrow the interval on the strength of a noisy
 * estimate, and a large one comes as much from lack of fit (a series that
 * is flat, then grows) as from noise, where a collapsing n_eff would hide
 * real growth.
 *
 * The series grows when lo > 0 (significant), slope > threshold (relevant)
 * and, with is_robust, the Theil-Sen slope > threshold too (not the work
 * of a few outlying samples).
 */
static int slope_test(const double *x, const double *y, size_t n,
                      double threshold, const sl_bench_slope_opts_t *o,
                      sl_bench_slope_t *out) {
  if (n < o->min_samples || n < 3) {
    slope_untested(out, n, threshold);
    return SL_OK;
  }
  sl_bench_trend_xy_t tr;
  int rc = sl_bench_trend_xy(x, y, n, &tr);
  if (rc != SL_OK) {
    slope_untested(out, n, threshold);
    return SL_OK; /* all times equal cannot happen: checked by caller */
  }
  double rho = tr.r1;
  if (!(rho > 0.0)) rho = 0.0;
  if (rho > o->max_r1) rho = o->max_r1;
  double n_eff = (double)n * (1.0 - rho) / (1.0 + rho);
  double df = n_eff - 2.0;
  if (df < 1.0) df = 1.0;
  double se = tr.se_slope * sqrt(tr.df / df);
  double half = se > 0.0 ? sl_bench_t_critical(o->confidence, df) * se : 0.0;
  out->is_tested = true;
  out->n = n;
  out->slope = tr.slope;
  out->lo = tr.slope - half;
  out->hi = tr.slope + half;
  out->se = se;
  out->df = df;
  out->r1 = tr.r1;
  out->threshold = threshold;
  out->robust_slope = NAN;
  bool is_growing = out->lo > 0.0 && tr.slope > threshold;
  if (o->is_robust) {
    rc = theil_sen(x, y, n, &out->robust_slope);
    if (rc != SL_OK) return rc;
    if (!(out->robust_slope > threshold)) is_growing = false;
  }
  out->is_growing = is_growing;
  return SL_OK;
}

const char *sl_bench_unsust_str(unsigned reasons, char *buf, size_t len) {
  static const struct {
    unsigned bit;
    const char *name;
  } names[] = {{SL_BENCH_UNSUST_OVERFLOW, "overflow"},
               {SL_BENCH_UNSUST_FAILED, "failed"},
               {SL_BENCH_UNSUST_SAMPLES, "samples"},
               {SL_BENCH_UNSUST_BACKLOG, "backlog"},
               {SL_BENCH_UNSUST_LATENCY, "latency"},
               {SL_BENCH_UNSUST_SHORTFALL, "shortfall"},
               {SL_BENCH_UNSUST_GENERATOR, "generator"}};
  if (len == 0) return buf;
  buf[0] = '\0';
  if (reasons == 0) {
    snprintf(buf, len, "sustainable");
    return buf;
  }
  size_t used = 0;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (!(reasons & names[i].bit)) continue;
    int w = snprintf(buf + used, len - used, "%s%s", used ? "+" : "",
                     names[i].name);
    if (w < 0 || (size_t)w >= len - used) break;
    used += (size_t)w;
  }
  return buf;
}

/* Append to the verdict's reason, "; "-separated; never overflows.  The
 * reason contains no commas, so that CSV readers that ignore quotes
 * (gnuplot) still see the same columns. */
static void reason_add(sl_bench_verdict_t *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reason_add(sl_bench_verdict_t *v, const char *fmt, ...) {
  size_t used = strlen(v->reason);
  if (used + 1 >= sizeof(v->reason)) return;
  if (used > 0) {
    snprintf(v->reason + used, sizeof(v->reason) - used, "; ");
    used = strlen(v->reason);
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->reason + used, sizeof(v->reason) - used, fmt, ap);
  va_end(ap);
}

static bool opts_valid(const sl_bench_slope_opts_t *o) {
  return o->confidence > 0.0 && o->confidence < 1.0 &&
         o->backlog_rel_slope >= 0.0 && o->latency_slope_ms >= 0.0 &&
         o->max_r1 >= 0.0 && o->max_r1 < 1.0 &&
         o->max_window_shortfall >= 0.0 && o->max_window_shortfall <= 1.0 &&
         o->min_generated_ratio >= 0.0 && isfinite(o->warmup_s) &&
         o->max_generator_lag_s >= 0.0;
}

int sl_bench_sustainable(const sl_bench_trial_t *t,
                         const sl_bench_slope_opts_t *o,
                         sl_bench_verdict_t *out) {
  sl_bench_slope_opts_t def;
  if (o == NULL) {
    sl_bench_slope_opts_init(&def);
    o = &def;
  }
  if (!opts_valid(o) || t == NULL || (t->n_samples > 0 && !t->samples))
    return SL_EINVAL;
  for (size_t i = 1; i < t->n_samples; i++)
    if (!(t->samples[i].t_s > t->samples[i - 1].t_s)) return SL_EINVAL;

  /* The window: samples at or after warmup_s.  Scratch: x and y for one
   * series at a time. */
  size_t first = 0;
  while (first < t->n_samples && !(t->samples[first].t_s >= o->warmup_s))
    first++;
  const sl_bench_sample_t *w = t->samples + first;
  size_t nw = t->n_samples - first;
  double *x = malloc((nw > 0 ? nw : 1) * sizeof(*x));
  double *y = malloc((nw > 0 ? nw : 1) * sizeof(*y));
  if (x == NULL || y == NULL) {
    free(x);
    free(y);
    return SL_ENOMEM;
  }

  sl_bench_verdict_t v;
  memset(&v, 0, sizeof(v));
  v.n_window = nw;
  v.generated_rate = NAN;
  v.consumed_ratio = NAN;
  int rc = SL_OK;
  if (t->is_failed) {
    v.reasons |= SL_BENCH_UNSUST_FAILED;
    reason_add(&v, "trial failed: %s", t->error[0] ? t->error : "?");
  }
  if (t->is_overflow) {
    v.reasons |= SL_BENCH_UNSUST_OVERFLOW;
    reason_add(&v, "queue overflowed");
  }

  /* Backlog, in events; threshold relative to the offered rate. */
  size_t n = 0;
  for (size_t i = 0; i < nw; i++)
    if (isfinite(w[i].backlog)) {
      x[n] = w[i].t_s;
      y[n++] = w[i].backlog;
    }
  double thr_b = o->backlog_rel_slope * t->rate;
  rc = slope_test(x, y, n, thr_b, o, &v.backlog);
  if (rc != SL_OK) goto done;
  if (!v.backlog.is_tested) {
    v.reasons |= SL_BENCH_UNSUST_SAMPLES;
    reason_add(&v, "too few samples: %zu backlog values after %gs (need %zu)",
               n, o->warmup_s, o->min_samples);
  } else if (v.backlog.is_growing) {
    v.reasons |= SL_BENCH_UNSUST_BACKLOG;
    reason_add(&v, "backlog grows %.4g/s [%.4g; %.4g] > %.4g/s", v.backlog.slope,
               v.backlog.lo, v.backlog.hi, thr_b);
  }

  /* Latency, in ms; NaN samples (no output in the interval) skipped. */
  n = 0;
  for (size_t i = 0; i < nw; i++)
    if (isfinite(w[i].latency_ms)) {
      x[n] = w[i].t_s;
      y[n++] = w[i].latency_ms;
    }
  rc = slope_test(x, y, n, o->latency_slope_ms, o, &v.latency);
  if (rc != SL_OK) goto done;
  if (v.latency.is_growing) {
    v.reasons |= SL_BENCH_UNSUST_LATENCY;
    reason_add(&v, "latency grows %.4g ms/s [%.4g; %.4g] > %.4g ms/s",
               v.latency.slope, v.latency.lo, v.latency.hi,
               o->latency_slope_ms);
  }

  /* Throughput: generated and consumed counters, when the trial has them.
   * The generator's rate is the least-squares slope of its cumulative
   * count; the shortfall generated - consumed (everything in flight,
   * including queues inside the engine) is tested like the backlog. */
  n = 0;
  for (size_t i = 0; i < nw; i++)
    if (isfinite(w[i].generated) && isfinite(w[i].consumed)) {
      x[n] = w[i].t_s;
      y[n++] = w[i].generated;
    }
  slope_untested(&v.shortfall, n, thr_b);
  if (n >= o->min_samples && n >= 3 && y[n - 1] > y[0]) {
    sl_bench_trend_xy_t tg;
    if (sl_bench_trend_xy(x, y, n, &tg) == SL_OK) v.generated_rate = tg.slope;
    size_t i0 = 0, i1 = 0; /* first and last sample with both counters */
    bool is_first = true;
    n = 0;
    for (size_t i = 0; i < nw; i++)
      if (isfinite(w[i].generated) && isfinite(w[i].consumed)) {
        if (is_first) i0 = i;
        is_first = false;
        i1 = i;
        y[n++] = w[i].generated - w[i].consumed;
      }
    double dg = w[i1].generated - w[i0].generated;
    double dc = w[i1].consumed - w[i0].consumed;
    v.consumed_ratio = dc / dg;
    rc = slope_test(x, y, n, thr_b, o, &v.shortfall);
    if (rc != SL_OK) goto done;
    if (v.generated_rate < o->min_generated_ratio * t->rate) {
      v.reasons |= SL_BENCH_UNSUST_GENERATOR;
      reason_add(&v, "generator reached %.4g/s = %.1f%% of the offered rate",
                 v.generated_rate, 100.0 * v.generated_rate / t->rate);
    }
    if (v.shortfall.is_growing) {
      v.reasons |= SL_BENCH_UNSUST_SHORTFALL;
      reason_add(&v, "consumed lags generated by %.4g/s [%.4g; %.4g] > %.4g/s",
                 v.shortfall.slope, v.shortfall.lo, v.shortfall.hi, thr_b);
    } else if (v.consumed_ratio < 1.0 - o->max_window_shortfall) {
      v.reasons |= SL_BENCH_UNSUST_SHORTFALL;
      reason_add(&v, "consumed only %.1f%% of generated over the window",
                 100.0 * v.consumed_ratio);
    }
  }

  if (o->max_generator_lag_s > 0 && isfinite(t->max_generator_lag_s) &&
      t->max_generator_lag_s > o->max_generator_lag_s) {
    v.reasons |= SL_BENCH_UNSUST_GENERATOR;
    reason_add(&v, "generator fell %.3g s behind its schedule (limit %.3g s)",
               t->max_generator_lag_s, o->max_generator_lag_s);
  }
  if (o->max_end_backlog_s > 0 && nw > 0) {
    /* In flight at the end: the ring's backlog, or generated - consumed
     * when larger (that also holds what the engine queues inside and what
     * a lagging generator owes to its schedule). */
    const sl_bench_sample_t *e = &w[nw - 1];
    double inflight = isfinite(e->backlog) ? e->backlog : 0.0;
    if (isfinite(e->generated) && isfinite(e->consumed) &&
        e->generated - e->consumed > inflight)
      inflight = e->generated - e->consumed;
    if (inflight > o->max_end_backlog_s * t->rate) {
      v.reasons |= SL_BENCH_UNSUST_BACKLOG;
      reason_add(&v, "in flight at the end %.4g events = %.2f s of input > "
                 "%.2f s", inflight, inflight / t->rate,
                 o->max_end_backlog_s);
    }
  }
  v.is_sustainable = v.reasons == 0;
  if (v.is_sustainable) {
    reason_add(&v, "sustainable: backlog %+.4g/s (limit %.4g/s)",
               v.backlog.slope, thr_b);
    if (v.latency.is_tested)
      reason_add(&v, "latency %+.4g ms/s (limit %.4g ms/s)", v.latency.slope,
                 o->latency_slope_ms);
  }
  if (!v.latency.is_tested)
    reason_add(&v, "latency not tested: %zu values", v.latency.n);
  *out = v;
done:
  free(x);
  free(y);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The search.                                                          */
/* ------------------------------------------------------------------ */

void sl_bench_search_opts_init(sl_bench_search_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->start_rate = 0.0;
  o->up_factor = 2.0;
  o->max_up_trials = 12;
  o->down_factor = 0.85;
  o->resolution = 0.03;
  o->confirm_trials = 1;
  o->max_trials = 40;
  o->min_rate = 0.0;
  sl_bench_slope_opts_init(&o->slope);
  o->log = NULL;
}

const char *sl_bench_search_phase_str(sl_bench_search_phase_t p) {
  switch (p) {
  case SL_BENCH_PHASE_START: return "start";
  case SL_BENCH_PHASE_UP: return "up";
  case SL_BENCH_PHASE_DOWN: return "down";
  case SL_BENCH_PHASE_BISECT: return "bisect";
  case SL_BENCH_PHASE_CONFIRM: return "confirm";
  }
  return "?";
}

void sl_bench_search_result_close(sl_bench_search_result_t *r) {
  if (r == NULL) return;
  free(r->trials);
  r->trials = NULL;
  r->n_trials = 0;
}

/* The state of one search: the options, the callbacks and the result. */
typedef struct search_s {
  const sl_bench_search_opts_t *o;
  sl_bench_trial_fn fn;
  sl_bench_trial_release_fn rel;
  void *user;
  sl_bench_search_result_t *res;
  size_t cap;
} search_t;

/*
 * Run one trial, judge it and record it.  *out_ok is its verdict.
 * @return SL_OK, SL_ENOMEM, SL_EAGAIN (max_trials reached: nothing ran), or
 *   the trial fn's error.
 */
static int search_trial(search_t *s, double rate, sl_bench_search_phase_t ph,
                        bool *out_ok) {
  sl_bench_search_result_t *res = s->res;
  if (res->n_trials >= s->o->max_trials) return SL_EAGAIN;
  if (res->n_trials == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    sl_bench_search_trial_t *nt = realloc(res->trials, cap * sizeof(*nt));
    if (nt == NULL) return SL_ENOMEM;
    res->trials = nt;
    s->cap = cap;
  }
  sl_bench_trial_t t;
  memset(&t, 0, sizeof(t));
  t.rate = rate;
  t.p50_ms = t.p90_ms = t.p99_ms = t.p999_ms = t.max_ms = NAN;
  int rc = s->fn(s->user, rate, &t);
  if (rc != SL_OK) return rc;
  t.rate = rate; /* the verdict's thresholds refer to the offered rate */
  t.error[sizeof(t.error) - 1] = '\0';
  sl_bench_verdict_t v;
  rc = sl_bench_sustainable(&t, &s->o->slope, &v);
  sl_bench_search_trial_t *st = &res->trials[res->n_trials];
  memset(st, 0, sizeof(*st));
  st->index = res->n_trials + 1;
  st->rate = rate;
  st->phase = ph;
  st->is_overflow = t.is_overflow;
  st->is_failed = t.is_failed;
  st->p50_ms = t.p50_ms;
  st->p90_ms = t.p90_ms;
  st->p99_ms = t.p99_ms;
  st->p999_ms = t.p999_ms;
  st->max_ms = t.max_ms;
  st->n_samples = t.n_samples;
  if (s->rel) s->rel(s->user, &t);
  if (rc == SL_EINVAL) {
    /* Samples out of order: a broken trial, not a broken search. */
    memset(&v, 0, sizeof(v));
    v.reasons = SL_BENCH_UNSUST_FAILED;
    v.generated_rate = v.consumed_ratio = NAN;
    slope_untested(&v.backlog, 0, NAN);
    slope_untested(&v.latency, 0, NAN);
    slope_untested(&v.shortfall, 0, NAN);
    snprintf(v.reason, sizeof(v.reason), "samples not in time order");
    st->is_failed = true;
  } else if (rc != SL_OK) {
    return rc;
  }
  st->verdict = v;
  st->is_sustainable = v.is_sustainable;
  res->n_trials++;
  if (s->o->log) {
    fprintf(s->o->log, "trial %2zu %-7s rate %12.6g: %s\n", st->index,
            sl_bench_search_phase_str(ph), rate, v.reason);
    fflush(s->o->log);
  }
  *out_ok = v.is_sustainable;
  return SL_OK;
}

/* The highest rate below `below` that had a sustainable verdict, or NaN. */
static double best_sustainable_below(const sl_bench_search_result_t *res,
                                     double below) {
  double best = NAN;
  for (size_t i = 0; i < res->n_trials; i++) {
    const sl_bench_search_trial_t *st = &res->trials[i];
    if (st->is_sustainable && st->rate < below &&
        (isnan(best) || st->rate > best))
      best = st->rate;
  }
  return best;
}

/*
 * The search.  Two numbers are kept: hi, the lowest rate with an
 * unsustainable verdict, and lo, the highest rate below hi with a
 * sustainable one.
 *
 *  1. Start at start_rate.  Sustainable: lo = start; step up by up_factor
 *     until a trial is unsustainable (hi) or max_up_trials ran (then the
 *     result is capped: lo is only a lower bound).  Unsustainable: hi =
 *     start; step down by down_factor until a trial is sustainable (lo),
 *     or the rate falls below min_rate (nothing is sustainable).
 *  2. Bisect while hi / lo > 1 + resolution, at the geometric mean
 *     sqrt(lo hi): the stopping rule is a ratio, so halving the log-ratio
 *     takes the fewest trials, and the bracket may span decades.
 *  3. Confirm: rerun lo confirm_trials times.  If all pass, lo is the
 *     result.  If one fails, lo is evidently not sustainable: hi = lo, and
 *     lo becomes the highest rate still below it with a sustainable
 *     verdict (from the down or bisect phases), or, if there is none, the
 *     search steps down from hi again.  Then back to 2.
 *
 * Invariants: hi never increases, lo < hi, and every rate with an
 * unsustainable verdict is >= hi.  Every trial is counted against
 * max_trials; when it runs out, the result is the current lo, flagged not
 * converged or not confirmed.  Failed trials count as unsustainable.
 *
 * Trial counts, with the defaults and no false verdicts: starting k down
 * steps above capacity, k + 1 + 3 bisections (0.85 -> 3%: log2(ln(1/0.85)
 * / ln 1.03) = 2.5) + 1 confirmation; starting below capacity, u up steps
 * + about log2(ln 2 / ln 1.03) = 4.5 bisections + 1.
 */
int sl_bench_search(const sl_bench_search_opts_t *o, sl_bench_trial_fn fn,
                    sl_bench_trial_release_fn rel, void *user,
                    sl_bench_search_result_t *out) {
  memset(out, 0, sizeof(*out));
  out->sustainable_rate = NAN;
  out->unsustainable_rate = NAN;
  if (o == NULL || fn == NULL || !(o->start_rate > 0.0) ||
      !isfinite(o->start_rate) || !(o->up_factor > 1.0) ||
      !(o->down_factor > 0.0 && o->down_factor < 1.0) ||
      !(o->resolution > 0.0) || o->max_trials == 0 ||
      !(o->min_rate >= 0.0) || !opts_valid(&o->slope)) {
    snprintf(out->note, sizeof(out->note), "invalid options");
    return SL_EINVAL;
  }
  search_t s = {.o = o, .fn = fn, .rel = rel, .user = user, .res = out};
  double min_rate = o->min_rate > 0.0 ? o->min_rate : o->start_rate / 1e4;
  double lo = NAN, hi = NAN, r = o->start_rate;
  bool ok = false, is_confirmed = false;
  const char *note = NULL;

  int rc = search_trial(&s, r, SL_BENCH_PHASE_START, &ok);
  if (rc != SL_OK) goto end;
  if (ok) {
    lo = r;
    for (size_t k = 0; k < o->max_up_trials; k++) {
      r *= o->up_factor;
      rc = search_trial(&s, r, SL_BENCH_PHASE_UP, &ok);
      if (rc != SL_OK) goto end;
      if (!ok) {
        hi = r;
        break;
      }
      lo = r;
    }
  } else {
    hi = r;
  }

  for (;;) {
    /* Find a sustainable rate below hi when there is none. */
    while (isnan(lo)) {
      r = hi * o->down_factor;
      if (r < min_rate) {
        note = "no sustainable rate above min_rate";
        goto end;
      }
      rc = search_trial(&s, r, SL_BENCH_PHASE_DOWN, &ok);
      if (rc != SL_OK) goto end;
      if (ok)
        lo = r;
      else
        hi = r;
    }
    /* Bisect (only when bracketed: a capped search has no hi). */
    while (!isnan(hi) && hi / lo > 1.0 + o->resolution) {
      r = sqrt(lo * hi);
      rc = search_trial(&s, r, SL_BENCH_PHASE_BISECT, &ok);
      if (rc != SL_OK) goto end;
      if (ok)
        lo = r;
      else
        hi = r;
    }
    /* Confirm lo. */
    ok = true;
    for (size_t k = 0; k < o->confirm_trials && ok; k++) {
      rc = search_trial(&s, lo, SL_BENCH_PHASE_CONFIRM, &ok);
      if (rc != SL_OK) goto end;
    }
    if (ok) {
      is_confirmed = true;
      break;
    }
    hi = lo;
    lo = best_sustainable_below(out, hi);
  }

end:
  if (rc == SL_EAGAIN) {
    rc = SL_OK;
    note = "max_trials reached";
  }
  out->is_found = !isnan(lo);
  out->sustainable_rate = lo;
  out->unsustainable_rate = hi;
  out->is_capped = out->is_found && isnan(hi);
  out->is_converged =
      out->is_found && !isnan(hi) && hi / lo <= 1.0 + o->resolution;
  out->is_confirmed = out->is_found && is_confirmed;
  if (rc != SL_OK)
    snprintf(out->note, sizeof(out->note), "aborted: error %d", rc);
  else if (note)
    snprintf(out->note, sizeof(out->note), "%s", note);
  else if (out->is_capped)
    snprintf(out->note, sizeof(out->note),
             "capped: still sustainable after %zu steps up", o->max_up_trials);
  else
    snprintf(out->note, sizeof(out->note), "converged");
  return rc;
}

/* ------------------------------------------------------------------ */
/* Output.                                                              */
/* ------------------------------------------------------------------ */

/* A CSV number: empty when not finite. */
static void csv_num(FILE *f, double x, const char *fmt) {
  if (isfinite(x)) fprintf(f, fmt, x);
}

int sl_bench_search_write_csv(const sl_bench_search_result_t *r, FILE *f) {
  fprintf(f, "trial,rate,sustainable,backlog_slope,backlog_slope_lo,"
             "latency_slope_ms_per_s,p50_ms,p99_ms,reason\n");
  for (size_t i = 0; i < r->n_trials; i++) {
    const sl_bench_search_trial_t *t = &r->trials[i];
    fprintf(f, "%zu,%.10g,%d,", t->index, t->rate, t->is_sustainable ? 1 : 0);
    csv_num(f, t->verdict.backlog.slope, "%.6g");
    fputc(',', f);
    csv_num(f, t->verdict.backlog.lo, "%.6g");
    fputc(',', f);
    csv_num(f, t->verdict.latency.slope, "%.6g");
    fputc(',', f);
    csv_num(f, t->p50_ms, "%.6g");
    fputc(',', f);
    csv_num(f, t->p99_ms, "%.6g");
    fputs(",\"", f);
    for (const char *c = t->verdict.reason; *c; c++) {
      if (*c == '"') fputc('"', f); /* RFC 4180: double the quote */
      fputc(*c == '\n' ? ' ' : *c, f);
    }
    fputs("\"\n", f);
  }
  return ferror(f) ? SL_EIO : SL_OK;
}

int sl_bench_search_write_summary(const sl_bench_search_result_t *r,
                                  FILE *f) {
  fprintf(f, "%5s %-7s %12s %-5s %12s %12s %10s %9s %9s  %s\n", "trial",
          "phase", "rate/s", "ok", "backlog/s", "(lo)", "lat ms/s", "p50 ms",
          "p99 ms", "reason");
  for (size_t i = 0; i < r->n_trials; i++) {
    const sl_bench_search_trial_t *t = &r->trials[i];
    char why[64];
    fprintf(f, "%5zu %-7s %12.6g %-5s %12.4g %12.4g %10.4g %9.4g %9.4g  %s\n",
            t->index, sl_bench_search_phase_str(t->phase), t->rate,
            t->is_sustainable ? "yes" : "no", t->verdict.backlog.slope,
            t->verdict.backlog.lo, t->verdict.latency.slope, t->p50_ms,
            t->p99_ms,
            sl_bench_unsust_str(t->verdict.reasons, why, sizeof(why)));
  }
  if (r->is_found) {
    fprintf(f, "sustainable throughput: %.6g events/s", r->sustainable_rate);
    if (!isnan(r->unsustainable_rate))
      fprintf(f, " (unsustainable at %.6g: ratio %.4f)", r->unsustainable_rate,
              r->unsustainable_rate / r->sustainable_rate);
    fprintf(f, "%s%s\n", r->is_confirmed ? ", confirmed" : ", NOT confirmed",
            r->is_capped ? ", capped: only a lower bound" : "");
  } else {
    fprintf(f, "sustainable throughput: none found");
    if (!isnan(r->unsustainable_rate))
      fprintf(f, " (unsustainable down to %.6g events/s)", r->unsustainable_rate);
    fputc('\n', f);
  }
  fprintf(f, "trials: %zu; %s\n", r->n_trials, r->note);
  return ferror(f) ? SL_EIO : SL_OK;
}
