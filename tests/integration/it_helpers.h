/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the integration tests: a scripted test source (record i
 * of split s from a generator function), a collecting sink, and small
 * utilities.  Header-only: each test program includes it once.
 */
#ifndef SL_IT_HELPERS_H
#define SL_IT_HELPERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

static inline uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The random word of record i of split s, for a test-chosen salt. */
static inline uint64_t rnd(uint64_t salt, uint32_t split, uint64_t i) {
  return mix(mix(salt) ^ ((uint64_t)split << 48) ^ i);
}

static inline sl_schema_t *make_schema(const sl_field_t *f, uint32_t n) {
  sl_schema_t *s;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_schema_create(f, n, &s, &err), err);
  return s;
}

#define I64(nm) {nm, {SL_TYPE_INT64, 0, 0, false}}
#define I64N(nm) {nm, {SL_TYPE_INT64, 0, 0, true}}
#define I32(nm) {nm, {SL_TYPE_INT32, 0, 0, false}}
#define F64(nm) {nm, {SL_TYPE_FLOAT64, 0, 0, false}}
#define F64N(nm) {nm, {SL_TYPE_FLOAT64, 0, 0, true}}
#define STR(nm) {nm, {SL_TYPE_STRING, 0, 0, false}}
#define STRN(nm) {nm, {SL_TYPE_STRING, 0, 0, true}}
#define BOOLF(nm) {nm, {SL_TYPE_BOOL, 0, 0, false}}
#define DECN(nm, p, s) {nm, {SL_TYPE_DECIMAL, p, s, true}}

static inline sl_schema_t *schema_ka(void) {
  sl_field_t f[] = {I64("key"), I64("amount")};
  return make_schema(f, 2);
}

static inline sl_job_t *new_job(uint32_t parallelism) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = parallelism;
  cfg.n_workers = 4;
  sl_job_t *job;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_create(&cfg, &job, &err), err);
  return job;
}

static inline void run_ok(sl_job_t *job) {
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  SL_ASSERT_OK_E(rc, err);
  sl_error_destroy(err);
}

/* Run a job that must fail; returns its message (caller frees). */
static inline char *run_fail(sl_job_t *job, int *out_rc) {
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc == SL_OK) SL_TEST_FAIL("the job succeeded but should have failed");
  if (err == NULL) SL_TEST_FAIL("the job failed (%s) without a message",
                                sl_errname(rc));
  if (out_rc) *out_rc = rc;
  char *msg = strdup(sl_error_message(err));
  sl_error_destroy(err);
  return msg;
}

static inline int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Pairs of int64, compared lexicographically. */
typedef struct pair_s {
  int64_t a, b;
} pair_t;

static inline int cmp_pair(const void *x, const void *y) {
  const pair_t *p = x, *q = y;
  if (p->a != q->a) return (p->a > q->a) - (p->a < q->a);
  return (p->b > q->b) - (p->b < q->b);
}

static inline int cmp_strp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline bool slice_eq(sl_slice_t s, const char *str) {
  return s.len == strlen(str) && memcmp(s.ptr, str, s.len) == 0;
}

static inline char *slice_dup(sl_slice_t s) {
  char *p = malloc(s.len + 1);
  memcpy(p, s.ptr, s.len);
  p[s.len] = '\0';
  return p;
}

/* ------------------------------------------------------------------ */
/* A test source.  Record i of split s is produced by gen(); n_per_split =
 * UINT64_MAX makes it unbounded.  Readers count opens and closes, so a
 * test can check that every source task shut down. */

typedef struct vsrc_s vsrc_t;
typedef void (*vgen_fn)(const vsrc_t *s, uint32_t split, uint64_t i,
                        sl_row_builder_t *b);

struct vsrc_s {
  uint32_t n_splits;
  uint64_t n_per_split;
  const uint64_t *split_len; /* optional: per-split record counts */
  vgen_fn gen;
  const void *user;
  atomic_uint n_open;
  atomic_uint n_close;
};

typedef struct vreader_s {
  vsrc_t *src;
  uint32_t *split;
  uint64_t *next;
  uint32_t n;
  uint32_t cur;
} vreader_t;

static inline uint64_t vsrc_len(const vsrc_t *s, uint32_t split) {
  return s->split_len ? s->split_len[split] : s->n_per_split;
}

static inline int vsrc_plan(void *ctx, uint32_t p, sl_split_list_t *l,
                            sl_error_t **e) {
  (void)p;
  (void)e;
  for (uint32_t i = 0; i < ((vsrc_t *)ctx)->n_splits; i++)
    if (sl_split_list_addf(l, "v%u", i) != SL_OK) return SL_ENOMEM;
  return SL_OK;
}

