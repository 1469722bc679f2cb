/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator glue: emitting to chained operators and record writers, the
 * partitioners, key extraction, and the public sl_ctx_* calls that user
 * functions make.  See README.md ("Operators and chaining").
 */
#include <stdarg.h>
#include <stdio.h>

#include "runtime/task_int.h"

/* The canonical bytes of sl_key_add_field for fixed-width fields only
 * (ks->max_fixed != 0), written in one pass to p (room for max_fixed
 * bytes).  @return their length. */
static inline uint32_t keysel_fixed(const sl_keysel_t *ks, const sl_row_t *row,
                                    uint8_t *p) {
  uint8_t *p0 = p;
  for (uint32_t i = 0; i < ks->n_fields; i++) {
    uint32_t f = ks->fields[i];
    if (sl_row_is_null(row, f)) {
      *p++ = 0;
      continue;
    }
    *p++ = 1;
    switch (ks->types[i]) {
    case SL_TYPE_BOOL:
      *p++ = sl_row_get_bool(row, f) ? 1 : 0;
      break;
    case SL_TYPE_INT32:
      sl__put_u32be(p, (uint32_t)sl_row_get_i32(row, f));
      p += 4;
      break;
    case SL_TYPE_FLOAT64: {
      double d = sl_row_get_f64(row, f);
      uint64_t bits;
      if (d == 0.0) d = 0.0;
      if (d != d) bits = 0x7ff8000000000000ull;
      else memcpy(&bits, &d, 8);
      sl__put_u64be(p, bits);
      p += 8;
      break;
    }
    default:
      sl__put_u64be(p, (uint64_t)sl_row_get_i64(row, f));
      p += 8;
      break;
    }
  }
  return (uint32_t)(p - p0);
}

