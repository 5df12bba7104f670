set terminal pngcairo size 900,500
set output 'err_norm_fwd.png'
set logscale x 2
set xlabel 'n'
set ylabel 'error (bf16 ulp)'
set key outside
plot 'err_norm_fwd.dat' using 1:2 with linespoints title 'norm_fwd/ref max', 'err_norm_fwd.dat' using 1:3 with linespoints dt 2 title 'norm_fwd/ref p99.9', 'err_norm_fwd.dat' using 1:4 with linespoints title 'norm_fwd/vendor max', 'err_norm_fwd.dat' using 1:5 with linespoints dt 2 title 'norm_fwd/vendor p99.9'
set output 'hist_norm_fwd.png'
set logscale xy
set xlabel 'error (bf16 ulp)'
set ylabel 'elements'
plot 'hist_norm_fwd.dat' index 0 using 1:($2+1) with steps title 'norm_fwd/ref', 'hist_norm_fwd.dat' index 1 using 1:($2+1) with steps title 'norm_fwd/vendor'
