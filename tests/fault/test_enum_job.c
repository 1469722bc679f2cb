/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sources with an enumerator in a running job (sl_connector.h): a test
 * source whose splits "A".."D" each produce (key, seq) rows as in
 * seq_job.h, whose enumerator hands out its pending splits one per reader
 * request and says "no more" when it has none, and whose readers ask for
 * a split when the test tells them to.  The keyed checker of seq_job.h
 * fails loudly on a duplicate or a lost record in its restored state; the
 * upsert sink's final counts are compared with the independent
 * computation.
 *
 *  - abc: seed 004's case through a real task failure and restart;
 *  - rescale_2_to_3, rescale_4_to_1: a checkpoint with splits still in
 *    the enumerator and splits in readers, restored at another
 *    parallelism, gives the same totals;
 *  - enumerator_*_failure_*: an enumerator whose request handler
 *    (bounded) or scheduled discovery (unbounded) fails, while its reader
 *    waits for an assignment, fails the job with its message (no hang),
 *    and with a restart strategy the job restarts and completes.
 */
#include "seq_job.h"

enum { N_LETTERS = 4 };

typedef struct erun_s {
  pthread_mutex_t mu;
  int64_t gate;
  uint32_t want[8];         /* requests the test wants per reader */
  sl_source_waker_t *waker[8];
  /* Enumerator view. */
  char back[8][4];          /* add_splits_back, in order */
  uint32_t n_back;
  uint32_t back_from[8];
  uint32_t n_assigned;
  /* Reader view. */
  char opened_with[8][8][4]; /* splits restored into reader_open */
  uint32_t n_opened_with[8];
  bool opened_has_pos[8][8];
  uint32_t n_added[8];       /* splits added while running, per reader */
  uint32_t n_acks[8];        /* "done:<id>" events received, per reader */
  uint32_t n_finished_seen;  /* "split finished" reports the enumerator
                                got */
  uint32_t attempts_open;
  /* Enumerator failures the test arms (each fires once). */
  uint32_t fail_request;     /* handle_split_request fails */
  uint32_t fail_discover;    /* the next scheduled discovery fails */
  bool is_unbounded;         /* out of letters: park the request */
  int64_t discovery_ms;      /* set by the first discovery */
  uint32_t n_parked;         /* requests parked (unbounded) */
  uint32_t n_discover;
  bool is_no_ack;            /* "split finished" is not answered */
} erun_t;

static erun_t g;

/* ---- enumerator ---- */

typedef struct tenum_s {
  char pending[N_LETTERS * 2][4];
  uint8_t pos[N_LETTERS * 2][8];
  bool has_pos[N_LETTERS * 2];
  uint32_t n;
  uint32_t parked; /* bit s: reader s waits for a split (unbounded) */
} tenum_t;

static int e_create(void *src, const sl_enum_init_t *init, void **out,
                    sl_error_t **out_err) {
  (void)out_err;
  uint32_t n_letters = (uint32_t)(uintptr_t)src;
  tenum_t *e = calloc(1, sizeof(*e));
  if (init->state) { /* the pending letters, one byte each */
    for (size_t i = 0; i < init->state_len; i++)
      snprintf(e->pending[e->n++], 4, "%c", init->state[i]);
  } else {
    for (uint32_t i = 0; i < n_letters; i++)
      snprintf(e->pending[e->n++], 4, "%c", 'A' + i);
  }
  *out = e;
  return SL_OK;
}

