/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mariadb sink against a real MariaDB 10.11 (tests/tools/sl_servers):
 * its vtable functions driven directly, as the engine drives them, for
 * prepare and commit, the answers to an unknown xid (already committed
 * through the marker, a live holder killed, lost), recover, bad input with
 * exact messages, and at-least-once upserts that never go back.  See
 * docs/connectors.md and src/connectors/README.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sl_holdproxy.h"
#include "sl_servers.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

static sl_server_t *start_maria(void) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  return srv;
}

static MYSQL *direct(const sl_server_t *srv) {
  MYSQL *m = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(srv, sl_server_port(srv), &m, &err), err);
  SL_ASSERT_OK(sl_my_exec(m, "USE sluice", NULL, NULL));
  return m;
}

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static int64_t my_int(MYSQL *m, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_query_int64(m, sql, &v, &err), err);
  return v;
}

/* Branches of job "job" and sink "snk" that XA RECOVER lists whose bqual
 * starts with bqual_prefix (NULL: all). */
static int count_xa(MYSQL *m, const char *bqual_prefix) {
  SL_ASSERT_EQ_INT(mysql_query(m, "XA RECOVER"), 0);
  MYSQL_RES *r = mysql_store_result(m);
  SL_ASSERT_TRUE(r != NULL);
  int n = 0;
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL) {
    long gl = strtol(row[1], NULL, 10);
    if (strncmp(row[3], "sl/job/snk", (size_t)gl) != 0 || gl != 10)
      continue;
    if (bqual_prefix == NULL ||
        strncmp(row[3] + gl, bqual_prefix, strlen(bqual_prefix)) == 0)
      n++;
  }
  mysql_free_result(r);
  return n;
}

/* Open InnoDB transactions of client connections (thread 0 runs the
 * server's own background transactions). */
#define USER_TRX                                                        \
  "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE "           \
  "trx_mysql_thread_id <> 0"

/* The fence epoch of job "job", sink "snk", subtask s. */
static int64_t fence_of(MYSQL *m, uint32_t s) {
  char sql[200];
  snprintf(sql, sizeof(sql), "SELECT epoch FROM sluice_xa_fence WHERE job ="
           " 'job' AND sink_uid = 'snk' AND subtask = %u", s);
  return my_int(m, sql);
}

static sl_schema_t *make_schema(void) {
  sl_field_t f[5] = {
      {"id", {SL_TYPE_INT64, 0, 0, false}},
      {"v", {SL_TYPE_INT64, 0, 0, true}},
      {"s", {SL_TYPE_STRING, 0, 0, true}},
      {"d", {SL_TYPE_DECIMAL, 10, 2, true}},
      {"ts", {SL_TYPE_TIMESTAMP, 0, 0, true}},
  };
  sl_schema_t *s = NULL;
  SL_ASSERT_OK(sl_schema_create(f, 5, &s, NULL));
  return s;
}

static const char *TABLE_DDL =
    "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT, s VARCHAR(40), "
    "d DECIMAL(12,2), ts DATETIME(6)) ENGINE=InnoDB";
static const char *TABLE_ALO_DDL =
    "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT, s VARCHAR(40), "
    "d DECIMAL(12,2), ts DATETIME(6), sluice_epoch BIGINT NOT NULL) "
    "ENGINE=InnoDB";

typedef struct fx_s {
  sl_server_t *srv;
  MYSQL *m;
  sl_schema_t *schema;
  sl_row_builder_t b;
  const sl_sink_vt_t *vt;
  void *ctx;
  int port; /* the port the sink connects to */
} fx_t;

static const char *const KEY[] = {"id"};

static void fx_sink(fx_t *fx, sl_delivery_t delivery) {
  sl_mariadb_sink_config_t c;
  sl_mariadb_sink_config_init(&c);
  c.host = "127.0.0.1";
  c.port = fx->port;
  c.user = sl_server_user(fx->srv);
  c.database = "sluice";
  c.table = "t";
  c.key = KEY;
  c.n_key = 1;
  c.delivery = delivery;
  c.batch_rows = 3;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_mariadb_sink_create(&c, &fx->vt, &fx->ctx, &err), err);
}

/* A second instance of the same sink (another attempt, as a new process
 * would create it), connecting to port: the same fixture with another
 * ctx.  Destroy its ctx with fx_close_second. */
static fx_t fx_second(const fx_t *fx, int port) {
  fx_t b = *fx;
  b.port = port;
  fx_sink(&b, SL_DELIVERY_EXACTLY_ONCE);
  return b;
}

static void fx_close_second(fx_t *b) { b->vt->destroy(b->ctx); }

static void fx_init(fx_t *fx, const char *ddl, sl_delivery_t d) {
  memset(fx, 0, sizeof(*fx));
  fx->srv = start_maria();
  fx->m = direct(fx->srv);
  my_ok(fx->m, ddl);
  fx->schema = make_schema();
  SL_ASSERT_OK(sl_row_builder_init(&fx->b, fx->schema));
  fx->port = sl_server_port(fx->srv);
  fx_sink(fx, d);
}

static void fx_close(fx_t *fx) {
  fx->vt->destroy(fx->ctx);
  sl_row_builder_close(&fx->b);
  sl_schema_unref(fx->schema);
  mysql_close(fx->m);
  sl_server_destroy(fx->srv);
}

static void *w_open(fx_t *fx, uint32_t subtask, uint32_t p, uint64_t epoch) {
  sl_sink_init_t in;
  memset(&in, 0, sizeof(in));
  in.subtask = subtask;
  in.parallelism = p;
  in.schema = fx->schema;
  in.uid = "snk";
  in.job = "job";
  in.epoch_id = epoch;
  void *w = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->writer_open(fx->ctx, &in, &w, &err), err);
  return w;
}

static void w_row(fx_t *fx, void *w, sl_row_kind_t kind, int64_t id,
                  int64_t v) {
  sl_row_builder_reset(&fx->b, kind);
  sl_row_builder_set_i64(&fx->b, 0, id);
  sl_row_builder_set_i64(&fx->b, 1, v);
  char s[40];
  snprintf(s, sizeof(s), "it's \"%lld\"\\", (long long)v);
  SL_ASSERT_OK(sl_row_builder_set_str(&fx->b, 2, s, (uint32_t)strlen(s)));
  sl_row_builder_set_i64(&fx->b, 3, -v * 101); /* -1.01 * v */
  sl_row_builder_set_i64(&fx->b, 4, 86400000000LL + v); /* 1970-01-02 */
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&fx->b, &row, NULL));
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->write(w, &row, &err), err);
}

/* A row that must fail; returns the message (the caller frees err). */
static const char *w_row_fails(fx_t *fx, void *w, int64_t id, int64_t v,
                               sl_error_t **err) {
  sl_row_builder_reset(&fx->b, SL_ROW_INSERT);
  sl_row_builder_set_i64(&fx->b, 0, id);
  sl_row_builder_set_i64(&fx->b, 1, v);
  sl_row_builder_set_null(&fx->b, 2);
  sl_row_builder_set_null(&fx->b, 3);
  sl_row_builder_set_null(&fx->b, 4);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&fx->b, &row, NULL));
  *err = NULL;
  SL_ASSERT_TRUE(fx->vt->write(w, &row, err) != SL_OK);
  SL_ASSERT_TRUE(*err != NULL);
  printf("write: %s\n", sl_error_message(*err));
  return sl_error_message(*err);
}

static void w_close(fx_t *fx, void *w) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->writer_close(w, true, &err), err);
}

static void w_prepare(fx_t *fx, void *w, uint64_t ckpt, sl_bytes_t *out) {
  sl_bytes_init(out);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->prepare(w, ckpt, out, &err), err);
}

