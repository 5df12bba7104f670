#!/bin/bash
# check_prenorm_readings.sh ROOT: fused/tools/prenorm_readings.sh, which runs the probe once per
# input kind and then several bench readings of the pre-norm grid, and summarises them, run in a
# scratch copy of the tools it needs where build_probe.sh and gpu_suite.sh are stand-ins.  The
# stand-in probe logs the inputs it was given and prints a table whose auto / cuBLASLt at
# 65536x256x256 is 0.98 with the spread inputs and 1.02 with the bench's, and fails when its
# inputs are PR_FAIL's (its build fails when PR_PROBE_BUILD_FAIL is set); the stand-in suite logs
# its steps and bench settings, fails its build when PR_BUILD_RC is set, and writes each reading's
# bench.json with that shape's fused/gemm from the list PR_RATIOS (one per reading).  A stand-in
# nvidia-smi plays a GPU host (or a host without one).  Checked: the refusals (exit 2, nothing
# run), no GPU (77), the probe runs named by kind and given their inputs, the probe build's log,
# the readings and their settings, the summaries and their headers, the time limit, a failed probe
# build, a failed probe run, a failed suite build.
set -u
command -v python3 > /dev/null || { echo "no python3 here: prenorm_readings_test skipped"; exit 77; }
src="$1"
# shellcheck source=cmake/check_probe_tools_lib.sh
. "$src/cmake/check_probe_tools_lib.sh" # scratch_tree, gpu, expect_rc, expect_out
scratch_tree prenorm_readings.sh prenorm_goals.py probe_ratios.py bench_compare.py clock_summary.py
cat > "$t/fused/tools/build_probe.sh" <<'EOT'
#!/bin/bash
# stand-in: BIN logs its inputs and prints a probe table
cat > "$1" <<'EOP'
#!/bin/bash
echo "${NF_PROBE_INPUTS:-unset}" >> "$PR_DIR/probe_inputs.log"
r=0.0245; [ "$NF_PROBE_INPUTS" = bench ] && r=0.0255
printf 'M x K x N  coop_n256 auto cublasLt roofline best b/gemm TFLOP/s %%roof\n'
printf '65536x256x256 0.0250 %s 0.0250 0.0159 coop_n256 0.98 351 65.0\n' "$r"
echo "(ms, medians of 15 timed in turn, L2 flushed)"
[ "${PR_FAIL:-}" = "$NF_PROBE_INPUTS" ] && { echo "FAIL: 1 check failure(s)"; exit 1; }
exit 0
EOP
chmod +x "$1"
echo "ptxas info    : Used 168 registers" > "$2"
[ -z "${PR_PROBE_BUILD_FAIL:-}" ] || { echo "stand-in: the probe does not build"; exit 1; }
EOT
cat > "$t/scripts/gpu_suite.sh" <<'EOT'
#!/bin/bash
# stand-in: one line per call; bench writes a reading of one shape
echo "suite $1 commit=$NF_COMMIT args=${NF_BENCH_ARGS:-} log=${NF_REF_GEMM_LOG:-}" >> "$PR_DIR/suite.log"
if [ "$1" = build ]; then echo built > "$2/build.log"; exit "${PR_BUILD_RC:-0}"; fi
n=$(($(cat "$PR_DIR/readings" 2> /dev/null || echo 0) + 1)); echo $n > "$PR_DIR/readings"
read -r -a rs <<< "$PR_RATIOS"; f="${rs[$((n - 1))]}"
python3 - "$2/bench.json" "$f" <<'PY'
import json, sys
s = {"M": 65536, "K": 256, "N": 256}
case = {"op": "prenorm_fwd", "impl": "summary", "shape": s, "variant": "coop_n256", "time_us": 25.0 * float(sys.argv[2]),
        "bytes": 1, "t_fused_us": 25.0 * float(sys.argv[2]), "t_gemm_us": 25.0, "t_norm_us": 10.0, "hidden_pct": 100.0}
json.dump({"gpu": "test", "copy_bw_tbs": 4.0, "cases": [case]}, open(sys.argv[1], "w"))
PY
EOT
chmod +x "$t/fused/tools/build_probe.sh" "$t/scripts/gpu_suite.sh"
pr() { # ARGS: prenorm_readings.sh's exit status in rc, its output in $dir/out; fresh logs
  rm -rf "$dir/o" "$dir/readings" "$dir/suite.log" "$dir/probe_inputs.log"
  rc=0
  (cd "$t" && PATH="$dir/bin:$PATH" PR_DIR="$dir" fused/tools/prenorm_readings.sh "$@") > "$dir/out" 2>&1 || rc=$?
}
nothing_ran() {
  if [ -e "$dir/suite.log" ] || [ -e "$dir/probe_inputs.log" ]; then echo "FAIL: $1: something ran"; status=1; fi
}
log_is() { # FILE TEXT WHAT: FILE holds exactly TEXT
  [ "$(cat "$1" 2> /dev/null)" = "$2" ] || { echo "FAIL: $3: $1 holds:"; cat "$1" 2> /dev/null; echo "expected: $2"; status=1; }
}

