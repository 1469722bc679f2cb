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
   * handed to reader_open.  The built-in generator and file sources have
   * enumerators. --- */
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
  /* Appended (zero from a caller that predates them). */
  const char *source_uid;          /* the source's uid, for messages;
                                      borrowed for the call */
  /* On a restore: every split the checkpoint's readers hold, with its
   * position (borrowed for the call).  At the same parallelism each stays
   * with the reader that held it; at another one (or from a checkpoint
   * without enumerator state) they also come back through
   * add_splits_back.  Either way the enumerator must not hand them out
   * from its own discovery, and create may check that they still exist
   * (an error then names the split, the source and the checkpoint). */
  const sl_split_t *restored_splits;
  uint32_t n_restored_splits;
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
  /* Appended (NULL in a vtable that predates it). */
  /** Optional: reader `subtask` was reset to checkpoint_id in the same
   * process (the live enumerator is kept), after its splits assigned later
   * came back through add_splits_back.  Facts the enumerator learnt from
   * that reader after its snapshot for checkpoint_id (custom events, such
   * as "chunk finished") are not in the reader's restored state: the
   * enumerator forgets or re-arms them here.  Runs before any later
   * snapshot. */
  int (*reset_reader)(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      uint64_t checkpoint_id, sl_error_t **out_err);
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

/*
 * Sinks.  A plain sink has writer_open/write/flush/writer_close: what it
 * wrote before a failure stays written, so after a restore it sees again
 * the rows written since the restored checkpoint (at-least-once).
 *
 * A transactional sink (two-phase commit) also sets prepare, commit and
 * committer_open (recover and committer_close are optional); the engine
 * then gives it exactly-once output through any failure:
 *
 *   epoch:   the rows between two barriers go into one external
 *            transaction per sink subtask, invisible to readers.
 *   prepare: at barrier N, after the epoch's last row and before the sync
 *            snapshot, prepare(writer, N) makes the epoch durable but not
 *            visible and returns an opaque committable (what commit needs:
 *            a transaction id, a file name).  The engine keeps every
 *            committable not yet confirmed committed in the subtask's
 *            operator state "sink.committables" of checkpoint N.  A failed
 *            prepare fails the task (never "skip this checkpoint").
 *   commit:  when checkpoint M completes, the engine commits every pending
 *            committable <= M, in checkpoint order per origin subtask, and
 *            drops it on SL_COMMIT_OK or SL_COMMIT_ALREADY.  An aborted
 *            checkpoint leaves its committable pending; the next completed
 *            checkpoint commits it.
 *   restore: an attempt that restores checkpoint C first commits the
 *            committables C holds, then calls recover() to abort lingering
 *            external transactions of the subtasks it owns, then opens the
 *            writer.  After a change of parallelism from p to p', new
 *            subtask j owns the committables and transactions of every old
 *            subtask i with i % p' == j.  Before it commits anything, a
 *            sink that sets committed_max is asked whether output of a
 *            checkpoint after C is already committed: then the restore
 *            would emit it twice, and it fails unless the job allows
 *            duplicate sink output.
 *
 * Naming transactions.  Transaction ids must be stable and unique: derive
 * them from (job, sink uid, subtask, epoch id).  The epoch id names the
 * epoch a writer is filling: at writer_open it is sl_sink_init_t.epoch_id,
 * and after prepare(writer, N) the next epoch is named N.  The engine
 * reserves epoch_id for the attempt from the job's checkpoint id sequence
 * (recorded durably in the high-water mark before use, see
 * docs/checkpoints.md), and checkpoint ids are never reused, not even after
 * a crash before the first checkpoint completed; so no two epochs of a
 * (job, sink uid, subtask), in any attempt or process, share an id.  The id
 * is known when the epoch opens (MariaDB needs its xid at XA START).  The
 * checkpoint that closes an epoch is only known at prepare, and it is
 * passed there.
 *
 * Threads: every callback of a sink runs on the thread of the sink's task,
 * one subtask's calls never concurrently.  A commit to retry is retried
 * later on the same thread (the task is woken by the scheduler, never
 * blocked in a sleep).
 */

/** @brief What a sink writer learns when it opens. */
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
  /* Appended (for transactional sinks above all). */
  const char *job;    /* the job's name (sl_job_config_t.name); borrowed,
                         valid until writer_close */
  uint64_t epoch_id;  /* transactional sinks: the id of the first epoch
                         this writer fills (see "Naming transactions");
                         0 for a plain sink */
} sl_sink_init_t;

/** @brief The answer of a commit. */
typedef enum sl_commit_status_e {
  SL_COMMIT_OK = 0,      /* committed now */
  SL_COMMIT_ALREADY = 1, /* was committed before (e.g. the reply to an
                            earlier attempt was lost); proven by a marker */
  SL_COMMIT_RETRY = 2,   /* transient (connection lost, busy): try again
                            later; the outcome is resolved by that attempt */
  SL_COMMIT_LOST = 3,    /* the transaction is gone and was not committed
                            (expired, rolled back by someone else, a part
                            file deleted): the epoch's output is lost */
  SL_COMMIT_FATAL = 4,   /* cannot work (permissions, configuration) */
  SL_COMMIT_RESTART = 5  /* appended: not committed now, but a restore can
                            commit it (the connector keeps what it needs,
                            e.g. a replay log, and committing it here would
                            break order): the task fails retriably, the
                            restart strategy applies, and the restore
                            commits the committable again */
} sl_commit_status_t;

