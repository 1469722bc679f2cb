/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Progress lines, the summary and the metrics JSON.  Operators are shown by
 * uid with their subtasks summed; tasks by chain name, with the share of
 * wall time they spent waiting for output credit (backpressure).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/progress.h"

struct sl_progress_s {
  sl_job_t *job;
  char *name;
  double interval;
  bool is_tty;
  bool is_stop;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  sl_metrics_t prev;
  bool has_prev;
  size_t last_len;
};

typedef struct op_sum_s {
  const char *uid;
  uint32_t n_subtasks;
  uint64_t in, out;
} op_sum_t;

typedef struct task_sum_s {
  const char *name;
  uint32_t n_subtasks;
  uint64_t busy, bp, idle;
  int64_t wm; /* minimum over the subtasks */
} task_sum_t;

/* Sum metrics per operator uid and per task name, in first-seen order. */
static uint32_t sum_ops(const sl_metrics_t *m, op_sum_t *out) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->n_ops; i++) {
    uint32_t k = 0;
    while (k < n && strcmp(out[k].uid, m->ops[i].uid) != 0) k++;
    if (k == n) out[n++] = (op_sum_t){m->ops[i].uid, 0, 0, 0};
    out[k].n_subtasks++;
    out[k].in += m->ops[i].records_in;
    out[k].out += m->ops[i].records_out;
  }
  return n;
}

static uint32_t sum_tasks(const sl_metrics_t *m, task_sum_t *out) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->n_tasks; i++) {
    uint32_t k = 0;
    while (k < n && strcmp(out[k].name, m->tasks[i].name) != 0) k++;
    if (k == n) out[n++] = (task_sum_t){m->tasks[i].name, 0, 0, 0, 0, INT64_MAX};
    out[k].n_subtasks++;
    if (m->tasks[i].watermark < out[k].wm) out[k].wm = m->tasks[i].watermark;
    out[k].busy += m->tasks[i].busy_ns;
    out[k].bp += m->tasks[i].backpressured_ns;
    out[k].idle += m->tasks[i].idle_ns;
  }
  return n;
}

static void human(double v, char *buf, size_t size) {
  if (v >= 1e9) snprintf(buf, size, "%.2fG", v / 1e9);
  else if (v >= 1e6) snprintf(buf, size, "%.2fM", v / 1e6);
  else if (v >= 1e3) snprintf(buf, size, "%.1fk", v / 1e3);
  else snprintf(buf, size, "%.0f", v);
}

/* Event time in microseconds as "YYYY-MM-DDTHH:MM:SS.mmmZ". */
static void fmt_time_us(int64_t us, char *buf, size_t size) {
  time_t secs = (time_t)(us / 1000000);
  int64_t ms = (us % 1000000) / 1000;
  if (ms < 0) {
    ms += 1000;
    secs--;
  }
  struct tm tm;
  if (gmtime_r(&secs, &tm) == NULL) {
    snprintf(buf, size, "%lldus", (long long)us);
    return;
  }
  size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, size - n, ".%03lldZ", (long long)ms);
}

