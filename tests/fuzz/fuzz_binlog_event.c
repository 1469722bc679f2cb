/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: sluice's binlog event decoder
 * (src/connectors/mariadb/binlog_decode.c, binlog_table.c,
 * binlog_value.c, binlog_map.c).  An input is a stream: byte 0 holds the
 * checksum the stream starts with (bit 0: CRC32), whether the harness makes
 * each event's header length and CRC32 match its bytes (bit 1, so that
 * mutations reach the fields behind them), whether the rest is a GTID
 * state text instead (bit 2) or a checkpointed position (bit 3, which
 * must encode back to the same bytes); then per event a 4-byte little-endian length
 * and the bytes.  The corpus holds streams read from a real MariaDB 10.11
 * (tests/integration/test_binlog.c, SL_BINLOG_CAPTURE_DIR).  Every event
 * must decode or be refused with a message naming it; the rows of a decoded
 * rows event are walked and every value is converted to its sluice type.
 */
#include "connectors/mariadb/binlog_decode.h"
#include "connectors/mariadb/binlog_int.h"
#include "fuzz_util.h"

static void gtid_text(const uint8_t *p, size_t n) {
  char *s = malloc(n + 1);
  SL_FUZZ_CHECK(s != NULL);
  memcpy(s, p, n);
  s[n] = 0;
  sl_binlog_gtid_state_t st, st2;
  sl_error_t *err = NULL;
  if (sl__binlog_gtid_state_parse(s, &st, &err) == SL_OK) {
    /* Format and parse again: the same state. */
    sl_bytes_t b;
    sl_bytes_init(&b);
    SL_FUZZ_CHECK(sl__binlog_gtid_state_format(&st, &b) == SL_OK);
    SL_FUZZ_CHECK(sl_bytes_append(&b, "", 1) == SL_OK);
    SL_FUZZ_CHECK(sl__binlog_gtid_state_parse((const char *)b.data, &st2,
                                              NULL) == SL_OK);
    SL_FUZZ_CHECK(st.n == st2.n &&
                  memcmp(st.g, st2.g, st.n * sizeof(st.g[0])) == 0);
    for (uint32_t i = 0; i + 1 < st.n; i++)
      SL_FUZZ_CHECK(st.g[i].domain < st.g[i + 1].domain);
    sl_bytes_close(&b);
  } else {
    SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
  }
  sl_error_destroy(err);
  free(s);
}

