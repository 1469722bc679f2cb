/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the sustainable-throughput search (bench/search.c): the
 * least-squares trend against hand-computed values, the slope test on
 * synthetic trial series (a steady system with checkpoint bumps, a growing
 * backlog, a growing latency, overflow, a lagging generator, NaN samples,
 * what is in flight at the end, and its false-alarm rate on white noise),
 * and the search against a simulated system of known capacity.  Every
 * random input comes from a fixed seed; nothing here measures time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"
#include "sl_test.h"
#include "stats.h"

/* ------------------------------------------------------------------ */
/* The least-squares trend.                                             */
/* ------------------------------------------------------------------ */

/*
 * x = 0 1 2 3 4, y = 1 3 2 5 4.
 *   x mean 2, y mean 3, Sxx = 10, Sxy = 4 + 0 + 0 + 2 + 2 = 8.
 *   slope 0.8, intercept 3 - 1.6 = 1.4.
 *   residuals -0.4 0.8 -1.0 1.2 -0.6, SSE 3.6, s^2 = 3.6 / 3 = 1.2.
 *   se = sqrt(1.2 / 10) = 0.3464102.
 *   lag-1: (-0.32 - 0.8 - 1.2 - 0.72) / 3.6 = -0.8444444.
 */
SL_TEST(trend_known_values) {
  const double x[] = {0, 1, 2, 3, 4}, y[] = {1, 3, 2, 5, 4};
  sl_bench_trend_xy_t t;
  SL_ASSERT_EQ_INT(sl_bench_trend_xy(x, y, 5, &t), SL_OK);
  SL_ASSERT_EQ_DBL(t.slope, 0.8, 1e-12);
  SL_ASSERT_EQ_DBL(t.intercept, 1.4, 1e-12);
  SL_ASSERT_EQ_DBL(t.se_slope, 0.3464102, 1e-6);
  SL_ASSERT_EQ_DBL(t.df, 3.0, 0.0);
  SL_ASSERT_EQ_DBL(t.r1, -3.04 / 3.6, 1e-12);
  SL_ASSERT_EQ_INT(t.n, 5);
}

/* Large offsets (times since the epoch, counts in the billions) keep
 * their precision: the sums are centred. */
SL_TEST(trend_exact_line_far_from_zero) {
  double x[20], y[20];
  for (int i = 0; i < 20; i++) {
    x[i] = 1.7e9 + 0.5 * i;
    y[i] = 4e12 + 2.5e6 * x[i];
  }
  sl_bench_trend_xy_t t;
  SL_ASSERT_EQ_INT(sl_bench_trend_xy(x, y, 20, &t), SL_OK);
  SL_ASSERT_EQ_DBL(t.slope, 2.5e6, 1e-3);
  SL_ASSERT_EQ_DBL(t.se_slope, 0.0, 0.0);
  SL_ASSERT_EQ_DBL(t.r1, 0.0, 0.0);
}

SL_TEST(trend_rejects_bad_input) {
  const double x[] = {1, 1, 1, 1}, y[] = {1, 2, 3, 4};
  const double xs[] = {0, 1, 2, 3}, yn[] = {1, NAN, 3, 4};
  sl_bench_trend_xy_t t;
  SL_ASSERT_EQ_INT(sl_bench_trend_xy(xs, y, 2, &t), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl_bench_trend_xy(x, y, 4, &t), SL_EINVAL);
  SL_ASSERT_EQ_INT(sl_bench_trend_xy(xs, yn, 4, &t), SL_EINVAL);
}

/* ------------------------------------------------------------------ */
/* Synthetic trials.                                                    */
/* ------------------------------------------------------------------ */

/*
 * A series like sluice-bench-stream's: 16 s, a sample every 0.5 s, the
 * first 6 s warm-up (so 21 samples in the window), at `rate` events/s.
 * The backlog is base_backlog + growth * t plus Gaussian noise of sd
 * noise_rel * rate, plus, when is_bumpy, a checkpoint every second that
 * leaves 2% of a second's input queued in the sample after it; the
 * latency follows the backlog (1 ms plus backlog / rate seconds) plus
 * lat_growth * t.  generated = gen_ratio * rate * t, consumed = generated
 * - backlog - extra_inflight.
 */
