/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lexer of the expression language: turns expression text into tokens
 * one at a time for the parser in expr.c, decoding string escapes and
 * counting columns in characters for error messages.  The token syntax is
 * in docs/expressions.md.  See README.md.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "ops/expr_int.h"

void sl__expr_fail(parser_t *p, int code, uint32_t col, const char *fmt,
                   ...) {
  if (p->rc != SL_OK) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
  va_end(ap);
  p->rc = code;
  p->err_col = col;
}

void sl__expr_fail_nomem(parser_t *p) {
  sl__expr_fail(p, SL_ENOMEM, 0, "out of memory compiling an expression");
}

/* Advance one byte; columns count characters, not UTF-8 continuations. */
static void adv(parser_t *p) {
  if (((unsigned char)p->text[p->pos] & 0xC0) != 0x80) p->col++;
  p->pos++;
}

static char peekc(const parser_t *p, size_t k) { return p->text[p->pos + k]; }

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident(char c) { return is_ident_start(c) || is_digit(c); }

static char lower_ascii(char c) {
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive match of a token against a lower-case word. */
bool sl__expr_word_is(const char *s, size_t len, const char *word) {
  size_t i = 0;
  for (; i < len; i++)
    if (word[i] == '\0' || lower_ascii(s[i]) != word[i]) return false;
  return word[i] == '\0';
}

static void lex_string(parser_t *p) {
  char q = peekc(p, 0);
  uint32_t col = p->col;
  sl_bytes_clear(&p->sbuf);
  adv(p);
  for (;;) {
    char c = peekc(p, 0);
    if (c == '\0') {
      fail(p, SL_EPARSE, col, "unterminated string");
      return;
    }
    if (c == q) {
      adv(p);
      break;
    }
    if (c == '\\') {
      uint32_t ecol = p->col;
      char e = peekc(p, 1);
      char v;
      switch (e) {
      case '\\':
      case '\'':
      case '"':
        v = e;
        break;
      case 'n':
        v = '\n';
        break;
      case 't':
        v = '\t';
        break;
      case '\0':
        fail(p, SL_EPARSE, col, "unterminated string");
        return;
      default:
        if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
          fail(p, SL_EPARSE, ecol, "unknown escape '\\%c' in string", e);
        else
          fail(p, SL_EPARSE, ecol, "unknown escape in string");
        return;
      }
      adv(p);
      adv(p);
      if (sl_bytes_append(&p->sbuf, &v, 1) != SL_OK) {
        fail_nomem(p);
        return;
      }
      continue;
    }
    if (sl_bytes_append(&p->sbuf, &c, 1) != SL_OK) {
      fail_nomem(p);
      return;
    }
    adv(p);
  }
  p->tok.kind = TK_STRING;
}

static void lex_number(parser_t *p) {
  size_t start = p->pos;
  bool is_float = false;
  while (is_digit(peekc(p, 0))) adv(p);
  if (peekc(p, 0) == '.') {
    is_float = true;
    adv(p);
    if (!is_digit(peekc(p, 0))) {
      fail(p, SL_EPARSE, p->col, "expected a digit after '.'");
      return;
    }
    while (is_digit(peekc(p, 0))) adv(p);
  }
  if (peekc(p, 0) == 'e' || peekc(p, 0) == 'E') {
    is_float = true;
    adv(p);
    if (peekc(p, 0) == '+' || peekc(p, 0) == '-') adv(p);
    if (!is_digit(peekc(p, 0))) {
      fail(p, SL_EPARSE, p->col, "expected a digit in the exponent");
      return;
    }
    while (is_digit(peekc(p, 0))) adv(p);
  }
  if (is_ident(peekc(p, 0)) || peekc(p, 0) == '.') {
    fail(p, SL_EPARSE, p->tok.col, "malformed number");
    return;
  }
  size_t len = p->pos - start;
  if (is_float) {
    /* strtod needs a terminated copy; numbers are short. */
    char buf[128];
    if (len >= sizeof(buf)) {
      fail(p, SL_EPARSE, p->tok.col, "number is too long");
      return;
    }
    memcpy(buf, p->text + start, len);
    buf[len] = '\0';
    p->tok.kind = TK_FLOAT;
    p->tok.fval = strtod(buf, NULL);
    if (isinf(p->tok.fval)) {
      fail(p, SL_EPARSE, p->tok.col, "number is out of range");
      return;
    }
    return;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    uint64_t d = (uint64_t)(p->text[start + i] - '0');
    if (v > (UINT64_C(1) << 63) / 10 ||
        v * 10 + d > (UINT64_C(1) << 63)) {
      fail(p, SL_EPARSE, p->tok.col, "integer literal out of range");
      return;
    }
    v = v * 10 + d;
  }
  p->tok.kind = TK_INT;
  p->tok.ival = v;
}

/* Read the next token into p->tok.  On error p->rc is set and the token is
 * TK_END, so every parse loop stops. */
void sl__expr_lex(parser_t *p) {
  for (;;) {
    char c = peekc(p, 0);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      adv(p);
    else
      break;
  }
  tok_t *t = &p->tok;
  t->off = p->pos;
  t->col = p->col;
  t->kind = TK_END;
  char c = peekc(p, 0);
  if (p->rc != SL_OK || c == '\0') {
    t->len = 0;
    t->kind = TK_END;
    return;
  }
  enum tok_kind k = TK_END;
  switch (c) {
  case '(': k = TK_LPAREN; break;
  case ')': k = TK_RPAREN; break;
  case ',': k = TK_COMMA; break;
  case '+': k = TK_PLUS; break;
  case '-': k = TK_MINUS; break;
  case '*': k = TK_STAR; break;
  case '/': k = TK_SLASH; break;
  case '%': k = TK_PERCENT; break;
  default: break;
  }
  if (k != TK_END) {
    adv(p);
    t->kind = k;
  } else if (c == '=') {
    adv(p);
    if (peekc(p, 0) == '=') adv(p);
    t->kind = TK_EQ;
  } else if (c == '!' && peekc(p, 1) == '=') {
    adv(p);
    adv(p);
    t->kind = TK_NE;
  } else if (c == '<') {
    adv(p);
    t->kind = TK_LT;
    if (peekc(p, 0) == '=') {
      adv(p);
      t->kind = TK_LE;
    } else if (peekc(p, 0) == '>') {
      adv(p);
      t->kind = TK_NE;
    }
  } else if (c == '>') {
    adv(p);
    t->kind = TK_GT;
    if (peekc(p, 0) == '=') {
      adv(p);
      t->kind = TK_GE;
    }
  } else if (c == '\'' || c == '"') {
    lex_string(p);
  } else if (c == '`') {
    adv(p);
    size_t start = p->pos;
    while (peekc(p, 0) != '`' && peekc(p, 0) != '\0') adv(p);
    if (peekc(p, 0) == '\0') {
      fail(p, SL_EPARSE, t->col, "unterminated quoted field name");
    } else if (p->pos == start) {
      fail(p, SL_EPARSE, t->col, "empty field name");
    } else {
      t->kind = TK_QIDENT;
      t->off = start;
      t->len = p->pos - start;
      adv(p);
      return;
    }
  } else if (is_digit(c)) {
    lex_number(p);
  } else if (is_ident_start(c)) {
    while (is_ident(peekc(p, 0))) adv(p);
    const char *s = p->text + t->off;
    size_t len = p->pos - t->off;
    static const struct {
      const char *word;
      enum tok_kind kind;
    } kw[] = {{"and", TK_AND},     {"or", TK_OR},     {"not", TK_NOT},
              {"true", TK_TRUE},   {"false", TK_FALSE}, {"null", TK_NULL},
              {"is", TK_IS}};
    t->kind = TK_IDENT;
    for (size_t i = 0; i < SL_ARRAY_LEN(kw); i++)
      if (word_is(s, len, kw[i].word)) t->kind = kw[i].kind;
  } else if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) {
    fail(p, SL_EPARSE, t->col, "unexpected character '%c'", c);
  } else {
    fail(p, SL_EPARSE, t->col, "unexpected byte 0x%02x",
         (unsigned)(unsigned char)c);
  }
  if (p->rc != SL_OK) {
    t->kind = TK_END;
    t->len = 0;
    return;
  }
  t->len = p->pos - t->off;
}

/* Describe the current token for "expected ..., got X" messages. */
const char *sl__expr_tok_desc(const parser_t *p, char *buf, size_t size) {
  if (p->tok.kind == TK_END) return "end of input";
  size_t len = p->tok.len;
  const char *s = p->text + p->tok.off;
  if (p->tok.kind == TK_QIDENT) {
    s--;
    len += 2;
  }
  if (len > 32)
    snprintf(buf, size, "'%.*s...'", 29, s);
  else
    snprintf(buf, size, "'%.*s'", (int)len, s);
  return buf;
}

