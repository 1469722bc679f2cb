/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-kafka: Kafka -> sluice -> Kafka against the broker's own
 * performance tools, on one real broker, in one run.
 *
 * The job (q1-like, Nexmark's currency conversion): a Kafka source reads
 * JSON bids {"auction", "bidder", "price", "channel", "url", "date_time",
 * "extra"} from a topic of P partitions, a project keeps auction, bidder,
 * price * 0.908 (float64), date_time and extra, and a Kafka sink writes
 * each row as one JSON record (no key: round robin) to a topic of P
 * partitions.  Whole `sluice run` processes of the Release build, job
 * parallelism J (default 1), a checkpoint every C ms.  Every run is a job
 * of its own name (q1-<its output topic>), so the exactly-once sink's
 * transactional ids (prefix sluice-<name>-<uid>) are new in every run, as
 * for independent jobs.
 *
 * Arms of a round (all in one seeded random order per round):
 *
 *   sluice-alo    the job, sink delivery at-least-once, source bounded
 *                 (it ends at the end offsets seen at its start)
 *   sluice-eo     the same with delivery exactly-once (skipped, with the
 *                 reason, while sl_kafka_sink_create refuses it)
 *   producer      org.apache.kafka.tools.ProducerPerformance: N records
 *                 of the job's output records (a payload file of them) to
 *                 a fresh topic of P partitions, its default settings
 *                 (acks=all, idempotence on, linger.ms 5)
 *   producer-txn  the same, transactional, a transaction every C ms
 *                 (--transaction-duration-ms; run with the EO arm only)
 *   consumer      org.apache.kafka.tools.ConsumerPerformance: the N input
 *                 records of the job's input topic, read_committed
 *   lat-alo       end-to-end latency, at-least-once: the job unbounded on
 *   lat-eo        a fresh input topic, records produced at a fixed rate R
 *                 for S seconds (their date_time is their scheduled
 *                 produce time, CLOCK_REALTIME), a read_committed consumer
 *                 at the output records now - date_time of every record
 *                 scheduled after the first W seconds
 *   lat-kafka     the same producer and reader without a job: the reader
 *                 reads the input topic (Kafka's own produce-to-consume
 *                 latency on this broker, the latency's reference)
 *
 * Throughput of a sluice arm = N / (the last output record's CreateTime -
 * the first's): the job's span of writing, without its start-up and its
 * final checkpoint, as the tools report their own rates without the JVM's
 * start (ProducerPerformance: records/sec from its first send to its last
 * acknowledgement; ConsumerPerformance: fetch.nMsg.sec, which leaves out
 * the consumer group's join).  The wall-clock rate of the whole process
 * (exec to exit) is reported beside it.  Every sluice run is checked: the
 * output read back read_committed must hold exactly N records whose
 * auction ids sum to the input's.
 *
 * Ratios sluice/limit per round are paired (the arms of a round ran
 * within a minute or two of each other): the geometric mean of the
 * per-round ratios with a Student-t 95% interval on their logarithms,
 * beside the harness's unpaired intervals (expanded percentile bootstrap,
 * Fieller) over the rounds' values (bench/stats.h).  Everything is also
 * written to DIR/kafka-raw.csv.
 *
 * The broker is one KRaft node started with tests/tools/sl_kafka.h from
 * the jars tools/kafka-jars caches; the tools come from the kafka-tools jar
 * of the same release (tools/kafka-jars --tools puts it in <jars>/tools/),
 * run with java and the class path of the broker's jars plus that jar.
 *
 * usage: sluice-bench-kafka [--quick] [--rounds R] [--records N]
 *          [--extra-bytes B] [--partitions P] [--parallelism J]
 *          [--checkpoint-ms C]
 *          [--lat-rate R] [--lat-seconds S] [--lat-warmup-seconds W]
 *          [--txn-timeout-ms T] [--seed S] [--out DIR] [--sluice PATH]
 *          [--jars DIR]
 *
 * Defaults: 5 rounds, 1,000,000 records (about 250 bytes of JSON in, 175
 * out), 2 partitions, job parallelism 1 (one librdkafka consumer and one
 * producer, as each tool has one client), a checkpoint every 1000 ms, the
 * exactly-once sink's default transaction.timeout.ms (--txn-timeout-ms T
 * sets the property), latency at 10,000
 * records/s for 20 s (the first 5 s not counted); output in
 * bench/results/kafka/.  --quick: 2 rounds, 20,000 records, latency at
 * 2,000 records/s for 4 s (1 s not counted): a smoke run, not a figure.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "harness.h"
#include "runutil.h"
#include "sl_kafka.h"
#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* Options and shared state.                                            */

typedef struct opts_s {
  uint64_t rounds, records, extra_bytes, partitions, parallelism, ckpt_ms;
  uint64_t lat_rate, lat_seconds, lat_warmup, txn_timeout_ms;
  uint64_t seed;
  bool is_quick;
  const char *out_dir;
  char sluice[PATH_MAX];
  char jars[PATH_MAX];
  char tools_jar[2 * PATH_MAX];
} opts_t;

static opts_t O;
static sl_kafka_t *K;
static const char *boot;
static char work[512];
static char payload_path[PATH_MAX];
static int64_t expect_auction_sum;
static bool eo_enabled;
static char eo_skip_reason[1024];
static FILE *raw;

#define MAX_ROUNDS 64

typedef enum kind_e {
  K_SLUICE_ALO,
  K_SLUICE_EO,
  K_PRODUCER,
  K_PRODUCER_TXN,
  K_CONSUMER,
  K_LAT_ALO,
  K_LAT_EO,
  K_LAT_KAFKA
} kind_t;

typedef struct arm_s {
  const char *name;
  kind_t kind;
  double v[MAX_ROUNDS];    /* records/s (span for sluice), NaN: none */
  double wall[MAX_ROUNDS]; /* sluice: records/s exec to exit */
  double p50[MAX_ROUNDS], p99[MAX_ROUNDS], pmax[MAX_ROUNDS]; /* ms */
  size_t n_failed;
  sl_bench_hist_t *h; /* latency arms: pooled over rounds */
} arm_t;

static arm_t arms[] = {
    {.name = "sluice-alo", .kind = K_SLUICE_ALO},
    {.name = "sluice-eo", .kind = K_SLUICE_EO},
    {.name = "producer", .kind = K_PRODUCER},
    {.name = "producer-txn", .kind = K_PRODUCER_TXN},
    {.name = "consumer", .kind = K_CONSUMER},
    {.name = "lat-alo", .kind = K_LAT_ALO},
    {.name = "lat-eo", .kind = K_LAT_EO},
    {.name = "lat-kafka", .kind = K_LAT_KAFKA},
};
#define N_ARMS (sizeof(arms) / sizeof(arms[0]))

static bool arm_enabled(const arm_t *a) {
  if (a->kind == K_SLUICE_EO || a->kind == K_PRODUCER_TXN ||
      a->kind == K_LAT_EO)
    return eo_enabled;
  return true;
}

static arm_t *arm_of(kind_t k) {
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].kind == k) return &arms[i];
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Small helpers.                                                       */

static int fail(sl_error_t *err, const char *what) {
  fprintf(stderr, "bench-kafka: %s: %s\n", what,
          err ? sl_error_message(err) : "failed");
  sl_error_destroy(err);
  return -1;
}

static int64_t now_real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void log_quiet(const rd_kafka_t *rk, int level, const char *fac,
                      const char *buf) {
  (void)rk, (void)level, (void)fac, (void)buf;
}

static rd_kafka_t *new_client(rd_kafka_type_t type,
                              const char *const *settings) {
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", boot, errstr,
                        sizeof(errstr)) != RD_KAFKA_CONF_OK)
    goto bad;
  for (int i = 0; settings && settings[i]; i += 2)
    if (rd_kafka_conf_set(conf, settings[i], settings[i + 1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK)
      goto bad;
  rd_kafka_conf_set_log_cb(conf, log_quiet);
  rd_kafka_t *rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
  if (rk == NULL) goto bad;
  return rk;
bad:
  fprintf(stderr, "bench-kafka: librdkafka client: %s\n", errstr);
  rd_kafka_conf_destroy(conf);
  return NULL;
}

static int create_topic(const char *name) {
  sl_error_t *err = NULL;
  if (sl_kafka_create_topic(K, name, (int)O.partitions, 1, NULL, &err) !=
      SL_OK)
    return fail(err, name);
  return 0;
}

/* Delete topic (the disk of a long run); failures only warn. */
static void delete_topic(const char *name) {
  rd_kafka_t *rk = new_client(RD_KAFKA_PRODUCER, NULL);
  if (rk == NULL) return;
  rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(name);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_DeleteTopics(rk, &dt, 1, NULL, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
  if (ev == NULL || rd_kafka_event_error(ev))
    fprintf(stderr, "bench-kafka: deleting topic %s: %s\n", name,
            ev ? rd_kafka_event_error_string(ev) : "no answer");
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_DeleteTopic_destroy(dt);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
}

/* ------------------------------------------------------------------ */
/* Records.                                                             */

static const char *const channels[] = {"Google", "Facebook", "Baidu",
                                       "Apple"};

/* One JSON bid; the same i and seed give the same bid except date_time. */
static int make_bid(uint64_t i, int64_t date_time_us, char *buf,
                    size_t size) {
  uint64_t s = O.seed * 0x9e3779b97f4a7c15ull + i;
  uint64_t r1 = sl_bench_splitmix64(&s), r2 = sl_bench_splitmix64(&s);
  uint64_t auction = 1000 + r1 % 100000, bidder = 1000 + r2 % 1000000;
  uint64_t price = 100 + (r1 >> 32) % 1000000;
  char extra[1024];
  size_t n = O.extra_bytes < sizeof(extra) - 1 ? O.extra_bytes
                                               : sizeof(extra) - 1;
  for (size_t k = 0; k < n; k++) {
    if (k % 8 == 0) r2 = sl_bench_splitmix64(&s);
    extra[k] = (char)('a' + (r2 >> (8 * (k % 8))) % 26);
  }
  extra[n] = '\0';
  return snprintf(buf, size,
                  "{\"auction\":%" PRIu64 ",\"bidder\":%" PRIu64
                  ",\"price\":%" PRIu64 ",\"channel\":\"%s\","
                  "\"url\":\"https://www.nexmark.com/item.htm?query=1&"
                  "channel_id=%" PRIu64 "\",\"date_time\":%" PRId64
                  ",\"extra\":\"%s\"}",
                  auction, bidder, price, channels[r1 % 4], r2 % 1000,
                  date_time_us, extra);
}

static int64_t bid_auction(uint64_t i) {
  uint64_t s = O.seed * 0x9e3779b97f4a7c15ull + i;
  return (int64_t)(1000 + sl_bench_splitmix64(&s) % 100000);
}

/* A number after "name": in a JSON object; false when absent. */
static bool json_i64(const char *p, size_t len, const char *name,
                     int64_t *out) {
  char pat[64];
  int pl = snprintf(pat, sizeof(pat), "\"%s\"", name);
  const char *end = p + len;
  for (const char *q = p; q + pl < end; q++) {
    if (memcmp(q, pat, (size_t)pl) != 0) continue;
    q += pl;
    while (q < end && (*q == ' ' || *q == ':')) q++;
    char num[32];
    size_t k = 0;
    while (q < end && k < sizeof(num) - 1 &&
           (*q == '-' || (*q >= '0' && *q <= '9')))
      num[k++] = *q++;
    num[k] = '\0';
    if (k == 0) return false;
    *out = strtoll(num, NULL, 10);
    return true;
  }
  return false;
}

typedef struct producer_s {
  rd_kafka_t *rk;
  rd_kafka_topic_t *rkt;
  atomic_uint_fast64_t n_done, n_err;
} producer_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque) {
  (void)rk;
  producer_t *p = opaque;
  atomic_fetch_add(&p->n_done, 1);
  if (m->err) atomic_fetch_add(&p->n_err, 1);
}

static int producer_open(producer_t *p, const char *topic, bool is_low_lat) {
  memset(p, 0, sizeof(*p));
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  const char *set[] = {"bootstrap.servers", boot, "enable.idempotence",
                       "true", "linger.ms", is_low_lat ? "1" : "5", NULL};
  for (int i = 0; set[i]; i += 2)
    if (rd_kafka_conf_set(conf, set[i], set[i + 1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      fprintf(stderr, "bench-kafka: producer: %s\n", errstr);
      return -1;
    }
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, p);
  rd_kafka_conf_set_log_cb(conf, log_quiet);
  p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (p->rk == NULL) {
    rd_kafka_conf_destroy(conf);
    fprintf(stderr, "bench-kafka: producer: %s\n", errstr);
    return -1;
  }
  p->rkt = rd_kafka_topic_new(p->rk, topic, NULL);
  return 0;
}

static int producer_send(producer_t *p, const char *v, size_t len) {
  for (;;) {
    if (rd_kafka_produce(p->rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                         (void *)v, len, NULL, 0, NULL) == 0)
      break;
    if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      fprintf(stderr, "bench-kafka: produce: %s\n",
              rd_kafka_err2str(rd_kafka_last_error()));
      return -1;
    }
    rd_kafka_poll(p->rk, 10);
  }
  rd_kafka_poll(p->rk, 0);
  return 0;
}

/* Flush and close; -1 when a record was not acknowledged. */
static int producer_close(producer_t *p, uint64_t n_sent) {
  while (atomic_load(&p->n_done) < n_sent) rd_kafka_flush(p->rk, 1000);
  uint64_t bad = atomic_load(&p->n_err);
  rd_kafka_topic_destroy(p->rkt);
  rd_kafka_destroy(p->rk);
  if (bad) {
    fprintf(stderr, "bench-kafka: %" PRIu64 " records not acknowledged\n",
            bad);
    return -1;
  }
  return 0;
}

/* The job's input: N bids (date_time = when produced). */
static int preload(const char *topic) {
  producer_t p;
  if (producer_open(&p, topic, false) != 0) return -1;
  char buf[2048];
  expect_auction_sum = 0;
  for (uint64_t i = 0; i < O.records; i++) {
    int n = make_bid(i, now_real_us(), buf, sizeof(buf));
    expect_auction_sum += bid_auction(i);
    if (producer_send(&p, buf, (size_t)n) != 0) return -1;
  }
  return producer_close(&p, O.records);
}

/* ------------------------------------------------------------------ */
/* Reading a topic back (read_committed), whole or as it grows.        */

typedef struct reader_s {
  const char *topic;
  int64_t n, auction_sum, ts_min, ts_max; /* CreateTime, ms */
  FILE *payload;        /* keep the first payload_max values */
  int64_t payload_max;
  /* latency mode: stop at n_stop records or stop_flag */
  bool is_latency;
  int64_t n_stop;
  int64_t lat_from_us; /* count records with date_time >= this */
  atomic_bool stop;
  atomic_int_fast64_t n_live;
  sl_bench_hist_t *h;
  int rc;
} reader_t;

static int32_t topic_partitions(rd_kafka_t *rk, const char *topic) {
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  int32_t n = -1;
  if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
      md->topic_cnt == 1 && md->topics[0].err == 0)
    n = md->topics[0].partition_cnt;
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(rkt);
  return n;
}

