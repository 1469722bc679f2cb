/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface of the checkpoint module: checkpoint storage (state files,
 * metadata, directory layout, retention), the I/O pool of the async phase,
 * and the coordinator.  The formats are documented in
 * docs/checkpoint-format.md; the protocol in README.md.
 */
#ifndef SL_CHECKPOINT_CHECKPOINT_H
#define SL_CHECKPOINT_CHECKPOINT_H

#include "core/core.h"
#include "state/state.h"
#include "checkpoint/enum_host.h"

/* ------------------------------------------------------------------ */
/* What one operator subtask contributes to a checkpoint. */

typedef struct sl_ckpt_entry_s {
  uint32_t key;      /* e.g. a split id */
  uint8_t *bytes;    /* owned */
  uint32_t len;
} sl_ckpt_entry_t;

/* Operator state: small named lists of entries, kept in the metadata. */
typedef struct sl_ckpt_opstate_s {
  char *name;                /* "source.positions", "sink.committables" */
  sl_ckpt_entry_t *entries;
  uint32_t n_entries;
} sl_ckpt_opstate_t;

typedef struct sl_ckpt_timer_s {
  int64_t ts;
  uint32_t kg;
  uint32_t len;
  uint8_t domain; /* 0 processing time (ns), 1 event time (us) */
  uint8_t *key;   /* owned */
} sl_ckpt_timer_t;

typedef struct sl_ckpt_subtask_s {
  uint32_t subtask;
  uint32_t kg_start, kg_end;   /* keyed operators; kg_end < kg_start: none */
  char *state_file;            /* relative to the checkpoint dir, or NULL */
  uint64_t state_size;
  uint64_t state_checksum;
  char *channel_file;          /* unaligned channel state, or NULL */
  uint64_t channel_size;
  uint64_t channel_checksum;
  sl_ckpt_opstate_t *opstates;
  uint32_t n_opstates;
} sl_ckpt_subtask_t;

typedef struct sl_ckpt_op_s {
  char *uid;
  uint32_t parallelism;
  sl_ckpt_subtask_t *subtasks; /* n_subtasks == parallelism once complete */
  uint32_t n_subtasks;
  /* Sources with an enumerator: its state, taken before the sources were
   * triggered (checkpoint/enum_host.c).  Format version 2 and later. */
  bool has_enum_state;
  uint8_t *enum_state;
  size_t enum_state_len;
} sl_ckpt_op_t;

typedef enum sl_ckpt_kind_e {
  SL_CKPT_KIND_CHECKPOINT = 0,
  SL_CKPT_KIND_SAVEPOINT = 1
} sl_ckpt_kind_t;

/* The metadata of a completed checkpoint. */
typedef struct sl_ckpt_meta_s {
  uint64_t id;
  int64_t time_ns;
  uint8_t kind;
  uint8_t mode;              /* sl_ckpt_mode_t */
  uint32_t max_parallelism;
  char *job;
  sl_ckpt_op_t *ops;
  uint32_t n_ops;
  char *dir;                 /* where it was read from (not stored) */
} sl_ckpt_meta_t;

void sl__ckpt_subtask_clear(sl_ckpt_subtask_t *s);
void sl__ckpt_meta_clear(sl_ckpt_meta_t *m);
/** @brief Find an operator by uid, NULL if none. */
const sl_ckpt_op_t *sl__ckpt_meta_op(const sl_ckpt_meta_t *m, const char *uid);
/** @brief Find an op state list by name in a subtask. */
const sl_ckpt_opstate_t *sl__ckpt_opstate(const sl_ckpt_subtask_t *s,
                                          const char *name);

/* ------------------------------------------------------------------ */
/* Storage: <dir>/<job>/chk-<id>/{_metadata, <uid>-<subtask>.state, ...}. */

/**
 * @brief Write the state of a keyed operator subtask (pinned snapshot and
 * copied timers) to path, key group by key group, with an index and an
 * xxh3 checksum.  fsyncs the file.
 * @return SL_OK or a negative errno / SL_ENOMEM with *out_err.
 * @thread an I/O thread.
 */
