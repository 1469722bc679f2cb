/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the sluice command: each runs the built binary with
 * posix_spawn on a pipeline file that the test writes, and checks its exit
 * status, standard output and standard error.  Aggregate results are
 * compared with sums that the test computes from the CSV input it wrote
 * with its own random function, and window results and late rows with a
 * replay of the watermark over the events it wrote.  The signal tests wait
 * for the "running" line on standard error (a latch on output, not a
 * sleep) before sending SIGTERM or SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sl_test.h"

extern char **environ;

/* ------------------------------------------------------------------ */
/* Running the binary. */

typedef struct buf_s {
  char *p;
  size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const char *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    b->cap = (b->len + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = '\0';
}

typedef struct cli_s {
  pid_t pid;
  int fd[2]; /* stdout, stderr; -1 after EOF */
  buf_t out[2];
  int status;
} cli_t;

static char *bin_path(void) {
  size_t n = strlen(sl_test_bin_dir()) + 16;
  char *p = malloc(n);
  snprintf(p, n, "%s/sluice", sl_test_bin_dir());
  return p;
}

/* Start `sluice args...` (args NULL-terminated). */
static void cli_start(cli_t *c, const char *const *args) {
  memset(c, 0, sizeof(*c));
  int po[2], pe[2];
  SL_ASSERT_EQ_INT(pipe(po), 0);
  SL_ASSERT_EQ_INT(pipe(pe), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, po[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
  posix_spawn_file_actions_addclose(&fa, po[0]);
  posix_spawn_file_actions_addclose(&fa, pe[0]);
  posix_spawn_file_actions_addclose(&fa, po[1]);
  posix_spawn_file_actions_addclose(&fa, pe[1]);
  /* The child starts with default signal handling and nothing blocked,
   * whatever the test runner inherited. */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t def, none;
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  sigaddset(&def, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  int n = 0;
  while (args[n]) n++;
  char **argv = calloc((size_t)n + 2, sizeof(char *));
  char *bin = bin_path();
  argv[0] = bin;
  for (int i = 0; i < n; i++) argv[i + 1] = (char *)args[i];
  int e = posix_spawn(&c->pid, bin, &fa, &at, argv, environ);
  if (e != 0) SL_TEST_FAIL("cannot run %s: %s", bin, strerror(e));
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(argv);
  free(bin);
  close(po[1]);
  close(pe[1]);
  c->fd[0] = po[0];
  c->fd[1] = pe[0];
}

/* Read what is available (blocking until something is); false once both
 * outputs have ended. */
static bool cli_pump(cli_t *c) {
  struct pollfd pf[2];
  int n = 0, idx[2];
  for (int i = 0; i < 2; i++)
    if (c->fd[i] >= 0) {
      pf[n].fd = c->fd[i];
      pf[n].events = POLLIN;
      idx[n++] = i;
    }
  if (n == 0) return false;
  int r = poll(pf, (nfds_t)n, -1);
  if (r < 0 && errno == EINTR) return true;
  SL_ASSERT_TRUE(r > 0);
  for (int k = 0; k < n; k++) {
    if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char chunk[4096];
    ssize_t got = read(pf[k].fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      close(c->fd[idx[k]]);
      c->fd[idx[k]] = -1;
    } else {
      buf_add(&c->out[idx[k]], chunk, (size_t)got);
    }
  }
  return true;
}

static void cli_finish(cli_t *c) {
  while (cli_pump(c)) {
  }
  pid_t w;
  do w = waitpid(c->pid, &c->status, 0);
  while (w < 0 && errno == EINTR);
  SL_ASSERT_EQ_INT(w, c->pid);
  if (c->out[0].p == NULL) buf_add(&c->out[0], "", 0);
  if (c->out[1].p == NULL) buf_add(&c->out[1], "", 0);
}

static const char *cli_stdout(const cli_t *c) { return c->out[0].p; }
static const char *cli_stderr(const cli_t *c) { return c->out[1].p; }

static void cli_free(cli_t *c) {
  free(c->out[0].p);
  free(c->out[1].p);
}

/* Run to the end; returns the exit code (fails if killed by a signal). */
static int cli_run(cli_t *c, const char *const *args) {
  cli_start(c, args);
  cli_finish(c);
  if (!WIFEXITED(c->status))
    SL_TEST_FAIL("sluice did not exit normally (status 0x%x); stderr:\n%s",
                 c->status, cli_stderr(c));
  return WEXITSTATUS(c->status);
}

#define ASSERT_EXIT(c, args, code)                                       \
  do {                                                                   \
    int ex_ = cli_run((c), (args));                                      \
    if (ex_ != (code))                                                   \
      SL_TEST_FAIL("exit code %d, expected %d; stderr:\n%s", ex_,        \
                   (code), cli_stderr(c));                               \
  } while (0)

#define ASSERT_CONTAINS(hay, needle)                                     \
  do {                                                                   \
    if (strstr((hay), (needle)) == NULL)                                 \
      SL_TEST_FAIL("expected '%s' in:\n%s", (needle), (hay));            \
  } while (0)

/* A path inside the test directory (caller frees). */
static char *tpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *tpath(const char *fmt, ...) {
  char name[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof(name), fmt, ap);
  va_end(ap);
  size_t n = strlen(sl_test_dir()) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", sl_test_dir(), name);
  return p;
}

static void write_fmt(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void write_fmt(const char *path, const char *fmt, ...) {
  char text[8192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  SL_ASSERT_TRUE(n > 0 && (size_t)n < sizeof(text));
  sl_test_write_file(path, text);
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ------------------------------------------------------------------ */
/* Input with known per-key results. */

#define N_FILES 3
#define N_LINES 3000
#define N_KEYS 50

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct expect_s {
  int64_t n[N_KEYS], total[N_KEYS], lo[N_KEYS], hi[N_KEYS];
} expect_t;

/* Write N_FILES CSV files (with a header) into <dir>/in and compute the
 * expected count, sum, min and max per key. */
static void write_input(expect_t *x) {
  memset(x, 0, sizeof(*x));
  char *dir = tpath("in");
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  for (int f = 0; f < N_FILES; f++) {
    char *path = tpath("in/part-%d.csv", f);
    FILE *fp = fopen(path, "w");
    SL_ASSERT_TRUE(fp != NULL);
    fputs("key,amount\n", fp);
    for (int i = 0; i < N_LINES; i++) {
      uint64_t h = mix(((uint64_t)f << 32) ^ (uint64_t)i ^ 0x5eed);
      int64_t key = (int64_t)(h % N_KEYS);
      int64_t amount = (int64_t)((h >> 20) % 2001) - 1000;
      fprintf(fp, "%lld,%lld\n", (long long)key, (long long)amount);
      if (x->n[key] == 0 || amount < x->lo[key]) x->lo[key] = amount;
      if (x->n[key] == 0 || amount > x->hi[key]) x->hi[key] = amount;
      x->n[key]++;
      x->total[key] += amount;
    }
    SL_ASSERT_EQ_INT(fclose(fp), 0);
    free(path);
  }
  free(dir);
}

/* The aggregate pipeline: file source -> keyed aggregate -> file sink. */
static char *write_agg_pipeline(const char *in, const char *out) {
  char *path = tpath("sums.yaml");
  write_fmt(path,
            "name: sums\n"
            "parallelism: 2\n"
            "source:\n"
            "  type: file\n"
            "  path: '%s'\n"
            "  format: csv\n"
            "  header: true\n"
            "  schema:\n"
            "    - {name: key, type: int64}\n"
            "    - {name: amount, type: int64}\n"
            "transforms:\n"
            "  - aggregate:\n"
            "      key: [key]\n"
            "      values:\n"
            "        n: count()\n"
            "        total: sum(amount)\n"
            "        lo: min(amount)\n"
            "        hi: max(amount)\n"
            "      emit: final\n"
            "sink:\n"
            "  type: file\n"
            "  path: '%s'\n"
            "  format: csv\n",
            in, out);
  return path;
}

/* Check the aggregate's output lines (from one or more files) against x:
 * every key exactly once. */
static void check_agg_output(const char *const *files, int n_files,
                             const expect_t *x) {
  bool seen[N_KEYS] = {false};
  int n_rows = 0;
  for (int f = 0; f < n_files; f++) {
    size_t len;
    char *text = sl_test_read_file(files[f], &len);
    if (text == NULL) SL_TEST_FAIL("no output file %s", files[f]);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
      long long k, n, total, lo, hi;
      char extra;
      if (sscanf(line, "%lld,%lld,%lld,%lld,%lld%c", &k, &n, &total, &lo, &hi,
                 &extra) != 5)
        SL_TEST_FAIL("%s: unexpected line '%s'", files[f], line);
      if (k < 0 || k >= N_KEYS || seen[k])
        SL_TEST_FAIL("%s: key %lld unexpected or repeated", files[f], k);
      seen[k] = true;
      n_rows++;
      if (n != x->n[k] || total != x->total[k] || lo != x->lo[k] ||
          hi != x->hi[k])
        SL_TEST_FAIL("key %lld: got n=%lld total=%lld lo=%lld hi=%lld, "
                     "expected n=%lld total=%lld lo=%lld hi=%lld",
                     k, n, total, lo, hi, (long long)x->n[k],
                     (long long)x->total[k], (long long)x->lo[k],
                     (long long)x->hi[k]);
    }
    free(text);
  }
  int n_want = 0;
  for (int k = 0; k < N_KEYS; k++) n_want += x->n[k] > 0;
  SL_ASSERT_EQ_INT(n_rows, n_want);
}

/* ------------------------------------------------------------------ */

SL_TEST(version_and_help) {
  cli_t c;
  const char *v[] = {"--version", NULL};
  ASSERT_EXIT(&c, v, 0);
  SL_ASSERT_EQ_STR(cli_stdout(&c), "sluice " SL_VERSION_STRING "\n");
  SL_ASSERT_EQ_STR(cli_stderr(&c), "");
  cli_free(&c);

  const char *h[] = {"--help", NULL};
  ASSERT_EXIT(&c, h, 0);
  SL_ASSERT_TRUE(strncmp(cli_stdout(&c), "usage: sluice run", 17) == 0);
  ASSERT_CONTAINS(cli_stdout(&c), "sluice validate");
  SL_ASSERT_EQ_STR(cli_stderr(&c), "");
  cli_free(&c);

  /* Without a command: usage on stderr, exit 2. */
  const char *none[] = {NULL};
  ASSERT_EXIT(&c, none, 2);
  SL_ASSERT_TRUE(strncmp(cli_stderr(&c), "usage: sluice run", 17) == 0);
  cli_free(&c);
}

SL_TEST(validate_valid_and_invalid_files) {
  char *in = tpath("in"), *out = tpath("out.csv");
  char *pl = write_agg_pipeline(in, out);
  cli_t c;
  const char *args[] = {"validate", pl, NULL};
  ASSERT_EXIT(&c, args, 0);
  char want[8192];
  snprintf(want, sizeof(want), "%s: valid\n", pl);
  SL_ASSERT_EQ_STR(cli_stdout(&c), want);
  SL_ASSERT_EQ_STR(cli_stderr(&c), "");
  cli_free(&c);
  /* Validating neither reads the input nor writes the output. */
  SL_ASSERT_TRUE(!file_exists(out));

  /* A misspelt field: exit 2 with the position of the key. */
  char *bad = tpath("bad.yaml");
  write_fmt(bad,
            "name: bad\n"
            "source:\n"
            "  type: generator\n"
            "  cuont: 10\n"
            "sink:\n"
            "  type: null\n");
  const char *bargs[] = {"validate", bad, NULL};
  ASSERT_EXIT(&c, bargs, 2);
  snprintf(want, sizeof(want), "sluice: %s:4:3: source.cuont: unknown field",
           bad);
  ASSERT_CONTAINS(cli_stderr(&c), want);
  SL_ASSERT_EQ_STR(cli_stdout(&c), "");
  cli_free(&c);
  free(bad);
  free(in);
  free(out);
  free(pl);
}

static void run_agg(const char *extra_flag, const char *extra_val) {
  expect_t x;
  write_input(&x);
  char *in = tpath("in"), *out = tpath("out.csv");
  char *pl = write_agg_pipeline(in, out);
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", extra_flag, extra_val, NULL};
  ASSERT_EXIT(&c, args, 0);
  SL_ASSERT_EQ_STR(cli_stderr(&c), "");
  const char *files[] = {out};
  check_agg_output(files, 1, &x);
  cli_free(&c);
  free(in);
  free(out);
  free(pl);
}

SL_TEST(run_aggregate_matches_independent_sums) { run_agg(NULL, NULL); }

SL_TEST(run_aggregate_parallelism_3_gives_same_result) {
  run_agg("--parallelism", "3");
}

SL_TEST(file_sink_parallelism_2_writes_one_file_per_subtask) {
  expect_t x;
  write_input(&x);
  char *in = tpath("in"), *out = tpath("out.csv");
  char *pl = write_agg_pipeline(in, out);
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", "--set", "sink.parallelism=2",
                        NULL};
  ASSERT_EXIT(&c, args, 0);
  char *o0 = tpath("out-0.csv"), *o1 = tpath("out-1.csv"),
       *o2 = tpath("out-2.csv");
  SL_ASSERT_TRUE(!file_exists(out));
  SL_ASSERT_TRUE(file_exists(o0));
  SL_ASSERT_TRUE(file_exists(o1));
  SL_ASSERT_TRUE(!file_exists(o2));
  const char *files[] = {o0, o1};
  check_agg_output(files, 2, &x);
  cli_free(&c);
  free(o0);
  free(o1);
  free(o2);
  free(in);
  free(out);
  free(pl);
}

/*
 * Issue 12: the stdout sink ignored `header` and `delimiter`.  At
 * parallelism 2 the header comes once, before every row, also when there
 * are no rows.
 */
SL_TEST(stdout_sink_header_and_delimiter) {
  char *pl = tpath("p.yaml");
  write_fmt(pl,
            "parallelism: 2\n"
            "source: {type: generator, count: 40, columns: [seq, key]}\n"
            "sink: {type: stdout, header: true, delimiter: ';'}\n");
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", NULL};
  ASSERT_EXIT(&c, args, 0);
  const char *out = cli_stdout(&c);
  SL_ASSERT_TRUE(strncmp(out, "seq;key\n", 8) == 0);
  SL_ASSERT_TRUE(strstr(out + 1, "seq;key") == NULL);
  SL_ASSERT_TRUE(strchr(out, ',') == NULL);
  int n_lines = 0;
  for (const char *p = out; (p = strchr(p, '\n')); p++) n_lines++;
  SL_ASSERT_EQ_INT(n_lines, 41);
  cli_free(&c);
  const char *args2[] = {"run", pl, "--quiet", "--set",
                         "transforms=[{filter: 'seq < 0'}]", NULL};
  ASSERT_EXIT(&c, args2, 0);
  SL_ASSERT_EQ_STR(cli_stdout(&c), "seq;key\n");
  cli_free(&c);
  free(pl);
}

SL_TEST(set_overrides_count_and_metrics_json) {
  char *pl = tpath("gen.yaml"), *mj = tpath("metrics.json");
  write_fmt(pl,
            "name: gen\n"
            "parallelism: 2\n"
            "source:\n"
            "  type: generator\n"
            "  uid: gen\n"
            "  count: 1000\n"
            "  keys: 7\n"
            "sink:\n"
            "  type: null\n"
            "  uid: drop\n");
  cli_t c;
  const char *args[] = {"run", pl, "--set", "source.count=10",
                        "--metrics-json", mj, "--progress-interval", "0",
                        NULL};
  ASSERT_EXIT(&c, args, 0);
  json_error_t je;
  json_t *root = json_load_file(mj, 0, &je);
  if (root == NULL) SL_TEST_FAIL("%s: %s (line %d)", mj, je.text, je.line);
  SL_ASSERT_EQ_STR(json_string_value(json_object_get(root, "job")), "gen");
  json_t *ops = json_object_get(root, "operators");
  SL_ASSERT_TRUE(json_is_array(ops));
  json_int_t src_out = 0, sink_in = 0;
  int n_src = 0;
  size_t i;
  json_t *op;
  json_array_foreach(ops, i, op) {
    const char *uid = json_string_value(json_object_get(op, "uid"));
    SL_ASSERT_TRUE(uid != NULL);
    if (strcmp(uid, "gen") == 0) {
      n_src++;
      src_out += json_integer_value(json_object_get(op, "records_out"));
    } else if (strcmp(uid, "drop") == 0) {
      sink_in += json_integer_value(json_object_get(op, "records_in"));
    }
  }
  SL_ASSERT_EQ_INT(n_src, 2); /* one entry per subtask */
  SL_ASSERT_EQ_INT(src_out, 10);
  SL_ASSERT_EQ_INT(sink_in, 10);
  json_decref(root);
  cli_free(&c);
  free(pl);
  free(mj);
}

SL_TEST(missing_input_file_exits_1) {
  char *in = tpath("missing.csv"), *out = tpath("out.csv");
  char *pl = write_agg_pipeline(in, out);
  cli_t c;
  const char *args[] = {"run", pl, "--progress-interval", "0", NULL};
  ASSERT_EXIT(&c, args, 1);
  char want[8192];
  snprintf(want, sizeof(want),
           "sluice: job 'sums' failed: source 'source': cannot open input "
           "'%s': No such file or directory\n",
           in);
  ASSERT_CONTAINS(cli_stderr(&c), want);
  SL_ASSERT_EQ_STR(cli_stdout(&c), "");
  cli_free(&c);
  free(in);
  free(out);
  free(pl);
}

/* ------------------------------------------------------------------ */
/* Event-time windows: a CSV of (key, ts, v) with bounded disorder and a
 * few rows far behind, a tumbling window of 1 s with per-record
 * watermarks, and the results and late rows computed here by replaying
 * the watermark over the same rows. */

#define W_ROWS 6000
#define W_KEYS 7
#define W_MAXW 16
#define W_SIZE 1000000                    /* 1s */
#define W_BOUND 50000                     /* max_out_of_orderness: 50ms */
#define W_T0 INT64_C(1767225600000000)    /* 2026-01-01T00:00:00Z */

typedef struct wexpect_s {
  int64_t n[W_KEYS][W_MAXW], total[W_KEYS][W_MAXW], hi[W_KEYS][W_MAXW];
  int64_t max_ts[W_KEYS][W_MAXW];
  int64_t late_key[W_ROWS], late_ts[W_ROWS], late_v[W_ROWS];
  int n_late;
  int n_disordered; /* on-time rows behind the largest event time */
} wexpect_t;

/* Timestamps in the text form of docs/formats.md, via gmtime_r. */
static void fmt_ts(int64_t us, char *buf, size_t size) {
  time_t secs = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char day[32];
  strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, size, "%s.%06lldZ", day, (long long)(us % 1000000));
}

/* Write <dir>/events.csv and compute what the window must produce. */
static char *write_window_input(wexpect_t *x) {
  memset(x, 0, sizeof(*x));
  char *path = tpath("events.csv");
  FILE *fp = fopen(path, "w");
  SL_ASSERT_TRUE(fp != NULL);
  bool seen = false;
  int64_t max_seen = 0;
  for (int i = 0; i < W_ROWS; i++) {
    uint64_t h = mix((uint64_t)i ^ 0x77696e64ull);
    int64_t key = (int64_t)(h % W_KEYS);
    int64_t v = (int64_t)((h >> 16) % 1001) - 500;
    /* One row per ms, up to 40 ms early (within the 50 ms bound); every
     * 397th row after the first 2.5 s is 1.5 to 1.8 s behind. */
    int64_t ts = W_T0 + W_SIZE + (int64_t)i * 1000 -
                 (int64_t)((h >> 32) % 40000);
    if (i >= 2500 && i % 397 == 396)
      ts = W_T0 + W_SIZE + (int64_t)i * 1000 - 1500000 -
           (int64_t)((h >> 40) % 300000);
    fprintf(fp, "%lld,%lld,%lld\n", (long long)key, (long long)ts,
            (long long)v);
    /* The bounded watermark after the rows so far (sl_time.h); a row is
     * late once its window's last microsecond is at or behind it. */
    int64_t start = ts - (ts - W_T0) % W_SIZE;
    if (seen && start + W_SIZE - 1 <= max_seen - W_BOUND - 1) {
      x->late_key[x->n_late] = key;
      x->late_ts[x->n_late] = ts;
      x->late_v[x->n_late] = v;
      x->n_late++;
    } else {
      int w = (int)((start - W_T0) / W_SIZE);
      SL_ASSERT_TRUE(w >= 0 && w < W_MAXW);
      if (seen && ts < max_seen) x->n_disordered++;
      if (x->n[key][w] == 0 || v > x->hi[key][w]) x->hi[key][w] = v;
      if (x->n[key][w] == 0 || ts > x->max_ts[key][w]) x->max_ts[key][w] = ts;
      x->n[key][w]++;
      x->total[key][w] += v;
    }
    if (!seen || ts > max_seen) max_seen = ts;
    seen = true;
  }
  SL_ASSERT_EQ_INT(fclose(fp), 0);
  /* The input exercises both paths. */
  SL_ASSERT_TRUE(x->n_late >= 5);
  SL_ASSERT_TRUE(x->n_disordered > W_ROWS / 2);
  return path;
}

static void check_window_output(const char *out, const wexpect_t *x) {
  size_t len;
  char *text = sl_test_read_file(out, &len);
  if (text == NULL) SL_TEST_FAIL("no output file %s", out);
  static bool seen[W_KEYS][W_MAXW];
  memset(seen, 0, sizeof(seen));
  int n_rows = 0;
  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  SL_ASSERT_EQ_STR(line, "key,window_start,window_end,event_time,n,total,hi");
  while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
    long long k, n, total, hi;
    char start[64], end[64], evt[64], extra;
    if (sscanf(line, "%lld,%63[^,],%63[^,],%63[^,],%lld,%lld,%lld%c", &k,
               start, end, evt, &n, &total, &hi, &extra) != 7)
      SL_TEST_FAIL("%s: unexpected line '%s'", out, line);
    /* Find the window by its start. */
    int w = -1;
    for (int i = 0; i < W_MAXW && w < 0; i++) {
      char want[64];
      fmt_ts(W_T0 + (int64_t)i * W_SIZE, want, sizeof(want));
      if (strcmp(want, start) == 0) w = i;
    }
    if (k < 0 || k >= W_KEYS || w < 0 || x->n[k][w] == 0 || seen[k][w])
      SL_TEST_FAIL("%s: row '%s' unexpected or repeated", out, line);
    seen[k][w] = true;
    n_rows++;
    char want_end[64], want_evt[64];
    fmt_ts(W_T0 + (int64_t)(w + 1) * W_SIZE, want_end, sizeof(want_end));
    fmt_ts(x->max_ts[k][w], want_evt, sizeof(want_evt));
    if (strcmp(end, want_end) != 0 || strcmp(evt, want_evt) != 0 ||
        n != x->n[k][w] || total != x->total[k][w] || hi != x->hi[k][w])
      SL_TEST_FAIL("%s: got '%s'; expected end %s event_time %s n=%lld "
                   "total=%lld hi=%lld",
                   out, line, want_end, want_evt, (long long)x->n[k][w],
                   (long long)x->total[k][w], (long long)x->hi[k][w]);
  }
  int n_want = 0;
  for (int k = 0; k < W_KEYS; k++)
    for (int w = 0; w < W_MAXW; w++) n_want += x->n[k][w] > 0;
  SL_ASSERT_EQ_INT(n_rows, n_want);
  free(text);
}

/* The late rows, in any order (two window subtasks feed the sink). */
static void check_late_output(const char *late, const wexpect_t *x) {
  size_t len;
  char *text = sl_test_read_file(late, &len);
  if (text == NULL) SL_TEST_FAIL("no late-rows file %s", late);
  bool matched[W_ROWS] = {false};
  int n_rows = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    int hit = -1;
    for (int i = 0; i < x->n_late && hit < 0; i++) {
      char want[128], ts[64];
      fmt_ts(x->late_ts[i], ts, sizeof(ts));
      snprintf(want, sizeof(want), "%lld,%s,%lld", (long long)x->late_key[i],
               ts, (long long)x->late_v[i]);
      if (!matched[i] && strcmp(want, line) == 0) hit = i;
    }
    if (hit < 0) SL_TEST_FAIL("%s: unexpected late row '%s'", late, line);
    matched[hit] = true;
    n_rows++;
  }
  SL_ASSERT_EQ_INT(n_rows, x->n_late);
  free(text);
}

SL_TEST(run_tumbling_window_matches_independent_results) {
  wexpect_t *x = calloc(1, sizeof(*x));
  char *in = write_window_input(x);
  char *out = tpath("windows.csv"), *late = tpath("late.csv");
  char *pl = tpath("windows.yaml");
  write_fmt(pl,
            "name: windows\n"
            "parallelism: 2\n"
            "source:\n"
            "  type: file\n"
            "  parallelism: 1\n"
            "  path: '%s'\n"
            "  schema:\n"
            "    - {name: key, type: int64}\n"
            "    - {name: ts, type: timestamp}\n"
            "    - {name: v, type: int64}\n"
            "  watermarks:\n"
            "    time_field: ts\n"
            "    max_out_of_orderness: 50ms\n"
            "    per_record: true\n"
            "transforms:\n"
            "  - window:\n"
            "      type: tumbling\n"
            "      time_field: ts\n"
            "      size: 1s\n"
            "      key: [key]\n"
            "      values:\n"
            "        n: count()\n"
            "        total: sum(v)\n"
            "        hi: max(v)\n"
            "      late_sink:\n"
            "        type: file\n"
            "        path: '%s'\n"
            "    uid: per-second\n"
            "sink:\n"
            "  type: file\n"
            "  path: '%s'\n"
            "  header: true\n",
            in, late, out);
  cli_t c;
  const char *vargs[] = {"validate", pl, NULL};
  ASSERT_EXIT(&c, vargs, 0);
  cli_free(&c);
  const char *args[] = {"run", pl, "--quiet", NULL};
  ASSERT_EXIT(&c, args, 0);
  SL_ASSERT_EQ_STR(cli_stderr(&c), "");
  check_window_output(out, x);
  check_late_output(late, x);
  cli_free(&c);
  free(x);
  free(in);
  free(out);
  free(late);
  free(pl);
}

/* Like cli_finish, but SIGKILL sluice and fail the test if it has not
 * ended within limit_s seconds (a hang is the failure being tested). */
static void cli_finish_within(cli_t *c, int limit_s) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct pollfd pf[2];
    int n = 0, idx[2];
    for (int i = 0; i < 2; i++)
      if (c->fd[i] >= 0) {
        pf[n].fd = c->fd[i];
        pf[n].events = POLLIN;
        idx[n++] = i;
      }
    if (n == 0) break;
    int r = poll(pf, (nfds_t)n, 200);
    for (int k = 0; r > 0 && k < n; k++) {
      if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char chunk[4096];
      ssize_t got = read(pf[k].fd, chunk, sizeof(chunk));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(c->fd[idx[k]]);
        c->fd[idx[k]] = -1;
      } else {
        buf_add(&c->out[idx[k]], chunk, (size_t)got);
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec >= limit_s) {
      kill(c->pid, SIGKILL);
      cli_finish(c);
      SL_TEST_FAIL("sluice did not end within %d s; stderr:\n%s", limit_s,
                   cli_stderr(c));
    }
  }
  cli_finish(c);
}