static void *reader_main(void *arg) {
  reader_t *r = arg;
  const char *set[] = {"group.id", "sluice-bench-reader",
                       "isolation.level", "read_committed",
                       "enable.auto.commit", "false",
                       "enable.partition.eof", r->is_latency ? "false" : "true",
                       "fetch.wait.max.ms", "10", NULL};
  r->rc = -1;
  rd_kafka_t *rk = new_client(RD_KAFKA_CONSUMER, set);
  if (rk == NULL) return NULL;
  int32_t np = topic_partitions(rk, r->topic);
  if (np <= 0) {
    fprintf(stderr, "bench-kafka: no partitions for %s\n", r->topic);
    rd_kafka_destroy(rk);
    return NULL;
  }
  rd_kafka_topic_partition_list_t *tl = rd_kafka_topic_partition_list_new(np);
  for (int32_t i = 0; i < np; i++)
    rd_kafka_topic_partition_list_add(tl, r->topic, i)->offset =
        RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, tl);
  rd_kafka_topic_partition_list_destroy(tl);
  int32_t n_eof = 0;
  bool *eof = calloc((size_t)np, sizeof(bool));
  int64_t idle_since = sl_bench_now_ns();
  r->rc = 0;
  for (;;) {
    if (r->is_latency) {
      if (atomic_load(&r->stop) || (r->n_stop > 0 && r->n >= r->n_stop))
        break;
    } else if (n_eof == np) {
      break;
    }
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
    if (m == NULL) {
      if (!r->is_latency && sl_bench_now_ns() - idle_since > 60e9) {
        fprintf(stderr, "bench-kafka: reading %s: no end after 60 s\n",
                r->topic);
        r->rc = -1;
        break;
      }
      continue;
    }
    idle_since = sl_bench_now_ns();
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (m->partition >= 0 && m->partition < np && !eof[m->partition]) {
        eof[m->partition] = true;
        n_eof++;
      }
    } else if (m->err) {
      fprintf(stderr, "bench-kafka: reading %s: %s\n", r->topic,
              rd_kafka_message_errstr(m));
      r->rc = -1;
      rd_kafka_message_destroy(m);
      break;
    } else {
      int64_t now = r->is_latency ? now_real_us() : 0;
      int64_t auction = 0, dt = 0;
      const char *v = m->payload;
      if (!json_i64(v, m->len, "auction", &auction) ||
          !json_i64(v, m->len, "date_time", &dt)) {
        fprintf(stderr, "bench-kafka: %s: a record without auction or "
                "date_time: %.*s\n", r->topic, (int)(m->len < 200 ? m->len : 200),
                v);
        r->rc = -1;
        rd_kafka_message_destroy(m);
        break;
      }
      rd_kafka_timestamp_type_t tt;
      int64_t ts = rd_kafka_message_timestamp(m, &tt);
      if (r->n == 0 || ts < r->ts_min) r->ts_min = ts;
      if (r->n == 0 || ts > r->ts_max) r->ts_max = ts;
      r->n++;
      r->auction_sum += auction;
      if (r->payload && r->n <= r->payload_max)
        fprintf(r->payload, "%.*s\n", (int)m->len, v);
      if (r->is_latency) {
        atomic_store(&r->n_live, r->n);
        if (dt >= r->lat_from_us)
          sl_bench_hist_record(r->h, (now - dt) * 1000);
      }
    }
    rd_kafka_message_destroy(m);
  }
  free(eof);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return NULL;
}

