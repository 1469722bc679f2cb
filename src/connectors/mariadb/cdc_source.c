/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mariadb-cdc source: a chunked snapshot of the captured tables, then
 * the binlog, as one exactly-once changelog (docs/cdc-mariadb.md, "The
 * source").  Built on the snapshot half (cdc_*.c, cdc_int.h) and the change
 * stream (cdc_stream.h).
 *
 * DESIGN NOTES
 *
 * Splits.  One per chunk, id "<db>.<table>#<chunk>", and one binlog split,
 * id "binlog".  A chunk split is handed out with an empty state; its
 * reader position is 'U' (unfinished: read again from the start after a
 * restore) or 'F' and the chunk's HIGH (finished, reported to the
 * enumerator, not yet acknowledged).  An acknowledged chunk leaves the
 * reader (sl_source_split_finished).  The binlog split's state is 'B', the
 * resumable stream position (sl_binlog_pos_t: GTID state of the last
 * completed transaction, events and rows to skip) and the filter: per table
 * the chunk list with each chunk's HIGH, until the stream is past the
 * table's largest HIGH.
 *
 * Enumerator (the coordinator's thread for this source).  Plans the chunks
 * at its first discovery and keeps them in its state (never planned again
 * after a restore).  Chunk status: pending, assigned (to a reader), or
 * finished (with HIGH and the epoch its report arrived in: the id of the
 * first enumerator snapshot after it).  A report is acknowledged with an
 * event; the gateway orders the acknowledgement with the checkpoints, so a
 * fact "finished" is in the enumerator's state or the reader re-reports it.
 * When a reader is reset to checkpoint K in the same process (the live
 * enumerator is kept), reset_reader returns to "assigned" every chunk of
 * that reader whose report arrived after K: the reader's restored state
 * has it unfinished and reads it again.
 *
 * The gate.  The first snapshot N taken with every chunk finished is kept
 * in the state (all_ckpt).  When N completes (or a restore from a
 * checkpoint >= N: the restored state says so), the gate is open and the
 * binlog split is assigned at the next callback.  Its start is the
 * component-wise minimum of the chunks' HIGH GTID states.
 *
 * Reader.  One I/O thread per reader subtask does the blocking work: reads
 * chunks (LOW, SELECT, HIGH, then the binlog between LOW and HIGH for the
 * table, merged by primary key) and streams the binlog in batches, each
 * with the position after its last row.  The task emits a whole chunk, or a
 * whole batch, in one poll, so a barrier never falls inside one: a chunk is
 * either emitted and finished in the reader's state, or not emitted at all.
 *
 * Filter.  For a table chunked by its primary key, a binlog change of key k
 * in chunk c of transaction (d, s) is emitted only when s > HIGH_c[d] (an
 * update that changes the key is a delete of the old key and an insert of
 * the new one, each filtered by its own chunk).  With a declared chunk key
 * that is not the primary key (the key can move between chunks), there is
 * no filter: rows carry a version (_sl_version) and the reconciler keyed by
 * primary key keeps the newest (DESIGN.md section 7).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <mysql.h>

#include "connectors/mariadb/cdc_int.h"
#include "connectors/mariadb/cdc_source.h"
#include "connectors/mariadb/cdc_stream.h"
#include "core/bytes_cur.h"
#include "core/core.h"
#include "core/inject.h"
#include "sluice/sluice.h"

#define BINLOG_ID "binlog"
#define BATCH_ROWS 512u
#define QUEUE_MAX 4u
#define STATE_VERSION 1u

enum { CH_PENDING = 0, CH_ASSIGNED = 1, CH_FINISHED = 2 };

typedef struct msrc_s {
  char *host;
  int port;
  char *user, *password;
  char server[300];
  char **patterns;
  uint32_t n_patterns;
  char *chunk_key;
  uint64_t chunk_rows;
  sl_mariadb_cdc_start_t start;
  char *start_gtid;
  uint32_t server_id_base;
  uint32_t heartbeat_ms, connect_timeout_ms;
  sl__cdc_table_t **tables;
  uint32_t n_tables;
  bool versioned; /* a declared chunk key that is not the primary key */
  uint32_t n_cols;
  int f_table, f_pos, f_opts, f_version;
  sl_schema_t *schema;
  char **qname; /* per table, "db.table" for the _table field */
} msrc_t;

/* ------------------------------------------------------------------ */
/* Small codec helpers (the cursor is core/bytes_cur.h) */

static int pos_encode(sl_bytes_t *b, const sl__cdc_pos_t *p) {
  int rc = sl__put_str(b, p->gtid);
  if (rc == SL_OK) rc = sl__put_str(b, p->file);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(b, p->offset);
  return rc;
}
static bool pos_decode(sl__rcur_t *c, sl__cdc_pos_t *p) {
  return sl__cur_str(c, p->gtid, sizeof(p->gtid)) &&
         sl__cur_str(c, p->file, sizeof(p->file)) &&
         ((p->offset = sl__cur_u64(c)), !c->bad);
}

/* The chunk id of a split "<db>.<table>#<n>": table index and chunk. */
static bool parse_chunk_id(const msrc_t *s, const char *id, uint32_t *out_t,
                           uint32_t *out_c) {
  const char *h = strrchr(id, '#');
  if (h == NULL || h[1] == 0) return false;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(h + 1, &end, 10);
  if (*end || errno || n > UINT32_MAX) return false;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    size_t dl = strlen(s->tables[t]->db), tl = strlen(s->tables[t]->name);
    if ((size_t)(h - id) == dl + 1 + tl &&
        memcmp(id, s->tables[t]->db, dl) == 0 && id[dl] == '.' &&
        memcmp(id + dl + 1, s->tables[t]->name, tl) == 0) {
      *out_t = t;
      *out_c = (uint32_t)n;
      return true;
    }
  }
  return false;
}

/* GTID states: parse a position's text; min and "all >=". */
static int gtid_parse(const char *text, sl_binlog_gtid_state_t *out,
                      sl_error_t **out_err) {
  return sl__binlog_gtid_state_parse(text, out, out_err);
}
static uint64_t gtid_seq(const sl_binlog_gtid_state_t *st, uint32_t domain) {
  for (uint32_t i = 0; i < st->n; i++)
    if (st->g[i].domain == domain) return st->g[i].seq;
  return 0;
}
/* a >= b in every domain of b. */
static bool gtid_covers(const sl_binlog_gtid_state_t *a,
                        const sl_binlog_gtid_state_t *b) {
  for (uint32_t i = 0; i < b->n; i++)
    if (gtid_seq(a, b->g[i].domain) < b->g[i].seq) return false;
  return true;
}

static int bounds_encode(const sl__cdc_chunks_t *cl, const sl__cdc_chunk_t *ch,
                         sl_bytes_t *b);

/* Order of two binlog file/offset positions of one server (the files
 * are named <base>.<number>, the number zero-padded and growing). */
static int filepos_cmp(const char *fa, uint64_t oa, const char *fb,
                       uint64_t ob) {
  size_t la = strlen(fa), lb = strlen(fb);
  if (la != lb) return la < lb ? -1 : 1;
  int c = strcmp(fa, fb);
  if (c != 0) return c < 0 ? -1 : 1;
  return oa < ob ? -1 : oa > ob;
}

/* ------------------------------------------------------------------ */
/* Connections */

static int src_connect(const msrc_t *s, MYSQL **out, sl_error_t **out_err) {
  int rc = sl__cdc_connect(s->host, s->port, s->user, s->password,
                           s->connect_timeout_ms, out, out_err);
  if (rc == SL_OK) rc = sl__cdc_session_setup(*out, s->server, out_err);
  if (rc != SL_OK && *out) {
    mysql_close(*out);
    *out = NULL;
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* Enumerator */

typedef struct ech_s {
  uint8_t status;
  uint32_t owner;
  uint64_t fin_epoch;
  sl__cdc_pos_t *high; /* finished */
} ech_t;

typedef struct etab_s {
  sl__cdc_chunks_t *cl;
  ech_t *ch;
} etab_t;

typedef struct menum_s {
  msrc_t *src;
  uint32_t par;
  bool planned;
  bool binlog_only; /* startup latest or gtid: no chunks */
  etab_t *t; /* src->n_tables */
  uint64_t last_snap;
  uint64_t all_ckpt;
  bool gate_open;
  bool binlog_assigned;
  uint8_t *binlog_state; /* the binlog split's state to hand out (a start,
                            or a position that came back) */
  size_t binlog_len;
  bool *waiting;
  bool *told_end; /* snapshot mode: no more splits signalled */
  MYSQL *c;
} menum_t;

static void etabs_free(menum_t *e) {
  if (e->t == NULL) return;
  for (uint32_t t = 0; t < e->src->n_tables; t++) {
    etab_t *et = &e->t[t];
    if (et->cl && et->ch)
      for (uint32_t i = 0; i < et->cl->n; i++) sl_free(et->ch[i].high);
    sl_free(et->ch);
    sl__cdc_chunks_free(et->cl);
  }
  sl_free(e->t);
  e->t = NULL;
}

static void enum_close(void *en) {
  menum_t *e = en;
  if (e == NULL) return;
  etabs_free(e);
  sl_free(e->binlog_state);
  sl_free(e->waiting);
  sl_free(e->told_end);
  if (e->c) mysql_close(e->c);
  sl_free(e);
}

static bool all_finished(const menum_t *e) {
  if (!e->planned) return false;
  for (uint32_t t = 0; t < e->src->n_tables; t++)
    for (uint32_t i = 0; i < e->t[t].cl->n; i++)
      if (e->t[t].ch[i].status != CH_FINISHED) return false;
  return true;
}

/*
 * State, version 1: "SLCE", version u8, planned u8, n_tables u32, per
 * table the chunk list (blob) and per chunk status u8, owner u32,
 * fin_epoch u64 and, when finished, HIGH (gtid, file, offset); then
 * last_snap u64, all_ckpt u64, binlog_assigned u8, the binlog split's
 * state to hand out (blob, empty: none).
 */
static int enum_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  menum_t *e = en;
  e->last_snap = id;
  if (!e->gate_open && e->all_ckpt == 0 && all_finished(e)) e->all_ckpt = id;
  int rc = sl_bytes_append(out, "SLCE", 4);
  if (rc == SL_OK) rc = sl__put_u8(out, STATE_VERSION);
  /* planned: 0 not yet, 1 chunk lists follow, 2 no snapshot (binlog
   * only: no lists). */
  bool lists = e->planned && !e->binlog_only;
  if (rc == SL_OK) rc = sl__put_u8(out, e->binlog_only ? 2 : e->planned);
  if (rc == SL_OK) rc = sl__put_u32(out, lists ? e->src->n_tables : 0);
  for (uint32_t t = 0; lists && rc == SL_OK && t < e->src->n_tables; t++) {
    sl_bytes_t cb;
    sl_bytes_init(&cb);
    rc = sl__cdc_chunks_encode(e->t[t].cl, &cb);
    if (rc == SL_OK) rc = sl__put_blob(out, cb.data, cb.len);
    sl_bytes_close(&cb);
    for (uint32_t i = 0; rc == SL_OK && i < e->t[t].cl->n; i++) {
      const ech_t *c = &e->t[t].ch[i];
      rc = sl__put_u8(out, c->status);
      if (rc == SL_OK) rc = sl__put_u32(out, c->owner);
      if (rc == SL_OK) rc = sl_bytes_append_u64le(out, c->fin_epoch);
      if (rc == SL_OK && c->status == CH_FINISHED) rc = pos_encode(out, c->high);
    }
  }
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->last_snap);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->all_ckpt);
  if (rc == SL_OK) rc = sl__put_u8(out, e->binlog_assigned);
  if (rc == SL_OK) rc = sl__put_blob(out, e->binlog_state, e->binlog_len);
  return rc;
}

static int empty_lists(menum_t *e);

