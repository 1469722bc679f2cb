/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice side of the streaming benchmarks (bench/stream_io.h): events
 * the driver writes into the rings reach a sluice job through the ring
 * source exactly once and with their fields intact, and the latency sink
 * records one latency per row.  The expected values are computed
 * independently, by calling the Nexmark generator for every event number
 * the driver reports; no timing is asserted.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sl_test.h"
#include "stream_io.h"
#include "workload.h"

typedef struct drive_s {
  sl_workload_t *w;
  sl_ring_t *rings;
  double rate, duration_s;
  sl_driver_report_t fin;
} drive_t;

static void *driver_thread(void *arg) {
  drive_t *d = arg;
  sl_driver_opts_t o;
  memset(&o, 0, sizeof(o));
  o.rate = d->rate;
  o.duration_s = d->duration_s;
  o.fill = sl_workload_fill;
  o.fill_user = d->w;
  sl_driver_run_rings(d->rings, d->w->n_rings, &o, &d->fin);
  return NULL;
}

/* A sink that sums bid fields (any subtask: atomics). */
typedef struct sums_s {
  _Atomic uint64_t n, price, auction, bidder, time, extra_len;
} sums_t;

static int sum_open(void *ctx, const sl_sink_init_t *init, void **out,
                    sl_error_t **err) {
  (void)init, (void)err;
  *out = ctx;
  return SL_OK;
}

static int sum_write(void *wr, const sl_row_t *row, sl_error_t **err) {
  (void)err;
  sums_t *s = wr;
  atomic_fetch_add(&s->n, 1);
  atomic_fetch_add(&s->auction, (uint64_t)sl_row_get_i64(row, 0));
  atomic_fetch_add(&s->bidder, (uint64_t)sl_row_get_i64(row, 1));
  atomic_fetch_add(&s->price, (uint64_t)sl_row_get_i64(row, 2));
  atomic_fetch_add(&s->time, (uint64_t)sl_row_get_i64(row, 5));
  atomic_fetch_add(&s->extra_len, sl_row_get_str(row, 6).len);
  return SL_OK;
}

static int sum_close(void *wr, bool ok, sl_error_t **err) {
  (void)wr, (void)ok, (void)err;
  return SL_OK;
}

static void sum_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t sum_vt = {"sums", sum_open, sum_write, NULL,
                                    sum_close, sum_destroy};

static sl_stream_t *ring_stream(sl_job_t *job, sl_workload_t *w,
                                const char *prefix, uint32_t stream,
                                sl_schema_t **schema) {
  const sl_source_vt_t *vt;
  void *ctx;
  SL_ASSERT_EQ_INT(sl_ring_stream_schema(w, stream, schema, NULL), SL_OK);
  SL_ASSERT_EQ_INT(sl_ring_source_create(w, prefix, stream, &vt, &ctx, NULL),
                   SL_OK);
  return sl_job_source(job, w->stream_names[stream], vt, ctx, *schema);
}