static int e_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                     sl_error_t **out_err) {
  tenum_t *e = en;
  pthread_mutex_lock(&g.mu);
  bool is_fail = g.fail_request > 0;
  if (is_fail) g.fail_request--;
  bool is_unbounded = g.is_unbounded;
  if (!is_fail && e->n == 0 && is_unbounded) g.n_parked++;
  pthread_mutex_unlock(&g.mu);
  if (is_fail)
    return sl_error_set(out_err, SL_EIO, "test refuses the request of "
                        "reader %u", subtask);
  if (e->n == 0 && is_unbounded) { /* a later discovery may answer it */
    e->parked |= 1u << subtask;
    return SL_OK;
  }
  if (e->n == 0) return sl_enum_signal_no_more_splits(ec, subtask);
  sl_split_t s = {e->pending[0], e->has_pos[0] ? e->pos[0] : NULL,
                  e->has_pos[0] ? 8 : 0};
  int rc = sl_enum_assign(ec, subtask, &s);
  memmove(&e->pending[0], &e->pending[1], (e->n - 1) * 4);
  memmove(&e->pos[0], &e->pos[1], (e->n - 1) * 8);
  memmove(&e->has_pos[0], &e->has_pos[1], (e->n - 1) * sizeof(bool));
  e->n--;
  pthread_mutex_lock(&g.mu);
  g.n_assigned++;
  pthread_mutex_unlock(&g.mu);
  return rc;
}

static int e_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                  const sl_split_t *s, uint32_t n, sl_error_t **out_err) {
  (void)ec;
  tenum_t *e = en;
  for (uint32_t i = 0; i < n; i++) {
    if (s[i].state_len != 0 && s[i].state_len != 8)
      return sl_error_set(out_err, SL_EINVAL, "bad position of %s", s[i].id);
    snprintf(e->pending[e->n], 4, "%s", s[i].id);
    e->has_pos[e->n] = s[i].state_len == 8;
    if (s[i].state_len) memcpy(e->pos[e->n], s[i].state, 8);
    e->n++;
    pthread_mutex_lock(&g.mu);
    g.back_from[g.n_back] = subtask;
    snprintf(g.back[g.n_back++], 4, "%s", s[i].id);
    pthread_mutex_unlock(&g.mu);
  }
  return SL_OK;
}

/* "Split finished" is answered with a custom event "done:<id>". */
static int e_finished(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      const char *id, sl_error_t **out_err) {
  (void)en;
  (void)out_err;
  pthread_mutex_lock(&g.mu);
  g.n_finished_seen++;
  bool is_no_ack = g.is_no_ack;
  pthread_mutex_unlock(&g.mu);
  if (is_no_ack) return SL_OK;
  char ev[16];
  int n = snprintf(ev, sizeof(ev), "done:%s", id);
  return sl_enum_send_event(ec, subtask, (const uint8_t *)ev, (size_t)n);
}

/* Discovery (armed by the test: an unbounded source that finds nothing
 * new).  Once the test makes the source bounded, parked readers hear
 * "no more". */
static int e_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  tenum_t *e = en;
  pthread_mutex_lock(&g.mu);
  g.n_discover++;
  bool is_fail = g.fail_discover > 0 && g.n_discover > 1; /* scheduled */
  if (is_fail) g.fail_discover--;
  bool is_unbounded = g.is_unbounded;
  int64_t ms = g.discovery_ms;
  pthread_mutex_unlock(&g.mu);
  if (ms) sl_enum_set_discovery_interval(ec, ms);
  if (is_fail)
    return sl_error_set(out_err, SL_EIO, "test discovery failed");
  for (uint32_t s = 0; !is_unbounded && e->parked; s++) {
    if (!(e->parked & (1u << s))) continue;
    e->parked &= ~(1u << s);
    int rc = sl_enum_signal_no_more_splits(ec, s);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static int e_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  (void)id;
  tenum_t *e = en;
  /* Pending letters only: a split given back with a position comes
   * back with a restore from the reader states, not from here.  Those
   * this test gives back before a checkpoint have no position, or are
   * read from the start again. */
  for (uint32_t i = 0; i < e->n; i++)
    if (sl_bytes_append(out, e->pending[i], 1) != SL_OK) return SL_ENOMEM;
  return SL_OK;
}

static void e_close(void *en) { free(en); }

static const sl_enum_vt_t enum_vt = {
    .create = e_create,
    .handle_split_request = e_request,
    .add_splits_back = e_back,
    .handle_split_finished = e_finished,
    .discover = e_discover,
    .snapshot = e_snapshot,
    .close = e_close,
};

/* ---- reader ---- */

