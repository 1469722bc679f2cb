/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl-kafka-check: which Kafka broker versions the librdkafka sluice is
 * built with works against.  It starts a one-node broker from a directory
 * of broker jars (tools/kafka-jars VERSION resolves one) and runs, with
 * librdkafka, each client feature sluice's Kafka source and sink use, one
 * line per step:
 *
 *   sl-kafka-check [--jars DIR] [--bootstrap HOST:PORT]
 *
 * --bootstrap checks a running broker instead.  Exit status 0 when every
 * step passed, 1 otherwise, 2 for bad arguments.  docs/testing-servers.md
 * has the table of the versions checked.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sl_kafka.h"
#include "sl_kafka_client.h"

int main(int argc, char **argv) {
  const char *jars = NULL, *bootstrap = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--jars") == 0 && i + 1 < argc) {
      jars = argv[++i];
    } else if (strcmp(argv[i], "--bootstrap") == 0 && i + 1 < argc) {
      bootstrap = argv[++i];
    } else {
      fprintf(stderr,
              "sl-kafka-check: unknown argument '%s'\n"
              "usage: sl-kafka-check [--jars DIR] [--bootstrap HOST:PORT]\n",
              argv[i]);
      return 2;
    }
  }
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (bootstrap == NULL) {
    sl_kafka_opts_t o;
    sl_kafka_opts_init(&o);
    o.jars_dir = jars;
    if (sl_kafka_start(&o, &k, &err) != SL_OK) {
      fprintf(stderr, "sl-kafka-check: %s\n", sl_error_message(err));
      sl_error_destroy(err);
      return 1;
    }
    bootstrap = sl_kafka_bootstrap(k);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("broker %s at %s, started in %.2f s\n", sl_kafka_version(k),
           bootstrap,
           (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  }
  printf("librdkafka %s\n", rd_kafka_version_str());
  fflush(stdout);
  int failed = sl_kafka_client_check(bootstrap, stdout);
  sl_kafka_destroy(k);
  printf("steps: %d ok, %d failed\n", SL_KAFKA_CHECK_STEPS - failed, failed);
  return failed == 0 ? 0 : 1;
}
