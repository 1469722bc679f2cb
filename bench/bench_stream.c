/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-stream: streaming benchmarks fed by the streaming driver
 * (ring.h, workload.h), measured at the sink as a user feels them: event-
 * time latency and sustainable throughput (DESIGN.md §9, BENCHMARKS.md).
 *
 * One trial runs a query at a fixed offered rate for --duration seconds:
 *
 *   bench main ── fork ──> trial process: creates the rings, forks the
 *                          driver (before any engine thread exists), builds
 *                          and starts the sluice job (ring sources ->
 *                          query -> latency sink), releases the driver and
 *                          samples every --sample-ms: events generated and
 *                          consumed, ring backlog, latency percentiles of
 *                          the interval.  After --warmup seconds the
 *                          samples form the measurement window; its
 *                          latency histograms and the process's CPU time
 *                          (the driver is another process) are summed.
 *            driver process: writes events on schedule, stamped with their
 *                          scheduled time, never waiting (bench/ring.h).
 *
 * Modes
 *   run     one trial at --rate; prints the summary, --csv writes the
 *           time series (t_s,offered_rate,consumed_rate,backlog,
 *           lat_p50_ms,lat_p99_ms,lat_max_ms,driver_lag_ms).
 *   search  the sustainable-throughput search (bench/search.h): trials
 *           from --start-rate down (or up) until neither backlog nor
 *           latency grows; --searches K repeats the whole search K times
 *           (independent trials) and reports the mean sustainable rate
 *           with a Student-t 95% interval over searches.
 *
 * Queries (--query): queries.h.
 *
 * Throughput counts every event the driver generated (for Nexmark:
 * persons, auctions and bids, as Nexmark does), also those of streams the
 * query does not read, which the driver generates and does not queue.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "queries.h"
#include "search.h"
#include "stats.h"
#include "stream_io.h"
#include "workload.h"

#define MAX_SAMPLES 2048

typedef struct cfg_s {
  const char *query;
  uint32_t parallelism;
  double duration_s, warmup_s;
  int64_t sample_ms;
  int64_t checkpoint_ms;  /* 0: no checkpoints */
  int64_t buffer_timeout_ms; /* sl_job_config_t.buffer_timeout_ms */
  uint64_t keys;
  double zipf;
  uint64_t capacity;
  bool is_verbose;
} cfg_t;

/* A sample of the time series, as the run CSV has it. */
typedef struct point_s {
  double t_s, offered_rate, consumed_rate, backlog;
  double p50_ms, p99_ms, max_ms;
  double generated, consumed;
  double driver_lag_ms; /* how far the driver is behind its schedule */
} point_t;

/* What a trial process reports, in memory shared with its parent. */
typedef struct trial_shm_s {
  int is_done, is_failed;
  char error[512];
  double rate;
  size_t n_points;
  point_t points[MAX_SAMPLES];
  sl_bench_hist_t ev, pt;          /* measurement window */
  double cpu_s, wall_s;            /* measurement window */
  double generated, consumed;      /* measurement window */
  uint64_t overflow, dropped, skipped;
  int64_t driver_max_lag_ns;
  double window_max_lag_s;         /* driver lag, measurement window */
  uint64_t checkpoints;
  _Atomic int go;                  /* the driver may start */
  _Atomic int stop;                /* the driver should stop */
  sl_driver_report_t driver_final;
} trial_shm_t;

/* The ring sources of a trial (sl_query_source_fn). */
typedef struct ring_sources_s {
  const sl_workload_t *w;
  const char *prefix;
  sl_schema_t **schemas;
  uint32_t *n_schemas;
} ring_sources_t;

static sl_stream_t *ring_source(void *user, sl_job_t *job,
                                const char *stream_name) {
  ring_sources_t *rs = user;
  int si = sl_workload_stream(rs->w, stream_name);
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  if (si < 0 ||
      sl_ring_stream_schema(rs->w, (uint32_t)si, &schema, NULL) != SL_OK)
    return NULL;
  rs->schemas[(*rs->n_schemas)++] = schema;
  if (sl_ring_source_create(rs->w, rs->prefix, (uint32_t)si, &vt, &ctx,
                            NULL) != SL_OK)
    return NULL;
  sl_stream_t *s = sl_job_source(job, stream_name, vt, ctx, schema);
  sl_watermark_config_t wc;
  sl_watermark_config_init(&wc);
  wc.time_field = "date_time";
  /* The driver writes each ring in event-time order. */
  wc.strategy = SL_WM_MONOTONOUS;
  return sl_source_watermarks(s, &wc);
}

