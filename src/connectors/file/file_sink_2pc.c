/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exactly-once file sink: a two-phase-commit sink (sl_connector.h)
 * over part files.  Rows go to in-progress part files, one per bucket
 * directory; at every barrier (and when a part rolls by size or time) a
 * part is synced and renamed to pending; when the checkpoint completes,
 * the committer renames the pending files it names to their finished,
 * visible names.  See src/connectors/README.md and docs/connectors.md.
 *
 * DESIGN NOTES
 *
 *   .part-<uid>-<s>-<epoch>-<n><ext>.inprogress   (written, hidden)
 *        | roll: fdatasync, close, rename, fsync(dir)    roll_part()
 *        v
 *   .part-<uid>-<s>-<epoch>-<n><ext>.pending      (durable, hidden; named
 *        |                                          by the committable)
 *        | commit: rename, fsync(dir)                    tx_commit()
 *        v
 *   part-<uid>-<s>-<epoch>-<n><ext>               (finished, visible)
 *
 * Invariants:
 *  F1. A part file never spans two epochs: prepare rolls every open part,
 *      so no in-progress file has to survive a checkpoint.
 *  F2. Names are unique across attempts and processes: the epoch id comes
 *      from the job's checkpoint id sequence (never reused), so an older
 *      attempt's writer can never write, roll or finish a newer attempt's
 *      file.  This is the file sink's fencing.
 *  F3. The committable records each pending part and its length; commit
 *      cuts a pending file longer than that (bytes after the prepare
 *      cannot exist, but are never trusted) and answers LOST for a
 *      shorter one.  A missing pending file with a finished file of the
 *      recorded length is ALREADY; neither is LOST.
 *  F4. recover() deletes in-progress and pending files of the subtasks it
 *      owns: the restored committables were committed first, so none of
 *      what is left is named by a completed checkpoint.
 *  F5. A finished part of epoch E proves that a checkpoint K > E
 *      committed (epoch E is closed by a barrier after E), so
 *      committed_max answers E + 1, a lower bound of K; E >= C then means
 *      that restoring C re-emits output (rule 0.3-7).
 * The commit point of a part is the rename to its finished name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define PART_FLUSH_AT (256u * 1024u)

typedef struct txf_s {
  sl_file_sink_config_t cfg;
  char *dir;
  char *bucket_field;
} txf_t;

typedef struct part_s {
  char *bucket; /* relative directory, "" for none */
  char *name;   /* finished name */
  int fd;
  uint64_t size; /* bytes written to the file */
  int64_t opened_ns;
  sl_bytes_t buf;
} part_t;

typedef struct done_s {
  char *bucket;
  char *name;
  uint64_t size;
} done_t;

typedef struct txw_s {
  txf_t *s;
  const sl_schema_t *schema;
  char uid[96];
  uint32_t subtask;
  uint64_t epoch;
  uint32_t seq;
  int bucket_idx; /* field index, -1 none */
  part_t *open;
  uint32_t n_open, cap_open;
  done_t *done;
  uint32_t n_done, cap_done;
  sl_bytes_t row, bucket;
} txw_t;

typedef struct txc_s {
  txf_t *s;
  char uid[96];
  uint32_t *owned;
  uint32_t n_owned;
  sl_sink_counters_t *counters; /* the engine's, or NULL */
} txc_t;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* uid as it appears in file names: [A-Za-z0-9_], at most 64 bytes. */
static void safe_uid(char *out, size_t n, const char *uid) {
  size_t k = 0;
  for (; uid[k] && k + 1 < n && k < 64; k++) {
    char c = uid[k];
    out[k] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_')
                 ? c
                 : '_';
  }
  out[k] = '\0';
}

static const char *ext_of(const txf_t *s) {
  return s->cfg.format == SL_FORMAT_JSON ? ".json" : ".csv";
}