static int read_all(reader_t *r) {
  reader_main(r);
  return r->rc;
}

/* ------------------------------------------------------------------ */
/* Pipelines.                                                           */

static int write_pipeline(bool is_eo, bool is_bounded, const char *in,
                          const char *out, const char *path) {
  char ck[PATH_MAX], y[16384], txn[128];
  snprintf(ck, sizeof(ck), "%s/ckpt", work);
  snprintf(txn, sizeof(txn),
           "  properties:\n    transaction.timeout.ms: '%" PRIu64 "'\n",
           O.txn_timeout_ms);
  snprintf(y, sizeof(y),
           "# sluice-bench-kafka: Kafka -> q1 -> Kafka (generated)\n"
           "name: q1-%s\n"
           "parallelism: %" PRIu64 "\n"
           "checkpoint:\n"
           "  dir: %s\n"
           "  interval_ms: %" PRIu64 "\n"
           "source:\n"
           "  type: kafka\n"
           "  uid: bids\n"
           "  bootstrap_servers: %s\n"
           "  topic: %s\n"
           "  start: earliest\n"
           "  bounded: %s\n"
           "  format: json\n"
           "  schema:\n"
           "    - {name: auction, type: int64}\n"
           "    - {name: bidder, type: int64}\n"
           "    - {name: price, type: int64}\n"
           "    - {name: channel, type: string}\n"
           "    - {name: url, type: string}\n"
           "    - {name: date_time, type: int64}\n"
           "    - {name: extra, type: string}\n"
           "transforms:\n"
           "  - project:\n"
           "      auction: auction\n"
           "      bidder: bidder\n"
           "      price: price * 0.908\n"
           "      date_time: date_time\n"
           "      extra: extra\n"
           "sink:\n"
           "  type: kafka\n"
           "  uid: q1-out\n"
           "  bootstrap_servers: %s\n"
           "  topic: %s\n"
           "  format: json\n"
           "  delivery: %s\n"
           "%s",
           out, O.parallelism, ck, O.ckpt_ms, boot, in,
           is_bounded ? "true" : "false", boot, out,
           is_eo ? "exactly-once" : "at-least-once",
           is_eo && O.txn_timeout_ms ? txn : "");
  return sl_bench_write_file(path, y);
}

