#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# sl-unit-bench-peers-harness: sluice-bench-peers against stand-in peers
# (peer_mock.sh: sluice-bench-nexmark, spoiled on demand).  --check passes
# when the answers agree and fails, naming the query, the engine and the
# first differing lines, when one differs, a run fails, the stdout line is
# missing or its count is wrong; a missing program fails or skips (77);
# the timed runs write one CSV row per run and every ratio line.
# Usage: bench_peers_harness.sh PEERS NEXMARK MOCK DIR
set -u
peers=$1 nexmark=$2 mock=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
export SL_MOCK_SLUICE="$nexmark"
fails=0
expect() { # name, wanted exit code, pattern ('' = none), command...
  name=$1 want=$2 pat=$3; shift 3
  "$@" >"$dir/$name.txt" 2>&1
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: exit $rc, not $want"; cat "$dir/$name.txt"
    fails=$((fails + 1))
  elif [ -n "$pat" ] && ! grep -q -- "$pat" "$dir/$name.txt"; then
    echo "FAIL $name: no line matching '$pat'"; cat "$dir/$name.txt"
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
common="--events 20000 --out $dir/out --flink $mock --flink-jar $nexmark --dbsp $mock"
SL_MOCK_FAULT= expect agree 0 "every answer matches sluice's" \
  "$peers" --check --queries q2,q4,q5 $common
SL_MOCK_FAULT=differ expect differ 1 \
  "FAIL q4 dbsp: its answer differs from sluice's" \
  "$peers" --check --queries q2,q4 --engines sluice,dbsp $common
grep -q "first differing sorted line is" "$dir/differ.txt" &&
  grep -q "^      sluice  *[0-9]" "$dir/differ.txt" &&
  grep -q "^      dbsp  *[0-9]" "$dir/differ.txt" &&
  grep -q "FAIL q2 dbsp" "$dir/differ.txt" ||
  { echo "FAIL differ: no first differing lines"; fails=$((fails + 1)); }
SL_MOCK_FAULT=fail expect fail 1 "FAIL q2 flink-hashmap: failed (exit 3" \
  "$peers" --check --queries q2 $common
SL_MOCK_FAULT=noline expect noline 1 "FAIL q2 dbsp: printed no" \
  "$peers" --check --queries q2 --engines sluice,dbsp $common
SL_MOCK_FAULT=count expect count 1 "FAIL q2 dbsp: it says results=" \
  "$peers" --check --queries q2 --engines sluice,dbsp $common
expect missing-fails 1 "dbsp is not built" \
  "$peers" --check --queries q2 $common --dbsp "$dir/no-such-peer"
expect missing-skips 77 "skip: dbsp is not built" \
  "$peers" --check --queries q2 $common --dbsp "$dir/no-such-peer" \
  --missing skip
expect q6-refused 2 "q6 is not run" "$peers" --check --queries q6 $common
SL_MOCK_FAULT= expect timed 0 "sluice/dbsp .*paired" \
  "$peers" --queries q2,q5 --engines sluice,dbsp --rounds 2 $common
# 2 rounds of (a start-up run + q2 + q5) x 2 engines, and the header
[ "$(wc -l <"$dir/out/raw.csv")" -eq 13 ] &&
  grep -q "^  dbsp  *mean .*M events/CPU-s" "$dir/timed.txt" ||
  { echo "FAIL timed: raw.csv has not 12 runs or no dbsp figure";
    fails=$((fails + 1)); }
SL_MOCK_FAULT=nockpt expect timed-no-ckpt 0 \
  "^  dbsp (no checkpoints)  *mean .*M events/CPU-s" \
  "$peers" --queries q2 --engines sluice,dbsp --rounds 2 $common
SL_MOCK_FAULT=fail expect timed-fail 1 "q2 dbsp failed (exit 3)" \
  "$peers" --queries q2 --engines sluice,dbsp --rounds 2 $common
[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
