#!/usr/bin/env bash
# ab_builds.sh OUTDIR BASEDIR [normfuse bench options...]
#
# An A/B of two versions of some files, built side by side on a GPU host: the
# tree as it is ("new") and a copy of it with the files under BASEDIR laid
# over it ("base"; BASEDIR mirrors the tree, e.g. BASEDIR/ref/norm_bwd.cu).
# Each is built (scripts/gpu_suite.sh build), then `normfuse bench` runs with
# the options given in NF_AB_ROUNDS rounds (default 2) of one run per version,
# base first in odd rounds and new first in even ones (base, new, new, base,
# ...: the first process of a pair can read a few % apart from the second,
# ref/NOTES.md item 27), each run named ab_<version>_r<N>; compare.txt is
# scripts/bench_compare.py --time over every run, then --rounds over them
# (mean, range and rounds won per version, and a summary line per op: the
# time of "new" over "base").  Use it where a switch inside one
# build (ab_bench.sh) would change the code being compared.  NF_COMMIT names
# "new"; NF_BASE names "base" (default: "NF_COMMIT with BASEDIR's files").
# NF_AB_CHECKS: `normfuse check` cases, separated by ';', run by both builds
# before anything is timed (ab_check.log; see ab_checks in gpu_env.sh), each
# within NF_AB_CHECK_TIMEOUT seconds (default 300) or the A/B stops there.
# sass_diff.txt: which kernels the two builds compile differently, and the
# longest loop of each (scripts/sass_diff.py --loops, base then new), where
# cuobjdump is on PATH or named by CUOBJDUMP.
# Exit: 0, 1 when a build, a check or a bench run failed, 2 on usage, 77 without a GPU.
#
#   NF_COMMIT=315735d NF_BASE="315735d with its parent's ref/" \
#     scripts/ab_builds.sh out/ab_norm_bar base/ --grid norm --impl ref
set -euo pipefail
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
if [ $# -lt 2 ] || ! [ -d "$2" ]; then usage; fi
# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
base_files="$(cd "$2" && pwd)"
shift 2
rounds="$(ab_rounds ab_builds 2)" || exit 2
new_commit="$report_commit"
base_commit="${NF_BASE:-$new_commit with the files of $base_files}"

"$root/scripts/gpu_suite.sh" build "$out" > /dev/null || { echo "ab_builds: build of the tree failed" >&2; exit 1; }
base_tree="$(mktemp -d)"
trap 'rm -rf "$base_tree"' EXIT
tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -C "$base_tree" -xf -
cp -R "$base_files"/. "$base_tree"/
mkdir -p "$out/base"
NF_COMMIT="$base_commit" "$base_tree/scripts/gpu_suite.sh" build "$out/base" > /dev/null ||
  { echo "ab_builds: build of the base failed (see $out/base/build.log)" >&2; exit 1; }

status=0
if [ -n "${CUOBJDUMP:-}" ] || command -v cuobjdump > /dev/null; then
  report_header "$out/sass_diff.txt" "scripts/sass_diff.py --loops base/libnormfuse.so new/libnormfuse.so (base: $base_commit)"
  rc=0
  python3 "$root/scripts/sass_diff.py" --loops "$base_tree/build/libnormfuse.so" "$build/libnormfuse.so" \
    >> "$out/sass_diff.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] && echo "ab_builds: the SASS comparison failed, see $out/sass_diff.txt" >&2
fi
if [ -n "${NF_AB_CHECKS:-}" ]; then
  log="$out/ab_check.log"
  report_header "$log" "with each build (base: $base_commit): normfuse check CASE --seed S for CASE in: $NF_AB_CHECKS"
  for v in base new; do
    if [ "$v" = base ]; then cli="$base_tree/build/cli/normfuse"; else cli="$build/cli/normfuse"; fi
    rc=0
    ab_checks "$log" "$v" "$cli" || rc=$?
    [ "$rc" = 77 ] && { echo "ab_builds: no GPU visible" >&2; exit 77; }
    [ "$rc" = 3 ] && { echo "ab_builds: a check under $v did not finish (ab_check.log); nothing timed" >&2; exit 1; }
    [ "$rc" = 2 ] && exit 2
    [ "$rc" = 0 ] || status=1
  done
fi
runs=()
for ((rep = 1; rep <= rounds; rep++)); do
  mapfile -t order < <(ab_round_order "$rep" base new)
  for v in "${order[@]}"; do
    if [ "$v" = base ]; then cli="$base_tree/build/cli/normfuse" report_commit="$base_commit"
    else cli="$build/cli/normfuse" report_commit="$new_commit"; fi
    name="ab_${v}_r$rep"
    report_header "$out/$name.log" "normfuse bench $* --json $name.json"
    rc=0
    "$cli" bench "$@" --json "$out/$name.json" >> "$out/$name.log" 2>&1 || rc=$?
    [ "$rc" = 77 ] && { echo "ab_builds: no GPU visible" >&2; exit 77; }
    if [ "$rc" = 0 ]; then
      runs+=("$name.json")
    else
      echo "ab_builds: bench of $v (run $rep) failed (exit $rc), see $out/$name.log" >&2
      status=1
    fi
  done
done
report_commit="$new_commit vs $base_commit"
if [ ${#runs[@]} -gt 0 ]; then
  ab_compare "$out" "$rounds" --time -- "${runs[@]}"
fi
exit $status
