/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two-input example of Carbone et al. (PVLDB 2017), record by record.
 * A keyed balance operator reads two inputs: A carries alice's
 * transactions, B bob's.  Checkpoint 41 holds alice=900, bob=300.  Then
 *
 *   A:  +50 alice | barrier 42 | +100 alice
 *   B:  -20 bob   | barrier 42 | +200 bob
 *
 * with A's barrier arriving first.  The order is forced with latches, not
 * sleeps: B's reader waits on a latch before -20 bob, and the balance task
 * pauses at the injection point task.on_first_barrier.  Checkpoint 42 must
 * hold alice=950, bob=280 (read back from its state file); the balance
 * function then fails once on +200 bob, the job restarts from checkpoint
 * 42, and the final result is alice=1050, bob=480.  In at-least-once mode
 * +100 alice enters the state before B's barrier, so checkpoint 42 holds
 * alice=1050, the replay applies +100 again, and alice ends at 1150: the
 * documented duplicate.
 */
#include <pthread.h>
#include <sys/stat.h>

#include "checkpoint/checkpoint.h"
#include "core/inject.h"
#include "sl_test.h"

static const struct {
  const char *account;
  int64_t amount;
} script[2][3] = {{{"alice", 900}, {"alice", 50}, {"alice", 100}},
                  {{"bob", 300}, {"bob", -20}, {"bob", 200}}};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int gate[2];                 /* records each input may emit */
static bool is_b_latched;           /* B waits before its record 1 */
static bool is_b_at_latch;          /* B's reader is waiting there */
static sl_source_waker_t *waker[2];
static int seen[2][3];              /* balance function saw record (input, i) */
static bool has_failed;             /* the one injected failure happened */
static int64_t final_balance[2];    /* alice, bob as the sink saw them */

/* ---- source: split i replays script[i] --------------------------------- */

typedef struct reader_s {
  uint32_t split;
  uint64_t next;
} reader_t;

static int src_plan(void *ctx, uint32_t p, sl_split_list_t *l,
                    sl_error_t **e) {
  (void)ctx;
  (void)p;
  (void)e;
  if (sl_split_list_add(l, "script-0") != SL_OK ||
      sl_split_list_add(l, "script-1") != SL_OK)
    return SL_ENOMEM;
  return SL_OK;
}

static int src_open(void *ctx, const sl_reader_init_t *init, void **out,
                    sl_error_t **e) {
  (void)ctx;
  (void)e;
  SL_ASSERT_EQ_INT(init->n_splits, 1);
  reader_t *r = calloc(1, sizeof(*r));
  r->split = init->splits[0].split;
  if (init->splits[0].position) {
    SL_ASSERT_EQ_INT(init->splits[0].position_len, 8);
    memcpy(&r->next, init->splits[0].position, 8);
  }
  pthread_mutex_lock(&lock);
  waker[r->split] = init->waker;
  pthread_mutex_unlock(&lock);
  *out = r;
  return SL_OK;
}

static int src_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  reader_t *r = rd;
  pthread_mutex_lock(&lock);
  /* In the second phase (gate 2), B waits here before -20 bob. */
  while (r->split == 1 && r->next == 1 && is_b_latched && gate[1] >= 2) {
    if (!is_b_at_latch) {
      is_b_at_latch = true;
      pthread_cond_broadcast(&cond);
    }
    pthread_cond_wait(&cond, &lock);
  }
  bool is_open = (int)r->next < gate[r->split];
  pthread_mutex_unlock(&lock);
  if (r->next >= 3) return SL_POLL_END;
  if (!is_open) return SL_POLL_WAIT; /* the test wakes us */
  sl_row_builder_t *b = sl_source_builder(out);
  const char *acct = script[r->split][r->next].account;
  sl_row_builder_set_str(b, 0, acct, (uint32_t)strlen(acct));
  sl_row_builder_set_i64(b, 1, script[r->split][r->next].amount);
  sl_row_builder_set_i32(b, 2, (int32_t)r->split);
  sl_row_builder_set_i32(b, 3, (int32_t)r->next);
  r->next++;
  sl_source_emit_builder(out, NULL);
  return SL_POLL_MORE; /* one record per poll: triggers go in between */
}

static int src_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  reader_t *r = rd;
  (void)split;
  return sl_bytes_append(out, &r->next, 8);
}

static void src_close(void *rd) {
  reader_t *r = rd;
  pthread_mutex_lock(&lock);
  waker[r->split] = NULL;
  pthread_mutex_unlock(&lock);
  free(rd);
}
static void src_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t src_vt = {"script", src_plan,  src_open, src_poll,
                                      src_pos,  src_close, src_destroy};

