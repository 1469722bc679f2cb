/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job builder and the user-function interfaces.  A job is a dataflow
 * graph of operators, each with a stable UID and a parallelism; sluice turns
 * it into chained tasks and runs them on a worker pool.  Builder calls never
 * fail loudly: the first error is kept in the job and returned by
 * sl_job_run(), and every later builder call that receives a NULL stream
 * returns NULL.  See docs/api.md and src/graph/README.md.
 */
#ifndef SLUICE_SL_JOB_H
#define SLUICE_SL_JOB_H

#include "sl_common.h"
#include "sl_row.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_job_s sl_job_t;
typedef struct sl_stream_s sl_stream_t; /* owned by the job */
typedef struct sl_ctx_s sl_ctx_t;       /* per operator subtask */
typedef struct sl_collector_s sl_collector_t;
typedef struct sl_state_s sl_state_t;

#define SL_DEFAULT_MAX_PARALLELISM 128
/* sl_job_config_t.buffer_timeout_ms by default (Flink's default is 100). */
#define SL_DEFAULT_BUFFER_TIMEOUT_MS 10
#define SL_MAX_PARALLELISM_LIMIT 32768
/* The largest interval, timeout, pause or delay in milliseconds that a job
 * accepts (one year): in nanoseconds on the monotonic clock it cannot
 * overflow.  sl_job_create refuses larger values. */
#define SL_MAX_DURATION_MS INT64_C(31536000000)
/* A job with a checkpoint directory keeps its checkpoints in <dir>/<name>:
 * its name is 1 to SL_MAX_JOB_NAME bytes of letters, digits, '.', '_' and
 * '-', and does not start with '.'. */
#define SL_MAX_JOB_NAME 100

/*
 * Checkpoint modes (docs/checkpoints.md).  Aligned and unaligned give
 * exactly-once effect on state; at-least-once skips alignment, so after a
 * restore some records are applied twice.
 */
typedef enum sl_ckpt_mode_e {
  SL_CKPT_ALIGNED = 0,      /* exactly-once, barriers aligned (default) */
  SL_CKPT_UNALIGNED = 1,    /* exactly-once, barriers overtake in-flight data */
  SL_CKPT_AT_LEAST_ONCE = 2 /* no alignment: duplicates after a restore */
} sl_ckpt_mode_t;

typedef struct sl_checkpoint_config_s {
  const char *dir;            /* storage: <dir>/<job>/chk-N; NULL = off */
  int64_t interval_ms;        /* periodic trigger; 0 = only on demand */
  int64_t timeout_ms;         /* abort a checkpoint after this; default 10 min */
  int64_t min_pause_ms;       /* between the end of one and the next trigger */
  uint32_t max_concurrent;    /* checkpoints in flight; default 1 */
  sl_ckpt_mode_t mode;
  /* Aligned mode: a checkpoint still aligning after this long switches to
   * unaligned.  0: never. */
  int64_t alignment_timeout_ms;
  uint32_t retain;            /* completed checkpoints kept; default 3 */
  /* Two-phase-commit sinks (sl_connector.h): a commit answering RETRY is
   * tried again after a backoff doubling from sink_commit_backoff_ms
   * (default 100) up to sink_commit_max_backoff_ms (default 30000), at
   * most sink_commit_max_attempts times in all (default 10), then the
   * task fails and the job restarts per its restart strategy. */
  uint32_t sink_commit_max_attempts;
  int64_t sink_commit_backoff_ms;
  int64_t sink_commit_max_backoff_ms;
} sl_checkpoint_config_t;

typedef enum sl_restart_kind_e {
  SL_RESTART_NONE = 0,        /* a failure fails the job (default) */
  SL_RESTART_FIXED_DELAY = 1, /* wait delay_ms, at most max_attempts times */
  SL_RESTART_EXPONENTIAL = 2  /* delay_ms * multiplier^k, capped */
} sl_restart_kind_t;

typedef struct sl_restart_config_s {
  sl_restart_kind_t kind;
  uint32_t max_attempts;      /* restarts allowed; 0 = unlimited */
  int64_t delay_ms;
  int64_t max_delay_ms;       /* exponential: cap; default 60 s */
  double multiplier;          /* exponential: default 2 */
} sl_restart_config_t;

