/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fencing of the postgres sink against a real PostgreSQL 15 (failure
 * window W9: a writer of an older attempt still connected).  Two sink
 * instances in one process stand for two attempts in two processes (each
 * has its own nonce); their vtables are driven step by step, and a thread
 * runs the recover that has to wait, released by what it logs, never by
 * a sleep.  Invariants P5-P7 are those of the design notes in
 * src/connectors/postgres/pg_sink.c (and pg_fence.c).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#include "pg_fx.h"

/* ------------------------------------------------------------------ */
/* Fencing writers of older attempts (W9; P5-P7)                         */

/* Log lines, collected from any thread; a waiter can block until a line
 * containing some text was logged. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sl_bytes_t text;
  bool is_done; /* a recover thread returned: stop waiting */
} logs = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, false};

static void log_cb(sl_log_level_t level, const char *msg, void *user) {
  (void)user;
  pthread_mutex_lock(&logs.mu);
  (void)sl_bytes_printf(&logs.text, "%s %s\n",
                        level == SL_LOG_WARN ? "WARN" : "INFO", msg);
  pthread_cond_broadcast(&logs.cv);
  pthread_mutex_unlock(&logs.mu);
  fprintf(stderr, "log: %s\n", msg);
}

static void logs_start(void) {
  sl_log_set_level(SL_LOG_INFO);
  sl_log_set_callback(log_cb, NULL);
}

/* Whether a line containing want was logged; with wait_ms, waits for it
 * (a bound for a loaded machine, not a guess at a moment). */
static bool logs_have(const char *want, int wait_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += wait_ms / 1000;
  pthread_mutex_lock(&logs.mu);
  bool found;
  for (;;) {
    (void)sl_bytes_append(&logs.text, "", 1);
    logs.text.len--;
    found = strstr((const char *)logs.text.data, want) != NULL;
    if (found || wait_ms == 0 || logs.is_done ||
        pthread_cond_timedwait(&logs.cv, &logs.mu, &until) != 0)
      break;
  }
  pthread_mutex_unlock(&logs.mu);
  return found;
}

/* A second sink instance on fx's server: another process running the same
 * job, as far as the server can tell (its own nonce). */
typedef struct inst_s {
  const sl_sink_vt_t *vt;
  void *ctx;
} inst_t;

static inst_t new_instance(sl_pg_sink_config_t *cfg) {
  inst_t i;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_sink_create(cfg, &i.vt, &i.ctx, &err), err);
  return i;
}

/* An upsert exactly-once sink as the login role 'sinkrole' (not a
 * superuser: what it may terminate depends on grants). */
static void fx_role_sink(fx_t *fx, sl_pg_sink_config_t *cfg, char *ci,
                         size_t size) {
  sql_ok(fx->db, "CREATE ROLE sinkrole LOGIN");
  sql_ok(fx->db, "GRANT CREATE ON SCHEMA public TO sinkrole");
  sql_ok(fx->db, "GRANT ALL ON balances TO sinkrole");
  snprintf(ci, size, "%s user=sinkrole", sl_server_conninfo(fx->srv));
  sl_pg_sink_config_init(cfg);
  cfg->conninfo = ci;
  cfg->table = "balances";
  cfg->mode = SL_PG_MODE_UPSERT;
  cfg->key = key_account;
  cfg->n_key = 1;
}

static void *inst_committer(inst_t *in, uint32_t subtask, uint32_t par,
                            uint32_t *owned, uint32_t n_owned) {
  fx_t f;
  memset(&f, 0, sizeof(f));
  f.vt = in->vt;
  f.ctx = in->ctx;
  return open_committer(&f, subtask, par, owned, n_owned);
}

static void *inst_writer(inst_t *in, fx_t *fx, uint32_t subtask,
                         uint32_t par, uint64_t epoch) {
  sl_sink_init_t init = winit(fx, subtask, par, epoch);
  void *w = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(in->vt->writer_open(in->ctx, &init, &w, &err), err);
  return w;
}

#define FENCE_ROWS                                                        \
  "SELECT string_agg(job || '/' || sink_uid || '/' || subtask || '=' || " \
  "epoch, ';' ORDER BY subtask) FROM sluice_sink_fence"

