/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB sink's names: the xid of an epoch's XA branch (gtrid
 * "sl/<job>/<sink uid>", bqual "<subtask>/<epoch id>/<connection id>",
 * formatID SL_MARIADB_XA_FORMAT), the statements that name it, the writer
 * lock of a subtask (GET_LOCK), and the one codec of the committable the
 * engine keeps in checkpoints.  See mariadb_int.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "mariadb_int.h"

static uint64_t fnv64(const void *p, size_t n, uint64_t h) {
  const uint8_t *u = p;
  for (size_t i = 0; i < n; i++) h = (h ^ u[i]) * 0x100000001b3ull;
  return h;
}

/* Xids.  gtrid "sl/<job>/<uid>", bqual "<subtask>/<epoch>/<conn id>". */

int sl__mariadb_make_gtrid(const char *job, const char *uid, const char *pfx,
                           xid_t *x, sl_error_t **out_err) {
  int n = snprintf(x->gtrid, sizeof(x->gtrid), "sl/%s/%s", job, uid);
  if (n < 0 || (size_t)n > XID_PART_MAX)
    return sl_error_set(out_err, SL_EINVAL,
                        "%s: the XA transaction id \"sl/%s/%s\" is %d bytes; "
                        "MariaDB allows %u: shorten the job name or the "
                        "sink uid",
                        pfx, job, uid, n, XID_PART_MAX);
  x->gl = (size_t)n;
  return SL_OK;
}

void sl__mariadb_make_bqual(xid_t *x, uint32_t subtask, uint64_t epoch,
                            uint64_t conn_id) {
  int n = snprintf(x->bqual, sizeof(x->bqual), "%" PRIu32 "/%" PRIu64
                   "/%" PRIu64, subtask, epoch, conn_id);
  x->bl = (size_t)n;
}

bool sl__mariadb_parse_bqual(const char *p, size_t n, uint32_t *out_subtask,
                             uint64_t *out_epoch, uint64_t *out_conn) {
  char buf[XID_PART_MAX + 1];
  if (n == 0 || n > XID_PART_MAX) return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  unsigned long long a, b, c;
  char tail;
  if (sscanf(buf, "%llu/%llu/%llu%c", &a, &b, &c, &tail) != 3 ||
      a > UINT32_MAX)
    return false;
  *out_subtask = (uint32_t)a;
  *out_epoch = b;
  *out_conn = c;
  return true;
}

static int xid_sql(sl_bytes_t *b, const char *verb, const xid_t *x,
                   const char *suffix) {
  int rc = sl_bytes_append_str(b, verb);
  if (rc == SL_OK) rc = sl__mariadb_hex(b, x->gtrid, x->gl);
  if (rc == SL_OK) rc = sl_bytes_append(b, ",", 1);
  if (rc == SL_OK) rc = sl__mariadb_hex(b, x->bqual, x->bl);
  if (rc == SL_OK)
    rc = sl_bytes_printf(b, ",%d%s", SL_MARIADB_XA_FORMAT, suffix);
  return rc == SL_OK && sl__mariadb_cstr(b) != NULL ? SL_OK : SL_ENOMEM;
}

int sl__mariadb_run_xa(MYSQL *c, const char *verb, const xid_t *x,
                       const char *suffix, unsigned *out_errno) {
  sl_bytes_t b;
  sl_bytes_init(&b);
  int rc = xid_sql(&b, verb, x, suffix);
  if (rc == SL_OK)
    rc = sl__mariadb_run(c, (const char *)b.data, b.len, out_errno);
  else *out_errno = 0;
  sl_bytes_close(&b);
  return rc;
}

/* The writer lock of (gtrid, subtask): every writer connection holds it
 * (GET_LOCK), so recover() finds writers of older attempts with
 * IS_USED_LOCK and kills them. */
void sl__mariadb_lock_name(const char *gtrid, uint32_t subtask, char *buf,
                           size_t size) {
  uint64_t h = fnv64(gtrid, strlen(gtrid), 0xcbf29ce484222325ull);
  h = fnv64(&subtask, sizeof(subtask), h);
  snprintf(buf, size, "sluice.%016" PRIx64, h);
}

/*
 * The committable: "MX" 1 0, epoch (u64 LE), subtask (u32 LE), gtrid
 * length (u8), gtrid, bqual length (u8), bqual.  decode checks every
 * length and that the bqual names the same subtask and epoch.
 */
int sl__mariadb_encode_committable(const committable_t *c, sl_bytes_t *out) {
  uint8_t head[4] = {'M', 'X', 1, 0};
  uint8_t sub[4] = {(uint8_t)c->subtask, (uint8_t)(c->subtask >> 8),
                    (uint8_t)(c->subtask >> 16), (uint8_t)(c->subtask >> 24)};
  uint8_t gl = (uint8_t)c->xid.gl, bl = (uint8_t)c->xid.bl;
  int rc = sl_bytes_append(out, head, 4);
  if (rc == SL_OK) rc = sl_bytes_append_u64le(out, c->epoch);
  if (rc == SL_OK) rc = sl_bytes_append(out, sub, 4);
  if (rc == SL_OK) rc = sl_bytes_append(out, &gl, 1);
  if (rc == SL_OK) rc = sl_bytes_append(out, c->xid.gtrid, gl);
  if (rc == SL_OK) rc = sl_bytes_append(out, &bl, 1);
  if (rc == SL_OK) rc = sl_bytes_append(out, c->xid.bqual, bl);
  return rc;
}

bool sl__mariadb_decode_committable(const uint8_t *p, size_t len,
                                    committable_t *c) {
  if (len < 4 + 8 + 4 + 1 || memcmp(p, "MX\1\0", 4) != 0) return false;
  uint64_t e = 0;
  for (int i = 7; i >= 0; i--) e = (e << 8) | p[4 + i];
  c->epoch = e;
  c->subtask = (uint32_t)p[12] | (uint32_t)p[13] << 8 |
               (uint32_t)p[14] << 16 | (uint32_t)p[15] << 24;
  size_t off = 16;
  size_t gl = p[off++];
  if (gl == 0 || gl > XID_PART_MAX || off + gl + 1 > len) return false;
  memcpy(c->xid.gtrid, p + off, gl);
  c->xid.gtrid[gl] = '\0';
  c->xid.gl = gl;
  off += gl;
  size_t bl = p[off++];
  if (bl == 0 || bl > XID_PART_MAX || off + bl != len) return false;
  memcpy(c->xid.bqual, p + off, bl);
  c->xid.bqual[bl] = '\0';
  c->xid.bl = bl;
  uint32_t s;
  uint64_t ep, conn;
  return sl__mariadb_parse_bqual(c->xid.bqual, bl, &s, &ep, &conn) &&
         s == c->subtask && ep == c->epoch;
}