static void *c_open(fx_t *fx, uint32_t subtask, uint32_t p,
                    const uint32_t *owned, uint32_t n_owned,
                    uint64_t epoch) {
  sl_committer_init_t in;
  memset(&in, 0, sizeof(in));
  in.job = "job";
  in.uid = "snk";
  in.subtask = subtask;
  in.parallelism = p;
  in.owned_subtasks = owned;
  in.n_owned_subtasks = n_owned;
  in.epoch_id = epoch;
  void *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->committer_open(fx->ctx, &in, &c, &err), err);
  return c;
}

/* recover(), as the engine runs it after the restored commits and before
 * the writer of the committer's subtask opens. */
static void c_recover(fx_t *fx, void *c) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->recover(c, &err), err);
}

static sl_commit_status_t c_commit(fx_t *fx, void *c, uint64_t ckpt,
                                   uint32_t origin, const sl_bytes_t *b,
                                   uint32_t attempt, char *msg,
                                   size_t msg_size) {
  sl_commit_status_t st = SL_COMMIT_FATAL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx->vt->commit(c, ckpt, origin, b->data, b->len, attempt,
                                &st, &err),
                 err);
  if (msg != NULL) {
    snprintf(msg, msg_size, "%s", err != NULL ? sl_error_message(err) : "");
  }
  sl_error_destroy(err);
  return st;
}

static const char *open_err(fx_t *fx, sl_error_t **err) {
  sl_sink_init_t in;
  memset(&in, 0, sizeof(in));
  in.schema = fx->schema;
  in.uid = "snk";
  in.job = "job";
  in.epoch_id = 1;
  void *w = NULL;
  *err = NULL;
  int rc = fx->vt->writer_open(fx->ctx, &in, &w, err);
  SL_ASSERT_TRUE(rc != SL_OK);
  SL_ASSERT_TRUE(*err != NULL);
  printf("message: %s\n", sl_error_message(*err));
  return sl_error_message(*err);
}

/* ------------------------------------------------------------------ */
/* Exactly-once. */

/* Invisible before the commit, visible after, exactly once; the marker
 * row is committed with the rows; a second commit (a lost reply) answers
 * ALREADY through the marker; an epoch without rows gives no
 * committable. */
SL_TEST(eo_prepare_commit) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *c = c_open(&fx, 0, 1, owned, 1, 5);
  c_recover(&fx, c);
  void *w = w_open(&fx, 0, 1, 5);
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  w_row(&fx, w, SL_ROW_INSERT, 2, 20);
  w_row(&fx, w, SL_ROW_INSERT, 3, 30);
  w_row(&fx, w, SL_ROW_INSERT, 4, 40); /* a second batch */
  w_row(&fx, w, SL_ROW_UPDATE_BEFORE, 1, 10);
  w_row(&fx, w, SL_ROW_UPDATE_AFTER, 1, 11);
  w_row(&fx, w, SL_ROW_DELETE, 2, 20);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->flush(w, &err), err);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 0);
  sl_bytes_t cm;
  w_prepare(&fx, w, 7, &cm);
  SL_ASSERT_TRUE(cm.len > 0);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/5/"), 1);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 0);
  /* The next epoch is named 7, on a new connection. */
  w_row(&fx, w, SL_ROW_INSERT, 5, 50);
  sl_bytes_t cm2;
  w_prepare(&fx, w, 8, &cm2);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/7/"), 1);
  /* An epoch without rows. */
  sl_bytes_t cm3;
  w_prepare(&fx, w, 9, &cm3);
  SL_ASSERT_EQ_INT(cm3.len, 0);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 7, 0, &cm, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 3);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 11);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t WHERE id = 2"), 0);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t WHERE id = 4 AND s "
                                "= 'it''s \"40\"\\\\' AND d = -40.40 AND ts "
                                "= '1970-01-02 00:00:00.000040'"),
                   1);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM sluice_xa_commits "
                                "WHERE job = 'job' AND sink_uid = 'snk' AND "
                                "subtask = 0 AND epoch = 5 AND "
                                "checkpoint_id = 7"),
                   1);
  /* The reply was lost: the same committable again. */
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 7, 0, &cm, 2, NULL, 0),
                   SL_COMMIT_ALREADY);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 8, 0, &cm2, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 4);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM sluice_xa_commits"),
                   2);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);
  w_close(&fx, w);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  sl_bytes_close(&cm2);
  sl_bytes_close(&cm3);
  fx_close(&fx);
}

/* The next epoch touches the rows of the epoch prepared before it, whose
 * branch holds their locks until its commit, which runs on the writer's
 * thread: the writer keeps the next epoch's statements until that commit
 * instead of waiting for the locks (a lock wait timeout). */
SL_TEST(eo_next_epoch_waits_for_commit) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  my_ok(fx.m, "SET GLOBAL innodb_lock_wait_timeout = 2");
  uint32_t owned[] = {0};
  void *c = c_open(&fx, 0, 1, owned, 1, 40);
  c_recover(&fx, c);
  void *w = w_open(&fx, 0, 1, 40);
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t a, b;
  w_prepare(&fx, w, 41, &a);
  /* Three rows: a full batch (batch_rows 3) on key 1. */
  w_row(&fx, w, SL_ROW_UPDATE_AFTER, 1, 11);
  w_row(&fx, w, SL_ROW_UPDATE_AFTER, 1, 12);
  w_row(&fx, w, SL_ROW_UPDATE_AFTER, 1, 13);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->flush(w, &err), err);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 41, 0, &a, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 10);
  w_row(&fx, w, SL_ROW_UPDATE_AFTER, 1, 14);
  w_prepare(&fx, w, 42, &b);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 42, 0, &b, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 14);
  w_close(&fx, w);
  fx.vt->committer_close(c);
  sl_bytes_close(&a);
  sl_bytes_close(&b);
  fx_close(&fx);
}

/* A prepared branch still attached to a live connection (the writer's
 * connection half-open behind the proxy after the writer closed it): XA
 * COMMIT answers 1397 while XA RECOVER lists the xid; the committer kills
 * the holder and commits. */
SL_TEST(eo_half_open_holder_killed) {
  fx_t fx;
  memset(&fx, 0, sizeof(fx));
  fx.srv = start_maria();
  fx.m = direct(fx.srv);
  my_ok(fx.m, TABLE_DDL);
  fx.schema = make_schema();
  SL_ASSERT_OK(sl_row_builder_init(&fx.b, fx.schema));
  sl_proxy_t *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_proxy_start(SL_PROXY_MYSQL, sl_server_port(fx.srv), 0,
                                &p, &err),
                 err);
  sl_proxy_rule_t r;
  memset(&r, 0, sizeof(r));
  r.match = "XA PREPARE";
  r.action = SL_PROXY_PASS;
  r.keep_upstream_open_on_client_close = true;
  int rule = -1;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &r, &rule, &err), err);
  fx.port = sl_proxy_port(p);
  fx_sink(&fx, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *c = c_open(&fx, 0, 1, owned, 1, 3);
  c_recover(&fx, c);
  void *w = w_open(&fx, 0, 1, 3);
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t cm;
  w_prepare(&fx, w, 4, &cm);
  /* The writer closed its connection; the server still holds it. */
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM information_schema."
                                "PROCESSLIST WHERE USER = 'root'"),
                   3);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/3/"), 1);
  SL_ASSERT_EQ_INT(sl_my_exec(fx.m, "XA COMMIT 'nothing'", NULL, NULL),
                   SL_EIO);
  /* The kill is waited for; should the holder still be ending, the
   * answer is RETRY and the next attempt commits. */
  sl_commit_status_t st = c_commit(&fx, c, 4, 0, &cm, 1, NULL, 0);
  if (st == SL_COMMIT_RETRY) st = c_commit(&fx, c, 4, 0, &cm, 2, NULL, 0);
  SL_ASSERT_EQ_INT(st, SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 10);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM sluice_xa_commits"),
                   1);
  sl_proxy_counts_t pc;
  SL_ASSERT_OK(sl_proxy_count(p, rule, &pc));
  SL_ASSERT_EQ_INT(pc.attempts, 1);
  w_close(&fx, w);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  sl_proxy_stop(p);
  fx_close(&fx);
}

