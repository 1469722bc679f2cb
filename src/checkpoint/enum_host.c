/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The enumerator host: runs one source's split enumerator on its own
 * thread in the coordinator (never in a task), and keeps the two rules
 * that hold the enumerator's state and the readers' states together: the
 * assignment tracker (enum_tracker.c) and the event gateway (here).  See
 * README.md, "Enumerators".
 *
 * DESIGN NOTES
 *
 * Thread.  Every enumerator callback runs on the host's thread, one at a
 * time, in the order the messages arrived (its inbox is FIFO).  Readers
 * post requests, finished splits and events without waiting; the
 * coordinator's calls (snapshot, reset, completion) wait until the thread
 * has handled them, so a snapshot for N follows every message posted
 * before it.  The sl_enum_* calls of the public API are made by the
 * enumerator from inside its callbacks, hence on that thread too.
 *
 * Gateway.  Per reader subtask s it knows reader_taken[s], the newest
 * checkpoint s has snapshotted (or was reset to), and globally enum_snap,
 * the newest enumerator snapshot.  Every event to a reader (an assignment,
 * a custom event, "no more splits") is stamped with enum_snap when sent:
 *
 *      enumerator snapshot N        reader s snapshot N
 *   ------------|-----------------------|------------------> time
 *      open     |  closed for s: events |  open again: the held events
 *               |  sent here are held   |  are delivered, in order
 *
 * G1. An event passes to s only when its stamp <= reader_taken[s] and no
 *     earlier event for s is still held (order per reader is kept).
 * G2. An event that passed before the reader's snapshot for N is in the
 *     reader's mailbox before it snapshots N (the reader drains its
 *     mailbox between the trigger and the snapshot), so the reader's
 *     state for N holds its effect; one held past it is in neither the
 *     reader's state for N nor (being after it) the enumerator's.
 * G3. A checkpoint that aborts reopens the gateway for it; a reset of s
 *     drops the events held for s and sets reader_taken[s] to enum_snap
 *     (the checkpoints pending at the reset will never hold the new
 *     reader's snapshot).
 * G4. A snapshot for N that the enumerator thread reaches after N was
 *     aborted (a task finished while the coordinator was triggering N),
 *     or after its caller gave up waiting, is not taken and does not
 *     close the gateway: no reader will ever take N, so events stamped N
 *     would be held for good.
 *
 * Failure.  The first error of a callback makes the host FAILED (sticky):
 * later messages are dropped, and the job fails with that error.  The
 * readers learn it from the status when their tasks run; since a reader
 * waiting for an assignment does not run until it is woken, the host
 * wakes them through on_fail when it fails (else the job would hang).
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "checkpoint/enum_host.h"
#include "core/inject.h"

#define EVENT_MAX (1u << 20)
#define SPLIT_ID_MAX 4096u

typedef enum msg_kind_e {
  M_REQUEST = 1,
  M_FINISHED,
  M_EVENT,
  M_ADD_READER,
  M_DISCOVER,
  M_BACK,
  M_RESET,
  M_SNAPSHOT,
  M_COMPLETE
} msg_kind_t;

typedef struct msg_s {
  msg_kind_t kind;
  uint32_t subtask;
  uint64_t id;
  char *str;
  uint8_t *data;
  size_t len;
  sl_split_t *splits; /* M_BACK: owned copies */
  uint32_t n_splits;
  /* Synchronous messages: the caller waits for is_done, or gives up at
   * its deadline (is_abandoned, under the lock): then the thread frees
   * the message when it is done with it. */
  bool is_sync;
  bool is_done;
  bool is_abandoned;
  int rc;
  sl_error_t *err;
  sl_bytes_t out; /* M_SNAPSHOT: the state, owned until the caller takes
                     it */
  struct msg_s *next;
} msg_t;

struct sl_enum_ctx_s {
  sl_enum_host_t *h;
};

struct sl_enum_host_s {
  /* Immutable after create. */
  char *uid;
  const sl_enum_vt_t *vt;
  void *en;
  uint32_t parallelism;
  sl_enum_ctx_t ec;
  bool has_thread;
  pthread_t thread;
  /* The enumerator thread's (or, without one, the caller's) own. */
  int64_t discovery_ms;
  bool has_discovered;
  /* Protected by lock. */
  pthread_mutex_t lock;
  pthread_cond_t cond;      /* the thread's inbox */
  pthread_cond_t done_cond; /* synchronous callers */
  msg_t *head, *tail;
  bool is_stopping;
  sl_enum_tracker_t tr;
  uint64_t enum_snap;
  uint64_t horizon;         /* newest completed checkpoint it was told of */
  uint64_t *reader_taken;   /* per subtask */
  sl_enum_event_t *held, *held_tail;
  sl_enum_deliver_fn deliver;
  void *user;
  sl_enum_fail_fn on_fail;  /* wakes the readers (sl__enum_host_on_fail) */
  void *fail_user;
  int fail_rc;              /* sticky */
  char *fail_msg;
  bool is_fail_fatal;
  uint64_t interrupts;      /* bumped by sl__enum_host_interrupt */
  uint64_t max_aborted;     /* the newest checkpoint aborted (G4) */
};

static int64_t mono_ns(void) { return sl__clock_monotonic_ns(); }


static void msg_free(msg_t *m) {
  sl_bytes_close(&m->out);
  sl_free(m->str);
  sl_free(m->data);
  for (uint32_t i = 0; i < m->n_splits; i++) {
    sl_free((void *)m->splits[i].id);
    sl_free((void *)m->splits[i].state);
  }
  sl_free(m->splits);
  sl_error_destroy(m->err);
  sl_free(m);
}

/* ------------------------------------------------------------------ */
/* Gateway (called with the lock held). */

static bool can_pass_locked(const sl_enum_host_t *h, const sl_enum_event_t *e) {
  return h->deliver != NULL && e->epoch <= h->reader_taken[e->subtask];
}

/* Deliver the held events that may pass now, keeping each reader's order
 * (G1): an event stays when an earlier one of its reader stays. */
static void release_locked(sl_enum_host_t *h) {
  uint8_t *blocked = sl_calloc(h->parallelism + 1, 1);
  sl_enum_event_t **pp = &h->held;
  h->held_tail = NULL;
  while (*pp) {
    sl_enum_event_t *e = *pp;
    bool is_blocked = blocked ? blocked[e->subtask] != 0 : true;
    if (!is_blocked && can_pass_locked(h, e)) {
      *pp = e->next;
      e->next = NULL;
      h->deliver(h->user, e);
      continue;
    }
    if (blocked) blocked[e->subtask] = 1;
    h->held_tail = e;
    pp = &e->next;
  }
  sl_free(blocked);
}

static void send_locked(sl_enum_host_t *h, sl_enum_event_t *e) {
  e->epoch = h->enum_snap;
  bool has_earlier = false;
  for (sl_enum_event_t *x = h->held; x && !has_earlier; x = x->next)
    has_earlier = x->subtask == e->subtask;
  if (!has_earlier && can_pass_locked(h, e)) {
    h->deliver(h->user, e);
    return;
  }
  e->next = NULL;
  if (h->held_tail) h->held_tail->next = e;
  else h->held = e;
  h->held_tail = e;
}

static void drop_held_locked(sl_enum_host_t *h, uint32_t subtask) {
  sl_enum_event_t **pp = &h->held;
  h->held_tail = NULL;
  while (*pp) {
    sl_enum_event_t *e = *pp;
    if (e->subtask == subtask) {
      *pp = e->next;
      sl__enum_event_free(e);
      continue;
    }
    h->held_tail = e;
    pp = &e->next;
  }
}

/* ------------------------------------------------------------------ */
/* The public calls of an enumerator (its thread, inside a callback). */

static int new_event(sl_enum_ctx_t *ec, uint32_t subtask,
                     sl_enum_ev_kind_t kind, const char *id,
                     const uint8_t *data, size_t len,
                     sl_enum_event_t **out) {
  if (subtask >= ec->h->parallelism) return SL_EINVAL;
  sl_enum_event_t *e = sl_calloc(1, sizeof(*e));
  if (e == NULL) return SL_ENOMEM;
  e->kind = kind;
  e->subtask = subtask;
  if (id && (e->id = sl_strdup(id)) == NULL) goto nomem;
  if (len) {
    if ((e->data = sl_malloc(len)) == NULL) goto nomem;
    memcpy(e->data, data, len);
    e->len = len;
  }
  *out = e;
  return SL_OK;
nomem:
  sl__enum_event_free(e);
  return SL_ENOMEM;
}

int sl_enum_assign(sl_enum_ctx_t *ec, uint32_t subtask,
                   const sl_split_t *split) {
  size_t n = split && split->id ? strlen(split->id) : 0;
  if (n == 0 || n > SPLIT_ID_MAX) return SL_EINVAL;
  sl_enum_event_t *e;
  int rc = new_event(ec, subtask, SL_ENUM_EV_ASSIGN, split->id, split->state,
                     split->state ? split->state_len : 0, &e);
  if (rc != SL_OK) return rc;
  sl_enum_host_t *h = ec->h;
  pthread_mutex_lock(&h->lock);
  rc = sl__enum_tracker_record(&h->tr, subtask, split);
  if (rc == SL_OK) send_locked(h, e);
  pthread_mutex_unlock(&h->lock);
  if (rc != SL_OK) {
    sl__enum_event_free(e);
    return rc;
  }
  return SL_INJECT("enum.after_assign_before_checkpoint");
}

int sl_enum_signal_no_more_splits(sl_enum_ctx_t *ec, uint32_t subtask) {
  sl_enum_event_t *e;
  int rc = new_event(ec, subtask, SL_ENUM_EV_NO_MORE, NULL, NULL, 0, &e);
  if (rc != SL_OK) return rc;
  pthread_mutex_lock(&ec->h->lock);
  send_locked(ec->h, e);
  pthread_mutex_unlock(&ec->h->lock);
  return SL_OK;
}

int sl_enum_send_event(sl_enum_ctx_t *ec, uint32_t subtask,
                       const uint8_t *event, size_t len) {
  if (len > EVENT_MAX || (len && event == NULL)) return SL_EINVAL;
  sl_enum_event_t *e;
  int rc = new_event(ec, subtask, SL_ENUM_EV_CUSTOM, NULL, event, len, &e);
  if (rc != SL_OK) return rc;
  pthread_mutex_lock(&ec->h->lock);
  send_locked(ec->h, e);
  pthread_mutex_unlock(&ec->h->lock);
  return SL_OK;
}

uint32_t sl_enum_parallelism(const sl_enum_ctx_t *ec) {
  return ec->h->parallelism;
}

void sl_enum_set_discovery_interval(sl_enum_ctx_t *ec, int64_t interval_ms) {
  ec->h->discovery_ms = interval_ms > 0 ? interval_ms : 0;
}

/* ------------------------------------------------------------------ */
/* Handling messages (the enumerator thread, lock not held). */

static void fail(sl_enum_host_t *h, int rc, sl_error_t *err) {
  pthread_mutex_lock(&h->lock);
  if (h->fail_rc == SL_OK) {
    h->fail_rc = rc;
    h->is_fail_fatal = sl_error_is_fatal(err);
    h->fail_msg = sl_strdup(err ? sl_error_message(err) : sl_strerror(rc));
    if (h->on_fail) h->on_fail(h->fail_user); /* the readers fail now */
  }
  pthread_mutex_unlock(&h->lock);
}

static int handle(sl_enum_host_t *h, msg_t *m, sl_error_t **out_err) {
  const sl_enum_vt_t *vt = h->vt;
  sl_enum_ctx_t *ec = &h->ec;
  switch (m->kind) {
  case M_REQUEST:
    return vt->handle_split_request
               ? vt->handle_split_request(h->en, ec, m->subtask, out_err)
               : SL_OK;
  case M_FINISHED:
    return vt->handle_split_finished
               ? vt->handle_split_finished(h->en, ec, m->subtask, m->str,
                                           out_err)
               : SL_OK;
  case M_EVENT:
    return vt->handle_reader_event
               ? vt->handle_reader_event(h->en, ec, m->subtask, m->data,
                                         m->len, out_err)
               : SL_OK;
  case M_ADD_READER:
    return vt->add_reader ? vt->add_reader(h->en, ec, m->subtask, out_err)
                          : SL_OK;
  case M_DISCOVER:
    return vt->discover ? vt->discover(h->en, ec, out_err) : SL_OK;
  case M_BACK:
    return m->n_splits ? vt->add_splits_back(h->en, ec, UINT32_MAX,
                                             m->splits, m->n_splits, out_err)
                       : SL_OK;
  case M_RESET: {
    sl_enum_assignment_t *a = NULL;
    uint32_t n = 0;
    pthread_mutex_lock(&h->lock);
    int rc = sl__enum_tracker_take_uncovered(&h->tr, m->subtask, m->id, &a,
                                             &n);
    if (rc == SL_OK) {
      drop_held_locked(h, m->subtask);
      h->reader_taken[m->subtask] = h->enum_snap; /* G3 */
    }
    pthread_mutex_unlock(&h->lock);
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
    if (rc == SL_OK) rc = SL_INJECT("enum.on_subtask_reset");
    sl_split_t *s = sl_calloc(n + 1, sizeof(*s));
    if (rc == SL_OK && s == NULL) rc = SL_ENOMEM;
    for (uint32_t i = 0; rc == SL_OK && i < n; i++) {
      s[i].id = a[i].id;
      s[i].state = a[i].state;
      s[i].state_len = a[i].state_len;
    }
    if (rc == SL_OK && n > 0)
      rc = vt->add_splits_back(h->en, ec, m->subtask, s, n, out_err);
    else if (rc != SL_OK)
      sl_error_set(out_err, rc, "cannot give splits back");
    if (rc == SL_OK && vt->reset_reader)
      rc = vt->reset_reader(h->en, ec, m->subtask, m->id, out_err);
    sl_free(s);
    sl__enum_tracker_free_list(a, n);
    return rc;
  }
  case M_SNAPSHOT: {
    pthread_mutex_lock(&h->lock);
    /* A caller that gave up before the thread got here, or a checkpoint
     * aborted before (G4): no snapshot, and the gateway stays open. */
    bool is_abandoned = m->is_abandoned || m->id <= h->max_aborted;
    if (!is_abandoned) {
      sl__enum_tracker_on_checkpoint(&h->tr, m->id);
      if (m->id > h->enum_snap) h->enum_snap = m->id; /* the gateway closes */
    }
    pthread_mutex_unlock(&h->lock);
    if (is_abandoned) return SL_OK;
    int rc = SL_INJECT("enum.before_snapshot");
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "injected failure before the "
                          "snapshot for checkpoint %llu",
                          (unsigned long long)m->id);
    return vt->snapshot(h->en, m->id, &m->out);
  }
  case M_COMPLETE:
    pthread_mutex_lock(&h->lock);
    sl__enum_tracker_on_complete(&h->tr, m->id);
    pthread_mutex_unlock(&h->lock);
    if (vt->checkpoint_complete) vt->checkpoint_complete(h->en, m->id);
    return SL_OK;
  }
  return SL_OK;
}

