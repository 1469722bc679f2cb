/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB sink's writer, one per sink subtask, on its task's thread.
 * Rows become multi-row INSERT ... ON DUPLICATE KEY UPDATE or DELETE
 * statements of batch_rows rows.  Exactly-once: every epoch with rows is
 * one XA branch, started at its first row on a connection that holds the
 * subtask's writer lock (GET_LOCK), and its first statement is the fence
 * check (mariadb_fence.c); prepare writes the marker row, ends and
 * prepares the branch, and closes the connection, since MariaDB lets no
 * other connection commit a branch while the preparing one lives.  The
 * statements of the next epoch wait in memory until the epoch prepared
 * last is committed (its branch holds the locks of its rows).
 * At-least-once: every statement commits by itself, with an epoch column
 * that never goes back.  See mariadb_int.h and docs/connectors.md.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mariadb_int.h"

#define MAX_STMT_BYTES (1024u * 1024u)
#define LOCK_WAIT_S 10

enum { BATCH_NONE = 0, BATCH_UPSERT = 1, BATCH_DELETE = 2 };

typedef struct mwriter_s {
  msink_t *s;
  char pfx[256];
  const sl_schema_t *schema;
  uint32_t n_fields;
  int *key_idx;
  bool *is_key;
  uint32_t subtask;
  MYSQL *conn;
  xid_t xid;
  uint64_t epoch;    /* exactly-once: the epoch being filled */
  bool is_xa_open;   /* XA START done, not yet prepared */
  int64_t alo_epoch; /* at-least-once: this writer's version */
  sl_bytes_t stmt;
  int batch;
  uint32_t n_batched;
  /*
   * Finished statements not yet sent: {u32 rows, u32 len, text}.  While
   * the epoch this writer prepared last (wait_epoch) is not committed,
   * its branch holds the locks of the rows it wrote, and a statement of
   * the next epoch touching one of them would wait for that commit, which
   * runs on this same thread: the writer keeps the statements until the
   * commit (or until prepare, which must send them).
   */
  sl_bytes_t queue;
  uint64_t wait_epoch;
  char lock[40];
  char job[XID_PART_MAX + 1], uid[XID_PART_MAX + 1];
  /* Exactly-once: the fence epoch recover() obtained before this writer
   * opened (0: none), which every branch checks (mariadb_fence.c). */
  uint64_t fence_epoch;
  /* Sticky: the message of a failed fence check; every later call fails
   * with it. */
  char *fenced;
} mwriter_t;

static int writer_connect(mwriter_t *w, sl_error_t **out_err) {
  int rc = sl__mariadb_connect(w->s, w->pfx, &w->conn, out_err);
  if (rc != SL_OK) return rc;
  if (!is_eo(w->s)) return SL_OK;
  char sql[128], v[32];
  bool found;
  unsigned e;
  snprintf(sql, sizeof(sql), "SELECT GET_LOCK('%s', %d)", w->lock,
           LOCK_WAIT_S);
  rc = sl__mariadb_query_text(w->conn, sql, v, sizeof(v), &found, &e);
  if (rc != SL_OK || !found || strcmp(v, "1") != 0) {
    char holder[32] = "?";
    if (rc == SL_OK) {
      snprintf(sql, sizeof(sql), "SELECT IS_USED_LOCK('%s')", w->lock);
      (void)sl__mariadb_query_text(w->conn, sql, holder, sizeof(holder),
                                   &found, &e);
    }
    rc = sl_error_set(out_err, SL_EIO,
                      "%s: another writer of this sink subtask holds its "
                      "writer lock %s (connection %s) after %d s: a writer "
                      "of an earlier attempt is still connected (error %u: "
                      "%s)",
                      w->pfx, w->lock, holder, LOCK_WAIT_S, e,
                      mysql_error(w->conn));
    mysql_close(w->conn);
    w->conn = NULL;
    return rc;
  }
  return SL_OK;
}

