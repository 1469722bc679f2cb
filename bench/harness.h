/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fork-based benchmark runner.  A benchmark is run in F independent
 * processes ("forks"); each fork runs W warm-up and I measurement
 * iterations of a user callback (or is one run of an external command),
 * and every iteration yields one number, for example records per second.
 * The parent collects the numbers through a pipe, treats the per-fork mean
 * of the measurement phase as the unit of observation, and reports the
 * grand mean with a Student-t interval over fork means, plus A/B ratios
 * with bootstrap and Fieller intervals.  The method is DESIGN.md section 9
 * (Georges et al. 2007; Kalibera and Jones 2013); see bench/README.md.
 *
 * Threads: the runner forks, so it must be called from a process that has
 * not started other threads (a forked child of a multi-threaded process
 * may only call async-signal-safe functions, and user callbacks are not).
 * All functions below are @thread main thread of a single-threaded
 * process, @locks none.
 */
#ifndef SL_BENCH_HARNESS_H
#define SL_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"
#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * What a callback sees.  The harness fills fork, iteration, is_warmup and
 * seed; state belongs to the callbacks (setup may store a pointer there for
 * iter and teardown).  Everything a callback does happens in the child and
 * is lost when the child exits.
 */
typedef struct sl_bench_ctx_s {
  int fork;       /* 0-based fork index within this benchmark */
  int iteration;  /* 0-based, warm-up iterations first */
  bool is_warmup;
  uint64_t seed;  /* per fork; A and B of a pair get the same seed */
  void *state;
} sl_bench_ctx_t;

/* Called once per fork before the first iteration; nonzero fails the fork. */
typedef int (*sl_bench_setup_cb)(void *arg, sl_bench_ctx_t *ctx);
/* One iteration: measure, store one finite number in *out_value, return 0.
 * Nonzero (or a non-finite value) fails the fork. */
typedef int (*sl_bench_iter_cb)(void *arg, sl_bench_ctx_t *ctx,
                                double *out_value);
/* Called once per fork after the last iteration. */
typedef void (*sl_bench_teardown_cb)(void *arg, sl_bench_ctx_t *ctx);

/*
 * A benchmark body: either callbacks (iter required, setup and teardown
 * optional) or, when argv is not NULL, an external command.  A command is
 * run once per fork (fork + execve; argv[0] is searched in PATH when it
 * has no '/'); it must print one number per line on stdout, warm-up
 * iterations first, n_warmup + n_iterations numbers in total.  Blank lines
 * and lines starting with '#' are ignored; anything else that is not a
 * number fails the fork.  Reading stops at EOF or, if a background
 * process keeps stdout open, once the command itself has exited and the
 * pipe is drained.  The command's stdin and stderr are inherited,
 * and its environment gets SL_BENCH_FORK, SL_BENCH_SEED, SL_BENCH_WARMUP,
 * SL_BENCH_ITERATIONS and SL_BENCH_NAME.  All pointers are borrowed for
 * the duration of the call that uses them.
 */
typedef struct sl_bench_fn_s {
  const char *label; /* optional: "baseline", "candidate", a config name */
  sl_bench_setup_cb setup;
  sl_bench_iter_cb iter;
  sl_bench_teardown_cb teardown;
  void *arg;
  char *const *argv; /* NULL-terminated; NULL for callbacks */
} sl_bench_fn_t;

/* Options.  Initialize with sl_bench_opts_init, then override. */
typedef struct sl_bench_opts_s {
  const char *name;       /* default "bench" */
  const char *unit;       /* default "ops/s" */
  bool larger_is_better;  /* default true (throughput) */
  int n_forks;            /* default 10; for A/B, forks per side */
  int n_warmup;           /* default 5 */
  int n_iterations;       /* default 10 */
  uint64_t seed;          /* default 1: fork seeds and the bootstrap */
  double confidence;      /* default 0.95 */
  size_t n_resamples;     /* bootstrap resamples, default 10000 */
  double fork_timeout_sec;/* per fork, 0 (default) for none; then SIGKILL */
  bool shuffle_pairs;     /* A/B: random order within each pair (seeded);
                           * default false = strict A,B,A,B */
  FILE *summary;          /* text summary written here if not NULL */
  FILE *progress;         /* one line per finished fork if not NULL */
  const char *json_path;  /* raw data as JSON written here if not NULL */
  sl_bench_stability_t stability; /* thresholds of the unstable flag */
} sl_bench_opts_t;

/*
 * Exit codes of a callback child.  A child killed by a signal, a nonzero
 * exit code, a timeout, a wrong number of values or a malformed value all
 * mark the fork failed with a message saying which.
 */
#define SL_BENCH_EXIT_SETUP 70   /* setup callback failed */
#define SL_BENCH_EXIT_ITER 71    /* iteration callback failed */
#define SL_BENCH_EXIT_WRITE 72   /* could not write to the parent */
#define SL_BENCH_EXIT_EXEC 127   /* external command: execve failed */

