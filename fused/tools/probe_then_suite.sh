#!/usr/bin/env bash
# probe_then_suite.sh — a pick landed only where the probe says so, and the suite run on the tree
# that results, in one call on a GPU host (an H200's calls are few: fused/NOTES.md v34).
#   NF_PROBE_VARIANTS=5,9,10,11 NF_COMMIT=HASH NF_COMMIT_WITH=HASH2 \
#     fused/tools/probe_then_suite.sh VARIANT BASE SHAPE PICK.diff SUITE_DIR   (from the repository root)
# The probe (run_probe.sh, one build: its log, ptxas report and SASS counts in $OUT/probe/build.txt)
# runs NF_PROBE_ROUNDS times (default 3) into $OUT/probe_rR/.
# If VARIANT's time is under BASE's at SHAPE (MxKxN) in every run, PICK.diff (a change of the
# pick, against the tree) is laid over the tree (patch -p1) and the suite runs labelled
# NF_COMMIT_WITH, the commit that diff makes of NF_COMMIT; otherwise the suite runs on the tree
# as it is, labelled NF_COMMIT.  The suite: scripts/gpu_suite.sh NF_SUITE_STEPS (default
# build,sass,bench,gate,report) SUITE_DIR, then its `tests` step with NF_CTEST_ARGS set to
# NF_SUITE_CTEST_ARGS when that is set.  The diff is taken back off the tree afterwards.
# $OUT/decision.txt: the ratios per run and the tree the suite ran on.  Files go to $OUT when it
# is set (the device tool's output folder), else /tmp/probe_then_suite.
# Exit: the suite's status; 1 when the build or a probe run failed (a failed check included:
# then no suite runs and nothing is laid over the tree); 2 on usage, or a diff that does not
# apply; 77 without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
[ $# -eq 5 ] || usage
variant="$1" base="$2" shape="$3" pick="$4" suite="$5"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, probe_variants, probe_gpu, probe_builds, probe_run
fail() { echo "probe_then_suite: $*" >&2; exit 2; }
probe_variants probe_then_suite > /dev/null || exit 2
for v in "$variant" "$base"; do [[ "$v" =~ ^[a-z][a-z0-9_]*$ ]] || fail "'$v' is not a variant's name (coop_n256_s4, ...)"; done
[[ "$shape" =~ ^[0-9]+x[0-9]+x[0-9]+$ ]] || fail "SHAPE '$shape' is not MxKxN"
[ -r "$pick" ] || fail "no readable diff '$pick'"
[ -n "$suite" ] || fail "SUITE_DIR is empty"
rounds="${NF_PROBE_ROUNDS:-3}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || fail "NF_PROBE_ROUNDS: '$rounds' is not a positive integer"
[ -n "${NF_COMMIT:-}" ] || fail "NF_COMMIT is unset: the suite's reports must name the tree's commit"
if [ -z "${NF_COMMIT_WITH:-}" ] || [ "$NF_COMMIT_WITH" = "$NF_COMMIT" ]; then
  fail "NF_COMMIT_WITH must name the commit PICK.diff makes of NF_COMMIT ('${NF_COMMIT_WITH:-}')"
fi
patch -s --dry-run -p1 < "$pick" > /dev/null 2>&1 || fail "'$pick' does not apply to the tree"
probe_gpu probe_then_suite || exit 77
out="$(mkdir -p "${OUT:-/tmp/probe_then_suite}" && cd "${OUT:-/tmp/probe_then_suite}" && pwd)"
bins="$(mktemp -d)"
trap 'rm -rf "$bins"' EXIT

names=(probe) # probe_builds' one build, unpatched: the binary $bins/probe, its log probe/build.txt
declare -A diff_of=()
probe_builds probe_then_suite "$out" "$bins" || exit 1
runs=()
for ((r = 1; r <= rounds; r++)); do
  rc=0
  probe_run "$out/probe_r$r" "$bins/probe" || rc=$?
  echo "probe_then_suite: probe run $r: exit $rc"
  [ "$rc" = 0 ] || { echo "probe_then_suite: a probe run failed (probe_r$r/): no suite" >&2; exit 1; }
  runs+=("$out/probe_r$r/probe_log.txt")
done

# VARIANT over BASE at SHAPE, one ratio per run ('-' where a time is missing: not a win)
ratios="$(python3 scripts/probe_ratios.py --shapes "^$shape\$" "$variant" "$base" "${runs[@]}")"
wins="$(awk -v s="$shape" '$1 == s { n = 0; for (i = 2; i <= NF; ++i) if ($i != "-" && $i + 0 < 1) ++n; print n }' <<< "$ratios")"
if [ "${wins:-0}" = "$rounds" ]; then
  tree="$NF_COMMIT_WITH ($pick laid over $NF_COMMIT)"
else
  tree="$NF_COMMIT, as it is"
fi
report_header "$out/decision.txt" "NF_PROBE_VARIANTS=$NF_PROBE_VARIANTS NF_PROBE_ROUNDS=$rounds fused/tools/probe_then_suite.sh $*"
{
  echo "$ratios"
  echo
  echo "$variant under $base at $shape in ${wins:-0} of $rounds runs: the suite at $tree"
} >> "$out/decision.txt"
tail -1 "$out/decision.txt"

if [ "${wins:-0}" = "$rounds" ]; then
  patch -s --no-backup-if-mismatch -p1 < "$pick"
  trap 'patch -s --no-backup-if-mismatch -R -p1 < "$pick"; rm -rf "$bins"' EXIT
  export NF_COMMIT="$NF_COMMIT_WITH"
fi
status=0
scripts/gpu_suite.sh "${NF_SUITE_STEPS:-build,sass,bench,gate,report}" "$suite" || status=$?
if [ -n "${NF_SUITE_CTEST_ARGS:-}" ]; then
  NF_CTEST_ARGS="$NF_SUITE_CTEST_ARGS" scripts/gpu_suite.sh tests "$suite" || status=$?
fi
exit $status
