/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The postgres-cdc source: a chunked snapshot of the captured tables, then
 * logical replication (pgoutput) from the job's permanent slot, as one
 * exactly-once changelog (docs/cdc-postgres.md).  Built on the snapshot
 * half (pg_cdc_snap.c, pg_cdc_int.h), the replication transport
 * (pg_repl.h) and sluice's pgoutput decoder (pgoutput_decode.h).
 *
 * DESIGN NOTES
 *
 * Splits.  One per chunk, id "<schema>.<table>#<chunk>", and one stream
 * split, id "wal".  A chunk split's reader position is 'U' (unfinished:
 * read again from the start after a restore) or 'F' with the chunk's HIGH
 * and its snapshot (finished, reported, not yet acknowledged).  The
 * stream split's state is 'W', the position (below) and the filter: per
 * table the chunk list with each chunk's HIGH and snapshot, until the
 * stream is past the table's largest HIGH.
 *
 * Exact chunk snapshots instead of LOW/HIGH and a backfill.  The slot is
 * made first; its consistent point is where the stream starts.  Each
 * chunk is read in a REPEATABLE READ transaction whose snapshot
 * (xmin:xmax:xip) is recorded; HIGH is the WAL insert position after the
 * SELECT.  A change of key k (in chunk c) made by a transaction with
 * top-level xid x and commit LSN L is emitted iff L >= HIGH_c or x was not
 * visible to c's snapshot.  Per row the visible transactions are a
 * prefix of its history (a writer waits for the row's earlier writer to
 * end, which is after that one leaves the proc array), so the chunk's row
 * plus the emitted changes are the row's history exactly once.  A
 * transaction whose commit record precedes the snapshot but which is
 * still in the proc array (the window the LOW/HIGH variant has to close
 * by waiting) is in xip: not visible, so the stream emits it.  Nothing
 * waits for transactions in progress, and no second slot is needed.
 *
 * Position.  (start, commit, skip): start is the end LSN of the last
 * transaction emitted whole (or the end of a heartbeat message between
 * transactions); commit is the commit LSN of the transaction emitted in
 * part (0: none) and skip how many of its changes were emitted.  The
 * stream restarts at the slot's confirmed position (never past start:
 * checked) and skips every transaction whose commit LSN is before start,
 * and the first `skip` changes of the transaction at `commit`.
 *
 * Flush.  The stream reader tells the enumerator its position (start) at
 * each snapshot; the enumerator takes, at checkpoint K's completion, the
 * newest position stamped with an epoch <= K (positions from a reader
 * reset past K are dropped in reset_reader), keeps the positions of the
 * last `retain` completed checkpoints, and sends the oldest to the
 * reader, which reports it as the flush LSN.  So the slot never releases
 * WAL that a retained checkpoint needs, and never anything past a
 * completed checkpoint.
 *
 * Enumerator, gate, reports and acknowledgements: as the mariadb-cdc
 * source (src/connectors/mariadb/cdc_source.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "connectors/postgres/pg_cdc_int.h"
#include "connectors/postgres/pg_cdc_source.h"
#include "connectors/postgres/pg_repl.h"
#include "connectors/postgres/pgoutput_decode.h"
#include "core/bytes_cur.h"
#include "core/core.h"
#include "core/inject.h"
#include "sluice/sluice.h"

#define WAL_ID "wal"
#define BATCH_ROWS 512u
#define QUEUE_MAX 4u
#define STATE_VERSION 1u
#define HB_PREFIX "sluice_hb"
#define POLL_MS 100
#define STATUS_MS 10000

enum { CH_PENDING = 0, CH_ASSIGNED = 1, CH_FINISHED = 2 };

typedef struct psrc_s {
  char *conninfo; /* with the password, when one was given */
  char server[160];
  char **patterns;
  uint32_t n_patterns;
  char *slot, *publication;
  uint64_t chunk_rows;
  sl_postgres_cdc_start_t start;
  uint32_t heartbeat_ms, connect_timeout_ms, retain;
  sl__pgc_table_t **tables;
  uint32_t n_tables;
  uint32_t n_cols;
  int f_table, f_pos, f_opts;
  sl_schema_t *schema;
  char **qname; /* per table, "schema.table" */
} psrc_t;

/* ------------------------------------------------------------------ */
/* Small codec helpers (the cursor is core/bytes_cur.h) */

/* A chunk's result: HIGH and the snapshot (encoded). */
typedef struct chigh_s {
  uint64_t high;
  uint8_t *snap; /* sl__pgc_snap_encode bytes */
  uint32_t snap_len;
} chigh_t;

static void chigh_clear(chigh_t *h) {
  sl_free(h->snap);
  memset(h, 0, sizeof(*h));
}

static int chigh_put(sl_bytes_t *b, const chigh_t *h) {
  int rc = sl_bytes_append_u64le(b, h->high);
  if (rc == SL_OK) rc = sl__put_blob(b, h->snap, h->snap_len);
  return rc;
}

/* Read HIGH and a snapshot blob (checked by decoding it). */
static bool chigh_get(sl__rcur_t *c, chigh_t *h) {
  memset(h, 0, sizeof(*h));
  h->high = sl__cur_u64(c);
  uint32_t n;
  const uint8_t *p = sl__cur_blob(c, &n);
  if (p == NULL || n == 0) {
    c->bad = true;
    return false;
  }
  sl__pgc_snap_t s;
  size_t used = 0;
  if (sl__pgc_snap_decode(p, n, &s, &used, NULL) != SL_OK) {
    c->bad = true;
    return false;
  }
  sl__pgc_snap_free(&s);
  if (used != n || (h->snap = sl_malloc(n)) == NULL) {
    c->bad = true;
    return false;
  }
  memcpy(h->snap, p, n);
  h->snap_len = n;
  return true;
}

/* The chunk id of a split "<schema>.<table>#<n>": table index and chunk. */
static bool parse_chunk_id(const psrc_t *s, const char *id, uint32_t *out_t,
                           uint32_t *out_c) {
  const char *hash = strrchr(id, '#');
  if (hash == NULL || hash[1] == 0) return false;
  char *end = NULL;
  errno = 0;
  unsigned long c = strtoul(hash + 1, &end, 10);
  if (errno || *end || c > UINT32_MAX || hash[1] == '-' || hash[1] == '+')
    return false;
  size_t n = (size_t)(hash - id);
  for (uint32_t t = 0; t < s->n_tables; t++)
    if (strlen(s->qname[t]) == n && memcmp(s->qname[t], id, n) == 0) {
      *out_t = t;
      *out_c = (uint32_t)c;
      return true;
    }
  return false;
}

static int src_connect(const psrc_t *s, PGconn **out, sl_error_t **out_err) {
  char server[128];
  return sl__pgc_connect(s->conninfo, s->connect_timeout_ms, out, server,
                         out_err);
}

static char *lsn_text(uint64_t lsn, char *buf) {
  return sl__pg_lsn_format(lsn, buf);
}

/* pg_replication_slots' row of the slot.  *out_exists false: none. */
typedef struct slot_info_s {
  bool exists;
  uint64_t confirmed;
  char wal_status[32];
  char plugin[64];
  char database[128];
  bool active;
} slot_info_t;

static int slot_info(PGconn *c, const psrc_t *s, slot_info_t *out,
                     sl_error_t **out_err) {
  memset(out, 0, sizeof(*out));
  const char *params[1] = {s->slot};
  PGresult *res = PQexecParams(
      c,
      "SELECT coalesce(confirmed_flush_lsn::text, ''), "
      "coalesce(wal_status, ''), coalesce(plugin::text, ''), "
      "coalesce(database::text, ''), active::text "
      "FROM pg_replication_slots WHERE slot_name = $1",
      1, NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: cannot read slot "
                          "%s at %s: %s", s->slot, s->server,
                          PQresultErrorMessage(res));
    PQclear(res);
    return rc;
  }
  if (PQntuples(res) == 1) {
    out->exists = true;
    const char *cf = PQgetvalue(res, 0, 0);
    if (cf[0] && sl__pg_lsn_parse(cf, &out->confirmed) != SL_OK)
      out->confirmed = 0;
    snprintf(out->wal_status, sizeof(out->wal_status), "%s",
             PQgetvalue(res, 0, 1));
    snprintf(out->plugin, sizeof(out->plugin), "%s", PQgetvalue(res, 0, 2));
    snprintf(out->database, sizeof(out->database), "%s",
             PQgetvalue(res, 0, 3));
    out->active = strcmp(PQgetvalue(res, 0, 4), "true") == 0;
  }
  PQclear(res);
  return SL_OK;
}

static int slot_lost_error(const psrc_t *s, sl_error_t **out_err) {
  int rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: replication slot %s "
                        "at %s has wal_status 'lost': the server removed WAL "
                        "the job has not read (max_slot_wal_keep_size); the "
                        "changes since the checkpoint are gone.  To capture "
                        "the tables again from a new snapshot, drop the slot "
                        "(SELECT pg_drop_replication_slot('%s')) and start "
                        "the job without --resume", s->slot, s->server,
                        s->slot);
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Enumerator */

typedef struct ech_s {
  uint8_t status;
  uint32_t owner;
  uint64_t fin_epoch;
  chigh_t h; /* finished */
} ech_t;

typedef struct etab_s {
  sl__pgc_chunks_t *cl;
  ech_t *ch;
} etab_t;

typedef struct epos_s {
  uint64_t epoch, lsn;
} epos_t;

#define DONE_MAX 1024u

typedef struct penum_s {
  psrc_t *src;
  uint32_t par;
  bool planned;
  bool stream_only; /* startup latest: no chunks */
  uint64_t stream_start;
  etab_t *t; /* src->n_tables */
  uint64_t last_snap;
  uint64_t all_ckpt;
  bool gate_open;
  bool stream_assigned;
  uint32_t stream_owner;
  uint8_t *stream_state; /* the stream split's state to hand out */
  size_t stream_len;
  /* Positions the stream reader reported, stamped with their epoch. */
  epos_t *pos;
  uint32_t n_pos, cap_pos;
  /* Positions of the newest completed checkpoints (oldest first). */
  epos_t done[DONE_MAX];
  uint32_t n_done;
  uint64_t flush_sent;
  bool *waiting;
  bool *told_end;
  PGconn *c;
} penum_t;

static void etabs_free(penum_t *e) {
  if (e->t == NULL) return;
  for (uint32_t t = 0; t < e->src->n_tables; t++) {
    etab_t *et = &e->t[t];
    if (et->cl && et->ch)
      for (uint32_t i = 0; i < et->cl->n; i++) chigh_clear(&et->ch[i].h);
    sl_free(et->ch);
    sl__pgc_chunks_free(et->cl);
  }
  sl_free(e->t);
  e->t = NULL;
}

static void enum_close(void *en) {
  penum_t *e = en;
  if (e == NULL) return;
  etabs_free(e);
  sl_free(e->stream_state);
  sl_free(e->pos);
  sl_free(e->waiting);
  sl_free(e->told_end);
  if (e->c) PQfinish(e->c);
  sl_free(e);
}

static bool all_finished(const penum_t *e) {
  if (!e->planned) return false;
  for (uint32_t t = 0; t < e->src->n_tables; t++)
    for (uint32_t i = 0; i < e->t[t].cl->n; i++)
      if (e->t[t].ch[i].status != CH_FINISHED) return false;
  return true;
}

/*
 * State, version 1: "SLPE", version u8, planned u8 (0 not yet, 1 chunk
 * lists follow, 2 stream only), stream_start u64, n_tables u32, per table
 * the chunk list (blob) and per chunk status u8, owner u32, fin_epoch u64
 * and, when finished, HIGH u64 + snapshot (blob); then last_snap u64,
 * all_ckpt u64, stream_assigned u8, the stream split's state (blob), the
 * completed positions (u32 n, n x (id u64, lsn u64)), flush_sent u64.
 */
static int enum_snapshot(void *en, uint64_t id, sl_bytes_t *out) {
  penum_t *e = en;
  e->last_snap = id;
  if (!e->gate_open && e->all_ckpt == 0 && all_finished(e)) e->all_ckpt = id;
  int rc = sl_bytes_append(out, "SLPE", 4);
  if (rc == SL_OK) rc = sl__put_u8(out, STATE_VERSION);
  bool lists = e->planned && !e->stream_only;
  if (rc == SL_OK) rc = sl__put_u8(out, e->stream_only ? 2 : e->planned);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->stream_start);
  if (rc == SL_OK) rc = sl__put_u32(out, lists ? e->src->n_tables : 0);
  for (uint32_t t = 0; lists && rc == SL_OK && t < e->src->n_tables; t++) {
    sl_bytes_t cb;
    sl_bytes_init(&cb);
    rc = sl__pgc_chunks_encode(e->t[t].cl, &cb);
    if (rc == SL_OK) rc = sl__put_blob(out, cb.data, cb.len);
    sl_bytes_close(&cb);
    for (uint32_t i = 0; rc == SL_OK && i < e->t[t].cl->n; i++) {
      const ech_t *c = &e->t[t].ch[i];
      rc = sl__put_u8(out, c->status);
      if (rc == SL_OK) rc = sl__put_u32(out, c->owner);
      if (rc == SL_OK) rc = sl_bytes_append_u64le(out, c->fin_epoch);
      if (rc == SL_OK && c->status == CH_FINISHED) rc = chigh_put(out, &c->h);
    }
  }
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->last_snap);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->all_ckpt);
  if (rc == SL_OK) rc = sl__put_u8(out, e->stream_assigned);
  if (rc == SL_OK) rc = sl__put_blob(out, e->stream_state, e->stream_len);
  if (rc == SL_OK) rc = sl__put_u32(out, e->n_done);
  for (uint32_t i = 0; rc == SL_OK && i < e->n_done; i++) {
    rc = sl_bytes_append_u64le(out, e->done[i].epoch);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->done[i].lsn);
  }
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, e->flush_sent);
  return rc;
}

