set terminal pngcairo size 900,500 noenhanced
set output 'err_prenorm_fwd.png'
set logscale x 2
set logscale y
floor = 1e-3
set xlabel 'K'
set ylabel 'error (bf16 ulp; 0 drawn at 1e-3)'
set key outside
plot 'err_prenorm_fwd.dat' using 1:($2 > floor ? $2 : floor) with linespoints title 'prenorm_fwd/ref max', 'err_prenorm_fwd.dat' using 1:($3 > floor ? $3 : floor) with linespoints dt 2 title 'prenorm_fwd/ref p99.9', 'err_prenorm_fwd.dat' using 1:($4 > floor ? $4 : floor) with linespoints title 'prenorm_fwd/fused max', 'err_prenorm_fwd.dat' using 1:($5 > floor ? $5 : floor) with linespoints dt 2 title 'prenorm_fwd/fused p99.9'
set output 'hist_prenorm_fwd.png'
set logscale xy
set xlabel 'error (bf16 ulp)'
set ylabel 'elements'
plot 'hist_prenorm_fwd.dat' index 0 using 1:($2+1) with steps title 'prenorm_fwd/ref', 'hist_prenorm_fwd.dat' index 1 using 1:($2+1) with steps title 'prenorm_fwd/fused'
