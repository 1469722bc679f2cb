/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fork-based benchmark runner: starts one child per fork (running the
 * user's callbacks, or exec'ing an external command), collects one number
 * per iteration through a pipe, classifies how each child ended, and turns
 * the per-fork means into a summary, an A/B ratio and a JSON file.  The
 * interface is harness.h; the method and the JSON format are described in
 * bench/README.md.
 *
 * The wire format from child to parent is text, one value per line
 * ("%.17g\n", which round-trips a double exactly), so that callback
 * children and external commands share one reader.  Lines starting with
 * "#!" carry an error message from a callback child; other lines starting
 * with '#' and blank lines are ignored.
 *
 * Memory comes from malloc rather than sl_malloc, as in stats.c: the
 * harness does not link the engine it measures.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int64_t sl_bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sl_bench_opts_init(sl_bench_opts_t *opts) {
  memset(opts, 0, sizeof(*opts));
  opts->name = "bench";
  opts->unit = "ops/s";
  opts->larger_is_better = true;
  opts->n_forks = 10;
  opts->n_warmup = 5;
  opts->n_iterations = 10;
  opts->seed = 1;
  opts->confidence = 0.95;
  opts->n_resamples = 10000;
  sl_bench_stability_init(&opts->stability);
}

static int check_opts(const sl_bench_opts_t *o) {
  if (o->n_forks < 1 || o->n_forks > 100000) return SL_EINVAL;
  if (o->n_warmup < 0 || o->n_iterations < 1) return SL_EINVAL;
  if ((int64_t)o->n_warmup + o->n_iterations > 100000000) return SL_EINVAL;
  if (!(o->confidence > 0.0 && o->confidence < 1.0)) return SL_EINVAL;
  if (o->n_resamples < 100) return SL_EINVAL;
  if (!(o->fork_timeout_sec >= 0.0)) return SL_EINVAL;
  return SL_OK;
}

static int check_fn(const sl_bench_fn_t *fn) {
  if (fn == NULL) return SL_EINVAL;
  if (fn->argv != NULL) return fn->argv[0] != NULL ? SL_OK : SL_EINVAL;
  return fn->iter != NULL ? SL_OK : SL_EINVAL;
}

static char *dup_str(const char *s) {
  if (s == NULL) return NULL;
  size_t len = strlen(s) + 1;
  char *d = malloc(len);
  if (d) memcpy(d, s, len);
  return d;
}

/* Seed of fork i: both sides of an A/B pair get the same one. */
static uint64_t fork_seed(uint64_t seed, int i) {
  uint64_t st = seed ^ (0x632be59bd9b4e019ull * (uint64_t)(i + 1));
  return sl_bench_splitmix64(&st);
}

/* ------------------------------------------------------------------ */
/* Child side.                                                          */
/* ------------------------------------------------------------------ */

/* write(2) until done; async-signal-safe. */
static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Send a "#!" message to the parent (best effort) and exit. */
static void child_fail(int fd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void child_fail(int fd, int code, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(msg + 2, sizeof(msg) - 3, fmt, ap);
  va_end(ap);
  if (len < 0) len = 0;
  if ((size_t)len > sizeof(msg) - 4) len = (int)(sizeof(msg) - 4);
  msg[0] = '#';
  msg[1] = '!';
  msg[2 + len] = '\n';
  (void)write_all(fd, msg, (size_t)len + 3);
  fflush(NULL);
  _exit(code);
}

/* Runs in the child: setup, W + I iterations, teardown, _exit. */
static void child_run_callbacks(const sl_bench_opts_t *o,
                                const sl_bench_fn_t *fn, int fork_index,
                                uint64_t seed, int fd)
    __attribute__((noreturn));
static void child_run_callbacks(const sl_bench_opts_t *o,
                                const sl_bench_fn_t *fn, int fork_index,
                                uint64_t seed, int fd) {
  sl_bench_ctx_t ctx = {.fork = fork_index, .seed = seed};
  if (fn->setup) {
    int rc = fn->setup(fn->arg, &ctx);
    if (rc != 0)
      child_fail(fd, SL_BENCH_EXIT_SETUP, "setup returned %d", rc);
  }
  int total = o->n_warmup + o->n_iterations;
  for (int i = 0; i < total; i++) {
    ctx.iteration = i;
    ctx.is_warmup = i < o->n_warmup;
    double v = NAN;
    int rc = fn->iter(fn->arg, &ctx, &v);
    if (rc != 0)
      child_fail(fd, SL_BENCH_EXIT_ITER, "iteration %d returned %d", i, rc);
    if (!isfinite(v))
      child_fail(fd, SL_BENCH_EXIT_ITER,
                 "iteration %d produced a non-finite value", i);
    char line[64];
    int len = snprintf(line, sizeof(line), "%.17g\n", v);
    if (write_all(fd, line, (size_t)len) != 0) {
      fflush(NULL);
      _exit(SL_BENCH_EXIT_WRITE);
    }
  }
  if (fn->teardown) fn->teardown(fn->arg, &ctx);
  fflush(NULL);
  _exit(0);
}

/* ------------------------------------------------------------------ */
/* External commands: what the parent prepares before fork, so that the  */
/* child only calls dup2, execve and _exit.                               */
/* ------------------------------------------------------------------ */

typedef struct exec_plan_s {
  char *path;   /* resolved program, NULL if not found */
  char **envp;  /* environ without SL_BENCH_*, plus ours */
  char *ours;   /* storage of our variables */
} exec_plan_t;

static void exec_plan_free(exec_plan_t *p) {
  free(p->path);
  free(p->envp);
  free(p->ours);
}

static char *resolve_program(const char *prog) {
  if (strchr(prog, '/') != NULL) return dup_str(prog);
  const char *path = getenv("PATH");
  if (path == NULL || *path == '\0') path = "/usr/local/bin:/usr/bin:/bin";
  size_t plen = strlen(prog);
  while (*path) {
    const char *end = strchr(path, ':');
    size_t dlen = end ? (size_t)(end - path) : strlen(path);
    char *cand = malloc(dlen + plen + 3);
    if (cand == NULL) return NULL;
    if (dlen == 0)
      memcpy(cand, ".", 2);
    else {
      memcpy(cand, path, dlen);
      cand[dlen] = '\0';
    }
    size_t clen = strlen(cand);
    cand[clen] = '/';
    memcpy(cand + clen + 1, prog, plen + 1);
    if (access(cand, X_OK) == 0) return cand;
    free(cand);
    if (end == NULL) break;
    path = end + 1;
  }
  return NULL;
}

static int exec_plan_init(exec_plan_t *p, const sl_bench_opts_t *o,
                          const sl_bench_fn_t *fn, int fork_index,
                          uint64_t seed) {
  memset(p, 0, sizeof(*p));
  p->path = resolve_program(fn->argv[0]);
  size_t n_env = 0;
  for (char **e = environ; e && *e; e++) n_env++;
  const size_t n_ours = 5;
  size_t ours_size = 512 + strlen(o->name);
  p->envp = malloc((n_env + n_ours + 1) * sizeof(char *));
  p->ours = malloc(ours_size);
  if (p->envp == NULL || p->ours == NULL) {
    exec_plan_free(p);
    return SL_ENOMEM;
  }
  size_t k = 0;
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, "SL_BENCH_", 9) != 0) p->envp[k++] = *e;
  char *w = p->ours;
  size_t left = ours_size;
  int len;
