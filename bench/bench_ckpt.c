/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint benchmarks (issue: checkpoints).  Each runs in forked
 * processes through bench/harness.c.
 *
 *   overhead   keyed count over 10,000 keys, 30 M records, checkpoint every
 *              second (aligned) versus none: records/s of each, and the
 *              ratio with its 95% interval (A/B forks interleaved).
 *   sync       duration of the sync phase (pinning every state map of a
 *              subtask) versus the amount of heap state, 10 MB .. 4 GB.
 *   backpressure  duration of one checkpoint while a slow operator keeps
 *              every channel full: aligned versus unaligned.
 *   recovery   time to restore a keyed operator from a checkpoint versus
 *              its state size, and the restore rate (checkpoint bytes per
 *              second until the operator is open).  --keep DIR keeps the
 *              checkpoints in DIR and reuses them on the next run (so that
 *              two builds restore the same files); --cold evicts the
 *              checkpoint's files from the page cache before each restore
 *              (posix_fadvise DONTNEED).
 *
 * usage: sluice-bench-ckpt overhead|sync|backpressure|recovery
 *          [--forks F] [--iterations I] [--warmup W] [--sizes-mb a,b,...]
 *          [--keep DIR] [--cold 1]
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/sluice.h"
#include "checkpoint/checkpoint.h"
#include "runtime/runtime.h"
#include "state/state.h"

static int forks = 5, iterations = 5, warmup = 1;
static const char *keep_dir; /* recovery: keep and reuse checkpoints here */
static int is_cold;          /* recovery: evict the files before a restore */
static char tmpdir[256];

/* ---- a keyed counter with value state ---------------------------------- */

/* When a count subtask was last opened: restore of its state is done. */
static _Atomic int64_t opened_ns;

static int cnt_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  atomic_store(&opened_ns, sl_bench_now_ns());
  sl_state_t *st;
  sl_state_desc_t d = {"count", SL_STATE_VALUE, 1, NULL, NULL};
  int rc = sl_ctx_state(ctx, &d, &st);
  sl_ctx_set_local(ctx, st);
  return rc;
}

static int spin_per_record;
static volatile uint64_t spin_sink; /* keeps the spin loop from being elided */

static int cnt_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *st = sl_ctx_local(ctx);
  uint64_t x = (uint64_t)sl_row_get_i64(row, 0);
  if (spin_per_record) {
    for (int i = 0; i < spin_per_record; i++)
      x = x * 6364136223846793005ull + 1;
    spin_sink = x;
  }
  int64_t n = 0;
  int rc = sl_value_get_i64(st, &n);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  return sl_value_put_i64(st, n + 1);
}

typedef struct job_opts_s {
  uint64_t records;
  uint64_t keys;
  uint32_t payload;     /* bytes of state value padding via payload column */
  int64_t interval_ms;  /* 0: no checkpoints */
  sl_ckpt_mode_t mode;
  const char *dir;
  uint32_t parallelism;
  uint32_t buffer_size, channel_buffers;
  const char *restore;
} job_opts_t;

static sl_job_t *make_job(const job_opts_t *o) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "bench";
  cfg.parallelism = o->parallelism ? o->parallelism : 1;
  if (o->buffer_size) cfg.buffer_size = o->buffer_size;
  if (o->channel_buffers) cfg.channel_buffers = o->channel_buffers;
  if (o->dir) {
    cfg.checkpoint.dir = o->dir;
    cfg.checkpoint.interval_ms = o->interval_ms;
    cfg.checkpoint.mode = o->mode;
  }
  cfg.restore_from = o->restore;
  sl_job_t *job;
  if (sl_job_create(&cfg, &job, NULL) != SL_OK) return NULL;
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.count = o->records;
  g.keys = o->keys;
  g.splits = cfg.parallelism; /* one per subtask, as measured before */
  g.columns = SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  sl_gen_source_create(&g, &vt, &ctx, &schema, NULL);
  sl_stream_t *s = sl_job_source(job, "gen", vt, ctx, schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {cnt_open, cnt_process, NULL, NULL, NULL, NULL};
  s = sl_stream_process(s, "count", schema, &fns, NULL);
  const sl_sink_vt_t *kvt;
  void *kctx;
  sl_null_sink_create(&kvt, &kctx);
  sl_stream_sink(s, "sink", kvt, kctx);
  sl_schema_unref(schema);
  return job;
}