/* W9 with a prepared zombie: writer A of attempt 1 prepared epoch 10 and
 * lives on; the role may not terminate sessions, so attempt 2's recover
 * leaves A connected, rolls its epoch back and bumps the fence.  A's next
 * epoch fails its fence check, its committer finds the epoch LOST, and
 * only attempt 2's rows are in the table (P5, P6). */
SL_TEST(zombie_prepared) {
  fx_t fx;
  fx_start(&fx, 0);
  logs_start();
  sl_pg_sink_config_t cfg;
  char ci[512];
  fx_role_sink(&fx, &cfg, ci, sizeof(ci));
  sql_ok(fx.db, "REVOKE EXECUTE ON FUNCTION pg_terminate_backend(integer, "
                "bigint) FROM PUBLIC");
  inst_t a = new_instance(&cfg), b = new_instance(&cfg);
  uint32_t own0[] = {0};
  sl_error_t *err = NULL;
  /* Attempt 1. */
  void *ca = inst_committer(&a, 0, 1, own0, 1);
  SL_ASSERT_OK_E(a.vt->recover(ca, &err), err);
  assert_text(fx.db, FENCE_ROWS, "job1/snk/0=1");
  void *wa = inst_writer(&a, &fx, 0, 1, 10);
  SL_ASSERT_OK_E(a.vt->write(wa, mk(&fx.rows, SL_ROW_INSERT, 1, 10), &err),
                 err);
  sl_bytes_t cma, cmb;
  sl_bytes_init(&cma);
  sl_bytes_init(&cmb);
  SL_ASSERT_OK_E(a.vt->prepare(wa, 11, &cma, &err), err);
  /* Attempt 2 restores a checkpoint before 11 and recovers. */
  void *cb = inst_committer(&b, 0, 1, own0, 1);
  SL_ASSERT_TRUE(logs_have("WARN postgres sink 'snk' subtask 0: cannot "
                           "terminate session pid ", 0));
  SL_ASSERT_TRUE(logs_have("a writer or committer of an older attempt of "
                           "subtask 0 (postgres sink 'snk' subtask 0: "
                           "pg_terminate_backend: SQLSTATE 42501: ERROR: "
                           "permission denied for function "
                           "pg_terminate_backend); grant the sink's role "
                           "pg_signal_backend or run every attempt as the "
                           "same role; meanwhile the fence row stops that "
                           "writer at its next epoch, and recover waits for "
                           "its locks", 0));
  SL_ASSERT_OK_E(b.vt->recover(cb, &err), err);
  SL_ASSERT_TRUE(logs_have("rolled back the lingering prepared transaction "
                           "'sl/job1/snk/0/10'", 0));
  assert_text(fx.db, FENCE_ROWS, "job1/snk/0=2");
  /* The zombie's next epoch. */
  SL_ASSERT_OK_E(a.vt->write(wa, mk(&fx.rows, SL_ROW_INSERT, 2, 20), &err),
                 err);
  SL_ASSERT_TRUE(a.vt->prepare(wa, 12, &cmb, &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask "
                   "0: fenced off: the fence table 'sluice_sink_fence' holds "
                   "epoch 2 for job 'job1' subtask 0, and this writer's "
                   "attempt set epoch 1 when it recovered: a newer attempt "
                   "took the subtask over (and rolled back what this writer "
                   "left prepared), so this writer belongs to an older "
                   "attempt that is still running; it stops, and its epoch "
                   "11 is not written");
  SL_ASSERT_TRUE(sl_error_is_fatal(err));
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT((int64_t)cmb.len, 0);
  /* Its transaction was rolled back at the failed check: a prepare that
   * came anyway prepares nothing. */
  SL_ASSERT_TRUE(a.vt->prepare(wa, 13, &cmb, &err) != SL_OK);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "postgres sink 'snk' subtask 0: cannot prepare checkpoint "
                   "13: the writer failed earlier");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  /* Its committer cannot commit what attempt 2 rolled back. */
  fx_t fa = fx;
  fa.vt = a.vt;
  SL_ASSERT_EQ_INT(commit(&fa, ca, 11, &cma, 1), SL_COMMIT_LOST);
  (void)a.vt->writer_close(wa, false, NULL);
  a.vt->committer_close(ca);
  /* Attempt 2 writes on. */
  void *wb = inst_writer(&b, &fx, 0, 1, 20);
  SL_ASSERT_OK_E(b.vt->write(wb, mk(&fx.rows, SL_ROW_INSERT, 1, 100), &err),
                 err);
  SL_ASSERT_OK_E(b.vt->write(wb, mk(&fx.rows, SL_ROW_INSERT, 3, 300), &err),
                 err);
  sl_bytes_clear(&cmb);
  SL_ASSERT_OK_E(b.vt->prepare(wb, 21, &cmb, &err), err);
  fx_t fb = fx;
  fb.vt = b.vt;
  SL_ASSERT_EQ_INT(commit(&fb, cb, 21, &cmb, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "1=100;3=300");
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  close_writer(&fb, wb, true);
  b.vt->committer_close(cb);
  sl_bytes_close(&cma);
  sl_bytes_close(&cmb);
  a.vt->destroy(a.ctx);
  b.vt->destroy(b.ctx);
  sl_log_set_callback(NULL, NULL);
  fx_stop(&fx);
}

typedef struct recover_arg_s {
  inst_t *in;
  void *committer;
  int rc;
  sl_error_t *err;
} recover_arg_t;

static void *recover_thread(void *p) {
  recover_arg_t *r = p;
  r->rc = r->in->vt->recover(r->committer, &r->err);
  pthread_mutex_lock(&logs.mu);
  logs.is_done = true;
  pthread_cond_broadcast(&logs.cv);
  pthread_mutex_unlock(&logs.mu);
  return NULL;
}

/* W9 with an open zombie: writer A of attempt 1 has an open transaction
 * (its rows sent, not prepared) when attempt 2 recovers, and cannot be
 * terminated.  The bump waits for A's shared lock on the fence row and
 * times out; meanwhile A prepares; the next round rolls A's epoch back and
 * the bump succeeds (P6).  A's next epoch then fails its fence check (P5);
 * none of A's rows become visible. */
SL_TEST(zombie_open) {
  fx_t fx;
  fx_start(&fx, 0);
  logs_start();
  sl_pg_sink_config_t cfg;
  char ci[512];
  fx_role_sink(&fx, &cfg, ci, sizeof(ci));
  cfg.batch_size = 1;       /* every row is sent at once */
  cfg.lock_timeout_ms = 50; /* short rounds */
  sql_ok(fx.db, "REVOKE EXECUTE ON FUNCTION pg_terminate_backend(integer, "
                "bigint) FROM PUBLIC");
  inst_t a = new_instance(&cfg), b = new_instance(&cfg);
  uint32_t own0[] = {0};
  sl_error_t *err = NULL;
  void *ca = inst_committer(&a, 0, 1, own0, 1);
  SL_ASSERT_OK_E(a.vt->recover(ca, &err), err);
  void *wa = inst_writer(&a, &fx, 0, 1, 10);
  SL_ASSERT_OK_E(a.vt->write(wa, mk(&fx.rows, SL_ROW_INSERT, 1, 10), &err),
                 err);
  /* Attempt 2's recover runs in a thread: it waits for A. */
  void *cb = inst_committer(&b, 0, 1, own0, 1);
  recover_arg_t r = {&b, cb, -1, NULL};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, recover_thread, &r), 0);
  SL_ASSERT_TRUE(logs_have("postgres sink 'snk' subtask 0: the fence is "
                           "locked by a transaction of an older writer "
                           "(round 1, ", 60000));
  /* The zombie prepares its open epoch (its fence check passed before the
   * bump); the next round rolls it back. */
  sl_bytes_t cma, cmb;
  sl_bytes_init(&cma);
  sl_bytes_init(&cmb);
  SL_ASSERT_OK_E(a.vt->prepare(wa, 11, &cma, &err), err);
  SL_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
  SL_ASSERT_OK_E(r.rc, r.err);
  SL_ASSERT_TRUE(logs_have("rolled back the lingering prepared transaction "
                           "'sl/job1/snk/0/10'", 0));
  assert_text(fx.db, FENCE_ROWS, "job1/snk/0=2");
  /* The zombie's next epoch fails at its first statement. */
  SL_ASSERT_TRUE(a.vt->write(wa, mk(&fx.rows, SL_ROW_INSERT, 2, 20), &err) !=
                 SL_OK);
  SL_ASSERT_TRUE(strstr(sl_error_message(err),
                        "fenced off: the fence table 'sluice_sink_fence' "
                        "holds epoch 2 for job 'job1' subtask 0, and this "
                        "writer's attempt set epoch 1 when it recovered") !=
                 NULL);
  sl_error_destroy(err);
  err = NULL;
  (void)a.vt->writer_close(wa, false, NULL);
  a.vt->committer_close(ca);
  void *wb = inst_writer(&b, &fx, 0, 1, 20);
  SL_ASSERT_OK_E(b.vt->write(wb, mk(&fx.rows, SL_ROW_INSERT, 3, 30), &err),
                 err);
  SL_ASSERT_OK_E(b.vt->prepare(wb, 21, &cmb, &err), err);
  fx_t fb = fx;
  fb.vt = b.vt;
  SL_ASSERT_EQ_INT(commit(&fb, cb, 21, &cmb, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "3=30");
  SL_ASSERT_EQ_INT(prepared_of_job(fx.db), 0);
  close_writer(&fb, wb, true);
  b.vt->committer_close(cb);
  sl_bytes_close(&cma);
  sl_bytes_close(&cmb);
  a.vt->destroy(a.ctx);
  b.vt->destroy(b.ctx);
  sl_log_set_callback(NULL, NULL);
  fx_stop(&fx);
}

