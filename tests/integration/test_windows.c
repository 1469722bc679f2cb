/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Event time and windows through the public API: watermarks from sources
 * (bounded disorder, per split, idle splits), event-time timers, tumbling,
 * sliding and session windows with built-in aggregates, user aggregates and
 * process functions, allowed lateness and the late side output.  Expected
 * results are computed in the test from its own input.
 */
#include <stdio.h>

#include "it_helpers.h"

/* ------------------------------------------------------------------ */
/* Input: per split an array of (key, ts, v) events. */

typedef struct ev_s {
  int64_t key, ts, v;
} ev_t;

enum { MAX_SPLITS = 8 };

typedef struct evset_s {
  ev_t *ev[MAX_SPLITS];
  uint64_t n[MAX_SPLITS];
  uint32_t n_splits;
} evset_t;

static void ev_gen(const vsrc_t *s, uint32_t split, uint64_t i,
                   sl_row_builder_t *b) {
  const evset_t *e = s->user;
  const ev_t *x = &e->ev[split][i];
  sl_row_builder_set_i64(b, 0, x->key);
  sl_row_builder_set_i64(b, 1, x->ts);
  sl_row_builder_set_i64(b, 2, x->v);
}

static sl_schema_t *ev_schema(void) {
  sl_field_t f[] = {I64("key"), {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}},
                    I64("v")};
  return make_schema(f, 3);
}

static void evset_free(evset_t *e) {
  for (uint32_t s = 0; s < e->n_splits; s++) free(e->ev[s]);
}

/* n events per split, ts = 1000 * i + split, keys from the salt; then
 * shuffle each block of `block` consecutive events (bounded disorder:
 * an event moves by less than block positions). */
static void evset_make(evset_t *e, uint32_t n_splits, uint64_t n,
                       uint64_t n_keys, uint64_t salt, uint32_t block) {
  memset(e, 0, sizeof(*e));
  e->n_splits = n_splits;
  for (uint32_t s = 0; s < n_splits; s++) {
    e->n[s] = n;
    e->ev[s] = calloc(n, sizeof(ev_t));
    for (uint64_t i = 0; i < n; i++) {
      uint64_t h = rnd(salt, s, i);
      e->ev[s][i].key = (int64_t)(h % n_keys);
      e->ev[s][i].ts = (int64_t)(1000 * i + s);
      e->ev[s][i].v = (int64_t)((h >> 20) % 1000);
    }
    for (uint64_t b0 = 0; block > 1 && b0 < n; b0 += block) {
      uint64_t len = n - b0 < block ? n - b0 : block;
      for (uint64_t k = len - 1; k > 0; k--) {
        uint64_t j = rnd(salt ^ 0x5bd1e995u, s, b0 + k) % (k + 1);
        ev_t t = e->ev[s][b0 + k];
        e->ev[s][b0 + k] = e->ev[s][b0 + j];
        e->ev[s][b0 + j] = t;
      }
    }
  }
}

/* ------------------------------------------------------------------ */
/* Window results as (key, start, end, count, sum, max ts) tuples. */

typedef struct wres_s {
  int64_t key, start, end, count, sum, max_ts;
  int kind;
} wres_t;

static int cmp_wres(const void *a, const void *b) {
  const wres_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return (x->kind > y->kind) - (x->kind < y->kind);
}

static int64_t fmod64(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

/* The independent computation for tumbling (slide == size) and sliding. */
static wres_t *expect_windows(const evset_t *e, int64_t size, int64_t slide,
                              size_t *out_n) {
  size_t cap = 1024, n = 0;
  wres_t *w = malloc(cap * sizeof(*w));
  for (uint32_t s = 0; s < e->n_splits; s++)
    for (uint64_t i = 0; i < e->n[s]; i++) {
      const ev_t *x = &e->ev[s][i];
      int64_t last = x->ts - fmod64(x->ts, slide);
      for (int64_t st = last; st > x->ts - size; st -= slide) {
        if (n == cap) w = realloc(w, (cap *= 2) * sizeof(*w));
        w[n++] = (wres_t){x->key, st, st + size, 1, x->v, x->ts, 0};
      }
    }
  qsort(w, n, sizeof(*w), cmp_wres);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && w[m - 1].key == w[i].key && w[m - 1].start == w[i].start) {
      w[m - 1].count++;
      w[m - 1].sum += w[i].sum;
      if (w[i].max_ts > w[m - 1].max_ts) w[m - 1].max_ts = w[i].max_ts;
    } else {
      w[m++] = w[i];
    }
  }
  *out_n = m;
  return w;
}

/* Collected output of a window aggregate with (count, sum) columns:
 * fields key, window_start, window_end, event_time, n, total. */
static wres_t *collected_windows(const csink_t *c, size_t *out_n) {
  wres_t *w = calloc(c->n_rows + 1, sizeof(*w));
  for (size_t i = 0; i < c->n_rows; i++) {
    sl_row_t r = crow(c, i);
    w[i] = (wres_t){sl_row_get_i64(&r, 0), sl_row_get_i64(&r, 1),
                    sl_row_get_i64(&r, 2), sl_row_get_i64(&r, 4),
                    sl_row_get_i64(&r, 5), sl_row_get_i64(&r, 3),
                    (int)sl_row_kind(&r)};
  }
  qsort(w, c->n_rows, sizeof(*w), cmp_wres);
  *out_n = c->n_rows;
  return w;
}

static void assert_windows_equal(const wres_t *got, size_t n_got,
                                 const wres_t *want, size_t n_want,
                                 const char *what) {
  if (n_got != n_want)
    SL_TEST_FAIL("%s: %zu window results, expected %zu", what, n_got, n_want);
  for (size_t i = 0; i < n_want; i++) {
    const wres_t *g = &got[i], *x = &want[i];
    if (g->key != x->key || g->start != x->start || g->end != x->end ||
        g->count != x->count || g->sum != x->sum || g->max_ts != x->max_ts ||
        g->kind != x->kind)
      SL_TEST_FAIL("%s: result %zu is key %lld [%lld, %lld) count %lld sum "
                   "%lld event_time %lld kind %d; expected key %lld [%lld, "
                   "%lld) count %lld sum %lld event_time %lld kind %d",
                   what, i, (long long)g->key, (long long)g->start,
                   (long long)g->end, (long long)g->count, (long long)g->sum,
                   (long long)g->max_ts, g->kind, (long long)x->key,
                   (long long)x->start, (long long)x->end,
                   (long long)x->count, (long long)x->sum,
                   (long long)x->max_ts, x->kind);
  }
}

typedef struct wjob_s {
  uint32_t parallelism;
  sl_window_spec_t spec;
  sl_watermark_config_t wm;
  bool with_late;
} wjob_t;

/* source -> key_by(key) -> window aggregate (count, sum(v)) -> sink; late
 * rows to `late` when given.  The job must succeed. */
static void run_window_job(const wjob_t *j, evset_t *e, csink_t *out,
                           csink_t *late) {
  sl_job_t *job = new_job(j->parallelism);
  sl_schema_t *schema = ev_schema();
  vsrc_t src;
  vsrc_init(&src, e->n_splits, 0, ev_gen, e);
  src.split_len = e->n;
  sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
  s = sl_source_watermarks(s, &j->wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}, {"total", SL_AGG_SUM, "v"}};
  sl_stream_t *w = sl_stream_window_aggregate(s, "window", &j->spec, aggs, 2);
  SL_ASSERT_OK(sl_stream_sink(w, "out", &csink_vt, out));
  if (late) SL_ASSERT_OK(sl_stream_sink(sl_stream_late_rows(w), "late",
                                        &csink_vt, late));
  run_ok(job);
  sl_job_destroy(job);
  sl_schema_unref(schema);
}

static void check_against_expected(const wjob_t *j, evset_t *e,
                                   const char *what) {
  int64_t slide = j->spec.kind == SL_WINDOW_SLIDING ? j->spec.slide_us
                                                    : j->spec.size_us;
  size_t n_want, n_got;
  wres_t *want = expect_windows(e, j->spec.size_us, slide, &n_want);
  csink_t out;
  csink_init(&out);
  run_window_job(j, e, &out, NULL);
  wres_t *got = collected_windows(&out, &n_got);
  assert_windows_equal(got, n_got, want, n_want, what);
  free(got);
  free(want);
  csink_free(&out);
}

/* ------------------------------------------------------------------ */

/* The same events sorted and with bounded disorder (each block of 16
 * shuffled, delay 16 ms): the same results, equal to the independent
 * computation, at parallelism 1 and 4, watermarks periodic or per record. */
SL_TEST(tumbling_out_of_order_equals_sorted_and_parallelism) {
  evset_t sorted, shuffled;
  evset_make(&sorted, 4, 20000, 50, 7, 1);
  evset_make(&shuffled, 4, 20000, 50, 7, 16);
  wjob_t j = {1, {0}, {0}, false};
  sl_window_spec_init(&j.spec);
  j.spec.kind = SL_WINDOW_TUMBLING;
  j.spec.time_field = "ts";
  j.spec.size_us = 100000; /* 100 ms: 100 events of a split */
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.max_out_of_orderness_us = 16000;
  j.wm.per_record = true;
  check_against_expected(&j, &sorted, "sorted, parallelism 1");
  check_against_expected(&j, &shuffled, "disordered, parallelism 1");
  j.parallelism = 4;
  check_against_expected(&j, &shuffled, "disordered, parallelism 4");
  j.wm.per_record = false;
  j.wm.interval_ms = 1;
  check_against_expected(&j, &shuffled, "disordered, periodic, parallelism 4");
  evset_free(&sorted);
  evset_free(&shuffled);
}

