/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mariadb-cdc source end to end against a real MariaDB server, in one
 * process: source -> key_by(id) -> a two-phase-commit test sink
 * (tx_sink.h: an epoch's rows become a file when the checkpoint commits).
 * The committed files, replayed in epoch order, are the exactly-once
 * changelog; replaying checks it (an insert of a present key, an update or
 * delete of an absent one, a before image that differs from the row, all
 * fail the test) and the result must equal `SELECT *` of the source table,
 * field by field.  The sink's write also counts physical deliveries (the
 * unmanaged observer of seed 004), which re-delivery after a restore
 * raises while the committed changelog has each change once.
 *
 * Protocol steps are reached with injection points, never with sleeps:
 * cdc.snapshot.before_high (a chunk read before its HIGH), cdc.binlog.
 * before_push (the binlog phase holding a batch of rows), the sink's
 * write failing at a chosen row (a task failure).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysql.h>

#include "connectors/mariadb/cdc_source.h"
#include "core/inject.h"
#include "sl_servers.h"
#include "sl_test.h"
#include "sluice/sluice.h"
#include "tx_sink.h"

/* ---- globals the sink and the tests share ---- */

#define MAX_ID 100000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t n_writes;       /* rows the sink was handed */
static int64_t fail_write_at;  /* fail the write of this row (-1: never) */
static int64_t fail_write_id;  /* fail the first write of this id (-1) */
static uint32_t delivered[MAX_ID]; /* physical deliveries per id */

static int cdc_write(void *wr, const sl_row_t *row, sl_error_t **err) {
  txs_writer_t *w = wr;
  int64_t id = sl_row_get_i64(row, 0);
  pthread_mutex_lock(&mu);
  bool is_fail = n_writes++ == fail_write_at || id == fail_write_id;
  if (is_fail) fail_write_at = fail_write_id = -1;
  if (id >= 0 && id < MAX_ID) delivered[id]++;
  pthread_mutex_unlock(&mu);
  if (is_fail) return sl_error_set(err, SL_EIO, "injected sink failure");
  sl_slice_t v = {0};
  bool vnull = sl_row_is_null(row, 2);
  if (!vnull) v = sl_row_get_str(row, 2);
  return sl_bytes_printf(&w->buf, "%s %lld %lld %.*s\n",
                         sl_row_kind_name(sl_row_kind(row)), (long long)id,
                         (long long)sl_row_get_i64(row, 1),
                         vnull ? 2 : (int)v.len,
                         vnull ? "\\N" : (const char *)v.ptr);
}

static sl_sink_vt_t cdc_sink_vt;

/* ---- fixture ---- */

typedef struct fx_s {
  sl_server_t *srv;
  MYSQL *m;
  char dir[4200];  /* the test store */
  char ck[4200];   /* checkpoints */
  sl_job_t *job;
} fx_t;

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static void fx_open(fx_t *f, uint32_t n_rows) {
  memset(f, 0, sizeof(*f));
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &f->srv, &err), err);
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &f->m, &err),
                 err);
  my_ok(f->m, "CREATE DATABASE shop");
  my_ok(f->m, "CREATE TABLE shop.t (id BIGINT PRIMARY KEY, c BIGINT NOT "
              "NULL, v VARCHAR(32), KEY (c), KEY (v)) ENGINE=InnoDB");
  char sql[256];
  if (n_rows) {
    snprintf(sql, sizeof(sql), "INSERT INTO shop.t SELECT seq, seq, "
             "CONCAT('v', seq) FROM seq_100_to_%u", 99 + n_rows);
    my_ok(f->m, sql);
  }
  snprintf(f->dir, sizeof(f->dir), "%s/store", sl_test_dir());
  snprintf(f->ck, sizeof(f->ck), "%s/ck", sl_test_dir());
  txs_reset(f->dir);
  cdc_sink_vt = txs_vt;
  cdc_sink_vt.write = cdc_write;
  pthread_mutex_lock(&mu);
  n_writes = 0;
  fail_write_at = fail_write_id = -1;
  memset(delivered, 0, sizeof(delivered));
  pthread_mutex_unlock(&mu);
  sl_inject_reset();
}