/* The sessions of the owned subtasks that another instance opened are
 * terminated when the committer opens: attempt 1's writer of subtask 0
 * (with an open transaction) and its committer end, its rows are rolled
 * back, the bump succeeds at once; subtask 1's sessions (not owned) stay.
 * Superuser here, so nothing stops the termination. */
SL_TEST(terminates_older_sessions) {
  fx_t fx;
  fx_start(&fx, 0);
  logs_start();
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.conninfo = sl_server_conninfo(fx.srv);
  cfg.table = "balances";
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  cfg.batch_size = 1;
  inst_t a = new_instance(&cfg), b = new_instance(&cfg);
  uint32_t own0[] = {0}, own1[] = {1};
  sl_error_t *err = NULL;
  void *ca0 = inst_committer(&a, 0, 2, own0, 1);
  void *ca1 = inst_committer(&a, 1, 2, own1, 1);
  SL_ASSERT_OK_E(a.vt->recover(ca0, &err), err);
  SL_ASSERT_OK_E(a.vt->recover(ca1, &err), err);
  void *wa0 = inst_writer(&a, &fx, 0, 2, 10);
  void *wa1 = inst_writer(&a, &fx, 1, 2, 10);
  SL_ASSERT_OK_E(a.vt->write(wa0, mk(&fx.rows, SL_ROW_INSERT, 1, 10), &err),
                 err);
  char *pids0 = sql_text(fx.db, "SELECT string_agg(pid::text, ',') FROM "
                                "pg_stat_activity WHERE application_name "
                                "LIKE 'sluice/%/0/%'");
  SL_ASSERT_EQ_INT(sql_int(fx.db, "SELECT count(*) FROM pg_stat_activity "
                                  "WHERE application_name LIKE "
                                  "'sluice/%/0/%'"),
                   2);
  /* Attempt 2, subtask 0. */
  void *cb = inst_committer(&b, 0, 2, own0, 1);
  SL_ASSERT_TRUE(logs_have("INFO postgres sink 'snk' subtask 0: terminated "
                           "session pid ", 0));
  char q[512];
  snprintf(q, sizeof(q), "SELECT count(*) FROM pg_stat_activity WHERE pid "
           "IN (%s)", pids0);
  SL_ASSERT_EQ_INT(sql_int(fx.db, q), 0);
  sl_free(pids0);
  SL_ASSERT_EQ_INT(sql_int(fx.db, "SELECT count(*) FROM pg_stat_activity "
                                  "WHERE application_name LIKE "
                                  "'sluice/%/1/%'"),
                   2);
  SL_ASSERT_OK_E(b.vt->recover(cb, &err), err);
  SL_ASSERT_TRUE(!logs_have("the fence is locked", 0));
  assert_text(fx.db, FENCE_ROWS, "job1/snk/0=2;job1/snk/1=1");
  /* A's writer of subtask 0 lost its session with its transaction. */
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  SL_ASSERT_TRUE(a.vt->prepare(wa0, 11, &cm, &err) != SL_OK);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "terminating connection due "
                        "to administrator command") != NULL ||
                 strstr(sl_error_message(err), "server closed the "
                        "connection") != NULL);
  sl_error_destroy(err);
  err = NULL;
  (void)a.vt->writer_close(wa0, false, NULL);
  (void)a.vt->writer_close(wa1, false, NULL);
  a.vt->committer_close(ca0);
  a.vt->committer_close(ca1);
  void *wb = inst_writer(&b, &fx, 0, 2, 20);
  SL_ASSERT_OK_E(b.vt->write(wb, mk(&fx.rows, SL_ROW_INSERT, 2, 20), &err),
                 err);
  sl_bytes_clear(&cm);
  SL_ASSERT_OK_E(b.vt->prepare(wb, 21, &cm, &err), err);
  fx_t fb = fx;
  fb.vt = b.vt;
  SL_ASSERT_EQ_INT(commit(&fb, cb, 21, &cm, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "2=20");
  close_writer(&fb, wb, true);
  b.vt->committer_close(cb);
  sl_bytes_close(&cm);
  a.vt->destroy(a.ctx);
  b.vt->destroy(b.ctx);
  sl_log_set_callback(NULL, NULL);
  fx_stop(&fx);
}

