/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test Kafka brokers: Apache Kafka's broker from the jars tools/kafka-jars
 * cached, in KRaft mode, one directory and one guard process per node.
 * See sl_kafka.h and docs/testing-servers.md.
 *
 * A node is a combined broker and controller with two 127.0.0.1 ports:
 * PLAINTEXT (clients) and CONTROLLER (the Raft quorum).  The quorum is
 * static (controller.quorum.voters lists every node), so every node is
 * formatted alone, with the cluster's random id, and no node has to be
 * told about the others after the start.  Readiness of a node is its
 * "Kafka Server started" log line (written once the broker is unfenced)
 * followed by its id in the metadata of the cluster.
 */
#define _GNU_SOURCE
#include "sl_kafka.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sl_guard.h"

#ifndef SL_KAFKA_DEFAULT_VERSION
#error "SL_KAFKA_DEFAULT_VERSION is set by tests/tools/CMakeLists.txt"
#endif

extern char **environ;

typedef struct kafka_node_s {
  int id;
  int port;      /* PLAINTEXT */
  int ctl_port;  /* CONTROLLER */
  char dir[512];
  char props[600];
  char log_path[600];
  sl_guarded_t proc; /* guard < 0 when stopped */
} kafka_node_t;

struct sl_kafka_s {
  int n;
  kafka_node_t node[SL_KAFKA_MAX_NODES];
  int ready_timeout_ms;
  char jars_cp[600]; /* "<dir>/" followed by "*" */
  char cds[600];     /* <dir>/kafka.jsa when tools/kafka-jars made it */
  char java[512];
  char version[64];
  char cluster_id[32];
  char bootstrap[SL_KAFKA_MAX_NODES * 24];
  pid_t owner;
  struct sl_kafka_s *next; /* live list for atexit */
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_kafka_t *live_head;
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;

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

const char *sl_kafka_default_version(void) {
  return SL_KAFKA_DEFAULT_VERSION;
}

/* ------------------------------------------------------------------ */
/* Files. */

static int rm_entry(const char *path, const struct stat *st, int type,
                    struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type == FTW_DP) return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
  return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void remove_tree(const char *dir) {
  if (dir[0] == '\0' || getenv("SL_TEST_KEEP") != NULL) return;
  if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
    fprintf(stderr, "sl_kafka: cannot remove %s: %s\n", dir,
            strerror(errno));
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : 0;
}

/* The text of path from offset on (at most the last 64 KiB); caller
 * frees.  NULL when unreadable. */
static char *read_from(const char *path, off_t offset) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return NULL;
  }
  if (st.st_size < offset) offset = 0;
  off_t len = st.st_size - offset;
  if (len > 65536) {
    offset = st.st_size - 65536;
    len = 65536;
  }
  char *t = malloc((size_t)len + 1);
  ssize_t n = t ? pread(fd, t, (size_t)len, offset) : -1;
  close(fd);
  if (n < 0) {
    free(t);
    return NULL;
  }
  t[n] = '\0';
  return t;
}

static bool log_contains(const char *path, off_t offset, const char *needle) {
  char *t = read_from(path, offset);
  bool found = t != NULL && strstr(t, needle) != NULL;
  free(t);
  return found;
}

/* The last n_lines lines of path from offset on. */
static void log_tail(const char *path, off_t offset, int n_lines, char *buf,
                     size_t size) {
  char *t = read_from(path, offset);
  if (t == NULL || t[0] == '\0') {
    snprintf(buf, size, "(log %s is empty)", path);
    free(t);
    return;
  }
  size_t n = strlen(t);
  while (n > 0 && t[n - 1] == '\n') t[--n] = '\0';
  const char *start = t;
  int seen = 0;
  for (size_t i = n; i-- > 0;) {
    if (t[i] == '\n' && ++seen == n_lines) {
      start = t + i + 1;
      break;
    }
  }
  snprintf(buf, size, "%s", start);
  free(t);
}

