/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The source and sink interfaces.  Built-in connectors (generator, file,
 * stdout) use exactly these; a user's connector looks the same.
 *
 * A source has splits (independent, replayable pieces of input: a file, a
 * generator stream, a partition).  At plan time the source lists them, each
 * under a stable id; split s of the list is read by subtask
 * s % parallelism.  A reader polls its splits and emits rows; between two
 * polls the engine may ask for the position of each split, which must
 * identify the next record to read so that a reader opened at that position
 * replays exactly from there.  Checkpoints store positions under the split
 * ids, so a restore at any parallelism, or after the list changed, gives
 * each split its own position.  See docs/connectors.md.
 */
#ifndef SLUICE_SL_CONNECTOR_H
#define SLUICE_SL_CONNECTOR_H

#include "sl_common.h"
#include "sl_job.h"
#include "sl_row.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_source_out_s sl_source_out_t;
struct sl_enum_vt_s;

/* Results of reader_poll besides errors (negative codes). */
#define SL_POLL_MORE 0 /* call again */
#define SL_POLL_WAIT 1 /* nothing now: wait for sl_source_out_wait_until() or
                          sl_source_waker_wake() */
#define SL_POLL_END 2  /* every assigned split is finished */

/*
 * Splits have two names.  The id is a stable, printable string chosen by
 * the source (a file's path, "seed=42/split=3/8", a partition): it names the
 * same piece of input in every run of the job, and checkpoints store
 * positions under it.  The index (0..n_splits-1, the order in which plan()
 * listed the splits) names a split within one run only; reader_position(),
 * sl_source_set_split() and sl_source_split_finished() take the index.
 *
 * On restore, each split gets the position stored under its id, whichever
 * subtask read it before (so a change of parallelism redistributes splits).
 * A split of the checkpoint that the new list lacks is an error that names
 * it; a split the checkpoint lacks starts from its beginning.  The reader
 * checks that a position still fits its split (a file long enough and
 * unchanged before the position, a generator split not shorter) and fails
 * with a message naming the split and both values when it does not.
 */

/** The list of splits that plan() fills.  Owned by the engine. */
typedef struct sl_split_list_s sl_split_list_t;

/**
 * @brief Create an empty split list (the engine does this before plan();
 * a test of a source, or a program planning by itself, may too).
 * @return SL_OK or SL_ENOMEM.
 * @ownership the caller owns *out and frees it with sl_split_list_destroy.
 */
SL_API int sl_split_list_create(sl_split_list_t **out);
/** @brief Free a split list and its ids.  NULL does nothing. */
SL_API void sl_split_list_destroy(sl_split_list_t *list);

/**
 * @brief Add a split with a stable id (copied; non-empty, at most 4096
 * bytes).  Ids must be unique within a source: the planner refuses a
 * duplicate with a message naming it.
 * @return SL_OK, SL_EINVAL (empty or too long) or SL_ENOMEM.
 * @thread the thread running plan().
 */
