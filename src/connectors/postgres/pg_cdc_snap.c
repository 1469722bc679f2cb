/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres-cdc source's snapshot half: the SQL session, the start
 * checks, the table patterns and descriptions, the publication, chunk
 * planning, the chunk list codec and membership, the exact snapshot of a
 * chunk and the chunk reader.  The contract is pg_cdc_int.h; see also
 * docs/cdc-postgres.md.
 *
 * Key order.  Every comparison of primary keys that sluice makes, on the
 * server or here, is the same total order: integers as numbers, text and
 * varchar byte by byte (COLLATE "C" in every statement sluice writes,
 * whatever the column's collation), uuid as uuid on the server, which is
 * the order of its lowercase text here; tuples left to right (PostgreSQL's
 * row-constructor comparison).  A chunk is low <= key < high in that order,
 * so the server's WHERE and sl__pgc_chunk_find agree on every row.
 *
 * Chunk list codec (version 1, integers little-endian):
 *   "SLPC" u8 version  u32 n_key  u8 kind * n_key
 *   u32 n  { u32 id  u8 flags (1: low, 2: high)  [low] [high] } * n
 *   a bound is n_key values: i64 (SL_PGC_KEY_INT) or u32 length + bytes
 *   (SL_PGC_KEY_TEXT; no NUL byte, as PostgreSQL text has none)
 * Snapshot codec: u64 xmin  u64 xmax  u32 n_xip  u64 xip * n_xip.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connectors/postgres/pg_cdc_int.h"
#include "core/inject.h"

#define CHUNKS_MAGIC "SLPC"
#define CHUNKS_VERSION 1
#define MAX_KEY 32u /* INDEX_MAX_KEYS */
#define MAX_CHUNKS (1u << 24)
#define OID_TEXT_PARAM 25
#define OID_INT8_PARAM 20
#define OID_UUID_PARAM 2950

/* ------------------------------------------------------------------ */
/* Small helpers.                                                      */

/* A libpq message on one line, without its trailing newline. */
static void one_line(const char *msg, char *buf, size_t size) {
  size_t j = 0;
  bool is_space = false;
  for (size_t i = 0; msg && msg[i] && j + 1 < size; i++) {
    char c = msg[i];
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (is_space || j == 0)) continue;
    is_space = c == ' ';
    buf[j++] = c;
  }
  while (j > 0 && buf[j - 1] == ' ') j--;
  buf[j] = '\0';
}

static const char *sqlstate(const PGresult *res) {
  const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  return st ? st : "";
}

/* "postgres-cdc: <server>: <what> failed: SQLSTATE <s>: <message>". */
static int res_fail(sl_error_t **out_err, PGconn *c, const PGresult *res,
                    const char *server, const char *what) {
  char msg[1024];
  const char *m = res ? PQresultErrorMessage(res) : NULL;
  one_line(m && m[0] ? m : PQerrorMessage(c), msg, sizeof(msg));
  const char *st = sqlstate(res);
  if (st[0])
    return sl_error_set(out_err, SL_EIO, "postgres-cdc: %s: %s failed: "
                        "SQLSTATE %s: %s", server, what, st, msg);
  return sl_error_set(out_err, SL_EIO, "postgres-cdc: %s: %s failed: %s",
                      server, what, msg[0] ? msg : "connection lost");
}

/* Prefix another module's message: "postgres-cdc: <server>: <ctx>: <m>". */
static int wrap(sl_error_t **out_err, int rc, sl_error_t *inner,
                const char *server, const char *ctx) {
  if (rc == SL_ENOMEM && inner == NULL) {
    return rc;
  }
  rc = sl_error_set(out_err, rc, "postgres-cdc: %s: %s: %s", server, ctx,
                    inner ? sl_error_message(inner) : sl_strerror(rc));
  sl_error_destroy(inner);
  return rc;
}

/* Run a parameterised query (text parameters, text results); the caller
 * checks the status with res_ok. */
static PGresult *run(PGconn *c, const char *sql, int n, const char *const *v) {
  return PQexecParams(c, sql, n, NULL, v, NULL, NULL, 0);
}

static bool res_ok(const PGresult *res, bool want_rows) {
  return res && PQresultStatus(res) ==
                    (want_rows ? PGRES_TUPLES_OK : PGRES_COMMAND_OK);
}

/* An identifier as a statement in a message shows it: plain when it is a
 * simple lower-case name, else quoted.  Into buf (truncated). */
static void show_ident(const char *s, char *buf, size_t size) {
  bool is_plain = s[0] != '\0' && !(s[0] >= '0' && s[0] <= '9');
  for (const char *p = s; is_plain && *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      is_plain = false;
  if (is_plain) {
    snprintf(buf, size, "%s", s);
    return;
  }
  size_t j = 0;
  if (size < 3) {
    if (size) buf[0] = '\0';
    return;
  }
  buf[j++] = '"';
  for (const char *p = s; *p && j + 3 < size; p++) {
    if (*p == '"') buf[j++] = '"';
    buf[j++] = *p;
  }
  buf[j++] = '"';
  buf[j] = '\0';
}

/* schema.table for statements in messages. */
static void show_table(const char *schema, const char *table, char *buf,
                       size_t size) {
  char a[200], b[200];
  show_ident(schema, a, sizeof(a));
  show_ident(table, b, sizeof(b));
  snprintf(buf, size, "%s.%s", a, b);
}

/* Append PQescapeIdentifier(s) to b. */
static int append_ident(PGconn *c, sl_bytes_t *b, const char *s) {
  char *q = PQescapeIdentifier(c, s, strlen(s));
  if (q == NULL) return SL_ENOMEM;
  int rc = sl_bytes_append_str(b, q);
  PQfreemem(q);
  return rc;
}

static int append_qtable(PGconn *c, sl_bytes_t *b, const char *schema,
                         const char *table) {
  int rc = append_ident(c, b, schema);
  if (rc == SL_OK) rc = sl_bytes_append(b, ".", 1);
  if (rc == SL_OK) rc = append_ident(c, b, table);
  return rc;
}

static const char *cstr(sl_bytes_t *b) {
  if (sl_bytes_append(b, "", 1) != SL_OK) return NULL;
  b->len--;
  return (const char *)b->data;
}

static int parse_i64(const char *s, int64_t *out) {
  if (s == NULL || *s == '\0') return SL_EPARSE;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0') return SL_EPARSE;
  *out = v;
  return SL_OK;
}

static int parse_u64(const char *s, const char **out_end, uint64_t *out) {
  const char *p = s;
  uint64_t v = 0;
  if (*p < '0' || *p > '9') return SL_EPARSE;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return SL_EPARSE;
    v = v * 10 + d;
  }
  *out_end = p;
  *out = v;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The session and the start checks.                                   */

int sl__pgc_connect(const char *conninfo, uint32_t connect_timeout_ms,
                    PGconn **out, char *out_server, sl_error_t **out_err) {
  char timeout[16];
  const char *keys[4], *vals[4];
  int k = 0;
  if (connect_timeout_ms > 0) {
    /* libpq counts whole seconds (and at least 2). */
    snprintf(timeout, sizeof(timeout), "%u", (connect_timeout_ms + 999) / 1000);
    keys[k] = "connect_timeout";
    vals[k++] = timeout;
  }
  keys[k] = "dbname"; /* the conninfo's own connect_timeout wins */
  vals[k++] = conninfo ? conninfo : "";
  keys[k] = "client_encoding";
  vals[k++] = "UTF8";
  keys[k] = NULL;
  vals[k] = NULL;
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  if (c == NULL)
    return sl_error_set(out_err, SL_ENOMEM,
                        "postgres-cdc: out of memory connecting");
  const char *host = PQhost(c), *port = PQport(c);
  char server[128];
  snprintf(server, sizeof(server), "%s:%s",
           host && host[0] ? host : "localhost",
           port && port[0] ? port : "5432");
  if (PQstatus(c) != CONNECTION_OK) {
    char msg[1024];
    one_line(PQerrorMessage(c), msg, sizeof(msg));
    int rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: cannot connect to "
                          "%s: %s", server, msg);
    PQfinish(c);
    return rc;
  }
  /* Values are read as text in these settings (sl__pgo_value's formats);
   * sluice's own small writes never wait for a synchronous standby. */
  PGresult *res = PQexec(c, "SET client_encoding = 'UTF8'; "
                            "SET DateStyle = 'ISO'; SET TimeZone = 'UTC'; "
                            "SET IntervalStyle = 'postgres'; "
                            "SET extra_float_digits = 3; "
                            "SET bytea_output = 'hex'; "
                            "SET synchronous_commit = 'local'");
  if (!res_ok(res, false)) {
    int rc = res_fail(out_err, c, res, server, "setting up the session");
    PQclear(res);
    PQfinish(c);
    return rc;
  }
  PQclear(res);
  memcpy(out_server, server, strlen(server) + 1);
  *out = c;
  return SL_OK;
}