/* Rolled back behind the sink's back (a DBA's XA ROLLBACK): neither the
 * branch nor its marker exists, and the commit answers LOST with a
 * message naming the checkpoint, the xid and the marker table. */
SL_TEST(eo_lost_fails_loudly) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *c = c_open(&fx, 0, 1, owned, 1, 11);
  c_recover(&fx, c);
  void *w = w_open(&fx, 0, 1, 11);
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t cm;
  w_prepare(&fx, w, 12, &cm);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/11/"), 1);
  /* The branch's connection id is the last part of its bqual. */
  SL_ASSERT_EQ_INT(mysql_query(fx.m, "XA RECOVER"), 0);
  MYSQL_RES *res = mysql_store_result(fx.m);
  MYSQL_ROW row = mysql_fetch_row(res);
  SL_ASSERT_TRUE(row != NULL);
  char sql[300];
  snprintf(sql, sizeof(sql), "XA ROLLBACK '%.10s','%s'", row[3],
           row[3] + 10);
  const char *cid = strrchr(row[3] + 10, '/');
  SL_ASSERT_TRUE(cid != NULL);
  char gone[200];
  snprintf(gone, sizeof(gone), "SELECT COUNT(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %s", cid + 1);
  mysql_free_result(res);
  /* The writer disconnected after XA PREPARE, but the server ends that
   * session a moment later, and until then the branch is attached to it
   * (1397 from any other connection).  Wait for the session to be gone, a
   * condition, bounded at 10 s. */
  for (int i = 0; my_int(fx.m, gone) != 0; i++) {
    if (i == 1000) SL_TEST_FAIL("the writer's session never ended");
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  my_ok(fx.m, sql);
  char msg[1024];
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 12, 0, &cm, 1, msg, sizeof(msg)),
                   SL_COMMIT_LOST);
  printf("message: %s\n", msg);
  SL_ASSERT_TRUE(strstr(msg, "mariadb sink 'snk' committer 0: the output "
                             "of checkpoint 12 of subtask 0 is lost: XA "
                             "COMMIT of xid 'sl/job/snk','0/11/") != NULL);
  SL_ASSERT_TRUE(strstr(msg, "answered error 1397, the branch is not "
                             "prepared (XA RECOVER) and its marker (epoch "
                             "11) is not in sluice_xa_commits") != NULL);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 0);
  w_close(&fx, w);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  fx_close(&fx);
}

/* Waits (bounded at 10 s) until the session of connection id cid (text)
 * has left the process list. */
static void wait_gone(MYSQL *m, const char *cid) {
  char gone[200];
  snprintf(gone, sizeof(gone), "SELECT COUNT(*) FROM information_schema."
           "PROCESSLIST WHERE ID = %s", cid);
  for (int i = 0; my_int(m, gone) != 0; i++) {
    if (i == 1000) SL_TEST_FAIL("session %s never ended", cid);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* An OK to XA COMMIT is believed only with the epoch's marker visible.
 * MariaDB 10.11 once answered OK to an XA COMMIT racing the end of the
 * branch's session and kept the branch as a recovered prepared
 * transaction (bench/results/db/mariadb-orphan).  That race is rare, so
 * the test builds the same answer on purpose: the sink's branch is rolled
 * back and a branch with the same xid but no marker row is prepared in
 * its place; XA COMMIT of it answers OK, and the sink says LOST, loudly,
 * instead of OK. */
SL_TEST(eo_commit_ok_without_marker_is_not_believed) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *c = c_open(&fx, 0, 1, owned, 1, 11);
  c_recover(&fx, c);
  void *w = w_open(&fx, 0, 1, 11);
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t cm;
  w_prepare(&fx, w, 12, &cm);
  SL_ASSERT_EQ_INT(mysql_query(fx.m, "XA RECOVER"), 0);
  MYSQL_RES *res = mysql_store_result(fx.m);
  MYSQL_ROW row = mysql_fetch_row(res);
  SL_ASSERT_TRUE(row != NULL);
  char xid[300], sql[400];
  snprintf(xid, sizeof(xid), "'%.10s','%s'", row[3], row[3] + 10);
  const char *cid = strrchr(row[3] + 10, '/');
  SL_ASSERT_TRUE(cid != NULL);
  char cids[32];
  snprintf(cids, sizeof(cids), "%s", cid + 1);
  mysql_free_result(res);
  wait_gone(fx.m, cids);
  snprintf(sql, sizeof(sql), "XA ROLLBACK %s", xid);
  my_ok(fx.m, sql);
  /* The same xid, prepared again without a marker row. */
  MYSQL *o = direct(fx.srv);
  snprintf(sql, sizeof(sql), "XA START %s", xid);
  my_ok(o, sql);
  my_ok(o, "INSERT INTO t (id, v) VALUES (2, 20)");
  snprintf(sql, sizeof(sql), "XA END %s", xid);
  my_ok(o, sql);
  snprintf(sql, sizeof(sql), "XA PREPARE %s", xid);
  my_ok(o, sql);
  int64_t ocid = my_int(o, "SELECT CONNECTION_ID()");
  mysql_close(o);
  snprintf(cids, sizeof(cids), "%lld", (long long)ocid);
  wait_gone(fx.m, cids);
  char msg[1024];
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 12, 0, &cm, 1, msg, sizeof(msg)),
                   SL_COMMIT_LOST);
  if (strstr(msg, "mariadb sink 'snk' committer 0: the output of "
                  "checkpoint 12 of subtask 0 is not committed: XA COMMIT "
                  "of xid 'sl/job/snk','0/11/") == NULL ||
      strstr(msg, "answered OK but its marker (epoch 11) is not in "
                  "sluice_xa_commits") == NULL)
    SL_TEST_FAIL("message: %s", msg);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t WHERE id = 1"), 0);
  w_close(&fx, w);
  fx.vt->committer_close(c);
  sl_bytes_close(&cm);
  fx_close(&fx);
}

/* recover() after a change of parallelism 3 -> 2: new subtask 0 owns old
 * subtasks 0 and 2.  It rolls back their lingering branches (prepared by
 * an attempt whose checkpoint never completed) but neither the branch of
 * old subtask 1 (owned by new subtask 1) nor a branch it was asked to
 * commit, and it kills a writer of an earlier attempt that is still
 * connected with an open branch. */