SL_TEST(sliding_windows_match_independent_computation) {
  evset_t e;
  evset_make(&e, 2, 5000, 20, 11, 8);
  wjob_t j = {2, {0}, {0}, false};
  sl_window_spec_init(&j.spec);
  j.spec.kind = SL_WINDOW_SLIDING;
  j.spec.time_field = "ts";
  j.spec.size_us = 10000; /* not a multiple of the slide */
  j.spec.slide_us = 3000;
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.max_out_of_orderness_us = 8000;
  j.wm.per_record = true;
  check_against_expected(&j, &e, "sliding 10 ms / 3 ms");
  j.parallelism = 1;
  check_against_expected(&j, &e, "sliding 10 ms / 3 ms, parallelism 1");
  evset_free(&e);
}

/* ------------------------------------------------------------------ */
/* Late rows and allowed lateness, on one split with per-record
 * watermarks and no delay, so that which rows are late is exact. */

static void one_split(evset_t *e, const ev_t *evs, uint64_t n) {
  memset(e, 0, sizeof(*e));
  e->n_splits = 1;
  e->n[0] = n;
  e->ev[0] = malloc(n * sizeof(ev_t));
  memcpy(e->ev[0], evs, n * sizeof(ev_t));
}

SL_TEST(late_rows_go_to_the_side_output_not_into_results) {
  /* Windows of 1000 us, no delay.  After ts 5000 the watermark is 4999:
   * the row at 1500 belongs to [1000, 2000), cleaned up at 1999: late.
   * The row at 5500 is behind the largest event time but not behind the
   * watermark: it counts. */
  const ev_t evs[] = {{1, 1000, 10}, {1, 1200, 20}, {1, 2000, 30},
                      {1, 5000, 40}, {1, 1500, 99}, {1, 5500, 50},
                      {1, 6100, 60}};
  evset_t e;
  one_split(&e, evs, 7);
  wjob_t j = {1, {0}, {0}, true};
  sl_window_spec_init(&j.spec);
  j.spec.time_field = "ts";
  j.spec.size_us = 1000;
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.per_record = true;
  csink_t out, late;
  csink_init(&out);
  csink_init(&late);
  run_window_job(&j, &e, &out, &late);
  size_t n;
  wres_t *got = collected_windows(&out, &n);
  const wres_t want[] = {{1, 1000, 2000, 2, 30, 1200, 0},
                         {1, 2000, 3000, 1, 30, 2000, 0},
                         {1, 5000, 6000, 2, 90, 5500, 0},
                         {1, 6000, 7000, 1, 60, 6100, 0}};
  assert_windows_equal(got, n, want, 4, "results");
  SL_ASSERT_EQ_INT(late.n_rows, 1);
  sl_row_t r = crow(&late, 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 1), 1500);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 2), 99);
  free(got);
  csink_free(&out);
  csink_free(&late);
  evset_free(&e);
}

SL_TEST(allowed_lateness_updates_a_fired_window) {
  /* Lateness 3500: [1000, 2000) is kept until watermark 5499.  The row at
   * 1500 (watermark 4999) updates it: -U (2, 30) then +U (3, 129).  The
   * row at 1700 comes after watermark 5999: late. */
  const ev_t evs[] = {{1, 1000, 10}, {1, 1200, 20}, {1, 5000, 40},
                      {1, 1500, 99}, {1, 6000, 1},  {1, 1700, 7}};
  evset_t e;
  one_split(&e, evs, 6);
  wjob_t j = {1, {0}, {0}, true};
  sl_window_spec_init(&j.spec);
  j.spec.time_field = "ts";
  j.spec.size_us = 1000;
  j.spec.allowed_lateness_us = 3500;
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.per_record = true;
  csink_t out, late;
  csink_init(&out);
  csink_init(&late);
  run_window_job(&j, &e, &out, &late);
  /* Arrival order matters here: check the sequence, not a sorted set. */
  SL_ASSERT_EQ_INT(out.n_rows, 5);
  const struct { int kind; int64_t start, count, sum; } want[] = {
      {SL_ROW_INSERT, 1000, 2, 30},        {SL_ROW_UPDATE_BEFORE, 1000, 2, 30},
      {SL_ROW_UPDATE_AFTER, 1000, 3, 129}, {SL_ROW_INSERT, 5000, 1, 40},
      {SL_ROW_INSERT, 6000, 1, 1}};
  for (size_t i = 0; i < 5; i++) {
    sl_row_t r = crow(&out, i);
    if ((int)sl_row_kind(&r) != want[i].kind ||
        sl_row_get_i64(&r, 1) != want[i].start ||
        sl_row_get_i64(&r, 4) != want[i].count ||
        sl_row_get_i64(&r, 5) != want[i].sum)
      SL_TEST_FAIL("row %zu: %s start %lld count %lld sum %lld; expected %s "
                   "%lld %lld %lld", i, sl_row_kind_name(sl_row_kind(&r)),
                   (long long)sl_row_get_i64(&r, 1),
                   (long long)sl_row_get_i64(&r, 4),
                   (long long)sl_row_get_i64(&r, 5),
                   sl_row_kind_name((sl_row_kind_t)want[i].kind),
                   (long long)want[i].start, (long long)want[i].count,
                   (long long)want[i].sum);
  }
  SL_ASSERT_EQ_INT(late.n_rows, 1);
  sl_row_t r = crow(&late, 0);
  SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 1), 1700);
  csink_free(&out);
  csink_free(&late);
  evset_free(&e);
}

/* Expected output rows in arrival order: kind, key, start, end, count,
 * sum. */
typedef struct seqrow_s {
  int kind;
  int64_t key, start, end, count, sum;
} seqrow_t;

static void assert_sequence(const csink_t *out, const seqrow_t *want,
                            size_t n_want, const char *what) {
  for (size_t i = 0; i < out->n_rows && i < n_want; i++) {
    sl_row_t r = crow(out, i);
    if ((int)sl_row_kind(&r) != want[i].kind ||
        sl_row_get_i64(&r, 0) != want[i].key ||
        sl_row_get_i64(&r, 1) != want[i].start ||
        sl_row_get_i64(&r, 2) != want[i].end ||
        sl_row_get_i64(&r, 4) != want[i].count ||
        sl_row_get_i64(&r, 5) != want[i].sum)
      SL_TEST_FAIL("%s, row %zu: %s key %lld [%lld, %lld) count %lld sum "
                   "%lld; expected %s key %lld [%lld, %lld) %lld %lld", what,
                   i, sl_row_kind_name(sl_row_kind(&r)),
                   (long long)sl_row_get_i64(&r, 0),
                   (long long)sl_row_get_i64(&r, 1),
                   (long long)sl_row_get_i64(&r, 2),
                   (long long)sl_row_get_i64(&r, 4),
                   (long long)sl_row_get_i64(&r, 5),
                   sl_row_kind_name((sl_row_kind_t)want[i].kind),
                   (long long)want[i].key, (long long)want[i].start,
                   (long long)want[i].end, (long long)want[i].count,
                   (long long)want[i].sum);
  }
  if (out->n_rows != n_want)
    SL_TEST_FAIL("%s: %zu rows, expected %zu", what, out->n_rows, n_want);
}

/* One split of evs through a window with spec, watermarks per record on
 * ts without delay, results and late rows collected. */
static void run_per_record(const ev_t *evs, uint64_t n,
                           const sl_window_spec_t *spec, csink_t *out,
                           csink_t *late) {
  evset_t e;
  one_split(&e, evs, n);
  wjob_t j = {1, *spec, {0}, true};
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.per_record = true;
  csink_init(out);
  csink_init(late);
  run_window_job(&j, &e, out, late);
  evset_free(&e);
}

SL_TEST(row_within_lateness_opening_a_passed_window_fires_it_at_once) {
  /* Windows of 1000 us, lateness 3500, one task.  After ts 5000 the
   * watermark is 4999: key 1's [1000, 2000) has fired.  Key 2's first row
   * at 1500 opens [1000, 2000), whose end the watermark passed: it fires
   * at once, before key 1's late row at 1200 updates key 1's window, not
   * at the next watermark (5999, after that update). */
  const ev_t evs[] = {{1, 1000, 10}, {1, 5000, 40}, {2, 1500, 5},
                      {1, 1200, 20}, {1, 6000, 1}};
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 1000;
  spec.allowed_lateness_us = 3500;
  csink_t out, late;
  run_per_record(evs, 5, &spec, &out, &late);
  const seqrow_t want[] = {
      {SL_ROW_INSERT, 1, 1000, 2000, 1, 10},
      {SL_ROW_INSERT, 2, 1000, 2000, 1, 5},
      {SL_ROW_UPDATE_BEFORE, 1, 1000, 2000, 1, 10},
      {SL_ROW_UPDATE_AFTER, 1, 1000, 2000, 2, 30},
      {SL_ROW_INSERT, 1, 5000, 6000, 1, 40},
      {SL_ROW_INSERT, 1, 6000, 7000, 1, 1}};
  assert_sequence(&out, want, 6, "tumbling");
  SL_ASSERT_EQ_INT(late.n_rows, 0);
  csink_free(&out);
  csink_free(&late);
}

