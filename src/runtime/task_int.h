/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private header of the runtime module: the task struct and the calls
 * between the files that implement a task (task.c, the run loop and
 * lifecycle; barrier_align.c, checkpoint barriers; chanstate.c, the
 * channel state of unaligned checkpoints; source_out.c, the source output
 * calls).  Other modules reach tasks through the sl__task_* calls of
 * runtime.h; the planner (graph/plan.c), which builds and wires tasks, is
 * the one exception.  See README.md.
 */
#ifndef SL_RUNTIME_TASK_INT_H
#define SL_RUNTIME_TASK_INT_H

#include "runtime/runtime.h"

typedef enum sl_task_phase_e {
  SL_PHASE_CREATED = 0,
  SL_PHASE_RUNNING,
  SL_PHASE_ENDING, /* input ended; sending EOP downstream */
  SL_PHASE_DONE
} sl_task_phase_t;

/* The handle a source reader emits through (sl_connector.h). */
struct sl_source_out_s {
  sl_task_t *task;
  sl_op_t *op;
  uint32_t budget;
  int64_t wait_until;
  bool is_failed;
  sl_wmgen_t *wm;
};

struct sl_source_waker_s {
  sl_task_t *task;
};

/*
 * A task: a chain of operators of one subtask, run by one thread at a
 * time.  sched_* fields belong to the scheduler; metrics are atomics read
 * by any thread; everything else belongs to the thread running the task.
 */
struct sl_task_s {
  /* Scheduler. */
  _Atomic int sched_state;
  sl_task_t *run_next;
  int64_t wait_since;
  sl_run_result_t last_result;
  int64_t timer_at; /* pending wake_at, INT64_MAX if none */
  /* Metrics. */
  _Atomic uint64_t busy_ns;
  _Atomic uint64_t backpressured_ns;
  _Atomic uint64_t idle_ns;
  _Atomic bool is_finished;
  /* Identity. */
  sl_job_rt_t *job;
  sl_sched_t *sched;
  uint32_t index;
  uint32_t subtask;
  uint32_t parallelism;
  char *name;
  /* Chain, in topological order; ops[0] is the head. */
  sl_op_t **ops;
  uint32_t n_ops;
  /* Source tasks. */
  sl_source_rt_t *source;
  sl_source_out_t sout;
  sl_source_waker_t waker;
  /* Inputs. */
  sl_channel_t **inputs;
  uint32_t n_inputs;
  uint32_t n_finished;
  uint32_t rr;
  sl_buf_t *cur_buf;       /* partly processed input buffer */
  sl_channel_t *cur_ch;
  uint32_t cur_off;
  /* Key bytes and hash of the row being pushed into ops[0], from the frame
   * of a hash channel (sl_frame_t); in_key is NULL otherwise. */
  const uint8_t *in_key;
  uint32_t in_key_len;
  uint64_t in_hash;
  /* Outputs. */
  sl_writer_t **writers;
  uint32_t n_writers;
  sl_channel_t **out_chs;  /* every output channel of every writer */
  uint32_t n_out_chs;
  uint32_t n_blocked;      /* output channels with pending buffers */
  /* Keyed operators with timers. */
  sl_op_t **timer_ops;
  uint32_t n_timer_ops;
  sl_bytes_t timer_key;
  /* Event time: the watermark of the task (every operator of the chain
   * sees it) and whether downstream was told the task is idle. */
  int64_t wm;
  bool is_wm_idle;
  _Atomic int64_t wm_metric; /* wm, for the progress line */
  /* Checkpoints: the coordinator writes the atomics, the task reads them. */
  _Atomic uint64_t ckpt_trigger;  /* sources: newest triggered id */
  _Atomic uint64_t ckpt_complete; /* newest completed id */
  _Atomic uint64_t ckpt_abort;    /* newest aborted id */
  uint64_t ckpt_last;             /* newest id snapshotted or aligning */
  uint64_t ckpt_notified;         /* newest completion given to operators */
  uint64_t ckpt_abort_seen;
  _Atomic uint64_t ckpt_final;    /* the final checkpoint's id, 0: none */
  bool is_source_ended;           /* sources: waiting for the final one */
  bool is_end_done;              /* end of input ran (sl__task_end_work) */
  uint64_t align_id;              /* checkpoint being aligned, 0 if none */
  uint32_t n_aligned;             /* inputs that delivered align_id */
  int64_t align_first_ns;         /* first barrier of align_id */
  int64_t align_ts;               /* trigger time of align_id */
  /* Aligned with a timeout: a snapshot waits until its in-band barriers
   * leave the pending queues, or is converted when the timeout passes. */
  uint64_t ob_id;
  void *ob_snap;
  int64_t ob_ts;
  /* Unaligned checkpoint in progress: snapshot taken, capturing the
   * in-flight records that were sent before the barrier. */
  uint64_t uc_id;
  void *uc_snap;
  sl_bytes_t uc_state;            /* channel state (chanstate.h) */
  uint32_t n_uc_done;
  uint32_t cur_idx;               /* ring index of cur_buf in cur_ch */
  /* Channel state restored from an unaligned checkpoint, replayed first. */
  uint8_t *restore_cs;
  size_t restore_cs_len;
  size_t restore_cs_off;   /* 1 once the output buffers were pushed */
  size_t restore_cs_pos;   /* replay position of the input records */
  /* Status. */
  sl_task_phase_t phase;
  sl_error_t *err;
};