static char *join3(const char *a, const char *b, const char *c) {
  sl_bytes_t p;
  sl_bytes_init(&p);
  if (sl_bytes_printf(&p, "%s%s%s%s%s", a, b[0] ? "/" : "", b,
                      c[0] ? "/" : "", c) != SL_OK ||
      sl_bytes_append(&p, "", 1) != SL_OK) {
    sl_bytes_close(&p);
    return NULL;
  }
  return (char *)p.data;
}

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = fsync(fd) == 0 ? SL_OK : -errno;
  close(fd);
  return rc;
}

static int mkdirs(const char *path, sl_error_t **out_err) {
  char *p = sl_strdup(path);
  if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (char *s = p + 1;; s++) {
    bool is_end = *s == '\0';
    if (*s != '/' && !is_end) continue;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      int e = errno;
      int rc = sl_error_set(out_err, -e, "file sink: cannot create directory "
                            "'%s': %s", p, strerror(e));
      sl_free(p);
      return rc;
    }
    if (is_end) break;
    *s = '/';
  }
  sl_free(p);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Writer. */

static int write_buf(part_t *p, const char *path, sl_error_t **out_err) {
  size_t off = 0;
  while (off < p->buf.len) {
    ssize_t n = write(p->fd, p->buf.data + off, p->buf.len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      return sl_error_set(out_err, -e, "file sink: cannot write '%s': %s",
                          path, strerror(e));
    }
    off += (size_t)n;
  }
  p->size += p->buf.len;
  p->buf.len = 0;
  return SL_OK;
}

static char *hidden_path(const txw_t *w, const part_t *p, const char *suffix) {
  sl_bytes_t n;
  sl_bytes_init(&n);
  char *d = join3(w->s->dir, p->bucket, "");
  int rc = d ? sl_bytes_printf(&n, "%s/.%s%s", d, p->name, suffix) : SL_ENOMEM;
  sl_free(d);
  if (rc != SL_OK || sl_bytes_append(&n, "", 1) != SL_OK) {
    sl_bytes_close(&n);
    return NULL;
  }
  return (char *)n.data;
}

static void part_free(part_t *p) {
  if (p->fd >= 0) close(p->fd);
  sl_free(p->bucket);
  sl_free(p->name);
  sl_bytes_close(&p->buf);
}

/* In progress -> pending (F1): sync, close, rename, sync the directory. */
static int roll_part(txw_t *w, uint32_t i, sl_error_t **out_err) {
  part_t *p = &w->open[i];
  char *ip = hidden_path(w, p, ".inprogress");
  char *pp = hidden_path(w, p, ".pending");
  char *dir = join3(w->s->dir, p->bucket, "");
  int rc = ip && pp && dir ? SL_OK
                           : sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rc == SL_OK) rc = write_buf(p, ip, out_err);
  if (rc == SL_OK && fdatasync(p->fd) != 0)
    rc = sl_error_set(out_err, -errno, "file sink: cannot sync '%s': %s", ip,
                      strerror(errno));
  if (rc == SL_OK) {
    int fd = p->fd;
    p->fd = -1;
    if (close(fd) != 0)
      rc = sl_error_set(out_err, -errno, "file sink: cannot close '%s': %s",
                        ip, strerror(errno));
  }
  if (rc == SL_OK && rename(ip, pp) != 0)
    rc = sl_error_set(out_err, -errno, "file sink: cannot rename '%s' to "
                      "'%s': %s", ip, pp, strerror(errno));
  if (rc == SL_OK && (rc = fsync_dir(dir)) != SL_OK)
    sl_error_set(out_err, rc, "file sink: cannot sync directory '%s': %s",
                 dir, sl_strerror(rc));
  if (rc == SL_OK && w->n_done == w->cap_done) {
    uint32_t cap = w->cap_done ? w->cap_done * 2 : 8;
    done_t *d = sl_realloc(w->done, cap * sizeof(*d));
    if (d == NULL) rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    else {
      w->done = d;
      w->cap_done = cap;
    }
  }
  sl_free(ip);
  sl_free(pp);
  sl_free(dir);
  if (rc != SL_OK) return rc;
  w->done[w->n_done++] = (done_t){p->bucket, p->name, p->size};
  p->bucket = p->name = NULL;
  part_free(p);
  w->open[i] = w->open[--w->n_open];
  return SL_OK;
}

