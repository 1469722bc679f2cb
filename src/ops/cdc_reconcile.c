/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reconciler of a CDC source whose table is chunked by a declared key
 * that is not the primary key (docs/cdc-mariadb.md, "Exactly once with a
 * non-primary-key chunk key").  Its input is the source's changelog with a
 * last field `_sl_version` (bytes): a snapshot row carries its chunk's HIGH
 * GTID state, a binlog row its transaction's GTID (domain, seq) and a
 * pass-through flag.  Keyed by the primary key, it keeps per (table index,
 * key) the version of the last row it applied, whether the row is present,
 * and the row, and emits a changelog without the version field in which
 * every key ends as the newest version says:
 *
 * - a snapshot row with no state: +I; against a stored snapshot version H1:
 *   newer (>= in every domain, different) replaces it (-U old / +U new, or
 *   nothing when the rows are equal), older or equal is dropped,
 *   incomparable fails the job;
 * - a binlog row (d, s) covered by the stored snapshot H (H[d] >= s) is
 *   already in it and dropped; any other binlog row applies, normalised by
 *   presence: +I/+U of an absent key is +I (+U when it completes the -U of
 *   the same key and binlog row), of a present key -U stored / +U new; -U
 *   or -D of a present key emits -U or -D of the stored row, of an absent
 *   key nothing; either leaves the key absent at that version;
 * - a binlog row with flag bit 0 (the stream is past the table's largest
 *   HIGH) passes through (minus the version); the key's entry for its table
 *   is dropped, and the first such row a subtask sees for a table sweeps
 *   every entry of that table out of the subtask's state.
 *
 * State: one map state "rows" per key: table index (2 bytes, big-endian) ->
 * u8 flags (bit 0 present, bit 1 the last applied row was an update's
 * before image), u16le version length, the version bytes, then the row
 * (compact codec, output schema) when present.  A key that no row has
 * reached has no entry; a key a binlog -U or -D made absent keeps its
 * version (a tombstone) until the pass-through point.  Entries of keys
 * that never see a row past the pass-through point, on a subtask that
 * never sees one of their table, stay for the life of the job: keyed state
 * has no time-to-live and no clearing of a whole state, and the stage
 * learns of that point only from its rows.
 */
#include <stdarg.h>
#include <stdio.h>

#include "graph/graph.h"
#include "ops/cdc_version.h"
#include "ops/ops.h"
#include "sluice/sl_state.h"
#include "state/state.h"

#define VERSION_FIELD "_sl_version"

enum { F_PRESENT = 1, F_BEFORE = 2 };

typedef struct rec_cfg_s {
  char *uid;
  uint32_t n_in;     /* input fields; the last is the version */
  sl_schema_t *out;  /* the input without the version */
  char *layout;
} rec_cfg_t;

typedef struct rec_local_s {
  sl_state_t *rows;
  sl_row_builder_t nb;  /* the new row (output schema) */
  sl_row_builder_t ob;  /* a stored row, decoded */
  sl_bytes_t enc;       /* the new row, compact */
  sl_bytes_t val;       /* a state value being built */
  uint8_t *swept;       /* bit per table index: swept since open */
} rec_local_t;

static void rec_cfg_destroy(void *p) {
  rec_cfg_t *c = p;
  if (c == NULL) return;
  sl_free(c->uid);
  sl_schema_unref(c->out);
  sl_free(c->layout);
  sl_free(c);
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

bool sl__cdc_version_parse(sl_slice_t b, sl__cdc_version_t *v, char *why,
                           size_t n_why) {
  memset(v, 0, sizeof(*v));
  v->raw = b;
  if (b.len < 4) {
    snprintf(why, n_why, "%u bytes, shorter than any version", b.len);
    return false;
  }
  v->kind = b.ptr[0];
  v->table = (uint16_t)(b.ptr[1] | b.ptr[2] << 8);
  if (v->kind == 'S') {
    v->n_dom = b.ptr[3];
    v->dom = b.ptr + 4;
    if (b.len != 4 + 12 * v->n_dom) {
      snprintf(why, n_why, "a snapshot version of %u domains is %u bytes, "
               "not %u", v->n_dom, b.len, 4 + 12 * v->n_dom);
      return false;
    }
    for (uint32_t i = 1; i < v->n_dom; i++)
      if (rd32(v->dom + 12 * i) <= rd32(v->dom + 12 * (i - 1))) {
        snprintf(why, n_why, "snapshot version domains are not ascending "
                 "(%u after %u)", rd32(v->dom + 12 * i),
                 rd32(v->dom + 12 * (i - 1)));
        return false;
      }
    return true;
  }
  if (v->kind == 'B') {
    if (b.len != 24) {
      snprintf(why, n_why, "a binlog version is %u bytes, not 24", b.len);
      return false;
    }
    v->flags = b.ptr[3];
    v->domain = rd32(b.ptr + 4);
    v->seq = rd64(b.ptr + 8);
    v->event = rd32(b.ptr + 16);
    v->row = rd32(b.ptr + 20);
    return true;
  }
  snprintf(why, n_why, "unknown version kind 0x%02x (not 'S' or 'B')",
           v->kind);
  return false;
}

uint64_t sl__cdc_version_seq(const sl__cdc_version_t *h, uint32_t d) {
  for (uint32_t i = 0; i < h->n_dom; i++) {
    uint32_t di = rd32(h->dom + 12 * i);
    if (di == d) return rd64(h->dom + 12 * i + 4);
    if (di > d) break;
  }
  return 0;
}

int sl__cdc_version_cmp(const sl__cdc_version_t *a,
                        const sl__cdc_version_t *b) {
  bool ge = true, le = true;
  uint32_t i = 0, j = 0;
  while (i < a->n_dom || j < b->n_dom) {
    uint32_t da = i < a->n_dom ? rd32(a->dom + 12 * i) : UINT32_MAX;
    uint32_t db = j < b->n_dom ? rd32(b->dom + 12 * j) : UINT32_MAX;
    uint64_t sa = 0, sb = 0;
    if (da <= db) sa = rd64(a->dom + 12 * i++ + 4);
    if (db <= da) sb = rd64(b->dom + 12 * j++ + 4);
    if (sa < sb) ge = false;
    if (sa > sb) le = false;
  }
  return ge && le ? 0 : ge ? 1 : le ? -1 : 2;
}

void sl__cdc_version_format(const sl__cdc_version_t *h, char *buf, size_t n) {
  size_t off = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < h->n_dom && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%u-%llu", i ? "," : "",
                            rd32(h->dom + 12 * i),
                            (unsigned long long)rd64(h->dom + 12 * i + 4));
  if (h->n_dom == 0) snprintf(buf, n, "(empty)");
}

/* Fail the job: bad input or broken ordering, which a restart would only
 * replay. */
static int fail_fatal(sl_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int fail_fatal(sl_ctx_t *ctx, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  sl_error_t *err = sl_error_create(SL_EINVAL, "%s", msg);
  if (err) sl_error_set_fatal(err, true);
  return sl__op_fail_err(ctx, err, SL_EINVAL);
}

/* ------------------------------------------------------------------ */
/* Rows. */

/* Build the input row without its version in l->nb, kind +I, and its
 * compact bytes in l->enc. */
static int build_new(const rec_cfg_t *c, rec_local_t *l, const sl_row_t *in,
                     sl_row_t *out_row) {
  sl_row_builder_reset(&l->nb, SL_ROW_INSERT);
  for (uint32_t i = 0; i + 1 < c->n_in; i++) {
    sl_value_t v;
    sl_row_get_value(in, i, &v);
    if (v.is_null) continue;
    int rc = sl_row_builder_set_value(&l->nb, i, &v);
    if (rc != SL_OK) return rc;
  }
  int rc = sl_row_builder_finish(&l->nb, out_row, NULL);
  if (rc != SL_OK) return rc;
  l->enc.len = 0;
  return sl_row_encode_compact(out_row, &l->enc);
}

static int emit_new(sl_ctx_t *ctx, rec_local_t *l, sl_row_kind_t kind) {
  sl_row_t r;
  sl_row_builder_set_kind(&l->nb, kind);
  int rc = sl_row_builder_finish(&l->nb, &r, NULL);
  if (rc == SL_OK) rc = sl_ctx_emit(ctx, &r);
  return rc;
}

/* Emit a stored (compact) row with kind. */
static int emit_stored(sl_ctx_t *ctx, rec_local_t *l, sl_slice_t enc,
                       sl_row_kind_t kind) {
  size_t used;
  int rc = sl_row_decode_compact(&l->ob, enc.ptr, enc.len, &used);
  if (rc != SL_OK || used != enc.len)
    return fail_fatal(ctx, "the stored row of a key does not decode "
                      "(corrupt state)");
  sl_row_builder_set_kind(&l->ob, kind);
  sl_row_t r;
  if ((rc = sl_row_builder_finish(&l->ob, &r, NULL)) != SL_OK) return rc;
  return sl_ctx_emit(ctx, &r);
}

/* ------------------------------------------------------------------ */
/* State entries. */

typedef struct entry_s {
  uint8_t flags;
  sl__cdc_version_t ver;
  sl_slice_t row; /* compact, when present */
} entry_t;

/* Read the current key's entry of table t: 1 found, 0 none, < 0 error. */
static int entry_get(sl_ctx_t *ctx, rec_local_t *l, uint16_t t, entry_t *e) {
  uint8_t tk[2] = {(uint8_t)(t >> 8), (uint8_t)t};
  sl_slice_t v;
  int rc = sl_map_get(l->rows, tk, 2, &v);
  if (rc == SL_ENOTFOUND) return 0;
  if (rc != SL_OK) return rc;
  char why[160];
  uint32_t vlen = v.len >= 3 ? (uint32_t)(v.ptr[1] | v.ptr[2] << 8) : 0;
  if (v.len < 3 || 3u + vlen > v.len ||
      !sl__cdc_version_parse((sl_slice_t){v.ptr + 3, vlen}, &e->ver, why,
                             sizeof(why)))
    return fail_fatal(ctx, "the stored entry of table %u is malformed "
                      "(corrupt state)", t);
  e->flags = v.ptr[0];
  e->row = (sl_slice_t){v.ptr + 3 + vlen, v.len - 3 - vlen};
  return 1;
}

/* Store (flags, version, row) for table t; row NULL: none. */
static int entry_put(rec_local_t *l, uint16_t t, uint8_t flags,
                     const sl__cdc_version_t *v, const sl_bytes_t *row) {
  uint8_t hdr[3] = {flags, (uint8_t)v->raw.len, (uint8_t)(v->raw.len >> 8)};
  l->val.len = 0;
  int rc = sl_bytes_append(&l->val, hdr, 3);
  if (rc == SL_OK) rc = sl_bytes_append(&l->val, v->raw.ptr, v->raw.len);
  if (rc == SL_OK && row) rc = sl_bytes_append(&l->val, row->data, row->len);
  if (rc != SL_OK) return rc;
  uint8_t tk[2] = {(uint8_t)(t >> 8), (uint8_t)t};
  return sl_map_put(l->rows, tk, 2, l->val.data, l->val.len);
}

static int entry_remove(rec_local_t *l, uint16_t t) {
  uint8_t tk[2] = {(uint8_t)(t >> 8), (uint8_t)t};
  int rc = sl_map_remove(l->rows, tk, 2);
  return rc == SL_ENOTFOUND ? SL_OK : rc;
}

typedef struct sweep_s {
  rec_local_t *l;
  uint16_t table;
} sweep_t;

static int sweep_one(void *user, sl_slice_t key, sl_slice_t ns) {
  SL_UNUSED(key);
  SL_UNUSED(ns);
  sweep_t *s = user;
  return entry_remove(s->l, s->table);
}

/* ------------------------------------------------------------------ */

static int rec_open(sl_ctx_t *ctx, void *user) {
  rec_cfg_t *c = user;
  rec_local_t *l = sl_calloc(1, sizeof(*l));
  if (l == NULL) return SL_ENOMEM;
  sl_ctx_set_local(ctx, l);
  sl_bytes_init(&l->enc);
  sl_bytes_init(&l->val);
  l->swept = sl_calloc(65536 / 8, 1);
  if (l->swept == NULL || sl_row_builder_init(&l->nb, c->out) != SL_OK ||
      sl_row_builder_init(&l->ob, c->out) != SL_OK)
    return SL_ENOMEM;
  sl_state_desc_t d = {.name = "rows", .kind = SL_STATE_MAP, .version = 1,
                       .layout = c->layout};
  return sl_ctx_state(ctx, &d, &l->rows);
}

static void rec_close(sl_ctx_t *ctx, void *user) {
  SL_UNUSED(user);
  rec_local_t *l = sl_ctx_local(ctx);
  if (l == NULL) return;
  sl_row_builder_close(&l->nb);
  sl_row_builder_close(&l->ob);
  sl_bytes_close(&l->enc);
  sl_bytes_close(&l->val);
  sl_free(l->swept);
  sl_free(l);
}

/* A snapshot row (its kind is +I). */
static int on_snapshot(sl_ctx_t *ctx, rec_local_t *l,
                       const sl__cdc_version_t *v, const sl_row_t *in,
                       const rec_cfg_t *c) {
  entry_t e;
  int got = entry_get(ctx, l, v->table, &e);
  if (got < 0) return got;
  bool is_present = got && (e.flags & F_PRESENT);
  if (got) {
    bool is_newer;
    if (e.ver.kind == 'S') {
      int r = sl__cdc_version_cmp(v, &e.ver);
      if (r == 2) {
        char a[256], b[256];
        sl__cdc_version_format(v, a, sizeof(a));
        sl__cdc_version_format(&e.ver, b, sizeof(b));
        return fail_fatal(ctx, "table %u: a snapshot row at HIGH %s and one "
                          "of the same primary key at HIGH %s are neither "
                          "older nor newer than each other (GTID states "
                          "of one server only grow)", v->table, a, b);
      }
      is_newer = r == 1;
    } else {
      /* A binlog row of the key came first: the source sends every
       * snapshot row of a table before its binlog rows, but with
       * unaligned checkpoints (or at-least-once, or an alignment timeout)
       * a snapshot row still queued toward this subtask when the gate's
       * checkpoint completed can come after them.  The snapshot is newer
       * when it saw that transaction. */
      is_newer = sl__cdc_version_seq(v, e.ver.domain) >= e.ver.seq;
    }
    if (!is_newer) return SL_OK;
  }
  sl_row_t nr;
  int rc = build_new(c, l, in, &nr);
  if (rc != SL_OK) return rc;
  if (is_present) {
    bool is_same = e.row.len == l->enc.len &&
                   memcmp(e.row.ptr, l->enc.data, e.row.len) == 0;
    if (!is_same) {
      if ((rc = emit_stored(ctx, l, e.row, SL_ROW_UPDATE_BEFORE)) != SL_OK ||
          (rc = emit_new(ctx, l, SL_ROW_UPDATE_AFTER)) != SL_OK)
        return rc;
    }
  } else if ((rc = emit_new(ctx, l, SL_ROW_INSERT)) != SL_OK) {
    return rc;
  }
  return entry_put(l, v->table, F_PRESENT, v, &l->enc);
}

/* A binlog row, not past the table's largest HIGH. */
static int on_binlog(sl_ctx_t *ctx, rec_local_t *l,
                     const sl__cdc_version_t *v, const sl_row_t *in,
                     const rec_cfg_t *c) {
  entry_t e;
  int got = entry_get(ctx, l, v->table, &e);
  if (got < 0) return got;
  /* Already in the snapshot this key's row came from. */
  if (got && e.ver.kind == 'S' &&
      sl__cdc_version_seq(&e.ver, v->domain) >= v->seq)
    return SL_OK;
  bool is_present = got && (e.flags & F_PRESENT);
  sl_row_kind_t kind = sl_row_kind(in);
  int rc;
  sl_row_t nr;
  switch (kind) {
  case SL_ROW_INSERT:
  case SL_ROW_UPDATE_AFTER:
    if ((rc = build_new(c, l, in, &nr)) != SL_OK) return rc;
    if (is_present) {
      if ((rc = emit_stored(ctx, l, e.row, SL_ROW_UPDATE_BEFORE)) != SL_OK ||
          (rc = emit_new(ctx, l, SL_ROW_UPDATE_AFTER)) != SL_OK)
        return rc;
    } else {
      /* The after image of the update whose before image this key just
       * retracted: the pair stays -U/+U.  Anything else (the seed's row
       * that no snapshot holds, a new primary key) appears: +I. */
      bool is_pair = kind == SL_ROW_UPDATE_AFTER && got &&
                     (e.flags & F_BEFORE) && e.ver.kind == 'B' &&
                     e.ver.raw.len == v->raw.len &&
                     memcmp(e.ver.raw.ptr + 4, v->raw.ptr + 4,
                            v->raw.len - 4) == 0;
      if ((rc = emit_new(ctx, l, is_pair ? SL_ROW_UPDATE_AFTER
                                         : SL_ROW_INSERT)) != SL_OK)
        return rc;
    }
    return entry_put(l, v->table, F_PRESENT, v, &l->enc);
  case SL_ROW_UPDATE_BEFORE:
  case SL_ROW_DELETE:
    /* The row is gone at v: keep v (a tombstone), so that a snapshot row
     * of this key that is late (see on_snapshot) and older stays out. */
    if (is_present &&
        (rc = emit_stored(ctx, l, e.row, kind)) != SL_OK)
      return rc;
    return entry_put(l, v->table,
                     is_present && kind == SL_ROW_UPDATE_BEFORE ? F_BEFORE : 0,
                     v, NULL);
  }
  return SL_OK;
}

static int rec_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  rec_cfg_t *c = user;
  rec_local_t *l = sl_ctx_local(ctx);
  uint32_t vf = c->n_in - 1;
  if (sl_row_is_null(row, vf))
    return fail_fatal(ctx, "a %s row has a null %s", sl_row_kind_name(
                      sl_row_kind(row)), VERSION_FIELD);
  sl__cdc_version_t v;
  char why[160];
  if (!sl__cdc_version_parse(sl_row_get_str(row, vf), &v, why, sizeof(why)))
    return fail_fatal(ctx, "a %s row has a malformed %s: %s",
                      sl_row_kind_name(sl_row_kind(row)), VERSION_FIELD, why);
  if (v.kind == 'S') {
    if (sl_row_kind(row) != SL_ROW_INSERT)
      return fail_fatal(ctx, "table %u: a snapshot row of kind %s (snapshot "
                        "rows are +I)", v.table,
                        sl_row_kind_name(sl_row_kind(row)));
    return on_snapshot(ctx, l, &v, row, c);
  }
  if (!(v.flags & SL_CDC_VERSION_PASS)) return on_binlog(ctx, l, &v, row, c);
  /* Past the table's largest HIGH: no snapshot covers anything any more,
   * and what sinks hold equals the table at this point. */
  sl_row_t nr;
  int rc = build_new(c, l, row, &nr);
  if (rc == SL_OK) rc = emit_new(ctx, l, sl_row_kind(row));
  if (rc == SL_OK) rc = entry_remove(l, v.table);
  if (rc != SL_OK) return rc;
  uint8_t bit = (uint8_t)(1u << (v.table & 7));
  if (l->swept[v.table >> 3] & bit) return SL_OK;
  l->swept[v.table >> 3] |= bit;
  /* Drop every entry of the table from this subtask's keys.  It leaves
   * another key current, which is fine: the next row sets its own. */
  sweep_t s = {l, v.table};
  return sl__state_for_each(l->rows, sweep_one, &s);
}

static const sl_process_fns_t rec_fns = {.open = rec_open,
                                         .process = rec_process,
                                         .close = rec_close};

sl_stream_t *sl__cdc_reconcile(sl_stream_t *in, const char *uid,
                               const uint32_t *pk, uint32_t n_pk) {
  if (in == NULL) return NULL;
  sl_job_t *job = in->job;
  const char *u = uid ? uid : "";
  const sl_schema_t *s = sl__stream_schema(in);
  uint32_t n = sl_schema_n_fields(s);
  const sl_field_t *last = n ? sl_schema_field(s, n - 1) : NULL;
  if (n < 2 || strcmp(last->name, VERSION_FIELD) != 0 ||
      last->type.id != SL_TYPE_BYTES) {
    sl__job_set_error(job, SL_EINVAL, "cdc reconcile '%s': the input of '%s' "
                      "does not end in a field " VERSION_FIELD " of type "
                      "bytes after at least one other field", u,
                      in->node->uid);
    return NULL;
  }
  if (n_pk == 0 || pk == NULL) {
    sl__job_set_error(job, SL_EINVAL, "cdc reconcile '%s': no primary key "
                      "fields", u);
    return NULL;
  }
  const char **names = sl_calloc(n_pk, sizeof(char *));
  rec_cfg_t *c = sl_calloc(1, sizeof(*c));
  sl_field_t *f = sl_calloc(n, sizeof(sl_field_t));
  sl_acc_t b;
  sl__acc_init(&b);
  sl_error_t *err = NULL;
  if (names == NULL || c == NULL || f == NULL) goto nomem;
  for (uint32_t i = 0; i < n_pk; i++) {
    if (pk[i] >= n - 1) {
      sl__job_set_error(job, SL_EINVAL, "cdc reconcile '%s': primary key "
                        "field index %u is not a field before "
                        VERSION_FIELD " (%u fields)", u, pk[i], n - 1);
      goto fail;
    }
    names[i] = sl_schema_field(s, pk[i])->name;
  }
  for (uint32_t i = 0; i + 1 < n; i++) f[i] = *sl_schema_field(s, i);
  int rc = sl_schema_create(f, n - 1, &c->out, &err);
  if (rc != SL_OK) {
    sl__job_set_error(job, rc, "cdc reconcile '%s': %s", u,
                      sl_error_message(err));
    sl_error_destroy(err);
    goto fail;
  }
  c->n_in = n;
  if ((c->uid = sl_strdup(uid ? uid : "cdc-reconcile")) == NULL) goto nomem;
  sl__acc_printf(&b, "table:u16be -> flags:u8, version length:u16le, "
                 "version, row(compact): ");
  sl__state_layout_schema(&b, c->out);
  if ((c->layout = sl__state_layout_finish(&b)) == NULL) goto nomem;
  sl_stream_t *keyed = sl_stream_key_by_fields(in, names, n_pk);
  sl_stream_t *out = keyed ? sl_stream_process(keyed, uid, c->out, &rec_fns, c)
                           : NULL;
  if (out == NULL) goto fail;
  out->node->cfg.impl_cfg = c;
  out->node->cfg.cfg_destroy = rec_cfg_destroy;
  sl_free(names);
  sl_free(f);
  return out;
nomem:
  sl__job_set_error(job, SL_ENOMEM, "out of memory building the job");
fail:
  sl__acc_close(&b);
  rec_cfg_destroy(c);
  sl_free(names);
  sl_free(f);
  return NULL;
}
