/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice-bench-db: the running example into real databases.
 *
 * Rows per second of the running example (two generator splits of account
 * deltas -> keyed balance, emit: updates -> upsert sink), whole `sluice
 * run` processes, into
 *
 *   pg-eo     PostgreSQL, delivery exactly-once (PREPARE TRANSACTION,
 *             COMMIT PREPARED at every completed checkpoint)
 *   pg-alo    PostgreSQL, delivery at-least-once (versioned upsert)
 *   pg-copy   the limit: the same rows loaded by `psql -c "\copy ..."`
 *   my-eo     MariaDB, exactly-once (XA)
 *   my-alo    MariaDB, at-least-once
 *   my-load   the limit: the same rows by `mariadb -e "LOAD DATA LOCAL
 *             INFILE ..."`
 *
 * and the cost of the two-phase commit per checkpoint, measured by driving
 * the sinks' public vtables directly against the same servers (as the
 * engine drives them):
 *
 *   pg-2pc-eo / my-2pc-eo    per epoch: write R rows, prepare, commit
 *   pg-2pc-alo / my-2pc-alo  per epoch: write R rows, flush (= COMMIT)
 *
 * "The same rows" of the limit: every input delta makes exactly one
 * after-image (+I for an account's first delta, +U after), and the upsert
 * sinks write after-images and skip the -U retractions; so the limit loads
 * the N after-images (account, balance) of the job's changelog, produced
 * once by the same pipeline into a file, into a table without an index
 * (duplicate accounts are rows of their own).  BENCHMARKS.md says why this
 * is the limit.
 *
 * Method (bench/README.md): every measurement is a fork of the harness
 * (sl_bench_run, one fork per arm and round, W warm-up and I measured
 * runs in it); all arms run in every round, in a seeded random order, so
 * drift of the shared machine hits every arm alike; a figure is the mean
 * of fork means with a Student-t 95% interval, and a ratio has the
 * harness's two intervals (expanded percentile bootstrap and Fieller)
 * and a paired one (the geometric mean of the per-round ratios, a t
 * interval on their logarithms), as the load of a shared machine changes
 * more between rounds than within one.  The micro-benchmark arms run in
 * plain forks of their own (a fork reports several numbers per epoch).
 * Everything is written to DIR/db-raw.csv and the report is computed from
 * that file, so --report can analyse a run again.
 * The servers are started once (tests/tools/sl_servers.h) and stopped at
 * the end; every run gets a fresh table, a fresh checkpoint directory and
 * (PostgreSQL) a CHECKPOINT before its clock starts, and is checked after
 * it (row count and sum of balances against the changelog) so that only
 * correct runs count.
 *
 * usage: sluice-bench-db [--db pg|mariadb|both] [--rounds R] [--warmup W]
 *          [--iterations I] [--records N] [--keys K] [--parallelism P]
 *          [--checkpoint-ms MS] [--epochs E] [--epoch-rows R]
 *          [--durable 0|1] [--seed S] [--out DIR] [--sluice PATH]
 *        sluice-bench-db --report DIR/db-raw.csv   (analyse a run again)
 *
 * Defaults: 8 rounds, 1 warm-up + 2 measured runs per fork, 1,000,000
 * deltas on 10,000 accounts, parallelism 2, a checkpoint every 1000 ms,
 * 5 warm-up + 40 epochs of 1000 rows per micro-benchmark fork, durable
 * servers (fsync on), output in bench/results/db/
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "runutil.h"
#include "sl_servers.h"
#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* Options and shared state (read by the forked children).              */

typedef struct opts_s {
  bool do_pg, do_my;
  uint64_t rounds, warmup, iterations;
  uint64_t records, keys, parallelism, ckpt_ms;
  uint64_t epochs, epoch_warmup, epoch_rows;
  uint64_t seed;
  bool is_durable;
  const char *out_dir;
  const char *report_only; /* --report FILE: analyse a raw file, no run */
  char sluice[PATH_MAX];
} opts_t;

static opts_t O;
static sl_server_t *pg_srv, *my_srv;
static char work[512];          /* temporary: pipelines, data, checkpoints */
static char data_csv[PATH_MAX]; /* the N after-images "account,balance" */
static int64_t expect_accounts, expect_sum;

typedef enum db_e { DB_PG = 0, DB_MY = 1 } db_t;
typedef enum kind_e {
  K_EO = 0,   /* sluice, exactly-once */
  K_ALO = 1,  /* sluice, at-least-once */
  K_LIMIT = 2,/* psql \copy or LOAD DATA LOCAL INFILE */
  K_2PC_EO = 3,
  K_2PC_ALO = 4
} kind_t;

typedef struct arm_s {
  const char *name;
  db_t db;
  kind_t kind;
  /* per fork (round) */
  double means[256];
  size_t n;
  size_t n_failed;
  /* micro-benchmark arms: per fork means of the parts, pooled histograms */
  double prep_means[256], commit_means[256], epoch_means[256];
  double by_round[256]; /* the fork mean of each round, NaN if none */
  double rows_sum, rows_min, rows_max; /* the diagnostic rows written */
  size_t rows_n;
  sl_bench_hist_t *h_prep, *h_commit, *h_epoch;
} arm_t;

static arm_t arms[] = {
    {.name = "pg-eo", .db = DB_PG, .kind = K_EO},
    {.name = "pg-alo", .db = DB_PG, .kind = K_ALO},
    {.name = "pg-copy", .db = DB_PG, .kind = K_LIMIT},
    {.name = "my-eo", .db = DB_MY, .kind = K_EO},
    {.name = "my-alo", .db = DB_MY, .kind = K_ALO},
    {.name = "my-load", .db = DB_MY, .kind = K_LIMIT},
    {.name = "pg-2pc-eo", .db = DB_PG, .kind = K_2PC_EO},
    {.name = "pg-2pc-alo", .db = DB_PG, .kind = K_2PC_ALO},
    {.name = "my-2pc-eo", .db = DB_MY, .kind = K_2PC_EO},
    {.name = "my-2pc-alo", .db = DB_MY, .kind = K_2PC_ALO},
};
#define N_ARMS (sizeof(arms) / sizeof(arms[0]))

static FILE *raw; /* every measured value: arm,round,fork_seq,kind,value */

static bool arm_enabled(const arm_t *a) {
  return a->db == DB_PG ? O.do_pg : O.do_my;
}

/* ------------------------------------------------------------------ */
/* Small helpers.                                                       */

static int fail(sl_error_t *err, const char *what) {
  fprintf(stderr, "bench-db: %s: %s\n", what,
          err ? sl_error_message(err) : "failed");
  sl_error_destroy(err);
  return -1;
}

/* ------------------------------------------------------------------ */
/* Pipelines.                                                           */

static void pipeline_head(char *buf, size_t size, const char *ckdir) {
  snprintf(buf, size,
           "# sluice-bench-db: the running example (generated)\n"
           "name: balances\n"
           "parallelism: %" PRIu64 "\n"
           "checkpoint:\n"
           "  dir: %s\n"
           "  interval_ms: %" PRIu64 "\n"
           "source:\n"
           "  type: generator\n"
           "  uid: deltas\n"
           "  seed: 42\n"
           "  count: %" PRIu64 "\n"
           "  splits: 2\n"
           "  keys: %" PRIu64 "\n"
           "  columns: [key, amount]\n"
           "transforms:\n"
           "  - project:\n"
           "      account: key\n"
           "      amount: amount\n"
           "  - aggregate:\n"
           "      key: [account]\n"
           "      values:\n"
           "        balance: sum(amount)\n"
           "      emit: updates\n"
           "    uid: balances\n",
           O.parallelism, ckdir, O.ckpt_ms, O.records, O.keys);
}

static int write_pipeline(db_t db, kind_t kind, char *path, size_t size) {
  char head[4096], sink[1024], all[8192];
  snprintf(path, size, "%s/%s-%s.yaml", work, db == DB_PG ? "pg" : "my",
           kind == K_EO ? "eo" : "alo");
  char ck[600];
  snprintf(ck, sizeof(ck), "%s/ckpt", work);
  pipeline_head(head, sizeof(head), ck);
  const char *delivery = kind == K_EO ? "exactly-once" : "at-least-once";
  if (db == DB_PG)
    snprintf(sink, sizeof(sink),
             "sink:\n  type: postgres\n  uid: balances-pg\n"
             "  conninfo: \"%s\"\n  table: balances\n  mode: upsert\n"
             "  key: [account]\n  delivery: %s\n",
             sl_server_conninfo(pg_srv), delivery);
  else
    snprintf(sink, sizeof(sink),
             "sink:\n  type: mariadb\n  uid: db\n  host: 127.0.0.1\n"
             "  port: %d\n  user: %s\n  database: %s\n  table: balances\n"
             "  key: [account]\n  mode: upsert\n  delivery: %s\n",
             sl_server_port(my_srv), sl_server_user(my_srv),
             sl_server_dbname(my_srv), delivery);
  snprintf(all, sizeof(all), "%s%s", head, sink);
  return sl_bench_write_file(path, all);
}

/*
 * The limit's data: run the pipeline once into a changelog file, keep the
 * after-images (+I, +U) as "account,balance", and compute the final
 * table's row count and sum of balances for the checks.
 */
static int make_data(void) {
  char head[4096], all[8192], yaml[600], cl[600];
  char ck[600];
  snprintf(ck, sizeof(ck), "%s/ckpt-gen", work);
  snprintf(cl, sizeof(cl), "%s/changelog.csv", work);
  pipeline_head(head, sizeof(head), ck);
  snprintf(all, sizeof(all),
           "%ssink:\n  type: file\n  path: %s\n  format: csv\n"
           "  changelog: true\n",
           head, cl);
  snprintf(yaml, sizeof(yaml), "%s/gen.yaml", work);
  if (sl_bench_write_file(yaml, all) != 0) return -1;
  char log[PATH_MAX];
  snprintf(log, sizeof(log), "%s/gen.log", O.out_dir);
  char *argv[] = {O.sluice, "run", yaml, "--quiet", NULL};
  if (sl_bench_spawn_wait(argv, NULL, log) != 0) {
    fprintf(stderr, "bench-db: `%s run %s` failed; see %s\n", O.sluice, yaml,
            log);
    return -1;
  }
  snprintf(data_csv, sizeof(data_csv), "%s/after-images.csv", work);
  FILE *in = fopen(cl, "r"), *out = fopen(data_csv, "w");
  int64_t *bal = calloc(O.keys, sizeof(int64_t));
  bool *seen = calloc(O.keys, sizeof(bool));
  if (!in || !out || !bal || !seen) {
    fprintf(stderr, "bench-db: cannot read %s or write %s\n", cl, data_csv);
    if (in) fclose(in);
    if (out) fclose(out);
    free(bal);
    free(seen);
    return -1;
  }
  char line[256];
  uint64_t n_after = 0;
  int rc = 0;
  while (fgets(line, sizeof(line), in)) {
    char op[4];
    long long acc, b;
    if (sscanf(line, "%3[^,],%lld,%lld", op, &acc, &b) != 3) continue;
    if (strcmp(op, "+I") != 0 && strcmp(op, "+U") != 0) continue;
    if (acc < 0 || (uint64_t)acc >= O.keys) {
      rc = -1;
      break;
    }
    fprintf(out, "%lld,%lld\n", acc, b);
    bal[acc] = b;
    seen[acc] = true;
    n_after++;
  }
  fclose(in);
  if (fclose(out) != 0) rc = -1;
  expect_accounts = expect_sum = 0;
  for (uint64_t k = 0; k < O.keys; k++)
    if (seen[k]) {
      expect_accounts++;
      expect_sum += bal[k];
    }
  free(bal);
  free(seen);
  if (rc == 0 && n_after != O.records) {
    fprintf(stderr,
            "bench-db: the changelog has %" PRIu64 " after-images for %" PRIu64
            " deltas (one each expected)\n",
            n_after, O.records);
    rc = -1;
  }
  sl_bench_rm_rf(ck);
  unlink(cl);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Table set-up and checks (in the harness's child, untimed).           */

static int pg_prepare_table(const arm_t *a, sl_error_t **err) {
  PGconn *c = NULL;
  int rc = sl_pg_connect(sl_server_conninfo(pg_srv), &c, err);
  if (rc != SL_OK) return rc;
  const char *create =
      a->kind == K_LIMIT
          ? "CREATE TABLE balances_load (account bigint NOT NULL, "
            "balance bigint NOT NULL)"
      : a->kind == K_ALO || a->kind == K_2PC_ALO
          ? "CREATE TABLE balances (account bigint PRIMARY KEY, "
            "balance bigint NOT NULL, sluice_epoch bigint NOT NULL)"
          : "CREATE TABLE balances (account bigint PRIMARY KEY, "
            "balance bigint NOT NULL)";
  /* Prepared transactions left behind (see my_prepared); ROLLBACK
   * PREPARED cannot run inside a transaction block, so one at a time. */
  PGresult *res = PQexec(c, "SELECT gid FROM pg_prepared_xacts WHERE "
                         "database = current_database()");
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = sl_error_set(err, SL_EIO, "reading pg_prepared_xacts: %s",
                      PQerrorMessage(c));
  for (int i = 0; rc == SL_OK && i < PQntuples(res); i++) {
    char *lit = PQescapeLiteral(c, PQgetvalue(res, i, 0),
                                strlen(PQgetvalue(res, i, 0)));
    char sql[512];
    snprintf(sql, sizeof(sql), "ROLLBACK PREPARED %s", lit ? lit : "''");
    PQfreemem(lit);
    rc = sl_pg_exec(c, sql, NULL, err);
    if (rc == SL_OK)
      fprintf(stderr, "bench-db: %s: rolled back a prepared transaction "
              "left behind\n", a->name);
  }
  PQclear(res);
  const char *sql[] = {"SET client_min_messages = warning",
                       "DROP TABLE IF EXISTS balances",
                       "DROP TABLE IF EXISTS balances_load",
                       "DROP TABLE IF EXISTS sluice_sink_commits",
                       create, "CHECKPOINT", NULL};
  for (int i = 0; sql[i] && rc == SL_OK; i++)
    rc = sl_pg_exec(c, sql[i], NULL, err);
  PQfinish(c);
  return rc;
}

/*
 * Prepared transactions a failed run or fork may have left behind would
 * hold row locks and make the next arm wait (or fail) on its DROP TABLE:
 * they are rolled back before every run, and counted after every
 * exactly-once job (the check fails when any is left).  MariaDB lists them
 * with XA RECOVER FORMAT='SQL' (the xid as an SQL literal, column 4).
 */
static int my_prepared(MYSQL *c, bool is_rollback, int64_t *out_n,
                       sl_error_t **err) {
  *out_n = 0;
  if (mysql_query(c, "XA RECOVER FORMAT='SQL'") != 0)
    return sl_error_set(err, SL_EIO, "XA RECOVER: error %u: %s",
                        mysql_errno(c), mysql_error(c));
  MYSQL_RES *res = mysql_store_result(c);
  if (res == NULL)
    return sl_error_set(err, SL_EIO, "XA RECOVER: no result: %s",
                        mysql_error(c));
  char **xids = NULL;
  size_t n = 0;
  MYSQL_ROW row;
  while ((row = mysql_fetch_row(res)) != NULL) {
    char **nx = realloc(xids, (n + 1) * sizeof(char *));
    if (nx == NULL) break;
    xids = nx;
    xids[n++] = strdup(row[3] ? row[3] : "");
  }
  mysql_free_result(res);
  int rc = SL_OK;
  for (size_t i = 0; i < n; i++) {
    if (is_rollback && rc == SL_OK && xids[i] != NULL) {
      char sql[512];
      snprintf(sql, sizeof(sql), "XA ROLLBACK %s", xids[i]);
      rc = sl_my_exec(c, sql, NULL, err);
    }
    free(xids[i]);
  }
  free(xids);
  *out_n = (int64_t)n;
  return rc;
}

static int my_prepare_table(const arm_t *a, sl_error_t **err) {
  MYSQL *c = NULL;
  int rc = sl_my_connect(my_srv, sl_server_port(my_srv), &c, err);
  if (rc != SL_OK) return rc;
  int64_t left = 0;
  if ((rc = my_prepared(c, true, &left, err)) != SL_OK) {
    mysql_close(c);
    return rc;
  }
  if (left > 0)
    fprintf(stderr, "bench-db: %s: rolled back %" PRId64 " prepared XA "
            "branches left behind\n", a->name, left);
  const char *create =
      a->kind == K_LIMIT
          ? "CREATE TABLE balances_load (account BIGINT NOT NULL, "
            "balance BIGINT NOT NULL) ENGINE=InnoDB"
      : a->kind == K_ALO || a->kind == K_2PC_ALO
          ? "CREATE TABLE balances (account BIGINT PRIMARY KEY, "
            "balance BIGINT NOT NULL, sluice_epoch BIGINT NOT NULL) "
            "ENGINE=InnoDB"
          : "CREATE TABLE balances (account BIGINT PRIMARY KEY, "
            "balance BIGINT NOT NULL) ENGINE=InnoDB";
  const char *sql[] = {"DROP TABLE IF EXISTS balances",
                       "DROP TABLE IF EXISTS balances_load",
                       "DROP TABLE IF EXISTS sluice_xa_commits", create,
                       NULL};
  for (int i = 0; sql[i] && rc == SL_OK; i++)
    rc = sl_my_exec(c, sql[i], NULL, err);
  mysql_close(c);
  return rc;
}

/* After a run: the final table (count, sum) or the loaded rows (count). */
static int check_table(const arm_t *a, sl_error_t **err) {
  int64_t n = -1, sum = 0, open_tx = 0;
  int rc;
  if (a->db == DB_PG) {
    PGconn *c = NULL;
    if ((rc = sl_pg_connect(sl_server_conninfo(pg_srv), &c, err)) != SL_OK)
      return rc;
    if (a->kind == K_LIMIT) {
      rc = sl_pg_query_int64(c, "SELECT count(*) FROM balances_load", &n, err);
    } else {
      rc = sl_pg_query_int64(c, "SELECT count(*) FROM balances", &n, err);
      if (rc == SL_OK)
        rc = sl_pg_query_int64(c, "SELECT coalesce(sum(balance), 0) FROM "
                               "balances", &sum, err);
      if (rc == SL_OK)
        rc = sl_pg_query_int64(c, "SELECT count(*) FROM pg_prepared_xacts",
                               &open_tx, err);
    }
    PQfinish(c);
  } else {
    MYSQL *c = NULL;
    if ((rc = sl_my_connect(my_srv, sl_server_port(my_srv), &c, err)) !=
        SL_OK)
      return rc;
    if (a->kind == K_LIMIT) {
      rc = sl_my_query_int64(c, "SELECT count(*) FROM balances_load", &n, err);
    } else {
      rc = sl_my_query_int64(c, "SELECT count(*) FROM balances", &n, err);
      if (rc == SL_OK)
        rc = sl_my_query_int64(c, "SELECT coalesce(sum(balance), 0) FROM "
                               "balances", &sum, err);
      if (rc == SL_OK) rc = my_prepared(c, false, &open_tx, err);
    }
    mysql_close(c);
  }
  if (rc != SL_OK) return rc;
  if (a->kind == K_LIMIT) {
    if ((uint64_t)n != O.records)
      return sl_error_set(err, SL_EFAILED, "%s: %" PRId64 " rows loaded, %"
                          PRIu64 " expected", a->name, n, O.records);
  } else if (n != expect_accounts || sum != expect_sum || open_tx != 0) {
    return sl_error_set(err, SL_EFAILED,
                        "%s: the table has %" PRId64 " accounts summing to %"
                        PRId64 " (%" PRId64 " prepared transactions left); "
                        "expected %" PRId64 " summing to %" PRId64,
                        a->name, n, sum, open_tx, expect_accounts,
                        expect_sum);
  }
  return SL_OK;
}

/*
 * A diagnostic, not a measurement: how many rows the sink really wrote
 * (it merges the changes of one account within a batch, and an
 * exactly-once PostgreSQL writer keeps growing its batch while its last
 * epoch is prepared and not yet committed).  PostgreSQL only: the
 * table's inserted + updated tuples, read once the job's sessions have
 * ended (a session reports its counts when it ends).  -1 when unknown.
 */
static int cur_round; /* set by the parent before each fork */

static int64_t pg_rows_changed(void) {
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  int64_t n = -1, others = 1;
  if (sl_pg_connect(sl_server_conninfo(pg_srv), &c, &err) != SL_OK) {
    sl_error_destroy(err);
    return -1;
  }
  for (int i = 0; i < 500 && others > 0; i++) {
    if (sl_pg_query_int64(c, "SELECT count(*) FROM pg_stat_activity WHERE "
                          "backend_type = 'client backend' AND pid <> "
                          "pg_backend_pid()", &others, &err) != SL_OK)
      break;
    if (others > 0) usleep(10000);
  }
  if (others == 0 &&
      sl_pg_query_int64(c, "SELECT n_tup_ins + n_tup_upd FROM "
                        "pg_stat_user_tables WHERE relname = 'balances'",
                        &n, &err) != SL_OK)
    n = -1;
  sl_error_destroy(err);
  PQfinish(c);
  return n;
}

static void note_rows(const arm_t *a, int64_t n) {
  char path[PATH_MAX], line[128];
  snprintf(path, sizeof(path), "%s/db-rows.csv", O.out_dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int len = snprintf(line, sizeof(line), "%s,%d,%" PRId64 "\n", a->name,
                     cur_round, n);
  if (write(fd, line, (size_t)len) != len) { /* a diagnostic only */
  }
  close(fd);
}

/* ------------------------------------------------------------------ */
/* The throughput arms: one harness iteration = one whole run.          */

static int run_iter(void *arg, sl_bench_ctx_t *ctx, double *out_value) {
  arm_t *a = arg;
  sl_error_t *err = NULL;
  int rc = a->db == DB_PG ? pg_prepare_table(a, &err)
                          : my_prepare_table(a, &err);
  if (rc != SL_OK) return fail(err, a->name);
  char ck[600], log[PATH_MAX + 64], yaml[600];
  snprintf(ck, sizeof(ck), "%s/ckpt", work);
  sl_bench_rm_rf(ck);
  snprintf(log, sizeof(log), "%s/%s.log", O.out_dir, a->name);
  char sql[PATH_MAX + 256], port[16];
  char *argv[16];
  if (a->kind == K_LIMIT && a->db == DB_PG) {
    snprintf(sql, sizeof(sql),
             "\\copy balances_load (account, balance) FROM '%s' WITH "
             "(FORMAT csv)", data_csv);
    char *v[] = {"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                 (char *)sl_server_conninfo(pg_srv), "-c", sql, NULL};
    memcpy(argv, v, sizeof(v));
  } else if (a->kind == K_LIMIT) {
    snprintf(sql, sizeof(sql),
             "LOAD DATA LOCAL INFILE '%s' INTO TABLE balances_load FIELDS "
             "TERMINATED BY ',' (account, balance)", data_csv);
    snprintf(port, sizeof(port), "%d", sl_server_port(my_srv));
    char *v[] = {"mariadb", "--no-defaults", "--local-infile=1", "-h",
                 "127.0.0.1", "-P", port, "-u",
                 (char *)sl_server_user(my_srv),
                 (char *)sl_server_dbname(my_srv), "-e", sql, NULL};
    memcpy(argv, v, sizeof(v));
  } else {
    if (write_pipeline(a->db, a->kind, yaml, sizeof(yaml)) != 0) return -1;
    char *v[] = {O.sluice, "run", yaml, "--quiet", NULL};
    memcpy(argv, v, sizeof(v));
  }
  bool is_sluice = a->kind == K_EO || a->kind == K_ALO;
  int64_t t0 = sl_bench_now_ns();
  int st = sl_bench_spawn_wait(argv, NULL, log);
  int64_t t1 = sl_bench_now_ns();
  if (st != 0) {
    fprintf(stderr, "bench-db: %s: `%s` exited with %d; see %s\n", a->name,
            argv[0], st, log);
    return -1;
  }
  if ((rc = check_table(a, &err)) != SL_OK) return fail(err, a->name);
  if (is_sluice && a->db == DB_PG && !ctx->is_warmup)
    note_rows(a, pg_rows_changed());
  *out_value = (double)O.records / ((double)(t1 - t0) / 1e9);
  return 0;
}

/* ------------------------------------------------------------------ */
/* The two-phase-commit micro-benchmark: the sink's vtable driven as    */
/* the engine drives it, one epoch = R rows and one checkpoint.          */

typedef struct sample_s {
  double write_ms, prep_ms, commit_ms;
} sample_t;

static int micro_child(const arm_t *a, int out_fd) {
  sl_error_t *err = NULL;
  int rc = a->db == DB_PG ? pg_prepare_table(a, &err)
                          : my_prepare_table(a, &err);
  if (rc != SL_OK) return fail(err, a->name);
  bool is_eo = a->kind == K_2PC_EO;
  static const char *key[] = {"account"};
  const sl_sink_vt_t *vt;
  void *sctx = NULL;
  if (a->db == DB_PG) {
    sl_pg_sink_config_t c;
    sl_pg_sink_config_init(&c);
    c.conninfo = sl_server_conninfo(pg_srv);
    c.table = "balances";
    c.mode = SL_PG_MODE_UPSERT;
    c.key = key;
    c.n_key = 1;
    c.delivery = is_eo ? SL_DELIVERY_EXACTLY_ONCE : SL_DELIVERY_AT_LEAST_ONCE;
    rc = sl_pg_sink_create(&c, &vt, &sctx, &err);
  } else {
    sl_mariadb_sink_config_t c;
    sl_mariadb_sink_config_init(&c);
    c.host = "127.0.0.1";
    c.port = sl_server_port(my_srv);
    c.user = sl_server_user(my_srv);
    c.database = sl_server_dbname(my_srv);
    c.table = "balances";
    c.mode = SL_MARIADB_UPSERT;
    c.key = key;
    c.n_key = 1;
    c.delivery = is_eo ? SL_DELIVERY_EXACTLY_ONCE : SL_DELIVERY_AT_LEAST_ONCE;
    rc = sl_mariadb_sink_create(&c, &vt, &sctx, &err);
  }
  if (rc != SL_OK) return fail(err, "sink create");
  sl_field_t f[2] = {{"account", {SL_TYPE_INT64, 0, 0, false}},
                     {"balance", {SL_TYPE_INT64, 0, 0, false}}};
  sl_schema_t *schema = NULL;
  if (sl_schema_create(f, 2, &schema, &err) != SL_OK)
    return fail(err, "schema");
  sl_row_builder_t b;
  if (sl_row_builder_init(&b, schema) != SL_OK) return -1;
  void *w = NULL, *cm = NULL;
  uint64_t epoch = 1;
  if (is_eo) {
    sl_committer_init_t ci;
    memset(&ci, 0, sizeof(ci));
    uint32_t owned = 0;
    ci.job = "bench";
    ci.uid = "snk";
    ci.parallelism = 1;
    ci.owned_subtasks = &owned;
    ci.n_owned_subtasks = 1;
    ci.epoch_id = epoch;
    if (vt->committer_open(sctx, &ci, &cm, &err) != SL_OK)
      return fail(err, "committer_open");
    /* As the engine: recover (rolls back leftovers, fences) before the
     * writer opens; the writer takes its fence epoch from it. */
    if (vt->recover(cm, &err) != SL_OK) return fail(err, "recover");
  }
  sl_sink_init_t in;
  memset(&in, 0, sizeof(in));
  in.parallelism = 1;
  in.schema = schema;
  in.uid = "snk";
  in.job = "bench";
  in.epoch_id = epoch;
  if (vt->writer_open(sctx, &in, &w, &err) != SL_OK)
    return fail(err, "writer_open");
  uint64_t total = O.epoch_warmup + O.epochs;
  sl_bytes_t cb;
  sl_bytes_init(&cb);
  for (uint64_t e = 0; e < total; e++) {
    int64_t t0 = sl_bench_now_ns();
    for (uint64_t i = 0; i < O.epoch_rows; i++) {
      sl_row_t row;
      sl_row_builder_reset(&b, e == 0 ? SL_ROW_INSERT : SL_ROW_UPDATE_AFTER);
      sl_row_builder_set_i64(&b, 0, (int64_t)i);
      sl_row_builder_set_i64(&b, 1, (int64_t)(e * O.epoch_rows + i));
      if (sl_row_builder_finish(&b, &row, &err) != SL_OK ||
          vt->write(w, &row, &err) != SL_OK)
        return fail(err, "write");
    }
    int64_t t1 = sl_bench_now_ns(), t2, t3;
    uint64_t ckpt = epoch + 1 + e;
    if (vt->flush && vt->flush(w, &err) != SL_OK) return fail(err, "flush");
    if (is_eo) {
      sl_bytes_clear(&cb);
      if (vt->prepare(w, ckpt, &cb, &err) != SL_OK)
        return fail(err, "prepare");
      t2 = sl_bench_now_ns();
      sl_commit_status_t st = SL_COMMIT_FATAL;
      if (vt->commit(cm, ckpt, 0, cb.data, cb.len, 1, &st, &err) != SL_OK)
        return fail(err, "commit");
      if (st != SL_COMMIT_OK) return fail(err, "commit status not OK");
      sl_error_destroy(err);
      err = NULL;
      t3 = sl_bench_now_ns();
    } else {
      t2 = sl_bench_now_ns(); /* flush = send the batch and COMMIT */
      t3 = t2;
    }
    sample_t s = {(double)(t1 - t0) / 1e6,
                  (double)(t2 - t1) / 1e6,
                  (double)(t3 - t2) / 1e6};
    if (e >= O.epoch_warmup &&
        write(out_fd, &s, sizeof(s)) != (ssize_t)sizeof(s))
      return -1;
  }
  if (vt->writer_close(w, true, &err) != SL_OK) return fail(err, "close");
  if (cm && vt->committer_close) vt->committer_close(cm);
  vt->destroy(sctx);
  sl_bytes_close(&cb);
  sl_row_builder_close(&b);
  sl_schema_unref(schema);
  return 0;
}

/* One fork of a micro arm; appends to the arm's per-fork means and
 * histograms.  Returns 0 or -1 (the fork failed: reported, not counted). */
static int micro_fork(arm_t *a, int round) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    _exit(micro_child(a, p[1]) == 0 ? 0 : 71);
  }
  close(p[1]);
  sample_t *s = calloc(O.epochs + 1, sizeof(*s));
  size_t n = 0, got = 0;
  char *buf = (char *)s;
  ssize_t r;
  while (got < (O.epochs + 1) * sizeof(*s) &&
         (r = read(p[0], buf + got, (O.epochs + 1) * sizeof(*s) - got)) != 0) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += (size_t)r;
  }
  close(p[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  n = got / sizeof(*s);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n != O.epochs) {
    fprintf(stderr, "bench-db: %s round %d: the fork failed (%zu of %" PRIu64
            " epochs)\n", a->name, round, n, O.epochs);
    fprintf(raw, "%s,%d,0,failed,,,\n", a->name, round);
    free(s);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    fprintf(raw, "%s,%d,%zu,epoch,%.6f,%.6f,%.6f\n", a->name, round, i,
            s[i].write_ms, s[i].prep_ms, s[i].commit_ms);
  free(s);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Analysis: everything is computed from the raw file, so that a run    */
/* can be analysed again later (--report FILE).                          */

typedef struct group_s {
  arm_t *arm;
  long round;
  bool is_failed;
  size_t n;
  double sum, sum_prep, sum_commit, sum_epoch;
} group_t;

static void group_end(group_t *g) {
  arm_t *a = g->arm;
  if (a == NULL) return;
  if (g->is_failed || g->n == 0 || a->n >= 256 || g->round < 0 ||
      g->round >= 256) {
    a->n_failed++;
  } else if (a->kind >= K_2PC_EO) {
    double n = (double)g->n;
    a->prep_means[a->n] = g->sum_prep / n;
    a->commit_means[a->n] = g->sum_commit / n;
    a->epoch_means[a->n] = g->sum_epoch / n;
    a->means[a->n] = g->sum_epoch / n;
    a->by_round[g->round] = a->means[a->n];
    a->n++;
  } else {
    a->means[a->n] = g->sum / (double)g->n;
    a->by_round[g->round] = a->means[a->n];
    a->n++;
  }
  memset(g, 0, sizeof(*g));
}

static int analyse(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "bench-db: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  for (size_t i = 0; i < N_ARMS; i++) {
    arm_t *a = &arms[i];
    a->n = a->n_failed = 0;
    a->rows_n = 0;
    a->rows_sum = a->rows_min = a->rows_max = 0;
    for (size_t r = 0; r < 256; r++) a->by_round[r] = NAN;
    sl_bench_hist_reset(a->h_prep);
    sl_bench_hist_reset(a->h_commit);
    sl_bench_hist_reset(a->h_epoch);
  }
  char line[512];
  group_t g;
  memset(&g, 0, sizeof(g));
  while (fgets(line, sizeof(line), f)) {
    unsigned long long v[9];
    if (sscanf(line, "#opts,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu", &v[0],
               &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9) {
      O.records = v[0], O.keys = v[1], O.parallelism = v[2], O.ckpt_ms = v[3];
      O.warmup = v[4], O.iterations = v[5], O.epoch_rows = v[6];
      O.epoch_warmup = v[7], O.epochs = v[8];
      continue;
    }
    char name[32], what[16];
    long round;
    size_t idx;
    double x1 = 0, x2 = 0, x3 = 0;
    int k = sscanf(line, "%31[^,],%ld,%zu,%15[^,],%lf,%lf,%lf", name, &round,
                   &idx, what, &x1, &x2, &x3);
    if (k < 4) continue; /* the header */
    arm_t *a = NULL;
    for (size_t i = 0; i < N_ARMS; i++)
      if (strcmp(arms[i].name, name) == 0) a = &arms[i];
    if (a == NULL) continue;
    if (a != g.arm || round != g.round) {
      group_end(&g);
      g.arm = a;
      g.round = round;
    }
    if (strcmp(what, "failed") == 0) {
      g.is_failed = true;
    } else if (strcmp(what, "run") == 0 && k >= 5) {
      g.sum += x1;
      g.n++;
    } else if (strcmp(what, "epoch") == 0 && k == 7) {
      double ep = x1 + x2 + x3;
      g.sum_prep += x2;
      g.sum_commit += x3;
      g.sum_epoch += ep;
      g.n++;
      sl_bench_hist_record(a->h_prep, (int64_t)(x2 * 1e6));
      sl_bench_hist_record(a->h_commit, (int64_t)(x3 * 1e6));
      sl_bench_hist_record(a->h_epoch, (int64_t)(ep * 1e6));
    }
  }
  group_end(&g);
  fclose(f);
  /* The diagnostic next to it: db-rows.csv (arm,round,rows). */
  char rp[PATH_MAX];
  snprintf(rp, sizeof(rp), "%s", path);
  char *slash = strrchr(rp, '/');
  size_t dir_len = slash ? (size_t)(slash - rp + 1) : 0;
  snprintf(rp + dir_len, sizeof(rp) - dir_len, "db-rows.csv");
  FILE *rf = fopen(rp, "r");
  while (rf && fgets(line, sizeof(line), rf)) {
    char name[32];
    long round;
    long long n;
    if (sscanf(line, "%31[^,],%ld,%lld", name, &round, &n) != 3 || n < 0)
      continue;
    for (size_t i = 0; i < N_ARMS; i++) {
      arm_t *a = &arms[i];
      if (strcmp(a->name, name) != 0) continue;
      if (a->rows_n == 0 || n < a->rows_min) a->rows_min = (double)n;
      if (a->rows_n == 0 || n > a->rows_max) a->rows_max = (double)n;
      a->rows_sum += (double)n;
      a->rows_n++;
    }
  }
  if (rf) fclose(rf);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Reporting.                                                           */

static arm_t *arm_named(const char *name) {
  for (size_t i = 0; i < N_ARMS; i++)
    if (strcmp(arms[i].name, name) == 0) return &arms[i];
  return NULL;
}

static void print_stat(const char *label, const double *x, size_t n,
                       double scale, const char *unit) {
  sl_bench_print_stat(label, 22, x, n, scale, unit, "forks");
}

/* cand / base: unpaired over fork means, and paired by round. */
static void print_ratio(const char *label, const arm_t *cand,
                        const arm_t *base) {
  sl_bench_print_ratio(label, 22, cand->by_round, base->by_round, 256,
                       O.seed, "forks");
}

static void print_hist(const char *label, const sl_bench_hist_t *h) {
  if (sl_bench_hist_count(h) == 0) return;
  printf("  %-22s p50 %.3f ms  p90 %.3f  p99 %.3f  max %.3f  (%" PRIu64
         " epochs)\n",
         label, (double)sl_bench_hist_quantile(h, 0.5) / 1e6,
         (double)sl_bench_hist_quantile(h, 0.9) / 1e6,
         (double)sl_bench_hist_quantile(h, 0.99) / 1e6,
         (double)sl_bench_hist_max(h) / 1e6, sl_bench_hist_count(h));
}

static void report(void) {
  printf("\n== rows/s of the running example (%" PRIu64 " deltas, %" PRIu64
         " accounts, parallelism %" PRIu64 ", checkpoint every %" PRIu64
         " ms); fork = %" PRIu64 " warm-up + %" PRIu64 " measured runs ==\n",
         O.records, O.keys, O.parallelism, O.ckpt_ms, O.warmup, O.iterations);
  for (size_t i = 0; i < N_ARMS; i++) {
    arm_t *a = &arms[i];
    if (!arm_enabled(a) || a->kind >= K_2PC_EO) continue;
    print_stat(a->name, a->means, a->n, 1e-3, "k rows/s");
  }
  printf("\n== diagnostic: rows the PostgreSQL sink wrote per measured run "
         "(after merging updates of one account), of %" PRIu64 " after-images ==\n",
         O.records);
  for (size_t i = 0; i < N_ARMS; i++) {
    arm_t *a = &arms[i];
    if (!arm_enabled(a) || (a->kind != K_EO && a->kind != K_ALO) ||
        a->db != DB_PG)
      continue;
    if (a->rows_n == 0) {
      printf("  %-22s not recorded\n", a->name);
      continue;
    }
    printf("  %-22s mean %.0f (%.1f%%)  min %.0f  max %.0f  (%zu runs)\n",
           a->name, a->rows_sum / (double)a->rows_n,
           100.0 * a->rows_sum / (double)a->rows_n / (double)O.records,
           a->rows_min, a->rows_max, a->rows_n);
  }
  const char *dbs[2][4] = {{"pg-eo", "pg-alo", "pg-copy", "PostgreSQL"},
                           {"my-eo", "my-alo", "my-load", "MariaDB"}};
  for (int d = 0; d < 2; d++) {
    if ((d == 0 && !O.do_pg) || (d == 1 && !O.do_my)) continue;
    arm_t *eo = arm_named(dbs[d][0]), *alo = arm_named(dbs[d][1]),
          *lim = arm_named(dbs[d][2]);
    printf("\n== %s: ratios of mean rows/s, 95%% intervals ==\n", dbs[d][3]);
    char l[64];
    snprintf(l, sizeof(l), "EO/limit");
    print_ratio(l, eo, lim);
    snprintf(l, sizeof(l), "ALO/limit");
    print_ratio(l, alo, lim);
    snprintf(l, sizeof(l), "EO/ALO");
    print_ratio(l, eo, alo);
  }
  printf("\n== cost per checkpoint: one epoch of %" PRIu64
         " upserted rows (the same keys every epoch), %" PRIu64
         " warm-up + %" PRIu64 " epochs per fork; ms ==\n",
         O.epoch_rows, O.epoch_warmup, O.epochs);
  const char *mic[2][3] = {{"pg-2pc-eo", "pg-2pc-alo", "PostgreSQL"},
                           {"my-2pc-eo", "my-2pc-alo", "MariaDB"}};
  for (int d = 0; d < 2; d++) {
    if ((d == 0 && !O.do_pg) || (d == 1 && !O.do_my)) continue;
    arm_t *eo = arm_named(mic[d][0]), *alo = arm_named(mic[d][1]);
    printf(" %s (fork means: mean, 95%% CI; pooled epochs: quantiles)\n",
           mic[d][2]);
    print_stat("EO prepare", eo->prep_means, eo->n, 1, "ms");
    print_hist("EO prepare", eo->h_prep);
    print_stat("EO commit", eo->commit_means, eo->n, 1, "ms");
    print_hist("EO commit", eo->h_commit);
    print_stat("ALO flush", alo->prep_means, alo->n, 1, "ms");
    print_hist("ALO flush", alo->h_prep);
    print_stat("EO epoch", eo->epoch_means, eo->n, 1, "ms");
    print_stat("ALO epoch", alo->epoch_means, alo->n, 1, "ms");
    print_ratio("epoch EO/ALO", eo, alo);
  }
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].n_failed)
      printf("WARNING: %s: %zu failed forks (not counted)\n", arms[i].name,
             arms[i].n_failed);
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: sluice-bench-db [--db pg|mariadb|both] [--rounds R]\n"
          "         [--warmup W] [--iterations I] [--records N] [--keys K]\n"
          "         [--parallelism P] [--checkpoint-ms MS] [--epochs E]\n"
          "         [--epoch-warmup E] [--epoch-rows R] [--durable 0|1]\n"
          "         [--seed S] [--out DIR] [--sluice PATH]\n"
          "       sluice-bench-db --report DIR/db-raw.csv\n");
}

static int parse_args(int argc, char **argv) {
  O.do_pg = O.do_my = true;
  O.rounds = 8;
  O.warmup = 1;
  O.iterations = 2;
  O.records = 1000000;
  O.keys = 10000;
  O.parallelism = 2;
  O.ckpt_ms = 1000;
  O.epochs = 40;
  O.epoch_warmup = 5;
  O.epoch_rows = 1000;
  O.seed = 1;
  O.is_durable = true;
  O.out_dir = "bench/results/db";
  O.sluice[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench-db: %s needs a value\n", a);
      return -1;
    }
    const char *v = argv[++i];
    uint64_t *u = NULL, min = 1;
    if (strcmp(a, "--db") == 0) {
      O.do_pg = strcmp(v, "pg") == 0 || strcmp(v, "both") == 0;
      O.do_my = strcmp(v, "mariadb") == 0 || strcmp(v, "both") == 0;
      if (!O.do_pg && !O.do_my) {
        fprintf(stderr, "bench-db: --db is pg, mariadb or both, not '%s'\n",
                v);
        return -1;
      }
      continue;
    } else if (strcmp(a, "--out") == 0) {
      O.out_dir = v;
      continue;
    } else if (strcmp(a, "--report") == 0) {
      O.report_only = v;
      continue;
    } else if (strcmp(a, "--sluice") == 0) {
      snprintf(O.sluice, sizeof(O.sluice), "%s", v);
      continue;
    } else if (strcmp(a, "--durable") == 0) {
      if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        fprintf(stderr, "bench-db: --durable is 0 or 1, not '%s'\n", v);
        return -1;
      }
      O.is_durable = v[0] == '1';
      continue;
    } else if (strcmp(a, "--rounds") == 0) u = &O.rounds;
    else if (strcmp(a, "--warmup") == 0) u = &O.warmup, min = 0;
    else if (strcmp(a, "--iterations") == 0) u = &O.iterations;
    else if (strcmp(a, "--records") == 0) u = &O.records;
    else if (strcmp(a, "--keys") == 0) u = &O.keys;
    else if (strcmp(a, "--parallelism") == 0) u = &O.parallelism;
    else if (strcmp(a, "--checkpoint-ms") == 0) u = &O.ckpt_ms;
    else if (strcmp(a, "--epochs") == 0) u = &O.epochs;
    else if (strcmp(a, "--epoch-warmup") == 0) u = &O.epoch_warmup, min = 0;
    else if (strcmp(a, "--epoch-rows") == 0) u = &O.epoch_rows;
    else if (strcmp(a, "--seed") == 0) u = &O.seed, min = 0;
    else {
      fprintf(stderr, "bench-db: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (!sl_bench_parse_u64(v, u) || *u < min) {
      fprintf(stderr, "bench-db: %s needs a whole number >= %" PRIu64
              ", not '%s'\n", a, min, v);
      return -1;
    }
  }
  if (O.rounds > 256) {
    fprintf(stderr, "bench-db: --rounds is at most 256\n");
    return -1;
  }
  if (O.keys > 100000000) {
    fprintf(stderr, "bench-db: --keys is at most 100000000\n");
    return -1;
  }
  if (O.report_only) return 0;
  if (O.sluice[0] == '\0') {
    /* The sluice command next to this program (both in the build's bin/). */
    if (sl_bench_sibling("sluice", O.sluice, sizeof(O.sluice)) != 0) {
      fprintf(stderr, "bench-db: cannot find myself; give --sluice\n");
      return -1;
    }
  }
  if (access(O.sluice, X_OK) != 0) {
    fprintf(stderr, "bench-db: %s is not an executable (give --sluice)\n",
            O.sluice);
    return -1;
  }
  return 0;
}

static int start_servers(void) {
  sl_error_t *err = NULL;
  if (O.do_pg) {
    sl_server_opts_t so;
    sl_server_opts_init(&so, SL_SERVER_POSTGRES);
    so.is_durable = O.is_durable;
    so.base_dir = work;
    if (sl_server_start(&so, &pg_srv, &err) != SL_OK)
      return fail(err, "starting PostgreSQL");
  }
  if (O.do_my) {
    sl_server_opts_t so;
    sl_server_opts_init(&so, SL_SERVER_MARIADB);
    so.is_durable = O.is_durable;
    so.base_dir = work;
    if (sl_server_start(&so, &my_srv, &err) != SL_OK)
      return fail(err, "starting MariaDB");
  }
  return 0;
}

static void print_versions(void) {
  sl_error_t *err = NULL;
  char *t = NULL;
  if (pg_srv) {
    PGconn *c = NULL;
    if (sl_pg_connect(sl_server_conninfo(pg_srv), &c, &err) == SL_OK &&
        sl_pg_query_text(c, "SELECT version()", &t, &err) == SL_OK) {
      printf("# server: %s\n", t);
      sl_free(t);
    }
    sl_error_destroy(err);
    err = NULL;
    PQfinish(c);
  }
  if (my_srv) {
    MYSQL *c = NULL;
    if (sl_my_connect(my_srv, sl_server_port(my_srv), &c, &err) == SL_OK &&
        sl_my_query_text(c, "SELECT version()", &t, &err) == SL_OK) {
      printf("# server: MariaDB %s\n", t);
      sl_free(t);
    }
    sl_error_destroy(err);
    if (c) mysql_close(c);
  }
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) return 2;
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < N_ARMS; i++) {
    arms[i].h_prep = malloc(sizeof(sl_bench_hist_t));
    arms[i].h_commit = malloc(sizeof(sl_bench_hist_t));
    arms[i].h_epoch = malloc(sizeof(sl_bench_hist_t));
    if (!arms[i].h_prep || !arms[i].h_commit || !arms[i].h_epoch) return 2;
    sl_bench_hist_init(arms[i].h_prep);
    sl_bench_hist_init(arms[i].h_commit);
    sl_bench_hist_init(arms[i].h_epoch);
  }
  if (O.report_only) {
    int rrc = analyse(O.report_only);
    if (rrc == 0) report();
    for (size_t i = 0; i < N_ARMS; i++) {
      free(arms[i].h_prep);
      free(arms[i].h_commit);
      free(arms[i].h_epoch);
    }
    return rrc == 0 ? 0 : 1;
  }
  if (mkdir(O.out_dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "bench-db: cannot create %s: %s\n", O.out_dir,
            strerror(errno));
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(work, sizeof(work), "%s/sl-bench-db-XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(work) == NULL) {
    fprintf(stderr, "bench-db: mkdtemp: %s\n", strerror(errno));
    return 2;
  }
  /* The servers run as postgres/mysql when we are root: they must be able
   * to enter the directory their data directory is in. */
  chmod(work, 0755);
  char rawp[PATH_MAX];
  snprintf(rawp, sizeof(rawp), "%s/db-rows.csv", O.out_dir);
  unlink(rawp);
  snprintf(rawp, sizeof(rawp), "%s/db-raw.csv", O.out_dir);
  raw = fopen(rawp, "w");
  if (raw == NULL) {
    fprintf(stderr, "bench-db: cannot write %s\n", rawp);
    return 2;
  }
  fprintf(raw, "arm,round,index,what,v1,v2,v3\n");
  fprintf(raw, "#opts,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
          ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", O.records,
          O.keys, O.parallelism, O.ckpt_ms, O.warmup, O.iterations,
          O.epoch_rows, O.epoch_warmup, O.epochs);
  int rc = 1;
  printf("# sluice-bench-db: %" PRIu64 " rounds; durable servers: %s; "
         "sluice %s; load average %.2f at start\n",
         O.rounds, O.is_durable ? "yes" : "no", O.sluice, sl_bench_loadavg1());
  if (start_servers() != 0) goto out;
  print_versions();
  if (make_data() != 0) goto out;
  printf("# data: %" PRIu64 " after-images, %" PRId64
         " accounts in the final table, sum of balances %" PRId64 "\n",
         O.records, expect_accounts, expect_sum);
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
      cur_round = (int)r;
      if (a->kind >= K_2PC_EO) {
        (void)micro_fork(a, (int)r);
        continue;
      }
      sl_bench_opts_t bo;
      sl_bench_opts_init(&bo);
      bo.name = a->name;
      bo.unit = "rows/s";
      bo.n_forks = 1;
      bo.n_warmup = (int)O.warmup;
      bo.n_iterations = (int)O.iterations;
      bo.seed = O.seed + r;
      bo.fork_timeout_sec = 1800;
      sl_bench_fn_t fn = {.label = a->name, .iter = run_iter, .arg = a};
      sl_bench_result_t *res = NULL;
      if (sl_bench_run(&bo, &fn, &res) != SL_OK) {
        fprintf(stderr, "\nbench-db: the harness failed\n");
        goto out;
      }
      sl_bench_fork_t *fk = &res->forks[0];
      for (size_t v = 0; v < fk->n_values; v++)
        fprintf(raw, "%s,%" PRIu64 ",%zu,%s,%.1f,,\n", a->name, r, v,
                v < O.warmup ? "warmup" : "run", fk->values[v]);
      if (!fk->is_ok) {
        fprintf(raw, "%s,%" PRIu64 ",0,failed,,,\n", a->name, r);
        fprintf(stderr, "\nbench-db: %s round %" PRIu64 " failed: %s\n",
                a->name, r, fk->error);
      }
      sl_bench_result_destroy(res);
    }
    fprintf(stderr, "\n");
    fflush(raw);
  }
  fclose(raw);
  raw = NULL;
  if (analyse(rawp) != 0) goto out;
  report();
  printf("# load average %.2f at the end\n", sl_bench_loadavg1());
  rc = 0;
  for (size_t i = 0; i < N_ARMS; i++)
    if (arms[i].n_failed) rc = 1;
out:
  sl_server_destroy(pg_srv);
  sl_server_destroy(my_srv);
  if (raw) fclose(raw);
  for (size_t i = 0; i < N_ARMS; i++) {
    free(arms[i].h_prep);
    free(arms[i].h_commit);
    free(arms[i].h_epoch);
  }
  if (!getenv("SL_TEST_KEEP")) sl_bench_rm_rf(work);
  return rc;
}
