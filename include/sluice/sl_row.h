/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Typed rows: schemas, the binary row format, the row builder, the compact
 * codec and canonical key bytes (their key groups: sl_keygroup.h).  Records
 * travel between operators as binary rows; operators read fields in place
 * with the inline getters below.
 * The format is documented in docs/row-format.md.  See src/core/README.md.
 */
#ifndef SLUICE_SL_ROW_H
#define SLUICE_SL_ROW_H

#include <string.h>

#include "sl_common.h"
#include "sl_keygroup.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_type_id_e {
  SL_TYPE_BOOL = 1,
  SL_TYPE_INT32 = 2,
  SL_TYPE_INT64 = 3,
  SL_TYPE_FLOAT64 = 4,
  SL_TYPE_DECIMAL = 5,   /* int64 unscaled value, precision <= 18 */
  SL_TYPE_STRING = 6,    /* UTF-8 bytes */
  SL_TYPE_BYTES = 7,
  SL_TYPE_TIMESTAMP = 8  /* microseconds since 1970-01-01T00:00:00Z */
} sl_type_id_t;

#define SL_DECIMAL_MAX_PRECISION 18

typedef struct sl_type_s {
  uint8_t id;        /* sl_type_id_t */
  uint8_t precision; /* decimal only */
  uint8_t scale;     /* decimal only */
  bool nullable;
} sl_type_t;

/* Row kinds of a changelog. */
typedef enum sl_row_kind_e {
  SL_ROW_INSERT = 0,        /* +I */
  SL_ROW_UPDATE_BEFORE = 1, /* -U */
  SL_ROW_UPDATE_AFTER = 2,  /* +U */
  SL_ROW_DELETE = 3         /* -D */
} sl_row_kind_t;

/** @brief "+I", "-U", "+U" or "-D". */
SL_API const char *sl_row_kind_name(sl_row_kind_t kind);
/** @brief Parse "+I" ... "-D"; returns SL_EPARSE on anything else. */
SL_API int sl_row_kind_parse(const char *s, sl_row_kind_t *out_kind);

/** @brief Name of a type id ("int64"). */
SL_API const char *sl_type_name(sl_type_id_t id);
/**
 * @brief Parse a type name: bool, int32, int64, float64, string, bytes,
 * timestamp, decimal(p,s).  A trailing '?' or the word "null" is not part of
 * the syntax; nullability is set by the caller.
 */
SL_API int sl_type_parse(const char *s, sl_type_t *out_type);
/** @brief Write "decimal(10,2)" etc. into buf; returns buf. */
SL_API char *sl_type_format(sl_type_t t, char *buf, size_t size);

typedef struct sl_field_s {
  const char *name;
  sl_type_t type;
} sl_field_t;

/*
 * Schema: an ordered list of named, typed fields plus a version.  Immutable
 * and reference counted; share it freely between threads.
 */
typedef struct sl_schema_s sl_schema_t;

#define SL_SCHEMA_MAX_FIELDS 1024

/**
 * @brief Create a schema (version 1).  Field names must be unique and
 * non-empty.
 * @return SL_OK, SL_EINVAL (duplicate/empty name, bad decimal), SL_ENOMEM.
 * @ownership the caller owns *out_schema (one reference).
 */
SL_API int sl_schema_create(const sl_field_t *fields, uint32_t n_fields,
                            sl_schema_t **out_schema, sl_error_t **out_err);
SL_API int sl_schema_create_versioned(const sl_field_t *fields,
                                      uint32_t n_fields, uint32_t version,
                                      sl_schema_t **out_schema,
                                      sl_error_t **out_err);
SL_API sl_schema_t *sl_schema_ref(sl_schema_t *schema);
SL_API void sl_schema_unref(sl_schema_t *schema);
SL_API uint32_t sl_schema_n_fields(const sl_schema_t *schema);
SL_API const sl_field_t *sl_schema_field(const sl_schema_t *schema, uint32_t i);
/** @brief Index of the field called name, or -1. */
SL_API int sl_schema_index(const sl_schema_t *schema, const char *name);
SL_API uint32_t sl_schema_version(const sl_schema_t *schema);
/** @brief 64-bit fingerprint over names, types and version. */
SL_API uint64_t sl_schema_fingerprint(const sl_schema_t *schema);
SL_API bool sl_schema_equal(const sl_schema_t *a, const sl_schema_t *b);

