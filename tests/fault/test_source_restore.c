/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Source positions are restored by split identity (docs/connectors.md):
 * `sluice run` is killed right after its second checkpoint completed
 * (SL_INJECT=coordinator.before_complete_notify=kill:2), the input or the
 * configuration is changed, and `sluice run --resume` must either give the
 * exact result or fail with a message naming the split and both values.
 * The second checkpoint is taken between two polls of the source, after at
 * least one poll, so its positions are past the start of the first split
 * by construction; the inputs are large enough that the job cannot end
 * before it (each test checks that the first run was indeed killed).
 * Results are compared with sums the test computes from the files it wrote
 * (file source) or with an uninterrupted run (generator).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "sl_test.h"


enum { N_KEYS = 97 };

typedef struct run_s {
  int status;
  char *err; /* standard error */
} run_t;

static char *read_all(const char *path) {
  FILE *fp = fopen(path, "r");
  if (fp == NULL) return strdup("");
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  size_t got = fread(p, 1, (size_t)n, fp);
  p[got] = '\0';
  fclose(fp);
  return p;
}

/* Run `sluice run <pipeline> args...`, with SL_INJECT=inject if given. */
static run_t run_sluice(const char *inject, const char *const *args) {
  char bin[4200], errp[4200];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  const char *argv[16];
  int a = 0;
  argv[a++] = bin;
  argv[a++] = "run";
  for (int i = 0; args[i] && a < 14; i++) argv[a++] = args[i];
  argv[a++] = "--quiet";
  argv[a] = NULL;
  run_t r;
  r.status = sl_test_wait(sl_test_spawn(argv, inject, errp, 0));
  r.err = read_all(errp);
  return r;
}

/* The first run: killed right after its second completed checkpoint. */
static void run_until_checkpoint(const char *const *args) {
  run_t r = run_sluice("coordinator.before_complete_notify=kill:2", args);
  if (!WIFSIGNALED(r.status) || WTERMSIG(r.status) != SIGKILL)
    SL_TEST_FAIL("the first run was not killed after its second checkpoint "
                 "(status 0x%x); the input is too small for this machine? "
                 "stderr:\n%s",
                 r.status, r.err);
  free(r.err);
}

static void expect_ok(const char *const *args) {
  run_t r = run_sluice(NULL, args);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
    SL_TEST_FAIL("sluice failed (status 0x%x); stderr:\n%s", r.status, r.err);
  free(r.err);
}

static void expect_fail(const char *const *args, const char *want1,
                        const char *want2) {
  run_t r = run_sluice(NULL, args);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 1)
    SL_TEST_FAIL("expected exit 1, got status 0x%x; stderr:\n%s", r.status,
                 r.err);
  if (strstr(r.err, want1) == NULL || (want2 && strstr(r.err, want2) == NULL))
    SL_TEST_FAIL("expected '%s' and '%s' in:\n%s", want1, want2 ? want2 : "",
                 r.err);
  free(r.err);
}

/* ------------------------------------------------------------------ */
/* File source: a directory of CSV files "key,amount" with fixed widths. */

typedef struct sums_s {
  int64_t count[N_KEYS], sum[N_KEYS];
} sums_t;

static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Write n lines with seed; add them to x if given. */
static void write_csv(const char *path, int n, uint64_t seed, sums_t *x) {
  rng_state = seed;
  FILE *fp = fopen(path, "w");
  SL_ASSERT_TRUE(fp != NULL);
  for (int i = 0; i < n; i++) {
    int k = (int)(rnd() % N_KEYS), v = (int)(rnd() % 9000) + 1000;
    fprintf(fp, "%02d,%d\n", k, v);
    if (x) {
      x->count[k]++;
      x->sum[k] += v;
    }
  }
  fclose(fp);
}

static char *tp(const char *name) {
  size_t n = strlen(sl_test_dir()) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", sl_test_dir(), name);
  return p;
}

