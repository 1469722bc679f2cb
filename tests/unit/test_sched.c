/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the worker-pool scheduler (src/runtime/sched_pool.c) and the
 * task loop (task.c), through small jobs built with the public API: many
 * tasks on few workers (and on one), cancelling a busy and an idle job
 * from another thread, failures that name the operator and the subtask,
 * a processing-time timer that must fire while its task has no input, and
 * the run-once rules of sl_job_run / sl_job_start / sl_job_wait.  Nothing
 * here sleeps: threads meet at latches (a mutex and a condition variable)
 * and the test source waits for the engine to wake it.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "sl_test.h"

#define SEQ_SPLIT 1000000 /* seq of record i of split s: s * SEQ_SPLIT + i */

static bool contains(const char *hay, const char *needle) {
  return hay != NULL && strstr(hay, needle) != NULL;
}

#define SL_ASSERT_CONTAINS(hay, needle)                                  \
  do {                                                                   \
    const char *sl_h_ = (hay);                                           \
    if (!contains(sl_h_, (needle)))                                      \
      SL_TEST_FAIL("'%s' does not contain '%s'", sl_h_ ? sl_h_ : "(null)", \
                   (needle));                                            \
  } while (0)

/* ------------------------------------------------------------------ */
/* A test source: (seq, key, amount) records from n_splits splits.  With
 * `hold`, a reader that has emitted everything returns SL_POLL_WAIT until
 * `released` is set (and its waker woken), then ends. */

typedef struct tsrc_s {
  uint32_t n_splits;
  uint64_t n_per_split; /* UINT64_MAX: unbounded */
  uint64_t n_keys;
  bool hold;
  _Atomic bool released;
  _Atomic(sl_source_waker_t *) waker;
  _Atomic uint32_t n_readers_closed;
} tsrc_t;

typedef struct treader_s {
  tsrc_t *src;
  uint32_t split[64];
  uint64_t next[64];
  uint32_t n;
  uint32_t cur;
} treader_t;

static uint64_t t_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void t_record(const tsrc_t *s, uint32_t split, uint64_t i,
                     int64_t *seq, int64_t *key, int64_t *amount) {
  *seq = (int64_t)split * SEQ_SPLIT + (int64_t)i;
  uint64_t h = t_mix((uint64_t)*seq);
  *key = (int64_t)(h % s->n_keys);
  *amount = (int64_t)((h >> 20) % 201) - 100;
}

static int tsrc_plan(void *ctx, uint32_t p, sl_split_list_t *l,
                     sl_error_t **e) {
  (void)p;
  (void)e;
  for (uint32_t i = 0; i < ((tsrc_t *)ctx)->n_splits; i++)
    if (sl_split_list_addf(l, "t%u", i) != SL_OK) return SL_ENOMEM;
  return SL_OK;
}

static int tsrc_open(void *ctx, const sl_reader_init_t *init, void **out,
                     sl_error_t **e) {
  (void)e;
  tsrc_t *s = ctx;
  treader_t *r = calloc(1, sizeof(*r));
  r->src = s;
  for (uint32_t i = 0; i < init->n_splits && i < 64; i++)
    r->split[r->n++] = init->splits[i].split;
  /* release: the waker is complete before another thread uses it. */
  atomic_store_explicit(&s->waker, init->waker, memory_order_release);
  *out = r;
  return SL_OK;
}

static int tsrc_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  treader_t *r = rd;
  const tsrc_t *s = r->src;
  for (uint32_t k = 0; k < r->n; k++) {
    uint32_t j = (r->cur + k) % r->n;
    if (r->next[j] >= s->n_per_split) continue;
    r->cur = j + 1;
    for (int b = 0; b < 64 && r->next[j] < s->n_per_split; b++) {
      int64_t seq, key, amount;
      t_record(s, r->split[j], r->next[j]++, &seq, &key, &amount);
      sl_row_builder_t *bld = sl_source_builder(out);
      sl_row_builder_set_i64(bld, 0, seq);
      sl_row_builder_set_i64(bld, 1, key);
      sl_row_builder_set_i64(bld, 2, amount);
      if (!sl_source_emit_builder(out, NULL)) return SL_POLL_MORE;
    }
    return SL_POLL_MORE;
  }
  if (s->hold &&
      !atomic_load_explicit(&r->src->released, memory_order_acquire))
    return SL_POLL_WAIT; /* until the waker is woken */
  return SL_POLL_END;
}