SL_TEST(session_merge_behind_the_watermark_fires_at_once) {
  /* Gap 1000, lateness 10000.  ts 10000 moves the watermark to 9999:
   * session [1000, 2000) fires.  The row at 1800 merges it into [1000,
   * 2800), whose end is behind the watermark: -D the old session, +I the
   * merged one at once.  The row at 1500 ([1500, 2500)) then falls inside
   * the fired merged session: -U / +U.  Were the merged session fired only
   * at the next watermark, the row at 1500 would be folded in silently and
   * a single +I (count 3) would come at the end. */
  const ev_t evs[] = {{1, 1000, 1}, {1, 10000, 100}, {1, 1800, 2},
                      {1, 1500, 4}};
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.kind = SL_WINDOW_SESSION;
  spec.time_field = "ts";
  spec.gap_us = 1000;
  spec.allowed_lateness_us = 10000;
  csink_t out, late;
  run_per_record(evs, 4, &spec, &out, &late);
  const seqrow_t want[] = {
      {SL_ROW_INSERT, 1, 1000, 2000, 1, 1},
      {SL_ROW_DELETE, 1, 1000, 2000, 1, 1},
      {SL_ROW_INSERT, 1, 1000, 2800, 2, 3},
      {SL_ROW_UPDATE_BEFORE, 1, 1000, 2800, 2, 3},
      {SL_ROW_UPDATE_AFTER, 1, 1000, 2800, 3, 7},
      {SL_ROW_INSERT, 1, 10000, 11000, 1, 100}};
  assert_sequence(&out, want, 6, "session");
  SL_ASSERT_EQ_INT(late.n_rows, 0);
  csink_free(&out);
  csink_free(&late);
}

/* ------------------------------------------------------------------ */
/* Session windows: gap edge cases.  Flink's rule: windows [t, t + gap)
 * that intersect or touch merge. */

static void run_sessions(const ev_t *evs, uint64_t n, int64_t gap,
                         const wres_t *want, size_t n_want, const char *what) {
  evset_t e;
  one_split(&e, evs, n);
  wjob_t j = {1, {0}, {0}, false};
  sl_window_spec_init(&j.spec);
  j.spec.kind = SL_WINDOW_SESSION;
  j.spec.time_field = "ts";
  j.spec.gap_us = gap;
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.max_out_of_orderness_us = 1000000; /* nothing fires early */
  j.wm.per_record = true;
  csink_t out;
  csink_init(&out);
  run_window_job(&j, &e, &out, NULL);
  size_t n_got;
  wres_t *got = collected_windows(&out, &n_got);
  assert_windows_equal(got, n_got, want, n_want, what);
  free(got);
  csink_free(&out);
  evset_free(&e);
}

SL_TEST(session_windows_gap_edges) {
  /* Gap 5: 0 and 5 touch ([0,5), [5,10)) and merge; 0 and 6 do not. */
  const ev_t touch[] = {{1, 0, 1}, {1, 5, 2}};
  const wres_t w_touch[] = {{1, 0, 10, 2, 3, 5, 0}};
  run_sessions(touch, 2, 5, w_touch, 1, "touching");
  const ev_t apart[] = {{1, 0, 1}, {1, 6, 2}};
  const wres_t w_apart[] = {{1, 0, 5, 1, 1, 0, 0}, {1, 6, 11, 1, 2, 6, 0}};
  run_sessions(apart, 2, 5, w_apart, 2, "one past the gap");
  /* Out of order: 12 and 19 are apart until 15 bridges them. */
  const ev_t bridge[] = {{1, 12, 1}, {1, 19, 2}, {1, 15, 4}, {2, 13, 8}};
  const wres_t w_bridge[] = {{1, 12, 24, 3, 7, 19, 0},
                             {2, 13, 18, 1, 8, 13, 0}};
  run_sessions(bridge, 4, 5, w_bridge, 2, "bridged");
  /* A row inside an existing session does not extend it. */
  const ev_t inside[] = {{1, 10, 1}, {1, 12, 2}, {1, 11, 3}};
  const wres_t w_inside[] = {{1, 10, 17, 3, 6, 12, 0}};
  run_sessions(inside, 3, 5, w_inside, 1, "inside");
  /* A chain: each row within the gap of the previous one. */
  const ev_t chain[] = {{1, 0, 1}, {1, 4, 1}, {1, 8, 1}, {1, 12, 1},
                        {1, 30, 1}};
  const wres_t w_chain[] = {{1, 0, 17, 4, 4, 12, 0}, {1, 30, 35, 1, 1, 30, 0}};
  run_sessions(chain, 5, 5, w_chain, 2, "chain");
}

/* ------------------------------------------------------------------ */
/* User aggregate (session, with merge) and process function. */

typedef struct mm_s {
  int64_t min, max;
} mm_t;

static int mm_add(void *user, const sl_row_t *row, sl_bytes_t *acc) {
  (void)user;
  int64_t v = sl_row_get_i64(row, 2);
  mm_t m = {v, v};
  if (acc->len == sizeof(m)) {
    memcpy(&m, acc->data, sizeof(m));
    if (v < m.min) m.min = v;
    if (v > m.max) m.max = v;
  }
  acc->len = 0;
  return sl_bytes_append(acc, &m, sizeof(m));
}

static int mm_merge(void *user, sl_slice_t from, sl_bytes_t *into) {
  (void)user;
  mm_t a, b;
  memcpy(&b, from.ptr, sizeof(b));
  if (into->len != sizeof(a)) a = b;
  else memcpy(&a, into->data, sizeof(a));
  if (b.min < a.min) a.min = b.min;
  if (b.max > a.max) a.max = b.max;
  into->len = 0;
  return sl_bytes_append(into, &a, sizeof(a));
}

static int mm_result(sl_ctx_t *ctx, void *user, const sl_window_t *w,
                     sl_slice_t acc, sl_row_builder_t *out) {
  (void)user;
  mm_t m;
  memcpy(&m, acc.ptr, sizeof(m));
  sl_slice_t k = sl_ctx_current_key(ctx);
  SL_ASSERT_TRUE(k.len == 9); /* canonical int64 key: flag + 8 bytes */
  sl_row_builder_set_i64(out, 0, w->start_us);
  sl_row_builder_set_i64(out, 1, w->end_us);
  sl_row_builder_set_i64(out, 2, m.max - m.min);
  return SL_OK;
}

SL_TEST(user_aggregate_over_merging_sessions) {
  const ev_t evs[] = {{1, 0, 5}, {1, 20, 50}, {1, 10, 9}, {1, 3, 1},
                      {1, 100, 7}};
  evset_t e;
  one_split(&e, evs, 5);
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  sl_field_t of[] = {I64("start"), I64("end"), I64("spread")};
  sl_schema_t *out_schema = make_schema(of, 3);
  vsrc_t src;
  vsrc_init(&src, 1, 0, ev_gen, &e);
  src.split_len = e.n;
  sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.max_out_of_orderness_us = 1000;
  wm.per_record = true;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.kind = SL_WINDOW_SESSION;
  spec.time_field = "ts";
  spec.gap_us = 10;
  sl_window_agg_fns_t fns = {mm_add, mm_merge, mm_result};
  s = sl_stream_window_reduce(s, "spread", &spec, out_schema, &fns, NULL);
  csink_t out;
  csink_init(&out);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &out));
  run_ok(job);
  /* Sessions: {0, 3, 10, 20} -> [0, 30) spread 50 - 1; {100} -> 0. */
  pair_t *p = collected_pairs(&out, 0, 2);
  const pair_t want[] = {{0, 49}, {100, 0}};
  assert_pairs_equal(p, out.n_rows, want, 2);
  free(p);
  csink_free(&out);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  evset_free(&e);
}

/* Process function: emits the window's values in arrival order, as a
 * number in base 1000 (v < 1000), and the row count. */
static int digits_fn(sl_ctx_t *ctx, void *user, const sl_window_t *w,
                     sl_window_rows_t *rows) {
  (void)user;
  int64_t acc = 0, n = 0;
  sl_row_t r;
  while (sl_window_rows_next(rows, &r)) {
    acc = acc * 1000 + sl_row_get_i64(&r, 2);
    n++;
  }
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, w->start_us);
  sl_row_builder_set_i64(b, 1, acc);
  sl_row_builder_set_i64(b, 2, n);
  sl_row_builder_set_i64(b, 3, w->max_ts_us);
  return sl_ctx_emit_builder(ctx);
}

SL_TEST(process_function_sees_all_rows_in_arrival_order) {
  const ev_t evs[] = {{1, 100, 1}, {2, 150, 9}, {1, 120, 2}, {1, 110, 3},
                      {1, 1050, 4}};
  evset_t e;
  one_split(&e, evs, 5);
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  sl_field_t of[] = {I64("start"), I64("digits"), I64("n"), I64("max_ts")};
  sl_schema_t *out_schema = make_schema(of, 4);
  vsrc_t src;
  vsrc_init(&src, 1, 0, ev_gen, &e);
  src.split_len = e.n;
  sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.max_out_of_orderness_us = 100;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 1000;
  s = sl_stream_window_process(s, "digits", &spec, out_schema, digits_fn,
                               NULL);
  csink_t out;
  csink_init(&out);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &out));
  run_ok(job);
  SL_ASSERT_EQ_INT(out.n_rows, 3);
  int64_t found = 0;
  for (size_t i = 0; i < out.n_rows; i++) {
    sl_row_t r = crow(&out, i);
    int64_t st = sl_row_get_i64(&r, 0), d = sl_row_get_i64(&r, 1);
    int64_t n = sl_row_get_i64(&r, 2), mx = sl_row_get_i64(&r, 3);
    if (st == 0 && n == 3 && d == 1002003 && mx == 120) found |= 1;
    else if (st == 0 && n == 1 && d == 9 && mx == 150) found |= 2;
    else if (st == 1000 && n == 1 && d == 4 && mx == 1050) found |= 4;
    else SL_TEST_FAIL("unexpected window start %lld digits %lld n %lld",
                      (long long)st, (long long)d, (long long)n);
  }
  SL_ASSERT_EQ_INT(found, 7);
  csink_free(&out);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  evset_free(&e);
}

/* ------------------------------------------------------------------ */
/* Per-split watermarks and idleness. */

/* A source of two splits: split 0 emits its events, then keeps polling
 * (unbounded) until the sink has seen `want` results; split 1 never emits.
 * Without idleness split 1 would hold the watermark at its minimum and no
 * window could fire before the input ends, which here it never would. */
