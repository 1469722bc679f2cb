/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The channel state of unaligned checkpoints: its codec (writer, reader,
 * validator; the format is in chanstate.h and docs/checkpoint-format.md)
 * and the restore of a task from it.  Restoring validates the whole state
 * first, then, when the task first runs, pushes the output buffers into
 * their channels ahead of anything the task sends (they were produced
 * before the snapshot), then replays the input records into the head of
 * the chain before the task reads its channels.  See README.md
 * ("Checkpoint barriers").
 */
#include "runtime/chanstate.h"
#include "runtime/task_int.h"

#define RECORD_HDR 9u  /* kind, input, len */
#define BUFFER_HDR 13u /* kind, writer, channel, len */

/* ------------------------------------------------------------------ */
/* Codec. */

int sl__chanstate_put_record(sl_bytes_t *out, uint32_t input,
                             const uint8_t *row, uint32_t len) {
  uint8_t hdr[RECORD_HDR];
  hdr[0] = SL_CHANSTATE_RECORD;
  sl__put_u32le(hdr + 1, input);
  sl__put_u32le(hdr + 5, len);
  size_t was = out->len;
  if (sl_bytes_append(out, hdr, sizeof(hdr)) != SL_OK ||
      sl_bytes_append(out, row, len) != SL_OK) {
    out->len = was;
    return SL_ENOMEM;
  }
  return SL_OK;
}

int sl__chanstate_put_buffer(sl_bytes_t *out, uint32_t writer,
                             uint32_t channel, const uint8_t *data,
                             uint32_t len) {
  uint8_t hdr[BUFFER_HDR];
  hdr[0] = SL_CHANSTATE_BUFFER;
  sl__put_u32le(hdr + 1, writer);
  sl__put_u32le(hdr + 5, channel);
  sl__put_u32le(hdr + 9, len);
  size_t was = out->len;
  if (sl_bytes_append(out, hdr, sizeof(hdr)) != SL_OK ||
      sl_bytes_append(out, data, len) != SL_OK) {
    out->len = was;
    return SL_ENOMEM;
  }
  return SL_OK;
}

int sl__chanstate_put_buffer_hashed(sl_bytes_t *out, uint32_t writer,
                                    uint32_t channel, const uint8_t *data,
                                    uint32_t len) {
  uint32_t stored = 0;
  for (uint32_t off = 0; off < len;) {
    sl_frame_t f;
    off += sl__frame_read(data + off, true, &f);
    stored += 12 + f.len;
  }
  uint8_t hdr[BUFFER_HDR];
  hdr[0] = SL_CHANSTATE_BUFFER;
  sl__put_u32le(hdr + 1, writer);
  sl__put_u32le(hdr + 5, channel);
  sl__put_u32le(hdr + 9, stored);
  if (sl_bytes_reserve(out, BUFFER_HDR + (size_t)stored) != SL_OK)
    return SL_ENOMEM;
  (void)sl_bytes_append(out, hdr, sizeof(hdr));
  for (uint32_t off = 0; off < len;) {
    sl_frame_t f;
    const uint8_t *frame = data + off;
    off += sl__frame_read(frame, true, &f);
    (void)sl_bytes_append(out, frame, 12); /* len, hash */
    (void)sl_bytes_append(out, f.row, f.len);
  }
  return SL_OK;
}

int sl__chanstate_next(const uint8_t *p, size_t n, size_t *pos,
                       sl_chanstate_entry_t *out) {
  size_t off = *pos;
  if (off >= n) return 0;
  size_t left = n - off;
  const uint8_t *e = p + off;
  memset(out, 0, sizeof(*out));
  out->kind = e[0];
  if (e[0] == SL_CHANSTATE_RECORD) {
    if (left < RECORD_HDR) return SL_ECORRUPT;
    out->input = sl__get_u32le(e + 1);
    out->len = sl__get_u32le(e + 5);
    if (out->len > left - RECORD_HDR) return SL_ECORRUPT;
    out->data = e + RECORD_HDR;
    *pos = off + RECORD_HDR + out->len;
    return 1;
  }
  if (e[0] == SL_CHANSTATE_BUFFER) {
    if (left < BUFFER_HDR) return SL_ECORRUPT;
    out->writer = sl__get_u32le(e + 1);
    out->channel = sl__get_u32le(e + 5);
    out->len = sl__get_u32le(e + 9);
    if (out->len > left - BUFFER_HDR) return SL_ECORRUPT;
    out->data = e + BUFFER_HDR;
    *pos = off + BUFFER_HDR + out->len;
    return 1;
  }
  return SL_ECORRUPT;
}

/* The frames [u32 len][u64 hash if has_hash][row] of an output buffer. */
static int validate_frames(const uint8_t *p, uint32_t n,
                           const sl_schema_t *schema, bool has_hash) {
  uint32_t hl = has_hash ? 8 : 0;
  for (uint32_t off = 0; off < n;) {
    if (n - off < 4 + hl) return SL_ECORRUPT;
    uint32_t len = sl__get_u32le(p + off);
    if (len > n - off - 4 - hl ||
        sl_row_validate(schema, p + off + 4 + hl, len) != SL_OK)
      return SL_ECORRUPT;
    off += 4 + hl + len;
  }
  return SL_OK;
}

