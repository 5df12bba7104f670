#!/bin/sh
# check_ncu_summary.sh SCRIPT SHAPES.csv.gz BWD.csv STALLS.csv.gz: scripts/ncu_summary.py on
# three committed profiles whose numbers are known: reports/h200/profile_shapes/ncu_65536x1024x256.csv.gz
# (gzipped; the launcher's kernel and cuBLASLt's timed in turn, so each kernel's launches are
# two apart: one run each with the default --gap, one run per launch with --gap 0) and
# reports/h200/profile_bwd/ncu_read.csv (plain; a backward's row kernel and reducer
# alternating, with DRAM bytes) and reports/h200/profile_bwd_g32/g32_0/profile.csv.gz (stall
# reasons, whose names end alike: the columns then headed [1], [2] with a legend; other
# extras by their names' ends); then a file with no profile in it.
set -eu
if [ $# -ne 4 ] || ! [ -r "$1" ] || ! [ -r "$2" ] || ! [ -r "$3" ] || ! [ -r "$4" ]; then
  echo "check_ncu_summary: usage: check_ncu_summary.sh SCRIPT SHAPES.csv.gz BWD.csv STALLS.csv.gz" >&2; exit 2
fi
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, refuses_non_profile
out="$("$py" "$1" "$2")"
expect "$out" '^prenorm_gemm_fwd_kernel<config<256, 4, 1, 2>> +\(132, 1, 1\) +18 +53\.4 +1\.055 +- +-$' \
  "the fused kernel's 18 in-turn launches as one run"
expect "$out" '^nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNN +\(2, 66, 1\) +18 +51\.4 +1\.054' "cuBLASLt's run"
runs="$(printf '%s\n' "$out" | grep -cE '^(prenorm|nvjet)')"
[ "$runs" = 3 ] || { echo "FAIL: $runs kernel runs printed, want 3"; printf '%s\n' "$out"; status=1; }
out="$("$py" "$1" "$2" --gap 0)"
expect "$out" '^prenorm_gemm_fwd_kernel<config<256, 4, 1, 2>> +\(132, 1, 1\) +1 ' "--gap 0: a run per launch"
out="$("$py" "$1" "$3")"
expect "$out" '^norm_bwd_pipe<64, 2, 0, RegColumns<64, 2, 0>> +\(656, 1, 1\) +5 +101\.3 +1\.083 +268\.7 +135\.7$' \
  "the row kernel's run beside its reducer, with DRAM bytes"
stall=smsp__warp_issue_stalled_
out="$("$py" "$1" "$4" --extra "${stall}short_scoreboard_per_warp_active.pct,${stall}long_scoreboard_per_warp_active.pct")"
expect "$out" "^# \\[1\\] ${stall}short_scoreboard_per_warp_active\\.pct$" "the first stall's legend line"
expect "$out" "^# \\[2\\] ${stall}long_scoreboard_per_warp_active\\.pct$" "the second stall's legend line"
expect "$out" '^kernel .* write MB +\[1\] +\[2\]$' "the stall columns headed [1] and [2]"
expect "$out" '^norm_bwd_pipe<512, 4, 1, SmemColumns<512, 4, 1>> +\(132, 1, 1\) +5 +112\.0 +1\.036 +268\.5 +121\.1 +17\.21 +9\.9$' \
  "the 512 x 4 row kernel's two stall medians, in --extra's order"
out="$("$py" "$1" "$4" --extra smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum)"
expect "$out" '^kernel .* write MB +t_executed\.sum +mem_shared\.sum$' "extras whose ends differ, headed by them"
if printf '%s\n' "$out" | grep -q '^# '; then echo "FAIL: a legend printed for extras whose ends differ"; status=1; fi
refuses_non_profile "$1" "a file with no profile"
[ "$status" = 0 ] && echo "PASS: ncu_summary.py as expected"
exit "$status"