static int write_text(const char *path, const char *text,
                      sl_error_t **out_err) {
  FILE *f = fopen(path, "we");
  if (f == NULL)
    return sl_error_set(out_err, -errno, "cannot create %s: %s", path,
                        strerror(errno));
  bool ok = fputs(text, f) >= 0;
  ok = fclose(f) == 0 && ok;
  if (!ok)
    return sl_error_set(out_err, SL_EIO, "cannot write %s: %s", path,
                        strerror(errno));
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Jars, java, the cluster id. */

static int find_jars(sl_kafka_t *k, const char *opt_dir,
                     sl_error_t **out_err) {
  char dir[512];
  const char *env = getenv("SL_KAFKA_JARS");
  if (opt_dir != NULL) {
    snprintf(dir, sizeof(dir), "%s", opt_dir);
  } else if (env != NULL && env[0] != '\0') {
    snprintf(dir, sizeof(dir), "%s", env);
  } else {
    /* As tools/kafka-jars: ${XDG_CACHE_HOME:-$HOME/.cache}, $HOME from
     * the password database when unset. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (home == NULL || home[0] == '\0') {
      const struct passwd *pw = getpwuid(getuid());
      home = pw != NULL ? pw->pw_dir : "/";
    }
    if (xdg != NULL && xdg[0] != '\0')
      snprintf(dir, sizeof(dir), "%s/sluice/kafka-%s", xdg,
               SL_KAFKA_DEFAULT_VERSION);
    else
      snprintf(dir, sizeof(dir), "%s/.cache/sluice/kafka-%s", home,
               SL_KAFKA_DEFAULT_VERSION);
  }
  char pattern[600];
  snprintf(pattern, sizeof(pattern), "%s/kafka_2.13-*.jar", dir);
  glob_t g;
  int gr = glob(pattern, 0, NULL, &g);
  if (gr != 0 || g.gl_pathc == 0) {
    if (gr == 0) globfree(&g);
    return sl_error_set(out_err, SL_ENOTFOUND,
                        "no Kafka broker jars in %s (no kafka_2.13-*.jar): "
                        "run tools/kafka-jars once (it resolves "
                        "org.apache.kafka:kafka_2.13:%s with Maven and "
                        "caches it there), or set SL_KAFKA_JARS to a "
                        "directory of the broker's jars",
                        dir, SL_KAFKA_DEFAULT_VERSION);
  }
  const char *base = strrchr(g.gl_pathv[0], '/');
  base = base ? base + 1 : g.gl_pathv[0];
  /* kafka_2.13-<version>.jar */
  snprintf(k->version, sizeof(k->version), "%s", base + strlen("kafka_2.13-"));
  char *dot = strstr(k->version, ".jar");
  if (dot != NULL) *dot = '\0';
  globfree(&g);
  snprintf(k->jars_cp, sizeof(k->jars_cp), "%s/*", dir);
  snprintf(k->cds, sizeof(k->cds), "%s/kafka.jsa", dir);
  if (access(k->cds, R_OK) != 0) k->cds[0] = '\0';
  return SL_OK;
}

static int find_java(sl_kafka_t *k, const char *opt_java,
                     sl_error_t **out_err) {
  const char *env = getenv("SL_KAFKA_JAVA");
  const char *jh = getenv("JAVA_HOME");
  if (opt_java != NULL) {
    snprintf(k->java, sizeof(k->java), "%s", opt_java);
  } else if (env != NULL && env[0] != '\0') {
    snprintf(k->java, sizeof(k->java), "%s", env);
  } else if (jh != NULL && jh[0] != '\0') {
    snprintf(k->java, sizeof(k->java), "%s/bin/java", jh);
  } else {
    const char *path = getenv("PATH");
    k->java[0] = '\0';
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
      char cand[sizeof(k->java)];
      if (snprintf(cand, sizeof(cand), "%s/java", d) >= (int)sizeof(cand))
        continue;
      if (access(cand, X_OK) == 0) {
        snprintf(k->java, sizeof(k->java), "%s", cand);
        break;
      }
    }
  }
  if (k->java[0] == '\0' || access(k->java, X_OK) != 0)
    return sl_error_set(out_err, SL_ENOTFOUND,
                        "no java to run the Kafka broker (%s): install the "
                        "Debian package openjdk-17-jre-headless (tools/deps "
                        "does), or set SL_KAFKA_JAVA",
                        k->java[0] ? k->java : "not in PATH");
  return SL_OK;
}

/* A random Kafka cluster id: 16 bytes, base64url without padding. */
static void random_cluster_id(char out[32]) {
  unsigned char b[16];
  if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
    uint64_t x = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
    for (int i = 0; i < 16; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      b[i] = (unsigned char)(x >> 56);
    }
  }
  /* The first character must not be '-' (the storage tool would take the
   * id for an option, as Kafka's own Uuid generator avoids): the top bit
   * of the first byte clear keeps it a letter. */
  b[0] &= 0x7f;
  static const char al[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  int o = 0;
  for (int i = 0; i < 16; i += 3) {
    uint32_t v = (uint32_t)b[i] << 16;
    if (i + 1 < 16) v |= (uint32_t)b[i + 1] << 8;
    if (i + 2 < 16) v |= b[i + 2];
    out[o++] = al[(v >> 18) & 63];
    out[o++] = al[(v >> 12) & 63];
    if (i + 1 < 16) out[o++] = al[(v >> 6) & 63];
    if (i + 2 < 16) out[o++] = al[v & 63];
  }
  out[o] = '\0'; /* 22 characters */
}

/* ------------------------------------------------------------------ */
/* Command lines and configuration. */

#define MAX_ARGV 40

struct args {
  char *v[MAX_ARGV + 1];
  int n;
};

static void args_add(struct args *a, const char *s) {
  if (a->n < MAX_ARGV) {
    a->v[a->n++] = strdup(s);
    a->v[a->n] = NULL;
  }
}

static void args_free(struct args *a) {
  for (int i = 0; i < a->n; i++) free(a->v[i]);
  a->n = 0;
}

static bool args_ok(const struct args *a) {
  for (int i = 0; i < a->n; i++)
    if (a->v[i] == NULL) return false;
  return a->n < MAX_ARGV;
}

/* The JVM: a small heap, the client compiler only, no perf data file and
 * the class-data-sharing archive tools/kafka-jars recorded: each halves the
 * start-up (docs/testing-servers.md).  -Xshare:auto: an archive that does
 * not fit this java or class path is ignored (with a warning in the log). */
static void jvm_args(const sl_kafka_t *k, const kafka_node_t *nd,
                     struct args *a) {
  char buf[700];
  args_add(a, k->java);
  args_add(a, "-Xms64m");
  args_add(a, "-Xmx384m");
  args_add(a, "-XX:+UseSerialGC");
  args_add(a, "-XX:TieredStopAtLevel=1");
  args_add(a, "-XX:-UsePerfData");
  args_add(a, "-Xshare:auto");
  if (k->cds[0] != '\0') {
    snprintf(buf, sizeof(buf), "-XX:SharedArchiveFile=%s", k->cds);
    args_add(a, buf);
  }
  args_add(a, "-Djava.awt.headless=true");
  snprintf(buf, sizeof(buf), "-Djava.io.tmpdir=%s", nd->dir);
  args_add(a, buf);
  snprintf(buf, sizeof(buf), "-Dlog4j2.configurationFile=%s/log4j2.properties",
           nd->dir);
  args_add(a, buf);
  args_add(a, "-cp");
  args_add(a, k->jars_cp);
}

static const char log4j2_text[] =
    "# The broker's log: warnings and errors, and the line that tells\n"
    "# sl_kafka the node has started.\n"
    "status = warn\n"
    "appender.out.type = Console\n"
    "appender.out.name = out\n"
    "appender.out.layout.type = PatternLayout\n"
    "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
    "rootLogger.level = warn\n"
    "rootLogger.appenderRef.out.ref = out\n"
    "logger.started.name = kafka.server.KafkaRaftServer\n"
    "logger.started.level = info\n"
    "logger.ctl.name = org.apache.kafka.controller.QuorumController\n"
    "logger.ctl.level = info\n";

static int write_config(const sl_kafka_t *k, const kafka_node_t *nd,
                        const char *const *extra, sl_error_t **out_err) {
  char voters[SL_KAFKA_MAX_NODES * 32] = "";
  size_t off = 0;
  for (int i = 0; i < k->n; i++)
    off += (size_t)snprintf(voters + off, sizeof(voters) - off, "%s%d@127.0.0.1:%d",
                            i ? "," : "", k->node[i].id, k->node[i].ctl_port);
  int rf = k->n < 3 ? k->n : 3;
  int min_isr = rf > 1 ? 2 : 1;
  char *text = NULL;
  int len = asprintf(
      &text,
      "# Written by sluice's test tools (tests/tools/sl_kafka.c).\n"
      "process.roles=broker,controller\n"
      "node.id=%d\n"
      "controller.quorum.voters=%s\n"
      "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d\n"
      "advertised.listeners=PLAINTEXT://127.0.0.1:%d\n"
      "controller.listener.names=CONTROLLER\n"
      "inter.broker.listener.name=PLAINTEXT\n"
      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
      "CONTROLLER:PLAINTEXT\n"
      "log.dirs=%s/data\n"
      "auto.create.topics.enable=false\n"
      "num.partitions=1\n"
      "default.replication.factor=%d\n"
      "offsets.topic.num.partitions=4\n"
      "offsets.topic.replication.factor=%d\n"
      "transaction.state.log.num.partitions=4\n"
      "transaction.state.log.replication.factor=%d\n"
      "transaction.state.log.min.isr=%d\n"
      "share.coordinator.state.topic.num.partitions=1\n"
      "share.coordinator.state.topic.replication.factor=%d\n"
      "share.coordinator.state.topic.min.isr=%d\n"
      "group.initial.rebalance.delay.ms=0\n"
      "num.network.threads=2\n"
      "num.io.threads=2\n"
      "background.threads=2\n"
      "num.recovery.threads.per.data.dir=1\n"
      "log.cleaner.threads=1\n"
      "log.cleaner.dedupe.buffer.size=2097152\n"
      "broker.heartbeat.interval.ms=500\n"
      "broker.session.timeout.ms=3000\n"
      "controller.quorum.election.timeout.ms=1000\n"
      "controller.quorum.fetch.timeout.ms=2000\n",
      nd->id, voters, nd->port, nd->ctl_port, nd->port, nd->dir, rf, rf, rf,
      min_isr, rf, min_isr);
  if (len < 0) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (const char *const *e = extra; e != NULL && *e != NULL; e++) {
    char *more = NULL;
    if (asprintf(&more, "%s%s\n", text, *e) < 0) {
      free(text);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    free(text);
    text = more;
  }
  int rc = write_text(nd->props, text, out_err);
  free(text);
  if (rc != SL_OK) return rc;
  char path[600];
  snprintf(path, sizeof(path), "%s/log4j2.properties", nd->dir);
  return write_text(path, log4j2_text, out_err);
}

/* The JVMs' environment: a fixed PATH and locale, HOME in the node's
 * directory. */
struct child_env {
  char home[600];
  char *v[5];
};

static char *const *child_env(const kafka_node_t *nd, struct child_env *e) {
  snprintf(e->home, sizeof(e->home), "HOME=%s", nd->dir);
  e->v[0] = "PATH=/usr/local/bin:/usr/bin:/bin";
  e->v[1] = "LC_ALL=C";
  e->v[2] = "LANG=C";
  e->v[3] = e->home;
  e->v[4] = NULL;
  return e->v;
}

/* Format every node's storage, the JVMs in parallel. */
static int format_nodes(sl_kafka_t *k, sl_error_t **out_err) {
  pid_t pids[SL_KAFKA_MAX_NODES];
  off_t offs[SL_KAFKA_MAX_NODES];
  int rc = SL_OK;
  for (int i = 0; i < k->n; i++) pids[i] = -1;
  for (int i = 0; i < k->n && rc == SL_OK; i++) {
    kafka_node_t *nd = &k->node[i];
    struct args a = {.n = 0};
    jvm_args(k, nd, &a);
    args_add(&a, "kafka.tools.StorageTool");
    args_add(&a, "format");
    args_add(&a, "-t");
    args_add(&a, k->cluster_id);
    args_add(&a, "-c");
    args_add(&a, nd->props);
    if (!args_ok(&a)) {
      args_free(&a);
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      break;
    }
    offs[i] = file_size(nd->log_path);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, nd->log_path,
                                     O_WRONLY | O_APPEND | O_CREAT, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addchdir_np(&fa, nd->dir);
    struct child_env envbuf;
    int e = posix_spawn(&pids[i], a.v[0], &fa, NULL, a.v,
                        child_env(nd, &envbuf));
    posix_spawn_file_actions_destroy(&fa);
    args_free(&a);
    if (e != 0) {
      pids[i] = -1;
      rc = sl_error_set(out_err, -e, "cannot run %s: %s", k->java,
                        strerror(e));
    }
  }
  int64_t deadline = now_ms() + k->ready_timeout_ms;
  for (int i = 0; i < k->n; i++) {
    if (pids[i] < 0) continue;
    int st = 0;
    pid_t w;
    while ((w = waitpid(pids[i], &st, WNOHANG)) == 0 && now_ms() < deadline)
      sleep_ms(10);
    kafka_node_t *nd = &k->node[i];
    if (w != pids[i]) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], &st, 0);
      if (rc == SL_OK) {
        char tail[4096];
        log_tail(nd->log_path, offs[i], 15, tail, sizeof(tail));
        rc = sl_error_set(out_err, -ETIMEDOUT,
                          "formatting the storage of Kafka node %d did not "
                          "finish within %d ms; last lines of %s:\n%s",
                          nd->id, k->ready_timeout_ms, nd->log_path, tail);
      }
    } else if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && rc == SL_OK) {
      char tail[4096];
      log_tail(nd->log_path, offs[i], 15, tail, sizeof(tail));
      rc = sl_error_set(out_err, SL_EIO,
                        "formatting the storage of Kafka node %d failed "
                        "(%s %d); last lines of %s:\n%s",
                        nd->id, WIFEXITED(st) ? "status" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                        nd->log_path, tail);
    }
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* librdkafka. */

