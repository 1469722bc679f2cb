/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Row images of WRITE/UPDATE/DELETE_ROWS events (v1 and v2): the null
 * bitmap over the columns present, then each present, non-null column's
 * value in the TABLE_MAP's type and metadata: integers, FLOAT/DOUBLE,
 * DECIMAL (MySQL's decimal2bin), CHAR/VARCHAR/TEXT/BLOB, the temporal types
 * (the v2 forms with fractional seconds, and the old ones), YEAR, BIT,
 * ENUM/SET; and the map of those values onto sluice values.  Part of the
 * binlog decoder (binlog_decode.h).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "connectors/mariadb/binlog_int.h"

static const uint8_t dig2bytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const uint32_t pow10_9[10] = {1,      10,      100,      1000,
                                     10000,  100000,  1000000,  10000000,
                                     100000000, 1000000000};

static const char *col_label(const sl_binlog_col_t *col, uint32_t i,
                             char *buf, size_t size) {
  if (col->name != NULL)
    snprintf(buf, size, "column %u '%s' (%s)", i, col->name,
             sl__binlog_type_name(col->type));
  else
    snprintf(buf, size, "column %u (%s)", i, sl__binlog_type_name(col->type));
  return buf;
}

/* Size of a DECIMAL(p,s) in the binlog. */
static size_t decimal_size(uint8_t p, uint8_t s) {
  int intg = p - s;
  return (size_t)(intg / 9) * 4 + dig2bytes[intg % 9] + (size_t)(s / 9) * 4 +
         dig2bytes[s % 9];
}

static void put_digits(char *out, size_t *n, uint32_t v, int width) {
  for (int k = width - 1; k >= 0; k--) {
    out[*n + (size_t)k] = (char)('0' + v % 10);
    v /= 10;
  }
  *n += (size_t)width;
}

static int decode_decimal(sl_binlog_cur_t *c, const sl_binlog_col_t *col,
                          const char *what, sl_binlog_value_t *v,
                          sl_error_t **out_err) {
  uint8_t p = col->precision, s = col->scale;
  size_t size = decimal_size(p, s);
  int rc = sl__binlog_need(c, size, what, out_err);
  if (rc != SL_OK) return rc;
  uint8_t b[40];
  memcpy(b, c->p + c->off, size);
  bool neg = !(b[0] & 0x80);
  b[0] ^= 0x80;
  if (neg)
    for (size_t i = 0; i < size; i++) b[i] ^= 0xFF;
  int intg = p - s, intg0 = intg / 9, intg0x = intg % 9;
  int frac0 = s / 9, frac0x = s % 9;
  char digits[80];
  size_t nd = 0, o = 0;
  uint32_t x;
  if (intg0x) {
    x = (uint32_t)sl__be(b, dig2bytes[intg0x]);
    o += dig2bytes[intg0x];
    if (x >= pow10_9[intg0x]) goto bad;
    put_digits(digits, &nd, x, intg0x);
  }
  for (int i = 0; i < intg0; i++, o += 4) {
    x = (uint32_t)sl__be(b + o, 4);
    if (x >= 1000000000u) goto bad;
    put_digits(digits, &nd, x, 9);
  }
  size_t int_digits = nd;
  for (int i = 0; i < frac0; i++, o += 4) {
    x = (uint32_t)sl__be(b + o, 4);
    if (x >= 1000000000u) goto bad;
    put_digits(digits, &nd, x, 9);
  }
  if (frac0x) {
    x = (uint32_t)sl__be(b + o, dig2bytes[frac0x]);
    if (x >= pow10_9[frac0x]) goto bad;
    put_digits(digits, &nd, x, frac0x);
  }
  c->off += size;
  /* Text: sign, integer part without leading zeros, point, fraction. */
  size_t lead = 0;
  while (lead < int_digits && digits[lead] == '0') lead++;
  bool is_zero = true;
  for (size_t i = 0; i < nd; i++)
    if (digits[i] != '0') is_zero = false;
  size_t n = 0;
  if (neg && !is_zero) v->dec[n++] = '-';
  if (lead == int_digits) v->dec[n++] = '0';
  else {
    memcpy(v->dec + n, digits + lead, int_digits - lead);
    n += int_digits - lead;
  }
  if (s) {
    v->dec[n++] = '.';
    memcpy(v->dec + n, digits + int_digits, nd - int_digits);
    n += nd - int_digits;
  }
  v->dec[n] = 0;
  v->kind = SL_BV_DECIMAL;
  return SL_OK;
bad:
  return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                         "invalid DECIMAL(%u,%u) digits in %s", p, s, what);
}

