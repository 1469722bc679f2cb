/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-pgcdc: change data capture from PostgreSQL against the
 * server's own tools, on one real server (PostgreSQL 15,
 * tests/tools/sl_servers.h), in one run.
 *
 * Changes.  A table of 12 columns of mixed types (bigint primary key,
 * int, smallint, numeric(12,2), double precision, varchar(40), char(8),
 * nullable varchar(100), timestamp, date, smallint, nullable bytea), with
 * REPLICA IDENTITY FULL, gets N row changes in transactions of R rows (R/2
 * inserts, then updates and deletes of the rows the previous transaction
 * inserted, 3:2), written by a procedure (CALL, a COMMIT per transaction)
 * after a base logical slot was made, so that the slot holds exactly
 * those N changes.  Every arm reads a copy of the base slot
 * (pg_copy_logical_replication_slot, untimed) up to END, the LSN of the
 * workload's last commit.  Arms:
 *
 *   sluice-pgoutput  sluice's path driven directly: the replication
 *                    connection (pg_repl.h), sluice's pgoutput decoder and
 *                    every tuple converted to a sluice row (sl__pgo_value;
 *                    an update gives its -U and +U rows), to END.  Every
 *                    read is checked: exactly the N changes, by kind.
 *   recvlogical      the limit: `pg_recvlogical --start --endpos END -o
 *                    proto_version=1 -o publication_names=... -f
 *                    /dev/null` (the same protocol and output plugin, the
 *                    messages written as they come)
 *   run-changes      the source in a job: `sluice run --resume` of a
 *                    postgres-cdc pipeline (metadata: [position]) into a
 *                    file sink (changelog), from a checkpoint taken before
 *                    the workload, a checkpoint every 200 ms (the plain
 *                    file sink writes its buffer at checkpoints), until
 *                    the file holds the workload's last change (checked:
 *                    every change by kind).  The sluice run arms run only
 *                    when `sluice validate` accepts the pipeline.
 *
 * Snapshot.  A table of M rows (the same 12 columns), loaded with INSERT
 * ... SELECT from generate_series (batches of 1,000,000 rows).  Arms:
 *
 *   copy             the limit: `COPY (SELECT * FROM t) TO STDOUT` through
 *                    libpq (text format, every row received)
 *   snap-p1, snap-p2 sluice's chunk reader driven directly: the table
 *                    described, its chunks planned by primary key
 *                    (sl__pgc_plan_chunks) and every chunk read by
 *                    sl__pgc_read_chunk (its exact snapshot, the SELECT
 *                    converted to sluice rows, HIGH) on one or two threads
 *   run-p1, run-p2   `sluice run` of a postgres-cdc pipeline in bounded
 *                    snapshot mode (`startup: snapshot`), a null sink,
 *                    parallelism 1 and 2; a run counts only when its
 *                    --metrics-json shows the source emitted all M rows
 *
 * Crash to caught up (--what catchup, or all).  Arm:
 *
 *   catchup          `sluice run` of a postgres-cdc source (startup:
 *                    latest) on a table of its own into a file sink, a
 *                    checkpoint every 200 ms, writes at CATCHUP_TPS
 *                    transactions per second; once the file has rows and
 *                    two more checkpoints completed, SIGKILL; a backlog of
 *                    B changes; writes continue; the seconds from the exec
 *                    of `sluice run --resume` until the file holds the
 *                    backlog's last change.
 *
 * Its limits: B over the recvlogical arm's rate in the same round.
 *
 * Method as bench_cdc.c (bench/README.md): one harness fork per arm and
 * round (W warm-up and I measured runs in it), all arms of a round in a
 * seeded random order, a figure is the mean over rounds with a Student-t
 * 95% interval, a ratio has the harness's unpaired intervals and one
 * paired by round.  Raw values in DIR/pgcdc-raw.csv.
 *
 * usage: sluice-bench-pgcdc [--quick] [--what snapshot|changes|catchup|all]
 *          [--rounds R] [--warmup W] [--iterations I] [--changes N]
 *          [--backlog B] [--txn-rows R] [--snapshot-rows M]
 *          [--chunk-rows C] [--shared-mb MB] [--seed S] [--out DIR]
 *          [--sluice PATH]
 *
 * Defaults: 5 rounds, 1 warm-up + 2 measured runs per fork, 1,000,000
 * changes in transactions of 100 rows, a 10,000,000-row snapshot table,
 * chunks of 8192 rows, shared_buffers 2048 MB, a backlog B of --changes,
 * --what all, output in bench/results/pgcdc/.  --quick: 2 rounds, 0 + 1
 * runs, 20,000 changes (and backlog), a 50,000-row table: a smoke run,
 * not a figure.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "connectors/postgres/pg_cdc_int.h"
#include "connectors/postgres/pg_repl.h"
#include "connectors/postgres/pgoutput_decode.h"
#include "harness.h"
#include "runutil.h"
#include "sl_servers.h"
#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* Options and shared state (read by the forked children).              */

#define MAX_ROUNDS 64
#define PG_BIN "/usr/lib/postgresql/15/bin"

typedef struct opts_s {
  bool do_changes, do_snapshot, do_catchup, is_quick;
  uint64_t rounds, warmup, iterations;
  uint64_t changes, txn_rows, snapshot_rows, chunk_rows, shared_mb, backlog;
  uint64_t seed;
  const char *out_dir;
  char sluice[PATH_MAX];
} opts_t;

static opts_t O;
static sl_server_t *srv;
static char work[512];
static char end_lsn[SL_PG_LSN_SIZE]; /* the workload's last commit */
static uint64_t end_lsn_v;
static uint64_t n_txn, n_ins, n_upd, n_del; /* per transaction: ins/upd/del */
static bool run_enabled;
static char run_skip_reason[1024];
static char tmpl_ck[PATH_MAX + 16]; /* the changes job's checkpoint template */
static FILE *raw;

#define SLOT_BASE "pgc_base"
#define SLOT_JOB "pgc_job"
#define PUB_CHG "pgc_pub"
#define PUB_SNAP "pgc_snap_pub"
#define PUB_CU "pgc_cu_pub"

typedef enum kind_e {
  K_CH_SLUICE,
  K_CH_RECV,
  K_CH_RUN,
  K_SNAP_COPY,
  K_SNAP_CHUNKS,
  K_SNAP_RUN,
  K_CATCHUP
} kind_t;

typedef struct arm_s {
  const char *name;
  kind_t kind;
  int parallelism;      /* snapshot arms of sluice */
  double v[MAX_ROUNDS]; /* rows (changes) per second, or seconds; NaN: none */
  size_t n_failed;
} arm_t;

static arm_t arms[] = {
    {.name = "sluice-pgoutput", .kind = K_CH_SLUICE},
    {.name = "recvlogical", .kind = K_CH_RECV},
    {.name = "run-changes", .kind = K_CH_RUN},
    {.name = "copy", .kind = K_SNAP_COPY},
    {.name = "snap-p1", .kind = K_SNAP_CHUNKS, .parallelism = 1},
    {.name = "snap-p2", .kind = K_SNAP_CHUNKS, .parallelism = 2},
    {.name = "run-p1", .kind = K_SNAP_RUN, .parallelism = 1},
    {.name = "run-p2", .kind = K_SNAP_RUN, .parallelism = 2},
    {.name = "catchup", .kind = K_CATCHUP},
};
#define N_ARMS (sizeof(arms) / sizeof(arms[0]))

static bool arm_enabled(const arm_t *a) {
  switch (a->kind) {
  case K_CH_SLUICE:
    return O.do_changes;
  case K_CH_RECV: /* also the catch-up's limit */
    return O.do_changes || O.do_catchup;
  case K_CH_RUN:
    return O.do_changes && run_enabled;
  case K_SNAP_COPY:
  case K_SNAP_CHUNKS:
    return O.do_snapshot;
  case K_SNAP_RUN:
    return O.do_snapshot && run_enabled;
  case K_CATCHUP:
    return O.do_catchup && run_enabled;
  }
  return false;
}

static arm_t *arm_named(const char *name) {
  for (size_t i = 0; i < N_ARMS; i++)
    if (strcmp(arms[i].name, name) == 0) return &arms[i];
  return NULL;
}

static int fail(sl_error_t *err, const char *what) {
  fprintf(stderr, "bench-pgcdc: %s: %s\n", what,
          err ? sl_error_message(err) : "failed");
  sl_error_destroy(err);
  return -1;
}

static void sleep_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000},
            NULL);
}

/* ------------------------------------------------------------------ */
/* The tables and the workload (in the parent, before the rounds).      */

/* The 12 columns of every table, and their values for row number S. */
#define COLUMNS                                                              \
  "id bigint NOT NULL PRIMARY KEY, k int NOT NULL, qty smallint NOT NULL, "  \
  "amount numeric(12,2) NOT NULL, price double precision NOT NULL, "         \
  "name varchar(40) NOT NULL, code char(8) NOT NULL, note varchar(100), "    \
  "created timestamp NOT NULL, day date NOT NULL, flag smallint NOT NULL, "  \
  "payload bytea"