SL_TEST(eo_recover_owned_only) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t all[] = {0, 1, 2};
  void *c0[3];
  void *w[3];
  sl_bytes_t cm[3];
  for (uint32_t i = 0; i < 3; i++) {
    c0[i] = c_open(&fx, i, 3, &all[i], 1, 20);
    c_recover(&fx, c0[i]);
    w[i] = w_open(&fx, i, 3, 20);
    w_row(&fx, w[i], SL_ROW_INSERT, 100 + i, (int64_t)i);
    w_prepare(&fx, w[i], 21, &cm[i]);
  }
  /* Subtask 0 of that attempt also has an open branch (epoch 21), and its
   * connection is alive: a zombie writer. */
  w_row(&fx, w[0], SL_ROW_INSERT, 200, 1);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 3);
  for (uint32_t i = 0; i < 3; i++) fx.vt->committer_close(c0[i]);
  /* The restore: new subtask 0 of 2 owns old 0 and 2; the restored
   * checkpoint named subtask 2's branch (committed first). */
  uint32_t owned[] = {0, 2};
  void *c = c_open(&fx, 0, 2, owned, 2, 30);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 21, 2, &cm[2], 1, NULL, 0),
                   SL_COMMIT_OK);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/"), 0);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "1/20/"), 1);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "2/"), 0);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 1);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 102"), 2);
  /* The fence rows of old subtasks 0 and 2 are bumped, 1's is not; old
   * subtask 2's writer, which has no successor, fails its next branch. */
  SL_ASSERT_EQ_INT(fence_of(fx.m, 0), 2);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 1), 1);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 2), 2);
  SL_ASSERT_TRUE(strstr(w_row_fails(&fx, w[2], 300, 1, &err),
                        "mariadb sink 'snk' subtask 2: fenced off: "
                        "sluice.sluice_xa_fence holds fence epoch 2 for job "
                        "'job', sink 'snk', subtask 2, but this writer "
                        "opened at fence epoch 1") != NULL);
  sl_error_destroy(err);
  err = NULL;
  /* The zombie is gone: a new writer of subtask 0 takes its lock and
   * writes key 200 without waiting for its row lock. */
  void *wn = w_open(&fx, 0, 2, 30);
  w_row(&fx, wn, SL_ROW_INSERT, 200, 7);
  sl_bytes_t cn;
  w_prepare(&fx, wn, 31, &cn);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 31, 0, &cn, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 200"), 7);
  /* The zombie's next statement fails. */
  sl_bytes_t cz;
  sl_bytes_init(&cz);
  SL_ASSERT_TRUE(fx.vt->prepare(w[0], 22, &cz, &err) != SL_OK);
  printf("zombie: %s\n", sl_error_message(err));
  sl_error_destroy(err);
  err = NULL;
  /* Recovering again is harmless and keeps subtask 1's branch. */
  SL_ASSERT_OK_E(fx.vt->recover(c, &err), err);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 1);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 0), 3);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 1), 1);
  for (uint32_t i = 0; i < 3; i++) {
    SL_ASSERT_OK(fx.vt->writer_close(w[i], false, NULL));
    sl_bytes_close(&cm[i]);
  }
  w_close(&fx, wn);
  sl_bytes_close(&cn);
  sl_bytes_close(&cz);
  fx.vt->committer_close(c);
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* Fencing writers of older attempts (W9; mariadb_fence.c F1-F4). */

/* Attempt A's writer is between epochs (it prepared epoch 21 at
 * checkpoint 22, which never completes) when attempt B, a second sink
 * instance restoring checkpoint 21, recovers the subtask: B commits the
 * restored committable (already committed), rolls A's prepared branch
 * back and bumps the fence.  A's writer then starts its next branch: the
 * fence check fails (F3) with a message naming sink, subtask and both
 * fence epochs, the writer stays fenced, and the commit of A's checkpoint
 * 22 by A's committer finds nothing (lost).  None of A's rows after
 * checkpoint 21 is ever visible; B's replay makes the table exact.  A
 * writer opened before recover() refuses to start a branch. */
SL_TEST(eo_fence_zombie_rejected) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *ca = c_open(&fx, 0, 1, owned, 1, 20);
  c_recover(&fx, ca);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 0), 1);
  void *wa = w_open(&fx, 0, 1, 20);
  sl_bytes_t a21, a22;
  w_row(&fx, wa, SL_ROW_INSERT, 1, 10);
  w_prepare(&fx, wa, 21, &a21);
  SL_ASSERT_EQ_INT(c_commit(&fx, ca, 21, 0, &a21, 1, NULL, 0), SL_COMMIT_OK);
  w_row(&fx, wa, SL_ROW_INSERT, 2, 20);
  w_prepare(&fx, wa, 22, &a22);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/21/"), 1);

  /* Attempt B.  Its writer may not start a branch before recover(). */
  fx_t fb = fx_second(&fx, fx.port);
  sl_error_t *err = NULL;
  void *early = w_open(&fb, 0, 1, 30);
  SL_ASSERT_EQ_STR(w_row_fails(&fb, early, 2, 21, &err),
                   "mariadb sink 'snk' subtask 0: no fence epoch: recover() "
                   "of this subtask's committer did not run in this sink "
                   "instance before the writer opened (the engine runs "
                   "committer_open, the restored commits and recover before "
                   "writer_open)");
  sl_error_destroy(err);
  SL_ASSERT_OK(fb.vt->writer_close(early, false, NULL));
  void *cb = c_open(&fb, 0, 1, owned, 1, 30);
  SL_ASSERT_EQ_INT(c_commit(&fb, cb, 21, 0, &a21, 1, NULL, 0),
                   SL_COMMIT_ALREADY);
  c_recover(&fb, cb);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 0), 2);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);

  /* The zombie's next branch fails its fence check, and stays fenced. */
  const char *want =
      "mariadb sink 'snk' subtask 0: fenced off: sluice.sluice_xa_fence "
      "holds fence epoch 2 for job 'job', sink 'snk', subtask 0, but this "
      "writer opened at fence epoch 1: a newer attempt has recovered the "
      "subtask, so this writer belongs to an older attempt and stops (what "
      "it wrote since its last prepare is rolled back)";
  SL_ASSERT_EQ_STR(w_row_fails(&fx, wa, 3, 99, &err), want);
  sl_error_destroy(err);
  SL_ASSERT_EQ_STR(w_row_fails(&fx, wa, 4, 99, &err), want);
  sl_error_destroy(err);
  sl_bytes_t z;
  sl_bytes_init(&z);
  err = NULL;
  SL_ASSERT_EQ_INT(fx.vt->prepare(wa, 23, &z, &err), SL_ESTATE);
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT(z.len, 0);
  /* The fenced writer's branch is rolled back and its connection gone. */
  SL_ASSERT_EQ_INT(my_int(fx.m, USER_TRX), 0);
  /* A's coordinator completes checkpoint 22: its branch is gone. */
  char msg[1024];
  SL_ASSERT_EQ_INT(c_commit(&fx, ca, 22, 0, &a22, 1, msg, sizeof(msg)),
                   SL_COMMIT_LOST);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t WHERE id <> 1"), 0);

  /* B replays from checkpoint 21. */
  void *wb = w_open(&fb, 0, 1, 30);
  w_row(&fb, wb, SL_ROW_INSERT, 2, 21);
  w_row(&fb, wb, SL_ROW_INSERT, 3, 30);
  sl_bytes_t b31;
  w_prepare(&fb, wb, 31, &b31);
  SL_ASSERT_EQ_INT(c_commit(&fb, cb, 31, 0, &b31, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 3);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT SUM(v) FROM t"), 10 + 21 + 30);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 2"), 21);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM sluice_xa_commits"),
                   2);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);
  w_close(&fb, wb);
  SL_ASSERT_OK(fx.vt->writer_close(wa, false, NULL));
  fx.vt->committer_close(ca);
  fb.vt->committer_close(cb);
  sl_bytes_close(&a21);
  sl_bytes_close(&a22);
  sl_bytes_close(&b31);
  sl_bytes_close(&z);
  fx_close_second(&fb);
  fx_close(&fx);
}

typedef struct recover_arg_s {
  fx_t *fx;
  void *c;
  int rc;
  sl_error_t *err;
} recover_arg_t;

static void *recover_thread(void *p) {
  recover_arg_t *a = p;
  a->rc = a->fx->vt->recover(a->c, &a->err);
  return NULL;
}

/* Attempt B's recover() is held (its XA RECOVER reply, by the proxy)
 * after it looked for writers of older attempts and found none; attempt
 * A's writer, which the kill did not reach, starts its next branch then,
 * passes its fence check (the fence is not bumped yet) and writes a row.
 * Released, B's bump waits for the fence row A's branch holds, times out
 * (1205), and the next round kills A's writer through its writer lock,
 * which rolls its branch back, and bumps (F2, F4).  A's row is never
 * visible; A's writer fails; B's replay makes the table exact. */
