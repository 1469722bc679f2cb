/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The harness of the Kafka failure-window tests; see kafka_windows.h.
 */
#define _GNU_SOURCE
#include "kafka_windows.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/pipeline.h"
#include "core/inject.h"
#include "sl_test.h"

enum { MAX_ACC = 256, OUT_PARTS = 3, IN_PARTS = 2, SHOW = 40 };

struct kw_s {
  kw_delivery_t d;
  const char *delivery;
  sl_kafka_t *k;
  int nodes, accounts;
  char pipeline[4400], bin[4400];
  /* The expectation: per account the balance after each delta. */
  int64_t *bal[MAX_ACC];
  int want_n[MAX_ACC], cap[MAX_ACC];
  int64_t cur[MAX_ACC];
  uint64_t rng;
  rd_kafka_t *producer; /* idempotent, kept for the test's life */
  int feed;             /* deltas a killed run gets while it runs */
  /* Restores so far: runs started after the first, restarts inside runs
   * that ended. */
  int runs, restarts;
  char miss[512]; /* why the output is not complete yet */
  /* The job in this process. */
  sl_pipeline_t *pl;
  sl_job_t *job;
  pthread_t thread;
  atomic_bool is_done;
  int job_rc;
  sl_error_t *job_err;
};

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

kw_delivery_t kw_delivery(const kw_t *w) { return w->d; }
sl_kafka_t *kw_kafka(kw_t *w) { return w->k; }
const char *kw_pipeline(const kw_t *w) { return w->pipeline; }

static void write_pipeline(kw_t *w, const kw_opts_t *o) {
  const char *bs = sl_kafka_bootstrap(w->k);
  char text[8192];
  snprintf(text, sizeof(text),
           "name: kw\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: %d, retain: 3}\n"
           "restart: {strategy: fixed-delay, max_attempts: 20, "
           "delay_ms: 200}\n"
           "source:\n  type: kafka\n  uid: deltas\n"
           "  bootstrap_servers: '%s'\n  topic: deltas\n"
           "  group_id: kw\n  timeout: 30s\n  discovery_interval: %s\n"
           /* Small fetches: the input is read in many steps, so that
            * checkpoints fall inside it. */
           "  properties: {max.partition.fetch.bytes: '2048'}\n"
           "  schema: [{name: account, type: int64}, "
           "{name: delta, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(delta), n: count()}\n"
           "      emit: updates\n    uid: balance\n"
           "sink:\n  type: kafka\n  uid: out\n  bootstrap_servers: '%s'\n"
           "  topic: balances\n  key: [account]\n  format: json\n"
           "  delivery: %s\n  timeout: 30s\n%s%s"
           "  properties: {linger.ms: '100'%s%s}\n",
           sl_test_dir(), o->interval_ms ? o->interval_ms : 50, bs,
           o->discovery ? o->discovery : "1s", bs, w->delivery,
           w->d == KW_EO ? KW_EO_SINK_EXTRA : "",
           o->sink_extra ? o->sink_extra : "",
           o->sink_properties ? ", " : "",
           o->sink_properties ? o->sink_properties : "");
  sl_test_write_file(w->pipeline, text);
}

kw_t *kw_start(const kw_opts_t *o) {
  kw_t *w = calloc(1, sizeof(*w));
  SL_ASSERT_TRUE(w != NULL);
  if (strcmp(o->delivery, "at-least-once") == 0) w->d = KW_ALO;
  else if (strcmp(o->delivery, "exactly-once") == 0) w->d = KW_EO;
  else SL_TEST_FAIL("unknown delivery '%s'", o->delivery);
  w->delivery = o->delivery;
  w->nodes = o->nodes ? o->nodes : 1;
  w->accounts = o->accounts ? o->accounts : 40;
  SL_ASSERT_TRUE(w->accounts <= MAX_ACC);
  w->feed = KW_DELTAS / 2;
  w->rng = 0x5eedull;
  atomic_init(&w->is_done, false);
  snprintf(w->pipeline, sizeof(w->pipeline), "%s/kw.yaml", sl_test_dir());
  snprintf(w->bin, sizeof(w->bin), "%s/sluice", sl_test_bin_dir());
  sl_kafka_opts_t ko;
  sl_kafka_opts_init(&ko);
  ko.nodes = w->nodes;
  ko.extra_settings = o->broker_settings;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_start(&ko, &w->k, &err), err);
  static const char *const isr2[] = {"min.insync.replicas=2", NULL};
  int rf = w->nodes >= 3 ? 3 : 1;
  const char *const *cfg = rf == 3 ? isr2 : NULL;
  SL_ASSERT_OK_E(sl_kafka_create_topic(w->k, "deltas", IN_PARTS, rf, cfg,
                                       &err),
                 err);
  SL_ASSERT_OK_E(sl_kafka_create_topic(w->k, "balances", OUT_PARTS, rf, cfg,
                                       &err),
                 err);
  write_pipeline(w, o);
  printf("kafka %s, %d node(s), delivery %s\n", sl_kafka_version(w->k),
         w->nodes, w->delivery);
  return w;
}