/* The query between the ring sources and the latency sink. */
static int build(sl_job_t *job, const sl_query_t *q, const sl_workload_t *w,
                 const char *prefix, sl_lat_shared_t *lat,
                 sl_schema_t **schemas, uint32_t *n_schemas,
                 sl_error_t **out_err) {
  ring_sources_t rs = {w, prefix, schemas, n_schemas};
  sl_stream_t *s = sl_query_build(job, q, ring_source, &rs, schemas,
                                  n_schemas, out_err);
  if (s == NULL) return -1;
  const sl_sink_vt_t *kvt;
  void *kctx;
  if (sl_lat_sink_create2(lat, q->time_field, q->time_field2,
                          q->ingest_field, q->ingest_field2, &kvt, &kctx))
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  return sl_stream_sink(s, "latency", kvt, kctx);
}

/* ---- one trial --------------------------------------------------------- */

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void sleep_until_ns(int64_t t) {
  for (;;) {
    int64_t d = t - sl_bench_now_ns();
    if (d <= 0) return;
    struct timespec ts = {(time_t)(d / 1000000000), (long)(d % 1000000000)};
    nanosleep(&ts, NULL);
  }
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void fail(trial_shm_t *shm, const char *fmt, const char *detail) {
  shm->is_failed = 1;
  snprintf(shm->error, sizeof(shm->error), fmt, detail ? detail : "");
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

/* The driver process: wait for go, generate, report, leave. */
static void driver_main(trial_shm_t *shm, sl_workload_t *w, sl_ring_t *rings,
                        double rate, double duration_s) {
  while (!atomic_load(&shm->go) && !atomic_load(&shm->stop)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  sl_driver_opts_t o;
  memset(&o, 0, sizeof(o));
  o.rate = rate;
  o.duration_s = duration_s;
  o.report_ms = 1000;
  o.stop = (_Atomic bool *)NULL;
  o.fill = sl_workload_fill;
  o.fill_user = w;
  if (!atomic_load(&shm->stop))
    sl_driver_run_rings(rings, w->n_rings, &o, &shm->driver_final);
  _exit(0);
}

/* The rings' counters (the sampler's view of the driver): *gen and *cons in all-event units (the driver's
 * sequence counts every event of the schedule, also those of streams the
 * query does not read, which no ring holds), *backlog in ring events, and
 * *seq the driver's sequence. */
static void ring_counters(const sl_ring_t *rings, uint32_t n, double *gen,
                          double *cons, double *backlog, uint64_t *ovf,
                          uint64_t *seq) {
  double ring_gen = 0, ring_cons = 0;
  *backlog = 0;
  *ovf = 0;
  *seq = atomic_load_explicit(&rings[0].hdr->sequence, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    sl_ring_hdr_t *h = rings[i].hdr;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    uint64_t o = atomic_load_explicit(&h->overflow, memory_order_relaxed);
    ring_gen += (double)(head + o);
    ring_cons += (double)tail;
    *backlog += (double)(head - tail);
    *ovf += o;
  }
  /* Consumed in all-event units: ring events consumed times all events
   * per ring event (exact for q0..q2, whose ring gets every bid). */
  *gen = (double)*seq;
  *cons = ring_gen > 0 ? ring_cons * (*gen / ring_gen) : 0;
  if (*gen < ring_gen) *gen = ring_gen; /* sequence is read first */
}

/* The trial process.  Never returns. */
static void trial_main(const cfg_t *c, const sl_query_t *q, double rate,
                       trial_shm_t *shm) {
  char prefix[128], ckdir[128] = "";
  snprintf(prefix, sizeof(prefix), "/dev/shm/sluice-bench-%d", (int)getpid());
  sl_workload_t w;
  sl_workload_defaults(&w);
  w.kind = q->workload;
  w.needed = q->needed;
  w.splits = c->parallelism;
  w.keys = c->keys ? c->keys : (q->workload == SL_WORKLOAD_PAIRS ? 10000000
                                                                   : 100000);
  w.zipf = strcmp(q->name, "count") == 0 ? c->zipf : 0;
  w.capacity = c->capacity;
  w.nexmark.events_per_second = rate;
  shm->rate = rate;
  if (sl_workload_init(&w) != 0) {
    fail(shm, "bad workload settings%s", NULL);
    _exit(1);
  }
  sl_ring_t rings[SL_WORKLOAD_MAX_STREAMS * SL_WORKLOAD_MAX_SPLITS];
  int rc = sl_workload_create_rings(&w, prefix, rings);
  if (rc != 0) {
    fail(shm, "cannot create the rings: %s", strerror(-rc));
    _exit(1);
  }
  /* Touch every ring page now, so that neither side takes page faults
   * during the run (a start-up transient otherwise). */
  for (uint32_t i = 0; i < w.n_rings; i++)
    memset(rings[i].ev, 0, (size_t)rings[i].hdr->capacity *
                               rings[i].hdr->slot_size);
  /* The driver first: forking after the engine's threads exist would copy
   * a process whose locks other threads may hold. */
  pid_t drv = fork();
  if (drv < 0) {
    fail(shm, "fork: %s", strerror(errno));
    sl_workload_remove_rings(&w, prefix, rings);
    _exit(1);
  }
  if (drv == 0) driver_main(shm, &w, rings, rate, c->duration_s);

  sl_lat_shared_t lat;
  sl_lat_shared_init(&lat);
  sl_job_config_t jc;
  sl_job_config_init(&jc);
  jc.name = q->name;
  jc.parallelism = c->parallelism;
  jc.n_workers = c->parallelism;
  jc.buffer_timeout_ms = c->buffer_timeout_ms;
  if (c->checkpoint_ms > 0) {
    snprintf(ckdir, sizeof(ckdir), "/tmp/sluice-bench-ckpt-XXXXXX");
    if (mkdtemp(ckdir) == NULL) {
      fail(shm, "mkdtemp: %s", strerror(errno));
      ckdir[0] = 0;
    }
    jc.checkpoint.dir = ckdir;
    jc.checkpoint.interval_ms = c->checkpoint_ms;
  }
  sl_job_t *job = NULL;
  sl_error_t *err = NULL;
  sl_schema_t *schemas[8];
  uint32_t n_schemas = 0;
  bool is_ok = !shm->is_failed;
  if (is_ok) is_ok = sl_job_create(&jc, &job, &err) == SL_OK;
  if (is_ok)
    is_ok = build(job, q, &w, prefix, &lat, schemas, &n_schemas, &err) ==
            SL_OK;
  if (is_ok) is_ok = sl_job_start(job, &err) == SL_OK;
  if (!is_ok && !shm->is_failed)
    fail(shm, "the job did not start: %s",
         err ? sl_error_message(err) : "(no message)");
  if (!is_ok) atomic_store(&shm->stop, 1);
  atomic_store(&shm->go, 1);

  /* Sample until the driver has run its course. */
  int64_t t0 = sl_bench_now_ns(), step = c->sample_ms * 1000000;
  int64_t end = t0 + (int64_t)(c->duration_s * 1e9);
  double prev_gen = 0, prev_cons = 0, cpu0 = 0, gen0 = 0, cons0 = 0;
  int64_t w0 = 0;
  bool is_measuring = false;
  sl_bench_hist_t ev, pt;
  sl_bench_hist_init(&shm->ev);
  sl_bench_hist_init(&shm->pt);
  int64_t prev_t = t0;
  uint64_t last_ckpt = 0;
  for (int64_t t = t0 + step; is_ok && t <= end; t += step) {
    sleep_until_ns(t);
    int64_t now = sl_bench_now_ns();
    double gen, cons, backlog;
    uint64_t ovf, seq;
    ring_counters(rings, w.n_rings, &gen, &cons, &backlog, &ovf, &seq);
    /* The driver's lag: events its schedule owes, in ms.  Event stamps
     * are scheduled times, so a lagging driver shows as latency; the slope
     * test also rejects a trial whose driver fell behind (the rate was not
     * offered). */
    double owed = rate * (double)(now - rings[0].hdr->t0_ns) / 1e9 -
                  (double)seq;
    double lag_ms = owed > 0 ? 1e3 * owed / rate : 0.0;
    sl_lat_shared_take(&lat, &ev, &pt);
    double dt = (double)(now - prev_t) / 1e9;
    point_t *p = &shm->points[shm->n_points < MAX_SAMPLES ? shm->n_points++
                                                          : MAX_SAMPLES - 1];
    p->t_s = (double)(now - t0) / 1e9;
    p->offered_rate = (gen - prev_gen) / dt;
    p->consumed_rate = (cons - prev_cons) / dt;
    p->backlog = backlog;
    p->generated = gen;
    p->consumed = cons;
    p->driver_lag_ms = lag_ms;
    if (is_measuring && lag_ms / 1e3 > shm->window_max_lag_s)
      shm->window_max_lag_s = lag_ms / 1e3;
    bool has = sl_bench_hist_count(&ev) > 0;
    p->p50_ms = has ? ms(sl_bench_hist_quantile(&ev, 0.5)) : NAN;
    p->p99_ms = has ? ms(sl_bench_hist_quantile(&ev, 0.99)) : NAN;
    p->max_ms = has ? ms(sl_bench_hist_max(&ev)) : NAN;
    if (is_measuring) {
      sl_bench_hist_merge(&shm->ev, &ev);
      sl_bench_hist_merge(&shm->pt, &pt);
    } else if (p->t_s >= c->warmup_s) {
      is_measuring = true;
      cpu0 = cpu_seconds();
      w0 = now;
      gen0 = gen;
      cons0 = cons;
    }
    if (c->is_verbose)
      fprintf(stderr, "  %6.2f s offered %.0f consumed %.0f backlog %.0f "
              "p99 %.2f ms\n", p->t_s, p->offered_rate, p->consumed_rate,
              backlog, p->p99_ms);
    sl_checkpoint_stats_t cs; /* the phases of each checkpoint (verbose) */
    if (c->is_verbose && job && sl_job_last_checkpoint(job, &cs) == SL_OK &&
        cs.id != last_ckpt) {
      last_ckpt = cs.id;
      fprintf(stderr, "  checkpoint %llu: %.2f ms, barrier delay %.2f, "
              "alignment %.2f, sync %.2f, async %.2f ms, %llu bytes\n",
              (unsigned long long)cs.id, cs.duration_ns / 1e6,
              cs.max_barrier_delay_ns / 1e6, cs.max_alignment_ns / 1e6,
              cs.max_sync_ns / 1e6, cs.max_async_ns / 1e6,
              (unsigned long long)cs.bytes);
    }
    prev_gen = gen;
    prev_cons = cons;
    prev_t = now;
  }
  if (is_measuring) {
    double gen, cons, backlog;
    uint64_t seq;
    ring_counters(rings, w.n_rings, &gen, &cons, &backlog, &shm->overflow,
                  &seq);
    shm->cpu_s = cpu_seconds() - cpu0;
    shm->wall_s = (double)(sl_bench_now_ns() - w0) / 1e9;
    shm->generated = shm->points[shm->n_points - 1].generated - gen0;
    shm->consumed = shm->points[shm->n_points - 1].consumed - cons0;
  }
  int status = 0;
  waitpid(drv, &status, 0);
  shm->dropped = shm->driver_final.dropped;
  shm->skipped = shm->driver_final.skipped;
  shm->driver_max_lag_ns = shm->driver_final.max_lag_ns;
  if (job) {
    sl_checkpoint_stats_t cs;
    if (sl_job_last_checkpoint(job, &cs) == SL_OK) shm->checkpoints = cs.id;
    sl_job_cancel(job);
    sl_error_t *werr = NULL;
    rc = is_ok ? sl_job_wait(job, &werr) : SL_ECANCELED;
    if (rc != SL_OK && rc != SL_ECANCELED && !shm->is_failed)
      fail(shm, "the job failed: %s",
           werr ? sl_error_message(werr) : sl_strerror(rc));
    sl_error_destroy(werr);
    sl_job_destroy(job);
  }
  if (shm->dropped && !shm->is_failed)
    fail(shm, "the driver could not encode some events%s", NULL);
  sl_error_destroy(err);
  for (uint32_t i = 0; i < n_schemas; i++) sl_schema_unref(schemas[i]);
  sl_lat_shared_destroy(&lat);
  sl_workload_remove_rings(&w, prefix, rings);
  sl_workload_close(&w);
  if (ckdir[0]) nftw(ckdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  shm->is_done = 1;
  _exit(shm->is_failed ? 1 : 0);
}

/* Run one trial in a fresh process; the result stays in *shm. */
static int run_trial(const cfg_t *c, const sl_query_t *q, double rate,
                     trial_shm_t *shm) {
  memset(shm, 0, sizeof(*shm));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) trial_main(c, q, rate, shm);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!shm->is_done && !shm->is_failed) {
    shm->is_failed = 1;
    snprintf(shm->error, sizeof(shm->error), "the trial process %s %d",
             WIFSIGNALED(status) ? "was killed by signal" : "exited with",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  return shm->is_failed ? -1 : 0;
}

static void write_csv(const trial_shm_t *shm, FILE *f) {
  fprintf(f, "t_s,offered_rate,consumed_rate,backlog,lat_p50_ms,lat_p99_ms,"
          "lat_max_ms,driver_lag_ms\n");
  for (size_t i = 0; i < shm->n_points; i++) {
    const point_t *p = &shm->points[i];
    fprintf(f, "%.3f,%.0f,%.0f,%.0f,%.3f,%.3f,%.3f,%.3f\n", p->t_s,
            p->offered_rate, p->consumed_rate, p->backlog, p->p50_ms,
            p->p99_ms, p->max_ms, p->driver_lag_ms);
  }
}

static double q_ms(const sl_bench_hist_t *h, double q) {
  return sl_bench_hist_count(h) ? ms(sl_bench_hist_quantile(h, q)) : NAN;
}

static void print_trial(const trial_shm_t *shm, FILE *f) {
  double util = shm->wall_s > 0 ? shm->cpu_s / shm->wall_s : NAN;
  double gen_rate = shm->wall_s > 0 ? shm->generated / shm->wall_s : NAN;
  fprintf(f, "rate %.0f events/s: measured %.0f generated/s, %.0f consumed/s "
          "(all events), sluice %.2f cores -> %.0f events/s/core; backlog "
          "at end %.0f, overflow %llu; event-time latency p50 %.2f p90 %.2f "
          "p99 %.2f p99.9 %.2f max %.2f ms; processing-time p50 %.2f p99 "
          "%.2f ms; driver max lag %.2f ms; checkpoints %llu\n",
          shm->rate, gen_rate, shm->wall_s > 0 ? shm->consumed / shm->wall_s
                                               : NAN,
          util, gen_rate / util,
          shm->n_points ? shm->points[shm->n_points - 1].backlog : NAN,
          (unsigned long long)shm->overflow, q_ms(&shm->ev, 0.5),
          q_ms(&shm->ev, 0.9), q_ms(&shm->ev, 0.99), q_ms(&shm->ev, 0.999),
          sl_bench_hist_count(&shm->ev) ? ms(sl_bench_hist_max(&shm->ev)) : NAN,
          q_ms(&shm->pt, 0.5), q_ms(&shm->pt, 0.99),
          ms(shm->driver_max_lag_ns), (unsigned long long)shm->checkpoints);
}

/* ---- modes ------------------------------------------------------------- */

static const char usage[] =
    "usage: %s run    --query Q --rate R [options] [--csv PATH]\n"
    "       %s search --query Q --start-rate R [options] [--searches K]\n"
    "                 [--csv PATH] [--runs-dir DIR]\n"
    "queries: q0 q1 q2 q3 q4 q5 q7 q8 count wagg wjoin (queries.h)\n"
    "options: --parallelism P (1)  --duration S (16)  --warmup S (6)\n"
    "         --sample-ms MS (500)  --checkpoint-ms MS (0: off)\n"
    "         --buffer-timeout-ms MS (10; 0: every record, -1: off)\n"
    "         --keys K  --zipf S (count: 1.0)  --capacity EVENTS (2^21)\n"
    "         --verbose\n";

static bool parse_f(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

typedef struct search_user_s {
  const cfg_t *c;
  const sl_query_t *q;
  trial_shm_t *shm;
  const char *runs_dir;  /* write each trial's time series here, or NULL */
  int search_no;
  int trial_no;
} search_user_t;

/* The search's trial: run one in a fresh process and hand its series over. */
static int search_trial(void *user, double rate, sl_bench_trial_t *out) {
  search_user_t *u = user;
  trial_shm_t *shm = u->shm;
  int rc = run_trial(u->c, u->q, rate, shm);
  memset(out, 0, sizeof(*out));
  out->rate = rate;
  u->trial_no++;
  if (rc != 0) {
    out->is_failed = true;
    snprintf(out->error, sizeof(out->error), "%.200s", shm->error);
    fprintf(stderr, "trial at %.0f events/s failed: %s\n", rate, shm->error);
    return 0;
  }
  print_trial(shm, stderr);
  if (u->runs_dir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-p%u-s%d-t%02d.csv", u->runs_dir,
             u->q->name, u->c->parallelism, u->search_no, u->trial_no);
    FILE *f = fopen(path, "w");
    if (f) {
      write_csv(shm, f);
      fclose(f);
    }
  }
  out->samples = calloc(shm->n_points ? shm->n_points : 1, sizeof(*out->samples));
  if (out->samples == NULL) return -1;
  for (size_t i = 0; i < shm->n_points; i++) {
    const point_t *p = &shm->points[i];
    out->samples[i] = (sl_bench_sample_t){p->t_s, p->backlog, p->p99_ms,
                                          p->generated, p->consumed};
  }
  out->n_samples = shm->n_points;
  out->is_overflow = shm->overflow > 0;
  out->max_generator_lag_s = shm->window_max_lag_s;
  out->p50_ms = q_ms(&shm->ev, 0.5);
  out->p90_ms = q_ms(&shm->ev, 0.9);
  out->p99_ms = q_ms(&shm->ev, 0.99);
  out->p999_ms = q_ms(&shm->ev, 0.999);
  out->max_ms = sl_bench_hist_count(&shm->ev) ? ms(sl_bench_hist_max(&shm->ev))
                                              : NAN;
  return 0;
}

static void search_release(void *user, sl_bench_trial_t *t) {
  (void)user;
  free(t->samples);
  t->samples = NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "run") != 0 &&
                   strcmp(argv[1], "search") != 0)) {
    fprintf(stderr, usage, argv[0], argv[0]);
    return 2;
  }
  bool is_search = strcmp(argv[1], "search") == 0;
  cfg_t c = {NULL, 1, 16, 6, 500, 0, SL_DEFAULT_BUFFER_TIMEOUT_MS, 0, 1.0,
             1u << 21, false};
  double rate = 0, start_rate = 0;
  uint64_t searches = 1;
  const char *csv = NULL, *runs_dir = NULL;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n = 0;
    double d = 0;
    bool is_num = v && sl_bench_parse_u64(v, &n);
    bool is_f = v && parse_f(v, &d);
    bool ok = true;
    if (strcmp(a, "--query") == 0 && v) c.query = v;
    else if (strcmp(a, "--rate") == 0 && is_f && d > 0) rate = d;
    else if (strcmp(a, "--start-rate") == 0 && is_f && d > 0) start_rate = d;
    else if (strcmp(a, "--parallelism") == 0 && is_num && n >= 1 &&
             n <= SL_WORKLOAD_MAX_SPLITS)
      c.parallelism = (uint32_t)n;
    else if (strcmp(a, "--duration") == 0 && is_f && d >= 1 && d <= 600)
      c.duration_s = d;
    else if (strcmp(a, "--warmup") == 0 && is_f) c.warmup_s = d;
    else if (strcmp(a, "--sample-ms") == 0 && is_num && n >= 10) c.sample_ms = (int64_t)n;
    else if (strcmp(a, "--checkpoint-ms") == 0 && is_num) c.checkpoint_ms = (int64_t)n;
    else if (strcmp(a, "--buffer-timeout-ms") == 0 && v)
      c.buffer_timeout_ms = strtoll(v, NULL, 10);
    else if (strcmp(a, "--keys") == 0 && is_num && n) c.keys = n;
    else if (strcmp(a, "--zipf") == 0 && is_f) c.zipf = d;
    else if (strcmp(a, "--capacity") == 0 && is_num && n >= 1024) c.capacity = n;
    else if (strcmp(a, "--searches") == 0 && is_num && n >= 1 && n <= 100) searches = n;
    else if (strcmp(a, "--csv") == 0 && v) csv = v;
    else if (strcmp(a, "--runs-dir") == 0 && v) runs_dir = v;
    else if (strcmp(a, "--verbose") == 0) { c.is_verbose = true; continue; }
    else ok = false;
    if (!ok) {
      fprintf(stderr, "%s: bad or missing value for '%s'\n", argv[0], a);
      fprintf(stderr, usage, argv[0], argv[0]);
      return 2;
    }
    i++;
  }
  const sl_query_t *q = c.query ? sl_query_find(c.query) : NULL;
  if (q == NULL) {
    fprintf(stderr, "%s: %s '%s'\n", argv[0],
            c.query ? "unknown query" : "--query is required:",
            c.query ? c.query : sl_query_names());
    return 2;
  }
  if (c.warmup_s + 2.0 * (double)c.sample_ms / 1000 >= c.duration_s) {
    fprintf(stderr, "%s: --warmup %.1f leaves no measurement window in "
            "--duration %.1f\n", argv[0], c.warmup_s, c.duration_s);
    return 2;
  }
  if ((!is_search && rate <= 0) || (is_search && start_rate <= 0)) {
    fprintf(stderr, "%s: %s is required\n", argv[0],
            is_search ? "--start-rate" : "--rate");
    return 2;
  }
  trial_shm_t *shm = mmap(NULL, sizeof(trial_shm_t), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) {
    fprintf(stderr, "%s: mmap: %s\n", argv[0], strerror(errno));
    return 1;
  }
  printf("# %s, parallelism %u, %s, trial %.0f s (warm-up %.0f s, samples "
         "every %lld ms)\n", q->what, c.parallelism,
         c.checkpoint_ms ? "exactly-once checkpoints" : "no checkpoints",
         c.duration_s, c.warmup_s, (long long)c.sample_ms);
  if (c.checkpoint_ms) printf("# checkpoint interval %lld ms\n",
                              (long long)c.checkpoint_ms);
  int status = 0;
  if (!is_search) {
    if (run_trial(&c, q, rate, shm) != 0) {
      fprintf(stderr, "%s: %s\n", argv[0], shm->error);
      status = 1;
    } else {
      print_trial(shm, stdout);
      if (csv) {
        FILE *f = fopen(csv, "w");
        if (f == NULL) {
          fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], csv,
                  strerror(errno));
          status = 1;
        } else {
          write_csv(shm, f);
          fclose(f);
        }
      }
    }
  } else {
    double found[100];
    size_t n_found = 0;
    for (uint64_t k = 0; k < searches; k++) {
      search_user_t u = {&c, q, shm, runs_dir, (int)k, 0};
      sl_bench_search_opts_t so;
      sl_bench_search_opts_init(&so);
      so.start_rate = start_rate;
      so.slope.warmup_s = c.warmup_s;
      so.slope.max_end_backlog_s = 0.5;
      sl_bench_search_result_t res;
      if (sl_bench_search(&so, search_trial, search_release, &u, &res) != 0) {
        fprintf(stderr, "%s: search %llu failed\n", argv[0],
                (unsigned long long)k);
        status = 1;
        continue;
      }
      sl_bench_search_write_summary(&res, stdout);
      /* Was the bound the driver's?  Then the figure is a lower bound for
       * sluice, and must be reported as such. */
      for (size_t i = 0; res.is_found && i < res.n_trials; i++) {
        const sl_bench_search_trial_t *st = &res.trials[i];
        if (st->rate == res.unsustainable_rate &&
            (st->verdict.reasons & SL_BENCH_UNSUST_GENERATOR)) {
          printf("driver-bound: at %.6g events/s the driver fell behind its "
                 "schedule; sluice sustains at least %.6g events/s here\n",
                 st->rate, res.sustainable_rate);
          break;
        }
      }
      if (csv) {
        char path[4096];
        if (searches > 1) snprintf(path, sizeof(path), "%s.%llu", csv,
                                   (unsigned long long)k);
        else snprintf(path, sizeof(path), "%s", csv);
        FILE *f = fopen(path, "w");
        if (f) {
          sl_bench_search_write_csv(&res, f);
          fclose(f);
        }
      }
      if (res.is_found) found[n_found++] = res.sustainable_rate;
      sl_bench_search_result_close(&res);
    }
    if (n_found >= 2) {
      sl_bench_interval_t iv;
      sl_bench_t_interval(found, n_found, 0.95, &iv);
      printf("%s p%u: sustainable throughput mean %.0f events/s, 95%% CI "
             "[%.0f, %.0f] over %zu searches\n", q->name, c.parallelism,
             iv.estimate, iv.lo, iv.hi, n_found);
    } else if (n_found == 1) {
      printf("%s p%u: sustainable throughput %.0f events/s (one search)\n",
             q->name, c.parallelism, found[0]);
    }
  }
  munmap(shm, sizeof(trial_shm_t));
  return status;
}
