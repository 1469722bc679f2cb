/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The task run loop.  A task owns a chain of operators of one subtask and
 * runs it for one quantum per call: it first pushes output that waits for
 * credit, then fires due timers, then reads its source or its input
 * channels record by record.  It stops after the record that filled an
 * output channel beyond its credit (backpressure), when it runs out of
 * input, or when the quantum is used.  See README.md ("Tasks").
 *
 * DESIGN NOTES
 *
 *   CREATED --open ok--> RUNNING --all input ended--> ENDING --EOP sent--> DONE
 *      |                    |                            |
 *      +------ failure or cancel (close with is_success = false) ---> DONE
 *
 *   transition          function
 *   CREATED->RUNNING    task_open()
 *   RUNNING->ENDING     task_end_input(): end_input() on every operator in
 *                       chain order, flush, EOP on every output channel
 *   ENDING->DONE        task_finish(t, true) once no output is pending
 *   any->DONE           task_fail() / cancel: task_finish(t, false)
 *
 * Invariants:
 *  T1. Records, timers and events of a task are handled on one thread at a
 *      time, in order (the scheduler runs a task on one worker at a time).
 *  T2. A record is handed to the chain whole: the task stops only between
 *      records, so a partly read buffer resumes at cur_off.
 *  T3. EOP is sent on an output channel only after every record the task
 *      will ever send on it.
 *  T4. The task reads no clock and never sleeps; it asks the scheduler.
 */
#include "core/inject.h"
#include "runtime/runtime.h"

#define QUANTUM_RECORDS 16384u /* source records per run */
#define QUANTUM_BUFFERS 64u    /* input buffers per run */
/* A run also ends after this much scheduler time, checked between input
 * buffers: a slow operator must not hold a worker for 64 buffers while a
 * source waits to take its checkpoint or other tasks wait to run. */
#define QUANTUM_NS 2000000
#define MAX_EMPTY_POLLS 8u     /* polls that return MORE without records */

void sl__task_note_blocked(sl_task_t *t, sl_channel_t *ch) {
  SL_UNUSED(ch);
  t->n_blocked++;
}

void sl__job_rt_cancel(sl_job_rt_t *rt) {
  atomic_store_explicit(&rt->is_canceled, true, memory_order_release);
  /* rt->sched is set under the lock once the job runs; a cancel before
   * that is seen by every task when it first runs. */
  pthread_mutex_lock(&rt->lock);
  sl_sched_t *s = rt->sched;
  if (s)
    for (uint32_t i = 0; i < rt->n_tasks; i++) s->ops->wake(s, rt->tasks[i]);
  pthread_mutex_unlock(&rt->lock);
}

static void task_finish(sl_task_t *t, bool is_success) {
  for (uint32_t i = 0; i < t->n_ops; i++) {
    sl_op_t *op = t->ops[i];
    if (op->is_open && op->vt->close) op->vt->close(op, is_success);
    op->is_open = false;
  }
  if (t->source && t->source->reader) {
    t->source->vt->reader_close(t->source->reader);
    t->source->reader = NULL;
  }
  t->phase = SL_PHASE_DONE;
}

/* Hand the task's error to the job (first one wins) and cancel the job. */
static void report_error(sl_task_t *t) {
  sl_job_rt_t *rt = t->job;
  if (t->err == NULL)
    t->err = sl_error_create(SL_EFAILED, "task '%s' (subtask %u) failed",
                             t->name, t->subtask + 1);
  pthread_mutex_lock(&rt->lock);
  if (rt->err == NULL) {
    rt->err = t->err;
    t->err = NULL;
  }
  pthread_mutex_unlock(&rt->lock);
  sl__job_rt_cancel(rt);
}

static sl_run_result_t task_fail(sl_task_t *t) {
  task_finish(t, false);
  report_error(t);
  return SL_RUN_DONE;
}

static int check_output_barrier(sl_task_t *t);

/* Successful end; a sink whose final close fails still fails the job. */
static sl_run_result_t task_done(sl_task_t *t) {
  /* Every output is flushed: a held snapshot can be submitted now. */
  if (t->ob_id && check_output_barrier(t) != SL_OK) return task_fail(t);
  task_finish(t, true);
  if (t->err) report_error(t);
  return SL_RUN_DONE;
}

static bool is_canceled(const sl_task_t *t) {
  return atomic_load_explicit(&t->job->is_canceled, memory_order_acquire);
}