typedef struct ereader_s {
  uint32_t subtask;
  uint32_t n;
  uint32_t letter[16];
  uint32_t index[16]; /* the engine's split index */
  int64_t next[16];
  uint32_t cur;
  uint32_t asked;
} ereader_t;

static void add_one(ereader_t *r, const sl_split_init_t *s) {
  r->letter[r->n] = (uint32_t)(s->id[0] - 'A');
  r->index[r->n] = s->split;
  r->next[r->n] = 0;
  if (s->position) memcpy(&r->next[r->n], s->position, 8);
  r->n++;
}

static int r_open(void *c, const sl_reader_init_t *init, void **out,
                  sl_error_t **e) {
  (void)c;
  (void)e;
  ereader_t *r = calloc(1, sizeof(*r));
  r->subtask = init->subtask;
  pthread_mutex_lock(&g.mu);
  g.waker[init->subtask] = init->waker;
  g.attempts_open++;
  g.n_opened_with[init->subtask] = init->n_splits;
  for (uint32_t i = 0; i < init->n_splits; i++) {
    snprintf(g.opened_with[init->subtask][i], 4, "%s", init->splits[i].id);
    g.opened_has_pos[init->subtask][i] = init->splits[i].position != NULL;
  }
  r->asked = g.want[init->subtask];
  pthread_mutex_unlock(&g.mu);
  for (uint32_t i = 0; i < init->n_splits; i++) add_one(r, &init->splits[i]);
  *out = r;
  return SL_OK;
}

static int r_add(void *rd, const sl_split_init_t *s, uint32_t n,
                 sl_error_t **e) {
  (void)e;
  ereader_t *r = rd;
  for (uint32_t i = 0; i < n; i++) add_one(r, &s[i]);
  pthread_mutex_lock(&g.mu);
  g.n_added[r->subtask] += n;
  pthread_mutex_unlock(&g.mu);
  return SL_OK;
}

static int r_event(void *rd, const uint8_t *ev, size_t len,
                   sl_error_t **e) {
  ereader_t *r = rd;
  if (len < 6 || memcmp(ev, "done:", 5) != 0)
    return sl_error_set(e, SL_EINVAL, "unexpected event");
  pthread_mutex_lock(&g.mu);
  g.n_acks[r->subtask]++;
  pthread_mutex_unlock(&g.mu);
  return SL_OK;
}

static int r_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  ereader_t *r = rd;
  pthread_mutex_lock(&g.mu);
  int64_t gt = g.gate;
  uint32_t want = g.want[r->subtask];
  pthread_mutex_unlock(&g.mu);
  for (; r->asked < want; r->asked++) sl_source_request_split(out);
  uint32_t n_done = 0;
  for (uint32_t k = 0; k < r->n; k++) {
    uint32_t j = (r->cur + k) % r->n;
    if (r->next[j] >= PER_SPLIT) {
      n_done++;
      continue;
    }
    if (r->next[j] >= gt) continue;
    r->cur = j + 1;
    for (int b = 0; b < 64 && r->next[j] < gt; b++) {
      int64_t i = r->next[j]++;
      sl_row_builder_t *bl = sl_source_builder(out);
      sl_row_builder_set_i64(bl, 0, r->letter[j] * KEYS_PER_SPLIT +
                                        i % KEYS_PER_SPLIT);
      sl_row_builder_set_i64(bl, 1, i / KEYS_PER_SPLIT);
      sl_row_builder_set_i64(bl, 2, i * 1000);
      bool is_more = sl_source_emit_builder(out, NULL);
      if (r->next[j] == PER_SPLIT) sl_source_split_finished(out, r->index[j]);
      if (!is_more) return SL_POLL_MORE;
    }
    return SL_POLL_MORE;
  }
  return n_done == r->n ? SL_POLL_END : SL_POLL_WAIT;
}

static int r_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  ereader_t *r = rd;
  for (uint32_t j = 0; j < r->n; j++)
    if (r->index[j] == split) return sl_bytes_append(out, &r->next[j], 8);
  return SL_ENOTFOUND;
}

