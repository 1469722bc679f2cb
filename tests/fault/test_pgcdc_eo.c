/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres-cdc source end to end against a real PostgreSQL server, in
 * one process: source -> key_by(id) -> a two-phase-commit test sink
 * (tx_sink.h: an epoch's rows become a file when the checkpoint commits).
 * The committed files, replayed in epoch order, are the exactly-once
 * changelog; replaying checks it (an insert of a present key, an update or
 * delete of an absent one, a before image that differs from the row, all
 * fail the test) and the result must equal `SELECT *` of the source table,
 * field by field.  The sink's write also counts physical deliveries.
 *
 * Protocol steps are reached with injection points, latches and a
 * committing transaction held by the server itself (a synchronous standby
 * that never answers), never with sleeps that hope to hit a window.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "connectors/postgres/pg_repl.h"
#include "core/inject.h"
#include "sl_servers.h"
#include "sl_test.h"
#include "sluice/sluice.h"
#include "tx_sink.h"

#define MAX_ID 100000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t n_writes;
static int64_t fail_write_at;
static int64_t fail_write_id;
static uint32_t delivered[MAX_ID];

/* Rows: id c v _position ("<commit LSN>:<i>", or \N for snapshot rows). */
static int cdc_write(void *wr, const sl_row_t *row, sl_error_t **err) {
  txs_writer_t *w = wr;
  int64_t id = sl_row_get_i64(row, 0);
  pthread_mutex_lock(&mu);
  bool is_fail = n_writes++ == fail_write_at || id == fail_write_id;
  if (is_fail) fail_write_at = fail_write_id = -1;
  if (id >= 0 && id < MAX_ID) delivered[id]++;
  pthread_mutex_unlock(&mu);
  if (is_fail) return sl_error_set(err, SL_EIO, "injected sink failure");
  sl_slice_t v = {0}, p = {0};
  bool vnull = sl_row_is_null(row, 2), pnull = sl_row_is_null(row, 3);
  if (!vnull) v = sl_row_get_str(row, 2);
  if (!pnull) p = sl_row_get_str(row, 3);
  return sl_bytes_printf(&w->buf, "%s %lld %lld %.*s %.*s\n",
                         sl_row_kind_name(sl_row_kind(row)), (long long)id,
                         (long long)sl_row_get_i64(row, 1),
                         vnull ? 2 : (int)v.len,
                         vnull ? "\\N" : (const char *)v.ptr,
                         pnull ? 2 : (int)p.len,
                         pnull ? "\\N" : (const char *)p.ptr);
}

static sl_sink_vt_t cdc_sink_vt;

typedef struct fx_s {
  sl_server_t *srv;
  PGconn *c;
  char dir[4200];
  char ck[4200];
  sl_job_t *job;
} fx_t;

static void pg_ok(PGconn *c, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_exec(c, sql, NULL, &err), err);
}

static int64_t pg_i64(PGconn *c, const char *sql) {
  int64_t v = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_int64(c, sql, &v, &err), err);
  return v;
}

static uint64_t pg_lsn(PGconn *c, const char *sql) {
  char *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_text(c, sql, &t, &err), err);
  uint64_t lsn = 0;
  SL_ASSERT_OK(sl__pg_lsn_parse(t, &lsn));
  sl_free(t);
  return lsn;
}

static void fx_open(fx_t *f, uint32_t n_rows) {
  memset(f, 0, sizeof(*f));
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_POSTGRES);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &f->srv, &err), err);
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(f->srv), &f->c, &err), err);
  pg_ok(f->c, "CREATE TABLE public.t (id bigint PRIMARY KEY, c bigint NOT "
              "NULL, v varchar(32))");
  pg_ok(f->c, "ALTER TABLE public.t REPLICA IDENTITY FULL");
  if (n_rows) {
    char sql[256];
    snprintf(sql, sizeof(sql), "INSERT INTO public.t SELECT g, g, 'v' || g "
             "FROM generate_series(100, %u) g", 99 + n_rows);
    pg_ok(f->c, sql);
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
  PQfinish(f->c);
  sl_server_destroy(f->srv);
  sl_inject_reset();
}

typedef struct jopt_s {
  uint32_t par;
  uint64_t chunk_rows;
  int64_t interval_ms;
  bool snapshot_only;
  bool latest;
  bool resume;
  uint32_t heartbeat_ms; /* 0: 500 */
  const char *table;     /* NULL: public.t */
  uint32_t retain;       /* 0: the default (3) */
} jopt_t;

static void fx_start(fx_t *f, const jopt_t *jo) {
  sl_postgres_cdc_config_t c;
  sl_postgres_cdc_config_init(&c);
  c.conninfo = sl_server_conninfo(f->srv);
  const char *tables[] = {jo->table ? jo->table : "public.t"};
  c.tables = tables;
  c.n_tables = 1;
  c.slot = "sl_job";
  c.chunk_rows = jo->chunk_rows;
  c.heartbeat_ms = jo->heartbeat_ms ? jo->heartbeat_ms : 500;
  c.with_position = true;
  c.retain = jo->retain;
  if (jo->snapshot_only) c.start = SL_POSTGRES_CDC_START_SNAPSHOT;
  if (jo->latest) c.start = SL_POSTGRES_CDC_START_LATEST;
  const sl_source_vt_t *vt;
  void *ctx;
  sl_schema_t *schema;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_postgres_cdc_source_create(&c, &vt, &ctx, &schema, &err),
                 err);
  sl_job_config_t cfg;
  sl_job_config_init(&cfg);
  cfg.name = "pgcdc";
  cfg.parallelism = jo->par;
  cfg.n_workers = 2;
  cfg.checkpoint.dir = f->ck;
  cfg.checkpoint.interval_ms = jo->interval_ms;
  cfg.restart.kind = SL_RESTART_FIXED_DELAY;
  cfg.restart.max_attempts = 3;
  cfg.resume_latest = jo->resume;
  if (jo->retain) cfg.checkpoint.retain = jo->retain;
  SL_ASSERT_OK(sl_job_create(&cfg, &f->job, NULL));
  sl_stream_t *s = sl_job_source(f->job, "cdc", vt, ctx, schema);
  const char *key[] = {"id"};
  s = sl_stream_key_by_fields(s, key, 1);
  SL_ASSERT_OK(sl_stream_sink(s, "store", &cdc_sink_vt, f->dir));
  sl_schema_unref(schema);
  SL_ASSERT_OK_E(sl_job_start(f->job, &err), err);
}