typedef struct sl_job_config_s {
  const char *name;          /* job name; default "job"; see SL_MAX_JOB_NAME */
  uint32_t parallelism;      /* default operator parallelism; 0 = cores */
  uint32_t max_parallelism;  /* number of key groups; default 128 */
  uint32_t n_workers;        /* worker threads; 0 = cores */
  uint32_t buffer_size;      /* bytes per channel buffer; default 32768 */
  uint32_t channel_buffers;  /* credits per channel; default 4 */
  sl_checkpoint_config_t checkpoint;
  sl_restart_config_t restart;
  /* Start from this checkpoint or savepoint directory (chk-N). */
  const char *restore_from;
  /* Start from the newest usable checkpoint under checkpoint.dir/<name>,
   * if there is one. */
  bool resume_latest;
  /* Appended.  Restore a checkpoint even when a transactional sink proves
   * that it already committed the output of a newer one (the restore then
   * emits that output again).  Without it such a restore fails with an
   * error naming the sink and both checkpoints.  See docs/checkpoints.md.
   * sluice run: --allow-duplicate-sink-output. */
  bool allow_duplicate_sink_output;
  /* Appended.  Buffer timeout, as Flink's execution.buffer-timeout: an
   * output buffer that holds records is sent at most this many
   * milliseconds after its first record (plus one scheduling quantum, a
   * few ms), even while its task stays busy.  Default 10
   * (sl_job_config_init); 0: every record is sent at once (lowest latency,
   * lowest throughput); -1: only when the buffer is full, before a
   * watermark, barrier or end, or when the task runs out of input.  A
   * task sends what it holds whenever it runs out of input, whatever this
   * is.  docs/pipeline.md, buffer_timeout_ms. */
  int64_t buffer_timeout_ms;
} sl_job_config_t;

/** @brief Fill cfg with the defaults above. */
SL_API void sl_job_config_init(sl_job_config_t *cfg);

/**
 * @brief Create an empty job.
 * @return SL_OK, SL_EINVAL (bad config, message says which field), SL_ENOMEM.
 * @ownership the caller owns *out_job and frees it with sl_job_destroy().
 */
SL_API int sl_job_create(const sl_job_config_t *cfg, sl_job_t **out_job,
                         sl_error_t **out_err);
SL_API void sl_job_destroy(sl_job_t *job);

/* ------------------------------------------------------------------ */
/* User functions.  Each runs on the thread of its task, never concurrently
 * with another call on the same subtask.  `user` is the pointer given when
 * the operator was added; it is shared by all subtasks, so treat it as
 * read-only and keep per-subtask data with sl_ctx_set_local().  For
 * exactly-once results, user functions must be deterministic. */

/** Map one row to one row: fill `out` (already reset, kind copied). */
typedef int (*sl_map_fn)(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                         sl_row_builder_t *out);
/** Return 1 to keep the row, 0 to drop it, a negative code on error. */
typedef int (*sl_filter_fn)(sl_ctx_t *ctx, void *user, const sl_row_t *in);
/** Emit any number of rows with sl_collect()/sl_collect_builder(). */
typedef int (*sl_flat_map_fn)(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                              sl_collector_t *out);
/** Append the canonical key of a row (sl_key_add_*). */
typedef int (*sl_key_fn)(void *user, const sl_row_t *row, sl_bytes_t *key);

typedef struct sl_process_fns_s {
  /** Optional: called once per subtask before any row; register states. */
  int (*open)(sl_ctx_t *ctx, void *user);
  /** Rows of the (first) input. */
  int (*process)(sl_ctx_t *ctx, void *user, const sl_row_t *row);
  /** Rows of the second input of a connected stream. */
  int (*process2)(sl_ctx_t *ctx, void *user, const sl_row_t *row);
  /** A processing-time timer fired; the timer's key is current. */
  int (*on_timer)(sl_ctx_t *ctx, void *user, int64_t timestamp_ns);
  /** Optional: called when all input has ended (bounded jobs). */
  int (*end_input)(sl_ctx_t *ctx, void *user);
  /** Optional: called once per subtask at shutdown, also after errors. */
  void (*close)(sl_ctx_t *ctx, void *user);
  /**
   * Optional: checkpoint id completed.  It covers every earlier pending
   * checkpoint too (notifications may be subsumed or lost on a failure).
   */
  void (*checkpoint_complete)(sl_ctx_t *ctx, void *user, uint64_t id);
  /** Optional: checkpoint id was aborted. */
  void (*checkpoint_aborted)(sl_ctx_t *ctx, void *user, uint64_t id);
  /** An event-time timer fired (sl_time.h); the timer's key is current. */
  int (*on_event_timer)(sl_ctx_t *ctx, void *user, int64_t timestamp_us);
} sl_process_fns_t;

/* ------------------------------------------------------------------ */
/* Sources and sinks are defined in sl_connector.h. */
typedef struct sl_source_vt_s sl_source_vt_t;
typedef struct sl_sink_vt_s sl_sink_vt_t;

/**
 * @brief Add a source.  ctx is the connector instance created by the
 * connector; the job takes ownership of it (vt->destroy) even on error.
 * The schema is referenced by the job.
 */
