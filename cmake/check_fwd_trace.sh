#!/bin/sh
# check_fwd_trace.sh SCRIPT: scripts/fwd_trace.py on traces whose numbers are
# known.  Five one-row CTAs on two SMs: SM 5 runs CTAs 0, 2 and 4 one after
# another (entering at 0, 10 and 20 us), SM 9 CTAs 1 and 3 (0 and 10 us); each
# takes 6 us to its statistics and 4 more to its stores; a sixth CTA recorded
# nothing.  So the span is 30 us, SM 9 is done at 20, and CTA 4 alone runs on
# for the last 10 us.  The first round is CTAs 0 and 1 (entered before the first
# stores, at 10 us), and from its end to SM 9's last store (10 to 20 us) CTAs 2
# and 3 store: 0.2 rows/us.  A second trace is the same with CTA 4 2 us slower.
# Then files that are no such trace, each named with what is wrong.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_fwd_trace "$@"
"$py" - "$dir/a.csv" "$dir/b.csv" <<'PY'
import sys
def trace(path, slow):
    lines = ["kernel,cta,sm,t0,t1,t2,op=layernorm_fwd,grid=6,cta_threads=256,rows_per_cta=1,M=6,n=16384"]
    base = 1000000
    for cta, sm, start in ((0, 5, 0), (1, 9, 0), (2, 5, 10), (3, 9, 10), (4, 5, 20)):
        extra = slow if cta == 4 else 0
        t0 = base + start * 1000
        lines.append("fwd,%d,%d,%d,%d,%d" % (cta, sm, t0, t0 + 6000, t0 + 10000 + extra * 1000))
    lines.append("fwd,5,0,0,0,0")
    open(path, "w").write("\n".join(lines) + "\n")
trace(sys.argv[1], 0)
trace(sys.argv[2], 2)
PY
run_script "$dir/a.csv"
expect_rc 0 "a good trace"
expect "$out" 'layernorm_fwd M=6 n=16384, 6 CTAs of 256 threads \(1 rows each\), 5 recorded, on 2 SMs$' "the launch named"
expect "$out" '^span \(first entry to last store\) +30\.00 us$' "the span"
expect "$out" '^per CTA, entry to statistics +min +6\.00  med +6\.00  max +6\.00$' "to the statistics"
expect "$out" '^per CTA, statistics to stores +min +4\.00  med +4\.00  max +4\.00$' "to the stores"
expect "$out" '^CTAs per SM +min 2  max 3$' "CTAs per SM"
expect "$out" '^SM.s last store +min +20\.00  med +25\.00  max +30\.00$' "the SMs' ends"
expect "$out" '^tail \(first SM done to the end\) +10\.00 us, 1 CTAs still running then$' "the tail"
expect "$out" '^first round: 2 CTAs$' "the first round"
expect "$out" '^  their statistics +min +6\.00  med +6\.00  max +6\.00$' "the first round's statistics"
expect "$out" '^  their stores +min +10\.00  med +10\.00  max +10\.00$' "the first round's stores"
expect "$out" '^steady rate \(10\.00 to 20\.00 us\) +0\.20 rows/us$' "the steady rate"
run_script --window 5 "$dir/a.csv"
expect "$out" '^  0\.0 0\.0 0\.4 0\.0 0\.4 0\.0 0\.2$' "rows stored per window"
expect_exit 2 "a window of 0 us" --window 0 "$dir/a.csv"
gzip -c "$dir/a.csv" > "$dir/a.csv.gz"
run_script "$dir/a.csv.gz"
expect "$out" '^span \(first entry to last store\) +30\.00 us$' "a gzipped trace"
run_script "$dir/a.csv" "$dir/b.csv"
expect "$out" 'b\.csv +32\.00 +12\.00 +10\.00 +6\.00 +10\.00 +0\.20$' "several traces side by side"
printf 'kernel,cta,sm,t0,t1,t2,t3,groups,op=layernorm_bwd,grid=1,cluster=1,cta_threads=512,M=1,n=8\n' > "$dir/bwd.csv"
expect_exit 2 "a backward trace" "$dir/bwd.csv"
# a header field that is no number, a gzip file cut short: named, exit 2
sed '1s/rows_per_cta=1/rows_per_cta=one/' "$dir/a.csv" > "$dir/header.csv"
expect_error 2 "a header's rows_per_cta not a number" \
  "^fwd_trace: .*header\\.csv: the header's rows_per_cta, one, is not an integer\$" "$dir/header.csv"
head -c 40 "$dir/a.csv.gz" > "$dir/cut.csv.gz"
expect_error 2 "a gzip file cut short" '^fwd_trace: .*cut\.csv\.gz: a gzip file cut short$' "$dir/cut.csv.gz"
exit $status
