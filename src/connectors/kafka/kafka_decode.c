/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kafka record -> row: the value through the row codecs (JSON, CSV) or
 * whole (string, bytes), then the metadata fields (timestamp, headers as
 * a JSON object, key, partition, offset).  Without metadata fields the
 * value is parsed straight into the source's builder; with them it is
 * parsed into a builder of the value schema and copied.
 */
#include <string.h>

#include "connectors/kafka/kafka_decode.h"

/* Strict UTF-8 (no overlongs, surrogates or code points > U+10FFFF). */
static bool utf8_ok(const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) k = 1, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 2, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) k = 3, cp = c & 0x07;
    else return false;
    if (n - i <= k) return false;
    for (size_t j = 1; j <= k; j++) {
      if ((p[i + j] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + j] & 0x3f);
    }
    if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += k + 1;
  }
  return true;
}

int sl__kafka_decoder_init(sl_kafka_decoder_t *d, sl_kafka_format_t format,
                           char delim, const sl_schema_t *value_schema,
                           const sl_schema_t *schema, sl_error_t **out_err) {
  memset(d, 0, sizeof(*d));
  d->format = format;
  d->delim = delim ? delim : ',';
  d->value_schema = value_schema;
  d->schema = schema;
  d->has_meta = sl_schema_n_fields(schema) != sl_schema_n_fields(value_schema);
  d->f_timestamp = d->f_headers = d->f_key = d->f_partition = d->f_offset = -1;
  if (format == SL_KAFKA_FORMAT_STRING || format == SL_KAFKA_FORMAT_BYTES) {
    sl_type_id_t want =
        format == SL_KAFKA_FORMAT_STRING ? SL_TYPE_STRING : SL_TYPE_BYTES;
    if (sl_schema_n_fields(value_schema) != 1 ||
        sl_schema_field(value_schema, 0)->type.id != want)
      return sl_error_set(out_err, SL_EINVAL,
                          "kafka source: format %s needs a schema of one %s "
                          "field",
                          format == SL_KAFKA_FORMAT_STRING ? "string"
                                                           : "bytes",
                          sl_type_name(want));
  }
  if (d->has_meta) {
    int rc = sl_row_builder_init(&d->vb, value_schema);
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  }
  return SL_OK;
}

void sl__kafka_decoder_close(sl_kafka_decoder_t *d) {
  if (d->has_meta) sl_row_builder_close(&d->vb);
}

static int set_value(sl_kafka_decoder_t *d, const sl_kafka_rec_t *r,
                     sl_row_builder_t *b, sl_error_t **out_err) {
  const char *v = r->value ? r->value : "";
  size_t n = r->value ? r->value_len : 0;
  switch (d->format) {
  case SL_KAFKA_FORMAT_JSON:
    if (r->value == NULL)
      return sl_error_set(out_err, SL_EPARSE, "the record has no value "
                          "(a tombstone); expected a JSON object");
    return sl_json_parse(v, n, false, b, out_err);
  case SL_KAFKA_FORMAT_CSV:
    if (r->value == NULL)
      return sl_error_set(out_err, SL_EPARSE, "the record has no value "
                          "(a tombstone); expected a CSV record");
    /* One record per Kafka record: a trailing line end is not data. */
    if (n && v[n - 1] == '\n') n--;
    if (n && v[n - 1] == '\r') n--;
    return sl_csv_parse(v, n, d->delim, false, b, out_err);
  case SL_KAFKA_FORMAT_STRING:
  case SL_KAFKA_FORMAT_BYTES:
    sl_row_builder_reset(b, SL_ROW_INSERT);
    if (r->value == NULL) return SL_OK; /* null */
    if (n > UINT32_MAX)
      return sl_error_set(out_err, SL_EPARSE, "the value is too long");
    if (d->format == SL_KAFKA_FORMAT_STRING &&
        !utf8_ok((const uint8_t *)v, n))
      return sl_error_set(out_err, SL_EPARSE,
                          "the value is not valid UTF-8");
    return sl_row_builder_set_str(b, 0, v, (uint32_t)n);
  }
  return sl_error_set(out_err, SL_EINVAL, "unknown format");
}