int sl__pgc_check_server(PGconn *c, const char *server, bool need_slot,
                         sl_error_t **out_err) {
  const char *q1 = "SELECT current_setting('wal_level')";
  PGresult *res = run(c, q1, 0, NULL);
  if (!res_ok(res, true) || PQntuples(res) != 1) {
    int rc = res_fail(out_err, c, res, server, q1);
    PQclear(res);
    return rc;
  }
  char level[64];
  snprintf(level, sizeof(level), "%s", PQgetvalue(res, 0, 0));
  PQclear(res);
  if (strcmp(level, "logical") != 0)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: wal_level is "
                        "'%s': set wal_level = logical and restart the "
                        "server", server, level);

  const char *q2 = "SELECT current_user, rolreplication OR rolsuper FROM "
                   "pg_catalog.pg_roles WHERE rolname = current_user";
  res = run(c, q2, 0, NULL);
  if (!res_ok(res, true) || PQntuples(res) != 1) {
    int rc = res_fail(out_err, c, res, server, q2);
    PQclear(res);
    return rc;
  }
  if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
    char who[200];
    show_ident(PQgetvalue(res, 0, 0), who, sizeof(who));
    int rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: user '%s' "
                          "has no REPLICATION privilege (logical replication "
                          "needs it): run ALTER ROLE %s REPLICATION",
                          server, PQgetvalue(res, 0, 0), who);
    PQclear(res);
    return rc;
  }
  PQclear(res);
  if (!need_slot) return SL_OK;

  const char *q3 =
      "SELECT current_setting('max_replication_slots')::int, "
      "(SELECT count(*) FROM pg_catalog.pg_replication_slots), "
      "current_setting('max_wal_senders')::int, "
      "(SELECT count(*) FROM pg_catalog.pg_stat_activity "
      "WHERE backend_type = 'walsender')";
  res = run(c, q3, 0, NULL);
  int64_t v[4];
  bool ok = res_ok(res, true) && PQntuples(res) == 1;
  for (int i = 0; ok && i < 4; i++)
    ok = parse_i64(PQgetvalue(res, 0, i), &v[i]) == SL_OK;
  if (!ok) {
    int rc = res_fail(out_err, c, res, server, q3);
    PQclear(res);
    return rc;
  }
  PQclear(res);
  if (v[0] <= v[1])
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: no free "
                        "replication slot (max_replication_slots is %" PRId64
                        " and %" PRId64 " slots exist): drop an unused slot "
                        "with pg_drop_replication_slot() or raise "
                        "max_replication_slots and restart the server",
                        server, v[0], v[1]);
  if (v[2] <= v[3])
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: no free WAL "
                        "sender (max_wal_senders is %" PRId64 " and %" PRId64
                        " are running): raise max_wal_senders and restart "
                        "the server", server, v[2], v[3]);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Table patterns.                                                     */

void sl__pgc_table_names_free(sl__pgc_table_name_t *names, uint32_t n) {
  for (uint32_t i = 0; names && i < n; i++) {
    sl_free(names[i].schema);
    sl_free(names[i].table);
  }
  sl_free(names);
}

static int name_cmp(const void *a, const void *b) {
  const sl__pgc_table_name_t *x = a, *y = b;
  int c = strcmp(x->schema, y->schema);
  return c != 0 ? c : strcmp(x->table, y->table);
}

/* A pattern part as a LIKE pattern (escape character backslash). */
static int like_of(sl_bytes_t *b, const char *p, size_t n) {
  int rc = SL_OK;
  for (size_t i = 0; rc == SL_OK && i < n; i++) {
    char ch = p[i];
    if (ch == '*') rc = sl_bytes_append(b, "%", 1);
    else if (ch == '?') rc = sl_bytes_append(b, "_", 1);
    else if (ch == '%' || ch == '_' || ch == '\\') {
      rc = sl_bytes_append(b, "\\", 1);
      if (rc == SL_OK) rc = sl_bytes_append(b, &ch, 1);
    } else {
      rc = sl_bytes_append(b, &ch, 1);
    }
  }
  if (rc == SL_OK) rc = sl_bytes_append(b, "", 1);
  return rc;
}

int sl__pgc_resolve_tables(PGconn *c, const char *server,
                           const char *const *patterns, uint32_t n_patterns,
                           sl__pgc_table_name_t **out_names, uint32_t *out_n,
                           sl_error_t **out_err) {
  /* Ordinary, permanent tables (unlogged and temporary ones are not
   * decoded) outside the system schemas. */
  static const char *q =
      "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE c.relkind = 'r' AND c.relpersistence = 'p' "
      "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
      "AND n.nspname::text LIKE $1 COLLATE \"C\" "
      "AND c.relname::text LIKE $2 COLLATE \"C\"";
  sl__pgc_table_name_t *names = NULL;
  uint32_t n = 0, cap = 0;
  sl_bytes_t ps, pt;
  sl_bytes_init(&ps);
  sl_bytes_init(&pt);
  int rc = SL_OK;
  if (n_patterns == 0)
    rc = sl_error_set(out_err, SL_EINVAL,
                      "postgres-cdc: no tables given for %s", server);
  for (uint32_t k = 0; rc == SL_OK && k < n_patterns; k++) {
    const char *pat = patterns[k];
    const char *dot = pat ? strchr(pat, '.') : NULL;
    if (dot == NULL || dot == pat || dot[1] == '\0') {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "postgres-cdc: table pattern '%s' for %s is not "
                        "<schema>.<table> (`*` and `?` match within a part, "
                        "e.g. public.* or public.order_?)",
                        pat ? pat : "(null)", server);
      break;
    }
    sl_bytes_clear(&ps);
    sl_bytes_clear(&pt);
    rc = like_of(&ps, pat, (size_t)(dot - pat));
    if (rc == SL_OK) rc = like_of(&pt, dot + 1, strlen(dot + 1));
    if (rc != SL_OK) break;
    const char *v[2] = {(const char *)ps.data, (const char *)pt.data};
    PGresult *res = run(c, q, 2, v);
    if (!res_ok(res, true)) {
      char what[300];
      snprintf(what, sizeof(what), "listing the tables of pattern '%.200s'",
               pat);
      rc = res_fail(out_err, c, res, server, what);
      PQclear(res);
      break;
    }
    int nr = PQntuples(res);
    for (int i = 0; rc == SL_OK && i < nr; i++) {
      if (n == cap) {
        uint32_t nc = cap ? cap * 2 : 8;
        void *p = sl_realloc(names, nc * sizeof(*names));
        if (p == NULL) {
          rc = SL_ENOMEM;
          break;
        }
        names = p;
        cap = nc;
      }
      names[n].schema = sl_strdup(PQgetvalue(res, i, 0));
      names[n].table = sl_strdup(PQgetvalue(res, i, 1));
      n++;
      if (names[n - 1].schema == NULL || names[n - 1].table == NULL)
        rc = SL_ENOMEM;
    }
    PQclear(res);
    if (rc == SL_OK && nr == 0)
      rc = sl_error_set(out_err, SL_EINVAL,
                        "postgres-cdc: table pattern '%s' matches no table "
                        "at %s (ordinary tables only; or the user cannot "
                        "see it)", pat, server);
  }
  sl_bytes_close(&ps);
  sl_bytes_close(&pt);
  if (rc != SL_OK) {
    sl__pgc_table_names_free(names, n);
    return rc;
  }
  qsort(names, n, sizeof(*names), name_cmp);
  uint32_t w = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (w > 0 && name_cmp(&names[w - 1], &names[i]) == 0) {
      sl_free(names[i].schema);
      sl_free(names[i].table);
      continue;
    }
    names[w++] = names[i];
  }
  *out_names = names;
  *out_n = w;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* The table description.                                              */

void sl__pgc_table_destroy(sl__pgc_table_t *t) {
  if (t == NULL) return;
  sl_free(t->schema);
  sl_free(t->name);
  sl_free(t->rel.nspname);
  sl_free(t->rel.relname);
  for (uint32_t i = 0; t->rel.cols && i < t->n_cols; i++)
    sl_free(t->rel.cols[i].name);
  sl_free(t->rel.cols);
  if (t->schema_) sl_schema_unref(t->schema_);
  sl_free(t->pk);
  sl_free(t->key_kind);
  sl_free(t);
}

static int key_kind_of(uint32_t oid) {
  switch (oid) {
  case SL_PG_OID_INT2:
  case SL_PG_OID_INT4:
  case SL_PG_OID_INT8: return SL_PGC_KEY_INT;
  case SL_PG_OID_TEXT:
  case SL_PG_OID_VARCHAR:
  case SL_PG_OID_UUID: return SL_PGC_KEY_TEXT;
  default: return 0;
  }
}