static int task_open(sl_task_t *t) {
  if (t->source) {
    sl_source_rt_t *src = t->source;
    sl_reader_init_t init = {t->subtask,   t->parallelism, src->splits,
                             src->n_splits, t->ops[0]->out_schema,
                             &t->waker};
    sl_error_t *err = NULL;
    int rc = src->vt->reader_open(src->ctx, &init, &src->reader, &err);
    if (rc != SL_OK) {
      src->reader = NULL;
      return sl__op_fail_err(t->ops[0], err, rc);
    }
  }
  for (uint32_t i = 0; i < t->n_ops; i++) {
    sl_op_t *op = t->ops[i];
    op->is_opening = true;
    int rc = op->vt->open ? op->vt->open(op) : SL_OK;
    op->is_opening = false;
    if (rc != SL_OK) {
      if (op->vt->close) op->vt->close(op, false);
      return sl__op_fail_err(op, NULL, rc);
    }
    op->is_open = true;
    const char *missing = op->kstate ? sl__kstate_undeclared(op->kstate) : NULL;
    if (missing)
      return sl__op_fail(op, SL_EINVAL,
                         "the checkpoint holds state '%s' of operator '%s', "
                         "which the operator does not declare",
                         missing, op->uid);
  }
  return SL_OK;
}

static bool flush_pending(sl_task_t *t) {
  if (t->n_blocked == 0) return true;
  for (uint32_t i = 0; i < t->n_out_chs && t->n_blocked; i++)
    if (t->out_chs[i]->n_pending) sl__channel_flush_pending(t->out_chs[i]);
  return t->n_blocked == 0;
}

static void flush_writers(sl_task_t *t) {
  for (uint32_t i = 0; i < t->n_writers; i++) sl__writer_flush(t->writers[i]);
}

/* Fire due timers; returns false when the task must stop (error or
 * backpressure) and sets *rc.  The wake-up for the next timer is asked for
 * by arm_timers() at the end of the run. */
static bool fire_timers(sl_task_t *t, int *rc) {
  if (t->n_timer_ops == 0) return true;
  int64_t now = sl__task_now(t);
  for (uint32_t i = 0; i < t->n_timer_ops; i++) {
    sl_op_t *op = t->timer_ops[i];
    int64_t ts;
    int got;
    while (t->n_blocked == 0 &&
           (got = sl__timers_pop(op->timers, now, &ts, &t->timer_key)) != 0) {
      if (got < 0) {
        *rc = got;
        return false;
      }
      uint64_t h = sl__key_hash64(t->timer_key.data, t->timer_key.len);
      int r = sl__kstate_set_key(op->kstate, t->timer_key.data,
                                 (uint32_t)t->timer_key.len, h);
      if (r == SL_OK) r = op->vt->on_timer(op, ts);
      if (r != SL_OK) {
        *rc = r;
        return false;
      }
    }
  }
  return t->n_blocked == 0;
}

/*
 * Ask the scheduler to run the task when its earliest timer is due.  This
 * runs after every quantum, not only after firing timers: a timer that a
 * record or another timer registered during the quantum must get its
 * wake-up even if no more input ever arrives to run the task again.
 */
static void arm_timers(sl_task_t *t) {
  int64_t next = INT64_MAX;
  for (uint32_t i = 0; i < t->n_timer_ops; i++) {
    int64_t n = sl__timers_next(t->timer_ops[i]->timers);
    if (n < next) next = n;
  }
  if (next != INT64_MAX) t->sched->ops->wake_at(t->sched, t, next);
}

/* ------------------------------------------------------------------ */
/* Event time.
 *
 * A source with a watermark strategy tracks, per assigned split, the
 * largest event time seen and whether the split is idle or finished; its
 * watermark is the minimum over the active splits of (largest - delay - 1).
 * Other tasks keep the newest watermark of each input channel and take the
 * minimum over the inputs that are neither idle nor finished.  When every
 * input (split) is idle the task tells its receivers it is idle, so that it
 * does not hold them back; the first watermark or record makes it active
 * again.  Advancing the task's watermark fires the event-time timers of
 * the chain in chain order (records a timer emits reach the next operator
 * before the watermark does), then sends the watermark on every output.
 * At the end of the input the watermark becomes SL_WATERMARK_MAX.
 * Watermarks are not part of checkpoints: after a restore they start again
 * from SL_WATERMARK_MIN and the sources regenerate them.
 */

static int fire_event_timers(sl_task_t *t, sl_op_t *op, int64_t wm) {
  int64_t ts;
  int got;
  while ((got = sl__timers_pop(op->etimers, wm, &ts, &t->timer_key)) != 0) {
    if (got < 0)
      return sl__op_fail(op, got, "out of memory firing an event-time timer");
    uint64_t h = sl__key_hash64(t->timer_key.data, t->timer_key.len);
    int r = sl__kstate_set_key(op->kstate, t->timer_key.data,
                               (uint32_t)t->timer_key.len, h);
    if (r == SL_OK && op->vt->on_event_timer) r = op->vt->on_event_timer(op, ts);
    if (r != SL_OK) return sl__op_fail_err(op, NULL, r);
  }
  return SL_OK;
}

static int send_wm_event(sl_task_t *t, int64_t value, int64_t what) {
  if (!t->job->has_event_time) return SL_OK;
  for (uint32_t i = 0; i < t->n_writers; i++)
    if (sl__writer_send_event(t->writers[i], SL_BUF_WATERMARK, value, what) !=
        SL_OK)
      return sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory sending a "
                         "watermark");
  return SL_OK;
}

