/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice's own decoder of PostgreSQL's logical replication stream: the
 * CopyData framing of the streaming replication protocol (XLogData 'w',
 * primary keepalive 'k', and the standby status update 'r' we send), the
 * pgoutput messages of protocol version 1 (Begin, Commit, Origin, Relation,
 * Type, Insert, Update, Delete, Truncate, Message), and the conversion of
 * text-format column values to sluice values.  Internal: used by the
 * PostgreSQL CDC source and by the fuzz target sl-fuzz-pgoutput.  Every
 * length is checked before it is trusted; a malformed or truncated input
 * is an SL_ECORRUPT error naming the message, the byte offset and the
 * field.  See src/connectors/README.md and docs/connectors.md.
 */
#ifndef SL_PGOUTPUT_DECODE_H
#define SL_PGOUTPUT_DECODE_H

#include "sluice/sluice.h"

/* Microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01 (UTC). */
#define SL_PG_EPOCH_US INT64_C(946684800000000)

/* ------------------------------------------------------------------ */
/* CopyData framing of the replication stream                          */

typedef struct sl_pg_copy_s {
  uint8_t kind;        /* 'w' XLogData or 'k' primary keepalive */
  uint64_t wal_start;  /* 'w': LSN of the start of the payload */
  uint64_t wal_end;    /* 'w' and 'k': the server's current end of WAL */
  int64_t send_time;   /* microseconds since 2000-01-01 (server clock) */
  bool reply_requested; /* 'k': the server asks for a status update now */
  const uint8_t *data;  /* 'w': the pgoutput message; borrowed */
  size_t len;
} sl_pg_copy_t;

/**
 * @brief Decode one CopyData payload of a START_REPLICATION stream.
 * @param[out] out written on success only; data borrows p.
 * @return SL_OK; SL_ECORRUPT (truncated, unknown kind: the message names
 * the kind, the offset and the field).
 * @thread any
 */
int sl__pg_copy_decode(const uint8_t *p, size_t len, sl_pg_copy_t *out,
                       sl_error_t **out_err);

#define SL_PG_STATUS_SIZE 34

/**
 * @brief Encode a standby status update ('r'): write, flush and apply
 * LSNs, the client's clock (microseconds since 2000-01-01) and whether
 * the server should answer at once.  Writes SL_PG_STATUS_SIZE bytes.
 * @thread any
 */
void sl__pg_status_encode(uint8_t out[SL_PG_STATUS_SIZE], uint64_t write_lsn,
                          uint64_t flush_lsn, uint64_t apply_lsn,
                          int64_t now_pg_us, bool reply_requested);

/* ------------------------------------------------------------------ */
/* pgoutput messages                                                   */

typedef enum sl_pgo_type_e {
  SL_PGO_BEGIN = 'B',
  SL_PGO_COMMIT = 'C',
  SL_PGO_ORIGIN = 'O',
  SL_PGO_RELATION = 'R',
  SL_PGO_TYPE = 'Y',
  SL_PGO_INSERT = 'I',
  SL_PGO_UPDATE = 'U',
  SL_PGO_DELETE = 'D',
  SL_PGO_TRUNCATE = 'T',
  SL_PGO_MESSAGE = 'M'
} sl_pgo_type_t;

/* A column of a tuple, as sent: its kind is the byte of TupleData. */
typedef enum sl_pgo_datum_kind_e {
  SL_PGO_NULL = 'n',
  SL_PGO_UNCHANGED = 'u', /* a TOASTed value the change did not touch */
  SL_PGO_TEXT = 't',
  SL_PGO_BINARY = 'b'
} sl_pgo_datum_kind_t;

typedef struct sl_pgo_datum_s {
  uint8_t kind;        /* sl_pgo_datum_kind_t */
  uint32_t len;        /* text and binary */
  const uint8_t *data; /* text and binary; borrowed from the message */
} sl_pgo_datum_t;

typedef struct sl_pgo_tuple_s {
  uint16_t n_cols;
  const sl_pgo_datum_t *cols; /* decoder's scratch */
} sl_pgo_tuple_t;

#define SL_PGO_COL_KEY 1 /* the column's flag: part of the replica identity */

typedef struct sl_pgo_column_s {
  uint8_t flags;     /* SL_PGO_COL_KEY */
  char *name;
  uint32_t type_oid;
  int32_t type_mod;  /* atttypmod; -1 when none */
} sl_pgo_column_t;

/* A table as its Relation message described it. */
typedef struct sl_pgo_relation_s {
  uint32_t oid;
  char *nspname;     /* "" stands for pg_catalog */
  char *relname;
  char replident;    /* 'd' default, 'n' nothing, 'f' full, 'i' index */
  uint16_t n_cols;
  sl_pgo_column_t *cols;
} sl_pgo_relation_t;

typedef struct sl_pgo_msg_s {
  uint8_t type; /* sl_pgo_type_t */
  union {
    struct {
      uint64_t final_lsn;  /* LSN of the commit record */
      int64_t commit_time; /* microseconds since 2000-01-01 */
      uint32_t xid;
    } begin;
    struct {
      uint8_t flags;
      uint64_t commit_lsn; /* the commit record */
      uint64_t end_lsn;    /* the end of the transaction: resume here */
      int64_t commit_time;
    } commit;
    struct {
      uint64_t lsn;
      const char *name; /* borrowed from the message */
    } origin;
    /* Relation: the decoder's cached copy (valid until the next Relation
     * message for the same oid, or sl__pgo_decoder_close). */
    const sl_pgo_relation_t *relation;
    struct {
      uint32_t oid;
      const char *nspname, *name; /* borrowed from the message */
    } type;
    /* Insert, Update, Delete. */
    struct {
      const sl_pgo_relation_t *rel; /* from the decoder's cache */
      uint8_t old_kind;   /* 'K' key columns, 'O' whole old row, 0 none */
      sl_pgo_tuple_t old; /* Update with old_kind, Delete */
      sl_pgo_tuple_t new_; /* Insert, Update */
    } change;
    struct {
      uint8_t options; /* 1 CASCADE, 2 RESTART IDENTITY */
      uint32_t n_rels;
      const uint32_t *rel_oids; /* decoder's scratch */
    } truncate;
    struct {
      bool is_transactional;
      uint64_t lsn;
      const char *prefix;     /* borrowed from the message */
      const uint8_t *content; /* borrowed from the message */
      uint32_t len;
    } message;
  } u;
} sl_pgo_msg_t;

