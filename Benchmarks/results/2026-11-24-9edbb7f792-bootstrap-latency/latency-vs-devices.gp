set terminal svg size 900,440 dynamic enhanced font "Helvetica,13" background rgb "white"
set output "latency-vs-devices.svg"
set datafile separator ","
set key autotitle columnhead
set grid lc rgb "#dddddd"
set border lc rgb "#555555"
set linetype 1 lc rgb "#1f77b4"
set linetype 2 lc rgb "#d62728"
set linetype 3 lc rgb "#2ca02c"
set linetype 4 lc rgb "#9467bd"
set linetype 5 lc rgb "#7f7f7f"
DATA = "latency.csv"
set title "Latency against devices (sync-load sweep)"
set xlabel "devices"
set ylabel "milliseconds"
set logscale xy
set key outside right center
plot DATA using 1:4 with linespoints lw 2 pt 7 title "push p50", \
     DATA using 1:5 with linespoints lw 2 pt 5 title "push p99", \
     DATA using 1:6 with linespoints lw 2 pt 9 title "write-to-visible p50", \
     DATA using 1:7 with linespoints lw 2 pt 11 title "write-to-visible p99"
