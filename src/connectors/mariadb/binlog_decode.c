/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binlog events from raw bytes: the v4 header, the CRC32 checksum, the
 * FORMAT_DESCRIPTION's checksum algorithm and post-header lengths, ROTATE,
 * QUERY, XID, TABLE_MAP with its optional metadata, the rows events' frames
 * (their row images: binlog_value.c), MariaDB's GTID, GTID_LIST,
 * BINLOG_CHECKPOINT and ANNOTATE_ROWS, MySQL's GTID, HEARTBEAT and XA
 * PREPARE; and MariaDB GTID states.  Every field is read through a cursor
 * that checks the bytes are there and names the field when they are not.
 * Decisions: binlog_decode.h.  Overview: src/connectors/README.md.
 */
#include "connectors/mariadb/binlog_decode.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connectors/mariadb/binlog_int.h"

/* ---------------------------------------------------------------- CRC */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

uint32_t sl__binlog_crc32(const uint8_t *p, size_t len) {
  pthread_once(&crc_once, crc_init);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < len; i++)
    c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* ---------------------------------------------------------------- names */

const char *sl__binlog_event_name(uint8_t type, char *buf, size_t size) {
  switch (type) {
  case SL_BLE_UNKNOWN: return "UNKNOWN";
  case SL_BLE_START_V3: return "START_V3";
  case SL_BLE_QUERY: return "QUERY";
  case SL_BLE_STOP: return "STOP";
  case SL_BLE_ROTATE: return "ROTATE";
  case SL_BLE_INTVAR: return "INTVAR";
  case SL_BLE_RAND: return "RAND";
  case SL_BLE_USER_VAR: return "USER_VAR";
  case SL_BLE_FORMAT_DESCRIPTION: return "FORMAT_DESCRIPTION";
  case SL_BLE_XID: return "XID";
  case SL_BLE_TABLE_MAP: return "TABLE_MAP";
  case SL_BLE_WRITE_ROWS_V1: return "WRITE_ROWS_V1";
  case SL_BLE_UPDATE_ROWS_V1: return "UPDATE_ROWS_V1";
  case SL_BLE_DELETE_ROWS_V1: return "DELETE_ROWS_V1";
  case SL_BLE_INCIDENT: return "INCIDENT";
  case SL_BLE_HEARTBEAT: return "HEARTBEAT";
  case SL_BLE_IGNORABLE: return "IGNORABLE";
  case SL_BLE_ROWS_QUERY: return "ROWS_QUERY";
  case SL_BLE_WRITE_ROWS_V2: return "WRITE_ROWS_V2";
  case SL_BLE_UPDATE_ROWS_V2: return "UPDATE_ROWS_V2";
  case SL_BLE_DELETE_ROWS_V2: return "DELETE_ROWS_V2";
  case SL_BLE_MYSQL_GTID: return "GTID_LOG (MySQL)";
  case SL_BLE_MYSQL_ANONYMOUS_GTID: return "ANONYMOUS_GTID_LOG (MySQL)";
  case SL_BLE_MYSQL_PREVIOUS_GTIDS: return "PREVIOUS_GTIDS_LOG (MySQL)";
  case SL_BLE_MYSQL_TRANSACTION_CONTEXT: return "TRANSACTION_CONTEXT (MySQL)";
  case SL_BLE_MYSQL_VIEW_CHANGE: return "VIEW_CHANGE (MySQL)";
  case SL_BLE_XA_PREPARE: return "XA_PREPARE";
  case SL_BLE_MYSQL_PARTIAL_UPDATE_ROWS: return "PARTIAL_UPDATE_ROWS (MySQL)";
  case SL_BLE_MYSQL_TRANSACTION_PAYLOAD: return "TRANSACTION_PAYLOAD (MySQL)";
  case SL_BLE_MYSQL_HEARTBEAT_V2: return "HEARTBEAT_V2 (MySQL)";
  case SL_BLE_ANNOTATE_ROWS: return "ANNOTATE_ROWS";
  case SL_BLE_BINLOG_CHECKPOINT: return "BINLOG_CHECKPOINT";
  case SL_BLE_GTID: return "GTID";
  case SL_BLE_GTID_LIST: return "GTID_LIST";
  case SL_BLE_START_ENCRYPTION: return "START_ENCRYPTION";
  case SL_BLE_QUERY_COMPRESSED: return "QUERY_COMPRESSED";
  case SL_BLE_WRITE_ROWS_COMPRESSED_V1: return "WRITE_ROWS_COMPRESSED_V1";
  case SL_BLE_UPDATE_ROWS_COMPRESSED_V1: return "UPDATE_ROWS_COMPRESSED_V1";
  case SL_BLE_DELETE_ROWS_COMPRESSED_V1: return "DELETE_ROWS_COMPRESSED_V1";
  case SL_BLE_WRITE_ROWS_COMPRESSED: return "WRITE_ROWS_COMPRESSED";
  case SL_BLE_UPDATE_ROWS_COMPRESSED: return "UPDATE_ROWS_COMPRESSED";
  case SL_BLE_DELETE_ROWS_COMPRESSED: return "DELETE_ROWS_COMPRESSED";
  default: snprintf(buf, size, "type %u", (unsigned)type); return buf;
  }
}

/* ---------------------------------------------------------------- errors */

