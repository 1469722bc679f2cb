/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka source (src/connectors/kafka) against a real broker
 * (tests/tools/sl_kafka.c), one broker per test.  Records (key, seq) with
 * per-key sequence numbers, each key in one partition, go through a keyed
 * checker that keeps (count, sum) per key in state and fails on seq !=
 * count: a record read twice, or one skipped, after a restart or a restore
 * shows up as a violation; the final counts and sums are compared with the
 * produced ones.  The tests wait for observable effects (rows applied,
 * offsets committed), never for time to pass.  Not under TSan
 * (librdkafka's C11 threads; docs/testing-servers.md).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "sl_kafka.h"
#include "sl_kafka_client.h"
#include "sl_test.h"

enum { N_KEYS = 10 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t out_count[N_KEYS], out_sum[N_KEYS];
static int64_t n_processed, fail_at = -1;
static int violations;
static char violation_msg[256];
/* Rows of the collecting sink, as JSON lines. */
static sl_bytes_t collected;

static void reset(void) {
  pthread_mutex_lock(&lock);
  memset(out_count, 0, sizeof(out_count));
  memset(out_sum, 0, sizeof(out_sum));
  n_processed = 0;
  fail_at = -1;
  violations = 0;
  sl_bytes_close(&collected);
  sl_bytes_init(&collected);
  pthread_mutex_unlock(&lock);
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void) {
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
}

static sl_kafka_t *start_kafka(void) {
  sl_kafka_opts_t o;
  sl_kafka_opts_init(&o);
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_start(&o, &k, &err), err);
  return k;
}

static void create_topic(sl_kafka_t *k, const char *topic, int partitions) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_create_topic(k, topic, partitions, 1, NULL, &err),
                 err);
}

static rd_kafka_t *producer(const sl_kafka_t *k) {
  rd_kafka_t *p = NULL;
  sl_error_t *err = NULL;
  const char *set[] = {"enable.idempotence", "true", NULL};
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_PRODUCER, set, &p,
                           &err),
                 err);
  return p;
}

static void produce(rd_kafka_t *p, const char *topic, int partition,
                    const char *value, const char *key, int64_t ts_ms,
                    const char *hname, const char *hval) {
  rd_kafka_headers_t *h = NULL;
  if (hname) {
    h = rd_kafka_headers_new(1);
    rd_kafka_header_add(h, hname, -1, hval, hval ? -1 : 0);
  }
  rd_kafka_resp_err_t e = rd_kafka_producev(
      p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
      RD_KAFKA_V_VALUE((void *)value, value ? strlen(value) : 0),
      RD_KAFKA_V_KEY((void *)key, key ? strlen(key) : 0),
      RD_KAFKA_V_TIMESTAMP(ts_ms), RD_KAFKA_V_HEADERS(h),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (h) rd_kafka_headers_destroy(h);
    SL_TEST_FAIL("produce: %s", rd_kafka_err2str(e));
  }
}

static void flush(rd_kafka_t *p) {
  SL_ASSERT_EQ_INT(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  SL_ASSERT_EQ_INT(rd_kafka_outq_len(p), 0);
}

/* seq first..first+n-1 of every key, key k in partition k % parts. */
static void produce_seq(rd_kafka_t *p, const char *topic, int parts,
                        int first, int n) {
  char v[96];
  for (int s = first; s < first + n; s++)
    for (int k = 0; k < N_KEYS; k++) {
      snprintf(v, sizeof(v), "{\"key\":%d,\"seq\":%d}", k, s);
      produce(p, topic, k % parts, v, NULL, 0, NULL, NULL);
    }
  flush(p);
}

/* ------------------------------------------------------------------ */
/* The keyed checker and the sinks */

static int chk_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_t *st;
  sl_state_desc_t d = {"count_and_sum", SL_STATE_VALUE, 1, NULL, NULL};
  int rc = sl_ctx_state(ctx, &d, &st);
  sl_ctx_set_local(ctx, st);
  return rc;
}

static int chk_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *st = sl_ctx_local(ctx);
  pthread_mutex_lock(&lock);
  bool is_fail = n_processed++ == fail_at;
  if (is_fail) fail_at = -1;
  pthread_mutex_unlock(&lock);
  if (is_fail) return sl_ctx_fail(ctx, SL_EUSER, "injected failure");
  int64_t key = sl_row_get_i64(row, 0), seq = sl_row_get_i64(row, 1);
  int64_t acc[2] = {0, 0};
  sl_slice_t v;
  int rc = sl_value_get(st, &v);
  if (rc == SL_OK) memcpy(acc, v.ptr, 16);
  else if (rc != SL_ENOTFOUND) return rc;
  if (seq != acc[0]) {
    pthread_mutex_lock(&lock);
    if (violations++ == 0)
      snprintf(violation_msg, sizeof(violation_msg),
               "key %lld: record seq %lld but the state has count %lld",
               (long long)key, (long long)seq, (long long)acc[0]);
    pthread_mutex_unlock(&lock);
    return sl_ctx_fail(ctx, SL_EUSER, "exactly-once violated");
  }
  acc[0]++;
  acc[1] += seq;
  if ((rc = sl_value_put(st, acc, 16)) != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, key);
  sl_row_builder_set_i64(b, 1, acc[0]);
  sl_row_builder_set_i64(b, 2, acc[1]);
  return sl_ctx_emit_builder(ctx);
}

