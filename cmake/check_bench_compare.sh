#!/bin/sh
# check_bench_compare.sh SCRIPT: scripts/bench_compare.py on runs whose
# numbers are known.  Two variants, a and b, two rounds each (b's rounds in
# the reverse order, as ab_bench.sh runs them), two cases: the norm case is
# faster under b in both rounds (the ranges apart), the GEMM case faster
# under a in one round and slower in the other (the ranges overlap), and a
# case that failed in one run.  Checks the plain table, --rounds and its
# summary lines; then a run that times one case twice (as a grid of all ops
# does): the first timing counts; then --spread, on a run with the
# repetitions' p10 and p90 and one without; then files that are no bench run.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_bench_compare "$@"
run() { # NAME NORM_US GEMM_US FAILED_US (null: failed)
  cat > "$dir/$1.json" <<JSON
{"gpu": "test", "date": "2026-11-29", "command": "test", "copy_bw_tbs": 4.0, "mm_peak_tflops": 800.0,
 "cases": [
  {"op": "rmsnorm_fwd", "impl": "ref", "shape": {"M": 4096, "n": 16384}, "time_us": $2, "bytes": 268435456, "flops": 0},
  {"op": "gemm", "impl": "cublas", "shape": {"M": 65536, "K": 256, "N": 256}, "time_us": $3, "bytes": 1, "flops": 1},
  {"op": "layernorm_bwd", "impl": "ref", "shape": {"M": 8, "n": 8}, "time_us": $4, "bytes": 1, "flops": 0}]}
JSON
}
run ab_X_a_r1 100.0 20.0 5.0
run ab_X_b_r1 80.0 22.0 5.0
run ab_X_b_r2 90.0 18.0 null
run ab_X_a_r2 110.0 21.0 5.0
cd "$dir"
plain="$("$py" "$script" ab_X_a_r1.json ab_X_b_r1.json)"
# 268435456 bytes in 100 us at 4.0 TB/s: 0.671 of copy bandwidth; in 80 us 0.839
expect "$plain" '^rmsnorm_fwd +ref +M=4096 n=16384 +0\.671 +0\.839$' "plain table, fractions"
rounds="$("$py" "$script" --rounds --time ab_X_a_r1.json ab_X_b_r1.json ab_X_b_r2.json ab_X_a_r2.json)"
expect "$rounds" 'ab_X_a +ab_X_b +best \(rounds: ab_X_a 2, ab_X_b 2\)' "--rounds header"
expect "$rounds" '^rmsnorm_fwd .* 105\.0 100\.0-110\.0 +85\.0 80\.0-90\.0 +ab_X_b 2/2$' "a clear win"
expect "$rounds" '^gemm .* 20\.5 20\.0-21\.0 +20\.0 18\.0-22\.0 +\(ab_X_b\) 1/2$' "a win within the spread"
expect "$rounds" '^layernorm_bwd .* 5\.0 5\.0-5\.0 +failed +ab_X_a 2/2$' "a failed round"
# summaries: b's mean time over a's, and the cases each won outright (the failed
# case is a's: b has no range to overlap)
expect "$rounds" '^summary rmsnorm_fwd ref: ab_X_b / ab_X_a time 0\.810-0\.810, median 0\.810 over 1 case\(s\); clear wins: ab_X_a 0, ab_X_b 1$' "summary, a clear win"
expect "$rounds" '^summary gemm cublas: ab_X_b / ab_X_a time 0\.976-0\.976, median 0\.976 over 1 case\(s\); clear wins: ab_X_a 0, ab_X_b 0$' "summary, within the spread"
expect "$rounds" '^summary layernorm_bwd ref: ab_X_b / ab_X_a: no case where both ran; clear wins: ab_X_a 1, ab_X_b 0$' "summary, a failed variant"
frac="$("$py" "$script" --rounds ab_X_a_r1.json ab_X_b_r1.json ab_X_b_r2.json ab_X_a_r2.json)"
expect "$frac" '^rmsnorm_fwd .* ab_X_b 2/2$' "--rounds on fractions: higher is better"
# on fractions the ratio is a's mean fraction over b's: (1/100 + 1/110) / (1/80 + 1/90) = 0.809
expect "$frac" '^summary rmsnorm_fwd ref: ab_X_b / ab_X_a time 0\.809-0\.809' "summary on fractions: the time's ratio"
# the norm case timed again later in the same run (150 us): its first timing counts
sed 's/"flops": 0}]}/"flops": 0},\n  {"op": "rmsnorm_fwd", "impl": "ref", "shape": {"n": 16384, "M": 4096}, "time_us": 150.0, "bytes": 268435456, "flops": 0}]}/' \
  ab_X_a_r1.json > twice.json
twice="$("$py" "$script" --time twice.json ab_X_b_r1.json)"
expect "$twice" '^rmsnorm_fwd +ref +M=4096 n=16384 +100\.0 +80\.0$' "a case timed twice: the first timing"
# --spread: a run with the repetitions' p10 and p90 (95 and 120 us around 100) and one
# without (written before the bench kept them); as fractions the p90 time is the low end
mkdir -p new old
sed 's/"time_us": 100.0,/"time_us": 100.0, "time_p10_us": 95.0, "time_p90_us": 120.0,/' ab_X_a_r1.json > new/spread.json
cp ab_X_b_r1.json old/spread.json
spread="$("$py" "$script" --spread --time new/spread.json old/spread.json)"
expect "$spread" '^rmsnorm_fwd +ref +M=4096 n=16384 +100\.0 \[95\.0-120\.0\] +80\.0 \[-\]$' "--spread, times"
expect "$spread" ' new/spread +old/spread$' "runs of one file name named by their folders"
spread="$("$py" "$script" --spread new/spread.json)"
# 268435456 bytes at 4.0 TB/s: 120 us 0.559, 95 us 0.706
expect "$spread" '^rmsnorm_fwd +ref +M=4096 n=16384 +0\.671 \[0\.559-0\.706\]$' "--spread, fractions"
expect_exit 2 "--spread with --rounds" --spread --rounds ab_X_a_r1.json ab_X_a_r2.json
# input that is not a bench run (here after a good one): one line naming the file
# and what is wrong, exit 2, never a traceback
refuses_bad_runs bench_compare ab_X_a_r1.json
refuses_bad_runs bench_compare --time ab_X_a_r1.json
# fractions need the run's copy bandwidth and each case's bytes; times do not
sed 's/"copy_bw_tbs": 4.0, //' ab_X_b_r1.json > nobw.json
expect_error 2 "fractions of a run without copy_bw_tbs" '^bench_compare: nobw\.json: no copy_bw_tbs' nobw.json
expect_exit 0 "times of a run without copy_bw_tbs" --time nobw.json
sed 's/"bytes": 268435456, //' ab_X_b_r1.json > nobytes.json
expect_error 2 "fractions of a case without bytes" '^bench_compare: nobytes\.json: case 1 \(rmsnorm_fwd\): bytes is missing, not a number$' \
  nobytes.json
[ "$status" = 0 ] && echo "PASS: bench_compare.py tables as expected"
exit "$status"