static void fx_close(fx_t *f) {
  if (f->job) sl_job_destroy(f->job);
  mysql_close(f->m);
  sl_server_destroy(f->srv);
  sl_inject_reset();
}

typedef struct jopt_s {
  uint32_t par;
  uint64_t chunk_rows;
  const char *chunk_key;
  int64_t interval_ms; /* 0: checkpoints on demand */
  bool no_reconcile;    /* leave the reconciler out (to see the loss) */
  bool snapshot_only;   /* startup: snapshot (the job ends) */
} jopt_t;

static void fx_start(fx_t *f, const jopt_t *jo) {
  sl_mariadb_cdc_config_t c;
  sl_mariadb_cdc_config_init(&c);
  c.port = sl_server_port(f->srv);
  c.user = "root";
  const char *tables[] = {"shop.t"};
  c.tables = tables;
  c.n_tables = 1;
  c.chunk_rows = jo->chunk_rows;
  c.chunk_key = jo->chunk_key;
  c.heartbeat_ms = 1000;
  if (jo->snapshot_only) c.start = SL_MARIADB_CDC_START_SNAPSHOT;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  sl_error_t *err = NULL;
  int vf = -1;
  SL_ASSERT_OK_E(sl_mariadb_cdc_source_create(&c, &vt, &ctx, &schema, &vf,
                                              &err), err);
  /* A declared chunk key that is not the primary key: versions, and the
   * reconciler keyed by primary key (as the pipeline builder adds it). */
  SL_ASSERT_EQ_INT(vf >= 0, jo->chunk_key != NULL);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "cdc";
  cfg.parallelism = jo->par;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = f->ck;
  cfg.checkpoint.interval_ms = jo->interval_ms;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  SL_ASSERT_OK(sl_job_create(&cfg, &f->job, NULL));
  sl_stream_t *s = sl_job_source(f->job, "cdc", vt, ctx, schema);
  if (vf >= 0 && !jo->no_reconcile) {
    const uint32_t *pk;
    uint32_t n_pk;
    sl__mariadb_cdc_pk(ctx, &pk, &n_pk);
    s = sl__cdc_reconcile(s, "cdc-reconcile", pk, n_pk);
  }
  const char *key[] = {"id"};
  s = sl_stream_key_by_fields(s, key, 1);
  SL_ASSERT_OK(sl_stream_sink(s, "store", &cdc_sink_vt, f->dir));
  sl_schema_unref(schema);
  SL_ASSERT_OK_E(sl_job_start(f->job, &err), err);
}

/* ---- the committed changelog, replayed ---- */

typedef struct crow_s {
  bool present;
  long long c;
  char v[40];
} crow_t;

typedef struct cfile_s {
  unsigned long long epoch;
  unsigned sub;
  char name[256];
} cfile_t;

static int cfile_cmp(const void *a, const void *b) {
  const cfile_t *x = a, *y = b;
  if (x->epoch != y->epoch) return x->epoch < y->epoch ? -1 : 1;
  return x->sub < y->sub ? -1 : x->sub > y->sub;
}

/* Replay the committed files into rows[]; false (with why) when the
 * changelog is inconsistent. */