typedef struct shape_s {
  double rate;
  double base_backlog; /* events */
  double growth;       /* events/s */
  double lat_growth;   /* ms/s */
  double noise_rel;    /* sd of the backlog noise, relative to rate */
  bool is_bumpy;
  double gen_ratio;       /* generator's rate / rate */
  double extra_inflight;  /* events in flight beyond the ring (constant) */
  uint64_t seed;
} shape_t;

#define N_SAMPLES 32

static void shape_init(shape_t *s, double rate, uint64_t seed) {
  memset(s, 0, sizeof(*s));
  s->rate = rate;
  s->base_backlog = 0.001 * rate;
  s->noise_rel = 0.0005;
  s->is_bumpy = true;
  s->gen_ratio = 1.0;
  s->seed = seed;
}

static void make_trial(const shape_t *s, sl_bench_sample_t *buf,
                       sl_bench_trial_t *t) {
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, s->seed);
  memset(t, 0, sizeof(*t));
  t->rate = s->rate;
  t->samples = buf;
  t->n_samples = N_SAMPLES;
  t->p50_ms = t->p90_ms = t->p99_ms = t->p999_ms = t->max_ms = NAN;
  for (int i = 0; i < N_SAMPLES; i++) {
    double ts = 0.5 * (i + 1);
    double b = s->base_backlog + s->growth * ts +
               s->noise_rel * s->rate * sl_bench_rng_normal(&rng);
    if (s->is_bumpy && i % 2 == 1) b += 0.02 * s->rate;
    if (b < 0) b = 0;
    double gen = s->gen_ratio * s->rate * ts;
    buf[i].t_s = ts;
    buf[i].backlog = b;
    buf[i].latency_ms = 1.0 + 1000.0 * b / s->rate + s->lat_growth * ts +
                        0.05 * sl_bench_rng_normal(&rng);
    buf[i].generated = gen;
    buf[i].consumed = gen - b - s->extra_inflight;
  }
}

static sl_bench_slope_opts_t stream_opts(void) {
  sl_bench_slope_opts_t o;
  sl_bench_slope_opts_init(&o);
  o.warmup_s = 6.0;
  return o;
}

static sl_bench_verdict_t judge(const shape_t *s,
                                const sl_bench_slope_opts_t *o) {
  sl_bench_sample_t buf[N_SAMPLES];
  sl_bench_trial_t t;
  make_trial(s, buf, &t);
  sl_bench_verdict_t v;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, o, &v), SL_OK);
  return v;
}

SL_TEST(steady_with_checkpoint_bumps_is_sustainable) {
  sl_bench_slope_opts_t o = stream_opts();
  const double rates[] = {5e4, 1e6, 3e6};
  for (size_t k = 0; k < 3; k++) {
    shape_t s;
    shape_init(&s, rates[k], 11 + k);
    sl_bench_verdict_t v = judge(&s, &o);
    if (!v.is_sustainable) SL_TEST_FAIL("rate %g: %s", rates[k], v.reason);
    SL_ASSERT_EQ_INT(v.reasons, 0);
    SL_ASSERT_EQ_INT(v.n_window, 21);
    SL_ASSERT_TRUE(v.backlog.is_tested && !v.backlog.is_growing);
    SL_ASSERT_TRUE(v.latency.is_tested && !v.latency.is_growing);
    SL_ASSERT_TRUE(v.shortfall.is_tested && !v.shortfall.is_growing);
    SL_ASSERT_EQ_DBL(v.generated_rate, rates[k], rates[k] * 1e-9);
    SL_ASSERT_TRUE(strncmp(v.reason, "sustainable", 11) == 0);
  }
}

