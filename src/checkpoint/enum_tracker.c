/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The assignment tracker: which split went to which reader subtask in
 * which epoch (the checkpoint whose enumerator snapshot first followed the
 * assignment).  When a reader is reset to checkpoint N, the assignments of
 * epochs > N (and those no snapshot covers yet) are the ones its restored
 * state does not hold: they go back to the enumerator.  Those of epochs
 * <= N stay with the reader.  Seed 004's example: A assigned, checkpoint
 * 10, B assigned, checkpoint 11 triggered, C assigned, failure, reset to
 * 10: A has epoch 10 and stays; B (epoch 11) and C (open) come back.
 *
 * Why epoch <= N is covered: the enumerator's snapshot for N is taken
 * before the sources are triggered for N, and an assignment made before
 * it reached the reader (the gateway was open for it, or reopened when
 * the reader took an older checkpoint) before the reader's snapshot for
 * N, which drains the reader's mailbox first.  An assignment made after
 * the snapshot for N is held by the gateway until the reader has taken N,
 * so the reader's state for N never holds it.  Completion of N drops the
 * epochs <= N: no reset goes back past a completed checkpoint that the
 * job can still restore... except a fallback to an older checkpoint when
 * the newest is corrupt, which the planner handles by recreating the
 * enumerator from that checkpoint (graph/restore.c).  See README.md.
 */
#include "checkpoint/enum_host.h"

static void free_one(sl_enum_assignment_t *a) {
  sl_free(a->id);
  sl_free(a->state);
}

int sl__enum_tracker_record(sl_enum_tracker_t *tr, uint32_t subtask,
                            const sl_split_t *split) {
  if (tr->n == tr->cap) {
    uint32_t cap = tr->cap ? tr->cap * 2 : 16;
    sl_enum_assignment_t *a = sl_realloc(tr->a, cap * sizeof(*a));
    if (a == NULL) return SL_ENOMEM;
    tr->a = a;
    tr->cap = cap;
  }
  sl_enum_assignment_t *a = &tr->a[tr->n];
  memset(a, 0, sizeof(*a));
  a->subtask = subtask;
  a->epoch = SL_ENUM_UNCHECKPOINTED;
  a->id = sl_strdup(split->id);
  if (split->state_len) {
    a->state = sl_malloc(split->state_len);
    if (a->state) memcpy(a->state, split->state, split->state_len);
    a->state_len = split->state_len;
  }
  if (a->id == NULL || (split->state_len && a->state == NULL)) {
    free_one(a);
    return SL_ENOMEM;
  }
  tr->n++;
  return SL_OK;
}

void sl__enum_tracker_on_checkpoint(sl_enum_tracker_t *tr, uint64_t id) {
  for (uint32_t i = 0; i < tr->n; i++)
    if (tr->a[i].epoch == SL_ENUM_UNCHECKPOINTED) tr->a[i].epoch = id;
}

void sl__enum_tracker_on_complete(sl_enum_tracker_t *tr, uint64_t id) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < tr->n; i++) {
    if (tr->a[i].epoch <= id) free_one(&tr->a[i]);
    else tr->a[k++] = tr->a[i];
  }
  tr->n = k;
}

int sl__enum_tracker_take_uncovered(sl_enum_tracker_t *tr, uint32_t subtask,
                                    uint64_t restored,
                                    sl_enum_assignment_t **out,
                                    uint32_t *out_n) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < tr->n; i++)
    if (tr->a[i].subtask == subtask && tr->a[i].epoch > restored) n++;
  sl_enum_assignment_t *r = sl_calloc(n + 1, sizeof(*r));
  if (r == NULL) return SL_ENOMEM;
  uint32_t k = 0, m = 0;
  for (uint32_t i = 0; i < tr->n; i++) {
    if (tr->a[i].subtask == subtask && tr->a[i].epoch > restored)
      r[m++] = tr->a[i];
    else
      tr->a[k++] = tr->a[i];
  }
  tr->n = k;
  *out = r;
  *out_n = m;
  return SL_OK;
}

void sl__enum_tracker_free_list(sl_enum_assignment_t *a, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) free_one(&a[i]);
  sl_free(a);
}

void sl__enum_tracker_close(sl_enum_tracker_t *tr) {
  for (uint32_t i = 0; i < tr->n; i++) free_one(&tr->a[i]);
  sl_free(tr->a);
  memset(tr, 0, sizeof(*tr));
}
