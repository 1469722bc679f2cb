/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB CDC source's snapshot half (src/connectors/mariadb/cdc_*.c)
 * against a real MariaDB 10.11 started by each test (tests/tools/
 * sl_servers): the start checks, each failing with its exact message on a
 * server configured for it; the type mapping over a table with every
 * supported type, the unsupported ones refused by name; chunk planning
 * over dense and sparse integer keys, a string key, a composite key, a
 * non-unique declared key with NULLs, an empty and a one-row table, every
 * plan checked by the server itself (each row in exactly one chunk); and
 * the chunk reader, whose rows must equal what the server computes from
 * SELECT * field by field, with LOW <= HIGH, and whose LOW is exact (a
 * change made right after LOW is not in the rows and merges in); chunk
 * membership in the key column's collation (every row against the
 * server's WHERE); the free server-id range; sharded tables that must
 * agree; and DML at each snapshot phase merged from the real binlog
 * window into the image at HIGH.
 */
#include <inttypes.h>
#include <pthread.h>
#include <time.h>

#include "connectors/mariadb/binlog_reader.h"
#include "connectors/mariadb/cdc_int.h"
#include "core/inject.h"
#include "sl_servers.h"
#include "sl_test.h"

/* ------------------------------------------------------------------ */
/* Helpers. */

typedef struct fx_s {
  sl_server_t *srv;
  MYSQL *m;
  char server[64];
} fx_t;

static void fx_open_with(fx_t *f, const char *const *settings) {
  memset(f, 0, sizeof(*f));
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  o.extra_settings = settings;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &f->srv, &err), err);
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &f->m, &err),
                 err);
  snprintf(f->server, sizeof(f->server), "127.0.0.1:%d",
           sl_server_port(f->srv));
}

static void fx_open(fx_t *f) { fx_open_with(f, NULL); }

static void fx_close(fx_t *f) {
  mysql_close(f->m);
  sl_server_destroy(f->srv);
}

static void my_ok(MYSQL *m, const char *sql) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_exec(m, sql, NULL, &err), err);
}

static int64_t my_int(MYSQL *m, const char *sql) {
  int64_t v = -1;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_query_int64(m, sql, &v, &err), err);
  return v;
}

static MYSQL *connect_as(fx_t *f, const char *user, const char *pw) {
  MYSQL *m = mysql_init(NULL);
  SL_ASSERT_TRUE(m != NULL);
  if (mysql_real_connect(m, "127.0.0.1", user, pw, NULL,
                         (unsigned)sl_server_port(f->srv), NULL, 0) == NULL)
    SL_TEST_FAIL("connect as %s: %s", user, mysql_error(m));
  return m;
}

/* err's message equals want with "%S" replaced by the server. */
static void expect_msg(const fx_t *f, int rc, int want_rc, sl_error_t *err,
                       const char *want) {
  char buf[2048];
  const char *s = strstr(want, "%S");
  SL_ASSERT_TRUE(s != NULL);
  snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(s - want), want, f->server,
           s + 2);
  if (rc != want_rc)
    SL_TEST_FAIL("rc %d (%s), want %d; message: %s", rc, sl_errname(rc),
                 want_rc, err ? sl_error_message(err) : "(none)");
  SL_ASSERT_TRUE(err != NULL);
  SL_ASSERT_EQ_STR(sl_error_message(err), buf);
  sl_error_destroy(err);
}

static void check_server_fails(const char *const *settings, const char *want) {
  fx_t f;
  fx_open_with(&f, settings);
  sl_error_t *err = NULL;
  int rc = sl__cdc_check_server(f.m, f.server, "root", &err);
  expect_msg(&f, rc, SL_EINVAL, err, want);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Start checks. */

SL_TEST(check_ok_and_patterns) {
  fx_t f;
  fx_open(&f);
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_check_server(f.m, f.server, "root", &err), err);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE DATABASE shop2");
  my_ok(f.m, "CREATE TABLE shop.orders (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop.order_1 (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop.order_2 (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop.orderx2 (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop2.items (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE VIEW shop.v AS SELECT * FROM shop.orders");
  struct {
    const char *pats[3];
    const char *want;
  } cases[] = {
      {{"shop.*"}, "shop.order_1 shop.order_2 shop.orders shop.orderx2"},
      {{"shop.order_?"}, "shop.order_1 shop.order_2"},
      /* `_` is literal: not orderx2 */
      {{"shop.order_2"}, "shop.order_2"},
      {{"shop*.*tem*", "shop.orders", "shop.orders"},
       "shop.orders shop2.items"},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    uint32_t n_pat = 0;
    while (n_pat < 3 && cases[k].pats[n_pat]) n_pat++;
    sl__cdc_table_name_t *names = NULL;
    uint32_t n = 0;
    SL_ASSERT_OK_E(sl__cdc_resolve_tables(f.m, f.server, cases[k].pats, n_pat,
                                          &names, &n, &err),
                   err);
    char got[512] = "";
    for (uint32_t i = 0; i < n; i++)
      snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s.%s",
               i ? " " : "", names[i].db, names[i].table);
    SL_ASSERT_EQ_STR(got, cases[k].want);
    sl__cdc_table_names_free(names, n);
  }
  sl__cdc_table_name_t *names = NULL;
  uint32_t n = 0;
  const char *none[] = {"shop.nothing*"};
  int rc = sl__cdc_resolve_tables(f.m, f.server, none, 1, &names, &n, &err);
  expect_msg(&f, rc, SL_ENOTFOUND, err,
             "mariadb-cdc: table pattern 'shop.nothing*' matches no base "
             "table at %S (or the user cannot see it)");
  err = NULL;
  const char *view[] = {"shop.v"};
  rc = sl__cdc_resolve_tables(f.m, f.server, view, 1, &names, &n, &err);
  SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
  sl_error_destroy(err);
  err = NULL;
  const char *nodot[] = {"orders"};
  rc = sl__cdc_resolve_tables(f.m, f.server, nodot, 1, &names, &n, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb-cdc: table pattern 'orders' is not "
                   "<database>.<table> (one dot; `*` and `?` match within a "
                   "part, e.g. shop.* or shop.order_?)");
  sl_error_destroy(err);
  fx_close(&f);
}

SL_TEST(check_connect) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE USER u1 IDENTIFIED BY 'pw'");
  MYSQL *c = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_connect("127.0.0.1", sl_server_port(f.srv), "u1",
                                 "pw", 0, &c, &err),
                 err);
  mysql_close(c);
  int rc = sl__cdc_connect("127.0.0.1", sl_server_port(f.srv), "u1", "bad", 0,
                           &c, &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: access denied for user 'u1' at %S (wrong user or "
             "password): Access denied for user 'u1'@'127.0.0.1' (using "
             "password: YES)");
  /* The server stopped: its port refuses. */
  err = NULL;
  SL_ASSERT_OK(sl_server_stop(f.srv, SL_SERVER_STOP_CLEAN, NULL));
  rc = sl__cdc_connect("127.0.0.1", sl_server_port(f.srv), "u1", "pw", 2000,
                       &c, &err);
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  char want[256];
  snprintf(want, sizeof(want),
           "mariadb-cdc: cannot connect to %s: Connection refused (error "
           "2002: ", f.server);
  if (strncmp(sl_error_message(err), want, strlen(want)) != 0)
    SL_TEST_FAIL("message '%s' does not start with '%s'",
                 sl_error_message(err), want);
  sl_error_destroy(err);
  fx_close(&f);
}

SL_TEST(check_log_bin_off) {
  const char *s[] = {"skip-log-bin", NULL};
  check_server_fails(s, "mariadb-cdc: %S has the binary log off "
                        "(log_bin=OFF); change data capture reads the binary "
                        "log: start the server with --log-bin");
}

SL_TEST(check_binlog_format) {
  const char *s[] = {"binlog-format=STATEMENT", NULL};
  check_server_fails(s, "mariadb-cdc: %S logs binlog_format=STATEMENT; "
                        "change data capture needs binlog_format=ROW (SET "
                        "GLOBAL binlog_format=ROW and in the server's "
                        "configuration)");
  const char *m[] = {"binlog-format=MIXED", NULL};
  check_server_fails(m, "mariadb-cdc: %S logs binlog_format=MIXED; "
                        "change data capture needs binlog_format=ROW (SET "
                        "GLOBAL binlog_format=ROW and in the server's "
                        "configuration)");
}

SL_TEST(check_row_image) {
  const char *s[] = {"binlog-row-image=MINIMAL", NULL};
  check_server_fails(s, "mariadb-cdc: %S logs binlog_row_image=MINIMAL; "
                        "change data capture needs binlog_row_image=FULL "
                        "(whole before and after images; SET GLOBAL "
                        "binlog_row_image=FULL and in the server's "
                        "configuration)");
}

