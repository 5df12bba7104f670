# shellcheck shell=sh disable=SC2034  # status is read by the scripts that source this one
# check_lib.sh — sourced by the cmake/check_*.sh tests of the Python tools: $py
# (PYTHON, else python3; exit 77, a skip, without one), status=0,
# expect OUTPUT PATTERN WHAT, which sets status=1 and prints OUTPUT unless a
# line of it matches the extended regex PATTERN, and refuses_non_profile
# SCRIPT WHAT, which sets status=1 unless SCRIPT fails on a CSV that holds no
# Nsight Compute profile, and expect_blocks OUTPUT N, which sets status=1
# unless OUTPUT has N kernel blocks (lines starting '== ': each kernel once);
# script_and_scratch NAME "$@" takes the one argument,
# a script's path, into $script made absolute (else NAME's usage line and exit
# 2) and makes a scratch directory $dir, removed on exit; run_script ARGS...
# runs $script on ARGS, its standard output into $out and its exit status into
# $rc; expect_rc CODE WHAT sets status=1 unless $rc is CODE; expect_exit CODE
# WHAT ARGS... is run_script ARGS (output discarded), then expect_rc;
# expect_error CODE WHAT PATTERN ARGS... is expect_exit, and sets status=1
# unless the standard error is one line matching PATTERN (no traceback);
# refuses_bad_runs TOOL ARGS... runs $script ARGS FILE for FILE each of a
# missing file, a file not JSON, a JSON list, a run with a case without impl
# and one with a case that is not an object, and expects exit 2 and one line
# `TOOL: FILE: why` for each.
py="${PYTHON:-python3}"
command -v "$py" > /dev/null || { echo "SKIP: no $py"; exit 77; }
status=0
expect() {
  if ! printf '%s\n' "$1" | grep -qE "$2"; then
    echo "FAIL: $3: no line matches '$2' in:"; printf '%s\n' "$1"; status=1
  fi
}
refuses_non_profile() {
  nonprofile="$(mktemp)"
  printf 'not,a,profile\n' > "$nonprofile"
  if "$py" "$1" "$nonprofile" > /dev/null 2>&1; then echo "FAIL: $2 was accepted"; status=1; fi
  rm -f "$nonprofile"
}
expect_blocks() {
  blocks="$(printf '%s\n' "$1" | grep -c '^== ' || true)"
  [ "$blocks" = "$2" ] || { echo "FAIL: $blocks kernel blocks printed, want $2 (each kernel once)"; status=1; }
}
script_and_scratch() {
  name="$1"
  shift
  if [ $# -ne 1 ] || ! [ -r "$1" ]; then echo "$name: usage: $name.sh SCRIPT" >&2; exit 2; fi
  script="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
}
run_script() {
  rc=0
  out="$("$py" "$script" "$@")" || rc=$?
}
expect_rc() {
  [ "$rc" = "$1" ] || { echo "FAIL: $2: exit $rc, not $1"; status=1; }
}
expect_exit() {
  code="$1" what="$2"
  shift 2
  run_script "$@" 2> /dev/null
  expect_rc "$code" "$what"
}
expect_error() {
  code="$1" what="$2" pattern="$3"
  shift 3
  run_script "$@" 2> "$dir/stderr"
  expect_rc "$code" "$what"
  if [ "$(wc -l < "$dir/stderr")" -ne 1 ] || ! grep -qE "$pattern" "$dir/stderr"; then
    echo "FAIL: $what: the standard error is not one line matching '$pattern':"; cat "$dir/stderr"; status=1
  fi
}
refuses_bad_runs() {
  tool="$1"
  shift
  printf 'not JSON\n' > "$dir/text.json"
  printf '[{"op": "rmsnorm_fwd", "impl": "ref"}]\n' > "$dir/list.json"
  printf '{"copy_bw_tbs": 4.0, "cases": [{"op": "rmsnorm_fwd", "shape": {"M": 8, "n": 8}, "time_us": 1.0, "bytes": 1}]}\n' \
    > "$dir/noimpl.json"
  printf '{"copy_bw_tbs": 4.0, "cases": [5]}\n' > "$dir/number.json"
  expect_error 2 "$tool: a missing file" "^$tool: .*missing\.json: No such file or directory\$" "$@" "$dir/missing.json"
  expect_error 2 "$tool: a file not JSON" "^$tool: .*text\.json: not JSON" "$@" "$dir/text.json"
  expect_error 2 "$tool: a JSON list" "^$tool: .*list\.json: not a JSON object" "$@" "$dir/list.json"
  expect_error 2 "$tool: a case without impl" "^$tool: .*noimpl\.json: case 1 \(rmsnorm_fwd\): no impl\$" \
    "$@" "$dir/noimpl.json"
  expect_error 2 "$tool: a case not an object" "^$tool: .*number\.json: case 1 is not an object\$" "$@" "$dir/number.json"
}
