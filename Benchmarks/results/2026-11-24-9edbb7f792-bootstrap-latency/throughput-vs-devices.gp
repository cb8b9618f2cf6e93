set terminal svg size 900,440 dynamic enhanced font "Helvetica,13" background rgb "white"
set output "throughput-vs-devices.svg"
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
set title "Events/s accepted against devices (sync-load sweep)"
set xlabel "devices"
set ylabel "events/s accepted"
set logscale x
set yrange [0:*]
set offsets graph 0.06, graph 0.06, graph 0.12, 0
set key top left
plot DATA using 1:3 with linespoints lw 2 pt 7 title "accepted", \
     DATA using 1:3:8 with labels offset char 0,1.2 notitle