int sl__keysel_extract(const sl_keysel_t *ks, const sl_row_t *row,
                       sl_bytes_t *out) {
  out->len = 0;
  if (ks->fn) return ks->fn(ks->user, row, out);
  if (SL_LIKELY(ks->max_fixed != 0)) {
    if (SL_UNLIKELY(out->cap < ks->max_fixed) &&
        sl_bytes_reserve(out, ks->max_fixed) != SL_OK)
      return SL_ENOMEM;
    out->len = keysel_fixed(ks, row, out->data);
    return SL_OK;
  }
  for (uint32_t i = 0; i < ks->n_fields; i++) {
    int rc = sl_key_add_field(out, row, ks->fields[i]);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Errors. */

static void op_prefix(sl_op_t *op, char *buf, size_t size) {
  snprintf(buf, size, "operator '%s' (subtask %u of %u)", op->uid,
           op->subtask + 1, op->parallelism);
}

int sl__op_fail_err(sl_op_t *op, sl_error_t *err, int code) {
  sl_task_t *t = op->task;
  if (t->err != NULL) {
    sl_error_destroy(err);
    return code;
  }
  if (err == NULL)
    err = sl_error_create(code, "failed with %s (%s)", sl_errname(code),
                          sl_strerror(code));
  if (err == NULL) return code;
  char pre[256];
  op_prefix(op, pre, sizeof(pre));
  sl_error_prefix(err, "%s", pre);
  t->err = err;
  return code;
}

int sl__op_fail(sl_op_t *op, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return sl__op_fail_err(op, sl_error_create(code, "%s", msg), code);
}

int sl_ctx_fail(sl_ctx_t *ctx, int code, const char *fmt, ...) {
  if (code >= 0) code = SL_EUSER;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return sl__op_fail_err(ctx, sl_error_create(code, "%s", msg), code);
}

/* ------------------------------------------------------------------ */
/* Emitting. */

static inline void counter_inc(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

int sl__op_emit(sl_op_t *op, const sl_row_t *row) {
  counter_inc(&op->n_out);
  if (SL_LIKELY(op->n_targets == 1)) {
    sl_out_target_t *t = &op->targets[0];
    return t->op ? sl__op_push(t->op, t->input, row)
                 : sl__writer_emit(t->w, row);
  }
  for (uint32_t i = 0; i < op->n_targets; i++) {
    sl_out_target_t *t = &op->targets[i];
    int rc = t->op ? sl__op_push(t->op, t->input, row)
                   : sl__writer_emit(t->w, row);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

int sl__op_emit_side(sl_op_t *op, uint32_t port, const sl_row_t *row) {
  for (uint32_t i = 0; i < op->n_side_targets; i++) {
    if (op->side_ports[i] != port) continue;
    sl_out_target_t *t = &op->side_targets[i];
    int rc = t->op ? sl__op_push(t->op, t->input, row)
                   : sl__writer_emit(t->w, row);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/* Room for a hash frame of need bytes in ch's current buffer. */
static inline uint8_t *frame_room(sl_channel_t *ch, uint32_t need) {
  sl_buf_t *b = ch->cur;
  if (SL_UNLIKELY(b == NULL || b->cap - b->len < need)) {
    if (b) {
      ch->cur = NULL;
      sl__channel_send(ch, b);
    }
    b = sl__channel_get_buffer(ch, need);
    if (b == NULL) return NULL;
    ch->cur = b;
  }
  uint8_t *p = b->data + b->len;
  b->len += need;
  b->n_records++;
  return p;
}

/* Copy a row into a frame: rows of 8 to 32 bytes (small records) with two
 * overlapping fixed-size moves instead of a call to memcpy. */
static inline void copy_row(uint8_t *dst, const uint8_t *src, uint32_t len) {
  if (len >= 16 && len <= 32) {
    memcpy(dst, src, 16);
    memcpy(dst + len - 16, src + len - 16, 16);
  } else if (len >= 8 && len < 16) {
    memcpy(dst, src, 8);
    memcpy(dst + len - 8, src + len - 8, 8);
  } else {
    memcpy(dst, src, len);
  }
}

static inline void frame_put_header(uint8_t *p, const sl_row_t *row,
                                    uint32_t key_len, uint64_t hash) {
  memcpy(p, &row->len, 4);
  memcpy(p + 4, &hash, 8);
  memcpy(p + 12, &key_len, 4);
}

int sl__channel_append_hashed(sl_channel_t *ch, const sl_row_t *row,
                              const uint8_t *key, uint32_t key_len,
                              uint64_t hash) {
  uint8_t *p = frame_room(ch, SL_FRAME_HASH_HDR + key_len + row->len);
  if (p == NULL) return SL_ENOMEM;
  frame_put_header(p, row, key_len, hash);
  memcpy(p + SL_FRAME_HASH_HDR, key, key_len);
  copy_row(p + SL_FRAME_HASH_HDR + key_len, row->data, row->len);
  return SL_OK;
}

/* The key of up to SL_KEY_STACK bytes is written on the stack, hashed,
 * routed, and copied with the row into the frame. */
#define SL_KEY_STACK 64

static int emit_hashed(sl_writer_t *w, const sl_row_t *row) {
  const sl_keysel_t *ks = w->keysel;
  const uint8_t *key;
  uint32_t key_len;
  uint8_t small[SL_KEY_STACK];
  if (SL_LIKELY(ks->fn == NULL && ks->max_fixed != 0 &&
                ks->max_fixed <= SL_KEY_STACK)) {
    key_len = keysel_fixed(ks, row, small);
    key = small;
  } else {
    int rc = sl__keysel_extract(ks, row, &w->keybuf);
    if (rc != SL_OK) return rc;
    key = w->keybuf.data;
    key_len = (uint32_t)w->keybuf.len;
  }
  uint64_t h = sl__key_hash64(key, key_len);
  uint32_t owner = 0;
  if (w->n_chs > 1) {
    uint32_t kg =
        sl_key_group_of_hash(sl__key_hash_fold(h), w->max_parallelism);
    owner = sl_key_group_owner(kg, w->max_parallelism, w->n_chs);
  }
  uint8_t *p =
      frame_room(w->chs[owner], SL_FRAME_HASH_HDR + key_len + row->len);
  if (p == NULL) return SL_ENOMEM;
  frame_put_header(p, row, key_len, h);
  /* One int64 key (9 bytes), the common case: a fixed-size copy. */
  if (key_len == 9) memcpy(p + SL_FRAME_HASH_HDR, key, 9);
  else memcpy(p + SL_FRAME_HASH_HDR, key, key_len);
  copy_row(p + SL_FRAME_HASH_HDR + key_len, row->data, row->len);
  return SL_OK;
}

static int append_row(sl_channel_t *ch, const sl_row_t *row) {
  uint32_t need = 4 + row->len;
  sl_buf_t *b = ch->cur;
  if (SL_UNLIKELY(b == NULL || b->cap - b->len < need)) {
    if (b) {
      ch->cur = NULL;
      sl__channel_send(ch, b);
    }
    b = sl__channel_get_buffer(ch, need);
    if (b == NULL) return SL_ENOMEM;
    ch->cur = b;
  }
  memcpy(b->data + b->len, &row->len, 4);
  copy_row(b->data + b->len + 4, row->data, row->len);
  b->len += need;
  b->n_records++;
  return SL_OK;
}

static int writer_emit(sl_writer_t *w, const sl_row_t *row) {
  switch (w->part) {
  case SL_PART_FORWARD:
    return append_row(w->chs[0], row);
  case SL_PART_REBALANCE: {
    sl_channel_t *ch = w->chs[w->rr];
    if (++w->rr == w->n_chs) w->rr = 0;
    return append_row(ch, row);
  }
  case SL_PART_HASH:
    return emit_hashed(w, row);
  case SL_PART_BROADCAST:
    for (uint32_t i = 0; i < w->n_chs; i++) {
      int rc = append_row(w->chs[i], row);
      if (rc != SL_OK) return rc;
    }
    return SL_OK;
  }
  return SL_EINVAL;
}

int sl__writer_emit(sl_writer_t *w, const sl_row_t *row) {
  int rc = writer_emit(w, row);
  /* Buffer timeout 0 (sl_job_config_t.buffer_timeout_ms): at once. */
  if (SL_UNLIKELY(w->is_flush_each) && rc == SL_OK) sl__writer_flush(w);
  return rc;
}

void sl__writer_flush(sl_writer_t *w) {
  for (uint32_t i = 0; i < w->n_chs; i++) {
    sl_channel_t *ch = w->chs[i];
    if (ch->cur && ch->cur->len) {
      sl_buf_t *b = ch->cur;
      ch->cur = NULL;
      sl__channel_send(ch, b);
    }
  }
}

int sl__writer_send_event(sl_writer_t *w, sl_buf_kind_t kind, int64_t value,
                          int64_t ts) {
  sl__writer_flush(w);
  for (uint32_t i = 0; i < w->n_chs; i++) {
    sl_buf_t *b = sl__buf_new(0);
    if (b == NULL) return SL_ENOMEM;
    b->kind = (uint8_t)kind;
    b->value = value;
    b->ts = ts;
    sl__channel_send(w->chs[i], b);
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Keys. */

int sl__op_set_key_from_row(sl_op_t *op, uint32_t input, const sl_row_t *row) {
  sl_task_t *t = op->task;
  const uint8_t *key;
  uint32_t key_len;
  uint64_t h;
  int rc;
  if (SL_LIKELY(t->in_key != NULL) && t->ops[0] == op) {
    /* From a hash channel: the sender extracted and hashed the key with
     * the same key selector (the edge's), and the frame carries both. */
    key = t->in_key;
    key_len = t->in_key_len;
    h = t->in_hash;
  } else {
    rc = sl__keysel_extract(op->keysel[input], row, &op->keybuf);
    if (rc != SL_OK)
      return sl__op_fail(op, rc, "cannot compute the key of a row: %s",
                         sl_strerror(rc));
    key = op->keybuf.data;
    key_len = (uint32_t)op->keybuf.len;
    h = sl__key_hash64(key, key_len);
  }
  rc = sl__kstate_set_key(op->kstate, key, key_len, h);
  if (SL_UNLIKELY(rc != SL_OK)) {
    if (rc == SL_EINVAL)
      return sl__op_fail(
          op, SL_ESTATE,
          "a row of key group %u arrived at a subtask that does not own it; "
          "the key function must be deterministic",
          sl_key_group_of_hash(sl__key_hash_fold(h), op->max_parallelism));
    return sl__op_fail(op, rc, "cannot set the current key");
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Public context calls. */

uint32_t sl_ctx_subtask(const sl_ctx_t *ctx) { return ctx->subtask; }
uint32_t sl_ctx_parallelism(const sl_ctx_t *ctx) { return ctx->parallelism; }
uint32_t sl_ctx_max_parallelism(const sl_ctx_t *ctx) {
  return ctx->max_parallelism;
}
const char *sl_ctx_uid(const sl_ctx_t *ctx) { return ctx->uid; }
void sl_ctx_set_local(sl_ctx_t *ctx, void *local) { ctx->local = local; }
void *sl_ctx_local(const sl_ctx_t *ctx) { return ctx->local; }
int64_t sl_ctx_now(const sl_ctx_t *ctx) { return sl__task_now(ctx->task); }

sl_row_builder_t *sl_ctx_builder(sl_ctx_t *ctx) {
  sl_row_builder_reset(&ctx->out_b, SL_ROW_INSERT);
  return &ctx->out_b;
}

int sl_ctx_emit(sl_ctx_t *ctx, const sl_row_t *row) {
  if (SL_UNLIKELY(!sl_schema_equal(row->schema, ctx->out_schema)))
    return sl__op_fail(ctx, SL_ETYPE,
                       "emitted a row whose schema is not the operator's "
                       "output schema");
  return sl__op_emit(ctx, row);
}

int sl_ctx_emit_builder(sl_ctx_t *ctx) {
  sl_row_t row;
  sl_error_t *err = NULL;
  int rc = sl_row_builder_finish(&ctx->out_b, &row, &err);
  if (rc != SL_OK) return sl__op_fail_err(ctx, err, rc);
  return sl__op_emit(ctx, &row);
}

sl_slice_t sl_ctx_current_key(const sl_ctx_t *ctx) {
  if (ctx->kstate == NULL) {
    sl_slice_t none = {NULL, 0};
    return none;
  }
  return sl__kstate_current_key(ctx->kstate);
}

int sl_ctx_timer_register(sl_ctx_t *ctx, int64_t ts) {
  if (ctx->timers == NULL || ctx->kstate == NULL) return SL_ESTATE;
  sl_slice_t k = sl__kstate_current_key(ctx->kstate);
  return sl__timers_add(ctx->timers, ts, k.ptr, k.len);
}

int sl_ctx_timer_delete(sl_ctx_t *ctx, int64_t ts) {
  if (ctx->timers == NULL || ctx->kstate == NULL) return SL_ESTATE;
  sl_slice_t k = sl__kstate_current_key(ctx->kstate);
  return sl__timers_delete(ctx->timers, ts, k.ptr, k.len);
}

int64_t sl_ctx_watermark(const sl_ctx_t *ctx) { return ctx->task->wm; }

int sl_ctx_event_timer_register(sl_ctx_t *ctx, int64_t ts) {
  if (ctx->etimers == NULL || ctx->kstate == NULL) return SL_ESTATE;
  sl_slice_t k = sl__kstate_current_key(ctx->kstate);
  return sl__timers_add(ctx->etimers, ts, k.ptr, k.len);
}

int sl_ctx_event_timer_delete(sl_ctx_t *ctx, int64_t ts) {
  if (ctx->etimers == NULL || ctx->kstate == NULL) return SL_ESTATE;
  sl_slice_t k = sl__kstate_current_key(ctx->kstate);
  return sl__timers_delete(ctx->etimers, ts, k.ptr, k.len);
}

int sl_ctx_state(sl_ctx_t *ctx, const sl_state_desc_t *desc,
                 sl_state_t **out) {
  if (ctx->kstate == NULL)
    return sl__op_fail(ctx, SL_ESTATE,
                       "state '%s' needs a keyed stream (use key_by before "
                       "this operator)",
                       desc->name ? desc->name : "");
  if (!ctx->is_opening)
    return sl__op_fail(ctx, SL_ESTATE,
                       "state '%s' must be declared in open()",
                       desc->name ? desc->name : "");
  sl_error_t *err = NULL;
  int rc = sl__kstate_register(ctx->kstate, desc, out, &err);
  if (rc != SL_OK) return sl__op_fail_err(ctx, err, rc);
  return SL_OK;
}

int sl_collect(sl_collector_t *out, const sl_row_t *row) {
  return sl_ctx_emit(out->op, row);
}

sl_row_builder_t *sl_collector_builder(sl_collector_t *out) {
  return sl_ctx_builder(out->op);
}

int sl_collect_builder(sl_collector_t *out) {
  return sl_ctx_emit_builder(out->op);
}