/* The pipeline: per key count and sum of the directory in/. */
static char *write_file_pipeline(void) {
  char *pl = tp("files.yaml");
  char text[8192];
  snprintf(text, sizeof(text),
           "name: files\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 1}\n"
           "restart: {strategy: none}\n"
           "source:\n  type: file\n  uid: input\n  path: %s/in\n"
           "  schema: [{name: key, type: int64}, {name: amount, type: int64}]\n"
           "transforms:\n  - aggregate:\n      key: [key]\n"
           "      values: {n: count(), total: sum(amount)}\n"
           "      emit: final\n    uid: totals\n"
           "sink: {type: file, path: %s/out.csv}\n",
           sl_test_dir(), sl_test_dir(), sl_test_dir());
  sl_test_write_file(pl, text);
  return pl;
}

static void check_sums(const char *path, const sums_t *x) {
  FILE *fp = fopen(path, "r");
  if (fp == NULL) SL_TEST_FAIL("no output %s", path);
  sums_t got;
  memset(&got, 0, sizeof(got));
  long long k, n, t;
  int rows = 0;
  while (fscanf(fp, "%lld,%lld,%lld\n", &k, &n, &t) == 3) {
    SL_ASSERT_TRUE(k >= 0 && k < N_KEYS);
    got.count[k] = n;
    got.sum[k] = t;
    rows++;
  }
  fclose(fp);
  for (int i = 0; i < N_KEYS; i++) {
    if (got.count[i] != x->count[i] || got.sum[i] != x->sum[i])
      SL_TEST_FAIL("key %d: count %lld sum %lld, expected %lld and %lld", i,
                   (long long)got.count[i], (long long)got.sum[i],
                   (long long)x->count[i], (long long)x->sum[i]);
  }
  SL_ASSERT_EQ_INT(rows, N_KEYS);
}

enum { BIG = 300000 };

/* in/b.csv and in/c.csv, checkpointed and killed. */
static char *file_first_run(sums_t *x) {
  char *dir = tp("in");
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  char *b = tp("in/b.csv"), *c = tp("in/c.csv");
  write_csv(b, BIG, 1, x);
  write_csv(c, BIG, 2, x);
  char *pl = write_file_pipeline();
  const char *args[] = {pl, NULL};
  run_until_checkpoint(args);
  free(dir);
  free(b);
  free(c);
  return pl;
}

SL_TEST(file_directory_gains_a_file_sorting_first) {
  sums_t x;
  memset(&x, 0, sizeof(x));
  char *pl = file_first_run(&x);
  /* a.csv sorts first: by index it would take b.csv's position. */
  char *a = tp("in/a.csv"), *out = tp("out.csv");
  write_csv(a, 1000, 3, &x);
  const char *args[] = {pl, "--resume", NULL};
  expect_ok(args);
  check_sums(out, &x);
  free(a);
  free(out);
  free(pl);
}

SL_TEST(file_directory_loses_a_file) {
  sums_t x;
  memset(&x, 0, sizeof(x));
  char *pl = file_first_run(&x);
  char *c = tp("in/c.csv");
  SL_ASSERT_EQ_INT(unlink(c), 0);
  char want[4400];
  snprintf(want, sizeof(want), "holds a position of split '%s' of source "
           "'input', which the source no longer has", c);
  const char *args[] = {pl, "--resume", NULL};
  expect_fail(args, want, NULL);
  free(c);
  free(pl);
}

SL_TEST(file_rotated_to_a_shorter_file) {
  sums_t x;
  memset(&x, 0, sizeof(x));
  char *pl = file_first_run(&x);
  /* b.csv was read past its start (see the file comment); now empty. */
  char *b = tp("in/b.csv");
  write_csv(b, 0, 4, NULL);
  char want[4400];
  snprintf(want, sizeof(want), "file '%s' is shorter (0 bytes) than the "
           "checkpoint's position", b);
  const char *args[] = {pl, "--resume", NULL};
  expect_fail(args, want, "was it rotated or replaced?");
  free(b);
  free(pl);
}

