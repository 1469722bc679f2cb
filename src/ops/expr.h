/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Expressions of pipeline files: the conditions of `filter` and the computed
 * fields of `project`.  Text is compiled once against a schema into a typed
 * tree with field indexes, conversions and result types resolved, so that
 * evaluation per record only reads fields and does arithmetic.  The
 * language is described in docs/expressions.md.  See README.md.
 */
#ifndef SL_OPS_EXPR_H
#define SL_OPS_EXPR_H

#include "sluice/sl_row.h"

/*
 * A compiled expression.  Immutable after compilation except for the
 * scratch buffers of lower() and upper(), so one expression must not be
 * evaluated by two threads at the same time: make one per subtask, with
 * sl__expr_compile() or sl__expr_clone().
 */
typedef struct sl_expr_s sl_expr_t;

/* Longest expression text accepted, in bytes. */
#define SL_EXPR_MAX_TEXT (1u << 20)

/**
 * @brief Compile text against schema.
 * @param[in] text NUL-terminated expression text.
 * @param[in] schema schema of the rows that will be evaluated; the
 *   expression keeps a reference to it.
 * @param[out] out_expr the compiled expression, on success.
 * @param[out] out_err_column on failure, the 1-based column (in characters
 *   of text, counting UTF-8 sequences as one) the error refers to, or 0 when
 *   it has no position (SL_ENOMEM).  May be NULL.  Unlike other out
 *   parameters it is written only on failure.
 * @param[out] out_err on failure, an error whose message starts with
 *   "column N: ".  May be NULL.
 * @return SL_OK, SL_EPARSE (malformed text), SL_ETYPE (unknown field or
 *   function, operand types an operator does not accept), SL_EINVAL (text
 *   too long), SL_ENOMEM.
 * @ownership the caller owns *out_expr and frees it with sl__expr_destroy.
 * @thread any.  @locks none.
 */
int sl__expr_compile(const char *text, const sl_schema_t *schema,
                     sl_expr_t **out_expr, uint32_t *out_err_column,
                     sl_error_t **out_err);

/**
 * @brief Compile a filter condition: like sl__expr_compile(), and the
 * result must be bool ("column 1: a filter condition must be bool, got
 * int64" otherwise, SL_ETYPE).  A bare `null` is accepted and keeps nothing.
 * @thread any.  @locks none.
 */
int sl__expr_compile_filter(const char *text, const sl_schema_t *schema,
                            sl_expr_t **out_expr, uint32_t *out_err_column,
                            sl_error_t **out_err);

/**
 * @brief Make an independent copy of e (same text, schema and mode) for
 * another thread.
 * @return SL_OK or SL_ENOMEM.
 * @ownership the caller owns *out_expr.
 * @thread any, as long as no thread destroys e meanwhile.  @locks none.
 */
int sl__expr_clone(const sl_expr_t *e, sl_expr_t **out_expr);

/**
 * @brief Result type.  nullable is set when the result can be null.  The
 * type of an expression that is null whatever the row (`null`, `null + 1`)
 * is the type its operators imply, or bool when nothing implies one.
 * @thread any.  @locks none.
 */
sl_type_t sl__expr_type(const sl_expr_t *e);

/**
 * @brief Evaluate e on row, which must have the schema e was compiled
 * against.
 * @param[out] out the value, on success.  out->type and out->scale are those
 *   of sl__expr_type(); a null result has is_null set and u zeroed.  String
 *   and bytes results are borrowed: they point into the row, into the
 *   expression text or into a scratch buffer of e, and stay valid until the
 *   next evaluation of e, its destruction, or the end of the row's bytes,
 *   whichever comes first.
 * @param[out] out_err runtime error, may be NULL.
 * @return SL_OK; SL_EOVERFLOW ("integer overflow in '+' at column 7",
 *   likewise "decimal" and "timestamp"); SL_EINVAL ("division by zero at
 *   column 9", for '/' and '%' on every numeric type); SL_ENOMEM (lower or
 *   upper could not grow their scratch buffer).
 * @thread the one thread that currently uses e.  @locks none.
 */
int sl__expr_eval(const sl_expr_t *e, const sl_row_t *row, sl_value_t *out,
                  sl_error_t **out_err);

/**
 * @brief Evaluate a bool expression as a filter: *out_keep is true only
 * when the result is true (null counts as false).  e must have type bool,
 * which sl__expr_compile_filter() guarantees.
 * @return as sl__expr_eval().
 * @thread the one thread that currently uses e.  @locks none.
 */
int sl__expr_eval_bool(const sl_expr_t *e, const sl_row_t *row,
                       bool *out_keep, sl_error_t **out_err);

/**
 * @brief Whether e is a bare field reference (`amount`, `(amount)`), and
 * which field; lets `project` copy such fields without evaluating.
 * @thread any.  @locks none.
 */
bool sl__expr_is_field(const sl_expr_t *e, uint32_t *out_field);

/** @brief Text e was compiled from; borrowed, valid until destroy. */
const char *sl__expr_text(const sl_expr_t *e);

/** @brief Free e.  NULL does nothing.  @thread owner.  @locks none. */
void sl__expr_destroy(sl_expr_t *e);

#endif
