/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core engine throughput (issue: core engine benchmark).  Two job shapes,
 * each with 16-byte and 100-byte records:
 *
 *   passthrough  generator -> map (amount + 1) -> null sink, parallelism 1:
 *                one chained task, so one core.
 *   keyed        generator -> key_by(key) -> count per key in value state ->
 *                null sink, parallelism 1: a source task and a count task
 *                joined by a hash exchange (two tasks on two workers).
 *
 * A record is (key int64, amount int64) = 16 bytes of fields, or those plus
 * an 84-byte string payload = 100 bytes.  One iteration runs a bounded job
 * of --records records and reports records per CPU-second of the process
 * (user + system time over all threads), which is "records per second per
 * core"; the wall-clock rate goes to stderr with --verbose.  Each
 * configuration runs in independent forked processes (bench/harness.c).
 *
 * usage: sluice-bench-core [--shape passthrough|keyed|all] [--size 16|100|all]
 *          [--records N] [--keys K] [--forks F] [--warmup W]
 *          [--iterations I] [--json PATH] [--verbose]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "harness.h"
#include "sluice/sluice.h"

typedef struct cfg_s {
  const char *shape;
  uint32_t size;
  uint64_t records;
  uint64_t keys;
  bool is_verbose;
} cfg_t;

static int map_fn(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                  sl_row_builder_t *out) {
  (void)ctx;
  (void)user;
  int rc = sl_row_builder_copy(out, in);
  if (rc == SL_OK) sl_row_builder_set_i64(out, 1, sl_row_get_i64(in, 1) + 1);
  return rc;
}

typedef struct count_local_s {
  sl_state_t *count;
} count_local_t;

static int count_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  count_local_t *l = calloc(1, sizeof(*l));
  sl_ctx_set_local(ctx, l);
  sl_state_desc_t d = {"count", SL_STATE_VALUE, 1, NULL, NULL};
  return l ? sl_ctx_state(ctx, &d, &l->count) : SL_ENOMEM;
}

static int count_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  count_local_t *l = sl_ctx_local(ctx);
  int64_t n = 0;
  int rc = sl_value_get_i64(l->count, &n);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  if ((rc = sl_value_put_i64(l->count, n + 1)) != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_i64(b, 0, sl_row_get_i64(row, 0));
  sl_row_builder_set_i64(b, 1, n + 1);
  return sl_ctx_emit_builder(ctx);
}

static void count_close(sl_ctx_t *ctx, void *user) {
  (void)user;
  free(sl_ctx_local(ctx));
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int run_job(const cfg_t *c, uint64_t seed) {
  sl_job_config_t jc;
  sl_job_config_init(&jc);
  jc.parallelism = 1;
  sl_job_t *job;
  if (sl_job_create(&jc, &job, NULL) != SL_OK) return -1;
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.seed = seed;
  g.count = c->records;
  g.keys = c->keys;
  g.splits = 1; /* one split per subtask, as the measurements were taken */
  g.columns = SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT;
  if (c->size > 16) {
    g.columns |= SL_GEN_COL_PAYLOAD;
    g.payload_size = c->size - 16;
  }
  const sl_source_vt_t *svt;
  void *sctx;
  sl_schema_t *schema;
  if (sl_gen_source_create(&g, &svt, &sctx, &schema, NULL) != SL_OK) return -1;
  sl_stream_t *s = sl_job_source(job, "gen", svt, sctx, schema);
  sl_schema_t *out_schema = NULL;
  if (strcmp(c->shape, "passthrough") == 0) {
    s = sl_stream_map(s, "map", schema, map_fn, NULL);
  } else {
    sl_field_t f[2] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                       {"count", {SL_TYPE_INT64, 0, 0, false}}};
    sl_schema_create(f, 2, &out_schema, NULL);
    const char *key[] = {"key"};
    s = sl_stream_key_by_fields(s, key, 1);
    sl_process_fns_t fns = {count_open, count_process, NULL, NULL, NULL,
                            count_close};
    s = sl_stream_process(s, "count", out_schema, &fns, NULL);
  }
  const sl_sink_vt_t *kvt;
  void *kctx;
  sl_null_sink_create(&kvt, &kctx);
  sl_stream_sink(s, "sink", kvt, kctx);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) fprintf(stderr, "job failed: %s\n", sl_error_message(err));
  sl_error_destroy(err);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  sl_schema_unref(out_schema);
  return rc == SL_OK ? 0 : -1;
}

