/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The built-in sources as a user meets them through `sluice run`: the
 * README's main job gives the same balances at every parallelism (the
 * generator's data does not depend on it), a generator at an absurd rate
 * or with event times at the end of int64 finishes or fails clearly, a
 * directory of more files than the process may open is read one file at a
 * time, and a source subtask without splits never holds the watermark back
 * (a row far behind it goes to the late sink in every run, whichever task
 * the scheduler runs first).  Most run the built binary with posix_spawn;
 * the watermark test also holds the empty subtask at a latch through the C
 * API, so that it cannot report before the late row arrives.
 */
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_test.h"

extern char **environ;

typedef struct run_s {
  int status;
  char *err;
} run_t;

static char *read_all(const char *path) {
  size_t len;
  char *p = sl_test_read_file(path, &len);
  return p ? p : strdup("");
}

static char *tp(const char *fmt, const char *arg) {
  char name[512];
  snprintf(name, sizeof(name), fmt, arg);
  size_t n = strlen(sl_test_dir()) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", sl_test_dir(), name);
  return p;
}

/* `sluice run args... --quiet`; standard error is kept in r.err. */
static run_t run_sluice(const char *const *args) {
  char bin[4200], errp[4200];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[24];
  int a = 0;
  argv[a++] = bin;
  argv[a++] = "run";
  for (int i = 0; args[i] && a < 22; i++) argv[a++] = args[i];
  argv[a++] = "--quiet";
  argv[a] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid;
  int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) SL_TEST_FAIL("cannot run sluice: %s", strerror(rc));
  run_t r;
  if (waitpid(pid, &r.status, 0) != pid) SL_TEST_FAIL("waitpid failed");
  r.err = read_all(errp);
  return r;
}

static void expect_exit(const char *const *args, int code, const char *want) {
  run_t r = run_sluice(args);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != code)
    SL_TEST_FAIL("expected exit %d, got status 0x%x; stderr:\n%s", code,
                 r.status, r.err);
  if (want && strstr(r.err, want) == NULL)
    SL_TEST_FAIL("expected '%s' in:\n%s", want, r.err);
  free(r.err);
}

