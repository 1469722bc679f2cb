/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what a checkpoint keeps of the postgres-cdc source
 * (src/connectors/postgres/pg_cdc_source.c): the enumerator's state (chunk
 * lists, chunk status, HIGH and snapshot, the gate, the stream split to
 * hand out, the completed checkpoints' positions), a chunk split's state
 * (unfinished, or finished with HIGH and snapshot), the stream split's
 * state (position, filter, pure tables) and a reader's "chunk finished"
 * report.  The first byte chooses which.  Anything is refused with an
 * error or decoded; a decoded state writes back to bytes that decode and
 * write back to the same bytes (checked inside, with abort()).
 */
#include "connectors/postgres/pg_cdc_source.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)sl__postgres_cdc_fuzz_one(data, size);
  return 0;
}