static inline int vsrc_open(void *ctx, const sl_reader_init_t *init, void **out,
                     sl_error_t **e) {
  (void)e;
  vsrc_t *s = ctx;
  vreader_t *r = calloc(1, sizeof(*r));
  r->src = s;
  r->split = calloc(init->n_splits + 1, sizeof(uint32_t));
  r->next = calloc(init->n_splits + 1, sizeof(uint64_t));
  for (uint32_t i = 0; i < init->n_splits; i++)
    r->split[r->n++] = init->splits[i].split;
  atomic_fetch_add(&s->n_open, 1);
  *out = r;
  return SL_OK;
}

static inline int vsrc_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  vreader_t *r = rd;
  for (uint32_t k = 0; k < r->n; k++) {
    uint32_t j = (r->cur + k) % r->n;
    uint64_t len = vsrc_len(r->src, r->split[j]);
    if (r->next[j] >= len) continue;
    r->cur = j + 1;
    sl_source_set_split(out, r->split[j]);
    for (int b = 0; b < 64 && r->next[j] < len; b++) {
      sl_row_builder_t *bld = sl_source_builder(out);
      r->src->gen(r->src, r->split[j], r->next[j]++, bld);
      sl_error_t *err = NULL;
      if (!sl_source_emit_builder(out, &err)) {
        if (err) {
          *e = err;
          return sl_error_code(err);
        }
        return SL_POLL_MORE;
      }
    }
    return SL_POLL_MORE;
  }
  return SL_POLL_END;
}

static inline int vsrc_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)rd;
  (void)split;
  (void)out;
  return SL_ENOTSUP;
}

static inline void vsrc_close(void *rd) {
  vreader_t *r = rd;
  atomic_fetch_add(&r->src->n_close, 1);
  free(r->split);
  free(r->next);
  free(r);
}

static inline void vsrc_destroy(void *ctx) { (void)ctx; }

__attribute__((unused)) static const sl_source_vt_t vsrc_vt = {.type_name = "test",
                                       .plan = vsrc_plan,
                                       .reader_open = vsrc_open,
                                       .reader_poll = vsrc_poll,
                                       .reader_position = vsrc_pos,
                                       .reader_close = vsrc_close,
                                       .destroy = vsrc_destroy};

static inline void vsrc_init(vsrc_t *s, uint32_t n_splits, uint64_t n_per_split,
                      vgen_fn gen, const void *user) {
  memset(s, 0, sizeof(*s));
  s->n_splits = n_splits;
  s->n_per_split = n_per_split;
  s->gen = gen;
  s->user = user;
  atomic_init(&s->n_open, 0);
  atomic_init(&s->n_close, 0);
}

/* (key, amount) records; user points at a ka_cfg_t.  The salt picks the
 * data; keys are in [0, n_keys), amounts in [-1000, 1000]. */
typedef struct ka_cfg_s {
  uint64_t salt;
  uint64_t n_keys;
} ka_cfg_t;

static inline void ka_record(const ka_cfg_t *c, uint32_t split, uint64_t i,
                      int64_t *key, int64_t *amount) {
  uint64_t h = rnd(c->salt, split, i);
  *key = (int64_t)(h % c->n_keys);
  *amount = (int64_t)((h >> 24) % 2001) - 1000;
}

static inline void ka_gen(const vsrc_t *s, uint32_t split, uint64_t i,
                   sl_row_builder_t *b) {
  int64_t key, amount;
  ka_record(s->user, split, i, &key, &amount);
  sl_row_builder_set_i64(b, 0, key);
  sl_row_builder_set_i64(b, 1, amount);
}

/* Rows from a table: user is a const trow_t array, split 0 only. */
typedef struct trow_s {
  sl_row_kind_t kind;
  const char *k;
  bool is_null;
  int64_t v;
} trow_t;

static inline void table_gen(const vsrc_t *s, uint32_t split, uint64_t i,
                      sl_row_builder_t *b) {
  (void)split;
  const trow_t *t = &((const trow_t *)s->user)[i];
  sl_row_builder_set_kind(b, t->kind);
  sl_row_builder_set_str(b, 0, t->k, (uint32_t)strlen(t->k));
  if (!t->is_null) sl_row_builder_set_i64(b, 1, t->v);
}

/* ------------------------------------------------------------------ */
/* A collecting sink: a copy of every row with the writer's subtask, in
 * arrival order.  Optionally fails a write after fail_after rows of one
 * writer. */

typedef struct crow_s {
  uint32_t subtask;
  uint32_t len;
  uint8_t *data;
} crow_t;