static int enum_decode(menum_t *e, const uint8_t *p, size_t len,
                       sl_error_t **out_err) {
  sl__rcur_t c = {p, len, 0, false};
  const uint8_t *magic = sl__cur_take(&c, 4);
  if (magic == NULL || memcmp(magic, "SLCE", 4) != 0 ||
      sl__cur_u8(&c) != STATE_VERSION)
    goto corrupt;
  uint8_t planned = sl__cur_u8(&c);
  uint32_t nt = sl__cur_u32(&c);
  if (c.bad || planned > 2) goto corrupt;
  if ((planned == 1 && nt != e->src->n_tables) || (planned != 1 && nt != 0))
    goto changed;
  if (planned == 2 && empty_lists(e) != SL_OK) goto nomem;
  e->planned = planned != 0;
  if (planned == 1) {
    if ((e->t = sl_calloc(nt, sizeof(etab_t))) == NULL) goto nomem;
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t bl;
      const uint8_t *b = sl__cur_blob(&c, &bl);
      if (b == NULL) goto corrupt;
      int rc = sl__cdc_chunks_decode(b, bl, &e->t[t].cl, out_err);
      if (rc == SL_ENOMEM && (out_err == NULL || *out_err == NULL)) goto nomem;
      if (rc != SL_OK) return rc;
      const sl__cdc_table_t *tb = e->src->tables[t];
      if (strcmp(e->t[t].cl->db, tb->db) != 0 ||
          strcmp(e->t[t].cl->table, tb->name) != 0)
        return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: the checkpoint "
                            "captured `%s`.`%s` where the pipeline now "
                            "captures `%s`.`%s`; a changed table list needs "
                            "a new snapshot: start the job without --resume",
                            e->t[t].cl->db, e->t[t].cl->table, tb->db,
                            tb->name);
      /* The chunk key must be the one the lists were cut by. */
      bool same_key = e->t[t].cl->n_key == tb->n_key;
      for (uint32_t k = 0; same_key && k < tb->n_key; k++)
        same_key = e->t[t].cl->key_kind[k] == tb->key_kind[k] &&
                   strcmp(e->t[t].cl->key_names[k],
                          tb->cols[tb->key[k]].name) == 0;
      if (!same_key)
        return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: the checkpoint's "
                            "chunks of `%s`.`%s` are cut by another chunk key "
                            "than the table has now (chunk_key or the primary "
                            "key changed); a new snapshot is needed: start "
                            "the job without --resume", tb->db, tb->name);
      if ((e->t[t].ch = sl_calloc(e->t[t].cl->n + 1, sizeof(ech_t))) == NULL)
        goto nomem;
      for (uint32_t i = 0; i < e->t[t].cl->n; i++) {
        ech_t *ch = &e->t[t].ch[i];
        ch->status = sl__cur_u8(&c);
        ch->owner = sl__cur_u32(&c);
        ch->fin_epoch = sl__cur_u64(&c);
        if (c.bad || ch->status > CH_FINISHED) goto corrupt;
        if (ch->status == CH_FINISHED) {
          if ((ch->high = sl_calloc(1, sizeof(sl__cdc_pos_t))) == NULL)
            goto nomem;
          if (!pos_decode(&c, ch->high)) goto corrupt;
        }
      }
    }
  }
  e->last_snap = sl__cur_u64(&c);
  e->all_ckpt = sl__cur_u64(&c);
  e->binlog_assigned = sl__cur_u8(&c) != 0;
  uint32_t bl;
  const uint8_t *b = sl__cur_blob(&c, &bl);
  if (c.bad || c.off != c.len) goto corrupt;
  if (bl) {
    if ((e->binlog_state = sl_malloc(bl)) == NULL) goto nomem;
    memcpy(e->binlog_state, b, bl);
    e->binlog_len = bl;
  }
  return SL_OK;
corrupt:
  return sl_error_set(out_err, SL_ECORRUPT,
                      "mariadb-cdc: the enumerator's state is corrupt at "
                      "byte %zu of %zu",
                      c.off, len);
changed:
  return sl_error_set(out_err, SL_EINVAL,
                      "mariadb-cdc: the checkpoint's chunk lists name other "
                      "tables than the pipeline captures now (%u in the "
                      "checkpoint, %u now); a changed table list needs a new "
                      "snapshot: start the job without --resume",
                      nt, e->src->n_tables);
nomem:
  return sl_error_set(out_err, SL_ENOMEM, "out of memory");
}

static int enum_create(void *ctx, const sl_enum_init_t *init, void **out,
                       sl_error_t **out_err) {
  msrc_t *s = ctx;
  menum_t *e = sl_calloc(1, sizeof(*e));
  uint32_t par = init->parallelism ? init->parallelism : 1;
  if (e) {
    e->src = s;
    e->par = par;
    e->waiting = sl_calloc(par, sizeof(bool));
    e->told_end = sl_calloc(par, sizeof(bool));
  }
  if (e == NULL || e->waiting == NULL || e->told_end == NULL) {
    enum_close(e);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  if (init->state) {
    int rc = enum_decode(e, init->state, init->state_len, out_err);
    if (rc != SL_OK) {
      if (out_err && *out_err)
        sl_error_prefix(*out_err, "checkpoint %llu",
                        (unsigned long long)init->restored_checkpoint_id);
      enum_close(e);
      return rc;
    }
    /* The checkpoint restored is at least the first one that held every
     * chunk finished: it completed, so the gate is open now. */
    if (e->all_ckpt && init->restored_checkpoint_id >= e->all_ckpt &&
        all_finished(e))
      e->gate_open = true;
  }
  *out = e;
  return SL_OK;
}

/* No snapshot (startup latest or gtid): an empty chunk list per table
 * stands for "nothing to read"; the gate is open. */
static int empty_lists(menum_t *e) {
  const msrc_t *s = e->src;
  if ((e->t = sl_calloc(s->n_tables + 1, sizeof(etab_t))) == NULL)
    return SL_ENOMEM;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    e->t[t].cl = sl_calloc(1, sizeof(sl__cdc_chunks_t));
    if (e->t[t].cl == NULL ||
        (e->t[t].cl->db = sl_strdup(s->tables[t]->db)) == NULL ||
        (e->t[t].cl->table = sl_strdup(s->tables[t]->name)) == NULL)
      return SL_ENOMEM;
  }
  e->planned = e->binlog_only = e->gate_open = true;
  return SL_OK;
}

/* Plan (first discovery of a fresh start). */
static int enum_plan(menum_t *e, sl_error_t **out_err) {
  msrc_t *s = e->src;
  /* The replication connections' ids [server_id, +parallelism) must be
   * free (a fresh start only: a restore keeps the ids it ran with). */
  if (e->c == NULL) {
    int rc = src_connect(s, &e->c, out_err);
    if (rc != SL_OK) return rc;
  }
  int rc0 = sl__cdc_check_server_ids(e->c, s->server, s->server_id_base,
                                     e->par, NULL, out_err);
  if (rc0 != SL_OK) {
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc0;
  }
  if (s->start == SL_MARIADB_CDC_START_LATEST ||
      s->start == SL_MARIADB_CDC_START_GTID) {
    sl_binlog_pos_t bp;
    memset(&bp, 0, sizeof(bp));
    if (s->start == SL_MARIADB_CDC_START_GTID) {
      int rc = gtid_parse(s->start_gtid, &bp.gtid, out_err);
      if (rc != SL_OK) {
        if (out_err && *out_err)
          sl_error_prefix(*out_err, "mariadb-cdc: start gtid '%s'",
                          s->start_gtid);
        return rc;
      }
    } else {
      sl__cdc_pos_t cur;
      if (e->c == NULL) {
        int rc = src_connect(s, &e->c, out_err);
        if (rc != SL_OK) return rc;
      }
      int rc = sl__cdc_pos_current(e->c, s->server, &cur, out_err);
      if (rc == SL_OK) rc = gtid_parse(cur.gtid, &bp.gtid, out_err);
      if (rc != SL_OK) return rc;
    }
    sl_bytes_t b;
    sl_bytes_init(&b);
    int rc = sl__put_u8(&b, 'B');
    if (rc == SL_OK) {
      sl_bytes_t pb;
      sl_bytes_init(&pb);
      rc = sl__binlog_pos_encode(&bp, &pb);
      if (rc == SL_OK) rc = sl__put_blob(&b, pb.data, pb.len);
      sl_bytes_close(&pb);
    }
    if (rc == SL_OK) rc = sl__put_u32(&b, 0); /* no filter */
    if (rc != SL_OK) {
      sl_bytes_close(&b);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    e->binlog_state = b.data;
    e->binlog_len = b.len;
    if (empty_lists(e) != SL_OK)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    return SL_OK;
  }
  if (e->c == NULL) {
    int rc = src_connect(s, &e->c, out_err);
    if (rc != SL_OK) return rc;
  }
  etab_t *t = sl_calloc(s->n_tables + 1, sizeof(etab_t));
  if (t == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  e->t = t;
  for (uint32_t i = 0; i < s->n_tables; i++) {
    sl__cdc_plan_opts_t po = {s->chunk_rows, 0, 0};
    int rc = sl__cdc_plan_chunks(e->c, s->server, s->tables[i], &po, &t[i].cl,
                                 NULL, out_err);
    if (rc != SL_OK) {
      etabs_free(e);
      return rc;
    }
    if ((t[i].ch = sl_calloc(t[i].cl->n + 1, sizeof(ech_t))) == NULL) {
      etabs_free(e);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
  }
  e->planned = true;
  sl_log(SL_LOG_INFO, "mariadb-cdc: %u table(s) planned for the snapshot",
         s->n_tables);
  return SL_OK;
}

/* The binlog split's state at the gate: the smallest HIGH and the filter. */
static int binlog_start_state(menum_t *e, sl_error_t **out_err) {
  msrc_t *s = e->src;
  sl_binlog_pos_t bp;
  memset(&bp, 0, sizeof(bp));
  bool first = true;
  sl_bytes_t filt;
  sl_bytes_init(&filt);
  int rc = sl__put_u32(&filt, s->n_tables);
  for (uint32_t t = 0; rc == SL_OK && t < s->n_tables; t++) {
    etab_t *et = &e->t[t];
    sl_bytes_t cb;
    sl_bytes_init(&cb);
    rc = sl__cdc_chunks_encode(et->cl, &cb);
    if (rc == SL_OK) rc = sl__put_blob(&filt, cb.data, cb.len);
    sl_bytes_close(&cb);
    for (uint32_t i = 0; rc == SL_OK && i < et->cl->n; i++) {
      const sl__cdc_pos_t *h = et->ch[i].high;
      if (et->ch[i].status != CH_FINISHED || h == NULL) {
        rc = sl_error_set(out_err, SL_ESTATE, "mariadb-cdc: the binlog phase "
                          "would start while chunk %s.%s#%u is unfinished",
                          et->cl->db, et->cl->table, i);
        break;
      }
      /* The earliest file and offset, for a server without GTIDs. */
      if (!first &&
          filepos_cmp(h->file, h->offset, bp.file, bp.offset) < 0) {
        snprintf(bp.file, sizeof(bp.file), "%s", h->file);
        bp.offset = h->offset;
      }
      rc = sl__put_str(&filt, h->gtid);
      sl_binlog_gtid_state_t st;
      if (rc == SL_OK) rc = gtid_parse(h->gtid, &st, out_err);
      if (rc != SL_OK) break;
      if (first) {
        bp.gtid = st;
        snprintf(bp.file, sizeof(bp.file), "%s", h->file);
        bp.offset = h->offset;
        first = false;
        continue;
      }
      /* Component-wise minimum; a domain missing on one side is 0. */
      sl_binlog_gtid_state_t m = {0};
      for (uint32_t k = 0; k < bp.gtid.n; k++) {
        uint64_t o = gtid_seq(&st, bp.gtid.g[k].domain);
        if (o == 0) continue;
        m.g[m.n] = bp.gtid.g[k];
        if (o < m.g[m.n].seq)
          for (uint32_t j = 0; j < st.n; j++)
            if (st.g[j].domain == bp.gtid.g[k].domain) m.g[m.n] = st.g[j];
        m.n++;
      }
      bp.gtid = m;
    }
  }
  sl_bytes_t b;
  sl_bytes_init(&b);
  if (rc == SL_OK) rc = sl__put_u8(&b, 'B');
  if (rc == SL_OK) {
    sl_bytes_t pb;
    sl_bytes_init(&pb);
    rc = sl__binlog_pos_encode(&bp, &pb);
    if (rc == SL_OK) rc = sl__put_blob(&b, pb.data, pb.len);
    sl_bytes_close(&pb);
  }
  if (rc == SL_OK) rc = sl__put_blob(&b, filt.data, filt.len);
  sl_bytes_close(&filt);
  if (rc != SL_OK) {
    sl_bytes_close(&b);
    if (out_err && *out_err) return rc;
    return sl_error_set(out_err, rc, "mariadb-cdc: cannot make the binlog "
                        "split: %s", sl_strerror(rc));
  }
  sl_free(e->binlog_state);
  e->binlog_state = b.data;
  e->binlog_len = b.len;
  return SL_OK;
}

static int enum_serve(menum_t *e, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  msrc_t *s = e->src;
  if (!e->planned) return SL_OK;
  /* The binlog split, once the gate is open. */
  if (e->gate_open && !e->binlog_assigned &&
      s->start != SL_MARIADB_CDC_START_SNAPSHOT) {
    if (e->binlog_state == NULL) {
      int rc = binlog_start_state(e, out_err);
      if (rc != SL_OK) return rc;
    }
    /* To a reader that asked (one being reset asks again when it opens;
     * handing the split to it before would only bring it back). */
    uint32_t r = UINT32_MAX;
    for (uint32_t i = 0; i < e->par && r == UINT32_MAX; i++)
      if (e->waiting[i]) r = i;
    if (r == UINT32_MAX) goto chunks;
    sl_split_t sp = {BINLOG_ID, e->binlog_state, e->binlog_len};
    int rc = sl_enum_assign(ec, r, &sp);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "mariadb-cdc: cannot assign the "
                          "binlog split: %s", sl_strerror(rc));
    e->binlog_assigned = true;
    e->waiting[r] = false;
    sl_log(SL_LOG_INFO, "mariadb-cdc: the binlog phase starts on reader %u",
           r);
  }
chunks:
  /* Pending chunks to waiting readers, one each. */
  for (uint32_t r = 0; r < e->par; r++) {
    if (!e->waiting[r]) continue;
    for (uint32_t t = 0; e->waiting[r] && t < s->n_tables; t++) {
      etab_t *et = &e->t[t];
      for (uint32_t i = 0; i < et->cl->n; i++) {
        if (et->ch[i].status != CH_PENDING) continue;
        char id[600];
        snprintf(id, sizeof(id), "%s.%s#%u", et->cl->db, et->cl->table, i);
        sl_bytes_t st;
        sl_bytes_init(&st);
        int rc = sl__put_u8(&st, 'U');
        if (rc == SL_OK) rc = bounds_encode(et->cl, &et->cl->chunks[i], &st);
        sl_split_t sp = {id, st.data, st.len};
        if (rc == SL_OK) rc = sl_enum_assign(ec, r, &sp);
        sl_bytes_close(&st);
        if (rc != SL_OK)
          return sl_error_set(out_err, rc, "mariadb-cdc: cannot assign "
                              "chunk %s: %s", id, sl_strerror(rc));
        et->ch[i].status = CH_ASSIGNED;
        et->ch[i].owner = r;
        e->waiting[r] = false;
        break;
      }
    }
  }
  /* Snapshot only: every chunk finished ends the readers. */
  if (s->start == SL_MARIADB_CDC_START_SNAPSHOT && all_finished(e)) {
    for (uint32_t r = 0; r < e->par; r++) {
      if (e->told_end[r]) continue;
      static const uint8_t end_ev = 'E';
      int rc = sl_enum_signal_no_more_splits(ec, r);
      if (rc == SL_OK) rc = sl_enum_send_event(ec, r, &end_ev, 1);
      if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
      e->told_end[r] = true;
    }
  }
  return SL_OK;
}

static int enum_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  menum_t *e = en;
  if (!e->planned) {
    int rc = enum_plan(e, out_err);
    if (rc != SL_OK) return rc;
  }
  /* Tick while the gate may still open (it opens in checkpoint_complete,
   * which cannot assign). */
  sl_enum_set_discovery_interval(
      ec, e->src->start == SL_MARIADB_CDC_START_SNAPSHOT ? 0
          : e->binlog_assigned                            ? 1000
                                                          : 50);
  return enum_serve(e, ec, out_err);
}

static int enum_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                        sl_error_t **out_err) {
  menum_t *e = en;
  if (subtask < e->par) e->waiting[subtask] = true;
  return enum_serve(e, ec, out_err);
}

