/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which tables a statement of a binlog QUERY event changes the definition
 * of: the change stream (cdc_stream.c) stops when one of them is
 * captured.  A small tokenizer (comments, executable comments, quoted
 * identifiers and strings) and the leading keywords of the statements
 * that change a table: ALTER TABLE, DROP TABLE, DROP DATABASE, RENAME
 * TABLE, TRUNCATE, CREATE TABLE, CREATE INDEX and DROP INDEX.  Everything
 * else is not a change of a table's rows or columns and gives no target.
 * The parse is conservative: a statement it cannot follow after its
 * leading keywords names every table (a NULL db and table).  See
 * cdc_stream.h and docs/cdc-mariadb.md "Change stream".
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "connectors/mariadb/cdc_stream.h"

enum { TK_END, TK_WORD, TK_QIDENT, TK_STRING, TK_DOT, TK_COMMA, TK_OTHER };

typedef struct {
  const char *p;
  size_t n, i;
} lex_t;

typedef struct {
  int kind;
  const char *p; /* the token's text (TK_QIDENT: inside the quotes) */
  size_t n;
  char q; /* TK_QIDENT's quote */
} tok_t;

static bool is_word(unsigned char c) {
  return isalnum(c) || c == '_' || c == '$' || c >= 0x80;
}

/* Skips blanks and comments.  An executable comment (slash-star-bang
 * digits, or MariaDB's M-bang) is code: its marker is skipped and its
 * text read; its closing star-slash is skipped where met. */
static void skip_blank(lex_t *lx) {
  for (;;) {
    while (lx->i < lx->n && isspace((unsigned char)lx->p[lx->i])) lx->i++;
    if (lx->i + 1 < lx->n && lx->p[lx->i] == '/' && lx->p[lx->i + 1] == '*') {
      size_t j = lx->i + 2;
      if (j < lx->n && lx->p[j] == 'M') j++;
      if (j < lx->n && lx->p[j] == '!') {
        j++;
        while (j < lx->n && isdigit((unsigned char)lx->p[j])) j++;
        lx->i = j;
        continue;
      }
      const char *e = NULL;
      for (size_t k = lx->i + 2; k + 1 < lx->n; k++)
        if (lx->p[k] == '*' && lx->p[k + 1] == '/') {
          e = lx->p + k;
          break;
        }
      lx->i = e ? (size_t)(e - lx->p) + 2 : lx->n;
      continue;
    }
    if (lx->i + 1 < lx->n && lx->p[lx->i] == '*' && lx->p[lx->i + 1] == '/') {
      lx->i += 2; /* the end of an executable comment */
      continue;
    }
    if (lx->i < lx->n &&
        (lx->p[lx->i] == '#' ||
         (lx->i + 2 < lx->n && lx->p[lx->i] == '-' && lx->p[lx->i + 1] == '-' &&
          isspace((unsigned char)lx->p[lx->i + 2])))) {
      while (lx->i < lx->n && lx->p[lx->i] != '\n') lx->i++;
      continue;
    }
    return;
  }
}

static tok_t next_tok(lex_t *lx) {
  skip_blank(lx);
  tok_t t = {TK_END, lx->p + lx->i, 0, 0};
  if (lx->i >= lx->n) return t;
  char c = lx->p[lx->i];
  if (c == '`' || c == '"' || c == '\'') {
    /* A doubled quote is the quote itself; a backslash escapes in
     * strings (and in "..." when it is a string: harmless either way). */
    size_t j = lx->i + 1;
    while (j < lx->n) {
      if (lx->p[j] == '\\' && c != '`' && j + 1 < lx->n) {
        j += 2;
        continue;
      }
      if (lx->p[j] == c) {
        if (j + 1 < lx->n && lx->p[j + 1] == c) {
          j += 2;
          continue;
        }
        break;
      }
      j++;
    }
    /* "..." is an identifier under ANSI_QUOTES: taken as one (a table
     * named by it is checked, conservatively). */
    t.kind = c == '\'' ? TK_STRING : TK_QIDENT;
    t.q = c;
    t.p = lx->p + lx->i + 1;
    t.n = (j < lx->n ? j : lx->n) - lx->i - 1;
    lx->i = j < lx->n ? j + 1 : lx->n;
    return t;
  }
  if (is_word((unsigned char)c)) {
    size_t j = lx->i;
    while (j < lx->n && is_word((unsigned char)lx->p[j])) j++;
    t.kind = TK_WORD;
    t.n = j - lx->i;
    lx->i = j;
    return t;
  }
  t.kind = c == '.' ? TK_DOT : c == ',' ? TK_COMMA : TK_OTHER;
  t.n = 1;
  lx->i++;
  return t;
}

static tok_t peek_tok(lex_t *lx) {
  lex_t c = *lx;
  return next_tok(&c);
}

static bool kw(const tok_t *t, const char *w) {
  return t->kind == TK_WORD && t->n == strlen(w) &&
         strncasecmp(t->p, w, t->n) == 0;
}

/* Consumes the next token when it is keyword w. */
static bool accept(lex_t *lx, const char *w) {
  tok_t t = peek_tok(lx);
  if (!kw(&t, w)) return false;
  (void)next_tok(lx);
  return true;
}

static bool is_ident(const tok_t *t) {
  return t->kind == TK_WORD || t->kind == TK_QIDENT;
}

