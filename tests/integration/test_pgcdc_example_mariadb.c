/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/pipelines/postgres-cdc-to-mariadb.yaml from the pipeline file
 * against the test servers (--set for the conninfo, the MariaDB port,
 * user and database, and the checkpoint dir): a PostgreSQL table
 * captured into MariaDB exactly once.
 *
 * public.orders (20,000 rows, one with a TOASTed note) gets DML during the
 * snapshot and the stream (updates, deletes, inserts, a primary key
 * change, a multi-statement transaction, an update that leaves the
 * TOASTed note unchanged); run 1 is SIGKILLed once a streamed change is in
 * MariaDB and two more checkpoints completed; more DML while it is dead;
 * run 2 with --resume.  MariaDB's table equals PostgreSQL's field by field
 * (decimals, microsecond timestamps, NULLs and the 9,600-character note
 * included) before and after SIGTERM.
 */
#include "pgcdc_example.h"

#define ORDERS_PG                                                          \
  "SELECT id, customer, amount, status, to_char(created, "                \
  "'YYYY-MM-DD HH24:MI:SS.US'), note FROM orders ORDER BY id"
#define ORDERS_MY                                                          \
  "SELECT id, customer, amount, status, DATE_FORMAT(created, "            \
  "'%Y-%m-%d %H:%i:%s.%f'), note FROM orders ORDER BY id"

/* Rows of a MariaDB query as pg_text's text (caller frees). */
static char *my_text(MYSQL *m, const char *sql) {
  if (mysql_query(m, sql) != 0) SL_TEST_FAIL("%s: %s", sql, mysql_error(m));
  MYSQL_RES *r = mysql_store_result(m);
  if (r == NULL) SL_TEST_FAIL("%s: %s", sql, mysql_error(m));
  unsigned nf = mysql_num_fields(r);
  sl_bytes_t b;
  sl_bytes_init(&b);
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)) != NULL)
    for (unsigned i = 0; i < nf; i++)
      SL_ASSERT_OK(sl_bytes_printf(&b, "%s%s", row[i] ? row[i] : "\\N",
                                   i + 1 < nf ? "|" : "\n"));
  mysql_free_result(r);
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

static int64_t my_count(MYSQL *m, const char *sql) {
  int64_t n = 0;
  sl_error_t *err = NULL;
  int rc = sl_my_query_int64(m, sql, &n, &err);
  if (rc == SL_ENOTFOUND) {
    sl_error_destroy(err);
    return 0;
  }
  SL_ASSERT_OK_E(rc, err);
  return n;
}

static void wait_equal(PGconn *p, MYSQL *m, double timeout_s) {
  double t0 = now_s();
  char *want = pg_text(p, ORDERS_PG), *got = NULL;
  for (;;) {
    free(got);
    got = my_text(m, ORDERS_MY);
    if (strcmp(want, got) == 0) break;
    assert_running("waiting for the tables to agree");
    if (now_s() - t0 > timeout_s) {
      char d[600];
      first_diff(want, got, d, sizeof(d));
      SL_TEST_FAIL("orders never agreed within %.0f s: %s", timeout_s, d);
    }
    nap_ms(100);
  }
  free(want);
  free(got);
}

