/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kafka sink (src/connectors/kafka/kafka_sink.c), delivery
 * at-least-once, against a real broker (tests/tools/sl_kafka.c), one broker
 * per test.  The running example (Kafka deltas -> keyed balance -> Kafka)
 * from a pipeline file run by the sluice command, through an injected task
 * failure after a checkpoint (an in-process restart) and SIGKILLs at
 * checkpoint steps followed by --resume: every update must be in the output
 * topic at least once, and the last record of each account (all of an
 * account's records are in one partition, in order) its final balance.
 * Key partitioning is checked against the Java client's partitioner,
 * computed here from murmur2 (checked against the Kafka Java client's
 * Utils.murmur2 test vectors).  Not under TSan (librdkafka's C11 threads;
 * docs/testing-servers.md).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "core/inject.h"
#include "sl_kafka.h"
#include "sl_kafka_client.h"
#include "sl_test.h"

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static sl_kafka_t *start_kafka(void) {
  sl_kafka_opts_t o;
  sl_kafka_opts_init(&o);
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_start(&o, &k, &err), err);
  return k;
}

static void create_topic(sl_kafka_t *k, const char *topic, int partitions,
                         const char *const *configs) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(
      sl_kafka_create_topic(k, topic, partitions, 1, configs, &err), err);
}

/* The Java client's Utils.murmur2 (seed 0x9747b28c), in the test tools
 * (sl_kafka_client.h); checked against the client's vectors below. */
static int32_t murmur2(const void *p, size_t len) {
  return sl_kc_murmur2(p, len);
}

/* The Java client's default partition of a non-null key. */
static int java_partition(const char *key, int n_parts) {
  return (int)(((uint32_t)murmur2(key, strlen(key)) & 0x7fffffffu) %
               (uint32_t)n_parts);
}

/* Every record of topic/partition as "key\tvalue" (key "-" when null). */
static char **read_kv(const sl_kafka_t *k, const char *topic, int part,
                      int *out_n) {
  const char *set[] = {"group.id", "sl-sink-reader", "enable.auto.commit",
                       "false", "enable.partition.eof", "true",
                       "fetch.wait.max.ms", "10", NULL};
  rd_kafka_t *rk = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_CONSUMER, set,
                           &rk, &err),
                 err);
  rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tp, topic, part)->offset =
      RD_KAFKA_OFFSET_BEGINNING;
  SL_ASSERT_EQ_INT(rd_kafka_assign(rk, tp), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(tp);
  char **v = NULL;
  int n = 0, cap = 0;
  for (int64_t t0 = mono_ms();;) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
    if (m == NULL) {
      if (mono_ms() - t0 > 60000)
        SL_TEST_FAIL("reading %s/%d: no end within 60 s", topic, part);
      continue;
    }
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      rd_kafka_message_destroy(m);
      break;
    }
    if (m->err)
      SL_TEST_FAIL("reading %s/%d: %s", topic, part,
                   rd_kafka_err2str(m->err));
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      v = realloc(v, (size_t)cap * sizeof(*v));
      SL_ASSERT_TRUE(v != NULL);
    }
    if (asprintf(&v[n], "%.*s\t%.*s", m->key ? (int)m->key_len : 1,
                 m->key ? (const char *)m->key : "-", (int)m->len,
                 m->payload ? (const char *)m->payload : "") < 0)
      SL_TEST_FAIL("out of memory");
    n++;
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  *out_n = n;
  return v;
}

static void free_kv(char **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* ------------------------------------------------------------------ */
/* The running example through the sluice command */

enum { P_ACCOUNTS = 50, P_RECORDS = 60000, OUT_PARTS = 3 };
static int64_t want_sum[P_ACCOUNTS], want_n[P_ACCOUNTS];

static pid_t spawn_sluice(const char *pipeline, const char *inject) {
  char bin[4096], errp[4300];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", pipeline, "--resume", NULL};
  return sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_APPEND);
}

static void fail_with_log(const char *what, int st) {
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *e = sl_test_read_file(ep, NULL);
  SL_TEST_FAIL("%s: sluice exited with status %d:\n%s", what, st, e ? e : "");
}

static int64_t n_produced;
static uint64_t delta_seed;

/* n more deltas into the 2 partitions of "deltas", account a into
 * partition a % 2; want_sum and want_n follow. */