static int writer_start(mwriter_t *w, sl_error_t **out_err) {
  int rc;
  if (w->conn == NULL && (rc = writer_connect(w, out_err)) != SL_OK)
    return rc;
  if (!is_eo(w->s) || w->is_xa_open) return SL_OK;
  if (w->fence_epoch == 0)
    return sl_error_set(out_err, SL_ESTATE,
                        "%s: no fence epoch: recover() of this subtask's "
                        "committer did not run in this sink instance before "
                        "the writer opened (the engine runs committer_open, "
                        "the restored commits and recover before "
                        "writer_open)",
                        w->pfx);
  sl__mariadb_make_bqual(&w->xid, w->subtask, w->epoch,
                         mysql_thread_id(w->conn));
  unsigned e;
  if (sl__mariadb_run_xa(w->conn, "XA START ", &w->xid, "", &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: XA START '%s','%s' failed: error %u (%s): %s",
                        w->pfx, w->xid.gtrid, w->xid.bqual, e,
                        mysql_sqlstate(w->conn), mysql_error(w->conn));
  w->is_xa_open = true;
  /* The branch's first statement: the fence check (F1-F3). */
  sl_error_t *ferr = NULL;
  int rc2 = sl__mariadb_fence_check(w->conn, w->s, w->job, w->uid,
                                    w->subtask, w->fence_epoch, w->pfx,
                                    &ferr);
  if (rc2 == SL_OK) return SL_OK;
  if (rc2 == SL_ESTATE) {
    /* Fenced: end the branch and the connection now, so that the newer
     * attempt's writer gets the writer lock, and stay fenced. */
    (void)sl__mariadb_run_xa(w->conn, "XA END ", &w->xid, "", &e);
    (void)sl__mariadb_run_xa(w->conn, "XA ROLLBACK ", &w->xid, "", &e);
    mysql_close(w->conn);
    w->conn = NULL;
    w->is_xa_open = false;
    w->queue.len = 0;
    w->fenced = sl_strdup(sl_error_message(ferr));
  }
  if (out_err != NULL) *out_err = ferr;
  else sl_error_destroy(ferr);
  return rc2;
}

/* SL_OK, or the sticky error of a fenced writer. */
static int check_fenced(const mwriter_t *w, sl_error_t **out_err) {
  if (w->fenced == NULL) return SL_OK;
  return sl_error_set(out_err, SL_ESTATE, "%s", w->fenced);
}

static int append_value(mwriter_t *w, const sl_row_t *row, uint32_t i,
                        sl_error_t **out_err) {
  sl_bytes_t *b = &w->stmt;
  sl_value_t v;
  sl_row_get_value(row, i, &v);
  if (v.is_null) return sl_bytes_append(b, "NULL", 4);
  switch ((sl_type_id_t)v.type) {
  case SL_TYPE_BOOL:
    return sl_bytes_append(b, v.u.b ? "1" : "0", 1);
  case SL_TYPE_INT32:
  case SL_TYPE_INT64:
    return sl_bytes_printf(b, "%" PRId64, v.u.i);
  case SL_TYPE_FLOAT64:
    if (v.u.f != v.u.f || v.u.f - v.u.f != 0)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: field %s is %g, which MariaDB cannot store",
                          w->pfx, sl_schema_field(w->schema, i)->name,
                          v.u.f);
    return sl_bytes_printf(b, "%.17g", v.u.f);
  case SL_TYPE_DECIMAL: {
    uint64_t m = v.u.i < 0 ? 0 - (uint64_t)v.u.i : (uint64_t)v.u.i;
    uint64_t p10 = 1;
    for (unsigned k = 0; k < v.scale; k++) p10 *= 10u;
    if (v.scale == 0)
      return sl_bytes_printf(b, "%s%" PRIu64, v.u.i < 0 ? "-" : "", m);
    return sl_bytes_printf(b, "%s%" PRIu64 ".%0*" PRIu64,
                           v.u.i < 0 ? "-" : "", m / p10, (int)v.scale,
                           m % p10);
  }
  case SL_TYPE_STRING: {
    int rc = sl_bytes_reserve(b, 2u * (size_t)v.u.s.len + 3u);
    if (rc != SL_OK) return rc;
    b->data[b->len++] = '\'';
    b->len += mysql_real_escape_string(w->conn, (char *)b->data + b->len,
                                       (const char *)v.u.s.ptr, v.u.s.len);
    b->data[b->len++] = '\'';
    return SL_OK;
  }
  case SL_TYPE_BYTES:
    return sl__mariadb_hex(b, v.u.s.ptr, v.u.s.len);
  case SL_TYPE_TIMESTAMP: {
    int64_t us = v.u.i;
    int64_t sec = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
      frac += 1000000;
      sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL)
      return sl_error_set(out_err, SL_EINVAL, "%s: field %s: timestamp %"
                          PRId64 " out of range", w->pfx,
                          sl_schema_field(w->schema, i)->name, us);
    return sl_bytes_printf(b, "'%04d-%02d-%02d %02d:%02d:%02d.%06" PRId64
                           "'", tm.tm_year + 1900, tm.tm_mon + 1,
                           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                           frac);
  }
  }
  return sl_error_set(out_err, SL_ETYPE, "%s: field %s has an unknown type",
                      w->pfx, sl_schema_field(w->schema, i)->name);
}

