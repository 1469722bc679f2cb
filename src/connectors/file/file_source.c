/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file source: CSV or JSON lines, one split per file (a directory
 * stands for its regular files in name order), handed out by the source's
 * split enumerator (below).  A split's id is the file's
 * path (as configured, plus the name for a directory's files).  Its
 * position is the byte offset of the next line, its line number and a
 * fingerprint of the bytes read so far (a hash of the first and the last
 * 4 KiB before the offset), so a reader resumes exactly after the last
 * record it emitted, and refuses a file that became shorter or changed
 * before the offset (rotated, replaced) instead of skipping records.  A
 * reader opens one file at a time, when it gets to it, so a directory of
 * thousands of files needs one descriptor.  A malformed line stops the job
 * with the file name, line number and the parser's message.  See
 * src/connectors/README.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define READ_CHUNK (256u * 1024u)
#define FP_SPAN 4096u /* bytes hashed at each end of what was read */
#define POS_LEN 24u   /* offset, line, fingerprint */
#define MAX_RECORD (64u * 1024u * 1024u) /* bytes of one record */

typedef struct fsrc_s {
  sl_format_t format;
  bool csv_header;
  char delim;
  sl_schema_t *schema;
  char **inputs; /* as configured */
  uint32_t n_inputs;
  char **files;  /* the latest listing (the enumerator's), name order
                    within each input */
  uint32_t n_files;
  int64_t monitor_ms; /* > 0: the enumerator lists the inputs this often */
} fsrc_t;

typedef struct fsplit_s {
  uint32_t id;       /* index in the plan's list */
  const char *path;  /* the split's id; borrowed until reader_close */
  int fd;            /* -1 unless this is the split being read */
  uint64_t offset;   /* of the next unread line */
  uint64_t line;     /* 1-based number of the next line */
  uint64_t fp;       /* fingerprint of the bytes before fp_off */
  uint64_t fp_off;   /* UINT64_MAX: fp not computed */
  bool is_done;
} fsplit_t;

typedef struct freader_s {
  const fsrc_t *src;
  fsplit_t *splits;
  uint32_t n_splits;
  uint32_t cap_splits;
  uint32_t cur;
  /* Buffered bytes of the current split, starting at its offset. */
  char *buf;
  size_t len, cap, pos;
  bool is_eof;
} freader_t;

static void free_list(char **l, uint32_t n) {
  if (l == NULL) return;
  for (uint32_t i = 0; i < n; i++) sl_free(l[i]);
  sl_free(l);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_file(char ***files, uint32_t *n, const char *path) {
  char **l = sl_realloc(*files, (*n + 1) * sizeof(char *));
  if (l == NULL) return SL_ENOMEM;
  *files = l;
  if ((l[*n] = sl_strdup(path)) == NULL) return SL_ENOMEM;
  (*n)++;
  return SL_OK;
}

static int expand(fsrc_t *s, bool allow_empty, sl_error_t **out_err) {
  free_list(s->files, s->n_files);
  s->files = NULL;
  s->n_files = 0;
  for (uint32_t i = 0; i < s->n_inputs; i++) {
    const char *p = s->inputs[i];
    struct stat st;
    if (stat(p, &st) != 0) {
      int e = errno;
      return sl_error_set(out_err, -e, "cannot open input '%s': %s", p,
                          strerror(e));
    }
    if (!S_ISDIR(st.st_mode)) {
      int fd = open(p, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        int e = errno;
        return sl_error_set(out_err, -e, "cannot open input '%s': %s", p,
                            strerror(e));
      }
      close(fd);
      if (add_file(&s->files, &s->n_files, p) != SL_OK) goto nomem;
      continue;
    }
    DIR *d = opendir(p);
    if (d == NULL) {
      int e = errno;
      return sl_error_set(out_err, -e, "cannot read directory '%s': %s", p,
                          strerror(e));
    }
    char **found = NULL;
    uint32_t n_found = 0;
    struct dirent *de;
    int rc = SL_OK;
    while (rc == SL_OK && (de = readdir(d)) != NULL) {
      if (de->d_name[0] == '.') continue;
      sl_bytes_t full;
      sl_bytes_init(&full);
      if (sl_bytes_printf(&full, "%s/%s", p, de->d_name) != SL_OK) {
        rc = SL_ENOMEM;
        break;
      }
      struct stat fst;
      if (stat((char *)full.data, &fst) == 0 && S_ISREG(fst.st_mode))
        rc = add_file(&found, &n_found, (char *)full.data);
      sl_bytes_close(&full);
    }
    closedir(d);
    if (rc != SL_OK) {
      free_list(found, n_found);
      goto nomem;
    }
    if (n_found) qsort(found, n_found, sizeof(char *), cmp_str);
    for (uint32_t k = 0; k < n_found && rc == SL_OK; k++)
      rc = add_file(&s->files, &s->n_files, found[k]);
    free_list(found, n_found);
    if (rc != SL_OK) goto nomem;
  }
  if (s->n_files == 0 && !allow_empty)
    return sl_error_set(out_err, SL_ENOTFOUND,
                        "no input files: '%s' holds no regular file",
                        s->n_inputs ? s->inputs[0] : "");
  return SL_OK;
nomem:
  return sl_error_set(out_err, SL_ENOMEM, "out of memory listing inputs");
}

/* Read exactly n bytes at off; SL_OK, SL_ENOTFOUND at end of file, or
 * -errno. */
static int read_at(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) return SL_ENOTFOUND;
    got += (size_t)r;
  }
  return SL_OK;
}