static void open_gate(int input, int n) {
  pthread_mutex_lock(&lock);
  gate[input] = n;
  sl_source_waker_t *w = waker[input];
  if (w) sl_source_waker_wake(w);
  pthread_mutex_unlock(&lock);
}

static void wait_seen(int input, int i) {
  pthread_mutex_lock(&lock);
  while (!seen[input][i]) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
}

/* ---- the balance operator --------------------------------------------- */

static int bal_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_t *st;
  sl_state_desc_t d = {"balance", SL_STATE_VALUE, 1, NULL, NULL};
  int rc = sl_ctx_state(ctx, &d, &st);
  sl_ctx_set_local(ctx, st);
  return rc;
}

static int bal_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *st = sl_ctx_local(ctx);
  int64_t amount = sl_row_get_i64(row, 1);
  int input = sl_row_get_i32(row, 2), idx = sl_row_get_i32(row, 3);
  pthread_mutex_lock(&lock);
  bool fail_now = amount == 200 && !has_failed;
  if (fail_now) has_failed = true;
  pthread_mutex_unlock(&lock);
  if (fail_now) return sl_ctx_fail(ctx, SL_EUSER, "injected failure on +200");
  int64_t bal = 0;
  int rc = sl_value_get_i64(st, &bal);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  bal += amount;
  if ((rc = sl_value_put_i64(st, bal)) != SL_OK) return rc;
  pthread_mutex_lock(&lock);
  seen[input][idx] = 1;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i32(b, 0, input);
  sl_row_builder_set_i64(b, 1, bal);
  return sl_ctx_emit_builder(ctx);
}

static int sink_open(void *ctx, const sl_sink_init_t *i, void **out,
                     sl_error_t **e) {
  (void)i;
  (void)e;
  *out = ctx;
  return SL_OK;
}
static int sink_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)e;
  pthread_mutex_lock(&lock);
  final_balance[sl_row_get_i32(row, 0)] = sl_row_get_i64(row, 1);
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
static const sl_sink_vt_t sink_vt = {"balances", sink_open, sink_write, NULL,
                                     sink_close, sink_destroy};

/* ---- reading a checkpoint back ---------------------------------------- */

typedef struct balances_s {
  int64_t alice, bob;
  int n;
} balances_t;

static int rd_entry(void *user, uint32_t state, uint32_t kg,
                    const uint8_t *key, uint32_t klen, uint32_t nslen,
                    const uint8_t *val, uint32_t vlen) {
  (void)state;
  (void)kg;
  (void)nslen;
  balances_t *b = user;
  SL_ASSERT_EQ_INT(vlen, 8);
  int64_t v;
  memcpy(&v, val, 8);
  /* Canonical string key: marker 1, big-endian u32 length, bytes. */
  if (klen == 10 && memcmp(key + 5, "alice", 5) == 0) b->alice = v;
  else if (klen == 8 && memcmp(key + 5, "bob", 3) == 0) b->bob = v;
  else SL_TEST_FAIL("unexpected key in checkpoint");
  b->n++;
  return SL_OK;
}

static balances_t read_checkpoint(const char *jobdir, uint64_t id) {
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/chk-%llu", jobdir, (unsigned long long)id);
  sl_ckpt_meta_t m;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__ckpt_read_meta(dir, &m, &err), err);
  SL_ASSERT_EQ_INT(m.id, id);
  const sl_ckpt_op_t *op = sl__ckpt_meta_op(&m, "balance");
  SL_ASSERT_TRUE(op != NULL);
  SL_ASSERT_EQ_INT(op->n_subtasks, 1);
  const sl_ckpt_subtask_t *s = &op->subtasks[0];
  char path[8400];
  snprintf(path, sizeof(path), "%s/%s", dir, s->state_file);
  balances_t b = {0, 0, 0};
  sl_ckpt_reader_t rd = {NULL, rd_entry, NULL, &b};
  SL_ASSERT_OK_E(sl__ckpt_read_state(path, s->state_size, s->state_checksum,
                                     0, m.max_parallelism - 1, &rd, &err),
                 err);
  /* The source positions of the same checkpoint. */
  const sl_ckpt_op_t *src = sl__ckpt_meta_op(&m, "accounts");
  SL_ASSERT_TRUE(src != NULL);
  sl__ckpt_meta_clear(&m);
  return b;
}

/* ---- the scenario ----------------------------------------------------- */

