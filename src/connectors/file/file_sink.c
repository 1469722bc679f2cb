/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain (non-transactional) sinks: a file sink, a stdout sink and a null
 * sink.  The file sink writes CSV or JSON lines to one file per subtask
 * (the path itself at parallelism 1, else "<stem>-<subtask><ext>"), with
 * rows buffered and written in large blocks.  A cancelled or failed job
 * leaves what was written so far.
 *
 * Output a restored checkpoint covers is never destroyed.  A fresh start
 * (no checkpoint restored) truncates the file; a writer opened by an
 * attempt that restored a checkpoint (an in-process restart or --resume)
 * appends, after cutting a partly written last row (a kill in the middle
 * of a write), so the rows written after that checkpoint appear again.
 * Before each snapshot the buffer is written and synced (flush), so a
 * completed checkpoint never covers a row the file lacks.  See
 * src/connectors/README.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define FLUSH_AT (256u * 1024u)

typedef struct fsink_s {
  sl_file_sink_config_t cfg;
  char *path;
  bool is_stdout;
  /* Standard output has one header, written under stdout_lock before the
   * first row of any subtask or attempt (or at the first close). */
  bool is_header_written;
} fsink_t;

typedef struct fwriter_s {
  fsink_t *s;
  int fd;
  char *path;
  sl_bytes_t buf;
  const sl_schema_t *schema;
  bool is_dirty; /* written since the last sync */
} fwriter_t;

static pthread_mutex_t stdout_lock = PTHREAD_MUTEX_INITIALIZER;

static char *subtask_path(const char *path, uint32_t subtask,
                          uint32_t parallelism) {
  if (parallelism == 1) return sl_strdup(path);
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  if (dot == NULL || (slash && dot < slash) || dot == path ||
      (slash && dot == slash + 1))
    dot = path + strlen(path);
  sl_bytes_t b;
  sl_bytes_init(&b);
  if (sl_bytes_printf(&b, "%.*s-%u%s", (int)(dot - path), path, subtask,
                      dot) != SL_OK ||
      sl_bytes_append(&b, "", 1) != SL_OK) {
    sl_bytes_close(&b);
    return NULL;
  }
  return (char *)b.data;
}

/* Create the directories above path, like mkdir -p. */
static int make_parents(const char *path, sl_error_t **out_err) {
  char *p = sl_strdup(path);
  if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      int e = errno;
      int rc = sl_error_set(out_err, -e, "cannot create directory '%s' for "
                            "output file '%s': %s", p, path, strerror(e));
      sl_free(p);
      return rc;
    }
    *s = '/';
  }
  sl_free(p);
  return SL_OK;
}

/* Standard output: the header goes first, once.  stdout_lock is held. */
static int stdout_header(fwriter_t *w) {
  fsink_t *s = w->s;
  if (!s->cfg.csv_header || s->cfg.format != SL_FORMAT_CSV ||
      s->is_header_written)
    return SL_OK;
  sl_bytes_t h;
  sl_bytes_init(&h);
  int rc = sl_csv_format_header(w->schema, s->cfg.csv_delimiter,
                                s->cfg.changelog, &h);
  for (size_t off = 0; rc == SL_OK && off < h.len;) {
    ssize_t n = write(w->fd, h.data + off, h.len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = -errno;
    else off += (size_t)n;
  }
  sl_bytes_close(&h);
  if (rc == SL_OK) s->is_header_written = true;
  return rc;
}

static int write_all(fwriter_t *w, sl_error_t **out_err) {
  size_t off = 0;
  if (w->s->is_stdout) {
    pthread_mutex_lock(&stdout_lock);
    int rc = stdout_header(w);
    if (rc != SL_OK) {
      pthread_mutex_unlock(&stdout_lock);
      return sl_error_set(out_err, rc, "cannot write the header to '%s': %s",
                          w->path, sl_strerror(rc));
    }
  }
  while (off < w->buf.len) {
    ssize_t n = write(w->fd, w->buf.data + off, w->buf.len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      if (w->s->is_stdout) pthread_mutex_unlock(&stdout_lock);
      return sl_error_set(out_err, -e, "cannot write to '%s': %s", w->path,
                          strerror(e));
    }
    off += (size_t)n;
  }
  if (w->s->is_stdout) pthread_mutex_unlock(&stdout_lock);
  w->buf.len = 0;
  w->is_dirty = true;
  return SL_OK;
}

/*
 * The length of the longest prefix of fd's file that ends at a record
 * boundary: after a line end, outside a CSV quoted field.  sluice's CSV
 * writer puts quotes only around quoted fields and doubles them inside,
 * so a line end is a boundary exactly when the quotes before it are even.
 * JSON lines never hold a raw line end.
 */
static int complete_prefix(int fd, bool is_csv, off_t *out_len) {
  char buf[65536];
  off_t off = 0, boundary = 0;
  bool in_quotes = false;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    for (ssize_t k = 0; k < n; k++) {
      if (buf[k] == '"' && is_csv) in_quotes = !in_quotes;
      else if (buf[k] == '\n' && !in_quotes) boundary = off + k + 1;
    }
    off += n;
  }
  *out_len = boundary;
  return SL_OK;
}

