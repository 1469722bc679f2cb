/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Built-in relational operators: expression filters, projections and the
 * keyed aggregate.  Expressions are written in the small language of
 * docs/expressions.md and type-checked against the input schema when the
 * operator is added.  The pipeline files of the sluice command map onto
 * these calls one to one.
 */
#ifndef SLUICE_SL_OPS_H
#define SLUICE_SL_OPS_H

#include "sl_common.h"
#include "sl_job.h"
#include "sl_row.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_expr_s sl_expr_t;

/**
 * @brief Compile an expression against a schema.
 * @param[out] out_err_column 1-based column of the error in text (0 if the
 * error has no position); written on failure only.
 * @return SL_OK, SL_EPARSE (syntax), SL_ETYPE (types), SL_ENOMEM.
 * @ownership the caller owns *out_expr until it passes it to an operator.
 */
SL_API int sl_expr_compile(const char *text, const sl_schema_t *schema,
                           sl_expr_t **out_expr, uint32_t *out_err_column,
                           sl_error_t **out_err);
/** @brief Result type of a compiled expression. */
SL_API sl_type_t sl_expr_result_type(const sl_expr_t *expr);
SL_API void sl_expr_destroy(sl_expr_t *expr);

/**
 * @brief Keep rows for which cond is true (null counts as false).
 * @ownership takes cond, also on error.
 */
SL_API sl_stream_t *sl_stream_filter_expr(sl_stream_t *in, const char *uid,
                                          sl_expr_t *cond);
/**
 * @brief Project: output field i is names[i] = exprs[i].  The row kind is
 * kept.  @ownership takes every expression, also on error.
 */
SL_API sl_stream_t *sl_stream_project(sl_stream_t *in, const char *uid,
                                      const char *const *names,
                                      sl_expr_t **exprs, uint32_t n);

typedef enum sl_agg_fn_e {
  SL_AGG_COUNT = 1, /* count(): rows; count(f): non-null values of f */
  SL_AGG_SUM = 2,
  SL_AGG_MIN = 3,
  SL_AGG_MAX = 4,
  SL_AGG_AVG = 5
} sl_agg_fn_t;

typedef struct sl_agg_s {
  const char *name;  /* output column */
  sl_agg_fn_t fn;
  const char *field; /* input field; NULL for count() */
} sl_agg_t;

typedef enum sl_agg_emit_e {
  /* An upsert stream: +I when a key first appears, +U on every change. */
  SL_AGG_EMIT_UPDATES = 0,
  /* One +I row per key when the input ends (bounded input only). */
  SL_AGG_EMIT_FINAL = 1
} sl_agg_emit_t;

/**
 * @brief Keyed aggregate over a stream keyed with sl_stream_key_by_fields.
 * Output: the key fields, then one column per aggregate.  Types: count is
 * int64; sum of int32/int64 is int64 (overflow fails the job), of float64 is
 * float64, of decimal(p,s) is decimal(18,s); min/max keep the input type;
 * avg is float64.  Rows with kind -U/-D are retracted from count, sum and
 * avg; min/max do not support retraction and fail on them.
 */
SL_API sl_stream_t *sl_stream_aggregate(sl_stream_t *keyed, const char *uid,
                                        const sl_agg_t *aggs, uint32_t n_aggs,
                                        sl_agg_emit_t emit);

#ifdef __cplusplus
}
#endif
#endif
