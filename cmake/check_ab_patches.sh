#!/bin/bash
# check_ab_patches.sh ROOT: fused/tools/ab_patches.sh, which builds the pre-norm probe from the
# tree and from each diff and times the builds in mirrored order, run in a scratch copy of the
# tools it needs where build_probe.sh is a stand-in: the "probe" it builds prints a probe table
# whose coop_n256 time is 0.1 ms scaled by a factor the diff's name picks (fast 0.9, slow 1.2,
# the tree 1.0), coop_n256_s4 1.1 times that, cuBLASLt 0.1 ms; the real run_probe.sh runs it,
# and a stand-in nvidia-smi first on PATH plays a GPU host (or a host without a GPU).  Checked:
# the refusals (exit 2), no GPU (77), the runs' order (base fast slow, then slow fast base),
# compare.txt's ratios, a probe run that fails (exit 1, the comparison still written) and a build
# that fails (exit 1, its messages kept, no run).
set -u
command -v python3 > /dev/null || { echo "no python3 here: ab_patches_test skipped"; exit 77; }
src="$1"
# shellcheck source=cmake/check_probe_tools_lib.sh
. "$src/cmake/check_probe_tools_lib.sh" # scratch_tree, gpu, expect_rc, expect_out
scratch_tree ab_patches.sh probe_ratios.py clock_summary.py # $dir, $t, status
cat > "$t/fused/tools/build_probe.sh" <<'EOT'
#!/bin/bash
# stand-in: BIN prints a probe table scaled by the diff's name; LOG a ptxas line
case "${NF_PROBE_PATCH:-}" in *fast*) f=0.9 ;; *slow*) f=1.2 ;; *) f=1.0 ;; esac
case "${NF_PROBE_PATCH:-}" in *fails*) fail=1 ;; *) fail=0 ;; esac
case "${NF_PROBE_PATCH:-}" in *broken*) echo "stand-in: broken.diff does not build" >&2; exit 1 ;; esac
name="$(basename "${NF_PROBE_PATCH:-base}" .diff)"
cat > "$1" <<EOP
#!/bin/bash
echo "$name" >> "\$AB_ORDER_LOG"
printf 'M x K x N  coop_n128 coop_n256 coop_n256_s4 auto cublasLt roofline best b/gemm TFLOP/s %%roof\n'
for s in 65536x256x256 131072x1024x256; do
  awk -v s=\$s -v f=$f 'BEGIN { printf "%s inf %.4f %.4f %.4f 0.1000 0.0500 coop_n256 1.0 300 50.0\n", s, 0.1 * f, 0.11 * f, 0.1 * f }'
done
echo "(ms, medians of 15 timed in turn, L2 flushed)"
exit $fail
EOP
chmod +x "$1"
echo "ptxas info    : Used 168 registers, used 16 barriers" > "$2"
EOT
chmod +x "$t/fused/tools/build_probe.sh"
for n in fast slow fails broken; do echo "--- a/fused/x.cu" > "$dir/$n.diff"; done
ab() { # ARGS: ab_patches.sh's exit status in rc, its output in $dir/out
  rc=0
  (cd "$t" && PATH="$dir/bin:$PATH" NF_COMMIT=test OUT="$dir/out_dir" AB_ORDER_LOG="$dir/order" \
    fused/tools/ab_patches.sh "$@") > "$dir/out" 2>&1 || rc=$?
}

gpu "GPU 0: NVIDIA H200"
export NF_PROBE_VARIANTS=2,5
ab; expect_rc 2 "no diffs named"
NF_PROBE_VARIANTS='' ab fast="$dir/fast.diff"; expect_rc 2 "NF_PROBE_VARIANTS unset"
expect_out "^ab_patches: NF_PROBE_VARIANTS: '' is not a list" "$dir/out" "NF_PROBE_VARIANTS unset"
ab "$dir/fast.diff"; expect_rc 2 "a diff without NAME="
ab base="$dir/fast.diff"; expect_rc 2 "a diff named base"
ab fast="$dir/fast.diff" fast="$dir/slow.diff"; expect_rc 2 "a name given twice"
expect_out "^ab_patches: the name 'fast' is given twice" "$dir/out" "a name given twice"
ab fast="$dir/missing.diff"; expect_rc 2 "a missing diff"
expect_out "^ab_patches: fast: no readable diff" "$dir/out" "a missing diff"

