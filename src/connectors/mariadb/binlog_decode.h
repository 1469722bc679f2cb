/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice's own decoder of MariaDB and MySQL binary log events, from their
 * raw bytes (Connector/C is the transport only: binlog_reader.h).  Internal
 * to the connectors; groundwork of the mariadb-cdc source.  The format
 * reference is the servers' own (MariaDB sql/log_event*.cc, MySQL
 * libbinlogevents); docs/cdc-mariadb.md "Binlog decoding" lists what is
 * decoded and what sluice chose where the format leaves room.
 *
 * Decisions (the why is next to the code):
 * - One event in, one decoded view out: sl__binlog_decode() takes exactly
 *   one event (the 19-byte v4 header, the body and, when the stream has
 *   checksums, the 4-byte CRC32, which is verified).  Its length must be
 *   the header's event_length.  Decoded strings are slices that borrow the
 *   event's bytes.
 * - The decoder keeps the stream's state: the checksum algorithm and the
 *   post-header lengths of the last FORMAT_DESCRIPTION, the binlog file
 *   name of the last ROTATE, and the tables of the TABLE_MAP events (by
 *   table id), which the row events refer to.  Before the first
 *   FORMAT_DESCRIPTION the checksum algorithm is the one the caller
 *   negotiated (@master_binlog_checksum): the server sends its artificial
 *   ROTATE with it.
 * - Every read is bounds-checked.  A malformed or truncated event gives
 *   SL_ECORRUPT with a message naming the event type, its position
 *   (binlog file and offset) and the field; an unknown event type that the
 *   header does not mark ignorable gives SL_ENOTSUP with the same
 *   coordinates; compressed events and MySQL's binary JSON give SL_ENOTSUP.
 * - Row values are decoded losslessly into sl_binlog_value_t (integers as
 *   64 bits with their signedness, DECIMAL as exact text, temporal values
 *   as their fields); sl__binlog_value_to_sl() maps them onto sluice
 *   values with the documented type table (sl__binlog_col_sl_type).
 *   Signedness, character sets and ENUM/SET names come from the
 *   TABLE_MAP's optional metadata when the server writes it
 *   (binlog_row_metadata=MINIMAL/FULL); otherwise the caller sets them from
 *   information_schema (sl__binlog_table_set_col).
 * - A position in the stream is a GTID state (the last completed
 *   transaction per MariaDB domain) plus the events and rows to skip of the
 *   transaction that follows it: sl_binlog_gtid_state_t and
 *   sl_binlog_pos_t.
 *
 * @thread one decoder per stream, used by one thread at a time.
 */
#ifndef SL_BINLOG_DECODE_H
#define SL_BINLOG_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

#define SL_BINLOG_HEADER_LEN 19u
#define SL_BINLOG_CHECKSUM_LEN 4u
/* Largest event accepted (MariaDB's and MySQL's max_allowed_packet limit). */
#define SL_BINLOG_MAX_EVENT (1u << 30)
/* Most columns a table can have (MySQL 4096; MariaDB 4096). */
#define SL_BINLOG_MAX_COLUMNS 4096u