/* Fractional seconds of fsp digits: 0-3 bytes big-endian, in usec. */
static int read_frac(sl_binlog_cur_t *c, uint8_t fsp, const char *what,
                     uint32_t *out, sl_error_t **out_err) {
  size_t n = (fsp + 1u) / 2u;
  int rc = sl__binlog_need(c, n, what, out_err);
  if (rc != SL_OK) return rc;
  uint32_t f = (uint32_t)sl__be(c->p + c->off, n);
  c->off += n;
  uint32_t mul = n == 1 ? 10000 : n == 2 ? 100 : 1;
  if (f * (uint64_t)mul >= 1000000u)
    return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                           "fractional seconds %" PRIu32 " out of range in %s",
                           f, what);
  *out = f * mul;
  return SL_OK;
}

static int bad_temporal(sl_binlog_cur_t *c, const char *what,
                        const sl_binlog_value_t *v, sl_error_t **out_err) {
  return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                         "invalid date/time fields in %s (%04u-%02u-%02u "
                         "%02u:%02u:%02u)", what, v->t.year, v->t.month,
                         v->t.day, v->t.hour, v->t.minute, v->t.second);
}

static bool date_ok(const sl_binlog_value_t *v) {
  return v->t.year <= 9999 && v->t.month <= 12 && v->t.day <= 31;
}

static int decode_time2(sl_binlog_cur_t *c, uint8_t fsp, const char *what,
                        sl_binlog_value_t *v, sl_error_t **out_err) {
  size_t n = 3 + (fsp + 1u) / 2u;
  int rc = sl__binlog_need(c, n, what, out_err);
  if (rc != SL_OK) return rc;
  const uint8_t *b = c->p + c->off;
  int64_t packed;
  /* MySQL's my_time_packed_from_binary. */
  int64_t intpart = (int64_t)sl__be(b, 3) - 0x800000;
  switch (fsp) {
  case 0:
    packed = intpart * (1 << 24);
    break;
  case 1:
  case 2: {
    int64_t frac = b[3];
    if (intpart < 0 && frac) {
      intpart++;
      frac -= 0x100;
    }
    packed = intpart * (1 << 24) + frac * 10000;
    break;
  }
  case 3:
  case 4: {
    int64_t frac = (int64_t)sl__be(b + 3, 2);
    if (intpart < 0 && frac) {
      intpart++;
      frac -= 0x10000;
    }
    packed = intpart * (1 << 24) + frac * 100;
    break;
  }
  default:
    packed = (int64_t)sl__be(b, 6) - 0x800000000000LL;
    break;
  }
  c->off += n;
  v->kind = SL_BV_TIME;
  v->t.is_negative = packed < 0;
  uint64_t a = packed < 0 ? (uint64_t)(-packed) : (uint64_t)packed;
  uint64_t hms = a >> 24;
  v->t.usec = (uint32_t)(a % (1u << 24));
  v->t.hour = (uint16_t)((hms >> 12) % (1u << 10));
  v->t.minute = (uint8_t)((hms >> 6) % 64);
  v->t.second = (uint8_t)(hms % 64);
  if (v->t.hour > 838 || v->t.minute > 59 || v->t.second > 59 ||
      v->t.usec > 999999)
    return bad_temporal(c, what, v, out_err);
  return SL_OK;
}

