/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres-cdc source's snapshot half (src/connectors/postgres/
 * pg_cdc_snap.c) against a real PostgreSQL 15 started by each test: the
 * session, the start checks and their messages, table patterns and
 * descriptions, the publication, chunk planning (every row of the table
 * in exactly one chunk by the server's own WHERE, and sl__pgc_chunk_find
 * agreeing with the server for every row), the chunk reader (values
 * compared with what the server computes from a direct SELECT) and the
 * exact snapshot of a chunk (a transaction open at the snapshot is in xip
 * and invisible, one committed before is visible, HIGH is past the commit
 * records of the visible ones: read from a pgoutput slot).
 */
#include <pthread.h>

#include "connectors/postgres/pg_cdc_int.h"
#include "core/inject.h"
#include "pg_fx.h"

/* ------------------------------------------------------------------ */
/* Fixture. */

typedef struct sfx_s {
  sl_server_t *srv;
  PGconn *admin; /* superuser, for setting up and for expectations */
  PGconn *c;     /* sluice's session (sl__pgc_connect) */
  char server[128];
  char want_server[64];
} sfx_t;

static void sfx_open_with(sfx_t *f, const char *const *settings) {
  memset(f, 0, sizeof(*f));
  f->srv = start_pg(0, settings);
  f->admin = direct(f->srv);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_connect(sl_server_conninfo(f->srv), 5000, &f->c,
                                 f->server, &err),
                 err);
  snprintf(f->want_server, sizeof(f->want_server), "127.0.0.1:%d",
           sl_server_port(f->srv));
  SL_ASSERT_EQ_STR(f->server, f->want_server);
}

static void sfx_open(sfx_t *f) { sfx_open_with(f, NULL); }

static void sfx_close(sfx_t *f) {
  PQfinish(f->c);
  PQfinish(f->admin);
  sl_server_destroy(f->srv);
}

/* A session of another role (trust authentication). */
static PGconn *connect_as(sfx_t *f, const char *user, char *server) {
  char ci[512];
  snprintf(ci, sizeof(ci), "%s user=%s", sl_server_conninfo(f->srv), user);
  PGconn *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_connect(ci, 0, &c, server, &err), err);
  return c;
}

/* The message of a failed call, compared whole. */
static void want_msg(int rc, int want_rc, sl_error_t **errp,
                     const char *want) {
  sl_error_t *err = *errp;
  *errp = NULL;
  if (rc != want_rc)
    SL_TEST_FAIL("rc %s, want %s (%s)", sl_errname(rc), sl_errname(want_rc),
                 err ? sl_error_message(err) : "no message");
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_STR(sl_error_message(err), want);
  sl_error_destroy(err);
}

/* The message of a failed call contains every one of want[]. */
static void want_parts(int rc, int want_rc, sl_error_t **errp,
                       const char *const *want) {
  sl_error_t *err = *errp;
  *errp = NULL;
  if (rc != want_rc)
    SL_TEST_FAIL("rc %s, want %s (%s)", sl_errname(rc), sl_errname(want_rc),
                 err ? sl_error_message(err) : "no message");
  SL_ASSERT_TRUE(err != NULL);
  for (const char *const *w = want; *w; w++)
    if (strstr(sl_error_message(err), *w) == NULL)
      SL_TEST_FAIL("message '%s' lacks '%s'", sl_error_message(err), *w);
  sl_error_destroy(err);
}

static sl__pgc_table_t *describe(sfx_t *f, const char *schema,
                                 const char *table) {
  sl__pgc_table_t *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_table_describe(f->c, f->server, schema, table, &t,
                                        &err),
                 err);
  return t;
}

/* ------------------------------------------------------------------ */
/* The session and the start checks. */

SL_TEST(connect) {
  sfx_t f;
  sfx_open(&f);
  assert_text(f.c, "SHOW DateStyle", "ISO, MDY");
  assert_text(f.c, "SHOW TimeZone", "UTC");
  assert_text(f.c, "SHOW IntervalStyle", "postgres");
  assert_text(f.c, "SHOW extra_float_digits", "3");
  assert_text(f.c, "SHOW bytea_output", "hex");
  assert_text(f.c, "SHOW synchronous_commit", "local");
  assert_text(f.c, "SHOW client_encoding", "UTF8");
  /* Nobody listens on port 1. */
  PGconn *c = NULL;
  char server[128];
  sl_error_t *err = NULL;
  int rc = sl__pgc_connect("host=127.0.0.1 port=1 dbname=postgres", 2000, &c,
                           server, &err);
  const char *const parts[] = {"postgres-cdc: cannot connect to 127.0.0.1:1: ",
                               "refused", NULL};
  want_parts(rc, SL_EIO, &err, parts);
  SL_ASSERT_TRUE(c == NULL);
  sfx_close(&f);
}

SL_TEST(check_server) {
  sfx_t f;
  sfx_open(&f);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_check_server(f.c, f.server, true, &err), err);
  /* A role without REPLICATION. */
  sql_ok(f.admin, "CREATE ROLE plain LOGIN");
  char server[128];
  PGconn *p = connect_as(&f, "plain", server);
  char want[512];
  snprintf(want, sizeof(want),
           "postgres-cdc: %s: user 'plain' has no REPLICATION privilege "
           "(logical replication needs it): run ALTER ROLE plain REPLICATION",
           f.want_server);
  want_msg(sl__pgc_check_server(p, server, false, &err), SL_EINVAL, &err, want);
  sql_ok(f.admin, "ALTER ROLE plain REPLICATION");
  SL_ASSERT_OK_E(sl__pgc_check_server(p, server, true, &err), err);
  PQfinish(p);
  /* No free slot: the server allows 10. */
  for (int i = 0; i < 10; i++) {
    char q[128];
    snprintf(q, sizeof(q),
             "SELECT pg_create_physical_replication_slot('s%d')", i);
    sql_ok(f.admin, q);
  }
  SL_ASSERT_OK_E(sl__pgc_check_server(f.c, f.server, false, &err), err);
  snprintf(want, sizeof(want),
           "postgres-cdc: %s: no free replication slot (max_replication_slots "
           "is 10 and 10 slots exist): drop an unused slot with "
           "pg_drop_replication_slot() or raise max_replication_slots and "
           "restart the server", f.want_server);
  want_msg(sl__pgc_check_server(f.c, f.server, true, &err), SL_EINVAL, &err,
           want);
  sfx_close(&f);
}

