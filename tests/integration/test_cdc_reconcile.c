/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reconciler of a CDC source with a non-primary-key chunk key
 * (src/ops/cdc_reconcile.c, docs/cdc-mariadb.md "Exactly once with a
 * non-primary-key chunk key"), driven by a gated list source of hand-made
 * snapshot and binlog rows with their `_sl_version` bytes.
 *
 * The job: list source (parallelism 1) -> sl__cdc_reconcile (by id) ->
 * key by (tbl, id) -> a materializer with managed state that checks the
 * changelog (+I of an absent row, -U/-D of exactly the row it holds, +U
 * right after a -U) and logs every row it applies -> an upsert sink that
 * keeps the last image per (tbl, id).  The final view must equal the
 * tables at the end of the history below, field by field.
 *
 * History (GTID domain-seq; table t0 chunked by c at 105, t1 by c at 10):
 *   start  t0: ids 101..120, c = id, v "r<id>", but 102 has c 110 (chunk B).
 *          t1: 101 (c 5), 102 (c 7), 140 (c 20).
 *   HIGH of t0's chunk A  = {0-10, 1-3}: 101, 103, 104
 *   HIGH of t1's chunk A1 = {0-11, 1-3}: 101, 102 (c 7)
 *   (chunk A1 read again at {0-12, 1-3}: 101)
 *   0-11  t0 102: c 110 -> 100 (chunk B to A: the seed's migration)
 *   0-12  t0 103: c 103 -> 106 (A to B: in both snapshots); t1 102: c 7 -> 12
 *   0-13  t0 107: v -> r107b (covered by B's HIGH); t1 140 deleted
 *   1-4   t0 101: v -> r101b (domain 1, after A's HIGH); t0 108: v -> r108b
 *         (domain 1, covered by B's HIGH)
 *   0-14  t0 104: v -> r104b (after A's HIGH, A's key)
 *   HIGH of t1's chunk B1 = {0-14, 1-4}: 102 (c 12)
 *   HIGH of t0's chunk B  = {0-15, 1-4}: 103 (c 106), 105..120 (107 r107b,
 *          108 r108b; 102 is in neither snapshot)
 *   0-16  t0 105: v -> r105b; t1 103 (c 3) inserted     } past every HIGH:
 *   0-17  t0 120 deleted                                } flag bit 0
 *   0-18  t0 121 (c 121) inserted                       }
 * The source emits t0's chunk A, t1's B1, t0's B, t1's A1 (t1's newer
 * snapshot first), A1 again, then the binlog.
 */
#include <pthread.h>
#include <stdarg.h>

#include "ops/ops.h"
#include "sl_test.h"

/* ---- the history as rows -------------------------------------------- */

typedef struct hv_s {
  uint8_t n;
  uint32_t d[2];
  uint64_t s[2];
} hv_t;

static const hv_t H_A = {2, {0, 1}, {10, 3}}, H_B = {2, {0, 1}, {15, 4}};
static const hv_t H_A1 = {2, {0, 1}, {11, 3}}, H_B1 = {2, {0, 1}, {14, 4}};
static const hv_t H_A1_again = {2, {0, 1}, {12, 3}};

typedef struct ev_s {
  sl_row_kind_t kind;
  uint16_t table;
  int64_t id, c;
  char v[16];
  const hv_t *h; /* snapshot row; NULL: binlog row */
  uint32_t d;
  uint64_t s;
  uint32_t event, row;
  uint8_t flags;
  /* A version given as raw bytes (bad-input tests). */
  const uint8_t *raw;
  uint32_t raw_len;
} ev_t;

enum { MAX_EVS = 128 };
static ev_t evs[MAX_EVS];
static int n_evs, n_snapshot_evs;

static void add_ev(sl_row_kind_t k, uint16_t t, int64_t id, int64_t c,
                   const char *v, const hv_t *h, uint32_t d, uint64_t s,
                   uint32_t e, uint32_t r, uint8_t f) {
  if (n_evs == MAX_EVS) SL_TEST_FAIL("too many rows");
  ev_t *x = &evs[n_evs++];
  memset(x, 0, sizeof(*x));
  x->kind = k;
  x->table = t;
  x->id = id;
  x->c = c;
  snprintf(x->v, sizeof(x->v), "%s", v);
  x->h = h;
  x->d = d;
  x->s = s;
  x->event = e;
  x->row = r;
  x->flags = f;
}

static void snap(uint16_t t, int64_t id, int64_t c, const char *v,
                 const hv_t *h) {
  add_ev(SL_ROW_INSERT, t, id, c, v, h, 0, 0, 0, 0, 0);
}

static void bin(sl_row_kind_t k, uint16_t t, int64_t id, int64_t c,
                const char *v, uint32_t d, uint64_t s, uint32_t e, uint32_t r,
                uint8_t f) {
  add_ev(k, t, id, c, v, NULL, d, s, e, r, f);
}

/* An update: before and after images with one version. */
static void upd(uint16_t t, int64_t id, int64_t c0, const char *v0, int64_t c1,
                const char *v1, uint32_t d, uint64_t s, uint32_t e, uint32_t r,
                uint8_t f) {
  bin(SL_ROW_UPDATE_BEFORE, t, id, c0, v0, d, s, e, r, f);
  bin(SL_ROW_UPDATE_AFTER, t, id, c1, v1, d, s, e, r, f);
}

static char *rv(int64_t id) {
  static char b[8][16];
  static int i;
  char *p = b[i++ & 7];
  snprintf(p, 16, "r%lld", (long long)id);
  return p;
}

static void history(void) {
  n_evs = 0;
  /* t0 chunk A at H_A. */
  snap(0, 101, 101, "r101", &H_A);
  snap(0, 103, 103, "r103", &H_A);
  snap(0, 104, 104, "r104", &H_A);
  /* t1 chunk B1 at H_B1 (newer), before chunk A1. */
  snap(1, 102, 12, "s102", &H_B1);
  /* t0 chunk B at H_B. */
  snap(0, 103, 106, "r103", &H_B);
  for (int64_t id = 105; id <= 120; id++)
    snap(0, id, id, id == 107 ? "r107b" : id == 108 ? "r108b" : rv(id), &H_B);
  /* t1 chunk A1 at H_A1 (older). */
  snap(1, 101, 5, "s101", &H_A1);
  snap(1, 102, 7, "s102", &H_A1);
  /* A1 read again (after a restore) at a newer HIGH: 102 has moved out. */
  snap(1, 101, 5, "s101", &H_A1_again);
  n_snapshot_evs = n_evs;
  /* The binlog from the smallest HIGH. */
  upd(0, 102, 110, "r102", 100, "r102", 0, 11, 0, 0, 0);
  upd(0, 103, 103, "r103", 106, "r103", 0, 12, 0, 0, 0);
  upd(1, 102, 7, "s102", 12, "s102", 0, 12, 1, 0, 0);
  upd(0, 107, 107, "r107", 107, "r107b", 0, 13, 0, 0, 0);
  bin(SL_ROW_DELETE, 1, 140, 20, "s140", 0, 13, 1, 0, 0);
  upd(0, 101, 101, "r101", 101, "r101b", 1, 4, 0, 0, 0);
  upd(0, 108, 108, "r108", 108, "r108b", 1, 4, 0, 1, 0);
  upd(0, 104, 104, "r104", 104, "r104b", 0, 14, 0, 0, 0);
  /* Past every HIGH: pass-through. */
  upd(0, 105, 105, "r105", 105, "r105b", 0, 16, 0, 0, 1);
  bin(SL_ROW_INSERT, 1, 103, 3, "s103", 0, 16, 1, 0, 1);
  bin(SL_ROW_DELETE, 0, 120, 120, "r120", 0, 17, 0, 0, 1);
  bin(SL_ROW_INSERT, 0, 121, 121, "r121", 0, 18, 0, 0, 1);
}

/* The tables at the end of the history. */
typedef struct img_s {
  bool is_present;
  int64_t c;
  char v[16];
} img_t;

enum { MAX_ID = 200 };
static img_t want[2][MAX_ID];

static void want_set(int t, int64_t id, int64_t c, const char *v) {
  want[t][id].is_present = true;
  want[t][id].c = c;
  snprintf(want[t][id].v, sizeof(want[t][id].v), "%s", v);
}

static void want_history(void) {
  memset(want, 0, sizeof(want));
  for (int64_t id = 101; id <= 119; id++) want_set(0, id, id, rv(id));
  want_set(0, 101, 101, "r101b");
  want_set(0, 102, 100, "r102");
  want_set(0, 103, 106, "r103");
  want_set(0, 104, 104, "r104b");
  want_set(0, 105, 105, "r105b");
  want_set(0, 107, 107, "r107b");
  want_set(0, 108, 108, "r108b");
  want_set(0, 121, 121, "r121");
  want_set(1, 101, 5, "s101");
  want_set(1, 102, 12, "s102");
  want_set(1, 103, 3, "s103");
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t version_bytes(const ev_t *x, uint8_t *b) {
  if (x->raw) {
    memcpy(b, x->raw, x->raw_len);
    return x->raw_len;
  }
  b[1] = (uint8_t)x->table;
  b[2] = (uint8_t)(x->table >> 8);
  if (x->h) {
    b[0] = 'S';
    b[3] = x->h->n;
    for (uint32_t i = 0; i < x->h->n; i++) {
      put32(b + 4 + 12 * i, x->h->d[i]);
      put64(b + 8 + 12 * i, x->h->s[i]);
    }
    return 4 + 12 * x->h->n;
  }
  b[0] = 'B';
  b[3] = x->flags;
  put32(b + 4, x->d);
  put64(b + 8, x->s);
  put32(b + 16, x->event);
  put32(b + 20, x->row);
  return 24;
}

/* ---- the gated list source ------------------------------------------ */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int64_t gate;              /* rows the source may emit */
static int64_t src_next;          /* rows the source has emitted */
static sl_source_waker_t *waker;

typedef struct lreader_s {
  bool has_split;
  int64_t next;
} lreader_t;

static int ls_plan(void *c, uint32_t p, sl_split_list_t *l, sl_error_t **e) {
  (void)c;
  (void)p;
  (void)e;
  return sl_split_list_addf(l, "history");
}

static int ls_open(void *c, const sl_reader_init_t *init, void **out,
                   sl_error_t **e) {
  (void)c;
  (void)e;
  lreader_t *r = calloc(1, sizeof(*r));
  if (init->n_splits) {
    r->has_split = true;
    if (init->splits[0].position) memcpy(&r->next, init->splits[0].position, 8);
    pthread_mutex_lock(&lock);
    waker = init->waker;
    pthread_mutex_unlock(&lock);
  }
  *out = r;
  return SL_OK;
}

static int ls_poll(void *rd, sl_source_out_t *out, sl_error_t **e) {
  (void)e;
  lreader_t *r = rd;
  if (!r->has_split || r->next >= n_evs) return SL_POLL_END;
  pthread_mutex_lock(&lock);
  int64_t g = gate;
  pthread_mutex_unlock(&lock);
  if (r->next >= g) return SL_POLL_WAIT;
  sl_source_set_split(out, 0);
  while (r->next < g && r->next < n_evs) {
    const ev_t *x = &evs[r->next++];
    sl_row_builder_t *b = sl_source_builder(out);
    sl_row_builder_set_kind(b, x->kind);
    const char *tbl = x->table ? "t1" : "t0";
    sl_row_builder_set_str(b, 0, tbl, 2);
    sl_row_builder_set_i64(b, 1, x->id);
    sl_row_builder_set_i64(b, 2, x->c);
    sl_row_builder_set_str(b, 3, x->v, (uint32_t)strlen(x->v));
    uint8_t vb[64];
    sl_row_builder_set_str(b, 4, vb, version_bytes(x, vb));
    bool is_more = sl_source_emit_builder(out, NULL);
    pthread_mutex_lock(&lock);
    src_next = r->next;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    if (!is_more) break;
  }
  return SL_POLL_MORE;
}

static int ls_pos(void *rd, uint32_t split, sl_bytes_t *out) {
  (void)split;
  return sl_bytes_append(out, &((lreader_t *)rd)->next, 8);
}

static void ls_close(void *rd) {
  lreader_t *r = rd;
  if (r->has_split) {
    pthread_mutex_lock(&lock);
    waker = NULL;
    pthread_mutex_unlock(&lock);
  }
  free(rd);
}

static void ls_destroy(void *c) { (void)c; }
static const sl_source_vt_t list_vt = {"history", ls_plan, ls_open, ls_poll,
                                       ls_pos, ls_close, ls_destroy};

/* Wait until the source has emitted every row before the gate: a
 * checkpoint triggered then has its barrier after all of them. */
static void wait_for_gate(void) {
  pthread_mutex_lock(&lock);
  while (src_next < gate) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
}

static void set_gate(int64_t g) {
  pthread_mutex_lock(&lock);
  gate = g;
  if (waker) sl_source_waker_wake(waker);
  pthread_mutex_unlock(&lock);
}

/* ---- the materializer and the sink ---------------------------------- */

typedef struct logrow_s {
  int tbl;
  int64_t id, c;
  sl_row_kind_t kind;
  char v[16];
} logrow_t;

static logrow_t mlog[4 * MAX_EVS];
static int n_mlog;
static int violations;
static char violation_msg[512];
static int64_t n_processed, fail_at = -1;
static img_t view[2][MAX_ID];

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...) {
  pthread_mutex_lock(&lock);
  if (violations++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(violation_msg, sizeof(violation_msg), fmt, ap);
    va_end(ap);
  }
  pthread_mutex_unlock(&lock);
}

/* State: u8 0 absent, 1 present, 2 retracted by -U; c; v. */
typedef struct mval_s {
  uint8_t st;
  int64_t c;
  char v[16];
} mval_t;

static int m_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_t *st;
  sl_state_desc_t d = {"image", SL_STATE_VALUE, 1, NULL, NULL, NULL};
  int rc = sl_ctx_state(ctx, &d, &st);
  sl_ctx_set_local(ctx, st);
  return rc;
}

