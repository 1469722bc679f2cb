/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the keyed hot path of the runtime: the key a hash exchange
 * carries in its frames (src/runtime/op.c, task.c) reaches the receiving
 * keyed operator as the same bytes and key group as a key extracted again
 * from the row, over key types int64, int32, string, float64, bool,
 * composite keys, null fields and a user key function; and the idle
 * worker's spin-then-park policy (sched_pool.c) never loses a wake-up: a
 * source and a sink on two workers hand one record back and forth many
 * times, each waiting for the other.  Nothing here sleeps: threads meet at
 * latches and the job's own wake-ups.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "runtime/runtime.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* A source of rows of every key type:
 *   0 seq int64, 1 i int64 nullable, 2 s string nullable, 3 f float64,
 *   4 b bool, 5 n int32
 * with nulls, -0.0, NaN, empty strings and long strings among them. */

typedef struct msrc_s {
  uint64_t n; /* records per split */
  uint32_t n_splits;
  /* Ping-pong: emit record i only once acked >= i. */
  bool is_pingpong;
  _Atomic uint64_t acked;
  _Atomic(sl_source_waker_t *) waker;
} msrc_t;

typedef struct mreader_s {
  msrc_t *src;
  uint64_t next;      /* in splits[cur] */
  uint32_t splits[8];
  uint32_t n_splits, cur;
} mreader_t;

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int msrc_plan(void *ctx, uint32_t p, sl_split_list_t *l,
                     sl_error_t **e) {
  (void)p;
  (void)e;
  for (uint32_t i = 0; i < ((msrc_t *)ctx)->n_splits; i++)
    if (sl_split_list_addf(l, "m%u", i) != SL_OK) return SL_ENOMEM;
  return SL_OK;
}

static int msrc_open(void *ctx, const sl_reader_init_t *init, void **out,
                     sl_error_t **e) {
  (void)e;
  msrc_t *s = ctx;
  mreader_t *r = calloc(1, sizeof(*r));
  r->src = s;
  for (uint32_t i = 0; i < init->n_splits && i < 8; i++)
    r->splits[r->n_splits++] = init->splits[i].split;
  atomic_store_explicit(&s->waker, init->waker, memory_order_release);
  *out = r;
  return SL_OK;
}

static void m_row(sl_row_builder_t *b, uint32_t split, uint64_t i) {
  uint64_t h = mix(i * 31 + split);
  char str[80];
  uint32_t slen = (uint32_t)(h >> 40) % 4 == 0 ? 0 : (uint32_t)(h % 70);
  for (uint32_t k = 0; k < slen; k++)
    str[k] = (char)('a' + (h >> (k % 64)) % 26);
  sl_row_builder_set_i64(b, 0, (int64_t)(split * 100000000ull + i));
  if (h % 7 == 0) sl_row_builder_set_null(b, 1);
  else sl_row_builder_set_i64(b, 1, (int64_t)(h % 1000) - 500);
  if (h % 11 == 0) sl_row_builder_set_null(b, 2);
  else sl_row_builder_set_str(b, 2, str, slen);
  double f = (double)((h >> 8) % 50) / 4.0;
  if (h % 13 == 0) f = -0.0;
  if (h % 17 == 0) f = 0.0 / 0.0;
  sl_row_builder_set_f64(b, 3, f);
  sl_row_builder_set_bool(b, 4, (h >> 3) & 1);
  sl_row_builder_set_i32(b, 5, (int32_t)((h >> 16) % 300) - 150);
}

static int msrc_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  mreader_t *r = rd;
  msrc_t *s = r->src;
  if (r->next >= s->n && r->cur < r->n_splits) {
    r->cur++;
    r->next = 0;
  }
  if (r->cur >= r->n_splits) return SL_POLL_END;
  uint32_t split = r->splits[r->cur];
  if (s->is_pingpong) {
    if (atomic_load_explicit(&s->acked, memory_order_acquire) < r->next)
      return SL_POLL_WAIT; /* until the sink acks and wakes the waker */
    sl_row_builder_t *b = sl_source_builder(out);
    m_row(b, split, r->next++);
    sl_source_emit_builder(out, NULL);
    return r->next >= s->n ? SL_POLL_MORE : SL_POLL_WAIT;
  }
  for (int k = 0; k < 64 && r->next < s->n; k++) {
    sl_row_builder_t *b = sl_source_builder(out);
    m_row(b, split, r->next++);
    if (!sl_source_emit_builder(out, NULL)) return SL_POLL_MORE;
  }
  return SL_POLL_MORE;
}

