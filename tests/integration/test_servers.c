/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The test servers and the hold proxy against real PostgreSQL 15 and
 * MariaDB 10.11 (tests/tools/): start-up settings, two-phase commit and
 * XA facts the sinks rely on (connectors note A.2), the proxy holding and
 * dropping the reply to COMMIT PREPARED / XA COMMIT after the server made
 * it durable, restarts that keep prepared transactions, and no server
 * process left behind by a stop or by a SIGKILLed test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "sl_holdproxy.h"
#include "sl_servers.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static sl_server_t *start_server(sl_server_kind_t kind,
                                 const char *const *extra) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, kind);
  o.extra_settings = extra;
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  int64_t t0 = mono_ms();
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  printf("%s started on port %d in %lld ms (%s)\n",
         kind == SL_SERVER_POSTGRES ? "postgres" : "mariadbd",
         sl_server_port(srv), (long long)(mono_ms() - t0), sl_server_dir(srv));
  return srv;
}

static PGconn *pg_direct(const sl_server_t *srv) {
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(srv), &c, &err), err);
  return c;
}

static PGconn *pg_via(const sl_server_t *srv, int port) {
  char ci[300];
  sl_pg_conninfo_port(srv, port, ci, sizeof(ci));
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(ci, &c, &err), err);
  return c;
}

static void pg_ok(PGconn *c, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(c, sql, NULL, &err), err);
}

/* The SQLSTATE of sql, which is expected to fail. */
static const char *pg_fails(PGconn *c, const char *sql) {
  static char state[6];
  sl_error_t *err = NULL;
  int rc = sl_pg_exec(c, sql, state, &err);
  if (rc == SL_OK) SL_TEST_FAIL("'%s' succeeded; expected an error", sql);
  printf("'%s' -> %s\n", sql, sl_error_message(err));
  sl_error_destroy(err);
  return state;
}

static int64_t pg_int(PGconn *c, const char *sql) {
  int64_t v = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(c, sql, &v, &err), err);
  return v;
}

/* Compare a text query result with want. */
static void pg_text_is(PGconn *c, const char *sql, const char *want) {
  char *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_text(c, sql, &t, &err), err);
  SL_ASSERT_EQ_STR(t, want);
  sl_free(t);
}

static MYSQL *my_conn(const sl_server_t *srv, int port) {
  MYSQL *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(srv, port, &m, &err), err);
  return m;
}

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static unsigned my_fails(MYSQL *m, const char *sql) {
  unsigned e = 0;
  sl_error_t *err = NULL;
  int rc = sl_my_exec(m, sql, &e, &err);
  if (rc == SL_OK) SL_TEST_FAIL("'%s' succeeded; expected an error", sql);
  printf("'%s' -> %s\n", sql, sl_error_message(err));
  sl_error_destroy(err);
  return e;
}

static int64_t my_int(MYSQL *m, const char *sql) {
  int64_t v = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_query_int64(m, sql, &v, &err), err);
  return v;
}

static void my_text_is(MYSQL *m, const char *sql, const char *want) {
  char *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_query_text(m, sql, &t, &err), err);
  SL_ASSERT_EQ_STR(t, want);
  sl_free(t);
}

/* Whether XA RECOVER lists gtrid (bqual empty, formatID 1). */
static bool my_xa_listed(MYSQL *m, const char *gtrid) {
  if (mysql_query(m, "XA RECOVER") != 0)
    SL_TEST_FAIL("XA RECOVER: %s", mysql_error(m));
  MYSQL_RES *res = mysql_store_result(m);
  SL_ASSERT_TRUE(res != NULL);
  bool is_found = false;
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(res)) != NULL)
    if (row[3] != NULL && strcmp(row[3], gtrid) == 0) is_found = true;
  mysql_free_result(res);
  return is_found;
}

/* The uid a process runs as. */
static long proc_uid(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  char *text = sl_test_read_file(path, NULL);
  SL_ASSERT_TRUE(text != NULL);
  const char *u = strstr(text, "\nUid:");
  SL_ASSERT_TRUE(u != NULL);
  long uid = strtol(u + 5, NULL, 10);
  free(text);
  return uid;
}

static void assert_runs_as(pid_t pid, const char *user) {
  if (geteuid() != 0) {
    SL_ASSERT_EQ_INT(proc_uid(pid), geteuid());
    return;
  }
  struct passwd *pw = getpwnam(user);
  SL_ASSERT_TRUE(pw != NULL);
  SL_ASSERT_EQ_INT(proc_uid(pid), pw->pw_uid);
}

/* Stop, then assert the server and its guard are gone and the directory
 * is removed by destroy. */
static void stop_and_check_gone(sl_server_t *srv) {
  pid_t spid = sl_server_pid(srv), gpid = sl_server_guard_pid(srv);
  SL_ASSERT_TRUE(spid > 0 && gpid > 0);
  SL_ASSERT_TRUE(!sl_pid_is_gone(spid));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_stop(srv, SL_SERVER_STOP_CLEAN, &err), err);
  SL_ASSERT_TRUE(sl_pid_is_gone(spid));
  SL_ASSERT_TRUE(sl_pid_is_gone(gpid));
  SL_ASSERT_EQ_INT(kill(spid, 0), -1);
  SL_ASSERT_EQ_INT(errno, ESRCH);
  SL_ASSERT_EQ_INT(sl_server_pid(srv), -1);
  char dir[512];
  snprintf(dir, sizeof(dir), "%s", sl_server_dir(srv));
  struct stat st;
  SL_ASSERT_EQ_INT(stat(dir, &st), 0); /* kept until destroy */
  sl_server_destroy(srv);
  SL_ASSERT_EQ_INT(stat(dir, &st), -1);
  SL_ASSERT_EQ_INT(errno, ENOENT);
}

static sl_proxy_t *proxy_start(sl_proxy_proto_t proto, int upstream) {
  sl_proxy_t *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_proxy_start(proto, upstream, 0, &p, &err), err);
  return p;
}

static int proxy_arm(sl_proxy_t *p, sl_proxy_action_t action,
                     const char *match, const char *tag, int times) {
  sl_proxy_rule_t r = {.match = match, .action = action,
                       .pg_reply_tag = tag, .times = times};
  int id = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &r, &id, &err), err);
  return id;
}

