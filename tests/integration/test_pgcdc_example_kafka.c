/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/pipelines/postgres-cdc-window-to-kafka.yaml from the pipeline
 * file against the test servers (--set for the conninfo, the broker and
 * the checkpoint dir): PostgreSQL payments -> one-minute tumbling windows
 * per customer -> Kafka exactly once.
 *
 * public.payments holds 600 rows (10:00:00.1 to 10:01:00, one every
 * 100 ms, 7 customers) when the job starts: its snapshot.  Once the
 * snapshot is read, inserts through the stream in transactions of 50 rows
 * up to 10:01:30; run 1 is SIGKILLed once the topic holds a committed
 * window and two more checkpoints completed; more inserts while it is
 * dead (to 10:02:30); run 2 with --resume; a last payment at 11:00 moves
 * the watermark past every other window.  The topic, read read_committed,
 * holds exactly one record per customer and minute of every payment but
 * the last (the same rows as GROUP BY on PostgreSQL: count, sum, the
 * window bounds and the largest payment time as JSON, keyed by the
 * customer), no duplicate and no window missing, before and after
 * SIGTERM.
 */
#include "pgcdc_example.h"
#include "sl_kafka.h"
#include "sl_kafka_client.h"

#define TOPIC "payments-per-minute"
/* The source's log line when the stream starts: every snapshot chunk was
 * read and a checkpoint covering them completed. */
#define PGCDC_SNAPSHOT_DONE "postgres-cdc: the stream phase starts"

/* The expected records, one per line, sorted (C order): the windows of
 * every payment but the closing one (customer 99). */
#define TS(x) "to_char(" x ", 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
#define EXPECTED                                                            \
  "SELECT customer || E'\\t' || format('{\"customer\":%s,"                  \
  "\"window_start\":\"%s\",\"window_end\":\"%s\",\"event_time\":\"%s\","    \
  "\"payments\":%s,\"total\":\"%s\"}', customer, " TS("ws") ", "            \
  TS("ws + interval '1 minute'") ", " TS("max(paid_at)") ", count(*), "     \
  "sum(amount)) FROM (SELECT *, date_bin('1 minute', paid_at, timestamp "   \
  "'2000-01-01') AS ws FROM payments WHERE customer <> 99) w "              \
  "GROUP BY customer, ws"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lines of text sorted, joined again (caller frees). */
static char *sorted_lines(char **v, int n) {
  qsort(v, (size_t)n, sizeof(char *), cmp_str);
  sl_bytes_t b;
  sl_bytes_init(&b);
  for (int i = 0; i < n; i++)
    SL_ASSERT_OK(sl_bytes_printf(&b, "%s\n", v[i]));
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  return (char *)b.data;
}

static char *expected(PGconn *p) {
  char *t = pg_text(p, EXPECTED);
  char **v = NULL;
  int n = 0;
  for (char *s = t, *e; *s; s = e + 1) {
    e = strchr(s, '\n');
    *e = '\0';
    v = realloc(v, (size_t)(n + 1) * sizeof(char *));
    v[n++] = s;
  }
  char *r = sorted_lines(v, n);
  free(v);
  free(t);
  return r;
}

/* The topic read read_committed, "key\tvalue" per record, sorted. */
static char *topic_text(const sl_kafka_t *k, int *out_n) {
  sl_kc_record_t *rec = NULL;
  int n = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kc_read_records(sl_kafka_bootstrap(k), TOPIC, 0, true,
                                    &rec, &n, &err),
                 err);
  char **v = calloc((size_t)n + 1, sizeof(char *));
  for (int i = 0; i < n; i++) {
    size_t len = strlen(rec[i].value) + (rec[i].key ? rec[i].key_len : 1) + 2;
    v[i] = malloc(len);
    snprintf(v[i], len, "%s\t%s", rec[i].key ? rec[i].key : "-",
             rec[i].value);
  }
  char *r = sorted_lines(v, n);
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
  sl_kc_records_free(rec, n);
  *out_n = n;
  return r;
}

/* Payments ids lo..hi: one every 100 ms from 10:00, customer id % 7,
 * committed in transactions of 50. */
static void pay(PGconn *p, int lo, int hi) {
  for (int a = lo; a <= hi; a += 50) {
    int b = a + 49 < hi ? a + 49 : hi;
    char sql[400];
    snprintf(sql, sizeof(sql),
             "INSERT INTO payments SELECT g, g %% 7, (g %% 50) + 0.25, "
             "timestamp '2026-12-01 10:00:00' + g * interval '100 "
             "milliseconds' FROM generate_series(%d, %d) g",
             a, b);
    pg_ok(p, sql);
  }
}