int sl__task_advance_wm(sl_task_t *t, int64_t wm) {
  if (wm <= t->wm) return SL_OK;
  t->wm = wm;
  atomic_store_explicit(&t->wm_metric, wm, memory_order_relaxed);
  for (uint32_t i = 0; i < t->n_timer_ops; i++) {
    sl_op_t *op = t->timer_ops[i];
    if (op->etimers && op->is_open) {
      int rc = fire_event_timers(t, op, wm);
      if (rc != SL_OK) return rc;
    }
  }
  return send_wm_event(t, wm, SL_WM_ADVANCE);
}

/* Tell receivers the task is idle or active again. */
static int set_wm_idle(sl_task_t *t, bool is_idle) {
  if (t->is_wm_idle == is_idle) return SL_OK;
  t->is_wm_idle = is_idle;
  return send_wm_event(t, t->wm, is_idle ? SL_WM_IDLE : SL_WM_ACTIVE);
}

/* The inputs' watermarks changed: recompute the task's. */
static int input_wm_update(sl_task_t *t) {
  int64_t m = SL_WATERMARK_MAX;
  uint32_t n_active = 0;
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    const sl_channel_t *c = t->inputs[i];
    if (c->is_finished || c->is_idle) continue;
    n_active++;
    if (c->wm < m) m = c->wm;
  }
  if (n_active == 0) {
    if (t->n_finished == t->n_inputs) return SL_OK;
    /* Every input is idle: none will advance, so flush the largest of
     * their watermarks (as Flink does), then go idle. */
    m = SL_WATERMARK_MIN;
    for (uint32_t i = 0; i < t->n_inputs; i++)
      if (!t->inputs[i]->is_finished && t->inputs[i]->wm > m)
        m = t->inputs[i]->wm;
    int rc = sl__task_advance_wm(t, m);
    return rc == SL_OK ? set_wm_idle(t, true) : rc;
  }
  int rc = set_wm_idle(t, false);
  return rc == SL_OK ? sl__task_advance_wm(t, m) : rc;
}

static int on_watermark(sl_task_t *t, sl_channel_t *ch, int64_t value,
                        int64_t what) {
  if (what == SL_WM_IDLE) {
    ch->is_idle = true;
  } else {
    ch->is_idle = false;
    if (what == SL_WM_ADVANCE && value > ch->wm) ch->wm = value;
  }
  return input_wm_update(t);
}

/* The source's watermark over its splits; *out_n_active splits count.
 * With none active: the largest over the unfinished splits. */
static int64_t wmgen_value(const sl_task_t *t, uint32_t *out_n_active) {
  const sl_wmgen_t *g = t->source->wm;
  int64_t delay = g->cfg->strategy == SL_WM_MONOTONOUS
                      ? 0 : g->cfg->max_out_of_orderness_us;
  int64_t m = SL_WATERMARK_MAX, idle_max = SL_WATERMARK_MIN;
  uint32_t n = 0;
  for (uint32_t k = 0; k < t->source->n_splits; k++) {
    const sl_wm_split_t *sp = &g->splits[k];
    if (sp->is_finished) continue;
    int64_t v = sp->max_ts;
    if (v != SL_WATERMARK_MIN) {
      if (__builtin_sub_overflow(v, delay, &v) ||
          __builtin_sub_overflow(v, 1, &v))
        v = SL_WATERMARK_MIN;
    }
    if (v > idle_max) idle_max = v;
    if (sp->is_idle) continue;
    n++;
    if (v < m) m = v;
  }
  *out_n_active = n;
  return n ? m : idle_max;
}

static int wmgen_emit(sl_task_t *t) {
  uint32_t n_active;
  int64_t wm = wmgen_value(t, &n_active);
  if (n_active == 0) {
    int rc = sl__task_advance_wm(t, wm);
    return rc == SL_OK ? set_wm_idle(t, true) : rc;
  }
  int rc = set_wm_idle(t, false);
  return rc == SL_OK ? sl__task_advance_wm(t, wm) : rc;
}

/* Periodic emission and idleness, between two polls. */
static int wmgen_tick(sl_task_t *t, int64_t now) {
  sl_wmgen_t *g = t->source->wm;
  if (now < g->next_ns) return SL_OK;
  const sl_watermark_config_t *c = g->cfg;
  for (uint32_t k = 0; k < t->source->n_splits; k++) {
    sl_wm_split_t *sp = &g->splits[k];
    if (sp->n_records != sp->n_seen || sp->active_ns == 0) {
      sp->n_seen = sp->n_records;
      sp->active_ns = now;
      sp->is_idle = false;
    } else if (c->idle_timeout_ms > 0 &&
               now - sp->active_ns >= c->idle_timeout_ms * 1000000) {
      sp->is_idle = true;
    }
  }
  g->next_ns = now + (c->interval_ms > 0 ? c->interval_ms : 200) * 1000000;
  return wmgen_emit(t);
}