static int msrc_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}
static void msrc_close(void *rd) { free(rd); }
static void msrc_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t msrc_vt = {.type_name = "mixed",
                                       .plan = msrc_plan,
                                       .reader_open = msrc_open,
                                       .reader_poll = msrc_poll,
                                       .reader_position = msrc_pos,
                                       .reader_close = msrc_close,
                                       .destroy = msrc_destroy};

static sl_schema_t *mixed_schema(void) {
  sl_field_t f[6] = {{"seq", {SL_TYPE_INT64, 0, 0, false}},
                     {"i", {SL_TYPE_INT64, 0, 0, true}},
                     {"s", {SL_TYPE_STRING, 0, 0, true}},
                     {"f", {SL_TYPE_FLOAT64, 0, 0, false}},
                     {"b", {SL_TYPE_BOOL, 0, 0, false}},
                     {"n", {SL_TYPE_INT32, 0, 0, false}}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, 6, &s, NULL));
  return s;
}

/* ------------------------------------------------------------------ */
/* The differential check: a keyed process function that extracts the key
 * of each row again and compares it with the operator's current key. */

typedef struct kcheck_s {
  const uint32_t *fields; /* key fields, or NULL: the user key function */
  uint32_t n_fields;
  uint32_t max_parallelism;
  _Atomic uint64_t n_rows;
  _Atomic uint64_t n_bytes_differ;
  _Atomic uint64_t n_foreign_group; /* key group not owned by the subtask */
} kcheck_t;

/* A user key function: string field then int32 field, written in another
 * order than the row's. */
static int user_key(void *user, const sl_row_t *row, sl_bytes_t *key) {
  (void)user;
  int rc = sl_key_add_field(key, row, 2);
  return rc == SL_OK ? sl_key_add_field(key, row, 5) : rc;
}

static int kcheck_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  kcheck_t *k = user;
  sl_bytes_t want;
  sl_bytes_init(&want);
  int rc = SL_OK;
  if (k->fields == NULL) rc = user_key(NULL, row, &want);
  for (uint32_t i = 0; k->fields && i < k->n_fields && rc == SL_OK; i++)
    rc = sl_key_add_field(&want, row, k->fields[i]);
  if (rc != SL_OK) {
    sl_bytes_close(&want);
    return rc;
  }
  sl_slice_t cur = sl_ctx_current_key(ctx);
  if (cur.len != want.len || (want.len && memcmp(cur.ptr, want.data, want.len)))
    atomic_fetch_add(&k->n_bytes_differ, 1);
  uint32_t kg = sl_key_group(cur.ptr, cur.len, k->max_parallelism);
  if (sl_key_group_owner(kg, k->max_parallelism, sl_ctx_parallelism(ctx)) !=
      sl_ctx_subtask(ctx))
    atomic_fetch_add(&k->n_foreign_group, 1);
  atomic_fetch_add(&k->n_rows, 1);
  sl_bytes_close(&want);
  return SL_OK;
}

static void run_kcheck(const uint32_t *fields, uint32_t n_fields,
                       uint32_t parallelism) {
  const char *names[6] = {"seq", "i", "s", "f", "b", "n"};
  msrc_t src = {.n = 3000, .n_splits = 2};
  kcheck_t k = {.fields = fields, .n_fields = n_fields, .max_parallelism = 128};
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = parallelism;
  cfg.n_workers = 2;
  cfg.buffer_size = 512; /* many buffers: frames cross buffer ends */
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *sch = mixed_schema();
  sl_stream_t *s = sl_job_source(job, "src", &msrc_vt, &src, sch);
  if (fields) {
    const char *kn[6];
    for (uint32_t i = 0; i < n_fields; i++) kn[i] = names[fields[i]];
    s = sl_stream_key_by_fields(s, kn, n_fields);
  } else {
    s = sl_stream_key_by(s, user_key, NULL);
  }
  sl_process_fns_t fns = {.process = kcheck_process};
  s = sl_stream_process(s, "check", sch, &fns, &k);
  const sl_sink_vt_t *nvt;
  void *nctx;
  sl_null_sink_create(&nvt, &nctx);
  SL_ASSERT_OK(sl_stream_sink(s, "out", nvt, nctx));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);
  sl_schema_unref(sch);
  SL_ASSERT_EQ_INT(atomic_load(&k.n_rows), src.n * src.n_splits);
  SL_ASSERT_EQ_INT(atomic_load(&k.n_bytes_differ), 0);
  SL_ASSERT_EQ_INT(atomic_load(&k.n_foreign_group), 0);
}