/* 3% of the rate per second: the system keeps up with 97% of its input. */
SL_TEST(backlog_growing_three_percent_is_not) {
  sl_bench_slope_opts_t o = stream_opts();
  o.latency_slope_ms = 1e9; /* isolate the backlog test */
  shape_t s;
  shape_init(&s, 1e6, 21);
  s.growth = 0.03 * s.rate;
  sl_bench_verdict_t v = judge(&s, &o);
  SL_ASSERT_TRUE(!v.is_sustainable);
  SL_ASSERT_TRUE(v.reasons & SL_BENCH_UNSUST_BACKLOG);
  SL_ASSERT_TRUE(v.backlog.is_growing);
  SL_ASSERT_EQ_DBL(v.backlog.slope, 0.03 * s.rate, 0.003 * s.rate);
  SL_ASSERT_TRUE(v.backlog.lo > 0 && v.backlog.lo <= v.backlog.slope);
  SL_ASSERT_TRUE(strstr(v.reason, "backlog grows") != NULL);
  /* The same growth below the relevance threshold (0.5% < 1%) passes
   * the backlog test even though it is significant. */
  s.growth = 0.005 * s.rate;
  v = judge(&s, &o);
  SL_ASSERT_TRUE(!v.backlog.is_growing);
  SL_ASSERT_TRUE(v.backlog.lo > 0);
}

SL_TEST(latency_growing_ten_ms_per_second_is_not) {
  sl_bench_slope_opts_t o = stream_opts();
  shape_t s;
  shape_init(&s, 1e6, 31);
  s.lat_growth = 10.0;
  sl_bench_verdict_t v = judge(&s, &o);
  SL_ASSERT_TRUE(!v.is_sustainable);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_LATENCY);
  SL_ASSERT_EQ_DBL(v.latency.slope, 10.0, 1.0);
  /* 1 ms/s is below the 2 ms/s threshold. */
  s.lat_growth = 1.0;
  v = judge(&s, &o);
  SL_ASSERT_TRUE(v.is_sustainable);
}

SL_TEST(overflow_and_failure_are_unsustainable) {
  sl_bench_slope_opts_t o = stream_opts();
  shape_t s;
  shape_init(&s, 1e6, 41);
  sl_bench_sample_t buf[N_SAMPLES];
  sl_bench_trial_t t;
  make_trial(&s, buf, &t);
  t.is_overflow = true;
  sl_bench_verdict_t v;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_TRUE(!v.is_sustainable);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_OVERFLOW);
  t.is_overflow = false;
  t.is_failed = true;
  snprintf(t.error, sizeof(t.error), "job exited with status 3");
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_FAILED);
  SL_ASSERT_TRUE(strstr(v.reason, "status 3") != NULL);
  char buf2[64];
  SL_ASSERT_EQ_STR(sl_bench_unsust_str(SL_BENCH_UNSUST_OVERFLOW |
                                           SL_BENCH_UNSUST_LATENCY,
                                       buf2, sizeof(buf2)),
                   "overflow+latency");
  SL_ASSERT_EQ_STR(sl_bench_unsust_str(0, buf2, sizeof(buf2)), "sustainable");
}

/* The generator reached 95% of the offered rate: the rate was never
 * offered, whatever the consumer did. */
SL_TEST(lagging_generator_is_not_sustainable) {
  sl_bench_slope_opts_t o = stream_opts();
  shape_t s;
  shape_init(&s, 1e6, 51);
  s.gen_ratio = 0.95;
  sl_bench_verdict_t v = judge(&s, &o);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_GENERATOR);
  SL_ASSERT_EQ_DBL(v.generated_rate, 0.95e6, 1.0);
}

/* The generator kept its rate on average but fell 0.3 s behind its
 * schedule at some point of the window: the rate was not offered. */
SL_TEST(generator_behind_its_schedule_is_not_sustainable) {
  sl_bench_slope_opts_t o = stream_opts();
  shape_t s;
  shape_init(&s, 1e6, 52);
  sl_bench_sample_t buf[N_SAMPLES];
  sl_bench_trial_t t;
  make_trial(&s, buf, &t);
  t.max_generator_lag_s = 0.3;
  sl_bench_verdict_t v;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_GENERATOR);
  SL_ASSERT_TRUE(strstr(v.reason, "behind its schedule") != NULL);
  t.max_generator_lag_s = 0.02; /* a preemption: fine */
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_TRUE(v.is_sustainable);
  t.max_generator_lag_s = NAN; /* unknown: not judged */
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_TRUE(v.is_sustainable);
}