static bool replay(const fx_t *f, crow_t *rows, char *why, size_t n_why) {
  memset(rows, 0, sizeof(crow_t) * MAX_ID);
  char d[4400];
  snprintf(d, sizeof(d), "%s/committed", f->dir);
  DIR *dd = opendir(d);
  SL_ASSERT_TRUE(dd != NULL);
  cfile_t *fl = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) fl = realloc(fl, (cap = cap ? 2 * cap : 64) * sizeof(*fl));
    SL_ASSERT_EQ_INT(sscanf(e->d_name, "store-%u-%llu", &fl[n].sub,
                            &fl[n].epoch), 2);
    snprintf(fl[n].name, sizeof(fl[n].name), "%s", e->d_name);
    n++;
  }
  closedir(dd);
  qsort(fl, n, sizeof(*fl), cfile_cmp);
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++) {
    char p[4700];
    snprintf(p, sizeof(p), "%s/%s", d, fl[i].name);
    FILE *fp = fopen(p, "r");
    SL_ASSERT_TRUE(fp != NULL);
    char op[4], v[40];
    long long id, c;
    while (ok && fscanf(fp, "%3s %lld %lld %39s\n", op, &id, &c, v) == 4) {
      SL_ASSERT_TRUE(id >= 0 && id < MAX_ID);
      crow_t *r = &rows[id];
      bool ins = strcmp(op, "+I") == 0 || strcmp(op, "+U") == 0;
      if (ins && r->present) {
        snprintf(why, n_why, "%s of id %lld, which is present (%s)", op, id,
                 fl[i].name);
        ok = false;
      } else if (!ins && (!r->present || r->c != c || strcmp(r->v, v))) {
        snprintf(why, n_why, "%s of id %lld (c=%lld v=%s) but the row is %s "
                 "(c=%lld v=%s) (%s)", op, id, c, v,
                 r->present ? "present" : "absent", r->c, r->v, fl[i].name);
        ok = false;
      } else if (ins) {
        r->present = true;
        r->c = c;
        snprintf(r->v, sizeof(r->v), "%s", v);
      } else {
        r->present = false;
      }
    }
    fclose(fp);
  }
  free(fl);
  return ok;
}

/* The source table as "id c v" lines, and the replay the same way. */
static char *select_text(MYSQL *m) {
  SL_ASSERT_EQ_INT(mysql_query(m, "SELECT id, c, IFNULL(v, '\\\\N') FROM "
                                  "shop.t ORDER BY id"), 0);
  MYSQL_RES *res = mysql_store_result(m);
  SL_ASSERT_TRUE(res != NULL);
  sl_bytes_t b;
  sl_bytes_init(&b);
  MYSQL_ROW r;
  while ((r = mysql_fetch_row(res)) != NULL)
    sl_bytes_printf(&b, "%s %s %s\n", r[0], r[1], r[2]);
  mysql_free_result(res);
  sl_bytes_append(&b, "", 1);
  return (char *)b.data;
}

static char *replay_text(const crow_t *rows) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  for (long long id = 0; id < MAX_ID; id++)
    if (rows[id].present)
      sl_bytes_printf(&b, "%lld %lld %s\n", id, rows[id].c, rows[id].v);
  sl_bytes_append(&b, "", 1);
  return (char *)b.data;
}

/* Take checkpoints until the committed changelog equals SELECT * (the
 * writer has stopped), bounded.  Fails on an inconsistent changelog. */
static void wait_equal(fx_t *f) {
  crow_t *rows = calloc(MAX_ID, sizeof(crow_t));
  char *want = select_text(f->m), *got = NULL;
  char why[512];
  for (int i = 0;; i++) {
    uint64_t id = 0;
    sl_error_t *err = NULL;
    int rc = sl_job_trigger_checkpoint(f->job, &id, &err);
    sl_error_destroy(err);
    err = NULL;
    if (rc == SL_OK) rc = sl_job_wait_checkpoint(f->job, id, 60000, NULL);
    if (!replay(f, rows, why, sizeof(why)))
      SL_TEST_FAIL("the committed changelog is inconsistent: %s", why);
    free(got);
    got = replay_text(rows);
    if (strcmp(got, want) == 0) break;
    if (i > 600) {
      FILE *a = fopen("/tmp/cdc_want.txt", "w"), *b = fopen("/tmp/cdc_got.txt", "w");
      if (a) fputs(want, a), fclose(a);
      if (b) fputs(got, b), fclose(b);
      SL_TEST_FAIL("the committed table never equalled SELECT * (%zu vs %zu "
                   "bytes)", strlen(got), strlen(want));
    }
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL); /* between two checkpoints, not a window */
  }
  free(got);
  free(want);
  free(rows);
}

static void ckpt_now(fx_t *f) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_trigger_checkpoint(f->job, &id, &err), err);
  SL_ASSERT_OK(sl_job_wait_checkpoint(f->job, id, 60000, NULL));
}