/* A growable byte buffer, used for keys, encodings and text. */
typedef struct sl_bytes_s {
  uint8_t *data;
  size_t len;
  size_t cap;
} sl_bytes_t;

SL_API void sl_bytes_init(sl_bytes_t *b);
SL_API void sl_bytes_close(sl_bytes_t *b);
/** @brief Make room for n more bytes.  @return SL_OK or SL_ENOMEM. */
SL_API int sl_bytes_reserve(sl_bytes_t *b, size_t n);
SL_API int sl_bytes_append(sl_bytes_t *b, const void *p, size_t n);
SL_API int sl_bytes_append_str(sl_bytes_t *b, const char *s);
SL_API int sl_bytes_printf(sl_bytes_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void sl_bytes_clear(sl_bytes_t *b) { b->len = 0; }
/** @brief Append v as 8 bytes, little-endian.  @return SL_OK or SL_ENOMEM. */
SL_API int sl_bytes_append_u64le(sl_bytes_t *b, uint64_t v);
/** @brief Read 8 little-endian bytes (e.g. of a stored position). */
static inline uint64_t sl_load_u64le(const void *p) {
  const uint8_t *q = (const uint8_t *)p;
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | q[i];
  return v;
}
/**
 * @brief 64-bit hash (xxh3-64) of bytes.  Stable across runs, versions and
 * machines, so it may be stored (a source's fingerprint of its input).
 * @thread any
 */
SL_API uint64_t sl_hash64(const void *p, size_t len);

/**
 * @brief Encode a schema (names, types, version) for storage.
 * @return SL_OK or SL_ENOMEM.
 */
SL_API int sl_schema_encode(const sl_schema_t *schema, sl_bytes_t *out);
/**
 * @brief Decode a schema written by sl_schema_encode.  Every length is
 * validated; truncated or malformed input gives SL_ECORRUPT.
 */
SL_API int sl_schema_decode(const uint8_t *p, size_t len, size_t *out_consumed,
                            sl_schema_t **out_schema, sl_error_t **out_err);

/*
 * Binary row format (version 1), see docs/row-format.md:
 *
 *   byte 0        row kind (sl_row_kind_t)
 *   byte 1        format version (1)
 *   bytes 2..3    number of fields n (little-endian u16)
 *   bytes 4..     null bitmap, ceil(n/8) bytes, bit i set = field i null
 *   H = align8(4 + ceil(n/8))
 *   H + 8*i       slot of field i: bool/int32/int64/timestamp/decimal as a
 *                 little-endian int64, float64 as its IEEE bits, string and
 *                 bytes as (u32 offset from row start, u32 length)
 *   H + 8*n ...   variable-length data
 *
 * A row view borrows its bytes; it is valid as long as those bytes are.
 */
typedef struct sl_row_s {
  const sl_schema_t *schema;
  const uint8_t *data;
  uint32_t len;
  uint32_t fixed_off; /* H */
} sl_row_t;

typedef struct sl_slice_s {
  const uint8_t *ptr;
  uint32_t len;
} sl_slice_t;

#define SL_ROW_FORMAT_VERSION 1

static inline uint32_t sl_row_header_size(uint32_t n_fields) {
  return (4u + ((n_fields + 7u) >> 3) + 7u) & ~7u;
}

/** @brief Make a view over bytes that hold a row of schema.  No checks. */
static inline void sl_row_view(sl_row_t *r, const sl_schema_t *schema,
                               const uint8_t *data, uint32_t len) {
  uint16_t n;
  memcpy(&n, data + 2, 2);
  r->schema = schema;
  r->data = data;
  r->len = len;
  r->fixed_off = sl_row_header_size(n);
}

/**
 * @brief Check that bytes are a well-formed row of schema: size, field count,
 * version, every variable-length slot inside the row, no null in a
 * non-nullable field, bool values 0/1, int32 values in range.
 * @return SL_OK or SL_ECORRUPT.
 */
SL_API int sl_row_validate(const sl_schema_t *schema, const uint8_t *data,
                           uint32_t len);

static inline sl_row_kind_t sl_row_kind(const sl_row_t *r) {
  return (sl_row_kind_t)(r->data[0] & 3u);
}
static inline bool sl_row_is_null(const sl_row_t *r, uint32_t i) {
  return (r->data[4 + (i >> 3)] >> (i & 7u)) & 1u;
}
static inline int64_t sl_row_get_i64(const sl_row_t *r, uint32_t i) {
  int64_t v;
  memcpy(&v, r->data + r->fixed_off + 8u * i, 8);
  return v;
}
static inline int32_t sl_row_get_i32(const sl_row_t *r, uint32_t i) {
  return (int32_t)sl_row_get_i64(r, i);
}
static inline bool sl_row_get_bool(const sl_row_t *r, uint32_t i) {
  return sl_row_get_i64(r, i) != 0;
}
static inline double sl_row_get_f64(const sl_row_t *r, uint32_t i) {
  double v;
  memcpy(&v, r->data + r->fixed_off + 8u * i, 8);
  return v;
}
static inline sl_slice_t sl_row_get_str(const sl_row_t *r, uint32_t i) {
  uint32_t ol[2];
  sl_slice_t s;
  memcpy(ol, r->data + r->fixed_off + 8u * i, 8);
  s.ptr = r->data + ol[0];
  s.len = ol[1];
  return s;
}

/*
 * A generic value, for code that handles any type (expressions, text
 * formats).  String and bytes values borrow their bytes.
 */
typedef struct sl_value_s {
  uint8_t type; /* sl_type_id_t */
  bool is_null;
  uint8_t scale; /* decimal */
  union {
    bool b;
    int64_t i; /* int32, int64, timestamp, decimal unscaled */
    double f;
    sl_slice_t s;
  } u;
} sl_value_t;

/** @brief Read field i as a generic value. */
SL_API void sl_row_get_value(const sl_row_t *r, uint32_t i, sl_value_t *out);

/*
 * Row builder.  Owns a growable buffer; reset() starts a new row with every
 * field null, the setters fill fields, finish() checks that every
 * non-nullable field was set and yields a view valid until the next reset.
 * The fields of the struct are private.
 * @thread one thread at a time.
 */
typedef struct sl_row_builder_s {
  const sl_schema_t *schema;
  uint8_t *buf;
  uint32_t cap;
  uint32_t len;
  uint32_t fixed_off;
  uint32_t n_fields;
  sl_error_t *err; /* first error of the current row, if any */
  uint64_t nonnull_mask; /* n_fields <= 64: bit i = field i not nullable */
  uint8_t *hdr;          /* header of a new row: every field null */
  /* Null bits of fields 0..63, kept here and written to the row by
   * finish(); fields from 64 on use the bitmap bytes directly. */
  uint64_t nulls;
} sl_row_builder_t;

/** @brief Initialise a builder.  The schema is borrowed and must outlive it. */
SL_API int sl_row_builder_init(sl_row_builder_t *b, const sl_schema_t *schema);
SL_API void sl_row_builder_close(sl_row_builder_t *b);
SL_API void sl__row_builder_reset_slow(sl_row_builder_t *b, sl_row_kind_t kind);
/** @brief Start a new row of the given kind with every field null. */
static inline void sl_row_builder_reset(sl_row_builder_t *b,
                                        sl_row_kind_t kind) {
  /* Up to 32 fields the header is 8 bytes: one move from the template. */
  if (__builtin_expect(b->fixed_off == 8 && b->err == NULL, 1)) {
    memcpy(b->buf, b->hdr, 8);
    b->buf[0] = (uint8_t)kind;
    b->len = 8u + 8u * b->n_fields;
    b->nulls = b->n_fields >= 64 ? ~(uint64_t)0
                                 : (((uint64_t)1 << b->n_fields) - 1);
    return;
  }
  sl__row_builder_reset_slow(b, kind);
}
/** @brief Start a new row as a copy of row (same schema layout). */
SL_API int sl_row_builder_copy(sl_row_builder_t *b, const sl_row_t *row);
SL_API void sl_row_builder_set_kind(sl_row_builder_t *b, sl_row_kind_t kind);
SL_API int sl__row_builder_grow(sl_row_builder_t *b, uint32_t need);

static inline void sl_row_builder_set_null(sl_row_builder_t *b, uint32_t i) {
  if (i < 64) b->nulls |= (uint64_t)1 << i;
  else b->buf[4 + (i >> 3)] |= (uint8_t)(1u << (i & 7u));
}
static inline void sl__row_builder_clear_null(sl_row_builder_t *b,
                                              uint32_t i) {
  if (i < 64) b->nulls &= ~((uint64_t)1 << i);
  else b->buf[4 + (i >> 3)] &= (uint8_t)~(1u << (i & 7u));
}
static inline void sl_row_builder_set_i64(sl_row_builder_t *b, uint32_t i,
                                          int64_t v) {
  memcpy(b->buf + b->fixed_off + 8u * i, &v, 8);
  sl__row_builder_clear_null(b, i);
}
static inline void sl_row_builder_set_i32(sl_row_builder_t *b, uint32_t i,
                                          int32_t v) {
  sl_row_builder_set_i64(b, i, (int64_t)v);
}
static inline void sl_row_builder_set_bool(sl_row_builder_t *b, uint32_t i,
                                           bool v) {
  sl_row_builder_set_i64(b, i, v ? 1 : 0);
}
static inline void sl_row_builder_set_f64(sl_row_builder_t *b, uint32_t i,
                                          double v) {
  memcpy(b->buf + b->fixed_off + 8u * i, &v, 8);
  sl__row_builder_clear_null(b, i);
}
/** @brief Set a string or bytes field (copies the bytes). */
SL_API int sl_row_builder_set_str(sl_row_builder_t *b, uint32_t i,
                                  const void *p, uint32_t len);
/** @brief Set field i from a generic value; converts int to wider types. */
SL_API int sl_row_builder_set_value(sl_row_builder_t *b, uint32_t i,
                                    const sl_value_t *v);
/**
 * @brief Finish the row.
 * @return SL_OK, or SL_ETYPE when a non-nullable field is still null (the
 * message names the field) or a setter failed.
 */
SL_API int sl__row_builder_finish_slow(sl_row_builder_t *b, sl_row_t *out_row,
                                       sl_error_t **out_err);
static inline int sl_row_builder_finish(sl_row_builder_t *b, sl_row_t *out_row,
                                        sl_error_t **out_err) {
  /* The common row: up to 32 fields, none null, no setter error. */
  if (__builtin_expect(b->nulls == 0 && b->n_fields <= 32 && b->err == NULL,
                       1)) {
    uint32_t zero = 0;
    memcpy(b->buf + 4, &zero, 4);
    out_row->schema = b->schema;
    out_row->data = b->buf;
    out_row->len = b->len;
    /* Up to 32 fields the fixed part starts at 8.  A constant, not a load:
     * the compiler would read len and fixed_off as one 8-byte word, which
     * stalls on the 4-byte store of len just before. */
    out_row->fixed_off = 8;
    return SL_OK;
  }
  return sl__row_builder_finish_slow(b, out_row, out_err);
}

/*
 * Compact codec, for storage: a null bitmap, then each non-null field as a
 * zig-zag varint (integers, bool, timestamp, decimal), 8 bytes (float64) or a
 * varint length and bytes (string, bytes).  The row kind comes first.  The
 * schema's fingerprint travels in whatever container holds the rows.
 */
SL_API int sl_row_encode_compact(const sl_row_t *row, sl_bytes_t *out);
/**
 * @brief Decode one compact row into b (reset first).  Validates every
 * length; returns SL_ECORRUPT on malformed input.
 */
SL_API int sl_row_decode_compact(sl_row_builder_t *b, const uint8_t *p,
                                 size_t len, size_t *out_consumed);

/*
 * Canonical key bytes: equal keys have equal bytes, on every platform and in
 * every version.  Per field: a null marker byte (0 null, 1 present), then
 * big-endian fixed-width integers (int32 4 bytes, others 8), float64 with
 * -0.0 mapped to 0.0 and every NaN to one NaN, bool as one byte, string and
 * bytes as a big-endian u32 length and the bytes.
 */
SL_API int sl_key_add_field(sl_bytes_t *key, const sl_row_t *row,
                            uint32_t field);
SL_API int sl_key_add_i64(sl_bytes_t *key, int64_t v);
SL_API int sl_key_add_f64(sl_bytes_t *key, double v);
SL_API int sl_key_add_str(sl_bytes_t *key, const void *p, uint32_t len);
SL_API int sl_key_add_null(sl_bytes_t *key);

#ifdef __cplusplus
}
#endif
#endif
