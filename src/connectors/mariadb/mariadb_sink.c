/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB sink, through Connector/C.  Exactly-once: every epoch of a
 * sink subtask is one XA branch, started at the epoch's first row with an
 * xid derived from (job, sink uid, subtask, epoch id) and the connection
 * id; prepare writes a marker row into the commit-log table inside the
 * branch, ends and prepares it, and closes the connection (MariaDB refuses
 * XA COMMIT from another connection with 1397 while the preparing one
 * lives); the committer commits from its own connection and resolves 1397
 * through the marker (present: already committed), XA RECOVER (listed: a
 * live holder, killed, then committed) or fails loudly (lost).  recover()
 * rolls back lingering branches of the owned subtasks, kills writers of
 * older attempts, found by the per-subtask writer lock (GET_LOCK) every
 * writer connection holds, and bumps the subtasks' fence rows, which
 * every branch checks first, so that a writer of an older attempt fails.
 * At-least-once: batched upserts committed at every flush, guarded by an
 * epoch column that never goes back.
 *
 * This file holds the sink object (its configuration and the committed
 * epochs the committers share with the writers), the vtables and the
 * public functions; the rest is in the files mariadb_int.h lists.  See
 * src/connectors/README.md and docs/connectors.md.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mariadb_int.h"

/* Record that the epoch of origin subtask `subtask` is committed. */
void sl__mariadb_mark_committed(msink_t *s, uint32_t subtask,
                                uint64_t epoch) {
  pthread_mutex_lock(&s->mu);
  if (subtask >= s->n_committed) {
    uint32_t n = subtask + 1u;
    uint64_t *p = sl_realloc(s->committed, n * sizeof(uint64_t));
    if (p != NULL) {
      memset(p + s->n_committed, 0,
             (n - s->n_committed) * sizeof(uint64_t));
      s->committed = p;
      s->n_committed = n;
    }
  }
  if (subtask < s->n_committed && s->committed[subtask] < epoch)
    s->committed[subtask] = epoch;
  pthread_mutex_unlock(&s->mu);
}

bool sl__mariadb_is_committed(msink_t *s, uint32_t subtask, uint64_t epoch) {
  pthread_mutex_lock(&s->mu);
  bool yes = subtask < s->n_committed && s->committed[subtask] >= epoch;
  pthread_mutex_unlock(&s->mu);
  return yes;
}

int sl__mariadb_fence_set(msink_t *s, uint32_t subtask, uint64_t epoch) {
  int rc = SL_OK;
  pthread_mutex_lock(&s->mu);
  if (subtask >= s->n_fence) {
    uint32_t n = subtask + 1u;
    uint64_t *p = sl_realloc(s->fence, n * sizeof(uint64_t));
    if (p != NULL) {
      memset(p + s->n_fence, 0, (n - s->n_fence) * sizeof(uint64_t));
      s->fence = p;
      s->n_fence = n;
    } else {
      rc = SL_ENOMEM;
    }
  }
  if (rc == SL_OK) s->fence[subtask] = epoch;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

uint64_t sl__mariadb_fence_get(msink_t *s, uint32_t subtask) {
  pthread_mutex_lock(&s->mu);
  uint64_t v = subtask < s->n_fence ? s->fence[subtask] : 0;
  pthread_mutex_unlock(&s->mu);
  return v;
}

/* ------------------------------------------------------------------ */
/* The sink. */

static void ms_destroy(void *ctx) {
  msink_t *s = ctx;
  if (s == NULL) return;
  sl_free(s->host);
  sl_free(s->user);
  sl_free(s->password);
  sl_free(s->database);
  sl_free(s->table);
  sl_free(s->commit_table);
  sl_free(s->fence_table);
  sl_free(s->epoch_column);
  for (uint32_t i = 0; i < s->n_key; i++) sl_free(s->key[i]);
  sl_free(s->key);
  sl_free(s->committed);
  sl_free(s->fence);
  pthread_mutex_destroy(&s->mu);
  sl_free(s);
}

static const sl_sink_vt_t mariadb_eo_vt = {
    "mariadb",
    sl__mariadb_writer_open,
    sl__mariadb_write,
    sl__mariadb_flush,
    sl__mariadb_writer_close,
    ms_destroy,
    sl__mariadb_prepare,
    sl__mariadb_committer_open,
    sl__mariadb_commit,
    sl__mariadb_recover,
    sl__mariadb_committer_close,
    sl__mariadb_committed_max};
static const sl_sink_vt_t mariadb_alo_vt = {
    "mariadb",
    sl__mariadb_writer_open,
    sl__mariadb_write,
    sl__mariadb_flush,
    sl__mariadb_writer_close,
    ms_destroy,
    NULL, NULL, NULL, NULL, NULL};

void sl_mariadb_sink_config_init(sl_mariadb_sink_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->port = SL_MARIADB_DEFAULT_PORT;
  cfg->mode = SL_MARIADB_UPSERT;
  cfg->delivery = SL_DELIVERY_EXACTLY_ONCE;
}

static int check_name(const char *what, const char *v, size_t max,
                      sl_error_t **out_err) {
  if (v == NULL || v[0] == '\0')
    return sl_error_set(out_err, SL_EINVAL, "mariadb sink: no %s", what);
  if (strlen(v) > max)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: %s '%s' is longer than %zu bytes",
                        what, v, max);
  return SL_OK;
}