/* Event types (MySQL's and MariaDB's numbers). */
enum {
  SL_BLE_UNKNOWN = 0,
  SL_BLE_START_V3 = 1,
  SL_BLE_QUERY = 2,
  SL_BLE_STOP = 3,
  SL_BLE_ROTATE = 4,
  SL_BLE_INTVAR = 5,
  SL_BLE_RAND = 13,
  SL_BLE_USER_VAR = 14,
  SL_BLE_FORMAT_DESCRIPTION = 15,
  SL_BLE_XID = 16,
  SL_BLE_TABLE_MAP = 19,
  SL_BLE_WRITE_ROWS_V1 = 23,
  SL_BLE_UPDATE_ROWS_V1 = 24,
  SL_BLE_DELETE_ROWS_V1 = 25,
  SL_BLE_INCIDENT = 26,
  SL_BLE_HEARTBEAT = 27,
  SL_BLE_IGNORABLE = 28,
  SL_BLE_ROWS_QUERY = 29, /* MySQL */
  SL_BLE_WRITE_ROWS_V2 = 30,
  SL_BLE_UPDATE_ROWS_V2 = 31,
  SL_BLE_DELETE_ROWS_V2 = 32,
  SL_BLE_MYSQL_GTID = 33,
  SL_BLE_MYSQL_ANONYMOUS_GTID = 34,
  SL_BLE_MYSQL_PREVIOUS_GTIDS = 35,
  SL_BLE_MYSQL_TRANSACTION_CONTEXT = 36,
  SL_BLE_MYSQL_VIEW_CHANGE = 37,
  SL_BLE_XA_PREPARE = 38,
  SL_BLE_MYSQL_PARTIAL_UPDATE_ROWS = 39,
  SL_BLE_MYSQL_TRANSACTION_PAYLOAD = 40,
  SL_BLE_MYSQL_HEARTBEAT_V2 = 41,
  SL_BLE_ANNOTATE_ROWS = 160, /* MariaDB */
  SL_BLE_BINLOG_CHECKPOINT = 161,
  SL_BLE_GTID = 162,
  SL_BLE_GTID_LIST = 163,
  SL_BLE_START_ENCRYPTION = 164,
  SL_BLE_QUERY_COMPRESSED = 165,
  SL_BLE_WRITE_ROWS_COMPRESSED_V1 = 166,
  SL_BLE_UPDATE_ROWS_COMPRESSED_V1 = 167,
  SL_BLE_DELETE_ROWS_COMPRESSED_V1 = 168,
  SL_BLE_WRITE_ROWS_COMPRESSED = 169,
  SL_BLE_UPDATE_ROWS_COMPRESSED = 170,
  SL_BLE_DELETE_ROWS_COMPRESSED = 171
};

/* Header flags. */
#define SL_BLF_ARTIFICIAL 0x20u /* LOG_EVENT_ARTIFICIAL_F */
#define SL_BLF_IGNORABLE 0x80u  /* LOG_EVENT_IGNORABLE_F */

/* MariaDB GTID event flags (flags2). */
#define SL_BL_GTID_STANDALONE 0x01u
#define SL_BL_GTID_GROUP_COMMIT_ID 0x02u
#define SL_BL_GTID_TRANSACTIONAL 0x04u
#define SL_BL_GTID_DDL 0x20u
#define SL_BL_GTID_PREPARED_XA 0x40u
#define SL_BL_GTID_COMPLETED_XA 0x80u

/* Rows event flags. */
#define SL_BL_ROWS_STMT_END 0x0001u

typedef enum sl_binlog_checksum_e {
  SL_BINLOG_CHECKSUM_OFF = 0,
  SL_BINLOG_CHECKSUM_CRC32 = 1
} sl_binlog_checksum_t;

typedef enum sl_binlog_flavor_e {
  SL_BINLOG_FLAVOR_UNKNOWN = 0,
  SL_BINLOG_FLAVOR_MARIADB = 1,
  SL_BINLOG_FLAVOR_MYSQL = 2
} sl_binlog_flavor_t;

/* Column types of TABLE_MAP (MYSQL_TYPE_*; the real type for STRING). */
enum {
  SL_BLT_DECIMAL = 0,
  SL_BLT_TINY = 1,
  SL_BLT_SHORT = 2,
  SL_BLT_LONG = 3,
  SL_BLT_FLOAT = 4,
  SL_BLT_DOUBLE = 5,
  SL_BLT_NULL = 6,
  SL_BLT_TIMESTAMP = 7,
  SL_BLT_LONGLONG = 8,
  SL_BLT_INT24 = 9,
  SL_BLT_DATE = 10,
  SL_BLT_TIME = 11,
  SL_BLT_DATETIME = 12,
  SL_BLT_YEAR = 13,
  SL_BLT_NEWDATE = 14,
  SL_BLT_VARCHAR = 15,
  SL_BLT_BIT = 16,
  SL_BLT_TIMESTAMP2 = 17,
  SL_BLT_DATETIME2 = 18,
  SL_BLT_TIME2 = 19,
  SL_BLT_TYPED_ARRAY = 244,
  SL_BLT_JSON = 245,
  SL_BLT_NEWDECIMAL = 246,
  SL_BLT_ENUM = 247,
  SL_BLT_SET = 248,
  SL_BLT_TINY_BLOB = 249,
  SL_BLT_MEDIUM_BLOB = 250,
  SL_BLT_LONG_BLOB = 251,
  SL_BLT_BLOB = 252,
  SL_BLT_VAR_STRING = 253,
  SL_BLT_STRING = 254,
  SL_BLT_GEOMETRY = 255
};