static int tsrc_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}

static void tsrc_close(void *rd) {
  treader_t *r = rd;
  atomic_fetch_add(&r->src->n_readers_closed, 1);
  free(r);
}
static void tsrc_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t tsrc_vt = {.type_name = "test",
                                       .plan = tsrc_plan,
                                       .reader_open = tsrc_open,
                                       .reader_poll = tsrc_poll,
                                       .reader_position = tsrc_pos,
                                       .reader_close = tsrc_close,
                                       .destroy = tsrc_destroy};

static void tsrc_init(tsrc_t *s, uint32_t n_splits, uint64_t n_per_split,
                      uint64_t n_keys) {
  memset(s, 0, sizeof(*s));
  s->n_splits = n_splits;
  s->n_per_split = n_per_split;
  s->n_keys = n_keys;
  atomic_init(&s->released, false);
  atomic_init(&s->waker, NULL);
  atomic_init(&s->n_readers_closed, 0);
}

static sl_schema_t *schema_of(const char *const *names, uint32_t n) {
  sl_field_t f[4];
  for (uint32_t i = 0; i < n; i++) {
    f[i].name = names[i];
    f[i].type = (sl_type_t){SL_TYPE_INT64, 0, 0, false};
  }
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, n, &s, NULL));
  return s;
}

static sl_schema_t *schema_src(void) {
  static const char *n[3] = {"seq", "key", "amount"};
  return schema_of(n, 3);
}

static sl_schema_t *schema_kv(void) {
  static const char *n[2] = {"key", "value"};
  return schema_of(n, 2);
}

/* ------------------------------------------------------------------ */
/* A collecting sink over (key, value) rows: the latest value per key, a
 * row count with a latch, and a check that each row reached the subtask
 * that owns its key group. */

typedef struct csink_s {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Protected by lock. */
  uint64_t n_rows;
  uint64_t latch_at;      /* broadcast cond when n_rows reaches it */
  int64_t *last;          /* per key, INT64_MIN = never seen; may be NULL */
  uint64_t n_keys;
  uint32_t max_parallelism; /* 0: no ownership check */
  uint64_t n_misrouted;
  uint32_t n_open, n_closed_ok, n_closed_fail;
  int64_t log[16][2];     /* first rows, in arrival order */
  uint32_t n_log;
} csink_t;

typedef struct cwriter_s {
  csink_t *c;
  uint32_t subtask;
  uint32_t parallelism;
  sl_bytes_t key;
} cwriter_t;

static void csink_init(csink_t *c, uint64_t n_keys) {
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  c->latch_at = UINT64_MAX;
  c->n_keys = n_keys;
  if (n_keys) {
    c->last = malloc(n_keys * sizeof(int64_t));
    for (uint64_t k = 0; k < n_keys; k++) c->last[k] = INT64_MIN;
  }
}

static void csink_free(csink_t *c) {
  free(c->last);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
}

static int csink_open(void *ctx, const sl_sink_init_t *init, void **out,
                      sl_error_t **e) {
  (void)e;
  csink_t *c = ctx;
  cwriter_t *w = calloc(1, sizeof(*w));
  w->c = c;
  w->subtask = init->subtask;
  w->parallelism = init->parallelism;
  sl_bytes_init(&w->key);
  pthread_mutex_lock(&c->lock);
  c->n_open++;
  pthread_mutex_unlock(&c->lock);
  *out = w;
  return SL_OK;
}

