#!/bin/sh
# check_prenorm_goals.sh SCRIPT: scripts/prenorm_goals.py on runs whose numbers
# are known.  Run a: every shape of the 27 at fused/gemm 0.98 and hidden 105 %
# but four: 65536x512x512 with t_fused 1 % over t_gemm (a miss),
# 131072x256x256 with t_fused exactly t_gemm (met: the goal is <=),
# 524288x1024x1024 at hidden 94.9 % (a miss), and 131072x1024x256, whose
# summary case is absent (a miss, missing).  A non-summary case of a shape (the
# fused kernel's own row) must not be read, nor a second summary of a shape.
# Run b: every shape met.  Two and three runs: the shapes met in every run, in
# none, and in some.  Then files that are no bench run.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_prenorm_goals "$@"
"$py" - "$dir/a.json" "$dir/b.json" <<'PY'
import json, sys
def run(special):
    cases = []
    for m in (65536, 131072, 524288):
        for k in (256, 512, 1024):
            for n in (256, 512, 1024):
                shape = {"M": m, "K": k, "N": n}
                t_gemm, t_fused, hidden = 100.0, 98.0, 105.0
                t_fused, hidden, skip = special.get((m, k, n), (t_fused, hidden, False))
                cases.append({"op": "prenorm_fwd", "impl": "fused", "shape": shape, "time_us": 1e6, "bytes": 1})
                if skip:
                    continue
                cases.append({"op": "prenorm_fwd", "impl": "summary", "shape": shape, "variant": "v",
                              "time_us": t_fused, "bytes": 1, "t_fused_us": t_fused, "t_gemm_us": t_gemm,
                              "t_norm_us": 20.0, "hidden_pct": hidden})
    # a second summary of a shape (a later, narrowed bench in the same file): not read
    cases.append(dict(cases[1], t_fused_us=200.0, hidden_pct=50.0))
    return {"gpu": "test", "copy_bw_tbs": 4.0, "cases": cases}
a = {(65536, 512, 512): (101.0, 95.0, False), (131072, 256, 256): (100.0, 100.0, False),
     (524288, 1024, 1024): (98.0, 94.9, False), (131072, 1024, 256): (0, 0, True)}
json.dump(run(a), open(sys.argv[1], "w"))
json.dump(run({}), open(sys.argv[2], "w"))
PY
run_script "$dir/a.json"
one="$out"
expect "$one" '^M=65536 K=512 N=512 +v +101\.0 +100\.0 +1\.010 +95\.0  not met: t_fused > t_gemm$' "a time over cuBLASLt's, missed"
expect "$one" '^M=131072 K=256 N=256 +v +100\.0 +100\.0 +1\.000 +100\.0  met$' "t_fused equal to t_gemm is met"
expect "$one" '^M=524288 K=1024 N=1024 .* 94\.9  not met: hidden% < 95$' "hidden under 95, missed"
expect "$one" '^M=131072 K=1024 N=256 +- .*missing$' "a shape without its summary, missing"
expect "$one" '^M=65536 K=256 N=256 +v +98\.0 +100\.0 +0\.980 +105\.0  met$' "the first summary case read, not the fused row"
expect "$one" '^goal met on 24 of 27 shapes \(hidden% >= 95 on 25, t_fused <= t_gemm on 25\)$' "the count"
expect_rc 1 "shapes under the goal"
run_script "$dir/a.json" "$dir/b.json"
two="$out"
expect "$two" '^M=65536 K=512 N=512 +1\.010\* +95\.0 +0\.980 +105\.0 +1 of 2$' "two runs, a miss marked"
expect "$two" '^M=524288 K=1024 N=1024 +0\.980 +94\.9\* +0\.980 +105\.0 +1 of 2$' "two runs, a hidden miss marked"
expect "$two" '^M=131072 K=1024 N=256 +- +0\.980 +105\.0 +1 of 2$' "two runs, a missing shape"
expect "$two" '^run 2 \(.*b\.json\): goal met on 27 of 27 shapes' "each run's line"
expect "$two" '^met in every run: 24 of 27 shapes$' "the shapes met in every run, counted"
expect "$two" '^missed in every run: 0 of 27 shapes$' "no shape missed in both runs"
expect "$two" '^met in some runs only: 3 of 27 shapes: M=65536 K=512 N=512 \(1 of 2\), M=131072 K=1024 N=256 \(1 of 2\), M=524288 K=1024 N=1024 \(1 of 2\)$' \
  "the shapes met in one run of two, named in the grid's order"
expect_rc 1 "a run under the goal"
run_script "$dir/a.json" "$dir/a.json" "$dir/a.json"
expect "$out" '^missed in every run: 3 of 27 shapes: M=65536 K=512 N=512, M=131072 K=1024 N=256, M=524288 K=1024 N=1024$' \
  "the shapes missed in all three runs, a missing one among them"
expect "$out" '^met in some runs only: 0 of 27 shapes$' "none met in some runs only"
expect_rc 1 "three runs under the goal"
expect_exit 0 "every shape met" "$dir/b.json"
expect_exit 2 "a missing file" "$dir/missing.json"
printf '{"copy_bw_tbs": 4.0, "cases": [{"op": "rmsnorm_fwd", "impl": "ref", "shape": {"M": 8, "n": 8}, "bytes": 1, "time_us": 1}]}' > "$dir/norm.json"
expect_exit 2 "a run without pre-norm summaries" "$dir/norm.json"
# files that are no bench run: one line naming the file and what is wrong, exit 2
refuses_bad_runs prenorm_goals
printf '{"cases": [{"op": "prenorm_fwd", "impl": "summary", "shape": {"M": 65536, "K": 256, "N": 256}, "t_fused_us": "98", "t_gemm_us": 100, "hidden_pct": 105}]}' > "$dir/text_time.json"
expect_error 2 "a time not a number" '^prenorm_goals: .*text_time\.json: case 1 \(prenorm_fwd\): t_fused_us is "98", not a number$' \
  "$dir/text_time.json"
exit $status