SL_TEST(wal_level) {
  static const char *const replica[] = {"wal_level=replica", NULL};
  sfx_t f;
  sfx_open_with(&f, replica);
  char want[256];
  snprintf(want, sizeof(want),
           "postgres-cdc: %s: wal_level is 'replica': set wal_level = "
           "logical and restart the server", f.want_server);
  sl_error_t *err = NULL;
  want_msg(sl__pgc_check_server(f.c, f.server, false, &err), SL_EINVAL, &err,
           want);
  sfx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Tables. */

SL_TEST(resolve) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin, "CREATE SCHEMA shop; CREATE SCHEMA \"Mixed\";"
                  "CREATE TABLE shop.b (id int PRIMARY KEY);"
                  "CREATE TABLE shop.a (id int PRIMARY KEY);"
                  "CREATE VIEW shop.v AS SELECT 1 AS x;"
                  "CREATE UNLOGGED TABLE shop.u (id int PRIMARY KEY);"
                  "CREATE TABLE public.order_items (id int PRIMARY KEY);"
                  "CREATE TABLE public.orderxitems (id int PRIMARY KEY);"
                  "CREATE TABLE public.orders (id int PRIMARY KEY);"
                  "CREATE TABLE \"Mixed\".\"Case%\" (id int PRIMARY KEY);"
                  "CREATE TABLE \"Mixed\".\"Casex\" (id int PRIMARY KEY);");
  const char *pats[] = {"shop.*", "public.order_items", "public.order?items",
                        "shop.a", "Mixed.Case%"};
  sl__pgc_table_name_t *names = NULL;
  uint32_t n = 0;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_resolve_tables(f.c, f.server, pats, 5, &names, &n,
                                        &err),
                 err);
  const char *want[] = {"Mixed.Case%", "public.order_items",
                        "public.orderxitems", "shop.a", "shop.b"};
  SL_ASSERT_EQ_INT(n, 5);
  for (uint32_t i = 0; i < n; i++) {
    char got[128];
    snprintf(got, sizeof(got), "%s.%s", names[i].schema, names[i].table);
    SL_ASSERT_EQ_STR(got, want[i]);
  }
  sl__pgc_table_names_free(names, n);

  /* _ is literal: public.orderxitems is not public.order_items. */
  const char *p0[] = {"public.order_items"};
  SL_ASSERT_OK_E(sl__pgc_resolve_tables(f.c, f.server, p0, 1, &names, &n,
                                        &err),
                 err);
  SL_ASSERT_EQ_INT(n, 1);
  SL_ASSERT_EQ_STR(names[0].table, "order_items");
  sl__pgc_table_names_free(names, n);

  const char *p1[] = {"shop.a", "public.order%"}; /* % is literal */
  char msg[256];
  snprintf(msg, sizeof(msg),
           "postgres-cdc: table pattern 'public.order%%' matches no table at "
           "%s (ordinary tables only; or the user cannot see it)",
           f.want_server);
  want_msg(sl__pgc_resolve_tables(f.c, f.server, p1, 2, &names, &n, &err),
           SL_EINVAL, &err, msg);
  const char *p2[] = {"shop.u"}; /* unlogged tables are not decoded */
  snprintf(msg, sizeof(msg),
           "postgres-cdc: table pattern 'shop.u' matches no table at %s "
           "(ordinary tables only; or the user cannot see it)",
           f.want_server);
  want_msg(sl__pgc_resolve_tables(f.c, f.server, p2, 1, &names, &n, &err),
           SL_EINVAL, &err, msg);
  const char *p3[] = {"orders"};
  snprintf(msg, sizeof(msg),
           "postgres-cdc: table pattern 'orders' for %s is not "
           "<schema>.<table> (`*` and `?` match within a part, e.g. public.* "
           "or public.order_?)", f.want_server);
  want_msg(sl__pgc_resolve_tables(f.c, f.server, p3, 1, &names, &n, &err),
           SL_EINVAL, &err, msg);
  sfx_close(&f);
}

SL_TEST(describe) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin,
         "CREATE TABLE public.wide (gone int, a int8 NOT NULL, "
         "b varchar(20) NOT NULL, flag bool, n numeric(10,2), big numeric, "
         "f float8, s int2, i int4, ts timestamptz, t timestamp, d date, "
         "u uuid, j jsonb, raw bytea, g int8 GENERATED ALWAYS AS (a * 2) "
         "STORED, PRIMARY KEY (b, a));"
         "ALTER TABLE public.wide DROP COLUMN gone");
  sl__pgc_table_t *t = describe(&f, "public", "wide");
  static const struct {
    const char *name;
    uint32_t oid;
    sl_type_id_t type;
    bool nullable;
  } want[] = {{"a", SL_PG_OID_INT8, SL_TYPE_INT64, false},
              {"b", SL_PG_OID_VARCHAR, SL_TYPE_STRING, false},
              {"flag", SL_PG_OID_BOOL, SL_TYPE_BOOL, true},
              {"n", SL_PG_OID_NUMERIC, SL_TYPE_DECIMAL, true},
              {"big", SL_PG_OID_NUMERIC, SL_TYPE_STRING, true},
              {"f", SL_PG_OID_FLOAT8, SL_TYPE_FLOAT64, true},
              {"s", SL_PG_OID_INT2, SL_TYPE_INT32, true},
              {"i", SL_PG_OID_INT4, SL_TYPE_INT32, true},
              {"ts", SL_PG_OID_TIMESTAMPTZ, SL_TYPE_TIMESTAMP, true},
              {"t", SL_PG_OID_TIMESTAMP, SL_TYPE_TIMESTAMP, true},
              {"d", SL_PG_OID_DATE, SL_TYPE_TIMESTAMP, true},
              {"u", SL_PG_OID_UUID, SL_TYPE_STRING, true},
              {"j", SL_PG_OID_JSONB, SL_TYPE_STRING, true},
              {"raw", SL_PG_OID_BYTEA, SL_TYPE_BYTES, true}};
  const uint32_t nw = sizeof(want) / sizeof(want[0]);
  SL_ASSERT_EQ_INT(t->n_cols, nw); /* dropped and generated left out */
  SL_ASSERT_EQ_INT(t->rel.n_cols, nw);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(t->schema_), nw);
  SL_ASSERT_EQ_STR(t->schema, "public");
  SL_ASSERT_EQ_STR(t->name, "wide");
  SL_ASSERT_EQ_STR(t->rel.nspname, "public");
  SL_ASSERT_EQ_STR(t->rel.relname, "wide");
  SL_ASSERT_EQ_INT(t->oid, sql_int(f.admin, "SELECT 'public.wide'::regclass"
                                            "::oid::int8"));
  SL_ASSERT_EQ_INT(t->rel.oid, t->oid);
  SL_ASSERT_EQ_INT(t->replident, 'd');
  for (uint32_t i = 0; i < nw; i++) {
    const sl_field_t *fd = sl_schema_field(t->schema_, i);
    SL_ASSERT_EQ_STR(fd->name, want[i].name);
    SL_ASSERT_EQ_STR(t->rel.cols[i].name, want[i].name);
    SL_ASSERT_EQ_INT(t->rel.cols[i].type_oid, want[i].oid);
    SL_ASSERT_EQ_INT(fd->type.id, want[i].type);
    SL_ASSERT_EQ_INT(fd->type.nullable, want[i].nullable);
    SL_ASSERT_EQ_INT(t->rel.cols[i].flags, i <= 1 ? SL_PGO_COL_KEY : 0);
  }
  SL_ASSERT_EQ_INT(sl_schema_field(t->schema_, 3)->type.precision, 10);
  SL_ASSERT_EQ_INT(sl_schema_field(t->schema_, 3)->type.scale, 2);
  SL_ASSERT_EQ_INT(t->rel.cols[3].type_mod,
                   sql_int(f.admin, "SELECT atttypmod FROM pg_attribute "
                                    "WHERE attrelid = 'public.wide'::regclass "
                                    "AND attname = 'n'"));
  SL_ASSERT_EQ_INT(t->rel.cols[0].type_mod, -1);
  /* The key in its own order: (b, a). */
  SL_ASSERT_EQ_INT(t->n_pk, 2);
  SL_ASSERT_EQ_INT(t->pk[0], 1);
  SL_ASSERT_EQ_INT(t->pk[1], 0);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_PGC_KEY_TEXT);
  SL_ASSERT_EQ_INT(t->key_kind[1], SL_PGC_KEY_INT);
  sl__pgc_table_destroy(t);

  /* Refusals. */
  sql_ok(f.admin, "CREATE TABLE public.nopk (a int, b text);"
                  "CREATE TABLE public.numpk (k numeric PRIMARY KEY);"
                  "CREATE TABLE public.datepk (x int, d date, "
                  "PRIMARY KEY (x, d));"
                  "CREATE TABLE public.pt (id int PRIMARY KEY, p point);"
                  "CREATE TABLE \"Odd\" (\"Key\" uuid PRIMARY KEY)");
  sl_error_t *err = NULL;
  char msg[512];
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: table public.nopk has no primary key: sluice "
           "needs one to cut the snapshot into chunks and to match changes "
           "to rows; add one (ALTER TABLE public.nopk ADD PRIMARY KEY (...))",
           f.want_server);
  want_msg(sl__pgc_table_describe(f.c, f.server, "public", "nopk", &t, &err),
           SL_EINVAL, &err, msg);
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: table public.numpk: primary-key column \"k\" "
           "has type numeric; sluice chunks by int2, int4, int8, text, "
           "varchar and uuid keys only", f.want_server);
  want_msg(sl__pgc_table_describe(f.c, f.server, "public", "numpk", &t, &err),
           SL_ENOTSUP, &err, msg);
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: table public.datepk: primary-key column \"d\" "
           "has type date; sluice chunks by int2, int4, int8, text, "
           "varchar and uuid keys only", f.want_server);
  want_msg(sl__pgc_table_describe(f.c, f.server, "public", "datepk", &t,
                                  &err),
           SL_ENOTSUP, &err, msg);
  snprintf(msg, sizeof(msg), "postgres-cdc: %s: table public.pt: ",
           f.want_server);
  const char *const parts[] = {msg, "column \"p\"", "oid 600", NULL};
  want_parts(sl__pgc_table_describe(f.c, f.server, "public", "pt", &t, &err),
             SL_ENOTSUP, &err, parts);
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: table public.missing does not exist (or is not "
           "an ordinary table)", f.want_server);
  want_msg(sl__pgc_table_describe(f.c, f.server, "public", "missing", &t,
                                  &err),
           SL_EINVAL, &err, msg);
  /* A quoted name and a uuid key describe. */
  t = describe(&f, "public", "Odd");
  SL_ASSERT_EQ_INT(t->n_pk, 1);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_PGC_KEY_TEXT);
  SL_ASSERT_EQ_STR(t->rel.cols[0].name, "Key");
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

