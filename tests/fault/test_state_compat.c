/* SPDX-License-Identifier: Apache-2.0 */
/*
 * State compatibility on restore (src/state/state_compat.c).  A first run
 * of a keyed job (the gated sequence source of seq_job.h, then an
 * aggregate, a window, an interval join or a user process function) takes
 * checkpoint 1 with a third of the input in its state and is cancelled.
 * The job is then changed under the same operator uid — a value added,
 * values reordered, count -> avg, the window kind, a join input's schema,
 * a user state's layout or version — and resuming must fail before any
 * accumulator is read, with the exact message naming the operator, the
 * state and both layouts, without restarts even under an unlimited
 * restart strategy, and leaving checkpoint 1 intact: a resume with the
 * original job still finishes with exact results.
 */
#include <sys/stat.h>

#include "seq_job.h"

#include "sluice/sl_ops.h"
#include "sluice/sl_window.h"

typedef enum topo_e { T_AGG, T_WINDOW, T_JOIN, T_USER, T_REDUCE } topo_t;

/* What the job looks like; each test changes one thing for the resume. */
static sl_agg_t aggs[4];
static uint32_t n_aggs;
static sl_window_kind_t win_kind;
static bool is_right_widened; /* join: the right input gains a column */
static const char *user_layout;
static uint32_t user_version;
static bool has_merge; /* T_REDUCE: the user aggregate has a merge */

static void set_aggs(const sl_agg_t *a, uint32_t n) {
  memcpy(aggs, a, n * sizeof(*a));
  n_aggs = n;
}

/* The original job: sum(seq) and count() per key. */
static void original(void) {
  sl_agg_t a[] = {{"total", SL_AGG_SUM, "seq"}, {"n", SL_AGG_COUNT, NULL}};
  set_aggs(a, 2);
  win_kind = SL_WINDOW_TUMBLING;
  is_right_widened = false;
  user_layout = "count:int64, sum:int64";
  user_version = 1;
  has_merge = false;
}

static sl_job_config_t config(bool is_resume) {
  static char dir[4300];
  snprintf(dir, sizeof(dir), "%s/ckpt", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "compat";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  cfg.resume_latest = is_resume;
  return cfg;
}

/* Aggregate sink: the latest (total, n) per key. */
static int agg_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)e;
  int64_t k = sl_row_get_i64(row, 0);
  pthread_mutex_lock(&lock);
  out_sum[k] = sl_row_get_i64(row, 1);
  out_count[k] = sl_row_get_i64(row, 2);
  pthread_mutex_unlock(&lock);
  return SL_OK;
}
static int null_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)row;
  (void)e;
  return SL_OK;
}
static const sl_sink_vt_t agg_sink_vt = {"latest", sink_open, agg_write,
                                         NULL, sink_close, sink_destroy};
static const sl_sink_vt_t null_sink_vt = {"null", sink_open, null_write,
                                          NULL, sink_close, sink_destroy};

/* A user process function whose state declares user_layout/version. */
static int user_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_t *st;
  sl_state_desc_t d = {.name = "count_and_sum", .kind = SL_STATE_VALUE,
                       .version = user_version, .layout = user_layout};
  int rc = sl_ctx_state(ctx, &d, &st);
  sl_ctx_set_local(ctx, st);
  return rc;
}
static int user_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *st = sl_ctx_local(ctx);
  int64_t acc[2] = {0, 0};
  sl_slice_t v;
  if (sl_value_get(st, &v) == SL_OK) memcpy(acc, v.ptr, 16);
  acc[0]++;
  acc[1] += sl_row_get_i64(row, 1);
  int rc = sl_value_put(st, acc, 16);
  if (rc != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, sl_row_get_i64(row, 0));
  sl_row_builder_set_i64(b, 1, acc[1]);
  sl_row_builder_set_i64(b, 2, acc[0]);
  return sl_ctx_emit_builder(ctx);
}

/* A windowed user aggregate: (count, sum of seq). */
static int red_add(void *user, const sl_row_t *row, sl_bytes_t *acc) {
  (void)user;
  int64_t v[2] = {0, 0};
  if (acc->len == 16) memcpy(v, acc->data, 16);
  v[0]++;
  v[1] += sl_row_get_i64(row, 1);
  acc->len = 0;
  return sl_bytes_append(acc, v, 16);
}
static int red_merge(void *user, sl_slice_t from, sl_bytes_t *into) {
  (void)user;
  int64_t a[2], b[2];
  memcpy(a, from.ptr, 16);
  memcpy(b, into->data, 16);
  b[0] += a[0];
  b[1] += a[1];
  memcpy(into->data, b, 16);
  return SL_OK;
}
static int red_result(sl_ctx_t *ctx, void *user, const sl_window_t *w,
                      sl_slice_t acc, sl_row_builder_t *out) {
  (void)ctx;
  (void)user;
  (void)w;
  int64_t v[2];
  memcpy(v, acc.ptr, 16);
  sl_row_builder_set_i64(out, 0, v[0]);
  sl_row_builder_set_i64(out, 1, v[1]);
  return SL_OK;
}

