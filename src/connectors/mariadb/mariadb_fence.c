/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fencing the writers of older attempts of the MariaDB sink (W9 of the
 * failure windows in docs/connectors.md): the fence table, the bump that
 * recover() makes, and the check every XA branch makes first.
 *
 * DESIGN NOTES (fencing).  The fence table has one InnoDB row per (job,
 * sink uid, subtask) with a counter, the fence epoch:
 *
 *   recover() of subtask j (owning old subtasks O_j, j among them):
 *     loop: kill writer-lock holders of O_j; roll back lingering prepared
 *           branches of O_j (XA RECOVER); then BUMP:
 *           INSERT IGNORE the rows of O_j; START TRANSACTION;
 *           UPDATE epoch = epoch + 1 for each i in O_j (lock wait 1 s);
 *           read row j; COMMIT  --> fence[j] := the new epoch
 *           on 1205 (lock wait timeout) or 1213 (deadlock): ROLLBACK and
 *           loop again, at most FENCE_ROUNDS times, then fail the task.
 *   writer of subtask j: at writer_open it keeps fence[j] as its own
 *     epoch F; each XA branch starts with
 *       XA START; SELECT epoch ... WHERE subtask = j LOCK IN SHARE MODE
 *     and goes on only when the row holds F; otherwise the branch is
 *     rolled back, the connection closed, and the writer is FENCED: every
 *     later call fails with the same message (the task fails).
 *
 * Invariants:
 *   F1  a branch that passed its check holds a shared lock on its fence
 *       row until it ends: an open branch until rollback or disconnect, a
 *       prepared one until XA COMMIT or XA ROLLBACK (prepared branches
 *       keep their locks, also after their connection closed).
 *   F2  so the bump of row i succeeds only when no branch of subtask i
 *       that checked an older epoch is open or prepared; after it, every
 *       such branch is gone (rolled back) or was committed before it.
 *   F3  a branch that checks after the bump reads the new epoch (a
 *       locking read sees the newest committed row) and a writer opened
 *       before the bump holds an older one: it is fenced, and nothing it
 *       writes after its last prepare can become visible.
 *   F4  the bump never waits longer than 1 s per round, so a branch the
 *       kill did not reach (a writer that connected after it) makes the
 *       round fail with 1205, and the next round kills it through its
 *       writer lock.
 *
 * A writer opened without a fence epoch (no recover() of its subtask ran
 * in this sink instance; the engine always runs it before writer_open)
 * refuses to start a branch.  See mariadb_int.h and docs/connectors.md.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "mariadb_int.h"

static int fence_where(sl_bytes_t *q, const char *job, const char *uid,
                       uint32_t subtask) {
  int rc = sl_bytes_append_str(q, " WHERE job = ");
  if (rc == SL_OK) rc = sl__mariadb_hex(q, job, strlen(job));
  if (rc == SL_OK) rc = sl_bytes_append_str(q, " AND sink_uid = ");
  if (rc == SL_OK) rc = sl__mariadb_hex(q, uid, strlen(uid));
  if (rc == SL_OK)
    rc = sl_bytes_printf(q, " AND subtask = %" PRIu32, subtask);
  return rc;
}

int sl__mariadb_create_fence_table(MYSQL *c, const msink_t *s,
                                   const char *pfx, sl_error_t **out_err) {
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "CREATE TABLE IF NOT EXISTS ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->fence_table);
  if (rc == SL_OK)
    rc = sl_bytes_append_str(
        &q, " (job VARBINARY(64) NOT NULL, sink_uid VARBINARY(64) NOT NULL,"
            " subtask INT UNSIGNED NOT NULL, epoch BIGINT UNSIGNED NOT NULL,"
            " PRIMARY KEY (job, sink_uid, subtask)) ENGINE=InnoDB");
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    sl_bytes_close(&q);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  unsigned e;
  rc = sl__mariadb_run(c, sql, q.len, &e);
  sl_bytes_close(&q);
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: cannot create the fence table %s.%s (error %u: "
                        "%s); grant CREATE on %s or create it as "
                        "docs/connectors.md shows",
                        pfx, s->database, s->fence_table, e, mysql_error(c),
                        s->database);
  return sl__mariadb_check_innodb(c, s, s->fence_table, "the fence table",
                                  pfx, out_err);
}

/* The bump's statements after INSERT IGNORE, in one transaction. */
static int bump_txn(MYSQL *c, const msink_t *s, const char *job,
                    const char *uid, const uint32_t *owned,
                    uint32_t n_owned, uint32_t subtask, uint64_t *out_epoch,
                    unsigned *out_errno) {
  int rc = sl__mariadb_run(c, "START TRANSACTION", 17, out_errno);
  for (uint32_t i = 0; rc == SL_OK && i < n_owned; i++) {
    sl_bytes_t q;
    sl_bytes_init(&q);
    rc = sl_bytes_append_str(&q, "UPDATE ");
    if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->fence_table);
    if (rc == SL_OK) rc = sl_bytes_append_str(&q, " SET epoch = epoch + 1");
    if (rc == SL_OK) rc = fence_where(&q, job, uid, owned[i]);
    const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
    if (sql == NULL) {
      *out_errno = 0;
      rc = SL_ENOMEM;
    } else {
      rc = sl__mariadb_run(c, sql, q.len, out_errno);
    }
    sl_bytes_close(&q);
  }
  if (rc != SL_OK) return rc;
  sl_bytes_t q;
  sl_bytes_init(&q);
  rc = sl_bytes_append_str(&q, "SELECT epoch FROM ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->fence_table);
  if (rc == SL_OK) rc = fence_where(&q, job, uid, subtask);
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  char v[32];
  bool found = false;
  *out_errno = 0;
  rc = sql == NULL ? SL_ENOMEM
                   : sl__mariadb_query_text(c, sql, v, sizeof(v), &found,
                                            out_errno);
  sl_bytes_close(&q);
  if (rc != SL_OK) return rc;
  if (!found) return SL_ENOTFOUND;
  if ((rc = sl__mariadb_run(c, "COMMIT", 6, out_errno)) != SL_OK) return rc;
  *out_epoch = strtoull(v, NULL, 10);
  return SL_OK;
}