/* ---- overhead ---------------------------------------------------------- */

static int overhead_iter(void *arg, sl_bench_ctx_t *ctx, double *out) {
  int64_t interval = *(int64_t *)arg;
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/overhead-%d-%d", tmpdir, ctx->fork,
           ctx->iteration);
  job_opts_t o = {30000000, 10000, 0, interval, SL_CKPT_ALIGNED,
                  interval ? dir : NULL, 1, 0, 0, NULL};
  sl_job_t *job = make_job(&o);
  int64_t t0 = sl_bench_now_ns();
  int rc = sl_job_run(job, NULL);
  double secs = (double)(sl_bench_now_ns() - t0) / 1e9;
  if (interval) {
    sl_checkpoint_stats_t st[64];
    uint32_t n = sl_job_checkpoint_history(job, st, 64);
    uint32_t ok = 0;
    for (uint32_t i = 0; i < n; i++) ok += st[i].result == SL_OK;
    if (ctx->iteration == 0)
      fprintf(stderr, "  fork %d: %u checkpoints completed in %.1f s\n",
              ctx->fork, ok, secs);
  }
  sl_job_destroy(job);
  *out = 30000000.0 / secs;
  return rc == SL_OK ? 0 : -1;
}

static int run_overhead(void) {
  static int64_t none = 0, every_second = 1000;
  sl_bench_opts_t o;
  sl_bench_opts_init(&o);
  o.name = "keyed-count-checkpoint-overhead";
  o.unit = "records/s";
  o.n_forks = forks;
  o.n_warmup = warmup;
  o.n_iterations = iterations;
  o.summary = stdout;
  sl_bench_fn_t a = {"no checkpoints", NULL, overhead_iter, NULL, &none, NULL};
  sl_bench_fn_t b = {"checkpoint every 1 s", NULL, overhead_iter, NULL,
                     &every_second, NULL};
  sl_bench_cmp_t *cmp = NULL;
  if (sl_bench_compare(&o, &a, &b, &cmp) != 0) return 1;
  sl_bench_cmp_print(cmp, stdout);
  sl_bench_cmp_destroy(cmp);
  return 0;
}

/* ---- sync phase versus state size -------------------------------------- */

typedef struct sync_state_s {
  size_t mb;
  sl_kstate_t *be;
} sync_state_t;

static int sync_setup(void *arg, sl_bench_ctx_t *ctx) {
  sync_state_t *s = arg;
  /* One subtask owning every key group of 128; values of 100 bytes. */
  if (sl__kstate_create(128, 0, 127, &s->be) != SL_OK) return -1;
  sl_state_desc_t d = {"v", SL_STATE_VALUE, 1, NULL, NULL};
  sl_state_t *st;
  if (sl__kstate_register(s->be, &d, &st, NULL) != SL_OK) return -1;
  uint8_t val[100];
  memset(val, 7, sizeof(val));
  /* About 160 bytes of memory per entry: key, value, entry and trie. */
  uint64_t n = (uint64_t)s->mb * 1000000 / 160;
  sl_bytes_t key;
  sl_bytes_init(&key);
  for (uint64_t i = 0; i < n; i++) {
    key.len = 0;
    sl_key_add_i64(&key, (int64_t)i);
    sl__kstate_set_key(s->be, key.data, (uint32_t)key.len,
                       sl__key_hash64(key.data, key.len));
    sl_value_put(st, val, sizeof(val));
  }
  sl_bytes_close(&key);
  if (ctx->fork == 0) {
    /* The heap actually used, to check the size the name claims. */
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &rss) == 2)
      fprintf(stderr, "  %zu MB target: %llu entries, resident %.0f MB\n",
              s->mb, (unsigned long long)n,
              (double)rss * (double)sysconf(_SC_PAGESIZE) / 1e6);
    if (f) fclose(f);
  }
  ctx->state = s;
  return 0;
}