SL_TEST(check_table) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin, "CREATE TABLE public.orders (id int PRIMARY KEY, v text)");
  sl__pgc_table_t *t = describe(&f, "public", "orders");
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_check_table(f.c, f.server, t, false, &err), err);
  char msg[512];
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: table public.orders has REPLICA IDENTITY "
           "DEFAULT: updates and deletes would carry no old row; run ALTER "
           "TABLE public.orders REPLICA IDENTITY FULL", f.want_server);
  want_msg(sl__pgc_check_table(f.c, f.server, t, true, &err), SL_EINVAL, &err,
           msg);
  sql_ok(f.admin, "ALTER TABLE public.orders REPLICA IDENTITY FULL");
  SL_ASSERT_OK_E(sl__pgc_check_table(f.c, f.server, t, true, &err), err);
  /* A role that may not read it. */
  sql_ok(f.admin, "CREATE ROLE reader LOGIN REPLICATION");
  char server[128];
  PGconn *p = connect_as(&f, "reader", server);
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: user 'reader' may not read table public.orders: "
           "run GRANT SELECT ON public.orders TO reader (and USAGE on its "
           "schema)", f.want_server);
  want_msg(sl__pgc_check_table(p, server, t, true, &err), SL_EINVAL, &err,
           msg);
  sql_ok(f.admin, "GRANT SELECT ON public.orders TO reader");
  SL_ASSERT_OK_E(sl__pgc_check_table(p, server, t, true, &err), err);
  PQfinish(p);
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

SL_TEST(publication) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin, "CREATE TABLE public.a (id int PRIMARY KEY);"
                  "CREATE SCHEMA shop;"
                  "CREATE TABLE shop.\"B b\" (id int PRIMARY KEY)");
  sl__pgc_table_t *ta = describe(&f, "public", "a");
  sl__pgc_table_t *tb = describe(&f, "shop", "B b");
  const sl__pgc_table_t *both[] = {ta, tb};
  sl_error_t *err = NULL;
  bool created = false;
  char msg[512];
  /* Missing and not to be created. */
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: publication sl_pub does not exist (sluice "
           "creates it only when a job starts afresh): run CREATE "
           "PUBLICATION \"sl_pub\" FOR TABLE \"public\".\"a\", "
           "\"shop\".\"B b\" WITH (publish = 'insert, update, delete, "
           "truncate')", f.want_server);
  want_msg(sl__pgc_publication_ensure(f.c, f.server, "sl_pub", both, 2, false,
                                      &created, &err),
           SL_EINVAL, &err, msg);
  SL_ASSERT_EQ_INT(sql_int(f.admin, "SELECT count(*) FROM pg_publication"), 0);
  /* Created. */
  SL_ASSERT_OK_E(sl__pgc_publication_ensure(f.c, f.server, "sl_pub", both, 2,
                                            true, &created, &err),
                 err);
  SL_ASSERT_TRUE(created);
  assert_text(f.admin,
              "SELECT string_agg(schemaname || '.' || tablename, ',' ORDER BY "
              "schemaname, tablename) FROM pg_publication_tables WHERE "
              "pubname = 'sl_pub'",
              "public.a,shop.B b");
  assert_text(f.admin,
              "SELECT pubinsert AND pubupdate AND pubdelete AND pubtruncate "
              "FROM pg_publication WHERE pubname = 'sl_pub'",
              "t");
  /* Existing and complete. */
  SL_ASSERT_OK_E(sl__pgc_publication_ensure(f.c, f.server, "sl_pub", both, 2,
                                            true, &created, &err),
                 err);
  SL_ASSERT_TRUE(!created);
  /* Existing, missing a table. */
  sql_ok(f.admin, "CREATE PUBLICATION other FOR TABLE public.a");
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: publication other does not include table "
           "shop.B b: run ALTER PUBLICATION other ADD TABLE shop.\"B b\"",
           f.want_server);
  want_msg(sl__pgc_publication_ensure(f.c, f.server, "other", both, 2, true,
                                      &created, &err),
           SL_EINVAL, &err, msg);
  SL_ASSERT_TRUE(!created);
  /* Existing, not publishing truncate. */
  sql_ok(f.admin, "CREATE PUBLICATION notrunc FOR TABLE public.a, shop.\"B b\" "
                  "WITH (publish = 'insert, update, delete')");
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: publication notrunc does not publish truncate: "
           "run ALTER PUBLICATION notrunc SET (publish = 'insert, update, "
           "delete, truncate')", f.want_server);
  want_msg(sl__pgc_publication_ensure(f.c, f.server, "notrunc", both, 2, true,
                                      &created, &err),
           SL_EINVAL, &err, msg);
  sql_ok(f.admin, "ALTER PUBLICATION notrunc SET (publish = 'insert, update, "
                  "delete, truncate')");
  SL_ASSERT_OK_E(sl__pgc_publication_ensure(f.c, f.server, "notrunc", both,
                                            2, false, NULL, &err),
                 err);
  /* Row filters and column lists (PostgreSQL 15) lose changes. */
  sql_ok(f.admin, "ALTER TABLE public.a ADD COLUMN v int");
  sl__pgc_table_destroy(ta);
  ta = describe(&f, "public", "a");
  both[0] = ta;
  sql_ok(f.admin, "CREATE PUBLICATION filtered FOR TABLE public.a WHERE "
                  "(id > 0), shop.\"B b\"");
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: publication filtered filters the rows (a WHERE "
           "clause) of table public.a: sluice needs every change with every "
           "column; run ALTER PUBLICATION filtered DROP TABLE public.a, then "
           "ALTER PUBLICATION filtered ADD TABLE public.a", f.want_server);
  want_msg(sl__pgc_publication_ensure(f.c, f.server, "filtered", both, 2,
                                      true, &created, &err),
           SL_EINVAL, &err, msg);
  sql_ok(f.admin, "CREATE PUBLICATION some_cols FOR TABLE public.a (id), "
                  "shop.\"B b\" (id)");
  snprintf(msg, sizeof(msg),
           "postgres-cdc: %s: publication some_cols publishes only some "
           "columns of table public.a: sluice needs every change with every "
           "column; run ALTER PUBLICATION some_cols DROP TABLE public.a, then "
           "ALTER PUBLICATION some_cols ADD TABLE public.a", f.want_server);
  want_msg(sl__pgc_publication_ensure(f.c, f.server, "some_cols", both, 2,
                                      true, &created, &err),
           SL_EINVAL, &err, msg);
  /* A column list of every column is every column. */
  sql_ok(f.admin, "CREATE PUBLICATION all_cols FOR TABLE public.a (id, v), "
                  "shop.\"B b\" (id)");
  SL_ASSERT_OK_E(sl__pgc_publication_ensure(f.c, f.server, "all_cols", both,
                                            2, true, &created, &err),
                 err);
  sl__pgc_table_destroy(ta);
  sl__pgc_table_destroy(tb);
  sfx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Planning: every row in exactly one chunk by the server's WHERE. */