void kw_destroy(kw_t *w) {
  if (w == NULL) return;
  SL_ASSERT_TRUE(w->job == NULL);
  if (w->producer) rd_kafka_destroy(w->producer);
  sl_kafka_destroy(w->k);
  for (int a = 0; a < MAX_ACC; a++) free(w->bal[a]);
  free(w);
}

/* ------------------------------------------------------------------ */
/* The input and the expectation. */

static uint64_t next_rand(kw_t *w) {
  w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
  return w->rng >> 33;
}

static void expect(kw_t *w, int a, int64_t delta) {
  if (w->want_n[a] == w->cap[a]) {
    w->cap[a] = w->cap[a] ? 2 * w->cap[a] : 256;
    w->bal[a] = realloc(w->bal[a], (size_t)w->cap[a] * sizeof(int64_t));
    SL_ASSERT_TRUE(w->bal[a] != NULL);
  }
  w->cur[a] += delta;
  w->bal[a][w->want_n[a]++] = w->cur[a];
}

/* part < 0: account a goes to partition a % IN_PARTS. */
static void produce(kw_t *w, int part, int first, int count, int n) {
  SL_ASSERT_TRUE(first >= 0 && count > 0 && first + count <= MAX_ACC);
  const char *set[] = {"enable.idempotence", "true", "linger.ms", "5", NULL};
  sl_error_t *err = NULL;
  if (w->producer == NULL)
    SL_ASSERT_OK_E(sl_kc_new(sl_kafka_bootstrap(w->k), RD_KAFKA_PRODUCER,
                             set, &w->producer, &err),
                   err);
  rd_kafka_t *p = w->producer;
  char v[96];
  int tries = 0;
  for (int i = 0; i < n; i++) {
    int a = first + (int)(next_rand(w) % (uint64_t)count);
    int64_t delta = (int64_t)(next_rand(w) % 2001) - 1000;
    expect(w, a, delta);
    snprintf(v, sizeof(v), "{\"account\":%d,\"delta\":%lld}", a,
             (long long)delta);
    for (;;) {
      rd_kafka_resp_err_t e = rd_kafka_producev(
          p, RD_KAFKA_V_TOPIC("deltas"),
          RD_KAFKA_V_PARTITION(part >= 0 ? part : a % IN_PARTS),
          RD_KAFKA_V_VALUE(v, strlen(v)),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && tries++ < 100) {
        /* A partition just added: refresh the producer's metadata. */
        const struct rd_kafka_metadata *md = NULL;
        if (rd_kafka_metadata(p, 1, NULL, &md, 5000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR)
          rd_kafka_metadata_destroy(md);
        sleep_ms(50);
        continue;
      }
      if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
        SL_TEST_FAIL("producing to deltas: %s", rd_kafka_err2str(e));
      rd_kafka_poll(p, 100);
    }
  }
  SL_ASSERT_EQ_INT(rd_kafka_flush(p, 60000), RD_KAFKA_RESP_ERR_NO_ERROR);
}

void kw_produce(kw_t *w, int n) { produce(w, -1, 0, w->accounts, n); }

void kw_produce_to(kw_t *w, int part, int first, int count, int n) {
  produce(w, part, first, count, n);
}

/* ------------------------------------------------------------------ */
/* The checker. */

typedef struct acc_s {
  int prev, hi, jumps, records;
  int shown, seq[SHOW]; /* the first n values, for messages */
} acc_t;

__attribute__((noreturn)) static void violation(kw_t *w, const acc_t *s,
                                                int a, int part,
                                                int64_t offset,
                                                const char *what) {
  char seq[SHOW * 8 + 8] = "";
  size_t o = 0;
  for (int i = 0; i < s->shown && o < sizeof(seq) - 8; i++)
    o += (size_t)snprintf(seq + o, sizeof(seq) - o, "%s%d", i ? "," : "",
                          s->seq[i]);
  SL_TEST_FAIL("delivery %s: balances/%d offset %lld, account %d: %s (the "
               "account's first updates in the output: %s; %d expected)",
               w->delivery, part, (long long)offset, a, what, seq,
               a >= 0 && a < MAX_ACC ? w->want_n[a] : -1);
}

bool kw_check(kw_t *w, bool is_final) {
  static acc_t acc[MAX_ACC];
  memset(acc, 0, sizeof(acc));
  long long total = 0;
  for (int part = 0; part < OUT_PARTS; part++) {
    sl_kc_record_t *r = NULL;
    int n = 0;
    sl_error_t *err = NULL;
    SL_ASSERT_OK_E(sl_kc_read_records(sl_kafka_bootstrap(w->k), "balances",
                                      part, true, &r, &n, &err),
                   err);
    for (int i = 0; i < n; i++) {
      long long a, b, c;
      int end = -1;
      if (sscanf(r[i].value, "{\"account\":%lld,\"balance\":%lld,\"n\":%lld}%n",
                 &a, &b, &c, &end) != 3 ||
          end != (int)r[i].len)
        SL_TEST_FAIL("balances/%d offset %lld: not an update: '%s'", part,
                     (long long)r[i].offset, r[i].value);
      if (a < 0 || a >= MAX_ACC || w->want_n[a] == 0)
        SL_TEST_FAIL("balances/%d offset %lld: account %lld has no deltas",
                     part, (long long)r[i].offset, a);
      acc_t *s = &acc[a];
      char key[32];
      snprintf(key, sizeof(key), "%lld", a);
      if (r[i].key == NULL || strcmp(r[i].key, key) != 0)
        violation(w, s, (int)a, part, r[i].offset, "the key is not the "
                  "account");
      if (sl_kc_java_partition(key, strlen(key), OUT_PARTS) != part)
        violation(w, s, (int)a, part, r[i].offset, "not in the Java "
                  "partitioner's partition of its key");
      if (c < 1 || c > w->want_n[a])
        violation(w, s, (int)a, part, r[i].offset, "n beyond the deltas "
                  "produced");
      if (s->shown < SHOW) s->seq[s->shown++] = (int)c;
      if (w->bal[a][c - 1] != b) {
        char m[160];
        snprintf(m, sizeof(m), "update n=%lld has balance %lld, expected "
                 "%lld", c, b, (long long)w->bal[a][c - 1]);
        violation(w, s, (int)a, part, r[i].offset, m);
      }
      if (c > s->prev + 1) {
        char m[160];
        snprintf(m, sizeof(m), "update n=%lld follows n=%d: updates %d..%lld "
                 "are missing before it", c, s->prev, s->prev + 1, c - 1);
        violation(w, s, (int)a, part, r[i].offset, m);
      }
      if (c <= s->prev) {
        if (w->d == KW_EO) {
          char m[160];
          snprintf(m, sizeof(m), "update n=%lld again after n=%d: a "
                   "duplicate", c, s->prev);
          violation(w, s, (int)a, part, r[i].offset, m);
        }
        s->jumps++; /* at-least-once: a replay after a restore */
      }
      s->prev = (int)c;
      if (c > s->hi) s->hi = (int)c;
      s->records++;
      total++;
    }
    sl_kc_records_free(r, n);
  }
  bool is_complete = true;
  int max_jumps = 0, allowed = w->runs - 1 + w->restarts;
  long long want_total = 0;
  w->miss[0] = '\0';
  for (int a = 0; a < MAX_ACC; a++) {
    want_total += w->want_n[a];
    if (acc[a].jumps > max_jumps) max_jumps = acc[a].jumps;
    if (acc[a].hi < w->want_n[a] && is_complete) {
      is_complete = false;
      snprintf(w->miss, sizeof(w->miss), "account %d: %d of %d updates", a,
               acc[a].hi, w->want_n[a]);
    }
  }
  if (!is_final) return is_complete;
  printf("output: %lld records for %lld updates (%lld repeated), at most %d "
         "replays per account, %d restores\n", total, want_total,
         total - want_total, max_jumps, allowed);
  if (!is_complete)
    SL_TEST_FAIL("delivery %s: the output is incomplete: %s", w->delivery,
                 w->miss);
  for (int a = 0; a < MAX_ACC; a++)
    if (acc[a].jumps > allowed) {
      char m[160];
      snprintf(m, sizeof(m), "%d replays, more than the %d restores",
               acc[a].jumps, allowed);
      violation(w, &acc[a], a, -1, -1, m);
    }
  if (w->d == KW_EO) SL_ASSERT_EQ_INT(total, want_total);
  return true;
}

int kw_wait_no_open_transaction(kw_t *w, int timeout_ms) {
  int n_open = -1;
  for (int64_t t0 = mono_ms();;) {
    int open = 0;
    char what[200] = "";
    for (int part = 0; part < OUT_PARTS; part++) {
      int64_t lso = -1, high = -1;
      sl_error_t *err = NULL;
      SL_ASSERT_OK_E(sl_kc_offsets(sl_kafka_bootstrap(w->k), "balances",
                                   part, &lso, &high, &err),
                     err);
      if (lso < high) {
        open++;
        snprintf(what, sizeof(what), "balances/%d: last stable offset "
                 "%lld, high watermark %lld", part, (long long)lso,
                 (long long)high);
      }
    }
    if (n_open < 0) n_open = open;
    if (open == 0) return n_open;
    if (mono_ms() - t0 > timeout_ms)
      SL_TEST_FAIL("a transaction is still open after %d ms (%s)",
                   timeout_ms, what);
    sleep_ms(100);
  }
}

/* ------------------------------------------------------------------ */
/* Runs of the sluice command. */

/* The sluice run in flight: killed when the test exits (a failed
 * assertion exits the test process; the run must not outlive it). */
static volatile pid_t current_run = -1;

static void kill_current_run(void) {
  int st;
  /* Only while it is still an unreaped child of this process. */
  if (current_run > 0 && waitpid(current_run, &st, WNOHANG) == 0) {
    kill(current_run, SIGKILL);
    waitpid(current_run, &st, 0);
  }
}

static void run_log_path(const kw_t *w, int run, char *out, size_t size) {
  snprintf(out, size, "%s/run-%d.txt", sl_test_dir(), run);
}

char *kw_last_log(const kw_t *w) {
  char p[4300];
  run_log_path(w, w->runs, p, sizeof(p));
  char *t = sl_test_read_file(p, NULL);
  return t ? t : strdup("");
}

static int count_restarts(const char *log) {
  int n = 0;
  for (const char *p = log; (p = strstr(p, "; restart ")) != NULL; p++) n++;
  return n;
}

__attribute__((noreturn)) static void fail_run(const kw_t *w,
                                               const char *what, int st) {
  char *log = kw_last_log(w);
  SL_TEST_FAIL("run %d %s: status %d (%s %d):\n%s", w->runs, what, st,
               WIFSIGNALED(st) ? "signal" : "exit",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), log);
}