static int stream_only_lists(penum_t *e);

static int enum_decode(penum_t *e, const uint8_t *p, size_t len,
                       sl_error_t **out_err) {
  sl__rcur_t c = {p, len, 0, false};
  const uint8_t *magic = sl__cur_take(&c, 4);
  if (magic == NULL || memcmp(magic, "SLPE", 4) != 0 ||
      sl__cur_u8(&c) != STATE_VERSION)
    goto corrupt;
  uint8_t planned = sl__cur_u8(&c);
  e->stream_start = sl__cur_u64(&c);
  uint32_t nt = sl__cur_u32(&c);
  if (c.bad || planned > 2) goto corrupt;
  if ((planned == 1 && nt != e->src->n_tables) || (planned != 1 && nt != 0))
    goto changed;
  if (planned == 2 && stream_only_lists(e) != SL_OK) goto nomem;
  e->planned = planned != 0;
  if (planned == 1) {
    if ((e->t = sl_calloc(nt, sizeof(etab_t))) == NULL) goto nomem;
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t bl;
      const uint8_t *b = sl__cur_blob(&c, &bl);
      if (b == NULL) goto corrupt;
      int rc = sl__pgc_chunks_decode(b, bl, &e->t[t].cl, out_err);
      if (rc == SL_ENOMEM && (out_err == NULL || *out_err == NULL)) goto nomem;
      if (rc != SL_OK) return rc;
      const sl__pgc_table_t *tb = e->src->tables[t];
      bool same_key = e->t[t].cl->n_key == tb->n_pk;
      for (uint32_t k = 0; same_key && k < tb->n_pk; k++)
        same_key = e->t[t].cl->key_kind[k] == tb->key_kind[k];
      if (!same_key)
        return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: the "
                            "checkpoint's chunks of %s are cut by another "
                            "key than the table's primary key now; a new "
                            "snapshot is needed: start the job without "
                            "--resume", e->src->qname[t]);
      if ((e->t[t].ch = sl_calloc(e->t[t].cl->n + 1, sizeof(ech_t))) == NULL)
        goto nomem;
      for (uint32_t i = 0; i < e->t[t].cl->n; i++) {
        ech_t *ch = &e->t[t].ch[i];
        ch->status = sl__cur_u8(&c);
        ch->owner = sl__cur_u32(&c);
        ch->fin_epoch = sl__cur_u64(&c);
        if (c.bad || ch->status > CH_FINISHED) goto corrupt;
        if (ch->status == CH_FINISHED && !chigh_get(&c, &ch->h)) goto corrupt;
      }
    }
  }
  e->last_snap = sl__cur_u64(&c);
  e->all_ckpt = sl__cur_u64(&c);
  e->stream_assigned = sl__cur_u8(&c) != 0;
  uint32_t bl;
  const uint8_t *b = sl__cur_blob(&c, &bl);
  uint32_t nd = sl__cur_u32(&c);
  if (c.bad || nd > DONE_MAX) goto corrupt;
  for (uint32_t i = 0; i < nd; i++) {
    e->done[i].epoch = sl__cur_u64(&c);
    e->done[i].lsn = sl__cur_u64(&c);
  }
  e->n_done = nd;
  e->flush_sent = sl__cur_u64(&c);
  if (c.bad || c.off != c.len) goto corrupt;
  if (bl) {
    if ((e->stream_state = sl_malloc(bl)) == NULL) goto nomem;
    memcpy(e->stream_state, b, bl);
    e->stream_len = bl;
  }
  return SL_OK;
corrupt:
  return sl_error_set(out_err, SL_ECORRUPT,
                      "postgres-cdc: the enumerator's state is corrupt at "
                      "byte %zu of %zu", c.off, len);
changed:
  return sl_error_set(out_err, SL_EINVAL,
                      "postgres-cdc: the checkpoint's chunk lists name other "
                      "tables than the pipeline captures now (%u in the "
                      "checkpoint, %u now); a changed table list needs a new "
                      "snapshot: start the job without --resume",
                      nt, e->src->n_tables);
nomem:
  return sl_error_set(out_err, SL_ENOMEM, "out of memory");
}

static int enum_create(void *ctx, const sl_enum_init_t *init, void **out,
                       sl_error_t **out_err) {
  psrc_t *s = ctx;
  penum_t *e = sl_calloc(1, sizeof(*e));
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
    if (e->all_ckpt && init->restored_checkpoint_id >= e->all_ckpt &&
        all_finished(e))
      e->gate_open = true;
  }
  *out = e;
  return SL_OK;
}

/* Startup latest: an empty chunk list per table stands for "nothing to
 * read"; the gate is open. */
static int stream_only_lists(penum_t *e) {
  const psrc_t *s = e->src;
  if ((e->t = sl_calloc(s->n_tables + 1, sizeof(etab_t))) == NULL)
    return SL_ENOMEM;
  for (uint32_t t = 0; t < s->n_tables; t++) {
    e->t[t].cl = sl_calloc(1, sizeof(sl__pgc_chunks_t));
    if (e->t[t].cl == NULL) return SL_ENOMEM;
  }
  e->planned = e->stream_only = e->gate_open = true;
  return SL_OK;
}

/* The slot: made now (its consistent point is where the stream starts),
 * or an existing one of the right kind reused from its confirmed
 * position. */
static int enum_slot(penum_t *e, sl_error_t **out_err) {
  psrc_t *s = e->src;
  slot_info_t si;
  int rc = slot_info(e->c, s, &si, out_err);
  if (rc != SL_OK) return rc;
  if (si.exists) {
    if (strcmp(si.plugin, "pgoutput") != 0) {
      rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: replication slot "
                        "%s at %s exists with plugin '%s'; sluice needs a "
                        "pgoutput slot: name another slot, or drop this one",
                        s->slot, s->server, si.plugin);
      goto fatal;
    }
    if (strcmp(si.wal_status, "lost") == 0) return slot_lost_error(s, out_err);
    if (strcmp(si.database, PQdb(e->c)) != 0) {
      rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: replication slot "
                        "%s at %s belongs to database '%s', not '%s' (the "
                        "conninfo's): name another slot", s->slot, s->server,
                        si.database, PQdb(e->c));
      goto fatal;
    }
    if (si.confirmed == 0) {
      rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: replication slot "
                        "%s at %s has no confirmed position (a physical "
                        "slot?)", s->slot, s->server);
      goto fatal;
    }
    e->stream_start = si.confirmed;
    char b[SL_PG_LSN_SIZE];
    sl_log(SL_LOG_INFO, "postgres-cdc: reusing replication slot %s from its "
           "confirmed position %s", s->slot, lsn_text(si.confirmed, b));
    return SL_OK;
  }
  sl_log(SL_LOG_INFO, "postgres-cdc: creating replication slot %s; the "
         "server first waits for the transactions in progress (also "
         "prepared ones) to end", s->slot);
  sl_pg_repl_t *r = NULL;
  rc = sl__pg_repl_connect(s->conninfo, &r, out_err);
  uint64_t lsn = 0;
  if (rc == SL_OK)
    rc = sl__pg_repl_create_slot(r, s->slot, false, &lsn, out_err);
  sl__pg_repl_destroy(r);
  if (rc != SL_OK) {
    if (out_err && *out_err)
      sl_error_prefix(*out_err, "postgres-cdc: creating replication slot %s",
                      s->slot);
    return rc;
  }
  e->stream_start = lsn;
  char b[SL_PG_LSN_SIZE];
  sl_log(SL_LOG_INFO, "postgres-cdc: created replication slot %s at %s",
         s->slot, lsn_text(lsn, b));
  return SL_OK;
fatal:
  if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
  return rc;
}

static int stream_state_make(penum_t *e, bool with_filter,
                             sl_error_t **out_err);

