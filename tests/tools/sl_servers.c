/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test servers: PostgreSQL 15 and MariaDB 10.11 started per test in a
 * fresh temporary directory on a free loopback port, owned by a guard
 * process, and SQL helpers for assertions.  See sl_servers.h and
 * docs/testing-servers.md.
 *
 * Processes.  The test process forks a guard; the guard forks the server
 * and execs it (after dropping to the postgres or mysql user when run as
 * root: setgid/setuid in the child instead of runuser, because runuser
 * forks and stays the parent of the server, so the pid we would hold and
 * signal would be runuser's).  The guard holds the read end of a "life
 * pipe" whose only write end is in the test process:
 *
 *   test --(life pipe: mode byte, then EOF)--> guard --(signal)--> server
 *
 *   - explicit stop: the test writes 'c' (clean) or 'k' (crash) and closes
 *     the pipe; the guard sends the stop signal, reaps the server within
 *     a bound (then SIGKILL) and exits; the test reaps the guard.
 *   - the test dies (SIGKILL included): the kernel closes the write end,
 *     the guard reads EOF without a mode byte, stops the server cleanly
 *     and removes the temporary directory.
 *   - the guard dies: the server has PR_SET_PDEATHSIG (set after the
 *     user change, which clears it) and gets its crash signal.
 *   - the server dies by itself: the guard notes it in the log and exits
 *     with status 100; the test sees that as "not ready" with the log.
 *
 * The guard and every child run only async-signal-safe calls between fork
 * and exec (the test may have threads, e.g. the proxy's), with every
 * string prepared before the fork.  The guard closes every descriptor but
 * its own, so another server's life pipe never stays open in it.  The
 * server gets its own session (setsid), so a ^C or a process-group kill of
 * the test reaches the guard, which then stops the server in order.
 */
#define _GNU_SOURCE
#include "sl_servers.h"
#include "sl_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG_BINDIR_DEFAULT "/usr/lib/postgresql/15/bin"
#define MAX_ARGS 64
#define GUARD_SERVER_EXITED 100

struct sl_server_s {
  sl_server_kind_t kind;
  bool is_durable;
  int max_prepared;
  int ready_timeout_ms;
  bool is_fixed_port;
  char **extra; /* NULL-terminated copy of opts.extra_settings */
  char dir[512];
  char data_dir[600];
  char log_path[600];
  char sock_path[600]; /* MariaDB */
  char conninfo[256];  /* PostgreSQL */
  char bin[512];
  int port;
  bool as_user; /* root: drop to uid/gid in the children */
  uid_t uid;
  gid_t gid;
  pid_t owner;  /* the process that started it (atexit acts there only) */
  pid_t guard;  /* -1 when stopped */
  pid_t server; /* -1 when stopped */
  int life_fd;  /* write end of the life pipe, -1 when stopped */
  bool has_db;  /* MariaDB: database "sluice" created */
  struct sl_server_s *next; /* live list for atexit, under live_mu */
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_server_t *live_head;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------------ */
/* Small utilities (parent side). */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool sl_pid_is_gone(pid_t pid) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  /* A zombie answers kill(pid, 0) but runs nothing. */
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return true;
  char buf[512];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *rp = strrchr(buf, ')');
  return rp != NULL && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* The last n_lines lines of path from offset on, into buf. */
static void log_tail(const char *path, off_t offset, int n_lines, char *buf,
                     size_t size) {
  buf[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(buf, size, "(no log: %s)", strerror(errno));
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= offset) {
    close(fd);
    snprintf(buf, size, "(log %s is empty)", path);
    return;
  }
  off_t len = st.st_size - offset;
  if (len > 16384) {
    offset = st.st_size - 16384;
    len = 16384;
  }
  char *text = malloc((size_t)len + 1);
  ssize_t n = text ? pread(fd, text, (size_t)len, offset) : -1;
  close(fd);
  if (n <= 0) {
    free(text);
    snprintf(buf, size, "(cannot read log %s)", path);
    return;
  }
  text[n] = '\0';
  while (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
  const char *start = text;
  int seen = 0;
  for (ssize_t i = n - 1; i >= 0; i--) {
    if (text[i] == '\n' && ++seen == n_lines) {
      start = text + i + 1;
      break;
    }
  }
  snprintf(buf, size, "%s", start);
  free(text);
}

static bool log_contains(const char *path, off_t offset, const char *needle) {
  char tail[16384];
  log_tail(path, offset, 1000, tail, sizeof(tail));
  return strstr(tail, needle) != NULL;
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : 0;
}

static int rm_entry(const char *path, const struct stat *st, int type,
                    struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type == FTW_DP) return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
  return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void remove_tree(const char *dir) {
  if (dir[0] == '\0' || getenv("SL_TEST_KEEP") != NULL) return;
  if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    fprintf(stderr, "sl_servers: cannot remove %s: %s\n", dir,
            strerror(errno));
}

/* A port in 20000-32767 (below Linux's ephemeral range, so an outgoing
 * connection never holds it) that 127.0.0.1 can bind and listen on now. */
static int pick_port(void) {
  static unsigned counter;
  unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)now_ms() ^
                  (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) << 20);
  for (int tries = 0; tries < 200; tries++) {
    seed = seed * 1103515245u + 12345u;
    int port = 20000 + (int)((seed >> 8) % 12768u);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(fd, 1) == 0;
    close(fd);
    if (ok) return port;
  }
  return -EADDRINUSE;
}

/* ------------------------------------------------------------------ */
/* Children: async-signal-safe code only between fork and exec/_exit. */

static void safe_write(int fd, const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void safe_write_int(int fd, long v) {
  char buf[24];
  int i = (int)sizeof(buf) - 1;
  bool neg = v < 0;
  unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;
  buf[i] = '\0';
  do {
    buf[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u > 0 && i > 1);
  if (neg) buf[--i] = '-';
  safe_write(fd, buf + i);
}

/* Move fds to 3.. in order and close everything else.  Returns false on
 * failure. */
static bool child_fds(const int *fds, int n) {
  int tmp[8];
  for (int i = 0; i < n; i++) {
    tmp[i] = fcntl(fds[i], F_DUPFD, 10); /* above the targets 3.. */
    if (tmp[i] < 0) return false;
  }
  for (int i = 0; i < n; i++)
    if (dup2(tmp[i], 3 + i) < 0) return false;
  close_range((unsigned)(3 + n), ~0u, 0);
  return true;
}

static void child_reset_signals(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  for (int s = 1; s < 32; s++)
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &sa, NULL);
}

/* Become the server user (when root), arm the parent-death signal (after
 * the user change, which clears it), wire stdio to the log and exec. */
static void child_exec(const sl_server_t *srv, int log_fd, int null_fd,
                       int pdeath_sig, pid_t parent, char *const argv[],
                       char *const envp[]) {
  child_reset_signals();
  if (srv->as_user) {
    if (setgroups(1, &srv->gid) != 0 || setgid(srv->gid) != 0 ||
        setuid(srv->uid) != 0) {
      safe_write(log_fd, "sl_servers: cannot become the server user\n");
      _exit(126);
    }
  }
  prctl(PR_SET_PDEATHSIG, pdeath_sig);
  if (getppid() != parent) _exit(125);
  if (dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
    _exit(124);
  close_range(3, ~0u, 0);
  if (chdir(srv->dir) != 0) _exit(123);
  execve(argv[0], argv, envp);
  safe_write(2, "sl_servers: cannot execute ");
  safe_write(2, argv[0]);
  safe_write(2, "\n");
  _exit(127);
}

struct guard_args {
  char *const *argv;
  char *const *envp;
  char *const *rm_argv; /* NULL: keep the directory */
  int sig_clean;
  int sig_crash;
  int sig_orphan; /* when the test died without a stop; 0: sig_clean */
  int stop_timeout_ms;
};

/* The guard: fds 3 = life pipe (read), 4 = report pipe (write), 5 = log,
 * 6 = /dev/null. */
static void guard_main(const sl_server_t *srv, const struct guard_args *g) {
  child_reset_signals();
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, NULL);
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid < 0) _exit(120);
  if (pid == 0) {
    setsid();
    child_exec(srv, 5, 6, g->sig_crash, self, g->argv, g->envp);
  }
  ssize_t w = write(4, &pid, sizeof(pid));
  (void)w;
  close(4);
  int mode = -1;
  int st = 0;
  for (;;) {
    struct pollfd p = {.fd = 3, .events = POLLIN};
    int r = poll(&p, 1, 50);
    if (waitpid(pid, &st, WNOHANG) == pid) {
      safe_write(5, "sl_servers guard: the server exited by itself (");
      if (WIFEXITED(st)) {
        safe_write(5, "status ");
        safe_write_int(5, WEXITSTATUS(st));
      } else {
        safe_write(5, "signal ");
        safe_write_int(5, WTERMSIG(st));
      }
      safe_write(5, ")\n");
      _exit(GUARD_SERVER_EXITED);
    }
    if (r > 0) {
      char c;
      ssize_t n = read(3, &c, 1);
      if (n == 1) {
        mode = c;
        continue;
      }
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
    }
  }
  bool is_orphan = mode < 0;
  int sig = mode == 'k' ? g->sig_crash : g->sig_clean;
  if (is_orphan && g->sig_orphan != 0) sig = g->sig_orphan;
  kill(pid, sig);
  int waited = 0;
  int code = 0;
  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (waited >= g->stop_timeout_ms) {
      safe_write(5, "sl_servers guard: the server did not stop in time; "
                    "SIGKILL\n");
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      code = 3;
      break;
    }
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
    waited += 5;
  }
  if (is_orphan && g->rm_argv != NULL) {
    pid_t rm = fork();
    if (rm == 0) {
      close_range(3, ~0u, 0);
      execve(g->rm_argv[0], g->rm_argv, g->envp);
      _exit(127);
    }
    if (rm > 0) waitpid(rm, &st, 0);
  }
  _exit(code);
}

/* ------------------------------------------------------------------ */
/* Command lines. */

struct argvec {
  char *v[MAX_ARGS + 1];
  int n;
  bool is_full;
};

static void av_add(struct argvec *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void av_add(struct argvec *a, const char *fmt, ...) {
  if (a->n == MAX_ARGS) {
    a->is_full = true;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  if (s == NULL) {
    a->is_full = true;
    return;
  }
  a->v[a->n++] = s;
  a->v[a->n] = NULL;
}

static void av_free(struct argvec *a) {
  for (int i = 0; i < a->n; i++) free(a->v[i]);
  a->n = 0;
  a->v[0] = NULL;
}

static char *const server_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                   "LC_ALL=C", "LANG=C", NULL};

static const char *pg_bindir(void) {
  const char *d = getenv("SL_PG_BINDIR");
  return d != NULL && d[0] != '\0' ? d : PG_BINDIR_DEFAULT;
}

static void server_argv(const sl_server_t *srv, struct argvec *a) {
  if (srv->kind == SL_SERVER_POSTGRES) {
    int maxp = srv->max_prepared < 0 ? 0 : srv->max_prepared;
    av_add(a, "%s/postgres", pg_bindir());
    av_add(a, "-D");
    av_add(a, "%s", srv->data_dir);
    av_add(a, "-p");
    av_add(a, "%d", srv->port);
    static const char *fixed[] = {
        "listen_addresses=127.0.0.1", "unix_socket_directories=",
        "wal_level=logical",          "max_replication_slots=10",
        "max_wal_senders=10",         "shared_buffers=16MB",
        "max_connections=60",         "synchronous_commit=on",
        "lc_messages=C",              "log_min_messages=warning"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
      av_add(a, "-c");
      av_add(a, "%s", fixed[i]);
    }
    av_add(a, "-c");
    av_add(a, "max_prepared_transactions=%d", maxp);
    av_add(a, "-c");
    av_add(a, "fsync=%s", srv->is_durable ? "on" : "off");
    av_add(a, "-c");
    av_add(a, "full_page_writes=%s", srv->is_durable ? "on" : "off");
    for (char **e = srv->extra; e && *e; e++) {
      av_add(a, "-c");
      av_add(a, "%s", *e);
    }
  } else {
    av_add(a, "%s", srv->bin);
    av_add(a, "--no-defaults");
    av_add(a, "--datadir=%s", srv->data_dir);
    av_add(a, "--socket=%s", srv->sock_path);
    av_add(a, "--pid-file=%s/mariadbd.pid", srv->dir);
    av_add(a, "--tmpdir=%s", srv->dir);
    av_add(a, "--port=%d", srv->port);
    av_add(a, "--bind-address=127.0.0.1");
    av_add(a, "--skip-name-resolve");
    av_add(a, "--log-bin=%s/binlog", srv->data_dir);
    av_add(a, "--binlog-format=ROW");
    av_add(a, "--binlog-row-image=FULL");
    av_add(a, "--binlog-annotate-row-events=ON");
    av_add(a, "--server-id=1");
    av_add(a, "--gtid-domain-id=0");
    av_add(a, "--gtid-strict-mode=ON");
    av_add(a, "--log-slave-updates=ON");
    av_add(a, "--innodb-buffer-pool-size=64M");
    av_add(a, "--innodb-log-file-size=16M");
    av_add(a, "--innodb-use-native-aio=OFF");
    av_add(a, "--innodb-flush-log-at-trx-commit=%d",
           srv->is_durable ? 1 : 2);
    av_add(a, "--sync-binlog=%d", srv->is_durable ? 1 : 0);
    av_add(a, "--lc-messages=en_US");
    for (char **e = srv->extra; e && *e; e++) av_add(a, "--%s", *e);
  }
}

/* Run argv as the server user, output to the log, and wait (bounded). */
static int run_sync(sl_server_t *srv, char *const argv[], int timeout_ms,
                    const char *what, sl_error_t **out_err) {
  off_t off = file_size(srv->log_path);
  int log_fd = open(srv->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                    0644);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) {
    int e = errno;
    if (log_fd >= 0) close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return sl_error_set(out_err, -e, "%s: cannot open %s: %s", what,
                        srv->log_path, strerror(e));
  }
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid == 0) child_exec(srv, log_fd, null_fd, SIGKILL, self, argv,
                           server_env);
  close(log_fd);
  close(null_fd);
  if (pid < 0)
    return sl_error_set(out_err, -errno, "%s: fork: %s", what,
                        strerror(errno));
  int64_t deadline = now_ms() + timeout_ms;
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
    sleep_ms(10);
  if (w != pid) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    char tail[4096];
    log_tail(srv->log_path, off, 15, tail, sizeof(tail));
    return sl_error_set(out_err, -ETIMEDOUT,
                        "%s did not finish within %d ms; last lines of %s:\n%s",
                        what, timeout_ms, srv->log_path, tail);
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char tail[4096];
    log_tail(srv->log_path, off, 15, tail, sizeof(tail));
    return sl_error_set(out_err, SL_EIO,
                        "%s failed (%s %d); last lines of %s:\n%s", what,
                        WIFEXITED(st) ? "status" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                        srv->log_path, tail);
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Start, readiness, stop. */

static void live_add(sl_server_t *srv);
static void live_remove(sl_server_t *srv);

/* Reap the guard within timeout_ms, else SIGKILL it (the server then gets
 * its parent-death signal).  Returns the guard's wait status or -1. */
static int reap_guard(sl_server_t *srv, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  int st = 0;
  pid_t w;
  while ((w = waitpid(srv->guard, &st, WNOHANG)) == 0 &&
         now_ms() < deadline)
    sleep_ms(5);
  if (w < 0 && errno == ECHILD) {
    /* SIGCHLD ignored by the test: the kernel reaped it. */
    srv->guard = -1;
    return 0;
  }
  if (w != srv->guard) {
    kill(srv->guard, SIGKILL);
    waitpid(srv->guard, &st, 0);
    st = -1;
  }
  srv->guard = -1;
  return st;
}

static bool probe_ready(const sl_server_t *srv) {
  if (srv->kind == SL_SERVER_POSTGRES) {
    char ci[300];
    snprintf(ci, sizeof(ci), "%s connect_timeout=2", srv->conninfo);
    return PQping(ci) == PQPING_OK;
  }
  MYSQL *m = NULL;
  int rc = sl_my_connect(srv, srv->port, &m, NULL);
  if (rc == SL_OK) mysql_close(m);
  return rc == SL_OK;
}

/* Fork the guard (which forks and execs g->argv, output appended to
 * log_path) and wait for the child's pid.  On success *out_guard, *out_child
 * and *out_life_fd (the write end of the life pipe) are set. */
static int spawn_guard(const sl_server_t *srv, const struct guard_args *g,
                       const char *log_path, pid_t *out_guard,
                       pid_t *out_child, int *out_life_fd,
                       sl_error_t **out_err) {
  int life[2] = {-1, -1}, rep[2] = {-1, -1};
  int log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                    0644);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  int rc = SL_OK;
  if (log_fd < 0 || null_fd < 0 || pipe2(life, O_CLOEXEC) != 0 ||
      pipe2(rep, O_CLOEXEC) != 0) {
    rc = sl_error_set(out_err, -errno, "cannot set up the guard of %s: %s",
                      srv->dir, strerror(errno));
    goto done;
  }
  pid_t guard = fork();
  if (guard < 0) {
    rc = sl_error_set(out_err, -errno, "fork: %s", strerror(errno));
    goto done;
  }
  if (guard == 0) {
    int fds[4] = {life[0], rep[1], log_fd, null_fd};
    if (!child_fds(fds, 4)) _exit(122);
    guard_main(srv, g);
  }
  close(life[0]);
  life[0] = -1;
  close(rep[1]);
  rep[1] = -1;
  *out_guard = guard;
  *out_life_fd = life[1];
  life[1] = -1;
  pid_t spid = -1;
  ssize_t n;
  while ((n = read(rep[0], &spid, sizeof(spid))) < 0 && errno == EINTR) {
  }
  if (n != (ssize_t)sizeof(spid)) spid = -1;
  *out_child = spid;
done:
  if (life[0] >= 0) close(life[0]);
  if (life[1] >= 0) close(life[1]);
  if (rep[0] >= 0) close(rep[0]);
  if (rep[1] >= 0) close(rep[1]);
  if (log_fd >= 0) close(log_fd);
  if (null_fd >= 0) close(null_fd);
  return rc;
}