static void r_close(void *rd) {
  ereader_t *r = rd;
  pthread_mutex_lock(&g.mu);
  g.waker[r->subtask] = NULL;
  pthread_mutex_unlock(&g.mu);
  free(rd);
}

static int r_plan(void *c, uint32_t p, sl_split_list_t *l, sl_error_t **e) {
  (void)c, (void)p, (void)l;
  return sl_error_set(e, SL_EINVAL, "plan() of a source with an enumerator "
                      "was called");
}

static const sl_source_vt_t esrc_vt = {
    .type_name = "letters",
    .plan = r_plan,
    .reader_open = r_open,
    .reader_poll = r_poll,
    .reader_position = r_pos,
    .reader_close = r_close,
    .enumerator = &enum_vt,
    .reader_add_splits = r_add,
    .reader_handle_event = r_event,
};

static void wake_all(void) {
  for (int i = 0; i < 8; i++)
    if (g.waker[i]) sl_source_waker_wake(g.waker[i]);
}

static void set_egate(int64_t gt) {
  pthread_mutex_lock(&g.mu);
  g.gate = gt;
  wake_all();
  pthread_mutex_unlock(&g.mu);
}

static void ask(uint32_t subtask) {
  pthread_mutex_lock(&g.mu);
  g.want[subtask]++;
  wake_all();
  pthread_mutex_unlock(&g.mu);
}

/* Wait (bounded) until cond holds under g.mu. */
#define WAIT_FOR(cond)                                                    \
  do {                                                                    \
    for (int w_ = 0;; w_++) {                                             \
      pthread_mutex_lock(&g.mu);                                          \
      bool ok_ = (cond);                                                  \
      pthread_mutex_unlock(&g.mu);                                        \
      if (ok_) break;                                                     \
      if (w_ > 60000) SL_TEST_FAIL("timed out waiting for %s", #cond);    \
      struct timespec ts_ = {0, 1000000};                                 \
      nanosleep(&ts_, NULL);                                              \
    }                                                                     \
  } while (0)

static void erun_reset(void) {
  pthread_mutex_destroy(&g.mu);
  memset(&g, 0, sizeof(g));
  pthread_mutex_init(&g.mu, NULL);
  seq_reset();
  memset(out_count, 0, sizeof(out_count));
  (void)src_vt; /* seq_job.h's source is not used here */
}

static sl_job_t *ejob(const sl_job_config_t *cfg, uint32_t n_letters) {
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
  sl_stream_t *s = sl_job_source(job, "letters", &esrc_vt,
                                 (void *)(uintptr_t)n_letters, schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {chk_open, chk_process, NULL, NULL, NULL, NULL};
  s = sl_stream_process(s, checker_uid, out_schema, &fns, NULL);
  sl_stream_set_parallelism(s, 2);
  SL_ASSERT_OK(sl_stream_sink(s, "upsert", &sink_vt, NULL));
  SL_ASSERT_OK(sl_stream_set_sink_parallelism(s, 2));
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  return job;
}

/* Every key of the first n letters saw seq 0..n-1 exactly once. */
static void check_letters(uint32_t n_letters, const char *what) {
  if (violations) SL_TEST_FAIL("%s: %s", what, violation_msg);
  int64_t per_key = PER_SPLIT / KEYS_PER_SPLIT;
  for (uint32_t k = 0; k < n_letters * KEYS_PER_SPLIT; k++)
    if (out_count[k] != per_key || out_sum[k] != per_key * (per_key - 1) / 2)
      SL_TEST_FAIL("%s: key %u has count %lld sum %lld, expected %lld and "
                   "%lld", what, k, (long long)out_count[k],
                   (long long)out_sum[k], (long long)per_key,
                   (long long)(per_key * (per_key - 1) / 2));
  for (uint32_t k = n_letters * KEYS_PER_SPLIT; k < N_KEYS; k++)
    if (out_count[k] != 0)
      SL_TEST_FAIL("%s: key %u was never produced", what, k);
}

static uint64_t ckpt(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(job, &id, &err), err);
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, id, 60000, NULL));
  return id;
}