/*
 * The fingerprint of the bytes before off: xxh3-64 of the first
 * min(off, 4 KiB) bytes followed by the last (up to) 4 KiB before off that
 * the first part does not cover.  A rotated or replaced file differs there
 * (a new log starts with other records, a rewritten one has other bytes
 * just before the offset); a file that only grew does not.
 */
static int fingerprint(int fd, uint64_t off, uint64_t *out) {
  uint8_t buf[2 * FP_SPAN];
  size_t head = off < FP_SPAN ? (size_t)off : FP_SPAN;
  uint64_t tail_at = off > head + FP_SPAN ? off - FP_SPAN : head;
  size_t tail = (size_t)(off - tail_at);
  int rc = head ? read_at(fd, buf, head, 0) : SL_OK;
  if (rc == SL_OK && tail) rc = read_at(fd, buf + head, tail, tail_at);
  if (rc == SL_OK) *out = sl_hash64(buf, head + tail);
  return rc;
}

static int open_input(const char *path, int *out_fd, sl_error_t **out_err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return sl_error_set(out_err, -e, "cannot open input '%s': %s", path,
                        strerror(e));
  }
  *out_fd = fd;
  return SL_OK;
}

/*
 * Check a restored position against the file as it is now: at least as
 * long as the offset, and the same bytes before it (the fingerprint).  One
 * descriptor at a time.
 */
