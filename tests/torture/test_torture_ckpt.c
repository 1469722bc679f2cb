/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation torture of checkpoint storage.  Each test runs one operation
 * once without failures to count its allocations N, then once for every
 * k = 1..N with the k-th allocation failing (sl_inject_alloc_fail), and
 * requires a clean end each time: an error with nothing committed, or a
 * success whose result reads back exactly.  A metadata file that was
 * renamed into place, or a state file whose checksum was handed back,
 * must always parse (invariants S2 and S5 of ckpt_store.c).  Leaks are
 * caught by the ASan pass of tools/test.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "core/inject.h"
#include "sl_test.h"
#include "state/state.h"

#define MAXP 16

/* ---- a metadata with every kind of field ----------------------------- */

static void make_meta(sl_ckpt_meta_t *m) {
  memset(m, 0, sizeof(*m));
  m->id = 7;
  m->time_ns = 123456789;
  m->mode = 1;
  m->max_parallelism = MAXP;
  m->job = strdup("torture");
  m->n_ops = 2;
  m->ops = calloc(2, sizeof(sl_ckpt_op_t));
  for (uint32_t i = 0; i < 2; i++) {
    sl_ckpt_op_t *op = &m->ops[i];
    op->uid = strdup(i ? "a-keyed-operator-with-a-long-uid" : "src");
    op->parallelism = op->n_subtasks = 2;
    op->subtasks = calloc(2, sizeof(sl_ckpt_subtask_t));
    for (uint32_t k = 0; k < 2; k++) {
      sl_ckpt_subtask_t *s = &op->subtasks[k];
      s->subtask = k;
      s->kg_start = k * 8;
      s->kg_end = k * 8 + 7;
      s->state_file = strdup(k ? "op-1.state" : "op-0.state");
      s->state_size = 1000 + k;
      s->state_checksum = 0xabcdef00u + k;
      s->n_opstates = 1;
      s->opstates = calloc(1, sizeof(sl_ckpt_opstate_t));
      s->opstates[0].name = strdup("source.positions");
      s->opstates[0].n_entries = 3;
      s->opstates[0].entries = calloc(3, sizeof(sl_ckpt_entry_t));
      for (uint32_t e = 0; e < 3; e++) {
        sl_ckpt_entry_t *en = &s->opstates[0].entries[e];
        en->key = e;
        en->len = 300; /* big enough to make the buffer grow */
        en->bytes = malloc(en->len);
        memset(en->bytes, (int)('a' + e), en->len);
      }
    }
  }
}

static void free_meta(sl_ckpt_meta_t *m) {
  for (uint32_t i = 0; i < m->n_ops; i++) {
    for (uint32_t k = 0; k < m->ops[i].n_subtasks; k++) {
      sl_ckpt_subtask_t *s = &m->ops[i].subtasks[k];
      for (uint32_t e = 0; e < s->opstates[0].n_entries; e++)
        free(s->opstates[0].entries[e].bytes);
      free(s->opstates[0].entries);
      free(s->opstates[0].name);
      free(s->opstates);
      free(s->state_file);
    }
    free(m->ops[i].subtasks);
    free(m->ops[i].uid);
  }
  free(m->ops);
  free(m->job);
}