SL_TEST(nexmark_bids_reach_the_job_once_with_their_fields) {
  char prefix[4200];
  snprintf(prefix, sizeof(prefix), "%s/nx", sl_test_dir());
  sl_workload_t w;
  sl_workload_defaults(&w);
  w.kind = SL_WORKLOAD_NEXMARK;
  w.needed = 1u << SL_NEX_BID;
  w.splits = 2;
  w.capacity = 1u << 16;
  w.nexmark.events_per_second = 40000;
  SL_ASSERT_EQ_INT(sl_workload_init(&w), 0);
  sl_ring_t rings[2];
  SL_ASSERT_EQ_INT(sl_workload_create_rings(&w, prefix, rings), 0);
  SL_ASSERT_EQ_INT(w.n_rings, 2);

  sl_job_config_t jc;
  sl_job_config_init(&jc);
  jc.parallelism = 2;
  sl_job_t *job;
  SL_ASSERT_EQ_INT(sl_job_create(&jc, &job, NULL), SL_OK);
  sl_schema_t *schema;
  sl_stream_t *s = ring_stream(job, &w, prefix, SL_NEX_BID, &schema);
  sums_t sums;
  memset(&sums, 0, sizeof(sums));
  SL_ASSERT_EQ_INT(sl_stream_sink(s, "sums", &sum_vt, &sums), SL_OK);

  drive_t d = {&w, rings, 40000, 0.5, {0, 0, 0, 0, 0, 0, 0, 0}};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, driver_thread, &d), 0);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err); /* ends when the driver is done */
  pthread_join(th, NULL);
  SL_ASSERT_OK_E(rc, err);
  sl_job_destroy(job);
  sl_schema_unref(schema);

  SL_ASSERT_EQ_INT(d.fin.overflow, 0);
  SL_ASSERT_EQ_INT(d.fin.dropped, 0);
  SL_ASSERT_TRUE(d.fin.generated >= 20000);
  /* Every event number the driver generated, independently. */
  uint64_t n = 0, price = 0, auction = 0, bidder = 0, time = 0, extra = 0;
  int64_t t0 = rings[0].hdr->t0_ns;
  static sl_nex_event_t ev;
  for (uint64_t i = 0; i < d.fin.generated; i++) {
    if (sl_nexmark_kind(&w.nexmark, i) != SL_NEX_BID) continue;
    int64_t gen = t0 + (int64_t)((double)i * 1e9 / d.rate);
    sl_nexmark_generate(&w.nexmark, i, gen / 1000, &ev);
    n++;
    price += (uint64_t)ev.bid.price;
    auction += (uint64_t)ev.bid.auction;
    bidder += (uint64_t)ev.bid.bidder;
    time += (uint64_t)(gen / 1000);
    extra += ev.bid.extra.len;
  }
  SL_ASSERT_EQ_INT(d.fin.skipped, d.fin.generated - n);
  SL_ASSERT_EQ_INT(atomic_load(&sums.n), n);
  SL_ASSERT_EQ_INT(atomic_load(&sums.price), price);
  SL_ASSERT_EQ_INT(atomic_load(&sums.auction), auction);
  SL_ASSERT_EQ_INT(atomic_load(&sums.bidder), bidder);
  SL_ASSERT_EQ_INT(atomic_load(&sums.time), time);
  SL_ASSERT_EQ_INT(atomic_load(&sums.extra_len), extra);
  sl_workload_remove_rings(&w, prefix, rings);
  sl_workload_close(&w);
}

SL_TEST(latency_sink_records_one_latency_per_row) {
  char prefix[4200];
  snprintf(prefix, sizeof(prefix), "%s/keys", sl_test_dir());
  sl_workload_t w;
  sl_workload_defaults(&w);
  w.keys = 1000;
  w.zipf = 1.0;
  w.capacity = 1u << 16;
  SL_ASSERT_EQ_INT(sl_workload_init(&w), 0);
  sl_ring_t rings[1];
  SL_ASSERT_EQ_INT(sl_workload_create_rings(&w, prefix, rings), 0);
  sl_job_config_t jc;
  sl_job_config_init(&jc);
  jc.parallelism = 1;
  sl_job_t *job;
  SL_ASSERT_EQ_INT(sl_job_create(&jc, &job, NULL), SL_OK);
  sl_schema_t *schema;
  sl_stream_t *s = ring_stream(job, &w, prefix, 0, &schema);
  sl_lat_shared_t lat;
  SL_ASSERT_EQ_INT(sl_lat_shared_init(&lat), 0);
  const sl_sink_vt_t *kvt;
  void *kctx;
  SL_ASSERT_EQ_INT(sl_lat_sink_create(&lat, "date_time", "ingest_time", &kvt,
                                      &kctx), SL_OK);
  SL_ASSERT_EQ_INT(sl_stream_sink(s, "latency", kvt, kctx), SL_OK);
  drive_t d = {&w, rings, 20000, 0.5, {0, 0, 0, 0, 0, 0, 0, 0}};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, driver_thread, &d), 0);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  pthread_join(th, NULL);
  SL_ASSERT_OK_E(rc, err);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  static sl_bench_hist_t ev, pt;
  uint64_t rows = sl_lat_shared_take(&lat, &ev, &pt);
  SL_ASSERT_EQ_INT(d.fin.overflow, 0);
  SL_ASSERT_TRUE(d.fin.generated >= 10000);
  SL_ASSERT_EQ_INT(rows, d.fin.generated);
  SL_ASSERT_EQ_INT(sl_bench_hist_count(&ev), rows);
  SL_ASSERT_EQ_INT(sl_bench_hist_count(&pt), rows);
  SL_ASSERT_EQ_INT(ev.n_clamped, 0); /* no row seen before it was made */
  SL_ASSERT_EQ_INT(pt.n_clamped, 0);
  /* A row is ingested after it is generated: each processing-time latency
   * is at most its event-time latency, so every quantile is too. */
  for (double q = 0.1; q < 1.0; q += 0.1)
    SL_ASSERT_LE_INT(sl_bench_hist_quantile(&pt, q),
                     sl_bench_hist_quantile(&ev, q));
  SL_ASSERT_LE_INT(sl_bench_hist_max(&pt), sl_bench_hist_max(&ev));
  sl_lat_shared_destroy(&lat);
  sl_workload_remove_rings(&w, prefix, rings);
  sl_workload_close(&w);
}

