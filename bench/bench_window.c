/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Event-time window throughput (issue: window benchmark).  Two job shapes,
 * parallelism 1:
 *
 *   tumbling  generator (key, amount, ts) with bounded watermarks ->
 *             key_by(key) -> count per key in 10 s tumbling windows
 *             (sl_stream_window_aggregate) -> null sink
 *   sliding   the same with sliding windows of 10 s every 1 s (each row
 *             goes into 10 windows)
 *
 * The generator's event time advances by --step-us per record (default
 * 1 ms), so windows keep closing and firing; keys are uniform over --keys
 * (default 100,000).  The source and the window run in two tasks joined by
 * a hash exchange, as in bench_core's keyed shape.  One iteration runs a
 * bounded job of --records records and reports records per CPU-second of
 * the process (user + system over all threads): "records per second per
 * core".  Each shape runs in independent forked processes (bench/harness.c).
 * The default record counts (1 M tumbling, 100 k sliding) make one
 * iteration take about 3 s on the reference machine (BENCHMARKS.md).
 *
 * State size.  In iteration 0 of every fork (a warm-up iteration unless
 * --warmup 0) a probe wraps the window's event-time timer callback: at
 * the first timer of every new watermark it reads the number of live
 * (key, window) entries of the window's "window.acc" state
 * (sl__state_size, src/state/state.h), so it sees the state just before
 * each batch of windows fires.  It reports the peak, the count when the
 * final watermark (end of input) arrives, and the resident memory growth
 * of the process from before the job was created to that moment
 * (/proc/self/statm).  The other iterations run the operator unwrapped.
 * The probe reaches into the job graph (src/graph/graph.h) because the
 * public API has no state-size call; it does not change the operator.
 *
 * usage: sluice-bench-window [--shape tumbling|sliding|all] [--records N]
 *          [--keys K] [--step-us S] [--wm-interval-ms M] [--forks F]
 *          [--warmup W] [--iterations I] [--json PATH] [--verbose]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/sluice.h"
#include "graph/graph.h"     /* the probe: a node's process functions */
#include "runtime/runtime.h" /* the probe: an operator's state backend */
#include "state/state.h"

#define WINDOW_SIZE_US 10000000  /* 10 s */
#define WINDOW_SLIDE_US 1000000  /* 1 s (sliding) */
#define OUT_OF_ORDER_US 100000   /* 100 ms bounded out-of-orderness */
#define MAX_FORKS 1000

typedef struct cfg_s {
  const char *shape;
  uint64_t records;
  uint64_t keys;
  int64_t step_us;
  int64_t wm_interval_ms; /* 0: the engine's default (200 ms) */
  bool is_verbose;
} cfg_t;

/* ---- the state probe --------------------------------------------------- */

/* What iteration 0 of a fork saw, in memory shared with the parent. */
typedef struct probe_slot_s {
  int is_done;
  uint64_t n_end;       /* live entries when the final watermark arrived */
  uint64_t n_peak;      /* largest count seen before a batch of firings */
  uint64_t n_fired;     /* windows fired (= entries created: no lateness) */
  int64_t rss_growth;   /* bytes, before the job to end of input */
} probe_slot_t;

static probe_slot_t *slots; /* MAX_FORKS, MAP_SHARED */

/* Per-process probe state.  Written on the window task's thread while the
 * job runs, read on the main thread after sl_job_run has joined it. */
static struct {
  int (*orig)(sl_ctx_t *ctx, void *user, int64_t ts);
  int64_t last_wm;
  bool has_end;
  uint64_t n_end, n_peak, n_fired;
  long rss_end;
} probe;

static long resident_pages(void) {
  long pages = 0, rss = -1;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = -1;
  if (f) fclose(f);
  return rss;
}

static size_t acc_entries(sl_ctx_t *ctx) {
  sl_kstate_t *be = ctx->kstate;
  for (uint32_t i = 0; be && i < sl__kstate_n_states(be); i++) {
    sl_state_t *st = sl__kstate_state(be, i);
    if (strcmp(sl__state_desc(st)->name, "window.acc") == 0)
      return sl__state_size(st);
  }
  return 0;
}