static const uint32_t K_I64[] = {1}, K_STR[] = {2}, K_F64[] = {3},
                      K_BOOL_I32[] = {4, 5}, K_ALL[] = {1, 2, 3, 4, 5},
                      K_SEQ[] = {0};

SL_TEST(keypath_carried_key_int64_nullable) { run_kcheck(K_I64, 1, 3); }
SL_TEST(keypath_carried_key_int64_unique) { run_kcheck(K_SEQ, 1, 4); }
SL_TEST(keypath_carried_key_string_nullable) { run_kcheck(K_STR, 1, 3); }
SL_TEST(keypath_carried_key_float64) { run_kcheck(K_F64, 1, 2); }
SL_TEST(keypath_carried_key_composite_fixed) { run_kcheck(K_BOOL_I32, 2, 3); }
SL_TEST(keypath_carried_key_composite_mixed) { run_kcheck(K_ALL, 5, 3); }
SL_TEST(keypath_carried_key_user_function) { run_kcheck(NULL, 0, 3); }
SL_TEST(keypath_carried_key_parallelism_1) { run_kcheck(K_ALL, 5, 1); }

/* ------------------------------------------------------------------ */
/* No lost wake-up: one record in flight at a time.  The source task emits
 * record i once record i-1 was acknowledged; the sink task hands each
 * record to an acker thread outside the pool through a latch, and the
 * acker acknowledges it and wakes the source.  Between records both tasks
 * wait, so the workers go idle, spin or park on every round trip, and the
 * wake-up comes from a thread that is not a worker; the acker is now and
 * then slow (busy, not sleeping), so the gaps vary.  A lost wake-up stops
 * the job; the watchdog then fails the test. */

typedef struct ack_sink_s {
  msrc_t *src;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t seen; /* records the sink received; protected by lock */
} ack_sink_t;

static int ack_open(void *ctx, const sl_sink_init_t *init, void **out,
                    sl_error_t **e) {
  (void)init;
  (void)e;
  *out = ctx;
  return SL_OK;
}

static int ack_write(void *wr, const sl_row_t *row, sl_error_t **e) {
  (void)e;
  ack_sink_t *k = wr;
  pthread_mutex_lock(&k->lock);
  k->seen = (uint64_t)sl_row_get_i64(row, 0) + 1;
  pthread_cond_broadcast(&k->cond);
  pthread_mutex_unlock(&k->lock);
  return SL_OK;
}

static void *acker_main(void *arg) {
  ack_sink_t *k = arg;
  msrc_t *s = k->src;
  for (uint64_t i = 0; i < s->n; i++) {
    pthread_mutex_lock(&k->lock);
    while (k->seen <= i) pthread_cond_wait(&k->cond, &k->lock);
    pthread_mutex_unlock(&k->lock);
    if (i % 64 == 63) {
      volatile uint64_t x = 0;
      for (uint64_t j = 0; j < 100000; j++) x += j;
    }
    atomic_store_explicit(&s->acked, i + 1, memory_order_release);
    sl_source_waker_wake(atomic_load_explicit(&s->waker, memory_order_acquire));
  }
  return NULL;
}

static int ack_close(void *wr, bool ok, sl_error_t **e) {
  (void)wr;
  (void)ok;
  (void)e;
  return SL_OK;
}
static void ack_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t ack_vt = {.type_name = "ack",
                                    .writer_open = ack_open,
                                    .write = ack_write,
                                    .writer_close = ack_close,
                                    .destroy = ack_destroy};

typedef struct runner_s {
  sl_job_t *job;
  int rc;
  bool is_done;
  pthread_mutex_t lock;
  pthread_cond_t cond;
} runner_t;