SL_TEST(eo_fence_bump_waits_for_zombie_branch) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *ca = c_open(&fx, 0, 1, owned, 1, 20);
  c_recover(&fx, ca);
  void *wa = w_open(&fx, 0, 1, 20);
  sl_bytes_t a21;
  w_row(&fx, wa, SL_ROW_INSERT, 1, 10);
  w_prepare(&fx, wa, 21, &a21);
  SL_ASSERT_EQ_INT(c_commit(&fx, ca, 21, 0, &a21, 1, NULL, 0), SL_COMMIT_OK);

  /* Attempt B connects through the proxy. */
  sl_proxy_t *p = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_proxy_start(SL_PROXY_MYSQL, sl_server_port(fx.srv), 0,
                                &p, &err),
                 err);
  fx_t fb = fx_second(&fx, sl_proxy_port(p));
  void *cb = c_open(&fb, 0, 1, owned, 1, 30);
  SL_ASSERT_EQ_INT(c_commit(&fb, cb, 21, 0, &a21, 1, NULL, 0),
                   SL_COMMIT_ALREADY);
  sl_proxy_rule_t r;
  memset(&r, 0, sizeof(r));
  r.match = "XA RECOVER";
  r.action = SL_PROXY_HOLD;
  r.times = 1;
  int hold = -1;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &r, &hold, &err), err);
  memset(&r, 0, sizeof(r));
  r.match = "UPDATE `sluice_xa_fence`";
  r.action = SL_PROXY_PASS;
  int bumps = -1;
  SL_ASSERT_OK_E(sl_proxy_arm(p, &r, &bumps, &err), err);
  recover_arg_t arg = {&fb, cb, -1, NULL};
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, recover_thread, &arg), 0);
  SL_ASSERT_OK(sl_proxy_wait_paused(p, hold, 60000));

  /* B's recover is held: A's writer starts epoch 21 and writes key 2. */
  w_row(&fx, wa, SL_ROW_INSERT, 2, 20);
  SL_ASSERT_OK_E(fx.vt->flush(wa, &err), err);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0); /* open, not prepared */
  SL_ASSERT_EQ_INT(my_int(fx.m, USER_TRX), 1);
  SL_ASSERT_EQ_INT(sl_proxy_release(p, hold), 1);
  SL_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
  SL_ASSERT_OK_E(arg.rc, arg.err);

  /* Two rounds: XA RECOVER twice, the first bump timed out. */
  sl_proxy_counts_t pc;
  SL_ASSERT_OK(sl_proxy_count(p, hold, &pc));
  SL_ASSERT_EQ_INT(pc.attempts, 2);
  SL_ASSERT_OK(sl_proxy_count(p, bumps, &pc));
  SL_ASSERT_EQ_INT(pc.attempts, 2);
  SL_ASSERT_EQ_INT(fence_of(fx.m, 0), 2);
  SL_ASSERT_EQ_INT(my_int(fx.m, USER_TRX), 0);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 1);
  /* A's writer lost its connection with its branch. */
  sl_bytes_t z;
  sl_bytes_init(&z);
  SL_ASSERT_TRUE(fx.vt->prepare(wa, 22, &z, &err) != SL_OK);
  printf("zombie prepare: %s\n", sl_error_message(err));
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);

  /* B replays from checkpoint 21. */
  void *wb = w_open(&fb, 0, 1, 30);
  w_row(&fb, wb, SL_ROW_INSERT, 2, 21);
  w_row(&fb, wb, SL_ROW_INSERT, 3, 30);
  sl_bytes_t b31;
  w_prepare(&fb, wb, 31, &b31);
  SL_ASSERT_EQ_INT(c_commit(&fb, cb, 31, 0, &b31, 1, NULL, 0), SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 3);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT SUM(v) FROM t"), 10 + 21 + 30);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);
  w_close(&fb, wb);
  SL_ASSERT_OK(fx.vt->writer_close(wa, false, NULL));
  fx.vt->committer_close(ca);
  fb.vt->committer_close(cb);
  sl_bytes_close(&a21);
  sl_bytes_close(&b31);
  sl_bytes_close(&z);
  fx_close_second(&fb);
  sl_proxy_stop(p);
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* At-least-once. */

/* Each writer's epoch is above every epoch in the table, and an upsert or
 * a delete of an older epoch never replaces a newer row: a writer of an
 * earlier attempt that is still writing cannot take the table back. */
SL_TEST(alo_never_goes_back) {
  fx_t fx;
  fx_init(&fx, TABLE_ALO_DDL, SL_DELIVERY_AT_LEAST_ONCE);
  SL_ASSERT_TRUE(fx.vt->prepare == NULL);
  void *a = w_open(&fx, 0, 1, 0);
  w_row(&fx, a, SL_ROW_INSERT, 1, 10);
  w_row(&fx, a, SL_ROW_INSERT, 2, 20);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(fx.vt->flush(a, &err), err);
  /* Committed at the flush. */
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 10);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT sluice_epoch FROM t WHERE id = 1"),
                   1);
  /* The restored attempt's writer replays and goes on. */
  void *b = w_open(&fx, 0, 1, 0);
  w_row(&fx, b, SL_ROW_INSERT, 1, 10);
  w_row(&fx, b, SL_ROW_UPDATE_BEFORE, 1, 10);
  w_row(&fx, b, SL_ROW_UPDATE_AFTER, 1, 15);
  SL_ASSERT_OK_E(fx.vt->flush(b, &err), err);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 15);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT sluice_epoch FROM t WHERE id = 1"),
                   2);
  /* The old writer, still running, writes an older version and deletes
   * key 1: neither goes through; its new key does. */
  w_row(&fx, a, SL_ROW_UPDATE_AFTER, 1, 12);
  w_row(&fx, a, SL_ROW_DELETE, 1, 12);
  w_row(&fx, a, SL_ROW_INSERT, 3, 30);
  SL_ASSERT_OK_E(fx.vt->flush(a, &err), err);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 1"), 15);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t WHERE id = 1 AND s"
                                " = 'it''s \"15\"\\\\'"),
                   1);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT v FROM t WHERE id = 3"), 30);
  /* The newer writer deletes key 2 (written by the older one). */
  w_row(&fx, b, SL_ROW_DELETE, 2, 20);
  w_close(&fx, b);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t WHERE id = 2"), 0);
  w_close(&fx, a);
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* Bad input. */

