/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private header of the expression compiler: the node tree that
 * expr_eval.c walks, the compiled expression, and the tokens and parser
 * state shared by expr_lex.c and expr.c.  Only files of the expression
 * family include it.  See README.md.
 */
#ifndef SL_OPS_EXPR_INT_H
#define SL_OPS_EXPR_INT_H

#include "core/core.h"
#include "ops/expr.h"

/*
 * Limits.  The parser recurses once per nesting level (about nine frames
 * per parenthesis) and evaluation once per tree level, so both are capped
 * to keep stack use small on worker threads.
 */
#define EXPR_MAX_NESTING 64
#define EXPR_MAX_TREE_DEPTH 256
#define EXPR_MAX_ARGS 64

/* Internal type id of an untyped null literal (no sl_type_id_t is 0). */
#define TYPE_NULL 0

/* Type classes: what the type rules look at. */
enum cls {
  C_NULL,
  C_BOOL,
  C_INT,
  C_FLOAT,
  C_DEC,
  C_STR,
  C_TS
};

enum op {
  OP_CONST,
  OP_FIELD_I64, /* int32, int64, decimal, timestamp */
  OP_FIELD_F64,
  OP_FIELD_BOOL,
  OP_FIELD_STR, /* string, bytes */
  OP_I2F,       /* int to float64 */
  OP_D2F,       /* decimal to float64: divide by fdiv */
  OP_RESCALE,   /* decimal or int to a larger scale: multiply by mul[0] */
  OP_NEG_I,
  OP_NEG_F,
  OP_ADD_I,     /* int64, timestamp and decimal arithmetic */
  OP_SUB_I,
  OP_MUL_I,
  OP_DIV_I,
  OP_MOD_I,
  OP_ADD_F,
  OP_SUB_F,
  OP_MUL_F,
  OP_DIV_F,
  OP_CMP_I,     /* int and timestamp comparisons */
  OP_CMP_F,
  OP_CMP_D,     /* decimal comparisons: scale each side by mul[] */
  OP_CMP_S,     /* bytewise */
  OP_CMP_B,
  OP_CMP_I_FK,  /* field a compared with constant b, read in place */
  OP_CMP_F_FK,
  OP_CMP_D_FK,
  OP_CMP_S_FK,
  OP_AND,
  OP_OR,
  OP_NOT,
  OP_IS_NULL,
  OP_IS_NOT_NULL,
  OP_ABS_I,
  OP_ABS_F,
  OP_LOWER,
  OP_UPPER,
  OP_LENGTH_S,  /* UTF-8 code points */
  OP_LENGTH_B,  /* bytes */
  OP_COALESCE
};

enum cmp { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };

typedef struct node_s node_t;
struct node_s {
  uint8_t op;           /* enum op */
  uint8_t cmp;          /* enum cmp, comparisons only */
  uint16_t depth;       /* levels of the tree below and including this */
  sl_type_t type;       /* result type; id TYPE_NULL for an untyped null */
  uint32_t col;         /* column of the operator or token, for messages */
  uint32_t start_col;   /* column where the node's text starts */
  const char *sym;      /* operator or function, for runtime messages */
  const char *ovf;      /* "integer", "decimal" or "timestamp" */
  uint32_t field;       /* OP_FIELD_* */
  int64_t lim;          /* when not 0, results must be in (-lim, lim) */
  int64_t mul[2];       /* OP_RESCALE, OP_CMP_D */
  double fdiv;          /* OP_D2F */
  sl_value_t cval;      /* OP_CONST; strings point into str */
  uint8_t *str;         /* owned bytes of a string constant */
  node_t *a, *b;        /* operands */
  node_t **args;        /* OP_COALESCE */
  uint32_t n_args;
  sl_bytes_t scratch;   /* OP_LOWER, OP_UPPER results */
};

struct sl_expr_s {
  node_t *root;
  sl_type_t type;
  sl_schema_t *schema; /* one reference */
  char *text;          /* for sl__expr_clone() and messages */
  bool is_filter;
};

/* Tokens and the parser state shared by the lexer and the parser. */

enum tok_kind {
  TK_END,
  TK_INT,
  TK_FLOAT,
  TK_STRING,
  TK_IDENT,
  TK_QIDENT, /* `quoted name`; off/len cover the name only */
  TK_LPAREN,
  TK_RPAREN,
  TK_COMMA,
  TK_PLUS,
  TK_MINUS,
  TK_STAR,
  TK_SLASH,
  TK_PERCENT,
  TK_EQ,
  TK_NE,
  TK_LT,
  TK_LE,
  TK_GT,
  TK_GE,
  TK_AND,
  TK_OR,
  TK_NOT,
  TK_TRUE,
  TK_FALSE,
  TK_NULL,
  TK_IS
};

typedef struct tok_s {
  enum tok_kind kind;
  size_t off; /* bytes of the token in the text */
  size_t len;
  uint32_t col;
  uint64_t ival; /* TK_INT, up to 2^63 */
  double fval;   /* TK_FLOAT */
} tok_t;

typedef struct parser_s {
  const char *text;
  size_t pos;   /* next byte to read */
  uint32_t col; /* column of text[pos] */
  tok_t tok;    /* current token */
  sl_bytes_t sbuf; /* decoded bytes of a TK_STRING token */
  const sl_schema_t *schema;
  uint32_t nesting;
  int rc; /* first error */
  uint32_t err_col;
  char msg[256];
} parser_t;

/*
 * Lexer interface (expr_lex.c).  Errors: the first call of sl__expr_fail()
 * records code, column and message in the parser; later calls are ignored,
 * and after an error the lexer yields only TK_END, so every parse loop
 * stops.
 */
__attribute__((format(printf, 4, 5))) void
sl__expr_fail(parser_t *p, int code, uint32_t col, const char *fmt, ...);
void sl__expr_fail_nomem(parser_t *p);
/* Read the next token into p->tok. */
void sl__expr_lex(parser_t *p);
/* Describe the current token for "expected ..., got X" messages. */
const char *sl__expr_tok_desc(const parser_t *p, char *buf, size_t size);
/* Case-insensitive match of s[0..len) against a lower-case word. */
bool sl__expr_word_is(const char *s, size_t len, const char *word);

/* Short names for the lexer interface inside the expression files. */
#define fail sl__expr_fail
#define fail_nomem sl__expr_fail_nomem
#define lex sl__expr_lex
#define tok_desc sl__expr_tok_desc
#define word_is sl__expr_word_is

#endif