static void produce_more(sl_kafka_t *k, int n) {
  rd_kafka_t *p = NULL;
  sl_error_t *err = NULL;
  const char *set[] = {"enable.idempotence", "true", NULL};
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_PRODUCER, set, &p,
                           &err),
                 err);
  uint64_t x = delta_seed;
  char v[96];
  for (int i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int a = (int)((x >> 33) % P_ACCOUNTS);
    int amount = (int)((x >> 13) % 2001) - 1000;
    want_sum[a] += amount;
    want_n[a]++;
    snprintf(v, sizeof(v), "{\"account\":%d,\"amount\":%d}", a, amount);
    for (;;) {
      rd_kafka_resp_err_t e = rd_kafka_producev(
          p, RD_KAFKA_V_TOPIC("deltas"), RD_KAFKA_V_PARTITION(a % 2),
          RD_KAFKA_V_VALUE(v, strlen(v)),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      SL_ASSERT_EQ_INT(e, RD_KAFKA_RESP_ERR__QUEUE_FULL);
      rd_kafka_poll(p, 100);
    }
  }
  delta_seed = x;
  n_produced += n;
  SL_ASSERT_TRUE(n_produced <= P_RECORDS);
  SL_ASSERT_EQ_INT(rd_kafka_flush(p, 60000), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(p);
}

/* The topics, and first deltas (all P_RECORDS by default). */
static void produce_deltas_n(sl_kafka_t *k, int n) {
  create_topic(k, "deltas", 2, NULL);
  memset(want_sum, 0, sizeof(want_sum));
  memset(want_n, 0, sizeof(want_n));
  n_produced = 0;
  delta_seed = 0x5eed;
  produce_more(k, n);
  create_topic(k, "balances", OUT_PARTS, NULL);
}

static void produce_deltas(sl_kafka_t *k) { produce_deltas_n(k, P_RECORDS); }

static void write_pipeline_d(const sl_kafka_t *k, const char *path,
                             const char *delivery) {
  char text[8192];
  snprintf(text, sizeof(text),
           "name: balances\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 20, retain: 2}\n"
           "restart: {strategy: fixed-delay, max_attempts: 3, delay_ms: 10}\n"
           "source:\n  type: kafka\n  uid: deltas\n"
           "  bootstrap_servers: %s\n  topic: deltas\n"
           "  timeout: 30s\n"
           "  properties: {max.partition.fetch.bytes: '4096'}\n"
           "  schema: [{name: account, type: int64}, "
           "{name: amount, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount), n: count()}\n"
           "      emit: updates\n    uid: balance\n"
           "sink:\n  type: kafka\n  uid: out\n  bootstrap_servers: %s\n"
           "  topic: balances\n  key: [account]\n  format: csv\n"
           "  changelog: true\n  delivery: %s\n  timeout: 30s\n"
           "  properties: {linger.ms: '5'}\n",
           sl_test_dir(), sl_kafka_bootstrap(k), sl_kafka_bootstrap(k),
           delivery);
  sl_test_write_file(path, text);
}

static void write_pipeline(const sl_kafka_t *k, const char *path) {
  write_pipeline_d(k, path, "at-least-once");
}

/*
 * Every update (account, n) at least once; each record's key is its
 * account, in the Java client's partition for that key; the last record of
 * each account holds n = all its deltas and the final balance.  A bad
 * record or a wrong partition fails the test at once; otherwise returns
 * NULL when the output is complete, else what is missing (and the
 * number of duplicates in *out_dups).
 */
static int64_t records_read;

static const char *verify(const sl_kafka_t *k, int64_t *out_dups) {
  records_read = 0;
  static uint8_t seen[P_ACCOUNTS][P_RECORDS + 1];
  static char msg[256];
  memset(seen, 0, sizeof(seen));
  int64_t last_bal[P_ACCOUNTS], last_n[P_ACCOUNTS], dups = 0;
  for (int a = 0; a < P_ACCOUNTS; a++) last_bal[a] = last_n[a] = -1;
  for (int part = 0; part < OUT_PARTS; part++) {
    int n = 0;
    char **v = read_kv(k, "balances", part, &n);
    records_read += n;
    for (int i = 0; i < n; i++) {
      char key[32], op[4];
      long long a, bal, cnt;
      if (sscanf(v[i], "%31[^\t]\t%3[^,],%lld,%lld,%lld", key, op, &a, &bal,
                 &cnt) != 5)
        SL_TEST_FAIL("partition %d: bad record '%s'", part, v[i]);
      SL_ASSERT_TRUE(a >= 0 && a < P_ACCOUNTS && cnt >= 1 &&
                     cnt <= P_RECORDS);
      char want_key[32];
      snprintf(want_key, sizeof(want_key), "%lld", a);
      SL_ASSERT_EQ_STR(key, want_key);
      if (java_partition(key, OUT_PARTS) != part)
        SL_TEST_FAIL("key '%s' in partition %d, the Java partitioner says "
                     "%d", key, part, java_partition(key, OUT_PARTS));
      if (strcmp(op, "-U") == 0) continue;
      if (seen[a][cnt]++) dups++;
      last_bal[a] = bal;
      last_n[a] = cnt;
    }
    free_kv(v, n);
  }
  *out_dups = dups;
  for (int a = 0; a < P_ACCOUNTS; a++) {
    for (int64_t c = 1; c <= want_n[a]; c++)
      if (!seen[a][c]) {
        snprintf(msg, sizeof(msg), "account %d: update n=%lld missing", a,
                 (long long)c);
        return msg;
      }
    if (last_n[a] != want_n[a] || last_bal[a] != want_sum[a]) {
      snprintf(msg, sizeof(msg), "account %d: last record n=%lld balance "
               "%lld, want n=%lld balance %lld", a, (long long)last_n[a],
               (long long)last_bal[a], (long long)want_n[a],
               (long long)want_sum[a]);
      return msg;
    }
  }
  return NULL;
}

static bool log_has(const char *text) {
  char ep[4300];
  snprintf(ep, sizeof(ep), "%s/stderr.txt", sl_test_dir());
  char *log = sl_test_read_file(ep, NULL);
  bool has = log && strstr(log, text);
  free(log);
  return has;
}

/*
 * The source is unbounded (so checkpoints, and the injection points they
 * pass, go on until the test stops the job): wait until the output is
 * complete and, if want_log, the log has it; then SIGTERM (a cancel,
 * exit status 128 + 15) and return the duplicates.
 */
static int64_t finish_run(const sl_kafka_t *k, pid_t pid,
                          const char *want_log) {
  int64_t dups = 0;
  const char *miss = "";
  for (int64_t t0 = mono_ms();;) {
    bool logged = want_log == NULL || log_has(want_log);
    if (logged && (miss = verify(k, &dups)) == NULL) break;
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) fail_with_log("run ended", st);
    if (mono_ms() - t0 > 180000) {
      kill(pid, SIGKILL);
      sl_test_wait(pid);
      SL_TEST_FAIL("output incomplete after 180 s (%s): %s",
                   logged ? "logged" : "no log line yet", miss ? miss : "");
    }
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGTERM);
  int st = sl_test_wait(pid);
  if (!WIFEXITED(st) || (WEXITSTATUS(st) != 143 && WEXITSTATUS(st) != 0))
    fail_with_log("cancel", st);
  return dups;
}

/* The murmur2 above is the Java client's: Kafka's UtilsTest vectors. */
SL_TEST(murmur2_vectors) {
  SL_ASSERT_EQ_INT(murmur2("21", 2), -973932308);
  SL_ASSERT_EQ_INT(murmur2("foobar", 6), -790332482);
  SL_ASSERT_EQ_INT(murmur2("a-little-bit-long-string", 24), -985981536);
  SL_ASSERT_EQ_INT(murmur2("a-little-bit-longer-string", 26), -1486304829);
  const char *l = "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8";
  SL_ASSERT_EQ_INT(murmur2(l, strlen(l)), -58897971);
  SL_ASSERT_EQ_INT(murmur2("abc", 3), 479470107);
}

/* A task failure injected at the 12th task snapshot (2 chains x 2
 * subtasks: the third checkpoint, after earlier ones completed): the job
 * restarts in the process from the last completed checkpoint and sends the
 * rows after it again. */
