/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-peers: sluice beside Apache Flink and Feldera's DBSP on the
 * Nexmark queries (BENCHMARKS.md, "Beside Flink and DBSP").  Three programs
 * with one command line (bench/README.md, "The peer contract") generate the
 * same events inside their process and run one query at parallelism 1:
 *
 *   sluice         out/<build>/bin/sluice-bench-nexmark (bench_nexmark.c)
 *   flink-hashmap  bench/peers/flink/run ... --state hashmap
 *   flink-rocksdb  bench/peers/flink/run ... --state rocksdb
 *   dbsp           bench/peers/dbsp/target/release/sluice-peer-dbsp
 *
 * --check runs every query with --out on a small input (--events 200000
 * --rate 10000: 20 s of event time) on sluice, flink-hashmap and dbsp,
 * sorts each answer bytewise and compares every peer's with sluice's; any
 * difference fails, naming the query, the engine and the first differing
 * lines (both sorted files are kept under <out>/check/ then).
 *
 * Otherwise the timed runs: per round, per query, one run of each engine
 * in a seeded random order; each run is a child process, and its
 * CPU-seconds are the user + system time of all its threads (and of the
 * processes it waited for: a wrapper script's JVM) from wait4()'s rusage,
 * its wall time from the parent's monotonic clock.  The figure is events
 * per CPU-second (the generator included, as Nexmark counts it; a JVM's
 * start, JIT and GC threads too).  Report: per query and engine the mean
 * with a Student-t 95% interval over rounds, then sluice / peer with the
 * unpaired bootstrap and Fieller intervals and the paired-by-round one
 * (runutil.h).  Raw values in <out>/raw.csv.
 *
 * An engine whose program is missing fails the run (--missing fail), or is
 * left out with a note (--missing skip; exit 77 at the end if nothing
 * else failed, the test suite's skip code).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "runutil.h"
#include "stats.h"

#define N_QUERIES 8
#define N_ENGINES 4
#define EXIT_SKIP 77

static const char *const query_names[N_QUERIES] = {"q0", "q1", "q2", "q3",
                                                   "q4", "q5", "q7", "q8"};
/* Timed runs at the contract's default rate (10 M events/s of event time),
 * sized so that a round of all four engines takes 6-10 minutes on this
 * 2-core machine: Flink spends 16-50 CPU-seconds on each (8.5 of them
 * starting), DBSP 1-9, sluice 0.3-5 (bench/README.md). */
static const uint64_t default_events[N_QUERIES] = {
    20000000, 20000000, 20000000, 10000000, 2000000, 2000000, 1000000,
    4000000};

typedef enum kind_e { K_SLUICE, K_FLINK, K_DBSP } kind_t;

typedef struct engine_s {
  const char *name;
  kind_t kind;
  const char *state; /* --state, or NULL */
  bool is_present, is_selected;
  bool is_no_ckpt; /* a timed run said "no checkpoints" on stderr */
  char why_missing[PATH_MAX + 64];
} engine_t;

static engine_t engines[N_ENGINES] = {
    {"sluice", K_SLUICE, NULL, false, false, false, ""},
    {"flink-hashmap", K_FLINK, "hashmap", false, false, false, ""},
    {"flink-rocksdb", K_FLINK, "rocksdb", false, false, false, ""},
    {"dbsp", K_DBSP, NULL, false, false, false, ""}};

typedef struct opts_s {
  bool is_check;
  bool is_missing_fail;
  uint64_t events[N_QUERIES];
  bool is_query[N_QUERIES];
  uint64_t rate, seed, rounds, checkpoint_ms, timeout_s, gen_seed;
  const char *out;
  char sluice[PATH_MAX], flink[PATH_MAX], flink_jar[PATH_MAX],
      dbsp[PATH_MAX];
  /* Every run's checkpoints, on the same file system for every engine:
   * <out>/ckpt, made empty before each run and removed after it (also
   * when a run was killed). */
  char ckpt_dir[PATH_MAX];
} opts_t;

/* ---- one run of a program ---------------------------------------------- */

typedef struct run_s {
  int rc;            /* exit code, 128 + signal, -1 could not run */
  bool is_timed_out;
  double user_s, sys_s, wall_s;
  long maxrss_kb;
  uint64_t results;  /* from the "query=... results=R" line */
  bool has_line;
  char line[256];
} run_t;

static void on_alarm(int sig) { (void)sig; }

/* snprintf into a path buffer (a path too long is cut; then it is not
 * found, and the run says so). */
__attribute__((format(printf, 3, 4))) static void pathf(char *buf,
                                                        size_t size,
                                                        const char *fmt,
                                                        ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static double now_s(void) { return (double)sl_bench_now_ns() / 1e9; }

/* The program of engine e for query q with n events; out_file may be
 * NULL.  argv points into buf. */
static void build_argv(const opts_t *o, const engine_t *e, const char *q,
                       uint64_t n, uint64_t rate, const char *out_file,
                       char *argv[24], char buf[8][32]) {
  int a = 0;
  argv[a++] = (char *)(e->kind == K_SLUICE  ? o->sluice
                       : e->kind == K_FLINK ? o->flink
                                            : o->dbsp);
  snprintf(buf[0], 32, "%llu", (unsigned long long)n);
  snprintf(buf[1], 32, "%llu", (unsigned long long)o->gen_seed);
  snprintf(buf[2], 32, "%llu", (unsigned long long)rate);
  snprintf(buf[3], 32, "%llu", (unsigned long long)o->checkpoint_ms);
  argv[a++] = "--query";
  argv[a++] = (char *)q;
  argv[a++] = "--events";
  argv[a++] = buf[0];
  argv[a++] = "--seed";
  argv[a++] = buf[1];
  argv[a++] = "--rate";
  argv[a++] = buf[2];
  argv[a++] = "--checkpoint-ms";
  argv[a++] = buf[3];
  if (e->state) {
    argv[a++] = "--state";
    argv[a++] = (char *)e->state;
  }
  if (o->checkpoint_ms > 0) {
    argv[a++] = "--ckpt-dir";
    argv[a++] = (char *)o->ckpt_dir;
  }
  if (out_file) {
    argv[a++] = "--out";
    argv[a++] = (char *)out_file;
  }
  argv[a] = NULL;
}

/* Run argv with stdout into stdout_file, stderr appended to log; wait4
 * for its rusage; kill it after timeout_s. */
static void run_child(char *const argv[], const char *stdout_file,
                      const char *log, const char *ckpt_dir,
                      uint64_t timeout_s, run_t *r) {
  memset(r, 0, sizeof(*r));
  r->rc = -1;
  sl_bench_rm_rf(ckpt_dir);
  if (mkdir(ckpt_dir, 0755) != 0) {
    fprintf(stderr, "sluice-bench-peers: mkdir %s: %s\n", ckpt_dir,
            strerror(errno));
    return;
  }
  double t0 = now_s();
  pid_t pid = sl_bench_spawn(argv, stdout_file, log);
  if (pid < 0) return;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_alarm; /* no SA_RESTART: wait4 returns EINTR */
  sigaction(SIGALRM, &sa, &old);
  alarm((unsigned)timeout_s);
  int st = 0;
  struct rusage ru;
  pid_t w;
  while ((w = wait4(pid, &st, 0, &ru)) < 0 && errno == EINTR) {
    if (!r->is_timed_out) {
      r->is_timed_out = true;
      kill(pid, SIGKILL);
    }
  }
  alarm(0);
  sigaction(SIGALRM, &old, NULL);
  r->wall_s = now_s() - t0;
  sl_bench_rm_rf(ckpt_dir);
  if (w < 0) return;
  r->rc = WIFEXITED(st) ? WEXITSTATUS(st)
          : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
  r->user_s = tv_s(ru.ru_utime);
  r->sys_s = tv_s(ru.ru_stime);
  r->maxrss_kb = ru.ru_maxrss;
  FILE *f = fopen(stdout_file, "r");
  char line[512];
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long long ev, res;
    char q[16];
    if (sscanf(line, "query=%15s events=%llu results=%llu", q, &ev, &res) ==
        3) {
      r->has_line = true;
      r->results = res;
      line[strcspn(line, "\n")] = 0;
      pathf(r->line, sizeof(r->line), "%s", line);
    }
  }
  if (f) fclose(f);
}

/* The expected stdout line of a run. */
static bool line_ok(const run_t *r, const char *q, uint64_t n) {
  char want[96];
  snprintf(want, sizeof(want), "query=%s events=%llu results=", q,
           (unsigned long long)n);
  return r->has_line && strncmp(r->line, want, strlen(want)) == 0;
}

/* ---- sorted answers ---------------------------------------------------- */

typedef struct lines_s {
  char *data;
  size_t n;
  char **line;
  size_t *len;
} lines_t;

static int cmp_line(const void *a, const void *b) {
  const char *x = *(char *const *)a, *y = *(char *const *)b;
  size_t lx = strcspn(x, "\n"), ly = strcspn(y, "\n");
  int c = memcmp(x, y, lx < ly ? lx : ly);
  return c ? c : (lx > ly) - (lx < ly);
}

static void lines_free(lines_t *l) {
  free(l->data);
  free(l->line);
  free(l->len);
  memset(l, 0, sizeof(*l));
}

/* Read path and sort its lines bytewise (LC_ALL=C sort).  0 or -1. */
static int lines_read_sorted(const char *path, lines_t *l) {
  memset(l, 0, sizeof(*l));
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0) {
    fclose(f);
    return -1;
  }
  size_t size = (size_t)sb.st_size;
  l->data = malloc(size + 2);
  if (l->data == NULL || fread(l->data, 1, size, f) != size) {
    fclose(f);
    lines_free(l);
    return -1;
  }
  fclose(f);
  if (size && l->data[size - 1] != '\n') l->data[size++] = '\n';
  l->data[size] = 0;
  size_t n = 0;
  for (size_t i = 0; i < size; i++) n += l->data[i] == '\n';
  l->line = malloc((n ? n : 1) * sizeof(char *));
  l->len = malloc((n ? n : 1) * sizeof(size_t));
  if (l->line == NULL || l->len == NULL) {
    lines_free(l);
    return -1;
  }
  for (size_t i = 0, start = 0; i < size; i++)
    if (l->data[i] == '\n') {
      l->line[l->n++] = l->data + start;
      start = i + 1;
    }
  qsort(l->line, l->n, sizeof(char *), cmp_line);
  for (size_t i = 0; i < l->n; i++) l->len[i] = strcspn(l->line[i], "\n");
  return 0;
}

static int lines_write(const lines_t *l, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  for (size_t i = 0; i < l->n; i++) {
    fwrite(l->line[i], 1, l->len[i], f);
    fputc('\n', f);
  }
  return fclose(f) == 0 ? 0 : -1;
}

/* Print a line (at most 300 bytes, TABs shown as " | "). */
static void print_line(const char *who, const lines_t *l, size_t i) {
  if (i >= l->n) {
    printf("      %-14s (no line %zu: %zu lines)\n", who, i + 1, l->n);
    return;
  }
  printf("      %-14s ", who);
  size_t n = l->len[i] < 300 ? l->len[i] : 300;
  for (size_t k = 0; k < n; k++)
    if (l->line[i][k] == '\t') fputs(" | ", stdout);
    else putchar(l->line[i][k]);
  printf("%s\n", n < l->len[i] ? " ..." : "");
}

/* ---- --check ------------------------------------------------------------ */

static int check(const opts_t *o) {
  char dir[PATH_MAX], log[PATH_MAX];
  pathf(dir, sizeof(dir), "%s/check", o->out);
  mkdir(o->out, 0755);
  mkdir(dir, 0755);
  pathf(log, sizeof(log), "%s/check.log", dir);
  int n_fail = 0;
  for (int qi = 0; qi < N_QUERIES; qi++) {
    if (!o->is_query[qi]) continue;
    const char *q = query_names[qi];
    lines_t ref;
    memset(&ref, 0, sizeof(ref));
    bool has_ref = false;
    char ref_path[PATH_MAX] = "";
    const char *ref_name = engines[0].name;
    for (int ei = 0; ei < N_ENGINES; ei++) {
      const engine_t *e = &engines[ei];
      if (!e->is_selected || !e->is_present) continue;
      char out[PATH_MAX], so[PATH_MAX], sorted[PATH_MAX];
      pathf(out, sizeof(out), "%s/%s.%s.txt", dir, q, e->name);
      pathf(so, sizeof(so), "%s/%s.%s.stdout", dir, q, e->name);
      pathf(sorted, sizeof(sorted), "%s/%s.%s.sorted", dir, q, e->name);
      char *argv[24], buf[8][32];
      build_argv(o, e, q, o->events[qi], o->rate, out, argv, buf);
      run_t r;
      run_child(argv, so, log, o->ckpt_dir, o->timeout_s, &r);
      lines_t l;
      const char *err = NULL;
      if (r.is_timed_out) err = "timed out";
      else if (r.rc != 0) err = "failed";
      else if (!line_ok(&r, q, o->events[qi])) err = "printed no "
                                                     "'query=... events=... "
                                                     "results=...' line";
      else if (lines_read_sorted(out, &l) != 0) err = "wrote no answer";
      else unlink(out); /* kept sorted when it differs */
      if (err) {
        printf("FAIL %s %s: %s (exit %d; its stderr in %s)\n", q, e->name,
               err, r.rc, log);
        n_fail++;
        continue;
      }
      printf("  %s %-14s %8zu rows  %6.2f CPU-s  %6.2f s\n", q, e->name,
             l.n, r.user_s + r.sys_s, r.wall_s);
      bool is_ok = true;
      if (r.results != l.n) {
        printf("FAIL %s %s: it says results=%llu but wrote %zu lines\n", q,
               e->name, (unsigned long long)r.results, l.n);
        is_ok = false;
      }
      if (!has_ref) {
        ref = l;
        has_ref = true;
        ref_name = e->name;
        pathf(ref_path, sizeof(ref_path), "%s", sorted);
        if (!is_ok) lines_write(&l, sorted), n_fail++;
        continue;
      }
      size_t i = 0;
      while (i < ref.n && i < l.n && ref.len[i] == l.len[i] &&
             memcmp(ref.line[i], l.line[i], ref.len[i]) == 0)
        i++;
      if (i < ref.n || i < l.n) {
        printf("FAIL %s %s: its answer differs from %s's (%zu and %zu "
               "rows); the first differing sorted line is %zu:\n", q,
               e->name, ref_name, ref.n, l.n, i + 1);
        print_line(ref_name, &ref, i);
        print_line(e->name, &l, i);
        if (i + 1 < ref.n || i + 1 < l.n) {
          print_line(ref_name, &ref, i + 1);
          print_line(e->name, &l, i + 1);
        }
        lines_write(&ref, ref_path);
        lines_write(&l, sorted);
        printf("      sorted answers: %s %s\n", ref_path, sorted);
        is_ok = false;
      }
      if (!is_ok) n_fail++;
      lines_free(&l);
    }
    lines_free(&ref);
  }
  return n_fail;
}

/* The size of a file, 0 if it has none. */
static off_t file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? sb.st_size : 0;
}