static void quiet_log(const rd_kafka_t *rk, int level, const char *fac,
                      const char *buf) {
  (void)rk;
  (void)level;
  (void)fac;
  (void)buf;
}

static void quiet_error(rd_kafka_t *rk, int err, const char *reason,
                        void *opaque) {
  (void)rk;
  (void)err;
  (void)reason;
  (void)opaque;
}

rd_kafka_conf_t *sl_kafka_conf_new(const sl_kafka_t *k) {
  rd_kafka_conf_t *c = rd_kafka_conf_new();
  if (c == NULL) return NULL;
  char e[256];
  if (rd_kafka_conf_set(c, "bootstrap.servers", k->bootstrap, e,
                        sizeof(e)) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(c);
    return NULL;
  }
  rd_kafka_conf_set_log_cb(c, quiet_log);
  rd_kafka_conf_set_error_cb(c, quiet_error);
  return c;
}

int sl_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                      const char *value, sl_error_t **out_err) {
  char e[512];
  if (rd_kafka_conf_set(conf, name, value, e, sizeof(e)) != RD_KAFKA_CONF_OK)
    return sl_error_set(out_err, SL_EINVAL, "librdkafka setting %s=%s: %s",
                        name, value, e);
  return SL_OK;
}

/* A producer handle (no records are produced) for metadata and admin. */
static int admin_handle(const sl_kafka_t *k, rd_kafka_t **out,
                        sl_error_t **out_err) {
  rd_kafka_conf_t *c = sl_kafka_conf_new(k);
  if (c == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  char e[512];
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, e, sizeof(e));
  if (rk == NULL) {
    rd_kafka_conf_destroy(c);
    return sl_error_set(out_err, SL_EIO, "rd_kafka_new: %s", e);
  }
  *out = rk;
  return SL_OK;
}