/* Compare the key fields of two rows of t locally (bytes for text). */
static int key_cmp(const sl__pgc_table_t *t, const uint8_t *a, uint32_t na,
                   const uint8_t *b, uint32_t nb) {
  sl_row_t x, y;
  sl_row_view(&x, t->schema_, a, na);
  sl_row_view(&y, t->schema_, b, nb);
  for (uint32_t k = 0; k < t->n_pk; k++) {
    uint32_t fi = t->pk[k];
    int c;
    if (t->key_kind[k] == SL_PGC_KEY_INT) {
      int64_t p = sl_row_get_i64(&x, fi), q = sl_row_get_i64(&y, fi);
      c = (p > q) - (p < q);
    } else {
      sl_slice_t p = sl_row_get_str(&x, fi), q = sl_row_get_str(&y, fi);
      uint32_t n = p.len < q.len ? p.len : q.len;
      c = n ? memcmp(p.ptr, q.ptr, n) : 0;
      if (c == 0) c = (p.len > q.len) - (p.len < q.len);
    }
    if (c != 0) return c;
  }
  return 0;
}

/*
 * Read every chunk of the plan with sl__pgc_read_chunk (the server's
 * WHERE): the rows found add up to the table's, each row's chunk by
 * sl__pgc_chunk_find is the chunk that read it (so no row is in two
 * chunks), and rows come in increasing key order across all chunks.  The
 * plan also survives its codec.  Chunk sizes go to sizes (may be NULL).
 */
static void verify_plan_n(sfx_t *f, const sl__pgc_table_t *t,
                          const sl__pgc_chunks_t *cl, uint32_t *sizes,
                          int64_t total) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl__pgc_chunks_encode(cl, &b));
  sl__pgc_chunks_t *d = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_chunks_decode(b.data, b.len, &d, &err), err);
  SL_ASSERT_EQ_INT(d->n, cl->n);
  sl_bytes_close(&b);

  int64_t seen = 0;
  uint8_t *prev = NULL;
  uint32_t prev_len = 0;
  for (uint32_t i = 0; i < d->n; i++) {
    sl__pgc_rows_t rows;
    sl__pgc_rows_init(&rows, t->schema_);
    sl__pgc_snap_t snap;
    uint64_t high = 0;
    SL_ASSERT_OK_E(sl__pgc_read_chunk(f->c, f->server, t, d, &d->chunks[i],
                                      &snap, &high, &rows, &err),
                   err);
    SL_ASSERT_TRUE(high > 0);
    SL_ASSERT_TRUE(snap.xmin <= snap.xmax);
    sl__pgc_snap_free(&snap);
    for (uint32_t r = 0; r < rows.n; r++) {
      sl_row_t row;
      sl_row_view(&row, t->schema_, rows.data[r], rows.len[r]);
      uint32_t ch = UINT32_MAX;
      SL_ASSERT_OK_E(sl__pgc_chunk_find(d, t, &row, &ch, &err), err);
      if (ch != i)
        SL_TEST_FAIL("a row read by chunk %u is in chunk %u by "
                     "sl__pgc_chunk_find", i, ch);
      if (prev && key_cmp(t, prev, prev_len, rows.data[r], rows.len[r]) >= 0)
        SL_TEST_FAIL("row %u of chunk %u is not above the row before", r, i);
      sl_free(prev);
      prev = sl_malloc(rows.len[r]);
      memcpy(prev, rows.data[r], rows.len[r]);
      prev_len = rows.len[r];
    }
    if (sizes) sizes[i] = rows.n;
    seen += rows.n;
    sl__pgc_rows_close(&rows);
  }
  sl_free(prev);
  SL_ASSERT_EQ_INT(seen, total);
  SL_ASSERT_EQ_INT(PQtransactionStatus(f->c), PQTRANS_IDLE);
  sl__pgc_chunks_free(d);
}

/* verify_plan_n with the table's row count from the server. */
static void verify_plan(sfx_t *f, const sl__pgc_table_t *t,
                        const sl__pgc_chunks_t *cl, uint32_t *sizes) {
  char q[600];
  snprintf(q, sizeof(q), "SELECT count(*) FROM \"%s\".\"%s\"", t->schema,
           t->name);
  verify_plan_n(f, t, cl, sizes, sql_int(f->admin, q));
}

static sl__pgc_chunks_t *plan(sfx_t *f, const sl__pgc_table_t *t,
                              uint64_t chunk_rows) {
  sl__pgc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_plan_chunks(f->c, f->server, t, chunk_rows, &cl,
                                     &err),
                 err);
  SL_ASSERT_EQ_INT(cl->n_key, t->n_pk);
  return cl;
}

