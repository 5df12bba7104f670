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
variants="${NF_PROBE_VARIANTS:-}"
[[ "$variants" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  { echo "ab_patches: NF_PROBE_VARIANTS: '$variants' is not a list of variant numbers such as 2,5" >&2; exit 2; }
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, ab_rounds, ab_round_order, probe_sass_counts
rounds="$(ab_rounds ab_patches 2)" || exit 2
declare -A diff_of=()
names=(base)
for arg in "$@"; do
  name="${arg%%=*}" file="${arg#*=}"
  [[ "$arg" == *=* && "$name" =~ ^[a-z][a-z0-9_]*$ && "$name" != base ]] ||
    { echo "ab_patches: '$arg' is not NAME=FILE.diff (NAME lower-case letters, digits, _; not 'base')" >&2; exit 2; }
  [ -z "${diff_of[$name]:-}" ] || { echo "ab_patches: the name '$name' is given twice" >&2; exit 2; }
  [ -r "$file" ] || { echo "ab_patches: $name: no readable diff '$file'" >&2; exit 2; }
  diff_of[$name]="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
  names+=("$name")
done
[ -n "$(nvidia-smi -L 2>/dev/null || true)" ] || { echo "ab_patches: no GPU visible, nothing built or timed" >&2; exit 77; }
out="$(mkdir -p "${OUT:-/tmp/ab_patches}" && cd "${OUT:-/tmp/ab_patches}" && pwd)"
bins="$(mktemp -d)"
trap 'rm -rf "$bins"' EXIT

# The builds run at once (one nvcc each, minutes apiece on a device's lent time), then are
# checked in the order given.
declare -A build_pid=()
for name in "${names[@]}"; do
  mkdir -p "$out/$name"
  patch="${diff_of[$name]:-}"
  [ -z "$patch" ] || cp "$patch" "$out/$name/"
  report_header "$out/$name/build.txt" "${patch:+NF_PROBE_PATCH=$patch }fused/tools/build_probe.sh"
  NF_PROBE_PATCH="$patch" fused/tools/build_probe.sh "$bins/$name" "$bins/$name.ptxas" > "$bins/$name.out" 2>&1 &
  build_pid[$name]=$!
done
for name in "${names[@]}"; do
  if ! wait "${build_pid[$name]}"; then
    cat "$bins/$name.out" "$bins/$name.ptxas" >> "$out/$name/build.txt" 2> /dev/null || true
    cat "$bins/$name.out" >&2
    echo "ab_patches: the $name build failed ($name/build.txt)" >&2
    wait # the other builds, before their folder goes
    exit 1
  fi
  cat "$bins/$name.out"
  cat "$bins/$name.ptxas" >> "$out/$name/build.txt"
  probe_sass_counts "$bins/$name" "$bins/$name.sass" | tee -a "$out/$name/build.txt"
done

status=0
for ((r = 1; r <= rounds; r++)); do
  mapfile -t order < <(ab_round_order "$r" "${names[@]}")
  for name in "${order[@]}"; do
    dir="$out/${name}_r$r"
    mkdir -p "$dir"
    rc=0
    OUT="$dir" NF_PROBE_BIN="$bins/$name" NF_PROBE_PATCH="${diff_of[$name]:-}" fused/tools/run_probe.sh \
      > "$dir/stdout.txt" 2>&1 || rc=$?
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
