/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres sink against a real PostgreSQL 15 (tests/tools/sl_servers):
 * its vtable driven directly, as the engine drives it (writer_open, write,
 * prepare, committer_open, commit, recover), with assertions on the
 * server's tables, pg_prepared_xacts and the commit-log markers; every
 * start check and bad input with its exact message; at-least-once never
 * going back in version.  Invariants P1-P4 are those of the design notes
 * in src/connectors/postgres/pg_sink.c.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "sl_servers.h"
#include "sl_test.h"

#include "pg_fx.h"

/* ------------------------------------------------------------------ */
/* Exactly-once: prepare, commit, markers                               */

/* Nothing is visible before commit; the epoch's last change per key wins;
 * commit is OK once and ALREADY after (P1, P3). */
SL_TEST(eo_prepare_then_commit) {
  fx_t fx;
  fx_start(&fx, 0);
  fx_upsert_eo(&fx);
  void *c = open_committer(&fx, 0, 1, (uint32_t[]){0}, 1);
  void *w = open_writer(&fx, 0, 5);
  wr(&fx, w, SL_ROW_INSERT, 1, 10);
  wr(&fx, w, SL_ROW_INSERT, 2, 20);
  wr(&fx, w, SL_ROW_UPDATE_BEFORE, 1, 10);
  wr(&fx, w, SL_ROW_UPDATE_AFTER, 1, 15);
  wr(&fx, w, SL_ROW_INSERT, 3, 30);
  wr(&fx, w, SL_ROW_DELETE, 2, 20);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->flush(w, &err), err);
  assert_text(fx.db, BALANCES, ""); /* flush makes nothing visible */
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  prep(&fx, w, 7, &cm);
  SL_ASSERT_TRUE(cm.len > 0);
  assert_text(fx.db, BALANCES, "");
  assert_text(fx.db, "SELECT string_agg(gid, ',') FROM pg_prepared_xacts",
              "sl/job1/snk/0/5");
  /* The next epoch is named 7: rows of it go into gid .../0/7.  Key 3 is
   * locked by the prepared epoch 5 until its commit: a full batch is kept
   * back instead of waiting (the commit runs on this same thread). */
  wr(&fx, w, SL_ROW_UPDATE_AFTER, 3, 33);
  SL_ASSERT_EQ_INT(commit(&fx, c, 7, &cm, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "1=15;3=30");
  sl_bytes_t cm2;
  sl_bytes_init(&cm2);
  prep(&fx, w, 9, &cm2);
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 1);
  SL_ASSERT_EQ_INT(commit(&fx, c, 9, &cm2, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "1=15;3=33");
  /* A second commit of the same committable (a restore, a lost reply). */
  SL_ASSERT_EQ_INT(commit(&fx, c, 7, &cm, 2), SL_COMMIT_ALREADY);
  SL_ASSERT_EQ_INT(commit(&fx, c, 9, &cm2, 2), SL_COMMIT_ALREADY);
  assert_text(fx.db,
              "SELECT string_agg(job || ':' || sink_uid || ':' || subtask || "
              "':' || epoch || ':' || checkpoint || ':' || gid, ',' ORDER BY "
              "epoch) FROM sluice_sink_commits",
              "job1:snk:0:5:7:sl/job1/snk/0/5,job1:snk:0:7:9:sl/job1/snk/0/7");
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  /* An empty epoch prepares nothing. */
  sl_bytes_t cm3;
  sl_bytes_init(&cm3);
  prep(&fx, w, 11, &cm3);
  SL_ASSERT_EQ_INT((int64_t)cm3.len, 0);
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  close_writer(&fx, w, true);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  sl_bytes_close(&cm2);
  sl_bytes_close(&cm3);
  fx_stop(&fx);
}

/* The reply to COMMIT PREPARED was lost: the transaction committed, the
 * retry gets 42704 and the marker proves the commit (ALREADY).  Rolled
 * back behind sluice's back: no marker, no prepared gid, LOST (P3). */
SL_TEST(eo_not_found_already_or_lost) {
  fx_t fx;
  fx_start(&fx, 0);
  fx_upsert_eo(&fx);
  void *c = open_committer(&fx, 0, 1, (uint32_t[]){0}, 1);
  void *w = open_writer(&fx, 0, 100);
  wr(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t a, b;
  sl_bytes_init(&a);
  sl_bytes_init(&b);
  prep(&fx, w, 101, &a);
  wr(&fx, w, SL_ROW_INSERT, 2, 20);
  prep(&fx, w, 102, &b);
  /* Committed by someone else (as if our reply was lost). */
  sql_ok(fx.db, "COMMIT PREPARED 'sl/job1/snk/0/100'");
  SL_ASSERT_EQ_INT(commit(&fx, c, 101, &a, 2), SL_COMMIT_ALREADY);
  /* Rolled back by someone else: the epoch is lost. */
  sql_ok(fx.db, "ROLLBACK PREPARED 'sl/job1/snk/0/101'");
  SL_ASSERT_EQ_INT(commit(&fx, c, 102, &b, 1), SL_COMMIT_LOST);
  assert_text(fx.db, BALANCES, "1=10");
  SL_ASSERT_EQ_INT(sql_int(fx.db, "SELECT count(*) FROM sluice_sink_commits"),
                   1);
  /* A malformed committable is an error, never a guess. */
  sl_commit_status_t st;
  sl_error_t *err = NULL;
  uint8_t junk[5] = {1, 2, 3, 4, 5};
  SL_ASSERT_EQ_INT(fx.vt->commit(c, 103, 0, junk, 5, 1, &st, &err),
                   SL_ECORRUPT);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask 0: the committable of subtask "
                   "0 for checkpoint 103 is malformed (5 bytes, version 1)");
  sl_error_destroy(err);
  close_writer(&fx, w, true);
  fx.vt->committer_close(c);
  sl_bytes_close(&a);
  sl_bytes_close(&b);
  fx_stop(&fx);
}