/* Start an unbounded run, wait for its "running" line, send sig (after
 * pre_sig, when not 0). */
static void signal_run_after(int pre_sig, int sig, int want_code,
                             const char *name) {
  char *pl = tpath("forever.yaml");
  write_fmt(pl,
            "name: forever\n"
            "parallelism: 2\n"
            "source:\n"
            "  type: generator\n"
            "  keys: 100\n"
            "transforms:\n"
            "  - filter: amount > 0\n"
            "sink:\n"
            "  type: null\n");
  cli_t c;
  const char *args[] = {"run", pl, "--progress-interval", "0", NULL};
  cli_start(&c, args);
  /* The latch: the CLI prints this line after it has blocked the signals
   * for its signal thread, just before it runs the job. */
  const char *latch = "sluice: running 'forever' (unbounded";
  for (;;) {
    const char *e = c.out[1].p;
    const char *hit = e ? strstr(e, latch) : NULL;
    if (hit && strchr(hit, '\n')) break;
    if (!cli_pump(&c)) {
      cli_finish(&c);
      SL_TEST_FAIL("sluice ended before it was running; stderr:\n%s",
                   cli_stderr(&c));
    }
  }
  if (pre_sig) SL_ASSERT_EQ_INT(kill(c.pid, pre_sig), 0);
  SL_ASSERT_EQ_INT(kill(c.pid, sig), 0);
  cli_finish_within(&c, 60);
  if (!WIFEXITED(c.status))
    SL_TEST_FAIL("sluice was killed (status 0x%x); stderr:\n%s", c.status,
                 cli_stderr(&c));
  if (WEXITSTATUS(c.status) != want_code)
    SL_TEST_FAIL("exit code %d, expected %d; stderr:\n%s",
                 WEXITSTATUS(c.status), want_code, cli_stderr(&c));
  char want[256];
  snprintf(want, sizeof(want), "sluice: received %s, cancelling the job\n",
           name);
  ASSERT_CONTAINS(cli_stderr(&c), want);
  snprintf(want, sizeof(want), "sluice: job 'forever' cancelled by %s", name);
  ASSERT_CONTAINS(cli_stderr(&c), want);
  cli_free(&c);
  free(pl);
}

