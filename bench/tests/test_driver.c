/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The streaming driver keeps its rate while its consumer stalls, and the
 * backlog it reports equals generated minus consumed (bench/ring.h).  The
 * consumer stalls on purpose (that is the scenario); the assertions are
 * on counts and on the driver's own clock, with the 1% rate tolerance of
 * the driver's specification.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "ring.h"
#include "sl_test.h"

enum { MAX_REPORTS = 64 };

typedef struct run_s {
  sl_ring_t ring;
  sl_driver_report_t reports[MAX_REPORTS];
  int n_reports;
  _Atomic bool driver_done;
  _Atomic uint64_t n_read;
  double stall_after_s; /* the consumer stops reading after this */
} run_t;

static void on_report(void *user, const sl_driver_report_t *r) {
  run_t *run = user;
  if (run->n_reports < MAX_REPORTS) run->reports[run->n_reports++] = *r;
}

static void *consumer(void *arg) {
  run_t *run = arg;
  static sl_ring_event_t buf[4096];
  int64_t start = sl_bench_now_ns();
  uint64_t want_seq = 0;
  while (!atomic_load(&run->driver_done)) {
    if ((double)(sl_bench_now_ns() - start) / 1e9 >= run->stall_after_s) {
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
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, consumer, run), 0);
  sl_driver_opts_t o = {rate, duration, 100, 250, on_report, run, NULL,
                        NULL, NULL};
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
  const double rate = 200000, duration = 2.0;
  sl_driver_report_t fin;
  drive(&run, rate, duration, 1u << 20, &fin);
  /* Over the whole run and over the stalled part alone. */
  assert_rate((double)fin.generated / fin.t_s, rate, "whole run");
  const sl_driver_report_t *a = NULL, *b = NULL;
  for (int i = 0; i < run.n_reports; i++) {
    if (a == NULL && run.reports[i].t_s >= 0.7) a = &run.reports[i];
    if (run.reports[i].t_s <= 1.8) b = &run.reports[i];
  }
  SL_ASSERT_TRUE(a && b && b->t_s - a->t_s > 0.5);
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
  run.stall_after_s = 0.0; /* never reads */
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