int sl__pgc_table_describe(PGconn *c, const char *server, const char *schema,
                           const char *table, sl__pgc_table_t **out,
                           sl_error_t **out_err) {
  const char *v[2] = {schema, table};
  PGresult *res = run(
      c, "SELECT c.oid, c.relreplident FROM pg_catalog.pg_class c "
         "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
         "WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'r'",
      2, v);
  char what[600];
  snprintf(what, sizeof(what), "describing table %.250s.%.250s", schema,
           table);
  if (!res_ok(res, true)) {
    int rc = res_fail(out_err, c, res, server, what);
    PQclear(res);
    return rc;
  }
  if (PQntuples(res) != 1) {
    PQclear(res);
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: table %s.%s "
                        "does not exist (or is not an ordinary table)",
                        server, schema, table);
  }
  sl__pgc_table_t *t = sl_calloc(1, sizeof(*t));
  if (t == NULL) {
    PQclear(res);
    return SL_ENOMEM;
  }
  int rc = SL_OK;
  int64_t oid = 0;
  (void)parse_i64(PQgetvalue(res, 0, 0), &oid);
  t->oid = (uint32_t)oid;
  t->replident = PQgetvalue(res, 0, 1)[0];
  PQclear(res);
  t->schema = sl_strdup(schema);
  t->name = sl_strdup(table);
  t->rel.nspname = sl_strdup(schema);
  t->rel.relname = sl_strdup(table);
  t->rel.oid = t->oid;
  t->rel.replident = t->replident;
  if (!t->schema || !t->name || !t->rel.nspname || !t->rel.relname) {
    rc = SL_ENOMEM;
    goto done;
  }

  /* The columns pgoutput sends: not dropped, not generated. */
  char oid_s[16];
  snprintf(oid_s, sizeof(oid_s), "%u", t->oid);
  const char *vo[1] = {oid_s};
  res = run(c, "SELECT a.attnum, a.attname, a.atttypid, a.atttypmod, "
               "a.attnotnull, pg_catalog.format_type(a.atttypid, "
               "a.atttypmod) FROM pg_catalog.pg_attribute a "
               "WHERE a.attrelid = $1 AND a.attnum > 0 "
               "AND NOT a.attisdropped AND a.attgenerated = '' "
               "ORDER BY a.attnum", 1, vo);
  if (!res_ok(res, true)) {
    rc = res_fail(out_err, c, res, server, what);
    PQclear(res);
    goto done;
  }
  int nc = PQntuples(res);
  if (nc == 0 || nc > UINT16_MAX) {
    PQclear(res);
    rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: table %s.%s "
                      "has %d columns (sluice captures 1 to 65535)", server,
                      schema, table, nc);
    goto done;
  }
  int64_t *attnum = sl_calloc((size_t)nc, sizeof(*attnum));
  bool *notnull = sl_calloc((size_t)nc, sizeof(*notnull));
  char **tname = sl_calloc((size_t)nc, sizeof(*tname));
  sl_field_t *fields = sl_calloc((size_t)nc, sizeof(*fields));
  t->rel.cols = sl_calloc((size_t)nc, sizeof(*t->rel.cols));
  if (!attnum || !notnull || !tname || !fields || !t->rel.cols) {
    rc = SL_ENOMEM;
  } else {
    t->n_cols = (uint32_t)nc;
    t->rel.n_cols = (uint16_t)nc;
  }
  for (int i = 0; rc == SL_OK && i < nc; i++) {
    sl_pgo_column_t *col = &t->rel.cols[i];
    int64_t typ = 0, mod = -1;
    (void)parse_i64(PQgetvalue(res, i, 0), &attnum[i]);
    (void)parse_i64(PQgetvalue(res, i, 2), &typ);
    (void)parse_i64(PQgetvalue(res, i, 3), &mod);
    col->name = sl_strdup(PQgetvalue(res, i, 1));
    tname[i] = sl_strdup(PQgetvalue(res, i, 5));
    if (col->name == NULL || tname[i] == NULL) rc = SL_ENOMEM;
    col->type_oid = (uint32_t)typ;
    col->type_mod = (int32_t)mod;
    notnull[i] = PQgetvalue(res, i, 4)[0] == 't';
  }
  PQclear(res);

  /* The primary key, in its own column order. */
  if (rc == SL_OK) {
    res = run(c, "SELECT k.attnum FROM pg_catalog.pg_index i, "
                 "unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) "
                 "WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.ord",
              1, vo);
    if (!res_ok(res, true)) {
      rc = res_fail(out_err, c, res, server, what);
    } else if (PQntuples(res) == 0) {
      char st[450];
      show_table(schema, table, st, sizeof(st));
      rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: table %s.%s "
                        "has no primary key: sluice needs one to cut the "
                        "snapshot into chunks and to match changes to rows; "
                        "add one (ALTER TABLE %s ADD PRIMARY KEY (...))",
                        server, schema, table, st);
    } else {
      int np = PQntuples(res);
      t->pk = sl_calloc((size_t)np, sizeof(*t->pk));
      t->key_kind = sl_calloc((size_t)np, 1);
      if (!t->pk || !t->key_kind) rc = SL_ENOMEM;
      else t->n_pk = (uint32_t)np;
      for (int k = 0; rc == SL_OK && k < np; k++) {
        int64_t an = 0;
        (void)parse_i64(PQgetvalue(res, k, 0), &an);
        int at = -1;
        for (int i = 0; i < nc; i++)
          if (attnum[i] == an) at = i;
        if (at < 0) {
          rc = sl_error_set(out_err, SL_ENOTSUP, "postgres-cdc: %s: table "
                            "%s.%s: primary-key column number %" PRId64
                            " is a generated column, which pgoutput does not "
                            "send", server, schema, table, an);
          break;
        }
        t->pk[k] = (uint32_t)at;
        t->rel.cols[at].flags |= SL_PGO_COL_KEY;
        t->key_kind[k] = (uint8_t)key_kind_of(t->rel.cols[at].type_oid);
        if (t->key_kind[k] == 0)
          rc = sl_error_set(out_err, SL_ENOTSUP, "postgres-cdc: %s: table "
                            "%s.%s: primary-key column \"%s\" has type %s; "
                            "sluice chunks by int2, int4, int8, text, "
                            "varchar and uuid keys only", server, schema,
                            table, t->rel.cols[at].name, tname[at]);
      }
    }
    PQclear(res);
  }

  /* Types: exactly as the stream's Relation message maps them. */
  for (uint32_t i = 0; rc == SL_OK && i < t->n_cols; i++) {
    sl_error_t *e = NULL;
    sl_type_t ty;
    rc = sl__pgo_column_type(&t->rel, (uint16_t)i, &ty, &e);
    if (rc != SL_OK) {
      char ctx[600];
      snprintf(ctx, sizeof(ctx), "table %.250s.%.250s", schema, table);
      rc = wrap(out_err, rc, e, server, ctx);
      break;
    }
    ty.nullable = !notnull[i];
    fields[i].name = t->rel.cols[i].name;
    fields[i].type = ty;
  }
  if (rc == SL_OK) {
    sl_error_t *e = NULL;
    rc = sl_schema_create(fields, t->n_cols, &t->schema_, &e);
    if (rc != SL_OK) {
      char ctx[600];
      snprintf(ctx, sizeof(ctx), "table %.250s.%.250s", schema, table);
      rc = wrap(out_err, rc, e, server, ctx);
    }
  }
  for (int i = 0; tname && i < nc; i++) sl_free(tname[i]);
  sl_free(tname);
  sl_free(attnum);
  sl_free(notnull);
  sl_free(fields);
done:
  if (rc != SL_OK) {
    sl__pgc_table_destroy(t);
    return rc;
  }
  *out = t;
  return SL_OK;
}

int sl__pgc_check_table(PGconn *c, const char *server,
                        const sl__pgc_table_t *t, bool need_full,
                        sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = sl_bytes_append_str(&sql, "SELECT 1 FROM ");
  if (rc == SL_OK) rc = append_qtable(c, &sql, t->schema, t->name);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " LIMIT 0");
  const char *q = rc == SL_OK ? cstr(&sql) : NULL;
  if (q == NULL) {
    sl_bytes_close(&sql);
    return SL_ENOMEM;
  }
  PGresult *res = run(c, q, 0, NULL);
  char st[450];
  show_table(t->schema, t->name, st, sizeof(st));
  if (!res_ok(res, true)) {
    if (strcmp(sqlstate(res), "42501") == 0) {
      const char *user = PQuser(c);
      char who[200];
      show_ident(user ? user : "", who, sizeof(who));
      rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: user '%s' may "
                        "not read table %s.%s: run GRANT SELECT ON %s TO %s "
                        "(and USAGE on its schema)", server,
                        user ? user : "", t->schema, t->name, st, who);
    } else {
      char what[600];
      snprintf(what, sizeof(what), "reading table %.250s.%.250s", t->schema,
               t->name);
      rc = res_fail(out_err, c, res, server, what);
    }
    PQclear(res);
    sl_bytes_close(&sql);
    return rc;
  }
  PQclear(res);
  sl_bytes_close(&sql);
  if (!need_full) return SL_OK;
  /* The catalog now, not the description's copy. */
  char oid_s[16];
  snprintf(oid_s, sizeof(oid_s), "%u", t->oid);
  const char *v[1] = {oid_s};
  res = run(c, "SELECT relreplident FROM pg_catalog.pg_class WHERE oid = $1",
            1, v);
  if (!res_ok(res, true) || PQntuples(res) != 1) {
    rc = res_ok(res, true)
             ? sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: table "
                            "%s.%s no longer exists", server, t->schema,
                            t->name)
             : res_fail(out_err, c, res, server, "reading relreplident");
    PQclear(res);
    return rc;
  }
  char ri = PQgetvalue(res, 0, 0)[0];
  PQclear(res);
  if (ri == 'f') return SL_OK;
  const char *name = ri == 'd' ? "DEFAULT" : ri == 'n' ? "NOTHING"
                                                       : "USING INDEX";
  return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: table %s.%s has "
                      "REPLICA IDENTITY %s: updates and deletes would carry "
                      "%s; run ALTER TABLE %s REPLICA IDENTITY FULL", server,
                      t->schema, t->name, name,
                      ri == 'i' ? "only the key of the old row"
                                : "no old row",
                      st);
}

