/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sustainable throughput: the highest offered rate at which neither the
 * backlog nor the event-time latency of a streaming system keeps growing
 * (DESIGN.md section 9; Karimov et al. 2018).  A trial runs the system at
 * one fixed rate and returns a time series sampled about once a second;
 * sl_bench_sustainable() decides from the slopes of that series whether the
 * rate is sustainable, and sl_bench_search() looks for the highest such rate
 * with as few trials as it can (step down geometrically from above, then
 * bisect, then confirm).  This file is part of sl_bench and does not link
 * libsluice: a trial function may drive a whole `sluice` process.  See
 * bench/README.md, section "Sustainable throughput".
 */
#ifndef SL_BENCH_SEARCH_H
#define SL_BENCH_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Trials.                                                              */
/* ------------------------------------------------------------------ */

/*
 * One sample of a trial, taken about every second.  Samples are in time
 * order (t_s strictly increasing).  A field that the trial cannot measure
 * in a sample is NaN and is skipped by the tests that use it: latency_ms is
 * NaN when no output left the system during the interval; generated and
 * consumed may be NaN throughout when the trial has no such counters (the
 * throughput checks below are then skipped).
 */
typedef struct sl_bench_sample_s {
  double t_s;        /* seconds since the trial started */
  double backlog;    /* events queued, not yet consumed (driver ring) */
  double latency_ms; /* e.g. p99 event-time latency of the outputs in this
                      * sample interval; NaN if there was no output */
  double generated;  /* cumulative events generated (including overflow) */
  double consumed;   /* cumulative events consumed */
} sl_bench_sample_t;

/*
 * What a trial reports.  The trial function fills every field; samples are
 * owned by the trial function until the release function is called.
 */
typedef struct sl_bench_trial_s {
  double rate;                 /* offered rate, events/s */
  sl_bench_sample_t *samples;  /* owned by the trial fn until release */
  size_t n_samples;
  bool is_overflow;            /* the queue overflowed: unsustainable */
  bool is_failed;              /* the trial broke (crash, timeout, ...) */
  /* The most the generator was behind its schedule during the
   * measurement window, in seconds (0 or NaN if unknown).  A generator
   * that cannot keep its schedule did not offer the rate. */
  double max_generator_lag_s;
  char error[256];             /* why, when is_failed */
  /* Latency percentiles over the measurement window, in ms (NaN if
   * unknown), filled by the trial fn: */
  double p50_ms, p90_ms, p99_ms, p999_ms, max_ms;
} sl_bench_trial_t;

/*
 * Run one trial at `rate` events/s and fill *out (zeroed by the caller).
 * Return SL_OK when out describes the trial, including a trial that
 * failed (set is_failed and error: the search treats it as unsustainable
 * and goes on).  Any other return aborts the search; the trial fn must
 * then have released whatever it allocated, and release is not called.
 */
typedef int (*sl_bench_trial_fn)(void *user, double rate,
                                 sl_bench_trial_t *out);
/* Free what the trial fn allocated in t (samples).  May be NULL. */
typedef void (*sl_bench_trial_release_fn)(void *user, sl_bench_trial_t *t);

/* ------------------------------------------------------------------ */
/* Least-squares slope against time.                                    */
/* ------------------------------------------------------------------ */

/*
 * y = intercept + slope x fitted by least squares, x being time (not the
 * sample index: samples are about, not exactly, one second apart and may
 * have gaps where a value was NaN).  se_slope is the ordinary
 * least-squares standard error; r1 is the lag-1 autocorrelation of the
 * residuals in x order (0 for an exact line).
 */
typedef struct sl_bench_trend_xy_s {
  double slope;
  double intercept;
  double se_slope;
  double df; /* n - 2 */
  double r1;
  size_t n;
} sl_bench_trend_xy_t;

/**
 * @brief Least-squares line through (x[i], y[i]), i < n.
 * @param[out] out written only on success.
 * @return SL_OK, SL_EINVAL (n < 3, all x equal, or a non-finite value).
 * @thread any @locks none
 */
int sl_bench_trend_xy(const double *x, const double *y, size_t n,
                      sl_bench_trend_xy_t *out);

/* ------------------------------------------------------------------ */
/* The slope test: is one trial sustainable?                            */
/* ------------------------------------------------------------------ */