SL_TEST(check_privileges) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.orders (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop.secret (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE USER u1 IDENTIFIED BY 'pw'");
  my_ok(f.m, "GRANT SELECT ON shop.orders TO u1");
  my_ok(f.m, "CREATE USER u2 IDENTIFIED BY 'pw'");
  my_ok(f.m, "GRANT REPLICATION SLAVE ON *.* TO u2");
  my_ok(f.m, "CREATE USER u3 IDENTIFIED BY 'pw'");
  my_ok(f.m, "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO u3");
  my_ok(f.m, "GRANT SELECT ON shop.orders TO u3");

  sl_error_t *err = NULL;
  MYSQL *c = connect_as(&f, "u1", "pw");
  int rc = sl__cdc_check_server(c, f.server, "u1", &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: user 'u1' lacks the privilege REPLICATION SLAVE "
             "at %S (SHOW GRANTS lists none on *.*); change data capture "
             "reads the binary log as a replica: GRANT REPLICATION SLAVE ON "
             "*.* TO the user");
  mysql_close(c);

  err = NULL;
  c = connect_as(&f, "u2", "pw");
  rc = sl__cdc_check_server(c, f.server, "u2", &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: user 'u2' cannot run SHOW MASTER STATUS at %S "
             "(error 1227: Access denied; you need (at least one of) the "
             "SUPER, BINLOG MONITOR privilege(s) for this operation); change data "
             "capture reads binlog positions with it: GRANT REPLICATION "
             "CLIENT (BINLOG MONITOR from MariaDB 10.5) ON *.* TO the user");
  mysql_close(c);

  err = NULL;
  c = connect_as(&f, "u3", "pw");
  SL_ASSERT_OK_E(sl__cdc_check_server(c, f.server, "u3", &err), err);
  SL_ASSERT_OK_E(
      sl__cdc_check_select(c, f.server, "u3", "shop", "orders", &err), err);
  /* Privileges through a default role count too. */
  my_ok(f.m, "CREATE ROLE cdc_role");
  my_ok(f.m, "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO cdc_role");
  my_ok(f.m, "CREATE USER u4 IDENTIFIED BY 'pw'");
  my_ok(f.m, "GRANT cdc_role TO u4");
  my_ok(f.m, "SET DEFAULT ROLE cdc_role FOR u4");
  MYSQL *c4 = connect_as(&f, "u4", "pw");
  SL_ASSERT_OK_E(sl__cdc_check_server(c4, f.server, "u4", &err), err);
  mysql_close(c4);
  rc = sl__cdc_check_select(c, f.server, "u3", "shop", "secret", &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: user 'u3' cannot SELECT from `shop`.`secret` at %S "
             "(error 1142: SELECT command denied to user 'u3'@'127.0.0.1' "
             "for table `shop`.`secret`); the snapshot reads the table: "
             "GRANT SELECT ON `shop`.`secret` TO the user");
  mysql_close(c);
  fx_close(&f);
}

SL_TEST(check_keys) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.nokey (a INT, b VARCHAR(10), KEY (a))");
  my_ok(f.m, "CREATE TABLE shop.fl (id INT PRIMARY KEY, f DOUBLE, "
             "t TEXT, KEY (f))");
  sl__cdc_table_t *t = NULL;
  sl_error_t *err = NULL;
  int rc = sl__cdc_table_describe(f.m, f.server, "shop", "nokey", NULL, &t,
                                  &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: table `shop`.`nokey` at %S has no primary key; "
             "change data capture needs one (each chunk's binlog window is "
             "merged, and updates are applied, by primary key; a declared "
             "chunk_key only chooses how the snapshot is cut)");
  err = NULL;
  /* A declared chunk key makes it acceptable. */
  SL_ASSERT_OK_E(sl__cdc_table_describe(f.m, f.server, "shop", "nokey", "a",
                                        &t, &err),
                 err);
  SL_ASSERT_EQ_INT(t->n_key, 1);
  SL_ASSERT_EQ_INT(t->key[0], 0);
  SL_ASSERT_EQ_INT(t->n_pk, 0);
  SL_ASSERT_TRUE(t->is_declared_key);
  sl__cdc_table_destroy(t);
  rc = sl__cdc_table_describe(f.m, f.server, "shop", "nokey", "b", &t, &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: the chunk key `b` of `shop`.`nokey` at %S has no "
             "index that starts with it; planning and every chunk would "
             "scan the whole table (CREATE INDEX ... ON `shop`.`nokey` "
             "(`b`))");
  err = NULL;
  rc = sl__cdc_table_describe(f.m, f.server, "shop", "nokey", "zz", &t, &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: the chunk key `zz` of `shop`.`nokey` is not a "
             "column of that table at %S");
  err = NULL;
  rc = sl__cdc_table_describe(f.m, f.server, "shop", "fl", "f", &t, &err);
  expect_msg(&f, rc, SL_ENOTSUP, err,
             "mariadb-cdc: column `f` of `shop`.`fl` at %S has type double, "
             "which cannot be a chunk key (a chunk key is an integer, char, "
             "varchar, binary, varbinary, decimal, date, datetime or "
             "timestamp column)");
  err = NULL;
  my_ok(f.m, "CREATE TABLE shop.my (id INT PRIMARY KEY) ENGINE=MyISAM");
  rc = sl__cdc_table_describe(f.m, f.server, "shop", "my", NULL, &t, &err);
  expect_msg(&f, rc, SL_ENOTSUP, err,
             "mariadb-cdc: table `shop`.`my` at %S uses the engine MyISAM; "
             "the snapshot reads each chunk in a consistent snapshot at an "
             "exact binlog position, which only InnoDB gives (ALTER TABLE "
             "`shop`.`my` ENGINE=InnoDB)");
  err = NULL;
  my_ok(f.m, "CREATE VIEW shop.v AS SELECT * FROM shop.fl");
  rc = sl__cdc_table_describe(f.m, f.server, "shop", "v", NULL, &t, &err);
  expect_msg(&f, rc, SL_ENOTSUP, err,
             "mariadb-cdc: `shop`.`v` at %S is a VIEW, not a base table; "
             "only tables are captured");
  err = NULL;
  rc = sl__cdc_table_describe(f.m, f.server, "shop", "missing", NULL, &t,
                              &err);
  expect_msg(&f, rc, SL_ENOTFOUND, err,
             "mariadb-cdc: table `shop`.`missing` does not exist at %S (or "
             "the user cannot see it)");
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Types. */

/* Every supported type, with the sluice type it maps to. */
static const struct {
  const char *name, *ddl, *want;
} COLS[] = {
    {"c_tiny", "TINYINT", "int64"},
    {"c_utiny", "TINYINT UNSIGNED", "int64"},
    {"c_bool", "BOOLEAN", "int64"},
    {"c_small", "SMALLINT", "int64"},
    {"c_usmall", "SMALLINT UNSIGNED", "int64"},
    {"c_medium", "MEDIUMINT", "int64"},
    {"c_umedium", "MEDIUMINT UNSIGNED", "int64"},
    {"c_int", "INT", "int64"},
    {"c_uint", "INT UNSIGNED", "int64"},
    {"c_big", "BIGINT", "int64"},
    {"c_ubig", "BIGINT UNSIGNED", "int64"},
    {"c_year", "YEAR", "int64"},
    {"c_bit1", "BIT(1)", "int64"},
    {"c_bit12", "BIT(12)", "int64"},
    {"c_bit64", "BIT(64)", "int64"},
    {"c_time", "TIME(6)", "int64"},
    {"c_float", "FLOAT", "float64"},
    {"c_double", "DOUBLE", "float64"},
    {"c_dec", "DECIMAL(18,4)", "decimal(18,4)"},
    {"c_dec0", "DECIMAL(5,0)", "decimal(5,0)"},
    {"c_bigdec", "DECIMAL(30,4)", "string"},
    {"c_char", "CHAR(4)", "string"},
    {"c_varchar", "VARCHAR(40)", "string"},
    {"c_latin", "VARCHAR(20) CHARACTER SET latin1", "string"},
    {"c_ascii", "VARCHAR(20) CHARACTER SET ascii", "string"},
    {"c_tinytext", "TINYTEXT", "string"},
    {"c_text", "TEXT", "string"},
    {"c_mtext", "MEDIUMTEXT", "string"},
    {"c_ltext", "LONGTEXT", "string"},
    {"c_enum", "ENUM('a','bb')", "string"},
    {"c_set", "SET('x','y')", "string"},
    {"c_json", "JSON", "string"},
    {"c_binary", "BINARY(3)", "bytes"},
    {"c_varbinary", "VARBINARY(10)", "bytes"},
    {"c_tinyblob", "TINYBLOB", "bytes"},
    {"c_blob", "BLOB", "bytes"},
    {"c_mblob", "MEDIUMBLOB", "bytes"},
    {"c_lblob", "LONGBLOB", "bytes"},
    {"c_point", "POINT", "bytes"},
    {"c_date", "DATE", "timestamp"},
    {"c_dt", "DATETIME", "timestamp"},
    {"c_dt6", "DATETIME(6)", "timestamp"},
    {"c_ts", "TIMESTAMP(3) NULL", "timestamp"},
};
#define N_COLS (sizeof(COLS) / sizeof(COLS[0]))

static const char *const ROWS[] = {
    "(1, -128, 255, 1, -32768, 65535, -8388608, 16777215, -2147483648, "
    "4294967295, -9223372036854775808, 9223372036854775807, 1901, b'1', "
    "b'101010101010', b'1000000000000000000000000000000000000000000000000000"
    "000000000001', '-838:59:59.999999', "
    "0.1234567, 2.2250738585072014e-308, -99999999999999.9999, 12345, "
    "-12345678901234567890123456.7891, 'ab', "
    "'h\xc3\xa9llo w\xc3\xb6rld \xf0\x9f\x98\x80', 'caf\xc3\xa9', 'plain', "
    "'t', 'text', 'mtext', 'ltext', 'bb', 'x,y', '{\"k\": [1, 2]}', "
    "X'000102', X'00ff', X'', X'deadbeef', X'01', X'02', POINT(1.5, -2), "
    "'1000-01-01', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999', "
    "'1970-01-01 00:00:01.001')",
    "(2, 127, 0, 0, 32767, 0, 8388607, 0, 2147483647, 0, "
    "9223372036854775807, 0, 2155, b'0', b'0', b'0', '838:59:59', "
    "3.25e10, -1e308, 99999999999999.9999, -99999, 0.5, '', '', '', '', '', "
    "'', '', '', 'a', '', 'null', X'0100', X'', X'ff', X'', X'', X'', "
    "POINT(0, 0), '2024-02-29', '1969-12-31 23:59:59', "
    "'1969-07-20 20:17:40.123456', '2038-01-19 03:14:07.999')",
};

static void make_types_table(fx_t *f) {
  my_ok(f->m, "CREATE DATABASE shop CHARACTER SET utf8mb4");
  my_ok(f->m, "SET binlog_annotate_row_events = OFF");
  my_ok(f->m, "SET time_zone = '+00:00'");
  my_ok(f->m, "SET NAMES utf8mb4");
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_ASSERT_OK(sl_bytes_append_str(&b, "CREATE TABLE shop.types (id INT "
                                       "PRIMARY KEY"));
  for (size_t i = 0; i < N_COLS; i++)
    SL_ASSERT_OK(sl_bytes_printf(&b, ", %s %s", COLS[i].name, COLS[i].ddl));
  SL_ASSERT_OK(sl_bytes_append(&b, ")", 2));
  my_ok(f->m, (const char *)b.data);
  sl_bytes_clear(&b);
  SL_ASSERT_OK(sl_bytes_printf(&b, "INSERT INTO shop.types VALUES %s, %s",
                               ROWS[0], ROWS[1]));
  SL_ASSERT_OK(sl_bytes_append(&b, "", 1));
  my_ok(f->m, (const char *)b.data);
  /* A row of NULLs. */
  my_ok(f->m, "INSERT INTO shop.types (id) VALUES (3)");
  sl_bytes_close(&b);
}

/*
 * The server's own canonical form of column `name` of row id, to compare
 * with the value sluice read: integers and bits as SIGNED, decimals as
 * their unscaled SIGNED, temporals as microseconds since the epoch
 * (TIMESTAMPDIFF), text as HEX of its utf8mb4 bytes, bytes as HEX, floats
 * as their text.  NULL stays NULL.
 */
static char *server_value(fx_t *f, const char *name, const char *want,
                          int64_t id) {
  char sql[512];
  const char *expr;
  char e[256];
  if (!strcmp(want, "string"))
    snprintf(e, sizeof(e), "HEX(CONVERT(%s USING utf8mb4))", name);
  else if (!strcmp(want, "bytes"))
    snprintf(e, sizeof(e), "HEX(%s)", name);
  else if (!strcmp(want, "timestamp"))
    snprintf(e, sizeof(e),
             "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', %s)", name);
  else if (!strncmp(want, "decimal", 7))
    snprintf(e, sizeof(e), "CAST(%s * 10000 AS SIGNED)", name);
  else if (!strcmp(want, "float64"))
    snprintf(e, sizeof(e), "CAST(%s AS DOUBLE)", name);
  else if (!strcmp(want, "time"))
    snprintf(e, sizeof(e), "CAST(TIME_TO_SEC(%s) * 1000000 AS SIGNED)", name);
  else
    snprintf(e, sizeof(e), "CAST(%s AS SIGNED)", name);
  expr = e;
  snprintf(sql, sizeof(sql), "SELECT %s FROM shop.types WHERE id = %" PRId64,
           expr, id);
  char *text = NULL;
  sl_error_t *err = NULL;
  int rc = sl_my_query_text(f->m, sql, &text, &err);
  if (rc == SL_ENOTFOUND) {
    sl_error_destroy(err);
    return NULL;
  }
  SL_ASSERT_OK_E(rc, err);
  return text;
}

static void hex_of(const uint8_t *p, uint32_t n, char *out) {
  static const char *const H = "0123456789ABCDEF";
  for (uint32_t i = 0; i < n; i++) {
    out[2 * i] = H[p[i] >> 4];
    out[2 * i + 1] = H[p[i] & 15];
  }
  out[2 * n] = '\0';
}

/* Field i of row (a column of the types table) equals the server's
 * canonical form of it. */
static void check_field(fx_t *f, const sl__cdc_table_t *t,
                        const sl_row_t *row, uint32_t i, int64_t id) {
  const sl__cdc_col_t *col = &t->cols[i];
  char tn[32];
  sl_type_format(col->type, tn, sizeof(tn));
  const char *kind = !strncmp(tn, "decimal", 7)       ? "decimal"
                     : !strcmp(col->data_type, "time") ? "time"
                                                       : tn;
  char *want = server_value(f, col->name, kind, id);
  sl_value_t v;
  sl_row_get_value(row, i, &v);
  if (want == NULL) {
    if (!v.is_null) SL_TEST_FAIL("row %" PRId64 " %s: not NULL", id, col->name);
    return;
  }
  if (v.is_null) SL_TEST_FAIL("row %" PRId64 " %s: NULL", id, col->name);
  char got[4096];
  switch (col->type.id) {
  case SL_TYPE_STRING:
  case SL_TYPE_BYTES:
    SL_ASSERT_TRUE(v.u.s.len < sizeof(got) / 2);
    hex_of(v.u.s.ptr, v.u.s.len, got);
    break;
  case SL_TYPE_FLOAT64:
    if (strtod(want, NULL) != v.u.f)
      SL_TEST_FAIL("row %" PRId64 " %s: %.17g != %s", id, col->name, v.u.f,
                   want);
    sl_free(want);
    return;
  case SL_TYPE_DECIMAL: {
    int64_t x = v.u.i;
    for (int s = col->type.scale; s < 4; s++) x *= 10;
    snprintf(got, sizeof(got), "%" PRId64, x);
    break;
  }
  case SL_TYPE_BOOL:
    snprintf(got, sizeof(got), "%d", v.u.b ? 1 : 0);
    break;
  default:
    snprintf(got, sizeof(got), "%" PRId64, v.u.i);
  }
  if (strcmp(got, want) != 0)
    SL_TEST_FAIL("row %" PRId64 " column %s (%s): sluice %s, server %s", id,
                 col->name, col->column_type, got, want);
  sl_free(want);
}

SL_TEST(types_supported) {
  fx_t f;
  fx_open(&f);
  make_types_table(&f);
  sl__cdc_table_t *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_table_describe(f.m, f.server, "shop", "types", NULL,
                                        &t, &err),
                 err);
  SL_ASSERT_EQ_INT(t->n_cols, N_COLS + 1);
  SL_ASSERT_EQ_INT(sl_schema_n_fields(t->schema), N_COLS + 1);
  SL_ASSERT_EQ_INT(t->n_pk, 1);
  SL_ASSERT_EQ_INT(t->pk[0], 0);
  SL_ASSERT_TRUE(!t->cols[0].type.nullable);
  for (size_t i = 0; i < N_COLS; i++) {
    char tn[32];
    SL_ASSERT_EQ_STR(t->cols[i + 1].name, COLS[i].name);
    SL_ASSERT_EQ_STR(sl_type_format(t->cols[i + 1].type, tn, sizeof(tn)),
                     COLS[i].want);
    SL_ASSERT_TRUE(t->cols[i + 1].type.nullable);
  }
  /* Read the whole table as one chunk and compare field by field. */
  sl__cdc_chunks_t *cl = NULL;
  SL_ASSERT_OK_E(sl__cdc_plan_chunks(f.m, f.server, t, NULL, &cl, NULL, &err),
                 err);
  SL_ASSERT_EQ_INT(cl->n, 1);
  MYSQL *r = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f.srv, sl_server_port(f.srv), &r, &err), err);
  sl__cdc_rows_t rows;
  sl__cdc_rows_init(&rows, t->schema);
  sl__cdc_pos_t low, high;
  SL_ASSERT_OK_E(sl__cdc_read_chunk(r, f.server, t, cl, &cl->chunks[0], &low,
                                    &high, &rows, &err),
                 err);
  SL_ASSERT_EQ_INT(rows.n, 3);
  for (uint32_t k = 0; k < rows.n; k++) {
    sl_row_t row;
    sl__cdc_rows_get(&rows, k, &row);
    SL_ASSERT_OK(sl_row_validate(t->schema, row.data, row.len));
    SL_ASSERT_EQ_INT(sl_row_kind(&row), SL_ROW_INSERT);
    int64_t id = sl_row_get_i64(&row, 0);
    SL_ASSERT_EQ_INT(id, k + 1);
    for (uint32_t i = 1; i < t->n_cols; i++) check_field(&f, t, &row, i, id);
  }
  sl__cdc_rows_close(&rows);
  mysql_close(r);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* The rows of shop.types as the binlog decoder gives them (the after
 * images of its inserts), with the decoder's schema. */
