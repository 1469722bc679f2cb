/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decoder of PostgreSQL's logical replication stream (protocol
 * references: "Streaming Replication Protocol" and "Logical Replication
 * Message Formats", PostgreSQL 15): the CopyData framing, the pgoutput
 * messages of protocol version 1 with a cache of the Relation messages,
 * and the text-format column values converted to sluice values.  Every
 * read goes through a reader that checks the bytes are there first, so a
 * malformed message is an error that names the message type, the offset
 * and the field, never a read out of bounds.  See
 * src/connectors/README.md.
 */
#include <stdio.h>
#include <string.h>

#include "connectors/postgres/pgoutput_decode.h"

/* ------------------------------------------------------------------ */
/* A bounds-checked big-endian reader                                   */

typedef struct rd_s {
  const uint8_t *p;
  size_t len;
  size_t off;
  const char *what; /* "pgoutput Insert message", "XLogData" */
  sl_error_t **err;
} rd_t;

static int truncated(rd_t *r, const char *field, size_t need) {
  return sl_error_set(r->err, SL_ECORRUPT,
                      "%s: truncated at byte %zu (%s): %zu bytes needed, "
                      "%zu left (message of %zu bytes)",
                      r->what, r->off, field, need, r->len - r->off, r->len);
}

static int rd_need(rd_t *r, size_t n, const char *field) {
  if (r->len - r->off < n) return truncated(r, field, n);
  return SL_OK;
}

static int rd_u8(rd_t *r, const char *field, uint8_t *out) {
  int rc = rd_need(r, 1, field);
  if (rc != SL_OK) return rc;
  *out = r->p[r->off++];
  return SL_OK;
}

static int rd_u16(rd_t *r, const char *field, uint16_t *out) {
  int rc = rd_need(r, 2, field);
  if (rc != SL_OK) return rc;
  const uint8_t *q = r->p + r->off;
  *out = (uint16_t)((q[0] << 8) | q[1]);
  r->off += 2;
  return SL_OK;
}

static int rd_u32(rd_t *r, const char *field, uint32_t *out) {
  int rc = rd_need(r, 4, field);
  if (rc != SL_OK) return rc;
  const uint8_t *q = r->p + r->off;
  *out = ((uint32_t)q[0] << 24) | ((uint32_t)q[1] << 16) |
         ((uint32_t)q[2] << 8) | q[3];
  r->off += 4;
  return SL_OK;
}

static int rd_u64(rd_t *r, const char *field, uint64_t *out) {
  uint32_t hi = 0, lo = 0;
  int rc = rd_need(r, 8, field);
  if (rc != SL_OK) return rc;
  (void)rd_u32(r, field, &hi);
  (void)rd_u32(r, field, &lo);
  *out = ((uint64_t)hi << 32) | lo;
  return SL_OK;
}

/* A NUL-terminated string inside the message; borrowed. */
static int rd_str(rd_t *r, const char *field, const char **out) {
  const uint8_t *q = r->p + r->off;
  const uint8_t *nul = r->len > r->off ? memchr(q, 0, r->len - r->off) : NULL;
  if (nul == NULL)
    return sl_error_set(r->err, SL_ECORRUPT,
                        "%s: truncated at byte %zu (%s): string without its "
                        "terminating NUL (message of %zu bytes)",
                        r->what, r->off, field, r->len);
  *out = (const char *)q;
  r->off += (size_t)(nul - q) + 1;
  return SL_OK;
}

static int rd_end(rd_t *r) {
  if (r->off == r->len) return SL_OK;
  return sl_error_set(r->err, SL_ECORRUPT,
                      "%s: %zu unexpected bytes after the message's last "
                      "field at byte %zu",
                      r->what, r->len - r->off, r->off);
}

static void put_u64be(uint8_t *q, uint64_t v) {
  for (int i = 7; i >= 0; i--) {
    q[i] = (uint8_t)v;
    v >>= 8;
  }
}

/* ------------------------------------------------------------------ */
/* CopyData framing                                                     */

