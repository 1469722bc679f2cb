/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binlog transport over Connector/C: a connection set up for
 * replication, COM_BINLOG_DUMP through mariadb_rpl_open, then one raw
 * packet per event through mysql_net_read_packet.  See binlog_reader.h for
 * why the library's own event parser is left out.
 */
#include "connectors/mariadb/binlog_reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <mysql.h>
#include <mariadb_rpl.h>

struct sl_binlog_reader_s {
  MYSQL *mysql;
  MARIADB_RPL *rpl;
  char where[300]; /* "host:port" for messages */
  sl_binlog_checksum_t checksum;
  unsigned last_errno;
  bool is_open; /* the dump command was sent */
  bool is_eof;
  /* The connection's socket, set before the reader is handed out, read
   * by sl__binlog_reader_interrupt from another thread. */
  int fd;
};

static int fail_mysql(sl_binlog_reader_t *r, const char *what,
                      sl_error_t **out_err) {
  r->last_errno = mysql_errno(r->mysql);
  return sl_error_set(out_err, SL_EIO, "binlog reader %s: %s: error %u (%s): "
                      "%s", r->where, what, r->last_errno,
                      mysql_sqlstate(r->mysql), mysql_error(r->mysql));
}

static int exec(sl_binlog_reader_t *r, const char *sql,
                sl_error_t **out_err) {
  if (mysql_query(r->mysql, sql) != 0) return fail_mysql(r, sql, out_err);
  MYSQL_RES *res = mysql_store_result(r->mysql);
  if (res != NULL) mysql_free_result(res);
  return SL_OK;
}

/* Only digits, '-', ',' and blanks: the state goes into a statement. */
static bool gtid_text_ok(const char *s) {
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == ',' || *s == ' '))
      return false;
  return true;
}