SL_TEST(file_replaced_by_one_of_the_same_size) {
  sums_t x;
  memset(&x, 0, sizeof(x));
  char *pl = file_first_run(&x);
  /* Other values of the same widths: same size, other bytes. */
  char *b = tp("in/b.csv");
  struct stat st0, st1;
  SL_ASSERT_EQ_INT(stat(b, &st0), 0);
  write_csv(b, BIG, 5, NULL);
  SL_ASSERT_EQ_INT(stat(b, &st1), 0);
  SL_ASSERT_EQ_INT(st0.st_size, st1.st_size);
  char want[4400];
  snprintf(want, sizeof(want), "file '%s' changed before the checkpoint's "
           "position", b);
  const char *args[] = {pl, "--resume", NULL};
  expect_fail(args, want, "was it rotated or replaced?");
  free(b);
  free(pl);
}

static void file_rescale(const char *p) {
  sums_t x;
  memset(&x, 0, sizeof(x));
  char *pl = file_first_run(&x);
  char *out = tp("out.csv");
  const char *args[] = {pl, "--resume", "--parallelism", p, NULL};
  expect_ok(args);
  check_sums(out, &x);
  free(out);
  free(pl);
}

SL_TEST(file_rescale_2_to_1) { file_rescale("1"); }
SL_TEST(file_rescale_2_to_3) { file_rescale("3"); }

/* ------------------------------------------------------------------ */
/* Generator. */

static char *write_gen_pipeline(const char *name, const char *out) {
  char *pl = tp(name);
  char text[8192];
  snprintf(text, sizeof(text),
           "name: gen\nparallelism: 2\n"
           "checkpoint: {dir: %s/ckpt, interval_ms: 1}\n"
           "restart: {strategy: none}\n"
           "source: {type: generator, uid: tx, seed: 7, count: 1500000,\n"
           "         keys: %d, columns: [key, amount]}\n"
           "transforms:\n  - aggregate:\n      key: [key]\n"
           "      values: {n: count(), total: sum(amount)}\n"
           "      emit: final\n    uid: totals\n"
           "sink: {type: file, path: %s}\n",
           sl_test_dir(), N_KEYS, out);
  sl_test_write_file(pl, text);
  return pl;
}

static char **sorted_lines(const char *path, int *out_n) {
  char *text = read_all(path);
  int n = 0, cap = 256;
  char **l = malloc((size_t)cap * sizeof(char *));
  for (char *s = text, *e; *s; s = e + 1) {
    e = strchr(s, '\n');
    if (e == NULL) e = s + strlen(s) - 1;
    else *e = '\0';
    if (n == cap) l = realloc(l, (size_t)(cap *= 2) * sizeof(char *));
    l[n++] = strdup(s);
  }
  free(text);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(l[j - 1], l[j]) > 0; j--) {
      char *t = l[j];
      l[j] = l[j - 1];
      l[j - 1] = t;
    }
  *out_n = n;
  return l;
}

static void assert_same_lines(const char *a, const char *b) {
  int na, nb;
  char **la = sorted_lines(a, &na), **lb = sorted_lines(b, &nb);
  if (na != nb) SL_TEST_FAIL("%s has %d lines, %s %d", a, na, b, nb);
  SL_ASSERT_TRUE(na > 0);
  for (int i = 0; i < na; i++)
    if (strcmp(la[i], lb[i]) != 0)
      SL_TEST_FAIL("%s and %s differ: '%s' vs '%s'", a, b, la[i], lb[i]);
  for (int i = 0; i < na; i++) {
    free(la[i]);
    free(lb[i]);
  }
  free(la);
  free(lb);
}

