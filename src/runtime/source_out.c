/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The source output calls of the public connector API (sl_connector.h):
 * a source reader emits rows through its sl_source_out_t, names the split
 * it reads and finishes splits; emitting feeds the source's watermark
 * generation (time/watermark.c).  Called on the source task's thread from
 * reader_poll.  See README.md ("Tasks").
 */
#include "runtime/task_int.h"

/* A record of the current split was emitted (sl_source_emit). */
static bool wmgen_on_record(sl_source_out_t *out, const sl_row_t *row) {
  sl_wmgen_t *g = out->wm;
  sl_task_t *t = out->task;
  if (t->source->n_splits == 0) return true;
  if (SL_UNLIKELY(sl_row_is_null(row, g->field))) {
    sl__op_fail(out->op, SL_EINVAL,
                "a record of split %u has a null event time in field '%s'",
                t->source->splits[g->cur].split, g->cfg->time_field);
    out->is_failed = true;
    return false;
  }
  if (sl__wmgen_on_record(g, sl_row_get_i64(row, g->field))) {
    int rc = sl__task_wmgen_emit(t);
    if (rc != SL_OK) {
      sl__op_fail_err(out->op, NULL, rc);
      out->is_failed = true;
      return false;
    }
  }
  return true;
}

/* A record while the task is idle: its split is active again, and the
 * receivers must hear so before the record, or they would keep leaving
 * this input out of their watermark and could pass the record's time. */