static void binlog_rows(fx_t *f, const char *gtid_start, const char *table,
                        sl_schema_t **out_schema, sl__cdc_rows_t *out) {
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(f->srv),
                               .user = "root",
                               .server_id = 77,
                               .gtid_start = gtid_start,
                               .is_non_blocking = true};
  sl_binlog_reader_t *r = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_reader_open(&o, &r, &err), err);
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, sl__binlog_reader_checksum(r));
  sl_row_builder_t b;
  bool has_builder = false;
  sl_bytes_t scratch;
  sl_bytes_init(&scratch);
  *out_schema = NULL;
  for (;;) {
    const uint8_t *data;
    size_t len;
    int rc = sl__binlog_reader_next(r, &data, &len, &err);
    if (rc == SL_ENOTFOUND) break;
    SL_ASSERT_OK_E(rc, err);
    sl_binlog_event_t ev;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, data, len, &ev, &err), err);
    if (ev.type != SL_BLE_WRITE_ROWS_V1 && ev.type != 30 /* v2 */) continue;
    const sl_binlog_table_t *t = ev.u.rows.table;
    if (t == NULL || strcmp(t->table, table) != 0) continue;
    if (*out_schema == NULL) {
      SL_ASSERT_OK_E(sl__binlog_table_schema(t, out_schema, &err), err);
      SL_ASSERT_OK(sl_row_builder_init(&b, *out_schema));
      has_builder = true;
      sl__cdc_rows_init(out, *out_schema);
    }
    sl_binlog_rows_iter_t it;
    sl__binlog_rows_begin(&it, &ev);
    sl_binlog_value_t before[64], after[64];
    SL_ASSERT_TRUE(t->n_cols <= 64);
    while ((rc = sl__binlog_rows_next(&d, &it, before, after, &err)) == SL_OK) {
      sl_row_t row;
      SL_ASSERT_OK_E(sl__binlog_image_to_row(t, after, SL_ROW_INSERT, &b,
                                             &scratch, &row, &err),
                     err);
      SL_ASSERT_OK(sl__cdc_rows_add(out, &row));
    }
    SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
    sl_error_destroy(err);
    err = NULL;
  }
  SL_ASSERT_TRUE(*out_schema != NULL);
  if (has_builder) sl_row_builder_close(&b);
  sl_bytes_close(&scratch);
  sl__binlog_decoder_close(&d);
  sl__binlog_reader_close(r);
}

/* The snapshot and the binlog give one schema and the same values for the
 * same rows: every supported type, read both ways. */
SL_TEST(types_agree_with_binlog) {
  fx_t f;
  const char *settings[] = {"binlog-row-metadata=FULL", NULL};
  fx_open_with(&f, settings);
  /* Every column, POINT among the text columns too, and a BINARY(3) value
   * with a trailing zero byte (X'0100': the binlog drops the padding, the
   * decoder restores it, the snapshot reads X'010000'). */
  char *start = NULL;
  SL_ASSERT_OK(sl_my_query_text(f.m, "SELECT @@gtid_binlog_pos", &start,
                                NULL));
  make_types_table(&f);
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_table_describe(f.m, f.server, "shop", "types", NULL,
                                        &t, &err),
                 err);
  SL_ASSERT_OK_E(sl__cdc_plan_chunks(f.m, f.server, t, NULL, &cl, NULL, &err),
                 err);
  sl__cdc_rows_t snap;
  sl__cdc_rows_init(&snap, t->schema);
  sl__cdc_pos_t low, high;
  SL_ASSERT_OK_E(sl__cdc_read_chunk(f.m, f.server, t, cl, &cl->chunks[0], &low,
                                    &high, &snap, &err),
                 err);
  sl_schema_t *bs = NULL;
  sl__cdc_rows_t bin;
  binlog_rows(&f, start, "types", &bs, &bin);
  sl_free(start);
  /* One schema: names, types, nullability. */
  SL_ASSERT_EQ_INT(sl_schema_n_fields(bs), sl_schema_n_fields(t->schema));
  int n_diff = 0;
  for (uint32_t i = 0; i < sl_schema_n_fields(bs); i++) {
    const sl_field_t *a = sl_schema_field(t->schema, i);
    const sl_field_t *b = sl_schema_field(bs, i);
    char ta[32], tb[32];
    sl_type_format(a->type, ta, sizeof(ta));
    sl_type_format(b->type, tb, sizeof(tb));
    if (strcmp(a->name, b->name) != 0 || strcmp(ta, tb) != 0 ||
        a->type.nullable != b->type.nullable) {
      fprintf(stderr, "field %u: snapshot %s %s%s, binlog %s %s%s\n", i,
              a->name, ta, a->type.nullable ? "?" : "", b->name, tb,
              b->type.nullable ? "?" : "");
      n_diff++;
    }
  }
  SL_ASSERT_EQ_INT(n_diff, 0);
  /* The same values, field by field (row bytes can differ only in
   * layout, so values are compared). */
  SL_ASSERT_EQ_INT(bin.n, snap.n);
  for (uint32_t k = 0; k < snap.n; k++) {
    sl_row_t a, b;
    sl__cdc_rows_get(&snap, k, &a);
    sl__cdc_rows_get(&bin, k, &b);
    for (uint32_t i = 0; i < t->n_cols; i++) {
      sl_bytes_t ka, kb;
      sl_bytes_init(&ka);
      sl_bytes_init(&kb);
      SL_ASSERT_OK(sl_key_add_field(&ka, &a, i));
      SL_ASSERT_OK(sl_key_add_field(&kb, &b, i));
      if (ka.len != kb.len || memcmp(ka.data, kb.data, ka.len) != 0) {
        sl_bytes_t fa, fb;
        sl_bytes_init(&fa);
        sl_bytes_init(&fb);
        SL_ASSERT_OK(sl_value_format(&a, i, &fa));
        SL_ASSERT_OK(sl_value_format(&b, i, &fb));
        fprintf(stderr, "row %u %s: snapshot '%.*s', binlog '%.*s'\n", k,
                t->cols[i].name, (int)fa.len, (const char *)fa.data,
                (int)fb.len, (const char *)fb.data);
        sl_bytes_close(&fa);
        sl_bytes_close(&fb);
        n_diff++;
      }
      sl_bytes_close(&ka);
      sl_bytes_close(&kb);
    }
  }
  SL_ASSERT_EQ_INT(n_diff, 0);
  sl__cdc_rows_close(&bin);
  sl_schema_unref(bs);
  sl__cdc_rows_close(&snap);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

SL_TEST(types_unsupported) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  struct {
    const char *ddl, *type, *why;
  } cases[] = {
      {"UUID", "uuid",
       "the binlog carries it in the server's internal binary form, which "
       "sluice does not map yet"},
      {"INET6", "inet6",
       "the binlog carries it in the server's internal binary form, which "
       "sluice does not map yet"},
      {"INET4", "inet4",
       "the binlog carries it in the server's internal binary form, which "
       "sluice does not map yet"},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    char sql[256], want[1024];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE shop.t%zu (id INT PRIMARY KEY, ok INT, bad %s)", k,
             cases[k].ddl);
    my_ok(f.m, sql);
    char name[16];
    snprintf(name, sizeof(name), "t%zu", k);
    snprintf(want, sizeof(want),
             "mariadb-cdc: column `bad` of `shop`.`%s` at %%S: type %s is not "
             "supported by mariadb-cdc (%s; docs/cdc-mariadb.md lists the "
             "supported types)",
             name, cases[k].type, cases[k].why);
    sl__cdc_table_t *t = NULL;
    sl_error_t *err = NULL;
    int rc = sl__cdc_table_describe(f.m, f.server, "shop", name, NULL, &t,
                                    &err);
    expect_msg(&f, rc, SL_ENOTSUP, err, want);
  }
  /* Text in a character set the binlog side does not map. */
  my_ok(f.m, "CREATE TABLE shop.cs (id INT PRIMARY KEY, bad VARCHAR(10) "
             "CHARACTER SET ucs2)");
  sl__cdc_table_t *t = NULL;
  sl_error_t *err = NULL;
  int rc = sl__cdc_table_describe(f.m, f.server, "shop", "cs", NULL, &t, &err);
  expect_msg(&f, rc, SL_ENOTSUP, err,
             "mariadb-cdc: column `bad` of `shop`.`cs` at %S: character set "
             "ucs2 is not supported by mariadb-cdc (utf8mb3, utf8mb4, ascii, "
             "latin1 and binary are)");
  fx_close(&f);
}

/* A bigint unsigned value above 2^63-1 stops the reader with the column
 * named (the binlog side refuses it the same way). */
SL_TEST(types_bigint_unsigned_overflow) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.u (id BIGINT UNSIGNED PRIMARY KEY)");
  my_ok(f.m, "INSERT INTO shop.u VALUES (1), (9223372036854775807), "
             "(9223372036854775808)");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(
      sl__cdc_table_describe(f.m, f.server, "shop", "u", NULL, &t, &err), err);
  SL_ASSERT_OK_E(sl__cdc_plan_chunks(f.m, f.server, t, NULL, &cl, NULL, &err),
                 err);
  sl__cdc_rows_t rows;
  sl__cdc_rows_init(&rows, t->schema);
  sl__cdc_pos_t low, high;
  int rc = sl__cdc_read_chunk(f.m, f.server, t, cl, &cl->chunks[cl->n - 1],
                              &low, &high, &rows, &err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  const char *want = "mariadb-cdc: column `id` of `shop`.`u`: ";
  if (strncmp(sl_error_message(err), want, strlen(want)) != 0 ||
      strstr(sl_error_message(err), "9223372036854775808") == NULL)
    SL_TEST_FAIL("message: %s", sl_error_message(err));
  sl_error_destroy(err);
  sl__cdc_rows_close(&rows);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* A zero date has no timestamp: the reader stops with the column named. */
SL_TEST(types_zero_date_refused) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "SET SESSION sql_mode = ''");
  my_ok(f.m, "CREATE TABLE shop.z (id INT PRIMARY KEY, d DATETIME)");
  my_ok(f.m, "INSERT INTO shop.z VALUES (1, '0000-00-00 00:00:00')");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(
      sl__cdc_table_describe(f.m, f.server, "shop", "z", NULL, &t, &err), err);
  SL_ASSERT_OK_E(sl__cdc_plan_chunks(f.m, f.server, t, NULL, &cl, NULL, &err),
                 err);
  sl__cdc_rows_t rows;
  sl__cdc_rows_init(&rows, t->schema);
  sl__cdc_pos_t low, high;
  int rc = sl__cdc_read_chunk(f.m, f.server, t, cl, &cl->chunks[0], &low,
                              &high, &rows, &err);
  SL_ASSERT_EQ_INT(rc, SL_EPARSE);
  SL_ASSERT_EQ_STR(sl_error_message(err),
                   "mariadb-cdc: column `d` of `shop`.`z`: '0000-00-00 "
                   "00:00:00' (a zero date or a date with a zero month or "
                   "day) has no timestamp value");
  sl_error_destroy(err);
  /* The connection is still usable. */
  SL_ASSERT_EQ_INT(my_int(f.m, "SELECT COUNT(*) FROM shop.z"), 1);
  sl__cdc_rows_close(&rows);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Chunks. */