/* A record of the current split was emitted (sl_source_emit). */
static bool wmgen_on_record(sl_source_out_t *out, const sl_row_t *row) {
  sl_wmgen_t *g = out->wm;
  sl_task_t *t = out->task;
  if (t->source->n_splits == 0) return true;
  sl_wm_split_t *sp = &g->splits[g->cur];
  if (SL_UNLIKELY(sl_row_is_null(row, g->field))) {
    sl__op_fail(out->op, SL_EINVAL,
                "a record of split %u has a null event time in field '%s'",
                t->source->splits[g->cur].split, g->cfg->time_field);
    out->is_failed = true;
    return false;
  }
  int64_t ts = sl_row_get_i64(row, g->field);
  if (ts > sp->max_ts) sp->max_ts = ts;
  sp->n_records++;
  if (g->cfg->per_record) {
    sp->is_idle = false;
    if (wmgen_emit(t) != SL_OK) {
      out->is_failed = true;
      return false;
    }
  }
  return true;
}

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
 * Channel state layout (docs/checkpoint-format.md): entries
 *   [u8 0][u32 input][u32 len][row]               an input record
 *   [u8 1][u32 writer][u32 channel][u32 len][buf] an output buffer
 * Restoring pushes the output buffers first, then replays the records.
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
static void ckpt_notify(sl_task_t *t) {
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

static int uc_put(sl_task_t *t, const void *p, size_t n) {
  return sl_bytes_append(&t->uc_state, p, n);
}

/* Keep the records of a data buffer, from byte off, as input state. */
static int uc_capture_buffer(sl_task_t *t, const sl_channel_t *ch,
                             const sl_buf_t *b, uint32_t off) {
  if (b->kind != SL_BUF_DATA) return SL_OK;
  uint32_t hash_len = ch->has_hash ? 8 : 0;
  while (off < b->len) {
    uint32_t len;
    memcpy(&len, b->data + off, 4);
    uint8_t kind = 0;
    uint32_t hdr[2] = {ch->input, len};
    int rc = uc_put(t, &kind, 1);
    if (rc == SL_OK) rc = uc_put(t, hdr, 8);
    if (rc == SL_OK) rc = uc_put(t, b->data + off + 4 + hash_len, len);
    if (rc != SL_OK) return rc;
    off += 4 + hash_len + len;
  }
  return SL_OK;
}

/* Send barrier id on every output, in band or with priority.  With
 * priority, buffers not yet pushed become output channel state. */
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
  uint8_t kind = 1;
  uint32_t hdr[3] = {writer, k, b->len};
  if (uc_put(t, &kind, 1) != SL_OK || uc_put(t, hdr, 12) != SL_OK ||
      uc_put(t, b->data, b->len) != SL_OK)
    return SL_ENOMEM;
  return SL_OK;
}

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

/*
 * Snapshot the chain (sync phase) and forward barrier id.  The snapshot
 * comes first: a failed snapshot forwards nothing.  With keep_pending the
 * snapshot waits in t->uc_snap for its input channel state; otherwise it
 * is submitted now (with the output channel state of a priority barrier).
 */
/* Is an in-band barrier id still in the pending queue of an output? */
static bool has_pending_barrier(const sl_task_t *t, uint64_t id) {
  for (uint32_t i = 0; i < t->n_out_chs; i++)
    for (const sl_buf_t *b = t->out_chs[i]->pending_head; b; b = b->next)
      if (b->kind == SL_BUF_BARRIER && (uint64_t)b->value == id) return true;
  return false;
}

