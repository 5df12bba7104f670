# shellcheck shell=bash
# gpu_env.sh — sourced by the GPU-host scripts (gpu_suite.sh, ab_bench.sh, ab_builds.sh):
# the environment of a GPU host run and the header every log starts with.
#
# Sets: root, build, cmake_args (the offline prefix when .gpu-deps is used),
# PATH and LD_LIBRARY_PATH; defines report_header FILE COMMAND,
# ab_checks LOG LABEL CLI [VAR=VALUE], ab_rounds, ab_round_order,
# ab_compare DIR ROUNDS ..., NF_GEMM_KERNELS, ncu_path, ncu_known_metrics, probe_sass_counts,
# the probe tools' probe_variants, probe_gpu, patch_arg, probe_builds and probe_run,
# clock_log_start FILE / clock_log_stop, and has STEP (STEP in the caller's comma list $steps).
# On a host without network the dependencies come from .gpu-deps (see
# scripts/prepare_offline_gpu_host.sh); where the system has them, they are used.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC2034  # used by the scripts that source this one
build="$root/build"
export PATH="$PATH:/usr/local/cuda/bin"
# NF_CMAKE_ARGS: further CMake arguments for the builds, as scripts/build.sh
# takes them (e.g. -DNF_TRACE_PHASES=ON); the build log's header lists them.
read -r -a cmake_args <<< "${NF_CMAKE_ARGS:-}"
if [ -d "$root/.gpu-deps/debs" ] && ! [ -f /usr/include/mpfr.h ]; then
  "$root/scripts/prepare_offline_gpu_host.sh" unpack >/dev/null
  cmake_args+=("-DCMAKE_PREFIX_PATH=$root/.gpu-deps/prefix/usr")
  export LD_LIBRARY_PATH="$root/.gpu-deps/prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
# (|| true: the scripts that source this one set -e and pipefail, under which an absent or
# failing nvidia-smi would end them here, before their own usage message)
report_gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
[ -n "$report_gpu" ] || report_gpu="none visible (nvidia-smi answered nothing)"
# The tree's commit.  A tree copied to the GPU host may carry stale git
# metadata (or none): NF_COMMIT then names it exactly, e.g. "26b3454" or
# "26b3454 + ab.diff", and git is not asked.  Otherwise git answers, with
# "+uncommitted" when the working tree differs from HEAD.
if [ -n "${NF_COMMIT:-}" ]; then
  report_commit="$NF_COMMIT"
else
  report_commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$root" status --porcelain 2>/dev/null | grep -q . && report_commit="$report_commit+uncommitted"
fi
report_header() { # file command
  printf '# %s\n# date: %s\n# gpu: %s\n# commit: %s\n# command: %s\n\n' "$(basename "$1")" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$report_gpu" "$report_commit" "$2" > "$1"
}

# The names of the GEMM kernels the profiling scripts pick out (ncu -k regex:...): ours
# (prenorm_gemm_fwd_kernel) and cuBLASLt's (nvjet, xmma, cutlass, gemm* kernels).
NF_GEMM_KERNELS='gemm|nvjet|xmma|cutlass'

# ncu_path: Nsight Compute's command (PATH, then the toolkit's and the
# standalone installs' usual places), or nothing.
ncu_path() {
  local c
  for c in "$(command -v ncu || true)" /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
}

# probe_sass_counts BIN SASS: BIN's SASS into the file SASS (cuobjdump --dump-sass) and one
# line of its counts on stdout: HGMMA, LDL/STL (spills) and UTMALDG; nothing without cuobjdump.
probe_sass_counts() {
  command -v cuobjdump > /dev/null || return 0
  cuobjdump --dump-sass "$1" > "$2"
  echo "SASS: $(grep -c HGMMA "$2") HGMMA, $(grep -cE 'LDL|STL' "$2") LDL/STL, $(grep -c UTMALDG "$2") UTMALDG"
}

