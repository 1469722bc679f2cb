/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice side of the streaming benchmarks: a source that reads the
 * driver's shared-memory rings (workload.h) and a sink that records
 * latency into histograms (hist.h).  They use the public connector API
 * (sluice/sl_connector.h) like any user connector.
 *
 * Ring source.  One split per ring of a stream; split s is read by subtask
 * s % parallelism.  Rows carry the event's fields, `date_time` (timestamp:
 * the driver's generation stamp, CLOCK_MONOTONIC microseconds, so it is
 * the event time and the latency origin) and `ingest_time` (timestamp: when
 * the reader took the event out of the ring, read once per batch of up to
 * 256 events).  Schemas:
 *
 *   keys, left, right  key int64, value int64, date_time, ingest_time
 *   bid      auction, bidder, price int64; channel, url string; date_time;
 *            extra string; ingest_time
 *   person   id int64; name, email_address, credit_card, city, state
 *            string; date_time; extra string; ingest_time
 *   auction  id int64; item_name, description string; initial_bid,
 *            reserve int64; date_time, expires timestamp; seller,
 *            category int64; extra string; ingest_time
 *
 * A ring does not replay: the position of a split is the count of events
 * read, and opening a reader at a position fails with a clear error (a
 * benchmark run is not restored).  The reader ends when the driver is done
 * and its rings are empty.
 *
 * Latency sink.  For every row: event-time latency = now - the row's
 * `time_field` (date_time for pass-through rows, event_time for a window
 * result: its largest contributing event time), processing-time latency =
 * now - `ingest_field` (a window query carries max(ingest_time)); both in
 * ns, CLOCK_MONOTONIC.  Each writer records into its own histograms and
 * merges them into the shared ones under a mutex about every 20 ms and at
 * close; sl_lat_shared_take() swaps the shared ones out for a sampler
 * thread.  -U and -D rows are counted but not recorded (they are not
 * results a user waits for).
 */
#ifndef SL_BENCH_STREAM_IO_H
#define SL_BENCH_STREAM_IO_H

#include <pthread.h>

#include "hist.h"
#include "sluice/sluice.h"
#include "workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The schema of a workload stream (one reference for the caller). */
int sl_ring_stream_schema(const sl_workload_t *w, uint32_t stream,
                          sl_schema_t **out, sl_error_t **out_err);
/**
 * @brief A source over the rings of one stream, created beforehand by the
 * driver side (sl_workload_create_rings) under prefix.  w and prefix are
 * borrowed and must outlive the job.
 */
int sl_ring_source_create(const sl_workload_t *w, const char *prefix,
                          uint32_t stream, const sl_source_vt_t **out_vt,
                          void **out_ctx, sl_error_t **out_err);

/**
 * @brief Fill b (reset, with the event's stream schema) with the row of a
 * Nexmark event, as the ring source does: its fields, then date_time and
 * ingest_time as given.
 */
void sl_nexmark_row(const sl_nex_event_t *ev, int64_t date_time_us,
                    int64_t ingest_us, sl_row_builder_t *b);

typedef struct sl_lat_shared_s {
  pthread_mutex_t mu;
  sl_bench_hist_t event_time;   /* ns */
  sl_bench_hist_t proc_time;    /* ns */
  uint64_t rows;                /* every row written, retractions too */
} sl_lat_shared_t;

int sl_lat_shared_init(sl_lat_shared_t *s);
void sl_lat_shared_destroy(sl_lat_shared_t *s);
/** @brief Move what the writers merged so far into *out (reset first) and
 * reset the shared histograms; returns the rows written since the last
 * take. */
uint64_t sl_lat_shared_take(sl_lat_shared_t *s, sl_bench_hist_t *out_event,
                            sl_bench_hist_t *out_proc);

/**
 * @brief A sink that records latency (above).  time_field must be a
 * timestamp or int64 microseconds field; ingest_field may be NULL (no
 * processing-time latency).  shared is borrowed.
 */
int sl_lat_sink_create(sl_lat_shared_t *shared, const char *time_field,
                       const char *ingest_field, const sl_sink_vt_t **out_vt,
                       void **out_ctx);
/**
 * @brief The same for a join result: the latency origin is the larger of
 * two fields (time_field2, ingest_field2 may be NULL).
 */
int sl_lat_sink_create2(sl_lat_shared_t *shared, const char *time_field,
                        const char *time_field2, const char *ingest_field,
                        const char *ingest_field2,
                        const sl_sink_vt_t **out_vt, void **out_ctx);

/** @brief CLOCK_MONOTONIC in microseconds (the driver's stamps' clock). */
int64_t sl_mono_us(void);

#ifdef __cplusplus
}
#endif
#endif