static bool wmgen_wake(sl_source_out_t *out) {
  sl_task_t *t = out->task;
  if (t->source->n_splits) out->wm->splits[out->wm->cur].is_idle = false;
  int rc = sl__task_set_wm_idle(t, false);
  if (rc != SL_OK) {
    sl__op_fail_err(out->op, NULL, rc); /* keeps the cause (first wins) */
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
    /* The cause (out of memory for an output buffer, a failing chained
     * operator) becomes the task's error unless one is already set. */
    sl__op_fail_err(out->op, NULL, rc);
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
  for (uint32_t k = 0; k < src->n_splits; k++) {
    if (src->splits[k].split != split) continue;
    if (g) g->splits[k].is_finished = true;
    if (src->link == NULL || src->is_finished[k]) continue;
    /* With an enumerator a finished split leaves the reader's state (the
     * enumerator's state knows it was handed out), and the enumerator
     * hears of it; a report it cannot take (out of memory) only costs the
     * enumerator that fact. */
    src->is_finished[k] = true;
    if (src->link &&
        src->link->split_finished(src->link->host, out->task->subtask,
                                  src->splits[k].id) != SL_OK)
      sl_log(SL_LOG_WARN, "cannot report split '%s' finished",
             src->splits[k].id);
  }
}

int sl_source_send_event(sl_source_out_t *out, const uint8_t *event,
                         size_t len) {
  const sl_source_rt_t *src = out->task->source;
  if (len > (1u << 20) || (len && event == NULL)) return SL_EINVAL;
  if (src->link == NULL) return SL_OK;
  return src->link->reader_event(src->link->host, out->task->subtask, event,
                                 len);
}

void sl_source_request_split(sl_source_out_t *out) {
  sl_source_rt_t *src = out->task->source;
  if (src->link == NULL || src->is_no_more) return;
  if (src->link->request_split(src->link->host, out->task->subtask) == SL_OK)
    src->is_requesting = true;
}

/* ------------------------------------------------------------------ */
/* The mailbox of a source with an enumerator. */

void sl__enum_event_free(sl_enum_event_t *ev) {
  if (ev == NULL) return;
  sl_free(ev->id);
  sl_free(ev->data);
  sl_free(ev);
}

void sl__source_deliver(sl_task_t *t, sl_enum_event_t *ev) {
  sl_source_rt_t *src = t->source;
  ev->next = NULL;
  pthread_mutex_lock(&src->mbox_lock);
  if (src->mbox_tail) src->mbox_tail->next = ev;
  else src->mbox = ev;
  src->mbox_tail = ev;
  pthread_mutex_unlock(&src->mbox_lock);
  t->sched->ops->wake(t->sched, t);
}

/* Make room for n more assigned splits (and their watermark slots). */
int sl__source_reserve(sl_source_rt_t *src, uint32_t n) {
  if (src->n_splits + n <= src->cap_splits && src->is_finished) return SL_OK;
  uint32_t cap = src->cap_splits ? src->cap_splits : 8;
  while (cap < src->n_splits + n) cap *= 2;
  sl_split_init_t *s = sl_realloc(src->splits, cap * sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  src->splits = s;
  bool *f = sl_realloc(src->is_finished, cap * sizeof(bool));
  if (f == NULL) return SL_ENOMEM;
  memset(f + src->n_splits, 0, (cap - src->n_splits) * sizeof(bool));
  src->is_finished = f;
  if (src->wm) {
    sl_wm_split_t *w = sl_realloc(src->wm->splits, cap * sizeof(*w));
    if (w == NULL) return SL_ENOMEM;
    src->wm->splits = w;
  }
  src->cap_splits = cap;
  return SL_OK;
}

/* Hand the assignments ev[0..n) to the reader (reader_add_splits); the
 * splits join the task's list, ids and positions owned by it. */
static int add_splits(sl_task_t *t, sl_enum_event_t **evs, uint32_t n) {
  sl_source_rt_t *src = t->source;
  int rc = sl__source_reserve(src, n);
  if (rc != SL_OK) return sl__op_fail(t->ops[0], rc, "out of memory");
  uint32_t first = src->n_splits;
  for (uint32_t i = 0; i < n; i++) {
    sl_split_init_t *si = &src->splits[first + i];
    memset(si, 0, sizeof(*si));
    si->split = first + i;
    si->id = evs[i]->id; /* moved */
    evs[i]->id = NULL;
    si->position = evs[i]->data; /* moved; NULL: the beginning */
    si->position_len = evs[i]->len;
    evs[i]->data = NULL;
    if (src->wm) {
      memset(&src->wm->splits[first + i], 0, sizeof(sl_wm_split_t));
      src->wm->splits[first + i].max_ts = SL_WATERMARK_MIN;
    }
  }
  src->n_splits += n;
  sl_error_t *err = NULL;
  rc = src->vt->reader_add_splits(src->reader, &src->splits[first], n, &err);
  if (rc != SL_OK) return sl__op_fail_err(t->ops[0], err, rc);
  /* A reader that had nothing to read told its receivers it was idle. */
  if (t->is_wm_idle && (rc = sl__task_set_wm_idle(t, false)) != SL_OK)
    return sl__op_fail_err(t->ops[0], NULL, rc);
  return SL_OK;
}

int sl__source_drain(sl_task_t *t) {
  sl_source_rt_t *src = t->source;
  if (src == NULL || src->link == NULL) return SL_OK;
  sl_error_t *err = NULL;
  int rc = src->link->status(src->link->host, &err);
  if (rc != SL_OK) return sl__op_fail_err(t->ops[0], err, rc);
  pthread_mutex_lock(&src->mbox_lock);
  sl_enum_event_t *ev = src->mbox;
  src->mbox = src->mbox_tail = NULL;
  pthread_mutex_unlock(&src->mbox_lock);
  /* Consecutive assignments go to the reader in one call. */
  sl_enum_event_t *batch[64];
  uint32_t nb = 0;
  while (ev && rc == SL_OK) {
    sl_enum_event_t *next = ev->next;
    if (ev->kind == SL_ENUM_EV_ASSIGN) {
      batch[nb++] = ev;
      src->is_requesting = false;
      if (nb == 64 || next == NULL || next->kind != SL_ENUM_EV_ASSIGN) {
        rc = add_splits(t, batch, nb);
        for (uint32_t i = 0; i < nb; i++) sl__enum_event_free(batch[i]);
        nb = 0;
      }
      ev = next;
      continue;
    }
    if (ev->kind == SL_ENUM_EV_CUSTOM && src->vt->reader_handle_event) {
      rc = src->vt->reader_handle_event(src->reader, ev->data, ev->len, &err);
      if (rc != SL_OK) sl__op_fail_err(t->ops[0], err, rc);
    } else if (ev->kind == SL_ENUM_EV_NO_MORE) {
      src->is_no_more = true;
      src->is_requesting = false;
    }
    sl__enum_event_free(ev);
    ev = next;
  }
  while (ev) { /* after a failure */
    sl_enum_event_t *next = ev->next;
    sl__enum_event_free(ev);
    ev = next;
  }
  return rc;
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