static int csink_write(void *wr, const sl_row_t *row, sl_error_t **e) {
  (void)e;
  cwriter_t *w = wr;
  csink_t *c = w->c;
  int64_t key = sl_row_get_i64(row, 0), v = sl_row_get_i64(row, 1);
  bool is_misrouted = false;
  if (c->max_parallelism) {
    sl_bytes_clear(&w->key);
    if (sl_key_add_i64(&w->key, key) != SL_OK) return SL_ENOMEM;
    uint32_t kg = sl_key_group(w->key.data, w->key.len, c->max_parallelism);
    is_misrouted = sl_key_group_owner(kg, c->max_parallelism,
                                      w->parallelism) != w->subtask;
  }
  pthread_mutex_lock(&c->lock);
  if (c->last && key >= 0 && (uint64_t)key < c->n_keys) c->last[key] = v;
  if (c->n_log < 16) {
    c->log[c->n_log][0] = key;
    c->log[c->n_log][1] = v;
    c->n_log++;
  }
  c->n_misrouted += is_misrouted;
  if (++c->n_rows == c->latch_at) pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
  return SL_OK;
}

static int csink_close(void *wr, bool ok, sl_error_t **e) {
  (void)e;
  cwriter_t *w = wr;
  csink_t *c = w->c;
  pthread_mutex_lock(&c->lock);
  if (ok) c->n_closed_ok++;
  else c->n_closed_fail++;
  pthread_mutex_unlock(&c->lock);
  sl_bytes_close(&w->key);
  free(w);
  return SL_OK;
}

static void csink_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t csink_vt = {.type_name = "collect",
                                      .writer_open = csink_open,
                                      .write = csink_write,
                                      .writer_close = csink_close,
                                      .destroy = csink_destroy};

/* Block until the sink has seen at least n rows. */
static void csink_wait_rows(csink_t *c, uint64_t n) {
  pthread_mutex_lock(&c->lock);
  c->latch_at = n;
  while (c->n_rows < n) pthread_cond_wait(&c->cond, &c->lock);
  pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ */
/* A keyed running sum: output (key, sum so far). */

typedef struct sum_local_s {
  sl_state_t *sum;
} sum_local_t;

static int sum_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sum_local_t *l = calloc(1, sizeof(*l));
  sl_ctx_set_local(ctx, l);
  sl_state_desc_t d = {.name = "sum", .kind = SL_STATE_VALUE, .version = 1};
  return sl_ctx_state(ctx, &d, &l->sum);
}

static int sum_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sum_local_t *l = sl_ctx_local(ctx);
  int64_t cur = 0;
  int rc = sl_value_get_i64(l->sum, &cur);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  cur += sl_row_get_i64(row, 2);
  if ((rc = sl_value_put_i64(l->sum, cur)) != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, sl_row_get_i64(row, 1));
  sl_row_builder_set_i64(b, 1, cur);
  return sl_ctx_emit_builder(ctx);
}

static void sum_close(sl_ctx_t *ctx, void *user) {
  (void)user;
  free(sl_ctx_local(ctx));
}

/* Pass (key, amount) through, dropping seq. */
static int kv_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  (void)ctx;
  (void)user;
  sl_row_builder_set_i64(out, 0, sl_row_get_i64(in, 1));
  sl_row_builder_set_i64(out, 1, sl_row_get_i64(in, 2));
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* (a) Many tasks on few workers. */