static int flush_batch(mwriter_t *w, sl_error_t **out_err) {
  if (w->n_batched == 0) return SL_OK;
  const msink_t *s = w->s;
  sl_bytes_t *b = &w->stmt;
  int rc = SL_OK;
  if (w->batch == BATCH_UPSERT && s->mode == SL_MARIADB_UPSERT) {
    rc = sl_bytes_append_str(b, " ON DUPLICATE KEY UPDATE ");
    bool any = false;
    for (uint32_t i = 0; rc == SL_OK && i < w->n_fields; i++) {
      if (w->is_key[i]) continue;
      const char *name = sl_schema_field(w->schema, i)->name;
      if (any) rc = sl_bytes_append(b, ",", 1);
      any = true;
      if (rc == SL_OK) rc = sl__mariadb_ident(b, name);
      if (rc != SL_OK) break;
      if (is_eo(s)) {
        rc = sl_bytes_append_str(b, "=VALUES(");
        if (rc == SL_OK) rc = sl__mariadb_ident(b, name);
        if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
      } else {
        /* The epoch column is assigned last: the conditions before it
         * compare with the row's old epoch. */
        rc = sl_bytes_append_str(b, "=IF(VALUES(");
        if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
        if (rc == SL_OK) rc = sl_bytes_append_str(b, ")>=");
        if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
        if (rc == SL_OK) rc = sl_bytes_append_str(b, ",VALUES(");
        if (rc == SL_OK) rc = sl__mariadb_ident(b, name);
        if (rc == SL_OK) rc = sl_bytes_append_str(b, "),");
        if (rc == SL_OK) rc = sl__mariadb_ident(b, name);
        if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
      }
    }
    if (rc == SL_OK && !is_eo(s)) {
      if (any) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, "=GREATEST(");
      if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, ",VALUES(");
      if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
      if (rc == SL_OK) rc = sl_bytes_append_str(b, "))");
      any = true;
    }
    if (rc == SL_OK && !any) {
      const char *k0 = sl_schema_field(w->schema, w->key_idx[0])->name;
      rc = sl__mariadb_ident(b, k0);
      if (rc == SL_OK) rc = sl_bytes_append(b, "=", 1);
      if (rc == SL_OK) rc = sl__mariadb_ident(b, k0);
    }
  } else if (w->batch == BATCH_DELETE) {
    rc = sl_bytes_append(b, ")", 1);
    if (rc == SL_OK && !is_eo(s)) {
      rc = sl_bytes_append_str(b, " AND ");
      if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
      if (rc == SL_OK)
        rc = sl_bytes_printf(b, " <= %" PRId64, w->alo_epoch);
    }
  }
  uint32_t hdr[2] = {w->n_batched, (uint32_t)b->len};
  if (rc == SL_OK) rc = sl_bytes_append(&w->queue, hdr, sizeof(hdr));
  if (rc == SL_OK) rc = sl_bytes_append(&w->queue, b->data, b->len);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  b->len = 0;
  w->n_batched = 0;
  w->batch = BATCH_NONE;
  return SL_OK;
}

/* Send the queued statements: always when force, else once the epoch
 * prepared last is committed. */
static int send_queue(mwriter_t *w, bool force, sl_error_t **out_err) {
  if (w->queue.len == 0) return SL_OK;
  if (!force && w->wait_epoch != 0 &&
      !sl__mariadb_is_committed(w->s, w->subtask, w->wait_epoch))
    return SL_OK;
  w->wait_epoch = 0;
  size_t off = 0;
  int rc = SL_OK;
  while (off < w->queue.len) {
    uint32_t hdr[2];
    memcpy(hdr, w->queue.data + off, sizeof(hdr));
    off += sizeof(hdr);
    unsigned e;
    if (sl__mariadb_run(w->conn, (const char *)w->queue.data + off, hdr[1],
                        &e) != SL_OK) {
      rc = sl_error_set(out_err, SL_EIO,
                        "%s: writing %u rows to table %s.%s failed: error "
                        "%u (%s): %s",
                        w->pfx, hdr[0], w->s->database, w->s->table, e,
                        mysql_sqlstate(w->conn), mysql_error(w->conn));
      break;
    }
    off += hdr[1];
  }
  w->queue.len = 0;
  return rc;
}