SL_API int sl_split_list_add(sl_split_list_t *list, const char *id);
/** @brief sl_split_list_add() with a printf-formatted id. */
SL_API int sl_split_list_addf(sl_split_list_t *list, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** @brief Number of splits added so far. */
SL_API uint32_t sl_split_list_count(const sl_split_list_t *list);
/** @brief Id of split i (borrowed, valid while the list lives), or NULL. */
SL_API const char *sl_split_list_id(const sl_split_list_t *list, uint32_t i);

typedef struct sl_split_init_s {
  uint32_t split;             /* index in this run's list, 0..n_splits-1 */
  const char *id;             /* stable id; borrowed, valid until
                                 reader_close */
  const uint8_t *position;    /* NULL: start from the beginning */
  size_t position_len;
} sl_split_init_t;

typedef struct sl_source_waker_s sl_source_waker_t;

typedef struct sl_reader_init_s {
  uint32_t subtask;
  uint32_t parallelism;
  const sl_split_init_t *splits; /* borrowed for the call */
  uint32_t n_splits;
  const sl_schema_t *schema;
  sl_source_waker_t *waker;      /* valid until reader_close */
} sl_reader_init_t;

struct sl_source_vt_s {
  const char *type_name; /* "generator", "file" ... used in messages */
  /**
   * List the splits for the given parallelism with sl_split_list_add().
   * The list should not depend on the parallelism (so that output does
   * not either).  May open external resources to check they exist; an
   * error here stops the job before it starts, with a message that names
   * the input.
   */
  int (*plan)(void *ctx, uint32_t parallelism, sl_split_list_t *splits,
              sl_error_t **out_err);
  /**
   * Open a reader for the assigned splits (init->splits, borrowed for the
   * call; each split's id stays valid until reader_close).  A stored
   * position that no longer fits its split is an error naming the split.
   */
  int (*reader_open)(void *ctx, const sl_reader_init_t *init,
                     void **out_reader, sl_error_t **out_err);
  /**
   * Emit rows with sl_source_emit() until it returns false or there is
   * nothing more, then return SL_POLL_*.  Return between two records.
   */
  int (*reader_poll)(void *reader, sl_source_out_t *out, sl_error_t **out_err);
  /**
   * Append the position of assigned split `split` (its index) to out_pos:
   * the next record to read, and whatever lets reader_open() check that
   * the position still fits the split.
   */
  int (*reader_position)(void *reader, uint32_t split, sl_bytes_t *out_pos);
  void (*reader_close)(void *reader);
  void (*destroy)(void *ctx);
  /* --- The source framework (FLIP-27 shape); see sl_enum_vt_t below.
   * A source that leaves these NULL keeps the static enumerator: plan()
   * lists the splits once and split s goes to subtask s % parallelism,
   * handed to reader_open. --- */
  /**
   * Optional: the source's split enumerator.  When set, plan() is not
   * called; the enumerator discovers and assigns the splits, and the
   * reader must implement reader_add_splits.
   */
  const struct sl_enum_vt_s *enumerator;
  /**
   * Splits assigned while the reader runs (init->splits each have index
   * `split`, numbered on from the reader's earlier splits, an id and a
   * position to start from, NULL for the beginning); borrowed for the call
   * except the ids, valid until reader_close.  Called on the reader's task
   * between two polls.  An error fails the task.
   */
  int (*reader_add_splits)(void *reader, const sl_split_init_t *splits,
                           uint32_t n_splits, sl_error_t **out_err);
  /** Optional: a custom event from the enumerator (sl_enum_send_event),
   * borrowed for the call.  Called between two polls. */
  int (*reader_handle_event)(void *reader, const uint8_t *event, size_t len,
                             sl_error_t **out_err);
};

/**
 * @brief Emit a row (copied).  Returns true to go on, false when the poll
 * should return now (output backpressure, quantum used, cancel).  The row
 * was accepted either way.
 * @thread the reader's task.
 */
SL_API bool sl_source_emit(sl_source_out_t *out, const sl_row_t *row);
/** @brief A builder for the source schema, reset to +I. */
SL_API sl_row_builder_t *sl_source_builder(sl_source_out_t *out);
/** @brief Finish the builder and emit; false on a builder error too. */
SL_API bool sl_source_emit_builder(sl_source_out_t *out, sl_error_t **out_err);
/**
 * @brief The rows emitted next belong to assigned split `split`.  A reader
 * of several splits calls it when it switches, so that watermarks can be
 * tracked per split; a reader of one split need not.
 */
SL_API void sl_source_set_split(sl_source_out_t *out, uint32_t split);
/** @brief Split `split` has no more rows: it no longer holds the watermark. */
SL_API void sl_source_split_finished(sl_source_out_t *out, uint32_t split);
/** @brief Processing time in ns since the epoch (the scheduler's clock). */
SL_API int64_t sl_source_now(const sl_source_out_t *out);
/** @brief With SL_POLL_WAIT: poll again at or after t_ns. */
SL_API void sl_source_wait_until(sl_source_out_t *out, int64_t t_ns);
/** @brief Wake a waiting reader from any thread (e.g. a client thread). */
SL_API void sl_source_waker_wake(sl_source_waker_t *waker);

/**
 * @brief Send a custom event to the source's enumerator (copied; at most
 * 1 MiB).  Events of one reader arrive in order.  Nothing for a source
 * without an enumerator.
 * @return SL_OK, SL_EINVAL (too long) or SL_ENOMEM.
 * @thread the reader's task.
 */
SL_API int sl_source_send_event(sl_source_out_t *out, const uint8_t *event,
                                size_t len);
/**
 * @brief Ask the enumerator for a split (its handle_split_request).  The
 * engine asks once when the reader opens and whenever reader_poll returns
 * SL_POLL_END before the enumerator said no more splits would come; a
 * reader may ask more often.  @thread the reader's task.
 */
SL_API void sl_source_request_split(sl_source_out_t *out);

/* ------------------------------------------------------------------ */
/*
 * Split enumerators.  An enumerator runs once per source in the
 * checkpoint coordinator, never in a task: every callback below runs on
 * the source's enumerator thread, one at a time (so an enumerator needs no
 * lock of its own), and the sl_enum_* calls may be made only from inside
 * those callbacks.  It discovers splits (at start, then every discovery
 * interval), assigns them to reader subtasks (on a reader's request or by
 * its own policy), hears "split finished" and custom events from readers,
 * sends custom events to readers, and snapshots its state in every
 * checkpoint, before the sources are triggered for it.
 *
 * The engine adds two rules (docs/connectors.md):
 * - assignment tracker: when a reader subtask is reset to checkpoint N (a
 *   restart from N in the same process), the splits assigned to it after
 *   the enumerator's snapshot for N come back through add_splits_back,
 *   with the state they were assigned with; those assigned before stay
 *   with the reader, whose restored state holds them;
 * - event gateway: an assignment or event for a reader made after the
 *   enumerator's snapshot for N is held until that reader has taken its
 *   snapshot for N, so it is in neither both states nor none.
 * A restore in a new process, or at another parallelism, creates the
 * enumerator from its checkpointed state; at another parallelism the
 * splits the old readers held come back to it through add_splits_back
 * (subtask UINT32_MAX), with their positions, to be assigned again.
 */

/** A split handed between enumerator and readers. */
typedef struct sl_split_s {
  const char *id;       /* stable id, as for sl_split_list_add */
  const uint8_t *state; /* where to start (a reader position); NULL: the
                           beginning */
  size_t state_len;
} sl_split_t;

typedef struct sl_enum_ctx_s sl_enum_ctx_t;

typedef struct sl_enum_init_s {
  uint32_t parallelism;            /* reader subtasks */
  const uint8_t *state;            /* the checkpointed state; NULL: fresh
                                      start.  Borrowed for the call */
  size_t state_len;
  uint64_t restored_checkpoint_id; /* 0 on a fresh start */
} sl_enum_init_t;

/** Every slot returns SL_OK or a negative code; an error fails the job
 * (fatal when out_err says so).  Optional slots may be NULL. */
typedef struct sl_enum_vt_s {
  /** Create the enumerator from the source context (restoring
   * init->state when set).  No assignment yet. */
  int (*create)(void *src_ctx, const sl_enum_init_t *init, void **out_en,
                sl_error_t **out_err);
  /** Optional: look for new splits; called after create, then every
   * discovery interval (sl_enum_set_discovery_interval). */
  int (*discover)(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err);
  /** Optional: reader `subtask` asked for a split. */
  int (*handle_split_request)(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                              sl_error_t **out_err);
  /** Splits come back (tracker or rescale; see above).  Borrowed for the
   * call.  subtask is the reader they came from, UINT32_MAX for a rescale. */
  int (*add_splits_back)(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                         const sl_split_t *splits, uint32_t n_splits,
                         sl_error_t **out_err);
  /** Optional: reader `subtask` opened (again, after a reset). */
  int (*add_reader)(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                    sl_error_t **out_err);
  /** Optional: reader `subtask` read split `split_id` to its end. */
  int (*handle_split_finished)(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                               const char *split_id, sl_error_t **out_err);
  /** Optional: a custom event of reader `subtask` (borrowed). */
  int (*handle_reader_event)(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                             const uint8_t *event, size_t len,
                             sl_error_t **out_err);
  /** Append the enumerator's state for checkpoint_id to out_state. */
  int (*snapshot)(void *en, uint64_t checkpoint_id, sl_bytes_t *out_state);
  /** Optional: checkpoint_id (and every older one) completed. */
  void (*checkpoint_complete)(void *en, uint64_t checkpoint_id);
  void (*close)(void *en);
} sl_enum_vt_t;

/**
 * @brief Assign split to reader subtask (copied).  It reaches the reader
 * through the event gateway.  The enumerator keeps each split with one
 * reader at a time (the engine does not check it).
 * @return SL_OK, SL_EINVAL (subtask out of range, an empty or too long id)
 * or SL_ENOMEM.
 * @thread the enumerator thread (inside a callback).
 */
SL_API int sl_enum_assign(sl_enum_ctx_t *ec, uint32_t subtask,
                          const sl_split_t *split);
/**
 * @brief No more splits will come to reader subtask: once it has read its
 * splits to their end it finishes (an unbounded source never calls it).
 * @return SL_OK, SL_EINVAL or SL_ENOMEM.  @thread the enumerator thread.
 */
SL_API int sl_enum_signal_no_more_splits(sl_enum_ctx_t *ec, uint32_t subtask);
/**
 * @brief Send a custom event (copied, at most 1 MiB) to reader subtask,
 * through the event gateway; reader_handle_event receives it.
 * @return SL_OK, SL_EINVAL or SL_ENOMEM.  @thread the enumerator thread.
 */
SL_API int sl_enum_send_event(sl_enum_ctx_t *ec, uint32_t subtask,
                              const uint8_t *event, size_t len);
/** @brief Reader subtasks.  @thread the enumerator thread. */
SL_API uint32_t sl_enum_parallelism(const sl_enum_ctx_t *ec);
/**
 * @brief Call discover every interval_ms (0: never again; the default).
 * @thread the enumerator thread.
 */
SL_API void sl_enum_set_discovery_interval(sl_enum_ctx_t *ec,
                                           int64_t interval_ms);

/* ------------------------------------------------------------------ */

typedef struct sl_sink_init_s {
  uint32_t subtask;
  uint32_t parallelism;
  const sl_schema_t *schema;
  const char *uid;
  /* The attempt restored checkpoint restored_checkpoint_id (an in-process
   * restart or --resume): output written before that checkpoint is already
   * there and must not be destroyed.  False: a fresh start from the
   * beginning of the input (restored_checkpoint_id is 0). */
  bool is_restored;
  uint64_t restored_checkpoint_id;
} sl_sink_init_t;

struct sl_sink_vt_s {
  const char *type_name;
  int (*writer_open)(void *ctx, const sl_sink_init_t *init, void **out_writer,
                     sl_error_t **out_err);
  int (*write)(void *writer, const sl_row_t *row, sl_error_t **out_err);
  /**
   * Optional: make everything written so far durable/visible.  Called when
   * every input has ended, and before the sink's task takes its snapshot for
   * a checkpoint: what a checkpoint covers must have reached the output
   * before the checkpoint can complete.
   */
  int (*flush)(void *writer, sl_error_t **out_err);
  /**
   * Close a writer.  is_success says whether all input ended normally; on
   * failure or cancel the writer should discard what it can.
   */
  int (*writer_close)(void *writer, bool is_success, sl_error_t **out_err);
  void (*destroy)(void *ctx);
};

/* ------------------------------------------------------------------ */
/* Built-in connectors.  Each returns a vtable and a new instance context
 * for sl_job_source()/sl_stream_sink(). */

typedef enum sl_gen_skew_e { SL_GEN_UNIFORM = 0, SL_GEN_ZIPF = 1 } sl_gen_skew_t;

/* Columns a generator can produce (a bit set). */
#define SL_GEN_COL_SEQ     (1u << 0) /* int64: record index within split */
#define SL_GEN_COL_SPLIT   (1u << 1) /* int32: split id */
#define SL_GEN_COL_KEY     (1u << 2) /* int64: key in [0, keys) */
#define SL_GEN_COL_AMOUNT  (1u << 3) /* int64: amount in [-1000, 1000] \ {0} */
#define SL_GEN_COL_TS      (1u << 4) /* timestamp: event time */
#define SL_GEN_COL_PAYLOAD (1u << 5) /* string of payload_size (<= 32768) bytes */
#define SL_GEN_COL_ALL     0x3fu

/* Splits of a generator that does not set them. */
#define SL_GEN_DEFAULT_SPLITS 8u

typedef struct sl_gen_config_s {
  uint64_t seed;
  uint64_t count;        /* total records over all splits; 0 = unbounded */
  double rate;           /* events/s over all splits; 0 = unlimited */
  uint64_t keys;         /* distinct keys, >= 1 */
  sl_gen_skew_t skew;
  double zipf_exponent;  /* > 0, default 1.0 */
  uint32_t payload_size; /* bytes */
  uint32_t splits;       /* 0 = SL_GEN_DEFAULT_SPLITS, whatever the
                            parallelism, so the data never depends on it */
  uint32_t columns;      /* SL_GEN_COL_* bits, in this fixed order */
  int64_t start_time_us; /* event time of record 0 */
  int64_t time_step_us;  /* event-time step between records of a split */
} sl_gen_config_t;

SL_API void sl_gen_config_init(sl_gen_config_t *cfg);
/**
 * @brief Create a generator source.  The record i of split s is a pure
 * function of (seed, s, i), so a reader can start at any position.
 * @ownership the caller owns *out_schema (one reference) and *out_ctx until
 * it hands ctx to sl_job_source().
 */
SL_API int sl_gen_source_create(const sl_gen_config_t *cfg,
                                const sl_source_vt_t **out_vt, void **out_ctx,
                                sl_schema_t **out_schema, sl_error_t **out_err);

typedef enum sl_format_e { SL_FORMAT_CSV = 0, SL_FORMAT_JSON = 1 } sl_format_t;

typedef struct sl_file_source_config_s {
  const char *const *paths; /* files; a directory means its regular files */
  uint32_t n_paths;
  sl_format_t format;
  bool csv_header;          /* first line of each file is a header */
  char csv_delimiter;       /* default ',' */
  const sl_schema_t *schema;
  /* > 0: monitor the inputs continuously: every monitor_interval_ms the
   * source's enumerator lists them again, and each file it has not seen
   * (by path) becomes a new split; the source is then unbounded.  A file
   * must be complete when it appears (written elsewhere, then renamed
   * into the directory): one that is still being written may be read
   * short.  0: the files present at the start, read once (bounded). */
  int64_t monitor_interval_ms;
} sl_file_source_config_t;

SL_API int sl_file_source_create(const sl_file_source_config_t *cfg,
                                 const sl_source_vt_t **out_vt, void **out_ctx,
                                 sl_error_t **out_err);

/*
 * A fresh start truncates each output file; an attempt that restored a
 * checkpoint (sl_sink_init_t.is_restored) appends to it instead, after
 * cutting a partly written last row, so rows written after the checkpoint
 * appear twice (at-least-once).  See docs/connectors.md.
 */
typedef struct sl_file_sink_config_s {
  const char *path;      /* parallelism 1: this file; else one file per
                            subtask i, "<stem>-<i><ext>" (out-0.csv) */
  sl_format_t format;
  bool csv_header;
  char csv_delimiter;
  bool changelog;        /* add an "op" column (+I/-U/+U/-D) first */
} sl_file_sink_config_t;

SL_API int sl_file_sink_create(const sl_file_sink_config_t *cfg,
                               const sl_sink_vt_t **out_vt, void **out_ctx,
                               sl_error_t **out_err);
/** @brief Rows to standard output, one line each (CSV with ','). */
SL_API int sl_stdout_sink_create(sl_format_t format, bool changelog,
                                 const sl_sink_vt_t **out_vt, void **out_ctx,
                                 sl_error_t **out_err);
/**
 * @brief Rows to standard output with the options of a file sink: format,
 * csv_header, csv_delimiter and changelog; cfg->path must be NULL.  The
 * header line is written once, by the first writer that opens, whatever
 * the parallelism.
 * @return SL_OK, or SL_EINVAL for a path or an invalid delimiter.
 */
SL_API int sl_stdout_sink_create_cfg(const sl_file_sink_config_t *cfg,
                                     const sl_sink_vt_t **out_vt,
                                     void **out_ctx, sl_error_t **out_err);
/** @brief Discards rows, counting them (benchmarks). */
SL_API int sl_null_sink_create(const sl_sink_vt_t **out_vt, void **out_ctx);

#ifdef __cplusplus
}
#endif
#endif