static int sink_open(void *c, const sl_sink_init_t *i, void **out,
                     sl_error_t **e) {
  (void)i, (void)e;
  *out = c;
  return SL_OK;
}
static int upsert_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w, (void)e;
  int64_t k = sl_row_get_i64(row, 0);
  if (k < 0 || k >= N_KEYS) return SL_EINVAL;
  pthread_mutex_lock(&lock);
  out_count[k] = sl_row_get_i64(row, 1);
  out_sum[k] = sl_row_get_i64(row, 2);
  pthread_mutex_unlock(&lock);
  return SL_OK;
}
static int collect_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w, (void)e;
  pthread_mutex_lock(&lock);
  int rc = sl_json_format(row, false, &collected);
  pthread_mutex_unlock(&lock);
  return rc;
}
static int sink_close(void *w, bool ok, sl_error_t **e) {
  (void)w, (void)ok, (void)e;
  return SL_OK;
}
static void sink_destroy(void *c) { (void)c; }
static const sl_sink_vt_t upsert_vt = {"upsert", sink_open, upsert_write,
                                       NULL, sink_close, sink_destroy};
static const sl_sink_vt_t collect_vt = {"collect", sink_open, collect_write,
                                        NULL, sink_close, sink_destroy};

static sl_schema_t *seq_schema(void) {
  sl_field_t f[2] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                     {"seq", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, 2, &s, NULL));
  return s;
}

static void src_cfg(sl_kafka_source_config_t *c, const sl_kafka_t *k,
                    const char *const *topic, const sl_schema_t *schema) {
  sl_kafka_source_config_init(c);
  c->bootstrap_servers = sl_kafka_bootstrap(k);
  c->topics = topic;
  c->n_topics = 1;
  c->schema = schema;
  c->timeout_ms = 30000;
}

static char ckdir[4300];

/* source (parallelism 2) -> key_by key -> checker -> upsert sink. */
static sl_job_t *keyed_job_par(const sl_kafka_source_config_t *kc,
                               const char *restore_from, uint32_t par) {
  snprintf(ckdir, sizeof(ckdir), "%s/ck", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "kafka";
  cfg.parallelism = par;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = ckdir;
  cfg.restore_from = restore_from;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 2;
  sl_field_t of[3] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                      {"count", {SL_TYPE_INT64, 0, 0, false}},
                      {"sum", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *out_schema, *schema;
  SL_ASSERT_OK(sl_schema_create(of, 3, &out_schema, NULL));
  const sl_source_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_source_create(kc, &vt, &ctx, &schema, &err), err);
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "kafka-in", vt, ctx, schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {chk_open, chk_process, NULL, NULL, NULL, NULL};
  s = sl_stream_process(s, "checker", out_schema, &fns, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "upsert", &upsert_vt, NULL));
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  return job;
}

static sl_job_t *keyed_job(const sl_kafka_source_config_t *kc,
                           const char *restore_from) {
  return keyed_job_par(kc, restore_from, 2);
}

/* A bounded job, parallelism 1, rows into `collected`; returns the job's
 * result and its error. */
static int run_collect(const sl_kafka_source_config_t *kc,
                       sl_error_t **out_err) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "collect";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_source_create(kc, &vt, &ctx, &schema, &err), err);
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "kafka-in", vt, ctx, schema);
  SL_ASSERT_OK(sl_stream_sink(s, "collect", &collect_vt, NULL));
  sl_schema_unref(schema);
  int rc = sl_job_run(job, out_err);
  sl_job_destroy(job);
  return rc;
}

static bool counts_are(int64_t c) {
  pthread_mutex_lock(&lock);
  bool ok = true;
  for (int k = 0; k < N_KEYS; k++) ok &= out_count[k] == c;
  pthread_mutex_unlock(&lock);
  return ok;
}

static void wait_counts(int64_t c) {
  for (int64_t t0 = mono_ms(); !counts_are(c); nap()) {
    if (violations) SL_TEST_FAIL("%s", violation_msg);
    if (mono_ms() - t0 > 120000)
      SL_TEST_FAIL("timed out waiting for counts %lld (key 0: %lld)",
                   (long long)c, (long long)out_count[0]);
  }
}

static uint64_t ckpt(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(job, &id, &err), err);
  SL_ASSERT_OK(sl_job_wait_checkpoint(job, id, 60000, NULL));
  return id;
}

static void stop(sl_job_t *job) {
  sl_job_cancel(job);
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_job_wait(job, &err), SL_ECANCELED);
  sl_error_destroy(err);
  sl_job_destroy(job);
}

static void check_sums(int64_t n) {
  pthread_mutex_lock(&lock);
  for (int k = 0; k < N_KEYS; k++) {
    SL_ASSERT_EQ_INT(out_count[k], n);
    SL_ASSERT_EQ_INT(out_sum[k], n * (n - 1) / 2);
  }
  pthread_mutex_unlock(&lock);
}

/* Wait until the group's committed offset of topic/partition is off. */
static void wait_committed(const sl_kafka_t *k, const char *group,
                           const char *topic, int part, int64_t off) {
  int64_t got = -2;
  for (int64_t t0 = mono_ms(); got != off; nap()) {
    sl_error_t *err = NULL;
    /* The group's coordinator may still be moving (NOT_COORDINATOR):
     * ask again until the deadline. */
    if (sl_kc_committed(sl_kafka_bootstrap(k), group, topic, part, &got,
                        NULL, &err) != SL_OK)
      got = -2;
    if (got != off && mono_ms() - t0 > 60000)
      SL_TEST_FAIL("group %s %s/%d: committed %lld, expected %lld (%s)",
                   group, topic, part, (long long)got, (long long)off,
                   err ? sl_error_message(err) : "no error");
    sl_error_destroy(err);
  }
}

