/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the MariaDB/MySQL change data capture source: the snapshot
 * half (src/connectors/mariadb/cdc_*.c).  cdc_check.c holds the start
 * checks and the table patterns, cdc_types.c the column type mapping and
 * the table description, cdc_chunks.c the chunk planning and the chunk
 * list codec (enumerator state), cdc_snapshot.c the chunk reader (LOW,
 * SELECT, HIGH) and the backfill merge seam, cdc_member.c chunk
 * membership in the key column's collation, cdc_server_ids.c the free
 * server-id range, cdc_agree.c the check that tables sharing one output
 * agree.  The binlog decoder and the replication transport live in
 * binlog_decode.{c,h} and are not used here yet.  Every function that talks to a server takes `server`, the
 * "host:port" text its messages name.  See docs/cdc-mariadb.md.
 *
 * @thread any: each function works on the caller's thread with the
 * connection and objects it is given (one thread at a time per
 * connection); nothing here is shared or locked (@locks none).  Objects
 * made here are freed by their _free/_destroy/_close function.
 */
#ifndef SL_MARIADB_CDC_INT_H
#define SL_MARIADB_CDC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* cdc_check.c: start checks and table patterns.                        */

/*
 * Connect to host:port as user (password may be NULL), without a default
 * database, in utf8mb4.  Errors start with "mariadb-cdc: " and name
 * host:port: access denied (SL_EINVAL), or the server unreachable with
 * the OS's reason (SL_EIO), e.g. "mariadb-cdc: cannot connect to
 * 127.0.0.1:1: Connection refused (error 2002: ...)".
 * @ownership the caller closes *out with mysql_close.
 */
int sl__cdc_connect(const char *host, int port, const char *user,
                    const char *password, uint32_t connect_timeout_ms,
                    MYSQL **out, sl_error_t **out_err);

/*
 * Server-wide checks, in this order, each with its own message naming
 * `server` and the setting: log_bin=ON, binlog_format=ROW,
 * binlog_row_image=FULL, @@gtid_binlog_pos readable, REPLICATION SLAVE
 * (from SHOW GRANTS), REPLICATION CLIENT / BINLOG MONITOR (SHOW MASTER
 * STATUS runs).  `user` names the account in messages.
 * @return SL_OK; SL_EINVAL (a setting or a privilege); SL_EIO (a query
 * failed for another reason); SL_ENOMEM.
 */
int sl__cdc_check_server(MYSQL *c, const char *server, const char *user,
                         sl_error_t **out_err);

/* One captured table. */
typedef struct sl__cdc_table_name_s {
  char *db;
  char *table;
} sl__cdc_table_name_t;

/*
 * Resolve table patterns to base tables, sorted by (db, table), without
 * duplicates.  A pattern is `db.table`; in each part `*` matches any run
 * of characters and `?` one character, everything else (including SQL's
 * `%` and `_`) is literal; backquotes are not part of the syntax.
 * `db.*` takes every base table of db.  A pattern without a dot, or one
 * that matches no table, is an error naming the pattern and `server`.
 * @ownership *out_names is freed with sl__cdc_table_names_free.
 */
int sl__cdc_resolve_tables(MYSQL *c, const char *server,
                           const char *const *patterns, uint32_t n_patterns,
                           sl__cdc_table_name_t **out_names,
                           uint32_t *out_n, sl_error_t **out_err);
void sl__cdc_table_names_free(sl__cdc_table_name_t *names, uint32_t n);

/* SELECT on one table: `SELECT 1 FROM db.t LIMIT 0` runs (error 1142 and
 * its kin give a message naming the user, table and server). */
int sl__cdc_check_select(MYSQL *c, const char *server, const char *user,
                         const char *db, const char *table,
                         sl_error_t **out_err);

/*
 * The free server-id range (cdc_server_ids.c): the source's replication
 * connections use the server ids [base, base + n) (pipeline key
 * server_id).  Refused (SL_EINVAL, a message naming the id, who uses it,
 * the pipeline key and a free range) when the range holds the server's
 * own @@server_id or the id of a replica listed by SHOW SLAVE HOSTS
 * (every MariaDB/MySQL replica, and sluice's binlog readers that register
 * with report_host).  Replicas whose Host is own_host (may be NULL) are
 * this job's own readers of an earlier run and do not count: the server
 * keeps a dump thread, and its registration, until it next writes to it.
 * Without the privilege for SHOW SLAVE HOSTS (REPLICATION MASTER ADMIN,
 * MariaDB 10.5.2+), only @@server_id is checked and a warning is logged.
 * An empty range, id 0 or a range past 2^32-1 is SL_EINVAL.
 */
