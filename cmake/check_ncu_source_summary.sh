#!/bin/sh
# check_ncu_source_summary.sh SCRIPT PROFILE.csv.gz: scripts/ncu_source_summary.py
# on a profile whose numbers are known (reports/h200/profile_prenorm/
# src_bb12345_131072x1024x256.csv.gz: coop_n256_s4 and cluster2_n256_s4, each
# kernel's block twice in the file), and on a file with no kernel block.
set -eu
if [ $# -ne 2 ] || ! [ -r "$1" ] || ! [ -r "$2" ]; then
  echo "check_ncu_source_summary: usage: check_ncu_source_summary.sh SCRIPT PROFILE.csv.gz" >&2; exit 2
fi
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, expect_blocks, refuses_non_profile
out="$("$py" "$1" --top 3 "$2")"
expect "$out" '^== void <unnamed>::prenorm_gemm_fwd_kernel<<unnamed>::config<\(int\)256, \(int\)4, \(int\)1, \(int\)2>>' "coop_n256_s4's block"
expect "$out" '^   9818 samples; wait 26\.1%, selected 16\.0%, short_sb 11\.9%' "coop_n256_s4's samples and reasons"
expect "$out" '^ +7\.0%  IMAD\.U32 R20, R16, 0x10000, RZ +short_sb 641, not_selected 19$' "coop_n256_s4's top instruction"
expect "$out" '^ +25\.4%  UCGABAR_WAIT +barrier 2548$' "cluster2_n256_s4's top instruction"
expect_blocks "$out" 2
refuses_non_profile "$1" "a file with no kernel block"
[ "$status" = 0 ] && echo "PASS: ncu_source_summary.py as expected"
exit "$status"