/* Whether the part of log from offset `from` on (at most 1 MB of it)
 * holds needle: what a run appended to its stderr log. */
static bool log_says(const char *log, off_t from, const char *needle) {
  FILE *f = fopen(log, "r");
  if (f == NULL) return false;
  bool is_found = false;
  char line[4096];
  size_t n = 0;
  if (fseeko(f, from, SEEK_SET) == 0)
    while (!is_found && n < (1u << 20) && fgets(line, sizeof(line), f)) {
      n += strlen(line);
      is_found = strstr(line, needle) != NULL;
    }
  fclose(f);
  return is_found;
}

/* ---- timed runs ---------------------------------------------------------- */

/* The start-up run of each round: q0 on START_EVENTS events, so that the
 * report can also give each query's events per CPU-second beyond an
 * engine's start (a JVM and a MiniCluster cost seconds of CPU). */
#define START_EVENTS 1000
#define START_Q N_QUERIES /* its index in the arrays below */

static bool engine_runs(int ei) {
  return engines[ei].is_selected && engines[ei].is_present;
}

static int timed(const opts_t *o) {
  mkdir(o->out, 0755);
  char csv_path[PATH_MAX], log[PATH_MAX], so[PATH_MAX];
  pathf(csv_path, sizeof(csv_path), "%s/raw.csv", o->out);
  pathf(log, sizeof(log), "%s/runs.log", o->out);
  pathf(so, sizeof(so), "%s/last.stdout", o->out);
  FILE *csv = fopen(csv_path, "w");
  if (csv == NULL) {
    fprintf(stderr, "sluice-bench-peers: cannot write %s: %s\n", csv_path,
            strerror(errno));
    return 1;
  }
  fprintf(csv, "round,seq,query,engine,events,rate,checkpoint_ms,exit,"
               "timed_out,user_s,sys_s,cpu_s,wall_s,maxrss_kb,results,"
               "events_per_cpu_s,loadavg1\n");
  size_t R = (size_t)o->rounds, NQ = N_QUERIES + 1;
  /* [q][e][round], q = START_Q for the start-up run: events per
   * CPU-second, CPU-seconds, wall seconds; NaN when the run failed. */
  double *v = malloc(NQ * N_ENGINES * R * sizeof(double));
  double *cpu_s = malloc(NQ * N_ENGINES * R * sizeof(double));
  double *wall = malloc(NQ * N_ENGINES * R * sizeof(double));
  double *beyond = malloc(NQ * N_ENGINES * R * sizeof(double));
  if (v == NULL || cpu_s == NULL || wall == NULL || beyond == NULL) return 1;
  for (size_t i = 0; i < NQ * N_ENGINES * R; i++)
    v[i] = cpu_s[i] = wall[i] = beyond[i] = NAN;
#define AT(a, q, e, r) a[((size_t)(q) * N_ENGINES + (size_t)(e)) * R + (r)]
  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, o->seed);
  int n_fail = 0, seq = 0;
  double t_start = now_s();
  for (size_t r = 0; r < R; r++) {
    for (int step = -1; step < N_QUERIES; step++) {
      int qi = step < 0 ? START_Q : step; /* the start-up run first */
      if (qi < N_QUERIES && !o->is_query[qi]) continue;
      const char *q = query_names[qi < N_QUERIES ? qi : 0];
      uint64_t n_events = qi < N_QUERIES ? o->events[qi] : START_EVENTS;
      size_t order[N_ENGINES], n = 0;
      for (int ei = 0; ei < N_ENGINES; ei++)
        if (engine_runs(ei)) order[n++] = (size_t)ei;
      sl_bench_shuffle(order, n, &rng);
      for (size_t k = 0; k < n; k++) {
        const engine_t *e = &engines[order[k]];
        char *argv[24], buf[8][32];
        build_argv(o, e, q, n_events, o->rate, NULL, argv, buf);
        run_t run;
        double load = sl_bench_loadavg1();
        off_t log_from = file_size(log);
        run_child(argv, so, log, o->ckpt_dir, o->timeout_s, &run);
        if (log_says(log, log_from, "no checkpoints"))
          engines[order[k]].is_no_ckpt = true;
        double cpu = run.user_s + run.sys_s;
        bool is_ok = run.rc == 0 && !run.is_timed_out &&
                     line_ok(&run, q, n_events) && cpu > 0;
        double eps = is_ok ? (double)n_events / cpu : NAN;
        AT(v, qi, order[k], r) = eps;
        AT(cpu_s, qi, order[k], r) = is_ok ? cpu : NAN;
        AT(wall, qi, order[k], r) = is_ok ? run.wall_s : NAN;
        double c0 = AT(cpu_s, START_Q, order[k], r);
        if (qi < N_QUERIES && is_ok && cpu > c0)
          AT(beyond, qi, order[k], r) = (double)n_events / (cpu - c0);
        if (!is_ok) {
          n_fail++;
          fprintf(stderr, "sluice-bench-peers: round %zu %s %s failed "
                  "(exit %d%s); its stderr in %s\n", r + 1, q, e->name,
                  run.rc, run.is_timed_out ? ", timed out" : "", log);
        }
        fprintf(csv, "%zu,%d,%s,%s,%llu,%llu,%llu,%d,%d,%.4f,%.4f,%.4f,"
                "%.4f,%ld,%llu,%.1f,%.2f\n", r + 1, seq++,
                qi < N_QUERIES ? q : "start", e->name,
                (unsigned long long)n_events, (unsigned long long)o->rate,
                (unsigned long long)o->checkpoint_ms, run.rc,
                run.is_timed_out, run.user_s, run.sys_s, cpu, run.wall_s,
                run.maxrss_kb, (unsigned long long)run.results, eps, load);
        fflush(csv);
        fprintf(stderr, "  round %zu/%zu %-5s %-14s %8.3f M events/CPU-s  "
                "%6.2f CPU-s  %6.2f s  (%.0f s so far)\n", r + 1, R,
                qi < N_QUERIES ? q : "start", e->name, eps / 1e6, cpu,
                run.wall_s, now_s() - t_start);
      }
    }
  }
  fclose(csv);
  unlink(so);

  printf("# Nexmark beside the peers: events per CPU-second (user+sys of "
         "all threads, wait4), parallelism 1\n");
  printf("# %llu rounds, engines in a seeded random order per round (seed "
         "%llu); generator seed %llu, rate %llu events/s of event time; "
         "checkpoints every %llu ms (sluice, flink; dbsp: see its "
         "program's stderr in runs.log)\n",
         (unsigned long long)o->rounds, (unsigned long long)o->seed,
         (unsigned long long)o->gen_seed, (unsigned long long)o->rate,
         (unsigned long long)o->checkpoint_ms);
  printf("# load average at the end: %.2f; %.0f s in all\n",
         sl_bench_loadavg1(), now_s() - t_start);
  for (int ei = 0; ei < N_ENGINES; ei++)
    if (engine_runs(ei) && engines[ei].is_no_ckpt)
      printf("# %s: no checkpoints (its program said so on stderr)\n",
             engines[ei].name);
  printf("\nstart-up: q0 on %d events, CPU-seconds\n", START_EVENTS);
  for (int ei = 0; ei < N_ENGINES; ei++)
    if (engine_runs(ei))
      sl_bench_print_stat(engines[ei].name, 30, &AT(cpu_s, START_Q, ei, 0),
                          R, 1, "CPU-s", "rounds");
  char label[96];
  for (int qi = 0; qi < N_QUERIES; qi++) {
    if (!o->is_query[qi]) continue;
    printf("\n%s  (%llu events)\n", query_names[qi],
           (unsigned long long)o->events[qi]);
    for (int ei = 0; ei < N_ENGINES; ei++)
      if (engine_runs(ei)) {
        snprintf(label, sizeof(label), "%s%s", engines[ei].name,
                 engines[ei].is_no_ckpt ? " (no checkpoints)" : "");
        sl_bench_print_stat(label, 30, &AT(v, qi, ei, 0), R, 1e-6,
                            "M events/CPU-s", "rounds");
      }
    for (int ei = 0; ei < N_ENGINES; ei++)
      if (engine_runs(ei)) {
        snprintf(label, sizeof(label), "%s beyond start", engines[ei].name);
        sl_bench_print_stat(label, 30, &AT(beyond, qi, ei, 0), R, 1e-6,
                            "M events/CPU-s", "rounds");
      }
    for (int ei = 0; ei < N_ENGINES; ei++)
      if (engine_runs(ei)) {
        snprintf(label, sizeof(label), "%s wall", engines[ei].name);
        sl_bench_print_stat(label, 30, &AT(wall, qi, ei, 0), R, 1, "s",
                            "rounds");
      }
    if (!engine_runs(0)) continue;
    for (int ei = 1; ei < N_ENGINES; ei++) {
      if (!engine_runs(ei)) continue;
      snprintf(label, sizeof(label), "sluice/%s", engines[ei].name);
      sl_bench_print_ratio(label, 30, &AT(v, qi, 0, 0), &AT(v, qi, ei, 0),
                           R, o->seed + (uint64_t)qi, "rounds");
    }
    for (int ei = 1; ei < N_ENGINES; ei++) {
      if (!engine_runs(ei)) continue;
      snprintf(label, sizeof(label), "sluice/%s beyond start",
               engines[ei].name);
      sl_bench_print_ratio(label, 30, &AT(beyond, qi, 0, 0),
                           &AT(beyond, qi, ei, 0), R,
                           o->seed + 100 + (uint64_t)qi, "rounds");
    }
  }
  free(v);
  free(cpu_s);
  free(wall);
  free(beyond);