/* Round trips of the last check_plan's membership checker. */
static uint64_t last_member_queries;

/* The row's chunk key as text, for messages. */
static void key_text(const sl__cdc_table_t *t, const sl_row_t *row,
                     char *out, size_t size) {
  size_t at = 0;
  out[0] = '\0';
  for (uint32_t k = 0; k < t->n_key && at + 1 < size; k++) {
    uint32_t fi = t->key[k];
    int w;
    if (sl_row_is_null(row, fi)) w = snprintf(out + at, size - at, "NULL,");
    else if (t->cols[fi].conv == SL_CDC_CONV_INT)
      w = snprintf(out + at, size - at, "%" PRId64 ",", sl_row_get_i64(row, fi));
    else {
      sl_slice_t v = sl_row_get_str(row, fi);
      w = snprintf(out + at, size - at, "'%.*s',", (int)v.len, (const char *)v.ptr);
    }
    if (w < 0) break;
    at += (size_t)w;
  }
}

/*
 * Check a plan with the server's own counting: every row of the table
 * lies in exactly one chunk (the sum of the chunks' conditions is 1 for
 * every row, NULL counting as 0), the chunks' counts add up to the
 * table's, and no chunk holds more than max_rows rows (0: no bound).
 * Then read every chunk and compare the union with SELECT *: same count,
 * and every key once.  Returns the number of chunks.
 */
static uint32_t check_plan(fx_t *f, const sl__cdc_table_t *t,
                           const sl__cdc_chunks_t *cl, int64_t max_rows) {
  char tbl[256];
  snprintf(tbl, sizeof(tbl), "`%s`.`%s`", t->db, t->name);
  sl_bytes_t sum, q;
  sl_bytes_init(&sum);
  sl_bytes_init(&q);
  int64_t total = 0;
  char sql[512];
  snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s", tbl);
  int64_t n_rows = my_int(f->m, sql);
  for (uint32_t i = 0; i < cl->n; i++) {
    sl_bytes_t w;
    sl_bytes_init(&w);
    SL_ASSERT_OK(sl__cdc_chunk_where(cl, &cl->chunks[i], &w));
    SL_ASSERT_OK(sl_bytes_printf(&sum, "%sCOALESCE((%.*s), 0)", i ? " + " : "",
                                 (int)w.len, (const char *)w.data));
    sl_bytes_clear(&q);
    SL_ASSERT_OK(sl_bytes_printf(&q, "SELECT COUNT(*) FROM %s WHERE %.*s%c",
                                 tbl, (int)w.len, (const char *)w.data, 0));
    int64_t c = my_int(f->m, (const char *)q.data);
    if (max_rows > 0 && c > max_rows)
      SL_TEST_FAIL("chunk %u holds %" PRId64 " rows, more than %" PRId64, i,
                   c, max_rows);
    total += c;
    sl_bytes_close(&w);
  }
  SL_ASSERT_EQ_INT(total, n_rows);
  sl_bytes_clear(&q);
  SL_ASSERT_OK(sl_bytes_printf(&q, "SELECT COUNT(*) FROM %s WHERE (%.*s) <> 1%c",
                               tbl, (int)sum.len, (const char *)sum.data, 0));
  SL_ASSERT_EQ_INT(my_int(f->m, (const char *)q.data), 0);

  /* The chunk reader over every chunk: each primary key once. */
  sl_error_t *err = NULL;
  MYSQL *r = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &r, &err),
                 err);
  int64_t seen = 0;
  bool has_str = false;
  uint64_t n_unsure = 0;
  for (uint32_t k = 0; k < cl->n_key; k++)
    has_str |= cl->key_kind[k] == SL_CDC_KEY_STR;
  MYSQL *mc = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &mc, &err),
                 err);
  SL_ASSERT_OK_E(sl__cdc_session_setup(mc, f->server, &err), err);
  sl__cdc_member_t *mem = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_open(mc, f->server, t, cl, &mem, &err), err);
  my_ok(f->m, "CREATE TEMPORARY TABLE shop.seen (k VARBINARY(512) PRIMARY KEY)");
  for (uint32_t i = 0; i < cl->n; i++) {
    sl__cdc_rows_t rows;
    sl__cdc_rows_init(&rows, t->schema);
    sl__cdc_pos_t low, high;
    SL_ASSERT_OK_E(sl__cdc_read_chunk(r, f->server, t, cl, &cl->chunks[i],
                                      &low, &high, &rows, &err),
                   err);
    int cmp = 9;
    SL_ASSERT_OK_E(sl__cdc_pos_cmp(&low, &high, &cmp, &err), err);
    SL_ASSERT_TRUE(cmp <= 0);
    for (uint32_t k = 0; k < rows.n; k++) {
      sl_row_t row;
      sl__cdc_rows_get(&rows, k, &row);
      /* sluice's own membership test agrees with the server's WHERE:
       * the row is in chunk i and in no other (unless a string column
       * had to decide: refused). */
      /* The membership checker (every key kind, strings in their
       * collation) agrees too: find gives chunk i, contains says in i
       * only. */
      uint32_t found = UINT32_MAX;
      SL_ASSERT_OK_E(sl__cdc_member_find(mem, &row, &found, &err), err);
      if (found != i) {
        char kv[256];
        key_text(t, &row, kv, sizeof(kv));
        SL_TEST_FAIL("row %u (key %s) of chunk %u: the checker finds chunk "
                     "%u", k, kv, i, found);
      }
      for (uint32_t j = 0; j < cl->n; j++) {
        bool is_in = false;
        SL_ASSERT_OK_E(
            sl__cdc_member_contains(mem, &cl->chunks[j], &row, &is_in, &err),
            err);
        SL_ASSERT_TRUE(is_in == (j == i));
      }
      for (uint32_t j = 0; j < cl->n; j++) {
        bool is_in = false;
        int rc = sl__cdc_chunk_contains(cl, &cl->chunks[j], t, &row, &is_in,
                                        &err);
        if (has_str && rc == SL_ENOTSUP) { /* decided by a string */
          sl_error_destroy(err);
          err = NULL;
          n_unsure++;
          continue;
        }
        SL_ASSERT_OK_E(rc, err);
        if (is_in != (j == i))
          SL_TEST_FAIL("row %u of chunk %u: sluice says %s chunk %u", k, i,
                       is_in ? "in" : "not in", j);
      }
      sl_bytes_t key;
      sl_bytes_init(&key);
      uint32_t n_pk = t->n_pk ? t->n_pk : t->n_cols;
      for (uint32_t j = 0; j < n_pk; j++)
        SL_ASSERT_OK(
            sl_key_add_field(&key, &row, t->n_pk ? t->pk[j] : j));
      char hex[1100];
      SL_ASSERT_TRUE(key.len < 512);
      hex_of(key.data, (uint32_t)key.len, hex);
      /* A duplicate key fails the insert (for tables without a PK the
       * whole row is the key, and the test data has no equal rows). */
      char ins[1200];
      snprintf(ins, sizeof(ins), "INSERT INTO shop.seen VALUES (X'%s')", hex);
      my_ok(f->m, ins);
      sl_bytes_close(&key);
      seen++;
    }
    sl__cdc_rows_close(&rows);
  }
  SL_ASSERT_EQ_INT(seen, n_rows);
  if (!has_str) SL_ASSERT_EQ_INT(n_unsure, 0);
  my_ok(f->m, "DROP TEMPORARY TABLE shop.seen");
  last_member_queries = sl__cdc_member_queries(mem);
  sl__cdc_member_close(mem);
  mysql_close(mc);
  mysql_close(r);
  sl_bytes_close(&sum);
  sl_bytes_close(&q);
  return cl->n;
}

static sl__cdc_chunks_t *plan(fx_t *f, const char *table, const char *key,
                              uint64_t chunk_rows, bool want_even,
                              sl__cdc_table_t **out_t) {
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(
      sl__cdc_table_describe(f->m, f->server, "shop", table, key, out_t, &err),
      err);
  sl__cdc_plan_opts_t o = {.chunk_rows = chunk_rows};
  sl__cdc_chunks_t *cl = NULL;
  bool is_even = !want_even;
  SL_ASSERT_OK_E(
      sl__cdc_plan_chunks(f->m, f->server, *out_t, &o, &cl, &is_even, &err),
      err);
  SL_ASSERT_EQ_INT(is_even, want_even);
  /* The plan survives its codec. */
  sl_bytes_t b, b2;
  sl_bytes_init(&b);
  sl_bytes_init(&b2);
  SL_ASSERT_OK(sl__cdc_chunks_encode(cl, &b));
  sl__cdc_chunks_t *back = NULL;
  SL_ASSERT_OK_E(sl__cdc_chunks_decode(b.data, b.len, &back, &err), err);
  SL_ASSERT_OK(sl__cdc_chunks_encode(back, &b2));
  SL_ASSERT_EQ_INT(b.len, b2.len);
  SL_ASSERT_TRUE(memcmp(b.data, b2.data, b.len) == 0);
  sl_bytes_close(&b);
  sl_bytes_close(&b2);
  sl__cdc_chunks_free(cl);
  return back; /* the decoded list is what the tests use */
}

static void fill(fx_t *f, const char *table, const char *select) {
  char sql[512];
  snprintf(sql, sizeof(sql), "INSERT INTO shop.%s %s", table, select);
  my_ok(f->m, sql);
}

SL_TEST(chunks_dense_int) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.d (id BIGINT PRIMARY KEY, v INT)");
  fill(&f, "d", "SELECT seq, seq % 7 FROM seq_1_to_10000");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "d", NULL, 1000, true, &t);
  /* Even ranges of 1000 keys: bounds 1001, 2001, ... 9001. */
  SL_ASSERT_EQ_INT(cl->n, 10);
  SL_ASSERT_TRUE(cl->chunks[0].low == NULL);
  SL_ASSERT_EQ_INT(cl->chunks[0].high[0].i, 1001);
  SL_ASSERT_EQ_INT(cl->chunks[9].low[0].i, 9001);
  SL_ASSERT_TRUE(cl->chunks[9].high == NULL);
  check_plan(&f, t, cl, 1000);
  /* Rows written after planning, beyond both ends, still have a chunk. */
  my_ok(f.m, "INSERT INTO shop.d VALUES (-5, 0), (0, 0), (20000, 0)");
  check_plan(&f, t, cl, 0);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

SL_TEST(chunks_sparse_int) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.s (id BIGINT PRIMARY KEY, v INT)");
  /* 3000 keys spread over 10^12: far above 1000 keys per row. */
  fill(&f, "s", "SELECT CAST(seq AS SIGNED) * CAST(seq AS SIGNED) * 100003 - 5000000000, seq FROM "
                "seq_1_to_3000");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "s", NULL, 250, false, &t);
  SL_ASSERT_EQ_INT(cl->n, 12);
  check_plan(&f, t, cl, 250);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

SL_TEST(chunks_string_key) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  /* A case-insensitive collation: 'a' and 'A' sort together, and bounds
   * must compare as the column does. */
  my_ok(f.m, "CREATE TABLE shop.str (name VARCHAR(40) COLLATE "
             "utf8mb4_general_ci PRIMARY KEY, v INT)");
  fill(&f, "str", "SELECT CONCAT(IF(seq % 2, 'k', 'K'), LPAD(seq, 5, '0'), "
                  "IF(seq % 3 = 0, '\xc3\xa9', '''\\\\')), seq FROM "
                  "seq_1_to_1000");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "str", NULL, 97, false, &t);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_CDC_KEY_STR);
  SL_ASSERT_EQ_INT(cl->n, 11);
  check_plan(&f, t, cl, 97);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