static int m_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *st = sl_ctx_local(ctx);
  pthread_mutex_lock(&lock);
  bool is_fail = n_processed++ == fail_at;
  if (is_fail) fail_at = -1;
  pthread_mutex_unlock(&lock);
  if (is_fail) return sl_ctx_fail(ctx, SL_EUSER, "injected failure");
  logrow_t lr = {0};
  sl_slice_t t = sl_row_get_str(row, 0), v = sl_row_get_str(row, 3);
  lr.tbl = t.ptr[1] - '0';
  lr.id = sl_row_get_i64(row, 1);
  lr.c = sl_row_get_i64(row, 2);
  lr.kind = sl_row_kind(row);
  snprintf(lr.v, sizeof(lr.v), "%.*s", (int)v.len, (const char *)v.ptr);
  pthread_mutex_lock(&lock);
  if (n_mlog < (int)(sizeof(mlog) / sizeof(mlog[0]))) mlog[n_mlog++] = lr;
  pthread_mutex_unlock(&lock);
  mval_t m = {0};
  sl_slice_t cur;
  int rc = sl_value_get(st, &cur);
  if (rc == SL_OK) memcpy(&m, cur.ptr, sizeof(m));
  else if (rc != SL_ENOTFOUND) return rc;
  const char *k = sl_row_kind_name(lr.kind);
  bool is_same = m.st == 1 && m.c == lr.c && strcmp(m.v, lr.v) == 0;
  switch (lr.kind) {
  case SL_ROW_INSERT:
    if (m.st == 1) violation("t%d %lld: %s of a present row", lr.tbl,
                             (long long)lr.id, k);
    m.st = 1;
    break;
  case SL_ROW_UPDATE_AFTER:
    if (m.st != 2) violation("t%d %lld: %s without a -U before it", lr.tbl,
                             (long long)lr.id, k);
    m.st = 1;
    break;
  case SL_ROW_UPDATE_BEFORE:
  case SL_ROW_DELETE:
    if (!is_same)
      violation("t%d %lld: %s (c %lld, %s) of a row that is %s (c %lld, %s)",
                lr.tbl, (long long)lr.id, k, (long long)lr.c, lr.v,
                m.st == 1 ? "present" : "absent", (long long)m.c, m.v);
    m.st = lr.kind == SL_ROW_DELETE ? 0 : 2;
    break;
  }
  m.c = lr.c;
  memcpy(m.v, lr.v, sizeof(m.v));
  if ((rc = sl_value_put(st, &m, sizeof(m))) != SL_OK) return rc;
  /* To the sink: (tbl, id, present, c, v). */
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_str(b, 0, t.ptr, t.len);
  sl_row_builder_set_i64(b, 1, lr.id);
  sl_row_builder_set_bool(b, 2, m.st == 1);
  sl_row_builder_set_i64(b, 3, lr.c);
  sl_row_builder_set_str(b, 4, lr.v, (uint32_t)strlen(lr.v));
  return sl_ctx_emit_builder(ctx);
}

