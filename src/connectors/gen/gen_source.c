/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The generator source.  Record i of split s is a pure function of
 * (seed, s, i): a counter-based hash gives its key (uniform, or Zipf by
 * rejection-inversion sampling), amount and payload.  So a reader can start
 * at any position and replay exactly what it produced before, which is what
 * checkpoints need.  The number of splits is fixed by the configuration
 * (SL_GEN_DEFAULT_SPLITS unless set), never by the parallelism, so the data
 * is the same at any parallelism.  A split's id names the seed, its index
 * and the number of splits; its position is the next record index.  The
 * source's split enumerator (below) hands the splits out.  With a
 * rate, each split emits on a fixed schedule from the time its reader first
 * polls; it never bursts to catch up more than it is behind.  Event times
 * that would leave int64 are refused at create time (bounded count) or fail
 * the job at the record that reaches them (unbounded).  See
 * src/connectors/README.md.
 */
#include <math.h>
#include <string.h>

#include "sluice/sluice.h"

#define PAYLOAD_POOL (64u * 1024u)

typedef struct gen_s {
  sl_gen_config_t cfg;
  uint32_t n_splits;
  char **ids; /* split s's stable id, "seed=<seed>/split=<s>/<n_splits>" */
  char *pool; /* random letters; a payload is a slice at a random offset */
  uint64_t salt; /* mix64(seed) */
  /* Zipf sampler constants (Hoermann & Derflinger, rejection-inversion). */
  double zh_x1, zh_n, zs;
} gen_t;

typedef struct split_s {
  uint32_t idx;   /* the reader's index of the split (sl_split_init_t) */
  uint32_t id;    /* the split number s, 0..n_splits-1 (from its id) */
  const char *name; /* stable id, borrowed from sl_split_init_t */
  uint64_t next;  /* next record index */
  uint64_t end;   /* UINT64_MAX: unbounded */
  uint64_t start; /* index at the first poll (rate schedule) */
  int64_t t0;     /* time of the first poll, 0 before */
} split_t;

typedef struct reader_s {
  const gen_t *g;
  split_t *splits;
  uint32_t n_splits, cap_splits;
  uint32_t cur;
  uint32_t cols[6]; /* column bit -> field index */
  bool has_rate;
  double rate_split;
} reader_t;

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/*
 * The random word number w of record (s, i): splitmix64, i.e. the mix64
 * finalizer over a counter unique to (s, i, w), offset by the seed.
 * Splits are 2^40 records apart; records 8 words apart.
 */
static inline uint64_t rnd(uint64_t salt, uint32_t s, uint64_t i, uint32_t w) {
  uint64_t ctr = ((uint64_t)s << 43) + (i << 3) + w;
  return mix64(salt + ctr * 0x9e3779b97f4a7c15ull);
}

static inline double unit(uint64_t r) {
  return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}

static double helper1(double x) { /* log1p(x)/x */
  return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x / 3.0);
}
static double helper2(double x) { /* expm1(x)/x */
  return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0);
}
static double zh(double e, double x) {
  double lx = log(x);
  return helper2((1.0 - e) * lx) * lx;
}
static double zh_small(double e, double x) { return exp(-e * log(x)); }
static double zh_inv(double e, double x) {
  double t = x * (1.0 - e);
  if (t < -1.0) t = -1.0;
  return exp(helper1(t) * x);
}

/* r: the record's first random word, used by the uniform case. */
static uint64_t gen_key(const gen_t *g, uint32_t s, uint64_t i, uint64_t r) {
  uint64_t n = g->cfg.keys;
  if (g->cfg.skew == SL_GEN_UNIFORM)
    return (uint64_t)(((unsigned __int128)r * n) >> 64);
  double e = g->cfg.zipf_exponent;
  for (uint32_t w = 1;; w++) {
    double u = g->zh_n + unit(rnd(g->salt, s, i, w)) * (g->zh_x1 - g->zh_n);
    double x = zh_inv(e, u);
    double k = floor(x + 0.5);
    if (k < 1) k = 1;
    else if (k > (double)n) k = (double)n;
    if (k - x <= g->zs || u >= zh(e, k + 0.5) - zh_small(e, k))
      return (uint64_t)k - 1;
  }
}