pid_t kw_spawn(kw_t *w, const char *inject) {
  SL_ASSERT_TRUE(w->job == NULL);
  w->runs++;
  char errp[4300];
  run_log_path(w, w->runs, errp, sizeof(errp));
  const char *argv[] = {w->bin, "run", w->pipeline, "--resume", "--quiet",
                        NULL};
  static bool is_registered;
  if (!is_registered) {
    atexit(kill_current_run);
    is_registered = true;
  }
  current_run = sl_test_spawn(argv, inject, errp, SL_TEST_SPAWN_NO_STDOUT);
  return current_run;
}

void kw_run_killed(kw_t *w, const char *inject, const char *point) {
  pid_t pid = kw_spawn(w, inject);
  int st = 0;
  /* The source is unbounded: checkpoints go on until the point is hit.
   * Meanwhile more input arrives, so that the kill falls while records
   * flow through the job. */
  int fed = 0;
  for (int64_t t0 = mono_ms(); waitpid(pid, &st, WNOHANG) != pid;) {
    if (fed < w->feed) {
      produce(w, -1, 0, w->accounts, 100);
      fed += 100;
      continue;
    }
    /* Then a trickle: a sink step that only epochs with records reach
     * (an exactly-once commit) must not wait for input forever. */
    produce(w, -1, 0, w->accounts, 10);
    if (mono_ms() - t0 > 90000) {
      kill(pid, SIGKILL);
      sl_test_wait(pid);
      char *log = kw_last_log(w);
      SL_TEST_FAIL("run %d (SL_INJECT=%s) not killed at %s within 90 s:\n%s",
                   w->runs, inject, point, log);
    }
    sleep_ms(40);
  }
  char *log = kw_last_log(w);
  char line[300];
  snprintf(line, sizeof(line), "sluice: injection point %s: killing the "
           "process", point);
  bool is_killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
                   strstr(log, line) != NULL;
  w->restarts += count_restarts(log);
  free(log);
  if (!is_killed) {
    char what[300];
    snprintf(what, sizeof(what), "(SL_INJECT=%s) was to be killed at %s",
             inject, point);
    fail_run(w, what, st);
  }
}