static int open_part(txw_t *w, const char *bucket, part_t **out,
                     sl_error_t **out_err) {
  if (w->n_open == w->cap_open) {
    uint32_t cap = w->cap_open ? w->cap_open * 2 : 4;
    part_t *p = sl_realloc(w->open, cap * sizeof(*p));
    if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    w->open = p;
    w->cap_open = cap;
  }
  part_t *p = &w->open[w->n_open];
  memset(p, 0, sizeof(*p));
  p->fd = -1;
  sl_bytes_init(&p->buf);
  p->bucket = sl_strdup(bucket);
  sl_bytes_t n;
  sl_bytes_init(&n);
  sl_bytes_printf(&n, "part-%s-%u-%llu-%u%s", w->uid, w->subtask,
                  (unsigned long long)w->epoch, w->seq, ext_of(w->s));
  sl_bytes_append(&n, "", 1);
  p->name = (char *)n.data;
  char *dir = join3(w->s->dir, bucket, "");
  char *ip = p->name && p->bucket ? hidden_path(w, p, ".inprogress") : NULL;
  int rc = dir && ip ? mkdirs(dir, out_err)
                     : sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rc == SL_OK) {
    p->fd = open(ip, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (p->fd < 0)
      rc = sl_error_set(out_err, -errno, "file sink: cannot create part "
                        "file '%s': %s", ip, strerror(errno));
  }
  if (rc == SL_OK && w->s->cfg.csv_header &&
      w->s->cfg.format == SL_FORMAT_CSV &&
      sl_csv_format_header(w->schema, w->s->cfg.csv_delimiter,
                           w->s->cfg.changelog, &p->buf) != SL_OK)
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  sl_free(dir);
  sl_free(ip);
  if (rc != SL_OK) {
    part_free(p);
    return rc;
  }
  p->opened_ns = mono_ns();
  w->seq++;
  w->n_open++;
  *out = p;
  return SL_OK;
}

