/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binlog transport: a replication connection to MariaDB (or MySQL)
 * through Connector/C that yields raw binlog events, one at a time, for
 * sluice's own decoder (binlog_decode.h).  Internal to the connectors;
 * groundwork of the mariadb-cdc source.
 *
 * Connector/C does the handshake, COM_BINLOG_DUMP (mariadb_rpl_open) and
 * the packet framing (mysql_net_read_packet, which joins packets of 16 MiB
 * and more and turns an ERR packet into mysql_errno/mysql_error).  Its
 * event parser (mariadb_rpl_fetch) is not used: it has misread ROTATE
 * events (3.3.20) and ends the stream on events it does not know, so the
 * bytes go to sluice's decoder untouched.
 *
 * A GTID start sets, on the connection, @master_binlog_checksum (to the
 * server's @@global.binlog_checksum: without it the stream ends after one
 * event), @mariadb_slave_capability=4 (without it MariaDB sends no GTID
 * events), @slave_connect_state (the stream starts after that state) and
 * @slave_gtid_strict_mode=1, then dumps from file "" position 4.  A start
 * the server cannot serve (purged binlog, a GTID it never wrote) is error
 * 1236 with the server's message, at the first read.
 *
 * @thread one thread at a time per reader (it blocks in reads).
 */
#ifndef SL_BINLOG_READER_H
#define SL_BINLOG_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "connectors/mariadb/binlog_decode.h"
#include "sluice/sluice.h"

typedef struct sl_binlog_reader_opts_s {
  const char *host; /* "127.0.0.1" */
  int port;
  const char *user, *password; /* password may be NULL */
  uint32_t server_id;   /* this replica's id; not the server's */
  /* MariaDB GTID state to start after ("0-1-9"; "" = from the oldest
   * binlog); NULL: start at file/pos. */
  const char *gtid_start;
  const char *file; /* file/pos start when gtid_start is NULL */
  uint32_t pos;
  /* true: the stream ends (SL_ENOTFOUND) at the end of the binlog instead
   * of waiting for new events. */
  bool is_non_blocking;
  uint32_t heartbeat_ms;      /* 0: none; else @master_heartbeat_period */
  uint32_t read_timeout_s;    /* 0: 30 s; must exceed the heartbeat */
  uint32_t connect_timeout_s; /* 0: 10 s */
  /* May be NULL: receives the error number of a failed open (the
   * client's 2002/2003/2013 ... or the server's), 0 when open succeeds or
   * fails for another reason. */
  unsigned *out_errno;
  /* Not NULL: register as a replica (COM_REGISTER_SLAVE) under this host
   * name and report_port, so SHOW SLAVE HOSTS lists server_id while the
   * connection lasts (sl__cdc_check_server_ids reads it). */
  const char *report_host;
  uint32_t report_port;
} sl_binlog_reader_opts_t;

typedef struct sl_binlog_reader_s sl_binlog_reader_t;

/**
 * @brief Connect, set the session for replication and send the dump
 * command.
 * @return SL_OK; SL_EIO (the message names host:port and the server's
 * error); SL_EINVAL; SL_ENOMEM.
 * @ownership close *out_r with sl__binlog_reader_close.
 */
int sl__binlog_reader_open(const sl_binlog_reader_opts_t *opts,
                           sl_binlog_reader_t **out_r, sl_error_t **out_err);
/**
 * @brief The next raw event (header, body and checksum, without the
 * protocol's OK byte).  *out_data stays valid until the next call.
 * @return SL_OK; SL_ENOTFOUND at the end of the binlog (non-blocking
 * mode); SL_EIO with the server's message (sl__binlog_reader_errno gives
 * its number, e.g. 1236) or a lost connection (errno 2013 / 2006).
 */
int sl__binlog_reader_next(sl_binlog_reader_t *r, const uint8_t **out_data,
                           size_t *out_len, sl_error_t **out_err);
/** @brief The checksum the events carry (negotiated at open). */
sl_binlog_checksum_t sl__binlog_reader_checksum(const sl_binlog_reader_t *r);
/** @brief The error number of the last failure (0: none). */
unsigned sl__binlog_reader_errno(const sl_binlog_reader_t *r);
/**
 * @brief Make a read that blocks in sl__binlog_reader_next return soon
 * with an error (shutdown() of the connection's socket; the reader is
 * unusable after it).
 * @thread any, while another thread may be reading; not concurrently
 * with sl__binlog_reader_close (the caller orders the two).
 */
void sl__binlog_reader_interrupt(sl_binlog_reader_t *r);
/** @brief Close the connection and free.  NULL does nothing. */
void sl__binlog_reader_close(sl_binlog_reader_t *r);

#endif