/* Collation id of the binary character set. */
#define SL_BL_CHARSET_BINARY 63u

/* A slice of the event's bytes (not NUL-terminated). */
typedef struct sl_binlog_str_s {
  const uint8_t *p;
  uint32_t len;
} sl_binlog_str_t;

/* One column of a table, from TABLE_MAP (and the caller). */
typedef struct sl_binlog_col_s {
  uint8_t type;     /* SL_BLT_*: the real type (STRING's ENUM/SET/CHAR) */
  uint16_t meta;    /* decoded metadata, see max_len/precision/... */
  uint32_t max_len; /* CHAR/VARCHAR: max bytes; BLOB: length bytes 1-4;
                       ENUM/SET: packed bytes; BIT: bits */
  uint8_t precision, scale; /* NEWDECIMAL */
  uint8_t fsp;              /* TIME2/DATETIME2/TIMESTAMP2: 0..6 */
  bool is_nullable;
  bool is_unsigned;  /* SIGNEDNESS metadata or the caller */
  bool has_sign;     /* is_unsigned is known */
  uint16_t charset;  /* collation id; 0 unknown */
  char *name;        /* COLUMN_NAME metadata or the caller; may be NULL */
  /* ENUM/SET names (ENUM_STR_VALUE/SET_STR_VALUE or the caller), owned. */
  char **names;
  uint32_t n_names;
} sl_binlog_col_t;

/* A table of a TABLE_MAP event; owned by the decoder. */
typedef struct sl_binlog_table_s {
  uint64_t table_id;
  char *schema, *table;
  uint32_t n_cols;
  sl_binlog_col_t *cols;
  uint32_t n_pk;   /* SIMPLE_PRIMARY_KEY / PRIMARY_KEY_WITH_PREFIX */
  uint32_t *pk;    /* column indexes */
  bool has_optional_meta;
} sl_binlog_table_t;

/* One MariaDB GTID: domain-server-seq. */
typedef struct sl_binlog_gtid_s {
  uint32_t domain;
  uint32_t server_id;
  uint64_t seq;
} sl_binlog_gtid_t;

/* A decoded event.  Slices borrow the event's bytes; table borrows the
 * decoder's table (valid until the next TABLE_MAP of the same id, ROTATE,
 * FORMAT_DESCRIPTION or the decoder's close). */