static int cmp_line(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of a file, sorted (subtasks write in any order). */
static char **sorted_lines(const char *path, int *out_n) {
  char *text = read_all(path);
  int n = 0, cap = 1024;
  char **l = malloc((size_t)cap * sizeof(char *));
  for (char *s = text, *e; *s; s = e + 1) {
    e = strchr(s, '\n');
    if (e == NULL) e = s + strlen(s) - 1;
    else *e = '\0';
    if (n == cap) l = realloc(l, (size_t)(cap *= 2) * sizeof(char *));
    l[n++] = strdup(s);
  }
  free(text);
  qsort(l, (size_t)n, sizeof(char *), cmp_line);
  *out_n = n;
  return l;
}

static void free_lines(char **l, int n) {
  for (int i = 0; i < n; i++) free(l[i]);
  free(l);
}

static int count_lines(const char *path) {
  int n;
  char **l = sorted_lines(path, &n);
  free_lines(l, n);
  return n;
}

/* ------------------------------------------------------------------ */

SL_TEST(main_job_gives_the_same_balances_at_parallelism_1_2_4) {
  /* examples/pipelines/account_balance.yaml, as tools/demo runs it. */
  char pl[4300];
  snprintf(pl, sizeof(pl), "%s/examples/pipelines/account_balance.yaml",
           sl_test_src_dir());
  const char *par[] = {"1", "2", "4"};
  char **ref = NULL;
  int n_ref = 0;
  for (int i = 0; i < 3; i++) {
    char *out = tp("balances-%s.csv", par[i]);
    char sink[4400];
    snprintf(sink, sizeof(sink), "sink.path=%s", out);
    const char *args[] = {pl, "--parallelism", par[i], "--set",
                          "source.count=200000", "--set", sink, NULL};
    expect_exit(args, 0, NULL);
    int n;
    char **l = sorted_lines(out, &n);
    SL_ASSERT_EQ_INT(n, 10001); /* header and 10,000 accounts */
    if (ref == NULL) {
      ref = l;
      n_ref = n;
    } else {
      for (int k = 0; k < n; k++)
        if (strcmp(ref[k], l[k]) != 0)
          SL_TEST_FAIL("parallelism %s: '%s', parallelism 1: '%s'", par[i],
                       l[k], ref[k]);
      free_lines(l, n);
    }
    free(out);
  }
  free_lines(ref, n_ref);
}

/* Records due = elapsed time x rate: beyond 2^64 it used to wrap, and the
 * generator stalled at 0 records/s polling without end. */
SL_TEST(generator_at_rate_1e20_runs_unlimited) {
  char *pl = tp("%s.yaml", "rate"), *out = tp("%s.csv", "rate");
  const char *rates[] = {"1e20", "1e30", "1e300"};
  for (int i = 0; i < 3; i++) {
    char text[8192];
    snprintf(text, sizeof(text),
             "name: rate\nparallelism: 2\n"
             "source: {type: generator, count: 100000, rate: %s,"
             " columns: [seq, split]}\n"
             "sink: {type: file, path: %s}\n",
             rates[i], out);
    sl_test_write_file(pl, text);
    const char *args[] = {pl, NULL};
    expect_exit(args, 0, NULL);
    SL_ASSERT_EQ_INT(count_lines(out), 100000);
  }
  free(pl);
  free(out);
}

SL_TEST(generator_event_time_beyond_int64_is_refused) {
  char *pl = tp("%s.yaml", "ts"), *out = tp("%s.csv", "ts");
  char text[8192];
  /* Bounded: the last record of a split (12,500 of 100,000 over 8) would
   * be at 9223372036854775000 + 12499 * 1000. */
  snprintf(text, sizeof(text),
           "name: ts\n"
           "source: {type: generator, count: 100000, columns: [key, ts],\n"
           "         start_time_us: 9223372036854775000,"
           " time_step_us: 1000}\n"
           "sink: {type: file, path: %s}\n",
           out);
  sl_test_write_file(pl, text);
  const char *args[] = {pl, NULL};
  expect_exit(args, 2,
              "generator: the event time of the last record of a split, "
              "start_time_us 9223372036854775000 + 12499 * time_step_us "
              "1000, does not fit in int64 microseconds");
  /* Unbounded: the job fails at the record whose time would overflow, not
   * with a wrapped timestamp. */
  snprintf(text, sizeof(text),
           "name: ts\nparallelism: 1\n"
           "source: {type: generator, splits: 1, columns: [seq, ts],\n"
           "         start_time_us: 9223372036854770000,"
           " time_step_us: 1000}\n"
           "sink: {type: file, path: %s}\n",
           out);
  sl_test_write_file(pl, text);
  expect_exit(args, 1,
              "generator split 'seed=1/split=0/1': the event time of record "
              "6, start_time_us 9223372036854770000 + 6 * time_step_us "
              "1000, does not fit in int64");
  free(pl);
  free(out);
}

SL_TEST(directory_of_more_files_than_descriptors) {
  /* 400 files, at most 128 descriptors: a reader opens one at a time. */
  char *dir = tp("%s", "many");
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  for (int f = 0; f < 400; f++) {
    char name[64], *path;
    snprintf(name, sizeof(name), "many/f%03d.csv", f);
    path = tp("%s", name);
    char text[64];
    snprintf(text, sizeof(text), "%d,1\n%d,2\n", f, f);
    sl_test_write_file(path, text);
    free(path);
  }
  char *pl = tp("%s.yaml", "many"), *out = tp("%s.csv", "many");
  char text[8192];
  snprintf(text, sizeof(text),
           "name: many\nparallelism: 2\n"
           "source:\n  type: file\n  path: %s\n"
           "  schema: [{name: f, type: int64}, {name: v, type: int64}]\n"
           "sink: {type: file, path: %s}\n",
           dir, out);
  sl_test_write_file(pl, text);
  struct rlimit rl = {128, 128};
  SL_ASSERT_EQ_INT(setrlimit(RLIMIT_NOFILE, &rl), 0);
  const char *args[] = {pl, NULL};
  expect_exit(args, 0, NULL);
  SL_ASSERT_EQ_INT(count_lines(out), 800);
  free(dir);
  free(pl);
  free(out);
}

/*
 * One file at parallelism 2: source subtask 1 has no split.  The window's
 * watermark must follow subtask 0's from the first record, so the third
 * row, 10 s behind the first two, is late in every run.  Before, subtask 1
 * held the watermark at its minimum until it had run and ended, and the
 * row joined a window when it ran late (about half the runs on a loaded
 * machine; the latch test below forces that order).
 */
SL_TEST(subtask_without_splits_never_holds_the_watermark) {
  enum { ROWS = 2000, RUNS = 20 };
  const int64_t t0 = INT64_C(1767225600000000);
  char *in = tp("%s", "events.csv"), *pl = tp("%s.yaml", "late");
  char *out = tp("%s", "windows.csv"), *late = tp("%s", "late.csv");
  FILE *fp = fopen(in, "w");
  SL_ASSERT_TRUE(fp != NULL);
  for (int i = 0; i < ROWS; i++) {
    fprintf(fp, "%d,%lld\n", i % 3, (long long)(t0 + 10000000 + i));
    if (i == 1) fprintf(fp, "7,%lld\n", (long long)t0); /* 10 s behind */
  }
  fclose(fp);
  char text[8192];
  snprintf(text, sizeof(text),
           "name: late\nparallelism: 2\n"
           "source:\n  type: file\n  path: %s\n"
           "  schema: [{name: key, type: int64}, {name: ts, type: int64}]\n"
           "  watermarks: {time_field: ts, max_out_of_orderness: 1ms,"
           " per_record: true}\n"
           "transforms:\n  - window:\n      type: tumbling\n"
           "      time_field: ts\n      size: 1s\n      key: [key]\n"
           "      values: {n: count()}\n"
           "      late_sink: {type: file, path: %s}\n"
           "    uid: per-second\n"
           "sink: {type: file, path: %s}\n",
           in, late, out);
  sl_test_write_file(pl, text);
  char want_late[64];
  snprintf(want_late, sizeof(want_late), "7,%lld", (long long)t0);
  for (int r = 0; r < RUNS; r++) {
    const char *args[] = {pl, NULL};
    expect_exit(args, 0, NULL);
    int n;
    char **l = sorted_lines(late, &n);
    if (n != 1 || strcmp(l[0], want_late) != 0)
      SL_TEST_FAIL("run %d: %d late rows (expected only '%s'); the row "
                   "joined a window", r, n, want_late);
    free_lines(l, n);
    l = sorted_lines(out, &n);
    SL_ASSERT_EQ_INT(n, 3); /* keys 0, 1, 2 in one window each */
    free_lines(l, n);
  }
  free(in);
  free(pl);
  free(out);
  free(late);
}

/* ------------------------------------------------------------------ */
/*
 * The same through the C API, deterministic by construction: a source of
 * one split at parallelism 2, whose subtask without splits is held in
 * reader_open at a latch until the late sink has received its row.  With
 * that subtask counted in the minimum the row could not be late while it
 * is held; the latch's time limit (10 s) only ends a failing run.
 */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_late_rows, g_rows;
static bool g_timed_out;

static const int64_t g_ts[] = {5000, 5001, 1500, 6100}; /* 1500 is late */

typedef struct lreader_s {
  uint32_t n_splits, next;
} lreader_t;

static int l_plan(void *ctx, uint32_t p, sl_split_list_t *l,
                  sl_error_t **e) {
  (void)ctx;
  (void)p;
  (void)e;
  return sl_split_list_add(l, "the-only-split");
}

static int l_open(void *ctx, const sl_reader_init_t *init, void **out,
                  sl_error_t **e) {
  (void)ctx;
  (void)e;
  if (init->n_splits == 0) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g_lock);
    while (g_late_rows == 0 && !g_timed_out)
      if (pthread_cond_timedwait(&g_cond, &g_lock, &until) != 0)
        g_timed_out = true;
    pthread_mutex_unlock(&g_lock);
  }
  lreader_t *r = calloc(1, sizeof(*r));
  r->n_splits = init->n_splits;
  *out = r;
  return SL_OK;
}