static void assert_meta_equal(const sl_ckpt_meta_t *a, const sl_ckpt_meta_t *b) {
  SL_ASSERT_EQ_INT(a->id, b->id);
  SL_ASSERT_EQ_INT(a->time_ns, b->time_ns);
  SL_ASSERT_EQ_INT(a->max_parallelism, b->max_parallelism);
  SL_ASSERT_EQ_STR(a->job, b->job);
  SL_ASSERT_EQ_INT(a->n_ops, b->n_ops);
  for (uint32_t i = 0; i < a->n_ops; i++) {
    SL_ASSERT_EQ_STR(a->ops[i].uid, b->ops[i].uid);
    SL_ASSERT_EQ_INT(a->ops[i].n_subtasks, b->ops[i].n_subtasks);
    for (uint32_t k = 0; k < a->ops[i].n_subtasks; k++) {
      const sl_ckpt_subtask_t *x = &a->ops[i].subtasks[k];
      const sl_ckpt_subtask_t *y = &b->ops[i].subtasks[k];
      SL_ASSERT_EQ_STR(x->state_file, y->state_file);
      SL_ASSERT_EQ_INT(x->state_checksum, y->state_checksum);
      SL_ASSERT_EQ_INT(x->n_opstates, y->n_opstates);
      const sl_ckpt_opstate_t *ox = &x->opstates[0], *oy = &y->opstates[0];
      SL_ASSERT_EQ_STR(ox->name, oy->name);
      SL_ASSERT_EQ_INT(ox->n_entries, oy->n_entries);
      for (uint32_t e = 0; e < ox->n_entries; e++) {
        SL_ASSERT_EQ_INT(ox->entries[e].len, oy->entries[e].len);
        SL_ASSERT_TRUE(memcmp(ox->entries[e].bytes, oy->entries[e].bytes,
                              ox->entries[e].len) == 0);
      }
    }
  }
}

static bool exists(const char *dir, const char *name) {
  char p[4400];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  struct stat st;
  return stat(p, &st) == 0;
}

/* Checks invariant S2: a failed write leaves no _metadata (and no
 * temporary file); a successful one reads back equal. */
SL_TEST(checkpoint_write_meta) {
  sl_ckpt_meta_t m;
  make_meta(&m);
  char dir[4300];
  snprintf(dir, sizeof(dir), "%s/chk-7", sl_test_dir());
  SL_ASSERT_EQ_INT(mkdir(dir, 0755), 0);
  sl_inject_alloc_fail(0, false);
  SL_ASSERT_OK(sl__ckpt_write_meta(dir, &m, NULL, NULL));
  uint64_t n = sl_inject_alloc_count();
  SL_ASSERT_TRUE(n > 5);
  uint32_t n_ok = 0;
  for (uint64_t k = 1; k <= n + 1; k++) {
    char cmd[4400];
    snprintf(cmd, sizeof(cmd), "rm -f '%s'/_metadata*", dir);
    SL_ASSERT_EQ_INT(system(cmd), 0);
    sl_error_t *err = NULL;
    sl_inject_alloc_fail(k, false);
    int rc = sl__ckpt_write_meta(dir, &m, NULL, &err);
    uint64_t n_failed = sl_inject_alloc_failed();
    sl_inject_alloc_fail(0, false);
    if (rc != SL_OK) {
      SL_ASSERT_EQ_INT(n_failed, 1);
      if (err == NULL && rc != SL_ENOMEM)
        SL_TEST_FAIL("k=%llu: %s without an error message",
                     (unsigned long long)k, sl_errname(rc));
      if (exists(dir, "_metadata"))
        SL_TEST_FAIL("k=%llu: the write failed (%s) but _metadata is in "
                     "place", (unsigned long long)k, sl_error_message(err));
      sl_error_destroy(err);
      continue;
    }
    n_ok++;
    sl_ckpt_meta_t r;
    sl_error_t *rerr = NULL;
    if (sl__ckpt_read_meta(dir, &r, &rerr) != SL_OK)
      SL_TEST_FAIL("k=%llu: write_meta succeeded but the committed "
                   "_metadata does not read back: %s",
                   (unsigned long long)k, sl_error_message(rerr));
    assert_meta_equal(&m, &r);
    sl__ckpt_meta_clear(&r);
  }
  SL_ASSERT_TRUE(n_ok >= 1); /* k = n + 1 fails nothing */
  free_meta(&m);
}

/* ---- state files ----------------------------------------------------- */

typedef struct got_s {
  uint32_t n_entries, n_timers;
  uint64_t sum;
} got_t;

