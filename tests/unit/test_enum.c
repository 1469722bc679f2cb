/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the source framework's coordinator side
 * (src/checkpoint/enum_host.c, enum_tracker.c): the assignment tracker on
 * seed 004's A/B/C case, and the event gateway's ordering of enumerator
 * snapshot, "split finished" report and reader snapshot, forced in both
 * orders with the latch at enum.after_snapshot_before_trigger.  The test
 * enumerator hands out a queue of splits on request, keeps the finished
 * ones, acknowledges each finished split with an event "ack:<id>" to its
 * reader, and snapshots as "pending|finished" lists.  Delivered events
 * are logged in order.
 */
#include <pthread.h>
#include <sys/stat.h>

#include "checkpoint/enum_host.h"
#include "core/inject.h"
#include "sl_test.h"

/* ---- the test enumerator ---- */

typedef struct tenum_s {
  pthread_mutex_t mu; /* the test thread reads what the enumerator writes */
  pthread_cond_t cv;
  char pending[16][16];
  uint32_t n_pending;
  char finished[16][16];
  uint32_t n_finished;
  char back[16][16];   /* splits received by add_splits_back, in order */
  uint32_t n_back;
  uint32_t back_subtask;
  uint32_t n_handled;  /* messages handled, for waiting */
  bool fail_request;
} tenum_t;

static int t_create(void *src_ctx, const sl_enum_init_t *init, void **out,
                    sl_error_t **out_err) {
  (void)out_err;
  tenum_t *e = src_ctx;
  if (init->state) { /* "A,B|C": pending A and B, finished C */
    e->n_pending = e->n_finished = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%.*s", (int)init->state_len,
             (const char *)init->state);
    char *bar = strchr(buf, '|');
    *bar = '\0';
    for (char *p = buf, *q; *p; p = q) {
      q = strchr(p, ',');
      if (q) *q++ = '\0'; else q = p + strlen(p);
      snprintf(e->pending[e->n_pending++], 16, "%.15s", p);
    }
    for (char *p = bar + 1, *q; *p; p = q) {
      q = strchr(p, ',');
      if (q) *q++ = '\0'; else q = p + strlen(p);
      snprintf(e->finished[e->n_finished++], 16, "%.15s", p);
    }
  }
  *out = e;
  return SL_OK;
}

static void handled(tenum_t *e) {
  pthread_mutex_lock(&e->mu);
  e->n_handled++;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

static int t_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                     sl_error_t **out_err) {
  tenum_t *e = en;
  if (e->fail_request)
    return sl_error_set(out_err, SL_EINVAL, "no split for reader %u",
                        subtask);
  pthread_mutex_lock(&e->mu);
  int rc = SL_OK;
  if (e->n_pending > 0) {
    char id[16];
    snprintf(id, sizeof(id), "%.15s", e->pending[0]);
    memmove(e->pending[0], e->pending[1], --e->n_pending * 16);
    sl_split_t s = {id, NULL, 0};
    rc = sl_enum_assign(ec, subtask, &s);
  }
  pthread_mutex_unlock(&e->mu);
  handled(e);
  return rc;
}

static int t_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                  const sl_split_t *s, uint32_t n, sl_error_t **out_err) {
  (void)ec;
  (void)out_err;
  tenum_t *e = en;
  pthread_mutex_lock(&e->mu);
  e->back_subtask = subtask;
  for (uint32_t i = 0; i < n; i++) {
    snprintf(e->back[e->n_back++], 16, "%.15s", s[i].id);
    snprintf(e->pending[e->n_pending++], 16, "%.15s", s[i].id);
  }
  pthread_mutex_unlock(&e->mu);
  handled(e);
  return SL_OK;
}

static int t_finished(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      const char *id, sl_error_t **out_err) {
  (void)out_err;
  tenum_t *e = en;
  pthread_mutex_lock(&e->mu);
  snprintf(e->finished[e->n_finished++], 16, "%.15s", id);
  pthread_mutex_unlock(&e->mu);
  char ack[32];
  int n = snprintf(ack, sizeof(ack), "ack:%s", id);
  int rc = sl_enum_send_event(ec, subtask, (const uint8_t *)ack, (size_t)n);
  handled(e);
  return rc;
}

