/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the MariaDB sink (src/connectors/mariadb/): the sink object,
 * the xid and committable types, and the functions its files share.
 * mariadb_sink.c holds the sink object and its configuration,
 * mariadb_sql.c the connection and statement helpers, mariadb_check.c the
 * start checks, mariadb_xid.c the xid and the committable codec,
 * mariadb_fence.c the fencing of older attempts' writers,
 * mariadb_writer.c the writer (XA START, rows, XA PREPARE) and
 * mariadb_committer.c the committer (XA COMMIT, recover).  Like the rest
 * of the connectors it uses the public API only (sluice/sluice.h) and
 * Connector/C.  See src/connectors/README.md and docs/connectors.md.
 */
#ifndef SL_MARIADB_INT_H
#define SL_MARIADB_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "sluice/sluice.h"

/* Longest gtrid or bqual MariaDB accepts. */
#define XID_PART_MAX 64u

/*
 * One sink instance (the ctx of its vtable), shared by the writers and
 * committers of all its subtasks.  The configuration is written once by
 * sl_mariadb_sink_create and read-only afterwards; committed, n_committed,
 * fence and n_fence are under mu (committers write them on their tasks'
 * threads, writers read them on theirs).
 */
typedef struct msink_s {
  char *host, *user, *password, *database, *table, *commit_table,
      *fence_table, *epoch_column;
  char **key;
  uint32_t n_key;
  int port;
  sl_mariadb_mode_t mode;
  sl_delivery_t delivery;
  uint32_t batch_rows;
  uint32_t connect_timeout_ms;
  /* The newest epoch committed per origin subtask (committers write it,
   * writers read it), under mu. */
  pthread_mutex_t mu;
  uint64_t *committed;
  uint32_t n_committed;
  /* The fence epoch recover() obtained per subtask (0: none yet), under
   * mu: the committer of subtask j sets fence[j] when it bumped the fence
   * row, and the writer of subtask j, which opens after it, keeps the
   * value it finds at writer_open as its own (mariadb_fence.c). */
  uint64_t *fence;
  uint32_t n_fence;
} msink_t;

static inline bool is_eo(const msink_t *s) {
  return s->delivery == SL_DELIVERY_EXACTLY_ONCE;
}

/* Record that the epoch of origin subtask `subtask` is committed.
 * @thread any.  @locks takes s->mu. */
void sl__mariadb_mark_committed(msink_t *s, uint32_t subtask,
                                uint64_t epoch);
/* Whether that epoch (or a newer one) of subtask is committed.
 * @thread any.  @locks takes s->mu. */
bool sl__mariadb_is_committed(msink_t *s, uint32_t subtask, uint64_t epoch);
/* Record the fence epoch recover() obtained for subtask.
 * @return SL_OK or SL_ENOMEM.  @thread any.  @locks takes s->mu. */
int sl__mariadb_fence_set(msink_t *s, uint32_t subtask, uint64_t epoch);
/* The fence epoch recorded for subtask, 0 when none.
 * @thread any.  @locks takes s->mu. */
uint64_t sl__mariadb_fence_get(msink_t *s, uint32_t subtask);

/* ---- mariadb_sql.c: statements and connections. ---- */

/* Append `name` quoted as an identifier (backquotes doubled). */
int sl__mariadb_ident(sl_bytes_t *b, const char *name);
/* Append n bytes as a hex literal X'..' ('' when n is 0). */
int sl__mariadb_hex(sl_bytes_t *b, const void *p, size_t n);
/* A NUL-terminated view of the buffer (NULL when out of memory). */
const char *sl__mariadb_cstr(sl_bytes_t *b);
/* Whether a client or server error number means a lost connection. */
bool sl__mariadb_is_conn_error(unsigned e);
/* Run one statement and discard any result; *out_errno gets the error. */
int sl__mariadb_run(MYSQL *c, const char *sql, size_t len,
                    unsigned *out_errno);
/* First column of the first row of a query as text into buf (*out_found
 * false when no row or NULL). */
int sl__mariadb_query_text(MYSQL *c, const char *sql, char *buf,
                           size_t size, bool *out_found,
                           unsigned *out_errno);
/* Connect with the sink's settings; errors name pfx, host:port, the user
 * or database, and the OS error of a failed connect. */
int sl__mariadb_connect(const msink_t *s, const char *pfx, MYSQL **out,
                        sl_error_t **out_err);

/* ---- mariadb_check.c: start checks. ---- */

/* Server version (MariaDB >= 10.5.2, MySQL >= 5.7.7) and XA RECOVER. */
int sl__mariadb_check_server_xa(MYSQL *c, const msink_t *s, const char *pfx,
                                sl_error_t **out_err);
/* binlog_format, the table, its engine and its columns against schema
 * (NULL: no column checks), the epoch column for at-least-once. */
int sl__mariadb_check_table(MYSQL *c, const msink_t *s,
                            const sl_schema_t *schema, const char *pfx,
                            sl_error_t **out_err);