static int sk_open(void *c, const sl_sink_init_t *i, void **out,
                   sl_error_t **e) {
  (void)i;
  (void)e;
  *out = c;
  return SL_OK;
}

static int sk_write(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)w;
  (void)e;
  int tbl = sl_row_get_str(row, 0).ptr[1] - '0';
  int64_t id = sl_row_get_i64(row, 1);
  sl_slice_t v = sl_row_get_str(row, 4);
  pthread_mutex_lock(&lock);
  img_t *x = &view[tbl][id];
  x->is_present = sl_row_get_bool(row, 2);
  x->c = sl_row_get_i64(row, 3);
  snprintf(x->v, sizeof(x->v), "%.*s", (int)v.len, (const char *)v.ptr);
  pthread_mutex_unlock(&lock);
  return SL_OK;
}

static int sk_close(void *w, bool ok, sl_error_t **e) {
  (void)w;
  (void)ok;
  (void)e;
  return SL_OK;
}
static void sk_destroy(void *c) { (void)c; }
static const sl_sink_vt_t sink_vt = {"view", sk_open, sk_write, NULL,
                                     sk_close, sk_destroy};

/* ---- the job ----------------------------------------------------------- */

static sl_schema_t *schema(bool with_version) {
  sl_field_t f[5] = {{"tbl", {SL_TYPE_STRING, 0, 0, false}},
                     {"id", {SL_TYPE_INT64, 0, 0, false}},
                     {"c", {SL_TYPE_INT64, 0, 0, true}},
                     {"v", {SL_TYPE_STRING, 0, 0, true}},
                     {"_sl_version", {SL_TYPE_BYTES, 0, 0, false}}};
  sl_schema_t *s;
  SL_ASSERT_OK(sl_schema_create(f, with_version ? 5 : 4, &s, NULL));
  return s;
}

