/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging, corruption reports and panics.  Log lines go to stderr as
 * "sluice: LEVEL: message" unless a callback is installed.  See README.md.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

static _Atomic int log_level = SL_LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static sl_log_cb log_cb; /* protected by log_lock */
static void *log_user;   /* protected by log_lock */

static const char *level_names[] = {"debug", "info", "warning", "error",
                                    "fatal"};

void sl_log_set_level(sl_log_level_t level) {
  atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

void sl_log_set_callback(sl_log_cb cb, void *user) {
  pthread_mutex_lock(&log_lock);
  log_cb = cb;
  log_user = user;
  pthread_mutex_unlock(&log_lock);
}

static void log_v(sl_log_level_t level, const char *fmt, va_list ap) {
  if ((int)level < atomic_load_explicit(&log_level, memory_order_relaxed))
    return;
  char msg[2048];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  pthread_mutex_lock(&log_lock);
  if (log_cb) {
    log_cb(level, msg, log_user);
  } else {
    fprintf(stderr, "sluice: %s: %s\n", level_names[level], msg);
    fflush(stderr);
  }
  pthread_mutex_unlock(&log_lock);
}

void sl_log(sl_log_level_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v(level, fmt, ap);
  va_end(ap);
}

int sl__corrupt_at(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  /* A warning, not a debug line: corruption is never routine, and the
   * file:line says which check caught it (SQLite's SQLITE_CORRUPT_BKPT). */
  sl_log(SL_LOG_WARN, "corruption detected at %s:%d: %s", file, line, msg);
  return SL_ECORRUPT;
}

void sl_panic_at(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "sluice: panic at %s:%d: %s\n", file, line, msg);
  fflush(stderr);
  abort();
}

int64_t sl__clock_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sl__clock_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint32_t sl__cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1u : (uint32_t)n;
}