typedef struct idle_src_s {
  const evset_t *e;
  atomic_int n_results;
  int want;
  atomic_int gave_up;
} idle_src_t;

static idle_src_t idle_src;

typedef struct idle_rd_s {
  uint32_t splits[2];
  uint32_t n;
  uint64_t next;
  uint64_t polls;
} idle_rd_t;

static int idle_plan(void *c, uint32_t p, sl_split_list_t *l,
                     sl_error_t **e) {
  (void)c;
  (void)p;
  (void)e;
  if (sl_split_list_add(l, "idle-0") != SL_OK ||
      sl_split_list_add(l, "idle-1") != SL_OK)
    return SL_ENOMEM;
  return SL_OK;
}

static int idle_open(void *c, const sl_reader_init_t *init, void **out,
                     sl_error_t **e) {
  (void)c;
  (void)e;
  idle_rd_t *r = calloc(1, sizeof(*r));
  for (uint32_t i = 0; i < init->n_splits; i++)
    r->splits[r->n++] = init->splits[i].split;
  *out = r;
  return SL_OK;
}

static int idle_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  idle_rd_t *r = rd;
  const evset_t *ev = idle_src.e;
  bool has0 = r->n && r->splits[0] == 0;
  if (has0) sl_source_set_split(out, 0);
  while (has0 && r->next < ev->n[0]) {
    const ev_t *x = &ev->ev[0][r->next++];
    sl_row_builder_t *b = sl_source_builder(out);
    sl_row_builder_set_i64(b, 0, x->key);
    sl_row_builder_set_i64(b, 1, x->ts);
    sl_row_builder_set_i64(b, 2, x->v);
    if (!sl_source_emit_builder(out, NULL)) return SL_POLL_MORE;
  }
  if (atomic_load(&idle_src.n_results) >= idle_src.want) return SL_POLL_END;
  /* A liveness bound, not a timing assertion: give up after ~20 s. */
  if (++r->polls > 2000) {
    atomic_store(&idle_src.gave_up, 1);
    return SL_POLL_END;
  }
  sl_source_wait_until(out, sl_source_now(out) + 10000000);
  return SL_POLL_WAIT;
}

static int idle_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}

static void idle_close(void *rd) { free(rd); }
static void idle_destroy(void *c) { (void)c; }
static const sl_source_vt_t idle_vt = {"idle-test", idle_plan, idle_open,
                                       idle_poll,   idle_pos,  idle_close,
                                       idle_destroy};

static int count_sink_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)row;
  (void)e;
  atomic_fetch_add(&idle_src.n_results, 1);
  return SL_OK;
}

static int count_sink_open(void *c, const sl_sink_init_t *i, void **out,
                           sl_error_t **e) {
  (void)i;
  (void)e;
  *out = c;
  return SL_OK;
}

static int count_sink_close(void *w, bool ok, sl_error_t **e) {
  (void)w;
  (void)ok;
  (void)e;
  return SL_OK;
}

static const sl_sink_vt_t count_sink_vt = {"count", count_sink_open,
                                           count_sink_write, NULL,
                                           count_sink_close, idle_destroy};

SL_TEST(idle_split_does_not_hold_back_the_watermark) {
  /* Split 0: key 1 at ts 0..9999 us step 1000 -> windows of 5 ms [0,5000)
   * and [5000,10000); the watermark passes 4999 once ts 5000 is read. */
  ev_t evs[10];
  for (int i = 0; i < 10; i++) evs[i] = (ev_t){1, 1000 * i, i};
  evset_t e;
  one_split(&e, evs, 10);
  idle_src.e = &e;
  atomic_store(&idle_src.n_results, 0);
  atomic_store(&idle_src.gave_up, 0);
  idle_src.want = 1; /* [0, 5000) must fire while the input runs */
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  sl_stream_t *s = sl_job_source(job, "events", &idle_vt, NULL, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.idle_timeout_ms = 50;
  wm.interval_ms = 10;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 5000;
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}};
  s = sl_stream_window_aggregate(s, "window", &spec, aggs, 1);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &count_sink_vt, NULL));
  run_ok(job);
  SL_ASSERT_EQ_INT(atomic_load(&idle_src.gave_up), 0);
  /* Both windows in the end: the second fires at the end of input. */
  SL_ASSERT_EQ_INT(atomic_load(&idle_src.n_results), 2);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  evset_free(&e);
}

/* The watermark of a task is the minimum over its inputs: a window after
 * a union of a fast and a slow source fires only when both passed it. */
SL_TEST(watermark_is_the_minimum_over_splits) {
  /* Two splits in one subtask; split 1 lags by 10 ms in event time.  With
   * no delay, a window would fire early (and drop split 1's rows as late)
   * if the watermark followed split 0 alone. */
  evset_t e;
  memset(&e, 0, sizeof(e));
  e.n_splits = 2;
  for (uint32_t s = 0; s < 2; s++) {
    e.n[s] = 3000;
    e.ev[s] = calloc(3000, sizeof(ev_t));
    for (uint64_t i = 0; i < 3000; i++)
      e.ev[s][i] = (ev_t){(int64_t)(i % 7), (int64_t)(1000 * i) - (s ? 10000 : 0)
                          + 10000, (int64_t)i};
  }
  wjob_t j = {1, {0}, {0}, true};
  sl_window_spec_init(&j.spec);
  j.spec.time_field = "ts";
  j.spec.size_us = 4000;
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.strategy = SL_WM_MONOTONOUS;
  j.wm.per_record = true;
  csink_t out, late;
  csink_init(&out);
  csink_init(&late);
  run_window_job(&j, &e, &out, &late);
  SL_ASSERT_EQ_INT(late.n_rows, 0);
  size_t n_want, n_got;
  wres_t *want = expect_windows(&e, 4000, 4000, &n_want);
  wres_t *got = collected_windows(&out, &n_got);
  assert_windows_equal(got, n_got, want, n_want, "two splits");
  free(want);
  free(got);
  csink_free(&out);
  csink_free(&late);
  evset_free(&e);
}

/* ------------------------------------------------------------------ */
/* Event-time timers of a process function. */

static int et_open(sl_ctx_t *ctx, void *user) {
  (void)ctx;
  (void)user;
  return SL_OK;
}

static int et_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  /* A timer 500 us after each row's event time. */
  return sl_ctx_event_timer_register(ctx, sl_row_get_i64(row, 1) + 500);
}

static int et_fire(sl_ctx_t *ctx, void *user, int64_t ts) {
  (void)user;
  int64_t wm = sl_ctx_watermark(ctx);
  if (wm < ts) return sl_ctx_fail(ctx, SL_EUSER, "timer %lld fired at "
                                  "watermark %lld", (long long)ts,
                                  (long long)wm);
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, ts);
  sl_row_builder_set_i64(b, 1, wm);
  return sl_ctx_emit_builder(ctx);
}

SL_TEST(event_time_timers_fire_at_the_watermark_in_order) {
  const ev_t evs[] = {{1, 1000, 0}, {1, 1400, 0}, {1, 2000, 0}, {2, 2100, 0},
                      {1, 9000, 0}};
  evset_t e;
  one_split(&e, evs, 5);
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  sl_field_t of[] = {I64("timer"), I64("wm")};
  sl_schema_t *out_schema = make_schema(of, 2);
  vsrc_t src;
  vsrc_init(&src, 1, 0, ev_gen, &e);
  src.split_len = e.n;
  sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.per_record = true;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {0};
  fns.open = et_open;
  fns.process = et_process;
  fns.on_event_timer = et_fire;
  s = sl_stream_process(s, "timers", out_schema, &fns, NULL);
  csink_t out;
  csink_init(&out);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &out));
  run_ok(job);
  /* Timers 1500 (wm 1999 at ts 2000), 1900 (same), 2500 and 2600 (wm
   * 8999), 9500 (end of input). */
  const int64_t want_ts[] = {1500, 1900, 2500, 2600, 9500};
  const int64_t want_wm[] = {1999, 1999, 8999, 8999, INT64_MAX};
  SL_ASSERT_EQ_INT(out.n_rows, 5);
  for (size_t i = 0; i < 5; i++) {
    sl_row_t r = crow(&out, i);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 0), want_ts[i]);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&r, 1), want_wm[i]);
  }
  csink_free(&out);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  evset_free(&e);
}

/* ------------------------------------------------------------------ */
/* Bad input. */