/* CREATE TABLE IF NOT EXISTS the commit-log (marker) table, and check
 * that it is InnoDB. */
int sl__mariadb_create_commit_table(MYSQL *c, const msink_t *s,
                                    const char *pfx, sl_error_t **out_err);
/* Table `table` of the sink's database uses InnoDB (what names it in
 * messages: "the fence table"). */
int sl__mariadb_check_innodb(MYSQL *c, const msink_t *s, const char *table,
                             const char *what, const char *pfx,
                             sl_error_t **out_err);

/* ---- mariadb_fence.c: fencing writers of older attempts. ---- */

/* CREATE TABLE IF NOT EXISTS the fence table, and check it is InnoDB. */
int sl__mariadb_create_fence_table(MYSQL *c, const msink_t *s,
                                   const char *pfx, sl_error_t **out_err);
/* One bump of the fence rows of the owned subtasks (recover()): on
 * success *out_epoch is row `subtask`'s new fence epoch.  @return SL_OK;
 * SL_EAGAIN when a row stayed locked (1205, 1213: roll back lingering
 * branches and try again); SL_ENOTFOUND (row `subtask` vanished); SL_EIO
 * or SL_ENOMEM with *out_errno. */
int sl__mariadb_fence_bump(MYSQL *c, const msink_t *s, const char *job,
                           const char *uid, const uint32_t *owned,
                           uint32_t n_owned, uint32_t subtask,
                           uint64_t *out_epoch, unsigned *out_errno);
/* Inside a writer's new XA branch: read the fence row of subtask LOCK IN
 * SHARE MODE and compare it with expect.  @return SL_OK; SL_ESTATE with
 * the "fenced off" message; SL_EIO; SL_ENOMEM. */
int sl__mariadb_fence_check(MYSQL *c, const msink_t *s, const char *job,
                            const char *uid, uint32_t subtask,
                            uint64_t expect, const char *pfx,
                            sl_error_t **out_err);

/* ---- mariadb_xid.c: xids and committables. ---- */

/* An xid: gtrid "sl/<job>/<uid>", bqual "<subtask>/<epoch>/<conn id>". */
typedef struct xid_s {
  char gtrid[XID_PART_MAX + 1];
  char bqual[XID_PART_MAX + 1];
  size_t gl, bl;
} xid_t;

/* What a committable holds (the codec is in mariadb_xid.c). */
typedef struct committable_s {
  uint64_t epoch;
  uint32_t subtask;
  xid_t xid;
} committable_t;

int sl__mariadb_make_gtrid(const char *job, const char *uid,
                           const char *pfx, xid_t *x, sl_error_t **out_err);
void sl__mariadb_make_bqual(xid_t *x, uint32_t subtask, uint64_t epoch,
                            uint64_t conn_id);
bool sl__mariadb_parse_bqual(const char *p, size_t n, uint32_t *out_subtask,
                             uint64_t *out_epoch, uint64_t *out_conn);
/* Run "<verb><xid><suffix>", e.g. "XA START " + xid + "". */
int sl__mariadb_run_xa(MYSQL *c, const char *verb, const xid_t *x,
                       const char *suffix, unsigned *out_errno);
/* The name of the writer lock (GET_LOCK) of (gtrid, subtask). */
void sl__mariadb_lock_name(const char *gtrid, uint32_t subtask, char *buf,
                           size_t size);
int sl__mariadb_encode_committable(const committable_t *c, sl_bytes_t *out);
bool sl__mariadb_decode_committable(const uint8_t *p, size_t len,
                                    committable_t *c);

/* ---- mariadb_writer.c: the vtable's writer half. ---- */

int sl__mariadb_writer_open(void *ctx, const sl_sink_init_t *init,
                            void **out_writer, sl_error_t **out_err);
int sl__mariadb_write(void *writer, const sl_row_t *row,
                      sl_error_t **out_err);
int sl__mariadb_flush(void *writer, sl_error_t **out_err);
int sl__mariadb_writer_close(void *writer, bool is_success,
                             sl_error_t **out_err);
int sl__mariadb_prepare(void *writer, uint64_t checkpoint_id,
                        sl_bytes_t *out_committable, sl_error_t **out_err);

/* ---- mariadb_committer.c: the vtable's committer half. ---- */

int sl__mariadb_committer_open(void *ctx, const sl_committer_init_t *init,
                               void **out_committer, sl_error_t **out_err);
int sl__mariadb_commit(void *committer, uint64_t checkpoint_id,
                       uint32_t origin_subtask, const uint8_t *bytes,
                       size_t len, uint32_t attempt,
                       sl_commit_status_t *out_status,
                       sl_error_t **out_err);
int sl__mariadb_recover(void *committer, sl_error_t **out_err);
int sl__mariadb_committed_max(void *committer, uint64_t *out_ckpt,
                              sl_bytes_t *out_evidence,
                              sl_error_t **out_err);
void sl__mariadb_committer_close(void *committer);

#endif
