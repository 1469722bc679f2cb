#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The peers' ports of the Nexmark generator against bench/nexmark.c: the text
# dumps of events 0..N-1 must be byte-identical.
#
#   bench/peers/check-generator.sh BUILD_DIR [N (100000)] [SEED (42)] [RATE...]
#
# BUILD_DIR holds bin/sluice-nexmark-dump; the Flink peer's jar must be built
# (bench/peers/flink: mvn -q package).  Rates default to 10000 (the check
# run's) and 10000000 (the timed runs').
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: $0 BUILD_DIR [N] [SEED] [RATE...]}
n=${2:-100000}
seed=${3:-42}
shift $(( $# < 3 ? $# : 3 ))
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(10000 10000000)
dump="$build/bin/sluice-nexmark-dump"
jar="$here/flink/target/sluice-peer-flink.jar"
[ -x "$dump" ] || { echo "no $dump (build the bench target)" >&2; exit 2; }
[ -f "$jar" ] || { echo "no $jar (mvn -q package in $here/flink)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for rate in "${rates[@]}"; do
  "$dump" --events "$n" --seed "$seed" --rate "$rate" > "$tmp/c"
  java -jar "$jar" --dump-events "$n" --seed "$seed" --rate "$rate" > "$tmp/flink"
  if cmp -s "$tmp/c" "$tmp/flink"; then
    echo "generator: flink = C for $n events, seed $seed, rate $rate"
  else
    echo "generator: flink differs from C (seed $seed, rate $rate):" >&2
    diff "$tmp/c" "$tmp/flink" | head -6 | cut -c1-400 >&2
    status=1
  fi
done
exit $status