static int probe_on_event_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  int64_t wm = sl_ctx_watermark(ctx);
  if (wm != probe.last_wm) {
    probe.last_wm = wm;
    uint64_t n = acc_entries(ctx);
    if (n > probe.n_peak) probe.n_peak = n;
    if (wm == SL_WATERMARK_MAX && !probe.has_end) {
      probe.has_end = true;
      probe.n_end = n;
      probe.rss_end = resident_pages();
    }
  }
  probe.n_fired++;
  return probe.orig(ctx, user, ts);
}

/* ---- the job ----------------------------------------------------------- */

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int run_job(const cfg_t *c, uint64_t seed, bool is_probed) {
  sl_job_config_t jc;
  sl_job_config_init(&jc);
  jc.parallelism = 1;
  sl_job_t *job;
  if (sl_job_create(&jc, &job, NULL) != SL_OK) return -1;
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.seed = seed;
  g.count = c->records;
  g.keys = c->keys;
  g.columns = SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT | SL_GEN_COL_TS;
  g.time_step_us = c->step_us;
  g.splits = 1; /* one split per subtask, as the measurements were taken */
  const sl_source_vt_t *svt;
  void *sctx;
  sl_schema_t *schema;
  if (sl_gen_source_create(&g, &svt, &sctx, &schema, NULL) != SL_OK) {
    sl_job_destroy(job);
    return -1;
  }
  sl_stream_t *s = sl_job_source(job, "gen", svt, sctx, schema);
  sl_watermark_config_t wc;
  sl_watermark_config_init(&wc);
  wc.time_field = "ts";
  wc.strategy = SL_WM_BOUNDED;
  wc.max_out_of_orderness_us = OUT_OF_ORDER_US;
  if (c->wm_interval_ms) wc.interval_ms = c->wm_interval_ms;
  s = sl_source_watermarks(s, &wc);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_window_spec_t ws;
  sl_window_spec_init(&ws);
  ws.time_field = "ts";
  ws.size_us = WINDOW_SIZE_US;
  if (strcmp(c->shape, "sliding") == 0) {
    ws.kind = SL_WINDOW_SLIDING;
    ws.slide_us = WINDOW_SLIDE_US;
  }
  sl_agg_t agg = {"n", SL_AGG_COUNT, NULL};
  s = sl_stream_window_aggregate(s, "window", &ws, &agg, 1);
  if (s && is_probed) {
    sl_op_cfg_t *oc = &s->node->cfg;
    probe.orig = oc->fns.on_event_timer;
    probe.last_wm = SL_WATERMARK_MIN;
    oc->fns.on_event_timer = probe_on_event_timer;
  }
  const sl_sink_vt_t *kvt;
  void *kctx;
  sl_null_sink_create(&kvt, &kctx);
  sl_stream_sink(s, "sink", kvt, kctx);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) fprintf(stderr, "job failed: %s\n", sl_error_message(err));
  sl_error_destroy(err);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  return rc == SL_OK ? 0 : -1;
}

static int iter(void *arg, sl_bench_ctx_t *ctx, double *out) {
  const cfg_t *c = arg;
  bool is_probed = ctx->iteration == 0 && ctx->fork < MAX_FORKS;
  long rss0 = is_probed ? resident_pages() : 0;
  double cpu0 = cpu_seconds();
  int64_t t0 = sl_bench_now_ns();
  if (run_job(c, ctx->seed + (uint64_t)ctx->iteration, is_probed) != 0)
    return -1;
  double wall = (double)(sl_bench_now_ns() - t0) / 1e9;
  double cpu = cpu_seconds() - cpu0;
  *out = (double)c->records / cpu;
  if (is_probed && probe.has_end && rss0 >= 0 && probe.rss_end >= 0) {
    probe_slot_t *ps = &slots[ctx->fork];
    ps->n_end = probe.n_end;
    ps->n_peak = probe.n_peak;
    ps->n_fired = probe.n_fired;
    ps->rss_growth = (int64_t)(probe.rss_end - rss0) * sysconf(_SC_PAGESIZE);
    ps->is_done = 1;
  }
  if (c->is_verbose)
    fprintf(stderr, "  fork %d iter %d: %.3f M rec/s wall, %.3f M rec/CPU-s, "
            "%.2f cores\n", ctx->fork, ctx->iteration,
            c->records / wall / 1e6, *out / 1e6, cpu / wall);
  return 0;
}