/* Wait (bounded) until the binlog phase runs: it starts after a
 * checkpoint that holds every chunk finished completes, so take them. */
static void wait_binlog_phase(fx_t *f) {
  for (int i = 0; sl_inject_hits("cdc.binlog.started") == 0; i++) {
    if (i > 1200) SL_TEST_FAIL("the binlog phase never started");
    uint64_t id = 0;
    if (sl_job_trigger_checkpoint(f->job, &id, NULL) == SL_OK)
      (void)sl_job_wait_checkpoint(f->job, id, 60000, NULL);
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL); /* between two checkpoints, not a window */
  }
}

static void some_dml(MYSQL *m) {
  my_ok(m, "UPDATE shop.t SET v = CONCAT(v, 'u') WHERE id % 7 = 0");
  my_ok(m, "DELETE FROM shop.t WHERE id % 11 = 0");
  my_ok(m, "INSERT INTO shop.t VALUES (5000, 5000, 'new'), (5001, 3, NULL)");
  my_ok(m, "UPDATE shop.t SET id = id + 10000 WHERE id % 13 = 0");
  my_ok(m, "UPDATE shop.t SET c = c + 1000 WHERE id % 5 = 0");
}

/* ---- tests ---- */

static void snapshot_then_binlog(uint32_t par) {
  fx_t f;
  fx_open(&f, 300);
  jopt_t jo = {par, 40, NULL, 200};
  fx_start(&f, &jo);
  wait_binlog_phase(&f);
  some_dml(f.m);
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  sl_job_cancel(f.job);
  fx_close(&f);
}

SL_TEST(snapshot_then_binlog_p1) { snapshot_then_binlog(1); }
SL_TEST(snapshot_then_binlog_p2) { snapshot_then_binlog(2); }

/*
 * Seed 004, experiment 1: a chunk's reader paused before its HIGH, a
 * checkpoint completes, the task fails: the unfinished chunk is read
 * again from the start, each row is committed once, and the next
 * checkpoint completes.  DML on the paused chunk makes its second read
 * differ from the first.
 */
SL_TEST(experiment1_unfinished_chunk_read_again) {
  fx_t f;
  fx_open(&f, 120);
  SL_ASSERT_OK(sl_inject_arm("cdc.snapshot.before_high", SL_INJECT_PAUSE, 2,
                             false));
  jopt_t jo = {1, 40, NULL, 0};
  fx_start(&f, &jo);
  SL_ASSERT_OK(sl_inject_wait_paused("cdc.snapshot.before_high", 60000));
  ckpt_now(&f); /* chunk 0 finished; chunk 1 unfinished in this one */
  my_ok(f.m, "UPDATE shop.t SET v = 'changed' WHERE id BETWEEN 140 AND 150");
  my_ok(f.m, "DELETE FROM shop.t WHERE id = 141");
  pthread_mutex_lock(&mu);
  fail_write_id = 145; /* inside chunk 1's rows */
  pthread_mutex_unlock(&mu);
  sl_inject_release("cdc.snapshot.before_high");
  wait_binlog_phase(&f);
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 1);
  /* Chunk 1 was read twice (the restart read it from the start). */
  SL_ASSERT_LE_INT(4, sl_inject_hits("cdc.snapshot.before_high"));
  /* Rows of chunk 1 reached the sink twice, once in the committed log. */
  pthread_mutex_lock(&mu);
  uint32_t d = delivered[142];
  pthread_mutex_unlock(&mu);
  SL_ASSERT_LE_INT(2, d);
  ckpt_now(&f);
  sl_job_cancel(f.job);
  fx_close(&f);
}

/*
 * Seed 004, experiment 2: a failure while the rows of a multi-statement
 * transaction are emitted, with the last checkpoint before the
 * transaction (inside = false) or taken inside it, between two batches of
 * its rows (inside = true: the position holds events and rows to skip).
 */