/* Launch the guard and the server on srv->port and wait until it answers.
 * -EADDRINUSE when the server found the port taken. */
static int launch(sl_server_t *srv, sl_error_t **out_err) {
  struct argvec a = {.n = 0};
  a.v[0] = NULL;
  server_argv(srv, &a);
  struct argvec rm = {.n = 0};
  rm.v[0] = NULL;
  av_add(&rm, "/bin/rm");
  av_add(&rm, "-rf");
  av_add(&rm, "--");
  av_add(&rm, "%s", srv->dir);
  if (a.is_full || rm.is_full) {
    av_free(&a);
    av_free(&rm);
    return sl_error_set(out_err, SL_EINVAL,
                        "server command line: too many settings (at most "
                        "%d arguments)", MAX_ARGS);
  }
  if (srv->kind == SL_SERVER_POSTGRES)
    snprintf(srv->conninfo, sizeof(srv->conninfo),
             "host=127.0.0.1 port=%d user=postgres dbname=postgres "
             "sslmode=disable gssencmode=disable", srv->port);
  struct guard_args g = {
      .argv = a.v,
      .envp = server_env,
      .rm_argv = getenv("SL_TEST_KEEP") ? NULL : rm.v,
      .sig_clean = srv->kind == SL_SERVER_POSTGRES ? SIGINT : SIGTERM,
      .sig_crash = srv->kind == SL_SERVER_POSTGRES ? SIGQUIT : SIGKILL,
      .stop_timeout_ms = srv->ready_timeout_ms,
  };
  off_t off = file_size(srv->log_path);
  pid_t spid = -1;
  int rc = spawn_guard(srv, &g, srv->log_path, &srv->guard, &spid,
                       &srv->life_fd, out_err);
  if (rc != SL_OK) goto done;
  srv->server = spid;
  live_add(srv);

  int64_t deadline = now_ms() + srv->ready_timeout_ms;
  for (;;) {
    int st;
    if (spid < 0 || waitpid(srv->guard, &st, WNOHANG) == srv->guard) {
      close(srv->life_fd);
      srv->life_fd = -1;
      if (spid < 0) reap_guard(srv, srv->ready_timeout_ms + 5000);
      srv->guard = -1;
      srv->server = -1;
      live_remove(srv);
      char tail[4096];
      log_tail(srv->log_path, off, 15, tail, sizeof(tail));
      if (log_contains(srv->log_path, off, "Address already in use"))
        rc = -EADDRINUSE;
      else
        rc = SL_EIO;
      sl_error_set(out_err, rc,
                   "%s on 127.0.0.1:%d exited during start-up; last lines "
                   "of %s:\n%s",
                   srv->kind == SL_SERVER_POSTGRES ? "postgres" : "mariadbd",
                   srv->port, srv->log_path, tail);
      goto done;
    }
    if (probe_ready(srv)) break;
    if (now_ms() >= deadline) {
      char tail[4096];
      log_tail(srv->log_path, off, 15, tail, sizeof(tail));
      sl_server_stop(srv, SL_SERVER_STOP_CRASH, NULL);
      rc = sl_error_set(out_err, -ETIMEDOUT,
                        "%s on 127.0.0.1:%d did not answer within %d ms; "
                        "last lines of %s:\n%s",
                        srv->kind == SL_SERVER_POSTGRES ? "postgres"
                                                        : "mariadbd",
                        srv->port, srv->ready_timeout_ms, srv->log_path,
                        tail);
      goto done;
    }
    sleep_ms(20);
  }
done:
  av_free(&a);
  av_free(&rm);
  return rc;
}