/* ------------------------------------------------------------------ */

/*
 * Two partitions into a keyed job: exact counts and sums; a failure of the
 * checker restarts the job from checkpoint 1 in the process and the
 * partitions continue at the offsets of the checkpoint, each record once;
 * the offsets of the snapshots are committed to the group; a new job
 * restoring checkpoint 2 at parallelism 3 reads exactly what was produced
 * after it.
 */
SL_TEST(keyed_restart_and_restore) {
  reset();
  sl_kafka_t *k = start_kafka();
  create_topic(k, "deltas", 2);
  rd_kafka_t *p = producer(k);
  produce_seq(p, "deltas", 2, 0, 100);
  sl_schema_t *schema = seq_schema();
  const char *topics[] = {"deltas"};
  sl_kafka_source_config_t kc;
  src_cfg(&kc, k, topics, schema);
  kc.group_id = "sl-it-group";
  kc.discovery_interval_ms = 0;
  sl_job_t *job = keyed_job(&kc, NULL);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_counts(100);
  check_sums(100);
  ckpt(job);
  /* Checkpoint 1's offsets reach the group when it completes. */
  wait_committed(k, "sl-it-group", "deltas", 0, 500);
  wait_committed(k, "sl-it-group", "deltas", 1, 500);
  /* The checker fails on the 20th record after checkpoint 1. */
  pthread_mutex_lock(&lock);
  fail_at = n_processed + 20;
  pthread_mutex_unlock(&lock);
  produce_seq(p, "deltas", 2, 100, 50);
  wait_counts(150);
  check_sums(150);
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  SL_ASSERT_EQ_INT(violations, 0);
  uint64_t id = ckpt(job);
  /* 5 keys x 150 records in each partition. */
  wait_committed(k, "sl-it-group", "deltas", 0, 750);
  wait_committed(k, "sl-it-group", "deltas", 1, 750);
  stop(job);

  produce_seq(p, "deltas", 2, 150, 50);
  char from[4400];
  snprintf(from, sizeof(from), "%s/kafka/chk-%llu", ckdir,
           (unsigned long long)id);
  pthread_mutex_lock(&lock);
  n_processed = 0;
  pthread_mutex_unlock(&lock);
  /* At parallelism 3: the partitions' positions come back to the
   * enumerator and are assigned again. */
  job = keyed_job_par(&kc, from, 3);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_counts(200);
  check_sums(200);
  SL_ASSERT_EQ_INT(n_processed, N_KEYS * 50);
  SL_ASSERT_EQ_INT(violations, 0);
  stop(job);
  rd_kafka_destroy(p);
  sl_schema_unref(schema);
  sl_kafka_destroy(k);
}

/* One transaction of records {"key":0,"seq":s}, s in first..first+n-1. */
static void txn(rd_kafka_t *p, const char *topic, int first, int n,
                bool commit) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_txn_result(rd_kafka_begin_transaction(p), "begin",
                                  &err), err);
  char v[64];
  for (int s = first; s < first + n; s++) {
    snprintf(v, sizeof(v), "{\"key\":0,\"seq\":%d}", s);
    produce(p, topic, 0, v, NULL, 0, NULL, NULL);
  }
  if (commit) {
    SL_ASSERT_OK_E(sl_kc_txn_result(rd_kafka_commit_transaction(p, 30000),
                                    "commit", &err), err);
  } else {
    flush(p);
    SL_ASSERT_OK_E(sl_kc_txn_result(rd_kafka_abort_transaction(p, 30000),
                                    "abort", &err), err);
  }
}

static char *take_collected(void) {
  pthread_mutex_lock(&lock);
  char *s = strndup(collected.data ? (char *)collected.data : "",
                    collected.len);
  sl_bytes_close(&collected);
  sl_bytes_init(&collected);
  pthread_mutex_unlock(&lock);
  return s;
}

/*
 * Bounded reads: read_committed hides an aborted transaction, and the
 * source ends on a partition whose last record is a transaction's control
 * record; metadata fields (timestamp, headers, key, partition, offset);
 * format string; a malformed JSON record and an unknown topic fail with
 * messages naming them.
 */