/* Plan (first discovery of a fresh start). */
static int enum_plan(penum_t *e, sl_error_t **out_err) {
  psrc_t *s = e->src;
  if (e->c == NULL) {
    int rc = src_connect(s, &e->c, out_err);
    if (rc != SL_OK) return rc;
  }
  int rc = SL_OK;
  if (s->start != SL_POSTGRES_CDC_START_SNAPSHOT) {
    rc = sl__pgc_publication_ensure(e->c, s->server, s->publication,
                                    (const sl__pgc_table_t *const *)s->tables,
                                    s->n_tables, true, NULL, out_err);
    if (rc == SL_OK) rc = enum_slot(e, out_err);
    if (rc != SL_OK) {
      if (out_err && *out_err && rc == SL_EINVAL)
        sl_error_set_fatal(*out_err, true);
      return rc;
    }
  }
  if (s->start == SL_POSTGRES_CDC_START_LATEST) {
    PQfinish(e->c);
    e->c = NULL;
    if (stream_only_lists(e) != SL_OK)
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    return stream_state_make(e, false, out_err);
  }
  etab_t *t = sl_calloc(s->n_tables + 1, sizeof(etab_t));
  if (t == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  e->t = t;
  for (uint32_t i = 0; i < s->n_tables; i++) {
    rc = sl__pgc_plan_chunks(e->c, s->server, s->tables[i], s->chunk_rows,
                             &t[i].cl, out_err);
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
  /* Planned for good: the session is not needed any more. */
  PQfinish(e->c);
  e->c = NULL;
  sl_log(SL_LOG_INFO, "postgres-cdc: %u table(s) planned for the snapshot",
         s->n_tables);
  return SL_OK;
}

/* The stream split's state: 'W', start u64, commit u64, skip u32, the
 * filter (blob: u32 n_tables, per table the chunk list blob and per chunk
 * HIGH + snapshot; empty: none), then optionally the pure flags (u32 n,
 * n bytes). */
static int stream_state_make(penum_t *e, bool with_filter,
                             sl_error_t **out_err) {
  psrc_t *s = e->src;
  (void)SL_INJECT("pgcdc.enum.stream_split_made");
  sl_bytes_t filt, b;
  sl_bytes_init(&filt);
  sl_bytes_init(&b);
  int rc = SL_OK;
  if (with_filter) rc = sl__put_u32(&filt, s->n_tables);
  for (uint32_t t = 0; with_filter && rc == SL_OK && t < s->n_tables; t++) {
    etab_t *et = &e->t[t];
    sl_bytes_t cb;
    sl_bytes_init(&cb);
    rc = sl__pgc_chunks_encode(et->cl, &cb);
    if (rc == SL_OK) rc = sl__put_blob(&filt, cb.data, cb.len);
    sl_bytes_close(&cb);
    for (uint32_t i = 0; rc == SL_OK && i < et->cl->n; i++) {
      if (et->ch[i].status != CH_FINISHED) {
        rc = sl_error_set(out_err, SL_ESTATE, "postgres-cdc: the stream "
                          "would start while chunk %s#%u is unfinished",
                          s->qname[t], i);
        break;
      }
      rc = chigh_put(&filt, &et->ch[i].h);
    }
  }
  if (rc == SL_OK) rc = sl__put_u8(&b, 'W');
  if (rc == SL_OK) rc = sl_bytes_append_u64le(&b, e->stream_start);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(&b, 0);
  if (rc == SL_OK) rc = sl__put_u32(&b, 0);
  if (rc == SL_OK) rc = sl__put_blob(&b, filt.data, filt.len);
  sl_bytes_close(&filt);
  if (rc != SL_OK) {
    sl_bytes_close(&b);
    if (out_err && *out_err) return rc;
    return sl_error_set(out_err, rc, "postgres-cdc: cannot make the stream "
                        "split: %s", sl_strerror(rc));
  }
  sl_free(e->stream_state);
  e->stream_state = b.data;
  e->stream_len = b.len;
  return SL_OK;
}

static int bounds_encode(const sl__pgc_chunks_t *cl, const sl__pgc_chunk_t *ch,
                         sl_bytes_t *b);

static int enum_serve(penum_t *e, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  psrc_t *s = e->src;
  if (!e->planned) return SL_OK;
  if (e->gate_open && !e->stream_assigned &&
      s->start != SL_POSTGRES_CDC_START_SNAPSHOT) {
    if (e->stream_state == NULL) {
      int rc = stream_state_make(e, true, out_err);
      if (rc != SL_OK) return rc;
    }
    uint32_t r = UINT32_MAX;
    for (uint32_t i = 0; i < e->par && r == UINT32_MAX; i++)
      if (e->waiting[i]) r = i;
    if (r == UINT32_MAX) goto chunks;
    sl_split_t sp = {WAL_ID, e->stream_state, e->stream_len};
    int rc = sl_enum_assign(ec, r, &sp);
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "postgres-cdc: cannot assign the "
                          "stream split: %s", sl_strerror(rc));
    e->stream_assigned = true;
    e->stream_owner = r;
    e->waiting[r] = false;
    sl_log(SL_LOG_INFO, "postgres-cdc: the stream phase starts on reader %u",
           r);
  }
chunks:
  for (uint32_t r = 0; r < e->par; r++) {
    if (!e->waiting[r]) continue;
    for (uint32_t t = 0; e->waiting[r] && t < s->n_tables; t++) {
      etab_t *et = &e->t[t];
      for (uint32_t i = 0; i < et->cl->n; i++) {
        if (et->ch[i].status != CH_PENDING) continue;
        char id[600];
        snprintf(id, sizeof(id), "%s#%u", s->qname[t], i);
        sl_bytes_t st;
        sl_bytes_init(&st);
        int rc = sl__put_u8(&st, 'U');
        if (rc == SL_OK) rc = bounds_encode(et->cl, &et->cl->chunks[i], &st);
        sl_split_t sp = {id, st.data, st.len};
        if (rc == SL_OK) rc = sl_enum_assign(ec, r, &sp);
        sl_bytes_close(&st);
        if (rc != SL_OK)
          return sl_error_set(out_err, rc, "postgres-cdc: cannot assign "
                              "chunk %s: %s", id, sl_strerror(rc));
        et->ch[i].status = CH_ASSIGNED;
        et->ch[i].owner = r;
        e->waiting[r] = false;
        break;
      }
    }
  }
  if (s->start == SL_POSTGRES_CDC_START_SNAPSHOT && all_finished(e)) {
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

/* Tell the stream reader the flush LSN when it moved. */
static int send_flush(penum_t *e, sl_enum_ctx_t *ec) {
  if (e->n_done == 0 || !e->stream_assigned) return SL_OK;
  uint64_t f = e->done[0].lsn;
  if (f <= e->flush_sent) return SL_OK;
  uint8_t ev[9];
  ev[0] = 'L';
  sl__put_u64le(ev + 1, f);
  int rc = sl_enum_send_event(ec, e->stream_owner, ev, sizeof(ev));
  if (rc == SL_OK) e->flush_sent = f;
  return rc;
}

static int enum_discover(void *en, sl_enum_ctx_t *ec, sl_error_t **out_err) {
  penum_t *e = en;
  (void)SL_INJECT("pgcdc.enum.discover"); /* tests count the ticks */
  if (!e->planned) {
    int rc = enum_plan(e, out_err);
    if (rc != SL_OK) return rc;
  }
  sl_enum_set_discovery_interval(
      ec, e->src->start == SL_POSTGRES_CDC_START_SNAPSHOT ? 0
          : e->stream_assigned                            ? 200
                                                          : 50);
  int rc = send_flush(e, ec);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  return enum_serve(e, ec, out_err);
}

static int enum_request(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                        sl_error_t **out_err) {
  penum_t *e = en;
  if (subtask < e->par) e->waiting[subtask] = true;
  return enum_serve(e, ec, out_err);
}

static ech_t *find_chunk(penum_t *e, const char *id) {
  uint32_t t, c;
  if (!e->planned || e->stream_only || !parse_chunk_id(e->src, id, &t, &c) ||
      c >= e->t[t].cl->n)
    return NULL;
  return &e->t[t].ch[c];
}

/* Reader events: 'F' + split id + HIGH + snapshot (a chunk's report);
 * 'P' + u64 (the stream's position at a snapshot). */
static int enum_event(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                      const uint8_t *ev, size_t len, sl_error_t **out_err) {
  penum_t *e = en;
  if (len == 9 && ev[0] == 'P') {
    if (e->n_pos == e->cap_pos) {
      uint32_t cap = e->cap_pos ? 2 * e->cap_pos : 16;
      epos_t *p = sl_realloc(e->pos, cap * sizeof(*p));
      if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
      e->pos = p;
      e->cap_pos = cap;
    }
    e->pos[e->n_pos].epoch = e->last_snap;
    e->pos[e->n_pos].lsn = sl__get_u64le(ev + 1);
    e->n_pos++;
    /* The reader that holds the stream split (not in the state: after a
     * restore it is whichever reader kept the split). */
    if (e->stream_owner != subtask) {
      e->stream_owner = subtask;
      e->flush_sent = 0;
    }
    return SL_OK;
  }
  sl__rcur_t c = {ev, len, 0, false};
  char id[4200];
  chigh_t h;
  memset(&h, 0, sizeof(h));
  if (sl__cur_u8(&c) != 'F' || !sl__cur_str(&c, id, sizeof(id)) ||
      !chigh_get(&c, &h) || c.off != len) {
    chigh_clear(&h);
    return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: a corrupt report "
                        "from reader %u", subtask);
  }
  ech_t *ch = find_chunk(e, id);
  if (ch == NULL) {
    chigh_clear(&h);
    return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: reader %u "
                        "reported chunk '%s', which the enumerator does not "
                        "have", subtask, id);
  }
  /* The newest report wins: a chunk read again after a restore has a new
   * snapshot, and its rows went downstream with it. */
  chigh_clear(&ch->h);
  ch->h = h;
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
  penum_t *e = en;
  (void)subtask;
  for (uint32_t i = 0; i < n; i++) {
    if (strcmp(sp[i].id, WAL_ID) == 0) {
      uint8_t *p = sl_malloc(sp[i].state_len + 1);
      if (p == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
      if (sp[i].state_len) memcpy(p, sp[i].state, sp[i].state_len);
      sl_free(e->stream_state);
      e->stream_state = p;
      e->stream_len = sp[i].state_len;
      e->stream_assigned = false;
      e->gate_open = true;
      e->flush_sent = 0; /* tell the next owner again */
      continue;
    }
    ech_t *ch = find_chunk(e, sp[i].id);
    if (ch == NULL)
      return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: split '%s' "
                          "came back, but the enumerator has no such chunk",
                          sp[i].id);
    if (sp[i].state_len > 1 && sp[i].state[0] == 'F') {
      sl__rcur_t c = {sp[i].state + 1, sp[i].state_len - 1, 0, false};
      chigh_t h;
      if (!chigh_get(&c, &h)) { /* the bounds follow */
        chigh_clear(&h);
        return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: split '%s' "
                            "came back with a corrupt position", sp[i].id);
      }
      chigh_clear(&ch->h);
      ch->h = h;
      ch->status = CH_FINISHED;
      /* From a checkpoint (a rescale): durable, and held by no reader, so
       * no reader's reset may roll it back. */
      ch->fin_epoch = 0;
      ch->owner = UINT32_MAX;
    } else if (sp[i].state_len >= 1 && sp[i].state[0] == 'U') {
      ch->status = CH_PENDING;
      if (!e->gate_open) e->all_ckpt = 0;
    } else {
      return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: split '%s' "
                          "came back with a corrupt state", sp[i].id);
    }
  }
  return enum_serve(e, ec, out_err);
}

static int enum_reset_reader(void *en, sl_enum_ctx_t *ec, uint32_t subtask,
                             uint64_t checkpoint_id, sl_error_t **out_err) {
  penum_t *e = en;
  if (e->planned && !e->stream_only)
    for (uint32_t t = 0; t < e->src->n_tables; t++)
      for (uint32_t i = 0; i < e->t[t].cl->n; i++) {
        ech_t *ch = &e->t[t].ch[i];
        if (ch->status == CH_FINISHED && ch->owner == subtask &&
            ch->fin_epoch > checkpoint_id) {
          ch->status = CH_ASSIGNED;
          if (!e->gate_open) e->all_ckpt = 0;
        }
      }
  /* Positions the reader reported after checkpoint_id are rolled back
   * with it: a later completion must not take one of them. */
  uint32_t k = 0;
  for (uint32_t i = 0; i < e->n_pos; i++)
    if (e->pos[i].epoch <= checkpoint_id) e->pos[k++] = e->pos[i];
  e->n_pos = k;
  if (subtask == e->stream_owner) e->flush_sent = 0;
  if (subtask < e->par) {
    e->waiting[subtask] = false;
    e->told_end[subtask] = false;
  }
  return enum_serve(e, ec, out_err);
}

static void enum_complete(void *en, uint64_t checkpoint_id) {
  penum_t *e = en;
  if (e->all_ckpt && checkpoint_id >= e->all_ckpt && all_finished(e))
    e->gate_open = true;
  if (e->src->start == SL_POSTGRES_CDC_START_SNAPSHOT) return;
  /* The checkpoint's position: the newest reported with epoch <= id, or
   * where the stream starts (the stream had not started). */
  uint64_t lsn = e->n_done ? e->done[e->n_done - 1].lsn : e->stream_start;
  uint32_t k = 0;
  for (uint32_t i = 0; i < e->n_pos; i++) {
    if (e->pos[i].epoch <= checkpoint_id) {
      if (e->pos[i].lsn > lsn) lsn = e->pos[i].lsn;
    } else {
      e->pos[k++] = e->pos[i];
    }
  }
  e->n_pos = k;
  uint32_t keep = e->src->retain;
  if (keep > DONE_MAX) keep = DONE_MAX;
  if (keep == 0) keep = 1;
  /* while: a restore may bring more than keep (retain was lowered). */
  while (e->n_done >= keep) {
    memmove(&e->done[0], &e->done[1], (e->n_done - 1) * sizeof(epos_t));
    e->n_done--;
  }
  e->done[e->n_done].epoch = checkpoint_id;
  e->done[e->n_done].lsn = lsn;
  e->n_done++;
  /* The flush goes to the reader at the next discovery tick (events
   * cannot be sent from here). */
}