void sl__binlog_where(const sl_binlog_decoder_t *d, const uint8_t *hdr,
                      size_t len, char *buf, size_t size) {
  char nb[32];
  if (len < SL_BINLOG_HEADER_LEN) {
    snprintf(buf, size, "binlog event (%zu bytes, shorter than its header) "
             "after %s", len, d->file[0] ? d->file : "the stream start");
    return;
  }
  uint32_t elen = sl__le32(hdr + 9), next = sl__le32(hdr + 13);
  const char *name = sl__binlog_event_name(hdr[4], nb, sizeof(nb));
  if (next == 0 || next < elen)
    snprintf(buf, size, "%s event at %s (artificial, no position)", name,
             d->file[0] ? d->file : "?");
  else
    snprintf(buf, size, "%s event at %s:%" PRIu32, name,
             d->file[0] ? d->file : "?", next - elen);
}

int sl__binlog_fail(const sl_binlog_cur_t *c, int code, sl_error_t **out_err,
                    const char *fmt, ...) {
  char where[640], what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  sl__binlog_where(c->d, c->hdr, c->hdr_len, where, sizeof(where));
  return sl_error_set(out_err, code, "%s: %s", where, what);
}

int sl__binlog_need(sl_binlog_cur_t *c, size_t n, const char *field,
                    sl_error_t **out_err) {
  if (c->end - c->off >= n) return SL_OK;
  return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                         "truncated at %s (needs %zu bytes at offset %zu, "
                         "%zu left)", field, n, c->base + c->off,
                         c->end - c->off);
}

int sl__binlog_packed(sl_binlog_cur_t *c, uint64_t *out, const char *field,
                      sl_error_t **out_err) {
  int rc = sl__binlog_need(c, 1, field, out_err);
  if (rc != SL_OK) return rc;
  uint8_t b = c->p[c->off];
  size_t n;
  if (b < 251) {
    c->off++;
    *out = b;
    return SL_OK;
  }
  if (b == 251 || b == 255)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "invalid packed integer 0x%02x at %s (offset %zu)",
                           b, field, c->base + c->off);
  n = b == 252 ? 2 : b == 253 ? 3 : 8;
  if ((rc = sl__binlog_need(c, 1 + n, field, out_err)) != SL_OK) return rc;
  uint64_t v = 0;
  for (size_t i = n; i > 0; i--) v = (v << 8) | c->p[c->off + i];
  c->off += 1 + n;
  *out = v;
  return SL_OK;
}

/* ---------------------------------------------------------------- state */

void sl__binlog_decoder_init(sl_binlog_decoder_t *d,
                             sl_binlog_checksum_t checksum) {
  memset(d, 0, sizeof(*d));
  d->checksum = (uint8_t)checksum;
  d->verify_checksum = true;
  /* Before a FORMAT_DESCRIPTION: the post-header lengths every v4 server
   * writes for the events that can come first (the artificial ROTATE,
   * the FORMAT_DESCRIPTION itself, a HEARTBEAT). */
  d->post_len[SL_BLE_ROTATE] = 8;
  d->post_len[SL_BLE_FORMAT_DESCRIPTION] = 57; /* without the type array */
}

static void col_free(sl_binlog_col_t *col) {
  sl_free(col->name);
  for (uint32_t i = 0; i < col->n_names; i++) sl_free(col->names[i]);
  sl_free(col->names);
}

void sl__binlog_table_free(sl_binlog_table_t *t) {
  if (t == NULL) return;
  for (uint32_t i = 0; i < t->n_cols; i++) col_free(&t->cols[i]);
  sl_free(t->cols);
  sl_free(t->schema);
  sl_free(t->table);
  sl_free(t->pk);
  sl_free(t);
}

static void tables_clear(sl_binlog_decoder_t *d) {
  for (uint32_t i = 0; i < d->n_tables; i++)
    sl__binlog_table_free(d->tables[i]);
  d->n_tables = 0;
}

void sl__binlog_decoder_close(sl_binlog_decoder_t *d) {
  if (d == NULL) return;
  tables_clear(d);
  sl_free(d->tables);
  d->tables = NULL;
  d->cap_tables = 0;
}

const sl_binlog_table_t *sl__binlog_table(const sl_binlog_decoder_t *d,
                                          uint64_t table_id) {
  for (uint32_t i = 0; i < d->n_tables; i++)
    if (d->tables[i]->table_id == table_id) return d->tables[i];
  return NULL;
}

/* Replaces the table of the same id (a TABLE_MAP after DDL). */
static int table_put(sl_binlog_decoder_t *d, sl_binlog_table_t *t) {
  for (uint32_t i = 0; i < d->n_tables; i++)
    if (d->tables[i]->table_id == t->table_id) {
      sl__binlog_table_free(d->tables[i]);
      d->tables[i] = t;
      return SL_OK;
    }
  /* A stream maps every table again after each ROTATE, and MySQL and
   * MariaDB reuse ids for the same open table; a bound keeps a stream over
   * many short-lived tables from growing without end. */
  if (d->n_tables >= 4096) {
    sl__binlog_table_free(d->tables[0]);
    memmove(d->tables, d->tables + 1, (d->n_tables - 1) * sizeof(*d->tables));
    d->n_tables--;
  }
  if (d->n_tables == d->cap_tables) {
    uint32_t cap = d->cap_tables ? d->cap_tables * 2 : 16;
    sl_binlog_table_t **nt = sl_realloc(d->tables, cap * sizeof(*nt));
    if (nt == NULL) return SL_ENOMEM;
    d->tables = nt;
    d->cap_tables = cap;
  }
  d->tables[d->n_tables++] = t;
  return SL_OK;
}