# ncu_known_metrics NCU LIST: the metrics of the comma list LIST whose base
# name (before the first '.') NCU's `--query-metrics` lists for this host's
# GPU, in LIST's order, comma-separated on stdout; each one dropped is named on
# stderr.  A metric ncu does not know makes it refuse the whole run, and the
# names differ between chips and ncu versions (sm__pipe_tensor_op_gmma_* is not
# gh100's under 2025.3), so the profiling scripts pass NF_PROFILE_METRICS
# through this.  When the query fails, LIST unchanged (ncu then names what it
# refuses).
ncu_known_metrics() {
  local ncu="$1" list="$2" known m keep=""
  [ -n "$list" ] || return 0
  if ! known="$("$ncu" --query-metrics 2>/dev/null)" || [ -z "$known" ]; then
    echo "ncu_known_metrics: $ncu --query-metrics failed; the metrics passed on unchecked" >&2
    echo "$list"; return 0
  fi
  for m in ${list//,/ }; do
    if grep -qE "^[[:space:]]*${m%%.*}([[:space:]]|\$)" <<< "$known"; then
      keep+="${keep:+,}$m"
    else
      echo "ncu_known_metrics: $m dropped: not a metric $ncu knows here" >&2
    fi
  done
  echo "$keep"
}

# ab_checks LOG LABEL CLI [VAR=VALUE]: the `normfuse check` cases of
# NF_AB_CHECKS (';'-separated argument lists) run by CLI, under VAR=VALUE when
# given, each with its own seed (the same per case whatever the build or
# value), appended to LOG with a verdict line each, also printed.  Each case
# has NF_AB_CHECK_TIMEOUT seconds (default 300; then SIGTERM, SIGKILL 10 s
# later): a variant whose kernel never ends (a barrier nobody arrives at) is
# reported as such instead of holding the device call until its limit with
# nothing written.  Returns 0, 1 when a case failed, 3 when one timed out
# (the callers then time nothing: the variant would hang there too), 77
# without a GPU, 2 when NF_AB_CHECK_TIMEOUT is not a positive integer.  The
# A/B scripts run it before anything is timed, so that a variant that is fast
# because it is wrong shows.
ab_checks() {
  local log="$1" label="$2" cli="$3" assign="${4:-}" status=0 i rc seed
  local limit="${NF_AB_CHECK_TIMEOUT:-300}"
  local -a cases
  [[ "$limit" =~ ^[1-9][0-9]*$ ]] ||
    { echo "ab_checks: NF_AB_CHECK_TIMEOUT: '$limit' is not a positive number of seconds" >&2; return 2; }
  IFS=';' read -r -a cases <<< "${NF_AB_CHECKS:-}"
  for i in "${!cases[@]}"; do
    seed=$((20261129 + 7919 * i))
    echo "== $label normfuse check ${cases[$i]} --seed $seed" >> "$log"
    rc=0
    # shellcheck disable=SC2086  # a case is a list of arguments
    timeout -k 10 "$limit" env ${assign:+"$assign"} "$cli" check ${cases[$i]} --seed "$seed" >> "$log" 2>&1 || rc=$?
    [ "$rc" = 77 ] && return 77
    if [ "$rc" = 0 ]; then
      echo "$label check ${cases[$i]} --seed $seed: pass" | tee -a "$log"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "$label check ${cases[$i]} --seed $seed: FAIL (no answer in ${limit} s, killed: a hang?)" | tee -a "$log"
      return 3
    else
      echo "$label check ${cases[$i]} --seed $seed: FAIL (exit $rc)" | tee -a "$log"
      status=1
    fi
  done
  return $status
}

# probe_variants TOOL: NF_PROBE_VARIANTS on stdout, the variants a tool that builds the probe
# times or traces (nf_prenorm_variant values, e.g. 2,5); unset or not such a list: a message
# naming TOOL, status 2.
probe_variants() {
  [[ "${NF_PROBE_VARIANTS:-}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || {
    echo "$1: NF_PROBE_VARIANTS: '${NF_PROBE_VARIANTS:-}' is not a list of variant numbers such as 2,5" >&2
    return 2
  }
  echo "$NF_PROBE_VARIANTS"
}

# probe_gpu TOOL: status 0 where nvidia-smi lists a GPU; else a message naming TOOL, status 77.
probe_gpu() {
  [ -n "$(nvidia-smi -L 2> /dev/null || true)" ] || { echo "$1: no GPU visible, nothing built or run" >&2; return 77; }
}

# patch_arg TOOL ARG: one NAME=FILE.diff argument of the tools that build the probe with
# diffs (ab_patches.sh, trace_shapes.sh), checked (NAME of lower-case letters, digits and _,
# not 'base', not given before; FILE readable) and added to the caller's arrays `names`
# (indexed) and `diff_of` (associative: NAME -> FILE's absolute path); else a message naming
# TOOL, status 2.
patch_arg() {
  local tool="$1" arg="$2" name file
  name="${arg%%=*}" file="${arg#*=}"
  [[ "$arg" == *=* && "$name" =~ ^[a-z][a-z0-9_]*$ && "$name" != base ]] ||
    { echo "$tool: '$arg' is not NAME=FILE.diff (NAME lower-case letters, digits, _; not 'base')" >&2; return 2; }
  [ -z "${diff_of[$name]:-}" ] || { echo "$tool: the name '$name' is given twice" >&2; return 2; }
  [ -r "$file" ] || { echo "$tool: $name: no readable diff '$file'" >&2; return 2; }
  diff_of[$name]="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
  names+=("$name")
}

# probe_run DIR BIN [VAR=VALUE...]: run_probe.sh on the built probe BIN, its files into DIR
# (made if missing), its stdout and stderr into DIR/stdout.txt, with the environment given;
# its exit status.
probe_run() {
  local dir="$1" bin="$2"
  shift 2
  mkdir -p "$dir"
  env OUT="$dir" NF_PROBE_BIN="$bin" "$@" fused/tools/run_probe.sh > "$dir/stdout.txt" 2>&1
}

# probe_builds TOOL OUT BINS [NVCC ARGS...]: the probe built once per name of the caller's
# `names` (with the diff `diff_of[NAME]` laid over fused/, none for "base"), all at once
# (build_probe.sh BINS/NAME BINS/NAME.ptxas ARGS), each diff copied to OUT/NAME/, the ptxas
# report and the SASS counts in OUT/NAME/build.txt.  A build that fails: its messages there
# and on stderr, a line naming it, status 1, once the others are done.
probe_builds() {
  local tool="$1" out="$2" bins="$3" name patch
  shift 3
  local -A pid=()
  for name in "${names[@]}"; do
    mkdir -p "$out/$name"
    patch="${diff_of[$name]:-}"
    [ -z "$patch" ] || cp "$patch" "$out/$name/"
    report_header "$out/$name/build.txt" "${patch:+NF_PROBE_PATCH=$patch }fused/tools/build_probe.sh BIN LOG${*:+ $*}"
    NF_PROBE_PATCH="$patch" fused/tools/build_probe.sh "$bins/$name" "$bins/$name.ptxas" "$@" > "$bins/$name.out" 2>&1 &
    pid[$name]=$!
  done
  for name in "${names[@]}"; do
    if ! wait "${pid[$name]}"; then
      cat "$bins/$name.out" "$bins/$name.ptxas" >> "$out/$name/build.txt" 2> /dev/null || true
      cat "$bins/$name.out" >&2
      echo "$tool: the $name build failed ($name/build.txt)" >&2
      wait # the other builds, before the caller's folder goes
      return 1
    fi
    cat "$bins/$name.out" "$bins/$name.ptxas" >> "$out/$name/build.txt"
    probe_sass_counts "$bins/$name" "$bins/$name.sass" | tee -a "$out/$name/build.txt"
  done
}

# ab_rounds NAME DEFAULT: the A/B scripts' round count, NF_AB_ROUNDS (else
# DEFAULT), on stdout; not a positive integer: a message naming NAME, status 2.
ab_rounds() {
  local r="${NF_AB_ROUNDS:-$2}"
  [[ "$r" =~ ^[1-9][0-9]*$ ]] || { echo "$1: NF_AB_ROUNDS: '$r' is not a positive integer" >&2; return 2; }
  echo "$r"
}

# ab_round_order ROUND V...: the versions of an A/B in the order given in odd
# rounds and reversed in even ones, one per line (a process that runs first in
# a pair can read a few % apart from the second: ref/NOTES.md item 27).
ab_round_order() {
  local round="$1" i
  shift
  if ((round % 2)); then printf '%s\n' "$@"; else for ((i = $#; i >= 1; i--)); do echo "${!i}"; done; fi
}

# ab_compare DIR ROUNDS [bench_compare.py options] -- RUN.json...: DIR/compare.txt,
# headed like every log: scripts/bench_compare.py over the runs (names relative
# to DIR), then, when ROUNDS > 1, the same with --rounds; also printed.
ab_compare() {
  local dir="$1" rounds="$2"
  shift 2
  local -a opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  report_header "$dir/compare.txt" "scripts/bench_compare.py ${opts[*]} $*"
  (cd "$dir" && python3 "$root/scripts/bench_compare.py" "${opts[@]}" "$@") | tee -a "$dir/compare.txt"
  if ((rounds > 1)); then
    printf '\n# scripts/bench_compare.py --rounds %s\n' "${opts[*]} $*" >> "$dir/compare.txt"
    (cd "$dir" && python3 "$root/scripts/bench_compare.py" --rounds "${opts[@]}" "$@") | tee -a "$dir/compare.txt"
  fi
}

# clock_log_start FILE: sample the GPU's SM and memory clocks, power,
# temperature and clock event reasons every 100 ms into FILE (CSV, headed like
# every log) until clock_log_stop, which appends scripts/clock_summary.py's
# summary to FILE.summary and prints it.  The H200 lowers its SM clock under a
# sustained GEMM load, so the timings of a run are read with its clocks.
clock_log_start() {
  clock_log_file="$1"
  local reasons=clocks_event_reasons.active # the older drivers' name: clocks_throttle_reasons.active
  nvidia-smi --query-gpu="$reasons" --format=csv,noheader > /dev/null 2>&1 || reasons=clocks_throttle_reasons.active
  local query="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons"
  report_header "$1" "nvidia-smi --query-gpu=$query --format=csv,nounits -lms 100"
  nvidia-smi --query-gpu="$query" --format=csv,nounits -lms 100 >> "$1" 2>&1 &
  clock_log_pid=$!
}
clock_log_stop() {
  [ -n "${clock_log_pid:-}" ] || return 0
  kill "$clock_log_pid" 2> /dev/null || true
  wait "$clock_log_pid" 2> /dev/null || true
  clock_log_pid=
  report_header "$clock_log_file.summary" "scripts/clock_summary.py $(basename "$clock_log_file")"
  python3 "$root/scripts/clock_summary.py" "$clock_log_file" | tee -a "$clock_log_file.summary"
}

# has STEP: status 0 where STEP is in the caller's comma list $steps (gpu_suite.sh's STEPS).
has() { [[ ",$steps," == *",$1,"* ]]; }