#define ADD_VAR(...)                              \
  do {                                            \
    len = snprintf(w, left, __VA_ARGS__);         \
    p->envp[k++] = w;                             \
    w += len + 1;                                 \
    left -= (size_t)len + 1;                      \
  } while (0)
  ADD_VAR("SL_BENCH_FORK=%d", fork_index);
  ADD_VAR("SL_BENCH_SEED=%" PRIu64, seed);
  ADD_VAR("SL_BENCH_WARMUP=%d", o->n_warmup);
  ADD_VAR("SL_BENCH_ITERATIONS=%d", o->n_iterations);
  ADD_VAR("SL_BENCH_NAME=%s", o->name);
#undef ADD_VAR
  p->envp[k] = NULL;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Parent side: reading the pipe.                                       */
/* ------------------------------------------------------------------ */

typedef struct reader_s {
  sl_bench_fork_t *fk;
  size_t cap;          /* expected number of values */
  size_t n_extra;      /* values beyond cap */
  size_t line_no;
  char line[512];
  size_t len;
  bool is_overlong;
  char parse_error[160];
  char child_msg[160]; /* from a "#!" line */
} reader_t;

static void reader_line(reader_t *r) {
  r->line_no++;
  char *s = r->line;
  s[r->len] = '\0';
  if (r->is_overlong) {
    if (r->parse_error[0] == '\0')
      snprintf(r->parse_error, sizeof(r->parse_error),
               "output line %zu is too long", r->line_no);
    return;
  }
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  if (*s == '\0') return;
  if (s[0] == '#') {
    if (s[1] == '!' && r->child_msg[0] == '\0') {
      size_t n = strcspn(s + 2, "\r");
      if (n >= sizeof(r->child_msg)) n = sizeof(r->child_msg) - 1;
      memcpy(r->child_msg, s + 2, n);
      r->child_msg[n] = '\0';
    }
    return;
  }
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  while (*end == ' ' || *end == '\t' || *end == '\r') end++;
  if (end == s || *end != '\0') {
    if (r->parse_error[0] == '\0')
      snprintf(r->parse_error, sizeof(r->parse_error),
               "output line %zu is not a number: '%.40s'", r->line_no, s);
    return;
  }
  if (!isfinite(v)) {
    if (r->parse_error[0] == '\0')
      snprintf(r->parse_error, sizeof(r->parse_error),
               "output line %zu is not finite: '%.40s'", r->line_no, s);
    return;
  }
  if (r->fk->n_values < r->cap)
    r->fk->values[r->fk->n_values++] = v;
  else
    r->n_extra++;
}

static void reader_feed(reader_t *r, const char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (buf[i] == '\n') {
      reader_line(r);
      r->len = 0;
      r->is_overlong = false;
    } else if (r->len < sizeof(r->line) - 1) {
      r->line[r->len++] = buf[i];
    } else {
      r->is_overlong = true;
    }
  }
}

