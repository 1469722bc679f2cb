/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the postgres-cdc source: the snapshot half
 * (src/connectors/postgres/pg_cdc_snap.c): the SQL session, the start
 * checks, the table patterns and descriptions, the publication, chunk
 * planning and membership, the exact snapshot of a chunk (its
 * visibility, as pg_current_snapshot() gives it) and the chunk reader.
 * The replication transport and the pgoutput decoder are pg_repl.h and
 * pgoutput_decode.h.  Every function that talks to a server takes
 * `server`, the "host:port" text its messages name; every message starts
 * with "postgres-cdc: ".  See docs/cdc-postgres.md.
 *
 * @thread any: each function works on the caller's thread with the
 * connection and objects it is given (one thread at a time per
 * connection); nothing here is shared or locked (@locks none).
 */
#ifndef SL_PG_CDC_INT_H
#define SL_PG_CDC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "connectors/postgres/pgoutput_decode.h"
#include "sluice/sluice.h"

/* ------------------------------------------------------------------ */
/* The session and the start checks.                                   */

/*
 * Connect a normal SQL session (not a replication one) with the settings
 * values are read in: client_encoding UTF8, DateStyle ISO, TimeZone UTC,
 * IntervalStyle postgres, extra_float_digits 3, bytea_output hex, and
 * synchronous_commit local (sluice's own small writes, such as heartbeat
 * messages, never wait for a synchronous standby).  connect_timeout_ms 0:
 * libpq's default.  *out_server gets "host:port" (at least 128 bytes).
 * @return SL_OK; SL_EIO "postgres-cdc: cannot connect to <host:port>:
 * <libpq's reason>"; SL_ENOMEM.
 * @ownership the caller closes *out with PQfinish.
 */
int sl__pgc_connect(const char *conninfo, uint32_t connect_timeout_ms,
                    PGconn **out, char *out_server, sl_error_t **out_err);

/*
 * Server-wide checks, in this order, each with its own message naming
 * `server`: wal_level is logical ("... wal_level is 'replica': set
 * wal_level = logical and restart the server"); the session's user has
 * REPLICATION (or is a superuser); when need_slot: a free replication slot
 * (max_replication_slots above the number of slots) and a free WAL sender
 * (max_wal_senders above the number of senders).  SL_EINVAL for a setting
 * or a privilege, SL_EIO when a query fails.
 */
int sl__pgc_check_server(PGconn *c, const char *server, bool need_slot,
                         sl_error_t **out_err);

/* One captured table. */
typedef struct sl__pgc_table_name_s {
  char *schema; /* namespace */
  char *table;
} sl__pgc_table_name_t;

/*
 * Resolve patterns "schema.table" to ordinary tables (relkind 'r'),
 * sorted by (schema, table), without duplicates.  In each part `*`
 * matches any run of characters and `?` one; everything else is literal
 * (also `%`, `_` and `"`).  A pattern without a dot, or one that matches no
 * table, is SL_EINVAL naming the pattern and `server`.
 */
int sl__pgc_resolve_tables(PGconn *c, const char *server,
                           const char *const *patterns, uint32_t n_patterns,
                           sl__pgc_table_name_t **out_names, uint32_t *out_n,
                           sl_error_t **out_err);
void sl__pgc_table_names_free(sl__pgc_table_name_t *names, uint32_t n);

/* How a primary-key column's values are kept, compared and written. */
typedef enum sl__pgc_key_kind_e {
  SL_PGC_KEY_INT = 1,  /* int2, int4, int8: int64 */
  SL_PGC_KEY_TEXT = 2  /* text, varchar: UTF-8 bytes, compared byte by
                          byte (COLLATE "C" in every SQL sluice writes);
                          uuid: its lowercase text, which sorts as the
                          uuid does */
} sl__pgc_key_kind_t;

