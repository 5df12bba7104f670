#!/bin/sh
# check_bench_json.sh NORMFUSE: a short `normfuse bench` run (the forward RMSNorm
# of the norm grid at M n = 2^26 and the fused post-norm GEMM's cases, 7
# repetitions) writes the JSON that reports/ and the goal scripts read: the
# run's fields, each case's op, impl, shape, time_us, bytes and flops; every
# timed case with status NF_OK and a spread that brackets its median (0 < min
# <= p10 <= median <= p90 <= max); every case without a time with the status
# and message of its failure (the fused post-norm GEMM, not built yet, is one
# today: its status once read NF_OK, the timing and the status having been
# passed as arguments of one call); then filters that select no case (exit 2,
# no report).  Exit 77 (skipped) without a GPU or python3.
set -eu
cli="$1"
py="${PYTHON:-python3}"
command -v "$py" > /dev/null || { echo "SKIP: no $py"; exit 77; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
rc=0
"$cli" bench --grid norm,postnorm --op rmsnorm_fwd,postnorm_fwd --impl ref,fused --quick --reps 7 \
  --json "$dir/bench.json" \
  > "$dir/bench.out" 2>&1 || rc=$?
if [ "$rc" = 77 ]; then cat "$dir/bench.out"; echo "SKIP: no GPU"; exit 77; fi
if [ "$rc" != 0 ]; then cat "$dir/bench.out"; echo "FAIL: normfuse bench exited $rc"; exit 1; fi
"$py" - "$dir/bench.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
bad = [k for k in ("gpu", "date", "command", "copy_bw_tbs", "mm_peak_tflops", "cases") if k not in run]
cases = run.get("cases", [])
timed = failed = 0
if not cases:
    bad.append("no cases")
for c in cases:
    missing = [k for k in ("op", "impl", "shape", "time_us", "bytes", "flops") if k not in c]
    if missing:
        bad.append("%s: no %s" % (c.get("op"), ", ".join(missing)))
        continue
    if c["impl"] == "summary":  # the pre-norm grid's derived rows, read by prenorm_goals.py
        continue
    if c["time_us"] is None:  # a failed case names its failure
        if c.get("status") in (None, "NF_OK") or not c.get("error"):
            bad.append("%s %s %s: no time, status %s, error %r" % (c["op"], c["impl"], c["shape"],
                                                                 c.get("status"), c.get("error")))
        failed += 1
        continue
    timed += 1
    spread = [c.get(k) for k in ("time_min_us", "time_p10_us", "time_us", "time_p90_us", "time_max_us")]
    if c.get("status") != "NF_OK" or None in spread or \
            not 0 < spread[0] <= spread[1] <= spread[2] <= spread[3] <= spread[4]:
        bad.append("%s %s %s: status %s, min, p10, median, p90, max = %s" % (c["op"], c["impl"], c["shape"],
                                                                          c.get("status"), spread))
if not timed:
    bad.append("no timed case")
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
print("PASS: %d timed cases, each with its spread around the median; %d failed, each naming why"
      % (timed, failed))
PY
# Filters that select no case are a mistake named as one (exit 2), with no report left behind:
# the bench used to time nothing and write an empty report with exit 0.
rc=0
"$cli" bench --grid attention --op rmsnorm_fwd --json "$dir/none.json" > "$dir/none.out" 2>&1 || rc=$?
if [ "$rc" != 2 ] || ! grep -q "selects no case" "$dir/none.out" || [ -e "$dir/none.json" ]; then
  cat "$dir/none.out"
  echo "FAIL: --grid attention --op rmsnorm_fwd: exit $rc (want 2, 'selects no case', no none.json)"
  exit 1
fi
echo "PASS: --grid attention --op rmsnorm_fwd selects no case: exit 2, no report"