/* ------------------------------------------------------------------ */
/* The arms.                                                            */

static int run_sluice(arm_t *a, int round, const char *in_topic,
                      FILE *payload) {
  bool is_eo = a == NULL ? false : a->kind == K_SLUICE_EO;
  char out[128], yaml[PATH_MAX], ck[PATH_MAX], log[PATH_MAX];
  snprintf(out, sizeof(out), "out-%s-%d", a ? a->name : "shape", round);
  snprintf(yaml, sizeof(yaml), "%s/%s.yaml", work, out);
  snprintf(ck, sizeof(ck), "%s/ckpt", work);
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir,
           a ? a->name : "shape");
  sl_bench_rm_rf(ck);
  if (create_topic(out) != 0 ||
      write_pipeline(is_eo, true, in_topic, out, yaml) != 0)
    return -1;
  char *argv[] = {O.sluice, "run", yaml, "--quiet", NULL};
  int64_t t0 = sl_bench_now_ns();
  pid_t pid = sl_bench_spawn(argv, NULL, log);
  int st = pid > 0 ? sl_bench_wait(pid) : -1;
  int64_t t1 = sl_bench_now_ns();
  if (st != 0) {
    fprintf(stderr, "bench-kafka: %s: `%s run` exited with %d; see %s\n",
            a ? a->name : "shape", O.sluice, st, log);
    delete_topic(out);
    return -1;
  }
  reader_t r;
  memset(&r, 0, sizeof(r));
  r.topic = out;
  r.payload = payload;
  r.payload_max = 10000;
  int rc = read_all(&r);
  delete_topic(out);
  if (rc != 0) return -1;
  if ((uint64_t)r.n != O.records || r.auction_sum != expect_auction_sum) {
    fprintf(stderr, "bench-kafka: %s round %d: the output holds %" PRId64
            " records (auction sum %" PRId64 "); expected %" PRIu64
            " (sum %" PRId64 ")\n", a ? a->name : "shape", round, r.n,
            r.auction_sum, O.records, expect_auction_sum);
    return -1;
  }
  if (a == NULL) return 0;
  double span_s = (double)(r.ts_max - r.ts_min) / 1e3;
  if (span_s < 0.001) span_s = 0.001;
  a->v[round] = (double)O.records / span_s;
  a->wall[round] = (double)O.records / ((double)(t1 - t0) / 1e9);
  fprintf(raw, "%s,%d,%.1f,%.1f,,,\n", a->name, round, a->v[round],
          a->wall[round]);
  return 0;
}

static char *const *java_argv(const char *cls, char *const *args) {
  static char cp[4 * PATH_MAX];
  static char *v[64];
  snprintf(cp, sizeof(cp), "%s/*:%s", O.jars, O.tools_jar);
  int n = 0;
  v[n++] = "java";
  v[n++] = "-Xms64m";
  v[n++] = "-Xmx512m";
  v[n++] = "-XX:+UseSerialGC";
  v[n++] = "-cp";
  v[n++] = cp;
  v[n++] = (char *)cls;
  for (int i = 0; args[i] && n < 63; i++) v[n++] = args[i];
  v[n] = NULL;
  return v;
}

static int run_producer_tool(arm_t *a, int round) {
  bool is_txn = a->kind == K_PRODUCER_TXN;
  char topic[128], nrec[32], bs[600], txn[32], out[PATH_MAX], log[PATH_MAX];
  snprintf(topic, sizeof(topic), "out-%s-%d", a->name, round);
  snprintf(nrec, sizeof(nrec), "%" PRIu64, O.records);
  snprintf(bs, sizeof(bs), "bootstrap.servers=%s", boot);
  snprintf(txn, sizeof(txn), "%" PRIu64, O.ckpt_ms);
  snprintf(out, sizeof(out), "%s/%s-%d.out", O.out_dir, a->name, round);
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir, a->name);
  if (create_topic(topic) != 0) return -1;
  char *args[] = {"--topic", topic, "--num-records", nrec, "--throughput",
                  "-1", "--payload-file", payload_path, "--producer-props",
                  bs, is_txn ? "--transaction-duration-ms" : NULL, txn, NULL};
  pid_t pid = sl_bench_spawn(java_argv("org.apache.kafka.tools.ProducerPerformance",
                              args), out, log);
  int st = pid > 0 ? sl_bench_wait(pid) : -1;
  /* The summary: "N records sent, X records/sec (Y MB/sec), ..." */
  FILE *f = fopen(out, "r");
  char line[1024];
  double rate = NAN;
  unsigned long long sent = 0;
  while (f && fgets(line, sizeof(line), f)) {
    double x;
    unsigned long long n;
    if (sscanf(line, "%llu records sent, %lf records/sec", &n, &x) == 2 &&
        strstr(line, "99.9th")) {
      rate = x;
      sent = n;
    }
  }
  if (f) fclose(f);
  int64_t total = 0;
  for (int p = 0; p < (int)O.partitions && st == 0; p++) {
    int64_t lo = 0, hi = 0;
    sl_error_t *err = NULL;
    if (sl_kafka_watermarks(K, topic, p, &lo, &hi, &err) != SL_OK) {
      fail(err, topic);
      st = -1;
    }
    total += hi;
  }
  delete_topic(topic);
  /* A transactional topic holds a control record per transaction and
   * partition, so its end offsets count more than the records. */
  if (st != 0 || isnan(rate) || sent != O.records ||
      total < (int64_t)O.records || (!is_txn && total != (int64_t)O.records)) {
    fprintf(stderr, "bench-kafka: %s round %d: exit %d, rate %g, %llu sent, "
            "%" PRId64 " in the topic; see %s and %s\n", a->name, round, st,
            rate, sent, total, out, log);
    return -1;
  }
  a->v[round] = rate;
  fprintf(raw, "%s,%d,%.1f,,,,\n", a->name, round, rate);
  return 0;
}

