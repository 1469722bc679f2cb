/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The queries of the streaming benchmarks (BENCHMARKS.md), built on the
 * public job API from source streams the caller provides: the benchmark
 * gives ring sources (stream_io.h), the tests give sources of rows they
 * chose, so that each query's output can be checked against a reference
 * computed another way (bench/tests/test_queries.c).
 *
 * Input streams and their schemas are those of stream_io.h (bid, person,
 * auction; keys; left, right).  Every query's output carries the latency
 * origins its query_t names: an event time (time_field) and max(ingest_time)
 * (ingest_field) of the input rows the result depends on.
 *
 *   q0      Nexmark pass-through: bids -> (auction, bidder, price,
 *           date_time, extra)
 *   q1      Nexmark currency conversion: price * 0.908 (float64)
 *   q2      Nexmark selection: auction % 123 == 0 -> (auction, price)
 *   q3      Nexmark local item suggestion: auctions of category 10 joined
 *           with their sellers from OR, ID or CA (regular join)
 *   q4      Nexmark average price per category: the highest bid of each
 *           auction among the bids between its start and its expiry, then
 *           the average of those per category, updated as they change
 *   q5      Nexmark hot items: bids per auction over sliding windows of
 *           10 s every 2 s, then the auctions with the most bids of each
 *           window
 *   q7      Nexmark highest bid: every bid whose price is the highest of
 *           its tumbling 10 s window (auction, price, bidder, date_time,
 *           extra)
 *   q8      Nexmark new users: persons who opened an auction in the same
 *           10 s tumbling window (window join, then once per person and
 *           window)
 *   count   keyed running count with Zipf-skewed keys:
 *           key_by(key) -> count(), max(date_time) upsert aggregate
 *   wagg    Karimov et al.'s windowed aggregation: sum(value) per key over
 *           sliding windows of 8 s every 4 s
 *   wjoin   Karimov et al.'s windowed join: left ⋈ right on key within
 *           tumbling 2 s windows
 */
#ifndef SL_BENCH_QUERIES_H
#define SL_BENCH_QUERIES_H

#include "sluice/sluice.h"
#include "workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_query_s {
  const char *name;
  sl_workload_kind_t workload;
  uint32_t needed;          /* streams read (workload.h) */
  const char *time_field;   /* latency origins of the output */
  const char *time_field2;  /* NULL, or the larger of the two (joins) */
  const char *ingest_field;
  const char *ingest_field2;
  const char *what;
} sl_query_t;

/** @brief The query of that name, or NULL. */
const sl_query_t *sl_query_find(const char *name);
/** @brief The names of all queries, separated by sep (static storage). */
const char *sl_query_names(void);

/** Returns the source stream of a workload stream (with its watermarks). */
typedef sl_stream_t *(*sl_query_source_fn)(void *user, sl_job_t *job,
                                           const char *stream);

/**
 * @brief Add the query's operators to job, reading the streams it needs
 * from src.  Returns the output stream (the caller adds the sink) or NULL
 * with *out_err.  Schemas the query creates are appended to schemas
 * (room for 4); the caller unrefs them after the job is destroyed.
 */
sl_stream_t *sl_query_build(sl_job_t *job, const sl_query_t *q,
                            sl_query_source_fn src, void *src_user,
                            sl_schema_t **schemas, uint32_t *n_schemas,
                            sl_error_t **out_err);

#ifdef __cplusplus
}
#endif
#endif