static void experiment2(bool inside) {
  fx_t f;
  fx_open(&f, 1200);
  jopt_t jo = {1, 500, NULL, 0};
  fx_start(&f, &jo);
  wait_binlog_phase(&f);
  wait_equal(&f); /* the snapshot is committed */
  if (inside)
    SL_ASSERT_OK(sl_inject_arm("cdc.binlog.before_push", SL_INJECT_PAUSE, 2,
                               false));
  pthread_mutex_lock(&mu);
  int64_t base = n_writes;
  pthread_mutex_unlock(&mu);
  my_ok(f.m, "BEGIN");
  my_ok(f.m, "UPDATE shop.t SET v = 'tx' WHERE id < 1000"); /* 900 rows */
  my_ok(f.m, "DELETE FROM shop.t WHERE id >= 1200");
  my_ok(f.m, "INSERT INTO shop.t SELECT seq, seq, 'ins' FROM "
             "seq_2000_to_2099");
  my_ok(f.m, "COMMIT");
  if (inside) {
    SL_ASSERT_OK(sl_inject_wait_paused("cdc.binlog.before_push", 60000));
    /* The first batch (512 rows: the updates of ids 100..355) reached
     * the sink: the checkpoint's position is inside the transaction. */
    for (int i = 0;; i++) {
      pthread_mutex_lock(&mu);
      bool ok = n_writes >= base + 512;
      pthread_mutex_unlock(&mu);
      if (ok) break;
      if (i > 60000) SL_TEST_FAIL("the first batch never reached the sink");
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    ckpt_now(&f);
  }
  pthread_mutex_lock(&mu);
  /* Fail late in the transaction's rows (updates are -U/+U pairs). */
  fail_write_at = base + 1500;
  pthread_mutex_unlock(&mu);
  if (inside) sl_inject_release("cdc.binlog.before_push");
  /* No checkpoint until the failure has restarted the job: the restore
   * must come from the checkpoint before (or inside) the transaction. */
  for (int i = 0; sl_job_restarts(f.job) == 0; i++) {
    if (i > 60000) SL_TEST_FAIL("the sink never failed");
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 1);
  pthread_mutex_lock(&mu);
  uint32_t early = delivered[150], mid = delivered[400], late = delivered[950];
  pthread_mutex_unlock(&mu);
  /* Each is delivered by the snapshot (+I) and the update (-U, +U).  A row
   * of the first batch (150) is delivered again only when the checkpoint
   * was before the transaction; one after the checkpoint and before the
   * failure (400) always; one after the failure (950) never. */
  SL_ASSERT_EQ_INT(early, inside ? 3 : 5);
  SL_ASSERT_EQ_INT(mid, 5);
  SL_ASSERT_EQ_INT(late, 3);
  sl_job_cancel(f.job);
  fx_close(&f);
}

SL_TEST(experiment2_checkpoint_before_transaction) { experiment2(false); }
SL_TEST(experiment2_checkpoint_inside_transaction) { experiment2(true); }

/*
 * Seed 004's chunk-key migration: 20 rows (ids 100..119, c = id, but row
 * 102 has c = 110), chunked by c into (-inf,105) [105,110) [110,115)
 * [115,+inf).  Row 102's c moves into the first chunk's range after that
 * chunk's HIGH and before the third chunk's LOW, so neither snapshot has
 * it; the binlog phase carries the update and the reconciler turns it into
 * the row.  reverse: 102 starts with c = 100 and moves to 112, so both
 * snapshots have it and the reconciler keeps the newer.  All 20 rows end
 * exact, field by field.
 */
static void migration(const char *chunk_key, bool reverse) {
  fx_t f;
  fx_open(&f, 20);
  my_ok(f.m, reverse ? "UPDATE shop.t SET c = 100 WHERE id = 102"
                     : "UPDATE shop.t SET c = 110 WHERE id = 102");
  SL_ASSERT_OK(sl_inject_arm("cdc.snapshot.before_high", SL_INJECT_PAUSE, 2,
                             false));
  jopt_t jo = {1, 5, chunk_key, 0, false};
  fx_start(&f, &jo);
  SL_ASSERT_OK(sl_inject_wait_paused("cdc.snapshot.before_high", 60000));
  my_ok(f.m, reverse ? "UPDATE shop.t SET c = 112, v = 'moved' WHERE id = 102"
                     : "UPDATE shop.t SET c = 100, v = 'moved' WHERE id = 102");
  sl_inject_release("cdc.snapshot.before_high");
  wait_binlog_phase(&f);
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  sl_job_cancel(f.job);
  fx_close(&f);
}

SL_TEST(migration_chunk_key_row_in_no_snapshot) { migration("c", false); }
SL_TEST(migration_chunk_key_row_in_two_snapshots) { migration("c", true); }
SL_TEST(migration_pk_chunked_control) { migration(NULL, false); }

/*
 * DML at each snapshot phase of the second chunk (before and after LOW,
 * before and after HIGH) x insert, update, delete, primary-key change and
 * chunk-key change, for a table chunked by its primary key and one chunked
 * by a declared key c: the committed table equals SELECT *.  Rows are ids
 * 100, 102, ..., 338 (c = id), chunks of 40 rows: [.., 179) [179, 258)
 * [258, ..).
 */
static const char *const phase_points[] = {
    "cdc.snapshot.before_low", "cdc.snapshot.after_low",
    "cdc.snapshot.before_high", "cdc.snapshot.after_high"};
static const char *const dml_ops[][3] = {
    {"insert", "INSERT INTO shop.t VALUES (201, 201, 'ins'), (203, 900, NULL)",
     NULL},
    {"update", "UPDATE shop.t SET v = 'upd' WHERE id IN (200, 204)", NULL},
    {"delete", "DELETE FROM shop.t WHERE id IN (202, 206)", NULL},
    {"pk-change", "UPDATE shop.t SET id = 205 WHERE id = 204",
     "UPDATE shop.t SET id = 1001 WHERE id = 208"},
    {"chunk-key-change", "UPDATE shop.t SET c = 50 WHERE id = 210",
     "UPDATE shop.t SET c = 220 WHERE id = 120"}};

static void dml_phase(const char *chunk_key) {
  fx_t f;
  fx_open(&f, 0);
  uint32_t cases = 0;
  for (uint32_t p = 0; p < 4; p++)
    for (uint32_t o = 0; o < 5; o++) {
      my_ok(f.m, "DELETE FROM shop.t");
      my_ok(f.m, "INSERT INTO shop.t SELECT seq, seq, CONCAT('v', seq) FROM "
                 "seq_100_to_338_step_2");
      snprintf(f.dir, sizeof(f.dir), "%s/store-%u-%u", sl_test_dir(), p, o);
      snprintf(f.ck, sizeof(f.ck), "%s/ck-%u-%u", sl_test_dir(), p, o);
      txs_reset(f.dir);
      sl_inject_reset();
      SL_ASSERT_OK(sl_inject_arm(phase_points[p], SL_INJECT_PAUSE, 2, false));
      jopt_t jo = {1, 40, chunk_key, 0, false};
      fx_start(&f, &jo);
      SL_ASSERT_OK(sl_inject_wait_paused(phase_points[p], 60000));
      my_ok(f.m, dml_ops[o][1]);
      if (dml_ops[o][2]) my_ok(f.m, dml_ops[o][2]);
      sl_inject_release(phase_points[p]);
      wait_binlog_phase(&f);
      wait_equal(&f);
      SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
      sl_job_cancel(f.job);
      sl_error_t *err = NULL;
      (void)sl_job_wait(f.job, &err);
      sl_error_destroy(err);
      sl_job_destroy(f.job);
      f.job = NULL;
      cases++;
    }
  SL_ASSERT_EQ_INT(cases, 20);
  fx_close(&f);
}

SL_TEST(dml_at_each_phase_pk_chunks) { dml_phase(NULL); }
SL_TEST(dml_at_each_phase_declared_chunk_key) { dml_phase("c"); }

/* startup: snapshot reads every chunk and ends; the job's final
 * checkpoint commits the last epoch (parallelism 2, 8 chunks). */
SL_TEST(snapshot_only_ends) {
  fx_t f;
  fx_open(&f, 300);
  jopt_t jo = {2, 40, NULL, 0, false, true};
  fx_start(&f, &jo);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_wait(f.job, &err), err);
  crow_t *rows = calloc(MAX_ID, sizeof(crow_t));
  char why[512];
  if (!replay(&f, rows, why, sizeof(why)))
    SL_TEST_FAIL("the committed changelog is inconsistent: %s", why);
  char *want = select_text(f.m), *got = replay_text(rows);
  SL_ASSERT_EQ_STR(got, want);
  SL_ASSERT_EQ_INT(sl_inject_hits("cdc.binlog.started"), 0);
  free(want);
  free(got);
  free(rows);
  fx_close(&f);
}
/* The same with a declared varchar key in the table's default collation
 * (utf8mb4_general_ci: chunk membership is asked of the server); the
 * updates of v move rows between chunks. */