/* Finish the statement being built and send what may be sent. */
static int flush_rows(mwriter_t *w, bool force, sl_error_t **out_err) {
  int rc = flush_batch(w, out_err);
  return rc == SL_OK ? send_queue(w, force || !is_eo(w->s), out_err) : rc;
}

static int begin_batch(mwriter_t *w, int kind) {
  const msink_t *s = w->s;
  sl_bytes_t *b = &w->stmt;
  int rc;
  w->batch = kind;
  if (kind == BATCH_UPSERT) {
    rc = sl_bytes_append_str(b, "INSERT INTO ");
    if (rc == SL_OK) rc = sl__mariadb_ident(b, s->table);
    if (rc == SL_OK) rc = sl_bytes_append(b, " (", 2);
    for (uint32_t i = 0; rc == SL_OK && i < w->n_fields; i++) {
      if (i > 0) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK)
        rc = sl__mariadb_ident(b, sl_schema_field(w->schema, i)->name);
    }
    if (rc == SL_OK && !is_eo(s)) {
      rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = sl__mariadb_ident(b, s->epoch_column);
    }
    if (rc == SL_OK) rc = sl_bytes_append_str(b, ") VALUES ");
    return rc;
  }
  rc = sl_bytes_append_str(b, "DELETE FROM ");
  if (rc == SL_OK) rc = sl__mariadb_ident(b, s->table);
  if (rc == SL_OK) rc = sl_bytes_append_str(b, " WHERE (");
  for (uint32_t k = 0; rc == SL_OK && k < s->n_key; k++) {
    if (k > 0) rc = sl_bytes_append(b, ",", 1);
    if (rc == SL_OK)
      rc = sl__mariadb_ident(
          b, sl_schema_field(w->schema, w->key_idx[k])->name);
  }
  if (rc == SL_OK) rc = sl_bytes_append_str(b, ") IN (");
  return rc;
}

int sl__mariadb_write(void *writer, const sl_row_t *row,
                      sl_error_t **out_err) {
  mwriter_t *w = writer;
  const msink_t *s = w->s;
  sl_row_kind_t kind = sl_row_kind(row);
  int want;
  if (w->fenced != NULL) return check_fenced(w, out_err);
  if (s->mode == SL_MARIADB_INSERT) {
    if (kind != SL_ROW_INSERT)
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: mode insert got a %s row; a changelog with "
                          "updates or deletes needs mode upsert and a key",
                          w->pfx, sl_row_kind_name(kind));
    want = BATCH_UPSERT;
  } else if (kind == SL_ROW_UPDATE_BEFORE) {
    return SL_OK; /* the +U that follows replaces the row */
  } else {
    want = kind == SL_ROW_DELETE ? BATCH_DELETE : BATCH_UPSERT;
  }
  for (uint32_t k = 0; k < s->n_key; k++)
    if (sl_row_is_null(row, (uint32_t)w->key_idx[k]))
      return sl_error_set(out_err, SL_EINVAL,
                          "%s: key column %s is null in a %s row", w->pfx,
                          s->key[k], sl_row_kind_name(kind));
  int rc = writer_start(w, out_err);
  if (rc != SL_OK) return rc;
  if (w->batch != want && w->n_batched > 0 &&
      (rc = flush_rows(w, false, out_err)) != SL_OK)
    return rc;
  if (w->n_batched == 0) {
    w->stmt.len = 0;
    if ((rc = begin_batch(w, want)) != SL_OK)
      return sl_error_set(out_err, rc, "out of memory");
  }
  sl_bytes_t *b = &w->stmt;
  rc = sl_bytes_append_str(b, w->n_batched > 0 ? ",(" : "(");
  if (want == BATCH_UPSERT) {
    for (uint32_t i = 0; rc == SL_OK && i < w->n_fields; i++) {
      if (i > 0) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = append_value(w, row, i, out_err);
    }
    if (rc == SL_OK && !is_eo(s))
      rc = sl_bytes_printf(b, ",%" PRId64, w->alo_epoch);
  } else {
    for (uint32_t k = 0; rc == SL_OK && k < s->n_key; k++) {
      if (k > 0) rc = sl_bytes_append(b, ",", 1);
      if (rc == SL_OK) rc = append_value(w, row, (uint32_t)w->key_idx[k],
                                         out_err);
    }
  }
  if (rc == SL_OK) rc = sl_bytes_append(b, ")", 1);
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  w->n_batched++;
  if (w->n_batched >= s->batch_rows || b->len >= MAX_STMT_BYTES)
    return flush_rows(w, false, out_err);
  return SL_OK;
}