static void report(sl_progress_t *p) {
  sl_metrics_t m;
  if (sl_job_metrics(p->job, &m) != SL_OK || m.n_ops == 0) {
    sl_metrics_close(&m);
    return;
  }
  op_sum_t *cur = calloc(m.n_ops, sizeof(op_sum_t));
  task_sum_t *tcur = calloc(m.n_tasks, sizeof(task_sum_t));
  op_sum_t *old = p->has_prev ? calloc(p->prev.n_ops + 1, sizeof(op_sum_t)) : NULL;
  task_sum_t *told = p->has_prev ? calloc(p->prev.n_tasks + 1, sizeof(task_sum_t)) : NULL;
  if (cur == NULL || tcur == NULL || (p->has_prev && (old == NULL || told == NULL)))
    goto done;
  uint32_t n = sum_ops(&m, cur), nt = sum_tasks(&m, tcur);
  if (p->has_prev) {
    sum_ops(&p->prev, old);
    sum_tasks(&p->prev, told);
  }
  double dt = (double)(m.time_ns - (p->has_prev ? p->prev.time_ns : m.start_ns)) / 1e9;
  if (dt <= 0) dt = 1e-9;
  char line[4096];
  size_t len = 0;
  len += (size_t)snprintf(line + len, sizeof(line) - len, "[%.1fs]",
                          (double)(m.time_ns - m.start_ns) / 1e9);
  for (uint32_t i = 0; i < n && len < sizeof(line) - 200; i++) {
    uint64_t d_in = cur[i].in - (old ? old[i].in : 0);
    uint64_t d_out = cur[i].out - (old ? old[i].out : 0);
    char r[32], tot[32];
    bool is_source = cur[i].in == 0;
    human((double)(is_source ? d_out : d_in) / dt, r, sizeof(r));
    human((double)(is_source ? cur[i].out : cur[i].in), tot, sizeof(tot));
    len += (size_t)snprintf(line + len, sizeof(line) - len, " %s %s %s/s (%s)",
                            cur[i].uid, is_source ? "out" : "in", r, tot);
  }
  bool any_bp = false;
  for (uint32_t i = 0; i < nt && len < sizeof(line) - 200; i++) {
    double bp = (double)(tcur[i].bp - (told ? told[i].bp : 0)) / 1e9 / dt /
                tcur[i].n_subtasks;
    if (bp < 0.01) continue;
    len += (size_t)snprintf(line + len, sizeof(line) - len, "%s %s %.0f%%",
                            any_bp ? "," : " | backpressure:", tcur[i].name,
                            bp * 100);
    any_bp = true;
  }
  /* Watermarks of the tasks that have one (event time), as UTC. */
  bool any_wm = false;
  for (uint32_t i = 0; i < nt && len < sizeof(line) - 200; i++) {
    int64_t wm = tcur[i].wm;
    if (wm == INT64_MIN || wm == INT64_MAX) continue;
    char tb[64];
    fmt_time_us(wm, tb, sizeof(tb));
    len += (size_t)snprintf(line + len, sizeof(line) - len, "%s %s %s",
                            any_wm ? "," : " | watermark:", tcur[i].name, tb);
    any_wm = true;
  }
  sl_checkpoint_stats_t ck;
  if (sl_job_last_checkpoint(p->job, &ck) == SL_OK && len < sizeof(line) - 120)
    len += (size_t)snprintf(line + len, sizeof(line) - len,
                            " | checkpoint %llu %.1f ms%s",
                            (unsigned long long)ck.id, ck.duration_ns / 1e6,
                            ck.is_unaligned ? " unaligned" : "");
  uint32_t restarts = sl_job_restarts(p->job);
  if (restarts && len < sizeof(line) - 40)
    len += (size_t)snprintf(line + len, sizeof(line) - len, " | restarts %u",
                            restarts);
  if (p->is_tty) {
    size_t pad = p->last_len > len ? p->last_len - len : 0;
    fprintf(stderr, "\r%s%*s", line, (int)pad, "");
    p->last_len = len;
  } else {
    fprintf(stderr, "sluice: progress %s\n", line);
  }
  fflush(stderr);
done:
  free(cur);
  free(tcur);
  free(old);
  free(told);
  if (p->has_prev) sl_metrics_close(&p->prev);
  p->prev = m;
  p->has_prev = true;
}