/* The fence table: created by the committer (its configured name too),
 * one row per owned subtask after recover, bumped by every recover; a
 * role without CREATE on the schema is told what to do, and works with
 * tables created for it beforehand; a writer never opens unfenced (P7). */
SL_TEST(table) {
  fx_t fx;
  fx_start(&fx, 0);
  sl_pg_sink_config_t cfg;
  sl_pg_sink_config_init(&cfg);
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  cfg.fence_table = "ops.fence";
  sql_ok(fx.db, "CREATE SCHEMA ops");
  fx_sink(&fx, &cfg);
  /* P7 first: no recover in this instance yet. */
  sl_sink_init_t in = winit(&fx, 0, 1, 1);
  assert_msg(open_fails(&fx, &in),
             "postgres sink 'snk' subtask 0: writer_open before recover: an "
             "exactly-once writer takes its fence epoch from the recover of "
             "its subtask's committer in the same sink instance "
             "(committer_open, the restored commits, recover, then "
             "writer_open)");
  void *c = open_committer(&fx, 0, 2, (uint32_t[]){0, 2}, 2);
  assert_text(fx.db,
              "SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, "
              "a.atttypmod), ', ' ORDER BY a.attnum) FROM pg_attribute a "
              "WHERE a.attrelid = 'ops.fence'::regclass AND a.attnum > 0",
              "job text, sink_uid text, subtask integer, epoch bigint, "
              "updated_at timestamp with time zone");
  SL_ASSERT_EQ_INT(sql_int(fx.db, "SELECT count(*) FROM ops.fence"), 0);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  assert_text(fx.db,
              "SELECT string_agg(subtask || '=' || epoch, ';' ORDER BY "
              "subtask) FROM ops.fence WHERE job = 'job1' AND sink_uid = "
              "'snk'",
              "0=2;2=2");
  fx.vt->committer_close(c);
  fx.vt->destroy(fx.ctx);
  fx.ctx = NULL;
  /* A role that may not create tables in the schema. */
  sql_ok(fx.db, "CREATE ROLE low LOGIN");
  sql_ok(fx.db, "GRANT ALL ON balances TO low");
  /* The first instance created the commit-log table as the superuser. */
  sql_ok(fx.db, "GRANT SELECT, INSERT ON sluice_sink_commits TO low");
  char ci[512];
  snprintf(ci, sizeof(ci), "%s user=low", sl_server_conninfo(fx.srv));
  sl_pg_sink_config_init(&cfg);
  cfg.conninfo = ci;
  cfg.mode = SL_PG_MODE_UPSERT;
  cfg.key = key_account;
  cfg.n_key = 1;
  fx_sink(&fx, &cfg);
  sl_committer_init_t ci0;
  memset(&ci0, 0, sizeof(ci0));
  ci0.job = "job1";
  ci0.uid = "snk";
  ci0.parallelism = 1;
  ci0.owned_subtasks = (uint32_t[]){0};
  ci0.n_owned_subtasks = 1;
  char *m = committer_fails(&fx, &ci0);
  const char *want = "table 'sluice_sink_fence' (create it beforehand, see "
                     "docs/connectors.md, or grant CREATE on its schema): "
                     "postgres sink 'snk' subtask 0: creating the fence "
                     "table: SQLSTATE 42501: ERROR: permission denied for "
                     "schema public LINE 1: "; /* then the statement */
  m[strlen(want) < strlen(m) ? strlen(want) : strlen(m)] = '\0';
  assert_msg(m, want);
  sql_ok(fx.db, "CREATE TABLE sluice_sink_fence (job text NOT NULL, "
                "sink_uid text NOT NULL, subtask integer NOT NULL, epoch "
                "bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT "
                "now(), PRIMARY KEY (job, sink_uid, subtask))");
  sql_ok(fx.db, "GRANT SELECT, INSERT, UPDATE ON sluice_sink_fence TO low");
  void *w = open_writer(&fx, 0, 1);
  wr(&fx, w, SL_ROW_INSERT, 5, 50);
  sl_bytes_t cm;
  sl_bytes_init(&cm);
  prep(&fx, w, 2, &cm);
  c = open_committer(&fx, 0, 1, (uint32_t[]){0}, 1);
  SL_ASSERT_EQ_INT(commit(&fx, c, 2, &cm, 1), SL_COMMIT_OK);
  assert_text(fx.db, BALANCES, "5=50");
  close_writer(&fx, w, true);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  fx_stop(&fx);
}