/* One value of column col at the cursor. */
static int decode_value(sl_binlog_cur_t *c, const sl_binlog_col_t *col,
                        const char *what, sl_binlog_value_t *v,
                        sl_error_t **out_err) {
  int rc;
  const uint8_t *b;
  size_t n;
  v->is_unsigned = col->is_unsigned;
  switch (col->type) {
  case SL_BLT_TINY: n = 1; goto integer;
  case SL_BLT_SHORT: n = 2; goto integer;
  case SL_BLT_INT24: n = 3; goto integer;
  case SL_BLT_LONG: n = 4; goto integer;
  case SL_BLT_LONGLONG: n = 8;
  integer:
    if ((rc = sl__binlog_need(c, n, what, out_err)) != SL_OK) return rc;
    b = c->p + c->off;
    c->off += n;
    {
      uint64_t u = 0;
      for (size_t i = n; i > 0; i--) u = (u << 8) | b[i - 1];
      v->kind = SL_BV_INT;
      if (col->is_unsigned) {
        v->u.u = u;
      } else if (n == 8) {
        v->u.i = (int64_t)u;
      } else {
        uint64_t sign = (uint64_t)1 << (8 * n - 1);
        v->u.i = (int64_t)((u ^ sign) - sign);
      }
    }
    return SL_OK;
  case SL_BLT_FLOAT: {
    if ((rc = sl__binlog_need(c, 4, what, out_err)) != SL_OK) return rc;
    uint32_t bits = sl__le32(c->p + c->off);
    float f;
    memcpy(&f, &bits, 4);
    c->off += 4;
    v->kind = SL_BV_DOUBLE;
    v->u.f = (double)f;
    return SL_OK;
  }
  case SL_BLT_DOUBLE: {
    if ((rc = sl__binlog_need(c, 8, what, out_err)) != SL_OK) return rc;
    uint64_t bits = sl__le64(c->p + c->off);
    c->off += 8;
    v->kind = SL_BV_DOUBLE;
    memcpy(&v->u.f, &bits, 8);
    return SL_OK;
  }
  case SL_BLT_NEWDECIMAL:
    return decode_decimal(c, col, what, v, out_err);
  case SL_BLT_YEAR:
    if ((rc = sl__binlog_need(c, 1, what, out_err)) != SL_OK) return rc;
    v->kind = SL_BV_YEAR;
    v->u.i = c->p[c->off] ? 1900 + c->p[c->off] : 0;
    c->off++;
    return SL_OK;
  case SL_BLT_DATE:
  case SL_BLT_NEWDATE: {
    if ((rc = sl__binlog_need(c, 3, what, out_err)) != SL_OK) return rc;
    uint32_t x = sl__le24(c->p + c->off);
    c->off += 3;
    v->kind = SL_BV_DATE;
    v->t.day = (uint8_t)(x & 31);
    v->t.month = (uint8_t)((x >> 5) & 15);
    v->t.year = (uint16_t)(x >> 9);
    if (!date_ok(v)) return bad_temporal(c, what, v, out_err);
    return SL_OK;
  }
  case SL_BLT_TIME: {
    if ((rc = sl__binlog_need(c, 3, what, out_err)) != SL_OK) return rc;
    int32_t x = (int32_t)(sl__le24(c->p + c->off) << 8) >> 8;
    c->off += 3;
    v->kind = SL_BV_TIME;
    v->t.is_negative = x < 0;
    uint32_t a = x < 0 ? (uint32_t)(-(int64_t)x) : (uint32_t)x;
    v->t.hour = (uint16_t)(a / 10000);
    v->t.minute = (uint8_t)(a / 100 % 100);
    v->t.second = (uint8_t)(a % 100);
    if (v->t.hour > 838 || v->t.minute > 59 || v->t.second > 59)
      return bad_temporal(c, what, v, out_err);
    return SL_OK;
  }
  case SL_BLT_DATETIME: {
    if ((rc = sl__binlog_need(c, 8, what, out_err)) != SL_OK) return rc;
    uint64_t x = sl__le64(c->p + c->off);
    c->off += 8;
    uint64_t date = x / 1000000, tm = x % 1000000;
    v->kind = SL_BV_DATETIME;
    if (date / 10000 > 9999) {
      v->t.year = 10000;
      return bad_temporal(c, what, v, out_err);
    }
    v->t.year = (uint16_t)(date / 10000);
    v->t.month = (uint8_t)(date / 100 % 100);
    v->t.day = (uint8_t)(date % 100);
    v->t.hour = (uint16_t)(tm / 10000);
    v->t.minute = (uint8_t)(tm / 100 % 100);
    v->t.second = (uint8_t)(tm % 100);
    if (!date_ok(v) || v->t.hour > 23 || v->t.minute > 59 ||
        v->t.second > 59)
      return bad_temporal(c, what, v, out_err);
    return SL_OK;
  }
  case SL_BLT_TIMESTAMP:
    if ((rc = sl__binlog_need(c, 4, what, out_err)) != SL_OK) return rc;
    v->kind = SL_BV_TIMESTAMP;
    v->u.ts.sec = sl__le32(c->p + c->off);
    v->u.ts.usec = 0;
    c->off += 4;
    return SL_OK;
  case SL_BLT_TIMESTAMP2:
    if ((rc = sl__binlog_need(c, 4, what, out_err)) != SL_OK) return rc;
    v->kind = SL_BV_TIMESTAMP;
    v->u.ts.sec = (int64_t)sl__be(c->p + c->off, 4);
    c->off += 4;
    return read_frac(c, col->fsp, what, &v->u.ts.usec, out_err);
  case SL_BLT_DATETIME2: {
    if ((rc = sl__binlog_need(c, 5, what, out_err)) != SL_OK) return rc;
    int64_t ip = (int64_t)sl__be(c->p + c->off, 5) - 0x8000000000LL;
    c->off += 5;
    v->kind = SL_BV_DATETIME;
    if (ip < 0)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "negative DATETIME in %s", what);
    uint64_t ymd = (uint64_t)ip >> 17, ym = ymd >> 5, hms = (uint64_t)ip &
                                                            0x1FFFF;
    v->t.day = (uint8_t)(ymd & 31);
    v->t.month = (uint8_t)(ym % 13);
    v->t.year = (uint16_t)(ym / 13 > 10000 ? 10000 : ym / 13);
    v->t.second = (uint8_t)(hms & 63);
    v->t.minute = (uint8_t)((hms >> 6) & 63);
    v->t.hour = (uint16_t)(hms >> 12);
    if (!date_ok(v) || v->t.hour > 23 || v->t.minute > 59 ||
        v->t.second > 59)
      return bad_temporal(c, what, v, out_err);
    return read_frac(c, col->fsp, what, &v->t.usec, out_err);
  }
  case SL_BLT_TIME2:
    return decode_time2(c, col->fsp, what, v, out_err);
  case SL_BLT_VARCHAR:
  case SL_BLT_VAR_STRING:
  case SL_BLT_STRING: {
    size_t lb = col->max_len < 256 ? 1 : 2;
    if ((rc = sl__binlog_need(c, lb, what, out_err)) != SL_OK) return rc;
    size_t l = lb == 1 ? c->p[c->off] : sl__le16(c->p + c->off);
    c->off += lb;
    if (l > col->max_len)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "%zu bytes in %s of at most %" PRIu32, l, what,
                             col->max_len);
    if ((rc = sl__binlog_need(c, l, what, out_err)) != SL_OK) return rc;
    v->kind = SL_BV_STRING;
    v->u.s = (sl_binlog_str_t){c->p + c->off, (uint32_t)l};
    c->off += l;
    return SL_OK;
  }
  case SL_BLT_BLOB:
  case SL_BLT_TINY_BLOB:
  case SL_BLT_MEDIUM_BLOB:
  case SL_BLT_LONG_BLOB:
  case SL_BLT_GEOMETRY:
  case SL_BLT_JSON: {
    if (col->type == SL_BLT_JSON)
      return sl__binlog_fail(c, SL_ENOTSUP, out_err,
                             "%s: MySQL's binary JSON is not decoded "
                             "(MariaDB's JSON is text and is)", what);
    size_t lb = col->max_len;
    if ((rc = sl__binlog_need(c, lb, what, out_err)) != SL_OK) return rc;
    uint64_t l = 0;
    for (size_t i = lb; i > 0; i--) l = (l << 8) | c->p[c->off + i - 1];
    c->off += lb;
    if ((rc = sl__binlog_need(c, (size_t)l, what, out_err)) != SL_OK)
      return rc;
    v->kind = col->type == SL_BLT_GEOMETRY ? SL_BV_BLOBLIKE : SL_BV_STRING;
    v->u.s = (sl_binlog_str_t){c->p + c->off, (uint32_t)l};
    c->off += (size_t)l;
    return SL_OK;
  }
  case SL_BLT_BIT: {
    n = (col->max_len + 7) / 8;
    if ((rc = sl__binlog_need(c, n, what, out_err)) != SL_OK) return rc;
    v->kind = SL_BV_BIT;
    v->u.u = sl__be(c->p + c->off, n);
    c->off += n;
    if (col->max_len < 64 && (v->u.u >> col->max_len) != 0)
      return sl__binlog_fail(c, SL_ECORRUPT, out_err,
                             "BIT(%" PRIu32 ") value 0x%" PRIx64
                             " has more bits in %s", col->max_len, v->u.u,
                             what);
    return SL_OK;
  }
  case SL_BLT_ENUM:
  case SL_BLT_SET:
    n = col->max_len;
    if ((rc = sl__binlog_need(c, n, what, out_err)) != SL_OK) return rc;
    v->kind = col->type == SL_BLT_ENUM ? SL_BV_ENUM : SL_BV_SET;
    v->u.u = 0;
    for (size_t i = n; i > 0; i--) v->u.u = (v->u.u << 8) | c->p[c->off + i - 1];
    c->off += n;
    return SL_OK;
  case SL_BLT_NULL:
    v->kind = SL_BV_NULL;
    return SL_OK;
  default:
    return sl__binlog_fail(c, SL_ENOTSUP, out_err,
                           "%s: column type %u is not decoded", what,
                           col->type);
  }
}