/* The bucket directory of a row (relative to the sink's directory). */
static int bucket_of(txw_t *w, const sl_row_t *row) {
  sl_bytes_t *b = &w->bucket;
  b->len = 0;
  int rc = SL_OK;
  const txf_t *s = w->s;
  if (w->bucket_idx < 0) return sl_bytes_append(b, "", 1);
  uint32_t i = (uint32_t)w->bucket_idx;
  if (sl_row_is_null(row, i)) {
    rc = s->cfg.bucket == SL_FILE_BUCKET_FIELD
             ? sl_bytes_printf(b, "%s=__null__", s->bucket_field)
             : sl_bytes_printf(b, "__null__");
    return rc == SL_OK ? sl_bytes_append(b, "", 1) : rc;
  }
  if (s->cfg.bucket == SL_FILE_BUCKET_FIELD) {
    rc = sl_bytes_printf(b, "%s=", s->bucket_field);
    size_t from = b->len;
    if (rc == SL_OK) rc = sl_value_format(row, i, b);
    /* A value is one directory name: no '/', no leading '.', not empty. */
    for (size_t k = from; rc == SL_OK && k < b->len; k++)
      if (b->data[k] == '/' || b->data[k] == '\0' ||
          (k == from && b->data[k] == '.'))
        b->data[k] = '_';
    return rc == SL_OK ? sl_bytes_append(b, "", 1) : rc;
  }
  int64_t us = sl_row_get_i64(row, i);
  time_t t = (time_t)(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
  struct tm tm;
  char tmp[64];
  if (gmtime_r(&t, &tm) == NULL) return sl_bytes_append(b, "__invalid__", 12);
  strftime(tmp, sizeof(tmp),
           s->cfg.bucket == SL_FILE_BUCKET_DATE ? "%Y-%m-%d" : "%Y-%m-%d--%H",
           &tm);
  return sl_bytes_append(b, tmp, strlen(tmp) + 1);
}

static int tx_write(void *wr, const sl_row_t *row, sl_error_t **out_err) {
  txw_t *w = wr;
  int rc = bucket_of(w, row);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  const char *bucket = (const char *)w->bucket.data;
  part_t *p = NULL;
  uint32_t idx = 0;
  for (; idx < w->n_open; idx++)
    if (strcmp(w->open[idx].bucket, bucket) == 0) {
      p = &w->open[idx];
      break;
    }
  if (p == NULL && (rc = open_part(w, bucket, &p, out_err)) != SL_OK)
    return rc;
  rc = w->s->cfg.format == SL_FORMAT_JSON
           ? sl_json_format(row, w->s->cfg.changelog, &p->buf)
           : sl_csv_format(row, w->s->cfg.csv_delimiter, w->s->cfg.changelog,
                           &p->buf);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "file sink: cannot format a row: %s",
                        sl_strerror(rc));
  const sl_file_sink_config_t *c = &w->s->cfg;
  if ((c->roll_size && p->size + p->buf.len >= c->roll_size) ||
      (c->roll_interval_ms &&
       mono_ns() - p->opened_ns >= c->roll_interval_ms * 1000000ll))
    return roll_part(w, idx, out_err);
  if (p->buf.len >= PART_FLUSH_AT) {
    char *ip = hidden_path(w, p, ".inprogress");
    rc = ip ? write_buf(p, ip, out_err)
            : sl_error_set(out_err, SL_ENOMEM, "out of memory");
    sl_free(ip);
  }
  return rc;
}

/* Committable: u32 n, then per part u16 bucket length, bucket, u16 name
 * length, name, u64 size (all little-endian). */
static int put_u(sl_bytes_t *b, uint64_t v, int n) {
  uint8_t x[8];
  for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
  return sl_bytes_append(b, x, (size_t)n);
}

static int tx_prepare(void *wr, uint64_t ckpt, sl_bytes_t *out,
                      sl_error_t **out_err) {
  txw_t *w = wr;
  int rc = SL_OK;
  while (rc == SL_OK && w->n_open > 0) rc = roll_part(w, 0, out_err);
  if (rc != SL_OK) return rc;
  if (w->n_done > 0) {
    rc = put_u(out, w->n_done, 4);
    for (uint32_t i = 0; rc == SL_OK && i < w->n_done; i++) {
      const done_t *d = &w->done[i];
      size_t bl = strlen(d->bucket), nl = strlen(d->name);
      if (bl > 4096 || nl > 4096)
        return sl_error_set(out_err, SL_EINVAL, "file sink: bucket '%s' is "
                            "too long", d->bucket);
      rc = put_u(out, bl, 2);
      if (rc == SL_OK) rc = sl_bytes_append(out, d->bucket, bl);
      if (rc == SL_OK) rc = put_u(out, nl, 2);
      if (rc == SL_OK) rc = sl_bytes_append(out, d->name, nl);
      if (rc == SL_OK) rc = put_u(out, d->size, 8);
    }
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  }
  for (uint32_t i = 0; i < w->n_done; i++) {
    sl_free(w->done[i].bucket);
    sl_free(w->done[i].name);
  }
  w->n_done = 0;
  w->epoch = ckpt; /* the next epoch is named by this barrier */
  w->seq = 0;
  return SL_OK;
}

static int tx_flush(void *wr, sl_error_t **out_err) {
  /* Nothing becomes visible before the commit; prepare syncs. */
  (void)wr;
  (void)out_err;
  return SL_OK;
}