SL_TEST(window_and_watermark_errors_name_the_problem) {
  sl_schema_t *schema = ev_schema();
  struct {
    int what;
    const char *msg;
  } cases[] = {
      {0, "watermarks of source 'events': no field 'nope' in its schema"},
      {1, "watermarks of source 'events': invalid strategy, delay"},
      {2, "window 'w': no event-time field 'when' in the input"},
      {3, "window 'w': a tumbling window needs a size > 0"},
      {4, "window 'w': a session window needs a gap > 0"},
      {5, "window 'w': min(ts) over windows"},
      {6, "window 'w' needs a keyed stream"},
      {7, "'events' has no late rows: it is not a window operator"},
      {8, "window 'w': a cumulate window needs a step > 0 and a size that "
          "is a multiple of it"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    sl_job_t *job = new_job(1);
    vsrc_t src;
    evset_t e = {0};
    vsrc_init(&src, 1, 0, ev_gen, &e);
    sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
    sl_watermark_config_t wm;
    sl_watermark_config_init(&wm);
    wm.time_field = cases[c].what == 0 ? "nope" : "ts";
    if (cases[c].what == 1) wm.max_out_of_orderness_us = -1;
    sl_stream_t *src_s = s;
    s = sl_source_watermarks(s, &wm);
    const char *key[] = {"key"};
    sl_stream_t *k = cases[c].what == 6 ? s : sl_stream_key_by_fields(s, key, 1);
    sl_window_spec_t spec;
    sl_window_spec_init(&spec);
    spec.time_field = cases[c].what == 2 ? "when" : "ts";
    spec.size_us = cases[c].what == 3 ? 0 : 1000;
    if (cases[c].what == 4) spec.kind = SL_WINDOW_SESSION;
    if (cases[c].what == 8) {
      spec.kind = SL_WINDOW_CUMULATE;
      spec.step_us = 300; /* does not divide 1000 */
    }
    sl_agg_t aggs[] = {{"m", cases[c].what == 5 ? SL_AGG_MIN : SL_AGG_COUNT,
                        cases[c].what == 5 ? "ts" : NULL}};
    if (cases[c].what == 7) {
      sl_stream_late_rows(src_s);
    } else {
      sl_stream_window_aggregate(k, "w", &spec, aggs, 1);
    }
    const sl_error_t *err = sl_job_error(job);
    if (cases[c].what == 5) {
      /* min over a timestamp is allowed: no error. */
      SL_ASSERT_TRUE(err == NULL);
    } else {
      if (err == NULL) SL_TEST_FAIL("case %zu: no error", c);
      if (strstr(sl_error_message(err), cases[c].msg) == NULL)
        SL_TEST_FAIL("case %zu: message '%s' lacks '%s'", c,
                     sl_error_message(err), cases[c].msg);
    }
    sl_job_destroy(job);
  }
  sl_schema_unref(schema);
}

/* ------------------------------------------------------------------ */
/* Joins.  Left rows (key, ts, v) with v = 1000000 + index, right rows with
 * v = 2000000 + index, so that a joined row names its pair. */

typedef struct jpair_s {
  int64_t lv, rv, ws;
} jpair_t;

static int cmp_jpair(const void *a, const void *b) {
  const jpair_t *x = a, *y = b;
  if (x->lv != y->lv) return x->lv < y->lv ? -1 : 1;
  if (x->rv != y->rv) return x->rv < y->rv ? -1 : 1;
  return (x->ws > y->ws) - (x->ws < y->ws);
}

static void evset_ids(evset_t *e, int64_t base) {
  for (uint32_t s = 0; s < e->n_splits; s++)
    for (uint64_t i = 0; i < e->n[s]; i++)
      e->ev[s][i].v = base + (int64_t)(s * e->n[s] + i);
}

typedef enum { JT_INTERVAL, JT_WINDOW } jt_t;

static void run_join(jt_t kind, uint32_t par, evset_t *l, evset_t *r,
                     int64_t lower, int64_t upper, int64_t size,
                     jpair_t **out_pairs, size_t *out_n) {
  sl_job_t *job = new_job(par);
  sl_schema_t *schema = ev_schema();
  vsrc_t ls, rs;
  vsrc_init(&ls, l->n_splits, 0, ev_gen, l);
  ls.split_len = l->n;
  vsrc_init(&rs, r->n_splits, 0, ev_gen, r);
  rs.split_len = r->n;
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.max_out_of_orderness_us = 16000;
  wm.interval_ms = 1;
  const char *key[] = {"key"};
  sl_stream_t *a = sl_source_watermarks(
      sl_job_source(job, "left", &vsrc_vt, &ls, schema), &wm);
  sl_stream_t *b = sl_source_watermarks(
      sl_job_source(job, "right", &vsrc_vt, &rs, schema), &wm);
  a = sl_stream_key_by_fields(a, key, 1);
  b = sl_stream_key_by_fields(b, key, 1);
  sl_stream_t *j;
  if (kind == JT_INTERVAL) {
    sl_interval_join_spec_t spec = {"ts", "ts", lower, upper};
    j = sl_stream_interval_join(a, b, "join", &spec);
  } else {
    sl_window_spec_t spec;
    sl_window_spec_init(&spec);
    spec.time_field = "ts";
    spec.size_us = size;
    j = sl_stream_window_join(a, b, "join", &spec, NULL);
  }
  SL_ASSERT_TRUE(sl_job_error(job) == NULL);
  /* Output: key ts v key_right ts_right v_right [window_start window_end] */
  const sl_schema_t *os = sl_stream_schema(j);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(os), kind == JT_WINDOW ? 8 : 6);
  SL_ASSERT_EQ_STR(sl_schema_field(os, 5)->name, "v_right");
  csink_t out;
  csink_init(&out);
  SL_ASSERT_OK(sl_stream_sink(j, "out", &csink_vt, &out));
  run_ok(job);
  jpair_t *p = calloc(out.n_rows + 1, sizeof(*p));
  for (size_t i = 0; i < out.n_rows; i++) {
    sl_row_t row = crow(&out, i);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&row, 0), sl_row_get_i64(&row, 3));
    p[i] = (jpair_t){sl_row_get_i64(&row, 2), sl_row_get_i64(&row, 5),
                     kind == JT_WINDOW ? sl_row_get_i64(&row, 6) : 0};
  }
  qsort(p, out.n_rows, sizeof(*p), cmp_jpair);
  *out_pairs = p;
  *out_n = out.n_rows;
  csink_free(&out);
  sl_job_destroy(job);
  sl_schema_unref(schema);
}

static jpair_t *expect_join(jt_t kind, const evset_t *l, const evset_t *r,
                            int64_t lower, int64_t upper, int64_t size,
                            size_t *out_n) {
  size_t n = 0, cap = 1024;
  jpair_t *p = malloc(cap * sizeof(*p));
  for (uint32_t s = 0; s < l->n_splits; s++)
    for (uint64_t i = 0; i < l->n[s]; i++)
      for (uint32_t t = 0; t < r->n_splits; t++)
        for (uint64_t k = 0; k < r->n[t]; k++) {
          const ev_t *a = &l->ev[s][i], *b = &r->ev[t][k];
          if (a->key != b->key) continue;
          bool hit;
          int64_t ws = 0;
          if (kind == JT_INTERVAL) {
            hit = b->ts >= a->ts + lower && b->ts <= a->ts + upper;
          } else {
            ws = a->ts - fmod64(a->ts, size);
            hit = b->ts - fmod64(b->ts, size) == ws;
          }
          if (!hit) continue;
          if (n == cap) p = realloc(p, (cap *= 2) * sizeof(*p));
          p[n++] = (jpair_t){a->v, b->v, ws};
        }
  qsort(p, n, sizeof(*p), cmp_jpair);
  *out_n = n;
  return p;
}

static void assert_jpairs(const jpair_t *got, size_t n_got,
                          const jpair_t *want, size_t n_want,
                          const char *what) {
  if (n_got != n_want)
    SL_TEST_FAIL("%s: %zu joined rows, expected %zu", what, n_got, n_want);
  for (size_t i = 0; i < n_want; i++)
    if (cmp_jpair(&got[i], &want[i]) != 0)
      SL_TEST_FAIL("%s: joined row %zu is (%lld, %lld, %lld), expected "
                   "(%lld, %lld, %lld)", what, i, (long long)got[i].lv,
                   (long long)got[i].rv, (long long)got[i].ws,
                   (long long)want[i].lv, (long long)want[i].rv,
                   (long long)want[i].ws);
}

SL_TEST(interval_join_matches_nested_loop_at_parallelism_1_and_4) {
  evset_t l, r;
  evset_make(&l, 2, 1500, 40, 21, 16);
  evset_make(&r, 2, 1500, 40, 22, 16);
  evset_ids(&l, 1000000);
  evset_ids(&r, 2000000);
  const int64_t bounds[][2] = {{-5000, 5000}, {0, 20000}, {-30000, -10000}};
  for (size_t b = 0; b < 3; b++) {
    size_t n_want, n_got;
    jpair_t *want = expect_join(JT_INTERVAL, &l, &r, bounds[b][0],
                                bounds[b][1], 0, &n_want);
    SL_ASSERT_TRUE(n_want > 100);
    for (uint32_t par = 1; par <= 4; par += 3) {
      jpair_t *got;
      run_join(JT_INTERVAL, par, &l, &r, bounds[b][0], bounds[b][1], 0, &got,
               &n_got);
      char what[64];
      snprintf(what, sizeof(what), "bounds [%lld, %lld], parallelism %u",
               (long long)bounds[b][0], (long long)bounds[b][1], par);
      assert_jpairs(got, n_got, want, n_want, what);
      free(got);
    }
    free(want);
  }
  evset_free(&l);
  evset_free(&r);
}

SL_TEST(tumbling_window_join_matches_nested_loop) {
  evset_t l, r;
  evset_make(&l, 2, 1500, 40, 31, 16);
  evset_make(&r, 1, 2000, 40, 32, 16);
  evset_ids(&l, 1000000);
  evset_ids(&r, 2000000);
  size_t n_want, n_got;
  jpair_t *want = expect_join(JT_WINDOW, &l, &r, 0, 0, 50000, &n_want);
  SL_ASSERT_TRUE(n_want > 100);
  for (uint32_t par = 1; par <= 4; par += 3) {
    jpair_t *got;
    run_join(JT_WINDOW, par, &l, &r, 0, 0, 50000, &got, &n_got);
    assert_jpairs(got, n_got, want, n_want, par == 1 ? "parallelism 1"
                                                     : "parallelism 4");
    free(got);
  }
  free(want);
  evset_free(&l);
  evset_free(&r);
}

/* Regular join of two changelogs: materializing the output changelog gives
 * the join of the two final tables. */
typedef struct cl_s {
  sl_row_kind_t kind;
  int64_t key, v;
} cl_t;

static const cl_t *cl_rows;

static void cl_gen(const vsrc_t *s, uint32_t split, uint64_t i,
                   sl_row_builder_t *b) {
  (void)split;
  const cl_t *x = &((const cl_t *)s->user)[i];
  sl_row_builder_set_kind(b, x->kind);
  sl_row_builder_set_i64(b, 0, x->key);
  sl_row_builder_set_i64(b, 1, x->v);
}

