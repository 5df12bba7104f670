#!/bin/sh
# check_torch_join.sh SCRIPT: scripts/torch_baseline.py --join on files whose
# numbers are known (no GPU, no PyTorch): three shapes timed by torch (one both
# eager and compiled) and a bench whose fused cases cover that one (its ref
# case, its GEMM case and a fused case that failed are to be ignored).  Checks
# the ratio table, the summary lines, and that a bench matching nothing, or
# --join without --against, is an error; so are files that are no bench run,
# and a case whose shape lacks a dimension is joined with nothing.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_torch_join "$@"
cat > "$dir/torch.json" <<'JSON'
{"gpu": "test", "cases": [
 {"op": "prenorm_fwd", "impl": "torch_eager", "shape": {"M": 64, "K": 256, "N": 512}, "time_us": 300.0},
 {"op": "prenorm_fwd", "impl": "torch_compile", "shape": {"M": 64, "K": 256, "N": 512}, "time_us": 75.0},
 {"op": "prenorm_fwd", "impl": "torch_eager", "shape": {"M": 64, "K": 512, "N": 512}, "time_us": 500.0},
 {"op": "prenorm_fwd", "impl": "torch_eager", "shape": {"M": 64, "K": 512, "N": 1024}, "time_us": 700.0}]}
JSON
cat > "$dir/bench.json" <<'JSON'
{"gpu": "test", "date": "2026-11-29T00:00:00Z", "command": "normfuse bench", "cases": [
 {"op": "prenorm_fwd", "impl": "fused", "shape": {"M": 64, "K": 256, "N": 512}, "time_us": 50.0},
 {"op": "prenorm_fwd", "impl": "ref", "shape": {"M": 64, "K": 512, "N": 512}, "time_us": 90.0},
 {"op": "prenorm_fwd", "impl": "fused", "shape": {"M": 64, "K": 512, "N": 1024}, "time_us": null},
 {"op": "gemm", "impl": "cublaslt", "shape": {"M": 64, "K": 256, "N": 512}, "time_us": 40.0}]}
JSON
cat > "$dir/none.json" <<'JSON'
{"gpu": "test", "date": "2026-11-29T00:00:00Z", "command": "normfuse bench", "cases": []}
JSON
cd "$dir"
out="$("$py" "$script" --join torch.json --against bench.json)"
expect "$out" '^M=64 K=256 N=512 +300\.0 +75\.0 +50\.0 +6\.00 +1\.50$' "the joined shape's row"
expect "$out" '^torch_eager: 6\.00-6\.00x the fused kernel.s time over 1 shapes$' "eager summary (one shape joined)"
expect "$out" '^torch_compile: 1\.50-1\.50x' "compile summary"
if printf '%s\n' "$out" | grep -q 'K=512'; then echo "FAIL: a shape without a fused time was joined"; status=1; fi
if "$py" "$script" --join torch.json --against none.json > /dev/null 2>&1; then
  echo "FAIL: a bench matching no torch case was accepted"; status=1
fi
if "$py" "$script" --join torch.json > /dev/null 2>&1; then
  echo "FAIL: --join without --against was accepted"; status=1
fi
# files that are no bench run, as --against or as --join: one line naming the
# file and what is wrong, exit 2, never a traceback
refuses_bad_runs torch_baseline --join torch.json --against
refuses_bad_runs torch_baseline --against bench.json --join
sed 's/, "time_us": 75.0//' torch.json > untimed.json
expect_error 2 "a torch case without a time" '^torch_baseline: untimed\.json: case 2 \(prenorm_fwd\): time_us is missing, not a number$' \
  --join untimed.json --against bench.json
# a case whose shape lacks N, in either file, is joined with nothing
sed 's/"K": 256, "N": 512}, "time_us": 50.0/"K": 256}, "time_us": 50.0/' bench.json > no_n.json
expect_error 1 "a fused case without N" '^no fused pre-norm case of no_n\.json matches a torch case$' \
  --join torch.json --against no_n.json
sed 's/"K": 256, "N": 512}, "time_us": 300.0/"K": 256}, "time_us": 300.0/' torch.json > torch_no_n.json
run_script --join torch_no_n.json --against bench.json
expect "$out" '^torch_compile: 1\.50-1\.50x' "a torch case without N left out"
if printf '%s\n' "$out" | grep -q '^torch_eager:'; then echo "FAIL: a torch case without N was joined"; status=1; fi
exit $status
