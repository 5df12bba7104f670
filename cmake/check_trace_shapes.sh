#!/bin/bash
# check_trace_shapes.sh ROOT: fused/tools/trace_shapes.sh, which builds the pre-norm probe's trace
# build from the tree and from each diff and traces some shapes with each, run in a scratch copy
# of the tools it needs where build_probe.sh is a stand-in: the "probe" it builds checks that it
# was built with -DNF_TRACE_PHASES and, for the shape NF_TRACE_M/K/N names, writes a trace of two
# CTAs for each variant of NF_PROBE_VARIANTS (named v2, v5, ...), whose span is 20 us for the
# tree and 10 x the diff's factor (fast 1.5, slow 2.5) otherwise; the real run_probe.sh runs it,
# the real prenorm_trace.py reads the traces, and a stand-in nvidia-smi first on PATH plays a GPU
# host (or a host without a GPU).  Checked: the refusals (exit 2), no GPU (77), the files each
# build and shape leaves and the spans side by side, a probe that writes no trace (exit 1) and a
# build that fails (exit 1, its messages kept, no run).
set -u
command -v python3 > /dev/null || { echo "no python3 here: trace_shapes_test skipped"; exit 77; }
src="$1"
# shellcheck source=cmake/check_probe_tools_lib.sh
. "$src/cmake/check_probe_tools_lib.sh" # scratch_tree, gpu, expect_rc, expect_out
scratch_tree trace_shapes.sh prenorm_trace.py bwd_phases.py bench_compare.py clock_summary.py # $dir, $t, status
cat > "$t/fused/tools/build_probe.sh" <<'EOT'
#!/bin/bash
# stand-in: BIN writes traces (spans scaled by the diff's name); LOG a ptxas line
case "${NF_PROBE_PATCH:-}" in *fast*) f=1.5 ;; *slow*) f=2.5 ;; *) f=2 ;; esac
case "${NF_PROBE_PATCH:-}" in *broken*) echo "stand-in: broken.diff does not build" >&2; exit 1 ;; esac
case "${NF_PROBE_PATCH:-}" in *silent*) f=0 ;; esac
[ "${3:-}" = -DNF_TRACE_PHASES ] || { echo "stand-in: not a trace build: '${3:-}'" >&2; exit 1; }
cat > "$1" <<EOP
#!/bin/bash
echo "probe \$*: check ... ok"
[ "\$1 \$2" = "--shape \${NF_TRACE_M}x\${NF_TRACE_K}x\${NF_TRACE_N}" ] || { echo "the shape is not the traced one"; exit 1; }
[ "$f" = 0 ] && exit 0
for v in \${NF_PROBE_VARIANTS//,/ }; do
  awk -v f=$f -v M=\$NF_TRACE_M -v K=\$NF_TRACE_K -v N=\$NF_TRACE_N -v v=\$v 'BEGIN {
    us = 1000; t0 = 5000000
    printf "kind,cta,sm,t0,t1,n,op=prenorm_fwd,variant=v%s,grid=2,M=%s,K=%s,N=%s,BN=256\n", v, M, K, N
    for (c = 0; c < 2; c++) {
      printf "cta,%d,%d,%d,%d,2\n", c, c + 3, t0, t0 + (10 * f - c) * us
      printf "tile,%d,0,%d,%d,%d\n", c, t0, t0 + 6 * us, t0 + 5 * us
      printf "tile,%d,1,%d,%d,%d\n", c, t0 + 6 * us, t0 + 9 * us, t0 + 8 * us
    } }' > "\$NF_TRACE_PRENORM.v\$v.csv"
done
EOP
chmod +x "$1"
echo "ptxas info    : Used 168 registers, used 16 barriers" > "$2"
EOT
chmod +x "$t/fused/tools/build_probe.sh"
for n in fast slow silent broken; do echo "--- a/fused/x.cu" > "$dir/$n.diff"; done
ts() { # ARGS: trace_shapes.sh's exit status in rc, its output in $dir/out
  rc=0
  (cd "$t" && PATH="$dir/bin:$PATH" NF_COMMIT=test OUT="$dir/out_dir" fused/tools/trace_shapes.sh "$@") \
    > "$dir/out" 2>&1 || rc=$?
}