static int launch_with_ports(sl_server_t *srv, sl_error_t **out_err) {
  for (int attempt = 0;; attempt++) {
    if (!srv->is_fixed_port) {
      int port = pick_port();
      if (port < 0)
        return sl_error_set(out_err, port,
                            "no free port on 127.0.0.1 in 20000-32767");
      srv->port = port;
    }
    sl_error_t *err = NULL;
    int rc = launch(srv, &err);
    if (rc == -EADDRINUSE && !srv->is_fixed_port && attempt < 5) {
      /* Another process took the port between the probe and the bind. */
      sl_error_destroy(err);
      continue;
    }
    if (rc != SL_OK) {
      if (out_err != NULL && *out_err == NULL)
        *out_err = err;
      else
        sl_error_destroy(err);
    }
    return rc;
  }
}

static void stop_all_at_exit(void) {
  pid_t self = getpid();
  pthread_mutex_lock(&live_mu);
  sl_server_t *list = live_head;
  live_head = NULL;
  pthread_mutex_unlock(&live_mu);
  for (sl_server_t *s = list; s != NULL; s = s->next) {
    if (s->owner != self || s->guard < 0) continue;
    char c = 'k';
    ssize_t w = write(s->life_fd, &c, 1);
    (void)w;
    close(s->life_fd);
    s->life_fd = -1;
    reap_guard(s, s->ready_timeout_ms + 5000);
    s->server = -1;
    remove_tree(s->dir);
  }
}