#undef AT
  return n_fail;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
      "usage: sluice-bench-peers [--check] [options]\n"
      "  --check              answers on a small input, compared (default "
      "--events 200000 --rate 10000)\n"
      "  --queries LIST       q0,q1,q2,q3,q4,q5,q7,q8 (default all)\n"
      "  --engines LIST       sluice,flink-hashmap,flink-rocksdb,dbsp "
      "(default all; --check: sluice,flink-hashmap,dbsp)\n"
      "  --events N|qN=N,...  events per query (timed defaults: q0-q2 20M, "
      "q3 10M, q4 q5 2M, q7 1M, q8 4M)\n"
      "  --rate R             events/s of event time (timed: 10000000)\n"
      "  --rounds K           timed rounds (default 3)\n"
      "  --seed S             order of the engines and bootstrap (1)\n"
      "  --gen-seed S         the generator's seed (42)\n"
      "  --checkpoint-ms MS   (1000)\n"
      "  --timeout-s T        per run, then SIGKILL (900)\n"
      "  --out DIR            (bench/results/peers)\n"
      "  --sluice PATH        (sluice-bench-nexmark beside this program)\n"
      "  --peers DIR          where flink/ and dbsp/ are built "
      "(bench/peers)\n"
      "  --flink PATH --flink-jar PATH --dbsp PATH   (under --peers)\n"
      "  --missing fail|skip  an engine whose program is missing (fail)\n");
}

