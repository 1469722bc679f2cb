/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running a job: attempts (plan, schedule, tear down), restarts with the
 * configured strategy and delay, the fallback to an older checkpoint when
 * the one being restored turns out corrupt, and the job's run, start,
 * wait, cancel, checkpoint and metrics calls.  Planning is in plan.c,
 * restoring in restore.c.  See README.md.
 */
#include <time.h>

#include "graph/graph.h"
#include "runtime/task_int.h"

/* Delay before restart number k (1-based) per the restart strategy. */
static int64_t restart_delay_ms(const sl_restart_config_t *r, uint32_t k) {
  if (r->kind != SL_RESTART_EXPONENTIAL) return r->delay_ms;
  double mult = r->multiplier > 1 ? r->multiplier : 2.0;
  double max = r->max_delay_ms > 0 ? (double)r->max_delay_ms : 60000.0;
  double d = (double)r->delay_ms;
  for (uint32_t i = 1; i < k && d < max; i++) d *= mult;
  return (int64_t)(d < max ? d : max);
}

/* Wait ms, or less if the job is cancelled.  Not task code: the job's
 * controlling thread may wait. */
static void restart_wait(sl_job_t *job, int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t ns = (int64_t)ts.tv_nsec + (ms % 1000) * 1000000ll;
  ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000ll);
  ts.tv_nsec = (long)(ns % 1000000000ll);
  pthread_mutex_lock(&job->rt.lock);
  while (!atomic_load(&job->is_user_canceled))
    if (pthread_cond_timedwait(&job->cancel_cond, &job->rt.lock, &ts) != 0)
      break;
  pthread_mutex_unlock(&job->rt.lock);
}

/* One attempt: build (restoring from meta), run every task, tear down the
 * scheduler.  Returns the attempt's result; the plan stays for metrics. */
static int run_attempt(sl_job_t *job, const sl_ckpt_meta_t *meta,
                       sl_error_t **out_err) {
  /* A user cancel before or between attempts stops the job; the internal
   * flag only ever stops one attempt. */
  atomic_store(&job->rt.is_canceled, atomic_load(&job->is_user_canceled));
  int rc = sl__plan_build(job, meta, out_err);
  job->is_plan_failed = rc != SL_OK; /* not worth a restart */
  if (rc != SL_OK) /* a bad configuration: fatal, unless memory ran out */
    return rc == SL_ENOMEM ? rc : sl__error_fatal(out_err, rc);
  sl_sched_t *sched;
  rc = sl__sched_pool_create(job->cfg.n_workers, job->rt.tasks,
                             job->rt.n_tasks, &sched);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "cannot create the scheduler");
  sl_io_pool_t *io = NULL;
  if (job->coord) {
    sl_coord_op_t *ops = sl_calloc(job->n_nodes + 1, sizeof(sl_coord_op_t));
    rc = ops ? sl__io_pool_create(1, &io) : SL_ENOMEM;
    if (rc == SL_OK)
      rc = sl__ckpt_hooks_create(job->coord, io, job->cfg.checkpoint.mode,
                                 job->cfg.checkpoint.alignment_timeout_ms,
                                 &job->hooks);
    for (uint32_t i = 0; rc == SL_OK && i < job->n_nodes; i++) {
      ops[i].uid = job->nodes[i]->uid;
      ops[i].parallelism = job->nodes[i]->par;
      ops[i].enum_host = job->nodes[i]->enum_host;
    }
    /* Two-phase-commit sinks: the attempt's first epoch id, an id no
     * checkpoint will use (sl_sink_init_t.epoch_id). */
    sl_error_t *rerr = NULL;
    if (rc == SL_OK && job->rt.needs_final_ckpt &&
        (rc = sl__coord_reserve_id(job->coord, &job->rt.epoch_id, &rerr)) !=
            SL_OK) {
      sl_free(ops);
      sl__io_pool_destroy(io);
      sched->ops->destroy(sched);
      if (out_err && *out_err == NULL) *out_err = rerr;
      else sl_error_destroy(rerr);
      return rc;
    }
    if (rc == SL_OK)
      rc = sl__coord_attach(job->coord, job->rt.tasks, job->rt.n_tasks, ops,
                            job->n_nodes, io);
    sl_free(ops);
    if (rc != SL_OK) {
      sl__io_pool_destroy(io);
      sched->ops->destroy(sched);
      return sl_error_set(out_err, rc, "cannot start checkpointing");
    }
    job->rt.ckpt = job->hooks;
  }
  pthread_mutex_lock(&job->rt.lock); /* sl_job_metrics reads both */
  if (job->start_ns == 0) job->start_ns = sl__clock_realtime_ns();
  job->rt.sched = sched;
  pthread_mutex_unlock(&job->rt.lock);
  sl__enum_plan_attach(job); /* the tasks' scheduler exists now */
  rc = sched->ops->run(sched);
  sl__enum_plan_detach(job);
  /* Drain the async phase before the coordinator forgets this attempt. */
  if (job->coord) {
    sl__io_pool_destroy(io);
    sl__coord_detach(job->coord);
  }
  pthread_mutex_lock(&job->rt.lock);
  sl_error_t *err = job->rt.err;
  job->rt.err = NULL;
  bool has_failed = job->rt.has_failed;
  job->rt.has_failed = false;
  pthread_mutex_unlock(&job->rt.lock);
  if (rc != SL_OK) {
    sl_error_destroy(err);
    return sl_error_set(out_err, rc, "cannot start worker threads: %s",
                        sl_strerror(rc));
  }
  if (err) {
    rc = sl_error_code(err);
    if (rc == SL_OK) rc = SL_EFAILED;
    if (out_err && *out_err == NULL) *out_err = err;
    else sl_error_destroy(err);
    return rc;
  }
  /* A task failed but its error object could not be allocated: the only
   * way to get here is running out of memory. */
  if (has_failed)
    return sl_error_set(out_err, SL_ENOMEM, "a task failed and there was "
                        "no memory left to say why: out of memory");
  if (atomic_load(&job->is_user_canceled))
    return sl_error_set(out_err, SL_ECANCELED, "the job was cancelled");
  return SL_OK;
}

