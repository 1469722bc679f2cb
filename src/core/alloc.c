/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The replaceable allocator.  Tests install a failing allocator to check
 * that every allocation failure is handled.  See README.md.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static sl_allocator_t alloc = {malloc, calloc, realloc, free};

void sl_set_allocator(const sl_allocator_t *a) {
  if (a == NULL) {
    alloc = (sl_allocator_t){malloc, calloc, realloc, free};
    return;
  }
  alloc = *a;
}

void *sl_malloc(size_t size) { return alloc.malloc_fn(size ? size : 1); }
void *sl_calloc(size_t n, size_t size) {
  return alloc.calloc_fn(n ? n : 1, size ? size : 1);
}
void *sl_realloc(void *p, size_t size) {
  return alloc.realloc_fn(p, size ? size : 1);
}
void sl_free(void *p) {
  if (p) alloc.free_fn(p);
}

char *sl_strndup(const char *s, size_t n) {
  char *d = sl_malloc(n + 1);
  if (d == NULL) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *sl_strdup(const char *s) {
  return s ? sl_strndup(s, strlen(s)) : NULL;
}