static void fx_stop(fx_t *f) {
  sl_job_cancel(f->job);
  sl_error_t *err = NULL;
  (void)sl_job_wait(f->job, &err);
  sl_error_destroy(err);
  sl_job_destroy(f->job);
  f->job = NULL;
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

/* Per committed change (not snapshot rows): its epoch and commit LSN. */
typedef struct cchg_s {
  unsigned long long epoch;
  uint64_t commit;
} cchg_t;

/* Replay the committed files into rows[]; false (with why) when the
 * changelog is inconsistent.  chg (may be NULL) gets every change. */
static bool replay_ex(const fx_t *f, crow_t *rows, char *why, size_t n_why,
                      cchg_t **chg, size_t *n_chg) {
  memset(rows, 0, sizeof(crow_t) * MAX_ID);
  char d[4400];
  snprintf(d, sizeof(d), "%s/committed", f->dir);
  DIR *dd = opendir(d);
  SL_ASSERT_TRUE(dd != NULL);
  cfile_t *fl = NULL;
  size_t n = 0, cap = 0, nc = 0, capc = 0;
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
    char op[4], v[40], pos[64];
    long long id, c;
    while (ok && fscanf(fp, "%3s %lld %lld %39s %63s\n", op, &id, &c, v,
                        pos) == 5) {
      SL_ASSERT_TRUE(id >= 0 && id < MAX_ID);
      if (chg && strcmp(pos, "\\N") != 0) {
        char *colon = strchr(pos, ':');
        SL_ASSERT_TRUE(colon != NULL);
        *colon = 0;
        uint64_t l = 0;
        SL_ASSERT_OK(sl__pg_lsn_parse(pos, &l));
        if (nc == capc)
          *chg = realloc(*chg, (capc = capc ? 2 * capc : 256) * sizeof(cchg_t));
        (*chg)[nc].epoch = fl[i].epoch;
        (*chg)[nc].commit = l;
        nc++;
      }
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
  if (n_chg) *n_chg = nc;
  return ok;
}

static bool replay(const fx_t *f, crow_t *rows, char *why, size_t n_why) {
  return replay_ex(f, rows, why, n_why, NULL, NULL);
}

static char *select_text(PGconn *c) {
  PGresult *res = PQexec(c, "SELECT id, c, coalesce(v, '\\N') FROM public.t "
                            "ORDER BY id");
  SL_ASSERT_EQ_INT(PQresultStatus(res), PGRES_TUPLES_OK);
  sl_bytes_t b;
  sl_bytes_init(&b);
  for (int i = 0; i < PQntuples(res); i++)
    sl_bytes_printf(&b, "%s %s %s\n", PQgetvalue(res, i, 0),
                    PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
  PQclear(res);
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

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Take checkpoints until the committed changelog equals SELECT * (the
 * writers have stopped), bounded.  Fails on an inconsistent changelog. */
static void wait_equal(fx_t *f) {
  crow_t *rows = calloc(MAX_ID, sizeof(crow_t));
  char *want = select_text(f->c), *got = NULL;
  char why[512];
  for (int i = 0;; i++) {
    uint64_t id = 0;
    int rc = sl_job_trigger_checkpoint(f->job, &id, NULL);
    if (rc == SL_OK) rc = sl_job_wait_checkpoint(f->job, id, 60000, NULL);
    if (!replay(f, rows, why, sizeof(why)))
      SL_TEST_FAIL("the committed changelog is inconsistent: %s", why);
    free(got);
    got = replay_text(rows);
    if (strcmp(got, want) == 0) break;
    if (i > 600) {
      FILE *a = fopen("/tmp/pgcdc_want.txt", "w"),
           *b = fopen("/tmp/pgcdc_got.txt", "w");
      if (a) fputs(want, a), fclose(a);
      if (b) fputs(got, b), fclose(b);
      SL_TEST_FAIL("the committed table never equalled SELECT * (%zu vs %zu "
                   "bytes)", strlen(got), strlen(want));
    }
    nap_ms(50); /* between two checkpoints, not a window */
  }
  free(got);
  free(want);
  free(rows);
}

static uint64_t ckpt_now(fx_t *f) {
  uint64_t id = 0;
  sl_error_t *err = NULL;
  for (int i = 0; i < 6000; i++) {
    int rc = sl_job_trigger_checkpoint(f->job, &id, NULL);
    if (rc != SL_ESTATE && rc != SL_EAGAIN) break;
    nap_ms(10);
    id = 0;
  }
  if (id == 0)
    SL_ASSERT_OK_E(sl_job_trigger_checkpoint(f->job, &id, &err), err);
  SL_ASSERT_OK(sl_job_wait_checkpoint(f->job, id, 60000, NULL));
  return id;
}

/* The stream phase starts after a checkpoint that holds every chunk
 * finished completes: take them until it has. */
static void wait_stream_phase(fx_t *f) {
  for (int i = 0; sl_inject_hits("pgcdc.stream.started") == 0; i++) {
    if (i > 1200) SL_TEST_FAIL("the stream phase never started");
    uint64_t id = 0;
    if (sl_job_trigger_checkpoint(f->job, &id, NULL) == SL_OK)
      (void)sl_job_wait_checkpoint(f->job, id, 60000, NULL);
    nap_ms(50);
  }
}

static void some_dml(PGconn *c) {
  pg_ok(c, "UPDATE public.t SET v = v || 'u' WHERE id % 7 = 0");
  pg_ok(c, "DELETE FROM public.t WHERE id % 11 = 0");
  pg_ok(c, "INSERT INTO public.t VALUES (5000, 5000, 'new'), (5001, 3, NULL)");
  pg_ok(c, "UPDATE public.t SET id = id + 10000 WHERE id % 13 = 0");
  pg_ok(c, "UPDATE public.t SET c = c + 1000 WHERE id % 5 = 0");
}

/* Wait until the job failed; returns its message (caller frees). */
static char *job_failure(fx_t *f) {
  sl_error_t *err = NULL;
  SL_ASSERT_NE_INT(sl_job_wait(f->job, &err), SL_OK);
  SL_ASSERT_TRUE(err != NULL);
  char *m = strdup(sl_error_message(err));
  sl_error_destroy(err);
  return m;
}

/* ---- tests ---- */

static void snapshot_then_stream(uint32_t par) {
  fx_t f;
  fx_open(&f, 300);
  jopt_t jo = {par, 40, 200};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  some_dml(f.c);
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  /* The slot exists and was confirmed past its start. */
  SL_ASSERT_EQ_INT(pg_i64(f.c, "SELECT count(*) FROM pg_replication_slots "
                               "WHERE slot_name = 'sl_job' AND plugin = "
                               "'pgoutput'"), 1);
  fx_stop(&f);
  fx_close(&f);
}

SL_TEST(snapshot_then_stream_p1) { snapshot_then_stream(1); }
SL_TEST(snapshot_then_stream_p2) { snapshot_then_stream(2); }

/*
 * A chunk's reader paused after its snapshot and before HIGH, a
 * checkpoint completes, DML changes the paused chunk's rows (invisible to
 * its snapshot), the task fails: the unfinished chunk is read again from
 * the start, each row is committed once.
 */
SL_TEST(unfinished_chunk_read_again) {
  fx_t f;
  fx_open(&f, 120);
  SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.before_high", SL_INJECT_PAUSE, 2,
                             false));
  jopt_t jo = {1, 40, 0};
  fx_start(&f, &jo);
  SL_ASSERT_OK(sl_inject_wait_paused("pgcdc.snapshot.before_high", 60000));
  ckpt_now(&f); /* chunk 0 finished; chunk 1 unfinished in this one */
  pg_ok(f.c, "UPDATE public.t SET v = 'changed' WHERE id BETWEEN 140 AND 150");
  pg_ok(f.c, "DELETE FROM public.t WHERE id = 141");
  pthread_mutex_lock(&mu);
  fail_write_id = 145; /* inside chunk 1's rows */
  pthread_mutex_unlock(&mu);
  sl_inject_release("pgcdc.snapshot.before_high");
  wait_stream_phase(&f);
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 1);
  SL_ASSERT_LE_INT(4, sl_inject_hits("pgcdc.snapshot.before_high"));
  pthread_mutex_lock(&mu);
  uint32_t d = delivered[142];
  pthread_mutex_unlock(&mu);
  SL_ASSERT_LE_INT(2, d);
  fx_stop(&f);
  fx_close(&f);
}

/*
 * A chunk finished and reported after checkpoint K, then the reader's task
 * fails: restored to K, the reader reads the chunk again, in a new
 * snapshot.  The enumerator (kept in the process) must forget the first
 * report (reset_reader), else the gate would open on the old snapshot
 * while the rows downstream come from the new one: a change the new
 * snapshot saw but the old one did not would be emitted again.
 */
SL_TEST(chunk_reported_after_checkpoint_then_reset) {
  fx_t f;
  fx_open(&f, 60);
  SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.after_report", SL_INJECT_FAIL, 1,
                             false));
  SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.before_read", SL_INJECT_PAUSE, 1,
                             false));
  jopt_t jo = {1, 1000, 0};
  fx_start(&f, &jo);
  /* Checkpoint K: the chunk assigned, not read. */
  SL_ASSERT_OK(sl_inject_wait_paused("pgcdc.snapshot.before_read", 60000));
  ckpt_now(&f);
  /* The chunk is read, emitted and reported, then the task fails; the
   * restart (restored to K, the enumerator kept) reads it again and is
   * held before its read. */
  sl_inject_release("pgcdc.snapshot.before_read"); /* disarms it */
  SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.before_read", SL_INJECT_PAUSE, 1,
                             false));
  for (int i = 0; sl_job_restarts(f.job) == 0; i++) {
    if (i > 60000) SL_TEST_FAIL("the task never failed after its report");
    nap_ms(1);
  }
  if (sl_inject_wait_paused("pgcdc.snapshot.before_read", 20000) != SL_OK)
    SL_TEST_FAIL("the chunk was not read again (before_read %u, after_report "
                 "%u, stream %u, restarts %u)",
                 sl_inject_hits("pgcdc.snapshot.before_read"),
                 sl_inject_hits("pgcdc.snapshot.after_report"),
                 sl_inject_hits("pgcdc.stream.started"),
                 (unsigned)sl_job_restarts(f.job));
  SL_ASSERT_EQ_INT(sl_inject_hits("pgcdc.snapshot.after_report"), 1);
  pg_ok(f.c, "UPDATE public.t SET v = 'between' WHERE id = 120");
  /* Checkpoints while the read is held: the gate must stay shut. */
  for (int i = 0; i < 4; i++) ckpt_now(&f);
  /* Two discovery ticks of the enumerator after them (where an open gate
   * makes the stream split): it was not made. */
  uint32_t t0 = sl_inject_hits("pgcdc.enum.discover");
  for (int i = 0; sl_inject_hits("pgcdc.enum.discover") < t0 + 2; i++) {
    if (i > 60000) SL_TEST_FAIL("the enumerator's discovery never ticked");
    nap_ms(1);
  }
  SL_ASSERT_EQ_INT(sl_inject_hits("pgcdc.enum.stream_split_made"), 0);
  sl_inject_release("pgcdc.snapshot.before_read");
  wait_stream_phase(&f);
  wait_equal(&f);
  pthread_mutex_lock(&mu);
  SL_ASSERT_EQ_INT(delivered[120] >= 1, 1);
  pthread_mutex_unlock(&mu);
  fx_stop(&f);
  fx_close(&f);
}