SL_TEST(window_kafka) {
  g_self = getpid();
  atexit(kill_child);
  sl_kafka_opts_t ko;
  sl_kafka_opts_init(&ko);
  sl_kafka_t *k = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_kafka_start(&ko, &k, &err), err);
  SL_ASSERT_OK_E(sl_kafka_create_topic(k, TOPIC, 1, 1, NULL, &err), err);
  sl_server_t *pg = NULL;
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  SL_ASSERT_OK_E(sl_server_start(&o, &pg, &err), err);
  PGconn *p = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(pg), &p, &err), err);
  pg_ok(p, "CREATE TABLE payments (id bigint PRIMARY KEY, customer bigint "
           "NOT NULL, amount numeric(12,2) NOT NULL, paid_at timestamp NOT "
           "NULL)");
  pg_ok(p, "ALTER TABLE payments REPLICA IDENTITY FULL");
  pay(p, 1, 600);

  char example[4400], ci[700], bs[600], ck[4400], jd[4400], bin[4200];
  snprintf(example, sizeof(example),
           "%s/examples/pipelines/postgres-cdc-window-to-kafka.yaml",
           sl_test_src_dir());
  snprintf(ci, sizeof(ci), "source.conninfo='%s'", sl_server_conninfo(pg));
  snprintf(bs, sizeof(bs), "sink.bootstrap_servers=%s",
           sl_kafka_bootstrap(k));
  snprintf(ck, sizeof(ck), "checkpoint.dir=%s/ckpt", sl_test_dir());
  snprintf(jd, sizeof(jd), "%s/ckpt/payments-per-minute", sl_test_dir());
  snprintf(bin, sizeof(bin), "%s/sluice", sl_test_bin_dir());
  SL_ASSERT_EQ_INT(setenv("SLUICE_PG_PASSWORD", "", 1), 0);
  const char *a1[] = {bin, "run", example, "--set", ci, "--set", bs,
                      "--set", ck, "--set", "checkpoint.interval_ms=200",
                      "--set", "source.chunk_rows=100", NULL};
  const char *a2[] = {bin, "run", example, "--resume", "--set", ci, "--set",
                      bs, "--set", ck, "--set", "checkpoint.interval_ms=200",
                      "--set", "source.chunk_rows=100", NULL};
  start_run(1, a1);
  /* Stream rows only once the snapshot is read: a streamed payment of a
   * later minute would move the watermark past snapshot rows still to
   * come, which the window would drop as late. */
  wait_log(PGCDC_SNAPSHOT_DONE);
  pay(p, 601, 900);
  int n = 0;
  double t0 = now_s();
  for (;;) {
    free(topic_text(k, &n));
    if (n > 0) break;
    assert_running("waiting for a committed window");
    if (now_s() - t0 > 240) SL_TEST_FAIL("no window reached the topic");
    nap_ms(200);
  }
  uint64_t n0 = newest_completed_in(jd);
  wait_checkpoints(jd, &n0, 2);
  SL_ASSERT_EQ_INT(kill(g_child, SIGKILL), 0);
  (void)wait_child(60, "SIGKILL");
  pay(p, 901, 1500);
  start_run(2, a2);
  assert_resumed(n0);
  pg_ok(p, "INSERT INTO payments VALUES (100000, 99, 1.00, "
           "'2026-12-01 11:00:00')");
  char *want = expected(p), *got = NULL;
  /* 7 customers x the minutes 10:00, 10:01 and 10:02. */
  int want_n = 0;
  for (const char *s = want; *s; s++) want_n += *s == '\n';
  SL_ASSERT_EQ_INT(want_n, 7 * 3);
  t0 = now_s();
  for (;;) {
    free(got);
    got = topic_text(k, &n);
    if (n >= want_n) break;
    assert_running("waiting for every window");
    if (now_s() - t0 > 240)
      SL_TEST_FAIL("the topic has %d of %d windows:\n%s", n, want_n, got);
    nap_ms(200);
  }
  if (strcmp(want, got) != 0) {
    char d[800];
    first_diff(want, got, d, sizeof(d));
    SL_TEST_FAIL("topic != GROUP BY: %s\nwant:\n%s\ngot:\n%s", d, want, got);
  }
  SL_ASSERT_EQ_INT(kill(g_child, SIGTERM), 0);
  int st = wait_child(120, "SIGTERM");
  SL_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 143);
  free(got);
  got = topic_text(k, &n);
  SL_ASSERT_EQ_STR(got, want);
  free(want);
  free(got);
  PQfinish(p);
  sl_server_destroy(pg);
  sl_kafka_destroy(k);
}
