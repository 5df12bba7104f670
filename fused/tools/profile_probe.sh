#!/usr/bin/env bash
# profile_probe.sh — Nsight Compute over the pre-norm GEMM probe, one shape, on a Hopper host.
#   NF_PROBE_VARIANTS=5,6 fused/tools/profile_probe.sh MxKxN        (from the repository root)
# Builds the probe with build_probe.sh, with -lineinfo, and profiles one timed launch of each
# variant in NF_PROBE_VARIANTS (required; with --shape the probe makes two checked launches per
# variant first, which are skipped): sections SpeedOfLight, ComputeWorkloadAnalysis,
# MemoryWorkloadAnalysis, SchedulerStats, WarpStateStats, LaunchStats and SourceCounters, into
# one report printed as ncu_details.txt (--page details) and src.csv.gz (--page source
# --print-source sass --csv), then scripts/ncu_source_summary.py and scripts/ncu_loops.py over
# the latter.
# NF_PROFILE_CUBLASLT=1 profiles cuBLASLt's kernel for the shape too (the bench's plan,
# nf_ref_gemm), beside ours in the same files: the probe then skips its ceilings
# (NF_PROBE_CEILINGS=0), so the GEMM kernels (NF_GEMM_KERNELS, gpu_env.sh) are, in order, the
# checked launches and then one round timed in turn: each variant, auto, cuBLASLt.
# Files go to $OUT when it is set (the device tool's output folder), else /tmp/profile_probe.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, ncu_path, NF_GEMM_KERNELS, PATH
if [ $# -ne 1 ] || ! [[ "$1" =~ ^[0-9]+x[0-9]+x[0-9]+$ ]] || [ -z "${NF_PROBE_VARIANTS:-}" ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
lt="${NF_PROFILE_CUBLASLT:-0}"
[[ "$lt" == 0 || "$lt" == 1 ]] || { echo "profile_probe: NF_PROFILE_CUBLASLT is '$lt', must be 0 or 1" >&2; exit 2; }
shape="$1"
IFS=',' read -r -a variants <<< "$NF_PROBE_VARIANTS"
n=${#variants[@]}
out="${OUT:-/tmp/profile_probe}"
mkdir -p "$out"
ncu_bin="$(ncu_path)"
[ -n "$ncu_bin" ] || { echo "profile_probe: no ncu on this host" >&2; exit 1; }
bin="$(mktemp -d)/prenorm_probe"
fused/tools/build_probe.sh "$bin" "$out/ptxas.txt" -lineinfo
rep="$(dirname "$bin")/prof"
# ours alone: skip the checked launches, then one of each variant; with cuBLASLt also auto's and its
kernels=prenorm_gemm_fwd_kernel count=$n env=(NF_PROBE_VARIANTS="$NF_PROBE_VARIANTS")
if [ "$lt" = 1 ]; then kernels=$NF_GEMM_KERNELS count=$((n + 2)) env+=(NF_PROBE_CEILINGS=0); fi
args=(-k "regex:$kernels" -s $((2 * n)) -c "$count" --section SpeedOfLight --section ComputeWorkloadAnalysis
  --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section LaunchStats
  --section SourceCounters)
cmd="${env[*]} ncu ${args[*]} prenorm_probe --shape $shape"
report_header "$out/ncu_run.txt" "$cmd"
env "${env[@]}" "$ncu_bin" "${args[@]}" -o "$rep" "$bin" --shape "$shape" >> "$out/ncu_run.txt" 2>&1
report_header "$out/ncu_details.txt" "$cmd, then ncu -i --page details"
"$ncu_bin" -i "$rep.ncu-rep" --page details >> "$out/ncu_details.txt" 2>&1
# the CSV stays as ncu writes it (no header lines), for the tools that read it
"$ncu_bin" -i "$rep.ncu-rep" --page source --print-source sass --csv > "$out/src.csv" 2>&1
gzip -f "$out/src.csv"
rm -rf "$(dirname "$bin")"
python3 scripts/ncu_source_summary.py "$out/src.csv.gz"
python3 scripts/ncu_loops.py "$out/src.csv.gz"
