#!/bin/bash
# check_suite_with_diff.sh ROOT: fused/tools/suite_with_diff.sh, a kernel experiment's checks (the
# GPU suite's steps on the tree with a diff laid over it, one verdict), run in a scratch copy of
# the tools it needs where gpu_suite.sh is a stand-in.  The stand-in logs its steps, NF_COMMIT,
# NF_CTEST_ARGS, NF_FUZZ_ARGS and the tree's kernel.txt, which the diff turns from "old" to "new";
# it writes the ctest line SWD_TESTS into tests.log and the campaign line SWD_FUZZ into fuzz.log
# for the steps asked, and exits SWD_RC.  A stand-in nvidia-smi plays a GPU host (or a host
# without one).  Checked: the refusals (exit 2, nothing run), no GPU (77), every step passing
# (exit 0, the suite on the diff's tree under "HASH + NAME", the diff kept, the tree given back),
# a failed test, a fuzz case that fails, a campaign that passed nothing, a failed build, and the
# steps and narrowing passed on.
set -u
command -v patch > /dev/null || { echo "no patch here: suite_with_diff_test skipped"; exit 77; }
src="$1"
# shellcheck source=cmake/check_probe_tools_lib.sh
. "$src/cmake/check_probe_tools_lib.sh" # scratch_tree, gpu, expect_rc, expect_out
scratch_tree suite_with_diff.sh # $dir, $t, status
echo old > "$t/kernel.txt"
printf -- '--- a/kernel.txt\n+++ b/kernel.txt\n@@ -1 +1 @@\n-old\n+new\n' > "$dir/v1.diff"
printf -- '--- a/kernel.txt\n+++ b/kernel.txt\n@@ -1 +1 @@\n-older\n+new\n' > "$dir/stale.diff"
cat > "$t/scripts/gpu_suite.sh" <<'EOT'
#!/bin/bash
# stand-in: one line per call, the logs of the steps asked
echo "suite $1 commit=$NF_COMMIT ctest=${NF_CTEST_ARGS:-} fuzz=${NF_FUZZ_ARGS:-} kernel=$(cat kernel.txt)" >> "$SWD_DIR/suite.log"
mkdir -p "$2"
[[ ",$1," == *",tests,"* ]] && printf 'Test project\n\n%s\n' "$SWD_TESTS" > "$2/tests.log"
[[ ",$1," == *",fuzz,"* ]] && printf 'normfuse fuzz: seed 1\n%s\n' "$SWD_FUZZ" > "$2/fuzz.log"
exit "${SWD_RC:-0}"
EOT
chmod +x "$t/scripts/gpu_suite.sh"
swd() { # ARGS: suite_with_diff.sh's exit status in rc, its output in $dir/out; a fresh suite log
  rm -rf "$dir/suite" "$dir/suite.log"
  rc=0
  (cd "$t" && PATH="$dir/bin:$PATH" SWD_DIR="$dir" fused/tools/suite_with_diff.sh "$@") > "$dir/out" 2>&1 || rc=$?
}
no_suite() { [ ! -e "$dir/suite.log" ] || { echo "FAIL: $1: the suite ran"; cat "$dir/suite.log"; status=1; }; }
suite_line() { # LINE WHAT: the suite's one call
  [ "$(cat "$dir/suite.log" 2> /dev/null)" = "$1" ] ||
    { echo "FAIL: $2: the suite's calls:"; cat "$dir/suite.log" 2> /dev/null; echo "expected: $1"; status=1; }
}
tree_back() { [ "$(cat "$t/kernel.txt")" = old ] || { echo "FAIL: $1: kernel.txt is '$(cat "$t/kernel.txt")'"; status=1; }; }
verdict() { expect_out "$1" "$dir/suite/verdict.txt" "$2"; }

gpu "GPU 0: NVIDIA H200"
export NF_COMMIT=c1 SWD_TESTS="100% tests passed out of 9" \
  SWD_FUZZ="fuzz: 40 cases, 40 runs in 60.2 s: 31 pass, 0 FAIL, 0 not implemented, 9 unsupported, 0 already in the log"
