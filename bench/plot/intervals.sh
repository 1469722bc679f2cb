#!/usr/bin/env bash
# Summarise repeated sustainable-throughput searches (bench/run intervals):
# for every search-Q-pP.txt in DIR (default bench/results/stream/intervals),
# each search's confirmed sustainable rate, whether its upper bracket was a
# driver failure (a lower bound for sluice), and the p99 event-time latency
# of its confirming trial; then the mean of each over the searches with a
# Student-t 95% interval (a latency interval's lower end is cut at 0).
# Prints a Markdown table.
set -euo pipefail
dir=${1:-bench/results/stream/intervals}
echo "| query | P | searches: sustainable events/s (p99 ms) | mean events/s [95% CI] | mean p99 ms [95% CI] |"
echo "|---|---|---|---|---|"
for f in "$dir"/search-*.txt; do
  [ -e "$f" ] || continue
  qp=$(basename "$f" .txt); qp=${qp#search-}
  awk -v q="${qp%-p*}" -v p="${qp##*-p}" '
    # Student t quantiles (0.975) for 1..10 degrees of freedom.
    BEGIN { split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228", t, " ") }
    $1 ~ /^[0-9]+$/ && NF >= 9 { rate[$1] = $3; ok[$1] = $4; p99[$1] = $9; last = $1 }
    /^sustainable throughput: / {
      n++; r[n] = $3 + 0; l[n] = "";
      for (i = last; i >= 1; i--) if (ok[i] == "yes" && rate[i] + 0 == r[n]) { l[n] = p99[i]; break }
      delete rate; delete ok; delete p99; last = 0; bound[n] = ""
    }
    /^driver-bound:/ { bound[n] = "≥ " }
    function fmt(x) { return x >= 1e6 ? sprintf("%.2f M", x / 1e6) : sprintf("%.0f k", x / 1e3) }
    function ci(a, k,   i, m, s) {
      m = 0; for (i = 1; i <= k; i++) m += a[i]; m /= k
      s = 0; for (i = 1; i <= k; i++) s += (a[i] - m) ^ 2
      h = k > 1 && k <= 11 ? t[k - 1] * sqrt(s / (k - 1) / k) : 0
      return m
    }
    END {
      if (n == 0) exit
      line = ""
      for (i = 1; i <= n; i++) line = line (i > 1 ? ", " : "") bound[i] fmt(r[i]) " (" l[i] ")"
      m = ci(r, n); hr = h
      for (i = 1; i <= n; i++) lat[i] = l[i] + 0
      ml = ci(lat, n); hl = h
      if (n == 1) { printf "| %s | %s | %s | %s (one search) | %.0f |\n", q, p, line, fmt(m), ml; exit }
      lo = ml - hl < 0 ? 0 : ml - hl  # a latency is not negative
      printf "| %s | %s | %s | %s [%s, %s] | %.0f [%.0f, %.0f] |\n", q, p, line, fmt(m), fmt(m - hr), fmt(m + hr), ml, lo, ml + hl
    }' "$f"
done
