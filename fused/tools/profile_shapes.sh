#!/usr/bin/env bash
# profile_shapes.sh — the kernels that run pre-norm shapes, ours and cuBLASLt's, under Nsight Compute.
#   fused/tools/profile_shapes.sh MxKxN[:V,V...] ...        (from the repository root)
# For each shape the probe (--shape) runs its checked launches, then times the variants V
# (nf_prenorm_variant values; none when absent), the launcher's pick ("auto") and cuBLASLt's
# GEMM in turn.  Nsight Compute records every GEMM launch (our kernel, cuBLASLt's, and the
# 8192^3 GEMM of the probe's compute ceiling): name, grid, duration and the SMs' active cycles
# (min / avg / max: how evenly a persistent grid ends), clocks and caches as ncu sets them by
# default for replays (clocks unlocked here, L2 flushed before each).  scripts/ncu_summary.py
# prints one line per kernel run into summary.txt.  NF_PROFILE_METRICS (a comma list, as for
# gpu_suite.sh's profile step; any this ncu does not know is dropped and named) collects further
# metrics and adds a column each, e.g.
# smsp__issue_active.avg.pct_of_peak_sustained_active and the issue-stall reasons
# smsp__warp_issue_stalled_<reason>_per_warp_active.pct, ours beside cuBLASLt's.
# NF_PROFILE_CLOCK=base has ncu lock the clocks at base (--clock-control base) instead of
# leaving them to the GPU (none, the default): with gpc__cycles_elapsed.max among the metrics,
# cycles then compare without the clock each kernel's power draw allows.
# NF_PROBE_PATCH (build_probe.sh) profiles a build with that diff applied, named in the headers.
# Files go to $OUT when it is set (the device tool's output folder), else /tmp/profile_shapes.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, ncu_path, NF_GEMM_KERNELS, PATH
if [ $# -lt 1 ]; then sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
for s in "$@"; do
  [[ "$s" =~ ^[0-9]+x[0-9]+x[0-9]+(:[0-9]+(,[0-9]+)*)?$ ]] || { echo "profile_shapes: bad shape '$s'" >&2; exit 2; }
done
clock="${NF_PROFILE_CLOCK:-none}"
[[ "$clock" == none || "$clock" == base ]] || { echo "profile_shapes: NF_PROFILE_CLOCK is '$clock', must be none or base" >&2; exit 2; }
out="${OUT:-/tmp/profile_shapes}"
mkdir -p "$out"
ncu_bin="$(ncu_path)"
[ -n "$ncu_bin" ] || { echo "profile_shapes: no ncu on this host" >&2; exit 1; }
bin="$(mktemp -d)/prenorm_probe"
fused/tools/build_probe.sh "$bin" "$out/ptxas.txt"
extra="$(ncu_known_metrics "$ncu_bin" "${NF_PROFILE_METRICS:-}")" # those this ncu knows, the rest named
metrics=gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max
metrics+=${extra:+,$extra}
built_with="${NF_PROBE_PATCH:+NF_PROBE_PATCH=$NF_PROBE_PATCH }" # the probe's build, named in every header
ncu_args=(--clock-control "$clock" --cache-control all -k "regex:$NF_GEMM_KERNELS" --metrics "$metrics" --csv --page raw)
report_header "$out/summary.txt" "${built_with}fused/tools/profile_shapes.sh $*: per shape, NF_PROBE_VARIANTS=V ncu ${ncu_args[*]} prenorm_probe --shape S, then scripts/ncu_summary.py --gap <variants + 1> --extra '$extra'"
for s in "$@"; do
  shape="${s%%:*}" variants=0
  [[ "$s" == *:* ]] && variants="${s#*:}"
  csv="$out/ncu_$shape.csv"
  report_header "$csv" "${built_with}NF_PROBE_VARIANTS=$variants ncu ${ncu_args[*]} prenorm_probe --shape $shape"
  NF_PROBE_VARIANTS="$variants" "$ncu_bin" "${ncu_args[@]}" "$bin" --shape "$shape" >> "$csv" 2>&1 ||
    echo "profile_shapes: ncu failed on $shape (see $csv)"
  # in turn: each variant, auto, cuBLASLt; so a kernel's launches are that many apart
  n=$(tr ',' '\n' <<< "$variants" | grep -cv '^0$' || true)
  { echo; echo "## $shape (variants ${variants})"; python3 scripts/ncu_summary.py "$csv" --gap $((n + 1)) --extra "$extra"; } >> "$out/summary.txt"
done
rm -rf "$(dirname "$bin")"
cat "$out/summary.txt"