static void set_error(sl_bench_fork_t *fk, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_error(sl_bench_fork_t *fk, const char *fmt, ...) {
  if (fk->error[0] != '\0') return; /* keep the first, most direct cause */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fk->error, sizeof(fk->error), fmt, ap);
  va_end(ap);
}

/*
 * Read the child's output until EOF, or until the child has exited and
 * the pipe is drained (a grandchild, such as a daemon started by an
 * external command, may hold the write end open forever), or until the
 * deadline (0: none).  Returns false on timeout.  Sets *out_is_reaped and
 * *out_status when the child was reaped here.
 */
static bool read_child(int fd, reader_t *r, int64_t deadline_ns, pid_t pid,
                       bool *out_is_reaped, int *out_status) {
  char buf[4096];
  bool is_exited = false;
  for (;;) {
    int timeout_ms = is_exited ? 0 : 200;
    if (deadline_ns > 0 && !is_exited) {
      int64_t left = deadline_ns - sl_bench_now_ns();
      if (left <= 0) return false;
      if (left < 200 * 1000000LL) timeout_ms = (int)((left + 999999) / 1000000);
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break; /* treat as EOF; the exit status tells the rest */
    }
    if (pr == 0) {
      if (is_exited) break; /* exited and drained */
      pid_t w = waitpid(pid, out_status, WNOHANG);
      if (w == pid) {
        *out_is_reaped = true;
        is_exited = true; /* drain what is left, then stop */
      }
      continue;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (n == 0) break;
    reader_feed(r, buf, (size_t)n);
  }
  if (r->len > 0) reader_line(r); /* last line without '\n' */
  return true;
}

static void describe_exit(sl_bench_fork_t *fk, bool is_cmd,
                          const char *child_msg) {
  const char *sep = child_msg[0] ? ": " : "";
  if (is_cmd && fk->exit_code == SL_BENCH_EXIT_EXEC) {
    set_error(fk, "command could not be executed (exit status 127)");
    return;
  }
  if (!is_cmd) {
    switch (fk->exit_code) {
    case SL_BENCH_EXIT_SETUP:
      set_error(fk, "setup failed%s%s", sep, child_msg);
      return;
    case SL_BENCH_EXIT_ITER:
      set_error(fk, "iteration failed%s%s", sep, child_msg);
      return;
    case SL_BENCH_EXIT_WRITE:
      set_error(fk, "child could not write its results");
      return;
    default:
      break;
    }
  }
  set_error(fk, "exited with status %d%s%s", fk->exit_code, sep, child_msg);
}

/*
 * Run one fork to completion and fill fk.  A child that fails is recorded
 * in fk (is_ok false, error set); only failures of the parent itself
 * (pipe, fork, memory) are returned as errors.
 */
static int run_fork(const sl_bench_opts_t *o, const sl_bench_fn_t *fn,
                    int fork_index, int seq, sl_bench_fork_t *fk) {
  size_t expect = (size_t)o->n_warmup + (size_t)o->n_iterations;
  uint64_t seed = fork_seed(o->seed, fork_index);
  bool is_cmd = fn->argv != NULL;
  exec_plan_t plan = {0};
  int fds[2] = {-1, -1};
  int rc;

  fk->index = fork_index;
  fk->seq = seq;
  fk->mean = fk->stddev = fk->r1 = NAN;
  fk->values = malloc(expect * sizeof(double));
  if (fk->values == NULL) return SL_ENOMEM;

  if (is_cmd) {
    rc = exec_plan_init(&plan, o, fn, fork_index, seed);
    if (rc != SL_OK) return rc;
    if (plan.path == NULL) {
      fk->exit_code = SL_BENCH_EXIT_EXEC;
      set_error(fk, "command not found: %s", fn->argv[0]);
      exec_plan_free(&plan);
      return SL_OK;
    }
  }
  if (pipe(fds) != 0) {
    rc = -errno;
    goto fail;
  }
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);

  /* Unflushed stdio buffers would otherwise be written twice. */
  fflush(NULL);
  int64_t start = sl_bench_now_ns();
  pid_t pid = fork();
  if (pid < 0) {
    rc = -errno;
    goto fail;
  }
  if (pid == 0) {
    close(fds[0]);
    if (is_cmd) {
      /* dup2 clears FD_CLOEXEC on the new descriptor. */
      if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(SL_BENCH_EXIT_EXEC);
      execve(plan.path, fn->argv, plan.envp);
      static const char msg[] = "sl_bench: execve failed\n";
      (void)write_all(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(SL_BENCH_EXIT_EXEC);
    }
    child_run_callbacks(o, fn, fork_index, seed, fds[1]);
  }
  fk->pid = (long)pid;
  close(fds[1]);
  fds[1] = -1;

  reader_t r;
  memset(&r, 0, sizeof(r));
  r.fk = fk;
  r.cap = expect;
  int64_t deadline =
      o->fork_timeout_sec > 0.0
          ? start + (int64_t)(o->fork_timeout_sec * 1e9)
          : 0;
  int status = 0;
  bool is_reaped = false;
  if (!read_child(fds[0], &r, deadline, pid, &is_reaped, &status)) {
    fk->is_timed_out = true;
    kill(pid, SIGKILL);
  }
  close(fds[0]);
  fds[0] = -1;

  while (!is_reaped && waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      status = -1;
      break;
    }
  }
  fk->elapsed_sec = (double)(sl_bench_now_ns() - start) / 1e9;
  if (status == -1) {
    fk->exit_code = -1;
    set_error(fk, "waitpid failed: %s", strerror(errno));
  } else if (WIFSIGNALED(status)) {
    fk->exit_code = -1;
    fk->term_signal = WTERMSIG(status);
  } else {
    fk->exit_code = WEXITSTATUS(status);
  }

  if (fk->is_timed_out) {
    set_error(fk, "timed out after %.1f s, killed", o->fork_timeout_sec);
  } else if (fk->term_signal != 0) {
    set_error(fk, "killed by signal %d (%s)%s%s", fk->term_signal,
              strsignal(fk->term_signal), r.child_msg[0] ? ": " : "",
              r.child_msg);
  } else if (fk->exit_code != 0) {
    describe_exit(fk, is_cmd, r.child_msg);
  } else if (r.parse_error[0] != '\0') {
    set_error(fk, "%s", r.parse_error);
  } else if (fk->n_values != expect || r.n_extra > 0) {
    set_error(fk, "produced %zu values, expected %zu (warm-up %d + %d)",
              fk->n_values + r.n_extra, expect, o->n_warmup,
              o->n_iterations);
  }
  fk->is_ok = fk->error[0] == '\0';
  if (fk->is_ok) {
    const double *m = fk->values + o->n_warmup;
    size_t n = (size_t)o->n_iterations;
    fk->mean = sl_bench_mean(m, n);
    fk->stddev = n >= 2 ? sl_bench_stddev(m, n) : NAN;
    fk->r1 = sl_bench_autocorr_lag1(m, n);
    if (sl_bench_trend(m, n, &fk->trend) != SL_OK) {
      fk->trend.slope = fk->trend.t = fk->trend.p_value = NAN;
    }
    fk->is_unstable = sl_bench_phase_is_unstable_ex(
        m, n, &o->stability, &fk->unstable_reason);
  }
  exec_plan_free(&plan);
  return SL_OK;

fail:;
  int saved = errno;
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
  exec_plan_free(&plan);
  errno = saved;
  return rc;
}