/* True when every node in want (ids) is listed as a broker. */
static bool brokers_listed(rd_kafka_t *rk, const int *want, int n_want) {
  const struct rd_kafka_metadata *md = NULL;
  if (rd_kafka_metadata(rk, 0, NULL, &md, 1000) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return false;
  bool all = true;
  for (int i = 0; i < n_want && all; i++) {
    bool found = false;
    for (int b = 0; b < md->broker_cnt; b++)
      if (md->brokers[b].id == want[i]) found = true;
    all = found;
  }
  rd_kafka_metadata_destroy(md);
  return all;
}

/* ------------------------------------------------------------------ */
/* Nodes. */

static void live_add(sl_kafka_t *k);
static void live_remove(sl_kafka_t *k);

static kafka_node_t *node_of(sl_kafka_t *k, int id) {
  return id >= 1 && id <= k->n ? &k->node[id - 1] : NULL;
}

static int launch_node(sl_kafka_t *k, kafka_node_t *nd,
                       sl_error_t **out_err) {
  struct args a = {.n = 0};
  jvm_args(k, nd, &a);
  args_add(&a, "kafka.Kafka");
  args_add(&a, nd->props);
  if (!args_ok(&a)) {
    args_free(&a);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  struct child_env envbuf;
  sl_guard_spec_t spec = {
      .argv = a.v,
      .envp = child_env(nd, &envbuf),
      .cwd = nd->dir,
      .log_path = nd->log_path,
      .rm_dir = nd->dir,
      .sig_clean = SIGTERM,
      .sig_crash = SIGKILL,
      /* The data is thrown away: a controlled shutdown would only cost
       * time (and a cluster's last nodes can wait for a quorum that is
       * gone). */
      .sig_orphan = SIGKILL,
      .stop_timeout_ms = k->ready_timeout_ms,
  };
  int rc = sl_guard_spawn(&spec, &nd->proc, out_err);
  args_free(&a);
  return rc;
}

/* Wait until every node in ids has logged its start (from offs) and is
 * listed in the metadata.  A node that exits is an error quoting its
 * log. */
static int wait_nodes(sl_kafka_t *k, const int *ids, const off_t *offs,
                      int n_ids, sl_error_t **out_err) {
  int64_t deadline = now_ms() + k->ready_timeout_ms;
  rd_kafka_t *rk = NULL;
  bool started[SL_KAFKA_MAX_NODES] = {false};
  for (;;) {
    bool all_started = true;
    for (int i = 0; i < n_ids; i++) {
      kafka_node_t *nd = node_of(k, ids[i]);
      if (sl_guard_has_exited(&nd->proc)) {
        if (rk != NULL) rd_kafka_destroy(rk);
        char tail[4096];
        log_tail(nd->log_path, offs[i], 15, tail, sizeof(tail));
        int code = log_contains(nd->log_path, offs[i],
                                "Address already in use")
                       ? -EADDRINUSE
                       : SL_EIO;
        return sl_error_set(out_err, code,
                            "Kafka node %d (127.0.0.1:%d) exited during "
                            "start-up; last lines of %s:\n%s",
                            nd->id, nd->port, nd->log_path, tail);
      }
      if (!started[i])
        started[i] = log_contains(nd->log_path, offs[i],
                                  "Kafka Server started");
      all_started = all_started && started[i];
    }
    if (all_started) {
      if (rk == NULL) {
        int rc = admin_handle(k, &rk, out_err);
        if (rc != SL_OK) return rc;
      }
      if (brokers_listed(rk, ids, n_ids)) break;
    }
    if (now_ms() >= deadline) {
      if (rk != NULL) rd_kafka_destroy(rk);
      int late = 0;
      for (int i = 0; i < n_ids && late == 0; i++)
        if (!started[i]) late = i;
      kafka_node_t *nd = node_of(k, ids[late]);
      char tail[4096];
      log_tail(nd->log_path, offs[late], 15, tail, sizeof(tail));
      return sl_error_set(out_err, -ETIMEDOUT,
                          "Kafka node %d (127.0.0.1:%d) was not up and "
                          "listed within %d ms (%s); last lines of %s:\n%s",
                          nd->id, nd->port, k->ready_timeout_ms,
                          all_started ? "started, not in the metadata"
                                      : "no \"Kafka Server started\"",
                          nd->log_path, tail);
    }
    sleep_ms(all_started ? 100 : 50);
  }
  if (rk != NULL) rd_kafka_destroy(rk);
  return SL_OK;
}

static void kill_all(sl_kafka_t *k) {
  for (int i = 0; i < k->n; i++)
    sl_guard_stop(&k->node[i].proc, true, k->ready_timeout_ms);
}

static int pick_ports(sl_kafka_t *k, sl_error_t **out_err) {
  int used[2 * SL_KAFKA_MAX_NODES];
  int n_used = 0;
  for (int i = 0; i < k->n; i++) {
    for (int j = 0; j < 2; j++) {
      int p;
      bool dup;
      int tries = 0;
      do {
        p = sl_pick_port();
        if (p < 0)
          return sl_error_set(out_err, p,
                              "no free port on 127.0.0.1 in 20000-32767");
        dup = false;
        for (int u = 0; u < n_used; u++) dup = dup || used[u] == p;
      } while (dup && ++tries < 100);
      used[n_used++] = p;
      if (j == 0)
        k->node[i].port = p;
      else
        k->node[i].ctl_port = p;
    }
  }
  size_t off = 0;
  k->bootstrap[0] = '\0';
  for (int i = 0; i < k->n; i++)
    off += (size_t)snprintf(k->bootstrap + off, sizeof(k->bootstrap) - off,
                            "%s127.0.0.1:%d", i ? "," : "", k->node[i].port);
  return SL_OK;
}

/* Format and launch every node on fresh ports and wait for them.
 * -EADDRINUSE when a node found its port taken. */
static int start_all(sl_kafka_t *k, const char *const *extra,
                     sl_error_t **out_err) {
  int rc = pick_ports(k, out_err);
  if (rc != SL_OK) return rc;
  random_cluster_id(k->cluster_id);
  for (int i = 0; i < k->n; i++) {
    kafka_node_t *nd = &k->node[i];
    /* A retry formats anew (whatever SL_TEST_KEEP says). */
    char data[600];
    snprintf(data, sizeof(data), "%s/data", nd->dir);
    if (nftw(data, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 &&
        errno != ENOENT)
      return sl_error_set(out_err, -errno, "cannot remove %s: %s", data,
                          strerror(errno));
    rc = write_config(k, nd, extra, out_err);
    if (rc != SL_OK) return rc;
  }
  rc = format_nodes(k, out_err);
  if (rc != SL_OK) return rc;
  int ids[SL_KAFKA_MAX_NODES];
  off_t offs[SL_KAFKA_MAX_NODES];
  live_add(k);
  for (int i = 0; i < k->n; i++) {
    ids[i] = k->node[i].id;
    offs[i] = file_size(k->node[i].log_path);
    rc = launch_node(k, &k->node[i], out_err);
    if (rc != SL_OK) {
      kill_all(k);
      live_remove(k);
      return rc;
    }
  }
  rc = wait_nodes(k, ids, offs, k->n, out_err);
  if (rc != SL_OK) {
    kill_all(k);
    live_remove(k);
  }
  return rc;
}

void sl_kafka_opts_init(sl_kafka_opts_t *opts) {
  memset(opts, 0, sizeof(*opts));
  opts->nodes = 1;
}

int sl_kafka_start(const sl_kafka_opts_t *opts, sl_kafka_t **out_k,
                   sl_error_t **out_err) {
  if (opts == NULL)
    return sl_error_set(out_err, SL_EINVAL, "sl_kafka_start: no options");
  int n = opts->nodes == 0 ? 1 : opts->nodes;
  if (n < 1 || n > SL_KAFKA_MAX_NODES)
    return sl_error_set(out_err, SL_EINVAL,
                        "sl_kafka_start: %d nodes (1 to %d)", opts->nodes,
                        SL_KAFKA_MAX_NODES);
  sl_kafka_t *k = calloc(1, sizeof(*k));
  if (k == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  k->n = n;
  k->owner = getpid();
  k->ready_timeout_ms =
      opts->ready_timeout_ms > 0 ? opts->ready_timeout_ms : 60000;
  for (int i = 0; i < n; i++) {
    k->node[i].id = i + 1;
    k->node[i].proc.guard = k->node[i].proc.pid = -1;
    k->node[i].proc.life_fd = -1;
  }
  int rc = find_jars(k, opts->jars_dir, out_err);
  if (rc == SL_OK) rc = find_java(k, opts->java, out_err);
  if (rc != SL_OK) {
    free(k);
    return rc;
  }
  const char *base = opts->base_dir;
  if (base == NULL) base = getenv("TMPDIR");
  if (base == NULL || base[0] == '\0') base = "/tmp";
  for (int i = 0; i < n; i++) {
    kafka_node_t *nd = &k->node[i];
    snprintf(nd->dir, sizeof(nd->dir), "%s/sl-kafka-XXXXXX", base);
    if (strlen(nd->dir) > 400) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "sl_kafka_start: base directory %s is too long",
                        base);
      break;
    }
    if (mkdtemp(nd->dir) == NULL) {
      rc = sl_error_set(out_err, -errno, "cannot create %s: %s", nd->dir,
                        strerror(errno));
      nd->dir[0] = '\0';
      break;
    }
    char dir[sizeof(nd->dir)];
    memcpy(dir, nd->dir, sizeof(dir));
    snprintf(nd->props, sizeof(nd->props), "%s/server.properties", dir);
    snprintf(nd->log_path, sizeof(nd->log_path), "%s/server.log", dir);
  }
  for (int attempt = 0; rc == SL_OK; attempt++) {
    sl_error_t *err = NULL;
    rc = start_all(k, opts->extra_settings, &err);
    if (rc == -EADDRINUSE && attempt < 4) {
      /* Another process took a port between the probe and the bind. */
      sl_error_destroy(err);
      rc = SL_OK;
      continue;
    }
    if (rc != SL_OK) {
      if (out_err != NULL && *out_err == NULL)
        *out_err = err;
      else
        sl_error_destroy(err);
    }
    break;
  }
  if (rc != SL_OK) {
    for (int i = 0; i < n; i++) remove_tree(k->node[i].dir);
    free(k);
    return rc;
  }
  *out_k = k;
  return SL_OK;
}

int sl_kafka_node_stop(sl_kafka_t *k, int id, sl_server_stop_mode_t mode,
                       sl_error_t **out_err) {
  kafka_node_t *nd = node_of(k, id);
  if (nd == NULL)
    return sl_error_set(out_err, SL_EINVAL, "no Kafka node %d (1 to %d)", id,
                        k->n);
  if (nd->proc.guard < 0) return SL_OK;
  pid_t pid = nd->proc.pid;
  int rc = sl_guard_stop(&nd->proc, mode == SL_SERVER_STOP_CRASH,
                         k->ready_timeout_ms + 5000);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc,
                        "Kafka node %d (pid %d, 127.0.0.1:%d) did not stop "
                        "within %d ms; it was killed", id, (int)pid, nd->port,
                        k->ready_timeout_ms);
  return SL_OK;
}

int sl_kafka_node_start_again(sl_kafka_t *k, int id, sl_error_t **out_err) {
  kafka_node_t *nd = node_of(k, id);
  if (nd == NULL)
    return sl_error_set(out_err, SL_EINVAL, "no Kafka node %d (1 to %d)", id,
                        k->n);
  if (nd->proc.guard >= 0 && !sl_guard_has_exited(&nd->proc))
    return sl_error_set(out_err, SL_ESTATE, "Kafka node %d is running", id);
  off_t off = file_size(nd->log_path);
  int rc = launch_node(k, nd, out_err);
  if (rc != SL_OK) return rc;
  rc = wait_nodes(k, &id, &off, 1, out_err);
  if (rc != SL_OK) sl_guard_stop(&nd->proc, true, k->ready_timeout_ms);
  return rc;
}

void sl_kafka_destroy(sl_kafka_t *k) {
  if (k == NULL) return;
  live_remove(k);
  kill_all(k);
  for (int i = 0; i < k->n; i++) remove_tree(k->node[i].dir);
  free(k);
}

static void kill_all_at_exit(void) {
  pid_t self = getpid();
  pthread_mutex_lock(&live_mu);
  sl_kafka_t *list = live_head;
  live_head = NULL;
  pthread_mutex_unlock(&live_mu);
  for (sl_kafka_t *k = list; k != NULL; k = k->next) {
    if (k->owner != self) continue;
    kill_all(k);
    for (int i = 0; i < k->n; i++) remove_tree(k->node[i].dir);
  }
}

static void register_atexit(void) { atexit(kill_all_at_exit); }

static void live_add(sl_kafka_t *k) {
  pthread_once(&atexit_once, register_atexit);
  pthread_mutex_lock(&live_mu);
  k->next = live_head;
  live_head = k;
  pthread_mutex_unlock(&live_mu);
}

static void live_remove(sl_kafka_t *k) {
  pthread_mutex_lock(&live_mu);
  for (sl_kafka_t **pp = &live_head; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == k) {
      *pp = k->next;
      break;
    }
  }
  k->next = NULL;
  pthread_mutex_unlock(&live_mu);
}