/* The number of the split whose id is id, or UINT32_MAX. */
static uint32_t find_split(const gen_t *g, const char *id) {
  for (uint32_t s = 0; s < g->n_splits; s++)
    if (strcmp(g->ids[s], id) == 0) return s;
  return UINT32_MAX;
}

static uint64_t split_count(const gen_t *g, uint32_t s) {
  if (g->cfg.count == 0) return UINT64_MAX;
  uint64_t base = g->cfg.count / g->n_splits;
  return base + (s < g->cfg.count % g->n_splits ? 1 : 0);
}

/* Event time of record i, false when it leaves int64. */
static bool event_time(const gen_t *g, uint64_t i, int64_t *out) {
  int64_t d;
  if (i > INT64_MAX || __builtin_mul_overflow((int64_t)i, g->cfg.time_step_us,
                                              &d))
    return false;
  return !__builtin_add_overflow(g->cfg.start_time_us, d, out);
}

static void reader_close(void *r) {
  reader_t *rd = r;
  if (rd == NULL) return;
  sl_free(rd->splits);
  sl_free(rd);
}

/* Add the splits si[0..n) to the reader, checking restored positions
 * against the configuration as it is now. */
static int add_splits(reader_t *rd, const sl_split_init_t *si, uint32_t n,
                      sl_error_t **out_err) {
  const gen_t *g = rd->g;
  if (rd->n_splits + n > rd->cap_splits) {
    uint32_t cap = rd->cap_splits ? rd->cap_splits : 4;
    while (cap < rd->n_splits + n) cap *= 2;
    split_t *sp = sl_realloc(rd->splits, cap * sizeof(*sp));
    if (sp == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    rd->splits = sp;
    rd->cap_splits = cap;
  }
  for (uint32_t i = 0; i < n; i++) {
    split_t *sp = &rd->splits[rd->n_splits];
    memset(sp, 0, sizeof(*sp));
    sp->idx = si[i].split;
    sp->name = si[i].id;
    /* The enumerator checked the ids of a restored checkpoint; a split
     * that is not this generator's is a bug of whoever handed it out. */
    sp->id = find_split(g, si[i].id);
    if (sp->id == UINT32_MAX) {
      int rc = sl_error_set(out_err, SL_EINVAL,
                            "generator split '%s' is not a split of this "
                            "generator (seed %llu, %u splits)",
                            si[i].id, (unsigned long long)g->cfg.seed,
                            g->n_splits);
      if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
      return rc;
    }
    sp->end = split_count(g, sp->id);
    if (si[i].position && si[i].position_len != 8)
      return sl_error_set(out_err, SL_ECORRUPT,
                          "generator split '%s': the stored position has %zu "
                          "bytes, expected 8",
                          si[i].id, si[i].position_len);
    if (si[i].position) {
      sp->next = sl_load_u64le(si[i].position);
      if (sp->next > sp->end) {
        int rc = sl_error_set(out_err, SL_EINVAL,
                              "generator split '%s': the checkpoint's "
                              "position is record %llu, but the split now "
                              "has only %llu records (count %llu over %u "
                              "splits); was count lowered?",
                              si[i].id, (unsigned long long)sp->next,
                              (unsigned long long)sp->end,
                              (unsigned long long)g->cfg.count, g->n_splits);
        if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
        return rc;
      }
    }
    rd->n_splits++;
  }
  return SL_OK;
}

static int reader_open(void *ctx, const sl_reader_init_t *init, void **out,
                       sl_error_t **out_err) {
  const gen_t *g = ctx;
  reader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  rd->g = g;
  int rc = add_splits(rd, init->splits, init->n_splits, out_err);
  if (rc != SL_OK) {
    reader_close(rd);
    return rc;
  }
  uint32_t f = 0;
  for (uint32_t b = 0; b < 6; b++)
    rd->cols[b] = (g->cfg.columns & (1u << b)) ? f++ : UINT32_MAX;
  rd->has_rate = g->cfg.rate > 0;
  rd->rate_split = g->cfg.rate / g->n_splits;
  *out = rd;
  return SL_OK;
}

static int reader_add_splits(void *r, const sl_split_init_t *splits,
                             uint32_t n, sl_error_t **out_err) {
  return add_splits(r, splits, n, out_err);
}

/* Build and emit record i of split sp; returns sl_source_emit's answer.
 * The event time was checked by the caller. */
static bool emit_one(reader_t *rd, sl_source_out_t *out, const split_t *sp,
                     uint64_t i, int64_t ts) {
  const gen_t *g = rd->g;
  sl_row_builder_t *b = sl_source_builder(out);
  const uint32_t *c = rd->cols;
  /* One random word per record: the key takes its high bits (multiply-
   * shift), the amount and the payload offset its low bits. */
  uint64_t r = rnd(g->salt, sp->id, i, 0);
  if (c[0] != UINT32_MAX) sl_row_builder_set_i64(b, c[0], (int64_t)i);
  if (c[1] != UINT32_MAX) sl_row_builder_set_i32(b, c[1], (int32_t)sp->id);
  if (c[2] != UINT32_MAX)
    sl_row_builder_set_i64(b, c[2], (int64_t)gen_key(g, sp->id, i, r));
  if (c[3] != UINT32_MAX) {
    int64_t v = (int64_t)((uint32_t)r % 2000u) - 1000;
    sl_row_builder_set_i64(b, c[3], v >= 0 ? v + 1 : v);
  }
  if (c[4] != UINT32_MAX) sl_row_builder_set_i64(b, c[4], ts);
  if (c[5] != UINT32_MAX) {
    uint32_t off = (uint32_t)(r >> 8) % (PAYLOAD_POOL - g->cfg.payload_size + 1);
    sl_row_builder_set_str(b, c[5], g->pool + off, g->cfg.payload_size);
  }
  return sl_source_emit_builder(out, NULL);
}

/* The time at which record `next` of a rate-limited split is due,
 * saturated (a tiny rate puts it beyond the end of time). */
static int64_t due_at(const reader_t *rd, const split_t *sp) {
  double dt = (double)(sp->next - sp->start) * 1e9 / rd->rate_split;
  if (!(dt < 9.2e18) || (double)sp->t0 + dt >= 9.2e18) return INT64_MAX;
  return sp->t0 + (int64_t)dt;
}

static int reader_poll(void *r, sl_source_out_t *out, sl_error_t **out_err) {
  reader_t *rd = r;
  const gen_t *g = rd->g;
  bool has_ts = rd->cols[4] != UINT32_MAX;
  int64_t now = rd->has_rate ? sl_source_now(out) : 0;
  int64_t earliest_due = INT64_MAX;
  uint32_t n_done = 0;
  for (uint32_t k = 0; k < rd->n_splits; k++) {
    split_t *sp = &rd->splits[(rd->cur + k) % rd->n_splits];
    if (sp->next >= sp->end) {
      sl_source_split_finished(out, sp->idx);
      n_done++;
      continue;
    }
    sl_source_set_split(out, sp->idx);
    uint64_t limit = sp->end;
    if (rd->has_rate) {
      if (sp->t0 == 0) {
        sp->t0 = now;
        sp->start = sp->next;
      }
      /* Records due by now: those with (i - start) / rate <= now - t0.
       * Saturating: at a rate beyond what a double of records can count
       * (rate: 1e20), everything left is due. */
      double due = (double)(now - sp->t0) * 1e-9 * rd->rate_split;
      if (due < (double)(limit - sp->start) - 1.0) {
        uint64_t n_due = (uint64_t)due + 1;
        if (sp->start + n_due < limit) limit = sp->start + n_due;
      }
      if (sp->next >= limit) {
        int64_t t = due_at(rd, sp);
        if (t < earliest_due) earliest_due = t;
        continue;
      }
    }
    /* A batch per split, then the next split. */
    uint64_t stop = limit - sp->next > 1024 ? sp->next + 1024 : limit;
    while (sp->next < stop) {
      uint64_t i = sp->next;
      int64_t ts = 0;
      if (has_ts && !event_time(g, i, &ts))
        return sl_error_set(out_err, SL_EOVERFLOW,
                            "generator split '%s': the event time of record "
                            "%llu, start_time_us %lld + %llu * time_step_us "
                            "%lld, does not fit in int64",
                            sp->name, (unsigned long long)i,
                            (long long)g->cfg.start_time_us,
                            (unsigned long long)i,
                            (long long)g->cfg.time_step_us);
      sp->next++;
      if (!emit_one(rd, out, sp, i, ts)) {
        rd->cur = (rd->cur + k) % rd->n_splits;
        return SL_POLL_MORE;
      }
    }
    rd->cur = (rd->cur + k + 1) % rd->n_splits;
    return SL_POLL_MORE;
  }
  if (n_done == rd->n_splits) return SL_POLL_END;
  sl_source_wait_until(out, earliest_due);
  return SL_POLL_WAIT;
}

static int reader_position(void *r, uint32_t split, sl_bytes_t *out) {
  reader_t *rd = r;
  for (uint32_t k = 0; k < rd->n_splits; k++) {
    if (rd->splits[k].idx != split) continue;
    return sl_bytes_append_u64le(out, rd->splits[k].next);
  }
  return SL_ENOTFOUND;
}

static void gen_destroy(void *ctx) {
  gen_t *g = ctx;
  if (g == NULL) return;
  for (uint32_t s = 0; g->ids && s < g->n_splits; s++) sl_free(g->ids[s]);
  sl_free(g->ids);
  sl_free(g->pool);
  sl_free(g);
}

/* ------------------------------------------------------------------ */
/*
 * The generator's enumerator (sl_connector.h; it runs on the source's
 * enumerator thread).  The splits are fixed by the configuration, so it
 * discovers them once, at the start, and hands split s to reader
 * s % parallelism right away (the same placement whatever the order in
 * which readers open, and before the first checkpoint's enumerator
 * snapshot, which follows discovery on that thread).  Splits that come
 * back (a reader reset to a checkpoint taken before it got them, or a
 * restore at another parallelism) go out again the same way.  A reader
 * that asks for more hears "no more splits": the generator is bounded by
 * its splits (an unbounded count makes each split endless instead).
 *
 * State (one codec, genum_snapshot/genum_decode): u8 version 1, u64le
 * the number of pending splits, then per pending split u64le id length,
 * id, u64le position length, position (empty: the start).  Pending splits
 * are those not yet handed out; the others are in the readers' states
 * (or finished).  Ids, not numbers, so that a restore with another seed
 * or split count names the split it cannot place.
 */

typedef struct genum_s {
  const gen_t *g;
  uint32_t par;
  bool *is_pending; /* per split number */
  uint8_t **pos;    /* per split number: where to start (NULL: start) */
  size_t *pos_len;
  uint64_t restored; /* the checkpoint restored from, for messages */
  const char *uid;   /* borrowed from the init, only during create */
} genum_t;

static void genum_close(void *en) {
  genum_t *e = en;
  if (e == NULL) return;
  for (uint32_t s = 0; e->pos && s < e->g->n_splits; s++) sl_free(e->pos[s]);
  sl_free(e->pos);
  sl_free(e->pos_len);
  sl_free(e->is_pending);
  sl_free(e);
}

/* Split s is pending again, starting at pos[0..len) (copied). */
static int genum_set_pending(genum_t *e, uint32_t s, const uint8_t *pos,
                             size_t len) {
  uint8_t *p = NULL;
  if (len) {
    if ((p = sl_malloc(len)) == NULL) return SL_ENOMEM;
    memcpy(p, pos, len);
  }
  sl_free(e->pos[s]);
  e->pos[s] = p;
  e->pos_len[s] = len;
  e->is_pending[s] = true;
  return SL_OK;
}

/* The message of a restore whose split the configuration no longer has:
 * the same words as for a source without an enumerator. */
static int genum_missing(const genum_t *e, const char *id, size_t id_len,
                         sl_error_t **out_err) {
  int rc = sl_error_set(out_err, SL_EINVAL,
                        "checkpoint %llu holds a position of split '%.*s' of "
                        "source '%s', which the source no longer has (%u "
                        "splits now; a file removed or renamed, another "
                        "generator seed or split count?); its remaining "
                        "records would be lost",
                        (unsigned long long)e->restored, (int)id_len, id,
                        e->uid ? e->uid : "?", e->g->n_splits);
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

static uint32_t find_split_n(const gen_t *g, const char *id, size_t len) {
  for (uint32_t s = 0; s < g->n_splits; s++)
    if (strlen(g->ids[s]) == len && memcmp(g->ids[s], id, len) == 0)
      return s;
  return UINT32_MAX;
}

static int genum_decode(genum_t *e, const uint8_t *p, size_t len,
                        sl_error_t **out_err) {
  const uint8_t *end = p + len;
  if (len < 9 || p[0] != 1) goto corrupt;
  uint64_t n = sl_load_u64le(p + 1);
  p += 9;
  if (n > (uint64_t)(end - p) / 16) goto corrupt;
  for (uint64_t i = 0; i < n; i++) {
    if (end - p < 8) goto corrupt;
    uint64_t il = sl_load_u64le(p);
    p += 8;
    if (il == 0 || il > (uint64_t)(end - p)) goto corrupt;
    const char *id = (const char *)p;
    p += il;
    if (end - p < 8) goto corrupt;
    uint64_t pl = sl_load_u64le(p);
    p += 8;
    if (pl > (uint64_t)(end - p)) goto corrupt;
    uint32_t s = find_split_n(e->g, id, (size_t)il);
    if (s == UINT32_MAX) return genum_missing(e, id, (size_t)il, out_err);
    if (e->is_pending[s]) goto corrupt;
    if (genum_set_pending(e, s, p, (size_t)pl) != SL_OK)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    p += pl;
  }
  if (p == end) return SL_OK;
corrupt:
  return sl_error_set(out_err, SL_ECORRUPT, "the generator enumerator's "
                      "state in checkpoint %llu is corrupt",
                      (unsigned long long)e->restored);
}

static int genum_create(void *ctx, const sl_enum_init_t *init, void **out,
                        sl_error_t **out_err) {
  const gen_t *g = ctx;
  genum_t *e = sl_calloc(1, sizeof(*e));
  if (e) {
    e->g = g;
    e->is_pending = sl_calloc(g->n_splits, sizeof(bool));
    e->pos = sl_calloc(g->n_splits, sizeof(uint8_t *));
    e->pos_len = sl_calloc(g->n_splits, sizeof(size_t));
  }
  if (e == NULL || !e->is_pending || !e->pos || !e->pos_len) {
    genum_close(e);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  e->par = init->parallelism;
  e->restored = init->restored_checkpoint_id;
  e->uid = init->source_uid;
  int rc = SL_OK;
  if (init->state) {
    rc = genum_decode(e, init->state, init->state_len, out_err);
  } else {
    for (uint32_t s = 0; s < g->n_splits; s++) e->is_pending[s] = true;
  }
  /* The readers' splits stay with them or come back through
   * add_splits_back; each must still be one of this generator's. */
  for (uint32_t i = 0; rc == SL_OK && i < init->n_restored_splits; i++) {
    const char *id = init->restored_splits[i].id;
    uint32_t s = find_split(g, id);
    if (s == UINT32_MAX) rc = genum_missing(e, id, strlen(id), out_err);
    else e->is_pending[s] = false;
  }
  e->uid = NULL;
  if (rc != SL_OK) {
    genum_close(e);
    return rc;
  }
  *out = e;
  return SL_OK;
}

/* Hand every pending split s to reader s % parallelism. */
static int genum_serve(genum_t *e, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  for (uint32_t s = 0; s < e->g->n_splits; s++) {
    if (!e->is_pending[s]) continue;
    sl_split_t sp = {e->g->ids[s], e->pos[s], e->pos_len[s]};
    int rc = sl_enum_assign(ec, s % e->par, &sp);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "cannot assign generator split "
                          "'%s': %s", e->g->ids[s], sl_strerror(rc));
    e->is_pending[s] = false;
    sl_free(e->pos[s]);
    e->pos[s] = NULL;
    e->pos_len[s] = 0;
  }
  return SL_OK;
}

static int genum_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  return genum_serve(en, ec, out_err);
}

static int genum_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                         sl_error_t **out_err) {
  int rc = genum_serve(en, ec, out_err);
  if (rc == SL_OK && (rc = sl_enum_signal_no_more_splits(ec, subtask)) !=
                         SL_OK)
    return sl_error_set(out_err, rc, "cannot answer reader %u: %s", subtask,
                        sl_strerror(rc));
  return rc;
}