static void progress_line(const sl_bench_opts_t *o,
                          const sl_bench_result_t *res,
                          const sl_bench_fork_t *fk) {
  if (o->progress == NULL) return;
  fprintf(o->progress, "%s%s%s: fork %d/%zu ", res->name,
          res->label ? "/" : "", res->label ? res->label : "",
          fk->index + 1, res->n_forks);
  if (fk->is_ok)
    fprintf(o->progress, "ok, mean %.6g %s (%.2f s)%s\n", fk->mean,
            res->unit, fk->elapsed_sec,
            fk->is_unstable ? ", unstable" : "");
  else
    fprintf(o->progress, "FAILED: %s\n", fk->error);
  fflush(o->progress);
}

/* ------------------------------------------------------------------ */
/* Results.                                                             */
/* ------------------------------------------------------------------ */

static sl_bench_result_t *result_create(const sl_bench_opts_t *o,
                                        const sl_bench_fn_t *fn) {
  sl_bench_result_t *res = calloc(1, sizeof(*res));
  if (res == NULL) return NULL;
  res->name = dup_str(o->name);
  res->unit = dup_str(o->unit);
  res->label = fn->label ? dup_str(fn->label) : NULL;
  res->forks = calloc((size_t)o->n_forks, sizeof(sl_bench_fork_t));
  if (res->name == NULL || res->unit == NULL || res->forks == NULL ||
      (fn->label && res->label == NULL)) {
    sl_bench_result_destroy(res);
    return NULL;
  }
  res->larger_is_better = o->larger_is_better;
  res->n_warmup = o->n_warmup;
  res->n_iterations = o->n_iterations;
  res->seed = o->seed;
  res->n_forks = (size_t)o->n_forks;
  return res;
}

void sl_bench_result_destroy(sl_bench_result_t *res) {
  if (res == NULL) return;
  if (res->forks)
    for (size_t i = 0; i < res->n_forks; i++) free(res->forks[i].values);
  free(res->forks);
  free(res->name);
  free(res->unit);
  free(res->label);
  free(res);
}

/* Gather the means of the ok forks into out (n_forks entries). */
static size_t ok_means(const sl_bench_result_t *res, double *out) {
  size_t n = 0;
  for (size_t i = 0; i < res->n_forks; i++)
    if (res->forks[i].is_ok) out[n++] = res->forks[i].mean;
  return n;
}