int sl__chanstate_validate(const uint8_t *p, size_t n,
                           const sl_chanstate_shape_t *shape) {
  size_t pos = 0;
  sl_chanstate_entry_t e;
  int rc;
  while ((rc = sl__chanstate_next(p, n, &pos, &e)) == 1) {
    if (e.kind == SL_CHANSTATE_RECORD) {
      if (e.input > 1 || shape->in_schema[e.input] == NULL ||
          sl_row_validate(shape->in_schema[e.input], e.data, e.len) != SL_OK)
        return SL_ECORRUPT;
      continue;
    }
    const sl_schema_t *schema = NULL;
    bool has_hash = false;
    if (!shape->out_channel(shape->user, e.writer, e.channel, &schema,
                            &has_hash) ||
        validate_frames(e.data, e.len, schema, has_hash) != SL_OK)
      return SL_ECORRUPT;
  }
  return rc; /* 0 at the end: SL_OK */
}

/* ------------------------------------------------------------------ */
/* Restoring a task. */

static bool task_out_channel(const void *user, uint32_t writer,
                             uint32_t channel, const sl_schema_t **out_schema,
                             bool *out_has_hash) {
  const sl_task_t *t = user;
  if (writer >= t->n_writers || channel >= t->writers[writer]->n_chs)
    return false;
  *out_schema = t->writers[writer]->schema;
  *out_has_hash = t->writers[writer]->chs[channel]->has_hash;
  return true;
}

int sl__task_restore_channel_state(sl_task_t *t, uint8_t *blob, size_t len) {
  const sl_op_t *head = t->ops[0];
  sl_chanstate_shape_t shape = {{NULL, NULL}, task_out_channel, t};
  if (t->source == NULL) { /* a source task has no input */
    shape.in_schema[0] = head->in_schema[0];
    shape.in_schema[1] = head->in_schema[1];
  }
  int rc = sl__chanstate_validate(blob, len, &shape);
  if (rc != SL_OK) return rc;
  SL_ASSERT(t->restore_cs == NULL);
  t->restore_cs = blob;
  t->restore_cs_len = len;
  t->restore_cs_off = 0;
  return SL_OK;
}

/* The stored frames [u32 len][u64 hash][row] of a hash channel, sent as
 * in-memory frames with the key extracted again (sl_frame_t). */
static int restore_hashed(sl_writer_t *w, sl_channel_t *ch, const uint8_t *p,
                          uint32_t n) {
  SL_ASSERT(ch->cur == NULL);
  for (uint32_t off = 0; off < n;) {
    uint32_t len = sl__get_u32le(p + off);
    sl_row_t row;
    sl_row_view(&row, w->schema, p + off + 12, len);
    off += 12 + len;
    int rc = sl__keysel_extract(w->keysel, &row, &w->keybuf);
    if (rc != SL_OK) return rc;
    rc = sl__channel_append_hashed(
        ch, &row, w->keybuf.data, (uint32_t)w->keybuf.len,
        sl__key_hash64(w->keybuf.data, w->keybuf.len));
    if (rc != SL_OK) return rc;
  }
  /* One stored buffer, one or more sent buffers, in order. */
  if (ch->cur) {
    sl_buf_t *b = ch->cur;
    ch->cur = NULL;
    sl__channel_send(ch, b);
  }
  return SL_OK;
}

/*
 * Restored channel state, step 1: push the output buffers into their
 * channels, ahead of anything the task will send (they were produced
 * before the snapshot).  The entries were validated on restore.
 */
int sl__chanstate_restore_outputs(sl_task_t *t) {
  if (t->restore_cs_off != 0) return SL_OK; /* done already */
  size_t pos = 0;
  sl_chanstate_entry_t e;
  while (sl__chanstate_next(t->restore_cs, t->restore_cs_len, &pos, &e) == 1) {
    if (e.kind != SL_CHANSTATE_BUFFER) continue;
    sl_writer_t *w = t->writers[e.writer];
    sl_channel_t *ch = w->chs[e.channel];
    if (ch->has_hash) {
      int rc = restore_hashed(w, ch, e.data, e.len);
      if (rc != SL_OK) return rc;
      continue;
    }
    sl_buf_t *b = sl__channel_get_buffer(ch, e.len);
    if (b == NULL) return SL_ENOMEM;
    memcpy(b->data, e.data, e.len);
    b->len = e.len;
    sl__channel_send(ch, b);
  }
  t->restore_cs_off = 1; /* marks step 1 done; step 2 restarts at 0 */
  t->restore_cs_pos = 0;
  return SL_OK;
}

/* Step 2: replay the input records before reading the channels. */
int sl__chanstate_replay(sl_task_t *t) {
  sl_op_t *head = t->ops[0];
  sl_chanstate_entry_t e;
  while (sl__chanstate_next(t->restore_cs, t->restore_cs_len,
                            &t->restore_cs_pos, &e) == 1) {
    if (e.kind != SL_CHANSTATE_RECORD) continue;
    sl_row_t row;
    sl_row_view(&row, head->in_schema[e.input], e.data, e.len);
    int rc = sl__op_push(head, e.input, &row);
    if (rc != SL_OK) {
      sl__op_fail_err(head, NULL, rc);
      return rc < 0 ? rc : SL_EFAILED;
    }
    if (t->n_blocked) return 1;
  }
  sl_free(t->restore_cs);
  t->restore_cs = NULL;
  t->restore_cs_len = t->restore_cs_off = t->restore_cs_pos = 0;
  return SL_OK;
}