/* Consumed falls behind generated while the ring's backlog stays flat
 * (a queue inside the engine): the shortfall test sees it. */
SL_TEST(shortfall_growing_inside_the_engine_is_not) {
  sl_bench_slope_opts_t o = stream_opts();
  o.latency_slope_ms = 1e9;
  shape_t s;
  shape_init(&s, 1e6, 61);
  sl_bench_sample_t buf[N_SAMPLES];
  sl_bench_trial_t t;
  make_trial(&s, buf, &t);
  for (size_t i = 0; i < t.n_samples; i++)
    buf[i].consumed -= 0.05 * s.rate * buf[i].t_s;
  sl_bench_verdict_t v;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_SHORTFALL);
  SL_ASSERT_TRUE(v.shortfall.is_growing);
  SL_ASSERT_EQ_DBL(v.shortfall.slope, 0.05e6, 0.005e6);
  SL_ASSERT_EQ_DBL(v.consumed_ratio, 0.95, 0.02);
}

/* Samples without output (NaN latency) are skipped, not read as zero. */
SL_TEST(nan_samples_are_skipped) {
  sl_bench_slope_opts_t o = stream_opts();
  shape_t s;
  shape_init(&s, 1e6, 71);
  s.lat_growth = 10.0;
  sl_bench_sample_t buf[N_SAMPLES];
  sl_bench_trial_t t;
  make_trial(&s, buf, &t);
  size_t finite = 0;
  for (size_t i = 0; i < t.n_samples; i++) {
    if (i % 3 == 0) buf[i].latency_ms = NAN;
    else if (buf[i].t_s >= o.warmup_s) finite++;
  }
  sl_bench_verdict_t v;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_EQ_INT(v.latency.n, finite);
  SL_ASSERT_TRUE(v.latency.is_growing); /* the growth is still seen */
  SL_ASSERT_EQ_DBL(v.latency.slope, 10.0, 1.0);
  /* Too few finite latencies: the latency test is skipped, the trial is
   * judged on the rest. */
  for (size_t i = 0; i < t.n_samples; i++)
    if (i % 4 != 0) buf[i].latency_ms = NAN;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_TRUE(!v.latency.is_tested);
  SL_ASSERT_TRUE(v.is_sustainable);
  /* Too few backlog samples: not judged sustainable. */
  for (size_t i = 0; i < t.n_samples; i++)
    if (i % 4 != 0) buf[i].backlog = NAN;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_OK);
  SL_ASSERT_TRUE(v.reasons & SL_BENCH_UNSUST_SAMPLES);
}

/* A constant second of input in flight (a generator that fell behind its
 * schedule during start-up and stays behind): flat slopes, so only the
 * end-of-window bound catches it. */
SL_TEST(max_end_backlog_catches_a_standing_queue) {
  sl_bench_slope_opts_t o = stream_opts();
  shape_t s;
  shape_init(&s, 1e6, 81);
  s.extra_inflight = 1.0 * s.rate;
  sl_bench_verdict_t v = judge(&s, &o);
  SL_ASSERT_TRUE(v.is_sustainable); /* off by default */
  o.max_end_backlog_s = 0.5;
  v = judge(&s, &o);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_BACKLOG);
  SL_ASSERT_TRUE(strstr(v.reason, "in flight at the end") != NULL);
  /* The same bound on the ring's own backlog. */
  s.extra_inflight = 0;
  s.base_backlog = 0.8 * s.rate;
  v = judge(&s, &o);
  SL_ASSERT_EQ_INT(v.reasons, SL_BENCH_UNSUST_BACKLOG);
  /* A tenth of a second in flight is fine. */
  s.base_backlog = 0.1 * s.rate;
  v = judge(&s, &o);
  SL_ASSERT_TRUE(v.is_sustainable);
}

/* White noise (no trend, no bumps, large noise) is flagged in at most 5 of
 * 100 seeded trials: the test's false-alarm rate. */