SL_TEST(bounded_formats_and_errors) {
  reset();
  sl_kafka_t *k = start_kafka();
  sl_error_t *err = NULL;
  create_topic(k, "tx", 1);
  rd_kafka_t *tp = NULL;
  SL_ASSERT_OK_E(sl_kc_txn_producer(sl_kafka_bootstrap(k), "sl-it-src-txn",
                                    NULL, &tp, &err), err);
  txn(tp, "tx", 0, 3, true);
  txn(tp, "tx", 100, 2, false);
  txn(tp, "tx", 3, 1, true);
  rd_kafka_destroy(tp);
  int64_t lo, hi;
  SL_ASSERT_OK_E(sl_kafka_watermarks(k, "tx", 0, &lo, &hi, &err), err);
  SL_ASSERT_EQ_INT(hi, 9); /* 3+1, 2+1, 1+1: ends in a control record */

  sl_schema_t *schema = seq_schema();
  const char *tx[] = {"tx"};
  sl_kafka_source_config_t kc;
  src_cfg(&kc, k, tx, schema);
  kc.bounded = true;
  SL_ASSERT_OK_E(run_collect(&kc, &err), err);
  char *got = take_collected();
  SL_ASSERT_EQ_STR(got, "{\"key\":0,\"seq\":0}\n{\"key\":0,\"seq\":1}\n"
                        "{\"key\":0,\"seq\":2}\n{\"key\":0,\"seq\":3}\n");
  free(got);
  /* read_uncommitted shows the aborted records. */
  kc.read_uncommitted = true;
  SL_ASSERT_OK_E(run_collect(&kc, &err), err);
  got = take_collected();
  SL_ASSERT_EQ_STR(got, "{\"key\":0,\"seq\":0}\n{\"key\":0,\"seq\":1}\n"
                        "{\"key\":0,\"seq\":2}\n{\"key\":0,\"seq\":100}\n"
                        "{\"key\":0,\"seq\":101}\n{\"key\":0,\"seq\":3}\n");
  free(got);

  /* Metadata fields. */
  create_topic(k, "meta", 1);
  rd_kafka_t *p = producer(k);
  produce(p, "meta", 0, "{\"key\":7,\"seq\":0}", "k7", 1700000000123LL, "h",
          "v\"1");
  produce(p, "meta", 0, "{\"key\":7,\"seq\":1}", NULL, 1700000000124LL, NULL,
          NULL);
  flush(p);
  const char *meta[] = {"meta"};
  src_cfg(&kc, k, meta, schema);
  kc.bounded = true;
  kc.timestamp_field = "ts";
  kc.headers_field = "headers";
  kc.key_field = "k";
  kc.partition_field = "partition";
  kc.offset_field = "offset";
  SL_ASSERT_OK_E(run_collect(&kc, &err), err);
  got = take_collected();
  SL_ASSERT_EQ_STR(got,
                   "{\"key\":7,\"seq\":0,\"ts\":\"2023-11-14T22:13:20.123000Z\","
                   "\"headers\":\"{\\\"h\\\":\\\"v\\\\\\\"1\\\"}\",\"k\":"
                   "\"k7\",\"partition\":0,\"offset\":0}\n"
                   "{\"key\":7,\"seq\":1,\"ts\":\"2023-11-14T22:13:20.124000Z\","
                   "\"headers\":\"{}\",\"k\":null,\"partition\":0,"
                   "\"offset\":1}\n");
  free(got);
  /* Format string: the whole value. */
  sl_field_t vf = {"line", {SL_TYPE_STRING, 0, 0, true}};
  sl_schema_t *line;
  SL_ASSERT_OK(sl_schema_create(&vf, 1, &line, NULL));
  src_cfg(&kc, k, meta, line);
  kc.bounded = true;
  kc.format = SL_KAFKA_FORMAT_STRING;
  SL_ASSERT_OK_E(run_collect(&kc, &err), err);
  got = take_collected();
  SL_ASSERT_EQ_STR(got, "{\"line\":\"{\\\"key\\\":7,\\\"seq\\\":0}\"}\n"
                        "{\"line\":\"{\\\"key\\\":7,\\\"seq\\\":1}\"}\n");
  free(got);
  sl_schema_unref(line);

  /* Malformed JSON at offset 1. */
  create_topic(k, "bad", 1);
  produce(p, "bad", 0, "{\"key\":1,\"seq\":0}", NULL, 0, NULL, NULL);
  produce(p, "bad", 0, "{\"key\":1,", NULL, 0, NULL, NULL);
  flush(p);
  const char *bad[] = {"bad"};
  src_cfg(&kc, k, bad, schema);
  kc.bounded = true;
  int rc = run_collect(&kc, &err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  printf("malformed: %s\n", sl_error_message(err));
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "operator 'kafka-in' (subtask 1 of 1): kafka source: "
                   "topic 'bad' partition 0 offset 1: invalid JSON at "
                   "column 9: string or '}' expected near end of file");
  sl_error_destroy(err);
  err = NULL;
  free(take_collected());

  /* Unknown topic. */
  const char *nope[] = {"nope"};
  src_cfg(&kc, k, nope, schema);
  kc.bounded = true;
  rc = run_collect(&kc, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
  char want[512];
  snprintf(want, sizeof(want),
           "operator 'kafka-in' (subtask 1 of 1): enumerator of source "
           "'kafka-in': kafka source: topic 'nope' does not exist on the "
           "cluster at %s",
           sl_kafka_bootstrap(k));
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
  err = NULL;

  rd_kafka_destroy(p);
  sl_schema_unref(schema);
  sl_kafka_destroy(k);
}

/* Delete the records of topic/partition before offset `before` (what
 * retention does). */
static void delete_records(const sl_kafka_t *k, const char *topic, int part,
                           int64_t before) {
  rd_kafka_t *a = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_PRODUCER, NULL, &a,
                           &err), err);
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, topic, part)->offset = before;
  rd_kafka_DeleteRecords_t *dr = rd_kafka_DeleteRecords_new(l);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_queue_t *q = rd_kafka_queue_new(a);
  rd_kafka_DeleteRecords(a, &dr, 1, NULL, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
  SL_ASSERT_TRUE(ev != NULL);
  SL_ASSERT_EQ_INT(rd_kafka_event_error(ev), RD_KAFKA_RESP_ERR_NO_ERROR);
  const rd_kafka_topic_partition_list_t *res =
      rd_kafka_DeleteRecords_result_offsets(
          rd_kafka_event_DeleteRecords_result(ev));
  SL_ASSERT_EQ_INT(res->elems[0].err, RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_event_destroy(ev);
  rd_kafka_DeleteRecords_destroy(dr);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(a);
}

static void add_partitions(const sl_kafka_t *k, const char *topic, int n) {
  rd_kafka_t *a = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_PRODUCER, NULL, &a,
                           &err), err);
  char es[256];
  rd_kafka_NewPartitions_t *np =
      rd_kafka_NewPartitions_new(topic, (size_t)n, es, sizeof(es));
  SL_ASSERT_TRUE(np != NULL);
  rd_kafka_queue_t *q = rd_kafka_queue_new(a);
  rd_kafka_CreatePartitions(a, &np, 1, NULL, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
  SL_ASSERT_TRUE(ev != NULL);
  SL_ASSERT_EQ_INT(rd_kafka_event_error(ev), RD_KAFKA_RESP_ERR_NO_ERROR);
  size_t cnt;
  const rd_kafka_topic_result_t **tr = rd_kafka_CreatePartitions_result_topics(
      rd_kafka_event_CreatePartitions_result(ev), &cnt);
  SL_ASSERT_EQ_INT(cnt, 1);
  SL_ASSERT_EQ_INT(rd_kafka_topic_result_error(tr[0]),
                   RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_event_destroy(ev);
  rd_kafka_NewPartitions_destroy(np);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(a);
}

/*
 * A partition added while the job runs is found by discovery and read from
 * its earliest offset; then a checkpoint whose offset retention (here
 * DeleteRecords) removed fails the restore with a message naming topic,
 * partition and offset, instead of skipping records.
 */
SL_TEST(discovery_and_deleted_offset) {
  reset();
  sl_kafka_t *k = start_kafka();
  create_topic(k, "grow", 1);
  rd_kafka_t *p = producer(k);
  produce_seq(p, "grow", 1, 0, 10);
  sl_schema_t *schema = seq_schema();
  const char *topics[] = {"grow"};
  sl_kafka_source_config_t kc;
  src_cfg(&kc, k, topics, schema);
  kc.discovery_interval_ms = 50;
  sl_job_t *job = keyed_job(&kc, NULL);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_counts(10);
  /* Partition 1 appears: keys go to k % 2 from now on.  Records written
   * to it before discovery finds it are read too (earliest). */
  add_partitions(k, "grow", 2);
  int leader;
  sl_error_t *lerr = NULL;
  SL_ASSERT_OK_E(sl_kafka_wait_leader(k, "grow", 1, -1, 60000, &leader,
                                      &lerr), lerr);
  rd_kafka_destroy(p); /* a new producer knows the new partition */
  p = producer(k);
  produce_seq(p, "grow", 2, 10, 10);
  wait_counts(20);
  check_sums(20);
  SL_ASSERT_EQ_INT(violations, 0);
  uint64_t id = ckpt(job);
  stop(job);

  /* Retention removes partition 0 up to offset 170: the checkpoint's
   * 100 + 5 x 10 = 150 is gone. */
  produce_seq(p, "grow", 2, 20, 10);
  delete_records(k, "grow", 0, 170);
  char from[4400];
  snprintf(from, sizeof(from), "%s/kafka/chk-%llu", ckdir,
           (unsigned long long)id);
  job = keyed_job(&kc, from);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "operator 'kafka-in' (subtask 2 of 2): kafka source: "
                   "topic 'grow' partition 0: offset 150 is no "
                   "longer in the log (its earliest offset is 170: deleted "
                   "by retention?); refusing to skip records");
  sl_error_destroy(err);
  sl_job_destroy(job);
  rd_kafka_destroy(p);
  sl_schema_unref(schema);
  sl_kafka_destroy(k);
}

