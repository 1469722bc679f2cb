/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the channel-state reader of unaligned checkpoints
 * (sl__ckpt_restore_channels), which reads a task's <uid>-<n>.channel blob
 * and validates every entry with the channel-state codec
 * (runtime/chanstate.c) before the task replays it
 * (docs/checkpoint-format.md).  The task is a stand-in with the fields the
 * reader looks at: a head operator with two inputs and two record writers
 * (one with a forward and a hash channel, one with a hash channel); the
 * schemas are in fuzz_schema.h.  The
 * blob's checksum is made valid, so every input reaches the validator.
 */
#include <xxhash.h>

#include "checkpoint/checkpoint.h"
#include "fuzz_schema.h"
#include "runtime/chanstate.h"
#include "runtime/task_int.h"

static const sl_schema_t *in0, *in1;
static sl_op_t op;
static sl_op_t *ops[1];
static sl_channel_t chs[3];
static sl_channel_t *w0_chs[2] = {&chs[0], &chs[1]}, *w1_chs[1] = {&chs[2]};
static sl_writer_t w0, w1;
static sl_writer_t *writers[2] = {&w0, &w1};
static sl_task_t task;

static void setup(void) {
  if (in0 != NULL) return;
  in0 = sl_fuzz_channel_schema(0);
  in1 = sl_fuzz_channel_schema(1);
  op.uid = "fuzz";
  op.parallelism = 1;
  op.subtask = 0;
  op.in_schema[0] = in0;
  op.in_schema[1] = in1;
  ops[0] = &op;
  chs[1].has_hash = true;
  chs[2].has_hash = true;
  w0 = (sl_writer_t){.task = &task, .index = 0, .schema = in0,
                     .chs = w0_chs, .n_chs = 2};
  w1 = (sl_writer_t){.task = &task, .index = 1, .schema = in1,
                     .chs = w1_chs, .n_chs = 1};
  task.ops = ops;
  task.n_ops = 1;
  task.writers = writers;
  task.n_writers = 2;
  op.task = &task;
}

/* Read every field of a row the validator accepted, as operators do. */
static void read_row(const sl_schema_t *schema, const uint8_t *p,
                     uint32_t len) {
  sl_row_t row;
  sl_row_view(&row, schema, p, len);
  for (uint32_t i = 0; i < sl_schema_n_fields(schema); i++) {
    sl_value_t v;
    sl_row_get_value(&row, i, &v);
    if (!v.is_null && (v.type == SL_TYPE_STRING || v.type == SL_TYPE_BYTES))
      SL_FUZZ_CHECK(v.u.s.len == 0 ||
                    (v.u.s.ptr >= p && v.u.s.ptr + v.u.s.len <= p + len));
  }
}

/* Walk an accepted blob with the codec's reader, as the task replays it
 * (runtime/chanstate.c), reading every row. */
static void replay(const uint8_t *b, size_t n) {
  size_t pos = 0;
  sl_chanstate_entry_t e;
  int rc;
  while ((rc = sl__chanstate_next(b, n, &pos, &e)) == 1) {
    if (e.kind == SL_CHANSTATE_RECORD) {
      read_row(op.in_schema[e.input], e.data, e.len);
      continue;
    }
    const sl_writer_t *w = task.writers[e.writer];
    uint32_t hl = w->chs[e.channel]->has_hash ? 8 : 0;
    for (uint32_t bo = 0; bo < e.len;) {
      uint32_t len;
      memcpy(&len, e.data + bo, 4);
      read_row(w->schema, e.data + bo + 4 + hl, len);
      bo += 4 + hl + len;
    }
  }
  SL_FUZZ_CHECK(rc == 0 && pos == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = sl_fuzz_setup();
  setup();
  if (size == 0 || size > (1u << 20)) return 0;
  char path[512];
  snprintf(path, sizeof(path), "%s/fuzz-0.channel", dir);
  sl_fuzz_write(path, data, size);
  sl_ckpt_subtask_t sub = {.subtask = 0,
                           .kg_end = 0,
                           .kg_start = 1,
                           .channel_file = "fuzz-0.channel",
                           .channel_size = size,
                           .channel_checksum = XXH3_64bits(data, size)};
  sl_ckpt_op_t mop = {.uid = "fuzz", .parallelism = 1, .subtasks = &sub,
                      .n_subtasks = 1};
  sl_ckpt_meta_t m = {.id = 1, .max_parallelism = 128, .job = "fuzz",
                      .ops = &mop, .n_ops = 1, .dir = (char *)dir};
  sl_error_t *err = NULL;
  int rc = sl__ckpt_restore_channels(&m, &mop, &task, &err);
  if (rc == SL_OK) {
    SL_FUZZ_CHECK(task.restore_cs != NULL);
    SL_FUZZ_CHECK(task.restore_cs_len == size);
    replay(task.restore_cs, task.restore_cs_len);
    sl_free(task.restore_cs);
    task.restore_cs = NULL;
    task.restore_cs_len = 0;
  } else {
    SL_FUZZ_CHECK(err != NULL);
    SL_FUZZ_CHECK(task.restore_cs == NULL);
  }
  sl_error_destroy(err);
  return 0;
}
