/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The I/O pool: a few threads that run the asynchronous phase of snapshots
 * (serializing pinned state to files and fsyncing them) so that tasks go on
 * processing records meanwhile.  Jobs run in submission order per thread.
 * See README.md.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"

#define SL_IO_NICE 5 /* background threads (sl__io_lower_priority) */

typedef struct io_job_s {
  sl_io_fn fn;
  void *arg;
  struct io_job_s *next;
} io_job_t;

struct sl_io_pool_s {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  io_job_t *head, *tail; /* protected by lock */
  bool is_stopping;      /* protected by lock */
  uint32_t n_threads;
  pthread_t *threads;
};

/*
 * The async phase is background work: it must not take the core of a task
 * thread that has records waiting (on a machine with fewer cores than
 * busy threads, an I/O thread at the tasks' priority gets an equal share
 * and the task's input waits, which is the event-time tail).  So I/O
 * threads run at nice SL_IO_NICE (Linux: per thread): a waking task thread
 * preempts them at once, they still use every idle cycle, and a
 * checkpoint takes longer only when the cores are busy.  Nice 5, not 19
 * or SCHED_IDLE: they keep about a quarter of a contended core, so a large
 * checkpoint of a job that keeps every core busy still completes (at nice
 * 10 a 1 GB checkpoint took minutes on a machine loaded by other work).
 * Best effort: a failure leaves the thread as it was.
 */
void sl__io_lower_priority(void) {
#ifdef __linux__
  id_t tid = (id_t)syscall(SYS_gettid);
  errno = 0;
  int cur = getpriority(PRIO_PROCESS, tid);
  /* Never raise it: a process started at a higher nice keeps it. */
  if (errno == 0 && cur < SL_IO_NICE)
    (void)setpriority(PRIO_PROCESS, tid, SL_IO_NICE);
#endif
}

static void *io_main(void *arg) {
  sl_io_pool_t *p = arg;
  sl__io_lower_priority();
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->head == NULL && !p->is_stopping)
      pthread_cond_wait(&p->cond, &p->lock);
    io_job_t *j = p->head;
    if (j == NULL) break; /* stopping and drained */
    p->head = j->next;
    if (p->head == NULL) p->tail = NULL;
    pthread_mutex_unlock(&p->lock);
    j->fn(j->arg);
    sl_free(j);
    pthread_mutex_lock(&p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

int sl__io_pool_create(uint32_t n_threads, sl_io_pool_t **out) {
  sl_io_pool_t *p = sl_calloc(1, sizeof(*p));
  if (p == NULL) return SL_ENOMEM;
  if (n_threads == 0) n_threads = 1;
  p->threads = sl_calloc(n_threads, sizeof(pthread_t));
  if (p->threads == NULL) {
    sl_free(p);
    return SL_ENOMEM;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  for (; p->n_threads < n_threads; p->n_threads++)
    if (pthread_create(&p->threads[p->n_threads], NULL, io_main, p) != 0)
      break;
  if (p->n_threads == 0) {
    sl__io_pool_destroy(p);
    return SL_ENOMEM;
  }
  *out = p;
  return SL_OK;
}

int sl__io_submit(sl_io_pool_t *p, sl_io_fn fn, void *arg) {
  io_job_t *j = sl_calloc(1, sizeof(*j));
  if (j == NULL) return SL_ENOMEM;
  j->fn = fn;
  j->arg = arg;
  pthread_mutex_lock(&p->lock);
  if (p->tail) p->tail->next = j;
  else p->head = j;
  p->tail = j;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
  return SL_OK;
}

void sl__io_pool_destroy(sl_io_pool_t *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->is_stopping = true;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  sl_free(p->threads);
  sl_free(p);
}

/* ------------------------------------------------------------------ */
/* Parallel loops for restore.  Restore runs while the plan is built,
 * before the attempt's I/O pool exists and while no task runs, so it
 * starts threads of its own for the call: CPU-bound work (checksums,
 * decoding, map inserts) on every core. */

typedef struct pfor_s {
  void (*fn)(void *arg, uint32_t worker, uint32_t i);
  void *arg;
  uint32_t n;
  _Atomic uint32_t next;
} pfor_t;

typedef struct pfor_worker_s {
  pfor_t *p;
  uint32_t worker;
} pfor_worker_t;

static void *pfor_main(void *arg) {
  pfor_worker_t *w = arg;
  pfor_t *p = w->p;
  for (;;) {
    uint32_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (i >= p->n) break;
    p->fn(p->arg, w->worker, i);
  }
  return NULL;
}

void sl__io_parallel_for(uint32_t n_threads, uint32_t n,
                         void (*fn)(void *arg, uint32_t worker, uint32_t i),
                         void *arg) {
  pfor_t p = {fn, arg, n, 0};
  if (n_threads > n) n_threads = n;
  if (n_threads > SL_IO_PFOR_MAX) n_threads = SL_IO_PFOR_MAX;
  pthread_t th[SL_IO_PFOR_MAX];
  pfor_worker_t ws[SL_IO_PFOR_MAX];
  uint32_t n_started = 0;
  ws[0] = (pfor_worker_t){&p, 0};
  for (uint32_t k = 1; k < n_threads; k++) {
    ws[k] = (pfor_worker_t){&p, k};
    if (pthread_create(&th[n_started], NULL, pfor_main, &ws[k]) != 0) break;
    n_started++;
  }
  pfor_main(&ws[0]);
  for (uint32_t k = 0; k < n_started; k++) pthread_join(th[k], NULL);
}

uint32_t sl__io_restore_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > 8) n = 8; /* <= SL_IO_PFOR_MAX */
  return (uint32_t)n;
}