static int check_position(const fsplit_t *sp, sl_error_t **out_err) {
  int fd, rc = open_input(sp->path, &fd, out_err);
  if (rc != SL_OK) return rc;
  struct stat st;
  uint64_t fp = 0;
  if (fstat(fd, &st) != 0) {
    rc = -errno;
    close(fd);
    return sl_error_set(out_err, rc, "cannot read '%s': %s", sp->path,
                        strerror(-rc));
  }
  if ((uint64_t)st.st_size < sp->offset) {
    close(fd);
    rc = sl_error_set(out_err, SL_EINVAL,
                      "file '%s' is shorter (%lld bytes) than the "
                      "checkpoint's position %llu; was it rotated or "
                      "replaced?",
                      sp->path, (long long)st.st_size,
                      (unsigned long long)sp->offset);
  } else if ((rc = fingerprint(fd, sp->offset, &fp)) != SL_OK) {
    close(fd);
    rc = sl_error_set(out_err, rc, "cannot read '%s': %s", sp->path,
                      rc == SL_ENOTFOUND ? "it shrank while being checked"
                                         : strerror(-rc));
  } else {
    close(fd);
    if (fp == sp->fp) return SL_OK;
    rc = sl_error_set(out_err, SL_EINVAL,
                      "file '%s' changed before the checkpoint's position "
                      "%llu (line %llu): its fingerprint is %016llx, the "
                      "checkpoint's %016llx; was it rotated or replaced?",
                      sp->path, (unsigned long long)sp->offset,
                      (unsigned long long)sp->line, (unsigned long long)fp,
                      (unsigned long long)sp->fp);
  }
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

static void reader_close(void *r) {
  freader_t *rd = r;
  if (rd == NULL) return;
  for (uint32_t i = 0; i < rd->n_splits; i++)
    if (rd->splits[i].fd >= 0) close(rd->splits[i].fd);
  sl_free(rd->splits);
  sl_free(rd->buf);
  sl_free(rd);
}

/* Add the splits si[0..n) to the reader, checking restored positions
 * against the files as they are now. */
static int add_splits(freader_t *rd, const sl_split_init_t *si, uint32_t n,
                      sl_error_t **out_err) {
  if (rd->n_splits + n > rd->cap_splits) {
    uint32_t cap = rd->cap_splits ? rd->cap_splits : 4;
    while (cap < rd->n_splits + n) cap *= 2;
    fsplit_t *sp = sl_realloc(rd->splits, cap * sizeof(*sp));
    if (sp == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    rd->splits = sp;
    rd->cap_splits = cap;
  }
  for (uint32_t i = 0; i < n; i++) {
    fsplit_t *sp = &rd->splits[rd->n_splits];
    memset(sp, 0, sizeof(*sp));
    sp->fd = -1;
    sp->id = si[i].split;
    sp->path = si[i].id;
    sp->line = 1;
    sp->fp_off = UINT64_MAX;
    rd->n_splits++;
    if (si[i].position == NULL) continue;
    if (si[i].position_len != POS_LEN)
      return sl_error_set(out_err, SL_ECORRUPT,
                          "file '%s': the stored position has %zu bytes, "
                          "expected %u",
                          sp->path, si[i].position_len, POS_LEN);
    sp->offset = sl_load_u64le(si[i].position);
    sp->line = sl_load_u64le(si[i].position + 8);
    sp->fp = sl_load_u64le(si[i].position + 16);
    sp->fp_off = sp->offset;
    int rc = check_position(sp, out_err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static int reader_open(void *ctx, const sl_reader_init_t *init, void **out,
                       sl_error_t **out_err) {
  const fsrc_t *s = ctx;
  freader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  rd->src = s;
  rd->cap = READ_CHUNK;
  rd->buf = sl_malloc(rd->cap);
  int rc = rd->buf ? add_splits(rd, init->splits, init->n_splits, out_err)
                   : sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rc != SL_OK) {
    reader_close(rd);
    return rc;
  }
  *out = rd;
  return SL_OK;
}

static int reader_add_splits(void *r, const sl_split_init_t *splits,
                             uint32_t n, sl_error_t **out_err) {
  return add_splits(r, splits, n, out_err);
}

/* Read more of split sp into the buffer, keeping unread bytes. */
static int fill(freader_t *rd, fsplit_t *sp, sl_error_t **out_err) {
  if (rd->pos > 0) {
    memmove(rd->buf, rd->buf + rd->pos, rd->len - rd->pos);
    rd->len -= rd->pos;
    rd->pos = 0;
  }
  if (rd->cap - rd->len < READ_CHUNK / 2) {
    size_t cap = rd->cap * 2;
    char *b = sl_realloc(rd->buf, cap);
    if (b == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    rd->buf = b;
    rd->cap = cap;
  }
  for (;;) {
    ssize_t n = pread(sp->fd, rd->buf + rd->len, rd->cap - rd->len,
                      (off_t)(sp->offset + rd->len));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      return sl_error_set(out_err, -e, "cannot read '%s': %s", sp->path,
                          strerror(e));
    }
    if (n == 0) rd->is_eof = true;
    rd->len += (size_t)n;
    return SL_OK;
  }
}

/* The current split is read to its end: keep its fingerprint (its
 * position no longer changes) and close it. */
static int next_split(freader_t *rd, sl_error_t **out_err) {
  fsplit_t *sp = &rd->splits[rd->cur];
  if (sp->fp_off != sp->offset) {
    int rc = fingerprint(sp->fd, sp->offset, &sp->fp);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "cannot read '%s': %s", sp->path,
                          rc == SL_ENOTFOUND ? "it shrank while being read"
                                             : strerror(-rc));
    sp->fp_off = sp->offset;
  }
  sp->is_done = true;
  close(sp->fd);
  sp->fd = -1;
  rd->cur++;
  rd->len = rd->pos = 0;
  rd->is_eof = false;
  return SL_OK;
}

/*
 * The record at rd->pos: one line, or for CSV the lines a quoted field
 * spans (RFC 4180).  Returns SL_OK with the record, SL_EAGAIN when more
 * must be read first, or SL_ENOTFOUND at the end of the buffered split
 * (is_eof and nothing left).  A UTF-8 byte order mark at the start of a
 * file is skipped.
 */
static int next_record(freader_t *rd, fsplit_t *sp, size_t *out_len,
                       size_t *out_consumed, uint32_t *out_n_breaks) {
  const char *p = rd->buf + rd->pos;
  size_t avail = rd->len - rd->pos;
  if (sp->offset == 0) {
    if (avail < 3 && !rd->is_eof) return SL_EAGAIN;
    if (avail >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
      rd->pos += 3;
      sp->offset += 3;
      p += 3;
      avail -= 3;
    }
  }
  if (avail == 0) return rd->is_eof ? SL_ENOTFOUND : SL_EAGAIN;
  if (rd->src->format == SL_FORMAT_CSV)
    return sl_csv_record_end(p, avail, rd->src->delim, rd->is_eof, out_len,
                             out_consumed, out_n_breaks);
  const char *nl = memchr(p, '\n', avail);
  if (nl == NULL && !rd->is_eof) return SL_EAGAIN;
  *out_len = nl ? (size_t)(nl - p) : avail; /* last line without "\n" */
  *out_consumed = nl ? *out_len + 1 : avail;
  *out_n_breaks = 0;
  return SL_OK;
}

static int reader_poll(void *r, sl_source_out_t *out, sl_error_t **out_err) {
  freader_t *rd = r;
  const fsrc_t *s = rd->src;
  while (rd->cur < rd->n_splits) {
    fsplit_t *sp = &rd->splits[rd->cur];
    if (sp->fd < 0) {
      int rc = open_input(sp->path, &sp->fd, out_err);
      if (rc != SL_OK) return rc;
    }
    sl_source_set_split(out, sp->id);
    size_t line_len, consumed;
    uint32_t n_breaks;
    int rc = next_record(rd, sp, &line_len, &consumed, &n_breaks);
    if (rc == SL_EAGAIN) {
      if (rd->len - rd->pos > MAX_RECORD)
        return sl_error_set(out_err, SL_EPARSE,
                            "file '%s' line %llu: record longer than %u "
                            "bytes%s", sp->path, (unsigned long long)sp->line,
                            MAX_RECORD, s->format == SL_FORMAT_CSV ?
                            " (an unterminated quoted field?)" : "");
      if ((rc = fill(rd, sp, out_err)) != SL_OK) return rc;
      continue;
    }
    if (rc == SL_ENOTFOUND) {
      sl_source_split_finished(out, sp->id);
      if ((rc = next_split(rd, out_err)) != SL_OK) return rc;
      continue;
    }
    const char *line = rd->buf + rd->pos;
    uint64_t lineno = sp->line;
    if (line_len && line[line_len - 1] == '\r') line_len--;
    rd->pos += consumed;
    sp->offset += consumed;
    sp->line += 1 + n_breaks;
    if (s->csv_header && s->format == SL_FORMAT_CSV && lineno == 1) {
      sl_error_t *err = NULL;
      rc = sl_csv_check_header(line, line_len, s->delim, s->schema, &err);
      if (rc != SL_OK) {
        sl_error_prefix(err, "file '%s' line 1", sp->path);
        sl_error_set_fatal(err, true); /* every restart would fail alike */
        if (out_err && *out_err == NULL) *out_err = err;
        else sl_error_destroy(err);
        return rc;
      }
      continue;
    }
    if (line_len == 0) continue; /* blank lines carry no record */
    sl_row_builder_t *b = sl_source_builder(out);
    sl_error_t *err = NULL;
    rc = s->format == SL_FORMAT_JSON
                 ? sl_json_parse(line, line_len, false, b, &err)
                 : sl_csv_parse(line, line_len, s->delim, false, b, &err);
    if (rc != SL_OK) {
      /* A malformed record fails the same way after any restart: fatal
       * (out of memory is not the record's fault). */
      if (err) {
        sl_error_prefix(err, "file '%s' line %llu", sp->path,
                        (unsigned long long)lineno);
        if (rc != SL_ENOMEM) sl_error_set_fatal(err, true);
        if (out_err && *out_err == NULL) *out_err = err;
        else sl_error_destroy(err);
        return rc;
      }
      sl_error_set(out_err, rc, "file '%s' line %llu: %s", sp->path,
                   (unsigned long long)lineno, sl_strerror(rc));
      if (out_err && rc != SL_ENOMEM) sl_error_set_fatal(*out_err, true);
      return rc;
    }
    if (!sl_source_emit_builder(out, &err)) {
      if (err) {
        sl_error_prefix(err, "file '%s' line %llu", sp->path,
                        (unsigned long long)lineno);
        sl_error_set_fatal(err, true); /* the record breaks the schema */
        if (out_err && *out_err == NULL) *out_err = err;
        else sl_error_destroy(err);
        return SL_EPARSE;
      }
      return SL_POLL_MORE;
    }
  }
  return SL_POLL_END;
}

/* The split's fingerprint at its offset: cached for splits not being read
 * (finished, restored, or not started: offset 0 needs no read). */
static int split_fp(fsplit_t *sp) {
  if (sp->fp_off == sp->offset) return SL_OK;
  int fd = sp->fd, rc = SL_OK;
  if (fd < 0 && sp->offset > 0 &&
      (fd = open(sp->path, O_RDONLY | O_CLOEXEC)) < 0)
    return -errno;
  rc = fingerprint(fd, sp->offset, &sp->fp);
  if (fd != sp->fd) close(fd);
  if (rc == SL_ENOTFOUND) rc = SL_EIO; /* the file shrank under us */
  if (rc == SL_OK) sp->fp_off = sp->offset;
  return rc;
}

static int reader_position(void *r, uint32_t split, sl_bytes_t *out) {
  freader_t *rd = r;
  for (uint32_t i = 0; i < rd->n_splits; i++) {
    fsplit_t *sp = &rd->splits[i];
    if (sp->id != split) continue;
    int rc = split_fp(sp);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, sp->offset);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, sp->line);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, sp->fp);
    return rc;
  }
  return SL_ENOTFOUND;
}