static int result_finalize(sl_bench_result_t *res, double confidence) {
  double *m = calloc(res->n_forks, sizeof(double));
  if (m == NULL) return SL_ENOMEM;
  size_t n = ok_means(res, m);
  res->n_ok = n;
  res->n_failed = res->n_forks - n;
  res->n_unstable = 0;
  for (size_t i = 0; i < res->n_forks; i++)
    if (res->forks[i].is_ok && res->forks[i].is_unstable) res->n_unstable++;
  if (sl_bench_t_interval(m, n, confidence, &res->mean_ci) != SL_OK) {
    res->mean_ci = (sl_bench_interval_t){
        .estimate = n ? m[0] : NAN, .lo = NAN, .hi = NAN,
        .confidence = confidence, .df = NAN, .n = n, .is_bounded = false};
  }
  res->min = sl_bench_min(m, n);
  res->max = sl_bench_max(m, n);
  sl_bench_sort(m, n);
  res->median = sl_bench_quantile_sorted(m, n, 0.5);
  free(m);
  return SL_OK;
}

static int run_impl(const sl_bench_opts_t *o, const sl_bench_fn_t *fn,
                    sl_bench_result_t **out_res) {
  sl_bench_result_t *res = result_create(o, fn);
  if (res == NULL) return SL_ENOMEM;
  int rc = SL_OK;
  for (int i = 0; i < o->n_forks; i++) {
    rc = run_fork(o, fn, i, i, &res->forks[i]);
    if (rc != SL_OK) goto fail;
    progress_line(o, res, &res->forks[i]);
  }
  rc = result_finalize(res, o->confidence);
  if (rc != SL_OK) goto fail;
  if (o->summary) sl_bench_result_print(res, o->summary);
  if (o->json_path) {
    rc = sl_bench_result_write_json(res, o->json_path);
    if (rc != SL_OK) goto fail;
  }
  *out_res = res;
  return SL_OK;
fail:
  sl_bench_result_destroy(res);
  return rc;
}

int sl_bench_run(const sl_bench_opts_t *opts, const sl_bench_fn_t *fn,
                 sl_bench_result_t **out_res) {
  if (opts == NULL || out_res == NULL) return SL_EINVAL;
  int rc = check_opts(opts);
  if (rc == SL_OK) rc = check_fn(fn);
  if (rc != SL_OK) return rc;
  return run_impl(opts, fn, out_res);
}

int sl_bench_run_cmd(const sl_bench_opts_t *opts, char *const argv[],
                     sl_bench_result_t **out_res) {
  sl_bench_fn_t fn = {.argv = argv};
  return sl_bench_run(opts, &fn, out_res);
}

/* ------------------------------------------------------------------ */
/* A/B comparison.                                                      */
/* ------------------------------------------------------------------ */

void sl_bench_cmp_destroy(sl_bench_cmp_t *cmp) {
  if (cmp == NULL) return;
  sl_bench_result_destroy(cmp->baseline);
  sl_bench_result_destroy(cmp->candidate);
  free(cmp->name);
  free(cmp->order);
  free(cmp);
}

static void cmp_ratios(sl_bench_cmp_t *cmp, const sl_bench_opts_t *o) {
  size_t nf = cmp->baseline->n_forks;
  double *a = malloc(nf * sizeof(double));
  double *b = malloc(nf * sizeof(double));
  cmp->rc_bootstrap = cmp->rc_fieller = SL_ENOMEM;
  if (a != NULL && b != NULL) {
    size_t na = ok_means(cmp->baseline, a);
    size_t nb = ok_means(cmp->candidate, b);
    sl_bench_boot_opts_t bo;
    sl_bench_boot_opts_init(&bo);
    bo.confidence = o->confidence;
    bo.n_resamples = o->n_resamples;
    bo.seed = o->seed;
    cmp->rc_bootstrap =
        sl_bench_ratio_bootstrap(a, na, b, nb, &bo, &cmp->ratio_bootstrap);
    cmp->rc_fieller = sl_bench_ratio_fieller(a, na, b, nb, o->confidence,
                                             &cmp->ratio_fieller);
  }
  free(a);
  free(b);

  /* Verdict: both intervals must exclude 1 on the same side. */
  cmp->verdict = 0;
  if (cmp->rc_bootstrap == SL_OK && cmp->rc_fieller == SL_OK &&
      cmp->ratio_fieller.is_bounded) {
    const sl_bench_interval_t *bs = &cmp->ratio_bootstrap;
    const sl_bench_interval_t *fl = &cmp->ratio_fieller;
    int dir = 0;
    if (bs->lo > 1.0 && fl->lo > 1.0) dir = 1;
    if (bs->hi < 1.0 && fl->hi < 1.0) dir = -1;
    cmp->verdict = o->larger_is_better ? dir : -dir;
  }
}

