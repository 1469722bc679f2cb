/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binary rows: the builder, validation of untrusted row bytes and generic
 * value access.  The layout is described in include/sluice/sl_row.h and
 * docs/row-format.md.  See README.md.
 */
#include <math.h>

#include "core.h"

static const char *kind_names[] = {"+I", "-U", "+U", "-D"};

const char *sl_row_kind_name(sl_row_kind_t kind) {
  return kind_names[(unsigned)kind & 3u];
}

int sl_row_kind_parse(const char *s, sl_row_kind_t *out) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(s, kind_names[i]) == 0) {
      *out = (sl_row_kind_t)i;
      return SL_OK;
    }
  }
  return SL_EPARSE;
}

int sl_row_builder_init(sl_row_builder_t *b, const sl_schema_t *schema) {
  memset(b, 0, sizeof(*b));
  b->schema = schema;
  b->n_fields = sl_schema_n_fields(schema);
  b->fixed_off = sl_row_header_size(b->n_fields);
  b->cap = b->fixed_off + 8u * b->n_fields + 64;
  b->buf = sl_malloc(b->cap);
  b->hdr = sl_calloc(1, b->fixed_off);
  if (b->buf == NULL || b->hdr == NULL) {
    sl_free(b->buf);
    sl_free(b->hdr);
    memset(b, 0, sizeof(*b));
    return SL_ENOMEM;
  }
  /* The header of a row with every field null. */
  b->hdr[1] = SL_ROW_FORMAT_VERSION;
  uint16_t n = (uint16_t)b->n_fields;
  memcpy(b->hdr + 2, &n, 2);
  uint32_t nbytes = (b->n_fields + 7) >> 3;
  if (nbytes) {
    memset(b->hdr + 4, 0xff, nbytes);
    if (b->n_fields & 7u)
      b->hdr[4 + nbytes - 1] = (uint8_t)((1u << (b->n_fields & 7u)) - 1);
  }
  if (b->n_fields <= 64) b->nonnull_mask = sl__schema_nonnull_mask_word(schema, 0);
  sl_row_builder_reset(b, SL_ROW_INSERT);
  return SL_OK;
}

void sl_row_builder_close(sl_row_builder_t *b) {
  sl_free(b->buf);
  sl_free(b->hdr);
  sl_error_destroy(b->err);
  memset(b, 0, sizeof(*b));
}

void sl__row_builder_reset_slow(sl_row_builder_t *b, sl_row_kind_t kind) {
  /* The header comes from the template (8-byte moves; locals because
   * stores through the byte pointer could alias the builder's fields).
   * Slots are not cleared: a slot is read only when its field is not
   * null, and finish() zeroes the slots of null fields. */
  const uint32_t fixed_off = b->fixed_off, n = b->n_fields;
  uint8_t *p = b->buf;
  const uint8_t *hdr = b->hdr;
  for (uint32_t i = 0; i < fixed_off; i += 8) memcpy(p + i, hdr + i, 8);
  p[0] = (uint8_t)kind;
  b->len = fixed_off + 8u * n;
  b->nulls = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
  if (SL_UNLIKELY(b->err != NULL)) {
    sl_error_destroy(b->err);
    b->err = NULL;
  }
}

void sl_row_builder_set_kind(sl_row_builder_t *b, sl_row_kind_t kind) {
  b->buf[0] = (uint8_t)kind;
}

int sl__row_builder_grow(sl_row_builder_t *b, uint32_t need) {
  if (b->cap - b->len >= need) return SL_OK;
  uint64_t want = (uint64_t)b->len + need;
  if (want > UINT32_MAX / 2) return SL_EOVERFLOW;
  uint32_t cap = b->cap;
  while (cap < want) cap *= 2;
  uint8_t *p = sl_realloc(b->buf, cap);
  if (p == NULL) return SL_ENOMEM;
  b->buf = p;
  b->cap = cap;
  return SL_OK;
}

int sl_row_builder_copy(sl_row_builder_t *b, const sl_row_t *row) {
  if (b->err) {
    sl_error_destroy(b->err);
    b->err = NULL;
  }
  b->len = 0;
  int rc = sl__row_builder_grow(b, row->len);
  if (rc != SL_OK) return rc;
  /* Small rows: 8-byte moves rather than a call to memcpy. */
  uint32_t n8 = row->len & ~7u;
  for (uint32_t i = 0; i < n8; i += 8) memcpy(b->buf + i, row->data + i, 8);
  for (uint32_t i = n8; i < row->len; i++) b->buf[i] = row->data[i];
  b->len = row->len;
  /* The null bits of the first 64 fields, gathered in a register: a
   * narrow copy into b->nulls followed by a wide read of it would stall
   * on store forwarding. */
  uint32_t nb = (b->n_fields + 7) >> 3;
  uint64_t nulls = 0;
  for (uint32_t k = 0; k < nb && k < 8; k++)
    nulls |= (uint64_t)row->data[4 + k] << (8 * k);
  if (b->n_fields < 64) nulls &= ((uint64_t)1 << b->n_fields) - 1;
  b->nulls = nulls;
  return SL_OK;
}

