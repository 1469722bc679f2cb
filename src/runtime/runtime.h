/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface of the runtime module: buffers, channels with credit-based flow
 * control, the scheduler interface, tasks and the operator interface that
 * chained operators implement.  Timers and watermark arithmetic come from
 * time/time.h.  See README.md for the thread model and the task state
 * machine.
 */
#ifndef SL_RUNTIME_RUNTIME_H
#define SL_RUNTIME_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"
#include "sluice/sl_connector.h"
#include "sluice/sl_job.h"
#include "sluice/sl_time.h"
#include "state/state.h"
#include "time/time.h"

typedef struct sl_task_s sl_task_t;
typedef struct sl_sched_s sl_sched_t;
typedef struct sl_writer_s sl_writer_t;
typedef struct sl_ctx_s sl_op_t;

/* ------------------------------------------------------------------ */
/* Buffers: a block of serialized rows, or one event. */

typedef enum sl_buf_kind_e {
  SL_BUF_DATA = 0,
  SL_BUF_EOP = 1,       /* end of partition: the sender has finished */
  SL_BUF_BARRIER = 2,   /* checkpoint barrier, value = checkpoint id */
  SL_BUF_WATERMARK = 3  /* value = event-time watermark, ts = SL_WM_* */
} sl_buf_kind_t;

/* The ts field of a watermark buffer. */
#define SL_WM_ADVANCE 0 /* value is the sender's new watermark */
#define SL_WM_IDLE 1    /* the sender is idle: leave it out of the minimum */
#define SL_WM_ACTIVE 2  /* the sender is active again */

/*
 * Data buffers hold frames [u32 len][row bytes].  The header and the data
 * are one allocation.  A buffer has one owner at a time: the sender while
 * it fills it, the channel while queued, the receiver while it reads it.
 */
typedef struct sl_buf_s {
  uint8_t kind;
  uint32_t len;
  uint32_t cap;
  uint32_t n_records;
  int64_t value;
  int64_t ts;            /* barrier: when its checkpoint was triggered */
  struct sl_buf_s *next; /* pending queue of the sender */
  uint8_t *data;
} sl_buf_t;

sl_buf_t *sl__buf_new(uint32_t cap);
void sl__buf_free(sl_buf_t *buf);

/* ------------------------------------------------------------------ */
/* Channels: single producer, single consumer, bounded by credits. */

/*
 * A channel carries buffers from one sending task to one receiving task.
 * Its capacity is the number of credits: the sender may have at most that
 * many buffers queued; beyond that it keeps them pending and waits.
 *
 * Fields by owner:
 *   sender only:    tail, cur, pending_*, n_pending
 *   receiver only:  head, is_finished, input
 *   both (atomic):  count (queued buffers), ret_head, ret_tail
 */
typedef struct sl_channel_s {
  sl_buf_t **ring;
  uint32_t mask;
  uint32_t credits;
  uint32_t wake_at;  /* wake the sender when a pop finds this count */
  _Atomic uint32_t count;
  uint32_t head;
  uint32_t tail;
  /* Return ring: consumed buffers flow back to the sender for reuse. */
  sl_buf_t **ret;
  uint32_t ret_mask;
  _Atomic uint32_t ret_head; /* consumer of ret: the sender */
  _Atomic uint32_t ret_tail; /* producer of ret: the receiver */
  uint32_t buffer_size;
  sl_task_t *sender;
  sl_task_t *receiver;
  /* Sender side. */
  sl_buf_t *cur;
  /* Buffer timeout (task.c): the held buffer as last seen, its length
   * then, and since when it holds records. */
  const sl_buf_t *held;
  uint32_t held_len;
  int64_t held_since;
  sl_buf_t *pending_head, *pending_tail;
  uint32_t n_pending;
  /* Receiver side. */
  uint32_t input;     /* logical input of the receiving task's head */
  bool is_finished;   /* EOP seen */
  /* Hash edges: frames are [u32 len][u64 key hash][u32 key len][key][row]
   * (sl__frame_read), so the receiving keyed operator neither extracts nor
   * hashes the key again.  Set at plan time. */
  bool has_hash;
  bool is_blocked;    /* aligned checkpoint: barrier seen, waiting for the
                         other inputs */
  uint64_t last_barrier; /* newest barrier id received */
  /*
   * Unaligned barriers overtake the queue: the sender stores the cutoff
   * (buffers with a lower ring index were sent before the barrier) and
   * then the id, with release; the receiver reads them with acquire.
   */
  _Atomic uint64_t prio_id;
  _Atomic uint32_t prio_cutoff;
  uint64_t prio_seen;      /* receiver: newest priority id handled */
  uint32_t uc_cutoff;      /* receiver: cutoff of the current capture */
  uint32_t uc_captured;    /* receiver: buffers below this index captured
                              (or processed before the snapshot) */
  bool uc_has_cutoff;
  bool uc_done;            /* pre-barrier data of the capture all kept */
  /* Receiver: event time of this input. */
  int64_t wm;              /* newest watermark received, INT64_MIN first */
  bool is_idle;            /* the sender said it is idle (or, from the
                              start, the planner: it has no input) */
} sl_channel_t;