int sl__binlog_table_set_col(sl_binlog_decoder_t *d, uint64_t table_id,
                             uint32_t col, const char *name, int is_unsigned,
                             uint16_t charset, const char *const *names,
                             uint32_t n_names, sl_error_t **out_err) {
  sl_binlog_table_t *t = (sl_binlog_table_t *)sl__binlog_table(d, table_id);
  if (t == NULL || col >= t->n_cols)
    return sl_error_set(out_err, SL_EINVAL,
                        "binlog table id %" PRIu64 " has no column %u",
                        table_id, col);
  sl_binlog_col_t *c = &t->cols[col];
  if (name != NULL) {
    char *n = sl_strdup(name);
    if (n == NULL) return SL_ENOMEM;
    sl_free(c->name);
    c->name = n;
  }
  if (is_unsigned >= 0) {
    c->is_unsigned = is_unsigned != 0;
    c->has_sign = true;
  }
  if (charset != 0) c->charset = charset;
  if (names != NULL) {
    char **nn = sl_calloc(n_names ? n_names : 1, sizeof(*nn));
    if (nn == NULL) return SL_ENOMEM;
    for (uint32_t i = 0; i < n_names; i++)
      if ((nn[i] = sl_strdup(names[i])) == NULL) {
        for (uint32_t k = 0; k < i; k++) sl_free(nn[k]);
        sl_free(nn);
        return SL_ENOMEM;
      }
    for (uint32_t i = 0; i < c->n_names; i++) sl_free(c->names[i]);
    sl_free(c->names);
    c->names = nn;
    c->n_names = n_names;
  }
  return SL_OK;
}

/* ---------------------------------------------------------------- events */

/* "10.11.19-MariaDB-log" -> 10 11 19; true when at least 5.6.1 (the
 * version that added checksums, so that the FORMAT_DESCRIPTION ends with
 * the algorithm byte; MariaDB from 5.3 too, all of them report >= 5.3). */
static bool version_has_checksum(const char *v) {
  unsigned a = 0, b = 0, c = 0;
  if (sscanf(v, "%u.%u.%u", &a, &b, &c) < 2) return true;
  if (strstr(v, "MariaDB") != NULL) return a > 5 || (a == 5 && b >= 3);
  if (a != 5) return a > 5;
  if (b != 6) return b > 6;
  return c >= 1;
}

static int decode_fde(sl_binlog_decoder_t *d, sl_binlog_cur_t *c,
                      sl_binlog_event_t *ev, size_t total,
                      sl_error_t **out_err) {
  int rc;
  if ((rc = sl__binlog_need(c, 2 + 50 + 4 + 1, "the post-header",
                            out_err)) != SL_OK)
    return rc;
  ev->u.fde.binlog_version = sl__le16(c->p + c->off);
  if (ev->u.fde.binlog_version != 4)
    return sl__binlog_fail(c, SL_ENOTSUP, out_err,
                           "binlog version %u (only version 4 is decoded)",
                           ev->u.fde.binlog_version);
  memcpy(ev->u.fde.server_version, c->p + c->off + 2, 50);
  ev->u.fde.server_version[50] = 0;
  uint8_t hlen = c->p[c->off + 56];
  if (hlen != SL_BINLOG_HEADER_LEN)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "header length %u (a v4 binlog has 19)", hlen);
  c->off += 57;
  bool has_alg = version_has_checksum(ev->u.fde.server_version);
  /* The algorithm byte and a 4-byte checksum (or its room) follow the
   * post-header lengths in the FORMAT_DESCRIPTION of a checksum-aware
   * server, whatever the algorithm. */
  size_t tail = has_alg ? 1 + SL_BINLOG_CHECKSUM_LEN : 0;
  size_t rest = total - SL_BINLOG_HEADER_LEN - 57;
  if (rest < tail)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "truncated at the checksum algorithm (%zu bytes "
                           "after the post-header)", rest);
  size_t n_types = rest - tail;
  if (n_types < SL_BLE_TABLE_MAP)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "post-header lengths for %zu event types (at "
                           "least %u expected)", n_types, SL_BLE_TABLE_MAP);
  uint8_t alg = has_alg ? c->p[SL_BINLOG_HEADER_LEN + 57 + n_types] : 0;
  if (alg != 0 && alg != 1 && alg != 255)
    return sl__binlog_fail(c, SL_ENOTSUP, out_err,
                           "checksum algorithm %u (sluice knows off and "
                           "CRC32)", alg);
  ev->u.fde.checksum = alg == 1 ? SL_BINLOG_CHECKSUM_CRC32
                                : SL_BINLOG_CHECKSUM_OFF;
  ev->u.fde.flavor = strstr(ev->u.fde.server_version, "MariaDB") != NULL
                         ? SL_BINLOG_FLAVOR_MARIADB
                         : SL_BINLOG_FLAVOR_MYSQL;
  if (alg == 1 && d->verify_checksum) {
    uint32_t want = sl__le32(c->p + total - 4);
    uint32_t got = sl__binlog_crc32(c->p, total - 4);
    if (want != got)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "checksum mismatch (CRC32 0x%08" PRIx32
                             " in the event, 0x%08" PRIx32 " computed)",
                             want, got);
  }
  /* Checked: apply the lengths (type i at index i-1), then the
   * algorithm.  A refused event leaves the decoder as it was. */
  memset(d->post_len, 0, sizeof(d->post_len));
  for (size_t i = 0; i < n_types && i < 255; i++)
    d->post_len[i + 1] = c->p[c->off + i];
  d->post_len[SL_BLE_FORMAT_DESCRIPTION] = 57;
  d->checksum = ev->u.fde.checksum;
  d->flavor = ev->u.fde.flavor;
  d->has_fde = true;
  /* A new FORMAT_DESCRIPTION starts a new binlog file (or the same file
   * again after a reconnect): table ids from before mean nothing now. */
  tables_clear(d);
  ev->body = c->p + c->off;
  ev->body_len = (uint32_t)n_types;
  return SL_OK;
}

