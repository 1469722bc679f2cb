/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The buffer timeout (sl_job_config_t.buffer_timeout_ms, Flink's
 * execution.buffer-timeout).  One source task writes two channels: a
 * rarely used one that gets a single record first, and a busy one that
 * then gets records for as long as the source runs.  The source never
 * waits for input, no watermark is generated and no checkpoint is taken,
 * so nothing but the timeout can send the rare channel's partly filled
 * buffer before the source ends.  The source stops once the single record
 * has arrived (the latch) or at a generous deadline, and records which.
 */
#include <stdatomic.h>
#include <time.h>

#include "it_helpers.h"

#define DEADLINE_S 60 /* the busy source ends here at the latest */

typedef struct bt_s {
  _Atomic bool is_rare_seen;  /* the rare record reached its operator */
  bool was_seen_while_running; /* ... before the source ended */
  uint64_t n_busy;             /* busy records emitted */
  uint64_t max_busy;           /* 0: until the rare record is seen */
  sl_schema_t *schema;
} bt_t;

typedef struct bt_reader_s {
  bt_t *bt;
  bool is_rare_sent;
  int64_t deadline_s;
} bt_reader_t;

static int64_t mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static int bt_plan(void *ctx, uint32_t p, sl_split_list_t *l,
                   sl_error_t **e) {
  (void)ctx;
  (void)p;
  (void)e;
  return sl_split_list_addf(l, "only");
}

static int bt_open(void *ctx, const sl_reader_init_t *init, void **out,
                   sl_error_t **e) {
  (void)init;
  (void)e;
  bt_reader_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return SL_ENOMEM;
  r->bt = ctx;
  r->deadline_s = mono_s() + DEADLINE_S;
  *out = r;
  return SL_OK;
}

static bool emit(sl_source_out_t *out, int64_t key) {
  sl_row_builder_t *b = sl_source_builder(out);
  sl_row_builder_set_i64(b, 0, key);
  sl_row_builder_set_i64(b, 1, 0);
  return sl_source_emit_builder(out, NULL);
}

/* Key 1 is the rare record, key 0 the busy ones.  Always MORE (never
 * WAIT) until the end, so the task never runs out of input. */
static int bt_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  bt_reader_t *r = rd;
  bt_t *bt = r->bt;
  if (!r->is_rare_sent) {
    r->is_rare_sent = true;
    if (!emit(out, 1)) return SL_POLL_MORE;
  }
  bool is_seen = atomic_load(&bt->is_rare_seen);
  bool is_done = bt->max_busy ? bt->n_busy >= bt->max_busy
                              : is_seen || mono_s() >= r->deadline_s;
  if (is_done) {
    bt->was_seen_while_running = is_seen;
    return SL_POLL_END;
  }
  for (int i = 0; i < 64; i++) {
    bt->n_busy++;
    if (!emit(out, 0)) break;
  }
  return SL_POLL_MORE;
}

static int bt_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}

static void bt_close(void *rd) { free(rd); }
static void bt_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t bt_vt = {"bt", bt_plan, bt_open, bt_poll,
                                     bt_pos, bt_close, bt_destroy};

static int is_rare(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)ctx;
  (void)user;
  return sl_row_get_i64(row, 0) == 1;
}

static int is_busy(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)ctx;
  (void)user;
  return sl_row_get_i64(row, 0) == 0;
}

static int rare_arrived(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)ctx;
  (void)row;
  atomic_store(&((bt_t *)user)->is_rare_seen, true);
  return SL_OK;
}

static int busy_arrived(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)ctx;
  (void)user;
  (void)row;
  return SL_OK;
}

/* source -> filter(rare) -> key_by -> process -> null sink
 *        -> filter(busy) -> key_by -> process -> null sink
 * The filters chain into the source task; each key_by is a channel. */
