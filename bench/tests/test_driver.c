/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The streaming driver keeps its rate while its consumer stalls, and the
 * backlog it reports equals generated minus consumed (bench/ring.h).  The
 * consumer stalls on purpose (that is the scenario), when a report asks it
 * to, and says when it has (a latch); the stalled window is measured from
 * the first report taken after that, on the driver's clock, and the run
 * stops once the window is a second long, however slow the machine.  The
 * assertions are on counts and on the driver's own clock: a report's
 * counters are exactly the events scheduled by its time stamp, so the
 * 1% rate tolerance of the driver's specification holds at any speed.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "ring.h"
#include "sl_test.h"

enum { MAX_REPORTS = 4096 };

typedef struct run_s {
  sl_ring_t ring;
  sl_driver_report_t reports[MAX_REPORTS];
  /* The consumer had stopped before report i read the counters. */
  bool is_stalled_at[MAX_REPORTS];
  int n_reports;
  _Atomic bool driver_done;
  _Atomic uint64_t n_read;
  double stall_after_s;   /* driver time at which the consumer is stopped */
  double window_s;        /* stop once stalled reports span this long; 0:
                             run for the whole duration */
  _Atomic bool stall_req; /* report -> consumer: stop reading */
  _Atomic bool is_stalled; /* consumer -> report: stopped */
  bool was_stalled;       /* is_stalled as the previous report saw it */
  int first_stalled;      /* index of the first stalled report, or -1 */
  _Atomic bool stop;      /* ends the driver early */
  double duration_s;      /* the final report is stamped with it */
} run_t;

static void on_report(void *user, const sl_driver_report_t *r) {
  run_t *run = user;
  if (r->t_s >= run->duration_s) return; /* the final report */
  if (run->n_reports == MAX_REPORTS) {
    atomic_store(&run->stop, true);
    return;
  }
  int i = run->n_reports++;
  run->reports[i] = *r;
  /* The consumer's stop was seen before this report read the counters
   * only if the previous report had already seen it. */
  run->is_stalled_at[i] = run->was_stalled;
  if (run->was_stalled && run->first_stalled < 0) run->first_stalled = i;
  run->was_stalled = atomic_load(&run->is_stalled);
  if (r->t_s >= run->stall_after_s) atomic_store(&run->stall_req, true);
  if (run->window_s > 0 && run->first_stalled >= 0 &&
      r->t_s - run->reports[run->first_stalled].t_s >= run->window_s)
    atomic_store(&run->stop, true);
}

static void *consumer(void *arg) {
  run_t *run = arg;
  static sl_ring_event_t buf[4096];
  uint64_t want_seq = 0;
  while (!atomic_load(&run->driver_done)) {
    if (atomic_load(&run->stall_req)) {
      atomic_store(&run->is_stalled, true);
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL); /* stalled */
      continue;
    }
    size_t n = sl_ring_read(&run->ring, buf, 4096);
    for (size_t i = 0; i < n; i++)
      if (buf[i].seq != want_seq++) return (void *)1;
    atomic_fetch_add(&run->n_read, n);
  }
  return NULL;
}

static void drive(run_t *run, double rate, double duration, uint64_t capacity,
                  sl_driver_report_t *fin) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/ring", sl_test_dir());
  SL_ASSERT_EQ_INT(sl_ring_create(path, capacity, 0, &run->ring), 0);
  pthread_t th;
  run->first_stalled = -1;
  run->duration_s = duration;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, consumer, run), 0);
  sl_driver_opts_t o = {rate, duration, 100, 250, on_report, run,
                        run->window_s > 0 ? &run->stop : NULL, NULL, NULL};
  sl_driver_run(&run->ring, &o, fin);
  atomic_store(&run->driver_done, true);
  void *res;
  pthread_join(th, &res);
  SL_ASSERT_TRUE(res == NULL); /* sequence numbers in order, no gaps */
}

static void assert_rate(double got, double want, const char *what) {
  if (got < want * 0.99 || got > want * 1.01)
    SL_TEST_FAIL("%s: %.0f events/s, expected %.0f within 1%%", what, got,
                 want);
}

SL_TEST(driver_keeps_its_rate_while_the_consumer_stalls) {
  static run_t run;
  run.stall_after_s = 0.4;
  run.window_s = 1.0;
  /* The duration only bounds the run; the window ends it. */
  const double rate = 200000, duration = 60.0;
  sl_driver_report_t fin;
  drive(&run, rate, duration, 1u << 20, &fin);
  SL_ASSERT_TRUE(run.first_stalled >= 0);
  const sl_driver_report_t *a = &run.reports[run.first_stalled];
  const sl_driver_report_t *b = &run.reports[run.n_reports - 1];
  SL_ASSERT_TRUE(run.is_stalled_at[run.n_reports - 1]);
  SL_ASSERT_TRUE(b->t_s - a->t_s >= run.window_s);
  /* Over the whole run (to the last periodic report: the final one of a
   * stopped run is stamped with the duration) and over the stalled part
   * alone. */
  assert_rate((double)b->generated / b->t_s, rate, "whole run");
  assert_rate((double)(b->generated - a->generated) / (b->t_s - a->t_s), rate,
              "while the consumer is stalled");
  SL_ASSERT_EQ_INT(b->consumed, a->consumed); /* it was stalled */
  SL_ASSERT_TRUE(b->backlog > a->backlog);
  /* The final backlog is exactly generated minus what the consumer read. */
  uint64_t n_read = atomic_load(&run.n_read);
  SL_ASSERT_EQ_INT(fin.overflow, 0);
  SL_ASSERT_EQ_INT(fin.consumed, n_read);
  SL_ASSERT_EQ_INT(fin.backlog, fin.generated - n_read);
  SL_ASSERT_EQ_INT(sl_ring_backlog(&run.ring), fin.backlog);
  /* The header's sequence counts every event of the schedule. */
  SL_ASSERT_EQ_INT(atomic_load(&run.ring.hdr->sequence), fin.generated);
  /* Stamps are the schedule: event seq is due at t0 + seq / rate. */
  sl_ring_event_t e;
  SL_ASSERT_EQ_INT(sl_ring_read(&run.ring, &e, 1), 1);
  SL_ASSERT_EQ_INT(e.seq, n_read);
  int64_t want = run.ring.hdr->t0_ns + (int64_t)((double)e.seq * 1e9 / rate);
  SL_ASSERT_EQ_INT(e.gen_ns, want);
  sl_ring_close(&run.ring);
}

SL_TEST(a_full_ring_counts_overflow_instead_of_slowing_down) {
  static run_t run;
  run.stall_req = true; /* never reads */
  const double rate = 100000, duration = 1.0;
  sl_driver_report_t fin;
  drive(&run, rate, duration, 4096, &fin);
  assert_rate((double)fin.generated / fin.t_s, rate, "with a full ring");
  SL_ASSERT_EQ_INT(fin.backlog, 4096);
  SL_ASSERT_EQ_INT(fin.overflow, fin.generated - 4096);
  SL_ASSERT_EQ_INT(fin.consumed, 0);
  SL_ASSERT_EQ_INT(atomic_load(&run.ring.hdr->sequence), fin.generated);
  sl_ring_close(&run.ring);
}
