/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file source: CSV or JSON lines, one split per file (a directory
 * stands for its regular files in name order).  A split's position is the
 * byte offset of the next line plus its line number, so a reader resumes
 * exactly after the last record it emitted.  A malformed line stops the job
 * with the file name, line number and the parser's message.  See
 * src/connectors/README.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "sluice/sluice.h"

#define READ_CHUNK (256u * 1024u)

typedef struct fsrc_s {
  sl_format_t format;
  bool csv_header;
  char delim;
  sl_schema_t *schema;
  char **inputs; /* as configured */
  uint32_t n_inputs;
  char **files;  /* expanded at plan time; split i = files[i] */
  uint32_t n_files;
} fsrc_t;

typedef struct fsplit_s {
  uint32_t id;
  const char *path;
  int fd;
  uint64_t offset; /* of the next unread line */
  uint64_t line;   /* 1-based number of the next line */
  bool is_done;
} fsplit_t;

typedef struct freader_s {
  const fsrc_t *src;
  fsplit_t *splits;
  uint32_t n_splits;
  uint32_t cur;
  /* Buffered bytes of the current split, starting at its offset. */
  char *buf;
  size_t len, cap, pos;
  bool is_eof;
  sl_bytes_t header;
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

static int expand(fsrc_t *s, sl_error_t **out_err) {
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
  if (s->n_files == 0)
    return sl_error_set(out_err, SL_ENOTFOUND,
                        "no input files: '%s' holds no regular file",
                        s->n_inputs ? s->inputs[0] : "");
  return SL_OK;
nomem:
  return sl_error_set(out_err, SL_ENOMEM, "out of memory listing inputs");
}

static int fsrc_plan(void *ctx, uint32_t parallelism, uint32_t *out_n,
                     sl_error_t **out_err) {
  fsrc_t *s = ctx;
  SL_UNUSED(parallelism);
  int rc = expand(s, out_err);
  if (rc == SL_OK) *out_n = s->n_files;
  return rc;
}

static void reader_close(void *r) {
  freader_t *rd = r;
  if (rd == NULL) return;
  for (uint32_t i = 0; i < rd->n_splits; i++)
    if (rd->splits[i].fd >= 0) close(rd->splits[i].fd);
  sl_free(rd->splits);
  sl_free(rd->buf);
  sl_bytes_close(&rd->header);
  sl_free(rd);
}

static int reader_open(void *ctx, const sl_reader_init_t *init, void **out,
                       sl_error_t **out_err) {
  const fsrc_t *s = ctx;
  freader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  rd->src = s;
  sl_bytes_init(&rd->header);
  rd->splits = sl_calloc(init->n_splits + 1, sizeof(fsplit_t));
  rd->cap = READ_CHUNK;
  rd->buf = sl_malloc(rd->cap);
  if (rd->splits == NULL || rd->buf == NULL) {
    reader_close(rd);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < init->n_splits; i++) rd->splits[i].fd = -1;
  rd->n_splits = init->n_splits;
  for (uint32_t i = 0; i < init->n_splits; i++) {
    fsplit_t *sp = &rd->splits[i];
    sp->id = init->splits[i].split;
    if (sp->id >= s->n_files) {
      reader_close(rd);
      return sl_error_set(out_err, SL_ECORRUPT,
                          "file source: split %u does not exist (%u files)",
                          sp->id, s->n_files);
    }
    sp->path = s->files[sp->id];
    sp->line = 1;
    if (init->splits[i].position) {
      if (init->splits[i].position_len != 16) {
        reader_close(rd);
        return sl_error_set(out_err, SL_ECORRUPT,
                            "file '%s': stored position has %zu bytes, "
                            "expected 16",
                            sp->path, init->splits[i].position_len);
      }
      sp->offset = sl__get_u64le(init->splits[i].position);
      sp->line = sl__get_u64le(init->splits[i].position + 8);
    }
    sp->fd = open(sp->path, O_RDONLY | O_CLOEXEC);
    if (sp->fd < 0) {
      int e = errno;
      reader_close(rd);
      return sl_error_set(out_err, -e, "cannot open input '%s': %s",
                          sp->path, strerror(e));
    }
    struct stat st;
    if (fstat(sp->fd, &st) == 0 && (uint64_t)st.st_size < sp->offset) {
      reader_close(rd);
      return sl_error_set(out_err, SL_ECORRUPT,
                          "file '%s' is shorter (%lld bytes) than the stored "
                          "position %llu; was it replaced?",
                          sp->path, (long long)st.st_size,
                          (unsigned long long)sp->offset);
    }
  }
  if (s->csv_header && s->format == SL_FORMAT_CSV) {
    int rc = sl_csv_format_header(s->schema, s->delim, false, &rd->header);
    if (rc != SL_OK) {
      reader_close(rd);
      return sl_error_set(out_err, rc, "out of memory");
    }
    rd->header.len--; /* without "\n" */
  }
  *out = rd;
  return SL_OK;
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

static void next_split(freader_t *rd) {
  fsplit_t *sp = &rd->splits[rd->cur];
  sp->is_done = true;
  close(sp->fd);
  sp->fd = -1;
  rd->cur++;
  rd->len = rd->pos = 0;
  rd->is_eof = false;
}

static int reader_poll(void *r, sl_source_out_t *out, sl_error_t **out_err) {
  freader_t *rd = r;
  const fsrc_t *s = rd->src;
  while (rd->cur < rd->n_splits) {
    fsplit_t *sp = &rd->splits[rd->cur];
    sl_source_set_split(out, sp->id);
    char *nl = memchr(rd->buf + rd->pos, '\n', rd->len - rd->pos);
    size_t line_len;
    size_t consumed;
    if (nl) {
      line_len = (size_t)(nl - (rd->buf + rd->pos));
      consumed = line_len + 1;
    } else if (!rd->is_eof) {
      int rc = fill(rd, sp, out_err);
      if (rc != SL_OK) return rc;
      continue;
    } else if (rd->pos < rd->len) {
      line_len = consumed = rd->len - rd->pos; /* last line without "\n" */
    } else {
      sl_source_split_finished(out, sp->id);
      next_split(rd);
      continue;
    }
    const char *line = rd->buf + rd->pos;
    uint64_t lineno = sp->line;
    if (line_len && line[line_len - 1] == '\r') line_len--;
    rd->pos += consumed;
    sp->offset += consumed;
    sp->line++;
    if (s->csv_header && s->format == SL_FORMAT_CSV && lineno == 1) {
      if (line_len != rd->header.len ||
          memcmp(line, rd->header.data, line_len) != 0) {
        sl_error_set(out_err, SL_EPARSE,
                     "file '%s' line 1: header '%.*s' does not match the "
                     "schema '%.*s'",
                     sp->path, (int)SL_MIN(line_len, 200), line,
                     (int)rd->header.len, (char *)rd->header.data);
        if (out_err) sl_error_set_fatal(*out_err, true); /* every restart */
        return SL_EPARSE;
      }
      continue;
    }
    if (line_len == 0) continue; /* blank lines carry no record */
    sl_row_builder_t *b = sl_source_builder(out);
    sl_error_t *err = NULL;
    int rc = s->format == SL_FORMAT_JSON
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

static int reader_position(void *r, uint32_t split, sl_bytes_t *out) {
  freader_t *rd = r;
  for (uint32_t i = 0; i < rd->n_splits; i++) {
    if (rd->splits[i].id != split) continue;
    uint8_t p[16];
    sl__put_u64le(p, rd->splits[i].offset);
    sl__put_u64le(p + 8, rd->splits[i].line);
    return sl_bytes_append(out, p, 16);
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

static const sl_source_vt_t file_vt = {
    "file", fsrc_plan, reader_open, reader_poll, reader_position,
    reader_close, fsrc_destroy,
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
