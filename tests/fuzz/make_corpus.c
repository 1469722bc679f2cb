/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes the seed corpora of the fuzz targets with sluice's own encoders
 * (checkpoint metadata and state files, the row codecs, the CSV and JSON
 * formatters), plus hand-made edge cases that the encoders never produce.
 * Usage: sl_fuzz_make_corpus CORPUS_DIR (tools/fuzz seed runs it).  The
 * seeds are committed; regenerate them when a format changes.
 */
#include <xxhash.h>

#include "checkpoint/checkpoint.h"
#include "connectors/mariadb/cdc_int.h"
#include "connectors/mariadb/cdc_source.h"
#include "connectors/postgres/pg_cdc_source.h"
#include "fuzz_schema.h"

static const char *root;

static void put(const char *target, const char *name, const void *p,
                size_t n) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", root, target);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
  sl_fuzz_write(path, p, n);
}

static void put_str(const char *target, const char *name, const char *s) {
  put(target, name, s, strlen(s));
}

/* Copy a file the library wrote into the corpus. */
static void put_file(const char *target, const char *name, const char *src) {
  FILE *f = fopen(src, "rb");
  SL_FUZZ_CHECK(f != NULL);
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  put(target, name, buf, n);
}

/* ------------------------------------------------------------------ */

static void meta_seeds(const char *dir) {
  char path[512];
  sl_ckpt_meta_t m = {.id = 7, .time_ns = 1700000000000000000ll,
                      .max_parallelism = 128, .job = "orders"};
  SL_FUZZ_CHECK(sl__ckpt_write_meta(dir, &m, NULL, NULL) == SL_OK);
  snprintf(path, sizeof(path), "%s/_metadata", dir);
  put_file("ckpt_meta", "empty-job", path);

  uint8_t pos[] = {1, 2, 3, 4, 5, 6, 7, 8};
  sl_ckpt_entry_t entries[] = {{.key = 0, .bytes = pos, .len = 8},
                               {.key = 3, .bytes = pos, .len = 0}};
  sl_ckpt_opstate_t ostate = {.name = "source.positions", .entries = entries,
                              .n_entries = 2};
  sl_ckpt_subtask_t subs[] = {
      {.subtask = 0, .kg_start = 1, .kg_end = 0, .opstates = &ostate,
       .n_opstates = 1},
      {.subtask = 1, .kg_start = 0, .kg_end = 63,
       .state_file = "count-1.state", .state_size = 4242,
       .state_checksum = 0x1234567890abcdefull,
       .channel_file = "count-1.channel", .channel_size = 99,
       .channel_checksum = 42},
      {.subtask = 2, .kg_start = 64, .kg_end = 127,
       .state_file = "count-2.state", .state_size = 100,
       .state_checksum = 7}};
  sl_ckpt_op_t ops[] = {
      {.uid = "source", .parallelism = 1, .subtasks = subs, .n_subtasks = 1},
      {.uid = "count", .parallelism = 2, .subtasks = subs + 1,
       .n_subtasks = 2}};
  m.ops = ops;
  m.n_ops = 2;
  m.mode = 1;
  SL_FUZZ_CHECK(sl__ckpt_write_meta(dir, &m, NULL, NULL) == SL_OK);
  put_file("ckpt_meta", "two-ops", path);
  m.kind = SL_CKPT_KIND_SAVEPOINT;
  m.id = UINT64_MAX;
  m.max_parallelism = SL_MAX_PARALLELISM_LIMIT;
  SL_FUZZ_CHECK(sl__ckpt_write_meta(dir, &m, NULL, NULL) == SL_OK);
  put_file("ckpt_meta", "savepoint-max", path);
  /* Version 2: a source operator with its enumerator's state. */
  uint8_t est[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  ops[0].has_enum_state = true;
  ops[0].enum_state = est;
  ops[0].enum_state_len = sizeof(est);
  m.kind = SL_CKPT_KIND_CHECKPOINT;
  m.id = 8;
  SL_FUZZ_CHECK(sl__ckpt_write_meta(dir, &m, NULL, NULL) == SL_OK);
  put_file("ckpt_meta", "enum-state", path);
  ops[0].has_enum_state = false;
  put_str("ckpt_meta", "not-metadata", "SLCM\x02");
  put("ckpt_meta", "empty", "", 0);
}

/* ------------------------------------------------------------------ */

static int concat(void *user, sl_slice_t a, sl_slice_t b, sl_bytes_t *out) {
  (void)user;
  int rc = sl_bytes_append(out, a.ptr, a.len);
  return rc == SL_OK ? sl_bytes_append(out, b.ptr, b.len) : rc;
}

static void set_key(sl_kstate_t *be, const char *k) {
  uint32_t n = (uint32_t)strlen(k);
  SL_FUZZ_CHECK(sl__kstate_set_key(be, k, n, sl__key_hash64(k, n)) == SL_OK);
}

static void state_seed(const char *dir, const char *name, uint32_t lo,
                       uint32_t hi, bool with_timers) {
  sl_kstate_t *be;
  SL_FUZZ_CHECK(sl__kstate_create(128, lo, hi, &be) == SL_OK);
  sl_state_desc_t dv = {.name = "count", .kind = SL_STATE_VALUE};
  sl_state_desc_t dl = {.name = "seen", .kind = SL_STATE_LIST, .version = 3};
  sl_state_desc_t dm = {.name = "by_item", .kind = SL_STATE_MAP};
  sl_state_desc_t dr = {.name = "all", .kind = SL_STATE_REDUCING,
                        .reduce = concat};
  sl_state_t *sv, *sls, *sm, *sr;
  SL_FUZZ_CHECK(sl__kstate_register(be, &dv, &sv, NULL) == SL_OK);
  SL_FUZZ_CHECK(sl__kstate_register(be, &dl, &sls, NULL) == SL_OK);
  SL_FUZZ_CHECK(sl__kstate_register(be, &dm, &sm, NULL) == SL_OK);
  SL_FUZZ_CHECK(sl__kstate_register(be, &dr, &sr, NULL) == SL_OK);
  sl_ckpt_timer_t timers[8];
  uint32_t n_timers = 0;
  char key[32];
  for (int i = 0; i < 40; i++) {
    snprintf(key, sizeof(key), "k%d", i);
    uint32_t n = (uint32_t)strlen(key);
    uint32_t kg = sl_key_group_of_hash(
        sl__key_hash_fold(sl__key_hash64(key, n)), 128);
    if (kg < lo || kg > hi) continue;
    set_key(be, key);
    SL_FUZZ_CHECK(sl_value_put_i64(sv, i) == SL_OK);
    SL_FUZZ_CHECK(sl_list_add(sls, "a", 1) == SL_OK);
    SL_FUZZ_CHECK(sl_list_add(sls, "", 0) == SL_OK);
    SL_FUZZ_CHECK(sl_map_put(sm, "x", 1, "yy", 2) == SL_OK);
    SL_FUZZ_CHECK(sl__kstate_set_namespace(be, "w1", 2) == SL_OK);
    SL_FUZZ_CHECK(sl_reducing_add(sr, "r", 1) == SL_OK);
    SL_FUZZ_CHECK(sl_reducing_add(sr, "s", 1) == SL_OK);
    if (with_timers && n_timers < 8) {
      timers[n_timers] = (sl_ckpt_timer_t){
          .ts = i % 2 ? -i : INT64_MAX - i, .kg = kg, .len = n,
          .domain = (uint8_t)(i & 1), .key = (uint8_t *)strdup(key)};
      n_timers++;
    }
  }
  sl_kstate_snap_t *snap;
  SL_FUZZ_CHECK(sl__kstate_snapshot(be, &snap) == SL_OK);
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  uint64_t size, ck;
  SL_FUZZ_CHECK(sl__ckpt_write_state(path, snap, lo, hi, timers, n_timers,
                                     &size, &ck, NULL) == SL_OK);
  put_file("ckpt_state", name, path);
  sl__kstate_snap_release(snap);
  sl__kstate_destroy(be);
  for (uint32_t i = 0; i < n_timers; i++) free(timers[i].key);
}

/* A state file with no sections and an empty index, whose header says key
 * groups 0..UINT32_MAX: the count wraps to 0 in 32 bits (fixed in
 * sl__ckpt_read_state; the target makes its checksums valid). */
static void state_kg_wrap(void) {
  uint8_t f[20 + 32];
  memcpy(f, "SLST", 4);
  uint32_t v[4] = {2, 0, UINT32_MAX, 0};
  memcpy(f + 4, v, 16);
  uint64_t foot[3] = {20, 20, 0};
  foot[2] = XXH3_64bits(f, 20);
  memcpy(f + 20, foot, 24);
  memcpy(f + 44, "SLSTEND", 8);
  put("ckpt_state", "crash-kg-wrap-u32", f, sizeof(f));
}

/* ------------------------------------------------------------------ */

static void put_u32(sl_bytes_t *b, uint32_t v) {
  SL_FUZZ_CHECK(sl_bytes_append(b, &v, 4) == SL_OK);
}

static void channel_seeds(void) {
  sl_row_builder_t b0, b1;
  SL_FUZZ_CHECK(sl_row_builder_init(&b0, sl_fuzz_channel_schema(0)) == SL_OK);
  SL_FUZZ_CHECK(sl_row_builder_init(&b1, sl_fuzz_channel_schema(1)) == SL_OK);
  sl_row_t r0, r1;
  sl_row_builder_reset(&b0, SL_ROW_INSERT);
  sl_row_builder_set_i64(&b0, 0, 42);
  SL_FUZZ_CHECK(sl_row_builder_set_str(&b0, 1, "alice", 5) == SL_OK);
  sl_row_builder_set_bool(&b0, 2, true);
  SL_FUZZ_CHECK(sl_row_builder_finish(&b0, &r0, NULL) == SL_OK);
  sl_row_builder_reset(&b1, SL_ROW_UPDATE_AFTER);
  SL_FUZZ_CHECK(sl_row_builder_set_str(&b1, 1, "\x00\x01", 2) == SL_OK);
  sl_row_builder_set_i32(&b1, 2, -7);
  SL_FUZZ_CHECK(sl_row_builder_finish(&b1, &r1, NULL) == SL_OK);

  sl_bytes_t c;
  sl_bytes_init(&c);
  /* Input records on both inputs. */
  uint8_t kind = 0;
  SL_FUZZ_CHECK(sl_bytes_append(&c, &kind, 1) == SL_OK);
  put_u32(&c, 0);
  put_u32(&c, r0.len);
  SL_FUZZ_CHECK(sl_bytes_append(&c, r0.data, r0.len) == SL_OK);
  put("channel_state", "input-record", c.data, c.len);
  SL_FUZZ_CHECK(sl_bytes_append(&c, &kind, 1) == SL_OK);
  put_u32(&c, 1);
  put_u32(&c, r1.len);
  SL_FUZZ_CHECK(sl_bytes_append(&c, r1.data, r1.len) == SL_OK);
  put("channel_state", "input-records-2", c.data, c.len);
  /* Output buffers: writer 0 channel 0 (no hash), writer 1 channel 0
   * (hash): frames [u32 len][u64 hash][row]. */
  sl_bytes_t buf;
  sl_bytes_init(&buf);
  put_u32(&buf, r0.len);
  SL_FUZZ_CHECK(sl_bytes_append(&buf, r0.data, r0.len) == SL_OK);
  put_u32(&buf, r0.len);
  SL_FUZZ_CHECK(sl_bytes_append(&buf, r0.data, r0.len) == SL_OK);
  kind = 1;
  SL_FUZZ_CHECK(sl_bytes_append(&c, &kind, 1) == SL_OK);
  put_u32(&c, 0);
  put_u32(&c, 0);
  put_u32(&c, (uint32_t)buf.len);
  SL_FUZZ_CHECK(sl_bytes_append(&c, buf.data, buf.len) == SL_OK);
  buf.len = 0;
  put_u32(&buf, r1.len);
  uint64_t h = 0x0123456789abcdefull;
  SL_FUZZ_CHECK(sl_bytes_append(&buf, &h, 8) == SL_OK);
  SL_FUZZ_CHECK(sl_bytes_append(&buf, r1.data, r1.len) == SL_OK);
  SL_FUZZ_CHECK(sl_bytes_append(&c, &kind, 1) == SL_OK);
  put_u32(&c, 1);
  put_u32(&c, 0);
  put_u32(&c, (uint32_t)buf.len);
  SL_FUZZ_CHECK(sl_bytes_append(&c, buf.data, buf.len) == SL_OK);
  put("channel_state", "inputs-and-outputs", c.data, c.len);
  /* An empty output buffer, and edge cases. */
  c.len = 0;
  SL_FUZZ_CHECK(sl_bytes_append(&c, &kind, 1) == SL_OK);
  put_u32(&c, 0);
  put_u32(&c, 1);
  put_u32(&c, 0);
  put("channel_state", "empty-buffer", c.data, c.len);
  put("channel_state", "bad-kind", "\x02", 1);
  put("channel_state", "huge-len", "\x00\x00\x00\x00\x00\xff\xff\xff\xff", 9);
  sl_bytes_close(&buf);
  sl_bytes_close(&c);
  sl_row_builder_close(&b0);
  sl_row_builder_close(&b1);
}

/* ------------------------------------------------------------------ */

static void build_row(sl_row_builder_t *b, int which, sl_row_t *out) {
  sl_row_builder_reset(b, which ? SL_ROW_DELETE : SL_ROW_INSERT);
  sl_row_builder_set_bool(b, 0, which);
  if (which) sl_row_builder_set_i32(b, 1, INT32_MIN);
  sl_row_builder_set_i64(b, 2, which ? INT64_MAX : -1);
  if (which) sl_row_builder_set_f64(b, 3, 0.1);
  sl_row_builder_set_i64(b, 4, which ? -12345 : 0);
  if (which)
    SL_FUZZ_CHECK(sl_row_builder_set_str(b, 5, "a,\"b\"\n c", 9) == SL_OK);
  else
    SL_FUZZ_CHECK(sl_row_builder_set_str(b, 5, "", 0) == SL_OK);
  SL_FUZZ_CHECK(sl_row_builder_set_str(b, 6, "\x00\xfe", which ? 2 : 0) ==
                SL_OK);
  if (which) sl_row_builder_set_i64(b, 7, 1700000000123456ll);
  SL_FUZZ_CHECK(sl_row_builder_finish(b, out, NULL) == SL_OK);
}

static void format_seeds(void) {
  const sl_schema_t *s = sl_fuzz_schema();
  sl_row_builder_t b;
  SL_FUZZ_CHECK(sl_row_builder_init(&b, s) == SL_OK);
  for (int which = 0; which < 2; which++) {
    sl_row_t row;
    build_row(&b, which, &row);
    char name[64];
    /* Row codec: schema then compact row; schema then binary row. */
    sl_bytes_t o;
    sl_bytes_init(&o);
    SL_FUZZ_CHECK(sl_schema_encode(s, &o) == SL_OK);
    size_t mark = o.len;
    SL_FUZZ_CHECK(sl_row_encode_compact(&row, &o) == SL_OK);
    snprintf(name, sizeof(name), "compact-%d", which);
    put("row_codec", name, o.data, o.len);
    o.len = mark;
    SL_FUZZ_CHECK(sl_bytes_append(&o, row.data, row.len) == SL_OK);
    snprintf(name, sizeof(name), "binary-%d", which);
    put("row_codec", name, o.data, o.len);
    /* Without a schema: the target's fallback schema, which is this one
     * except that y is not nullable. */
    o.len = 0;
    SL_FUZZ_CHECK(sl_row_encode_compact(&row, &o) == SL_OK);
    snprintf(name, sizeof(name), "compact-noschema-%d", which);
    put("row_codec", name, o.data, o.len);
    /* CSV with each delimiter, plain and changelog. */
    for (uint8_t flags = 0; flags < 8; flags++) {
      static const char delims[4] = {',', ';', '\t', '|'};
      o.len = 0;
      SL_FUZZ_CHECK(sl_bytes_append(&o, &flags, 1) == SL_OK);
      SL_FUZZ_CHECK(sl_csv_format(&row, delims[flags & 3], flags & 4, &o) ==
                    SL_OK);
      o.len--; /* the parser takes a record without its line end */
      snprintf(name, sizeof(name), "row%d-flags%u", which, flags);
      put("csv", name, o.data, o.len);
    }
    for (uint8_t flags = 0; flags < 2; flags++) {
      o.len = 0;
      SL_FUZZ_CHECK(sl_bytes_append(&o, &flags, 1) == SL_OK);
      SL_FUZZ_CHECK(sl_json_format(&row, flags, &o) == SL_OK);
      o.len--;
      snprintf(name, sizeof(name), "row%d-changelog%u", which, flags);
      put("json", name, o.data, o.len);
    }
    sl_bytes_close(&o);
  }
  sl_row_builder_close(&b);
  put_str("csv", "quoted-empty", "\x00true,,1,,0.5,\"\",,");
  put_str("csv", "crlf", "\x00" "false,1,2,3.5,4,x,,2024-01-01T00:00:00Z\r");
  put_str("csv", "bad-quote", "\x00true,,1,,0.5,\"a\"b,,");
  put_str("csv", "too-few", "\x04+I,true");
  put_str("csv", "overflow", "\x00true,2147483648,9223372036854775808,"
                             "1e999,99999999999,s,,");
  put_str("json", "nulls", "\x00{\"b\":true,\"i64\":1,\"d\":0,\"y\":null}");
  put_str("json", "unknown-member", "\x00{\"b\":true,\"zz\":1}");
  put_str("json", "not-object", "\x00[1,2,3]");
  put_str("json", "nested", "\x00{\"b\":{\"c\":[{}]},\"i64\":1.5e300}");
  put_str("json", "bad-utf8", "\x01{\"op\":\"+U\",\"s\":\"\xc3\x28\"}");
  /* kafka_record: format byte, then value \xff key \xff name \xff value. */
  put_str("kafka_record", "json-meta",
          "\x04{\"b\":true,\"i64\":1,\"d\":0}\xffk1\xffh\xffv\xffn\xff\xfe");
  put("kafka_record", "json-bad", "\x00{\"b\":true,", 11);
  put_str("kafka_record", "csv", "\x01true,1,2,1.5,3.25,s,,\n");
  put_str("kafka_record", "csv-meta-bad-utf8-key",
          "\x05true,1,2,1.5,3.25,s,,\xff\xc3\x28");
  put_str("kafka_record", "string-bad-utf8", "\x06\xc3\x28");
  put_str("kafka_record", "bytes-meta", "\x07\x01\x02\xffkey\xff" "a\xff" "b");
}

/* ------------------------------------------------------------------ */

static void expr_seeds(void) {
  static const char *e[] = {
      "i64 + 1 > 2 and not b",
      "i32 * 2 - i64 / 3 % 5",
      "f / 0.0 >= -1e308 or f is null",
      "d * 1.25 + 3.5",
      "lower(s) = 'zürich ' and upper(s) <> ''",
      "s like 'a%' or length(s) > 3",
      "t > timestamp '2024-01-01T00:00:00Z'",
      "case when b then i64 else -i64 end",
      "coalesce(i32, 0) in (1, 2, 3)",
      "cast(i64 as float64) + cast('12' as int64)",
      "null",
      "null + 1",
      "((((((((((i64))))))))))",
      "-9223372036854775808",
      "9223372036854775807 + 1",
      "'unterminated",
      "i64 +",
      "unknown_field = 1",
      "abs(i64) + round(f, 2)",
      "y = y",
      "b and",
      "\xff\xfe",
  };
  for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
    char name[32];
    snprintf(name, sizeof(name), "expr-%02zu", i);
    put_str("expr", name, e[i]);
  }
}