SL_TEST(white_noise_false_alarms_at_most_five_percent) {
  sl_bench_slope_opts_t o = stream_opts();
  o.backlog_rel_slope = 0.0; /* significance alone decides */
  o.is_robust = false;
  int flagged = 0;
  for (uint64_t seed = 1; seed <= 100; seed++) {
    shape_t s;
    shape_init(&s, 1e6, 1000 + seed);
    s.is_bumpy = false;
    s.base_backlog = 0.2 * s.rate;
    s.noise_rel = 0.02;
    sl_bench_verdict_t v = judge(&s, &o);
    if (v.backlog.is_growing) flagged++;
  }
  fprintf(stderr, "white noise: %d of 100 flagged\n", flagged);
  if (flagged > 5) SL_TEST_FAIL("%d of 100 white-noise series flagged", flagged);
}

SL_TEST(samples_out_of_order_are_rejected) {
  shape_t s;
  shape_init(&s, 1e6, 91);
  sl_bench_sample_t buf[N_SAMPLES];
  sl_bench_trial_t t;
  make_trial(&s, buf, &t);
  buf[5].t_s = buf[4].t_s;
  sl_bench_verdict_t v;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, NULL, &v), SL_EINVAL);
  sl_bench_slope_opts_t o = stream_opts();
  o.confidence = 1.5;
  buf[5].t_s = buf[4].t_s + 0.5;
  SL_ASSERT_EQ_INT(sl_bench_sustainable(&t, &o, &v), SL_EINVAL);
}

/* ------------------------------------------------------------------ */
/* The search against a simulated system of known capacity.            */
/* ------------------------------------------------------------------ */

/*
 * A system that consumes min(rate, capacity): above capacity the backlog
 * grows by rate - capacity per second and the latency by 1000 (1 -
 * capacity / rate) ms per second; it overflows when the backlog passes
 * queue_cap.  lucky_above: the first trial at a rate within 4% above
 * capacity is reported sustainable anyway (a lucky trial that the
 * confirmation must catch).
 */
typedef struct sim_s {
  double capacity;
  double queue_cap;
  bool lucky_above;
  bool is_lucky_used;
  int calls, releases;
  int fail_at_call; /* > 0: return SL_EIO at that call */
  uint64_t seed;
} sim_t;

static int sim_trial(void *user, double rate, sl_bench_trial_t *out) {
  sim_t *sim = user;
  sim->calls++;
  if (sim->fail_at_call > 0 && sim->calls == sim->fail_at_call) return SL_EIO;
  sl_bench_sample_t *buf = malloc(N_SAMPLES * sizeof(*buf));
  if (buf == NULL) return SL_ENOMEM;
  shape_t s;
  shape_init(&s, rate, sim->seed + (uint64_t)sim->calls);
  double over = rate - sim->capacity;
  bool lucky = sim->lucky_above && !sim->is_lucky_used && over > 0 &&
               rate < 1.04 * sim->capacity;
  if (lucky) sim->is_lucky_used = true;
  if (over > 0 && !lucky) {
    s.growth = over;
    s.lat_growth = 1000.0 * over / rate;
  }
  sl_bench_trial_t t;
  make_trial(&s, buf, &t);
  *out = t;
  out->rate = rate;
  for (size_t i = 0; i < t.n_samples; i++)
    if (buf[i].backlog > sim->queue_cap) out->is_overflow = true;
  out->p50_ms = 1.0;
  out->p99_ms = 5.0;
  return SL_OK;
}

static void sim_release(void *user, sl_bench_trial_t *t) {
  sim_t *sim = user;
  sim->releases++;
  free(t->samples);
  t->samples = NULL;
}

static void search_opts(sl_bench_search_opts_t *so, double start) {
  sl_bench_search_opts_init(so);
  so->start_rate = start;
  so->slope.warmup_s = 6.0;
  so->slope.max_end_backlog_s = 0.5;
}

static void check_bracket(const sl_bench_search_result_t *r, double cap) {
  if (!r->is_found || !r->is_converged || !r->is_confirmed)
    SL_TEST_FAIL("capacity %g: found %d converged %d confirmed %d (%s)", cap,
                 r->is_found, r->is_converged, r->is_confirmed, r->note);
  /* The simulated system passes up to about capacity (1 + 0.2%): the
   * latency threshold (2 ms/s) is hit at rate = capacity / 0.998. */
  if (!(r->sustainable_rate <= 1.003 * cap && r->unsustainable_rate > cap &&
        r->unsustainable_rate / r->sustainable_rate <= 1.03 + 1e-9))
    SL_TEST_FAIL("capacity %g: bracket [%g, %g]", cap, r->sustainable_rate,
                 r->unsustainable_rate);
}