static void register_atexit(void) { atexit(stop_all_at_exit); }

static void live_add(sl_server_t *srv) {
  pthread_once(&atexit_once, register_atexit);
  pthread_mutex_lock(&live_mu);
  srv->next = live_head;
  live_head = srv;
  pthread_mutex_unlock(&live_mu);
}

static void live_remove(sl_server_t *srv) {
  pthread_mutex_lock(&live_mu);
  for (sl_server_t **pp = &live_head; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == srv) {
      *pp = srv->next;
      break;
    }
  }
  srv->next = NULL;
  pthread_mutex_unlock(&live_mu);
}

void sl_server_opts_init(sl_server_opts_t *opts, sl_server_kind_t kind) {
  memset(opts, 0, sizeof(*opts));
  opts->kind = kind;
}

static void free_server(sl_server_t *srv) {
  if (srv == NULL) return;
  for (char **e = srv->extra; e && *e; e++) free(*e);
  free(srv->extra);
  free(srv);
}

static int init_data_dir(sl_server_t *srv, sl_error_t **out_err) {
  struct argvec a = {.n = 0};
  a.v[0] = NULL;
  const char *what;
  if (srv->kind == SL_SERVER_POSTGRES) {
    what = "initdb";
    av_add(&a, "%s/initdb", pg_bindir());
    av_add(&a, "-D");
    av_add(&a, "%s", srv->data_dir);
    av_add(&a, "-U");
    av_add(&a, "postgres");
    av_add(&a, "-A");
    av_add(&a, "trust");
    av_add(&a, "-E");
    av_add(&a, "UTF8");
    av_add(&a, "--locale=C");
    av_add(&a, "--no-instructions");
    av_add(&a, "-N");
  } else {
    what = "mariadb-install-db";
    av_add(&a, "/usr/bin/mariadb-install-db");
    av_add(&a, "--no-defaults");
    av_add(&a, "--datadir=%s", srv->data_dir);
    /* The bootstrap's temporary tables are named by a number that other
     * bootstraps running at the same time can share: in the common /tmp
     * one of them fails ("Unknown table 'mysql.tmp_user_sys'"). */
    av_add(&a, "--tmpdir=%s", srv->dir);
    av_add(&a, "--auth-root-authentication-method=normal");
    av_add(&a, "--skip-test-db");
    av_add(&a, "--skip-name-resolve");
  }
  int rc = a.is_full ? SL_ENOMEM
                     : run_sync(srv, a.v, srv->ready_timeout_ms * 2, what,
                                out_err);
  av_free(&a);
  return rc;
}