static int on_states(void *user, const sl_state_desc_t *d,
                     const uint64_t *fps, uint32_t n) {
  (void)fps;
  (void)user;
  if (n != 2 || strcmp(d[0].name, "count") || strcmp(d[1].name, "seen"))
    return SL_ECORRUPT;
  return SL_OK;
}

static int on_entry(void *user, uint32_t state, uint32_t kg,
                    const uint8_t *key, uint32_t klen, uint32_t nslen,
                    const uint8_t *val, uint32_t vlen) {
  got_t *g = user;
  (void)state;
  (void)nslen;
  if (sl_key_group(key, klen - nslen, MAXP) != kg) return SL_ECORRUPT;
  g->n_entries++;
  for (uint32_t i = 0; i < vlen; i++) g->sum += val[i];
  return SL_OK;
}

static int on_timer(void *user, uint32_t kg, uint8_t domain, int64_t ts,
                    const uint8_t *key, uint32_t klen) {
  got_t *g = user;
  (void)kg;
  (void)domain;
  (void)key;
  (void)klen;
  g->n_timers++;
  g->sum += (uint64_t)ts;
  return SL_OK;
}

static sl_kstate_t *make_state(void) {
  sl_kstate_t *be;
  SL_ASSERT_OK(sl__kstate_create(MAXP, 0, MAXP - 1, &be));
  sl_state_desc_t d1 = {"count", SL_STATE_VALUE, 1, NULL, NULL};
  sl_state_desc_t d2 = {"seen", SL_STATE_VALUE, 3, NULL, NULL};
  sl_state_t *s1, *s2;
  SL_ASSERT_OK(sl__kstate_register(be, &d1, &s1, NULL));
  SL_ASSERT_OK(sl__kstate_register(be, &d2, &s2, NULL));
  for (int i = 0; i < 200; i++) {
    char key[32];
    int n = snprintf(key, sizeof(key), "key-%d", i);
    SL_ASSERT_OK(sl__kstate_set_key(be, key, (uint32_t)n,
                                    sl__key_hash64(key, (size_t)n)));
    SL_ASSERT_OK(sl_value_put_i64(s1, i));
    if (i % 3 == 0) SL_ASSERT_OK(sl_value_put(s2, key, (size_t)n));
  }
  return be;
}

static void make_timers(sl_ckpt_timer_t *tm, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    char key[32];
    int len = snprintf(key, sizeof(key), "key-%u", i);
    tm[i].key = (uint8_t *)strdup(key);
    tm[i].len = (uint32_t)len;
    tm[i].kg = sl_key_group(key, (size_t)len, MAXP);
    tm[i].ts = 1000 + i;
    tm[i].domain = (uint8_t)(i & 1);
  }
}

static void read_back(const char *path, uint64_t size, uint64_t ck,
                      got_t *g, uint64_t k) {
  memset(g, 0, sizeof(*g));
  sl_ckpt_reader_t rd = {on_states, on_entry, on_timer, g};
  sl_error_t *err = NULL;
  if (sl__ckpt_read_state(path, size, ck, 0, MAXP - 1, &rd, &err) != SL_OK)
    SL_TEST_FAIL("k=%llu: write_state acknowledged '%s' (size %llu, "
                 "checksum %016llx) but it does not read back: %s",
                 (unsigned long long)k, path, (unsigned long long)size,
                 (unsigned long long)ck, sl_error_message(err));
}

/* Checks invariant S5: a state file whose size and checksum were handed
 * back (what a task acknowledges) always reads back equal. */