static int genum_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      const sl_split_t *sp, uint32_t n,
                      sl_error_t **out_err) {
  genum_t *e = en;
  (void)subtask; /* placement is by split number */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t s = find_split(e->g, sp[i].id);
    if (s == UINT32_MAX)
      return sl_error_set(out_err, SL_EINVAL, "generator split '%s' came "
                          "back but is not a split of this generator "
                          "(seed %llu, %u splits)", sp[i].id,
                          (unsigned long long)e->g->cfg.seed,
                          e->g->n_splits);
    if (genum_set_pending(e, s, sp[i].state, sp[i].state_len) != SL_OK)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  return genum_serve(e, ec, out_err);
}

static int genum_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  (void)id;
  const genum_t *e = en;
  uint32_t n = 0;
  for (uint32_t s = 0; s < e->g->n_splits; s++) n += e->is_pending[s];
  int rc = sl_bytes_append(out, "\x01", 1);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, n);
  for (uint32_t s = 0; rc == SL_OK && s < e->g->n_splits; s++) {
    if (!e->is_pending[s]) continue;
    size_t il = strlen(e->g->ids[s]);
    rc = sl_bytes_append_u64le(out, il);
    if (rc == SL_OK) rc = sl_bytes_append(out, e->g->ids[s], il);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->pos_len[s]);
    if (rc == SL_OK && e->pos_len[s])
      rc = sl_bytes_append(out, e->pos[s], e->pos_len[s]);
  }
  return rc;
}