int sl__binlog_reader_open(const sl_binlog_reader_opts_t *o,
                           sl_binlog_reader_t **out_r, sl_error_t **out_err) {
  if (o->host == NULL || o->user == NULL || o->server_id == 0 ||
      (o->gtid_start == NULL && o->file == NULL))
    return sl_error_set(out_err, SL_EINVAL,
                        "binlog reader: host, user, a server id other than "
                        "0 and a GTID or file start are required");
  if (o->gtid_start != NULL && !gtid_text_ok(o->gtid_start))
    return sl_error_set(out_err, SL_EINVAL,
                        "binlog reader: GTID start '%s' is not a MariaDB "
                        "GTID state (domain-server-seq,...)", o->gtid_start);
  if (o->out_errno != NULL) *o->out_errno = 0;
  sl_binlog_reader_t *r = sl_calloc(1, sizeof(*r));
  if (r == NULL) return SL_ENOMEM;
  r->fd = -1;
  snprintf(r->where, sizeof(r->where), "%s:%d", o->host, o->port);
  int rc = SL_OK;
  char sql[1024];
  if ((r->mysql = mysql_init(NULL)) == NULL) {
    sl_free(r);
    return SL_ENOMEM;
  }
  unsigned ct = o->connect_timeout_s ? o->connect_timeout_s : 10;
  unsigned rt = o->read_timeout_s ? o->read_timeout_s : 30;
  mysql_optionsv(r->mysql, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
  mysql_optionsv(r->mysql, MYSQL_OPT_READ_TIMEOUT, &rt);
  if (mysql_real_connect(r->mysql, o->host, o->user, o->password, NULL,
                         (unsigned)o->port, NULL, 0) == NULL) {
    rc = fail_mysql(r, "connect", out_err);
    goto fail;
  }
  /* The checksum the server writes; the stream is sent with it. */
  if (mysql_query(r->mysql, "SELECT @@global.binlog_checksum") != 0) {
    rc = fail_mysql(r, "SELECT @@global.binlog_checksum", out_err);
    goto fail;
  }
  {
    MYSQL_RES *res = mysql_store_result(r->mysql);
    MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
    if (row == NULL || row[0] == NULL) {
      if (res) mysql_free_result(res);
      rc = sl_error_set(out_err, SL_EIO, "binlog reader %s: no "
                        "@@global.binlog_checksum", r->where);
      goto fail;
    }
    if (strcmp(row[0], "CRC32") == 0)
      r->checksum = SL_BINLOG_CHECKSUM_CRC32;
    else if (strcmp(row[0], "NONE") == 0)
      r->checksum = SL_BINLOG_CHECKSUM_OFF;
    else {
      rc = sl_error_set(out_err, SL_ENOTSUP, "binlog reader %s: "
                        "binlog_checksum %s (sluice knows NONE and CRC32)",
                        r->where, row[0]);
      mysql_free_result(res);
      goto fail;
    }
    mysql_free_result(res);
  }
  if ((rc = exec(r, "SET @master_binlog_checksum = @@global.binlog_checksum",
                 out_err)) != SL_OK ||
      (rc = exec(r, "SET @mariadb_slave_capability = 4", out_err)) != SL_OK)
    goto fail;
  if (o->gtid_start != NULL) {
    snprintf(sql, sizeof(sql), "SET @slave_connect_state = '%s'",
             o->gtid_start);
    if ((rc = exec(r, sql, out_err)) != SL_OK ||
        (rc = exec(r, "SET @slave_gtid_strict_mode = 1", out_err)) != SL_OK)
      goto fail;
  }
  if (o->heartbeat_ms) {
    snprintf(sql, sizeof(sql), "SET @master_heartbeat_period = %" PRIu64,
             (uint64_t)o->heartbeat_ms * 1000000u);
    if ((rc = exec(r, sql, out_err)) != SL_OK) goto fail;
  }
  if ((r->rpl = mariadb_rpl_init(r->mysql)) == NULL) {
    rc = SL_ENOMEM;
    goto fail;
  }
  const char *file = o->gtid_start != NULL ? "" : o->file;
  unsigned long pos = o->gtid_start != NULL ? 4 : o->pos;
  unsigned int flags = MARIADB_RPL_BINLOG_SEND_ANNOTATE_ROWS |
                       (o->is_non_blocking ? MARIADB_RPL_BINLOG_DUMP_NON_BLOCK
                                           : 0);
  if (mariadb_rpl_optionsv(r->rpl, MARIADB_RPL_SERVER_ID,
                           (unsigned int)o->server_id) != 0 ||
      mariadb_rpl_optionsv(r->rpl, MARIADB_RPL_FILENAME, file,
                           strlen(file)) != 0 ||
      mariadb_rpl_optionsv(r->rpl, MARIADB_RPL_START, pos) != 0 ||
      mariadb_rpl_optionsv(r->rpl, MARIADB_RPL_FLAGS, flags) != 0 ||
      (o->report_host != NULL &&
       (mariadb_rpl_optionsv(r->rpl, MARIADB_RPL_HOST, o->report_host,
                             strlen(o->report_host)) != 0 ||
        mariadb_rpl_optionsv(r->rpl, MARIADB_RPL_PORT,
                             (unsigned int)o->report_port) != 0))) {
    rc = sl_error_set(out_err, SL_EINVAL, "binlog reader %s: replication "
                      "options refused: %s", r->where,
                      mariadb_rpl_error(r->rpl));
    goto fail;
  }
  if (mariadb_rpl_open(r->rpl) != 0) {
    rc = fail_mysql(r, "COM_BINLOG_DUMP", out_err);
    goto fail;
  }
  r->is_open = true;
  r->fd = (int)mysql_get_socket(r->mysql);
  *out_r = r;
  return SL_OK;
fail:
  if (o->out_errno != NULL) *o->out_errno = r->last_errno;
  sl__binlog_reader_close(r);
  return rc;
}

int sl__binlog_reader_next(sl_binlog_reader_t *r, const uint8_t **out_data,
                           size_t *out_len, sl_error_t **out_err) {
  if (r->is_eof) return SL_ENOTFOUND;
  unsigned long len = mysql_net_read_packet(r->mysql);
  /* packet_error is (unsigned int)-1, not (unsigned long)-1: comparing
   * with the latter takes an ERR packet for an event. */
  if (len == packet_error || len == 0) {
    r->last_errno = mysql_errno(r->mysql);
    return sl_error_set(out_err, SL_EIO,
                        "binlog reader %s: reading the binlog stream: error "
                        "%u (%s): %s", r->where, r->last_errno,
                        mysql_sqlstate(r->mysql), mysql_error(r->mysql));
  }
  const uint8_t *p = r->mysql->net.read_pos;
  /* An EOF packet (0xFE, shorter than 9 bytes) ends a non-blocking dump. */
  if (p[0] == 0xFE && len < 9) {
    r->is_eof = true;
    return SL_ENOTFOUND;
  }
  if (p[0] == 0xFF && len >= 3) {
    /* An ERR packet the library did not report (it does; defensive). */
    r->last_errno = (unsigned)(p[1] | (p[2] << 8));
    int ml = (int)(len > 9 && p[3] == '#' ? len - 9 : len - 3);
    const char *mp = (const char *)(len > 9 && p[3] == '#' ? p + 9 : p + 3);
    return sl_error_set(out_err, SL_EIO,
                        "binlog reader %s: reading the binlog stream: error "
                        "%u: %.*s", r->where, r->last_errno, ml, mp);
  }
  if (p[0] != 0x00) {
    r->last_errno = 0;
    return sl_error_set(out_err, SL_ECORRUPT,
                        "binlog reader %s: packet starts with 0x%02x (0x00 "
                        "expected before an event)", r->where, p[0]);
  }
  *out_data = p + 1;
  *out_len = len - 1;
  return SL_OK;
}

sl_binlog_checksum_t sl__binlog_reader_checksum(const sl_binlog_reader_t *r) {
  return r->checksum;
}

unsigned sl__binlog_reader_errno(const sl_binlog_reader_t *r) {
  return r->last_errno;
}

void sl__binlog_reader_interrupt(sl_binlog_reader_t *r) {
  /* shutdown() wakes a thread blocked in recv() on the socket (it reads
   * the end of the stream); close() would not, and could free the
   * descriptor under it. */
  if (r != NULL && r->fd >= 0) (void)shutdown(r->fd, SHUT_RDWR);
}

void sl__binlog_reader_close(sl_binlog_reader_t *r) {
  if (r == NULL) return;
  /* mariadb_rpl_close frees the handle only, not the connection. */
  if (r->rpl != NULL) mariadb_rpl_close(r->rpl);
  if (r->mysql != NULL) mysql_close(r->mysql);
  sl_free(r);
}