SL_API sl_stream_t *sl_job_source(sl_job_t *job, const char *uid,
                                  const sl_source_vt_t *vt, void *ctx,
                                  sl_schema_t *schema);
SL_API sl_stream_t *sl_stream_map(sl_stream_t *in, const char *uid,
                                  sl_schema_t *out_schema, sl_map_fn fn,
                                  void *user);
SL_API sl_stream_t *sl_stream_filter(sl_stream_t *in, const char *uid,
                                     sl_filter_fn fn, void *user);
SL_API sl_stream_t *sl_stream_flat_map(sl_stream_t *in, const char *uid,
                                       sl_schema_t *out_schema,
                                       sl_flat_map_fn fn, void *user);
/** @brief Key a stream by fields (names must exist in its schema). */
SL_API sl_stream_t *sl_stream_key_by_fields(sl_stream_t *in,
                                            const char *const *fields,
                                            uint32_t n_fields);
/** @brief Key a stream by a user key function. */
SL_API sl_stream_t *sl_stream_key_by(sl_stream_t *in, sl_key_fn fn, void *user);
/** @brief Keyed process function (input must be keyed). */
SL_API sl_stream_t *sl_stream_process(sl_stream_t *keyed, const char *uid,
                                      sl_schema_t *out_schema,
                                      const sl_process_fns_t *fns, void *user);
/**
 * @brief Two-input process function: rows of `a` go to fns->process, rows of
 * `b` to fns->process2.  When both are keyed, keyed state and timers are
 * available and both inputs must use keys of the same meaning.
 */
SL_API sl_stream_t *sl_stream_connect(sl_stream_t *a, sl_stream_t *b,
                                      const char *uid, sl_schema_t *out_schema,
                                      const sl_process_fns_t *fns, void *user);
/** @brief Union of streams with equal schemas. */
SL_API sl_stream_t *sl_stream_union(sl_stream_t *const *streams, uint32_t n);
/** @brief Redistribute round-robin to the next operator. */
SL_API sl_stream_t *sl_stream_rebalance(sl_stream_t *in);
/** @brief Send every row to every subtask of the next operator. */
SL_API sl_stream_t *sl_stream_broadcast(sl_stream_t *in);
/**
 * @brief Add a sink.  Takes ownership of ctx (vt->destroy) even on error.
 * The sink reads `in` as handed: forward at the same parallelism, round
 * robin at another.  An upsert sink with a key gives each key one subtask
 * by reading sl_stream_key_by_fields(in, key, n_key) (docs/pipeline.md,
 * "Sink parallelism and keys").
 */
SL_API int sl_stream_sink(sl_stream_t *in, const char *uid,
                          const sl_sink_vt_t *vt, void *ctx);
/** @brief Parallelism of the operator that produces `s` (0 = job default). */
SL_API sl_stream_t *sl_stream_set_parallelism(sl_stream_t *s,
                                              uint32_t parallelism);
/** @brief Parallelism of the sink most recently added on `s`. */
SL_API int sl_stream_set_sink_parallelism(sl_stream_t *s, uint32_t parallelism);
/** @brief Schema of the rows of a stream (borrowed). */
SL_API const sl_schema_t *sl_stream_schema(const sl_stream_t *s);

/** @brief The first builder error of the job, or NULL (borrowed). */
SL_API const sl_error_t *sl_job_error(const sl_job_t *job);

/* ------------------------------------------------------------------ */
/* Running. */

/**
 * @brief Run the job to completion (bounded input), failure or cancel.
 * @return SL_OK; SL_ECANCELED after sl_job_cancel(); another code on failure
 * with *out_err naming the operator and subtask.
 * @thread any thread except a worker; a job runs at most once.
 */
SL_API int sl_job_run(sl_job_t *job, sl_error_t **out_err);
/** @brief Start the job in the background; pair with sl_job_wait(). */
SL_API int sl_job_start(sl_job_t *job, sl_error_t **out_err);
SL_API int sl_job_wait(sl_job_t *job, sl_error_t **out_err);
/** @brief Ask a running job to stop.  @thread any (not a signal handler). */
SL_API void sl_job_cancel(sl_job_t *job);

/* ------------------------------------------------------------------ */
/* Checkpoints. */

typedef struct sl_checkpoint_stats_s {
  uint64_t id;
  int result;                  /* SL_OK completed, else why it was aborted */
  int64_t trigger_ns;          /* scheduler time of the trigger */
  int64_t duration_ns;         /* trigger to completion */
  uint64_t bytes;              /* state and channel-state bytes written */
  uint64_t channel_bytes;      /* of which channel state */
  /* Maxima over subtasks. */
  int64_t max_barrier_delay_ns;  /* trigger to first barrier at a task */
  int64_t max_alignment_ns;      /* first to last barrier at a task */
  int64_t max_sync_ns;
  int64_t max_async_ns;
  bool is_unaligned;           /* taken (partly) unaligned */
} sl_checkpoint_stats_t;

