/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Schemas: immutable, reference-counted field lists with a version and a
 * fingerprint, and their storage encoding.  See README.md.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <xxhash.h>

#include "core.h"

struct sl_schema_s {
  _Atomic uint32_t refs;
  uint32_t n_fields;
  uint32_t version;
  uint64_t fingerprint;
  sl_field_t *fields;     /* names owned */
  uint64_t *nonnull_mask; /* bit i set: field i is not nullable */
};

static const char *type_names[] = {NULL,     "bool",   "int32",
                                   "int64",  "float64", "decimal",
                                   "string", "bytes",   "timestamp"};

const char *sl_type_name(sl_type_id_t id) {
  if (id < SL_TYPE_BOOL || id > SL_TYPE_TIMESTAMP) return "unknown";
  return type_names[id];
}

char *sl_type_format(sl_type_t t, char *buf, size_t size) {
  if (t.id == SL_TYPE_DECIMAL)
    snprintf(buf, size, "decimal(%u,%u)", t.precision, t.scale);
  else
    snprintf(buf, size, "%s", sl_type_name((sl_type_id_t)t.id));
  return buf;
}

int sl_type_parse(const char *s, sl_type_t *out) {
  static const struct {
    const char *name;
    sl_type_id_t id;
  } names[] = {{"bool", SL_TYPE_BOOL},         {"boolean", SL_TYPE_BOOL},
               {"int32", SL_TYPE_INT32},       {"int", SL_TYPE_INT32},
               {"int64", SL_TYPE_INT64},       {"bigint", SL_TYPE_INT64},
               {"float64", SL_TYPE_FLOAT64},   {"double", SL_TYPE_FLOAT64},
               {"string", SL_TYPE_STRING},     {"bytes", SL_TYPE_BYTES},
               {"timestamp", SL_TYPE_TIMESTAMP}};
  sl_type_t t = {0, 0, 0, false};
  for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
    if (strcmp(s, names[i].name) == 0) {
      t.id = (uint8_t)names[i].id;
      *out = t;
      return SL_OK;
    }
  }
  unsigned p = 0, sc = 0;
  char tail = 0;
  if (sscanf(s, "decimal(%u,%u%c", &p, &sc, &tail) == 3 && tail == ')' &&
      strchr(s, ')')[1] == '\0') {
    if (p < 1 || p > SL_DECIMAL_MAX_PRECISION || sc > p) return SL_EINVAL;
    t.id = SL_TYPE_DECIMAL;
    t.precision = (uint8_t)p;
    t.scale = (uint8_t)sc;
    *out = t;
    return SL_OK;
  }
  return SL_EPARSE;
}

static void schema_free(sl_schema_t *s) {
  if (s->fields)
    for (uint32_t i = 0; i < s->n_fields; i++)
      sl_free((char *)s->fields[i].name);
  sl_free(s->fields);
  sl_free(s->nonnull_mask);
  sl_free(s);
}

static uint64_t schema_compute_fingerprint(const sl_schema_t *s) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  uint64_t fp = 0;
  if (sl_schema_encode(s, &b) == SL_OK) fp = XXH3_64bits(b.data, b.len);
  sl_bytes_close(&b);
  return fp;
}

