set terminal pngcairo size 900,500 noenhanced
set output 'err_postnorm_bwd.png'
set logscale x 2
set logscale y
floor = 1e-3
set xlabel 'K'
set ylabel 'error (bf16 ulp; 0 drawn at 1e-3)'
set key outside
plot 'err_postnorm_bwd.dat' using 1:($2 > floor ? $2 : floor) with linespoints title 'postnorm_bwd/ref max', 'err_postnorm_bwd.dat' using 1:($3 > floor ? $3 : floor) with linespoints dt 2 title 'postnorm_bwd/ref p99.9', 'err_postnorm_bwd.dat' using 1:($4 > floor ? $4 : floor) with linespoints title 'postnorm_bwd/fused max', 'err_postnorm_bwd.dat' using 1:($5 > floor ? $5 : floor) with linespoints dt 2 title 'postnorm_bwd/fused p99.9'
set output 'hist_postnorm_bwd.png'
set logscale xy
set xlabel 'error (bf16 ulp)'
set ylabel 'elements'
plot 'hist_postnorm_bwd.dat' index 0 using 1:($2+1) with steps title 'postnorm_bwd/ref', 'hist_postnorm_bwd.dat' index 1 using 1:($2+1) with steps title 'postnorm_bwd/fused'
