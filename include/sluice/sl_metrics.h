/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metrics of a running job: per operator subtask records in and out, per
 * task busy, idle and backpressured time, per transactional sink subtask
 * its pending committables and commit outcomes.  Counters are monotonic; rates are
 * the caller's differences between two snapshots.  See docs/metrics.md.
 */
#ifndef SLUICE_SL_METRICS_H
#define SLUICE_SL_METRICS_H

#include "sl_common.h"
#include "sl_job.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_op_metrics_s {
  const char *uid;      /* borrowed from the job */
  uint32_t subtask;
  uint32_t task;        /* index into sl_metrics_t.tasks */
  uint64_t records_in;
  uint64_t records_out;
} sl_op_metrics_t;

typedef struct sl_task_metrics_s {
  const char *name;     /* "uid1 -> uid2" chain name, borrowed */
  uint32_t subtask;
  uint64_t busy_ns;          /* running user and engine code */
  uint64_t backpressured_ns; /* waiting for output credit */
  uint64_t idle_ns;          /* waiting for input or a timer */
  /* Event-time watermark of the task (us), INT64_MIN before the first and
   * in jobs without event time; INT64_MAX once its input has ended. */
  int64_t watermark;
  bool is_finished;
} sl_task_metrics_t;

/*
 * One subtask of a transactional (two-phase-commit) sink, counted since
 * the attempt started, like records_in (sl_job_restarts counts attempts).
 */
typedef struct sl_sink_metrics_s {
  const char *uid;             /* borrowed from the job */
  uint32_t subtask;
  uint32_t pending;            /* committables prepared and not yet
                                  confirmed committed (restored ones too) */
  int64_t oldest_pending_age_ns; /* how long the oldest of them has been
                                    pending (since its prepare, or since
                                    the restore for a restored one); 0
                                    when none is */
  uint64_t commit_attempts;    /* calls of commit, retries included */
  uint64_t committed;          /* answered OK */
  uint64_t already_committed;  /* answered ALREADY (a lost reply, a
                                  restore of committed output) */
  uint64_t retries;            /* answered RETRY */
  uint64_t lost;               /* answered LOST (the job fails) */
  uint64_t lingering_aborted;  /* external transactions recover() aborted:
                                  prepared or open, named by no completed
                                  checkpoint */
} sl_sink_metrics_t;

typedef struct sl_metrics_s {
  int64_t time_ns;           /* when the snapshot was taken */
  int64_t start_ns;          /* when the job started */
  sl_op_metrics_t *ops;
  uint32_t n_ops;
  sl_task_metrics_t *tasks;
  uint32_t n_tasks;
  /* Appended: transactional sink subtasks. */
  sl_sink_metrics_t *sinks;
  uint32_t n_sinks;
} sl_metrics_t;

/**
 * @brief Take a snapshot of the job's metrics (zeroes before start).
 * @thread any.  @ownership free with sl_metrics_close().
 */
SL_API int sl_job_metrics(sl_job_t *job, sl_metrics_t *out);
SL_API void sl_metrics_close(sl_metrics_t *m);

#ifdef __cplusplus
}
#endif
#endif
