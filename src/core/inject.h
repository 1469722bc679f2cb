/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named injection points (docs/injection-points.md).  Every protocol step
 * calls SL_INJECT("module.step"); a test arms a point to fail, to kill the
 * process, or to pause at a latch until released.  Points can also be armed
 * for a whole process with the environment variable SL_INJECT, e.g.
 *
 *     SL_INJECT="coordinator.before_metadata_rename=kill:2"
 *
 * (kill at the second time the point is reached).  Without
 * SL_FAULT_INJECTION the calls compile to nothing.
 */
#ifndef SL_CORE_INJECT_H
#define SL_CORE_INJECT_H

#include "sluice/sl_common.h"

typedef enum sl_inject_action_e {
  SL_INJECT_NONE = 0,
  SL_INJECT_FAIL = 1,  /* the step returns SL_EFAILED */
  SL_INJECT_KILL = 2,  /* the process dies with SIGKILL */
  SL_INJECT_PAUSE = 3  /* the calling thread waits until released */
} sl_inject_action_t;

#ifdef SL_FAULT_INJECTION
/** @brief Called at a point; returns SL_OK or SL_EFAILED.  @thread any. */
int sl__inject(const char *point);
#define SL_INJECT(point) sl__inject(point)
#else
#define SL_INJECT(point) SL_OK
#endif

/**
 * @brief Arm a point: act on the hit-th time it is reached (1 = next), and
 * on every later time when is_sticky.  @thread any.
 */
int sl_inject_arm(const char *point, sl_inject_action_t action, uint32_t hit,
                  bool is_sticky);
/** @brief Disarm every point and release paused threads. */
void sl_inject_reset(void);
/** @brief Wait until a thread is paused at point (or timeout_ms passed).
 * @return SL_OK when one is paused, SL_EAGAIN on timeout. */
int sl_inject_wait_paused(const char *point, uint32_t timeout_ms);
/** @brief Release threads paused at point. */
void sl_inject_release(const char *point);
/** @brief Times point was reached since the last reset. */
uint32_t sl_inject_hits(const char *point);
/**
 * @brief Allocation torture: the k-th allocation (sl_malloc, sl_calloc,
 * sl_realloc, sl_strdup, sl_strndup) of the calling thread from now on
 * returns NULL, and every later one too when is_sticky; k = 0 disarms.
 * Resets the thread's counts.  Other threads are not affected.  Without
 * SL_FAULT_INJECTION it does nothing.  @thread any (per thread).
 */
void sl_inject_alloc_fail(uint64_t k, bool is_sticky);
/** @brief Allocations of the calling thread since sl_inject_alloc_fail. */
uint64_t sl_inject_alloc_count(void);
/** @brief Allocations of the calling thread failed on purpose since. */
uint64_t sl_inject_alloc_failed(void);
/** @brief Whether injection points are compiled in. */
bool sl_inject_is_enabled(void);

#endif