int sl__pg_copy_decode(const uint8_t *p, size_t len, sl_pg_copy_t *out,
                       sl_error_t **out_err) {
  rd_t r = {p, len, 0, "replication CopyData", out_err};
  uint8_t kind = 0;
  int rc = rd_u8(&r, "kind", &kind);
  if (rc != SL_OK) return rc;
  sl_pg_copy_t c;
  memset(&c, 0, sizeof(c));
  c.kind = kind;
  uint64_t t = 0;
  if (kind == 'w') {
    r.what = "replication XLogData ('w')";
    if ((rc = rd_u64(&r, "WAL start", &c.wal_start)) != SL_OK ||
        (rc = rd_u64(&r, "WAL end", &c.wal_end)) != SL_OK ||
        (rc = rd_u64(&r, "send time", &t)) != SL_OK)
      return rc;
    c.send_time = (int64_t)t;
    c.data = p + r.off;
    c.len = len - r.off;
  } else if (kind == 'k') {
    r.what = "replication primary keepalive ('k')";
    uint8_t reply = 0;
    if ((rc = rd_u64(&r, "WAL end", &c.wal_end)) != SL_OK ||
        (rc = rd_u64(&r, "send time", &t)) != SL_OK ||
        (rc = rd_u8(&r, "reply requested", &reply)) != SL_OK ||
        (rc = rd_end(&r)) != SL_OK)
      return rc;
    if (reply > 1)
      return sl_error_set(out_err, SL_ECORRUPT,
                          "%s: reply-requested flag %u at byte 17 is neither "
                          "0 nor 1",
                          r.what, reply);
    c.send_time = (int64_t)t;
    c.reply_requested = reply == 1;
  } else {
    return sl_error_set(out_err, SL_ECORRUPT,
                        "replication CopyData: unknown kind 0x%02x at byte "
                        "0 (expected 'w' XLogData or 'k' keepalive)",
                        kind);
  }
  *out = c;
  return SL_OK;
}