SL_TEST(plan_int_dense) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin, "CREATE TABLE public.t (id int8 PRIMARY KEY, v text);"
                  "INSERT INTO public.t SELECT g, 'v' || g FROM "
                  "generate_series(1, 1000) g");
  sl__pgc_table_t *t = describe(&f, "public", "t");
  sl__pgc_chunks_t *cl = plan(&f, t, 100);
  /* Even ranges of 100 ids: 101, 201, ..., 901 and one more. */
  SL_ASSERT_EQ_INT(cl->n, 10);
  for (uint32_t i = 1; i < cl->n; i++)
    SL_ASSERT_EQ_INT(cl->chunks[i].low[0].i, 1 + 100 * (int64_t)i);
  uint32_t sizes[16];
  verify_plan(&f, t, cl, sizes);
  for (uint32_t i = 0; i < cl->n; i++) SL_ASSERT_EQ_INT(sizes[i], 100);
  sl__pgc_chunks_free(cl);
  /* chunk_rows 1: a chunk per id. */
  cl = plan(&f, t, 1);
  SL_ASSERT_EQ_INT(cl->n, 1000);
  verify_plan(&f, t, cl, NULL);
  sl__pgc_chunks_free(cl);
  /* Larger than the table: one chunk. */
  cl = plan(&f, t, 5000);
  SL_ASSERT_EQ_INT(cl->n, 1);
  verify_plan(&f, t, cl, NULL);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);

  /* An empty table: one unbounded chunk. */
  sql_ok(f.admin, "CREATE TABLE public.e (id int4 PRIMARY KEY)");
  t = describe(&f, "public", "e");
  cl = plan(&f, t, 10);
  SL_ASSERT_EQ_INT(cl->n, 1);
  SL_ASSERT_TRUE(cl->chunks[0].low == NULL && cl->chunks[0].high == NULL);
  verify_plan(&f, t, cl, NULL);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

SL_TEST(plan_int_sparse) {
  sfx_t f;
  sfx_open(&f);
  /* Spread 5000 per row, and negative and extreme ids. */
  sql_ok(f.admin, "CREATE TABLE public.t (id int8 PRIMARY KEY);"
                  "INSERT INTO public.t SELECT g * 5000 FROM "
                  "generate_series(-250, 249) g;"
                  "INSERT INTO public.t VALUES (-9223372036854775808), "
                  "(9223372036854775807)");
  sl__pgc_table_t *t = describe(&f, "public", "t");
  sl__pgc_chunks_t *cl = plan(&f, t, 64);
  SL_ASSERT_EQ_INT(cl->n, 8); /* 502 rows: 7 of 64, then 54 */
  uint32_t sizes[8];
  verify_plan(&f, t, cl, sizes);
  for (uint32_t i = 0; i + 1 < cl->n; i++) SL_ASSERT_EQ_INT(sizes[i], 64);
  SL_ASSERT_EQ_INT(sizes[7], 502 - 7 * 64);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

/* A column collation whose order is not the bytes' (ICU when the server
 * has it), or NULL. */
static const char *non_c_collation(sfx_t *f) {
  if (sql_int(f->admin, "SELECT count(*) FROM pg_collation WHERE collname = "
                        "'und-x-icu'") > 0)
    return "\"und-x-icu\"";
  if (sql_int(f->admin, "SELECT count(*) FROM pg_collation WHERE collname = "
                        "'en_US.utf8'") > 0)
    return "\"en_US.utf8\"";
  return NULL;
}

SL_TEST(plan_text) {
  sfx_t f;
  sfx_open(&f);
  const char *coll = non_c_collation(&f);
  char ddl[512];
  snprintf(ddl, sizeof(ddl),
           "CREATE TABLE public.t (k text %s%s PRIMARY KEY, n int)",
           coll ? "COLLATE " : "", coll ? coll : "");
  sql_ok(f.admin, ddl);
  sql_ok(f.admin,
         "INSERT INTO public.t VALUES ('a', 1), ('B', 2), ('b', 3), ('A', 4),"
         "('\xc3\xa9', 5), ('e', 6), ('f', 7), ('z', 8), ('Z', 9), "
         "('\xf0\x9f\x98\x80', 10), ('a b', 11), ('a-b', 12), ('ab', 13), "
         "('10', 14), ('9', 15), ('', 16), ('\xc3\xa9t\xc3\xa9', 17), "
         "('ete', 18), ('\xc3\x89t\xc3\xa9', 19), ('\xe4\xb8\xad', 20), "
         "(' lead', 21), ('_x', 22), ('x''q', 23), ('x\\y', 24);"
         "INSERT INTO public.t SELECT chr(65 + g % 26) || chr(97 + g % 7) || "
         "CASE WHEN g % 3 = 0 THEN '\xc3\xa9' WHEN g % 3 = 1 THEN 'E' ELSE "
         "' ' END || g, g FROM generate_series(100, 400) g");
  if (coll != NULL) {
    /* The column's own order differs from the bytes'. */
    assert_text(f.admin,
                "SELECT (array_agg(k ORDER BY k) = array_agg(k ORDER BY k "
                "COLLATE \"C\"))::text FROM public.t",
                "false");
  } else {
    fprintf(stderr, "no non-C collation on this server: the text plan runs "
                    "in the database's C order only\n");
  }
  sl__pgc_table_t *t = describe(&f, "public", "t");
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_PGC_KEY_TEXT);
  static const uint64_t sizes_of[] = {1, 2, 7, 50, 1000};
  for (size_t s = 0; s < sizeof(sizes_of) / sizeof(sizes_of[0]); s++) {
    sl__pgc_chunks_t *cl = plan(&f, t, sizes_of[s]);
    int64_t n = sql_int(f.admin, "SELECT count(*) FROM public.t");
    SL_ASSERT_EQ_INT(cl->n, (n + (int64_t)sizes_of[s] - 1) /
                                (int64_t)sizes_of[s]);
    uint32_t *sizes = sl_calloc(cl->n, sizeof(uint32_t));
    verify_plan(&f, t, cl, sizes);
    for (uint32_t i = 0; i + 1 < cl->n; i++)
      SL_ASSERT_EQ_INT(sizes[i], sizes_of[s]);
    sl_free(sizes);
    sl__pgc_chunks_free(cl);
  }
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

/* Sequential scans of public.<table> so far, and the tuples all scans
 * read (sluice's session flushes its statistics first). */
static void scans(sfx_t *f, const char *table, int64_t *out_seq,
                  int64_t *out_read) {
  sql_ok(f->c, "SELECT pg_stat_force_next_flush()");
  sql_ok(f->c, "SELECT 1"); /* the flush happens when the session idles */
  sql_ok(f->admin, "SELECT pg_stat_force_next_flush()");
  sql_ok(f->admin, "SELECT 1");
  char q[256];
  snprintf(q, sizeof(q), "SELECT seq_scan FROM pg_stat_user_tables WHERE "
                         "relid = 'public.%s'::regclass", table);
  *out_seq = sql_int(f->admin, q);
  snprintf(q, sizeof(q), "SELECT seq_tup_read + COALESCE(idx_tup_fetch, 0) "
                         "FROM pg_stat_user_tables WHERE relid = "
                         "'public.%s'::regclass", table);
  *out_read = sql_int(f->admin, q);
}

/* Text keys whose collation already orders by bytes (C, POSIX, and the
 * default of this C database): the same membership, and the chunk reads
 * use the primary key's index (the comparisons need no COLLATE "C");
 * a key in another collation cannot use it. */
SL_TEST(plan_text_c) {
  sfx_t f;
  sfx_open(&f);
  const char *coll = non_c_collation(&f);
  char ddl[512];
  snprintf(ddl, sizeof(ddl),
           "CREATE TABLE public.d (k text PRIMARY KEY, n int);"
           "CREATE TABLE public.c (a varchar(20) COLLATE \"C\", "
           "b text COLLATE \"POSIX\", PRIMARY KEY (a, b));"
           "CREATE TABLE public.i (k text %s%s PRIMARY KEY)",
           coll ? "COLLATE " : "", coll ? coll : "");
  sql_ok(f.admin, ddl);
  sql_ok(f.admin,
         "INSERT INTO public.d SELECT chr(65 + g % 26) || chr(97 + g % 7) || "
         "CASE WHEN g % 3 = 0 THEN '\xc3\xa9' WHEN g % 3 = 1 THEN 'E' ELSE "
         "' ' END || g, g FROM generate_series(1, 300) g;"
         "INSERT INTO public.c SELECT k, n::text || '\xc3\xa9' FROM public.d;"
         "INSERT INTO public.c SELECT 'x', k FROM public.d;"
         "INSERT INTO public.i SELECT k FROM public.d");
  sql_ok(f.c, "SET enable_seqscan = off");
  static const char *const tables[] = {"d", "c", "i"};
  for (int ti = 0; ti < 3; ti++) {
    if (ti == 2 && coll == NULL) break;
    sl__pgc_table_t *t = describe(&f, "public", tables[ti]);
    sl__pgc_chunks_t *cl = plan(&f, t, 16);
    SL_ASSERT_TRUE(cl->n > 10);
    char q[128];
    snprintf(q, sizeof(q), "SELECT count(*) FROM public.%s", tables[ti]);
    int64_t rows = sql_int(f.admin, q);
    int64_t seq0, read0, seq1, read1;
    scans(&f, tables[ti], &seq0, &read0);
    verify_plan_n(&f, t, cl, NULL, rows);
    scans(&f, tables[ti], &seq1, &read1);
    if (ti < 2) {
      /* Each chunk reads its range of the index: the table once. */
      SL_ASSERT_EQ_INT(seq1 - seq0, 0);
      SL_ASSERT_LE_INT(read1 - read0, rows + (int64_t)cl->n);
    } else {
      /* Each chunk reads the whole table. */
      SL_ASSERT_TRUE(read1 - read0 >= rows * (int64_t)(cl->n - 1));
    }
    sl__pgc_chunks_free(cl);
    sl__pgc_table_destroy(t);
  }
  sfx_close(&f);
}

SL_TEST(plan_uuid) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin, "CREATE TABLE public.t (u uuid PRIMARY KEY, n int);"
                  "INSERT INTO public.t SELECT gen_random_uuid(), g FROM "
                  "generate_series(1, 500) g;"
                  "INSERT INTO public.t VALUES "
                  "('00000000-0000-0000-0000-000000000000', 0),"
                  "('FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', -1),"
                  "('0000000a-0000-0000-0000-000000000000', -2),"
                  "('00000009-0000-0000-0000-000000000000', -3)");
  sl__pgc_table_t *t = describe(&f, "public", "t");
  sl__pgc_chunks_t *cl = plan(&f, t, 50);
  SL_ASSERT_EQ_INT(cl->n, 11);
  /* Bounds are lowercase text. */
  for (uint32_t i = 1; i < cl->n; i++) {
    SL_ASSERT_EQ_INT(cl->chunks[i].low[0].len, 36);
    for (uint32_t j = 0; j < 36; j++)
      SL_ASSERT_TRUE(!(cl->chunks[i].low[0].p[j] >= 'A' &&
                       cl->chunks[i].low[0].p[j] <= 'F'));
  }
  uint32_t sizes[11];
  verify_plan(&f, t, cl, sizes);
  for (uint32_t i = 0; i + 1 < cl->n; i++) SL_ASSERT_EQ_INT(sizes[i], 50);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