/* ------------------------------------------------------------------ */
/* The publication.                                                    */

int sl__pgc_publication_ensure(PGconn *c, const char *server, const char *pub,
                               const sl__pgc_table_t *const *tables,
                               uint32_t n_tables, bool may_create,
                               bool *out_created, sl_error_t **out_err) {
  if (out_created) *out_created = false;
  char pshow[200];
  show_ident(pub, pshow, sizeof(pshow));
  const char *v[1] = {pub};
  PGresult *res = run(c, "SELECT pubinsert, pubupdate, pubdelete, "
                         "pubtruncate FROM pg_catalog.pg_publication "
                         "WHERE pubname = $1", 1, v);
  if (!res_ok(res, true)) {
    int rc = res_fail(out_err, c, res, server, "reading pg_publication");
    PQclear(res);
    return rc;
  }
  int rc = SL_OK;
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  if (PQntuples(res) == 1) {
    static const char *const action[] = {"insert", "update", "delete",
                                         "truncate"};
    for (int i = 0; i < 4; i++) {
      if (PQgetvalue(res, 0, i)[0] == 't') continue;
      PQclear(res);
      return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: publication "
                          "%s does not publish %s: run ALTER PUBLICATION %s "
                          "SET (publish = 'insert, update, delete, "
                          "truncate')", server, pub, action[i], pshow);
    }
    PQclear(res);
    res = run(c, "SELECT schemaname, tablename FROM "
                 "pg_catalog.pg_publication_tables WHERE pubname = $1",
              1, v);
    if (!res_ok(res, true)) {
      rc = res_fail(out_err, c, res, server, "reading pg_publication_tables");
      PQclear(res);
      return rc;
    }
    for (uint32_t k = 0; k < n_tables; k++) {
      bool is_in = false;
      for (int i = 0; !is_in && i < PQntuples(res); i++)
        is_in = strcmp(PQgetvalue(res, i, 0), tables[k]->schema) == 0 &&
                strcmp(PQgetvalue(res, i, 1), tables[k]->name) == 0;
      if (is_in) continue;
      char st[450];
      show_table(tables[k]->schema, tables[k]->name, st, sizeof(st));
      PQclear(res);
      return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: publication "
                          "%s does not include table %s.%s: run ALTER "
                          "PUBLICATION %s ADD TABLE %s", server, pub,
                          tables[k]->schema, tables[k]->name, pshow, st);
    }
    PQclear(res);
    return SL_OK;
  }
  PQclear(res);

  rc = sl_bytes_append_str(&sql, "CREATE PUBLICATION ");
  if (rc == SL_OK) rc = append_ident(c, &sql, pub);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " FOR TABLE ");
  for (uint32_t k = 0; rc == SL_OK && k < n_tables; k++) {
    if (k) rc = sl_bytes_append(&sql, ", ", 2);
    if (rc == SL_OK)
      rc = append_qtable(c, &sql, tables[k]->schema, tables[k]->name);
  }
  if (rc == SL_OK)
    rc = sl_bytes_append_str(&sql, " WITH (publish = 'insert, update, "
                                   "delete, truncate')");
  const char *q = rc == SL_OK ? cstr(&sql) : NULL;
  if (q == NULL) {
    sl_bytes_close(&sql);
    return SL_ENOMEM;
  }
  if (!may_create) {
    rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: publication %s "
                      "does not exist (sluice creates it only when a job "
                      "starts afresh): run %s", server, pub, q);
    sl_bytes_close(&sql);
    return rc;
  }
  if (n_tables == 0) {
    sl_bytes_close(&sql);
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: publication "
                        "%s: no tables to publish", server, pub);
  }
  res = run(c, q, 0, NULL);
  if (!res_ok(res, false)) {
    char what[300];
    snprintf(what, sizeof(what), "creating publication %.200s", pub);
    rc = res_fail(out_err, c, res, server, what);
  } else if (out_created) {
    *out_created = true;
  }
  PQclear(res);
  sl_bytes_close(&sql);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Chunk lists and bounds.                                             */

static void bound_free(sl__pgc_kv_t *v, uint32_t n) {
  if (v == NULL) return;
  for (uint32_t i = 0; i < n; i++) sl_free(v[i].p);
  sl_free(v);
}

void sl__pgc_chunks_free(sl__pgc_chunks_t *cl) {
  if (cl == NULL) return;
  for (uint32_t i = 0; cl->chunks && i < cl->n; i++) {
    bound_free(cl->chunks[i].low, cl->n_key);
    bound_free(cl->chunks[i].high, cl->n_key);
  }
  sl_free(cl->chunks);
  sl_free(cl->key_kind);
  sl_free(cl);
}

static sl__pgc_kv_t *bound_copy(const sl__pgc_kv_t *v, uint32_t n) {
  sl__pgc_kv_t *c = sl_calloc(n, sizeof(*c));
  if (c == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    c[i].i = v[i].i;
    c[i].len = v[i].len;
    if (v[i].p != NULL) {
      c[i].p = sl_malloc((size_t)v[i].len + 1);
      if (c[i].p == NULL) {
        bound_free(c, n);
        return NULL;
      }
      memcpy(c[i].p, v[i].p, v[i].len);
      c[i].p[v[i].len] = 0;
    }
  }
  return c;
}

/* Byte order, then length: the order of COLLATE "C" (and of uuid). */
static int bytes_cmp(const uint8_t *a, uint32_t na, const uint8_t *b,
                     uint32_t nb) {
  uint32_t n = na < nb ? na : nb;
  int c = n ? memcmp(a, b, n) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  return (na > nb) - (na < nb);
}

static int bound_cmp(const sl__pgc_kv_t *a, const sl__pgc_kv_t *b,
                     const uint8_t *kind, uint32_t n) {
  for (uint32_t k = 0; k < n; k++) {
    int c;
    if (kind[k] == SL_PGC_KEY_INT) c = (a[k].i > b[k].i) - (a[k].i < b[k].i);
    else c = bytes_cmp(a[k].p, a[k].len, b[k].p, b[k].len);
    if (c != 0) return c;
  }
  return 0;
}

static sl__pgc_chunks_t *chunks_new(const sl__pgc_table_t *t) {
  sl__pgc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  if (cl == NULL) return NULL;
  cl->key_kind = sl_calloc(t->n_pk, 1);
  if (cl->key_kind == NULL) {
    sl_free(cl);
    return NULL;
  }
  cl->n_key = t->n_pk;
  memcpy(cl->key_kind, t->key_kind, t->n_pk);
  return cl;
}

/* Append a chunk [low, high) (copies; NULL = unbounded). */
static int chunks_add(sl__pgc_chunks_t *cl, uint32_t *cap,
                      const sl__pgc_kv_t *low, const sl__pgc_kv_t *high) {
  if (cl->n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 16;
    void *p = sl_realloc(cl->chunks, nc * sizeof(*cl->chunks));
    if (p == NULL) return SL_ENOMEM;
    cl->chunks = p;
    *cap = nc;
  }
  sl__pgc_chunk_t *ch = &cl->chunks[cl->n];
  memset(ch, 0, sizeof(*ch));
  ch->id = cl->n;
  if (low && (ch->low = bound_copy(low, cl->n_key)) == NULL) return SL_ENOMEM;
  if (high && (ch->high = bound_copy(high, cl->n_key)) == NULL) {
    bound_free(ch->low, cl->n_key);
    ch->low = NULL;
    return SL_ENOMEM;
  }
  cl->n++;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* SQL of keys and chunks.                                              */

/* Parameters of one statement: NUL-terminated texts, owned. */
typedef struct params_s {
  uint32_t n;
  char *v[2 * MAX_KEY];
  Oid type[2 * MAX_KEY];
} params_t;

static void params_close(params_t *pa) {
  for (uint32_t i = 0; i < pa->n; i++) sl_free(pa->v[i]);
  pa->n = 0;
}

static bool is_uuid(const sl__pgc_table_t *t, uint32_t k) {
  return t->rel.cols[t->pk[k]].type_oid == SL_PG_OID_UUID;
}

/* A key column as it compares: "col" or "col COLLATE "C"". */
static int append_key_col(PGconn *c, sl_bytes_t *b, const sl__pgc_table_t *t,
                          uint32_t k) {
  int rc = append_ident(c, b, t->rel.cols[t->pk[k]].name);
  if (rc == SL_OK && t->key_kind[k] == SL_PGC_KEY_TEXT && !is_uuid(t, k))
    rc = sl_bytes_append_str(b, " COLLATE \"C\"");
  return rc;
}

static int append_key_list(PGconn *c, sl_bytes_t *b,
                           const sl__pgc_table_t *t) {
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < t->n_pk; k++) {
    if (k) rc = sl_bytes_append(b, ", ", 2);
    if (rc == SL_OK) rc = append_key_col(c, b, t, k);
  }
  return rc;
}