int sl_row_builder_set_str(sl_row_builder_t *b, uint32_t i, const void *p,
                           uint32_t len) {
  int rc = sl__row_builder_grow(b, len);
  if (rc != SL_OK) {
    if (b->err == NULL)
      b->err = sl_error_create(rc, "row too large for field %u", i + 1);
    return rc;
  }
  uint32_t ol[2] = {b->len, len};
  if (len) memcpy(b->buf + b->len, p, len);
  b->len += len;
  memcpy(b->buf + b->fixed_off + 8u * i, ol, 8);
  sl__row_builder_clear_null(b, i);
  return SL_OK;
}

static int set_value_error(sl_row_builder_t *b, uint32_t i, const char *want,
                           uint8_t got) {
  const sl_field_t *f = sl_schema_field(b->schema, i);
  if (b->err == NULL)
    b->err = sl_error_create(SL_ETYPE, "field '%s' is %s, got a %s value",
                             f->name, want, sl_type_name((sl_type_id_t)got));
  return SL_ETYPE;
}

int sl_row_builder_set_value(sl_row_builder_t *b, uint32_t i,
                             const sl_value_t *v) {
  const sl_field_t *f = sl_schema_field(b->schema, i);
  if (v->is_null) {
    sl_row_builder_set_null(b, i);
    return SL_OK;
  }
  sl_type_t t = f->type;
  switch (t.id) {
  case SL_TYPE_BOOL:
    if (v->type != SL_TYPE_BOOL) return set_value_error(b, i, "bool", v->type);
    sl_row_builder_set_bool(b, i, v->u.b);
    return SL_OK;
  case SL_TYPE_INT32:
    if (v->type != SL_TYPE_INT32 && v->type != SL_TYPE_INT64)
      return set_value_error(b, i, "int32", v->type);
    if (v->u.i < INT32_MIN || v->u.i > INT32_MAX) {
      if (b->err == NULL)
        b->err = sl_error_create(SL_EOVERFLOW,
                                 "field '%s' is int32; %lld is out of range",
                                 f->name, (long long)v->u.i);
      return SL_EOVERFLOW;
    }
    sl_row_builder_set_i64(b, i, v->u.i);
    return SL_OK;
  case SL_TYPE_INT64:
    if (v->type != SL_TYPE_INT32 && v->type != SL_TYPE_INT64)
      return set_value_error(b, i, "int64", v->type);
    sl_row_builder_set_i64(b, i, v->u.i);
    return SL_OK;
  case SL_TYPE_TIMESTAMP:
    if (v->type != SL_TYPE_TIMESTAMP)
      return set_value_error(b, i, "timestamp", v->type);
    sl_row_builder_set_i64(b, i, v->u.i);
    return SL_OK;
  case SL_TYPE_FLOAT64:
    if (v->type == SL_TYPE_FLOAT64)
      sl_row_builder_set_f64(b, i, v->u.f);
    else if (v->type == SL_TYPE_INT32 || v->type == SL_TYPE_INT64)
      sl_row_builder_set_f64(b, i, (double)v->u.i);
    else if (v->type == SL_TYPE_DECIMAL)
      sl_row_builder_set_f64(b, i, (double)v->u.i / pow(10, v->scale));
    else
      return set_value_error(b, i, "float64", v->type);
    return SL_OK;
  case SL_TYPE_DECIMAL: {
    int64_t unscaled;
    int from_scale;
    if (v->type == SL_TYPE_DECIMAL) {
      unscaled = v->u.i;
      from_scale = v->scale;
    } else if (v->type == SL_TYPE_INT32 || v->type == SL_TYPE_INT64) {
      unscaled = v->u.i;
      from_scale = 0;
    } else {
      return set_value_error(b, i, "decimal", v->type);
    }
    /* Rescale exactly; refuse to lose digits or overflow. */
    while (from_scale < t.scale) {
      if (__builtin_mul_overflow(unscaled, 10, &unscaled)) goto overflow;
      from_scale++;
    }
    while (from_scale > t.scale) {
      if (unscaled % 10 != 0) goto overflow;
      unscaled /= 10;
      from_scale--;
    }
    int64_t lim = 1;
    for (int k = 0; k < t.precision; k++) lim *= 10;
    if (unscaled >= lim || unscaled <= -lim) goto overflow;
    sl_row_builder_set_i64(b, i, unscaled);
    return SL_OK;
  overflow:
    if (b->err == NULL)
      b->err = sl_error_create(SL_EOVERFLOW,
                               "field '%s': value does not fit decimal(%u,%u)",
                               f->name, t.precision, t.scale);
    return SL_EOVERFLOW;
  }
  case SL_TYPE_STRING:
  case SL_TYPE_BYTES:
    if (v->type != SL_TYPE_STRING && v->type != SL_TYPE_BYTES)
      return set_value_error(b, i, sl_type_name((sl_type_id_t)t.id), v->type);
    return sl_row_builder_set_str(b, i, v->u.s.ptr, v->u.s.len);
  }
  return SL_EINVAL;
}