static int post_header(sl_binlog_decoder_t *d, sl_binlog_cur_t *c,
                       uint8_t type, uint32_t want_min,
                       sl_error_t **out_err) {
  uint32_t pl = d->post_len[type];
  if (!d->has_fde) pl = want_min;
  if (pl < want_min)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "post-header length %u from the "
                           "FORMAT_DESCRIPTION (at least %u expected)",
                           pl, want_min);
  return sl__binlog_need(c, pl, "the post-header", out_err);
}

int sl__binlog_decode(sl_binlog_decoder_t *d, const uint8_t *data,
                      size_t len, sl_binlog_event_t *ev,
                      sl_error_t **out_err) {
  sl_binlog_cur_t c = {.d = d, .hdr = data, .hdr_len = len, .p = data,
                       .off = 0, .end = len, .base = 0};
  int rc;
  memset(ev, 0, sizeof(*ev));
  if (len < SL_BINLOG_HEADER_LEN)
    return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                           "truncated at the event header (%zu of 19 bytes)",
                           len);
  ev->raw = data;
  ev->timestamp = sl__le32(data);
  ev->type = data[4];
  ev->server_id = sl__le32(data + 5);
  ev->event_len = sl__le32(data + 9);
  ev->next_pos = sl__le32(data + 13);
  ev->flags = sl__le16(data + 17);
  if (ev->event_len != len)
    return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                           "event_length %" PRIu32 " in the header, but the "
                           "event has %zu bytes", ev->event_len, len);
  if (len > SL_BINLOG_MAX_EVENT)
    return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                           "event_length %zu beyond the limit %u", len,
                           SL_BINLOG_MAX_EVENT);
  /* The checksum covers header and body.  A FORMAT_DESCRIPTION says its
   * own algorithm (it is read from its bytes below, so check after). */
  size_t end = len;
  bool is_fde = ev->type == SL_BLE_FORMAT_DESCRIPTION;
  if (!is_fde && d->checksum == SL_BINLOG_CHECKSUM_CRC32) {
    if (len < SL_BINLOG_HEADER_LEN + SL_BINLOG_CHECKSUM_LEN)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "truncated at the checksum (%zu bytes)", len);
    end = len - SL_BINLOG_CHECKSUM_LEN;
    uint32_t want = sl__le32(data + end), got = sl__binlog_crc32(data, end);
    if (d->verify_checksum && want != got)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "checksum mismatch (CRC32 0x%08" PRIx32
                             " in the event, 0x%08" PRIx32 " computed)",
                             want, got);
  }
  c.off = SL_BINLOG_HEADER_LEN;
  c.end = end;
  /* Only the artificial ROTATE and a HEARTBEAT come before the stream's
   * first FORMAT_DESCRIPTION; anything else needs its post-header lengths
   * and checksum algorithm. */
  if (!d->has_fde && !is_fde && ev->type != SL_BLE_ROTATE &&
      ev->type != SL_BLE_HEARTBEAT)
    return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                           "no FORMAT_DESCRIPTION event before it");

  switch (ev->type) {
  case SL_BLE_FORMAT_DESCRIPTION: {
    c.end = len;
    return decode_fde(d, &c, ev, len, out_err);
  }
  case SL_BLE_ROTATE: {
    /* Position (8 bytes), then the name up to the end of the event less
     * the checksum: no length and no NUL (Connector/C 3.3.20 reads it
     * wrong after the first FORMAT_DESCRIPTION). */
    if ((rc = post_header(d, &c, SL_BLE_ROTATE, 8, out_err)) != SL_OK)
      return rc;
    ev->u.rotate.position = sl__le64(data + c.off);
    c.off += d->has_fde ? d->post_len[SL_BLE_ROTATE] : 8;
    if (c.end - c.off == 0)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "empty file name");
    if (c.end - c.off >= sizeof(d->file))
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "file name of %zu bytes (at most %zu)",
                             c.end - c.off, sizeof(d->file) - 1);
    if (memchr(data + c.off, 0, c.end - c.off) != NULL)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "NUL byte in the file name");
    ev->u.rotate.name.p = data + c.off;
    ev->u.rotate.name.len = (uint32_t)(c.end - c.off);
    memcpy(d->file, data + c.off, c.end - c.off);
    d->file[c.end - c.off] = 0;
    break;
  }
  case SL_BLE_QUERY:
  case SL_BLE_QUERY_COMPRESSED: {
    if (ev->type == SL_BLE_QUERY_COMPRESSED)
      return sl__binlog_fail(&c, SL_ENOTSUP, out_err,
                             "compressed events are not decoded "
                             "(log_bin_compress=ON on the server)");
    if ((rc = post_header(d, &c, SL_BLE_QUERY, 13, out_err)) != SL_OK)
      return rc;
    const uint8_t *ph = data + c.off;
    ev->u.query.thread_id = sl__le32(ph);
    ev->u.query.exec_time = sl__le32(ph + 4);
    uint8_t db_len = ph[8];
    ev->u.query.error_code = sl__le16(ph + 9);
    uint16_t sv_len = sl__le16(ph + 11);
    c.off += d->has_fde ? d->post_len[SL_BLE_QUERY] : 13;
    if ((rc = sl__binlog_need(&c, sv_len, "the status variables",
                              out_err)) != SL_OK)
      return rc;
    c.off += sv_len;
    if ((rc = sl__binlog_need(&c, (size_t)db_len + 1, "the schema name",
                              out_err)) != SL_OK)
      return rc;
    ev->u.query.schema.p = data + c.off;
    ev->u.query.schema.len = db_len;
    if (data[c.off + db_len] != 0)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "schema name not NUL-terminated");
    c.off += (size_t)db_len + 1;
    ev->u.query.sql.p = data + c.off;
    ev->u.query.sql.len = (uint32_t)(c.end - c.off);
    break;
  }
  case SL_BLE_XID:
    if ((rc = sl__binlog_need(&c, 8, "the xid", out_err)) != SL_OK)
      return rc;
    ev->u.xid.xid = sl__le64(data + c.off);
    c.off += 8;
    break;
  case SL_BLE_GTID: {
    /* MariaDB: seq_no 8, domain_id 4, flags2 1 (the post-header, 19 with
     * its padding); commit_id 8 when FL_GROUP_COMMIT_ID; the XID of an XA
     * transaction when FL_PREPARED_XA or FL_COMPLETED_XA; extra flags. */
    if ((rc = sl__binlog_need(&c, 13, "the GTID", out_err)) != SL_OK)
      return rc;
    ev->u.gtid.gtid.seq = sl__le64(data + c.off);
    ev->u.gtid.gtid.domain = sl__le32(data + c.off + 8);
    ev->u.gtid.gtid.server_id = ev->server_id;
    ev->u.gtid.flags2 = data[c.off + 12];
    uint32_t pl = d->has_fde && d->post_len[SL_BLE_GTID] >= 13
                      ? d->post_len[SL_BLE_GTID]
                      : 19;
    if ((rc = sl__binlog_need(&c, pl, "the post-header", out_err)) !=
        SL_OK)
      return rc;
    /* The rest is read in sequence from byte 13, as the server does: the
     * commit id and the XA xid overlay the post-header's zero padding. */
    c.off += 13;
    if (ev->u.gtid.flags2 & SL_BL_GTID_GROUP_COMMIT_ID) {
      if ((rc = sl__binlog_need(&c, 8, "the commit id", out_err)) != SL_OK)
        return rc;
      ev->u.gtid.commit_id = sl__le64(data + c.off);
      c.off += 8;
    }
    if (ev->u.gtid.flags2 &
        (SL_BL_GTID_PREPARED_XA | SL_BL_GTID_COMPLETED_XA)) {
      if ((rc = sl__binlog_need(&c, 6, "the XA xid", out_err)) != SL_OK)
        return rc;
      ev->u.gtid.xa_format = sl__le32(data + c.off);
      uint8_t gl = data[c.off + 4], bl = data[c.off + 5];
      c.off += 6;
      if (gl > 64 || bl > 64)
        return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                               "XA xid lengths %u and %u (at most 64)", gl,
                               bl);
      if ((rc = sl__binlog_need(&c, (size_t)gl + bl, "the XA xid data",
                                out_err)) != SL_OK)
        return rc;
      ev->u.gtid.xa_gtrid = (sl_binlog_str_t){data + c.off, gl};
      ev->u.gtid.xa_bqual = (sl_binlog_str_t){data + c.off + gl, bl};
      c.off += (size_t)gl + bl;
    }
    break;
  }
  case SL_BLE_GTID_LIST: {
    if ((rc = sl__binlog_need(&c, 4, "the GTID count", out_err)) != SL_OK)
      return rc;
    uint32_t v = sl__le32(data + c.off);
    c.off += 4;
    ev->u.gtid_list.n = v & 0x0FFFFFFFu;
    ev->u.gtid_list.list_flags = (uint8_t)(v >> 28);
    if ((c.end - c.off) / 16 < ev->u.gtid_list.n)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "truncated at the GTID list (%" PRIu32
                             " GTIDs need %" PRIu64 " bytes, %zu left)",
                             ev->u.gtid_list.n,
                             (uint64_t)ev->u.gtid_list.n * 16,
                             c.end - c.off);
    ev->u.gtid_list.raw = data + c.off;
    c.off += (size_t)ev->u.gtid_list.n * 16;
    break;
  }
  case SL_BLE_BINLOG_CHECKPOINT: {
    if ((rc = sl__binlog_need(&c, 4, "the file name length", out_err)) !=
        SL_OK)
      return rc;
    uint32_t n = sl__le32(data + c.off);
    c.off += 4;
    if ((rc = sl__binlog_need(&c, n, "the file name", out_err)) != SL_OK)
      return rc;
    ev->u.checkpoint.name = (sl_binlog_str_t){data + c.off, n};
    c.off += n;
    break;
  }
  case SL_BLE_ANNOTATE_ROWS:
    ev->u.annotate.sql = (sl_binlog_str_t){data + c.off,
                                           (uint32_t)(c.end - c.off)};
    c.off = c.end;
    break;
  case SL_BLE_ROWS_QUERY:
    /* MySQL: a length byte (truncated at 255, so ignored), the text. */
    if ((rc = sl__binlog_need(&c, 1, "the length byte", out_err)) != SL_OK)
      return rc;
    c.off++;
    ev->u.annotate.sql = (sl_binlog_str_t){data + c.off,
                                           (uint32_t)(c.end - c.off)};
    c.off = c.end;
    break;
  case SL_BLE_HEARTBEAT:
    ev->u.heartbeat.log_name = (sl_binlog_str_t){data + c.off,
                                                 (uint32_t)(c.end - c.off)};
    c.off = c.end;
    break;
  case SL_BLE_MYSQL_GTID:
  case SL_BLE_MYSQL_ANONYMOUS_GTID:
    if ((rc = sl__binlog_need(&c, 25, "the GTID", out_err)) != SL_OK)
      return rc;
    ev->u.mysql_gtid.flags = data[c.off];
    memcpy(ev->u.mysql_gtid.uuid, data + c.off + 1, 16);
    ev->u.mysql_gtid.gno = (int64_t)sl__le64(data + c.off + 17);
    /* Logical clock and commit timestamps follow; not needed. */
    c.off = c.end;
    break;
  case SL_BLE_MYSQL_PREVIOUS_GTIDS: {
    uint64_t n_sids;
    if ((rc = sl__binlog_need(&c, 8, "the sid count", out_err)) != SL_OK)
      return rc;
    n_sids = sl__le64(data + c.off);
    c.off += 8;
    for (uint64_t i = 0; i < n_sids; i++) {
      if ((rc = sl__binlog_need(&c, 24, "a sid and its interval count",
                                out_err)) != SL_OK)
        return rc;
      uint64_t n_iv = sl__le64(data + c.off + 16);
      c.off += 24;
      if ((c.end - c.off) / 16 < n_iv)
        return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                               "truncated at the intervals of sid %" PRIu64,
                               i);
      c.off += (size_t)n_iv * 16;
    }
    break;
  }
  case SL_BLE_XA_PREPARE: {
    if ((rc = sl__binlog_need(&c, 13, "the XA xid", out_err)) != SL_OK)
      return rc;
    ev->u.xa_prepare.one_phase = data[c.off];
    ev->u.xa_prepare.format = sl__le32(data + c.off + 1);
    uint32_t gl = sl__le32(data + c.off + 5), bl = sl__le32(data + c.off + 9);
    c.off += 13;
    if (gl > 64 || bl > 64)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "XA xid lengths %" PRIu32 " and %" PRIu32
                             " (at most 64)", gl, bl);
    if ((rc = sl__binlog_need(&c, (size_t)gl + bl, "the XA xid data",
                              out_err)) != SL_OK)
      return rc;
    ev->u.xa_prepare.gtrid = (sl_binlog_str_t){data + c.off, gl};
    ev->u.xa_prepare.bqual = (sl_binlog_str_t){data + c.off + gl, bl};
    c.off += (size_t)gl + bl;
    break;
  }
  case SL_BLE_TABLE_MAP: {
    uint32_t pl = d->has_fde ? d->post_len[SL_BLE_TABLE_MAP] : 8;
    if (pl != 6 && pl != 8)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "post-header length %u (6 or 8 expected)", pl);
    sl_binlog_table_t *t = NULL;
    if ((rc = sl__binlog_table_map(d, &c, pl, &t, out_err)) != SL_OK)
      return rc;
    if ((rc = table_put(d, t)) != SL_OK) {
      sl__binlog_table_free(t);
      return sl_error_set(out_err, rc, "binlog decoder: out of memory");
    }
    ev->u.table_map.table = t;
    break;
  }
  case SL_BLE_WRITE_ROWS_V1:
  case SL_BLE_UPDATE_ROWS_V1:
  case SL_BLE_DELETE_ROWS_V1:
  case SL_BLE_WRITE_ROWS_V2:
  case SL_BLE_UPDATE_ROWS_V2:
  case SL_BLE_DELETE_ROWS_V2: {
    bool v2 = ev->type >= SL_BLE_WRITE_ROWS_V2;
    uint8_t kind = (uint8_t)(ev->type - (v2 ? SL_BLE_WRITE_ROWS_V2
                                            : SL_BLE_WRITE_ROWS_V1));
    uint32_t pl = d->has_fde ? d->post_len[ev->type] : (v2 ? 10 : 8);
    if (pl != 6 && pl != 8 && pl != 10)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "post-header length %u (6, 8 or 10 expected)",
                             pl);
    if ((rc = sl__binlog_need(&c, pl == 6 ? 6 : 8, "the post-header",
                              out_err)) != SL_OK)
      return rc;
    ev->u.rows.kind = kind;
    ev->u.rows.version = v2 ? 2 : 1;
    if (pl == 6) {
      ev->u.rows.table_id = sl__le32(data + c.off);
      ev->u.rows.flags = sl__le16(data + c.off + 4);
      c.off += 6;
    } else {
      ev->u.rows.table_id = sl__le48(data + c.off);
      ev->u.rows.flags = sl__le16(data + c.off + 6);
      c.off += 8;
    }
    if (v2) {
      if ((rc = sl__binlog_need(&c, 2, "the extra data length",
                                out_err)) != SL_OK)
        return rc;
      uint16_t xl = sl__le16(data + c.off);
      if (xl < 2)
        return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                               "extra data length %u (at least 2)", xl);
      if ((rc = sl__binlog_need(&c, xl, "the extra data", out_err)) !=
          SL_OK)
        return rc;
      c.off += xl;
    }
    uint64_t n;
    if ((rc = sl__binlog_packed(&c, &n, "the column count", out_err)) !=
        SL_OK)
      return rc;
    const sl_binlog_table_t *t = sl__binlog_table(d, ev->u.rows.table_id);
    if (t == NULL)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "table id %" PRIu64 " has no TABLE_MAP before "
                             "it", ev->u.rows.table_id);
    if (n != t->n_cols)
      return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                             "%" PRIu64 " columns, but the TABLE_MAP of "
                             "%s.%s has %" PRIu32, n, t->schema, t->table,
                             t->n_cols);
    size_t bl = ((size_t)n + 7) / 8;
    if ((rc = sl__binlog_need(&c, bl, "the columns-present bitmap",
                              out_err)) != SL_OK)
      return rc;
    ev->u.rows.present = data + c.off;
    c.off += bl;
    if (kind == 1) {
      if ((rc = sl__binlog_need(&c, bl, "the after-image columns bitmap",
                                out_err)) != SL_OK)
        return rc;
      ev->u.rows.present_after = data + c.off;
      c.off += bl;
    }
    ev->u.rows.table = t;
    ev->u.rows.n_cols = (uint32_t)n;
    ev->u.rows.rows = data + c.off;
    ev->u.rows.rows_len = (uint32_t)(c.end - c.off);
    ev->body = data + c.off;
    ev->body_len = (uint32_t)(c.end - c.off);
    return SL_OK;
  }
  case SL_BLE_WRITE_ROWS_COMPRESSED_V1:
  case SL_BLE_UPDATE_ROWS_COMPRESSED_V1:
  case SL_BLE_DELETE_ROWS_COMPRESSED_V1:
  case SL_BLE_WRITE_ROWS_COMPRESSED:
  case SL_BLE_UPDATE_ROWS_COMPRESSED:
  case SL_BLE_DELETE_ROWS_COMPRESSED:
    return sl__binlog_fail(&c, SL_ENOTSUP, out_err,
                           "compressed events are not decoded "
                           "(log_bin_compress=ON on the server)");
  case SL_BLE_MYSQL_PARTIAL_UPDATE_ROWS:
    return sl__binlog_fail(&c, SL_ENOTSUP, out_err,
                           "partial JSON updates are not decoded "
                           "(binlog_row_value_options=PARTIAL_JSON)");
  case SL_BLE_MYSQL_TRANSACTION_PAYLOAD:
    return sl__binlog_fail(&c, SL_ENOTSUP, out_err,
                           "compressed transactions are not decoded "
                           "(binlog_transaction_compression=ON)");
  case SL_BLE_START_ENCRYPTION:
    return sl__binlog_fail(&c, SL_ENOTSUP, out_err,
                           "encrypted binlogs are not decoded");
  case SL_BLE_STOP:
  case SL_BLE_INTVAR:
  case SL_BLE_RAND:
  case SL_BLE_USER_VAR:
  case SL_BLE_INCIDENT:
  case SL_BLE_IGNORABLE:
  case SL_BLE_MYSQL_TRANSACTION_CONTEXT:
  case SL_BLE_MYSQL_VIEW_CHANGE:
  case SL_BLE_MYSQL_HEARTBEAT_V2:
    /* Known, carry nothing a row-based reader needs: the body stays
     * undecoded (statement-based events are refused by the source's start
     * check on binlog_format). */
    break;
  default:
    if (!(ev->flags & SL_BLF_IGNORABLE))
      return sl__binlog_fail(&c, SL_ENOTSUP, out_err,
                             "unknown event type %u, not marked ignorable",
                             (unsigned)ev->type);
    break;
  }
  if (ev->body == NULL) {
    ev->body = data + SL_BINLOG_HEADER_LEN;
    ev->body_len = (uint32_t)(c.end - SL_BINLOG_HEADER_LEN);
  }
  return SL_OK;
}