typedef struct trig_s {
  sl_job_t *job;
  int rc;
} trig_t;

static void *trig_main(void *arg) {
  trig_t *t = arg;
  uint64_t id;
  sl_error_t *err = NULL;
  t->rc = sl_job_trigger_checkpoint(t->job, &id, &err);
  if (t->rc == SL_OK) t->rc = sl_job_wait_checkpoint(t->job, id, 60000, NULL);
  sl_error_destroy(err);
  return NULL;
}

/*
 * Seed 004 in a job.  Reader 0 gets A and reads some of it; checkpoint 1
 * completes (its state holds A).  It gets B.  Checkpoint 2 is triggered:
 * the coordinator is held at enum.after_snapshot_before_trigger (the
 * enumerator's snapshot for 2 is taken) while the reader asks for C, which
 * the enumerator assigns and the gateway holds.  Checkpoint 2 then fails
 * before its metadata is written, and the checker fails the task: the job
 * restarts from checkpoint 1.  Expected, exactly: B and C, in that order,
 * come back to the enumerator from reader 0; the new reader opens with A
 * alone, at a stored position; B and C are assigned to it again; every key
 * of A, B and C counts each record once (nothing read twice or lost).
 */
SL_TEST(abc) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  erun_reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ck", sl_test_dir());
  cfg.name = "abc";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 2;
  sl_job_t *job = ejob(&cfg, 3);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  WAIT_FOR(g.n_added[0] == 1); /* A, on the request at open */
  set_egate(PER_SPLIT / 4);
  ckpt(job);
  ask(0);
  WAIT_FOR(g.n_added[0] == 2); /* B */
  SL_ASSERT_OK(sl_inject_arm("enum.after_snapshot_before_trigger",
                             SL_INJECT_PAUSE, 1, false));
  SL_ASSERT_OK(sl_inject_arm("coordinator.before_metadata_write",
                             SL_INJECT_FAIL, 1, false));
  trig_t tr = {job, 0};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, trig_main, &tr), 0);
  SL_ASSERT_OK(sl_inject_wait_paused("enum.after_snapshot_before_trigger",
                                     60000));
  ask(0);
  WAIT_FOR(g.n_assigned == 3); /* C, assigned after the snapshot for 2 */
  pthread_mutex_lock(&g.mu);
  SL_ASSERT_EQ_INT(g.n_added[0], 2); /* held by the gateway */
  pthread_mutex_unlock(&g.mu);
  sl_inject_release("enum.after_snapshot_before_trigger");
  pthread_join(th, NULL);
  SL_ASSERT_NE_INT(tr.rc, SL_OK); /* checkpoint 2 failed */
  /* The reader took 2, so C passed; now fail the task. */
  WAIT_FOR(g.n_added[0] == 3);
  pthread_mutex_lock(&lock);
  fail_at = n_processed + 1;
  pthread_mutex_unlock(&lock);
  set_egate(PER_SPLIT / 2);
  WAIT_FOR(g.attempts_open == 2);
  set_egate(PER_SPLIT);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_wait(job, &err), err);
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  SL_ASSERT_EQ_INT(sl_inject_hits("enum.on_subtask_reset"), 1);
  SL_ASSERT_EQ_INT(sl_inject_hits("enum.after_assign_before_checkpoint"), 5);
  SL_ASSERT_EQ_INT(g.n_back, 2);
  SL_ASSERT_EQ_STR(g.back[0], "B");
  SL_ASSERT_EQ_STR(g.back[1], "C");
  SL_ASSERT_EQ_INT(g.back_from[0], 0);
  SL_ASSERT_EQ_INT(g.back_from[1], 0);
  SL_ASSERT_EQ_INT(g.n_opened_with[0], 1);
  SL_ASSERT_EQ_STR(g.opened_with[0][0], "A");
  SL_ASSERT_TRUE(g.opened_has_pos[0][0]);
  SL_ASSERT_EQ_INT(g.n_assigned, 5); /* A, B, C, then B and C again */
  /* Each letter was finished once (the first attempt finished none) and
   * its acknowledgement reached the reader through the gateway. */
  SL_ASSERT_EQ_INT(g.n_finished_seen, 3);
  SL_ASSERT_EQ_INT(g.n_acks[0], 3);
  check_letters(3, "abc");
  sl_job_destroy(job);
  sl_inject_reset();
}