static void run_many_tasks(uint32_t n_workers, uint32_t parallelism,
                           uint32_t buffer_size, uint32_t credits) {
  const uint32_t n_splits = 16;
  const uint64_t per_split = 20000, n_keys = 5003;
  tsrc_t src;
  tsrc_init(&src, n_splits, per_split, n_keys);
  /* The expected sums, computed without the engine. */
  int64_t *expect = calloc(n_keys, sizeof(int64_t));
  bool *seen = calloc(n_keys, sizeof(bool));
  for (uint32_t s = 0; s < n_splits; s++)
    for (uint64_t i = 0; i < per_split; i++) {
      int64_t seq, k, a;
      t_record(&src, s, i, &seq, &k, &a);
      expect[k] += a;
      seen[k] = true;
    }
  csink_t sink;
  csink_init(&sink, n_keys);
  sink.max_parallelism = 128;

  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = parallelism;
  cfg.n_workers = n_workers;
  cfg.buffer_size = buffer_size;
  cfg.channel_buffers = credits;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, in);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {
      .open = sum_open, .process = sum_process, .close = sum_close};
  s = sl_stream_process(s, "sum", kv, &fns, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);

  SL_ASSERT_EQ_INT(sink.n_rows, (uint64_t)n_splits * per_split);
  SL_ASSERT_EQ_INT(sink.n_open, parallelism);
  SL_ASSERT_EQ_INT(sink.n_closed_ok, parallelism);
  SL_ASSERT_EQ_INT(sink.n_closed_fail, 0);
  SL_ASSERT_EQ_INT(sink.n_misrouted, 0);
  SL_ASSERT_EQ_INT(atomic_load(&src.n_readers_closed), parallelism);
  for (uint64_t k = 0; k < n_keys; k++) {
    int64_t want = seen[k] ? expect[k] : INT64_MIN;
    if (sink.last[k] != want)
      SL_TEST_FAIL("workers %u, parallelism %u: key %llu is %lld, expected "
                   "%lld",
                   n_workers, parallelism, (unsigned long long)k,
                   (long long)sink.last[k], (long long)want);
  }
  csink_free(&sink);
  free(expect);
  free(seen);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

SL_TEST(sched_parallelism_8_on_2_workers) { run_many_tasks(2, 8, 32768, 4); }
/* One worker runs all 16 tasks: a task that blocked its thread instead of
 * yielding would hang this job. */
SL_TEST(sched_parallelism_8_on_1_worker) { run_many_tasks(1, 8, 32768, 4); }
/* Tiny buffers and one credit per channel: constant backpressure, so every
 * credit wake-up must arrive. */
SL_TEST(sched_backpressure_small_buffers) { run_many_tasks(2, 8, 256, 1); }

/* ------------------------------------------------------------------ */
/* (b) Cancel from another thread. */

typedef struct canceler_s {
  sl_job_t *job;
  csink_t *sink;
  uint64_t after_rows;
} canceler_t;

static void *canceler_main(void *arg) {
  canceler_t *c = arg;
  csink_wait_rows(c->sink, c->after_rows);
  sl_job_cancel(c->job);
  return NULL;
}

static void expect_canceled(sl_job_t *job, csink_t *sink, uint64_t after) {
  canceler_t cn = {job, sink, after};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, canceler_main, &cn), 0);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  pthread_join(th, NULL);
  if (rc != SL_ECANCELED)
    SL_TEST_FAIL("sl_job_run: %s: %s", sl_errname(rc), sl_error_message(err));
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(err), SL_ECANCELED);
  sl_error_destroy(err);
}

SL_TEST(sched_cancel_unbounded_generator) {
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = 0; /* unbounded */
  g.keys = 100;
  g.columns = SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_gen_source_create(&g, &vt, &ctx, &schema, &err), err);

  csink_t sink;
  csink_init(&sink, 0);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 2;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "gen", vt, ctx, schema);
  s = sl_stream_rebalance(s);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  expect_canceled(job, &sink, 50000);
  sl_job_destroy(job);
  SL_ASSERT_TRUE(sink.n_rows >= 50000);
  /* Every writer was closed, none as a success. */
  SL_ASSERT_EQ_INT(sink.n_open, 2);
  SL_ASSERT_EQ_INT(sink.n_closed_ok, 0);
  SL_ASSERT_EQ_INT(sink.n_closed_fail, 2);
  csink_free(&sink);
  sl_schema_unref(schema);
}

/* Every task is idle (the source waits for a wake-up that never comes);
 * the cancel itself must wake them. */