static void fsrc_destroy(void *ctx) {
  fsrc_t *s = ctx;
  if (s == NULL) return;
  free_list(s->inputs, s->n_inputs);
  free_list(s->files, s->n_files);
  sl_schema_unref(s->schema);
  sl_free(s);
}

/* ------------------------------------------------------------------ */
/*
 * The file source's enumerator.  It runs on the source's enumerator
 * thread (sl_connector.h).  Monitored: every monitor interval it lists the
 * inputs again; a path it has not seen becomes a pending split.  Pending
 * splits go to readers that asked for one, oldest first; a reader that
 * asks when nothing is pending waits for the next new file.  It never says
 * "no more splits": a monitored source is unbounded.  Unmonitored: one
 * listing, when the enumerator is created (unmonitored_start), and every
 * pending split goes out at discovery, file i to reader i % parallelism
 * (as the static enumerator placed them); a reader that asks hears "no
 * more splits", and splits a reset reader hands back go to it again.
 *
 * State (one codec, enum_snapshot/enum_decode): version byte 1, then u64le
 * count and the seen paths (u64le length, bytes), then u64le count and the
 * pending splits (path as above, then u64le length and the position bytes,
 * empty for the start).  Seen paths include assigned ones, so a file a
 * reader holds is never found "new" again; its position is in the
 * reader's state.  The seen set grows with every file (a path is a few
 * dozen bytes; a million files cost tens of MiB of state).
 */