SL_TEST(regular_join_of_changelogs_materializes_to_the_join_of_tables) {
  (void)cl_rows;
  /* Left: a changelog over keys 1..3; right: another. */
  const cl_t left[] = {
      {SL_ROW_INSERT, 1, 10},        {SL_ROW_INSERT, 2, 20},
      {SL_ROW_UPDATE_BEFORE, 1, 10}, {SL_ROW_UPDATE_AFTER, 1, 11},
      {SL_ROW_INSERT, 3, 30},        {SL_ROW_INSERT, 1, 12},
      {SL_ROW_DELETE, 2, 20},        {SL_ROW_INSERT, 2, 21}};
  const cl_t right[] = {
      {SL_ROW_INSERT, 1, 100}, {SL_ROW_INSERT, 2, 200},
      {SL_ROW_INSERT, 1, 101}, {SL_ROW_DELETE, 1, 100},
      {SL_ROW_INSERT, 3, 300}, {SL_ROW_UPDATE_BEFORE, 3, 300},
      {SL_ROW_UPDATE_AFTER, 3, 301}};
  /* Final tables: left {1:11, 3:30, 1:12, 2:21}, right {2:200, 1:101,
   * 3:301}: the join, as (left v, right v). */
  const pair_t want[] = {{11, 101}, {12, 101}, {21, 200}, {30, 301}};
  for (uint32_t par = 1; par <= 4; par += 3) {
    sl_job_t *job = new_job(par);
    sl_field_t f[] = {I64("key"), I64("v")};
    sl_schema_t *schema = make_schema(f, 2);
    vsrc_t ls, rs;
    vsrc_init(&ls, 1, 8, cl_gen, left);
    vsrc_init(&rs, 1, 7, cl_gen, right);
    const char *key[] = {"key"};
    sl_stream_t *a = sl_stream_key_by_fields(
        sl_job_source(job, "left", &vsrc_vt, &ls, schema), key, 1);
    sl_stream_t *b = sl_stream_key_by_fields(
        sl_job_source(job, "right", &vsrc_vt, &rs, schema), key, 1);
    sl_stream_t *j = sl_stream_join(a, b, "join");
    csink_t out;
    csink_init(&out);
    SL_ASSERT_OK(sl_stream_sink(j, "out", &csink_vt, &out));
    run_ok(job);
    /* Materialize: +I/+U add a row, -U/-D remove one. */
    pair_t *m = calloc(out.n_rows + 1, sizeof(*m));
    size_t n = 0;
    for (size_t i = 0; i < out.n_rows; i++) {
      sl_row_t row = crow(&out, i);
      pair_t x = {sl_row_get_i64(&row, 1), sl_row_get_i64(&row, 3)};
      sl_row_kind_t k = sl_row_kind(&row);
      if (k == SL_ROW_INSERT || k == SL_ROW_UPDATE_AFTER) {
        m[n++] = x;
        continue;
      }
      size_t z = 0;
      while (z < n && (m[z].a != x.a || m[z].b != x.b)) z++;
      if (z == n) SL_TEST_FAIL("retraction of (%lld, %lld) that was never "
                               "emitted", (long long)x.a, (long long)x.b);
      m[z] = m[--n];
    }
    qsort(m, n, sizeof(*m), cmp_pair);
    assert_pairs_equal(m, n, want, 4);
    free(m);
    csink_free(&out);
    sl_job_destroy(job);
    sl_schema_unref(schema);
  }
}

SL_TEST(join_errors_name_the_problem) {
  sl_job_t *job = new_job(1);
  sl_field_t f[] = {I64("key"), I64("v")};
  sl_schema_t *schema = make_schema(f, 2);
  vsrc_t ls;
  vsrc_init(&ls, 1, 0, cl_gen, NULL);
  sl_stream_t *a = sl_job_source(job, "left", &vsrc_vt, &ls, schema);
  const char *key[] = {"key"};
  sl_stream_t *ka = sl_stream_key_by_fields(a, key, 1);
  sl_interval_join_spec_t spec = {"v", "nope", 0, 10};
  sl_stream_interval_join(ka, ka, "j", &spec);
  const sl_error_t *err = sl_job_error(job);
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err),
                        "join 'j': no event-time field 'nope' in the right "
                        "input") != NULL);
  sl_job_destroy(job);
  job = new_job(1);
  vsrc_init(&ls, 1, 0, cl_gen, NULL);
  a = sl_job_source(job, "left", &vsrc_vt, &ls, schema);
  sl_stream_join(a, sl_stream_key_by_fields(a, key, 1), "j");
  err = sl_job_error(job);
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err),
                        "join 'j' needs both inputs keyed by fields") != NULL);
  sl_job_destroy(job);
  /* A cumulate window is not a window join's. */
  job = new_job(1);
  vsrc_init(&ls, 1, 0, cl_gen, NULL);
  a = sl_job_source(job, "left", &vsrc_vt, &ls, schema);
  ka = sl_stream_key_by_fields(a, key, 1);
  sl_window_spec_t ws;
  sl_window_spec_init(&ws);
  ws.kind = SL_WINDOW_CUMULATE;
  ws.time_field = "v";
  ws.size_us = 10;
  ws.step_us = 5;
  sl_stream_window_join(ka, ka, "j", &ws, "v");
  err = sl_job_error(job);
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err),
                        "window joins take tumbling or sliding windows") !=
                 NULL);
  sl_job_destroy(job);
  sl_schema_unref(schema);
}

/* Two session windows of a key can share a timer time (one's end - 1 is
 * the other's cleanup time): merging one must not cancel the other's.
 * Gap 10, lateness 20: [0,10) fires at 9, cleanup 29 = [20,30)'s fire. */
SL_TEST(session_merge_keeps_another_windows_timer) {
  const ev_t evs[] = {{1, 0, 1}, {1, 20, 2}, {1, 5, 4}};
  evset_t e;
  one_split(&e, evs, 3);
  wjob_t j = {1, {0}, {0}, false};
  sl_window_spec_init(&j.spec);
  j.spec.kind = SL_WINDOW_SESSION;
  j.spec.time_field = "ts";
  j.spec.gap_us = 10;
  j.spec.allowed_lateness_us = 20;
  sl_watermark_config_init(&j.wm);
  j.wm.time_field = "ts";
  j.wm.strategy = SL_WM_MONOTONOUS;
  j.wm.per_record = true;
  csink_t out;
  csink_init(&out);
  run_window_job(&j, &e, &out, NULL);
  bool has_20 = false;
  for (size_t i = 0; i < out.n_rows; i++) {
    sl_row_t r = crow(&out, i);
    if (sl_row_get_i64(&r, 1) == 20 && sl_row_kind(&r) == SL_ROW_INSERT)
      has_20 = true;
  }
  if (!has_20) SL_TEST_FAIL("the session [20, 30) was never emitted");
  csink_free(&out);
  evset_free(&e);
}

/* ------------------------------------------------------------------ */
/* Event times at the limits of int64 (issue 12: windows overflowed, under
 * UBSan, or dropped rows silently). */

/* One split of events, per-record watermarks without delay, through the
 * window of spec (count, sum(v)) into out; returns the job's code and its
 * message in *out_msg (NULL on success). */
static int run_limit_window(const sl_window_spec_t *spec, const ev_t *evs,
                            uint64_t n, csink_t *out, char **out_msg) {
  evset_t e;
  one_split(&e, evs, n);
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  vsrc_t src;
  vsrc_init(&src, 1, 0, ev_gen, &e);
  src.split_len = e.n;
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.per_record = true;
  sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}, {"total", SL_AGG_SUM, "v"}};
  sl_stream_t *w = sl_stream_window_aggregate(s, "w", spec, aggs, 2);
  SL_ASSERT_OK(sl_stream_sink(w, "out", &csink_vt, out));
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  *out_msg = err ? strdup(sl_error_message(err)) : NULL;
  sl_error_destroy(err);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  evset_free(&e);
  return rc;
}

SL_TEST(window_event_times_at_the_int64_limits) {
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 1000;
  /* The first and the last whole windows of int64 (INT64_MIN is 808 below
   * a multiple of 1000, INT64_MAX 807 above one). */
  const int64_t first = INT64_MIN + 808, last_end = INT64_MAX - 807;
  const ev_t ok[] = {{1, first, 5},
                     {1, first + 999, 6},
                     {1, last_end - 1000, 7},
                     {1, last_end - 1, 8}};
  csink_t out;
  csink_init(&out);
  char *msg;
  int rc = run_limit_window(&spec, ok, 4, &out, &msg);
  if (rc != SL_OK) SL_TEST_FAIL("the job failed: %s", msg);
  size_t n;
  wres_t *got = collected_windows(&out, &n);
  const wres_t want[] = {{1, first, first + 1000, 2, 11, first + 999, 0},
                         {1, last_end - 1000, last_end, 2, 15, last_end - 1,
                          0}};
  assert_windows_equal(got, n, want, 2, "windows at the limits");
  free(got);
  csink_free(&out);

  /* Event times whose window does not fit in int64: a clear error, not
   * an overflow or a silent drop.  The last case: a sliding window of
   * 2000 every 1000 would also need [first - 1000, first + 1000). */
  struct {
    int64_t ts, slide, lateness;
  } bad[] = {{INT64_MIN, 0, 0},
             {first - 1, 0, 0},
             {INT64_MAX, 0, 0},
             {last_end, 0, 0},
             {last_end - 1, 0, 808}, /* cleanup timer at INT64_MAX */
             {first, 1000, 0}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    sl_window_spec_t sp = spec;
    if (bad[i].slide) {
      sp.kind = SL_WINDOW_SLIDING;
      sp.size_us = 2000;
      sp.slide_us = bad[i].slide;
    }
    sp.allowed_lateness_us = bad[i].lateness;
    const ev_t evs[] = {{1, 0, 1}, {1, bad[i].ts, 2}};
    csink_init(&out);
    rc = run_limit_window(&sp, evs, 2, &out, &msg);
    char want_msg[512];
    snprintf(want_msg, sizeof(want_msg),
             "operator 'w' (subtask 1 of 1): window 'w': event time %lld "
             "(field 'ts') is too close to the limits of int64 for a window "
             "of %lld us", (long long)bad[i].ts, (long long)sp.size_us);
    if (rc != SL_EOVERFLOW || msg == NULL || strcmp(msg, want_msg) != 0)
      SL_TEST_FAIL("case %zu: rc %d, message '%s'", i, rc, msg ? msg : "");
    free(msg);
    csink_free(&out);
  }
  /* A sliding window near the start of int64 whose windows all fit. */
  spec.kind = SL_WINDOW_SLIDING;
  spec.size_us = 2000;
  spec.slide_us = 1000;
  const ev_t sl_ok[] = {{1, first + 1000, 3}};
  csink_init(&out);
  rc = run_limit_window(&spec, sl_ok, 1, &out, &msg);
  if (rc != SL_OK) SL_TEST_FAIL("the job failed: %s", msg);
  got = collected_windows(&out, &n);
  const wres_t want_sl[] = {
      {1, first, first + 2000, 1, 3, first + 1000, 0},
      {1, first + 1000, first + 3000, 1, 3, first + 1000, 0}};
  assert_windows_equal(got, n, want_sl, 2, "sliding at the start");
  free(got);
  csink_free(&out);
}