/*
 * Open w->path for a restored attempt: append to what is there, after
 * cutting a partly written last row (always after the checkpoint, since
 * the checkpoint's rows were written in full before it completed).
 * *out_size is the size after the cut.
 */
static int open_append(fwriter_t *w, const sl_sink_init_t *init,
                       off_t *out_size, sl_error_t **out_err) {
  w->fd = open(w->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    int e = errno;
    return sl_error_set(out_err, -e, "cannot open output file '%s': %s",
                        w->path, strerror(e));
  }
  struct stat st;
  off_t keep = 0;
  int rc = fstat(w->fd, &st) == 0 ? SL_OK : -errno;
  if (rc == SL_OK && st.st_size > 0)
    rc = complete_prefix(w->fd, w->s->cfg.format == SL_FORMAT_CSV, &keep);
  if (rc == SL_OK && st.st_size > 0 && keep < st.st_size) {
    if (ftruncate(w->fd, keep) != 0) rc = -errno;
    else
      sl_log(SL_LOG_WARN, "output file '%s' ended in a partly written row "
             "after checkpoint %llu; cut %lld bytes before appending",
             w->path, (unsigned long long)init->restored_checkpoint_id,
             (long long)(st.st_size - keep));
  }
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "cannot resume output file '%s': %s",
                        w->path, sl_strerror(rc));
  *out_size = st.st_size > 0 ? keep : 0;
  return SL_OK;
}

static int format_row(fwriter_t *w, const sl_row_t *row) {
  if (w->s->cfg.format == SL_FORMAT_JSON)
    return sl_json_format(row, w->s->cfg.changelog, &w->buf);
  return sl_csv_format(row, w->s->cfg.csv_delimiter, w->s->cfg.changelog,
                       &w->buf);
}

/* Write the buffer out and make the file durable (not standard output). */
static int writer_flush(void *wr, sl_error_t **out_err) {
  fwriter_t *w = wr;
  int rc = w->buf.len ? write_all(w, out_err) : SL_OK;
  if (rc != SL_OK || w->s->is_stdout || !w->is_dirty) return rc;
  if (fdatasync(w->fd) != 0) {
    int e = errno;
    return sl_error_set(out_err, -e, "cannot sync '%s': %s", w->path,
                        strerror(e));
  }
  w->is_dirty = false;
  return SL_OK;
}

static int writer_close(void *wr, bool is_success, sl_error_t **out_err) {
  fwriter_t *w = wr;
  (void)is_success;
  int rc = SL_OK;
  /* Standard output: an empty output still gets its header. */
  if (w->buf.len || (w->s->is_stdout && is_success && w->schema))
    rc = write_all(w, out_err);
  if (!w->s->is_stdout && w->fd >= 0 && close(w->fd) != 0 && rc == SL_OK) {
    int e = errno;
    rc = sl_error_set(out_err, -e, "cannot close '%s': %s", w->path,
                      strerror(e));
  }
  sl_bytes_close(&w->buf);
  sl_free(w->path);
  sl_free(w);
  return rc;
}