static void reset(void) {
  pthread_mutex_lock(&lock);
  gate = INT64_MAX;
  src_next = 0;
  n_mlog = 0;
  violations = 0;
  n_processed = 0;
  fail_at = -1;
  memset(view, 0, sizeof(view));
  pthread_mutex_unlock(&lock);
}

static sl_job_t *build(sl_job_config_t *cfg, uint32_t par) {
  cfg->parallelism = par;
  cfg->n_workers = 2;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(cfg, &job, NULL));
  sl_schema_t *in = schema(true);
  sl_field_t of[5] = {{"tbl", {SL_TYPE_STRING, 0, 0, false}},
                      {"id", {SL_TYPE_INT64, 0, 0, false}},
                      {"present", {SL_TYPE_BOOL, 0, 0, false}},
                      {"c", {SL_TYPE_INT64, 0, 0, true}},
                      {"v", {SL_TYPE_STRING, 0, 0, true}}};
  sl_schema_t *out;
  SL_ASSERT_OK(sl_schema_create(of, 5, &out, NULL));
  sl_stream_t *s = sl_job_source(job, "cdc", &list_vt, NULL, in);
  sl_stream_set_parallelism(s, 1);
  const uint32_t pk[] = {1};
  s = sl__cdc_reconcile(s, "reconcile", pk, 1);
  if (s == NULL)
    SL_TEST_FAIL("reconcile: %s", sl_error_message(sl_job_error(job)));
  const char *key[] = {"tbl", "id"};
  s = sl_stream_key_by_fields(s, key, 2);
  sl_process_fns_t fns = {.open = m_open, .process = m_process};
  s = sl_stream_process(s, "materialize", out, &fns, NULL);
  SL_ASSERT_OK(sl_stream_sink(s, "view", &sink_vt, NULL));
  /* The view keeps the last image per key: a key's rows in order. */
  SL_ASSERT_OK(sl_stream_set_sink_parallelism(s, par));
  if (sl_job_error(job))
    SL_TEST_FAIL("build: %s", sl_error_message(sl_job_error(job)));
  sl_schema_unref(in);
  sl_schema_unref(out);
  return job;
}

