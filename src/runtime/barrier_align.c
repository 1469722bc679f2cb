/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint barriers in a task: completion and abort notifications,
 * source triggers, aligned barriers (blocking inputs until every input
 * delivered the barrier), priority barriers and the capture of in-flight
 * records of unaligned checkpoints, and the switch from aligned to
 * unaligned when the alignment timeout passes.  The run loop (task.c)
 * calls in here between records; the snapshot itself is taken through
 * sl_ckpt_hooks_t.  See README.md ("Checkpoint barriers").
 */
#include "core/inject.h"
#include "runtime/chanstate.h"
#include "runtime/task_int.h"

/* ------------------------------------------------------------------ */
/* Checkpoints: notifications, triggers, aligned and unaligned barriers.
 *
 * Aligned (Algorithm 1 of Carbone et al.): a barrier blocks its input until
 * every input delivered it; then the task snapshots, forwards the barrier
 * in band and unblocks.  At-least-once counts barriers without blocking.
 *
 * Unaligned: barriers overtake the queues.  A task that takes an unaligned
 * snapshot sends, on each output channel, a priority barrier with a cutoff
 * (the ring index the next pushed buffer will get), and keeps as output
 * channel state the buffers it has not pushed yet (they lie after the
 * cutoff but were produced before the barrier).  A receiver snapshots on
 * the first priority barrier it sees and keeps as input channel state every
 * queued buffer before each input's cutoff: it copies them out of the ring
 * without waiting to process them.  Inputs whose barrier has not come yet
 * are kept buffer by buffer as they are popped, until it comes.  When every
 * input is past its cutoff (or finished, or delivered the barrier in band)
 * the snapshot is submitted with its channel state.  An aligned checkpoint
 * still aligning after the alignment timeout switches to this; inputs that
 * delivered the barrier in band are complete, the others are complete when
 * their in-band barrier is found in the ring.
 *
 * The channel state is written with the codec of chanstate.h (input
 * records and output buffers); restoring (chanstate.c) pushes the output
 * buffers first, then replays the records.
 *
 * Ordering that makes the cutoff safe: the sender publishes the cutoff and
 * id (release) before it pushes any buffer past the cutoff; the receiver
 * checks priority barriers after it has seen a buffer in the ring
 * (acquire) and before it pops it.
 */

static void unblock_inputs(sl_task_t *t) {
  for (uint32_t i = 0; i < t->n_inputs; i++) t->inputs[i]->is_blocked = false;
  t->align_id = 0;
  t->n_aligned = 0;
}

static void uc_reset(sl_task_t *t) {
  t->uc_id = 0;
  t->uc_snap = NULL;
  t->uc_state.len = 0;
  t->n_uc_done = 0;
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    t->inputs[i]->uc_has_cutoff = false;
    t->inputs[i]->uc_done = false;
  }
}

static void uc_abandon(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  if (t->uc_snap) h->snapshot_drop(h->ctx, t->uc_snap);
  uc_reset(t);
}

/* Deliver completion and abort notifications to the operators. */
void sl__align_notify(sl_task_t *t) {
  uint64_t done = atomic_load_explicit(&t->ckpt_complete, memory_order_acquire);
  if (done > t->ckpt_notified) {
    t->ckpt_notified = done;
    for (uint32_t i = 0; i < t->n_ops; i++) {
      sl_op_t *op = t->ops[i];
      if (op->vt->checkpoint_complete && op->is_open)
        op->vt->checkpoint_complete(op, done);
      if (op->kstate) sl__kstate_gc(op->kstate);
    }
  }
  uint64_t ab = atomic_load_explicit(&t->ckpt_abort, memory_order_acquire);
  if (ab > t->ckpt_abort_seen) {
    t->ckpt_abort_seen = ab;
    /* Work for an aborted checkpoint must not block input or capture. */
    if (t->align_id && t->align_id <= ab) unblock_inputs(t);
    if (t->uc_id && t->uc_id <= ab) uc_abandon(t);
    if (t->ob_id && t->ob_id <= ab) {
      t->job->ckpt->snapshot_drop(t->job->ckpt->ctx, t->ob_snap);
      t->ob_id = 0;
      t->ob_snap = NULL;
    }
    for (uint32_t i = 0; i < t->n_ops; i++) {
      sl_op_t *op = t->ops[i];
      if (op->vt->checkpoint_aborted && op->is_open)
        op->vt->checkpoint_aborted(op, ab);
      if (op->kstate) sl__kstate_gc(op->kstate);
    }
  }
}