/*
 * A frame of a channel buffer: [u32 len][row] on forward, rebalance and
 * broadcast edges; [u32 len][u64 hash][u32 key len][key][row] on hash
 * edges, where key is the canonical key bytes the sender extracted
 * (sl__keysel_extract) and hash their sl__key_hash64().  Frames live only
 * in memory: an unaligned checkpoint stores hash frames without the key
 * (sl__chanstate_put_buffer_hashed) and the key is extracted again on
 * restore.
 */
#define SL_FRAME_HASH_HDR 16u
typedef struct sl_frame_s {
  const uint8_t *row;
  uint32_t len;       /* of the row */
  uint32_t key_len;   /* hash frames */
  const uint8_t *key; /* hash frames */
  uint64_t hash;      /* hash frames */
} sl_frame_t;

/** @brief Read the frame at p (trusted bytes); @return its size. */
static inline uint32_t sl__frame_read(const uint8_t *p, bool has_hash,
                                      sl_frame_t *f) {
  memcpy(&f->len, p, 4);
  if (!has_hash) {
    f->row = p + 4;
    return 4 + f->len;
  }
  memcpy(&f->hash, p + 4, 8);
  memcpy(&f->key_len, p + 12, 4);
  f->key = p + SL_FRAME_HASH_HDR;
  f->row = f->key + f->key_len;
  return SL_FRAME_HASH_HDR + f->key_len + f->len;
}

/*
 * The idle worker's spin budget (sched_pool.c): how long a worker that
 * found no work spins before it parks.  spun() after a spin (has_found:
 * work came during it), gap() with the time from finding the queue empty
 * to taking a task.  The budget is twice the last short gap, at least
 * SL_SPIN_MIN_NS; it halves after a spin that found nothing and after a
 * gap longer than SL_SPIN_MAX_NS / 2, and is zero (no spinning) below
 * SL_SPIN_MIN_NS.  It starts at zero: a worker spins only once it saw
 * work come back soon after it went idle.
 */
#define SL_SPIN_MIN_NS 1000
#define SL_SPIN_MAX_NS 50000
typedef struct sl_spin_policy_s {
  int64_t budget_ns;
} sl_spin_policy_t;
void sl__spin_policy_init(sl_spin_policy_t *sp);
void sl__spin_policy_spun(sl_spin_policy_t *sp, bool has_found);
void sl__spin_policy_gap(sl_spin_policy_t *sp, int64_t gap_ns);

int sl__channel_create(uint32_t credits, uint32_t buffer_size,
                       sl_channel_t **out_ch);
void sl__channel_destroy(sl_channel_t *ch);
/**
 * @brief Queue a buffer.  @return SL_OK (moved) or SL_EAGAIN (no credit;
 * the caller still owns buf).  @thread sender.
 */