static void signal_run(int sig, int want_code, const char *name) {
  signal_run_after(0, sig, want_code, name);
}

SL_TEST(sigterm_cancels_an_unbounded_run) {
  signal_run(SIGTERM, 143, "SIGTERM");
}

/* A SIGUSR1 from outside is ignored: the signal thread goes on, and the
 * SIGTERM after it still cancels the job.  SIGUSR1 is sent first and, if
 * both are pending when the thread wakes, Linux hands sigwait the lower
 * number (SIGUSR1) first, so the thread always sees SIGUSR1 before SIGTERM.
 * Before the fix the thread ended at SIGUSR1 and sluice hung. */
SL_TEST(external_sigusr1_then_sigterm_cancels) {
  signal_run_after(SIGUSR1, SIGTERM, 143, "SIGTERM");
}

SL_TEST(sigint_cancels_an_unbounded_run) { signal_run(SIGINT, 130, "SIGINT"); }

/* ------------------------------------------------------------------ */
/* Checks before the job runs, and what validate and --resume do with the
 * file system. */

/* A metrics path that cannot be written is reported before the job runs
 * (exit 2), not after a whole run (it used to be exit 1 at the end). */
SL_TEST(metrics_json_into_a_missing_directory_fails_before_the_run) {
  char *pl = tpath("m.yaml"), *out = tpath("out.csv");
  char *mj = tpath("no-such-dir/metrics.json");
  write_fmt(pl, "source: {type: generator, count: 10}\n"
                "sink: {type: file, path: '%s'}\n", out);
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", "--metrics-json", mj, NULL};
  ASSERT_EXIT(&c, args, 2);
  char want[8192];
  snprintf(want, sizeof(want), "sluice: --metrics-json: cannot open '%s' for "
           "writing: No such file or directory\n", mj);
  SL_ASSERT_EQ_STR(cli_stderr(&c), want);
  SL_ASSERT_TRUE(!file_exists(out)); /* the job never ran */
  cli_free(&c);
  free(pl);
  free(out);
  free(mj);
}

