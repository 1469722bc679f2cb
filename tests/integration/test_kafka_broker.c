/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The test Kafka broker (tests/tools/sl_kafka.c) with Debian's librdkafka:
 * a one-node broker starts, takes a topic of two partitions, shows
 * committed transactions to a read_committed consumer and hides aborted
 * ones, keeps its data over a restart and is gone after a stop; a killed
 * test leaves no broker behind; a three-node cluster elects a new leader
 * when the leader's node is killed.  Not run under ThreadSanitizer:
 * librdkafka starts its threads with C11 thrd_create, which TSan does not
 * intercept (docs/testing-servers.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_kafka.h"
#include "sl_kafka_client.h"
#include "sl_test.h"

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static sl_kafka_t *start_kafka(int nodes) {
  sl_kafka_opts_t o;
  sl_kafka_opts_init(&o);
  o.nodes = nodes;
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  int64_t t0 = mono_ms();
  SL_ASSERT_OK_E(sl_kafka_start(&o, &k, &err), err);
  printf("Kafka %s, %d node(s) at %s, started in %lld ms\n",
         sl_kafka_version(k), nodes, sl_kafka_bootstrap(k),
         (long long)(mono_ms() - t0));
  return k;
}

/* The values of topic/partition as one string "v1,v2,...". */
static char *read_joined(const sl_kafka_t *k, const char *topic, int partition,
                         bool read_committed) {
  char **v = NULL;
  int n = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_read_partition(sl_kafka_bootstrap(k), topic, partition,
                                      read_committed, &v, &n, &err),
                 err);
  size_t len = 1;
  for (int i = 0; i < n; i++) len += strlen(v[i]) + 1;
  char *s = calloc(1, len);
  SL_ASSERT_TRUE(s != NULL);
  for (int i = 0; i < n; i++) {
    if (i) strcat(s, ",");
    strcat(s, v[i]);
  }
  sl_kc_values_free(v, n);
  return s;
}

static void txn_ok(rd_kafka_error_t *e, const char *what) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_txn_result(e, what, &err), err);
}

/* One transaction of n records "<prefix><i>" to topic/partition, committed
 * or aborted. */
