set terminal pngcairo size 900,500 noenhanced
set output 'err_norm_bwd.png'
set logscale x 2
set logscale y
floor = 1e-3
set xlabel 'n'
set ylabel 'error (bf16 ulp; 0 drawn at 1e-3)'
set key outside
plot 'err_norm_bwd.dat' using 1:($2 > floor ? $2 : floor) with linespoints title 'norm_bwd/ref max', 'err_norm_bwd.dat' using 1:($3 > floor ? $3 : floor) with linespoints dt 2 title 'norm_bwd/ref p99.9', 'err_norm_bwd.dat' using 1:($4 > floor ? $4 : floor) with linespoints title 'norm_bwd/vendor max', 'err_norm_bwd.dat' using 1:($5 > floor ? $5 : floor) with linespoints dt 2 title 'norm_bwd/vendor p99.9'
set output 'hist_norm_bwd.png'
set logscale xy
set xlabel 'error (bf16 ulp)'
set ylabel 'elements'
plot 'hist_norm_bwd.dat' index 0 using 1:($2+1) with steps title 'norm_bwd/ref', 'hist_norm_bwd.dat' index 1 using 1:($2+1) with steps title 'norm_bwd/vendor'
