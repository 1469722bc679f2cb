/* SPDX-License-Identifier: Apache-2.0 */
/*
 * word_count: the classic streaming word count, written against the public
 * sluice C API only.
 *
 *     sluice-example-word-count [--parallelism N] [FILE]
 *
 * It reads lines of text from FILE (or from a short built-in text when no
 * file is given), splits them into words, and keeps a running count per
 * word.  Every change of a count is printed on standard output as one row
 * of a changelog in CSV:
 *
 *     +I,sluice,1      the first time a word is seen
 *     +U,sluice,2      each later occurrence: the new count
 *
 * The last row of a word is its final count.  Rows of different words may
 * interleave in any order when N > 1, but the rows of one word always come
 * in order, because every occurrence of a word goes to the same subtask.
 *
 * The job is
 *
 *     lines --> words --key_by(word)--> count --> stdout
 *
 *   lines   a source written here with the sl_connector.h interface.  It
 *           has one split (the file); its position is the byte offset of
 *           the next line, so a reader reopened at a position continues
 *           exactly there.
 *   words   a flat_map: one input line, any number of output words.  A
 *           word is a run of ASCII letters, digits and apostrophes (and
 *           any non-ASCII bytes, so UTF-8 words stay whole), lower-cased,
 *           without leading or trailing apostrophes.
 *   count   a keyed process function that keeps the count of the current
 *           word in value state and emits the changelog row.
 *   stdout  the built-in stdout sink, CSV with the row kind first.
 *
 * Try:  sluice-example-word-count | sort -t, -k3 -n | tail
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

static const char builtin_text[] =
    "The river runs down to the sluice,\n"
    "and the sluice holds the river back.\n"
    "Water waits; water moves; water is counted.\n"
    "Open the gate a little, and the river runs again.\n"
    "Every drop that passes the gate is counted once, and only once.\n";

/* ------------------------------------------------------------------ */
/* The "lines" source: rows (line string) from a file or from memory. */

typedef struct lines_src_s {
  char *path; /* NULL: the built-in text */
} lines_src_t;

typedef struct lines_reader_s {
  FILE *fp;        /* NULL when this subtask has no split */
  char *line;      /* getline buffer */
  size_t line_cap;
  const char *name;
} lines_reader_t;

static int lines_plan(void *ctx, uint32_t parallelism, sl_split_list_t *splits,
                      sl_error_t **out_err) {
  lines_src_t *src = ctx;
  (void)parallelism;
  /* Check that the file can be read before the job starts. */
  if (src->path) {
    FILE *fp = fopen(src->path, "r");
    if (fp == NULL)
      return sl_error_set(out_err, -errno, "cannot open '%s': %s", src->path,
                          strerror(errno));
    fclose(fp);
  }
  /* One split, named by its input, so a checkpoint's position finds it. */
  int rc = sl_split_list_add(splits, src->path ? src->path : "stdin");
  return rc == SL_OK ? SL_OK : sl_error_set(out_err, rc, "out of memory");
}