void sl__pg_status_encode(uint8_t out[SL_PG_STATUS_SIZE], uint64_t write_lsn,
                          uint64_t flush_lsn, uint64_t apply_lsn,
                          int64_t now_pg_us, bool reply_requested) {
  out[0] = 'r';
  put_u64be(out + 1, write_lsn);
  put_u64be(out + 9, flush_lsn);
  put_u64be(out + 17, apply_lsn);
  put_u64be(out + 25, (uint64_t)now_pg_us);
  out[33] = reply_requested ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* The relation cache                                                   */

static void rel_free(sl_pgo_relation_t *rel) {
  if (rel == NULL) return;
  for (uint16_t i = 0; rel->cols && i < rel->n_cols; i++)
    sl_free(rel->cols[i].name);
  sl_free(rel->cols);
  sl_free(rel->nspname);
  sl_free(rel->relname);
  sl_free(rel);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = sl_malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

static uint32_t oid_slot(uint32_t oid, uint32_t cap) {
  return (oid * UINT32_C(2654435761)) & (cap - 1);
}

void sl__pgo_decoder_init(sl_pgo_decoder_t *d) { memset(d, 0, sizeof(*d)); }

void sl__pgo_decoder_close(sl_pgo_decoder_t *d) {
  for (uint32_t i = 0; i < d->rels_cap; i++) rel_free(d->rels[i]);
  sl_free(d->rels);
  sl_free(d->datums);
  sl_free(d->oids);
  memset(d, 0, sizeof(*d));
}

const sl_pgo_relation_t *sl__pgo_relation(const sl_pgo_decoder_t *d,
                                          uint32_t oid) {
  if (d->rels_cap == 0) return NULL;
  for (uint32_t i = oid_slot(oid, d->rels_cap);; i = (i + 1) & (d->rels_cap - 1)) {
    if (d->rels[i] == NULL) return NULL;
    if (d->rels[i]->oid == oid) return d->rels[i];
  }
}

/* Put rel in the cache, replacing (and freeing) an older one. */
static int rel_put(sl_pgo_decoder_t *d, sl_pgo_relation_t *rel) {
  if ((d->n_rels + 1) * 2 > d->rels_cap) {
    uint32_t cap = d->rels_cap ? d->rels_cap * 2 : 16;
    sl_pgo_relation_t **t = sl_calloc(cap, sizeof(*t));
    if (t == NULL) return SL_ENOMEM;
    for (uint32_t i = 0; i < d->rels_cap; i++) {
      sl_pgo_relation_t *x = d->rels[i];
      if (x == NULL) continue;
      uint32_t j = oid_slot(x->oid, cap);
      while (t[j]) j = (j + 1) & (cap - 1);
      t[j] = x;
    }
    sl_free(d->rels);
    d->rels = t;
    d->rels_cap = cap;
  }
  uint32_t i = oid_slot(rel->oid, d->rels_cap);
  while (d->rels[i] && d->rels[i]->oid != rel->oid)
    i = (i + 1) & (d->rels_cap - 1);
  if (d->rels[i]) rel_free(d->rels[i]);
  else d->n_rels++;
  d->rels[i] = rel;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Messages                                                             */

const char *sl__pgo_type_name(uint8_t type) {
  switch (type) {
  case 'B': return "Begin";
  case 'C': return "Commit";
  case 'O': return "Origin";
  case 'R': return "Relation";
  case 'Y': return "Type";
  case 'I': return "Insert";
  case 'U': return "Update";
  case 'D': return "Delete";
  case 'T': return "Truncate";
  case 'M': return "Message";
  case 'S': return "Stream Start";
  case 'E': return "Stream Stop";
  case 'c': return "Stream Commit";
  case 'A': return "Stream Abort";
  case 'b': return "Begin Prepare";
  case 'P': return "Prepare";
  case 'K': return "Commit Prepared";
  case 'r': return "Rollback Prepared";
  case 'p': return "Stream Prepare";
  default: return "unknown";
  }
}

static int oom(sl_error_t **out_err) {
  return sl_error_set(out_err, SL_ENOMEM, "pgoutput: out of memory");
}

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return SL_OK;
  uint64_t n = *cap ? *cap : 16;
  while (n < need) n *= 2; /* need < 2^32: ends by 2^32 */
  if (n > UINT32_MAX) n = need;
  void *t = sl_realloc(*arr, (size_t)n * elem);
  if (t == NULL) return SL_ENOMEM;
  *arr = t;
  *cap = (uint32_t)n;
  return SL_OK;
}

/* TupleData into d->datums[at..at+n): n must be the relation's count. */
static int rd_tuple(rd_t *r, sl_pgo_decoder_t *d, const sl_pgo_relation_t *rel,
                    uint32_t at, sl_pgo_tuple_t *out) {
  size_t start = r->off;
  uint16_t n = 0;
  int rc = rd_u16(r, "tuple column count", &n);
  if (rc != SL_OK) return rc;
  if (n != rel->n_cols)
    return sl_error_set(r->err, SL_ECORRUPT,
                        "%s: tuple at byte %zu has %u columns, relation "
                        "%s.%s (oid %u) has %u",
                        r->what, start, n, rel->nspname, rel->relname,
                        rel->oid, rel->n_cols);
  if (grow((void **)&d->datums, &d->datums_cap, at + n, sizeof(*d->datums)))
    return oom(r->err);
  for (uint16_t i = 0; i < n; i++) {
    sl_pgo_datum_t *c = &d->datums[at + i];
    size_t kind_off = r->off;
    if ((rc = rd_u8(r, "tuple column kind", &c->kind)) != SL_OK) return rc;
    c->len = 0;
    c->data = NULL;
    switch (c->kind) {
    case 'n':
    case 'u':
      break;
    case 't':
    case 'b':
      if ((rc = rd_u32(r, "tuple column length", &c->len)) != SL_OK)
        return rc;
      if ((rc = rd_need(r, c->len, "tuple column value")) != SL_OK)
        return rc;
      c->data = r->p + r->off;
      r->off += c->len;
      break;
    default:
      return sl_error_set(r->err, SL_ECORRUPT,
                          "%s: column %u of the tuple has kind 0x%02x at "
                          "byte %zu (expected 'n', 'u', 't' or 'b')",
                          r->what, i, c->kind, kind_off);
    }
  }
  out->n_cols = n;
  out->cols = d->datums + at;
  return SL_OK;
}

static int rd_rel_ref(rd_t *r, sl_pgo_decoder_t *d,
                      const sl_pgo_relation_t **out) {
  uint32_t oid = 0;
  int rc = rd_u32(r, "relation oid", &oid);
  if (rc != SL_OK) return rc;
  const sl_pgo_relation_t *rel = sl__pgo_relation(d, oid);
  if (rel == NULL)
    return sl_error_set(r->err, SL_ECORRUPT,
                        "%s: relation oid %u at byte 1 was not described by "
                        "a Relation message before",
                        r->what, oid);
  *out = rel;
  return SL_OK;
}

static int rd_marker(rd_t *r, const char *field, const char *allowed,
                     uint8_t *out) {
  size_t at = r->off;
  int rc = rd_u8(r, field, out);
  if (rc != SL_OK) return rc;
  if (strchr(allowed, *out) == NULL || *out == 0)
    return sl_error_set(r->err, SL_ECORRUPT,
                        "%s: %s is 0x%02x at byte %zu (expected one of "
                        "'%s')",
                        r->what, field, *out, at, allowed);
  return SL_OK;
}

static int dec_relation(rd_t *r, sl_pgo_decoder_t *d, sl_pgo_msg_t *m) {
  uint32_t oid = 0;
  const char *nsp = NULL, *name = NULL;
  uint8_t ident = 0;
  uint16_t n = 0;
  int rc;
  if ((rc = rd_u32(r, "relation oid", &oid)) != SL_OK ||
      (rc = rd_str(r, "namespace", &nsp)) != SL_OK ||
      (rc = rd_str(r, "relation name", &name)) != SL_OK ||
      (rc = rd_marker(r, "replica identity", "dnfi", &ident)) != SL_OK ||
      (rc = rd_u16(r, "column count", &n)) != SL_OK)
    return rc;
  /* Each column takes at least 10 bytes: refuse a count the message
   * cannot hold before allocating for it. */
  if ((size_t)n * 10 > r->len - r->off)
    return truncated(r, "columns", (size_t)n * 10);
  sl_pgo_relation_t *rel = sl_calloc(1, sizeof(*rel));
  if (rel == NULL) return oom(r->err);
  rel->oid = oid;
  rel->replident = (char)ident;
  rel->nspname = dup_str(nsp);
  rel->relname = dup_str(name);
  rel->cols = sl_calloc(n ? n : 1, sizeof(*rel->cols));
  if (rel->nspname == NULL || rel->relname == NULL || rel->cols == NULL) {
    rel_free(rel);
    return oom(r->err);
  }
  for (uint16_t i = 0; i < n; i++) {
    sl_pgo_column_t *c = &rel->cols[i];
    const char *cname = NULL;
    uint32_t mod = 0;
    if ((rc = rd_u8(r, "column flags", &c->flags)) != SL_OK ||
        (rc = rd_str(r, "column name", &cname)) != SL_OK ||
        (rc = rd_u32(r, "column type oid", &c->type_oid)) != SL_OK ||
        (rc = rd_u32(r, "column type modifier", &mod)) != SL_OK) {
      rel->n_cols = i;
      rel_free(rel);
      return rc;
    }
    c->type_mod = (int32_t)mod;
    c->name = dup_str(cname);
    rel->n_cols = (uint16_t)(i + 1);
    if (c->name == NULL) {
      rel_free(rel);
      return oom(r->err);
    }
  }
  rel->n_cols = n;
  if ((rc = rd_end(r)) != SL_OK) {
    rel_free(rel);
    return rc;
  }
  if (rel_put(d, rel) != SL_OK) {
    rel_free(rel);
    return oom(r->err);
  }
  m->u.relation = rel;
  return SL_OK;
}

int sl__pgo_decode(sl_pgo_decoder_t *d, const uint8_t *p, size_t len,
                   sl_pgo_msg_t *out, sl_error_t **out_err) {
  rd_t r = {p, len, 0, "pgoutput message", out_err};
  uint8_t type = 0;
  int rc = rd_u8(&r, "message type", &type);
  if (rc != SL_OK) return rc;
  char what[64];
  snprintf(what, sizeof(what), "pgoutput %s message", sl__pgo_type_name(type));
  r.what = what;
  sl_pgo_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = type;
  uint64_t t = 0;
  switch (type) {
  case 'B':
    if ((rc = rd_u64(&r, "final LSN", &m.u.begin.final_lsn)) != SL_OK ||
        (rc = rd_u64(&r, "commit time", &t)) != SL_OK ||
        (rc = rd_u32(&r, "xid", &m.u.begin.xid)) != SL_OK)
      return rc;
    m.u.begin.commit_time = (int64_t)t;
    break;
  case 'C':
    if ((rc = rd_u8(&r, "flags", &m.u.commit.flags)) != SL_OK ||
        (rc = rd_u64(&r, "commit LSN", &m.u.commit.commit_lsn)) != SL_OK ||
        (rc = rd_u64(&r, "end LSN", &m.u.commit.end_lsn)) != SL_OK ||
        (rc = rd_u64(&r, "commit time", &t)) != SL_OK)
      return rc;
    m.u.commit.commit_time = (int64_t)t;
    break;
  case 'O':
    if ((rc = rd_u64(&r, "origin LSN", &m.u.origin.lsn)) != SL_OK ||
        (rc = rd_str(&r, "origin name", &m.u.origin.name)) != SL_OK)
      return rc;
    break;
  case 'R':
    if ((rc = dec_relation(&r, d, &m)) != SL_OK) return rc;
    break;
  case 'Y':
    if ((rc = rd_u32(&r, "type oid", &m.u.type.oid)) != SL_OK ||
        (rc = rd_str(&r, "namespace", &m.u.type.nspname)) != SL_OK ||
        (rc = rd_str(&r, "type name", &m.u.type.name)) != SL_OK)
      return rc;
    break;
  case 'I': {
    uint8_t k = 0;
    if ((rc = rd_rel_ref(&r, d, &m.u.change.rel)) != SL_OK ||
        (rc = rd_marker(&r, "new tuple marker", "N", &k)) != SL_OK ||
        (rc = rd_tuple(&r, d, m.u.change.rel, 0, &m.u.change.new_)) !=
            SL_OK)
      return rc;
    break;
  }
  case 'U': {
    uint8_t k = 0;
    if ((rc = rd_rel_ref(&r, d, &m.u.change.rel)) != SL_OK ||
        (rc = rd_marker(&r, "tuple marker", "KON", &k)) != SL_OK)
      return rc;
    uint32_t at = 0;
    if (k != 'N') {
      m.u.change.old_kind = k;
      if ((rc = rd_tuple(&r, d, m.u.change.rel, 0, &m.u.change.old)) !=
              SL_OK ||
          (rc = rd_marker(&r, "new tuple marker", "N", &k)) != SL_OK)
        return rc;
      at = m.u.change.old.n_cols;
    }
    if ((rc = rd_tuple(&r, d, m.u.change.rel, at, &m.u.change.new_)) !=
        SL_OK)
      return rc;
    /* The old tuple's columns moved if the new one grew the array. */
    if (m.u.change.old_kind) m.u.change.old.cols = d->datums;
    break;
  }
  case 'D':
    if ((rc = rd_rel_ref(&r, d, &m.u.change.rel)) != SL_OK ||
        (rc = rd_marker(&r, "old tuple marker", "KO", &m.u.change.old_kind)) !=
            SL_OK ||
        (rc = rd_tuple(&r, d, m.u.change.rel, 0, &m.u.change.old)) != SL_OK)
      return rc;
    break;
  case 'T': {
    uint32_t n = 0;
    if ((rc = rd_u32(&r, "relation count", &n)) != SL_OK ||
        (rc = rd_u8(&r, "options", &m.u.truncate.options)) != SL_OK)
      return rc;
    if (m.u.truncate.options > 3)
      return sl_error_set(out_err, SL_ECORRUPT,
                          "%s: options 0x%02x at byte 5 has bits other than "
                          "CASCADE (1) and RESTART IDENTITY (2)",
                          what, m.u.truncate.options);
    if ((rc = rd_need(&r, (size_t)n * 4, "relation oids")) != SL_OK)
      return rc;
    if (grow((void **)&d->oids, &d->oids_cap, n ? n : 1, sizeof(*d->oids)))
      return oom(out_err);
    for (uint32_t i = 0; i < n; i++)
      (void)rd_u32(&r, "relation oid", &d->oids[i]);
    m.u.truncate.n_rels = n;
    m.u.truncate.rel_oids = d->oids;
    break;
  }
  case 'M': {
    uint8_t flags = 0;
    if ((rc = rd_u8(&r, "flags", &flags)) != SL_OK) return rc;
    if (flags > 1)
      return sl_error_set(out_err, SL_ECORRUPT,
                          "%s: flags 0x%02x at byte 1 (expected 0 or 1: "
                          "transactional)",
                          what, flags);
    m.u.message.is_transactional = flags == 1;
    if ((rc = rd_u64(&r, "LSN", &m.u.message.lsn)) != SL_OK ||
        (rc = rd_str(&r, "prefix", &m.u.message.prefix)) != SL_OK ||
        (rc = rd_u32(&r, "content length", &m.u.message.len)) != SL_OK ||
        (rc = rd_need(&r, m.u.message.len, "content")) != SL_OK)
      return rc;
    m.u.message.content = p + r.off;
    r.off += m.u.message.len;
    break;
  }
  case 'S':
  case 'E':
  case 'c':
  case 'A':
  case 'b':
  case 'P':
  case 'K':
  case 'r':
  case 'p':
    return sl_error_set(out_err, SL_ENOTSUP,
                        "%s (type '%c' at byte 0) is not supported: sluice "
                        "reads pgoutput protocol version 1 without "
                        "streaming of in-progress transactions or two-phase "
                        "decoding",
                        what, type);
  default:
    return sl_error_set(out_err, SL_ECORRUPT,
                        "pgoutput message: unknown message type 0x%02x at "
                        "byte 0",
                        type);
  }
  if (type != 'R' && (rc = rd_end(&r)) != SL_OK) return rc;
  *out = m;
  return SL_OK;
}

/* ------------------------------------------------------------------ */
/* Column values                                                        */

static const char *type_label(uint32_t oid) {
  switch (oid) {
  case SL_PG_OID_BOOL: return "boolean";
  case SL_PG_OID_BYTEA: return "bytea";
  case SL_PG_OID_INT8: return "bigint";
  case SL_PG_OID_INT2: return "smallint";
  case SL_PG_OID_INT4: return "integer";
  case SL_PG_OID_TEXT: return "text";
  case SL_PG_OID_JSON: return "json";
  case SL_PG_OID_FLOAT4: return "real";
  case SL_PG_OID_FLOAT8: return "double precision";
  case SL_PG_OID_BPCHAR: return "character";
  case SL_PG_OID_VARCHAR: return "character varying";
  case SL_PG_OID_DATE: return "date";
  case SL_PG_OID_TIMESTAMP: return "timestamp without time zone";
  case SL_PG_OID_TIMESTAMPTZ: return "timestamp with time zone";
  case SL_PG_OID_NUMERIC: return "numeric";
  case SL_PG_OID_UUID: return "uuid";
  case SL_PG_OID_JSONB: return "jsonb";
  default: return NULL;
  }
}

/* numeric(p,s) from atttypmod: ((p << 16) | (s & 0x7ff)) + 4, the scale
 * an 11-bit signed number (PostgreSQL 15 allows -1000..1000). */
static bool numeric_typmod(int32_t mod, unsigned *out_p, int *out_s) {
  if (mod < 4) return false;
  uint32_t v = (uint32_t)(mod - 4);
  *out_p = (v >> 16) & 0xffff;
  *out_s = (int)((((int32_t)(v & 0x7ff)) ^ 1024) - 1024);
  return true;
}

static int col_error(sl_error_t **out_err, int code,
                     const sl_pgo_relation_t *rel, uint16_t col,
                     const char *fmt_tail, const char *arg) {
  const sl_pgo_column_t *c = &rel->cols[col];
  const char *label = type_label(c->type_oid);
  return sl_error_set(out_err, code,
                      "pgoutput: relation %s.%s column \"%s\" (type %s, oid "
                      "%u): %s%s",
                      rel->nspname[0] ? rel->nspname : "pg_catalog",
                      rel->relname, c->name, label ? label : "unsupported",
                      c->type_oid, fmt_tail, arg ? arg : "");
}

int sl__pgo_column_type(const sl_pgo_relation_t *rel, uint16_t col,
                        sl_type_t *out_type, sl_error_t **out_err) {
  if (col >= rel->n_cols)
    return sl_error_set(out_err, SL_EINVAL,
                        "pgoutput: relation %s.%s has no column %u",
                        rel->nspname, rel->relname, col);
  const sl_pgo_column_t *c = &rel->cols[col];
  sl_type_t t = {.nullable = true};
  switch (c->type_oid) {
  case SL_PG_OID_BOOL: t.id = SL_TYPE_BOOL; break;
  case SL_PG_OID_INT2:
  case SL_PG_OID_INT4: t.id = SL_TYPE_INT32; break;
  case SL_PG_OID_INT8: t.id = SL_TYPE_INT64; break;
  case SL_PG_OID_FLOAT4:
  case SL_PG_OID_FLOAT8: t.id = SL_TYPE_FLOAT64; break;
  case SL_PG_OID_NUMERIC: {
    unsigned p = 0;
    int s = 0;
    if (numeric_typmod(c->type_mod, &p, &s) && p >= 1 &&
        p <= SL_DECIMAL_MAX_PRECISION && s >= 0 && (unsigned)s <= p) {
      t.id = SL_TYPE_DECIMAL;
      t.precision = (uint8_t)p;
      t.scale = (uint8_t)s;
    } else {
      t.id = SL_TYPE_STRING;
    }
    break;
  }
  case SL_PG_OID_TEXT:
  case SL_PG_OID_VARCHAR:
  case SL_PG_OID_BPCHAR:
  case SL_PG_OID_UUID:
  case SL_PG_OID_JSON:
  case SL_PG_OID_JSONB: t.id = SL_TYPE_STRING; break;
  case SL_PG_OID_BYTEA: t.id = SL_TYPE_BYTES; break;
  case SL_PG_OID_DATE:
  case SL_PG_OID_TIMESTAMP:
  case SL_PG_OID_TIMESTAMPTZ: t.id = SL_TYPE_TIMESTAMP; break;
  default:
    return col_error(out_err, SL_ENOTSUP, rel, col,
                     "type not supported by sluice's PostgreSQL CDC (see "
                     "docs/connectors.md for the supported types)",
                     NULL);
  }
  *out_type = t;
  return SL_OK;
}

/* ---- dates and timestamps (DateStyle ISO) ---- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static bool is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static bool digits(const char *s, size_t len, size_t *i, size_t min,
                   size_t max, int64_t *out) {
  size_t k = 0;
  int64_t v = 0;
  while (*i < len && k < max && s[*i] >= '0' && s[*i] <= '9') {
    v = v * 10 + (s[*i] - '0');
    (*i)++;
    k++;
  }
  if (k < min) return false;
  *out = v;
  return true;
}

static bool lit(const char *s, size_t len, size_t *i, const char *w) {
  size_t n = strlen(w);
  if (len - *i < n || memcmp(s + *i, w, n) != 0) return false;
  *i += n;
  return true;
}

int sl__pg_parse_timestamp(const char *s, size_t len, bool is_date,
                           int64_t *out_us) {
  if ((len == 8 && memcmp(s, "infinity", 8) == 0) ||
      (len == 9 && memcmp(s, "-infinity", 9) == 0))
    return SL_ENOTSUP;
  size_t i = 0;
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, frac = 0;
  if (!digits(s, len, &i, 4, 7, &y) || !lit(s, len, &i, "-") ||
      !digits(s, len, &i, 2, 2, &mo) || !lit(s, len, &i, "-") ||
      !digits(s, len, &i, 2, 2, &d))
    return SL_EPARSE;
  int64_t off_s = 0;
  if (!is_date) {
    if (!lit(s, len, &i, " ") || !digits(s, len, &i, 2, 2, &h) ||
        !lit(s, len, &i, ":") || !digits(s, len, &i, 2, 2, &mi) ||
        !lit(s, len, &i, ":") || !digits(s, len, &i, 2, 2, &sec))
      return SL_EPARSE;
    if (lit(s, len, &i, ".")) {
      size_t start = i;
      if (!digits(s, len, &i, 1, 6, &frac)) return SL_EPARSE;
      for (size_t k = i - start; k < 6; k++) frac *= 10;
    }
    if (i < len && (s[i] == '+' || s[i] == '-')) {
      int sign = s[i] == '-' ? -1 : 1;
      int64_t oh = 0, om = 0, os = 0;
      i++;
      if (!digits(s, len, &i, 2, 2, &oh)) return SL_EPARSE;
      if (lit(s, len, &i, ":")) {
        if (!digits(s, len, &i, 2, 2, &om)) return SL_EPARSE;
        if (lit(s, len, &i, ":") && !digits(s, len, &i, 2, 2, &os))
          return SL_EPARSE;
      }
      if (om > 59 || os > 59) return SL_EPARSE;
      off_s = sign * (oh * 3600 + om * 60 + os);
    }
  }
  bool is_bc = lit(s, len, &i, " BC");
  if (i != len) return SL_EPARSE;
  if (is_bc) {
    if (y == 0) return SL_EPARSE;
    y = 1 - y; /* 1 BC is year 0 */
  }
  static const unsigned mdays[] = {31, 28, 31, 30, 31, 30,
                                   31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1) return SL_EPARSE;
  unsigned dim = mdays[mo - 1] + (mo == 2 && is_leap(y) ? 1 : 0);
  if ((unsigned)d > dim || h > 23 || mi > 59 || sec > 59) return SL_EPARSE;
  int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
  int64_t us = 0;
  if (__builtin_mul_overflow(days, INT64_C(86400000000), &us) ||
      __builtin_add_overflow(us, ((h * 60 + mi) * 60 + sec - off_s) *
                                     INT64_C(1000000) + frac, &us))
    return SL_EOVERFLOW;
  *out_us = us;
  return SL_OK;
}