/* Append s[0..n) as a JSON string. */
static int json_str(sl_bytes_t *o, const char *s, size_t n) {
  int rc = sl_bytes_append(o, "\"", 1);
  for (size_t i = 0; rc == SL_OK && i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      rc = sl_bytes_append(o, e, 2);
    } else if (c < 0x20) {
      rc = sl_bytes_printf(o, "\\u%04x", c);
    } else {
      rc = sl_bytes_append(o, &s[i], 1);
    }
  }
  return rc == SL_OK ? sl_bytes_append(o, "\"", 1) : rc;
}

static int set_headers(const sl_kafka_rec_t *r, sl_row_builder_t *b,
                       uint32_t f, sl_error_t **out_err) {
  sl_bytes_t o;
  sl_bytes_init(&o);
  int rc = sl_bytes_append(&o, "{", 1);
  for (size_t i = 0; rc == SL_OK && i < r->n_headers; i++) {
    const sl_kafka_hdr_t *h = &r->headers[i];
    size_t nl = strlen(h->name);
    if (!utf8_ok((const uint8_t *)h->name, nl) ||
        (h->value && !utf8_ok(h->value, h->len))) {
      sl_bytes_close(&o);
      return sl_error_set(out_err, SL_EPARSE,
                          "header %zu ('%.64s') is not valid UTF-8", i,
                          h->name);
    }
    if (i) rc = sl_bytes_append(&o, ",", 1);
    if (rc == SL_OK) rc = json_str(&o, h->name, nl);
    if (rc == SL_OK) rc = sl_bytes_append(&o, ":", 1);
    if (rc == SL_OK)
      rc = h->value ? json_str(&o, h->value, h->len)
                    : sl_bytes_append(&o, "null", 4);
  }
  if (rc == SL_OK) rc = sl_bytes_append(&o, "}", 1);
  if (rc == SL_OK && o.len > UINT32_MAX) rc = SL_EOVERFLOW;
  if (rc == SL_OK) rc = sl_row_builder_set_str(b, f, o.data, (uint32_t)o.len);
  sl_bytes_close(&o);
  return rc == SL_OK ? SL_OK : sl_error_set(out_err, rc, "headers: %s",
                                            sl_strerror(rc));
}

int sl__kafka_decode(sl_kafka_decoder_t *d, const sl_kafka_rec_t *r,
                     sl_row_builder_t *b, sl_error_t **out_err) {
  if (!d->has_meta) return set_value(d, r, b, out_err);
  int rc = set_value(d, r, &d->vb, out_err);
  if (rc != SL_OK) return rc;
  sl_row_t vr;
  if ((rc = sl_row_builder_finish(&d->vb, &vr, out_err)) != SL_OK) return rc;
  sl_row_builder_reset(b, SL_ROW_INSERT);
  uint32_t nv = sl_schema_n_fields(d->value_schema);
  for (uint32_t i = 0; i < nv; i++) {
    sl_value_t v;
    sl_row_get_value(&vr, i, &v);
    if (v.is_null) continue;
    if ((rc = sl_row_builder_set_value(b, i, &v)) != SL_OK)
      return sl_error_set(out_err, rc, "field %u: %s", i, sl_strerror(rc));
  }
  if (d->f_timestamp >= 0 && r->timestamp_ms >= 0)
    sl_row_builder_set_i64(b, (uint32_t)d->f_timestamp,
                           r->timestamp_ms * 1000);
  if (d->f_partition >= 0)
    sl_row_builder_set_i32(b, (uint32_t)d->f_partition, r->partition);
  if (d->f_offset >= 0)
    sl_row_builder_set_i64(b, (uint32_t)d->f_offset, r->offset);
  if (d->f_key >= 0 && r->key) {
    if (!utf8_ok(r->key, r->key_len))
      return sl_error_set(out_err, SL_EPARSE, "the key is not valid UTF-8");
    if (r->key_len > UINT32_MAX ||
        (rc = sl_row_builder_set_str(b, (uint32_t)d->f_key, r->key,
                                     (uint32_t)r->key_len)) != SL_OK)
      return sl_error_set(out_err, SL_EOVERFLOW, "the key is too long");
  }
  if (d->f_headers >= 0)
    return set_headers(r, b, (uint32_t)d->f_headers, out_err);
  return SL_OK;
}