/* The server restarted between prepare and commit: the prepared
 * transaction survives; the committer's connection is gone, so the first
 * attempt is RETRY and the next one commits. */
SL_TEST(eo_server_restart_before_commit) {
  fx_t fx;
  fx_start(&fx, 0);
  fx_upsert_eo(&fx);
  void *c = open_committer(&fx, 0, 1, (uint32_t[]){0}, 1);
  void *w = open_writer(&fx, 0, 1);
  wr(&fx, w, SL_ROW_INSERT, 4, 40);
  sl_bytes_t a;
  sl_bytes_init(&a);
  prep(&fx, w, 2, &a);
  PQfinish(fx.db);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_restart(fx.srv, SL_SERVER_STOP_CRASH, &err), err);
  fx.db = direct(fx.srv);
  sl_commit_status_t st = commit(&fx, c, 2, &a, 1);
  if (st == SL_COMMIT_RETRY) st = commit(&fx, c, 2, &a, 2);
  SL_ASSERT_EQ_INT(st, SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "4=40");
  /* The writer's connection died with the restart: its next statement
   * fails the task. */
  wr(&fx, w, SL_ROW_INSERT, 5, 50);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_TRUE(fx.vt->prepare(w, 3, &b, &err) != SL_OK);
  printf("%s\n", sl_error_message(err));
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "postgres sink 'snk' subtask "
                        "0: reading pg_prepared_xacts: server closed the "
                        "connection unexpectedly") != NULL);
  sl_error_destroy(err);
  err = NULL;
  (void)fx.vt->writer_close(w, false, &err);
  sl_error_destroy(err);
  fx.vt->committer_close(c);
  sl_bytes_close(&a);
  sl_bytes_close(&b);
  fx_stop(&fx);
}

/* A failed statement aborts the epoch's transaction; a prepare after it is
 * answered ROLLBACK by the server and fails (P2); nothing is prepared. */