/* ------------------------------------------------------------------ */

static void pipeline_seeds(const char *src_dir) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/examples/pipelines/account_balance.yaml",
           src_dir);
  put_file("pipeline", "account_balance", path);
  snprintf(path, sizeof(path), "%s/examples/pipelines/windowed-counts.yaml",
           src_dir);
  put_file("pipeline", "windowed-counts", path);
  put_str("pipeline", "generator-with-sets",
          "#set source.count=10\n"
          "#set transforms[1].where=id > 3\n"
          "name: sets\n"
          "source:\n"
          "  type: generator\n"
          "  columns: [id, name]\n"
          "transforms:\n"
          "  - filter:\n"
          "      where: id > 1\n"
          "sink:\n"
          "  type: stdout\n");
  put_str("pipeline", "alias",
          "base: &b {type: stdout}\n"
          "source: {type: generator, count: 3}\n"
          "sink: *b\n");
  put_str("pipeline", "empty", "");
  put_str("pipeline", "scalar-root", "just text\n");
  put_str("pipeline", "bad-yaml", "source: [unclosed\n");
  put_str("pipeline", "wrong-types",
          "parallelism: many\nsource: 3\nsink: []\n");
}

/* The monitored file source's enumerator state: version 1, seen paths,
 * pending splits (path, position). */