/*
 * A checkpoint inside a large transaction (2300 changes, batches of 512
 * rows): the second batch is held, a checkpoint completes (its position
 * is inside the transaction: commit LSN + changes to skip), the sink
 * fails later in the transaction's rows; the restore skips what the
 * checkpoint holds.  inside = false: the last checkpoint is before it.
 */
static void large_transaction(bool inside) {
  fx_t f;
  fx_open(&f, 1200);
  jopt_t jo = {1, 500, 0};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  wait_equal(&f);
  if (inside)
    SL_ASSERT_OK(sl_inject_arm("pgcdc.stream.before_push", SL_INJECT_PAUSE, 2,
                               false));
  pthread_mutex_lock(&mu);
  int64_t base = n_writes;
  pthread_mutex_unlock(&mu);
  pg_ok(f.c, "BEGIN");
  pg_ok(f.c, "UPDATE public.t SET v = 'tx' WHERE id < 1000"); /* 900 rows */
  pg_ok(f.c, "DELETE FROM public.t WHERE id >= 1200");
  pg_ok(f.c, "INSERT INTO public.t SELECT g, g, 'ins' FROM "
             "generate_series(2000, 2099) g");
  pg_ok(f.c, "COMMIT");
  if (inside) {
    SL_ASSERT_OK(sl_inject_wait_paused("pgcdc.stream.before_push", 60000));
    for (int i = 0;; i++) {
      pthread_mutex_lock(&mu);
      bool ok = n_writes >= base + 512;
      pthread_mutex_unlock(&mu);
      if (ok) break;
      if (i > 60000) SL_TEST_FAIL("the first batch never reached the sink");
      nap_ms(1);
    }
    ckpt_now(&f);
  }
  pthread_mutex_lock(&mu);
  fail_write_at = base + 1500;
  pthread_mutex_unlock(&mu);
  if (inside) sl_inject_release("pgcdc.stream.before_push");
  for (int i = 0; sl_job_restarts(f.job) == 0; i++) {
    if (i > 60000) SL_TEST_FAIL("the sink never failed");
    nap_ms(1);
  }
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 1);
  pthread_mutex_lock(&mu);
  uint32_t early = delivered[150], mid = delivered[400], late = delivered[950];
  pthread_mutex_unlock(&mu);
  /* Snapshot +I, then -U/+U.  150 is in the first batch: delivered again
   * only when the checkpoint was before the transaction. */
  SL_ASSERT_EQ_INT(early, inside ? 3 : 5);
  SL_ASSERT_EQ_INT(mid, 5);
  SL_ASSERT_EQ_INT(late, 3);
  fx_stop(&f);
  fx_close(&f);
}

