#!/usr/bin/env bash
# gpu_suite.sh STEPS OUTDIR — build and run the GPU suite on a GPU host,
# writing logs and data into OUTDIR (each file headed by the date, the GPU,
# the commit and the command that made it).
#
#   STEPS: comma list of  build, tests, sass, bench, quickbench, torch, gate, fuzz,
#          report, profile  (default build,tests,bench,gate)
#
# The environment (offline dependencies, PATH) and the log header come from
# scripts/gpu_env.sh; NF_COMMIT names the tree when its git metadata cannot.
set -euo pipefail
steps="${1:-build,tests,bench,gate}"
known="build tests sass bench quickbench torch gate fuzz report profile"
IFS=',' read -r -a asked <<< "$steps"
for s in "${asked[@]}"; do # a typo would otherwise run nothing and exit 0
  [[ " $known " == *" $s "* ]] || { echo "gpu_suite: unknown step '$s' (steps: ${known// /, })" >&2; exit 2; }
done
# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
out="$(mkdir -p "${2:-$root/reports/gpu-run}" && cd "${2:-$root/reports/gpu-run}" && pwd)"

if has build; then
  report_header "$out/build.log" "cmake -S . -B build ${cmake_args[*]} && cmake --build build -j"
  { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}" &&
    cmake --build "$build" -j "$(nproc)"; } >> "$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; echo "gpu_suite: build failed"; exit 1; }
  echo "gpu_suite: build ok"
fi
if has tests; then
  # NF_CTEST_ARGS narrows the run, e.g. "-LE slow"
  report_header "$out/tests.log" "ctest --output-on-failure -j 8 --timeout 900 ${NF_CTEST_ARGS:-}"
  # shellcheck disable=SC2086
  (cd "$build" && ctest --output-on-failure -j 8 --timeout 900 ${NF_CTEST_ARGS:-}) >> "$out/tests.log" 2>&1 || true
  grep -E "tests passed|Failed|Skipped|\*\*\*" "$out/tests.log" | tail -30
fi
if has sass; then
  # what the kernels compiled to: tensor-core and 16-byte memory instructions per kernel, and
  # its length in SASS instructions (static; `NF_PROFILE_METRICS=smsp__inst_executed.sum`
  # counts what a launch issues)
  report_header "$out/sass.txt" "cuobjdump --dump-sass build/libnormfuse.so"
  cuobjdump --dump-sass "$build/libnormfuse.so" > "$out/sass.full" 2>&1 || true
  awk '/Function :/ {f=$3} /HGMMA/ {h[f]++} /LDG.E.128|LDG.E.ENL2.128|LDG.E.128.CONSTANT/ {l[f]++}
       /STG.E.128/ {st[f]++} /LDL|STL/ {sp[f]++} /Function :/ {seen[f]=1}
       /^[ \t]*\/\*[0-9a-f]+\*\/[ \t]/ {n[f]++}
       END {for (f in seen) printf "%-100.100s HGMMA %d LDG.128 %d STG.128 %d LDL/STL %d SASS %d\n", f, h[f], l[f], st[f], sp[f], n[f]}' \
    "$out/sass.full" | sort >> "$out/sass.txt"
  # NF_SASS_FUNCS: a regex over mangled kernel names; those kernels' whole SASS go to sass_funcs.txt
  if [ -n "${NF_SASS_FUNCS:-}" ]; then
    report_header "$out/sass_funcs.txt" "cuobjdump --dump-sass build/libnormfuse.so, the functions matching '$NF_SASS_FUNCS'"
    awk -v re="$NF_SASS_FUNCS" '/Function :/ {keep = ($3 ~ re)} keep' \
      "$out/sass.full" >> "$out/sass_funcs.txt"
    grep -c "Function :" "$out/sass_funcs.txt" || echo "gpu_suite: no function matches NF_SASS_FUNCS"
    # against a committed listing (NF_SASS_BASELINE, default the committed suite's): which of
    # these kernels changed since, and how their loops did (scripts/sass_diff.py --loops)
    baseline="${NF_SASS_BASELINE:-$root/reports/h200/sass_funcs.txt.xz}"
    if [ -r "$baseline" ]; then
      report_header "$out/sass_vs_baseline.txt" "scripts/sass_diff.py --loops ${baseline#"$root"/} sass_funcs.txt"
      rc=0
      (cd "$root" && python3 scripts/sass_diff.py --loops "${baseline#"$root"/}" "$out/sass_funcs.txt") \
        >> "$out/sass_vs_baseline.txt" 2>&1 || rc=$?
      if [ "$rc" = 2 ]; then echo "gpu_suite: the SASS comparison failed, see sass_vs_baseline.txt"
      else tail -1 "$out/sass_vs_baseline.txt"; fi
    fi
    # a few MB of text, a few hundred KB compressed
    xz -9 -f "$out/sass_funcs.txt" 2> /dev/null || echo "gpu_suite: no xz; sass_funcs.txt left as text"
  fi
  rm -f "$out/sass.full"
  grep -c . "$out/sass.txt"
