/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text formats for rows: CSV (RFC 4180 quoting) and JSON lines (one object
 * per line, parsed with jansson).  Used by the file source and sinks; public
 * so that user connectors can share them.  The textual form of each type is
 * documented in docs/formats.md.
 */
#ifndef SLUICE_SL_FORMAT_H
#define SLUICE_SL_FORMAT_H

#include "sl_common.h"
#include "sl_row.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Parse a value of type t from text (no quotes, no surrounding
 * space).  Empty text is not null here; callers decide what null is.
 * @return SL_OK or SL_EPARSE with a message like "expected int64, got 'x'".
 */
SL_API int sl_value_parse(const char *text, size_t len, sl_type_t t,
                          sl_row_builder_t *b, uint32_t field,
                          sl_error_t **out_err);
/** @brief Append the text form of field i of row (nothing for null). */
SL_API int sl_value_format(const sl_row_t *row, uint32_t i, sl_bytes_t *out);

/**
 * @brief Parse one CSV record (without its line end) into b (reset first).
 * An empty unquoted field is null; "" (quoted empty) is an empty string.
 * With changelog, the first column is the row kind (+I/-U/+U/-D).
 * @return SL_OK, or SL_EPARSE with a message that names the column number
 * and field, e.g. "column 3 (amount): expected int64, got 'abc'".
 */
SL_API int sl_csv_parse(const char *line, size_t len, char delim,
                        bool changelog, sl_row_builder_t *b,
                        sl_error_t **out_err);
/**
 * @brief Find the end of the CSV record at the start of text[0..len): the
 * first line end outside a quoted field (RFC 4180: a field that starts with
 * a quote may hold line ends and delimiters).  With is_eof, text is all
 * that is left, and a record without a line end (or with an unterminated
 * quoted field, which sl_csv_parse then reports) ends at len.
 * @param[out] out_len the record's length, without its line end.
 * @param[out] out_consumed out_len plus the line end, if any.
 * @param[out] out_n_breaks line ends inside the record's quoted fields.
 * @return SL_OK, or SL_EAGAIN when text holds no whole record yet (more
 * text may follow; outputs untouched).
 */
SL_API int sl_csv_record_end(const char *text, size_t len, char delim,
                             bool is_eof, size_t *out_len,
                             size_t *out_consumed, uint32_t *out_n_breaks);
/**
 * @brief Check a header record (without its line end): its columns, quoted
 * or not, must be the schema's field names in order.
 * @return SL_OK, or SL_EPARSE with a message such as "header column 2 is
 * 'nmae' but field 2 of the schema is 'name'".
 */
SL_API int sl_csv_check_header(const char *line, size_t len, char delim,
                               const sl_schema_t *schema,
                               sl_error_t **out_err);
/** @brief Append one CSV record and "\n". */
SL_API int sl_csv_format(const sl_row_t *row, char delim, bool changelog,
                         sl_bytes_t *out);
/** @brief Append the header line (field names) and "\n". */
SL_API int sl_csv_format_header(const sl_schema_t *schema, char delim,
                                bool changelog, sl_bytes_t *out);

/**
 * @brief Parse one JSON object into b.  Missing members and JSON null are
 * null; unknown members are an error; "op" carries the row kind when
 * changelog is set.  Messages name the member.
 */
SL_API int sl_json_parse(const char *line, size_t len, bool changelog,
                         sl_row_builder_t *b, sl_error_t **out_err);
/** @brief Append one JSON object and "\n". */
SL_API int sl_json_format(const sl_row_t *row, bool changelog, sl_bytes_t *out);

#ifdef __cplusplus
}
#endif
#endif
