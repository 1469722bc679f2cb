/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl-holdproxy: the hold proxy as a program, for tests that run whole
 * processes.  A test harness starts it as a child, reads its port from the
 * first line of its output and drives it with one command per line on its
 * standard input; every command gets one line of answer.  End of input
 * (the harness died or closed the pipe) stops the proxy, so it never
 * outlives its harness.  See docs/testing-servers.md.
 *
 *   sl-holdproxy --pg|--mysql --upstream PORT [--listen PORT]
 *                [--rule RULE]...
 *   first line:          port N
 *   arm RULE          -> rule ID
 *   wait ID MS        -> paused | timeout
 *   release ID        -> released N
 *   count ID          -> attempts A held H released R dropped D paused P
 *   quit              -> bye (then exit 0)
 *   anything wrong    -> error MESSAGE
 * RULE: ACTION [times=N] [delay=MS] [tag="TAG"] [keep] match=TEXT
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_holdproxy.h"

static void usage(const char *why) {
  fprintf(stderr,
          "sl-holdproxy: %s\n"
          "usage: sl-holdproxy --pg|--mysql --upstream PORT [--listen PORT]"
          " [--rule RULE]...\n"
          "RULE: ACTION [times=N] [delay=MS] [tag=\"TAG\"] [keep] "
          "match=TEXT\n",
          why);
  exit(2);
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static int arm_text(sl_proxy_t *p, const char *text, int *out_id,
                    sl_error_t **out_err) {
  sl_proxy_rule_t r;
  char *storage = NULL;
  int rc = sl_proxy_rule_parse(text, &r, &storage, out_err);
  if (rc != SL_OK) return rc;
  rc = sl_proxy_arm(p, &r, out_id, out_err);
  sl_free(storage);
  return rc;
}

int main(int argc, char **argv) {
  sl_proxy_proto_t proto = 0;
  long upstream = 0, listen_port = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--pg") == 0) {
      proto = SL_PROXY_PG;
    } else if (strcmp(argv[i], "--mysql") == 0) {
      proto = SL_PROXY_MYSQL;
    } else if (strcmp(argv[i], "--upstream") == 0 && i + 1 < argc) {
      if (!parse_int(argv[++i], 1, 65535, &upstream))
        usage("--upstream: a port 1-65535");
    } else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
      if (!parse_int(argv[++i], 0, 65535, &listen_port))
        usage("--listen: a port 0-65535");
    } else if (strcmp(argv[i], "--rule") == 0 && i + 1 < argc) {
      i++; /* parsed once the proxy exists */
    } else {
      char msg[300];
      snprintf(msg, sizeof(msg), "unknown or incomplete argument '%s'",
               argv[i]);
      usage(msg);
    }
  }
  if (proto == 0) usage("--pg or --mysql is required");
  if (upstream == 0) usage("--upstream PORT is required");
  sl_proxy_t *p = NULL;
  sl_error_t *err = NULL;
  if (sl_proxy_start(proto, (int)upstream, (int)listen_port, &p, &err) !=
      SL_OK) {
    fprintf(stderr, "sl-holdproxy: %s\n", sl_error_message(err));
    sl_error_destroy(err);
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--rule") != 0) continue;
    int id;
    if (arm_text(p, argv[++i], &id, &err) != SL_OK) {
      fprintf(stderr, "sl-holdproxy: --rule: %s\n", sl_error_message(err));
      sl_error_destroy(err);
      sl_proxy_stop(p);
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("port %d\n", sl_proxy_port(p));
  char line[4096];
  while (fgets(line, sizeof(line), stdin) != NULL) {
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    if (n == 0) continue;
    char cmd[16];
    long id = -1, ms = 0;
    char extra;
    if (strncmp(line, "arm ", 4) == 0) {
      int rid;
      if (arm_text(p, line + 4, &rid, &err) != SL_OK) {
        printf("error %s\n", sl_error_message(err));
        sl_error_destroy(err);
        err = NULL;
      } else {
        printf("rule %d\n", rid);
      }
    } else if (strcmp(line, "quit") == 0) {
      printf("bye\n");
      break;
    } else if (sscanf(line, "%15s %ld %ld %c", cmd, &id, &ms, &extra) == 3 &&
               strcmp(cmd, "wait") == 0) {
      int rc = ms < 0 || ms > INT_MAX
                   ? SL_EINVAL
                   : sl_proxy_wait_paused(p, (int)id, (int)ms);
      if (rc == SL_OK)
        printf("paused\n");
      else if (rc == -ETIMEDOUT)
        printf("timeout\n");
      else
        printf("error wait: no rule %ld or bad timeout %ld\n", id, ms);
    } else if (sscanf(line, "%15s %ld %c", cmd, &id, &extra) == 2 &&
               strcmp(cmd, "release") == 0) {
      int rc = id < 0 || id > INT_MAX ? SL_EINVAL
                                      : sl_proxy_release(p, (int)id);
      if (rc >= 0)
        printf("released %d\n", rc);
      else
        printf("error release: no rule %ld\n", id);
    } else if (sscanf(line, "%15s %ld %c", cmd, &id, &extra) == 2 &&
               strcmp(cmd, "count") == 0) {
      sl_proxy_counts_t c;
      if (id < 0 || id > INT_MAX || sl_proxy_count(p, (int)id, &c) != SL_OK)
        printf("error count: no rule %ld\n", id);
      else
        printf("attempts %llu held %llu released %llu dropped %llu "
               "paused %llu\n",
               (unsigned long long)c.attempts, (unsigned long long)c.held,
               (unsigned long long)c.released, (unsigned long long)c.dropped,
               (unsigned long long)c.paused);
    } else {
      printf("error unknown command '%.100s' (arm, wait, release, count, "
             "quit)\n", line);
    }
  }
  sl_proxy_stop(p);
  return 0;
}
