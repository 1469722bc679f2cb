/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the PostgreSQL sink: what pg_sink.c and pg_fence.c share.
 * pg_fence.c fences writers of older attempts (the fence table, the
 * termination of their sessions, the hand-over of the fence epoch from
 * recover to the writer); pg_sink.c is everything else.  See the design
 * notes in pg_sink.c and src/connectors/README.md.
 */
#ifndef SL_PG_INT_H
#define SL_PG_INT_H

#include <libpq-fe.h>

#include "sluice/sluice.h"

/* ---- pg_sink.c helpers used by pg_fence.c ---- */

/** @brief "schema.table" or "table" quoted part by part; NULL on ENOMEM.
 * The caller frees it.  @thread any */
char *sl__pg_quote_table(const char *table);
/** @brief Fill *out_err from a failed result: "<who>: <what>: SQLSTATE
 * <s>: <message>"; returns SL_EIO.  @thread any */
int sl__pg_res_error(sl_error_t **out_err, PGconn *conn, PGresult *res,
                     const char *who, const char *what);
/** @brief The result's SQLSTATE, or "" (never NULL).  @thread any */
const char *sl__pg_sqlstate(const PGresult *res);

/* ---- pg_fence.c ---- */

/* Longest application_name PostgreSQL keeps (NAMEDATALEN - 1) + NUL. */
#define SL_PG_APP_SIZE 64

/*
 * The fence registry of one sink instance: for each (job, sink uid,
 * subtask), the fence epoch that the last recover set, which the writer
 * of that subtask opened afterwards expects to find.  The tasks of all
 * subtasks share the instance, so a mutex guards it.
 */
typedef struct sl__pg_fences_s sl__pg_fences_t;

/** @brief A new, empty registry, and the instance's random nonce (it
 * marks the sessions of this instance in their application_name).
 * @return SL_OK or SL_ENOMEM.  @thread any */
int sl__pg_fences_create(sl__pg_fences_t **out_fences);
/** @brief Free; NULL does nothing.  @thread any, once no task uses it */
void sl__pg_fences_destroy(sl__pg_fences_t *f);
/** @brief The instance's nonce.  @thread any @locks none */
uint64_t sl__pg_fences_nonce(const sl__pg_fences_t *f);
/** @brief Record the fence epoch of (job, uid, subtask).  @return SL_OK or
 * SL_ENOMEM.  @thread any @locks takes the registry's mutex */
int sl__pg_fences_put(sl__pg_fences_t *f, const char *job, const char *uid,
                      uint32_t subtask, int64_t epoch);
/** @brief The fence epoch recover recorded for (job, uid, subtask); false
 * when none did.  @thread any @locks takes the registry's mutex */
bool sl__pg_fences_get(sl__pg_fences_t *f, const char *job, const char *uid,
                       uint32_t subtask, int64_t *out_epoch);

/**
 * @brief The application_name of a session of (job, uid, subtask) of the
 * instance with nonce: "sluice/<h>/<subtask>/<nonce>", and "/c" after it
 * for a committer, where <h> is 16 hex digits of a hash of job and uid
 * (names can be long; the server keeps 63 bytes).
 * @thread any
 */
void sl__pg_app_name(char buf[SL_PG_APP_SIZE], const char *job,
                     const char *uid, uint32_t subtask, uint64_t nonce,
                     bool is_committer);

/**
 * @brief Create the fence table if it does not exist (job text, sink_uid
 * text, subtask integer, epoch bigint, updated_at; primary key (job,
 * sink_uid, subtask)).  An existing table is left alone.
 * @return SL_OK or an error naming the table.  @thread the sink's task
 */
int sl__pg_fence_ensure_table(PGconn *conn, const char *table,
                              const char *who, sl_error_t **out_err);

/**
 * @brief Terminate the sessions of the owned subtasks of (job, uid) that
 * another instance (a foreign nonce in their application_name) opened:
 * writers and committers of older attempts.  A termination the role may
 * not do (42501) is logged as a warning and skipped: the fence stops that
 * writer at its next epoch.
 * @return SL_OK, or SL_EIO when reading pg_stat_activity fails.
 * @thread the sink's task (a committer's connection)
 */
int sl__pg_fence_terminate(PGconn *conn, const char *job, const char *uid,
                           const uint32_t *owned, uint32_t n_owned,
                           uint64_t nonce, const char *who,
                           sl_error_t **out_err);

/**
 * @brief Bump the fence rows of the owned subtasks (insert them at epoch 1
 * when absent), waiting at most lock_timeout_ms for their row locks, in
 * one transaction; out_epochs[k] gets owned[k]'s new epoch.
 * @return SL_OK; SL_EAGAIN when a lock was not granted in time (SQLSTATE
 * 55P03: a transaction of an older writer, open or prepared, holds the
 * row); another error with *out_err.
 * @thread the sink's task (a committer's connection, outside a
 * transaction block)
 */
int sl__pg_fence_bump(PGconn *conn, const char *table, const char *job,
                      const char *uid, const uint32_t *owned,
                      uint32_t n_owned, uint32_t lock_timeout_ms,
                      int64_t *out_epochs, const char *who,
                      sl_error_t **out_err);

/**
 * @brief Who holds locks on the fence table now, for a message: "pid P
 * ('app', state)" for sessions and "prepared transaction 'gid'" for
 * prepared ones, comma-separated, or "" (the caller frees it; NULL on
 * an error).
 * @thread the sink's task
 */
char *sl__pg_fence_holders(PGconn *conn, const char *table);

/**
 * @brief The writer's fence check, the first statement of every epoch's
 * transaction: "BEGIN" and "SELECT epoch ... FOR SHARE" in one round trip
 * (query from sl__pg_fence_check_sql).  The shared row lock stays until
 * the transaction ends, prepared transactions included, so a newer
 * attempt's bump waits for it.
 * @return SL_OK when the row holds want; a fatal SL_EFAILED naming the
 * sink, subtask and both epochs when it holds another or none (this
 * writer belongs to an older attempt); SL_EIO for a failed statement.
 * @thread the sink's task (the writer's connection, outside a
 * transaction block)
 */
int sl__pg_fence_begin(PGconn *conn, const char *query, const char *table,
                       const char *job, uint32_t subtask, int64_t want,
                       uint64_t epoch, const char *who,
                       sl_error_t **out_err);

/** @brief The query of sl__pg_fence_begin for (job, uid, subtask), with
 * literals escaped for conn; NULL on ENOMEM (the caller frees it with
 * sl_free).  @thread any */
char *sl__pg_fence_check_sql(PGconn *conn, const char *table,
                             const char *job, const char *uid,
                             uint32_t subtask);

#endif