/* ROW(k1, k2, ...) op ROW($i, $i+1, ...) with the bound's values as
 * parameters: PostgreSQL compares row constructors left to right, as
 * bound_cmp does. */
static int append_cmp(PGconn *c, sl_bytes_t *b, const sl__pgc_table_t *t,
                      const char *op, const sl__pgc_kv_t *v, params_t *pa) {
  int rc = sl_bytes_append_str(b, "ROW(");
  if (rc == SL_OK) rc = append_key_list(c, b, t);
  if (rc == SL_OK) rc = sl_bytes_printf(b, ") %s ROW(", op);
  for (uint32_t k = 0; rc == SL_OK && k < t->n_pk; k++) {
    if (pa->n >= 2 * MAX_KEY) return SL_EINVAL;
    char *s;
    Oid ty;
    if (t->key_kind[k] == SL_PGC_KEY_INT) {
      char num[32];
      snprintf(num, sizeof(num), "%" PRId64, v[k].i);
      s = sl_strdup(num);
      ty = OID_INT8_PARAM;
    } else {
      s = sl_strndup(v[k].len ? (const char *)v[k].p : "", v[k].len);
      ty = is_uuid(t, k) ? OID_UUID_PARAM : OID_TEXT_PARAM;
    }
    if (s == NULL) return SL_ENOMEM;
    pa->v[pa->n] = s;
    pa->type[pa->n] = ty;
    pa->n++;
    rc = sl_bytes_printf(b, "%s$%u", k ? ", " : "", pa->n);
  }
  if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
  return rc;
}

/* The chunk's condition ("TRUE" for the only chunk). */
static int append_where(PGconn *c, sl_bytes_t *b, const sl__pgc_table_t *t,
                        const sl__pgc_chunk_t *ch, params_t *pa) {
  int rc = SL_OK;
  if (ch->low == NULL && ch->high == NULL) return sl_bytes_append_str(b, "TRUE");
  if (ch->low) rc = append_cmp(c, b, t, ">=", ch->low, pa);
  if (rc == SL_OK && ch->low && ch->high) rc = sl_bytes_append_str(b, " AND ");
  if (rc == SL_OK && ch->high) rc = append_cmp(c, b, t, "<", ch->high, pa);
  return rc;
}

/* A fetched key tuple (columns from col0) as a bound. */
static int res_to_bound(const sl__pgc_table_t *t, const char *server,
                        const PGresult *res, int row, int col0,
                        sl__pgc_kv_t **out, sl_error_t **out_err) {
  sl__pgc_kv_t *v = sl_calloc(t->n_pk, sizeof(*v));
  if (v == NULL) return SL_ENOMEM;
  for (uint32_t k = 0; k < t->n_pk; k++) {
    int f = col0 + (int)k;
    const char *s = PQgetvalue(res, row, f);
    if (PQgetisnull(res, row, f) ||
        (t->key_kind[k] == SL_PGC_KEY_INT && parse_i64(s, &v[k].i) != SL_OK)) {
      bound_free(v, t->n_pk);
      return sl_error_set(out_err, SL_EIO, "postgres-cdc: %s: planning "
                          "chunks of %s.%s: key column \"%s\" gave '%.40s', "
                          "not a key value", server, t->schema, t->name,
                          t->rel.cols[t->pk[k]].name,
                          PQgetisnull(res, row, f) ? "NULL" : s);
    }
    if (t->key_kind[k] == SL_PGC_KEY_TEXT) {
      int len = PQgetlength(res, row, f);
      v[k].len = (uint32_t)len;
      v[k].p = sl_malloc((size_t)len + 1);
      if (v[k].p == NULL) {
        bound_free(v, t->n_pk);
        return SL_ENOMEM;
      }
      memcpy(v[k].p, s, (size_t)len);
      v[k].p[len] = 0;
    }
  }
  *out = v;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Planning.                                                           */

static int too_many(sl_error_t **out_err, const char *server,
                    const sl__pgc_table_t *t) {
  return sl_error_set(out_err, SL_EOVERFLOW, "postgres-cdc: %s: table %s.%s "
                      "needs more than %u chunks: raise chunk_rows", server,
                      t->schema, t->name, MAX_CHUNKS);
}

/* A single integer key: even ranges when dense enough.  SL_ENOTFOUND:
 * the table is empty; SL_EAGAIN: too sparse (sample instead). */
static int plan_even(PGconn *c, const char *server, const sl__pgc_table_t *t,
                     uint64_t chunk_rows, sl__pgc_chunks_t *cl, uint32_t *cap,
                     sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  const char *k = t->rel.cols[t->pk[0]].name;
  int rc = sl_bytes_append_str(&sql, "SELECT min(");
  if (rc == SL_OK) rc = append_ident(c, &sql, k);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, "), max(");
  if (rc == SL_OK) rc = append_ident(c, &sql, k);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, "), count(*) FROM ");
  if (rc == SL_OK) rc = append_qtable(c, &sql, t->schema, t->name);
  const char *q = rc == SL_OK ? cstr(&sql) : NULL;
  if (q == NULL) {
    sl_bytes_close(&sql);
    return SL_ENOMEM;
  }
  PGresult *res = run(c, q, 0, NULL);
  if (!res_ok(res, true) || PQntuples(res) != 1) {
    rc = res_fail(out_err, c, res, server, q);
    PQclear(res);
    sl_bytes_close(&sql);
    return rc;
  }
  sl_bytes_close(&sql);
  int64_t lo = 0, hi = 0, cnt = 0;
  bool has = !PQgetisnull(res, 0, 0) &&
             parse_i64(PQgetvalue(res, 0, 0), &lo) == SL_OK &&
             parse_i64(PQgetvalue(res, 0, 1), &hi) == SL_OK &&
             parse_i64(PQgetvalue(res, 0, 2), &cnt) == SL_OK && cnt > 0;
  PQclear(res);
  if (!has) return SL_ENOTFOUND;
  double spread = ((double)hi - (double)lo + 1.0) / (double)cnt;
  if (spread > 1000.0) return SL_EAGAIN;
  double dstep = spread * (double)chunk_rows;
  int64_t step = dstep >= 9.0e18 ? INT64_MAX : (int64_t)dstep;
  if (step < 1) step = 1;
  sl__pgc_kv_t prev = {0}, cur = {0};
  bool has_prev = false;
  for (int64_t b = lo;;) {
    if (b > INT64_MAX - step) break;
    b += step;
    if (b > hi) break;
    cur.i = b;
    rc = chunks_add(cl, cap, has_prev ? &prev : NULL, &cur);
    if (rc != SL_OK) return rc;
    prev = cur;
    has_prev = true;
    if (cl->n >= MAX_CHUNKS - 1) return too_many(out_err, server, t);
  }
  return chunks_add(cl, cap, has_prev ? &prev : NULL, NULL);
}

/*
 * Any key: a bound at every chunk_rows-th key in key order, numbered on
 * the server (the table is sorted there, spilling to disk as it must;
 * only the bounds come back).  Rows 1, N+1, 2N+1, ... start the chunks;
 * the first chunk is unbounded below, so row 1 is no bound.
 */