/**
 * @brief Trigger a checkpoint now.  @return SL_OK with its id, SL_ESTATE
 * (checkpoints off, job not running, or a task has finished), SL_EAGAIN
 * (max_concurrent checkpoints in flight).
 * @thread any.
 */
SL_API int sl_job_trigger_checkpoint(sl_job_t *job, uint64_t *out_id,
                                     sl_error_t **out_err);
/**
 * @brief Wait until checkpoint id completes or aborts (or timeout_ms, at
 * most SL_MAX_DURATION_MS: a larger value waits that long).
 * @return SL_OK (completed), the abort reason, or SL_EAGAIN on timeout.
 */
SL_API int sl_job_wait_checkpoint(sl_job_t *job, uint64_t id,
                                  int64_t timeout_ms,
                                  sl_checkpoint_stats_t *out_stats);
/** @brief Stats of the latest completed checkpoint; SL_ENOTFOUND if none. */
SL_API int sl_job_last_checkpoint(sl_job_t *job,
                                  sl_checkpoint_stats_t *out_stats);
/**
 * @brief The most recent checkpoints (completed or aborted), oldest first,
 * at most max of them.  @return the number written.
 */
SL_API uint32_t sl_job_checkpoint_history(sl_job_t *job,
                                          sl_checkpoint_stats_t *out,
                                          uint32_t max);

/* One task's part in a checkpoint. */
typedef struct sl_checkpoint_task_stats_s {
  uint32_t task;               /* index into sl_metrics_t.tasks */
  int64_t barrier_delay_ns;    /* trigger to the task's first barrier */
  int64_t alignment_ns;
  int64_t sync_ns;
  int64_t async_ns;
  uint64_t bytes;
  uint64_t channel_bytes;
  bool is_unaligned;
  bool has_acked;
} sl_checkpoint_task_stats_t;

/**
 * @brief Per-task stats of a recent checkpoint.  @return SL_OK with
 * *out_stats (free with sl_free) and *out_n, or SL_ENOTFOUND.
 */
SL_API int sl_job_checkpoint_tasks(sl_job_t *job, uint64_t id,
                                   sl_checkpoint_task_stats_t **out_stats,
                                   uint32_t *out_n);
/** @brief Number of restarts so far and of completed checkpoints. */
SL_API uint32_t sl_job_restarts(const sl_job_t *job);

/* ------------------------------------------------------------------ */
/* Context of a running operator subtask. */

SL_API uint32_t sl_ctx_subtask(const sl_ctx_t *ctx);
SL_API uint32_t sl_ctx_parallelism(const sl_ctx_t *ctx);
SL_API uint32_t sl_ctx_max_parallelism(const sl_ctx_t *ctx);
SL_API const char *sl_ctx_uid(const sl_ctx_t *ctx);
SL_API void sl_ctx_set_local(sl_ctx_t *ctx, void *local);
SL_API void *sl_ctx_local(const sl_ctx_t *ctx);
/** @brief Processing time, ns since the epoch, from the scheduler. */
SL_API int64_t sl_ctx_now(const sl_ctx_t *ctx);
/** @brief Attach a message to the error the user function is returning. */
SL_API int sl_ctx_fail(sl_ctx_t *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** @brief A builder for the operator's output schema, reset to +I. */
SL_API sl_row_builder_t *sl_ctx_builder(sl_ctx_t *ctx);
/** @brief Emit a row downstream (copied before return). */
SL_API int sl_ctx_emit(sl_ctx_t *ctx, const sl_row_t *row);
/** @brief Finish the builder of sl_ctx_builder() and emit it. */
SL_API int sl_ctx_emit_builder(sl_ctx_t *ctx);
/** @brief Key of the row or timer being processed (keyed operators). */
SL_API sl_slice_t sl_ctx_current_key(const sl_ctx_t *ctx);
/**
 * @brief Register a processing-time timer for the current key.  Timers with
 * the same (key, time) fire once.  @return SL_OK, SL_ESTATE if not keyed.
 */
SL_API int sl_ctx_timer_register(sl_ctx_t *ctx, int64_t timestamp_ns);
SL_API int sl_ctx_timer_delete(sl_ctx_t *ctx, int64_t timestamp_ns);

/* flat_map output */
SL_API int sl_collect(sl_collector_t *out, const sl_row_t *row);
SL_API sl_row_builder_t *sl_collector_builder(sl_collector_t *out);
SL_API int sl_collect_builder(sl_collector_t *out);

#ifdef __cplusplus
}
#endif
#endif