int sl_server_start(const sl_server_opts_t *opts, sl_server_t **out_srv,
                    sl_error_t **out_err) {
  if (opts == NULL || (opts->kind != SL_SERVER_POSTGRES &&
                       opts->kind != SL_SERVER_MARIADB))
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_server_start: kind must be SL_SERVER_POSTGRES "
                        "or SL_SERVER_MARIADB");
  if (opts->port < 0 || opts->port > 65535)
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_server_start: port %d out of range", opts->port);
  sl_server_t *srv = calloc(1, sizeof(*srv));
  if (srv == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  srv->kind = opts->kind;
  srv->is_durable = opts->is_durable;
  srv->max_prepared =
      opts->max_prepared_transactions == 0 ? 64
                                           : opts->max_prepared_transactions;
  srv->ready_timeout_ms =
      opts->ready_timeout_ms > 0 ? opts->ready_timeout_ms : 30000;
  srv->is_fixed_port = opts->port != 0;
  srv->port = opts->port;
  srv->guard = srv->server = -1;
  srv->life_fd = -1;
  srv->owner = getpid();
  int rc = SL_OK;
  size_t n_extra = 0;
  while (opts->extra_settings && opts->extra_settings[n_extra]) n_extra++;
  srv->extra = calloc(n_extra + 1, sizeof(char *));
  if (srv->extra == NULL) {
    free(srv);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n_extra; i++) {
    srv->extra[i] = strdup(opts->extra_settings[i]);
    if (srv->extra[i] == NULL) {
      free_server(srv);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
  }

  const char *user;
  if (srv->kind == SL_SERVER_POSTGRES) {
    user = "postgres";
    snprintf(srv->bin, sizeof(srv->bin), "%s/postgres", pg_bindir());
  } else {
    user = "mysql";
    snprintf(srv->bin, sizeof(srv->bin), "%s",
             access("/usr/sbin/mariadbd", X_OK) == 0 ? "/usr/sbin/mariadbd"
                                                     : "/usr/bin/mariadbd");
  }
  if (access(srv->bin, X_OK) != 0) {
    rc = sl_error_set(out_err, SL_ENOTFOUND,
                      "%s: not installed (Debian package %s)", srv->bin,
                      srv->kind == SL_SERVER_POSTGRES ? "postgresql-15"
                                                      : "mariadb-server");
    free_server(srv);
    return rc;
  }
  srv->as_user = geteuid() == 0;
  if (srv->as_user) {
    struct passwd pw, *res = NULL;
    char buf[2048];
    if (getpwnam_r(user, &pw, buf, sizeof(buf), &res) != 0 || res == NULL) {
      rc = sl_error_set(out_err, SL_ENOTFOUND,
                        "running as root, but there is no user '%s' to run "
                        "the server as (Debian package %s creates it)",
                        user,
                        srv->kind == SL_SERVER_POSTGRES ? "postgresql-common"
                                                        : "mariadb-server");
      free_server(srv);
      return rc;
    }
    srv->uid = pw.pw_uid;
    srv->gid = pw.pw_gid;
  }

  const char *base = opts->base_dir;
  if (base == NULL) base = getenv("TMPDIR");
  if (base == NULL || base[0] == '\0') base = "/tmp";
  snprintf(srv->dir, sizeof(srv->dir), "%s/sl-%s-XXXXXX", base,
           srv->kind == SL_SERVER_POSTGRES ? "pg" : "my");
  if (strlen(srv->dir) > 80) {
    /* The MariaDB socket path must fit sockaddr_un (108 bytes). */
    rc = sl_error_set(out_err, SL_EINVAL,
                      "sl_server_start: base directory %s is too long", base);
    free_server(srv);
    return rc;
  }
  if (mkdtemp(srv->dir) == NULL) {
    rc = sl_error_set(out_err, -errno, "cannot create %s: %s", srv->dir,
                      strerror(errno));
    free_server(srv);
    return rc;
  }
  snprintf(srv->data_dir, sizeof(srv->data_dir), "%s/data", srv->dir);
  snprintf(srv->log_path, sizeof(srv->log_path), "%s/server.log", srv->dir);
  snprintf(srv->sock_path, sizeof(srv->sock_path), "%s/my.sock", srv->dir);
  int fd = open(srv->log_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  if (srv->as_user &&
      (chown(srv->dir, srv->uid, srv->gid) != 0 ||
       chown(srv->log_path, srv->uid, srv->gid) != 0)) {
    rc = sl_error_set(out_err, -errno, "cannot chown %s to %s: %s", srv->dir,
                      user, strerror(errno));
    goto fail;
  }
  rc = init_data_dir(srv, out_err);
  if (rc != SL_OK) goto fail;
  rc = launch_with_ports(srv, out_err);
  if (rc != SL_OK) goto fail;
  if (srv->kind == SL_SERVER_MARIADB) {
    /* The database the connection facts name. */
    MYSQL *m = NULL;
    rc = sl_my_connect(srv, srv->port, &m, out_err);
    if (rc == SL_OK) {
      rc = sl_my_exec(m, "CREATE DATABASE IF NOT EXISTS sluice", NULL,
                      out_err);
      mysql_close(m);
    }
    srv->has_db = rc == SL_OK;
    if (rc != SL_OK) goto fail;
  }
  *out_srv = srv;
  return SL_OK;
fail:
  sl_server_destroy(srv);
  return rc;
}

int sl_server_stop(sl_server_t *srv, sl_server_stop_mode_t mode,
                   sl_error_t **out_err) {
  if (srv == NULL || srv->guard < 0) return SL_OK;
  live_remove(srv);
  char c = mode == SL_SERVER_STOP_CRASH ? 'k' : 'c';
  ssize_t w = write(srv->life_fd, &c, 1);
  (void)w;
  close(srv->life_fd);
  srv->life_fd = -1;
  pid_t server = srv->server;
  int st = reap_guard(srv, srv->ready_timeout_ms + 5000);
  srv->server = -1;
  if (st == -1 || (WIFEXITED(st) && WEXITSTATUS(st) == 3))
    return sl_error_set(out_err, -ETIMEDOUT,
                        "server %d on port %d did not stop within %d ms; "
                        "it was killed", (int)server, srv->port,
                        srv->ready_timeout_ms);
  return SL_OK;
}

int sl_server_start_again(sl_server_t *srv, sl_error_t **out_err) {
  if (srv->guard >= 0)
    return sl_error_set(out_err, SL_ESTATE,
                        "sl_server_start_again: the server on port %d is "
                        "running", srv->port);
  bool was_fixed = srv->is_fixed_port;
  srv->is_fixed_port = true; /* the same port: clients know it */
  int rc = launch_with_ports(srv, out_err);
  srv->is_fixed_port = was_fixed;
  return rc;
}

int sl_server_restart(sl_server_t *srv, sl_server_stop_mode_t mode,
                      sl_error_t **out_err) {
  int rc = sl_server_stop(srv, mode, out_err);
  if (rc != SL_OK) return rc;
  return sl_server_start_again(srv, out_err);
}

void sl_server_destroy(sl_server_t *srv) {
  if (srv == NULL) return;
  sl_error_t *err = NULL;
  if (sl_server_stop(srv, SL_SERVER_STOP_CLEAN, &err) != SL_OK) {
    fprintf(stderr, "sl_servers: %s\n", sl_error_message(err));
    sl_error_destroy(err);
  }
  remove_tree(srv->dir);
  free_server(srv);
}

sl_server_kind_t sl_server_kind(const sl_server_t *srv) { return srv->kind; }
const char *sl_server_host(const sl_server_t *srv) {
  (void)srv;
  return "127.0.0.1";
}
int sl_server_port(const sl_server_t *srv) { return srv->port; }
const char *sl_server_user(const sl_server_t *srv) {
  return srv->kind == SL_SERVER_POSTGRES ? "postgres" : "root";
}
const char *sl_server_dbname(const sl_server_t *srv) {
  return srv->kind == SL_SERVER_POSTGRES ? "postgres" : "sluice";
}
const char *sl_server_conninfo(const sl_server_t *srv) {
  return srv->kind == SL_SERVER_POSTGRES ? srv->conninfo : NULL;
}
const char *sl_server_dir(const sl_server_t *srv) { return srv->dir; }
const char *sl_server_log_path(const sl_server_t *srv) {
  return srv->log_path;
}
pid_t sl_server_pid(const sl_server_t *srv) { return srv->server; }
pid_t sl_server_guard_pid(const sl_server_t *srv) { return srv->guard; }

/* ------------------------------------------------------------------ */
/* PostgreSQL helpers. */

int sl_pg_connect(const char *conninfo, PGconn **out_conn,
                  sl_error_t **out_err) {
  PGconn *c = PQconnectdb(conninfo);
  if (c == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "PQconnectdb: out of memory");
  if (PQstatus(c) != CONNECTION_OK) {
    int rc = sl_error_set(out_err, SL_EIO, "cannot connect to '%s': %s",
                          conninfo, PQerrorMessage(c));
    PQfinish(c);
    return rc;
  }
  *out_conn = c;
  return SL_OK;
}

void sl_pg_conninfo_port(const sl_server_t *srv, int port, char *buf,
                         size_t size) {
  (void)srv;
  snprintf(buf, size,
           "host=127.0.0.1 port=%d user=postgres dbname=postgres "
           "sslmode=disable gssencmode=disable connect_timeout=10",
           port);
}

/* Run sql; on success *out_res holds the last result (caller clears). */
static int pg_run(PGconn *conn, const char *sql, char *out_sqlstate,
                  PGresult **out_res, sl_error_t **out_err) {
  PGresult *res = PQexec(conn, sql);
  ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
    if (out_sqlstate) snprintf(out_sqlstate, 6, "00000");
    if (out_res)
      *out_res = res;
    else
      PQclear(res);
    return SL_OK;
  }
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  if (out_sqlstate) snprintf(out_sqlstate, 6, "%s", state ? state : "");
  int rc = sl_error_set(out_err, SL_EIO, "SQLSTATE %s: %s (statement: %.200s)",
                        state ? state : "(none)", PQerrorMessage(conn), sql);
  PQclear(res);
  return rc;
}

int sl_pg_exec(PGconn *conn, const char *sql, char *out_sqlstate,
               sl_error_t **out_err) {
  return pg_run(conn, sql, out_sqlstate, NULL, out_err);
}

int sl_pg_query_text(PGconn *conn, const char *sql, char **out_text,
                     sl_error_t **out_err) {
  PGresult *res = NULL;
  int rc = pg_run(conn, sql, NULL, &res, out_err);
  if (rc != SL_OK) return rc;
  if (PQntuples(res) < 1 || PQnfields(res) < 1 || PQgetisnull(res, 0, 0)) {
    PQclear(res);
    return sl_error_set(out_err, SL_ENOTFOUND, "no value from: %.200s", sql);
  }
  char *t = sl_strdup(PQgetvalue(res, 0, 0));
  PQclear(res);
  if (t == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  *out_text = t;
  return SL_OK;
}

int sl_pg_query_int64(PGconn *conn, const char *sql, int64_t *out_value,
                      sl_error_t **out_err) {
  char *t = NULL;
  int rc = sl_pg_query_text(conn, sql, &t, out_err);
  if (rc != SL_OK) return rc;
  char *end;
  errno = 0;
  long long v = strtoll(t, &end, 10);
  if (errno != 0 || *end != '\0' || end == t) {
    rc = sl_error_set(out_err, SL_ETYPE, "'%s' is not an integer (from: %.200s)",
                      t, sql);
    sl_free(t);
    return rc;
  }
  sl_free(t);
  *out_value = v;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* MariaDB helpers. */

static pthread_once_t my_once = PTHREAD_ONCE_INIT;
static void my_library_init(void) { mysql_library_init(0, NULL, NULL); }

int sl_my_connect(const sl_server_t *srv, int port, MYSQL **out_conn,
                  sl_error_t **out_err) {
  pthread_once(&my_once, my_library_init);
  MYSQL *m = mysql_init(NULL);
  if (m == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "mysql_init: out of memory");
  unsigned connect_timeout = 5, rw_timeout = 60;
  mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
  mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &rw_timeout);
  mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &rw_timeout);
  /* The database exists once sl_server_start has created it. */
  const char *db = srv->has_db ? "sluice" : NULL;
  if (mysql_real_connect(m, "127.0.0.1", "root", "", db,
                         (unsigned)(port ? port : srv->port), NULL, 0) ==
      NULL) {
    int rc = sl_error_set(out_err, SL_EIO,
                          "cannot connect to 127.0.0.1:%d as root: error %u: "
                          "%s", port ? port : srv->port, mysql_errno(m),
                          mysql_error(m));
    mysql_close(m);
    return rc;
  }
  *out_conn = m;
  return SL_OK;
}

static int my_run(MYSQL *conn, const char *sql, unsigned *out_errno,
                  MYSQL_RES **out_res, sl_error_t **out_err) {
  if (mysql_real_query(conn, sql, strlen(sql)) != 0) {
    unsigned e = mysql_errno(conn);
    if (out_errno) *out_errno = e;
    return sl_error_set(out_err, SL_EIO,
                        "error %u (%s): %s (statement: %.200s)", e,
                        mysql_sqlstate(conn), mysql_error(conn), sql);
  }
  if (out_errno) *out_errno = 0;
  MYSQL_RES *res = mysql_store_result(conn);
  if (res == NULL && mysql_field_count(conn) != 0) {
    unsigned e = mysql_errno(conn);
    if (out_errno) *out_errno = e;
    return sl_error_set(out_err, SL_EIO, "error %u reading the result: %s",
                        e, mysql_error(conn));
  }
  /* Drain further results of a multi-statement string. */
  while (mysql_more_results(conn) && mysql_next_result(conn) == 0) {
    MYSQL_RES *more = mysql_store_result(conn);
    if (more) mysql_free_result(more);
  }
  if (out_res)
    *out_res = res;
  else if (res)
    mysql_free_result(res);
  return SL_OK;
}

int sl_my_exec(MYSQL *conn, const char *sql, unsigned *out_errno,
               sl_error_t **out_err) {
  return my_run(conn, sql, out_errno, NULL, out_err);
}

int sl_my_query_text(MYSQL *conn, const char *sql, char **out_text,
                     sl_error_t **out_err) {
  MYSQL_RES *res = NULL;
  int rc = my_run(conn, sql, NULL, &res, out_err);
  if (rc != SL_OK) return rc;
  MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
  if (row == NULL || mysql_num_fields(res) < 1 || row[0] == NULL) {
    if (res) mysql_free_result(res);
    return sl_error_set(out_err, SL_ENOTFOUND, "no value from: %.200s", sql);
  }
  char *t = sl_strdup(row[0]);
  mysql_free_result(res);
  if (t == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  *out_text = t;
  return SL_OK;
}

int sl_my_query_int64(MYSQL *conn, const char *sql, int64_t *out_value,
                      sl_error_t **out_err) {
  char *t = NULL;
  int rc = sl_my_query_text(conn, sql, &t, out_err);
  if (rc != SL_OK) return rc;
  char *end;
  errno = 0;
  long long v = strtoll(t, &end, 10);
  if (errno != 0 || *end != '\0' || end == t) {
    rc = sl_error_set(out_err, SL_ETYPE, "'%s' is not an integer (from: %.200s)",
                      t, sql);
    sl_free(t);
    return rc;
  }
  sl_free(t);
  *out_value = v;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Guarded processes for other test tools (sl_guard.h). */

int sl_guard_spawn(const sl_guard_spec_t *spec, sl_guarded_t *out,
                   sl_error_t **out_err) {
  if (spec == NULL || spec->argv == NULL || spec->argv[0] == NULL ||
      spec->cwd == NULL || spec->log_path == NULL)
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_guard_spawn: argv, cwd and log_path are needed");
  struct argvec rm = {.n = 0};
  rm.v[0] = NULL;
  if (spec->rm_dir != NULL && getenv("SL_TEST_KEEP") == NULL) {
    av_add(&rm, "/bin/rm");
    av_add(&rm, "-rf");
    av_add(&rm, "--");
    av_add(&rm, "%s", spec->rm_dir);
    if (rm.is_full) {
      av_free(&rm);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
  }
  /* The guard's children need only the working directory of a server
   * record; the process keeps the test's user. */
  sl_server_t *ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    av_free(&rm);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  snprintf(ctx->dir, sizeof(ctx->dir), "%s", spec->cwd);
  struct guard_args g = {
      .argv = spec->argv,
      .envp = spec->envp,
      .rm_argv = rm.n > 0 ? rm.v : NULL,
      .sig_clean = spec->sig_clean,
      .sig_crash = spec->sig_crash,
      .sig_orphan = spec->sig_orphan,
      .stop_timeout_ms = spec->stop_timeout_ms,
  };
  sl_guarded_t r = {.guard = -1, .pid = -1, .life_fd = -1};
  int rc = spawn_guard(ctx, &g, spec->log_path, &r.guard, &r.pid,
                       &r.life_fd, out_err);
  free(ctx);
  av_free(&rm);
  if (rc != SL_OK) return rc;
  if (r.pid < 0) {
    /* The guard could not fork: it has exited. */
    close(r.life_fd);
    int st;
    waitpid(r.guard, &st, 0);
    return sl_error_set(out_err, SL_EIO, "the guard of %s could not start "
                        "%s", spec->cwd, spec->argv[0]);
  }
  *out = r;
  return SL_OK;
}

bool sl_guard_has_exited(sl_guarded_t *g) {
  if (g->guard < 0) return true;
  int st;
  pid_t w = waitpid(g->guard, &st, WNOHANG);
  if (w == g->guard || (w < 0 && errno == ECHILD)) {
    close(g->life_fd);
    g->life_fd = -1;
    g->guard = g->pid = -1;
    return true;
  }
  return false;
}

int sl_guard_stop(sl_guarded_t *g, bool is_crash, int timeout_ms) {
  if (g->guard < 0) return SL_OK;
  char c = is_crash ? 'k' : 'c';
  ssize_t w = write(g->life_fd, &c, 1);
  (void)w;
  close(g->life_fd);
  g->life_fd = -1;
  int64_t deadline = now_ms() + timeout_ms;
  int st = 0;
  pid_t r;
  while ((r = waitpid(g->guard, &st, WNOHANG)) == 0 && now_ms() < deadline)
    sleep_ms(5);
  int rc = SL_OK;
  if (r == 0) {
    kill(g->pid, SIGKILL);
    kill(g->guard, SIGKILL);
    waitpid(g->guard, &st, 0);
    rc = -ETIMEDOUT;
  } else if (r == g->guard && WIFEXITED(st) && WEXITSTATUS(st) == 3) {
    rc = -ETIMEDOUT; /* the guard had to SIGKILL the server */
  }
  g->guard = g->pid = -1;
  return rc;
}

int sl_pick_port(void) { return pick_port(); }
