/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End-to-end keyed jobs through the public C API.  The keyed sum reads a
 * source defined here (its own random function, not the engine's
 * generator), so the expected sums are computed independently of every
 * engine component, and the job must match them at parallelism 1, 2, 4 and
 * 8.  Further tests cover chaining, union, connect, broadcast, rebalance,
 * flat_map, timers and failure reporting.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* A test source: n_splits splits of n_per_split records (key, amount). */

typedef struct tsrc_s {
  uint32_t n_splits;
  uint64_t n_per_split;
  uint64_t n_keys;
  sl_schema_t *schema;
} tsrc_t;

typedef struct treader_s {
  const tsrc_t *src;
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
                     int64_t *key, int64_t *amount) {
  uint64_t h = t_mix(((uint64_t)split << 48) ^ i);
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
  treader_t *r = calloc(1, sizeof(*r));
  r->src = ctx;
  for (uint32_t i = 0; i < init->n_splits; i++) {
    r->split[r->n] = init->splits[i].split;
    r->next[r->n] = 0;
    r->n++;
  }
  *out = r;
  return SL_OK;
}

static int tsrc_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  treader_t *r = rd;
  for (uint32_t k = 0; k < r->n; k++) {
    uint32_t j = (r->cur + k) % r->n;
    if (r->next[j] >= r->src->n_per_split) continue;
    r->cur = j + 1;
    for (int b = 0; b < 100 && r->next[j] < r->src->n_per_split; b++) {
      int64_t key, amount;
      t_record(r->src, r->split[j], r->next[j]++, &key, &amount);
      sl_row_builder_t *bld = sl_source_builder(out);
      sl_row_builder_set_i64(bld, 0, key);
      sl_row_builder_set_i64(bld, 1, amount);
      if (!sl_source_emit_builder(out, NULL)) return SL_POLL_MORE;
    }
    return SL_POLL_MORE;
  }
  return SL_POLL_END;
}

static int tsrc_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}

static void tsrc_close(void *rd) { free(rd); }
static void tsrc_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t tsrc_vt = {"test", tsrc_plan, tsrc_open,
                                       tsrc_poll, tsrc_pos, tsrc_close,
                                       tsrc_destroy};

static sl_schema_t *schema_key_amount(void) {
  sl_field_t f[2] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                     {"amount", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, 2, &s, NULL));
  return s;
}

/* ------------------------------------------------------------------ */
/* A collecting sink: latest value per key and a row count. */

typedef struct csink_s {
  pthread_mutex_t lock;
  int64_t *last;    /* per key, INT64_MIN = never seen */
  uint64_t n_keys;
  uint64_t n_rows;
  uint32_t n_writers_open;
  uint32_t n_closed_ok;
} csink_t;

static int csink_open(void *ctx, const sl_sink_init_t *init, void **out,
                      sl_error_t **e) {
  (void)init;
  (void)e;
  csink_t *c = ctx;
  pthread_mutex_lock(&c->lock);
  c->n_writers_open++;
  pthread_mutex_unlock(&c->lock);
  *out = c;
  return SL_OK;
}

static int csink_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)e;
  csink_t *c = w;
  int64_t key = sl_row_get_i64(row, 0), v = sl_row_get_i64(row, 1);
  pthread_mutex_lock(&c->lock);
  if (key >= 0 && (uint64_t)key < c->n_keys) c->last[key] = v;
  c->n_rows++;
  pthread_mutex_unlock(&c->lock);
  return SL_OK;
}

static int csink_close(void *w, bool ok, sl_error_t **e) {
  (void)e;
  csink_t *c = w;
  pthread_mutex_lock(&c->lock);
  if (ok) c->n_closed_ok++;
  pthread_mutex_unlock(&c->lock);
  return SL_OK;
}

static void csink_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t csink_vt = {"collect", csink_open, csink_write, NULL,
                                      csink_close, csink_destroy};

static void csink_init(csink_t *c, uint64_t n_keys) {
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->lock, NULL);
  c->n_keys = n_keys;
  c->last = malloc(n_keys * sizeof(int64_t));
  for (uint64_t k = 0; k < n_keys; k++) c->last[k] = INT64_MIN;
}

static void csink_free(csink_t *c) {
  free(c->last);
  pthread_mutex_destroy(&c->lock);
}

/* ------------------------------------------------------------------ */
/* Keyed sum as a process function with value state. */

typedef struct sum_local_s {
  sl_state_t *sum;
} sum_local_t;

static int sum_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sum_local_t *l = calloc(1, sizeof(*l));
  sl_state_desc_t d = {"sum", SL_STATE_VALUE, 1, NULL, NULL};
  int rc = sl_ctx_state(ctx, &d, &l->sum);
  sl_ctx_set_local(ctx, l);
  return rc;
}

