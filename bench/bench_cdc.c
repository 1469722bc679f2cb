/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-cdc: change data capture from MariaDB against the server's
 * own tools, on one real server (MariaDB 10.11, tests/tools/sl_servers.h),
 * in one run.
 *
 * Binlog decoding.  A table of 12 columns of mixed types (bigint primary
 * key, int, smallint unsigned, decimal(12,2), double, varchar, char,
 * nullable varchar, datetime(6), date, tinyint, nullable varbinary) gets N
 * row changes in transactions of R rows (R/2 inserts, then updates and
 * deletes of the rows the previous transaction inserted, 3:2), written by
 * a stored procedure after RESET MASTER, so that the binlog holds exactly
 * those N changes.  Arms:
 *
 *   sluice-binlog  sluice's path: the replication transport
 *                  (binlog_reader.h, non-blocking, from the oldest binlog)
 *                  + sluice's decoder (binlog_decode.h) + every row image
 *                  mapped to a sluice row (sl__binlog_image_to_row; an
 *                  update gives its -U and +U rows) + the GTID state kept
 *                  per transaction.  Every run is checked: exactly the N
 *                  changes, by kind.
 *   mbl-remote     the limit: `mariadb-binlog --read-from-remote-server
 *                  --base64-output=decode-rows --verbose` of the first
 *                  binlog file, output to /dev/null (the same
 *                  replication protocol, the rows decoded to text)
 *   mbl-file       the same tool reading the binlog files directly
 *   sl-transport   diagnostics: sluice's path cut after the transport
 *   sl-decode      (raw events only) and after the decoder (no mapping)
 *
 * Snapshot.  A table of M rows (the same 12 columns), loaded with INSERT
 * ... SELECT from MariaDB's SEQUENCE engine (seq_A_to_B, batches of
 * 1,000,000 rows, not binlogged: sql_log_bin=0); the load time is printed.
 * Arms:
 *
 *   snap-p1        sluice's chunk reader, one reader: describe the table,
 *                  plan its chunks (sl__cdc_plan_chunks, primary key) and
 *                  read every chunk (sl__cdc_read_chunk: LOW, the chunk's
 *                  SELECT converted to sluice rows, HIGH)
 *   snap-p2        the same with two reader threads, each on its own
 *                  connection, taking chunks in order from a shared counter
 *   run-p1, run-p2 the snapshot through the source: `sluice run` of a
 *                  pipeline with a mariadb-cdc source in bounded snapshot
 *                  mode (`startup: snapshot`) and a null sink, parallelism
 *                  1 and 2; these arms run only when `sluice validate`
 *                  accepts that pipeline (else the report says why)
 *   dump           the limit: `mariadb-dump --single-transaction --quick`
 *                  of the table to /dev/null
 *
 * Crash to caught up (--what catchup, or all).  The binlog workload
 * above, then FLUSH BINARY LOGS (the binlog arms read the first file).
 * Arm:
 *
 *   catchup        `sluice run` of a mariadb-cdc source (startup: latest,
 *                  metadata: [position]) into a file sink (changelog), a
 *                  checkpoint every 200 ms; in its binlog phase with two
 *                  checkpoints completed, SIGKILL; a backlog of B changes
 *                  (cdc_gen, continuing the workload); G = the server's
 *                  GTID position; writes continue at CATCHUP_TPS
 *                  transactions per second; the seconds from the exec of
 *                  `sluice run --resume` until the file has the last row of
 *                  G's transaction (checked: its _position is in G, and
 *                  the run resumed from a checkpoint)
 *
 * Its limit is B over the sluice-binlog arm's rate in the same round (the
 * time sluice's binlog path alone needs to read B changes).
 *
 * Every arm's value is rows (or changes) per second over the whole
 * operation (connect to the last row).  Method as bench_db.c and
 * bench_kafka.c (bench/README.md): one harness fork per arm and round (W
 * warm-up and I measured runs in it), all arms of a round in a seeded
 * random order, a figure is the mean over rounds with a Student-t 95%
 * interval, a ratio has the harness's unpaired intervals (expanded
 * bootstrap, Fieller) and one paired by round.  Raw values in
 * DIR/cdc-raw.csv.
 *
 * usage: sluice-bench-cdc [--quick] [--what binlog|snapshot|both|catchup|all]
 *          [--rounds R] [--warmup W] [--iterations I] [--changes N]
 *          [--backlog B]
 *          [--txn-rows R] [--snapshot-rows M] [--chunk-rows C]
 *          [--pool-mb MB] [--seed S] [--out DIR] [--sluice PATH]
 *
 * Defaults: 5 rounds, 1 warm-up + 2 measured runs per fork, 1,000,000
 * changes in transactions of 100 rows, a 10,000,000-row snapshot table,
 * chunks of the planner's default size (8096 rows), an InnoDB buffer pool
 * of 2048 MB (the table fits), a backlog B of --changes, --what both (the
 * catch-up writes to the binlog, so it runs only when asked), output in
 * bench/results/cdc/.  --quick: 2 rounds, 0 + 1 runs, 20,000 changes (and
 * backlog), a 50,000-row table: a smoke run, not a figure.
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

#include "connectors/mariadb/binlog_decode.h"
#include "connectors/mariadb/binlog_reader.h"
#include "connectors/mariadb/cdc_int.h"
#include "harness.h"
#include "runutil.h"
#include "sl_servers.h"
#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* Options and shared state (read by the forked children).              */

#define MAX_ROUNDS 64

typedef struct opts_s {
  bool do_binlog, do_snapshot, do_catchup, is_quick;
  uint64_t rounds, warmup, iterations;
  uint64_t changes, txn_rows, snapshot_rows, chunk_rows, pool_mb, backlog;
  uint64_t seed;
  const char *out_dir;
  char sluice[PATH_MAX];
} opts_t;

static opts_t O;
static sl_server_t *srv;
static char work[512];
static char server_name[64]; /* "127.0.0.1:port", for messages */
static char first_binlog[256];
static char binlog_dir[PATH_MAX];
static uint64_t n_txn, n_ins, n_upd, n_del; /* per transaction: ins/upd/del */
static bool run_enabled;
static char run_skip_reason[1024];
static FILE *raw;

typedef enum kind_e {
  K_BL_SLUICE,
  K_BL_REMOTE,
  K_BL_FILE,
  K_BL_TRANSPORT,
  K_BL_DECODE,
  K_SNAP_CHUNKS,
  K_SNAP_RUN,
  K_SNAP_DUMP,
  K_CATCHUP
} kind_t;

typedef struct arm_s {
  const char *name;
  kind_t kind;
  int parallelism;      /* snapshot arms of sluice */
  double v[MAX_ROUNDS]; /* rows (changes) per second; NaN: none */
  size_t n_failed;
} arm_t;

static arm_t arms[] = {
    {.name = "sluice-binlog", .kind = K_BL_SLUICE},
    {.name = "mbl-remote", .kind = K_BL_REMOTE},
    {.name = "mbl-file", .kind = K_BL_FILE},
    {.name = "sl-transport", .kind = K_BL_TRANSPORT},
    {.name = "sl-decode", .kind = K_BL_DECODE},
    {.name = "snap-p1", .kind = K_SNAP_CHUNKS, .parallelism = 1},
    {.name = "snap-p2", .kind = K_SNAP_CHUNKS, .parallelism = 2},
    {.name = "run-p1", .kind = K_SNAP_RUN, .parallelism = 1},
    {.name = "run-p2", .kind = K_SNAP_RUN, .parallelism = 2},
    {.name = "dump", .kind = K_SNAP_DUMP},
    {.name = "catchup", .kind = K_CATCHUP},
};
#define N_ARMS (sizeof(arms) / sizeof(arms[0]))

