/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface of the time module: the timer services of keyed operators
 * (timers.c) and the arithmetic of watermarks (watermark.c): generation
 * per source split, idleness, and the minimum over the inputs of a task.
 * The runtime calls in here; nothing here calls the runtime.  See
 * README.md and docs/event-time.md.
 */
#ifndef SL_TIME_TIME_H
#define SL_TIME_TIME_H

#include "core/core.h"
#include "sluice/sl_time.h"

typedef struct sl_timers_s sl_timers_t;

/* ------------------------------------------------------------------ */
/* Timers, per keyed operator: processing time (ns) and event time (us). */

int sl__timers_create(sl_timers_t **out);
void sl__timers_destroy(sl_timers_t *t);
/** @brief Add (ts, key); duplicates are ignored. */
int sl__timers_add(sl_timers_t *t, int64_t ts, const void *key, uint32_t len);
int sl__timers_delete(sl_timers_t *t, int64_t ts, const void *key,
                      uint32_t len);
/** @brief Earliest timer time, or INT64_MAX. */
int64_t sl__timers_next(const sl_timers_t *t);
/**
 * @brief Pop the earliest timer if its time is <= now.  The key is copied
 * into *out_key.  @return 1 if one was popped, 0 if none is due, SL_ENOMEM
 * (the timer stays) if the key could not be copied.
 */
int sl__timers_pop(sl_timers_t *t, int64_t now, int64_t *out_ts,
                   sl_bytes_t *out_key);
size_t sl__timers_size(const sl_timers_t *t);
/** @brief Call fn for every pending timer (checkpoint sync phase). */
int sl__timers_export(const sl_timers_t *t,
                      int (*fn)(void *user, int64_t ts, const uint8_t *key,
                                uint32_t len),
                      void *user);

/* ------------------------------------------------------------------ */
/* Watermarks (watermark.c). */

/*
 * The watermark over several inputs (the channels of a task, or the splits
 * of a source): the minimum over the active inputs; with none active, the
 * largest over the unfinished ones, which the task then flushes before it
 * goes idle.  Finished inputs are left out.
 */
typedef struct sl_wm_min_s {
  int64_t min;        /* over the active inputs, SL_WATERMARK_MAX first */
  int64_t idle_max;   /* over the unfinished inputs, SL_WATERMARK_MIN first */
  uint32_t n_active;  /* unfinished inputs that are not idle */
  uint32_t n_open;    /* unfinished inputs */
} sl_wm_min_t;

/** @brief Start a minimum over no input.  @thread any. */
void sl__wm_min_init(sl_wm_min_t *m);
/** @brief Add an unfinished input with watermark wm.  @thread any. */
void sl__wm_min_add(sl_wm_min_t *m, int64_t wm, bool is_idle);

/* Watermark generation of a source subtask, per assigned split. */
typedef struct sl_wm_split_s {
  int64_t max_ts;      /* largest event time seen, INT64_MIN first */
  uint64_t n_records;  /* records so far */
  uint64_t n_seen;     /* n_records at the last activity check */
  int64_t active_ns;   /* processing time of the last activity seen */
  bool is_idle;
  bool is_finished;
} sl_wm_split_t;

/* Owned by the source task; used only on its thread. */
typedef struct sl_wmgen_s {
  const sl_watermark_config_t *cfg; /* owned by the job */
  uint32_t field;       /* event-time field of the source schema */
  sl_wm_split_t *splits; /* per assigned split, like sl_source_rt_t.splits */
  uint32_t cur;         /* index of the split being read */
  int64_t next_ns;      /* next periodic emission */
} sl_wmgen_t;

/**
 * @brief The source's watermark over its n_splits splits, as a minimum:
 * per unfinished split, (largest event time - delay - 1).
 * @thread the source task.
 */
void sl__wmgen_combine(const sl_wmgen_t *g, uint32_t n_splits,
                       sl_wm_min_t *out);
/**
 * @brief Periodic check at processing time now: a split without records
 * since the last check for idle_timeout_ms becomes idle, one with records
 * active.  @return true when the periodic emission is due (the next one is
 * scheduled).  @thread the source task.
 */
bool sl__wmgen_tick(sl_wmgen_t *g, uint32_t n_splits, int64_t now);
/**
 * @brief A record of the current split at event time ts.  @return true
 * when the watermark must be emitted now (per_record).  @thread the source
 * task.
 */
bool sl__wmgen_on_record(sl_wmgen_t *g, int64_t ts);

#endif