gpu ""
ab fast="$dir/fast.diff"; expect_rc 77 "no GPU"
expect_out "^ab_patches: no GPU visible" "$dir/out" "no GPU"

gpu "GPU 0: NVIDIA H200"
rm -f "$dir/order"
ab fast="$dir/fast.diff" slow="$dir/slow.diff"; expect_rc 0 "two diffs, two rounds"
[ "$(tr '\n' ' ' < "$dir/order")" = "base fast slow slow fast base " ] ||
  { echo "FAIL: the runs' order: $(tr '\n' ' ' < "$dir/order")"; status=1; }
c="$dir/out_dir/compare.txt"
expect_out "^# command: NF_PROBE_VARIANTS=2,5 NF_AB_ROUNDS=2 fused/tools/ab_patches.sh fast=" "$c" "compare.txt's header"
expect_out "^## fast over base: coop_n256$" "$c" "a section per diff and variant"
expect_out "^run 1 \(fast_r1/probe_log.txt over base_r1/probe_log.txt\): median 0\.900 " "$c" "fast over base, round 1"
expect_out "^run 2 \(slow_r2/probe_log.txt over base_r2/probe_log.txt\): median 1\.200 " "$c" "slow over base, round 2"
expect_out "^## slow over base: coop_n256_s4$" "$c" "the second variant timed"
expect_out "^## base: the best of coop_n256 coop_n256_s4 over cuBLASLt$" "$c" "the best over cuBLASLt"
expect_out "^131072x1024x256 +0\.900 +0\.900$" "$c" "fast's best over cuBLASLt"
[ -f "$dir/out_dir/fast/fast.diff" ] || { echo "FAIL: the diff is not kept beside its runs"; status=1; }
expect_out "Used 168 registers" "$dir/out_dir/slow/build.txt" "each build's ptxas report"
expect_out "^SASS: 2 HGMMA, 0 LDL/STL, 1 UTMALDG$" "$dir/out_dir/slow/build.txt" "each build's SASS counts"
expect_out "^# command: NF_PROBE_PATCH=.*fast\.diff NF_PROBE_VARIANTS=2,5 fused/tools/run_probe.sh" \
  "$dir/out_dir/fast_r1/probe_log.txt" "the probe log names the diff it was built with"

rm -rf "$dir/out_dir"
NF_AB_ROUNDS=1 ab fails="$dir/fails.diff"; expect_rc 1 "a probe run that fails"
expect_out "^ab_patches: round 1, fails: exit 1$" "$dir/out" "the failed run named"
expect_out "^run 1 \(fails_r1/probe_log.txt over base_r1/probe_log.txt\): median 1\.000 " "$dir/out_dir/compare.txt" \
  "the comparison written all the same"
rm -rf "$dir/out_dir" "$dir/order"
ab fast="$dir/fast.diff" broken="$dir/broken.diff"; expect_rc 1 "a build that fails"
expect_out "^ab_patches: the broken build failed \(broken/build.txt\)$" "$dir/out" "the failed build named"
expect_out "^stand-in: broken.diff does not build$" "$dir/out_dir/broken/build.txt" "the failed build's messages kept"
[ ! -e "$dir/order" ] || { echo "FAIL: a probe ran after a build failed: $(tr '\n' ' ' < "$dir/order")"; status=1; }
NF_AB_ROUNDS=0 ab fast="$dir/fast.diff"; expect_rc 2 "NF_AB_ROUNDS 0"
exit $status