/*
 * The reaper.  Freeing the keyed state of a failed attempt (one free per
 * entry: seconds for gigabytes) would delay the restart, whose restore
 * builds the same amount anew.  So teardown hands the states to a thread
 * of their own, which frees them while the next attempt restores; the
 * attempt after that, and sl_job_destroy, wait for it first.  Nothing
 * else refers to the states by then: the tasks are gone and the async
 * phase was drained (run_attempt).  Without memory or a thread for it the
 * states are freed at once, as before.
 */
typedef struct reap_s {
  sl_kstate_t **states;
  uint32_t n;
} reap_t;

static void *reap_main(void *arg) {
  reap_t *r = arg;
  sl__io_lower_priority(); /* not to slow the restore it overlaps */
  for (uint32_t i = 0; i < r->n; i++) sl__kstate_destroy(r->states[i]);
  sl_free(r->states);
  sl_free(r);
  return NULL;
}

void sl__job_join_reaper(sl_job_t *job) {
  if (!job->has_reaper) return;
  pthread_join(job->reaper, NULL);
  job->has_reaper = false;
}

static void reap_states(sl_job_t *job) {
  sl__job_join_reaper(job);
  reap_t *r = sl_calloc(1, sizeof(*r));
  if (r == NULL) return;
  if (sl__plan_take_states(job, &r->states, &r->n) != SL_OK || r->n == 0) {
    sl_free(r->states);
    sl_free(r);
    return;
  }
  if (pthread_create(&job->reaper, NULL, reap_main, r) == 0) {
    job->has_reaper = true;
    return;
  }
  reap_main(r);
}

static void teardown_attempt(sl_job_t *job) {
  /* sl_job_metrics reads the plan under rt.lock while rt.sched is set:
   * unset it first, so that no snapshot reads what is freed below. */
  pthread_mutex_lock(&job->rt.lock);
  sl_sched_t *sched = job->rt.sched;
  job->rt.sched = NULL;
  pthread_mutex_unlock(&job->rt.lock);
  reap_states(job);
  sl__plan_destroy(job);
  if (sched) sched->ops->destroy(sched);
  sl__ckpt_hooks_destroy(job->hooks);
  job->hooks = NULL;
  job->rt.ckpt = NULL;
}