SL_TEST(plan_composite) {
  sfx_t f;
  sfx_open(&f);
  const char *coll = non_c_collation(&f);
  char ddl[512];
  snprintf(ddl, sizeof(ddl),
           "CREATE TABLE public.t (v int, b varchar(30) %s%s, a int2, "
           "PRIMARY KEY (a, b))",
           coll ? "COLLATE " : "", coll ? coll : "");
  sql_ok(f.admin, ddl);
  sql_ok(f.admin,
         "INSERT INTO public.t SELECT g, s, (g % 17) - 8 FROM "
         "generate_series(1, 60) g, unnest(ARRAY['a', 'B', 'b', "
         "'\xc3\xa9', 'e', 'Z', 'ab', 'a b', '']) s "
         "ON CONFLICT DO NOTHING");
  sl__pgc_table_t *t = describe(&f, "public", "t");
  SL_ASSERT_EQ_INT(t->n_pk, 2);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_PGC_KEY_INT);
  SL_ASSERT_EQ_INT(t->key_kind[1], SL_PGC_KEY_TEXT);
  int64_t n = sql_int(f.admin, "SELECT count(*) FROM public.t");
  SL_ASSERT_EQ_INT(n, 17 * 9);
  static const uint64_t sizes_of[] = {1, 4, 13, 200};
  for (size_t s = 0; s < sizeof(sizes_of) / sizeof(sizes_of[0]); s++) {
    sl__pgc_chunks_t *cl = plan(&f, t, sizes_of[s]);
    SL_ASSERT_EQ_INT(cl->n, (n + (int64_t)sizes_of[s] - 1) /
                                (int64_t)sizes_of[s]);
    uint32_t *sizes = sl_calloc(cl->n, sizeof(uint32_t));
    verify_plan(&f, t, cl, sizes);
    for (uint32_t i = 0; i + 1 < cl->n; i++)
      SL_ASSERT_EQ_INT(sizes[i], sizes_of[s]);
    sl_free(sizes);
    sl__pgc_chunks_free(cl);
  }
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

/* ------------------------------------------------------------------ */
/* The chunk reader. */

