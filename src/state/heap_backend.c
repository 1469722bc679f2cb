/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The heap keyed-state backend: value, list, map and reducing state over
 * copy-on-write maps, one per (state, key group).  Values are stored as
 * bytes: a value state holds the value; a list state holds
 * [u32 len][bytes]...; a map state holds [u32 klen][k][u32 vlen][v]... with
 * one entry per user key (so a map state costs O(entries of the key) per
 * access: keep per-key maps small, or key by the composite key instead).
 * See README.md.
 */
#include <xxhash.h>

#include "state/state.h"

struct sl_state_s {
  sl_kstate_t *be;
  sl_state_desc_t desc; /* name and layout owned */
  sl_cowmap_t **maps;   /* one per key group of the range */
  sl_bytes_t scratch;   /* reducing and map rewrites */
  /* The entry of the last lookup, so that get-then-put walks once; valid
   * while the key generation and the map's epoch are unchanged. */
  const sl_cowmap_entry_t *last;
  uint64_t last_key_gen;
  uint64_t last_epoch;
  bool is_restored;  /* created from a checkpoint */
  bool is_declared;  /* declared by the operator */
  bool has_ck_fp;    /* restored from a file that stores fingerprints */
  uint64_t ck_fp;    /* the checkpoint's fingerprint of this state */
};

struct sl_kstate_s {
  uint32_t max_parallelism;
  uint32_t kg_start, kg_end, n_kg;
  sl_state_t **states;
  uint32_t n_states;
  /* Current composite key: key bytes then namespace bytes. */
  sl_bytes_t ckey;
  uint32_t key_len;
  uint64_t key_hash;  /* hash of the key alone (for the key group) */
  uint64_t ckey_hash; /* hash of key + namespace (map hash) */
  uint32_t cur_kg;    /* relative to kg_start */
  bool has_key;
  uint64_t key_gen;   /* changes with the current key or namespace */
};

struct sl_kstate_snap_s {
  uint32_t n_states, n_kg, kg_start;
  sl_state_desc_t *descs; /* names and layouts owned */
  sl_cowmap_snap_t **maps; /* n_states * n_kg */
};

int sl__kstate_create(uint32_t max_parallelism, uint32_t kg_start,
                      uint32_t kg_end, sl_kstate_t **out) {
  if (kg_end < kg_start || kg_end >= max_parallelism) return SL_EINVAL;
  sl_kstate_t *be = sl_calloc(1, sizeof(*be));
  if (be == NULL) return SL_ENOMEM;
  be->max_parallelism = max_parallelism;
  be->kg_start = kg_start;
  be->kg_end = kg_end;
  be->n_kg = kg_end - kg_start + 1;
  sl_bytes_init(&be->ckey);
  *out = be;
  return SL_OK;
}

static void state_free(sl_state_t *st, uint32_t n_kg) {
  if (st->maps)
    for (uint32_t k = 0; k < n_kg; k++) sl__cowmap_destroy(st->maps[k]);
  sl_free(st->maps);
  sl_free((char *)st->desc.name);
  sl_free((char *)st->desc.layout);
  sl_bytes_close(&st->scratch);
  sl_free(st);
}

void sl__kstate_destroy(sl_kstate_t *be) {
  if (be == NULL) return;
  for (uint32_t i = 0; i < be->n_states; i++)
    state_free(be->states[i], be->n_kg);
  sl_free(be->states);
  sl_bytes_close(&be->ckey);
  sl_free(be);
}