static int take_checkpoint(sl_task_t *t, uint64_t id, int64_t ts,
                           const sl_ckpt_timing_t *timing, bool is_priority,
                           bool keep_pending) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  t->ckpt_last = id;
  void *snap = NULL;
  int rc;
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
  if (!is_priority && h->mode == SL_CKPT_ALIGNED &&
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
static int check_output_barrier(sl_task_t *t) {
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

static int uc_mark_done(sl_task_t *t, sl_channel_t *ch) {
  if (t->uc_id == 0 || ch->uc_done) return SL_OK;
  ch->uc_done = true;
  return ++t->n_uc_done == t->n_inputs ? uc_finish(t) : SL_OK;
}

static inline bool idx_before(uint32_t a, uint32_t b) {
  return (int32_t)(a - b) < 0;
}

/*
 * Try to complete the capture of ch from what is queued: copy the buffers
 * before the cutoff out of the ring, or, without a cutoff (alignment
 * timeout), up to the in-band barrier of the checkpoint if it is queued.
 */
static int uc_try_complete(sl_task_t *t, sl_channel_t *ch) {
  if (t->uc_id == 0 || ch->uc_done) return SL_OK;
  uint32_t count = atomic_load_explicit(&ch->count, memory_order_acquire);
  uint32_t from = idx_before(ch->uc_captured, ch->head) ? ch->head
                                                        : ch->uc_captured;
  uint32_t end = ch->head + count;
  uint32_t limit = end;
  if (ch->uc_has_cutoff) {
    if (idx_before(end, ch->uc_cutoff)) return SL_OK; /* not all queued */
    limit = ch->uc_cutoff;
  } else {
    bool has_barrier = false;
    for (uint32_t i = from; idx_before(i, end); i++) {
      const sl_buf_t *b = ch->ring[i & ch->mask];
      if (b->kind == SL_BUF_BARRIER && (uint64_t)b->value == t->uc_id) {
        limit = i;
        has_barrier = true;
        break;
      }
    }
    if (!has_barrier) return SL_OK;
  }
  for (uint32_t i = from; idx_before(i, limit); i++) {
    int rc = uc_capture_buffer(t, ch, ch->ring[i & ch->mask], 0);
    if (rc != SL_OK) return rc;
  }
  ch->uc_captured = limit;
  return uc_mark_done(t, ch);
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
    if (!c->uc_has_cutoff || idx_before(t->cur_idx, c->uc_cutoff))
      rc = uc_capture_buffer(t, c, t->cur_buf, t->cur_off);
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
static int poll_priority(sl_task_t *t) {
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
static bool is_aligned(const sl_task_t *t) {
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    const sl_channel_t *c = t->inputs[i];
    if (!c->is_finished && c->last_barrier != t->align_id) return false;
  }
  return true;
}

static int finish_alignment(sl_task_t *t) {
  uint64_t id = t->align_id;
  sl_ckpt_timing_t timing = {t->align_first_ns,
                             sl__task_now(t) - t->align_first_ns, false};
  int rc = take_checkpoint(t, id, t->align_ts, &timing, false, false);
  unblock_inputs(t);
  return rc;
}

/* An in-band barrier id arrived on input ch. */
static int on_barrier(sl_task_t *t, sl_channel_t *ch, uint64_t id,
                      int64_t ts) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  ch->last_barrier = id;
  if (h == NULL || id <= t->ckpt_abort_seen) return SL_OK;
  if (t->uc_id == id) return uc_mark_done(t, ch); /* end of its capture */
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
  return is_aligned(t) ? finish_alignment(t) : SL_OK;
}

/* Aligned mode with a timeout: switch a long alignment to unaligned. */
static int check_alignment_timeout(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  if (t->align_id == 0 || h->mode != SL_CKPT_ALIGNED ||
      h->alignment_timeout_ns <= 0)
    return SL_OK;
  /* Measured from the trigger: the checkpoint has been running that long. */
  if (sl__task_now(t) - t->align_ts < h->alignment_timeout_ns) return SL_OK;
  return uc_begin(t, t->align_id);
}

/*
 * Restored channel state, step 1: push the output buffers into their
 * channels, ahead of anything the task will send (they were produced
 * before the snapshot).  The entries were validated on restore.
 */
static int restore_output_state(sl_task_t *t) {
  if (t->restore_cs_off != 0) return SL_OK; /* done already */
  size_t off = 0;
  while (off < t->restore_cs_len) {
    const uint8_t *e = t->restore_cs + off;
    if (e[0] == 0) {
      uint32_t len;
      memcpy(&len, e + 5, 4);
      off += 9 + (size_t)len;
      continue;
    }
    uint32_t hdr[3];
    memcpy(hdr, e + 1, 12);
    sl_channel_t *ch = t->writers[hdr[0]]->chs[hdr[1]];
    sl_buf_t *b = sl__channel_get_buffer(ch, hdr[2]);
    if (b == NULL) return SL_ENOMEM;
    memcpy(b->data, e + 13, hdr[2]);
    b->len = hdr[2];
    sl__channel_send(ch, b);
    off += 13 + (size_t)hdr[2];
  }
  t->restore_cs_off = 1; /* marks step 1 done; step 2 restarts at 0 */
  t->restore_cs_pos = 0;
  return SL_OK;
}

/* Step 2: replay the input records before reading the channels. */
static bool replay_channel_state(sl_task_t *t, sl_run_result_t *out) {
  sl_op_t *head = t->ops[0];
  while (t->restore_cs_pos < t->restore_cs_len) {
    const uint8_t *e = t->restore_cs + t->restore_cs_pos;
    if (e[0] == 1) {
      uint32_t len;
      memcpy(&len, e + 9, 4);
      t->restore_cs_pos += 13 + (size_t)len;
      continue;
    }
    uint32_t input, len;
    memcpy(&input, e + 1, 4);
    memcpy(&len, e + 5, 4);
    sl_row_t row;
    sl_row_view(&row, head->in_schema[input], e + 9, len);
    t->restore_cs_pos += 9 + (size_t)len;
    int rc = sl__op_push(head, input, &row);
    if (rc != SL_OK) {
      sl__op_fail_err(head, NULL, rc);
      *out = task_fail(t);
      return true;
    }
    if (t->n_blocked) {
      *out = SL_RUN_WAIT_OUTPUT;
      return true;
    }
  }
  sl_free(t->restore_cs);
  t->restore_cs = NULL;
  t->restore_cs_len = t->restore_cs_off = t->restore_cs_pos = 0;
  return false;
}

static sl_run_result_t task_end_input(sl_task_t *t) {
  if (t->job->ckpt) t->job->ckpt->task_finished(t->job->ckpt->ctx, t);
  /* End of input: every pending event-time timer is due. */
  if (set_wm_idle(t, false) != SL_OK ||
      sl__task_advance_wm(t, SL_WATERMARK_MAX) != SL_OK)
    return task_fail(t);
  for (uint32_t i = 0; i < t->n_ops; i++) {
    sl_op_t *op = t->ops[i];
    if (op->vt->end_input) {
      int rc = op->vt->end_input(op);
      if (rc != SL_OK) {
        sl__op_fail_err(op, NULL, rc);
        return task_fail(t);
      }
    }
  }
  for (uint32_t i = 0; i < t->n_writers; i++) {
    if (sl__writer_send_event(t->writers[i], SL_BUF_EOP, 0, 0) != SL_OK) {
      sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory ending the stream");
      return task_fail(t);
    }
  }
  t->phase = SL_PHASE_ENDING;
  if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
  return task_done(t);
}

/* A trigger is handled between two polls: the positions the readers report
 * and the barrier describe the same record boundary. */
static int source_trigger(sl_task_t *t) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  if (h == NULL) return SL_OK;
  uint64_t trig = atomic_load_explicit(&t->ckpt_trigger, memory_order_acquire);
  if (trig <= t->ckpt_last) return SL_OK;
  bool is_unaligned = h->mode == SL_CKPT_UNALIGNED;
  int64_t now = sl__task_now(t);
  sl_ckpt_timing_t timing = {now, 0, is_unaligned};
  return take_checkpoint(t, trig, now, &timing, is_unaligned, false);
}

static sl_run_result_t run_source(sl_task_t *t) {
  sl_source_rt_t *src = t->source;
  sl_source_out_t *out = &t->sout;
  out->budget = QUANTUM_RECORDS;
  for (uint32_t empty = 0;;) {
    if (source_trigger(t) != SL_OK) return task_fail(t);
    if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
    out->wait_until = 0;
    uint32_t before = out->budget;
    sl_error_t *err = NULL;
    int rc = src->vt->reader_poll(src->reader, out, &err);
    if (rc < 0 || out->is_failed) {
      sl__op_fail_err(t->ops[0], err, rc < 0 ? rc : SL_EFAILED);
      return task_fail(t);
    }
    if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
    if (rc == SL_POLL_END) return task_end_input(t);
    if (src->wm && wmgen_tick(t, sl__task_now(t)) != SL_OK)
      return task_fail(t);
    if (rc == SL_POLL_WAIT) {
      flush_writers(t);
      int64_t wake = out->wait_until;
      if (src->wm && (wake == 0 || src->wm->next_ns < wake))
        wake = src->wm->next_ns;
      if (wake) t->sched->ops->wake_at(t->sched, t, wake);
      return t->n_blocked ? SL_RUN_WAIT_OUTPUT : SL_RUN_WAIT_INPUT;
    }
    if (out->budget == 0 || is_canceled(t)) return SL_RUN_AGAIN;
    if (out->budget == before && ++empty >= MAX_EMPTY_POLLS)
      return SL_RUN_AGAIN;
  }
}

/*
 * Process the records of t->cur_buf from t->cur_off.  Returns true when the
 * task must stop now, with *out_result set: after a failure, or after a
 * record that left output pending (the offset is kept, invariant T2).
 */
static bool process_data(sl_task_t *t, sl_run_result_t *out_result) {
  sl_buf_t *b = t->cur_buf;
  sl_op_t *head = t->ops[0];
  uint32_t input = t->cur_ch->input;
  const sl_schema_t *schema = head->in_schema[input];
  const uint32_t hash_len = t->cur_ch->has_hash ? 8 : 0;
  t->has_in_hash = hash_len != 0;
  uint32_t off = t->cur_off;
  /* Priority barriers are also looked for inside long buffers, so that a
   * slow operator sees them within 64 records. */
  const bool is_prio_possible =
      t->job->ckpt && (t->job->ckpt->mode == SL_CKPT_UNALIGNED ||
                       t->job->ckpt->alignment_timeout_ns > 0);
  uint32_t n_rec = 0;
  while (off < b->len) {
    if (SL_UNLIKELY(is_prio_possible) && (++n_rec & 63) == 0) {
      t->cur_off = off;
      if (poll_priority(t) != SL_OK || check_alignment_timeout(t) != SL_OK) {
        t->has_in_hash = false;
        *out_result = task_fail(t);
        return true;
      }
    }
    uint32_t len;
    memcpy(&len, b->data + off, 4);
    if (hash_len) memcpy(&t->in_hash, b->data + off + 4, 8);
    sl_row_t row;
    sl_row_view(&row, schema, b->data + off + 4 + hash_len, len);
    off += 4 + hash_len + len;

    int rc = sl__op_push(head, input, &row);
    if (SL_UNLIKELY(rc != SL_OK)) {
      t->has_in_hash = false;
      sl__op_fail_err(head, NULL, rc);
      *out_result = task_fail(t);
      return true;
    }
    if (SL_UNLIKELY(t->n_blocked) && off < b->len) {
      t->has_in_hash = false;
      t->cur_off = off;
      *out_result = SL_RUN_WAIT_OUTPUT;
      return true;
    }
  }
  t->has_in_hash = false;
  sl__channel_recycle(t->cur_ch, b);
  t->cur_buf = NULL;
  t->cur_off = 0;
  *out_result = SL_RUN_WAIT_OUTPUT;
  return t->n_blocked != 0;
}

static sl_run_result_t run_inputs(sl_task_t *t) {
  int64_t start = sl__task_now(t);
  for (uint32_t n_buf = 0; n_buf < QUANTUM_BUFFERS; n_buf++) {
    if (n_buf && sl__task_now(t) - start >= QUANTUM_NS) break;
    if (t->cur_buf == NULL) {
      sl_channel_t *ch = NULL;
      for (uint32_t k = 0; k < t->n_inputs; k++) {
        sl_channel_t *c = t->inputs[(t->rr + k) % t->n_inputs];
        if (!c->is_finished && !c->is_blocked && sl__channel_has_data(c)) {
          ch = c;
          t->rr = (t->rr + k + 1) % t->n_inputs;
          break;
        }
      }
      if (ch == NULL) {
        flush_writers(t);
        return t->n_blocked ? SL_RUN_WAIT_OUTPUT : SL_RUN_WAIT_INPUT;
      }
      /* The next buffer is visible in the ring (acquire): a priority
       * barrier published before it was pushed is visible too.  Handle it
       * before the buffer, which may lie past the cutoff. */
      if (t->job->ckpt && poll_priority(t) != SL_OK) return task_fail(t);
      t->cur_idx = ch->head;
      t->cur_buf = sl__channel_pop(ch);
      t->cur_ch = ch;
      t->cur_off = 0;
      if (t->uc_id && !ch->uc_done && !ch->uc_has_cutoff &&
          !idx_before(t->cur_idx, ch->uc_captured)) {
        /* No barrier on ch yet: this buffer was sent before it. */
        if (uc_capture_buffer(t, ch, t->cur_buf, 0) != SL_OK) {
          sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory keeping "
                      "in-flight records");
          return task_fail(t);
        }
        ch->uc_captured = t->cur_idx + 1;
      }
    }
    sl_buf_t *b = t->cur_buf;
    if (b->kind == SL_BUF_DATA) {
      sl_run_result_t r;
      if (process_data(t, &r)) return r;
      continue;
    }
    sl_channel_t *ch = t->cur_ch;
    t->cur_buf = NULL;
    if (b->kind == SL_BUF_EOP) {
      sl__channel_recycle(ch, b);
      ch->is_finished = true;
      ch->is_blocked = false;
      if (t->uc_id && uc_mark_done(t, ch) != SL_OK) return task_fail(t);
      if (++t->n_finished == t->n_inputs) return task_end_input(t);
      if (t->align_id && is_aligned(t) && finish_alignment(t) != SL_OK)
        return task_fail(t);
      if (t->job->has_event_time && input_wm_update(t) != SL_OK)
        return task_fail(t);
      if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
      continue;
    }
    if (b->kind == SL_BUF_BARRIER) {
      uint64_t id = (uint64_t)b->value;
      int64_t ts = b->ts;
      sl__channel_recycle(ch, b);
      if (on_barrier(t, ch, id, ts) != SL_OK) return task_fail(t);
      if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
      continue;
    }
    /* A watermark or a watermark status. */
    int64_t value = b->value, what = b->ts;
    sl__channel_recycle(ch, b);
    if (on_watermark(t, ch, value, what) != SL_OK) return task_fail(t);
    if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
  }
  return SL_RUN_AGAIN;
}