/**
 * Counters a committer adds to, for the sink's metrics (sl_metrics.h,
 * docs/metrics.md); the engine counts commits itself.  Owned by the engine.
 */
typedef struct sl_sink_counters_s sl_sink_counters_t;

/**
 * @brief Count n lingering external transactions that recover() aborted
 * (the metric lingering_aborted).  NULL does nothing, so a committer opened
 * outside the engine (a test) needs no counters.
 * @thread the sink's task.
 */
SL_API void sl_sink_counters_add_lingering_aborted(sl_sink_counters_t *c,
                                                   uint64_t n);

/** @brief What a committer learns when it opens. */
typedef struct sl_committer_init_s {
  const char *job;             /* the job's name; borrowed for the call */
  const char *uid;             /* the sink's uid; borrowed for the call */
  uint32_t subtask;            /* j, this sink subtask */
  uint32_t parallelism;        /* p', the sink's parallelism now */
  uint64_t restored_checkpoint_id; /* C, 0 on a fresh start */
  uint32_t restored_parallelism;   /* the sink's parallelism in C (0 on a
                                      fresh start) */
  /* The old subtask ids j owns: every i < max(p', the largest parallelism
   * recorded in the sink's state) with i % p' == j, ascending (j first).
   * Borrowed for the call. */
  const uint32_t *owned_subtasks;
  uint32_t n_owned_subtasks;
  uint64_t epoch_id;           /* the writer's first epoch id (see
                                  sl_sink_init_t): a lingering transaction
                                  of an owned subtask named by an id below
                                  it belongs to an earlier attempt */
  /* Appended.  The committer's counters; valid until committer_close,
   * NULL when no engine runs the committer. */
  sl_sink_counters_t *counters;
} sl_committer_init_t;

struct sl_sink_vt_s {
  const char *type_name;
  int (*writer_open)(void *ctx, const sl_sink_init_t *init, void **out_writer,
                     sl_error_t **out_err);
  int (*write)(void *writer, const sl_row_t *row, sl_error_t **out_err);
  /**
   * Optional: make everything written so far durable/visible.  Called when
   * every input has ended, and before the sink's task takes its snapshot for
   * a checkpoint: what a checkpoint covers must have reached the output
   * before the checkpoint can complete.  A transactional sink's flush must
   * not make rows visible (the engine calls prepare after it).
   */
  int (*flush)(void *writer, sl_error_t **out_err);
  /**
   * Close a writer.  is_success says whether all input ended normally; on
   * failure or cancel the writer should discard what it can.  A
   * transactional writer aborts its open (unprepared) transaction; rows
   * written after the last prepare are never committed.
   */
  int (*writer_close)(void *writer, bool is_success, sl_error_t **out_err);
  void (*destroy)(void *ctx);

  /* ---- Two-phase commit (appended; NULL in a plain sink).  Set prepare,
   * committer_open and commit together, or none of them. ---- */

