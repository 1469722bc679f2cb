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
 * A pending checkpoint goes through these states:
 *
 *   (none) --trigger--> TRIGGERING --dir made, id durable--> PENDING
 *                          |                                   |
 *                          | mkdir/high-water failed,          | all acks
 *                          | or aborted meanwhile              v
 *                          |                               COMMITTING
 *                          v                                /  |   \
 *   PENDING --timeout, decline, subsumed,-->  ABORTED <----'   |    `--> FAILED
 *              task finished, attempt end       |   write failed  |  write failed
 *                                               |   before the    |  after the
 *                                               |   rename        |  rename
 *                                               v                 v
 *                              (freed; directory removed)    COMPLETED
 *                                                          (freed; files kept
 *                                                           in both cases)
 *
 *   transition                     function
 *   (none) -> TRIGGERING           trigger_locked(), id taken under the lock
 *   TRIGGERING -> PENDING          trigger_locked(), after the high-water
 *                                  mark and the directory (lock released)
 *   TRIGGERING -> ABORTED          trigger_locked() on an error, or
 *                                  abort_locked() meanwhile
 *   PENDING -> ABORTED             abort_locked()
 *   PENDING -> COMMITTING          commit_locked() on the coordinator thread
 *   COMMITTING -> COMPLETED        commit_locked(): sl__ckpt_write_meta ok
 *   COMMITTING -> ABORTED          commit_locked(): failed before the rename
 *   COMMITTING -> FAILED           commit_locked(): failed after the rename
 *   ABORTED -> freed               reap_locked(), when no trigger, commit or
 *                                  async write still uses it; its directory
 *                                  is queued and removed by
 *                                  collect_garbage() without the lock
 *
 * What each state guarantees:
 *   TRIGGERING  the id is taken; no task knows it; no file exists yet.
 *   PENDING     the id is durable in the high-water mark and chk-N exists;
 *               sources were told to inject barriers.
 *   COMMITTING  every task acknowledged; the metadata is being written.
 *               Nobody but commit_locked() moves it on (K7).
 *   COMPLETED   _metadata is renamed and fsynced (the directory and the job
 *               directory too); tasks are told "complete N".
 *   ABORTED     _metadata was never renamed: the files are garbage (S1).
 *   FAILED      _metadata was renamed but a later step (fsync of the
 *               directory) failed: the checkpoint may be committed on disk,
 *               so its files are kept and it is not reported complete.
 *
 * Invariants:
 *  K1. A checkpoint is COMPLETED only after every task acknowledged it and
 *      its metadata was renamed into place (sl__ckpt_write_meta).
 *  K2. Ids increase across triggers, attempts and processes and are never
 *      reused, not even after a crash before the first completion: id N
 *      is used (directory, barriers) only after the high-water mark
 *      <dir>/<job>/_checkpoint_ids durably records >= N, and a new
 *      coordinator starts above max(high-water, largest chk-N).
 *  K3. "complete N" is sent after K1 holds for N; tasks treat it as
 *      covering every pending id <= N.
 *  K4. No checkpoint is triggered after a task of the attempt finished
 *      (its acknowledgement could never come), and pending ones abort.
 *  K5. Only an ABORTED checkpoint's directory is removed by the abort
 *      path; a checkpoint whose _metadata was renamed (COMPLETED or
 *      FAILED) is removed only by retention, never by a failure.
 *  K6. No file-system work (mkdir, fsync, scans, removal) happens while
 *      `lock` is held: task threads take it to acknowledge.  Checked by
 *      SL_ASSERT(!coord_is_locked()) in the functions that touch files.
 *  K7. A COMMITTING checkpoint leaves that state only in commit_locked().
 *  K8. A source enumerator's snapshot for N is taken (snapshot_enums)
 *      before any task is triggered for N, and is part of N's metadata.
 *
 * Threads: one coordinator thread per attempt (triggers, timeouts,
 * commits, garbage removal, retention); acks and declines arrive from
 * task and I/O threads; sl__coord_trigger from any thread.  Fields below
 * `lock` are protected by it, except where noted.
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

typedef enum pstate_e {
  P_TRIGGERING = 0,
  P_PENDING,
  P_COMMITTING,
  P_COMPLETED,
  P_ABORTED,
  P_FAILED
} pstate_t;