int sl__mariadb_flush(void *writer, sl_error_t **out_err) {
  mwriter_t *w = writer;
  if (w->fenced != NULL) return check_fenced(w, out_err);
  return flush_rows(w, false, out_err);
}

static void writer_free(mwriter_t *w) {
  if (w == NULL) return;
  if (w->conn != NULL) {
    if (w->is_xa_open) {
      unsigned e;
      (void)sl__mariadb_run_xa(w->conn, "XA END ", &w->xid, "", &e);
      (void)sl__mariadb_run_xa(w->conn, "XA ROLLBACK ", &w->xid, "", &e);
    }
    mysql_close(w->conn);
  }
  sl_bytes_close(&w->stmt);
  sl_bytes_close(&w->queue);
  sl_free(w->fenced);
  sl_free(w->key_idx);
  sl_free(w->is_key);
  sl_free(w);
}

int sl__mariadb_writer_close(void *writer, bool is_success,
                             sl_error_t **out_err) {
  mwriter_t *w = writer;
  int rc = SL_OK;
  /* At-least-once: what was written is kept; the rest of an exactly-once
   * epoch after its last prepare is never committed. */
  if (is_success && !is_eo(w->s)) rc = flush_rows(w, true, out_err);
  writer_free(w);
  return rc;
}

int sl__mariadb_writer_open(void *ctx, const sl_sink_init_t *init,
                            void **out_writer, sl_error_t **out_err) {
  msink_t *s = ctx;
  mwriter_t *w = sl_calloc(1, sizeof(*w));
  if (w == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  w->s = s;
  w->schema = init->schema;
  w->subtask = init->subtask;
  w->epoch = init->epoch_id;
  sl_bytes_init(&w->stmt);
  sl_bytes_init(&w->queue);
  const char *uid = init->uid != NULL ? init->uid : "";
  const char *job = init->job != NULL ? init->job : "";
  snprintf(w->pfx, sizeof(w->pfx), "mariadb sink '%s' subtask %" PRIu32,
           uid, init->subtask);
  int rc = SL_OK;
  w->n_fields = sl_schema_n_fields(init->schema);
  w->key_idx = sl_calloc(s->n_key + 1u, sizeof(int));
  w->is_key = sl_calloc(w->n_fields + 1u, sizeof(bool));
  if (w->key_idx == NULL || w->is_key == NULL) {
    rc = sl_error_set(out_err, SL_ENOMEM, "out of memory");
    goto fail;
  }
  for (uint32_t k = 0; k < s->n_key; k++) {
    int i = sl_schema_index(init->schema, s->key[k]);
    if (i < 0) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: key column %s is not a field of the sink's "
                        "rows", w->pfx, s->key[k]);
      goto fail;
    }
    w->key_idx[k] = i;
    w->is_key[i] = true;
  }
  if (is_eo(s)) {
    if (init->epoch_id == 0) {
      rc = sl_error_set(out_err, SL_EINVAL,
                        "%s: exactly-once needs checkpoints (the engine "
                        "gave no epoch id); enable checkpointing or use "
                        "delivery at-least-once", w->pfx);
      goto fail;
    }
    if ((rc = sl__mariadb_make_gtrid(job, uid, w->pfx, &w->xid,
                                     out_err)) != SL_OK)
      goto fail;
    sl__mariadb_lock_name(w->xid.gtrid, w->subtask, w->lock, sizeof(w->lock));
    snprintf(w->job, sizeof(w->job), "%s", job);
    snprintf(w->uid, sizeof(w->uid), "%s", uid);
    /* The fence epoch of the recover() that preceded this writer: kept,
     * so that a later recover (a newer attempt) fences this writer off. */
    w->fence_epoch = sl__mariadb_fence_get(s, w->subtask);
  }
  if ((rc = writer_connect(w, out_err)) != SL_OK) goto fail;
  if ((rc = sl__mariadb_check_table(w->conn, s, init->schema, w->pfx,
                                    out_err)) != SL_OK)
    goto fail;
  if (!is_eo(s)) {
    /* This writer's epoch: above every epoch in the table, so a writer of
     * an earlier attempt still writing can never replace its rows. */
    sl_bytes_t q;
    sl_bytes_init(&q);
    rc = sl_bytes_append_str(&q, "SELECT IFNULL(MAX(");
    if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->epoch_column);
    if (rc == SL_OK) rc = sl_bytes_append_str(&q, "), 0) + 1 FROM ");
    if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->table);
    const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
    char v[32];
    bool found = false;
    unsigned e = 0;
    rc = sql == NULL ? SL_ENOMEM
                     : sl__mariadb_query_text(w->conn, sql, v, sizeof(v),
                                              &found, &e);
    sl_bytes_close(&q);
    if (rc != SL_OK || !found) {
      rc = sl_error_set(out_err, SL_EIO, "%s: reading the largest %s of "
                        "%s.%s failed: %s", w->pfx, s->epoch_column,
                        s->database, s->table, mysql_error(w->conn));
      goto fail;
    }
    w->alo_epoch = strtoll(v, NULL, 10);
  }
  *out_writer = w;
  return SL_OK;
