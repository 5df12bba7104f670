#!/usr/bin/env bash
# prenorm_readings.sh — the pre-norm goal read over several bench readings, with the probe beside
# them, in one call on a GPU host.  The shapes left open lie within 1-2 % of cuBLASLt, and one
# reading moves by more than that (fused/NOTES.md, "The probe against the bench"), so the goal is
# judged by how many readings meet it at each shape.
#   NF_COMMIT=HASH NF_PROBE_VARIANTS=2,5,9,10 fused/tools/prenorm_readings.sh READINGS OUTDIR
#   (from the repository root)
# First the probe (run_probe.sh, one build), once per word of NF_PROBE_INPUT_RUNS, each `spread`
# or `bench` (NF_PROBE_INPUTS; default "spread bench"; empty: no probe), into OUTDIR/probe/KINDn/;
# then scripts/gpu_suite.sh build and READINGS readings of its bench on the pre-norm grid
# (--grid prenorm --op prenorm_fwd,gemm,rmsnorm_fwd, with NF_REF_GEMM_LOG=1 naming each cuBLASLt
# plan's algorithm) into OUTDIR/rN/.  With NF_TIME_LIMIT=S no reading starts once fewer than 40
# of the S seconds since the start are left.  Then, each headed by the date, GPU, commit and
# command: OUTDIR/prenorm_goals.txt (scripts/prenorm_goals.py over the readings) and, for each
# input kind probed, OUTDIR/probe_vs_bench_KIND.txt (scripts/probe_ratios.py auto cublasLt
# --by-shape over its probe runs --bench over the readings).
# Exit: 0 once the readings are summarised (whether the goal is met is in prenorm_goals.txt); 1
# when the probe's build, a probe run (a failed check included), the suite's build or a summary
# failed, or no reading was taken; 2 on usage; 77 without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
[ $# -eq 2 ] || usage
readings="$1" outdir="$2"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, probe_variants, probe_gpu, probe_builds, probe_run, $root
fail() { echo "prenorm_readings: $*" >&2; exit 2; }
[[ "$readings" =~ ^[1-9][0-9]*$ ]] || fail "READINGS '$readings' is not a positive integer"
[ -n "$outdir" ] || fail "OUTDIR is empty"
[ -n "${NF_COMMIT:-}" ] || fail "NF_COMMIT is unset: the readings must name the tree's commit"
kinds="${NF_PROBE_INPUT_RUNS-spread bench}"
for k in $kinds; do
  [[ "$k" == spread || "$k" == bench ]] || fail "NF_PROBE_INPUT_RUNS: '$k' is neither spread nor bench"
done
if [ -n "${kinds// /}" ]; then probe_variants prenorm_readings > /dev/null || exit 2; fi
limit="${NF_TIME_LIMIT:-0}"
[[ "$limit" =~ ^[0-9]+$ ]] || fail "NF_TIME_LIMIT: '$limit' is not a number of seconds"
probe_gpu prenorm_readings || exit 77
out="$(mkdir -p "$outdir" && cd "$outdir" && pwd)"
start=$SECONDS
die() { echo "prenorm_readings: $*" >&2; exit 1; }

declare -A runs_of=() # input kind -> its probe logs, relative to OUTDIR
if [ -n "${kinds// /}" ]; then
  bins="$(mktemp -d)"
  trap 'rm -rf "$bins"' EXIT
  names=(probe) # probe_builds' one build, unpatched: the binary $bins/probe, its log probe/build.txt
  declare -A diff_of=()
  probe_builds prenorm_readings "$out" "$bins" || exit 1
  declare -A n_of=()
  for k in $kinds; do
    n_of[$k]=$((${n_of[$k]:-0} + 1))
    name="$k${n_of[$k]}"
    rc=0
    probe_run "$out/probe/$name" "$bins/probe" NF_PROBE_INPUTS="$k" || rc=$?
    echo "prenorm_readings: probe $name: exit $rc at $((SECONDS - start)) s"
    [ "$rc" = 0 ] || die "a probe run failed (probe/$name/): no readings"
    runs_of[$k]="${runs_of[$k]:-} probe/$name/probe_log.txt"
  done
fi

scripts/gpu_suite.sh build "$out" > "$out/suite_build.txt" 2>&1 ||
  { tail -20 "$out/suite_build.txt" >&2; die "the suite's build failed (suite_build.txt, build.log)"; }
taken=() # the readings' bench.json, relative to OUTDIR
for ((i = 1; i <= readings; i++)); do
  if [ "$limit" -gt 0 ] && [ $((limit - (SECONDS - start))) -lt 40 ]; then
    echo "prenorm_readings: NF_TIME_LIMIT=$limit: readings $i-$readings not started"
    break
  fi
  mkdir -p "$out/r$i"
  rc=0
  NF_REF_GEMM_LOG=1 NF_BENCH_ARGS='--grid prenorm --op prenorm_fwd,gemm,rmsnorm_fwd' \
    scripts/gpu_suite.sh bench "$out/r$i" > "$out/r$i/stdout.txt" 2>&1 || rc=$?
  echo "prenorm_readings: reading $i: exit $rc at $((SECONDS - start)) s"
  if [ -s "$out/r$i/bench.json" ]; then taken+=("r$i/bench.json"); fi
done
[ ${#taken[@]} -gt 0 ] || die "no reading was taken (r1/stdout.txt)"

# prenorm_goals.py: 0 every shape met in every reading, 1 not, 2 an error
report_header "$out/prenorm_goals.txt" "scripts/prenorm_goals.py ${taken[*]} (in OUTDIR)"
rc=0
(cd "$out" && python3 "$root/scripts/prenorm_goals.py" "${taken[@]}") >> "$out/prenorm_goals.txt" 2>&1 || rc=$?
[ "$rc" -le 1 ] || die "prenorm_goals.py failed (prenorm_goals.txt)"
for k in $(printf '%s\n' "${!runs_of[@]}" | sort); do
  f="$out/probe_vs_bench_$k.txt"
  # shellcheck disable=SC2086 # the probe logs' list
  report_header "$f" "scripts/probe_ratios.py auto cublasLt --by-shape${runs_of[$k]} --bench ${taken[*]} (in OUTDIR)"
  # shellcheck disable=SC2086
  (cd "$out" && python3 "$root/scripts/probe_ratios.py" auto cublasLt --by-shape ${runs_of[$k]} --bench "${taken[@]}") \
    >> "$f" 2>&1 || die "probe_ratios.py failed ($(basename "$f"))"
done
tail -n "$((${#taken[@]} + 1))" "$out/prenorm_goals.txt"