typedef struct pending_s {
  uint64_t id;
  int64_t trigger_ns;      /* monotonic */
  int64_t trigger_real_ns; /* the scheduler's clock, for barrier delays */
  pstate_t state;
  bool is_busy;            /* a trigger or commit works on it unlocked */
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
  pthread_cond_t cond;         /* the coordinator thread's wake-up */
  pthread_cond_t done_cond;    /* waiters of sl__coord_wait */
  pthread_cond_t trigger_cond; /* waiters for is_triggering */
  /* Owned by the thread that set is_triggering (one at a time). */
  uint64_t reserved_id;        /* the durable high-water mark */
  bool is_jobdir_durable;      /* <dir>/<job> fsynced into <dir> */
  /* Protected by lock. */
  uint64_t next_id;
  uint64_t latest_completed;
  int64_t last_end_ns;      /* for min_pause */
  int64_t next_trigger_ns;
  pending_t *pending;
  bool is_triggering;       /* a trigger works unlocked (serializes them) */
  uint64_t *garbage;        /* ids of ABORTED directories to remove */
  uint32_t n_garbage, cap_garbage;
  bool needs_retain;        /* a checkpoint completed: apply retention */
  sl_task_t **tasks;
  uint32_t n_tasks;
  sl_coord_op_t *ops;
  uint32_t n_ops;
  sl_io_pool_t *io;
  bool is_attached;
  bool is_stopping;
  bool has_finished_task;
  /* Final checkpoint (two-phase-commit sinks, runtime/task.c): source
   * tasks of the attempt, those that read all their splits, and the id
   * of the final checkpoint once triggered (0: none). */
  uint32_t n_sources;
  uint32_t n_sources_ended;
  uint64_t final_id;
  sl_checkpoint_stats_t history[MAX_HISTORY];
  sl_checkpoint_task_stats_t *history_tasks[MAX_HISTORY]; /* owned */
  uint32_t history_n_tasks[MAX_HISTORY];
  uint32_t n_history;
  pthread_t thread;
  bool has_thread;
};

static int64_t now_ns(void) { return sl__clock_monotonic_ns(); }

/* Lock wrappers that count, per thread, whether a coordinator's lock is
 * held, so that K6 can be asserted where files are touched. */
static _Thread_local int n_coord_locks;
static void coord_lock(sl_coord_t *c) {
  pthread_mutex_lock(&c->lock);
  n_coord_locks++;
}
static void coord_unlock(sl_coord_t *c) {
  n_coord_locks--;
  pthread_mutex_unlock(&c->lock);
}
static void coord_wait(sl_coord_t *c, pthread_cond_t *cv) {
  n_coord_locks--;
  pthread_cond_wait(cv, &c->lock);
  n_coord_locks++;
}
static int coord_timedwait(sl_coord_t *c, pthread_cond_t *cv,
                           const struct timespec *ts) {
  n_coord_locks--;
  int rc = pthread_cond_timedwait(cv, &c->lock, ts);
  n_coord_locks++;
  return rc;
}
/* For SL_ASSERT only (unused in release builds). */
__attribute__((unused)) static bool coord_is_locked(void) {
  return n_coord_locks > 0;
}