fail:
  writer_free(w);
  return rc;
}


static int insert_marker(mwriter_t *w, uint64_t checkpoint_id,
                         sl_error_t **out_err) {
  const msink_t *s = w->s;
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "INSERT INTO ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->commit_table);
  if (rc == SL_OK)
    rc = sl_bytes_append_str(&q, " (job, sink_uid, subtask, epoch, "
                                 "checkpoint_id) VALUES (");
  if (rc == SL_OK) rc = sl__mariadb_hex(&q, w->job, strlen(w->job));
  if (rc == SL_OK) rc = sl_bytes_append(&q, ",", 1);
  if (rc == SL_OK) rc = sl__mariadb_hex(&q, w->uid, strlen(w->uid));
  if (rc == SL_OK)
    rc = sl_bytes_printf(&q, ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ")",
                         w->subtask, w->epoch, checkpoint_id);
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  unsigned e;
  rc = sl__mariadb_run(w->conn, sql, q.len, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: writing the marker of epoch %" PRIu64
                        " (checkpoint %" PRIu64 ") into %s failed: error "
                        "%u: %s",
                        w->pfx, w->epoch, checkpoint_id, s->commit_table, e,
                        mysql_error(w->conn));
  return SL_OK;
}

int sl__mariadb_prepare(void *writer, uint64_t checkpoint_id,
                        sl_bytes_t *out_committable, sl_error_t **out_err) {
  mwriter_t *w = writer;
  int rc;
  if (w->fenced != NULL) return check_fenced(w, out_err);
  if (!w->is_xa_open) { /* an epoch without rows: nothing to commit */
    w->epoch = checkpoint_id;
    return SL_OK;
  }
  if ((rc = flush_rows(w, true, out_err)) != SL_OK) return rc;
  if ((rc = insert_marker(w, checkpoint_id, out_err)) != SL_OK) return rc;
  unsigned e;
  if (sl__mariadb_run_xa(w->conn, "XA END ", &w->xid, "", &e) != SL_OK ||
      sl__mariadb_run_xa(w->conn, "XA PREPARE ", &w->xid, "", &e) != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: preparing XA '%s','%s' for checkpoint %" PRIu64
                        " failed: error %u (%s): %s",
                        w->pfx, w->xid.gtrid, w->xid.bqual, checkpoint_id, e,
                        mysql_sqlstate(w->conn), mysql_error(w->conn));
  w->is_xa_open = false;
  w->wait_epoch = w->epoch;
  committable_t c = {w->epoch, w->subtask, w->xid};
  rc = sl__mariadb_encode_committable(&c, out_committable);
  /* Another connection can commit the branch only once this one is gone;
   * the next epoch starts on a new connection. */
  mysql_close(w->conn);
  w->conn = NULL;
  w->epoch = checkpoint_id;
  if (rc != SL_OK) return sl_error_set(out_err, rc, "out of memory");
  return SL_OK;
}
