/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sequence job shared by the exactly-once tests: a gated source whose
 * splits produce (key, seq) with per-key sequence numbers 0, 1, 2, ...; a
 * keyed checker that keeps (count, sum of seq) per key and fails loudly
 * when seq != count (a duplicate or a lost record in the restored state);
 * an upsert sink that keeps the latest (count, sum) per key.  Backpressure
 * tests hold the checker with tokens (one per record it may apply) and
 * watch for the moment each source finds its output full.
 */
#ifndef SL_TEST_SEQ_JOB_H
#define SL_TEST_SEQ_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "core/inject.h"
#include "sl_test.h"

enum { N_SPLITS = 4, KEYS_PER_SPLIT = 50, PER_SPLIT = 6000, N_KEYS = N_SPLITS * KEYS_PER_SPLIT };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t gate = 0;                 /* records each split may emit */
/* Per source (its context pointer: NULL or SEQ_SOURCE_2) and split. */
static sl_source_waker_t *wakers[2][N_SPLITS];
#define SEQ_SOURCE_2 ((void *)1)
static int64_t out_count[N_KEYS], out_sum[N_KEYS]; /* the sink's view */
static int violations;                   /* seq != count seen in state */
/* Records the checker may still apply; it waits for more at 0.  < 0: no
 * limit (the default). */
static _Atomic int64_t chk_tokens = -1;
static _Atomic int64_t n_emitted;        /* records the sources emitted */
static _Atomic int n_src_full;           /* readers that found output full */
static int64_t n_processed;              /* records the checker applied */
static int64_t fail_at = -1;             /* fail once at this record */
static char violation_msg[256];

/* ---- source ------------------------------------------------------------ */
/* Rows (key, seq, ts): record i of split s has key s * KEYS_PER_SPLIT +
 * i % KEYS_PER_SPLIT, seq i / KEYS_PER_SPLIT and event time i ms. */

typedef struct reader_s {
  int src; /* 0, or 1 for SEQ_SOURCE_2 */
  uint32_t n;
  uint32_t split[N_SPLITS];
  int64_t next[N_SPLITS];
  uint32_t cur;
  bool saw_full; /* sl_source_emit said stop: output is backpressured */
} reader_t;

static int src_plan(void *c, uint32_t p, sl_split_list_t *l,
                    sl_error_t **e) {
  (void)c;
  (void)p;
  (void)e;
  for (int i = 0; i < N_SPLITS; i++)
    if (sl_split_list_addf(l, "seq-%d", i) != SL_OK) return SL_ENOMEM;
  return SL_OK;
}

static int src_open(void *c, const sl_reader_init_t *init, void **out,
                    sl_error_t **e) {
  (void)e;
  reader_t *r = calloc(1, sizeof(*r));
  r->src = c == SEQ_SOURCE_2;
  for (uint32_t i = 0; i < init->n_splits; i++) {
    r->split[r->n] = init->splits[i].split;
    if (init->splits[i].position) memcpy(&r->next[r->n], init->splits[i].position, 8);
    pthread_mutex_lock(&lock);
    wakers[r->src][init->splits[i].split] = init->waker;
    pthread_mutex_unlock(&lock);
    r->n++;
  }
  *out = r;
  return SL_OK;
}

static int src_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  reader_t *r = rd;
  pthread_mutex_lock(&lock);
  int64_t g = gate;
  pthread_mutex_unlock(&lock);
  uint32_t n_done = 0;
  for (uint32_t k = 0; k < r->n; k++) {
    uint32_t j = (r->cur + k) % r->n;
    if (r->next[j] >= PER_SPLIT) {
      n_done++;
      continue;
    }
    if (r->next[j] >= g) continue;
    r->cur = j + 1;
    for (int b = 0; b < 64 && r->next[j] < g; b++) {
      int64_t i = r->next[j]++;
      sl_row_builder_t *bl = sl_source_builder(out);
      sl_row_builder_set_i64(bl, 0, r->split[j] * KEYS_PER_SPLIT + i % KEYS_PER_SPLIT);
      sl_row_builder_set_i64(bl, 1, i / KEYS_PER_SPLIT);
      sl_row_builder_set_i64(bl, 2, i * 1000); /* event time, us */
      bool is_more = sl_source_emit_builder(out, NULL);
      atomic_fetch_add_explicit(&n_emitted, 1, memory_order_relaxed);
      if (!is_more) {
        /* The emit budget of a run (16384 records) exceeds what a reader
         * emits in all (N_SPLITS * PER_SPLIT / 2), so a stop means a
         * full output: a buffer waits for credit. */
        if (!r->saw_full) atomic_fetch_add(&n_src_full, 1);
        r->saw_full = true;
        return SL_POLL_MORE;
      }
    }
    return SL_POLL_MORE;
  }
  return n_done == r->n ? SL_POLL_END : SL_POLL_WAIT;
}

static int src_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  reader_t *r = rd;
  for (uint32_t j = 0; j < r->n; j++)
    if (r->split[j] == split) return sl_bytes_append(out, &r->next[j], 8);
  return SL_ENOTFOUND;
}

static void src_close(void *rd) {
  reader_t *r = rd;
  pthread_mutex_lock(&lock);
  for (uint32_t j = 0; j < r->n; j++) wakers[r->src][r->split[j]] = NULL;
  pthread_mutex_unlock(&lock);
  free(rd);
}
static void src_destroy(void *c) { (void)c; }
static const sl_source_vt_t src_vt = {"seq", src_plan, src_open, src_poll,
                                      src_pos, src_close, src_destroy};

static inline void set_gate(int64_t g) {
  pthread_mutex_lock(&lock);
  gate = g;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < N_SPLITS; i++)
      if (wakers[k][i]) sl_source_waker_wake(wakers[k][i]);
  pthread_mutex_unlock(&lock);
}

