#!/bin/bash
# check_probe_then_suite.sh ROOT: fused/tools/probe_then_suite.sh, which lands a pick only where the
# probe's runs all say so and then runs the suite, run in a scratch copy of the tools it needs where
# build_probe.sh and gpu_suite.sh are stand-ins.  The stand-in probe prints a table whose
# coop3_n256_held time at 524288x1024x256 is coop_n256_s4's times the factor PTS_F names for the run
# (a list, one per run, the last repeated), and fails when PTS_FAIL is 1 (its build fails when
# PTS_BUILD_FAIL is set); the stand-in suite logs its steps, NF_COMMIT, NF_CTEST_ARGS and the tree's
# pick.txt, which the pick diff turns from "old" to "new", and exits PTS_SUITE_RC.  A stand-in
# nvidia-smi plays a GPU host (or a host without a GPU).  Checked: the refusals (exit 2, nothing
# run), no GPU (77), a win in every run (the diff laid over, the suite at NF_COMMIT_WITH, the tree
# given back after), a loss or a win in some runs only (the suite on the tree as it is), the probe's
# build (its log, ptxas report and SASS counts in probe/build.txt) and a build that fails (exit 1,
# no probe, no suite), a probe run that fails (exit 1, no suite), the tests step and the suite's
# status passed on.
set -u
command -v python3 > /dev/null || { echo "no python3 here: probe_then_suite_test skipped"; exit 77; }
command -v patch > /dev/null || { echo "no patch here: probe_then_suite_test skipped"; exit 77; }
src="$1"
# shellcheck source=cmake/check_probe_tools_lib.sh
. "$src/cmake/check_probe_tools_lib.sh" # scratch_tree, gpu, expect_rc, expect_out
scratch_tree probe_then_suite.sh probe_ratios.py clock_summary.py # $dir, $t, status
echo old > "$t/pick.txt"
cat > "$dir/pick.diff" <<'EOT'
--- a/pick.txt
+++ b/pick.txt
@@ -1 +1 @@
-old
+new
EOT
cat > "$dir/stale.diff" <<'EOT'
--- a/pick.txt
+++ b/pick.txt
@@ -1 +1 @@
-older
+new
EOT
cat > "$t/fused/tools/build_probe.sh" <<'EOT'
#!/bin/bash
# stand-in: BIN prints a probe table, coop3_n256_held = coop_n256_s4 x the run's factor
[ -z "${PTS_BUILD_FAIL:-}" ] || { echo "stand-in: the probe does not build"; exit 1; }
cat > "$1" <<'EOP'
#!/bin/bash
n=$(($(cat "$PTS_DIR/runs" 2> /dev/null || echo 0) + 1)); echo $n > "$PTS_DIR/runs"
read -r -a fs <<< "$PTS_F"; f="${fs[$((n <= ${#fs[@]} ? n - 1 : ${#fs[@]} - 1))]}"
printf 'M x K x N  coop_n256 coop_n256_s4 coop3_n256_held auto cublasLt roofline best b/gemm TFLOP/s %%roof\n'
for s in 131072x1024x256 524288x1024x256; do
  awk -v s=$s -v f=$f 'BEGIN { printf "%s 0.5000 0.4000 %.4f 0.4000 0.4000 0.3000 coop_n256_s4 1.0 600 80.0\n", s, 0.4 * f }'
done
echo "(ms, medians of 15 timed in turn, L2 flushed)"
[ "${PTS_FAIL:-0}" = 1 ] && { echo "FAIL: 1 check failure(s)"; exit 1; }
exit 0
EOP
chmod +x "$1"
echo "ptxas info    : Used 168 registers, used 16 barriers" > "$2"
EOT
cat > "$t/scripts/gpu_suite.sh" <<'EOT'
#!/bin/bash
# stand-in: one line per call
echo "suite $1 commit=$NF_COMMIT ctest=${NF_CTEST_ARGS:-} pick=$(cat pick.txt) dir=$2" >> "$PTS_DIR/suite.log"
exit "${PTS_SUITE_RC:-0}"
EOT
chmod +x "$t/fused/tools/build_probe.sh" "$t/scripts/gpu_suite.sh"
pts() { # ARGS: probe_then_suite.sh's exit status in rc, its output in $dir/out; fresh counters
  rm -rf "$dir/out_dir" "$dir/runs" "$dir/suite.log"
  rc=0
  (cd "$t" && PATH="$dir/bin:$PATH" OUT="$dir/out_dir" PTS_DIR="$dir" fused/tools/probe_then_suite.sh "$@") \
    > "$dir/out" 2>&1 || rc=$?
}
args=(coop3_n256_held coop_n256_s4 524288x1024x256 "$dir/pick.diff" "$dir/suite")
no_suite() { [ ! -e "$dir/suite.log" ] || { echo "FAIL: $1: the suite ran"; cat "$dir/suite.log"; status=1; }; }
suite_line() { # PATTERN WHAT: the suite's log has exactly the lines given, in order
  [ "$(cat "$dir/suite.log" 2> /dev/null)" = "$1" ] ||
    { echo "FAIL: $2: the suite's calls:"; cat "$dir/suite.log" 2> /dev/null; echo "expected: $1"; status=1; }
}
tree_back() { [ "$(cat "$t/pick.txt")" = old ] || { echo "FAIL: $1: pick.txt is '$(cat "$t/pick.txt")'"; status=1; }; }