typedef struct sl_binlog_event_s {
  const uint8_t *raw; /* the whole event (borrowed) */
  uint8_t type;
  uint32_t timestamp;
  uint32_t server_id;
  uint32_t event_len;
  uint32_t next_pos; /* position after this event; 0 for artificial ones */
  uint16_t flags;
  const uint8_t *body; /* after header and post-header */
  uint32_t body_len;   /* up to the checksum */
  union {
    struct {
      uint64_t position;
      sl_binlog_str_t name;
    } rotate;
    struct {
      uint16_t binlog_version;
      char server_version[51];
      uint8_t checksum; /* sl_binlog_checksum_t */
      sl_binlog_flavor_t flavor;
    } fde;
    struct {
      uint32_t thread_id, exec_time;
      uint16_t error_code;
      sl_binlog_str_t schema, sql;
    } query;
    struct {
      uint64_t xid;
    } xid;
    struct {
      sl_binlog_gtid_t gtid;
      uint8_t flags2;
      uint64_t commit_id; /* when SL_BL_GTID_GROUP_COMMIT_ID */
      uint32_t xa_format;
      sl_binlog_str_t xa_gtrid, xa_bqual;
    } gtid;
    struct {
      uint32_t n;            /* number of GTIDs */
      uint8_t list_flags;    /* top 4 bits of the count */
      const uint8_t *raw;    /* n x (domain 4, server 4, seq 8) */
    } gtid_list;
    struct {
      uint8_t flags;
      uint8_t uuid[16];
      int64_t gno;
    } mysql_gtid;
    struct {
      sl_binlog_str_t name;
    } checkpoint;
    struct {
      sl_binlog_str_t sql;
    } annotate;
    struct {
      sl_binlog_str_t log_name; /* position is next_pos */
    } heartbeat;
    struct {
      const sl_binlog_table_t *table;
    } table_map;
    struct {
      uint8_t kind; /* 0 write, 1 update, 2 delete */
      uint8_t version; /* 1 or 2 */
      uint64_t table_id;
      uint16_t flags;
      const sl_binlog_table_t *table;
      uint32_t n_cols;
      const uint8_t *present;       /* columns in the (before) image */
      const uint8_t *present_after; /* update: columns in the after image */
      const uint8_t *rows;          /* row images */
      uint32_t rows_len;
    } rows;
    struct {
      uint8_t one_phase;
      uint32_t format;
      sl_binlog_str_t gtrid, bqual;
    } xa_prepare;
  } u;
} sl_binlog_event_t;

/* The stream's state (private fields; see the file comment). */
typedef struct sl_binlog_decoder_s {
  uint8_t checksum;   /* sl_binlog_checksum_t in force */
  bool has_fde;
  sl_binlog_flavor_t flavor;
  uint8_t post_len[256]; /* post-header length per type */
  char file[512];        /* current binlog file ("" unknown) */
  sl_binlog_table_t **tables;
  uint32_t n_tables, cap_tables;
  bool verify_checksum; /* false only for tests of bad checksums' reach */
} sl_binlog_decoder_t;

/** @brief Name of an event type ("WRITE_ROWS_V1"; "type 200" unknown). */
const char *sl__binlog_event_name(uint8_t type, char *buf, size_t size);
/** @brief Name of a column type ("VARCHAR"). */
const char *sl__binlog_type_name(uint8_t type);

/**
 * @brief Start a decoder for a stream whose events carry checksum (the
 * algorithm the caller negotiated; a FORMAT_DESCRIPTION overrides it).
 */
void sl__binlog_decoder_init(sl_binlog_decoder_t *d,
                             sl_binlog_checksum_t checksum);
void sl__binlog_decoder_close(sl_binlog_decoder_t *d);
/** @brief The binlog file of the current position ("" unknown). */
static inline const char *sl__binlog_decoder_file(
    const sl_binlog_decoder_t *d) {
  return d->file;
}

/**
 * @brief Decode one event of len bytes (exactly its event_length).
 * Updates the decoder (FORMAT_DESCRIPTION, ROTATE, TABLE_MAP).
 * @return SL_OK; SL_ECORRUPT (malformed, truncated, checksum mismatch);
 * SL_ENOTSUP (unknown non-ignorable type, compressed event); SL_ENOMEM.
 * Messages name the event type, its position and the field.
 * @ownership ev borrows data (and the decoder's tables).
 */
int sl__binlog_decode(sl_binlog_decoder_t *d, const uint8_t *data,
                      size_t len, sl_binlog_event_t *ev,
                      sl_error_t **out_err);

/** @brief The table of table_id from the last TABLE_MAP, or NULL. */
const sl_binlog_table_t *sl__binlog_table(const sl_binlog_decoder_t *d,
                                          uint64_t table_id);
/**
 * @brief Set facts of a column the TABLE_MAP did not carry (from
 * information_schema): name (copied; NULL keeps), is_unsigned (1 unsigned,
 * 0 signed, -1 keeps; sets has_sign), charset (a collation id; 0 keeps)
 * and ENUM/SET names (copied; NULL keeps).  The facts hold until the next
 * TABLE_MAP of the table replaces it.
 * @return SL_OK, SL_EINVAL (no such table or column), SL_ENOMEM.
 */