/* Handle m and finish it: a synchronous caller is told, others freed. */
static void run_msg(sl_enum_host_t *h, msg_t *m) {
  sl_error_t *err = NULL;
  pthread_mutex_lock(&h->lock);
  int failed = h->fail_rc;
  pthread_mutex_unlock(&h->lock);
  int rc = failed;
  if (failed == SL_OK) {
    rc = handle(h, m, &err);
    if (rc != SL_OK) {
      if (err == NULL) err = sl_error_create(rc, "%s", sl_strerror(rc));
      sl_error_prefix(err, "enumerator of source '%s'", h->uid);
      fail(h, rc, err);
    }
  }
  if (!m->is_sync) {
    sl_error_destroy(err);
    msg_free(m);
    return;
  }
  pthread_mutex_lock(&h->lock);
  bool is_abandoned = m->is_abandoned;
  m->rc = rc;
  m->err = err;
  if (rc != SL_OK && err == NULL)
    m->err = sl_error_create(rc, "enumerator of source '%s' failed: %s",
                             h->uid, h->fail_msg ? h->fail_msg : "");
  m->is_done = true;
  pthread_cond_broadcast(&h->done_cond);
  pthread_mutex_unlock(&h->lock);
  if (is_abandoned) msg_free(m); /* its caller is gone */
}