static const sl_enum_vt_t pgc_enum_vt = {
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

/* Rows as bytes (each a finished sluice row, kind included). */
typedef struct rowbuf_s {
  uint32_t n, cap;
  uint8_t **data;
  uint32_t *len;
} rowbuf_t;

static void rowbuf_close(rowbuf_t *r) {
  for (uint32_t i = 0; i < r->n; i++) sl_free(r->data[i]);
  sl_free(r->data);
  sl_free(r->len);
  memset(r, 0, sizeof(*r));
}

static int rowbuf_add(rowbuf_t *r, const sl_row_t *row) {
  if (r->n == r->cap) {
    uint32_t cap = r->cap ? 2 * r->cap : 64;
    uint8_t **d = sl_realloc(r->data, cap * sizeof(*d));
    if (d) r->data = d;
    uint32_t *l = d ? sl_realloc(r->len, cap * sizeof(*l)) : NULL;
    if (l) r->len = l;
    if (d == NULL || l == NULL) return SL_ENOMEM;
    r->cap = cap;
  }
  uint8_t *p = sl_malloc(row->len ? row->len : 1);
  if (p == NULL) return SL_ENOMEM;
  memcpy(p, row->data, row->len);
  r->data[r->n] = p;
  r->len[r->n] = row->len;
  r->n++;
  return SL_OK;
}

typedef struct rchunk_s {
  uint32_t split;
  const char *id;
  uint32_t table, chunk;
  sl__pgc_chunks_t *cl; /* this chunk alone (its bounds); made here */
  int state;
  chigh_t h;
  sl__pgc_rows_t rows;
  bool has_rows;
  bool reported;
} rchunk_t;

/* The stream filter of one table (until the stream passes its max HIGH). */
typedef struct ftab_s {
  bool active;
  sl__pgc_chunks_t *cl;
  uint64_t *high;        /* per chunk */
  sl__pgc_snap_t *snap;  /* per chunk */
  uint64_t max_high;
} ftab_t;

/* A stream position (DESIGN NOTES). */
typedef struct spos_s {
  uint64_t start, commit;
  uint32_t skip;
} spos_t;

typedef struct batch_s {
  rowbuf_t rows; /* output rows, in order */
  spos_t pos;    /* after the last row */
  uint8_t *pure; /* per table: past its max HIGH after this batch */
  struct batch_s *next;
} batch_t;

typedef struct preader_s {
  const psrc_t *src;
  uint32_t subtask;
  sl_source_waker_t *waker;
  sl_source_out_t *out; /* the last poll's (for position events) */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  bool has_thread;
  bool stop;
  rchunk_t **ch;
  uint32_t n_ch, cap_ch;
  /* The stream split. */
  bool has_stream;
  uint32_t stream_split;
  spos_t pos;             /* of the last emitted batch (task) */
  uint8_t *filter_blob;
  uint32_t filter_len;
  uint8_t *pure;          /* per table, task side */
  bool stream_started;
  batch_t *q_head, *q_tail;
  uint32_t q_n;
  _Atomic uint64_t flush_req; /* from the enumerator */
  sl_error_t *err;
  PGconn *c;          /* the I/O thread's SQL session */
  PGcancel *cancel;   /* of c, to end a long query at close */
  bool asked;
  bool is_all_assigned;
  sl_row_builder_t b;
  bool has_b;
} preader_t;

static void batch_free(batch_t *b) {
  if (b == NULL) return;
  rowbuf_close(&b->rows);
  sl_free(b->pure);
  sl_free(b);
}

static void set_err(preader_t *rd, sl_error_t *err) {
  pthread_mutex_lock(&rd->lock);
  if (rd->err == NULL) rd->err = err;
  else sl_error_destroy(err);
  pthread_mutex_unlock(&rd->lock);
  if (rd->waker) sl_source_waker_wake(rd->waker);
}

static bool reader_stopping(preader_t *rd) {
  pthread_mutex_lock(&rd->lock);
  bool stop = rd->stop;
  pthread_mutex_unlock(&rd->lock);
  return stop;
}

static int reader_conn(preader_t *rd, sl_error_t **out_err) {
  if (rd->c != NULL) return SL_OK;
  PGconn *c = NULL;
  int rc = src_connect(rd->src, &c, out_err);
  if (rc != SL_OK) return rc;
  PGcancel *k = PQgetCancel(c);
  pthread_mutex_lock(&rd->lock);
  rd->c = c;
  rd->cancel = k;
  pthread_mutex_unlock(&rd->lock);
  return SL_OK;
}

static void reader_conn_drop(preader_t *rd) {
  pthread_mutex_lock(&rd->lock);
  PGconn *c = rd->c;
  PGcancel *k = rd->cancel;
  rd->c = NULL;
  rd->cancel = NULL;
  pthread_mutex_unlock(&rd->lock);
  if (k) PQfreeCancel(k);
  if (c) PQfinish(c);
}

/* ---- Chunk bounds in a split state ---- */

static void one_chunk_free(sl__pgc_chunks_t *cl) {
  if (cl == NULL) return;
  for (uint32_t i = 0; i < cl->n; i++) {
    sl__pgc_chunk_t *ch = &cl->chunks[i];
    for (uint32_t k = 0; k < cl->n_key; k++) {
      if (ch->low) sl_free(ch->low[k].p);
      if (ch->high) sl_free(ch->high[k].p);
    }
    sl_free(ch->low);
    sl_free(ch->high);
  }
  sl_free(cl->chunks);
  sl_free(cl->key_kind);
  sl_free(cl);
}

static int bound_put(sl_bytes_t *b, const sl__pgc_chunks_t *cl,
                     const sl__pgc_kv_t *v) {
  int rc = sl__put_u8(b, v != NULL);
  for (uint32_t k = 0; v && rc == SL_OK && k < cl->n_key; k++)
    rc = cl->key_kind[k] == SL_PGC_KEY_INT
             ? sl_bytes_append_u64le(b, (uint64_t)v[k].i)
             : sl__put_blob(b, v[k].p, v[k].len);
  return rc;
}

static int bounds_encode(const sl__pgc_chunks_t *cl, const sl__pgc_chunk_t *ch,
                         sl_bytes_t *b) {
  int rc = bound_put(b, cl, ch->low);
  if (rc == SL_OK) rc = bound_put(b, cl, ch->high);
  return rc;
}

static bool bound_get(sl__rcur_t *c, const sl__pgc_table_t *t, sl__pgc_kv_t **out) {
  *out = NULL;
  uint8_t has = sl__cur_u8(c);
  if (c->bad || has > 1) return false;
  if (!has) return true;
  sl__pgc_kv_t *v = sl_calloc(t->n_pk, sizeof(*v));
  if (v == NULL) return false;
  *out = v;
  for (uint32_t k = 0; k < t->n_pk; k++) {
    if (t->key_kind[k] == SL_PGC_KEY_INT) {
      v[k].i = (int64_t)sl__cur_u64(c);
    } else {
      uint32_t n;
      const uint8_t *p = sl__cur_blob(c, &n);
      if (p == NULL || (v[k].p = sl_malloc(n + 1)) == NULL) return false;
      memcpy(v[k].p, p, n);
      v[k].len = n;
    }
  }
  return !c->bad;
}

/* A list holding chunk `id` of table t alone, its bounds read from c. */
static int bounds_decode(sl__rcur_t *c, const sl__pgc_table_t *t, uint32_t id,
                         sl__pgc_chunks_t **out) {
  sl__pgc_chunks_t *cl = sl_calloc(1, sizeof(*cl));
  if (cl == NULL) return SL_ENOMEM;
  cl->n_key = t->n_pk;
  cl->key_kind = sl_malloc(t->n_pk);
  cl->chunks = sl_calloc(1, sizeof(sl__pgc_chunk_t));
  if (cl->key_kind == NULL || cl->chunks == NULL) {
    one_chunk_free(cl);
    return SL_ENOMEM;
  }
  memcpy(cl->key_kind, t->key_kind, t->n_pk);
  cl->n = 1;
  cl->chunks[0].id = id;
  bool ok = bound_get(c, t, &cl->chunks[0].low) &&
            bound_get(c, t, &cl->chunks[0].high);
  if (!ok) {
    one_chunk_free(cl);
    return SL_ECORRUPT;
  }
  *out = cl;
  return SL_OK;
}

/* ---- The filter ---- */

static void ftabs_free(ftab_t *f, uint32_t n) {
  if (f == NULL) return;
  for (uint32_t t = 0; t < n; t++) {
    if (f[t].snap && f[t].cl)
      for (uint32_t i = 0; i < f[t].cl->n; i++) sl__pgc_snap_free(&f[t].snap[i]);
    sl_free(f[t].snap);
    sl_free(f[t].high);
    sl__pgc_chunks_free(f[t].cl);
  }
  sl_free(f);
}

static int filter_parse(const psrc_t *s, const uint8_t *p, uint32_t len,
                        const uint8_t *pure, ftab_t **out,
                        sl_error_t **out_err) {
  *out = NULL;
  if (len == 0) return SL_OK;
  sl__rcur_t c = {p, len, 0, false};
  uint32_t nt = sl__cur_u32(&c);
  if (c.bad)
    return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: the stream "
                        "split's filter is corrupt");
  if (nt != s->n_tables)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: the stream "
                        "split's filter has %u tables, the pipeline captures "
                        "%u", nt, s->n_tables);
  ftab_t *f = sl_calloc(nt + 1, sizeof(ftab_t));
  if (f == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  int rc = SL_OK;
  for (uint32_t t = 0; rc == SL_OK && t < nt; t++) {
    uint32_t bl;
    const uint8_t *b = sl__cur_blob(&c, &bl);
    rc = b ? sl__pgc_chunks_decode(b, bl, &f[t].cl, out_err) : SL_ECORRUPT;
    if (rc == SL_OK && (f[t].cl->n_key != s->tables[t]->n_pk ||
                        memcmp(f[t].cl->key_kind, s->tables[t]->key_kind,
                               f[t].cl->n_key) != 0))
      rc = SL_ECORRUPT;
    if (rc == SL_OK &&
        ((f[t].high = sl_calloc(f[t].cl->n + 1, sizeof(uint64_t))) == NULL ||
         (f[t].snap = sl_calloc(f[t].cl->n + 1, sizeof(sl__pgc_snap_t))) ==
             NULL))
      rc = SL_ENOMEM;
    for (uint32_t i = 0; rc == SL_OK && i < f[t].cl->n; i++) {
      f[t].high[i] = sl__cur_u64(&c);
      uint32_t sn;
      const uint8_t *sp = sl__cur_blob(&c, &sn);
      size_t used = 0;
      if (sp == NULL) {
        rc = SL_ECORRUPT;
        break;
      }
      rc = sl__pgc_snap_decode(sp, sn, &f[t].snap[i], &used, out_err);
      if (rc == SL_OK && used != sn) rc = SL_ECORRUPT;
      if (f[t].high[i] > f[t].max_high) f[t].max_high = f[t].high[i];
    }
    f[t].active = !(pure && pure[t]);
  }
  if (rc == SL_OK && c.off != c.len) rc = SL_ECORRUPT;
  if (rc != SL_OK) {
    ftabs_free(f, nt);
    if (out_err && *out_err) return rc;
    return sl_error_set(out_err, rc, "postgres-cdc: the stream split's "
                        "filter is corrupt");
  }
  *out = f;
  return SL_OK;
}

/* ---- The I/O thread: chunks ---- */

static int read_one_chunk(preader_t *rd, rchunk_t *rc_, sl_error_t **out_err) {
  const psrc_t *s = rd->src;
  const sl__pgc_table_t *t = s->tables[rc_->table];
  int rc = reader_conn(rd, out_err);
  if (rc != SL_OK) return rc;
  sl__pgc_rows_init(&rc_->rows, t->schema_);
  rc_->has_rows = true;
  rc = SL_INJECT("pgcdc.snapshot.before_read");
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "injected failure at "
                        "pgcdc.snapshot.before_read (chunk %s)", rc_->id);
  sl__pgc_snap_t snap;
  memset(&snap, 0, sizeof(snap));
  uint64_t high = 0;
  rc = sl__pgc_read_chunk(rd->c, s->server, t, rc_->cl, &rc_->cl->chunks[0],
                          &snap, &high, &rc_->rows, out_err);
  if (rc == SL_OK && (rc = SL_INJECT("pgcdc.snapshot.after_read")) != SL_OK)
    sl_error_set(out_err, rc, "injected failure at pgcdc.snapshot.after_read "
                 "(chunk %s)", rc_->id);
  if (rc == SL_OK) {
    sl_bytes_t sb;
    sl_bytes_init(&sb);
    rc = sl__pgc_snap_encode(&snap, &sb);
    if (rc == SL_OK) {
      chigh_clear(&rc_->h);
      rc_->h.high = high;
      rc_->h.snap = sb.data;
      rc_->h.snap_len = (uint32_t)sb.len;
    } else {
      sl_bytes_close(&sb);
      sl_error_set(out_err, rc, "out of memory");
    }
  }
  sl__pgc_snap_free(&snap);
  if (rc != SL_OK && out_err && *out_err)
    sl_error_prefix(*out_err, "chunk %s", rc_->id);
  return rc;
}

/* ---- The I/O thread: the stream ---- */

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The stream's working state on the I/O thread. */
typedef struct sstate_s {
  preader_t *rd;
  sl_pgo_decoder_t dec;
  ftab_t *f;
  uint8_t *pure;
  bool *rel_ok;       /* per table: a Relation message was checked */
  spos_t pos;         /* after the last change processed */
  spos_t restart;     /* the position the stream was started from */
  bool in_txn, skip_txn;
  uint32_t xid, idx, skip_n;
  uint64_t final_lsn;
  int64_t commit_us;
  batch_t *b;
  int64_t last_push;   /* when the last batch was handed over */
  bool dirty;          /* pos moved since the last push */
  sl_row_builder_t bb, ba; /* before and after images */
  bool has_bb, has_ba;
} sstate_t;

static int batch_new(const psrc_t *s, batch_t **out) {
  batch_t *b = sl_calloc(1, sizeof(*b));
  if (b == NULL || (b->pure = sl_calloc(s->n_tables + 1, 1)) == NULL) {
    sl_free(b);
    return SL_ENOMEM;
  }
  *out = b;
  return SL_OK;
}

/* Hand the batch (possibly empty: a position move) to the task; waits
 * while the queue is full.  false: stop. */
static bool batch_push(sstate_t *ss) {
  preader_t *rd = ss->rd;
  if (ss->b == NULL && batch_new(rd->src, &ss->b) != SL_OK) return false;
  batch_t *b = ss->b;
  b->pos = ss->pos;
  if (b->rows.n) (void)SL_INJECT("pgcdc.stream.before_push");
  memcpy(b->pure, ss->pure, rd->src->n_tables);
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
  if (!ok) batch_free(b);
  ss->b = NULL;
  ss->dirty = false;
  ss->last_push = mono_ms();
  if (ok && rd->waker) sl_source_waker_wake(rd->waker);
  return ok;
}

/* The captured table a change's relation is (by oid), -1 for another
 * table; -2 for a captured table whose Relation message was not checked
 * (cannot happen: the server describes a relation before its first
 * change). */
static int table_of_rel(sstate_t *ss, const sl_pgo_relation_t *rel) {
  const psrc_t *s = ss->rd->src;
  for (uint32_t t = 0; t < s->n_tables; t++)
    if (s->tables[t]->oid == rel->oid) return ss->rel_ok[t] ? (int)t : -2;
  return -1;
}

/* A Relation message: a captured table's columns must be the ones the job
 * was built with (names, types, order). */
static int on_relation(sstate_t *ss, const sl_pgo_relation_t *rel,
                       sl_error_t **out_err) {
  const psrc_t *s = ss->rd->src;
  const char *nsp = rel->nspname[0] ? rel->nspname : "pg_catalog";
  for (uint32_t t = 0; t < s->n_tables; t++) {
    const sl__pgc_table_t *tb = s->tables[t];
    bool same_name =
        strcmp(nsp, tb->schema) == 0 && strcmp(rel->relname, tb->name) == 0;
    /* Matched by oid first: a renamed table keeps its oid. */
    if (rel->oid != tb->oid && !same_name) continue;
    char why[512] = "";
    if (rel->oid != tb->oid)
      snprintf(why, sizeof(why), "the table was dropped and made again (oid "
               "%u, was %u)", rel->oid, tb->oid);
    else if (!same_name)
      snprintf(why, sizeof(why), "it was renamed to %.200s.%.200s", nsp,
               rel->relname);
    else if (rel->n_cols != tb->rel.n_cols)
      snprintf(why, sizeof(why), "it has %u columns, the job was built with "
               "%u", rel->n_cols, tb->rel.n_cols);
    for (uint16_t i = 0; !why[0] && i < rel->n_cols; i++)
      if (strcmp(rel->cols[i].name, tb->rel.cols[i].name) != 0 ||
          rel->cols[i].type_oid != tb->rel.cols[i].type_oid ||
          rel->cols[i].type_mod != tb->rel.cols[i].type_mod)
        snprintf(why, sizeof(why), "column %u is \"%s\" (type %u, typmod %d), "
                 "the job was built with \"%s\" (type %u, typmod %d)", i + 1,
                 rel->cols[i].name, rel->cols[i].type_oid,
                 rel->cols[i].type_mod, tb->rel.cols[i].name,
                 tb->rel.cols[i].type_oid, tb->rel.cols[i].type_mod);
    if (!why[0] && rel->replident != 'f')
      snprintf(why, sizeof(why), "its REPLICA IDENTITY is no longer FULL "
               "('%c'): updates and deletes would carry no old row",
               rel->replident);
    if (why[0]) {
      char b[SL_PG_LSN_SIZE];
      int rc = sl_error_set(out_err, SL_ENOTSUP, "postgres-cdc: the schema "
                            "of %s changed in the stream (transaction "
                            "committed at %s): %s.  sluice does not follow "
                            "schema changes: the job stops here; capture the "
                            "table again with a new job (a new slot and "
                            "snapshot)", s->qname[t],
                            lsn_text(ss->final_lsn, b), why);
      if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
      return rc;
    }
    ss->rel_ok[t] = true;
    return SL_OK;
  }
  return SL_OK; /* a table the publication has but the job does not read */
}