/* ---------------------------------------------------------------- GTIDs */

static int gtid_cmp(const void *a, const void *b) {
  uint32_t x = ((const sl_binlog_gtid_t *)a)->domain;
  uint32_t y = ((const sl_binlog_gtid_t *)b)->domain;
  return x < y ? -1 : x > y;
}

static bool parse_u64(const char **s, uint64_t max, uint64_t *out) {
  const char *p = *s;
  uint64_t v = 0;
  if (*p < '0' || *p > '9') return false;
  while (*p >= '0' && *p <= '9') {
    unsigned dgt = (unsigned)(*p - '0');
    if (v > (max - dgt) / 10) return false;
    v = v * 10 + dgt;
    p++;
  }
  *s = p;
  *out = v;
  return true;
}

int sl__binlog_gtid_state_parse(const char *s, sl_binlog_gtid_state_t *out,
                                sl_error_t **out_err) {
  sl_binlog_gtid_state_t st = {0};
  const char *p = s;
  while (*p == ' ') p++;
  while (*p != 0) {
    uint64_t dom, srv, seq;
    const char *start = p;
    if (!parse_u64(&p, UINT32_MAX, &dom) || *p++ != '-' ||
        !parse_u64(&p, UINT32_MAX, &srv) || *p++ != '-' ||
        !parse_u64(&p, UINT64_MAX, &seq))
      return sl_error_set(out_err, SL_EPARSE,
                          "GTID state '%s': expected domain-server-seq "
                          "at offset %td", s, start - s);
    while (*p == ' ') p++;
    if (*p != 0 && *p != ',')
      return sl_error_set(out_err, SL_EPARSE,
                          "GTID state '%s': expected ',' at offset %td", s,
                          p - s);
    for (uint32_t i = 0; i < st.n; i++)
      if (st.g[i].domain == dom)
        return sl_error_set(out_err, SL_EPARSE,
                            "GTID state '%s': domain %" PRIu64 " twice", s,
                            dom);
    if (st.n == SL_BINLOG_MAX_DOMAINS)
      return sl_error_set(out_err, SL_EPARSE,
                          "GTID state '%s': more than %u domains", s,
                          SL_BINLOG_MAX_DOMAINS);
    st.g[st.n++] = (sl_binlog_gtid_t){(uint32_t)dom, (uint32_t)srv, seq};
    if (*p == ',') {
      p++;
      while (*p == ' ') p++;
      if (*p == 0)
        return sl_error_set(out_err, SL_EPARSE,
                            "GTID state '%s': trailing ','", s);
    }
  }
  qsort(st.g, st.n, sizeof(st.g[0]), gtid_cmp);
  *out = st;
  return SL_OK;
}