SL_TEST(search_finds_known_capacities) {
  const double caps[] = {5e4, 1.3e6, 7e6};
  for (size_t k = 0; k < 3; k++) {
    /* From above (the intended use) and from below (steps up first). */
    const double starts[] = {2.0 * caps[k], 0.3 * caps[k]};
    for (size_t j = 0; j < 2; j++) {
      sim_t sim = {.capacity = caps[k], .queue_cap = 1e12, .seed = 7 * k + j};
      sl_bench_search_opts_t so;
      search_opts(&so, starts[j]);
      sl_bench_search_result_t r;
      SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim, &r),
                       SL_OK);
      check_bracket(&r, caps[k]);
      SL_ASSERT_EQ_INT(r.n_trials, (size_t)sim.calls);
      SL_ASSERT_EQ_INT(sim.releases, sim.calls);
      SL_ASSERT_LE_INT(r.n_trials, 16);
      SL_ASSERT_EQ_INT(r.trials[0].phase, SL_BENCH_PHASE_START);
      SL_ASSERT_EQ_INT(r.trials[r.n_trials - 1].phase, SL_BENCH_PHASE_CONFIRM);
      /* Every trial above capacity (by more than the 0.3% the
       * thresholds let through) was judged unsustainable, every one
       * below sustainable. */
      for (size_t i = 0; i < r.n_trials; i++) {
        const sl_bench_search_trial_t *t = &r.trials[i];
        if (t->rate > 1.003 * caps[k]) SL_ASSERT_TRUE(!t->is_sustainable);
        if (t->rate < caps[k]) SL_ASSERT_TRUE(t->is_sustainable);
      }
      sl_bench_search_result_close(&r);
    }
  }
}

/* An overflowing queue ends a trial as unsustainable; the search still
 * converges. */
SL_TEST(search_with_overflow) {
  sim_t sim = {.capacity = 1e6, .queue_cap = 2e5, .seed = 100};
  sl_bench_search_opts_t so;
  search_opts(&so, 3e6);
  sl_bench_search_result_t r;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim, &r),
                   SL_OK);
  SL_ASSERT_TRUE(r.trials[0].is_overflow);
  SL_ASSERT_TRUE(r.trials[0].verdict.reasons & SL_BENCH_UNSUST_OVERFLOW);
  check_bracket(&r, 1e6);
  sl_bench_search_result_close(&r);
}

/* A lucky trial above capacity is caught by its confirmation, and the
 * search goes on below it. */
SL_TEST(search_confirmation_catches_a_lucky_trial) {
  sim_t sim = {.capacity = 1e6, .queue_cap = 1e12, .lucky_above = true,
               .seed = 200};
  sl_bench_search_opts_t so;
  search_opts(&so, 2e6);
  sl_bench_search_result_t r;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim, &r),
                   SL_OK);
  SL_ASSERT_TRUE(sim.is_lucky_used);
  check_bracket(&r, 1e6);
  size_t failed_confirms = 0;
  for (size_t i = 0; i < r.n_trials; i++)
    if (r.trials[i].phase == SL_BENCH_PHASE_CONFIRM &&
        !r.trials[i].is_sustainable)
      failed_confirms++;
  SL_ASSERT_EQ_INT(failed_confirms, 1);
  sl_bench_search_result_close(&r);
}

