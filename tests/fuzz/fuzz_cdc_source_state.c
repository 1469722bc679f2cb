/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what a checkpoint keeps of the mariadb-cdc source
 * (src/connectors/mariadb/cdc_source.c): the enumerator's state (chunk
 * lists, chunk status and HIGH, the gate, the binlog split to hand out),
 * a chunk split's state (unfinished, or finished with its HIGH), the
 * binlog split's state (stream position, filter, pure tables) and a
 * reader's "chunk finished" report.  The first byte chooses which.
 * Anything is refused with an error or decoded; a decoded state writes
 * back to bytes that decode and write back to the same bytes (checked
 * inside, with abort()).
 */
#include "connectors/mariadb/cdc_source.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)sl__mariadb_cdc_fuzz_one(data, size);
  return 0;
}