int sl__binlog_gtid_state_format(const sl_binlog_gtid_state_t *st,
                                 sl_bytes_t *out) {
  for (uint32_t i = 0; i < st->n; i++) {
    int rc = sl_bytes_printf(out, "%s%" PRIu32 "-%" PRIu32 "-%" PRIu64,
                             i ? "," : "", st->g[i].domain,
                             st->g[i].server_id, st->g[i].seq);
    if (rc != SL_OK) return rc;
  }
  return SL_OK;
}

int sl__binlog_gtid_state_update(sl_binlog_gtid_state_t *st,
                                 const sl_binlog_gtid_t *g) {
  uint32_t i = 0;
  while (i < st->n && st->g[i].domain < g->domain) i++;
  if (i < st->n && st->g[i].domain == g->domain) {
    st->g[i] = *g;
    return SL_OK;
  }
  if (st->n == SL_BINLOG_MAX_DOMAINS) return SL_EOVERFLOW;
  memmove(st->g + i + 1, st->g + i, (st->n - i) * sizeof(st->g[0]));
  st->g[i] = *g;
  st->n++;
  return SL_OK;
}

/* ---------------------------------------------------------------- codec */

int sl__binlog_pos_encode(const sl_binlog_pos_t *pos, sl_bytes_t *out) {
  uint8_t h[2] = {SL_BINLOG_POS_VERSION, (uint8_t)pos->gtid.n};
  size_t fl = strnlen(pos->file, sizeof(pos->file) - 1);
  int rc = sl_bytes_append(out, h, 2);
  for (uint32_t i = 0; rc == SL_OK && i < pos->gtid.n; i++) {
    uint8_t g[16];
    const sl_binlog_gtid_t *x = &pos->gtid.g[i];
    for (int k = 0; k < 4; k++) {
      g[k] = (uint8_t)(x->domain >> (8 * k));
      g[4 + k] = (uint8_t)(x->server_id >> (8 * k));
    }
    for (int k = 0; k < 8; k++) g[8 + k] = (uint8_t)(x->seq >> (8 * k));
    rc = sl_bytes_append(out, g, 16);
  }
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, pos->skip_events);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, pos->skip_rows);
  uint8_t l[2] = {(uint8_t)fl, (uint8_t)(fl >> 8)};
  if (rc == SL_OK) rc = sl_bytes_append(out, l, 2);
  if (rc == SL_OK) rc = sl_bytes_append(out, pos->file, fl);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, pos->offset);
  return rc;
}