static int sum_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sum_local_t *l = sl_ctx_local(ctx);
  int64_t cur = 0;
  int rc = sl_value_get_i64(l->sum, &cur);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  cur += sl_row_get_i64(row, 1);
  if ((rc = sl_value_put_i64(l->sum, cur)) != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, sl_row_get_i64(row, 0));
  sl_row_builder_set_i64(b, 1, cur);
  return sl_ctx_emit_builder(ctx);
}

static void sum_close(sl_ctx_t *ctx, void *user) {
  (void)user;
  free(sl_ctx_local(ctx));
}

static void run_keyed_sum(uint32_t parallelism, uint32_t n_splits,
                          uint64_t per_split, uint64_t n_keys) {
  tsrc_t src = {n_splits, per_split, n_keys, NULL};
  sl_schema_t *schema = schema_key_amount();
  /* The expected result, computed here without the engine. */
  int64_t *expect = calloc(n_keys, sizeof(int64_t));
  bool *seen = calloc(n_keys, sizeof(bool));
  for (uint32_t s = 0; s < n_splits; s++)
    for (uint64_t i = 0; i < per_split; i++) {
      int64_t k, a;
      t_record(&src, s, i, &k, &a);
      expect[k] += a;
      seen[k] = true;
    }
  csink_t sink;
  csink_init(&sink, n_keys);

  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = parallelism;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "src", &tsrc_vt, &src, schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {sum_open, sum_process, NULL, NULL, NULL, sum_close};
  s = sl_stream_process(s, "sum", schema, &fns, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "out", &csink_vt, &sink));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);

  SL_ASSERT_EQ_INT(sink.n_rows, (uint64_t)n_splits * per_split);
  SL_ASSERT_EQ_INT(sink.n_closed_ok, parallelism);
  for (uint64_t k = 0; k < n_keys; k++) {
    if (!seen[k]) {
      SL_ASSERT_EQ_INT(sink.last[k], INT64_MIN);
      continue;
    }
    if (sink.last[k] != expect[k])
      SL_TEST_FAIL("parallelism %u: key %llu sum %lld, expected %lld",
                   parallelism, (unsigned long long)k,
                   (long long)sink.last[k], (long long)expect[k]);
  }
  csink_free(&sink);
  free(expect);
  free(seen);
  sl_schema_unref(schema);
}

SL_TEST(keyed_sum_1m_parallelism_1) { run_keyed_sum(1, 8, 125000, 10007); }
SL_TEST(keyed_sum_1m_parallelism_2) { run_keyed_sum(2, 8, 125000, 10007); }
SL_TEST(keyed_sum_1m_parallelism_4) { run_keyed_sum(4, 8, 125000, 10007); }
SL_TEST(keyed_sum_1m_parallelism_8) { run_keyed_sum(8, 8, 125000, 10007); }

/* ------------------------------------------------------------------ */
/* Out of memory in a task: the job fails with SL_ENOMEM and says so.  A
 * replaced allocator (sl_set_allocator) fails chosen allocations. */

static struct {
  atomic_bool is_armed;
  size_t lo, hi;      /* fail sizes in [lo, hi]; hi 0: every size */
  pthread_t main_thread; /* never failed: the test's own thread */
  atomic_ulong n_failed;
} oom;

static bool oom_fails(size_t size) {
  if (!atomic_load(&oom.is_armed)) return false;
  if (pthread_equal(pthread_self(), oom.main_thread)) return false;
  if (oom.hi && (size < oom.lo || size > oom.hi)) return false;
  atomic_fetch_add(&oom.n_failed, 1);
  return true;
}
static void *oom_malloc(size_t n) { return oom_fails(n) ? NULL : malloc(n); }
static void *oom_calloc(size_t n, size_t size) {
  return oom_fails(n * size) ? NULL : calloc(n, size);
}
static void *oom_realloc(void *p, size_t n) {
  return oom_fails(n) ? NULL : realloc(p, n);
}

static void oom_install(size_t lo, size_t hi) {
  oom.lo = lo;
  oom.hi = hi;
  oom.main_thread = pthread_self();
  atomic_store(&oom.is_armed, false);
  atomic_store(&oom.n_failed, 0);
  sl_allocator_t a = {oom_malloc, oom_calloc, oom_realloc, free};
  sl_set_allocator(&a);
}

/* A sink that arms the allocator at its first row. */
static int arm_open(void *ctx, const sl_sink_init_t *init, void **out,
                    sl_error_t **e) {
  (void)init;
  (void)e;
  *out = ctx;
  return SL_OK;
}
static int arm_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)row;
  (void)e;
  atomic_store(&oom.is_armed, true);
  return SL_OK;
}
static int arm_close(void *w, bool ok, sl_error_t **e) {
  (void)w;
  (void)ok;
  (void)e;
  return SL_OK;
}
static void arm_destroy(void *ctx) { (void)ctx; }
static const sl_sink_vt_t arm_vt = {.type_name = "arm",
                                    .writer_open = arm_open,
                                    .write = arm_write,
                                    .writer_close = arm_close,
                                    .destroy = arm_destroy};