/* One fork.  values has n_values entries: warm-up first. */
typedef struct sl_bench_fork_s {
  int index;            /* fork index within its benchmark */
  int seq;              /* position in the overall run order */
  long pid;
  bool is_ok;
  int exit_code;        /* -1 when killed by a signal */
  int term_signal;      /* 0 unless killed by a signal */
  bool is_timed_out;
  char error[200];      /* why the fork failed; empty when ok */
  double elapsed_sec;   /* wall time of the fork, measured by the parent */
  size_t n_values;
  double *values;
  /* Of the measurement phase; NaN when not ok. */
  double mean;
  double stddev;
  double r1;            /* lag-1 autocorrelation */
  sl_bench_trend_t trend;
  bool is_unstable;
  unsigned unstable_reason; /* SL_BENCH_UNSTABLE_* */
} sl_bench_fork_t;

/* The result of one benchmark.  Statistics are over the ok forks only. */
typedef struct sl_bench_result_s {
  char *name;
  char *unit;
  char *label;          /* NULL when the fn had none */
  bool larger_is_better;
  int n_warmup;
  int n_iterations;
  uint64_t seed;
  size_t n_forks;
  size_t n_ok;
  size_t n_failed;
  size_t n_unstable;
  sl_bench_fork_t *forks;
  /* Over the means of the ok forks.  mean_ci is not bounded (lo, hi NaN)
   * with fewer than two ok forks; median/min/max are NaN with none. */
  sl_bench_interval_t mean_ci;
  double median;
  double min;
  double max;
} sl_bench_result_t;

/* An A/B comparison: ratio = mean(candidate) / mean(baseline). */
typedef struct sl_bench_cmp_s {
  char *name;
  sl_bench_result_t *baseline;
  sl_bench_result_t *candidate;
  char *order;          /* run order, e.g. "ABABBA", one char per fork */
  int rc_bootstrap;     /* SL_OK, or why ratio_bootstrap is missing */
  int rc_fieller;       /* SL_OK, or why ratio_fieller is missing */
  sl_bench_interval_t ratio_bootstrap;
  sl_bench_interval_t ratio_fieller;
  /* -1 candidate worse, +1 better, 0 inconclusive: both intervals must
   * exclude 1 on the same side for a verdict. */
  int verdict;
} sl_bench_cmp_t;

/** @brief Defaults as listed in sl_bench_opts_t. */
void sl_bench_opts_init(sl_bench_opts_t *opts);

/**
 * @brief Run fn in opts->n_forks forks, one after the other.  Failed forks
 * are reported in the result (and in the summary), not as an error: check
 * (*out_res)->n_failed.  Writes the summary and the JSON file when the
 * options ask for them.
 * @param[out] out_res written only on success; free with
 *   sl_bench_result_destroy.
 * @return SL_OK; SL_EINVAL for bad options; SL_ENOMEM; a negated errno if
 *   pipe or fork fails; SL_EIO if the JSON file cannot be written (out_res
 *   is still not written then).
 * @ownership fn and opts are borrowed.
 */
int sl_bench_run(const sl_bench_opts_t *opts, const sl_bench_fn_t *fn,
                 sl_bench_result_t **out_res);

/** @brief sl_bench_run with an external command as the body. */
int sl_bench_run_cmd(const sl_bench_opts_t *opts, char *const argv[],
                     sl_bench_result_t **out_res);

/**
 * @brief A/B comparison: opts->n_forks forks of each, interleaved A, B, A,
 * B, ... (or each pair in random order with shuffle_pairs).  Reports the
 * ratio candidate / baseline of fork means with a percentile bootstrap
 * interval (expanded, see sl_bench_ratio_bootstrap) and Fieller's
 * interval.  Failed forks are excluded from both sides' statistics.
 * @param[out] out_cmp written only on success; free with
 *   sl_bench_cmp_destroy.
 * @return as sl_bench_run.  A ratio that cannot be computed (too few ok
 *   forks) is not an error: see rc_bootstrap and rc_fieller.
 */
int sl_bench_compare(const sl_bench_opts_t *opts,
                     const sl_bench_fn_t *baseline,
                     const sl_bench_fn_t *candidate,
                     sl_bench_cmp_t **out_cmp);

/** @brief sl_bench_compare of two external commands. */
int sl_bench_compare_cmd(const sl_bench_opts_t *opts,
                         char *const argv_baseline[],
                         char *const argv_candidate[],
                         sl_bench_cmp_t **out_cmp);

void sl_bench_result_destroy(sl_bench_result_t *res);
void sl_bench_cmp_destroy(sl_bench_cmp_t *cmp);

/** @brief Human-readable summary.  @return SL_OK or SL_EIO. */
int sl_bench_result_print(const sl_bench_result_t *res, FILE *f);
int sl_bench_cmp_print(const sl_bench_cmp_t *cmp, FILE *f);

/**
 * @brief Raw per-iteration data and the summary statistics as JSON
 * (format "sluice-bench/1", described in bench/README.md).
 * @return SL_OK, SL_ENOMEM, SL_EIO.
 */
int sl_bench_result_write_json(const sl_bench_result_t *res,
                               const char *path);
int sl_bench_cmp_write_json(const sl_bench_cmp_t *cmp, const char *path);

/** @brief CLOCK_MONOTONIC in nanoseconds, for timing iterations. */
int64_t sl_bench_now_ns(void);
/** @brief A whole decimal number and nothing else (benchmark options). */
bool sl_bench_parse_u64(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
