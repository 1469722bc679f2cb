/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The change stream of the mariadb-cdc source: from a resumable binlog
 * position (sl_binlog_pos_t), read the binlog through the transport
 * (binlog_reader.h), decode it (binlog_decode.h) and give the row changes
 * of the captured tables as sluice rows of each table's described schema
 * (sl__cdc_table_t.schema, the snapshot's), each with its transaction's
 * GTID, its event and row indexes, the event time and the resumable
 * position after it.  Used blocking by the binlog split (reconnect with
 * backoff, heartbeats) and non-blocking (to the current end of the
 * binlog) by a chunk's backfill.  docs/cdc-mariadb.md "Change stream".
 *
 * Decisions (the why is next to the code, cdc_stream.c):
 * - A position is the GTID state of the last completed transaction plus
 *   skip_events (events of the next transaction counted from its GTID
 *   event, which is event 0) and skip_rows (rows of the event at index
 *   skip_events): a restart inside a transaction reads it again from its
 *   start and passes over exactly what was returned.
 * - Before streaming from a GTID state (at open and at every reconnect),
 *   the state is checked against the server's @@gtid_binlog_pos: a domain
 *   missing there or behind the position means the server's identity or
 *   history changed (RESET MASTER, a restore): SL_EIO naming both states.
 *   A position the server cannot serve (purged, or a GTID it never wrote)
 *   is its error 1236 at the first read: SL_EIO with its message.
 * - DDL on a captured table (ALTER, DROP, RENAME, TRUNCATE, CREATE TABLE,
 *   CREATE/DROP INDEX of it, DROP DATABASE of its database) stops the
 *   stream with SL_ENOTSUP naming the table, the place and the statement;
 *   other statements are ignored.  A TABLE_MAP of a captured table that
 *   does not match its description (column count, sluice types,
 *   nullability, names) is SL_ENOTSUP as well.
 *
 * @thread one thread at a time calls open/next/pos/close (the source's
 * I/O thread); sl__cdc_stream_interrupt may be called from any thread
 * between open and close.  @locks internal (see cdc_stream.c).
 */
#ifndef SL_MARIADB_CDC_STREAM_H
#define SL_MARIADB_CDC_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "connectors/mariadb/binlog_decode.h"
#include "connectors/mariadb/cdc_int.h"
#include "sluice/sluice.h"

typedef struct sl__cdc_stream_s sl__cdc_stream_t;

typedef struct sl__cdc_stream_opts_s {
  const char *host;
  int port;
  const char *user, *password; /* password may be NULL */
  const char *server;          /* "host:port", for messages */
  uint32_t server_id;          /* this replica's id */
  /* Resume here (GTID state + skip_events/skip_rows; file/offset fallback
   * when the state is empty and file is set). */
  const sl_binlog_pos_t *start;
  /* Captured tables (borrowed, outlive the stream). */
  sl__cdc_table_t *const *tables;
  uint32_t n_tables;
  /* End (SL_ENOTFOUND) at the current end of the binlog: backfill. */
  bool is_non_blocking;
  uint32_t heartbeat_ms;       /* 0: none */
  uint32_t connect_timeout_ms; /* 0: 10 s */
  /* Give up reconnecting after this long (0: 60 s); backoff 100 ms
   * doubling to 5 s. */
  uint32_t max_reconnect_ms;
} sl__cdc_stream_opts_t;

typedef enum sl__cdc_ev_kind_e {
  SL_CDC_EV_ROW = 1,     /* a row change of a captured table */
  SL_CDC_EV_TXN_END = 2, /* a transaction (XID / COMMIT) ended: pos is at a
                            transaction boundary */
  SL_CDC_EV_HEARTBEAT = 3 /* nothing new (heartbeat or events of other
                             tables): pos may have advanced */
} sl__cdc_ev_kind_t;

typedef struct sl__cdc_ev_s {
  sl__cdc_ev_kind_t kind;
  uint32_t table;         /* index into opts.tables (ROW) */
  sl_row_kind_t row_kind; /* SL_ROW_INSERT, SL_ROW_UPDATE_AFTER (an update:
                             before and after), SL_ROW_DELETE */
  const sl_row_t *before; /* update/delete; of tables[table]->schema;
                             borrowed until the next call */
  const sl_row_t *after;  /* insert/update */
  sl_binlog_gtid_t gtid;  /* the transaction's GTID (ROW, TXN_END) */
  uint32_t event_index;   /* rows event index within the transaction (from
                             its GTID event, which is 0) */
  uint32_t row_index;     /* row index within the rows event */
  int64_t when_us; /* the event header's timestamp, microseconds since the
                      epoch */
} sl__cdc_ev_t;

/**
 * @brief Connect, check the start position against the server, read the
 * captured tables' column facts and start the binlog dump.
 * @return SL_OK; SL_EINVAL (options; access denied); SL_EIO (server
 * unreachable, a query failed, the server's identity or history changed);
 * SL_ENOMEM.  Messages start with "mariadb-cdc: " and name opts->server.
 * @ownership opts and the tables are borrowed (tables outlive the stream);
 * close *out with sl__cdc_stream_close.
 */
int sl__cdc_stream_open(const sl__cdc_stream_opts_t *o, sl__cdc_stream_t **out,
                        sl_error_t **out_err);
/**
 * @brief The next event.
 * @return SL_OK; SL_ENOTFOUND at the end (non-blocking only); SL_EIO
 * (server error with its number and message: purged binlog / unknown GTID
 * 1236, identity changed, reconnect given up); SL_ECORRUPT (decoder, a
 * position that does not fit the transaction); SL_ENOTSUP (DDL on a
 * captured table, a table that no longer matches its description, an
 * unsupported event); SL_ECANCELED after sl__cdc_stream_interrupt.
 * @ownership ev's rows are borrowed until the next call or close.
 */
int sl__cdc_stream_next(sl__cdc_stream_t *s, sl__cdc_ev_t *ev,
                        sl_error_t **out_err);
/**
 * @brief The resumable position after the last event returned (a
 * checkpoint taken now resumes exactly after it, also inside a
 * transaction).
 */
void sl__cdc_stream_pos(const sl__cdc_stream_t *s, sl_binlog_pos_t *out);
/**
 * @brief Make a blocked (or the next) sl__cdc_stream_next return
 * SL_ECANCELED soon (shutdown() of the replication socket; wakes a
 * reconnect backoff too).  The stream stays cancelled.
 * @thread any, between open and close.
 */
void sl__cdc_stream_interrupt(sl__cdc_stream_t *s);
/** @brief Close and free.  NULL does nothing. */
void sl__cdc_stream_close(sl__cdc_stream_t *s);

/*
 * cdc_ddl.c: the tables whose definition a statement (a QUERY event's
 * text, len bytes, default database default_db or NULL) changes: fn is
 * called with each (db, table); table NULL means every table of db, db
 * NULL every table (a statement of a changing kind that the parse could
 * not follow).  db is "" for an unqualified name without a default
 * database.  A non-zero answer of fn stops the walk and is returned.
 * Pure; the strings passed to fn live until it returns.
 */
typedef int (*sl__cdc_ddl_fn)(void *ctx, const char *db, const char *table);
int sl__cdc_ddl_targets(const char *sql, size_t len, const char *default_db,
                        sl__cdc_ddl_fn fn, void *ctx);

#endif