int sl__kstate_register(sl_kstate_t *be, const sl_state_desc_t *desc,
                        sl_state_t **out, sl_error_t **out_err) {
  if (desc->name == NULL || desc->name[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "a state needs a name");
  if (desc->kind < SL_STATE_VALUE || desc->kind > SL_STATE_REDUCING)
    return sl_error_set(out_err, SL_EINVAL, "state '%s' has no valid kind",
                        desc->name);
  if (desc->kind == SL_STATE_REDUCING && desc->reduce == NULL)
    return sl_error_set(out_err, SL_EINVAL,
                        "reducing state '%s' needs a reduce function",
                        desc->name);
  if (desc->layout && strlen(desc->layout) > SL_STATE_LAYOUT_MAX)
    return sl_error_set(out_err, SL_EINVAL,
                        "the layout of state '%s' is longer than %u bytes",
                        desc->name, SL_STATE_LAYOUT_MAX);
  for (uint32_t i = 0; i < be->n_states; i++) {
    sl_state_t *st = be->states[i];
    if (strcmp(st->desc.name, desc->name) != 0) continue;
    if (st->is_restored && !st->is_declared) {
      /* The declaration must match what the checkpoint holds, before the
       * operator reads any value (state_compat.c). */
      int rc = sl__state_check_compat(&st->desc, st->ck_fp, st->has_ck_fp,
                                      desc, out_err);
      if (rc != SL_OK) return rc;
      /* Checkpoints from now on record the declared layout (the same one,
       * or the first one for a checkpoint that predates layouts). */
      char *layout = desc->layout ? sl_strdup(desc->layout) : NULL;
      if (desc->layout && layout == NULL) goto nomem;
      sl_free((char *)st->desc.layout);
      st->desc.layout = layout;
      st->desc.reduce = desc->reduce;
      st->desc.reduce_user = desc->reduce_user;
      st->is_declared = true;
      *out = st;
      return SL_OK;
    }
    if (st->desc.kind != desc->kind)
      return sl_error_set(out_err, SL_EINVAL,
                          "state '%s' was declared twice with different kinds",
                          desc->name);
    *out = st;
    return SL_OK;
  }
  sl_state_t **arr =
      sl_realloc(be->states, (be->n_states + 1) * sizeof(*arr));
  if (arr == NULL) goto nomem;
  be->states = arr;
  sl_state_t *st = sl_calloc(1, sizeof(*st));
  if (st == NULL) goto nomem;
  st->be = be;
  st->desc = *desc;
  if (st->desc.version == 0) st->desc.version = 1;
  sl_bytes_init(&st->scratch);
  st->desc.name = sl_strdup(desc->name);
  st->desc.layout = desc->layout ? sl_strdup(desc->layout) : NULL;
  st->maps = sl_calloc(be->n_kg, sizeof(sl_cowmap_t *));
  if (st->desc.name == NULL || st->maps == NULL ||
      (desc->layout && st->desc.layout == NULL)) {
    state_free(st, 0);
    goto nomem;
  }
  for (uint32_t k = 0; k < be->n_kg; k++) {
    if (sl__cowmap_create(&st->maps[k]) != SL_OK) {
      state_free(st, be->n_kg);
      goto nomem;
    }
  }
  be->states[be->n_states++] = st;
  st->is_declared = true;
  *out = st;
  return SL_OK;
nomem:
  return sl_error_set(out_err, SL_ENOMEM, "out of memory declaring state '%s'",
                      desc->name);
}

int sl__kstate_restore_state(sl_kstate_t *be, const sl_state_desc_t *desc,
                             const uint64_t *fp, sl_state_t **out,
                             sl_error_t **out_err) {
  if (desc->kind < SL_STATE_VALUE || desc->kind > SL_STATE_REDUCING)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "state '%s' has an unknown kind %d in the checkpoint",
                        desc->name, (int)desc->kind);
  if (fp && *fp != sl__state_fingerprint(desc))
    return sl_error_set(out_err, SL_CORRUPT("state fingerprint"),
                        "state '%s' has a fingerprint in the checkpoint that "
                        "does not match its layout", desc->name);
  for (uint32_t i = 0; i < be->n_states; i++) {
    sl_state_t *st = be->states[i];
    if (strcmp(st->desc.name, desc->name) != 0) continue;
    /* The files of one checkpoint (a rescale reads several) agree. */
    if (fp && st->has_ck_fp && st->ck_fp != *fp)
      return sl_error_set(out_err, SL_CORRUPT("state fingerprints differ"),
                          "state '%s' has different layouts in two files of "
                          "the checkpoint", desc->name);
    *out = st;
    return SL_OK;
  }
  /* Registered as if declared, then marked as restored only; a reducing
   * state gets its function from the operator's declaration. */
  sl_state_desc_t d = *desc;
  if (d.kind == SL_STATE_REDUCING) d.kind = SL_STATE_VALUE;
  int rc = sl__kstate_register(be, &d, out, out_err);
  if (rc != SL_OK) return rc;
  (*out)->desc.kind = desc->kind;
  (*out)->desc.version = desc->version ? desc->version : 1;
  (*out)->is_restored = true;
  (*out)->is_declared = false;
  (*out)->has_ck_fp = fp != NULL;
  (*out)->ck_fp = fp ? *fp : 0;
  return SL_OK;
}

