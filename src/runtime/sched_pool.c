/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The production scheduler: a pool of worker threads sharing one run queue
 * and one timer heap under a mutex.  A task runs on one worker at a time
 * for one quantum, then goes back to the queue (more work), to idle
 * (waiting for input, credit or a timer) or to finished.  Tasks never read
 * the clock or sleep; they ask the scheduler for the time and for timed
 * wake-ups, so a deterministic scheduler can replace this one.
 * See README.md ("Scheduler").
 *
 * Task scheduling states:
 *
 *     IDLE --wake--> QUEUED --worker--> RUNNING --AGAIN--> QUEUED
 *      ^                                 |   |
 *      +-------------WAIT----------------+   +--wake--> NOTIFIED
 *                                        |                 |
 *                                      DONE             WAIT/AGAIN
 *                                        v                 v
 *                                    FINISHED            QUEUED
 *
 * wake() is coalescing: it only moves IDLE to QUEUED and RUNNING to
 * NOTIFIED.  A task that returns WAIT while NOTIFIED runs again, so a wake
 * that raced with its last look at its inputs is never lost.
 */
#include <errno.h>
#include <time.h>

#include "runtime/task_int.h"

typedef struct timer_ent_s {
  int64_t at;
  sl_task_t *task;
} timer_ent_t;

typedef struct pool_s {
  sl_sched_t base;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Protected by lock. */
  sl_task_t *qhead, *qtail;
  timer_ent_t *heap;
  uint32_t n_heap, cap_heap;
  uint32_t n_live;
  uint32_t n_waiting; /* idle workers */
  /* Read without the lock by spinning workers. */
  _Atomic uint32_t n_queued;
  /* Immutable after create. */
  pthread_t *threads;
  uint32_t n_workers;
  sl_task_t **tasks;
  uint32_t n_tasks;
} pool_t;

static int64_t pool_now(sl_sched_t *s) {
  SL_UNUSED(s);
  return sl__clock_realtime_ns();
}