int sl_job_run(sl_job_t *job, sl_error_t **out_err) {
  int expect = SL_JOB_BUILDING;
  if (!atomic_compare_exchange_strong(&job->state, &expect, SL_JOB_RUNNING))
    return sl_error_set(out_err, SL_ESTATE, "a job can run only once");
  if (job->err) {
    atomic_store(&job->state, SL_JOB_FINISHED);
    return sl_error_set(out_err, sl_error_code(job->err), "%s",
                        sl_error_message(job->err));
  }
  int rc = SL_OK;
  sl_ckpt_meta_t meta;
  memset(&meta, 0, sizeof(meta));
  bool has_meta;
  if ((rc = sl__restore_initial(job, &meta, &has_meta, out_err)) != SL_OK) {
    atomic_store(&job->state, SL_JOB_FINISHED);
    return rc;
  }
  const sl_restart_config_t *rs = &job->cfg.restart;
  for (uint32_t attempt = 0;; attempt++) {
    sl_error_t *err = NULL;
    rc = run_attempt(job, has_meta ? &meta : NULL, &err);
    /* A checkpoint found damaged while restoring (a file's checksum): fall
     * back to the one before it, unless the user named this one. */
    while (rc == SL_ECORRUPT && job->is_restore_corrupt && has_meta &&
           job->coord && (job->cfg.restore_from == NULL || attempt > 0)) {
      uint64_t bad = meta.id;
      sl_ckpt_meta_t older;
      sl_error_t *lerr = NULL;
      int lrc = sl__ckpt_load_latest_below(sl__coord_job_dir(job->coord), bad,
                                           &older, &lerr);
      if (lrc != SL_OK) {
        sl_error_prefix(err, "checkpoint %llu is corrupt and no older one is "
                        "usable", (unsigned long long)bad);
        sl_error_destroy(lerr);
        break;
      }
      sl_log(SL_LOG_WARN, "checkpoint %llu is corrupt (%s); falling back to "
             "checkpoint %llu", (unsigned long long)bad, sl_error_message(err),
             (unsigned long long)older.id);
      sl_error_destroy(err);
      err = NULL;
      sl_error_destroy(lerr);
      teardown_attempt(job);
      sl__ckpt_meta_clear(&meta);
      meta = older;
      rc = run_attempt(job, &meta, &err);
    }
    /* The error's class decides first: a fatal one (a malformed input
     * record, a bad configuration, state that does not match the
     * checkpoint) would fail every attempt the same way. */
    bool is_fatal = sl_error_is_fatal(err);
    if (rc != SL_OK && is_fatal && rs->kind != SL_RESTART_NONE)
      sl_log(SL_LOG_INFO, "job '%s' is not restarted: the error is fatal",
             job->name);
    bool can_restart = rc != SL_OK && rc != SL_ECANCELED && !is_fatal &&
                       !job->is_plan_failed && rs->kind != SL_RESTART_NONE &&
                       (rs->max_attempts == 0 || attempt < rs->max_attempts) &&
                       !atomic_load(&job->is_user_canceled);
    if (!can_restart) {
      if (err) {
        if (out_err && *out_err == NULL) *out_err = err;
        else sl_error_destroy(err);
      }
      break;
    }
    sl_log(SL_LOG_WARN, "job '%s' failed (%s%s); restart %u%s", job->name,
           sl_error_message(err),
           sl_error_is_retriable(err) ? ", retriable" : "", attempt + 1,
           job->coord ? " from the latest checkpoint" : " from the beginning");
    sl_error_destroy(err);
    teardown_attempt(job);
    atomic_fetch_add(&job->n_restarts, 1);
    restart_wait(job, restart_delay_ms(rs, attempt + 1));
    /* Restart from the newest completed checkpoint, if any. */
    if (job->coord && sl__coord_latest(job->coord) != 0) {
      sl_ckpt_meta_t latest;
      sl_error_t *lerr = NULL;
      if (sl__ckpt_load_latest(sl__coord_job_dir(job->coord), &latest,
                               &lerr) == SL_OK) {
        sl__ckpt_meta_clear(&meta);
        meta = latest;
        has_meta = true;
      } else {
        sl_log(SL_LOG_WARN, "cannot load the latest checkpoint: %s",
               sl_error_message(lerr));
      }
      sl_error_destroy(lerr);
    }
    if (atomic_load(&job->is_user_canceled)) {
      rc = sl_error_set(out_err, SL_ECANCELED, "the job was cancelled");
      break;
    }
  }
  sl__ckpt_meta_clear(&meta);
  atomic_store(&job->state, SL_JOB_FINISHED);
  return rc;
}

int sl_job_trigger_checkpoint(sl_job_t *job, uint64_t *out_id,
                              sl_error_t **out_err) {
  if (job->coord == NULL)
    return sl_error_set(out_err, SL_ESTATE,
                        "checkpoints are off (no checkpoint directory)");
  return sl__coord_trigger(job->coord, out_id, out_err);
}

int sl_job_wait_checkpoint(sl_job_t *job, uint64_t id, int64_t timeout_ms,
                           sl_checkpoint_stats_t *out) {
  if (job->coord == NULL) return SL_ESTATE;
  /* Longer waits would overflow in nanoseconds; a year is forever here. */
  if (timeout_ms > SL_MAX_DURATION_MS) timeout_ms = SL_MAX_DURATION_MS;
  return sl__coord_wait(job->coord, id, timeout_ms, out);
}

int sl_job_last_checkpoint(sl_job_t *job, sl_checkpoint_stats_t *out) {
  if (job->coord == NULL) return SL_ENOTFOUND;
  return sl__coord_last(job->coord, out);
}

uint32_t sl_job_checkpoint_history(sl_job_t *job, sl_checkpoint_stats_t *out,
                                   uint32_t max) {
  return job->coord ? sl__coord_history(job->coord, out, max) : 0;
}