/* The window join refuses such event times the same way. */
SL_TEST(window_join_event_time_at_the_int64_limit) {
  evset_t l, r;
  const ev_t lev[] = {{1, INT64_MAX, 1}};
  const ev_t rev[] = {{1, 5, 2}};
  one_split(&l, lev, 1);
  one_split(&r, rev, 1);
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  vsrc_t ls, rs;
  vsrc_init(&ls, 1, 0, ev_gen, &l);
  ls.split_len = l.n;
  vsrc_init(&rs, 1, 0, ev_gen, &r);
  rs.split_len = r.n;
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.per_record = true;
  const char *key[] = {"key"};
  sl_stream_t *a = sl_stream_key_by_fields(
      sl_source_watermarks(sl_job_source(job, "left", &vsrc_vt, &ls, schema),
                           &wm), key, 1);
  sl_stream_t *b = sl_stream_key_by_fields(
      sl_source_watermarks(sl_job_source(job, "right", &vsrc_vt, &rs, schema),
                           &wm), key, 1);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 1000;
  sl_stream_t *j = sl_stream_window_join(a, b, "join", &spec, NULL);
  csink_t out;
  csink_init(&out);
  SL_ASSERT_OK(sl_stream_sink(j, "out", &csink_vt, &out));
  int rc;
  char *msg = run_fail(job, &rc);
  char want[512];
  snprintf(want, sizeof(want),
           "operator 'join' (subtask 1 of 1): join 'join': event time %lld "
           "of a left row is too close to the limits of int64 for a window "
           "of 1000 us", (long long)INT64_MAX);
  SL_ASSERT_EQ_INT(rc, SL_EOVERFLOW);
  SL_ASSERT_EQ_STR(msg, want);
  free(msg);
  csink_free(&out);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  evset_free(&l);
  evset_free(&r);
}

/* ------------------------------------------------------------------ */
/* Slices (window.c, "Slicing"): tumbling, sliding and cumulate windows
 * against a brute force over random streams, and against the per-window
 * layout (a user aggregate without merge keeps it) with late rows. */

/* Every (key, window) of every event, summed: the brute force for any
 * tumbling, sliding or cumulate spec. */
static wres_t *expect_any(const evset_t *e, const sl_window_spec_t *sp,
                          size_t *out_n, size_t *out_n_none) {
  size_t cap = 1024, n = 0;
  *out_n_none = 0;
  wres_t *w = malloc(cap * sizeof(*w));
  int64_t off = sp->offset_us;
  for (uint32_t s = 0; s < e->n_splits; s++)
    for (uint64_t i = 0; i < e->n[s]; i++) {
      const ev_t *x = &e->ev[s][i];
      int64_t st[2048][2];
      size_t m = 0;
      if (sp->kind == SL_WINDOW_CUMULATE) {
        int64_t base = x->ts - fmod64(x->ts - off, sp->size_us);
        for (int64_t end = base + sp->step_us; end <= base + sp->size_us;
             end += sp->step_us)
          if (end > x->ts) st[m][0] = base, st[m++][1] = end;
      } else {
        int64_t slide = sp->kind == SL_WINDOW_SLIDING ? sp->slide_us
                                                      : sp->size_us;
        for (int64_t a = x->ts - fmod64(x->ts - off, slide);
             a > x->ts - sp->size_us; a -= slide)
          st[m][0] = a, st[m++][1] = a + sp->size_us;
      }
      *out_n_none += m == 0; /* in a gap between sliding windows */
      for (size_t k = 0; k < m; k++) {
        if (n == cap) w = realloc(w, (cap *= 2) * sizeof(*w));
        w[n++] = (wres_t){x->key, st[k][0], st[k][1], 1, x->v, x->ts, 0};
      }
    }
  qsort(w, n, sizeof(*w), cmp_wres);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && w[m - 1].key == w[i].key && w[m - 1].start == w[i].start &&
        w[m - 1].end == w[i].end) {
      w[m - 1].count++;
      w[m - 1].sum += w[i].sum;
      if (w[i].max_ts > w[m - 1].max_ts) w[m - 1].max_ts = w[i].max_ts;
    } else {
      w[m++] = w[i];
    }
  }
  *out_n = m;
  return w;
}

/* Random streams: per split n events, event time rising by 0..2*gap us
 * per event, keys uniform over n_keys, then each block of `block` events
 * shuffled (an event moves by less than block * 2 * gap us). */
static void evset_random(evset_t *e, uint32_t n_splits, uint64_t n,
                         uint64_t n_keys, uint64_t salt, uint32_t block,
                         int64_t gap) {
  memset(e, 0, sizeof(*e));
  e->n_splits = n_splits;
  for (uint32_t s = 0; s < n_splits; s++) {
    e->n[s] = n;
    e->ev[s] = calloc(n, sizeof(ev_t));
    int64_t t = -5 * gap * (int64_t)n / 7; /* negative times too */
    for (uint64_t i = 0; i < n; i++) {
      uint64_t h = rnd(salt, s, i);
      t += (int64_t)(h % (uint64_t)(2 * gap + 1));
      e->ev[s][i] = (ev_t){(int64_t)((h >> 16) % n_keys), t,
                           (int64_t)((h >> 40) % 1000) - 300};
    }
    for (uint64_t b0 = 0; block > 1 && b0 < n; b0 += block) {
      uint64_t len = n - b0 < block ? n - b0 : block;
      for (uint64_t k = len - 1; k > 0; k--) {
        uint64_t j = rnd(salt ^ 0x9e3779b9u, s, b0 + k) % (k + 1);
        ev_t x = e->ev[s][b0 + k];
        e->ev[s][b0 + k] = e->ev[s][b0 + j];
        e->ev[s][b0 + j] = x;
      }
    }
  }
}

SL_TEST(sliced_windows_match_brute_force_on_random_streams) {
  struct {
    sl_window_kind_t kind;
    int64_t size, slide_or_step, offset;
  } cases[] = {
      {SL_WINDOW_SLIDING, 10000, 3000, 0},   /* size not a multiple */
      {SL_WINDOW_SLIDING, 10000, 2500, 700}, /* 4 slices, offset */
      {SL_WINDOW_SLIDING, 9000, 6000, 0},    /* slide > size / 2 */
      {SL_WINDOW_SLIDING, 5000, 5000, 0},    /* slide == size */
      {SL_WINDOW_SLIDING, 21000, 700, 0},    /* 30 slices per window */
      {SL_WINDOW_SLIDING, 3000, 5000, 1000}, /* gaps between windows */
      {SL_WINDOW_TUMBLING, 4000, 0, 1500},
      {SL_WINDOW_CUMULATE, 12000, 3000, 0},
      {SL_WINDOW_CUMULATE, 10000, 1000, 400},
      {SL_WINDOW_CUMULATE, 6000, 6000, 0},   /* one window: tumbling */
  };
  for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
    evset_t e;
    /* 300 keys, about 2 events per key and 10 ms; disorder up to 16
     * events of 2 * 35 us. */
    evset_random(&e, 2, 6000, 300, 101 + ci, 16, 35);
    wjob_t j = {ci % 2 ? 1 : 3, {0}, {0}, false};
    sl_window_spec_init(&j.spec);
    j.spec.kind = cases[ci].kind;
    j.spec.time_field = "ts";
    j.spec.size_us = cases[ci].size;
    j.spec.offset_us = cases[ci].offset;
    if (cases[ci].kind == SL_WINDOW_SLIDING)
      j.spec.slide_us = cases[ci].slide_or_step;
    if (cases[ci].kind == SL_WINDOW_CUMULATE)
      j.spec.step_us = cases[ci].slide_or_step;
    sl_watermark_config_init(&j.wm);
    j.wm.time_field = "ts";
    j.wm.max_out_of_orderness_us = 16 * 70;
    j.wm.per_record = ci % 3 == 0;
    j.wm.interval_ms = 1;
    size_t n_want, n_got, n_none;
    wres_t *want = expect_any(&e, &j.spec, &n_want, &n_none);
    csink_t out, late;
    csink_init(&out);
    csink_init(&late);
    run_window_job(&j, &e, &out, &late);
    SL_ASSERT_EQ_INT(late.n_rows, n_none); /* no row is late otherwise */
    wres_t *got = collected_windows(&out, &n_got);
    char what[96];
    snprintf(what, sizeof(what), "case %zu (kind %d, %lld / %lld, offset %lld)",
             ci, (int)cases[ci].kind, (long long)cases[ci].size,
             (long long)cases[ci].slide_or_step, (long long)cases[ci].offset);
    SL_ASSERT_TRUE(n_want > 1000);
    assert_windows_equal(got, n_got, want, n_want, what);
    free(got);
    free(want);
    csink_free(&out);
    csink_free(&late);
    evset_free(&e);
  }
}