SL_TEST(chunks_composite_key) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.comp (a INT, b VARCHAR(8), c DATE, v INT, "
             "PRIMARY KEY (a, b, c))");
  fill(&f, "comp", "SELECT seq % 7, CHAR(65 + seq % 5), "
                   "'2024-01-01' + INTERVAL seq DAY, seq FROM seq_1_to_1500");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "comp", NULL, 100, false, &t);
  SL_ASSERT_EQ_INT(t->n_key, 3);
  SL_ASSERT_EQ_INT(cl->n, 15);
  check_plan(&f, t, cl, 100);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  /* Timestamps and bytes, compared by sluice too (chunk_contains). */
  my_ok(f.m, "CREATE TABLE shop.tb (d DATETIME(6), ts TIMESTAMP(3), "
             "b VARBINARY(8), v INT, PRIMARY KEY (d, ts, b))");
  fill(&f, "tb", "SELECT '1969-12-31 23:00:00' + INTERVAL (seq % 9) * 1777 "
                 "MICROSECOND, FROM_UNIXTIME(100000 + seq % 4), "
                 "UNHEX(HEX(seq * 7919)), seq FROM seq_1_to_700");
  cl = plan(&f, "tb", NULL, 64, false, &t);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_CDC_KEY_TEXT);
  SL_ASSERT_EQ_INT(t->key_kind[2], SL_CDC_KEY_BIN);
  SL_ASSERT_EQ_INT(cl->n, 11);
  check_plan(&f, t, cl, 64);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

SL_TEST(chunks_declared_key_duplicates_and_nulls) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.dup (id INT PRIMARY KEY, c DECIMAL(10,2), "
             "KEY (c))");
  /* 40 distinct values, 25 rows each, and 30 NULLs. */
  fill(&f, "dup", "SELECT seq, IF(seq <= 30, NULL, (seq % 40) / 4) FROM "
                  "seq_1_to_1030");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "dup", "c", 60, false, &t);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_CDC_KEY_TEXT);
  SL_ASSERT_TRUE(cl->n >= 10);
  check_plan(&f, t, cl, 0);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  /* An integer declared key with every row equal: sampled, two chunks. */
  my_ok(f.m, "CREATE TABLE shop.same (id INT PRIMARY KEY, c INT, KEY (c))");
  fill(&f, "same", "SELECT seq, 7 FROM seq_1_to_300");
  cl = plan(&f, "same", "c", 50, false, &t);
  SL_ASSERT_EQ_INT(cl->n, 2);
  check_plan(&f, t, cl, 0);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

SL_TEST(chunks_empty_and_one_row) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.e (id INT PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop.es (id VARCHAR(5) PRIMARY KEY)");
  my_ok(f.m, "CREATE TABLE shop.one (id INT PRIMARY KEY)");
  my_ok(f.m, "INSERT INTO shop.one VALUES (42)");
  const char *tables[] = {"e", "es", "one"};
  for (int i = 0; i < 3; i++) {
    sl__cdc_table_t *t = NULL;
    sl__cdc_chunks_t *cl = plan(&f, tables[i], NULL, 10, i == 2, &t);
    SL_ASSERT_EQ_INT(cl->n, 1);
    SL_ASSERT_TRUE(cl->chunks[0].low == NULL && cl->chunks[0].high == NULL);
    check_plan(&f, t, cl, 0);
    /* Rows written later still fall in the single chunk. */
    char sql[128];
    snprintf(sql, sizeof(sql), "INSERT INTO shop.%s VALUES ('7')", tables[i]);
    my_ok(f.m, sql);
    check_plan(&f, t, cl, 0);
    sl__cdc_chunks_free(cl);
    sl__cdc_table_destroy(t);
  }
  fx_close(&f);
}

/*
 * Chunk membership for string keys in their collation: a non-unique
 * declared key of each collation whose values differ in case, accents and
 * trailing spaces (runs the collation calls equal but whose bytes differ),
 * planned, checked row by row against the server's WHERE, then again with
 * the upper-case and the space-padded form of every value added (so every
 * bound has rows equal to it in the collation but not byte for byte).
 */
static void member_case(fx_t *f, const char *table, const char *coldef,
                        const char *values, uint64_t chunk_rows,
                        bool want_server) {
  char sql[1024];
  snprintf(sql, sizeof(sql), "CREATE TABLE shop.%s (id INT AUTO_INCREMENT "
           "PRIMARY KEY, c %s, KEY (c))", table, coldef);
  my_ok(f->m, sql);
  snprintf(sql, sizeof(sql), "INSERT INTO shop.%s (c) %s", table, values);
  my_ok(f->m, sql);
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(f, table, "c", chunk_rows, false, &t);
  SL_ASSERT_EQ_INT(t->key_kind[0], SL_CDC_KEY_STR);
  SL_ASSERT_TRUE(cl->n >= 5);
  check_plan(f, t, cl, 0);
  SL_ASSERT_EQ_INT(last_member_queries > 0, want_server);
  snprintf(sql, sizeof(sql), "INSERT INTO shop.%s (c) SELECT UPPER(c) FROM "
           "shop.%s", table, table);
  my_ok(f->m, sql);
  snprintf(sql, sizeof(sql), "INSERT INTO shop.%s (c) SELECT CONCAT(c, ' ') "
           "FROM shop.%s WHERE id %% 3 = 0", table, table);
  my_ok(f->m, sql);
  check_plan(f, t, cl, 0);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
}

/* Words that collations order differently from their bytes: case,
 * accents, ligatures and sharp s, trailing spaces and characters below
 * the space (which PAD SPACE orders before the unpadded string). */
#define MEMBER_WORDS                                                       \
  "SELECT CONCAT(ELT(1 + seq % 14, 'a', 'A', '\xc3\xa1', '\xc3\x84', "     \
  "'ae', '\xc3\xa6', 'ss', '\xc3\x9f', 'b', 'B', 'e', '\xc3\xa9', "        \
  "'\xc3\x89', 'z'), IF(seq % 5 = 0, '', CHAR(48 + seq DIV 14 % 10)), "    \
  "ELT(1 + seq DIV 7 % 5, '', ' ', '  ', '\\t', CHAR(1))) FROM "            \
  "seq_1_to_700"

SL_TEST(member_string_collations) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  member_case(&f, "gci", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_general_ci", MEMBER_WORDS, 41, true);
  member_case(&f, "uci", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_unicode_ci", MEMBER_WORDS, 41, true);
  member_case(&f, "u3", "VARCHAR(20) CHARACTER SET utf8mb3 COLLATE "
              "utf8mb3_unicode_ci", MEMBER_WORDS, 41, true);
  /* latin1 (Windows-1252 in MariaDB: 0x80 is the euro sign), Swedish
   * order: å, ä, ö after z. */
  member_case(&f, "lat", "VARCHAR(20) CHARACTER SET latin1 COLLATE "
              "latin1_swedish_ci",
              "SELECT CONCAT(ELT(1 + seq % 9, 'a', 'A', '\xc3\xa5', "
              "'\xc3\xa4', '\xc3\xb6', 'z', 'Z', '\xe2\x82\xac', 'y'), "
              "CHAR(48 + seq DIV 9 % 10), ELT(1 + seq DIV 3 % 3, '', ' ', "
              "'\\t')) FROM seq_1_to_500", 31, true);
  /* Binary collations compare in sluice: PAD SPACE ('a' = 'a ', and
   * 'a\t' < 'a') and NO PAD ('a' < 'a\t' < 'a '). */
  member_case(&f, "bin", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_bin", MEMBER_WORDS, 41, false);
  member_case(&f, "nopad", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_nopad_bin", MEMBER_WORDS, 41, false);
  member_case(&f, "lbin", "VARCHAR(20) CHARACTER SET latin1 COLLATE "
              "latin1_bin",
              "SELECT CONCAT(ELT(1 + seq % 5, 'a', '\xc3\xa9', "
              "'\xe2\x82\xac', 'Z', ''), ELT(1 + seq DIV 5 % 3, '', ' ', "
              "'\\t'), seq % 7) FROM seq_1_to_300", 23, true);
  member_case(&f, "chr", "CHAR(12) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_general_ci", MEMBER_WORDS, 41, true);
  /* NO PAD case-insensitive ('a' < 'a ' there), and UCA 14.0.0. */
  member_case(&f, "gnp", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_general_nopad_ci", MEMBER_WORDS, 41, true);
  member_case(&f, "u14", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "
              "utf8mb4_uca1400_ai_ci", MEMBER_WORDS, 41, true);
  fx_close(&f);
}

/* A two-column primary key with a case-insensitive string column: tuples
 * compare left to right, the string in its collation, and the checker's
 * queries are few (cached by value, 64 bounds a query). */
SL_TEST(member_two_column_key) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.two (g INT, s VARCHAR(20) COLLATE "
             "utf8mb4_unicode_ci, v INT, PRIMARY KEY (g, s))");
  fill(&f, "two", "SELECT seq % 4, CONCAT(ELT(1 + seq % 6, 'a', 'B', "
                  "'\xc3\xa0', '\xc3\x89', 'c', 'D'), seq, "
                  "IF(seq % 2, '', '\xc3\x9f')), seq FROM seq_1_to_2000");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "two", NULL, 50, false, &t);
  SL_ASSERT_EQ_INT(cl->n, 40);
  check_plan(&f, t, cl, 50);
  /* 2000 distinct keys, each at most ceil(log_65(40)) = 1 query a key. */
  SL_ASSERT_TRUE(last_member_queries > 0 && last_member_queries <= 2000);
  /* Rows added after planning: case and accent variants of every key. */
  my_ok(f.m, "INSERT INTO shop.two SELECT g, CONCAT(s, 'x'), 0 FROM "
             "shop.two WHERE v % 5 = 0");
  my_ok(f.m, "INSERT INTO shop.two SELECT g + 1, LOWER(s), 0 FROM "
             "shop.two WHERE v % 7 = 0 AND g = 3");
  check_plan(&f, t, cl, 0);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  /* The string first: rows whose strings are equal in the collation (but
   * not byte for byte) are ordered by the integer, so the server decides
   * the first column and sluice the second. */
  my_ok(f.m, "CREATE TABLE shop.sg (s VARCHAR(20) COLLATE "
             "utf8mb4_general_ci, g INT, v INT, PRIMARY KEY (s, g))");
  fill(&f, "sg", "SELECT ELT(1 + seq % 8, 'a', 'A', '\xc3\xa1', 'a ', "
                 "'b', 'B', '\xc3\x9f', 's'), seq, seq FROM seq_1_to_480");
  cl = plan(&f, "sg", NULL, 30, false, &t);
  SL_ASSERT_TRUE(cl->n >= 15);
  check_plan(&f, t, cl, 30);
  SL_ASSERT_TRUE(last_member_queries > 0);
  my_ok(f.m, "INSERT INTO shop.sg SELECT UPPER(s), g + 5000, 0 FROM shop.sg");
  check_plan(&f, t, cl, 0);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* The chunk reader: LOW is exact. */

typedef struct reader_s {
  fx_t *f;
  const sl__cdc_table_t *t;
  const sl__cdc_chunks_t *cl;
  MYSQL *m;
  sl__cdc_pos_t low, high;
  sl__cdc_rows_t rows;
  int rc;
  sl_error_t *err;
} reader_t;

static void *reader_main(void *p) {
  reader_t *r = p;
  r->rc = sl__cdc_read_chunk(r->m, r->f->server, r->t, r->cl,
                             &r->cl->chunks[1], &r->low, &r->high, &r->rows,
                             &r->err);
  return NULL;
}

static bool in_chunk1(void *ctx, const sl_row_t *row) {
  const sl__cdc_chunks_t *cl = ctx;
  int64_t id = sl_row_get_i64(row, 0);
  return id >= cl->chunks[1].low[0].i && id < cl->chunks[1].high[0].i;
}

SL_TEST(reader_low_is_exact) {
  if (!sl_inject_is_enabled()) return;
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.r (id BIGINT PRIMARY KEY, v VARCHAR(20))");
  fill(&f, "r", "SELECT seq, CONCAT('v', seq) FROM seq_1_to_300");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "r", NULL, 100, true, &t);
  SL_ASSERT_EQ_INT(cl->n, 3); /* (-inf,101) [101,201) [201,+inf) */

  reader_t r = {.f = &f, .t = t, .cl = cl};
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f.srv, sl_server_port(f.srv), &r.m, &err),
                 err);
  sl__cdc_rows_init(&r.rows, t->schema);
  SL_ASSERT_OK(sl_inject_arm("cdc.snapshot.after_low", SL_INJECT_PAUSE, 1,
                             false));
  pthread_t th;
  SL_ASSERT_EQ_INT(pthread_create(&th, NULL, reader_main, &r), 0);
  SL_ASSERT_OK(sl_inject_wait_paused("cdc.snapshot.after_low", 60000));
  /* Between LOW and the SELECT: an update, a delete and an insert in the
   * chunk, and a change outside it. */
  sl__cdc_pos_t mid0, mid1;
  SL_ASSERT_OK_E(sl__cdc_pos_current(f.m, f.server, &mid0, &err), err);
  my_ok(f.m, "UPDATE shop.r SET v = 'changed' WHERE id = 150");
  my_ok(f.m, "DELETE FROM shop.r WHERE id = 160");
  my_ok(f.m, "INSERT INTO shop.r VALUES (1000, 'out'), (0, 'out')");
  SL_ASSERT_OK_E(sl__cdc_pos_current(f.m, f.server, &mid1, &err), err);
  sl_inject_release("cdc.snapshot.after_low");
  SL_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
  SL_ASSERT_OK_E(r.rc, r.err);
  sl_inject_reset();

  /* LOW is before the changes, HIGH after them. */
  int cmp = 9;
  SL_ASSERT_OK_E(sl__cdc_pos_cmp(&r.low, &mid0, &cmp, &err), err);
  SL_ASSERT_EQ_INT(cmp, 0);
  SL_ASSERT_OK_E(sl__cdc_pos_cmp(&mid1, &r.high, &cmp, &err), err);
  SL_ASSERT_TRUE(cmp <= 0);
  SL_ASSERT_OK_E(sl__cdc_pos_cmp(&r.low, &r.high, &cmp, &err), err);
  SL_ASSERT_EQ_INT(cmp, -1);
  SL_ASSERT_EQ_STR(r.low.file, mid0.file);
  SL_ASSERT_EQ_INT(r.low.offset, mid0.offset);

  /* The rows are the image at LOW: 101..200 as they were. */
  SL_ASSERT_EQ_INT(r.rows.n, 100);
  for (uint32_t k = 0; k < r.rows.n; k++) {
    sl_row_t row;
    sl__cdc_rows_get(&r.rows, k, &row);
    char want[32];
    snprintf(want, sizeof(want), "v%u", 101 + k);
    SL_ASSERT_EQ_INT(sl_row_get_i64(&row, 0), 101 + k);
    sl_slice_t v = sl_row_get_str(&row, 1);
    SL_ASSERT_EQ_INT(v.len, strlen(want));
    SL_ASSERT_TRUE(memcmp(v.ptr, want, v.len) == 0);
  }

  /* The backfill seam: the window's changes, made by hand as the decoder
   * will give them, merge into the image at HIGH, which equals the
   * chunk's SELECT now. */
  sl_row_builder_t b;
  SL_ASSERT_OK(sl_row_builder_init(&b, t->schema));
  uint8_t buf[6][64];
  sl_row_t imgs[6];
  struct {
    int64_t id;
    const char *v;
  } vals[6] = {{150, "v150"}, {150, "changed"}, {160, "v160"},
               {1000, "out"}, {0, "out"},       {0, ""}};
  for (int i = 0; i < 5; i++) {
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    sl_row_builder_set_i64(&b, 0, vals[i].id);
    SL_ASSERT_OK(sl_row_builder_set_str(&b, 1, vals[i].v,
                                        (uint32_t)strlen(vals[i].v)));
    sl_row_t row;
    SL_ASSERT_OK(sl_row_builder_finish(&b, &row, NULL));
    memcpy(buf[i], row.data, row.len);
    sl_row_view(&imgs[i], t->schema, buf[i], row.len);
  }
  sl_row_builder_close(&b);
  sl__cdc_change_t ch[] = {
      {SL_ROW_UPDATE_AFTER, &imgs[0], &imgs[1]},
      {SL_ROW_DELETE, &imgs[2], NULL},
      {SL_ROW_INSERT, NULL, &imgs[3]},
      {SL_ROW_INSERT, NULL, &imgs[4]},
  };
  SL_ASSERT_OK_E(sl__cdc_merge(&r.rows, t->pk, t->n_pk, ch, 4, in_chunk1,
                               (void *)cl, &err),
                 err);
  sl__cdc_rows_t now;
  sl__cdc_rows_init(&now, t->schema);
  sl__cdc_pos_t l2, h2;
  SL_ASSERT_OK_E(sl__cdc_read_chunk(r.m, f.server, t, cl, &cl->chunks[1], &l2,
                                    &h2, &now, &err),
                 err);
  SL_ASSERT_EQ_INT(now.n, 99);
  SL_ASSERT_EQ_INT(r.rows.n, now.n);
  for (uint32_t k = 0; k < now.n; k++)
    SL_ASSERT_TRUE(r.rows.len[k] == now.len[k] &&
                   memcmp(r.rows.data[k], now.data[k], now.len[k]) == 0);
  sl__cdc_rows_close(&now);
  sl__cdc_rows_close(&r.rows);
  mysql_close(r.m);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* The free server-id range. */

static sl_binlog_reader_t *replica(fx_t *f, uint32_t id, const char *host) {
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(f->srv),
                               .user = "root",
                               .server_id = id,
                               .gtid_start = "",
                               .report_host = host,
                               .report_port = 7};
  sl_binlog_reader_t *r = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_reader_open(&o, &r, &err), err);
  /* The dump thread runs (and the registration is listed) once the
   * first event arrives. */
  const uint8_t *d;
  size_t len;
  SL_ASSERT_OK_E(sl__binlog_reader_next(r, &d, &len, &err), err);
  return r;
}