static ech_t *find_chunk(menum_t *e, const char *id) {
  uint32_t t, c;
  if (!e->planned || !parse_chunk_id(e->src, id, &t, &c) ||
      c >= e->t[t].cl->n)
    return NULL;
  return &e->t[t].ch[c];
}

/* A reader's report: 'F', split id (blob), HIGH. */
static bool report_decode(const uint8_t *ev, size_t len, char *id,
                          size_t id_size, sl__cdc_pos_t *high) {
  sl__rcur_t c = {ev, len, 0, false};
  return sl__cur_u8(&c) == 'F' && sl__cur_str(&c, id, id_size) &&
         pos_decode(&c, high) && c.off == len;
}

static int enum_event(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      const uint8_t *ev, size_t len, sl_error_t **out_err) {
  menum_t *e = en;
  char id[4200];
  sl__cdc_pos_t high;
  if (!report_decode(ev, len, id, sizeof(id), &high))
    return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: a corrupt report "
                        "from reader %u", subtask);
  ech_t *ch = find_chunk(e, id);
  if (ch == NULL)
    return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: reader %u "
                        "reported chunk '%s', which the enumerator does not "
                        "have", subtask, id);
  if (ch->high == NULL && (ch->high = sl_malloc(sizeof(*ch->high))) == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  /* The newest report wins: a chunk read again after a restore has a new
   * HIGH, and its rows went downstream with it. */
  *ch->high = high;
  ch->status = CH_FINISHED;
  ch->owner = subtask;
  ch->fin_epoch = e->last_snap + 1;
  sl_bytes_t a;
  sl_bytes_init(&a);
  int rc = sl__put_u8(&a, 'A');
  if (rc == SL_OK) rc = sl__put_str(&a, id);
  if (rc == SL_OK) rc = sl_enum_send_event(ec, subtask, a.data, a.len);
  sl_bytes_close(&a);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  return enum_serve(e, ec, out_err);
}

static int enum_back(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                     const sl_split_t *sp, uint32_t n, sl_error_t **out_err) {
  menum_t *e = en;
  (void)subtask;
  for (uint32_t i = 0; i < n; i++) {
    if (strcmp(sp[i].id, BINLOG_ID) == 0) {
      /* Keep the position it came back with (a rescale gives the reader's
       * position; a reset gives the state it was assigned with). */
      uint8_t *p = sl_malloc(sp[i].state_len + 1);
      if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
      if (sp[i].state_len) memcpy(p, sp[i].state, sp[i].state_len);
      sl_free(e->binlog_state);
      e->binlog_state = p;
      e->binlog_len = sp[i].state_len;
      e->binlog_assigned = false;
      e->gate_open = true;
      continue;
    }
    ech_t *ch = find_chunk(e, sp[i].id);
    if (ch == NULL)
      return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: split '%s' "
                          "came back, but the enumerator has no such chunk",
                          sp[i].id);
    if (sp[i].state_len > 1 && sp[i].state[0] == 'F') {
      sl__rcur_t c = {sp[i].state + 1, sp[i].state_len - 1, 0, false};
      sl__cdc_pos_t high;
      if (!pos_decode(&c, &high) || c.off != c.len)
        return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: split '%s' "
                            "came back with a corrupt position", sp[i].id);
      if (ch->high == NULL &&
          (ch->high = sl_malloc(sizeof(*ch->high))) == NULL)
        return sl_error_set(out_err, SL_ENOMEM, "out of memory");
      *ch->high = high;
      ch->status = CH_FINISHED;
      /* From a checkpoint (a rescale): durable, and held by no reader, so
       * no reader's reset may roll it back. */
      ch->fin_epoch = 0;
      ch->owner = UINT32_MAX;
    } else if (sp[i].state_len >= 1 && sp[i].state[0] == 'U') {
      ch->status = CH_PENDING;
      /* Not finished any more: the checkpoint that held every chunk
       * finished no longer opens the gate. */
      if (!e->gate_open) e->all_ckpt = 0;
    } else {
      return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: split '%s' "
                          "came back with a corrupt state", sp[i].id);
    }
  }
  return enum_serve(e, ec, out_err);
}

static int enum_reset_reader(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                             uint64_t checkpoint_id, sl_error_t **out_err) {
  menum_t *e = en;
  if (e->planned)
    for (uint32_t t = 0; t < e->src->n_tables; t++)
      for (uint32_t i = 0; i < e->t[t].cl->n; i++) {
        ech_t *ch = &e->t[t].ch[i];
        if (ch->status == CH_FINISHED && ch->owner == subtask &&
            ch->fin_epoch > checkpoint_id) {
          ch->status = CH_ASSIGNED;
          if (!e->gate_open) e->all_ckpt = 0;
        }
      }
  if (subtask < e->par) {
    e->waiting[subtask] = false;
    e->told_end[subtask] = false;
  }
  return enum_serve(e, ec, out_err);
}

static void enum_complete(void *en, uint64_t checkpoint_id) {
  menum_t *e = en;
  if (e->all_ckpt && checkpoint_id >= e->all_ckpt && all_finished(e))
    e->gate_open = true;
}

static const sl_enum_vt_t cdc_enum_vt = {
    .create = enum_create,
    .discover = enum_discover,
    .handle_split_request = enum_request,
    .add_splits_back = enum_back,
    .handle_reader_event = enum_event,
    .snapshot = enum_snapshot,
    .checkpoint_complete = enum_complete,
    .close = enum_close,
    .reset_reader = enum_reset_reader,
};

/* ------------------------------------------------------------------ */
/* Reader */

enum { RC_QUEUED = 0, RC_READING, RC_DONE, RC_EMITTED, RC_ACKING, RC_ACKED };

typedef struct rchunk_s {
  uint32_t split;
  const char *id;
  uint32_t table, chunk;
  sl__cdc_chunks_t *cl; /* this chunk alone (its bounds) */
  int state;
  sl__cdc_pos_t high;
  sl__cdc_rows_t rows;
  bool has_rows;
  bool reported; /* the report was sent in this reader's life */
} rchunk_t;

/* The binlog filter of one table (until the stream passes its max HIGH). */
typedef struct ftab_s {
  bool active;
  sl__cdc_chunks_t *cl;
  sl__cdc_member_t *m; /* which chunk holds a key */
  sl_binlog_gtid_state_t *high; /* per chunk */
  sl_binlog_gtid_state_t max_high;
} ftab_t;

/* One row of a batch. */
typedef struct brow_s {
  uint8_t kind;
  uint32_t table;
  uint8_t flags; /* bit 0: the table is past its max HIGH */
  sl_binlog_gtid_t gtid;
  uint32_t ev, row;
  int64_t when_us;
} brow_t;

typedef struct batch_s {
  sl__cdc_rows_t *rows; /* per table: the images, in order */
  uint32_t n;
  brow_t *meta;         /* n */
  uint32_t *idx;        /* n: index into rows[meta.table] */
  sl_binlog_pos_t pos;  /* after the last row */
  uint8_t *pure;        /* per table: past max HIGH after this batch */
  struct batch_s *next;
} batch_t;

typedef struct mreader_s {
  const msrc_t *src;
  uint32_t subtask;
  sl_source_waker_t *waker;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  bool has_thread;
  bool stop;
  rchunk_t **ch; /* each allocated alone: the I/O thread holds one while
                    add_splits grows the array */
  uint32_t n_ch, cap_ch;
  /* The binlog split. */
  bool has_binlog;
  uint32_t binlog_split;
  char *binlog_id;
  sl_binlog_pos_t bpos;      /* of the last emitted batch (task) */
  uint8_t *filter_blob;      /* the filter as the split state has it */
  uint32_t filter_len;
  uint8_t *pure;             /* per table, task side */
  bool binlog_started;       /* the I/O thread has it */
  batch_t *q_head, *q_tail;
  uint32_t q_n;
  /* I/O thread failure: the task fails with it. */
  sl_error_t *err;
  sl__cdc_stream_t *stream; /* while streaming, for interrupt */
  MYSQL *c;                 /* the I/O thread's chunk connection */
  bool asked;
  bool is_all_assigned;
  bool reports_sent;
  sl_row_builder_t b;
  bool has_b;
  sl_bytes_t vbuf; /* the version field's bytes (task side) */
} mreader_t;

static void batch_free(batch_t *b, uint32_t n_tables) {
  if (b == NULL) return;
  if (b->rows)
    for (uint32_t t = 0; t < n_tables; t++) sl__cdc_rows_close(&b->rows[t]);
  sl_free(b->rows);
  sl_free(b->meta);
  sl_free(b->idx);
  sl_free(b->pure);
  sl_free(b);
}

static void set_err(mreader_t *rd, sl_error_t *err) {
  pthread_mutex_lock(&rd->lock);
  if (rd->err == NULL) rd->err = err;
  else sl_error_destroy(err);
  pthread_mutex_unlock(&rd->lock);
  if (rd->waker) sl_source_waker_wake(rd->waker);
}

/* ---- The filter ---- */

static void ftabs_free(ftab_t *f, uint32_t n) {
  if (f == NULL) return;
  for (uint32_t t = 0; t < n; t++) {
    sl__cdc_member_close(f[t].m);
    sl__cdc_chunks_free(f[t].cl);
    sl_free(f[t].high);
  }
  sl_free(f);
}

/* Parse a filter blob into per-table filters (NULL: no filter). */
static int filter_parse(const msrc_t *s, const uint8_t *p, uint32_t len,
                        const uint8_t *pure, ftab_t **out,
                        sl_error_t **out_err) {
  *out = NULL;
  if (len == 0) return SL_OK; /* no filter */
  sl__rcur_t c = {p, len, 0, false};
  uint32_t nt = sl__cur_u32(&c);
  if (c.bad || nt == 0)
    return c.bad ? sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: the "
                                "binlog split's filter is corrupt")
                 : SL_OK;
  if (nt != s->n_tables)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: the binlog split's "
                        "filter has %u tables, the pipeline captures %u",
                        nt, s->n_tables);
  ftab_t *f = sl_calloc(nt, sizeof(ftab_t));
  if (f == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (uint32_t t = 0; t < nt; t++) {
    uint32_t bl;
    const uint8_t *b = sl__cur_blob(&c, &bl);
    int rc = b ? sl__cdc_chunks_decode(b, bl, &f[t].cl, out_err) : SL_ECORRUPT;
    if (rc == SL_OK &&
        (f[t].high = sl_calloc(f[t].cl->n + 1, sizeof(*f[t].high))) == NULL)
      rc = SL_ENOMEM;
    for (uint32_t i = 0; rc == SL_OK && f[t].cl && i < f[t].cl->n; i++) {
      char g[SL_CDC_GTID_MAX];
      if (!sl__cur_str(&c, g, sizeof(g))) rc = SL_ECORRUPT;
      else rc = gtid_parse(g, &f[t].high[i], out_err);
      if (rc != SL_OK) break;
      /* The max HIGH: component-wise maximum. */
      for (uint32_t k = 0; k < f[t].high[i].n; k++) {
        const sl_binlog_gtid_t *x = &f[t].high[i].g[k];
        if (gtid_seq(&f[t].max_high, x->domain) < x->seq)
          sl__binlog_gtid_state_update(&f[t].max_high, x);
      }
    }
    if (rc != SL_OK) {
      ftabs_free(f, nt);
      if (out_err && *out_err) return rc;
      return sl_error_set(out_err, rc, "mariadb-cdc: the binlog split's "
                          "filter is corrupt");
    }
    f[t].active = !(pure && pure[t]);
  }
  if (c.off != c.len) {
    ftabs_free(f, nt);
    return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: the binlog "
                        "split's filter has %zu bytes after its end",
                        c.len - c.off);
  }
  *out = f;
  return SL_OK;
}