gpu "GPU 0: NVIDIA H200"
export NF_PROBE_VARIANTS=2,5 NF_COMMIT=c1 PR_RATIOS="0.99 1.01 0.995"
pr 3; expect_rc 2 "one argument"
pr 0 "$dir/o"; expect_rc 2 "no readings"
expect_out "^prenorm_readings: READINGS '0' is not a positive integer$" "$dir/out" "no readings named"
NF_COMMIT='' pr 3 "$dir/o"; expect_rc 2 "NF_COMMIT unset"
NF_PROBE_INPUT_RUNS="spread normal" pr 3 "$dir/o"; expect_rc 2 "an input kind that is none"
expect_out "^prenorm_readings: NF_PROBE_INPUT_RUNS: 'normal' is neither spread nor bench$" "$dir/out" "the kind named"
NF_PROBE_VARIANTS='' pr 3 "$dir/o"; expect_rc 2 "probe runs without NF_PROBE_VARIANTS"
NF_TIME_LIMIT=5m pr 3 "$dir/o"; expect_rc 2 "a time limit that is no number"
nothing_ran "a refusal"

gpu ""
pr 3 "$dir/o"; expect_rc 77 "no GPU"
expect_out "^prenorm_readings: no GPU visible" "$dir/out" "no GPU"
nothing_ran "no GPU"
gpu "GPU 0: NVIDIA H200"

NF_PROBE_INPUT_RUNS="spread bench spread" pr 3 "$dir/o"; expect_rc 0 "probe runs and three readings"
log_is "$dir/probe_inputs.log" "spread
bench
spread" "each probe run given its inputs"
for r in spread1 bench1 spread2; do
  [ -f "$dir/o/probe/$r/probe_log.txt" ] || { echo "FAIL: no probe run probe/$r/"; status=1; }
done
expect_out "Used 168 registers" "$dir/o/probe/build.txt" "the probe build's ptxas report"
expect_out "^SASS: 2 HGMMA, 0 LDL/STL, 1 UTMALDG$" "$dir/o/probe/build.txt" "the probe build's SASS counts"
expect_out "^# command: NF_PROBE_VARIANTS=2,5 NF_PROBE_INPUTS=bench fused/tools/run_probe.sh" \
  "$dir/o/probe/bench1/probe_log.txt" "the probe log's header names the inputs"
a="args=--grid prenorm --op prenorm_fwd,gemm,rmsnorm_fwd log=1"
log_is "$dir/suite.log" "suite build commit=c1 args= log=
suite bench commit=c1 $a
suite bench commit=c1 $a
suite bench commit=c1 $a" "the suite's build, then three readings of the pre-norm grid"
expect_out "^# command: scripts/prenorm_goals.py r1/bench.json r2/bench.json r3/bench.json \(in OUTDIR\)$" \
  "$dir/o/prenorm_goals.txt" "prenorm_goals.txt's header"
expect_out "^M=65536 K=256 N=256 .*0\.990.*1\.010\*.*0\.995.* +2 of 3" "$dir/o/prenorm_goals.txt" \
  "the shape met in two readings of three"
expect_out "^65536x256x256 +median 0\.980, .*bench 0\.995 \(0\.990-1\.010, 3 runs\), probe - bench -0\.015$" \
  "$dir/o/probe_vs_bench_spread.txt" "the spread runs against the readings"
expect_out "^# command: scripts/probe_ratios.py auto cublasLt --by-shape probe/spread1/probe_log.txt probe/spread2/probe_log.txt --bench r1/bench.json" \
  "$dir/o/probe_vs_bench_spread.txt" "probe_vs_bench_spread.txt's header names both spread runs"
expect_out "^65536x256x256 +median 1\.020, .*probe - bench \+0\.025$" "$dir/o/probe_vs_bench_bench.txt" \
  "the bench-input run against the readings"

NF_PROBE_INPUT_RUNS='' pr 2 "$dir/o"; expect_rc 0 "no probe"
if [ -e "$dir/o/probe" ] || [ -e "$dir/probe_inputs.log" ]; then echo "FAIL: a probe ran with none asked"; status=1; fi
[ ! -e "$dir/o/probe_vs_bench_spread.txt" ] || { echo "FAIL: a probe summary with no probe"; status=1; }
expect_out "^# command: scripts/prenorm_goals.py r1/bench.json r2/bench.json \(in OUTDIR\)$" \
  "$dir/o/prenorm_goals.txt" "two readings"

NF_TIME_LIMIT=30 pr 3 "$dir/o"; expect_rc 1 "a time limit that leaves no reading"
expect_out "^prenorm_readings: NF_TIME_LIMIT=30: readings 1-3 not started$" "$dir/out" "the readings not started"
expect_out "^prenorm_readings: no reading was taken" "$dir/out" "no reading: the error"
NF_TIME_LIMIT=3600 pr 2 "$dir/o"; expect_rc 0 "a time limit that leaves every reading"
[ -s "$dir/o/r2/bench.json" ] || { echo "FAIL: a time limit of an hour stopped the readings"; status=1; }

PR_FAIL=bench pr 2 "$dir/o"; expect_rc 1 "a probe run that fails"
expect_out "^prenorm_readings: a probe run failed \(probe/bench1/\): no readings$" "$dir/out" "the failed run named"
[ ! -e "$dir/suite.log" ] || { echo "FAIL: the suite ran after a failed probe run"; status=1; }

PR_PROBE_BUILD_FAIL=1 pr 2 "$dir/o"; expect_rc 1 "the probe's build fails"
expect_out "^prenorm_readings: the probe build failed \(probe/build.txt\)$" "$dir/out" "the probe's failed build named"
expect_out "^stand-in: the probe does not build$" "$dir/o/probe/build.txt" "the failed build's messages kept"
nothing_ran "a failed probe build"

PR_BUILD_RC=1 pr 2 "$dir/o"; expect_rc 1 "the suite's build fails"
expect_out "^prenorm_readings: the suite's build failed" "$dir/out" "the suite's build failure named"
[ ! -e "$dir/readings" ] || { echo "FAIL: a reading ran after the suite's build failed"; status=1; }
exit "$status"
