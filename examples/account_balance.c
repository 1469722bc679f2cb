/* SPDX-License-Identifier: Apache-2.0 */
/*
 * account_balance: per-account balances over a stream of deposits and
 * withdrawals, written against the public sluice C API only.
 *
 *     sluice-example-account-balance [--records N] [--keys K] [--seed S]
 *                                    [--parallelism P] [OUTPUT]
 *
 * The built-in generator produces N transactions (default 100000) over K
 * accounts (default 1000): an account id in [0, K) and an amount in cents
 * in [-1000, 1000] without 0 (positive: a deposit, negative: a
 * withdrawal).  The generator is deterministic: the same seed gives the
 * same transactions, at any parallelism.  A keyed process function keeps
 * each account's balance in value state and writes every change as a
 * changelog to OUTPUT (default out/balances.csv; missing directories are
 * created), as CSV with a header:
 *
 *     op,account,balance
 *     +I,17,250        first transaction of account 17: balance 2.50
 *     -U,17,250        a later one retracts the old balance ...
 *     +U,17,-120       ... and adds the new one
 *
 * Applying the changelog in order leaves exactly one row per account that
 * appeared: its final balance.  (A process function sees one key at a time
 * and cannot list its keys when the input ends, so it reports changes as
 * they happen; the sluice pipeline examples/pipelines/account_balance.yaml
 * uses the built-in aggregate with `emit: final` to write only the final
 * rows.)  The retraction rows make the file checkable on its own: each -U
 * must repeat the balance the account has at that point.
 *
 * The job is
 *
 *     transactions --key_by(key)--> balances --> file
 *
 * with P subtasks for the generator and the balances (default 2), and one
 * file writer, so that the output is a single file.  The rows of one
 * account reach the writer in order: an account always lives on the same
 * subtask, and channels keep order.
 *
 * Try:
 *     sluice-example-account-balance --records 20 --keys 3
 *     cat out/balances.csv
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* balances: the running balance of the current account. */

static int balance_open(sl_ctx_t *ctx, void *user) {
  (void)user;
  sl_state_desc_t desc = {.name = "balance", .kind = SL_STATE_VALUE,
                          .version = 1};
  sl_state_t *balance;
  int rc = sl_ctx_state(ctx, &desc, &balance);
  if (rc != SL_OK) return rc;
  sl_ctx_set_local(ctx, balance); /* this subtask's handle */
  return SL_OK;
}

static int emit(sl_ctx_t *ctx, sl_row_kind_t kind, int64_t account,
                int64_t balance) {
  sl_row_builder_t *b = sl_ctx_builder(ctx);
  sl_row_builder_set_kind(b, kind);
  sl_row_builder_set_i64(b, 0, account);
  sl_row_builder_set_i64(b, 1, balance);
  return sl_ctx_emit_builder(ctx);
}

/* Input rows: (key, amount).  The current key is the row's account. */
static int balance_process(sl_ctx_t *ctx, void *user, const sl_row_t *row) {
  (void)user;
  sl_state_t *state = sl_ctx_local(ctx);
  int64_t account = sl_row_get_i64(row, 0);
  int64_t amount = sl_row_get_i64(row, 1);
  int64_t old = 0;
  int rc = sl_value_get_i64(state, &old);
  if (rc == SL_ENOTFOUND) { /* a new account */
    if ((rc = sl_value_put_i64(state, amount)) != SL_OK) return rc;
    return emit(ctx, SL_ROW_INSERT, account, amount);
  }
  if (rc != SL_OK) return rc;
  int64_t now;
  if (__builtin_add_overflow(old, amount, &now))
    return sl_ctx_fail(ctx, SL_EOVERFLOW,
                       "the balance of account %lld overflows",
                       (long long)account);
  if ((rc = sl_value_put_i64(state, now)) != SL_OK) return rc;
  if ((rc = emit(ctx, SL_ROW_UPDATE_BEFORE, account, old)) != SL_OK) return rc;
  return emit(ctx, SL_ROW_UPDATE_AFTER, account, now);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice-example-account-balance [--records N] [--keys K]\n"
          "           [--seed S] [--parallelism P] [OUTPUT]\n"
          "Writes the changelog of per-account balances over N generated\n"
          "transactions (default 100000) on K accounts (default 1000) to\n"
          "OUTPUT (default out/balances.csv).\n");
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > max)
    return false;
  *out = v;
  return true;
}

