/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The basic operators: source head, map, filter, flat_map, (keyed) process
 * and connect, union and sink.  Each wraps user functions or a connector;
 * errors are recorded on the task with the operator's uid.  See README.md.
 */
#include "ops/ops.h"

static const sl_op_cfg_t *cfg_of(const sl_op_t *op) { return op->cfg; }

static int user_rc(sl_op_t *op, int rc, const char *what) {
  if (rc >= 0) return SL_OK;
  return sl__op_fail(op, rc, "%s failed: %s (%s)", what, sl_errname(rc),
                     sl_strerror(rc));
}

/* Source head: rows arrive through sl_source_emit(), never process(). */
static int source_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  SL_UNUSED(row);
  return sl__op_fail(op, SL_ESTATE, "a source has no input");
}

const sl_op_vt_t sl__op_source_vt = {"source", NULL, source_process,
                                     NULL,     NULL, NULL};

static int map_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  const sl_op_cfg_t *c = cfg_of(op);
  sl_row_builder_reset(&op->out_b, sl_row_kind(row));
  int rc = c->map(op, c->user, row, &op->out_b);
  if (SL_UNLIKELY(rc < 0)) return user_rc(op, rc, "map function");
  sl_row_t out;
  sl_error_t *err = NULL;
  rc = sl_row_builder_finish(&op->out_b, &out, &err);
  if (SL_UNLIKELY(rc != SL_OK)) return sl__op_fail_err(op, err, rc);
  return sl__op_emit(op, &out);
}

const sl_op_vt_t sl__op_map_vt = {"map", NULL, map_process, NULL, NULL, NULL};

static int filter_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  const sl_op_cfg_t *c = cfg_of(op);
  int rc = c->filter(op, c->user, row);
  if (rc > 0) return sl__op_emit(op, row);
  return rc == 0 ? SL_OK : user_rc(op, rc, "filter function");
}

const sl_op_vt_t sl__op_filter_vt = {"filter", NULL, filter_process,
                                     NULL,     NULL, NULL};

static int flat_map_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  const sl_op_cfg_t *c = cfg_of(op);
  int rc = c->flat_map(op, c->user, row, &op->collector);
  return rc < 0 ? user_rc(op, rc, "flat_map function") : SL_OK;
}

const sl_op_vt_t sl__op_flat_map_vt = {"flat_map", NULL, flat_map_process,
                                       NULL,       NULL, NULL};

/* Process and connect: one vtable; keyed when op->kstate is set. */
static int process_open(sl_op_t *op) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.open == NULL) return SL_OK;
  return user_rc(op, c->fns.open(op, c->user), "open()");
}

static int process_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (op->kstate) {
    int rc = sl__op_set_key_from_row(op, input, row);
    if (rc != SL_OK) return rc;
  }
  int rc = input == 0 ? c->fns.process(op, c->user, row)
                      : c->fns.process2(op, c->user, row);
  return rc < 0 ? user_rc(op, rc, "process function") : SL_OK;
}

static int process_on_timer(sl_op_t *op, int64_t ts) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.on_timer == NULL) return SL_OK;
  return user_rc(op, c->fns.on_timer(op, c->user, ts), "on_timer()");
}

static int process_on_event_timer(sl_op_t *op, int64_t ts) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.on_event_timer == NULL) return SL_OK;
  return user_rc(op, c->fns.on_event_timer(op, c->user, ts),
                 "on_event_timer()");
}

static int process_end_input(sl_op_t *op) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.end_input == NULL) return SL_OK;
  return user_rc(op, c->fns.end_input(op, c->user), "end_input()");
}

static void process_close(sl_op_t *op, bool is_success) {
  SL_UNUSED(is_success);
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.close) c->fns.close(op, c->user);
}

static void process_ckpt_complete(sl_op_t *op, uint64_t id) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.checkpoint_complete) c->fns.checkpoint_complete(op, c->user, id);
}

static void process_ckpt_aborted(sl_op_t *op, uint64_t id) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->fns.checkpoint_aborted) c->fns.checkpoint_aborted(op, c->user, id);
}

const sl_op_vt_t sl__op_process_vt = {
    "process",         process_open,          process_process,
    process_on_timer,  process_end_input,     process_close,
    process_ckpt_complete, process_ckpt_aborted, process_on_event_timer};

static int union_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  return sl__op_emit(op, row);
}

const sl_op_vt_t sl__op_union_vt = {"union", NULL, union_process,
                                    NULL,    NULL, NULL};

/* Sink: the writer lives in op->impl. */
static int sink_open(sl_op_t *op) {
  const sl_op_cfg_t *c = cfg_of(op);
  uint64_t restored = sl__task_restored_checkpoint(op->task);
  sl_sink_init_t init = {op->subtask,     op->parallelism, op->in_schema[0],
                         op->uid,         restored != 0,   restored,
                         sl__task_job(op->task)->job_name, 0};
  sl_error_t *err = NULL;
  int rc = c->sink_vt->writer_open(c->sink_ctx, &init, &op->impl, &err);
  if (rc != SL_OK) {
    op->impl = NULL;
    return sl__op_fail_err(op, err, rc);
  }
  return SL_OK;
}

static int sink_process(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  SL_UNUSED(input);
  const sl_op_cfg_t *c = cfg_of(op);
  sl_error_t *err = NULL;
  int rc = c->sink_vt->write(op->impl, row, &err);
  if (SL_UNLIKELY(rc != SL_OK)) return sl__op_fail_err(op, err, rc);
  return SL_OK;
}

static int sink_end_input(sl_op_t *op) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (c->sink_vt->flush == NULL) return SL_OK;
  sl_error_t *err = NULL;
  int rc = c->sink_vt->flush(op->impl, &err);
  return rc == SL_OK ? SL_OK : sl__op_fail_err(op, err, rc);
}

/* Before a snapshot: what the checkpoint covers reaches the output. */
static int sink_pre_snapshot(sl_op_t *op, uint64_t id) {
  SL_UNUSED(id);
  return op->impl ? sink_end_input(op) : SL_OK;
}

static void sink_close(sl_op_t *op, bool is_success) {
  const sl_op_cfg_t *c = cfg_of(op);
  if (op->impl == NULL) return;
  sl_error_t *err = NULL;
  int rc = c->sink_vt->writer_close(op->impl, is_success, &err);
  op->impl = NULL;
  if (rc != SL_OK) {
    /* A failed close on success loses output: make the task fail. */
    if (is_success) sl__op_fail_err(op, err, rc);
    else sl_error_destroy(err);
  }
}

const sl_op_vt_t sl__op_sink_vt = {
    "sink", sink_open, sink_process, NULL, sink_end_input, sink_close,
    NULL,   NULL,      NULL,         sink_pre_snapshot};