SL_TEST(pipeline_restart_after_checkpoint) {
  sl_kafka_t *k = start_kafka();
  produce_deltas(k);
  char pipeline[4400];
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline(k, pipeline);
  pid_t pid = spawn_sluice(pipeline, "task.after_sync_snapshot=fail:12");
  int64_t dups = finish_run(k, pid, "restart 1 from the latest checkpoint");
  SL_ASSERT_TRUE(log_has("injected failure at task.after_sync_snapshot"));
  printf("duplicates after the restart: %lld\n", (long long)dups);
  sl_kafka_destroy(k);
}

/* SIGKILLs of the whole process at checkpoint steps, each followed by a
 * run with --resume, then a last run until the output is complete. */
SL_TEST(pipeline_sigkill_resume) {
  sl_kafka_t *k = start_kafka();
  produce_deltas(k);
  char pipeline[4400];
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline(k, pipeline);
  static const char *points[] = {"task.after_sync_snapshot",
                                 "coordinator.after_metadata_rename",
                                 "coordinator.before_complete_notify"};
  const char *rs = getenv("SL_KAFKA_KILL_ROUNDS");
  int rounds = rs ? atoi(rs) : 6;
  for (int r = 0; r < rounds; r++) {
    char inject[160];
    snprintf(inject, sizeof(inject), "%s=kill:%d", points[r % 3],
             1 + r % 2);
    int st = sl_test_wait(spawn_sluice(pipeline, inject));
    /* Unbounded: every point is reached, so every round is killed. */
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
      char what[64];
      snprintf(what, sizeof(what), "round %d (not killed)", r);
      fail_with_log(what, st);
    }
  }
  int64_t dups = finish_run(k, spawn_sluice(pipeline, NULL), NULL);
  printf("%d rounds killed; duplicates: %lld\n", rounds, (long long)dups);
  sl_kafka_destroy(k);
}

/* ------------------------------------------------------------------ */
/* Exactly-once (kafka_sink_eos.c) */

/* The records of exactly-once output: every update once (the aggregate
 * emits an upsert stream: +I for an account's first delta, +U for each
 * later one, no -U; docs/pipeline.md). */
static int64_t want_records(void) {
  int64_t n = 0;
  for (int a = 0; a < P_ACCOUNTS; a++) n += want_n[a];
  return n;
}

/* After the run: the read_committed output holds every update exactly
 * once (no duplicate, none missing, nothing else). */
static void expect_exact(const sl_kafka_t *k) {
  int64_t dups = -1;
  const char *miss = verify(k, &dups);
  if (miss) SL_TEST_FAIL("exactly-once output incomplete: %s", miss);
  printf("exactly-once output: %lld records\n", (long long)records_read);
  SL_ASSERT_EQ_INT(dups, 0);
  SL_ASSERT_EQ_INT(records_read, want_records());
}

/* A task failure after the sync snapshot of the third checkpoint: the job
 * restarts in the process from the last completed checkpoint; epochs
 * after it were never committed (aborted by the restart's fencing), so
 * the output is exact. */
SL_TEST(eo_restart_after_checkpoint) {
  sl_kafka_t *k = start_kafka();
  produce_deltas(k);
  char pipeline[4400];
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline_d(k, pipeline, "exactly-once");
  pid_t pid = spawn_sluice(pipeline, "task.after_sync_snapshot=fail:12");
  finish_run(k, pid, "restart 1 from the latest checkpoint");
  SL_ASSERT_TRUE(log_has("injected failure at task.after_sync_snapshot"));
  expect_exact(k);
  sl_kafka_destroy(k);
}

/* SIGKILLs at the sink's commit steps, each followed by --resume:
 *   sink.after_prepare        epoch flushed and marked, not completed (K2)
 *   sink.before_commit        completed, not committed: the restore
 *                             finds the marker below N and replays (K3)
 *   kafka.sink.after_commit_transaction
 *                             committed at the broker, the process died
 *                             before it knew: the marker says ALREADY (K4)
 *   sink.restore.after_recover  killed again while restoring
 * then a last run until the output is complete: exact. */
SL_TEST(eo_sigkill_at_commit_steps) {
  sl_kafka_t *k = start_kafka();
  enum { ROUNDS = 8, BATCH = 4000 };
  produce_deltas_n(k, BATCH);
  char pipeline[4400];
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline_d(k, pipeline, "exactly-once");
  static const char *points[] = {"sink.after_prepare", "sink.before_commit",
                                 "kafka.sink.after_commit_transaction",
                                 "sink.restore.after_recover"};
  for (int r = 0; r < ROUNDS; r++) {
    /* New deltas before each round: an epoch without records has no
     * transaction, so the commit points need input to be reached. */
    if (r) produce_more(k, BATCH);
    char inject[160];
    snprintf(inject, sizeof(inject), "%s=kill:%d", points[r % 4],
             1 + r / 4);
    int st = sl_test_wait(spawn_sluice(pipeline, inject));
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
      char what[200];
      snprintf(what, sizeof(what), "round %d at %s (not killed)", r, inject);
      fail_with_log(what, st);
    }
  }
  finish_run(k, spawn_sluice(pipeline, NULL), NULL);
  expect_exact(k);
  sl_kafka_destroy(k);
}

/* examples/pipelines/balances-kafka-to-kafka(-eo).yaml against the test broker
 * (JSON records), source bounded: every update at least once, the last
 * record of each account its balance, keys in the Java partitions. */
