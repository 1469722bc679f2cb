/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Windows and joins restored from a checkpoint taken mid-window.  The
 * gated sequence source (seq_job.h) emits (key, seq, ts); the sources stop
 * at a gate in the middle of a window while checkpoint 1 is taken, a
 * failure is injected at a protocol step of checkpoint 2, and the job
 * restarts from the latest completed checkpoint with its pending windows,
 * buffered join rows and event-time timers.  The sinks are idempotent
 * views (a window result per (key, window), a set of joined pairs), so the
 * rows a restart emits again must be equal to the first ones; the final
 * view must equal an independent computation — aligned and unaligned, at
 * parallelism 1 and 4.
 */
#include "seq_job.h"

#include "sluice/sl_time.h"
#include "sluice/sl_window.h"

enum { WIN_US = 37000, N_WIN = PER_SPLIT * 1000 / WIN_US + 4, JOIN_US = 60000 };

/* The windows: tumbling of WIN_US, sliding of 2 WIN_US every WIN_US, or
 * cumulate up to 3 WIN_US by WIN_US; every window ends at a multiple of
 * WIN_US, and is found by its end. */
static sl_window_kind_t win_kind = SL_WINDOW_TUMBLING;

static int64_t win_count[N_KEYS][N_WIN], win_sum[N_KEYS][N_WIN];
static uint8_t pair_seen[N_SPLITS * PER_SPLIT][3];
static int bad_rows;
static char bad_msg[256];

static void bad(const char *fmt, long long a, long long b, long long c) {
  pthread_mutex_lock(&lock);
  if (bad_rows++ == 0) snprintf(bad_msg, sizeof(bad_msg), fmt, a, b, c);
  pthread_mutex_unlock(&lock);
}

/* ---- idempotent sinks -------------------------------------------------- */

static int win_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)e;
  int64_t k = sl_row_get_i64(row, 0), start = sl_row_get_i64(row, 1);
  int64_t end = sl_row_get_i64(row, 2);
  int64_t n = sl_row_get_i64(row, 4), sum = sl_row_get_i64(row, 5);
  int64_t want_start = win_kind == SL_WINDOW_TUMBLING  ? end - WIN_US
                       : win_kind == SL_WINDOW_SLIDING ? end - 2 * WIN_US
                       : (end - 1) / (3 * WIN_US) * (3 * WIN_US);
  if (k < 0 || k >= N_KEYS || end % WIN_US || end / WIN_US >= N_WIN ||
      start != want_start) {
    bad("window result for key %lld start %lld end %lld", k, start, end);
    return SL_OK;
  }
  int64_t wi = end / WIN_US;
  pthread_mutex_lock(&lock);
  bool differs = win_count[k][wi] && (win_count[k][wi] != n || win_sum[k][wi] != sum);
  int64_t old = win_count[k][wi];
  win_count[k][wi] = n;
  win_sum[k][wi] = sum;
  pthread_mutex_unlock(&lock);
  if (differs)
    bad("key %lld window %lld emitted again with another count (%lld)", k,
        start, old);
  return SL_OK;
}

static int join_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)e;
  /* key seq ts key_right seq_right ts_right */
  int64_t k = sl_row_get_i64(row, 0), ta = sl_row_get_i64(row, 2);
  int64_t tb = sl_row_get_i64(row, 5);
  int64_t ia = ta / 1000, ib = tb / 1000, split = k / KEYS_PER_SPLIT;
  int64_t d = (ib - ia) / KEYS_PER_SPLIT;
  if (sl_row_get_i64(row, 3) != k || (ib - ia) % KEYS_PER_SPLIT || d < -1 ||
      d > 1 || ia < 0 || ia >= PER_SPLIT) {
    bad("joined pair of key %lld at %lld and %lld is not in the interval", k,
        ta, tb);
    return SL_OK;
  }
  pthread_mutex_lock(&lock);
  pair_seen[split * PER_SPLIT + ia][d + 1] = 1;
  pthread_mutex_unlock(&lock);
  return SL_OK;
}

static const sl_sink_vt_t win_sink_vt = {"windows", sink_open, win_write,
                                         NULL, sink_close, sink_destroy};
static const sl_sink_vt_t join_sink_vt = {"pairs", sink_open, join_write,
                                          NULL, sink_close, sink_destroy};

/* ---- jobs ---------------------------------------------------------------- */

static sl_schema_t *seq_schema(void) {
  sl_field_t f[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                     {"seq", {SL_TYPE_INT64, 0, 0, false}},
                     {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, 3, &s, NULL));
  return s;
}

