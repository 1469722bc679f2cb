/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the MariaDB CDC source's chunk list, as the enumerator's
 * state keeps it (src/connectors/mariadb/cdc_chunks.c,
 * sl__cdc_chunks_decode): bytes from a checkpoint, so anything.  A
 * rejected input has SL_ECORRUPT (or SL_ENOMEM) and a message; a decoded
 * list encodes to exactly the input bytes, its chunks chain (the first
 * unbounded below, the last above, each low bound the previous high
 * bound), and every chunk's WHERE condition can be written.
 */
#include "connectors/mariadb/cdc_int.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl__cdc_chunks_t *cl = NULL;
  sl_error_t *err = NULL;
  int rc = sl__cdc_chunks_decode(data, size, &cl, &err);
  if (rc != SL_OK) {
    SL_FUZZ_CHECK(cl == NULL);
    SL_FUZZ_CHECK(rc == SL_ECORRUPT || rc == SL_ENOMEM);
    SL_FUZZ_CHECK(rc == SL_ENOMEM ||
                  (err != NULL && sl_error_message(err) != NULL));
    sl_error_destroy(err);
    return 0;
  }
  SL_FUZZ_CHECK(err == NULL && cl != NULL && cl->n >= 1 && cl->n_key >= 1);
  sl_bytes_t b;
  sl_bytes_init(&b);
  SL_FUZZ_CHECK(sl__cdc_chunks_encode(cl, &b) == SL_OK);
  SL_FUZZ_CHECK(b.len == size && memcmp(b.data, data, size) == 0);
  for (uint32_t i = 0; i < cl->n; i++) {
    const sl__cdc_chunk_t *ch = &cl->chunks[i];
    SL_FUZZ_CHECK(ch->id == i);
    SL_FUZZ_CHECK((ch->low == NULL) == (i == 0));
    SL_FUZZ_CHECK((ch->high == NULL) == (i + 1 == cl->n));
    sl_bytes_clear(&b);
    SL_FUZZ_CHECK(sl__cdc_chunk_where(cl, ch, &b) == SL_OK);
    SL_FUZZ_CHECK(b.len > 0);
  }
  sl_bytes_close(&b);
  sl__cdc_chunks_free(cl);
  return 0;
}