static int run_consumer_tool(arm_t *a, int round) {
  char nrec[32], group[64], cfg[600], out[PATH_MAX], log[PATH_MAX];
  snprintf(nrec, sizeof(nrec), "%" PRIu64, O.records);
  snprintf(group, sizeof(group), "bench-consumer-%d", round);
  snprintf(cfg, sizeof(cfg), "%s/consumer.properties", work);
  snprintf(out, sizeof(out), "%s/%s-%d.out", O.out_dir, a->name, round);
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir, a->name);
  if (sl_bench_write_file(cfg, "isolation.level=read_committed\n") != 0) return -1;
  char *args[] = {"--bootstrap-server", (char *)boot, "--topic", "bids",
                  "--messages", nrec, "--group", group, "--consumer.config",
                  cfg, "--timeout", "60000", NULL};
  pid_t pid = sl_bench_spawn(java_argv("org.apache.kafka.tools.ConsumerPerformance",
                              args), out, log);
  int st = pid > 0 ? sl_bench_wait(pid) : -1;
  /* start.time, end.time, data.consumed.in.MB, MB.sec,
   * data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms,
   * fetch.MB.sec, fetch.nMsg.sec */
  FILE *f = fopen(out, "r");
  char line[1024];
  double rate = NAN;
  long long n = -1;
  while (f && fgets(line, sizeof(line), f)) {
    if (strncmp(line, "start.time", 10) == 0) continue;
    char *fld[16];
    int k = 0;
    for (char *s = strtok(line, ","); s && k < 16; s = strtok(NULL, ","))
      fld[k++] = s;
    if (k == 10) {
      n = atoll(fld[4]);
      rate = atof(fld[9]);
    }
  }
  if (f) fclose(f);
  if (st != 0 || isnan(rate) || rate <= 0 || n != (long long)O.records) {
    fprintf(stderr, "bench-kafka: %s round %d: exit %d, %lld records, rate "
            "%g; see %s and %s\n", a->name, round, st, n, rate, out, log);
    return -1;
  }
  a->v[round] = rate;
  fprintf(raw, "%s,%d,%.1f,,,,\n", a->name, round, rate);
  return 0;
}

/* The job unbounded; records at a fixed rate; latency at the output. */
static int run_latency(arm_t *a, int round) {
  bool is_eo = a->kind == K_LAT_EO;
  /* lat-kafka: no job; the reader reads the input topic itself. */
  bool is_job = a->kind != K_LAT_KAFKA;
  char in[128], out[128], yaml[PATH_MAX], ck[PATH_MAX], log[PATH_MAX];
  snprintf(in, sizeof(in), "lat-in-%s-%d", a->name, round);
  snprintf(out, sizeof(out), "lat-out-%s-%d", a->name, round);
  snprintf(yaml, sizeof(yaml), "%s/%s.yaml", work, out);
  snprintf(ck, sizeof(ck), "%s/ckpt", work);
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir, a->name);
  sl_bench_rm_rf(ck);
  if (create_topic(in) != 0 ||
      (is_job && (create_topic(out) != 0 ||
                  write_pipeline(is_eo, false, in, out, yaml) != 0)))
    return -1;
  sl_bench_hist_t *h = malloc(sizeof(*h));
  if (h == NULL) return -1;
  sl_bench_hist_init(h);
  uint64_t total = O.lat_rate * O.lat_seconds;
  reader_t r;
  memset(&r, 0, sizeof(r));
  r.topic = is_job ? out : in;
  r.is_latency = true;
  r.n_stop = (int64_t)total;
  r.h = h;
  int rc = -1;
  char *argv[] = {O.sluice, "run", yaml, "--quiet", NULL};
  pid_t pid = is_job ? sl_bench_spawn(argv, NULL, log) : 0;
  pthread_t th;
  bool has_thread = false;
  producer_t p;
  bool has_producer = false;
  if (pid < 0) goto out;
  if (pthread_create(&th, NULL, reader_main, &r) != 0) goto out;
  has_thread = true;
  if (producer_open(&p, in, true) != 0) goto out;
  has_producer = true;
  /* The schedule: record k is due at t0 + k / rate and carries that time
   * as its date_time, so a producer that falls behind shows as latency. */
  int64_t t0 = now_real_us() + 200000;
  r.lat_from_us = t0 + (int64_t)O.lat_warmup * 1000000;
  char buf[2048];
  uint64_t k = 0;
  while (k < total) {
    int64_t now = now_real_us();
    int64_t due = t0 + (int64_t)(k * 1000000 / O.lat_rate);
    if (due > now) {
      rd_kafka_poll(p.rk, 0);
      int64_t d = due - now;
      struct timespec ts = {0, (long)((d > 1000 ? 1000 : d) * 1000)};
      nanosleep(&ts, NULL);
      continue;
    }
    int n = make_bid(k, due, buf, sizeof(buf));
    if (producer_send(&p, buf, (size_t)n) != 0) goto out;
    k++;
  }
  has_producer = false;
  if (producer_close(&p, total) != 0) goto out;
  /* Wait for the output, at most 60 s after the last record was due. */
  int64_t deadline = sl_bench_now_ns() + 60 * (int64_t)1000000000;
  int st = 0;
  bool is_running = true;
  while (atomic_load(&r.n_live) < (int64_t)total &&
         sl_bench_now_ns() < deadline) {
    int s;
    if (pid > 0 && waitpid(pid, &s, WNOHANG) == pid) {
      is_running = false;
      st = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
      break;
    }
    usleep(20000);
  }
  if (!is_running) {
    fprintf(stderr, "bench-kafka: %s round %d: the job ended (%d) before "
            "its output was complete; see %s\n", a->name, round, st, log);
    pid = -1;
    goto out;
  }
  if (atomic_load(&r.n_live) < (int64_t)total) {
    fprintf(stderr, "bench-kafka: %s round %d: %" PRId64 " of %" PRIu64
            " records reached the output within 60 s\n", a->name, round,
            (int64_t)atomic_load(&r.n_live), total);
    goto out;
  }
  rc = 0;