/* Build one image of table t from tuple tup (old: the old tuple, used for
 * unchanged TOAST values; may be NULL) into b with kind; then metadata. */
static int build_image(sstate_t *ss, sl_row_builder_t *b, sl_row_kind_t kind,
                       uint32_t t, const sl_pgo_relation_t *rel,
                       const sl_pgo_tuple_t *tup, const sl_pgo_tuple_t *old,
                       sl_row_t *out, sl_error_t **out_err) {
  const psrc_t *s = ss->rd->src;
  sl_row_builder_reset(b, kind);
  int rc = SL_OK;
  for (uint16_t i = 0; rc == SL_OK && i < tup->n_cols; i++) {
    const sl_pgo_datum_t *d = &tup->cols[i];
    if (d->kind == SL_PGO_UNCHANGED) {
      if (old == NULL || i >= old->n_cols ||
          old->cols[i].kind == SL_PGO_UNCHANGED) {
        rc = sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: column \"%s\" "
                          "of %s arrived as an unchanged TOAST value without "
                          "an old row to take it from", rel->cols[i].name,
                          s->qname[t]);
        break;
      }
      d = &old->cols[i];
    }
    rc = sl__pgo_value(rel, i, d, b, i, out_err);
  }
  if (rc == SL_OK && s->f_table >= 0)
    rc = sl_row_builder_set_str(b, (uint32_t)s->f_table, s->qname[t],
                                (uint32_t)strlen(s->qname[t]));
  if (rc == SL_OK && s->f_pos >= 0) {
    char buf[64], l[SL_PG_LSN_SIZE];
    int n = snprintf(buf, sizeof(buf), "%s:%u", lsn_text(ss->final_lsn, l),
                     ss->idx);
    rc = sl_row_builder_set_str(b, (uint32_t)s->f_pos, buf, (uint32_t)n);
  }
  if (rc == SL_OK && s->f_opts >= 0)
    sl_row_builder_set_i64(b, (uint32_t)s->f_opts,
                           ss->commit_us + SL_PG_EPOCH_US);
  if (rc != SL_OK) {
    if (out_err && *out_err) {
      char l[SL_PG_LSN_SIZE];
      sl_error_prefix(*out_err, "postgres-cdc: %s, change %u of the "
                      "transaction committed at %s", s->qname[t], ss->idx,
                      lsn_text(ss->final_lsn, l));
      return rc;
    }
    return sl_error_set(out_err, rc, "postgres-cdc: cannot build a row: %s",
                        sl_strerror(rc));
  }
  return sl_row_builder_finish(b, out, out_err);
}

/* Whether a change of row (an image of table t) in the current
 * transaction passes the filter (DESIGN NOTES). */
static int filter_pass(sstate_t *ss, uint32_t t, const sl_row_t *row,
                       bool *out_pass, sl_error_t **out_err) {
  *out_pass = true;
  ftab_t *f = ss->f;
  if (f == NULL || !f[t].active) return SL_OK;
  uint32_t i = 0;
  int rc = sl__pgc_chunk_find(f[t].cl, ss->rd->src->tables[t], row, &i,
                              out_err);
  if (rc != SL_OK) return rc;
  if (i < f[t].cl->n)
    *out_pass = ss->final_lsn >= f[t].high[i] ||
                !sl__pgc_snap_visible(&f[t].snap[i], ss->xid);
  return SL_OK;
}

static bool same_pk(const sl__pgc_table_t *tb, const sl_pgo_tuple_t *a,
                    const sl_pgo_tuple_t *b) {
  for (uint32_t k = 0; k < tb->n_pk; k++) {
    uint32_t i = tb->pk[k];
    if (i >= a->n_cols || i >= b->n_cols) return false;
    const sl_pgo_datum_t *x = &a->cols[i], *y = &b->cols[i];
    if (y->kind == SL_PGO_UNCHANGED) continue;
    if (x->kind != y->kind || x->len != y->len ||
        (x->len && memcmp(x->data, y->data, x->len) != 0))
      return false;
  }
  return true;
}

static int add_row(sstate_t *ss, const sl_row_t *row, sl_error_t **out_err) {
  if (ss->b == NULL && batch_new(ss->rd->src, &ss->b) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rowbuf_add(&ss->b->rows, row) != SL_OK)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  return SL_OK;
}

/* One Insert, Update or Delete of the current transaction. */
static int on_change(sstate_t *ss, const sl_pgo_msg_t *m,
                     sl_error_t **out_err) {
  const psrc_t *s = ss->rd->src;
  ss->idx++;
  if (ss->skip_txn || ss->idx <= ss->skip_n) return SL_OK;
  ss->pos.commit = ss->final_lsn;
  ss->pos.skip = ss->idx;
  ss->dirty = true;
  int ti = table_of_rel(ss, m->u.change.rel);
  if (ti == -1) return SL_OK;
  if (ti < 0) {
    int rc = sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: a %s of "
                          "relation %u (a captured table) before any Relation "
                          "message described it", sl__pgo_type_name(m->type),
                          m->u.change.rel->oid);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  uint32_t t = (uint32_t)ti;
  const sl_pgo_relation_t *rel = m->u.change.rel;
  const sl_pgo_tuple_t *old =
      m->u.change.old_kind == 'O' ? &m->u.change.old : NULL;
  if (m->type != SL_PGO_INSERT && old == NULL) {
    char l[SL_PG_LSN_SIZE];
    int rc = sl_error_set(out_err, SL_ENOTSUP, "postgres-cdc: %s of %s "
                          "(transaction committed at %s) carries no old row "
                          "(REPLICA IDENTITY is not FULL): run ALTER TABLE %s "
                          "REPLICA IDENTITY FULL; the job stops here",
                          sl__pgo_type_name(m->type), s->qname[t],
                          lsn_text(ss->final_lsn, l), s->qname[t]);
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  sl_row_t before, after;
  bool pass_b = false, pass_a = false;
  int rc = SL_OK;
  if (m->type == SL_PGO_INSERT) {
    rc = build_image(ss, &ss->ba, SL_ROW_INSERT, t, rel, &m->u.change.new_,
                     NULL, &after, out_err);
    if (rc == SL_OK) rc = filter_pass(ss, t, &after, &pass_a, out_err);
    if (rc == SL_OK && pass_a) rc = add_row(ss, &after, out_err);
    return rc;
  }
  if (m->type == SL_PGO_DELETE) {
    rc = build_image(ss, &ss->bb, SL_ROW_DELETE, t, rel, old, NULL, &before,
                     out_err);
    if (rc == SL_OK) rc = filter_pass(ss, t, &before, &pass_b, out_err);
    if (rc == SL_OK && pass_b) rc = add_row(ss, &before, out_err);
    return rc;
  }
  /* An update: -U/+U, or -D/+I when the primary key changed (each
   * decided by its own chunk). */
  bool same = same_pk(s->tables[t], old, &m->u.change.new_);
  rc = build_image(ss, &ss->bb, same ? SL_ROW_UPDATE_BEFORE : SL_ROW_DELETE, t,
                   rel, old, NULL, &before, out_err);
  if (rc == SL_OK)
    rc = build_image(ss, &ss->ba, same ? SL_ROW_UPDATE_AFTER : SL_ROW_INSERT,
                     t, rel, &m->u.change.new_, old, &after, out_err);
  if (rc == SL_OK) rc = filter_pass(ss, t, &before, &pass_b, out_err);
  if (rc == SL_OK) {
    if (same) pass_a = pass_b;
    else rc = filter_pass(ss, t, &after, &pass_a, out_err);
  }
  if (rc == SL_OK && pass_b) rc = add_row(ss, &before, out_err);
  if (rc == SL_OK && pass_a) rc = add_row(ss, &after, out_err);
  return rc;
}

static int on_begin(sstate_t *ss, const sl_pgo_msg_t *m,
                    sl_error_t **out_err) {
  const psrc_t *s = ss->rd->src;
  ss->in_txn = true;
  ss->xid = m->u.begin.xid;
  ss->final_lsn = m->u.begin.final_lsn;
  ss->commit_us = m->u.begin.commit_time;
  ss->idx = 0;
  ss->skip_n = 0;
  ss->skip_txn = ss->final_lsn < ss->restart.start;
  if (ss->restart.commit && !ss->skip_txn) {
    if (ss->final_lsn == ss->restart.commit) {
      ss->skip_n = ss->restart.skip;
    } else if (ss->final_lsn > ss->restart.commit) {
      char a[SL_PG_LSN_SIZE], b[SL_PG_LSN_SIZE];
      int rc = sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: the "
                            "checkpoint's position is inside the transaction "
                            "committed at %s, but slot %s sent the "
                            "transaction committed at %s first: the slot "
                            "does not hold the changes the checkpoint needs",
                            lsn_text(ss->restart.commit, a), s->slot,
                            lsn_text(ss->final_lsn, b));
      if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
      return rc;
    }
    ss->restart.commit = 0;
  }
  /* Tables whose every chunk HIGH is behind this transaction need no
   * filter any more. */
  for (uint32_t t = 0; ss->f && t < s->n_tables; t++)
    if (ss->f[t].active && ss->final_lsn >= ss->f[t].max_high) {
      ss->f[t].active = false;
      ss->pure[t] = 1;
    }
  return SL_OK;
}

static int on_truncate(sstate_t *ss, const sl_pgo_msg_t *m,
                       sl_error_t **out_err) {
  const psrc_t *s = ss->rd->src;
  if (ss->skip_txn) return SL_OK;
  for (uint32_t i = 0; i < m->u.truncate.n_rels; i++)
    for (uint32_t t = 0; t < s->n_tables; t++) {
      if (s->tables[t]->oid != m->u.truncate.rel_oids[i]) continue;
      char l[SL_PG_LSN_SIZE];
      int rc = sl_error_set(out_err, SL_ENOTSUP, "postgres-cdc: TRUNCATE of "
                            "%s (transaction committed at %s): a changelog "
                            "cannot say \"every row is gone\" without the "
                            "rows, so sluice stops the job here rather than "
                            "let the output keep rows the table no longer "
                            "has; capture the table again with a new job (a "
                            "new slot and snapshot)", s->qname[t],
                            lsn_text(ss->final_lsn, l));
      if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
      return rc;
    }
  return SL_OK;
}

/* Check the slot before streaming: it exists, is not lost, and its
 * confirmed position is not past where the checkpoint resumes. */
static int slot_check(preader_t *rd, uint64_t resume, slot_info_t *si,
                      sl_error_t **out_err) {
  const psrc_t *s = rd->src;
  int rc = slot_info(rd->c, s, si, out_err);
  if (rc != SL_OK) return rc;
  char a[SL_PG_LSN_SIZE], b[SL_PG_LSN_SIZE];
  if (!si->exists) {
    rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: replication slot %s "
                      "does not exist at %s (dropped while the job was "
                      "down?): the changes after the checkpoint's position "
                      "%s cannot be read.  To capture the tables again from "
                      "a new snapshot, start the job without --resume",
                      s->slot, s->server, lsn_text(resume, a));
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  if (strcmp(si->wal_status, "lost") == 0) return slot_lost_error(s, out_err);
  if (si->confirmed > resume) {
    rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: replication slot %s "
                      "at %s has confirmed position %s, past the "
                      "checkpoint's position %s: the changes between them "
                      "are gone from the slot (was it made again, or "
                      "advanced by another job?).  Restore a newer "
                      "checkpoint, or start the job without --resume",
                      s->slot, s->server, lsn_text(si->confirmed, a),
                      lsn_text(resume, b));
    if (out_err && *out_err) sl_error_set_fatal(*out_err, true);
    return rc;
  }
  return SL_OK;
}

static int heartbeat(preader_t *rd, sl_error_t **out_err) {
  PGresult *res = PQexec(rd->c, "SELECT pg_logical_emit_message(false, '"
                         HB_PREFIX "', '')");
  int rc = SL_OK;
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: heartbeat at %s: %s",
                      rd->src->server, PQresultErrorMessage(res));
  PQclear(res);
  return rc;
}

