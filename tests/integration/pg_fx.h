/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers of the postgres sink tests (test_pg_sink.c, test_pg_fence.c): a
 * real PostgreSQL with a balances table, the sink's vtable driven as the
 * engine drives it, and assertions on the server's tables.
 */
#ifndef SL_TEST_PG_FX_H
#define SL_TEST_PG_FX_H

#include <stdio.h>

#include "sl_servers.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers */

static inline sl_server_t *start_pg(int max_prepared,
                                    const char *const *extra) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  o.max_prepared_transactions = max_prepared;
  o.extra_settings = extra;
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  return srv;
}

static inline PGconn *direct(const sl_server_t *srv) {
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(srv), &c, &err), err);
  return c;
}

static inline void sql_ok(PGconn *c, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(c, sql, NULL, &err), err);
}

static inline int64_t sql_int(PGconn *c, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(c, sql, &v, &err), err);
  return v;
}

/* The table as "k=v;k=v" ordered by the first column (or "" if empty). */
static inline char *sql_text(PGconn *c, const char *sql) {
  char *t = NULL;
  sl_error_t *err = NULL;
  int rc = sl_pg_query_text(c, sql, &t, &err);
  if (rc == SL_ENOTFOUND) {
    sl_error_destroy(err);
    return sl_strdup("");
  }
  SL_ASSERT_OK_E(rc, err);
  return t;
}

static inline void assert_text(PGconn *c, const char *sql, const char *want) {
  char *t = sql_text(c, sql);
  SL_ASSERT_EQ_STR(t, want);
  sl_free(t);
}

#define BALANCES                                                          \
  "SELECT string_agg(account || '=' || balance, ';' ORDER BY account) "   \
  "FROM balances"

static inline sl_schema_t *balance_schema(void) {
  sl_field_t f[] = {{"account", {SL_TYPE_INT64, 0, 0, false}},
                    {"balance", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *s = NULL;
  SL_ASSERT_OK(sl_schema_create(f, 2, &s, NULL));
  return s;
}

typedef struct rows_s {
  sl_row_builder_t b;
  sl_schema_t *schema;
} rows_t;

static inline const sl_row_t *mk(rows_t *r, sl_row_kind_t kind,
                                 int64_t account, int64_t balance) {
  static sl_row_t row;
  sl_row_builder_reset(&r->b, kind);
  sl_row_builder_set_i64(&r->b, 0, account);
  sl_row_builder_set_i64(&r->b, 1, balance);
  SL_ASSERT_OK(sl_row_builder_finish(&r->b, &row, NULL));
  return &row;
}

typedef struct fx_s {
  sl_server_t *srv;
  PGconn *db;
  rows_t rows;
  const sl_sink_vt_t *vt;
  void *ctx;
} fx_t;

static const char *const key_account[] = {"account"};

static inline void fx_start(fx_t *fx, int max_prepared) {
  memset(fx, 0, sizeof(*fx));
  fx->srv = start_pg(max_prepared, NULL);
  fx->db = direct(fx->srv);
  sql_ok(fx->db, "CREATE TABLE balances (account bigint PRIMARY KEY, "
                 "balance bigint NOT NULL CHECK (balance > -1000000))");
  fx->rows.schema = balance_schema();
  SL_ASSERT_OK(sl_row_builder_init(&fx->rows.b, fx->rows.schema));
}

static inline void fx_sink(fx_t *fx, sl_pg_sink_config_t *cfg) {
  sl_error_t *err = NULL;
  cfg->conninfo = cfg->conninfo ? cfg->conninfo : sl_server_conninfo(fx->srv);
  cfg->table = cfg->table ? cfg->table : "balances";
  SL_ASSERT_OK_E(sl_pg_sink_create(cfg, &fx->vt, &fx->ctx, &err), err);
}

static inline void fx_upsert_eo(fx_t *fx) {
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  fx_sink(fx, &cfg);
}

static inline void fx_stop(fx_t *fx) {
  if (fx->ctx) fx->vt->destroy(fx->ctx);
  sl_row_builder_close(&fx->rows.b);
  sl_schema_unref(fx->rows.schema);
  PQfinish(fx->db);
  sl_server_destroy(fx->srv);
}

static inline sl_sink_init_t winit(fx_t *fx, uint32_t subtask, uint32_t par,
                                   uint64_t epoch) {
  sl_sink_init_t in;
  memset(&in, 0, sizeof(in));
  in.subtask = subtask;
  in.parallelism = par;
  in.schema = fx->rows.schema;
  in.uid = "snk";
  in.job = "job1";
  in.epoch_id = epoch;
  return in;
}

static inline void *open_committer(fx_t *fx, uint32_t subtask, uint32_t par,
                                   const uint32_t *owned, uint32_t n_owned) {
  sl_committer_init_t ci;
  memset(&ci, 0, sizeof(ci));
  ci.job = "job1";
  ci.uid = "snk";
  ci.subtask = subtask;
  ci.parallelism = par;
  ci.owned_subtasks = owned;
  ci.n_owned_subtasks = n_owned;
  void *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->committer_open(fx->ctx, &ci, &c, &err), err);
  return c;
}

/* What the engine does before every exactly-once writer_open: a
 * committer of the subtask recovers, which sets the fence epoch the
 * writer expects (P5-P7). */
static inline void fence_subtask(fx_t *fx, uint32_t subtask) {
  void *c = open_committer(fx, subtask, subtask + 1, &subtask, 1);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->recover(c, &err), err);
  fx->vt->committer_close(c);
}