SL_TEST(sched_cancel_idle_job) {
  tsrc_t src;
  tsrc_init(&src, 1, 100, 10);
  src.hold = true;
  csink_t sink;
  csink_init(&sink, 10);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, in);
  s = sl_stream_map(s, "kv", kv, kv_map, NULL);
  s = sl_stream_rebalance(s); /* a second task, idle on its input */
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  expect_canceled(job, &sink, 100);
  sl_job_destroy(job);
  SL_ASSERT_EQ_INT(sink.n_rows, 100);
  SL_ASSERT_EQ_INT(sink.n_closed_fail, 1);
  SL_ASSERT_EQ_INT(atomic_load(&src.n_readers_closed), 1);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

/* ------------------------------------------------------------------ */
/* (c) A user function fails on one record. */

typedef struct fail_cfg_s {
  int64_t bad_seq;
  bool use_ctx_fail;          /* sl_ctx_fail with a message, or a bare code */
  _Atomic int failed_subtask; /* where it failed, -1 before */
  _Atomic int parallelism;
} fail_cfg_t;

static int failing_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                       sl_row_builder_t *out) {
  fail_cfg_t *f = user;
  int64_t seq = sl_row_get_i64(in, 0);
  if (seq == f->bad_seq) {
    atomic_store(&f->failed_subtask, (int)sl_ctx_subtask(ctx));
    atomic_store(&f->parallelism, (int)sl_ctx_parallelism(ctx));
    if (f->use_ctx_fail)
      return sl_ctx_fail(ctx, SL_EUSER, "bad record %lld (amount %lld)",
                         (long long)seq, (long long)sl_row_get_i64(in, 2));
    return SL_EIO;
  }
  return kv_map(ctx, user, in, out);
}

static int failing_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  fail_cfg_t *f = user;
  if (sl_row_get_i64(row, 0) == f->bad_seq) {
    atomic_store(&f->failed_subtask, (int)sl_ctx_subtask(ctx));
    atomic_store(&f->parallelism, (int)sl_ctx_parallelism(ctx));
    return sl_ctx_fail(ctx, SL_EINVAL, "key %lld cannot be processed",
                       (long long)sl_row_get_i64(row, 1));
  }
  return SL_OK;
}

/* How the failing operator is placed: chained to the source, behind a
 * rebalance, or keyed. */
enum { PLACE_CHAINED, PLACE_REBALANCED, PLACE_KEYED };

static void run_failure(int place, bool use_ctx_fail, const char *uid,
                        int want_code) {
  tsrc_t src;
  tsrc_init(&src, 4, 5000, 97);
  fail_cfg_t f;
  f.bad_seq = 2 * SEQ_SPLIT + 3537;
  f.use_ctx_fail = use_ctx_fail;
  atomic_init(&f.failed_subtask, -1);
  atomic_init(&f.parallelism, 0);
  csink_t sink;
  csink_init(&sink, 97);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 4;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, in);
  if (place == PLACE_KEYED) {
    const char *key[] = {"key"};
    s = sl_stream_key_by_fields(s, key, 1);
    sl_process_fns_t fns = {.process = failing_process};
    s = sl_stream_process(s, uid, kv, &fns, &f);
  } else {
    if (place == PLACE_REBALANCED) s = sl_stream_rebalance(s);
    s = sl_stream_map(s, uid, kv, failing_map, &f);
    if (place == PLACE_REBALANCED) sl_stream_set_parallelism(s, 3);
  }
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  sl_job_destroy(job);
  if (rc != want_code)
    SL_TEST_FAIL("sl_job_run: %s, expected %s: %s", sl_errname(rc),
                 sl_errname(want_code), sl_error_message(err));
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(err), want_code);
  int sub = atomic_load(&f.failed_subtask);
  SL_ASSERT_TRUE(sub >= 0);
  if (place == PLACE_CHAINED) SL_ASSERT_EQ_INT(sub, 2); /* split 2 */
  char where[128];
  snprintf(where, sizeof(where), "operator '%s' (subtask %d of %d)", uid,
           sub + 1, atomic_load(&f.parallelism));
  printf("error: %s\n", sl_error_message(err));
  SL_ASSERT_CONTAINS(sl_error_message(err), where);
  /* The message leads with where it happened. */
  SL_ASSERT_TRUE(strncmp(sl_error_message(err), "operator '", 10) == 0);
  if (place == PLACE_KEYED) {
    char what[64];
    int64_t seq, key, amount;
    t_record(&src, 2, 3537, &seq, &key, &amount);
    snprintf(what, sizeof(what), "key %lld cannot be processed",
             (long long)key);
    SL_ASSERT_CONTAINS(sl_error_message(err), what);
  } else if (use_ctx_fail) {
    SL_ASSERT_CONTAINS(sl_error_message(err), "bad record 2003537 (amount ");
  } else {
    SL_ASSERT_CONTAINS(sl_error_message(err), "map function");
    SL_ASSERT_CONTAINS(sl_error_message(err), "SL_EIO");
  }
  sl_error_destroy(err);
  /* The job stopped, and every writer that opened was closed.  Chained
   * behind the failed operator, a writer closes as a failure; writers of
   * other subtasks whose input had already ended may close as a success.
   * Behind a rebalance, no sink can have seen the end of its input. */
  SL_ASSERT_EQ_INT(sink.n_closed_ok + sink.n_closed_fail, sink.n_open);
  if (place == PLACE_REBALANCED) SL_ASSERT_EQ_INT(sink.n_closed_ok, 0);
  else SL_ASSERT_TRUE(sink.n_closed_fail >= 1);
  SL_ASSERT_TRUE(sink.n_rows < 4 * 5000);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