SL_TEST(validate_creates_no_checkpoint_directory) {
  char *pl = tpath("v.yaml"), *ck = tpath("ckpt");
  write_fmt(pl, "name: v\ncheckpoint: {dir: '%s', interval_ms: 100}\n"
                "source: {type: generator, count: 10}\n"
                "sink: {type: \"null\"}\n", ck);
  cli_t c;
  const char *args[] = {"validate", pl, NULL};
  ASSERT_EXIT(&c, args, 0);
  SL_ASSERT_TRUE(!file_exists(ck));
  cli_free(&c);
  free(pl);
  free(ck);
}

static char *write_resume_pipeline(const char *ck) {
  char *pl = tpath("r.yaml");
  write_fmt(pl, "name: r\ncheckpoint: {dir: '%s', interval_ms: 100}\n"
                "source: {type: generator, count: 100, keys: 5}\n"
                "sink: {type: \"null\"}\n", ck);
  return pl;
}

/* --resume with checkpoint directories none of which completed (a kill
 * before the first completed, or _metadata deleted) starts from the
 * beginning and says so at warning level; with none at all, at info. */
SL_TEST(resume_without_a_completed_checkpoint_warns) {
  char *ck = tpath("ckpt");
  char *pl = write_resume_pipeline(ck);
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", "--resume", NULL};
  ASSERT_EXIT(&c, args, 0);
  char want[8192];
  snprintf(want, sizeof(want), "sluice: info: no checkpoint to resume from in "
           "'%s/r'; the job starts from the beginning\n", ck);
  ASSERT_CONTAINS(cli_stderr(&c), want);
  cli_free(&c);
  /* Two checkpoint directories without _metadata. */
  char *d1 = tpath("ckpt/r/chk-1000"), *d2 = tpath("ckpt/r/chk-1001");
  SL_ASSERT_EQ_INT(mkdir(d1, 0755), 0);
  SL_ASSERT_EQ_INT(mkdir(d2, 0755), 0);
  ASSERT_EXIT(&c, args, 0);
  snprintf(want, sizeof(want), "sluice: warning: no completed checkpoint to "
           "resume from in '%s/r' (2 chk-* directories, none with a "
           "_metadata file); the job starts from the beginning\n", ck);
  ASSERT_CONTAINS(cli_stderr(&c), want);
  cli_free(&c);
  free(d1);
  free(d2);
  free(ck);
  free(pl);
}

