/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the `_sl_version` field the CDC reconciler reads
 * (src/ops/cdc_reconcile.c, sl__cdc_version_parse; layout in
 * src/ops/cdc_version.h).  The first byte n splits the rest into version a
 * (n bytes) and version b (the remainder).  A refused version has a
 * reason; a parsed one lies inside its bytes, a snapshot's domains
 * ascend; snapshot comparison is antisymmetric, agrees with the per-domain
 * sequence numbers, and a newer snapshot covers every binlog transaction
 * the older one covers.
 */
#include "fuzz_util.h"
#include "ops/cdc_version.h"

static bool parse(const uint8_t *p, size_t len, sl__cdc_version_t *v) {
  char why[160];
  why[0] = '\0';
  bool ok = sl__cdc_version_parse((sl_slice_t){p, (uint32_t)len}, v, why,
                                  sizeof(why));
  if (!ok) {
    SL_FUZZ_CHECK(why[0] != '\0');
    return false;
  }
  SL_FUZZ_CHECK(v->kind == 'S' || v->kind == 'B');
  SL_FUZZ_CHECK(v->raw.ptr == p && v->raw.len == len);
  if (v->kind == 'B') {
    SL_FUZZ_CHECK(len == 24);
    return true;
  }
  SL_FUZZ_CHECK(len == 4 + 12 * (size_t)v->n_dom);
  SL_FUZZ_CHECK(v->dom == p + 4);
  char buf[4096];
  sl__cdc_version_format(v, buf, sizeof(buf));
  SL_FUZZ_CHECK(buf[0] != '\0');
  return true;
}

/* The domains of a or b, one by one: d in a or b, returns false at the end. */
static bool next_domain(const sl__cdc_version_t *a, const sl__cdc_version_t *b,
                        uint32_t *i, uint32_t *j, uint32_t *out_d) {
  uint32_t da = UINT32_MAX, db = UINT32_MAX;
  if (*i < a->n_dom) memcpy(&da, a->dom + 12 * *i, 4);
  if (*j < b->n_dom) memcpy(&db, b->dom + 12 * *j, 4);
  if (*i >= a->n_dom && *j >= b->n_dom) return false;
  uint32_t d = *i < a->n_dom && (*j >= b->n_dom || da <= db) ? da : db;
  if (*i < a->n_dom && da == d) (*i)++;
  if (*j < b->n_dom && db == d) (*j)++;
  *out_d = d;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t n = data[0] < size - 1 ? data[0] : size - 1;
  const uint8_t *pa = data + 1, *pb = data + 1 + n;
  size_t la = n, lb = size - 1 - n;
  /* Own copies: the parser must not read past the given length. */
  uint8_t *ca = malloc(la ? la : 1), *cb = malloc(lb ? lb : 1);
  memcpy(ca, pa, la);
  memcpy(cb, pb, lb);
  sl__cdc_version_t a, b;
  bool is_a = parse(ca, la, &a), is_b = parse(cb, lb, &b);
  if (is_a && is_b && a.kind == 'S' && b.kind == 'S') {
    int ab = sl__cdc_version_cmp(&a, &b), ba = sl__cdc_version_cmp(&b, &a);
    SL_FUZZ_CHECK(sl__cdc_version_cmp(&a, &a) == 0);
    SL_FUZZ_CHECK(ab == 2 ? ba == 2 : ab == -ba);
    bool ge = true, le = true;
    uint32_t i = 0, j = 0, d;
    while (next_domain(&a, &b, &i, &j, &d)) {
      uint64_t sa = sl__cdc_version_seq(&a, d), sb = sl__cdc_version_seq(&b, d);
      if (sa < sb) ge = false;
      if (sa > sb) le = false;
      /* A newer (or equal) snapshot covers what the older covers. */
      if (ab == 1 || ab == 0) SL_FUZZ_CHECK(sa >= sb);
    }
    SL_FUZZ_CHECK(ab == (ge && le ? 0 : ge ? 1 : le ? -1 : 2));
  }
  if (is_a && is_b && a.kind == 'S' && b.kind == 'B') {
    /* Covered: a's sequence of b's domain at or after b's. */
    uint64_t s = sl__cdc_version_seq(&a, b.domain);
    bool found = false;
    for (uint32_t i = 0; i < a.n_dom; i++) {
      uint32_t d;
      uint64_t q;
      memcpy(&d, a.dom + 12 * i, 4);
      memcpy(&q, a.dom + 12 * i + 4, 8);
      if (d == b.domain) {
        SL_FUZZ_CHECK(s == q);
        found = true;
      }
    }
    if (!found) SL_FUZZ_CHECK(s == 0);
  }
  free(ca);
  free(cb);
  return 0;
}