SL_TEST(read_values) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin,
         "CREATE TABLE public.v (id int4 PRIMARY KEY, flag bool, s int2, "
         "big int8, n numeric(10,2), free numeric, f float8, t text, "
         "vc varchar(10), u uuid, j jsonb, raw bytea, ts timestamptz, "
         "tl timestamp, d date);"
         "INSERT INTO public.v VALUES "
         "(1, true, -32768, 9223372036854775807, -12345678.99, "
         "123456789012345678901234.5, 0.1, 'h\xc3\xa9llo\n\"q\"', 'abc', "
         "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{\"b\": [1, 2], \"a\": "
         "null}', '\\x00ff10', '2024-03-01 12:34:56.789012+05:30', "
         "'1999-12-31 23:59:59.5', '2024-02-29'),"
         "(2, false, 0, -1, 0, 'NaN', -1.5e300, '', '', NULL, '[]', '', "
         "'1970-01-01 00:00:00+00', '0001-01-01 00:00:00', '1900-01-01'),"
         "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
         "NULL, NULL, NULL, NULL)");
  sl__pgc_table_t *t = describe(&f, "public", "v");
  sl__pgc_chunks_t *cl = plan(&f, t, 100);
  SL_ASSERT_EQ_INT(cl->n, 1);
  sl__pgc_rows_t rows;
  sl__pgc_rows_init(&rows, t->schema_);
  sl__pgc_snap_t snap;
  uint64_t high;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__pgc_read_chunk(f.c, f.server, t, cl, &cl->chunks[0],
                                    &snap, &high, &rows, &err),
                 err);
  sl__pgc_snap_free(&snap);
  SL_ASSERT_EQ_INT(rows.n, 3);
  /* What the server says each field is, as text in sluice's terms. */
  PGresult *res = PQexec(
      f.admin,
      "SELECT id::text, CASE WHEN flag THEN 't' WHEN NOT flag THEN 'f' END, "
      "s::text, big::text, (n * 100)::int8::text, free::text, "
      "f::float8::text, t, vc, u::text, j::text, encode(raw, 'hex'), "
      "(extract(epoch FROM ts) * 1000000)::int8::text, "
      "(extract(epoch FROM tl) * 1000000)::int8::text, "
      "(extract(epoch FROM d::timestamp) * 1000000)::int8::text "
      "FROM public.v ORDER BY id");
  SL_ASSERT_EQ_INT(PQresultStatus(res), PGRES_TUPLES_OK);
  SL_ASSERT_EQ_INT(PQntuples(res), 3);
  SL_ASSERT_EQ_INT(PQnfields(res), (int)t->n_cols);
  for (uint32_t r = 0; r < rows.n; r++) {
    sl_row_t row;
    sl_row_view(&row, t->schema_, rows.data[r], rows.len[r]);
    SL_ASSERT_EQ_INT(sl_row_kind(&row), SL_ROW_INSERT);
    for (uint32_t c = 0; c < t->n_cols; c++) {
      bool want_null = PQgetisnull(res, (int)r, (int)c);
      const char *w = PQgetvalue(res, (int)r, (int)c);
      if (sl_row_is_null(&row, c) != want_null)
        SL_TEST_FAIL("row %u column %s: null %d, want %d", r,
                     t->rel.cols[c].name, sl_row_is_null(&row, c), want_null);
      if (want_null) continue;
      char got[512];
      switch (sl_schema_field(t->schema_, c)->type.id) {
      case SL_TYPE_BOOL:
        snprintf(got, sizeof(got), "%s", sl_row_get_bool(&row, c) ? "t" : "f");
        break;
      case SL_TYPE_FLOAT64:
        SL_ASSERT_TRUE(sl_row_get_f64(&row, c) == strtod(w, NULL));
        snprintf(got, sizeof(got), "%s", w);
        break;
      case SL_TYPE_STRING: {
        sl_slice_t s = sl_row_get_str(&row, c);
        snprintf(got, sizeof(got), "%.*s", (int)s.len, (const char *)s.ptr);
        break;
      }
      case SL_TYPE_BYTES: {
        sl_slice_t s = sl_row_get_str(&row, c);
        got[0] = '\0';
        for (uint32_t i = 0; i < s.len && i < 200; i++)
          snprintf(got + 2 * i, 3, "%02x", s.ptr[i]);
        break;
      }
      default:
        snprintf(got, sizeof(got), "%lld",
                 (long long)sl_row_get_i64(&row, c));
        break;
      }
      if (strcmp(got, w) != 0)
        SL_TEST_FAIL("row %u column %s: '%s', the server says '%s'", r,
                     t->rel.cols[c].name, got, w);
    }
  }
  PQclear(res);
  sl__pgc_rows_close(&rows);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}

/* ------------------------------------------------------------------ */
/* The exact snapshot. */

/* The transactions a pgoutput slot saw since it was made: the 32-bit xid
 * and the commit record's LSN (Begin's final_lsn) of each. */
typedef struct txs_s {
  uint32_t n;
  uint32_t xid[64];
  uint64_t commit[64];
} txs_t;

static uint64_t hex_be(const char *h, int n_bytes) {
  uint64_t v = 0;
  for (int i = 0; i < 2 * n_bytes; i++) {
    char ch = h[i];
    v = v << 4 | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
  }
  return v;
}

static void peek(sfx_t *f, txs_t *out) {
  PGresult *res = PQexec(
      f->admin, "SELECT encode(data, 'hex') FROM "
                "pg_logical_slot_peek_binary_changes('snap_t', NULL, NULL, "
                "'proto_version', '1', 'publication_names', 'snap_pub') "
                "WHERE get_byte(data, 0) = 66");
  SL_ASSERT_EQ_INT(PQresultStatus(res), PGRES_TUPLES_OK);
  memset(out, 0, sizeof(*out));
  for (int i = 0; i < PQntuples(res) && i < 64; i++) {
    /* 'B' final_lsn(8) commit_time(8) xid(4) */
    const char *h = PQgetvalue(res, i, 0);
    SL_ASSERT_EQ_INT(strlen(h), 2 * 21);
    out->commit[out->n] = hex_be(h + 2, 8);
    out->xid[out->n] = (uint32_t)hex_be(h + 2 + 32, 4);
    out->n++;
  }
  PQclear(res);
}

static uint64_t commit_lsn(const txs_t *txs, uint32_t xid) {
  for (uint32_t i = 0; i < txs->n; i++)
    if (txs->xid[i] == xid) return txs->commit[i];
  SL_TEST_FAIL("transaction %u not decoded", xid);
  return 0;
}

static bool rows_have(const sl__pgc_table_t *t, const sl__pgc_rows_t *rows,
                      int64_t id) {
  for (uint32_t r = 0; r < rows->n; r++) {
    sl_row_t row;
    sl_row_view(&row, t->schema_, rows->data[r], rows->len[r]);
    if (sl_row_get_i64(&row, 0) == id) return true;
  }
  return false;
}

typedef struct reader_s {
  sfx_t *f;
  const sl__pgc_table_t *t;
  const sl__pgc_chunks_t *cl;
  sl__pgc_snap_t snap;
  uint64_t high;
  sl__pgc_rows_t rows;
  int rc;
  sl_error_t *err;
} reader_t;

static void *reader_main(void *arg) {
  reader_t *r = arg;
  r->rc = sl__pgc_read_chunk(r->f->c, r->f->server, r->t, r->cl,
                             &r->cl->chunks[0], &r->snap, &r->high, &r->rows,
                             &r->err);
  return NULL;
}

static uint64_t xid_of(PGconn *c) {
  return (uint64_t)sql_int(c, "SELECT pg_current_xact_id()::text::int8");
}