static inline bool bit(const uint8_t *bm, uint32_t i) {
  return (bm[i / 8] >> (i % 8)) & 1;
}

/* One image: null bitmap over the present columns, then the values. */
static int decode_image(sl_binlog_cur_t *c, const sl_binlog_event_t *ev,
                        const uint8_t *present, uint32_t row,
                        const char *image, sl_binlog_value_t *vals,
                        sl_error_t **out_err) {
  const sl_binlog_table_t *t = ev->u.rows.table;
  uint32_t n = ev->u.rows.n_cols, k = 0;
  for (uint32_t i = 0; i < n; i++) k += bit(present, i);
  size_t nb = ((size_t)k + 7) / 8;
  /* The messages' context ("column 3 'name' (VARCHAR) of row 7's after
   * image") is formatted only on a failure: formatting it for every value
   * took most of the decoder's time (sluice-bench-cdc).  A failed value
   * is decoded again from the same offset with the context, which fails
   * the same way (decoding is a pure function of the bytes). */
  char what[320], lab[200];
  int rc;
  if (c->end - c->off < nb) {
    snprintf(what, sizeof(what), "the null bitmap of row %u's %s image", row,
             image);
    return sl__binlog_need(c, nb, what, out_err);
  }
  const uint8_t *nulls = c->p + c->off;
  c->off += nb;
  uint32_t j = 0;
  for (uint32_t i = 0; i < n; i++) {
    /* Everything but the DECIMAL text, which is only terminated. */
    memset(&vals[i], 0, offsetof(sl_binlog_value_t, dec));
    vals[i].dec[0] = 0;
    if (!bit(present, i)) {
      vals[i].kind = SL_BV_ABSENT;
      continue;
    }
    if (bit(nulls, j++)) {
      vals[i].kind = SL_BV_NULL;
      continue;
    }
    size_t off = c->off;
    if (decode_value(c, &t->cols[i], "", &vals[i], NULL) == SL_OK) continue;
    c->off = off;
    snprintf(what, sizeof(what), "%s of row %u's %s image",
             col_label(&t->cols[i], i, lab, sizeof(lab)), row, image);
    rc = decode_value(c, &t->cols[i], what, &vals[i], out_err);
    return rc != SL_OK ? rc
                       : sl__binlog_fail(c, SL_ECORRUPT, out_err,
                                         "%s decoded on the second try", what);
  }
  return SL_OK;
}

