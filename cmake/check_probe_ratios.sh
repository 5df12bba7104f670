#!/bin/sh
# check_probe_ratios.sh SCRIPT: scripts/probe_ratios.py on probe tables whose
# ratios are known.  Table a: variant v1 0.100 ms everywhere, v2 0.090 on one
# shape and 0.120 on the other two, v3 not run (inf), cublasLt 0.100; the
# table sits between the probe's check lines and its footnote, as the probe
# prints it.  Table b: the same shapes, v2 0.080 everywhere.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_probe_ratios "$@"
hdr='M x K x N                 v1            v2            v3     auto cublasLt roofline          best b/gemm TFLOP/s  %roof'
cat > "$dir/a.txt" <<EOT
check M=65536 K=256 N=256 pad=0 v1: max 0.9 ulp  ok

$hdr
65536x256x256         0.1000        0.0900           inf   0.0900   0.1000   0.0500            v2  0.900     300   50.0
65536x256x512         0.1000        0.1200           inf   0.1000   0.1000   0.0500            v1  1.000     300   50.0
524288x256x256        0.1000        0.1200           inf   0.1000   0.1000   0.0500            v1  1.000     300   50.0
(ms, medians of 15 timed in turn, L2 flushed; b/gemm = best fused variant / cuBLASLt GEMM alone)
PASS: 0 check failure(s)
EOT
sed -e 's/0\.0900  /0.0800  /; s/0\.1200  /0.0800  /' "$dir/a.txt" > "$dir/b.txt"
run_script v2 v1 "$dir/a.txt"
expect "$out" '^65536x256x256 +0\.900$' "one run, a shape where v2 is faster"
expect "$out" '^524288x256x256 +1\.200$' "one run, a shape where v2 is slower"
expect "$out" '^run 1 \(.*a\.txt\): median 1\.200 over 3 shapes, 0\.900-1\.200, under 1 on 1$' "the run's line"
expect_rc 0 "a readable table"
run_script v2 v1 "$dir/a.txt" "$dir/b.txt"
expect "$out" '^65536x256x512 +1\.200 +0\.800$' "two runs side by side"
expect "$out" '^run 2 \(.*b\.txt\): median 0\.800 over 3 shapes, 0\.800-0\.800, under 1 on 3$' "the second run's line"
run_script auto best:v1,v2 "$dir/a.txt"
expect "$out" '^65536x256x256 +1\.000$' "best of two columns: the faster, v2"
expect "$out" '^65536x256x512 +1\.000$' "best of two columns: the faster, v1"
run_script v3 v1 "$dir/a.txt"
expect "$out" '^65536x256x256 +-$' "a variant not run (inf) is missing, not a ratio"
expect "$out" '^run 1 \(.*\): no shape with both times$' "a run of missing times"
run_script v1 best:v1,v3 "$dir/a.txt"
expect "$out" '^65536x256x256 +-$' "the best of columns one of which is missing is missing"
run_script v2 v1 --shapes '^524288x' "$dir/a.txt"
expect "$out" '^run 1 \(.*\): median 1\.200 over 1 shapes' "--shapes keeps the matching shapes"
if printf '%s\n' "$out" | grep -q '^65536x'; then echo "FAIL: --shapes kept a shape it does not match"; status=1; fi
# --by-shape: a line per shape over the runs (v2 / v1 at 65536x256x256: 0.900 and 0.800)
run_script v2 v1 --by-shape "$dir/a.txt" "$dir/b.txt"
expect "$out" '^65536x256x256 +median 0\.850, 0\.800-0\.900, over 1 in 0 of 2$' "--by-shape: a shape under 1 in both runs"
expect "$out" '^524288x256x256 +median 1\.000, 0\.800-1\.200, over 1 in 1 of 2$' "--by-shape: a shape over 1 in one run"
run_script v3 v1 --by-shape "$dir/a.txt"
expect "$out" '^65536x256x512 +no run with both times$' "--by-shape: a shape never timed"
run_script v2 v1 "$dir/a.txt"
if printf '%s\n' "$out" | grep -q 'median .*over 1 in'; then echo "FAIL: per-shape lines without --by-shape"; status=1; fi
# --bench: the bench's fused/gemm beside auto / cublasLt (a.txt: 0.900, 1.000, 1.000), two bench
# runs: 65536x256x256 0.950 and 0.970 (median 0.960), 65536x256x512 1.000 and 1.012 (1.006), and
# 524288x256x256 in neither; a fused (not summary) case of a shape must not be read
cat > "$dir/b1.json" <<EOT
{"cases": [
 {"op": "prenorm_fwd", "impl": "fused", "shape": {"M": 65536, "K": 256, "N": 256}, "time_us": 50},
 {"op": "prenorm_fwd", "impl": "summary", "shape": {"M": 65536, "K": 256, "N": 256}, "t_fused_us": 95, "t_gemm_us": 100},
 {"op": "prenorm_fwd", "impl": "summary", "shape": {"M": 65536, "K": 256, "N": 512}, "t_fused_us": 100, "t_gemm_us": 100}]}