gpu "GPU 0: NVIDIA H200"
export NF_PROBE_VARIANTS=5,10 NF_COMMIT=c1 NF_COMMIT_WITH=c2 PTS_F=0.98
pts coop3_n256_held coop_n256_s4 524288x1024x256; expect_rc 2 "four arguments"
pts "${args[@]:0:2}" 524288x1024 "${args[@]:3}"; expect_rc 2 "a shape without N"
expect_out "^probe_then_suite: SHAPE '524288x1024' is not MxKxN" "$dir/out" "a shape without N"
pts "Coop3" "${args[@]:1}"; expect_rc 2 "a variant that is no name"
NF_PROBE_VARIANTS='' pts "${args[@]}"; expect_rc 2 "NF_PROBE_VARIANTS unset"
NF_COMMIT='' pts "${args[@]}"; expect_rc 2 "NF_COMMIT unset"
NF_COMMIT_WITH=c1 pts "${args[@]}"; expect_rc 2 "NF_COMMIT_WITH the same as NF_COMMIT"
expect_out "^probe_then_suite: NF_COMMIT_WITH must name the commit" "$dir/out" "NF_COMMIT_WITH the same"
NF_PROBE_ROUNDS=0 pts "${args[@]}"; expect_rc 2 "NF_PROBE_ROUNDS 0"
pts "${args[@]:0:3}" "$dir/stale.diff" "$dir/suite"; expect_rc 2 "a diff that does not apply"
expect_out "does not apply to the tree$" "$dir/out" "a diff that does not apply"
no_suite "a refusal"
[ ! -e "$dir/runs" ] || { echo "FAIL: a probe ran after a refusal"; status=1; }

gpu ""
pts "${args[@]}"; expect_rc 77 "no GPU"
expect_out "^probe_then_suite: no GPU visible" "$dir/out" "no GPU"
gpu "GPU 0: NVIDIA H200"

PTS_F=0.98 pts "${args[@]}"; expect_rc 0 "a win in every run"
expect_out "^coop3_n256_held under coop_n256_s4 at 524288x1024x256 in 3 of 3 runs: the suite at c2 \(" \
  "$dir/out_dir/decision.txt" "a win in every run: the decision"
expect_out "^# command: NF_PROBE_VARIANTS=5,10 NF_PROBE_ROUNDS=3 fused/tools/probe_then_suite.sh coop3_n256_held" \
  "$dir/out_dir/decision.txt" "decision.txt's header"
expect_out "^524288x1024x256 +0\.980 +0\.980 +0\.980$" "$dir/out_dir/decision.txt" "the ratios per run"
suite_line "suite build,sass,bench,gate,report commit=c2 ctest= pick=new dir=$dir/suite" "a win in every run"
tree_back "a win in every run"
[ -f "$dir/out_dir/probe_r3/probe_log.txt" ] || { echo "FAIL: no third probe run"; status=1; }
expect_out "Used 168 registers" "$dir/out_dir/probe/build.txt" "the probe build's ptxas report"
expect_out "^SASS: 2 HGMMA, 0 LDL/STL, 1 UTMALDG$" "$dir/out_dir/probe/build.txt" "the probe build's SASS counts"

PTS_BUILD_FAIL=1 pts "${args[@]}"; expect_rc 1 "the probe's build fails"
expect_out "^probe_then_suite: the probe build failed \\(probe/build.txt\\)$" "$dir/out" "the failed build named"
expect_out "^stand-in: the probe does not build$" "$dir/out_dir/probe/build.txt" "the failed build's messages kept"
[ ! -e "$dir/runs" ] || { echo "FAIL: a probe ran after its build failed"; status=1; }
no_suite "the probe's build fails"

PTS_F=1.02 pts "${args[@]}"; expect_rc 0 "a loss"
expect_out "in 0 of 3 runs: the suite at c1, as it is$" "$dir/out_dir/decision.txt" "a loss: the decision"
suite_line "suite build,sass,bench,gate,report commit=c1 ctest= pick=old dir=$dir/suite" "a loss"

PTS_F="0.98 1.01 0.98" pts "${args[@]}"; expect_rc 0 "a win in two runs of three"
expect_out "in 2 of 3 runs: the suite at c1, as it is$" "$dir/out_dir/decision.txt" "two of three"
suite_line "suite build,sass,bench,gate,report commit=c1 ctest= pick=old dir=$dir/suite" "two of three"

PTS_F=0.98 PTS_FAIL=1 pts "${args[@]}"; expect_rc 1 "a probe run that fails"
expect_out "^probe_then_suite: a probe run failed \(probe_r1/\): no suite" "$dir/out" "the failed run named"
no_suite "a probe run that fails"
tree_back "a probe run that fails"

PTS_F=0.98 NF_PROBE_ROUNDS=1 NF_SUITE_STEPS=build,bench NF_SUITE_CTEST_ARGS='-R prenorm' PTS_SUITE_RC=3 \
  pts "${args[@]}"; expect_rc 3 "the suite's status"
suite_line "suite build,bench commit=c2 ctest= pick=new dir=$dir/suite
suite tests commit=c2 ctest=-R prenorm pick=new dir=$dir/suite" "the steps asked for, then the tests"
tree_back "after the tests"
exit $status