static msg_t *pop_locked(sl_enum_host_t *h) {
  msg_t *m = h->head;
  if (m) {
    h->head = m->next;
    if (h->head == NULL) h->tail = NULL;
    m->next = NULL;
  }
  return m;
}

static msg_t *msg_new(msg_kind_t kind, uint32_t subtask, uint64_t id);

/* Discovery, on the enumerator thread (or the caller without one). */
static void discover(sl_enum_host_t *h) {
  h->has_discovered = true;
  msg_t *d = msg_new(M_DISCOVER, 0, 0);
  if (d) run_msg(h, d);
  else fail(h, SL_ENOMEM, NULL);
}

static void *host_main(void *arg) {
  sl_enum_host_t *h = arg;
  discover(h);
  int64_t next = h->discovery_ms ? mono_ns() + h->discovery_ms * 1000000ll
                                 : INT64_MAX;
  pthread_mutex_lock(&h->lock);
  while (!h->is_stopping) {
    msg_t *m = pop_locked(h);
    if (m) {
      pthread_mutex_unlock(&h->lock);
      run_msg(h, m);
      pthread_mutex_lock(&h->lock);
      continue;
    }
    int64_t now = mono_ns();
    if (h->discovery_ms && now >= next) {
      pthread_mutex_unlock(&h->lock);
      discover(h);
      next = h->discovery_ms ? mono_ns() + h->discovery_ms * 1000000ll
                             : INT64_MAX;
      pthread_mutex_lock(&h->lock);
      continue;
    }
    if (h->discovery_ms && next == INT64_MAX)
      next = now + h->discovery_ms * 1000000ll;
    if (next == INT64_MAX || !h->discovery_ms) {
      pthread_cond_wait(&h->cond, &h->lock);
    } else {
      struct timespec ts = {(time_t)(next / 1000000000),
                            (long)(next % 1000000000)};
      pthread_cond_timedwait(&h->cond, &h->lock, &ts);
    }
  }
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

static int post(sl_enum_host_t *h, msg_t *m) {
  pthread_mutex_lock(&h->lock);
  m->next = NULL;
  if (h->tail) h->tail->next = m;
  else h->head = m;
  h->tail = m;
  pthread_cond_signal(&h->cond);
  pthread_mutex_unlock(&h->lock);
  return SL_OK;
}

int sl__enum_host_run_pending(sl_enum_host_t *h, sl_error_t **out_err) {
  SL_ASSERT(!h->has_thread);
  if (!h->has_discovered) discover(h);
  for (;;) {
    pthread_mutex_lock(&h->lock);
    msg_t *m = pop_locked(h);
    pthread_mutex_unlock(&h->lock);
    if (m == NULL) break;
    run_msg(h, m);
  }
  return sl__enum_host_status(h, out_err);
}

/*
 * Post m and wait until it was handled, or until deadline_ns (monotonic;
 * INT64_MAX: no deadline) or an interrupt: then m is abandoned to the
 * thread, which frees it, and the call fails with SL_ECANCELED and
 * *out_late set to 1 (deadline) or 2 (interrupt).  Returns m's result; *out_snapshot (if given) takes the
 * bytes m->out collected.
 */
static int call_sync_until(sl_enum_host_t *h, msg_t *m, int64_t deadline_ns,
                           sl_bytes_t *out_snapshot, int *out_late,
                           sl_error_t **out_err) {
  m->is_sync = true;
  post(h, m);
  if (!h->has_thread) sl__enum_host_run_pending(h, NULL);
  pthread_mutex_lock(&h->lock);
  uint64_t interrupts = h->interrupts;
  bool is_late = false;
  while (!m->is_done && !is_late) {
    if (h->interrupts != interrupts) {
      is_late = true;
    } else if (deadline_ns == INT64_MAX) {
      pthread_cond_wait(&h->done_cond, &h->lock);
    } else {
      struct timespec ts = {(time_t)(deadline_ns / 1000000000),
                            (long)(deadline_ns % 1000000000)};
      if (pthread_cond_timedwait(&h->done_cond, &h->lock, &ts) ==
              ETIMEDOUT &&
          !m->is_done)
        is_late = true;
    }
  }
  if (is_late) {
    m->is_abandoned = true; /* run_msg frees it */
    if (out_late) *out_late = h->interrupts != interrupts ? 2 : 1;
    pthread_mutex_unlock(&h->lock);
    return sl_error_set(out_err, SL_ECANCELED, "the enumerator did not "
                        "answer in time");
  }
  pthread_mutex_unlock(&h->lock);
  if (out_snapshot && m->rc == SL_OK) {
    *out_snapshot = m->out; /* moved */
    sl_bytes_init(&m->out);
  }
  int rc = m->rc;
  if (rc != SL_OK && out_err && *out_err == NULL) {
    *out_err = m->err;
    m->err = NULL;
  }
  msg_free(m);
  return rc;
}

static int call_sync(sl_enum_host_t *h, msg_t *m, sl_error_t **out_err) {
  return call_sync_until(h, m, INT64_MAX, NULL, NULL, out_err);
}

static msg_t *msg_new(msg_kind_t kind, uint32_t subtask, uint64_t id) {
  msg_t *m = sl_calloc(1, sizeof(*m));
  if (m) {
    m->kind = kind;
    m->subtask = subtask;
    m->id = id;
  }
  return m;
}

/* ------------------------------------------------------------------ */

/* Does msg name source uid ("source '<uid>'")? */
static bool names_source(const char *msg, const char *uid) {
  size_t n = strlen(uid);
  for (const char *p = msg; (p = strstr(p, "source '")) != NULL; p++)
    if (strncmp(p + 8, uid, n) == 0 && p[8 + n] == '\'') return true;
  return false;
}

int sl__enum_host_create(const char *uid, const sl_enum_vt_t *vt,
                         void *src_ctx, const sl_enum_init_t *init,
                         bool has_thread, sl_enum_host_t **out,
                         sl_error_t **out_err) {
  if (vt->create == NULL || vt->snapshot == NULL ||
      vt->add_splits_back == NULL || vt->close == NULL)
    return sl_error_set(out_err, SL_EINVAL, "the enumerator of source '%s' "
                        "lacks create, snapshot, add_splits_back or close",
                        uid);
  if (init->parallelism == 0)
    return sl_error_set(out_err, SL_EINVAL, "source '%s': parallelism 0",
                        uid);
  sl_enum_host_t *h = sl_calloc(1, sizeof(*h));
  if (h == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  h->uid = sl_strdup(uid);
  h->reader_taken = sl_calloc(init->parallelism, sizeof(uint64_t));
  if (h->uid == NULL || h->reader_taken == NULL) {
    sl_free(h->uid);
    sl_free(h->reader_taken);
    sl_free(h);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  h->vt = vt;
  h->parallelism = init->parallelism;
  h->ec.h = h;
  h->enum_snap = init->restored_checkpoint_id;
  h->horizon = init->restored_checkpoint_id;
  for (uint32_t i = 0; i < init->parallelism; i++)
    h->reader_taken[i] = init->restored_checkpoint_id;
  pthread_mutex_init(&h->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cond, &ca);
  pthread_cond_init(&h->done_cond, &ca);
  pthread_condattr_destroy(&ca);
  sl_error_t *err = NULL;
  int rc = vt->create(src_ctx, init, &h->en, &err);
  if (rc != SL_OK) {
    h->en = NULL;
    sl__enum_host_destroy(h);
    /* A message that names the source already (a restore check) is
     * not prefixed with it again. */
    if (err && !names_source(sl_error_message(err), uid))
      sl_error_prefix(err, "source '%s'", uid);
    else if (err == NULL)
      err = sl_error_create(rc, "source '%s': cannot create its "
                               "enumerator: %s", uid, sl_strerror(rc));
    if (out_err && *out_err == NULL) *out_err = err;
    else sl_error_destroy(err);
    return rc;
  }
  if (has_thread) {
    int e = pthread_create(&h->thread, NULL, host_main, h);
    if (e != 0) {
      sl__enum_host_destroy(h);
      return sl_error_set(out_err, -e, "cannot start the enumerator thread "
                          "of source '%s': %s", uid, strerror(e));
    }
    h->has_thread = true;
  }
  *out = h;
  return SL_OK;
}

void sl__enum_host_destroy(sl_enum_host_t *h) {
  if (h == NULL) return;
  if (h->has_thread) {
    pthread_mutex_lock(&h->lock);
    h->is_stopping = true;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
  }
  /* Left in the queue when the thread stopped: asynchronous messages, and
   * synchronous ones whose caller gave up (a trigger interrupted when its
   * attempt ended, or past the checkpoint timeout): nobody waits for
   * either.  A synchronous message with a waiter cannot be here: callers
   * end before the host is destroyed. */
  pthread_mutex_lock(&h->lock);
  for (msg_t *m = h->head, *n; m; m = n) {
    n = m->next;
    SL_ASSERT(!m->is_sync || m->is_abandoned);
    msg_free(m);
  }
  h->head = h->tail = NULL;
  pthread_mutex_unlock(&h->lock);
  if (h->en) h->vt->close(h->en);
  for (sl_enum_event_t *e = h->held, *n; e; e = n) {
    n = e->next;
    sl__enum_event_free(e);
  }
  sl__enum_tracker_close(&h->tr);
  pthread_mutex_destroy(&h->lock);
  pthread_cond_destroy(&h->cond);
  pthread_cond_destroy(&h->done_cond);
  sl_free(h->fail_msg);
  sl_free(h->reader_taken);
  sl_free(h->uid);
  sl_free(h);
}

void sl__enum_host_attach(sl_enum_host_t *h, sl_enum_deliver_fn deliver,
                          void *user) {
  pthread_mutex_lock(&h->lock);
  h->deliver = deliver;
  h->user = user;
  if (deliver) release_locked(h);
  pthread_mutex_unlock(&h->lock);
}

void sl__enum_host_on_fail(sl_enum_host_t *h, sl_enum_fail_fn on_fail,
                           void *user) {
  pthread_mutex_lock(&h->lock);
  h->on_fail = on_fail;
  h->fail_user = user;
  if (on_fail && h->fail_rc != SL_OK) on_fail(user);
  pthread_mutex_unlock(&h->lock);
}

int sl__enum_host_status(sl_enum_host_t *h, sl_error_t **out_err) {
  pthread_mutex_lock(&h->lock);
  int rc = h->fail_rc;
  if (rc != SL_OK && out_err && *out_err == NULL) {
    *out_err = sl_error_create(rc, "%s", h->fail_msg ? h->fail_msg : "");
    if (h->is_fail_fatal) sl__error_fatal(out_err, rc);
  }
  pthread_mutex_unlock(&h->lock);
  return rc;
}

int sl__enum_host_snapshot(sl_enum_host_t *h, uint64_t id, sl_bytes_t *out,
                           sl_error_t **out_err) {
  return sl__enum_host_snapshot_until(h, id, INT64_MAX, out, out_err);
}

int sl__enum_host_snapshot_until(sl_enum_host_t *h, uint64_t id,
                                 int64_t deadline_ns, sl_bytes_t *out,
                                 sl_error_t **out_err) {
  msg_t *m = msg_new(M_SNAPSHOT, 0, id);
  if (m == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl_bytes_init(&m->out);
  sl_error_t *err = NULL;
  sl_bytes_t got;
  sl_bytes_init(&got);
  int late = 0;
  int rc = call_sync_until(h, m, deadline_ns, &got, &late, &err);
  if (late) {
    /* The enumerator is stuck (or slow) in a callback: the checkpoint
     * does not wait for it forever (its abort reopens the gateway). */
    sl_error_set(out_err, rc, "the enumerator of source '%s' did not take "
                 "its snapshot for checkpoint %llu %s", h->uid,
                 (unsigned long long)id,
                 late == 2 ? "before the attempt ended"
                           : "within the checkpoint timeout");
    sl_error_destroy(err);
    return rc;
  }
  if (rc != SL_OK) {
    if (out_err && *out_err == NULL) *out_err = err;
    else sl_error_destroy(err);
    return rc;
  }
  rc = sl_bytes_append(out, got.data, got.len);
  sl_bytes_close(&got);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  /* The enumerator's state for id is taken; the sources are not yet
   * triggered for it (the caller triggers them next). */
  rc = SL_INJECT("enum.after_snapshot_before_trigger");
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "injected failure after the "
                        "enumerator snapshot of source '%s'", h->uid);
  return SL_OK;
}

void sl__enum_host_interrupt(sl_enum_host_t *h) {
  pthread_mutex_lock(&h->lock);
  h->interrupts++;
  pthread_cond_broadcast(&h->done_cond);
  pthread_mutex_unlock(&h->lock);
}

void sl__enum_host_checkpoint_complete(sl_enum_host_t *h, uint64_t id) {
  pthread_mutex_lock(&h->lock);
  if (id > h->horizon) h->horizon = id;
  pthread_mutex_unlock(&h->lock);
  /* Asynchronous: the coordinator holds its lock here.  The tracker
   * forgets epochs <= id on the enumerator thread, in message order. */
  msg_t *m = msg_new(M_COMPLETE, 0, id);
  if (m) post(h, m);
}

uint64_t sl__enum_host_horizon(sl_enum_host_t *h) {
  pthread_mutex_lock(&h->lock);
  uint64_t id = h->horizon;
  pthread_mutex_unlock(&h->lock);
  return id;
}

uint32_t sl__enum_host_parallelism(const sl_enum_host_t *h) {
  return h->parallelism;
}

void sl__enum_host_checkpoint_aborted(sl_enum_host_t *h, uint64_t id) {
  pthread_mutex_lock(&h->lock);
  if (id > h->max_aborted) h->max_aborted = id; /* G4 */
  for (uint32_t i = 0; i < h->parallelism; i++) /* G3 */
    if (h->reader_taken[i] < id && id <= h->enum_snap)
      h->reader_taken[i] = id;
  release_locked(h);
  pthread_mutex_unlock(&h->lock);
}

int sl__enum_host_subtask_reset(sl_enum_host_t *h, uint32_t subtask,
                                uint64_t restored, sl_error_t **out_err) {
  if (subtask >= h->parallelism)
    return sl_error_set(out_err, SL_EINVAL, "no reader subtask %u", subtask);
  msg_t *m = msg_new(M_RESET, subtask, restored);
  if (m == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  return call_sync(h, m, out_err);
}

int sl__enum_host_add_splits_back(sl_enum_host_t *h, const sl_split_t *s,
                                  uint32_t n, sl_error_t **out_err) {
  msg_t *m = msg_new(M_BACK, UINT32_MAX, 0);
  if (m == NULL || (m->splits = sl_calloc(n + 1, sizeof(sl_split_t))) == NULL)
    goto nomem;
  for (uint32_t i = 0; i < n; i++) {
    sl_split_t *d = &m->splits[m->n_splits];
    if ((d->id = sl_strdup(s[i].id)) == NULL) goto nomem;
    m->n_splits++;
    if (s[i].state_len) {
      uint8_t *p = sl_malloc(s[i].state_len);
      if (p == NULL) goto nomem;
      memcpy(p, s[i].state, s[i].state_len);
      d->state = p;
      d->state_len = s[i].state_len;
    }
  }
  return call_sync(h, m, out_err);
nomem:
  if (m) msg_free(m);
  return sl_error_set(out_err, SL_ENOMEM, "out of memory");
}

void sl__enum_host_reader_snapshot(sl_enum_host_t *h, uint32_t subtask,
                                   uint64_t id) {
  if (subtask >= h->parallelism) return;
  pthread_mutex_lock(&h->lock);
  if (id > h->reader_taken[subtask]) h->reader_taken[subtask] = id;
  release_locked(h);
  pthread_mutex_unlock(&h->lock);
}

static int post_new(sl_enum_host_t *h, msg_kind_t kind, uint32_t subtask,
                    const char *str, const uint8_t *data, size_t len) {
  if (subtask >= h->parallelism) return SL_EINVAL;
  msg_t *m = msg_new(kind, subtask, 0);
  if (m == NULL) return SL_ENOMEM;
  if (str && (m->str = sl_strdup(str)) == NULL) goto nomem;
  if (len) {
    if ((m->data = sl_malloc(len)) == NULL) goto nomem;
    memcpy(m->data, data, len);
    m->len = len;
  }
  return post(h, m);
nomem:
  msg_free(m);
  return SL_ENOMEM;
}

int sl__enum_host_discover(sl_enum_host_t *h) {
  msg_t *m = msg_new(M_DISCOVER, 0, 0);
  return m ? post(h, m) : SL_ENOMEM;
}

int sl__enum_host_add_reader(sl_enum_host_t *h, uint32_t subtask) {
  return post_new(h, M_ADD_READER, subtask, NULL, NULL, 0);
}

int sl__enum_host_request_split(sl_enum_host_t *h, uint32_t subtask) {
  return post_new(h, M_REQUEST, subtask, NULL, NULL, 0);
}

int sl__enum_host_split_finished(sl_enum_host_t *h, uint32_t subtask,
                                 const char *id) {
  return post_new(h, M_FINISHED, subtask, id, NULL, 0);
}

int sl__enum_host_reader_event(sl_enum_host_t *h, uint32_t subtask,
                               const uint8_t *ev, size_t len) {
  if (len > EVENT_MAX) return SL_EINVAL;
  return post_new(h, M_EVENT, subtask, NULL, ev, len);
}