out:
  if (has_producer) producer_close(&p, k);
  atomic_store(&r.stop, true);
  if (has_thread) pthread_join(th, NULL);
  if (pid > 0) {
    kill(pid, SIGTERM);
    int s = sl_bench_wait(pid);
    if (s != 143 && s != 0 && rc == 0) {
      fprintf(stderr, "bench-kafka: %s round %d: the job exited with %d "
              "on SIGTERM; see %s\n", a->name, round, s, log);
      rc = -1;
    }
  }
  if (rc == 0 && r.rc != 0) rc = -1;
  if (rc == 0 && sl_bench_hist_count(h) == 0) {
    fprintf(stderr, "bench-kafka: %s round %d: no record after the warm-up\n",
            a->name, round);
    rc = -1;
  }
  if (rc == 0) {
    a->p50[round] = (double)sl_bench_hist_quantile(h, 0.5) / 1e6;
    a->p99[round] = (double)sl_bench_hist_quantile(h, 0.99) / 1e6;
    a->pmax[round] = (double)sl_bench_hist_max(h) / 1e6;
    a->v[round] = (double)sl_bench_hist_count(h);
    sl_bench_hist_merge(a->h, h);
    fprintf(raw, "%s,%d,,,%.3f,%.3f,%.3f\n", a->name, round, a->p50[round],
            a->p99[round], a->pmax[round]);
  }
  free(h);
  delete_topic(in);
  if (is_job) delete_topic(out);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Reporting.                                                           */

static void print_stat(const char *label, const double *x, double scale,
                       const char *unit) {
  sl_bench_print_stat(label, 24, x, O.rounds, scale, unit, "runs");
}

/* cand / base: unpaired (bootstrap, Fieller) and paired by round. */
static void print_ratio(const char *label, const double *cand,
                        const double *base) {
  sl_bench_print_ratio(label, 24, cand, base, O.rounds, O.seed, "runs");
}

static void report(void) {
  arm_t *alo = arm_of(K_SLUICE_ALO), *eo = arm_of(K_SLUICE_EO),
        *pr = arm_of(K_PRODUCER), *prt = arm_of(K_PRODUCER_TXN),
        *co = arm_of(K_CONSUMER), *la = arm_of(K_LAT_ALO),
        *le = arm_of(K_LAT_EO);
  printf("\n== throughput: %" PRIu64 " records, %" PRIu64
         " partitions, parallelism %" PRIu64 ", checkpoint every %" PRIu64
         " ms; k records/s ==\n",
         O.records, O.partitions, O.parallelism, O.ckpt_ms);
  print_stat("sluice-alo (span)", alo->v, 1e-3, "k/s");
  print_stat("sluice-alo (wall)", alo->wall, 1e-3, "k/s");
  if (eo_enabled) {
    print_stat("sluice-eo (span)", eo->v, 1e-3, "k/s");
    print_stat("sluice-eo (wall)", eo->wall, 1e-3, "k/s");
  }
  print_stat("producer tool", pr->v, 1e-3, "k/s");
  if (eo_enabled) print_stat("producer tool (txn)", prt->v, 1e-3, "k/s");
  print_stat("consumer tool", co->v, 1e-3, "k/s");
  printf("\n== ratios of mean records/s, 95%% intervals ==\n");
  print_ratio("ALO/producer", alo->v, pr->v);
  print_ratio("ALO/consumer", alo->v, co->v);
  print_ratio("ALO-wall/producer", alo->wall, pr->v);
  if (eo_enabled) {
    print_ratio("EO/producer-txn", eo->v, prt->v);
    print_ratio("EO/consumer", eo->v, co->v);
    print_ratio("EO-wall/producer-txn", eo->wall, prt->v);
    print_ratio("EO/ALO", eo->v, alo->v);
    print_ratio("producer-txn/producer", prt->v, pr->v);
  } else {
    printf("  EO ratios skipped: %s\n", eo_skip_reason);
  }
  printf("\n== end-to-end latency: %" PRIu64 " records/s for %" PRIu64
         " s, the first %" PRIu64 " s not counted; checkpoint every %" PRIu64
         " ms; Kafka = the input topic read directly, no job; ms (per run: "
         "mean of the runs' quantiles, 95%% CI; pooled: quantiles of all "
         "runs' records) ==\n",
         O.lat_rate, O.lat_seconds, O.lat_warmup, O.ckpt_ms);
  arm_t *lat[3] = {la, le, arm_of(K_LAT_KAFKA)};
  const char *lab[3] = {"ALO", "EO", "Kafka"};
  for (int i = 0; i < 3; i++) {
    if (i == 1 && !eo_enabled) {
      printf("  EO latency skipped: %s\n", eo_skip_reason);
      continue;
    }
    char l[64];
    snprintf(l, sizeof(l), "%s latency p50", lab[i]);
    print_stat(l, lat[i]->p50, 1, "ms");
    snprintf(l, sizeof(l), "%s latency p99", lab[i]);
    print_stat(l, lat[i]->p99, 1, "ms");
    snprintf(l, sizeof(l), "%s latency max", lab[i]);
    print_stat(l, lat[i]->pmax, 1, "ms");
    const sl_bench_hist_t *h = lat[i]->h;
    if (sl_bench_hist_count(h))
      printf("  %-24s p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f "
             "ms  (%" PRIu64 " records)\n",
             i == 0 ? "ALO latency pooled"
             : i == 1 ? "EO latency pooled" : "Kafka latency pooled",
             (double)sl_bench_hist_quantile(h, 0.5) / 1e6,
             (double)sl_bench_hist_quantile(h, 0.9) / 1e6,
             (double)sl_bench_hist_quantile(h, 0.99) / 1e6,
             (double)sl_bench_hist_quantile(h, 0.999) / 1e6,
             (double)sl_bench_hist_max(h) / 1e6, sl_bench_hist_count(h));
  }
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].n_failed)
      printf("WARNING: %s: %zu failed runs (not counted)\n", arms[i].name,
             arms[i].n_failed);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice-bench-kafka [--quick] [--rounds R] [--records N]\n"
          "         [--extra-bytes B] [--partitions P] [--parallelism J]\n"
          "         [--checkpoint-ms C]\n"
          "         [--lat-rate R] [--lat-seconds S] [--lat-warmup-seconds W]\n"
          "         [--txn-timeout-ms T] [--seed S] [--out DIR]\n"
          "         [--sluice PATH] [--jars DIR]\n");
}