/*
 * A checkpoint with letters still in the enumerator and letters in the
 * readers, restored at another parallelism: the readers' letters go back
 * to the enumerator with their positions (none is read twice: the checker
 * would fail), the pending ones stay pending, and the totals are exact.
 */
static void rescale(uint32_t from, uint32_t to, uint32_t n_letters) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  erun_reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ck", sl_test_dir());
  cfg.name = "rescale";
  cfg.parallelism = from;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  sl_job_t *job = ejob(&cfg, n_letters);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  /* Each reader gets one letter on its request at open. */
  uint32_t n_readers_with = from < n_letters ? from : n_letters;
  WAIT_FOR(g.n_assigned == n_readers_with);
  set_egate(PER_SPLIT / 3);
  uint64_t id = ckpt(job);
  sl_job_cancel(job);
  sl_job_wait(job, NULL);
  sl_job_destroy(job);
  pthread_mutex_lock(&g.mu);
  uint32_t n_first = g.n_assigned;
  g.n_assigned = 0;
  g.gate = 0;
  pthread_mutex_unlock(&g.mu);
  SL_ASSERT_EQ_INT(n_first, n_readers_with);

  char from_dir[4300];
  snprintf(from_dir, sizeof(from_dir), "%s/rescale/chk-%llu", dir,
           (unsigned long long)id);
  cfg.parallelism = to;
  cfg.restore_from = from_dir;
  job = ejob(&cfg, n_letters);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_egate(PER_SPLIT);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_wait(job, &err), err);
  /* The letters of the old readers came back with their positions; each
   * new reader opened with none. */
  SL_ASSERT_EQ_INT(g.n_back, n_readers_with);
  for (uint32_t i = 0; i < g.n_back; i++)
    SL_ASSERT_EQ_INT(g.back_from[i], UINT32_MAX);
  for (uint32_t s = 0; s < to; s++) SL_ASSERT_EQ_INT(g.n_opened_with[s], 0);
  SL_ASSERT_EQ_INT(g.n_assigned, n_letters);
  check_letters(n_letters, "rescale");
  sl_job_destroy(job);
}

SL_TEST(rescale_2_to_3) { rescale(2, 3, 4); }
SL_TEST(rescale_4_to_1) { rescale(4, 1, 4); }

/* The same parallelism: reader i keeps old reader i's letters, with
 * their positions; nothing goes back to the enumerator. */
SL_TEST(restore_same_parallelism) {
  erun_reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ck", sl_test_dir());
  cfg.name = "same";
  cfg.parallelism = 2;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  sl_job_t *job = ejob(&cfg, 4);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  WAIT_FOR(g.n_assigned == 2);
  set_egate(PER_SPLIT / 3);
  uint64_t id = ckpt(job);
  sl_job_cancel(job);
  sl_job_wait(job, NULL);
  sl_job_destroy(job);
  pthread_mutex_lock(&g.mu);
  g.n_assigned = 0;
  g.gate = 0;
  pthread_mutex_unlock(&g.mu);
  char from_dir[4300];
  snprintf(from_dir, sizeof(from_dir), "%s/same/chk-%llu", dir,
           (unsigned long long)id);
  cfg.restore_from = from_dir;
  job = ejob(&cfg, 4);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  set_egate(PER_SPLIT);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_wait(job, &err), err);
  SL_ASSERT_EQ_INT(g.n_back, 0);
  SL_ASSERT_EQ_INT(g.n_opened_with[0], 1);
  SL_ASSERT_EQ_INT(g.n_opened_with[1], 1);
  SL_ASSERT_TRUE(g.opened_has_pos[0][0] && g.opened_has_pos[1][0]);
  SL_ASSERT_EQ_INT(g.n_assigned, 2); /* C and D, from the enumerator state */
  check_letters(4, "same parallelism");
  sl_job_destroy(job);
}