SL_TEST(checkpoint_write_state) {
  sl_kstate_t *be = make_state();
  sl_ckpt_timer_t tm[10];
  make_timers(tm, 10);
  char path[4300];
  snprintf(path, sizeof(path), "%s/op-0.state", sl_test_dir());
  sl_kstate_snap_t *snap;
  SL_ASSERT_OK(sl__kstate_snapshot(be, &snap));
  uint64_t size, ck;
  sl_inject_alloc_fail(0, false);
  SL_ASSERT_OK(sl__ckpt_write_state(path, snap, 0, MAXP - 1, tm, 10, &size,
                                    &ck, NULL));
  uint64_t n = sl_inject_alloc_count();
  got_t want;
  read_back(path, size, ck, &want, 0);
  SL_ASSERT_EQ_INT(want.n_entries, 200 + 67);
  SL_ASSERT_EQ_INT(want.n_timers, 10);
  for (uint64_t k = 1; k <= n + 1; k++) {
    unlink(path);
    sl_error_t *err = NULL;
    uint64_t s2 = 0, c2 = 0;
    sl_inject_alloc_fail(k, false);
    int rc = sl__ckpt_write_state(path, snap, 0, MAXP - 1, tm, 10, &s2, &c2,
                                  &err);
    sl_inject_alloc_fail(0, false);
    if (rc != SL_OK) {
      sl_error_destroy(err);
      continue;
    }
    got_t g;
    read_back(path, s2, c2, &g, k);
    SL_ASSERT_EQ_INT(g.n_entries, want.n_entries);
    SL_ASSERT_EQ_INT(g.n_timers, want.n_timers);
    SL_ASSERT_EQ_INT(g.sum, want.sum);
  }
  sl__kstate_snap_release(snap);
  for (uint32_t i = 0; i < 10; i++) free(tm[i].key);
  sl__kstate_destroy(be);
}

/* ---- restore --------------------------------------------------------- */

typedef struct restore_s {
  sl_kstate_t *be;
  sl_state_t *st[2];
  uint32_t n_entries, n_timers;
} restore_t;