fi
if has quickbench; then
  report_header "$out/bench-quick.log" "normfuse bench --quick --reps 10 --json bench-quick.json"
  "$build/cli/normfuse" bench --quick --reps 10 --json "$out/bench-quick.json" | tee -a "$out/bench-quick.log" | tail -30
fi
# goal_table NAME: scripts/NAME.py over the bench's JSON into NAME.txt, headed
# like every log, its last line (the count) echoed; nothing where the run held
# none of the cases it reads (the script's exit 2).
goal_table() {
  local rc=0 table
  table="$(python3 "$root/scripts/$1.py" "$out/bench.json" 2>&1)" || rc=$?
  if [ "$rc" -le 1 ]; then
    report_header "$out/$1.txt" "scripts/$1.py bench.json"
    printf '%s\n' "$table" >> "$out/$1.txt"
    tail -1 "$out/$1.txt"
  fi
}
if has bench; then
  # NF_BENCH_ARGS narrows the bench (normfuse bench's options), e.g. "--grid norm --op layernorm_bwd"
  report_header "$out/bench.log" "normfuse bench ${NF_BENCH_ARGS:-} --json bench.json --markdown bench.md"
  clock_log_start "$out/bench_clocks.csv"
  # shellcheck disable=SC2086  # the bench's options are a list
  "$build/cli/normfuse" bench ${NF_BENCH_ARGS:-} --json "$out/bench.json" --markdown "$out/bench.md" >> "$out/bench.log" 2>&1 ||
    echo "gpu_suite: bench failed"
  clock_log_stop
  grep -E "=>|ceilings|ERR" "$out/bench.log" | tail -40
  # the norms (issue 3) and the fused pre-norm GEMM (issue 5) against their
  # goals, where the bench ran them
  goal_table norm_goals
  goal_table prenorm_goals
fi
if has profile; then
  # Nsight Compute over a bench run (NF_PROFILE_ARGS: the bench's options;
  # NF_PROFILE_KERNELS: a kernel-name regex, default every kernel): per launch
  # the duration, the SMs' active cycles (min/avg/max) and the DRAM bytes, with
  # clocks and caches left as the bench has them, so the durations are the
  # bench's kernels'; profile.txt summarises each case (scripts/ncu_summary.py).
  # NF_PROFILE_METRICS: further metrics (comma list), collected and summarised too
  # (those this ncu does not know are dropped, each named: ncu_known_metrics).
  bench_args="${NF_PROFILE_ARGS:---grid norm --op rmsnorm_bwd,layernorm_bwd --impl ref,vendor --reps 2}"
  ncu_bin="$(ncu_path)" # the same command for the metric query and the run
  if [ -z "$ncu_bin" ]; then
    echo "gpu_suite: profile: no ncu on this host"
  else
    extra="$(ncu_known_metrics "$ncu_bin" "${NF_PROFILE_METRICS:-}")"
    metrics=gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max
    metrics+=,dram__bytes_read.sum,dram__bytes_write.sum${extra:+,$extra}
    ncu_args=(--clock-control none --cache-control none --metrics "$metrics" --csv --page raw)
    [ -n "${NF_PROFILE_KERNELS:-}" ] && ncu_args+=(-k "regex:$NF_PROFILE_KERNELS")
    report_header "$out/profile.log" "ncu ${ncu_args[*]} --log-file profile.csv normfuse bench $bench_args"
    # shellcheck disable=SC2086  # the bench's options are a list
    "$ncu_bin" "${ncu_args[@]}" --log-file "$out/profile.csv" "$build/cli/normfuse" bench $bench_args \
      >> "$out/profile.log" 2>&1 || echo "gpu_suite: profile failed (see profile.log)"
    report_header "$out/profile.txt" "scripts/ncu_summary.py profile.csv --extra '$extra'"
    python3 "$root/scripts/ncu_summary.py" "$out/profile.csv" --extra "$extra" >> "$out/profile.txt" ||
      echo "gpu_suite: no profile to summarise"
    head -30 "$out/profile.txt"
  fi