void kw_finish_run(kw_t *w, pid_t pid) {
  int64_t t0 = mono_ms();
  while (!kw_check(w, false)) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) fail_run(w, "ended", st);
    if (mono_ms() - t0 > 150000) {
      kill(pid, SIGKILL);
      sl_test_wait(pid);
      char *log = kw_last_log(w);
      SL_TEST_FAIL("output incomplete after 150 s (%s); run %d:\n%s",
                   w->miss, w->runs, log);
    }
    sleep_ms(250);
  }
  kill(pid, SIGTERM);
  int st = sl_test_wait(pid);
  if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 143))
    fail_run(w, "cancelled with SIGTERM", st);
  char *log = kw_last_log(w);
  w->restarts += count_restarts(log);
  free(log);
  printf("run %d finished in %lld ms\n", w->runs,
         (long long)(mono_ms() - t0));
  kw_check(w, true);
}

/* ------------------------------------------------------------------ */
/* The job in this process. */

static void *job_main(void *arg) {
  kw_t *w = arg;
  w->job_rc = sl_job_run(w->job, &w->job_err);
  atomic_store(&w->is_done, true);
  return NULL;
}

void kw_job_start(kw_t *w) {
  SL_ASSERT_TRUE(w->job == NULL);
  char *msg = NULL;
  if (sl_pipeline_load(w->pipeline, NULL, 0, &w->pl, &msg) != SL_OK)
    SL_TEST_FAIL("%s", msg ? msg : "cannot load the pipeline");
  sl_pipeline_run_t run;
  memset(&run, 0, sizeof(run));
  run.is_resume = true;
  if (sl_pipeline_build(w->pl, &run, &w->job, &msg) != SL_OK)
    SL_TEST_FAIL("%s", msg ? msg : "cannot build the pipeline");
  w->runs++;
  atomic_store(&w->is_done, false);
  w->job_err = NULL;
  SL_ASSERT_EQ_INT(pthread_create(&w->thread, NULL, job_main, w), 0);
}