int sl_schema_create_versioned(const sl_field_t *fields, uint32_t n,
                               uint32_t version, sl_schema_t **out,
                               sl_error_t **out_err) {
  if (n > SL_SCHEMA_MAX_FIELDS)
    return sl_error_set(out_err, SL_EINVAL,
                        "schema has %u fields; the limit is %u", n,
                        SL_SCHEMA_MAX_FIELDS);
  for (uint32_t i = 0; i < n; i++) {
    if (fields[i].name == NULL || fields[i].name[0] == '\0')
      return sl_error_set(out_err, SL_EINVAL, "field %u has an empty name",
                          i + 1);
    sl_type_t t = fields[i].type;
    if (t.id < SL_TYPE_BOOL || t.id > SL_TYPE_TIMESTAMP)
      return sl_error_set(out_err, SL_EINVAL, "field '%s' has no valid type",
                          fields[i].name);
    if (t.id == SL_TYPE_DECIMAL &&
        (t.precision < 1 || t.precision > SL_DECIMAL_MAX_PRECISION ||
         t.scale > t.precision))
      return sl_error_set(out_err, SL_EINVAL,
                          "field '%s': decimal(%u,%u) is not supported; "
                          "precision must be 1..%u and scale <= precision",
                          fields[i].name, t.precision, t.scale,
                          SL_DECIMAL_MAX_PRECISION);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(fields[i].name, fields[j].name) == 0)
        return sl_error_set(out_err, SL_EINVAL,
                            "field name '%s' appears twice", fields[i].name);
  }
  sl_schema_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) goto nomem;
  atomic_init(&s->refs, 1);
  s->n_fields = n;
  s->version = version;
  s->fields = sl_calloc(n ? n : 1, sizeof(sl_field_t));
  s->nonnull_mask = sl_calloc((n + 63) / 64 + 1, sizeof(uint64_t));
  if (s->fields == NULL || s->nonnull_mask == NULL) goto nomem;
  for (uint32_t i = 0; i < n; i++) {
    s->fields[i].type = fields[i].type;
    s->fields[i].name = sl_strdup(fields[i].name);
    if (s->fields[i].name == NULL) goto nomem;
    if (!fields[i].type.nullable)
      s->nonnull_mask[i / 64] |= (uint64_t)1 << (i % 64);
  }
  s->fingerprint = schema_compute_fingerprint(s);
  *out = s;
  return SL_OK;
nomem:
  if (s) schema_free(s);
  return sl_error_set(out_err, SL_ENOMEM, "out of memory creating a schema");
}

int sl_schema_create(const sl_field_t *fields, uint32_t n, sl_schema_t **out,
                     sl_error_t **out_err) {
  return sl_schema_create_versioned(fields, n, 1, out, out_err);
}

sl_schema_t *sl_schema_ref(sl_schema_t *s) {
  if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return s;
}

void sl_schema_unref(sl_schema_t *s) {
  if (s == NULL) return;
  /* acq_rel: the last owner must see every write made through other refs. */
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
    schema_free(s);
}

uint32_t sl_schema_n_fields(const sl_schema_t *s) { return s->n_fields; }
const sl_field_t *sl_schema_field(const sl_schema_t *s, uint32_t i) {
  return i < s->n_fields ? &s->fields[i] : NULL;
}
int sl_schema_index(const sl_schema_t *s, const char *name) {
  for (uint32_t i = 0; i < s->n_fields; i++)
    if (strcmp(s->fields[i].name, name) == 0) return (int)i;
  return -1;
}
uint32_t sl_schema_version(const sl_schema_t *s) { return s->version; }
uint64_t sl_schema_fingerprint(const sl_schema_t *s) { return s->fingerprint; }

bool sl_schema_equal(const sl_schema_t *a, const sl_schema_t *b) {
  if (a == b) return true;
  if (a->n_fields != b->n_fields) return false;
  for (uint32_t i = 0; i < a->n_fields; i++) {
    const sl_field_t *x = &a->fields[i], *y = &b->fields[i];
    if (strcmp(x->name, y->name) != 0 || x->type.id != y->type.id ||
        x->type.nullable != y->type.nullable ||
        x->type.precision != y->type.precision ||
        x->type.scale != y->type.scale)
      return false;
  }
  return true;
}

uint64_t sl__schema_nonnull_mask_word(const sl_schema_t *s, uint32_t word) {
  return s->nonnull_mask[word];
}

/*
 * Encoding: "SLSC", u8 encoding version (1), varint schema version, varint
 * n, then per field: varint name length, name, u8 type id, u8 nullable,
 * u8 precision, u8 scale.
 */