/*
 * Whether a restored value has the layout its kind reads without further
 * checks: list [u32 len][bytes]..., map [u32 klen][k][u32 vlen][v]...,
 * each record inside the value and the last one ending at its end.  The
 * list and map readers trust the layout, so a crafted state file with
 * valid checksums would otherwise make them read past the value (found by
 * fuzzing).
 */
static bool value_is_well_formed(sl_state_kind_t kind, const uint8_t *val,
                                 uint32_t vlen) {
  if (kind != SL_STATE_LIST && kind != SL_STATE_MAP) return true;
  uint32_t n_lens = kind == SL_STATE_MAP ? 2 : 1;
  uint32_t off = 0;
  while (off < vlen) {
    for (uint32_t i = 0; i < n_lens; i++) {
      uint32_t l;
      if (vlen - off < 4) return false;
      memcpy(&l, val + off, 4);
      off += 4;
      if (l > vlen - off) return false;
      off += l;
    }
  }
  return true;
}

int sl__kstate_restore_entry(sl_state_t *st, uint32_t kg, const uint8_t *key,
                             uint32_t klen, uint32_t nslen, const uint8_t *val,
                             uint32_t vlen) {
  sl_kstate_t *be = st->be;
  if (kg < be->kg_start || kg > be->kg_end || nslen > klen) return SL_ECORRUPT;
  if (!value_is_well_formed(st->desc.kind, val, vlen)) return SL_ECORRUPT;
  uint64_t kh = sl__key_hash64(key, klen - nslen);
  if (sl_key_group_of_hash(sl__key_hash_fold(kh), be->max_parallelism) != kg)
    return SL_ECORRUPT;
  uint64_t h = nslen == 0 ? kh : XXH3_64bits(key, klen);
  sl_cowmap_entry_t *e;
  bool created;
  int rc = sl__cowmap_upsert(st->maps[kg - be->kg_start], h, key, klen, nslen,
                             vlen, &e, &created);
  if (rc != SL_OK) return rc;
  return sl__cowmap_entry_set_value(e, val, vlen);
}

int sl__kstate_restore_reserve(sl_state_t *st, uint32_t kg, uint64_t n) {
  sl_kstate_t *be = st->be;
  if (kg < be->kg_start || kg > be->kg_end) return SL_ECORRUPT;
  sl_cowmap_t *m = st->maps[kg - be->kg_start];
  /* A count beyond what a map could hold is a corrupt file, not a reason
   * to allocate: the entries themselves are checked as they come. */
  if (n > SIZE_MAX / 2) return SL_EOVERFLOW;
  return sl__cowmap_reserve(m, sl__cowmap_size(m) + (size_t)n);
}

const char *sl__kstate_undeclared(const sl_kstate_t *be) {
  for (uint32_t i = 0; i < be->n_states; i++)
    if (be->states[i]->is_restored && !be->states[i]->is_declared)
      return be->states[i]->desc.name;
  return NULL;
}

int sl__kstate_set_key(sl_kstate_t *be, const void *key, uint32_t len,
                       uint64_t hash64) {
  uint32_t kg =
      sl_key_group_of_hash(sl__key_hash_fold(hash64), be->max_parallelism);
  if (SL_UNLIKELY(kg < be->kg_start || kg > be->kg_end)) return SL_EINVAL;
  if (SL_UNLIKELY(be->ckey.cap < len) &&
      sl_bytes_reserve(&be->ckey, len) != SL_OK)
    return SL_ENOMEM;
  if (len) memcpy(be->ckey.data, key, len);
  be->ckey.len = len;
  be->key_len = len;
  be->key_hash = hash64;
  be->ckey_hash = hash64;
  be->cur_kg = kg - be->kg_start;
  be->has_key = true;
  be->key_gen++;
  return SL_OK;
}

int sl__kstate_set_namespace(sl_kstate_t *be, const void *ns, uint32_t len) {
  /* Already current: keep the states' cached entries valid. */
  if (be->ckey.len == (size_t)be->key_len + len &&
      (len == 0 || memcmp(be->ckey.data + be->key_len, ns, len) == 0))
    return SL_OK;
  be->ckey.len = be->key_len;
  int rc = sl_bytes_append(&be->ckey, ns, len);
  if (rc != SL_OK) return rc;
  be->ckey_hash =
      len == 0 ? be->key_hash : XXH3_64bits(be->ckey.data, be->ckey.len);
  be->key_gen++;
  return SL_OK;
}