static int plan_sampled(PGconn *c, const char *server,
                        const sl__pgc_table_t *t, uint64_t chunk_rows,
                        sl__pgc_chunks_t *cl, uint32_t *cap,
                        sl_error_t **out_err) {
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  int rc = sl_bytes_append_str(&sql, "SELECT ");
  for (uint32_t k = 0; rc == SL_OK && k < t->n_pk; k++) {
    if (k) rc = sl_bytes_append(&sql, ", ", 2);
    if (rc == SL_OK) rc = sl_bytes_printf(&sql, "s.k%u", k);
  }
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, " FROM (SELECT ");
  for (uint32_t k = 0; rc == SL_OK && k < t->n_pk; k++) {
    if (k) rc = sl_bytes_append(&sql, ", ", 2);
    if (rc == SL_OK) rc = append_ident(c, &sql, t->rel.cols[t->pk[k]].name);
    if (rc == SL_OK) rc = sl_bytes_printf(&sql, "::text AS k%u", k);
  }
  if (rc == SL_OK)
    rc = sl_bytes_append_str(&sql, ", row_number() OVER (ORDER BY ");
  if (rc == SL_OK) rc = append_key_list(c, &sql, t);
  if (rc == SL_OK) rc = sl_bytes_append_str(&sql, ") AS rn FROM ");
  if (rc == SL_OK) rc = append_qtable(c, &sql, t->schema, t->name);
  if (rc == SL_OK)
    rc = sl_bytes_printf(&sql, ") s WHERE s.rn > 1 AND (s.rn - 1) %% %" PRIu64
                               " = 0 ORDER BY s.rn", chunk_rows);
  const char *q = rc == SL_OK ? cstr(&sql) : NULL;
  if (q == NULL) {
    sl_bytes_close(&sql);
    return SL_ENOMEM;
  }
  PGresult *res = run(c, q, 0, NULL);
  if (!res_ok(res, true)) {
    rc = res_fail(out_err, c, res, server, q);
    PQclear(res);
    sl_bytes_close(&sql);
    return rc;
  }
  sl_bytes_close(&sql);
  sl__pgc_kv_t *prev = NULL;
  int nr = PQntuples(res);
  for (int i = 0; rc == SL_OK && i < nr; i++) {
    sl__pgc_kv_t *next = NULL;
    rc = res_to_bound(t, server, res, i, 0, &next, out_err);
    if (rc != SL_OK) break;
    if (prev && bound_cmp(prev, next, cl->key_kind, cl->n_key) >= 0) {
      /* The server's order is not the byte order sluice uses. */
      bound_free(next, cl->n_key);
      rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: %s: planning chunks "
                        "of %s.%s: the server's key order disagrees with "
                        "sluice's (bound %d does not increase)", server,
                        t->schema, t->name, i);
      break;
    }
    rc = chunks_add(cl, cap, prev, next);
    bound_free(prev, cl->n_key);
    prev = next;
    if (rc == SL_OK && cl->n >= MAX_CHUNKS - 1) rc = too_many(out_err, server, t);
  }
  PQclear(res);
  if (rc == SL_OK) rc = chunks_add(cl, cap, prev, NULL);
  bound_free(prev, cl->n_key);
  return rc;
}

int sl__pgc_plan_chunks(PGconn *c, const char *server,
                        const sl__pgc_table_t *t, uint64_t chunk_rows,
                        sl__pgc_chunks_t **out, sl_error_t **out_err) {
  if (t->n_pk == 0 || t->n_pk > MAX_KEY || chunk_rows == 0)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: planning "
                        "chunks of %s.%s: a key of %u columns and chunk_rows "
                        "%" PRIu64 " (1 to %u columns, chunk_rows >= 1)",
                        server, t->schema, t->name, t->n_pk, chunk_rows,
                        MAX_KEY);
  sl__pgc_chunks_t *cl = chunks_new(t);
  if (cl == NULL) return SL_ENOMEM;
  uint32_t cap = 0;
  int rc = SL_EAGAIN;
  if (t->n_pk == 1 && t->key_kind[0] == SL_PGC_KEY_INT) {
    rc = plan_even(c, server, t, chunk_rows, cl, &cap, out_err);
    if (rc == SL_ENOTFOUND) rc = chunks_add(cl, &cap, NULL, NULL);
  }
  if (rc == SL_EAGAIN) rc = plan_sampled(c, server, t, chunk_rows, cl, &cap,
                                         out_err);
  if (rc != SL_OK) {
    sl__pgc_chunks_free(cl);
    return rc;
  }
  *out = cl;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Membership.                                                         */

/* The row's key against a bound: <0, 0, >0. */
static int row_cmp(const sl__pgc_chunks_t *cl, const sl__pgc_table_t *t,
                   const sl_row_t *row, const sl__pgc_kv_t *b) {
  for (uint32_t k = 0; k < cl->n_key; k++) {
    uint32_t f = t->pk[k];
    int c;
    if (cl->key_kind[k] == SL_PGC_KEY_INT) {
      int64_t x = sl_row_get_i64(row, f);
      c = (x > b[k].i) - (x < b[k].i);
    } else {
      sl_slice_t s = sl_row_get_str(row, f);
      c = bytes_cmp((const uint8_t *)s.ptr, s.len, b[k].p, b[k].len);
    }
    if (c != 0) return c;
  }
  return 0;
}

int sl__pgc_chunk_find(const sl__pgc_chunks_t *cl, const sl__pgc_table_t *t,
                       const sl_row_t *row, uint32_t *out_chunk,
                       sl_error_t **out_err) {
  if (cl->n == 0 || cl->n_key != t->n_pk ||
      memcmp(cl->key_kind, t->key_kind, t->n_pk) != 0)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: the chunk list "
                        "of table %s.%s does not fit its primary key (%u key "
                        "columns in the list, %u in the table)", t->schema,
                        t->name, cl->n_key, t->n_pk);
  for (uint32_t k = 0; k < t->n_pk; k++)
    if (sl_row_is_null(row, t->pk[k]))
      return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: table %s.%s: a "
                          "row whose primary-key column \"%s\" is NULL",
                          t->schema, t->name, t->rel.cols[t->pk[k]].name);
  /* The last chunk whose low bound is at or below the key. */
  uint32_t lo = 0, hi = cl->n - 1;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if (row_cmp(cl, t, row, cl->chunks[mid].low) >= 0) lo = mid;
    else hi = mid - 1;
  }
  *out_chunk = lo;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Chunk list codec.                                                   */

static int put_u32(sl_bytes_t *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  return sl_bytes_append(b, x, 4);
}

static int put_bound(sl_bytes_t *b, const sl__pgc_chunks_t *cl,
                     const sl__pgc_kv_t *v) {
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++) {
    if (cl->key_kind[k] == SL_PGC_KEY_INT) {
      rc = sl_bytes_append_u64le(b, (uint64_t)v[k].i);
    } else {
      rc = put_u32(b, v[k].len);
      if (rc == SL_OK && v[k].len) rc = sl_bytes_append(b, v[k].p, v[k].len);
    }
  }
  return rc;
}

int sl__pgc_chunks_encode(const sl__pgc_chunks_t *cl, sl_bytes_t *out) {
  uint8_t ver = CHUNKS_VERSION;
  int rc = sl_bytes_append(out, CHUNKS_MAGIC, 4);
  if (rc == SL_OK) rc = sl_bytes_append(out, &ver, 1);
  if (rc == SL_OK) rc = put_u32(out, cl->n_key);
  if (rc == SL_OK && cl->n_key) rc = sl_bytes_append(out, cl->key_kind, cl->n_key);
  if (rc == SL_OK) rc = put_u32(out, cl->n);
  for (uint32_t i = 0; rc == SL_OK && i < cl->n; i++) {
    const sl__pgc_chunk_t *ch = &cl->chunks[i];
    uint8_t flags = (uint8_t)((ch->low ? 1 : 0) | (ch->high ? 2 : 0));
    rc = put_u32(out, ch->id);
    if (rc == SL_OK) rc = sl_bytes_append(out, &flags, 1);
    if (rc == SL_OK && ch->low) rc = put_bound(out, cl, ch->low);
    if (rc == SL_OK && ch->high) rc = put_bound(out, cl, ch->high);
  }
  return rc;
}

typedef struct rd_s {
  const uint8_t *p;
  size_t len, off;
  sl_error_t **err;
  const char *what; /* "chunk list" or "snapshot" */
} rd_t;

static int bad(rd_t *r, const char *what) {
  return sl_error_set(r->err, SL_ECORRUPT, "postgres-cdc %s: %s at byte %zu "
                      "of %zu", r->what, what, r->off, r->len);
}

static int get_u8(rd_t *r, uint8_t *v, const char *what) {
  if (r->len - r->off < 1) return bad(r, what);
  *v = r->p[r->off++];
  return SL_OK;
}

static int get_u32(rd_t *r, uint32_t *v, const char *what) {
  if (r->len - r->off < 4) return bad(r, what);
  const uint8_t *q = r->p + r->off;
  *v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
       (uint32_t)q[3] << 24;
  r->off += 4;
  return SL_OK;
}

static int get_u64(rd_t *r, uint64_t *v, const char *what) {
  if (r->len - r->off < 8) return bad(r, what);
  *v = sl_load_u64le(r->p + r->off);
  r->off += 8;
  return SL_OK;
}