static void run_example(const char *file, bool exact) {
  sl_kafka_t *k = start_kafka();
  produce_deltas(k);
  char example[4400], bs[600], bs2[600], dir[4400], bin[4096], errp[4300];
  snprintf(example, sizeof(example),
           "%s/examples/pipelines/%s", sl_test_src_dir(), file);
  snprintf(bs, sizeof(bs), "source.bootstrap_servers=%s",
           sl_kafka_bootstrap(k));
  snprintf(bs2, sizeof(bs2), "sink.bootstrap_servers=%s",
           sl_kafka_bootstrap(k));
  snprintf(dir, sizeof(dir), "checkpoint.dir=%s/ckpt", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", example, "--quiet", "--set", bs,
                        "--set", bs2, "--set", dir,
                        "--set", "source.bounded=true",
                        "--set", "checkpoint.interval_ms=50", NULL};
  int st = sl_test_wait(sl_test_spawn(argv, NULL, errp, SL_TEST_SPAWN_APPEND));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_with_log("example", st);
  int64_t last_bal[P_ACCOUNTS], last_n[P_ACCOUNTS], rows = 0;
  for (int a = 0; a < P_ACCOUNTS; a++) last_bal[a] = last_n[a] = -1;
  for (int part = 0; part < OUT_PARTS; part++) {
    int n = 0;
    char **v = read_kv(k, "balances", part, &n);
    for (int i = 0; i < n; i++) {
      char key[32], op[4];
      long long a, bal, cnt;
      if (sscanf(v[i],
                 "%31[^\t]\t{\"op\":\"%2[^\"]\",\"account\":%lld,"
                 "\"balance\":%lld,\"n\":%lld}",
                 key, op, &a, &bal, &cnt) != 5)
        SL_TEST_FAIL("partition %d: bad record '%s'", part, v[i]);
      SL_ASSERT_TRUE(a >= 0 && a < P_ACCOUNTS);
      SL_ASSERT_EQ_INT(java_partition(key, OUT_PARTS), part);
      SL_ASSERT_EQ_INT(atoll(key), a);
      if (strcmp(op, "-U") == 0) continue;
      if (exact) SL_ASSERT_EQ_INT(cnt, last_n[a] < 0 ? 1 : last_n[a] + 1);
      last_bal[a] = bal;
      last_n[a] = cnt;
      rows++;
    }
    free_kv(v, n);
  }
  for (int a = 0; a < P_ACCOUNTS; a++) {
    SL_ASSERT_EQ_INT(last_n[a], want_n[a]);
    SL_ASSERT_EQ_INT(last_bal[a], want_sum[a]);
  }
  SL_ASSERT_TRUE(rows >= P_RECORDS);
  if (exact) SL_ASSERT_EQ_INT(rows, P_RECORDS);
  sl_kafka_destroy(k);
}

SL_TEST(example_pipeline) {
  run_example("balances-kafka-to-kafka.yaml", false);
}

/* The exactly-once example: per account the updates n = 1, 2, ... once
 * each, in order. */
SL_TEST(example_pipeline_eo) {
  run_example("balances-kafka-to-kafka-eo.yaml", true);
}

/* ------------------------------------------------------------------ */
/* Through the C API */

static const char *gen_job_name = "ksink";

static sl_job_t *gen_job(uint64_t count, uint32_t payload, uint32_t par,
                         const sl_kafka_sink_config_t *kc,
                         sl_error_t **out_err, int *out_rc) {
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = count;
  g.keys = 1000;
  g.splits = 1;
  g.columns = SL_GEN_COL_SEQ | SL_GEN_COL_KEY |
              (payload ? SL_GEN_COL_PAYLOAD : 0);
  g.payload_size = payload;
  const sl_source_vt_t *svt;
  void *sctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&g, &svt, &sctx, &schema, NULL));
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = gen_job_name;
  cfg.parallelism = par;
  char ckdir[4400];
  snprintf(ckdir, sizeof(ckdir), "%s/ckpt", sl_test_dir());
  if (kc->delivery == SL_DELIVERY_EXACTLY_ONCE) {
    cfg.checkpoint.dir = ckdir; /* a transactional sink needs checkpoints */
    cfg.checkpoint.interval_ms = 50;
  }
  cfg.n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "gen", svt, sctx, schema);
  sl_schema_unref(schema);
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_sink_create(kc, &vt, &ctx, &err), err);
  SL_ASSERT_OK(sl_stream_sink(s, "kafka-out", vt, ctx));
  *out_rc = sl_job_run(job, out_err);
  return job;
}

static int run_gen(uint64_t count, uint32_t payload, uint32_t par,
                   const sl_kafka_sink_config_t *kc, sl_error_t **out_err) {
  int rc = SL_OK;
  sl_job_t *job = gen_job(count, payload, par, kc, out_err, &rc);
  sl_job_destroy(job);
  return rc;
}

static void sink_cfg(sl_kafka_sink_config_t *c, const sl_kafka_t *k,
                     const char *topic) {
  sl_kafka_sink_config_init(c);
  c->bootstrap_servers = sl_kafka_bootstrap(k);
  c->topic = topic;
  c->timeout_ms = 30000;
}

/* Keyed: every record in the Java partitioner's partition of its key, each
 * row once (no failure here); without a key: round robin. */
SL_TEST(partitioning) {
  sl_kafka_t *k = start_kafka();
  create_topic(k, "keyed", 7, NULL);
  create_topic(k, "rr", 3, NULL);
  sl_kafka_sink_config_t c;
  sink_cfg(&c, k, "keyed");
  const char *key[] = {"key"};
  c.key_fields = key;
  c.n_key_fields = 1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(run_gen(3000, 0, 2, &c, &err), err);
  int total = 0, per_part[7] = {0};
  for (int part = 0; part < 7; part++) {
    int n = 0;
    char **v = read_kv(k, "keyed", part, &n);
    for (int i = 0; i < n; i++) {
      char kbuf[32];
      long long seq, kv;
      if (sscanf(v[i], "%31[^\t]\t{\"seq\":%lld,\"key\":%lld}", kbuf, &seq,
                 &kv) != 3)
        SL_TEST_FAIL("partition %d: bad record '%s'", part, v[i]);
      char want[32];
      snprintf(want, sizeof(want), "%lld", kv);
      SL_ASSERT_EQ_STR(kbuf, want);
      SL_ASSERT_EQ_INT(java_partition(kbuf, 7), part);
    }
    per_part[part] = n;
    total += n;
    free_kv(v, n);
  }
  SL_ASSERT_EQ_INT(total, 3000);
  for (int part = 0; part < 7; part++) SL_ASSERT_TRUE(per_part[part] > 0);
  /* No key: round robin over the 3 partitions, one writer. */
  sink_cfg(&c, k, "rr");
  c.format = SL_FORMAT_CSV;
  SL_ASSERT_OK_E(run_gen(300, 0, 1, &c, &err), err);
  for (int part = 0; part < 3; part++) {
    int n = 0;
    char **v = read_kv(k, "rr", part, &n);
    SL_ASSERT_EQ_INT(n, 100);
    for (int i = 0; i < n; i++) {
      long long seq, kv;
      if (sscanf(v[i], "-\t%lld,%lld", &seq, &kv) != 2)
        SL_TEST_FAIL("partition %d: bad record '%s'", part, v[i]);
      SL_ASSERT_EQ_INT(seq, 3 * i + part);
    }
    free_kv(v, n);
  }
  sl_kafka_destroy(k);
}