static int parse_args(int argc, char **argv) {
  O.rounds = 5;
  O.records = 1000000;
  O.extra_bytes = 80;
  O.partitions = 2;
  O.parallelism = 1;
  O.ckpt_ms = 1000;
  O.lat_rate = 10000;
  O.lat_seconds = 20;
  O.lat_warmup = 5;
  O.txn_timeout_ms = 0;
  O.seed = 1;
  O.out_dir = "bench/results/kafka";
  const char *jars = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(a, "--quick") == 0) {
      O.is_quick = true;
      O.rounds = 2;
      O.records = 20000;
      O.lat_rate = 2000;
      O.lat_seconds = 4;
      O.lat_warmup = 1;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench-kafka: %s needs a value\n", a);
      return -1;
    }
    const char *v = argv[++i];
    uint64_t *u = NULL, min = 1;
    if (strcmp(a, "--out") == 0) {
      O.out_dir = v;
      continue;
    } else if (strcmp(a, "--sluice") == 0) {
      snprintf(O.sluice, sizeof(O.sluice), "%s", v);
      continue;
    } else if (strcmp(a, "--jars") == 0) {
      jars = v;
      continue;
    } else if (strcmp(a, "--rounds") == 0) u = &O.rounds, min = 2;
    else if (strcmp(a, "--records") == 0) u = &O.records;
    else if (strcmp(a, "--extra-bytes") == 0) u = &O.extra_bytes, min = 0;
    else if (strcmp(a, "--partitions") == 0) u = &O.partitions;
    else if (strcmp(a, "--parallelism") == 0) u = &O.parallelism;
    else if (strcmp(a, "--checkpoint-ms") == 0) u = &O.ckpt_ms;
    else if (strcmp(a, "--lat-rate") == 0) u = &O.lat_rate;
    else if (strcmp(a, "--lat-seconds") == 0) u = &O.lat_seconds;
    else if (strcmp(a, "--lat-warmup-seconds") == 0) u = &O.lat_warmup, min = 0;
    else if (strcmp(a, "--txn-timeout-ms") == 0) u = &O.txn_timeout_ms;
    else if (strcmp(a, "--seed") == 0) u = &O.seed, min = 0;
    else {
      fprintf(stderr, "bench-kafka: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (!sl_bench_parse_u64(v, u) || *u < min) {
      fprintf(stderr, "bench-kafka: %s needs a whole number >= %" PRIu64
              ", not '%s'\n", a, min, v);
      return -1;
    }
  }
  if (O.rounds > MAX_ROUNDS) {
    fprintf(stderr, "bench-kafka: --rounds is at most %d\n", MAX_ROUNDS);
    return -1;
  }
  if (O.extra_bytes > 1000 || O.partitions > 64 || O.parallelism > 64) {
    fprintf(stderr, "bench-kafka: --extra-bytes is at most 1000, "
            "--partitions and --parallelism at most 64\n");
    return -1;
  }
  if (O.lat_warmup >= O.lat_seconds) {
    fprintf(stderr, "bench-kafka: --lat-warmup-seconds must be less than "
            "--lat-seconds\n");
    return -1;
  }
  if (O.sluice[0] == '\0') {
    if (sl_bench_sibling("sluice", O.sluice, sizeof(O.sluice)) != 0) {
      fprintf(stderr, "bench-kafka: cannot find myself; give --sluice\n");
      return -1;
    }
  }
  if (access(O.sluice, X_OK) != 0) {
    fprintf(stderr, "bench-kafka: %s is not an executable (give --sluice)\n",
            O.sluice);
    return -1;
  }
  /* The jars: as sl_kafka finds them (tests/tools/sl_kafka.h). */
  if (jars == NULL) jars = getenv("SL_KAFKA_JARS");
  if (jars) {
    snprintf(O.jars, sizeof(O.jars), "%s", jars);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0])
      snprintf(O.jars, sizeof(O.jars), "%s/sluice/kafka-%s", xdg,
               sl_kafka_default_version());
    else
      snprintf(O.jars, sizeof(O.jars), "%s/.cache/sluice/kafka-%s",
               home ? home : "", sl_kafka_default_version());
  }
  /* The tools' jar: <jars>/tools/kafka-tools-<version>.jar, the version
   * of the broker's jar in <jars>. */
  char tools_dir[PATH_MAX + 8];
  snprintf(tools_dir, sizeof(tools_dir), "%s/tools", O.jars);
  O.tools_jar[0] = '\0';
  if (strlen(O.jars) > PATH_MAX - 300) {
    fprintf(stderr, "bench-kafka: the jars' path is too long\n");
    return -1;
  }
  FILE *ls = NULL;
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof(cmd), "ls '%s' 2>/dev/null", tools_dir);
  if ((ls = popen(cmd, "r")) != NULL) {
    char name[256];
    while (fgets(name, sizeof(name), ls)) {
      name[strcspn(name, "\n")] = '\0';
      if (strncmp(name, "kafka-tools-", 12) == 0 &&
          strncmp(name, "kafka-tools-api", 15) != 0)
        snprintf(O.tools_jar, sizeof(O.tools_jar), "%s/%s", tools_dir, name);
    }
    pclose(ls);
  }
  if (O.tools_jar[0] == '\0') {
    fprintf(stderr,
            "bench-kafka: no kafka-tools jar in %s: run `tools/kafka-jars "
            "--tools` (it resolves org.apache.kafka:kafka-tools of the "
            "broker's release with Maven)\n", tools_dir);
    return -1;
  }
  return 0;
}