static void gen_rescale(const char *p) {
  char *ref = tp("ref.csv"), *out = tp("out.csv"), *cut = tp("cut.csv");
  /* The reference: one uninterrupted run at parallelism 1. */
  char *rpl = write_gen_pipeline("ref.yaml", ref);
  char rdir[4300];
  snprintf(rdir, sizeof(rdir), "checkpoint.dir=%s/ref-ckpt", sl_test_dir());
  const char *rargs[] = {rpl, "--parallelism", "1", "--set", rdir, NULL};
  expect_ok(rargs);
  char *pl = write_gen_pipeline("gen.yaml", cut);
  const char *args[] = {pl, NULL};
  run_until_checkpoint(args);
  char sink[4300];
  snprintf(sink, sizeof(sink), "sink.path=%s", out);
  const char *args2[] = {pl, "--resume", "--parallelism", p, "--set", sink,
                         NULL};
  expect_ok(args2);
  assert_same_lines(ref, out);
  free(ref);
  free(out);
  free(cut);
  free(rpl);
  free(pl);
}

SL_TEST(generator_rescale_2_to_1) { gen_rescale("1"); }
SL_TEST(generator_rescale_2_to_4) { gen_rescale("4"); }

SL_TEST(generator_count_lowered_below_a_position) {
  char *cut = tp("cut.csv");
  char *pl = write_gen_pipeline("gen.yaml", cut);
  const char *args[] = {pl, NULL};
  run_until_checkpoint(args);
  /* Split 0 is polled first and a poll emits a batch of 1024 records, so
   * its position is past 100 (800 records over 8 splits). */
  const char *args2[] = {pl, "--resume", "--set", "source.count=800", NULL};
  expect_fail(args2, "/8': the checkpoint's position is record ",
              "but the split now has only 100 records (count 800 over 8 "
              "splits); was count lowered?");
  free(cut);
  free(pl);
}

SL_TEST(generator_split_count_changed) {
  char *cut = tp("cut.csv");
  char *pl = write_gen_pipeline("gen.yaml", cut);
  const char *args[] = {pl, NULL};
  run_until_checkpoint(args);
  const char *args2[] = {pl, "--resume", "--set", "source.splits=4", NULL};
  expect_fail(args2, "holds a position of split 'seed=7/split=",
              "/8' of source 'tx', which the source no longer has (4 "
              "splits now");
  free(cut);
  free(pl);
}

/* ------------------------------------------------------------------ */
/*
 * Checkpoints without enumerator state for the source: what a sluice
 * whose generator and file sources had no enumerator wrote (every split in
 * its readers' source.splits, none in an enumerator).  The test turns the
 * newest checkpoint of a run into one: the splits the enumerator still
 * held go into reader 0's source.splits (from their start), and the
 * enumerator state is dropped.  No split is finished at the second
 * checkpoint (the inputs are large), so the readers' states then name
 * every split, as such a checkpoint did; the test checks that count.
 */

static uint64_t take_u64(const uint8_t **p) {
  uint64_t v = sl_load_u64le(*p);
  *p += 8;
  return v;
}

static void add_split_entry(sl_ckpt_subtask_t *sub, const uint8_t *id,
                            size_t il, const uint8_t *pos, size_t pl) {
  sl_ckpt_opstate_t *os = NULL;
  for (uint32_t i = 0; i < sub->n_opstates; i++)
    if (strcmp(sub->opstates[i].name, "source.splits") == 0)
      os = &sub->opstates[i];
  if (os == NULL) {
    sub->opstates = sl_realloc(sub->opstates,
                            (sub->n_opstates + 1) * sizeof(*os));
    os = &sub->opstates[sub->n_opstates++];
    memset(os, 0, sizeof(*os));
    os->name = sl_strdup("source.splits");
  }
  char *sid = strndup((const char *)id, il);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__split_pos_encode(sid, pos, pl, &b));
  free(sid);
  os->entries = sl_realloc(os->entries, (os->n_entries + 1) *
                                         sizeof(sl_ckpt_entry_t));
  sl_ckpt_entry_t *e = &os->entries[os->n_entries++];
  e->key = 0;
  e->bytes = sl_malloc(b.len);
  memcpy(e->bytes, b.data, b.len);
  e->len = (uint32_t)b.len;
  sl_bytes_close(&b);
}

