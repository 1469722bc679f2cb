/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Real PostgreSQL 15 and MariaDB 10.11 servers for tests: each start makes
 * a fresh temporary directory, initialises a data directory in it, starts
 * the server on a free 127.0.0.1 port (as the postgres or mysql user when
 * the test runs as root) and waits until it answers.  A guard process
 * (a fork of the test, system calls only) owns the server: it stops the
 * server when the test stops it, and also when the test process dies
 * (SIGKILL included), so a killed test leaves no server behind.  Small SQL
 * helpers over libpq and Connector/C serve the tests' assertions.  See
 * docs/testing-servers.md.
 */
#ifndef SL_SERVERS_H
#define SL_SERVERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <libpq-fe.h>
#include <mysql.h>

#include "sluice/sluice.h"

typedef enum sl_server_kind {
  SL_SERVER_POSTGRES = 1, /* PostgreSQL 15, /usr/lib/postgresql/15/bin */
  SL_SERVER_MARIADB = 2   /* MariaDB 10.11, mariadbd */
} sl_server_kind_t;

/*
 * How a server stops.  CLEAN: PostgreSQL's fast shutdown (SIGINT: clients
 * are disconnected, a checkpoint is written) or MariaDB's normal shutdown
 * (SIGTERM).  CRASH: PostgreSQL's immediate shutdown (SIGQUIT: no
 * checkpoint, crash recovery at the next start) or SIGKILL of mariadbd.
 * Both keep the data directory.
 */
typedef enum sl_server_stop_mode {
  SL_SERVER_STOP_CLEAN = 0,
  SL_SERVER_STOP_CRASH = 1
} sl_server_stop_mode_t;

typedef struct sl_server_opts_s {
  sl_server_kind_t kind;
  /*
   * false (the default): fsync=off and full_page_writes=off (PostgreSQL),
   * innodb_flush_log_at_trx_commit=2 and sync_binlog=0 (MariaDB).  Every
   * commit and prepare is still written to the OS before the server
   * answers (PostgreSQL flushes the WAL of PREPARE TRANSACTION and COMMIT
   * PREPARED whatever synchronous_commit says, and it stays on), so all
   * of it survives a crash or kill of the server process; only an OS
   * crash could lose it, and tests do not crash the OS.  true: fsync=on,
   * full_page_writes=on, innodb_flush_log_at_trx_commit=1, sync_binlog=1.
   */
  bool is_durable;
  /* PostgreSQL max_prepared_transactions; 0 selects 64, -1 disables
   * prepared transactions (the server's default, for the 55000 test). */
  int max_prepared_transactions;
  int ready_timeout_ms; /* 0 selects 30000: start-up and stop bound */
  /* 0: a free port is chosen (bind-probed, retried when the server finds
   * it taken).  Otherwise this port, without retry. */
  int port;
  const char *base_dir; /* NULL: $TMPDIR, else /tmp */
  /* NULL-terminated extra settings, "name=value": PostgreSQL "-c" pairs,
   * MariaDB "--name=value" options.  Borrowed during sl_server_start. */
  const char *const *extra_settings;
} sl_server_opts_t;

typedef struct sl_server_s sl_server_t;

/** @brief Defaults for kind.  @thread any */
void sl_server_opts_init(sl_server_opts_t *opts, sl_server_kind_t kind);

/**
 * @brief Create a temporary directory, initialise a data directory, start
 * the server and wait until it accepts connections.
 * @param[out] out_srv written on success only.
 * @return SL_OK; SL_EINVAL (options); -ETIMEDOUT (not ready within the
 * bound); SL_EIO (initdb or the server failed: the message quotes the last
 * lines of its log); a negated errno.  On error nothing is left running
 * and the directory is removed (SL_TEST_KEEP set in the environment keeps
 * it for a post-mortem).
 * @thread any; the guard watches the process, not the thread.
 * @ownership the caller destroys *out_srv with sl_server_destroy.
 */
int sl_server_start(const sl_server_opts_t *opts, sl_server_t **out_srv,
                    sl_error_t **out_err);

/**
 * @brief Stop the server and wait (bounded) until it has exited; the data
 * directory and the port stay reserved for sl_server_start_again.
 * Stopping a stopped server does nothing.
 * @return SL_OK; -ETIMEDOUT (it was then killed).
 * @thread any, one at a time per server.
 */