/* ---- the checked keyed function ---------------------------------------- */

/* What the checker is called and declares (restore tests change them). */
static const char *checker_uid = "checker";
static const char *checker_state = "count_and_sum";
static sl_state_kind_t checker_kind = SL_STATE_VALUE;

static int chk_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_t *st;
  sl_state_desc_t d = {checker_state, checker_kind, 1, NULL, NULL};
  int rc = sl_ctx_state(ctx, &d, &st);
  sl_ctx_set_local(ctx, st);
  return rc;
}

static int chk_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *st = sl_ctx_local(ctx);
  /* Take a token, waiting for the test to hand one out. */
  for (int64_t tk = atomic_load(&chk_tokens);
       tk >= 0 && (tk == 0 || !atomic_compare_exchange_weak(&chk_tokens, &tk,
                                                            tk - 1));
       tk = atomic_load(&chk_tokens)) {
    if (tk == 0) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  pthread_mutex_lock(&lock);
  bool is_fail = n_processed++ == fail_at;
  if (is_fail) fail_at = -1;
  pthread_mutex_unlock(&lock);
  if (is_fail) return sl_ctx_fail(ctx, SL_EUSER, "injected failure");
  int64_t key = sl_row_get_i64(row, 0), seq = sl_row_get_i64(row, 1);
  int64_t acc[2] = {0, 0};
  sl_slice_t v;
  int rc = sl_value_get(st, &v);
  if (rc == SL_OK) memcpy(acc, v.ptr, 16);
  else if (rc != SL_ENOTFOUND) return rc;
  if (seq != acc[0]) {
    pthread_mutex_lock(&lock);
    if (violations++ == 0)
      snprintf(violation_msg, sizeof(violation_msg),
               "key %lld: record seq %lld but the state has count %lld",
               (long long)key, (long long)seq, (long long)acc[0]);
    pthread_mutex_unlock(&lock);
    return sl_ctx_fail(ctx, SL_EUSER, "exactly-once violated");
  }
  acc[0]++;
  acc[1] += seq;
  if ((rc = sl_value_put(st, acc, 16)) != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, key);
  sl_row_builder_set_i64(b, 1, acc[0]);
  sl_row_builder_set_i64(b, 2, acc[1]);
  return sl_ctx_emit_builder(ctx);
}

static int sink_open(void *c, const sl_sink_init_t *i, void **out,
                     sl_error_t **e) {
  (void)i;
  (void)e;
  *out = c;
  return SL_OK;
}
static int sink_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)e;
  int64_t k = sl_row_get_i64(row, 0);
  pthread_mutex_lock(&lock);
  out_count[k] = sl_row_get_i64(row, 1);
  out_sum[k] = sl_row_get_i64(row, 2);
  pthread_mutex_unlock(&lock);
  return SL_OK;
}
static int sink_close(void *w, bool ok, sl_error_t **e) {
  (void)w;
  (void)ok;
  (void)e;
  return SL_OK;
}
static void sink_destroy(void *c) { (void)c; }
static const sl_sink_vt_t sink_vt = {"upsert", sink_open, sink_write, NULL,
                                     sink_close, sink_destroy};


static inline void seq_reset(void) {
  pthread_mutex_lock(&lock);
  gate = 0;
  memset(out_count, 0, sizeof(out_count));
  memset(out_sum, 0, sizeof(out_sum));
  violations = 0;
  n_processed = 0;
  fail_at = -1;
  chk_tokens = -1;
  n_emitted = 0;
  n_src_full = 0;
  pthread_mutex_unlock(&lock);
}

/* Build the job: source (parallelism of cfg) -> key_by -> checker -> sink. */
static inline sl_job_t *seq_job(const sl_job_config_t *cfg, uint32_t checker_par) {
  sl_field_t f[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                     {"seq", {SL_TYPE_INT64, 0, 0, false}},
                     {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}}};
  sl_field_t of[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                      {"count", {SL_TYPE_INT64, 0, 0, false}},
                      {"sum", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema, *out_schema;
  SL_ASSERT_OK(sl_schema_create(f, 3, &schema, NULL));
  SL_ASSERT_OK(sl_schema_create(of, 3, &out_schema, NULL));
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "seq-source", &src_vt, NULL, schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {chk_open, chk_process, NULL, NULL, NULL, NULL};
  s = sl_stream_process(s, checker_uid, out_schema, &fns, NULL);
  if (checker_par) sl_stream_set_parallelism(s, checker_par);
  SL_ASSERT_OK(sl_stream_sink(s, "upsert", &sink_vt, NULL));
  /* The sink keeps the last row per key: it must get a key's rows in
   * order, so it runs forward-connected at the checker's parallelism. */
  if (checker_par) SL_ASSERT_OK(sl_stream_set_sink_parallelism(s, checker_par));
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  return job;
}

/* The independent computation: every key saw seq 0..n-1 exactly once. */
static inline void seq_check_results(const char *what) {
  if (violations) SL_TEST_FAIL("%s: %s", what, violation_msg);
  int64_t per_key = PER_SPLIT / KEYS_PER_SPLIT;
  for (int k = 0; k < N_KEYS; k++)
    if (out_count[k] != per_key || out_sum[k] != per_key * (per_key - 1) / 2)
      SL_TEST_FAIL("%s: key %d has count %lld sum %lld, expected %lld and "
                   "%lld", what, k, (long long)out_count[k],
                   (long long)out_sum[k], (long long)per_key,
                   (long long)(per_key * (per_key - 1) / 2));
}

static inline int64_t seq_processed(void) {
  pthread_mutex_lock(&lock);
  int64_t n = n_processed;
  pthread_mutex_unlock(&lock);
  return n;
}

#endif
