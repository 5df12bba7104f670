#!/usr/bin/env bash
# suite_with_diff.sh — a kernel experiment's checks before it can land: the GPU suite's steps
# on the tree with a diff laid over it, and one verdict, in one call on a GPU host.
#   NF_COMMIT=HASH fused/tools/suite_with_diff.sh FILE.diff SUITE_DIR   (from the repository root)
# FILE.diff (patch -p1, paths as git diff writes them) is laid over the tree, then
# scripts/gpu_suite.sh runs NF_SUITE_STEPS (default build,tests,fuzz) into SUITE_DIR, with
# NF_CTEST_ARGS and NF_FUZZ_ARGS as given (e.g. NF_CTEST_ARGS="-R prenorm_gemm_test|prop_"
# NF_FUZZ_ARGS="--op prenorm_fwd --impl prenorm_fwd/fused"), its logs headed
# "HASH + FILE.diff".  The diff is copied into SUITE_DIR and taken back off the tree afterwards.
# SUITE_DIR/verdict.txt: for the steps build, tests and fuzz when run, what each found: build,
# whether it finished; tests, ctest's "N% tests passed" line (a pass needs 100 %); fuzz, the
# campaign's summary line (a pass needs some runs passed and 0 FAIL).  Other steps' logs are
# written and not judged.
# Exit: 0 when every step run passed; 1 when one did not (gpu_suite.sh itself reports a
# failed test or fuzz case and goes on); 2 on usage, NF_COMMIT unset, or a diff that does not
# apply; 77 without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; } # the comment at the top
[ $# -eq 2 ] || usage
diff_file="$1" suite="$2"
fail() { echo "suite_with_diff: $*" >&2; exit 2; }
[ -r "$diff_file" ] || fail "no readable diff '$diff_file'"
[ -n "$suite" ] || fail "SUITE_DIR is empty"
[ -n "${NF_COMMIT:-}" ] || fail "NF_COMMIT is unset: the suite's logs must name the tree the diff is laid over"
steps="${NF_SUITE_STEPS:-build,tests,fuzz}"
patch -s --dry-run -p1 < "$diff_file" > /dev/null 2>&1 || fail "'$diff_file' does not apply to the tree"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh # report_header, probe_gpu, has
probe_gpu suite_with_diff || exit 77
mkdir -p "$suite"
out="$(cd "$suite" && pwd)"
name="$(basename "$diff_file")"
cp "$diff_file" "$out/$name"
patch -s --no-backup-if-mismatch -p1 < "$diff_file"
trap 'patch -s --no-backup-if-mismatch -R -p1 < "$out/$name"' EXIT

suite_rc=0
NF_COMMIT="$NF_COMMIT + $name" scripts/gpu_suite.sh "$steps" "$out" || suite_rc=$?

report_header "$out/verdict.txt" "NF_SUITE_STEPS=$steps fused/tools/suite_with_diff.sh $*"
status=0
verdict() { # STEP PASSED(0/1) WHAT
  printf '%-6s %-4s %s\n' "$1" "$([ "$2" = 1 ] && echo pass || echo FAIL)" "$3" >> "$out/verdict.txt"
  [ "$2" = 1 ] || status=1
}
if has build; then
  # (gpu_suite.sh's other steps go on past a failure: a status of its own is the build's)
  if [ "$suite_rc" = 0 ]; then verdict build 1 "built (build.log)"; else verdict build 0 "gpu_suite.sh exit $suite_rc (build.log)"; fi
fi
if has tests; then
  line="$(grep -E "^[0-9]+% tests passed" "$out/tests.log" 2> /dev/null | tail -1 || true)"
  ok=0
  [[ "$line" == "100% tests passed"* ]] && ok=1
  verdict tests "$ok" "${line:-no ctest summary in tests.log}"
fi
if has fuzz; then
  line="$(grep -E "^fuzz: [0-9]+ cases" "$out/fuzz.log" 2> /dev/null | tail -1 || true)"
  ok=0
  [[ "$line" =~ \ ([0-9]+)\ pass,\ 0\ FAIL ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] && ok=1
  verdict fuzz "$ok" "${line:-no campaign summary in fuzz.log}"
fi
cat "$out/verdict.txt"
[ "$suite_rc" = 0 ] || status=1
exit $status
