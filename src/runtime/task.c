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

/* Successful end; a sink whose final close fails still fails the job. */
static sl_run_result_t task_done(sl_task_t *t) {
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
    while (t->n_blocked == 0 &&
           sl__timers_pop(op->timers, now, &ts, &t->timer_key)) {
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
/* Checkpoints: notifications, source triggers, barrier alignment. */

static void unblock_inputs(sl_task_t *t) {
  for (uint32_t i = 0; i < t->n_inputs; i++) t->inputs[i]->is_blocked = false;
  t->align_id = 0;
  t->n_aligned = 0;
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
    /* An alignment for an aborted checkpoint must not block input. */
    if (t->align_id && t->align_id <= ab) unblock_inputs(t);
    for (uint32_t i = 0; i < t->n_ops; i++) {
      sl_op_t *op = t->ops[i];
      if (op->vt->checkpoint_aborted && op->is_open)
        op->vt->checkpoint_aborted(op, ab);
      if (op->kstate) sl__kstate_gc(op->kstate);
    }
  }
}

/* Snapshot the chain and send barrier id on every output.  The snapshot
 * comes first: a failed snapshot forwards nothing. */
static int take_checkpoint(sl_task_t *t, uint64_t id,
                           const sl_ckpt_timing_t *timing) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  t->ckpt_last = id;
  int rc = h->snapshot(h->ctx, t, id, timing);
  if (rc != SL_OK) return rc;
  if ((rc = SL_INJECT("task.before_barrier_forward")) != SL_OK)
    return sl__op_fail(t->ops[0], rc, "injected failure at "
                       "task.before_barrier_forward");
  for (uint32_t i = 0; i < t->n_writers; i++)
    if (sl__writer_send_event(t->writers[i], SL_BUF_BARRIER, (int64_t)id) !=
        SL_OK)
      return sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory sending a "
                         "checkpoint barrier");
  return SL_INJECT("task.after_barrier_forward") == SL_OK
             ? SL_OK
             : sl__op_fail(t->ops[0], SL_EFAILED, "injected failure at "
                           "task.after_barrier_forward");
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
  int rc = take_checkpoint(t, id, &timing);
  unblock_inputs(t);
  return rc;
}

/*
 * Barrier id arrived on input ch.  Aligned mode (Algorithm 1 of Carbone et
 * al.): block ch until every other input delivered id, then snapshot,
 * forward and unblock.  At-least-once: count without blocking.  A barrier
 * newer than the one being aligned abandons the older alignment (that
 * checkpoint cannot complete any more); an older one is stale.
 */
static int on_barrier(sl_task_t *t, sl_channel_t *ch, uint64_t id) {
  const sl_ckpt_hooks_t *h = t->job->ckpt;
  ch->last_barrier = id;
  if (h == NULL || id <= t->ckpt_abort_seen) return SL_OK;
  if (id < t->align_id || (t->align_id == 0 && id <= t->ckpt_last))
    return SL_OK;
  if (id > t->align_id) {
    if (t->align_id) unblock_inputs(t);
    t->align_id = id;
    t->align_first_ns = sl__task_now(t);
    ch->last_barrier = id;
    int rc = SL_INJECT("task.on_first_barrier");
    if (rc != SL_OK)
      return sl__op_fail(t->ops[0], rc, "injected failure at "
                         "task.on_first_barrier");
  }
  if (h->mode == SL_CKPT_ALIGNED) ch->is_blocked = true;
  t->n_aligned++;
  return is_aligned(t) ? finish_alignment(t) : SL_OK;
}

static sl_run_result_t task_end_input(sl_task_t *t) {
  if (t->job->ckpt) t->job->ckpt->task_finished(t->job->ckpt->ctx, t);
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
    if (sl__writer_send_event(t->writers[i], SL_BUF_EOP, 0) != SL_OK) {
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
  if (t->job->ckpt == NULL) return SL_OK;
  uint64_t trig = atomic_load_explicit(&t->ckpt_trigger, memory_order_acquire);
  if (trig <= t->ckpt_last) return SL_OK;
  sl_ckpt_timing_t timing = {sl__task_now(t), 0, false};
  return take_checkpoint(t, trig, &timing);
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
    if (rc == SL_POLL_WAIT) {
      flush_writers(t);
      if (out->wait_until) t->sched->ops->wake_at(t->sched, t, out->wait_until);
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
  while (off < b->len) {
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
  for (uint32_t n_buf = 0; n_buf < QUANTUM_BUFFERS; n_buf++) {
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
      t->cur_buf = sl__channel_pop(ch);
      t->cur_ch = ch;
      t->cur_off = 0;
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
      if (++t->n_finished == t->n_inputs) return task_end_input(t);
      if (t->align_id && is_aligned(t) && finish_alignment(t) != SL_OK)
        return task_fail(t);
      if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
      continue;
    }
    if (b->kind == SL_BUF_BARRIER) {
      uint64_t id = (uint64_t)b->value;
      sl__channel_recycle(ch, b);
      if (on_barrier(t, ch, id) != SL_OK) return task_fail(t);
      if (t->n_blocked) return SL_RUN_WAIT_OUTPUT;
      continue;
    }
    /* Watermarks: not produced yet. */
    sl__channel_recycle(ch, b);
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
  if (t->job->ckpt) ckpt_notify(t);
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

bool sl_source_emit(sl_source_out_t *out, const sl_row_t *row) {
  int rc = sl__op_emit(out->op, row);
  if (SL_UNLIKELY(rc != SL_OK)) {
    out->is_failed = true;
    return false;
  }
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

int64_t sl_source_now(const sl_source_out_t *out) {
  return sl__task_now(out->task);
}

void sl_source_wait_until(sl_source_out_t *out, int64_t t_ns) {
  out->wait_until = t_ns;
}

void sl_source_waker_wake(sl_source_waker_t *w) {
  w->task->sched->ops->wake(w->task->sched, w->task);
}
