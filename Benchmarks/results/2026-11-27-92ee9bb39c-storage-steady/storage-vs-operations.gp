set terminal svg size 900,440 dynamic enhanced font "Helvetica,13" background rgb "white"
set output "storage-vs-operations.svg"
set datafile separator ","
set key autotitle columnhead
set grid lc rgb "#dddddd"
set border lc rgb "#555555"
set linetype 1 lc rgb "#1f77b4"
set linetype 2 lc rgb "#d62728"
set linetype 3 lc rgb "#2ca02c"
set linetype 4 lc rgb "#9467bd"
set linetype 5 lc rgb "#7f7f7f"
DATA = "storage.csv"
set title "Storage against operations (churn workload)"
set xlabel "operations"
set ylabel "MiB"
set logscale y
set format x "%.0s%c"
set key outside right center
set datafile missing "NaN"
plot DATA using 1:3 with linespoints lw 2 pt 7 title "server, no compaction", \
     DATA using 1:5 with linespoints lw 2 pt 5 title "device, no compaction", \
     DATA using 1:2 with linespoints lw 2 pt 9 title "server, compaction", \
     DATA using 1:4 with linespoints lw 2 pt 11 title "device, compaction", \
     DATA using 1:6 with linespoints lw 2 pt 13 dt 2 title "live state"