/* Rows after the last prepare are never committed: delete their parts. */
static int tx_close(void *wr, bool is_success, sl_error_t **out_err) {
  (void)is_success;
  (void)out_err;
  txw_t *w = wr;
  for (uint32_t i = 0; i < w->n_open; i++) {
    char *ip = hidden_path(w, &w->open[i], ".inprogress");
    if (ip) unlink(ip);
    sl_free(ip);
    part_free(&w->open[i]);
  }
  for (uint32_t i = 0; i < w->n_done; i++) {
    part_t tmp = {w->done[i].bucket, w->done[i].name, -1, 0, 0, {0}};
    char *pp = hidden_path(w, &tmp, ".pending");
    if (pp) unlink(pp);
    sl_free(pp);
    sl_free(w->done[i].bucket);
    sl_free(w->done[i].name);
  }
  sl_free(w->open);
  sl_free(w->done);
  sl_bytes_close(&w->row);
  sl_bytes_close(&w->bucket);
  sl_free(w);
  return SL_OK;
}

static int tx_open(void *ctx, const sl_sink_init_t *init, void **out,
                   sl_error_t **out_err) {
  txf_t *s = ctx;
  int idx = -1;
  if (s->cfg.bucket != SL_FILE_BUCKET_NONE) {
    idx = sl_schema_index(init->schema, s->bucket_field);
    if (idx < 0)
      return sl_error_set(out_err, SL_EINVAL, "file sink '%s': the bucket "
                          "field '%s' is not a column of the sink's input",
                          init->uid, s->bucket_field);
    if (s->cfg.bucket != SL_FILE_BUCKET_FIELD &&
        sl_schema_field(init->schema, (uint32_t)idx)->type.id !=
            SL_TYPE_TIMESTAMP)
      return sl_error_set(out_err, SL_EINVAL, "file sink '%s': buckets by "
                          "date or hour need a timestamp field; '%s' is not "
                          "one", init->uid, s->bucket_field);
  }
  int rc = mkdirs(s->dir, out_err);
  if (rc != SL_OK) return rc;
  txw_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->s = s;
  w->schema = init->schema;
  safe_uid(w->uid, sizeof(w->uid), init->uid);
  w->subtask = init->subtask;
  w->epoch = init->epoch_id;
  w->bucket_idx = idx;
  sl_bytes_init(&w->row);
  sl_bytes_init(&w->bucket);
  *out = w;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Committer. */

static int tx_copen(void *ctx, const sl_committer_init_t *ci, void **out,
                    sl_error_t **out_err) {
  txc_t *c = sl_calloc(1, sizeof(*c));
  if (c) c->owned = sl_calloc(ci->n_owned_subtasks + 1, sizeof(uint32_t));
  if (c == NULL || c->owned == NULL) {
    if (c) sl_free(c);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  c->s = ctx;
  safe_uid(c->uid, sizeof(c->uid), ci->uid);
  memcpy(c->owned, ci->owned_subtasks,
         ci->n_owned_subtasks * sizeof(uint32_t));
  c->n_owned = ci->n_owned_subtasks;
  c->counters = ci->counters;
  *out = c;
  return SL_OK;
}

static uint64_t get_u(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* One part (F3).  Returns the status; *out_err says why for LOST/FATAL. */
static sl_commit_status_t commit_part(txc_t *c, const char *bucket,
                                      const char *name, uint64_t size,
                                      sl_error_t **out_err) {
  char *dir = join3(c->s->dir, bucket, "");
  sl_bytes_t pb, fb;
  sl_bytes_init(&pb);
  sl_bytes_init(&fb);
  sl_commit_status_t st = SL_COMMIT_FATAL;
  if (dir == NULL || sl_bytes_printf(&pb, "%s/.%s.pending%c", dir, name, 0) ||
      sl_bytes_printf(&fb, "%s/%s%c", dir, name, 0)) {
    sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto out;
  }
  const char *pp = (const char *)pb.data, *fp = (const char *)fb.data;
  struct stat sp, sf;
  if (stat(pp, &sp) == 0) {
    if ((uint64_t)sp.st_size < size) {
      st = SL_COMMIT_LOST;
      sl_error_set(out_err, SL_ECORRUPT, "pending part file '%s' has %lld "
                   "bytes, the checkpoint recorded %llu", pp,
                   (long long)sp.st_size, (unsigned long long)size);
      goto out;
    }
    if ((uint64_t)sp.st_size > size && truncate(pp, (off_t)size) != 0) {
      sl_error_set(out_err, -errno, "cannot cut '%s' to %llu bytes: %s", pp,
                   (unsigned long long)size, strerror(errno));
      goto out;
    }
    if (rename(pp, fp) != 0) {
      sl_error_set(out_err, -errno, "cannot rename '%s' to '%s': %s", pp, fp,
                   strerror(errno));
      goto out;
    }
    int rc = fsync_dir(dir);
    if (rc != SL_OK) {
      /* Renamed but maybe not durable: the retry resolves it (ALREADY). */
      st = SL_COMMIT_RETRY;
      sl_error_set(out_err, rc, "cannot sync directory '%s': %s", dir,
                   sl_strerror(rc));
      goto out;
    }
    st = SL_COMMIT_OK;
  } else if (stat(fp, &sf) == 0 && (uint64_t)sf.st_size == size) {
    st = SL_COMMIT_ALREADY;
  } else {
    st = SL_COMMIT_LOST;
    sl_error_set(out_err, SL_ENOTFOUND, "neither the pending part file '%s' "
                 "nor the finished file '%s' (of %llu bytes) exists", pp, fp,
                 (unsigned long long)size);
  }
out:
  sl_free(dir);
  sl_bytes_close(&pb);
  sl_bytes_close(&fb);
  return st;
}

static int tx_commit(void *cm, uint64_t ckpt, uint32_t origin,
                     const uint8_t *b, size_t len, uint32_t attempt,
                     sl_commit_status_t *out_status, sl_error_t **out_err) {
  (void)ckpt;
  (void)origin;
  (void)attempt;
  txc_t *c = cm;
  if (len < 4) goto corrupt;
  uint32_t n = (uint32_t)get_u(b, 4);
  size_t off = 4;
  bool any_ok = false;
  for (uint32_t i = 0; i < n; i++) {
    char bucket[4097], name[4097];
    if (off + 2 > len) goto corrupt;
    size_t bl = get_u(b + off, 2);
    off += 2;
    if (bl >= sizeof(bucket) || off + bl + 2 > len) goto corrupt;
    memcpy(bucket, b + off, bl);
    bucket[bl] = '\0';
    off += bl;
    size_t nl = get_u(b + off, 2);
    off += 2;
    if (nl >= sizeof(name) || off + nl + 8 > len) goto corrupt;
    memcpy(name, b + off, nl);
    name[nl] = '\0';
    off += nl;
    uint64_t size = get_u(b + off, 8);
    off += 8;
    sl_commit_status_t st = commit_part(c, bucket, name, size, out_err);
    if (st == SL_COMMIT_OK) any_ok = true;
    else if (st != SL_COMMIT_ALREADY) {
      *out_status = st;
      return SL_OK;
    }
  }
  if (off != len) goto corrupt;
  *out_status = any_ok || n == 0 ? SL_COMMIT_OK : SL_COMMIT_ALREADY;
  return SL_OK;
corrupt:
  *out_status = SL_COMMIT_FATAL;
  return sl_error_set(out_err, SL_ECORRUPT, "file sink: a malformed "
                      "committable (%zu bytes)", len);
}

/* Is name ".part-<uid>-<s>-..." with an in-progress or pending suffix of an
 * owned subtask s? */
static bool is_owned_leftover(const txc_t *c, const char *name) {
  size_t ul = strlen(c->uid), nl = strlen(name);
  if (strncmp(name, ".part-", 6) != 0 || strncmp(name + 6, c->uid, ul) != 0 ||
      name[6 + ul] != '-')
    return false;
  bool is_tmp = (nl > 11 && strcmp(name + nl - 11, ".inprogress") == 0) ||
                (nl > 8 && strcmp(name + nl - 8, ".pending") == 0);
  unsigned s;
  if (!is_tmp || sscanf(name + 7 + ul, "%u-", &s) != 1) return false;
  for (uint32_t i = 0; i < c->n_owned; i++)
    if (c->owned[i] == s) return true;
  return false;
}

static int recover_dir(txc_t *c, const char *dir, int depth,
                       sl_error_t **out_err) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    if (errno == ENOENT) return SL_OK;
    return sl_error_set(out_err, -errno, "file sink: cannot list '%s': %s",
                        dir, strerror(errno));
  }
  int rc = SL_OK;
  bool is_changed = false;
  struct dirent *e;
  while (rc == SL_OK && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char *p = join3(dir, e->d_name, "");
    if (p == NULL) {
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      break;
    }
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth == 0 &&
        e->d_name[0] != '.') {
      rc = recover_dir(c, p, 1, out_err); /* a bucket */
    } else if (S_ISREG(st.st_mode) && is_owned_leftover(c, e->d_name)) {
      if (unlink(p) != 0 && errno != ENOENT)
        rc = sl_error_set(out_err, -errno, "file sink: cannot delete the "
                          "leftover part file '%s': %s", p, strerror(errno));
      else {
        sl_log(SL_LOG_INFO, "file sink: deleted '%s', a part file no "
               "completed checkpoint names", p);
        is_changed = true;
        sl_sink_counters_add_lingering_aborted(c->counters, 1);
      }
    }
    sl_free(p);
  }
  closedir(d);
  if (rc == SL_OK && is_changed && (rc = fsync_dir(dir)) != SL_OK)
    sl_error_set(out_err, rc, "file sink: cannot sync '%s'", dir);
  return rc;
}

