set terminal pngcairo size 900,500
set output 'err_norm_bwd.png'
set logscale x 2
set xlabel 'n'
set ylabel 'error (bf16 ulp)'
set key outside
plot 'err_norm_bwd.dat' using 1:2 with linespoints title 'norm_bwd/ref max', 'err_norm_bwd.dat' using 1:3 with linespoints dt 2 title 'norm_bwd/ref p99.9', 'err_norm_bwd.dat' using 1:4 with linespoints title 'norm_bwd/vendor max', 'err_norm_bwd.dat' using 1:5 with linespoints dt 2 title 'norm_bwd/vendor p99.9'
set output 'hist_norm_bwd.png'
set logscale xy
set xlabel 'error (bf16 ulp)'
set ylabel 'elements'
plot 'hist_norm_bwd.dat' index 0 using 1:($2+1) with steps title 'norm_bwd/ref', 'hist_norm_bwd.dat' index 1 using 1:($2+1) with steps title 'norm_bwd/vendor'