int sl__ckpt_write_state(const char *path, const sl_kstate_snap_t *snap,
                         uint32_t kg_start, uint32_t kg_end,
                         const sl_ckpt_timer_t *timers, uint32_t n_timers,
                         uint64_t *out_size, uint64_t *out_checksum,
                         sl_error_t **out_err);

/* Callbacks of sl__ckpt_read_state: one per state entry and per timer. */
typedef struct sl_ckpt_reader_s {
  /* The states in the file (names, kinds, versions, layouts) and their
   * fingerprints (NULL: a file from before format 3): called first. */
  int (*on_states)(void *user, const sl_state_desc_t *descs,
                   const uint64_t *fingerprints, uint32_t n);
  int (*on_entry)(void *user, uint32_t state, uint32_t kg, const uint8_t *key,
                  uint32_t klen, uint32_t nslen, const uint8_t *val,
                  uint32_t vlen);
  int (*on_timer)(void *user, uint32_t kg, uint8_t domain, int64_t ts,
                  const uint8_t *key,
                  uint32_t klen);
  void *user;
  /* Optional, before the entries of a state in a key group: how many
   * follow (a reader may pre-size its map). */
  int (*on_count)(void *user, uint32_t state, uint32_t kg, uint64_t n);
} sl_ckpt_reader_t;

/**
 * @brief Read the key groups [kg_start, kg_end] of a state file after
 * checking its size and checksum against the metadata.  Truncated or
 * corrupt files give SL_ECORRUPT with a message naming the file.
 */
int sl__ckpt_read_state(const char *path, uint64_t size, uint64_t checksum,
                        uint32_t kg_start, uint32_t kg_end,
                        const sl_ckpt_reader_t *rd, sl_error_t **out_err);

/*
 * The same in steps, for readers that restore key groups in parallel: open
 * checks size, footer, header and index and calls rd->on_states; then each
 * key group is read with read_kg (one thread per key group at a time; any
 * number of threads on distinct key groups, each with its own scratch);
 * close frees.  path is borrowed until close.  Errors as above.
 */
typedef struct sl_ckpt_sfile_s sl_ckpt_sfile_t;
int sl__ckpt_state_open(const char *path, uint64_t size, uint64_t checksum,
                        const sl_ckpt_reader_t *rd, sl_ckpt_sfile_t **out,
                        sl_error_t **out_err);
/** @brief Whether the file holds key group kg (else read_kg does nothing). */
bool sl__ckpt_state_has_kg(const sl_ckpt_sfile_t *f, uint32_t kg);
int sl__ckpt_state_read_kg(sl_ckpt_sfile_t *f, uint32_t kg,
                           const sl_ckpt_reader_t *rd, sl_bytes_t *scratch,
                           sl_error_t **out_err);
void sl__ckpt_state_close(sl_ckpt_sfile_t *f);

/**
 * @brief Run fn(arg, worker, i) for every i in [0, n) on up to n_threads
 * (at most SL_IO_PFOR_MAX) threads, the caller's among them as worker 0
 * (the others are started for the call and joined before it returns; when
 * none can be started the caller runs every item).  Items are handed out in
 * increasing order; worker < n_threads names the thread, for per-thread
 * scratch.  @thread any.
 */
#define SL_IO_PFOR_MAX 16
void sl__io_parallel_for(uint32_t n_threads, uint32_t n,
                         void (*fn)(void *arg, uint32_t worker, uint32_t i),
                         void *arg);
/** @brief Run the calling thread below the tasks' priority (background
 * work: the async phase, freeing state).  Best effort.  @thread any. */
void sl__io_lower_priority(void);
/** @brief Threads worth using for CPU-bound restore work (online CPUs, 1..8). */
uint32_t sl__io_restore_threads(void);

/** @brief Write raw bytes to path with fsync; returns size and checksum. */
int sl__ckpt_write_blob(const char *path, const uint8_t *p, size_t len,
                        uint64_t *out_checksum, sl_error_t **out_err);