typedef struct sl__pgc_table_s {
  char *schema, *name;
  uint32_t oid;
  char replident;      /* pg_class.relreplident: 'd', 'n', 'f', 'i' */
  /* The columns pgoutput sends, in attnum order (dropped and generated
   * columns are left out: pgoutput of PostgreSQL 15 does not send the
   * latter).  rel is a relation as a Relation message would describe
   * the table (oid, names, columns with type oid and typmod, key flags
   * on the primary-key columns), so that snapshot values convert with
   * sl__pgo_value exactly as stream values do; rel.n_cols = n_cols. */
  sl_pgo_relation_t rel;
  uint32_t n_cols;
  sl_schema_t *schema_; /* one field per column, same order and names,
                           types from sl__pgo_column_type, nullable unless
                           attnotnull */
  uint32_t n_pk;        /* >= 1 (a table without one is refused) */
  uint32_t *pk;         /* column indexes, in the key's order */
  uint8_t *key_kind;    /* sl__pgc_key_kind_t per pk column */
} sl__pgc_table_t;

/*
 * Describe schema.table from the catalog.  Errors (SL_EINVAL/SL_ENOTSUP)
 * name the table and `server`: no primary key; a primary-key column of a
 * type other than int2/int4/int8/text/varchar/uuid; a column whose type
 * sl__pgo_column_type refuses (its message).
 * @ownership *out is freed with sl__pgc_table_destroy.
 */
int sl__pgc_table_describe(PGconn *c, const char *server, const char *schema,
                           const char *table, sl__pgc_table_t **out,
                           sl_error_t **out_err);
void sl__pgc_table_destroy(sl__pgc_table_t *t);

/*
 * The user may read the table: `SELECT 1 FROM s.t LIMIT 0` (42501 gives a
 * message naming the user, the table and `server`).  REPLICA IDENTITY
 * FULL when need_full (old rows of updates and deletes): otherwise
 * SL_EINVAL "... table s.t has REPLICA IDENTITY DEFAULT: updates and
 * deletes would carry no old row; run ALTER TABLE s.t REPLICA IDENTITY
 * FULL".
 */
int sl__pgc_check_table(PGconn *c, const char *server,
                        const sl__pgc_table_t *t, bool need_full,
                        sl_error_t **out_err);

/*
 * The publication `pub`: when it exists, every table must be in it
 * (pg_publication_tables) and it must publish insert, update, delete and
 * truncate, else SL_EINVAL naming the publication, the first missing
 * table or action, and the statement that fixes it.  When it does not
 * exist and may_create: CREATE PUBLICATION pub FOR TABLE ... (all the
 * tables); else SL_EINVAL.  *out_created (may be NULL) says it was made.
 */