void sl__binlog_rows_begin(sl_binlog_rows_iter_t *it,
                           const sl_binlog_event_t *ev) {
  it->ev = ev;
  it->off = 0;
  it->index = 0;
}

int sl__binlog_rows_next(const sl_binlog_decoder_t *d,
                         sl_binlog_rows_iter_t *it,
                         sl_binlog_value_t *before, sl_binlog_value_t *after,
                         sl_error_t **out_err) {
  const sl_binlog_event_t *ev = it->ev;
  if (it->off >= ev->u.rows.rows_len) return SL_ENOTFOUND;
  /* Offsets in messages count from the event's first byte. */
  sl_binlog_cur_t c = {.d = d, .hdr = ev->raw, .hdr_len = ev->event_len,
                       .p = ev->u.rows.rows, .off = it->off,
                       .end = ev->u.rows.rows_len,
                       .base = (size_t)(ev->u.rows.rows - ev->raw)};
  uint32_t n = ev->u.rows.n_cols;
  int rc;
  uint8_t kind = ev->u.rows.kind;
  for (uint32_t i = 0; i < n; i++) {
    if (kind == 0) before[i].kind = SL_BV_ABSENT;
    if (kind == 2) after[i].kind = SL_BV_ABSENT;
  }
  if (kind == 0)
    rc = decode_image(&c, ev, ev->u.rows.present, it->index, "after", after,
                      out_err);
  else
    rc = decode_image(&c, ev, ev->u.rows.present, it->index, "before",
                      before, out_err);
  if (rc == SL_OK && kind == 1)
    rc = decode_image(&c, ev, ev->u.rows.present_after, it->index, "after",
                      after, out_err);
  if (rc != SL_OK) return rc;
  /* A row of no columns takes no bytes: the iterator would never reach
   * the end.  Servers always log at least one column per image. */
  if (c.off == it->off)
    return sl__binlog_fail(&c, SL_ECORRUPT, out_err,
                           "row %u has no columns in its image (its "
                           "columns-present bitmap is empty)", it->index);
  it->off = (uint32_t)c.off;
  it->index++;
  return SL_OK;
}