/* Keep the records of a data buffer, from byte off, as input state. */
int sl__align_capture_input(sl_task_t *t, const sl_channel_t *ch,
                            const sl_buf_t *b, uint32_t off) {
  if (b->kind != SL_BUF_DATA) return SL_OK;
  while (off < b->len) {
    sl_frame_t f;
    off += sl__frame_read(b->data + off, ch->has_hash, &f);
    int rc = sl__chanstate_put_record(&t->uc_state, ch->input, f.row, f.len);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/* Publish a priority barrier on ch: buffers pushed so far lie before it. */
static void publish_priority(sl_channel_t *ch, uint64_t id) {
  atomic_store_explicit(&ch->prio_cutoff, ch->tail, memory_order_relaxed);
  /* release: the receiver that sees the id sees the cutoff. */
  atomic_store_explicit(&ch->prio_id, id, memory_order_release);
  if (ch->receiver)
    ch->receiver->sched->ops->wake(ch->receiver->sched, ch->receiver);
}

static int capture_output(sl_task_t *t, uint32_t writer, uint32_t k,
                          const sl_buf_t *b) {
  if (b->kind != SL_BUF_DATA) return SL_OK;
  if (t->writers[writer]->chs[k]->has_hash)
    return sl__chanstate_put_buffer_hashed(&t->uc_state, writer, k, b->data,
                                           b->len);
  return sl__chanstate_put_buffer(&t->uc_state, writer, k, b->data, b->len);
}

/* Send barrier id on every output, in band or with priority.  With
 * priority, buffers not yet pushed become output channel state. */
static int send_barrier(sl_task_t *t, uint64_t id, int64_t ts,
                        bool is_priority) {
  for (uint32_t i = 0; i < t->n_writers; i++) {
    sl_writer_t *w = t->writers[i];
    if (!is_priority) {
      if (sl__writer_send_event(w, SL_BUF_BARRIER, (int64_t)id, ts) != SL_OK)
        return SL_ENOMEM;
      continue;
    }
    sl__writer_flush(w); /* the partly filled buffer joins the pending ones */
    for (uint32_t k = 0; k < w->n_chs; k++) {
      sl_channel_t *ch = w->chs[k];
      for (sl_buf_t *b = ch->pending_head; b; b = b->next)
        if (capture_output(t, w->index, k, b) != SL_OK) return SL_ENOMEM;
      publish_priority(ch, id);
    }
  }
  return SL_OK;
}

/* Is an in-band barrier id still in the pending queue of an output? */
static bool has_pending_barrier(const sl_task_t *t, uint64_t id) {
  for (uint32_t i = 0; i < t->n_out_chs; i++)
    for (const sl_buf_t *b = t->out_chs[i]->pending_head; b; b = b->next)
      if (b->kind == SL_BUF_BARRIER && (uint64_t)b->value == id) return true;
  return false;
}

/*
 * Snapshot the chain (sync phase) and forward barrier id.  The operators'
 * pre_snapshot calls and the snapshot come first: a failed one forwards
 * nothing.  With keep_pending the snapshot waits in t->uc_snap for its
 * input channel state; otherwise it is submitted now (with the output
 * channel state of a priority barrier).
 */
static int take_checkpoint(sl_task_t *t, uint64_t id, int64_t ts,
                           const sl_ckpt_timing_t *timing, bool is_priority,
                           bool keep_pending) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  const bool is_final =
      id == atomic_load_explicit(&t->ckpt_final, memory_order_acquire);
  t->ckpt_last = id;
  void *snap = NULL;
  int rc;
  /* The final checkpoint covers everything the job emits (task.c). */
  if (is_final && (rc = sl__task_end_work(t)) != SL_OK) return rc;
  for (uint32_t i = 0; i < t->n_ops; i++)
    if (t->ops[i]->vt->pre_snapshot &&
        (rc = t->ops[i]->vt->pre_snapshot(t->ops[i], id)) != SL_OK)
      return rc;
  rc = h->snapshot_sync(h->ctx, t, id, timing, &snap);
  if (rc != SL_OK) return rc;
  if ((rc = SL_INJECT("task.before_barrier_forward")) != SL_OK) {
    h->snapshot_drop(h->ctx, snap);
    return sl__op_fail(t->ops[0], rc, "injected failure at "
                       "task.before_barrier_forward");
  }
  if (!keep_pending) t->uc_state.len = 0;
  if (send_barrier(t, id, ts, is_priority) != SL_OK) {
    h->snapshot_drop(h->ctx, snap);
    return sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory sending a "
                       "checkpoint barrier");
  }
  if (SL_INJECT("task.after_barrier_forward") != SL_OK) {
    h->snapshot_drop(h->ctx, snap);
    return sl__op_fail(t->ops[0], SL_EFAILED, "injected failure at "
                       "task.after_barrier_forward");
  }
  if (keep_pending) {
    t->uc_snap = snap;
    return SL_OK;
  }
  if (!is_priority && !is_final && h->mode == SL_CKPT_ALIGNED &&
      h->alignment_timeout_ns > 0 && has_pending_barrier(t, id)) {
    /* The barrier waits behind backpressured output: hold the snapshot
     * until it leaves, or convert it when the alignment timeout passes. */
    if (t->ob_snap) h->snapshot_drop(h->ctx, t->ob_snap);
    t->ob_id = id;
    t->ob_snap = snap;
    t->ob_ts = ts;
    t->sched->ops->wake_at(t->sched, t, ts + h->alignment_timeout_ns);
    return SL_OK;
  }
  rc = h->snapshot_submit(h->ctx, snap, t->uc_state.data, t->uc_state.len);
  t->uc_state.len = 0;
  return rc;
}