/* The stream reader_close interrupts (a backfill's or the binlog's). */
static void set_stream(mreader_t *rd, sl__cdc_stream_t *st) {
  pthread_mutex_lock(&rd->lock);
  rd->stream = st;
  bool stop = rd->stop;
  pthread_mutex_unlock(&rd->lock);
  if (stop && st) sl__cdc_stream_interrupt(st);
}

static bool reader_stopping(mreader_t *rd) {
  pthread_mutex_lock(&rd->lock);
  bool stop = rd->stop;
  pthread_mutex_unlock(&rd->lock);
  return stop;
}

/* The I/O thread's SQL connection: made and dropped under the lock, since
 * reader_close shuts its socket down to end a blocked read. */
static int reader_conn(mreader_t *rd, sl_error_t **out_err) {
  if (rd->c != NULL) return SL_OK;
  MYSQL *c = NULL;
  int rc = src_connect(rd->src, &c, out_err);
  if (rc != SL_OK) return rc;
  pthread_mutex_lock(&rd->lock);
  rd->c = c;
  pthread_mutex_unlock(&rd->lock);
  return SL_OK;
}

static void reader_conn_drop(mreader_t *rd) {
  pthread_mutex_lock(&rd->lock);
  MYSQL *c = rd->c;
  rd->c = NULL;
  pthread_mutex_unlock(&rd->lock);
  if (c) mysql_close(c);
}

/* Whether a change of `row` (an image of table t) at gtid passes the
 * filter: its chunk's HIGH is before the transaction. */
static int filter_pass(mreader_t *rd, ftab_t *f, uint32_t t,
                       const sl_row_t *row, const sl_binlog_gtid_t *g,
                       bool *out_pass, sl_error_t **out_err) {
  *out_pass = true;
  if (f == NULL || !f[t].active) return SL_OK;
  if (f[t].m == NULL) {
    /* The checker asks the server for keys in a non-binary collation. */
    int rc = reader_conn(rd, out_err);
    if (rc != SL_OK) return rc;
    rc = sl__cdc_member_open(rd->c, rd->src->server, rd->src->tables[t],
                                 f[t].cl, &f[t].m, out_err);
    if (rc != SL_OK) return rc;
  }
  uint32_t i = 0;
  int rc = sl__cdc_member_find(f[t].m, row, &i, out_err);
  if (rc != SL_OK) return rc;
  if (i < f[t].cl->n) *out_pass = g->seq > gtid_seq(&f[t].high[i], g->domain);
  return SL_OK;
}

/* ---- The I/O thread ---- */

/* Deep copy of n key values. */
static sl__cdc_kv_t *kv_copy(const sl__cdc_kv_t *v, uint32_t n) {
  sl__cdc_kv_t *c = sl_calloc(n ? n : 1, sizeof(*c));
  for (uint32_t i = 0; c && i < n; i++) {
    c[i].i = v[i].i;
    c[i].len = v[i].len;
    if (v[i].p == NULL) continue;
    if ((c[i].p = sl_malloc(v[i].len ? v[i].len : 1)) == NULL) {
      for (uint32_t j = 0; j < i; j++) sl_free(c[j].p);
      sl_free(c);
      return NULL;
    }
    if (v[i].len) memcpy(c[i].p, v[i].p, v[i].len);
  }
  return c;
}

/*
 * The window of a one-chunk list: the chunk and, around it, the key
 * ranges below its low and above its high bound, as a chained list (ids
 * 0..n-1) the membership checker searches; *out_mid is the chunk's index.
 */
static int window_list(const sl__cdc_chunks_t *one, sl__cdc_chunks_t **out,
                       uint32_t *out_mid) {
  const sl__cdc_chunk_t *ch = &one->chunks[0];
  sl__cdc_chunks_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return SL_ENOMEM;
  w->n_key = one->n_key;
  if ((w->db = sl_strdup(one->db)) == NULL ||
      (w->table = sl_strdup(one->table)) == NULL ||
      (w->key_names = sl_calloc(one->n_key + 1, sizeof(char *))) == NULL ||
      (w->key_kind = sl_calloc(one->n_key + 1, 1)) == NULL ||
      (w->chunks = sl_calloc(3, sizeof(sl__cdc_chunk_t))) == NULL)
    goto nomem;
  for (uint32_t k = 0; k < one->n_key; k++) {
    w->key_kind[k] = one->key_kind[k];
    if ((w->key_names[k] = sl_strdup(one->key_names[k])) == NULL) goto nomem;
  }
  uint32_t n = 0;
  if (ch->low) {
    w->chunks[n].id = n;
    if ((w->chunks[n].high = kv_copy(ch->low, one->n_key)) == NULL)
      goto nomem;
    n++;
    w->n = n;
  }
  *out_mid = n;
  w->chunks[n].id = n;
  if (ch->low && (w->chunks[n].low = kv_copy(ch->low, one->n_key)) == NULL)
    goto nomem;
  if (ch->high && (w->chunks[n].high = kv_copy(ch->high, one->n_key)) == NULL)
    goto nomem;
  w->n = ++n;
  if (ch->high) {
    w->chunks[n].id = n;
    if ((w->chunks[n].low = kv_copy(ch->high, one->n_key)) == NULL)
      goto nomem;
    w->n = ++n;
  }
  *out = w;
  return SL_OK;
nomem:
  sl__cdc_chunks_free(w);
  return SL_ENOMEM;
}

typedef struct inchunk_ctx_s {
  sl__cdc_member_t *m; /* over the chunk's window list */
  uint32_t mid;        /* the chunk's index in it */
  int rc;
  sl_error_t *err;
} inchunk_ctx_t;

static bool in_chunk(void *ctx, const sl_row_t *row) {
  inchunk_ctx_t *c = ctx;
  uint32_t i = UINT32_MAX;
  if (c->rc != SL_OK) return false;
  c->rc = sl__cdc_member_find(c->m, row, &i, &c->err);
  return c->rc == SL_OK && i == c->mid;
}

/* One chunk: LOW, SELECT, HIGH, the backfill merged. */
static int read_one_chunk(mreader_t *rd, const sl__cdc_chunks_t *cl,
                          rchunk_t *rc_, sl_error_t **out_err) {
  const msrc_t *s = rd->src;
  const sl__cdc_table_t *t = s->tables[rc_->table];
  int rc = reader_conn(rd, out_err);
  if (rc != SL_OK) return rc;
  sl__cdc_pos_t low, high;
  sl__cdc_rows_init(&rc_->rows, t->schema);
  rc_->has_rows = true;
  const sl__cdc_chunk_t *ch = &cl->chunks[0];
  rc = SL_INJECT("cdc.snapshot.before_low");
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "injected failure at "
                        "cdc.snapshot.before_low (chunk %s)", rc_->id);
  rc = sl__cdc_read_chunk_ex(rd->c, s->server, t, cl, ch,
                             SL_CDC_READ_NO_LOW_GTID, &low, &high, &rc_->rows,
                             out_err);
  if (rc == SL_OK && (rc = SL_INJECT("cdc.snapshot.after_high")) != SL_OK)
    sl_error_set(out_err, rc, "injected failure at cdc.snapshot.after_high "
                 "(chunk %s)", rc_->id);
  if (rc != SL_OK) {
    /* A failed connection is opened again for the next try. */
    reader_conn_drop(rd);
    return rc;
  }
  int cmp = 0;
  rc = sl__cdc_pos_cmp(&low, &high, &cmp, out_err);
  if (rc != SL_OK) return rc;
  if (cmp < 0) {
    /* The backfill: the binlog from LOW's file and offset (the consistent
     * snapshot's exact point) to HIGH's, for this table; rows of
     * transactions beyond HIGH's GTID position are left out. */
    sl_binlog_pos_t bp;
    memset(&bp, 0, sizeof(bp));
    sl_binlog_gtid_state_t hs;
    rc = gtid_parse(high.gtid, &hs, out_err);
    if (rc != SL_OK) return rc;
    snprintf(bp.file, sizeof(bp.file), "%s", low.file);
    bp.offset = low.offset;
    sl__cdc_table_t *one[1] = {s->tables[rc_->table]};
    sl__cdc_stream_opts_t so = {0};
    so.host = s->host;
    so.port = s->port;
    so.user = s->user;
    so.password = s->password;
    so.server = s->server;
    so.server_id = s->server_id_base + rd->subtask;
    so.start = &bp;
    so.tables = one;
    so.n_tables = 1;
    so.is_non_blocking = true;
    so.connect_timeout_ms = s->connect_timeout_ms;
    sl__cdc_stream_t *st = NULL;
    rc = sl__cdc_stream_open(&so, &st, out_err);
    set_stream(rd, st);
    sl__cdc_rows_t keep; /* copies of the window's images */
    sl__cdc_rows_init(&keep, t->schema);
    sl__cdc_change_t *chg = NULL;
    uint32_t n_chg = 0, cap = 0;
    uint32_t *bi = NULL, *ai = NULL; /* image indexes in keep (+1; 0 none) */
    /* Read until the stream has reached HIGH's file and offset: the end of
     * the binlog as the dump sees it may still be before it, so an early
     * end is read again from where it stopped, for at most 30 s. */
    int64_t deadline = sl__clock_monotonic_ns() + 30 * 1000000000LL;
    while (rc == SL_OK) {
      sl__cdc_ev_t ev;
      rc = sl__cdc_stream_next(st, &ev, out_err);
      if (rc == SL_ENOTFOUND) {
        sl_binlog_pos_t at;
        sl__cdc_stream_pos(st, &at);
        if (filepos_cmp(at.file, at.offset, high.file, high.offset) >= 0) {
          rc = SL_OK;
          break;
        }
        if (sl__clock_monotonic_ns() > deadline || reader_stopping(rd)) {
          rc = sl_error_set(out_err, SL_EIO, "the binlog at %s did not reach "
                            "the chunk's HIGH (%s:%llu) within 30 s (at "
                            "%s:%llu)", s->server, high.file,
                            (unsigned long long)high.offset, at.file,
                            (unsigned long long)at.offset);
          break;
        }
        set_stream(rd, NULL);
        sl__cdc_stream_close(st);
        st = NULL;
        bp = at;
        rc = sl__cdc_stream_open(&so, &st, out_err);
        set_stream(rd, st);
        continue;
      }
      if (rc != SL_OK) break;
      if (ev.kind == SL_CDC_EV_TXN_END) {
        sl_binlog_pos_t at;
        sl__cdc_stream_pos(st, &at);
        if (filepos_cmp(at.file, at.offset, high.file, high.offset) >= 0)
          break; /* at HIGH */
        continue;
      }
      if (ev.kind != SL_CDC_EV_ROW) continue;
      if (ev.gtid.seq > gtid_seq(&hs, ev.gtid.domain)) continue; /* after */
      if (n_chg == cap) {
        cap = cap ? 2 * cap : 64;
        void *a = sl_realloc(chg, cap * sizeof(*chg));
        if (a) chg = a;
        void *b1 = a ? sl_realloc(bi, cap * sizeof(uint32_t)) : NULL;
        if (b1) bi = b1;
        void *b2 = b1 ? sl_realloc(ai, cap * sizeof(uint32_t)) : NULL;
        if (b2) ai = b2;
        if (b2 == NULL) {
          rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
          break;
        }
      }
      bi[n_chg] = ai[n_chg] = 0;
      if (ev.before) {
        rc = sl__cdc_rows_add(&keep, ev.before);
        bi[n_chg] = keep.n;
      }
      if (rc == SL_OK && ev.after) {
        rc = sl__cdc_rows_add(&keep, ev.after);
        ai[n_chg] = keep.n;
      }
      if (rc != SL_OK) {
        rc = sl_error_set(out_err, rc, "out of memory");
        break;
      }
      chg[n_chg].kind = ev.row_kind;
      n_chg++;
    }
    set_stream(rd, NULL);
    sl__cdc_stream_close(st);
    if (rc == SL_OK && n_chg) {
      sl_row_t *imgs = sl_calloc(keep.n + 1, sizeof(sl_row_t));
      if (imgs == NULL) rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      for (uint32_t i = 0; rc == SL_OK && i < keep.n; i++)
        sl__cdc_rows_get(&keep, i, &imgs[i]);
      for (uint32_t i = 0; rc == SL_OK && i < n_chg; i++) {
        chg[i].before = bi[i] ? &imgs[bi[i] - 1] : NULL;
        chg[i].after = ai[i] ? &imgs[ai[i] - 1] : NULL;
      }
      inchunk_ctx_t ic = {NULL, 0, SL_OK, NULL};
      sl__cdc_chunks_t *win = NULL;
      if (rc == SL_OK && window_list(cl, &win, &ic.mid) != SL_OK)
        rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      if (rc == SL_OK)
        rc = sl__cdc_member_open(rd->c, s->server, t, win, &ic.m, out_err);
      if (rc == SL_OK)
        rc = sl__cdc_merge(&rc_->rows, t->pk, t->n_pk, chg, n_chg, in_chunk,
                           &ic, out_err);
      sl__cdc_member_close(ic.m);
      sl__cdc_chunks_free(win);
      if (rc == SL_OK && ic.rc != SL_OK) {
        rc = ic.rc;
        if (out_err && *out_err == NULL) *out_err = ic.err;
        else sl_error_destroy(ic.err);
      } else {
        sl_error_destroy(ic.err);
      }
      sl_free(imgs);
    }
    sl_free(chg);
    sl_free(bi);
    sl_free(ai);
    sl__cdc_rows_close(&keep);
    if (rc != SL_OK) {
      if (out_err && *out_err)
        sl_error_prefix(*out_err, "mariadb-cdc: backfill of chunk %s",
                        rc_->id);
      return rc;
    }
  }
  rc_->high = high;
  return SL_OK;
}