static void transaction(rd_kafka_t *p, const char *topic, int partition,
                        const char *prefix, int n, bool commit) {
  sl_error_t *err = NULL;
  txn_ok(rd_kafka_begin_transaction(p), "begin_transaction");
  SL_ASSERT_OK_E(sl_kc_produce(p, topic, partition, prefix, 0, n, false,
                               &err), err);
  if (commit) {
    txn_ok(rd_kafka_commit_transaction(p, 30000), "commit_transaction");
  } else {
    SL_ASSERT_EQ_INT(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    txn_ok(rd_kafka_abort_transaction(p, 30000), "abort_transaction");
  }
}

static bool dir_exists(const char *dir) {
  struct stat st;
  return stat(dir, &st) == 0;
}

/* ------------------------------------------------------------------ */

SL_TEST(single_node) {
  sl_kafka_t *k = start_kafka(1);
  /* The default version, unless SL_KAFKA_JARS points elsewhere (a run of
   * the suite against another broker version). */
  const char *jars = getenv("SL_KAFKA_JARS");
  if (jars == NULL || jars[0] == '\0')
    SL_ASSERT_EQ_STR(sl_kafka_version(k), sl_kafka_default_version());
  SL_ASSERT_TRUE(sl_kafka_version(k)[0] >= '4');
  SL_ASSERT_EQ_INT(sl_kafka_node_count(k), 1);
  pid_t pid = sl_kafka_node_pid(k, 1);
  pid_t guard = sl_kafka_node_guard_pid(k, 1);
  SL_ASSERT_TRUE(pid > 0 && guard > 0 && !sl_pid_is_gone(pid));
  char dir[512];
  snprintf(dir, sizeof(dir), "%s", sl_kafka_node_dir(k, 1));
  SL_ASSERT_TRUE(dir_exists(dir));

  /* A topic of two partitions through the Admin API. */
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_create_topic(k, "deltas", 2, 1, NULL, &err), err);
  int leader = -1;
  SL_ASSERT_OK_E(sl_kafka_partition_leader(k, "deltas", 1, &leader, &err),
                 err);
  SL_ASSERT_EQ_INT(leader, 1);
  int rc = sl_kafka_partition_leader(k, "deltas", 2, &leader, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND); /* there is no third partition */
  sl_error_destroy(err);
  err = NULL;
  /* Creating it again is refused by the broker. */
  rc = sl_kafka_create_topic(k, "deltas", 2, 1, NULL, &err);
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "TOPIC_ALREADY_EXISTS"));
  sl_error_destroy(err);
  err = NULL;

  /* Committed transactions are visible to read_committed, aborted ones
   * only to read_uncommitted; the open one holds read_committed back. */
  rd_kafka_t *p = NULL;
  SL_ASSERT_OK_E(sl_kc_txn_producer(sl_kafka_bootstrap(k), "sl-it-txn", NULL,
                                    &p, &err), err);
  transaction(p, "deltas", 0, "c", 3, true);
  transaction(p, "deltas", 0, "a", 2, false);
  transaction(p, "deltas", 1, "d", 2, true);
  char *s = read_joined(k, "deltas", 0, true);
  SL_ASSERT_EQ_STR(s, "c0,c1,c2");
  free(s);
  s = read_joined(k, "deltas", 0, false);
  SL_ASSERT_EQ_STR(s, "c0,c1,c2,a0,a1");
  free(s);
  s = read_joined(k, "deltas", 1, true);
  SL_ASSERT_EQ_STR(s, "d0,d1");
  free(s);
  txn_ok(rd_kafka_begin_transaction(p), "begin_transaction");
  SL_ASSERT_OK_E(sl_kc_produce(p, "deltas", 1, "o", 0, 2, false, &err), err);
  SL_ASSERT_EQ_INT(rd_kafka_flush(p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  s = read_joined(k, "deltas", 1, true); /* stops at the open transaction */
  SL_ASSERT_EQ_STR(s, "d0,d1");
  free(s);
  s = read_joined(k, "deltas", 1, false);
  SL_ASSERT_EQ_STR(s, "d0,d1,o0,o1");
  free(s);
  txn_ok(rd_kafka_commit_transaction(p, 30000), "commit_transaction");
  rd_kafka_destroy(p);
  s = read_joined(k, "deltas", 1, true);
  SL_ASSERT_EQ_STR(s, "d0,d1,o0,o1");
  free(s);
  /* Each transaction ends in a control record: 3 + 1, 2 + 1. */
  int64_t lo = -1, hi = -1;
  SL_ASSERT_OK_E(sl_kafka_watermarks(k, "deltas", 0, &lo, &hi, &err), err);
  SL_ASSERT_EQ_INT(lo, 0);
  SL_ASSERT_EQ_INT(hi, 7);

  /* Every client feature the connectors use (sl-kafka-check's steps). */
  SL_ASSERT_EQ_INT(sl_kafka_client_check(sl_kafka_bootstrap(k), stdout), 0);

  /* A stop ends the JVM and its guard and keeps the data for a start. */
  int64_t t0 = mono_ms();
  SL_ASSERT_OK_E(sl_kafka_node_stop(k, 1, SL_SERVER_STOP_CLEAN, &err), err);
  printf("clean stop in %lld ms\n", (long long)(mono_ms() - t0));
  SL_ASSERT_TRUE(sl_pid_is_gone(pid));
  SL_ASSERT_TRUE(sl_pid_is_gone(guard));
  SL_ASSERT_EQ_INT(sl_kafka_node_pid(k, 1), -1);
  SL_ASSERT_TRUE(dir_exists(dir));
  t0 = mono_ms();
  SL_ASSERT_OK_E(sl_kafka_node_start_again(k, 1, &err), err);
  printf("started again in %lld ms\n", (long long)(mono_ms() - t0));
  pid_t pid2 = sl_kafka_node_pid(k, 1);
  SL_ASSERT_TRUE(pid2 > 0 && pid2 != pid);
  s = read_joined(k, "deltas", 0, true);
  SL_ASSERT_EQ_STR(s, "c0,c1,c2");
  free(s);
  rc = sl_kafka_node_start_again(k, 1, &err);
  SL_ASSERT_EQ_INT(rc, SL_ESTATE);
  sl_error_destroy(err);

  /* destroy: nothing is left, neither the process nor the directory. */
  sl_kafka_destroy(k);
  SL_ASSERT_TRUE(sl_pid_is_gone(pid2));
  SL_ASSERT_TRUE(!dir_exists(dir));
}

SL_TEST(killed_owner_leaves_nothing) {
  SL_ASSERT_EQ_INT(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pfd[2];
  SL_ASSERT_EQ_INT(pipe(pfd), 0);
  pid_t owner = fork();
  SL_ASSERT_TRUE(owner >= 0);
  if (owner == 0) {
    close(pfd[0]);
    sl_kafka_opts_t o;
    sl_kafka_opts_init(&o);
    sl_kafka_t *k = NULL;
    pid_t pids[2] = {0, 0};
    char dir[512] = "";
    if (sl_kafka_start(&o, &k, NULL) == SL_OK) {
      pids[0] = sl_kafka_node_guard_pid(k, 1);
      pids[1] = sl_kafka_node_pid(k, 1);
      snprintf(dir, sizeof(dir), "%s", sl_kafka_node_dir(k, 1));
    }
    if (write(pfd[1], pids, sizeof(pids)) != sizeof(pids) ||
        write(pfd[1], dir, sizeof(dir)) != sizeof(dir))
      _exit(1);
    for (;;) pause();
  }
  close(pfd[1]);
  pid_t pids[2];
  char dir[512];
  SL_ASSERT_EQ_INT(read(pfd[0], pids, sizeof(pids)), sizeof(pids));
  SL_ASSERT_EQ_INT(read(pfd[0], dir, sizeof(dir)), sizeof(dir));
  close(pfd[0]);
  SL_ASSERT_TRUE(pids[0] > 0 && pids[1] > 0);
  SL_ASSERT_TRUE(!sl_pid_is_gone(pids[1]));
  SL_ASSERT_TRUE(dir_exists(dir));
  SL_ASSERT_EQ_INT(kill(owner, SIGKILL), 0);
  int status;
  SL_ASSERT_EQ_INT(waitpid(owner, &status, 0), owner);
  /* The guard stops the broker (SIGTERM, SIGKILL after 60 s) and removes
   * the directory. */
  int64_t deadline = mono_ms() + 90000;
  while (!sl_pid_is_gone(pids[0]) || !sl_pid_is_gone(pids[1])) {
    while (waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (mono_ms() > deadline)
      SL_TEST_FAIL("guard %d or broker %d still running 90 s after the "
                   "owner was killed", (int)pids[0], (int)pids[1]);
    nap_ms(20);
  }
  while (waitpid(-1, &status, WNOHANG) > 0) {
  }
  SL_ASSERT_TRUE(!dir_exists(dir));
}

SL_TEST(missing_jars_named) {
  sl_kafka_opts_t o;
  sl_kafka_opts_init(&o);
  char dir[600];
  snprintf(dir, sizeof(dir), "%s/no-jars", sl_test_dir());
  o.jars_dir = dir;
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  int rc = sl_kafka_start(&o, &k, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
  SL_ASSERT_TRUE(k == NULL);
  const char *m = sl_error_message(err);
  SL_ASSERT_TRUE(strstr(m, dir) != NULL);
  SL_ASSERT_TRUE(strstr(m, "tools/kafka-jars") != NULL);
  sl_error_destroy(err);
  err = NULL;
  o.jars_dir = NULL;
  o.nodes = SL_KAFKA_MAX_NODES + 1;
  SL_ASSERT_EQ_INT(sl_kafka_start(&o, &k, &err), SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "nodes") != NULL);
  sl_error_destroy(err);
}

SL_TEST(three_node_leader_change) {
  sl_kafka_t *k = start_kafka(3);
  SL_ASSERT_EQ_INT(sl_kafka_node_count(k), 3);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_create_topic(k, "out", 2, 3, NULL, &err), err);
  /* Committed output before the leader goes away. */
  rd_kafka_t *p = NULL;
  SL_ASSERT_OK_E(sl_kc_txn_producer(sl_kafka_bootstrap(k), "sl-it-3n", NULL,
                                    &p, &err), err);
  transaction(p, "out", 0, "x", 3, true);
  int leader = -1;
  SL_ASSERT_OK_E(sl_kafka_partition_leader(k, "out", 0, &leader, &err), err);
  SL_ASSERT_TRUE(leader >= 1 && leader <= 3);
  pid_t old = sl_kafka_node_pid(k, leader);
  printf("leader of out/0: node %d (pid %d); killing it\n", leader, (int)old);
  int64_t t0 = mono_ms();
  SL_ASSERT_OK_E(sl_kafka_node_stop(k, leader, SL_SERVER_STOP_CRASH, &err),
                 err);
  SL_ASSERT_TRUE(sl_pid_is_gone(old));
  int next = -1;
  SL_ASSERT_OK_E(sl_kafka_wait_leader(k, "out", 0, leader, 60000, &next,
                                      &err), err);
  printf("new leader: node %d after %lld ms\n", next,
         (long long)(mono_ms() - t0));
  SL_ASSERT_NE_INT(next, leader);
  /* The new leader answers fetches before its high watermark has caught
   * up with the followers' (a read then ends at once, empty): wait,
   * bounded, until the partition's last stable offset is past the
   * transaction (3 records and its commit marker). */
  for (int i = 0;; i++) {
    int64_t lso = -1, high = -1;
    /* LEADER_NOT_AVAILABLE for a moment: metadata still moving. */
    if (sl_kc_offsets(sl_kafka_bootstrap(k), "out", 0, &lso, &high,
                      &err) != SL_OK) {
      sl_error_destroy(err);
      err = NULL;
    }
    if (lso >= 4) break;
    if (i > 600) SL_TEST_FAIL("out/0: last stable offset %lld after the "
                              "leader change, expected 4", (long long)lso);
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
  }
  /* The committed records survived, and the producer goes on. */
  char *s = read_joined(k, "out", 0, true);
  SL_ASSERT_EQ_STR(s, "x0,x1,x2");
  free(s);
  transaction(p, "out", 0, "y", 2, true);
  rd_kafka_destroy(p);
  s = read_joined(k, "out", 0, true);
  SL_ASSERT_EQ_STR(s, "x0,x1,x2,y0,y1");
  free(s);
  /* The killed node comes back and is listed again. */
  SL_ASSERT_OK_E(sl_kafka_node_start_again(k, leader, &err), err);
  SL_ASSERT_TRUE(sl_kafka_node_pid(k, leader) > 0);
  sl_kafka_destroy(k);
}