SL_TEST(dml_at_each_phase_string_chunk_key) { dml_phase("v"); }

/* A schema change of a captured table in the binlog phase stops the job
 * (no restart: it would meet the statement again) with a message that
 * names the table and the statement; what was committed stays. */
SL_TEST(ddl_stops_the_job) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, NULL, 0, false, false};
  fx_start(&f, &jo);
  wait_binlog_phase(&f);
  wait_equal(&f);
  my_ok(f.m, "ALTER TABLE shop.t ADD COLUMN extra INT");
  sl_error_t *err = NULL;
  SL_ASSERT_NE_INT(sl_job_wait(f.job, &err), SL_OK);
  SL_ASSERT_TRUE(err != NULL);
  const char *m = sl_error_message(err);
  if (strstr(m, "`shop`.`t`") == NULL ||
      strstr(m, "ALTER TABLE shop.t ADD COLUMN extra INT") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  sl_error_destroy(err);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_close(&f);
}

/* Bad input at the source's creation, each with its message: a table
 * without a primary key (even with a declared chunk key), a column type
 * sluice does not map, a pattern that matches nothing, an unreachable
 * server. */
static void create_fails(int port, const char *table, const char *chunk_key,
                         const char *want_fmt) {
  sl_mariadb_cdc_config_t c;
  sl_mariadb_cdc_config_init(&c);
  c.port = port;
  c.user = "root";
  c.tables = &table;
  c.n_tables = 1;
  c.chunk_key = chunk_key;
  c.connect_timeout_ms = 2000;
  const sl_source_vt_t *vt;
  void *ctx = NULL;
  sl_schema_t *schema = NULL;
  sl_error_t *err = NULL;
  int rc = sl_mariadb_cdc_source_create(&c, &vt, &ctx, &schema, NULL, &err);
  SL_ASSERT_NE_INT(rc, SL_OK);
  SL_ASSERT_TRUE(err != NULL);
  char want[1024];
  snprintf(want, sizeof(want), want_fmt, port);
  const char *m = sl_error_message(err);
  if (strncmp(m, want, strlen(want)) != 0)
    SL_TEST_FAIL("message\n  '%s'\ndoes not start with\n  '%s'", m, want);
  sl_error_destroy(err);
}

SL_TEST(bad_input_messages) {
  fx_t f;
  fx_open(&f, 0);
  my_ok(f.m, "CREATE TABLE shop.nokey (a INT, b INT, KEY (a))");
  my_ok(f.m, "CREATE TABLE shop.odd (id INT PRIMARY KEY, u UUID)");
  int port = sl_server_port(f.srv);
  create_fails(port, "shop.nokey", "a",
               "mariadb-cdc: table `shop`.`nokey` at 127.0.0.1:%d has no "
               "primary key; change data capture needs one");
  create_fails(port, "shop.odd", NULL,
               "mariadb-cdc: column `u` of `shop`.`odd` at 127.0.0.1:%d: "
               "type uuid is not supported by mariadb-cdc");
  create_fails(port, "shop.nothing*", NULL,
               "mariadb-cdc: table pattern 'shop.nothing*' matches no base "
               "table at 127.0.0.1:%d");
  fx_close(&f);
  /* The server is gone now: its port refuses connections. */
  create_fails(port, "shop.t", NULL,
               "mariadb-cdc: cannot connect to 127.0.0.1:%d: ");
}
