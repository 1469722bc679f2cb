/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pgoutput messages as one line of text per event, with every column
 * value converted to its sluice type and printed: what the PostgreSQL
 * tests compare with the values they wrote.  Shared by the server tests
 * (tests/integration/test_pgoutput.c) and the golden tests over their
 * captured streams (tests/unit/test_pgoutput.c).
 *
 *   B / C                       begin, commit
 *   I t (1,'a')                 insert into t
 *   U t K(..) N(..)             update, old key or whole old tuple (O)
 *   D t K(..)                   delete
 *   T opts=2 t_a,t_b            truncate (names sorted)
 *   M tx|plain prefix 'text'    logical message
 *   O name lsn-hex              origin
 *
 * Values: null, unchanged (a TOAST value the change left alone), 12,
 * true, d-123450/3 (a decimal's unscaled value and scale), f1.5,
 * ts<microseconds>, 'text', x'00ff'; a string over 100 bytes prints BIG
 * and is kept in *big.  Relation and Type messages print nothing.
 */
#ifndef SL_TEST_PGO_EVENTS_H
#define SL_TEST_PGO_EVENTS_H

#include <string.h>

#include "connectors/postgres/pgoutput_decode.h"
#include "sl_test.h"

static void pgo_fmt_datum(const sl_pgo_relation_t *rel, uint16_t i,
                          const sl_pgo_datum_t *dt, char **big,
                          sl_bytes_t *out) {
  if (dt->kind == SL_PGO_NULL) {
    SL_ASSERT_OK(sl_bytes_append_str(out, "null"));
    return;
  }
  if (dt->kind == SL_PGO_UNCHANGED) {
    SL_ASSERT_OK(sl_bytes_append_str(out, "unchanged"));
    return;
  }
  sl_type_t t;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgo_column_type(rel, i, &t, &err), err);
  sl_field_t fd = {"v", t};
  sl_schema_t *s = NULL;
  SL_ASSERT_OK(sl_schema_create(&fd, 1, &s, NULL));
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, s));
  sl_row_builder_reset(&b, SL_ROW_INSERT);
  SL_ASSERT_OK_E(sl__pgo_value(rel, i, dt, &b, 0, &err), err);
  sl_row_t row;
  SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
  sl_value_t v;
  sl_row_get_value(&row, 0, &v);
  SL_ASSERT_TRUE(!v.is_null);
  switch (v.type) {
  case SL_TYPE_BOOL:
    SL_ASSERT_OK(sl_bytes_append_str(out, v.u.b ? "true" : "false"));
    break;
  case SL_TYPE_INT32:
  case SL_TYPE_INT64:
    SL_ASSERT_OK(sl_bytes_printf(out, "%lld", (long long)v.u.i));
    break;
  case SL_TYPE_DECIMAL:
    SL_ASSERT_OK(sl_bytes_printf(out, "d%lld/%u", (long long)v.u.i, v.scale));
    break;
  case SL_TYPE_FLOAT64:
    SL_ASSERT_OK(sl_bytes_printf(out, "f%.17g", v.u.f));
    break;
  case SL_TYPE_TIMESTAMP:
    SL_ASSERT_OK(sl_bytes_printf(out, "ts%lld", (long long)v.u.i));
    break;
  case SL_TYPE_STRING:
    if (v.u.s.len > 100) {
      sl_free(*big);
      *big = sl_malloc(v.u.s.len + 1);
      SL_ASSERT_TRUE(*big != NULL);
      memcpy(*big, v.u.s.ptr, v.u.s.len);
      (*big)[v.u.s.len] = 0;
      SL_ASSERT_OK(sl_bytes_append_str(out, "BIG"));
    } else {
      SL_ASSERT_OK(
          sl_bytes_printf(out, "'%.*s'", (int)v.u.s.len, v.u.s.ptr));
    }
    break;
  case SL_TYPE_BYTES:
    SL_ASSERT_OK(sl_bytes_append_str(out, "x'"));
    for (uint32_t k = 0; k < v.u.s.len; k++)
      SL_ASSERT_OK(sl_bytes_printf(out, "%02x", v.u.s.ptr[k]));
    SL_ASSERT_OK(sl_bytes_append_str(out, "'"));
    break;
  }
  sl_row_builder_close(&b);
  sl_schema_unref(s);
}

static void pgo_fmt_tuple(const sl_pgo_relation_t *rel,
                          const sl_pgo_tuple_t *t, char **big,
                          sl_bytes_t *out) {
  SL_ASSERT_OK(sl_bytes_append_str(out, "("));
  for (uint16_t i = 0; i < t->n_cols; i++) {
    if (i) SL_ASSERT_OK(sl_bytes_append_str(out, ","));
    pgo_fmt_datum(rel, i, &t->cols[i], big, out);
  }
  SL_ASSERT_OK(sl_bytes_append_str(out, ")"));
}

/* Append m's line to e; checks that changes, truncates and
 * transactional messages come inside a transaction, and that
 * transactions do not nest. */