static int tx_recover(void *cm, sl_error_t **out_err) {
  txc_t *c = cm;
  return recover_dir(c, c->s->dir, 0, out_err);
}

/* Parse a finished name "part-<uid>-<s>-<epoch>-<n><ext>" of this sink;
 * false for anything else (hidden files, other sinks' parts). */
static bool parse_finished(const txc_t *c, const char *name,
                           uint64_t *out_epoch) {
  size_t ul = strlen(c->uid);
  if (strncmp(name, "part-", 5) != 0 || strncmp(name + 5, c->uid, ul) != 0 ||
      name[5 + ul] != '-')
    return false;
  const char *p = name + 6 + ul;
  char *end;
  if (*p < '0' || *p > '9') return false;
  (void)strtoul(p, &end, 10);
  if (*end != '-' || end[1] < '0' || end[1] > '9') return false;
  errno = 0;
  unsigned long long e = strtoull(end + 1, &end, 10);
  if (errno != 0 || *end != '-' || end[1] < '0' || end[1] > '9') return false;
  *out_epoch = e;
  return true;
}

/* The newest epoch of a finished part in dir and (depth 0) its buckets. */
static int finished_max(const txc_t *c, const char *dir, int depth,
                        uint64_t *io_epoch, char **io_path,
                        sl_error_t **out_err) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    if (errno == ENOENT) return SL_OK;
    return sl_error_set(out_err, -errno, "file sink: cannot list '%s': %s",
                        dir, strerror(errno));
  }
  int rc = SL_OK;
  struct dirent *e;
  while (rc == SL_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    uint64_t ep = 0;
    bool is_part = parse_finished(c, e->d_name, &ep);
    if (is_part && *io_path != NULL && ep <= *io_epoch) continue;
    char *p = join3(dir, e->d_name, "");
    if (p == NULL) {
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      break;
    }
    struct stat st;
    if (lstat(p, &st) != 0) {
      sl_free(p);
      continue;
    }
    if (S_ISDIR(st.st_mode) && depth == 0) {
      rc = finished_max(c, p, 1, io_epoch, io_path, out_err); /* a bucket */
    } else if (S_ISREG(st.st_mode) && is_part) {
      sl_free(*io_path);
      *io_path = p;
      *io_epoch = ep;
      p = NULL;
    }
    sl_free(p);
  }
  closedir(d);
  return rc;
}

