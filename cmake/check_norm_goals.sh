#!/bin/sh
# check_norm_goals.sh SCRIPT: scripts/norm_goals.py on a run whose numbers are
# known.  Copy bandwidth 4.0 TB/s; every point of the goal at 0.95 of it but
# three: the LayerNorm forward at n = 16384, 2^26 at 0.880 (a miss), the
# RMSNorm backward at n = 4096, 2^28 at exactly 0.85 (met: the goal is >=),
# and the LayerNorm backward at n = 1024, 2^26, which failed (a miss).  A
# second, slower case of a shape already seen (another grid's) must not be
# read, nor the vendor's rows under --impl ref.  A second run (b) meets every
# point but the LayerNorm forward at n = 16384, 2^26, there at 0.895: read
# together, that point shows its lower reading, missed in both; the LayerNorm
# backward at n = 1024, 2^26, its one reading and met in one run of two.
# A third (c) meets every point.  Then files that are no bench run.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_norm_goals "$@"
"$py" - "$dir/bench.json" "$dir/b.json" "$dir/c.json" <<'PY'
import json, sys
bw = 4.0
cases, b_cases = [], []
for op in ("rmsnorm_fwd", "layernorm_fwd", "rmsnorm_bwd", "layernorm_bwd"):
    for size in (1 << 26, 1 << 28):
        for n in (1024, 2048, 4096, 8192, 16384):
            frac = 0.95
            if (op, size, n) == ("layernorm_fwd", 1 << 26, 16384): frac = 0.88
            if (op, size, n) == ("rmsnorm_bwd", 1 << 28, 4096): frac = 0.85
            nbytes = 1e9
            t = nbytes / (frac * bw * 1e12) * 1e6
            if frac == 0.85:  # bytes and time whose quotient is 0.85 to the bit in norm_goals.py's arithmetic
                nbytes, t = 3.4e9, 1000.0
            if (op, size, n) == ("layernorm_bwd", 1 << 26, 1024): t = None
            cases.append({"op": op, "impl": "ref", "shape": {"M": size // n, "n": n}, "bytes": nbytes, "time_us": t})
            cases.append({"op": op, "impl": "vendor", "shape": {"M": size // n, "n": n}, "bytes": nbytes,
                          "time_us": nbytes / (0.5 * bw * 1e12) * 1e6})
            b_frac = 0.895 if (op, size, n) == ("layernorm_fwd", 1 << 26, 16384) else 0.95
            b_cases.append({"op": op, "impl": "ref", "shape": {"M": size // n, "n": n}, "bytes": 1e9,
                            "time_us": 1e9 / (b_frac * bw * 1e12) * 1e6})
# the pre-norm grid's RMSNorm at a shape of the norm grid, slower: not read
cases.append({"op": "rmsnorm_fwd", "impl": "ref", "shape": {"M": 65536, "n": 1024}, "bytes": 1e9, "time_us": 1e6})
json.dump({"gpu": "test", "copy_bw_tbs": bw, "mm_peak_tflops": 800.0, "cases": cases}, open(sys.argv[1], "w"))
json.dump({"gpu": "test", "copy_bw_tbs": bw, "mm_peak_tflops": 800.0, "cases": b_cases}, open(sys.argv[2], "w"))
c_cases = [dict(c, time_us=1e9 / (0.95 * bw * 1e12) * 1e6) for c in b_cases]  # every point met
json.dump({"gpu": "test", "copy_bw_tbs": bw, "mm_peak_tflops": 800.0, "cases": c_cases}, open(sys.argv[3], "w"))
PY
run_script "$dir/bench.json"
expect "$out" '^layernorm_fwd +0\.90 +2\^26 +0\.950 +0\.950 +0\.950 +0\.950 +0\.880\*$' "a miss, marked"
expect "$out" '^rmsnorm_bwd +0\.85 +2\^28 +0\.950 +0\.950 +0\.850 +0\.950 +0\.950$' "a point exactly on the goal is met"
expect "$out" '^layernorm_bwd +0\.85 +2\^26 +- +0\.950' "a failed case, missing"
expect "$out" '^rmsnorm_fwd +0\.90 +2\^26 +0\.950 ' "the first case of a shape is read"
expect "$out" '^goal met at 38 of 40 points; not: layernorm_fwd n=16384 2\^26 0\.880, layernorm_bwd n=1024 2\^26 missing$' "the summary"
expect_rc 1 "points under the goal"
run_script --impl vendor "$dir/bench.json"
expect "$out" '^goal met at 0 of 40 points' "--impl vendor reads the vendor's rows"
run_script "$dir/bench.json" "$dir/b.json"
expect "$out" '^layernorm_fwd +0\.90 +2\^26 +0\.950 2/2 +0\.950 2/2 +0\.950 2/2 +0\.950 2/2 +0\.880\* 0/2$' "two runs: the lower reading, the count"
expect "$out" '^layernorm_bwd +0\.85 +2\^26 +0\.950 1/2 ' "two runs: a point one run lacks"
expect "$out" '^run 2 \(.*b\.json\): goal met at 39 of 40 points; not: layernorm_fwd n=16384 2\^26 0\.895$' "each run's line"
expect_rc 1 "a point missed in some run"
expect_exit 0 "every point met in every run" "$dir/c.json" "$dir/c.json"
expect_exit 1 "one run of two with a miss" "$dir/c.json" "$dir/b.json"
expect_exit 2 "a missing file" "$dir/missing.json"
printf '{"copy_bw_tbs": 4.0, "cases": [{"op": "gemm", "impl": "cublaslt", "shape": {"M": 8, "K": 8, "N": 8}, "bytes": 1, "time_us": 1}]}' > "$dir/gemm.json"
expect_exit 2 "a run without norm cases" "$dir/gemm.json"
# files that are no bench run, or whose fractions cannot be read: one line naming
# the file and what is wrong, exit 2, never a traceback
refuses_bad_runs norm_goals
refuses_bad_runs norm_goals "$dir/c.json"
printf '{"copy_bw_tbs": "4.0", "cases": []}' > "$dir/bw.json"
expect_error 2 "copy_bw_tbs not a number" '^norm_goals: .*bw\.json: copy_bw_tbs is "4\.0", not a positive number$' "$dir/bw.json"
printf '{"copy_bw_tbs": 4.0, "cases": [{"op": "rmsnorm_fwd", "impl": "ref", "shape": {"M": 8, "n": 8}, "time_us": 1}]}' > "$dir/nobytes.json"
expect_error 2 "a case without bytes" '^norm_goals: .*nobytes\.json: case 1 \(rmsnorm_fwd\): bytes is missing, not a number$' \
  "$dir/nobytes.json"
printf '{"copy_bw_tbs": 4.0, "cases": {"rmsnorm_fwd": []}}' > "$dir/object.json"
expect_error 2 "cases not a list" '^norm_goals: .*object\.json: cases is not a list$' "$dir/object.json"
[ "$status" = 0 ] && echo "PASS: norm_goals.py reads the goal as expected"
exit "$status"
