#!/bin/bash
# check_ab_checks.sh GPU_ENV: scripts/gpu_env.sh's ab_checks, the correctness
# checks every A/B runs before it times anything, on stand-in CLIs: a case
# that passes, one that fails, one on a host without a GPU (77), and one that
# never answers, which must be killed within NF_AB_CHECK_TIMEOUT and reported
# as such (status 3) rather than hold the run (a hung variant once held a
# device call to its limit with nothing written); a timeout that is not a
# number is refused (2).
set -u
env_sh="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
status=0
stand_in() { # NAME BODY: a stand-in `normfuse` whose `check` does BODY
  printf '#!/bin/sh\n%s\n' "$2" > "$dir/$1"
  chmod +x "$dir/$1"
}
stand_in pass 'exit 0'
stand_in fail 'echo "check: 3 violations"; exit 1'
stand_in nogpu 'exit 77'
stand_in hang 'sleep 30; exit 0'
run() { # CLI TIMEOUT: ab_checks's status with two cases; its output in $dir/out
  rm -f "$dir/log"
  # shellcheck disable=SC1090,SC2034  # the sourced script reads these
  (NF_COMMIT=test NF_AB_CHECKS="--op a;--op b" NF_AB_CHECK_TIMEOUT="$2" && . "$env_sh" &&
    ab_checks "$dir/log" "V=1" "$dir/$1" "V=1") > "$dir/out" 2>&1
}
expect() { # CLI TIMEOUT STATUS [PATTERN]: the status, and PATTERN in the output
  local rc=0
  run "$1" "$2" || rc=$?
  [ "$rc" = "$3" ] || { echo "FAIL: ab_checks on '$1' (timeout $2): status $rc, not $3"; cat "$dir/out"; status=1; }
  [ -z "${4:-}" ] || grep -q -- "$4" "$dir/out" || { echo "FAIL: ab_checks on '$1': no '$4' in its output:"; cat "$dir/out"; status=1; }
}
expect pass 5 0 "V=1 check --op b --seed [0-9]*: pass"
expect fail 5 1 "V=1 check --op a --seed [0-9]*: FAIL (exit 1)"
expect nogpu 5 77
start=$(date +%s)
expect hang 1 3 "V=1 check --op a --seed [0-9]*: FAIL (no answer in 1 s, killed: a hang?)"
took=$(($(date +%s) - start))
[ "$took" -lt 15 ] || { echo "FAIL: the hanging case held ab_checks ${took} s with a 1 s limit"; status=1; }
grep -q -- "--op b" "$dir/out" && { echo "FAIL: ab_checks went on to the next case after a hang"; status=1; }
expect pass 1x 2 "NF_AB_CHECK_TIMEOUT: '1x' is not a positive number of seconds"
exit $status