static sl_run_result_t task_run_quantum(sl_task_t *t) {
  if (t->phase == SL_PHASE_DONE) return SL_RUN_DONE;
  if (is_canceled(t)) {
    task_finish(t, false);
    return SL_RUN_DONE;
  }
  if (t->phase == SL_PHASE_CREATED) {
    if (task_open(t) != SL_OK) return task_fail(t);
    t->phase = SL_PHASE_RUNNING;
  }
  if (t->restore_cs && restore_output_state(t) != SL_OK) {
    sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory restoring in-flight data");
    return task_fail(t);
  }
  if (t->job->ckpt) {
    ckpt_notify(t);
    if (!t->source && (poll_priority(t) != SL_OK ||
                       check_alignment_timeout(t) != SL_OK))
      return task_fail(t);
    if (t->ob_id && check_output_barrier(t) != SL_OK) return task_fail(t);
    /* A backpressured source still takes its checkpoint: an in-band
     * barrier queues behind its pending output, a priority barrier
     * overtakes it. */
    if (t->source && t->phase == SL_PHASE_RUNNING && source_trigger(t) != SL_OK)
      return task_fail(t);
  }
  if (!flush_pending(t)) return SL_RUN_WAIT_OUTPUT;
  if (t->phase == SL_PHASE_ENDING) return task_done(t);
  int rc = SL_OK;
  if (!fire_timers(t, &rc)) {
    if (rc != SL_OK) {
      sl__op_fail_err(t->timer_ops[0], NULL, rc);
      return task_fail(t);
    }
    return SL_RUN_WAIT_OUTPUT;
  }
  if (t->source) return run_source(t);
  if (t->restore_cs && t->restore_cs_off) {
    sl_run_result_t r;
    if (replay_channel_state(t, &r)) return r;
  }
  if (t->cur_buf && t->cur_buf->kind == SL_BUF_DATA) {
    sl_run_result_t r;
    if (process_data(t, &r)) return r;
  }
  return run_inputs(t);
}

