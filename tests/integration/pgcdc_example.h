/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers of the postgres-cdc example tests (test_pgcdc_example_*.c): one
 * `sluice run` child at a time (killed when the test exits), its stderr
 * per run, bounded waits that fail with the run's log, and query results
 * as text for field-by-field comparisons.  Header-only: each test
 * program includes it once.
 */
#ifndef SL_PGCDC_EXAMPLE_H
#define SL_PGCDC_EXAMPLE_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_servers.h"
#include "sl_test.h"

static pid_t g_child = -1;
static pid_t g_self;
static int g_run;

static void kill_child(void) {
  if (getpid() == g_self && g_child > 0) {
    kill(g_child, SIGKILL);
    waitpid(g_child, NULL, 0);
    g_child = -1;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000},
            NULL);
}

static void run_err_path(int run, char *buf, size_t n) {
  snprintf(buf, n, "%s/stderr-%d.txt", sl_test_dir(), run);
}

/* The current run's stderr (caller frees). */
static char *run_err(void) {
  char p[4400];
  run_err_path(g_run, p, sizeof(p));
  char *t = sl_test_read_file(p, NULL);
  if (t == NULL) t = strdup("");
  return t;
}

/* Start run n of argv (stderr in stderr-n.txt). */
static void start_run(int n, const char *const *argv) {
  char p[4400];
  g_run = n;
  run_err_path(n, p, sizeof(p));
  g_child = sl_test_spawn(argv, NULL, p, SL_TEST_SPAWN_NO_STDOUT);
}

/* The child must still run (a failed job would exit 1). */
static void assert_running(const char *when) {
  int st = 0;
  if (g_child <= 0 || waitpid(g_child, &st, WNOHANG) == g_child) {
    g_child = -1;
    char *t = run_err();
    SL_TEST_FAIL("%s: run %d ended with status 0x%x:\n%s", when, g_run, st,
                 t);
  }
}

static int wait_child(double timeout_s, const char *what) {
  if (g_child <= 0) SL_TEST_FAIL("%s: no sluice process", what);
  double t0 = now_s();
  for (;;) {
    int st;
    pid_t r = waitpid(g_child, &st, WNOHANG);
    if (r == g_child) {
      g_child = -1;
      return st;
    }
    if (r < 0) SL_TEST_FAIL("waitpid: %s", strerror(errno));
    if (now_s() - t0 > timeout_s) {
      char *t = run_err();
      SL_TEST_FAIL("%s: sluice (run %d) did not exit within %.0f s:\n%s",
                   what, g_run, timeout_s, t);
    }
    nap_ms(20);
  }
}

/* Wait (bounded) until the current run's stderr has needle. */
static void wait_log(const char *needle) {
  double t0 = now_s();
  for (;;) {
    char *t = run_err();
    bool has = strstr(t, needle) != NULL;
    free(t);
    if (has) return;
    assert_running(needle);
    if (now_s() - t0 > 240) {
      t = run_err();
      SL_TEST_FAIL("run %d: the log never had '%s':\n%s", g_run, needle, t);
    }
    nap_ms(50);
  }
}

/* The newest completed checkpoint of d (a chk-N with its _metadata: the
 * rename of _metadata is the commit point), 0 when none. */
static uint64_t newest_completed_in(const char *d) {
  DIR *dd = opendir(d);
  if (dd == NULL) return 0;
  uint64_t best = 0;
  struct dirent *de;
  while ((de = readdir(dd)) != NULL) {
    unsigned long long id;
    char tail;
    if (sscanf(de->d_name, "chk-%llu%c", &id, &tail) != 1) continue;
    char m[4700];
    snprintf(m, sizeof(m), "%s/%s/_metadata", d, de->d_name);
    if (id > best && access(m, F_OK) == 0) best = id;
  }
  closedir(dd);
  return best;
}

/* Wait (bounded) until n checkpoints newer than *id completed in d;
 * *id becomes the newest. */
static void wait_checkpoints(const char *d, uint64_t *id, int n) {
  for (int i = 0; i < n; i++) {
    double t0 = now_s();
    uint64_t k;
    while ((k = newest_completed_in(d)) <= *id) {
      assert_running("waiting for a checkpoint");
      if (now_s() - t0 > 240) SL_TEST_FAIL("no checkpoint completed in %s", d);
      nap_ms(20);
    }
    *id = k;
  }
}

/* The run resumed from checkpoint id or a newer one. */
static void assert_resumed(uint64_t id) {
  wait_log("resuming from checkpoint ");
  char *t = run_err();
  const char *p = strstr(t, "resuming from checkpoint ");
  unsigned long long got = 0;
  if (p == NULL ||
      sscanf(p, "resuming from checkpoint %llu", &got) != 1 || got < id)
    SL_TEST_FAIL("run %d was to resume from checkpoint %llu or newer:\n%s",
                 g_run, (unsigned long long)id, t);
  free(t);
}

static void pg_ok(PGconn *p, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(p, sql, NULL, &err), err);
}

static inline void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

/* Rows of a query as "a|b|...\n" text, "\N" for NULL (caller frees). */
static char *pg_text(PGconn *p, const char *sql) {
  PGresult *r = PQexec(p, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    SL_TEST_FAIL("%s: %s", sql, PQerrorMessage(p));
  sl_bytes_t b;
  sl_bytes_init(&b);
  int nf = PQnfields(r);
  for (int i = 0; i < PQntuples(r); i++)
    for (int k = 0; k < nf; k++)
      SL_ASSERT_OK(sl_bytes_printf(
          &b, "%s%s", PQgetisnull(r, i, k) ? "\\N" : PQgetvalue(r, i, k),
          k + 1 < nf ? "|" : "\n"));
  PQclear(r);
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

/* The first line where two texts differ, for a failure message. */
static void first_diff(const char *a, const char *b, char *out, size_t n) {
  size_t line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') {
      line++;
      la = a + 1;
      lb = b + 1;
    }
    a++, b++;
  }
  int ea = (int)strcspn(la, "\n"), eb = (int)strcspn(lb, "\n");
  if (ea > 160) ea = 160;
  if (eb > 160) eb = 160;
  snprintf(out, n, "line %zu: want '%.*s', got '%.*s'", line, ea, la, eb,
           lb);
}

#endif