static void check_view(const char *what) {
  if (violations) SL_TEST_FAIL("%s: %s", what, violation_msg);
  int n_rows = 0;
  for (int t = 0; t < 2; t++)
    for (int id = 0; id < MAX_ID; id++) {
      const img_t *g = &view[t][id], *w = &want[t][id];
      n_rows += g->is_present;
      if (g->is_present != w->is_present ||
          (w->is_present && (g->c != w->c || strcmp(g->v, w->v) != 0)))
        SL_TEST_FAIL("%s: t%d id %d is %s (c %lld, %s), expected %s (c %lld, "
                     "%s)", what, t, id,
                     g->is_present ? "present" : "absent", (long long)g->c,
                     g->v, w->is_present ? "present" : "absent",
                     (long long)w->c, w->v);
    }
  int n_want = 0;
  for (int t = 0; t < 2; t++)
    for (int id = 0; id < MAX_ID; id++) n_want += want[t][id].is_present;
  SL_ASSERT_EQ_INT(n_rows, n_want);
}

/* The rows the materializer got for one key, as "+I c v; -U c v; ...". */
static void key_log(int t, int64_t id, char *buf, size_t n) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < n_mlog && off < n; i++) {
    const logrow_t *r = &mlog[i];
    if (r->tbl != t || r->id != id) continue;
    off += (size_t)snprintf(buf + off, n - off, "%s%s %lld %s",
                            off ? "; " : "", sl_row_kind_name(r->kind),
                            (long long)r->c, r->v);
  }
}

static void expect_log(int t, int64_t id, const char *want_log) {
  char got[512];
  key_log(t, id, got, sizeof(got));
  if (strcmp(got, want_log) != 0)
    SL_TEST_FAIL("t%d id %lld: the reconciler emitted \"%s\", expected "
                 "\"%s\"", t, (long long)id, got, want_log);
}

