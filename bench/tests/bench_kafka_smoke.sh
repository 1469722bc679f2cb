#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# sl-it-bench-kafka-smoke: run sluice-bench-kafka --quick against a real
# broker and check that its report is well formed: it exits 0 (every run
# checked, none failed), and every ratio and latency line is there with a
# positive number.  The exactly-once lines are either all there or the
# report says why they were skipped.  Not a measurement.
# usage: bench_kafka_smoke.sh PROGRAM OUTDIR
set -u
prog=$1
out=$2
rm -rf "$out"
if ! "$prog" --quick --out "$out" >"$out.txt" 2>"$out.err"; then
  echo "sluice-bench-kafka --quick failed:"; cat "$out.txt" "$out.err"
  exit 1
fi
bad=0
# A ratio line: "  NAME  ESTIMATE  bootstrap [..]  Fieller [..]  paired X [..]"
ratio() {
  if ! awk -v n="$1" '$1 == n && $2 + 0 > 0 && /paired [0-9.]+ \[[0-9.]+, [0-9.]+\]/ { ok = 1 }
       END { exit !ok }' "$out.txt"; then
    echo "missing or not positive: ratio $1"; bad=1
  fi
}
# A statistic line: "  A B C  mean X ms  95% CI [..] ..."
stat() {
  if ! awk -v a="$1" -v b="$2" -v c="$3" \
       '$1 == a && $2 == b && $3 == c && $4 == "mean" && $5 + 0 > 0 { ok = 1 }
        END { exit !ok }' "$out.txt"; then
    echo "missing or not positive: $1 $2 $3"; bad=1
  fi
}
ratio ALO/producer
ratio ALO/consumer
ratio ALO-wall/producer
stat ALO latency p50
stat ALO latency p99
stat Kafka latency p50
stat Kafka latency p99
if grep -q '^  EO ratios skipped: ' "$out.txt"; then
  grep -q '^  EO latency skipped: ' "$out.txt" ||
    { echo "EO ratios skipped but not EO latency"; bad=1; }
else
  ratio EO/producer-txn
  ratio EO/consumer
  ratio EO/ALO
  stat EO latency p50
  stat EO latency p99
fi
if [ "$bad" != 0 ]; then cat "$out.txt" "$out.err"; exit 1; fi
cat "$out.txt"