int sl_bench_compare(const sl_bench_opts_t *opts,
                     const sl_bench_fn_t *baseline,
                     const sl_bench_fn_t *candidate,
                     sl_bench_cmp_t **out_cmp) {
  if (opts == NULL || out_cmp == NULL) return SL_EINVAL;
  int rc = check_opts(opts);
  if (rc == SL_OK) rc = check_fn(baseline);
  if (rc == SL_OK) rc = check_fn(candidate);
  if (rc != SL_OK) return rc;

  sl_bench_fn_t fa = *baseline, fb = *candidate;
  if (fa.label == NULL) fa.label = "baseline";
  if (fb.label == NULL) fb.label = "candidate";
  sl_bench_cmp_t *cmp = calloc(1, sizeof(*cmp));
  if (cmp == NULL) return SL_ENOMEM;
  cmp->name = dup_str(opts->name);
  cmp->order = calloc(2 * (size_t)opts->n_forks + 1, 1);
  cmp->baseline = result_create(opts, &fa);
  cmp->candidate = result_create(opts, &fb);
  rc = SL_ENOMEM;
  if (cmp->name == NULL || cmp->order == NULL || cmp->baseline == NULL ||
      cmp->candidate == NULL)
    goto fail;

  /* The order stream is separate from the fork seeds and the bootstrap. */
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, opts->seed ^ 0xa5a5a5a5deadbeefull);
  int seq = 0;
  for (int i = 0; i < opts->n_forks; i++) {
    bool is_b_first = opts->shuffle_pairs && (sl_bench_rng_next(&rng) >> 63);
    for (int k = 0; k < 2; k++) {
      bool is_b = (k == 0) == is_b_first;
      sl_bench_result_t *res = is_b ? cmp->candidate : cmp->baseline;
      rc = run_fork(opts, is_b ? &fb : &fa, i, seq, &res->forks[i]);
      if (rc != SL_OK) goto fail;
      cmp->order[seq++] = is_b ? 'B' : 'A';
      progress_line(opts, res, &res->forks[i]);
    }
  }
  rc = result_finalize(cmp->baseline, opts->confidence);
  if (rc == SL_OK) rc = result_finalize(cmp->candidate, opts->confidence);
  if (rc != SL_OK) goto fail;
  cmp_ratios(cmp, opts);
  if (opts->summary) sl_bench_cmp_print(cmp, opts->summary);
  if (opts->json_path) {
    rc = sl_bench_cmp_write_json(cmp, opts->json_path);
    if (rc != SL_OK) goto fail;
  }
  *out_cmp = cmp;
  return SL_OK;
fail:
  sl_bench_cmp_destroy(cmp);
  return rc;
}

int sl_bench_compare_cmd(const sl_bench_opts_t *opts,
                         char *const argv_baseline[],
                         char *const argv_candidate[],
                         sl_bench_cmp_t **out_cmp) {
  sl_bench_fn_t fa = {.label = "baseline", .argv = argv_baseline};
  sl_bench_fn_t fb = {.label = "candidate", .argv = argv_candidate};
  return sl_bench_compare(opts, &fa, &fb, out_cmp);
}

/* ------------------------------------------------------------------ */
/* Text summary.                                                        */
/* ------------------------------------------------------------------ */

static void print_forks(const sl_bench_result_t *res, FILE *f) {
  fprintf(f, "  %4s  %14s  %12s  %7s  %8s  %7s  %s\n", "fork", "mean",
          "stddev", "r1", "trend-t", "time-s", "status");
  for (size_t i = 0; i < res->n_forks; i++) {
    const sl_bench_fork_t *fk = &res->forks[i];
    if (fk->is_ok) {
      fprintf(f, "  %4d  %14.6g  %12.4g  %7.3f  %8.2f  %7.2f  %s%s%s\n",
              fk->index, fk->mean, fk->stddev, fk->r1, fk->trend.t,
              fk->elapsed_sec, fk->is_unstable ? "UNSTABLE (" : "ok",
              fk->is_unstable
                  ? sl_bench_unstable_reason_str(fk->unstable_reason)
                  : "",
              fk->is_unstable ? ")" : "");
    } else {
      fprintf(f, "  %4d  %14s  %12s  %7s  %8s  %7.2f  FAILED: %s\n",
              fk->index, "-", "-", "-", "-", fk->elapsed_sec, fk->error);
    }
  }
}

static void print_stats(const sl_bench_result_t *res, FILE *f) {
  const sl_bench_interval_t *ci = &res->mean_ci;
  if (res->n_ok >= 2) {
    double rel = 100.0 * (ci->hi - ci->estimate) / fabs(ci->estimate);
    fprintf(f,
            "  mean of fork means %.6g %s, %.0f%% CI [%.6g, %.6g] "
            "(+-%.2f%%, t with %.0f df)\n",
            ci->estimate, res->unit, 100.0 * ci->confidence, ci->lo, ci->hi,
            rel, ci->df);
  } else if (res->n_ok == 1) {
    fprintf(f, "  mean %.6g %s from a single fork: no interval\n",
            ci->estimate, res->unit);
  } else {
    fprintf(f, "  no fork succeeded: no statistics\n");
  }
  if (res->n_ok >= 1)
    fprintf(f, "  median of fork means %.6g, min %.6g, max %.6g\n",
            res->median, res->min, res->max);
  if (res->n_failed > 0)
    fprintf(f, "  WARNING: %zu of %zu forks FAILED; statistics use the "
               "others\n", res->n_failed, res->n_forks);
  if (res->n_unstable > 0)
    fprintf(f, "  WARNING: %zu of %zu forks unstable in the measurement "
               "phase; consider more warm-up\n", res->n_unstable, res->n_ok);
}