sl_run_result_t sl__task_run(sl_task_t *t) {
  sl_run_result_t r = task_run_quantum(t);
  if (r != SL_RUN_DONE && t->n_timer_ops) arm_timers(t);
  return r;
}

void sl__task_destroy(sl_task_t *t) {
  if (t == NULL) return;
  if (t->cur_buf && t->cur_ch) sl__channel_recycle(t->cur_ch, t->cur_buf);
  sl_error_destroy(t->err);
  if (t->uc_snap && t->job->ckpt)
    t->job->ckpt->snapshot_drop(t->job->ckpt->ctx, t->uc_snap);
  if (t->ob_snap && t->job->ckpt)
    t->job->ckpt->snapshot_drop(t->job->ckpt->ctx, t->ob_snap);
  sl_bytes_close(&t->uc_state);
  sl_free(t->restore_cs);
  sl_bytes_close(&t->timer_key);
  sl_free(t->name);
  sl_free(t->ops);
  sl_free(t->inputs);
  sl_free(t->writers);
  sl_free(t->out_chs);
  sl_free(t->timer_ops);
  sl_free(t);
}

/* ------------------------------------------------------------------ */
/* Source output (public, sl_connector.h). */

/* A record while the task is idle: its split is active again, and the
 * receivers must hear so before the record, or they would keep leaving
 * this input out of their watermark and could pass the record's time. */