static void *progress_main(void *arg) {
  sl_progress_t *p = arg;
  pthread_mutex_lock(&p->lock);
  while (!p->is_stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)(p->interval * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec += (long)(ns % 1000000000);
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    int rc = 0;
    while (!p->is_stop && rc != ETIMEDOUT)
      rc = pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    if (p->is_stop) break;
    pthread_mutex_unlock(&p->lock);
    report(p);
    pthread_mutex_lock(&p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  if (p->is_tty && p->last_len) fprintf(stderr, "\n");
  return NULL;
}

int sl_progress_start(sl_job_t *job, const char *name, double interval_s,
                      bool is_tty, sl_progress_t **out) {
  *out = NULL;
  if (interval_s <= 0) return SL_OK;
  sl_progress_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return SL_ENOMEM;
  p->job = job;
  p->name = strdup(name);
  p->interval = interval_s;
  p->is_tty = is_tty;
  pthread_mutex_init(&p->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
    free(p->name);
    free(p);
    return SL_ENOMEM;
  }
  *out = p;
  return SL_OK;
}

void sl_progress_stop(sl_progress_t *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->is_stop = true;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  if (p->has_prev) sl_metrics_close(&p->prev);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  free(p->name);
  free(p);
}

void sl_progress_summary(sl_job_t *job, const char *name, FILE *f) {
  sl_metrics_t m;
  if (sl_job_metrics(job, &m) != SL_OK || m.n_ops == 0) {
    sl_metrics_close(&m);
    return;
  }
  op_sum_t *ops = calloc(m.n_ops, sizeof(op_sum_t));
  task_sum_t *tasks = calloc(m.n_tasks, sizeof(task_sum_t));
  if (ops && tasks) {
    uint32_t n = sum_ops(&m, ops), nt = sum_tasks(&m, tasks);
    double secs = (double)(m.time_ns - m.start_ns) / 1e9;
    fprintf(f, "sluice: summary of '%s' after %.2f s\n", name, secs);
    fprintf(f, "  %-24s %8s %14s %14s %12s\n", "operator", "subtasks",
            "records in", "records out", "records/s");
    for (uint32_t i = 0; i < n; i++) {
      char r[32];
      uint64_t main_count = ops[i].in ? ops[i].in : ops[i].out;
      human(secs > 0 ? (double)main_count / secs : 0, r, sizeof(r));
      fprintf(f, "  %-24s %8u %14llu %14llu %12s\n", ops[i].uid,
              ops[i].n_subtasks, (unsigned long long)ops[i].in,
              (unsigned long long)ops[i].out, r);
    }
    fprintf(f, "  %-40s %8s %8s %8s\n", "task (share of time)", "busy",
            "backpr.", "idle");
    for (uint32_t i = 0; i < nt; i++) {
      double tot = (double)(tasks[i].busy + tasks[i].bp + tasks[i].idle);
      if (tot <= 0) tot = 1;
      fprintf(f, "  %-40.40s %7.0f%% %7.0f%% %7.0f%%\n", tasks[i].name,
              100.0 * (double)tasks[i].busy / tot,
              100.0 * (double)tasks[i].bp / tot,
              100.0 * (double)tasks[i].idle / tot);
    }
    if (m.n_sinks)
      fprintf(f, "  %-24s %8s %8s %8s %8s %8s %8s %8s\n",
              "sink (two-phase commit)", "subtask", "pending", "attempts",
              "ok", "already", "lost", "aborted");
    for (uint32_t i = 0; i < m.n_sinks; i++) {
      const sl_sink_metrics_t *k = &m.sinks[i];
      fprintf(f, "  %-24s %8u %8u %8llu %8llu %8llu %8llu %8llu\n", k->uid,
              k->subtask, k->pending, (unsigned long long)k->commit_attempts,
              (unsigned long long)k->committed,
              (unsigned long long)k->already_committed,
              (unsigned long long)k->lost,
              (unsigned long long)k->lingering_aborted);
    }
  }
  free(ops);
  free(tasks);
  sl_metrics_close(&m);
  sl_checkpoint_stats_t hist[64];
  uint32_t nh = sl_job_checkpoint_history(job, hist, 64);
  if (nh) {
    uint32_t n_ok = 0;
    for (uint32_t i = 0; i < nh; i++) n_ok += hist[i].result == SL_OK;
    fprintf(f, "  checkpoints (last %u): %u completed, %u aborted\n", nh,
            n_ok, nh - n_ok);
    sl_checkpoint_stats_t last;
    if (sl_job_last_checkpoint(job, &last) == SL_OK)
      fprintf(f,
              "  checkpoint %llu: %.1f ms, %llu bytes (%llu of channel "
              "state)%s; max barrier delay %.1f ms, alignment %.1f ms, sync "
              "%.2f ms, async %.1f ms\n",
              (unsigned long long)last.id, last.duration_ns / 1e6,
              (unsigned long long)last.bytes,
              (unsigned long long)last.channel_bytes,
              last.is_unaligned ? ", unaligned" : "",
              last.max_barrier_delay_ns / 1e6, last.max_alignment_ns / 1e6,
              last.max_sync_ns / 1e6, last.max_async_ns / 1e6);
  }
  if (sl_job_restarts(job))
    fprintf(f, "  restarts: %u\n", sl_job_restarts(job));
}

int sl_progress_write_json(sl_job_t *job, const char *name, int result,
                           int fd, const char *path, char **out_msg) {
  sl_metrics_t m;
  int rc = sl_job_metrics(job, &m);
  if (rc != SL_OK) return rc;
  json_t *root = json_object();
  json_object_set_new(root, "job", json_string(name));
  json_object_set_new(root, "result", json_string(sl_errname(result)));
  json_object_set_new(root, "duration_s",
                      json_real(m.start_ns ? (double)(m.time_ns - m.start_ns) / 1e9 : 0));
  json_t *ops = json_array();
  for (uint32_t i = 0; i < m.n_ops; i++) {
    json_t *o = json_object();
    json_object_set_new(o, "uid", json_string(m.ops[i].uid));
    json_object_set_new(o, "subtask", json_integer(m.ops[i].subtask));
    json_object_set_new(o, "records_in", json_integer((json_int_t)m.ops[i].records_in));
    json_object_set_new(o, "records_out", json_integer((json_int_t)m.ops[i].records_out));
    json_array_append_new(ops, o);
  }
  json_object_set_new(root, "operators", ops);
  json_t *tasks = json_array();
  for (uint32_t i = 0; i < m.n_tasks; i++) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(m.tasks[i].name));
    json_object_set_new(o, "subtask", json_integer(m.tasks[i].subtask));
    json_object_set_new(o, "busy_ns", json_integer((json_int_t)m.tasks[i].busy_ns));
    json_object_set_new(o, "backpressured_ns",
                        json_integer((json_int_t)m.tasks[i].backpressured_ns));
    json_object_set_new(o, "idle_ns", json_integer((json_int_t)m.tasks[i].idle_ns));
    int64_t wm = m.tasks[i].watermark;
    json_object_set_new(o, "watermark_us",
                        wm == INT64_MIN ? json_null() : json_integer((json_int_t)wm));
    json_array_append_new(tasks, o);
  }
  json_object_set_new(root, "tasks", tasks);
  json_t *sinks = json_array();
  for (uint32_t i = 0; i < m.n_sinks; i++) {
    const sl_sink_metrics_t *k = &m.sinks[i];
    json_t *o = json_object();
    json_object_set_new(o, "uid", json_string(k->uid));
    json_object_set_new(o, "subtask", json_integer(k->subtask));
    json_object_set_new(o, "pending", json_integer(k->pending));
    json_object_set_new(o, "oldest_pending_age_ns",
                        json_integer((json_int_t)k->oldest_pending_age_ns));
    json_object_set_new(o, "commit_attempts",
                        json_integer((json_int_t)k->commit_attempts));
    json_object_set_new(o, "committed", json_integer((json_int_t)k->committed));
    json_object_set_new(o, "already_committed",
                        json_integer((json_int_t)k->already_committed));
    json_object_set_new(o, "retries", json_integer((json_int_t)k->retries));
    json_object_set_new(o, "lost", json_integer((json_int_t)k->lost));
    json_object_set_new(o, "lingering_aborted",
                        json_integer((json_int_t)k->lingering_aborted));
    json_array_append_new(sinks, o);
  }
  json_object_set_new(root, "sinks", sinks);
  json_object_set_new(root, "restarts", json_integer(sl_job_restarts(job)));
  sl_checkpoint_stats_t hist[64];
  uint32_t nh = sl_job_checkpoint_history(job, hist, 64);
  json_t *cks = json_array();
  for (uint32_t i = 0; i < nh; i++) {
    const sl_checkpoint_stats_t *h = &hist[i];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer((json_int_t)h->id));
    json_object_set_new(o, "result", json_string(sl_errname(h->result)));
    json_object_set_new(o, "duration_ns", json_integer(h->duration_ns));
    json_object_set_new(o, "bytes", json_integer((json_int_t)h->bytes));
    json_object_set_new(o, "channel_bytes",
                        json_integer((json_int_t)h->channel_bytes));
    json_object_set_new(o, "unaligned", json_boolean(h->is_unaligned));
    sl_checkpoint_task_stats_t *ts = NULL;
    uint32_t nt = 0;
    json_t *arr = json_array();
    if (sl_job_checkpoint_tasks(job, h->id, &ts, &nt) == SL_OK) {
      for (uint32_t k = 0; k < nt; k++) {
        if (!ts[k].has_acked) continue;
        json_t *x = json_object();
        json_object_set_new(x, "task", json_integer(ts[k].task));
        json_object_set_new(x, "barrier_delay_ns",
                            json_integer(ts[k].barrier_delay_ns));
        json_object_set_new(x, "alignment_ns", json_integer(ts[k].alignment_ns));
        json_object_set_new(x, "sync_ns", json_integer(ts[k].sync_ns));
        json_object_set_new(x, "async_ns", json_integer(ts[k].async_ns));
        json_object_set_new(x, "bytes", json_integer((json_int_t)ts[k].bytes));
        json_object_set_new(x, "channel_bytes",
                            json_integer((json_int_t)ts[k].channel_bytes));
        json_array_append_new(arr, x);
      }
      sl_free(ts);
    }
    json_object_set_new(o, "tasks", arr);
    json_array_append_new(cks, o);
  }
  json_object_set_new(root, "checkpoints", cks);
  sl_metrics_close(&m);
  rc = SL_OK;
  struct stat st;
  errno = 0;
  if ((fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) ||
      json_dumpfd(root, fd, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
    int e = errno;
    size_t n = strlen(path) + 128;
    *out_msg = malloc(n);
    if (*out_msg)
      snprintf(*out_msg, n, "cannot write metrics to '%s': %s", path,
               e ? strerror(e) : "write failed");
    rc = SL_EIO;
  }
  json_decref(root);
  return rc;
}