SL_TEST(bad_config) {
  sl_mariadb_sink_config_t c;
  sl_mariadb_sink_config_init(&c);
  const sl_sink_vt_t *vt;
  void *ctx;
  sl_error_t *err = NULL;
  c.user = "u";
  c.database = "db";
  c.table = "t";
  SL_ASSERT_EQ_INT(sl_mariadb_sink_create(&c, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "mariadb sink: no host");
  sl_error_destroy(err);
  err = NULL;
  c.host = "h";
  SL_ASSERT_EQ_INT(sl_mariadb_sink_create(&c, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink: mode upsert needs key columns (the "
                   "table's primary or unique key)");
  sl_error_destroy(err);
  err = NULL;
  c.mode = SL_MARIADB_INSERT;
  c.delivery = SL_DELIVERY_AT_LEAST_ONCE;
  SL_ASSERT_EQ_INT(sl_mariadb_sink_create(&c, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink: delivery at-least-once needs mode upsert "
                   "(an insert replayed after a restore would be written "
                   "twice)");
  sl_error_destroy(err);
  err = NULL;
  c.port = 70000;
  SL_ASSERT_EQ_INT(sl_mariadb_sink_create(&c, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink: port 70000 is not in 1..65535");
  sl_error_destroy(err);
  err = NULL;
  c.port = 0;
  c.mode = SL_MARIADB_UPSERT;
  c.delivery = SL_DELIVERY_EXACTLY_ONCE;
  c.key = KEY;
  c.n_key = 1;
  c.fence_table = "sluice_xa_commits";
  SL_ASSERT_EQ_INT(sl_mariadb_sink_create(&c, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink: the commit-log table and the fence table "
                   "are both 'sluice_xa_commits'; they need different names");
  sl_error_destroy(err);
  err = NULL;
  c.fence_table = "t";
  SL_ASSERT_EQ_INT(sl_mariadb_sink_create(&c, &vt, &ctx, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink: table 't' is also the sink's fence table; "
                   "the rows need a table of their own");
  sl_error_destroy(err);
}

/* The commit-log and fence tables must be InnoDB (a marker must commit
 * and roll back with its branch, a fence row must lock): a MyISAM one is
 * refused when the committer opens, with the table named; a fence table
 * of another name (fence_table) is created and used. */
SL_TEST(bad_fence_table_engine) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  my_ok(fx.m, "CREATE TABLE sluice_xa_fence (job VARBINARY(64) NOT NULL, "
              "sink_uid VARBINARY(64) NOT NULL, subtask INT UNSIGNED NOT "
              "NULL, epoch BIGINT UNSIGNED NOT NULL, PRIMARY KEY (job, "
              "sink_uid, subtask)) ENGINE=MyISAM");
  sl_committer_init_t in;
  memset(&in, 0, sizeof(in));
  in.job = "job";
  in.uid = "snk";
  uint32_t owned[] = {0};
  in.owned_subtasks = owned;
  in.n_owned_subtasks = 1;
  in.epoch_id = 1;
  void *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_EQ_INT(fx.vt->committer_open(fx.ctx, &in, &c, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink 'snk' committer 0: the fence table "
                   "sluice.sluice_xa_fence uses the MyISAM engine; "
                   "exactly-once needs InnoDB (its rows must commit and "
                   "lock with the XA branches)");
  sl_error_destroy(err);
  err = NULL;
  my_ok(fx.m, "DROP TABLE sluice_xa_fence");
  my_ok(fx.m, "ALTER TABLE sluice_xa_commits ENGINE=MyISAM");
  SL_ASSERT_EQ_INT(fx.vt->committer_open(fx.ctx, &in, &c, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink 'snk' committer 0: the commit-log table "
                   "sluice.sluice_xa_commits uses the MyISAM engine; "
                   "exactly-once needs InnoDB (its rows must commit and "
                   "lock with the XA branches)");
  sl_error_destroy(err);
  fx.vt->destroy(fx.ctx);
  /* Another name. */
  my_ok(fx.m, "DROP TABLE sluice_xa_commits");
  sl_mariadb_sink_config_t cfg;
  sl_mariadb_sink_config_init(&cfg);
  cfg.host = "127.0.0.1";
  cfg.port = fx.port;
  cfg.user = sl_server_user(fx.srv);
  cfg.database = "sluice";
  cfg.table = "t";
  cfg.key = KEY;
  cfg.n_key = 1;
  cfg.fence_table = "my_fence";
  SL_ASSERT_OK_E(sl_mariadb_sink_create(&cfg, &fx.vt, &fx.ctx, &err), err);
  c = c_open(&fx, 0, 1, owned, 1, 1);
  c_recover(&fx, c);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT epoch FROM my_fence WHERE job = "
                                "'job' AND sink_uid = 'snk' AND subtask = 0"),
                   1);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM information_schema."
                                "TABLES WHERE TABLE_NAME = 'sluice_xa_fence'"),
                   0);
  fx.vt->committer_close(c);
  fx_close(&fx);
}

/* A port nobody listens on: the message names host:port and the OS error,
 * and comes at once. */
SL_TEST(bad_unreachable) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  SL_ASSERT_TRUE(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SL_ASSERT_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t al = sizeof(a);
  SL_ASSERT_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &al), 0);
  int port = ntohs(a.sin_port);
  close(fd); /* bound, never listened: refused */
  sl_mariadb_sink_config_t c;
  sl_mariadb_sink_config_init(&c);
  c.host = "127.0.0.1";
  c.port = port;
  c.user = "root";
  c.database = "sluice";
  c.table = "t";
  c.key = KEY;
  c.n_key = 1;
  c.connect_timeout_ms = 2000;
  sl_error_t *err = NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  SL_ASSERT_EQ_INT(sl_mariadb_sink_check(&c, NULL, &err), SL_EIO);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("message: %s\n", sl_error_message(err));
  char want[200];
  snprintf(want, sizeof(want),
           "mariadb sink 127.0.0.1:%d/sluice.t: cannot connect to "
           "127.0.0.1:%d: Connection refused (error 2002: ", port, port);
  SL_ASSERT_TRUE(strncmp(sl_error_message(err), want, strlen(want)) == 0);
  SL_ASSERT_TRUE(t1.tv_sec - t0.tv_sec < 3);
  sl_error_destroy(err);
}

SL_TEST(bad_server_side) {
  fx_t fx;
  fx_init(&fx, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(20), "
               "s VARCHAR(40), d DECIMAL(12,2), ts DATETIME(6))",
          SL_DELIVERY_EXACTLY_ONCE);
  sl_error_t *err = NULL;
  /* Column type mismatch. */
  SL_ASSERT_EQ_STR(open_err(&fx, &err),
                   "mariadb sink 'snk' subtask 0: column `v` of table "
                   "sluice.t is varchar(20), but the sink writes int64 "
                   "there (needs bigint (signed))");
  sl_error_destroy(err);
  /* Missing column. */
  my_ok(fx.m, "ALTER TABLE t DROP COLUMN v");
  SL_ASSERT_EQ_STR(open_err(&fx, &err),
                   "mariadb sink 'snk' subtask 0: table sluice.t has no "
                   "column `v` (a field of the sink's rows)");
  sl_error_destroy(err);
  /* Missing table. */
  my_ok(fx.m, "DROP TABLE t");
  SL_ASSERT_TRUE(strstr(open_err(&fx, &err),
                        "subtask 0: table sluice.t does not exist at "
                        "127.0.0.1:") != NULL);
  sl_error_destroy(err);
  /* Not InnoDB. */
  my_ok(fx.m, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT, s "
              "VARCHAR(40), d DECIMAL(12,2), ts DATETIME(6)) ENGINE=MyISAM");
  SL_ASSERT_EQ_STR(open_err(&fx, &err),
                   "mariadb sink 'snk' subtask 0: table sluice.t uses the "
                   "MyISAM engine; exactly-once needs InnoDB (XA "
                   "transactions)");
  sl_error_destroy(err);
  fx.vt->destroy(fx.ctx);
  /* Wrong password. */
  my_ok(fx.m, "CREATE USER 'u'@'%' IDENTIFIED BY 'right'");
  sl_mariadb_sink_config_t c;
  sl_mariadb_sink_config_init(&c);
  c.host = "127.0.0.1";
  c.port = fx.port;
  c.user = "u";
  c.password = "wrong";
  c.database = "sluice";
  c.table = "t";
  c.key = KEY;
  c.n_key = 1;
  SL_ASSERT_OK(sl_mariadb_sink_create(&c, &fx.vt, &fx.ctx, NULL));
  SL_ASSERT_TRUE(strstr(open_err(&fx, &err),
                        "mariadb sink 'snk' subtask 0: access denied for "
                        "user 'u' at 127.0.0.1:") != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err),
                        "(wrong user or password, or no grant on database "
                        "'sluice'): Access denied for user 'u'@") != NULL);
  sl_error_destroy(err);
  fx.vt->destroy(fx.ctx);
  /* A job name and uid too long for an xid. */
  c.user = "root";
  c.password = NULL;
  SL_ASSERT_OK(sl_mariadb_sink_create(&c, &fx.vt, &fx.ctx, NULL));
  sl_committer_init_t in;
  memset(&in, 0, sizeof(in));
  in.job = "a-job-with-a-rather-long-name-for-the-balances-of-accounts";
  in.uid = "sink";
  void *cm = NULL;
  err = NULL;
  SL_ASSERT_EQ_INT(fx.vt->committer_open(fx.ctx, &in, &cm, &err), SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb sink 'sink' committer 0: the XA transaction id "
                   "\"sl/a-job-with-a-rather-long-name-for-the-balances-of-"
                   "accounts/sink\" is 66 bytes; MariaDB allows 64: shorten "
                   "the job name or the sink uid");
  sl_error_destroy(err);
  fx_close(&fx);
}

/* ------------------------------------------------------------------ */
/* Pipeline files: `sluice validate` checks the sink without connecting. */

extern char **environ;

/* Validate text; expect exit 2 and stderr "sluice: <path>:<want>\n". */
static void expect_invalid(const char *text, const char *want) {
  char path[4200], bin[4096], errp[4200];
  snprintf(path, sizeof(path), "%s/p.yaml", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  sl_test_write_file(path, text);
  const char *argv[] = {bin, "validate", path, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid;
  SL_ASSERT_EQ_INT(posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv,
                               environ),
                   0);
  posix_spawn_file_actions_destroy(&fa);
  int st;
  SL_ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  char *err = sl_test_read_file(errp, NULL);
  char expect[8400];
  snprintf(expect, sizeof(expect), "sluice: %s:%s\n", path, want);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 2)
    SL_TEST_FAIL("expected exit 2, got status %d; stderr: %s", st,
                 err ? err : "");
  SL_ASSERT_EQ_STR(err, expect);
  free(err);
}

#define PL_HEAD                                                          \
  "name: balances\ncheckpoint: {dir: /nonexistent/ck}\n"               \
  "source: {type: generator, count: 10, columns: [key, amount]}\n"

SL_TEST(pipeline_validate) {
  expect_invalid(PL_HEAD "sink: {type: mariadb, user: u, database: d, "
                         "table: t, key: key}\n",
                 "4:7: sink: missing required field 'host'");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t}\n",
                 "4:7: sink: mariadb sink: mode upsert needs key columns "
                 "(the table's primary or unique key)");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, mode: insert, "
                         "delivery: at-least-once}\n",
                 "4:7: sink: mariadb sink: delivery at-least-once needs "
                 "mode upsert (an insert replayed after a restore would be "
                 "written twice)");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, mode: merge}\n",
                 "4:80: sink.mode: expected one of insert, upsert, got "
                 "'merge'");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, path: x}\n",
                 "4:74: sink.path: unknown field; expected one of: type, "
                 "uid, parallelism, host, port, user, password, "
                 "password_env, database, table, key, mode, delivery, "
                 "batch_size, commit_table, fence_table, epoch_column, "
                 "connect_timeout");
  /* One connect_timeout key for both database sinks, a duration. */
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, "
                         "connect_timeout_ms: 5000}\n",
                 "4:74: sink.connect_timeout_ms: unknown field; expected one "
                 "of: type, uid, parallelism, host, port, user, password, "
                 "password_env, database, table, key, mode, delivery, "
                 "batch_size, commit_table, fence_table, epoch_column, "
                 "connect_timeout");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, "
                         "connect_timeout: 5000}\n",
                 "4:91: sink.connect_timeout: '5000' has no unit; expected "
                 "us, ms, s, m or h after the number");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, "
                         "connect_timeout: 2h}\n",
                 "4:91: sink.connect_timeout: must be at most 1h, got '2h'");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, fence_table: "
                         "sluice_xa_commits}\n",
                 "4:7: sink: mariadb sink: the commit-log table and the "
                 "fence table are both 'sluice_xa_commits'; they need "
                 "different names");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, password_env: "
                         "SL_NO_SUCH_VARIABLE}\n",
                 "4:88: sink.password_env: environment variable "
                 "SL_NO_SUCH_VARIABLE is not set");
  expect_invalid(PL_HEAD "sink: {type: mariadb, host: h, user: u, "
                         "database: d, table: t, key: key, uid: "
                         "an-identifier-of-the-sink-that-is-much-too-long-"
                         "for-an-xa-id}\n",
                 "4:7: sink.uid: the XA transaction id \"sl/balances/an-"
                 "identifier-of-the-sink-that-is-much-too-long-for-an-xa-"
                 "id\" is 72 bytes; MariaDB allows 64: shorten the "
                 "pipeline's name "
                 "or the sink uid");
  expect_invalid("name: balances\nsource: {type: generator, count: 10, "
                 "columns: [key, amount]}\nsink: {type: mariadb, host: h, "
                 "user: u, database: d, table: t, key: key}\n",
                 "3:7: sink.delivery: exactly-once (the default of a "
                 "mariadb sink) commits when a checkpoint completes, and "
                 "this pipeline has no 'checkpoint: {dir: ...}', so nothing "
                 "would ever be committed; add one or set 'delivery: "
                 "at-least-once'");
}