static void walk_rows(sl_binlog_decoder_t *d, const sl_binlog_event_t *ev,
                      const char *name, sl_binlog_value_t *b,
                      sl_binlog_value_t *a) {
  const sl_binlog_table_t *t = ev->u.rows.table;
  sl_binlog_rows_iter_t it;
  sl_error_t *err = NULL;
  sl_bytes_t buf;
  sl_bytes_init(&buf);
  sl__binlog_rows_begin(&it, ev);
  int rc;
  while ((rc = sl__binlog_rows_next(d, &it, b, a, &err)) == SL_OK) {
    for (uint32_t i = 0; i < t->n_cols; i++) {
      sl_type_t ty;
      sl_value_t v;
      sl_error_t *e2 = NULL;
      if (sl__binlog_col_sl_type(&t->cols[i], &ty, &e2) != SL_OK) {
        SL_FUZZ_CHECK(e2 != NULL && sl_error_message(e2) != NULL);
        sl_error_destroy(e2);
        continue;
      }
      for (int k = 0; k < 2; k++) {
        const sl_binlog_value_t *x = k ? &a[i] : &b[i];
        if (sl__binlog_value_to_sl(&t->cols[i], x, ty, &buf, &v, &e2) ==
            SL_OK) {
          SL_FUZZ_CHECK(v.type == ty.id);
          if (!v.is_null &&
              (ty.id == SL_TYPE_STRING || ty.id == SL_TYPE_BYTES) &&
              v.u.s.len > 0)
            SL_FUZZ_CHECK(v.u.s.ptr != NULL);
        } else {
          SL_FUZZ_CHECK(e2 != NULL && sl_error_message(e2) != NULL);
          sl_error_destroy(e2);
          e2 = NULL;
        }
      }
    }
  }
  if (rc != SL_ENOTFOUND) {
    SL_FUZZ_CHECK(err != NULL);
    SL_FUZZ_CHECK(strstr(sl_error_message(err), name) != NULL);
  }
  sl_error_destroy(err);
  sl_bytes_close(&buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl_fuzz_setup();
  /* Decoding is linear in rows x columns; larger inputs only slow the
   * search down. */
  if (size < 1 || size > (1u << 18)) return 0;
  uint8_t mode = data[0];
  if (mode & 4) {
    gtid_text(data + 1, size - 1);
    return 0;
  }
  if (mode & 8) {
    sl_binlog_pos_t pos;
    sl_error_t *err = NULL;
    if (sl__binlog_pos_decode(data + 1, size - 1, &pos, &err) == SL_OK) {
      sl_bytes_t b;
      sl_bytes_init(&b);
      SL_FUZZ_CHECK(sl__binlog_pos_encode(&pos, &b) == SL_OK);
      SL_FUZZ_CHECK(b.len == size - 1 && memcmp(b.data, data + 1, b.len) == 0);
      sl_bytes_close(&b);
    } else {
      SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
    }
    sl_error_destroy(err);
    return 0;
  }
  static sl_binlog_value_t *b, *a;
  if (b == NULL) {
    b = calloc(SL_BINLOG_MAX_COLUMNS, sizeof(*b));
    a = calloc(SL_BINLOG_MAX_COLUMNS, sizeof(*a));
    SL_FUZZ_CHECK(a != NULL && b != NULL);
  }
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, (mode & 1) ? SL_BINLOG_CHECKSUM_CRC32
                                         : SL_BINLOG_CHECKSUM_OFF);
  size_t off = 1;
  while (off + 4 <= size) {
    size_t n = sl__le32(data + off);
    off += 4;
    if (n > size - off) n = size - off;
    /* An exact-size copy, so that ASan sees a read past the end. */
    uint8_t *ev_bytes = malloc(n ? n : 1);
    SL_FUZZ_CHECK(ev_bytes != NULL);
    if (n) memcpy(ev_bytes, data + off, n);
    off += n;
    if ((mode & 2) && n >= SL_BINLOG_HEADER_LEN) {
      ev_bytes[9] = (uint8_t)n;
      ev_bytes[10] = (uint8_t)(n >> 8);
      ev_bytes[11] = (uint8_t)(n >> 16);
      ev_bytes[12] = (uint8_t)(n >> 24);
      if (n >= SL_BINLOG_HEADER_LEN + 4) {
        uint32_t c = sl__binlog_crc32(ev_bytes, n - 4);
        memcpy(ev_bytes + n - 4, &c, 4); /* little-endian hosts */
      }
    }
    char nb[32];
    const char *name =
        n > 4 ? sl__binlog_event_name(ev_bytes[4], nb, sizeof(nb)) : "";
    sl_binlog_event_t ev;
    sl_error_t *err = NULL;
    int rc = sl__binlog_decode(&d, ev_bytes, n, &ev, &err);
    if (rc == SL_OK) {
      SL_FUZZ_CHECK(err == NULL);
      SL_FUZZ_CHECK(ev.body_len <= n);
      if (ev.type >= SL_BLE_WRITE_ROWS_V1 &&
          ev.type <= SL_BLE_DELETE_ROWS_V2 && ev.type != SL_BLE_INCIDENT &&
          ev.type != SL_BLE_HEARTBEAT && ev.type != SL_BLE_IGNORABLE &&
          ev.type != SL_BLE_ROWS_QUERY)
        walk_rows(&d, &ev, name, b, a);
    } else {
      SL_FUZZ_CHECK(err != NULL && sl_error_message(err) != NULL);
      if (n >= SL_BINLOG_HEADER_LEN)
        SL_FUZZ_CHECK(strstr(sl_error_message(err), name) != NULL);
      sl_error_destroy(err);
    }
    free(ev_bytes);
  }
  sl__binlog_decoder_close(&d);
  return 0;
}