static sl_stream_t *keyed_source(sl_job_t *job, const char *uid, void *ctx,
                                 sl_schema_t *schema) {
  sl_stream_t *s = sl_job_source(job, uid, &src_vt, ctx, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.strategy = SL_WM_MONOTONOUS;
  wm.interval_ms = 1;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  return sl_stream_key_by_fields(s, key, 1);
}

static sl_job_t *window_job(const sl_job_config_t *cfg) {
  sl_schema_t *schema = seq_schema();
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(cfg, &job, NULL));
  sl_stream_t *s = keyed_source(job, "seq-source", NULL, schema);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.kind = win_kind;
  spec.size_us = win_kind == SL_WINDOW_TUMBLING ? WIN_US
                 : win_kind == SL_WINDOW_SLIDING ? 2 * WIN_US : 3 * WIN_US;
  spec.slide_us = win_kind == SL_WINDOW_SLIDING ? WIN_US : 0;
  spec.step_us = win_kind == SL_WINDOW_CUMULATE ? WIN_US : 0;
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}, {"sum", SL_AGG_SUM, "seq"}};
  s = sl_stream_window_aggregate(s, "window", &spec, aggs, 2);
  SL_ASSERT_OK(sl_stream_sink(s, "windows", &win_sink_vt, NULL));
  SL_ASSERT_TRUE(sl_job_error(job) == NULL);
  sl_schema_unref(schema);
  return job;
}

static sl_job_t *join_job(const sl_job_config_t *cfg) {
  sl_schema_t *schema = seq_schema();
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(cfg, &job, NULL));
  sl_stream_t *a = keyed_source(job, "left", NULL, schema);
  sl_stream_t *b = keyed_source(job, "right", SEQ_SOURCE_2, schema);
  sl_interval_join_spec_t spec = {"ts", "ts", -JOIN_US, JOIN_US};
  sl_stream_t *j = sl_stream_interval_join(a, b, "join", &spec);
  SL_ASSERT_OK(sl_stream_sink(j, "pairs", &join_sink_vt, NULL));
  SL_ASSERT_TRUE(sl_job_error(job) == NULL);
  sl_schema_unref(schema);
  return job;
}

/* ---- checks -------------------------------------------------------------- */

static void check_windows(const char *what) {
  static int64_t want_n[N_KEYS][N_WIN], want_s[N_KEYS][N_WIN];
  memset(want_n, 0, sizeof(want_n));
  memset(want_s, 0, sizeof(want_s));
  for (int s = 0; s < N_SPLITS; s++)
    for (int64_t i = 0; i < PER_SPLIT; i++) {
      int64_t k = s * KEYS_PER_SPLIT + i % KEYS_PER_SPLIT;
      int64_t ts = i * 1000, e0 = ts / WIN_US + 1; /* first end / WIN_US */
      int64_t e1 = win_kind == SL_WINDOW_TUMBLING  ? e0
                   : win_kind == SL_WINDOW_SLIDING ? e0 + 1
                   : ts / (3 * WIN_US) * 3 + 3;
      for (int64_t wi = e0; wi <= e1; wi++) {
        want_n[k][wi]++;
        want_s[k][wi] += i / KEYS_PER_SPLIT;
      }
    }
  if (bad_rows) SL_TEST_FAIL("%s: %s", what, bad_msg);
  for (int k = 0; k < N_KEYS; k++)
    for (int w = 0; w < N_WIN; w++)
      if (win_count[k][w] != want_n[k][w] || win_sum[k][w] != want_s[k][w])
        SL_TEST_FAIL("%s: key %d window %d: count %lld sum %lld, expected "
                     "%lld and %lld", what, k, w, (long long)win_count[k][w],
                     (long long)win_sum[k][w], (long long)want_n[k][w],
                     (long long)want_s[k][w]);
}

static void check_pairs(const char *what) {
  if (bad_rows) SL_TEST_FAIL("%s: %s", what, bad_msg);
  /* Left row i of split s joins right rows i - 50, i, i + 50 (same key,
   * within 60 ms) that exist. */
  for (int s = 0; s < N_SPLITS; s++)
    for (int64_t i = 0; i < PER_SPLIT; i++)
      for (int d = -1; d <= 1; d++) {
        int64_t j = i + d * KEYS_PER_SPLIT;
        bool want = j >= 0 && j < PER_SPLIT;
        if (pair_seen[s * PER_SPLIT + i][d + 1] != want)
          SL_TEST_FAIL("%s: split %d row %lld with row %lld: %s", what, s,
                       (long long)i, (long long)j,
                       want ? "missing" : "unexpected");
      }
}

/* ---- runs ---------------------------------------------------------------- */

static uint64_t checkpoint(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  int rc = sl_job_trigger_checkpoint(job, &id, &err);
  sl_error_destroy(err);
  if (rc != SL_OK) return 0;
  return sl_job_wait_checkpoint(job, id, 60000, NULL) == SL_OK ? id : 0;
}

static const char *points[] = {NULL, "task.after_sync_snapshot",
                               "task.before_barrier_forward",
                               "task.on_first_barrier"};

