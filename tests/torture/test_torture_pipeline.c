/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation torture of pipeline loading: sl_pipeline_load (with --set
 * overrides) and sl_pipeline_build of pipelines that use every kind of
 * transform, once for every k with the k-th allocation failing.  Each run
 * must end in a clean error (with a message, or SL_ENOMEM) or a job that
 * was built; the ASan pass of tools/test checks that nothing leaks.
 * libyaml's own allocations are not counted (it does not use sl_malloc).
 */
#include "cli/pipeline.h"
#include "core/inject.h"
#include "sl_test.h"

static const char *pipeline_text =
    "name: torture\n"
    "parallelism: 2\n"
    "checkpoint: {dir: %s/ckpt, interval_ms: 1000}\n"
    "restart: {strategy: fixed-delay, max_attempts: 2, delay_ms: 10}\n"
    "source:\n"
    "  type: generator\n"
    "  uid: transactions\n"
    "  seed: 42\n"
    "  count: 1000\n"
    "  keys: 20\n"
    "  columns: [key, amount, ts]\n"
    "  time_step_us: 1000\n"
    "  watermarks: {time_field: ts, max_out_of_orderness: 200ms}\n"
    "transforms:\n"
    "  - filter: amount > 0 and key != 3\n"
    "  - project:\n"
    "      account: key\n"
    "      amount: amount * 2\n"
    "      ts: ts\n"
    "  - window:\n"
    "      type: tumbling\n"
    "      time_field: ts\n"
    "      size: 1s\n"
    "      key: [account]\n"
    "      values: {n: count(), total: sum(amount)}\n"
    "    uid: per-second\n"
    "  - aggregate:\n"
    "      key: [account]\n"
    "      values: {balance: sum(total), largest: max(total)}\n"
    "      emit: final\n"
    "    uid: balances\n"
    "sink:\n"
    "  type: file\n"
    "  path: %s/out.csv\n"
    "  header: true\n";

static char last_msg[2048];

static int load_once(const char *path, bool *out_has_msg) {
  const char *sets[] = {"source.count=500", "transforms[1].filter=amount > 1"};
  sl_pipeline_t *pl = NULL;
  char *msg = NULL;
  int rc = sl_pipeline_load(path, sets, 2, &pl, &msg);
  if (rc == SL_OK) {
    sl_job_t *job = NULL;
    sl_pipeline_run_t run = {0, NULL, false};
    rc = sl_pipeline_build(pl, &run, &job, &msg);
    sl_job_destroy(job);
    sl_pipeline_destroy(pl);
  }
  *out_has_msg = msg != NULL;
  snprintf(last_msg, sizeof(last_msg), "%s", msg ? msg : "");
  sl_free(msg);
  return rc;
}

SL_TEST(pipeline_load) {
  char path[4300], text[8000];
  snprintf(path, sizeof(path), "%s/p.yaml", sl_test_dir());
  snprintf(text, sizeof(text), pipeline_text, sl_test_dir(), sl_test_dir());
  sl_test_write_file(path, text);
  bool has_msg;
  sl_inject_alloc_fail(0, false);
  int rc = load_once(path, &has_msg);
  uint64_t n = sl_inject_alloc_count();
  if (rc != SL_OK)
    SL_TEST_FAIL("the pipeline does not build: %s: %s", sl_errname(rc),
                 last_msg);
  SL_ASSERT_TRUE(n > 20);
  for (int sticky = 0; sticky < 2; sticky++)
    for (uint64_t k = 1; k <= n + 1; k++) {
      sl_inject_alloc_fail(k, sticky);
      rc = load_once(path, &has_msg);
      sl_inject_alloc_fail(0, false);
      if (rc != SL_OK && rc != SL_ENOMEM && !has_msg)
        SL_TEST_FAIL("k=%llu%s: %s without a message",
                     (unsigned long long)k, sticky ? " and later" : "",
                     sl_errname(rc));
    }
}
