#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The peers' ports of the Nexmark generator against bench/nexmark.c: the text
# dumps of events 0..N-1 must be byte-identical.
#
#   bench/peers/check-generator.sh BUILD_DIR [N (100000)] [SEED (42)] [RATE...]
#
# BUILD_DIR holds bin/sluice-nexmark-dump; every peer whose build is present
# (bench/peers/flink: mvn -q package; bench/peers/dbsp: cargo build --release)
# is checked, at least one must be.  Rates default to 10000 (the check
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
dbsp="$here/dbsp/target/release/sluice-peer-dbsp"
[ -f "$jar" ] || [ -x "$dbsp" ] || {
  echo "no peer built ($jar: mvn -q package in $here/flink; $dbsp: cargo build --release in $here/dbsp)" >&2
  exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for rate in "${rates[@]}"; do
  "$dump" --events "$n" --seed "$seed" --rate "$rate" > "$tmp/c"
  for peer in flink dbsp; do
    case $peer in
      flink) [ -f "$jar" ] || continue
             java -jar "$jar" --dump-events "$n" --seed "$seed" --rate "$rate" > "$tmp/$peer" ;;
      dbsp) [ -x "$dbsp" ] || continue
            "$dbsp" --dump-events "$n" --seed "$seed" --rate "$rate" > "$tmp/$peer" ;;
    esac
    if cmp -s "$tmp/c" "$tmp/$peer"; then
      echo "generator: $peer = C for $n events, seed $seed, rate $rate"
    else
      echo "generator: $peer differs from C (seed $seed, rate $rate):" >&2
      diff "$tmp/c" "$tmp/$peer" | head -6 | cut -c1-400 >&2
      status=1
    fi
  done
done
exit $status