/*
 * A stuck enumerator does not hold the checkpoint trigger forever: the
 * enumerator thread is held at enum.before_snapshot (a latch, released
 * only at the end), and the trigger gives up at the checkpoint timeout,
 * aborting the checkpoint with a reason that names the source and the
 * checkpoint.  Its gateway reopens (the abort), so an assignment made
 * meanwhile reaches the reader; once released, the next checkpoint
 * completes and every record counts once.
 */
SL_TEST(stuck_enumerator_snapshot_aborts_the_checkpoint_at_its_timeout) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  erun_reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ck", sl_test_dir());
  cfg.name = "stuck";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  cfg.checkpoint.timeout_ms = 200;
  sl_job_t *job = ejob(&cfg, 2);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  WAIT_FOR(g.n_added[0] == 1); /* A */
  SL_ASSERT_OK(sl_inject_arm("enum.before_snapshot", SL_INJECT_PAUSE, 1,
                             false));
  uint64_t id = 0;
  sl_error_t *err = NULL;
  int rc = sl_job_trigger_checkpoint(job, &id, &err);
  SL_ASSERT_EQ_INT(rc, SL_ECANCELED);
  SL_ASSERT_TRUE(err != NULL);
  const char *want = "the enumerator of source 'letters' did not take its "
                     "snapshot for checkpoint 1 within the checkpoint "
                     "timeout";
  if (strstr(sl_error_message(err), want) == NULL)
    SL_TEST_FAIL("expected '%s' in '%s'", want, sl_error_message(err));
  sl_error_destroy(err);
  /* The enumerator is still held; the checkpoint is recorded aborted. */
  SL_ASSERT_OK(sl_inject_wait_paused("enum.before_snapshot", 60000));
  sl_checkpoint_stats_t h[4];
  uint32_t n = sl_job_checkpoint_history(job, h, 4);
  SL_ASSERT_EQ_INT(n, 1);
  SL_ASSERT_EQ_INT(h[0].id, 1);
  SL_ASSERT_EQ_INT(h[0].result, SL_ECANCELED);
  /* Release it: the abandoned snapshot is dropped, B (assigned after the
   * gateway closed at 1) passes since 1 aborted, and 2 completes. */
  sl_inject_release("enum.before_snapshot");
  ask(0);
  WAIT_FOR(g.n_added[0] == 2);
  set_egate(PER_SPLIT / 2);
  SL_ASSERT_EQ_INT(ckpt(job), 2);
  set_egate(PER_SPLIT);
  SL_ASSERT_OK_E(sl_job_wait(job, &err), err);
  SL_ASSERT_EQ_INT(sl_inject_hits("enum.before_snapshot"), 2);
  check_letters(2, "stuck enumerator");
  sl_job_destroy(job);
  sl_inject_reset();
}

/* ---- a failing enumerator fails the job (no reader waits for good) ---- */

typedef struct jwait_s {
  sl_job_t *job;
  sl_error_t *err;
  int rc;
  bool is_done;
} jwait_t;

static void *jwait_main(void *arg) {
  jwait_t *w = arg;
  sl_error_t *err = NULL;
  int rc = sl_job_wait(w->job, &err);
  pthread_mutex_lock(&g.mu);
  w->rc = rc;
  w->err = err;
  w->is_done = true;
  pthread_mutex_unlock(&g.mu);
  return NULL;
}

/* sl_job_wait, failing the test if the job has not ended within a minute
 * (a reader left waiting for an assignment hangs it). */
static int wait_job(sl_job_t *job, sl_error_t **out_err) {
  jwait_t w = {job, NULL, 0, false};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, jwait_main, &w), 0);
  WAIT_FOR(w.is_done);
  pthread_join(th, NULL);
  *out_err = w.err;
  return w.rc;
}

static void expect_failure(sl_job_t *job, const char *want) {
  sl_error_t *err = NULL;
  int rc = wait_job(job, &err);
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  SL_ASSERT_TRUE(err != NULL);
  if (strcmp(sl_error_message(err), want) != 0)
    SL_TEST_FAIL("expected '%s', got '%s'", want, sl_error_message(err));
  sl_error_destroy(err);
}