static void expect_error(int rc, sl_error_t *err, const char *part) {
  SL_ASSERT_TRUE(rc != SL_OK);
  const char *m = err ? sl_error_message(err) : "";
  if (strstr(m, part) == NULL)
    SL_TEST_FAIL("expected an error with '%s', got '%s'", part, m);
  sl_error_destroy(err);
}

/* A record the broker refuses (larger than the topic's max.message.bytes)
 * fails the task with topic, partition and the broker's error. */
SL_TEST(delivery_error_fails_the_task) {
  sl_kafka_t *k = start_kafka();
  const char *cfgs[] = {"max.message.bytes=512", NULL};
  create_topic(k, "small", 1, cfgs);
  sl_kafka_sink_config_t c;
  sink_cfg(&c, k, "small");
  sl_error_t *err = NULL;
  int rc = run_gen(20, 2000, 1, &c, &err);
  const char *m = err ? sl_error_message(err) : "";
  printf("error: %s\n", m);
  SL_ASSERT_TRUE(strstr(m, "delivery to topic 'small' partition 0 failed") !=
                 NULL);
  expect_error(rc, err, "MSG_SIZE_TOO_LARGE");
  sl_kafka_destroy(k);
}

/* Bad input: each with its message; the unreachable one in bounded time. */
SL_TEST(bad_input) {
  sl_kafka_sink_config_t c;
  sl_kafka_sink_config_init(&c);
  c.bootstrap_servers = "127.0.0.1:1";
  c.topic = "t";
  c.timeout_ms = 2000;
  const sl_sink_vt_t *vt;
  void *ctx = NULL;
  sl_error_t *err = NULL;
  /* exactly-once settings without exactly-once; a bad prefix */
  c.transactional_id_prefix = "p";
  int rc = sl_kafka_sink_create(&c, &vt, &ctx, &err);
  expect_error(rc, err, "transactional_id_prefix and transaction_pool_size "
                        "need delivery exactly-once");
  c.delivery = SL_DELIVERY_EXACTLY_ONCE;
  c.transactional_id_prefix = "has space";
  err = NULL;
  rc = sl_kafka_sink_create(&c, &vt, &ctx, &err);
  expect_error(rc, err, "transactional_id_prefix 'has space' must have");
  c.transactional_id_prefix = NULL;
  c.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  /* properties sluice manages */
  const char *props[] = {"enable.idempotence", "false", NULL};
  c.properties = props;
  err = NULL;
  rc = sl_kafka_sink_create(&c, &vt, &ctx, &err);
  expect_error(rc, err, "property 'enable.idempotence' is set by sluice");
  const char *props2[] = {"partitioner", "consistent", NULL};
  c.properties = props2;
  err = NULL;
  rc = sl_kafka_sink_create(&c, &vt, &ctx, &err);
  expect_error(rc, err, "property 'partitioner' is set by sluice");
  c.properties = NULL;
  c.topic = "bad/topic";
  err = NULL;
  rc = sl_kafka_sink_create(&c, &vt, &ctx, &err);
  expect_error(rc, err, "'bad/topic' is not a valid topic name");
  c.topic = "t";
  /* unreachable: an error naming host:port within the timeout */
  int64_t t0 = mono_ms();
  err = NULL;
  rc = run_gen(10, 0, 1, &c, &err);
  int64_t took = mono_ms() - t0;
  expect_error(rc, err,
               "cannot reach the bootstrap servers 127.0.0.1:1 within "
               "2000 ms");
  SL_ASSERT_TRUE(took < 30000);
  /* ... the same for exactly-once (its committer opens first) */
  c.delivery = SL_DELIVERY_EXACTLY_ONCE;
  t0 = mono_ms();
  err = NULL;
  rc = run_gen(10, 0, 1, &c, &err);
  took = mono_ms() - t0;
  expect_error(rc, err,
               "cannot reach the bootstrap servers 127.0.0.1:1 within "
               "2000 ms");
  SL_ASSERT_TRUE(took < 30000);
  c.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  /* unknown topic; an unknown key field */
  sl_kafka_t *k = start_kafka();
  sl_kafka_sink_config_t u;
  sink_cfg(&u, k, "nope");
  err = NULL;
  rc = run_gen(10, 0, 1, &u, &err);
  expect_error(rc, err, "topic 'nope' does not exist on the cluster at");
  u.delivery = SL_DELIVERY_EXACTLY_ONCE;
  err = NULL;
  rc = run_gen(10, 0, 1, &u, &err);
  expect_error(rc, err, "topic 'nope' does not exist on the cluster at");
  u.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  create_topic(k, "present", 1, NULL);
  sink_cfg(&u, k, "present");
  const char *bad_key[] = {"acount"};
  u.key_fields = bad_key;
  u.n_key_fields = 1;
  err = NULL;
  rc = run_gen(10, 0, 1, &u, &err);
  expect_error(rc, err, "key field 'acount' is not in the rows");
  /* The pipeline refuses a prefix without exactly-once. */
  char pipeline[4400], text[2048], bin[4096], errp[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/eo.yaml", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: eo\nsource: {type: generator, count: 10}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: present, "
           "transactional_id_prefix: x}\n",
           sl_kafka_bootstrap(k));
  sl_test_write_file(pipeline, text);
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/eo-stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "run", pipeline, "--quiet", NULL};
  int st = sl_test_wait(sl_test_spawn(argv, NULL, errp, 0));
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
  char *e = sl_test_read_file(errp, NULL);
  if (e == NULL || strstr(e, "sink.transactional_id_prefix") == NULL ||
      strstr(e, "needs 'delivery: exactly-once'") == NULL)
    SL_TEST_FAIL("pipeline prefix: got '%s'", e ? e : "");
  free(e);
  /* A key field the rows lack, refused when the pipeline is built. */
  snprintf(text, sizeof(text),
           "name: eo\nsource: {type: generator, count: 10}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: present, "
           "key: [acount]}\n",
           sl_kafka_bootstrap(k));
  sl_test_write_file(pipeline, text);
  st = sl_test_wait(sl_test_spawn(argv, NULL, errp, 0));
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
  e = sl_test_read_file(errp, NULL);
  if (e == NULL || strstr(e, "sink.key") == NULL ||
      strstr(e, "no column 'acount' in the rows the sink gets") == NULL)
    SL_TEST_FAIL("pipeline key: got '%s'", e ? e : "");
  free(e);
  sl_kafka_destroy(k);
}

