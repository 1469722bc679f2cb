/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint coordinator.  It triggers checkpoints at the sources,
 * collects one acknowledgement per task, writes the metadata atomically
 * (the commit point), notifies tasks that the checkpoint completed, aborts
 * checkpoints that time out or that a task declines, and keeps the last K
 * completed checkpoints.  See README.md.
 *
 * DESIGN NOTES
 *
 *   (none) --trigger--> PENDING --all acks--> COMMITTING --metadata
 *                          |                      |        renamed--> COMPLETED
 *                          +--timeout/decline-----+--write failed--> ABORTED
 *                          +--attempt ends------------------------> ABORTED
 *
 *   transition           function
 *   trigger              coord_trigger_locked()
 *   ack                  sl__coord_ack()
 *   commit               commit() on the coordinator thread
 *   abort                abort_locked(); files deleted once no async
 *                        write of that checkpoint is in flight
 *
 * Invariants:
 *  K1. A checkpoint is COMPLETED only after every task acknowledged it and
 *      its metadata was renamed into place (sl__ckpt_write_meta).
 *  K2. Ids increase across triggers, attempts and processes (the first id
 *      follows the largest chk-N on disk).
 *  K3. "complete N" is sent after K1 holds for N; tasks treat it as
 *      covering every pending id <= N.
 *  K4. No checkpoint is triggered after a task of the attempt finished
 *      (its acknowledgement could never come), and pending ones abort.
 *
 * Threads: one coordinator thread per attempt (triggers, timeouts,
 * commits); acks and declines arrive from task and I/O threads.  Every
 * field below `lock` is protected by it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "core/inject.h"
#include "runtime/runtime.h"

#define MAX_HISTORY 64

typedef enum pstate_e { P_PENDING = 0, P_COMMITTING, P_DONE } pstate_t;

typedef struct pending_s {
  uint64_t id;
  int64_t trigger_ns;      /* monotonic */
  int64_t trigger_real_ns; /* the scheduler's clock, for barrier delays */
  pstate_t state;
  bool is_aborted;
  int abort_rc;
  uint32_t n_acks;
  bool *acked;             /* per task */
  uint32_t n_io;           /* async writes in flight */
  sl_ckpt_meta_t meta;     /* ops[i].subtasks filled by acks */
  sl_checkpoint_stats_t stats;
  sl_checkpoint_task_stats_t *task_stats; /* per task */
  struct pending_s *next;
} pending_t;

struct sl_coord_s {
  sl_checkpoint_config_t cfg;
  char *dir;
  char *job;
  char *jobdir;
  uint32_t max_parallelism;
  pthread_mutex_t lock;
  pthread_cond_t cond;      /* the coordinator thread's wake-up */
  pthread_cond_t done_cond; /* waiters of sl__coord_wait */
  /* Protected by lock. */
  uint64_t next_id;
  uint64_t latest_completed;
  int64_t last_end_ns;      /* for min_pause */
  int64_t next_trigger_ns;
  pending_t *pending;
  sl_task_t **tasks;
  uint32_t n_tasks;
  sl_coord_op_t *ops;
  uint32_t n_ops;
  sl_io_pool_t *io;
  bool is_attached;
  bool is_stopping;
  bool has_finished_task;
  sl_checkpoint_stats_t history[MAX_HISTORY];
  sl_checkpoint_task_stats_t *history_tasks[MAX_HISTORY]; /* owned */
  uint32_t history_n_tasks[MAX_HISTORY];
  uint32_t n_history;
  pthread_t thread;
  bool has_thread;
};

static int64_t now_ns(void) { return sl__clock_monotonic_ns(); }

char *sl__coord_ckpt_dir(const sl_coord_t *c, uint64_t id) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  if (sl_bytes_printf(&b, "%s/chk-%llu", c->jobdir, (unsigned long long)id) !=
      SL_OK) {
    sl_bytes_close(&b);
    return NULL;
  }
  return (char *)b.data;
}

const char *sl__coord_job_dir(const sl_coord_t *c) { return c->jobdir; }

