/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Source splits by identity: the list a source's plan() fills
 * (sl_split_list_t, public in sl_connector.h) and the one codec of a
 * stored split position (the "source.splits" operator state of a
 * checkpoint: the split's stable id, then the source's position bytes).
 * Positions are stored and restored by id, never by index in the list, so
 * a list that changed between checkpoint and restore (a file added to a
 * directory) or another parallelism gives each split its own position.  The
 * planner assigns the splits to subtasks (plan.c); the checkpoint module
 * writes and maps the positions (ckpt_task.c).  See README.md.
 */
#include <stdarg.h>
#include <stdio.h>

#include "runtime/runtime.h"

#define SPLIT_ID_MAX 4096u

int sl_split_list_create(sl_split_list_t **out) {
  sl_split_list_t *l = sl_calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  *out = l;
  return SL_OK;
}

void sl_split_list_destroy(sl_split_list_t *l) {
  if (l == NULL) return;
  for (uint32_t i = 0; i < l->n; i++) sl_free(l->ids[i]);
  sl_free(l->ids);
  sl_free(l);
}

int sl_split_list_add(sl_split_list_t *l, const char *id) {
  size_t len = strlen(id);
  if (len == 0 || len > SPLIT_ID_MAX) return SL_EINVAL;
  if (l->n == UINT32_MAX) return SL_ENOMEM;
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? l->cap * 2 : 16;
    char **ids = sl_realloc(l->ids, cap * sizeof(char *));
    if (ids == NULL) return SL_ENOMEM;
    l->ids = ids;
    l->cap = cap;
  }
  if ((l->ids[l->n] = sl_strdup(id)) == NULL) return SL_ENOMEM;
  l->n++;
  return SL_OK;
}

int sl_split_list_addf(sl_split_list_t *l, const char *fmt, ...) {
  char buf[SPLIT_ID_MAX + 2];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n > SPLIT_ID_MAX) return SL_EINVAL;
  return sl_split_list_add(l, buf);
}

uint32_t sl_split_list_count(const sl_split_list_t *l) { return l->n; }

const char *sl_split_list_id(const sl_split_list_t *l, uint32_t i) {
  return i < l->n ? l->ids[i] : NULL;
}

static int cmp_id(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int sl__split_list_check(const sl_split_list_t *l, const char **out_dup) {
  *out_dup = NULL;
  if (l->n < 2) return SL_OK;
  char **s = sl_malloc(l->n * sizeof(char *));
  if (s == NULL) return SL_ENOMEM;
  memcpy(s, l->ids, l->n * sizeof(char *));
  qsort(s, l->n, sizeof(char *), cmp_id);
  for (uint32_t i = 1; i < l->n && *out_dup == NULL; i++)
    if (strcmp(s[i - 1], s[i]) == 0) *out_dup = s[i];
  sl_free(s);
  return SL_OK;
}

int64_t sl__split_list_find(const sl_split_list_t *l, const char *id,
                            size_t id_len) {
  for (uint32_t i = 0; i < l->n; i++)
    if (strncmp(l->ids[i], id, id_len) == 0 && l->ids[i][id_len] == '\0')
      return i;
  return -1;
}

/*
 * A stored split position: varint id length, the id, then the source's
 * position bytes up to the end of the entry (docs/checkpoint-format.md).
 */
int sl__split_pos_encode(const char *id, const uint8_t *pos, size_t pos_len,
                         sl_bytes_t *out) {
  size_t len = strlen(id);
  int rc = sl__bytes_put_varint(out, len);
  if (rc == SL_OK) rc = sl_bytes_append(out, id, len);
  if (rc == SL_OK && pos_len) rc = sl_bytes_append(out, pos, pos_len);
  return rc;
}

int sl__split_pos_decode(const uint8_t *p, size_t n, sl_split_pos_t *out) {
  uint64_t len;
  size_t k = sl__get_varint(p, n, &len);
  if (k == 0 || len == 0 || len > SPLIT_ID_MAX || len > n - k)
    return SL_ECORRUPT;
  const char *id = (const char *)p + k;
  if (memchr(id, '\0', len) != NULL) return SL_ECORRUPT;
  out->id = id;
  out->id_len = (size_t)len;
  out->pos = p + k + len;
  out->pos_len = n - k - (size_t)len;
  return SL_OK;
}