static void run_history(uint32_t par) {
  history();
  want_history();
  reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  sl_job_t *job = build(&cfg, par);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) SL_TEST_FAIL("job: %s", sl_error_message(err));
  sl_job_destroy(job);
  char what[64];
  snprintf(what, sizeof(what), "parallelism %u", par);
  check_view(what);
  int n_t0 = 0;
  for (int id = 0; id < MAX_ID; id++) n_t0 += view[0][id].is_present;
  SL_ASSERT_EQ_INT(n_t0, 20); /* the seed's 20 rows, 102 among them */
  /* The seed's row: in no snapshot; the binlog's before image finds no
   * row (dropped), the after image appears. */
  expect_log(0, 102, "+I 100 r102");
  /* In both snapshots: the newer replaces the older once; its binlog
   * change is covered by the newer HIGH. */
  expect_log(0, 103, "+I 103 r103; -U 103 r103; +U 106 r103");
  /* t1: the newer snapshot came first; the older and the change are
   * dropped. */
  expect_log(1, 102, "+I 12 s102");
  /* A change covered by the snapshot the key came from: dropped. */
  expect_log(0, 107, "+I 107 r107b");
  expect_log(0, 108, "+I 108 r108b");
  /* Changes after the snapshot the key came from (domain 0 and 1). */
  expect_log(0, 104, "+I 104 r104; -U 104 r104; +U 104 r104b");
  expect_log(0, 101, "+I 101 r101; -U 101 r101; +U 101 r101b");
  /* A delete of a key no snapshot holds: dropped. */
  expect_log(1, 140, "");
  /* One id in two tables: two keys.  t1's 101 read again, unchanged, at
   * a newer HIGH: nothing to emit. */
  expect_log(1, 101, "+I 5 s101");
  /* Past every HIGH: the rows as they came. */
  expect_log(0, 105, "+I 105 r105; -U 105 r105; +U 105 r105b");
  expect_log(0, 120, "+I 120 r120; -D 120 r120");
  expect_log(0, 121, "+I 121 r121");
  expect_log(1, 103, "+I 3 s103");
}

SL_TEST(history_parallelism_1) { run_history(1); }
SL_TEST(history_parallelism_4) { run_history(4); }

/*
 * Pass-through drops state: after t0's first flagged row, rows of t0 that
 * break the source's promise (a binlog row older than the pass-through
 * point) find no state, so a delete of 104 (present, never touched after
 * the flag: the sweep) and of 105 (touched by the flagged update) are
 * dropped.  Parallelism 1: one subtask sees the flagged rows and sweeps.
 */
SL_TEST(pass_through_drops_state) {
  history();
  want_history();
  bin(SL_ROW_DELETE, 0, 104, 104, "r104b", 0, 15, 9, 0, 0);
  bin(SL_ROW_DELETE, 0, 105, 105, "r105b", 0, 15, 9, 1, 0);
  reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  sl_job_t *job = build(&cfg, 1);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) SL_TEST_FAIL("job: %s", sl_error_message(err));
  sl_job_destroy(job);
  check_view("after the probes");
  expect_log(0, 104, "+I 104 r104; -U 104 r104; +U 104 r104b");
  expect_log(0, 105, "+I 105 r105; -U 105 r105; +U 105 r105b");
}

/*
 * Binlog rows ahead of the snapshot rows of their keys, as unaligned
 * checkpoints allow (a snapshot row still queued toward the stage when the
 * gate's checkpoint completed).  t0 chunk A at {0-10}: 1, 2, 3.  0-11
 * deletes 2, 0-12 changes 3, 0-13 changes 1's primary key to 4 (-U of 1,
 * +U of 4).  The late snapshot rows are older than what the binlog left
 * (2 and 1 absent, 3 changed) and stay out.
 */
static void late_snapshot_rows(uint32_t par) {
  static const hv_t h = {1, {0}, {10}};
  n_evs = 0;
  bin(SL_ROW_DELETE, 0, 2, 2, "a2", 0, 11, 0, 0, 0);
  upd(0, 3, 3, "a3", 3, "a3b", 0, 12, 0, 0, 0);
  bin(SL_ROW_UPDATE_BEFORE, 0, 1, 1, "a1", 0, 13, 0, 0, 0);
  bin(SL_ROW_UPDATE_AFTER, 0, 4, 1, "a1", 0, 13, 0, 0, 0);
  snap(0, 1, 1, "a1", &h);
  snap(0, 2, 2, "a2", &h);
  snap(0, 3, 3, "a3", &h);
  memset(want, 0, sizeof(want));
  want_set(0, 3, 3, "a3b");
  want_set(0, 4, 1, "a1");
  reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  sl_job_t *job = build(&cfg, par);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) SL_TEST_FAIL("job: %s", sl_error_message(err));
  sl_job_destroy(job);
  check_view("late snapshot rows");
  expect_log(0, 1, "");
  expect_log(0, 2, "");
  expect_log(0, 3, "+I 3 a3b");
  expect_log(0, 4, "+I 1 a1");
}

