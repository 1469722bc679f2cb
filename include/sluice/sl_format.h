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
