/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The replaceable allocator, and allocation-failure injection for the
 * torture tests: with SL_FAULT_INJECTION, a thread can make its k-th
 * allocation from now fail (sl_inject_alloc_fail), so a test can run an
 * operation once for every k and check that each run ends in a clean
 * error or a success and leaks nothing.  See README.md.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "core/inject.h"

static sl_allocator_t alloc = {malloc, calloc, realloc, free};

void sl_set_allocator(const sl_allocator_t *a) {
  if (a == NULL) {
    alloc = (sl_allocator_t){malloc, calloc, realloc, free};
    return;
  }
  alloc = *a;
}

#ifdef SL_FAULT_INJECTION
/* Per thread, so that a torture loop is deterministic and other threads
 * (I/O pool, workers) are not disturbed. */
static _Thread_local uint64_t n_allocs;   /* since the last arm */
static _Thread_local uint64_t fail_at;    /* 0: not armed */
static _Thread_local bool is_fail_sticky; /* and every later one */
static _Thread_local uint64_t n_failed;

static bool alloc_should_fail(void) {
  uint64_t n = ++n_allocs;
  if (fail_at == 0 || n < fail_at || (n > fail_at && !is_fail_sticky))
    return false;
  n_failed++;
  return true;
}

void sl_inject_alloc_fail(uint64_t k, bool is_sticky) {
  n_allocs = 0;
  n_failed = 0;
  fail_at = k;
  is_fail_sticky = is_sticky;
}

uint64_t sl_inject_alloc_count(void) { return n_allocs; }
uint64_t sl_inject_alloc_failed(void) { return n_failed; }
#else
#define alloc_should_fail() false
void sl_inject_alloc_fail(uint64_t k, bool is_sticky) {
  (void)k;
  (void)is_sticky;
}
uint64_t sl_inject_alloc_count(void) { return 0; }
uint64_t sl_inject_alloc_failed(void) { return 0; }
#endif

void *sl_malloc(size_t size) {
  if (alloc_should_fail()) return NULL;
  return alloc.malloc_fn(size ? size : 1);
}
void *sl_calloc(size_t n, size_t size) {
  if (alloc_should_fail()) return NULL;
  return alloc.calloc_fn(n ? n : 1, size ? size : 1);
}
void *sl_realloc(void *p, size_t size) {
  if (alloc_should_fail()) return NULL; /* p stays valid, as realloc's */
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