/* Exactly-once through the C API, without checkpoints: the job's end
 * commits the last epoch.  Then the same transactional_id_prefix from a
 * job of another name fails at start naming the prefix, before it writes
 * anything; a transaction.timeout.ms above the broker's
 * transaction.max.timeout.ms fails naming both settings. */
SL_TEST(eo_prefix_owner_and_timeout_limit) {
  sl_kafka_t *k = start_kafka();
  create_topic(k, "eo", 2, NULL);
  sl_kafka_sink_config_t c;
  sink_cfg(&c, k, "eo");
  c.delivery = SL_DELIVERY_EXACTLY_ONCE;
  c.transactional_id_prefix = "shared";
  sl_error_t *err = NULL;
  gen_job_name = "first";
  SL_ASSERT_OK_E(run_gen(500, 0, 2, &c, &err), err);
  int total = 0;
  for (int part = 0; part < 2; part++) {
    int n = 0;
    char **v = read_kv(k, "eo", part, &n);
    total += n;
    free_kv(v, n);
  }
  SL_ASSERT_EQ_INT(total, 500);
  /* The marker of each id names the job and the sink. */
  int64_t off = -1;
  char *meta = NULL;
  SL_ASSERT_OK_E(sl_kc_committed(sl_kafka_bootstrap(k), "shared-0-0", "eo",
                                 0, &off, &meta, &err),
                 err);
  printf("marker of shared-0-0: %lld '%s'\n", (long long)off,
         meta ? meta : "");
  SL_ASSERT_TRUE(off >= 0);
  SL_ASSERT_TRUE(meta && strstr(meta, "job=first;sink=kafka-out"));
  free(meta);
  gen_job_name = "second";
  err = NULL;
  int rc = run_gen(500, 0, 2, &c, &err);
  expect_error(rc, err, "two jobs or sinks must not share a "
                        "transactional_id_prefix ('shared')");
  total = 0;
  for (int part = 0; part < 2; part++) {
    int n = 0;
    char **v = read_kv(k, "eo", part, &n);
    total += n;
    free_kv(v, n);
  }
  SL_ASSERT_EQ_INT(total, 500);
  /* transaction.timeout.ms above the broker's cap (15 min by default) */
  const char *props[] = {"transaction.timeout.ms", "3600000", NULL};
  c.properties = props;
  c.transactional_id_prefix = "other";
  err = NULL;
  rc = run_gen(10, 0, 1, &c, &err);
  expect_error(rc, err, "must not exceed the broker's "
                        "transaction.max.timeout.ms");
  gen_job_name = "ksink";
  sl_kafka_destroy(k);
}

/* The end of topic/partition as a read_committed consumer sees it: the
 * last stable offset (behind the first open transaction). */
static int64_t end_offset(const sl_kafka_t *k, const char *topic, int part,
                          bool committed) {
  rd_kafka_t *c = NULL;
  sl_error_t *err = NULL;
  const char *set[] = {"group.id", "lso-probe", "isolation.level",
                       committed ? "read_committed" : "read_uncommitted",
                       NULL};
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_CONSUMER, set, &c,
                           &err),
                 err);
  int64_t lo = -1, hi = -1;
  SL_ASSERT_EQ_INT(rd_kafka_query_watermark_offsets(c, topic, part, &lo, &hi,
                                                    30000),
                   RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(c);
  return hi;
}

static int64_t lso(const sl_kafka_t *k, const char *topic, int part) {
  return end_offset(k, topic, part, true);
}

/* The high watermark (a read_uncommitted consumer's end). */
static int64_t hwm(const sl_kafka_t *k, const char *topic, int part) {
  return end_offset(k, topic, part, false);
}

/* K8: a job whose sink ran at parallelism 3 is killed before its first
 * checkpoint, leaving open transactions of subtasks 0-2 that hold the
 * output's last stable offset back (checked: a read_committed consumer's
 * end is behind the high watermark).  A fresh run at sink parallelism 1
 * lists the prefix's ids, fences those of subtasks 1 and 2 (aborting their
 * transactions) and writes everything once: afterwards the last stable
 * offset is the high watermark and the output is exact. */
SL_TEST(eo_downscale_before_first_checkpoint_aborts_lingering) {
  sl_kafka_t *k = start_kafka();
  produce_deltas(k);
  char pipeline[4400], text[4096];
  snprintf(pipeline, sizeof(pipeline), "%s/down.yaml", sl_test_dir());
  int tries = 0;
  for (int run = 0; run < 2; run++) {
    snprintf(text, sizeof(text),
             "name: down\nparallelism: 2\n"
             "checkpoint: {dir: %s/ckpt-%d-%d, interval_ms: 1000}\n"
             "source:\n  type: kafka\n  uid: deltas\n"
             "  bootstrap_servers: %s\n  topic: deltas\n  bounded: true\n"
             "  schema: [{name: account, type: int64}, "
             "{name: amount, type: int64}]\n"
             "sink:\n  type: kafka\n  uid: out\n  parallelism: %d\n"
             "  bootstrap_servers: %s\n  topic: balances\n"
             "  delivery: exactly-once\n  timeout: 30s\n",
             sl_test_dir(), run, tries, sl_kafka_bootstrap(k),
             run == 0 ? 3 : 1,
             sl_kafka_bootstrap(k));
    sl_test_write_file(pipeline, text);
    char bin[4096], errp[4300];
    snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
    snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
    const char *argv[] = {bin, "run", pipeline, "--quiet", NULL};
    int st = sl_test_wait(sl_test_spawn(argv,
                                        run == 0
                                            ? "sink.before_prepare=kill:1"
                                            : NULL,
                                        errp, SL_TEST_SPAWN_APPEND));
    if (run == 0) {
      if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
        fail_with_log("run at sink parallelism 3 (not killed)", st);
      bool lingering = false;
      for (int part = 0; part < OUT_PARTS; part++) {
        int64_t hi = hwm(k, "balances", part);
        int64_t l = lso(k, "balances", part);
        printf("partition %d: high %lld, last stable %lld\n", part,
               (long long)hi, (long long)l);
        if (l < hi) lingering = true;
      }
      /* The open transactions pin the LSO, unless the first barrier came
       * before any record reached the sink (a loaded machine): then that
       * run proved nothing; run it again (its successor fences it). */
      if (!lingering && ++tries < 5) {
        run--;
        continue;
      }
      SL_ASSERT_TRUE(lingering);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fail_with_log("run at sink parallelism 1", st);
    }
  }
  int64_t total = 0;
  for (int part = 0; part < OUT_PARTS; part++) {
    SL_ASSERT_EQ_INT(lso(k, "balances", part), hwm(k, "balances", part));
    int n = 0;
    char **v = read_kv(k, "balances", part, &n);
    total += n;
    free_kv(v, n);
  }
  SL_ASSERT_EQ_INT(total, P_RECORDS);
  sl_kafka_destroy(k);
}