SL_TEST(search_nothing_sustainable_and_capped) {
  /* Capacity far below anything the search may try. */
  sim_t none = {.capacity = 1.0, .queue_cap = 1e12, .seed = 300};
  sl_bench_search_opts_t so;
  search_opts(&so, 1e6);
  so.min_rate = 2e5;
  sl_bench_search_result_t r;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &none, &r),
                   SL_OK);
  SL_ASSERT_TRUE(!r.is_found);
  SL_ASSERT_TRUE(isnan(r.sustainable_rate));
  SL_ASSERT_TRUE(strstr(r.note, "no sustainable rate") != NULL);
  for (size_t i = 0; i < r.n_trials; i++)
    SL_ASSERT_TRUE(r.trials[i].rate >= 2e5);
  sl_bench_search_result_close(&r);
  /* Capacity far above: capped after max_up_trials doublings. */
  sim_t all = {.capacity = 1e300, .queue_cap = 1e300, .seed = 400};
  search_opts(&so, 1e3);
  so.max_up_trials = 4;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &all, &r),
                   SL_OK);
  SL_ASSERT_TRUE(r.is_found && r.is_capped && !r.is_converged);
  SL_ASSERT_EQ_DBL(r.sustainable_rate, 16e3, 1e-6);
  /* start + 4 up + the confirmation of the last rate */
  SL_ASSERT_EQ_INT(r.n_trials, 6);
  SL_ASSERT_EQ_INT(r.trials[5].phase, SL_BENCH_PHASE_CONFIRM);
  sl_bench_search_result_close(&r);
}

/* A trial function's error aborts the search; the trials that ran are
 * kept, and max_trials bounds the number of trials. */
SL_TEST(search_error_and_max_trials) {
  sim_t sim = {.capacity = 1e6, .queue_cap = 1e12, .fail_at_call = 3,
               .seed = 500};
  sl_bench_search_opts_t so;
  search_opts(&so, 2e6);
  sl_bench_search_result_t r;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim, &r),
                   SL_EIO);
  SL_ASSERT_EQ_INT(r.n_trials, 2);
  SL_ASSERT_TRUE(strstr(r.note, "aborted") != NULL);
  sl_bench_search_result_close(&r);
  sim_t sim2 = {.capacity = 1e6, .queue_cap = 1e12, .seed = 600};
  so.max_trials = 3;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim2, &r),
                   SL_OK);
  SL_ASSERT_EQ_INT(r.n_trials, 3);
  SL_ASSERT_TRUE(!r.is_confirmed);
  SL_ASSERT_TRUE(strstr(r.note, "max_trials") != NULL);
  sl_bench_search_result_close(&r);
  so.down_factor = 1.5;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim2, &r),
                   SL_EINVAL);
  sl_bench_search_result_close(&r);
}

static size_t count_lines(FILE *f) {
  rewind(f);
  size_t n = 0;
  int c;
  while ((c = fgetc(f)) != EOF)
    if (c == '\n') n++;
  return n;
}

/* The CSV has a header and one line per trial; the summary names the
 * result. */
SL_TEST(search_csv_and_summary) {
  sim_t sim = {.capacity = 1e6, .queue_cap = 1e12, .seed = 700};
  sl_bench_search_opts_t so;
  search_opts(&so, 2e6);
  sl_bench_search_result_t r;
  SL_ASSERT_EQ_INT(sl_bench_search(&so, sim_trial, sim_release, &sim, &r),
                   SL_OK);
  FILE *f = tmpfile();
  SL_ASSERT_TRUE(f != NULL);
  SL_ASSERT_EQ_INT(sl_bench_search_write_csv(&r, f), SL_OK);
  SL_ASSERT_EQ_INT(count_lines(f), r.n_trials + 1);
  rewind(f);
  char line[512];
  SL_ASSERT_TRUE(fgets(line, sizeof(line), f) != NULL);
  SL_ASSERT_TRUE(strncmp(line, "trial,rate,sustainable,", 23) == 0);
  SL_ASSERT_TRUE(fgets(line, sizeof(line), f) != NULL);
  SL_ASSERT_TRUE(strncmp(line, "1,2000000,", 10) == 0);
  fclose(f);
  f = tmpfile();
  SL_ASSERT_TRUE(f != NULL);
  SL_ASSERT_EQ_INT(sl_bench_search_write_summary(&r, f), SL_OK);
  SL_ASSERT_TRUE(count_lines(f) > r.n_trials);
  rewind(f);
  bool found = false;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, "sustainable throughput")) found = true;
  SL_ASSERT_TRUE(found);
  fclose(f);
  sl_bench_search_result_close(&r);
}