typedef struct fpend_s {
  char *path;
  uint8_t *pos; /* NULL: from the start */
  size_t pos_len;
} fpend_t;

typedef struct fenum_s {
  fsrc_t *src;
  char **seen;
  uint32_t n_seen, cap_seen;
  fpend_t *pend;
  uint32_t n_pend, cap_pend;
  uint32_t *waiting; /* readers that asked, in order */
  uint32_t n_waiting;
  uint32_t par;
  bool is_monitored;
  uint32_t rr;       /* unmonitored: the reader of the next split */
} fenum_t;

static bool enum_has_seen(const fenum_t *e, const char *path) {
  for (uint32_t i = 0; i < e->n_seen; i++)
    if (strcmp(e->seen[i], path) == 0) return true;
  return false;
}

static int enum_add_seen(fenum_t *e, const char *path) {
  if (e->n_seen == e->cap_seen) {
    uint32_t cap = e->cap_seen ? e->cap_seen * 2 : 16;
    char **l = sl_realloc(e->seen, cap * sizeof(char *));
    if (l == NULL) return SL_ENOMEM;
    e->seen = l;
    e->cap_seen = cap;
  }
  if ((e->seen[e->n_seen] = sl_strdup(path)) == NULL) return SL_ENOMEM;
  e->n_seen++;
  return SL_OK;
}

/* Insert a pending split at index at (copies). */
static int enum_add_pending(fenum_t *e, uint32_t at, const char *path,
                            const uint8_t *pos, size_t pos_len) {
  if (e->n_pend == e->cap_pend) {
    uint32_t cap = e->cap_pend ? e->cap_pend * 2 : 16;
    fpend_t *l = sl_realloc(e->pend, cap * sizeof(*l));
    if (l == NULL) return SL_ENOMEM;
    e->pend = l;
    e->cap_pend = cap;
  }
  fpend_t p = {sl_strdup(path), NULL, 0};
  if (pos_len) {
    p.pos = sl_malloc(pos_len);
    if (p.pos) memcpy(p.pos, pos, pos_len);
    p.pos_len = pos_len;
  }
  if (p.path == NULL || (pos_len && p.pos == NULL)) {
    sl_free(p.path);
    sl_free(p.pos);
    return SL_ENOMEM;
  }
  memmove(&e->pend[at + 1], &e->pend[at], (e->n_pend - at) * sizeof(p));
  e->pend[at] = p;
  e->n_pend++;
  return SL_OK;
}