/* A reader's custom event comes back as "echo:<event>". */
static int t_event(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                   const uint8_t *ev, size_t len, sl_error_t **out_err) {
  (void)out_err;
  char echo[64];
  int n = snprintf(echo, sizeof(echo), "echo:%.*s", (int)len,
                   (const char *)ev);
  int rc = sl_enum_send_event(ec, subtask, (const uint8_t *)echo, (size_t)n);
  handled(en);
  return rc;
}

static int t_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  (void)id;
  tenum_t *e = en;
  pthread_mutex_lock(&e->mu);
  sl_bytes_t *b = out;
  for (uint32_t i = 0; i < e->n_pending; i++)
    sl_bytes_printf(b, "%s%s", i ? "," : "", e->pending[i]);
  sl_bytes_printf(b, "|");
  for (uint32_t i = 0; i < e->n_finished; i++)
    sl_bytes_printf(b, "%s%s", i ? "," : "", e->finished[i]);
  pthread_mutex_unlock(&e->mu);
  return SL_OK;
}

static void t_close(void *en) { (void)en; }

static const sl_enum_vt_t g_vt = {
    .create = t_create,
    .handle_split_request = t_request,
    .add_splits_back = t_back,
    .handle_split_finished = t_finished,
    .handle_reader_event = t_event,
    .snapshot = t_snapshot,
    .close = t_close,
};

static void tenum_init(tenum_t *e, const char *const *ids) {
  memset(e, 0, sizeof(*e));
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  for (uint32_t i = 0; ids && ids[i]; i++)
    snprintf(e->pending[e->n_pending++], 16, "%.15s", ids[i]);
}

static void wait_handled(tenum_t *e, uint32_t n) {
  pthread_mutex_lock(&e->mu);
  while (e->n_handled < n) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
}

/* ---- the delivery log: what readers received, in order ---- */

typedef struct dlog_s {
  pthread_mutex_t mu;
  char items[32][40];
  uint32_t n;
} dlog_t;

static void deliver(void *user, sl_enum_event_t *ev) {
  dlog_t *l = user;
  pthread_mutex_lock(&l->mu);
  if (ev->kind == SL_ENUM_EV_ASSIGN)
    snprintf(l->items[l->n++], 40, "%u:assign %s", ev->subtask, ev->id);
  else if (ev->kind == SL_ENUM_EV_CUSTOM)
    snprintf(l->items[l->n++], 40, "%u:%.*s", ev->subtask, (int)ev->len,
             (const char *)ev->data);
  else
    snprintf(l->items[l->n++], 40, "%u:no more", ev->subtask);
  pthread_mutex_unlock(&l->mu);
  sl__enum_event_free(ev);
}

static uint32_t dlog_n(dlog_t *l) {
  pthread_mutex_lock(&l->mu);
  uint32_t n = l->n;
  pthread_mutex_unlock(&l->mu);
  return n;
}

static sl_enum_host_t *host(tenum_t *e, uint32_t par, bool has_thread,
                            dlog_t *l) {
  sl_enum_init_t init = {par, NULL, 0, 0};
  sl_enum_host_t *h = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_create("src", &g_vt, e, &init, has_thread, &h,
                                      &err), err);
  memset(l, 0, sizeof(*l));
  pthread_mutex_init(&l->mu, NULL);
  sl__enum_host_attach(h, deliver, l);
  return h;
}

static void snap(sl_enum_host_t *h, uint64_t id, char *out, size_t cap) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_snapshot(h, id, &b, &err), err);
  snprintf(out, cap, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
  sl_bytes_close(&b);
}

/*
 * Seed 004: A is assigned, checkpoint 10 completes (the reader's state
 * holds A), B is assigned, checkpoint 11 is triggered (enumerator
 * snapshot), C is assigned, the reader fails and is reset to 10.  A stays
 * with the reader; B and C, exactly, go back to the enumerator, which
 * assigns them again: the reader ends with A, B and C, each once.
 */