int sl_kafka_node_count(const sl_kafka_t *k) { return k->n; }
const char *sl_kafka_bootstrap(const sl_kafka_t *k) { return k->bootstrap; }
int sl_kafka_node_port(const sl_kafka_t *k, int id) {
  return id >= 1 && id <= k->n ? k->node[id - 1].port : 0;
}
const char *sl_kafka_node_dir(const sl_kafka_t *k, int id) {
  return id >= 1 && id <= k->n ? k->node[id - 1].dir : NULL;
}
const char *sl_kafka_node_log_path(const sl_kafka_t *k, int id) {
  return id >= 1 && id <= k->n ? k->node[id - 1].log_path : NULL;
}
pid_t sl_kafka_node_pid(const sl_kafka_t *k, int id) {
  return id >= 1 && id <= k->n ? k->node[id - 1].proc.pid : -1;
}
pid_t sl_kafka_node_guard_pid(const sl_kafka_t *k, int id) {
  return id >= 1 && id <= k->n ? k->node[id - 1].proc.guard : -1;
}
const char *sl_kafka_version(const sl_kafka_t *k) { return k->version; }
const char *sl_kafka_cluster_id(const sl_kafka_t *k) { return k->cluster_id; }

/* ------------------------------------------------------------------ */
/* Helpers. */