static void enum_close(void *en) {
  fenum_t *e = en;
  if (e == NULL) return;
  free_list(e->seen, e->n_seen);
  for (uint32_t i = 0; i < e->n_pend; i++) {
    sl_free(e->pend[i].path);
    sl_free(e->pend[i].pos);
  }
  sl_free(e->pend);
  sl_free(e->waiting);
  sl_free(e);
}

/* Read a u64le length-prefixed string of the state. */
static const uint8_t *take_blob(const uint8_t **p, const uint8_t *end,
                                size_t *out_len) {
  if ((size_t)(end - *p) < 8) return NULL;
  uint64_t n = sl_load_u64le(*p);
  *p += 8;
  if (n > (uint64_t)(end - *p)) return NULL;
  const uint8_t *b = *p;
  *p += n;
  *out_len = (size_t)n;
  return b;
}

static int enum_decode(fenum_t *e, const uint8_t *p, size_t len) {
  const uint8_t *end = p + len;
  if (len < 1 || *p++ != 1) return SL_ECORRUPT;
  for (int part = 0; part < 2; part++) {
    if (end - p < 8) return SL_ECORRUPT;
    uint64_t n = sl_load_u64le(p);
    p += 8;
    if (n > (uint64_t)(end - p) / 8) return SL_ECORRUPT;
    for (uint64_t i = 0; i < n; i++) {
      size_t pl, ql = 0;
      const uint8_t *path = take_blob(&p, end, &pl), *pos = NULL;
      if (path == NULL || pl == 0 || pl > 4096 || memchr(path, 0, pl))
        return SL_ECORRUPT;
      if (part == 1 && (pos = take_blob(&p, end, &ql)) == NULL)
        return SL_ECORRUPT;
      char *s = sl_strndup((const char *)path, pl);
      if (s == NULL) return SL_ENOMEM;
      int rc = part == 0 ? enum_add_seen(e, s)
                         : enum_add_pending(e, e->n_pend, s, ql ? pos : NULL,
                                            ql);
      sl_free(s);
      if (rc != SL_OK) return rc;
    }
  }
  return p == end ? SL_OK : SL_ECORRUPT;
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * An unmonitored source lists its inputs once, when its enumerator is
 * created (so a missing input, an empty directory or a file listed twice
 * stops the job before it starts, with the message it always had).  On a
 * restore, every split the checkpoint still has to read (pending in the
 * enumerator's state, or held by a reader) must be in that listing: a
 * removed file would lose its remaining records.  The readers' splits
 * count as seen, so the first listing does not hand them out again (a
 * checkpoint without enumerator state, taken before this source had one,
 * holds every file in its readers' states).
 */
static int unmonitored_start(fenum_t *e, const sl_enum_init_t *init,
                             sl_error_t **out_err) {
  fsrc_t *s = e->src;
  int rc = expand(s, false, out_err);
  if (rc != SL_OK) return rc;
  char **sorted = sl_malloc((s->n_files + 1) * sizeof(char *));
  if (sorted == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  memcpy(sorted, s->files, s->n_files * sizeof(char *));
  qsort(sorted, s->n_files, sizeof(char *), cmp_str_ptr);
  for (uint32_t i = 1; rc == SL_OK && i < s->n_files; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0)
      rc = sl_error_set(out_err, SL_EINVAL, "split '%s' is listed twice",
                        sorted[i]);
  for (uint32_t i = 0; rc == SL_OK && i < e->n_pend + init->n_restored_splits;
       i++) {
    const char *path = i < e->n_pend ? e->pend[i].path
                                     : init->restored_splits[i - e->n_pend].id;
    if (bsearch(&path, sorted, s->n_files, sizeof(char *), cmp_str_ptr)) {
      if (i >= e->n_pend && !enum_has_seen(e, path) &&
          enum_add_seen(e, path) != SL_OK)
        rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      continue;
    }
    rc = sl_error_set(out_err, SL_EINVAL,
                      "checkpoint %llu holds a position of split '%s' of "
                      "source '%s', which the source no longer has (%u "
                      "splits now; a file removed or renamed, another "
                      "generator seed or split count?); its remaining "
                      "records would be lost",
                      (unsigned long long)init->restored_checkpoint_id, path,
                      init->source_uid ? init->source_uid : "?",
                      s->n_files);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  }
  sl_free(sorted);
  return rc;
}

static int enum_create(void *ctx, const sl_enum_init_t *init, void **out,
                       sl_error_t **out_err) {
  fenum_t *e = sl_calloc(1, sizeof(*e));
  if (e) e->waiting = sl_calloc(init->parallelism, sizeof(uint32_t));
  if (e == NULL || e->waiting == NULL) {
    enum_close(e);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  e->src = ctx;
  e->par = init->parallelism;
  e->is_monitored = e->src->monitor_ms > 0;
  if (init->state) {
    int rc = enum_decode(e, init->state, init->state_len);
    if (rc != SL_OK) {
      enum_close(e);
      return sl_error_set(out_err, rc, rc == SL_ENOMEM ? "out of memory"
                          : "the file enumerator's state in checkpoint %llu "
                          "is corrupt",
                          (unsigned long long)init->restored_checkpoint_id);
    }
  }
  if (!e->is_monitored) {
    int rc = unmonitored_start(e, init, out_err);
    if (rc != SL_OK) {
      enum_close(e);
      return rc;
    }
  }
  *out = e;
  return SL_OK;
}

/* Hand pending splits to waiting readers, in the order they asked;
 * unmonitored: every pending split, to the readers in turn (split i of
 * the first listing to reader i % parallelism). */
static int enum_serve(fenum_t *e, sl_enum_ctx_t *ec) {
  while (!e->is_monitored && e->n_pend > 0) {
    fpend_t p = e->pend[0];
    sl_split_t s = {p.path, p.pos, p.pos_len};
    int rc = sl_enum_assign(ec, e->rr % e->par, &s);
    if (rc != SL_OK) return rc;
    e->rr++;
    memmove(&e->pend[0], &e->pend[1], (e->n_pend - 1) * sizeof(p));
    e->n_pend--;
    sl_free(p.path);
    sl_free(p.pos);
  }
  while (e->n_waiting > 0 && e->n_pend > 0) {
    uint32_t reader = e->waiting[0];
    fpend_t p = e->pend[0];
    sl_split_t s = {p.path, p.pos, p.pos_len};
    int rc = sl_enum_assign(ec, reader, &s);
    if (rc != SL_OK) return rc;
    memmove(&e->pend[0], &e->pend[1], (e->n_pend - 1) * sizeof(p));
    e->n_pend--;
    memmove(&e->waiting[0], &e->waiting[1],
            (e->n_waiting - 1) * sizeof(uint32_t));
    e->n_waiting--;
    sl_free(p.path);
    sl_free(p.pos);
  }
  return SL_OK;
}

static int enum_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  fenum_t *e = en;
  sl_enum_set_discovery_interval(ec, e->src->monitor_ms);
  /* The listing is the source context's; only this thread uses it once
   * the enumerator exists.  Unmonitored: the listing of create. */
  int rc = e->is_monitored ? expand(e->src, true, out_err) : SL_OK;
  if (rc != SL_OK) {
    /* A monitored directory removed or made unreadable while the job
     * runs: the job fails (the host wakes the waiting readers) and the
     * restart strategy applies; a later listing may succeed again. */
    if (out_err && *out_err && rc != SL_ENOMEM)
      sl_error_prefix(*out_err, "cannot list the monitored inputs");
    return rc;
  }
  for (uint32_t i = 0; i < e->src->n_files; i++) {
    const char *path = e->src->files[i];
    if (enum_has_seen(e, path)) continue;
    if ((rc = enum_add_seen(e, path)) != SL_OK ||
        (rc = enum_add_pending(e, e->n_pend, path, NULL, 0)) != SL_OK)
      return sl_error_set(out_err, rc, "out of memory");
  }
  rc = enum_serve(e, ec);
  return rc == SL_OK ? SL_OK : sl_error_set(out_err, rc, "cannot assign a "
                                            "file: %s", sl_strerror(rc));
}

static int enum_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                        sl_error_t **out_err) {
  fenum_t *e = en;
  if (!e->is_monitored) { /* bounded: every file went out at discovery */
    int rc = enum_serve(e, ec);
    if (rc == SL_OK) rc = sl_enum_signal_no_more_splits(ec, subtask);
    return rc == SL_OK ? SL_OK : sl_error_set(out_err, rc, "cannot answer "
                                              "reader %u: %s", subtask,
                                              sl_strerror(rc));
  }
  bool is_waiting = false;
  for (uint32_t i = 0; i < e->n_waiting; i++)
    is_waiting |= e->waiting[i] == subtask;
  if (!is_waiting && e->n_waiting < e->par)
    e->waiting[e->n_waiting++] = subtask;
  int rc = enum_serve(e, ec);
  return rc == SL_OK ? SL_OK : sl_error_set(out_err, rc, "cannot assign a "
                                            "file: %s", sl_strerror(rc));
}

static int enum_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                     const sl_split_t *s, uint32_t n, sl_error_t **out_err) {
  fenum_t *e = en;
  /* Unmonitored, from a reader reset: back to the same reader. */
  for (uint32_t i = 0; !e->is_monitored && subtask != UINT32_MAX && i < n;
       i++) {
    int rc = sl_enum_assign(ec, subtask, &s[i]);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "cannot assign a file: %s",
                          sl_strerror(rc));
  }
  if (!e->is_monitored && subtask != UINT32_MAX) return SL_OK;
  /* Back in front, in their order: they were handed out before the
   * pending ones.  A split also pending from the start (found by the
   * first listing of an enumerator created without state, while a
   * restore hands back the readers' splits) is pending once, at the
   * position it comes back with. */
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t k = 0; k < e->n_pend; k++) {
      if (strcmp(e->pend[k].path, s[i].id) != 0) continue;
      sl_free(e->pend[k].path);
      sl_free(e->pend[k].pos);
      memmove(&e->pend[k], &e->pend[k + 1],
              (e->n_pend - k - 1) * sizeof(fpend_t));
      e->n_pend--;
      break;
    }
    int rc = SL_OK;
    if (!enum_has_seen(e, s[i].id)) rc = enum_add_seen(e, s[i].id);
    if (rc == SL_OK)
      rc = enum_add_pending(e, i, s[i].id, s[i].state, s[i].state_len);
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  }
  int rc = enum_serve(e, ec);
  return rc == SL_OK ? SL_OK : sl_error_set(out_err, rc, "cannot assign a "
                                            "file: %s", sl_strerror(rc));
}