/* Is the exactly-once sink there?  Asks sl_kafka_sink_create, so that a
 * build with it runs the EO arms without a change here. */
static void probe_eo(void) {
  sl_kafka_sink_config_t c;
  sl_kafka_sink_config_init(&c);
  c.bootstrap_servers = boot;
  c.topic = "bench-probe";
  c.delivery = SL_DELIVERY_EXACTLY_ONCE;
  const sl_sink_vt_t *vt = NULL;
  void *ctx = NULL;
  sl_error_t *err = NULL;
  int rc = sl_kafka_sink_create(&c, &vt, &ctx, &err);
  if (rc == SL_OK) {
    eo_enabled = true;
    vt->destroy(ctx);
    return;
  }
  eo_enabled = false;
  snprintf(eo_skip_reason, sizeof(eo_skip_reason),
           "sl_kafka_sink_create(delivery exactly-once) answers %s: %s",
           rc == SL_ENOTSUP ? "SL_ENOTSUP" : sl_strerror(rc),
           err ? sl_error_message(err) : "");
  sl_error_destroy(err);
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) return 2;
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < N_ARMS; i++) {
    for (int r = 0; r < MAX_ROUNDS; r++)
      arms[i].v[r] = arms[i].wall[r] = arms[i].p50[r] = arms[i].p99[r] =
          arms[i].pmax[r] = NAN;
    arms[i].h = malloc(sizeof(sl_bench_hist_t));
    if (arms[i].h == NULL) return 2;
    sl_bench_hist_init(arms[i].h);
  }
  if (mkdir(O.out_dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "bench-kafka: cannot create %s: %s\n", O.out_dir,
            strerror(errno));
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(work, sizeof(work), "%s/sl-bench-kafka-XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(work) == NULL) {
    fprintf(stderr, "bench-kafka: mkdtemp: %s\n", strerror(errno));
    return 2;
  }
  char rawp[PATH_MAX];
  snprintf(rawp, sizeof(rawp), "%s/kafka-raw.csv", O.out_dir);
  raw = fopen(rawp, "w");
  if (raw == NULL) {
    fprintf(stderr, "bench-kafka: cannot write %s\n", rawp);
    return 2;
  }
  fprintf(raw, "arm,round,records_per_s,wall_records_per_s,lat_p50_ms,"
          "lat_p99_ms,lat_max_ms\n");
  int rc = 1;
  printf("# sluice-bench-kafka%s: %" PRIu64 " rounds; sluice %s; jars %s; "
         "tools %s; load average %.2f at start\n",
         O.is_quick ? " --quick (a smoke run, not a figure)" : "", O.rounds,
         O.sluice, O.jars, O.tools_jar, sl_bench_loadavg1());
  fflush(stdout);
  sl_kafka_opts_t ko;
  sl_kafka_opts_init(&ko);
  ko.jars_dir = O.jars;
  ko.base_dir = work;
  sl_error_t *err = NULL;
  if (sl_kafka_start(&ko, &K, &err) != SL_OK) {
    fail(err, "starting the broker");
    goto out;
  }
  boot = sl_kafka_bootstrap(K);
  printf("# broker: Apache Kafka %s, one KRaft node at %s; client "
         "librdkafka %s\n", sl_kafka_version(K), boot, rd_kafka_version_str());
  probe_eo();
  if (!eo_enabled)
    printf("# sluice-eo, producer-txn, lat-eo: skipped: %s\n",
           eo_skip_reason);
  fflush(stdout);

  /* The input, and the job's output records as the producer tool's
   * payloads (a first, untimed run, which also warms the broker). */
  if (create_topic("bids") != 0 || preload("bids") != 0) goto out;
  snprintf(payload_path, sizeof(payload_path), "%s/payload.txt", work);
  FILE *pf = fopen(payload_path, "w");
  if (pf == NULL) goto out;
  int src = run_sluice(NULL, 0, "bids", pf);
  if (fclose(pf) != 0 || src != 0) {
    fprintf(stderr, "bench-kafka: the first (untimed) run failed\n");
    goto out;
  }
  {
    struct stat sb;
    FILE *c = fopen(payload_path, "r");
    long lines = 0;
    int ch;
    while (c && (ch = fgetc(c)) != EOF)
      if (ch == '\n') lines++;
    if (c) fclose(c);
    if (stat(payload_path, &sb) == 0 && lines > 0) {
      char in1[2048];
      int inlen = make_bid(0, now_real_us(), in1, sizeof(in1));
      printf("# records: input about %d bytes of JSON, output %.0f bytes "
             "(mean of %ld payloads)\n", inlen,
             (double)sb.st_size / (double)lines - 1, lines);
    }
  }
  fflush(stdout);

  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, O.seed);
  size_t order[N_ARMS];
  for (uint64_t r = 0; r < O.rounds; r++) {
    size_t n = 0;
    for (size_t i = 0; i < N_ARMS; i++)
      if (arm_enabled(&arms[i])) order[n++] = i;
    sl_bench_shuffle(order, n, &rng);
    fprintf(stderr, "round %" PRIu64 " (load %.2f):", r, sl_bench_loadavg1());
    for (size_t k = 0; k < n; k++) {
      arm_t *a = &arms[order[k]];
      fprintf(stderr, " %s", a->name);
      int arc;
      switch (a->kind) {
      case K_SLUICE_ALO:
      case K_SLUICE_EO:
        arc = run_sluice(a, (int)r, "bids", NULL);
        break;
      case K_PRODUCER:
      case K_PRODUCER_TXN:
        arc = run_producer_tool(a, (int)r);
        break;
      case K_CONSUMER:
        arc = run_consumer_tool(a, (int)r);
        break;
      default:
        arc = run_latency(a, (int)r);
        break;
      }
      if (arc != 0) {
        a->n_failed++;
        fprintf(raw, "%s,%" PRIu64 ",failed,,,,\n", a->name, r);
      }
      fflush(raw);
    }
    fprintf(stderr, "\n");
  }
  report();
  printf("# load average %.2f at the end\n", sl_bench_loadavg1());
  rc = 0;
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].n_failed) rc = 1;
out:
  sl_kafka_destroy(K);
  if (raw) fclose(raw);
  for (size_t i = 0; i < N_ARMS; i++) free(arms[i].h);
  if (!getenv("SL_TEST_KEEP")) sl_bench_rm_rf(work);
  return rc;
}