static int sync_iter(void *arg, sl_bench_ctx_t *ctx, double *out) {
  sync_state_t *s = arg;
  (void)ctx;
  sl_kstate_snap_t *snap;
  int64_t t0 = sl_bench_now_ns();
  int rc = sl__kstate_snapshot(s->be, &snap);
  int64_t t1 = sl_bench_now_ns();
  if (rc != SL_OK) return -1;
  sl__kstate_snap_release(snap);
  sl__kstate_gc(s->be);
  *out = (double)(t1 - t0) / 1e3; /* microseconds */
  return 0;
}

static int run_sync(const char *sizes) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", sizes ? sizes : "10,100,1000,4000");
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    sync_state_t s = {(size_t)strtoul(tok, NULL, 10), NULL};
    char name[64];
    snprintf(name, sizeof(name), "sync-phase-%zuMB", s.mb);
    sl_bench_opts_t o;
    sl_bench_opts_init(&o);
    o.name = name;
    o.unit = "us";
    o.larger_is_better = false;
    o.n_forks = forks;
    o.n_warmup = warmup;
    o.n_iterations = iterations;
    o.summary = stdout;
    sl_bench_fn_t fn = {name, sync_setup, sync_iter, NULL, &s, NULL};
    sl_bench_result_t *res = NULL;
    if (sl_bench_run(&o, &fn, &res) != 0 || res->n_failed) return 1;
    printf("%s: median %.1f us, min %.1f, max %.1f (mean %.1f, 95%% CI "
           "[%.1f, %.1f]) over %zu forks\n", name, res->median, res->min,
           res->max, res->mean_ci.estimate, res->mean_ci.lo, res->mean_ci.hi,
           res->n_ok);
    sl_bench_result_destroy(res);
  }
  return 0;
}

/* ---- checkpoint duration under backpressure ---------------------------- */

static int bp_iter(void *arg, sl_bench_ctx_t *ctx, double *out) {
  sl_ckpt_mode_t mode = *(sl_ckpt_mode_t *)arg;
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/bp-%d-%d-%d", tmpdir, (int)mode, ctx->fork,
           ctx->iteration);
  spin_per_record = 20000; /* a slow counter: ~25 us per record */
  job_opts_t o = {UINT64_C(1) << 40, 10000, 0, 0, mode, dir, 2, 4096, 16,
                  NULL};
  sl_job_t *job = make_job(&o);
  if (sl_job_start(job, NULL) != SL_OK) return -1;
  uint64_t id = 0;
  while (sl_job_trigger_checkpoint(job, &id, NULL) != SL_OK) usleep(1000);
  /* The first one lets the channels fill; measure the second. */
  sl_job_wait_checkpoint(job, id, 60000, NULL);
  while (sl_job_trigger_checkpoint(job, &id, NULL) != SL_OK) usleep(1000);
  sl_checkpoint_stats_t st;
  int rc = sl_job_wait_checkpoint(job, id, 120000, &st);
  if (getenv("SL_BENCH_VERBOSE"))
    fprintf(stderr, "  %s: %.1f ms: barrier delay %.1f, alignment %.1f, "
            "sync %.1f, async %.1f ms, %llu channel bytes of %llu\n",
            mode == SL_CKPT_ALIGNED ? "aligned" : "unaligned",
            (double)st.duration_ns / 1e6, (double)st.max_barrier_delay_ns / 1e6,
            (double)st.max_alignment_ns / 1e6, (double)st.max_sync_ns / 1e6,
            (double)st.max_async_ns / 1e6, (unsigned long long)st.channel_bytes,
            (unsigned long long)st.bytes);
  sl_job_cancel(job);
  sl_job_wait(job, NULL);
  sl_job_destroy(job);
  *out = (double)st.duration_ns / 1e6;
  return rc == SL_OK ? 0 : -1;
}

