/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The compact row codec (for storage) and canonical key bytes (the key
 * hash is in keygroup.c).  See README.md and docs/row-format.md.
 */
#include <math.h>

#include "core.h"

/*
 * Compact row: u8 row kind, the null bitmap (ceil(n/8) bytes), then each
 * non-null field in order.  Integers, bool, timestamp and decimal are
 * zig-zag varints; float64 is 8 little-endian bytes; string and bytes are a
 * varint length followed by the bytes.
 */
int sl_row_encode_compact(const sl_row_t *row, sl_bytes_t *out) {
  uint32_t n = sl_schema_n_fields(row->schema);
  uint32_t nbytes = (n + 7) >> 3;
  int rc = sl_bytes_reserve(out, 1 + nbytes + 10u * n);
  if (rc != SL_OK) return rc;
  out->data[out->len++] = (uint8_t)sl_row_kind(row);
  memcpy(out->data + out->len, row->data + 4, nbytes);
  out->len += nbytes;
  for (uint32_t i = 0; i < n && rc == SL_OK; i++) {
    if (sl_row_is_null(row, i)) continue;
    switch (sl_schema_field(row->schema, i)->type.id) {
    case SL_TYPE_FLOAT64: {
      double d = sl_row_get_f64(row, i);
      rc = sl_bytes_append(out, &d, 8);
      break;
    }
    case SL_TYPE_STRING:
    case SL_TYPE_BYTES: {
      sl_slice_t s = sl_row_get_str(row, i);
      rc = sl__bytes_put_varint(out, s.len);
      if (rc == SL_OK) rc = sl_bytes_append(out, s.ptr, s.len);
      break;
    }
    default:
      rc = sl__bytes_put_varint(out, sl__zigzag(sl_row_get_i64(row, i)));
      break;
    }
  }
  return rc;
}

int sl_row_decode_compact(sl_row_builder_t *b, const uint8_t *p, size_t len,
                          size_t *out_consumed) {
  const sl_schema_t *schema = b->schema;
  uint32_t n = sl_schema_n_fields(schema);
  uint32_t nbytes = (n + 7) >> 3;
  if (len < 1 + (size_t)nbytes) return SL_CORRUPT("compact row truncated");
  if (p[0] > 3) return SL_CORRUPT("compact row kind %u", p[0]);
  sl_row_builder_reset(b, (sl_row_kind_t)p[0]);
  const uint8_t *bitmap = p + 1;
  size_t off = 1 + nbytes;
  for (uint32_t i = 0; i < n; i++) {
    const sl_field_t *f = sl_schema_field(schema, i);
    bool is_null = (bitmap[i >> 3] >> (i & 7u)) & 1u;
    if (is_null) {
      if (!f->type.nullable)
        return SL_CORRUPT("compact row: null in field '%s'", f->name);
      continue;
    }
    uint64_t u;
    size_t k;
    switch (f->type.id) {
    case SL_TYPE_FLOAT64: {
      if (len - off < 8) return SL_CORRUPT("compact row truncated");
      double d;
      memcpy(&d, p + off, 8);
      off += 8;
      sl_row_builder_set_f64(b, i, d);
      break;
    }
    case SL_TYPE_STRING:
    case SL_TYPE_BYTES:
      if ((k = sl__get_varint(p + off, len - off, &u)) == 0 ||
          u > len - off - k || u > UINT32_MAX / 2)
        return SL_CORRUPT("compact row: bad length of field '%s'", f->name);
      off += k;
      if (sl_row_builder_set_str(b, i, p + off, (uint32_t)u) != SL_OK)
        return SL_ENOMEM;
      off += u;
      break;
    default: {
      if ((k = sl__get_varint(p + off, len - off, &u)) == 0)
        return SL_CORRUPT("compact row: bad varint in field '%s'", f->name);
      off += k;
      int64_t v = sl__unzigzag(u);
      if (f->type.id == SL_TYPE_BOOL && v != 0 && v != 1)
        return SL_CORRUPT("compact row: bool field '%s'", f->name);
      if (f->type.id == SL_TYPE_INT32 && (v < INT32_MIN || v > INT32_MAX))
        return SL_CORRUPT("compact row: int32 field '%s'", f->name);
      sl_row_builder_set_i64(b, i, v);
      break;
    }
    }
  }
  if (out_consumed) *out_consumed = off;
  return SL_OK;
}

int sl_key_add_null(sl_bytes_t *key) {
  int rc = sl_bytes_reserve(key, 1);
  if (rc == SL_OK) key->data[key->len++] = 0;
  return rc;
}

int sl_key_add_i64(sl_bytes_t *key, int64_t v) {
  int rc = sl_bytes_reserve(key, 9);
  if (rc != SL_OK) return rc;
  key->data[key->len] = 1;
  sl__put_u64be(key->data + key->len + 1, (uint64_t)v);
  key->len += 9;
  return SL_OK;
}

static int key_add_i32(sl_bytes_t *key, int32_t v) {
  int rc = sl_bytes_reserve(key, 5);
  if (rc != SL_OK) return rc;
  key->data[key->len] = 1;
  sl__put_u32be(key->data + key->len + 1, (uint32_t)v);
  key->len += 5;
  return SL_OK;
}

int sl_key_add_f64(sl_bytes_t *key, double v) {
  uint64_t bits;
  if (v == 0.0) v = 0.0; /* -0.0 == 0.0 */
  if (isnan(v)) bits = 0x7ff8000000000000ull;
  else memcpy(&bits, &v, 8);
  return sl_key_add_i64(key, (int64_t)bits);
}

int sl_key_add_str(sl_bytes_t *key, const void *p, uint32_t len) {
  int rc = sl_bytes_reserve(key, 5 + (size_t)len);
  if (rc != SL_OK) return rc;
  key->data[key->len] = 1;
  sl__put_u32be(key->data + key->len + 1, len);
  if (len) memcpy(key->data + key->len + 5, p, len);
  key->len += 5 + (size_t)len;
  return SL_OK;
}

int sl_key_add_field(sl_bytes_t *key, const sl_row_t *row, uint32_t i) {
  if (sl_row_is_null(row, i)) return sl_key_add_null(key);
  switch (sl_schema_field(row->schema, i)->type.id) {
  case SL_TYPE_BOOL: {
    int rc = sl_bytes_reserve(key, 2);
    if (rc != SL_OK) return rc;
    key->data[key->len] = 1;
    key->data[key->len + 1] = sl_row_get_bool(row, i) ? 1 : 0;
    key->len += 2;
    return SL_OK;
  }
  case SL_TYPE_INT32:
    return key_add_i32(key, sl_row_get_i32(row, i));
  case SL_TYPE_FLOAT64:
    return sl_key_add_f64(key, sl_row_get_f64(row, i));
  case SL_TYPE_STRING:
  case SL_TYPE_BYTES: {
    sl_slice_t s = sl_row_get_str(row, i);
    return sl_key_add_str(key, s.ptr, s.len);
  }
  default:
    return sl_key_add_i64(key, sl_row_get_i64(row, i));
  }
}