SL_TEST(abc_reset) {
  static const char *const ids[] = {"A", "B", "C", NULL};
  tenum_t e;
  tenum_init(&e, ids);
  dlog_t l;
  sl_enum_host_t *h = host(&e, 1, false, &l);
  char st[64];
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 1);
  SL_ASSERT_EQ_STR(l.items[0], "0:assign A");
  /* Checkpoint 10: enumerator, then the reader (which holds A). */
  snap(h, 10, st, sizeof(st));
  SL_ASSERT_EQ_STR(st, "B,C|");
  sl__enum_host_reader_snapshot(h, 0, 10);
  sl__enum_host_checkpoint_complete(h, 10);
  /* B after 10; the gateway is open (the reader took 10). */
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 2);
  SL_ASSERT_EQ_STR(l.items[1], "0:assign B");
  /* Checkpoint 11 triggered: the enumerator's snapshot is taken... */
  snap(h, 11, st, sizeof(st));
  SL_ASSERT_EQ_STR(st, "C|");
  /* ...C is assigned after it: held until the reader takes 11. */
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 2);
  /* The reader fails before taking 11, and is reset to 10. */
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_subtask_reset(h, 0, 10, &err), err);
  SL_ASSERT_EQ_INT(e.n_back, 2);
  SL_ASSERT_EQ_STR(e.back[0], "B");
  SL_ASSERT_EQ_STR(e.back[1], "C");
  SL_ASSERT_EQ_INT(e.back_subtask, 0);
  /* The held assignment of C died with the old reader. */
  sl__enum_host_reader_snapshot(h, 0, 11);
  SL_ASSERT_EQ_INT(l.n, 2);
  /* The new reader holds A (its state of 10) and asks for more. */
  for (int i = 0; i < 3; i++) {
    SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
    SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  }
  SL_ASSERT_EQ_INT(l.n, 4);
  SL_ASSERT_EQ_STR(l.items[2], "0:assign B");
  SL_ASSERT_EQ_STR(l.items[3], "0:assign C");
  /* Each split is with the reader exactly once: A restored, B and C
   * assigned again; the enumerator has nothing left. */
  snap(h, 12, st, sizeof(st));
  SL_ASSERT_EQ_STR(st, "|");
  sl__enum_host_destroy(h);
}

/* A reset to a completed checkpoint after which nothing was assigned
 * gives nothing back; a reset to 0 (the start) gives everything back. */
SL_TEST(reset_bounds) {
  static const char *const ids[] = {"A", "B", NULL};
  tenum_t e;
  tenum_init(&e, ids);
  dlog_t l;
  sl_enum_host_t *h = host(&e, 2, false, &l);
  char st[64];
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_request_split(h, 1));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  snap(h, 3, st, sizeof(st));
  sl__enum_host_reader_snapshot(h, 0, 3);
  sl__enum_host_reader_snapshot(h, 1, 3);
  SL_ASSERT_OK(sl__enum_host_subtask_reset(h, 0, 3, NULL));
  SL_ASSERT_EQ_INT(e.n_back, 0);
  SL_ASSERT_OK(sl__enum_host_subtask_reset(h, 1, 0, NULL));
  SL_ASSERT_EQ_INT(e.n_back, 1);
  SL_ASSERT_EQ_STR(e.back[0], "B");
  SL_ASSERT_EQ_INT(e.back_subtask, 1);
  /* Subtask out of range: a clear error. */
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__enum_host_subtask_reset(h, 2, 0, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "no reader subtask 2");
  sl_error_destroy(err);
  sl__enum_host_destroy(h);
}

typedef struct snap_arg_s {
  sl_enum_host_t *h;
  uint64_t id;
  char state[64];
} snap_arg_t;

static void *snap_main(void *arg) {
  snap_arg_t *a = arg;
  snap(a->h, a->id, a->state, sizeof(a->state));
  return NULL;
}

/* One split X, assigned and read to its end by reader 0; returns the host
 * (threaded) with X delivered. */