int sl_mariadb_sink_create(const sl_mariadb_sink_config_t *cfg,
                           const sl_sink_vt_t **out_vt, void **out_ctx,
                           sl_error_t **out_err) {
  int rc;
  if ((rc = check_name("host", cfg->host, 255, out_err)) != SL_OK ||
      (rc = check_name("user", cfg->user, 128, out_err)) != SL_OK ||
      (rc = check_name("database", cfg->database, 64, out_err)) != SL_OK ||
      (rc = check_name("table", cfg->table, 64, out_err)) != SL_OK)
    return rc;
  if (cfg->commit_table != NULL &&
      (rc = check_name("commit-log table", cfg->commit_table, 64,
                       out_err)) != SL_OK)
    return rc;
  if (cfg->fence_table != NULL &&
      (rc = check_name("fence table", cfg->fence_table, 64, out_err)) !=
          SL_OK)
    return rc;
  const char *ct = cfg->commit_table != NULL
                       ? cfg->commit_table
                       : SL_MARIADB_DEFAULT_COMMIT_TABLE;
  const char *ft = cfg->fence_table != NULL ? cfg->fence_table
                                            : SL_MARIADB_DEFAULT_FENCE_TABLE;
  if (strcmp(ct, ft) == 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: the commit-log table and the fence "
                        "table are both '%s'; they need different names",
                        ct);
  if (strcmp(cfg->table, ct) == 0 || strcmp(cfg->table, ft) == 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: table '%s' is also the sink's %s "
                        "table; the rows need a table of their own",
                        cfg->table,
                        strcmp(cfg->table, ct) == 0 ? "commit-log"
                                                    : "fence");
  if (cfg->epoch_column != NULL &&
      (rc = check_name("epoch column", cfg->epoch_column, 64, out_err)) !=
          SL_OK)
    return rc;
  if (cfg->port < 0 || cfg->port > 65535)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: port %d is not in 1..65535",
                        cfg->port);
  if (cfg->mode != SL_MARIADB_INSERT && cfg->mode != SL_MARIADB_UPSERT)
    return sl_error_set(out_err, SL_EINVAL, "mariadb sink: unknown mode %d",
                        (int)cfg->mode);
  if (cfg->delivery != SL_DELIVERY_EXACTLY_ONCE &&
      cfg->delivery != SL_DELIVERY_AT_LEAST_ONCE)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: unknown delivery %d",
                        (int)cfg->delivery);
  if (cfg->mode == SL_MARIADB_UPSERT && cfg->n_key == 0)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: mode upsert needs key columns (the "
                        "table's primary or unique key)");
  if (cfg->delivery == SL_DELIVERY_AT_LEAST_ONCE &&
      cfg->mode != SL_MARIADB_UPSERT)
    return sl_error_set(out_err, SL_EINVAL,
                        "mariadb sink: delivery at-least-once needs mode "
                        "upsert (an insert replayed after a restore would "
                        "be written twice)");
  for (uint32_t k = 0; k < cfg->n_key; k++) {
    if ((rc = check_name("key column", cfg->key[k], 64, out_err)) != SL_OK)
      return rc;
    for (uint32_t j = 0; j < k; j++)
      if (strcmp(cfg->key[j], cfg->key[k]) == 0)
        return sl_error_set(out_err, SL_EINVAL,
                            "mariadb sink: key column %s is listed twice",
                            cfg->key[k]);
  }
  msink_t *s = sl_calloc(1, sizeof(*s));
  if (s == NULL) return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  pthread_mutex_init(&s->mu, NULL);
  s->port = cfg->port == 0 ? SL_MARIADB_DEFAULT_PORT : cfg->port;
  s->mode = cfg->mode;
  s->delivery = cfg->delivery;
  s->batch_rows = cfg->batch_rows ? cfg->batch_rows : SL_MARIADB_DEFAULT_BATCH;
  s->connect_timeout_ms =
      cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 10000u;
  s->host = sl_strdup(cfg->host);
  s->user = sl_strdup(cfg->user);
  s->password = sl_strdup(cfg->password != NULL ? cfg->password : "");
  s->database = sl_strdup(cfg->database);
  s->table = sl_strdup(cfg->table);
  s->commit_table = sl_strdup(cfg->commit_table != NULL
                                  ? cfg->commit_table
                                  : SL_MARIADB_DEFAULT_COMMIT_TABLE);
  s->fence_table = sl_strdup(cfg->fence_table != NULL
                                 ? cfg->fence_table
                                 : SL_MARIADB_DEFAULT_FENCE_TABLE);
  s->epoch_column = sl_strdup(cfg->epoch_column != NULL
                                  ? cfg->epoch_column
                                  : SL_MARIADB_DEFAULT_EPOCH_COLUMN);
  s->key = sl_calloc(cfg->n_key + 1u, sizeof(char *));
  bool ok = s->host && s->user && s->password && s->database && s->table &&
            s->commit_table && s->fence_table && s->epoch_column && s->key;
  for (uint32_t k = 0; ok && k < cfg->n_key; k++) {
    s->key[k] = sl_strdup(cfg->key[k]);
    if (s->key[k] == NULL) ok = false;
    else s->n_key = k + 1;
  }
  if (!ok) {
    ms_destroy(s);
    return sl_error_set(out_err, SL_ENOMEM, "out of memory");
  }
  *out_vt = is_eo(s) ? &mariadb_eo_vt : &mariadb_alo_vt;
  *out_ctx = s;
  return SL_OK;
}