SL_TEST(eo_failed_statement_fails_prepare) {
  fx_t fx;
  fx_start(&fx, 0);
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  cfg.batch_size = 1; /* each row is sent at once */
  fx_sink(&fx, &cfg);
  void *w = open_writer(&fx, 0, 40);
  wr(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_error_t *err = NULL;
  SL_ASSERT_TRUE(fx.vt->write(w, mk(&fx.rows, SL_ROW_INSERT, 2, -2000000),
                              &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask 0: INSERT ... ON CONFLICT: "
                   "SQLSTATE 23514: ERROR: new row for relation \"balances\" "
                   "violates check constraint \"balances_balance_check\" "
                   "DETAIL: Failing row contains (2, -2000000).");
  sl_error_destroy(err);
  err = NULL;
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  SL_ASSERT_TRUE(fx.vt->prepare(w, 41, &cm, &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask 0: PREPARE TRANSACTION "
                   "'sl/job1/snk/0/40' for checkpoint 41 answered ROLLBACK: "
                   "the transaction had failed and was rolled back, epoch 40 "
                   "is not prepared");
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT((int64_t)cm.len, 0);
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  assert_text(fx.db, BALANCES, "");
  err = NULL;
  SL_ASSERT_TRUE(fx.vt->prepare(w, 42, &cm, &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask 0: cannot prepare checkpoint "
                   "42: the writer failed earlier");
  sl_error_destroy(err);
  close_writer(&fx, w, false);
  sl_bytes_close(&cm);
  fx_stop(&fx);
}

/* recover rolls back the lingering gids of owned subtasks only, and never
 * one a committable given to commit() names (P4). */
SL_TEST(eo_recover_owned_only) {
  fx_t fx;
  fx_start(&fx, 0);
  fx_upsert_eo(&fx);
  static const char *const gids[] = {
      "sl/job1/snk/0/3",  "sl/job1/snk/1/3",   "sl/job1/snk/2/4",
      "sl/job1/snk/3/4",  "sl/job1/other/0/3", "sl/job2/snk/0/3",
      "sl/job1/snk/0/x",  "sl/job1/snk/0/3/9", NULL};
  for (int i = 0; gids[i]; i++) {
    char q[128];
    sql_ok(fx.db, "BEGIN");
    snprintf(q, sizeof(q), "PREPARE TRANSACTION '%s'", gids[i]);
    sql_ok(fx.db, q);
  }
  /* A writer of subtask 2 prepared epoch 8 (checkpoint 9) before the
   * "failure"; the restored committable names it and its commit answered
   * RETRY in the real world; here we commit it and prepare another that
   * stays named. */
  /* New parallelism 2, subtask 0 owns old subtasks 0 and 2. */
  void *c = open_committer(&fx, 0, 2, (uint32_t[]){0, 2}, 2);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  assert_text(fx.db,
              "SELECT string_agg(gid, ',' ORDER BY gid) FROM "
              "pg_prepared_xacts",
              "sl/job1/other/0/3,sl/job1/snk/0/3/9,sl/job1/snk/0/x,"
              "sl/job1/snk/1/3,sl/job1/snk/3/4,sl/job2/snk/0/3");
  /* That recover also fenced subtask 2 (owned): a writer of it opens
   * without a recover of its own. */
  sl_sink_init_t in = winit(&fx, 2, 1, 8);
  void *w = NULL;
  SL_ASSERT_OK_E(fx.vt->writer_open(fx.ctx, &in, &w, &err), err);
  wr(&fx, w, SL_ROW_INSERT, 7, 70);
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  prep(&fx, w, 9, &cm);
  close_writer(&fx, w, true);
  /* The committer has seen the committable of gid sl/job1/snk/2/8: make
   * the commit answer RETRY-free by committing, then check that recover
   * leaves a named gid alone by re-preparing the same name. */
  SL_ASSERT_EQ_INT(commit(&fx, c, 9, &cm, 1), SL_COMMIT_OK);
  sql_ok(fx.db, "BEGIN");
  sql_ok(fx.db, "PREPARE TRANSACTION 'sl/job1/snk/2/8'");
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  assert_text(fx.db,
              "SELECT string_agg(gid, ',' ORDER BY gid) FROM "
              "pg_prepared_xacts",
              "sl/job1/other/0/3,sl/job1/snk/0/3/9,sl/job1/snk/0/x,"
              "sl/job1/snk/1/3,sl/job1/snk/2/8,sl/job1/snk/3/4,"
              "sl/job2/snk/0/3");
  /* Idempotent: a second recover changes nothing. */
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 6);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  fx_stop(&fx);
}

/* Mode insert appends through COPY; text with tabs, newlines, backslashes
 * and quotes, nulls, bytes, decimals and timestamps arrive unchanged. */
SL_TEST(insert_copy_types) {
  sl_server_t *srv = start_pg(0, NULL);
  PGconn *db = direct(srv);
  sql_ok(db, "CREATE TABLE ev (id integer, name text, amount numeric(12,2), "
             "ts timestamptz, raw bytea, ok boolean, x double precision)");
  sl_field_t f[] = {{"id", {SL_TYPE_INT32, 0, 0, false}},
                    {"name", {SL_TYPE_STRING, 0, 0, true}},
                    {"amount", {SL_TYPE_DECIMAL, 10, 2, false}},
                    {"ts", {SL_TYPE_TIMESTAMP, 0, 0, false}},
                    {"raw", {SL_TYPE_BYTES, 0, 0, true}},
                    {"ok", {SL_TYPE_BOOL, 0, 0, false}},
                    {"x", {SL_TYPE_FLOAT64, 0, 0, false}}};
  sl_schema_t *schema = NULL;
  SL_ASSERT_OK(sl_schema_create(f, 7, &schema, NULL));
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.conninfo = sl_server_conninfo(srv);
  cfg.table = "ev";
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_sink_create(&cfg, &vt, &ctx, &err), err);
  sl_committer_init_t ci = {"job1", "snk", 0, 1, 0, 0, (uint32_t[]){0}, 1, 1};
  void *c = NULL, *w = NULL;
  SL_ASSERT_OK_E(vt->committer_open(ctx, &ci, &c, &err), err);
  SL_ASSERT_OK_E(vt->recover(c, &err), err);
  sl_sink_init_t in = {0, 1, schema, "snk", false, 0, "job1", 1};
  SL_ASSERT_OK_E(vt->writer_open(ctx, &in, &w, &err), err);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, schema));
  for (int i = 0; i < 2500; i++) {
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    sl_row_builder_set_i32(&b, 0, i);
    if (i == 7) {
      sl_row_builder_set_null(&b, 1);
      sl_row_builder_set_null(&b, 4);
    } else {
      static const char name[] = "a\tb\nc\\d'e\"\r";
      SL_ASSERT_OK(sl_row_builder_set_str(&b, 1, name, sizeof(name) - 1));
      SL_ASSERT_OK(sl_row_builder_set_str(&b, 4, "\x00\xff\\", 3));
    }
    sl_row_builder_set_i64(&b, 2, -12345 - i); /* -123.45 */
    sl_row_builder_set_i64(&b, 3, 1700000000123456LL);
    sl_row_builder_set_bool(&b, 5, i % 2 == 0);
    sl_row_builder_set_f64(&b, 6, 0.1 * i);
    sl_row_t row;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
    SL_ASSERT_OK_E(vt->write(w, &row, &err), err);
  }
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  SL_ASSERT_OK_E(vt->prepare(w, 2, &cm, &err), err);
  sl_commit_status_t st;
  SL_ASSERT_OK_E(vt->commit(c, 2, 0, cm.data, cm.len, 1, &st, &err), err);
  SL_ASSERT_EQ_INT(st, SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(sql_int(db, "SELECT count(*) FROM ev"), 2500);
  assert_text(db, "SELECT name || '|' || amount || '|' || ts || '|' || "
                  "encode(raw, 'hex') || '|' || ok || '|' || x FROM ev "
                  "WHERE id = 10",
              "a\tb\nc\\d'e\"\r|-123.55|2023-11-14 22:13:20.123456+00|"
              "00ff5c|true|1");
  assert_text(db, "SELECT coalesce(name, 'NULL') || coalesce(encode(raw, "
                  "'hex'), 'NULL') FROM ev WHERE id = 7",
              "NULLNULL");
  /* A retraction in mode insert is refused by name. */
  sl_row_builder_reset(&b, SL_ROW_DELETE);
  sl_row_builder_set_i32(&b, 0, 1);
  sl_row_builder_set_i64(&b, 2, 1);
  sl_row_builder_set_i64(&b, 3, 1);
  sl_row_builder_set_bool(&b, 5, true);
  sl_row_builder_set_f64(&b, 6, 1);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
  SL_ASSERT_EQ_INT(vt->write(w, &row, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask 0: mode insert got a -D row; "
                   "updates and deletes need mode upsert with a key");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_OK_E(vt->writer_close(w, true, &err), err);
  vt->committer_close(c);
  vt->destroy(ctx);
  sl_row_builder_close(&b);
  sl_bytes_close(&cm);
  sl_schema_unref(schema);
  PQfinish(db);
  sl_server_destroy(srv);
}

/* ------------------------------------------------------------------ */
/* At-least-once                                                        */

/* Each row carries its version; an update or delete of an older version
 * never replaces a newer one (seed 000 §7.4). */
SL_TEST(alo_never_goes_back) {
  fx_t fx;
  fx_start(&fx, 0);
  sql_ok(fx.db, "ALTER TABLE balances ADD COLUMN sluice_epoch bigint NOT "
                "NULL");
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  cfg.key = key_account;
  cfg.n_key = 1;
  fx_sink(&fx, &cfg);
  SL_ASSERT_TRUE(!sl_sink_is_transactional(fx.vt));
  sl_error_t *err = NULL;
  /* The newer attempt (epoch 10) writes first. */
  void *w10 = open_writer(&fx, 0, 10);
  wr(&fx, w10, SL_ROW_INSERT, 1, 100);
  wr(&fx, w10, SL_ROW_INSERT, 3, 300);
  SL_ASSERT_OK_E(fx.vt->flush(w10, &err), err);
  assert_text(fx.db, BALANCES, "1=100;3=300");
  /* A late replay of an older attempt (epoch 5): key 1 and the delete of
   * key 3 are older than what is there; key 2 is new. */
  void *w5 = open_writer(&fx, 0, 5);
  wr(&fx, w5, SL_ROW_UPDATE_AFTER, 1, 50);
  wr(&fx, w5, SL_ROW_INSERT, 2, 20);
  wr(&fx, w5, SL_ROW_DELETE, 3, 300);
  SL_ASSERT_OK_E(fx.vt->flush(w5, &err), err);
  assert_text(fx.db, BALANCES, "1=100;2=20;3=300");
  assert_text(fx.db, "SELECT string_agg(account || '@' || sluice_epoch, ';' "
                     "ORDER BY account) FROM balances",
              "1@10;2@5;3@10");
  /* The same epoch replays idempotently; a newer one updates and deletes. */
  wr(&fx, w10, SL_ROW_UPDATE_AFTER, 1, 100);
  SL_ASSERT_OK_E(fx.vt->flush(w10, &err), err);
  void *w12 = open_writer(&fx, 0, 12);
  wr(&fx, w12, SL_ROW_UPDATE_AFTER, 2, 22);
  wr(&fx, w12, SL_ROW_DELETE, 3, 300);
  close_writer(&fx, w12, true); /* close(success) commits */
  assert_text(fx.db, BALANCES, "1=100;2=22");
  /* A replay of epoch 5 after all that still changes nothing. */
  wr(&fx, w5, SL_ROW_UPDATE_AFTER, 2, 20);
  wr(&fx, w5, SL_ROW_UPDATE_AFTER, 1, 50);
  SL_ASSERT_OK_E(fx.vt->flush(w5, &err), err);
  assert_text(fx.db, BALANCES, "1=100;2=22");
  close_writer(&fx, w5, true);
  close_writer(&fx, w10, true);
  fx_stop(&fx);
}

/* version_field: the row's own version orders replays. */
SL_TEST(alo_version_field) {
  sl_server_t *srv = start_pg(0, NULL);
  PGconn *db = direct(srv);
  sql_ok(db, "CREATE TABLE v (k bigint PRIMARY KEY, val bigint, seq bigint, "
             "ver bigint NOT NULL)");
  sl_field_t f[] = {{"k", {SL_TYPE_INT64, 0, 0, false}},
                    {"val", {SL_TYPE_INT64, 0, 0, false}},
                    {"seq", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema = NULL;
  SL_ASSERT_OK(sl_schema_create(f, 3, &schema, NULL));
  static const char *key[] = {"k"};
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.conninfo = sl_server_conninfo(srv);
  cfg.table = "v";
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  cfg.key = key;
  cfg.n_key = 1;
  cfg.epoch_column = "ver";
  cfg.version_field = "seq";
  const sl_sink_vt_t *vt;
  void *ctx, *w;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_sink_create(&cfg, &vt, &ctx, &err), err);
  sl_sink_init_t in = {0, 1, schema, "snk", false, 0, "job1", 0};
  SL_ASSERT_OK_E(vt->writer_open(ctx, &in, &w, &err), err);
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, schema));
  /* Versions 5, 9, then a replay of 7 and 5: the value of 9 stays. */
  int64_t seqs[] = {5, 9, 7, 5};
  for (int i = 0; i < 4; i++) {
    sl_row_builder_reset(&b, SL_ROW_UPDATE_AFTER);
    sl_row_builder_set_i64(&b, 0, 1);
    sl_row_builder_set_i64(&b, 1, seqs[i] * 10);
    sl_row_builder_set_i64(&b, 2, seqs[i]);
    sl_row_t row;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
    SL_ASSERT_OK_E(vt->write(w, &row, &err), err);
    SL_ASSERT_OK_E(vt->flush(w, &err), err);
  }
  assert_text(db, "SELECT val || '@' || ver FROM v", "90@9");
  SL_ASSERT_OK_E(vt->writer_close(w, true, &err), err);
  vt->destroy(ctx);
  sl_row_builder_close(&b);
  sl_schema_unref(schema);
  PQfinish(db);
  sl_server_destroy(srv);
}

/* ------------------------------------------------------------------ */
/* Start checks and bad input, each with its exact message               */

SL_TEST(bad_config) {
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.table = "t";
  SL_ASSERT_EQ_INT(sl_pg_sink_create(&cfg, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink: 'conninfo' is required");
  sl_error_destroy(err);
  err = NULL;
  cfg.conninfo = "host=x";
  cfg.table = "";
  SL_ASSERT_EQ_INT(sl_pg_sink_create(&cfg, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "postgres sink: 'table' is required");
  sl_error_destroy(err);
  err = NULL;
  cfg.table = "t";
  cfg.mode = SL_PG_MODE_UPSERT;
  SL_ASSERT_EQ_INT(sl_pg_sink_create(&cfg, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink: mode upsert needs 'key' (the columns of a "
                   "primary key or unique index)");
  sl_error_destroy(err);
  err = NULL;
  cfg.mode = SL_PG_MODE_INSERT;
  cfg.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  SL_ASSERT_EQ_INT(sl_pg_sink_create(&cfg, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink: delivery at-least-once needs mode upsert "
                   "with a key: replayed inserts would duplicate rows");
  sl_error_destroy(err);
  err = NULL;
  cfg.delivery = SL_DELIVERY_EXACTLY_ONCE;
  cfg.key = key_account;
  cfg.n_key = 1;
  SL_ASSERT_EQ_INT(sl_pg_sink_create(&cfg, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink: 'key' is for mode upsert; mode insert "
                   "appends rows");
  sl_error_destroy(err);
}

/* A free port on 127.0.0.1 nobody listens on. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SL_ASSERT_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t n = sizeof(a);
  SL_ASSERT_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  close(fd);
  return ntohs(a.sin_port);
}

SL_TEST(bad_unreachable_host) {
  int port = closed_port();
  char ci[128], want[512];
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d dbname=x user=x", port);
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.conninfo = ci;
  cfg.table = "balances";
  cfg.connect_timeout_s = 3;
  fx_t fx;
  memset(&fx, 0, sizeof(fx));
  fx.rows.schema = balance_schema();
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_sink_create(&cfg, &fx.vt, &fx.ctx, &err), err);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  sl_sink_init_t in = winit(&fx, 0, 1, 1);
  snprintf(want, sizeof(want),
           "postgres sink 'snk' subtask 0: cannot connect to 127.0.0.1:%d "
           "(connect_timeout 3 s): connection to server at \"127.0.0.1\", "
           "port %d failed: Connection refused Is the server running on "
           "that host and accepting TCP/IP connections?", port, port);
  assert_msg(open_fails(&fx, &in), want);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  SL_ASSERT_TRUE(t1.tv_sec - t0.tv_sec <= 4);
  fx.vt->destroy(fx.ctx);
  sl_schema_unref(fx.rows.schema);
}

SL_TEST(bad_wrong_password) {
  /* Password authentication for role bob only; everyone else is trusted
   * (the test servers' own connections). */
  char hba[256];
  snprintf(hba, sizeof(hba), "%s/pg_hba_test.conf", sl_test_dir());
  sl_test_write_file(hba, "local all all trust\n"
                          "host all bob 127.0.0.1/32 scram-sha-256\n"
                          "host all all 127.0.0.1/32 trust\n");
  char opt[300];
  snprintf(opt, sizeof(opt), "hba_file=%s", hba);
  const char *extra[] = {opt, NULL};
  fx_t fx;
  memset(&fx, 0, sizeof(fx));
  fx.srv = start_pg(0, extra);
  fx.db = direct(fx.srv);
  sql_ok(fx.db, "CREATE ROLE bob LOGIN PASSWORD 'right'");
  char ci[256];
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d dbname=postgres user=bob "
           "password=wrong sslmode=disable", sl_server_port(fx.srv));
  fx.rows.schema = balance_schema();
  SL_ASSERT_OK(sl_row_builder_init(&fx.rows.b, fx.rows.schema));
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.conninfo = ci;
  fx_sink(&fx, &cfg);
  sl_sink_init_t in = winit(&fx, 0, 1, 1);
  char want[512];
  snprintf(want, sizeof(want),
           "postgres sink 'snk' subtask 0: cannot connect to 127.0.0.1:%d "
           "(connect_timeout 10 s): connection to server at \"127.0.0.1\", "
           "port %d failed: FATAL: password authentication failed for user "
           "\"bob\"", sl_server_port(fx.srv), sl_server_port(fx.srv));
  assert_msg(open_fails(&fx, &in), want);
  fx_stop(&fx);
}

SL_TEST(bad_prepared_disabled) {
  fx_t fx;
  fx_start(&fx, -1);
  fx_upsert_eo(&fx);
  sl_committer_init_t ci = {"job1", "snk", 0, 2, 0, 0, (uint32_t[]){0}, 1, 1};
  assert_msg(committer_fails(&fx, &ci),
             "postgres sink 'snk' subtask 0: prepared transactions are "
             "disabled on the server (SQLSTATE 55000: "
             "max_prepared_transactions = 0); exactly-once delivery needs "
             "max_prepared_transactions >= 4: set it in postgresql.conf and "
             "restart the server, or use delivery: at-least-once");
  fx_stop(&fx);
}

SL_TEST(bad_prepared_too_few) {
  fx_t fx;
  fx_start(&fx, 5);
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  cfg.max_concurrent_checkpoints = 2;
  fx_sink(&fx, &cfg);
  sl_committer_init_t ci = {"job1", "snk", 1, 2, 0, 0, (uint32_t[]){1}, 1, 1};
  assert_msg(committer_fails(&fx, &ci),
             "postgres sink 'snk' subtask 1: max_prepared_transactions = 5 is "
             "too small: parallelism 2 x (2 concurrent checkpoints + 1) "
             "needs at least 6");
  fx_stop(&fx);
}

/* 53200 at run time: the slots are taken by other prepared transactions;
 * prepare fails the task with a message naming the setting, and the
 * epoch's rows are not lost (nothing committed, the restore replays). */
SL_TEST(bad_prepared_limit_reached) {
  fx_t fx;
  fx_start(&fx, 2);
  fx_upsert_eo(&fx);
  void *c = open_committer(&fx, 0, 1, (uint32_t[]){0}, 1);
  void *w = open_writer(&fx, 0, 1);
  PGconn *o = direct(fx.srv);
  sql_ok(o, "BEGIN");
  sql_ok(o, "PREPARE TRANSACTION 'other1'");
  sql_ok(o, "BEGIN");
  sql_ok(o, "PREPARE TRANSACTION 'other2'");
  wr(&fx, w, SL_ROW_INSERT, 1, 1);
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  sl_error_t *err = NULL;
  SL_ASSERT_TRUE(fx.vt->prepare(w, 2, &cm, &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "the server's limit of prepared transactions "
                   "(max_prepared_transactions) is reached; raise it or "
                   "commit or roll back the prepared transactions that hold "
                   "it (pg_prepared_xacts): postgres sink 'snk' subtask 0: "
                   "PREPARE TRANSACTION: SQLSTATE 53200: ERROR: maximum "
                   "number of prepared transactions reached HINT: Increase "
                   "max_prepared_transactions (currently 2).");
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  assert_text(fx.db, BALANCES, "");
  (void)fx.vt->writer_close(w, false, NULL);
  fx.vt->committer_close(c);
  sql_ok(o, "ROLLBACK PREPARED 'other1'");
  sql_ok(o, "ROLLBACK PREPARED 'other2'");
  PQfinish(o);
  sl_bytes_close(&cm);
  fx_stop(&fx);
}

SL_TEST(bad_table_and_columns) {
  fx_t fx;
  fx_start(&fx, 0);
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.table = "missing";
  fx_sink(&fx, &cfg);
  sl_sink_init_t in = winit(&fx, 0, 1, 1);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: table 'missing' does not exist "
             "(create it before starting the job; docs/connectors.md)");
  fx.vt->destroy(fx.ctx);
  /* A column of the wrong type. */
  sql_ok(fx.db, "CREATE TABLE wrongtype (account bigint, balance text)");
  sl_pg_sink_config_init(&cfg);
  cfg.table = "wrongtype";
  fx_sink(&fx, &cfg);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: column 'balance' of table "
             "'wrongtype' is text, but field 'balance' is int64, which needs "
             "bigint or numeric");
  fx.vt->destroy(fx.ctx);
  /* A missing column. */
  sql_ok(fx.db, "CREATE TABLE nocol (account bigint)");
  sl_pg_sink_config_init(&cfg);
  cfg.table = "nocol";
  fx_sink(&fx, &cfg);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: table 'nocol' has no column "
             "'balance' (field 2 of the sink's schema)");
  fx.vt->destroy(fx.ctx);
  /* Upsert without a unique index on the key. */
  sql_ok(fx.db, "CREATE TABLE nokey (account bigint, balance bigint)");
  sl_pg_sink_config_init(&cfg);
  cfg.table = "nokey";
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  fx_sink(&fx, &cfg);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: table 'nokey' has no primary "
             "key or unique index on exactly the key (account); mode upsert "
             "needs one");
  fx.vt->destroy(fx.ctx);
  /* At-least-once without the version column. */
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  cfg.key = key_account;
  cfg.n_key = 1;
  fx_sink(&fx, &cfg);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: table 'balances' has no column "
             "'sluice_epoch'; at-least-once delivery keeps each row's "
             "version there (add it: sluice_epoch bigint NOT NULL)");
  fx.vt->destroy(fx.ctx);
  /* A key that is not a field. */
  static const char *bad_key[] = {"acount"};
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = bad_key;
  cfg.n_key = 1;
  fx_sink(&fx, &cfg);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: key column 'acount' is not a "
             "field of the sink's schema");
  /* sl_pg_sink_check runs the same checks (sluice validate --connect). */
  sl_error_t *err = NULL;
  SL_ASSERT_TRUE(sl_pg_sink_check(fx.ctx, "job1", "snk", fx.rows.schema, 1,
                                  &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk': key column 'acount' is not a field "
                   "of the sink's schema");
  sl_error_destroy(err);
  fx.vt->destroy(fx.ctx);
  fx.ctx = NULL;
  fx_upsert_eo(&fx);
  err = NULL;
  SL_ASSERT_OK_E(sl_pg_sink_check(fx.ctx, "job1", "snk", fx.rows.schema, 4,
                                  &err), err);
  fx_stop(&fx);
}

SL_TEST(bad_gid_too_long) {
  fx_t fx;
  fx_start(&fx, 0);
  fx_upsert_eo(&fx);
  char job[101], uid[101];
  memset(job, 'j', 100);
  job[100] = '\0';
  memset(uid, 'u', 60);
  uid[60] = '\0';
  sl_committer_init_t ci = {job, uid, 0, 1, 0, 0, (uint32_t[]){0}, 1, 1};
  char want[600];
  /* 3 + 100 + 1 + 60 + 1 + 10 + 1 + 20 = 196: fits. */
  void *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->committer_open(fx.ctx, &ci, &c, &err), err);
  fx.vt->committer_close(c);
  memset(uid, 'u', 70);
  uid[70] = '\0';
  snprintf(want, sizeof(want),
           "postgres sink '%s' subtask 0: transaction ids \"sl/<job>/<sink "
           "uid>/<subtask>/<epoch>\" would be up to 206 bytes, over "
           "PostgreSQL's limit of 199; shorten the job name (100 bytes) or "
           "the sink uid (70 bytes) by 7", uid);
  assert_msg(committer_fails(&fx, &ci), want);
  sl_sink_init_t in = winit(&fx, 0, 1, 1);
  in.job = job;
  in.uid = uid;
  assert_msg(open_fails(&fx, &in), want);
  fx_stop(&fx);
}

/* Epoch 2 changes a key that the prepared epoch 1 still locks: mid-epoch
 * batches are kept back (no wait), and a prepare whose checkpoint 1 never
 * commits (aborted, say) fails after lock_timeout_ms with a message that
 * says why, instead of waiting forever on its own thread. */
SL_TEST(eo_conflict_with_own_prepared) {
  fx_t fx;
  fx_start(&fx, 0);
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  cfg.batch_size = 2;
  cfg.lock_timeout_ms = 200;
  fx_sink(&fx, &cfg);
  void *c = open_committer(&fx, 0, 1, (uint32_t[]){0}, 1);
  void *w = open_writer(&fx, 0, 1);
  wr(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t a, b;
  sl_bytes_init(&a);
  sl_bytes_init(&b);
  prep(&fx, w, 2, &a);
  for (int i = 0; i < 50; i++) /* 25 full batches, none sent */
    wr(&fx, w, SL_ROW_UPDATE_AFTER, 1 + i % 3, 100 + i);
  sl_error_t *err = NULL;
  SL_ASSERT_TRUE(fx.vt->prepare(w, 3, &b, &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "epoch 2 changes rows that a prepared transaction of this "
                   "subtask still locks (its checkpoint has not completed, "
                   "or was aborted); waited lock_timeout_ms = 200; the "
                   "restore commits or rolls it back: postgres sink 'snk' "
                   "subtask 0: INSERT ... ON CONFLICT: SQLSTATE 55P03: "
                   "ERROR: canceling statement due to lock timeout CONTEXT: "
                   "while inserting index tuple (0,1) in relation "
                   "\"balances\"");
  sl_error_destroy(err);
  (void)fx.vt->writer_close(w, false, NULL);
  /* The restore commits epoch 1; a new writer then writes freely. */
  SL_ASSERT_EQ_INT(commit(&fx, c, 2, &a, 1), SL_COMMIT_OK);
  w = open_writer(&fx, 0, 4);
  for (int i = 0; i < 50; i++)
    wr(&fx, w, SL_ROW_UPDATE_AFTER, 1 + i % 3, 100 + i);
  prep(&fx, w, 5, &b);
  SL_ASSERT_EQ_INT(commit(&fx, c, 5, &b, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "1=148;2=149;3=147");
  close_writer(&fx, w, true);
  fx.vt->committer_close(c);
  sl_bytes_close(&a);
  sl_bytes_close(&b);
  fx_stop(&fx);
}

/* ------------------------------------------------------------------ */
/* Pipeline files: sluice validate, with and without --connect           */

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

/* Run bin/sluice with args; its exit code, and stdout+stderr in *out. */
static int run_sluice(const char *const *args, char **out) {
  char bin[4300], outp[4300];
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(outp, sizeof(outp), "%s/sluice-out.txt", sl_test_dir());
  const char *argv[16];
  int n = 0;
  argv[n++] = bin;
  for (int i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) SL_TEST_FAIL("cannot run %s: %s", bin, strerror(rc));
  int st;
  SL_ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  *out = sl_test_read_file(outp, NULL);
  SL_ASSERT_TRUE(WIFEXITED(st));
  return WEXITSTATUS(st);
}

static const char *pipeline_file(const char *sink, bool with_ckpt) {
  static char path[4300];
  char text[4096];
  snprintf(path, sizeof(path), "%s/p.yaml", sl_test_dir());
  snprintf(text, sizeof(text),
           "name: pgjob\n%s"
           "source: {type: generator, count: 10, keys: 5,\n"
           "         columns: [key, amount]}\n"
           "transforms:\n"
           "  - project: {account: key, amount: amount}\n"
           "  - aggregate:\n      key: [account]\n"
           "      values: {balance: sum(amount)}\n"
           "      emit: updates\n"
           "sink: %s\n",
           with_ckpt ? "checkpoint: {dir: ckpt-not-created}\n" : "", sink);
  sl_test_write_file(path, text);
  return path;
}

static void expect_validate(const char *sink, bool with_ckpt, bool connect,
                            int code, const char *want) {
  const char *p = pipeline_file(sink, with_ckpt);
  const char *args[] = {"validate", p, connect ? "--connect" : NULL, NULL};
  char *out = NULL;
  int rc = run_sluice(args, &out);
  if (rc != code || out == NULL || strstr(out, want) == NULL)
    SL_TEST_FAIL("sink %s: exit %d (want %d), expected '%s' in:\n%s", sink,
                 rc, code, want, out ? out : "");
  free(out);
}

SL_TEST(pipeline_validate_offline) {
  expect_validate("{type: postgres, conninfo: 'host=127.0.0.1 port=1', "
                  "table: balances, mode: upsert, key: [account]}",
                  true, false, 0, "p.yaml: valid\n");
  expect_validate("{type: postgres, conninfo: 'host=x', table: balances}",
                  false, false, 2,
                  ":7: sink: a postgres sink with 'delivery: exactly-once' "
                  "(the default) commits when a checkpoint completes, and "
                  "this pipeline has no 'checkpoint: {dir: ...}'");
  expect_validate("{type: postgres, conninfo: 'host=x', table: balances, "
                  "mode: upsert, key: [acount]}",
                  true, false, 2,
                  "sink.key: no column 'acount' in the rows the sink gets");
  expect_validate("{type: postgres, conninfo: 'host=x', host: y, "
                  "table: balances}",
                  true, false, 2,
                  "sink.conninfo: give either 'conninfo' or host/port/"
                  "dbname/user/password/sslmode, not both");
  expect_validate("{type: postgres, table: balances}", true, false, 2,
                  "sink: missing required field 'conninfo'");
  expect_validate("{type: postgres, host: x, port: '99999', "
                  "table: balances}",
                  true, false, 2,
                  "sink.port: expected a port number from 1 to 65535, got "
                  "'99999'");
  expect_validate("{type: postgres, conninfo: 'host=x', table: balances, "
                  "delivery: at-least-once}",
                  false, false, 2,
                  "delivery at-least-once needs mode upsert with a key");
  expect_validate("{type: postgres, conninfo: 'host=x', table: balances, "
                  "path: x}",
                  true, false, 2, "sink.path");
}

SL_TEST(pipeline_validate_connect) {
  sl_server_t *srv = start_pg(0, NULL);
  PGconn *db = direct(srv);
  char sink[600];
  snprintf(sink, sizeof(sink),
           "{type: postgres, uid: snk, host: 127.0.0.1, port: %d, "
           "dbname: postgres, user: postgres, sslmode: disable, "
           "table: balances, mode: upsert, key: [account]}",
           sl_server_port(srv));
  expect_validate(sink, true, true, 2,
                  "sluice: sink: postgres sink 'snk': table 'balances' does "
                  "not exist (create it before starting the job; "
                  "docs/connectors.md)");
  sql_ok(db, "CREATE TABLE balances (account bigint PRIMARY KEY, "
             "balance integer)");
  expect_validate(sink, true, true, 2,
                  "sluice: sink: postgres sink 'snk': column 'balance' of "
                  "table 'balances' is integer, but field 'balance' is "
                  "int64, which needs bigint or numeric");
  sql_ok(db, "ALTER TABLE balances ALTER COLUMN balance TYPE bigint");
  expect_validate(sink, true, true, 0, "p.yaml: valid (connected)\n");
  /* Without --connect nothing is checked against the server, and
   * --connect writes nothing: no commit-log table. */
  SL_ASSERT_EQ_INT(sql_int(db, "SELECT count(*) FROM pg_class WHERE relname "
                               "= 'sluice_sink_commits'"),
                   0);
  PQfinish(db);
  sl_server_destroy(srv);
}

/* validate --connect checks every postgres sink of the pipeline (a
 * window's late_sink too), not only the last one built, and names the
 * one that fails by its place in the file. */
SL_TEST(pipeline_validate_connect_every_sink) {
  sl_server_t *srv = start_pg(0, NULL);
  PGconn *db = direct(srv);
  char pg[300], text[2048], path[4300];
  snprintf(pg, sizeof(pg),
           "type: postgres, host: 127.0.0.1, port: %d, dbname: postgres, "
           "user: postgres, sslmode: disable", sl_server_port(srv));
  snprintf(text, sizeof(text),
           "name: pgjob\n"
           "checkpoint: {dir: ckpt-not-created}\n"
           "source: {type: generator, count: 10, keys: 5,\n"
           "         columns: [key, amount, ts],\n"
           "         watermarks: {time_field: ts,\n"
           "                      max_out_of_orderness: 200ms}}\n"
           "transforms:\n"
           "  - window:\n"
           "      type: tumbling\n"
           "      time_field: ts\n"
           "      size: 1s\n"
           "      key: [key]\n"
           "      values: {n: count()}\n"
           "      late_sink: {%s, uid: lt, table: late}\n"
           "    uid: w\n"
           "sink: {%s, uid: snk, table: counts}\n",
           pg, pg);
  snprintf(path, sizeof(path), "%s/p.yaml", sl_test_dir());
  sl_test_write_file(path, text);
  const char *args[] = {"validate", path, "--connect", NULL};
  sql_ok(db, "CREATE TABLE counts (key bigint, window_start timestamptz, "
             "window_end timestamptz, event_time timestamptz, n bigint)");
  char *out = NULL;
  SL_ASSERT_EQ_INT(run_sluice(args, &out), 2);
  if (strstr(out, "sluice: transforms[1].window.late_sink: postgres sink "
                  "'lt': table 'late' does not "
                  "exist") == NULL)
    SL_TEST_FAIL("unexpected output:\n%s", out);
  free(out);
  sql_ok(db, "CREATE TABLE late (key bigint, amount bigint, "
             "ts timestamptz)");
  SL_ASSERT_EQ_INT(run_sluice(args, &out), 0);
  SL_ASSERT_TRUE(strstr(out, "p.yaml: valid (connected)\n") != NULL);
  free(out);
  sql_ok(db, "DROP TABLE counts");
  SL_ASSERT_EQ_INT(run_sluice(args, &out), 2);
  if (strstr(out, "sluice: sink: postgres sink 'snk': table 'counts' does "
                  "not exist") == NULL)
    SL_TEST_FAIL("unexpected output:\n%s", out);
  free(out);
  PQfinish(db);
  sl_server_destroy(srv);
}

/* One connect_timeout key for both database sinks, a duration; libpq
 * counts whole seconds, so 1500ms connects with connect_timeout 2 (the
 * message names it).  The old connect_timeout_s is an unknown field. */
SL_TEST(pipeline_connect_timeout) {
  char sink[300];
  snprintf(sink, sizeof(sink),
           "{type: postgres, uid: snk, conninfo: 'host=127.0.0.1 port=%d "
           "dbname=x user=x', table: balances, connect_timeout: 1500ms}",
           closed_port());
  expect_validate(sink, true, true, 2,
                  "(connect_timeout 2 s): connection to server at "
                  "\"127.0.0.1\"");
  expect_validate("{type: postgres, conninfo: 'host=x', table: balances, "
                  "connect_timeout_s: 3}",
                  true, false, 2,
                  "sink.connect_timeout_s: unknown field; expected one of: "
                  "type, uid, parallelism, conninfo, host, port, dbname, "
                  "user, password, sslmode, table, key, mode, delivery, "
                  "batch_size, commit_table, epoch_column, version_field, "
                  "connect_timeout, lock_timeout_ms, fence_table");
  expect_validate("{type: postgres, conninfo: 'host=x', table: balances, "
                  "connect_timeout: 0}",
                  true, false, 2,
                  "sink.connect_timeout: must be greater than 0");
}