SL_TEST(checkpoint_before_large_transaction) { large_transaction(false); }
SL_TEST(checkpoint_inside_large_transaction) { large_transaction(true); }

/*
 * The window of the snapshot: a transaction whose commit record is in the
 * WAL before the chunk's snapshot is taken, but which is still in the
 * proc array (so the SELECT does not see it).  The server holds it there
 * itself: synchronous_standby_names names a standby that never connects,
 * so a commit with synchronous_commit=on writes its commit record and
 * waits (wait_event SyncRep) before it leaves the proc array.  The chunk
 * is read while it waits; the row must still arrive exactly once (from
 * the stream: the transaction is in the snapshot's xip).  sluice's own
 * sessions commit with synchronous_commit=local and never wait.
 */
SL_TEST(commit_invisible_to_the_snapshot_is_not_lost) {
  fx_t f;
  fx_open(&f, 100);
  SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.before_read", SL_INJECT_PAUSE, 1,
                             false));
  jopt_t jo = {1, 1000, 0};
  fx_start(&f, &jo);
  /* The slot is made before any chunk is read. */
  SL_ASSERT_OK(sl_inject_wait_paused("pgcdc.snapshot.before_read", 60000));
  pg_ok(f.c, "CREATE TABLE public.probe (id int)");
  pg_ok(f.c, "SET synchronous_commit = local"); /* the test's own writes */
  pg_ok(f.c, "ALTER SYSTEM SET synchronous_standby_names = 'sl_nobody'");
  pg_ok(f.c, "SELECT pg_reload_conf()");
  PGconn *h = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(f.srv), &h, &err), err);
  pg_ok(h, "SET synchronous_commit = on");
  int64_t pid = pg_i64(h, "SELECT pg_backend_pid()");
  char q[256];
  snprintf(q, sizeof(q), "SELECT count(*) FROM pg_stat_activity WHERE pid = "
           "%lld AND wait_event = 'SyncRep'", (long long)pid);
  /* The reload reaches the backend before its next command. */
  for (int i = 0;; i++) {
    char *t = NULL;
    SL_ASSERT_OK_E(sl_pg_query_text(h, "SHOW synchronous_standby_names", &t,
                                    &err), err);
    bool set = strcmp(t, "sl_nobody") == 0;
    sl_free(t);
    if (set) break;
    if (i > 5000) SL_TEST_FAIL("synchronous_standby_names never applied");
    nap_ms(2);
  }
  /* The server applies synchronous_standby_names to commits only once
   * its checkpointer has read the reloaded file: probe until a commit does
   * wait (then cancel that wait: the probe row, in another table, stays
   * committed). */
  pg_ok(h, "SELECT 1");
  for (int i = 0;; i++) {
    SL_ASSERT_EQ_INT(PQsendQuery(h, "INSERT INTO public.probe VALUES (1)"), 1);
    bool waited = false;
    for (int k = 0;; k++) {
      SL_ASSERT_EQ_INT(PQconsumeInput(h), 1);
      if (!PQisBusy(h)) break; /* committed without waiting */
      if (pg_i64(f.c, q) == 1) {
        waited = true;
        char cq[128];
        snprintf(cq, sizeof(cq), "SELECT pg_cancel_backend(%lld)",
                 (long long)pid);
        pg_ok(f.c, cq);
        break;
      }
      if (k > 10000) SL_TEST_FAIL("the probe neither committed nor waited");
      nap_ms(2);
    }
    PGresult *pr;
    while ((pr = PQgetResult(h)) != NULL) PQclear(pr);
    if (waited) break;
    if (i > 5000) SL_TEST_FAIL("commits never waited for the standby");
    nap_ms(2);
  }
  SL_ASSERT_EQ_INT(PQsendQuery(h, "UPDATE public.t SET v = 'held' WHERE id = "
                                  "150; INSERT INTO public.t VALUES (9000, 1, "
                                  "'held')"), 1);
  for (int i = 0; pg_i64(f.c, q) == 0; i++) {
    if (i > 10000) SL_TEST_FAIL("the commit never waited for the standby");
    nap_ms(2);
  }
  /* Committed in the WAL, not visible to a new snapshot. */
  SL_ASSERT_EQ_INT(pg_i64(f.c, "SELECT count(*) FROM public.t WHERE id = "
                               "9000"), 0);
  sl_inject_release("pgcdc.snapshot.before_read");
  wait_stream_phase(&f);
  /* The chunk was read while the transaction was held. */
  SL_ASSERT_EQ_INT(pg_i64(f.c, q), 1);
  pg_ok(f.c, "ALTER SYSTEM RESET synchronous_standby_names");
  pg_ok(f.c, "SELECT pg_reload_conf()");
  PGresult *res;
  while ((res = PQgetResult(h)) != NULL) PQclear(res);
  PQfinish(h);
  SL_ASSERT_EQ_INT(pg_i64(f.c, "SELECT count(*) FROM public.t WHERE id = 9000 "
                               "OR v = 'held'"), 2);
  wait_equal(&f);
  pthread_mutex_lock(&mu);
  /* 9000 once (+I from the stream); 150: snapshot +I (old v), -U, +U. */
  SL_ASSERT_EQ_INT(delivered[9000], 1);
  SL_ASSERT_EQ_INT(delivered[150], 3);
  pthread_mutex_unlock(&mu);
  fx_stop(&f);
  fx_close(&f);
}