static int writer_open(void *ctx, const sl_sink_init_t *init, void **out,
                       sl_error_t **out_err) {
  fsink_t *s = ctx;
  bool has_header = s->cfg.csv_header && s->cfg.format == SL_FORMAT_CSV;
  fwriter_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->s = s;
  w->fd = -1;
  w->schema = init->schema;
  sl_bytes_init(&w->buf);
  if (s->is_stdout) {
    w->fd = STDOUT_FILENO;
    w->path = sl_strdup("standard output");
    has_header = false; /* write_all writes it */
  } else {
    w->path = subtask_path(s->path, init->subtask, init->parallelism);
    if (w->path == NULL) {
      writer_close(w, false, NULL);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    int rc = make_parents(w->path, out_err);
    if (rc != SL_OK) {
      writer_close(w, false, NULL);
      return rc;
    }
    if (init->is_restored) {
      /* A restored checkpoint covers what is there: keep it. */
      off_t size = 0;
      if ((rc = open_append(w, init, &size, out_err)) != SL_OK) {
        writer_close(w, false, NULL);
        return rc;
      }
      if (size > 0) has_header = false;
    } else {
      w->fd = open(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (w->fd < 0) {
      int e = errno;
      sl_error_set(out_err, -e, "cannot open output file '%s': %s", w->path,
                   strerror(e));
      writer_close(w, false, NULL);
      return -e;
    }
  }
  if (w->path == NULL) {
    writer_close(w, false, NULL);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  if (has_header) {
    int rc = sl_csv_format_header(init->schema, s->cfg.csv_delimiter,
                                  s->cfg.changelog, &w->buf);
    if (rc != SL_OK) {
      writer_close(w, false, NULL);
      return sl_error_set(out_err, rc, "cannot format the header");
    }
  }
  *out = w;
  return SL_OK;
}

static int writer_write(void *wr, const sl_row_t *row, sl_error_t **out_err) {
  fwriter_t *w = wr;
  int rc = format_row(w, row);
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "cannot format a row for '%s': %s",
                        w->path, sl_strerror(rc));
  if (w->buf.len >= FLUSH_AT || w->s->is_stdout) return write_all(w, out_err);
  return SL_OK;
}

static void fsink_destroy(void *ctx) {
  fsink_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->path);
  sl_free(s);
}

static const sl_sink_vt_t file_vt = {"file", writer_open, writer_write,
                                     writer_flush, writer_close,
                                     fsink_destroy};
static const sl_sink_vt_t stdout_vt = {"stdout", writer_open, writer_write,
                                       writer_flush, writer_close,
                                       fsink_destroy};

/* The exactly-once file sink (file_sink_2pc.c). */
int sl__file_sink_tx_create(const sl_file_sink_config_t *cfg,
                            const sl_sink_vt_t **out_vt, void **out_ctx,
                            sl_error_t **out_err);

int sl_file_sink_create(const sl_file_sink_config_t *cfg,
                        const sl_sink_vt_t **out_vt, void **out_ctx,
                        sl_error_t **out_err) {
  if (cfg->path == NULL || cfg->path[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "file sink: no path");
  if (cfg->delivery == SL_DELIVERY_EXACTLY_ONCE)
    return sl__file_sink_tx_create(cfg, out_vt, out_ctx, out_err);
  if (cfg->delivery != SL_DELIVERY_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL, "file sink: unknown delivery "
                        "%d", (int)cfg->delivery);
  if (cfg->roll_size || cfg->roll_interval_ms ||
      cfg->bucket != SL_FILE_BUCKET_NONE)
    return sl_error_set(out_err, SL_EINVAL, "file sink: rolling and buckets "
                        "are options of delivery exactly-once");
  fsink_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  s->cfg = *cfg;
  if (s->cfg.csv_delimiter == 0) s->cfg.csv_delimiter = ',';
  s->path = sl_strdup(cfg->path);
  if (s->path == NULL) {
    sl_free(s);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  s->cfg.path = s->path;
  *out_vt = &file_vt;
  *out_ctx = s;
  return SL_OK;
}

int sl_stdout_sink_create_cfg(const sl_file_sink_config_t *cfg,
                              const sl_sink_vt_t **out_vt, void **out_ctx,
                              sl_error_t **out_err) {
  if (cfg->path != NULL)
    return sl_error_set(out_err, SL_EINVAL, "stdout sink: a path is only "
                        "for a file sink");
  if (cfg->csv_delimiter == '"' || cfg->csv_delimiter == '\r' ||
      cfg->csv_delimiter == '\n')
    return sl_error_set(out_err, SL_EINVAL, "stdout sink: invalid CSV "
                        "delimiter");
  fsink_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  s->cfg = *cfg;
  if (s->cfg.csv_delimiter == 0) s->cfg.csv_delimiter = ',';
  s->is_stdout = true;
  *out_vt = &stdout_vt;
  *out_ctx = s;
  return SL_OK;
}

int sl_stdout_sink_create(sl_format_t format, bool changelog,
                          const sl_sink_vt_t **out_vt, void **out_ctx,
                          sl_error_t **out_err) {
  sl_file_sink_config_t cfg = {0};
  cfg.format = format;
  cfg.changelog = changelog;
  return sl_stdout_sink_create_cfg(&cfg, out_vt, out_ctx, out_err);
}

/* Null sink: discards rows; each writer counts its own (no sharing). */
typedef struct nwriter_s {
  uint64_t n;
} nwriter_t;

static int null_open(void *ctx, const sl_sink_init_t *init, void **out,
                     sl_error_t **out_err) {
  (void)ctx;
  (void)init;
  nwriter_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  *out = w;
  return SL_OK;
}
static int null_write(void *w, const sl_row_t *row, sl_error_t **out_err) {
  (void)row;
  (void)out_err;
  ((nwriter_t *)w)->n++;
  return SL_OK;
}
static int null_close(void *w, bool ok, sl_error_t **out_err) {
  (void)ok;
  (void)out_err;
  sl_free(w);
  return SL_OK;
}
static void null_destroy(void *ctx) { sl_free(ctx); }

static const sl_sink_vt_t null_vt = {"null", null_open, null_write, NULL,
                                     null_close, null_destroy};

int sl_null_sink_create(const sl_sink_vt_t **out_vt, void **out_ctx) {
  int *s = sl_calloc(1, sizeof(int));
  if (s == NULL) return SL_ENOMEM;
  *out_vt = &null_vt;
  *out_ctx = s;
  return SL_OK;
}
