/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The free server-id range check of the CDC source: its replication
 * connections use the server ids [base, base + n), and MariaDB drops the
 * older of two replication connections that use one id (error 4052), so
 * no id of the range may be the server's own or a connected replica's.
 * See cdc_int.h and docs/cdc-mariadb.md, "Server ids".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cdc_int.h"
#include "mariadb_int.h"

typedef struct used_s {
  uint32_t id;
  char who[300];
} used_t;

static void range_text(char *out, size_t size, uint64_t base, uint32_t n) {
  if (n == 1) snprintf(out, size, "%" PRIu64, base);
  else snprintf(out, size, "%" PRIu64 "-%" PRIu64, base, base + n - 1);
}

/* The first range of n ids from base up that holds none of used. */
static bool free_range(const used_t *used, uint32_t n_used, uint64_t base,
                       uint32_t n, uint64_t *out) {
  for (;;) {
    if (base + n - 1 > UINT32_MAX) return false;
    uint64_t next = 0;
    for (uint32_t i = 0; i < n_used; i++)
      if (used[i].id >= base && used[i].id < base + n && used[i].id >= next)
        next = (uint64_t)used[i].id + 1;
    if (next == 0) {
      *out = base;
      return true;
    }
    base = next;
  }
}

static int parse_u32(const char *s, uint32_t *out) {
  if (s == NULL || *s == '\0') return SL_EPARSE;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v > UINT32_MAX) return SL_EPARSE;
  *out = (uint32_t)v;
  return SL_OK;
}

int sl__cdc_check_server_ids(MYSQL *c, const char *server, uint32_t base,
                             uint32_t n, const char *own_host,
                             sl_error_t **out_err) {
  char range[64];
  range_text(range, sizeof(range), base, n ? n : 1);
  if (n == 0 || base == 0 || (uint64_t)base + n - 1 > UINT32_MAX)
    return sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: server id range "
                        "of %u ids from %u (pipeline key server_id) is not "
                        "within 1-4294967295", n, base);
  used_t *used = NULL;
  uint32_t n_used = 0, cap = 0;
  int rc = SL_OK;
  char own[32];
  bool found;
  unsigned e = 0;
  /* The server's own id. */
  if (sl__mariadb_query_text(c, "SELECT @@global.server_id", own, sizeof(own),
                             &found, &e) != SL_OK || !found)
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SELECT "
                        "@@global.server_id failed: error %u: %s", server, e,
                        mysql_error(c));
  cap = 8;
  used = sl_calloc(cap, sizeof(*used));
  if (used == NULL) return SL_ENOMEM;
  if (parse_u32(own, &used[0].id) != SL_OK) {
    sl_free(used);
    return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: @@server_id is "
                        "'%s'", server, own);
  }
  snprintf(used[0].who, sizeof(used[0].who), "the server id of %s itself "
           "(@@server_id)", server);
  n_used = 1;
  /* The replicas registered with it (every MariaDB and MySQL replica,
   * and sluice's own readers when they register). */
  bool can_list = true;
  int q = mysql_query(c, "SHOW SLAVE HOSTS");
  /* MySQL 8.4 knows only SHOW REPLICAS (untested: docs/cdc-mariadb.md). */
  if (q != 0 && mysql_errno(c) == 1064) q = mysql_query(c, "SHOW REPLICAS");
  if (q != 0) {
    e = mysql_errno(c);
    if (e == 1227 || e == 1045) {
      can_list = false;
      sl_log(SL_LOG_WARN, "mariadb-cdc: %s: SHOW SLAVE HOSTS is not allowed "
             "(error %u: %s); the server id range %s is checked against "
             "@@server_id only, not against connected replicas (GRANT "
             "REPLICATION MASTER ADMIN ON *.* for the full check)",
             server, e, mysql_error(c), range);
    } else {
      sl_free(used);
      return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SHOW SLAVE "
                          "HOSTS failed: error %u: %s", server, e,
                          mysql_error(c));
    }
  }
  if (can_list) {
    MYSQL_RES *r = mysql_store_result(c);
    if (r == NULL) {
      sl_free(used);
      return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: SHOW SLAVE "
                          "HOSTS failed: error %u: %s", server,
                          mysql_errno(c), mysql_error(c));
    }
    /* Server_id, Host, Port, Master_id (MariaDB 10.11; MySQL's SHOW
     * REPLICAS spells it Server_Id). */
    int fid = -1, fhost = -1, fport = -1;
    MYSQL_FIELD *fl = mysql_fetch_fields(r);
    for (unsigned i = 0; i < mysql_num_fields(r); i++) {
      if (!strcasecmp(fl[i].name, "Server_id")) fid = (int)i;
      else if (!strcasecmp(fl[i].name, "Host")) fhost = (int)i;
      else if (!strcasecmp(fl[i].name, "Port")) fport = (int)i;
    }
    if (fid < 0) {
      mysql_free_result(r);
      sl_free(used);
      return sl_error_set(out_err, SL_EIO, "mariadb-cdc: %s: the list of "
                          "replicas has no Server_id column", server);
    }
    MYSQL_ROW row;
    while (rc == SL_OK && (row = mysql_fetch_row(r)) != NULL) {
      uint32_t id;
      if (parse_u32(row[fid], &id) != SL_OK) continue;
      const char *host = fhost >= 0 && row[fhost] ? row[fhost] : "";
      /* This job's own readers of an earlier run: their dump threads
       * last until the server next writes to them. */
      if (own_host != NULL && strcmp(host, own_host) == 0) continue;
      if (n_used == cap) {
        void *p = sl_realloc(used, 2 * cap * sizeof(*used));
        if (p == NULL) {
          rc = SL_ENOMEM;
          break;
        }
        used = p;
        cap *= 2;
      }
      used[n_used].id = id;
      snprintf(used[n_used].who, sizeof(used[n_used].who),
               "used by a replica connected to %s (SHOW SLAVE HOSTS: host "
               "'%.128s', port %s)", server, host,
               fport >= 0 && row[fport] ? row[fport] : "?");
      n_used++;
    }
    mysql_free_result(r);
  }
  for (uint32_t i = 0; rc == SL_OK && i < n_used; i++) {
    if (used[i].id < base || (uint64_t)used[i].id >= (uint64_t)base + n)
      continue;
    uint64_t fb = 0;
    char hint[96];
    if (free_range(used, n_used, (uint64_t)base, n, &fb)) {
      char fr[64];
      range_text(fr, sizeof(fr), fb, n);
      snprintf(hint, sizeof(hint), ", e.g. server_id: \"%s\"", fr);
    } else {
      hint[0] = '\0';
    }
    rc = sl_error_set(out_err, SL_EINVAL, "mariadb-cdc: server id %" PRIu32
                      " of the range %s (pipeline key server_id; one id per "
                      "reader) is %s; MariaDB drops the older of two "
                      "replication connections with one server id: set "
                      "server_id to a range no server or replica uses%s",
                      used[i].id, range, used[i].who, hint);
  }
  sl_free(used);
  return rc;
}
