#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A stand-in peer for the harness's own tests (bench_peers_harness.sh):
# runs sluice-bench-nexmark ($SL_MOCK_SLUICE) with the same arguments, then
# spoils its work as $SL_MOCK_FAULT says:
#   differ  the last line of the --out answer changed
#   fail    exit 3 after the run
#   noline  no "query=..." line on stdout
#   count   a results= count one too high
#   nockpt  "no checkpoints" on stderr (the report labels its figures)
# Never a substitute for the real peers (bench/peers/): those are what
# sl-it-bench-peers-smoke runs.
out=
prev=
for a in "$@"; do
  [ "$prev" = --out ] && out=$a
  prev=$a
done
line=$("$SL_MOCK_SLUICE" "$@") || exit $?
case ${SL_MOCK_FAULT:-} in
  differ) [ -n "$out" ] && sed -i '$ s/^/9/' "$out" ;;
  fail) exit 3 ;;
  noline) exit 0 ;;
  nockpt) echo "peer-mock: no checkpoints" >&2 ;;
  count) n=${line##*results=}; line="${line%results=*}results=$((n + 1))" ;;
esac
echo "$line"
