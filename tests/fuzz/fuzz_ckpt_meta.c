/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the checkpoint metadata decoder (sl__ckpt_read_meta, which
 * reads <chk>/_metadata).  Each input is tried twice: as it is, and with
 * its footer magic and checksum made valid, so that the fuzzer reaches the
 * decoder past the checksum.  A metadata that decodes must survive a round
 * trip: written again with sl__ckpt_write_meta and read back, it is equal.
 */
#include <xxhash.h>

#include "checkpoint/checkpoint.h"
#include "fuzz_util.h"

static bool str_eq(const char *a, const char *b) {
  if (a == NULL || b == NULL) return a == b;
  return strcmp(a, b) == 0;
}

static bool subtask_eq(const sl_ckpt_subtask_t *a, const sl_ckpt_subtask_t *b) {
  if (a->subtask != b->subtask || a->kg_start != b->kg_start ||
      a->kg_end != b->kg_end || !str_eq(a->state_file, b->state_file) ||
      a->state_size != b->state_size ||
      a->state_checksum != b->state_checksum ||
      !str_eq(a->channel_file, b->channel_file) ||
      a->channel_size != b->channel_size ||
      a->channel_checksum != b->channel_checksum ||
      a->n_opstates != b->n_opstates)
    return false;
  for (uint32_t o = 0; o < a->n_opstates; o++) {
    const sl_ckpt_opstate_t *x = &a->opstates[o], *y = &b->opstates[o];
    if (!str_eq(x->name, y->name) || x->n_entries != y->n_entries)
      return false;
    for (uint32_t e = 0; e < x->n_entries; e++)
      if (x->entries[e].key != y->entries[e].key ||
          x->entries[e].len != y->entries[e].len ||
          (x->entries[e].len &&
           memcmp(x->entries[e].bytes, y->entries[e].bytes,
                  x->entries[e].len) != 0))
        return false;
  }
  return true;
}

static bool meta_eq(const sl_ckpt_meta_t *a, const sl_ckpt_meta_t *b) {
  if (a->id != b->id || a->time_ns != b->time_ns || a->kind != b->kind ||
      a->mode != b->mode || a->max_parallelism != b->max_parallelism ||
      !str_eq(a->job, b->job) || a->n_ops != b->n_ops)
    return false;
  for (uint32_t i = 0; i < a->n_ops; i++) {
    const sl_ckpt_op_t *x = &a->ops[i], *y = &b->ops[i];
    if (x->has_enum_state != y->has_enum_state ||
        x->enum_state_len != y->enum_state_len ||
        (x->enum_state_len &&
         memcmp(x->enum_state, y->enum_state, x->enum_state_len) != 0))
      return false;
    if (!str_eq(x->uid, y->uid) || x->parallelism != y->parallelism ||
        x->n_subtasks != y->n_subtasks)
      return false;
    for (uint32_t k = 0; k < x->n_subtasks; k++)
      if (!subtask_eq(&x->subtasks[k], &y->subtasks[k])) return false;
  }
  return true;
}

/* What a restore does with a metadata it accepted. */
static void use_meta(const sl_ckpt_meta_t *m) {
  for (uint32_t i = 0; i < m->n_ops; i++) {
    const sl_ckpt_op_t *op = &m->ops[i];
    SL_FUZZ_CHECK(op->uid != NULL);
    SL_FUZZ_CHECK(sl__ckpt_meta_op(m, op->uid) != NULL);
    for (uint32_t k = 0; k < op->n_subtasks; k++) {
      const sl_ckpt_subtask_t *s = &op->subtasks[k];
      /* Invariant of the decoder: a keyed range lies below max_parallelism. */
      SL_FUZZ_CHECK(s->kg_end < s->kg_start || s->kg_end < m->max_parallelism);
      (void)sl__ckpt_opstate(s, "source.positions");
    }
  }
  sl_error_t *err = NULL;
  (void)sl__ckpt_check_files(m, &err);
  sl_error_destroy(err);
}

static void try_meta(const char *dir, const uint8_t *p, size_t n) {
  char path[512];
  snprintf(path, sizeof(path), "%s/_metadata", dir);
  sl_fuzz_write(path, p, n);
  sl_ckpt_meta_t m;
  sl_error_t *err = NULL;
  int rc = sl__ckpt_read_meta(dir, &m, &err);
  if (rc != SL_OK) {
    SL_FUZZ_CHECK(err != NULL);
    SL_FUZZ_CHECK(rc == SL_ECORRUPT || rc == SL_ENOMEM);
    sl_error_destroy(err);
    return;
  }
  use_meta(&m);
  /* Round trip through the writer, into a second directory. */
  char dir2[512];
  snprintf(dir2, sizeof(dir2), "%s/rt", dir);
  mkdir(dir2, 0700);
  bool is_renamed = false;
  rc = sl__ckpt_write_meta(dir2, &m, &is_renamed, &err);
  SL_FUZZ_CHECK(rc == SL_OK);
  sl_ckpt_meta_t m2;
  rc = sl__ckpt_read_meta(dir2, &m2, &err);
  SL_FUZZ_CHECK(rc == SL_OK);
  SL_FUZZ_CHECK(meta_eq(&m, &m2));
  sl__ckpt_meta_clear(&m2);
  sl__ckpt_meta_clear(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = sl_fuzz_setup();
  if (size > (1u << 20)) return 0;
  try_meta(dir, data, size);
  /* The same bytes with a valid footer: magic and checksum fixed up. */
  if (size >= 20) {
    uint8_t *p = malloc(size);
    SL_FUZZ_CHECK(p != NULL);
    memcpy(p, data, size);
    memcpy(p + size - 8, "SLCMEND", 8);
    uint64_t ck = XXH3_64bits(p, size - 16);
    memcpy(p + size - 16, &ck, 8);
    try_meta(dir, p, size);
    free(p);
  }
  return 0;
}