  /**
   * @brief Close the current epoch at barrier checkpoint_id: make every row
   * written since the previous prepare durable but invisible, and append
   * the committable to out_committable (left empty: nothing to commit for
   * this epoch, e.g. no rows).  The next epoch is named checkpoint_id.
   * @return SL_OK, or an error with *out_err: the task fails and the job
   * restarts from the last completed checkpoint.
   * @thread the sink's task, after the epoch's last row, before the sync
   * snapshot of checkpoint_id.
   * @ownership out_committable is the engine's; the bytes are copied.
   */
  int (*prepare)(void *writer, uint64_t checkpoint_id,
                 sl_bytes_t *out_committable, sl_error_t **out_err);
  /**
   * @brief Open the committer of sink subtask init->subtask.  Called before
   * the restored committables are committed and before writer_open.
   * @return SL_OK, or an error (the task fails).
   * @thread the sink's task.
   * @ownership the engine owns *out_committer until committer_close.
   */
  int (*committer_open)(void *ctx, const sl_committer_init_t *init,
                        void **out_committer, sl_error_t **out_err);
  /**
   * @brief Commit the committable (bytes, len) that origin_subtask prepared
   * at checkpoint checkpoint_id.  Must be idempotent: the same committable
   * can be committed again after a restore or a lost reply, and must then
   * answer SL_COMMIT_ALREADY, never SL_COMMIT_OK twice for one logical
   * commit, and never a silent skip when the outcome is unknown.
   * attempt counts the attempts for this committable, starting at 1; the
   * count is kept in checkpoints, so after a restore it continues from
   * the attempts the restored checkpoint recorded (attempts made after
   * that checkpoint was taken are counted again).
   * @return SL_OK with *out_status set.  Any other return code means
   * SL_COMMIT_FATAL, with *out_err.
   * @thread the sink's task (the committer's owner).
   */
  int (*commit)(void *committer, uint64_t checkpoint_id,
                uint32_t origin_subtask, const uint8_t *bytes, size_t len,
                uint32_t attempt, sl_commit_status_t *out_status,
                sl_error_t **out_err);
  /**
   * @brief Optional: after the restored committables were committed, abort
   * every lingering external transaction (prepared or open) of the owned
   * subtasks (sl_committer_init_t.owned_subtasks): none of them is named
   * by a completed checkpoint still to commit.  Also fences writers of
   * older attempts where the external system allows it.
   * @return SL_OK or an error (the task fails).
   * @thread the sink's task, before writer_open.
   */
  int (*recover)(void *committer, sl_error_t **out_err);
  /** @brief Optional: free a committer.  @thread the sink's task. */
  void (*committer_close)(void *committer);
  /**
   * @brief Optional (appended): the newest checkpoint whose output this
   * sink has committed, as far as the external system proves it, over
   * every subtask of this job and sink uid (a marker table, finished
   * files).  The engine calls it when an attempt restores checkpoint C,
   * once per sink subtask, after committer_open and before the restored
   * committables are committed; an answer K > C means that restoring C
   * would emit K's output again, and the engine refuses the restore unless
   * the job allows duplicate sink output (sl_job_config_t,
   * docs/connectors.md "Restoring an older checkpoint").
   *
   * *out_checkpoint_id: a checkpoint id (the id prepare() was given)
   * whose epoch is committed, the largest one the connector can prove, or
   * a lower bound of it; 0 when nothing is proven.  Never more than the
   * truth: a K that is too large refuses a restore that was safe.
   * out_evidence: optional text naming the proof (a table, a file), for
   * the message; the engine owns it.
   * @return SL_OK, or an error with *out_err (the task fails).
   * @thread the sink's task.
   */
  int (*committed_max)(void *committer, uint64_t *out_checkpoint_id,
                       sl_bytes_t *out_evidence, sl_error_t **out_err);
};

/**
 * @brief Whether vt is a transactional (two-phase commit) sink: prepare,
 * committer_open and commit are all set.
 * @thread any.
 */
SL_API bool sl_sink_is_transactional(const sl_sink_vt_t *vt);

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
 * The Kafka source (librdkafka).  Every partition of the topics is a split
 * with the stable id "<topic>/<partition>"; the source's enumerator finds
 * them (at start, then every discovery_interval_ms: a partition found later
 * starts at its earliest offset) and assigns each to one reader subtask,
 * which reads it with assign() (never a group rebalance).  A split's
 * position is the offset of the next record, kept in the reader's state of
 * every checkpoint; on a restore an offset no longer in the log (deleted by
 * retention) is an error naming topic, partition and offset, never a jump.
 * Records are read with isolation.level read_committed unless
 * read_uncommitted is set.  Bounded: each partition is read up to the end
 * offset the enumerator saw at its first discovery (the last stable offset
 * under read_committed), then the source ends.  With group_id, the offsets
 * of each completed checkpoint are committed to the group by the
 * enumerator, for monitoring (never read back, except by start
 * SL_KAFKA_START_COMMITTED).  See
 * docs/connectors.md.
 */
typedef enum sl_kafka_start_e {
  SL_KAFKA_START_EARLIEST = 0,
  SL_KAFKA_START_LATEST = 1,
  SL_KAFKA_START_COMMITTED = 2, /* the group's offsets; earliest without */
  SL_KAFKA_START_TIMESTAMP = 3, /* the first record at or after
                                   start_timestamp_ms; the end without */
  SL_KAFKA_START_OFFSETS = 4    /* start_offsets; earliest for the others */
} sl_kafka_start_t;

/** @brief How a record's value becomes the value fields of a row. */
typedef enum sl_kafka_format_e {
  SL_KAFKA_FORMAT_JSON = 0,   /* one JSON object (sl_json_parse) */
  SL_KAFKA_FORMAT_CSV = 1,    /* one CSV record (sl_csv_parse) */
  SL_KAFKA_FORMAT_STRING = 2, /* the whole value into the one string field
                                 (must be UTF-8) */
  SL_KAFKA_FORMAT_BYTES = 3   /* the whole value into the one bytes field */
} sl_kafka_format_t;

typedef struct sl_kafka_partition_offset_s {
  const char *topic;
  int32_t partition;
  int64_t offset; /* the first offset to read */
} sl_kafka_partition_offset_t;