int sl__binlog_pos_decode(const uint8_t *p, size_t len, sl_binlog_pos_t *out,
                          sl_error_t **out_err) {
  sl_binlog_pos_t pos;
  memset(&pos, 0, sizeof(pos));
  size_t o = 0;
#define POS_NEED(n, what)                                                  \
  do {                                                                     \
    if (len - o < (size_t)(n))                                             \
      return sl_error_set(out_err, SL_ECORRUPT,                            \
                          "binlog position: truncated at %s (offset %zu "  \
                          "of %zu)", what, o, len);                        \
  } while (0)
  POS_NEED(2, "the header");
  if (p[0] != SL_BINLOG_POS_VERSION)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "binlog position: version %u (this sluice reads %u)",
                        p[0], SL_BINLOG_POS_VERSION);
  pos.gtid.n = p[1];
  o = 2;
  if (pos.gtid.n > SL_BINLOG_MAX_DOMAINS)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "binlog position: %u GTID domains (at most %u)",
                        pos.gtid.n, SL_BINLOG_MAX_DOMAINS);
  for (uint32_t i = 0; i < pos.gtid.n; i++) {
    POS_NEED(16, "a GTID");
    pos.gtid.g[i].domain = sl__le32(p + o);
    pos.gtid.g[i].server_id = sl__le32(p + o + 4);
    pos.gtid.g[i].seq = sl__le64(p + o + 8);
    o += 16;
    if (i > 0 && pos.gtid.g[i].domain <= pos.gtid.g[i - 1].domain)
      return sl_error_set(out_err, SL_ECORRUPT,
                          "binlog position: GTID domains not ascending "
                          "(%u after %u)", pos.gtid.g[i].domain,
                          pos.gtid.g[i - 1].domain);
  }
  POS_NEED(18, "the skip counts");
  pos.skip_events = sl__le64(p + o);
  pos.skip_rows = sl__le64(p + o + 8);
  size_t fl = sl__le16(p + o + 16);
  o += 18;
  if (fl >= sizeof(pos.file))
    return sl_error_set(out_err, SL_ECORRUPT,
                        "binlog position: file name of %zu bytes (at most "
                        "%zu)", fl, sizeof(pos.file) - 1);
  POS_NEED(fl, "the file name");
  if (memchr(p + o, 0, fl) != NULL)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "binlog position: NUL byte in the file name");
  memcpy(pos.file, p + o, fl);
  o += fl;
  POS_NEED(8, "the offset");
  pos.offset = sl__le64(p + o);
  o += 8;
  if (o != len)
    return sl_error_set(out_err, SL_ECORRUPT,
                        "binlog position: %zu bytes left over", len - o);
#undef POS_NEED
  *out = pos;
  return SL_OK;
}