static int get_bound(rd_t *r, const sl__pgc_chunks_t *cl,
                     sl__pgc_kv_t **out) {
  sl__pgc_kv_t *v = sl_calloc(cl->n_key, sizeof(*v));
  if (v == NULL) return SL_ENOMEM;
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++) {
    if (cl->key_kind[k] == SL_PGC_KEY_INT) {
      uint64_t x = 0;
      rc = get_u64(r, &x, "a truncated integer bound");
      v[k].i = (int64_t)x;
      continue;
    }
    size_t at = r->off;
    uint32_t n = 0;
    rc = get_u32(r, &n, "a truncated text bound");
    if (rc == SL_OK && n > r->len - r->off) {
      r->off = at;
      rc = bad(r, "a text bound longer than the bytes left");
    }
    if (rc == SL_OK && n && memchr(r->p + r->off, 0, n) != NULL) {
      r->off = at;
      rc = bad(r, "a text bound with a NUL byte");
    }
    if (rc != SL_OK) break;
    v[k].p = sl_malloc((size_t)n + 1);
    if (v[k].p == NULL) {
      rc = SL_ENOMEM;
      break;
    }
    if (n) memcpy(v[k].p, r->p + r->off, n);
    v[k].p[n] = 0;
    v[k].len = n;
    r->off += n;
  }
  if (rc != SL_OK) {
    bound_free(v, cl->n_key);
    return rc;
  }
  *out = v;
  return SL_OK;
}

int sl__pgc_chunks_decode(const uint8_t *p, size_t len,
                          sl__pgc_chunks_t **out, sl_error_t **out_err) {
  rd_t r = {p, len, 0, out_err, "chunk list"};
  if (len < 5 || memcmp(p, CHUNKS_MAGIC, 4) != 0)
    return bad(&r, "no SLPC magic");
  r.off = 4;
  uint8_t ver = 0;
  int rc = get_u8(&r, &ver, "no version");
  if (rc != SL_OK) return rc;
  if (ver != CHUNKS_VERSION) {
    r.off = 4;
    return bad(&r, "an unknown version (this sluice reads version 1)");
  }
  uint32_t n_key = 0, n = 0;
  rc = get_u32(&r, &n_key, "a truncated key count");
  if (rc != SL_OK) return rc;
  if (n_key == 0 || n_key > MAX_KEY) {
    r.off -= 4;
    return bad(&r, "a key count outside 1..32");
  }
  sl__pgc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  if (cl == NULL || (cl->key_kind = sl_calloc(n_key, 1)) == NULL) {
    sl_free(cl);
    return SL_ENOMEM;
  }
  cl->n_key = n_key;
  for (uint32_t k = 0; rc == SL_OK && k < n_key; k++) {
    rc = get_u8(&r, &cl->key_kind[k], "a truncated key kind");
    if (rc == SL_OK && cl->key_kind[k] != SL_PGC_KEY_INT &&
        cl->key_kind[k] != SL_PGC_KEY_TEXT) {
      r.off--;
      rc = bad(&r, "an unknown key kind");
    }
  }
  if (rc == SL_OK) rc = get_u32(&r, &n, "a truncated chunk count");
  /* Every chunk takes at least 5 bytes: the count cannot exceed that. */
  if (rc == SL_OK && (n == 0 || n > MAX_CHUNKS || n > (len - r.off) / 5)) {
    r.off -= 4;
    rc = bad(&r, "a chunk count that is 0 or larger than the bytes hold");
  }
  if (rc == SL_OK && (cl->chunks = sl_calloc(n, sizeof(*cl->chunks))) == NULL)
    rc = SL_ENOMEM;
  for (uint32_t i = 0; rc == SL_OK && i < n; i++) {
    sl__pgc_chunk_t *ch = &cl->chunks[i];
    uint32_t id = 0;
    uint8_t flags = 0;
    size_t at = r.off;
    rc = get_u32(&r, &id, "a truncated chunk id");
    if (rc == SL_OK && id != i) {
      r.off = at;
      rc = bad(&r, "chunk ids not running 0, 1, ...");
    }
    if (rc != SL_OK) break;
    ch->id = id;
    cl->n = i + 1;
    at = r.off;
    rc = get_u8(&r, &flags, "truncated chunk flags");
    if (rc != SL_OK) break;
    bool want_low = i > 0, want_high = i + 1 < n;
    if (flags != (uint8_t)((want_low ? 1 : 0) | (want_high ? 2 : 0))) {
      r.off = at;
      rc = bad(&r, "chunk bounds that do not chain (the first chunk has no "
                   "low bound, the last no high bound, the others both)");
      break;
    }
    at = r.off;
    if (want_low) rc = get_bound(&r, cl, &ch->low);
    if (rc == SL_OK && want_low &&
        bound_cmp(ch->low, cl->chunks[i - 1].high, cl->key_kind,
                  cl->n_key) != 0) {
      r.off = at;
      rc = bad(&r, "a chunk whose low bound is not the previous chunk's high "
                   "bound");
    }
    at = r.off;
    if (rc == SL_OK && want_high) rc = get_bound(&r, cl, &ch->high);
    if (rc == SL_OK && want_high && want_low &&
        bound_cmp(ch->low, ch->high, cl->key_kind, cl->n_key) >= 0) {
      r.off = at;
      rc = bad(&r, "a chunk whose high bound is not above its low bound");
    }
  }
  if (rc == SL_OK && r.off != len) rc = bad(&r, "trailing bytes");
  if (rc != SL_OK) {
    sl__pgc_chunks_free(cl);
    return rc;
  }
  *out = cl;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Snapshots.                                                          */

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int sl__pgc_snap_parse(const char *text, sl__pgc_snap_t *out) {
  if (text == NULL) return SL_EPARSE;
  const char *p = text;
  uint64_t xmin, xmax;
  if (parse_u64(p, &p, &xmin) != SL_OK || *p++ != ':') return SL_EPARSE;
  if (parse_u64(p, &p, &xmax) != SL_OK || *p++ != ':') return SL_EPARSE;
  if (xmin > xmax) return SL_EPARSE;
  uint32_t n = 0;
  for (const char *q = p; *q; q++)
    if (*q == ',') n++;
  if (*p) n++;
  uint64_t *xip = NULL;
  if (n > 0) {
    if (n > (uint32_t)(strlen(p) / 2 + 1)) return SL_EPARSE;
    xip = sl_calloc(n, sizeof(*xip));
    if (xip == NULL) return SL_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (parse_u64(p, &p, &xip[i]) != SL_OK || xip[i] < xmin ||
        xip[i] >= xmax || (*p != ',' && *p != '\0') ||
        (*p == '\0' && i + 1 != n)) {
      sl_free(xip);
      return SL_EPARSE;
    }
    if (*p == ',') p++;
  }
  if (*p != '\0') {
    sl_free(xip);
    return SL_EPARSE;
  }
  if (n > 1) qsort(xip, n, sizeof(*xip), u64_cmp);
  uint32_t w = 0;
  for (uint32_t i = 0; i < n; i++)
    if (w == 0 || xip[w - 1] != xip[i]) xip[w++] = xip[i];
  out->xmin = xmin;
  out->xmax = xmax;
  out->n_xip = w;
  out->xip = xip;
  return SL_OK;
}

void sl__pgc_snap_free(sl__pgc_snap_t *s) {
  if (s == NULL) return;
  sl_free(s->xip);
  memset(s, 0, sizeof(*s));
}

int sl__pgc_snap_encode(const sl__pgc_snap_t *s, sl_bytes_t *out) {
  int rc = sl_bytes_append_u64le(out, s->xmin);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, s->xmax);
  if (rc == SL_OK) rc = put_u32(out, s->n_xip);
  for (uint32_t i = 0; rc == SL_OK && i < s->n_xip; i++)
    rc = sl_bytes_append_u64le(out, s->xip[i]);
  return rc;
}

int sl__pgc_snap_decode(const uint8_t *p, size_t len, sl__pgc_snap_t *out,
                        size_t *out_used, sl_error_t **out_err) {
  rd_t r = {p, len, 0, out_err, "snapshot"};
  uint64_t xmin = 0, xmax = 0;
  uint32_t n = 0;
  int rc = get_u64(&r, &xmin, "a truncated xmin");
  if (rc == SL_OK) rc = get_u64(&r, &xmax, "a truncated xmax");
  if (rc == SL_OK && xmin > xmax) {
    r.off = 0;
    rc = bad(&r, "xmin above xmax");
  }
  if (rc == SL_OK) rc = get_u32(&r, &n, "a truncated xip count");
  if (rc == SL_OK && n > (len - r.off) / 8) {
    r.off -= 4;
    rc = bad(&r, "an xip count larger than the bytes hold");
  }
  if (rc != SL_OK) return rc;
  uint64_t *xip = NULL;
  if (n > 0 && (xip = sl_calloc(n, sizeof(*xip))) == NULL) return SL_ENOMEM;
  for (uint32_t i = 0; rc == SL_OK && i < n; i++) {
    size_t at = r.off;
    rc = get_u64(&r, &xip[i], "a truncated xip");
    if (rc == SL_OK && (xip[i] < xmin || xip[i] >= xmax)) {
      r.off = at;
      rc = bad(&r, "an xip outside [xmin, xmax)");
    }
    if (rc == SL_OK && i > 0 && xip[i] <= xip[i - 1]) {
      r.off = at;
      rc = bad(&r, "xips not ascending");
    }
  }
  if (rc != SL_OK) {
    sl_free(xip);
    return rc;
  }
  out->xmin = xmin;
  out->xmax = xmax;
  out->n_xip = n;
  out->xip = xip;
  if (out_used) *out_used = r.off;
  return SL_OK;
}