/*
 * Thresholds of the slope test.  sl_bench_slope_opts_init sets the
 * defaults; bench/README.md has the same table with the simulations that
 * back them.  Trials should last warmup_s + at least 15 s (we use 30 s:
 * 20 samples in the window).
 *
 *  - warmup_s = 10: samples before this are ignored.  The first seconds
 *    fill the ring, the allocator, the caches and the windows, and usually
 *    contain the first checkpoint; they are a transient, not a trend.
 *  - confidence = 0.95: the slopes' two-sided intervals.  A series grows
 *    only when the interval's lower end is above 0 (one-sided 2.5%).
 *  - backlog_rel_slope = 0.01: the backlog must grow faster than 1% of the
 *    offered rate per second to count: the system then keeps up with less
 *    than 99% of its input.  Any real overload grows the backlog without
 *    bound, but a slope this small is below what a 3% search resolution
 *    can resolve, and checkpoint bumps produce spurious slopes of that
 *    order (a 0.5 s pause at the end of a 20 s window tilts the line by
 *    about 0.7% of the rate per second).
 *  - latency_slope_ms = 2: the latency must grow faster than 2 ms per
 *    second (40 ms over a 20 s window).  For queueing delay, d(latency)/dt
 *    = 1 - (consumed rate / offered rate), so 2 ms/s means keeping up with
 *    less than 99.8% of the input: stricter than the backlog threshold on
 *    purpose.  Latency grows also when the queue is inside the engine
 *    (network buffers, window state, a lagging watermark), which the
 *    driver's ring does not see, and 40 ms per window is well above the
 *    slope noise of a quiet run (a 2 ms per-sample jitter gives a slope
 *    standard error of about 0.1 ms/s over 20 samples) yet small against
 *    latency budgets of 100 ms and more.
 *  - max_r1 = 0.5: the interval accounts for positively autocorrelated
 *    residuals (AR(1), Santer et al. 2000): with lag-1 autocorrelation r
 *    the effective sample size is n (1 - r) / (1 + r), which widens the
 *    interval and lowers the degrees of freedom.  Checkpoint pauses and
 *    their drain make neighbouring samples correlated, and the plain
 *    interval is then too narrow.  r is capped at 0.5 (n_eff >= n / 3),
 *    because with 10-20 samples r itself is noisy and a hockey-stick
 *    series (flat, then growing) has large r; 0 disables the correction.
 *  - is_robust = true: a slope counts only if the Theil-Sen slope (median
 *    of the pairwise slopes) is also above the threshold.  The median
 *    ignores up to 29% outlying samples, so one or two checkpoint or
 *    GC-like bumps near the end of the window cannot tilt it; a real
 *    trend moves every pairwise slope and passes.
 *  - max_window_shortfall = 0.10: independently of the slopes, the window
 *    is unsustainable when the consumed count grew by less than 90% of the
 *    generated count (an end-to-end check that also sees queues inside
 *    the engine, and a backstop when a hockey-stick series defeats the
 *    interval).  The end points are single samples, so one checkpoint
 *    pause right at the end moves this ratio by pause / window (5% for
 *    1 s in 20 s); hence 10%, not the 1% of backlog_rel_slope.  The same
 *    1% is applied to the trend instead: the shortfall series generated -
 *    consumed is tested like the backlog.
 *  - min_generated_ratio = 0.99: the generator must achieve 99% of the
 *    offered rate (least-squares slope of the generated count), or the
 *    rate was never offered and cannot be called sustainable.  The same
 *    holds when it falls behind its schedule by more than
 *    max_generator_lag_s (below).
 *  - min_samples = 10: a window with fewer backlog samples is not judged
 *    sustainable ("too few samples"); with fewer latency samples the
 *    latency test is skipped and the reason says so.
 */
typedef struct sl_bench_slope_opts_s {
  double warmup_s;
  double confidence;
  double backlog_rel_slope;
  double latency_slope_ms;
  double max_r1;
  bool is_robust;
  double max_window_shortfall;
  double min_generated_ratio;
  size_t min_samples;
  /* > 0: also unsustainable when, at the last sample, more than this
   * many seconds of input are in flight: the backlog, or generated -
   * consumed when larger (a start-up backlog still draining at the end
   * of the window, or a generator that fell behind its schedule and
   * stays behind: the slopes are flat, but the latencies are those of a
   * queue, not of a steady state).  Default 0 (off); sluice-bench-stream
   * uses 0.5. */
  double max_end_backlog_s;
  /* The generator must stay within this many seconds of its schedule
   * (trial field max_generator_lag_s), or the trial is unsustainable for
   * reason "generator": the rate was not offered.  Default 0.1 s: well
   * above the few ms a driver sharing its cores lags when preempted,
   * well below a lag that would decide the latency. */
  double max_generator_lag_s;
} sl_bench_slope_opts_t;