SL_TEST(zipf_keys_follow_the_law) {
  sl_workload_t w;
  sl_workload_defaults(&w);
  w.keys = 100;
  w.zipf = 1.0;
  SL_ASSERT_EQ_INT(sl_workload_init(&w), 0);
  /* Exact inversion: u just below the cumulative mass of rank 1 gives key
   * 0, just above gives key 1; H_100 = 5.187377517639621. */
  double p0 = 1.0 / 5.187377517639621;
  SL_ASSERT_EQ_INT(sl_workload_zipf_key(&w, p0 - 1e-9), 0);
  SL_ASSERT_EQ_INT(sl_workload_zipf_key(&w, p0 + 1e-9), 1);
  SL_ASSERT_EQ_INT(sl_workload_zipf_key(&w, 0.999999999), 99);
  SL_ASSERT_EQ_INT(sl_workload_zipf_key(&w, 0.0), 0);
  sl_workload_close(&w);
}

SL_TEST(ring_source_errors_name_the_ring) {
  char prefix[4200];
  snprintf(prefix, sizeof(prefix), "%s/missing", sl_test_dir());
  sl_workload_t w;
  sl_workload_defaults(&w);
  SL_ASSERT_EQ_INT(sl_workload_init(&w), 0);
  const sl_source_vt_t *vt;
  void *ctx;
  SL_ASSERT_EQ_INT(sl_ring_source_create(&w, prefix, 0, &vt, &ctx, NULL),
                   SL_OK);
  sl_split_list_t *l = NULL;
  SL_ASSERT_EQ_INT(sl_split_list_create(&l), SL_OK);
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(vt->plan(ctx, 1, l, &err), SL_EIO);
  char want[4400];
  snprintf(want, sizeof(want), "ring source: cannot open the ring "
           "'%s.keys.0': No such file or directory", prefix);
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
  /* A ring exists, but a reader cannot start from a checkpointed position. */
  sl_ring_t rings[1];
  SL_ASSERT_EQ_INT(sl_workload_create_rings(&w, prefix, rings), 0);
  sl_split_list_destroy(l);
  SL_ASSERT_EQ_INT(sl_split_list_create(&l), SL_OK);
  SL_ASSERT_EQ_INT(vt->plan(ctx, 1, l, NULL), SL_OK);
  SL_ASSERT_EQ_INT(sl_split_list_count(l), 1);
  uint64_t pos = 7;
  sl_split_init_t si = {0, sl_split_list_id(l, 0), (const uint8_t *)&pos,
                        sizeof(pos)};
  sl_reader_init_t ri = {0, 1, &si, 1, NULL, NULL};
  void *reader = NULL;
  err = NULL;
  SL_ASSERT_EQ_INT(vt->reader_open(ctx, &ri, &reader, &err), SL_ENOTSUP);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "does not replay") != NULL);
  sl_error_destroy(err);
  vt->destroy(ctx);
  sl_split_list_destroy(l);
  sl_workload_remove_rings(&w, prefix, rings);
  sl_workload_close(&w);
}