/*
 * The slot is confirmed only up to the position of the oldest retained
 * completed checkpoint (3 retained): a change whose commit LSN is below
 * confirmed_flush_lsn is committed by a checkpoint at least two older
 * than the newest completed one.  A writer runs the whole time.
 */
typedef struct wr_s {
  PGconn *c;
  _Atomic int stop;
  _Atomic int n;
} wr_t;

static void *writer_main(void *arg) {
  wr_t *w = arg;
  for (int i = 0; !w->stop; i++) {
    char sql[256];
    snprintf(sql, sizeof(sql), "UPDATE public.t SET v = 'w%d' WHERE id = %d",
             i, 100 + i % 300);
    pg_ok(w->c, sql);
    if (i % 10 == 0) {
      snprintf(sql, sizeof(sql), "INSERT INTO public.t VALUES (%d, %d, 'i')",
               20000 + i, i);
      pg_ok(w->c, sql);
    }
    w->n = i;
    nap_ms(2); /* pacing of the writer, not a window */
  }
  return NULL;
}

SL_TEST(confirmed_lsn_never_past_retained_checkpoints) {
  fx_t f;
  fx_open(&f, 300);
  jopt_t jo = {1, 100, 0};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  uint64_t start = pg_lsn(f.c, "SELECT confirmed_flush_lsn::text FROM "
                               "pg_replication_slots WHERE slot_name = "
                               "'sl_job'");
  wr_t w;
  w.c = NULL;
  atomic_init(&w.stop, 0);
  atomic_init(&w.n, 0);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_connect(sl_server_conninfo(f.srv), &w.c, &err), err);
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, writer_main, &w), 0);
  uint64_t done[64];
  uint32_t n_done = 0, checks = 0;
  uint64_t last_conf = start;
  crow_t *rows = calloc(MAX_ID, sizeof(crow_t));
  for (int k = 0; k < 24; k++) {
    done[n_done++] = ckpt_now(&f);
    uint64_t conf = pg_lsn(f.c, "SELECT confirmed_flush_lsn::text FROM "
                                "pg_replication_slots WHERE slot_name = "
                                "'sl_job'");
    SL_ASSERT_LE_INT(last_conf, conf);
    last_conf = conf;
    if (n_done < 3) continue;
    /* The oldest retained checkpoint: done[n_done - 3]. */
    unsigned long long old = done[n_done - 3];
    cchg_t *chg = NULL;
    size_t n_chg = 0;
    char why[512];
    if (!replay_ex(&f, rows, why, sizeof(why), &chg, &n_chg))
      SL_TEST_FAIL("the committed changelog is inconsistent: %s", why);
    for (size_t i = 0; i < n_chg; i++)
      /* A file of epoch E holds the rows before the barrier after E:
       * committed by a checkpoint newer than E. */
      if (chg[i].epoch >= old && chg[i].commit < conf) {
        char a[SL_PG_LSN_SIZE], b[SL_PG_LSN_SIZE];
        SL_TEST_FAIL("confirmed_flush_lsn %s is past a change (commit %s) "
                     "committed after checkpoint %llu, the oldest retained "
                     "one (%llu)", sl__pg_lsn_format(conf, a),
                     sl__pg_lsn_format(chg[i].commit, b), chg[i].epoch, old);
      }
    free(chg);
    checks++;
    nap_ms(100); /* let the writer write between checkpoints */
  }
  w.stop = 1;
  pthread_join(th, NULL);
  PQfinish(w.c);
  free(rows);
  SL_ASSERT_LE_INT(20, checks);
  /* And the slot did move on (WAL is released). */
  SL_ASSERT_TRUE(last_conf > start);
  wait_equal(&f);
  fx_stop(&f);
  fx_close(&f);
}

/*
 * An idle captured table while another table of the database is busy:
 * heartbeats (pg_logical_emit_message) move the stream's position, the
 * completed checkpoints confirm it, and the WAL the slot retains stays
 * bounded.
 */
SL_TEST(idle_table_heartbeat_releases_wal) {
  fx_t f;
  fx_open(&f, 10);
  pg_ok(f.c, "CREATE TABLE public.busy (id bigint PRIMARY KEY, pad text)");
  jopt_t jo = {1, 100, 0, false, false, false, 200};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  wait_equal(&f);
  uint64_t conf0 = pg_lsn(f.c, "SELECT confirmed_flush_lsn::text FROM "
                               "pg_replication_slots WHERE slot_name = "
                               "'sl_job'");
  /* 40 MB of WAL in the other table. */
  for (int i = 0; i < 40; i++) {
    char sql[256];
    snprintf(sql, sizeof(sql), "INSERT INTO public.busy SELECT g, repeat('x', "
             "1000) FROM generate_series(%d, %d) g", i * 1000,
             i * 1000 + 999);
    pg_ok(f.c, sql);
  }
  uint64_t end = pg_lsn(f.c, "SELECT pg_current_wal_lsn()::text");
  SL_ASSERT_LE_INT(conf0 + 30u * 1024 * 1024, end);
  /* Checkpoints (3 retained) until the slot is confirmed past the busy
   * table's WAL. */
  uint64_t conf = conf0;
  for (int i = 0; conf < end; i++) {
    if (i > 600) {
      char a[SL_PG_LSN_SIZE], b[SL_PG_LSN_SIZE];
      SL_TEST_FAIL("the slot stayed at %s while the WAL went on to %s",
                   sl__pg_lsn_format(conf, a), sl__pg_lsn_format(end, b));
    }
    ckpt_now(&f);
    conf = pg_lsn(f.c, "SELECT confirmed_flush_lsn::text FROM "
                       "pg_replication_slots WHERE slot_name = 'sl_job'");
    nap_ms(100); /* between heartbeats, not a window */
  }
  /* The WAL the slot retains becomes bounded: restart_lsn moves once the
   * stream has decoded a running-transactions record (a server checkpoint
   * writes one) and a later position is confirmed. */
  for (int i = 0;; i++) {
    pg_ok(f.c, "CHECKPOINT");
    ckpt_now(&f);
    int64_t kept = pg_i64(f.c, "SELECT (pg_current_wal_lsn() - restart_lsn)"
                               "::bigint FROM pg_replication_slots WHERE "
                               "slot_name = 'sl_job'");
    if (kept <= 8 * 1024 * 1024) break;
    if (i > 600)
      SL_TEST_FAIL("the slot still retains %lld bytes of WAL",
                   (long long)kept);
    nap_ms(100); /* between heartbeats, not a window */
  }
  fx_stop(&f);
  fx_close(&f);
}