/* ---- bytea ---- */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* bytea_output hex ("\x0a1b") or escape ("a\\b\001").  Writes at most
 * len bytes into dst. */
static bool parse_bytea(const char *s, size_t len, uint8_t *dst,
                        size_t *out_n) {
  size_t n = 0;
  if (len >= 2 && s[0] == '\\' && s[1] == 'x') {
    if ((len - 2) % 2 != 0) return false;
    for (size_t i = 2; i < len; i += 2) {
      int a = hexval(s[i]), b = hexval(s[i + 1]);
      if (a < 0 || b < 0) return false;
      dst[n++] = (uint8_t)(a << 4 | b);
    }
  } else {
    for (size_t i = 0; i < len;) {
      if (s[i] != '\\') {
        dst[n++] = (uint8_t)s[i++];
      } else if (len - i >= 2 && s[i + 1] == '\\') {
        dst[n++] = '\\';
        i += 2;
      } else if (len - i >= 4 && s[i + 1] >= '0' && s[i + 1] <= '3' &&
                 s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' &&
                 s[i + 3] <= '7') {
        dst[n++] = (uint8_t)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 |
                             (s[i + 3] - '0'));
        i += 4;
      } else {
        return false;
      }
    }
  }
  *out_n = n;
  return true;
}

static void echo(const uint8_t *p, uint32_t n, char *buf, size_t size) {
  size_t k = 0;
  for (uint32_t i = 0; i < n && k + 5 < size; i++) {
    uint8_t c = p[i];
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      buf[k++] = (char)c;
    } else {
      snprintf(buf + k, size - k, "\\x%02x", c);
      k += 4;
    }
    if (i + 1 < n && k + 8 >= size) {
      memcpy(buf + k, "...", 4);
      return;
    }
  }
  buf[k] = 0;
}

