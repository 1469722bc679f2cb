/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Windows and joins in event time (sl_time.h).  A window operator runs on
 * a keyed stream; it assigns each row, by the event time in one of its
 * fields, to tumbling, sliding, cumulate or session windows, keeps per key
 * partial aggregates of slices (or, for process functions and session
 * windows, per (key, window) an accumulator or the rows), and emits a
 * window's result when the watermark passes the window's end.  Rows that arrive after their window
 * was cleaned up (end - 1 + allowed lateness <= watermark) go to the late
 * side output, not into results.  See docs/windows.md.
 */
#ifndef SLUICE_SL_WINDOW_H
#define SLUICE_SL_WINDOW_H

#include "sl_common.h"
#include "sl_job.h"
#include "sl_ops.h"
#include "sl_row.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_window_kind_e {
  SL_WINDOW_TUMBLING = 1, /* [offset + k*size, offset + (k+1)*size) */
  SL_WINDOW_SLIDING = 2,  /* size long, one starting every slide */
  SL_WINDOW_SESSION = 3,  /* rows closer than gap share a window */
  /* As Flink's CUMULATE(step, size): windows [s, s + step), [s, s + 2
   * step), ... [s, s + size) that share the start s = offset + k*size; a
   * row is in every one of them that ends after it.  size must be a
   * multiple of step. */
  SL_WINDOW_CUMULATE = 4
} sl_window_kind_t;

typedef struct sl_window_spec_s {
  sl_window_kind_t kind;
  const char *time_field;      /* event time of the input (timestamp or
                                  int64 microseconds) */
  int64_t size_us;             /* tumbling, sliding, cumulate */
  int64_t slide_us;            /* sliding */
  int64_t gap_us;              /* session */
  int64_t offset_us;           /* tumbling, sliding, cumulate: alignment,
                                  default 0 */
  /* A window's state is kept this long past its end: rows arriving in
   * that time update its result (-U old, +U new). */
  int64_t allowed_lateness_us;
  int64_t step_us;             /* cumulate: the windows grow by this much */
} sl_window_spec_t;

SL_API void sl_window_spec_init(sl_window_spec_t *spec);

/** A window [start_us, end_us) and the largest event time in it. */
typedef struct sl_window_s {
  int64_t start_us;
  int64_t end_us;
  int64_t max_ts_us;
} sl_window_t;

/**
 * @brief Windowed aggregate over a stream keyed by fields.  Output: the key
 * fields, window_start, window_end, event_time (timestamps; event_time is
 * the largest event time that contributed), then one column per aggregate
 * with the types of sl_stream_aggregate().  A window emits +I when the
 * watermark passes its end; with allowed lateness a late row emits -U and
 * +U; a session window that merges windows already emitted retracts them
 * with -D.  min and max take numeric, bool and timestamp fields.
 */
SL_API sl_stream_t *sl_stream_window_aggregate(sl_stream_t *keyed,
                                               const char *uid,
                                               const sl_window_spec_t *spec,
                                               const sl_agg_t *aggs,
                                               uint32_t n_aggs);

/** A user-defined incremental aggregate over windows. */
typedef struct sl_window_agg_fns_s {
  /** Fold a row into acc (empty for a new window). */
  int (*add)(void *user, const sl_row_t *row, sl_bytes_t *acc);
  /** Fold accumulator `from` into `into` (session windows; with slices,
   * combine a window's slices).  Optional except for session windows. */
  int (*merge)(void *user, sl_slice_t from, sl_bytes_t *into);
  /** Fill the output row of a window (the builder is reset). */
  int (*result)(sl_ctx_t *ctx, void *user, const sl_window_t *w,
                sl_slice_t acc, sl_row_builder_t *out);
} sl_window_agg_fns_t;

/**
 * @brief Windowed user aggregate: result() builds each output row; the
 * engine emits it with the kinds described for sl_stream_window_aggregate.
 * Session windows need merge.  With merge, tumbling, sliding and cumulate
 * windows keep one accumulator per key and slice (add() folds rows into a
 * slice, merge() combines the slices of a window when it fires); without
 * it, one per key and window.
 */
SL_API sl_stream_t *sl_stream_window_reduce(sl_stream_t *keyed, const char *uid,
                                            const sl_window_spec_t *spec,
                                            sl_schema_t *out_schema,
                                            const sl_window_agg_fns_t *fns,
                                            void *user);

/* The rows of a window, in arrival order. */
typedef struct sl_window_rows_s sl_window_rows_t;
/** @brief The next row (valid until the function returns), false at end. */
SL_API bool sl_window_rows_next(sl_window_rows_t *rows, sl_row_t *out_row);

/** Called once per window when it fires; emit with sl_ctx_emit*(). */
typedef int (*sl_window_process_fn)(sl_ctx_t *ctx, void *user,
                                    const sl_window_t *w,
                                    sl_window_rows_t *rows);

/**
 * @brief Full-window process function: the window's rows are kept and
 * handed over when it fires.  With allowed lateness a late row makes the
 * window fire again with all its rows; earlier output is not retracted.
 */
SL_API sl_stream_t *sl_stream_window_process(sl_stream_t *keyed,
                                             const char *uid,
                                             const sl_window_spec_t *spec,
                                             sl_schema_t *out_schema,
                                             sl_window_process_fn fn,
                                             void *user);

/**
 * @brief The late rows of a window operator (beyond allowed lateness), with
 * the window's input schema.  Without this stream they are dropped.
 */
SL_API sl_stream_t *sl_stream_late_rows(sl_stream_t *windowed);

/* ------------------------------------------------------------------ */
/* Joins of two streams keyed by fields of the same types.  The output has
 * the left row's fields, then the right row's; a right field whose name is
 * taken gets the suffix "_right".  Interval and window joins take insert-
 * only input and drop rows whose event time is behind the watermark. */

typedef struct sl_interval_join_spec_s {
  const char *left_time_field;
  const char *right_time_field;
  /* A left row at t joins right rows with event time in
   * [t + lower_us, t + upper_us] (bounds may be negative). */
  int64_t lower_us;
  int64_t upper_us;
} sl_interval_join_spec_t;

SL_API sl_stream_t *sl_stream_interval_join(sl_stream_t *left,
    sl_stream_t *right, const char *uid, const sl_interval_join_spec_t *spec);

/**
 * @brief Join the rows of both inputs that share a key and a tumbling or
 * sliding window (spec->time_field names the left input's event time,
 * right_time_field the right's).  Each pair is emitted once per window
 * when the window ends, followed by window_start and window_end.
 */
SL_API sl_stream_t *sl_stream_window_join(sl_stream_t *left, sl_stream_t *right,
                                          const char *uid,
                                          const sl_window_spec_t *spec,
                                          const char *right_time_field);

/**
 * @brief Regular inner join of two changelogs on their keys: every row
 * is kept (no time bound).  A +I or +U on one side emits a row per
 * matching row of the other side with the same kind; a -U or -D retracts
 * (emits the joined rows with its kind) and fails the job if the row was
 * never inserted.
 */
SL_API sl_stream_t *sl_stream_join(sl_stream_t *left, sl_stream_t *right,
                                   const char *uid);

#ifdef __cplusplus
}
#endif
#endif