int sl__channel_push(sl_channel_t *ch, sl_buf_t *buf);
/** @brief Take the next buffer, or NULL.  @thread receiver. */
sl_buf_t *sl__channel_pop(sl_channel_t *ch);
/** @brief True if a buffer is queued.  @thread receiver. */
static inline bool sl__channel_has_data(sl_channel_t *ch) {
  return atomic_load_explicit(&ch->count, memory_order_acquire) != 0;
}
/** @brief Give a consumed buffer back to the sender.  @thread receiver. */
void sl__channel_recycle(sl_channel_t *ch, sl_buf_t *buf);
/** @brief A buffer for the sender to fill (recycled or new). */
sl_buf_t *sl__channel_get_buffer(sl_channel_t *ch, uint32_t min_cap);
/** @brief Queue buf, or keep it pending if there is no credit.  Sender. */
void sl__channel_send(sl_channel_t *ch, sl_buf_t *buf);
/** @brief Push pending buffers while credit lasts; true when none left. */
bool sl__channel_flush_pending(sl_channel_t *ch);

/* ------------------------------------------------------------------ */
/* Scheduler interface. */

typedef enum sl_run_result_e {
  SL_RUN_AGAIN = 0,    /* quantum used, more work */
  SL_RUN_WAIT_INPUT,   /* idle: waiting for input or a timer */
  SL_RUN_WAIT_OUTPUT,  /* backpressured: waiting for credit */
  SL_RUN_DONE          /* finished (successfully or not) */
} sl_run_result_t;

typedef struct sl_sched_ops_s {
  /** Make the task runnable (coalesces).  @thread any. */
  void (*wake)(sl_sched_t *s, sl_task_t *task);
  /** Wake the task at or after t_ns (scheduler clock).  @thread the task. */
  void (*wake_at)(sl_sched_t *s, sl_task_t *task, int64_t t_ns);
  /** Processing time, ns since the epoch.  @thread any. */
  int64_t (*now)(sl_sched_t *s);
  /** Run every task to SL_RUN_DONE; blocks.  @thread the job's caller. */
  int (*run)(sl_sched_t *s);
  void (*destroy)(sl_sched_t *s);
} sl_sched_ops_t;

struct sl_sched_s {
  const sl_sched_ops_t *ops;
};

/* Task scheduling states (sl_task_t.sched_state). */
enum {
  SL_TASK_IDLE = 0,
  SL_TASK_QUEUED = 1,
  SL_TASK_RUNNING = 2,
  SL_TASK_NOTIFIED = 3, /* woken while running: run again */
  SL_TASK_FINISHED = 4
};

/**
 * @brief A worker pool of n_workers threads sharing one run queue.
 * Tasks are added before run().
 */
int sl__sched_pool_create(uint32_t n_workers, sl_task_t **tasks,
                          uint32_t n_tasks, sl_sched_t **out_sched);

/* ------------------------------------------------------------------ */
/* Operators. */

struct sl_ckpt_subtask_s;

typedef struct sl_op_vt_s {
  const char *name;
  int (*open)(sl_op_t *op);
  /** A row on logical input `input` (0, or 1 for a second input). */
  int (*process)(sl_op_t *op, uint32_t input, const sl_row_t *row);
  /** A processing-time timer; its key is current. */
  int (*on_timer)(sl_op_t *op, int64_t ts);
  /** Every input has ended. */
  int (*end_input)(sl_op_t *op);
  void (*close)(sl_op_t *op, bool is_success);
  /** Checkpoint id completed (covers older ones) / was aborted. */
  void (*checkpoint_complete)(sl_op_t *op, uint64_t id);
  void (*checkpoint_aborted)(sl_op_t *op, uint64_t id);
  /** An event-time timer (ts in microseconds); its key is current. */
  int (*on_event_timer)(sl_op_t *op, int64_t ts);
  /**
   * Optional: the task is about to snapshot for checkpoint id.  A sink
   * writes out what it buffered, so that the checkpoint covers no row the
   * output lacks.
   */
  int (*pre_snapshot)(sl_op_t *op, uint64_t id);
  /**
   * Optional: add the operator's operator state (named entry lists) to
   * sub during the sync phase of checkpoint id (two-phase-commit sinks:
   * "sink.committables").  An error fails the task.
   */
  int (*snapshot_opstate)(sl_op_t *op, uint64_t id,
                          struct sl_ckpt_subtask_s *sub);
  /**
   * Optional: called at the start of every run of the task (after
   * checkpoint notices), so that the operator can do deferred work (a
   * commit to retry); it asks for wake-ups with the scheduler's wake_at.
   * A negative return fails the task.
   */
  int (*poll)(sl_op_t *op);
  /**
   * Optional: may the task finish now that its input ended?  1 yes, 0 not
   * yet (the task waits, e.g. for its last epoch to commit, and is woken
   * by a checkpoint notice or a wake-up), negative: fail the task.
   */
  int (*may_finish)(sl_op_t *op);
} sl_op_vt_t;