static void pgo_event(const sl_pgo_decoder_t *d, const sl_pgo_msg_t *m,
                      bool *in_tx, char **big, sl_bytes_t *e) {
  switch (m->type) {
  case 'B':
    SL_ASSERT_TRUE(!*in_tx);
    *in_tx = true;
    SL_ASSERT_OK(sl_bytes_append_str(e, "B\n"));
    break;
  case 'C':
    SL_ASSERT_TRUE(*in_tx);
    *in_tx = false;
    SL_ASSERT_OK(sl_bytes_append_str(e, "C\n"));
    break;
  case 'R':
  case 'Y':
    break;
  case 'I':
  case 'U':
  case 'D': {
    SL_ASSERT_TRUE(*in_tx);
    const sl_pgo_relation_t *rel = m->u.change.rel;
    SL_ASSERT_OK(sl_bytes_printf(e, "%c %s ", m->type, rel->relname));
    if (m->u.change.old_kind) {
      SL_ASSERT_OK(sl_bytes_printf(e, "%c", m->u.change.old_kind));
      pgo_fmt_tuple(rel, &m->u.change.old, big, e);
    }
    if (m->type != 'D') {
      if (m->type == 'U') SL_ASSERT_OK(sl_bytes_append_str(e, " N"));
      pgo_fmt_tuple(rel, &m->u.change.new_, big, e);
    }
    SL_ASSERT_OK(sl_bytes_append_str(e, "\n"));
    break;
  }
  case 'T': {
    SL_ASSERT_TRUE(*in_tx);
    SL_ASSERT_OK(sl_bytes_printf(e, "T opts=%u", m->u.truncate.options));
    /* By name, sorted, so that the server's order does not matter. */
    const char *names[8];
    uint32_t n = m->u.truncate.n_rels;
    SL_ASSERT_TRUE(n <= 8);
    for (uint32_t i = 0; i < n; i++) {
      const sl_pgo_relation_t *rel =
          sl__pgo_relation(d, m->u.truncate.rel_oids[i]);
      SL_ASSERT_TRUE(rel != NULL);
      names[i] = rel->relname;
      for (uint32_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0;
           j--) {
        const char *x = names[j];
        names[j] = names[j - 1];
        names[j - 1] = x;
      }
    }
    for (uint32_t i = 0; i < n; i++)
      SL_ASSERT_OK(sl_bytes_printf(e, "%s%s", i ? "," : " ", names[i]));
    SL_ASSERT_OK(sl_bytes_append_str(e, "\n"));
    break;
  }
  case 'O':
    SL_ASSERT_TRUE(*in_tx);
    SL_ASSERT_OK(sl_bytes_printf(e, "O %s %llx\n", m->u.origin.name,
                                 (unsigned long long)m->u.origin.lsn));
    break;
  case 'M':
    SL_ASSERT_EQ_INT(m->u.message.is_transactional, *in_tx);
    SL_ASSERT_OK(sl_bytes_printf(
        e, "M %s %s '%.*s'\n", *in_tx ? "tx" : "plain", m->u.message.prefix,
        (int)m->u.message.len, (const char *)m->u.message.content));
    break;
  default:
    SL_TEST_FAIL("unexpected pgoutput message '%c'", m->type);
  }
}

/* ---- What the tests wrote (test_pgoutput.c in tests/integration) ---- */

/* 0044-03-15 BC at midnight UTC, in microseconds since 1970: 44 years of
 * 365 days and 11 leap days before 0001-03-15, which is 719162 - 73 days
 * (the days of January and February) before 1970-01-01. */
#define PGO_BC_US "-63517824000000000"

/* 1.5 and -2.25e-300 printed "%.17g". */
#define PGO_F4 "f1.5"
#define PGO_F8 "f-2.25e-300"

#define PGO_TYPES_EVENTS                                                  \
  "B\n"                                                                   \
  "I t_types (1,true,-32768,2147483647,-9223372036854775808," PGO_F4 ","  \
  PGO_F8                                                                  \
  ",d-123456789125/3,'3.14159265358979323846264338327950288',"            \
  "'h\xc3\xa9llo \xe2\x9c\x93','varchar','ab   ',x'00ff41',"              \
  "ts1709164800000000,ts1709212455123456,ts1709192655500000,"             \
  "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11','{\"a\": [1, 2]}',"             \
  "'{\"a\": 1, \"b\": {\"c\": null}}')\n"                                 \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "I t_types (2,null,null,null,null,null,null,null,null,null,null,"       \
  "null,null,null,null,null,null,null,null)\n"                            \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "I t_types (3,null,null,null,null,null,null,null,null,null,null,"       \
  "null,null,ts" PGO_BC_US ",ts-1,ts0,null,null,null)\n"                  \
  "C\n"

#define PGO_CHANGES_EVENTS                                                \
  "B\n"                                                                   \
  "I t_toast (1,BIG,1)\n"                                                 \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "I t_toast (2,null,1)\n"                                                \
  "C\n"                                                                   \
  "B\n"                                                                   \
  /* The TOAST value the update did not touch: unchanged, not null; the   \
   * null one stays null. */                                              \
  "U t_toast  N(1,unchanged,2)\n"                                         \
  "U t_toast  N(2,null,2)\n"                                              \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "I t_key (1,'a')\n"                                                     \
  "I t_key (2,'b')\n"                                                     \
  "I t_full (1,'x')\n"                                                    \
  "U t_full O(1,'x') N(1,'y')\n"                                          \
  "U t_key K(2,null) N(3,'b')\n"                                          \
  "U t_key  N(3,'c')\n"                                                   \
  "D t_key K(1,null)\n"                                                   \
  "D t_full O(1,'y')\n"                                                   \
  "M tx sluice 'in-tx'\n"                                                 \
  "C\n"                                                                   \
  "M plain sluice_hb 'hb'\n"                                              \
  "B\n"                                                                   \
  "T opts=2 t_full,t_key\n"                                               \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "I t_ftoast (1,BIG,2)\n"                                                \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "U t_ftoast O(1,BIG,2) N(1,unchanged,3)\n"                              \
  "C\n"                                                                   \
  "B\n"                                                                   \
  "O upstream 12345678\n"                                                 \
  "I t_key (9,'o')\n"                                                     \
  "C\n"

#endif