static bool is_binlog_arm(const arm_t *a) { return a->kind <= K_BL_DECODE; }

static bool arm_enabled(const arm_t *a) {
  /* sluice-binlog is also the catch-up's limit (its rate, same round). */
  if (a->kind == K_BL_SLUICE) return O.do_binlog || O.do_catchup;
  if (a->kind == K_CATCHUP) return O.do_catchup;
  if (is_binlog_arm(a)) return O.do_binlog;
  if (a->kind == K_SNAP_RUN) return O.do_snapshot && run_enabled;
  return O.do_snapshot;
}

static arm_t *arm_named(const char *name) {
  for (size_t i = 0; i < N_ARMS; i++)
    if (strcmp(arms[i].name, name) == 0) return &arms[i];
  return NULL;
}

static int fail(sl_error_t *err, const char *what) {
  fprintf(stderr, "bench-cdc: %s: %s\n", what,
          err ? sl_error_message(err) : "failed");
  sl_error_destroy(err);
  return -1;
}

/* ------------------------------------------------------------------ */
/* The tables and the workload (in the parent, before the rounds).      */

/* The 12 columns of both tables, and their values for row number `seq`
 * (the SEQUENCE engine's column), version v (updates bump it). */
#define COLUMNS                                                             \
  "id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, "                        \
  "qty SMALLINT UNSIGNED NOT NULL, amount DECIMAL(12,2) NOT NULL, "         \
  "price DOUBLE NOT NULL, name VARCHAR(40) NOT NULL, code CHAR(8) NOT NULL, " \
  "note VARCHAR(100) NULL, created DATETIME(6) NOT NULL, day DATE NOT NULL, " \
  "flag TINYINT NOT NULL, payload VARBINARY(16) NULL"
#define VALUES_OF(S)                                                        \
  S ", MOD(" S ", 1000000), MOD(" S ", 65536), " S " / 100, " S " * 1.25, " \
  "CONCAT('customer-', " S "), LPAD(MOD(" S ", 100000), 8, '0'), "         \
  "IF(MOD(" S ", 3) = 0, NULL, REPEAT('n', MOD(" S ", 60))), "             \
  "TIMESTAMP('2024-01-01') + INTERVAL " S " SECOND, "                      \
  "DATE('2024-01-01') + INTERVAL MOD(" S ", 3000) DAY, MOD(" S ", 100), "   \
  "IF(MOD(" S ", 5) = 0, NULL, UNHEX(LPAD(HEX(" S "), 16, '0')))"