typedef struct csink_s {
  pthread_mutex_t lock;
  sl_schema_t *schema; /* referenced at the first open */
  crow_t *rows;
  size_t n_rows, cap;
  uint64_t fail_after;   /* 0 = never */
  uint32_t n_open, n_close_ok, n_close_failed;
  uint32_t n_failed;      /* writers that returned the error */
  uint32_t failed_sub[64];
} csink_t;

typedef struct cwriter_s {
  csink_t *c;
  uint32_t subtask;
  uint64_t n;
} cwriter_t;

static inline int csink_open(void *ctx, const sl_sink_init_t *init, void **out,
                      sl_error_t **e) {
  (void)e;
  csink_t *c = ctx;
  cwriter_t *w = calloc(1, sizeof(*w));
  w->c = c;
  w->subtask = init->subtask;
  pthread_mutex_lock(&c->lock);
  c->n_open++;
  if (c->schema == NULL) c->schema = sl_schema_ref((sl_schema_t *)init->schema);
  pthread_mutex_unlock(&c->lock);
  *out = w;
  return SL_OK;
}

static inline int csink_write(void *wr, const sl_row_t *row, sl_error_t **e) {
  cwriter_t *w = wr;
  csink_t *c = w->c;
  if (c->fail_after && w->n == c->fail_after) {
    pthread_mutex_lock(&c->lock);
    if (c->n_failed < 64) c->failed_sub[c->n_failed++] = w->subtask;
    pthread_mutex_unlock(&c->lock);
    return sl_error_set(e, SL_EIO, "disk full after %llu rows",
                        (unsigned long long)w->n);
  }
  w->n++;
  if (c->fail_after) return SL_OK; /* failure tests keep nothing */
  uint8_t *copy = malloc(row->len);
  memcpy(copy, row->data, row->len);
  pthread_mutex_lock(&c->lock);
  if (c->n_rows == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 1024;
    c->rows = realloc(c->rows, c->cap * sizeof(crow_t));
  }
  c->rows[c->n_rows].subtask = w->subtask;
  c->rows[c->n_rows].len = row->len;
  c->rows[c->n_rows].data = copy;
  c->n_rows++;
  pthread_mutex_unlock(&c->lock);
  return SL_OK;
}

static inline int csink_close(void *wr, bool ok, sl_error_t **e) {
  (void)e;
  cwriter_t *w = wr;
  csink_t *c = w->c;
  pthread_mutex_lock(&c->lock);
  if (ok) c->n_close_ok++;
  else c->n_close_failed++;
  pthread_mutex_unlock(&c->lock);
  free(w);
  return SL_OK;
}

static inline void csink_destroy(void *ctx) { (void)ctx; }

__attribute__((unused)) static const sl_sink_vt_t csink_vt = {.type_name = "collect",
                                      .writer_open = csink_open,
                                      .write = csink_write,
                                      .writer_close = csink_close,
                                      .destroy = csink_destroy};

static inline void csink_init(csink_t *c) {
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->lock, NULL);
}

static inline void csink_free(csink_t *c) {
  for (size_t i = 0; i < c->n_rows; i++) free(c->rows[i].data);
  free(c->rows);
  sl_schema_unref(c->schema);
  pthread_mutex_destroy(&c->lock);
}

static inline sl_row_t crow(const csink_t *c, size_t i) {
  sl_row_t r;
  sl_row_view(&r, c->schema, c->rows[i].data, c->rows[i].len);
  return r;
}

/* Sorted (field a, field b) int64 pairs of every collected row. */
static inline pair_t *collected_pairs(const csink_t *c, uint32_t fa, uint32_t fb) {
  pair_t *p = calloc(c->n_rows + 1, sizeof(pair_t));
  for (size_t i = 0; i < c->n_rows; i++) {
    sl_row_t r = crow(c, i);
    p[i].a = sl_row_get_i64(&r, fa);
    p[i].b = sl_row_get_i64(&r, fb);
  }
  qsort(p, c->n_rows, sizeof(pair_t), cmp_pair);
  return p;
}

static inline void assert_pairs_equal(const pair_t *got, size_t n_got,
                               const pair_t *want, size_t n_want) {
  SL_ASSERT_EQ_INT(n_got, n_want);
  for (size_t i = 0; i < n_want; i++)
    if (got[i].a != want[i].a || got[i].b != want[i].b)
      SL_TEST_FAIL("sorted row %zu: got (%lld, %lld), expected (%lld, %lld)",
                   i, (long long)got[i].a, (long long)got[i].b,
                   (long long)want[i].a, (long long)want[i].b);
}

#endif