/* lock held */
static void enqueue_locked(pool_t *p, sl_task_t *t) {
  t->run_next = NULL;
  if (p->qtail) p->qtail->run_next = t;
  else p->qhead = t;
  p->qtail = t;
  atomic_fetch_add_explicit(&p->n_queued, 1, memory_order_release);
  if (p->n_waiting) pthread_cond_signal(&p->cond);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/*
 * Spinning before parking (sl_spin_policy_t in runtime.h): a worker that
 * finds the queue empty spins for its budget, then parks on the condition
 * variable.  Spinning makes handing a buffer to a pipeline that is about
 * to run a store instead of a futex wake-up, but every nanosecond spun is
 * CPU time the job pays for, so the budget follows the wake-up gaps this
 * worker observed: it grows to twice a short gap (capped), halves after
 * each spin that found nothing and drops to zero below a floor; a worker
 * that waits long stops spinning until a short gap is seen again.
 */
static bool spin_for_work(pool_t *p, int64_t budget_ns) {
  int64_t until = sl__clock_monotonic_ns() + budget_ns;
  for (uint32_t i = 1;; i++) {
    if (atomic_load_explicit(&p->n_queued, memory_order_acquire)) return true;
    cpu_relax();
    if ((i & 63) == 0 && sl__clock_monotonic_ns() > until) return false;
  }
}

void sl__spin_policy_init(sl_spin_policy_t *sp) { sp->budget_ns = 0; }

void sl__spin_policy_spun(sl_spin_policy_t *sp, bool has_found) {
  if (has_found) return; /* the gap, seen on dequeue, sets the budget */
  sp->budget_ns /= 2;
  if (sp->budget_ns < SL_SPIN_MIN_NS) sp->budget_ns = 0;
}

void sl__spin_policy_gap(sl_spin_policy_t *sp, int64_t gap_ns) {
  if (gap_ns < 0) gap_ns = 0;
  if (gap_ns > SL_SPIN_MAX_NS / 2) {
    /* Spinning would not have reached the work: let the budget decay. */
    sp->budget_ns /= 2;
    if (sp->budget_ns < SL_SPIN_MIN_NS) sp->budget_ns = 0;
    return;
  }
  int64_t b = 2 * gap_ns;
  if (b < SL_SPIN_MIN_NS) b = SL_SPIN_MIN_NS;
  sp->budget_ns = b;
}

/* Returns true if the caller must enqueue the task. */
static bool wake_transition(sl_task_t *t) {
  int s = atomic_load_explicit(&t->sched_state, memory_order_acquire);
  for (;;) {
    int to;
    if (s == SL_TASK_IDLE) to = SL_TASK_QUEUED;
    else if (s == SL_TASK_RUNNING) to = SL_TASK_NOTIFIED;
    else return false;
    /* acq_rel: orders the waker's writes (a pushed buffer) before the
     * task's next run. */
    if (atomic_compare_exchange_weak_explicit(&t->sched_state, &s, to,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
      return to == SL_TASK_QUEUED;
  }
}

static void pool_wake(sl_sched_t *s, sl_task_t *t) {
  pool_t *p = (pool_t *)s;
  if (!wake_transition(t)) return;
  pthread_mutex_lock(&p->lock);
  enqueue_locked(p, t);
  pthread_mutex_unlock(&p->lock);
}

static void heap_swap(timer_ent_t *h, uint32_t a, uint32_t b) {
  timer_ent_t x = h[a];
  h[a] = h[b];
  h[b] = x;
}

static void pool_wake_at(sl_sched_t *s, sl_task_t *t, int64_t at) {
  pool_t *p = (pool_t *)s;
  pthread_mutex_lock(&p->lock);
  if (at >= t->timer_at) {
    pthread_mutex_unlock(&p->lock);
    return;
  }
  if (p->n_heap == p->cap_heap) {
    uint32_t cap = p->cap_heap ? p->cap_heap * 2 : 64;
    timer_ent_t *h = sl_realloc(p->heap, cap * sizeof(*h));
    if (h == NULL) {
      /* Cannot remember the timer: wake now; the task asks again. */
      pthread_mutex_unlock(&p->lock);
      pool_wake(s, t);
      return;
    }
    p->heap = h;
    p->cap_heap = cap;
  }
  t->timer_at = at;
  uint32_t i = p->n_heap++;
  p->heap[i] = (timer_ent_t){at, t};
  while (i > 0 && p->heap[(i - 1) / 2].at > p->heap[i].at) {
    heap_swap(p->heap, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  if (i == 0 && p->n_waiting) pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

/* lock held: wake every task whose timer is due. */
static void fire_timers_locked(pool_t *p, int64_t now) {
  while (p->n_heap && p->heap[0].at <= now) {
    sl_task_t *t = p->heap[0].task;
    p->heap[0] = p->heap[--p->n_heap];
    uint32_t i = 0;
    for (;;) {
      uint32_t l = 2 * i + 1, r = l + 1, m = i;
      if (l < p->n_heap && p->heap[l].at < p->heap[m].at) m = l;
      if (r < p->n_heap && p->heap[r].at < p->heap[m].at) m = r;
      if (m == i) break;
      heap_swap(p->heap, i, m);
      i = m;
    }
    t->timer_at = INT64_MAX;
    if (wake_transition(t)) enqueue_locked(p, t);
  }
}

static void account(sl_task_t *t, _Atomic uint64_t *c, int64_t d) {
  if (d <= 0) return;
  atomic_store_explicit(
      c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)d,
      memory_order_relaxed);
}

static void *worker_main(void *arg) {
  pool_t *p = arg;
  bool has_spun = false;
  sl_spin_policy_t sp;
  sl__spin_policy_init(&sp);
  int64_t idle_since = 0; /* monotonic ns when the queue was found empty */
  pthread_mutex_lock(&p->lock);
  for (;;) {
    if (p->n_live == 0) break;
    fire_timers_locked(p, sl__clock_realtime_ns());
    sl_task_t *t = p->qhead;
    if (t == NULL && idle_since == 0) idle_since = sl__clock_monotonic_ns();
    if (t == NULL && !has_spun && sp.budget_ns > 0) {
      has_spun = true;
      pthread_mutex_unlock(&p->lock);
      sl__spin_policy_spun(&sp, spin_for_work(p, sp.budget_ns));
      pthread_mutex_lock(&p->lock);
      continue;
    }
    if (t == NULL) {
      has_spun = false;
      p->n_waiting++;
      if (p->n_heap) {
        int64_t delta = p->heap[0].at - sl__clock_realtime_ns();
        if (delta < 0) delta = 0;
        int64_t dl = sl__clock_monotonic_ns() + delta;
        struct timespec ts = {(time_t)(dl / 1000000000), (long)(dl % 1000000000)};
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
      } else {
        pthread_cond_wait(&p->cond, &p->lock);
      }
      p->n_waiting--;
      continue;
    }
    p->qhead = t->run_next;
    if (p->qhead == NULL) p->qtail = NULL;
    atomic_fetch_sub_explicit(&p->n_queued, 1, memory_order_relaxed);
    has_spun = false;
    pthread_mutex_unlock(&p->lock);

    atomic_store_explicit(&t->sched_state, SL_TASK_RUNNING,
                          memory_order_release);
    int64_t start = sl__clock_monotonic_ns();
    if (idle_since) {
      sl__spin_policy_gap(&sp, start - idle_since);
      idle_since = 0;
    }
    if (t->wait_since) {
      if (t->last_result == SL_RUN_WAIT_OUTPUT)
        account(t, &t->backpressured_ns, start - t->wait_since);
      else if (t->last_result == SL_RUN_WAIT_INPUT)
        account(t, &t->idle_ns, start - t->wait_since);
    }
    sl_run_result_t r = sl__task_run(t);
    int64_t end = sl__clock_monotonic_ns();
    account(t, &t->busy_ns, end - start);
    t->wait_since = end;
    t->last_result = r;

    pthread_mutex_lock(&p->lock);
    if (r == SL_RUN_DONE) {
      atomic_store_explicit(&t->sched_state, SL_TASK_FINISHED,
                            memory_order_release);
      atomic_store_explicit(&t->is_finished, true, memory_order_release);
      if (--p->n_live == 0) pthread_cond_broadcast(&p->cond);
    } else if (r == SL_RUN_AGAIN) {
      atomic_store_explicit(&t->sched_state, SL_TASK_QUEUED,
                            memory_order_release);
      enqueue_locked(p, t);
    } else {
      int expect = SL_TASK_RUNNING;
      if (!atomic_compare_exchange_strong_explicit(
              &t->sched_state, &expect, SL_TASK_IDLE, memory_order_acq_rel,
              memory_order_acquire)) {
        /* NOTIFIED: woken while running; run again. */
        atomic_store_explicit(&t->sched_state, SL_TASK_QUEUED,
                              memory_order_release);
        enqueue_locked(p, t);
      }
    }
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static int pool_run(sl_sched_t *s) {
  pool_t *p = (pool_t *)s;
  pthread_mutex_lock(&p->lock);
  p->n_live = p->n_tasks;
  /* A task may already be queued: something woke it (a checkpoint
   * trigger, a cancel) between create and run.  Queue each task once. */
  for (uint32_t i = 0; i < p->n_tasks; i++)
    if (wake_transition(p->tasks[i])) enqueue_locked(p, p->tasks[i]);
  pthread_mutex_unlock(&p->lock);
  uint32_t started = 0;
  int rc = SL_OK;
  for (; started < p->n_workers; started++) {
    int e = pthread_create(&p->threads[started], NULL, worker_main, p);
    if (e != 0) {
      rc = -e;
      break;
    }
  }
  if (started == 0) return rc; /* nothing ran; tasks stay unfinished */
  for (uint32_t i = 0; i < started; i++) pthread_join(p->threads[i], NULL);
  return SL_OK;
}

static void pool_destroy(sl_sched_t *s) {
  pool_t *p = (pool_t *)s;
  if (p == NULL) return;
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  sl_free(p->heap);
  sl_free(p->threads);
  sl_free(p);
}

static const sl_sched_ops_t pool_ops = {
    pool_wake, pool_wake_at, pool_now, pool_run, pool_destroy,
};

int sl__sched_pool_create(uint32_t n_workers, sl_task_t **tasks,
                          uint32_t n_tasks, sl_sched_t **out) {
  pool_t *p = sl_calloc(1, sizeof(*p));
  if (p == NULL) return SL_ENOMEM;
  if (n_workers == 0) n_workers = sl__cpu_count();
  if (n_workers > n_tasks) n_workers = n_tasks ? n_tasks : 1;
  p->base.ops = &pool_ops;
  atomic_init(&p->n_queued, 0);
  p->n_workers = n_workers;
  p->tasks = tasks;
  p->n_tasks = n_tasks;
  p->threads = sl_calloc(n_workers, sizeof(pthread_t));
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int e1 = pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
  int e2 = pthread_mutex_init(&p->lock, NULL);
  if (p->threads == NULL || e1 || e2) {
    sl_free(p->threads);
    sl_free(p);
    return SL_ENOMEM;
  }
  for (uint32_t i = 0; i < n_tasks; i++) {
    tasks[i]->sched = &p->base;
    tasks[i]->timer_at = INT64_MAX;
  }
  *out = &p->base;
  return SL_OK;
}