int sl_bench_result_print(const sl_bench_result_t *res, FILE *f) {
  fprintf(f, "benchmark %s%s%s (%s, %s is better)\n", res->name,
          res->label ? " / " : "", res->label ? res->label : "", res->unit,
          res->larger_is_better ? "larger" : "smaller");
  fprintf(f, "  %zu forks (%zu ok, %zu failed), %d warm-up + %d measured "
             "iterations each, seed %" PRIu64 "\n",
          res->n_forks, res->n_ok, res->n_failed, res->n_warmup,
          res->n_iterations, res->seed);
  print_forks(res, f);
  print_stats(res, f);
  fflush(f);
  return ferror(f) ? SL_EIO : SL_OK;
}

static void print_ratio(FILE *f, const char *what, int rc,
                        const sl_bench_interval_t *iv) {
  if (rc != SL_OK)
    fprintf(f, "  %-10s n/a (%s)\n", what,
            rc == SL_EINVAL ? "fewer than 2 ok forks on a side" : "error");
  else if (!iv->is_bounded)
    fprintf(f, "  %-10s unbounded (baseline mean not significantly "
               "different from 0)\n", what);
  else
    fprintf(f, "  %-10s %.0f%% CI [%.4f, %.4f]\n", what,
            100.0 * iv->confidence, iv->lo, iv->hi);
}

int sl_bench_cmp_print(const sl_bench_cmp_t *cmp, FILE *f) {
  const sl_bench_result_t *a = cmp->baseline, *b = cmp->candidate;
  fprintf(f, "comparison %s: %s vs %s, run order %s\n", cmp->name, b->label,
          a->label, cmp->order);
  sl_bench_result_print(a, f);
  sl_bench_result_print(b, f);
  const sl_bench_interval_t *bs = &cmp->ratio_bootstrap;
  const sl_bench_interval_t *fl = &cmp->ratio_fieller;
  double r = cmp->rc_bootstrap == SL_OK
                 ? bs->estimate
                 : (cmp->rc_fieller == SL_OK ? fl->estimate : NAN);
  fprintf(f, "ratio %s/%s of mean %s: %.4f (%+.2f%%)\n", b->label, a->label,
          a->unit, r, 100.0 * (r - 1.0));
  print_ratio(f, "bootstrap", cmp->rc_bootstrap, bs);
  print_ratio(f, "fieller", cmp->rc_fieller, fl);
  const char *what = a->larger_is_better ? "larger" : "smaller";
  if (cmp->verdict > 0)
    fprintf(f, "verdict: %s is BETTER (%s is better; both intervals "
               "exclude 1)\n", b->label, what);
  else if (cmp->verdict < 0)
    fprintf(f, "verdict: %s is WORSE (%s is better; both intervals "
               "exclude 1)\n", b->label, what);
  else
    fprintf(f, "verdict: no significant difference (an interval "
               "contains 1 or is missing)\n");
  fflush(f);
  return ferror(f) ? SL_EIO : SL_OK;
}

/* ------------------------------------------------------------------ */
/* JSON.                                                                */
/* ------------------------------------------------------------------ */

/* JSON has no NaN or infinity: write null instead. */
static json_t *jnum(double v) {
  return isfinite(v) ? json_real(v) : json_null();
}

/*
 * Set a member, remembering any failure.  json_object_set_new steals v
 * even when it fails, so v is released exactly once on every path.
 */
#define JSET(o, key, v) jset((o), (key), (v), &is_bad)
static void jset(json_t *o, const char *key, json_t *v, bool *is_bad) {
  if (o == NULL || v == NULL) {
    *is_bad = true;
    json_decref(v);
    return;
  }
  if (json_object_set_new(o, key, v) != 0) *is_bad = true;
}

static json_t *jarray_doubles(const double *x, size_t n, bool *is_bad) {
  json_t *arr = json_array();
  if (arr == NULL) {
    *is_bad = true;
    return NULL;
  }
  for (size_t i = 0; i < n; i++)
    if (json_array_append_new(arr, jnum(x[i])) != 0) *is_bad = true;
  return arr;
}

static json_t *interval_json(const sl_bench_interval_t *iv, int rc,
                             bool *p_bad) {
  bool is_bad = false;
  json_t *o = json_object();
  if (rc != SL_OK) {
    JSET(o, "error", json_string(rc == SL_EINVAL ? "too few ok forks"
                                                 : "error"));
  } else {
    JSET(o, "estimate", jnum(iv->estimate));
    JSET(o, "lo", jnum(iv->lo));
    JSET(o, "hi", jnum(iv->hi));
    JSET(o, "confidence", jnum(iv->confidence));
    JSET(o, "df", jnum(iv->df));
    JSET(o, "bounded", json_boolean(iv->is_bounded));
  }
  if (is_bad) *p_bad = true;
  return o;
}

