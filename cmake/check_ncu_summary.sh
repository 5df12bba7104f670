#!/bin/sh
# check_ncu_summary.sh SCRIPT SHAPES.csv.gz BWD.csv: scripts/ncu_summary.py on two committed
# profiles whose numbers are known: reports/h200/profile_shapes/ncu_65536x1024x256.csv.gz
# (gzipped; the launcher's kernel and cuBLASLt's timed in turn, so each kernel's launches are
# two apart: one run each with the default --gap, one run per launch with --gap 0) and
# reports/h200/profile_bwd/ncu_read.csv (plain; a backward's row kernel and reducer
# alternating, with DRAM bytes); then a file with no profile in it.
set -eu
if [ $# -ne 3 ] || ! [ -r "$1" ] || ! [ -r "$2" ] || ! [ -r "$3" ]; then
  echo "check_ncu_summary: usage: check_ncu_summary.sh SCRIPT SHAPES.csv.gz BWD.csv" >&2; exit 2
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
refuses_non_profile "$1" "a file with no profile"
[ "$status" = 0 ] && echo "PASS: ncu_summary.py as expected"
exit "$status"