typedef struct sl_kafka_source_config_s {
  const char *bootstrap_servers; /* "host:port,..."; required */
  const char *const *topics;     /* required, at least one */
  uint32_t n_topics;
  const char *group_id;          /* NULL: no commits (and no start
                                    committed) */
  sl_kafka_start_t start;
  int64_t start_timestamp_ms;
  const sl_kafka_partition_offset_t *start_offsets;
  uint32_t n_start_offsets;
  sl_kafka_format_t format;
  char csv_delimiter;            /* 0: ',' */
  const sl_schema_t *schema;     /* the value's fields (borrowed) */
  /* Metadata fields appended after the value's fields, NULL for none:
   * timestamp (the record's timestamp, timestamp), headers (a JSON object
   * of string values, string), key (string), partition (int32), offset
   * (int64).  All nullable. */
  const char *timestamp_field;
  const char *headers_field;
  const char *key_field;
  const char *partition_field;
  const char *offset_field;
  bool bounded;
  bool read_uncommitted;
  int64_t discovery_interval_ms; /* 0: find partitions once */
  int64_t timeout_ms;            /* metadata and offset look-ups; 0:
                                    10000 */
  /* NULL-terminated name, value pairs passed to librdkafka after sluice's
   * settings (bootstrap.servers, group.id and the settings sluice relies
   * on, enable.auto.commit and auto.offset.reset, are refused). */
  const char *const *properties;
} sl_kafka_source_config_t;

/** @brief Defaults: start earliest, JSON, unbounded, discovery every
 * 30000 ms.  @thread any */
SL_API void sl_kafka_source_config_init(sl_kafka_source_config_t *cfg);
/**
 * @brief Create a Kafka source.  Checks the configuration without
 * connecting; the enumerator reaches the cluster when the job starts (an
 * unreachable bootstrap or an unknown topic fails the job within
 * timeout_ms with a message naming them).
 * @return SL_OK; SL_EINVAL naming the setting; SL_ENOMEM.
 * @ownership the caller owns *out_schema (one reference: the value fields
 * and the metadata fields) and *out_ctx until it hands it to
 * sl_job_source().
 */