/* The privileges docs/connectors.md lists are enough on MariaDB: a user
 * with SELECT, INSERT, UPDATE, DELETE and CREATE on the database only (no
 * SUPER, no PROCESS) passes the start checks (XA RECOVER needs nothing),
 * creates the marker table, prepares and commits, and recover kills its
 * own writer of an earlier attempt and rolls back its branch. */
SL_TEST(minimal_privileges) {
  fx_t fx;
  memset(&fx, 0, sizeof(fx));
  fx.srv = start_maria();
  fx.m = direct(fx.srv);
  my_ok(fx.m, TABLE_DDL);
  my_ok(fx.m, "CREATE USER 'p'@'%' IDENTIFIED BY 'pw'");
  my_ok(fx.m, "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON sluice.* TO "
              "'p'@'%'");
  fx.schema = make_schema();
  SL_ASSERT_OK(sl_row_builder_init(&fx.b, fx.schema));
  fx.port = sl_server_port(fx.srv);
  sl_mariadb_sink_config_t c;
  sl_mariadb_sink_config_init(&c);
  c.host = "127.0.0.1";
  c.port = fx.port;
  c.user = "p";
  c.password = "pw";
  c.database = "sluice";
  c.table = "t";
  c.key = KEY;
  c.n_key = 1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_mariadb_sink_check(&c, fx.schema, &err), err);
  SL_ASSERT_OK_E(sl_mariadb_sink_create(&c, &fx.vt, &fx.ctx, &err), err);
  uint32_t owned[] = {0};
  void *c0 = c_open(&fx, 0, 1, owned, 1, 50);
  c_recover(&fx, c0);
  void *w = w_open(&fx, 0, 1, 50);
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  sl_bytes_t a;
  w_prepare(&fx, w, 51, &a);
  SL_ASSERT_EQ_INT(c_commit(&fx, c0, 51, 0, &a, 1, NULL, 0), SL_COMMIT_OK);
  /* An open branch of this writer (epoch 51), then a restore. */
  w_row(&fx, w, SL_ROW_INSERT, 2, 20);
  sl_bytes_t b;
  w_prepare(&fx, w, 52, &b); /* prepared, never committed */
  w_row(&fx, w, SL_ROW_INSERT, 3, 30); /* open: a zombie */
  fx.vt->committer_close(c0);
  void *c1 = c_open(&fx, 0, 1, owned, 1, 60);
  SL_ASSERT_OK_E(fx.vt->recover(c1, &err), err);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 1);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM information_schema."
                                "PROCESSLIST WHERE USER = 'p'"),
                   1); /* the committer only */
  SL_ASSERT_OK(fx.vt->writer_close(w, false, NULL));
  fx.vt->committer_close(c1);
  sl_bytes_close(&a);
  sl_bytes_close(&b);
  fx_close(&fx);
}

/* `sluice validate --connect` on text; returns the exit code, *out_err
 * the standard error (caller frees). */