sl_slice_t sl__kstate_current_key(const sl_kstate_t *be) {
  sl_slice_t s = {be->ckey.data, be->key_len};
  return s;
}

uint32_t sl__kstate_current_key_group(const sl_kstate_t *be) {
  return be->kg_start + be->cur_kg;
}
uint32_t sl__kstate_n_states(const sl_kstate_t *be) { return be->n_states; }
sl_state_t *sl__kstate_state(const sl_kstate_t *be, uint32_t i) {
  return i < be->n_states ? be->states[i] : NULL;
}
const sl_state_desc_t *sl__state_desc(const sl_state_t *st) {
  return &st->desc;
}

size_t sl__state_size(const sl_state_t *st) {
  size_t n = 0;
  for (uint32_t k = 0; k < st->be->n_kg; k++) n += sl__cowmap_size(st->maps[k]);
  return n;
}

/* ------------------------------------------------------------------ */

static inline sl_cowmap_t *cur_map(const sl_state_t *st) {
  return st->maps[st->be->cur_kg];
}

static const sl_cowmap_entry_t *cur_get(sl_state_t *st) {
  const sl_kstate_t *be = st->be;
  sl_cowmap_t *m = cur_map(st);
  const sl_cowmap_entry_t *e =
      sl__cowmap_get(m, be->ckey_hash, be->ckey.data, (uint32_t)be->ckey.len);
  st->last = e;
  st->last_key_gen = be->key_gen;
  st->last_epoch = sl__cowmap_epoch(m);
  return e;
}

static int cur_upsert2(sl_state_t *st, uint32_t val_hint,
                       sl_cowmap_entry_t **out, bool *out_created) {
  sl_kstate_t *be = st->be;
  if (SL_UNLIKELY(!be->has_key)) return SL_ESTATE;
  sl_cowmap_t *m = cur_map(st);
  if (st->last && st->last_key_gen == be->key_gen &&
      st->last_epoch == sl__cowmap_epoch(m) &&
      sl__cowmap_is_writable(m, st->last)) {
    *out = (sl_cowmap_entry_t *)st->last;
    *out_created = false;
    return SL_OK;
  }
  int rc = sl__cowmap_upsert(m, be->ckey_hash, be->ckey.data,
                             (uint32_t)be->ckey.len,
                             (uint32_t)be->ckey.len - be->key_len, val_hint,
                             out, out_created);
  if (rc == SL_OK) {
    st->last = *out;
    st->last_key_gen = be->key_gen;
    st->last_epoch = sl__cowmap_epoch(m);
  }
  return rc;
}

static int cur_upsert(sl_state_t *st, uint32_t val_hint,
                      sl_cowmap_entry_t **out) {
  bool created;
  return cur_upsert2(st, val_hint, out, &created);
}

static int check_kind(const sl_state_t *st, sl_state_kind_t kind) {
  if (SL_UNLIKELY(st->desc.kind != kind)) return SL_ETYPE;
  if (SL_UNLIKELY(!st->be->has_key)) return SL_ESTATE;
  return SL_OK;
}

int sl_state_clear(sl_state_t *st) {
  if (!st->be->has_key) return SL_ESTATE;
  st->last = NULL;
  const sl_kstate_t *be = st->be;
  int rc = sl__cowmap_remove(cur_map(st), be->ckey_hash, be->ckey.data,
                             (uint32_t)be->ckey.len);
  return rc == SL_ENOTFOUND ? SL_OK : rc;
}

int sl_value_get(sl_state_t *st, sl_slice_t *out) {
  int rc = check_kind(st, SL_STATE_VALUE);
  if (rc != SL_OK) return rc;
  const sl_cowmap_entry_t *e = cur_get(st);
  if (e == NULL) return SL_ENOTFOUND;
  out->ptr = e->val;
  out->len = e->vlen;
  return SL_OK;
}

int sl_value_put(sl_state_t *st, const void *p, size_t len) {
  int rc = check_kind(st, SL_STATE_VALUE);
  if (rc != SL_OK) return rc;
  if (len > UINT32_MAX / 2) return SL_EOVERFLOW;
  sl_cowmap_entry_t *e;
  if ((rc = cur_upsert(st, (uint32_t)len, &e)) != SL_OK) return rc;
  return sl__cowmap_entry_set_value(e, p, (uint32_t)len);
}