EOT
sed -e 's/"t_fused_us": 95,/"t_fused_us": 97,/; s/"t_fused_us": 100,/"t_fused_us": 101.2,/' "$dir/b1.json" > "$dir/b2.json"
run_script auto cublasLt --by-shape "$dir/a.txt" --bench "$dir/b1.json" "$dir/b2.json"
expect "$out" '^65536x256x256 +median 0\.900, 0\.900-0\.900, over 1 in 0 of 1; bench 0\.960 \(0\.950-0\.970, 2 runs\), probe - bench -0\.060$' \
  "--bench: the bench's median and range beside the probe's, and the difference"
expect "$out" '^65536x256x512 +median 1\.000, .*; bench 1\.006 \(1\.000-1\.012, 2 runs\), probe - bench -0\.006$' "--bench: another shape"
expect "$out" '^524288x256x256 +median 1\.000, .*; no bench reading$' "--bench: a shape the bench did not time"
expect "$out" '^# probe - bench over 2 shapes: median size 0\.033, largest 0\.060, within 0\.01 on 1$' "--bench: the closing line"
expect_rc 0 "--bench on readable runs"
expect_error 2 "--bench without --by-shape" "^probe_ratios: --bench sets the bench's fused/gemm beside auto / cublasLt --by-shape only\$" \
  auto cublasLt "$dir/a.txt" --bench "$dir/b1.json"
expect_error 2 "--bench over other columns" "^probe_ratios: --bench sets" v2 v1 --by-shape "$dir/a.txt" --bench "$dir/b1.json"
expect_error 2 "--bench on a file that is no bench run" "^probe_ratios: .*a\.txt: not JSON" \
  auto cublasLt --by-shape "$dir/a.txt" --bench "$dir/a.txt"
printf '{"cases": [{"op": "gemm", "impl": "vendor", "shape": {"M": 1, "K": 8, "N": 8}, "time_us": 1}]}' > "$dir/nogemm.json"
expect_error 2 "--bench on a run without a pre-norm summary" "^probe_ratios: .*nogemm\.json: no pre-norm summary case with t_fused_us and t_gemm_us\$" \
  auto cublasLt --by-shape "$dir/a.txt" --bench "$dir/nogemm.json"
# --den-from: DEN from another run, pairwise (a patched build over its base)
run_script v2 v2 "$dir/b.txt" --den-from "$dir/a.txt"
expect "$out" '^65536x256x256 +0\.889$' "--den-from: v2 of b over v2 of a"
expect "$out" '^65536x256x512 +0\.667$' "--den-from: another shape"
expect "$out" '^run 1 \(.*b\.txt over .*a\.txt\): median 0\.667 over 3 shapes, 0\.667-0\.889, under 1 on 3$' \
  "--den-from: the run's line names both files"
head -n 4 "$dir/a.txt" > "$dir/short.txt"; tail -n 2 "$dir/a.txt" >> "$dir/short.txt"
run_script v1 v1 "$dir/a.txt" --den-from "$dir/short.txt"
expect "$out" '^65536x256x512 +-$' "--den-from: a shape the base run lacks is missing"
expect_error 2 "--den-from with fewer files than PROBE" "^probe_ratios: --den-from names 1 files for 2 PROBE files" \
  v1 v1 "$dir/a.txt" "$dir/b.txt" --den-from "$dir/a.txt"
expect_error 2 "--den-from: a column the base lacks" "^probe_ratios: .*short\.txt: no column 'v9'" \
  v1 v9 "$dir/a.txt" --den-from "$dir/short.txt"
# --timed: the variant columns a run timed (v3 is inf everywhere; auto, cublasLt, roofline are not variants)
run_script --timed "$dir/a.txt"
expect "$out" '^v1 v2$' "--timed: the variants with a time"
expect_rc 0 "--timed on a readable table"
expect_error 2 "--timed without its file" "^probe_ratios: --timed takes one PROBE\.txt\$" --timed
expect_error 2 "--timed on a file without a table" "^probe_ratios: .*none2\.txt: No such file" --timed "$dir/none2.txt"
# what it refuses: one line naming the file and what is wrong, exit 2
printf 'no table here\n' > "$dir/none.txt"
expect_error 2 "a file without a probe table" "^probe_ratios: .*none\.txt: no probe table" v1 v2 "$dir/none.txt"
expect_error 2 "a column the table lacks" "^probe_ratios: .*a\.txt: no column 'v9' \(columns: v1, v2, v3, auto, cublasLt, roofline\)\$" \
  v9 v1 "$dir/a.txt"
expect_error 2 "a best: naming a column the table lacks" "^probe_ratios: .*a\.txt: no column 'v9'" v1 best:v2,v9 "$dir/a.txt"
expect_error 2 "a missing file" "^probe_ratios: .*missing\.txt: No such file or directory\$" v1 v2 "$dir/missing.txt"
sed -e 's/^65536x256x512         0\.1000/65536x256x512         0.1O00/' "$dir/a.txt" > "$dir/typo.txt"
expect_error 2 "a cell that is no time" "^probe_ratios: .*typo\.txt: shape 65536x256x512: column v1 reads '0\.1O00', not a time\$" \
  v1 v2 "$dir/typo.txt"
printf '%s\n(ms, medians)\n' "$hdr" > "$dir/empty.txt"
expect_error 2 "a table without rows" "^probe_ratios: .*empty\.txt: a probe table without rows\$" v1 v2 "$dir/empty.txt"
exit "$status"