static void run_paper(sl_ckpt_mode_t mode, int64_t want_alice_42,
                      int64_t want_alice_final) {
  memset(gate, 0, sizeof(gate));
  memset(seen, 0, sizeof(seen));
  has_failed = false;
  is_b_latched = true;
  is_b_at_latch = false;
  sl_inject_reset();

  char jobdir[4200];
  snprintf(jobdir, sizeof(jobdir), "%s/paper", sl_test_dir());
  mkdir(jobdir, 0755);
  for (int i = 1; i <= 40; i++) { /* so that the first checkpoint is 41 */
    char d[4300];
    snprintf(d, sizeof(d), "%s/chk-%d", jobdir, i);
    mkdir(d, 0755);
  }

  sl_field_t f[4] = {{"account", {SL_TYPE_STRING, 0, 0, false}},
                     {"amount", {SL_TYPE_INT64, 0, 0, false}},
                     {"input", {SL_TYPE_INT32, 0, 0, false}},
                     {"index", {SL_TYPE_INT32, 0, 0, false}}};
  sl_field_t of[2] = {{"input", {SL_TYPE_INT32, 0, 0, false}},
                      {"balance", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema, *out_schema;
  SL_ASSERT_OK(sl_schema_create(f, 4, &schema, NULL));
  SL_ASSERT_OK(sl_schema_create(of, 2, &out_schema, NULL));

  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "paper";
  cfg.n_workers = 2;
  cfg.checkpoint.dir = sl_test_dir();
  cfg.checkpoint.mode = mode;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 1;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "accounts", &src_vt, NULL, schema);
  sl_stream_set_parallelism(s, 2);
  const char *key[] = {"account"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {bal_open, bal_process, NULL, NULL, NULL, NULL};
  s = sl_stream_process(s, "balance", out_schema, &fns, NULL);
  sl_stream_set_parallelism(s, 1);
  SL_ASSERT_OK(sl_stream_sink(s, "balances", &sink_vt, NULL));
  SL_ASSERT_OK(sl_job_start(job, NULL));

  /* Checkpoint 41: alice=900, bob=300. */
  open_gate(0, 1);
  open_gate(1, 1);
  wait_seen(0, 0);
  wait_seen(1, 0);
  uint64_t id;
  sl_error_t *err = NULL;
  /* The sources may not have opened yet when the job starts: retry the
   * trigger until the coordinator accepts it. */
  while (sl_job_trigger_checkpoint(job, &id, &err) != SL_OK) {
    sl_error_destroy(err);
    err = NULL;
  }
  SL_ASSERT_EQ_INT(id, 41);
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, 41, 60000, NULL));
  balances_t b41 = read_checkpoint(jobdir, 41);
  SL_ASSERT_EQ_INT(b41.n, 2);
  SL_ASSERT_EQ_INT(b41.alice, 900);
  SL_ASSERT_EQ_INT(b41.bob, 300);

  /* A: +50 alice, then barrier 42.  B is latched before -20 bob. */
  open_gate(0, 2);
  open_gate(1, 2);
  wait_seen(0, 1);
  /* B's reader must be inside its poll, before -20 bob: a trigger that
   * reached B earlier would put barrier 42 before -20 bob. */
  pthread_mutex_lock(&lock);
  while (!is_b_at_latch) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  SL_ASSERT_OK(sl_inject_arm("task.on_first_barrier", SL_INJECT_PAUSE, 1,
                             false));
  SL_ASSERT_OK(sl_job_trigger_checkpoint(job, &id, NULL));
  SL_ASSERT_EQ_INT(id, 42);
  /* A's barrier reached the balance task first (B is still latched). */
  SL_ASSERT_OK(sl_inject_wait_paused("task.on_first_barrier", 60000));
  open_gate(0, 3); /* +100 alice, after A's barrier */
  sl_inject_release("task.on_first_barrier");
  if (mode == SL_CKPT_AT_LEAST_ONCE) wait_seen(0, 2); /* not blocked */
  /* B: -20 bob, then barrier 42. */
  pthread_mutex_lock(&lock);
  is_b_latched = false;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, 42, 60000, NULL));
  balances_t b42 = read_checkpoint(jobdir, 42);
  SL_ASSERT_EQ_INT(b42.alice, want_alice_42);
  SL_ASSERT_EQ_INT(b42.bob, 280);

  /* +200 bob fails once; the job restarts from checkpoint 42. */
  open_gate(1, 3);
  SL_ASSERT_OK_E(sl_job_wait(job, &err), err);
  SL_ASSERT_TRUE(has_failed);
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  SL_ASSERT_EQ_INT(final_balance[0], want_alice_final);
  SL_ASSERT_EQ_INT(final_balance[1], 480);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  sl_inject_reset();
}

SL_TEST(paper_example_aligned) { run_paper(SL_CKPT_ALIGNED, 950, 1050); }

SL_TEST(paper_example_at_least_once_duplicates) {
  run_paper(SL_CKPT_AT_LEAST_ONCE, 1050, 1150);
}