/* The walsender of a closed replication connection ends on its own: wait
 * (bounded) until the server has let the slot go. */
static void wait_slot_inactive(fx_t *f) {
  for (int i = 0; pg_i64(f->c, "SELECT count(*) FROM pg_replication_slots "
                               "WHERE slot_name = 'sl_job' AND active") != 0;
       i++) {
    if (i > 10000) SL_TEST_FAIL("slot sl_job stayed active");
    nap_ms(2);
  }
}

/* Run the job until the stream phase has committed the table, then stop it
 * and wait until the server has let the slot go. */
static void run_then_stop(fx_t *f, jopt_t *jo) {
  fx_start(f, jo);
  wait_stream_phase(f);
  wait_equal(f);
  fx_stop(f);
  wait_slot_inactive(f);
}

/* A restore whose slot was dropped while the job was down: the job stops
 * with a message naming the slot and the position, without a restart. */
SL_TEST(slot_dropped_while_down) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, 0};
  run_then_stop(&f, &jo);
  pg_ok(f.c, "SELECT pg_drop_replication_slot('sl_job')");
  pg_ok(f.c, "INSERT INTO public.t VALUES (7000, 1, 'lost')");
  sl_inject_reset();
  jo.resume = true;
  fx_start(&f, &jo);
  char *m = job_failure(&f);
  if (strstr(m, "replication slot sl_job does not exist") == NULL ||
      strstr(m, "start the job without --resume") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  free(m);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_close(&f);
}

/* A slot advanced past the checkpoint while the job was down (another
 * job, or a slot made again) is refused: the changes between are gone. */
SL_TEST(slot_ahead_of_checkpoint_refused) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, 0};
  run_then_stop(&f, &jo);
  pg_ok(f.c, "INSERT INTO public.t VALUES (7000, 1, 'skipped')");
  pg_ok(f.c, "SELECT pg_replication_slot_advance('sl_job', "
             "pg_current_wal_lsn())");
  sl_inject_reset();
  jo.resume = true;
  fx_start(&f, &jo);
  char *m = job_failure(&f);
  if (strstr(m, "replication slot sl_job") == NULL ||
      strstr(m, "past the checkpoint's position") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  free(m);
  fx_close(&f);
}

/* TRUNCATE of a captured table stops the job (no restart), naming it;
 * what was committed before stays. */
SL_TEST(truncate_stops_the_job) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, 0};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  wait_equal(&f);
  pg_ok(f.c, "TRUNCATE public.t");
  char *m = job_failure(&f);
  if (strstr(m, "TRUNCATE of public.t") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  free(m);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  crow_t *rows = calloc(MAX_ID, sizeof(crow_t));
  char why[512];
  SL_ASSERT_TRUE(replay(&f, rows, why, sizeof(why)));
  SL_ASSERT_TRUE(rows[120].present); /* the snapshot stays committed */
  free(rows);
  fx_close(&f);
}

/* A schema change of a captured table stops the job with a message naming
 * the table and the column. */
SL_TEST(schema_change_stops_the_job) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, 0};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  wait_equal(&f);
  pg_ok(f.c, "ALTER TABLE public.t ADD COLUMN extra int");
  pg_ok(f.c, "INSERT INTO public.t VALUES (8000, 1, 'x', 1)");
  char *m = job_failure(&f);
  if (strstr(m, "the schema of public.t changed") == NULL ||
      strstr(m, "4 columns") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  free(m);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_close(&f);
}

/* A captured table renamed while the job streams: the next Relation
 * message has the same oid and another name; the job stops (changes
 * under the new name would otherwise be taken for another table's after
 * the next restart). */
SL_TEST(renamed_table_stops_the_job) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, 0};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  wait_equal(&f);
  pg_ok(f.c, "ALTER TABLE public.t RENAME TO t_renamed");
  pg_ok(f.c, "INSERT INTO public.t_renamed VALUES (8000, 1, 'x')");
  char *m = job_failure(&f);
  if (strstr(m, "the schema of public.t changed") == NULL ||
      strstr(m, "renamed to public.t_renamed") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  free(m);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_close(&f);
}

/* A job resumed with a lower checkpoint.retain (5, then 3): the slot
 * keeps moving with the completed checkpoints. */
SL_TEST(retain_lowered_flush_still_moves) {
  fx_t f;
  fx_open(&f, 50);
  jopt_t jo = {1, 40, 0};
  jo.retain = 5;
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  for (int i = 0; i < 7; i++) {
    char sql[128];
    snprintf(sql, sizeof(sql), "INSERT INTO public.t VALUES (%d, 1, 'a')",
             6000 + i);
    pg_ok(f.c, sql);
    wait_equal(&f);
  }
  fx_stop(&f);
  wait_slot_inactive(&f);
  sl_inject_reset();
  jo.retain = 3;
  jo.resume = true;
  fx_start(&f, &jo);
  uint64_t conf0 = pg_lsn(f.c, "SELECT confirmed_flush_lsn::text FROM "
                               "pg_replication_slots WHERE slot_name = "
                               "'sl_job'");
  uint64_t conf = conf0;
  for (int i = 0; conf == conf0; i++) {
    if (i > 600) SL_TEST_FAIL("the slot never moved after the resume");
    char sql[128];
    snprintf(sql, sizeof(sql), "INSERT INTO public.t VALUES (%d, 1, 'b')",
             7000 + i);
    pg_ok(f.c, sql);
    ckpt_now(&f);
    conf = pg_lsn(f.c, "SELECT confirmed_flush_lsn::text FROM "
                       "pg_replication_slots WHERE slot_name = 'sl_job'");
    nap_ms(50); /* between checkpoints, not a window */
  }
  wait_equal(&f);
  fx_stop(&f);
  fx_close(&f);
}