static int lines_open(void *ctx, const sl_reader_init_t *init,
                      void **out_reader, sl_error_t **out_err) {
  lines_src_t *src = ctx;
  lines_reader_t *r = calloc(1, sizeof(*r));
  if (r == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  r->name = src->path ? src->path : "the built-in text";
  if (init->n_splits == 0) { /* another subtask reads the only split */
    *out_reader = r;
    return SL_OK;
  }
  if (src->path) r->fp = fopen(src->path, "r");
  else r->fp = fmemopen((void *)builtin_text, sizeof(builtin_text) - 1, "r");
  if (r->fp == NULL) {
    int e = errno;
    free(r);
    return sl_error_set(out_err, -e, "cannot open '%s': %s",
                        src->path ? src->path : "(built-in text)",
                        strerror(e));
  }
  /* Resume at a saved position: the offset of the next line. */
  const sl_split_init_t *split = &init->splits[0];
  if (split->position && split->position_len == 8) {
    int64_t off;
    memcpy(&off, split->position, 8);
    if (fseeko(r->fp, (off_t)off, SEEK_SET) != 0) {
      int e = errno;
      sl_error_set(out_err, -e, "cannot seek in '%s': %s", r->name,
                   strerror(e));
      fclose(r->fp);
      free(r);
      return -e;
    }
  }
  *out_reader = r;
  return SL_OK;
}

static int lines_poll(void *reader, sl_source_out_t *out,
                      sl_error_t **out_err) {
  lines_reader_t *r = reader;
  if (r->fp == NULL) return SL_POLL_END;
  for (;;) {
    errno = 0;
    ssize_t n = getline(&r->line, &r->line_cap, r->fp);
    if (n < 0) {
      if (ferror(r->fp))
        return sl_error_set(out_err, errno ? -errno : SL_EIO,
                            "cannot read '%s'", r->name);
      return SL_POLL_END;
    }
    while (n > 0 && (r->line[n - 1] == '\n' || r->line[n - 1] == '\r')) n--;
    sl_row_builder_t *b = sl_source_builder(out);
    sl_row_builder_set_str(b, 0, r->line, (uint32_t)n);
    /* false: the engine wants the poll to return (the row was taken). */
    if (!sl_source_emit_builder(out, out_err)) return SL_POLL_MORE;
  }
}

static int lines_position(void *reader, uint32_t split, sl_bytes_t *out_pos) {
  lines_reader_t *r = reader;
  (void)split;
  int64_t off = r->fp ? (int64_t)ftello(r->fp) : 0;
  return sl_bytes_append(out_pos, &off, 8);
}

static void lines_close(void *reader) {
  lines_reader_t *r = reader;
  if (r->fp) fclose(r->fp);
  free(r->line);
  free(r);
}

static void lines_destroy(void *ctx) {
  lines_src_t *src = ctx;
  free(src->path);
  free(src);
}

static const sl_source_vt_t lines_vt = {
    .type_name = "lines",
    .plan = lines_plan,
    .reader_open = lines_open,
    .reader_poll = lines_poll,
    .reader_position = lines_position,
    .reader_close = lines_close,
    .destroy = lines_destroy,
};

/* ------------------------------------------------------------------ */
/* words: split a line into lower-case words. */

static bool is_word_byte(unsigned char c) {
  return isalnum(c) || c == '\'' || c >= 0x80;
}

static int emit_word(sl_collector_t *out, const char *p, size_t len) {
  /* No leading or trailing apostrophes: "'tis" -> "tis", "rivers'" ->
   * "rivers". */
  while (len > 0 && p[0] == '\'') p++, len--;
  while (len > 0 && p[len - 1] == '\'') len--;
  if (len == 0) return SL_OK;
  char small[128];
  char *w = len <= sizeof(small) ? small : malloc(len);
  if (w == NULL) return SL_ENOMEM;
  for (size_t i = 0; i < len; i++)
    w[i] = (char)tolower((unsigned char)p[i]);
  sl_row_builder_t *b = sl_collector_builder(out);
  int rc = sl_row_builder_set_str(b, 0, w, (uint32_t)len);
  if (w != small) free(w);
  if (rc != SL_OK) return rc;
  return sl_collect_builder(out);
}

static int split_words(sl_ctx_t *ctx, void *user, const sl_row_t *in,
                       sl_collector_t *out) {
  (void)ctx;
  (void)user;
  sl_slice_t line = sl_row_get_str(in, 0);
  const char *p = (const char *)line.ptr;
  size_t i = 0;
  while (i < line.len) {
    while (i < line.len && !is_word_byte((unsigned char)p[i])) i++;
    size_t start = i;
    while (i < line.len && is_word_byte((unsigned char)p[i])) i++;
    if (i > start) {
      int rc = emit_word(out, p + start, i - start);
      if (rc != SL_OK) return rc;
    }
  }
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* count: a running count per word in keyed value state. */

static int count_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_desc_t desc = {.name = "count", .kind = SL_STATE_VALUE,
                          .version = 1};
  sl_state_t *count;
  int rc = sl_ctx_state(ctx, &desc, &count);
  if (rc != SL_OK) return rc;
  /* The state handle belongs to this subtask; keep it with the subtask. */
  sl_ctx_set_local(ctx, count);
  return SL_OK;
}

static int count_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *count = sl_ctx_local(ctx);
  /* The state is addressed by the current key: the word of this row. */
  int64_t n = 0;
  int rc = sl_value_get_i64(count, &n);
  if (rc != SL_OK && rc != SL_ENOTFOUND) return rc;
  n++;
  if ((rc = sl_value_put_i64(count, n)) != SL_OK) return rc;
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  if (n > 1) sl_row_builder_set_kind(b, SL_ROW_UPDATE_AFTER);
  sl_slice_t word = sl_row_get_str(row, 0);
  if ((rc = sl_row_builder_set_str(b, 0, word.ptr, word.len)) != SL_OK)
    return rc;
  sl_row_builder_set_i64(b, 1, n);
  return sl_ctx_emit_builder(ctx);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice-example-word-count [--parallelism N] [FILE]\n"
          "Counts the words of FILE (default: a built-in text) and prints\n"
          "a changelog of the counts as CSV: +I,word,1 then +U,word,n.\n");
}

