# Throughput and latency over time of one sluice-bench-stream trial.
# gnuplot -e "in='q0-p1-s0-t08.csv'; out='run.svg'; ttl='q0, 2.87 M/s'; warm=6" run.gp
# Columns: t_s,offered_rate,consumed_rate,backlog,lat_p50_ms,lat_p99_ms,lat_max_ms,driver_lag_ms
if (!exists("in") || !exists("out")) { print "usage: gnuplot -e \"in='...';out='...'\" run.gp"; exit status 2 }
if (!exists("ttl")) ttl = in
if (!exists("warm")) warm = 0
set terminal svg size 900,640 dynamic font "sans,11" background "white"
set output out
set datafile separator ","
set datafile missing "nan"
set key top left opaque box
set grid
set multiplot layout 2,1 title ttl
set xlabel "time since the trial started (s)"
set ylabel "events/s (all Nexmark events)"
set y2label "ring backlog (events)"
set format y "%.2s%c"
set format y2 "%.1s%c"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set arrow 1 from warm, graph 0 to warm, graph 1 nohead dt 2 lc "gray40"
set label 1 "measurement window" at warm, graph 0.95 offset 1,0 tc "gray40"
plot in skip 1 using 1:2 with lines lw 2 lc "#1f77b4" title "offered", \
     ''  skip 1 using 1:3 with lines lw 1.5 lc "#2ca02c" title "consumed", \
     ''  skip 1 using 1:4 axes x1y2 with lines lw 1 dt 3 lc "#d62728" title "backlog (right)"
unset y2label
unset y2tics
set format y "%g"
set ylabel "event-time latency (ms)"
set logscale y
set yrange [*:*]
set label 1 ""
plot in skip 1 using 1:5 with linespoints pt 7 ps 0.4 lc "#1f77b4" title "p50 per sample", \
     ''  skip 1 using 1:6 with linespoints pt 7 ps 0.4 lc "#ff7f0e" title "p99 per sample", \
     ''  skip 1 using 1:7 with lines lc "#7f7f7f" title "max per sample", \
     ''  skip 1 using 1:($8 > 0.01 ? $8 : 1/0) with lines dt 2 lw 1.5 lc "#9467bd" title "driver behind schedule (ms)"
unset multiplot