SL_TEST(check_server_ids) {
  fx_t f;
  const char *const settings[] = {"server-id=5402", NULL};
  fx_open_with(&f, settings);
  sl_error_t *err = NULL;
  /* The server's own id. */
  int rc = sl__cdc_check_server_ids(f.m, f.server, 5400, 4, NULL, &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: server id 5402 of the range 5400-5403 (pipeline "
             "key server_id; one id per reader) is the server id of %S "
             "itself (@@server_id); MariaDB drops the older of two "
             "replication connections with one server id: set server_id to "
             "a range no server or replica uses, e.g. server_id: "
             "\"5403-5406\"");
  err = NULL;
  SL_ASSERT_OK_E(sl__cdc_check_server_ids(f.m, f.server, 5403, 4, NULL, &err),
                 err);
  SL_ASSERT_OK_E(sl__cdc_check_server_ids(f.m, f.server, 5398, 4, NULL, &err),
                 err);

  /* A connected replica (sluice's reader, registered): its id is taken. */
  sl_binlog_reader_t *r1 = replica(&f, 5405, "sluice shop-capture");
  rc = sl__cdc_check_server_ids(f.m, f.server, 5403, 4, NULL, &err);
  expect_msg(&f, rc, SL_EINVAL, err,
             "mariadb-cdc: server id 5405 of the range 5403-5406 (pipeline "
             "key server_id; one id per reader) is used by a replica "
             "connected to %S (SHOW SLAVE HOSTS: host 'sluice shop-capture', "
             "port 7); MariaDB drops the older of two replication "
             "connections with one server id: set server_id to a range no "
             "server or replica uses, e.g. server_id: \"5406-5409\"");
  err = NULL;
  /* One id, and the suggestion steps past both used ids. */
  rc = sl__cdc_check_server_ids(f.m, f.server, 5402, 1, NULL, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "the range 5402 (") != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "server_id: \"5403\"") != NULL);
  sl_error_destroy(err);
  err = NULL;
  rc = sl__cdc_check_server_ids(f.m, f.server, 5401, 4, NULL, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "server id 5402 ") != NULL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "\"5406-5409\"") != NULL);
  sl_error_destroy(err);
  err = NULL;
  /* The job's own readers (its report host) do not count. */
  SL_ASSERT_OK_E(sl__cdc_check_server_ids(f.m, f.server, 5403, 4,
                                          "sluice shop-capture", &err),
                 err);
  SL_ASSERT_OK_E(sl__cdc_check_server_ids(f.m, f.server, 5406, 100, NULL,
                                          &err),
                 err);

  /* Bad ranges. */
  rc = sl__cdc_check_server_ids(f.m, f.server, 0, 4, NULL, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_EQ_STR(sl_error_message(err), "mariadb-cdc: server id range of 4 "
                   "ids from 0 (pipeline key server_id) is not within "
                   "1-4294967295");
  sl_error_destroy(err);
  err = NULL;
  SL_ASSERT_EQ_INT(sl__cdc_check_server_ids(f.m, f.server, 4294967295u, 2,
                                            NULL, &err),
                   SL_EINVAL);
  sl_error_destroy(err);
  err = NULL;

  /* Two replication connections with one server id: MariaDB drops the
   * older one with error 4052 (after the events it had sent), and the
   * registration stays listed once. */
  sl_binlog_reader_t *r2 = replica(&f, 5405, "sluice other");
  my_ok(f.m, "CREATE DATABASE kick");
  const uint8_t *d;
  size_t len;
  while ((rc = sl__binlog_reader_next(r1, &d, &len, &err)) == SL_OK) {
  }
  SL_ASSERT_EQ_INT(rc, SL_EIO);
  SL_ASSERT_EQ_INT(sl__binlog_reader_errno(r1), 4052);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "A slave with the same "
                        "server_uuid/server_id is already connected") != NULL);
  sl_error_destroy(err);
  err = NULL;
  rc = sl__cdc_check_server_ids(f.m, f.server, 5405, 1, NULL, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  SL_ASSERT_TRUE(strstr(sl_error_message(err), "host 'sluice other'") != NULL);
  sl_error_destroy(err);
  err = NULL;
  sl__binlog_reader_close(r1);
  sl__binlog_reader_close(r2);

  /* Without REPLICATION MASTER ADMIN, SHOW SLAVE HOSTS is refused: only
   * @@server_id is checked. */
  my_ok(f.m, "CREATE USER cdc@'%' IDENTIFIED BY 'pw'");
  my_ok(f.m, "GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO "
             "cdc@'%'");
  MYSQL *u = connect_as(&f, "cdc", "pw");
  SL_ASSERT_OK_E(sl__cdc_check_server_ids(u, f.server, 5405, 1, NULL, &err),
                 err);
  rc = sl__cdc_check_server_ids(u, f.server, 5402, 1, NULL, &err);
  SL_ASSERT_EQ_INT(rc, SL_EINVAL);
  sl_error_destroy(err);
  mysql_close(u);
  fx_close(&f);
}

/* A MariaDB replica (a second server replicating from the first) is
 * listed by SHOW SLAVE HOSTS and its id refused. */