static sl_proxy_counts_t proxy_counts(sl_proxy_t *p, int rule) {
  sl_proxy_counts_t c;
  SL_ASSERT_OK(sl_proxy_count(p, rule, &c));
  return c;
}

/* A table t(id, v) with one prepared transaction 'gid' inserting (1, 10),
 * prepared on a connection that is then closed. */
static void pg_prepare_one(PGconn *c, const char *gid) {
  pg_ok(c, "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int)");
  char sql[200];
  pg_ok(c, "BEGIN");
  pg_ok(c, "INSERT INTO t VALUES (1, 10)");
  snprintf(sql, sizeof(sql), "PREPARE TRANSACTION '%s'", gid);
  pg_ok(c, sql);
}

/* ------------------------------------------------------------------ */
/* PostgreSQL. */

SL_TEST(pg_start) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  SL_ASSERT_EQ_STR(sl_server_host(srv), "127.0.0.1");
  SL_ASSERT_EQ_STR(sl_server_user(srv), "postgres");
  SL_ASSERT_EQ_STR(sl_server_dbname(srv), "postgres");
  SL_ASSERT_TRUE(sl_server_port(srv) >= 20000 && sl_server_port(srv) < 32768);
  char want[200];
  snprintf(want, sizeof(want), "host=127.0.0.1 port=%d user=postgres "
           "dbname=postgres", sl_server_port(srv));
  SL_ASSERT_TRUE(strncmp(sl_server_conninfo(srv), want, strlen(want)) == 0);
  PGconn *c = pg_direct(srv);
  int64_t v = pg_int(c, "SELECT current_setting('server_version_num')::int");
  SL_ASSERT_TRUE(v >= 150000 && v < 160000);
  pg_text_is(c, "SHOW wal_level", "logical");
  pg_text_is(c, "SHOW max_prepared_transactions", "64");
  pg_text_is(c, "SHOW max_replication_slots", "10");
  pg_text_is(c, "SHOW max_wal_senders", "10");
  pg_text_is(c, "SHOW listen_addresses", "127.0.0.1");
  pg_text_is(c, "SHOW fsync", "off");
  pg_text_is(c, "SHOW synchronous_commit", "on");
  pg_text_is(c, "SELECT inet_server_addr()::text", "127.0.0.1/32");
  PQfinish(c);
  assert_runs_as(sl_server_pid(srv), "postgres");
  stop_and_check_gone(srv);
}

SL_TEST(pg_durable_option) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  o.is_durable = true;
  o.max_prepared_transactions = 10;
  const char *extra[] = {"application_name=sluice-servers-test", NULL};
  o.extra_settings = extra;
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  PGconn *c = pg_direct(srv);
  pg_text_is(c, "SHOW fsync", "on");
  pg_text_is(c, "SHOW full_page_writes", "on");
  pg_text_is(c, "SHOW max_prepared_transactions", "10");
  pg_text_is(c, "SELECT setting FROM pg_settings WHERE name = "
                "'application_name' AND source = 'command line'",
             "sluice-servers-test");
  PQfinish(c);
  sl_server_destroy(srv);
}

SL_TEST(pg_2pc) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  PGconn *a = pg_direct(srv), *b = pg_direct(srv);
  pg_ok(a, "CREATE TABLE t (id int PRIMARY KEY, v int)");
  pg_ok(a, "BEGIN");
  pg_ok(a, "INSERT INTO t VALUES (1, 10)");
  int64_t xid = pg_int(a, "SELECT pg_current_xact_id()::text::bigint");
  pg_ok(a, "PREPARE TRANSACTION 'g'");
  /* The connection is free at once: a second transaction on it. */
  pg_ok(a, "BEGIN");
  pg_ok(a, "INSERT INTO t VALUES (2, 20)");
  pg_ok(a, "PREPARE TRANSACTION 'g2'");
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT count(*) FROM pg_prepared_xacts "
                             "WHERE gid IN ('g', 'g2')"), 2);
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT count(*) FROM t"), 0);
  char sql[200];
  snprintf(sql, sizeof(sql), "SELECT pg_xact_status('%lld'::xid8)",
           (long long)xid);
  pg_text_is(b, sql, "in progress");
  /* A duplicate gid. */
  pg_ok(a, "BEGIN");
  SL_ASSERT_EQ_STR(pg_fails(a, "PREPARE TRANSACTION 'g'"), "42710");
  /* COMMIT PREPARED inside a transaction block. */
  pg_ok(b, "BEGIN");
  SL_ASSERT_EQ_STR(pg_fails(b, "COMMIT PREPARED 'g'"), "25001");
  pg_ok(b, "ROLLBACK");
  /* Commit from another connection; a second commit is 42704. */
  pg_ok(b, "COMMIT PREPARED 'g'");
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT v FROM t WHERE id = 1"), 10);
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT count(*) FROM pg_prepared_xacts "
                             "WHERE gid = 'g'"), 0);
  pg_text_is(b, sql, "committed");
  SL_ASSERT_EQ_STR(pg_fails(b, "COMMIT PREPARED 'g'"), "42704");
  SL_ASSERT_EQ_STR(pg_fails(b, "ROLLBACK PREPARED 'g'"), "42704");
  pg_ok(b, "ROLLBACK PREPARED 'g2'");
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT count(*) FROM t"), 1);
  /* A failed statement in the block: PREPARE rolls back, no error. */
  PQfinish(a);
  a = pg_direct(srv);
  pg_ok(a, "BEGIN");
  pg_fails(a, "INSERT INTO t VALUES (1, 11)");
  PGresult *r = PQexec(a, "PREPARE TRANSACTION 'g3'");
  SL_ASSERT_EQ_INT(PQresultStatus(r), PGRES_COMMAND_OK);
  SL_ASSERT_EQ_STR(PQcmdStatus(r), "ROLLBACK");
  PQclear(r);
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT count(*) FROM pg_prepared_xacts"), 0);
  /* The gid buffer is 200 bytes including the NUL. */
  char gid[256];
  memset(gid, 'x', 200);
  gid[200] = '\0';
  char long_sql[400];
  pg_ok(a, "BEGIN");
  snprintf(long_sql, sizeof(long_sql), "PREPARE TRANSACTION '%s'", gid);
  SL_ASSERT_EQ_STR(pg_fails(a, long_sql), "22023");
  gid[199] = '\0';
  pg_ok(a, "BEGIN");
  snprintf(long_sql, sizeof(long_sql), "PREPARE TRANSACTION '%s'", gid);
  pg_ok(a, long_sql);
  snprintf(long_sql, sizeof(long_sql), "ROLLBACK PREPARED '%s'", gid);
  pg_ok(b, long_sql);
  PQfinish(a);
  PQfinish(b);
  sl_server_destroy(srv);
}

