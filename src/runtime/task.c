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
#include "runtime/task_int.h"

#define QUANTUM_RECORDS 16384u /* source records per run */
#define QUANTUM_BUFFERS 64u    /* input buffers per run */
/* A run also ends after this much scheduler time, checked between input
 * buffers: a slow operator must not hold a worker for 64 buffers while a
 * source waits to take its checkpoint or other tasks wait to run. */
#define QUANTUM_NS 2000000
#define MAX_EMPTY_POLLS 8u     /* polls that return MORE without records */

int64_t sl__task_now(const sl_task_t *t) {
  return t->sched->ops->now(t->sched);
}

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
  rt->has_failed = true;
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
  /* Every output is flushed: a held snapshot can be submitted now. */
  if (t->ob_id && sl__align_check_output(t) != SL_OK) return task_fail(t);
  /* An operator may hold the end (a sink waiting for its last commit). */
  for (uint32_t i = 0; i < t->n_ops; i++) {
    sl_op_t *op = t->ops[i];
    if (!op->is_open || op->vt->may_finish == NULL) continue;
    int r = op->vt->may_finish(op);
    if (r < 0) return task_fail(t);
    if (r == 0) return SL_RUN_WAIT_INPUT;
  }
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
    /* With an enumerator: the reader registers and asks for a split. */
    if (src->link &&
        ((rc = src->link->add_reader(src->link->host, t->subtask)) != SL_OK ||
         (rc = src->link->request_split(src->link->host, t->subtask)) !=
             SL_OK))
      return sl__op_fail(t->ops[0], rc, "cannot reach the enumerator");
    if (src->link) src->is_requesting = true;
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

/*
 * Buffer timeout (Flink's execution.buffer-timeout).  A task sends a
 * partly filled output buffer when it runs out of input, before an event
 * (watermark, barrier, end), or when the buffer is full.  A task that
 * stays busy (a source that always has records, an input that always has
 * data) would otherwise hold a buffer of a rarely used channel until one
 * of those.  After every quantum (at most QUANTUM_NS of input, or
 * QUANTUM_RECORDS source records) the task looks at its held buffers: one
 * it sees for the first time is stamped with the time, one held for the
 * timeout is sent.  So a record leaves at most the timeout plus one
 * quantum after it was written, with one clock read per quantum and none
 * per record.  A task that waits for credit holds buffers of its other
 * channels too: it asks the scheduler to run it again when the earliest
 * of them is due.  A buffer is recognised by its address and length (a
 * recycled buffer seen shorter is a new one; one seen longer at the same
 * address is sent early at worst).
 */