static sl_stream_t *gen_stream(sl_job_t *job, uint64_t count, uint64_t keys) {
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = count;
  g.keys = keys;
  g.splits = 1;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_gen_source_create(&g, &vt, &ctx, &schema, &err), err);
  sl_stream_t *s = sl_job_source(job, "src", vt, ctx, schema);
  sl_schema_unref(schema);
  SL_ASSERT_TRUE(s != NULL);
  return s;
}

/* The source cannot get an output buffer (the only allocations of that
 * size): the message names out of memory.  It used to say "failed with
 * SL_EFAILED (component has failed and refuses work)". */
SL_TEST(out_of_memory_for_a_source_buffer_names_the_cause) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.buffer_size = 40000;
  sl_job_t *job;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_create(&cfg, &job, &err), err);
  sl_stream_t *s = gen_stream(job, 10000, 10);
  const sl_sink_vt_t *vt;
  void *ctx;
  SL_ASSERT_OK(sl_null_sink_create(&vt, &ctx));
  SL_ASSERT_OK(sl_stream_sink(s, "sink", vt, ctx));
  SL_ASSERT_OK(sl_stream_set_sink_parallelism(s, 2)); /* a channel */
  oom_install(40000, 40000 + 512);
  atomic_store(&oom.is_armed, true);
  int rc = sl_job_run(job, &err);
  atomic_store(&oom.is_armed, false);
  /* The allocator is reset only once the job is gone: its enumerator
   * thread lives until sl_job_destroy (sl_set_allocator: before other
   * calls). */
  sl_job_destroy(job);
  sl_set_allocator(NULL);
  SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
  SL_ASSERT_TRUE(atomic_load(&oom.n_failed) > 0);
  SL_ASSERT_EQ_STR(sl_error_message(err), "operator 'src' (subtask 1 of 1): "
                   "failed with SL_ENOMEM (out of memory)");
  sl_error_destroy(err);
}

/* Every allocation of the worker threads fails from the first row on, so
 * no error object can be made for the failing task either: the job must
 * still fail with SL_ENOMEM.  It used to return SL_OK. */
SL_TEST(out_of_memory_without_memory_for_the_message_still_fails) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  sl_job_t *job;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_create(&cfg, &job, &err), err);
  sl_stream_t *s = gen_stream(job, 200000, 200000);
  const char *key[] = {"key"};
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}};
  s = sl_stream_aggregate(sl_stream_key_by_fields(s, key, 1), "agg", aggs, 1,
                          SL_AGG_EMIT_UPDATES);
  SL_ASSERT_TRUE(s != NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "sink", &arm_vt, NULL));
  oom_install(0, 0);
  int rc = sl_job_run(job, &err);
  atomic_store(&oom.is_armed, false);
  sl_job_destroy(job); /* before the allocator is reset, as above */
  sl_set_allocator(NULL);
  SL_ASSERT_TRUE(atomic_load(&oom.n_failed) > 0);
  SL_ASSERT_EQ_INT(rc, SL_ENOMEM);
  sl_error_destroy(err);
}

/* sl_job_wait_checkpoint with the largest timeout waits for the outcome;
 * INT64_MAX ms used to overflow in nanoseconds and return SL_EAGAIN at
 * once. */
SL_TEST(wait_checkpoint_with_the_largest_timeout_waits) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "wait";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = sl_test_dir();
  sl_job_t *job;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_create(&cfg, &job, &err), err);
  sl_stream_t *s = gen_stream(job, 0, 10); /* unbounded */
  const sl_sink_vt_t *vt;
  void *ctx;
  SL_ASSERT_OK(sl_null_sink_create(&vt, &ctx));
  SL_ASSERT_OK(sl_stream_sink(s, "sink", vt, ctx));
  SL_ASSERT_OK_E(sl_job_start(job, &err), err);
  uint64_t id = 0;
  int rc;
  /* SL_ESTATE until the job's tasks are running. */
  while ((rc = sl_job_trigger_checkpoint(job, &id, NULL)) == SL_ESTATE) {
  }
  SL_ASSERT_OK(rc);
  sl_checkpoint_stats_t st;
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, id, INT64_MAX, &st));
  SL_ASSERT_EQ_INT(st.id, id);
  SL_ASSERT_OK(st.result);
  sl_job_cancel(job);
  SL_ASSERT_EQ_INT(sl_job_wait(job, &err), SL_ECANCELED);
  sl_error_destroy(err);
  sl_job_destroy(job);
}
