#!/usr/bin/env bash
# run_probe.sh — build and run the pre-norm GEMM probe on a Hopper machine.
#   [SANITIZE=1] fused/tools/run_probe.sh [--quick | --tails | --shape MxKxN]   (from the repository root)
# NF_PROBE_VARIANTS picks the variants timed; NF_PROBE_PATCH a diff to build with (build_probe.sh);
# NF_PROBE_FLUSH=write the probe's L2 flush before 4395c1b (a memset; default: read, as the bench).
# NF_PROBE_GEMM=own times cuBLASLt through the probe's own plan, as before the bench's
# (default: nf_ref_gemm, the plan the bench times as t_gemm).
# NF_PROBE_INPUTS=bench draws A and the weight as the bench does (default: spread, the checks' inputs).
# Builds with build_probe.sh (nvcc directly, no CMake), prints the
# resource report and the HGMMA count of the SASS, then runs the probe.
# NF_PROBE_BIN=FILE runs a probe built before (ab_patches.sh builds each once), keeps it and
# reads no SASS; NF_PROBE_PATCH then only names the diff it was built with in the log's header.
# Logs go to $OUT when it is set (the device tool's output folder), else /tmp.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, probe_sass_counts, clock_log_start / clock_log_stop
out="${OUT:-/tmp}"
if [ -n "${NF_PROBE_BIN:-}" ]; then
  [ -x "$NF_PROBE_BIN" ] || { echo "run_probe: NF_PROBE_BIN: '$NF_PROBE_BIN' is not an executable file" >&2; exit 2; }
  bin="$NF_PROBE_BIN"
else
  bin="$out/prenorm_probe"
  fused/tools/build_probe.sh "$bin" "$out/ptxas.txt"
  grep -A2 "prenorm_gemm_fwd_kernel" "$out/ptxas.txt" | grep -E "registers|stack|spill" || true
  probe_sass_counts "$bin" "$out/sass.txt"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader || true
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  # memcheck over the tail shapes only (slow under the sanitizer); summary lines only
  timeout 150 compute-sanitizer --tool memcheck "$bin" --tails > "$out/sanitizer.txt" 2>&1 || echo "sanitizer rc $?"
  grep -E "ERROR SUMMARY|FAIL|Invalid|error" "$out/sanitizer.txt" | head -20 || true
fi
report_header "$out/probe_log.txt" "${NF_PROBE_PATCH:+NF_PROBE_PATCH=$NF_PROBE_PATCH }${NF_PROBE_VARIANTS:+NF_PROBE_VARIANTS=$NF_PROBE_VARIANTS }${NF_PROBE_FLUSH:+NF_PROBE_FLUSH=$NF_PROBE_FLUSH }${NF_PROBE_GEMM:+NF_PROBE_GEMM=$NF_PROBE_GEMM }${NF_PROBE_INPUTS:+NF_PROBE_INPUTS=$NF_PROBE_INPUTS }fused/tools/run_probe.sh $*"
clock_log_start "$out/probe_clocks.csv"
rc=0
timeout "${PROBE_TIMEOUT:-200}" "$bin" "$@" 2>&1 | tee -a "$out/probe_log.txt" || rc=$?
clock_log_stop
[ -n "${NF_PROBE_BIN:-}" ] || rm -f "$bin"
exit $rc