static int l_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  lreader_t *r = rd;
  while (r->n_splits && r->next < 4) {
    sl_row_builder_t *b = sl_source_builder(out);
    sl_row_builder_set_i64(b, 0, 1);
    sl_row_builder_set_i64(b, 1, g_ts[r->next++]);
    if (!sl_source_emit_builder(out, e)) return *e ? SL_EFAILED : 0;
  }
  return SL_POLL_END;
}

static int l_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}

static void l_close(void *rd) { free(rd); }
static void l_destroy(void *ctx) { (void)ctx; }

static const sl_source_vt_t l_vt = {"latched", l_plan, l_open, l_poll,
                                    l_pos, l_close, l_destroy};

static int k_open(void *ctx, const sl_sink_init_t *init, void **out,
                  sl_error_t **e) {
  (void)init;
  (void)e;
  *out = ctx;
  return SL_OK;
}

static int k_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)row;
  (void)e;
  pthread_mutex_lock(&g_lock);
  if (w == (void *)&g_late_rows) {
    g_late_rows++;
    pthread_cond_broadcast(&g_cond);
  } else {
    g_rows++;
  }
  pthread_mutex_unlock(&g_lock);
  return SL_OK;
}

static int k_close(void *w, bool ok, sl_error_t **e) {
  (void)w;
  (void)ok;
  (void)e;
  return SL_OK;
}

