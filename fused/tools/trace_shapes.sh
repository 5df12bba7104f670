#!/usr/bin/env bash
# trace_shapes.sh — the pre-norm GEMM's per-tile trace (fused/prenorm_trace.cuh) at some shapes,
# of the tree's build and of the tree with each of some diffs laid over fused/.
#   NF_PROBE_VARIANTS=2,5,8 fused/tools/trace_shapes.sh [NAME=FILE.diff ...] MxKxN [MxKxN ...]
# (from the repository root).  The trace builds (build_probe.sh BIN LOG -DNF_TRACE_PHASES, with
# NF_PROBE_PATCH for a diff; the ptxas report and SASS counts in BUILD/build.txt) are compiled at
# once; then per shape, per build in the order given ("base", the tree, first), the probe runs
# that shape alone (run_probe.sh --shape: its checks, then the variants timed), each variant's
# last launch of the shape traced (NF_TRACE_PRENORM, NF_TRACE_M/K/N), and
# scripts/prenorm_trace.py summarises the traces into BUILD/SHAPE/trace_summary.txt (the
# traces gzipped beside it; the probe's times there include each traced launch's read-back).
# NF_PROBE_VARIANTS is required: the variants traced.  Files go to $OUT when it is set (the
# device tool's output folder), else /tmp/trace_shapes.
# Exit: 0; 1 when a build, a probe run or a summary failed; 2 on usage; 77 without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, probe_variants, probe_gpu, patch_arg, probe_builds
variants="$(probe_variants trace_shapes)" || exit 2
declare -A diff_of=()
names=(base)
shapes=()
for arg in "$@"; do
  if [[ "$arg" =~ ^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*$ ]]; then
    shapes+=("$arg")
  elif [[ "$arg" == *=* ]]; then
    patch_arg trace_shapes "$arg" || exit 2
  else
    echo "trace_shapes: '$arg' is neither a shape MxKxN nor NAME=FILE.diff" >&2; exit 2
  fi
done
[ ${#shapes[@]} -ge 1 ] || usage
probe_gpu trace_shapes || exit 77
out="$(mkdir -p "${OUT:-/tmp/trace_shapes}" && cd "${OUT:-/tmp/trace_shapes}" && pwd)"
bins="$(mktemp -d)"
trap 'rm -rf "$bins"' EXIT

probe_builds trace_shapes "$out" "$bins" -DNF_TRACE_PHASES || exit 1

status=0
for shape in "${shapes[@]}"; do
  IFS=x read -r m k n <<< "$shape"
  for name in "${names[@]}"; do
    dir="$out/$name/$shape"
    mkdir -p "$dir"
    patch="${diff_of[$name]:-}"
    rc=0
    OUT="$dir" NF_PROBE_BIN="$bins/$name" NF_PROBE_PATCH="$patch" NF_TRACE_PRENORM="$dir/trace" \
      NF_TRACE_M="$m" NF_TRACE_K="$k" NF_TRACE_N="$n" fused/tools/run_probe.sh --shape "$shape" \
      > "$dir/stdout.txt" 2>&1 || rc=$?
    echo "trace_shapes: $shape, $name: probe exit $rc"
    [ "$rc" = 0 ] || status=1
    traces=("$dir"/trace.*.csv)
    if [ ! -e "${traces[0]}" ]; then
      echo "trace_shapes: $shape, $name: the probe wrote no trace" >&2; status=1; continue
    fi
    report_header "$dir/trace_summary.txt" "scripts/prenorm_trace.py trace.*.csv (after ${patch:+NF_PROBE_PATCH=$patch }NF_PROBE_VARIANTS=$variants NF_TRACE_PRENORM=trace NF_TRACE_M=$m NF_TRACE_K=$k NF_TRACE_N=$n fused/tools/run_probe.sh --shape $shape, the trace build; fused/tools/trace_shapes.sh)"
    (cd "$dir" && python3 "$root/scripts/prenorm_trace.py" trace.*.csv) >> "$dir/trace_summary.txt" 2>&1 ||
      { echo "trace_shapes: $shape, $name: prenorm_trace.py failed ($name/$shape/trace_summary.txt)" >&2; status=1; }
    gzip -9f "${traces[@]}"
  done
done
# each shape's traces side by side, build after build
for shape in "${shapes[@]}"; do
  echo "== $shape"
  for name in "${names[@]}"; do
    # prenorm_trace.py's table of several traces, or the one trace's span
    awk -v b="$name" '/^trace +span/ {t = 1; next} t && NF {print b "  " $0; n++}
      /^span / && !s {s = $0} END {if (!n && s) print b "  " s}' "$out/$name/$shape/trace_summary.txt" 2> /dev/null || true
  done
done
exit $status