static int batch_new(const msrc_t *s, batch_t **out) {
  batch_t *b = sl_calloc(1, sizeof(*b));
  if (b == NULL) return SL_ENOMEM;
  b->rows = sl_calloc(s->n_tables, sizeof(sl__cdc_rows_t));
  b->meta = sl_calloc(BATCH_ROWS * 2 + 2, sizeof(brow_t));
  b->idx = sl_calloc(BATCH_ROWS * 2 + 2, sizeof(uint32_t));
  b->pure = sl_calloc(s->n_tables + 1, 1);
  if (!b->rows || !b->meta || !b->idx || !b->pure) {
    batch_free(b, 0);
    return SL_ENOMEM;
  }
  for (uint32_t t = 0; t < s->n_tables; t++)
    sl__cdc_rows_init(&b->rows[t], s->tables[t]->schema);
  *out = b;
  return SL_OK;
}

static int batch_add(batch_t *b, uint8_t kind, uint32_t table,
                     const sl_row_t *img, const sl__cdc_ev_t *ev,
                     uint8_t flags) {
  int rc = sl__cdc_rows_add(&b->rows[table], img);
  if (rc != SL_OK) return rc;
  brow_t *m = &b->meta[b->n];
  m->kind = kind;
  m->table = table;
  m->flags = flags;
  m->gtid = ev->gtid;
  m->ev = ev->event_index;
  m->row = ev->row_index;
  m->when_us = ev->when_us;
  b->idx[b->n] = b->rows[table].n - 1;
  b->n++;
  return SL_OK;
}

/* Push a batch; waits while the queue is full.  false: stop. */
static bool batch_push(mreader_t *rd, batch_t *b) {
  pthread_mutex_lock(&rd->lock);
  while (!rd->stop && rd->q_n >= QUEUE_MAX)
    pthread_cond_wait(&rd->cond, &rd->lock);
  bool ok = !rd->stop;
  if (ok) {
    if (rd->q_tail) rd->q_tail->next = b;
    else rd->q_head = b;
    rd->q_tail = b;
    rd->q_n++;
  }
  pthread_mutex_unlock(&rd->lock);
  if (ok && rd->waker) sl_source_waker_wake(rd->waker);
  return ok;
}

/* Whether two images of a table have the same primary key. */
static bool same_pk(const sl__cdc_table_t *t, const sl_row_t *a,
                    const sl_row_t *b) {
  sl_bytes_t ka, kb;
  sl_bytes_init(&ka);
  sl_bytes_init(&kb);
  bool same;
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < t->n_pk; k++) {
    rc = sl_key_add_field(&ka, a, t->pk[k]);
    if (rc == SL_OK) rc = sl_key_add_field(&kb, b, t->pk[k]);
  }
  /* Out of memory: "changed" is the safe answer (a delete and an insert). */
  same = rc == SL_OK && ka.len == kb.len &&
         (ka.len == 0 || memcmp(ka.data, kb.data, ka.len) == 0);
  sl_bytes_close(&ka);
  sl_bytes_close(&kb);
  return same;
}

/* Stream the binlog split until stopped or failed. */
static int stream_binlog(mreader_t *rd, sl_error_t **out_err) {
  const msrc_t *s = rd->src;
  pthread_mutex_lock(&rd->lock);
  sl_binlog_pos_t start = rd->bpos;
  uint8_t *pure = sl_calloc(s->n_tables + 1, 1);
  if (pure && rd->pure) memcpy(pure, rd->pure, s->n_tables);
  pthread_mutex_unlock(&rd->lock);
  if (pure == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  ftab_t *f = NULL;
  int rc = filter_parse(s, rd->filter_blob, rd->filter_len, pure, &f, out_err);
  if (rc != SL_OK) {
    sl_free(pure);
    return rc;
  }
  sl__cdc_stream_opts_t so = {0};
  so.host = s->host;
  so.port = s->port;
  so.user = s->user;
  so.password = s->password;
  so.server = s->server;
  so.server_id = s->server_id_base + rd->subtask;
  so.start = &start;
  so.tables = s->tables;
  so.n_tables = s->n_tables;
  so.heartbeat_ms = s->heartbeat_ms;
  so.connect_timeout_ms = s->connect_timeout_ms;
  sl__cdc_stream_t *st = NULL;
  rc = sl__cdc_stream_open(&so, &st, out_err);
  if (rc == SL_OK && (rc = SL_INJECT("cdc.binlog.started")) != SL_OK)
    rc = sl_error_set(out_err, rc, "injected failure at cdc.binlog.started");
  pthread_mutex_lock(&rd->lock);
  rd->stream = st;
  bool stop = rd->stop;
  pthread_mutex_unlock(&rd->lock);
  batch_t *b = NULL;
  sl_binlog_gtid_state_t cur = start.gtid;
  while (rc == SL_OK && !stop) {
    if (b == NULL && (rc = batch_new(s, &b)) != SL_OK) {
      rc = sl_error_set(out_err, rc, "out of memory");
      break;
    }
    sl__cdc_ev_t ev;
    rc = sl__cdc_stream_next(st, &ev, out_err);
    if (rc != SL_OK) break;
    bool flush = ev.kind != SL_CDC_EV_ROW;
    if (ev.kind == SL_CDC_EV_ROW) {
      uint32_t t = ev.table;
      uint8_t flags = f && f[t].active ? 0 : 1;
      if (s->versioned || flags) {
        if (ev.row_kind == SL_ROW_INSERT)
          rc = batch_add(b, SL_ROW_INSERT, t, ev.after, &ev, flags);
        else if (ev.row_kind == SL_ROW_DELETE)
          rc = batch_add(b, SL_ROW_DELETE, t, ev.before, &ev, flags);
        else if (same_pk(s->tables[t], ev.before, ev.after)) {
          rc = batch_add(b, SL_ROW_UPDATE_BEFORE, t, ev.before, &ev, flags);
          if (rc == SL_OK)
            rc = batch_add(b, SL_ROW_UPDATE_AFTER, t, ev.after, &ev, flags);
        } else {
          /* A changed primary key: a delete and an insert (an upsert sink
           * skips -U, so -U/+U would leave the old key behind). */
          rc = batch_add(b, SL_ROW_DELETE, t, ev.before, &ev, flags);
          if (rc == SL_OK)
            rc = batch_add(b, SL_ROW_INSERT, t, ev.after, &ev, flags);
        }
        if (rc != SL_OK) rc = sl_error_set(out_err, rc, "out of memory");
      } else {
        /* The per-chunk filter (primary-key chunks). */
        bool pb = false, pa = false;
        if (ev.before)
          rc = filter_pass(rd, f, t, ev.before, &ev.gtid, &pb, out_err);
        if (rc == SL_OK && ev.after)
          rc = filter_pass(rd, f, t, ev.after, &ev.gtid, &pa, out_err);
        if (rc == SL_OK) {
          if (ev.row_kind == SL_ROW_INSERT) {
            if (pa) rc = batch_add(b, SL_ROW_INSERT, t, ev.after, &ev, 0);
          } else if (ev.row_kind == SL_ROW_DELETE) {
            if (pb) rc = batch_add(b, SL_ROW_DELETE, t, ev.before, &ev, 0);
          } else {
            /* Same key: one chunk decides both; a changed key is a delete
             * and an insert, each decided by its own chunk. */
            bool same = same_pk(s->tables[t], ev.before, ev.after);
            if (same && pa) {
              rc = batch_add(b, SL_ROW_UPDATE_BEFORE, t, ev.before, &ev, 0);
              if (rc == SL_OK)
                rc = batch_add(b, SL_ROW_UPDATE_AFTER, t, ev.after, &ev, 0);
            } else if (!same) {
              if (pb) rc = batch_add(b, SL_ROW_DELETE, t, ev.before, &ev, 0);
              if (rc == SL_OK && pa)
                rc = batch_add(b, SL_ROW_INSERT, t, ev.after, &ev, 0);
            }
          }
          if (rc != SL_OK && (out_err == NULL || *out_err == NULL))
            rc = sl_error_set(out_err, rc, "out of memory");
        }
      }
    }
    if (rc != SL_OK) break;
    if (ev.kind == SL_CDC_EV_TXN_END) {
      /* A table is pure once the stream is past its max HIGH. */
      sl_binlog_pos_t p;
      sl__cdc_stream_pos(st, &p);
      cur = p.gtid;
      for (uint32_t t = 0; f && t < s->n_tables; t++)
        if (f[t].active && gtid_covers(&cur, &f[t].max_high)) {
          f[t].active = false;
          pure[t] = 1;
        }
    }
    if (flush || b->n >= BATCH_ROWS) {
      sl__cdc_stream_pos(st, &b->pos);
      memcpy(b->pure, pure, s->n_tables);
      if (b->n > 0 && (rc = SL_INJECT("cdc.binlog.before_push")) != SL_OK) {
        rc = sl_error_set(out_err, rc, "injected failure at "
                          "cdc.binlog.before_push");
        break;
      }
      if (!batch_push(rd, b)) {
        batch_free(b, s->n_tables);
        b = NULL;
        break;
      }
      b = NULL;
    }
    pthread_mutex_lock(&rd->lock);
    stop = rd->stop;
    pthread_mutex_unlock(&rd->lock);
  }
  batch_free(b, s->n_tables);
  pthread_mutex_lock(&rd->lock);
  rd->stream = NULL;
  if (rd->stop && rc == SL_ECANCELED) {
    rc = SL_OK; /* closing: not an error */
    if (out_err) {
      sl_error_destroy(*out_err);
      *out_err = NULL;
    }
  }
  pthread_mutex_unlock(&rd->lock);
  sl__cdc_stream_close(st);
  ftabs_free(f, s->n_tables);
  sl_free(pure);
  return rc;
}

static void *io_main(void *arg) {
  mreader_t *rd = arg;
  mysql_thread_init();
  for (;;) {
    pthread_mutex_lock(&rd->lock);
    rchunk_t *next = NULL;
    while (!rd->stop) {
      for (uint32_t i = 0; i < rd->n_ch && next == NULL; i++)
        if (rd->ch[i]->state == RC_QUEUED) next = rd->ch[i];
      if (next || (rd->has_binlog && !rd->binlog_started)) break;
      pthread_cond_wait(&rd->cond, &rd->lock);
    }
    if (rd->stop) {
      pthread_mutex_unlock(&rd->lock);
      break;
    }
    if (next) {
      next->state = RC_READING;
    } else {
      rd->binlog_started = true;
    }
    pthread_mutex_unlock(&rd->lock);
    sl_error_t *err = NULL;
    int rc = SL_OK;
    if (next) {
      rc = read_one_chunk(rd, next->cl, next, &err);
      pthread_mutex_lock(&rd->lock);
      if (rc == SL_OK) next->state = RC_DONE;
      pthread_mutex_unlock(&rd->lock);
    } else {
      rc = stream_binlog(rd, &err);
    }
    if (rc != SL_OK) {
      if (err == NULL) sl_error_set(&err, rc, "%s", sl_strerror(rc));
      /* A schema change, an event or a state sluice cannot read: a restart
       * would meet it again. */
      if (err && (rc == SL_ENOTSUP || rc == SL_ECORRUPT))
        sl_error_set_fatal(err, true);
      set_err(rd, err);
      break;
    }
    /* A stream stopped by reader_close answers SL_OK, but its
     * "cancelled" error was made: not a failure, freed. */
    sl_error_destroy(err);
    if (rd->waker) sl_source_waker_wake(rd->waker);
  }
  reader_conn_drop(rd);
  mysql_thread_end();
  return NULL;
}

/* ---- One chunk's bounds, in its split state ---- */

static int bound_put(sl_bytes_t *b, const sl__cdc_chunks_t *cl,
                     const sl__cdc_kv_t *v) {
  int rc = SL_OK;
  for (uint32_t k = 0; rc == SL_OK && k < cl->n_key; k++)
    rc = cl->key_kind[k] == SL_CDC_KEY_INT
             ? sl_bytes_append_u64le(b, (uint64_t)v[k].i)
             : sl__put_blob(b, v[k].p, v[k].len);
  return rc;
}

/* flags u8 (1: a low bound, 2: a high bound), then the bounds. */
static int bounds_encode(const sl__cdc_chunks_t *cl, const sl__cdc_chunk_t *ch,
                         sl_bytes_t *b) {
  int rc = sl__put_u8(b, (uint8_t)((ch->low ? 1 : 0) | (ch->high ? 2 : 0)));
  if (rc == SL_OK && ch->low) rc = bound_put(b, cl, ch->low);
  if (rc == SL_OK && ch->high) rc = bound_put(b, cl, ch->high);
  return rc;
}

static bool bound_get(sl__rcur_t *c, const sl__cdc_chunks_t *cl,
                      sl__cdc_kv_t **out) {
  sl__cdc_kv_t *v = sl_calloc(cl->n_key, sizeof(*v));
  if (v == NULL) return false;
  *out = v;
  for (uint32_t k = 0; k < cl->n_key; k++) {
    if (cl->key_kind[k] == SL_CDC_KEY_INT) {
      v[k].i = (int64_t)sl__cur_u64(c);
      continue;
    }
    uint32_t n;
    const uint8_t *p = sl__cur_blob(c, &n);
    if (p == NULL) return false;
    if (cl->key_kind[k] == SL_CDC_KEY_TEXT)
      for (uint32_t j = 0; j < n; j++)
        if (strchr("0123456789 .:+-", p[j]) == NULL || p[j] == 0) {
          c->bad = true; /* text bounds reach SQL quoted */
          return false;
        }
    if ((v[k].p = sl_malloc(n ? n : 1)) == NULL) return false;
    if (n) memcpy(v[k].p, p, n);
    v[k].len = n;
  }
  return !c->bad;
}

/* A one-chunk list of table t (its key) with the bounds at c. */
static int bounds_decode(sl__rcur_t *c, const sl__cdc_table_t *t, uint32_t id,
                         sl__cdc_chunks_t **out) {
  sl__cdc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  if (cl == NULL) return SL_ENOMEM;
  int rc = SL_ENOMEM;
  cl->n_key = t->n_key;
  if ((cl->db = sl_strdup(t->db)) == NULL ||
      (cl->table = sl_strdup(t->name)) == NULL ||
      (cl->key_names = sl_calloc(t->n_key, sizeof(char *))) == NULL ||
      (cl->key_kind = sl_calloc(t->n_key, 1)) == NULL ||
      (cl->chunks = sl_calloc(1, sizeof(sl__cdc_chunk_t))) == NULL)
    goto fail;
  for (uint32_t k = 0; k < t->n_key; k++) {
    cl->key_kind[k] = t->key_kind[k];
    if ((cl->key_names[k] = sl_strdup(t->cols[t->key[k]].name)) == NULL)
      goto fail;
  }
  cl->n = 1;
  cl->chunks[0].id = id;
  uint8_t flags = sl__cur_u8(c);
  rc = SL_ECORRUPT;
  if (c->bad || flags > 3) goto fail;
  if ((flags & 1) && !bound_get(c, cl, &cl->chunks[0].low)) goto fail;
  if ((flags & 2) && !bound_get(c, cl, &cl->chunks[0].high)) goto fail;
  *out = cl;
  return SL_OK;
fail:
  if (rc == SL_ECORRUPT && !c->bad) rc = SL_ENOMEM;
  sl__cdc_chunks_free(cl);
  return rc;
}

/* ---- Reader: task side ---- */

static void reader_close(void *r) {
  mreader_t *rd = r;
  if (rd == NULL) return;
  if (rd->has_thread) {
    pthread_mutex_lock(&rd->lock);
    rd->stop = true;
    if (rd->stream) sl__cdc_stream_interrupt(rd->stream);
    if (rd->c) {
      int fd = (int)mysql_get_socket(rd->c);
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
    }
    pthread_cond_broadcast(&rd->cond);
    pthread_mutex_unlock(&rd->lock);
    pthread_join(rd->thread, NULL);
  }
  for (uint32_t i = 0; i < rd->n_ch; i++) {
    if (rd->ch[i]->has_rows) sl__cdc_rows_close(&rd->ch[i]->rows);
    sl__cdc_chunks_free(rd->ch[i]->cl);
    sl_free(rd->ch[i]);
  }
  sl_free(rd->ch);
  while (rd->q_head) {
    batch_t *b = rd->q_head;
    rd->q_head = b->next;
    batch_free(b, rd->src->n_tables);
  }
  sl_free(rd->filter_blob);
  sl_free(rd->pure);
  sl_error_destroy(rd->err);
  if (rd->has_b) sl_row_builder_close(&rd->b);
  sl_bytes_close(&rd->vbuf);
  pthread_mutex_destroy(&rd->lock);
  pthread_cond_destroy(&rd->cond);
  sl_free(rd);
}

/* Take the binlog split's state: 'B', the position (blob), the filter
 * (blob), then optionally the pure flags (u32 n, n bytes). */
static int take_binlog(mreader_t *rd, const sl_split_init_t *si,
                       sl_error_t **out_err) {
  const msrc_t *s = rd->src;
  sl__rcur_t c = {si->position, si->position_len, 0, false};
  uint32_t pl = 0, fl = 0;
  const uint8_t *pp = NULL, *fp = NULL;
  if (sl__cur_u8(&c) == 'B') {
    pp = sl__cur_blob(&c, &pl);
    fp = sl__cur_blob(&c, &fl);
  }
  if (pp == NULL || fp == NULL)
    return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: the binlog "
                        "split's position is corrupt");
  int rc = sl__binlog_pos_decode(pp, pl, &rd->bpos, out_err);
  if (rc != SL_OK) return rc;
  if ((rd->pure = sl_calloc(s->n_tables + 1, 1)) == NULL ||
      (rd->filter_blob = sl_malloc(fl + 1)) == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (fl) memcpy(rd->filter_blob, fp, fl);
  rd->filter_len = fl;
  if (c.off < c.len) {
    uint32_t n = sl__cur_u32(&c);
    const uint8_t *p = sl__cur_take(&c, n);
    if (p == NULL || n != s->n_tables || c.off != c.len)
      return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: the binlog "
                          "split's position is corrupt");
    for (uint32_t t = 0; t < n; t++) rd->pure[t] = p[t] != 0;
  }
  /* No filter: every table is past its snapshot. */
  if (fl == 0) memset(rd->pure, 1, s->n_tables);
  /* The filter must parse (checked here, on the task, with a message). */
  ftab_t *f = NULL;
  rc = filter_parse(s, rd->filter_blob, rd->filter_len, rd->pure, &f, out_err);
  ftabs_free(f, s->n_tables);
  if (rc != SL_OK) return rc;
  rd->has_binlog = true;
  rd->binlog_split = si->split;
  return SL_OK;
}