int sl__coord_create(const sl_checkpoint_config_t *cfg, const char *job,
                     uint32_t max_parallelism, sl_coord_t **out,
                     sl_error_t **out_err) {
  sl_coord_t *c = sl_calloc(1, sizeof(*c));
  if (c == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  c->cfg = *cfg;
  if (c->cfg.timeout_ms <= 0) c->cfg.timeout_ms = 600000;
  if (c->cfg.max_concurrent == 0) c->cfg.max_concurrent = 1;
  if (c->cfg.retain == 0) c->cfg.retain = 3;
  c->dir = sl_strdup(cfg->dir);
  c->job = sl_strdup(job);
  c->max_parallelism = max_parallelism;
  sl_bytes_t jd;
  sl_bytes_init(&jd);
  sl_bytes_printf(&jd, "%s/%s", cfg->dir, job);
  c->jobdir = (char *)jd.data;
  pthread_mutex_init(&c->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cond, &ca);
  pthread_cond_init(&c->done_cond, &ca);
  pthread_condattr_destroy(&ca);
  c->cfg.dir = c->dir;
  if (c->dir == NULL || c->job == NULL || c->jobdir == NULL) {
    sl__coord_destroy(c);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  int rc = sl__ckpt_mkdirs(c->jobdir, out_err);
  uint64_t *ids = NULL;
  uint32_t n = 0;
  if (rc == SL_OK) rc = sl__ckpt_list(c->jobdir, &ids, &n, out_err);
  if (rc != SL_OK) {
    sl__coord_destroy(c);
    return rc;
  }
  c->next_id = n ? ids[n - 1] + 1 : 1; /* K2 */
  sl_free(ids);
  *out = c;
  return SL_OK;
}

static void pending_free(pending_t *p) {
  sl__ckpt_meta_clear(&p->meta);
  sl_free(p->acked);
  sl_free(p->task_stats);
  sl_free(p);
}

/* Keep the stats of p (its per-task stats move to the history). */
static void record_history_locked(sl_coord_t *c, pending_t *p) {
  if (c->n_history == MAX_HISTORY) {
    sl_free(c->history_tasks[0]);
    memmove(&c->history[0], &c->history[1],
            (MAX_HISTORY - 1) * sizeof(c->history[0]));
    memmove(&c->history_tasks[0], &c->history_tasks[1],
            (MAX_HISTORY - 1) * sizeof(c->history_tasks[0]));
    memmove(&c->history_n_tasks[0], &c->history_n_tasks[1],
            (MAX_HISTORY - 1) * sizeof(c->history_n_tasks[0]));
    c->n_history--;
  }
  c->history[c->n_history] = p->stats;
  c->history_tasks[c->n_history] = p->task_stats;
  c->history_n_tasks[c->n_history] = c->n_tasks;
  p->task_stats = NULL;
  c->n_history++;
  pthread_cond_broadcast(&c->done_cond);
}

static void unlink_pending_locked(sl_coord_t *c, pending_t *p) {
  for (pending_t **pp = &c->pending; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      return;
    }
}

/* Free an aborted checkpoint once no async write can still touch it. */
static void maybe_reap_locked(sl_coord_t *c, pending_t *p) {
  if (!p->is_aborted || p->n_io > 0 || p->state == P_COMMITTING) return;
  unlink_pending_locked(c, p);
  char *dir = sl__coord_ckpt_dir(c, p->id);
  if (dir) sl__ckpt_remove_dir(dir);
  sl_free(dir);
  pending_free(p);
}

static void abort_locked(sl_coord_t *c, pending_t *p, int rc,
                         const char *why) {
  if (p->is_aborted || p->state == P_DONE) return;
  p->is_aborted = true;
  p->abort_rc = rc ? rc : SL_ECANCELED;
  p->stats.result = p->abort_rc;
  p->stats.duration_ns = now_ns() - p->trigger_ns;
  sl_log(SL_LOG_WARN, "checkpoint %llu aborted: %s",
         (unsigned long long)p->id, why);
  record_history_locked(c, p);
  for (uint32_t i = 0; i < c->n_tasks; i++)
    sl__task_checkpoint_aborted(c->tasks[i], p->id);
  c->last_end_ns = now_ns();
  maybe_reap_locked(c, p);
}

static pending_t *find_locked(sl_coord_t *c, uint64_t id) {
  for (pending_t *p = c->pending; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static uint32_t n_active_locked(const sl_coord_t *c) {
  uint32_t n = 0;
  for (pending_t *p = c->pending; p; p = p->next)
    if (!p->is_aborted) n++;
  return n;
}

static int trigger_locked(sl_coord_t *c, uint64_t *out_id,
                          sl_error_t **out_err) {
  if (!c->is_attached)
    return sl_error_set(out_err, SL_ESTATE, "the job is not running");
  if (c->has_finished_task)
    return sl_error_set(out_err, SL_ESTATE,
                        "a task has finished; no checkpoint can complete");
  if (n_active_locked(c) >= c->cfg.max_concurrent)
    return sl_error_set(out_err, SL_EAGAIN,
                        "%u checkpoint(s) already in flight",
                        c->cfg.max_concurrent);
  int rc = SL_INJECT("coordinator.before_trigger");
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "injected failure before a trigger");
  pending_t *p = sl_calloc(1, sizeof(*p));
  if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  p->acked = sl_calloc(c->n_tasks + 1, sizeof(bool));
  p->task_stats = sl_calloc(c->n_tasks + 1, sizeof(*p->task_stats));
  p->meta.ops = sl_calloc(c->n_ops + 1, sizeof(sl_ckpt_op_t));
  p->meta.job = sl_strdup(c->job);
  if (!p->acked || !p->task_stats || !p->meta.ops || !p->meta.job) {
    pending_free(p);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < c->n_ops; i++) {
    p->meta.ops[i].uid = sl_strdup(c->ops[i].uid);
    p->meta.ops[i].parallelism = c->ops[i].parallelism;
    p->meta.ops[i].subtasks =
        sl_calloc(c->ops[i].parallelism + 1, sizeof(sl_ckpt_subtask_t));
    p->meta.ops[i].n_subtasks = c->ops[i].parallelism;
    for (uint32_t k = 0; p->meta.ops[i].subtasks && k < c->ops[i].parallelism; k++) {
      p->meta.ops[i].subtasks[k].subtask = k;
      p->meta.ops[i].subtasks[k].kg_start = 1; /* no key groups until acked */
    }
    p->meta.n_ops++;
    if (!p->meta.ops[i].uid || !p->meta.ops[i].subtasks) {
      pending_free(p);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
  }
  p->id = c->next_id++;
  p->meta.id = p->id;
  p->meta.max_parallelism = c->max_parallelism;
  p->meta.mode = (uint8_t)c->cfg.mode;
  p->meta.kind = SL_CKPT_KIND_CHECKPOINT;
  p->trigger_ns = now_ns();
  p->trigger_real_ns = sl__clock_realtime_ns();
  p->stats.id = p->id;
  p->stats.trigger_ns = p->trigger_ns;
  char *dir = sl__coord_ckpt_dir(c, p->id);
  rc = dir ? sl__ckpt_mkdirs(dir, out_err) : SL_ENOMEM;
  sl_free(dir);
  if (rc != SL_OK) {
    pending_free(p);
    return rc;
  }
  p->next = c->pending;
  c->pending = p;
  pthread_cond_signal(&c->cond); /* its timeout is the next deadline */
  for (uint32_t i = 0; i < c->n_tasks; i++)
    sl__task_trigger_checkpoint(c->tasks[i], p->id);
  if (out_id) *out_id = p->id;
  return SL_OK;
}

int sl__coord_trigger(sl_coord_t *c, uint64_t *out_id, sl_error_t **out_err) {
  pthread_mutex_lock(&c->lock);
  int rc = trigger_locked(c, out_id, out_err);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

void sl__coord_io_begin(sl_coord_t *c, uint64_t id) {
  pthread_mutex_lock(&c->lock);
  pending_t *p = find_locked(c, id);
  if (p) p->n_io++;
  pthread_mutex_unlock(&c->lock);
}

static void free_subs(sl_ckpt_subtask_t *subs, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) sl__ckpt_subtask_clear(&subs[i]);
  sl_free(subs);
}

void sl__coord_ack(sl_coord_t *c, uint64_t id, uint32_t task,
                   sl_ckpt_subtask_t *subs, const uint32_t *op_index,
                   uint32_t n, const sl_ckpt_task_stats_t *st,
                   bool is_async) {
  pthread_mutex_lock(&c->lock);
  pending_t *p = find_locked(c, id);
  if (p && is_async && p->n_io > 0) p->n_io--;
  if (p == NULL || p->is_aborted || task >= c->n_tasks || p->acked[task]) {
    if (p) maybe_reap_locked(c, p);
    pthread_mutex_unlock(&c->lock);
    free_subs(subs, n);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    sl_ckpt_op_t *op = &p->meta.ops[op_index[i]];
    uint32_t s = subs[i].subtask;
    if (s < op->parallelism) {
      sl__ckpt_subtask_clear(&op->subtasks[s]);
      op->subtasks[s] = subs[i];
      memset(&subs[i], 0, sizeof(subs[i]));
    }
  }
  if (st) {
    sl_checkpoint_stats_t *x = &p->stats;
    x->bytes += st->bytes;
    x->channel_bytes += st->channel_bytes;
    /* Tasks report when their first barrier arrived, on the scheduler's
     * clock (which is the realtime clock of the worker pool). */
    int64_t delay = st->barrier_delay_ns - p->trigger_real_ns;
    if (delay < 0) delay = 0;
    if (delay > x->max_barrier_delay_ns) x->max_barrier_delay_ns = delay;
    sl_checkpoint_task_stats_t *ts = &p->task_stats[task];
    ts->task = task;
    ts->barrier_delay_ns = delay;
    ts->alignment_ns = st->alignment_ns;
    ts->sync_ns = st->sync_ns;
    ts->async_ns = st->async_ns;
    ts->bytes = st->bytes;
    ts->channel_bytes = st->channel_bytes;
    ts->is_unaligned = st->is_unaligned;
    ts->has_acked = true;
    if (st->alignment_ns > x->max_alignment_ns)
      x->max_alignment_ns = st->alignment_ns;
    if (st->sync_ns > x->max_sync_ns) x->max_sync_ns = st->sync_ns;
    if (st->async_ns > x->max_async_ns) x->max_async_ns = st->async_ns;
    if (st->is_unaligned) x->is_unaligned = true;
  }
  p->acked[task] = true;
  if (++p->n_acks == c->n_tasks) pthread_cond_signal(&c->cond);
  pthread_mutex_unlock(&c->lock);
  free_subs(subs, n);
}

void sl__coord_decline(sl_coord_t *c, uint64_t id, sl_error_t *err,
                       bool is_async) {
  pthread_mutex_lock(&c->lock);
  pending_t *p = find_locked(c, id);
  if (p) {
    if (is_async && p->n_io > 0) p->n_io--;
    /* abort_locked reaps p when nothing else is in flight (p may be gone
     * after it); an already aborted p may now be reapable. */
    if (!p->is_aborted && p->state != P_DONE)
      abort_locked(c, p, sl_error_code(err),
                   err ? sl_error_message(err) : "declined by a task");
    else
      maybe_reap_locked(c, p);
  }
  pthread_mutex_unlock(&c->lock);
  sl_error_destroy(err);
}

void sl__coord_task_finished(sl_coord_t *c, uint64_t last_snapshot) {
  pthread_mutex_lock(&c->lock);
  c->has_finished_task = true;
  /* Checkpoints the task already took stay valid (its ack may still be on
   * its way); later ones can never get its ack. */
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    if (p->state == P_PENDING && p->id > last_snapshot)
      abort_locked(c, p, SL_ECANCELED,
                   "a task finished before taking it");
  }
  pthread_mutex_unlock(&c->lock);
}

/* Delete completed checkpoints beyond the retained ones, and directories
 * without metadata older than the newest completed one (garbage of aborted
 * or crashed attempts). */
static void retain_locked(sl_coord_t *c) {
  uint64_t *ids;
  uint32_t n;
  if (sl__ckpt_list(c->jobdir, &ids, &n, NULL) != SL_OK) return;
  uint32_t kept = 0;
  for (uint32_t i = n; i-- > 0;) {
    if (find_locked(c, ids[i])) continue;
    char *dir = sl__coord_ckpt_dir(c, ids[i]);
    if (dir == NULL) continue;
    sl_bytes_t m;
    sl_bytes_init(&m);
    sl_bytes_printf(&m, "%s/_metadata", dir);
    bool is_complete = m.data && access((char *)m.data, F_OK) == 0;
    sl_bytes_close(&m);
    if (is_complete && kept < c->cfg.retain) kept++;
    else if (is_complete || ids[i] < c->latest_completed) sl__ckpt_remove_dir(dir);
    sl_free(dir);
  }
  sl_free(ids);
}

/* Coordinator thread: write the metadata of p (lock released meanwhile). */
static void commit_locked(sl_coord_t *c, pending_t *p) {
  p->state = P_COMMITTING;
  p->meta.time_ns = sl__clock_realtime_ns();
  char *dir = sl__coord_ckpt_dir(c, p->id);
  pthread_mutex_unlock(&c->lock);
  sl_error_t *err = NULL;
  int rc = dir ? sl__ckpt_write_meta(dir, &p->meta, &err) : SL_ENOMEM;
  pthread_mutex_lock(&c->lock);
  sl_free(dir);
  p->state = P_PENDING;
  if (rc != SL_OK || p->is_aborted) {
    p->is_aborted = false; /* let abort_locked record it */
    abort_locked(c, p, rc != SL_OK ? rc : SL_ECANCELED,
                 err ? sl_error_message(err) : "aborted while committing");
    sl_error_destroy(err);
    return;
  }
  /* K1 holds: completed.  K3: notify every task. */
  p->state = P_DONE;
  p->stats.result = SL_OK;
  p->stats.duration_ns = now_ns() - p->trigger_ns;
  if (p->id > c->latest_completed) c->latest_completed = p->id;
  record_history_locked(c, p);
  c->last_end_ns = now_ns();
  if (SL_INJECT("coordinator.before_complete_notify") == SL_OK) {
    for (uint32_t i = 0; i < c->n_tasks; i++)
      sl__task_checkpoint_complete(c->tasks[i], p->id);
  }
  unlink_pending_locked(c, p);
  /* Older pending checkpoints are subsumed. */
  for (pending_t *q = c->pending, *n; q; q = n) {
    n = q->next;
    if (q->id < p->id && !q->is_aborted)
      abort_locked(c, q, SL_ECANCELED, "subsumed by a newer checkpoint");
  }
  pending_free(p);
  retain_locked(c);
}

static void *coord_main(void *arg) {
  sl_coord_t *c = arg;
  pthread_mutex_lock(&c->lock);
  while (!c->is_stopping) {
    int64_t now = now_ns();
    int64_t wake = now + 1000000000ll;
    pending_t *ready = NULL;
    for (pending_t *p = c->pending, *n; p; p = n) {
      n = p->next;
      if (p->is_aborted || p->state != P_PENDING) continue;
      int64_t deadline = p->trigger_ns + c->cfg.timeout_ms * 1000000ll;
      if (p->n_acks == c->n_tasks) {
        ready = p;
      } else if (now >= deadline) {
        char why[96];
        snprintf(why, sizeof(why), "expired after %lld ms",
                 (long long)c->cfg.timeout_ms);
        abort_locked(c, p, SL_ECANCELED, why);
      } else if (deadline < wake) {
        wake = deadline;
      }
    }
    if (ready) {
      commit_locked(c, ready);
      continue;
    }
    if (c->cfg.interval_ms > 0 && !c->has_finished_task) {
      int64_t at = c->next_trigger_ns;
      int64_t pause_at = c->last_end_ns + c->cfg.min_pause_ms * 1000000ll;
      if (pause_at > at) at = pause_at;
      if (now >= at && n_active_locked(c) < c->cfg.max_concurrent) {
        sl_error_t *err = NULL;
        if (trigger_locked(c, NULL, &err) != SL_OK &&
            sl_error_code(err) != SL_EAGAIN)
          sl_log(SL_LOG_WARN, "cannot trigger a checkpoint: %s",
                 sl_error_message(err));
        sl_error_destroy(err);
        c->next_trigger_ns = now + c->cfg.interval_ms * 1000000ll;
        continue;
      }
      if (at < wake) wake = at;
    }
    struct timespec ts = {(time_t)(wake / 1000000000), (long)(wake % 1000000000)};
    pthread_cond_timedwait(&c->cond, &c->lock, &ts);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

int sl__coord_attach(sl_coord_t *c, sl_task_t **tasks, uint32_t n_tasks,
                     const sl_coord_op_t *ops, uint32_t n_ops,
                     sl_io_pool_t *io) {
  pthread_mutex_lock(&c->lock);
  c->tasks = tasks;
  c->n_tasks = n_tasks;
  sl_free(c->ops);
  c->ops = sl_calloc(n_ops + 1, sizeof(sl_coord_op_t));
  if (c->ops == NULL) {
    pthread_mutex_unlock(&c->lock);
    return SL_ENOMEM;
  }
  memcpy(c->ops, ops, n_ops * sizeof(sl_coord_op_t));
  c->n_ops = n_ops;
  c->io = io;
  c->is_attached = true;
  c->is_stopping = false;
  c->has_finished_task = false;
  c->next_trigger_ns = now_ns() + c->cfg.interval_ms * 1000000ll;
  pthread_mutex_unlock(&c->lock);
  if (pthread_create(&c->thread, NULL, coord_main, c) != 0) return SL_ENOMEM;
  c->has_thread = true;
  return SL_OK;
}

void sl__coord_detach(sl_coord_t *c) {
  pthread_mutex_lock(&c->lock);
  c->is_stopping = true;
  pthread_cond_signal(&c->cond);
  pthread_mutex_unlock(&c->lock);
  if (c->has_thread) pthread_join(c->thread, NULL);
  c->has_thread = false;
  pthread_mutex_lock(&c->lock);
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    if (!p->is_aborted) abort_locked(c, p, SL_ECANCELED, "the attempt ended");
  }
  /* The I/O pool was drained before detach: nothing is in flight. */
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    p->n_io = 0;
    maybe_reap_locked(c, p);
  }
  c->is_attached = false;
  c->tasks = NULL;
  c->n_tasks = 0;
  pthread_mutex_unlock(&c->lock);
}

void sl__coord_destroy(sl_coord_t *c) {
  if (c == NULL) return;
  for (uint32_t i = 0; i < c->n_history; i++) sl_free(c->history_tasks[i]);
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    pending_free(p);
  }
  sl_free(c->ops);
  sl_free(c->dir);
  sl_free(c->job);
  sl_free(c->jobdir);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->cond);
  pthread_cond_destroy(&c->done_cond);
  sl_free(c);
}

int sl__coord_wait(sl_coord_t *c, uint64_t id, int64_t timeout_ms,
                   sl_checkpoint_stats_t *out) {
  int64_t deadline = now_ns() + timeout_ms * 1000000ll;
  struct timespec ts = {(time_t)(deadline / 1000000000),
                        (long)(deadline % 1000000000)};
  pthread_mutex_lock(&c->lock);
  int rc = SL_EAGAIN;
  for (;;) {
    for (uint32_t i = 0; i < c->n_history; i++)
      if (c->history[i].id == id) {
        if (out) *out = c->history[i];
        rc = c->history[i].result;
        goto out;
      }
    if (pthread_cond_timedwait(&c->done_cond, &c->lock, &ts) == ETIMEDOUT)
      break;
  }
out:
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int sl__coord_last(sl_coord_t *c, sl_checkpoint_stats_t *out) {
  pthread_mutex_lock(&c->lock);
  int rc = SL_ENOTFOUND;
  for (uint32_t i = c->n_history; i-- > 0;)
    if (c->history[i].result == SL_OK) {
      *out = c->history[i];
      rc = SL_OK;
      break;
    }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

uint64_t sl__coord_latest(sl_coord_t *c) {
  pthread_mutex_lock(&c->lock);
  uint64_t id = c->latest_completed;
  pthread_mutex_unlock(&c->lock);
  return id;
}

bool sl__coord_is_pending(sl_coord_t *c, uint64_t id) {
  pthread_mutex_lock(&c->lock);
  pending_t *p = find_locked(c, id);
  bool r = p && !p->is_aborted;
  pthread_mutex_unlock(&c->lock);
  return r;
}

uint32_t sl__coord_history(sl_coord_t *c, sl_checkpoint_stats_t *out,
                           uint32_t max) {
  pthread_mutex_lock(&c->lock);
  uint32_t n = c->n_history < max ? c->n_history : max;
  memcpy(out, &c->history[c->n_history - n], n * sizeof(*out));
  pthread_mutex_unlock(&c->lock);
  return n;
}

int sl__coord_task_stats(sl_coord_t *c, uint64_t id,
                         sl_checkpoint_task_stats_t **out, uint32_t *out_n) {
  pthread_mutex_lock(&c->lock);
  int rc = SL_ENOTFOUND;
  for (uint32_t i = 0; i < c->n_history; i++) {
    if (c->history[i].id != id || c->history_tasks[i] == NULL) continue;
    uint32_t n = c->history_n_tasks[i];
    sl_checkpoint_task_stats_t *x = sl_calloc(n + 1, sizeof(*x));
    if (x == NULL) {
      rc = SL_ENOMEM;
      break;
    }
    memcpy(x, c->history_tasks[i], n * sizeof(*x));
    *out = x;
    *out_n = n;
    rc = SL_OK;
    break;
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}