/** @brief Fill o with the defaults above.  @thread any @locks none */
void sl_bench_slope_opts_init(sl_bench_slope_opts_t *o);

/* Why a trial is unsustainable (a bit set in sl_bench_verdict_t). */
#define SL_BENCH_UNSUST_OVERFLOW 0x01u  /* the queue overflowed */
#define SL_BENCH_UNSUST_FAILED 0x02u    /* the trial failed */
#define SL_BENCH_UNSUST_SAMPLES 0x04u   /* too few samples in the window */
#define SL_BENCH_UNSUST_BACKLOG 0x08u   /* backlog grows */
#define SL_BENCH_UNSUST_LATENCY 0x10u   /* latency grows */
#define SL_BENCH_UNSUST_SHORTFALL 0x20u /* consumed lags generated */
#define SL_BENCH_UNSUST_GENERATOR 0x40u /* the rate was not generated */

/*
 * The test of one series.  slope, lo and hi are per second (events/s for
 * the backlog and the shortfall, ms/s for the latency); lo and hi bound the
 * interval at the requested confidence with df degrees of freedom (reduced
 * by the autocorrelation correction); robust_slope is Theil-Sen (NaN when
 * is_robust is off).  is_tested is false when the series had fewer than
 * min_samples finite values in the window (then everything else is NaN).
 */
typedef struct sl_bench_slope_s {
  bool is_tested;
  bool is_growing;
  size_t n;
  double slope, lo, hi;
  double se, df, r1;
  double robust_slope;
  double threshold; /* what slope had to exceed */
} sl_bench_slope_t;

typedef struct sl_bench_verdict_s {
  bool is_sustainable;
  unsigned reasons;          /* SL_BENCH_UNSUST_* bits; 0 if sustainable */
  size_t n_window;           /* samples with t_s >= warmup_s */
  sl_bench_slope_t backlog;  /* events/s */
  sl_bench_slope_t latency;  /* ms/s */
  sl_bench_slope_t shortfall; /* generated - consumed, events/s */
  double generated_rate;     /* LS slope of generated; NaN if unknown */
  double consumed_ratio;     /* (consumed delta) / (generated delta) over
                              * the window end points; NaN if unknown */
  char reason[224];          /* "sustainable" or what failed, with values */
} sl_bench_verdict_t;

/**
 * @brief Decide whether trial t was sustainable: neither overflowed nor
 * failed, enough samples in the window, and neither the backlog, the
 * latency nor the shortfall grows, and the generator kept up.  A series
 * grows when its slope's interval lies above 0 *and* the slope (and, with
 * is_robust, the Theil-Sen slope) exceeds its threshold.
 * @param[in] o may be NULL for the defaults.
 * @param[out] out written on SL_OK.
 * @return SL_OK, SL_EINVAL (samples not in time order, bad options),
 *   SL_ENOMEM (the Theil-Sen scratch space).
 * @thread any @locks none
 */
int sl_bench_sustainable(const sl_bench_trial_t *t,
                         const sl_bench_slope_opts_t *o,
                         sl_bench_verdict_t *out);

/** @brief "overflow", "backlog+latency", ... for a reason bit set. */
const char *sl_bench_unsust_str(unsigned reasons, char *buf, size_t len);

/* ------------------------------------------------------------------ */
/* The search.                                                          */
/* ------------------------------------------------------------------ */

/*
 * Options of the search; sl_bench_search_opts_init sets the defaults:
 *
 *  - start_rate (required, > 0): meant to be above the capacity.  If it
 *    turns out sustainable, the search first steps up.
 *  - up_factor = 2, max_up_trials = 12: step up by doubling, at most 12
 *    times (4096 x the start), until a trial is unsustainable.  Doubling
 *    finds an upper bound in log2 steps and bisection then halves the
 *    gap quickly; the up phase is only a fallback for a bad start.
 *  - down_factor = 0.85: step down by 15% until a trial is sustainable.
 *    Smaller steps waste trials far above capacity; larger ones leave a
 *    wide bracket for bisection (0.85 -> 0.85 takes 3 bisections to 3%).
 *  - resolution = 0.03: stop bisecting when unsustainable / sustainable
 *    < 1.03.  The capacity of a real run varies by a few percent from run
 *    to run (checkpoint timing, placement), so a finer bracket would only
 *    measure that noise.
 *  - confirm_trials = 1: rerun the final rate once more; accept only if
 *    every rerun is sustainable, otherwise treat the rate as unsustainable
 *    and continue downward.  A single lucky trial near capacity is the
 *    typical way such searches overestimate.
 *  - max_trials = 40: an upper bound on everything (40 trials of 30 s is
 *    20 minutes).
 *  - min_rate = 0: stop stepping down below this rate (then no rate is
 *    sustainable); 0 means start_rate / 1e4.
 *  - slope: the slope test's thresholds (sl_bench_slope_opts_init).
 *  - log: when not NULL, one line per trial is printed there as it ends.
 */