int sl_mariadb_sink_check(const sl_mariadb_sink_config_t *cfg,
                          const sl_schema_t *schema, sl_error_t **out_err) {
  const sl_sink_vt_t *vt;
  void *ctx = NULL;
  int rc = sl_mariadb_sink_create(cfg, &vt, &ctx, out_err);
  if (rc != SL_OK) return rc;
  msink_t *s = ctx;
  char pfx[300];
  snprintf(pfx, sizeof(pfx), "mariadb sink %s:%d/%s.%s", s->host, s->port,
           s->database, s->table);
  MYSQL *c = NULL;
  rc = sl__mariadb_connect(s, pfx, &c, out_err);
  if (rc == SL_OK && is_eo(s))
    rc = sl__mariadb_check_server_xa(c, s, pfx, out_err);
  /* The marker and fence tables, where they already exist. */
  if (rc == SL_OK && is_eo(s))
    rc = sl__mariadb_check_innodb(c, s, s->commit_table,
                                  "the commit-log table", pfx, out_err);
  if (rc == SL_OK && is_eo(s))
    rc = sl__mariadb_check_innodb(c, s, s->fence_table, "the fence table",
                                  pfx, out_err);
  if (rc == SL_OK) rc = sl__mariadb_check_table(c, s, schema, pfx, out_err);
  if (c != NULL) mysql_close(c);
  ms_destroy(s);
  return rc;
}
