#!/bin/bash
# check_ncu_known_metrics.sh GPU_ENV: scripts/gpu_env.sh's ncu_known_metrics, which the
# profiling scripts pass NF_PROFILE_METRICS through (ncu refuses a whole run over one metric
# it does not know), on stand-in ncu commands: known metrics kept in order, an unknown one
# and a mere prefix of a known name dropped and named, an empty list left empty, and a
# failing query passing the list on unchecked, with a note.
set -u
env_sh="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
status=0
cat > "$dir/ncu" <<'NCU'
#!/bin/sh
[ "$1" = --query-metrics ] || exit 9
cat <<'LIST'
Device gh100 (Hopper)
----------------------------------------------------------------------------------------------
Metric Name                                         Metric Type   Metric Description
sm__cycles_active                                   Counter       # of cycles with at least one warp in flight
smsp__issue_active                                  Counter       # of cycles where an SMSP issued an instruction
smsp__warp_issue_stalled_barrier_per_warp_active    Ratio         proportion of warps stalled at a barrier
LIST
NCU
printf '#!/bin/sh\nexit 1\n' > "$dir/broken"
chmod +x "$dir/ncu" "$dir/broken"
run() { # NCU LIST: stdout to $dir/out, stderr to $dir/err
  # shellcheck disable=SC1090,SC2034,SC2209  # the sourced script is the argument; it reads NF_COMMIT
  (NF_COMMIT=test && . "$env_sh" && ncu_known_metrics "$dir/$1" "$2") > "$dir/out" 2> "$dir/err"
}
expect() { # NCU LIST STDOUT [STDERR-PATTERN]
  run "$1" "$2" || { echo "FAIL: ncu_known_metrics $1 '$2' returned $?"; status=1; }
  [ "$(cat "$dir/out")" = "$3" ] || { echo "FAIL: ncu_known_metrics $1 '$2' gave '$(cat "$dir/out")', not '$3'"; status=1; }
  if [ -n "${4:-}" ]; then
    grep -q -- "$4" "$dir/err" || { echo "FAIL: no '$4' on stderr:"; cat "$dir/err"; status=1; }
  elif [ -s "$dir/err" ]; then
    echo "FAIL: ncu_known_metrics $1 '$2' wrote to stderr:"; cat "$dir/err"; status=1
  fi
}
expect ncu "smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_active.max" \
  "smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_active.max"
expect ncu "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_barrier_per_warp_active.pct" \
  "smsp__warp_issue_stalled_barrier_per_warp_active.pct" "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active dropped"
expect ncu "sm__cycles.sum,sm__cycles_active.avg" "sm__cycles_active.avg" "sm__cycles.sum dropped"
expect ncu "" ""
expect broken "a.sum,b.avg" "a.sum,b.avg" "query-metrics failed"
[ "$status" = 0 ] && echo "ncu_known_metrics: 5 cases as expected"
exit $status
