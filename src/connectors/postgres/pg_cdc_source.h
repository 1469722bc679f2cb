/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What tests need of the postgres-cdc source beyond the public API
 * (sl_connector.h): its state decoders, for fuzzing.
 */
#ifndef SL_PG_CDC_SOURCE_H
#define SL_PG_CDC_SOURCE_H

#include "sluice/sluice.h"

/* Fuzzing: the first byte chooses the decoder (0 the enumerator's state,
 * 1 a chunk split's state, 2 the stream split's state, else a reader's
 * report); a decoded state must write back to bytes that read back to
 * themselves (abort() otherwise).  @return SL_OK or the decoder's code. */
int sl__postgres_cdc_fuzz_one(const uint8_t *p, size_t n);
/* Valid inputs of each kind, for the seed corpus. */
int sl__postgres_cdc_fuzz_seeds(void (*put)(const char *name, const void *p,
                                            size_t n));

#endif