static int run_backpressure(void) {
  static sl_ckpt_mode_t aligned = SL_CKPT_ALIGNED, unaligned = SL_CKPT_UNALIGNED;
  sl_bench_opts_t o;
  sl_bench_opts_init(&o);
  o.name = "checkpoint-duration-under-backpressure";
  o.unit = "ms";
  o.larger_is_better = false;
  o.n_forks = forks;
  o.n_warmup = warmup;
  o.n_iterations = iterations;
  o.summary = stdout;
  sl_bench_fn_t a = {"aligned", NULL, bp_iter, NULL, &aligned, NULL};
  sl_bench_fn_t b = {"unaligned", NULL, bp_iter, NULL, &unaligned, NULL};
  sl_bench_cmp_t *cmp = NULL;
  if (sl_bench_compare(&o, &a, &b, &cmp) != 0) return 1;
  sl_bench_cmp_print(cmp, stdout);
  sl_bench_cmp_destroy(cmp);
  return 0;
}

/* ---- recovery time versus state size ----------------------------------- */

/* The generator position stored in a checkpoint (its one split). */
static uint64_t stored_position(const char *chk) {
  sl_ckpt_meta_t m;
  if (sl__ckpt_read_meta(chk, &m, NULL) != SL_OK) return 0;
  uint64_t pos = 0;
  const sl_ckpt_op_t *op = sl__ckpt_meta_op(&m, "gen");
  sl_split_pos_t sp; /* the entry of the only split: id, then position */
  if (op && op->n_subtasks && op->subtasks[0].n_opstates &&
      op->subtasks[0].opstates[0].n_entries &&
      sl__split_pos_decode(op->subtasks[0].opstates[0].entries[0].bytes,
                           op->subtasks[0].opstates[0].entries[0].len,
                           &sp) == SL_OK &&
      sp.pos_len == 8)
    pos = sl_load_u64le(sp.pos);
  sl__ckpt_meta_clear(&m);
  return pos;
}

/* Drop a checkpoint directory's files from the page cache (they are
 * fsynced, so nothing is dirty): a restore then reads from the disk. */
static void evict_dir(const char *chk) {
  DIR *d = opendir(chk);
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", chk, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  closedir(d);
}