static int add_splits(mreader_t *rd, const sl_split_init_t *si, uint32_t n,
                      sl_error_t **out_err) {
  const msrc_t *s = rd->src;
  for (uint32_t i = 0; i < n; i++) {
    int rc;
    if (strcmp(si[i].id, BINLOG_ID) == 0) {
      if (rd->has_binlog)
        return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: reader %u got "
                            "the binlog split twice", rd->subtask);
      pthread_mutex_lock(&rd->lock);
      rc = take_binlog(rd, &si[i], out_err);
      pthread_cond_broadcast(&rd->cond);
      pthread_mutex_unlock(&rd->lock);
      if (rc != SL_OK) return rc;
      continue;
    }
    uint32_t t, k;
    if (!parse_chunk_id(s, si[i].id, &t, &k))
      return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: split '%s' names "
                          "no captured table (the table list changed since "
                          "the checkpoint?)", si[i].id);
    sl__rcur_t c = {si[i].position, si[i].position_len, 0, false};
    uint8_t st = sl__cur_u8(&c);
    if (c.bad || (st != 'U' && st != 'F'))
      return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: split '%s' has "
                          "a corrupt state", si[i].id);
    sl__cdc_chunks_t *cl = NULL;
    rc = bounds_decode(&c, s->tables[t], k, &cl);
    sl__cdc_pos_t high;
    memset(&high, 0, sizeof(high));
    if (rc == SL_OK && st == 'F' && !pos_decode(&c, &high)) rc = SL_ECORRUPT;
    if (rc == SL_OK && c.off != c.len) rc = SL_ECORRUPT;
    if (rc != SL_OK) {
      sl__cdc_chunks_free(cl);
      return sl_error_set(out_err, rc, "mariadb-cdc: split '%s': %s",
                          si[i].id, rc == SL_ENOMEM ? "out of memory"
                          : "a corrupt state");
    }
    rchunk_t *ch = sl_calloc(1, sizeof(*ch));
    pthread_mutex_lock(&rd->lock);
    if (ch && rd->n_ch == rd->cap_ch) {
      uint32_t cap = rd->cap_ch ? 2 * rd->cap_ch : 8;
      rchunk_t **a = sl_realloc(rd->ch, cap * sizeof(*a));
      if (a) {
        rd->ch = a;
        rd->cap_ch = cap;
      }
    }
    if (ch == NULL || rd->n_ch == rd->cap_ch) {
      pthread_mutex_unlock(&rd->lock);
      sl_free(ch);
      sl__cdc_chunks_free(cl);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    rd->ch[rd->n_ch++] = ch;
    ch->split = si[i].split;
    ch->id = si[i].id;
    ch->table = t;
    ch->chunk = k;
    ch->cl = cl;
    ch->state = st == 'F' ? RC_EMITTED : RC_QUEUED;
    ch->high = high;
    pthread_cond_broadcast(&rd->cond);
    pthread_mutex_unlock(&rd->lock);
  }
  rd->asked = false;
  return SL_OK;
}

static int reader_open(void *ctx, const sl_reader_init_t *init, void **out,
                       sl_error_t **out_err) {
  const msrc_t *s = ctx;
  mreader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  rd->src = s;
  rd->subtask = init->subtask;
  rd->waker = init->waker;
  pthread_mutex_init(&rd->lock, NULL);
  pthread_cond_init(&rd->cond, NULL);
  int rc = sl_row_builder_init(&rd->b, s->schema);
  if (rc == SL_OK) rd->has_b = true;
  else sl_error_set(out_err, rc, "out of memory");
  if (rc == SL_OK) rc = add_splits(rd, init->splits, init->n_splits, out_err);
  if (rc == SL_OK) {
    if (pthread_create(&rd->thread, NULL, io_main, rd) != 0)
      rc = sl_error_set(out_err, SL_EIO, "mariadb-cdc: cannot start the "
                        "reader's I/O thread");
    else
      rd->has_thread = true;
  }
  if (rc != SL_OK) {
    reader_close(rd);
    return rc;
  }
  *out = rd;
  return SL_OK;
}

static int reader_add_splits(void *r, const sl_split_init_t *splits,
                             uint32_t n, sl_error_t **out_err) {
  return add_splits(r, splits, n, out_err);
}

/* The version of a row (CDC_DESIGN: 'S' or 'B'). */
static int version_snapshot(sl_bytes_t *v, uint32_t table,
                            const sl__cdc_pos_t *high, sl_error_t **out_err) {
  sl_binlog_gtid_state_t st;
  int rc = gtid_parse(high->gtid, &st, out_err);
  if (rc != SL_OK) return rc;
  uint8_t h[4] = {'S', (uint8_t)table, (uint8_t)(table >> 8), (uint8_t)st.n};
  rc = sl_bytes_append(v, h, 4);
  for (uint32_t i = 0; rc == SL_OK && i < st.n; i++) {
    rc = sl__put_u32(v, st.g[i].domain);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(v, st.g[i].seq);
  }
  return rc;
}

static int version_binlog(sl_bytes_t *v, const brow_t *m) {
  uint8_t h[4] = {'B', (uint8_t)m->table, (uint8_t)(m->table >> 8),
                  m->flags};
  int rc = sl_bytes_append(v, h, 4);
  if (rc == SL_OK) rc = sl__put_u32(v, m->gtid.domain);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(v, m->gtid.seq);
  if (rc == SL_OK) rc = sl__put_u32(v, m->ev);
  if (rc == SL_OK) rc = sl__put_u32(v, m->row);
  return rc;
}

/* Emit one row: the table's fields, then the metadata fields. */
/* snap_ver: a snapshot row's version (made once per chunk), or NULL. */
static int emit_row(mreader_t *rd, sl_source_out_t *out, uint8_t kind,
                    uint32_t table, const sl_row_t *img, const brow_t *m,
                    const sl_bytes_t *snap_ver, sl_error_t **out_err) {
  const msrc_t *s = rd->src;
  sl_row_builder_t *b = &rd->b;
  sl_row_builder_reset(b, (sl_row_kind_t)kind);
  int rc = SL_OK;
  for (uint32_t i = 0; rc == SL_OK && i < s->n_cols; i++) {
    sl_value_t v;
    sl_row_get_value(img, i, &v);
    rc = sl_row_builder_set_value(b, i, &v);
  }
  char buf[128];
  if (rc == SL_OK && s->f_table >= 0)
    rc = sl_row_builder_set_str(b, (uint32_t)s->f_table, s->qname[table],
                                (uint32_t)strlen(s->qname[table]));
  if (rc == SL_OK && s->f_pos >= 0 && m) {
    int n = snprintf(buf, sizeof(buf), "%u-%u-%llu:%u:%u", m->gtid.domain,
                     m->gtid.server_id, (unsigned long long)m->gtid.seq,
                     m->ev, m->row);
    rc = sl_row_builder_set_str(b, (uint32_t)s->f_pos, buf, (uint32_t)n);
  }
  if (rc == SL_OK && s->f_opts >= 0 && m)
    sl_row_builder_set_i64(b, (uint32_t)s->f_opts, m->when_us);
  if (rc == SL_OK && s->f_version >= 0) {
    const sl_bytes_t *v = snap_ver;
    if (m) {
      sl_bytes_clear(&rd->vbuf);
      rc = version_binlog(&rd->vbuf, m);
      v = &rd->vbuf;
    }
    if (rc == SL_OK)
      rc = sl_row_builder_set_str(b, (uint32_t)s->f_version,
                                  (const char *)v->data, (uint32_t)v->len);
  }
  if (rc != SL_OK) {
    if (out_err && *out_err) return rc;
    return sl_error_set(out_err, rc, "mariadb-cdc: cannot build a row: %s",
                        sl_strerror(rc));
  }
  sl_row_t row;
  rc = sl_row_builder_finish(b, &row, out_err);
  if (rc != SL_OK) return rc;
  (void)sl_source_emit(out, &row);
  return SL_OK;
}