int sl_value_get_i64(sl_state_t *st, int64_t *out) {
  sl_slice_t s;
  int rc = sl_value_get(st, &s);
  if (rc != SL_OK) return rc;
  if (s.len != 8) return SL_ETYPE;
  memcpy(out, s.ptr, 8);
  return SL_OK;
}

int sl_value_put_i64(sl_state_t *st, int64_t v) {
  return sl_value_put(st, &v, 8);
}

/* List: [u32 len][bytes] repeated. */
int sl_list_add(sl_state_t *st, const void *p, size_t len) {
  int rc = check_kind(st, SL_STATE_LIST);
  if (rc != SL_OK) return rc;
  if (len > UINT32_MAX / 4) return SL_EOVERFLOW;
  sl_cowmap_entry_t *e;
  if ((rc = cur_upsert(st, 4 + (uint32_t)len, &e)) != SL_OK) return rc;
  if ((rc = sl__cowmap_entry_reserve_value(e, 4 + (uint32_t)len)) != SL_OK)
    return rc;
  uint32_t l = (uint32_t)len;
  memcpy(e->val + e->vlen, &l, 4);
  if (len) memcpy(e->val + e->vlen + 4, p, len);
  e->vlen += 4 + l;
  return SL_OK;
}

int sl_list_iter(sl_state_t *st, sl_list_iter_t *it) {
  int rc = check_kind(st, SL_STATE_LIST);
  if (rc != SL_OK) return rc;
  const sl_cowmap_entry_t *e = cur_get(st);
  it->p = e ? e->val : NULL;
  it->end = e ? e->val + e->vlen : NULL;
  return SL_OK;
}

bool sl_list_next(sl_list_iter_t *it, sl_slice_t *out) {
  if (it->p == NULL || it->end - it->p < 4) return false;
  uint32_t l;
  memcpy(&l, it->p, 4);
  if ((size_t)(it->end - it->p - 4) < l) return false;
  out->ptr = it->p + 4;
  out->len = l;
  it->p += 4 + l;
  return true;
}

/* Map: [u32 klen][k][u32 vlen][v] repeated, unordered. */
static bool map_find(const uint8_t *p, const uint8_t *end, const void *k,
                     size_t klen, const uint8_t **out_rec,
                     const uint8_t **out_next, sl_slice_t *out_v) {
  while (end - p >= 8) {
    uint32_t kl, vl;
    memcpy(&kl, p, 4);
    const uint8_t *kp = p + 4;
    memcpy(&vl, kp + kl, 4);
    const uint8_t *vp = kp + kl + 4;
    if (kl == klen && memcmp(kp, k, klen) == 0) {
      *out_rec = p;
      *out_next = vp + vl;
      out_v->ptr = vp;
      out_v->len = vl;
      return true;
    }
    p = vp + vl;
  }
  return false;
}

int sl_map_get(sl_state_t *st, const void *k, size_t klen, sl_slice_t *out) {
  int rc = check_kind(st, SL_STATE_MAP);
  if (rc != SL_OK) return rc;
  const sl_cowmap_entry_t *e = cur_get(st);
  const uint8_t *rec, *next;
  if (e == NULL || !map_find(e->val, e->val + e->vlen, k, klen, &rec, &next,
                             out))
    return SL_ENOTFOUND;
  return SL_OK;
}

int sl_map_put(sl_state_t *st, const void *k, size_t klen, const void *v,
               size_t vlen) {
  int rc = check_kind(st, SL_STATE_MAP);
  if (rc != SL_OK) return rc;
  if (klen > UINT32_MAX / 8 || vlen > UINT32_MAX / 8) return SL_EOVERFLOW;
  sl_cowmap_entry_t *e;
  if ((rc = cur_upsert(st, 8 + (uint32_t)(klen + vlen), &e)) != SL_OK)
    return rc;
  const uint8_t *rec, *next;
  sl_slice_t old;
  if (map_find(e->val, e->val + e->vlen, k, klen, &rec, &next, &old)) {
    if (old.len == vlen) {
      memcpy((uint8_t *)old.ptr, v, vlen);
      return SL_OK;
    }
    /* Remove the old record, then append. */
    size_t off = (size_t)(rec - e->val), nlen = (size_t)(next - rec);
    memmove(e->val + off, next, e->vlen - off - nlen);
    e->vlen -= (uint32_t)nlen;
  }
  uint32_t need = 8 + (uint32_t)klen + (uint32_t)vlen;
  if ((rc = sl__cowmap_entry_reserve_value(e, need)) != SL_OK) return rc;
  uint8_t *p = e->val + e->vlen;
  uint32_t kl = (uint32_t)klen, vl = (uint32_t)vlen;
  memcpy(p, &kl, 4);
  memcpy(p + 4, k, klen);
  memcpy(p + 4 + klen, &vl, 4);
  if (vlen) memcpy(p + 8 + klen, v, vlen);
  e->vlen += need;
  return SL_OK;
}