/* ---- main -------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The state the probes of the ok forks saw: medians over forks. */
typedef struct state_sum_s {
  size_t n;
  uint64_t n_end, n_peak, n_fired;
  int64_t rss_growth, rss_min, rss_max;
} state_sum_t;

static state_sum_t summarize_state(const sl_bench_result_t *res) {
  state_sum_t s = {0};
  static uint64_t e[MAX_FORKS], p[MAX_FORKS], f[MAX_FORKS];
  static int64_t r[MAX_FORKS];
  for (size_t i = 0; i < res->n_forks && i < MAX_FORKS; i++) {
    const probe_slot_t *ps = &slots[res->forks[i].index];
    if (!res->forks[i].is_ok || !ps->is_done) continue;
    e[s.n] = ps->n_end;
    p[s.n] = ps->n_peak;
    f[s.n] = ps->n_fired;
    r[s.n] = ps->rss_growth;
    s.n++;
  }
  if (s.n == 0) return s;
  qsort(e, s.n, sizeof(e[0]), cmp_u64);
  qsort(p, s.n, sizeof(p[0]), cmp_u64);
  qsort(f, s.n, sizeof(f[0]), cmp_u64);
  qsort(r, s.n, sizeof(r[0]), cmp_i64);
  s.n_end = e[s.n / 2];
  s.n_peak = p[s.n / 2];
  s.n_fired = f[s.n / 2];
  s.rss_growth = r[s.n / 2];
  s.rss_min = r[0];
  s.rss_max = r[s.n - 1];
  return s;
}