static void *runner_main(void *arg) {
  runner_t *r = arg;
  sl_error_t *err = NULL;
  int rc = sl_job_run(r->job, &err);
  sl_error_destroy(err);
  pthread_mutex_lock(&r->lock);
  r->rc = rc;
  r->is_done = true;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

SL_TEST(keypath_pingpong_never_loses_a_wakeup) {
  msrc_t src = {.n = 20000, .n_splits = 1, .is_pingpong = true};
  ack_sink_t sink = {.src = &src};
  pthread_mutex_init(&sink.lock, NULL);
  pthread_cond_init(&sink.cond, NULL);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *sch = mixed_schema();
  sl_stream_t *s = sl_job_source(job, "src", &msrc_vt, &src, sch);
  const char *kn[1] = {"seq"};
  s = sl_stream_key_by_fields(s, kn, 1); /* a second task */
  SL_ASSERT_OK(sl_stream_sink(s, "ack", &ack_vt, &sink));
  runner_t r = {.job = job};
  pthread_mutex_init(&r.lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r.cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_t th, ack;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, runner_main, &r), 0);
  /* The waker is set when the reader opens, before the first record. */
  SL_ASSERT_EQ_INT(pthread_create(&ack, NULL, acker_main, &sink), 0);
  /* A watchdog deadline, not a window: the job ends on its own unless a
   * wake-up is lost. */
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += 100; /* below ctest's timeout */
  pthread_mutex_lock(&r.lock);
  int e = 0;
  while (!r.is_done && e == 0)
    e = pthread_cond_timedwait(&r.cond, &r.lock, &dl);
  bool is_done = r.is_done;
  pthread_mutex_unlock(&r.lock);
  if (!is_done)
    SL_TEST_FAIL("the job stopped at %llu of %llu round trips: a lost "
                 "wake-up",
                 (unsigned long long)atomic_load(&src.acked),
                 (unsigned long long)src.n);
  pthread_join(th, NULL);
  SL_ASSERT_EQ_INT(r.rc, SL_OK);
  pthread_join(ack, NULL);
  SL_ASSERT_EQ_INT(atomic_load(&src.acked), src.n);
  sl_job_destroy(job);
  sl_schema_unref(sch);
  pthread_cond_destroy(&r.cond);
  pthread_mutex_destroy(&r.lock);
  pthread_cond_destroy(&sink.cond);
  pthread_mutex_destroy(&sink.lock);
}

/* ------------------------------------------------------------------ */
/* The spin budget itself. */

SL_TEST(keypath_spin_budget_follows_gaps_and_backs_off) {
  sl_spin_policy_t sp;
  sl__spin_policy_init(&sp);
  SL_ASSERT_EQ_INT(sp.budget_ns, 0); /* no spinning before a short gap */
  sl__spin_policy_gap(&sp, 3000);
  SL_ASSERT_EQ_INT(sp.budget_ns, 6000);
  sl__spin_policy_gap(&sp, 100);
  SL_ASSERT_EQ_INT(sp.budget_ns, SL_SPIN_MIN_NS);
  sl__spin_policy_gap(&sp, SL_SPIN_MAX_NS / 2);
  SL_ASSERT_EQ_INT(sp.budget_ns, SL_SPIN_MAX_NS); /* the cap */
  /* Spins that find nothing halve it, down to zero. */
  int n = 0;
  while (sp.budget_ns > 0 && n < 64) {
    int64_t was = sp.budget_ns;
    sl__spin_policy_spun(&sp, false);
    SL_ASSERT_TRUE(sp.budget_ns == was / 2 || sp.budget_ns == 0);
    n++;
  }
  SL_ASSERT_EQ_INT(sp.budget_ns, 0);
  SL_ASSERT_LE_INT(n, 7);
  /* Long gaps decay it as well; a spin that found work keeps it. */
  sl__spin_policy_gap(&sp, 8000);
  sl__spin_policy_spun(&sp, true);
  SL_ASSERT_EQ_INT(sp.budget_ns, 16000);
  sl__spin_policy_gap(&sp, SL_SPIN_MAX_NS);
  SL_ASSERT_EQ_INT(sp.budget_ns, 8000);
  sl__spin_policy_gap(&sp, 10 * SL_SPIN_MAX_NS);
  sl__spin_policy_gap(&sp, 10 * SL_SPIN_MAX_NS);
  sl__spin_policy_gap(&sp, 10 * SL_SPIN_MAX_NS);
  sl__spin_policy_gap(&sp, 10 * SL_SPIN_MAX_NS);
  SL_ASSERT_EQ_INT(sp.budget_ns, 0);
  sl__spin_policy_gap(&sp, -5); /* clock steps cannot make it negative */
  SL_ASSERT_EQ_INT(sp.budget_ns, SL_SPIN_MIN_NS);
}