static sl_enum_host_t *one_split_host(tenum_t *e, dlog_t *l) {
  static const char *const ids[] = {"X", NULL};
  tenum_init(e, ids);
  sl_enum_host_t *h = host(e, 1, true, l);
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  wait_handled(e, 1);
  SL_ASSERT_EQ_INT(dlog_n(l), 1);
  SL_ASSERT_EQ_STR(l->items[0], "0:assign X");
  return h;
}

/*
 * Gateway, order 1: the enumerator's snapshot for 5, then the reader's
 * "X finished" report (and the enumerator's acknowledgement), then the
 * reader's snapshot for 5.  The coordinator is held at the latch between
 * the enumerator snapshot and the trigger.  The acknowledgement must be
 * held until the reader took 5: the enumerator's state for 5 does not
 * have X finished, so the reader's state for 5 must still have X
 * unacknowledged (to report it again after a restore); delivering the
 * acknowledgement earlier would lose the fact in both states.
 */
SL_TEST(gateway_finished_after_enum_snapshot) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  tenum_t e;
  dlog_t l;
  sl_enum_host_t *h = one_split_host(&e, &l);
  SL_ASSERT_OK(sl_inject_arm("enum.after_snapshot_before_trigger",
                             SL_INJECT_PAUSE, 1, false));
  snap_arg_t a = {h, 5, ""};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, snap_main, &a), 0);
  SL_ASSERT_OK(sl_inject_wait_paused("enum.after_snapshot_before_trigger",
                                     30000));
  /* Between the enumerator's snapshot and the trigger. */
  SL_ASSERT_OK(sl__enum_host_split_finished(h, 0, "X"));
  wait_handled(&e, 2);
  SL_ASSERT_EQ_INT(dlog_n(&l), 1); /* held */
  sl_inject_release("enum.after_snapshot_before_trigger");
  pthread_join(th, NULL);
  SL_ASSERT_EQ_STR(a.state, "|"); /* X not finished in the state for 5 */
  SL_ASSERT_EQ_INT(dlog_n(&l), 1); /* still held: the reader has not
                                      taken 5 */
  sl__enum_host_reader_snapshot(h, 0, 4); /* an older one does not open */
  SL_ASSERT_EQ_INT(dlog_n(&l), 1);
  sl__enum_host_reader_snapshot(h, 0, 5);
  SL_ASSERT_EQ_INT(dlog_n(&l), 2);
  SL_ASSERT_EQ_STR(l.items[1], "0:ack:X");
  sl__enum_host_destroy(h);
  sl_inject_reset();
}

/*
 * Gateway, order 2: the report comes first, then the enumerator's
 * snapshot for 5 (forced: the test waits until the enumerator handled the
 * report before it triggers), then the reader's.  The acknowledgement
 * passes at once, before the reader's snapshot, so both states for 5 agree
 * that X is finished.
 */
SL_TEST(gateway_finished_before_enum_snapshot) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  tenum_t e;
  dlog_t l;
  sl_enum_host_t *h = one_split_host(&e, &l);
  SL_ASSERT_OK(sl__enum_host_split_finished(h, 0, "X"));
  wait_handled(&e, 2);
  SL_ASSERT_EQ_INT(dlog_n(&l), 2);
  SL_ASSERT_EQ_STR(l.items[1], "0:ack:X");
  SL_ASSERT_OK(sl_inject_arm("enum.after_snapshot_before_trigger",
                             SL_INJECT_PAUSE, 1, false));
  snap_arg_t a = {h, 5, ""};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, snap_main, &a), 0);
  SL_ASSERT_OK(sl_inject_wait_paused("enum.after_snapshot_before_trigger",
                                     30000));
  SL_ASSERT_EQ_INT(sl_inject_hits("enum.after_snapshot_before_trigger"), 1);
  sl_inject_release("enum.after_snapshot_before_trigger");
  pthread_join(th, NULL);
  SL_ASSERT_EQ_STR(a.state, "|X");
  sl__enum_host_reader_snapshot(h, 0, 5);
  SL_ASSERT_EQ_INT(dlog_n(&l), 2);
  sl__enum_host_destroy(h);
  sl_inject_reset();
}