int sl__binlog_table_set_col(sl_binlog_decoder_t *d, uint64_t table_id,
                             uint32_t col, const char *name, int is_unsigned,
                             uint16_t charset, const char *const *names,
                             uint32_t n_names, sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* Row values */

typedef enum sl_binlog_vkind_e {
  SL_BV_ABSENT = 0, /* the column is not in the image */
  SL_BV_NULL,
  SL_BV_INT,      /* u.i, or u.u when is_unsigned */
  SL_BV_DOUBLE,   /* FLOAT (widened exactly) and DOUBLE */
  SL_BV_DECIMAL,  /* dec: exact text "-123.4500" */
  SL_BV_STRING,   /* u.s, with the column's charset (binary: bytes) */
  SL_BV_DATE,     /* t: year, month, day */
  SL_BV_TIME,     /* t: is_negative, hour (0..838), minute, second, usec */
  SL_BV_DATETIME, /* t: date and time, usec */
  SL_BV_TIMESTAMP,/* u.ts: seconds since the epoch (UTC), usec */
  SL_BV_YEAR,     /* u.i: 0 or 1901..2155 */
  SL_BV_BIT,      /* u.u */
  SL_BV_ENUM,     /* u.u: index, 1-based (0: the empty error value) */
  SL_BV_SET,      /* u.u: member bitmask */
  SL_BV_BLOBLIKE  /* GEOMETRY: u.s */
} sl_binlog_vkind_t;

typedef struct sl_binlog_value_s {
  uint8_t kind; /* sl_binlog_vkind_t */
  bool is_unsigned;
  union {
    int64_t i;
    uint64_t u;
    double f;
    sl_binlog_str_t s;
    struct {
      int64_t sec;
      uint32_t usec;
    } ts;
  } u;
  struct {
    uint16_t year;
    uint8_t month, day, minute, second;
    uint16_t hour; /* TIME: up to 838 */
    uint32_t usec;
    bool is_negative;
  } t;
  char dec[80]; /* DECIMAL text, NUL-terminated */
} sl_binlog_value_t;

/* An iterator over the row images of one rows event. */
typedef struct sl_binlog_rows_iter_s {
  const sl_binlog_event_t *ev;
  uint32_t off;   /* into ev->u.rows.rows */
  uint32_t index; /* row number, for messages */
} sl_binlog_rows_iter_t;

void sl__binlog_rows_begin(sl_binlog_rows_iter_t *it,
                           const sl_binlog_event_t *ev);
/**
 * @brief Decode the next row of a rows event: before and after images,
 * each an array of the table's n_cols values (columns outside the image
 * SL_BV_ABSENT).  Write: after only; delete: before only; update: both.
 * An image not in this kind of event is set all SL_BV_ABSENT.
 * @return SL_OK; SL_ENOTFOUND at the end; SL_ECORRUPT or SL_ENOTSUP
 * (messages as sl__binlog_decode's, naming the row and the column).
 * @ownership the values borrow the event's bytes.
 */
int sl__binlog_rows_next(const sl_binlog_decoder_t *d,
                         sl_binlog_rows_iter_t *it,
                         sl_binlog_value_t *before, sl_binlog_value_t *after,
                         sl_error_t **out_err);

/**
 * @brief The sluice type a column maps to (docs/cdc-mariadb.md):
 * integers, YEAR, BIT, TIME (microseconds) and ENUM/SET without names to
 * int64; FLOAT/DOUBLE to float64; DECIMAL(p<=18) to decimal(p,s), wider to
 * string; DATE/DATETIME/TIMESTAMP to timestamp (UTC, microseconds);
 * character columns and ENUM/SET with names to string; binary to bytes.
 * @return SL_OK or SL_ENOTSUP (MySQL JSON, unknown charset, ...).
 */
int sl__binlog_col_sl_type(const sl_binlog_col_t *col, sl_type_t *out_type,
                           sl_error_t **out_err);
/**
 * @brief Convert a decoded value of col to a sluice value of type t (as
 * sl__binlog_col_sl_type gives).  String values borrow v's bytes, or buf
 * (ENUM/SET names, latin1 converted to UTF-8), which is cleared first.
 * @return SL_OK; SL_ETYPE (value out of range for t, zero date, invalid
 * UTF-8 ...), messages naming the column.
 */
int sl__binlog_value_to_sl(const sl_binlog_col_t *col,
                           const sl_binlog_value_t *v, sl_type_t t,
                           sl_bytes_t *buf, sl_value_t *out,
                           sl_error_t **out_err);

/**
 * @brief A sluice schema for a table: one field per column, named by the
 * column (COLUMN_NAME metadata or the caller; "col<i>" when unknown),
 * typed by sl__binlog_col_sl_type, nullable as the column.
 * @return SL_OK; SL_ENOTSUP (a column without a sluice type, named);
 * SL_ENOMEM.
 * @ownership the caller unrefs *out_schema.
 */
int sl__binlog_table_schema(const sl_binlog_table_t *t,
                            sl_schema_t **out_schema, sl_error_t **out_err);
/**
 * @brief Build a sluice row of kind from an image (values of t's columns,
 * as sl__binlog_rows_next gives them) into b, a builder of a schema made by
 * sl__binlog_table_schema(t).  A column absent from the image (a server
 * with binlog_row_image other than FULL) is an error naming it.
 * @return SL_OK; SL_ETYPE / SL_EINVAL with a message naming the table and
 * the column; SL_ENOMEM.
 */
int sl__binlog_image_to_row(const sl_binlog_table_t *t,
                            const sl_binlog_value_t *vals, sl_row_kind_t kind,
                            sl_row_builder_t *b, sl_bytes_t *scratch,
                            sl_row_t *out_row, sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* Positions */

#define SL_BINLOG_MAX_DOMAINS 64u

/* A MariaDB GTID state: the last GTID per domain, sorted by domain. */
typedef struct sl_binlog_gtid_state_s {
  uint32_t n;
  sl_binlog_gtid_t g[SL_BINLOG_MAX_DOMAINS];
} sl_binlog_gtid_state_t;

/**
 * @brief Parse "0-1-10,1-2-5" (empty: no domain).  Duplicated domains,
 * bad numbers and more than SL_BINLOG_MAX_DOMAINS are SL_EPARSE.
 */
int sl__binlog_gtid_state_parse(const char *s, sl_binlog_gtid_state_t *out,
                                sl_error_t **out_err);
/** @brief Format as parse reads it, domains ascending. */
int sl__binlog_gtid_state_format(const sl_binlog_gtid_state_t *st,
                                 sl_bytes_t *out);
/** @brief Record g as its domain's last GTID.  SL_EOVERFLOW: full. */
int sl__binlog_gtid_state_update(sl_binlog_gtid_state_t *st,
                                 const sl_binlog_gtid_t *g);

/*
 * A resumable position: the GTID state of the last completed transaction,
 * then skip_events events (counted from the transaction's GTID event) and
 * skip_rows rows of the next rows event to pass over, for a checkpoint
 * taken inside a transaction.  file/offset are the fallback on servers
 * without GTIDs (offset 0: not known).
 */
typedef struct sl_binlog_pos_s {
  sl_binlog_gtid_state_t gtid;
  uint64_t skip_events;
  uint64_t skip_rows;
  char file[512];
  uint64_t offset;
} sl_binlog_pos_t;

/*
 * The position's bytes, for a checkpoint (version 1, little-endian):
 * version u8, n_domains u8, n x (domain u32, server u32, seq u64),
 * skip_events u64, skip_rows u64, file length u16, file, offset u64.
 */
#define SL_BINLOG_POS_VERSION 1
/** @brief Append pos's bytes to out.  @return SL_OK or SL_ENOMEM. */
int sl__binlog_pos_encode(const sl_binlog_pos_t *pos, sl_bytes_t *out);
/**
 * @brief Read a position written by sl__binlog_pos_encode.  Every length
 * is checked; a wrong version, unsorted or repeated domains, a file name
 * with a NUL or too long, or bytes left over are SL_ECORRUPT, named.
 */
int sl__binlog_pos_decode(const uint8_t *p, size_t len, sl_binlog_pos_t *out,
                          sl_error_t **out_err);

#endif