static void run_one(bool is_join, sl_ckpt_mode_t mode, uint32_t par,
                    const char *point, int run) {
  sl_inject_reset();
  seq_reset();
  pthread_mutex_lock(&lock);
  memset(win_count, 0, sizeof(win_count));
  memset(win_sum, 0, sizeof(win_sum));
  memset(pair_seen, 0, sizeof(pair_seen));
  bad_rows = 0;
  pthread_mutex_unlock(&lock);
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/run-%d", sl_test_dir(), run);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = is_join ? "join" : "window";
  cfg.parallelism = par;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  cfg.checkpoint.mode = mode;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  sl_job_t *job = is_join ? join_job(&cfg) : window_job(&cfg);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  /* The gates lie inside windows (windows of 37 records of a split). */
  set_gate(PER_SPLIT / 3 + 7);
  while (checkpoint(job) == 0) {
  }
  if (point) SL_ASSERT_OK(sl_inject_arm(point, SL_INJECT_FAIL, 1, false));
  set_gate(2 * PER_SPLIT / 3 + 11);
  checkpoint(job);
  checkpoint(job);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  int rc = sl_job_wait(job, &err);
  char what[160];
  snprintf(what, sizeof(what), "%s, %s, parallelism %u, point %s",
           is_join                          ? "interval join"
           : win_kind == SL_WINDOW_SLIDING  ? "sliding window"
           : win_kind == SL_WINDOW_CUMULATE ? "cumulate window"
                                            : "tumbling window",
           mode == SL_CKPT_ALIGNED ? "aligned" : "unaligned", par,
           point ? point : "(none)");
  if (rc != SL_OK) SL_TEST_FAIL("%s: job failed: %s", what,
                                sl_error_message(err));
  if (point && sl_inject_hits(point) == 0)
    SL_TEST_FAIL("%s: the point was never reached", what);
  if (point && sl_job_restarts(job) == 0)
    SL_TEST_FAIL("%s: the job did not restart", what);
  if (is_join) check_pairs(what);
  else check_windows(what);
  printf("%-70s restarts %u\n", what, sl_job_restarts(job));
  sl_job_destroy(job);
  sl_inject_reset();
}

static void run_all(bool is_join, sl_ckpt_mode_t mode, uint32_t par) {
  for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
    run_one(is_join, mode, par, points[i], (int)i);
}

SL_TEST(window_aligned_parallelism_1) { run_all(false, SL_CKPT_ALIGNED, 1); }
SL_TEST(window_aligned_parallelism_4) { run_all(false, SL_CKPT_ALIGNED, 4); }
SL_TEST(window_unaligned_parallelism_4) { run_all(false, SL_CKPT_UNALIGNED, 4); }
SL_TEST(sliding_window_aligned_parallelism_1) {
  win_kind = SL_WINDOW_SLIDING;
  run_all(false, SL_CKPT_ALIGNED, 1);
}
SL_TEST(sliding_window_unaligned_parallelism_4) {
  win_kind = SL_WINDOW_SLIDING;
  run_all(false, SL_CKPT_UNALIGNED, 4);
}
SL_TEST(cumulate_window_aligned_parallelism_4) {
  win_kind = SL_WINDOW_CUMULATE;
  run_all(false, SL_CKPT_ALIGNED, 4);
}
SL_TEST(join_aligned_parallelism_1) { run_all(true, SL_CKPT_ALIGNED, 1); }
SL_TEST(join_aligned_parallelism_4) { run_all(true, SL_CKPT_ALIGNED, 4); }
SL_TEST(join_unaligned_parallelism_4) { run_all(true, SL_CKPT_UNALIGNED, 4); }

/* Rescaling: checkpoint mid-window at parallelism p1, stop, resume at p2.
 * Pending windows, buffered join rows and their timers move with their
 * key groups. */
static void rescale(bool is_join, uint32_t p1, uint32_t p2) {
  seq_reset();
  pthread_mutex_lock(&lock);
  memset(win_count, 0, sizeof(win_count));
  memset(win_sum, 0, sizeof(win_sum));
  memset(pair_seen, 0, sizeof(pair_seen));
  bad_rows = 0;
  pthread_mutex_unlock(&lock);
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/rescale", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = is_join ? "join" : "window";
  cfg.parallelism = p1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  sl_job_t *job = is_join ? join_job(&cfg) : window_job(&cfg);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_gate(PER_SPLIT / 2 + 13);
  uint64_t id;
  while ((id = checkpoint(job)) == 0) {
  }
  sl_job_cancel(job);
  SL_ASSERT_EQ_INT(sl_job_wait(job, NULL), SL_ECANCELED);
  sl_job_destroy(job);
  /* Restore from that checkpoint explicitly: a fresh start would also
   * converge to the same views, so it must not be possible here. */
  char from[4400];
  snprintf(from, sizeof(from), "%s/%s/chk-%llu", dir, cfg.name,
           (unsigned long long)id);
  cfg.parallelism = p2;
  cfg.restore_from = from;
  job = is_join ? join_job(&cfg) : window_job(&cfg);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  char what[96];
  snprintf(what, sizeof(what), "%s rescaled from %u to %u",
           is_join ? "interval join" : "tumbling window", p1, p2);
  if (rc != SL_OK) SL_TEST_FAIL("%s: %s", what, sl_error_message(err));
  if (is_join) check_pairs(what);
  else check_windows(what);
  sl_job_destroy(job);
}

SL_TEST(window_rescaled_from_2_to_3) { rescale(false, 2, 3); }
SL_TEST(join_rescaled_from_4_to_1) { rescale(true, 4, 1); }
SL_TEST(sliding_window_rescaled_from_3_to_2) {
  win_kind = SL_WINDOW_SLIDING;
  rescale(false, 3, 2);
}