int sl__row_builder_finish_slow(sl_row_builder_t *b, sl_row_t *out,
                                sl_error_t **out_err) {
  if (SL_UNLIKELY(b->err != NULL)) {
    int code = sl_error_code(b->err);
    if (out_err && *out_err == NULL) {
      *out_err = b->err;
      b->err = NULL;
    }
    return code;
  }
  /* Write the null bits of fields 0..63 into the bitmap: one 4- or 8-byte
   * store, inside the header (H >= 8, and H >= 16 once the bitmap needs
   * more than 4 bytes). */
  uint32_t nbytes = (b->n_fields + 7) >> 3;
  if (nbytes <= 4) {
    uint32_t lo = (uint32_t)b->nulls;
    memcpy(b->buf + 4, &lo, 4);
  } else {
    memcpy(b->buf + 4, &b->nulls, 8);
  }
  /* Rows are deterministic bytes: the slots of null fields are zero. */
  if (SL_UNLIKELY(b->nulls != 0)) {
    uint64_t z = 0, nl = b->nulls;
    while (nl) {
      uint32_t i = (uint32_t)__builtin_ctzll(nl);
      memcpy(b->buf + b->fixed_off + 8u * i, &z, 8);
      nl &= nl - 1;
    }
  }
  /* Every non-nullable field must have its null bit cleared. */
  if (SL_LIKELY(b->n_fields <= 64)) {
    if (SL_LIKELY((b->nulls & b->nonnull_mask) == 0)) goto ok;
  }
  for (uint32_t w = 0; w * 8 < nbytes; w++) {
    uint64_t bits = 0;
    uint32_t take = nbytes - w * 8 < 8 ? nbytes - w * 8 : 8;
    memcpy(&bits, b->buf + 4 + w * 8, take);
    uint64_t bad = bits & sl__schema_nonnull_mask_word(b->schema, w);
    if (SL_UNLIKELY(bad != 0)) {
      uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bad);
      return sl_error_set(out_err, SL_ETYPE,
                          "field '%s' is not nullable but has no value",
                          sl_schema_field(b->schema, i)->name);
    }
  }
ok:
  out->schema = b->schema;
  out->data = b->buf;
  out->len = b->len;
  out->fixed_off = b->fixed_off;
  return SL_OK;
}

int sl_row_validate(const sl_schema_t *schema, const uint8_t *data,
                    uint32_t len) {
  uint32_t n = sl_schema_n_fields(schema);
  uint32_t h = sl_row_header_size(n);
  if (len < h + 8u * n) return SL_CORRUPT("row of %u bytes is too short", len);
  if (data[0] > 3) return SL_CORRUPT("row kind %u", data[0]);
  if (data[1] != SL_ROW_FORMAT_VERSION)
    return SL_CORRUPT("row format version %u", data[1]);
  uint16_t rn;
  memcpy(&rn, data + 2, 2);
  if (rn != n) return SL_CORRUPT("row has %u fields, schema %u", rn, n);
  for (uint32_t i = 0; i < n; i++) {
    const sl_field_t *f = sl_schema_field(schema, i);
    bool is_null = (data[4 + (i >> 3)] >> (i & 7u)) & 1u;
    if (is_null) {
      if (!f->type.nullable) return SL_CORRUPT("null in field %u", i);
      continue;
    }
    int64_t v;
    memcpy(&v, data + h + 8u * i, 8);
    switch (f->type.id) {
    case SL_TYPE_BOOL:
      if (v != 0 && v != 1) return SL_CORRUPT("bool value");
      break;
    case SL_TYPE_INT32:
      if (v < INT32_MIN || v > INT32_MAX) return SL_CORRUPT("int32 value");
      break;
    case SL_TYPE_STRING:
    case SL_TYPE_BYTES: {
      uint32_t ol[2];
      memcpy(ol, data + h + 8u * i, 8);
      if (ol[0] < h + 8u * n || ol[0] > len || ol[1] > len - ol[0])
        return SL_CORRUPT("field %u slot out of bounds", i);
      break;
    }
    default:
      break;
    }
  }
  return SL_OK;
}

void sl_row_get_value(const sl_row_t *r, uint32_t i, sl_value_t *out) {
  const sl_field_t *f = sl_schema_field(r->schema, i);
  out->type = f->type.id;
  out->scale = f->type.scale;
  out->is_null = sl_row_is_null(r, i);
  if (out->is_null) {
    out->u.i = 0;
    return;
  }
  switch (f->type.id) {
  case SL_TYPE_BOOL:
    out->u.b = sl_row_get_bool(r, i);
    break;
  case SL_TYPE_FLOAT64:
    out->u.f = sl_row_get_f64(r, i);
    break;
  case SL_TYPE_STRING:
  case SL_TYPE_BYTES:
    out->u.s = sl_row_get_str(r, i);
    break;
  default:
    out->u.i = sl_row_get_i64(r, i);
    break;
  }
}
