# The sustainable-throughput search: offered rate of each trial, its
# verdict, and its p50 / p99 event-time latency.
# gnuplot -e "in='search-q0-p1.csv'; out='search.svg'; ttl='q0'; best=2.87e6" search.gp
# Columns: trial,rate,sustainable,backlog_slope,backlog_slope_lo,
#          latency_slope_ms_per_s,p50_ms,p99_ms,reason
if (!exists("in") || !exists("out")) { print "usage: gnuplot -e \"in='...';out='...'\" search.gp"; exit status 2 }
if (!exists("ttl")) ttl = in
set terminal svg size 900,640 dynamic font "sans,11" background "white"
set output out
set datafile separator ","
set datafile missing ""
set key top right opaque box
set grid
set multiplot layout 2,1 title ttl
set xlabel "trial (in the order the search ran them)"
set ylabel "offered rate (events/s)"
set format y "%.2s%c"
set yrange [0:*]
set xrange [0.5:*]
set xtics 1
if (exists("best")) { set arrow 1 from graph 0, first best to graph 1, first best nohead dt 2 lc "#2ca02c"; set label 1 sprintf("sustainable %.3f M events/s", best / 1e6) at graph 0.02, first best offset 0,0.8 front tc "#2ca02c" }
plot in skip 1 using 1:($3 == 1 ? $2 : 1/0) with impulses lw 8 lc "#2ca02c" title "sustainable", \
     ''  skip 1 using 1:($3 == 0 ? $2 : 1/0) with impulses lw 8 lc "#d62728" title "unsustainable"
unset arrow 1
unset label 1
set ylabel "event-time latency (ms)"
set format y "%g"
set logscale y
set yrange [*:*]
plot in skip 1 using 1:7 with points pt 7 ps 1 lc "#1f77b4" title "p50", \
     ''  skip 1 using 1:8 with points pt 5 ps 1 lc "#ff7f0e" title "p99"
unset multiplot