/*
 * A held snapshot (see take_checkpoint): submit it once its barriers left
 * the pending queues; past the alignment timeout, turn each still pending
 * barrier into a priority barrier, keeping the pending buffers before it
 * as output channel state.
 */
int sl__align_check_output(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  if (t->ob_id == 0) return SL_OK;
  void *snap = t->ob_snap;
  if (!has_pending_barrier(t, t->ob_id)) {
    t->ob_id = 0;
    t->ob_snap = NULL;
    return h->snapshot_submit(h->ctx, snap, NULL, 0);
  }
  if (sl__task_now(t) < t->ob_ts + h->alignment_timeout_ns) return SL_OK;
  t->uc_state.len = 0;
  for (uint32_t i = 0; i < t->n_writers; i++) {
    sl_writer_t *w = t->writers[i];
    for (uint32_t k = 0; k < w->n_chs; k++) {
      sl_channel_t *ch = w->chs[k];
      sl_buf_t *bar = ch->pending_head, *prev = NULL;
      while (bar && !(bar->kind == SL_BUF_BARRIER &&
                      (uint64_t)bar->value == t->ob_id)) {
        prev = bar;
        bar = bar->next;
      }
      if (bar == NULL) continue; /* already in the ring: in band it stays */
      for (sl_buf_t *b = ch->pending_head; b != bar; b = b->next)
        if (capture_output(t, w->index, k, b) != SL_OK) return SL_ENOMEM;
      /* The priority barrier replaces the pending one. */
      if (prev) prev->next = bar->next;
      else ch->pending_head = bar->next;
      if (ch->pending_tail == bar) ch->pending_tail = prev;
      sl__buf_free(bar);
      if (--ch->n_pending == 0) t->n_blocked--;
      publish_priority(ch, t->ob_id);
    }
  }
  t->ob_id = 0;
  t->ob_snap = NULL;
  int rc = h->snapshot_submit(h->ctx, snap, t->uc_state.data, t->uc_state.len);
  t->uc_state.len = 0;
  return rc;
}