int sl_server_stop(sl_server_t *srv, sl_server_stop_mode_t mode,
                   sl_error_t **out_err);

/**
 * @brief Start a stopped server again on the same data directory and
 * port, and wait until it answers.
 * @return as sl_server_start; SL_ESTATE when it is running.
 */
int sl_server_start_again(sl_server_t *srv, sl_error_t **out_err);

/** @brief sl_server_stop, then sl_server_start_again. */
int sl_server_restart(sl_server_t *srv, sl_server_stop_mode_t mode,
                      sl_error_t **out_err);

/**
 * @brief Stop the server (clean) if it runs, remove its directory, free.
 * NULL does nothing.  Servers not destroyed are stopped at exit, and by
 * their guard when the process dies.
 */
void sl_server_destroy(sl_server_t *srv);

/* Connection facts.  Strings are borrowed, valid until destroy. */
sl_server_kind_t sl_server_kind(const sl_server_t *srv);
const char *sl_server_host(const sl_server_t *srv); /* "127.0.0.1" */
int sl_server_port(const sl_server_t *srv);
const char *sl_server_user(const sl_server_t *srv); /* postgres / root */
const char *sl_server_dbname(const sl_server_t *srv); /* postgres / sluice */
/* libpq conninfo "host=127.0.0.1 port=N user=postgres dbname=postgres
 * sslmode=disable gssencmode=disable" (PostgreSQL only; NULL for
 * MariaDB). */
const char *sl_server_conninfo(const sl_server_t *srv);
const char *sl_server_dir(const sl_server_t *srv);
const char *sl_server_log_path(const sl_server_t *srv);
/* The server's main process (postmaster, mariadbd), or -1 when stopped. */
pid_t sl_server_pid(const sl_server_t *srv);
/* The guard process that owns it, or -1 when stopped. */
pid_t sl_server_guard_pid(const sl_server_t *srv);

/* ------------------------------------------------------------------ */
/* SQL helpers for assertions.  A failed statement is SL_EIO with a
 * message "SQLSTATE <s>: <server message>" (PostgreSQL) or "error <n>
 * (<sqlstate>): <message>" (MariaDB), and the code is also returned in the
 * out_ parameter when given. */

/** @brief Connect with libpq; the message names conninfo on failure. */
int sl_pg_connect(const char *conninfo, PGconn **out_conn,
                  sl_error_t **out_err);
/** @brief libpq conninfo for a port on 127.0.0.1 (for a proxy in front).
 * Writes at most size bytes. */
void sl_pg_conninfo_port(const sl_server_t *srv, int port, char *buf,
                         size_t size);
/**
 * @brief Run one statement (or a simple-query string).  out_sqlstate
 * (6 bytes, may be NULL) receives "00000" or the error's SQLSTATE, or ""
 * when the connection was lost without one.
 */
int sl_pg_exec(PGconn *conn, const char *sql, char *out_sqlstate,
               sl_error_t **out_err);
/** @brief First column of the first row as int64; SL_ENOTFOUND when no
 * row or NULL. */
int sl_pg_query_int64(PGconn *conn, const char *sql, int64_t *out_value,
                      sl_error_t **out_err);
/** @brief First column of the first row as text (caller frees with
 * sl_free); SL_ENOTFOUND when no row or NULL. */
int sl_pg_query_text(PGconn *conn, const char *sql, char **out_text,
                     sl_error_t **out_err);

/** @brief Connect with Connector/C to host:port (database may be NULL),
 * without TLS. */
int sl_my_connect(const sl_server_t *srv, int port, MYSQL **out_conn,
                  sl_error_t **out_err);
/** @brief Run one statement, discarding any result.  out_errno (may be
 * NULL) receives 0 or the server's error number. */
int sl_my_exec(MYSQL *conn, const char *sql, unsigned *out_errno,
               sl_error_t **out_err);
int sl_my_query_int64(MYSQL *conn, const char *sql, int64_t *out_value,
                      sl_error_t **out_err);
int sl_my_query_text(MYSQL *conn, const char *sql, char **out_text,
                     sl_error_t **out_err);

/* ------------------------------------------------------------------ */
/* Process checks for tests. */

/** @brief True when pid no longer exists (or is a zombie). */
bool sl_pid_is_gone(pid_t pid);

#endif