static void file_enum_seeds(void) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_FUZZ_CHECK(sl_bytes_append(&b, "\x01", 1) == SL_OK);
  const char *seen[] = {"in/a.csv", "in/b.csv", "in/c.csv"};
  SL_FUZZ_CHECK(sl_bytes_append_u64le(&b, 3) == SL_OK);
  for (int i = 0; i < 3; i++) {
    SL_FUZZ_CHECK(sl_bytes_append_u64le(&b, strlen(seen[i])) == SL_OK);
    SL_FUZZ_CHECK(sl_bytes_append(&b, seen[i], strlen(seen[i])) == SL_OK);
  }
  SL_FUZZ_CHECK(sl_bytes_append_u64le(&b, 2) == SL_OK);
  for (int i = 1; i < 3; i++) {
    SL_FUZZ_CHECK(sl_bytes_append_u64le(&b, strlen(seen[i])) == SL_OK);
    SL_FUZZ_CHECK(sl_bytes_append(&b, seen[i], strlen(seen[i])) == SL_OK);
    SL_FUZZ_CHECK(sl_bytes_append_u64le(&b, i == 1 ? 24 : 0) == SL_OK);
    for (int k = 0; i == 1 && k < 24; k++)
      SL_FUZZ_CHECK(sl_bytes_append(&b, "\x07", 1) == SL_OK);
  }
  put("file_enum_state", "three-seen-two-pending", b.data, b.len);
  uint8_t empty[17] = {1};
  put("file_enum_state", "empty", empty, sizeof(empty));
  put_str("file_enum_state", "bad-version", "\x02");
  sl_bytes_close(&b);
}