static const sl_enum_vt_t gen_enum_vt = {
    .create = genum_create,
    .discover = genum_discover,
    .handle_split_request = genum_request,
    .add_splits_back = genum_back,
    .snapshot = genum_snapshot,
    .close = genum_close,
};

static const sl_source_vt_t gen_vt = {
    .type_name = "generator",
    .reader_open = reader_open,
    .reader_poll = reader_poll,
    .reader_position = reader_position,
    .reader_close = reader_close,
    .destroy = gen_destroy,
    .enumerator = &gen_enum_vt,
    .reader_add_splits = reader_add_splits,
};

void sl_gen_config_init(sl_gen_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->seed = 1;
  cfg->keys = 1000;
  cfg->skew = SL_GEN_UNIFORM;
  cfg->zipf_exponent = 1.0;
  cfg->columns = SL_GEN_COL_SEQ | SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT |
                 SL_GEN_COL_TS;
  cfg->start_time_us = 1767225600000000; /* 2026-01-01T00:00:00Z */
  cfg->time_step_us = 1000;
}

int sl_gen_source_create(const sl_gen_config_t *cfg,
                         const sl_source_vt_t **out_vt, void **out_ctx,
                         sl_schema_t **out_schema, sl_error_t **out_err) {
  if (cfg->keys == 0)
    return sl_error_set(out_err, SL_EINVAL, "generator: keys must be >= 1");
  if (cfg->skew == SL_GEN_ZIPF && !(cfg->zipf_exponent > 0))
    return sl_error_set(out_err, SL_EINVAL,
                        "generator: zipf_exponent must be > 0");
  if (!(cfg->rate >= 0) || isinf(cfg->rate))
    return sl_error_set(out_err, SL_EINVAL,
                        "generator: rate must be a finite number >= 0");
  if (cfg->payload_size > PAYLOAD_POOL / 2)
    return sl_error_set(out_err, SL_EINVAL,
                        "generator: payload_size must be at most %u",
                        PAYLOAD_POOL / 2);
  if ((cfg->columns & SL_GEN_COL_ALL) == 0 || (cfg->columns & ~SL_GEN_COL_ALL))
    return sl_error_set(out_err, SL_EINVAL,
                        "generator: columns must name at least one column");
  static const char *names[6] = {"seq", "split", "key", "amount", "ts",
                                 "payload"};
  static const uint8_t types[6] = {SL_TYPE_INT64, SL_TYPE_INT32,
                                   SL_TYPE_INT64, SL_TYPE_INT64,
                                   SL_TYPE_TIMESTAMP, SL_TYPE_STRING};
  sl_field_t fields[6];
  uint32_t n = 0;
  for (uint32_t b = 0; b < 6; b++) {
    if (!(cfg->columns & (1u << b))) continue;
    fields[n].name = names[b];
    fields[n].type = (sl_type_t){types[b], 0, 0, false};
    n++;
  }
  uint32_t n_splits = cfg->splits ? cfg->splits : SL_GEN_DEFAULT_SPLITS;
  if (cfg->count && (cfg->columns & SL_GEN_COL_TS)) {
    /* The largest record index of a split, and its event time. */
    uint64_t last = cfg->count / n_splits + (cfg->count % n_splits ? 1 : 0);
    gen_t probe = {.cfg = *cfg};
    int64_t ts;
    if (!event_time(&probe, last - 1, &ts))
      return sl_error_set(out_err, SL_EINVAL,
                          "generator: the event time of the last record of "
                          "a split, start_time_us %lld + %llu * time_step_us "
                          "%lld, does not fit in int64 microseconds",
                          (long long)cfg->start_time_us,
                          (unsigned long long)(last - 1),
                          (long long)cfg->time_step_us);
  }
  gen_t *g = sl_calloc(1, sizeof(*g));
  if (g == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  g->cfg = *cfg;
  g->n_splits = n_splits;
  g->salt = mix64(cfg->seed);
  g->pool = sl_malloc(PAYLOAD_POOL);
  g->ids = sl_calloc(n_splits, sizeof(char *));
  for (uint32_t s = 0; g->pool && g->ids && s < n_splits; s++) {
    sl_bytes_t id;
    sl_bytes_init(&id);
    if (sl_bytes_printf(&id, "seed=%llu/split=%u/%u",
                        (unsigned long long)cfg->seed, s, n_splits) != SL_OK ||
        sl_bytes_append(&id, "", 1) != SL_OK) {
      sl_bytes_close(&id);
      break;
    }
    g->ids[s] = (char *)id.data; /* moved */
  }
  if (g->pool == NULL || g->ids == NULL || g->ids[n_splits - 1] == NULL) {
    gen_destroy(g);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  for (uint32_t k = 0; k < PAYLOAD_POOL; k += 8) {
    uint64_t r = mix64(cfg->seed ^ (0x5bd1e995ull * (k + 1)));
    for (uint32_t j = 0; j < 8; j++, r >>= 8)
      g->pool[k + j] = (char)('a' + (r & 0xff) % 26);
  }
  if (g->cfg.skew == SL_GEN_ZIPF) {
    double e = g->cfg.zipf_exponent;
    g->zh_x1 = zh(e, 1.5) - 1.0;
    g->zh_n = zh(e, (double)g->cfg.keys + 0.5);
    g->zs = 2.0 - zh_inv(e, zh(e, 2.5) - zh_small(e, 2.0));
  }
  int rc = sl_schema_create(fields, n, out_schema, out_err);
  if (rc != SL_OK) {
    gen_destroy(g);
    return rc;
  }
  *out_vt = &gen_vt;
  *out_ctx = g;
  return SL_OK;
}