int sl__pgo_value(const sl_pgo_relation_t *rel, uint16_t col,
                  const sl_pgo_datum_t *datum, sl_row_builder_t *b,
                  uint32_t field, sl_error_t **out_err) {
  sl_type_t t;
  int rc = sl__pgo_column_type(rel, col, &t, out_err);
  if (rc != SL_OK) return rc;
  switch (datum->kind) {
  case SL_PGO_NULL:
    sl_row_builder_set_null(b, field);
    return SL_OK;
  case SL_PGO_UNCHANGED:
    return col_error(out_err, SL_EINVAL, rel, col,
                     "an unchanged TOAST value has no value to convert (the "
                     "row's earlier value stands)",
                     NULL);
  case SL_PGO_BINARY:
    return col_error(out_err, SL_ENOTSUP, rel, col,
                     "binary-format values are not supported (sluice asks "
                     "for text)",
                     NULL);
  case SL_PGO_TEXT:
    break;
  default:
    return col_error(out_err, SL_EINVAL, rel, col, "bad datum kind", NULL);
  }
  const char *s = (const char *)datum->data;
  size_t len = datum->len;
  char quoted[80];
  echo(datum->data, datum->len, quoted, sizeof(quoted));
  uint32_t oid = rel->cols[col].type_oid;
  switch (oid) {
  case SL_PG_OID_BOOL:
    if (len == 1 && (s[0] == 't' || s[0] == 'f')) {
      sl_row_builder_set_bool(b, field, s[0] == 't');
      return SL_OK;
    }
    return col_error(out_err, SL_EPARSE, rel, col,
                     "expected 't' or 'f', got: ", quoted);
  case SL_PG_OID_DATE:
  case SL_PG_OID_TIMESTAMP:
  case SL_PG_OID_TIMESTAMPTZ: {
    int64_t us = 0;
    rc = sl__pg_parse_timestamp(s, len, oid == SL_PG_OID_DATE, &us);
    if (rc == SL_ENOTSUP)
      return col_error(out_err, rc, rel, col,
                       "sluice timestamps cannot hold ", quoted);
    if (rc == SL_EOVERFLOW)
      return col_error(out_err, rc, rel, col,
                       "out of the range of sluice timestamps: ", quoted);
    if (rc != SL_OK)
      return col_error(out_err, rc, rel, col,
                       "not an ISO date/time (DateStyle ISO): ", quoted);
    sl_row_builder_set_i64(b, field, us);
    return SL_OK;
  }
  case SL_PG_OID_BYTEA: {
    uint8_t stack[256];
    uint8_t *buf = len <= sizeof(stack) ? stack : sl_malloc(len);
    size_t n = 0;
    if (buf == NULL) return oom(out_err);
    if (!parse_bytea(s, len, buf, &n)) {
      if (buf != stack) sl_free(buf);
      return col_error(out_err, SL_EPARSE, rel, col,
                       "not a bytea in hex or escape format: ", quoted);
    }
    rc = sl_row_builder_set_str(b, field, buf, (uint32_t)n);
    if (buf != stack) sl_free(buf);
    return rc == SL_OK ? SL_OK : oom(out_err);
  }
  case SL_PG_OID_NUMERIC:
    if (t.id == SL_TYPE_DECIMAL &&
        ((len == 3 && memcmp(s, "NaN", 3) == 0) ||
         (len >= 8 && memcmp(s + len - 8, "Infinity", 8) == 0)))
      return col_error(out_err, SL_ENOTSUP, rel, col,
                       "a sluice decimal cannot hold ", quoted);
    break;
  default:
    break;
  }
  /* Integers, floats, decimals and strings read as sluice's own text. */
  sl_error_t *e = NULL;
  rc = sl_value_parse(s, len, t, b, field, &e);
  if (rc != SL_OK) {
    rc = col_error(out_err, rc, rel, col, "",
                   e ? sl_error_message(e) : "cannot convert");
    sl_error_destroy(e);
  }
  return rc;
}