/* Where an operator's output goes: chained operators or writers. */
typedef struct sl_out_target_s {
  sl_op_t *op;      /* chained operator, or NULL */
  uint32_t input;
  sl_writer_t *w;   /* record writer, or NULL */
} sl_out_target_t;

/* Key selector of a keyed edge or operator. */
typedef struct sl_keysel_s {
  uint32_t *fields;
  uint8_t *types;     /* type id of each field */
  uint32_t n_fields;
  uint32_t max_fixed; /* key bytes when no field is variable-length, else 0 */
  sl_key_fn fn;
  void *user;
} sl_keysel_t;

int sl__keysel_extract(const sl_keysel_t *ks, const sl_row_t *row,
                       sl_bytes_t *out_key);

struct sl_collector_s {
  sl_op_t *op;
};

/*
 * An operator instance of one subtask: the public sl_ctx_t.  Owned by its
 * task; used only on the task's thread, except the atomic counters, which
 * the metrics reader loads.
 */
struct sl_ctx_s {
  const sl_op_vt_t *vt;
  const void *cfg;   /* node configuration (owned by the job) */
  void *impl;        /* operator private data */
  sl_task_t *task;
  const char *uid;
  uint32_t subtask;
  uint32_t parallelism;
  uint32_t max_parallelism;
  void *local;       /* sl_ctx_set_local */
  const sl_schema_t *out_schema;
  const sl_schema_t *in_schema[2]; /* per logical input */
  sl_row_builder_t out_b;
  sl_out_target_t *targets;
  uint32_t n_targets;
  sl_collector_t collector;
  _Atomic uint64_t n_in;
  _Atomic uint64_t n_out;
  /* Keyed operators. */
  sl_kstate_t *kstate;
  const sl_keysel_t *keysel[2]; /* per logical input */
  sl_bytes_t keybuf;
  sl_timers_t *timers;   /* processing time (ns) */
  sl_timers_t *etimers;  /* event time (us) */
  /* Side outputs (e.g. late records of a window): targets per port. */
  sl_out_target_t *side_targets;
  uint32_t *side_ports;  /* port of each side target */
  uint32_t n_side_targets;
  bool is_opening;
  bool is_keyed;
  bool is_open;
  uint32_t ckpt_op;     /* index of the operator in checkpoint metadata */
};

/** @brief Emit a row to every target of op. */
int sl__op_emit(sl_op_t *op, const sl_row_t *row);
/** @brief Emit a row to the targets of side output `port` (>= 1). */
int sl__op_emit_side(sl_op_t *op, uint32_t port, const sl_row_t *row);

/** @brief Dispatch a row into an operator (counts it). */
static inline int sl__op_push(sl_op_t *op, uint32_t input,
                              const sl_row_t *row) {
  atomic_store_explicit(&op->n_in,
                        atomic_load_explicit(&op->n_in, memory_order_relaxed) +
                            1,
                        memory_order_relaxed);
  return op->vt->process(op, input, row);
}