/* A FIFO in place of _metadata used to block --resume forever. */
SL_TEST(resume_with_a_fifo_as_metadata_fails) {
  char *ck = tpath("ckpt");
  char *pl = write_resume_pipeline(ck);
  char *jd = tpath("ckpt/r"), *d = tpath("ckpt/r/chk-7");
  char *meta = tpath("ckpt/r/chk-7/_metadata");
  SL_ASSERT_EQ_INT(mkdir(ck, 0755), 0);
  SL_ASSERT_EQ_INT(mkdir(jd, 0755), 0);
  SL_ASSERT_EQ_INT(mkdir(d, 0755), 0);
  SL_ASSERT_EQ_INT(mkfifo(meta, 0644), 0);
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", "--resume", NULL};
  cli_start(&c, args);
  cli_finish_within(&c, 60);
  SL_ASSERT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 1);
  char want[8192];
  snprintf(want, sizeof(want), "sluice: warning: skipping checkpoint 7: "
           "checkpoint metadata '%s' is not a regular file\n"
           "sluice: job 'r' failed: no usable checkpoint in '%s': every "
           "completed checkpoint is missing files or corrupt\n", meta, jd);
  SL_ASSERT_EQ_STR(cli_stderr(&c), want);
  cli_free(&c);
  free(ck);
  free(pl);
  free(jd);
  free(d);
  free(meta);
}

