#!/bin/sh
# check_clock_summary.sh SCRIPT: scripts/clock_summary.py on a clock log whose
# numbers are known: gpu_env.sh's header, nvidia-smi's column line, one idle
# sample (left out), a sample with a field nvidia-smi could not read (left
# out) and ten busy ones, SM clocks 1500 to 1900 by 100 and five at 1980,
# power 100 to 190 W, at most 60 C, three held down by the power cap
# (0x4) and one of them also by hw slowdown (0x8).  Then --help, and
# files it cannot read: one line naming the file and why, exit 2.
set -eu
# shellcheck source=cmake/check_lib.sh
. "$(dirname "$0")/check_lib.sh" # $py, status, expect, script_and_scratch
script_and_scratch check_clock_summary "$@"
{
  printf '# clocks.csv\n# gpu: test\n\n'
  printf 'timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, clocks_event_reasons.active\n'
  printf '2026/11/30 04:35:18.000, 345, 3201, 70.00, 30, 0x0000000000000001\n'
  printf '2026/11/30 04:35:18.050, 1980, 3201, [N/A], 40, 0x0000000000000000\n'
  i=0
  for sm in 1500 1600 1700 1800 1900 1980 1980 1980 1980 1980; do
    mask=0x0000000000000000
    [ "$i" -lt 3 ] && mask=0x0000000000000004
    [ "$i" = 0 ] && mask=0x000000000000000C
    printf '2026/11/30 04:35:18.%d00, %d, 3201, %d.00, %d, %s\n' "$i" "$sm" $((100 + 10 * i)) $((51 + i)) "$mask"
    i=$((i + 1))
  done
} > "$dir/clocks.csv"
run_script "$dir/clocks.csv"
expect_rc 0 "a clock log"
expect "$out" '^10 busy samples of 11 \(100 ms apart\)$' "busy samples, the idle one and the unreadable one left out"
expect "$out" '^SM clock MHz: min 1500, p10 1600, median 1940, max 1980$' "the SM clock's spread"
expect "$out" '^power W: median 145, max 190; temperature C: max 60$' "power and temperature"
expect "$out" '^clock held down by sw power cap: 3 samples \(30 %\)$' "the power cap"
expect "$out" '^clock held down by hw slowdown: 1 samples \(10 %\)$' "hw slowdown"
run_script --help
expect_rc 0 "--help"
expect "$out" '^usage: clock_summary\.py .*CLOCKS\.csv' "--help prints the usage"
expect_exit 2 "no argument"
expect_exit 2 "two arguments" "$dir/clocks.csv" "$dir/clocks.csv"
expect_error 2 "a missing file" '^clock_summary: .*missing\.csv: No such file or directory$' "$dir/missing.csv"
expect_error 2 "a directory" '^clock_summary: .*: Is a directory$' "$dir"
printf '\037\213\010binary' > "$dir/clocks.csv.gz"
expect_error 2 "a file not text" '^clock_summary: .*clocks\.csv\.gz: not text' "$dir/clocks.csv.gz"
[ "$status" = 0 ] && echo "PASS: clock_summary.py summarises a clock log as expected"
exit "$status"