static int query_index(const char *q, size_t len) {
  for (int i = 0; i < N_QUERIES; i++)
    if (strlen(query_names[i]) == len && strncmp(query_names[i], q, len) == 0)
      return i;
  return -1;
}

/* "a,b,c": each item must name one of names[n]; marks sel[]. */
static int parse_list(const char *s, const char *what, bool *sel, int n,
                      int (*index)(const char *, size_t)) {
  for (int i = 0; i < n; i++) sel[i] = false;
  while (*s) {
    size_t len = strcspn(s, ",");
    int i = index(s, len);
    if (i < 0) {
      fprintf(stderr, "sluice-bench-peers: no %s '%.*s'%s\n", what,
              (int)len, s,
              len == 2 && strncmp(s, "q6", 2) == 0
                  ? " (q6 is not run: Flink's Nexmark does not support it)"
                  : "");
      return -1;
    }
    sel[i] = true;
    s += len + (s[len] == ',');
  }
  return 0;
}

static int engine_index(const char *s, size_t len) {
  for (int i = 0; i < N_ENGINES; i++)
    if (strlen(engines[i].name) == len && strncmp(engines[i].name, s, len) == 0)
      return i;
  return -1;
}

static int parse_events(const char *s, opts_t *o) {
  uint64_t n;
  if (sl_bench_parse_u64(s, &n)) {
    for (int i = 0; i < N_QUERIES; i++) o->events[i] = n;
    return n ? 0 : -1;
  }
  while (*s) {
    size_t len = strcspn(s, ",");
    const char *eq = memchr(s, '=', len);
    char num[32];
    int qi = eq ? query_index(s, (size_t)(eq - s)) : -1;
    size_t nl = eq ? len - (size_t)(eq - s) - 1 : 0;
    if (qi < 0 || nl == 0 || nl >= sizeof(num)) return -1;
    memcpy(num, eq + 1, nl);
    num[nl] = 0;
    if (!sl_bench_parse_u64(num, &o->events[qi]) || o->events[qi] == 0)
      return -1;
    s += len + (s[len] == ',');
  }
  return 0;
}