static void k_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t k_vt = {"counting", k_open, k_write, NULL, k_close,
                                  k_destroy};

SL_TEST(subtask_without_splits_held_at_a_latch_does_not_hold_the_watermark) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 2;
  cfg.n_workers = 3; /* one may wait at the latch */
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_field_t f[] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                    {"ts", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_schema_create(f, 2, &schema, NULL));
  sl_stream_t *s = sl_job_source(job, "events", &l_vt, NULL, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.per_record = true;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 1000;
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}};
  sl_stream_t *w = sl_stream_window_aggregate(s, "window", &spec, aggs, 1);
  SL_ASSERT_OK(sl_stream_sink(w, "out", &k_vt, &g_rows));
  SL_ASSERT_OK(sl_stream_sink(sl_stream_late_rows(w), "late", &k_vt,
                              &g_late_rows));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  SL_ASSERT_TRUE(!g_timed_out);
  SL_ASSERT_EQ_INT(g_late_rows, 1);
  SL_ASSERT_EQ_INT(g_rows, 2); /* [5000, 6000) with 2 rows, [6000, 7000) */
}

/*
 * The same with a source that has an enumerator (FLIP-27 shape): it hands
 * its one split to reader 0 and nothing to reader 1, which is held in
 * reader_open at the latch.  A reader without a split yet is idle for
 * watermarks from the start, so the row is late while reader 1 is held;
 * before, such a reader counted in the minimum until it had run.
 */
static int le_create(void *src, const sl_enum_init_t *init, void **out,
                     sl_error_t **e) {
  (void)src;
  (void)init;
  (void)e;
  *out = calloc(1, 1);
  return SL_OK;
}

static int le_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **e) {
  (void)en;
  (void)e;
  sl_split_t s = {"the-only-split", NULL, 0};
  return sl_enum_assign(ec, 0, &s);
}

static int le_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      sl_error_t **e) {
  (void)en;
  (void)e;
  return sl_enum_signal_no_more_splits(ec, subtask);
}

static int le_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                   const sl_split_t *s, uint32_t n, sl_error_t **e) {
  (void)en;
  (void)ec;
  (void)subtask;
  (void)s;
  (void)n;
  (void)e;
  return SL_OK;
}