gpu "GPU 0: NVIDIA H200"
export NF_PROBE_VARIANTS=2,5
ts; expect_rc 2 "no shape"
ts fast="$dir/fast.diff"; expect_rc 2 "a diff but no shape"
NF_PROBE_VARIANTS='' ts 512x1024x256; expect_rc 2 "NF_PROBE_VARIANTS unset"
expect_out "^trace_shapes: NF_PROBE_VARIANTS: '' is not a list" "$dir/out" "NF_PROBE_VARIANTS unset"
ts 512x1024; expect_rc 2 "a shape of two numbers"
expect_out "^trace_shapes: '512x1024' is neither a shape MxKxN nor NAME=FILE.diff$" "$dir/out" "a bad shape named"
ts base="$dir/fast.diff" 512x1024x256; expect_rc 2 "a diff named base"
ts fast="$dir/missing.diff" 512x1024x256; expect_rc 2 "a missing diff"
expect_out "^trace_shapes: fast: no readable diff" "$dir/out" "a missing diff"

gpu ""
ts 512x1024x256; expect_rc 77 "no GPU"
expect_out "^trace_shapes: no GPU visible" "$dir/out" "no GPU"

gpu "GPU 0: NVIDIA H200"
ts fast="$dir/fast.diff" slow="$dir/slow.diff" 512x1024x256 1024x512x512; expect_rc 0 "two diffs, two shapes"
o="$dir/out_dir"
for b in base fast slow; do
  for s in 512x1024x256 1024x512x512; do
    for v in 2 5; do
      [ -f "$o/$b/$s/trace.v$v.csv.gz" ] || { echo "FAIL: no $b/$s/trace.v$v.csv.gz"; status=1; }
    done
    expect_out "^# command: scripts/prenorm_trace.py trace\.\*\.csv \(after .*NF_TRACE_M=${s%%x*} " \
      "$o/$b/$s/trace_summary.txt" "$b $s: the summary's header"
    expect_out "^probe --shape $s: check \.\.\. ok$" "$o/$b/$s/probe_log.txt" "$b $s: the probe's log"
  done
  expect_out "Used 168 registers" "$o/$b/build.txt" "$b: the ptxas report"
  expect_out "^SASS: 2 HGMMA, 0 LDL/STL, 1 UTMALDG$" "$o/$b/build.txt" "$b: the SASS counts"
done
[ -f "$o/fast/fast.diff" ] || { echo "FAIL: the diff is not kept beside its traces"; status=1; }
expect_out "NF_PROBE_PATCH=.*slow\.diff NF_PROBE_VARIANTS=2,5 NF_TRACE_PRENORM" "$o/slow/1024x512x512/trace_summary.txt" \
  "a diff's summary names the diff"
expect_out "^span \(first entry to last exit\) +20\.00 us$" "$o/base/512x1024x256/trace_summary.txt" "the tree's span"
expect_out "^epilogue, last wgmma to stores +min +1\.00 " "$o/base/512x1024x256/trace_summary.txt" "the epilogues read"
expect_out "^== 1024x512x512$" "$dir/out" "each shape's block"
expect_out "^fast  .*v5\.csv +15\.00 " "$dir/out" "fast's traces side by side"
expect_out "^slow  .*v2\.csv +25\.00 " "$dir/out" "slow's traces side by side"
NF_PROBE_VARIANTS=8 ts 512x1024x256; expect_rc 0 "one variant"
expect_out "^base  span \(first entry to last exit\) +20\.00 us$" "$dir/out" "one trace's span in the last block"

rm -rf "$o"
ts silent="$dir/silent.diff" 512x1024x256; expect_rc 1 "a probe that writes no trace"
expect_out "^trace_shapes: 512x1024x256, silent: the probe wrote no trace$" "$dir/out" "the missing trace named"
[ -f "$o/base/512x1024x256/trace.v2.csv.gz" ] || { echo "FAIL: the tree's traces not kept beside a silent build"; status=1; }
rm -rf "$o"
ts fast="$dir/fast.diff" broken="$dir/broken.diff" 512x1024x256; expect_rc 1 "a build that fails"
expect_out "^trace_shapes: the broken build failed \(broken/build.txt\)$" "$dir/out" "the failed build named"
expect_out "^stand-in: broken.diff does not build$" "$o/broken/build.txt" "the failed build's messages kept"
[ ! -d "$o/base/512x1024x256" ] || { echo "FAIL: a shape was traced after a build failed"; status=1; }
exit $status