bool sl__pgc_snap_visible(const sl__pgc_snap_t *s, uint32_t xid) {
  /* Widen with the epoch that puts xid nearest xmax. */
  int64_t d = (int32_t)(xid - (uint32_t)s->xmax);
  uint64_t x;
  if (d < 0 && (uint64_t)(-d) > s->xmax) x = xid; /* before epoch 0 */
  else x = s->xmax + (uint64_t)d;
  if (x < s->xmin) return true;
  if (x >= s->xmax) return false;
  uint32_t lo = 0, hi = s->n_xip;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (s->xip[mid] == x) return false;
    if (s->xip[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return true;
}

/* ------------------------------------------------------------------ */
/* The chunk reader.                                                   */

void sl__pgc_rows_init(sl__pgc_rows_t *r, const sl_schema_t *schema) {
  memset(r, 0, sizeof(*r));
  r->schema = schema;
}

void sl__pgc_rows_close(sl__pgc_rows_t *r) {
  for (uint32_t i = 0; i < r->n; i++) sl_free(r->data[i]);
  sl_free(r->data);
  sl_free(r->len);
  memset(r, 0, sizeof(*r));
}

static int rows_add(sl__pgc_rows_t *r, const sl_row_t *row) {
  if (r->n == r->cap) {
    uint32_t nc = r->cap ? r->cap * 2 : 64;
    uint8_t **d = sl_realloc(r->data, nc * sizeof(*d));
    if (d == NULL) return SL_ENOMEM;
    r->data = d;
    uint32_t *l = sl_realloc(r->len, nc * sizeof(*l));
    if (l == NULL) return SL_ENOMEM;
    r->len = l;
    r->cap = nc;
  }
  uint8_t *p = sl_malloc(row->len);
  if (p == NULL) return SL_ENOMEM;
  memcpy(p, row->data, row->len);
  r->data[r->n] = p;
  r->len[r->n] = row->len;
  r->n++;
  return SL_OK;
}

/* "X/Y" (hex) as a 64-bit LSN. */
static int parse_lsn(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long hi = strtoull(s, &end, 16);
  if (end == s || *end != '/' || errno || hi > UINT32_MAX) return SL_EPARSE;
  const char *p = end + 1;
  unsigned long long lo = strtoull(p, &end, 16);
  if (end == p || *end != '\0' || errno || lo > UINT32_MAX) return SL_EPARSE;
  *out = (uint64_t)hi << 32 | lo;
  return SL_OK;
}

/* The SELECT of a chunk: the captured columns in key order. */
static int chunk_select(PGconn *c, const sl__pgc_table_t *t,
                        const sl__pgc_chunk_t *ch, sl_bytes_t *sql,
                        params_t *pa) {
  int rc = sl_bytes_append_str(sql, "SELECT ");
  for (uint32_t i = 0; rc == SL_OK && i < t->n_cols; i++) {
    if (i) rc = sl_bytes_append(sql, ", ", 2);
    if (rc == SL_OK) rc = append_ident(c, sql, t->rel.cols[i].name);
  }
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " FROM ");
  if (rc == SL_OK) rc = append_qtable(c, sql, t->schema, t->name);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " WHERE ");
  if (rc == SL_OK) rc = append_where(c, sql, t, ch, pa);
  if (rc == SL_OK) rc = sl_bytes_append_str(sql, " ORDER BY ");
  if (rc == SL_OK) rc = append_key_list(c, sql, t);
  if (rc == SL_OK && cstr(sql) == NULL) rc = SL_ENOMEM;
  return rc;
}

int sl__pgc_read_chunk(PGconn *c, const char *server, const sl__pgc_table_t *t,
                       const sl__pgc_chunks_t *cl, const sl__pgc_chunk_t *ch,
                       sl__pgc_snap_t *out_snap, uint64_t *out_high,
                       sl__pgc_rows_t *out_rows, sl_error_t **out_err) {
  char what[600];
  snprintf(what, sizeof(what), "reading chunk %u of table %.250s.%.250s",
           ch->id, t->schema, t->name);
  if (cl->n_key != t->n_pk || memcmp(cl->key_kind, t->key_kind, t->n_pk) != 0)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s: %s: the chunk "
                        "list does not fit the table's primary key", server,
                        what);
  sl_bytes_t sql;
  sl_bytes_init(&sql);
  params_t pa;
  memset(&pa, 0, sizeof(pa));
  sl_row_builder_t b;
  bool has_b = false;
  PGresult *res = NULL;
  sl__pgc_snap_t snap = {0};
  int rc = chunk_select(c, t, ch, &sql, &pa);
  if (rc != SL_OK) goto done;

  res = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  if (!res_ok(res, false)) {
    rc = res_fail(out_err, c, res, server, what);
    goto done;
  }
  PQclear(res);
  /* The first statement: it takes the transaction's snapshot. */
  res = PQexec(c, "SELECT pg_catalog.pg_current_snapshot()::text");
  if (!res_ok(res, true) || PQntuples(res) != 1) {
    rc = res_fail(out_err, c, res, server, what);
    goto done;
  }
  rc = sl__pgc_snap_parse(PQgetvalue(res, 0, 0), &snap);
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, rc == SL_ENOMEM ? rc : SL_EIO,
                      "postgres-cdc: %s: %s: pg_current_snapshot() gave "
                      "'%.100s', which does not parse", server, what,
                      PQgetvalue(res, 0, 0));
    goto done;
  }
  PQclear(res);
  res = NULL;
  rc = SL_INJECT("pgcdc.snapshot.after_snapshot");
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, rc, "postgres-cdc: %s: %s: injected failure "
                      "after the snapshot", server, what);
    goto done;
  }

  res = PQexecParams(c, (const char *)sql.data, (int)pa.n, pa.type,
                     (const char *const *)pa.v, NULL, NULL, 0);
  if (!res_ok(res, true)) {
    rc = res_fail(out_err, c, res, server, what);
    goto done;
  }
  int nr = PQntuples(res), nf = PQnfields(res);
  if ((uint32_t)nf != t->n_cols) {
    rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: %s: %s: %d columns "
                      "came back, %u expected", server, what, nf, t->n_cols);
    goto done;
  }
  rc = sl_row_builder_init(&b, t->schema_);
  if (rc != SL_OK) goto done;
  has_b = true;
  for (int i = 0; rc == SL_OK && i < nr; i++) {
    sl_row_builder_reset(&b, SL_ROW_INSERT);
    for (uint32_t f = 0; rc == SL_OK && f < t->n_cols; f++) {
      sl_pgo_datum_t d = {SL_PGO_NULL, 0, NULL};
      if (!PQgetisnull(res, i, (int)f)) {
        d.kind = SL_PGO_TEXT;
        d.len = (uint32_t)PQgetlength(res, i, (int)f);
        d.data = (const uint8_t *)PQgetvalue(res, i, (int)f);
      }
      sl_error_t *e = NULL;
      rc = sl__pgo_value(&t->rel, (uint16_t)f, &d, &b, f, &e);
      if (rc != SL_OK) rc = wrap(out_err, rc, e, server, what);
    }
    sl_row_t row;
    if (rc == SL_OK) {
      sl_error_t *e = NULL;
      rc = sl_row_builder_finish(&b, &row, &e);
      if (rc != SL_OK) rc = wrap(out_err, rc, e, server, what);
    }
    if (rc == SL_OK) rc = rows_add(out_rows, &row);
  }
  if (rc != SL_OK) goto done;
  PQclear(res);
  res = NULL;

  rc = SL_INJECT("pgcdc.snapshot.before_high");
  if (rc != SL_OK) {
    rc = sl_error_set(out_err, rc, "postgres-cdc: %s: %s: injected failure "
                      "before HIGH", server, what);
    goto done;
  }
  res = PQexec(c, "SELECT pg_catalog.pg_current_wal_insert_lsn()::text");
  uint64_t high = 0;
  if (!res_ok(res, true) || PQntuples(res) != 1) {
    rc = res_fail(out_err, c, res, server, what);
    goto done;
  }
  if (parse_lsn(PQgetvalue(res, 0, 0), &high) != SL_OK) {
    rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: %s: %s: "
                      "pg_current_wal_insert_lsn() gave '%.40s', not an LSN",
                      server, what, PQgetvalue(res, 0, 0));
    goto done;
  }
  PQclear(res);
  res = PQexec(c, "COMMIT");
  if (!res_ok(res, false)) {
    rc = res_fail(out_err, c, res, server, what);
    goto done;
  }
  *out_snap = snap;
  snap.xip = NULL;
  *out_high = high;
done:
  PQclear(res);
  if (rc != SL_OK && PQtransactionStatus(c) != PQTRANS_IDLE &&
      PQstatus(c) == CONNECTION_OK)
    PQclear(PQexec(c, "ROLLBACK"));
  if (has_b) sl_row_builder_close(&b);
  sl__pgc_snap_free(&snap);
  params_close(&pa);
  sl_bytes_close(&sql);
  return rc;
}