static sl_stream_t *keyed_source(sl_job_t *job, const char *uid, void *ctx,
                                 sl_schema_t *schema, bool is_widened) {
  sl_stream_t *s = sl_job_source(job, uid, &src_vt, ctx, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.strategy = SL_WM_MONOTONOUS;
  s = sl_source_watermarks(s, &wm);
  if (is_widened) {
    const char *names[] = {"key", "seq", "ts", "seq2"};
    const char *texts[] = {"key", "seq", "ts", "seq * 2"};
    sl_expr_t *ex[4];
    for (int i = 0; i < 4; i++)
      SL_ASSERT_OK(sl_expr_compile(texts[i], schema, &ex[i], NULL, NULL));
    s = sl_stream_project(s, "widen", names, ex, 4);
  }
  const char *key[] = {"key"};
  return sl_stream_key_by_fields(s, key, 1);
}

static sl_job_t *build(topo_t topo, const sl_job_config_t *cfg) {
  sl_field_t f[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                     {"seq", {SL_TYPE_INT64, 0, 0, false}},
                     {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}}};
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_schema_create(f, 3, &schema, NULL));
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(cfg, &job, NULL));
  sl_stream_t *s = keyed_source(job, "seq-source", NULL, schema, false);
  const sl_sink_vt_t *sink = &null_sink_vt;
  if (topo == T_AGG) {
    s = sl_stream_aggregate(s, "totals", aggs, n_aggs, SL_AGG_EMIT_UPDATES);
    sink = &agg_sink_vt;
  } else if (topo == T_WINDOW) {
    sl_window_spec_t spec;
    sl_window_spec_init(&spec);
    spec.kind = win_kind;
    spec.time_field = "ts";
    if (win_kind == SL_WINDOW_SESSION) spec.gap_us = 37000;
    else spec.size_us = 37000;
    s = sl_stream_window_aggregate(s, "per-window", &spec, aggs, n_aggs);
  } else if (topo == T_REDUCE) {
    sl_window_spec_t spec;
    sl_window_spec_init(&spec);
    spec.time_field = "ts";
    spec.size_us = 37000;
    sl_field_t of[2] = {{"n", {SL_TYPE_INT64, 0, 0, false}},
                        {"total", {SL_TYPE_INT64, 0, 0, false}}};
    sl_schema_t *out;
    SL_ASSERT_OK(sl_schema_create(of, 2, &out, NULL));
    sl_window_agg_fns_t fns = {red_add, has_merge ? red_merge : NULL,
                               red_result};
    s = sl_stream_window_reduce(s, "per-window", &spec, out, &fns, NULL);
    sl_schema_unref(out);
  } else if (topo == T_JOIN) {
    sl_stream_t *r = keyed_source(job, "seq-source-2", SEQ_SOURCE_2, schema,
                                  is_right_widened);
    sl_interval_join_spec_t spec = {"ts", "ts", -60000, 60000};
    s = sl_stream_interval_join(s, r, "pairs", &spec);
  } else {
    sl_field_t of[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                        {"total", {SL_TYPE_INT64, 0, 0, false}},
                        {"n", {SL_TYPE_INT64, 0, 0, false}}};
    sl_schema_t *out;
    SL_ASSERT_OK(sl_schema_create(of, 3, &out, NULL));
    sl_process_fns_t fns = {user_open, user_process, NULL, NULL, NULL, NULL};
    s = sl_stream_process(s, "user", out, &fns, NULL);
    sl_schema_unref(out);
    sink = &agg_sink_vt;
  }
  SL_ASSERT_OK(sl_stream_sink(s, "out", sink, NULL));
  if (sl_job_error(job))
    SL_TEST_FAIL("cannot build the job: %s",
                 sl_error_message(sl_job_error(job)));
  sl_schema_unref(schema);
  return job;
}

