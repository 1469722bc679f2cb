/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seed's running example computed independently, for the tests that
 * check a sink's output against it: the same generator the pipelines read
 * (seed 42, 2 splits, key and amount columns) run through a plain summing
 * sink in this process, per account the balance and the number of deltas.
 * With is_distinct the account is seq * 2 + split instead of the key, so
 * every delta has an account of its own.  Header-only; the caller owns
 * the result and frees it with sl_balances_free.
 */
#ifndef SL_BALANCES_H
#define SL_BALANCES_H

#include <stdlib.h>
#include <string.h>

#include "sl_test.h"
#include "sluice/sluice.h"

typedef struct sl_balances_s {
  int64_t *bal, *n; /* per account */
  uint64_t n_accounts;
  bool is_distinct;
} sl_balances_t;

static int sl_balances_write_(void *w, const sl_row_t *row, sl_error_t **e) {
  (void)e;
  sl_balances_t *b = w;
  int64_t k, a;
  if (b->is_distinct) {
    k = sl_row_get_i64(row, 0) * 2 + sl_row_get_i32(row, 1);
    a = sl_row_get_i64(row, 2);
  } else {
    k = sl_row_get_i64(row, 0);
    a = sl_row_get_i64(row, 1);
  }
  if (k < 0 || (uint64_t)k >= b->n_accounts)
    SL_TEST_FAIL("account %lld", (long long)k);
  b->bal[k] += a;
  b->n[k]++;
  return SL_OK;
}
static int sl_balances_open_(void *c, const sl_sink_init_t *i, void **out,
                             sl_error_t **e) {
  (void)i, (void)e;
  *out = c;
  return SL_OK;
}
static int sl_balances_close_(void *w, bool ok, sl_error_t **e) {
  (void)w, (void)ok, (void)e;
  return SL_OK;
}
static void sl_balances_destroy_(void *c) { (void)c; }

/* Sum the generator's count deltas over keys accounts into *out. */
static inline void sl_balances_compute(uint64_t count, uint32_t keys,
                                       bool is_distinct, sl_balances_t *out) {
  static const sl_sink_vt_t vt = {"sum",
                                  sl_balances_open_,
                                  sl_balances_write_,
                                  NULL,
                                  sl_balances_close_,
                                  sl_balances_destroy_};
  out->is_distinct = is_distinct;
  out->n_accounts = is_distinct ? count + 2 : keys;
  out->bal = calloc(out->n_accounts, sizeof(int64_t));
  out->n = calloc(out->n_accounts, sizeof(int64_t));
  SL_ASSERT_TRUE(out->bal != NULL && out->n != NULL);
  sl_gen_config_t g;
  sl_gen_config_init(&g);
  g.seed = 42;
  g.count = count;
  g.keys = keys;
  g.splits = 2;
  g.columns = is_distinct
                  ? SL_GEN_COL_SEQ | SL_GEN_COL_SPLIT | SL_GEN_COL_AMOUNT
                  : SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT;
  const sl_source_vt_t *svt;
  void *ctx;
  sl_schema_t *schema;
  SL_ASSERT_OK(sl_gen_source_create(&g, &svt, &ctx, &schema, NULL));
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.parallelism = 1;
  sl_job_t *job;
  SL_ASSERT_OK(sl_job_create(&cfg, &job, NULL));
  sl_stream_t *s = sl_job_source(job, "g", svt, ctx, schema);
  SL_ASSERT_OK(sl_stream_sink(s, "sum", &vt, out));
  SL_ASSERT_OK(sl_job_run(job, NULL));
  sl_job_destroy(job);
  sl_schema_unref(schema);
}

/* "account=balance/n;..." ordered by account, accounts with deltas only;
 * the caller frees it with sl_free(). */
static inline char *sl_balances_table(const sl_balances_t *b) {
  sl_bytes_t t;
  sl_bytes_init(&t);
  for (uint64_t k = 0; k < b->n_accounts; k++)
    if (b->n[k])
      SL_ASSERT_OK(sl_bytes_printf(&t, "%s%llu=%lld/%lld", t.len ? ";" : "",
                                   (unsigned long long)k,
                                   (long long)b->bal[k], (long long)b->n[k]));
  SL_ASSERT_OK(sl_bytes_append(&t, "", 1));
  return (char *)t.data;
}

static inline void sl_balances_free(sl_balances_t *b) {
  free(b->bal);
  free(b->n);
  b->bal = b->n = NULL;
}

#endif
