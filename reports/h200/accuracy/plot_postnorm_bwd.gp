set terminal pngcairo size 900,500
set output 'err_postnorm_bwd.png'
set logscale x 2
set xlabel 'K'
set ylabel 'error (bf16 ulp)'
set key outside
plot 'err_postnorm_bwd.dat' using 1:2 with linespoints title 'postnorm_bwd/ref max', 'err_postnorm_bwd.dat' using 1:3 with linespoints dt 2 title 'postnorm_bwd/ref p99.9', 'err_postnorm_bwd.dat' using 1:4 with linespoints title 'postnorm_bwd/fused max', 'err_postnorm_bwd.dat' using 1:5 with linespoints dt 2 title 'postnorm_bwd/fused p99.9'
set output 'hist_postnorm_bwd.png'
set logscale xy
set xlabel 'error (bf16 ulp)'
set ylabel 'elements'
plot 'hist_postnorm_bwd.dat' index 0 using 1:($2+1) with steps title 'postnorm_bwd/ref', 'hist_postnorm_bwd.dat' index 1 using 1:($2+1) with steps title 'postnorm_bwd/fused'