static int le_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  (void)en;
  (void)id;
  (void)out;
  return SL_OK;
}

static void le_close(void *en) { free(en); }

static const sl_enum_vt_t le_vt = {.create = le_create,
                                   .discover = le_discover,
                                   .handle_split_request = le_request,
                                   .add_splits_back = le_back,
                                   .snapshot = le_snapshot,
                                   .close = le_close};

static int le_open(void *ctx, const sl_reader_init_t *init, void **out,
                   sl_error_t **e) {
  /* Reader 1 never gets a split: hold it like l_open holds a reader
   * without splits. */
  sl_reader_init_t i2 = *init;
  i2.n_splits = init->subtask == 1 ? 0 : 1;
  int rc = l_open(ctx, &i2, out, e);
  if (rc == SL_OK) ((lreader_t *)*out)->n_splits = 0;
  return rc;
}

static int le_add(void *rd, const sl_split_init_t *s, uint32_t n,
                  sl_error_t **e) {
  (void)s;
  (void)e;
  ((lreader_t *)rd)->n_splits += n;
  return SL_OK;
}

static const sl_source_vt_t le_src_vt = {.type_name = "latched-enum",
                                         .reader_open = le_open,
                                         .reader_poll = l_poll,
                                         .reader_position = l_pos,
                                         .reader_close = l_close,
                                         .destroy = l_destroy,
                                         .enumerator = &le_vt,
                                         .reader_add_splits = le_add};

SL_TEST(reader_without_a_split_yet_does_not_hold_the_watermark) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 2;
  cfg.n_workers = 3; /* one may wait at the latch */
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_field_t f[] = {{"key", {SL_TYPE_INT64, 0, 0, false}},
                    {"ts", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_schema_create(f, 2, &schema, NULL));
  sl_stream_t *s = sl_job_source(job, "events", &le_src_vt, NULL, schema);
  sl_watermark_config_t wm;
  sl_watermark_config_init(&wm);
  wm.time_field = "ts";
  wm.per_record = true;
  s = sl_source_watermarks(s, &wm);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_window_spec_t spec;
  sl_window_spec_init(&spec);
  spec.time_field = "ts";
  spec.size_us = 1000;
  sl_agg_t aggs[] = {{"n", SL_AGG_COUNT, NULL}};
  sl_stream_t *w = sl_stream_window_aggregate(s, "window", &spec, aggs, 1);
  SL_ASSERT_OK(sl_stream_sink(w, "out", &k_vt, &g_rows));
  SL_ASSERT_OK(sl_stream_sink(sl_stream_late_rows(w), "late", &k_vt,
                              &g_late_rows));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_run(job, &err), err);
  sl_job_destroy(job);
  sl_schema_unref(schema);
  SL_ASSERT_TRUE(!g_timed_out);
  SL_ASSERT_EQ_INT(g_late_rows, 1);
  SL_ASSERT_EQ_INT(g_rows, 2);
}

/* A file listed twice would be read twice, and its positions could not be
 * told apart: the planner refuses a duplicate split id, naming it. */
SL_TEST(file_listed_twice_is_refused) {
  char *in = tp("%s", "twice.csv"), *pl = tp("%s.yaml", "twice");
  char *out = tp("%s", "twice-out.csv");
  sl_test_write_file(in, "1,2\n");
  char text[8192];
  snprintf(text, sizeof(text),
           "name: twice\n"
           "source:\n  type: file\n  path: [%s, %s]\n"
           "  schema: [{name: a, type: int64}, {name: b, type: int64}]\n"
           "sink: {type: file, path: %s}\n",
           in, in, out);
  sl_test_write_file(pl, text);
  char want[4400];
  snprintf(want, sizeof(want), "source 'source': split '%s' is listed twice",
           in);
  const char *args[] = {pl, NULL};
  expect_exit(args, 1, want);
  free(in);
  free(pl);
  free(out);
}