/* First run: checkpoint 1 with a third of the input in the state. */
static void make_checkpoint(topo_t topo) {
  seq_reset();
  original();
  sl_job_config_t cfg = config(false);
  sl_job_t *job = build(topo, &cfg);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_gate(PER_SPLIT / 3);
  uint64_t id = 0;
  sl_error_t *err = NULL;
  while (sl_job_trigger_checkpoint(job, &id, &err) != SL_OK) {
    sl_error_destroy(err);
    err = NULL;
  }
  SL_ASSERT_EQ_INT(id, 1);
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, id, 60000, NULL));
  sl_job_cancel(job);
  SL_ASSERT_EQ_INT(sl_job_wait(job, NULL), SL_ECANCELED);
  sl_job_destroy(job);
}

static bool exists(const char *name) {
  char p[4400];
  snprintf(p, sizeof(p), "%s/ckpt/compat/%s", sl_test_dir(), name);
  struct stat st;
  return stat(p, &st) == 0;
}

/* Resume the changed job: it must fail with `want`, with no restart (an
 * unlimited restart strategy is set), and leave checkpoint 1 as the only
 * one; then the original job resumes from it and finishes exactly. */
static void expect_incompatible(topo_t topo, const char *want) {
  sl_job_config_t cfg = config(true);
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 0; /* unlimited */
  cfg.restart.delay_ms = 1;
  sl_job_t *job = build(topo, &cfg);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 0);
  sl_error_destroy(err);
  sl_job_destroy(job);
  SL_ASSERT_TRUE(exists("chk-1/_metadata"));
  SL_ASSERT_TRUE(!exists("chk-2"));

  /* The checkpoint is intact: the original job resumes from it. */
  seq_reset();
  original();
  cfg = config(true);
  job = build(topo, &cfg);
  set_gate(PER_SPLIT);
  err = NULL;
  rc = sl_job_run(job, &err);
  if (rc != SL_OK)
    SL_TEST_FAIL("resuming the original job failed: %s",
                 sl_error_message(err));
  sl_job_destroy(job);
  if (topo == T_AGG || topo == T_USER) {
    int64_t per_key = PER_SPLIT / KEYS_PER_SPLIT;
    for (int k = 0; k < N_KEYS; k++)
      if (out_count[k] != per_key ||
          out_sum[k] != per_key * (per_key - 1) / 2)
        SL_TEST_FAIL("key %d: count %lld sum %lld after the resume", k,
                     (long long)out_count[k], (long long)out_sum[k]);
  }
}

#define AGG_OLD "key key:int64; sum(seq):int64, count():int64"

SL_TEST(aggregate_value_added_fails_naming_both_layouts) {
  make_checkpoint(T_AGG);
  sl_agg_t a[] = {{"total", SL_AGG_SUM, "seq"},
                  {"n", SL_AGG_COUNT, NULL},
                  {"last", SL_AGG_MAX, "seq"}};
  set_aggs(a, 3);
  expect_incompatible(
      T_AGG,
      "operator 'totals' (subtask 1 of 1): state 'accumulator' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[" AGG_OLD "], the operator declares version 1 with layout "
      "[key key:int64; sum(seq):int64, count():int64, max(seq):int64]; "
      "sluice cannot migrate state yet, so resume with the definition the "
      "checkpoint was taken with");
}

SL_TEST(aggregate_values_reordered_fails) {
  make_checkpoint(T_AGG);
  sl_agg_t a[] = {{"n", SL_AGG_COUNT, NULL}, {"total", SL_AGG_SUM, "seq"}};
  set_aggs(a, 2);
  expect_incompatible(
      T_AGG,
      "operator 'totals' (subtask 1 of 1): state 'accumulator' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[" AGG_OLD "], the operator declares version 1 with layout "
      "[key key:int64; count():int64, sum(seq):int64]; sluice cannot "
      "migrate state yet, so resume with the definition the checkpoint was "
      "taken with");
}

SL_TEST(aggregate_count_to_avg_fails) {
  make_checkpoint(T_AGG);
  sl_agg_t a[] = {{"total", SL_AGG_SUM, "seq"}, {"n", SL_AGG_AVG, "seq"}};
  set_aggs(a, 2);
  expect_incompatible(
      T_AGG,
      "operator 'totals' (subtask 1 of 1): state 'accumulator' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[" AGG_OLD "], the operator declares version 1 with layout "
      "[key key:int64; sum(seq):int64, avg(seq):bytes]; sluice cannot "
      "migrate state yet, so resume with the definition the checkpoint was "
      "taken with");
}