/* Stream until stopped or failed. */
static int stream_run(preader_t *rd, sl_error_t **out_err) {
  const psrc_t *s = rd->src;
  sstate_t ss;
  memset(&ss, 0, sizeof(ss));
  ss.rd = rd;
  sl__pgo_decoder_init(&ss.dec);
  pthread_mutex_lock(&rd->lock);
  ss.pos = rd->pos;
  ss.pure = sl_calloc(s->n_tables + 1, 1);
  if (ss.pure && rd->pure) memcpy(ss.pure, rd->pure, s->n_tables);
  pthread_mutex_unlock(&rd->lock);
  ss.restart = ss.pos;
  ss.rel_ok = sl_calloc(s->n_tables + 1, sizeof(bool));
  sl_pg_repl_t *r = NULL;
  int rc = SL_OK;
  if (ss.pure == NULL || ss.rel_ok == NULL ||
      sl_row_builder_init(&ss.bb, s->schema) != SL_OK ||
      !(ss.has_bb = true) ||
      sl_row_builder_init(&ss.ba, s->schema) != SL_OK || !(ss.has_ba = true))
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rc == SL_OK)
    rc = filter_parse(s, rd->filter_blob, rd->filter_len, ss.pure, &ss.f,
                      out_err);
  if (rc == SL_OK) rc = reader_conn(rd, out_err);
  slot_info_t si;
  if (rc == SL_OK) rc = slot_check(rd, ss.pos.start, &si, out_err);
  /* The walsender of this job's previous connection (a restart, a killed
   * process) lets the slot go on its own: wait for that, bounded. */
  for (int64_t t0 = mono_ms(); rc == SL_OK && si.active;) {
    if (reader_stopping(rd)) break;
    if (mono_ms() - t0 > (int64_t)s->connect_timeout_ms) {
      rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: replication slot %s "
                        "at %s is in use by another connection (still after "
                        "%u ms): one slot serves one job", s->slot, s->server,
                        s->connect_timeout_ms);
      break;
    }
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL); /* polling the server's state, bounded */
    rc = slot_check(rd, ss.pos.start, &si, out_err);
  }
  if (rc == SL_OK) rc = sl__pg_repl_connect(s->conninfo, &r, out_err);
  /* From the slot's confirmed position: the server never sends what is
   * before it, and the flush starts there (nothing newer confirmed). */
  if (rc == SL_OK)
    rc = sl__pg_repl_start(r, s->slot, si.confirmed, s->publication, true,
                           out_err);
  if (rc == SL_OK) (void)SL_INJECT("pgcdc.stream.started");
  int64_t last_data = mono_ms(), last_status = last_data,
          last_hb = last_data;
  while (rc == SL_OK && !reader_stopping(rd)) {
    int64_t now = mono_ms();
    uint64_t req = atomic_load(&rd->flush_req);
    if (req > sl__pg_repl_flush_sent(r) && req >= si.confirmed) {
      rc = sl__pg_repl_set_flush(r, req, out_err);
      if (rc == SL_OK) rc = sl__pg_repl_send_status(r, false, out_err);
      if (rc != SL_OK) break;
      last_status = now;
    } else if (now - last_status >= STATUS_MS) {
      rc = sl__pg_repl_send_status(r, false, out_err);
      if (rc != SL_OK) break;
      last_status = now;
    }
    if (!ss.in_txn && now - last_data >= (int64_t)s->heartbeat_ms &&
        now - last_hb >= (int64_t)s->heartbeat_ms) {
      last_hb = now;
      slot_info_t cur;
      rc = heartbeat(rd, out_err);
      if (rc == SL_OK) rc = slot_info(rd->c, s, &cur, out_err);
      if (rc == SL_OK && cur.exists && strcmp(cur.wal_status, "lost") == 0)
        rc = slot_lost_error(s, out_err);
      if (rc != SL_OK) break;
    }
    sl_pg_copy_t cp;
    rc = sl__pg_repl_read(r, POLL_MS, &cp, out_err);
    if (rc == SL_EAGAIN) {
      rc = SL_OK;
      if ((ss.dirty || ss.b) && !batch_push(&ss)) break;
      continue;
    }
    if (rc != SL_OK) break;
    if (cp.kind != 'w') continue;
    last_data = mono_ms();
    sl_pgo_msg_t m;
    rc = sl__pgo_decode(&ss.dec, cp.data, cp.len, &m, out_err);
    if (rc != SL_OK) {
      if (out_err && *out_err) {
        char l[SL_PG_LSN_SIZE];
        sl_error_prefix(*out_err, "postgres-cdc: slot %s, message at %s",
                        s->slot, lsn_text(cp.wal_start, l));
        sl_error_set_fatal(*out_err, true);
      }
      break;
    }
    switch (m.type) {
    case SL_PGO_BEGIN:
      rc = on_begin(&ss, &m, out_err);
      break;
    case SL_PGO_RELATION:
      rc = on_relation(&ss, m.u.relation, out_err);
      break;
    case SL_PGO_INSERT:
    case SL_PGO_UPDATE:
    case SL_PGO_DELETE:
      rc = on_change(&ss, &m, out_err);
      if (rc == SL_OK && ss.b && ss.b->rows.n >= BATCH_ROWS &&
          !batch_push(&ss))
        goto out;
      break;
    case SL_PGO_TRUNCATE:
      rc = on_truncate(&ss, &m, out_err);
      break;
    case SL_PGO_COMMIT:
      ss.in_txn = false;
      /* A transaction sent again from before the position leaves it
       * alone (a partly emitted one may still be to come). */
      if (ss.skip_txn) break;
      if (m.u.commit.end_lsn > ss.pos.start) ss.pos.start = m.u.commit.end_lsn;
      ss.pos.commit = 0;
      ss.pos.skip = 0;
      ss.dirty = true;
      if (((ss.b && ss.b->rows.n >= BATCH_ROWS) ||
           mono_ms() - ss.last_push >= 50) &&
          !batch_push(&ss))
        goto out;
      break;
    case SL_PGO_MESSAGE:
      if (!m.u.message.is_transactional && !ss.in_txn &&
          ss.restart.commit == 0 &&
          strcmp(m.u.message.prefix, HB_PREFIX) == 0 &&
          m.u.message.lsn > ss.pos.start) {
        ss.pos.start = m.u.message.lsn;
        ss.pos.commit = 0;
        ss.pos.skip = 0;
        ss.dirty = true;
      }
      break;
    default:
      break;
    }
  }
out:
  if (rc != SL_OK && reader_stopping(rd) && out_err && *out_err &&
      !sl_error_is_fatal(*out_err)) {
    /* Closing: a failure caused by the close is not the job's. */
    sl_error_destroy(*out_err);
    *out_err = NULL;
    rc = SL_OK;
  }
  batch_free(ss.b);
  sl__pg_repl_destroy(r);
  sl__pgo_decoder_close(&ss.dec);
  ftabs_free(ss.f, s->n_tables);
  if (ss.has_bb) sl_row_builder_close(&ss.bb);
  if (ss.has_ba) sl_row_builder_close(&ss.ba);
  sl_free(ss.pure);
  sl_free(ss.rel_ok);
  return rc;
}

static void *io_main(void *arg) {
  preader_t *rd = arg;
  for (;;) {
    pthread_mutex_lock(&rd->lock);
    rchunk_t *next = NULL;
    while (!rd->stop) {
      for (uint32_t i = 0; i < rd->n_ch && next == NULL; i++)
        if (rd->ch[i]->state == RC_QUEUED) next = rd->ch[i];
      if (next || (rd->has_stream && !rd->stream_started)) break;
      pthread_cond_wait(&rd->cond, &rd->lock);
    }
    if (rd->stop) {
      pthread_mutex_unlock(&rd->lock);
      break;
    }
    if (next) next->state = RC_READING;
    else rd->stream_started = true;
    pthread_mutex_unlock(&rd->lock);
    sl_error_t *err = NULL;
    int rc = SL_OK;
    if (next) {
      rc = read_one_chunk(rd, next, &err);
      pthread_mutex_lock(&rd->lock);
      if (rc == SL_OK) next->state = RC_DONE;
      pthread_mutex_unlock(&rd->lock);
    } else {
      rc = stream_run(rd, &err);
    }
    if (rc != SL_OK) {
      if (reader_stopping(rd)) {
        sl_error_destroy(err);
        break;
      }
      if (err == NULL) sl_error_set(&err, rc, "%s", sl_strerror(rc));
      if (err && (rc == SL_ENOTSUP || rc == SL_ECORRUPT))
        sl_error_set_fatal(err, true);
      set_err(rd, err);
      break;
    }
    sl_error_destroy(err);
    if (rd->waker) sl_source_waker_wake(rd->waker);
  }
  reader_conn_drop(rd);
  return NULL;
}

/* ---- Reader: task side ---- */

static void reader_close(void *r) {
  preader_t *rd = r;
  if (rd == NULL) return;
  if (rd->has_thread) {
    pthread_mutex_lock(&rd->lock);
    rd->stop = true;
    if (rd->cancel) {
      char buf[256];
      (void)PQcancel(rd->cancel, buf, sizeof(buf));
    }
    pthread_cond_broadcast(&rd->cond);
    pthread_mutex_unlock(&rd->lock);
    pthread_join(rd->thread, NULL);
  }
  for (uint32_t i = 0; i < rd->n_ch; i++) {
    if (rd->ch[i]->has_rows) sl__pgc_rows_close(&rd->ch[i]->rows);
    one_chunk_free(rd->ch[i]->cl);
    chigh_clear(&rd->ch[i]->h);
    sl_free(rd->ch[i]);
  }
  sl_free(rd->ch);
  while (rd->q_head) {
    batch_t *b = rd->q_head;
    rd->q_head = b->next;
    batch_free(b);
  }
  sl_free(rd->filter_blob);
  sl_free(rd->pure);
  sl_error_destroy(rd->err);
  if (rd->has_b) sl_row_builder_close(&rd->b);
  pthread_mutex_destroy(&rd->lock);
  pthread_cond_destroy(&rd->cond);
  sl_free(rd);
}

/* Take the stream split's state (stream_state_make's layout). */
static int take_stream(preader_t *rd, const sl_split_init_t *si,
                       sl_error_t **out_err) {
  const psrc_t *s = rd->src;
  sl__rcur_t c = {si->position, si->position_len, 0, false};
  uint32_t fl = 0;
  const uint8_t *fp = NULL;
  bool is_w = sl__cur_u8(&c) == 'W';
  if (is_w) {
    rd->pos.start = sl__cur_u64(&c);
    rd->pos.commit = sl__cur_u64(&c);
    rd->pos.skip = sl__cur_u32(&c);
    fp = sl__cur_blob(&c, &fl);
  }
  if (!is_w || c.bad)
    return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: the stream "
                        "split's position is corrupt");
  if ((rd->pure = sl_calloc(s->n_tables + 1, 1)) == NULL ||
      (rd->filter_blob = sl_malloc(fl + 1)) == NULL)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (fl) memcpy(rd->filter_blob, fp, fl);
  rd->filter_len = fl;
  if (c.off < c.len) {
    uint32_t n = sl__cur_u32(&c);
    const uint8_t *p = sl__cur_take(&c, n);
    if (p == NULL || n != s->n_tables || c.off != c.len)
      return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: the stream "
                          "split's position is corrupt");
    for (uint32_t t = 0; t < n; t++) rd->pure[t] = p[t] != 0;
  }
  if (fl == 0) memset(rd->pure, 1, s->n_tables);
  ftab_t *f = NULL;
  int rc = filter_parse(s, rd->filter_blob, rd->filter_len, rd->pure, &f,
                        out_err);
  ftabs_free(f, s->n_tables);
  if (rc != SL_OK) return rc;
  rd->has_stream = true;
  rd->stream_split = si->split;
  return SL_OK;
}

static int add_splits(preader_t *rd, const sl_split_init_t *si, uint32_t n,
                      sl_error_t **out_err) {
  const psrc_t *s = rd->src;
  for (uint32_t i = 0; i < n; i++) {
    int rc;
    if (strcmp(si[i].id, WAL_ID) == 0) {
      if (rd->has_stream)
        return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: reader %u got "
                            "the stream split twice", rd->subtask);
      pthread_mutex_lock(&rd->lock);
      rc = take_stream(rd, &si[i], out_err);
      pthread_cond_broadcast(&rd->cond);
      pthread_mutex_unlock(&rd->lock);
      if (rc != SL_OK) return rc;
      continue;
    }
    uint32_t t, k;
    if (!parse_chunk_id(s, si[i].id, &t, &k))
      return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: split '%s' names "
                          "no captured table (the table list changed since "
                          "the checkpoint?)", si[i].id);
    /* The split's state: 'U' or 'F' + HIGH + snapshot, then the bounds
     * (the reader's own positions carry them; the enumerator hands out
     * 'U' alone and the bounds come from the plan below). */
    sl__rcur_t c = {si[i].position, si[i].position_len, 0, false};
    uint8_t st = sl__cur_u8(&c);
    if (c.bad || (st != 'U' && st != 'F'))
      return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: split '%s' has "
                          "a corrupt state", si[i].id);
    chigh_t h;
    memset(&h, 0, sizeof(h));
    if (st == 'F' && !chigh_get(&c, &h))
      return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: split '%s' has "
                          "a corrupt state", si[i].id);
    sl__pgc_chunks_t *cl = NULL;
    rc = SL_OK;
    if (c.off < c.len) rc = bounds_decode(&c, s->tables[t], k, &cl);
    else rc = SL_ECORRUPT;
    if (rc == SL_OK && c.off != c.len) rc = SL_ECORRUPT;
    if (rc != SL_OK) {
      chigh_clear(&h);
      one_chunk_free(cl);
      return sl_error_set(out_err, rc, "postgres-cdc: split '%s': %s",
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
      chigh_clear(&h);
      one_chunk_free(cl);
      return sl_error_set(out_err, SL_ENOMEM, "out of memory");
    }
    rd->ch[rd->n_ch++] = ch;
    ch->split = si[i].split;
    ch->id = si[i].id;
    ch->table = t;
    ch->chunk = k;
    ch->cl = cl;
    ch->state = st == 'F' ? RC_EMITTED : RC_QUEUED;
    ch->h = h;
    pthread_cond_broadcast(&rd->cond);
    pthread_mutex_unlock(&rd->lock);
  }
  rd->asked = false;
  return SL_OK;
}

