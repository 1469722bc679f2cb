/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the pipeline builder needs of the mariadb-cdc source beyond the
 * public API (sl_connector.h): the primary key of the captured tables,
 * for the reconciler a declared non-primary-key chunk key adds
 * (src/ops/cdc_reconcile.c).
 */
#ifndef SL_MARIADB_CDC_SOURCE_H
#define SL_MARIADB_CDC_SOURCE_H

#include "sluice/sluice.h"

/* The primary key's field indexes in the source's output (borrowed from
 * ctx, the source's context). */
void sl__mariadb_cdc_pk(const void *ctx, const uint32_t **out_pk,
                        uint32_t *out_n);

/* Fuzzing: the first byte chooses the decoder (0 the enumerator's state,
 * 1 a chunk split's state, 2 the binlog split's state, else a reader's
 * report); a decoded state must write back to bytes that read back to
 * themselves (abort() otherwise).  @return SL_OK or the decoder's code. */
int sl__mariadb_cdc_fuzz_one(const uint8_t *p, size_t n);
/* Valid inputs of each kind, for the seed corpus. */
int sl__mariadb_cdc_fuzz_seeds(void (*put)(const char *name, const void *p,
                                           size_t n));

/* The reconciler (src/ops/cdc_reconcile.c). */
sl_stream_t *sl__cdc_reconcile(sl_stream_t *in, const char *uid,
                               const uint32_t *pk, uint32_t n_pk);

#endif