uint64_t kw_job_last_checkpoint(kw_t *w) {
  sl_checkpoint_stats_t st;
  if (w->job == NULL || sl_job_last_checkpoint(w->job, &st) != SL_OK)
    return 0;
  return st.id;
}

uint32_t kw_job_finish(kw_t *w) {
  SL_ASSERT_TRUE(w->job != NULL);
  int64_t t0 = mono_ms();
  while (!kw_check(w, false)) {
    if (atomic_load(&w->is_done))
      SL_TEST_FAIL("the job ended (%s): %s", sl_strerror(w->job_rc),
                   w->job_err ? sl_error_message(w->job_err) : "");
    if (mono_ms() - t0 > 150000)
      SL_TEST_FAIL("output incomplete after 150 s (%s)", w->miss);
    sleep_ms(250);
  }
  sl_job_cancel(w->job);
  pthread_join(w->thread, NULL);
  if (w->job_rc != SL_OK && w->job_rc != SL_ECANCELED)
    SL_TEST_FAIL("the job failed: %s", w->job_err ?
                 sl_error_message(w->job_err) : sl_strerror(w->job_rc));
  sl_error_destroy(w->job_err);
  w->job_err = NULL;
  w->restarts += (int)sl_job_restarts(w->job);
  printf("job finished in %lld ms, %u restarts\n",
         (long long)(mono_ms() - t0), sl_job_restarts(w->job));
  uint32_t restarts = sl_job_restarts(w->job);
  sl_job_destroy(w->job);
  sl_pipeline_destroy(w->pl);
  w->job = NULL;
  w->pl = NULL;
  kw_check(w, true);
  return restarts;
}

/* ------------------------------------------------------------------ */
/* The scenarios. */

