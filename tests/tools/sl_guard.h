/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guarded processes for the test tools (implemented in sl_servers.c, used
 * by sl_servers.c itself and by sl_kafka.c).  A guarded process is a
 * server owned by a guard: a fork of the test that runs only system calls
 * and holds the read end of a pipe whose only write end is in the test
 * process.  A stop writes a mode byte and closes the pipe; the death of
 * the test closes it without a byte, and the guard then stops the server
 * with its orphan signal (else its clean one) and removes rm_dir.  The server has
 * PR_SET_PDEATHSIG with its crash signal, so the death of the guard stops
 * it too, and it runs in its own session.  See docs/testing-servers.md.
 */
#ifndef SL_GUARD_H
#define SL_GUARD_H

#include <stdbool.h>
#include <sys/types.h>

#include "sluice/sluice.h"

typedef struct sl_guarded_s {
  pid_t guard;  /* -1 when stopped */
  pid_t pid;    /* the server process, -1 when stopped */
  int life_fd;  /* write end of the life pipe, -1 when stopped */
} sl_guarded_t;

typedef struct sl_guard_spec_s {
  char *const *argv;     /* argv[0] is an absolute path */
  char *const *envp;
  const char *cwd;       /* the server's working directory */
  const char *log_path;  /* stdout and stderr, appended */
  /* Removed (rm -rf) by the guard when the test dies without a stop;
   * NULL, or SL_TEST_KEEP in the environment, keeps it. */
  const char *rm_dir;
  int sig_clean;         /* explicit clean stop */
  int sig_crash;         /* explicit crash stop, and the guard's death */
  int sig_orphan;        /* the test's death; 0: sig_clean */
  int stop_timeout_ms;   /* then SIGKILL */
} sl_guard_spec_t;

/** @brief Start spec->argv under a guard.  *out is written on success;
 * the caller stops it with sl_guard_stop.  @thread any */
int sl_guard_spawn(const sl_guard_spec_t *spec, sl_guarded_t *out,
                   sl_error_t **out_err);

/** @brief True when the guard has exited (the server exited by itself);
 * the guard is then reaped and g reads as stopped (life_fd closed). */
bool sl_guard_has_exited(sl_guarded_t *g);

/**
 * @brief Stop the server (is_crash: its crash signal, else its clean
 * signal) and reap the guard within timeout_ms (then both are killed).
 * A stopped g does nothing.
 * @return SL_OK; -ETIMEDOUT when it had to be killed.
 */
int sl_guard_stop(sl_guarded_t *g, bool is_crash, int timeout_ms);

/** @brief A port in 20000-32767 that 127.0.0.1 can bind and listen on
 * now (below Linux's ephemeral range), or a negated errno. */
int sl_pick_port(void);

#endif