fi
if has torch; then
  # joined with this run's bench when there is one (the fused kernel's times by shape)
  against=()
  [ -f "$out/bench.json" ] && against=(--against bench.json)
  report_header "$out/torch.log" "python3 scripts/torch_baseline.py --json torch.json ${against[*]} ${NF_TORCH_ARGS:-}"
  # shellcheck disable=SC2086
  (cd "$out" && python3 "$root/scripts/torch_baseline.py" --json torch.json "${against[@]}" ${NF_TORCH_ARGS:-}) >> "$out/torch.log" 2>&1 ||
    echo "gpu_suite: torch baseline failed (see torch.log)"
  tail -5 "$out/torch.log"
fi
if has gate; then
  report_header "$out/gate.log" "normfuse gate --out gate --seconds ${NF_GATE_SECONDS:-120}"
  "$build/cli/normfuse" gate --out "$out/gate" --seconds "${NF_GATE_SECONDS:-120}" >> "$out/gate.log" 2>&1 &&
    echo "gpu_suite: gate passed" || echo "gpu_suite: gate FAILED"
  tail -12 "$out/gate.log"
fi
if has fuzz; then
  # A fuzz.jsonl already in OUTDIR is a campaign to continue: resume it under
  # the seed it was written with.  A new campaign takes NF_SEED, else a seed
  # of its own (the UTC date and hour), so runs do not repeat one another's
  # cases; the seed is in the log's command line either way.
  resume=()
  if [ -s "$out/fuzz.jsonl" ]; then
    resume=(--resume)
    seed="$(sed -n '1s/.*"seed":\([0-9]*\).*/\1/p' "$out/fuzz.jsonl")"
  else
    seed="${NF_SEED:-$(date -u +%Y%m%d%H)}"
  fi
  [[ "$seed" =~ ^[0-9]+$ ]] || { echo "gpu_suite: no campaign seed (fuzz.jsonl's first line, NF_SEED: '$seed')"; exit 2; }
  # NF_FUZZ_ARGS narrows the campaign, e.g. "--op prenorm_fwd --impl prenorm_fwd/fused"
  read -r -a fuzz_args <<< "${NF_FUZZ_ARGS:-}"
  report_header "$out/fuzz.log" \
    "normfuse fuzz --seed $seed --seconds ${NF_FUZZ_SECONDS:-120} --log fuzz.jsonl ${resume[*]} ${fuzz_args[*]}"
  "$build/cli/normfuse" fuzz --seed "$seed" --seconds "${NF_FUZZ_SECONDS:-120}" --log "$out/fuzz.jsonl" "${resume[@]}" \
    "${fuzz_args[@]}" \
    >> "$out/fuzz.log" 2>&1 || echo "gpu_suite: fuzz found failures or could not run (see fuzz.log)"
  tail -5 "$out/fuzz.log"
fi
if has report; then
  report_header "$out/report.log" "normfuse report --out accuracy"
  "$build/cli/normfuse" report --out "$out/accuracy" >> "$out/report.log" 2>&1 || echo "gpu_suite: report failed"
  tail -5 "$out/report.log"
fi