/* ------------------------------------------------------------------ */
/* Checkpoint barriers (barrier_align.c).  Every call runs on the task's
 * thread, between two records; a negative return fails the task. */

/** @brief Ring index a lies before b (indices wrap). */
static inline bool sl__idx_before(uint32_t a, uint32_t b) {
  return (int32_t)(a - b) < 0;
}

/**
 * @brief End of input of the chain without EOP (watermark to the end,
 * end_input of every operator), run once: before the snapshot of the final
 * checkpoint, or when every input ended.  @return SL_OK or a negative code
 * (the task's error is recorded).
 */
int sl__task_end_work(sl_task_t *t);

/** @brief Deliver checkpoint completion and abort notices to the chain. */
void sl__align_notify(sl_task_t *t);
/** @brief A source's newest trigger: snapshot and send the barrier. */
int sl__align_source_trigger(sl_task_t *t);
/** @brief An in-band barrier id (triggered at ts) arrived on input ch. */
int sl__align_on_barrier(sl_task_t *t, sl_channel_t *ch, uint64_t id,
                         int64_t ts);
/** @brief Every input is finished or delivered the barrier being aligned. */
bool sl__align_is_complete(const sl_task_t *t);
/** @brief Alignment complete: snapshot, forward the barrier, unblock. */
int sl__align_finish(sl_task_t *t);
/** @brief Look for priority barriers; complete captures from the queues. */
int sl__align_poll_priority(sl_task_t *t);
/** @brief Aligned with a timeout: switch a long alignment to unaligned. */
int sl__align_check_timeout(sl_task_t *t);
/** @brief Submit a snapshot held until its barriers left the outputs. */
int sl__align_check_output(sl_task_t *t);
/** @brief Keep the records of a data buffer, from byte off, as input
 * channel state of the unaligned checkpoint in progress. */
int sl__align_capture_input(sl_task_t *t, const sl_channel_t *ch,
                            const sl_buf_t *b, uint32_t off);
/** @brief Input ch is past its cutoff: its capture is complete. */
int sl__align_input_done(sl_task_t *t, sl_channel_t *ch);

/* ------------------------------------------------------------------ */
/* Event time (task.c; the arithmetic is in time/watermark.c). */

/** @brief Tell receivers the task is idle or active again (if changed). */
int sl__task_set_wm_idle(sl_task_t *t, bool is_idle);
/** @brief Emit a source task's watermark over its splits. */
int sl__task_wmgen_emit(sl_task_t *t);

/* ------------------------------------------------------------------ */
/* Sources with an enumerator (source_out.c). */

/**
 * @brief Take the events in the mailbox: assignments go to the reader
 * (reader_add_splits), custom events to reader_handle_event, "no more
 * splits" is noted; a failed enumerator fails the task.  Called between
 * two polls, and after a trigger is seen and before the source's snapshot
 * (gateway rule G2 of checkpoint/enum_host.c).
 * @return SL_OK or a negative code (the task's error is recorded).
 */
int sl__source_drain(sl_task_t *t);

/* ------------------------------------------------------------------ */
/* Restored channel state (chanstate.c). */

/** @brief Push the restored output buffers into their channels (once). */
int sl__chanstate_restore_outputs(sl_task_t *t);
/**
 * @brief Replay the restored input records into the head of the chain.
 * @return SL_OK (all replayed, the state freed), 1 (output is blocked:
 * call again), or a negative code (the task's error is recorded).
 */
int sl__chanstate_replay(sl_task_t *t);

#endif