static int validate_connect(const char *text, char **out_err) {
  char path[4200], bin[4096], errp[4200];
  snprintf(path, sizeof(path), "%s/p.yaml", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  snprintf(errp, sizeof(errp), "%s/stderr.txt", sl_test_dir());
  sl_test_write_file(path, text);
  const char *argv[] = {bin, "validate", path, "--connect", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid;
  SL_ASSERT_EQ_INT(posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv,
                               environ),
                   0);
  posix_spawn_file_actions_destroy(&fa);
  int st;
  SL_ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  *out_err = sl_test_read_file(errp, NULL);
  printf("stderr: %s", *out_err ? *out_err : "");
  SL_ASSERT_TRUE(WIFEXITED(st));
  return WEXITSTATUS(st);
}

/* validate --connect reaches the server: a column type mismatch and a
 * missing table are errors naming the sink and the column; a right table
 * is valid; without --connect the same file is valid. */
SL_TEST(pipeline_validate_connect) {
  sl_server_t *srv = start_maria();
  MYSQL *m = direct(srv);
  my_ok(m, "CREATE TABLE b (account BIGINT PRIMARY KEY, balance INT) "
           "ENGINE=InnoDB");
  char text[1024];
  snprintf(text, sizeof(text),
           "name: balances\ncheckpoint: {dir: /nonexistent/ck}\n"
           "source: {type: generator, count: 10, columns: [key, amount]}\n"
           "transforms:\n  - aggregate:\n      key: [key]\n"
           "      values: {balance: sum(amount)}\n"
           "sink: {type: mariadb, host: 127.0.0.1, port: %d, user: root, "
           "database: sluice, table: b, key: key}\n",
           sl_server_port(srv));
  char *err = NULL;
  SL_ASSERT_EQ_INT(validate_connect(text, &err), 2);
  SL_ASSERT_TRUE(strstr(err, "sink: mariadb sink 127.0.0.1:") != NULL);
  SL_ASSERT_TRUE(strstr(err, "/sluice.b: table sluice.b has no column `key` "
                             "(a field of the sink's rows)") != NULL);
  free(err);
  my_ok(m, "ALTER TABLE b CHANGE account `key` BIGINT");
  SL_ASSERT_EQ_INT(validate_connect(text, &err), 2);
  SL_ASSERT_TRUE(strstr(err, "column `balance` of table sluice.b is int(11),"
                             " but the sink writes int64 there (needs bigint"
                             " (signed))") != NULL);
  free(err);
  my_ok(m, "ALTER TABLE b MODIFY balance BIGINT");
  SL_ASSERT_EQ_INT(validate_connect(text, &err), 0);
  free(err);
  my_ok(m, "DROP TABLE b");
  SL_ASSERT_EQ_INT(validate_connect(text, &err), 2);
  SL_ASSERT_TRUE(strstr(err, "table sluice.b does not exist at 127.0.0.1:") !=
                 NULL);
  free(err);
  mysql_close(m);
  sl_server_destroy(srv);
}

/* connect_timeout from a pipeline file bounds the connect: a listener
 * that never answers (it accepts no connection, so the server's greeting
 * never comes) fails `validate --connect` after about 1s, not after the
 * default 10s, with a message naming host:port. */
SL_TEST(pipeline_connect_timeout) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  SL_ASSERT_TRUE(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SL_ASSERT_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  SL_ASSERT_EQ_INT(listen(fd, 8), 0);
  socklen_t al = sizeof(a);
  SL_ASSERT_EQ_INT(getsockname(fd, (struct sockaddr *)&a, &al), 0);
  int port = ntohs(a.sin_port);
  char text[1024];
  snprintf(text, sizeof(text),
           "name: balances\ncheckpoint: {dir: /nonexistent/ck}\n"
           "source: {type: generator, count: 10, columns: [key, amount]}\n"
           "sink: {type: mariadb, host: 127.0.0.1, port: %d, user: root, "
           "database: sluice, table: b, key: key, connect_timeout: 1s}\n",
           port);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  char *err = NULL;
  SL_ASSERT_EQ_INT(validate_connect(text, &err), 2);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  char want[200];
  snprintf(want, sizeof(want), "cannot connect to 127.0.0.1:%d", port);
  SL_ASSERT_TRUE(strstr(err, want) != NULL);
  printf("took %ld s\n", (long)(t1.tv_sec - t0.tv_sec));
  SL_ASSERT_TRUE(t1.tv_sec - t0.tv_sec < 8);
  free(err);
  close(fd);
}

/* The server is killed and restarted in the middle of an epoch: the open
 * branch is gone and the writer's prepare fails the task with the
 * connection error (the restart replays the epoch); the committed epoch
 * stays, and the prepared one survives the crash and commits after a
 * RETRY for the lost committer connection. */
SL_TEST(eo_server_restarted_mid_epoch) {
  fx_t fx;
  fx_init(&fx, TABLE_DDL, SL_DELIVERY_EXACTLY_ONCE);
  uint32_t owned[] = {0};
  void *c = c_open(&fx, 0, 1, owned, 1, 70);
  c_recover(&fx, c);
  void *w = w_open(&fx, 0, 1, 70);
  sl_bytes_t a, b;
  w_row(&fx, w, SL_ROW_INSERT, 1, 10);
  w_prepare(&fx, w, 71, &a);
  SL_ASSERT_EQ_INT(c_commit(&fx, c, 71, 0, &a, 1, NULL, 0), SL_COMMIT_OK);
  w_row(&fx, w, SL_ROW_INSERT, 2, 20);
  w_prepare(&fx, w, 72, &b); /* prepared, not committed */
  w_row(&fx, w, SL_ROW_INSERT, 3, 30);
  w_row(&fx, w, SL_ROW_INSERT, 4, 40);
  w_row(&fx, w, SL_ROW_INSERT, 5, 50); /* a batch, kept: 72 not committed */
  mysql_close(fx.m);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_restart(fx.srv, SL_SERVER_STOP_CRASH, &err), err);
  fx.m = direct(fx.srv);
  SL_ASSERT_EQ_INT(count_xa(fx.m, "0/71/"), 1); /* epoch 71 (ckpt 72) */
  sl_bytes_t x;
  sl_bytes_init(&x);
  SL_ASSERT_EQ_INT(fx.vt->prepare(w, 73, &x, &err), SL_EIO);
  printf("prepare: %s\n", sl_error_message(err));
  SL_ASSERT_TRUE(strstr(sl_error_message(err),
                        "mariadb sink 'snk' subtask 0: writing 3 rows to "
                        "table sluice.t failed: error 20") != NULL);
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_OK(fx.vt->writer_close(w, false, NULL));
  char msg[512];
  sl_commit_status_t st = c_commit(&fx, c, 72, 0, &b, 1, msg, sizeof(msg));
  if (st == SL_COMMIT_RETRY)
    st = c_commit(&fx, c, 72, 0, &b, 2, msg, sizeof(msg));
  SL_ASSERT_EQ_INT(st, SL_COMMIT_OK);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT COUNT(*) FROM t"), 2);
  SL_ASSERT_EQ_INT(my_int(fx.m, "SELECT SUM(v) FROM t"), 30);
  SL_ASSERT_EQ_INT(count_xa(fx.m, NULL), 0);
  fx.vt->committer_close(c);
  sl_bytes_close(&a);
  sl_bytes_close(&b);
  sl_bytes_close(&x);
  fx_close(&fx);
}

/* A server that logs statements cannot log the sink's READ COMMITTED
 * writes: refused at start with the setting named. */
SL_TEST(bad_binlog_statement) {
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  const char *const extra[] = {"binlog-format=STATEMENT", NULL};
  o.extra_settings = extra;
  sl_server_t *srv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &srv, &err), err);
  MYSQL *m = direct(srv);
  my_ok(m, TABLE_DDL);
  sl_mariadb_sink_config_t c;
  sl_mariadb_sink_config_init(&c);
  c.host = "127.0.0.1";
  c.port = sl_server_port(srv);
  c.user = "root";
  c.database = "sluice";
  c.table = "t";
  c.key = KEY;
  c.n_key = 1;
  SL_ASSERT_EQ_INT(sl_mariadb_sink_check(&c, NULL, &err), SL_EINVAL);
  printf("message: %s\n", sl_error_message(err));
  char want[400];
  snprintf(want, sizeof(want),
           "mariadb sink 127.0.0.1:%d/sluice.t: 127.0.0.1:%d logs the "
           "binlog as statements (binlog_format=STATEMENT); the sink writes "
           "in READ COMMITTED transactions, which need binlog_format=ROW or "
           "MIXED", c.port, c.port);
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
  mysql_close(m);
  sl_server_destroy(srv);
}