char *sl__coord_ckpt_dir(const sl_coord_t *c, uint64_t id) {
  sl_acc_t b;
  sl__acc_init(&b);
  sl__acc_printf(&b, "%s/chk-%llu", c->jobdir, (unsigned long long)id);
  uint8_t *dir;
  size_t len;
  if (sl__acc_finish(&b, &dir, &len) != SL_OK) return NULL;
  return (char *)dir;
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
  sl_acc_t jd;
  sl__acc_init(&jd);
  sl__acc_printf(&jd, "%s/%s", cfg->dir, job);
  size_t jlen;
  uint8_t *jdata = NULL;
  if (sl__acc_finish(&jd, &jdata, &jlen) == SL_OK) c->jobdir = (char *)jdata;
  pthread_mutex_init(&c->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cond, &ca);
  pthread_cond_init(&c->done_cond, &ca);
  pthread_cond_init(&c->trigger_cond, &ca);
  pthread_condattr_destroy(&ca);
  c->cfg.dir = c->dir;
  if (c->dir == NULL || c->job == NULL || c->jobdir == NULL) {
    sl__coord_destroy(c);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  int rc = sl__ckpt_mkdirs(c->jobdir, out_err);
  if (rc == SL_OK) /* K2 */
    rc = sl__ckpt_next_id(c->jobdir, &c->next_id, &c->reserved_id, out_err);
  if (rc != SL_OK) {
    sl__coord_destroy(c);
    return rc;
  }
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

static bool is_active(const pending_t *p) {
  return p->state == P_TRIGGERING || p->state == P_PENDING ||
         p->state == P_COMMITTING;
}

/* Free an ABORTED checkpoint once no trigger, commit or async write can
 * still touch it; its directory is queued for collect_garbage (K5, K6). */
static void reap_locked(sl_coord_t *c, pending_t *p) {
  if (p->state != P_ABORTED || p->n_io > 0 || p->is_busy) return;
  unlink_pending_locked(c, p);
  if (c->n_garbage == c->cap_garbage) {
    uint32_t cap = c->cap_garbage ? c->cap_garbage * 2 : 8;
    uint64_t *g = sl_realloc(c->garbage, cap * sizeof(uint64_t));
    if (g) {
      c->garbage = g;
      c->cap_garbage = cap;
    }
  }
  if (c->n_garbage < c->cap_garbage) {
    c->garbage[c->n_garbage++] = p->id;
    pthread_cond_signal(&c->cond);
  } else { /* harmless: without _metadata it is garbage (S1) */
    sl_log(SL_LOG_WARN, "out of memory: the directory of aborted checkpoint "
           "%llu is left in place", (unsigned long long)p->id);
  }
  pending_free(p);
}

/*
 * The enumerators' snapshots for p, without the lock (an enumerator may
 * take a while) and before any source is triggered for p (K8): each
 * closes its event gateway at p->id (checkpoint/enum_host.c).  p is
 * TRIGGERING and busy, so nothing else touches its metadata meanwhile.
 */
static int snapshot_enums(sl_coord_t *c, pending_t *p, sl_error_t **out_err) {
  SL_ASSERT(!coord_is_locked());
  /* A stuck enumerator must not hold the trigger (and with it this
   * thread) forever: the wait ends with the checkpoint's timeout, and the
   * checkpoint is aborted with that reason. */
  int64_t deadline = p->trigger_ns + c->cfg.timeout_ms * 1000000ll;
  for (uint32_t i = 0; i < c->n_ops; i++) {
    if (c->ops[i].enum_host == NULL) continue;
    sl_bytes_t b;
    sl_bytes_init(&b);
    int rc = sl__enum_host_snapshot_until(c->ops[i].enum_host, p->id,
                                          deadline, &b, out_err);
    if (rc != SL_OK) {
      sl_bytes_close(&b);
      return rc;
    }
    sl_ckpt_op_t *op = &p->meta.ops[i];
    op->has_enum_state = true;
    op->enum_state = b.data; /* moved */
    op->enum_state_len = b.len;
  }
  return SL_OK;
}

/* Tell the enumerators that checkpoint id completed or aborted. */
static void notify_enums_locked(sl_coord_t *c, uint64_t id, bool is_ok) {
  for (uint32_t i = 0; i < c->n_ops; i++) {
    if (c->ops[i].enum_host == NULL) continue;
    if (is_ok) sl__enum_host_checkpoint_complete(c->ops[i].enum_host, id);
    else sl__enum_host_checkpoint_aborted(c->ops[i].enum_host, id);
  }
}

/* TRIGGERING or PENDING -> ABORTED.  No-op in other states: a COMMITTING
 * checkpoint's outcome belongs to commit_locked() (K7), and a renamed
 * _metadata is never deleted by a failure (K5). */
static void abort_locked(sl_coord_t *c, pending_t *p, int rc,
                         const char *why) {
  if (p->state != P_TRIGGERING && p->state != P_PENDING) return;
  bool was_published = p->state == P_PENDING;
  p->state = P_ABORTED;
  p->abort_rc = rc ? rc : SL_ECANCELED;
  p->stats.result = p->abort_rc;
  p->stats.duration_ns = now_ns() - p->trigger_ns;
  sl_log(SL_LOG_WARN, "checkpoint %llu aborted: %s",
         (unsigned long long)p->id, why);
  record_history_locked(c, p);
  /* Tasks never heard of a checkpoint still triggering; an abort notice
   * would also cancel their older ones (they treat it as "<= id"). */
  for (uint32_t i = 0; was_published && i < c->n_tasks; i++)
    sl__task_checkpoint_aborted(c->tasks[i], p->id);
  notify_enums_locked(c, p->id, false); /* their gateways reopen */
  if (p->id == c->final_id) c->final_id = 0; /* may be triggered again */
  c->last_end_ns = now_ns();
  reap_locked(c, p);
}

static pending_t *find_locked(sl_coord_t *c, uint64_t id) {
  for (pending_t *p = c->pending; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static uint32_t n_active_locked(const sl_coord_t *c) {
  uint32_t n = 0;
  for (pending_t *p = c->pending; p; p = p->next)
    if (is_active(p)) n++;
  return n;
}

/* File-system half of a trigger, without the lock (K6): record id in the
 * high-water mark (K2), then make its directory. */
static int trigger_files(sl_coord_t *c, uint64_t id, sl_error_t **out_err) {
  SL_ASSERT(!coord_is_locked());
  int rc = SL_OK;
  if (id > c->reserved_id) {
    rc = sl__ckpt_write_high_water(c->jobdir, id, !c->is_jobdir_durable,
                                   out_err);
    if (rc != SL_OK) return rc;
    c->reserved_id = id;
    c->is_jobdir_durable = true;
  }
  char *dir = sl__coord_ckpt_dir(c, id);
  rc = dir ? sl__ckpt_mkdirs(dir, out_err)
           : sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl_free(dir);
  return rc;
}

static pending_t *pending_new_locked(sl_coord_t *c) {
  pending_t *p = sl_calloc(1, sizeof(*p));
  if (p == NULL) return NULL;
  p->acked = sl_calloc(c->n_tasks + 1, sizeof(bool));
  p->task_stats = sl_calloc(c->n_tasks + 1, sizeof(*p->task_stats));
  p->meta.ops = sl_calloc(c->n_ops + 1, sizeof(sl_ckpt_op_t));
  p->meta.job = sl_strdup(c->job);
  if (!p->acked || !p->task_stats || !p->meta.ops || !p->meta.job) {
    pending_free(p);
    return NULL;
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
      return NULL;
    }
  }
  return p;
}

/* Called and returns with the lock held; releases it while the file
 * system is touched.  Triggers are serialized by is_triggering, so ids
 * are published to the sources in increasing order. */
static int trigger_locked(sl_coord_t *c, uint64_t *out_id,
                          sl_error_t **out_err) {
  while (c->is_triggering) coord_wait(c, &c->trigger_cond);
  if (!c->is_attached)
    return sl_error_set(out_err, SL_ESTATE, "the job is not running");
  if (c->has_finished_task)
    return sl_error_set(out_err, SL_ESTATE,
                        "a task has finished; no checkpoint can complete");
  if (c->final_id != 0)
    return sl_error_set(out_err, SL_EAGAIN, "the final checkpoint %llu is "
                        "in flight", (unsigned long long)c->final_id);
  if (n_active_locked(c) >= c->cfg.max_concurrent)
    return sl_error_set(out_err, SL_EAGAIN,
                        "%u checkpoint(s) already in flight",
                        c->cfg.max_concurrent);
  int rc = SL_INJECT("coordinator.before_trigger");
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "injected failure before a trigger");
  if (c->next_id > SL_CKPT_MAX_ID)
    return sl_error_set(out_err, SL_EOVERFLOW, "checkpoint ids of '%s' are "
                        "exhausted", c->jobdir);
  pending_t *p = pending_new_locked(c);
  if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  p->id = c->next_id++;
  p->state = P_TRIGGERING;
  p->is_busy = true;
  p->meta.id = p->id;
  p->meta.max_parallelism = c->max_parallelism;
  p->meta.mode = (uint8_t)c->cfg.mode;
  p->meta.kind = SL_CKPT_KIND_CHECKPOINT;
  p->trigger_ns = now_ns();
  p->trigger_real_ns = sl__clock_realtime_ns();
  p->stats.id = p->id;
  p->stats.trigger_ns = p->trigger_ns;
  p->next = c->pending;
  c->pending = p;
  c->is_triggering = true;
  coord_unlock(c);
  sl_error_t *err = NULL;
  rc = trigger_files(c, p->id, &err);
  SL_ASSERT(rc != SL_OK || p->id <= c->reserved_id); /* K2 */
  if (rc == SL_OK) rc = snapshot_enums(c, p, &err); /* K8 */
  coord_lock(c);
  c->is_triggering = false;
  pthread_cond_broadcast(&c->trigger_cond);
  p->is_busy = false;
  if (rc != SL_OK) {
    /* abort_locked reaps p; an attempt that ended meanwhile already
     * aborted it, and then only the reaping is left. */
    if (p->state == P_TRIGGERING)
      abort_locked(c, p, rc, sl_error_message(err));
    else
      reap_locked(c, p);
    if (out_err && *out_err == NULL) *out_err = err;
    else sl_error_destroy(err);
    return rc;
  }
  if (p->state != P_TRIGGERING) { /* aborted meanwhile (attempt ended) */
    uint64_t id = p->id;
    reap_locked(c, p);
    return sl_error_set(out_err, SL_ECANCELED, "checkpoint %llu was aborted "
                        "while it was triggered", (unsigned long long)id);
  }
  p->state = P_PENDING;
  pthread_cond_signal(&c->cond); /* its timeout is the next deadline */
  if (c->n_sources > 0 && c->n_sources_ended == c->n_sources) {
    /* Every source ended: this is the final checkpoint.  Tasks learn it
     * before the sources see the trigger. */
    c->final_id = p->id;
    for (uint32_t i = 0; i < c->n_tasks; i++)
      sl__task_set_final_checkpoint(c->tasks[i], p->id);
  }
  for (uint32_t i = 0; i < c->n_tasks; i++)
    sl__task_trigger_checkpoint(c->tasks[i], p->id);
  if (out_id) *out_id = p->id;
  return SL_OK;
}

int sl__coord_trigger(sl_coord_t *c, uint64_t *out_id, sl_error_t **out_err) {
  coord_lock(c);
  int rc = trigger_locked(c, out_id, out_err);
  coord_unlock(c);
  return rc;
}

void sl__coord_io_begin(sl_coord_t *c, uint64_t id) {
  coord_lock(c);
  pending_t *p = find_locked(c, id);
  if (p) p->n_io++;
  coord_unlock(c);
}

static void free_subs(sl_ckpt_subtask_t *subs, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) sl__ckpt_subtask_clear(&subs[i]);
  sl_free(subs);
}

void sl__coord_ack(sl_coord_t *c, uint64_t id, uint32_t task,
                   sl_ckpt_subtask_t *subs, const uint32_t *op_index,
                   uint32_t n, const sl_ckpt_task_stats_t *st,
                   bool is_async) {
  coord_lock(c);
  pending_t *p = find_locked(c, id);
  if (p && is_async && p->n_io > 0) p->n_io--;
  if (p == NULL || p->state != P_PENDING || task >= c->n_tasks ||
      p->acked[task]) {
    if (p) reap_locked(c, p);
    coord_unlock(c);
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
  coord_unlock(c);
  free_subs(subs, n);
}

void sl__coord_decline(sl_coord_t *c, uint64_t id, sl_error_t *err,
                       bool is_async) {
  coord_lock(c);
  pending_t *p = find_locked(c, id);
  if (p) {
    if (is_async && p->n_io > 0) p->n_io--;
    /* abort_locked reaps p when nothing else is in flight (p may be gone
     * after it); an already aborted p may now be reapable. */
    if (p->state == P_TRIGGERING || p->state == P_PENDING)
      abort_locked(c, p, sl_error_code(err),
                   err ? sl_error_message(err) : "declined by a task");
    else
      reap_locked(c, p);
  }
  coord_unlock(c);
  sl_error_destroy(err);
}

void sl__coord_source_ended(sl_coord_t *c) {
  coord_lock(c);
  if (c->n_sources_ended < c->n_sources) c->n_sources_ended++;
  pthread_cond_signal(&c->cond); /* may trigger the final checkpoint */
  coord_unlock(c);
}

int sl__coord_reserve_id(sl_coord_t *c, uint64_t *out_id,
                         sl_error_t **out_err) {
  coord_lock(c);
  while (c->is_triggering) coord_wait(c, &c->trigger_cond);
  if (c->next_id > SL_CKPT_MAX_ID) {
    coord_unlock(c);
    return sl_error_set(out_err, SL_EOVERFLOW, "checkpoint ids of '%s' are "
                        "exhausted", c->jobdir);
  }
  uint64_t id = c->next_id++;
  c->is_triggering = true; /* owns reserved_id */
  coord_unlock(c);
  int rc = SL_OK;
  if (id > c->reserved_id) { /* K2: durable before use */
    rc = sl__ckpt_write_high_water(c->jobdir, id, !c->is_jobdir_durable,
                                   out_err);
    if (rc == SL_OK) {
      c->reserved_id = id;
      c->is_jobdir_durable = true;
    }
  }
  coord_lock(c);
  c->is_triggering = false;
  pthread_cond_broadcast(&c->trigger_cond);
  coord_unlock(c);
  if (rc == SL_OK) *out_id = id;
  return rc;
}

void sl__coord_task_finished(sl_coord_t *c, uint64_t last_snapshot) {
  coord_lock(c);
  c->has_finished_task = true;
  /* Checkpoints the task already took stay valid (its ack may still be on
   * its way); later ones can never get its ack. */
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    if ((p->state == P_PENDING || p->state == P_TRIGGERING) &&
        p->id > last_snapshot)
      abort_locked(c, p, SL_ECANCELED,
                   "a task finished before taking it");
  }
  coord_unlock(c);
}

/* Remove the directories of reaped ABORTED checkpoints.  Called with the
 * lock held; releases it meanwhile (K6). */
static void collect_garbage_locked(sl_coord_t *c) {
  while (c->n_garbage > 0) {
    uint64_t id = c->garbage[--c->n_garbage];
    coord_unlock(c);
    SL_ASSERT(!coord_is_locked());
    char *dir = sl__coord_ckpt_dir(c, id);
    sl_error_t *err = NULL;
    if (dir && sl__ckpt_remove_dir(dir, &err) != SL_OK)
      sl_log(SL_LOG_WARN, "cannot remove aborted checkpoint %llu: %s",
             (unsigned long long)id, sl_error_message(err));
    sl_error_destroy(err);
    sl_free(dir);
    coord_lock(c);
  }
}

/* Delete completed checkpoints beyond the retained ones, and directories
 * without metadata older than the newest completed one (garbage of aborted
 * or crashed attempts).  Called with the lock held; scans and removes
 * without it (K6).  Directories of active checkpoints are skipped: those
 * present when the scan starts by the copied ids, later ones because
 * their ids exceed latest_completed and they have no _metadata. */
static void retain_locked(sl_coord_t *c) {
  c->needs_retain = false;
  uint64_t latest = c->latest_completed;
  uint32_t n_act = 0;
  for (pending_t *p = c->pending; p; p = p->next) n_act++;
  uint64_t *act = sl_calloc(n_act + 1, sizeof(uint64_t));
  if (act == NULL) return; /* retention waits for the next completion */
  n_act = 0;
  for (pending_t *p = c->pending; p; p = p->next) act[n_act++] = p->id;
  coord_unlock(c);
  SL_ASSERT(!coord_is_locked());
  uint64_t *ids = NULL;
  uint32_t n = 0;
  if (sl__ckpt_list(c->jobdir, &ids, &n, NULL) != SL_OK) n = 0;
  uint32_t kept = 0;
  for (uint32_t i = n; i-- > 0;) {
    bool is_act = false;
    for (uint32_t k = 0; k < n_act; k++) is_act |= act[k] == ids[i];
    if (is_act) continue;
    char *dir = sl__coord_ckpt_dir(c, ids[i]);
    if (dir == NULL) continue;
    sl_acc_t m;
    sl__acc_init(&m);
    sl__acc_printf(&m, "%s/_metadata", dir);
    bool is_complete = sl__acc_status(&m) == SL_OK &&
                       access((char *)m.b.data, F_OK) == 0;
    sl__acc_close(&m);
    sl_error_t *err = NULL;
    if (is_complete && kept < c->cfg.retain) kept++;
    else if ((is_complete || ids[i] < latest) &&
             sl__ckpt_remove_dir(dir, &err) != SL_OK)
      sl_log(SL_LOG_WARN, "cannot remove old checkpoint %llu: %s",
             (unsigned long long)ids[i], sl_error_message(err));
    sl_error_destroy(err);
    sl_free(dir);
  }
  sl_free(ids);
  sl_free(act);
  coord_lock(c);
}

/* Coordinator thread: write the metadata of p (lock released meanwhile). */
static void commit_locked(sl_coord_t *c, pending_t *p) {
  SL_ASSERT(p->state == P_PENDING && p->n_acks == c->n_tasks);
  p->state = P_COMMITTING;
  p->is_busy = true;
  p->meta.time_ns = sl__clock_realtime_ns();
  char *dir = sl__coord_ckpt_dir(c, p->id);
  coord_unlock(c);
  SL_ASSERT(!coord_is_locked());
  sl_error_t *err = NULL;
  bool is_renamed = false;
  int rc = dir ? sl__ckpt_write_meta(dir, &p->meta, &is_renamed, &err)
               : SL_ENOMEM;
  coord_lock(c);
  sl_free(dir);
  p->is_busy = false;
  SL_ASSERT(p->state == P_COMMITTING); /* K7 */
  if (rc != SL_OK && !is_renamed) {
    /* Nothing was committed: the files are garbage. */
    p->state = P_PENDING;
    abort_locked(c, p, rc, err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    return;
  }
  if (rc != SL_OK) {
    /* K5: _metadata is in place and may be durable; never delete it.  It
     * is not reported complete either: a restore may still use it, and
     * retention removes it in time. */
    p->state = P_FAILED;
    p->stats.result = rc;
    p->stats.duration_ns = now_ns() - p->trigger_ns;
    sl_log(SL_LOG_WARN, "checkpoint %llu failed after its metadata was "
           "renamed into place (%s); its files are kept",
           (unsigned long long)p->id,
           err ? sl_error_message(err) : sl_strerror(rc));
    sl_error_destroy(err);
    record_history_locked(c, p);
    c->last_end_ns = now_ns();
    unlink_pending_locked(c, p);
    pending_free(p);
    return;
  }
  /* K1 holds: completed.  K3: notify every task. */
  p->state = P_COMPLETED;
  p->stats.result = SL_OK;
  p->stats.duration_ns = now_ns() - p->trigger_ns;
  if (p->id > c->latest_completed) c->latest_completed = p->id;
  record_history_locked(c, p);
  c->last_end_ns = now_ns();
  if (SL_INJECT("coordinator.before_complete_notify") == SL_OK) {
    for (uint32_t i = 0; i < c->n_tasks; i++)
      sl__task_checkpoint_complete(c->tasks[i], p->id);
    notify_enums_locked(c, p->id, true);
  }
  unlink_pending_locked(c, p);
  /* Older pending checkpoints are subsumed. */
  for (pending_t *q = c->pending, *n; q; q = n) {
    n = q->next;
    if (q->id < p->id)
      abort_locked(c, q, SL_ECANCELED, "subsumed by a newer checkpoint");
  }
  pending_free(p);
  c->needs_retain = true;
}

static void *coord_main(void *arg) {
  sl_coord_t *c = arg;
  coord_lock(c);
  while (!c->is_stopping) {
    if (c->n_garbage > 0) {
      collect_garbage_locked(c);
      continue;
    }
    if (c->needs_retain) {
      retain_locked(c);
      continue;
    }
    int64_t now = now_ns();
    int64_t wake = now + 1000000000ll;
    pending_t *ready = NULL;
    for (pending_t *p = c->pending, *n; p; p = n) {
      n = p->next;
      if (p->state != P_PENDING) continue;
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
    if (c->n_sources > 0 && c->n_sources_ended == c->n_sources &&
        c->final_id == 0 && !c->has_finished_task) {
      /* Every source ended: trigger the final checkpoint now (task.c),
       * once no other checkpoint is in flight. */
      if (n_active_locked(c) < c->cfg.max_concurrent) {
        sl_error_t *err = NULL;
        if (trigger_locked(c, NULL, &err) != SL_OK) {
          if (sl_error_code(err) != SL_EAGAIN)
            sl_log(SL_LOG_WARN, "cannot trigger the final checkpoint: %s",
                   sl_error_message(err));
          int64_t retry = now_ns() + 100000000ll; /* 100 ms */
          if (retry < wake) wake = retry;
          sl_error_destroy(err);
        } else {
          continue;
        }
      }
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
    coord_timedwait(c, &c->cond, &ts);
  }
  coord_unlock(c);
  return NULL;
}

int sl__coord_attach(sl_coord_t *c, sl_task_t **tasks, uint32_t n_tasks,
                     const sl_coord_op_t *ops, uint32_t n_ops,
                     sl_io_pool_t *io) {
  coord_lock(c);
  c->tasks = tasks;
  c->n_tasks = n_tasks;
  sl_free(c->ops);
  c->ops = sl_calloc(n_ops + 1, sizeof(sl_coord_op_t));
  if (c->ops == NULL) {
    coord_unlock(c);
    return SL_ENOMEM;
  }
  memcpy(c->ops, ops, n_ops * sizeof(sl_coord_op_t));
  c->n_ops = n_ops;
  c->io = io;
  c->is_attached = true;
  c->is_stopping = false;
  c->has_finished_task = false;
  c->n_sources = 0;
  for (uint32_t i = 0; i < n_tasks; i++)
    if (sl__task_is_source(tasks[i])) c->n_sources++;
  c->n_sources_ended = 0;
  c->final_id = 0;
  c->next_trigger_ns = now_ns() + c->cfg.interval_ms * 1000000ll;
  coord_unlock(c);
  if (pthread_create(&c->thread, NULL, coord_main, c) != 0) {
    coord_lock(c);
    c->is_attached = false;
    coord_unlock(c);
    return SL_ENOMEM;
  }
  c->has_thread = true;
  return SL_OK;
}

void sl__coord_detach(sl_coord_t *c) {
  coord_lock(c);
  c->is_stopping = true;
  pthread_cond_signal(&c->cond);
  coord_unlock(c);
  if (c->has_thread) pthread_join(c->thread, NULL);
  c->has_thread = false;
  coord_lock(c);
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    abort_locked(c, p, SL_ECANCELED, "the attempt ended");
  }
  /* The I/O pool was drained before detach: nothing is in flight.  A
   * trigger still working unlocked (is_busy) reaps its own. */
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    p->n_io = 0;
    reap_locked(c, p);
  }
  c->is_attached = false;
  c->tasks = NULL;
  c->n_tasks = 0;
  collect_garbage_locked(c);
  coord_unlock(c);
}

void sl__coord_destroy(sl_coord_t *c) {
  if (c == NULL) return;
  if (c->jobdir) {
    coord_lock(c);
    collect_garbage_locked(c); /* left by a trigger that ended late */
    coord_unlock(c);
  }
  for (uint32_t i = 0; i < c->n_history; i++) sl_free(c->history_tasks[i]);
  for (pending_t *p = c->pending, *n; p; p = n) {
    n = p->next;
    pending_free(p);
  }
  sl_free(c->garbage);
  sl_free(c->ops);
  sl_free(c->dir);
  sl_free(c->job);
  sl_free(c->jobdir);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->cond);
  pthread_cond_destroy(&c->done_cond);
  pthread_cond_destroy(&c->trigger_cond);
  sl_free(c);
}

int sl__coord_wait(sl_coord_t *c, uint64_t id, int64_t timeout_ms,
                   sl_checkpoint_stats_t *out) {
  int64_t deadline = now_ns() + timeout_ms * 1000000ll;
  struct timespec ts = {(time_t)(deadline / 1000000000),
                        (long)(deadline % 1000000000)};
  coord_lock(c);
  int rc = SL_EAGAIN;
  for (;;) {
    for (uint32_t i = 0; i < c->n_history; i++)
      if (c->history[i].id == id) {
        if (out) *out = c->history[i];
        rc = c->history[i].result;
        goto out;
      }
    if (coord_timedwait(c, &c->done_cond, &ts) == ETIMEDOUT)
      break;
  }
out:
  coord_unlock(c);
  return rc;
}

int sl__coord_last(sl_coord_t *c, sl_checkpoint_stats_t *out) {
  coord_lock(c);
  int rc = SL_ENOTFOUND;
  for (uint32_t i = c->n_history; i-- > 0;)
    if (c->history[i].result == SL_OK) {
      *out = c->history[i];
      rc = SL_OK;
      break;
    }
  coord_unlock(c);
  return rc;
}

uint64_t sl__coord_latest(sl_coord_t *c) {
  coord_lock(c);
  uint64_t id = c->latest_completed;
  coord_unlock(c);
  return id;
}

bool sl__coord_is_pending(sl_coord_t *c, uint64_t id) {
  coord_lock(c);
  pending_t *p = find_locked(c, id);
  bool r = p && is_active(p);
  coord_unlock(c);
  return r;
}

uint32_t sl__coord_history(sl_coord_t *c, sl_checkpoint_stats_t *out,
                           uint32_t max) {
  coord_lock(c);
  uint32_t n = c->n_history < max ? c->n_history : max;
  memcpy(out, &c->history[c->n_history - n], n * sizeof(*out));
  coord_unlock(c);
  return n;
}

int sl__coord_task_stats(sl_coord_t *c, uint64_t id,
                         sl_checkpoint_task_stats_t **out, uint32_t *out_n) {
  coord_lock(c);
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
  coord_unlock(c);
  return rc;
}