static int uc_finish(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  void *snap = t->uc_snap;
  t->uc_snap = NULL;
  int rc = snap ? h->snapshot_submit(h->ctx, snap, t->uc_state.data,
                                     t->uc_state.len)
                : SL_OK;
  uc_reset(t);
  return rc;
}

int sl__align_input_done(sl_task_t *t, sl_channel_t *ch) {
  if (t->uc_id == 0 || ch->uc_done) return SL_OK;
  ch->uc_done = true;
  return ++t->n_uc_done == t->n_inputs ? uc_finish(t) : SL_OK;
}

/*
 * Try to complete the capture of ch from what is queued: copy the buffers
 * before the cutoff out of the ring, or, without a cutoff (alignment
 * timeout), up to the in-band barrier of the checkpoint if it is queued.
 */
static int uc_try_complete(sl_task_t *t, sl_channel_t *ch) {
  if (t->uc_id == 0 || ch->uc_done) return SL_OK;
  uint32_t count = atomic_load_explicit(&ch->count, memory_order_acquire);
  uint32_t from = sl__idx_before(ch->uc_captured, ch->head) ? ch->head
                                                        : ch->uc_captured;
  uint32_t end = ch->head + count;
  uint32_t limit = end;
  if (ch->uc_has_cutoff) {
    if (sl__idx_before(end, ch->uc_cutoff)) return SL_OK; /* not all queued */
    limit = ch->uc_cutoff;
  } else {
    bool has_barrier = false;
    for (uint32_t i = from; sl__idx_before(i, end); i++) {
      const sl_buf_t *b = ch->ring[i & ch->mask];
      if (b->kind == SL_BUF_BARRIER && (uint64_t)b->value == t->uc_id) {
        limit = i;
        has_barrier = true;
        break;
      }
    }
    if (!has_barrier) return SL_OK;
  }
  for (uint32_t i = from; sl__idx_before(i, limit); i++) {
    int rc = sl__align_capture_input(t, ch, ch->ring[i & ch->mask], 0);
    if (rc != SL_OK) return rc;
  }
  ch->uc_captured = limit;
  return sl__align_input_done(t, ch);
}

/* Start an unaligned checkpoint id (first priority barrier, or the
 * alignment timeout of an aligned one). */
static int uc_begin(sl_task_t *t, uint64_t id) {
  if (t->uc_id) uc_abandon(t);
  int64_t now = sl__task_now(t);
  int64_t first = t->align_id == id ? t->align_first_ns : now;
  sl_ckpt_timing_t timing = {first, now - first, true};
  int rc = SL_INJECT("task.on_first_barrier");
  if (rc != SL_OK)
    return sl__op_fail(t->ops[0], rc, "injected failure at "
                       "task.on_first_barrier");
  t->uc_id = id;
  t->uc_state.len = 0;
  if ((rc = take_checkpoint(t, id, 0, &timing, true, true)) != SL_OK) {
    uc_reset(t);
    return rc;
  }
  /* Everything processed so far is in the snapshot; what is left of the
   * buffer being processed, and everything queued, is not. */
  for (uint32_t i = 0; i < t->n_inputs; i++)
    t->inputs[i]->uc_captured = t->inputs[i]->head;
  if (t->cur_buf && t->cur_buf->kind == SL_BUF_DATA) {
    sl_channel_t *c = t->cur_ch;
    if (!c->uc_has_cutoff || sl__idx_before(t->cur_idx, c->uc_cutoff))
      rc = sl__align_capture_input(t, c, t->cur_buf, t->cur_off);
    if (rc != SL_OK) return rc;
  }
  t->n_uc_done = 0;
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    sl_channel_t *c = t->inputs[i];
    c->uc_done = c->is_finished || c->last_barrier == id;
    if (c->uc_done) t->n_uc_done++;
  }
  unblock_inputs(t);
  if (t->n_uc_done == t->n_inputs) return uc_finish(t);
  for (uint32_t i = 0; i < t->n_inputs && t->uc_id; i++)
    if ((rc = uc_try_complete(t, t->inputs[i])) != SL_OK) return rc;
  return SL_OK;
}