SL_TEST(sched_failure_names_operator_chained) {
  /* Chained to the source: split 2 runs on subtask 3 of 4. */
  run_failure(PLACE_CHAINED, true, "parse", SL_EUSER);
}
SL_TEST(sched_failure_names_operator_rebalanced) {
  run_failure(PLACE_REBALANCED, true, "parse", SL_EUSER);
}
SL_TEST(sched_failure_bare_code) {
  run_failure(PLACE_REBALANCED, false, "check", SL_EIO);
}
SL_TEST(sched_failure_keyed_process) {
  run_failure(PLACE_KEYED, true, "acc", SL_EINVAL);
}

/* ------------------------------------------------------------------ */
/* (d) A processing-time timer fires while its task has no input. */

typedef struct timer_cfg_s {
  tsrc_t *src;
  int64_t timer_key;
  _Atomic int64_t registered_at;
  _Atomic int64_t fired_at;    /* the timestamp passed to on_timer */
  _Atomic uint32_t n_fired;
  _Atomic bool key_matches;
} timer_cfg_t;

static int timer_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  timer_cfg_t *tc = user;
  int64_t key = sl_row_get_i64(row, 1);
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, key);
  sl_row_builder_set_i64(b, 1, sl_row_get_i64(row, 0));
  int rc = sl_ctx_emit_builder(ctx);
  if (rc != SL_OK) return rc;
  if (key == tc->timer_key) {
    /* Due now: it fires the next time the task runs, which only the
     * timer itself can cause, since no more input comes until it has
     * fired. */
    int64_t at = sl_ctx_now(ctx);
    atomic_store(&tc->registered_at, at);
    rc = sl_ctx_timer_register(ctx, at);
    if (rc != SL_OK) return rc;
    /* The same (key, time) again is one timer. */
    rc = sl_ctx_timer_register(ctx, at);
  }
  return rc;
}

static int timer_on_timer(sl_ctx_t *ctx, void *user, int64_t ts) {
  timer_cfg_t *tc = user;
  /* The timer's key is current. */
  sl_bytes_t k;
  sl_bytes_init(&k);
  if (sl_key_add_i64(&k, tc->timer_key) != SL_OK) return SL_ENOMEM;
  sl_slice_t cur = sl_ctx_current_key(ctx);
  atomic_store(&tc->key_matches,
               cur.len == k.len && memcmp(cur.ptr, k.data, k.len) == 0);
  sl_bytes_close(&k);
  atomic_store(&tc->fired_at, ts);
  atomic_fetch_add(&tc->n_fired, 1);
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, tc->timer_key);
  sl_row_builder_set_i64(b, 1, -1);
  int rc = sl_ctx_emit_builder(ctx);
  /* Let the source end. */
  atomic_store_explicit(&tc->src->released, true, memory_order_release);
  sl_source_waker_t *w =
      atomic_load_explicit(&tc->src->waker, memory_order_acquire);
  sl_source_waker_wake(w);
  return rc;
}