static int leader_in(const struct rd_kafka_metadata *md, const char *topic,
                     int partition, int *out_leader, int *out_partitions) {
  for (int t = 0; t < md->topic_cnt; t++) {
    const rd_kafka_metadata_topic_t *mt = &md->topics[t];
    if (strcmp(mt->topic, topic) != 0) continue;
    if (mt->err != RD_KAFKA_RESP_ERR_NO_ERROR &&
        mt->err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
      return SL_ENOTFOUND;
    if (out_partitions) *out_partitions = mt->partition_cnt;
    for (int p = 0; p < mt->partition_cnt; p++) {
      if (mt->partitions[p].id != partition) continue;
      *out_leader = mt->partitions[p].leader;
      return SL_OK;
    }
    return SL_ENOTFOUND;
  }
  return SL_ENOTFOUND;
}

/* Metadata of topic (fresh from a broker). */
static int topic_metadata(rd_kafka_t *rk, const char *topic,
                          const struct rd_kafka_metadata **out_md,
                          sl_error_t **out_err) {
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
  if (rkt == NULL)
    return sl_error_set(out_err, SL_EIO, "rd_kafka_topic_new(%s): %s", topic,
                        rd_kafka_err2str(rd_kafka_last_error()));
  rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, out_md, 5000);
  rd_kafka_topic_destroy(rkt);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return sl_error_set(out_err, SL_EIO, "metadata of topic %s: %s (%s)",
                        topic, rd_kafka_err2name(e), rd_kafka_err2str(e));
  return SL_OK;
}

