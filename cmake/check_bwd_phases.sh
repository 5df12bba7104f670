#!/bin/sh
# check_bwd_phases.sh SCRIPT: scripts/bwd_phases.py on a trace whose phases
# are known.  Four row CTAs over 10 row groups (3, 3, 2, 2 each), all entering
# at once: first group done 5 us later, 3 us per group after it, a 2 us column
# write; four reducer CTAs, two of which recorded nothing (db not asked for).
# Then --bench files that are no bench run, or hold no case of the trace.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_bwd_phases "$@"
"$py" - "$dir/trace.csv" "$dir/bench.json" <<'PY'
import json, sys
lines = ["kernel,cta,sm,t0,t1,t2,t3,groups,op=layernorm_bwd,grid=4,cluster=2,cta_threads=512,M=10,n=16384"]
for c, groups in enumerate((3, 3, 2, 2)):
    t0 = 1000; t1 = t0 + 5000; t2 = t1 + (groups - 1) * 3000; t3 = t2 + 2000
    lines.append("row,%d,%d,%d,%d,%d,%d,%d" % (c, 100 + c, t0, t1, t2, t3, groups))
for c in range(4):
    lines.append("sum,%d,%d,%d,%d,%d,," % ((c, 7, 1500, 14500, 16000) if c < 2 else (c, 0, 0, 0, 0)))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
case = {"op": "layernorm_bwd", "impl": "ref", "shape": {"M": 10, "n": 16384}, "bytes": 4e6, "time_us": 20.0}
json.dump({"copy_bw_tbs": 0.4, "cases": [case]}, open(sys.argv[2], "w"))
PY
run_script "$dir/trace.csv" --bench "$dir/bench.json"
expect_rc 0 "a good trace"
expect "$out" 'layernorm_bwd M = 10, n = 16384, grid 4, cluster 2, 512 threads per CTA$' "the launch named"
expect "$out" '^   bench \(untraced\): 20\.0 us, 0\.500 of copy bandwidth$' "the untraced time"
expect "$out" '^   first row group done +min +5\.00  med +5\.00  max +5\.00$' "first group"
expect "$out" '^   per row group after it +min +3\.00  med +3\.00  max +3\.00  \(row groups per CTA 2-3\)$' "per group"
expect "$out" '^   row loop done +min +8\.00  med +9\.50  max +11\.00$' "loop ends"
expect "$out" '^   column write \(duration\) +min +2\.00  med +2\.00  max +2\.00$' "the write"
expect "$out" '^     with +3 row groups \( +2 CTAs\): done min +13\.00' "by row groups"
expect "$out" '^   reducer past PDL wait +min +13\.50  med +13\.50  max +13\.50$' "the unrecorded reducer CTAs left out"
expect "$out" '^   span, first row CTA.s entry to the last end: 15\.00 us$' "the span"
printf 'cta,sm,start_ns,end_ns\n0,1,2,3\n' > "$dir/old.csv"
expect_exit 2 "a file that is no such trace" "$dir/old.csv"
# traces cut short or with a header field that is no number: named, exit 2
head -2 "$dir/trace.csv" > "$dir/short.csv"
printf 'row,4,104\n' >> "$dir/short.csv"
expect_error 2 "a record short of fields" '^bwd_phases: .*short\.csv: a row line short of fields: row,4,104$' "$dir/short.csv"
sed '1s/M=10/M=ten/' "$dir/trace.csv" > "$dir/header.csv"
expect_error 2 "a header's M not a number" "^bwd_phases: .*header\\.csv: the header's M, ten, is not an integer\$" "$dir/header.csv"
gzip -c "$dir/trace.csv" | head -c 40 > "$dir/cut.csv.gz"
expect_error 2 "a gzip file cut short" '^bwd_phases: .*cut\.csv\.gz: a gzip file cut short$' "$dir/cut.csv.gz"
# a --bench file that is no bench run: one line naming it and what is wrong, exit 2
refuses_bad_runs bwd_phases "$dir/trace.csv" --bench
printf '{"copy_bw_tbs": 0.4, "cases": [{"op": "layernorm_bwd", "impl": "ref", "shape": {"M": 10, "n": 16384}, "time_us": 20.0}]}' \
  > "$dir/nobytes.json"
expect_error 2 "a bench case without bytes" '^bwd_phases: .*nobytes\.json: case 1 \(layernorm_bwd\): bytes is missing, not a number$' \
  "$dir/trace.csv" --bench "$dir/nobytes.json"
# a bench case whose shape names n but not M is not the trace's case: left out
printf '{"cases": [{"op": "layernorm_bwd", "impl": "ref", "shape": {"n": 16384}, "time_us": 20.0, "bytes": 1}]}' > "$dir/nom.json"
run_script "$dir/trace.csv" --bench "$dir/nom.json"
expect_rc 0 "a bench case without M"
if printf '%s\n' "$out" | grep -q 'bench (untraced)'; then echo "FAIL: a bench case without M was read"; status=1; fi
exit $status