static void flush_timed(sl_task_t *t, sl_run_result_t r) {
  const int64_t timeout = t->job->buffer_timeout_ns;
  int64_t now = 0, next = INT64_MAX;
  for (uint32_t i = 0; i < t->n_writers; i++) {
    sl_writer_t *w = t->writers[i];
    for (uint32_t c = 0; c < w->n_chs; c++) {
      sl_channel_t *ch = w->chs[c];
      sl_buf_t *b = ch->cur;
      if (b == NULL || b->len == 0) continue;
      if (now == 0) now = sl__task_now(t);
      if (ch->held != b || b->len < ch->held_len) {
        ch->held = b;
        ch->held_since = now;
      } else if (now - ch->held_since >= timeout) {
        ch->cur = NULL;
        ch->held = NULL;
        sl__channel_send(ch, b);
        continue;
      }
      ch->held_len = b->len;
      if (ch->held_since + timeout < next) next = ch->held_since + timeout;
    }
  }
  /* A task that returned AGAIN runs again soon anyway. */
  if (next != INT64_MAX && r != SL_RUN_AGAIN)
    t->sched->ops->wake_at(t->sched, t, next);
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
/* Event time: the task's side of watermarks.  The rules (generation per
 * split, idleness, the minimum over inputs) are in time/watermark.c; here
 * the task applies them: it fires event-time timers, tells its receivers,
 * and keeps each input's newest watermark in its channel. */

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

/* Move the task's watermark to wm, firing its due event-time timers, and
 * tell the receivers when is_sent. */
static int advance_wm(sl_task_t *t, int64_t wm, bool is_sent) {
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
  return is_sent ? send_wm_event(t, wm, SL_WM_ADVANCE) : SL_OK;
}

int sl__task_advance_wm(sl_task_t *t, int64_t wm) {
  return advance_wm(t, wm, true);
}

/* Tell receivers the task is idle or active again. */
int sl__task_set_wm_idle(sl_task_t *t, bool is_idle) {
  if (t->is_wm_idle == is_idle) return SL_OK;
  t->is_wm_idle = is_idle;
  return send_wm_event(t, t->wm, is_idle ? SL_WM_IDLE : SL_WM_ACTIVE);
}

/* Apply a minimum over the inputs: with none active, flush the largest of
 * their watermarks (as Flink does), then go idle. */
static int apply_wm_min(sl_task_t *t, const sl_wm_min_t *m) {
  if (m->n_active == 0) {
    int rc = sl__task_advance_wm(t, m->idle_max);
    return rc == SL_OK ? sl__task_set_wm_idle(t, true) : rc;
  }
  int rc = sl__task_set_wm_idle(t, false);
  return rc == SL_OK ? sl__task_advance_wm(t, m->min) : rc;
}

/* The inputs' watermarks changed: recompute the task's. */
static int input_wm_update(sl_task_t *t) {
  sl_wm_min_t m;
  sl__wm_min_init(&m);
  for (uint32_t i = 0; i < t->n_inputs; i++) {
    const sl_channel_t *c = t->inputs[i];
    if (!c->is_finished) sl__wm_min_add(&m, c->wm, c->is_idle);
  }
  if (m.n_open == 0) return SL_OK; /* every input ended */
  return apply_wm_min(t, &m);
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

int sl__task_wmgen_emit(sl_task_t *t) {
  sl_wm_min_t m;
  sl__wmgen_combine(t->source->wm, t->source->n_splits, &m);
  return apply_wm_min(t, &m);
}

/*
 * Final checkpoint (jobs with a two-phase-commit sink).  A sink commits an
 * epoch only when a checkpoint after it completes, so the job's last epoch
 * needs a checkpoint taken after the last row.  A source task that read
 * all its splits does not end: it tells the coordinator (source_ended) and
 * waits, still taking checkpoints at its end position.  When every source
 * has ended, the coordinator marks the next checkpoint F final on every
 * task and triggers it.  Each task runs its end of input (watermark to the
 * end, end_input of every operator: what it emits lies before barrier F)
 * before its snapshot for F; F is always aligned and in band.  Sources
 * send EOP right after barrier F; a task whose operator still waits for a
 * commit (may_finish) stays in ENDING until F completes and the commit is
 * done.  If F aborts, such a sink fails the task and the job restarts from
 * its latest completed checkpoint.
 */
int sl__task_end_work(sl_task_t *t) {
  if (t->is_end_done) return SL_OK;
  t->is_end_done = true;
  /* End of input: every pending event-time timer is due.  A task that is
   * idle at its end (a reader that never had a split, or whose splits
   * all finished; a task whose inputs are all idle) stays idle: told
   * "active at the end of time", a receiver whose other inputs are still
   * idle (readers waiting for their first split) would jump to the end of
   * time and take their records as late.  Its end of partition takes it
   * out of its receivers' minimum instead. */
  int rc = t->is_wm_idle ? advance_wm(t, SL_WATERMARK_MAX, false)
                         : sl__task_advance_wm(t, SL_WATERMARK_MAX);
  if (rc != SL_OK) return rc;
  for (uint32_t i = 0; i < t->n_ops; i++) {
    sl_op_t *op = t->ops[i];
    if (op->vt->end_input) {
      rc = op->vt->end_input(op);
      if (rc != SL_OK) return sl__op_fail_err(op, NULL, rc);
    }
  }
  return SL_OK;
}

static sl_run_result_t task_end_input(sl_task_t *t) {
  if (t->job->ckpt) t->job->ckpt->task_finished(t->job->ckpt->ctx, t);
  if (sl__task_end_work(t) != SL_OK) return task_fail(t);
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

static sl_run_result_t run_source(sl_task_t *t) {
  sl_source_rt_t *src = t->source;
  sl_source_out_t *out = &t->sout;
  out->budget = QUANTUM_RECORDS;
  for (uint32_t empty = 0;;) {
    if (src->link && sl__source_drain(t) != SL_OK) return task_fail(t);
    if (sl__align_source_trigger(t) != SL_OK) return task_fail(t);
    if (t->is_source_ended) { /* waiting for the final checkpoint */
      if (t->is_end_done) return task_end_input(t);
      return t->n_blocked ? SL_RUN_WAIT_OUTPUT : SL_RUN_WAIT_INPUT;
    }
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
    /* A reader of an enumerator ends only once no more splits will come;
     * until then it asks for one and waits for its mailbox. */
    if (rc == SL_POLL_END && src->link && !src->is_no_more) {
      if (!src->is_requesting) sl_source_request_split(out);
      bool has_mail;
      pthread_mutex_lock(&src->mbox_lock);
      has_mail = src->mbox != NULL;
      pthread_mutex_unlock(&src->mbox_lock);
      if (has_mail) continue;
      rc = SL_POLL_WAIT;
    }
    if (rc == SL_POLL_END) {
      if (!t->job->needs_final_ckpt || t->job->ckpt == NULL)
        return task_end_input(t);
      t->is_source_ended = true;
      flush_writers(t);
      t->job->ckpt->source_ended(t->job->ckpt->ctx, t);
      continue; /* the final trigger may be there already */
    }
    if (src->wm && sl__wmgen_tick(src->wm, src->n_splits, sl__task_now(t)) &&
        sl__task_wmgen_emit(t) != SL_OK)
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
  const bool has_hash = t->cur_ch->has_hash;
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
      if (sl__align_poll_priority(t) != SL_OK ||
          sl__align_check_timeout(t) != SL_OK) {
        t->in_key = NULL;
        *out_result = task_fail(t);
        return true;
      }
    }
    sl_frame_t f;
    off += sl__frame_read(b->data + off, has_hash, &f);
    if (has_hash) {
      t->in_key = f.key;
      t->in_key_len = f.key_len;
      t->in_hash = f.hash;
    }
    sl_row_t row;
    sl_row_view(&row, schema, f.row, f.len);

    int rc = sl__op_push(head, input, &row);
    if (SL_UNLIKELY(rc != SL_OK)) {
      t->in_key = NULL;
      sl__op_fail_err(head, NULL, rc);
      *out_result = task_fail(t);
      return true;
    }
    if (SL_UNLIKELY(t->n_blocked) && off < b->len) {
      t->in_key = NULL;
      t->cur_off = off;
      *out_result = SL_RUN_WAIT_OUTPUT;
      return true;
    }
  }
  t->in_key = NULL;
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
      if (t->job->ckpt && sl__align_poll_priority(t) != SL_OK)
        return task_fail(t);
      t->cur_idx = ch->head;
      t->cur_buf = sl__channel_pop(ch);
      t->cur_ch = ch;
      t->cur_off = 0;
      if (t->uc_id && !ch->uc_done && !ch->uc_has_cutoff &&
          !sl__idx_before(t->cur_idx, ch->uc_captured)) {
        /* No barrier on ch yet: this buffer was sent before it. */
        if (sl__align_capture_input(t, ch, t->cur_buf, 0) != SL_OK) {
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
      if (t->uc_id && sl__align_input_done(t, ch) != SL_OK) return task_fail(t);
      if (++t->n_finished == t->n_inputs) return task_end_input(t);
      if (t->align_id && sl__align_is_complete(t) &&
          sl__align_finish(t) != SL_OK)
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
      if (sl__align_on_barrier(t, ch, id, ts) != SL_OK) return task_fail(t);
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
  if (t->restore_cs && sl__chanstate_restore_outputs(t) != SL_OK) {
    sl__op_fail(t->ops[0], SL_ENOMEM, "out of memory restoring in-flight data");
    return task_fail(t);
  }
  if (t->job->ckpt) {
    sl__align_notify(t);
    for (uint32_t i = 0; i < t->n_ops; i++) {
      sl_op_t *op = t->ops[i];
      if (op->is_open && op->vt->poll && op->vt->poll(op) != SL_OK)
        return task_fail(t);
    }
    if (!t->source && (sl__align_poll_priority(t) != SL_OK ||
                       sl__align_check_timeout(t) != SL_OK))
      return task_fail(t);
    if (t->ob_id && sl__align_check_output(t) != SL_OK) return task_fail(t);
    /* A backpressured source still takes its checkpoint: an in-band
     * barrier queues behind its pending output, a priority barrier
     * overtakes it. */
    if (t->source && t->phase == SL_PHASE_RUNNING &&
        sl__align_source_trigger(t) != SL_OK)
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
    rc = sl__chanstate_replay(t);
    if (rc < 0) return task_fail(t);
    if (rc > 0) return SL_RUN_WAIT_OUTPUT;
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
  if (r != SL_RUN_DONE && t->job->buffer_timeout_ns > 0) flush_timed(t, r);
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
