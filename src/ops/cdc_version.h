/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `_sl_version` field of a CDC source whose table has a declared
 * non-primary-key chunk key, as the reconciler reads it (cdc_reconcile.c;
 * layout in docs/cdc-mariadb.md, "Exactly once with a non-primary-key
 * chunk key").  Little-endian:
 *   snapshot: 'S', u16 table index, u8 n, n x (u32 domain, u64 seq), the
 *             chunk's HIGH GTID state, domains strictly ascending;
 *   binlog:   'B', u16 table index, u8 flags (bit 0: past the table's
 *             largest HIGH), u32 domain, u64 seq, u32 event index, u32 row
 *             index.
 */
#ifndef SL_OPS_CDC_VERSION_H
#define SL_OPS_CDC_VERSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sl_row.h"

#define SL_CDC_VERSION_PASS 1u /* binlog flag bit 0 */

typedef struct sl__cdc_version_s {
  uint8_t kind; /* 'S' or 'B' */
  uint16_t table;
  /* 'S': n_dom (domain u32le, seq u64le) pairs */
  uint32_t n_dom;
  const uint8_t *dom;
  /* 'B' */
  uint8_t flags;
  uint32_t domain;
  uint64_t seq;
  uint32_t event, row;
  sl_slice_t raw; /* the whole version (borrowed) */
} sl__cdc_version_t;

/**
 * @brief Parse version bytes (borrowed by *out).  @return false, with a
 * reason in why ("a binlog version is 8 bytes, not 24"), when malformed.
 */
bool sl__cdc_version_parse(sl_slice_t b, sl__cdc_version_t *out, char *why,
                           size_t n_why);
/** @brief H[d] of a snapshot version; 0 when d is not in it. */
uint64_t sl__cdc_version_seq(const sl__cdc_version_t *h, uint32_t d);
/** @brief Snapshot versions: 1 a newer, 0 equal, -1 a older, 2 neither. */
int sl__cdc_version_cmp(const sl__cdc_version_t *a,
                        const sl__cdc_version_t *b);
/** @brief A snapshot version as "0-10,1-3" ("(empty)" without domains). */
void sl__cdc_version_format(const sl__cdc_version_t *h, char *buf, size_t n);

#endif