static int enum_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  (void)id;
  fenum_t *e = en;
  int rc = sl_bytes_append(out, "\x01", 1);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->n_seen);
  for (uint32_t i = 0; rc == SL_OK && i < e->n_seen; i++) {
    size_t n = strlen(e->seen[i]);
    rc = sl_bytes_append_u64le(out, n);
    if (rc == SL_OK) rc = sl_bytes_append(out, e->seen[i], n);
  }
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->n_pend);
  for (uint32_t i = 0; rc == SL_OK && i < e->n_pend; i++) {
    size_t n = strlen(e->pend[i].path);
    rc = sl_bytes_append_u64le(out, n);
    if (rc == SL_OK) rc = sl_bytes_append(out, e->pend[i].path, n);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->pend[i].pos_len);
    if (rc == SL_OK && e->pend[i].pos_len)
      rc = sl_bytes_append(out, e->pend[i].pos, e->pend[i].pos_len);
  }
  return rc;
}

static const sl_enum_vt_t file_enum_vt = {
    .create = enum_create,
    .discover = enum_discover,
    .handle_split_request = enum_request,
    .add_splits_back = enum_back,
    .snapshot = enum_snapshot,
    .close = enum_close,
};

/* Monitored or not, the splits come from the enumerator. */
static const sl_source_vt_t file_vt = {
    .type_name = "file",
    .reader_open = reader_open,
    .reader_poll = reader_poll,
    .reader_position = reader_position,
    .reader_close = reader_close,
    .destroy = fsrc_destroy,
    .enumerator = &file_enum_vt,
    .reader_add_splits = reader_add_splits,
};