/* Facts of note A.2 that were read from the source or the docs only. */
SL_TEST(pg_2pc_owner_and_database) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  PGconn *su = pg_direct(srv);
  pg_ok(su, "CREATE ROLE alice LOGIN");
  pg_ok(su, "CREATE ROLE bob LOGIN");
  pg_ok(su, "CREATE DATABASE other");
  pg_ok(su, "GRANT ALL ON SCHEMA public TO alice");
  char ci[400];
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=alice "
           "dbname=postgres sslmode=disable", sl_server_port(srv));
  PGconn *alice = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(ci, &alice, &err), err);
  pg_ok(alice, "CREATE TABLE a (x int)");
  pg_ok(alice, "BEGIN");
  pg_ok(alice, "INSERT INTO a VALUES (1)");
  pg_ok(alice, "PREPARE TRANSACTION 'by-alice'");
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=bob "
           "dbname=postgres sslmode=disable", sl_server_port(srv));
  PGconn *bob = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(ci, &bob, &err), err);
  SL_ASSERT_EQ_STR(pg_fails(bob, "COMMIT PREPARED 'by-alice'"), "42501");
  /* From another database, even as superuser. */
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres "
           "dbname=other sslmode=disable", sl_server_port(srv));
  PGconn *other = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(ci, &other, &err), err);
  SL_ASSERT_EQ_STR(pg_fails(other, "COMMIT PREPARED 'by-alice'"), "0A000");
  pg_ok(su, "COMMIT PREPARED 'by-alice'");
  SL_ASSERT_EQ_INT(pg_int(su, "SELECT count(*) FROM a"), 1);
  /* The limit of prepared transactions (64 here): 53200. */
  char sql[100];
  for (int i = 0; i < 64; i++) {
    pg_ok(su, "BEGIN");
    snprintf(sql, sizeof(sql), "PREPARE TRANSACTION 'lim-%d'", i);
    pg_ok(su, sql);
  }
  pg_ok(su, "BEGIN");
  SL_ASSERT_EQ_STR(pg_fails(su, "PREPARE TRANSACTION 'lim-64'"), "53200");
  /* pg_xact_status of a future xid is an error. */
  SL_ASSERT_EQ_STR(pg_fails(su, "SELECT pg_xact_status('99999999'::xid8)"),
                   "22023");
  PQfinish(alice);
  PQfinish(bob);
  PQfinish(other);
  PQfinish(su);
  sl_server_destroy(srv);
}

/*
 * "Another backend is finishing the same gid" (55000, busy): COMMIT
 * PREPARED waits for a synchronous standby that never comes while it
 * still holds the prepared transaction, so a second COMMIT PREPARED of
 * the gid finds it busy.
 */
SL_TEST(pg_2pc_busy_gid) {
  const char *extra[] = {"synchronous_standby_names=nobody", NULL};
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, extra);
  PGconn *setup = pg_direct(srv), *a = pg_direct(srv), *b = pg_direct(srv);
  pg_ok(setup, "SET synchronous_commit = local"); /* no standby wait */
  pg_ok(b, "SET synchronous_commit = local");
  pg_prepare_one(setup, "busy");
  int64_t a_pid = PQbackendPID(a);
  SL_ASSERT_EQ_INT(PQsendQuery(a, "COMMIT PREPARED 'busy'"), 1);
  char sql[200];
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM pg_stat_activity WHERE "
           "pid = %lld AND wait_event = 'SyncRep'", (long long)a_pid);
  int64_t deadline = mono_ms() + 10000;
  while (pg_int(b, sql) != 1) {
    if (mono_ms() > deadline) SL_TEST_FAIL("COMMIT PREPARED did not wait");
    nap_ms(10);
  }
  SL_ASSERT_EQ_STR(pg_fails(b, "COMMIT PREPARED 'busy'"), "55000");
  snprintf(sql, sizeof(sql), "SELECT pg_cancel_backend(%lld)::int",
           (long long)a_pid);
  SL_ASSERT_EQ_INT(pg_int(b, sql), 1);
  PGresult *r;
  while ((r = PQgetResult(a)) != NULL) {
    printf("canceled COMMIT PREPARED -> %s %s\n",
           PQresStatus(PQresultStatus(r)),
           PQresultErrorMessage(r));
    PQclear(r);
  }
  /* The commit was done locally before the wait. */
  SL_ASSERT_EQ_INT(pg_int(b, "SELECT count(*) FROM t"), 1);
  SL_ASSERT_EQ_STR(pg_fails(b, "COMMIT PREPARED 'busy'"), "42704");
  PQfinish(setup);
  PQfinish(a);
  PQfinish(b);
  sl_server_destroy(srv);
}

/* Wait (bounded) for a result on an async connection. */
static PGresult *pg_result_within(PGconn *c, int timeout_ms) {
  int64_t deadline = mono_ms() + timeout_ms;
  for (;;) {
    if (PQconsumeInput(c) == 0) return PQgetResult(c);
    if (!PQisBusy(c)) return PQgetResult(c);
    int left = (int)(deadline - mono_ms());
    if (left <= 0) SL_TEST_FAIL("no reply within %d ms", timeout_ms);
    struct pollfd pf = {.fd = PQsocket(c), .events = POLLIN};
    poll(&pf, 1, left);
  }
}