/* A restore at another parallelism (1, then 3; then 2 in the snapshot
 * phase): the splits come back to the enumerator, the stream split goes to
 * one of the new readers (whose position events teach the enumerator
 * where to send the flush), and the changelog stays exact; the slot keeps
 * moving after each rescale. */
static uint64_t slot_conf(fx_t *f) {
  return pg_lsn(f->c, "SELECT confirmed_flush_lsn::text FROM "
                      "pg_replication_slots WHERE slot_name = 'sl_job'");
}

static void wait_slot_moves(fx_t *f, int base_id) {
  uint64_t conf0 = slot_conf(f), conf = conf0;
  for (int i = 0; conf == conf0; i++) {
    if (i > 600) SL_TEST_FAIL("the slot never moved after the rescale");
    char sql[128];
    snprintf(sql, sizeof(sql), "INSERT INTO public.t VALUES (%d, 1, 'r')",
             base_id + i);
    pg_ok(f->c, sql);
    ckpt_now(f);
    conf = slot_conf(f);
    nap_ms(50); /* between checkpoints, not a window */
  }
}

SL_TEST(rescale_restores) {
  fx_t f;
  fx_open(&f, 300);
  /* p2 in the snapshot phase: a chunk is held, a checkpoint completes. */
  SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.before_read", SL_INJECT_PAUSE, 4,
                             false));
  jopt_t jo = {2, 40, 0};
  fx_start(&f, &jo);
  SL_ASSERT_OK(sl_inject_wait_paused("pgcdc.snapshot.before_read", 60000));
  ckpt_now(&f);
  pg_ok(f.c, "UPDATE public.t SET v = 'snap' WHERE id % 3 = 0");
  sl_inject_reset(); /* releases the held read: the job is cancelled next */
  fx_stop(&f);
  wait_slot_inactive(&f);
  /* p1 from that checkpoint: the rest of the snapshot, then the stream. */
  jo.par = 1;
  jo.resume = true;
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  some_dml(f.c);
  wait_equal(&f);
  wait_slot_moves(&f, 30000);
  fx_stop(&f);
  wait_slot_inactive(&f);
  /* p3 from a checkpoint of the stream phase. */
  pg_ok(f.c, "UPDATE public.t SET v = 'down' WHERE id % 4 = 0");
  sl_inject_reset();
  jo.par = 3;
  fx_start(&f, &jo);
  wait_equal(&f);
  wait_slot_moves(&f, 40000);
  wait_equal(&f);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_stop(&f);
  fx_close(&f);
}

/* startup: snapshot reads every chunk and ends (parallelism 2). */
SL_TEST(snapshot_only_ends) {
  fx_t f;
  fx_open(&f, 300);
  jopt_t jo = {2, 40, 0, true};
  fx_start(&f, &jo);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_job_wait(f.job, &err), err);
  crow_t *rows = calloc(MAX_ID, sizeof(crow_t));
  char why[512];
  if (!replay(&f, rows, why, sizeof(why)))
    SL_TEST_FAIL("the committed changelog is inconsistent: %s", why);
  char *want = select_text(f.c), *got = replay_text(rows);
  SL_ASSERT_EQ_STR(got, want);
  SL_ASSERT_EQ_INT(sl_inject_hits("pgcdc.stream.started"), 0);
  /* No slot: a snapshot needs none. */
  SL_ASSERT_EQ_INT(pg_i64(f.c, "SELECT count(*) FROM pg_replication_slots"),
                   0);
  free(want);
  free(got);
  free(rows);
  fx_close(&f);
}

/* startup: latest, then a restore in a new job from a checkpoint of the
 * stream phase: only changes after the start, each once. */
SL_TEST(latest_then_resume) {
  fx_t f;
  fx_open(&f, 100);
  jopt_t jo = {1, 40, 0, false, true};
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  pg_ok(f.c, "UPDATE public.t SET v = 'a' WHERE id < 120");
  pg_ok(f.c, "INSERT INTO public.t VALUES (900, 1, 'x')");
  for (int i = 0;; i++) {
    ckpt_now(&f);
    pthread_mutex_lock(&mu);
    int64_t n = n_writes;
    pthread_mutex_unlock(&mu);
    if (n >= 41) break;
    if (i > 600) SL_TEST_FAIL("the changes never reached the sink");
    nap_ms(50);
  }
  ckpt_now(&f);
  fx_stop(&f);
  pg_ok(f.c, "DELETE FROM public.t WHERE id = 900");
  sl_inject_reset();
  jo.resume = true;
  fx_start(&f, &jo);
  for (int i = 0;; i++) {
    ckpt_now(&f);
    pthread_mutex_lock(&mu);
    int64_t n = n_writes;
    pthread_mutex_unlock(&mu);
    if (n >= 42) break;
    if (i > 600) SL_TEST_FAIL("the delete never reached the sink");
    nap_ms(50);
  }
  ckpt_now(&f);
  pthread_mutex_lock(&mu);
  SL_ASSERT_EQ_INT(n_writes, 42);
  SL_ASSERT_EQ_INT(delivered[900], 2);
  SL_ASSERT_EQ_INT(delivered[105], 2);
  pthread_mutex_unlock(&mu);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_stop(&f);
  fx_close(&f);
}

/* A slot the server invalidated while the job was down (its WAL went past
 * max_slot_wal_keep_size): wal_status 'lost' stops the job with a
 * message saying so and how to capture again. */