SL_TEST(sched_processing_time_timer_fires) {
  tsrc_t src;
  /* Keys of the first records of split 0 decide which key gets a timer. */
  tsrc_init(&src, 1, 5, 1000);
  src.hold = true;
  timer_cfg_t tc;
  memset(&tc, 0, sizeof(tc));
  tc.src = &src;
  int64_t seq, key, amount;
  t_record(&src, 0, 2, &seq, &key, &amount); /* the third record's key */
  tc.timer_key = key;
  atomic_init(&tc.registered_at, 0);
  atomic_init(&tc.fired_at, 0);
  atomic_init(&tc.n_fired, 0);
  atomic_init(&tc.key_matches, false);
  csink_t sink;
  csink_init(&sink, 0);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, in);
  const char *keyf[] = {"key"};
  s = sl_stream_key_by_fields(s, keyf, 1);
  sl_process_fns_t fns = {.process = timer_process,
                          .on_timer = timer_on_timer};
  s = sl_stream_process(s, "timed", kv, &fns, &tc);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);

  SL_ASSERT_EQ_INT(atomic_load(&tc.n_fired), 1);
  SL_ASSERT_EQ_INT(atomic_load(&tc.fired_at), atomic_load(&tc.registered_at));
  SL_ASSERT_TRUE(atomic_load(&tc.key_matches));
  /* Five echoed rows, then the timer's row, which came after all input. */
  SL_ASSERT_EQ_INT(sink.n_rows, 6);
  for (int i = 0; i < 5; i++) {
    t_record(&src, 0, (uint64_t)i, &seq, &key, &amount);
    SL_ASSERT_EQ_INT(sink.log[i][0], key);
    SL_ASSERT_EQ_INT(sink.log[i][1], seq);
  }
  SL_ASSERT_EQ_INT(sink.log[5][0], tc.timer_key);
  SL_ASSERT_EQ_INT(sink.log[5][1], -1);
  SL_ASSERT_EQ_INT(sink.n_closed_ok, 1);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

/* A timer outside a keyed operator is refused. */
static int unkeyed_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)row;
  _Atomic int *rc_out = user;
  atomic_store(rc_out, sl_ctx_timer_register(ctx, 0));
  return SL_OK;
}

static int identity_flat_map(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                             sl_collector_t *out) {
  (void)ctx;
  (void)user;
  (void)in;
  (void)out;
  return SL_OK;
}

SL_TEST(sched_timer_needs_keyed_operator) {
  tsrc_t src;
  tsrc_init(&src, 1, 3, 10);
  csink_t sink;
  csink_init(&sink, 0);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, in);
  _Atomic int rc_seen;
  atomic_init(&rc_seen, 12345);
  sl_process_fns_t fns = {.process = unkeyed_process};
  s = sl_stream_process(s, "unkeyed", in, &fns, &rc_seen);
  s = sl_stream_flat_map(s, "drop", kv, identity_flat_map, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);
  SL_ASSERT_EQ_INT(atomic_load(&rc_seen), SL_ESTATE);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

/* ------------------------------------------------------------------ */
/* (e) Start, wait, and running only once. */

static sl_job_t *small_job(tsrc_t *src, csink_t *sink, sl_schema_t *in,
                           sl_schema_t *kv) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 2;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, src, in);
  s = sl_stream_map(s, "kv", kv, kv_map, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, sink));
  return job;
}