static int reader_open(void *ctx, const sl_reader_init_t *init, void **out,
                       sl_error_t **out_err) {
  const psrc_t *s = ctx;
  preader_t *rd = sl_calloc(1, sizeof(*rd));
  if (rd == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  rd->src = s;
  rd->subtask = init->subtask;
  rd->waker = init->waker;
  atomic_init(&rd->flush_req, 0);
  pthread_mutex_init(&rd->lock, NULL);
  pthread_cond_init(&rd->cond, NULL);
  int rc = sl_row_builder_init(&rd->b, s->schema);
  if (rc == SL_OK) rd->has_b = true;
  else sl_error_set(out_err, rc, "out of memory");
  if (rc == SL_OK) rc = add_splits(rd, init->splits, init->n_splits, out_err);
  if (rc == SL_OK) {
    if (pthread_create(&rd->thread, NULL, io_main, rd) != 0)
      rc = sl_error_set(out_err, SL_EIO, "postgres-cdc: cannot start the "
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

/* A snapshot row of table t: its fields, then the metadata (_table; no
 * position or time). */
static int emit_snapshot_row(preader_t *rd, sl_source_out_t *out,
                             uint32_t table, const sl_row_t *img,
                             sl_error_t **out_err) {
  const psrc_t *s = rd->src;
  sl_row_builder_t *b = &rd->b;
  sl_row_builder_reset(b, SL_ROW_INSERT);
  int rc = SL_OK;
  for (uint32_t i = 0; rc == SL_OK && i < s->n_cols; i++) {
    sl_value_t v;
    sl_row_get_value(img, i, &v);
    rc = sl_row_builder_set_value(b, i, &v);
  }
  if (rc == SL_OK && s->f_table >= 0)
    rc = sl_row_builder_set_str(b, (uint32_t)s->f_table, s->qname[table],
                                (uint32_t)strlen(s->qname[table]));
  if (rc != SL_OK)
    return sl_error_set(out_err, rc, "postgres-cdc: cannot build a row: %s",
                        sl_strerror(rc));
  sl_row_t row;
  rc = sl_row_builder_finish(b, &row, out_err);
  if (rc != SL_OK) return rc;
  (void)sl_source_emit(out, &row);
  return SL_OK;
}

static int send_report(preader_t *rd, sl_source_out_t *out, rchunk_t *ch) {
  sl_bytes_t e;
  sl_bytes_init(&e);
  int rc = sl__put_u8(&e, 'F');
  if (rc == SL_OK) rc = sl__put_str(&e, ch->id);
  if (rc == SL_OK) rc = chigh_put(&e, &ch->h);
  if (rc == SL_OK) rc = sl_source_send_event(out, e.data, e.len);
  sl_bytes_close(&e);
  if (rc == SL_OK) ch->reported = true;
  (void)rd;
  return rc;
}

static int reader_poll(void *r, sl_source_out_t *out, sl_error_t **out_err) {
  preader_t *rd = r;
  const psrc_t *s = rd->src;
  rd->out = out;
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
    for (uint32_t i = 0; rc == SL_OK && i < done->rows.n; i++) {
      sl_row_t row;
      sl_row_view(&row, done->rows.schema, done->rows.data[i],
                  done->rows.len[i]);
      rc = emit_snapshot_row(rd, out, done->table, &row, out_err);
    }
    if (rc != SL_OK) return rc;
    sl__pgc_rows_close(&done->rows);
    done->has_rows = false;
    pthread_mutex_lock(&rd->lock);
    done->state = RC_EMITTED;
    pthread_mutex_unlock(&rd->lock);
    rc = send_report(rd, out, done);
    if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
    rc = SL_INJECT("pgcdc.snapshot.after_report");
    if (rc != SL_OK)
      return sl_error_set(out_err, rc, "injected failure at "
                          "pgcdc.snapshot.after_report (chunk %s)", done->id);
    return SL_POLL_MORE;
  }
  if (b) {
    sl_source_set_split(out, rd->stream_split);
    for (uint32_t i = 0; i < b->rows.n; i++) {
      sl_row_t row;
      sl_row_view(&row, s->schema, b->rows.data[i], b->rows.len[i]);
      (void)sl_source_emit(out, &row);
    }
    rd->pos = b->pos;
    memcpy(rd->pure, b->pure, s->n_tables);
    bool mid = b->pos.commit != 0 && b->rows.n > 0;
    batch_free(b);
    if (mid) {
      int rc = SL_INJECT("pgcdc.stream.after_batch_in_txn");
      if (rc != SL_OK)
        return sl_error_set(out_err, rc, "injected failure at "
                            "pgcdc.stream.after_batch_in_txn");
    }
    return SL_POLL_MORE;
  }
  if (!busy && !rd->has_stream && !rd->asked && !rd->is_all_assigned) {
    rd->asked = true;
    sl_source_request_split(out);
  }
  if (rd->is_all_assigned && !held && !rd->has_stream) return SL_POLL_END;
  return SL_POLL_WAIT;
}

/* The enumerator's events: 'A' + split id (acknowledged), 'E' (snapshot
 * mode: every chunk is assigned and finished), 'L' + u64 (the flush LSN). */
static int reader_event(void *r, const uint8_t *ev, size_t len,
                        sl_error_t **out_err) {
  preader_t *rd = r;
  if (len == 1 && ev[0] == 'E') {
    rd->is_all_assigned = true;
    return SL_OK;
  }
  if (len == 9 && ev[0] == 'L') {
    uint64_t f = sl__get_u64le(ev + 1);
    if (f > atomic_load(&rd->flush_req)) atomic_store(&rd->flush_req, f);
    return SL_OK;
  }
  sl__rcur_t c = {ev, len, 0, false};
  char id[4200];
  if (sl__cur_u8(&c) != 'A' || !sl__cur_str(&c, id, sizeof(id)) || c.off != len)
    return sl_error_set(out_err, SL_ECORRUPT, "postgres-cdc: a corrupt event "
                        "from the enumerator");
  pthread_mutex_lock(&rd->lock);
  for (uint32_t i = 0; i < rd->n_ch; i++)
    if (rd->ch[i]->state == RC_EMITTED && strcmp(rd->ch[i]->id, id) == 0)
      rd->ch[i]->state = RC_ACKING;
  pthread_mutex_unlock(&rd->lock);
  if (rd->waker) sl_source_waker_wake(rd->waker);
  return SL_OK;
}

static int reader_position(void *r, uint32_t split, sl_bytes_t *out) {
  preader_t *rd = r;
  const psrc_t *s = rd->src;
  if (rd->has_stream && split == rd->stream_split) {
    int rc = sl__put_u8(out, 'W');
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, rd->pos.start);
    if (rc == SL_OK) rc = sl_bytes_append_u64le(out, rd->pos.commit);
    if (rc == SL_OK) rc = sl__put_u32(out, rd->pos.skip);
    bool all_pure = true;
    for (uint32_t t = 0; t < s->n_tables; t++) all_pure &= rd->pure[t] != 0;
    if (rc == SL_OK)
      rc = all_pure ? sl__put_u32(out, 0)
                    : sl__put_blob(out, rd->filter_blob, rd->filter_len);
    if (rc == SL_OK && !all_pure) rc = sl__put_blob(out, rd->pure, s->n_tables);
    /* The enumerator takes it as this checkpoint's position when the
     * checkpoint completes (the flush; DESIGN NOTES). */
    if (rc == SL_OK && rd->out) {
      uint8_t ev[9];
      ev[0] = 'P';
      sl__put_u64le(ev + 1, rd->pos.start);
      rc = sl_source_send_event(rd->out, ev, sizeof(ev));
    }
    return rc;
  }
  for (uint32_t i = 0; i < rd->n_ch; i++) {
    rchunk_t *ch = rd->ch[i];
    if (ch->split != split) continue;
    pthread_mutex_lock(&rd->lock);
    bool fin = ch->state >= RC_EMITTED;
    pthread_mutex_unlock(&rd->lock);
    int rc = sl__put_u8(out, fin ? 'F' : 'U');
    if (rc == SL_OK && fin) rc = chigh_put(out, &ch->h);
    if (rc == SL_OK) rc = bounds_encode(ch->cl, &ch->cl->chunks[0], out);
    return rc;
  }
  return SL_EINVAL;
}

/* ------------------------------------------------------------------ */
/* The source */

static int src_plan(void *ctx, uint32_t parallelism, sl_split_list_t *splits,
                    sl_error_t **out_err) {
  (void)ctx, (void)parallelism, (void)splits;
  return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: the source has an "
                      "enumerator; plan() is not used");
}

static void src_destroy(void *ctx) {
  psrc_t *s = ctx;
  if (s == NULL) return;
  if (s->conninfo) {
    /* It may hold a password. */
    memset(s->conninfo, 0, strlen(s->conninfo));
    sl_free(s->conninfo);
  }
  for (uint32_t i = 0; i < s->n_patterns; i++) sl_free(s->patterns[i]);
  sl_free(s->patterns);
  sl_free(s->slot);
  sl_free(s->publication);
  for (uint32_t i = 0; i < s->n_tables; i++) {
    sl__pgc_table_destroy(s->tables[i]);
    if (s->qname) sl_free(s->qname[i]);
  }
  sl_free(s->qname);
  sl_free(s->tables);
  if (s->schema) sl_schema_unref(s->schema);
  sl_free(s);
}

static const sl_source_vt_t pgc_vt = {
    .type_name = "postgres-cdc",
    .plan = src_plan,
    .reader_open = reader_open,
    .reader_poll = reader_poll,
    .reader_position = reader_position,
    .reader_close = reader_close,
    .destroy = src_destroy,
    .enumerator = &pgc_enum_vt,
    .reader_add_splits = reader_add_splits,
    .reader_handle_event = reader_event,
};

void sl_postgres_cdc_config_init(sl_postgres_cdc_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
}

static int build_schema(psrc_t *s, const sl_postgres_cdc_config_t *cfg,
                        sl_error_t **out_err) {
  const sl_schema_t *ts = s->tables[0]->schema_;
  s->n_cols = sl_schema_n_fields(ts);
  uint32_t n = s->n_cols;
  sl_field_t *f = sl_calloc(n + 4, sizeof(*f));
  if (f == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  static const char *const meta[] = {"_table", "_position", "_op_ts"};
  for (uint32_t i = 0; i < n; i++) {
    const sl_field_t *x = sl_schema_field(ts, i);
    for (uint32_t k = 0; k < 3; k++)
      if (strcmp(x->name, meta[k]) == 0) {
        sl_free(f);
        return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: column \"%s\" "
                            "of %s has the name of a metadata field",
                            x->name, s->qname[0]);
      }
    f[i] = *x;
  }
  s->f_table = s->f_pos = s->f_opts = -1;
  sl_type_t str = {SL_TYPE_STRING, 0, 0, true};
  sl_type_t tst = {SL_TYPE_TIMESTAMP, 0, 0, true};
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

static bool name_ok(const char *n) {
  if (n == NULL || n[0] == 0 || strlen(n) > 63) return false;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* conninfo with the password and connect_timeout (whole seconds, at least
 * 1) added: libpq takes the last value of a key. */
static char *conninfo_with(const char *conninfo, const char *password,
                           uint32_t connect_timeout_ms) {
  size_t n = strlen(conninfo) + 2 * (password ? strlen(password) : 0) + 64;
  char *out = sl_malloc(n);
  if (out == NULL) return NULL;
  size_t k = (size_t)snprintf(out, n, "%s connect_timeout=%u", conninfo,
                              (connect_timeout_ms + 999) / 1000);
  if (password == NULL) return out;
  k += (size_t)snprintf(out + k, n - k, " password='");
  for (const char *p = password; *p; p++) {
    if (*p == '\'' || *p == '\\') out[k++] = '\\';
    out[k++] = *p;
  }
  out[k++] = '\'';
  out[k] = 0;
  return out;
}

/* Sharded tables into one output: the same columns, types and primary
 * key. */
static int tables_agree(const psrc_t *s, sl_error_t **out_err) {
  const sl__pgc_table_t *a = s->tables[0];
  for (uint32_t i = 1; i < s->n_tables; i++) {
    const sl__pgc_table_t *b = s->tables[i];
    const char *why = NULL;
    if (!sl_schema_equal(a->schema_, b->schema_))
      why = "columns (names, types or nullability)";
    else if (a->n_pk != b->n_pk ||
             memcmp(a->pk, b->pk, a->n_pk * sizeof(uint32_t)) != 0)
      why = "primary key";
    if (why)
      return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %s and %s go "
                          "into one output but differ in their %s; capture "
                          "tables of other shapes with another source (or "
                          "routes)", s->qname[0], s->qname[i], why);
  }
  return SL_OK;
}

int sl_postgres_cdc_source_create(const sl_postgres_cdc_config_t *cfg,
                                  const sl_source_vt_t **out_vt,
                                  void **out_ctx, sl_schema_t **out_schema,
                                  sl_error_t **out_err) {
  if (cfg == NULL || cfg->n_tables == 0 || cfg->tables == NULL)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: no tables to "
                        "capture (tables: [schema.table, ...])");
  if (cfg->conninfo == NULL)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: conninfo is "
                        "required");
  if (cfg->start > SL_POSTGRES_CDC_START_LATEST)
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: unknown start "
                        "mode");
  if (cfg->start != SL_POSTGRES_CDC_START_SNAPSHOT && !name_ok(cfg->slot))
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: slot '%s' is not "
                        "a replication slot name sluice accepts: 1 to 63 of "
                        "a-z, 0-9 and _ (one slot per job and source)",
                        cfg->slot ? cfg->slot : "");
  if (cfg->publication && !name_ok(cfg->publication))
    return sl_error_set(out_err, SL_EINVAL, "postgres-cdc: publication '%s' "
                        "is not a name sluice accepts: 1 to 63 of a-z, 0-9 "
                        "and _", cfg->publication);
  psrc_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  bool ok = true;
  s->conninfo = conninfo_with(cfg->conninfo, cfg->password,
                              cfg->connect_timeout_ms ? cfg->connect_timeout_ms
                                                      : 10000);
  if (s->conninfo == NULL) ok = false;
  s->slot = dup_or_null(cfg->slot ? cfg->slot : "sluice_snapshot", &ok);
  s->publication = dup_or_null(cfg->publication ? cfg->publication : s->slot,
                               &ok);
  s->chunk_rows = cfg->chunk_rows ? cfg->chunk_rows : 8192;
  s->start = cfg->start;
  s->heartbeat_ms = cfg->heartbeat_ms ? cfg->heartbeat_ms : 10000;
  s->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms
                                                  : 10000;
  s->retain = cfg->retain ? cfg->retain : 3;
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
  PGconn *c = NULL;
  int rc = sl__pgc_connect(s->conninfo, s->connect_timeout_ms, &c, s->server,
                           out_err);
  if (rc == SL_OK)
    rc = sl__pgc_check_server(c, s->server,
                              s->start != SL_POSTGRES_CDC_START_SNAPSHOT,
                              out_err);
  sl__pgc_table_name_t *names = NULL;
  uint32_t n_names = 0;
  if (rc == SL_OK)
    rc = sl__pgc_resolve_tables(c, s->server,
                                (const char *const *)s->patterns,
                                s->n_patterns, &names, &n_names, out_err);
  if (rc == SL_OK && n_names > 0xffff)
    rc = sl_error_set(out_err, SL_EINVAL, "postgres-cdc: %u tables; one "
                      "source captures at most 65535", n_names);
  if (rc == SL_OK &&
      ((s->tables = sl_calloc(n_names + 1, sizeof(sl__pgc_table_t *))) ==
           NULL ||
       (s->qname = sl_calloc(n_names + 1, sizeof(char *))) == NULL))
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
  for (uint32_t i = 0; rc == SL_OK && i < n_names; i++) {
    rc = sl__pgc_table_describe(c, s->server, names[i].schema, names[i].table,
                                &s->tables[i], out_err);
    if (rc != SL_OK) break;
    s->n_tables++;
    size_t n = strlen(names[i].schema) + strlen(names[i].table) + 2;
    if ((s->qname[i] = sl_malloc(n)) == NULL) {
      rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
      break;
    }
    snprintf(s->qname[i], n, "%s.%s", names[i].schema, names[i].table);
    rc = sl__pgc_check_table(c, s->server, s->tables[i],
                             s->start != SL_POSTGRES_CDC_START_SNAPSHOT,
                             out_err);
  }
  sl__pgc_table_names_free(names, n_names);
  if (c) PQfinish(c);
  if (rc == SL_OK) rc = tables_agree(s, out_err);
  if (rc == SL_OK) rc = build_schema(s, cfg, out_err);
  if (rc != SL_OK) {
    src_destroy(s);
    return rc;
  }
  *out_vt = &pgc_vt;
  *out_ctx = s;
  *out_schema = sl_schema_ref(s->schema);
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Fuzzing (tests/fuzz/fuzz_pgcdc_source_state.c) and its seeds.  The
 * decoders run against a source of one table public.t (id bigint primary
 * key, c bigint, v text), as a checkpoint of it would hold. */

