#!/bin/sh
# check_prenorm_trace.sh SCRIPT: scripts/prenorm_trace.py on traces whose numbers
# are known.  Three CTAs on three SMs, the first entering at 0 us: CTA 0 (SM 4)
# runs tiles of 10, 6 and 6 us from 0 and exits at 23; CTA 1 (SM 7) tiles of 9
# and 6 from 0, exits at 16; CTA 2 (SM 9) enters at 1, tiles of 10 and 6, exits
# at 18; a fourth CTA recorded nothing.  So the span is 23 us, the tail 7 (CTAs 0
# and 2 still running at 16), the SMs idle 7 + 5 of 3 x 23 us (17.4 %), and the
# last out is CTA 0 with the one third tile.  A second trace is the same with CTA
# 0's last tile 2 us slower.  Those two are of the first format, with no mainloop
# end; a third is the first with it, every tile's epilogue 1 us but CTA 1's first,
# 3 us: 9 us of the tiles' 53 (17.0 %), the mainloops 9, 5, 5, 6, 5, 9, 5 us.  Then
# files that are no such trace, each named with what is wrong.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_prenorm_trace "$@"
"$py" - "$dir/a.csv" "$dir/b.csv" "$dir/c.csv" <<'PY'
import sys
def trace(path, slow, epilogue=None):
    us = lambda t: 5000000 + int(t * 1000)
    lines = ["kind,cta,sm,t0,t1,n,op=prenorm_fwd,variant=coop_n256_s4,grid=4,M=512,K=1024,N=256,BN=256"]
    for cta, sm, entry, lengths in ((0, 4, 0, (10, 6, 6 + slow)), (1, 7, 0, (9, 6)), (2, 9, 1, (10, 6))):
        t, tiles = entry, []
        for i, n in enumerate(lengths):
            tiles.append("tile,%d,%d,%d,%d" % (cta, i, us(t), us(t + n)))
            if epilogue:
                tiles[-1] += ",%d" % us(t + n - epilogue(cta, i))
            t += n
        lines.append("cta,%d,%d,%d,%d,%d" % (cta, sm, us(entry), us(t + 1), len(lengths)))
        lines += tiles
    lines.append("cta,3,0,0,0,0")
    open(path, "w").write("\n".join(lines) + "\n")
trace(sys.argv[1], 0)
trace(sys.argv[2], 2)
trace(sys.argv[3], 0, lambda cta, i: 3 if (cta, i) == (1, 0) else 1)
PY
run_script "$dir/a.csv"
expect_rc 0 "a good trace"
expect "$out" 'prenorm_fwd coop_n256_s4 M=512 K=1024 N=256 \(BN 256\), 4 CTAs, 3 recorded, on 3 SMs$' "the launch named"
expect "$out" '^span \(first entry to last exit\) +23\.00 us$' "the span"
expect "$out" '^first tile of a CTA, to its stores +min +9\.00  med +10\.00  max +10\.00$' "the first tiles"
expect "$out" '^later tiles, start to stores +min +6\.00  med +6\.00  max +6\.00$' "the later tiles"
expect "$out" '^first tile over a later one +4\.00 us \(medians; 16 k-tiles of 64 a tile\)$' "the first tile's excess"
expect "$out" "^each CTA's median tile +min +6\.00  med +7\.50  max +8\.00$" "each CTA's median tile"
expect "$out" "^CTAs with +2 tiles: +2, their exits' median +17\.00 us$" "the CTAs with two tiles"
expect "$out" "^CTAs with +3 tiles: +1, their exits' median +23\.00 us$" "the CTA with three"
expect "$out" '^exits +min +16\.00  med +18\.00  max +23\.00$' "the exits"
expect "$out" '^tail \(first exit to the last\) +7\.00 us, 2 CTAs still running then$' "the tail"
expect "$out" '^idle after exits +17\.4 % of grid x span$' "the idle share"
expect "$out" "^last out: CTA 0 on SM 4, 3 tiles, median tile 6\.00 us \(the median CTA's 7\.50\)$" "the last out"
gzip -c "$dir/a.csv" > "$dir/a.csv.gz"
run_script "$dir/a.csv.gz"
expect "$out" '^span \(first entry to last exit\) +23\.00 us$' "a gzipped trace"
run_script "$dir/a.csv" "$dir/b.csv"
if printf '%s\n' "$out" | grep -qE '^(epilogue|mainloop)'; then
  echo "FAIL: a trace with no mainloop end printed a mainloop or an epilogue"; status=1
fi
expect "$out" 'b\.csv +25\.00 +9\.00 +21\.3 +6\.00 +-$' "several traces side by side"
run_script "$dir/c.csv" "$dir/a.csv"
expect "$out" '^mainloop, start to last wgmma +min +5\.00  med +5\.00  max +9\.00$' "the mainloops"
expect "$out" '^epilogue, last wgmma to stores +min +1\.00  med +1\.00  max +3\.00$' "the epilogues"
expect "$out" "^epilogues' share of the tiles' time +17\.0 %$" "the epilogues' share"
expect "$out" 'c\.csv +23\.00 +7\.00 +17\.4 +6\.00 +17\.0$' "the epilogues' share side by side"
printf 'kernel,cta,sm,t0,t1,t2,op=layernorm_fwd,grid=1,cta_threads=256,rows_per_cta=1,M=1,n=8\n' > "$dir/fwd.csv"
expect_error 2 "a norm forward trace" '^prenorm_trace: .*fwd\.csv: not a pre-norm GEMM trace \(no header line\)$' "$dir/fwd.csv"
sed '2s/^cta,0,4,/row,0,4,/' "$dir/a.csv" > "$dir/kind.csv"
expect_error 2 "a record of no known kind" '^prenorm_trace: .*kind\.csv: neither a cta nor a tile record: row,0,4,' "$dir/kind.csv"
sed '2d' "$dir/a.csv" > "$dir/orphan.csv"
expect_error 2 "tiles without their CTA" '^prenorm_trace: .*orphan\.csv: tiles of CTA 0, which has no cta record$' "$dir/orphan.csv"
sed '1s/K=1024/K=many/' "$dir/a.csv" > "$dir/header.csv"
expect_error 2 "a header's K not a number" "^prenorm_trace: .*header\\.csv: the header's K, many, is not an integer\$" "$dir/header.csv"
exit $status
