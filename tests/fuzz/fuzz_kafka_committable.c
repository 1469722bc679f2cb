/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the exactly-once Kafka sink's committable, its replay log
 * kept in checkpoints (src/connectors/kafka/kafka_sink_eos.c,
 * sl__kafka_eos_log_parse): bytes from a checkpoint file, so anything.  A
 * committable that parses must be readable record by record inside its
 * bytes, and end exactly at its end.
 */
#include "connectors/kafka/kafka_sink_int.h"
#include "fuzz_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sl__klog_t lg;
  if (sl__kafka_eos_log_parse(data, size, &lg) != SL_OK) return 0;
  const uint8_t *end = data + size, *rec = lg.rec;
  SL_FUZZ_CHECK((const uint8_t *)lg.prefix + lg.prefix_len <= end);
  SL_FUZZ_CHECK((const uint8_t *)lg.topic + lg.topic_len <= end);
  for (uint32_t i = 0; i < lg.n; i++) {
    sl__klog_rec_t r;
    SL_FUZZ_CHECK(rec + 12 <= end);
    rec = sl__kafka_eos_log_record(rec, &r);
    SL_FUZZ_CHECK(rec <= end);
    SL_FUZZ_CHECK(r.val + r.vlen <= end && r.key + r.klen <= end);
    SL_FUZZ_CHECK(r.has_key || r.klen == 0);
    SL_FUZZ_CHECK(r.part >= -1);
  }
  SL_FUZZ_CHECK(rec == end);
  return 0;
}