/* Runs `sluice validate [--connect] <text>`; returns the exit status and
 * the standard error in *out_err_text (caller frees). */
static int validate(const char *text, bool connect, char **out_err_text) {
  char pipeline[4400], bin[4096], errp[4300];
  snprintf(pipeline, sizeof(pipeline), "%s/timing.yaml", sl_test_dir());
  sl_test_write_file(pipeline, text);
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/timing-stderr.txt", sl_test_dir());
  const char *argv[] = {bin, "validate", pipeline,
                        connect ? "--connect" : NULL, NULL};
  int st = sl_test_wait(sl_test_spawn(argv, NULL, errp, 0));
  *out_err_text = sl_test_read_file(errp, NULL);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void expect_validate(const char *text, bool connect, int want_zero,
                            const char *want) {
  char *e = NULL;
  int st = validate(text, connect, &e);
  if ((want_zero && st != 0) || (!want_zero && st == 0) ||
      (want && (e == NULL || strstr(e, want) == NULL)))
    SL_TEST_FAIL("validate%s: status %d, want %s and '%s'; stderr:\n%s",
                 connect ? " --connect" : "", st,
                 want_zero ? "success" : "failure", want ? want : "",
                 e ? e : "");
  free(e);
}

/* The submit-time timing check of an exactly-once sink, each rule with
 * its message and numbers; check_timing: warn turns refusals into
 * warnings; the broker's limits with validate --connect against a broker
 * whose offsets.retention.minutes is 1. */
SL_TEST(eo_timing_check) {
  const char *extra[] = {"offsets.retention.minutes=1", NULL};
  sl_kafka_opts_t o;
  sl_kafka_opts_init(&o);
  o.extra_settings = extra;
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_start(&o, &k, &err), err);
  create_topic(k, "t", 1, NULL);
  char text[2048];
  const char *head =
      "name: timing\nsource: {type: generator, count: 10}\n";
  /* R1: the timeout is not above the checkpoint interval */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 60000}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once, "
           "properties: {transaction.timeout.ms: '30000'}}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, false, 0,
                  "transaction.timeout.ms 30000 is not above the checkpoint "
                  "trigger period 60000 ms (checkpoint.interval_ms 60000, "
                  "min_pause_ms 0)");
  /* ... a warning with check_timing: warn */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 60000}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once, check_timing: warn, "
           "properties: {transaction.timeout.ms: '30000'}}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, false, 1, "(allowed by check_timing: warn)");
  /* R2: a pool too small for the checkpoints in flight */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 100, "
           "max_concurrent: 3}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once, transaction_pool_size: 3}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, false, 0,
                  "transaction_pool_size 3 is below checkpoint.max_concurrent "
                  "3 + 1");
  /* W1: a slow checkpoint can outlive the transaction: a warning */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 1000, "
           "timeout_ms: 120000}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once, "
           "properties: {transaction.timeout.ms: '60000'}}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, false, 1,
                  "transaction.timeout.ms 60000 is below the checkpoint "
                  "trigger period 1000 ms + checkpoint.timeout_ms 120000");
  /* R3 (broker): above transaction.max.timeout.ms (900000 by default) */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 1000}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once, "
           "properties: {transaction.timeout.ms: '3600000'}}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, false, 1, NULL); /* not asked without --connect */
  expect_validate(text, true, 0,
                  "transaction.timeout.ms 3600000 is above the broker's "
                  "transaction.max.timeout.ms 900000");
  /* R4 (broker): a restart delay not below offsets.retention.minutes 1 */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 1000}\n"
           "restart: {strategy: fixed-delay, delay_ms: 60000}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, true, 0,
                  "a restart waits up to 60000 ms, not less than the "
                  "broker's offsets.retention.minutes 1");
  /* A sound configuration passes, also with --connect. */
  snprintf(text, sizeof(text),
           "%scheckpoint: {dir: /nonexistent, interval_ms: 1000}\n"
           "sink: {type: kafka, bootstrap_servers: '%s', topic: t, "
           "delivery: exactly-once}\n",
           head, sl_kafka_bootstrap(k));
  expect_validate(text, true, 1, NULL);
  sl_kafka_destroy(k);
}

