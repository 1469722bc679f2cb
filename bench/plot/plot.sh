#!/usr/bin/env bash
# Plot what `bench/run stream` left in a results directory (default
# bench/results/stream): for every search-Q-pP.csv, search-Q-pP.svg (the
# search) and run-Q-pP.svg (throughput and latency over time of the last
# trial at the sustainable rate) and run-Q-pP-over.svg (the lowest rate
# judged unsustainable).  Needs gnuplot (Debian: gnuplot-nox).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../results/stream}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 2; }
shopt -s nullglob
found=0
for csv in "$dir"/search-*.csv; do
  found=1
  base=$(basename "$csv" .csv)     # search-q0-p1
  qp=${base#search-}               # q0-p1
  txt=$dir/$base.txt
  title=$(sed -n '1s/^# //p' "$txt" 2>/dev/null | sed 's/,.*//')
  [ -n "$title" ] || title=$qp
  # The sustainable rate: the last trial judged sustainable (the search
  # ends with its confirmation); the lowest unsustainable rate above it.
  read -r best_t best over_t < <(awk -F, 'NR > 1 {
      if ($3 == 1) { bt = $1; b = $2 }
      r[$1] = $2; s[$1] = $3 }
    END {
      ot = ""; o = 0
      for (i in r) if (s[i] == 0 && r[i] > b && (o == 0 || r[i] < o)) { o = r[i]; ot = i }
      printf "%s %s %s\n", (bt ? bt : "-"), (b ? b : "-"), (ot ? ot : "-") }' "$csv")
  if [ "$best" = - ]; then
    gnuplot -e "in='$csv'; out='$dir/$base.svg'; ttl='$title: no sustainable rate'" "$here/search.gp"
  else
    gnuplot -e "in='$csv'; out='$dir/$base.svg'; ttl='$title: search'; best=$best" "$here/search.gp"
  fi
  warm=$(sed -n '1s/.*warm-up \([0-9.]*\) s.*/\1/p' "$txt" 2>/dev/null)
  [ -n "$warm" ] || warm=0
  for which in best over; do
    t=$best_t; name=run-$qp
    [ "$which" = over ] && { t=$over_t; name=run-$qp-over; }
    [ "$t" = - ] && continue
    run=$(printf '%s/%s-s0-t%02d.csv' "$dir" "$qp" "$t")
    [ -f "$run" ] || continue
    rate=$(awk -F, -v t="$t" 'NR > 1 && $1 == t { printf "%.3g", $2 }' "$csv")
    verdict=sustainable; [ "$which" = over ] && verdict=unsustainable
    gnuplot -e "in='$run'; out='$dir/$name.svg'; ttl='$title: trial $t at $rate events/s ($verdict)'; warm=$warm" "$here/run.gp"
  done
  echo "plotted $qp"
done
[ "$found" = 1 ] || { echo "plot.sh: no search-*.csv in $dir" >&2; exit 1; }