/* A user aggregate of (key, count, sum) with or without merge: without,
 * the operator keeps the per-window layout, the reference here. */
static int kcs_add(void *user, const sl_row_t *row, sl_bytes_t *acc) {
  (void)user;
  int64_t v[3] = {sl_row_get_i64(row, 0), 0, 0};
  if (acc->len == 24) memcpy(v, acc->data, 24);
  v[1]++;
  v[2] += sl_row_get_i64(row, 2);
  acc->len = 0;
  return sl_bytes_append(acc, v, 24);
}

static int kcs_merge(void *user, sl_slice_t from, sl_bytes_t *into) {
  (void)user;
  int64_t a[3], b[3];
  memcpy(a, from.ptr, 24);
  memcpy(b, into->data, 24);
  b[1] += a[1];
  b[2] += a[2];
  memcpy(into->data, b, 24);
  return SL_OK;
}

static int kcs_result(sl_ctx_t *ctx, void *user, const sl_window_t *w,
                      sl_slice_t acc, sl_row_builder_t *out) {
  (void)ctx;
  (void)user;
  int64_t v[3];
  memcpy(v, acc.ptr, 24);
  sl_row_builder_set_i64(out, 0, v[0]);
  sl_row_builder_set_i64(out, 1, w->start_us);
  sl_row_builder_set_i64(out, 2, w->end_us);
  sl_row_builder_set_i64(out, 3, w->max_ts_us);
  sl_row_builder_set_i64(out, 4, v[1]);
  sl_row_builder_set_i64(out, 5, v[2]);
  return SL_OK;
}

typedef enum { VIA_AGG, VIA_REDUCE_MERGE, VIA_REDUCE_PER_WINDOW } via_t;

/* One split through a window aggregate or user aggregate, per-record
 * watermarks (delay 2000 us), results and late rows collected. */
static void run_via(via_t via, const evset_t *e, const sl_window_spec_t *spec,
                    csink_t *out, csink_t *late) {
  sl_job_t *job = new_job(1);
  sl_schema_t *schema = ev_schema();
  vsrc_t src;
  vsrc_init(&src, 1, e->n[0], ev_gen, e);
  sl_stream_t *s = sl_job_source(job, "events", &vsrc_vt, &src, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.max_out_of_orderness_us = 2000;
  wm.per_record = true;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_stream_t *w;
  if (via == VIA_AGG) {
    sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}, {"total", SL_AGG_SUM, "v"}};
    w = sl_stream_window_aggregate(s, "window", spec, aggs, 2);
  } else {
    sl_type_t ts_t = {SL_TYPE_TIMESTAMP, 0, 0, false};
    sl_field_t f[] = {I64("key"),           {"window_start", ts_t},
                      {"window_end", ts_t}, {"event_time", ts_t},
                      I64("n"),             I64("total")};
    sl_schema_t *os = make_schema(f, 6);
    sl_window_agg_fns_t fns = {kcs_add,
                               via == VIA_REDUCE_MERGE ? kcs_merge : NULL,
                               kcs_result};
    w = sl_stream_window_reduce(s, "window", spec, os, &fns, NULL);
    sl_schema_unref(os);
  }
  SL_ASSERT_OK(sl_stream_sink(w, "out", &csink_vt, out));
  SL_ASSERT_OK(sl_stream_sink(sl_stream_late_rows(w), "late", &csink_vt,
                              late));
  run_ok(job);
  sl_job_destroy(job);
  sl_schema_unref(schema);
}

/* Per key, the rows in arrival order (the order across keys may differ:
 * slices fire all of a key's due windows at its first due timer). */
static int cmp_key_then_arrival(const void *a, const void *b) {
  const wres_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->max_ts > y->max_ts) - (x->max_ts < y->max_ts);
}

static wres_t *rows_by_key(const csink_t *c) {
  wres_t *w = calloc(c->n_rows + 1, sizeof(*w));
  for (size_t i = 0; i < c->n_rows; i++) {
    sl_row_t r = crow(c, i);
    /* Here max_ts holds the arrival index, and count folds in the
     * event_time, so that comparing count compares both. */
    w[i] = (wres_t){sl_row_get_i64(&r, 0), sl_row_get_i64(&r, 1),
                    sl_row_get_i64(&r, 2),
                    sl_row_get_i64(&r, 4) * 1000003 + sl_row_get_i64(&r, 3),
                    sl_row_get_i64(&r, 5), (int64_t)i, (int)sl_row_kind(&r)};
  }
  qsort(w, c->n_rows, sizeof(*w), cmp_key_then_arrival);
  return w;
}

SL_TEST(sliced_late_rows_and_lateness_equal_the_per_window_layout) {
  struct {
    sl_window_kind_t kind;
    int64_t size, slide_or_step, lateness;
  } cases[] = {
      {SL_WINDOW_SLIDING, 10000, 3000, 0},
      {SL_WINDOW_SLIDING, 10000, 3000, 7000},
      {SL_WINDOW_SLIDING, 8000, 2000, 15000},
      {SL_WINDOW_TUMBLING, 5000, 0, 4000},
      {SL_WINDOW_SLIDING, 3000, 5000, 20000}, /* gaps between windows */
      {SL_WINDOW_CUMULATE, 12000, 4000, 0},
      {SL_WINDOW_CUMULATE, 12000, 3000, 9000},
  };
  for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
    /* One split: event time rising about 300 us per event over 40 keys,
     * every 7th event 0..40 ms behind (late, within lateness, or not). */
    evset_t e;
    evset_random(&e, 1, 3000, 40, 900 + ci, 1, 300);
    for (uint64_t i = 0; i < e.n[0]; i++)
      if (rnd(77, 0, i) % 7 == 0) e.ev[0][i].ts -= (int64_t)(rnd(78, 0, i) % 40000);
    sl_window_spec_t spec;
    sl_window_spec_init(&spec);
    spec.kind = cases[ci].kind;
    spec.time_field = "ts";
    spec.size_us = cases[ci].size;
    spec.allowed_lateness_us = cases[ci].lateness;
    if (spec.kind == SL_WINDOW_SLIDING) spec.slide_us = cases[ci].slide_or_step;
    if (spec.kind == SL_WINDOW_CUMULATE) spec.step_us = cases[ci].slide_or_step;
    csink_t ref, ref_late;
    csink_init(&ref);
    csink_init(&ref_late);
    run_via(VIA_REDUCE_PER_WINDOW, &e, &spec, &ref, &ref_late);
    wres_t *want = rows_by_key(&ref);
    size_t n_upd = 0;
    for (size_t i = 0; i < ref.n_rows; i++)
      n_upd += want[i].kind == SL_ROW_UPDATE_AFTER;
    printf("case %zu: %zu rows, %zu late, %zu updates\n", ci, ref.n_rows,
           ref_late.n_rows, n_upd);
    /* The input exercises what it is meant to. */
    SL_ASSERT_TRUE(ref_late.n_rows > 10);
    if (spec.allowed_lateness_us) SL_ASSERT_TRUE(n_upd > 10);
    for (via_t via = VIA_AGG; via <= VIA_REDUCE_MERGE; via++) {
      csink_t out, late;
      csink_init(&out);
      csink_init(&late);
      run_via(via, &e, &spec, &out, &late);
      char what[96];
      snprintf(what, sizeof(what), "case %zu (kind %d, %lld / %lld, lateness "
               "%lld) via %s", ci, (int)spec.kind, (long long)spec.size_us,
               (long long)cases[ci].slide_or_step,
               (long long)spec.allowed_lateness_us,
               via == VIA_AGG ? "aggregate" : "user aggregate with merge");
      if (out.n_rows != ref.n_rows)
        SL_TEST_FAIL("%s: %zu rows, the per-window layout %zu", what,
                     out.n_rows, ref.n_rows);
      wres_t *got = rows_by_key(&out);
      for (size_t i = 0; i < ref.n_rows; i++) {
        const wres_t *g = &got[i], *x = &want[i];
        if (g->key != x->key || g->start != x->start || g->end != x->end ||
            g->count != x->count || g->sum != x->sum || g->kind != x->kind)
          SL_TEST_FAIL("%s: key %lld row %zu: %d [%lld, %lld) %lld %lld; "
                       "the per-window layout: %d [%lld, %lld) %lld %lld",
                       what, (long long)g->key, i, g->kind,
                       (long long)g->start, (long long)g->end,
                       (long long)g->count, (long long)g->sum, x->kind,
                       (long long)x->start, (long long)x->end,
                       (long long)x->count, (long long)x->sum);
      }
      SL_ASSERT_EQ_INT(late.n_rows, ref_late.n_rows);
      for (size_t i = 0; i < late.n_rows; i++) {
        sl_row_t a = crow(&late, i), b = crow(&ref_late, i);
        SL_ASSERT_EQ_INT(sl_row_get_i64(&a, 1), sl_row_get_i64(&b, 1));
      }
      free(got);
      csink_free(&out);
      csink_free(&late);
    }
    free(want);
    csink_free(&ref);
    csink_free(&ref_late);
    evset_free(&e);
  }
}