SL_TEST(late_snapshot_rows_parallelism_1) { late_snapshot_rows(1); }
SL_TEST(late_snapshot_rows_parallelism_4) { late_snapshot_rows(4); }

/* ---- checkpoints --------------------------------------------------------- */

static uint64_t checkpoint(sl_job_t *job) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  int rc = sl_job_trigger_checkpoint(job, &id, &err);
  sl_error_destroy(err);
  if (rc != SL_OK) return 0;
  return sl_job_wait_checkpoint(job, id, 60000, NULL) == SL_OK ? id : 0;
}

/* What the reconciler emits for the snapshot rows (t0's A 3, t1's B1 1,
 * t0's B 16 + -U/+U of 103, t1's A1 1; the older 102 and A1 read again
 * nothing) and the first 4 binlog rows (+I of 102; 103's move covered). */
static const int64_t rows_at_gate = 3 + 1 + 18 + 1 + 1;

static int64_t processed(void) {
  pthread_mutex_lock(&lock);
  int64_t n = n_processed;
  pthread_mutex_unlock(&lock);
  return n;
}

/*
 * A checkpoint after every snapshot row and the first binlog rows, then a
 * failure two rows later: the job restarts from the checkpoint, and the
 * reconciler's restored state (the snapshot versions and rows) decides
 * the rest exactly as before.
 */
static void restart_mid_binlog(uint32_t par, sl_ckpt_mode_t mode) {
  history();
  want_history();
  reset();
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ckpt", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "reconcile";
  cfg.checkpoint.dir = dir;
  cfg.checkpoint.mode = mode;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  sl_job_t *job = build(&cfg, par);
  set_gate(n_snapshot_evs + 4);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_for_gate();
  while (checkpoint(job) == 0) {
  }
  /* Every snapshot row and the first binlog rows are in the checkpoint:
   * applied (aligned), or some still in flight and stored with it. */
  if (mode == SL_CKPT_ALIGNED) SL_ASSERT_EQ_INT(processed(), rows_at_gate);
  pthread_mutex_lock(&lock);
  fail_at = n_processed + 2;
  pthread_mutex_unlock(&lock);
  set_gate(INT64_MAX);
  sl_error_t *err = NULL;
  int rc = sl_job_wait(job, &err);
  if (rc != SL_OK) SL_TEST_FAIL("job: %s", sl_error_message(err));
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 1);
  sl_job_destroy(job);
  char what[64];
  snprintf(what, sizeof(what), "restarted at parallelism %u (%s)", par,
           mode == SL_CKPT_ALIGNED ? "aligned" : "unaligned");
  check_view(what);
}

SL_TEST(restart_mid_binlog_parallelism_1) {
  restart_mid_binlog(1, SL_CKPT_ALIGNED);
}
SL_TEST(restart_mid_binlog_parallelism_4) {
  restart_mid_binlog(4, SL_CKPT_ALIGNED);
}
SL_TEST(restart_mid_binlog_unaligned_parallelism_4) {
  restart_mid_binlog(4, SL_CKPT_UNALIGNED);
}

/* Stop after a checkpoint in the middle of the binlog, restore it at
 * another parallelism: the reconciler's state moves with its keys. */
static void rescale(uint32_t p1, uint32_t p2) {
  history();
  want_history();
  reset();
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/ckpt", sl_test_dir());
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "reconcile";
  cfg.checkpoint.dir = dir;
  sl_job_t *job = build(&cfg, p1);
  set_gate(n_snapshot_evs + 4);
  SL_ASSERT_OK(sl_job_start(job, NULL));
  wait_for_gate();
  uint64_t id;
  while ((id = checkpoint(job)) == 0) {
  }
  int64_t n_before = processed();
  sl_job_cancel(job);
  SL_ASSERT_EQ_INT(sl_job_wait(job, NULL), SL_ECANCELED);
  sl_job_destroy(job);
  /* Everything before the gate went through before the checkpoint
   * completed, nothing after it. */
  SL_ASSERT_EQ_INT(n_before, rows_at_gate);
  char from[4400];
  snprintf(from, sizeof(from), "%s/%s/chk-%llu", dir, cfg.name,
           (unsigned long long)id);
  cfg.restore_from = from;
  set_gate(INT64_MAX);
  job = build(&cfg, p2);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc != SL_OK) SL_TEST_FAIL("restored job: %s", sl_error_message(err));
  sl_job_destroy(job);
  char what[64];
  snprintf(what, sizeof(what), "restored from parallelism %u at %u", p1, p2);
  check_view(what);
}