int sl_schema_encode(const sl_schema_t *s, sl_bytes_t *out) {
  int rc = sl_bytes_append(out, "SLSC\x01", 5);
  if (rc == SL_OK) rc = sl__bytes_put_varint(out, s->version);
  if (rc == SL_OK) rc = sl__bytes_put_varint(out, s->n_fields);
  for (uint32_t i = 0; rc == SL_OK && i < s->n_fields; i++) {
    const sl_field_t *f = &s->fields[i];
    size_t nl = strlen(f->name);
    uint8_t t[4] = {f->type.id, f->type.nullable, f->type.precision,
                    f->type.scale};
    rc = sl__bytes_put_varint(out, nl);
    if (rc == SL_OK) rc = sl_bytes_append(out, f->name, nl);
    if (rc == SL_OK) rc = sl_bytes_append(out, t, 4);
  }
  return rc;
}

int sl_schema_decode(const uint8_t *p, size_t len, size_t *out_consumed,
                     sl_schema_t **out, sl_error_t **out_err) {
  size_t off = 0, k;
  uint64_t version, n;
  if (len < 5 || memcmp(p, "SLSC", 4) != 0)
    return sl_error_set(out_err, SL_CORRUPT("bad schema magic"),
                        "schema encoding: bad magic");
  if (p[4] != 1)
    return sl_error_set(out_err, SL_CORRUPT("schema encoding version"),
                        "schema encoding version %u is not supported", p[4]);
  off = 5;
  if ((k = sl__get_varint(p + off, len - off, &version)) == 0 ||
      version > UINT32_MAX)
    goto corrupt;
  off += k;
  if ((k = sl__get_varint(p + off, len - off, &n)) == 0 ||
      n > SL_SCHEMA_MAX_FIELDS)
    goto corrupt;
  off += k;
  sl_field_t *fields = sl_calloc(n ? n : 1, sizeof(sl_field_t));
  if (fields == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  int rc = SL_OK;
  uint32_t done = 0;
  for (; done < n; done++) {
    uint64_t nl;
    if ((k = sl__get_varint(p + off, len - off, &nl)) == 0 ||
        nl > len - off - k || len - off - k - nl < 4) {
      rc = SL_CORRUPT("schema field %u truncated", done);
      break;
    }
    off += k;
    char *name = sl_strndup((const char *)p + off, nl);
    if (name == NULL) {
      rc = SL_ENOMEM;
      break;
    }
    off += nl;
    fields[done].name = name;
    fields[done].type.id = p[off];
    fields[done].type.nullable = p[off + 1] != 0;
    fields[done].type.precision = p[off + 2];
    fields[done].type.scale = p[off + 3];
    off += 4;
  }
  sl_error_t *cerr = NULL;
  if (rc == SL_OK)
    rc = sl_schema_create_versioned(fields, (uint32_t)n, (uint32_t)version, out,
                                    &cerr);
  for (uint32_t i = 0; i < done; i++) sl_free((char *)fields[i].name);
  sl_free(fields);
  if (rc == SL_ECORRUPT || rc == SL_ENOMEM) /* cerr: found by torture */
    sl_error_destroy(cerr);
  if (rc == SL_ECORRUPT)
    return sl_error_set(out_err, rc, "schema encoding is truncated");
  if (rc == SL_ENOMEM)
    return sl_error_set(out_err, rc, "out of memory decoding a schema");
  if (rc == SL_EINVAL) {
    /* Well-formed bytes that describe no valid schema are corruption too. */
    sl_error_set(out_err, SL_ECORRUPT, "schema encoding is invalid: %s",
                 sl_error_message(cerr));
    sl_error_destroy(cerr);
    return SL_ECORRUPT;
  }
  if (cerr) {
    if (out_err && *out_err == NULL) *out_err = cerr;
    else sl_error_destroy(cerr);
  }
  if (rc == SL_OK && out_consumed) *out_consumed = off;
  return rc;
corrupt:
  return sl_error_set(out_err, SL_CORRUPT("schema header"),
                      "schema encoding is truncated");
}