/* Checkpoint interval and timeout at their maximum (SL_MAX_DURATION_MS):
 * a generator paced at 1000 records/s runs for at least half a second.
 * With the interval at the maximum no checkpoint is triggered (the old
 * maximum overflowed and triggered one at every tick); with a 10 ms
 * interval and the timeout at the maximum, checkpoints complete (the old
 * maximum made every one expire at once). */
static json_t *run_paced(const char *interval, const char *timeout) {
  char *pl = tpath("paced.yaml"), *ck = tpath("ckpt"), *mj = tpath("m.json");
  write_fmt(pl, "name: paced\n"
                "checkpoint: {dir: '%s', interval_ms: %s, timeout_ms: %s}\n"
                "source: {type: generator, count: 500, rate: 1000, keys: 5}\n"
                "transforms:\n"
                "  - aggregate: {key: [key], values: {n: count()}}\n"
                "sink: {type: \"null\"}\n", ck, interval, timeout);
  cli_t c;
  const char *args[] = {"run", pl, "--quiet", "--metrics-json", mj, NULL};
  ASSERT_EXIT(&c, args, 0);
  json_error_t je;
  json_t *root = json_load_file(mj, 0, &je);
  if (root == NULL) SL_TEST_FAIL("%s: %s", mj, je.text);
  cli_free(&c);
  free(pl);
  free(ck);
  free(mj);
  return root;
}