/* Look for priority barriers on every input, and complete captures from
 * what is queued. */
int sl__align_poll_priority(sl_task_t *t) {
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    sl_channel_t *ch = t->inputs[i];
    uint64_t id = atomic_load_explicit(&ch->prio_id, memory_order_acquire);
    if (id <= ch->prio_seen) continue;
    uint32_t cutoff;
    for (;;) { /* id and cutoff of the same barrier */
      cutoff = atomic_load_explicit(&ch->prio_cutoff, memory_order_relaxed);
      uint64_t again = atomic_load_explicit(&ch->prio_id, memory_order_acquire);
      if (again == id) break;
      id = again;
    }
    ch->prio_seen = id;
    if (id <= t->ckpt_abort_seen || id < t->uc_id) continue;
    bool is_new = id > t->uc_id && (id > t->ckpt_last || id == t->align_id);
    if (id != t->uc_id && !is_new) continue; /* stale */
    ch->uc_cutoff = cutoff;
    ch->uc_has_cutoff = true;
    if (id != t->uc_id) {
      int rc = uc_begin(t, id);
      if (rc != SL_OK) return rc;
    }
  }
  for (uint32_t i = 0; i < t->n_inputs && t->uc_id; i++) {
    int rc = uc_try_complete(t, t->inputs[i]);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/* Alignment is complete when every input is finished or delivered it. */
bool sl__align_is_complete(const sl_task_t *t) {
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    const sl_channel_t *c = t->inputs[i];
    if (!c->is_finished && c->last_barrier != t->align_id) return false;
  }
  return true;
}

int sl__align_finish(sl_task_t *t) {
  uint64_t id = t->align_id;
  sl_ckpt_timing_t timing = {t->align_first_ns,
                             sl__task_now(t) - t->align_first_ns, false};
  int rc = take_checkpoint(t, id, t->align_ts, &timing, false, false);
  unblock_inputs(t);
  return rc;
}

/* An in-band barrier id arrived on input ch. */
int sl__align_on_barrier(sl_task_t *t, sl_channel_t *ch, uint64_t id,
                         int64_t ts) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  ch->last_barrier = id;
  if (h == NULL || id <= t->ckpt_abort_seen) return SL_OK;
  if (t->uc_id == id) /* end of its capture */
    return sl__align_input_done(t, ch);
  if (id < t->align_id || (t->align_id == 0 && id <= t->ckpt_last))
    return SL_OK;
  if (id > t->align_id) {
    if (t->align_id) unblock_inputs(t);
    t->align_id = id;
    t->align_first_ns = sl__task_now(t);
    t->align_ts = ts ? ts : t->align_first_ns;
    int rc = SL_INJECT("task.on_first_barrier");
    if (rc != SL_OK)
      return sl__op_fail(t->ops[0], rc, "injected failure at "
                         "task.on_first_barrier");
    if (h->alignment_timeout_ns > 0)
      t->sched->ops->wake_at(t->sched, t, t->align_ts + h->alignment_timeout_ns);
  }
  if (h->mode == SL_CKPT_ALIGNED) ch->is_blocked = true;
  t->n_aligned++;
  return sl__align_is_complete(t) ? sl__align_finish(t) : SL_OK;
}