static psrc_t *fuzz_src(void) {
  psrc_t *s = sl_calloc(1, sizeof(*s));
  sl__pgc_table_t *t = sl_calloc(1, sizeof(*t));
  if (s == NULL || t == NULL) {
    sl_free(s);
    sl_free(t);
    return NULL;
  }
  s->tables = sl_calloc(1, sizeof(*s->tables));
  s->qname = sl_calloc(1, sizeof(*s->qname));
  if (s->tables) s->tables[0] = t;
  else sl__pgc_table_destroy(t);
  s->n_tables = s->tables ? 1 : 0;
  snprintf(s->server, sizeof(s->server), "fuzz:0");
  s->retain = 3;
  s->slot = sl_strdup("sl_fuzz");
  s->publication = sl_strdup("sl_fuzz");
  t->schema = sl_strdup("public");
  t->name = sl_strdup("t");
  t->pk = sl_calloc(1, sizeof(uint32_t));
  t->key_kind = sl_calloc(1, 1);
  sl_field_t f[3] = {{"id", {SL_TYPE_INT64, 0, 0, false}},
                     {"c", {SL_TYPE_INT64, 0, 0, true}},
                     {"v", {SL_TYPE_STRING, 0, 0, true}}};
  bool ok = s->tables && s->qname && s->slot && s->publication && t->schema &&
            t->name && t->pk && t->key_kind &&
            (s->qname[0] = sl_strdup("public.t")) != NULL &&
            sl_schema_create(f, 3, &t->schema_, NULL) == SL_OK &&
            sl_schema_create(f, 3, &s->schema, NULL) == SL_OK;
  if (!ok) {
    src_destroy(s);
    return NULL;
  }
  t->n_cols = 3;
  s->n_cols = 3;
  s->f_table = s->f_pos = s->f_opts = -1;
  t->n_pk = 1;
  t->key_kind[0] = SL_PGC_KEY_INT;
  return s;
}

static void fuzz_reader_init(preader_t *rd, const psrc_t *s) {
  memset(rd, 0, sizeof(*rd));
  rd->src = s;
  atomic_init(&rd->flush_req, 0);
  pthread_mutex_init(&rd->lock, NULL);
  pthread_cond_init(&rd->cond, NULL);
}

/* A split state through a reader and back: the position it writes must
 * read back to itself. */
static int fuzz_split(const psrc_t *s, const char *id, const uint8_t *p,
                      size_t n) {
  preader_t *rd = sl_calloc(1, sizeof(*rd));
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
      preader_t *r2 = sl_calloc(1, sizeof(*r2));
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

int sl__postgres_cdc_fuzz_one(const uint8_t *p, size_t n) {
  if (n == 0) return SL_OK;
  psrc_t *s = fuzz_src();
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
      penum_t *e = en;
      sl_bytes_t a, b;
      sl_bytes_init(&a);
      sl_bytes_init(&b);
      if (enum_snapshot(e, e->last_snap, &a) != SL_OK) abort();
      init.state = a.data;
      init.state_len = a.len;
      void *en2 = NULL;
      if (enum_create(s, &init, &en2, &err) != SL_OK) abort();
      if (enum_snapshot(en2, ((penum_t *)en2)->last_snap, &b) != SL_OK)
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
    rc = fuzz_split(s, "public.t#1", p + 1, n - 1);
    break;
  case 2:
    rc = fuzz_split(s, WAL_ID, p + 1, n - 1);
    break;
  default: {
    sl__rcur_t c = {p + 1, n - 1, 0, false};
    char id[4200];
    chigh_t h;
    memset(&h, 0, sizeof(h));
    rc = sl__cur_u8(&c) == 'F' && sl__cur_str(&c, id, sizeof(id)) &&
                 chigh_get(&c, &h) && c.off == c.len
             ? SL_OK
             : SL_ECORRUPT;
    chigh_clear(&h);
    break;
  }
  }
  sl_error_destroy(err);
  src_destroy(s);
  return rc;
}

/* Seeds: valid states of each kind, written through put. */
int sl__postgres_cdc_fuzz_seeds(void (*put)(const char *name, const void *p,
                                            size_t n)) {
  psrc_t *s = fuzz_src();
  if (s == NULL) return SL_ENOMEM;
  /* Chunk 1 of (.., 10) [10, 20) [20, ..). */
  sl__pgc_chunks_t *cl = NULL;
  static const uint8_t one[] = {1, 10, 0, 0, 0, 0, 0, 0, 0,
                                1, 20, 0, 0, 0, 0, 0, 0, 0};
  sl__rcur_t c = {one, sizeof(one), 0, false};
  int rc = bounds_decode(&c, s->tables[0], 1, &cl);
  sl__pgc_snap_t snap;
  memset(&snap, 0, sizeof(snap));
  if (rc == SL_OK) rc = sl__pgc_snap_parse("740:745:740,742", &snap);
  chigh_t h;
  memset(&h, 0, sizeof(h));
  h.high = 0x1A2B3C4;
  sl_bytes_t sb, b;
  sl_bytes_init(&sb);
  sl_bytes_init(&b);
  if (rc == SL_OK) rc = sl__pgc_snap_encode(&snap, &sb);
  if (rc == SL_OK) {
    h.snap = sb.data;
    h.snap_len = (uint32_t)sb.len;
    sl__put_u8(&b, 1);
    sl__put_u8(&b, 'U');
    bounds_encode(cl, &cl->chunks[0], &b);
    put("chunk-unfinished", b.data, b.len);
    sl_bytes_clear(&b);
    sl__put_u8(&b, 1);
    sl__put_u8(&b, 'F');
    chigh_put(&b, &h);
    bounds_encode(cl, &cl->chunks[0], &b);
    put("chunk-finished", b.data, b.len);
    sl_bytes_clear(&b);
    sl__put_u8(&b, 3);
    sl__put_u8(&b, 'F');
    sl__put_str(&b, "public.t#1");
    chigh_put(&b, &h);
    put("report", b.data, b.len);
    sl_bytes_clear(&b);
  }
  /* The enumerator: planned, one chunk of each status; then all
   * finished with the stream split made. */
  penum_t *e = NULL;
  sl_enum_init_t init = {0};
  init.parallelism = 2;
  if (rc == SL_OK) rc = enum_create(s, &init, (void **)&e, NULL);
  if (rc == SL_OK) {
    e->t = sl_calloc(2, sizeof(etab_t));
    sl__pgc_chunks_t *full = e->t ? sl_calloc(1, sizeof(*full)) : NULL;
    if (e->t) e->t[0].cl = full;
    if (full) {
      full->n_key = 1;
      full->key_kind = sl_calloc(1, 1);
      full->chunks = sl_calloc(3, sizeof(sl__pgc_chunk_t));
      e->t[0].ch = sl_calloc(4, sizeof(ech_t));
    }
    if (full == NULL || !full->key_kind || !full->chunks || !e->t[0].ch) {
      rc = SL_ENOMEM;
    } else {
      full->key_kind[0] = SL_PGC_KEY_INT;
      full->n = 3;
      int64_t bound[2] = {10, 20};
      for (uint32_t i = 0; i < 3 && rc == SL_OK; i++) {
        full->chunks[i].id = i;
        if (i > 0 &&
            (full->chunks[i].low = sl_calloc(1, sizeof(sl__pgc_kv_t))))
          full->chunks[i].low->i = bound[i - 1];
        if (i < 2 &&
            (full->chunks[i].high = sl_calloc(1, sizeof(sl__pgc_kv_t))))
          full->chunks[i].high->i = bound[i];
        if ((i > 0 && !full->chunks[i].low) ||
            (i < 2 && !full->chunks[i].high))
          rc = SL_ENOMEM;
      }
    }
    if (rc == SL_OK) {
      e->planned = true;
      e->stream_start = 0x1A00000;
      e->t[0].ch[1].status = CH_ASSIGNED;
      e->t[0].ch[1].owner = 1;
      for (uint32_t i = 0; i < 3 && rc == SL_OK; i++) {
        if (i == 1) continue;
        ech_t *ch = &e->t[0].ch[i];
        ch->status = CH_FINISHED;
        ch->fin_epoch = 3;
        ch->h.high = h.high;
        if ((ch->h.snap = sl_malloc(sb.len)) == NULL) rc = SL_ENOMEM;
        else memcpy(ch->h.snap, sb.data, sb.len);
        ch->h.snap_len = (uint32_t)sb.len;
      }
      e->done[0].epoch = 2;
      e->done[0].lsn = 0x1A00000;
      e->n_done = 1;
    }
    if (rc == SL_OK) {
      sl__put_u8(&b, 0);
      rc = enum_snapshot(e, 4, &b);
      put("enum-planned", b.data, b.len);
      sl_bytes_clear(&b);
      ech_t *ch = &e->t[0].ch[1];
      ch->status = CH_FINISHED;
      ch->h.high = h.high + 8;
      if ((ch->h.snap = sl_malloc(sb.len)) == NULL) rc = SL_ENOMEM;
      else memcpy(ch->h.snap, sb.data, sb.len);
      ch->h.snap_len = (uint32_t)sb.len;
      if (rc == SL_OK) rc = stream_state_make(e, true, NULL);
      if (rc == SL_OK) {
        sl__put_u8(&b, 0);
        rc = enum_snapshot(e, 5, &b);
        put("enum-gate", b.data, b.len);
        sl_bytes_clear(&b);
        sl__put_u8(&b, 2);
        sl_bytes_append(&b, e->stream_state, e->stream_len);
        put("stream-split", b.data, b.len);
        sl_bytes_clear(&b);
      }
    }
    enum_close(e);
  }
  one_chunk_free(cl);
  sl__pgc_snap_free(&snap);
  sl_bytes_close(&sb);
  sl_bytes_close(&b);
  src_destroy(s);
  return rc;
}
