/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sharded tables into one output: every table captured into one output
 * must have the same columns (names, sluice types with their nullability,
 * order), the same primary key and the same chunk key.  See cdc_int.h and docs/cdc-mariadb.md,
 * "Sharded tables".
 */
#include <stdio.h>
#include <string.h>

#include "cdc_int.h"

#define WHY "tables captured into one output need the same columns, in the " \
            "same order, with the same types, and the same primary and " \
            "chunk keys"

static void type_text(const sl__cdc_col_t *c, char *out, size_t size) {
  char t[64];
  sl_type_format(c->type, t, sizeof(t));
  snprintf(out, size, "%s (%s%s)", c->column_type, t,
           c->type.nullable ? ", nullable" : ", not null");
}

static void pk_text(const sl__cdc_table_t *t, char *out, size_t size) {
  size_t at = 0;
  if (t->n_pk == 0) {
    snprintf(out, size, "none");
    return;
  }
  out[0] = '\0';
  for (uint32_t k = 0; k < t->n_pk && at + 1 < size; k++) {
    int w = snprintf(out + at, size - at, "%s`%s`", k ? ", " : "(",
                     t->cols[t->pk[k]].name);
    if (w < 0) break;
    at += (size_t)w;
  }
  if (at + 1 < size) snprintf(out + at, size - at, ")");
}

/* "the primary key (`id`)" or "the declared chunk key `c`". */
static void key_text(const sl__cdc_table_t *t, char *out, size_t size) {
  if (!t->is_declared_key) {
    char pk[256];
    pk_text(t, pk, sizeof(pk));
    snprintf(out, size, "the primary key %s", pk);
    return;
  }
  snprintf(out, size, "the declared chunk key `%s`",
           t->n_key ? t->cols[t->key[0]].name : "?");
}

static int differ(const sl__cdc_table_t *a, const sl__cdc_table_t *b,
                  const char *server, const char *how,
                  sl_error_t **out_err) {
  return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: tables `%s`.`%s` and "
                      "`%s`.`%s` at %s go into one output but differ: %s; "
                      WHY, a->db, a->name, b->db, b->name, server, how);
}

int sl__cdc_tables_agree(sl__cdc_table_t *const *t, uint32_t n,
                         const char *server, sl_error_t **out_err) {
  char how[1024];
  for (uint32_t i = 1; i < n; i++) {
    const sl__cdc_table_t *a = t[0], *b = t[i];
    if (a->n_cols != b->n_cols) {
      snprintf(how, sizeof(how), "%u columns against %u", a->n_cols,
               b->n_cols);
      return differ(a, b, server, how, out_err);
    }
    for (uint32_t c = 0; c < a->n_cols; c++) {
      const sl__cdc_col_t *x = &a->cols[c], *y = &b->cols[c];
      if (strcmp(x->name, y->name) != 0) {
        snprintf(how, sizeof(how), "column %u is `%s` against `%s`", c + 1,
                 x->name, y->name);
        return differ(a, b, server, how, out_err);
      }
      sl_type_t p = x->type, q = y->type;
      bool is_dec = p.id == SL_TYPE_DECIMAL;
      if (p.id != q.id || p.nullable != q.nullable ||
          (is_dec && (p.precision != q.precision || p.scale != q.scale))) {
        char tx[128], ty[128];
        type_text(x, tx, sizeof(tx));
        type_text(y, ty, sizeof(ty));
        snprintf(how, sizeof(how), "column `%s` is %s against %s", x->name,
                 tx, ty);
        return differ(a, b, server, how, out_err);
      }
    }
    bool same_pk = a->n_pk == b->n_pk;
    for (uint32_t k = 0; same_pk && k < a->n_pk; k++)
      same_pk = a->pk[k] == b->pk[k];
    if (!same_pk) {
      char pa[256], pb[256];
      pk_text(a, pa, sizeof(pa));
      pk_text(b, pb, sizeof(pb));
      snprintf(how, sizeof(how), "the primary key is %s against %s", pa, pb);
      return differ(a, b, server, how, out_err);
    }
    /* One output has one shape: a version field exists when the tables
     * are chunked by a declared key, so the chunk keys must agree too. */
    bool same_key = a->is_declared_key == b->is_declared_key &&
                    a->n_key == b->n_key;
    for (uint32_t k = 0; same_key && k < a->n_key; k++)
      same_key = a->key[k] == b->key[k];
    if (!same_key) {
      char ka[300], kb[300];
      key_text(a, ka, sizeof(ka));
      key_text(b, kb, sizeof(kb));
      snprintf(how, sizeof(how), "the chunk key is %s against %s", ka, kb);
      return differ(a, b, server, how, out_err);
    }
  }
  return SL_OK;
}