SL_TEST(check_server_ids_real_replica) {
  fx_t f;
  fx_open(&f);
  const char *const rs[] = {"server-id=5404", NULL};
  sl_server_opts_t o;
  sl_server_opts_init(&o, SL_SERVER_MARIADB);
  o.extra_settings = rs;
  sl_server_t *rsrv = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl_server_start(&o, &rsrv, &err), err);
  MYSQL *rm = NULL;
  SL_ASSERT_OK_E(sl_my_connect(rsrv, sl_server_port(rsrv), &rm, &err), err);
  char sql[256];
  snprintf(sql, sizeof(sql), "CHANGE MASTER TO MASTER_HOST='127.0.0.1', "
           "MASTER_PORT=%d, MASTER_USER='root', MASTER_USE_GTID=slave_pos",
           sl_server_port(f.srv));
  my_ok(rm, sql);
  my_ok(rm, "START SLAVE");
  /* Wait (bounded) until the replica has registered: it does so before
   * its dump starts. */
  int64_t n = 0;
  for (int i = 0; i < 3000 && n == 0; i++) {
    n = my_int(f.m, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                    "WHERE COMMAND = 'Binlog Dump'");
    if (n == 0) nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  SL_ASSERT_EQ_INT(n, 1);
  int rc = sl__cdc_check_server_ids(f.m, f.server, 5403, 2, NULL, &err);
  /* The replica reports its own address. */
  char want[1024];
  snprintf(want, sizeof(want),
           "mariadb-cdc: server id 5404 of the range 5403-5404 (pipeline "
           "key server_id; one id per reader) is used by a replica "
           "connected to %%S (SHOW SLAVE HOSTS: host '127.0.0.1', port %d); "
           "MariaDB drops the older of two replication connections with "
           "one server id: set server_id to a range no server or replica "
           "uses, e.g. server_id: \"5405-5406\"", sl_server_port(rsrv));
  expect_msg(&f, rc, SL_EINVAL, err, want);
  my_ok(rm, "STOP SLAVE");
  mysql_close(rm);
  sl_server_destroy(rsrv);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* Sharded tables into one output. */

static sl__cdc_table_t *describe_key(fx_t *f, const char *table,
                                     const char *key) {
  sl__cdc_table_t *t = NULL;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(
      sl__cdc_table_describe(f->m, f->server, "shop", table, key, &t, &err),
      err);
  return t;
}

static sl__cdc_table_t *describe(fx_t *f, const char *table) {
  return describe_key(f, table, NULL);
}

/* shop.o_1 with shop.<other>: agree (want NULL) or the message. */
static void agree_case(fx_t *f, const char *other, const char *want) {
  sl__cdc_table_t *t[3] = {describe(f, "o_1"), describe(f, "o_2"),
                           describe(f, other)};
  sl_error_t *err = NULL;
  int rc = sl__cdc_tables_agree(t, 3, f->server, &err);
  if (want == NULL) SL_ASSERT_OK_E(rc, err);
  else expect_msg(f, rc, SL_EINVAL, err, want);
  for (int i = 0; i < 3; i++) sl__cdc_table_destroy(t[i]);
}

SL_TEST(tables_agree) {
  fx_t f;
  fx_open(&f);
  my_ok(f.m, "CREATE DATABASE shop");
  const char *cols = "(id BIGINT NOT NULL, region CHAR(2) NOT NULL, "
                     "amount DECIMAL(10,2), note VARCHAR(40), "
                     "PRIMARY KEY (id, region))";
  const char *const same[] = {"o_1", "o_2", "o_same", NULL};
  char sql[512];
  for (int i = 0; same[i]; i++) {
    snprintf(sql, sizeof(sql), "CREATE TABLE shop.%s %s", same[i], cols);
    my_ok(f.m, sql);
  }
  /* Other MariaDB types with the same sluice types agree: int and
   * bigint are int64, varchar and text are string; a declared chunk key
   * does not matter. */
  my_ok(f.m, "CREATE TABLE shop.o_alike (id INT NOT NULL, region "
             "VARCHAR(5) NOT NULL, amount DECIMAL(10,2), note TEXT, "
             "PRIMARY KEY (id, region))");
  my_ok(f.m, "CREATE TABLE shop.o_type (id BIGINT NOT NULL, region CHAR(2) "
             "NOT NULL, amount DECIMAL(12,2), note VARCHAR(40), "
             "PRIMARY KEY (id, region))");
  my_ok(f.m, "CREATE TABLE shop.o_null (id BIGINT NOT NULL, region CHAR(2) "
             "NOT NULL, amount DECIMAL(10,2) NOT NULL, note VARCHAR(40), "
             "PRIMARY KEY (id, region))");
  my_ok(f.m, "CREATE TABLE shop.o_name (id BIGINT NOT NULL, region CHAR(2) "
             "NOT NULL, total DECIMAL(10,2), note VARCHAR(40), "
             "PRIMARY KEY (id, region))");
  my_ok(f.m, "CREATE TABLE shop.o_more (id BIGINT NOT NULL, region CHAR(2) "
             "NOT NULL, amount DECIMAL(10,2), note VARCHAR(40), x INT, "
             "PRIMARY KEY (id, region))");
  my_ok(f.m, "CREATE TABLE shop.o_pk (id BIGINT NOT NULL, region CHAR(2) "
             "NOT NULL, amount DECIMAL(10,2), note VARCHAR(40), "
             "PRIMARY KEY (region, id))");
  my_ok(f.m, "CREATE TABLE shop.o_bin (id BIGINT NOT NULL, region "
             "BINARY(2) NOT NULL, amount DECIMAL(10,2), note VARCHAR(40), "
             "PRIMARY KEY (id, region))");
  agree_case(&f, "o_same", NULL);
  agree_case(&f, "o_alike", NULL);
  agree_case(&f, "o_type",
             "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_type` at %S go "
             "into one output but differ: column `amount` is decimal(10,2) "
             "(decimal(10,2), nullable) against decimal(12,2) "
             "(decimal(12,2), nullable); tables captured into one output "
             "need the same columns, in the same order, with the same "
             "types, and the same primary and chunk keys");
  agree_case(&f, "o_null",
             "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_null` at %S go "
             "into one output but differ: column `amount` is decimal(10,2) "
             "(decimal(10,2), nullable) against decimal(10,2) "
             "(decimal(10,2), not null); tables captured into one output "
             "need the same columns, in the same order, with the same "
             "types, and the same primary and chunk keys");
  agree_case(&f, "o_name",
             "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_name` at %S go "
             "into one output but differ: column 3 is `amount` against "
             "`total`; tables captured into one output need the same "
             "columns, in the same order, with the same types, and the same "
             "primary and chunk keys");
  agree_case(&f, "o_more",
             "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_more` at %S go "
             "into one output but differ: 4 columns against 5; tables "
             "captured into one output need the same columns, in the same "
             "order, with the same types, and the same primary and chunk keys");
  agree_case(&f, "o_pk",
             "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_pk` at %S go "
             "into one output but differ: the primary key is (`id`, "
             "`region`) against (`region`, `id`); tables captured into one "
             "output need the same columns, in the same order, with the "
             "same types, and the same primary and chunk keys");
  agree_case(&f, "o_bin",
             "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_bin` at %S go "
             "into one output but differ: column `region` is char(2) "
             "(string, not null) against binary(2) (bytes, not null); "
             "tables captured into one output need the same columns, in the "
             "same order, with the same types, and the same primary and chunk keys");
  /* The chunk keys must agree too: a declared key adds the version
   * field to the output. */
  my_ok(f.m, "ALTER TABLE shop.o_1 ADD KEY (amount), ADD KEY (note)");
  my_ok(f.m, "ALTER TABLE shop.o_2 ADD KEY (amount), ADD KEY (note)");
  {
    sl__cdc_table_t *t[2] = {describe_key(&f, "o_1", "amount"),
                             describe(&f, "o_2")};
    sl_error_t *e2 = NULL;
    int rc = sl__cdc_tables_agree(t, 2, f.server, &e2);
    expect_msg(&f, rc, SL_EINVAL, e2,
               "mariadb-cdc: tables `shop`.`o_1` and `shop`.`o_2` at %S go "
               "into one output but differ: the chunk key is the declared "
               "chunk key `amount` against the primary key (`id`, `region`); "
               "tables captured into one output need the same columns, in "
               "the same order, with the same types, and the same primary "
               "and chunk keys");
    e2 = NULL;
    sl__cdc_table_destroy(t[1]);
    t[1] = describe_key(&f, "o_2", "note");
    rc = sl__cdc_tables_agree(t, 2, f.server, &e2);
    SL_ASSERT_EQ_INT(rc, SL_EINVAL);
    SL_ASSERT_TRUE(strstr(sl_error_message(e2), "the declared chunk key "
                          "`amount` against the declared chunk key `note`") !=
                   NULL);
    sl_error_destroy(e2);
    e2 = NULL;
    sl__cdc_table_destroy(t[1]);
    t[1] = describe_key(&f, "o_2", "amount");
    SL_ASSERT_OK_E(sl__cdc_tables_agree(t, 2, f.server, &e2), e2);
    sl__cdc_table_destroy(t[0]);
    sl__cdc_table_destroy(t[1]);
  }
  /* One table, or none, always agrees. */
  sl__cdc_table_t *one = describe(&f, "o_pk");
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_tables_agree(&one, 1, f.server, &err), err);
  SL_ASSERT_OK_E(sl__cdc_tables_agree(NULL, 0, f.server, &err), err);
  sl__cdc_table_destroy(one);
  fx_close(&f);
}

/* ------------------------------------------------------------------ */
/* DML at each snapshot phase, merged from the binlog window. */

/* The changes of shop.<table> in the binlog window (LOW, HIGH]: read
 * from LOW's GTID state, the transactions up to HIGH's state, decoded and
 * mapped to rows of t->schema (images kept in imgs). */
typedef struct window_s {
  sl__cdc_rows_t imgs;
  uint32_t n, cap;
  struct {
    sl_row_kind_t kind;
    int32_t before, after; /* indexes into imgs, -1: none */
  } *c;
} window_t;

static void window_add(window_t *w, sl_row_kind_t kind, int32_t before,
                       int32_t after) {
  if (w->n == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 16;
    w->c = realloc(w->c, w->cap * sizeof(*w->c));
    SL_ASSERT_TRUE(w->c != NULL);
  }
  w->c[w->n].kind = kind;
  w->c[w->n].before = before;
  w->c[w->n].after = after;
  w->n++;
}

static int32_t window_img(window_t *w, const sl_binlog_table_t *bt,
                          const sl_binlog_value_t *vals, sl_row_builder_t *b,
                          sl_bytes_t *scratch) {
  sl_row_t row;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__binlog_image_to_row(bt, vals, SL_ROW_INSERT, b, scratch,
                                         &row, &err),
                 err);
  SL_ASSERT_OK(sl__cdc_rows_add(&w->imgs, &row));
  return (int32_t)w->imgs.n - 1;
}

static void read_window(fx_t *f, const sl__cdc_table_t *t, const char *low,
                        const char *high, window_t *w) {
  sl_error_t *err = NULL;
  sl_binlog_gtid_state_t hs;
  SL_ASSERT_OK_E(sl__binlog_gtid_state_parse(high, &hs, &err), err);
  sl_binlog_reader_opts_t o = {.host = "127.0.0.1",
                               .port = sl_server_port(f->srv),
                               .user = "root",
                               .server_id = 78,
                               .gtid_start = low,
                               .is_non_blocking = true};
  sl_binlog_reader_t *r = NULL;
  SL_ASSERT_OK_E(sl__binlog_reader_open(&o, &r, &err), err);
  sl_binlog_decoder_t d;
  sl__binlog_decoder_init(&d, sl__binlog_reader_checksum(r));
  sl_schema_t *bs = NULL;
  sl_row_builder_t b;
  sl_bytes_t scratch;
  sl_bytes_init(&scratch);
  bool in_window = false;
  for (;;) {
    const uint8_t *data;
    size_t len;
    int rc = sl__binlog_reader_next(r, &data, &len, &err);
    if (rc == SL_ENOTFOUND) break;
    SL_ASSERT_OK_E(rc, err);
    sl_binlog_event_t ev;
    SL_ASSERT_OK_E(sl__binlog_decode(&d, data, len, &ev, &err), err);
    if (ev.type == SL_BLE_GTID) {
      uint64_t top = 0;
      for (uint32_t i = 0; i < hs.n; i++)
        if (hs.g[i].domain == ev.u.gtid.gtid.domain) top = hs.g[i].seq;
      in_window = ev.u.gtid.gtid.seq <= top;
      continue;
    }
    if (!in_window || (ev.type != SL_BLE_WRITE_ROWS_V1 &&
                       ev.type != SL_BLE_UPDATE_ROWS_V1 &&
                       ev.type != SL_BLE_DELETE_ROWS_V1))
      continue;
    const sl_binlog_table_t *bt = ev.u.rows.table;
    if (bt == NULL || strcmp(bt->schema, t->db) != 0 ||
        strcmp(bt->table, t->name) != 0)
      continue;
    if (bs == NULL) {
      SL_ASSERT_OK_E(sl__binlog_table_schema(bt, &bs, &err), err);
      SL_ASSERT_OK(sl_row_builder_init(&b, bs));
      /* The binlog's rows and the snapshot's share one layout. */
      SL_ASSERT_EQ_INT(bt->n_cols, t->n_cols);
      for (uint32_t i = 0; i < t->n_cols; i++) {
        const sl_field_t *x = sl_schema_field(bs, i);
        const sl_field_t *y = sl_schema_field(t->schema, i);
        SL_ASSERT_EQ_INT(x->type.id, y->type.id);
      }
    }
    sl_binlog_rows_iter_t it;
    sl__binlog_rows_begin(&it, &ev);
    sl_binlog_value_t before[16], after[16];
    SL_ASSERT_TRUE(bt->n_cols <= 16);
    while ((rc = sl__binlog_rows_next(&d, &it, before, after, &err)) ==
           SL_OK) {
      if (ev.type == SL_BLE_WRITE_ROWS_V1)
        window_add(w, SL_ROW_INSERT, -1, window_img(w, bt, after, &b, &scratch));
      else if (ev.type == SL_BLE_DELETE_ROWS_V1)
        window_add(w, SL_ROW_DELETE, window_img(w, bt, before, &b, &scratch),
                   -1);
      else {
        int32_t bi = window_img(w, bt, before, &b, &scratch);
        window_add(w, SL_ROW_UPDATE_AFTER, bi,
                   window_img(w, bt, after, &b, &scratch));
      }
    }
    SL_ASSERT_EQ_INT(rc, SL_ENOTFOUND);
    sl_error_destroy(err);
    err = NULL;
  }
  if (bs != NULL) {
    sl_row_builder_close(&b);
    sl_schema_unref(bs);
  }
  sl_bytes_close(&scratch);
  sl__binlog_decoder_close(&d);
  sl__binlog_reader_close(r);
}