int sl__cdc_check_server_ids(MYSQL *c, const char *server, uint32_t base,
                             uint32_t n, const char *own_host,
                             sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* cdc_types.c: column types and the table description.                */

/* How a column's text (Connector/C text protocol) becomes a value. */
typedef enum sl__cdc_conv_e {
  SL_CDC_CONV_INT = 1,      /* decimal digits -> int32/int64 */
  SL_CDC_CONV_FLOAT = 2,    /* float, double -> float64 */
  SL_CDC_CONV_DECIMAL = 3,  /* decimal(p,s), p <= 18 */
  SL_CDC_CONV_STRING = 4,   /* UTF-8 text (utf8mb4 connection) */
  SL_CDC_CONV_BYTES = 5,    /* raw bytes */
  SL_CDC_CONV_BIT = 6,      /* big-endian bytes -> int64 */
  SL_CDC_CONV_DATE = 7,     /* YYYY-MM-DD -> timestamp at 00:00 UTC */
  SL_CDC_CONV_DATETIME = 8, /* YYYY-MM-DD hh:mm:ss[.f] -> timestamp (UTC) */
  SL_CDC_CONV_TIME = 9      /* [-]h:mm:ss[.f] -> int64 microseconds */
} sl__cdc_conv_t;

/* How a chunk key column's values are kept and written into SQL. */
typedef enum sl__cdc_key_kind_e {
  SL_CDC_KEY_INT = 1,  /* int64 (every integer type and year) */
  SL_CDC_KEY_STR = 2,  /* char/varchar: UTF-8 bytes, compared in the
                          column's collation by the server */
  SL_CDC_KEY_BIN = 3,  /* binary/varbinary: bytes */
  SL_CDC_KEY_TEXT = 4  /* decimal, date, datetime, timestamp: the
                          server's text ([0-9 .:+-] only) */
} sl__cdc_key_kind_t;

typedef struct sl__cdc_col_s {
  char *name;
  char data_type[32];     /* information_schema.COLUMNS.DATA_TYPE */
  char column_type[128];  /* COLUMN_TYPE, e.g. "int(10) unsigned" */
  sl_type_t type;         /* the sluice type (nullable from IS_NULLABLE) */
  uint8_t conv;           /* sl__cdc_conv_t */
  char charset[32];       /* CHARACTER_SET_NAME ("" when none) */
  char collation[64];     /* COLLATION_NAME ("" when none) */
} sl__cdc_col_t;

typedef struct sl__cdc_table_s {
  char *db, *name;
  uint32_t n_cols;
  sl__cdc_col_t *cols; /* ORDINAL_POSITION order */
  sl_schema_t *schema; /* one field per column, same order and names */
  uint32_t n_pk;       /* 0: no primary key */
  uint32_t *pk;        /* column indexes, SEQ_IN_INDEX order */
  uint32_t n_key;      /* chunk key: the primary key or the declared one */
  uint32_t *key;
  uint8_t *key_kind;   /* sl__cdc_key_kind_t per key column */
  bool is_declared_key; /* the chunk key was declared (not the PK) */
} sl__cdc_table_t;

/*
 * Map one column (DATA_TYPE, COLUMN_TYPE, NUMERIC_PRECISION,
 * NUMERIC_SCALE, DATETIME_PRECISION) to a sluice type; pure, no server.
 * @return SL_OK; SL_ENOTSUP with a message naming `what` (e.g.
 * "column `t` of `db`.`x` at host:port") and the type.
 */
int sl__cdc_map_type(const char *data_type, const char *column_type,
                     long precision, long scale, const char *what,
                     sl_type_t *out_type, sl__cdc_conv_t *out_conv,
                     sl_error_t **out_err);

/*
 * Describe db.table from information_schema: its columns mapped to
 * sluice types (an unsupported type is an error naming the column and
 * the type), its primary key, and its chunk key: chunk_key (one column
 * name) when given, else the primary key; a table without either is an
 * error.  A chunk key column must be an integer, char/varchar,
 * binary/varbinary, decimal, date, datetime or timestamp column.
 * @ownership *out is freed with sl__cdc_table_destroy.
 */
int sl__cdc_table_describe(MYSQL *c, const char *server, const char *db,
                           const char *table, const char *chunk_key,
                           sl__cdc_table_t **out, sl_error_t **out_err);
void sl__cdc_table_destroy(sl__cdc_table_t *t);

/*
 * Sharded tables into one output (cdc_agree.c): t[0..n) must have the
 * same columns (names, sluice types with nullability, order) and the
 * same primary key (the same columns, in order) and the same chunk key
 * (the primary key, or the same declared column: a declared key adds the
 * version field to the output).  Else SL_EINVAL naming t[0] and the first
 * table that differs from it, and how (column count, a column's name, a
 * column's type, the primary key or the chunk key).
 */
int sl__cdc_tables_agree(sl__cdc_table_t *const *t, uint32_t n,
                         const char *server, sl_error_t **out_err);

/* Set the session as planning and reading need it: utf8mb4 (values and
 * string bounds are UTF-8) and time_zone '+00:00' (timestamp values and
 * bounds in UTC, the same for the planner and every reader). */
int sl__cdc_session_setup(MYSQL *c, const char *server, sl_error_t **out_err);

/* MariaDB's DATE (is_date) or DATETIME/TIMESTAMP text as microseconds
 * since the epoch (UTC).  @return SL_OK; SL_EOVERFLOW for a zero date or
 * a zero month or day; SL_EPARSE. */
int sl__cdc_parse_temporal(const char *p, unsigned long len, bool is_date,
                           int64_t *out_us);

/*
 * Convert one field of a text-protocol row (p, len; p NULL for SQL NULL)
 * of column `col` into field `field` of b.  Errors name the column.
 */
int sl__cdc_set_field(const sl__cdc_table_t *t, uint32_t col,
                      const char *p, unsigned long len, sl_row_builder_t *b,
                      uint32_t field, sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* cdc_chunks.c: chunk planning and the chunk list codec.               */

/* One key value of a chunk bound, of the key column's kind. */
typedef struct sl__cdc_kv_s {
  int64_t i;     /* SL_CDC_KEY_INT */
  uint8_t *p;    /* the other kinds (owned) */
  uint32_t len;
} sl__cdc_kv_t;

/*
 * A chunk: rows whose chunk key k satisfies low <= k < high (tuples
 * compared left to right, as MariaDB compares row constructors).  The
 * first chunk has no low bound and also holds the rows whose (single,
 * declared) chunk key is NULL; the last has no high bound.  low/high
 * hold n_key values each, or are NULL when unbounded.
 */
typedef struct sl__cdc_chunk_s {
  uint32_t id; /* 0, 1, ... in key order */
  sl__cdc_kv_t *low, *high;
} sl__cdc_chunk_t;

typedef struct sl__cdc_chunks_s {
  char *db, *table;
  uint32_t n_key;
  char **key_names;
  uint8_t *key_kind; /* sl__cdc_key_kind_t */
  uint32_t n;
  sl__cdc_chunk_t *chunks;
} sl__cdc_chunks_t;

typedef struct sl__cdc_plan_opts_s {
  uint64_t chunk_rows;     /* target rows per chunk; 0 selects 8096 */
  double even_factor_min;  /* 0 selects 0.05 */
  double even_factor_max;  /* 0 selects 1000.0 */
} sl__cdc_plan_opts_t;

/*
 * Plan the chunks of table t.  A single integer key whose spread
 * (max - min + 1) / COUNT(*) lies within [even_factor_min,
 * even_factor_max] is cut into even ranges of factor * chunk_rows key
 * values; any other key is cut at sampled bounds (every chunk_rows-th key
 * in key order, stepping past duplicates of a non-unique declared key).
 * An empty table gets one unbounded chunk.  *out_is_even tells which way
 * was taken (may be NULL).  Sets c's session as sl__cdc_session_setup
 * does (bounds are read in UTF-8 and UTC, as the readers compare them).
 * @ownership *out is freed with sl__cdc_chunks_free.
 */
int sl__cdc_plan_chunks(MYSQL *c, const char *server,
                        const sl__cdc_table_t *t,
                        const sl__cdc_plan_opts_t *opts,
                        sl__cdc_chunks_t **out, bool *out_is_even,
                        sl_error_t **out_err);
void sl__cdc_chunks_free(sl__cdc_chunks_t *cl);

/*
 * The chunk list as bytes (for the enumerator's state), and back.  The
 * decoder checks every length, count and kind, that bounds chain (each
 * chunk's low is the previous chunk's high, the first low and the last
 * high unbounded), that ids run 0..n-1, that integer bounds increase and
 * that text bounds use [0-9 .:+-] only; anything else is SL_ECORRUPT
 * with a message saying what and where (byte offset).
 */
int sl__cdc_chunks_encode(const sl__cdc_chunks_t *cl, sl_bytes_t *out);
int sl__cdc_chunks_decode(const uint8_t *p, size_t len,
                          sl__cdc_chunks_t **out, sl_error_t **out_err);

/* Append the chunk's WHERE condition over the key columns to b (no
 * "WHERE"): "1=1" for a single unbounded chunk. */
int sl__cdc_chunk_where(const sl__cdc_chunks_t *cl, const sl__cdc_chunk_t *ch,
                        sl_bytes_t *b);

/*
 * Whether row (of t->schema, as the snapshot or the binlog gives it) lies
 * in chunk ch of cl (planned for t), as the server's WHERE would decide:
 * for the backfill's in-chunk predicate and the binlog phase's filter.
 * Integer, binary and text keys (decimal, date, datetime, timestamp,
 * bounds parsed as the snapshot parses values) compare here; a NULL key
 * lies in the first chunk only.  char/varchar keys compare in the
 * column's collation, which only the server knows: SL_ENOTSUP.
 * @return SL_OK with *out_is_in; SL_ENOTSUP; SL_EINVAL when a bound does
 * not parse as the column's type.
 */
int sl__cdc_chunk_contains(const sl__cdc_chunks_t *cl,
                           const sl__cdc_chunk_t *ch, const sl__cdc_table_t *t,
                           const sl_row_t *row, bool *out_is_in,
                           sl_error_t **out_err);

/*
 * Compare key column k (of cl's key, t->key[k] in the row) of row with
 * the bound value v as sl__cdc_chunk_contains does: *out_cmp < 0, 0, > 0.
 * The row's key value must not be NULL.  char/varchar: SL_ENOTSUP.
 */
int sl__cdc_key_cmp(const sl__cdc_chunks_t *cl, const sl__cdc_table_t *t,
                    uint32_t k, const sl_row_t *row, const sl__cdc_kv_t *v,
                    int *out_cmp, sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* cdc_member.c: chunk membership for every key kind.                   */

typedef struct sl__cdc_member_s sl__cdc_member_t;

/*
 * A membership checker for the chunk list cl of table t (t and cl must
 * outlive it).  char/varchar key columns compare in the column's
 * collation (t->cols[].collation): the binary collations of UTF-8 and
 * ascii (utf8mb4_bin, utf8mb3_bin, ascii_bin: PAD SPACE; their _nopad_bin
 * forms: NO PAD) compare here byte by byte; any other collation is asked
 * of the server over c, whose session sl__cdc_session_setup has set (c
 * is only used when such a column has to decide; NULL is allowed when
 * no key column needs the server).  Answers are cached by key value.
 * @ownership *out is freed with sl__cdc_member_close (c stays the
 * caller's).
 */
int sl__cdc_member_open(MYSQL *c, const char *server, const sl__cdc_table_t *t,
                        const sl__cdc_chunks_t *cl, sl__cdc_member_t **out,
                        sl_error_t **out_err);
/* Whether row's chunk key lies in chunk ch (of cl), as the chunk's WHERE
 * decides on the server.  A NULL key lies in the first chunk. */
int sl__cdc_member_contains(sl__cdc_member_t *m, const sl__cdc_chunk_t *ch,
                            const sl_row_t *row, bool *out_in,
                            sl_error_t **out_err);
/* The id of the chunk that holds row (binary search over the bounds;
 * server comparisons batched, up to 64 bounds a query). */
int sl__cdc_member_find(sl__cdc_member_t *m, const sl_row_t *row,
                        uint32_t *out_chunk, sl_error_t **out_err);
/* Round trips made so far (for tests and metrics). */
uint64_t sl__cdc_member_queries(const sl__cdc_member_t *m);
void sl__cdc_member_close(sl__cdc_member_t *m);

/* ------------------------------------------------------------------ */
/* cdc_snapshot.c: positions, the chunk reader and the merge seam.      */

#define SL_CDC_GTID_MAX 1024
#define SL_CDC_FILE_MAX 256

/*
 * A binlog position as the snapshot sees it: MariaDB's GTID position
 * (one domain-server-seq per domain, comma-separated, possibly empty)
 * and the binlog file and offset.
 */
typedef struct sl__cdc_pos_s {
  char gtid[SL_CDC_GTID_MAX];
  char file[SL_CDC_FILE_MAX];
  uint64_t offset;
} sl__cdc_pos_t;

/* Read the server's current position: @@gtid_binlog_pos and SHOW MASTER
 * STATUS. */
int sl__cdc_pos_current(MYSQL *c, const char *server, sl__cdc_pos_t *out,
                        sl_error_t **out_err);

/*
 * Compare two positions of one server.  *out_cmp < 0, 0, > 0.  GTID
 * positions compare per domain by sequence number (a domain missing on
 * one side counts as 0); they are used when both sides have one, else
 * (file number, offset).  SL_EINVAL when a GTID position does not parse,
 * or the two are not ordered (a < b in one domain and a > b in another).
 */
int sl__cdc_pos_cmp(const sl__cdc_pos_t *a, const sl__cdc_pos_t *b,
                    int *out_cmp, sl_error_t **out_err);

/* The rows of one chunk, as sluice rows (+I) of t->schema. */
typedef struct sl__cdc_rows_s {
  const sl_schema_t *schema;
  uint32_t n, cap;
  uint8_t **data; /* binary rows, each owned */
  uint32_t *len;
} sl__cdc_rows_t;

void sl__cdc_rows_init(sl__cdc_rows_t *r, const sl_schema_t *schema);
void sl__cdc_rows_close(sl__cdc_rows_t *r);
/* Append a copy of row. */
int sl__cdc_rows_add(sl__cdc_rows_t *r, const sl_row_t *row);
static inline void sl__cdc_rows_get(const sl__cdc_rows_t *r, uint32_t i,
                                    sl_row_t *out) {
  sl_row_view(out, r->schema, r->data[i], r->len[i]);
}

/*
 * Read one chunk of t: LOW, the chunk's SELECT (key order), HIGH.
 * LOW is exact: the SELECT runs in a transaction started WITH CONSISTENT
 * SNAPSHOT, and LOW is that snapshot's binlog position
 * (Binlog_snapshot_file / Binlog_snapshot_position) with its GTID
 * position (BINLOG_GTID_POS of that file and offset).  HIGH is the
 * current position after the SELECT (see docs/cdc-mariadb.md, "Chunks").
 * The connection's session is set to time_zone '+00:00' and utf8mb4.
 * Rows go to *out (initialised by the caller with t->schema); on error
 * *out may hold some of them and *out_low may be written (the caller
 * discards both: a failed chunk is read again from the start).
 * SL_INJECT points: "cdc.snapshot.after_low", "cdc.snapshot.before_high".
 */
int sl__cdc_read_chunk(MYSQL *c, const char *server, const sl__cdc_table_t *t,
                       const sl__cdc_chunks_t *cl, const sl__cdc_chunk_t *ch,
                       sl__cdc_pos_t *out_low, sl__cdc_pos_t *out_high,
                       sl__cdc_rows_t *out, sl_error_t **out_err);

/*
 * The backfill seam: one change decoded from the binlog between LOW and
 * HIGH, as full row images of t->schema (binlog_row_image=FULL).
 */
typedef struct sl__cdc_change_s {
  sl_row_kind_t kind;  /* SL_ROW_INSERT, SL_ROW_UPDATE_AFTER (an update:
                          before and after), SL_ROW_DELETE */
  const sl_row_t *before; /* updates and deletes */
  const sl_row_t *after;  /* inserts and updates */
} sl__cdc_change_t;

/* Whether a row (its chunk key) lies in the chunk being backfilled. */
typedef bool (*sl__cdc_in_chunk_fn)(void *ctx, const sl_row_t *row);

/*
 * Merge changes (in binlog order) into a chunk's rows, keyed by the
 * table's primary key (key columns pk[0..n_pk)): an insert or the after
 * image of an update replaces or adds the row when in_chunk says its key
 * is in the chunk, and removes it otherwise (it moved out); a delete,
 * and the before image of an update whose primary key changed, remove
 * the row.  The result keeps the rows in their first-seen order, new
 * rows at the end.  in_chunk NULL: every row is in the chunk.
 */
int sl__cdc_merge(sl__cdc_rows_t *rows, const uint32_t *pk, uint32_t n_pk,
                  const sl__cdc_change_t *changes, size_t n_changes,
                  sl__cdc_in_chunk_fn in_chunk, void *ctx,
                  sl_error_t **out_err);

#endif
