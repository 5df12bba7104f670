#!/usr/bin/env bash
# ab_bench.sh OUTDIR VAR=V1,V2[,...] [normfuse bench options...]
#
# An A/B of kernel variants on a GPU host.  The library is built with a
# temporary switch that reads the environment variable VAR (a patch kept with
# the results, never committed); this runs `normfuse bench` once per value,
# each log headed like gpu_suite.sh's (NF_COMMIT should name the patch too),
# and prints scripts/bench_compare.py over the runs into compare.txt
# (NF_AB_COMPARE passes it options, e.g. "--time --impl ref"); the GPU's clocks
# over the timed runs go to clocks.csv (summary: clocks.csv.summary).
#
# NF_AB_CHECKS: `normfuse check` cases, separated by ';', run under every
# value before anything is timed (ab_check.log), so that a variant that is
# fast because it is wrong shows up.  Each case gets its own seed and
# NF_AB_CHECK_TIMEOUT seconds (default 300): a case that does not finish stops
# the A/B before anything is timed (exit 1).
#
# NF_AB_ROUNDS=R (default 1): R rounds of one bench per value, the values in
# the order given in odd rounds and reversed in even ones (a process that
# runs first in a pair can read a few % apart from the second, whatever its
# kernel: ref/NOTES.md item 27), each run named ab_VAR_V_rN; compare.txt then
# has bench_compare.py --rounds (mean, range and rounds won per value, and a
# summary line per op: each value's time over the first's) after the table of
# every run.
#
# Builds first when build/ has no normfuse (scripts/gpu_suite.sh build).
# Exit: 0, 1 when a check or a bench run failed, 2 on usage, 77 without a GPU.
#
#   NF_COMMIT="9949d09 + ab.diff" \
#   NF_AB_CHECKS="--op norm_bwd --impl norm_bwd/ref --kind ln --shape M=531,N=16384" \
#     scripts/ab_bench.sh out/ab NF_AB_BWD=0,4 --grid norm --op rmsnorm_bwd,layernorm_bwd --impl ref
set -euo pipefail
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
[ $# -ge 2 ] || usage
spec="$2"
var="${spec%%=*}" values="${spec#*=}"
if [[ "$spec" != *=* || ! "$var" =~ ^[A-Za-z_][A-Za-z0-9_]*$ || ! "$values" =~ ^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$ ]]; then
  echo "ab_bench: '$spec' is not VAR=V1,V2,... (values: letters, digits, _ . -)" >&2
  exit 2
fi
# shellcheck source=scripts/gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
shift 2
cli="$build/cli/normfuse"
[ -x "$cli" ] || "$root/scripts/gpu_suite.sh" build "$out" > /dev/null
IFS=',' read -r -a vals <<< "$values"
rounds="$(ab_rounds ab_bench 1)" || exit 2

status=0
if [ -n "${NF_AB_CHECKS:-}" ]; then
  log="$out/ab_check.log"
  report_header "$log" "under each of $var=$values: normfuse check CASE --seed S for CASE in: $NF_AB_CHECKS"
  for v in "${vals[@]}"; do
    rc=0
    ab_checks "$log" "$var=$v" "$cli" "$var=$v" || rc=$?
    [ "$rc" = 77 ] && { echo "ab_bench: no GPU visible" >&2; exit 77; }
    [ "$rc" = 3 ] && { echo "ab_bench: a check under $var=$v did not finish (ab_check.log); nothing timed" >&2; exit 1; }
    [ "$rc" = 2 ] && exit 2
    [ "$rc" = 0 ] || status=1
  done
fi

jsons=()
clock_log_start "$out/clocks.csv"
for ((r = 1; r <= rounds; r++)); do
  mapfile -t order < <(ab_round_order "$r" "${vals[@]}")
  for v in "${order[@]}"; do
    name="ab_${var}_$v"
    ((rounds > 1)) && name="${name}_r$r"
    log="$out/$name.log"
    report_header "$log" "$var=$v normfuse bench $* --json $name.json"
    rc=0
    env "$var=$v" "$cli" bench "$@" --json "$out/$name.json" >> "$log" 2>&1 || rc=$?
    [ "$rc" = 77 ] && { echo "ab_bench: no GPU visible" >&2; exit 77; }
    if [ "$rc" != 0 ]; then
      echo "ab_bench: bench failed under $var=$v (exit $rc, see $log)" >&2
      status=1
      continue
    fi
    jsons+=("$out/$name.json")
  done
done
clock_log_stop
if [ ${#jsons[@]} -gt 0 ]; then
  # shellcheck disable=SC2086  # NF_AB_COMPARE is a list of options
  ab_compare "$out" "$rounds" ${NF_AB_COMPARE:-} -- "${jsons[@]##*/}"
fi
exit $status