static int send_report(mreader_t *rd, sl_source_out_t *out, rchunk_t *ch) {
  sl_bytes_t e;
  sl_bytes_init(&e);
  int rc = sl__put_u8(&e, 'F');
  if (rc == SL_OK) rc = sl__put_str(&e, ch->id);
  if (rc == SL_OK) rc = pos_encode(&e, &ch->high);
  if (rc == SL_OK) rc = sl_source_send_event(out, e.data, e.len);
  sl_bytes_close(&e);
  if (rc == SL_OK) ch->reported = true;
  (void)rd;
  return rc;
}

static int reader_poll(void *r, sl_source_out_t *out, sl_error_t **out_err) {
  mreader_t *rd = r;
  const msrc_t *s = rd->src;
  /* Under the lock (the I/O thread moves chunks from QUEUED to DONE):
   * acknowledged chunks leave the reader's state; finished chunks
   * restored unacknowledged are reported again. */
  pthread_mutex_lock(&rd->lock);
  int rc0 = SL_OK;
  rchunk_t *done = NULL;
  bool busy = false, held = false;
  for (uint32_t i = 0; i < rd->n_ch; i++) {
    rchunk_t *ch = rd->ch[i];
    if (ch->state == RC_ACKING) {
      ch->state = RC_ACKED;
      sl_source_split_finished(out, ch->split);
    }
    if (ch->state == RC_EMITTED && !ch->reported && rc0 == SL_OK)
      rc0 = send_report(rd, out, ch);
    if (ch->state == RC_DONE && done == NULL) done = ch;
    busy |= ch->state == RC_QUEUED || ch->state == RC_READING;
    held |= ch->state != RC_ACKED;
  }
  if (rc0 != SL_OK) {
    pthread_mutex_unlock(&rd->lock);
    return sl_error_set(out_err, rc0, "out of memory");
  }
  if (rd->err) {
    sl_error_t *e = rd->err;
    rd->err = NULL;
    pthread_mutex_unlock(&rd->lock);
    int code = sl_error_code(e);
    if (out_err && *out_err == NULL) *out_err = e;
    else sl_error_destroy(e);
    return code ? code : SL_EIO;
  }
  batch_t *b = NULL;
  if (done == NULL && rd->q_head) {
    b = rd->q_head;
    rd->q_head = b->next;
    if (rd->q_head == NULL) rd->q_tail = NULL;
    rd->q_n--;
    pthread_cond_broadcast(&rd->cond);
  }
  pthread_mutex_unlock(&rd->lock);
  if (done) {
    /* The whole chunk in this poll: a barrier never splits it. */
    int rc = SL_OK;
    sl_source_set_split(out, done->split);
    /* Every row of the chunk has the chunk's HIGH as its version. */
    sl_bytes_clear(&rd->vbuf);
    if (s->f_version >= 0)
      rc = version_snapshot(&rd->vbuf, done->table, &done->high, out_err);
    for (uint32_t i = 0; rc == SL_OK && i < done->rows.n; i++) {
      sl_row_t row;
      sl__cdc_rows_get(&done->rows, i, &row);
      rc = emit_row(rd, out, SL_ROW_INSERT, done->table, &row, NULL,
                    &rd->vbuf, out_err);
    }
    if (rc != SL_OK) return rc;
    sl__cdc_rows_close(&done->rows);
    done->has_rows = false;
    pthread_mutex_lock(&rd->lock);
    done->state = RC_EMITTED;
    pthread_mutex_unlock(&rd->lock);
    rc = send_report(rd, out, done);
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
    return SL_POLL_MORE;
  }
  if (b) {
    int rc = SL_OK;
    sl_source_set_split(out, rd->binlog_split);
    for (uint32_t i = 0; rc == SL_OK && i < b->n; i++) {
      const brow_t *m = &b->meta[i];
      sl_row_t row;
      sl__cdc_rows_get(&b->rows[m->table], b->idx[i], &row);
      rc = emit_row(rd, out, m->kind, m->table, &row, m, NULL, out_err);
    }
    if (rc == SL_OK) {
      rd->bpos = b->pos;
      memcpy(rd->pure, b->pure, s->n_tables);
    }
    batch_free(b, s->n_tables);
    return rc == SL_OK ? SL_POLL_MORE : rc;
  }
  /* Nothing to emit.  Ask for a chunk when idle (not while the binlog
   * split runs: it never ends). */
  if (!busy && !rd->has_binlog && !rd->asked && !rd->is_all_assigned) {
    rd->asked = true;
    sl_source_request_split(out);
  }
  if (rd->is_all_assigned && !held && !rd->has_binlog) return SL_POLL_END;
  return SL_POLL_WAIT;
}

/* The enumerator's events: 'A' + split id (acknowledged), 'E' (snapshot
 * mode: every chunk is assigned and finished). */
static int reader_event(void *r, const uint8_t *ev, size_t len,
                        sl_error_t **out_err) {
  mreader_t *rd = r;
  if (len == 1 && ev[0] == 'E') {
    rd->is_all_assigned = true;
    return SL_OK;
  }
  sl__rcur_t c = {ev, len, 0, false};
  char id[4200];
  if (sl__cur_u8(&c) != 'A' || !sl__cur_str(&c, id, sizeof(id)) || c.off != len)
    return sl_error_set(out_err, SL_ECORRUPT, "mariadb-cdc: a corrupt event "
                        "from the enumerator");
  /* The acknowledgement lands in the next poll's sl_source_split_finished
   * (it needs the source output); mark it here. */
  pthread_mutex_lock(&rd->lock);
  for (uint32_t i = 0; i < rd->n_ch; i++)
    if (rd->ch[i]->state == RC_EMITTED && strcmp(rd->ch[i]->id, id) == 0)
      rd->ch[i]->state = RC_ACKING;
  pthread_mutex_unlock(&rd->lock);
  if (rd->waker) sl_source_waker_wake(rd->waker);
  return SL_OK;
}

static int reader_position(void *r, uint32_t split, sl_bytes_t *out) {
  mreader_t *rd = r;
  const msrc_t *s = rd->src;
  if (rd->has_binlog && split == rd->binlog_split) {
    int rc = sl__put_u8(out, 'B');
    sl_bytes_t pb;
    sl_bytes_init(&pb);
    if (rc == SL_OK) rc = sl__binlog_pos_encode(&rd->bpos, &pb);
    if (rc == SL_OK) rc = sl__put_blob(out, pb.data, pb.len);
    sl_bytes_close(&pb);
    bool all_pure = true;
    for (uint32_t t = 0; t < s->n_tables; t++) all_pure &= rd->pure[t] != 0;
    /* Once every table is past its max HIGH the filter is dropped. */
    if (rc == SL_OK)
      rc = all_pure ? sl__put_u32(out, 0)
                    : sl__put_blob(out, rd->filter_blob, rd->filter_len);
    if (rc == SL_OK && !all_pure) rc = sl__put_blob(out, rd->pure, s->n_tables);
    return rc;
  }
  for (uint32_t i = 0; i < rd->n_ch; i++) {
    rchunk_t *ch = rd->ch[i];
    if (ch->split != split) continue;
    pthread_mutex_lock(&rd->lock);
    bool fin = ch->state >= RC_EMITTED;
    pthread_mutex_unlock(&rd->lock);
    int rc = sl__put_u8(out, fin ? 'F' : 'U');
    if (rc == SL_OK) rc = bounds_encode(ch->cl, &ch->cl->chunks[0], out);
    if (rc == SL_OK && fin) rc = pos_encode(out, &ch->high);
    return rc;
  }
  return SL_EINVAL;
}

/* ------------------------------------------------------------------ */
/* The source */

static int src_plan(void *ctx, uint32_t parallelism, sl_split_list_t *splits,
                    sl_error_t **out_err) {
  (void)ctx, (void)parallelism, (void)splits;
  return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: the source has an "
                      "enumerator; plan() is not used");
}

static void src_destroy(void *ctx) {
  msrc_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->host);
  sl_free(s->user);
  sl_free(s->password);
  for (uint32_t i = 0; i < s->n_patterns; i++) sl_free(s->patterns[i]);
  sl_free(s->patterns);
  sl_free(s->chunk_key);
  sl_free(s->start_gtid);
  for (uint32_t i = 0; i < s->n_tables; i++) {
    sl__cdc_table_destroy(s->tables[i]);
    if (s->qname) sl_free(s->qname[i]);
  }
  sl_free(s->qname);
  sl_free(s->tables);
  if (s->schema) sl_schema_unref(s->schema);
  sl_free(s);
}

static const sl_source_vt_t cdc_vt = {
    .type_name = "mariadb-cdc",
    .plan = src_plan,
    .reader_open = reader_open,
    .reader_poll = reader_poll,
    .reader_position = reader_position,
    .reader_close = reader_close,
    .destroy = src_destroy,
    .enumerator = &cdc_enum_vt,
    .reader_add_splits = reader_add_splits,
    .reader_handle_event = reader_event,
};

void sl_mariadb_cdc_config_init(sl_mariadb_cdc_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->host = "127.0.0.1";
  cfg->port = 3306;
}

static int build_schema(msrc_t *s, const sl_mariadb_cdc_config_t *cfg,
                        sl_error_t **out_err) {
  const sl_schema_t *ts = s->tables[0]->schema;
  s->n_cols = sl_schema_n_fields(ts);
  uint32_t n = s->n_cols;
  sl_field_t *f = sl_calloc(n + 4, sizeof(*f));
  if (f == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  static const char *const meta[] = {"_table", "_position", "_op_ts",
                                     "_sl_version"};
  for (uint32_t i = 0; i < n; i++) {
    const sl_field_t *x = sl_schema_field(ts, i);
    for (uint32_t k = 0; k < 4; k++)
      if (strcmp(x->name, meta[k]) == 0) {
        sl_free(f);
        return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: column `%s` "
                            "of `%s`.`%s` has the name of a metadata field",
                            x->name, s->tables[0]->db, s->tables[0]->name);
      }
    f[i] = *x;
  }
  s->f_table = s->f_pos = s->f_opts = s->f_version = -1;
  sl_type_t str = {SL_TYPE_STRING, 0, 0, true};
  sl_type_t tst = {SL_TYPE_TIMESTAMP, 0, 0, true};
  sl_type_t by = {SL_TYPE_BYTES, 0, 0, false};
  if (cfg->with_table) {
    s->f_table = (int)n;
    f[n++] = (sl_field_t){"_table", str};
  }
  if (cfg->with_position) {
    s->f_pos = (int)n;
    f[n++] = (sl_field_t){"_position", str};
  }
  if (cfg->with_op_ts) {
    s->f_opts = (int)n;
    f[n++] = (sl_field_t){"_op_ts", tst};
  }
  if (s->versioned) {
    s->f_version = (int)n;
    f[n++] = (sl_field_t){"_sl_version", by};
  }
  int rc = sl_schema_create(f, n, &s->schema, out_err);
  sl_free(f);
  return rc;
}

static char *dup_or_null(const char *x, bool *ok) {
  if (x == NULL) return NULL;
  char *d = sl_strdup(x);
  if (d == NULL) *ok = false;
  return d;
}

int sl_mariadb_cdc_source_create(const sl_mariadb_cdc_config_t *cfg,
                                 const sl_source_vt_t **out_vt, void **out_ctx,
                                 sl_schema_t **out_schema,
                                 int *out_version_field,
                                 sl_error_t **out_err) {
  if (cfg == NULL || cfg->n_tables == 0 || cfg->tables == NULL)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: no tables to "
                        "capture (tables: [db.table, ...])");
  if (cfg->start == SL_MARIADB_CDC_START_GTID &&
      (cfg->start_gtid == NULL || cfg->start_gtid[0] == 0))
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: startup gtid needs "
                        "a GTID position (gtid: \"0-1-100\")");
  if (cfg->start > SL_MARIADB_CDC_START_GTID)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: unknown start mode");
  msrc_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  bool ok = true;
  s->host = dup_or_null(cfg->host ? cfg->host : "127.0.0.1", &ok);
  s->port = cfg->port ? cfg->port : 3306;
  s->user = dup_or_null(cfg->user ? cfg->user : "root", &ok);
  s->password = dup_or_null(cfg->password, &ok);
  s->chunk_key = dup_or_null(cfg->chunk_key, &ok);
  s->start_gtid = dup_or_null(cfg->start_gtid, &ok);
  s->chunk_rows = cfg->chunk_rows;
  s->start = cfg->start;
  s->server_id_base = cfg->server_id ? cfg->server_id : 5400;
  s->heartbeat_ms = cfg->heartbeat_ms ? cfg->heartbeat_ms : 30000;
  s->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms
                                                  : 10000;
  snprintf(s->server, sizeof(s->server), "%s:%d", s->host ? s->host : "?",
           s->port);
  s->patterns = sl_calloc(cfg->n_tables, sizeof(char *));
  if (s->patterns == NULL) ok = false;
  for (uint32_t i = 0; ok && i < cfg->n_tables; i++) {
    s->patterns[i] = dup_or_null(cfg->tables[i], &ok);
    s->n_patterns++;
  }
  if (!ok) {
    src_destroy(s);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  MYSQL *c = NULL;
  int rc = src_connect(s, &c, out_err);
  if (rc == SL_OK)
    rc = sl__cdc_check_server(c, s->server, s->user, out_err);
  sl__cdc_table_name_t *names = NULL;
  uint32_t n_names = 0;
  if (rc == SL_OK)
    rc = sl__cdc_resolve_tables(c, s->server,
                                (const char *const *)s->patterns,
                                s->n_patterns, &names, &n_names, out_err);
  if (rc == SL_OK && (s->tables = sl_calloc(n_names + 1,
                                            sizeof(sl__cdc_table_t *))) == NULL)
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (uint32_t i = 0; rc == SL_OK && i < n_names; i++) {
    rc = sl__cdc_check_select(c, s->server, s->user, names[i].db,
                              names[i].table, out_err);
    if (rc == SL_OK)
      rc = sl__cdc_table_describe(c, s->server, names[i].db, names[i].table,
                                  s->chunk_key, &s->tables[i], out_err);
    if (rc == SL_OK) s->n_tables++;
  }
  sl__cdc_table_names_free(names, n_names);
  if (c) mysql_close(c);
  if (rc == SL_OK && s->n_tables > 0xffff)
    rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: %u tables; one source "
                      "captures at most 65535", s->n_tables);
  if (rc == SL_OK)
    rc = sl__cdc_tables_agree(s->tables, s->n_tables, s->server, out_err);
  for (uint32_t i = 0; rc == SL_OK && i < s->n_tables; i++)
    if (s->tables[i]->n_pk == 0)
      rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: table `%s`.`%s` at "
                        "%s has no primary key; change data capture needs "
                        "one (each chunk's binlog window is merged, and "
                        "updates are applied, by primary key; a declared "
                        "chunk_key only chooses how the snapshot is cut)",
                        s->tables[i]->db, s->tables[i]->name, s->server);
  if (rc == SL_OK && s->chunk_key) {
    const sl__cdc_table_t *t = s->tables[0];
    s->versioned = !(t->n_pk == 1 && t->n_key == 1 && t->pk[0] == t->key[0]);
  }
  if (rc == SL_OK &&
      (s->qname = sl_calloc(s->n_tables, sizeof(char *))) == NULL)
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (uint32_t i = 0; rc == SL_OK && i < s->n_tables; i++) {
    size_t n = strlen(s->tables[i]->db) + strlen(s->tables[i]->name) + 2;
    if ((s->qname[i] = sl_malloc(n)) == NULL)
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    else
      snprintf(s->qname[i], n, "%s.%s", s->tables[i]->db, s->tables[i]->name);
  }
  if (rc == SL_OK) rc = build_schema(s, cfg, out_err);
  if (rc != SL_OK) {
    src_destroy(s);
    return rc;
  }
  *out_vt = &cdc_vt;
  *out_ctx = s;
  *out_schema = sl_schema_ref(s->schema);
  if (out_version_field) *out_version_field = s->f_version;
  return SL_OK;
}

