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
