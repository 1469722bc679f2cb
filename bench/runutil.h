/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the benchmarks that drive real servers and whole
 * processes (bench_db.c, bench_kafka.c, bench_cdc.c): running a command
 * with its output in a log, small file chores, the seeded order of a
 * round's arms, and the report lines (a figure with its Student-t
 * interval; a ratio with the harness's unpaired intervals and one paired
 * by round).  Part of sl_bench (no libsluice).
 *
 * Arrays of per-round (or per-fork) values may hold NaN for "no value"
 * (a failed run); the report functions leave those out.
 *
 * @thread any; nothing here keeps state.
 */
#ifndef SL_BENCH_RUNUTIL_H
#define SL_BENCH_RUNUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The 1-minute load average, -1 when unknown. */
double sl_bench_loadavg1(void);

/** @brief Write text to path (truncating).  0, or -1 with a message on
 *  stderr naming the path. */
int sl_bench_write_file(const char *path, const char *text);

/**
 * @brief Start argv (a bare argv[0] is searched in PATH) with stdin from
 * /dev/null, stdout to out (truncated; NULL: appended to log) and stderr
 * appended to log.  @return the pid, or -1.
 */
pid_t sl_bench_spawn(char *const argv[], const char *out, const char *log);
/** @brief The exit status of pid, 128 + the signal when it was killed,
 *  -1 when it could not be waited for. */
int sl_bench_wait(pid_t pid);
/** @brief sl_bench_spawn then sl_bench_wait; -1 when it could not start. */
int sl_bench_spawn_wait(char *const argv[], const char *out,
                        const char *log);
/** @brief `rm -rf path`. */
void sl_bench_rm_rf(const char *path);

/**
 * @brief The path of program `name` in this program's own directory (the
 * benchmark programs and `sluice` are all in the build's bin/).
 * @return 0, or -1 when /proc/self/exe cannot be read or it does not fit.
 */
int sl_bench_sibling(const char *name, char *buf, size_t size);

/** @brief Shuffle order[0..n) (Fisher-Yates with rng). */
void sl_bench_shuffle(size_t *order, size_t n, sl_bench_rng_t *rng);

/**
 * @brief One report line: "label  mean X unit  95% CI [lo, hi]  median
 * min max  (n <noun>)" over the finite values of x[0..n), each times
 * scale; width is the label's column width.
 */
void sl_bench_print_stat(const char *label, int width, const double *x,
                         size_t n, double scale, const char *unit,
                         const char *noun);

/**
 * @brief One ratio line, cand / base, over the finite values of
 * cand[0..n) and base[0..n): the ratio of the means with the expanded
 * percentile bootstrap (seeded with seed) and Fieller's 95% intervals
 * (unpaired), then, paired by index (the values at the same index ran in
 * the same round), the geometric mean of the per-round ratios with a
 * Student-t 95% interval on their logarithms.
 */
void sl_bench_print_ratio(const char *label, int width, const double *cand,
                          const double *base, size_t n, uint64_t seed,
                          const char *noun);

#ifdef __cplusplus
}
#endif
#endif