/* A writer of an older attempt keeps its transaction open and cannot be
 * terminated: recover gives up after its rounds (60, of lock_timeout_ms
 * each here) and names the session that holds the fence; nothing was
 * bumped, and the job's restart tries again. */
SL_TEST(gives_up_naming_the_holder) {
  fx_t fx;
  fx_start(&fx, 0);
  logs_start();
  sl_pg_sink_config_t cfg;
  char ci[512];
  fx_role_sink(&fx, &cfg, ci, sizeof(ci));
  cfg.batch_size = 1;
  cfg.lock_timeout_ms = 20;
  sql_ok(fx.db, "REVOKE EXECUTE ON FUNCTION pg_terminate_backend(integer, "
                "bigint) FROM PUBLIC");
  inst_t a = new_instance(&cfg), b = new_instance(&cfg);
  uint32_t own0[] = {0};
  sl_error_t *err = NULL;
  void *ca = inst_committer(&a, 0, 1, own0, 1);
  SL_ASSERT_OK_E(a.vt->recover(ca, &err), err);
  void *wa = inst_writer(&a, &fx, 0, 1, 10);
  SL_ASSERT_OK_E(a.vt->write(wa, mk(&fx.rows, SL_ROW_INSERT, 1, 10), &err),
                 err);
  int64_t pid = sql_int(fx.db, "SELECT pid FROM pg_stat_activity WHERE "
                               "application_name LIKE 'sluice/%/0/%' AND "
                               "application_name NOT LIKE '%/c'");
  void *cb = inst_committer(&b, 0, 1, own0, 1);
  SL_ASSERT_TRUE(b.vt->recover(cb, &err) == SL_EIO);
  char want[512];
  snprintf(want, sizeof(want),
           "postgres sink 'snk' subtask 0: cannot fence older writers: after "
           "60 rounds of lock_timeout 20 ms the fence rows in "
           "'sluice_sink_fence' are still locked by pid %lld ('sluice/",
           (long long)pid);
  if (strncmp(sl_error_message(err), want, strlen(want)) != 0 ||
      strstr(sl_error_message(err), "', idle in transaction); end those "
             "sessions (pg_terminate_backend) or transactions, and the next "
             "attempt fences again") == NULL)
    SL_TEST_FAIL("unexpected message: %s", sl_error_message(err));
  sl_error_destroy(err);
  err = NULL;
  assert_text(fx.db, FENCE_ROWS, "job1/snk/0=1");
  /* Once the older writer is gone, the next attempt fences. */
  (void)a.vt->writer_close(wa, false, NULL);
  a.vt->committer_close(ca);
  SL_ASSERT_OK_E(b.vt->recover(cb, &err), err);
  assert_text(fx.db, FENCE_ROWS, "job1/snk/0=2");
  assert_text(fx.db, BALANCES, "");
  b.vt->committer_close(cb);
  a.vt->destroy(a.ctx);
  b.vt->destroy(b.ctx);
  sl_log_set_callback(NULL, NULL);
  fx_stop(&fx);
}