SL_TEST(slot_lost_while_down) {
  fx_t f;
  fx_open(&f, 50);
  pg_ok(f.c, "CREATE TABLE public.busy (id bigint PRIMARY KEY, pad text)");
  jopt_t jo = {1, 40, 0};
  run_then_stop(&f, &jo);
  pg_ok(f.c, "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
  pg_ok(f.c, "SELECT pg_reload_conf()");
  /* WAL past the limit, segment switches and server checkpoints until
   * the server has invalidated the slot (bounded). */
  for (int i = 0;; i++) {
    char sql[256];
    snprintf(sql, sizeof(sql), "INSERT INTO public.busy SELECT g, repeat('x', "
             "1000) FROM generate_series(%d, %d) g", i * 5000,
             i * 5000 + 4999);
    pg_ok(f.c, sql);
    pg_ok(f.c, "SELECT pg_switch_wal()");
    pg_ok(f.c, "CHECKPOINT");
    if (pg_i64(f.c, "SELECT count(*) FROM pg_replication_slots WHERE "
                    "slot_name = 'sl_job' AND wal_status = 'lost'") == 1)
      break;
    if (i > 40) SL_TEST_FAIL("the server never invalidated the slot");
  }
  sl_inject_reset();
  jo.resume = true;
  fx_start(&f, &jo);
  char *m = job_failure(&f);
  if (strstr(m, "replication slot sl_job") == NULL ||
      strstr(m, "wal_status 'lost'") == NULL ||
      strstr(m, "pg_drop_replication_slot('sl_job')") == NULL)
    SL_TEST_FAIL("unexpected message: %s", m);
  free(m);
  SL_ASSERT_EQ_INT(sl_job_restarts(f.job), 0);
  fx_close(&f);
}

/* An update that leaves a TOASTed value alone sends it as "unchanged":
 * the row the source emits carries the value (from the old row that
 * REPLICA IDENTITY FULL logs), never a NULL. */
static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
  return h;
}

static int toast_write(void *wr, const sl_row_t *row, sl_error_t **err) {
  (void)err;
  txs_writer_t *w = wr;
  sl_slice_t big = {0};
  bool null = sl_row_is_null(row, 2);
  if (!null) big = sl_row_get_str(row, 2);
  return sl_bytes_printf(&w->buf, "%s %lld %d %s %zu %llu\n",
                         sl_row_kind_name(sl_row_kind(row)),
                         (long long)sl_row_get_i64(row, 0),
                         (int)sl_row_get_i32(row, 1), null ? "null" : "value",
                         (size_t)big.len,
                         (unsigned long long)fnv(big.ptr, big.len));
}

SL_TEST(unchanged_toast_value_is_kept) {
  fx_t f;
  fx_open(&f, 0);
  pg_ok(f.c, "CREATE TABLE public.toast (id bigint PRIMARY KEY, n int NOT "
             "NULL, big text)");
  pg_ok(f.c, "ALTER TABLE public.toast REPLICA IDENTITY FULL");
  /* 192 KiB of hex digits: compressed, still far beyond a page. */
  pg_ok(f.c, "INSERT INTO public.toast SELECT 1, 1, string_agg(md5(g::text), "
             "'') FROM generate_series(1, 6000) g");
  SL_ASSERT_LE_INT(8192, pg_i64(f.c, "SELECT pg_relation_size(reltoastrelid) "
                                     "FROM pg_class WHERE relname = 'toast'"));
  cdc_sink_vt.write = toast_write;
  jopt_t jo = {1, 40, 0};
  jo.table = "public.toast";
  fx_start(&f, &jo);
  wait_stream_phase(&f);
  pg_ok(f.c, "UPDATE public.toast SET n = 2 WHERE id = 1");
  char *big = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_pg_query_text(f.c, "SELECT big FROM public.toast", &big,
                                  &err), err);
  char want[128];
  snprintf(want, sizeof(want), "+U 1 2 value %zu %llu", strlen(big),
           (unsigned long long)fnv(big, strlen(big)));
  sl_free(big);
  /* Checkpoints until the update is committed (bounded). */
  for (int i = 0;; i++) {
    ckpt_now(&f);
    char d[4400], line[256];
    snprintf(d, sizeof(d), "%s/committed", f.dir);
    bool seen = false;
    DIR *dd = opendir(d);
    struct dirent *e;
    while (dd && (e = readdir(dd)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char p[4700];
      snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
      FILE *fp = fopen(p, "r");
      while (fp && fgets(line, sizeof(line), fp))
        if (strncmp(line, "+U ", 3) == 0) {
          line[strcspn(line, "\n")] = 0;
          SL_ASSERT_EQ_STR(line, want);
          seen = true;
        }
      if (fp) fclose(fp);
    }
    if (dd) closedir(dd);
    if (seen) break;
    if (i > 600) SL_TEST_FAIL("the update never reached the sink");
    nap_ms(50);
  }
  fx_stop(&f);
  fx_close(&f);
}

/* Bad input at the source's creation, each with its message. */
static void create_fails(const char *conninfo, const char *table,
                         const char *slot, const char *want) {
  sl_postgres_cdc_config_t c;
  sl_postgres_cdc_config_init(&c);
  c.conninfo = conninfo;
  c.tables = &table;
  c.n_tables = 1;
  c.slot = slot;
  c.connect_timeout_ms = 2000;
  const sl_source_vt_t *vt;
  void *ctx = NULL;
  sl_schema_t *schema = NULL;
  sl_error_t *err = NULL;
  int rc = sl_postgres_cdc_source_create(&c, &vt, &ctx, &schema, &err);
  SL_ASSERT_NE_INT(rc, SL_OK);
  SL_ASSERT_TRUE(err != NULL);
  const char *m = sl_error_message(err);
  if (strstr(m, want) == NULL)
    SL_TEST_FAIL("message\n  '%s'\ndoes not contain\n  '%s'", m, want);
  sl_error_destroy(err);
}

SL_TEST(bad_input_messages) {
  fx_t f;
  fx_open(&f, 0);
  pg_ok(f.c, "CREATE TABLE public.nokey (a int, b int)");
  pg_ok(f.c, "CREATE TABLE public.dflt (id int PRIMARY KEY, b int)");
  const char *ci = sl_server_conninfo(f.srv);
  char want[512];
  int port = sl_server_port(f.srv);
  snprintf(want, sizeof(want), "postgres-cdc: 127.0.0.1:%d: table "
           "public.nokey has no primary key", port);
  create_fails(ci, "public.nokey", "sl_job", want);
  create_fails(ci, "public.dflt", "sl_job",
               "ALTER TABLE public.dflt REPLICA IDENTITY FULL");
  create_fails(ci, "public.nothing*", "sl_job",
               "'public.nothing*' matches no table");
  create_fails(ci, "public.t", "Bad-Slot",
               "slot 'Bad-Slot' is not a replication slot name");
  fx_close(&f);
  char dead[256];
  snprintf(dead, sizeof(dead), "host=127.0.0.1 port=%d dbname=postgres "
           "user=postgres", port);
  snprintf(want, sizeof(want), "postgres-cdc: cannot connect to "
           "127.0.0.1:%d", port);
  create_fails(dead, "public.t", "sl_job", want);
}
