/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice command: run or validate a pipeline file.  Signals are taken
 * by a dedicated thread with sigwait(), which cancels the job; a reporter
 * thread prints progress from the job's metrics.  Uses the public API only.
 * Exit codes are listed in usage() and docs/cli.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/pipeline.h"
#include "cli/progress.h"
#include "sluice/sluice.h"

enum {
  EXIT_OK = 0,
  EXIT_JOB_FAILED = 1,
  EXIT_USAGE = 2,
  EXIT_SIGINT = 130,
  EXIT_SIGTERM = 143
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice run PIPELINE.yaml [options]\n"
          "       sluice validate PIPELINE.yaml [--connect] "
          "[--set KEY=VALUE ...]\n"
          "       sluice --help | --version\n"
          "\n"
          "options of run:\n"
          "  --parallelism N        default parallelism of every operator\n"
          "  --set KEY=VALUE        override a field of the pipeline file,\n"
          "                         e.g. --set source.count=1000 or\n"
          "                         --set transforms[2].aggregate.emit=final\n"
          "  --metrics-json FILE    write the final metrics as JSON to FILE\n"
          "  --from-checkpoint DIR  start from a checkpoint (a chk-N directory)\n"
          "  --resume               start from the newest usable checkpoint of\n"
          "                         the pipeline's checkpoint dir, if any\n"
          "  --allow-duplicate-sink-output\n"
          "                         restore even when a transactional sink\n"
          "                         already committed output of a newer\n"
          "                         checkpoint (that output is emitted again)\n"
          "  --progress-interval S  seconds between progress reports\n"
          "                         (default 1 on a terminal, else 5; 0 = off)\n"
          "  --quiet                no progress and no summary\n"
          "\n"
          "options of validate:\n"
          "  --set KEY=VALUE        as for run\n"
          "  --connect              also connect to the sink's server: host,\n"
          "                         credentials, table, column types and\n"
          "                         server settings\n"
          "\n"
          "exit codes:\n"
          "  0    the job finished (or the pipeline is valid)\n"
          "  1    the job failed while running (for example an input\n"
          "       that cannot be opened, or a malformed record)\n"
          "  2    bad usage, or an invalid pipeline file or --set\n"
          "  130  cancelled by SIGINT; 143 cancelled by SIGTERM\n");
}

/*
 * The signal thread.  SIGINT and SIGTERM cancel the job.  SIGUSR1 is how
 * the main thread wakes it when the job is over; the thread ends only when
 * is_over is set, so a SIGUSR1 sent from outside is ignored (it used to end
 * the thread and leave SIGINT and SIGTERM blocked for good).
 */
typedef struct sigctx_s {
  pthread_t thread;
  sigset_t set;
  sl_job_t *job;
  pthread_mutex_t lock;
  int signo;    /* the signal that cancelled the job, 0 if none; lock */
  bool is_over; /* the job has returned; lock */
} sigctx_t;