static int iter(void *arg, sl_bench_ctx_t *ctx, double *out) {
  const cfg_t *c = arg;
  double cpu0 = cpu_seconds();
  int64_t t0 = sl_bench_now_ns();
  if (run_job(c, ctx->seed + (uint64_t)ctx->iteration) != 0) return -1;
  double wall = (double)(sl_bench_now_ns() - t0) / 1e9;
  double cpu = cpu_seconds() - cpu0;
  *out = (double)c->records / cpu;
  if (c->is_verbose)
    fprintf(stderr, "  fork %d iter %d: %.3f M rec/s wall, %.3f M rec/CPU-s, "
            "%.2f cores\n", ctx->fork, ctx->iteration,
            c->records / wall / 1e6, *out / 1e6, cpu / wall);
  return 0;
}

int main(int argc, char **argv) {
  const char *shape = "all", *json = NULL;
  const char *size = "all";
  uint64_t records = 20000000, keys = 10000;
  int forks = 5, warmup = 2, iterations = 5;
  bool is_verbose = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n = 0;
    bool is_num = v && sl_bench_parse_u64(v, &n);
    if (strcmp(a, "--shape") == 0 && v) shape = argv[++i];
    else if (strcmp(a, "--size") == 0 && v) size = argv[++i];
    else if (strcmp(a, "--records") == 0 && is_num && n) records = n, i++;
    else if (strcmp(a, "--keys") == 0 && is_num && n) keys = n, i++;
    else if (strcmp(a, "--forks") == 0 && is_num && n && n <= 1000)
      forks = (int)n, i++;
    else if (strcmp(a, "--warmup") == 0 && is_num && n <= 1000)
      warmup = (int)n, i++;
    else if (strcmp(a, "--iterations") == 0 && is_num && n && n <= 1000)
      iterations = (int)n, i++;
    else if (strcmp(a, "--json") == 0 && v) json = argv[++i];
    else if (strcmp(a, "--verbose") == 0) is_verbose = true;
    else {
      fprintf(stderr, "usage: %s [--shape passthrough|keyed|all] "
              "[--size 16|100|all] [--records N] [--keys K] [--forks F] "
              "[--warmup W] [--iterations I] [--json PATH] [--verbose]\n",
              argv[0]);
      return 2;
    }
  }
  const char *shapes[] = {"passthrough", "keyed"};
  uint32_t sizes[] = {16, 100};
  int failed = 0;
  FILE *jf = NULL;
  if (json) {
    jf = fopen(json, "w");
    if (jf == NULL) {
      fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], json,
              strerror(errno));
      return 1;
    }
    fputs("[\n", jf);
  }
  bool is_first = true;
  for (int si = 0; si < 2; si++) {
    if (strcmp(shape, "all") != 0 && strcmp(shape, shapes[si]) != 0) continue;
    for (int zi = 0; zi < 2; zi++) {
      char zs[16];
      snprintf(zs, sizeof(zs), "%u", sizes[zi]);
      if (strcmp(size, "all") != 0 && strcmp(size, zs) != 0) continue;
      cfg_t c = {shapes[si], sizes[zi], records, keys, is_verbose};
      char name[128];
      snprintf(name, sizeof(name), "%s-%uB", shapes[si], sizes[zi]);
      sl_bench_opts_t o;
      sl_bench_opts_init(&o);
      o.name = name;
      o.unit = "records/s/core";
      o.n_forks = forks;
      o.n_warmup = warmup;
      o.n_iterations = iterations;
      o.summary = stdout;
      char jpath[512];
      if (json) {
        snprintf(jpath, sizeof(jpath), "%s.%s.json", json, name);
        o.json_path = jpath;
      }
      sl_bench_fn_t fn = {name, NULL, iter, NULL, &c, NULL};
      sl_bench_result_t *res = NULL;
      if (sl_bench_run(&o, &fn, &res) != 0 || res->n_failed) failed = 1;
      if (res) {
        printf("%s: median %.3f M, min %.3f M, max %.3f M records/s/core "
               "over %zu forks (mean %.3f M, 95%% CI [%.3f, %.3f] M)\n",
               name, res->median / 1e6, res->min / 1e6, res->max / 1e6,
               res->n_ok, res->mean_ci.estimate / 1e6, res->mean_ci.lo / 1e6,
               res->mean_ci.hi / 1e6);
        if (jf) {
          fprintf(jf, "%s  {\"name\": \"%s\", \"median\": %.1f, \"min\": %.1f, "
                  "\"max\": %.1f, \"mean\": %.1f, \"ci_lo\": %.1f, "
                  "\"ci_hi\": %.1f, \"forks\": %zu}", is_first ? "" : ",\n",
                  name, res->median, res->min, res->max, res->mean_ci.estimate,
                  res->mean_ci.lo, res->mean_ci.hi, res->n_ok);
          is_first = false;
        }
      }
      sl_bench_result_destroy(res);
    }
  }
  if (jf) {
    fputs("\n]\n", jf);
    fclose(jf);
  }
  return failed;
}