int sl_job_checkpoint_tasks(sl_job_t *job, uint64_t id,
                            sl_checkpoint_task_stats_t **out, uint32_t *out_n) {
  if (job->coord == NULL) return SL_ENOTFOUND;
  return sl__coord_task_stats(job->coord, id, out, out_n);
}

uint32_t sl_job_restarts(const sl_job_t *job) {
  return atomic_load(&((sl_job_t *)job)->n_restarts);
}

static void *bg_main(void *arg) {
  sl_job_t *job = arg;
  job->bg_rc = sl_job_run(job, &job->bg_err);
  return NULL;
}

int sl_job_start(sl_job_t *job, sl_error_t **out_err) {
  if (job->has_bg_thread || atomic_load(&job->state) != SL_JOB_BUILDING)
    return sl_error_set(out_err, SL_ESTATE, "a job can run only once");
  int e = pthread_create(&job->bg_thread, NULL, bg_main, job);
  if (e != 0)
    return sl_error_set(out_err, -e, "cannot start the job thread: %s",
                        strerror(e));
  job->has_bg_thread = true;
  return SL_OK;
}

int sl_job_wait(sl_job_t *job, sl_error_t **out_err) {
  if (!job->has_bg_thread)
    return sl_error_set(out_err, SL_ESTATE, "the job was not started");
  pthread_join(job->bg_thread, NULL);
  job->has_bg_thread = false;
  if (out_err && *out_err == NULL) {
    *out_err = job->bg_err;
    job->bg_err = NULL;
  }
  return job->bg_rc;
}

void sl_job_cancel(sl_job_t *job) {
  atomic_store(&job->is_user_canceled, true);
  sl__job_rt_cancel(&job->rt);
  pthread_mutex_lock(&job->rt.lock);
  pthread_cond_broadcast(&job->cancel_cond); /* a restart delay */
  pthread_mutex_unlock(&job->rt.lock);
}

int sl_job_metrics(sl_job_t *job, sl_metrics_t *out) {
  memset(out, 0, sizeof(*out));
  out->time_ns = sl__clock_realtime_ns();
  /* The plan is immutable while the scheduler exists, and a restart
   * unsets rt.sched under rt.lock before it frees the plan
   * (teardown_attempt): hold the lock for the whole snapshot. */
  pthread_mutex_lock(&job->rt.lock);
  out->start_ns = job->start_ns;
  if (job->rt.sched == NULL) {
    pthread_mutex_unlock(&job->rt.lock);
    return SL_OK;
  }
  out->ops = sl_calloc(job->n_ops + 1, sizeof(sl_op_metrics_t));
  out->tasks = sl_calloc(job->rt.n_tasks + 1, sizeof(sl_task_metrics_t));
  out->sinks = sl_calloc(job->n_ops + 1, sizeof(sl_sink_metrics_t));
  if (out->ops == NULL || out->tasks == NULL || out->sinks == NULL) {
    pthread_mutex_unlock(&job->rt.lock);
    sl_metrics_close(out);
    return SL_ENOMEM;
  }
  for (uint32_t i = 0; i < job->n_ops; i++) {
    const sl_op_t *op = job->ops[i];
    sl_op_metrics_t *m = &out->ops[out->n_ops++];
    m->uid = op->uid;
    m->subtask = op->subtask;
    m->task = op->task->index;
    m->records_in = atomic_load_explicit(&op->n_in, memory_order_relaxed);
    m->records_out = atomic_load_explicit(&op->n_out, memory_order_relaxed);
    if (sl__sink2pc_metrics(op, out->time_ns, &out->sinks[out->n_sinks]))
      out->n_sinks++;
  }
  for (uint32_t i = 0; i < job->rt.n_tasks; i++) {
    sl_task_t *t = job->rt.tasks[i];
    sl_task_metrics_t *m = &out->tasks[out->n_tasks++];
    m->name = t->name;
    m->subtask = t->subtask;
    m->busy_ns = atomic_load_explicit(&t->busy_ns, memory_order_relaxed);
    m->backpressured_ns =
        atomic_load_explicit(&t->backpressured_ns, memory_order_relaxed);
    m->idle_ns = atomic_load_explicit(&t->idle_ns, memory_order_relaxed);
    m->watermark = atomic_load_explicit(&t->wm_metric, memory_order_relaxed);
    m->is_finished = atomic_load_explicit(&t->is_finished, memory_order_acquire);
  }
  pthread_mutex_unlock(&job->rt.lock);
  return SL_OK;
}

void sl_metrics_close(sl_metrics_t *m) {
  sl_free(m->ops);
  sl_free(m->tasks);
  sl_free(m->sinks);
  memset(m, 0, sizeof(*m));
}
