/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the state-file decoder (sl__ckpt_read_state) feeding the
 * heap backend's restore calls, as sl__ckpt_restore_keyed does, and then
 * an operator's reads of what was restored.  Each input is tried as it is
 * and with every checksum made valid (the key-group sections in the index,
 * then the header-and-index checksum in the footer), so that the fuzzer
 * reaches the structure behind them: a crafted file with valid checksums
 * must be refused cleanly too.  The key groups read are those the header
 * names, clamped below max_parallelism 128, as a restore's metadata would
 * be.
 */
#include <xxhash.h>

#include "checkpoint/checkpoint.h"
#include "fuzz_util.h"
#include "runtime/runtime.h"

#define MAX_PAR 128

typedef struct restore_s {
  sl_kstate_t *be;
  sl_timers_t *timers[2];
  sl_state_t **states;
  uint32_t n_states;
} restore_t;

static int on_states(void *user, const sl_state_desc_t *descs,
                     const uint64_t *fps, uint32_t n) {
  restore_t *r = user;
  sl_free(r->states);
  r->states = sl_calloc(n + 1, sizeof(sl_state_t *));
  if (r->states == NULL) return SL_ENOMEM;
  r->n_states = n;
  for (uint32_t i = 0; i < n; i++) {
    sl_error_t *err = NULL;
    int rc = sl__kstate_restore_state(r->be, &descs[i], fps ? &fps[i] : NULL,
                                      &r->states[i], &err);
    sl_error_destroy(err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

static int on_entry(void *user, uint32_t state, uint32_t kg,
                    const uint8_t *key, uint32_t klen, uint32_t nslen,
                    const uint8_t *val, uint32_t vlen) {
  restore_t *r = user;
  if (state >= r->n_states) return SL_ECORRUPT;
  return sl__kstate_restore_entry(r->states[state], kg, key, klen, nslen, val,
                                  vlen);
}

static int on_timer(void *user, uint32_t kg, uint8_t domain, int64_t ts,
                    const uint8_t *key, uint32_t klen) {
  restore_t *r = user;
  (void)kg;
  return sl__timers_add(r->timers[domain & 1], ts, key, klen);
}

static int reduce_keep(void *user, sl_slice_t a, sl_slice_t b,
                       sl_bytes_t *out) {
  (void)user;
  (void)b;
  return sl_bytes_append(out, a.ptr, a.len);
}

/* An operator reading every restored entry through the public calls. */
static int visit(void *user, sl_slice_t key, sl_slice_t ns) {
  sl_state_t *st = user;
  (void)key;
  (void)ns;
  sl_slice_t v, k;
  switch (sl__state_desc(st)->kind) {
  case SL_STATE_VALUE:
    return sl_value_get(st, &v) == SL_OK ? SL_OK : SL_ECORRUPT;
  case SL_STATE_LIST: {
    sl_list_iter_t it;
    if (sl_list_iter(st, &it) != SL_OK) return SL_ECORRUPT;
    while (sl_list_next(&it, &v)) {
    }
    return SL_OK;
  }
  case SL_STATE_MAP: {
    sl_map_iter_t it;
    if (sl_map_iter(st, &it) != SL_OK) return SL_ECORRUPT;
    while (sl_map_next(&it, &k, &v)) (void)sl_map_get(st, k.ptr, k.len, &v);
    (void)sl_map_get(st, "absent", 6, &v);
    return SL_OK;
  }
  case SL_STATE_REDUCING:
    return sl_reducing_get(st, &v) == SL_OK ? SL_OK : SL_ECORRUPT;
  }
  return SL_ECORRUPT;
}

static void try_state(const char *path, const uint8_t *p, size_t n) {
  if (n < 32) return;
  uint64_t ck;
  memcpy(&ck, p + n - 16, 8);
  uint32_t lo = 0, hi = MAX_PAR - 1;
  if (n >= 16) {
    memcpy(&lo, p + 8, 4);
    memcpy(&hi, p + 12, 4);
  }
  if (lo >= MAX_PAR) lo = MAX_PAR - 1;
  if (hi >= MAX_PAR) hi = MAX_PAR - 1;
  if (hi < lo) hi = lo;
  sl_fuzz_write(path, p, n);
  restore_t r = {0};
  SL_FUZZ_CHECK(sl__kstate_create(MAX_PAR, lo, hi, &r.be) == SL_OK);
  SL_FUZZ_CHECK(sl__timers_create(&r.timers[0]) == SL_OK);
  SL_FUZZ_CHECK(sl__timers_create(&r.timers[1]) == SL_OK);
  sl_ckpt_reader_t rd = {on_states, on_entry, on_timer, &r};
  sl_error_t *err = NULL;
  int rc = sl__ckpt_read_state(path, n, ck, lo, hi, &rd, &err);
  sl_error_destroy(err);
  if (rc == SL_OK) {
    /* The operator declares what it finds, then reads every entry. */
    for (uint32_t i = 0; i < sl__kstate_n_states(r.be); i++) {
      sl_state_t *st = sl__kstate_state(r.be, i);
      sl_state_desc_t d = *sl__state_desc(st);
      d.reduce = reduce_keep;
      sl_state_t *decl;
      err = NULL;
      if (sl__kstate_register(r.be, &d, &decl, &err) != SL_OK) {
        sl_error_destroy(err);
        continue;
      }
      SL_FUZZ_CHECK(decl == st);
      (void)sl__state_for_each(st, visit, st);
    }
    int64_t ts;
    sl_bytes_t key;
    sl_bytes_init(&key);
    for (int d = 0; d < 2; d++)
      while (sl__timers_pop(r.timers[d], INT64_MAX, &ts, &key) == 1) {
      }
    sl_bytes_close(&key);
  }
  sl_free(r.states);
  sl__timers_destroy(r.timers[0]);
  sl__timers_destroy(r.timers[1]);
  sl__kstate_destroy(r.be);
}

/* Make every checksum of a state file valid where its structure allows. */
static void fix_checksums(uint8_t *p, size_t n) {
  if (n < 32) return;
  uint64_t hdr_len, index_off;
  memcpy(&hdr_len, p + n - 32, 8);
  memcpy(&index_off, p + n - 24, 8);
  memcpy(p + n - 8, "SLSTEND", 8);
  if (hdr_len > index_off || index_off > n - 32) return;
  uint64_t ilen = n - 32 - index_off;
  for (uint64_t x = index_off; x + 24 <= index_off + ilen; x += 24) {
    uint64_t off, len;
    memcpy(&off, p + x, 8);
    memcpy(&len, p + x + 8, 8);
    if (off > index_off || len > index_off - off) continue;
    uint64_t sck = XXH3_64bits(p + off, len);
    memcpy(p + x + 16, &sck, 8);
  }
  XXH3_state_t *hs = XXH3_createState();
  SL_FUZZ_CHECK(hs != NULL);
  XXH3_64bits_reset(hs);
  XXH3_64bits_update(hs, p, hdr_len);
  XXH3_64bits_update(hs, p + index_off, ilen);
  uint64_t ck = XXH3_64bits_digest(hs);
  XXH3_freeState(hs);
  memcpy(p + n - 16, &ck, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = sl_fuzz_setup();
  if (size > (1u << 20)) return 0;
  char path[512];
  snprintf(path, sizeof(path), "%s/op-0.state", dir);
  try_state(path, data, size);
  if (size >= 32) {
    uint8_t *p = malloc(size);
    SL_FUZZ_CHECK(p != NULL);
    memcpy(p, data, size);
    fix_checksums(p, size);
    try_state(path, p, size);
    free(p);
  }
  return 0;
}