static void run_bt(int64_t timeout_ms, bt_t *bt) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.buffer_timeout_ms = timeout_ms;
  sl_job_t *job;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_create(&cfg, &job, &err), err);
  bt->schema = schema_ka();
  sl_stream_t *src = sl_job_source(job, "src", &bt_vt, bt, bt->schema);
  const char *key[] = {"key"};
  sl_process_fns_t rare = {NULL, rare_arrived, NULL, NULL, NULL, NULL};
  sl_process_fns_t busy = {NULL, busy_arrived, NULL, NULL, NULL, NULL};
  const sl_sink_vt_t *nvt;
  void *nctx;
  sl_stream_t *a = sl_stream_filter(src, "rare", is_rare, NULL);
  a = sl_stream_process(sl_stream_key_by_fields(a, key, 1), "rare-in",
                        bt->schema, &rare, bt);
  SL_ASSERT_OK(sl_null_sink_create(&nvt, &nctx));
  sl_stream_sink(a, "rare-sink", nvt, nctx);
  sl_stream_t *b = sl_stream_filter(src, "busy", is_busy, NULL);
  b = sl_stream_process(sl_stream_key_by_fields(b, key, 1), "busy-in",
                        bt->schema, &busy, bt);
  SL_ASSERT_OK(sl_null_sink_create(&nvt, &nctx));
  sl_stream_sink(b, "busy-sink", nvt, nctx);
  run_ok(job);
  sl_job_destroy(job);
  sl_schema_unref(bt->schema);
  /* Whatever the timeout, the record arrives by the end. */
  SL_ASSERT_TRUE(atomic_load(&bt->is_rare_seen));
}

/* A timeout sends the rare buffer while the source is busy: the source
 * ends on the latch, long before its deadline. */
SL_TEST(rare_record_arrives_within_the_timeout) {
  bt_t bt = {false, false, 0, 0, NULL};
  run_bt(20, &bt);
  SL_ASSERT_TRUE(bt.was_seen_while_running);
  SL_ASSERT_TRUE(bt.n_busy > 0);
}

/* The default (SL_DEFAULT_BUFFER_TIMEOUT_MS) does the same. */
SL_TEST(default_timeout_sends_the_rare_record) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  SL_ASSERT_EQ_INT(cfg.buffer_timeout_ms, SL_DEFAULT_BUFFER_TIMEOUT_MS);
  bt_t bt = {false, false, 0, 0, NULL};
  run_bt(cfg.buffer_timeout_ms, &bt);
  SL_ASSERT_TRUE(bt.was_seen_while_running);
}

/* 0: every record is sent at once. */
SL_TEST(zero_sends_every_record_at_once) {
  bt_t bt = {false, false, 0, 0, NULL};
  run_bt(0, &bt);
  SL_ASSERT_TRUE(bt.was_seen_while_running);
}

/* -1: the rare buffer waits for the end of the source (no watermark, no
 * barrier, never out of input, never full), however many busy records
 * pass meanwhile. */
SL_TEST(minus_one_holds_the_buffer_until_the_end) {
  bt_t bt = {false, false, 0, 300000, NULL};
  run_bt(-1, &bt);
  SL_ASSERT_TRUE(!bt.was_seen_while_running);
  SL_ASSERT_TRUE(bt.n_busy >= 300000);
}

SL_TEST(bad_timeouts_are_refused) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  sl_job_t *job = NULL;
  sl_error_t *err = NULL;
  cfg.buffer_timeout_ms = -2;
  SL_ASSERT_EQ_INT(sl_job_create(&cfg, &job, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "buffer_timeout_ms") != NULL);
  sl_error_destroy(err);
  err = NULL;
  cfg.buffer_timeout_ms = SL_MAX_DURATION_MS + 1;
  SL_ASSERT_EQ_INT(sl_job_create(&cfg, &job, &err), SL_EINVAL);
  sl_error_destroy(err);
  cfg.buffer_timeout_ms = -1;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_job_destroy(job);
}