/* A held event keeps later events of its reader behind it (order per
 * reader), never those of another reader; an aborted checkpoint reopens
 * the gateway. */
SL_TEST(gateway_order_and_abort) {
  tenum_t e;
  tenum_init(&e, NULL);
  dlog_t l;
  sl_enum_host_t *h = host(&e, 2, false, &l);
  char st[64];
  snap(h, 7, st, sizeof(st));
  sl__enum_host_reader_snapshot(h, 1, 7); /* reader 1 took 7, 0 did not */
  SL_ASSERT_OK(sl__enum_host_split_finished(h, 0, "P"));
  SL_ASSERT_OK(sl__enum_host_split_finished(h, 1, "Q"));
  SL_ASSERT_OK(sl__enum_host_split_finished(h, 0, "R"));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 1);
  SL_ASSERT_EQ_STR(l.items[0], "1:ack:Q");
  sl__enum_host_checkpoint_aborted(h, 7);
  SL_ASSERT_EQ_INT(l.n, 3);
  SL_ASSERT_EQ_STR(l.items[1], "0:ack:P");
  SL_ASSERT_EQ_STR(l.items[2], "0:ack:R");
  sl__enum_host_destroy(h);
}

/* A failing enumerator callback fails the host for good, with a message
 * naming the source; snapshots are refused after it. */
SL_TEST(enumerator_error_sticky) {
  static const char *const ids[] = {"A", NULL};
  tenum_t e;
  tenum_init(&e, ids);
  e.fail_request = true;
  dlog_t l;
  sl_enum_host_t *h = host(&e, 1, false, &l);
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__enum_host_run_pending(h, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "enumerator of source 'src': no split for reader 0");
  sl_error_destroy(err);
  err = NULL;
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_EQ_INT(sl__enum_host_snapshot(h, 1, &b, &err), SL_EINVAL);
  SL_ASSERT_TRUE(err != NULL);
  sl_error_destroy(err);
  sl_bytes_close(&b);
  sl__enum_host_destroy(h);
}

/* The state given to create is the enumerator's restored state, and a
 * restored host's gateway is open up to the restored checkpoint. */
SL_TEST(restore_from_state) {
  tenum_t e;
  tenum_init(&e, NULL);
  const char *state = "B,C|A";
  sl_enum_init_t init = {1, (const uint8_t *)state, strlen(state), 10};
  sl_enum_host_t *h = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_create("src", &g_vt, &e, &init, false, &h,
                                      &err), err);
  dlog_t l;
  memset(&l, 0, sizeof(l));
  pthread_mutex_init(&l.mu, NULL);
  sl__enum_host_attach(h, deliver, &l);
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 1);
  SL_ASSERT_EQ_STR(l.items[0], "0:assign B");
  char st[64];
  snap(h, 11, st, sizeof(st));
  SL_ASSERT_EQ_STR(st, "C|A");
  sl__enum_host_destroy(h);
}

/* A failure at enum.on_subtask_reset (the splits were taken from the
 * tracker, add_splits_back not yet called) fails the host for good: the
 * splits must not be silently dropped, so the job fails with the
 * enumerator's error. */
SL_TEST(reset_injected_failure) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  static const char *const ids[] = {"A", NULL};
  tenum_t e;
  tenum_init(&e, ids);
  dlog_t l;
  sl_enum_host_t *h = host(&e, 1, false, &l);
  SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(sl_inject_hits("enum.after_assign_before_checkpoint"), 1);
  SL_ASSERT_OK(sl_inject_arm("enum.on_subtask_reset", SL_INJECT_FAIL, 1,
                             false));
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl__enum_host_subtask_reset(h, 0, 0, &err), SL_EFAILED);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "enumerator of source 'src': cannot give splits back");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(e.n_back, 0);
  SL_ASSERT_EQ_INT(sl__enum_host_status(h, &err), SL_EFAILED);
  sl_error_destroy(err);
  sl__enum_host_destroy(h);
  sl_inject_reset();
}

/* Full ids and state lengths of assignments, for the file enumerator. */
typedef struct flog_s {
  char ids[8][4400];
  size_t state_len[8];
  uint32_t n;
} flog_t;