/* The values of `collected`'s rows' seq, "s1,s2,...". */
static char *seqs(void) {
  char *all = take_collected(), *o = calloc(1, strlen(all) + 1), *q = all;
  SL_ASSERT_TRUE(o != NULL);
  while ((q = strstr(q, "\"seq\":")) != NULL) {
    q += 6;
    if (o[0]) strcat(o, ",");
    strncat(o, q, strcspn(q, ",}"));
  }
  free(all);
  return o;
}

/* Commit offset off of topic/0 for group. */
static void commit_group(const sl_kafka_t *k, const char *group,
                         const char *topic, int64_t off) {
  rd_kafka_t *c = NULL;
  sl_error_t *err = NULL;
  const char *set[] = {"group.id", group, NULL};
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_CONSUMER, set, &c,
                           &err), err);
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, topic, 0)->offset = off;
  SL_ASSERT_EQ_INT(rd_kafka_commit(c, l, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_consumer_close(c);
  rd_kafka_destroy(c);
}

/*
 * Start positions of a bounded read of seq 0..9 (record i has timestamp
 * 1000 + 10 i ms): earliest, latest, the group's committed offset (and
 * earliest for a group without one), a timestamp, given offsets; and the
 * CSV format.
 */
SL_TEST(start_positions_and_csv) {
  reset();
  sl_kafka_t *k = start_kafka();
  create_topic(k, "st", 1);
  rd_kafka_t *p = producer(k);
  char v[64];
  for (int i = 0; i < 10; i++) {
    snprintf(v, sizeof(v), "{\"key\":0,\"seq\":%d}", i);
    produce(p, "st", 0, v, NULL, 1000 + 10 * i, NULL, NULL);
  }
  flush(p);
  sl_schema_t *schema = seq_schema();
  const char *st[] = {"st"};
  sl_kafka_source_config_t kc;
  sl_error_t *err = NULL;
  char *got;
#define READ_AS(setup, want)                                               \
  do {                                                                     \
    src_cfg(&kc, k, st, schema);                                           \
    kc.bounded = true;                                                     \
    setup;                                                                 \
    SL_ASSERT_OK_E(run_collect(&kc, &err), err);                           \
    got = seqs();                                                          \
    SL_ASSERT_EQ_STR(got, want);                                           \
    free(got);                                                             \
  } while (0)
  READ_AS((void)0, "0,1,2,3,4,5,6,7,8,9");
  READ_AS(kc.start = SL_KAFKA_START_LATEST, "");
  commit_group(k, "g-st", "st", 6);
  READ_AS((kc.start = SL_KAFKA_START_COMMITTED, kc.group_id = "g-st"),
          "6,7,8,9");
  READ_AS((kc.start = SL_KAFKA_START_COMMITTED, kc.group_id = "g-none"),
          "0,1,2,3,4,5,6,7,8,9");
  READ_AS((kc.start = SL_KAFKA_START_TIMESTAMP,
           kc.start_timestamp_ms = 1035), "4,5,6,7,8,9");
  READ_AS((kc.start = SL_KAFKA_START_TIMESTAMP,
           kc.start_timestamp_ms = 5000), "");
  sl_kafka_partition_offset_t po = {"st", 0, 7};
  READ_AS((kc.start = SL_KAFKA_START_OFFSETS, kc.start_offsets = &po,
           kc.n_start_offsets = 1), "7,8,9");
  /* A given offset before the log's start is refused, not moved. */
  delete_records(k, "st", 0, 3);
  po.offset = 1;
  src_cfg(&kc, k, st, schema);
  kc.bounded = true;
  kc.start = SL_KAFKA_START_OFFSETS;
  kc.start_offsets = &po;
  kc.n_start_offsets = 1;
  SL_ASSERT_EQ_INT(run_collect(&kc, &err), SL_ENOTFOUND);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "operator 'kafka-in' (subtask 1 of 1): kafka source: "
                   "topic 'st' partition 0: offset 1 is no longer in the log "
                   "(its earliest offset is 3: deleted by retention?); "
                   "refusing to skip records");
  sl_error_destroy(err);
  err = NULL;
  free(take_collected());

  /* CSV values, with a line end the source ignores. */
  create_topic(k, "csv", 1);
  produce(p, "csv", 0, "3,10\n", NULL, 0, NULL, NULL);
  produce(p, "csv", 0, "4,11", NULL, 0, NULL, NULL);
  flush(p);
  const char *csv[] = {"csv"};
  src_cfg(&kc, k, csv, schema);
  kc.bounded = true;
  kc.format = SL_KAFKA_FORMAT_CSV;
  SL_ASSERT_OK_E(run_collect(&kc, &err), err);
  got = take_collected();
  SL_ASSERT_EQ_STR(got, "{\"key\":3,\"seq\":10}\n{\"key\":4,\"seq\":11}\n");
  free(got);
  rd_kafka_destroy(p);
  sl_schema_unref(schema);
  sl_kafka_destroy(k);
}