/* Deletes every consumer group whose name starts with prefix. */
static int delete_groups(const sl_kafka_t *k, const char *prefix) {
  rd_kafka_t *rk = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(k), RD_KAFKA_PRODUCER, NULL,
                           &rk, &err),
                 err);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_ListConsumerGroups(rk, NULL, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
  SL_ASSERT_TRUE(ev && !rd_kafka_event_error(ev));
  size_t n = 0;
  const rd_kafka_ConsumerGroupListing_t **gl =
      rd_kafka_ListConsumerGroups_result_valid(
          rd_kafka_event_ListConsumerGroups_result(ev), &n);
  rd_kafka_DeleteGroup_t *del[256];
  size_t nd = 0;
  for (size_t i = 0; i < n && nd < 256; i++) {
    const char *g = rd_kafka_ConsumerGroupListing_group_id(gl[i]);
    if (strncmp(g, prefix, strlen(prefix)) == 0)
      del[nd++] = rd_kafka_DeleteGroup_new(g);
  }
  rd_kafka_event_destroy(ev);
  if (nd) {
    rd_kafka_DeleteGroups(rk, del, nd, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    SL_ASSERT_TRUE(ev && !rd_kafka_event_error(ev));
    rd_kafka_event_destroy(ev);
    rd_kafka_DeleteGroup_destroy_array(del, nd);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return (int)nd;
}

/* K9: killed after a checkpoint completed and before its epochs were
 * committed; while the job is down the markers are deleted (as an expiry
 * after offsets.retention.minutes would).  The restore cannot tell whether
 * those epochs were committed: it stops with a message naming the id, the
 * checkpoint and the retention setting, and writes nothing. */
SL_TEST(eo_marker_gone_refuses_restore) {
  sl_kafka_t *k = start_kafka();
  produce_deltas_n(k, 4000);
  char pipeline[4400];
  snprintf(pipeline, sizeof(pipeline), "%s/balances.yaml", sl_test_dir());
  write_pipeline_d(k, pipeline, "exactly-once");
  int st = sl_test_wait(spawn_sluice(pipeline, "sink.before_commit=kill:1"));
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
    fail_with_log("run to sink.before_commit (not killed)", st);
  int64_t before = 0;
  for (int part = 0; part < OUT_PARTS; part++)
    before += lso(k, "balances", part);
  SL_ASSERT_TRUE(delete_groups(k, "sluice-balances-out-") > 0);
  st = sl_test_wait(spawn_sluice(pipeline, NULL));
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
  SL_ASSERT_TRUE(log_has("is gone, so whether the epoch of checkpoint"));
  SL_ASSERT_TRUE(log_has("offsets.retention.minutes"));
  int64_t after = 0;
  for (int part = 0; part < OUT_PARTS; part++) {
    int n = 0;
    char **v = read_kv(k, "balances", part, &n);
    after += n;
    free_kv(v, n);
  }
  printf("committed records before %lld, after the refused restore %lld\n",
         (long long)before, (long long)after);
  SL_ASSERT_TRUE(after <= before);
  sl_kafka_destroy(k);
}

typedef struct job_thread_s {
  sl_job_t *job;
  int rc;
  sl_error_t *err;
} job_thread_t;

static void *run_job_thread(void *arg) {
  job_thread_t *jt = arg;
  jt->rc = sl_job_run(jt->job, &jt->err);
  return NULL;
}

/* K5 while the job runs: the commit of checkpoint 1 is held (a latch at
 * sink.before_commit) until the broker has aborted the epoch's
 * transaction for exceeding transaction.timeout.ms (seen as the last
 * stable offset reaching the high watermark over the epoch's records).
 * Released, commit_transaction fails (the broker bumped the producer
 * epoch); the sink answers RESTART, the task restarts from checkpoint 1,
 * and the restore finds the marker below 1 and writes the epoch again
 * from its replay log, before any later epoch: every row exactly once. */
SL_TEST(eo_transaction_expired_by_the_broker_is_resent) {
  SL_ASSERT_TRUE(sl_inject_is_enabled());
  const char *extra[] = {
      "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
      NULL};
  sl_kafka_opts_t o;
  sl_kafka_opts_init(&o);
  o.extra_settings = extra;
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_start(&o, &k, &err), err);
  create_topic(k, "exp", 2, NULL);
  sl_kafka_sink_config_t c;
  sink_cfg(&c, k, "exp");
  c.delivery = SL_DELIVERY_EXACTLY_ONCE;
  c.transactional_id_prefix = "exp";
  const char *props[] = {"transaction.timeout.ms", "4000", NULL};
  c.properties = props;
  sl_inject_reset();
  SL_ASSERT_OK(sl_inject_arm("sink.before_commit", SL_INJECT_PAUSE, 1,
                             false));
  gen_job_name = "expiry";
  enum { N = 3000 };
  /* gen_job runs the job; run it on a thread of its own instead. */
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = N;
  g.keys = 1000;
  g.splits = 1;
  g.columns = SL_GEN_COL_SEQ | SL_GEN_COL_KEY;
  const sl_source_vt_t *svt;
  void *sctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&g, &svt, &sctx, &schema, NULL));
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "expiry";
  cfg.parallelism = 1;
  char ckdir[4400];
  snprintf(ckdir, sizeof(ckdir), "%s/ckpt", sl_test_dir());
  cfg.checkpoint.dir = ckdir;
  cfg.checkpoint.interval_ms = 200;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  cfg.restart.delay_ms = 10;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *st = sl_job_source(job, "gen", svt, sctx, schema);
  sl_schema_unref(schema);
  const sl_sink_vt_t *vt;
  void *ctx;
  SL_ASSERT_OK_E(sl_kafka_sink_create(&c, &vt, &ctx, &err), err);
  SL_ASSERT_OK(sl_stream_sink(st, "kafka-out", vt, ctx));
  job_thread_t jt = {job, -1, NULL};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, run_job_thread, &jt), 0);
  SL_ASSERT_OK(sl_inject_wait_paused("sink.before_commit", 120000));
  /* The epoch's records are in the log, behind its open transaction. */
  int64_t hi[2], end = mono_ms() + 90000;
  for (int part = 0; part < 2; part++) {
    hi[part] = hwm(k, "exp", part);
    SL_ASSERT_TRUE(lso(k, "exp", part) < hi[part]);
  }
  /* Wait for the broker's abort (its marker moves the LSO past them). */
  for (bool aborted = false; !aborted;) {
    aborted = true;
    for (int part = 0; part < 2; part++)
      if (lso(k, "exp", part) <= hi[part] - 1) aborted = false;
    if (!aborted && mono_ms() > end) {
      sl_inject_release("sink.before_commit");
      pthread_join(th, NULL);
      SL_TEST_FAIL("the broker did not abort the transaction in 90 s");
    }
    if (!aborted) {
      struct timespec ts = {0, 100000000};
      nanosleep(&ts, NULL);
    }
  }
  sl_inject_release("sink.before_commit");
  pthread_join(th, NULL);
  sl_inject_reset();
  if (jt.rc != SL_OK)
    SL_TEST_FAIL("job failed: %s",
                 jt.err ? sl_error_message(jt.err) : sl_strerror(jt.rc));
  sl_job_destroy(job);
  static uint8_t seen[N];
  memset(seen, 0, sizeof(seen));
  int total = 0;
  for (int part = 0; part < 2; part++) {
    int n = 0;
    char **v = read_kv(k, "exp", part, &n);
    for (int i = 0; i < n; i++) {
      long long seq, kv;
      if (sscanf(v[i], "-\t{\"seq\":%lld,\"key\":%lld}", &seq, &kv) != 2)
        SL_TEST_FAIL("partition %d: bad record '%s'", part, v[i]);
      SL_ASSERT_TRUE(seq >= 0 && seq < N);
      if (seen[seq]++) SL_TEST_FAIL("seq %lld twice", seq);
    }
    total += n;
    free_kv(v, n);
  }
  SL_ASSERT_EQ_INT(total, N);
  gen_job_name = "ksink";
  sl_kafka_destroy(k);
}