static void fdeliver(void *user, sl_enum_event_t *ev) {
  flog_t *l = user;
  if (ev->kind == SL_ENUM_EV_ASSIGN && l->n < 8) {
    snprintf(l->ids[l->n], sizeof(l->ids[0]), "%s", ev->id);
    l->state_len[l->n++] = ev->len;
  }
  sl__enum_event_free(ev);
}

/* The monitored file source's enumerator (public API) on a host: the
 * first listing makes every file pending in name order; splits handed
 * back with positions (a restore from a checkpoint without enumerator
 * state, which lists the readers' files) are pending once, in front, at
 * their positions; a reader that asks when nothing is pending waits for
 * the next new file. */
SL_TEST(file_enumerator) {
  char dir[4200], f[4300];
  snprintf(dir, sizeof(dir), "%s/in", sl_test_dir());
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  const char *names[] = {"b.csv", "a.csv"};
  for (int i = 0; i < 2; i++) {
    snprintf(f, sizeof(f), "%s/%s", dir, names[i]);
    FILE *fp = fopen(f, "w");
    SL_ASSERT_TRUE(fp != NULL);
    fputs("1\n", fp);
    fclose(fp);
  }
  sl_field_t fl[] = {{"x", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_schema_create(fl, 1, &schema, NULL));
  const char *paths[] = {dir};
  sl_file_source_config_t cfg = {0};
  cfg.paths = paths;
  cfg.n_paths = 1;
  cfg.schema = schema;
  cfg.monitor_interval_ms = 1000;
  const sl_source_vt_t *vt;
  void *ctx;
  SL_ASSERT_OK(sl_file_source_create(&cfg, &vt, &ctx, NULL));
  sl_enum_init_t init = {1, NULL, 0, 0};
  sl_enum_host_t *h = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_create("files", vt->enumerator, ctx, &init,
                                      false, &h, &err), err);
  static flog_t l;
  sl__enum_host_attach(h, fdeliver, &l);
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL)); /* the first listing */
  char a[4300], bpath[4300];
  snprintf(a, sizeof(a), "%s/a.csv", dir);
  snprintf(bpath, sizeof(bpath), "%s/b.csv", dir);
  uint8_t pos[24] = {7};
  sl_split_t back = {a, pos, sizeof(pos)};
  SL_ASSERT_OK(sl__enum_host_add_splits_back(h, &back, 1, NULL));
  for (int i = 0; i < 3; i++) SL_ASSERT_OK(sl__enum_host_request_split(h, 0));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 2); /* the third request waits */
  SL_ASSERT_EQ_STR(l.ids[0], a);
  SL_ASSERT_EQ_INT(l.state_len[0], 24);
  SL_ASSERT_EQ_STR(l.ids[1], bpath);
  SL_ASSERT_EQ_INT(l.state_len[1], 0);
  /* A new file goes to the waiting reader at the next listing. */
  snprintf(f, sizeof(f), "%s/c.csv", dir);
  FILE *fc = fopen(f, "w");
  SL_ASSERT_TRUE(fc != NULL);
  fclose(fc);
  SL_ASSERT_OK(sl__enum_host_discover(h));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 3);
  SL_ASSERT_EQ_STR(l.ids[2], f);
  /* The state: three seen, nothing pending. */
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__enum_host_snapshot(h, 1, &b, NULL));
  SL_ASSERT_EQ_INT(b.len, 1 + 8 + 3 * (8 + strlen(a)) + 8);
  sl_bytes_close(&b);
  sl__enum_host_destroy(h);
  vt->destroy(ctx);
  sl_schema_unref(schema);
}

/* Custom events of a reader reach the enumerator in order, on its thread,
 * and its answers reach that reader in order; an oversized event is
 * refused. */
