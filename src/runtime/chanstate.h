/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The channel-state codec: the byte format of the in-flight records an
 * unaligned checkpoint keeps (the `.channel` files of
 * docs/checkpoint-format.md).  One writer (the capture in barrier_align.c),
 * one reader (the restore in chanstate.c) and one validator (run on every
 * file before it is trusted).  Entries, integers little-endian:
 *
 *   [u8 0][u32 input][u32 len][row]                  an input record
 *   [u8 1][u32 writer][u32 channel][u32 len][buffer] an output buffer
 *
 * An input record is a binary row received but not processed before the
 * snapshot; an output buffer holds framed rows ([u32 len][u64 key hash on
 * hash channels][row]) produced before the barrier but not yet sent.  The
 * key bytes that hash frames carry in memory (sl_frame_t) are not stored:
 * sl__chanstate_put_buffer_hashed drops them and the restore extracts them
 * again.  See README.md ("Checkpoint barriers").
 */
#ifndef SL_RUNTIME_CHANSTATE_H
#define SL_RUNTIME_CHANSTATE_H

#include "core/core.h"

#define SL_CHANSTATE_RECORD 0 /* an input record */
#define SL_CHANSTATE_BUFFER 1 /* an output buffer */

/* One entry, as the reader returns it.  data points into the bytes read. */
typedef struct sl_chanstate_entry_s {
  uint8_t kind;      /* SL_CHANSTATE_RECORD or SL_CHANSTATE_BUFFER */
  uint32_t input;    /* record: logical input of the task's head */
  uint32_t writer;   /* buffer: index of the task's record writer */
  uint32_t channel;  /* buffer: channel of that writer */
  const uint8_t *data;
  uint32_t len;
} sl_chanstate_entry_t;

/**
 * @brief Append an input record (a binary row of len bytes).  On failure
 * out is left as it was.
 * @return SL_OK or SL_ENOMEM.  @thread the task.
 */
int sl__chanstate_put_record(sl_bytes_t *out, uint32_t input,
                             const uint8_t *row, uint32_t len)
    __attribute__((warn_unused_result));
/**
 * @brief Append an output buffer (framed rows, len bytes) of channel
 * `channel` of writer `writer`.  On failure out is left as it was.
 * @return SL_OK or SL_ENOMEM.  @thread the task.
 */
int sl__chanstate_put_buffer(sl_bytes_t *out, uint32_t writer,
                             uint32_t channel, const uint8_t *data,
                             uint32_t len)
    __attribute__((warn_unused_result));

/**
 * @brief Append an output buffer of a hash channel: its in-memory frames
 * (sl_frame_t, with key bytes) are stored as [u32 len][u64 hash][row].
 * @return SL_OK or SL_ENOMEM.  @thread the task.
 */
int sl__chanstate_put_buffer_hashed(sl_bytes_t *out, uint32_t writer,
                                    uint32_t channel, const uint8_t *data,
                                    uint32_t len)
    __attribute__((warn_unused_result));

/**
 * @brief Read the entry at *pos of the n bytes at p and advance *pos past
 * it.  Checks only that the entry lies inside the bytes.
 * @return 1 (an entry), 0 (the end), SL_ECORRUPT (unknown kind or a
 * truncated entry).  @thread any.
 */
int sl__chanstate_next(const uint8_t *p, size_t n, size_t *pos,
                       sl_chanstate_entry_t *out);

/* What a channel state must fit: the task that restores it. */
typedef struct sl_chanstate_shape_s {
  const sl_schema_t *in_schema[2]; /* per logical input; NULL: none */
  /* Schema of the rows of output channel (writer, channel) and whether
   * its frames carry a key hash; false when there is no such channel. */
  bool (*out_channel)(const void *user, uint32_t writer, uint32_t channel,
                      const sl_schema_t **out_schema, bool *out_has_hash);
  const void *user;
} sl_chanstate_shape_t;

/**
 * @brief Validate a whole channel state before trusting it: every entry
 * inside the bytes, every input and output channel known to shape, every
 * frame inside its buffer and every row well formed.
 * @return SL_OK or SL_ECORRUPT.  @thread any.
 */
int sl__chanstate_validate(const uint8_t *p, size_t n,
                           const sl_chanstate_shape_t *shape);

#endif