int sl__pgc_publication_ensure(PGconn *c, const char *server, const char *pub,
                               const sl__pgc_table_t *const *tables,
                               uint32_t n_tables, bool may_create,
                               bool *out_created, sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* Chunks.                                                               */

/* One primary-key value of a chunk bound, of the column's kind. */
typedef struct sl__pgc_kv_s {
  int64_t i;  /* SL_PGC_KEY_INT */
  uint8_t *p; /* SL_PGC_KEY_TEXT (owned) */
  uint32_t len;
} sl__pgc_kv_t;

/* Rows whose primary key k satisfies low <= k < high, tuples compared
 * left to right (integers as numbers, text byte by byte); low NULL for
 * the first chunk, high NULL for the last; n_key values each. */
typedef struct sl__pgc_chunk_s {
  uint32_t id; /* 0, 1, ... in key order */
  sl__pgc_kv_t *low, *high;
} sl__pgc_chunk_t;

typedef struct sl__pgc_chunks_s {
  uint32_t n_key;
  uint8_t *key_kind; /* sl__pgc_key_kind_t */
  uint32_t n;
  sl__pgc_chunk_t *chunks;
} sl__pgc_chunks_t;

/*
 * Plan the chunks of t by its primary key: a single integer key whose
 * spread (max - min + 1) / count(*) is at most 1000 is cut into even
 * ranges of about chunk_rows rows; any other key at every chunk_rows-th
 * key in key order.  An empty table gets one unbounded chunk.  chunk_rows
 * >= 1.
 * @ownership *out is freed with sl__pgc_chunks_free.
 */
int sl__pgc_plan_chunks(PGconn *c, const char *server,
                        const sl__pgc_table_t *t, uint64_t chunk_rows,
                        sl__pgc_chunks_t **out, sl_error_t **out_err);
void sl__pgc_chunks_free(sl__pgc_chunks_t *cl);

/* The chunk list as bytes (in the enumerator's and the stream's state) and
 * back.  The decoder checks every length, count and kind, that the bounds
 * chain (each low is the previous high; first low and last high
 * unbounded), that ids run 0..n-1 and that bounds increase; else
 * SL_ECORRUPT saying what and at which byte offset. */
int sl__pgc_chunks_encode(const sl__pgc_chunks_t *cl, sl_bytes_t *out);
int sl__pgc_chunks_decode(const uint8_t *p, size_t len,
                          sl__pgc_chunks_t **out, sl_error_t **out_err);

/* The chunk that holds row's primary key (row of t->schema_; binary
 * search).  A NULL key field is SL_EINVAL (primary keys are not null). */
int sl__pgc_chunk_find(const sl__pgc_chunks_t *cl, const sl__pgc_table_t *t,
                       const sl_row_t *row, uint32_t *out_chunk,
                       sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* The exact snapshot of a chunk.                                       */

/*
 * A snapshot as pg_current_snapshot() gives it ("xmin:xmax:xip,..."):
 * full 64-bit transaction ids; xip sorted ascending.
 */
typedef struct sl__pgc_snap_s {
  uint64_t xmin, xmax;
  uint32_t n_xip;
  uint64_t *xip; /* owned */
} sl__pgc_snap_t;

/* Parse the text form.  @return SL_OK; SL_EPARSE. */
int sl__pgc_snap_parse(const char *text, sl__pgc_snap_t *out);
void sl__pgc_snap_free(sl__pgc_snap_t *s);
int sl__pgc_snap_encode(const sl__pgc_snap_t *s, sl_bytes_t *out);
/* Decode at p (at most len bytes); *out_used gets the bytes read.
 * SL_ECORRUPT for a truncated or inconsistent snapshot (xmin > xmax, an
 * xip outside [xmin, xmax) or not ascending). */
int sl__pgc_snap_decode(const uint8_t *p, size_t len, sl__pgc_snap_t *out,
                        size_t *out_used, sl_error_t **out_err);

/*
 * Whether the effects of a committed transaction whose top-level xid is
 * `xid` (32 bits, as pgoutput's Begin carries it) were visible to the
 * snapshot: xid < xmin, or xid < xmax and not in xip.  The 32-bit xid is
 * widened with the epoch that puts it nearest xmax.
 */
bool sl__pgc_snap_visible(const sl__pgc_snap_t *s, uint32_t xid);

/* The rows of one chunk, as sluice rows (+I) of t->schema_. */
typedef struct sl__pgc_rows_s {
  const sl_schema_t *schema;
  uint32_t n, cap;
  uint8_t **data; /* binary rows, each owned */
  uint32_t *len;
} sl__pgc_rows_t;

void sl__pgc_rows_init(sl__pgc_rows_t *r, const sl_schema_t *schema);
void sl__pgc_rows_close(sl__pgc_rows_t *r);

/*
 * Read one chunk: BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; the
 * transaction's snapshot (pg_current_snapshot(), its first statement);
 * the chunk's SELECT (text values converted with sl__pgo_value through
 * t->rel, in key order); HIGH = pg_current_wal_insert_lsn() after the
 * SELECT; COMMIT.  Every transaction visible to *out_snap committed before
 * HIGH (its commit record was written before the snapshot was taken), so
 * a change whose commit LSN is at or past HIGH was not visible.
 * SL_INJECT points: "pgcdc.snapshot.after_snapshot" (snapshot taken,
 * before the SELECT), "pgcdc.snapshot.before_high".
 * On error *out_rows may hold some rows (the caller discards them).
 */
int sl__pgc_read_chunk(PGconn *c, const char *server, const sl__pgc_table_t *t,
                       const sl__pgc_chunks_t *cl, const sl__pgc_chunk_t *ch,
                       sl__pgc_snap_t *out_snap, uint64_t *out_high,
                       sl__pgc_rows_t *out_rows, sl_error_t **out_err);

#endif