SL_TEST(restore_rescaled_1_to_4) { rescale(1, 4); }
SL_TEST(restore_rescaled_4_to_1) { rescale(4, 1); }

/* ---- bad input ----------------------------------------------------------- */

static char *run_failing(uint32_t par) {
  reset();
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  /* A restart would replay the same rows: the failure is final. */
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  sl_job_t *job = build(&cfg, par);
  sl_error_t *err = NULL;
  int rc = sl_job_run(job, &err);
  if (rc == SL_OK) SL_TEST_FAIL("the job succeeded");
  SL_ASSERT_EQ_INT(sl_job_restarts(job), 0);
  char *msg = strdup(sl_error_message(err));
  sl_error_destroy(err);
  sl_job_destroy(job);
  return msg;
}

static void expect_contains(const char *msg, const char *part) {
  if (strstr(msg, part) == NULL)
    SL_TEST_FAIL("message \"%s\" does not contain \"%s\"", msg, part);
}

SL_TEST(incomparable_snapshots_fail) {
  static const hv_t h1 = {2, {0, 1}, {10, 5}}, h2 = {2, {0, 1}, {11, 4}};
  n_evs = 0;
  snap(0, 101, 101, "r101", &h1);
  snap(0, 101, 101, "r101", &h2);
  char *msg = run_failing(2);
  expect_contains(msg, "operator 'reconcile' (subtask ");
  expect_contains(msg, "table 0: a snapshot row at HIGH 0-11,1-4 and one of "
                  "the same primary key at HIGH 0-10,1-5 are neither older "
                  "nor newer");
  free(msg);
}

SL_TEST(malformed_version_fails) {
  static const uint8_t shortv[] = {'B', 0, 0, 0, 1, 0, 0, 0};
  static const uint8_t badkind[] = {'X', 0, 0, 0};
  static const uint8_t unsorted[] = {'S', 0, 0, 2, 1, 0, 0, 0, 5, 0, 0, 0,
                                     0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0,
                                     0, 0, 0, 0};
  struct {
    const uint8_t *p;
    uint32_t len;
    const char *want;
  } cases[] = {
      {shortv, sizeof(shortv), "malformed _sl_version: a binlog version is 8 "
                               "bytes, not 24"},
      {badkind, sizeof(badkind), "unknown version kind 0x58"},
      {unsorted, sizeof(unsorted), "domains are not ascending (0 after 1)"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    n_evs = 0;
    snap(0, 101, 101, "r101", &H_A);
    evs[0].raw = cases[i].p;
    evs[0].raw_len = cases[i].len;
    char *msg = run_failing(1);
    expect_contains(msg, cases[i].want);
    free(msg);
  }
}

SL_TEST(snapshot_row_not_insert_fails) {
  n_evs = 0;
  snap(0, 101, 101, "r101", &H_A);
  evs[0].kind = SL_ROW_DELETE;
  char *msg = run_failing(1);
  expect_contains(msg, "table 0: a snapshot row of kind -D");
  free(msg);
}

SL_TEST(input_without_version_is_refused) {
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_t *in = schema(false);
  sl_stream_t *s = sl_job_source(job, "cdc", &list_vt, NULL, in);
  const uint32_t pk[] = {1};
  SL_ASSERT_TRUE(sl__cdc_reconcile(s, "reconcile", pk, 1) == NULL);
  expect_contains(sl_error_message(sl_job_error(job)),
                  "cdc reconcile 'reconcile': the input of 'cdc' does not end "
                  "in a field _sl_version of type bytes");
  sl_job_destroy(job);
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_schema_unref(in);
  in = schema(true);
  s = sl_job_source(job, "cdc", &list_vt, NULL, in);
  const uint32_t bad_pk[] = {4};
  SL_ASSERT_TRUE(sl__cdc_reconcile(s, "reconcile", bad_pk, 1) == NULL);
  expect_contains(sl_error_message(sl_job_error(job)),
                  "primary key field index 4 is not a field before "
                  "_sl_version");
  sl_job_destroy(job);
  sl_schema_unref(in);
}