#define VALUES_OF(S)                                                         \
  S ", mod(" S ", 1000000)::int, mod(" S ", 32768)::smallint, "              \
  "(" S " / 100.0)::numeric(12,2), " S " * 1.25, 'customer-' || " S ", "     \
  "lpad(mod(" S ", 100000)::text, 8, '0'), "                                 \
  "CASE WHEN mod(" S ", 3) = 0 THEN NULL ELSE repeat('n', mod(" S ", 60)::int) " \
  "END, timestamp '2024-01-01' + " S " * interval '1 second', "              \
  "date '2024-01-01' + mod(" S ", 3000)::int, mod(" S ", 100)::smallint, "   \
  "CASE WHEN mod(" S ", 5) = 0 THEN NULL ELSE "                              \
  "decode(lpad(to_hex(" S "), 16, '0'), 'hex') END"

static int pg_conn(PGconn **c, sl_error_t **err) {
  return sl_pg_connect(sl_server_conninfo(srv), c, err);
}

static int exec_all(PGconn *c, const char *const *sql, sl_error_t **err) {
  for (int i = 0; sql[i]; i++) {
    int rc = sl_pg_exec(c, sql[i], NULL, err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/*
 * A change table `tbl` (REPLICA IDENTITY FULL) holding the first
 * transaction's rows to update and delete, its publication, and the
 * procedure tbl_gen(t0, nt) that runs transactions t0 .. t0+nt-1:
 * transaction t inserts ids (t+1)*I+1 .. (t+2)*I, updates ids t*I+1 ..
 * t*I+U and deletes the next D ids, so a later call continues the same
 * workload.
 */
static int make_change_table(PGconn *c, const char *tbl, const char *pub,
                             sl_error_t **err) {
  char sql[4096];
  snprintf(sql, sizeof(sql),
           "CREATE TABLE %s (" COLUMNS "); "
           "ALTER TABLE %s REPLICA IDENTITY FULL; "
           "CREATE PUBLICATION %s FOR TABLE %s",
           tbl, tbl, pub, tbl);
  int rc = sl_pg_exec(c, sql, NULL, err);
  if (rc != SL_OK) return rc;
  snprintf(sql, sizeof(sql),
           "INSERT INTO %s SELECT " VALUES_OF("g") " FROM generate_series(1, %"
           PRIu64 ") g", tbl, n_ins);
  if ((rc = sl_pg_exec(c, sql, NULL, err)) != SL_OK) return rc;
  snprintf(sql, sizeof(sql),
           "CREATE PROCEDURE %s_gen(t0 bigint, nt bigint) LANGUAGE plpgsql "
           "AS $$ DECLARE b bigint; o bigint; BEGIN "
           "FOR t IN t0 .. t0 + nt - 1 LOOP "
           "b := t * %" PRIu64 "; o := b + %" PRIu64 "; "
           "INSERT INTO %s SELECT " VALUES_OF("(o + g)")
           " FROM generate_series(1, %" PRIu64 ") g; "
           "UPDATE %s SET k = k + 1, amount = amount + 1, name = name || '+', "
           "created = created + interval '1 second' "
           "WHERE id BETWEEN b + 1 AND b + %" PRIu64 "; "
           "DELETE FROM %s WHERE id BETWEEN b + %" PRIu64 " AND b + %" PRIu64
           "; COMMIT; END LOOP; END $$",
           tbl, n_ins, n_ins, tbl, n_ins, tbl, n_upd, tbl, n_upd + 1,
           n_upd + n_del);
  return sl_pg_exec(c, sql, NULL, err);
}

/* The snapshot table, in batches of 1 M rows, and its publication. */
static int make_snapshot_table(PGconn *c, sl_error_t **err) {
  const char *pre[] = {"CREATE TABLE pgc_snap (" COLUMNS ")",
                       "ALTER TABLE pgc_snap REPLICA IDENTITY FULL",
                       "CREATE PUBLICATION " PUB_SNAP " FOR TABLE pgc_snap",
                       NULL};
  int rc = exec_all(c, pre, err);
  if (rc != SL_OK) return rc;
  int64_t t0 = sl_bench_now_ns();
  const uint64_t batch = 1000000;
  for (uint64_t lo = 1; lo <= O.snapshot_rows; lo += batch) {
    uint64_t hi = lo + batch - 1 < O.snapshot_rows ? lo + batch - 1
                                                   : O.snapshot_rows;
    char sql[2048];
    snprintf(sql, sizeof(sql),
             "INSERT INTO pgc_snap SELECT " VALUES_OF("g")
             " FROM generate_series(%" PRIu64 ", %" PRIu64 ") g",
             lo, hi);
    if ((rc = sl_pg_exec(c, sql, NULL, err)) != SL_OK) return rc;
  }
  if ((rc = sl_pg_exec(c, "VACUUM ANALYZE pgc_snap", NULL, err)) != SL_OK)
    return rc;
  if ((rc = sl_pg_exec(c, "CHECKPOINT", NULL, err)) != SL_OK) return rc;
  double s = (double)(sl_bench_now_ns() - t0) / 1e9;
  int64_t bytes = 0;
  (void)sl_pg_query_int64(c, "SELECT pg_total_relation_size('pgc_snap')",
                          &bytes, err);
  sl_error_destroy(*err);
  *err = NULL;
  printf("# snapshot table: %" PRIu64 " rows loaded in %.1f s (%.0f rows/s; "
         "INSERT ... SELECT from generate_series, batches of 1,000,000, then "
         "VACUUM ANALYZE and CHECKPOINT); %.0f MB with its index\n",
         O.snapshot_rows, s, (double)O.snapshot_rows / s,
         (double)bytes / 1e6);
  fprintf(raw, "#snapshot-load-s,%.3f\n", s);
  return SL_OK;
}

/*
 * The limit reads the same changes: the base slot peeked once, untimed,
 * through pgoutput (the messages pg_recvlogical receives), must hold the N
 * changes by kind; the last message's LSN (the last commit) is END.
 */
static int check_base_slot(PGconn *c, sl_error_t **err) {
  PGresult *r = PQexec(
      c, "SELECT count(*) FILTER (WHERE get_byte(data, 0) = 73), "
         "count(*) FILTER (WHERE get_byte(data, 0) = 85), "
         "count(*) FILTER (WHERE get_byte(data, 0) = 68), "
         "count(*) FILTER (WHERE get_byte(data, 0) = 67), max(lsn)::text "
         "FROM pg_logical_slot_peek_binary_changes('" SLOT_BASE
         "', NULL, NULL, 'proto_version', '1', 'publication_names', '"
         PUB_CHG "')");
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 ||
      PQgetisnull(r, 0, 4)) {
    int rc = sl_error_set(err, SL_EIO, "peeking the base slot: %s",
                          PQerrorMessage(c));
    PQclear(r);
    return rc;
  }
  uint64_t i = strtoull(PQgetvalue(r, 0, 0), NULL, 10),
           u = strtoull(PQgetvalue(r, 0, 1), NULL, 10),
           d = strtoull(PQgetvalue(r, 0, 2), NULL, 10),
           cm = strtoull(PQgetvalue(r, 0, 3), NULL, 10);
  snprintf(end_lsn, sizeof(end_lsn), "%s", PQgetvalue(r, 0, 4));
  PQclear(r);
  if (i != n_txn * n_ins || u != n_txn * n_upd || d != n_txn * n_del ||
      cm != n_txn)
    return sl_error_set(err, SL_EFAILED,
                        "the base slot holds %" PRIu64 " inserts, %" PRIu64
                        " updates, %" PRIu64 " deletes in %" PRIu64
                        " commits; expected %" PRIu64 ", %" PRIu64
                        ", %" PRIu64 " in %" PRIu64,
                        i, u, d, cm, n_txn * n_ins, n_txn * n_upd,
                        n_txn * n_del, n_txn);
  if (sl__pg_lsn_parse(end_lsn, &end_lsn_v) != SL_OK)
    return sl_error_set(err, SL_EPARSE, "END '%s'", end_lsn);
  printf("# the base slot holds the same changes through pgoutput: %" PRIu64
         " inserts, %" PRIu64 " updates, %" PRIu64 " deletes in %" PRIu64
         " transactions; END (the last commit) %s\n",
         i, u, d, cm, end_lsn);
  return SL_OK;
}

/* Wait (at most 30 s) until no process uses slot. */
static int slot_wait_inactive(PGconn *c, const char *slot,
                              sl_error_t **err) {
  char sql[256];
  snprintf(sql, sizeof(sql),
           "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '%s' "
           "AND active",
           slot);
  for (int i = 0; i < 3000; i++) {
    int64_t n = 0;
    int rc = sl_pg_query_int64(c, sql, &n, err);
    if (rc != SL_OK) return rc;
    if (n == 0) return SL_OK;
    sleep_ms(10);
  }
  return sl_error_set(err, SL_EFAILED, "slot %s still active after 30 s",
                      slot);
}

/* Drop slot when it exists (after its user left). */
static int slot_drop(PGconn *c, const char *slot, sl_error_t **err) {
  int rc = slot_wait_inactive(c, slot, err);
  if (rc != SL_OK) return rc;
  char sql[256];
  snprintf(sql, sizeof(sql),
           "SELECT pg_drop_replication_slot(slot_name) FROM "
           "pg_replication_slots WHERE slot_name = '%s'",
           slot);
  return sl_pg_exec(c, sql, NULL, err);
}

static int slot_copy(PGconn *c, const char *from, const char *to,
                     sl_error_t **err) {
  int rc = slot_drop(c, to, err);
  if (rc != SL_OK) return rc;
  char sql[256];
  snprintf(sql, sizeof(sql),
           "SELECT pg_copy_logical_replication_slot('%s', '%s')", from, to);
  return sl_pg_exec(c, sql, NULL, err);
}

/* ------------------------------------------------------------------ */
/* sluice's path: transport + pgoutput decoder + rows, to END.           */

typedef struct mapper_s {
  uint32_t oid;
  uint16_t n_cols;
  sl_schema_t *schema;
  sl_row_builder_t b;
  bool has_b;
} mapper_t;

static void mapper_close(mapper_t *m) {
  if (m->has_b) sl_row_builder_close(&m->b);
  if (m->schema) sl_schema_unref(m->schema);
  memset(m, 0, sizeof(*m));
}

/* The schema and builder of rel (rebuilt when the relation changes). */
static int mapper_for(mapper_t *m, const sl_pgo_relation_t *rel,
                      sl_error_t **err) {
  if (m->schema && m->oid == rel->oid && m->n_cols == rel->n_cols)
    return SL_OK;
  mapper_close(m);
  sl_field_t f[64];
  if (rel->n_cols > 64)
    return sl_error_set(err, SL_ENOTSUP, "more than 64 columns");
  for (uint16_t i = 0; i < rel->n_cols; i++) {
    f[i].name = rel->cols[i].name;
    int rc = sl__pgo_column_type(rel, i, &f[i].type, err);
    if (rc != SL_OK) return rc;
  }
  int rc = sl_schema_create(f, rel->n_cols, &m->schema, err);
  if (rc != SL_OK) return rc;
  if ((rc = sl_row_builder_init(&m->b, m->schema)) != SL_OK)
    return sl_error_set(err, rc, "row builder");
  m->has_b = true;
  m->oid = rel->oid;
  m->n_cols = rel->n_cols;
  return SL_OK;
}

static int tuple_to_row(mapper_t *m, const sl_pgo_relation_t *rel,
                        const sl_pgo_tuple_t *t, sl_row_kind_t kind,
                        sl_row_t *row, sl_error_t **err) {
  sl_row_builder_reset(&m->b, kind);
  for (uint16_t i = 0; i < t->n_cols; i++) {
    int rc = sl__pgo_value(rel, i, &t->cols[i], &m->b, i, err);
    if (rc != SL_OK) return rc;
  }
  return sl_row_builder_finish(&m->b, row, err);
}

static int pgoutput_sluice(const char *slot, double *out_value,
                           sl_error_t **err) {
  sl_pg_repl_t *r = NULL;
  sl_pgo_decoder_t d;
  mapper_t m;
  memset(&m, 0, sizeof(m));
  uint64_t n[3] = {0, 0, 0}, n_commit = 0, row_bytes = 0;
  int64_t t0 = sl_bench_now_ns();
  sl__pgo_decoder_init(&d);
  int rc = sl__pg_repl_connect(sl_server_conninfo(srv), &r, err);
  if (rc == SL_OK) rc = sl__pg_repl_start(r, slot, 0, PUB_CHG, false, err);
  bool done = false;
  while (rc == SL_OK && !done) {
    sl_pg_copy_t cp;
    rc = sl__pg_repl_read(r, 1000, &cp, err);
    if (rc == SL_EAGAIN) {
      rc = SL_OK;
      continue;
    }
    if (rc != SL_OK || cp.kind != 'w') continue;
    sl_pgo_msg_t msg;
    if ((rc = sl__pgo_decode(&d, cp.data, cp.len, &msg, err)) != SL_OK)
      break;
    sl_row_t row;
    switch (msg.type) {
    case SL_PGO_COMMIT:
      n_commit++;
      done = msg.u.commit.end_lsn >= end_lsn_v;
      break;
    case SL_PGO_INSERT:
    case SL_PGO_UPDATE:
    case SL_PGO_DELETE: {
      const sl_pgo_relation_t *rel = msg.u.change.rel;
      if ((rc = mapper_for(&m, rel, err)) != SL_OK) break;
      if (msg.type == SL_PGO_UPDATE) {
        if (msg.u.change.old_kind != 'O') {
          rc = sl_error_set(err, SL_EFAILED, "an update without its old row");
          break;
        }
        rc = tuple_to_row(&m, rel, &msg.u.change.old, SL_ROW_UPDATE_BEFORE,
                          &row, err);
        if (rc != SL_OK) break;
        row_bytes += row.len;
      }
      rc = tuple_to_row(
          &m, rel,
          msg.type == SL_PGO_DELETE ? &msg.u.change.old : &msg.u.change.new_,
          msg.type == SL_PGO_INSERT   ? SL_ROW_INSERT
          : msg.type == SL_PGO_UPDATE ? SL_ROW_UPDATE_AFTER
                                      : SL_ROW_DELETE,
          &row, err);
      if (rc != SL_OK) break;
      row_bytes += row.len;
      n[msg.type == SL_PGO_INSERT ? 0 : msg.type == SL_PGO_UPDATE ? 1 : 2]++;
      break;
    }
    default:
      break;
    }
  }
  int64_t t1 = sl_bench_now_ns();
  sl__pg_repl_destroy(r);
  sl__pgo_decoder_close(&d);
  mapper_close(&m);
  if (rc != SL_OK) return rc;
  (void)row_bytes;
  if (n[0] != n_txn * n_ins || n[1] != n_txn * n_upd ||
      n[2] != n_txn * n_del || n_commit != n_txn)
    return sl_error_set(err, SL_EFAILED,
                        "decoded %" PRIu64 " inserts, %" PRIu64
                        " updates, %" PRIu64 " deletes in %" PRIu64
                        " transactions; expected %" PRIu64 ", %" PRIu64
                        ", %" PRIu64 " in %" PRIu64,
                        n[0], n[1], n[2], n_commit, n_txn * n_ins,
                        n_txn * n_upd, n_txn * n_del, n_txn);
  *out_value = (double)O.changes / ((double)(t1 - t0) / 1e9);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The snapshot's limit: COPY ... TO STDOUT through libpq.              */

static int snapshot_copy(double *out_value, sl_error_t **err) {
  int64_t t0 = sl_bench_now_ns();
  PGconn *c = NULL;
  int rc = pg_conn(&c, err);
  if (rc != SL_OK) return rc;
  PGresult *r = PQexec(c, "COPY (SELECT * FROM pgc_snap) TO STDOUT");
  if (PQresultStatus(r) != PGRES_COPY_OUT) {
    rc = sl_error_set(err, SL_EIO, "COPY: %s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return rc;
  }
  PQclear(r);
  uint64_t rows = 0, bytes = 0;
  char *buf = NULL;
  int len;
  while ((len = PQgetCopyData(c, &buf, 0)) > 0) {
    rows++;
    bytes += (uint64_t)len;
    PQfreemem(buf);
  }
  if (len == -2)
    rc = sl_error_set(err, SL_EIO, "COPY: %s", PQerrorMessage(c));
  while ((r = PQgetResult(c)) != NULL) {
    if (rc == SL_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
      rc = sl_error_set(err, SL_EIO, "COPY: %s", PQerrorMessage(c));
    PQclear(r);
  }
  PQfinish(c);
  int64_t t1 = sl_bench_now_ns();
  if (rc != SL_OK) return rc;
  if (rows != O.snapshot_rows)
    return sl_error_set(err, SL_EFAILED,
                        "COPY gave %" PRIu64 " rows, expected %" PRIu64,
                        rows, O.snapshot_rows);
  *out_value = (double)rows / ((double)(t1 - t0) / 1e9);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* sluice's chunk reader on P threads.                                   */

typedef struct snap_s {
  const sl__pgc_table_t *t;
  const sl__pgc_chunks_t *cl;
  atomic_uint next;
  atomic_uint_fast64_t rows;
  atomic_int failed;
  char msg[1024];
  pthread_mutex_t mu;
} snap_t;

static void *snap_worker(void *arg) {
  snap_t *s = arg;
  sl_error_t *err = NULL;
  PGconn *c = NULL;
  char server[160];
  int rc = sl__pgc_connect(sl_server_conninfo(srv), 0, &c, server, &err);
  while (rc == SL_OK && !atomic_load(&s->failed)) {
    unsigned i = atomic_fetch_add(&s->next, 1);
    if (i >= s->cl->n) break;
    sl__pgc_rows_t rows;
    sl__pgc_rows_init(&rows, s->t->schema_);
    sl__pgc_snap_t snap;
    memset(&snap, 0, sizeof(snap));
    uint64_t high = 0;
    rc = sl__pgc_read_chunk(c, server, s->t, s->cl, &s->cl->chunks[i], &snap,
                            &high, &rows, &err);
    if (rc == SL_OK) atomic_fetch_add(&s->rows, rows.n);
    sl__pgc_snap_free(&snap);
    sl__pgc_rows_close(&rows);
  }
  if (rc != SL_OK) {
    pthread_mutex_lock(&s->mu);
    if (!atomic_exchange(&s->failed, 1))
      snprintf(s->msg, sizeof(s->msg), "%s",
               err ? sl_error_message(err) : "failed");
    pthread_mutex_unlock(&s->mu);
  }
  sl_error_destroy(err);
  if (c) PQfinish(c);
  return NULL;
}

/* Describe the table, plan its chunks (sl__pgc_plan_chunks, primary key)
 * and read every chunk (sl__pgc_read_chunk: its exact snapshot, the
 * SELECT converted to sluice rows, HIGH) on `parallelism` threads, each
 * with its own connection, taking chunks in order from a shared counter. */
static int snapshot_chunks(int parallelism, double *out_value,
                           sl_error_t **err) {
  PGconn *c = NULL;
  char server[160];
  sl__pgc_table_t *t = NULL;
  sl__pgc_chunks_t *cl = NULL;
  int64_t t0 = sl_bench_now_ns();
  int rc = sl__pgc_connect(sl_server_conninfo(srv), 0, &c, server, err);
  if (rc == SL_OK)
    rc = sl__pgc_table_describe(c, server, "public", "pgc_snap", &t, err);
  if (rc == SL_OK)
    rc = sl__pgc_plan_chunks(c, server, t, O.chunk_rows, &cl, err);
  if (c) PQfinish(c);
  if (rc != SL_OK) goto out;
  snap_t s = {.t = t, .cl = cl};
  atomic_init(&s.next, 0);
  atomic_init(&s.rows, 0);
  atomic_init(&s.failed, 0);
  pthread_mutex_init(&s.mu, NULL);
  pthread_t th[2];
  int n_th = 0;
  for (int i = 0; i < parallelism && i < 2; i++)
    if (pthread_create(&th[n_th], NULL, snap_worker, &s) == 0) n_th++;
  for (int i = 0; i < n_th; i++) pthread_join(th[i], NULL);
  pthread_mutex_destroy(&s.mu);
  int64_t t1 = sl_bench_now_ns();
  uint64_t got = atomic_load(&s.rows);
  if (n_th != (parallelism < 2 ? parallelism : 2))
    rc = sl_error_set(err, SL_EFAILED, "cannot start the reader threads");
  else if (atomic_load(&s.failed))
    rc = sl_error_set(err, SL_EFAILED, "a chunk reader failed: %s", s.msg);
  else if (got != O.snapshot_rows)
    rc = sl_error_set(err, SL_EFAILED,
                      "read %" PRIu64 " rows in %u chunks, expected %" PRIu64,
                      got, cl->n, O.snapshot_rows);
  else
    *out_value = (double)got / ((double)(t1 - t0) / 1e9);
out:
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The source in a job: `sluice run` of a pipeline.                     */

/*
 * The source's keys are those of the coordinator's design (conninfo,
 * tables, slot, publication, startup, chunk_rows, metadata); if the
 * source names them otherwise, these texts are the places to change.
 */
static int write_pipeline(const char *path, const char *name, int parallelism,
                          const char *ck_dir, int interval_ms,
                          const char *table, const char *slot,
                          const char *pub, const char *startup,
                          const char *sink) {
  char y[3 * PATH_MAX + 1024], slot_line[128] = "";
  if (slot)
    snprintf(slot_line, sizeof(slot_line), "  slot: %s\n", slot);
  snprintf(y, sizeof(y),
           "# sluice-bench-pgcdc (generated)\n"
           "name: %s\n"
           "parallelism: %d\n"
           "checkpoint:\n"
           "  dir: %s\n"
           "  interval_ms: %d\n"
           "source:\n"
           "  type: postgres-cdc\n"
           "  uid: cdc\n"
           "  conninfo: \"%s\"\n"
           "  tables: [public.%s]\n"
           "%s"
           "  publication: %s\n"
           "  startup: %s\n"
           "  chunk_rows: %" PRIu64 "\n"
           "  heartbeat: 1s\n"
           "  metadata: [position]\n"
           "sink: %s\n",
           name, parallelism, ck_dir, interval_ms, sl_server_conninfo(srv),
           table, slot_line, pub, startup, O.chunk_rows, sink);
  return sl_bench_write_file(path, y);
}

/* The rows the source ("uid": "cdc") emitted over its subtasks, from
 * `sluice run --metrics-json` (docs/metrics.md), and "result": "SL_OK". */
static int source_rows_out(const char *path, uint64_t *out) {
  *out = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char *text = NULL;
  size_t cap = 0, len = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      char *nt = realloc(text, cap = cap * 2 + 8192);
      if (nt == NULL) break;
      text = nt;
    }
    size_t r = fread(text + len, 1, 4096, f);
    if (r == 0) break;
    len += r;
  }
  fclose(f);
  if (text == NULL) return -1;
  text[len] = '\0';
  int rc = strstr(text, "\"result\": \"SL_OK\"") ? 0 : -1;
  for (const char *p = text; rc == 0 && (p = strstr(p, "\"uid\"")) != NULL;
       p++) {
    const char *v = strchr(p + 5, '"');
    if (v == NULL || strncmp(v, "\"cdc\"", 5) != 0) continue;
    const char *ro = strstr(v, "\"records_out\"");
    const char *next = strstr(v, "\"uid\"");
    if (ro == NULL || (next && next < ro)) continue;
    ro = strchr(ro + 13, ':');
    if (ro) *out += strtoull(ro + 1, NULL, 10);
  }
  free(text);
  return rc;
}

static bool file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[1024];
  bool has = false;
  while (f && !has && fgets(line, sizeof(line), f)) has = strstr(line, needle);
  if (f) fclose(f);
  return has;
}

/* Rows of a changelog file by kind: +I, -U, +U, -D. */
static void count_kinds(const char *path, uint64_t n[4]) {
  memset(n, 0, 4 * sizeof(uint64_t));
  FILE *f = fopen(path, "r");
  char line[2048];
  static const char *const k[4] = {"+I,", "-U,", "+U,", "-D,"};
  while (f && fgets(line, sizeof(line), f))
    for (int i = 0; i < 4; i++)
      if (strncmp(line, k[i], 3) == 0) n[i]++;
  if (f) fclose(f);
}

/* The newest completed checkpoint of dir (chk-N with its _metadata). */
static uint64_t newest_checkpoint(const char *dir) {
  uint64_t best = 0;
  DIR *d = opendir(dir);
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) {
    unsigned long long id;
    char tail, m[PATH_MAX + 300];
    if (sscanf(de->d_name, "chk-%llu%c", &id, &tail) != 1) continue;
    snprintf(m, sizeof(m), "%s/%s/_metadata", dir, de->d_name);
    if (id > best && access(m, F_OK) == 0) best = id;
  }
  if (d) closedir(d);
  return best;
}

/* The job must still run; fails with its log otherwise. */
static int alive(pid_t *pid, const char *log, sl_error_t **err) {
  if (*pid > 0 && waitpid(*pid, NULL, WNOHANG) == 0) return SL_OK;
  *pid = -1;
  return sl_error_set(err, SL_EFAILED, "sluice exited early; see %s", log);
}

/* Poll out until a line starting with needle is there (the bytes after
 * *off, a line start). */
static bool out_has_line(const char *out, off_t *off, const char *needle) {
  FILE *f = fopen(out, "r");
  if (f == NULL) return false;
  bool found = false;
  char *buf = NULL;
  size_t cap = 0;
  ssize_t n;
  if (fseeko(f, *off, SEEK_SET) == 0)
    while (!found && (n = getline(&buf, &cap, f)) > 0) {
      if (buf[n - 1] != '\n') break; /* a row still being written */
      *off += n;
      found = strncmp(buf, needle, strlen(needle)) == 0;
    }
  free(buf);
  fclose(f);
  return found;
}

static void kill_wait(pid_t *pid) {
  if (*pid > 0) {
    kill(*pid, SIGKILL);
    sl_bench_wait(*pid);
    *pid = -1;
  }
}

/*
 * Run a job until it has rows in out (when has_rows) and n_ck more
 * checkpoints completed after that, then SIGKILL it (bounded: 300 s).
 */
static int run_until_checkpoints(char *const argv[], const char *ck,
                                 const char *out, const char *log, int n_ck,
                                 sl_error_t **err) {
  pid_t pid = sl_bench_spawn(argv, "/dev/null", log);
  int rc = SL_OK;
  int64_t tlim = sl_bench_now_ns() + 300 * (int64_t)1000000000;
  uint64_t k = 0;
  for (int n = out ? -1 : 0; rc == SL_OK && n < n_ck;) {
    if ((rc = alive(&pid, log, err)) != SL_OK) break;
    struct stat st;
    if (n < 0 && stat(out, &st) == 0 && st.st_size > 0) {
      n = 0;
      k = newest_checkpoint(ck);
    } else if (n >= 0 && newest_checkpoint(ck) > k) {
      n++;
      k = newest_checkpoint(ck);
    }
    if (sl_bench_now_ns() > tlim)
      rc = sl_error_set(err, SL_EFAILED,
                        "not %d checkpoints within 300 s; see %s", n_ck, log);
    sleep_ms(5);
  }
  kill_wait(&pid);
  return rc;
}

/* The checkpoint directory's job subdirectory is named after the job. */
#define CH_JOB "pgcdc-changes"

/*
 * The changes job's template, before the workload: a job (startup:
 * latest, slot pgc_job, a file sink) runs in WORK/changes until two
 * checkpoints completed and is killed; that directory (checkpoints, the
 * sink's file) is saved as WORK/changes-template, which every run-changes
 * iteration copies back to WORK/changes (the same paths, which the
 * checkpoints name) and resumes from.  The base slot is a copy of the
 * job's slot (so the slot never passed the checkpoint); the job's slot is
 * dropped: each iteration copies the base slot to it again.
 */
static int make_changes_template(PGconn *c, sl_error_t **err) {
  char dir[PATH_MAX], yaml[PATH_MAX + 16], out[PATH_MAX + 16],
      log[PATH_MAX + 16], sink[PATH_MAX + 64], ck[PATH_MAX + 16],
      cmd[3 * PATH_MAX];
  snprintf(dir, sizeof(dir), "%s/changes", work);
  snprintf(yaml, sizeof(yaml), "%s/job.yaml", dir);
  snprintf(out, sizeof(out), "%s/out.csv", dir);
  snprintf(log, sizeof(log), "%s/run.log", dir);
  snprintf(ck, sizeof(ck), "%s/ck", dir);
  snprintf(sink, sizeof(sink), "{type: file, path: %s, changelog: true}",
           out);
  if (mkdir(dir, 0755) != 0)
    return sl_error_set(err, SL_EIO, "mkdir %s: %s", dir, strerror(errno));
  if (write_pipeline(yaml, CH_JOB, 1, ck, 200, "pgc_chg", SLOT_JOB,
                     PUB_CHG, "latest", sink) != 0)
    return sl_error_set(err, SL_EIO, "cannot write %s", yaml);
  char *argv[] = {O.sluice, "run", yaml, "--quiet", NULL};
  char jck[PATH_MAX + 32];
  snprintf(jck, sizeof(jck), "%s/" CH_JOB, ck);
  int rc = run_until_checkpoints(argv, jck, NULL, log, 2, err);
  if (rc == SL_OK) rc = slot_wait_inactive(c, SLOT_JOB, err);
  if (rc == SL_OK) rc = slot_copy(c, SLOT_JOB, SLOT_BASE, err);
  if (rc == SL_OK) rc = slot_drop(c, SLOT_JOB, err);
  /* The runs' pipeline: the same paths (a checkpoint every 200 ms: the
   * file sink writes its buffer at checkpoints, so the last row shows up to
   * one interval late). */
  if (rc == SL_OK &&
      write_pipeline(yaml, CH_JOB, 1, ck, 200, "pgc_chg", SLOT_JOB, PUB_CHG,
                     "latest", sink) != 0)
    rc = sl_error_set(err, SL_EIO, "cannot write %s", yaml);
  snprintf(tmpl_ck, sizeof(tmpl_ck), "%s/changes-template", work);
  snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", dir, tmpl_ck);
  if (rc == SL_OK && system(cmd) != 0)
    rc = sl_error_set(err, SL_EIO, "`%s` failed", cmd);
  return rc;
}

/*
 * One run-changes read: slot pgc_job = a copy of the base slot, the
 * template copied back to WORK/changes, `sluice run --resume`; the time
 * from its exec until the file holds the workload's last change (the -D
 * of the last transaction's last deleted id); every change checked by
 * kind.
 */
static int run_changes(double *out_value, sl_error_t **err) {
  char dir[PATH_MAX], yaml[PATH_MAX + 16], out[PATH_MAX + 16],
      log[PATH_MAX + 16], cmd[3 * PATH_MAX], needle[64];
  snprintf(dir, sizeof(dir), "%s/changes", work);
  snprintf(yaml, sizeof(yaml), "%s/job.yaml", dir);
  snprintf(out, sizeof(out), "%s/out.csv", dir);
  snprintf(log, sizeof(log), "%s/run-%d.log", work, (int)getpid());
  sl_bench_rm_rf(dir);
  snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", tmpl_ck, dir);
  if (system(cmd) != 0)
    return sl_error_set(err, SL_EIO, "`%s` failed", cmd);
  PGconn *c = NULL;
  int rc = pg_conn(&c, err);
  if (rc != SL_OK) return rc;
  if ((rc = slot_copy(c, SLOT_BASE, SLOT_JOB, err)) != SL_OK) {
    PQfinish(c);
    return rc;
  }
  snprintf(needle, sizeof(needle), "-D,%" PRIu64 ",",
           (n_txn - 1) * n_ins + n_upd + n_del);
  char *argv[] = {O.sluice, "run", yaml, "--resume", "--quiet", NULL};
  off_t off = 0;
  int64_t t0 = sl_bench_now_ns(), tlim = t0 + 1800 * (int64_t)1000000000;
  pid_t pid = sl_bench_spawn(argv, "/dev/null", log);
  while (rc == SL_OK && !out_has_line(out, &off, needle)) {
    if ((rc = alive(&pid, log, err)) != SL_OK) break;
    if (sl_bench_now_ns() > tlim)
      rc = sl_error_set(err, SL_EFAILED, "'%s' not written within 1800 s; "
                        "see %s and %s", needle, out, log);
    else
      sleep_ms(2);
  }
  int64_t t1 = sl_bench_now_ns();
  kill_wait(&pid);
  uint64_t n[4];
  if (rc == SL_OK) {
    count_kinds(out, n);
    if (n[0] != n_txn * n_ins || n[1] != n_txn * n_upd ||
        n[2] != n_txn * n_upd || n[3] != n_txn * n_del)
      rc = sl_error_set(err, SL_EFAILED,
                        "%s holds %" PRIu64 " +I, %" PRIu64 " -U, %" PRIu64
                        " +U, %" PRIu64 " -D; expected %" PRIu64 ", %" PRIu64
                        ", %" PRIu64 ", %" PRIu64,
                        out, n[0], n[1], n[2], n[3], n_txn * n_ins,
                        n_txn * n_upd, n_txn * n_upd, n_txn * n_del);
  }
  if (rc == SL_OK && !file_has(log, "resuming from checkpoint "))
    rc = sl_error_set(err, SL_EFAILED, "the run did not resume; see %s", log);
  if (rc == SL_OK) *out_value = (double)O.changes / ((double)(t1 - t0) / 1e9);
  sl_error_t *e2 = NULL;
  if (slot_drop(c, SLOT_JOB, &e2) != SL_OK && rc == SL_OK) {
    rc = SL_EFAILED;
    *err = e2;
  } else {
    sl_error_destroy(e2);
  }
  PQfinish(c);
  if (rc == SL_OK) unlink(log);
  return rc;
}

/* The snapshot through the source: exec to exit, every row counted. */
static int run_snapshot(int parallelism, int iter, double *out_value,
                        sl_error_t **err) {
  char dir[PATH_MAX], yaml[PATH_MAX + 16], ck[PATH_MAX + 16],
      mj[PATH_MAX + 16], log[PATH_MAX + 16], name[64];
  snprintf(dir, sizeof(dir), "%s/snap-%d-%d", work, (int)getpid(), iter);
  snprintf(yaml, sizeof(yaml), "%s/job.yaml", dir);
  snprintf(ck, sizeof(ck), "%s/ck", dir);
  snprintf(mj, sizeof(mj), "%s/metrics.json", dir);
  snprintf(log, sizeof(log), "%s/run.log", dir);
  snprintf(name, sizeof(name), "pgcdc-snapshot-p%d", parallelism);
  if (mkdir(dir, 0755) != 0)
    return sl_error_set(err, SL_EIO, "mkdir %s: %s", dir, strerror(errno));
  if (write_pipeline(yaml, name, parallelism, ck, 1000, "pgc_snap", NULL,
                     PUB_SNAP, "snapshot", "{type: null}") != 0)
    return sl_error_set(err, SL_EIO, "cannot write %s", yaml);
  char *argv[] = {O.sluice, "run", yaml, "--quiet", "--metrics-json", mj,
                  NULL};
  int64_t t0 = sl_bench_now_ns();
  int st = sl_bench_spawn_wait(argv, "/dev/null", log);
  int64_t t1 = sl_bench_now_ns();
  int rc = SL_OK;
  uint64_t got = 0;
  if (st != 0)
    rc = sl_error_set(err, SL_EFAILED, "sluice run exited with %d; see %s",
                      st, log);
  else if (source_rows_out(mj, &got) != 0 || got != O.snapshot_rows)
    rc = sl_error_set(err, SL_EFAILED,
                      "the source emitted %" PRIu64 " rows (metrics in %s), "
                      "expected %" PRIu64, got, mj, O.snapshot_rows);
  else
    *out_value = (double)O.snapshot_rows / ((double)(t1 - t0) / 1e9);
  if (rc == SL_OK || !getenv("SL_TEST_KEEP")) sl_bench_rm_rf(dir);
  return rc;
}

/* `sluice validate` of the snapshot pipeline decides whether the sluice
 * arms run; the report says why when they do not. */
static void probe_run(void) {
  char path[PATH_MAX], log[PATH_MAX + 32], ck[PATH_MAX];
  run_enabled = false;
  snprintf(path, sizeof(path), "%s/probe.yaml", work);
  snprintf(ck, sizeof(ck), "%s/probe-ck", work);
  /* A table this run made: the source describes it when it is built. */
  if (write_pipeline(path, "pgcdc-probe", 1, ck, 1000,
                     O.do_snapshot ? "pgc_snap" : "pgc_chg", NULL,
                     O.do_snapshot ? PUB_SNAP : PUB_CHG, "snapshot",
                     "{type: null}") != 0) {
    snprintf(run_skip_reason, sizeof(run_skip_reason),
             "cannot write the pipeline");
    return;
  }
  snprintf(log, sizeof(log), "%s/validate.log", work);
  unlink(log);
  char *argv[] = {O.sluice, "validate", path, NULL};
  int st = sl_bench_spawn_wait(argv, NULL, log);
  if (st == 0) {
    run_enabled = true;
    return;
  }
  char first[900] = "";
  FILE *f = fopen(log, "r");
  if (f) {
    if (fgets(first, sizeof(first), f) == NULL) first[0] = '\0';
    fclose(f);
  }
  first[strcspn(first, "\n")] = '\0';
  snprintf(run_skip_reason, sizeof(run_skip_reason),
           "`sluice validate` refuses the pipeline (exit %d): %s", st,
           first[0] ? first : "(no message)");
}

/* ------------------------------------------------------------------ */
/* The time from a crash to caught up.                                  */

#define CATCHUP_TPS 10 /* the writer's transactions per second */
#define CU_JOB "pgcdc-catchup"

/* The next transaction number t of the catch-up table's workload. */
static int next_txn(PGconn *c, int64_t *t, sl_error_t **err) {
  char sql[128];
  snprintf(sql, sizeof(sql), "SELECT max(id) / %" PRIu64 " - 1 FROM pgc_cu",
           n_ins);
  return sl_pg_query_int64(c, sql, t, err);
}

/* Writes continuing at a fixed rate. */
typedef struct cwriter_s {
  _Atomic int64_t t;
  atomic_bool stop;
  int rc;
  char msg[512];
} cwriter_t;

static void *cwriter_main(void *arg) {
  cwriter_t *w = arg;
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  w->rc = pg_conn(&c, &err);
  int64_t next = sl_bench_now_ns();
  while (w->rc == SL_OK && !atomic_load(&w->stop)) {
    char sql[96];
    snprintf(sql, sizeof(sql), "CALL pgc_cu_gen(%" PRId64 ", 1)",
             atomic_fetch_add(&w->t, 1));
    w->rc = sl_pg_exec(c, sql, NULL, &err);
    next += 1000000000 / CATCHUP_TPS;
    int64_t d = next - sl_bench_now_ns();
    if (d > 0) nanosleep(&(struct timespec){d / 1000000000, d % 1000000000},
                         NULL);
  }
  if (w->rc != SL_OK)
    snprintf(w->msg, sizeof(w->msg), "%s", sl_error_message(err));
  sl_error_destroy(err);
  if (c) PQfinish(c);
  return NULL;
}

static int writer_start(cwriter_t *w, pthread_t *th, PGconn *c,
                        sl_error_t **err) {
  int64_t t = 0;
  int rc = next_txn(c, &t, err);
  if (rc != SL_OK) return rc;
  atomic_store(&w->t, t);
  atomic_store(&w->stop, false);
  w->rc = SL_OK;
  if (pthread_create(th, NULL, cwriter_main, w) != 0)
    return sl_error_set(err, SL_EFAILED, "writer thread");
  return SL_OK;
}

static int writer_stop(cwriter_t *w, pthread_t th, sl_error_t **err) {
  atomic_store(&w->stop, true);
  pthread_join(th, NULL);
  if (w->rc != SL_OK)
    return sl_error_set(err, SL_EFAILED, "writer: %s", w->msg);
  return SL_OK;
}

/*
 * One crash and catch-up: the job (startup: latest, its own slot, a file
 * sink, a checkpoint every 200 ms) runs with writes at CATCHUP_TPS until
 * its file has rows and two more checkpoints completed; SIGKILL; the
 * writer stops; a backlog of B changes (pgc_cu_gen); writes continue;
 * `sluice run --resume`; the time from its exec until the file has the
 * backlog's last change (the -D of its last deleted id).
 */
static int catchup(int iter, double *out_value, sl_error_t **err) {
  char dir[PATH_MAX], yaml[PATH_MAX + 16], out[PATH_MAX + 16],
      ck[PATH_MAX + 16], jck[PATH_MAX + 32], log1[PATH_MAX + 16],
      log2[PATH_MAX + 16], sink[PATH_MAX + 64], slot[64], sql[128],
      needle[64];
  snprintf(dir, sizeof(dir), "%s/catchup-%d-%d", work, (int)getpid(), iter);
  snprintf(yaml, sizeof(yaml), "%s/job.yaml", dir);
  snprintf(out, sizeof(out), "%s/out.csv", dir);
  snprintf(ck, sizeof(ck), "%s/ck", dir);
  snprintf(jck, sizeof(jck), "%s/" CU_JOB, ck);
  snprintf(log1, sizeof(log1), "%s/run1.log", dir);
  snprintf(log2, sizeof(log2), "%s/run2.log", dir);
  snprintf(slot, sizeof(slot), "pgc_cu_%d_%d", (int)getpid(), iter);
  snprintf(sink, sizeof(sink), "{type: file, path: %s, changelog: true}",
           out);
  if (mkdir(dir, 0755) != 0)
    return sl_error_set(err, SL_EIO, "mkdir %s: %s", dir, strerror(errno));
  if (write_pipeline(yaml, CU_JOB, 1, ck, 200, "pgc_cu", slot, PUB_CU,
                     "latest", sink) != 0)
    return sl_error_set(err, SL_EIO, "cannot write %s", yaml);
  PGconn *c = NULL;
  int rc = pg_conn(&c, err);
  if (rc != SL_OK) return rc;
  cwriter_t w;
  memset(&w, 0, sizeof(w));
  pthread_t th;
  pid_t pid = -1;
  char *a1[] = {O.sluice, "run", yaml, "--quiet", NULL};
  char *a2[] = {O.sluice, "run", yaml, "--resume", "--quiet", NULL};
  if ((rc = writer_start(&w, &th, c, err)) != SL_OK) goto out;
  rc = run_until_checkpoints(a1, jck, out, log1, 2, err);
  int wrc = writer_stop(&w, th, rc == SL_OK ? err : NULL);
  if (rc == SL_OK) rc = wrc;
  /* The backlog. */
  int64_t t = 0;
  uint64_t nb = O.backlog / O.txn_rows;
  if (rc == SL_OK) rc = next_txn(c, &t, err);
  if (rc == SL_OK) {
    snprintf(sql, sizeof(sql), "CALL pgc_cu_gen(%" PRId64 ", %" PRIu64 ")", t,
             nb);
    rc = sl_pg_exec(c, sql, NULL, err);
  }
  if (rc != SL_OK) goto out;
  snprintf(needle, sizeof(needle), "-D,%" PRIu64 ",",
           (uint64_t)(t + (int64_t)nb - 1) * n_ins + n_upd + n_del);
  if ((rc = writer_start(&w, &th, c, err)) != SL_OK) goto out;
  off_t off = 0;
  int64_t t0 = sl_bench_now_ns(), tlim = t0 + 600 * (int64_t)1000000000;
  pid = sl_bench_spawn(a2, "/dev/null", log2);
  while (rc == SL_OK && !out_has_line(out, &off, needle)) {
    if ((rc = alive(&pid, log2, err)) != SL_OK) break;
    if (w.rc != SL_OK)
      rc = sl_error_set(err, SL_EFAILED, "writer: %s", w.msg);
    else if (sl_bench_now_ns() > tlim)
      rc = sl_error_set(err, SL_EFAILED, "'%s' not written within 600 s; "
                        "see %s and %s", needle, out, log2);
    else
      sleep_ms(2);
  }
  int64_t t1 = sl_bench_now_ns();
  wrc = writer_stop(&w, th, rc == SL_OK ? err : NULL);
  if (rc == SL_OK) rc = wrc;
  if (rc == SL_OK && !file_has(log2, "resuming from checkpoint "))
    rc = sl_error_set(err, SL_EFAILED, "the run did not resume; see %s",
                      log2);
  if (rc == SL_OK) *out_value = (double)(t1 - t0) / 1e9;
out:
  kill_wait(&pid);
  sl_error_t *e2 = NULL;
  (void)slot_drop(c, slot, &e2);
  sl_error_destroy(e2);
  PQfinish(c);
  if (rc == SL_OK || !getenv("SL_TEST_KEEP")) sl_bench_rm_rf(dir);
  return rc;
}

/* ------------------------------------------------------------------ */
/* One harness iteration = one whole read.                              */

static int recvlogical(const arm_t *a, int iter, double *out_value,
                       sl_error_t **err) {
  char slot[64], log[PATH_MAX + 64], port[16];
  snprintf(slot, sizeof(slot), "pgc_rl_%d_%d", (int)getpid(), iter);
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir, a->name);
  snprintf(port, sizeof(port), "%d", sl_server_port(srv));
  PGconn *c = NULL;
  int rc = pg_conn(&c, err);
  if (rc != SL_OK) return rc;
  if ((rc = slot_copy(c, SLOT_BASE, slot, err)) != SL_OK) {
    PQfinish(c);
    return rc;
  }
  char *argv[] = {PG_BIN "/pg_recvlogical", "--no-password",
                  "-h", "127.0.0.1", "-p", port,
                  "-U", (char *)sl_server_user(srv),
                  "-d", (char *)sl_server_dbname(srv),
                  "--slot", slot, "--start", "--no-loop",
                  "--endpos", end_lsn,
                  "-o", "proto_version=1",
                  "-o", "publication_names=" PUB_CHG,
                  "-f", "/dev/null", NULL};
  int64_t t0 = sl_bench_now_ns();
  int st = sl_bench_spawn_wait(argv, "/dev/null", log);
  int64_t t1 = sl_bench_now_ns();
  if (st != 0)
    rc = sl_error_set(err, SL_EFAILED, "pg_recvlogical exited with %d; see %s",
                      st, log);
  /* It stopped at END: its slot confirmed END. */
  char sql[256], *conf = NULL;
  snprintf(sql, sizeof(sql),
           "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
           "WHERE slot_name = '%s'", slot);
  if (rc == SL_OK) rc = slot_wait_inactive(c, slot, err);
  if (rc == SL_OK) rc = sl_pg_query_text(c, sql, &conf, err);
  uint64_t cv = 0;
  if (rc == SL_OK && (sl__pg_lsn_parse(conf, &cv) != SL_OK || cv < end_lsn_v))
    rc = sl_error_set(err, SL_EFAILED, "pg_recvlogical confirmed %s, not "
                      "END %s", conf, end_lsn);
  sl_free(conf);
  if (rc == SL_OK) *out_value = (double)O.changes / ((double)(t1 - t0) / 1e9);
  sl_error_t *e2 = NULL;
  (void)slot_drop(c, slot, &e2);
  sl_error_destroy(e2);
  PQfinish(c);
  return rc;
}

static int run_iter(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  arm_t *a = arg;
  sl_error_t *err = NULL;
  int rc = SL_OK;
  switch (a->kind) {
  case K_CH_SLUICE: {
    char slot[64];
    snprintf(slot, sizeof(slot), "pgc_sl_%d_%d", (int)getpid(),
             ctx->iteration);
    PGconn *c = NULL;
    rc = pg_conn(&c, &err);
    if (rc == SL_OK) rc = slot_copy(c, SLOT_BASE, slot, &err);
    if (rc == SL_OK) rc = pgoutput_sluice(slot, out_value, &err);
    sl_error_t *e2 = NULL;
    if (c) (void)slot_drop(c, slot, &e2);
    sl_error_destroy(e2);
    if (c) PQfinish(c);
    break;
  }
  case K_CH_RECV:
    rc = recvlogical(a, ctx->iteration, out_value, &err);
    break;
  case K_CH_RUN:
    rc = run_changes(out_value, &err);
    break;
  case K_SNAP_COPY:
    rc = snapshot_copy(out_value, &err);
    break;
  case K_SNAP_CHUNKS:
    rc = snapshot_chunks(a->parallelism, out_value, &err);
    break;
  case K_SNAP_RUN:
    rc = run_snapshot(a->parallelism, ctx->iteration, out_value, &err);
    break;
  case K_CATCHUP:
    rc = catchup(ctx->iteration, out_value, &err);
    break;
  }
  if (rc != SL_OK) return fail(err, a->name);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Reporting.                                                           */

static void report(void) {
  if (O.do_changes) {
    printf("\n== changes: %" PRIu64 " changes in transactions of %" PRIu64
           " rows; fork = %" PRIu64 " warm-up + %" PRIu64
           " measured reads; k changes/s ==\n",
           O.changes, O.txn_rows, O.warmup, O.iterations);
    sl_bench_print_stat("sluice-pgoutput", 22,
                        arm_named("sluice-pgoutput")->v, O.rounds, 1e-3,
                        "k/s", "rounds");
    sl_bench_print_stat("pg_recvlogical", 22, arm_named("recvlogical")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    if (run_enabled)
      sl_bench_print_stat("sluice run changes", 22,
                          arm_named("run-changes")->v, O.rounds, 1e-3, "k/s",
                          "rounds");
    printf("\n== changes: ratios of mean changes/s, 95%% intervals ==\n");
    sl_bench_print_ratio("pgoutput/recvlogical", 22,
                         arm_named("sluice-pgoutput")->v,
                         arm_named("recvlogical")->v, O.rounds, O.seed,
                         "rounds");
    if (run_enabled)
      sl_bench_print_ratio("run/recvlogical", 22,
                           arm_named("run-changes")->v,
                           arm_named("recvlogical")->v, O.rounds, O.seed,
                           "rounds");
  }
  if (O.do_snapshot) {
    printf("\n== snapshot: %" PRIu64 " rows, chunks of %" PRIu64
           " rows; fork = %" PRIu64 " warm-up + %" PRIu64
           " measured reads; k rows/s ==\n",
           O.snapshot_rows, O.chunk_rows, O.warmup, O.iterations);
    sl_bench_print_stat("COPY TO STDOUT", 22, arm_named("copy")->v, O.rounds,
                        1e-3, "k/s", "rounds");
    sl_bench_print_stat("chunk reader p1", 22, arm_named("snap-p1")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    sl_bench_print_stat("chunk reader p2", 22, arm_named("snap-p2")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    if (run_enabled) {
      sl_bench_print_stat("sluice run p1", 22, arm_named("run-p1")->v,
                          O.rounds, 1e-3, "k/s", "rounds");
      sl_bench_print_stat("sluice run p2", 22, arm_named("run-p2")->v,
                          O.rounds, 1e-3, "k/s", "rounds");
    }
    const double *cp = arm_named("copy")->v;
    printf("\n== snapshot: ratios of mean rows/s, 95%% intervals ==\n");
    sl_bench_print_ratio("chunks p1/copy", 22, arm_named("snap-p1")->v, cp,
                         O.rounds, O.seed, "rounds");
    sl_bench_print_ratio("chunks p2/copy", 22, arm_named("snap-p2")->v, cp,
                         O.rounds, O.seed, "rounds");
    sl_bench_print_ratio("chunks p2/p1", 22, arm_named("snap-p2")->v,
                         arm_named("snap-p1")->v, O.rounds, O.seed, "rounds");
    if (run_enabled) {
      sl_bench_print_ratio("run p1/copy", 22, arm_named("run-p1")->v, cp,
                           O.rounds, O.seed, "rounds");
      sl_bench_print_ratio("run p2/copy", 22, arm_named("run-p2")->v, cp,
                           O.rounds, O.seed, "rounds");
      sl_bench_print_ratio("run p2/p1", 22, arm_named("run-p2")->v,
                           arm_named("run-p1")->v, O.rounds, O.seed,
                           "rounds");
    }
  }
  if (!run_enabled) printf("  sluice run arms skipped: %s\n", run_skip_reason);
  if (O.do_catchup && run_enabled) {
    const double *rl = arm_named("recvlogical")->v;
    double lim[MAX_ROUNDS];
    for (size_t r = 0; r < O.rounds; r++)
      lim[r] = rl[r] > 0 ? (double)O.backlog / rl[r] : NAN;
    printf("\n== crash to caught up: a backlog of %" PRIu64 " changes, "
           "writes continuing at %d changes/s, a checkpoint every 200 ms; "
           "fork = %" PRIu64 " warm-up + %" PRIu64 " measured; seconds ==\n",
           O.backlog, CATCHUP_TPS * (int)O.txn_rows, O.warmup, O.iterations);
    sl_bench_print_stat("crash to caught up", 22, arm_named("catchup")->v,
                        O.rounds, 1, "s", "rounds");
    sl_bench_print_stat("limit: backlog/recv", 22, lim, O.rounds, 1, "s",
                        "rounds");
    if (!O.do_changes)
      sl_bench_print_stat("pg_recvlogical", 22, rl, O.rounds, 1e-3, "k/s",
                          "rounds");
    printf("\n== catch-up: ratio of mean seconds, 95%% intervals ==\n");
    sl_bench_print_ratio("caught up/limit", 22, arm_named("catchup")->v, lim,
                         O.rounds, O.seed, "rounds");
  }
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].n_failed)
      printf("WARNING: %s: %zu failed rounds (not counted)\n", arms[i].name,
             arms[i].n_failed);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice-bench-pgcdc [--quick]\n"
          "         [--what snapshot|changes|catchup|all]\n"
          "         [--rounds R] [--warmup W] [--iterations I] [--changes N]\n"
          "         [--backlog B] [--txn-rows R] [--snapshot-rows M]\n"
          "         [--chunk-rows C] [--shared-mb MB] [--seed S] [--out DIR]\n"
          "         [--sluice PATH]\n");
}

static int parse_args(int argc, char **argv) {
  O.do_changes = O.do_snapshot = O.do_catchup = true;
  O.rounds = 5;
  O.warmup = 1;
  O.iterations = 2;
  O.changes = 1000000;
  O.txn_rows = 100;
  O.snapshot_rows = 10000000;
  O.chunk_rows = 8192;
  O.shared_mb = 2048;
  O.seed = 1;
  O.out_dir = "bench/results/pgcdc";
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--quick") == 0) {
      O.is_quick = true;
      O.rounds = 2;
      O.warmup = 0;
      O.iterations = 1;
      O.changes = 20000;
      O.snapshot_rows = 50000;
      O.shared_mb = 128;
    }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--quick") == 0) continue;
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench-pgcdc: %s needs a value\n", a);
      return -1;
    }
    const char *v = argv[++i];
    uint64_t *u = NULL, min = 1;
    if (strcmp(a, "--what") == 0) {
      bool all = strcmp(v, "all") == 0;
      O.do_changes = all || strcmp(v, "changes") == 0;
      O.do_snapshot = all || strcmp(v, "snapshot") == 0;
      O.do_catchup = all || strcmp(v, "catchup") == 0;
      if (!O.do_changes && !O.do_snapshot && !O.do_catchup) {
        fprintf(stderr, "bench-pgcdc: --what is snapshot, changes, catchup "
                "or all, not '%s'\n", v);
        return -1;
      }
      continue;
    } else if (strcmp(a, "--out") == 0) {
      O.out_dir = v;
      continue;
    } else if (strcmp(a, "--sluice") == 0) {
      snprintf(O.sluice, sizeof(O.sluice), "%s", v);
      continue;
    } else if (strcmp(a, "--rounds") == 0) u = &O.rounds;
    else if (strcmp(a, "--warmup") == 0) u = &O.warmup, min = 0;
    else if (strcmp(a, "--iterations") == 0) u = &O.iterations;
    else if (strcmp(a, "--changes") == 0) u = &O.changes;
    else if (strcmp(a, "--backlog") == 0) u = &O.backlog;
    else if (strcmp(a, "--txn-rows") == 0) u = &O.txn_rows, min = 3;
    else if (strcmp(a, "--snapshot-rows") == 0) u = &O.snapshot_rows;
    else if (strcmp(a, "--chunk-rows") == 0) u = &O.chunk_rows;
    else if (strcmp(a, "--shared-mb") == 0) u = &O.shared_mb, min = 16;
    else if (strcmp(a, "--seed") == 0) u = &O.seed, min = 0;
    else {
      fprintf(stderr, "bench-pgcdc: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (!sl_bench_parse_u64(v, u) || *u < min) {
      fprintf(stderr,
              "bench-pgcdc: %s needs a whole number >= %" PRIu64
              ", not '%s'\n",
              a, min, v);
      return -1;
    }
  }
  if (O.rounds > MAX_ROUNDS) {
    fprintf(stderr, "bench-pgcdc: --rounds is at most %d\n", MAX_ROUNDS);
    return -1;
  }
  if (O.changes % O.txn_rows != 0 || O.txn_rows > 100000) {
    fprintf(stderr, "bench-pgcdc: --changes must be a multiple of "
            "--txn-rows (at most 100000)\n");
    return -1;
  }
  if (O.backlog == 0) O.backlog = O.changes;
  if (O.backlog % O.txn_rows != 0) {
    fprintf(stderr,
            "bench-pgcdc: --backlog must be a multiple of --txn-rows\n");
    return -1;
  }
  n_txn = O.changes / O.txn_rows;
  n_ins = (O.txn_rows + 1) / 2;
  n_upd = (O.txn_rows - n_ins) * 3 / 5;
  n_del = O.txn_rows - n_ins - n_upd;
  if (O.sluice[0] == '\0' &&
      sl_bench_sibling("sluice", O.sluice, sizeof(O.sluice)) != 0) {
    fprintf(stderr, "bench-pgcdc: cannot find myself; give --sluice\n");
    return -1;
  }
  if (access(O.sluice, X_OK) != 0) {
    fprintf(stderr, "bench-pgcdc: %s is not an executable (give --sluice)\n",
            O.sluice);
    return -1;
  }
  return 0;
}

static int setup(void) {
  sl_error_t *err = NULL;
  sl_server_opts_t so;
  sl_server_opts_init(&so, SL_SERVER_POSTGRES);
  /* Reads are measured; the load does not need fsync.  shared_buffers
   * holds the snapshot table (--shared-mb; the test servers' 16 MB would
   * make every arm read from the OS's cache); a large max_wal_size keeps
   * checkpoints out of the load. */
  so.is_durable = false;
  char sb[64];
  snprintf(sb, sizeof(sb), "shared_buffers=%" PRIu64 "MB", O.shared_mb);
  const char *const extra[] = {sb, "max_wal_size=8GB",
                               "checkpoint_timeout=30min",
                               "max_replication_slots=20",
                               "max_wal_senders=20", NULL};
  so.extra_settings = extra;
  so.base_dir = work;
  if (sl_server_start(&so, &srv, &err) != SL_OK)
    return fail(err, "starting PostgreSQL");
  PGconn *c = NULL;
  if (pg_conn(&c, &err) != SL_OK) return fail(err, "connect");
  char *ver = NULL;
  if (sl_pg_query_text(c, "SHOW server_version", &ver, &err) == SL_OK) {
    printf("# server: PostgreSQL %s (fsync off, shared_buffers %" PRIu64
           "MB, wal_level logical)\n",
           ver, O.shared_mb);
    sl_free(ver);
  }
  sl_error_destroy(err);
  err = NULL;
  int rc = SL_OK;
  if (O.do_snapshot) rc = make_snapshot_table(c, &err);
  if (rc == SL_OK && (O.do_changes || O.do_catchup))
    rc = make_change_table(c, "pgc_chg", PUB_CHG, &err);
  if (rc == SL_OK && O.do_catchup)
    rc = make_change_table(c, "pgc_cu", PUB_CU, &err);
  if (rc == SL_OK) probe_run();
  if (!run_enabled) printf("# sluice run arms skipped: %s\n", run_skip_reason);
  /* The base slot: a copy of the changes job's slot when the job runs
   * (its checkpoint is before the workload), else a slot of its own. */
  if (rc == SL_OK && (O.do_changes || O.do_catchup)) {
    if (run_enabled && O.do_changes)
      rc = make_changes_template(c, &err);
    else
      rc = sl_pg_exec(c,
                      "SELECT pg_create_logical_replication_slot('" SLOT_BASE
                      "', 'pgoutput')",
                      NULL, &err);
    if (rc == SL_OK) {
      char sql[128];
      snprintf(sql, sizeof(sql), "CALL pgc_chg_gen(0, %" PRIu64 ")", n_txn);
      int64_t t0 = sl_bench_now_ns();
      rc = sl_pg_exec(c, sql, NULL, &err);
      double s = (double)(sl_bench_now_ns() - t0) / 1e9;
      if (rc == SL_OK) {
        printf("# changes: %" PRIu64 " (%" PRIu64 " transactions of %" PRIu64
               " inserts, %" PRIu64 " updates, %" PRIu64 " deletes) written "
               "in %.1f s\n",
               O.changes, n_txn, n_ins, n_upd, n_del, s);
        fprintf(raw, "#changes-write-s,%.3f\n", s);
      }
    }
    if (rc == SL_OK) rc = check_base_slot(c, &err);
  }
  PQfinish(c);
  if (rc != SL_OK) return fail(err, "preparing the tables");
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) return 2;
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < N_ARMS; i++)
    for (size_t r = 0; r < MAX_ROUNDS; r++) arms[i].v[r] = NAN;
  if (mkdir(O.out_dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "bench-pgcdc: cannot create %s: %s\n", O.out_dir,
            strerror(errno));
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(work, sizeof(work), "%s/sl-bench-pgcdc-XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(work) == NULL) {
    fprintf(stderr, "bench-pgcdc: mkdtemp: %s\n", strerror(errno));
    return 2;
  }
  /* The server runs as postgres when we are root: it must be able to
   * enter the directory its data directory is in. */
  chmod(work, 0755);
  char rawp[PATH_MAX];
  snprintf(rawp, sizeof(rawp), "%s/pgcdc-raw.csv", O.out_dir);
  raw = fopen(rawp, "w");
  if (raw == NULL) {
    fprintf(stderr, "bench-pgcdc: cannot write %s\n", rawp);
    return 2;
  }
  fprintf(raw, "arm,round,index,what,value\n");
  fprintf(raw, "#opts,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
          ",%" PRIu64 ",%" PRIu64 "\n", O.changes, O.txn_rows,
          O.snapshot_rows, O.chunk_rows, O.warmup, O.iterations);
  int rc = 1;
  printf("# sluice-bench-pgcdc: %" PRIu64 " rounds%s; sluice %s; load "
         "average %.2f at start\n",
         O.rounds, O.is_quick ? " (--quick: a smoke run, not a figure)" : "",
         O.sluice, sl_bench_loadavg1());
  if (setup() != 0) goto out;
  fflush(stdout);

  sl_bench_rng_t rng;
  sl_bench_rng_seed(&rng, O.seed);
  size_t order[N_ARMS];
  for (uint64_t r = 0; r < O.rounds; r++) {
    size_t n = 0;
    for (size_t i = 0; i < N_ARMS; i++)
      if (arm_enabled(&arms[i])) order[n++] = i;
    sl_bench_shuffle(order, n, &rng);
    fprintf(stderr, "round %" PRIu64 " (load %.2f):", r, sl_bench_loadavg1());
    for (size_t k = 0; k < n; k++) {
      arm_t *a = &arms[order[k]];
      fprintf(stderr, " %s", a->name);
      sl_bench_opts_t bo;
      sl_bench_opts_init(&bo);
      bo.name = a->name;
      bo.unit = a->kind == K_CATCHUP ? "s" : "rows/s";
      bo.n_forks = 1;
      bo.n_warmup = (int)O.warmup;
      bo.n_iterations = (int)O.iterations;
      bo.seed = O.seed + r;
      bo.fork_timeout_sec = 3600;
      sl_bench_fn_t fn = {.label = a->name, .iter = run_iter, .arg = a};
      sl_bench_result_t *res = NULL;
      if (sl_bench_run(&bo, &fn, &res) != SL_OK) {
        fprintf(stderr, "\nbench-pgcdc: the harness failed\n");
        goto out;
      }
      sl_bench_fork_t *fk = &res->forks[0];
      for (size_t v = 0; v < fk->n_values; v++)
        fprintf(raw, a->kind == K_CATCHUP ? "%s,%" PRIu64 ",%zu,%s,%.4f\n"
                                          : "%s,%" PRIu64 ",%zu,%s,%.1f\n",
                a->name, r, v, v < O.warmup ? "warmup" : "run",
                fk->values[v]);
      if (fk->is_ok && fk->n_values == O.warmup + O.iterations) {
        a->v[r] = sl_bench_mean(fk->values + O.warmup, O.iterations);
      } else {
        a->n_failed++;
        fprintf(raw, "%s,%" PRIu64 ",0,failed,\n", a->name, r);
        fprintf(stderr, "\nbench-pgcdc: %s round %" PRIu64 " failed: %s\n",
                a->name, r, fk->error[0] ? fk->error : "?");
      }
      sl_bench_result_destroy(res);
    }
    fprintf(stderr, "\n");
    fflush(raw);
  }
  report();
  printf("# load average %.2f at the end\n", sl_bench_loadavg1());
  rc = 0;
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].n_failed) rc = 1;
out:
  sl_server_destroy(srv);
  if (raw) fclose(raw);
  if (!getenv("SL_TEST_KEEP")) sl_bench_rm_rf(work);
  return rc;
}