/** @brief Read a whole blob, verifying size and checksum (caller frees). */
int sl__ckpt_read_blob(const char *path, uint64_t size, uint64_t checksum,
                       uint8_t **out, sl_error_t **out_err);

/**
 * @brief Durably replace dir/name with the len bytes at p: write
 * dir/name.tmp, fsync it, rename it over dir/name, fsync dir, and fsync
 * dir's parent too when is_new_dir (a directory made by mkdir is durable
 * only once the directory holding it is fsynced).  before_rename and
 * after_rename name injection points (or NULL).  *out_is_renamed (may be
 * NULL) says whether the rename happened: after it, an error leaves the
 * new file in place and the caller must not treat it as absent.
 * @return SL_OK, SL_ENOMEM, a negative errno, SL_EFAILED (injected).
 * @thread any.  @locks none (it blocks on fsync).
 */
int sl__ckpt_durable_replace(const char *dir, const char *name,
                             const uint8_t *p, size_t len, bool is_new_dir,
                             const char *before_rename,
                             const char *after_rename, bool *out_is_renamed,
                             sl_error_t **out_err);

/**
 * @brief Write <ckdir>/_metadata with sl__ckpt_durable_replace (fsyncing
 * the job directory too, since ckdir is new).  The rename is the commit
 * point of a checkpoint.  Injection points: coordinator.before_metadata_write,
 * coordinator.before_metadata_rename, coordinator.after_metadata_rename.
 * @param[out] out_is_renamed whether _metadata was renamed into place (a
 * later failure leaves a checkpoint that may be committed); may be NULL.
 * @thread the coordinator.  @locks none.
 */
int sl__ckpt_write_meta(const char *ckdir, const sl_ckpt_meta_t *m,
                        bool *out_is_renamed, sl_error_t **out_err);
/**
 * @brief Read and validate <ckdir>/_metadata.  @return SL_OK,
 * SL_ENOTFOUND (no metadata: not a completed checkpoint), SL_ECORRUPT.
 */
int sl__ckpt_read_meta(const char *ckdir, sl_ckpt_meta_t *out,
                       sl_error_t **out_err);
/**
 * @brief Check that every file the metadata names exists with its size.
 * (Checksums are verified when the files are read.)
 */
int sl__ckpt_check_files(const sl_ckpt_meta_t *m, sl_error_t **out_err);

/* Checkpoint ids are 1..SL_CKPT_MAX_ID; a chk-N directory above it is
 * ignored with a warning (it would make the next id wrap). */
#define SL_CKPT_MAX_ID ((uint64_t)INT64_MAX)

/** @brief Ids of the chk-N directories under jobdir, ascending. */
int sl__ckpt_list(const char *jobdir, uint64_t **out_ids, uint32_t *out_n,
                  sl_error_t **out_err);
/**
 * @brief Load the newest usable completed checkpoint of jobdir, falling
 * back to older ones (with a warning naming what was wrong) when one is
 * missing, truncated or corrupt.  @return SL_OK, SL_ENOTFOUND (none at
 * all), SL_ECORRUPT (some exist, none usable).
 */
int sl__ckpt_load_latest(const char *jobdir, sl_ckpt_meta_t *out,
                         sl_error_t **out_err);
/** @brief Like sl__ckpt_load_latest, among ids below `below`. */
int sl__ckpt_load_latest_below(const char *jobdir, uint64_t below,
                               sl_ckpt_meta_t *out, sl_error_t **out_err);
/**
 * @brief Remove a checkpoint directory, mirroring the commit: _metadata
 * first, fsync of the directory, then the other files, then the
 * directory.  Every error is checked; the first is returned.
 * @thread any.  @locks none (file-system work).
 */
int sl__ckpt_remove_dir(const char *ckdir, sl_error_t **out_err);

/**
 * @brief The id high-water mark of a job, <jobdir>/_checkpoint_ids: the
 * largest checkpoint id ever handed out, durably recorded before the id
 * is used (so ids are never reused after a crash, even before the first
 * checkpoint completes).  *out_id is 0 when the file does not exist.
 * @return SL_OK, SL_ECORRUPT (damaged: sluice refuses to guess), errno.
 */