SL_TEST(reader_events_in_order) {
  tenum_t e;
  tenum_init(&e, NULL);
  dlog_t l;
  sl_enum_host_t *h = host(&e, 2, true, &l);
  SL_ASSERT_OK(sl__enum_host_reader_event(h, 1, (const uint8_t *)"x", 1));
  SL_ASSERT_OK(sl__enum_host_reader_event(h, 0, (const uint8_t *)"y", 1));
  SL_ASSERT_OK(sl__enum_host_reader_event(h, 1, (const uint8_t *)"z", 1));
  wait_handled(&e, 3);
  SL_ASSERT_EQ_INT(dlog_n(&l), 3);
  SL_ASSERT_EQ_STR(l.items[0], "1:echo:x");
  SL_ASSERT_EQ_STR(l.items[1], "0:echo:y");
  SL_ASSERT_EQ_STR(l.items[2], "1:echo:z");
  static uint8_t big[(1u << 20) + 1];
  SL_ASSERT_EQ_INT(sl__enum_host_reader_event(h, 0, big, sizeof(big)),
                   SL_EINVAL);
  SL_ASSERT_EQ_INT(sl__enum_host_reader_event(h, 2, big, 1), SL_EINVAL);
  sl__enum_host_destroy(h);
}

/* Assignments with their reader, and "no more" answers, for the
 * generator's enumerator. */
typedef struct glog_s {
  char ids[32][64];
  uint32_t subtask[32];
  size_t state_len[32];
  uint32_t n, n_no_more;
} glog_t;

static void gdeliver(void *user, sl_enum_event_t *ev) {
  glog_t *l = user;
  if (ev->kind == SL_ENUM_EV_ASSIGN && l->n < 32) {
    snprintf(l->ids[l->n], sizeof(l->ids[0]), "%s", ev->id);
    l->subtask[l->n] = ev->subtask;
    l->state_len[l->n++] = ev->len;
  } else if (ev->kind == SL_ENUM_EV_NO_MORE) {
    l->n_no_more++;
  }
  sl__enum_event_free(ev);
}

/* The generator's enumerator (public API) on a host: discovery hands
 * split s to reader s % p at once; a request is answered "no more"; a
 * split handed back goes to the same reader with its position (through
 * the gateway, after that reader's snapshot for 1); its state
 * names pending splits by id, and a restore whose state or readers name a
 * split of another configuration fails naming split, source and
 * checkpoint. */