static int run_recovery(const char *sizes) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", sizes ? sizes : "10,100,1000");
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    size_t mb = (size_t)strtoul(tok, NULL, 10);
    /* Fill: an unbounded generator over `keys` keys, checkpoint once all
     * keys exist, cancel. */
    uint64_t keys = (uint64_t)mb * 1000000 / 18; /* ~18 B per entry on disk */
    char dir[512], info[600], chk[700];
    snprintf(dir, sizeof(dir), "%s/rec-%zu", keep_dir ? keep_dir : tmpdir,
             mb);
    snprintf(info, sizeof(info), "%s.info", dir);
    unsigned long long kept_id = 0, kept_bytes = 0;
    FILE *fi = keep_dir ? fopen(info, "r") : NULL;
    bool is_kept = fi && fscanf(fi, "%llu %llu", &kept_id, &kept_bytes) == 2;
    if (fi) fclose(fi);
    uint64_t id = 0;
    sl_checkpoint_stats_t st;
    memset(&st, 0, sizeof(st));
    if (is_kept) {
      id = kept_id;
      st.bytes = kept_bytes;
      goto measure;
    }
    /* Far more input than is read before the checkpoint: the job is still
     * running when it is triggered. */
    job_opts_t o = {keys * 1000, keys, 0, 0, SL_CKPT_ALIGNED, dir, 1, 0, 0,
                    NULL};
    sl_job_t *job = make_job(&o);
    sl_job_start(job, NULL);
    /* Wait until the job has processed two thirds of its input. */
    for (;;) {
      sl_metrics_t m;
      sl_job_metrics(job, &m);
      uint64_t in = 0;
      for (uint32_t i = 0; i < m.n_ops; i++)
        if (strcmp(m.ops[i].uid, "count") == 0) in += m.ops[i].records_in;
      sl_metrics_close(&m);
      if (in >= keys * 2) break;
      usleep(10000);
    }
    while (sl_job_trigger_checkpoint(job, &id, NULL) != SL_OK) usleep(1000);
    int wrc = sl_job_wait_checkpoint(job, id, 600000, &st);
    sl_job_cancel(job);
    sl_job_wait(job, NULL);
    sl_job_destroy(job);
    if (wrc != SL_OK) {
      fprintf(stderr, "recovery-%zuMB: checkpoint %llu failed: %s\n", mb,
              (unsigned long long)id, sl_strerror(wrc));
      return 1;
    }
    if (keep_dir && (fi = fopen(info, "w")) != NULL) {
      fprintf(fi, "%llu %llu\n", (unsigned long long)id,
              (unsigned long long)st.bytes);
      fclose(fi);
    }
  measure:
    snprintf(chk, sizeof(chk), "%s/bench/chk-%llu", dir,
             (unsigned long long)id);
    uint64_t pos = stored_position(chk);
    printf("recovery-%zuMB: %llu keys, checkpoint %llu has %llu bytes of "
           "state, source at record %llu\n", mb, (unsigned long long)keys,
           (unsigned long long)id, (unsigned long long)st.bytes,
           (unsigned long long)pos);
    /* Measure: restore into a job whose source ends at that position, so
     * the run is restore, open, and end: the recovery time. */
    double samples[3][64];
    int n = 0;
    for (int f = 0; f < forks * iterations && n < 64; f++) {
      job_opts_t ro = {pos, keys, 0, 0, SL_CKPT_ALIGNED, NULL, 1, 0, 0, chk};
      if (is_cold) evict_dir(chk);
      sl_job_t *rj = make_job(&ro);
      atomic_store(&opened_ns, 0);
      int64_t t0 = sl_bench_now_ns();
      int rc = sl_job_run(rj, NULL);
      int64_t t1 = sl_bench_now_ns();
      sl_job_destroy(rj);
      if (rc != SL_OK || atomic_load(&opened_ns) == 0) {
        fprintf(stderr, "restore failed\n");
        return 1;
      }
      samples[0][n] = (double)(atomic_load(&opened_ns) - t0) / 1e6;
      samples[1][n] = (double)(t1 - t0) / 1e6;
      samples[2][n] = (double)st.bytes / 1e6 / (samples[0][n] / 1e3);
      n++;
    }
    static const char *what[3] = {"start to restored and open",
                                  "whole run (restore, open, end, free)",
                                  "restore rate MB/s (bytes / restored)"};
    for (int k = 0; k < 3; k++) {
      sl_bench_interval_t ci;
      double med = 0;
      sl_bench_t_interval(samples[k], (size_t)n, 0.95, &ci);
      sl_bench_median(samples[k], (size_t)n, &med);
      printf("recovery-%zuMB%s: %s: mean %.1f%s, 95%% CI [%.1f, %.1f], "
             "median %.1f over %d runs\n", mb, is_cold ? " (cold)" : "",
             what[k], ci.estimate, k == 2 ? "" : " ms", ci.lo, ci.hi, med, n);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s overhead|sync|backpressure|recovery [--forks F] "
            "[--iterations I] [--warmup W] [--sizes-mb a,b,...] [--keep DIR] "
            "[--cold 1]\n", argv[0]);
    return 2;
  }
  const char *sizes = NULL;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
      return 2;
    }
    int *num = NULL;
    if (strcmp(argv[i], "--forks") == 0) num = &forks;
    else if (strcmp(argv[i], "--iterations") == 0) num = &iterations;
    else if (strcmp(argv[i], "--warmup") == 0) num = &warmup;
    else if (strcmp(argv[i], "--sizes-mb") == 0) sizes = argv[i + 1];
    else if (strcmp(argv[i], "--keep") == 0) keep_dir = argv[i + 1];
    else if (strcmp(argv[i], "--cold") == 0) is_cold = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[i]);
      return 2;
    }
    if (num) {
      char *end = NULL;
      long v = strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end || v < 0 || v > 1000) {
        fprintf(stderr, "%s: %s wants a number 0..1000, not '%s'\n", argv[0],
                argv[i], argv[i + 1]);
        return 2;
      }
      *num = (int)v;
    }
  }
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-bench-ckpt-%d", (int)getpid());
  mkdir(tmpdir, 0755);
  sl_log_set_level(SL_LOG_ERROR);
  int rc = 2;
  if (strcmp(argv[1], "overhead") == 0) rc = run_overhead();
  else if (strcmp(argv[1], "sync") == 0) rc = run_sync(sizes);
  else if (strcmp(argv[1], "backpressure") == 0) rc = run_backpressure();
  else if (strcmp(argv[1], "recovery") == 0) rc = run_recovery(sizes);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
  return rc;
}