void kw_scenario_kill_runs(const char *delivery, const kw_kill_t *kills,
                           int n_kills) {
  kw_opts_t o = {.delivery = delivery};
  kw_t *w = kw_start(&o);
  kw_produce(w, KW_DELTAS / 4);
  for (int i = 0; i < n_kills; i++) {
    kw_run_killed(w, kills[i].inject, kills[i].point);
    /* What is visible at the kill already obeys the guarantee. */
    bool is_complete = kw_check(w, false);
    printf("run %d killed at %s (SL_INJECT=%s); output complete at the "
           "kill: %s\n", i + 1, kills[i].point, kills[i].inject,
           is_complete ? "yes" : "no");
  }
  kw_finish_run(w, kw_spawn(w, NULL));
  kw_destroy(w);
}

void kw_scenario_kill_window(const char *delivery, const char *inject,
                             const char *point) {
  kw_kill_t k = {inject, point};
  kw_scenario_kill_runs(delivery, &k, 1);
}

void kw_scenario_soak(const char *delivery, const kw_point_t *points,
                      int n_points) {
  const char *env = getenv("SL_KAFKA_SOAK_ROUNDS");
  int rounds = env ? atoi(env) : 50;
  env = getenv("SL_KAFKA_SOAK_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : 0x50a4ull;
  printf("soak: %d rounds, seed %#llx (SL_KAFKA_SOAK_ROUNDS, "
         "SL_KAFKA_SOAK_SEED)\n", rounds, (unsigned long long)seed);
  kw_opts_t o = {.delivery = delivery};
  kw_t *w = kw_start(&o);
  int64_t t0 = mono_ms();
  int chunk = KW_DELTAS / (rounds > 0 ? rounds : 1);
  if (chunk < 50) chunk = 50;
  int *hits = calloc((size_t)n_points, sizeof(int));
  SL_ASSERT_TRUE(hits != NULL);
  /* The input grows while the job is killed again and again: each round
   * gets a chunk while it runs (kw_run_killed). */
  w->feed = chunk;
  kw_produce(w, chunk);
  for (int r = 0; r < rounds; r++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const kw_point_t *pt = &points[(seed >> 33) % (uint64_t)n_points];
    unsigned hit = 1 + (unsigned)((seed >> 20) % (uint64_t)pt->max_hit);
    char inject[200];
    snprintf(inject, sizeof(inject), "%s=kill:%u", pt->name, hit);
    if (getenv("SL_TEST_VERBOSE")) printf("round %d: %s\n", r + 1, inject);
    kw_run_killed(w, inject, pt->name);
    hits[pt - points]++;
    if (r % 10 == 9) kw_check(w, false);
  }
  for (int i = 0; i < n_points; i++)
    printf("  %-40s killed %d times\n", points[i].name, hits[i]);
  free(hits);
  printf("soak: %d rounds killed in %lld ms\n", rounds,
         (long long)(mono_ms() - t0));
  kw_finish_run(w, kw_spawn(w, NULL));
  kw_destroy(w);
}

/* Arm a pause at point (hit) and feed input (at most w->feed deltas)
 * until the job is held there: records flow through the job when it
 * is. */
static void hold_while_feeding(kw_t *w, const char *point, uint32_t hit) {
  sl_inject_arm(point, SL_INJECT_PAUSE, hit, false);
  int fed = 0;
  for (int64_t t0 = mono_ms();
       sl_inject_wait_paused(point, fed < w->feed ? 1 : 40) != SL_OK;) {
    if (atomic_load(&w->is_done))
      SL_TEST_FAIL("the job ended before %s: %s", point,
                   w->job_err ? sl_error_message(w->job_err) : "");
    if (mono_ms() - t0 > 90000)
      SL_TEST_FAIL("the job did not reach %s (hit %u) within 90 s", point,
                   hit);
    if (fed < w->feed) {
      produce(w, -1, 0, w->accounts, 100);
      fed += 100;
    } else {
      produce(w, -1, 0, w->accounts, 10); /* a trickle, as above */
    }
  }
}

void kw_scenario_partition_added(const char *delivery) {
  kw_opts_t o = {.delivery = delivery, .discovery = "200ms"};
  kw_t *w = kw_start(&o);
  kw_produce(w, KW_DELTAS / 2);
  kw_job_start(w);
  /* Hold the enumerator thread (which also runs the partition discovery)
   * at a checkpoint, add the partition and fill it, then let discovery
   * find it: its records predate the discovery, so only a start at the
   * earliest offset reads them. */
  sl_inject_arm("enum.before_snapshot", SL_INJECT_PAUSE, 2, false);
  SL_ASSERT_OK(sl_inject_wait_paused("enum.before_snapshot", 60000));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_add_partitions(w->k, "deltas", IN_PARTS + 1, &err),
                 err);
  /* New accounts, only in the new partition. */
  kw_produce_to(w, IN_PARTS, w->accounts, 20, 3000);
  sl_inject_release("enum.before_snapshot");
  kw_produce(w, KW_DELTAS / 4);
  /* Found and read without a failure. */
  SL_ASSERT_EQ_INT(kw_job_finish(w), 0);
  kw_destroy(w);
}