int main(int argc, char **argv) {
  const char *path = "out/balances.csv";
  uint64_t records = 100000, keys = 1000, seed = 42, parallelism = 2;
  bool has_path = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    uint64_t *opt = NULL, max = UINT64_MAX, min = 0;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--records") == 0) {
      opt = &records;
      min = 1;
    } else if (strcmp(a, "--keys") == 0) {
      opt = &keys;
      min = 1;
    } else if (strcmp(a, "--seed") == 0) {
      opt = &seed;
    } else if (strcmp(a, "--parallelism") == 0) {
      opt = &parallelism;
      min = 1;
      max = 128;
    } else if (a[0] == '-' && a[1] != '\0') {
      usage(stderr);
      return 2;
    } else if (!has_path) {
      path = a;
      has_path = true;
      continue;
    } else {
      usage(stderr);
      return 2;
    }
    if (i + 1 >= argc || !parse_u64(argv[i + 1], max, opt) || *opt < min) {
      fprintf(stderr, "account-balance: %s needs a number from %llu to %llu\n",
              a, (unsigned long long)min, (unsigned long long)max);
      return 2;
    }
    i++;
  }

  sl_error_t *err = NULL;
  sl_schema_t *tx_schema = NULL, *out_schema = NULL;
  sl_job_t *job = NULL;
  int rc;

  /* The generator: columns key and amount, in that order. */
  sl_gen_config_t gen;
  sl_gen_config_init(&gen);
  gen.seed = seed;
  gen.count = records;
  gen.keys = keys;
  gen.columns = SL_GEN_COL_KEY | SL_GEN_COL_AMOUNT;
  const sl_source_vt_t *gen_vt;
  void *gen_ctx = NULL;
  if ((rc = sl_gen_source_create(&gen, &gen_vt, &gen_ctx, &tx_schema, &err)) !=
      SL_OK)
    goto fail;

  sl_field_t out_f[2] = {{"account", {SL_TYPE_INT64, 0, 0, false}},
                         {"balance", {SL_TYPE_INT64, 0, 0, false}}};
  if ((rc = sl_schema_create(out_f, 2, &out_schema, &err)) != SL_OK) {
    gen_vt->destroy(gen_ctx);
    goto fail;
  }

  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "account-balance";
  cfg.parallelism = (uint32_t)parallelism;
  if ((rc = sl_job_create(&cfg, &job, &err)) != SL_OK) {
    gen_vt->destroy(gen_ctx);
    goto fail;
  }

  /* Builder calls keep the first error in the job; sl_job_run reports it.
   * The job owns gen_ctx from here on, also on error. */
  sl_stream_t *s = sl_job_source(job, "transactions", gen_vt, gen_ctx,
                                 tx_schema);
  const char *key[] = {"key"};
  s = sl_stream_key_by_fields(s, key, 1);
  sl_process_fns_t fns = {.open = balance_open, .process = balance_process};
  s = sl_stream_process(s, "balances", out_schema, &fns, NULL);

  sl_file_sink_config_t fcfg = {.path = path,
                                .format = SL_FORMAT_CSV,
                                .csv_header = true,
                                .csv_delimiter = ',',
                                .changelog = true};
  const sl_sink_vt_t *sink_vt;
  void *sink_ctx;
  if ((rc = sl_file_sink_create(&fcfg, &sink_vt, &sink_ctx, &err)) != SL_OK)
    goto fail;
  sl_stream_sink(s, "file", sink_vt, sink_ctx);
  sl_stream_set_sink_parallelism(s, 1); /* one output file */

  if ((rc = sl_job_run(job, &err)) != SL_OK) goto fail;
  fprintf(stderr,
          "account-balance: %llu transactions on %llu accounts; changelog "
          "written to %s\n",
          (unsigned long long)records, (unsigned long long)keys, path);
  sl_job_destroy(job);
  sl_schema_unref(tx_schema);
  sl_schema_unref(out_schema);
  return 0;

fail:
  fprintf(stderr, "account-balance: %s\n",
          err ? sl_error_message(err) : sl_strerror(rc));
  sl_error_destroy(err);
  sl_job_destroy(job);
  sl_schema_unref(tx_schema);
  sl_schema_unref(out_schema);
  return 1;
}