static inline void *open_writer(fx_t *fx, uint32_t subtask, uint64_t epoch) {
  if (sl_sink_is_transactional(fx->vt)) fence_subtask(fx, subtask);
  sl_sink_init_t in = winit(fx, subtask, 1, epoch);
  void *w = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->writer_open(fx->ctx, &in, &w, &err), err);
  return w;
}

static inline void wr(fx_t *fx, void *w, sl_row_kind_t kind, int64_t a,
                      int64_t b) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->write(w, mk(&fx->rows, kind, a, b), &err), err);
}

static inline void prep(fx_t *fx, void *w, uint64_t ckpt, sl_bytes_t *out) {
  sl_error_t *err = NULL;
  sl_bytes_clear(out);
  SL_ASSERT_OK_E(fx->vt->prepare(w, ckpt, out, &err), err);
}

static inline sl_commit_status_t commit(fx_t *fx, void *c, uint64_t ckpt,
                                        const sl_bytes_t *cm,
                                        uint32_t attempt) {
  sl_commit_status_t st = SL_COMMIT_FATAL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->commit(c, ckpt, 0, cm->data, cm->len, attempt, &st,
                                &err),
                 err);
  if (st == SL_COMMIT_LOST)
    SL_ASSERT_TRUE(err != NULL && strstr(sl_error_message(err), "42704"));
  sl_error_destroy(err);
  return st;
}

static inline void close_writer(fx_t *fx, void *w, bool ok) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->writer_close(w, ok, &err), err);
}

/* The error message of a failed writer_open (the test frees it). */
static inline char *open_fails(fx_t *fx, const sl_sink_init_t *in) {
  void *w = NULL;
  sl_error_t *err = NULL;
  int rc = fx->vt->writer_open(fx->ctx, in, &w, &err);
  SL_ASSERT_TRUE(rc != SL_OK);
  SL_ASSERT_TRUE(err != NULL);
  char *m = sl_strdup(sl_error_message(err));
  sl_error_destroy(err);
  return m;
}

static inline char *committer_fails(fx_t *fx, const sl_committer_init_t *ci) {
  void *c = NULL;
  sl_error_t *err = NULL;
  int rc = fx->vt->committer_open(fx->ctx, ci, &c, &err);
  SL_ASSERT_TRUE(rc != SL_OK);
  SL_ASSERT_TRUE(err != NULL);
  char *m = sl_strdup(sl_error_message(err));
  sl_error_destroy(err);
  return m;
}

static inline void assert_msg(char *m, const char *want) {
  SL_ASSERT_EQ_STR(m, want);
  sl_free(m);
}

static inline int64_t prepared_of_job(PGconn *db) {
  return sql_int(db, "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE "
                     "'sl/job1/%'");
}


#endif