int sl_map_remove(sl_state_t *st, const void *k, size_t klen) {
  int rc = check_kind(st, SL_STATE_MAP);
  if (rc != SL_OK) return rc;
  const sl_cowmap_entry_t *ro = cur_get(st);
  const uint8_t *rec, *next;
  sl_slice_t old;
  if (ro == NULL ||
      !map_find(ro->val, ro->val + ro->vlen, k, klen, &rec, &next, &old))
    return SL_ENOTFOUND;
  sl_cowmap_entry_t *e;
  if ((rc = cur_upsert(st, 0, &e)) != SL_OK) return rc;
  /* e may be a copy of ro: find the record again in it. */
  map_find(e->val, e->val + e->vlen, k, klen, &rec, &next, &old);
  size_t off = (size_t)(rec - e->val), nlen = (size_t)(next - rec);
  memmove(e->val + off, next, e->vlen - off - nlen);
  e->vlen -= (uint32_t)nlen;
  if (e->vlen == 0) return sl_state_clear(st);
  return SL_OK;
}

int sl_map_iter(sl_state_t *st, sl_map_iter_t *it) {
  int rc = check_kind(st, SL_STATE_MAP);
  if (rc != SL_OK) return rc;
  const sl_cowmap_entry_t *e = cur_get(st);
  it->p = e ? e->val : NULL;
  it->end = e ? e->val + e->vlen : NULL;
  return SL_OK;
}

bool sl_map_next(sl_map_iter_t *it, sl_slice_t *out_k, sl_slice_t *out_v) {
  if (it->p == NULL || it->end - it->p < 8) return false;
  uint32_t kl, vl;
  memcpy(&kl, it->p, 4);
  out_k->ptr = it->p + 4;
  out_k->len = kl;
  memcpy(&vl, it->p + 4 + kl, 4);
  out_v->ptr = it->p + 8 + kl;
  out_v->len = vl;
  it->p += 8 + kl + vl;
  return true;
}

int sl_reducing_add(sl_state_t *st, const void *p, size_t len) {
  int rc = check_kind(st, SL_STATE_REDUCING);
  if (rc != SL_OK) return rc;
  if (len > UINT32_MAX / 2) return SL_EOVERFLOW;
  sl_cowmap_entry_t *e;
  bool created;
  if ((rc = cur_upsert2(st, (uint32_t)len, &e, &created)) != SL_OK) return rc;
  if (created)
    return sl__cowmap_entry_set_value(e, p, (uint32_t)len);
  sl_slice_t a = {e->val, e->vlen}, b = {p, (uint32_t)len};
  st->scratch.len = 0;
  rc = st->desc.reduce(st->desc.reduce_user, a, b, &st->scratch);
  if (rc != SL_OK) return rc;
  if (st->scratch.len > UINT32_MAX / 2) return SL_EOVERFLOW;
  return sl__cowmap_entry_set_value(e, st->scratch.data,
                                    (uint32_t)st->scratch.len);
}

int sl_reducing_get(sl_state_t *st, sl_slice_t *out) {
  int rc = check_kind(st, SL_STATE_REDUCING);
  if (rc != SL_OK) return rc;
  const sl_cowmap_entry_t *e = cur_get(st);
  if (e == NULL) return SL_ENOTFOUND;
  out->ptr = e->val;
  out->len = e->vlen;
  return SL_OK;
}

/* ------------------------------------------------------------------ */