SL_TEST(checkpoint_interval_at_the_maximum_triggers_nothing) {
  json_t *root = run_paced("31536000000", "600000");
  json_t *cks = json_object_get(root, "checkpoints");
  SL_ASSERT_TRUE(json_is_array(cks));
  SL_ASSERT_EQ_INT(json_array_size(cks), 0);
  json_decref(root);
}

SL_TEST(checkpoint_timeout_at_the_maximum_lets_checkpoints_complete) {
  json_t *root = run_paced("10", "31536000000");
  json_t *cks = json_object_get(root, "checkpoints");
  SL_ASSERT_TRUE(json_is_array(cks));
  size_t i, n_ok = 0;
  json_t *ck;
  json_array_foreach(cks, i, ck) {
    const char *res = json_string_value(json_object_get(ck, "result"));
    SL_ASSERT_TRUE(res != NULL);
    if (strcmp(res, "SL_OK") == 0) n_ok++;
    else if (strcmp(res, "SL_ECANCELED") != 0) /* the input ended */
      SL_TEST_FAIL("checkpoint %lld: %s", (long long)json_integer_value(
                       json_object_get(ck, "id")), res);
  }
  SL_ASSERT_TRUE(n_ok > 0);
  json_decref(root);
}

/* ------------------------------------------------------------------ */
/* A monitored directory (source.monitor_interval). */