/* ------------------------------------------------------------------ */
/* Per-partition watermarks: a keyed operator with an event-time timer. */
static _Atomic int64_t wm_timer_at, wm_fired_at = -1, wm_rows;

static int wm_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user, (void)row;
  atomic_fetch_add(&wm_rows, 1);
  return sl_ctx_event_timer_register(ctx, atomic_load(&wm_timer_at));
}

static int wm_timer(sl_ctx_t *ctx, void *user, int64_t ts_us) {
  (void)user, (void)ts_us;
  atomic_store(&wm_fired_at, sl_ctx_watermark(ctx));
  return SL_OK;
}

/* One reader (parallelism 1) of both partitions of "wm", watermarks from
 * the record timestamp. */
static sl_job_t *wm_job(const sl_kafka_t *k, int64_t idle_ms) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "wm";
  cfg.parallelism = 1;
  cfg.n_workers = 2;
  sl_schema_t *schema = seq_schema(), *os;
  const char *topics[] = {"wm"};
  sl_kafka_source_config_t kc;
  src_cfg(&kc, k, topics, schema);
  kc.timestamp_field = "ts";
  kc.discovery_interval_ms = 0;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_source_create(&kc, &vt, &ctx, &os, &err), err);
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "kafka-in", vt, ctx, os);
  sl_watermark_config_t wc;
  sl_watermark_config_init(&wc);
  wc.time_field = "ts";
  wc.strategy = SL_WM_MONOTONOUS;
  wc.per_record = true;
  wc.idle_timeout_ms = idle_ms;
  s = sl_source_watermarks(s, &wc);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {0};
  fns.process = wm_process;
  fns.on_event_timer = wm_timer;
  s = sl_stream_process(s, "timers", schema, &fns, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "upsert", &upsert_vt, NULL));
  sl_schema_unref(os);
  sl_schema_unref(schema);
  return job;
}

static void wait_rows(int64_t n) {
  for (int64_t t0 = mono_ms(); atomic_load(&wm_rows) < n; nap())
    if (mono_ms() - t0 > 60000)
      SL_TEST_FAIL("timed out: %lld rows, waiting for %lld",
                   (long long)atomic_load(&wm_rows), (long long)n);
}

static void wait_fired(void) {
  for (int64_t t0 = mono_ms(); atomic_load(&wm_fired_at) < 0; nap())
    if (mono_ms() - t0 > 60000) SL_TEST_FAIL("the event timer never fired");
}

static void wm_produce(rd_kafka_t *p, int part, int64_t ts_s) {
  produce(p, "wm", part, "{\"key\":0,\"seq\":0}", NULL, ts_s * 1000, NULL,
          NULL);
}