/* The MariaDB CDC source's chunk lists (cdc_chunks.c): an integer
 * composite key, a string key, a decimal (text) key, one unbounded chunk;
 * and a truncated one. */
static sl__cdc_kv_t *cdc_bound(uint8_t kind, int64_t i, const char *s) {
  sl__cdc_kv_t *v = sl_calloc(1, sizeof(*v));
  SL_FUZZ_CHECK(v != NULL);
  if (kind == SL_CDC_KEY_INT) {
    v->i = i;
  } else {
    v->len = (uint32_t)strlen(s);
    v->p = (uint8_t *)sl_strdup(s);
  }
  return v;
}

static void cdc_seed(const char *name, uint8_t kind, uint32_t n_chunks,
                     const int64_t *ib, const char *const *sb, bool cut) {
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  SL_FUZZ_CHECK(cl != NULL);
  cl->db = sl_strdup("shop");
  cl->table = sl_strdup("orders");
  cl->n_key = 1;
  cl->key_names = sl_calloc(1, sizeof(char *));
  cl->key_names[0] = sl_strdup("k");
  cl->key_kind = sl_calloc(1, 1);
  cl->key_kind[0] = kind;
  cl->n = n_chunks;
  cl->chunks = sl_calloc(n_chunks, sizeof(*cl->chunks));
  for (uint32_t i = 0; i < n_chunks; i++) {
    cl->chunks[i].id = i;
    if (i > 0)
      cl->chunks[i].low = cdc_bound(kind, ib ? ib[i - 1] : 0,
                                    sb ? sb[i - 1] : NULL);
    if (i + 1 < n_chunks)
      cl->chunks[i].high = cdc_bound(kind, ib ? ib[i] : 0, sb ? sb[i] : NULL);
  }
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_FUZZ_CHECK(sl__cdc_chunks_encode(cl, &b) == SL_OK);
  put("cdc_chunks", name, b.data, cut ? b.len - 3 : b.len);
  sl_bytes_close(&b);
  sl__cdc_chunks_free(cl);
}