static bool parse_u32(const char *s, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v > 1024) return false;
  *out = (uint32_t)v;
  return true;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  uint32_t parallelism = 2;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--parallelism") == 0 && i + 1 < argc) {
      if (!parse_u32(argv[++i], &parallelism) || parallelism == 0) {
        fprintf(stderr, "word-count: --parallelism needs a number 1..1024\n");
        return 2;
      }
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      usage(stderr);
      return 2;
    } else if (path == NULL) {
      path = argv[i];
    } else {
      usage(stderr);
      return 2;
    }
  }

  sl_error_t *err = NULL;
  sl_schema_t *line_schema = NULL, *word_schema = NULL, *count_schema = NULL;
  sl_job_t *job = NULL;
  int rc;
  sl_field_t line_f[1] = {{"line", {SL_TYPE_STRING, 0, 0, false}}};
  sl_field_t word_f[1] = {{"word", {SL_TYPE_STRING, 0, 0, false}}};
  sl_field_t count_f[2] = {{"word", {SL_TYPE_STRING, 0, 0, false}},
                           {"count", {SL_TYPE_INT64, 0, 0, false}}};
  if ((rc = sl_schema_create(line_f, 1, &line_schema, &err)) != SL_OK ||
      (rc = sl_schema_create(word_f, 1, &word_schema, &err)) != SL_OK ||
      (rc = sl_schema_create(count_f, 2, &count_schema, &err)) != SL_OK)
    goto fail;

  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "word-count";
  cfg.parallelism = parallelism;
  if ((rc = sl_job_create(&cfg, &job, &err)) != SL_OK) goto fail;

  lines_src_t *src = calloc(1, sizeof(*src));
  if (src == NULL || (path && (src->path = strdup(path)) == NULL)) {
    free(src);
    rc = sl_error_set(&err, SL_ENOMEM, "out of memory");
    goto fail;
  }
  /* Builder calls keep the first error in the job; sl_job_run reports it.
   * The job owns src from here on, also on error. */
  sl_stream_t *s = sl_job_source(job, "lines", &lines_vt, src, line_schema);
  s = sl_stream_flat_map(s, "words", word_schema, split_words, NULL);
  const char *key[] = {"word"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {.open = count_open, .process = count_process};
  s = sl_stream_process(s, "count", count_schema, &fns, NULL);
  const sl_sink_vt_t *sink_vt;
  void *sink_ctx;
  if ((rc = sl_stdout_sink_create(SL_FORMAT_CSV, true, &sink_vt, &sink_ctx,
                                  &err)) != SL_OK)
    goto fail;
  sl_stream_sink(s, "stdout", sink_vt, sink_ctx);

  if ((rc = sl_job_run(job, &err)) != SL_OK) goto fail;
  sl_job_destroy(job);
  sl_schema_unref(line_schema);
  sl_schema_unref(word_schema);
  sl_schema_unref(count_schema);
  return 0;

fail:
  fprintf(stderr, "word-count: %s\n",
          err ? sl_error_message(err) : sl_strerror(rc));
  sl_error_destroy(err);
  sl_job_destroy(job);
  sl_schema_unref(line_schema);
  sl_schema_unref(word_schema);
  sl_schema_unref(count_schema);
  return 1;
}