SL_TEST(sched_start_wait_and_run_once) {
  tsrc_t src;
  tsrc_init(&src, 4, 2500, 10);
  csink_t sink;
  csink_init(&sink, 0);
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_job_t *job = small_job(&src, &sink, in, kv);
  sl_error_t *err = NULL;
  /* Waiting for a job that was not started is refused. */
  SL_ASSERT_EQ_INT(sl_job_wait(job, &err), SL_ESTATE);
  SL_ASSERT_TRUE(err != NULL);
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_OK_E(sl_job_start(job, &err), err);
  /* Starting twice is refused while it runs. */
  SL_ASSERT_EQ_INT(sl_job_start(job, NULL), SL_ESTATE);
  SL_ASSERT_OK_E(sl_job_wait(job, &err), err);
  SL_ASSERT_EQ_INT(sink.n_rows, 10000);
  SL_ASSERT_EQ_INT(sink.n_closed_ok, 2);
  /* A second run of the same job, by either call, fails with SL_ESTATE. */
  err = NULL;
  SL_ASSERT_EQ_INT(sl_job_run(job, &err), SL_ESTATE);
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_INT(sl_error_code(err), SL_ESTATE);
  SL_ASSERT_CONTAINS(sl_error_message(err), "only once");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(sl_job_start(job, &err), SL_ESTATE);
  SL_ASSERT_EQ_INT(sl_error_code(err), SL_ESTATE);
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT(sl_job_wait(job, NULL), SL_ESTATE);
  /* Nothing ran again. */
  SL_ASSERT_EQ_INT(sink.n_rows, 10000);
  SL_ASSERT_EQ_INT(sink.n_open, 2);
  sl_job_destroy(job);

  /* The same for sl_job_run first, then sl_job_start. */
  csink_free(&sink);
  csink_init(&sink, 0);
  tsrc_init(&src, 4, 2500, 10);
  job = small_job(&src, &sink, in, kv);
  SL_ASSERT_OK(sl_job_run(job, NULL));
  SL_ASSERT_EQ_INT(sink.n_rows, 10000);
  SL_ASSERT_EQ_INT(sl_job_run(job, NULL), SL_ESTATE);
  SL_ASSERT_EQ_INT(sl_job_start(job, NULL), SL_ESTATE);
  /* Builder calls after the run are refused too. */
  SL_ASSERT_TRUE(sl_job_source(job, "late", &tsrc_vt, &src, in) == NULL);
  sl_job_destroy(job);
  SL_ASSERT_EQ_INT(sink.n_rows, 10000);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

/* A job that fails returns its error through sl_job_wait too. */
SL_TEST(sched_wait_returns_failure) {
  tsrc_t src;
  tsrc_init(&src, 4, 5000, 97);
  fail_cfg_t f;
  f.bad_seq = 1 * SEQ_SPLIT + 10;
  f.use_ctx_fail = true;
  atomic_init(&f.failed_subtask, -1);
  atomic_init(&f.parallelism, 0);
  csink_t sink;
  csink_init(&sink, 0);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 4;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, in);
  s = sl_stream_map(s, "parse", kv, failing_map, &f);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  SL_ASSERT_OK(sl_job_start(job, NULL));
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_job_wait(job, &err), SL_EUSER);
  SL_ASSERT_CONTAINS(sl_error_message(err),
                     "operator 'parse' (subtask 2 of 4)");
  SL_ASSERT_CONTAINS(sl_error_message(err), "bad record 1000010");
  sl_error_destroy(err);
  sl_job_destroy(job);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}

/* Destroying a started job that never ends cancels and joins it. */
SL_TEST(sched_destroy_running_job) {
  tsrc_t src;
  tsrc_init(&src, 2, UINT64_MAX, 10);
  csink_t sink;
  csink_init(&sink, 0);
  sl_schema_t *in = schema_src(), *kv = schema_kv();
  sl_job_t *job = small_job(&src, &sink, in, kv);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  csink_wait_rows(&sink, 20000);
  sl_job_destroy(job);
  SL_ASSERT_TRUE(sink.n_rows >= 20000);
  SL_ASSERT_EQ_INT(sink.n_closed_fail, 2);
  SL_ASSERT_EQ_INT(atomic_load(&src.n_readers_closed), 2);
  csink_free(&sink);
  sl_schema_unref(in);
  sl_schema_unref(kv);
}