static bool wmgen_wake(sl_source_out_t *out) {
  sl_task_t *t = out->task;
  if (t->source->n_splits) out->wm->splits[out->wm->cur].is_idle = false;
  if (set_wm_idle(t, false) != SL_OK) {
    out->is_failed = true;
    return false;
  }
  return true;
}

bool sl_source_emit(sl_source_out_t *out, const sl_row_t *row) {
  if (SL_UNLIKELY(out->wm != NULL && out->task->is_wm_idle) &&
      !wmgen_wake(out))
    return false;
  int rc = sl__op_emit(out->op, row);
  if (SL_UNLIKELY(rc != SL_OK)) {
    out->is_failed = true;
    return false;
  }
  if (SL_UNLIKELY(out->wm != NULL) && !wmgen_on_record(out, row)) return false;
  if (out->budget) out->budget--;
  return out->budget != 0 && out->task->n_blocked == 0;
}

sl_row_builder_t *sl_source_builder(sl_source_out_t *out) {
  sl_row_builder_reset(&out->op->out_b, SL_ROW_INSERT);
  return &out->op->out_b;
}

bool sl_source_emit_builder(sl_source_out_t *out, sl_error_t **out_err) {
  sl_row_t row;
  int rc = sl_row_builder_finish(&out->op->out_b, &row, out_err);
  if (rc != SL_OK) {
    out->is_failed = true;
    return false;
  }
  return sl_source_emit(out, &row);
}

void sl_source_set_split(sl_source_out_t *out, uint32_t split) {
  sl_wmgen_t *g = out->wm;
  const sl_source_rt_t *src = out->task->source;
  if (g == NULL || src->n_splits == 0 || src->splits[g->cur].split == split)
    return;
  for (uint32_t k = 0; k < src->n_splits; k++)
    if (src->splits[k].split == split) g->cur = k;
}

void sl_source_split_finished(sl_source_out_t *out, uint32_t split) {
  sl_wmgen_t *g = out->wm;
  const sl_source_rt_t *src = out->task->source;
  if (g == NULL) return;
  for (uint32_t k = 0; k < src->n_splits; k++)
    if (src->splits[k].split == split) g->splits[k].is_finished = true;
}

int64_t sl_source_now(const sl_source_out_t *out) {
  return sl__task_now(out->task);
}

void sl_source_wait_until(sl_source_out_t *out, int64_t t_ns) {
  out->wait_until = t_ns;
}

void sl_source_waker_wake(sl_source_waker_t *w) {
  w->task->sched->ops->wake(w->task->sched, w->task);
}