static json_t *result_json(const sl_bench_result_t *res, bool *p_bad) {
  bool is_bad = false;
  json_t *o = json_object();
  JSET(o, "name", json_string(res->name));
  JSET(o, "label", res->label ? json_string(res->label) : json_null());
  JSET(o, "unit", json_string(res->unit));
  JSET(o, "larger_is_better", json_boolean(res->larger_is_better));
  JSET(o, "seed", json_integer((json_int_t)res->seed));
  JSET(o, "n_warmup", json_integer(res->n_warmup));
  JSET(o, "n_iterations", json_integer(res->n_iterations));

  json_t *s = json_object();
  JSET(s, "n_forks", json_integer((json_int_t)res->n_forks));
  JSET(s, "n_ok", json_integer((json_int_t)res->n_ok));
  JSET(s, "n_failed", json_integer((json_int_t)res->n_failed));
  JSET(s, "n_unstable", json_integer((json_int_t)res->n_unstable));
  JSET(s, "mean", jnum(res->mean_ci.estimate));
  JSET(s, "ci_lo", jnum(res->mean_ci.lo));
  JSET(s, "ci_hi", jnum(res->mean_ci.hi));
  JSET(s, "confidence", jnum(res->mean_ci.confidence));
  JSET(s, "median", jnum(res->median));
  JSET(s, "min", jnum(res->min));
  JSET(s, "max", jnum(res->max));
  JSET(o, "summary", s);

  json_t *forks = json_array();
  for (size_t i = 0; forks && i < res->n_forks; i++) {
    const sl_bench_fork_t *fk = &res->forks[i];
    json_t *j = json_object();
    JSET(j, "index", json_integer(fk->index));
    JSET(j, "seq", json_integer(fk->seq));
    JSET(j, "pid", json_integer(fk->pid));
    JSET(j, "ok", json_boolean(fk->is_ok));
    JSET(j, "exit_code", json_integer(fk->exit_code));
    JSET(j, "signal", json_integer(fk->term_signal));
    JSET(j, "timed_out", json_boolean(fk->is_timed_out));
    JSET(j, "error", fk->is_ok ? json_null() : json_string(fk->error));
    JSET(j, "elapsed_s", jnum(fk->elapsed_sec));
    JSET(j, "mean", jnum(fk->mean));
    JSET(j, "stddev", jnum(fk->stddev));
    JSET(j, "r1", jnum(fk->r1));
    JSET(j, "trend_slope", jnum(fk->is_ok ? fk->trend.slope : NAN));
    JSET(j, "trend_t", jnum(fk->is_ok ? fk->trend.t : NAN));
    JSET(j, "trend_p", jnum(fk->is_ok ? fk->trend.p_value : NAN));
    JSET(j, "unstable", json_boolean(fk->is_unstable));
    JSET(j, "unstable_reason",
         json_string(sl_bench_unstable_reason_str(fk->unstable_reason)));
    size_t nw = fk->n_values < (size_t)res->n_warmup ? fk->n_values
                                                     : (size_t)res->n_warmup;
    JSET(j, "warmup", jarray_doubles(fk->values, nw, &is_bad));
    JSET(j, "measurement",
         jarray_doubles(fk->values + nw, fk->n_values - nw, &is_bad));
    if (j == NULL || json_array_append_new(forks, j) != 0) is_bad = true;
  }
  JSET(o, "forks", forks);
  if (is_bad) *p_bad = true;
  return o;
}

static int dump_json(json_t *root, bool is_bad, const char *path) {
  int rc = SL_OK;
  if (root == NULL || is_bad)
    rc = SL_ENOMEM;
  else if (json_dump_file(root, path,
                          JSON_INDENT(2) | JSON_REAL_PRECISION(17) |
                              JSON_PRESERVE_ORDER) != 0)
    rc = SL_EIO;
  json_decref(root);
  return rc;
}

int sl_bench_result_write_json(const sl_bench_result_t *res,
                               const char *path) {
  bool is_bad = false;
  json_t *root = json_object();
  JSET(root, "format", json_string("sluice-bench/1"));
  JSET(root, "kind", json_string("run"));
  JSET(root, "result", result_json(res, &is_bad));
  return dump_json(root, is_bad, path);
}

int sl_bench_cmp_write_json(const sl_bench_cmp_t *cmp, const char *path) {
  bool is_bad = false;
  json_t *root = json_object();
  JSET(root, "format", json_string("sluice-bench/1"));
  JSET(root, "kind", json_string("compare"));
  JSET(root, "name", json_string(cmp->name));
  JSET(root, "order", json_string(cmp->order));
  JSET(root, "baseline", result_json(cmp->baseline, &is_bad));
  JSET(root, "candidate", result_json(cmp->candidate, &is_bad));
  json_t *r = json_object();
  JSET(r, "definition", json_string("mean(candidate) / mean(baseline) of "
                                    "per-fork means"));
  double est = cmp->rc_fieller == SL_OK ? cmp->ratio_fieller.estimate
                                        : cmp->ratio_bootstrap.estimate;
  JSET(r, "estimate", jnum(cmp->rc_fieller == SL_OK ||
                                   cmp->rc_bootstrap == SL_OK
                               ? est
                               : NAN));
  JSET(r, "bootstrap",
       interval_json(&cmp->ratio_bootstrap, cmp->rc_bootstrap, &is_bad));
  JSET(r, "fieller",
       interval_json(&cmp->ratio_fieller, cmp->rc_fieller, &is_bad));
  JSET(r, "verdict", json_string(cmp->verdict > 0   ? "better"
                                 : cmp->verdict < 0 ? "worse"
                                                    : "inconclusive"));
  JSET(root, "ratio", r);
  return dump_json(root, is_bad, path);
}

bool sl_bench_parse_u64(const char *s, uint64_t *out) {
  if (*s < '0' || *s > '9') return false;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}
