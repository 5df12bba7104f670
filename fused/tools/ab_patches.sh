#!/usr/bin/env bash
# ab_patches.sh — the pre-norm probe built from the tree and from the tree with each of some diffs
# laid over fused/, the builds timed in mirrored order, each diff's variants over the tree's.
#   NF_PROBE_VARIANTS=2,5 fused/tools/ab_patches.sh NAME=FILE.diff [NAME=FILE.diff ...]
# (from the repository root).  Each build is compiled once, all at the same time (build_probe.sh,
# with NF_PROBE_PATCH for a diff; its ptxas report and SASS counts in NAME/build.txt; a build
# that fails: its messages there too, exit 1 before any run), then NF_AB_ROUNDS rounds
# (default 2) run the probe (run_probe.sh, NF_PROBE_BIN) once per build, "base" (the tree) and
# the NAMEs in the order given in odd rounds and reversed in even ones, into NAME_rR/.
# compare.txt: per diff and per variant timed, scripts/probe_ratios.py V V over the base's runs
# of the same rounds (--den-from), then per build the best of the variants over cuBLASLt.
# NF_PROBE_VARIANTS is required: the variants compared (nf_prenorm_variant values, as the probe
# takes them).  The diffs are copied beside the runs.  Files go to $OUT when it is set (the
# device tool's output folder), else /tmp/ab_patches.
# Exit: 0; 1 when a build or a probe run failed (a failed check included); 2 on usage; 77
# without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
[ $# -ge 1 ] || usage
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, probe_variants, probe_gpu, patch_arg, probe_builds, probe_run, ab_rounds, ab_round_order
variants="$(probe_variants ab_patches)" || exit 2
rounds="$(ab_rounds ab_patches 2)" || exit 2
declare -A diff_of=()
names=(base)
for arg in "$@"; do patch_arg ab_patches "$arg" || exit 2; done
probe_gpu ab_patches || exit 77
out="$(mkdir -p "${OUT:-/tmp/ab_patches}" && cd "${OUT:-/tmp/ab_patches}" && pwd)"
bins="$(mktemp -d)"
trap 'rm -rf "$bins"' EXIT

# The builds run at once (one nvcc each, minutes apiece on a device's lent time), then are
# checked in the order given.
probe_builds ab_patches "$out" "$bins" || exit 1

status=0
for ((r = 1; r <= rounds; r++)); do
  mapfile -t order < <(ab_round_order "$r" "${names[@]}")
  for name in "${order[@]}"; do
    rc=0
    probe_run "$out/${name}_r$r" "$bins/$name" NF_PROBE_PATCH="${diff_of[$name]:-}" || rc=$?
    echo "ab_patches: round $r, $name: exit $rc"
    [ "$rc" = 0 ] || status=1
  done
done

runs_of() { local r; for ((r = 1; r <= rounds; r++)); do echo "${1}_r$r/probe_log.txt"; done; }
columns="$(python3 scripts/probe_ratios.py --timed "$out/base_r1/probe_log.txt")" || columns=""
[ -n "$columns" ] || { echo "ab_patches: the base's first run (base_r1/probe_log.txt) timed no variant" >&2; exit 1; }
report_header "$out/compare.txt" "NF_PROBE_VARIANTS=$variants NF_AB_ROUNDS=$rounds fused/tools/ab_patches.sh $*"
rc=0
(
  cd "$out"
  st=0
  mapfile -t base_runs < <(runs_of base)
  for name in "${names[@]:1}"; do
    mapfile -t runs < <(runs_of "$name")
    for c in $columns; do
      echo "## $name over base: $c"
      python3 "$root/scripts/probe_ratios.py" "$c" "$c" "${runs[@]}" --den-from "${base_runs[@]}" || st=1
      echo
    done
  done
  for name in "${names[@]}"; do
    mapfile -t runs < <(runs_of "$name")
    echo "## $name: the best of $columns over cuBLASLt"
    python3 "$root/scripts/probe_ratios.py" "best:${columns// /,}" cublasLt "${runs[@]}" || st=1
    echo
  done
  exit $st
) >> "$out/compare.txt" 2>&1 || rc=$?
[ "$rc" = 0 ] || { echo "ab_patches: a comparison failed (compare.txt)" >&2; status=1; }
grep -E "^(## |run [0-9])" "$out/compare.txt" || true
exit $status