static sl_job_t *fail_job(const char *name, bool has_restart,
                          uint32_t n_letters) {
  static char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ck-%s", sl_test_dir(), name);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = name;
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = dir;
  if (has_restart) {
    cfg.restart.kind = SL_RESTART_FIXED_DELAY;
    cfg.restart.max_attempts = 2;
  }
  return ejob(&cfg, n_letters);
}

/*
 * Bounded: the reader reads A, finishes it and asks for the next split;
 * the enumerator's request handler fails.  The reader waits for an
 * assignment that will never come: the failing host wakes it, and the job
 * fails with the enumerator's message, naming the source.  With a restart
 * strategy the attempt restarts from checkpoint 1 (the enumerator is
 * created again from its state there), B is assigned, and every record
 * counts once.
 */
static void request_failure(bool has_restart) {
  erun_reset();
  sl_job_t *job = fail_job(has_restart ? "req-restart" : "req", has_restart,
                           2);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  WAIT_FOR(g.n_added[0] == 1); /* A */
  SL_ASSERT_EQ_INT(ckpt(job), 1);
  pthread_mutex_lock(&g.mu);
  g.fail_request = 1;
  g.is_no_ack = true; /* no event wakes the reader by chance */
  pthread_mutex_unlock(&g.mu);
  set_egate(PER_SPLIT); /* A ends, the reader asks for B */
  if (!has_restart) {
    expect_failure(job, "operator 'letters' (subtask 1 of 1): enumerator of "
                        "source 'letters': test refuses the "
                        "request of reader 0");
    SL_ASSERT_EQ_INT(sl_job_restarts(job), 0);
  } else {
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(wait_job(job, &err), err);
    SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
    SL_ASSERT_EQ_INT(g.attempts_open, 2);
    check_letters(2, "request failure, restarted");
  }
  SL_ASSERT_EQ_INT(g.fail_request, 0);
  sl_job_destroy(job);
}

SL_TEST(enumerator_request_failure_fails_the_job) { request_failure(false); }
SL_TEST(enumerator_request_failure_restarts_and_completes) {
  request_failure(true);
}

/*
 * Unbounded: out of letters, the enumerator parks the reader's request
 * until a discovery finds more; a scheduled discovery fails.  The job
 * fails with its message.  With a restart strategy it restarts from
 * checkpoint 1 (A finished, nothing pending); once the source is made
 * bounded, the next discovery tells the parked reader "no more" and the
 * job ends with every record of A counted once.
 */
static void discovery_failure(bool has_restart) {
  erun_reset();
  g.is_unbounded = true;
  g.is_no_ack = true;
  g.discovery_ms = 2;
  sl_job_t *job = fail_job(has_restart ? "disc-restart" : "disc",
                           has_restart, 1);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  WAIT_FOR(g.n_added[0] == 1); /* A */
  set_egate(PER_SPLIT);
  WAIT_FOR(g.n_parked == 1);
  SL_ASSERT_EQ_INT(ckpt(job), 1);
  pthread_mutex_lock(&g.mu);
  g.fail_discover = 1;
  pthread_mutex_unlock(&g.mu);
  if (!has_restart) {
    expect_failure(job, "operator 'letters' (subtask 1 of 1): enumerator of "
                        "source 'letters': test discovery "
                        "failed");
  } else {
    WAIT_FOR(g.attempts_open == 2 && g.n_parked == 2);
    pthread_mutex_lock(&g.mu);
    g.is_unbounded = false;
    pthread_mutex_unlock(&g.mu);
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(wait_job(job, &err), err);
    SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
    check_letters(1, "discovery failure, restarted");
  }
  SL_ASSERT_EQ_INT(g.fail_discover, 0);
  sl_job_destroy(job);
}

SL_TEST(enumerator_discovery_failure_fails_the_job) {
  discovery_failure(false);
}
SL_TEST(enumerator_discovery_failure_restarts_and_completes) {
  discovery_failure(true);
}
