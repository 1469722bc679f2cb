/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A logical replication connection over libpq, the transport of the
 * PostgreSQL CDC source: a replication=database connection,
 * IDENTIFY_SYSTEM, CREATE_REPLICATION_SLOT ... LOGICAL pgoutput,
 * START_REPLICATION ... LOGICAL with pgoutput's options, the CopyData
 * read loop and the standby status updates.  The flush LSN sent to the
 * server is always the one the caller set (sl__pg_repl_set_flush), never
 * what was received: the server may release WAL up to it.  Internal.  See
 * src/connectors/README.md.
 */
#ifndef SL_PG_REPL_H
#define SL_PG_REPL_H

#include "connectors/postgres/pgoutput_decode.h"

typedef struct sl_pg_repl_s sl_pg_repl_t;

/* "X/Y" of an LSN into buf (at least 18 bytes); returns buf. */
#define SL_PG_LSN_SIZE 18
char *sl__pg_lsn_format(uint64_t lsn, char *buf);
/** @brief Parse "X/Y".  @return SL_OK or SL_EPARSE.  @thread any */
int sl__pg_lsn_parse(const char *s, uint64_t *out_lsn);

typedef struct sl_pg_sysid_s {
  char systemid[32];
  uint32_t timeline;
  uint64_t xlogpos;
  char dbname[64];
} sl_pg_sysid_t;

/**
 * @brief Connect for logical replication: conninfo plus
 * replication=database, client_encoding=UTF8 and the session settings the
 * text values are decoded in (DateStyle=ISO, TimeZone=UTC,
 * IntervalStyle=postgres, extra_float_digits=3, bytea_output=hex).
 * @return SL_OK; SL_EIO (the message names the host and libpq's reason);
 * SL_ENOMEM.
 * @thread any; the connection is then used by one thread at a time.
 * @ownership the caller destroys *out_repl with sl__pg_repl_destroy.
 */
int sl__pg_repl_connect(const char *conninfo, sl_pg_repl_t **out_repl,
                        sl_error_t **out_err);
/** @brief Close the connection and free; NULL does nothing. */
void sl__pg_repl_destroy(sl_pg_repl_t *r);

/** @brief IDENTIFY_SYSTEM.  @return SL_OK; SL_EIO. */
int sl__pg_repl_identify(sl_pg_repl_t *r, sl_pg_sysid_t *out_id,
                         sl_error_t **out_err);

/**
 * @brief CREATE_REPLICATION_SLOT slot [TEMPORARY] LOGICAL pgoutput
 * NOEXPORT_SNAPSHOT: a permanent slot (unless is_temporary) that keeps
 * WAL from its consistent point on until a flush LSN releases it.
 * @param[out] out_consistent_lsn the slot's consistent point (may be NULL).
 * @return SL_OK; SL_EIO (the server's SQLSTATE and message, e.g. 42710
 * when the slot exists); SL_EINVAL (a name that is not [a-z0-9_]+).
 */
int sl__pg_repl_create_slot(sl_pg_repl_t *r, const char *slot,
                            bool is_temporary, uint64_t *out_consistent_lsn,
                            sl_error_t **out_err);

/**
 * @brief START_REPLICATION SLOT slot LOGICAL start_lsn (proto_version
 * '1', publication_names 'publication', messages 'true' when asked).
 * The flush LSN starts at start_lsn.
 * @return SL_OK (streaming: COPY_BOTH); SL_EIO; SL_EINVAL (names).
 */
int sl__pg_repl_start(sl_pg_repl_t *r, const char *slot, uint64_t start_lsn,
                      const char *publication, bool is_messages,
                      sl_error_t **out_err);

/**
 * @brief Wait up to timeout_ms (0: do not wait, -1: forever) for the next
 * CopyData and decode its framing.  A keepalive that asks for a reply is
 * answered here with the caller's flush LSN before it is returned.
 * @param[out] out on SL_OK; out->data is valid until the next read.
 * @return SL_OK; SL_EAGAIN (nothing within timeout_ms); SL_ECLOSED (the
 * server ended the stream: the message quotes it); SL_EIO; SL_ECORRUPT.
 */
int sl__pg_repl_read(sl_pg_repl_t *r, int timeout_ms, sl_pg_copy_t *out,
                     sl_error_t **out_err);

/** @brief The flush (and apply) LSN the next status updates report.
 * Moving it backwards is refused (SL_EINVAL): the server never moves the
 * slot back, and the caller's position would be a lie. */
int sl__pg_repl_set_flush(sl_pg_repl_t *r, uint64_t flush_lsn,
                          sl_error_t **out_err);

/**
 * @brief Send a standby status update now: write = the last received WAL
 * end (at least flush), flush = apply = the caller's flush LSN.
 * @return SL_OK; SL_EIO.
 */
int sl__pg_repl_send_status(sl_pg_repl_t *r, bool reply_requested,
                            sl_error_t **out_err);

/** @brief The last flush LSN sent in a status update (0: none yet). */
uint64_t sl__pg_repl_flush_sent(const sl_pg_repl_t *r);
/** @brief The highest WAL end received ('w' or 'k'). */
uint64_t sl__pg_repl_received(const sl_pg_repl_t *r);

#endif