SL_TEST(pg_proxy_hold_commit_prepared) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  sl_proxy_t *p = proxy_start(SL_PROXY_PG, sl_server_port(srv));
  int rule = proxy_arm(p, SL_PROXY_HOLD, "COMMIT PREPARED 'sl/job/7'",
                       "COMMIT PREPARED", 1);
  PGconn *direct = pg_direct(srv);
  PGconn *via = pg_via(srv, sl_proxy_port(p));
  /* Through the proxy: statements that do not match pass. */
  pg_prepare_one(via, "sl/job/7");
  SL_ASSERT_EQ_INT(proxy_counts(p, rule).attempts, 0);
  SL_ASSERT_EQ_INT(PQsendQuery(via, "COMMIT PREPARED 'sl/job/7'"), 1);
  SL_ASSERT_OK(sl_proxy_wait_paused(p, rule, 20000));
  /* The commit is durable and visible while its reply is held. */
  SL_ASSERT_EQ_INT(pg_int(direct, "SELECT count(*) FROM pg_prepared_xacts "
                                  "WHERE gid = 'sl/job/7'"), 0);
  SL_ASSERT_EQ_INT(pg_int(direct, "SELECT v FROM t WHERE id = 1"), 10);
  SL_ASSERT_EQ_INT(PQconsumeInput(via), 1);
  SL_ASSERT_TRUE(PQisBusy(via)); /* the client has no reply */
  sl_proxy_counts_t n = proxy_counts(p, rule);
  SL_ASSERT_EQ_INT(n.attempts, 1);
  SL_ASSERT_EQ_INT(n.held, 1);
  SL_ASSERT_EQ_INT(n.paused, 1);
  SL_ASSERT_EQ_INT(n.released, 0);
  SL_ASSERT_EQ_INT(sl_proxy_release(p, rule), 1);
  PGresult *r = pg_result_within(via, 20000);
  SL_ASSERT_TRUE(r != NULL);
  SL_ASSERT_EQ_INT(PQresultStatus(r), PGRES_COMMAND_OK);
  SL_ASSERT_EQ_STR(PQcmdStatus(r), "COMMIT PREPARED");
  PQclear(r);
  SL_ASSERT_TRUE(PQgetResult(via) == NULL);
  n = proxy_counts(p, rule);
  SL_ASSERT_EQ_INT(n.released, 1);
  SL_ASSERT_EQ_INT(n.paused, 0);
  /* A second attempt is counted but not held (times=1): 42704. */
  SL_ASSERT_EQ_STR(pg_fails(via, "COMMIT PREPARED 'sl/job/7'"), "42704");
  n = proxy_counts(p, rule);
  SL_ASSERT_EQ_INT(n.attempts, 2);
  SL_ASSERT_EQ_INT(n.held, 1);
  /* Extended protocol: a Parse message matches too. */
  int prule = proxy_arm(p, SL_PROXY_PASS, "SELECT 42", NULL, 0);
  r = PQexecParams(via, "SELECT 42 + $1::int", 1, NULL,
                   (const char *[]){"1"}, NULL, NULL, 0);
  SL_ASSERT_EQ_INT(PQresultStatus(r), PGRES_TUPLES_OK);
  SL_ASSERT_EQ_STR(PQgetvalue(r, 0, 0), "43");
  PQclear(r);
  SL_ASSERT_EQ_INT(proxy_counts(p, prule).attempts, 1);
  PQfinish(via);
  PQfinish(direct);
  sl_proxy_stop(p);
  sl_server_destroy(srv);
}

SL_TEST(pg_proxy_drop_reply) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  sl_proxy_t *p = proxy_start(SL_PROXY_PG, sl_server_port(srv));
  int rule = proxy_arm(p, SL_PROXY_DROP, "COMMIT PREPARED", NULL, 1);
  PGconn *direct = pg_direct(srv);
  pg_prepare_one(direct, "g-drop");
  PGconn *via = pg_via(srv, sl_proxy_port(p));
  /* The client sees a lost connection, without a SQLSTATE. */
  SL_ASSERT_EQ_STR(pg_fails(via, "COMMIT PREPARED 'g-drop'"), "");
  SL_ASSERT_EQ_INT(PQstatus(via), CONNECTION_BAD);
  /* The server committed. */
  SL_ASSERT_EQ_INT(pg_int(direct, "SELECT count(*) FROM pg_prepared_xacts"),
                   0);
  SL_ASSERT_EQ_INT(pg_int(direct, "SELECT count(*) FROM t"), 1);
  sl_proxy_counts_t n = proxy_counts(p, rule);
  SL_ASSERT_EQ_INT(n.attempts, 1);
  SL_ASSERT_EQ_INT(n.dropped, 1);
  /* A reconnecting committer gets 42704 (D.4). */
  PQreset(via);
  SL_ASSERT_EQ_INT(PQstatus(via), CONNECTION_OK);
  SL_ASSERT_EQ_STR(pg_fails(via, "COMMIT PREPARED 'g-drop'"), "42704");
  SL_ASSERT_EQ_INT(proxy_counts(p, rule).attempts, 2);
  /* rst: the client sees a reset; delay: the reply comes late. */
  int rst = proxy_arm(p, SL_PROXY_RST, "SELECT 'reset me'", NULL, 1);
  SL_ASSERT_EQ_STR(pg_fails(via, "SELECT 'reset me'"), "");
  SL_ASSERT_EQ_INT(proxy_counts(p, rst).dropped, 1);
  PQreset(via);
  sl_proxy_rule_t dr = {.match = "SELECT 'late'", .action = SL_PROXY_DELAY,
                        .delay_ms = 300};
  int delay = -1;
  SL_ASSERT_OK(sl_proxy_arm(p, &dr, &delay, NULL));
  int64_t t0 = mono_ms();
  pg_text_is(via, "SELECT 'late'", "late");
  SL_ASSERT_TRUE(mono_ms() - t0 >= 300);
  SL_ASSERT_EQ_INT(proxy_counts(p, delay).held, 1);
  PQfinish(via);
  PQfinish(direct);
  sl_proxy_stop(p);
  sl_server_destroy(srv);
}

/* TLS is refused by the proxy: sslmode=require fails, prefer works. */
SL_TEST(pg_proxy_refuses_tls) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  sl_proxy_t *p = proxy_start(SL_PROXY_PG, sl_server_port(srv));
  char ci[300];
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres "
           "dbname=postgres sslmode=require", sl_proxy_port(p));
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_NE_INT(sl_pg_connect(ci, &c, &err), SL_OK);
  printf("sslmode=require -> %s\n", sl_error_message(err));
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "SSL") != NULL);
  sl_error_destroy(err);
  snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres "
           "dbname=postgres sslmode=prefer", sl_proxy_port(p));
  SL_ASSERT_OK(sl_pg_connect(ci, &c, NULL));
  pg_text_is(c, "SELECT 'plain'", "plain");
  PQfinish(c);
  sl_proxy_stop(p);
  sl_server_destroy(srv);
}