swd "$dir/v1.diff"; expect_rc 2 "one argument"
swd "$dir/none.diff" "$dir/suite"; expect_rc 2 "a diff that is not there"
expect_out "^suite_with_diff: no readable diff" "$dir/out" "a diff that is not there"
NF_COMMIT='' swd "$dir/v1.diff" "$dir/suite"; expect_rc 2 "NF_COMMIT unset"
expect_out "^suite_with_diff: NF_COMMIT is unset" "$dir/out" "NF_COMMIT unset"
swd "$dir/stale.diff" "$dir/suite"; expect_rc 2 "a diff that does not apply"
expect_out "does not apply to the tree$" "$dir/out" "a diff that does not apply"
no_suite "a refusal"
tree_back "a refusal"

gpu ""
swd "$dir/v1.diff" "$dir/suite"; expect_rc 77 "no GPU"
no_suite "no GPU"
gpu "GPU 0: NVIDIA H200"

swd "$dir/v1.diff" "$dir/suite"; expect_rc 0 "every step passing"
suite_line "suite build,tests,fuzz commit=c1 + v1.diff ctest= fuzz= kernel=new" "every step passing"
tree_back "every step passing"
cmp -s "$dir/v1.diff" "$dir/suite/v1.diff" || { echo "FAIL: the diff was not kept beside the logs"; status=1; }
verdict "^# command: NF_SUITE_STEPS=build,tests,fuzz fused/tools/suite_with_diff.sh " "verdict.txt's header"
verdict "^build +pass " "the build's verdict"
verdict "^tests +pass +100% tests passed out of 9$" "the tests' verdict"
verdict "^fuzz +pass +fuzz: 40 cases, .*31 pass, 0 FAIL" "the campaign's verdict"

SWD_TESTS="89% tests passed, 1 tests failed out of 9" swd "$dir/v1.diff" "$dir/suite"
expect_rc 1 "a failed test"
verdict "^tests +FAIL +89% tests passed, 1 tests failed out of 9$" "a failed test's verdict"
verdict "^fuzz +pass " "the campaign beside a failed test"
tree_back "a failed test"

SWD_FUZZ="fuzz: 40 cases, 40 runs in 60.2 s: 29 pass, 2 FAIL, 0 not implemented, 9 unsupported, 0 already in the log" \
  swd "$dir/v1.diff" "$dir/suite"
expect_rc 1 "a fuzz case that fails"
verdict "^fuzz +FAIL +fuzz: .* 2 FAIL" "a failing campaign's verdict"

SWD_FUZZ="fuzz: 9 cases, 9 runs in 60.0 s: 0 pass, 0 FAIL, 0 not implemented, 9 unsupported, 0 already in the log" \
  swd "$dir/v1.diff" "$dir/suite"
expect_rc 1 "a campaign that passed nothing"
verdict "^fuzz +FAIL " "a campaign that passed nothing"

SWD_TESTS="" SWD_FUZZ="" swd "$dir/v1.diff" "$dir/suite"; expect_rc 1 "logs without their summaries"
verdict "^tests +FAIL +no ctest summary in tests.log$" "no ctest summary"
verdict "^fuzz +FAIL +no campaign summary in fuzz.log$" "no campaign summary"

SWD_RC=1 swd "$dir/v1.diff" "$dir/suite"; expect_rc 1 "a failed build"
verdict "^build +FAIL +gpu_suite.sh exit 1 " "a failed build's verdict"
tree_back "a failed build"

NF_SUITE_STEPS=build,tests NF_CTEST_ARGS="-R prenorm" NF_FUZZ_ARGS="--op prenorm_fwd" swd "$dir/v1.diff" "$dir/suite"
expect_rc 0 "the steps and narrowing passed on"
suite_line "suite build,tests commit=c1 + v1.diff ctest=-R prenorm fuzz=--op prenorm_fwd kernel=new" "the steps passed on"
! grep -q "^fuzz" "$dir/suite/verdict.txt" || { echo "FAIL: a verdict on a step not run"; status=1; }
exit "$status"