/* Pump until stdout contains want; fails if sluice ends first. */
static void wait_stdout(cli_t *c, const char *want) {
  while (c->out[0].p == NULL || strstr(c->out[0].p, want) == NULL)
    if (!cli_pump(c)) {
      cli_finish(c);
      SL_TEST_FAIL("sluice ended before printing '%s'; stderr:\n%s", want,
                   cli_stderr(c));
    }
}

/* The run is unbounded and reads a file renamed into the directory while
 * it runs; each row once. */
SL_TEST(file_source_monitors_a_directory) {
  char *dir = tpath("in");
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  char *a = tpath("in/a.csv"), *tmp = tpath("b.tmp"), *b = tpath("in/b.csv");
  write_fmt(a, "1,10\n2,20\n");
  char *pl = tpath("mon.yaml");
  write_fmt(pl,
            "name: mon\n"
            "source:\n"
            "  type: file\n"
            "  path: %s\n"
            "  monitor_interval: 5ms\n"
            "  schema: [{name: k, type: int64}, {name: v, type: int64}]\n"
            "sink: {type: stdout}\n", dir);
  cli_t c;
  const char *args[] = {"run", pl, "--progress-interval", "0", NULL};
  cli_start(&c, args);
  wait_stdout(&c, "2,20\n");
  write_fmt(tmp, "3,30\n");
  SL_ASSERT_EQ_INT(rename(tmp, b), 0);
  wait_stdout(&c, "3,30\n");
  SL_ASSERT_EQ_INT(kill(c.pid, SIGINT), 0);
  cli_finish_within(&c, 60);
  SL_ASSERT_TRUE(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 130);
  SL_ASSERT_EQ_STR(c.out[0].p, "1,10\n2,20\n3,30\n");
  ASSERT_CONTAINS(cli_stderr(&c), "sluice: running 'mon' (unbounded");
  cli_free(&c);
  free(dir);
  free(a);
  free(tmp);
  free(b);
  free(pl);
}