int sl__mariadb_fence_bump(MYSQL *c, const msink_t *s, const char *job,
                           const char *uid, const uint32_t *owned,
                           uint32_t n_owned, uint32_t subtask,
                           uint64_t *out_epoch, unsigned *out_errno) {
  static const char short_wait[] = "SET SESSION innodb_lock_wait_timeout = 1";
  static const char back[] = "SET SESSION innodb_lock_wait_timeout = DEFAULT";
  int rc = sl__mariadb_run(c, short_wait, sizeof(short_wait) - 1, out_errno);
  if (rc != SL_OK) return rc;
  /* The rows of the owned subtasks, at fence epoch 0 when new. */
  sl_bytes_t q;
  sl_bytes_init(&q);
  rc = sl_bytes_append_str(&q, "INSERT IGNORE INTO ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->fence_table);
  if (rc == SL_OK)
    rc = sl_bytes_append_str(&q, " (job, sink_uid, subtask, epoch) VALUES ");
  for (uint32_t i = 0; rc == SL_OK && i < n_owned; i++) {
    if (i > 0) rc = sl_bytes_append(&q, ",", 1);
    if (rc == SL_OK) rc = sl_bytes_append(&q, "(", 1);
    if (rc == SL_OK) rc = sl__mariadb_hex(&q, job, strlen(job));
    if (rc == SL_OK) rc = sl_bytes_append(&q, ",", 1);
    if (rc == SL_OK) rc = sl__mariadb_hex(&q, uid, strlen(uid));
    if (rc == SL_OK) rc = sl_bytes_printf(&q, ",%" PRIu32 ",0)", owned[i]);
  }
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  if (sql == NULL) {
    *out_errno = 0;
    rc = SL_ENOMEM;
  } else {
    rc = sl__mariadb_run(c, sql, q.len, out_errno);
  }
  sl_bytes_close(&q);
  if (rc == SL_OK)
    rc = bump_txn(c, s, job, uid, owned, n_owned, subtask, out_epoch,
                  out_errno);
  if (rc != SL_OK) {
    /* A lock wait timeout ends the statement, not the transaction. */
    unsigned saved = *out_errno, e;
    (void)sl__mariadb_run(c, "ROLLBACK", 8, &e);
    *out_errno = saved;
    if (saved == ER_LOCK_WAIT_TIMEOUT || saved == ER_LOCK_DEADLOCK)
      rc = SL_EAGAIN;
  }
  unsigned e2;
  if (sl__mariadb_run(c, back, sizeof(back) - 1, &e2) != SL_OK &&
      rc == SL_OK) {
    *out_errno = e2;
    rc = SL_EIO;
  }
  return rc;
}

int sl__mariadb_fence_check(MYSQL *c, const msink_t *s, const char *job,
                            const char *uid, uint32_t subtask,
                            uint64_t expect, const char *pfx,
                            sl_error_t **out_err) {
  sl_bytes_t q;
  sl_bytes_init(&q);
  int rc = sl_bytes_append_str(&q, "SELECT epoch FROM ");
  if (rc == SL_OK) rc = sl__mariadb_ident(&q, s->fence_table);
  if (rc == SL_OK) rc = fence_where(&q, job, uid, subtask);
  if (rc == SL_OK) rc = sl_bytes_append_str(&q, " LOCK IN SHARE MODE");
  const char *sql = rc == SL_OK ? sl__mariadb_cstr(&q) : NULL;
  char v[32];
  bool found = false;
  unsigned e = 0;
  rc = sql == NULL ? SL_ENOMEM
                   : sl__mariadb_query_text(c, sql, v, sizeof(v), &found,
                                            &e);
  sl_bytes_close(&q);
  if (rc == SL_ENOMEM)
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  if (rc != SL_OK)
    return sl_error_set(out_err, SL_EIO,
                        "%s: reading the fence row of subtask %" PRIu32
                        " in %s.%s failed: error %u (%s): %s",
                        pfx, subtask, s->database, s->fence_table, e,
                        mysql_sqlstate(c), mysql_error(c));
  if (!found)
    return sl_error_set(out_err, SL_ESTATE,
                        "%s: fenced off: %s.%s has no row for job '%s', "
                        "sink '%s', subtask %" PRIu32 " (this writer opened "
                        "at fence epoch %" PRIu64 "); someone deleted it, "
                        "so this writer cannot tell that it is the newest "
                        "and stops",
                        pfx, s->database, s->fence_table, job, uid, subtask,
                        expect);
  uint64_t now = strtoull(v, NULL, 10);
  if (now != expect)
    return sl_error_set(out_err, SL_ESTATE,
                        "%s: fenced off: %s.%s holds fence epoch %" PRIu64
                        " for job '%s', sink '%s', subtask %" PRIu32
                        ", but this writer opened at fence epoch %" PRIu64
                        ": a newer attempt has recovered the subtask, so "
                        "this writer belongs to an older attempt and stops "
                        "(what it wrote since its last prepare is rolled "
                        "back)",
                        pfx, s->database, s->fence_table, now, job, uid,
                        subtask, expect);
  return SL_OK;
}