typedef struct in_ctx_s {
  sl__cdc_member_t *m;
  const sl__cdc_chunk_t *ch;
  uint32_t n_calls;
} in_ctx_t;

static bool in_chunk_member(void *ctx, const sl_row_t *row) {
  in_ctx_t *c = ctx;
  bool in = false;
  sl_error_t *err = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_contains(c->m, c->ch, row, &in, &err), err);
  c->n_calls++;
  return in;
}

/* Whether two row sets hold the same rows (byte for byte), any order. */
static bool same_rows(const sl__cdc_rows_t *a, const sl__cdc_rows_t *b) {
  if (a->n != b->n) return false;
  for (uint32_t i = 0; i < a->n; i++) {
    bool found = false;
    for (uint32_t j = 0; j < b->n && !found; j++)
      found = a->len[i] == b->len[j] &&
              memcmp(a->data[i], b->data[j], a->len[i]) == 0;
    if (!found) return false;
  }
  return true;
}

/* Statements of one DML kind; "%W" is replaced by chunk 1's WHERE, "%L"
 * by its low bound's text (a string key) and "%P" by the phase (0, 1), so
 * the second phase changes other rows. */
typedef struct dml_s {
  const char *name;
  const char *sql[3];
} dml_t;

static void run_sql(fx_t *f, const sl__cdc_chunks_t *cl, const char *tmpl,
                    int phase) {
  sl_bytes_t w, q;
  sl_bytes_init(&w);
  sl_bytes_init(&q);
  SL_ASSERT_OK(sl__cdc_chunk_where(cl, &cl->chunks[1], &w));
  for (const char *p = tmpl; *p; p++) {
    if (p[0] == '%' && p[1] == 'W') {
      SL_ASSERT_OK(sl_bytes_append(&q, w.data, w.len));
      p++;
    } else if (p[0] == '%' && p[1] == 'P') {
      SL_ASSERT_OK(sl_bytes_printf(&q, "%d", phase));
      p++;
    } else if (p[0] == '%' && p[1] == 'L') {
      const sl__cdc_kv_t *lo = &cl->chunks[1].low[0];
      SL_ASSERT_OK(sl_bytes_append(&q, lo->p, lo->len));
      p++;
    } else {
      SL_ASSERT_OK(sl_bytes_append(&q, p, 1));
    }
  }
  SL_ASSERT_OK(sl_bytes_append(&q, "", 1));
  my_ok(f->m, (const char *)q.data);
  sl_bytes_close(&w);
  sl_bytes_close(&q);
}

/*
 * For each phase (the reader paused at cdc.snapshot.after_low, or at
 * cdc.snapshot.before_high) and each DML kind: read chunk 1 while the DML
 * runs at that point, read the binlog window (LOW, HIGH], merge it with
 * the membership checker as the in-chunk predicate, and the rows equal
 * the chunk's SELECT at HIGH (nothing is written after HIGH, checked by
 * @@gtid_binlog_pos), while the rows before the merge do not.
 */
static void phases(fx_t *f, const sl__cdc_table_t *t,
                   const sl__cdc_chunks_t *cl, const dml_t *dml, int n_dml) {
  static const char *const points[] = {"cdc.snapshot.after_low",
                                       "cdc.snapshot.before_high"};
  sl_error_t *err = NULL;
  MYSQL *mc = NULL;
  SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &mc, &err),
                 err);
  SL_ASSERT_OK_E(sl__cdc_session_setup(mc, f->server, &err), err);
  sl__cdc_member_t *mem = NULL;
  SL_ASSERT_OK_E(sl__cdc_member_open(mc, f->server, t, cl, &mem, &err), err);
  for (int ph = 0; ph < 2; ph++) {
    for (int k = 0; k < n_dml; k++) {
      reader_t r = {.f = f, .t = t, .cl = cl};
      SL_ASSERT_OK_E(sl_my_connect(f->srv, sl_server_port(f->srv), &r.m, &err),
                     err);
      sl__cdc_rows_init(&r.rows, t->schema);
      SL_ASSERT_OK(sl_inject_arm(points[ph], SL_INJECT_PAUSE, 1, false));
      pthread_t th;
      SL_ASSERT_EQ_INT(pthread_create(&th, NULL, reader_main, &r), 0);
      SL_ASSERT_OK(sl_inject_wait_paused(points[ph], 60000));
      for (int s = 0; s < 3 && dml[k].sql[s]; s++)
        run_sql(f, cl, dml[k].sql[s], ph);
      sl_inject_release(points[ph]);
      SL_ASSERT_EQ_INT(pthread_join(th, NULL), 0);
      SL_ASSERT_OK_E(r.rc, r.err);
      sl_inject_reset();
      SL_ASSERT_EQ_INT(mysql_query(f->m, "SELECT @@gtid_binlog_pos"), 0);
      MYSQL_RES *gr = mysql_store_result(f->m);
      SL_ASSERT_TRUE(gr != NULL);
      MYSQL_ROW grow = mysql_fetch_row(gr);
      SL_ASSERT_TRUE(grow != NULL && grow[0] != NULL);
      SL_ASSERT_EQ_STR(grow[0], r.high.gtid);
      mysql_free_result(gr);

      window_t w;
      memset(&w, 0, sizeof(w));
      sl__cdc_rows_init(&w.imgs, t->schema);
      read_window(f, t, r.low.gtid, r.high.gtid, &w);
      SL_ASSERT_TRUE(w.n > 0);
      sl_row_t *views = calloc(w.imgs.n + 1, sizeof(*views));
      sl__cdc_change_t *chg = calloc(w.n + 1, sizeof(*chg));
      SL_ASSERT_TRUE(views && chg);
      for (uint32_t i = 0; i < w.imgs.n; i++)
        sl__cdc_rows_get(&w.imgs, i, &views[i]);
      for (uint32_t i = 0; i < w.n; i++) {
        chg[i].kind = w.c[i].kind;
        chg[i].before = w.c[i].before >= 0 ? &views[w.c[i].before] : NULL;
        chg[i].after = w.c[i].after >= 0 ? &views[w.c[i].after] : NULL;
      }
      sl__cdc_rows_t at_high;
      sl__cdc_rows_init(&at_high, t->schema);
      sl__cdc_pos_t l2, h2;
      SL_ASSERT_OK_E(sl__cdc_read_chunk(r.m, f->server, t, cl, &cl->chunks[1],
                                        &l2, &h2, &at_high, &err),
                     err);
      if (same_rows(&r.rows, &at_high))
        SL_TEST_FAIL("%s at %s: the chunk's rows did not change", dml[k].name,
                     points[ph]);
      in_ctx_t ic = {.m = mem, .ch = &cl->chunks[1]};
      SL_ASSERT_OK_E(sl__cdc_merge(&r.rows, t->pk, t->n_pk, chg, w.n,
                                   in_chunk_member, &ic, &err),
                     err);
      if (!same_rows(&r.rows, &at_high))
        SL_TEST_FAIL("%s at %s: %u merged rows, %u at HIGH, not the same",
                     dml[k].name, points[ph], r.rows.n, at_high.n);
      /* Every after image went through the checker. */
      uint32_t n_after = 0;
      for (uint32_t i = 0; i < w.n; i++) n_after += chg[i].after != NULL;
      SL_ASSERT_EQ_INT(ic.n_calls, n_after);
      sl__cdc_rows_close(&at_high);
      free(views);
      free(chg);
      free(w.c);
      sl__cdc_rows_close(&w.imgs);
      sl__cdc_rows_close(&r.rows);
      mysql_close(r.m);
    }
  }
  sl__cdc_member_close(mem);
  mysql_close(mc);
}

/* Primary-key chunks: a chunk-key change is a primary-key change that
 * crosses chunks. */
SL_TEST(phases_pk_chunks) {
  if (!sl_inject_is_enabled()) return;
  fx_t f;
  const char *const settings[] = {"binlog-row-metadata=FULL", NULL};
  fx_open_with(&f, settings);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.pk (id INT PRIMARY KEY, v VARCHAR(20), "
             "c INT)");
  fill(&f, "pk", "SELECT seq, CONCAT('v', seq), seq % 10 FROM "
                 "seq_1_to_299_step_2");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "pk", NULL, 50, true, &t);
  /* (-inf,100) [100,199) [199,298) [298,+inf): the DML below is about
   * chunk 1. */
  SL_ASSERT_EQ_INT(cl->n, 4);
  SL_ASSERT_EQ_INT(cl->chunks[1].low[0].i, 100);
  SL_ASSERT_EQ_INT(cl->chunks[1].high[0].i, 199);
  static const dml_t dml[] = {
      {"insert", {"INSERT INTO shop.pk VALUES (150 + 2 * %P, 'new', 0), "
                  "(250 + 2 * %P, 'out', 0), (1, 'x', 0) ON DUPLICATE KEY "
                  "UPDATE v = CONCAT(v, 'dup')", NULL}},
      {"update", {"UPDATE shop.pk SET v = 'upd', c = c + 1 WHERE id IN "
                  "(151, 153, 51)", NULL}},
      {"delete", {"DELETE FROM shop.pk WHERE id IN (161 + 2 * %P, "
                  "261 + 2 * %P)", NULL}},
      {"primary key change", {"UPDATE shop.pk SET id = 170 + 4 * %P WHERE "
                              "id = 171 + 4 * %P", NULL}},
      {"chunk key change", {"UPDATE shop.pk SET id = 1181 + 2 * %P WHERE "
                            "id = 181 + 2 * %P",
                            "UPDATE shop.pk SET id = 190 + 2 * %P WHERE "
                            "id = 51 + 2 * %P", NULL}},
  };
  phases(&f, t, cl, dml, 5);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}

/* A declared, non-unique chunk key in a case-insensitive collation: the
 * checker asks the server (a key equal to the chunk's low bound in the
 * collation, in the other case, lies in the chunk). */
SL_TEST(phases_declared_string_key) {
  if (!sl_inject_is_enabled()) return;
  fx_t f;
  const char *const settings[] = {"binlog-row-metadata=FULL", NULL};
  fx_open_with(&f, settings);
  my_ok(f.m, "CREATE DATABASE shop");
  my_ok(f.m, "CREATE TABLE shop.ck (id INT PRIMARY KEY, k VARCHAR(20) "
             "COLLATE utf8mb4_general_ci, v INT, KEY (k))");
  fill(&f, "ck", "SELECT seq, CONCAT(IF(seq % 2, 'k', 'K'), LPAD(seq, 4, "
                 "'0')), seq FROM seq_1_to_300");
  sl__cdc_table_t *t = NULL;
  sl__cdc_chunks_t *cl = plan(&f, "ck", "k", 100, false, &t);
  SL_ASSERT_EQ_INT(cl->n, 3);
  static const dml_t dml[] = {
      {"insert", {"INSERT INTO shop.ck VALUES (1000 + 10 * %P, UPPER('%L'), "
                  "1), (1001 + 10 * %P, LOWER('%L'), 2), (1002 + 10 * %P, "
                  "'zz', 3)", NULL}},
      {"update", {"UPDATE shop.ck SET v = v + 1000 WHERE %W ORDER BY id "
                  "LIMIT 3", NULL}},
      {"delete", {"DELETE FROM shop.ck WHERE %W ORDER BY id DESC LIMIT 2",
                  NULL}},
      {"primary key change", {"UPDATE shop.ck SET id = id + 5000 WHERE %W "
                              "ORDER BY id LIMIT 1", NULL}},
      {"chunk key change", {"UPDATE shop.ck SET k = 'a' WHERE %W ORDER BY id "
                            "LIMIT 1",
                            "UPDATE shop.ck SET k = IF(BINARY LEFT('%L', 1) "
                            "= 'k', CONCAT('K', SUBSTR('%L', 2)), "
                            "CONCAT('k', SUBSTR('%L', 2))) WHERE id = "
                            "7 + 2 * %P",
                            NULL}},
  };
  phases(&f, t, cl, dml, 5);
  sl__cdc_chunks_free(cl);
  sl__cdc_table_destroy(t);
  fx_close(&f);
}
