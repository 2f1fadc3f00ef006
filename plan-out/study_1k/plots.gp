# uroce plan: cost against step time, and the BOM per option.
set terminal pngcairo size 1000,640 noenhanced font ',11'
set output 'cost_vs_step.png'
set title 'study_1k: network capex vs training step time (labels = rank in plan.csv; hollow = analytical only)'
set xlabel 'step time (ms)'
set ylabel 'network capex (M$)'
set grid
set key top right
set offsets graph 0.06, graph 0.06, graph 0.08, graph 0.08
plot 'points.dat' index 3 using 1:2 with lines lw 2 dt 2 lc rgb '#555555' title 'Pareto front', \
  'points.dat' index 0 using 1:(strcol(4) eq 'sim' ? $2 : 1/0) with points pt 7 ps 1.8 lc rgb '#1b9e77' title 'infiniband', \
  'points.dat' index 0 using 1:(strcol(4) eq 'model' ? $2 : 1/0) with points pt 6 ps 1.8 lw 2 lc rgb '#1b9e77' notitle, \
  'points.dat' index 0 using 1:2:3 with labels offset 1.2,0.8 notitle, \
  'points.dat' index 1 using 1:(strcol(4) eq 'sim' ? $2 : 1/0) with points pt 5 ps 1.8 lc rgb '#d95f02' title 'roce', \
  'points.dat' index 1 using 1:(strcol(4) eq 'model' ? $2 : 1/0) with points pt 4 ps 1.8 lw 2 lc rgb '#d95f02' notitle, \
  'points.dat' index 1 using 1:2:3 with labels offset 1.2,0.8 notitle, \
  'points.dat' index 2 using 1:(strcol(4) eq 'sim' ? $2 : 1/0) with points pt 9 ps 1.8 lc rgb '#7570b3' title 'uet', \
  'points.dat' index 2 using 1:(strcol(4) eq 'model' ? $2 : 1/0) with points pt 8 ps 1.8 lw 2 lc rgb '#7570b3' notitle, \
  'points.dat' index 2 using 1:2:3 with labels offset 1.2,0.8 notitle

set output 'bom.png'
set terminal pngcairo size 1560,640 noenhanced font ',10'
set title 'study_1k: bill of materials per option (rank order)'
set datafile separator ','
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -40 left
set ylabel 'capex (M$)'
set xlabel ''
set key outside right top Left reverse
set offsets 0, 0, 0, 0
set bmargin 11
plot 'plan.csv' every ::1 using ($17/1e6):xtic(2) title 'NICs', '' every ::1 using ($18/1e6) title 'switches', '' every ::1 using ($19/1e6) title 'DAC/AOC', '' every ::1 using ($20/1e6) title 'transceivers', '' every ::1 using ($21/1e6) title 'fibre'