int main(int argc, char **argv) {
  const char *shape = "all", *json = NULL;
  uint64_t records = 0, keys = 100000, step_us = 1000, wm_interval_ms = 0;
  int forks = 5, warmup = 1, iterations = 3;
  bool is_verbose = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n = 0;
    bool is_num = v && sl_bench_parse_u64(v, &n);
    if (strcmp(a, "--shape") == 0 && v) shape = argv[++i];
    else if (strcmp(a, "--records") == 0 && is_num && n) records = n, i++;
    else if (strcmp(a, "--keys") == 0 && is_num && n) keys = n, i++;
    else if (strcmp(a, "--step-us") == 0 && is_num && n && n <= 1000000000)
      step_us = n, i++;
    else if (strcmp(a, "--wm-interval-ms") == 0 && is_num && n &&
             n <= 3600000)
      wm_interval_ms = n, i++;
    else if (strcmp(a, "--forks") == 0 && is_num && n && n <= MAX_FORKS)
      forks = (int)n, i++;
    else if (strcmp(a, "--warmup") == 0 && is_num && n <= 1000)
      warmup = (int)n, i++;
    else if (strcmp(a, "--iterations") == 0 && is_num && n && n <= 1000)
      iterations = (int)n, i++;
    else if (strcmp(a, "--json") == 0 && v) json = argv[++i];
    else if (strcmp(a, "--verbose") == 0) is_verbose = true;
    else {
      fprintf(stderr, "usage: %s [--shape tumbling|sliding|all] "
              "[--records N] [--keys K] [--step-us S] [--wm-interval-ms M] "
              "[--forks F] [--warmup W] [--iterations I] [--json PATH] "
              "[--verbose]\n"
              "  --records defaults to 1000000 (tumbling) and 100000 "
              "(sliding)\n", argv[0]);
      return 2;
    }
  }
  slots = mmap(NULL, MAX_FORKS * sizeof(probe_slot_t), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) {
    fprintf(stderr, "%s: mmap: %s\n", argv[0], strerror(errno));
    return 1;
  }
  const char *shapes[] = {"tumbling", "sliding"};
  const uint64_t default_records[] = {1000000, 100000};
  int failed = 0;
  FILE *jf = NULL;
  if (json) {
    jf = fopen(json, "w");
    if (jf == NULL) {
      fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], json,
              strerror(errno));
      return 1;
    }
    fputs("[\n", jf);
  }
  bool is_first = true;
  for (int si = 0; si < 2; si++) {
    if (strcmp(shape, "all") != 0 && strcmp(shape, shapes[si]) != 0) continue;
    memset(slots, 0, MAX_FORKS * sizeof(probe_slot_t));
    cfg_t c = {shapes[si], records ? records : default_records[si], keys,
               (int64_t)step_us, (int64_t)wm_interval_ms, is_verbose};
    const char *name = shapes[si];
    printf("%s: %llu records, %llu keys, event time +%lld us per record, "
           "window 10 s%s, watermarks bounded 100 ms every %lld ms\n", name,
           (unsigned long long)c.records, (unsigned long long)c.keys,
           (long long)c.step_us, si == 1 ? " every 1 s" : "",
           (long long)(c.wm_interval_ms ? c.wm_interval_ms : 200));
    sl_bench_opts_t o;
    sl_bench_opts_init(&o);
    o.name = name;
    o.unit = "records/s/core";
    o.n_forks = forks;
    o.n_warmup = warmup;
    o.n_iterations = iterations;
    o.summary = stdout;
    char jpath[512];
    if (json) {
      snprintf(jpath, sizeof(jpath), "%s.%s.json", json, name);
      o.json_path = jpath;
    }
    sl_bench_fn_t fn = {name, NULL, iter, NULL, &c, NULL};
    sl_bench_result_t *res = NULL;
    if (sl_bench_run(&o, &fn, &res) != 0 || res->n_failed) failed = 1;
    if (res == NULL) continue;
    state_sum_t st = summarize_state(res);
    /* In M, or in k below a million (sliding is ~10x slower). */
    double u = res->median >= 1e6 ? 1e6 : 1e3;
    const char *us = u == 1e6 ? "M" : "k";
    printf("%s: median %.4g %s, min %.4g %s, max %.4g %s records/s/core "
           "over %zu forks (mean %.4g %s, 95%% CI [%.4g, %.4g] %s)\n",
           name, res->median / u, us, res->min / u, us, res->max / u, us,
           res->n_ok, res->mean_ci.estimate / u, us, res->mean_ci.lo / u,
           res->mean_ci.hi / u, us);
    if (st.n)
      printf("%s state (iteration 0, median of %zu forks): %llu live "
             "(key, window) entries at end of input, peak %llu before a "
             "watermark fired; %llu windows fired; resident growth to end "
             "of input %.1f MB [%.1f, %.1f] (%.0f B per peak entry)\n",
             name, st.n, (unsigned long long)st.n_end,
             (unsigned long long)st.n_peak, (unsigned long long)st.n_fired,
             st.rss_growth / 1e6, st.rss_min / 1e6, st.rss_max / 1e6,
             st.n_peak ? (double)st.rss_growth / (double)st.n_peak : 0.0);
    if (jf) {
      fprintf(jf, "%s  {\"name\": \"%s\", \"records\": %llu, \"keys\": %llu, "
              "\"step_us\": %lld, \"median\": %.1f, \"min\": %.1f, "
              "\"max\": %.1f, \"mean\": %.1f, \"ci_lo\": %.1f, "
              "\"ci_hi\": %.1f, \"forks\": %zu, \"state_entries_end\": %llu, "
              "\"state_entries_peak\": %llu, \"windows_fired\": %llu, "
              "\"rss_growth_bytes\": %lld}", is_first ? "" : ",\n", name,
              (unsigned long long)c.records, (unsigned long long)c.keys,
              (long long)c.step_us, res->median, res->min, res->max,
              res->mean_ci.estimate, res->mean_ci.lo, res->mean_ci.hi,
              res->n_ok, (unsigned long long)st.n_end,
              (unsigned long long)st.n_peak, (unsigned long long)st.n_fired,
              (long long)st.rss_growth);
      is_first = false;
    }
    sl_bench_result_destroy(res);
  }
  if (jf) {
    fputs("\n]\n", jf);
    fclose(jf);
  }
  munmap(slots, MAX_FORKS * sizeof(probe_slot_t));
  return failed;
}