static int exec_all(MYSQL *c, const char *const *sql, sl_error_t **err) {
  for (int i = 0; sql[i]; i++) {
    int rc = sl_my_exec(c, sql[i], NULL, err);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

/*
 * The binlog workload: table cdc_bl with the first transaction's rows to
 * update and delete, a procedure cdc_gen(t0, nt) that runs transactions
 * t0 .. t0+nt-1, RESET MASTER, cdc_gen(0, n_txn).  Transaction t inserts
 * ids (t+1)*I+1 .. (t+2)*I, updates ids t*I+1 .. t*I+U and deletes the
 * next D ids, so a later call cdc_gen(n_txn, k) continues the same
 * workload (a backlog for a catch-up measurement).
 */
static int make_binlog(MYSQL *c, sl_error_t **err) {
  char sql[4096];
  const char *pre[] = {"DROP TABLE IF EXISTS cdc_bl",
                       "DROP PROCEDURE IF EXISTS cdc_gen",
                       "CREATE TABLE cdc_bl (" COLUMNS ") ENGINE=InnoDB", NULL};
  int rc = exec_all(c, pre, err);
  if (rc != SL_OK) return rc;
  snprintf(sql, sizeof(sql),
           "INSERT INTO cdc_bl SELECT " VALUES_OF("seq") " FROM seq_1_to_%"
           PRIu64, n_ins);
  if ((rc = sl_my_exec(c, sql, NULL, err)) != SL_OK) return rc;
  snprintf(sql, sizeof(sql),
           "CREATE PROCEDURE cdc_gen(IN t0 BIGINT, IN nt BIGINT) BEGIN "
           "DECLARE t BIGINT DEFAULT t0; DECLARE b, o BIGINT; "
           "WHILE t < t0 + nt DO "
           "SET b = t * %" PRIu64 ", o = b + %" PRIu64 "; "
           "START TRANSACTION; "
           "INSERT INTO cdc_bl SELECT " VALUES_OF("(o + seq)")
           " FROM seq_1_to_%" PRIu64 "; "
           "UPDATE cdc_bl SET k = k + 1, amount = amount + 1, "
           "name = CONCAT(name, '+'), created = created + INTERVAL 1 SECOND "
           "WHERE id BETWEEN b + 1 AND b + %" PRIu64 "; "
           "DELETE FROM cdc_bl WHERE id BETWEEN b + %" PRIu64
           " AND b + %" PRIu64 "; "
           "COMMIT; SET t = t + 1; END WHILE; END",
           n_ins, n_ins, n_ins, n_upd, n_upd + 1, n_upd + n_del);
  if ((rc = sl_my_exec(c, sql, NULL, err)) != SL_OK) return rc;
  if ((rc = sl_my_exec(c, "RESET MASTER", NULL, err)) != SL_OK) return rc;
  snprintf(sql, sizeof(sql), "CALL cdc_gen(0, %" PRIu64 ")", n_txn);
  int64_t t0 = sl_bench_now_ns();
  if ((rc = sl_my_exec(c, sql, NULL, err)) != SL_OK) return rc;
  double s = (double)(sl_bench_now_ns() - t0) / 1e9;
  char *first = NULL, *pos = NULL;
  if ((rc = sl_my_query_text(c, "SELECT @@gtid_binlog_pos", &pos, err)) !=
      SL_OK)
    return rc;
  /* SHOW BINARY LOGS: the first file of the first row. */
  if (mysql_query(c, "SHOW BINARY LOGS") != 0)
    return sl_error_set(err, SL_EIO, "SHOW BINARY LOGS: %s", mysql_error(c));
  MYSQL_RES *res = mysql_store_result(c);
  MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
  uint64_t bytes = 0;
  int n_files = 0;
  if (row && row[0]) first = strdup(row[0]);
  for (; row; row = mysql_fetch_row(res), n_files++)
    bytes += row[1] ? strtoull(row[1], NULL, 10) : 0;
  if (res) mysql_free_result(res);
  if (first == NULL) {
    sl_free(pos);
    return sl_error_set(err, SL_EIO, "SHOW BINARY LOGS: no binlog");
  }
  snprintf(first_binlog, sizeof(first_binlog), "%s", first);
  free(first);
  printf("# binlog: %" PRIu64 " changes (%" PRIu64 " transactions of %" PRIu64
         " inserts, %" PRIu64 " updates, %" PRIu64 " deletes) written in "
         "%.1f s; %d file(s), %.1f MB, GTID position %s\n",
         O.changes, n_txn, n_ins, n_upd, n_del, s, n_files,
         (double)bytes / 1e6, pos);
  sl_free(pos);
  fprintf(raw, "#binlog-write-s,%.3f\n", s);
  return SL_OK;
}

/*
 * The limit reads the same changes: mariadb-binlog's row lines (### INSERT
 * INTO, ### UPDATE, ### DELETE FROM) counted once, untimed, must be the
 * N changes by kind.
 */
static int check_limit_counts(void) {
  char cmd[PATH_MAX + 512], out[PATH_MAX], log[PATH_MAX];
  snprintf(out, sizeof(out), "%s/mbl-count.txt", work);
  snprintf(log, sizeof(log), "%s/mbl-count.log", work);
  snprintf(cmd, sizeof(cmd),
           "mariadb-binlog --no-defaults --read-from-remote-server "
           "--host=127.0.0.1 --port=%d --user=%s "
           "--base64-output=decode-rows --verbose %s | "
           "awk '/^### INSERT INTO/{i++} /^### UPDATE/{u++} "
           "/^### DELETE FROM/{d++} END{print i+0, u+0, d+0}'",
           sl_server_port(srv), sl_server_user(srv), first_binlog);
  char *argv[] = {"sh", "-c", cmd, NULL};
  unsigned long long i = 0, u = 0, d = 0;
  int st = sl_bench_spawn_wait(argv, out, log);
  FILE *f = fopen(out, "r");
  int k = f ? fscanf(f, "%llu %llu %llu", &i, &u, &d) : 0;
  if (f) fclose(f);
  if (st != 0 || k != 3 || i != n_txn * n_ins || u != n_txn * n_upd ||
      d != n_txn * n_del) {
    fprintf(stderr,
            "bench-cdc: mariadb-binlog shows %llu inserts, %llu updates, "
            "%llu deletes (exit %d); expected %" PRIu64 ", %" PRIu64
            ", %" PRIu64 "\n",
            i, u, d, st, n_txn * n_ins, n_txn * n_upd, n_txn * n_del);
    return -1;
  }
  printf("# mariadb-binlog shows the same changes: %llu inserts, %llu "
         "updates, %llu deletes\n", i, u, d);
  return 0;
}

/*
 * A diagnostic of the chunk reader's LOW: MariaDB 10.11 answers
 * BINLOG_GTID_POS(file, offset) by reading the binlog file from its start
 * to offset, so every chunk pays for the size of the current binlog file.
 * The median of 5 calls at the end of the current file, in ms.
 */
static void time_gtid_pos(MYSQL *c) {
  if (mysql_query(c, "SHOW MASTER STATUS") != 0) return;
  MYSQL_RES *res = mysql_store_result(c);
  MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
  char sql[512] = "";
  if (row && row[0] && row[1])
    snprintf(sql, sizeof(sql), "SELECT BINLOG_GTID_POS('%s', %s)", row[0],
             row[1]);
  char file[256] = "";
  unsigned long long size = row && row[1] ? strtoull(row[1], NULL, 10) : 0;
  if (row && row[0]) snprintf(file, sizeof(file), "%s", row[0]);
  if (res) mysql_free_result(res);
  if (sql[0] == '\0') return;
  double ms[5];
  for (int i = 0; i < 5; i++) {
    int64_t t0 = sl_bench_now_ns();
    if (mysql_query(c, sql) != 0) return;
    MYSQL_RES *r = mysql_store_result(c);
    if (r) mysql_free_result(r);
    ms[i] = (double)(sl_bench_now_ns() - t0) / 1e6;
  }
  sl_bench_sort(ms, 5);
  printf("# the snapshot's LOW: BINLOG_GTID_POS at the end of %s (%.1f MB) "
         "takes %.2f ms (median of 5; min %.2f, max %.2f); every chunk "
         "pays it\n",
         file, (double)size / 1e6, ms[2], ms[0], ms[4]);
  fprintf(raw, "#gtid-pos-ms,%llu,%.3f\n", size, ms[2]);
}

/*
 * After a rotation MariaDB writes a BINLOG_CHECKPOINT event naming the new
 * file into it once the older files' transactions are durable, a while
 * later.  A snapshot chunk whose LOW is before that event and HIGH after
 * it, with nothing after it, fails its backfill ("did not reach the
 * chunk's HIGH"; the stream's position stays before the event), so the
 * arms start after it.  Waits at most 60 s.
 */
static void wait_binlog_checkpoint(MYSQL *c) {
  char file[256] = "", sql[320];
  if (mysql_query(c, "SHOW MASTER STATUS") != 0) return;
  MYSQL_RES *res = mysql_store_result(c);
  MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
  if (row && row[0]) snprintf(file, sizeof(file), "%s", row[0]);
  if (res) mysql_free_result(res);
  snprintf(sql, sizeof(sql), "SHOW BINLOG EVENTS IN '%s'", file);
  int64_t t0 = sl_bench_now_ns();
  while (sl_bench_now_ns() - t0 < 60 * (int64_t)1000000000) {
    bool found = false;
    if (mysql_query(c, sql) != 0) return;
    res = mysql_store_result(c);
    while (res && !found && (row = mysql_fetch_row(res)) != NULL)
      found = row[2] && row[5] && strcmp(row[2], "Binlog_checkpoint") == 0 &&
              strcmp(row[5], file) == 0;
    if (res) mysql_free_result(res);
    if (found) {
      printf("# %s has its binlog checkpoint after %.2f s\n", file,
             (double)(sl_bench_now_ns() - t0) / 1e9);
      return;
    }
    nanosleep(&(struct timespec){0, 50000000}, NULL);
  }
  printf("# WARNING: no binlog checkpoint in %s within 60 s\n", file);
}

/* The snapshot table, in batches of 1 M rows, not binlogged. */
static int make_snapshot_table(MYSQL *c, sl_error_t **err) {
  const char *pre[] = {"SET SESSION sql_log_bin = 0",
                       "DROP TABLE IF EXISTS cdc_snap",
                       "CREATE TABLE cdc_snap (" COLUMNS ") ENGINE=InnoDB",
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
             "INSERT INTO cdc_snap SELECT " VALUES_OF("seq") " FROM seq_%"
             PRIu64 "_to_%" PRIu64, lo, hi);
    if ((rc = sl_my_exec(c, sql, NULL, err)) != SL_OK) return rc;
  }
  double s = (double)(sl_bench_now_ns() - t0) / 1e9;
  int64_t bytes = 0;
  (void)sl_my_exec(c, "ANALYZE TABLE cdc_snap", NULL, err);
  sl_error_destroy(*err);
  *err = NULL;
  (void)sl_my_query_int64(c,
                          "SELECT data_length + index_length FROM "
                          "information_schema.TABLES WHERE table_name = "
                          "'cdc_snap' AND table_schema = DATABASE()",
                          &bytes, err);
  sl_error_destroy(*err);
  *err = NULL;
  printf("# snapshot table: %" PRIu64 " rows loaded in %.1f s (%.0f rows/s; "
         "INSERT ... SELECT from the SEQUENCE engine, batches of 1,000,000, "
         "sql_log_bin=0); about %.0f MB in InnoDB\n",
         O.snapshot_rows, s, (double)O.snapshot_rows / s, (double)bytes / 1e6);
  fprintf(raw, "#snapshot-load-s,%.3f\n", s);
  return sl_my_exec(c, "SET SESSION sql_log_bin = 1", NULL, err);
}

/* ------------------------------------------------------------------ */
/* sluice's binlog path: transport + decoder + rows, to the end.        */

typedef struct mapper_s {
  uint64_t table_id;
  uint32_t n_cols;
  sl_schema_t *schema;
  sl_row_builder_t b;
  bool has_b;
  sl_binlog_value_t *before, *after;
} mapper_t;

static void mapper_close(mapper_t *m) {
  if (m->has_b) sl_row_builder_close(&m->b);
  if (m->schema) sl_schema_unref(m->schema);
  free(m->before);
  free(m->after);
  memset(m, 0, sizeof(*m));
}

/* The schema and builder of t (rebuilt when the table id or its column
 * count changes, as a new TABLE_MAP id follows DDL). */
static int mapper_for(mapper_t *m, const sl_binlog_table_t *t,
                      sl_error_t **err) {
  if (m->schema && m->table_id == t->table_id && m->n_cols == t->n_cols)
    return SL_OK;
  mapper_close(m);
  int rc = sl__binlog_table_schema(t, &m->schema, err);
  if (rc != SL_OK) return rc;
  if ((rc = sl_row_builder_init(&m->b, m->schema)) != SL_OK)
    return sl_error_set(err, rc, "row builder");
  m->has_b = true;
  m->before = calloc(t->n_cols, sizeof(sl_binlog_value_t));
  m->after = calloc(t->n_cols, sizeof(sl_binlog_value_t));
  if (!m->before || !m->after) return sl_error_set(err, SL_ENOMEM, "values");
  m->table_id = t->table_id;
  m->n_cols = t->n_cols;
  return SL_OK;
}

/* How far sluice's path goes: the whole path (the arm), or a diagnostic
 * prefix of it (where its time goes). */
typedef enum level_e {
  L_TRANSPORT = 0, /* the raw events only */
  L_DECODE = 1,    /* + every event and row image decoded */
  L_MAP = 2        /* + every image a sluice row (the arm) */
} level_t;

static int binlog_sluice(int run, level_t level, double *out_value,
                         sl_error_t **err) {
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(srv),
                               .user = sl_server_user(srv),
                               .server_id = 7000u + (uint32_t)run,
                               .gtid_start = "",
                               .is_non_blocking = true};
  sl_binlog_reader_t *r = NULL;
  sl_binlog_decoder_t d;
  mapper_t m;
  memset(&m, 0, sizeof(m));
  sl_bytes_t scratch;
  sl_bytes_init(&scratch);
  sl_binlog_gtid_state_t gs;
  memset(&gs, 0, sizeof(gs));
  uint64_t n[3] = {0, 0, 0}, n_rows_out = 0, row_bytes = 0;
  int64_t t0 = sl_bench_now_ns();
  int rc = sl__binlog_reader_open(&o, &r, err);
  if (rc != SL_OK) return rc;
  sl__binlog_decoder_init(&d, sl__binlog_reader_checksum(r));
  for (;;) {
    const uint8_t *p;
    size_t len;
    rc = sl__binlog_reader_next(r, &p, &len, err);
    if (rc == SL_ENOTFOUND) {
      rc = SL_OK;
      break;
    }
    if (rc != SL_OK) break;
    /* The first binlog file only: it holds exactly the workload (the
     * catch-up arm writes to the next ones).  Its closing ROTATE is not
     * artificial, unlike the one the server sends first. */
    if (len > 18 && p[4] == SL_BLE_ROTATE &&
        (p[17] & SL_BLF_ARTIFICIAL) == 0)
      break;
    if (level == L_TRANSPORT) {
      /* Count the row events' rows by their headers' type only. */
      uint8_t ty = len > 4 ? p[4] : 0;
      if (ty == SL_BLE_GTID) n[0]++;
      continue;
    }
    sl_binlog_event_t ev;
    if ((rc = sl__binlog_decode(&d, p, len, &ev, err)) != SL_OK) break;
    if (ev.type == SL_BLE_GTID) {
      if ((rc = sl__binlog_gtid_state_update(&gs, &ev.u.gtid.gtid)) != SL_OK)
        break;
      continue;
    }
    if (ev.type != SL_BLE_WRITE_ROWS_V1 && ev.type != SL_BLE_UPDATE_ROWS_V1 &&
        ev.type != SL_BLE_DELETE_ROWS_V1 && ev.type != SL_BLE_WRITE_ROWS_V2 &&
        ev.type != SL_BLE_UPDATE_ROWS_V2 && ev.type != SL_BLE_DELETE_ROWS_V2)
      continue;
    const sl_binlog_table_t *t = ev.u.rows.table;
    if (t == NULL) {
      rc = sl_error_set(err, SL_ECORRUPT, "a rows event without its table");
      break;
    }
    if ((rc = mapper_for(&m, t, err)) != SL_OK) break;
    sl_binlog_rows_iter_t it;
    sl__binlog_rows_begin(&it, &ev);
    uint8_t kind = ev.u.rows.kind;
    while ((rc = sl__binlog_rows_next(&d, &it, m.before, m.after, err)) ==
           SL_OK) {
      if (level == L_DECODE) {
        n[kind < 3 ? kind : 2]++;
        continue;
      }
      sl_row_t row;
      if (kind == 1) {
        rc = sl__binlog_image_to_row(t, m.before, SL_ROW_UPDATE_BEFORE, &m.b,
                                     &scratch, &row, err);
        if (rc != SL_OK) break;
        row_bytes += row.len;
        n_rows_out++;
      }
      rc = sl__binlog_image_to_row(t, kind == 2 ? m.before : m.after,
                                   kind == 0   ? SL_ROW_INSERT
                                   : kind == 1 ? SL_ROW_UPDATE_AFTER
                                               : SL_ROW_DELETE,
                                   &m.b, &scratch, &row, err);
      if (rc != SL_OK) break;
      row_bytes += row.len;
      n_rows_out++;
      n[kind < 3 ? kind : 2]++;
    }
    if (rc == SL_ENOTFOUND) rc = SL_OK;
    if (rc != SL_OK) break;
  }
  int64_t t1 = sl_bench_now_ns();
  sl__binlog_decoder_close(&d);
  sl__binlog_reader_close(r);
  mapper_close(&m);
  sl_bytes_close(&scratch);
  if (rc != SL_OK) return rc;
  if (level == L_TRANSPORT) {
    if (n[0] != n_txn)
      return sl_error_set(err, SL_EFAILED,
                          "%" PRIu64 " transactions read, %" PRIu64
                          " expected", n[0], n_txn);
    *out_value = (double)O.changes / ((double)(t1 - t0) / 1e9);
    return SL_OK;
  }
  uint64_t want[3] = {n_txn * n_ins, n_txn * n_upd, n_txn * n_del};
  if (n[0] != want[0] || n[1] != want[1] || n[2] != want[2] || gs.n != 1 ||
      gs.g[0].seq != n_txn)
    return sl_error_set(err, SL_EFAILED,
                        "decoded %" PRIu64 " inserts, %" PRIu64
                        " updates, %" PRIu64 " deletes in %" PRIu64
                        " transactions; expected %" PRIu64 ", %" PRIu64
                        ", %" PRIu64 " in %" PRIu64,
                        n[0], n[1], n[2], gs.n ? gs.g[0].seq : 0, want[0],
                        want[1], want[2], n_txn);
  (void)row_bytes;
  *out_value = (double)O.changes / ((double)(t1 - t0) / 1e9);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* sluice's chunk reader on P threads.                                   */

typedef struct snap_s {
  const sl__cdc_table_t *t;
  const sl__cdc_chunks_t *cl;
  atomic_uint next;
  atomic_uint_fast64_t rows;
  atomic_int failed;
  char msg[1024];
  pthread_mutex_t mu;
} snap_t;

static void *snap_worker(void *arg) {
  snap_t *s = arg;
  sl_error_t *err = NULL;
  MYSQL *c = NULL;
  int rc = sl__cdc_connect("127.0.0.1", sl_server_port(srv),
                           sl_server_user(srv), NULL, 0, &c, &err);
  while (rc == SL_OK && !atomic_load(&s->failed)) {
    unsigned i = atomic_fetch_add(&s->next, 1);
    if (i >= s->cl->n) break;
    sl__cdc_rows_t rows;
    sl__cdc_rows_init(&rows, s->t->schema);
    sl__cdc_pos_t low, high;
    /* LOW as the source takes it: file and offset, no BINLOG_GTID_POS. */
    rc = sl__cdc_read_chunk_ex(c, server_name, s->t, s->cl,
                               &s->cl->chunks[i], SL_CDC_READ_NO_LOW_GTID,
                               &low, &high, &rows, &err);
    if (rc == SL_OK) atomic_fetch_add(&s->rows, rows.n);
    sl__cdc_rows_close(&rows);
  }
  if (rc != SL_OK) {
    pthread_mutex_lock(&s->mu);
    if (!atomic_exchange(&s->failed, 1))
      snprintf(s->msg, sizeof(s->msg), "%s",
               err ? sl_error_message(err) : "failed");
    pthread_mutex_unlock(&s->mu);
  }
  sl_error_destroy(err);
  if (c) mysql_close(c);
  return NULL;
}

static int snapshot_chunks(int parallelism, double *out_value,
                           sl_error_t **err) {
  MYSQL *c = NULL;
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = NULL;
  int64_t t0 = sl_bench_now_ns();
  int rc = sl__cdc_connect("127.0.0.1", sl_server_port(srv),
                           sl_server_user(srv), NULL, 0, &c, err);
  if (rc == SL_OK)
    rc = sl__cdc_table_describe(c, server_name, sl_server_dbname(srv),
                                "cdc_snap", NULL, &t, err);
  sl__cdc_plan_opts_t po = {.chunk_rows = O.chunk_rows};
  bool is_even = false;
  if (rc == SL_OK)
    rc = sl__cdc_plan_chunks(c, server_name, t, &po, &cl, &is_even, err);
  if (c) mysql_close(c);
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
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The snapshot through the source: `sluice run` of a pipeline.          */

static void run_pipeline_path(int parallelism, char *path, size_t size) {
  snprintf(path, size, "%s/snapshot-p%d.yaml", work, parallelism);
}

/* A mariadb-cdc source in bounded snapshot mode into a null sink.  The
 * source's keys are those of the coordinator's design (host, port, user,
 * tables, startup: snapshot, chunk_rows); if the source names them
 * otherwise, this text is the one place to change.  `sluice validate`
 * decides whether the arms run (probe_run), and the report says why when
 * it does not. */
static int write_run_pipeline(int parallelism) {
  char path[PATH_MAX], y[2048];
  run_pipeline_path(parallelism, path, sizeof(path));
  snprintf(y, sizeof(y),
           "# sluice-bench-cdc: the snapshot through the source (generated)\n"
           "name: cdc-snapshot-p%d\n"
           "parallelism: %d\n"
           "checkpoint:\n"
           "  dir: %s/ck-p%d\n"
           "  interval_ms: 1000\n"
           "source:\n"
           "  type: mariadb-cdc\n"
           "  uid: cdc\n"
           "  host: 127.0.0.1\n"
           "  port: %d\n"
           "  user: %s\n"
           "  tables: [%s.cdc_snap]\n"
           "  startup: snapshot\n"
           "  chunk_rows: %" PRIu64 "\n"
           "sink:\n"
           "  type: null\n",
           parallelism, parallelism, work, parallelism, sl_server_port(srv),
           sl_server_user(srv),
           sl_server_dbname(srv), O.chunk_rows ? O.chunk_rows : 8096);
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

static void probe_run(void) {
  char path[PATH_MAX], log[PATH_MAX + 32];
  run_enabled = false;
  if (write_run_pipeline(1) != 0 || write_run_pipeline(2) != 0) {
    snprintf(run_skip_reason, sizeof(run_skip_reason),
             "cannot write the pipelines");
    return;
  }
  run_pipeline_path(1, path, sizeof(path));
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
#define CATCHUP_JOB "cdc-catchup"

/* The next transaction number t of the workload (cdc_gen(t, n)): the
 * last one inserted ids up to (t+1) * inserts. */
static int next_txn(MYSQL *c, int64_t *t, sl_error_t **err) {
  char sql[128];
  snprintf(sql, sizeof(sql), "SELECT MAX(id) DIV %" PRIu64 " - 1 FROM cdc_bl",
           n_ins);
  return sl_my_query_int64(c, sql, t, err);
}

/* Writes continuing at a fixed rate while the job catches up. */
typedef struct cwriter_s {
  int64_t t;
  atomic_bool stop;
  int rc;
  char msg[512];
} cwriter_t;

static void *cwriter_main(void *arg) {
  cwriter_t *w = arg;
  mysql_thread_init();
  MYSQL *c = NULL;
  sl_error_t *err = NULL;
  w->rc = sl_my_connect(srv, sl_server_port(srv), &c, &err);
  int64_t next = sl_bench_now_ns();
  while (w->rc == SL_OK && !atomic_load(&w->stop)) {
    char sql[96];
    snprintf(sql, sizeof(sql), "CALL cdc_gen(%" PRId64 ", 1)", w->t++);
    w->rc = sl_my_exec(c, sql, NULL, &err);
    next += 1000000000 / CATCHUP_TPS;
    int64_t d = next - sl_bench_now_ns();
    if (d > 0) nanosleep(&(struct timespec){d / 1000000000, d % 1000000000},
                         NULL);
  }
  if (w->rc != SL_OK)
    snprintf(w->msg, sizeof(w->msg), "%s", sl_error_message(err));
  sl_error_destroy(err);
  if (c) mysql_close(c);
  mysql_thread_end();
  return NULL;
}

static bool file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[1024];
  bool has = false;
  while (f && !has && fgets(line, sizeof(line), f)) has = strstr(line, needle);
  if (f) fclose(f);
  return has;
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
 * *off, a line start); the line in *line (malloc'd). */
static bool out_has_line(const char *out, off_t *off, const char *needle,
                         char **line) {
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
      if (strncmp(buf, needle, strlen(needle)) == 0) {
        *line = strdup(buf);
        found = true;
      }
    }
  free(buf);
  fclose(f);
  return found;
}

/*
 * One crash and catch-up: the job (startup: latest, metadata: [position],
 * a file sink, a checkpoint every 200 ms) runs until it is in its binlog
 * phase and two checkpoints completed; SIGKILL; a backlog of B changes
 * (cdc_gen); G = the server's GTID position; writes continue at
 * CATCHUP_TPS transactions per second; `sluice run --resume`; the time
 * from its exec until the file has the last row of G's transaction (the
 * -D of its last deleted id, whose _position must be in G).
 */
static int catchup(int iter, double *out_value, sl_error_t **err) {
  char dir[PATH_MAX], yaml[PATH_MAX + 16], out[PATH_MAX + 16],
      ck[PATH_MAX + 32], log1[PATH_MAX + 16], log2[PATH_MAX + 16], y[2 * PATH_MAX + 1024];
  snprintf(dir, sizeof(dir), "%s/catchup-%d-%d", work, (int)getpid(), iter);
  snprintf(yaml, sizeof(yaml), "%s/job.yaml", dir);
  snprintf(out, sizeof(out), "%s/out.csv", dir);
  snprintf(ck, sizeof(ck), "%s/ck/" CATCHUP_JOB, dir);
  snprintf(log1, sizeof(log1), "%s/run1.log", dir);
  snprintf(log2, sizeof(log2), "%s/run2.log", dir);
  if (mkdir(dir, 0755) != 0)
    return sl_error_set(err, SL_EIO, "mkdir %s: %s", dir, strerror(errno));
  snprintf(y, sizeof(y),
           "name: " CATCHUP_JOB "\n"
           "checkpoint: {dir: %s/ck, interval_ms: 200}\n"
           "source:\n"
           "  type: mariadb-cdc\n"
           "  uid: cdc\n"
           "  host: 127.0.0.1\n"
           "  port: %d\n"
           "  user: %s\n"
           "  tables: [%s.cdc_bl]\n"
           "  startup: latest\n"
           "  heartbeat: 1s\n"
           "  metadata: [position]\n"
           "sink: {type: file, path: %s, changelog: true}\n",
           dir, sl_server_port(srv), sl_server_user(srv),
           sl_server_dbname(srv), out);
  if (sl_bench_write_file(yaml, y) != 0)
    return sl_error_set(err, SL_EIO, "cannot write %s", yaml);
  MYSQL *c = NULL;
  int rc = sl_my_connect(srv, sl_server_port(srv), &c, err);
  if (rc != SL_OK) return rc;
  cwriter_t w = {.rc = SL_OK};
  atomic_init(&w.stop, false);
  bool has_writer = false;
  char *a1[] = {O.sluice, "run", yaml, "--quiet", NULL};
  char *a2[] = {O.sluice, "run", yaml, "--resume", "--quiet", NULL};
  pid_t pid = sl_bench_spawn(a1, "/dev/null", log1);
  const char *log = log1;
  int64_t t0 = sl_bench_now_ns(), tlim = t0 + 300 * (int64_t)1000000000;
  /* In the binlog phase, with two checkpoints completed after it (the
   * second was triggered after the phase started). */
  uint64_t k = 0;
  for (int n = -1; rc == SL_OK && n < 2;) { /* -1: not in the phase yet */
    if ((rc = alive(&pid, log, err)) != SL_OK) break;
    if (n < 0 && file_has(log1, "the binlog phase starts")) {
      n = 0;
      k = newest_checkpoint(ck);
    } else if (n >= 0 && newest_checkpoint(ck) > k) {
      n++;
      k = newest_checkpoint(ck);
    }
    if (sl_bench_now_ns() > tlim)
      rc = sl_error_set(err, SL_EFAILED, "no checkpoint in the binlog "
                        "phase within 300 s; see %s", log1);
    nanosleep(&(struct timespec){0, 5000000}, NULL);
  }
  if (pid > 0) {
    kill(pid, SIGKILL);
    sl_bench_wait(pid);
    pid = -1;
  }
  /* The backlog, G, and the row that shows G written. */
  int64_t t = 0;
  char *g = NULL, needle[64], at[96];
  uint64_t nb = O.backlog / O.txn_rows;
  if (rc == SL_OK) rc = next_txn(c, &t, err);
  if (rc == SL_OK) {
    snprintf(y, sizeof(y), "CALL cdc_gen(%" PRId64 ", %" PRIu64 ")", t, nb);
    rc = sl_my_exec(c, y, NULL, err);
  }
  if (rc == SL_OK)
    rc = sl_my_query_text(c, "SELECT @@gtid_binlog_pos", &g, err);
  if (rc == SL_OK) {
    snprintf(needle, sizeof(needle), "-D,%" PRIu64 ",",
             (uint64_t)(t + (int64_t)nb - 1) * n_ins + n_upd + n_del);
    snprintf(at, sizeof(at), ",%s:", g);
    w.t = t + (int64_t)nb;
    pthread_t th;
    has_writer = pthread_create(&th, NULL, cwriter_main, &w) == 0;
    if (!has_writer) rc = sl_error_set(err, SL_EFAILED, "writer thread");
    off_t off = 0;
    char *line = NULL;
    t0 = sl_bench_now_ns();
    tlim = t0 + 300 * (int64_t)1000000000;
    pid = sl_bench_spawn(a2, "/dev/null", log = log2);
    while (rc == SL_OK && !out_has_line(out, &off, needle, &line)) {
      if ((rc = alive(&pid, log, err)) != SL_OK) break;
      if (w.rc != SL_OK)
        rc = sl_error_set(err, SL_EFAILED, "writer: %s", w.msg);
      else if (sl_bench_now_ns() > tlim)
        rc = sl_error_set(err, SL_EFAILED, "%s not written within 300 s "
                          "(needle '%s'); see %s and %s", g, needle, out,
                          log2);
      else
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    int64_t t1 = sl_bench_now_ns();
    if (rc == SL_OK && strstr(line, at) == NULL)
      rc = sl_error_set(err, SL_EFAILED, "the row %s has not G's position "
                        "%s: %s", needle, g, line);
    if (rc == SL_OK && !file_has(log2, "resuming from checkpoint "))
      rc = sl_error_set(err, SL_EFAILED, "the run did not resume; see %s",
                        log2);
    if (rc == SL_OK) *out_value = (double)(t1 - t0) / 1e9;
    free(line);
    atomic_store(&w.stop, true);
    if (has_writer) pthread_join(th, NULL);
  }
  if (pid > 0) {
    kill(pid, SIGKILL);
    sl_bench_wait(pid);
  }
  sl_free(g);
  mysql_close(c);
  if (rc == SL_OK || !getenv("SL_TEST_KEEP")) sl_bench_rm_rf(dir);
  return rc;
}

/* ------------------------------------------------------------------ */
/* One harness iteration = one whole read.                              */

static int run_tool(const arm_t *a, char *const argv[]) {
  char log[PATH_MAX + 64];
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir, a->name);
  int st = sl_bench_spawn_wait(argv, "/dev/null", log);
  if (st != 0)
    fprintf(stderr, "bench-cdc: %s: `%s` exited with %d; see %s\n", a->name,
            argv[0], st, log);
  return st;
}

static int run_iter(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  arm_t *a = arg;
  sl_error_t *err = NULL;
  char port[16], db_arg[64];
  snprintf(port, sizeof(port), "%d", sl_server_port(srv));
  snprintf(db_arg, sizeof(db_arg), "%s", sl_server_dbname(srv));
  int64_t t0 = sl_bench_now_ns();
  double n = 0;
  switch (a->kind) {
  case K_BL_SLUICE:
  case K_BL_TRANSPORT:
  case K_BL_DECODE: {
    level_t lv = a->kind == K_BL_SLUICE      ? L_MAP
                 : a->kind == K_BL_DECODE    ? L_DECODE
                                             : L_TRANSPORT;
    /* A replica id of its own per read (MariaDB drops an older
     * connection of the same id). */
    if (binlog_sluice((int)(getpid() % 10000) * 100 + ctx->iteration, lv,
                      out_value, &err) != SL_OK)
      return fail(err, a->name);
    return 0;
  }
  case K_CATCHUP:
    if (catchup(ctx->iteration, out_value, &err) != SL_OK)
      return fail(err, a->name);
    return 0;
  case K_SNAP_CHUNKS:
    if (snapshot_chunks(a->parallelism, out_value, &err) != SL_OK)
      return fail(err, a->name);
    return 0;
  case K_BL_REMOTE: {
    char *argv[] = {"mariadb-binlog", "--no-defaults",
                    "--read-from-remote-server", "--host=127.0.0.1",
                    "--port", port, "--user", (char *)sl_server_user(srv),
                    "--base64-output=decode-rows", "--verbose",
                    first_binlog, NULL};
    if (run_tool(a, argv) != 0) return -1;
    n = (double)O.changes;
    break;
  }
  case K_BL_FILE: {
    char path[PATH_MAX + 300];
    snprintf(path, sizeof(path), "%s/%s", binlog_dir, first_binlog);
    char *argv[] = {"mariadb-binlog", "--no-defaults",
                    "--base64-output=decode-rows", "--verbose", path, NULL};
    if (run_tool(a, argv) != 0) return -1;
    n = (double)O.changes;
    break;
  }
  case K_SNAP_DUMP: {
    char *argv[] = {"mariadb-dump", "--no-defaults", "--single-transaction",
                    "--quick", "--host=127.0.0.1", "--port", port, "--user",
                    (char *)sl_server_user(srv), db_arg, "cdc_snap", NULL};
    if (run_tool(a, argv) != 0) return -1;
    n = (double)O.snapshot_rows;
    break;
  }
  case K_SNAP_RUN: {
    char path[PATH_MAX], ck[PATH_MAX], mj[PATH_MAX];
    run_pipeline_path(a->parallelism, path, sizeof(path));
    snprintf(ck, sizeof(ck), "%s/ck-p%d", work, a->parallelism);
    snprintf(mj, sizeof(mj), "%s/metrics-p%d.json", work, a->parallelism);
    sl_bench_rm_rf(ck);
    unlink(mj);
    t0 = sl_bench_now_ns();
    char *argv[] = {O.sluice, "run", path, "--quiet", "--metrics-json", mj,
                    NULL};
    if (run_tool(a, argv) != 0) return -1;
    double t1 = (double)sl_bench_now_ns();
    /* Only a run that read every row counts. */
    uint64_t got = 0;
    if (source_rows_out(mj, &got) != 0 || got != O.snapshot_rows) {
      fprintf(stderr, "bench-cdc: %s: the source emitted %" PRIu64
              " rows (metrics in %s), expected %" PRIu64 "\n",
              a->name, got, mj, O.snapshot_rows);
      return -1;
    }
    *out_value = (double)O.snapshot_rows / ((t1 - (double)t0) / 1e9);
    return 0;
  }
  }
  *out_value = n / ((double)(sl_bench_now_ns() - t0) / 1e9);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Reporting.                                                           */

static void report(void) {
  if (O.do_binlog) {
    printf("\n== binlog decoding: %" PRIu64 " changes in transactions of %"
           PRIu64 " rows; fork = %" PRIu64 " warm-up + %" PRIu64
           " measured reads; k changes/s ==\n",
           O.changes, O.txn_rows, O.warmup, O.iterations);
    sl_bench_print_stat("sluice-binlog", 22, arm_named("sluice-binlog")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    sl_bench_print_stat("mariadb-binlog remote", 22,
                        arm_named("mbl-remote")->v, O.rounds, 1e-3, "k/s",
                        "rounds");
    sl_bench_print_stat("mariadb-binlog file", 22, arm_named("mbl-file")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    printf(" diagnostic: sluice's path cut short (where its time goes)\n");
    sl_bench_print_stat("transport only", 22, arm_named("sl-transport")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    sl_bench_print_stat("transport + decode", 22, arm_named("sl-decode")->v,
                        O.rounds, 1e-3, "k/s", "rounds");
    printf("\n== binlog: ratios of mean changes/s, 95%% intervals ==\n");
    sl_bench_print_ratio("sluice/remote", 22, arm_named("sluice-binlog")->v,
                         arm_named("mbl-remote")->v, O.rounds, O.seed,
                         "rounds");
    sl_bench_print_ratio("sluice/file", 22, arm_named("sluice-binlog")->v,
                         arm_named("mbl-file")->v, O.rounds, O.seed,
                         "rounds");
    sl_bench_print_ratio("sluice/transport", 22,
                         arm_named("sluice-binlog")->v,
                         arm_named("sl-transport")->v, O.rounds, O.seed,
                         "rounds");
    sl_bench_print_ratio("decode/transport", 22, arm_named("sl-decode")->v,
                         arm_named("sl-transport")->v, O.rounds, O.seed,
                         "rounds");
  }
  if (O.do_snapshot) {
    printf("\n== snapshot: %" PRIu64 " rows, chunks of %" PRIu64
           " rows; fork = %" PRIu64 " warm-up + %" PRIu64
           " measured reads; k rows/s ==\n",
           O.snapshot_rows, O.chunk_rows ? O.chunk_rows : 8096, O.warmup,
           O.iterations);
    const char *names[] = {"snap-p1", "snap-p2", "run-p1", "run-p2", "dump"};
    const char *labels[] = {"chunk reader p1", "chunk reader p2",
                            "sluice run p1", "sluice run p2",
                            "mariadb-dump"};
    for (int i = 0; i < 5; i++) {
      if (!arm_enabled(arm_named(names[i]))) continue;
      sl_bench_print_stat(labels[i], 22, arm_named(names[i])->v, O.rounds,
                          1e-3, "k/s", "rounds");
    }
    if (!run_enabled) printf("  sluice run skipped: %s\n", run_skip_reason);
    printf("\n== snapshot: ratios of mean rows/s, 95%% intervals ==\n");
    const double *dump = arm_named("dump")->v;
    sl_bench_print_ratio("chunks p1/dump", 22, arm_named("snap-p1")->v, dump,
                         O.rounds, O.seed, "rounds");
    sl_bench_print_ratio("chunks p2/dump", 22, arm_named("snap-p2")->v, dump,
                         O.rounds, O.seed, "rounds");
    sl_bench_print_ratio("chunks p2/p1", 22, arm_named("snap-p2")->v,
                         arm_named("snap-p1")->v, O.rounds, O.seed,
                         "rounds");
    if (run_enabled) {
      sl_bench_print_ratio("run p1/dump", 22, arm_named("run-p1")->v, dump,
                           O.rounds, O.seed, "rounds");
      sl_bench_print_ratio("run p2/dump", 22, arm_named("run-p2")->v, dump,
                           O.rounds, O.seed, "rounds");
    }
  }
  if (O.do_catchup) {
    /* The limit: the backlog at the rate sluice's binlog path read the
     * workload in the same round. */
    const double *bl = arm_named("sluice-binlog")->v;
    double lim[MAX_ROUNDS];
    for (size_t r = 0; r < O.rounds; r++)
      lim[r] = bl[r] > 0 ? (double)O.backlog / bl[r] : NAN;
    printf("\n== crash to caught up: a backlog of %" PRIu64 " changes, "
           "writes continuing at %d changes/s, a checkpoint every 200 ms; "
           "fork = %" PRIu64 " warm-up + %" PRIu64 " measured; seconds ==\n",
           O.backlog, CATCHUP_TPS * (int)O.txn_rows, O.warmup, O.iterations);
    sl_bench_print_stat("crash to caught up", 22, arm_named("catchup")->v,
                        O.rounds, 1, "s", "rounds");
    sl_bench_print_stat("limit: backlog/binlog", 22, lim, O.rounds, 1, "s",
                        "rounds");
    if (!O.do_binlog)
      sl_bench_print_stat("sluice-binlog", 22, bl, O.rounds, 1e-3, "k/s",
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
          "usage: sluice-bench-cdc [--quick]\n"
          "         [--what binlog|snapshot|both|catchup|all]\n"
          "         [--rounds R] [--warmup W] [--iterations I] [--changes N]\n"
          "         [--backlog B]\n"
          "         [--txn-rows R] [--snapshot-rows M] [--chunk-rows C]\n"
          "         [--pool-mb MB] [--seed S] [--out DIR] [--sluice PATH]\n");
}

static int parse_args(int argc, char **argv) {
  O.do_binlog = O.do_snapshot = true;
  O.rounds = 5;
  O.warmup = 1;
  O.iterations = 2;
  O.changes = 1000000;
  O.txn_rows = 100;
  O.snapshot_rows = 10000000;
  O.chunk_rows = 0;
  O.pool_mb = 2048;
  O.seed = 1;
  O.out_dir = "bench/results/cdc";
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--quick") == 0) {
      O.is_quick = true;
      O.rounds = 2;
      O.warmup = 0;
      O.iterations = 1;
      O.changes = 20000;
      O.snapshot_rows = 50000;
      O.pool_mb = 256;
    }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--quick") == 0) continue;
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench-cdc: %s needs a value\n", a);
      return -1;
    }
    const char *v = argv[++i];
    uint64_t *u = NULL, min = 1;
    if (strcmp(a, "--what") == 0) {
      bool all = strcmp(v, "all") == 0, both = all || !strcmp(v, "both");
      O.do_binlog = both || strcmp(v, "binlog") == 0;
      O.do_snapshot = both || strcmp(v, "snapshot") == 0;
      O.do_catchup = all || strcmp(v, "catchup") == 0;
      if (!O.do_binlog && !O.do_snapshot && !O.do_catchup) {
        fprintf(stderr, "bench-cdc: --what is binlog, snapshot, both, "
                "catchup or all, not '%s'\n", v);
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
    else if (strcmp(a, "--chunk-rows") == 0) u = &O.chunk_rows, min = 0;
    else if (strcmp(a, "--pool-mb") == 0) u = &O.pool_mb, min = 16;
    else if (strcmp(a, "--seed") == 0) u = &O.seed, min = 0;
    else {
      fprintf(stderr, "bench-cdc: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (!sl_bench_parse_u64(v, u) || *u < min) {
      fprintf(stderr,
              "bench-cdc: %s needs a whole number >= %" PRIu64
              ", not '%s'\n",
              a, min, v);
      return -1;
    }
  }
  if (O.rounds > MAX_ROUNDS) {
    fprintf(stderr, "bench-cdc: --rounds is at most %d\n", MAX_ROUNDS);
    return -1;
  }
  if (O.changes % O.txn_rows != 0 || O.txn_rows > 100000) {
    fprintf(stderr, "bench-cdc: --changes must be a multiple of --txn-rows "
            "(at most 100000)\n");
    return -1;
  }
  if (O.backlog == 0) O.backlog = O.changes;
  if (O.backlog % O.txn_rows != 0) {
    fprintf(stderr, "bench-cdc: --backlog must be a multiple of --txn-rows\n");
    return -1;
  }
  n_txn = O.changes / O.txn_rows;
  n_ins = (O.txn_rows + 1) / 2;
  n_upd = (O.txn_rows - n_ins) * 3 / 5;
  n_del = O.txn_rows - n_ins - n_upd;
  if (O.sluice[0] == '\0' &&
      sl_bench_sibling("sluice", O.sluice, sizeof(O.sluice)) != 0) {
    fprintf(stderr, "bench-cdc: cannot find myself; give --sluice\n");
    return -1;
  }
  if (access(O.sluice, X_OK) != 0) {
    fprintf(stderr, "bench-cdc: %s is not an executable (give --sluice)\n",
            O.sluice);
    return -1;
  }
  return 0;
}

static int setup(void) {
  sl_error_t *err = NULL;
  sl_server_opts_t so;
  sl_server_opts_init(&so, SL_SERVER_MARIADB);
  /* Reads are measured; the load does not need fsync.  The buffer pool
   * holds the snapshot table (--pool-mb; the test servers' 64 MB would
   * make every arm read from the OS's cache), a redo log of 512 MB lets
   * the load go without constant flushing.  The TABLE_MAP
   * events carry the columns' names, signedness and character sets
   * (binlog_row_metadata=FULL), so the decoder needs no facts from
   * information_schema. */
  so.is_durable = false;
  char pool[64];
  snprintf(pool, sizeof(pool), "innodb-buffer-pool-size=%" PRIu64 "M",
           O.pool_mb);
  const char *const extra[] = {"binlog-row-metadata=FULL", pool,
                               "innodb-log-file-size=512M", NULL};
  so.extra_settings = extra;
  so.base_dir = work;
  if (sl_server_start(&so, &srv, &err) != SL_OK)
    return fail(err, "starting MariaDB");
  snprintf(server_name, sizeof(server_name), "127.0.0.1:%d",
           sl_server_port(srv));
  MYSQL *c = NULL;
  if (sl_my_connect(srv, sl_server_port(srv), &c, &err) != SL_OK)
    return fail(err, "connect");
  char *ver = NULL, *dir = NULL;
  if (sl_my_query_text(c, "SELECT version()", &ver, &err) == SL_OK) {
    printf("# server: MariaDB %s (fsync off, innodb_buffer_pool_size %"
           PRIu64 "M, innodb_log_file_size 512M, binlog_row_metadata "
           "FULL)\n", ver, O.pool_mb);
    sl_free(ver);
  }
  sl_error_destroy(err);
  err = NULL;
  if (sl_my_query_text(c, "SELECT @@datadir", &dir, &err) != SL_OK) {
    mysql_close(c);
    return fail(err, "datadir");
  }
  snprintf(binlog_dir, sizeof(binlog_dir), "%s", dir);
  sl_free(dir);
  int rc = SL_OK;
  if (O.do_snapshot) rc = make_snapshot_table(c, &err);
  if (rc == SL_OK && (O.do_binlog || O.do_catchup))
    rc = make_binlog(c, &err);
  if (rc == SL_OK && O.do_snapshot) time_gtid_pos(c);
  /* The catch-up's writes go to the next binlog files; the binlog arms
   * read the first one. */
  if (rc == SL_OK && O.do_catchup) {
    rc = sl_my_exec(c, "FLUSH BINARY LOGS", NULL, &err);
    if (rc == SL_OK) wait_binlog_checkpoint(c);
  }
  mysql_close(c);
  if (rc != SL_OK) return fail(err, "preparing the tables");
  if (O.do_binlog && check_limit_counts() != 0) return -1;
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) return 2;
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < N_ARMS; i++)
    for (size_t r = 0; r < MAX_ROUNDS; r++) arms[i].v[r] = NAN;
  if (mkdir(O.out_dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "bench-cdc: cannot create %s: %s\n", O.out_dir,
            strerror(errno));
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(work, sizeof(work), "%s/sl-bench-cdc-XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(work) == NULL) {
    fprintf(stderr, "bench-cdc: mkdtemp: %s\n", strerror(errno));
    return 2;
  }
  /* The server runs as mysql when we are root: it must be able to enter
   * the directory its data directory is in. */
  chmod(work, 0755);
  char rawp[PATH_MAX];
  snprintf(rawp, sizeof(rawp), "%s/cdc-raw.csv", O.out_dir);
  raw = fopen(rawp, "w");
  if (raw == NULL) {
    fprintf(stderr, "bench-cdc: cannot write %s\n", rawp);
    return 2;
  }
  fprintf(raw, "arm,round,index,what,value\n");
  fprintf(raw, "#opts,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
          ",%" PRIu64 ",%" PRIu64 "\n", O.changes, O.txn_rows,
          O.snapshot_rows, O.chunk_rows, O.warmup, O.iterations);
  int rc = 1;
  printf("# sluice-bench-cdc: %" PRIu64 " rounds%s; sluice %s; load average "
         "%.2f at start\n",
         O.rounds, O.is_quick ? " (--quick: a smoke run, not a figure)" : "",
         O.sluice, sl_bench_loadavg1());
  if (setup() != 0) goto out;
  if (O.do_snapshot) {
    probe_run();
    if (!run_enabled)
      printf("# sluice run arms skipped: %s\n", run_skip_reason);
  }
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
        fprintf(stderr, "\nbench-cdc: the harness failed\n");
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
        fprintf(stderr, "\nbench-cdc: %s round %" PRIu64 " failed: %s\n",
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
