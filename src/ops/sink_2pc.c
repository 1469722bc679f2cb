/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine side of two-phase-commit sinks: the pending committables of a
 * sink subtask (operator state "sink.committables"), their commit when a
 * checkpoint completes, retries with backoff, and the restore order
 * (commit restored, recover, open writer).  See src/ops/README.md and
 * docs/connectors.md.
 */
#include "ops/ops.h"

bool sl_sink_is_transactional(const sl_sink_vt_t *vt) {
  return vt != NULL && vt->prepare != NULL && vt->committer_open != NULL &&
         vt->commit != NULL;
}