static void *signal_main(void *arg) {
  sigctx_t *s = arg;
  for (;;) {
    int sig = 0;
    if (sigwait(&s->set, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      pthread_mutex_lock(&s->lock);
      bool is_over = s->is_over;
      pthread_mutex_unlock(&s->lock);
      if (is_over) return NULL;
      continue; /* not ours: someone else sent SIGUSR1 */
    }
    pthread_mutex_lock(&s->lock);
    bool is_first = s->signo == 0;
    if (is_first) s->signo = sig;
    pthread_mutex_unlock(&s->lock);
    if (is_first) {
      fprintf(stderr, "\nsluice: received %s, cancelling the job\n",
              sig == SIGINT ? "SIGINT" : "SIGTERM");
      sl_job_cancel(s->job);
    }
  }
}

static bool parse_uint(const char *s, uint32_t max, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (s[0] == '\0' || s[0] == '-' || *end != '\0' || errno || v > max)
    return false;
  *out = (uint32_t)v;
  return true;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    return EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("sluice %s\n", sl_version());
    return EXIT_OK;
  }
  bool is_run = strcmp(argv[1], "run") == 0;
  if (!is_run && strcmp(argv[1], "validate") != 0) {
    fprintf(stderr, "sluice: unknown command '%s'; expected run or validate "
            "(see sluice --help)\n", argv[1]);
    return EXIT_USAGE;
  }
  const char *file = NULL, *metrics_json = NULL;
  const char **sets = calloc((size_t)argc, sizeof(char *));
  uint32_t n_sets = 0, parallelism = 0;
  double interval = -1;
  bool is_quiet = false, is_resume = false, is_connect = false;
  bool is_allow_dup = false;
  const char *restore_from = NULL;
  int exit_code = EXIT_USAGE;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    bool has_val = false;
    if (strncmp(a, "--", 2) == 0) {
      const char *eq = strchr(a, '=');
      static const char *with_val[] = {"--parallelism", "--set",
                                       "--metrics-json", "--progress-interval",
                                       "--from-checkpoint"};
      for (size_t k = 0; k < sizeof(with_val) / sizeof(with_val[0]); k++) {
        size_t n = strlen(with_val[k]);
        if (strncmp(a, with_val[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
          has_val = true;
          if (eq) {
            val = eq + 1;
          } else if (i + 1 < argc) {
            val = argv[++i];
          } else {
            fprintf(stderr, "sluice: option %s needs a value\n", a);
            goto out;
          }
          break;
        }
      }
    }
    if (has_val && strncmp(a, "--parallelism", 13) == 0) {
      if (!parse_uint(val, SL_MAX_PARALLELISM_LIMIT, &parallelism) ||
          parallelism == 0) {
        fprintf(stderr, "sluice: --parallelism: expected a positive integer "
                "up to %u, got '%s'\n", SL_MAX_PARALLELISM_LIMIT, val);
        goto out;
      }
    } else if (has_val && strncmp(a, "--set", 5) == 0) {
      sets[n_sets++] = val;
    } else if (has_val && strncmp(a, "--metrics-json", 14) == 0) {
      metrics_json = val;
    } else if (has_val && strncmp(a, "--progress-interval", 19) == 0) {
      char *end;
      interval = strtod(val, &end);
      if (*end != '\0' || val[0] == '\0' || !(interval >= 0) || interval > 86400) {
        fprintf(stderr, "sluice: --progress-interval: expected seconds "
                "between 0 and 86400, got '%s'\n", val);
        goto out;
      }
    } else if (has_val && strncmp(a, "--from-checkpoint", 17) == 0) {
      restore_from = val;
    } else if (strcmp(a, "--resume") == 0) {
      is_resume = true;
    } else if (strcmp(a, "--allow-duplicate-sink-output") == 0) {
      is_allow_dup = true;
    } else if (strcmp(a, "--connect") == 0) {
      is_connect = true;
    } else if (strcmp(a, "--quiet") == 0) {
      is_quiet = true;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "sluice: unknown option '%s' (see sluice --help)\n", a);
      goto out;
    } else if (file == NULL) {
      file = a;
    } else {
      fprintf(stderr, "sluice: more than one pipeline file: '%s' and '%s'\n",
              file, a);
      goto out;
    }
  }
  if (file == NULL) {
    fprintf(stderr, "sluice: %s needs a pipeline file\n", argv[1]);
    goto out;
  }
  if (restore_from && is_resume) {
    fprintf(stderr, "sluice: give either --from-checkpoint or --resume\n");
    goto out;
  }
  if (!is_run && (parallelism || metrics_json || interval >= 0 || is_quiet ||
                  restore_from || is_resume || is_allow_dup)) {
    fprintf(stderr, "sluice: validate takes only --set and --connect\n");
    goto out;
  }
  if (is_run && is_connect) {
    fprintf(stderr, "sluice: --connect is an option of validate\n");
    goto out;
  }

  sl_pipeline_t *pl = NULL;
  char *msg = NULL;
  if (sl_pipeline_load(file, sets, n_sets, &pl, &msg) != SL_OK) {
    fprintf(stderr, "sluice: %s\n", msg ? msg : "cannot load the pipeline");
    sl_free(msg);
    goto out;
  }
  sl_job_t *job = NULL;
  sl_pipeline_run_t run = {parallelism, restore_from, is_resume, !is_run,
                           is_connect,  is_allow_dup};
  if (sl_pipeline_build(pl, &run, &job, &msg) != SL_OK) {
    fprintf(stderr, "sluice: %s\n", msg ? msg : "invalid pipeline");
    sl_free(msg);
    sl_pipeline_destroy(pl);
    goto out;
  }
  if (!is_run && is_connect && sl_pipeline_check_connect(pl, &msg) != SL_OK) {
    fprintf(stderr, "sluice: %s\n", msg ? msg : "the sink check failed");
    sl_free(msg);
    sl_job_destroy(job);
    sl_pipeline_destroy(pl);
    goto out;
  }
  if (!is_run) {
    printf("%s: valid%s\n", file, is_connect ? " (connected)" : "");
    sl_job_destroy(job);
    sl_pipeline_destroy(pl);
    exit_code = EXIT_OK;
    goto out;
  }
  /* Open the metrics file now: a path that cannot be written is a usage
   * error found before the job runs, not after.  It is truncated when the
   * metrics are written. */
  int metrics_fd = -1;
  if (metrics_json) {
    metrics_fd = open(metrics_json, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (metrics_fd < 0) {
      fprintf(stderr, "sluice: --metrics-json: cannot open '%s' for "
              "writing: %s\n", metrics_json, strerror(errno));
      sl_job_destroy(job);
      sl_pipeline_destroy(pl);
      goto out;
    }
  }

  /* Signals go to the signal thread only; block them before any thread. */
  sigctx_t sc;
  memset(&sc, 0, sizeof(sc));
  sigemptyset(&sc.set);
  sigaddset(&sc.set, SIGINT);
  sigaddset(&sc.set, SIGTERM);
  sigaddset(&sc.set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
  pthread_mutex_init(&sc.lock, NULL);
  sc.job = job;
  pthread_create(&sc.thread, NULL, signal_main, &sc);

  bool is_tty = isatty(STDERR_FILENO);
  if (interval < 0) interval = is_tty ? 1.0 : 5.0;
  sl_progress_t *prog = NULL;
  if (!is_quiet)
    sl_progress_start(job, sl_pipeline_name(pl), interval, is_tty, &prog);
  if (!is_quiet)
    fprintf(stderr, "sluice: running '%s' (%s)\n", sl_pipeline_name(pl),
            sl_pipeline_is_unbounded(pl) ? "unbounded: stop with Ctrl-C"
                                         : "bounded");
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  sl_progress_stop(prog);

  pthread_mutex_lock(&sc.lock);
  sc.is_over = true;
  pthread_mutex_unlock(&sc.lock);
  pthread_kill(sc.thread, SIGUSR1);
  pthread_join(sc.thread, NULL);
  int signo = sc.signo;
  pthread_mutex_destroy(&sc.lock);

  if (!is_quiet) sl_progress_summary(job, sl_pipeline_name(pl), stderr);
  if (metrics_json) {
    char *jerr = NULL;
    if (sl_progress_write_json(job, sl_pipeline_name(pl), rc, metrics_fd,
                               metrics_json, &jerr) != SL_OK) {
      fprintf(stderr, "sluice: %s\n", jerr ? jerr : "cannot write metrics");
      free(jerr);
      if (rc == SL_OK) rc = SL_EIO;
    }
    if (close(metrics_fd) != 0 && rc == SL_OK) {
      fprintf(stderr, "sluice: cannot write metrics to '%s': %s\n",
              metrics_json, strerror(errno));
      rc = SL_EIO;
    }
  }
  if (rc == SL_OK) {
    exit_code = EXIT_OK;
  } else if (rc == SL_ECANCELED && signo) {
    fprintf(stderr, "sluice: job '%s' cancelled by %s; output written so far "
            "is kept\n", sl_pipeline_name(pl),
            signo == SIGINT ? "SIGINT" : "SIGTERM");
    exit_code = signo == SIGINT ? EXIT_SIGINT : EXIT_SIGTERM;
  } else {
    fprintf(stderr, "sluice: job '%s' failed: %s\n", sl_pipeline_name(pl),
            err ? sl_error_message(err) : sl_strerror(rc));
    exit_code = EXIT_JOB_FAILED;
  }
  sl_error_destroy(err);
  sl_job_destroy(job);
  sl_pipeline_destroy(pl);
out:
  free(sets);
  return exit_code;
}
