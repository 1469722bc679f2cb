/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backpressure bounds memory: a fast generator feeds, through a channel, a
 * sink that spends about a hundred times the source's work on every row.
 * Without credit-based flow control the rows would pile up in memory; with
 * it the source waits.  Each job runs in a child process so that its peak
 * resident set (ru_maxrss from wait4) is its own; a run with ten times more
 * input must not need more memory.  The test also checks that the source
 * spent time backpressured, so the sink really was the bottleneck.
 */
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_test.h"

static volatile uint64_t sink_sink; /* keeps the busy loop alive */

typedef struct slow_s {
  uint64_t n;
} slow_t;

static int slow_open(void *ctx, const sl_sink_init_t *init, void **out,
                     sl_error_t **e) {
  (void)init;
  (void)e;
  *out = ctx;
  return SL_OK;
}

/* About 100 times what the generator spends on a row (a few ns of hashing
 * and a copy): a chain of 600 dependent multiply-xorshift steps. */
static int slow_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)e;
  slow_t *s = w;
  uint64_t x = (uint64_t)sl_row_get_i64(row, 0) + s->n++;
  for (int i = 0; i < 600; i++) {
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
  }
  sink_sink += x;
  return SL_OK;
}

static int slow_close(void *w, bool ok, sl_error_t **e) {
  (void)w;
  (void)ok;
  (void)e;
  return SL_OK;
}

static void slow_destroy(void *ctx) { free(ctx); }

static const sl_sink_vt_t slow_vt = {"slow", slow_open, slow_write, NULL,
                                     slow_close, slow_destroy};

/* Run the job in this (child) process; exit 0 if it succeeded and the
 * source task was backpressured for most of the run. */
static void child_job(uint64_t records) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  sl_job_t *job;
  if (sl_job_create(&cfg, &job, NULL) != SL_OK) _exit(3);
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = records;
  g.columns = SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  if (sl_gen_source_create(&g, &vt, &ctx, &schema, NULL) != SL_OK) _exit(3);
  sl_stream_t *s = sl_job_source(job, "gen", vt, ctx, schema);
  s = sl_stream_rebalance(s);
  if (sl_stream_sink(s, "slow", &slow_vt, calloc(1, sizeof(slow_t))) != SL_OK)
    _exit(3);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) {
    fprintf(stderr, "job failed: %s\n", sl_error_message(err));
    _exit(4);
  }
  sl_metrics_t m;
  sl_job_metrics(job, &m);
  uint64_t bp = 0, busy = 0;
  for (uint32_t i = 0; i < m.n_tasks; i++) {
    if (strncmp(m.tasks[i].name, "gen", 3) == 0) {
      bp += m.tasks[i].backpressured_ns;
      busy += m.tasks[i].busy_ns;
    }
  }
  sl_metrics_close(&m);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  printf("source busy %.3f s, backpressured %.3f s\n", busy / 1e9, bp / 1e9);
  /* The source must have waited for credit more than it worked. */
  _exit(bp > busy ? 0 : 5);
}

static long peak_rss_kb(uint64_t records) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) SL_TEST_FAIL("fork failed");
  if (pid == 0) child_job(records);
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid) SL_TEST_FAIL("wait4 failed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    SL_TEST_FAIL("child job with %llu records failed: status %d",
                 (unsigned long long)records, status);
  return ru.ru_maxrss;
}

SL_TEST(slow_sink_keeps_memory_bounded) {
  long small = peak_rss_kb(100000);
  long large = peak_rss_kb(1000000);
  printf("peak RSS: %ld KiB for 100k records, %ld KiB for 1M records\n",
         small, large);
  /*
   * 900k more rows of 28 bytes would be ~25 MB if they were queued.  The
   * channel holds at most its credits (4 buffers of 32 KiB) plus the
   * buffers in flight, so the two peaks must be within 4 MiB.
   */
  SL_ASSERT_LE_INT(large - small, 4096);
}
