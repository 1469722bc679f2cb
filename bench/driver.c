/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-driver: the streaming driver (bench/ring.h).  It creates a
 * shared-memory ring and writes events into it at a fixed rate, stamped
 * with their scheduled generation time, for a consumer in another process
 * (a sluice source reading the ring).  It never waits for the consumer:
 * when the ring is full, events are counted as overflow.  Every report
 * interval it prints one line
 *
 *     t_s generated consumed backlog overflow
 *
 * usage: sluice-driver --ring PATH --rate EVENTS_PER_S --duration S
 *          [--capacity EVENTS] [--keys K] [--report-ms MS]
 * Exit status: 0; 3 if any event overflowed (the rate was not sustained).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

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
  const char *path = NULL;
  double rate = 0, duration = 0, capacity = 1 << 22, keys = 1000, rep = 1000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = v != NULL;
    if (ok && strcmp(a, "--ring") == 0) path = v;
    else if (ok && strcmp(a, "--rate") == 0) ok = parse_pos(v, &rate);
    else if (ok && strcmp(a, "--duration") == 0) ok = parse_pos(v, &duration);
    else if (ok && strcmp(a, "--capacity") == 0) ok = parse_pos(v, &capacity);
    else if (ok && strcmp(a, "--keys") == 0) ok = parse_pos(v, &keys);
    else if (ok && strcmp(a, "--report-ms") == 0) ok = parse_pos(v, &rep);
    else ok = false;
    if (!ok) {
      fprintf(stderr, "%s: bad or missing value for '%s'\nusage: %s --ring "
              "PATH --rate EVENTS_PER_S --duration S [--capacity EVENTS] "
              "[--keys K] [--report-ms MS]\n", argv[0], a, argv[0]);
      return 2;
    }
    i++;
  }
  if (path == NULL || rate <= 0 || duration <= 0) {
    fprintf(stderr, "%s: --ring, --rate and --duration are required\n",
            argv[0]);
    return 2;
  }
  sl_ring_t ring;
  int rc = sl_ring_create(path, (uint64_t)capacity, &ring);
  if (rc != 0) {
    fprintf(stderr, "%s: cannot create the ring '%s': %s\n", argv[0], path,
            strerror(-rc));
    return 1;
  }
  sl_driver_opts_t o = {rate, duration, (uint64_t)keys, (int64_t)rep,
                        print_report, NULL, NULL};
  sl_driver_report_t fin;
  sl_driver_run(&ring, &o, &fin);
  sl_ring_close(&ring);
  return fin.overflow ? 3 : 0;
}