void kw_scenario_partition_added_while_down(const char *delivery) {
  kw_opts_t o = {.delivery = delivery, .discovery = "200ms"};
  kw_t *w = kw_start(&o);
  kw_produce(w, KW_DELTAS / 4);
  kw_run_killed(w, "coordinator.before_complete_notify=kill:3",
                "coordinator.before_complete_notify");
  /* While nothing runs: a partition with records of new accounts.  The
   * restored enumerator has seen partitions 0 and 1 only; the new one
   * starts at its earliest offset. */
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_add_partitions(w->k, "deltas", IN_PARTS + 1, &err),
                 err);
  kw_produce_to(w, IN_PARTS, w->accounts, 20, 3000);
  kw_produce(w, KW_DELTAS / 4);
  int before = w->restarts;
  kw_finish_run(w, kw_spawn(w, NULL));
  SL_ASSERT_EQ_INT(w->restarts, before); /* found and read, no failure */
  kw_destroy(w);
}

void kw_scenario_broker_restart(const char *delivery, const char *point,
                                uint32_t hit) {
  kw_opts_t o = {.delivery = delivery};
  kw_t *w = kw_start(&o);
  kw_produce(w, KW_DELTAS / 4);
  kw_job_start(w);
  hold_while_feeding(w, point, hit);
  uint64_t before = kw_job_last_checkpoint(w);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_node_stop(w->k, 1, SL_SERVER_STOP_CRASH, &err),
                 err);
  printf("held at %s (hit %u) after checkpoint %llu; broker killed\n", point,
         hit, (unsigned long long)before);
  /* The checkpoint goes on with the broker down. */
  sl_inject_release(point);
  int64_t t0 = mono_ms();
  SL_ASSERT_OK_E(sl_kafka_node_start_again(w->k, 1, &err), err);
  printf("broker up again after %lld ms\n", (long long)(mono_ms() - t0));
  kw_produce(w, KW_DELTAS / 4); /* more, through the restarted broker */
  /* A checkpoint completes after the restart (a condition, bounded). */
  while (kw_job_last_checkpoint(w) <= before) {
    if (mono_ms() - t0 > 120000)
      SL_TEST_FAIL("no checkpoint after %llu completed within 120 s of the "
                   "broker restart", (unsigned long long)before);
    sleep_ms(50);
  }
  kw_job_finish(w);
  kw_destroy(w);
}

void kw_scenario_leader_change(const char *delivery, const char *point,
                               uint32_t hit) {
  kw_opts_t o = {.delivery = delivery, .nodes = 3};
  kw_t *w = kw_start(&o);
  kw_produce(w, KW_DELTAS / 4);
  kw_job_start(w);
  hold_while_feeding(w, point, hit);
  sl_error_t *err = NULL;
  int leader = -1, in_leader = -1, next = -1;
  SL_ASSERT_OK_E(sl_kafka_partition_leader(w->k, "balances", 0, &leader,
                                           &err),
                 err);
  SL_ASSERT_OK_E(sl_kafka_partition_leader(w->k, "deltas", 0, &in_leader,
                                           &err),
                 err);
  SL_ASSERT_TRUE(leader >= 1);
  SL_ASSERT_OK_E(sl_kafka_node_stop(w->k, leader, SL_SERVER_STOP_CRASH,
                                    &err),
                 err);
  SL_ASSERT_OK_E(sl_kafka_wait_leader(w->k, "balances", 0, leader, 60000,
                                      &next, &err),
                 err);
  printf("held at %s (hit %u); killed node %d, the leader of balances/0 "
         "(deltas/0 led by node %d); node %d leads it now\n", point, hit,
         leader, in_leader, next);
  sl_inject_release(point);
  kw_produce(w, KW_DELTAS / 4); /* written to the two nodes left */
  kw_job_finish(w);
  kw_destroy(w);
}