/*
 * A decoder keeps the relations the stream described (an Insert names its
 * table by oid only) and the scratch arrays of the last message.
 * @thread one thread at a time.
 */
typedef struct sl_pgo_decoder_s {
  sl_pgo_relation_t **rels; /* open addressing by oid, NULL = empty */
  uint32_t rels_cap;        /* power of two, or 0 */
  uint32_t n_rels;
  sl_pgo_datum_t *datums; /* old tuple first, then new */
  uint32_t datums_cap;
  uint32_t *oids;
  uint32_t oids_cap;
} sl_pgo_decoder_t;

void sl__pgo_decoder_init(sl_pgo_decoder_t *d);
void sl__pgo_decoder_close(sl_pgo_decoder_t *d);

/**
 * @brief Decode one pgoutput message (the payload of an XLogData).
 * A Relation message replaces the decoder's copy for its oid; Insert,
 * Update and Delete must name a relation described before, with as many
 * columns.
 * @param[out] out written on success only.  What it points to is borrowed
 * from p and from the decoder: valid until the next call and while p is.
 * @return SL_OK; SL_ECORRUPT (malformed or truncated: message type, byte
 * offset and field named); SL_ENOTSUP (protocol version 2 streaming and
 * two-phase messages, with their names); SL_ENOMEM.
 * @thread the decoder's
 */
int sl__pgo_decode(sl_pgo_decoder_t *d, const uint8_t *p, size_t len,
                   sl_pgo_msg_t *out, sl_error_t **out_err);

/** @brief The relation with oid, or NULL.  @thread the decoder's */
const sl_pgo_relation_t *sl__pgo_relation(const sl_pgo_decoder_t *d,
                                          uint32_t oid);

/** @brief "Insert" for 'I', and so on; "unknown" otherwise.  @thread any */
const char *sl__pgo_type_name(uint8_t type);

/* ------------------------------------------------------------------ */
/* Column values                                                       */

/* PostgreSQL type oids (pg_type.dat) the conversion knows. */
#define SL_PG_OID_BOOL 16
#define SL_PG_OID_BYTEA 17
#define SL_PG_OID_INT8 20
#define SL_PG_OID_INT2 21
#define SL_PG_OID_INT4 23
#define SL_PG_OID_TEXT 25
#define SL_PG_OID_JSON 114
#define SL_PG_OID_FLOAT4 700
#define SL_PG_OID_FLOAT8 701
#define SL_PG_OID_BPCHAR 1042
#define SL_PG_OID_VARCHAR 1043
#define SL_PG_OID_DATE 1082
#define SL_PG_OID_TIMESTAMP 1114
#define SL_PG_OID_TIMESTAMPTZ 1184
#define SL_PG_OID_NUMERIC 1700
#define SL_PG_OID_UUID 2950
#define SL_PG_OID_JSONB 3802

/**
 * @brief The sluice type a column maps to (nullable):
 *
 *   bool -> bool; int2, int4 -> int32; int8 -> int64; float4, float8 ->
 *   float64; numeric(p,s) with p <= 18 -> decimal(p,s); numeric without a
 *   precision or with p > 18 -> string (the exact text); text, varchar,
 *   bpchar, uuid, json, jsonb -> string; bytea -> bytes; date ->
 *   timestamp (midnight UTC); timestamp -> timestamp (read as UTC);
 *   timestamptz -> timestamp (the instant).
 *
 * @return SL_OK; SL_ENOTSUP naming the relation, the column and the type
 * oid for any other type.
 * @thread any
 */
int sl__pgo_column_type(const sl_pgo_relation_t *rel, uint16_t col,
                        sl_type_t *out_type, sl_error_t **out_err);

/**
 * @brief Convert column col of a tuple of rel into field of b, whose type
 * must be sl__pgo_column_type's.  NULL sets the field null.  An unchanged
 * TOAST value has no value to convert: SL_EINVAL (the caller keeps the
 * old value instead; it must never become a NULL).
 * @return SL_OK; SL_EPARSE (the text does not read as the type: relation,
 * column, type and value named); SL_ENOTSUP (binary format, or a value
 * sluice cannot hold: infinity dates, NaN numeric in a decimal); SL_EINVAL;
 * SL_ENOMEM.
 * @thread any
 */
int sl__pgo_value(const sl_pgo_relation_t *rel, uint16_t col,
                  const sl_pgo_datum_t *datum, sl_row_builder_t *b,
                  uint32_t field, sl_error_t **out_err);

/**
 * @brief Parse PostgreSQL's ISO text of a date, timestamp or timestamptz
 * (DateStyle ISO: "2024-03-01", "2024-03-01 12:00:00.5", "... +05:30",
 * " BC") into microseconds since 1970-01-01 UTC.  A timestamp without an
 * offset is read as UTC.
 * @return SL_OK; SL_EPARSE; SL_ENOTSUP (infinity); SL_EOVERFLOW.
 * @thread any
 */
int sl__pg_parse_timestamp(const char *s, size_t len, bool is_date,
                           int64_t *out_us);

#endif