int sl__ckpt_read_high_water(const char *jobdir, uint64_t *out_id,
                             sl_error_t **out_err);
/** @brief Durably record id as the high-water mark (durable replace). */
int sl__ckpt_write_high_water(const char *jobdir, uint64_t id,
                              bool is_new_dir, sl_error_t **out_err);
/**
 * @brief The first id a new coordinator may use: one above both the
 * largest chk-N directory and the high-water mark.
 * @return SL_OK, SL_EOVERFLOW (ids exhausted), SL_ECORRUPT, errno.
 */
int sl__ckpt_next_id(const char *jobdir, uint64_t *out_next,
                     uint64_t *out_high_water, sl_error_t **out_err);
/** @brief mkdir -p. */
int sl__ckpt_mkdirs(const char *path, sl_error_t **out_err);
/** @brief A file name for an operator subtask: uid made safe, subtask. */
char *sl__ckpt_file_name(const char *uid, uint32_t subtask, const char *ext);

/* ------------------------------------------------------------------ */
/* I/O pool: threads that run the async phase of snapshots. */

typedef struct sl_io_pool_s sl_io_pool_t;
typedef void (*sl_io_fn)(void *arg);

int sl__io_pool_create(uint32_t n_threads, sl_io_pool_t **out);
/** @brief Run fn(arg) on an I/O thread.  @thread any. */
int sl__io_submit(sl_io_pool_t *pool, sl_io_fn fn, void *arg);
/** @brief Wait for every submitted job, then stop the threads. */
void sl__io_pool_destroy(sl_io_pool_t *pool);

/* ------------------------------------------------------------------ */
/* Coordinator. */

typedef struct sl_coord_s sl_coord_t;
struct sl_task_s;

/* Per-subtask measurements sent with an acknowledgement. */
typedef struct sl_ckpt_task_stats_s {
  int64_t barrier_delay_ns;
  int64_t alignment_ns;
  int64_t sync_ns;
  int64_t async_ns;
  uint64_t bytes;
  uint64_t channel_bytes;
  bool is_unaligned;
} sl_ckpt_task_stats_t;

typedef struct sl_coord_op_s {
  const char *uid;
  uint32_t parallelism;
  struct sl_enum_host_s *enum_host; /* sources with an enumerator; borrowed
                                       for the attempt */
} sl_coord_op_t;

/**
 * @brief Create the coordinator of a job; it lives across restarts.  ids
 * continue after the largest chk-N under the job's directory.
 */
int sl__coord_create(const sl_checkpoint_config_t *cfg, const char *job,
                     uint32_t max_parallelism, sl_coord_t **out,
                     sl_error_t **out_err);
void sl__coord_destroy(sl_coord_t *c);
/** @brief The job's checkpoint directory <dir>/<job>. */
const char *sl__coord_job_dir(const sl_coord_t *c);
/**
 * @brief Start an attempt: the tasks (sources first flagged by
 * task->source), the operators of the plan, and the scheduler to wake
 * tasks with.  Starts the trigger thread.
 */
int sl__coord_attach(sl_coord_t *c, struct sl_task_s **tasks, uint32_t n_tasks,
                     const sl_coord_op_t *ops, uint32_t n_ops,
                     sl_io_pool_t *io);
/** @brief End an attempt: abort pending checkpoints, stop the thread. */
void sl__coord_detach(sl_coord_t *c);
/** @brief Trigger a checkpoint.  @thread any. */
int sl__coord_trigger(sl_coord_t *c, uint64_t *out_id, sl_error_t **out_err);
/**
 * @brief A task's acknowledgement: its operators' subtask entries (moved;
 * op_index[i] says which operator of the plan entry i belongs to).
 * @thread any (a task or an I/O thread).
 */
void sl__coord_ack(sl_coord_t *c, uint64_t id, uint32_t task,
                   sl_ckpt_subtask_t *subs, const uint32_t *op_index,
                   uint32_t n, const sl_ckpt_task_stats_t *stats,
                   bool is_async);
