/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the server benchmarks; see runutil.h. */
#include "runutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

double sl_bench_loadavg1(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

int sl_bench_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  fputs(text, f);
  return fclose(f) == 0 ? 0 : -1;
}

pid_t sl_bench_spawn(char *const argv[], const char *out, const char *log) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int fo = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                 : fd;
    if (fo >= 0) dup2(fo, 1);
    if (fd >= 0) dup2(fd, 2);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    execvp(argv[0], argv);
    _exit(127);
  }
  return pid;
}

int sl_bench_wait(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st)     ? WEXITSTATUS(st)
         : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                           : -1;
}

int sl_bench_spawn_wait(char *const argv[], const char *out,
                        const char *log) {
  pid_t p = sl_bench_spawn(argv, out, log);
  return p < 0 ? -1 : sl_bench_wait(p);
}

void sl_bench_rm_rf(const char *path) {
  char *argv[] = {"rm", "-rf", (char *)path, NULL};
  (void)sl_bench_spawn_wait(argv, NULL, "/dev/null");
}

int sl_bench_sibling(const char *name, char *buf, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  int len = snprintf(buf, size, "%s/%s", slash ? self : ".", name);
  return len < 0 || (size_t)len >= size ? -1 : 0;
}

void sl_bench_shuffle(size_t *order, size_t n, sl_bench_rng_t *rng) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)sl_bench_rng_below(rng, i);
    size_t t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
}

/* The finite values of x[0..n) into a new array (*out_n of them). */
static double *finite_of(const double *x, size_t n, size_t *out_n) {
  double *v = malloc((n ? n : 1) * sizeof(double));
  size_t m = 0;
  for (size_t i = 0; v && i < n; i++)
    if (isfinite(x[i])) v[m++] = x[i];
  *out_n = m;
  return v;
}

static int singular_len(const char *noun) {
  size_t n = strlen(noun);
  return (int)(n > 1 && noun[n - 1] == 's' ? n - 1 : n);
}

void sl_bench_print_stat(const char *label, int width, const double *x,
                         size_t n, double scale, const char *unit,
                         const char *noun) {
  size_t m;
  double *v = finite_of(x, n, &m);
  if (v == NULL || m == 0) {
    printf("  %-*s no successful %s\n", width, label, noun);
    free(v);
    return;
  }
  double *s = malloc(m * sizeof(double));
  if (s == NULL) {
    free(v);
    return;
  }
  memcpy(s, v, m * sizeof(double));
  sl_bench_sort(s, m);
  double med = sl_bench_quantile_sorted(s, m, 0.5);
  sl_bench_interval_t ci;
  if (m >= 2 && sl_bench_t_interval(v, m, 0.95, &ci) == SL_OK)
    printf("  %-*s mean %10.4g %s  95%% CI [%.4g, %.4g]  median %.4g  "
           "min %.4g  max %.4g  (%zu %s)\n",
           width, label, ci.estimate * scale, unit, ci.lo * scale,
           ci.hi * scale, med * scale, s[0] * scale, s[m - 1] * scale, m,
           noun);
  else /* "(1 fork)": the noun without its plural s */
    printf("  %-*s mean %10.4g %s (1 %.*s)\n", width, label,
           sl_bench_mean(v, m) * scale, unit, singular_len(noun), noun);
  free(s);
  free(v);
}

void sl_bench_print_ratio(const char *label, int width, const double *cand,
                          const double *base, size_t n, uint64_t seed,
                          const char *noun) {
  size_t nc, nb;
  double *c = finite_of(cand, n, &nc), *b = finite_of(base, n, &nb);
  double *lr = malloc((n ? n : 1) * sizeof(double));
  if (c == NULL || b == NULL || lr == NULL || nc < 2 || nb < 2) {
    printf("  %-*s too few %s\n", width, label, noun);
    goto out;
  }
  sl_bench_boot_opts_t bo;
  sl_bench_boot_opts_init(&bo);
  bo.seed = seed;
  sl_bench_interval_t bi, fie;
  int rb = sl_bench_ratio_bootstrap(b, nb, c, nc, &bo, &bi);
  int rf = sl_bench_ratio_fieller(b, nb, c, nc, 0.95, &fie);
  printf("  %-*s %.4f", width, label,
         sl_bench_mean(c, nc) / sl_bench_mean(b, nb));
  if (rb == SL_OK) printf("  bootstrap [%.4f, %.4f]", bi.lo, bi.hi);
  if (rf == SL_OK && fie.is_bounded)
    printf("  Fieller [%.4f, %.4f]", fie.lo, fie.hi);
  else if (rf == SL_OK)
    printf("  Fieller unbounded");
  /* Paired by round: the arms of a round ran within minutes of each
   * other, so this removes the load that changes between rounds (a
   * supplement to the unpaired intervals, which treat the arms as
   * independent samples). */
  size_t m = 0;
  for (size_t r = 0; r < n; r++)
    if (isfinite(cand[r]) && isfinite(base[r]) && cand[r] > 0 && base[r] > 0)
      lr[m++] = log(cand[r] / base[r]);
  sl_bench_interval_t pc;
  if (m >= 2 && sl_bench_t_interval(lr, m, 0.95, &pc) == SL_OK)
    printf("  paired %.4f [%.4f, %.4f] (%zu rounds)", exp(pc.estimate),
           exp(pc.lo), exp(pc.hi), m);
  printf("\n");
out:
  free(c);
  free(b);
  free(lr);
}