SL_API int sl_kafka_source_create(const sl_kafka_source_config_t *cfg,
                                  const sl_source_vt_t **out_vt,
                                  void **out_ctx, sl_schema_t **out_schema,
                                  sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/*
 * Change data capture from MariaDB (and MySQL, untested): a chunked
 * snapshot of the captured tables, then the binlog, as one exactly-once
 * changelog (+I for snapshot rows and inserts, -U/+U, -D).  The output
 * fields are the tables' columns (every captured table must have the same
 * columns and primary key), then the metadata fields asked for: `_table`
 * (string, "db.table"), `_position` (string, "domain-server-seq:event:row"
 * of a binlog row; null for snapshot rows), `_op_ts` (timestamp of the
 * binlog event; null for snapshot rows).  With a declared chunk key that
 * is not the primary key, a last field `_sl_version` (bytes) carries each
 * row's version for the reconciler that follows the source in a pipeline.
 * See docs/cdc-mariadb.md.
 */
typedef enum sl_mariadb_cdc_start_e {
  SL_MARIADB_CDC_START_INITIAL = 0,  /* snapshot, then the binlog */
  SL_MARIADB_CDC_START_SNAPSHOT = 1, /* snapshot only; the source ends */
  SL_MARIADB_CDC_START_LATEST = 2,   /* the binlog from its current end */
  SL_MARIADB_CDC_START_GTID = 3      /* the binlog after start_gtid */
} sl_mariadb_cdc_start_t;

typedef struct sl_mariadb_cdc_config_s {
  const char *host; /* default 127.0.0.1 */
  int port;         /* default 3306 */
  const char *user, *password;
  const char *const *tables; /* patterns "db.table" (* and ? wildcards) */
  uint32_t n_tables;
  const char *chunk_key;     /* one column; NULL: the primary key */
  uint64_t chunk_rows;       /* 0: 8096 */
  sl_mariadb_cdc_start_t start;
  const char *start_gtid;    /* SL_MARIADB_CDC_START_GTID: "0-1-10,1-2-5" */
  uint32_t server_id;        /* first of the ids [server_id, +parallelism)
                                of the replication connections; 0: 5400 */
  uint32_t heartbeat_ms;     /* 0: 30000 */
  uint32_t connect_timeout_ms; /* 0: 10000 */
  bool with_table, with_position, with_op_ts; /* metadata fields */
} sl_mariadb_cdc_config_t;

/** @brief Defaults (above).  @thread any */
SL_API void sl_mariadb_cdc_config_init(sl_mariadb_cdc_config_t *cfg);
/**
 * @brief Create a mariadb-cdc source.  Connects to run the start checks
 * (binary log on, binlog_format=ROW, binlog_row_image=FULL, privileges, a
 * key per table, supported column types) and describes the tables, each
 * failure with its own message; the enumerator plans the chunks when the
 * job starts.  The version field's position, when there is one, is
 * *out_version_field (else -1); may be NULL.
 * @ownership *out_ctx is freed by the vtable's destroy; *out_schema is a
 * reference for the caller.
 */
SL_API int sl_mariadb_cdc_source_create(const sl_mariadb_cdc_config_t *cfg,
                                        const sl_source_vt_t **out_vt,
                                        void **out_ctx,
                                        sl_schema_t **out_schema,
                                        int *out_version_field,
                                        sl_error_t **out_err);

/** @brief Where a postgres-cdc source starts. */
typedef enum sl_postgres_cdc_start_e {
  SL_POSTGRES_CDC_START_INITIAL = 0,  /* snapshot, then the slot's stream */
  SL_POSTGRES_CDC_START_SNAPSHOT = 1, /* snapshot only; the source ends (no
                                         slot) */
  SL_POSTGRES_CDC_START_LATEST = 2    /* the stream from the slot's position
                                         (a new slot: the end of WAL) */
} sl_postgres_cdc_start_t;

/*
 * Change data capture from PostgreSQL (docs/cdc-postgres.md): a chunked
 * snapshot of the tables (each chunk read in its own exact snapshot),
 * then logical replication (pgoutput) from a permanent slot, as one
 * exactly-once changelog.  The slot is only told that WAL may go up to
 * the position of the oldest retained completed checkpoint.
 */
typedef struct sl_postgres_cdc_config_s {
  const char *conninfo;      /* libpq connection string (dbname included) */
  const char *password;      /* NULL: the conninfo's or libpq's own */
  const char *const *tables; /* patterns "schema.table" (* and ?) */
  uint32_t n_tables;
  const char *slot;          /* required: [a-z0-9_]+, one per job and source */
  const char *publication;   /* NULL: the slot's name; created when missing */
  uint64_t chunk_rows;       /* 0: 8192 */
  sl_postgres_cdc_start_t start;
  uint32_t heartbeat_ms;     /* 0: 10000 */
  uint32_t connect_timeout_ms; /* 0: 10000 */
  uint32_t retain;           /* completed checkpoints the job keeps; the
                                slot's flush lags by them.  0: 3 */
  bool with_table, with_position, with_op_ts; /* metadata fields */
} sl_postgres_cdc_config_t;

/** @brief Defaults (above).  @thread any */
SL_API void sl_postgres_cdc_config_init(sl_postgres_cdc_config_t *cfg);
/**
 * @brief Create a postgres-cdc source.  Connects to run the start checks
 * (wal_level=logical, REPLICATION, free slots and senders, a primary key
 * and REPLICA IDENTITY FULL per table, supported column types), each with
 * its own message; the enumerator makes the slot and the publication and
 * plans the chunks when the job starts.
 * @ownership *out_ctx is freed by the vtable's destroy; *out_schema is a
 * reference for the caller.
 */
SL_API int sl_postgres_cdc_source_create(const sl_postgres_cdc_config_t *cfg,
                                         const sl_source_vt_t **out_vt,
                                         void **out_ctx,
                                         sl_schema_t **out_schema,
                                         sl_error_t **out_err);

/** @brief The delivery guarantee a sink is asked for. */
typedef enum sl_delivery_e {
  SL_DELIVERY_AT_LEAST_ONCE = 0, /* rows after the restored checkpoint are
                                    written again after a failure */
  SL_DELIVERY_EXACTLY_ONCE = 1   /* two-phase commit: each row once */
} sl_delivery_t;

/** @brief How an exactly-once file sink groups rows into directories. */
typedef enum sl_file_bucket_e {
  SL_FILE_BUCKET_NONE = 0,  /* every part file in path */
  SL_FILE_BUCKET_FIELD = 1, /* path/<field>=<value>/ by bucket_field */
  SL_FILE_BUCKET_DATE = 2,  /* path/<YYYY-MM-DD>/ by the UTC date of the
                               timestamp field bucket_field */
  SL_FILE_BUCKET_HOUR = 3   /* path/<YYYY-MM-DD--HH>/, likewise */
} sl_file_bucket_t;

/*
 * At-least-once (the default): a fresh start truncates each output file;
 * an attempt that restored a checkpoint (sl_sink_init_t.is_restored)
 * appends to it instead, after cutting a partly written last row, so rows
 * written after the checkpoint appear twice.
 *
 * Exactly-once (delivery = SL_DELIVERY_EXACTLY_ONCE, needs checkpoints):
 * path is a directory.  Each subtask writes part files, hidden while in
 * progress (".part-<uid>-<subtask>-<epoch>-<n><ext>.inprogress"); at each
 * barrier, and when a part rolls by size or time, the part is synced and
 * renamed to ".part-...<ext>.pending"; when the checkpoint completes it is
 * renamed to "part-<uid>-<subtask>-<epoch>-<n><ext>" (finished, visible).
 * Readers take the files whose names do not start with '.'.  See
 * docs/connectors.md.
 */
typedef struct sl_file_sink_config_s {
  const char *path;      /* parallelism 1: this file; else one file per
                            subtask i, "<stem>-<i><ext>" (out-0.csv);
                            exactly-once: the output directory */
  sl_format_t format;
  bool csv_header;       /* exactly-once: a header in every part file */
  char csv_delimiter;
  bool changelog;        /* add an "op" column (+I/-U/+U/-D) first */
  /* Appended; zero keeps the behaviour above. */
  sl_delivery_t delivery;
  uint64_t roll_size;       /* exactly-once: roll a part at this many bytes
                               (0: only at checkpoints) */
  int64_t roll_interval_ms; /* exactly-once: roll a part open this long
                               (processing time; 0: only at checkpoints) */
  sl_file_bucket_t bucket;  /* exactly-once: bucket directories */
  const char *bucket_field; /* the field buckets are made from */
} sl_file_sink_config_t;

/**
 * @brief Create a file sink: plain (at-least-once) or, with
 * cfg->delivery = SL_DELIVERY_EXACTLY_ONCE, transactional.
 * @return SL_OK, SL_EINVAL (no path, a bucket without bucket_field),
 * SL_ENOMEM.  The bucket field is checked against the schema when a
 * writer opens (a missing field or a date bucket of a field that is not a
 * timestamp is an error naming it).
 * @thread any.  @ownership the caller owns *out_ctx until it hands it to
 * sl_stream_sink().
 */
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

/*
 * The Kafka sink (librdkafka, idempotent producer).  Each row becomes one
 * record of topic: the value is the row as one JSON object or one CSV
 * record (without the line end; with changelog its kind first, as in the
 * file sink), the key the text of key_fields (a string field's bytes, any
 * other type its text form, several fields joined with ','; NULL key
 * without key_fields).  A keyed record goes to partition
 * (murmur2(key) & 0x7fffffff) % partitions, the partitioner of the Java
 * client, so other Kafka clients agree; records without a key are spread
 * round robin.  Delivery at-least-once: before each checkpoint's snapshot
 * (and when the input ends) the writer waits for the delivery report of
 * every record and fails the task if one carries an error (naming topic,
 * partition and the error), so a completed checkpoint never covers a
 * record the broker lacks; records after it are sent again after a
 * restore.  Delivery exactly-once: one Kafka transaction per subtask and
 * checkpoint epoch, committed when the checkpoint completes, from a pool
 * of transactional ids "<prefix>-<subtask>-<k>"; the epoch's records are
 * kept in the checkpoint and re-sent when the transaction is gone, and a
 * marker offset committed inside each transaction tells committed epochs
 * from lost ones after a crash (readers must use read_committed).  See
 * docs/connectors.md.
 */
typedef struct sl_kafka_sink_config_s {
  const char *bootstrap_servers; /* "host:port,..."; required */
  const char *topic;             /* required; must exist */
  const char *const *key_fields; /* NULL: records without a key */
  uint32_t n_key_fields;
  sl_format_t format;            /* JSON (the default of init) or CSV */
  char csv_delimiter;            /* 0: ',' */
  bool changelog;                /* the row kind first ("op" in JSON) */
  sl_delivery_t delivery;        /* at-least-once (init) or exactly-once */
  int64_t timeout_ms;            /* the metadata check at open; 0: 10000 */
  /* NULL-terminated name, value pairs passed to librdkafka after sluice's
   * settings (bootstrap.servers, enable.idempotence, partitioner,
   * transactional.id and the delivery callbacks are sluice's: refused). */
  const char *const *properties;
  /* Appended.  Exactly-once only (SL_EINVAL otherwise).  The prefix of
   * the transactional ids "<prefix>-<subtask>-<k>" and of the marker
   * groups of the same names; NULL: "sluice-<job>-<sink uid>".  Two jobs
   * must not share a prefix (checked: the second fails). */
  const char *transactional_id_prefix;
  /* Transactional ids per subtask (k < pool size): one holds the open
   * epoch, the others epochs waiting for their checkpoint to complete.
   * 0: 5.  A subtask whose ids are all waiting fails naming this setting. */
  uint32_t transaction_pool_size;
} sl_kafka_sink_config_t;

/** @brief Defaults: JSON, at-least-once, no key.  @thread any */
SL_API void sl_kafka_sink_config_init(sl_kafka_sink_config_t *cfg);
/**
 * @brief Create a Kafka sink.  Checks the configuration without
 * connecting; each writer checks at open, within timeout_ms, that the
 * bootstrap servers answer and the topic exists (errors name them), and
 * that the key fields are in the rows' schema.
 * @return SL_OK; SL_EINVAL naming the setting (SL_ENOTSUP for delivery
 * exactly-once); SL_ENOMEM.
 * @ownership the caller owns *out_ctx until it hands it to
 * sl_stream_sink().
 */
SL_API int sl_kafka_sink_create(const sl_kafka_sink_config_t *cfg,
                                const sl_sink_vt_t **out_vt, void **out_ctx,
                                sl_error_t **out_err);
/**
 * @brief The submit-time check of an exactly-once Kafka sink's timing
 * (docs/connectors.md "Kafka sink, exactly-once"): compares the producer's
 * transaction.timeout.ms (a property; 900000 when not set) and
 * transaction_pool_size with the checkpoint trigger period, timeout and
 * max_concurrent, and, with query_broker, with the broker's
 * transaction.max.timeout.ms and offsets.retention.minutes against the
 * restart delay (DescribeConfigs, within cfg->timeout_ms).  A setting
 * that cannot work is refused (SL_EINVAL naming the settings and the
 * numbers), or logged as a warning with refusals_as_warnings; one that
 * makes the sink re-send epochs after a slow checkpoint is logged as a
 * warning.  Nothing for at-least-once.
 * @return SL_OK; SL_EINVAL; SL_EIO (the broker did not answer).
 * @thread any.
 */
SL_API int sl_kafka_sink_check_timing(const sl_kafka_sink_config_t *cfg,
                                      const sl_checkpoint_config_t *ck,
                                      const sl_restart_config_t *rs,
                                      bool query_broker,
                                      bool refusals_as_warnings,
                                      sl_error_t **out_err);
/*
 * PostgreSQL sink (libpq).  Writes changelog rows into a table: mode
 * insert appends +I rows (COPY); mode upsert inserts or updates +I/+U rows
 * by the key columns (INSERT ... ON CONFLICT (key) DO UPDATE) and deletes
 * -D rows by key (-U rows are skipped: the +U that follows replaces the
 * row).  Rows are batched; within a batch, the last change of each key
 * wins (the batch is one transaction, so the result is the same).
 *
 * delivery exactly-once: one transaction per sink subtask and epoch,
 * PREPARE TRANSACTION at the barrier with the gid
 * "sl/<job>/<sink uid>/<subtask>/<epoch id>" and a marker row in the
 * commit-log table inside it; COMMIT PREPARED when the checkpoint
 * completes; "not found" on commit resolves through the marker row
 * (present: already committed; absent: lost, the job fails).  Needs the
 * server's max_prepared_transactions >= parallelism x
 * (max_concurrent_checkpoints + 1).  Writers of older attempts are fenced:
 * recover terminates their sessions (found by application_name
 * "sluice/<hash of job and uid>/<subtask>/<nonce>") and bumps the
 * subtask's row in the fence table, and every epoch's transaction starts
 * by reading that row FOR SHARE: a writer that finds another epoch than
 * its attempt's recover set fails fatally ("fenced off").
 *
 * delivery at-least-once: a plain sink; mode upsert only.  Each row
 * carries a version in epoch_column (the writer's epoch id, or the value of
 * version_field), and an update or delete applies only when the stored
 * version is not newer (ON CONFLICT ... DO UPDATE ... WHERE
 * t.epoch <= EXCLUDED.epoch), so a late replay never goes back in version.
 *
 * Column types must match the sink schema by name (docs/connectors.md has
 * the mapping); the checks run when a writer opens (and with
 * sl_pg_sink_check), with messages that name the sink, table and column.
 */
typedef enum sl_pg_mode_e {
  SL_PG_MODE_INSERT = 0,
  SL_PG_MODE_UPSERT = 1
} sl_pg_mode_t;

/* Longest gid PostgreSQL accepts (its buffer is 200 bytes with the NUL). */
#define SL_PG_MAX_GID 199

typedef struct sl_pg_sink_config_s {
  const char *conninfo;     /* libpq "host=... port=... dbname=..." or a
                               postgresql:// URI; required */
  const char *table;        /* target table, optionally "schema.table";
                               required */
  const char *const *key;   /* key columns (mode upsert), fields of the
                               sink schema with a unique index on them */
  uint32_t n_key;
  sl_pg_mode_t mode;
  sl_delivery_t delivery;   /* sl_pg_sink_config_init selects exactly-once */
  uint32_t batch_size;      /* rows per statement; 0 selects 1000 */
  const char *commit_table; /* exactly-once marker table; NULL selects
                               "sluice_sink_commits" (created if absent) */
  const char *epoch_column; /* at-least-once version column (bigint);
                               NULL selects "sluice_epoch" */
  const char *version_field; /* at-least-once: a field (int32, int64 or
                                timestamp) whose value is the version;
                                NULL: the writer's epoch id */
  uint32_t max_concurrent_checkpoints; /* for the prepared-transactions
                                          check; 0 selects 1 */
  uint32_t connect_timeout_s; /* 0 selects 10 */
  uint32_t lock_timeout_ms; /* exactly-once: how long prepare waits for
                               rows still locked by this subtask's own
                               prepared, uncommitted transactions (and
                               recover, at most 1000 a round, for the
                               fence rows); 0 selects 5000 */
  const char *fence_table;  /* exactly-once fence table, one row per
                               (job, sink uid, subtask); NULL selects
                               "sluice_sink_fence" (created if absent) */
} sl_pg_sink_config_t;

/** @brief Defaults: mode insert, SL_DELIVERY_EXACTLY_ONCE, everything else
 * 0/NULL. */
SL_API void sl_pg_sink_config_init(sl_pg_sink_config_t *cfg);
/**
 * @brief Create a PostgreSQL sink.  Checks the configuration only (no
 * connection): missing conninfo or table, a key in mode insert or none in
 * mode upsert, at-least-once without upsert.
 * @return SL_OK, SL_EINVAL with *out_err naming the option, SL_ENOMEM.
 * @ownership the caller owns *out_ctx until it hands it to
 * sl_stream_sink(); the config's strings are copied.
 * @thread any.
 */
SL_API int sl_pg_sink_create(const sl_pg_sink_config_t *cfg,
                             const sl_sink_vt_t **out_vt, void **out_ctx,
                             sl_error_t **out_err);
/**
 * @brief Connect and run the start checks a writer and a committer would
 * run (reachability, login, table and column types against schema, key
 * index, prepared transactions for parallelism, gid length for job and
 * uid), without writing anything.  For "sluice validate --connect".
 * @return SL_OK or an error with *out_err (the message of the start check).
 * @thread any.
 */
SL_API int sl_pg_sink_check(void *ctx, const char *job, const char *uid,
                            const sl_schema_t *schema, uint32_t parallelism,
                            sl_error_t **out_err);

/** @brief Discards rows, counting them (benchmarks). */
SL_API int sl_null_sink_create(const sl_sink_vt_t **out_vt, void **out_ctx);

/*
 * The MariaDB sink (MariaDB >= 10.5.2, and MySQL >= 5.7.7 untested,
 * through Connector/C).  Exactly-once (the default): one XA transaction
 * per sink subtask and epoch, named by the xid
 *   gtrid "sl/<job>/<sink uid>" (at most 64 bytes),
 *   bqual "<subtask>/<epoch id>/<connection id>", formatID 21324,
 * and a marker row in the commit-log table written inside it; prepare
 * ends and prepares the branch and closes the connection (a prepared
 * branch cannot be committed by another connection while its own lives),
 * the committer commits it with XA COMMIT from its own connection and
 * resolves an unknown xid through the marker.  Writers of an older
 * attempt are fenced: recover() bumps the subtask's row in the fence
 * table (one row per job, sink uid and subtask), and every XA branch
 * first reads that row LOCK IN SHARE MODE and fails the task when it
 * holds another fence epoch than the one its writer opened with (so a
 * branch of an older attempt either ends before the bump or fails its
 * check after it).  At-least-once: rows are
 * written and committed at every flush, and an upsert never replaces a row
 * whose epoch column is newer.  Row kinds: +I inserts (mode insert) or
 * upserts (mode upsert, INSERT ... ON DUPLICATE KEY UPDATE), +U upserts,
 * -U is skipped (its +U follows), -D deletes by key (mode upsert).  See
 * docs/connectors.md for the type mapping, server settings and privileges.
 */
typedef enum sl_mariadb_mode_e {
  SL_MARIADB_INSERT = 0, /* +I rows only; anything else fails the task */
  SL_MARIADB_UPSERT = 1  /* needs key columns */
} sl_mariadb_mode_t;

#define SL_MARIADB_DEFAULT_PORT 3306
#define SL_MARIADB_DEFAULT_BATCH 500u
#define SL_MARIADB_DEFAULT_COMMIT_TABLE "sluice_xa_commits"
#define SL_MARIADB_DEFAULT_FENCE_TABLE "sluice_xa_fence"
#define SL_MARIADB_DEFAULT_EPOCH_COLUMN "sluice_epoch"
/* The XA formatID of sluice's xids ("SL"). */
#define SL_MARIADB_XA_FORMAT 21324

typedef struct sl_mariadb_sink_config_s {
  const char *host;       /* required */
  int port;               /* 0: SL_MARIADB_DEFAULT_PORT */
  const char *user;       /* required */
  const char *password;   /* NULL: none */
  const char *database;   /* required */
  const char *table;      /* required: the target table */
  const char *const *key; /* key columns (upsert, -D); copied */
  uint32_t n_key;
  sl_mariadb_mode_t mode;
  sl_delivery_t delivery;   /* default exactly-once */
  uint32_t batch_rows;      /* rows per statement; 0: default 500 */
  const char *commit_table; /* exactly-once marker table; NULL: default,
                               created when absent */
  const char *epoch_column; /* at-least-once version column of the
                               target table; NULL: default */
  uint32_t connect_timeout_ms; /* 0: 10000; bounds connect and handshake */
  const char *fence_table; /* exactly-once fence table; NULL: default,
                              created when absent */
} sl_mariadb_sink_config_t;

/** @brief Defaults: port 3306, mode upsert, exactly-once.  @thread any */
SL_API void sl_mariadb_sink_config_init(sl_mariadb_sink_config_t *cfg);

/**
 * @brief Create a MariaDB sink.  Checks the configuration without
 * connecting; the server is checked when the committer and the writers
 * open (reachability, credentials, the table and its column types,
 * XA RECOVER, the server version).
 * @return SL_OK; SL_EINVAL with a message naming the setting; SL_ENOMEM.
 * @ownership the strings of cfg are copied; the caller owns *out_ctx until
 * it hands it to sl_stream_sink().
 */
SL_API int sl_mariadb_sink_create(const sl_mariadb_sink_config_t *cfg,
                                  const sl_sink_vt_t **out_vt, void **out_ctx,
                                  sl_error_t **out_err);

/**
 * @brief Connect once and run the start checks of a writer for rows of
 * schema (NULL: skip the column checks): reachability, credentials, the
 * table and its column types, XA RECOVER, the server version and the
 * engine of the commit-log and fence tables where they exist (exactly-
 * once), the epoch column (at-least-once).  For `sluice validate
 * --connect`.
 * @return SL_OK; SL_EIO (connection), SL_EINVAL (table, types, settings)
 * with a message naming host:port, table and column.
 * @thread any.
 */
SL_API int sl_mariadb_sink_check(const sl_mariadb_sink_config_t *cfg,
                                 const sl_schema_t *schema,
                                 sl_error_t **out_err);

#ifdef __cplusplus
}
#endif
#endif