SL_TEST(snapshot) {
  sfx_t f;
  sfx_open(&f);
  sql_ok(f.admin, "CREATE TABLE public.t (id int8 PRIMARY KEY, v text);"
                  "CREATE PUBLICATION snap_pub FOR TABLE public.t");
  sql_ok(f.admin, "SELECT pg_create_logical_replication_slot('snap_t', "
                  "'pgoutput')");
  sl__pgc_table_t *t = describe(&f, "public", "t");
  sl__pgc_chunks_t *cl = plan(&f, t, 1000);
  /* A: committed before the read. */
  PGconn *a = direct(f.srv), *b = direct(f.srv), *c2 = direct(f.srv);
  sql_ok(a, "BEGIN");
  sql_ok(a, "INSERT INTO public.t VALUES (1, 'committed before')");
  uint64_t xa = xid_of(a);
  sql_ok(a, "COMMIT");
  /* B: open (uncommitted) during the whole read. */
  sql_ok(b, "BEGIN");
  sql_ok(b, "INSERT INTO public.t VALUES (2, 'open during the read')");
  uint64_t xb = xid_of(b);
  /* C: open at the snapshot, committed between the snapshot and the
   * SELECT (the reader pauses there): its commit record is before HIGH,
   * yet it is not visible. */
  sql_ok(c2, "BEGIN");
  sql_ok(c2, "INSERT INTO public.t VALUES (3, 'committed mid-read')");
  uint64_t xc = xid_of(c2);
  /* E: began after B and C and committed before the read, so the
   * snapshot's xmax is past B and C and they are in its xip. */
  sql_ok(a, "BEGIN");
  sql_ok(a, "INSERT INTO public.t VALUES (5, 'committed before, later')");
  uint64_t xe = xid_of(a);
  sql_ok(a, "COMMIT");

  reader_t r;
  memset(&r, 0, sizeof(r));
  r.f = &f;
  r.t = t;
  r.cl = cl;
  sl__pgc_rows_init(&r.rows, t->schema_);
  bool is_paused = sl_inject_is_enabled();
  if (is_paused)
    SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.after_snapshot",
                               SL_INJECT_PAUSE, 1, false));
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, reader_main, &r), 0);
  if (is_paused) {
    SL_ASSERT_OK(sl_inject_wait_paused("pgcdc.snapshot.after_snapshot",
                                       60000));
    sql_ok(c2, "COMMIT");
    sl_inject_release("pgcdc.snapshot.after_snapshot");
  }
  SL_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
  sl_inject_reset();
  SL_ASSERT_OK_E(r.rc, r.err);
  if (!is_paused) sql_ok(c2, "COMMIT");
  /* Rows: A and E only. */
  SL_ASSERT_EQ_INT(r.rows.n, 2);
  SL_ASSERT_TRUE(rows_have(t, &r.rows, 1));
  SL_ASSERT_TRUE(rows_have(t, &r.rows, 5));
  /* The snapshot: A and E visible; B and C in xip and not visible. */
  if (!(r.snap.xmin <= xb && xb < r.snap.xmax && xc < r.snap.xmax &&
        xa < r.snap.xmax && xe < r.snap.xmax))
    SL_TEST_FAIL("snapshot %llu:%llu (%u in progress); A %llu, B %llu, C "
                 "%llu, E %llu", (unsigned long long)r.snap.xmin,
                 (unsigned long long)r.snap.xmax, r.snap.n_xip,
                 (unsigned long long)xa, (unsigned long long)xb,
                 (unsigned long long)xc, (unsigned long long)xe);
  bool b_in = false, c_in = false;
  for (uint32_t i = 0; i < r.snap.n_xip; i++) {
    b_in |= r.snap.xip[i] == xb;
    c_in |= r.snap.xip[i] == xc;
  }
  SL_ASSERT_TRUE(b_in && c_in);
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&r.snap, (uint32_t)xa));
  SL_ASSERT_TRUE(sl__pgc_snap_visible(&r.snap, (uint32_t)xe));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&r.snap, (uint32_t)xb));
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&r.snap, (uint32_t)xc));
  sql_ok(b, "COMMIT");
  /* D: after the read. */
  sql_ok(a, "BEGIN");
  sql_ok(a, "INSERT INTO public.t VALUES (4, 'after')");
  uint64_t xd = xid_of(a);
  sql_ok(a, "COMMIT");
  SL_ASSERT_TRUE(!sl__pgc_snap_visible(&r.snap, (uint32_t)xd));
  /* Commit records: A's before HIGH; B's and D's at or past it. */
  txs_t txs;
  peek(&f, &txs);
  SL_ASSERT_TRUE(commit_lsn(&txs, (uint32_t)xa) < r.high);
  SL_ASSERT_TRUE(commit_lsn(&txs, (uint32_t)xe) < r.high);
  SL_ASSERT_TRUE(commit_lsn(&txs, (uint32_t)xb) >= r.high);
  SL_ASSERT_TRUE(commit_lsn(&txs, (uint32_t)xd) >= r.high);
  if (is_paused) SL_ASSERT_TRUE(commit_lsn(&txs, (uint32_t)xc) < r.high);
  /* Every transaction the snapshot sees committed before HIGH. */
  for (uint32_t i = 0; i < txs.n; i++)
    if (sl__pgc_snap_visible(&r.snap, txs.xid[i]))
      SL_ASSERT_TRUE(txs.commit[i] < r.high);
  /* The stream's rule (emit iff L >= HIGH or not visible) emits B, C and
   * D and not A or E: snapshot rows + emitted changes = every row once. */
  SL_ASSERT_EQ_INT(PQtransactionStatus(f.c), PQTRANS_IDLE);
  sl__pgc_snap_free(&r.snap);
  sl__pgc_rows_close(&r.rows);
  sl_error_destroy(r.err);

  /* A failed step rolls back: the session is ready for the next chunk. */
  if (sl_inject_is_enabled()) {
    SL_ASSERT_OK(sl_inject_arm("pgcdc.snapshot.before_high", SL_INJECT_FAIL,
                               1, false));
    sl__pgc_rows_t rows;
    sl__pgc_rows_init(&rows, t->schema_);
    sl__pgc_snap_t snap;
    uint64_t high = 0;
    sl_error_t *err = NULL;
    char want[256];
    snprintf(want, sizeof(want),
             "postgres-cdc: %s: reading chunk 0 of table public.t: injected "
             "failure before HIGH", f.want_server);
    want_msg(sl__pgc_read_chunk(f.c, f.server, t, cl, &cl->chunks[0], &snap,
                                &high, &rows, &err),
             SL_EFAILED, &err, want);
    sl_inject_reset();
    SL_ASSERT_EQ_INT(PQtransactionStatus(f.c), PQTRANS_IDLE);
    sl__pgc_rows_close(&rows);
    sl__pgc_rows_init(&rows, t->schema_);
    SL_ASSERT_OK_E(sl__pgc_read_chunk(f.c, f.server, t, cl, &cl->chunks[0],
                                      &snap, &high, &rows, &err),
                   err);
    SL_ASSERT_EQ_INT(rows.n, 5);
    sl__pgc_snap_free(&snap);
    sl__pgc_rows_close(&rows);
  }
  sql_ok(f.admin, "SELECT pg_drop_replication_slot('snap_t')");
  PQfinish(a);
  PQfinish(b);
  PQfinish(c2);
  sl__pgc_chunks_free(cl);
  sl__pgc_table_destroy(t);
  sfx_close(&f);
}
