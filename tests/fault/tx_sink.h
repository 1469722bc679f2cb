/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test-only two-phase-commit sink over a directory that plays the
 * external system: an epoch's rows are buffered in memory (the open
 * transaction, lost with the process), prepare writes them to
 * <dir>/prepared/<uid>-<subtask>-<epoch> (durable, invisible), commit
 * renames that file into <dir>/committed/ (the marker: a committed file
 * says "committed", so a second commit answers ALREADY, and a transaction
 * in neither directory answers LOST), recover deletes the prepared files
 * of the subtasks the committer owns.  The files survive process kills.
 * Counters and knobs (answer RETRY or RESTART k times) are process
 * globals, and so is
 * what committed_max answers (the newest checkpoint committed in this
 * process): the tests that restore an older checkpoint run every job in
 * one process.
 */
#ifndef SL_TEST_TX_SINK_H
#define SL_TEST_TX_SINK_H

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_test.h"
#include "sluice/sluice.h"

typedef struct txs_stats_s {
  uint32_t commit_calls;
  uint32_t ok, already, lost, retry;
  uint32_t recovered;        /* prepared files deleted by recover */
  uint32_t foreign_commits;  /* origin % p' != committer subtask */
  uint32_t name_reused;      /* prepare found its name taken */
  uint32_t max_attempt;      /* largest attempt number seen */
  uint32_t retry_left;       /* knob: answer RETRY this many times */
  uint32_t retry_forever;    /* knob: always RETRY */
  uint32_t restart_left;     /* knob: answer RESTART this many times */
  uint32_t restart;          /* RESTART answered */
  uint64_t max_committed_ckpt; /* newest checkpoint answered OK/ALREADY */
  uint32_t committed_max_calls;
} txs_stats_t;

static pthread_mutex_t txs_lock = PTHREAD_MUTEX_INITIALIZER;
static txs_stats_t txs;

typedef struct txs_writer_s {
  const char *dir;
  char uid[128];
  uint32_t subtask;
  uint64_t epoch;
  sl_bytes_t buf;
} txs_writer_t;

typedef struct txs_committer_s {
  const char *dir;
  char uid[128];
  uint32_t subtask, parallelism;
  uint32_t owned[64];
  uint32_t n_owned;
  sl_sink_counters_t *counters;
} txs_committer_t;

static void txs_path(char *out, size_t n, const char *dir, const char *sub,
                     const char *name) {
  snprintf(out, n, "%s/%s/%s", dir, sub, name);
}

static int txs_open(void *ctx, const sl_sink_init_t *init, void **out,
                    sl_error_t **err) {
  (void)err;
  txs_writer_t *w = calloc(1, sizeof(*w));
  w->dir = ctx;
  snprintf(w->uid, sizeof(w->uid), "%s", init->uid);
  w->subtask = init->subtask;
  w->epoch = init->epoch_id;
  sl_bytes_init(&w->buf);
  if (init->epoch_id == 0 || init->job == NULL)
    return sl_error_set(err, SL_EINVAL, "no epoch id or job name");
  *out = w;
  return SL_OK;
}

static int txs_write(void *wr, const sl_row_t *row, sl_error_t **err) {
  (void)err;
  txs_writer_t *w = wr;
  return sl_bytes_printf(&w->buf, "%lld,%lld\n",
                         (long long)sl_row_get_i32(row, 1),
                         (long long)sl_row_get_i64(row, 0));
}

static int txs_prepare(void *wr, uint64_t ckpt, sl_bytes_t *out,
                       sl_error_t **err) {
  txs_writer_t *w = wr;
  if (w->buf.len > 0) {
    char name[256], p[4600], c[4600];
    snprintf(name, sizeof(name), "%s-%u-%llu", w->uid, w->subtask,
             (unsigned long long)w->epoch);
    txs_path(p, sizeof(p), w->dir, "prepared", name);
    txs_path(c, sizeof(c), w->dir, "committed", name);
    if (access(p, F_OK) == 0 || access(c, F_OK) == 0) {
      pthread_mutex_lock(&txs_lock);
      txs.name_reused++;
      pthread_mutex_unlock(&txs_lock);
      return sl_error_set(err, SL_ESTATE, "transaction %s exists", name);
    }
    FILE *f = fopen(p, "w");
    if (f == NULL) return sl_error_set(err, SL_EIO, "cannot write %s", p);
    fwrite(w->buf.data, 1, w->buf.len, f);
    fclose(f);
    sl_bytes_append(out, name, strlen(name));
  }
  w->buf.len = 0;
  w->epoch = ckpt; /* the next epoch is named by the barrier's id */
  return SL_OK;
}