/* Rule 0.3-7 (docs/connectors.md "Restoring an older checkpoint"), by F5:
 * the finished parts of every subtask of this sink in the directory. */
static int tx_committed_max(void *cm, uint64_t *out_ckpt,
                            sl_bytes_t *out_evidence, sl_error_t **out_err) {
  txc_t *c = cm;
  uint64_t ep = 0;
  char *path = NULL;
  *out_ckpt = 0;
  int rc = finished_max(c, c->s->dir, 0, &ep, &path, out_err);
  if (rc == SL_OK && path != NULL) {
    *out_ckpt = ep + 1;
    if (sl_bytes_printf(out_evidence, "the finished part file '%s' holds "
                        "epoch %llu, which a checkpoint after %llu committed",
                        path, (unsigned long long)ep,
                        (unsigned long long)ep) != SL_OK)
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  sl_free(path);
  return rc;
}

static void tx_cclose(void *cm) {
  txc_t *c = cm;
  sl_free(c->owned);
  sl_free(c);
}

static void tx_destroy(void *ctx) {
  txf_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->dir);
  sl_free(s->bucket_field);
  sl_free(s);
}

static const sl_sink_vt_t file_tx_vt = {
    .type_name = "file",
    .writer_open = tx_open,
    .write = tx_write,
    .flush = tx_flush,
    .writer_close = tx_close,
    .destroy = tx_destroy,
    .prepare = tx_prepare,
    .committer_open = tx_copen,
    .commit = tx_commit,
    .recover = tx_recover,
    .committer_close = tx_cclose,
    .committed_max = tx_committed_max,
};