int sl__state_for_each(sl_state_t *st, sl_state_visit_cb fn, void *user) {
  sl_kstate_t *be = st->be;
  sl_bytes_t keys;
  sl_bytes_init(&keys);
  int rc = SL_OK;
  /* Collect the keys of one key group first: fn may write to the state,
   * which would invalidate an iterator over the live map. */
  for (uint32_t k = 0; k < be->n_kg && rc == SL_OK; k++) {
    keys.len = 0;
    sl_cowmap_iter_t it;
    sl__cowmap_iter(st->maps[k], &it);
    const sl_cowmap_entry_t *e;
    while (rc == SL_OK && (e = sl__cowmap_next(&it)) != NULL) {
      uint32_t hdr[2] = {e->klen, e->nslen};
      rc = sl_bytes_append(&keys, hdr, 8);
      if (rc == SL_OK) rc = sl_bytes_append(&keys, e->key, e->klen);
    }
    size_t off = 0;
    while (rc == SL_OK && off < keys.len) {
      uint32_t hdr[2];
      memcpy(hdr, keys.data + off, 8);
      const uint8_t *kp = keys.data + off + 8;
      uint32_t key_len = hdr[0] - hdr[1];
      rc = sl__kstate_set_key(be, kp, key_len, sl__key_hash64(kp, key_len));
      if (rc == SL_OK) rc = sl__kstate_set_namespace(be, kp + key_len, hdr[1]);
      if (rc == SL_OK) {
        sl_slice_t ks = {kp, key_len}, ns = {kp + key_len, hdr[1]};
        rc = fn(user, ks, ns);
      }
      off += 8 + hdr[0];
    }
  }
  sl_bytes_close(&keys);
  return rc;
}

int sl__kstate_snapshot(sl_kstate_t *be, sl_kstate_snap_t **out) {
  sl_kstate_snap_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return SL_ENOMEM;
  s->n_states = be->n_states;
  s->n_kg = be->n_kg;
  s->kg_start = be->kg_start;
  s->descs = sl_calloc(be->n_states ? be->n_states : 1, sizeof(*s->descs));
  s->maps = sl_calloc((size_t)be->n_states * be->n_kg + 1, sizeof(*s->maps));
  if (s->descs == NULL || s->maps == NULL) goto nomem;
  for (uint32_t i = 0; i < be->n_states; i++) {
    const sl_state_desc_t *d = &be->states[i]->desc;
    s->descs[i] = *d;
    s->descs[i].name = sl_strdup(d->name);
    s->descs[i].layout = d->layout ? sl_strdup(d->layout) : NULL;
    if (s->descs[i].name == NULL || (d->layout && s->descs[i].layout == NULL))
      goto nomem;
    for (uint32_t k = 0; k < be->n_kg; k++)
      if (sl__cowmap_snapshot(be->states[i]->maps[k],
                              &s->maps[(size_t)i * be->n_kg + k]) != SL_OK)
        goto nomem;
  }
  *out = s;
  return SL_OK;
nomem:
  sl__kstate_snap_release(s);
  return SL_ENOMEM;
}

const sl_cowmap_snap_t *sl__kstate_snap_map(const sl_kstate_snap_t *s,
                                            uint32_t state, uint32_t kg) {
  if (state >= s->n_states || kg < s->kg_start || kg - s->kg_start >= s->n_kg)
    return NULL;
  return s->maps[(size_t)state * s->n_kg + (kg - s->kg_start)];
}

uint32_t sl__kstate_snap_n_states(const sl_kstate_snap_t *s) {
  return s->n_states;
}

const sl_state_desc_t *sl__kstate_snap_desc(const sl_kstate_snap_t *s,
                                            uint32_t state) {
  return state < s->n_states ? &s->descs[state] : NULL;
}

void sl__kstate_snap_release(sl_kstate_snap_t *s) {
  if (s == NULL) return;
  if (s->maps)
    for (size_t i = 0; i < (size_t)s->n_states * s->n_kg; i++)
      sl__cowmap_snap_release(s->maps[i]);
  if (s->descs)
    for (uint32_t i = 0; i < s->n_states; i++) {
      sl_free((char *)s->descs[i].name);
      sl_free((char *)s->descs[i].layout);
    }
  sl_free(s->descs);
  sl_free(s->maps);
  sl_free(s);
}

void sl__kstate_gc(sl_kstate_t *be) {
  for (uint32_t i = 0; i < be->n_states; i++)
    for (uint32_t k = 0; k < be->n_kg; k++)
      sl__cowmap_gc(be->states[i]->maps[k]);
}