SL_TEST(aggregate_output_name_change_still_resumes) {
  /* An output column's name does not define the accumulator's bytes. */
  make_checkpoint(T_AGG);
  seq_reset();
  sl_agg_t a[] = {{"sum_of_seq", SL_AGG_SUM, "seq"},
                  {"rows", SL_AGG_COUNT, NULL}};
  set_aggs(a, 2);
  sl_job_config_t cfg = config(true);
  sl_job_t *job = build(T_AGG, &cfg);
  set_gate(PER_SPLIT);
  sl_error_t *err = NULL;
  if (sl_job_run(job, &err) != SL_OK)
    SL_TEST_FAIL("resume failed: %s", sl_error_message(err));
  sl_job_destroy(job);
  int64_t per_key = PER_SPLIT / KEYS_PER_SPLIT;
  SL_ASSERT_EQ_INT(out_count[7], per_key);
  SL_ASSERT_EQ_INT(out_sum[7], per_key * (per_key - 1) / 2);
}

SL_TEST(window_kind_changed_fails) {
  make_checkpoint(T_WINDOW);
  win_kind = SL_WINDOW_SESSION;
  expect_incompatible(
      T_WINDOW,
      "operator 'per-window' (subtask 1 of 1): state 'window.acc' does not "
      "match the checkpoint: the checkpoint holds version 2 with layout "
      "[per key: slices of 37000 us (offset 0 us), tumbling 37000 us; key "
      "key:int64; "
      "sum(seq):int64, count():int64], "
      "the operator declares version 1 with layout [session; key "
      "key:int64; sum(seq):int64, count():int64]; sluice cannot migrate "
      "state yet, so resume with the definition the checkpoint was taken "
      "with");
}

/* A checkpoint of the per-window layout (every window before slicing; a
 * user aggregate without merge still keeps it) does not restore into the
 * sliced layout: the error names the operator and both layouts. */
SL_TEST(window_per_window_layout_to_slices_fails) {
  make_checkpoint(T_REDUCE);
  has_merge = true;
  expect_incompatible(
      T_REDUCE,
      "operator 'per-window' (subtask 1 of 1): state 'window.acc' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[tumbling 37000 us; user aggregate], the operator declares version 2 "
      "with layout [per key: slices of 37000 us (offset 0 us), tumbling "
      "37000 us; user aggregate]; sluice cannot migrate state yet, so resume with the "
      "definition the checkpoint was taken with");
}

SL_TEST(join_input_schema_changed_fails) {
  make_checkpoint(T_JOIN);
  is_right_widened = true;
  expect_incompatible(
      T_JOIN,
      "operator 'pairs' (subtask 1 of 1): state 'join.rows' does not match "
      "the checkpoint: the checkpoint holds version 1 with layout [interval "
      "join; left key:int64, seq:int64, ts:timestamp; right key:int64, "
      "seq:int64, ts:timestamp], the operator declares version 1 with "
      "layout [interval join; left key:int64, seq:int64, ts:timestamp; "
      "right key:int64, seq:int64, ts:timestamp, seq2:int64]; sluice cannot "
      "migrate state yet, so resume with the definition the checkpoint was "
      "taken with");
}

SL_TEST(user_state_layout_changed_fails) {
  make_checkpoint(T_USER);
  user_layout = "count:int64, sum:float64";
  expect_incompatible(
      T_USER,
      "operator 'user' (subtask 1 of 1): state 'count_and_sum' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[count:int64, sum:int64], the operator declares version 1 with "
      "layout [count:int64, sum:float64]; sluice cannot migrate state yet, "
      "so resume with the definition the checkpoint was taken with");
}

SL_TEST(user_state_version_changed_fails) {
  make_checkpoint(T_USER);
  user_version = 2;
  expect_incompatible(
      T_USER,
      "operator 'user' (subtask 1 of 1): state 'count_and_sum' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[count:int64, sum:int64], the operator declares version 2 with "
      "layout [count:int64, sum:int64]; sluice cannot migrate state yet, "
      "so resume with the definition the checkpoint was taken with");
}

SL_TEST(user_state_without_layout_compares_kind_and_version) {
  make_checkpoint(T_USER);
  user_layout = NULL;
  expect_incompatible(
      T_USER,
      "operator 'user' (subtask 1 of 1): state 'count_and_sum' does not "
      "match the checkpoint: the checkpoint holds version 1 with layout "
      "[count:int64, sum:int64], the operator declares version 1 with "
      "layout [(no layout declared)]; sluice cannot migrate state yet, so "
      "resume with the definition the checkpoint was taken with");
}