SL_TEST(generator_enumerator) {
  sl_gen_config_t gc;
  sl_gen_config_init(&gc);
  gc.seed = 7;
  gc.count = 800;
  gc.splits = 4;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&gc, &vt, &ctx, &schema, NULL));
  SL_ASSERT_TRUE(vt->enumerator != NULL && vt->plan == NULL);
  sl_enum_init_t init = {2, NULL, 0, 0, "gen", NULL, 0};
  sl_enum_host_t *h = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_create("gen", vt->enumerator, ctx, &init,
                                      false, &h, &err), err);
  static glog_t l;
  sl__enum_host_attach(h, gdeliver, &l);
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL)); /* discovery */
  SL_ASSERT_EQ_INT(l.n, 4);
  for (uint32_t s = 0; s < 4; s++) {
    char want[64];
    snprintf(want, sizeof(want), "seed=7/split=%u/4", s);
    SL_ASSERT_EQ_STR(l.ids[s], want);
    SL_ASSERT_EQ_INT(l.subtask[s], s % 2);
    SL_ASSERT_EQ_INT(l.state_len[s], 0);
  }
  SL_ASSERT_OK(sl__enum_host_request_split(h, 1));
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL));
  SL_ASSERT_EQ_INT(l.n, 4);
  SL_ASSERT_EQ_INT(l.n_no_more, 1);
  /* Nothing pending: the state is the version and a count of 0. */
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__enum_host_snapshot(h, 1, &b, NULL));
  SL_ASSERT_EQ_INT(b.len, 9);
  sl_bytes_close(&b);
  uint8_t pos[8] = {5};
  sl_split_t back = {"seed=7/split=3/4", pos, sizeof(pos)};
  SL_ASSERT_OK(sl__enum_host_add_splits_back(h, &back, 1, NULL));
  SL_ASSERT_EQ_INT(l.n, 4); /* held: reader 1 has not taken 1 yet */
  sl__enum_host_reader_snapshot(h, 1, 1);
  SL_ASSERT_EQ_INT(l.n, 5);
  SL_ASSERT_EQ_STR(l.ids[4], "seed=7/split=3/4");
  SL_ASSERT_EQ_INT(l.subtask[4], 1);
  SL_ASSERT_EQ_INT(l.state_len[4], 8);
  sl__enum_host_destroy(h);
  /* A state with a pending split round trips through create. */
  static const uint8_t state[] = {
      1, 1, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0,
      's', 'e', 'e', 'd', '=', '7', '/', 's', 'p', 'l', 'i', 't', '=', '2',
      '/', '4', 0, 0, 0, 0, 0, 0, 0, 0};
  const sl_enum_vt_t *evt = vt->enumerator;
  sl_enum_init_t ri = {2, state, sizeof(state), 12, "gen", NULL, 0};
  void *en = NULL;
  SL_ASSERT_OK_E(evt->create(ctx, &ri, &en, &err), err);
  sl_bytes_init(&b);
  SL_ASSERT_OK(evt->snapshot(en, 13, &b));
  SL_ASSERT_EQ_INT(b.len, sizeof(state));
  SL_ASSERT_TRUE(memcmp(b.data, state, sizeof(state)) == 0);
  sl_bytes_close(&b);
  evt->close(en);
  /* Another split count in a reader's split, or a corrupt state. */
  sl_split_t held = {"seed=7/split=5/8", pos, sizeof(pos)};
  sl_enum_init_t bad = {2, NULL, 0, 12, "gen", &held, 1};
  SL_ASSERT_EQ_INT(evt->create(ctx, &bad, &en, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "checkpoint 12 holds a position of split "
                   "'seed=7/split=5/8' of source 'gen', which the source no "
                   "longer has (4 splits now; a file removed or renamed, "
                   "another generator seed or split count?); its remaining "
                   "records would be lost");
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  sl_error_destroy(err);
  err = NULL;
  sl_enum_init_t cut = {2, state, sizeof(state) - 1, 12, "gen", NULL, 0};
  SL_ASSERT_EQ_INT(evt->create(ctx, &cut, &en, &err), SL_ECORRUPT);
  SL_ASSERT_EQ_STR(sl_error_message(err), "the generator enumerator's state "
                   "in checkpoint 12 is corrupt");
  sl_error_destroy(err);
  vt->destroy(ctx);
  sl_schema_unref(schema);
}

/* G4: checkpoint 1 is aborted before the enumerator thread takes its
 * snapshot for 1 (a task finished while the coordinator was triggering
 * it).  That snapshot must not close the gateway: no reader will take 1,
 * and a split assigned afterwards would be held for good. */
SL_TEST(abort_before_the_snapshot_keeps_the_gateway_open) {
  sl_gen_config_t gc;
  sl_gen_config_init(&gc);
  gc.count = 800;
  gc.splits = 4;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&gc, &vt, &ctx, &schema, NULL));
  sl_enum_init_t init = {2, NULL, 0, 0, "gen", NULL, 0};
  sl_enum_host_t *h = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__enum_host_create("gen", vt->enumerator, ctx, &init,
                                      false, &h, &err), err);
  static glog_t l;
  sl__enum_host_attach(h, gdeliver, &l);
  SL_ASSERT_OK(sl__enum_host_run_pending(h, NULL)); /* discovery */
  SL_ASSERT_EQ_INT(l.n, 4);
  sl__enum_host_checkpoint_aborted(h, 1);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__enum_host_snapshot(h, 1, &b, NULL));
  sl_bytes_close(&b);
  uint8_t pos[8] = {5};
  sl_split_t back = {"seed=1/split=1/4", pos, sizeof(pos)};
  SL_ASSERT_OK(sl__enum_host_add_splits_back(h, &back, 1, NULL));
  SL_ASSERT_EQ_INT(l.n, 5); /* delivered: the gateway is open */
  SL_ASSERT_EQ_STR(l.ids[4], "seed=1/split=1/4");
  sl__enum_host_destroy(h);
  vt->destroy(ctx);
  sl_schema_unref(schema);
}