/*
 * The watermark of a reader of two partitions is the minimum over them:
 * partition 1 at 1 s holds the timer at 5 s back while partition 0 goes to
 * 20 s, until partition 1 reaches 30 s.  Then, with an idle timeout, a
 * partition without records stops holding it back.
 */
SL_TEST(per_partition_watermarks_and_idleness) {
  sl_kafka_t *k = start_kafka();
  create_topic(k, "wm", 2);
  rd_kafka_t *p = producer(k);
  wm_produce(p, 1, 1);
  for (int t = 10; t <= 20; t++) wm_produce(p, 0, t);
  flush(p);
  atomic_store(&wm_timer_at, 5 * 1000000LL);
  sl_job_t *job = wm_job(k, 0);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_rows(12);
  /* A record that does not advance partition 0: the watermark after 20 s
   * reached the operator before it. */
  wm_produce(p, 0, 20);
  flush(p);
  wait_rows(13);
  SL_ASSERT_EQ_INT(atomic_load(&wm_fired_at), -1);
  wm_produce(p, 1, 30);
  flush(p);
  wait_fired();
  SL_ASSERT_EQ_INT(atomic_load(&wm_fired_at), 20 * 1000000LL - 1);
  stop(job);

  /* Idleness: partition 1 stays at 30 s; partition 0 goes to 60 s; the
   * timer at 50 s fires once partition 1 is idle. */
  atomic_store(&wm_fired_at, -1);
  atomic_store(&wm_rows, 0);
  atomic_store(&wm_timer_at, 50 * 1000000LL);
  wm_produce(p, 0, 60);
  flush(p);
  job = wm_job(k, 100);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_fired();
  SL_ASSERT_EQ_INT(atomic_load(&wm_fired_at), 60 * 1000000LL - 1);
  stop(job);
  rd_kafka_destroy(p);
  sl_kafka_destroy(k);
}

/* No broker at the bootstrap address: an error naming it within the
 * timeout, not a hang. */
SL_TEST(unreachable_bootstrap) {
  reset();
  sl_schema_t *schema = seq_schema();
  const char *topics[] = {"t"};
  sl_kafka_source_config_t kc;
  sl_kafka_source_config_init(&kc);
  kc.bootstrap_servers = "127.0.0.1:1";
  kc.topics = topics;
  kc.n_topics = 1;
  kc.schema = schema;
  kc.timeout_ms = 2000;
  kc.bounded = true;
  int64_t t0 = mono_ms();
  sl_error_t *err = NULL;
  int rc = run_collect(&kc, &err);
  int64_t ms = mono_ms() - t0;
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  printf("unreachable after %lld ms: %s\n", (long long)ms,
         sl_error_message(err));
  const char *want = "operator 'kafka-in' (subtask 1 of 1): enumerator "
                     "of source 'kafka-in': kafka source: cannot reach the "
                     "bootstrap servers 127.0.0.1:1 within 2000 ms: ";
  SL_ASSERT_TRUE(strncmp(sl_error_message(err), want, strlen(want)) == 0);
  SL_ASSERT_TRUE(ms < 30000);
  sl_error_destroy(err);
  sl_schema_unref(schema);
}

/* ------------------------------------------------------------------ */
/*
 * The running example from a pipeline file run by the sluice command: two
 * partitions of account deltas -> keyed balance (updates) -> an
 * exactly-once file sink, bounded at the offsets seen at the first start.
 * The process is killed (SIGKILL) at random moments and at checkpoint and
 * sink steps, and resumed each time; then a last run completes.  Every
 * update (account, n) must be in the output exactly once, and each
 * account's last update must hold the balance the test computed from what
 * it produced.
 */
enum { P_ACCOUNTS = 50, P_RECORDS = 60000 };
static int64_t want_sum[P_ACCOUNTS], want_n[P_ACCOUNTS];

static void write_text(const char *path, const char *text) {
  sl_test_write_file(path, text);
}

static pid_t spawn_sluice(const char *pipeline, const char *inject) {
  char bin[4096], errp[4300];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", pipeline, "--resume", "--quiet", NULL};
  return sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_APPEND);
}

static void fail_with_log(const char *what, int st) {
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *e = sl_test_read_file(ep, NULL);
  SL_TEST_FAIL("%s: sluice exited with status %d:\n%s", what, st, e ? e : "");
}

/* Read every finished part file of dir; check each (account, n) once and
 * the final balances. */
static void check_output(const char *dir) {
  static uint8_t seen[P_ACCOUNTS][P_RECORDS + 1];
  memset(seen, 0, sizeof(seen));
  int64_t last_bal[P_ACCOUNTS] = {0};
  char cmd[4500];
  snprintf(cmd, sizeof(cmd), "cat %s/part-* 2>/dev/null", dir);
  FILE *fp = popen(cmd, "r");
  SL_ASSERT_TRUE(fp != NULL);
  char line[256];
  int64_t rows = 0;
  while (fgets(line, sizeof(line), fp)) {
    char op[4];
    long long a, bal, n;
    if (sscanf(line, "%3[^,],%lld,%lld,%lld", op, &a, &bal, &n) != 4)
      SL_TEST_FAIL("bad output line '%s'", line);
    if (strcmp(op, "-U") == 0) continue;
    SL_ASSERT_TRUE(a >= 0 && a < P_ACCOUNTS && n >= 1 && n <= P_RECORDS);
    if (seen[a][n]++)
      SL_TEST_FAIL("account %lld: update n=%lld written twice", a, n);
    if (n == want_n[a]) last_bal[a] = bal;
    rows++;
  }
  pclose(fp);
  int64_t want_rows = 0;
  for (int a = 0; a < P_ACCOUNTS; a++) {
    want_rows += want_n[a];
    for (int64_t n = 1; n <= want_n[a]; n++)
      if (!seen[a][n])
        SL_TEST_FAIL("account %d: update n=%lld missing", a, (long long)n);
    SL_ASSERT_EQ_INT(last_bal[a], want_sum[a]);
  }
  SL_ASSERT_EQ_INT(rows, want_rows);
}

