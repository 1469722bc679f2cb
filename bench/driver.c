/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-driver: the streaming driver (bench/ring.h, bench/workload.h) as
 * a program of its own.  It creates the shared-memory rings of a workload
 * under a path prefix and writes events into them at a fixed rate, stamped
 * with their scheduled generation time, for consumers in other processes
 * (sluice ring sources, bench/stream_io.h).  It never waits for them: when
 * a ring is full, events are counted as overflow.  Every report interval
 * it prints one line
 *
 *     t_s generated consumed backlog overflow
 *
 * usage: sluice-driver --ring PREFIX --rate EVENTS_PER_S --duration S
 *          [--workload keys|pairs|nexmark] [--splits N] [--capacity EVENTS]
 *          [--keys K] [--zipf S] [--report-ms MS]
 * The rings are PREFIX.<stream>.<split> (workload.h); they are left in
 * place at exit for the consumers to drain.  Exit status: 0; 3 if any
 * event overflowed (the rate was not sustained); 1 on errors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

static void print_report(void *user, const sl_driver_report_t *r) {
  (void)user;
  printf("%.3f %llu %llu %llu %llu\n", r->t_s,
         (unsigned long long)r->generated, (unsigned long long)r->consumed,
         (unsigned long long)r->backlog, (unsigned long long)r->overflow);
  fflush(stdout);
}

static bool parse_pos(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v > 0)) return false;
  *out = v;
  return true;
}

int main(int argc, char **argv) {
  const char *path = NULL, *workload = "keys";
  double rate = 0, duration = 0, capacity = 1 << 22, keys = 1000, rep = 1000;
  double splits = 1, zipf = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = v != NULL;
    if (ok && strcmp(a, "--ring") == 0) path = v;
    else if (ok && strcmp(a, "--workload") == 0) workload = v;
    else if (ok && strcmp(a, "--rate") == 0) ok = parse_pos(v, &rate);
    else if (ok && strcmp(a, "--duration") == 0) ok = parse_pos(v, &duration);
    else if (ok && strcmp(a, "--capacity") == 0) ok = parse_pos(v, &capacity);
    else if (ok && strcmp(a, "--keys") == 0) ok = parse_pos(v, &keys);
    else if (ok && strcmp(a, "--zipf") == 0) ok = parse_pos(v, &zipf);
    else if (ok && strcmp(a, "--splits") == 0) ok = parse_pos(v, &splits);
    else if (ok && strcmp(a, "--report-ms") == 0) ok = parse_pos(v, &rep);
    else ok = false;
    if (!ok) {
      fprintf(stderr, "%s: bad or missing value for '%s'\nusage: %s --ring "
              "PREFIX --rate EVENTS_PER_S --duration S [--workload "
              "keys|pairs|nexmark] [--splits N] [--capacity EVENTS] "
              "[--keys K] [--zipf S] [--report-ms MS]\n", argv[0], a,
              argv[0]);
      return 2;
    }
    i++;
  }
  if (path == NULL || rate <= 0 || duration <= 0) {
    fprintf(stderr, "%s: --ring, --rate and --duration are required\n",
            argv[0]);
    return 2;
  }
  sl_workload_t w;
  sl_workload_defaults(&w);
  if (strcmp(workload, "keys") == 0) w.kind = SL_WORKLOAD_KEYS;
  else if (strcmp(workload, "pairs") == 0) w.kind = SL_WORKLOAD_PAIRS;
  else if (strcmp(workload, "nexmark") == 0) w.kind = SL_WORKLOAD_NEXMARK;
  else {
    fprintf(stderr, "%s: unknown workload '%s' (keys, pairs, nexmark)\n",
            argv[0], workload);
    return 2;
  }
  w.splits = (uint32_t)splits;
  w.capacity = (uint64_t)capacity;
  w.keys = (uint64_t)keys;
  w.zipf = zipf;
  w.nexmark.events_per_second = rate;
  if (sl_workload_init(&w) != 0) {
    fprintf(stderr, "%s: bad workload settings (--splits 1..%d, --keys "
            ">= 1)\n", argv[0], SL_WORKLOAD_MAX_SPLITS);
    return 2;
  }
  sl_ring_t rings[SL_WORKLOAD_MAX_STREAMS * SL_WORKLOAD_MAX_SPLITS];
  int rc = sl_workload_create_rings(&w, path, rings);
  if (rc != 0) {
    fprintf(stderr, "%s: cannot create the rings '%s.*': %s\n", argv[0], path,
            strerror(-rc));
    sl_workload_close(&w);
    return 1;
  }
  sl_driver_opts_t o;
  memset(&o, 0, sizeof(o));
  o.rate = rate;
  o.duration_s = duration;
  o.report_ms = (int64_t)rep;
  o.report = print_report;
  o.fill = sl_workload_fill;
  o.fill_user = &w;
  sl_driver_report_t fin;
  sl_driver_run_rings(rings, w.n_rings, &o, &fin);
  for (uint32_t i = 0; i < w.n_rings; i++) sl_ring_close(&rings[i]);
  sl_workload_close(&w);
  if (fin.dropped) {
    fprintf(stderr, "%s: %llu events did not fit their ring's slots\n",
            argv[0], (unsigned long long)fin.dropped);
    return 1;
  }
  return fin.overflow ? 3 : 0;
}