/* The identifier's name (quotes undone) into buf. */
static void ident_text(const tok_t *t, char *buf, size_t size) {
  size_t o = 0;
  for (size_t i = 0; i < t->n && o + 1 < size; i++) {
    buf[o++] = t->p[i];
    if (t->kind == TK_QIDENT && t->p[i] == t->q && i + 1 < t->n &&
        t->p[i + 1] == t->q)
      i++;
  }
  buf[o] = '\0';
}

typedef struct {
  sl__cdc_ddl_fn fn;
  void *ctx;
  const char *default_db;
  int stop; /* the callback's non-zero answer */
} walk_t;

static bool emit(walk_t *w, const char *db, const char *table) {
  if (w->stop) return false;
  w->stop = w->fn(w->ctx, db, table);
  return w->stop == 0;
}

/* A name [db.]table: emitted; false when no name is there (the caller
 * then names everything). */
static bool table_name(lex_t *lx, walk_t *w) {
  tok_t a = next_tok(lx);
  if (!is_ident(&a)) return false;
  char db[256], tb[256];
  ident_text(&a, tb, sizeof(tb));
  tok_t d = peek_tok(lx);
  if (d.kind == TK_DOT) {
    (void)next_tok(lx);
    tok_t b = next_tok(lx);
    if (!is_ident(&b)) return false;
    snprintf(db, sizeof(db), "%s", tb);
    ident_text(&b, tb, sizeof(tb));
  } else {
    snprintf(db, sizeof(db), "%s", w->default_db ? w->default_db : "");
  }
  emit(w, db, tb);
  return true;
}

static void everything(walk_t *w) { emit(w, NULL, NULL); }

/* [IF [NOT] EXISTS] */
static void if_exists(lex_t *lx) {
  lex_t save = *lx;
  if (accept(lx, "IF")) {
    (void)accept(lx, "NOT");
    if (!accept(lx, "EXISTS")) *lx = save;
  }
}

/* Skips to the keyword ON (CREATE/DROP INDEX ... ON table); false at the
 * end. */
static bool skip_to_on(lex_t *lx) {
  for (;;) {
    tok_t t = next_tok(lx);
    if (t.kind == TK_END) return false;
    if (kw(&t, "ON")) return true;
  }
}

int sl__cdc_ddl_targets(const char *sql, size_t len, const char *default_db,
                        sl__cdc_ddl_fn fn, void *ctx) {
  lex_t lx = {sql, len, 0};
  walk_t w = {fn, ctx, default_db, 0};
  tok_t t = next_tok(&lx);
  if (kw(&t, "ALTER")) {
    (void)accept(&lx, "ONLINE");
    (void)accept(&lx, "IGNORE");
    if (accept(&lx, "TABLE")) {
      if_exists(&lx);
      if (!table_name(&lx, &w)) everything(&w);
    }
    /* ALTER DATABASE (defaults only), VIEW, USER, EVENT, SEQUENCE ...:
     * no captured table's rows or columns. */
  } else if (kw(&t, "DROP")) {
    if (accept(&lx, "TEMPORARY")) return w.stop; /* a temporary table */
    if (accept(&lx, "TABLE") || accept(&lx, "TABLES")) {
      if_exists(&lx);
      do {
        if (!table_name(&lx, &w)) {
          everything(&w);
          break;
        }
      } while (next_tok(&lx).kind == TK_COMMA);
    } else if (accept(&lx, "DATABASE") || accept(&lx, "SCHEMA")) {
      if_exists(&lx);
      tok_t d = next_tok(&lx);
      if (!is_ident(&d)) {
        everything(&w);
      } else {
        char db[256];
        ident_text(&d, db, sizeof(db));
        emit(&w, db, NULL);
      }
    } else if (accept(&lx, "INDEX")) {
      if (!skip_to_on(&lx) || !table_name(&lx, &w)) everything(&w);
    }
  } else if (kw(&t, "RENAME")) {
    if (accept(&lx, "TABLE") || accept(&lx, "TABLES")) {
      if_exists(&lx);
      for (;;) {
        if (!table_name(&lx, &w)) {
          everything(&w);
          break;
        }
        if (accept(&lx, "NOWAIT")) {
        } else if (accept(&lx, "WAIT")) {
          (void)next_tok(&lx);
        }
        if (!accept(&lx, "TO") || !table_name(&lx, &w)) {
          everything(&w);
          break;
        }
        if (next_tok(&lx).kind != TK_COMMA) break;
      }
    }
  } else if (kw(&t, "TRUNCATE")) {
    (void)accept(&lx, "TABLE");
    if (!table_name(&lx, &w)) everything(&w);
  } else if (kw(&t, "CREATE")) {
    if (accept(&lx, "OR") && !accept(&lx, "REPLACE")) {
      everything(&w);
      return w.stop;
    }
    if (accept(&lx, "TEMPORARY")) return w.stop;
    while (accept(&lx, "UNIQUE") || accept(&lx, "FULLTEXT") ||
           accept(&lx, "SPATIAL") || accept(&lx, "ONLINE") ||
           accept(&lx, "OFFLINE")) {
    }
    if (accept(&lx, "TABLE")) {
      if_exists(&lx);
      if (!table_name(&lx, &w)) everything(&w);
    } else if (accept(&lx, "INDEX")) {
      if (!skip_to_on(&lx) || !table_name(&lx, &w)) everything(&w);
    }
  }
  return w.stop;
}