static int r_states(void *user, const sl_state_desc_t *d,
                    const uint64_t *fps, uint32_t n) {
  restore_t *r = user;
  for (uint32_t i = 0; i < n && i < 2; i++) {
    int rc = sl__kstate_restore_state(r->be, &d[i], fps ? &fps[i] : NULL,
                                      &r->st[i], NULL);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static int r_entry(void *user, uint32_t state, uint32_t kg,
                   const uint8_t *key, uint32_t klen, uint32_t nslen,
                   const uint8_t *val, uint32_t vlen) {
  restore_t *r = user;
  int rc = sl__kstate_restore_entry(r->st[state], kg, key, klen, nslen, val,
                                    vlen);
  if (rc == SL_OK) r->n_entries++;
  return rc;
}

static int r_timer(void *user, uint32_t kg, uint8_t domain, int64_t ts,
                   const uint8_t *key, uint32_t klen) {
  restore_t *r = user;
  (void)kg;
  (void)domain;
  (void)ts;
  (void)key;
  (void)klen;
  r->n_timers++;
  return SL_OK;
}

/* Load the newest checkpoint and restore its state file; SL_OK with the
 * restored counts, or an error.  Everything is freed either way. */
static int restore_once(const char *jobdir, uint64_t *out_id,
                        restore_t *out_counts) {
  sl_ckpt_meta_t m;
  sl_error_t *err = NULL;
  int rc = sl__ckpt_load_latest(jobdir, &m, &err);
  if (rc != SL_OK) {
    sl_error_destroy(err);
    return rc;
  }
  *out_id = m.id;
  restore_t r;
  memset(&r, 0, sizeof(r));
  rc = sl__kstate_create(MAXP, 0, MAXP - 1, &r.be);
  if (rc == SL_OK) {
    const sl_ckpt_op_t *op = sl__ckpt_meta_op(&m, "op");
    const sl_ckpt_subtask_t *s = &op->subtasks[0];
    sl_acc_t path;
    sl__acc_init(&path);
    sl__acc_printf(&path, "%s/%s", m.dir, s->state_file);
    rc = sl__acc_status(&path);
    sl_ckpt_reader_t rd = {r_states, r_entry, r_timer, &r};
    if (rc == SL_OK)
      rc = sl__ckpt_read_state((char *)path.b.data, s->state_size,
                               s->state_checksum, 0, MAXP - 1, &rd, &err);
    sl__acc_close(&path);
    sl__kstate_destroy(r.be);
  }
  sl_error_destroy(err);
  sl__ckpt_meta_clear(&m);
  r.be = NULL;
  *out_counts = r;
  return rc;
}

/* Two complete checkpoints; every allocation failure while restoring must
 * give an error, never a silent fall-back to the older checkpoint (only
 * corruption may fall back) and never a partial restore reported as
 * success. */
SL_TEST(checkpoint_restore) {
  char jobdir[4300];
  snprintf(jobdir, sizeof(jobdir), "%s/job", sl_test_dir());
  sl_kstate_t *be = make_state();
  sl_ckpt_timer_t tm[10];
  make_timers(tm, 10);
  for (uint64_t id = 1; id <= 2; id++) {
    char dir[4400], path[4500];
    snprintf(dir, sizeof(dir), "%s/chk-%llu", jobdir, (unsigned long long)id);
    SL_ASSERT_OK(sl__ckpt_mkdirs(dir, NULL));
    snprintf(path, sizeof(path), "%s/op-0.state", dir);
    sl_kstate_snap_t *snap;
    SL_ASSERT_OK(sl__kstate_snapshot(be, &snap));
    sl_ckpt_meta_t m;
    memset(&m, 0, sizeof(m));
    m.id = id;
    m.max_parallelism = MAXP;
    m.job = "torture";
    sl_ckpt_subtask_t sub;
    memset(&sub, 0, sizeof(sub));
    sub.kg_start = 0;
    sub.kg_end = MAXP - 1;
    sub.state_file = "op-0.state";
    SL_ASSERT_OK(sl__ckpt_write_state(path, snap, 0, MAXP - 1, tm, 10,
                                      &sub.state_size, &sub.state_checksum,
                                      NULL));
    sl__kstate_snap_release(snap);
    sl_ckpt_op_t op = {"op", 1, &sub, 1};
    m.ops = &op;
    m.n_ops = 1;
    SL_ASSERT_OK(sl__ckpt_write_meta(dir, &m, NULL, NULL));
  }
  for (uint32_t i = 0; i < 10; i++) free(tm[i].key);
  sl__kstate_destroy(be);

  uint64_t id = 0;
  restore_t want;
  sl_inject_alloc_fail(0, false);
  SL_ASSERT_OK(restore_once(jobdir, &id, &want));
  uint64_t n = sl_inject_alloc_count();
  SL_ASSERT_EQ_INT(id, 2);
  SL_ASSERT_EQ_INT(want.n_entries, 200 + 67);
  SL_ASSERT_EQ_INT(want.n_timers, 10);
  for (uint64_t k = 1; k <= n + 1; k++) {
    restore_t got;
    id = 0;
    sl_inject_alloc_fail(k, false);
    int rc = restore_once(jobdir, &id, &got);
    sl_inject_alloc_fail(0, false);
    if (rc != SL_OK) {
      if (rc != SL_ENOMEM)
        SL_TEST_FAIL("k=%llu: restore failed with %s, not SL_ENOMEM",
                     (unsigned long long)k, sl_errname(rc));
      continue;
    }
    if (id != 2)
      SL_TEST_FAIL("k=%llu: an allocation failure made the restore fall "
                   "back to checkpoint %llu", (unsigned long long)k,
                   (unsigned long long)id);
    SL_ASSERT_EQ_INT(got.n_entries, want.n_entries);
    SL_ASSERT_EQ_INT(got.n_timers, want.n_timers);
  }
}

/* ---- the row codec --------------------------------------------------- */

static int codec_once(void) {
  sl_field_t f[5] = {{"id", {SL_TYPE_INT64, 0, 0, false}},
                     {"name", {SL_TYPE_STRING, 0, 0, true}},
                     {"blob", {SL_TYPE_BYTES, 0, 0, true}},
                     {"x", {SL_TYPE_FLOAT64, 0, 0, true}},
                     {"n", {SL_TYPE_INT32, 0, 0, true}}};
  sl_schema_t *schema = NULL, *schema2 = NULL;
  sl_row_builder_t b, b2;
  memset(&b, 0, sizeof(b));
  memset(&b2, 0, sizeof(b2));
  sl_bytes_t enc, senc;
  sl_bytes_init(&enc);
  sl_bytes_init(&senc);
  sl_error_t *err = NULL;
  int rc = sl_schema_create(f, 5, &schema, &err);
  if (rc == SL_OK) rc = sl_schema_encode(schema, &senc);
  size_t used = 0;
  if (rc == SL_OK)
    rc = sl_schema_decode(senc.data, senc.len, &used, &schema2, &err);
  if (rc == SL_OK) rc = sl_row_builder_init(&b, schema);
  char big[3000];
  memset(big, 'q', sizeof(big));
  for (int row = 0; rc == SL_OK && row < 20; row++) {
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    sl_row_builder_set_i64(&b, 0, row);
    rc = sl_row_builder_set_str(&b, 1, big, (uint32_t)(row * 150));
    if (rc == SL_OK) rc = sl_row_builder_set_str(&b, 2, "\0\1\2", 3);
    sl_row_builder_set_f64(&b, 3, row * 0.5);
    if (row % 2) sl_row_builder_set_null(&b, 4);
    else sl_row_builder_set_i32(&b, 4, -row);
    sl_row_t r;
    if (rc == SL_OK) rc = sl_row_builder_finish(&b, &r, &err);
    enc.len = 0;
    if (rc == SL_OK) rc = sl_row_encode_compact(&r, &enc);
    if (rc == SL_OK && b2.schema == NULL)
      rc = sl_row_builder_init(&b2, schema2);
    size_t consumed = 0;
    if (rc == SL_OK)
      rc = sl_row_decode_compact(&b2, enc.data, enc.len, &consumed);
    sl_row_t r2;
    if (rc == SL_OK) rc = sl_row_builder_finish(&b2, &r2, &err);
    if (rc == SL_OK) {
      SL_ASSERT_EQ_INT(consumed, enc.len);
      SL_ASSERT_EQ_INT(sl_row_get_i64(&r2, 0), row);
      SL_ASSERT_EQ_INT(sl_row_get_str(&r2, 1).len, row * 150);
      SL_ASSERT_EQ_INT(sl_row_is_null(&r2, 4), row % 2);
    }
  }
  if (rc != SL_OK && rc != SL_ENOMEM)
    SL_TEST_FAIL("row codec failed with %s: %s", sl_errname(rc),
                 sl_error_message(err));
  sl_error_destroy(err);
  sl_row_builder_close(&b);
  sl_row_builder_close(&b2);
  sl_bytes_close(&enc);
  sl_bytes_close(&senc);
  sl_schema_unref(schema);
  sl_schema_unref(schema2);
  return rc;
}

SL_TEST(row_codec) {
  sl_inject_alloc_fail(0, false);
  SL_ASSERT_OK(codec_once());
  uint64_t n = sl_inject_alloc_count();
  SL_ASSERT_TRUE(n > 5);
  for (uint64_t k = 1; k <= n + 1; k++) {
    sl_inject_alloc_fail(k, false);
    codec_once();
    sl_inject_alloc_fail(0, false);
  }
  /* And with every allocation from the k-th on failing. */
  for (uint64_t k = 1; k <= n + 1; k++) {
    sl_inject_alloc_fail(k, true);
    codec_once();
    sl_inject_alloc_fail(0, false);
  }
}