SL_TEST(pg_restart_keeps_prepared) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  PGconn *c = pg_direct(srv);
  pg_prepare_one(c, "survivor");
  PQfinish(c);
  int port = sl_server_port(srv);
  pid_t old = sl_server_pid(srv);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_restart(srv, SL_SERVER_STOP_CRASH, &err), err);
  SL_ASSERT_TRUE(sl_pid_is_gone(old));
  SL_ASSERT_EQ_INT(sl_server_port(srv), port);
  SL_ASSERT_NE_INT(sl_server_pid(srv), old);
  c = pg_direct(srv);
  SL_ASSERT_EQ_INT(pg_int(c, "SELECT count(*) FROM pg_prepared_xacts WHERE "
                             "gid = 'survivor'"), 1);
  pg_ok(c, "COMMIT PREPARED 'survivor'");
  SL_ASSERT_EQ_INT(pg_int(c, "SELECT count(*) FROM t"), 1);
  PQfinish(c);
  /* A clean restart keeps the committed row. */
  SL_ASSERT_OK_E(sl_server_restart(srv, SL_SERVER_STOP_CLEAN, &err), err);
  c = pg_direct(srv);
  SL_ASSERT_EQ_INT(pg_int(c, "SELECT count(*) FROM t"), 1);
  PQfinish(c);
  /* Starting a running server again is refused. */
  SL_ASSERT_EQ_INT(sl_server_start_again(srv, &err), SL_ESTATE);
  sl_error_destroy(err);
  stop_and_check_gone(srv);
}

/* A fixed port that is taken: the error names it and quotes the log. */
SL_TEST(pg_port_taken) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  SL_ASSERT_EQ_INT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  SL_ASSERT_EQ_INT(listen(fd, 1), 0);
  SL_ASSERT_EQ_INT(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  int port = ntohs(sa.sin_port);
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  o.port = port;
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(sl_server_start(&o, &srv, &err), -EADDRINUSE);
  const char *msg = sl_error_message(err);
  printf("%s\n", msg);
  char want[64];
  snprintf(want, sizeof(want), "127.0.0.1:%d", port);
  SL_ASSERT_TRUE(strstr(msg, want) != NULL);
  SL_ASSERT_TRUE(strstr(msg, "Address already in use") != NULL);
  SL_ASSERT_TRUE(strstr(msg, "server.log") != NULL);
  sl_error_destroy(err);
  close(fd);
}

/*
 * The test process dies by SIGKILL: its guard stops the server and removes
 * the directory.  The test is a subreaper, so the orphaned guard is its
 * child to reap and a zombie never looks alive.
 */