static int txs_wclose(void *wr, bool ok, sl_error_t **err) {
  (void)ok;
  (void)err;
  txs_writer_t *w = wr;
  sl_bytes_close(&w->buf);
  free(w);
  return SL_OK;
}

static int txs_copen(void *ctx, const sl_committer_init_t *ci, void **out,
                     sl_error_t **err) {
  (void)err;
  txs_committer_t *c = calloc(1, sizeof(*c));
  c->dir = ctx;
  snprintf(c->uid, sizeof(c->uid), "%s", ci->uid);
  c->subtask = ci->subtask;
  c->parallelism = ci->parallelism;
  c->counters = ci->counters;
  for (uint32_t i = 0; i < ci->n_owned_subtasks && i < 64; i++)
    c->owned[c->n_owned++] = ci->owned_subtasks[i];
  *out = c;
  return SL_OK;
}

static int txs_commit(void *cm, uint64_t ckpt, uint32_t origin,
                      const uint8_t *b, size_t len, uint32_t attempt,
                      sl_commit_status_t *st, sl_error_t **err) {
  txs_committer_t *c = cm;
  char name[256], p[4600], q[4600];
  snprintf(name, sizeof(name), "%.*s", (int)len, (const char *)b);
  txs_path(p, sizeof(p), c->dir, "prepared", name);
  txs_path(q, sizeof(q), c->dir, "committed", name);
  pthread_mutex_lock(&txs_lock);
  txs.commit_calls++;
  if (attempt > txs.max_attempt) txs.max_attempt = attempt;
  if (origin % c->parallelism != c->subtask) txs.foreign_commits++;
  if (txs.restart_left > 0) {
    txs.restart_left--;
    txs.restart++;
    pthread_mutex_unlock(&txs_lock);
    *st = SL_COMMIT_RESTART;
    sl_error_set(err, SL_EAGAIN, "test store wants a restore");
    return SL_OK;
  }
  if (txs.retry_forever || txs.retry_left > 0) {
    if (txs.retry_left > 0) txs.retry_left--;
    txs.retry++;
    pthread_mutex_unlock(&txs_lock);
    *st = SL_COMMIT_RETRY;
    sl_error_set(err, SL_EAGAIN, "test store busy");
    return SL_OK;
  }
  pthread_mutex_unlock(&txs_lock);
  if (rename(p, q) == 0) {
    *st = SL_COMMIT_OK;
  } else if (access(q, F_OK) == 0) {
    *st = SL_COMMIT_ALREADY;
  } else {
    *st = SL_COMMIT_LOST;
    sl_error_set(err, SL_ENOTFOUND, "transaction %s is neither prepared "
                 "nor committed in the test store", name);
  }
  pthread_mutex_lock(&txs_lock);
  if (*st == SL_COMMIT_OK) txs.ok++;
  if (*st == SL_COMMIT_ALREADY) txs.already++;
  if (*st == SL_COMMIT_LOST) txs.lost++;
  if ((*st == SL_COMMIT_OK || *st == SL_COMMIT_ALREADY) &&
      ckpt > txs.max_committed_ckpt)
    txs.max_committed_ckpt = ckpt;
  pthread_mutex_unlock(&txs_lock);
  return SL_OK;
}