/**
 * @brief A task cannot complete checkpoint id: abort it with err (moved).
 * is_async: sent by the async phase (pairs with sl__coord_io_begin).
 */
void sl__coord_decline(sl_coord_t *c, uint64_t id, sl_error_t *err,
                       bool is_async);
/** @brief Async work for checkpoint id started (pairs with ack/decline). */
void sl__coord_io_begin(sl_coord_t *c, uint64_t id);
/**
 * @brief A task finished after snapshotting checkpoints up to
 * last_snapshot: later ones cannot complete, and none is triggered again
 * in this attempt (K4).
 */
void sl__coord_task_finished(sl_coord_t *c, uint64_t last_snapshot);
/**
 * @brief A source task read all its splits and waits for the final
 * checkpoint; once every source of the attempt did, the coordinator
 * triggers it (runtime/task.c, "Final checkpoint").
 * @thread any (the source's task).  @locks none.
 */
void sl__coord_source_ended(sl_coord_t *c);
/**
 * @brief Reserve a checkpoint id that no checkpoint will use (recorded in
 * the high-water mark first, so it is never reused): the first epoch id of
 * an attempt's two-phase-commit sinks.
 * @return SL_OK, SL_EOVERFLOW, or an I/O error with *out_err.
 * @thread the job's thread, between attempts.  @locks none.
 */
int sl__coord_reserve_id(sl_coord_t *c, uint64_t *out_id,
                         sl_error_t **out_err);
int sl__coord_wait(sl_coord_t *c, uint64_t id, int64_t timeout_ms,
                   sl_checkpoint_stats_t *out);
int sl__coord_last(sl_coord_t *c, sl_checkpoint_stats_t *out);
uint32_t sl__coord_history(sl_coord_t *c, sl_checkpoint_stats_t *out,
                           uint32_t max);
int sl__coord_task_stats(sl_coord_t *c, uint64_t id,
                         sl_checkpoint_task_stats_t **out, uint32_t *out_n);
/** @brief Id of the newest completed checkpoint (0 if none). */
uint64_t sl__coord_latest(sl_coord_t *c);
/** @brief Directory of checkpoint id. */
char *sl__coord_ckpt_dir(const sl_coord_t *c, uint64_t id);
/** @brief Whether checkpoint id is still pending (tasks may skip work). */
bool sl__coord_is_pending(sl_coord_t *c, uint64_t id);

/* ------------------------------------------------------------------ */
/* Task side (ckpt_task.c). */

struct sl_ckpt_hooks_s;
struct sl_source_rt_s;
/** @brief The hooks the runtime calls (snapshot, task finished). */
int sl__ckpt_hooks_create(sl_coord_t *coord, sl_io_pool_t *io, int mode,
                          int64_t alignment_timeout_ms,
                          struct sl_ckpt_hooks_s **out);
void sl__ckpt_hooks_destroy(struct sl_ckpt_hooks_s *hooks);
/** @brief Restore op's key groups (any parallelism) from the checkpoint. */
int sl__ckpt_restore_keyed(const sl_ckpt_meta_t *m, const sl_ckpt_op_t *mop,
                           struct sl_ctx_s *op, sl_error_t **out_err);
/** @brief Restore the in-flight records of an unaligned checkpoint. */
int sl__ckpt_restore_channels(const sl_ckpt_meta_t *m, const sl_ckpt_op_t *mop,
                              struct sl_task_s *t, sl_error_t **out_err);
/**
 * @brief Give each split of a source subtask the position stored under its
 * id by any old subtask.  With check_all (once per source), a stored split
 * that the source's current list lacks is an error naming it.
 * @return SL_OK, SL_EINVAL (a split or format mismatch), SL_ECORRUPT or
 * SL_ENOMEM.
 */
int sl__ckpt_restore_positions(const sl_ckpt_meta_t *m,
                               const sl_ckpt_op_t *mop,
                               struct sl_source_rt_s *src, bool check_all,
                               sl_error_t **out_err);

#endif