int sl__file_sink_tx_create(const sl_file_sink_config_t *cfg,
                            const sl_sink_vt_t **out_vt, void **out_ctx,
                            sl_error_t **out_err) {
  if (cfg->bucket != SL_FILE_BUCKET_NONE &&
      (cfg->bucket_field == NULL || cfg->bucket_field[0] == '\0'))
    return sl_error_set(out_err, SL_EINVAL, "file sink: buckets need a "
                        "bucket field");
  if (cfg->bucket > SL_FILE_BUCKET_HOUR)
    return sl_error_set(out_err, SL_EINVAL, "file sink: unknown bucket "
                        "kind %d", (int)cfg->bucket);
  if (cfg->roll_interval_ms < 0)
    return sl_error_set(out_err, SL_EINVAL, "file sink: a negative roll "
                        "interval");
  txf_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  s->cfg = *cfg;
  if (s->cfg.csv_delimiter == 0) s->cfg.csv_delimiter = ',';
  s->dir = sl_strdup(cfg->path);
  s->bucket_field = cfg->bucket_field ? sl_strdup(cfg->bucket_field) : NULL;
  if (s->dir == NULL || (cfg->bucket_field && s->bucket_field == NULL)) {
    tx_destroy(s);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  size_t n = strlen(s->dir);
  while (n > 1 && s->dir[n - 1] == '/') s->dir[--n] = '\0';
  s->cfg.path = s->dir;
  s->cfg.bucket_field = s->bucket_field;
  *out_vt = &file_tx_vt;
  *out_ctx = s;
  return SL_OK;
}