static int txs_recover(void *cm, sl_error_t **err) {
  (void)err;
  txs_committer_t *c = cm;
  char d[4400];
  snprintf(d, sizeof(d), "%s/prepared", c->dir);
  DIR *dir = opendir(d);
  if (dir == NULL) return sl_error_set(err, SL_EIO, "cannot list %s", d);
  struct dirent *e;
  size_t ul = strlen(c->uid);
  while ((e = readdir(dir)) != NULL) {
    unsigned s;
    unsigned long long ep;
    if (strncmp(e->d_name, c->uid, ul) != 0 || e->d_name[ul] != '-' ||
        sscanf(e->d_name + ul + 1, "%u-%llu", &s, &ep) != 2)
      continue;
    bool is_owned = false;
    for (uint32_t i = 0; i < c->n_owned; i++)
      if (c->owned[i] == s) is_owned = true;
    if (!is_owned) continue;
    char p[4700];
    snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
    if (unlink(p) == 0) {
      pthread_mutex_lock(&txs_lock);
      txs.recovered++;
      pthread_mutex_unlock(&txs_lock);
      sl_sink_counters_add_lingering_aborted(c->counters, 1);
    }
  }
  closedir(dir);
  return SL_OK;
}

static int txs_committed_max(void *cm, uint64_t *out, sl_bytes_t *ev,
                             sl_error_t **err) {
  (void)cm;
  (void)err;
  pthread_mutex_lock(&txs_lock);
  txs.committed_max_calls++;
  *out = txs.max_committed_ckpt;
  pthread_mutex_unlock(&txs_lock);
  return *out ? sl_bytes_printf(ev, "the test store committed checkpoint "
                                "%llu", (unsigned long long)*out)
              : SL_OK;
}

static void txs_cclose(void *cm) { free(cm); }
static void txs_destroy(void *ctx) { (void)ctx; }

static const sl_sink_vt_t txs_vt = {
    .type_name = "test-2pc",
    .writer_open = txs_open,
    .write = txs_write,
    .writer_close = txs_wclose,
    .destroy = txs_destroy,
    .prepare = txs_prepare,
    .committer_open = txs_copen,
    .commit = txs_commit,
    .recover = txs_recover,
    .committer_close = txs_cclose,
    .committed_max = txs_committed_max,
};

static inline void txs_reset(const char *dir) {
  char p[4400];
  mkdir(dir, 0755);
  snprintf(p, sizeof(p), "%s/prepared", dir);
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/committed", dir);
  mkdir(p, 0755);
  pthread_mutex_lock(&txs_lock);
  memset(&txs, 0, sizeof(txs));
  pthread_mutex_unlock(&txs_lock);
}

static inline uint32_t txs_count_files(const char *dir, const char *sub) {
  char d[4400];
  snprintf(d, sizeof(d), "%s/%s", dir, sub);
  DIR *dd = opendir(d);
  if (dd == NULL) return 0;
  uint32_t n = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(dd);
  return n;
}

/* Every (split, seq) of n_splits x per_split rows is in the committed
 * files exactly once; fails the test naming the first wrong row. */
static inline void txs_check_exactly_once(const char *dir, uint32_t n_splits,
                                          uint64_t per_split) {
  uint8_t *seen = calloc(n_splits * per_split, 1);
  char d[4400];
  snprintf(d, sizeof(d), "%s/committed", dir);
  DIR *dd = opendir(d);
  SL_ASSERT_TRUE(dd != NULL);
  struct dirent *e;
  uint64_t n = 0;
  while ((e = readdir(dd)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[4700];
    snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
    FILE *f = fopen(p, "r");
    SL_ASSERT_TRUE(f != NULL);
    long long sp, seq;
    while (fscanf(f, "%lld,%lld\n", &sp, &seq) == 2) {
      if (sp < 0 || (uint64_t)sp >= n_splits || seq < 0 ||
          (uint64_t)seq >= per_split)
        SL_TEST_FAIL("row %lld,%lld out of range in %s", sp, seq, p);
      if (seen[sp * per_split + (uint64_t)seq]++)
        SL_TEST_FAIL("row split %lld seq %lld committed twice (%s)", sp, seq,
                     p);
      n++;
    }
    fclose(f);
  }
  closedir(dd);
  for (uint64_t i = 0; i < n_splits * per_split; i++)
    if (!seen[i])
      SL_TEST_FAIL("row split %llu seq %llu never committed (%llu rows "
                   "committed)", (unsigned long long)(i / per_split),
                   (unsigned long long)(i % per_split),
                   (unsigned long long)n);
  free(seen);
}

#endif