SL_TEST(pg_killed_owner_leaves_nothing) {
  SL_ASSERT_EQ_INT(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pfd[2];
  SL_ASSERT_EQ_INT(pipe(pfd), 0);
  pid_t owner = fork();
  SL_ASSERT_TRUE(owner >= 0);
  if (owner == 0) {
    close(pfd[0]);
    sl_server_opts_t o;
    sl_server_opts_init(&o, SL_SERVER_POSTGRES);
    sl_server_t *srv = NULL;
    pid_t pids[2] = {0, 0};
    char dir[512] = "";
    if (sl_server_start(&o, &srv, NULL) == SL_OK) {
      pids[0] = sl_server_guard_pid(srv);
      pids[1] = sl_server_pid(srv);
      snprintf(dir, sizeof(dir), "%s", sl_server_dir(srv));
    }
    if (write(pfd[1], pids, sizeof(pids)) != sizeof(pids) ||
        write(pfd[1], dir, sizeof(dir)) != sizeof(dir))
      _exit(1);
    for (;;) pause();
  }
  close(pfd[1]);
  pid_t pids[2];
  char dir[512];
  SL_ASSERT_EQ_INT(read(pfd[0], pids, sizeof(pids)), sizeof(pids));
  SL_ASSERT_EQ_INT(read(pfd[0], dir, sizeof(dir)), sizeof(dir));
  close(pfd[0]);
  SL_ASSERT_TRUE(pids[0] > 0 && pids[1] > 0);
  SL_ASSERT_TRUE(!sl_pid_is_gone(pids[1]));
  struct stat st;
  SL_ASSERT_EQ_INT(stat(dir, &st), 0);
  SL_ASSERT_EQ_INT(kill(owner, SIGKILL), 0);
  int status;
  SL_ASSERT_EQ_INT(waitpid(owner, &status, 0), owner);
  int64_t deadline = mono_ms() + 30000;
  while (!sl_pid_is_gone(pids[0]) || !sl_pid_is_gone(pids[1])) {
    while (waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (mono_ms() > deadline)
      SL_TEST_FAIL("guard %d or server %d still running 30 s after the "
                   "owner was killed", (int)pids[0], (int)pids[1]);
    nap_ms(10);
  }
  while (waitpid(-1, &status, WNOHANG) > 0) {
  }
  SL_ASSERT_EQ_INT(stat(dir, &st), -1); /* removed by the guard */
  SL_ASSERT_EQ_INT(errno, ENOENT);
}

/* ------------------------------------------------------------------ */
/* MariaDB. */

SL_TEST(my_start) {
  sl_server_t *srv = start_server(SL_SERVER_MARIADB, NULL);
  SL_ASSERT_EQ_STR(sl_server_user(srv), "root");
  SL_ASSERT_EQ_STR(sl_server_dbname(srv), "sluice");
  SL_ASSERT_TRUE(sl_server_conninfo(srv) == NULL);
  MYSQL *m = my_conn(srv, sl_server_port(srv));
  char *v = NULL;
  SL_ASSERT_OK(sl_my_query_text(m, "SELECT VERSION()", &v, NULL));
  printf("version %s\n", v);
  SL_ASSERT_TRUE(strncmp(v, "10.11.", 6) == 0);
  sl_free(v);
  my_text_is(m, "SELECT DATABASE()", "sluice");
  SL_ASSERT_EQ_INT(my_int(m, "SELECT @@log_bin"), 1);
  my_text_is(m, "SELECT @@binlog_format", "ROW");
  my_text_is(m, "SELECT @@binlog_row_image", "FULL");
  SL_ASSERT_EQ_INT(my_int(m, "SELECT @@server_id"), 1);
  SL_ASSERT_EQ_INT(my_int(m, "SELECT @@gtid_strict_mode"), 1);
  my_text_is(m, "SELECT @@bind_address", "127.0.0.1");
  SL_ASSERT_EQ_INT(my_int(m, "SELECT @@innodb_flush_log_at_trx_commit"), 2);
  /* A write gets a GTID. */
  my_ok(m, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB");
  my_ok(m, "INSERT INTO t VALUES (1, 10)");
  char *gtid = NULL;
  SL_ASSERT_OK(sl_my_query_text(m, "SELECT @@gtid_binlog_pos", &gtid, NULL));
  printf("gtid_binlog_pos %s\n", gtid);
  SL_ASSERT_TRUE(strncmp(gtid, "0-1-", 4) == 0);
  sl_free(gtid);
  mysql_close(m);
  assert_runs_as(sl_server_pid(srv), "mysql");
  stop_and_check_gone(srv);
}

static void my_prepare(MYSQL *m, const char *xid, int id) {
  char sql[200];
  snprintf(sql, sizeof(sql), "XA START '%s'", xid);
  my_ok(m, sql);
  snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%d, %d)", id, id * 10);
  my_ok(m, sql);
  snprintf(sql, sizeof(sql), "XA END '%s'", xid);
  my_ok(m, sql);
  snprintf(sql, sizeof(sql), "XA PREPARE '%s'", xid);
  my_ok(m, sql);
}

/* Close conn and wait (bounded) until the server has ended its session,
 * so that its prepared XA branch is detached. */
static void my_close_and_wait_gone(MYSQL *observer, MYSQL *conn) {
  int64_t id = my_int(conn, "SELECT CONNECTION_ID()");
  mysql_close(conn);
  char sql[200];
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %lld", (long long)id);
  int64_t deadline = mono_ms() + 10000;
  while (my_int(observer, sql) != 0) {
    if (mono_ms() > deadline)
      SL_TEST_FAIL("session %lld still there 10 s after close", (long long)id);
    nap_ms(5);
  }
}

SL_TEST(my_xa) {
  sl_server_t *srv = start_server(SL_SERVER_MARIADB, NULL);
  int port = sl_server_port(srv);
  MYSQL *a = my_conn(srv, port), *b = my_conn(srv, port);
  my_ok(a, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB");
  my_prepare(a, "x1", 1);
  SL_ASSERT_TRUE(my_xa_listed(b, "x1"));
  SL_ASSERT_EQ_INT(my_int(b, "SELECT count(*) FROM t"), 0);
  /* One XA transaction per connection. */
  SL_ASSERT_EQ_INT(my_fails(a, "XA START 'x2'"), 1399);
  /* While the preparing connection lives, another cannot commit. */
  SL_ASSERT_EQ_INT(my_fails(b, "XA COMMIT 'x1'"), 1397);
  SL_ASSERT_TRUE(my_xa_listed(b, "x1"));
  SL_ASSERT_EQ_INT(my_fails(b, "XA ROLLBACK 'x1'"), 1397);
  /* After the disconnect it can. */
  my_close_and_wait_gone(b, a);
  SL_ASSERT_TRUE(my_xa_listed(b, "x1"));
  my_ok(b, "XA COMMIT 'x1'");
  SL_ASSERT_EQ_INT(my_int(b, "SELECT v FROM t WHERE id = 1"), 10);
  SL_ASSERT_TRUE(!my_xa_listed(b, "x1"));
  SL_ASSERT_EQ_INT(my_fails(b, "XA COMMIT 'x1'"), 1397);
  SL_ASSERT_EQ_INT(my_fails(b, "XA ROLLBACK 'x1'"), 1397);
  /* KILL CONNECTION of the holder detaches its prepared branch. */
  a = my_conn(srv, port);
  my_prepare(a, "x3", 3);
  int64_t holder = my_int(a, "SELECT CONNECTION_ID()");
  SL_ASSERT_EQ_INT(my_fails(b, "XA COMMIT 'x3'"), 1397);
  char sql[200];
  snprintf(sql, sizeof(sql), "KILL CONNECTION %lld", (long long)holder);
  my_ok(b, sql);
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %lld", (long long)holder);
  int64_t deadline = mono_ms() + 10000;
  while (my_int(b, sql) != 0) {
    if (mono_ms() > deadline) SL_TEST_FAIL("killed session still there");
    nap_ms(5);
  }
  SL_ASSERT_TRUE(my_xa_listed(b, "x3"));
  my_ok(b, "XA COMMIT 'x3'");
  SL_ASSERT_EQ_INT(my_int(b, "SELECT count(*) FROM t"), 2);
  mysql_close(a);
  /* A prepared xid blocks its reuse; an empty branch rolls back. */
  a = my_conn(srv, port);
  my_prepare(a, "x4", 4);
  my_close_and_wait_gone(b, a);
  a = my_conn(srv, port);
  SL_ASSERT_EQ_INT(my_fails(a, "XA START 'x4'"), 1440);
  my_ok(a, "XA START 'x5'");
  my_ok(a, "XA END 'x5'");
  my_ok(a, "XA PREPARE 'x5'");
  my_close_and_wait_gone(b, a);
  SL_ASSERT_TRUE(my_xa_listed(b, "x5"));
  SL_ASSERT_EQ_INT(my_fails(b, "XA COMMIT 'x5'"), 1402);
  SL_ASSERT_TRUE(!my_xa_listed(b, "x5"));
  my_ok(b, "XA ROLLBACK 'x4'");
  SL_ASSERT_EQ_INT(my_int(b, "SELECT count(*) FROM t"), 2);
  /* A gtrid of 64 bytes is accepted, 65 is a syntax error. */
  char xid[80];
  memset(xid, 'g', 65);
  xid[65] = '\0';
  snprintf(sql, sizeof(sql), "XA START '%s'", xid);
  SL_ASSERT_EQ_INT(my_fails(b, sql), 1064);
  xid[64] = '\0';
  snprintf(sql, sizeof(sql), "XA START '%s'", xid);
  my_ok(b, sql);
  snprintf(sql, sizeof(sql), "XA END '%s'", xid);
  my_ok(b, sql);
  snprintf(sql, sizeof(sql), "XA ROLLBACK '%s'", xid);
  my_ok(b, sql);
  mysql_close(b);
  sl_server_destroy(srv);
}

struct my_job {
  const sl_server_t *srv;
  int port;
  const char *sql;
  unsigned err_no;
  int rc;
  atomic_int is_done;
};

static void *my_job_main(void *arg) {
  struct my_job *j = arg;
  MYSQL *m = NULL;
  j->rc = sl_my_connect(j->srv, j->port, &m, NULL);
  if (j->rc == SL_OK) {
    j->rc = sl_my_exec(m, j->sql, &j->err_no, NULL);
    mysql_close(m);
  }
  atomic_store(&j->is_done, 1);
  mysql_thread_end();
  return NULL;
}

SL_TEST(my_proxy_hold_xa_commit) {
  sl_server_t *srv = start_server(SL_SERVER_MARIADB, NULL);
  sl_proxy_t *p = proxy_start(SL_PROXY_MYSQL, sl_server_port(srv));
  int rule = proxy_arm(p, SL_PROXY_HOLD, "xa commit 'sl-7'", NULL, 1);
  MYSQL *direct = my_conn(srv, sl_server_port(srv));
  my_ok(direct, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB");
  MYSQL *via = my_conn(srv, sl_proxy_port(p));
  my_prepare(via, "sl-7", 1);
  my_close_and_wait_gone(direct, via);
  struct my_job job = {.srv = srv, .port = sl_proxy_port(p),
                       .sql = "  XA COMMIT 'sl-7'"};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, my_job_main, &job), 0);
  SL_ASSERT_OK(sl_proxy_wait_paused(p, rule, 20000));
  /* Durable and visible, the reply held. */
  SL_ASSERT_TRUE(!my_xa_listed(direct, "sl-7"));
  SL_ASSERT_EQ_INT(my_int(direct, "SELECT v FROM t WHERE id = 1"), 10);
  SL_ASSERT_EQ_INT(atomic_load(&job.is_done), 0);
  sl_proxy_counts_t n = proxy_counts(p, rule);
  SL_ASSERT_EQ_INT(n.attempts, 1);
  SL_ASSERT_EQ_INT(n.held, 1);
  SL_ASSERT_EQ_INT(sl_proxy_release(p, rule), 1);
  pthread_join(th, NULL);
  SL_ASSERT_EQ_INT(job.rc, SL_OK);
  SL_ASSERT_EQ_INT(job.err_no, 0);
  SL_ASSERT_EQ_INT(proxy_counts(p, rule).released, 1);
  /* The retry of a committer that lost the reply: 1397. */
  job = (struct my_job){.srv = srv, .port = sl_proxy_port(p),
                        .sql = "XA COMMIT 'sl-7'"};
  my_job_main(&job);
  SL_ASSERT_EQ_INT(job.err_no, 1397);
  SL_ASSERT_EQ_INT(proxy_counts(p, rule).attempts, 2);
  SL_ASSERT_EQ_INT(proxy_counts(p, rule).held, 1);
  mysql_close(direct);
  sl_proxy_stop(p);
  sl_server_destroy(srv);
}

/*
 * keep_upstream_open_on_client_close: a client that closes after XA
 * PREPARE leaves its server session open, the branch attached (1397 for
 * everyone else) until the proxy lets go: the half-open writer of D.4.
 */
SL_TEST(my_proxy_keep_upstream) {
  sl_server_t *srv = start_server(SL_SERVER_MARIADB, NULL);
  sl_proxy_t *p = proxy_start(SL_PROXY_MYSQL, sl_server_port(srv));
  sl_proxy_rule_t r = {.match = "XA PREPARE", .action = SL_PROXY_PASS,
                       .keep_upstream_open_on_client_close = true};
  int rule = -1;
  SL_ASSERT_OK(sl_proxy_arm(p, &r, &rule, NULL));
  MYSQL *direct = my_conn(srv, sl_server_port(srv));
  my_ok(direct, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB");
  MYSQL *via = my_conn(srv, sl_proxy_port(p));
  my_prepare(via, "half-open", 1);
  int64_t holder = my_int(via, "SELECT CONNECTION_ID()");
  mysql_close(via);
  SL_ASSERT_EQ_INT(proxy_counts(p, rule).attempts, 1);
  /* The client is gone; its server session is not. */
  char sql[200];
  snprintf(sql, sizeof(sql), "SELECT count(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %lld", (long long)holder);
  SL_ASSERT_EQ_INT(my_int(direct, sql), 1);
  SL_ASSERT_EQ_INT(my_fails(direct, "XA COMMIT 'half-open'"), 1397);
  SL_ASSERT_TRUE(my_xa_listed(direct, "half-open"));
  SL_ASSERT_EQ_INT(my_int(direct, sql), 1);
  SL_ASSERT_EQ_INT(sl_proxy_release(p, rule), 0); /* nothing was held */
  int64_t deadline = mono_ms() + 10000;
  while (my_int(direct, sql) != 0) {
    if (mono_ms() > deadline) SL_TEST_FAIL("session %lld still there",
                                           (long long)holder);
    nap_ms(10);
  }
  my_ok(direct, "XA COMMIT 'half-open'");
  SL_ASSERT_EQ_INT(my_int(direct, "SELECT count(*) FROM t"), 1);
  mysql_close(direct);
  sl_proxy_stop(p);
  sl_server_destroy(srv);
}

SL_TEST(my_restart_keeps_prepared) {
  sl_server_t *srv = start_server(SL_SERVER_MARIADB, NULL);
  MYSQL *m = my_conn(srv, sl_server_port(srv));
  my_ok(m, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB");
  my_prepare(m, "survivor", 1);
  mysql_close(m);
  pid_t old = sl_server_pid(srv);
  int port = sl_server_port(srv);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_restart(srv, SL_SERVER_STOP_CRASH, &err), err);
  SL_ASSERT_TRUE(sl_pid_is_gone(old));
  SL_ASSERT_EQ_INT(sl_server_port(srv), port);
  m = my_conn(srv, port);
  SL_ASSERT_TRUE(my_xa_listed(m, "survivor"));
  SL_ASSERT_EQ_INT(my_int(m, "SELECT count(*) FROM t"), 0);
  my_ok(m, "XA COMMIT 'survivor'");
  SL_ASSERT_EQ_INT(my_int(m, "SELECT v FROM t WHERE id = 1"), 10);
  mysql_close(m);
  stop_and_check_gone(srv);
}

/* ------------------------------------------------------------------ */
/* The program form. */

struct child {
  pid_t pid;
  FILE *to, *from;
};

static struct child run_proxy_program(int upstream) {
  char bin[4200];
  snprintf(bin, sizeof(bin), "%s/sl-holdproxy", sl_test_bin_dir());
  char port[16];
  snprintf(port, sizeof(port), "%d", upstream);
  int in[2], out[2];
  SL_ASSERT_EQ_INT(pipe(in), 0);
  SL_ASSERT_EQ_INT(pipe(out), 0);
  pid_t pid = fork();
  SL_ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    execl(bin, bin, "--pg", "--upstream", port, "--rule",
          "hold times=1 tag=\"COMMIT PREPARED\" match=COMMIT PREPARED 'p1'",
          (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  struct child c = {pid, fdopen(in[1], "w"), fdopen(out[0], "r")};
  setvbuf(c.to, NULL, _IOLBF, 0);
  return c;
}

static void say(struct child *c, const char *cmd, char *answer, size_t size) {
  fprintf(c->to, "%s\n", cmd);
  fflush(c->to);
  if (fgets(answer, (int)size, c->from) == NULL)
    SL_TEST_FAIL("sl-holdproxy gave no answer to '%s'", cmd);
  answer[strcspn(answer, "\n")] = '\0';
  printf("%s -> %s\n", cmd, answer);
}

SL_TEST(proxy_program) {
  sl_server_t *srv = start_server(SL_SERVER_POSTGRES, NULL);
  struct child ch = run_proxy_program(sl_server_port(srv));
  char line[512];
  SL_ASSERT_TRUE(fgets(line, sizeof(line), ch.from) != NULL);
  int pport = 0;
  SL_ASSERT_EQ_INT(sscanf(line, "port %d", &pport), 1);
  PGconn *direct = pg_direct(srv);
  pg_prepare_one(direct, "p1");
  PGconn *via = pg_via(srv, pport);
  SL_ASSERT_EQ_INT(PQsendQuery(via, "COMMIT PREPARED 'p1'"), 1);
  say(&ch, "wait 0 20000", line, sizeof(line));
  SL_ASSERT_EQ_STR(line, "paused");
  SL_ASSERT_EQ_INT(pg_int(direct, "SELECT count(*) FROM t"), 1);
  say(&ch, "count 0", line, sizeof(line));
  SL_ASSERT_EQ_STR(line, "attempts 1 held 1 released 0 dropped 0 paused 1");
  say(&ch, "release 0", line, sizeof(line));
  SL_ASSERT_EQ_STR(line, "released 1");
  PGresult *r = pg_result_within(via, 20000);
  SL_ASSERT_EQ_INT(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  SL_ASSERT_TRUE(PQgetResult(via) == NULL);
  /* Arming by command; bad input gets an error line. */
  say(&ch, "arm drop match=SELECT 'gone'", line, sizeof(line));
  SL_ASSERT_EQ_STR(line, "rule 1");
  SL_ASSERT_EQ_STR(pg_fails(via, "SELECT 'gone'"), "");
  say(&ch, "count 1", line, sizeof(line));
  SL_ASSERT_EQ_STR(line, "attempts 1 held 0 released 0 dropped 1 paused 0");
  say(&ch, "arm hold match=", line, sizeof(line));
  SL_ASSERT_TRUE(strncmp(line, "error ", 6) == 0);
  say(&ch, "arm hodl match=x", line, sizeof(line));
  SL_ASSERT_TRUE(strstr(line, "unknown action 'hodl'") != NULL);
  say(&ch, "wait 7 10", line, sizeof(line));
  SL_ASSERT_TRUE(strncmp(line, "error ", 6) == 0);
  say(&ch, "wait 1 10", line, sizeof(line));
  SL_ASSERT_EQ_STR(line, "timeout");
  say(&ch, "frobnicate", line, sizeof(line));
  SL_ASSERT_TRUE(strncmp(line, "error unknown command", 21) == 0);
  /* End of input stops it (a dead harness leaves no proxy). */
  fclose(ch.to);
  int64_t deadline = mono_ms() + 10000;
  int st;
  pid_t w;
  while ((w = waitpid(ch.pid, &st, WNOHANG)) == 0) {
    if (mono_ms() > deadline) SL_TEST_FAIL("sl-holdproxy still running");
    nap_ms(10);
  }
  SL_ASSERT_EQ_INT(w, ch.pid);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fclose(ch.from);
  PQfinish(via);
  PQfinish(direct);
  sl_server_destroy(srv);
}

/* Argument errors of the program: a message and exit status 2. */
SL_TEST(proxy_program_bad_args) {
  char cmd[4400];
  snprintf(cmd, sizeof(cmd),
           "'%s/sl-holdproxy' --pg --upstream 1 --rule 'hold times=x "
           "match=y' </dev/null >/dev/null 2>'%s/err'",
           sl_test_bin_dir(), sl_test_dir());
  int st = system(cmd);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  char path[4200];
  snprintf(path, sizeof(path), "%s/err", sl_test_dir());
  char *text = sl_test_read_file(path, NULL);
  SL_ASSERT_TRUE(text != NULL);
  printf("%s", text);
  SL_ASSERT_TRUE(strstr(text, "unknown option 'times=x'") != NULL);
  free(text);
  snprintf(cmd, sizeof(cmd),
           "'%s/sl-holdproxy' --upstream 5432 </dev/null >/dev/null "
           "2>'%s/err'", sl_test_bin_dir(), sl_test_dir());
  st = system(cmd);
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  text = sl_test_read_file(path, NULL);
  SL_ASSERT_TRUE(strstr(text, "--pg or --mysql is required") != NULL);
  free(text);
}