/** @brief Record an error for the task, prefixed with the operator. */
int sl__op_fail(sl_op_t *op, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** @brief Take ownership of err as the task's error (prefixing op). */
int sl__op_fail_err(sl_op_t *op, sl_error_t *err, int code);
/** @brief Make the key of row (on input) current in the keyed state. */
int sl__op_set_key_from_row(sl_op_t *op, uint32_t input, const sl_row_t *row);

/* ------------------------------------------------------------------ */
/* Record writers: one per non-chained outgoing edge of an operator. */

typedef enum sl_part_e {
  SL_PART_FORWARD = 0,
  SL_PART_HASH = 1,
  SL_PART_REBALANCE = 2,
  SL_PART_BROADCAST = 3
} sl_part_t;

struct sl_writer_s {
  sl_task_t *task;
  uint32_t index;          /* in task->writers */
  const sl_schema_t *schema; /* of the rows it sends */
  sl_part_t part;
  sl_channel_t **chs; /* indexed by receiving subtask (forward: one) */
  uint32_t n_chs;
  uint32_t rr;
  const sl_keysel_t *keysel;
  uint32_t max_parallelism;
  sl_bytes_t keybuf;
  bool is_flush_each; /* buffer timeout 0: send after every record */
};

int sl__writer_emit(sl_writer_t *w, const sl_row_t *row);
/** @brief Append a hash frame (see sl_frame_t) to ch's current buffer. */
int sl__channel_append_hashed(sl_channel_t *ch, const sl_row_t *row,
                              const uint8_t *key, uint32_t key_len,
                              uint64_t hash);
/** @brief Send partly filled buffers (idle flush). */
void sl__writer_flush(sl_writer_t *w);
/** @brief Send an event buffer on every channel. */
int sl__writer_send_event(sl_writer_t *w, sl_buf_kind_t kind, int64_t value,
                          int64_t ts);

/* ------------------------------------------------------------------ */
/* Tasks. */

typedef struct sl_job_rt_s sl_job_rt_t; /* the job's runtime side */

/* An event from a source's enumerator to one reader (the checkpoint
 * module's enumerator host makes them; the gateway delivers them to the
 * reader's mailbox). */
typedef enum sl_enum_ev_kind_e {
  SL_ENUM_EV_ASSIGN = 1,  /* id, data = the split's state */
  SL_ENUM_EV_CUSTOM = 2,  /* data = the event */
  SL_ENUM_EV_NO_MORE = 3  /* no more splits for this reader */
} sl_enum_ev_kind_t;

typedef struct sl_enum_event_s {
  sl_enum_ev_kind_t kind;
  uint32_t subtask;
  uint64_t epoch; /* newest enumerator snapshot when it was sent */
  char *id;
  uint8_t *data;
  size_t len;
  struct sl_enum_event_s *next;
} sl_enum_event_t;

/** @brief Free an event (NULL does nothing).  @thread any. */
void sl__enum_event_free(sl_enum_event_t *ev);

/*
 * A source task's link to its enumerator, the checkpoint module's
 * enumerator host, reached through these calls so that the runtime does
 * not depend on that module.  Every call may be made from the task's
 * thread; none blocks on the enumerator.
 */
typedef struct sl_enum_link_s {
  void *host;
  int (*add_reader)(void *host, uint32_t subtask);
  int (*request_split)(void *host, uint32_t subtask);
  int (*split_finished)(void *host, uint32_t subtask, const char *id);
  int (*reader_event)(void *host, uint32_t subtask, const uint8_t *ev,
                      size_t len);
  /* The reader took its snapshot for id: the gateway reopens. */
  void (*reader_snapshot)(void *host, uint32_t subtask, uint64_t id);
  /* The enumerator's sticky failure (SL_OK while it works). */
  int (*status)(void *host, sl_error_t **out_err);
} sl_enum_link_t;

typedef struct sl_source_rt_s {
  const sl_source_vt_t *vt;
  void *ctx;
  void *reader;
  sl_split_init_t *splits; /* assigned; ids borrowed from `all`, or owned
                              when link is set */
  uint32_t n_splits;
  uint32_t cap_splits;     /* with link: capacity of splits (and of
                              is_finished and wm->splits) */
  bool *is_finished;       /* with link: the reader finished split k; it
                              leaves the reader's checkpointed state */
  const sl_split_list_t *all; /* every split of the source; borrowed
                                 from the planner, valid until the task
                                 is destroyed; NULL with link */
  sl_wmgen_t *wm;       /* NULL: this source has no watermarks */
  /* Sources with an enumerator (NULL: the static enumerator of plan(),
   * which user sources without an enumerator keep). */
  const sl_enum_link_t *link;
  /* The mailbox: the gateway appends (any thread, under mbox_lock), the
   * task takes (sl__source_drain). */
  pthread_mutex_t mbox_lock;
  sl_enum_event_t *mbox, *mbox_tail;
  /* The task's own. */
  bool is_no_more;      /* the enumerator said no more splits */
  bool is_requesting;   /* a split request is outstanding */
} sl_source_rt_t;

/**
 * @brief Make room for n more splits in a source with an enumerator.
 * @return SL_OK or SL_ENOMEM.  @thread the task (or the planner).
 */
int sl__source_reserve(sl_source_rt_t *src, uint32_t n);

/**
 * @brief Append ev to the mailbox of source task t and wake it (the
 * gateway's delivery).  Takes ev.  @thread any.  @locks none of t's.
 */
void sl__source_deliver(sl_task_t *t, sl_enum_event_t *ev);

/* ------------------------------------------------------------------ */
/* Source splits by identity (splits.c). */

struct sl_split_list_s {
  char **ids;
  uint32_t n, cap;
};

/**
 * @brief Find a duplicate id.  *out_dup is one (borrowed) or NULL.
 * @return SL_OK or SL_ENOMEM.
 */
int sl__split_list_check(const sl_split_list_t *l, const char **out_dup);
/** @brief Index of the split whose id is id[0..id_len), or -1. */
int64_t sl__split_list_find(const sl_split_list_t *l, const char *id,
                            size_t id_len);

/* A stored split position, decoded (pointers into the entry). */
typedef struct sl_split_pos_s {
  const char *id; /* not NUL-terminated */
  size_t id_len;
  const uint8_t *pos;
  size_t pos_len;
} sl_split_pos_t;

/** @brief Append the entry of split id at position pos.  SL_ENOMEM. */
int sl__split_pos_encode(const char *id, const uint8_t *pos, size_t pos_len,
                         sl_bytes_t *out);
/** @brief Decode an entry.  @return SL_OK or SL_ECORRUPT. */
int sl__split_pos_decode(const uint8_t *p, size_t n, sl_split_pos_t *out);

/* Timing of one task's part in a checkpoint, for its statistics. */
typedef struct sl_ckpt_timing_s {
  int64_t barrier_delay_ns; /* trigger (or first barrier) to alignment end */
  int64_t alignment_ns;
  bool is_unaligned;
} sl_ckpt_timing_t;

/*
 * Checkpoint hooks, implemented by the checkpoint module and installed in
 * the job runtime when checkpoints are on.  The runtime aligns barriers;
 * the hooks take and acknowledge snapshots.
 */
typedef struct sl_ckpt_hooks_s {
  /* Sync phase of task t for checkpoint id: pin state, read positions.
   * Returns a pending snapshot for submit().  An error fails the task. */
  int (*snapshot_sync)(void *ctx, sl_task_t *t, uint64_t id,
                       const sl_ckpt_timing_t *timing, void **out_snap);
  /* Finish it: write state and the channel state (framed records, may be
   * empty) and acknowledge, maybe on the I/O pool.  Takes snap. */
  int (*snapshot_submit)(void *ctx, void *snap, const uint8_t *channel_state,
                         size_t channel_len);
  /* Drop a pending snapshot (its checkpoint was abandoned). */
  void (*snapshot_drop)(void *ctx, void *snap);
  /* t finished its input: no later checkpoint can complete. */
  void (*task_finished)(void *ctx, sl_task_t *t);
  /* Source task t read all its splits and waits for the final checkpoint
   * (jobs with a two-phase-commit sink; see task.c "Final checkpoint"). */
  void (*source_ended)(void *ctx, sl_task_t *t);
  void *ctx;
  int mode;                /* sl_ckpt_mode_t */
  int64_t alignment_timeout_ns;
} sl_ckpt_hooks_t;

/* Shared between tasks of a job and the job's controlling thread. */
struct sl_job_rt_s {
  _Atomic bool is_canceled;
  _Atomic uint32_t n_live;
  pthread_mutex_t lock;     /* protects err, has_failed and sched */
  sl_error_t *err;          /* first task failure */
  /* A task failed.  Set even when no error object could be allocated for
   * it (out of memory), so that the attempt never passes for a success. */
  bool has_failed;
  sl_sched_t *sched;        /* set while the job runs */
  sl_task_t **tasks;
  uint32_t n_tasks;
  const sl_ckpt_hooks_t *ckpt; /* NULL: checkpoints off */
  bool has_event_time;      /* some source generates watermarks */
  uint64_t restored_ckpt;   /* checkpoint this attempt restored, 0: none;
                               set by the plan before any task runs */
  /* Two-phase-commit sinks (set by the plan and run.c before any task
   * runs, read-only after): the job takes a final checkpoint at the end of
   * input, and the first epoch id of this attempt (sl_sink_init_t). */
  bool needs_final_ckpt;
  uint64_t epoch_id;
  const char *job_name;
  /* Buffer timeout (sl_job_config_t.buffer_timeout_ms) in ns: > 0 a held
   * buffer leaves at most this long after the task first saw it (task.c,
   * "Buffer timeout"); 0 every record leaves at once (writers'
   * is_flush_each); < 0 off.  Set by the plan, read-only after. */
  int64_t buffer_timeout_ns;
};

/*
 * Narrow calls for the checkpoint module, which reaches tasks only
 * through these (the task struct is private: runtime/task_int.h).
 */
/** @brief Index of the task in the job.  @thread any. */
uint32_t sl__task_index(const sl_task_t *task);
/** @brief Operators of the chain.  @thread any (the plan is immutable). */
uint32_t sl__task_n_ops(const sl_task_t *task);
/** @brief Operator i of the chain, in chain order; 0 is the head. */
sl_op_t *sl__task_op(const sl_task_t *task, uint32_t i);
/** @brief The source of a source task, or NULL.  @thread the task. */
sl_source_rt_t *sl__task_source(const sl_task_t *task);
/** @brief Newest checkpoint id the task snapshotted or is aligning.
 * @thread the task. */
uint64_t sl__task_last_snapshot(const sl_task_t *task);
/** @brief The checkpoint this attempt restored, 0 for a fresh start.
 * @thread any (set by the plan before any task runs). */
uint64_t sl__task_restored_checkpoint(const sl_task_t *task);
/**
 * @brief Trigger checkpoint id at a source task (nothing for other
 * tasks), and wake it; it snapshots between two polls.
 * @thread the coordinator.  @locks none of the task's.
 */
void sl__task_trigger_checkpoint(sl_task_t *task, uint64_t id);
/** @brief Checkpoint id (and every older one) completed: notify the
 * task's operators on its thread.  @thread the coordinator. */
void sl__task_checkpoint_complete(sl_task_t *task, uint64_t id);
/** @brief Checkpoint id (and every older one) aborted: the task drops
 * its work for it.  @thread the coordinator. */
void sl__task_checkpoint_aborted(sl_task_t *task, uint64_t id);
/**
 * @brief Checkpoint id is the job's final checkpoint (every source read
 * all its splits): each task runs its end of input before its snapshot
 * for id, so that everything the job will ever emit lies before barrier
 * id.  Called for every task before the sources are triggered.
 * @thread the coordinator.
 */
void sl__task_set_final_checkpoint(sl_task_t *task, uint64_t id);
/** @brief Run the task at or after t_ns (scheduler clock).
 * @thread the task. */
void sl__task_wake_at(sl_task_t *task, int64_t t_ns);
/** @brief The job the task belongs to.  @thread any. */
const sl_job_rt_t *sl__task_job(const sl_task_t *task);
/** @brief Whether the task's chain is a source.  @thread any. */
bool sl__task_is_source(const sl_task_t *task);

/** @brief Run a task for one quantum.  @thread one worker at a time. */
sl_run_result_t sl__task_run(sl_task_t *task);
/** @brief Ask every task to stop, and wake them.  @thread any. */
void sl__job_rt_cancel(sl_job_rt_t *rt);
/** @brief Note a sender became blocked on ch. */
void sl__task_note_blocked(sl_task_t *task, sl_channel_t *ch);
void sl__task_destroy(sl_task_t *task);
/**
 * @brief Give a task the channel state of an unaligned checkpoint (the
 * bytes of its `.channel` file), replayed when it first runs.  Validates
 * every entry against the task's inputs and outputs first.
 * @return SL_OK, or SL_ECORRUPT (blob stays with the caller).
 * @ownership takes blob on success.  @thread the planner, before the run.
 */
int sl__task_restore_channel_state(sl_task_t *task, uint8_t *blob,
                                   size_t len);

/**
 * @brief Advance the task's watermark to wm (no-op if not larger): fire the
 * event-time timers of the chain in order, then send it downstream.
 */
int sl__task_advance_wm(sl_task_t *task, int64_t wm);

/** @brief Processing time of the task's scheduler.  @thread the task. */
int64_t sl__task_now(const sl_task_t *task);

#endif