/* Aligned mode with a timeout: switch a long alignment to unaligned. */
int sl__align_check_timeout(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  if (t->align_id == 0 || h->mode != SL_CKPT_ALIGNED ||
      h->alignment_timeout_ns <= 0 ||
      t->align_id == atomic_load_explicit(&t->ckpt_final,
                                          memory_order_acquire))
    return SL_OK; /* the final checkpoint stays aligned (task.c) */
  /* Measured from the trigger: the checkpoint has been running that long. */
  if (sl__task_now(t) - t->align_ts < h->alignment_timeout_ns) return SL_OK;
  return uc_begin(t, t->align_id);
}

/* A trigger is handled between two polls: the positions the readers report
 * and the barrier describe the same record boundary. */
int sl__align_source_trigger(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  if (h == NULL) return SL_OK;
  uint64_t trig = atomic_load_explicit(&t->ckpt_trigger, memory_order_acquire);
  if (trig <= t->ckpt_last) return SL_OK;
  /* What the gateway delivered before the enumerator's snapshot for trig
   * is in the mailbox now (the trigger follows that snapshot): the
   * reader takes it before its own snapshot (checkpoint/enum_host.c, G2). */
  int rc = sl__source_drain(t);
  if (rc != SL_OK) return rc;
  /* The final checkpoint is always in band (task.c). */
  bool is_unaligned =
      h->mode == SL_CKPT_UNALIGNED &&
      trig != atomic_load_explicit(&t->ckpt_final, memory_order_acquire);
  int64_t now = sl__task_now(t);
  sl_ckpt_timing_t timing = {now, 0, is_unaligned};
  return take_checkpoint(t, trig, now, &timing, is_unaligned, false);
}

/* ------------------------------------------------------------------ */
/* Calls of the checkpoint module (runtime.h).  The coordinator raises the
 * atomics; the task reads them between records (sl__align_notify,
 * sl__align_source_trigger). */

uint32_t sl__task_index(const sl_task_t *t) { return t->index; }
uint32_t sl__task_n_ops(const sl_task_t *t) { return t->n_ops; }
sl_op_t *sl__task_op(const sl_task_t *t, uint32_t i) { return t->ops[i]; }
sl_source_rt_t *sl__task_source(const sl_task_t *t) { return t->source; }
uint64_t sl__task_last_snapshot(const sl_task_t *t) { return t->ckpt_last; }

uint64_t sl__task_restored_checkpoint(const sl_task_t *t) {
  return t->job->restored_ckpt;
}

void sl__task_trigger_checkpoint(sl_task_t *t, uint64_t id) {
  if (t->source == NULL) return;
  atomic_store(&t->ckpt_trigger, id);
  t->sched->ops->wake(t->sched, t);
}

void sl__task_checkpoint_complete(sl_task_t *t, uint64_t id) {
  uint64_t cur = atomic_load(&t->ckpt_complete);
  if (id > cur) atomic_store(&t->ckpt_complete, id);
  t->sched->ops->wake(t->sched, t);
}

void sl__task_set_final_checkpoint(sl_task_t *t, uint64_t id) {
  /* release: pairs with the acquire loads in take_checkpoint and the
   * source trigger, which follow the trigger's publication. */
  atomic_store_explicit(&t->ckpt_final, id, memory_order_release);
}

bool sl__task_is_source(const sl_task_t *t) { return t->source != NULL; }

void sl__task_wake_at(sl_task_t *t, int64_t t_ns) {
  t->sched->ops->wake_at(t->sched, t, t_ns);
}

const sl_job_rt_t *sl__task_job(const sl_task_t *t) { return t->job; }

void sl__task_checkpoint_aborted(sl_task_t *t, uint64_t id) {
  uint64_t cur = atomic_load(&t->ckpt_abort);
  if (id > cur) atomic_store(&t->ckpt_abort, id);
  t->sched->ops->wake(t->sched, t);
}