SL_TEST(pipeline_sigkill) {
  sl_kafka_t *k = start_kafka();
  create_topic(k, "deltas", 2);
  rd_kafka_t *p = producer(k);
  uint64_t x = 0x5eed;
  char v[96];
  for (int i = 0; i < P_RECORDS; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int a = (int)((x >> 33) % P_ACCOUNTS);
    int amount = (int)((x >> 13) % 2001) - 1000;
    want_sum[a] += amount;
    want_n[a]++;
    snprintf(v, sizeof(v), "{\"account\":%d,\"amount\":%d}", a, amount);
    produce(p, "deltas", a % 2, v, NULL, 0, NULL, NULL);
  }
  flush(p);
  rd_kafka_destroy(p);
  char pipeline[4400], text[8192], out[4400];
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: balances\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 20, retain: 2}\n"
           "source:\n  type: kafka\n  uid: deltas\n"
           "  bootstrap_servers: %s\n  topic: deltas\n"
           "  group_id: balances\n  bounded: true\n  timeout: 30s\n"
           "  properties: {max.partition.fetch.bytes: '4096'}\n"
           "  schema: [{name: account, type: int64}, "
           "{name: amount, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount), n: count()}\n"
           "      emit: updates\n    uid: balance\n"
           "sink:\n  type: file\n  uid: out\n  path: %s\n  format: csv\n"
           "  changelog: true\n  delivery: exactly-once\n",
           sl_test_dir(), sl_kafka_bootstrap(k), out);
  write_text(pipeline, text);
  static const char *points[] = {
      "task.after_sync_snapshot", "coordinator.before_metadata_rename",
      "coordinator.after_metadata_rename",
      "coordinator.before_complete_notify", "sink.before_commit"};
  const char *rs = getenv("SL_KAFKA_KILL_ROUNDS");
  int rounds = rs ? atoi(rs) : 10, n_killed = 0, n_completed = 0;
  uint64_t r64 = 0xabcdef;
  for (int r = 0; r < rounds; r++) {
    r64 = r64 * 6364136223846793005ull + 1442695040888963407ull;
    char inject[160];
    const char *inj = NULL;
    long delay_us = 0;
    if (r % 2 == 0) {
      snprintf(inject, sizeof(inject), "%s=kill:%u",
               points[(r64 >> 33) % 5], (unsigned)(1 + (r64 >> 20) % 3));
      inj = inject;
    } else {
      delay_us = 2000 + (long)((r64 >> 30) % 60000);
    }
    pid_t pid = spawn_sluice(pipeline, inj);
    if (delay_us > 0) {
      /* The kill moment is random; correctness must not depend on it. */
      struct timespec ts = {0, delay_us * 1000};
      nanosleep(&ts, NULL);
      kill(pid, SIGKILL);
    }
    int st = sl_test_wait(pid);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      n_killed++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      n_completed++;
    } else {
      char what[64];
      snprintf(what, sizeof(what), "round %d", r);
      fail_with_log(what, st);
    }
  }
  int st = sl_test_wait(spawn_sluice(pipeline, NULL));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("final run", st);
  printf("%d rounds: %d killed, %d completed\n", rounds, n_killed,
         n_completed);
  check_output(out);
  sl_kafka_destroy(k);
}

/* examples/pipelines/balances-kafka.yaml against the test broker, bounded:
 * every delta counted once (the output's last update per account). */
SL_TEST(example_pipeline) {
  memset(want_sum, 0, sizeof(want_sum));
  memset(want_n, 0, sizeof(want_n));
  sl_kafka_t *k = start_kafka();
  create_topic(k, "deltas", 3);
  rd_kafka_t *p = producer(k);
  char v[96];
  for (int i = 0; i < 3000; i++) {
    int a = (i * 7) % P_ACCOUNTS, amount = (i % 13) - 6;
    want_sum[a] += amount;
    want_n[a]++;
    snprintf(v, sizeof(v), "{\"account\":%d,\"amount\":%d}", a, amount);
    produce(p, "deltas", a % 3, v, NULL, 0, NULL, NULL);
  }
  flush(p);
  rd_kafka_destroy(p);
  char example[4400], bs[600], dir[4400], out[4400], outset[4500], bin[4096],
      errp[4300];
  snprintf(example, sizeof(example),
           "%s/examples/pipelines/balances-kafka.yaml", sl_test_src_dir());
  snprintf(bs, sizeof(bs), "source.bootstrap_servers=%s",
           sl_kafka_bootstrap(k));
  snprintf(dir, sizeof(dir), "checkpoint.dir=%s/ckpt", sl_test_dir());
  snprintf(out, sizeof(out), "%s/out", sl_test_dir());
  snprintf(outset, sizeof(outset), "sink.path=%s", out);
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", example, "--quiet", "--set", bs,
                        "--set", dir, "--set", outset,
                        "--set", "source.bounded=true",
                        "--set", "checkpoint.interval_ms=50", NULL};
  int st = sl_test_wait(sl_test_spawn(argv, NULL, errp, SL_TEST_SPAWN_APPEND));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("example", st);
  check_output(out);
  sl_kafka_destroy(k);
}