static void presence(const opts_t *o) {
  for (int ei = 0; ei < N_ENGINES; ei++) {
    engine_t *e = &engines[ei];
    const char *p = e->kind == K_SLUICE  ? o->sluice
                    : e->kind == K_FLINK ? o->flink
                                         : o->dbsp;
    e->is_present = access(p, X_OK) == 0;
    if (!e->is_present)
      snprintf(e->why_missing, sizeof(e->why_missing), "%s is not built "
               "(no executable %s)", e->name, p);
    else if (e->kind == K_FLINK && access(o->flink_jar, R_OK) != 0) {
      e->is_present = false;
      snprintf(e->why_missing, sizeof(e->why_missing), "%s is not built "
               "(no %s)", e->name, o->flink_jar);
    }
  }
}

int main(int argc, char **argv) {
  opts_t o;
  memset(&o, 0, sizeof(o));
  o.is_missing_fail = true;
  o.rounds = 3;
  o.seed = 1;
  o.gen_seed = 42;
  o.checkpoint_ms = 1000;
  o.timeout_s = 900;
  o.out = "bench/results/peers";
  const char *peers = "bench/peers", *events = NULL, *queries = NULL,
             *engine_list = NULL;
  bool has_rate = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(a, "--check") == 0) {
      o.is_check = true;
      continue;
    }
    if (val == NULL) {
      fprintf(stderr, "sluice-bench-peers: %s needs a value\n", a);
      return 2;
    }
    i++;
    uint64_t *num = strcmp(a, "--rate") == 0            ? &o.rate
                    : strcmp(a, "--rounds") == 0        ? &o.rounds
                    : strcmp(a, "--seed") == 0          ? &o.seed
                    : strcmp(a, "--gen-seed") == 0      ? &o.gen_seed
                    : strcmp(a, "--checkpoint-ms") == 0 ? &o.checkpoint_ms
                    : strcmp(a, "--timeout-s") == 0     ? &o.timeout_s
                                                        : NULL;
    if (num) {
      if (!sl_bench_parse_u64(val, num)) {
        fprintf(stderr, "sluice-bench-peers: %s %s: not a whole number\n",
                a, val);
        return 2;
      }
      if (num == &o.rate) has_rate = true;
    } else if (strcmp(a, "--events") == 0) events = val;
    else if (strcmp(a, "--queries") == 0) queries = val;
    else if (strcmp(a, "--engines") == 0) engine_list = val;
    else if (strcmp(a, "--out") == 0) o.out = val;
    else if (strcmp(a, "--peers") == 0) peers = val;
    else if (strcmp(a, "--sluice") == 0) pathf(o.sluice, PATH_MAX, "%s", val);
    else if (strcmp(a, "--flink") == 0) pathf(o.flink, PATH_MAX, "%s", val);
    else if (strcmp(a, "--flink-jar") == 0)
      pathf(o.flink_jar, PATH_MAX, "%s", val);
    else if (strcmp(a, "--dbsp") == 0) pathf(o.dbsp, PATH_MAX, "%s", val);
    else if (strcmp(a, "--missing") == 0 &&
             (strcmp(val, "fail") == 0 || strcmp(val, "skip") == 0))
      o.is_missing_fail = val[0] == 'f';
    else {
      fprintf(stderr, "sluice-bench-peers: unknown option %s %s\n", a, val);
      usage(stderr);
      return 2;
    }
  }
  if (o.rounds < 2 && !o.is_check) {
    fprintf(stderr, "sluice-bench-peers: --rounds must be at least 2 (an "
            "interval needs two)\n");
    return 2;
  }
  if (o.timeout_s == 0) o.timeout_s = 900;
  if (!has_rate) o.rate = o.is_check ? 10000 : 10000000;
  if (o.rate == 0) {
    fprintf(stderr, "sluice-bench-peers: --rate must be positive\n");
    return 2;
  }
  for (int i = 0; i < N_QUERIES; i++) {
    o.events[i] = o.is_check ? 200000 : default_events[i];
    o.is_query[i] = true;
  }
  if (events && parse_events(events, &o) != 0) {
    fprintf(stderr, "sluice-bench-peers: --events %s: N, or qN=N,... with "
            "N > 0\n", events);
    return 2;
  }
  if (queries && parse_list(queries, "query", o.is_query, N_QUERIES,
                            query_index) != 0)
    return 2;
  bool sel[N_ENGINES] = {true, true, !o.is_check, true};
  if (engine_list && parse_list(engine_list, "engine", sel, N_ENGINES,
                                engine_index) != 0)
    return 2;
  for (int i = 0; i < N_ENGINES; i++) engines[i].is_selected = sel[i];
  if (!sel[0]) {
    fprintf(stderr, "sluice-bench-peers: --engines must include sluice "
            "(the reference of --check and of the ratios)\n");
    return 2;
  }
  if (o.sluice[0] == 0 &&
      sl_bench_sibling("sluice-bench-nexmark", o.sluice, PATH_MAX) != 0) {
    fprintf(stderr, "sluice-bench-peers: cannot find sluice-bench-nexmark\n");
    return 2;
  }
  if (o.flink[0] == 0) pathf(o.flink, PATH_MAX, "%s/flink/run", peers);
  if (o.flink_jar[0] == 0)
    pathf(o.flink_jar, PATH_MAX, "%s/flink/target/sluice-peer-flink.jar",
             peers);
  if (o.dbsp[0] == 0)
    pathf(o.dbsp, PATH_MAX, "%s/dbsp/target/release/sluice-peer-dbsp",
             peers);
  pathf(o.ckpt_dir, PATH_MAX, "%s/ckpt", o.out);
  presence(&o);
  int n_missing = 0;
  for (int i = 0; i < N_ENGINES; i++)
    if (engines[i].is_selected && !engines[i].is_present) {
      n_missing++;
      fprintf(o.is_missing_fail || i == 0 ? stderr : stdout, "%s: %s\n",
              o.is_missing_fail || i == 0 ? "sluice-bench-peers" : "skip",
              engines[i].why_missing);
    }
  if (!engines[0].is_present || (n_missing && o.is_missing_fail)) return 1;
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress through a pipe (tee) */
  int n_fail = o.is_check ? check(&o) : timed(&o);
  if (n_fail) {
    printf("%d failure%s\n", n_fail, n_fail == 1 ? "" : "s");
    return 1;
  }
  if (o.is_check) printf("every answer matches sluice's\n");
  return n_missing ? EXIT_SKIP : 0;
}
