#!/bin/sh
# check_ncu_loops.sh SCRIPT PROFILE.csv.gz LT_PROFILE.csv.gz: scripts/ncu_loops.py on
# profiles whose loops are known: reports/h200/profile_prenorm/
# src_bb12345_131072x1024x256.csv.gz (coop_n256_s4, whose consumer k-loop spans
# 0xc50-0x1770, 179 instructions with four HGMMA, closed 131072 times = 1024 tiles x 16
# k-tiles of K = 1024 x 8 consumer warps; and cluster2_n256_s4), and
# reports/h200/profile_lt_399cdc4/src.csv.gz, whose cuBLASLt kernel closes its k-loop
# (0x8e0-0xc30, 54 instructions, eight HGMMA) with a predicate operand,
# `@!P0 BRA.U !UP2, ...`; then a bad --min-len, a missing file and a file with no kernel
# block.
set -eu
if [ $# -ne 3 ] || ! [ -r "$1" ] || ! [ -r "$2" ] || ! [ -r "$3" ]; then
  echo "check_ncu_loops: usage: check_ncu_loops.sh SCRIPT PROFILE.csv.gz LT_PROFILE.csv.gz" >&2; exit 2
fi
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, expect_blocks, refuses_non_profile
out="$("$py" "$1" "$2")"
expect "$out" '^== void <unnamed>::prenorm_gemm_fwd_kernel<<unnamed>::config<\(int\)256, \(int\)4, \(int\)1, \(int\)2>>' "coop_n256_s4's block"
expect "$out" '^   9818 samples; 4 loops of 16\+ instructions, 8 spin loops$' "coop_n256_s4's loop count"
expect "$out" '^   0xc50-0x1770 +179 +131072 +178\.8 +74\.1 +4\.00 ' "coop_n256_s4's k-loop: length, passes, four wgmma a pass"
expect "$out" '^   0x5c60 +452709  SYNCS\.PHASECHK\.TRANS64\.TRYWAIT P0, \[UR12\], R0 +0x40b0$' "coop_n256_s4's busiest spin"
expect "$out" '^   0xd60-0x1900 +187 +131072 ' "cluster2_n256_s4's k-loop"
expect_blocks "$out" 2
lt="$("$py" "$1" "$3")"
expect "$lt" '^== nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NNN$' "cuBLASLt's block"
expect "$lt" '^   0x8e0-0xc30 +54 +99360 +53\.9 +55\.5 +8\.00 ' "cuBLASLt's k-loop, closed by BRA.U !UP2"
if "$py" "$1" --min-len 2 "$2" > /dev/null 2>&1; then echo "FAIL: --min-len 2 was accepted"; status=1; fi
err="$("$py" "$1" /nonexistent/src.csv 2>&1 > /dev/null || true)"
expect "$err" '^ncu_loops: cannot read /nonexistent/src\.csv' "a missing file named in one line"
refuses_non_profile "$1" "a file with no kernel block"
[ "$status" = 0 ] && echo "PASS: ncu_loops.py as expected"
exit "$status"