static void cdc_state_put(const char *name, const void *p, size_t n) {
  put("cdc_source_state", name, p, n);
}

static void pgcdc_state_put(const char *name, const void *p, size_t n) {
  put("pgcdc_source_state", name, p, n);
}

static void cdc_chunks_seeds(void) {
  SL_FUZZ_CHECK(sl__postgres_cdc_fuzz_seeds(pgcdc_state_put) == SL_OK);
  SL_FUZZ_CHECK(sl__mariadb_cdc_fuzz_seeds(cdc_state_put) == SL_OK);
  static const int64_t ints[] = {-5, 1001, 2001, 9001};
  static const char *const strs[] = {"K00097'\\", "k00194\xc3\xa9", "zz"};
  static const char *const decs[] = {"-1.25", "0.00", "9.75"};
  cdc_seed("int-5-chunks", SL_CDC_KEY_INT, 5, ints, NULL, false);
  cdc_seed("string-4-chunks", SL_CDC_KEY_STR, 4, NULL, strs, false);
  cdc_seed("binary-4-chunks", SL_CDC_KEY_BIN, 4, NULL, strs, false);
  cdc_seed("decimal-4-chunks", SL_CDC_KEY_TEXT, 4, NULL, decs, false);
  cdc_seed("one-chunk", SL_CDC_KEY_INT, 1, NULL, NULL, false);
  cdc_seed("truncated", SL_CDC_KEY_INT, 5, ints, NULL, true);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s CORPUS_DIR SOURCE_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  const char *dir = sl_fuzz_setup();
  sl_log_set_level(SL_LOG_ERROR);
  meta_seeds(dir);
  file_enum_seeds();
  state_seed(dir, "keys-0-127", 0, 127, true);
  state_seed(dir, "keys-32-63", 32, 63, false);
  state_seed(dir, "keys-5-5", 5, 5, true);
  state_kg_wrap();
  channel_seeds();
  format_seeds();
  expr_seeds();
  pipeline_seeds(argv[2]);
  cdc_chunks_seeds();
  return 0;
}