int sl_file_source_create(const sl_file_source_config_t *cfg,
                          const sl_source_vt_t **out_vt, void **out_ctx,
                          sl_error_t **out_err) {
  if (cfg->n_paths == 0)
    return sl_error_set(out_err, SL_EINVAL, "file source: no path");
  if (cfg->schema == NULL)
    return sl_error_set(out_err, SL_EINVAL, "file source: no schema");
  fsrc_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  s->format = cfg->format;
  s->csv_header = cfg->csv_header;
  s->delim = cfg->csv_delimiter ? cfg->csv_delimiter : ',';
  s->schema = sl_schema_ref((sl_schema_t *)cfg->schema);
  if (cfg->monitor_interval_ms < 0) {
    fsrc_destroy(s);
    return sl_error_set(out_err, SL_EINVAL, "file source: "
                        "monitor_interval_ms must not be negative");
  }
  s->monitor_ms = cfg->monitor_interval_ms;
  s->inputs = sl_calloc(cfg->n_paths, sizeof(char *));
  if (s->inputs == NULL) goto nomem;
  for (uint32_t i = 0; i < cfg->n_paths; i++) {
    if ((s->inputs[i] = sl_strdup(cfg->paths[i])) == NULL) goto nomem;
    s->n_inputs++;
  }
  *out_vt = &file_vt;
  *out_ctx = s;
  return SL_OK;
nomem:
  fsrc_destroy(s);
  return sl_error_set(out_err, SL_ENOMEM, "out of memory");
}