typedef struct sl_bench_search_opts_s {
  double start_rate;
  double up_factor;
  size_t max_up_trials;
  double down_factor;
  double resolution;
  size_t confirm_trials;
  size_t max_trials;
  double min_rate;
  sl_bench_slope_opts_t slope;
  FILE *log;
} sl_bench_search_opts_t;

/** @brief Fill o with the defaults above (start_rate 0: set it).
 *  @thread any @locks none */
void sl_bench_search_opts_init(sl_bench_search_opts_t *o);

/* Which phase of the search ran a trial. */
typedef enum sl_bench_search_phase_e {
  SL_BENCH_PHASE_START = 0,
  SL_BENCH_PHASE_UP,
  SL_BENCH_PHASE_DOWN,
  SL_BENCH_PHASE_BISECT,
  SL_BENCH_PHASE_CONFIRM
} sl_bench_search_phase_t;

/** @brief "start", "up", "down", "bisect" or "confirm". */
const char *sl_bench_search_phase_str(sl_bench_search_phase_t p);

/* One trial as the search recorded it (copied before release). */
typedef struct sl_bench_search_trial_s {
  size_t index; /* 1-based */
  double rate;
  sl_bench_search_phase_t phase;
  bool is_sustainable;
  bool is_overflow;
  bool is_failed;
  sl_bench_verdict_t verdict;
  double p50_ms, p90_ms, p99_ms, p999_ms, max_ms;
  size_t n_samples;
} sl_bench_search_trial_t;

/*
 * The result.  sustainable_rate is the highest rate judged sustainable
 * (with its confirmations), or NaN if none was; unsustainable_rate is the
 * lowest rate above it judged unsustainable, or NaN when the up phase
 * never found one (then is_capped).  is_converged: the two are within
 * 1 + resolution of each other.  is_confirmed: the confirmation reruns all
 * passed.  trials[0 .. n_trials) in the order they ran.
 */
typedef struct sl_bench_search_result_s {
  double sustainable_rate;
  double unsustainable_rate;
  bool is_found;
  bool is_converged;
  bool is_confirmed;
  bool is_capped;
  size_t n_trials;
  sl_bench_search_trial_t *trials; /* owned; sl_bench_search_result_close */
  char note[160];                  /* how the search ended */
} sl_bench_search_result_t;

/**
 * @brief Search the highest sustainable rate (the algorithm is described
 * above sl_bench_search in search.c and in bench/README.md).  Calls
 * fn(user, rate, &trial) for every trial, copies what it needs, then
 * rel(user, &trial).
 * @param[out] out always written, even on error (then it holds the trials
 *   that ran before the error, because a search of many long trials should
 *   not lose its log); always call sl_bench_search_result_close.
 * @return SL_OK (also when no rate was sustainable: check is_found),
 *   SL_EINVAL (bad options), SL_ENOMEM, or the first error fn returned.
 * @thread any; fn and rel run on the calling thread @locks none
 * @ownership the trial's samples stay the trial fn's; out->trials is the
 *   caller's until close.
 */
int sl_bench_search(const sl_bench_search_opts_t *o, sl_bench_trial_fn fn,
                    sl_bench_trial_release_fn rel, void *user,
                    sl_bench_search_result_t *out);

/** @brief Free out->trials; the struct can be reused.  NULL does nothing. */
void sl_bench_search_result_close(sl_bench_search_result_t *r);

/**
 * @brief Write one CSV line per trial, after the header
 * `trial,rate,sustainable,backlog_slope,backlog_slope_lo,
 * latency_slope_ms_per_s,p50_ms,p99_ms,reason` (one line).  Unknown
 * numbers are empty fields; reason is always double-quoted.
 * @return SL_OK or SL_EIO.
 */
int sl_bench_search_write_csv(const sl_bench_search_result_t *r, FILE *f);

/**
 * @brief Human-readable summary: one line per trial, then the result.
 * @return SL_OK or SL_EIO.
 */
int sl_bench_search_write_summary(const sl_bench_search_result_t *r,
                                  FILE *f);

#ifdef __cplusplus
}
#endif
#endif