SL_TEST(mariadb) {
  g_self = getpid();
  atexit(kill_child);
  sl_server_t *pg = NULL, *my = NULL;
  sl_server_opts_t o;
  sl_error_t *err = NULL;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  SL_ASSERT_OK_E(sl_server_start(&o, &pg, &err), err);
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  SL_ASSERT_OK_E(sl_server_start(&o, &my, &err), err);
  PGconn *p = NULL;
  MYSQL *m = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(pg), &p, &err), err);
  SL_ASSERT_OK_E(sl_my_connect(my, sl_server_port(my), &m, &err), err);
  pg_ok(p, "CREATE TABLE orders (id bigint PRIMARY KEY, customer bigint NOT "
           "NULL, amount numeric(12,2) NOT NULL, status varchar(16) NOT "
           "NULL, created timestamp NOT NULL, note text)");
  pg_ok(p, "ALTER TABLE orders REPLICA IDENTITY FULL");
  pg_ok(p, "INSERT INTO orders SELECT g, g % 37, g * 1.25, 'new', "
           "timestamp '2026-12-01' + g * interval '1 second' + g * "
           "interval '1 microsecond', CASE WHEN g % 3 = 0 THEN NULL ELSE "
           "'n' || g END FROM generate_series(1, 20000) g");
  /* Row 3's note is stored out of line (TOAST): 9,600 characters of
   * hexadecimal, which does not compress below the threshold. */
  pg_ok(p, "UPDATE orders SET note = (SELECT string_agg(md5(i::text), '') "
           "FROM generate_series(1, 300) i) WHERE id = 3");
  char sql[600];
  snprintf(sql, sizeof(sql),
           "CREATE TABLE %s.orders (id BIGINT PRIMARY KEY, customer BIGINT "
           "NOT NULL, amount DECIMAL(12,2) NOT NULL, status VARCHAR(16) NOT "
           "NULL, created DATETIME(6) NOT NULL, note TEXT NULL) "
           "ENGINE=InnoDB",
           sl_server_dbname(my));
  my_ok(m, sql);

  char example[4400], ci[700], port[64], db[128], ck[4400], jd[4400],
      bin[4200];
  snprintf(example, sizeof(example),
           "%s/examples/pipelines/postgres-cdc-to-mariadb.yaml",
           sl_test_src_dir());
  snprintf(ci, sizeof(ci), "source.conninfo='%s'", sl_server_conninfo(pg));
  snprintf(port, sizeof(port), "sink.port=%d", sl_server_port(my));
  snprintf(db, sizeof(db), "sink.database=%s", sl_server_dbname(my));
  snprintf(ck, sizeof(ck), "checkpoint.dir=%s/ckpt", sl_test_dir());
  /* The job's checkpoints are in <dir>/<name>. */
  snprintf(jd, sizeof(jd), "%s/ckpt/shop-orders-to-mariadb", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  SL_ASSERT_EQ_INT(setenv("SLUICE_PG_PASSWORD", "", 1), 0);
  SL_ASSERT_EQ_INT(setenv("SLUICE_MARIADB_PASSWORD", "", 1), 0);
  const char *a1[] = {bin, "run", example, "--set", ci, "--set", port,
                      "--set", "sink.user=root", "--set", db, "--set", ck,
                      "--set", "checkpoint.interval_ms=200", "--set",
                      "source.chunk_rows=1000", NULL};
  const char *a2[] = {bin, "run", example, "--resume", "--set", ci, "--set",
                      port, "--set", "sink.user=root", "--set", db, "--set",
                      ck, "--set", "checkpoint.interval_ms=200", "--set",
                      "source.chunk_rows=1000", NULL};
  start_run(1, a1);
  /* During the snapshot (or the stream: the job decides, not the test). */
  pg_ok(p, "UPDATE orders SET status = 'paid' WHERE id % 5 = 0");
  pg_ok(p, "DELETE FROM orders WHERE id % 7 = 0");
  pg_ok(p, "INSERT INTO orders VALUES (30001, 1, 99.99, 'new', "
           "'2026-12-03 10:11:12.131415', NULL)");
  /* A streamed change in MariaDB: the stream runs. */
  double t0 = now_s();
  while (my_count(m, "SELECT COUNT(*) FROM orders WHERE id = 30001") != 1) {
    assert_running("waiting for row 30001");
    if (now_s() - t0 > 240) SL_TEST_FAIL("row 30001 never reached MariaDB");
    nap_ms(50);
  }
  pg_ok(p, "UPDATE orders SET id = 30002 WHERE id = 1");
  pg_ok(p, "BEGIN; UPDATE orders SET amount = amount + 0.01 WHERE id < 300; "
           "DELETE FROM orders WHERE id BETWEEN 300 AND 350; COMMIT");
  pg_ok(p, "UPDATE orders SET status = 'shipped' WHERE id % 5 = 0 AND "
           "id < 5000");
  /* The TOASTed note is not in the new tuple ('unchanged'): it must stay. */
  pg_ok(p, "UPDATE orders SET status = 'toast' WHERE id = 3");
  uint64_t n0 = newest_completed_in(jd);
  wait_checkpoints(jd, &n0, 2);
  SL_ASSERT_EQ_INT(kill(g_child, SIGKILL), 0);
  (void)wait_child(60, "SIGKILL");
  pg_ok(p, "UPDATE orders SET status = 'late' WHERE id BETWEEN 10000 AND "
           "10100");
  pg_ok(p, "DELETE FROM orders WHERE id = 30001");
  pg_ok(p, "INSERT INTO orders VALUES (30003, 2, 0.01, 'dead', "
           "'2026-12-04 00:00:00.000001', 'while down')");
  pg_ok(p, "UPDATE orders SET customer = customer + 1000 WHERE id = 3");
  start_run(2, a2);
  assert_resumed(n0);
  wait_equal(p, m, 180);
  SL_ASSERT_EQ_INT(kill(g_child, SIGTERM), 0);
  int st = wait_child(120, "SIGTERM");
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 143);
  char *want = pg_text(p, ORDERS_PG), *got = my_text(m, ORDERS_MY);
  if (strcmp(want, got) != 0) {
    char d[600];
    first_diff(want, got, d, sizeof(d));
    SL_TEST_FAIL("after SIGTERM: %s", d);
  }
  /* The cases the DML was for, in the compared text. */
  SL_ASSERT_TRUE(strstr(got, "\n30002|1|1.25|new|2026-12-01 00:00:01.000001|"
                             "n1\n") != NULL);
  SL_ASSERT_TRUE(strstr(got, "\n30001|") == NULL);
  SL_ASSERT_TRUE(strstr(got, "\n30003|2|0.01|dead|2026-12-04 "
                             "00:00:00.000001|while down\n") != NULL);
  SL_ASSERT_EQ_INT(my_count(m, "SELECT LENGTH(note) FROM orders WHERE id = 3 "
                               "AND status = 'toast' AND customer = 1003"),
                   9600);
  /* 20,000 - 2,857 (id % 7 = 0) + 30001 - 43 (300..350 less the multiples
   * of 7) - 30001 + 30003. */
  SL_ASSERT_EQ_INT(my_count(m, "SELECT COUNT(*) FROM orders"), 17101);
  free(want);
  free(got);
  mysql_close(m);
  PQfinish(p);
  sl_server_destroy(my);
  sl_server_destroy(pg);
}