void sl__mariadb_cdc_pk(const void *ctx, const uint32_t **out_pk,
                        uint32_t *out_n) {
  const msrc_t *s = ctx;
  *out_pk = s->tables[0]->pk;
  *out_n = s->tables[0]->n_pk;
}

/* ------------------------------------------------------------------ */
/* Fuzzing (tests/fuzz/fuzz_cdc_source_state.c) and its seeds.  The
 * decoders run against a source of one table `shop`.`t` (id BIGINT
 * primary key, c BIGINT, v VARCHAR), as a checkpoint of it would hold. */

static msrc_t *fuzz_src(void) {
  msrc_t *s = sl_calloc(1, sizeof(*s));
  sl__cdc_table_t *t = sl_calloc(1, sizeof(*t));
  if (s == NULL || t == NULL) {
    sl_free(s);
    sl_free(t);
    return NULL;
  }
  s->tables = sl_calloc(1, sizeof(*s->tables));
  if (s->tables) s->tables[0] = t;
  s->n_tables = s->tables ? 1 : 0;
  snprintf(s->server, sizeof(s->server), "fuzz:0");
  t->db = sl_strdup("shop");
  t->name = sl_strdup("t");
  t->n_cols = 3;
  t->cols = sl_calloc(3, sizeof(*t->cols));
  t->pk = sl_calloc(1, sizeof(uint32_t));
  t->key = sl_calloc(1, sizeof(uint32_t));
  t->key_kind = sl_calloc(1, 1);
  sl_field_t f[3] = {{"id", {SL_TYPE_INT64, 0, 0, false}},
                     {"c", {SL_TYPE_INT64, 0, 0, true}},
                     {"v", {SL_TYPE_STRING, 0, 0, true}}};
  bool ok = s->tables && t->db && t->name && t->cols && t->pk && t->key &&
            t->key_kind &&
            sl_schema_create(f, 3, &t->schema, NULL) == SL_OK;
  for (uint32_t i = 0; ok && i < 3; i++) {
    t->cols[i].name = sl_strdup(f[i].name);
    t->cols[i].type = f[i].type;
    ok = t->cols[i].name != NULL;
  }
  if (!ok) {
    src_destroy(s);
    return NULL;
  }
  t->n_pk = t->n_key = 1;
  t->key_kind[0] = SL_CDC_KEY_INT;
  return s;
}

static void fuzz_reader_init(mreader_t *rd, const msrc_t *s) {
  memset(rd, 0, sizeof(*rd));
  rd->src = s;
  pthread_mutex_init(&rd->lock, NULL);
  pthread_cond_init(&rd->cond, NULL);
}

/* A split state through a reader and back: the position it writes must
 * read back to itself. */
static int fuzz_split(const msrc_t *s, const char *id, const uint8_t *p,
                      size_t n) {
  mreader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return SL_ENOMEM;
  fuzz_reader_init(rd, s);
  sl_split_init_t si = {0, id, p, n};
  sl_error_t *err = NULL;
  int rc = add_splits(rd, &si, 1, &err);
  if (rc != SL_OK && err == NULL && rc != SL_ENOMEM) abort();
  sl_error_destroy(err);
  err = NULL;
  if (rc == SL_OK) {
    sl_bytes_t a, b;
    sl_bytes_init(&a);
    sl_bytes_init(&b);
    rc = reader_position(rd, 0, &a);
    if (rc == SL_OK) {
      mreader_t *r2 = sl_calloc(1, sizeof(*r2));
      if (r2 == NULL) rc = SL_ENOMEM;
      else fuzz_reader_init(r2, s);
      sl_split_init_t s2 = {0, id, a.data, a.len};
      if (rc == SL_OK && add_splits(r2, &s2, 1, &err) != SL_OK) abort();
      if (rc == SL_OK && reader_position(r2, 0, &b) != SL_OK) abort();
      if (rc == SL_OK && (a.len != b.len || memcmp(a.data, b.data, a.len)))
        abort();
      if (r2) reader_close(r2);
    }
    sl_bytes_close(&a);
    sl_bytes_close(&b);
  }
  reader_close(rd);
  return rc;
}

int sl__mariadb_cdc_fuzz_one(const uint8_t *p, size_t n) {
  if (n == 0) return SL_OK;
  msrc_t *s = fuzz_src();
  if (s == NULL) return SL_ENOMEM;
  int rc = SL_OK;
  sl_error_t *err = NULL;
  switch (p[0]) {
  case 0: { /* the enumerator's state */
    sl_enum_init_t init = {0};
    init.parallelism = 2;
    init.state = p + 1;
    init.state_len = n - 1;
    init.restored_checkpoint_id = 7;
    void *en = NULL;
    rc = enum_create(s, &init, &en, &err);
    if (rc != SL_OK && err == NULL && rc != SL_ENOMEM) abort();
    if (rc == SL_OK) {
      menum_t *e = en;
      sl_bytes_t a, b;
      sl_bytes_init(&a);
      sl_bytes_init(&b);
      if (enum_snapshot(e, e->last_snap, &a) != SL_OK) abort();
      init.state = a.data;
      init.state_len = a.len;
      void *en2 = NULL;
      if (enum_create(s, &init, &en2, &err) != SL_OK) abort();
      if (enum_snapshot(en2, ((menum_t *)en2)->last_snap, &b) != SL_OK)
        abort();
      if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort();
      enum_close(en2);
      enum_close(en);
      sl_bytes_close(&a);
      sl_bytes_close(&b);
    }
    break;
  }
  case 1:
    rc = fuzz_split(s, "shop.t#1", p + 1, n - 1);
    break;
  case 2:
    rc = fuzz_split(s, BINLOG_ID, p + 1, n - 1);
    break;
  default: {
    char id[4200];
    sl__cdc_pos_t high;
    rc = report_decode(p + 1, n - 1, id, sizeof(id), &high) ? SL_OK
                                                            : SL_ECORRUPT;
    break;
  }
  }
  sl_error_destroy(err);
  src_destroy(s);
  return rc;
}

/* Seeds: valid states of each kind, written through put. */
int sl__mariadb_cdc_fuzz_seeds(void (*put)(const char *name, const void *p,
                                           size_t n)) {
  msrc_t *s = fuzz_src();
  if (s == NULL) return SL_ENOMEM;
  /* A chunk list of three chunks: (.., 10) [10, 20) [20, ..). */
  sl__cdc_chunks_t *cl = NULL;
  static const uint8_t one[] = {3, 10, 0, 0, 0, 0, 0, 0, 0,
                                20, 0, 0, 0, 0, 0, 0, 0};
  sl__rcur_t c = {one, sizeof(one), 0, false};
  int rc = bounds_decode(&c, s->tables[0], 1, &cl);
  sl__cdc_pos_t high = {"0-1-5", "binlog.000001", 1234};
  sl_bytes_t b;
  sl_bytes_init(&b);
  /* Chunk split states. */
  if (rc == SL_OK) {
    sl__put_u8(&b, 1);
    sl__put_u8(&b, 'U');
    bounds_encode(cl, &cl->chunks[0], &b);
    put("chunk-unfinished", b.data, b.len);
    sl_bytes_clear(&b);
    sl__put_u8(&b, 1);
    sl__put_u8(&b, 'F');
    bounds_encode(cl, &cl->chunks[0], &b);
    pos_encode(&b, &high);
    put("chunk-finished", b.data, b.len);
    sl_bytes_clear(&b);
    sl__put_u8(&b, 3);
    sl__put_u8(&b, 'F');
    sl__put_str(&b, "shop.t#1");
    pos_encode(&b, &high);
    put("report", b.data, b.len);
    sl_bytes_clear(&b);
  }
  sl__cdc_chunks_free(cl);
  /* An enumerator with a planned table: pending, assigned, finished. */
  menum_t *e = NULL;
  sl_enum_init_t init = {0};
  init.parallelism = 2;
  if (rc == SL_OK) rc = enum_create(s, &init, (void **)&e, NULL);
  if (rc == SL_OK) {
    e->t = sl_calloc(1, sizeof(etab_t));
    sl__cdc_chunks_t *full = sl_calloc(1, sizeof(*full));
    if (e->t == NULL || full == NULL) rc = SL_ENOMEM;
    if (rc == SL_OK) {
      e->t[0].cl = full;
      full->db = sl_strdup("shop");
      full->table = sl_strdup("t");
      full->n_key = 1;
      full->key_names = sl_calloc(1, sizeof(char *));
      full->key_kind = sl_calloc(1, 1);
      full->chunks = sl_calloc(3, sizeof(sl__cdc_chunk_t));
      e->t[0].ch = sl_calloc(3, sizeof(ech_t));
      if (!full->db || !full->table || !full->key_names || !full->key_kind ||
          !full->chunks || !e->t[0].ch ||
          (full->key_names[0] = sl_strdup("id")) == NULL)
        rc = SL_ENOMEM;
    }
    if (rc == SL_OK) {
      full->key_kind[0] = SL_CDC_KEY_INT;
      full->n = 3;
      int64_t bound[2] = {10, 20};
      for (uint32_t i = 0; i < 3 && rc == SL_OK; i++) {
        full->chunks[i].id = i;
        if (i > 0 && (full->chunks[i].low = sl_calloc(1, sizeof(sl__cdc_kv_t))))
          full->chunks[i].low->i = bound[i - 1];
        if (i < 2 &&
            (full->chunks[i].high = sl_calloc(1, sizeof(sl__cdc_kv_t))))
          full->chunks[i].high->i = bound[i];
        if ((i > 0 && !full->chunks[i].low) || (i < 2 && !full->chunks[i].high))
          rc = SL_ENOMEM;
      }
      e->planned = true;
      e->t[0].ch[1].status = CH_ASSIGNED;
      e->t[0].ch[1].owner = 1;
      e->t[0].ch[2].status = CH_FINISHED;
      e->t[0].ch[2].fin_epoch = 3;
      if ((e->t[0].ch[2].high = sl_malloc(sizeof(high))) == NULL)
        rc = SL_ENOMEM;
      else
        *e->t[0].ch[2].high = high;
    }
    if (rc == SL_OK) {
      sl__put_u8(&b, 0);
      rc = enum_snapshot(e, 4, &b);
      put("enum-planned", b.data, b.len);
      sl_bytes_clear(&b);
      /* All finished: the gate's checkpoint and the binlog split. */
      for (uint32_t i = 0; i < 2 && rc == SL_OK; i++) {
        e->t[0].ch[i].status = CH_FINISHED;
        if ((e->t[0].ch[i].high = sl_malloc(sizeof(high))) == NULL)
          rc = SL_ENOMEM;
        else
          *e->t[0].ch[i].high = high;
      }
      if (rc == SL_OK) rc = binlog_start_state(e, NULL);
      if (rc == SL_OK) {
        sl__put_u8(&b, 0);
        rc = enum_snapshot(e, 5, &b);
        put("enum-gate", b.data, b.len);
        sl_bytes_clear(&b);
        sl__put_u8(&b, 2);
        sl_bytes_append(&b, e->binlog_state, e->binlog_len);
        put("binlog-split", b.data, b.len);
        sl_bytes_clear(&b);
      }
    }
    enum_close(e);
  }
  sl_bytes_close(&b);
  src_destroy(s);
  return rc;
}