/* Returns the number of splits the readers' states then hold. */
static uint32_t strip_enum_state(const char *job, const char *uid,
                                 bool is_file) {
  char jobdir[4300];
  snprintf(jobdir, sizeof(jobdir), "%s/ckpt/%s", sl_test_dir(), job);
  sl_ckpt_meta_t m;
  memset(&m, 0, sizeof(m));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__ckpt_load_latest(jobdir, &m, &err), err);
  sl_ckpt_op_t *op = NULL;
  for (uint32_t i = 0; i < m.n_ops; i++)
    if (strcmp(m.ops[i].uid, uid) == 0) op = &m.ops[i];
  SL_ASSERT_TRUE(op != NULL && op->has_enum_state);
  const uint8_t *p = op->enum_state, *end = p + op->enum_state_len;
  SL_ASSERT_EQ_INT(*p++, 1);
  if (is_file) { /* skip the seen paths */
    for (uint64_t n = take_u64(&p); n > 0; n--) p += take_u64(&p);
  }
  for (uint64_t n = take_u64(&p); n > 0; n--) {
    size_t il = (size_t)take_u64(&p);
    const uint8_t *id = p;
    p += il;
    size_t pl = (size_t)take_u64(&p);
    add_split_entry(&op->subtasks[0], id, il, p, pl);
    p += pl;
  }
  SL_ASSERT_TRUE(p == end);
  sl_free(op->enum_state);
  op->enum_state = NULL;
  op->enum_state_len = 0;
  op->has_enum_state = false;
  uint32_t n_splits = 0;
  for (uint32_t i = 0; i < op->n_subtasks; i++)
    for (uint32_t k = 0; k < op->subtasks[i].n_opstates; k++)
      if (strcmp(op->subtasks[i].opstates[k].name, "source.splits") == 0)
        n_splits += op->subtasks[i].opstates[k].n_entries;
  bool is_renamed = false;
  SL_ASSERT_OK_E(sl__ckpt_write_meta(m.dir, &m, &is_renamed, &err), err);
  sl__ckpt_meta_clear(&m);
  return n_splits;
}

SL_TEST(generator_checkpoint_without_enumerator_state_resumes) {
  char *ref = tp("ref.csv"), *out = tp("out.csv"), *cut = tp("cut.csv");
  char *rpl = write_gen_pipeline("ref.yaml", ref);
  char rdir[4300];
  snprintf(rdir, sizeof(rdir), "checkpoint.dir=%s/ref-ckpt", sl_test_dir());
  const char *rargs[] = {rpl, "--set", rdir, NULL};
  expect_ok(rargs);
  char *pl = write_gen_pipeline("gen.yaml", cut);
  const char *args[] = {pl, NULL};
  run_until_checkpoint(args);
  SL_ASSERT_EQ_INT(strip_enum_state("gen", "tx", false), 8);
  char sink[4300];
  snprintf(sink, sizeof(sink), "sink.path=%s", out);
  const char *args2[] = {pl, "--resume", "--set", sink, NULL};
  expect_ok(args2);
  assert_same_lines(ref, out);
  free(ref);
  free(out);
  free(cut);
  free(rpl);
  free(pl);
}

SL_TEST(file_checkpoint_without_enumerator_state_resumes) {
  sums_t x;
  memset(&x, 0, sizeof(x));
  char *pl = file_first_run(&x);
  SL_ASSERT_EQ_INT(strip_enum_state("files", "input", true), 2);
  /* A file new since the checkpoint is read from its start. */
  char *a = tp("in/a.csv"), *out = tp("out.csv");
  write_csv(a, 1000, 3, &x);
  const char *args[] = {pl, "--resume", "--parallelism", "3", NULL};
  expect_ok(args);
  check_sums(out, &x);
  free(a);
  free(out);
  free(pl);
}