int sl_kafka_create_topic(const sl_kafka_t *k, const char *topic,
                          int partitions, int replication,
                          const char *const *configs, sl_error_t **out_err) {
  rd_kafka_t *rk = NULL;
  int rc = admin_handle(k, &rk, out_err);
  if (rc != SL_OK) return rc;
  char e[512];
  rd_kafka_NewTopic_t *nt =
      rd_kafka_NewTopic_new(topic, partitions, replication, e, sizeof(e));
  if (nt == NULL) {
    rd_kafka_destroy(rk);
    return sl_error_set(out_err, SL_EINVAL, "topic %s: %s", topic, e);
  }
  for (const char *const *c = configs; c != NULL && *c != NULL; c++) {
    char name[256];
    const char *eq = strchr(*c, '=');
    if (eq == NULL || (size_t)(eq - *c) >= sizeof(name)) {
      rd_kafka_NewTopic_destroy(nt);
      rd_kafka_destroy(rk);
      return sl_error_set(out_err, SL_EINVAL,
                          "topic %s: setting '%s' is not name=value", topic,
                          *c);
    }
    memcpy(name, *c, (size_t)(eq - *c));
    name[eq - *c] = '\0';
    rd_kafka_NewTopic_set_config(nt, name, eq + 1);
  }
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t *ao =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_operation_timeout(ao, 30000, e, sizeof(e));
  rd_kafka_AdminOptions_set_request_timeout(ao, 30000, e, sizeof(e));
  rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 40000);
  if (ev == NULL) {
    rc = sl_error_set(out_err, -ETIMEDOUT,
                      "creating topic %s: no answer within 40 s", topic);
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rc = sl_error_set(out_err, SL_EIO, "creating topic %s: %s", topic,
                      rd_kafka_event_error_string(ev));
  } else {
    const rd_kafka_CreateTopics_result_t *res =
        rd_kafka_event_CreateTopics_result(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr =
        rd_kafka_CreateTopics_result_topics(res, &n);
    if (n != 1) {
      rc = sl_error_set(out_err, SL_EIO, "creating topic %s: %zu results",
                        topic, n);
    } else if (rd_kafka_topic_result_error(tr[0]) !=
               RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_resp_err_t te = rd_kafka_topic_result_error(tr[0]);
      rc = sl_error_set(out_err, SL_EIO, "creating topic %s: %s: %s", topic,
                        rd_kafka_err2name(te),
                        rd_kafka_topic_result_error_string(tr[0]));
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(ao);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  /* The topic exists on the controller; wait until the brokers serve
   * every partition. */
  int64_t deadline = now_ms() + k->ready_timeout_ms;
  while (rc == SL_OK) {
    const struct rd_kafka_metadata *md = NULL;
    bool ready = false;
    if (topic_metadata(rk, topic, &md, NULL) == SL_OK) {
      ready = true;
      for (int p = 0; p < partitions && ready; p++) {
        int leader = -1, np = 0;
        ready = leader_in(md, topic, p, &leader, &np) == SL_OK &&
                leader >= 0 && np == partitions;
      }
      rd_kafka_metadata_destroy(md);
    }
    if (ready) break;
    if (now_ms() >= deadline) {
      rc = sl_error_set(out_err, -ETIMEDOUT,
                        "topic %s: not every partition had a leader within "
                        "%d ms", topic, k->ready_timeout_ms);
      break;
    }
    sleep_ms(50);
  }
  rd_kafka_destroy(rk);
  return rc;
}

int sl_kafka_add_partitions(const sl_kafka_t *k, const char *topic,
                            int total, sl_error_t **out_err) {
  rd_kafka_t *rk = NULL;
  int rc = admin_handle(k, &rk, out_err);
  if (rc != SL_OK) return rc;
  char e[512];
  rd_kafka_NewPartitions_t *np =
      rd_kafka_NewPartitions_new(topic, (size_t)total, e, sizeof(e));
  if (np == NULL) {
    rd_kafka_destroy(rk);
    return sl_error_set(out_err, SL_EINVAL, "topic %s: %s", topic, e);
  }
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t *ao =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
  rd_kafka_AdminOptions_set_operation_timeout(ao, 30000, e, sizeof(e));
  rd_kafka_AdminOptions_set_request_timeout(ao, 30000, e, sizeof(e));
  rd_kafka_CreatePartitions(rk, &np, 1, ao, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 40000);
  if (ev == NULL) {
    rc = sl_error_set(out_err, -ETIMEDOUT,
                      "adding partitions to %s: no answer within 40 s",
                      topic);
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rc = sl_error_set(out_err, SL_EIO, "adding partitions to %s: %s", topic,
                      rd_kafka_event_error_string(ev));
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t **tr =
        rd_kafka_CreatePartitions_result_topics(
            rd_kafka_event_CreatePartitions_result(ev), &n);
    rd_kafka_resp_err_t te =
        n == 1 ? rd_kafka_topic_result_error(tr[0]) : RD_KAFKA_RESP_ERR__FAIL;
    if (te != RD_KAFKA_RESP_ERR_NO_ERROR)
      rc = sl_error_set(out_err, SL_EIO, "adding partitions to %s: %s: %s",
                        topic, rd_kafka_err2name(te),
                        n == 1 ? rd_kafka_topic_result_error_string(tr[0])
                               : "no result");
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(ao);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewPartitions_destroy(np);
  /* Wait until the brokers serve every partition. */
  int64_t deadline = now_ms() + k->ready_timeout_ms;
  while (rc == SL_OK) {
    const struct rd_kafka_metadata *md = NULL;
    bool ready = false;
    if (topic_metadata(rk, topic, &md, NULL) == SL_OK) {
      ready = true;
      for (int p = 0; p < total && ready; p++) {
        int leader = -1, n_parts = 0;
        ready = leader_in(md, topic, p, &leader, &n_parts) == SL_OK &&
                leader >= 0 && n_parts == total;
      }
      rd_kafka_metadata_destroy(md);
    }
    if (ready) break;
    if (now_ms() >= deadline) {
      rc = sl_error_set(out_err, -ETIMEDOUT,
                        "topic %s: not %d partitions with leaders within "
                        "%d ms", topic, total, k->ready_timeout_ms);
      break;
    }
    sleep_ms(50);
  }
  rd_kafka_destroy(rk);
  return rc;
}

int sl_kafka_partition_leader(const sl_kafka_t *k, const char *topic,
                              int partition, int *out_leader,
                              sl_error_t **out_err) {
  rd_kafka_t *rk = NULL;
  int rc = admin_handle(k, &rk, out_err);
  if (rc != SL_OK) return rc;
  const struct rd_kafka_metadata *md = NULL;
  rc = topic_metadata(rk, topic, &md, out_err);
  if (rc == SL_OK) {
    int leader = -1;
    rc = leader_in(md, topic, partition, &leader, NULL);
    if (rc == SL_OK)
      *out_leader = leader;
    else
      sl_error_set(out_err, rc, "no partition %s/%d in the metadata", topic,
                   partition);
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_destroy(rk);
  return rc;
}

int sl_kafka_wait_leader(const sl_kafka_t *k, const char *topic,
                         int partition, int not_id, int timeout_ms,
                         int *out_leader, sl_error_t **out_err) {
  rd_kafka_t *rk = NULL;
  int rc = admin_handle(k, &rk, out_err);
  if (rc != SL_OK) return rc;
  int64_t deadline = now_ms() + timeout_ms;
  int last = -1;
  for (;;) {
    const struct rd_kafka_metadata *md = NULL;
    if (topic_metadata(rk, topic, &md, NULL) == SL_OK) {
      int leader = -1;
      if (leader_in(md, topic, partition, &leader, NULL) == SL_OK)
        last = leader;
      rd_kafka_metadata_destroy(md);
      const kafka_node_t *nd =
          last >= 1 && last <= k->n ? &k->node[last - 1] : NULL;
      if (nd != NULL && last != not_id && nd->proc.guard >= 0) {
        *out_leader = last;
        break;
      }
    }
    if (now_ms() >= deadline) {
      rc = sl_error_set(out_err, -ETIMEDOUT,
                        "partition %s/%d: no leader other than node %d "
                        "within %d ms (last seen: %d)",
                        topic, partition, not_id, timeout_ms, last);
      break;
    }
    sleep_ms(100);
  }
  rd_kafka_destroy(rk);
  return rc;
}

int sl_kafka_watermarks(const sl_kafka_t *k, const char *topic,
                        int partition, int64_t *out_low, int64_t *out_high,
                        sl_error_t **out_err) {
  rd_kafka_t *rk = NULL;
  int rc = admin_handle(k, &rk, out_err);
  if (rc != SL_OK) return rc;
  rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
      rk, topic, partition, out_low, out_high, 10000);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    rc = sl_error_set(out_err, SL_EIO, "watermarks of %s/%d: %s (%s)", topic,
                      partition, rd_kafka_err2name(e), rd_kafka_err2str(e));
  rd_kafka_destroy(rk);
  return rc;
}
