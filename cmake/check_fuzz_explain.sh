#!/bin/sh
# check_fuzz_explain.sh NORMFUSE: `normfuse fuzz ... --explain OUT:ROW,COL[:GOT]`, on the host
# alone, weighs a value a GPU wrote against the oracle and the allowance of its case.  On a
# small attention_bwd case (a fuzz draw shaped down by --shape): without GOT it prints the
# element's want and allowance; GOT = want is within at 0 of the allowance; GOT half an
# allowance off is within, at 0.5; GOT two allowances off is OUTSIDE; and it needs no GPU.
set -eu
cli="$1"
repro="--seed 2026120800 --case 68 --op attention_bwd --impl attention_bwd/ref --shape B=1,H=2,D=47,Sq=64,Sk=0"
status=0
fail() { echo "FAIL: $*"; status=1; }
rc=0
# shellcheck disable=SC2086  # the repro line is a list of words
out="$("$cli" fuzz $repro --explain dK:3,5)" || rc=$?
[ "$rc" = 0 ] || { echo "$out"; echo "FAIL: --explain exited $rc"; exit 1; }
echo "$out"
line="$(echo "$out" | grep '^dK(3,5): want ')" || { echo "FAIL: no want line"; exit 1; }
want="$(echo "$line" | sed 's/.* want \([^ ]*\) allowed .*/\1/')"
allowed="$(echo "$line" | sed 's/.* allowed \(.*\)$/\1/')"
awk -v a="$allowed" 'BEGIN { exit !(a > 0) }' || fail "allowance '$allowed' is not positive"
verdict() { # GOT RATIO WORD WHAT: the line's ratio within 1e-3 of RATIO, and its word
  # shellcheck disable=SC2086
  v="$("$cli" fuzz $repro --explain "dK:3,5:$1" | tail -1)"
  echo "$v" | awk -v r="$2" -v w="$3" '{ x = $(NF - 4) + 0; d = x - r; if (d < 0) d = -d }
    !/^got .*, .* of the allowance: (within|OUTSIDE)$/ || d > 1e-3 || $NF != w { bad = 1 } END { exit bad }' ||
    fail "$4: '$v' is not $2 of the allowance, $3"
}
verdict "$want" 0 within "GOT = want"
verdict "$(awk -v w="$want" -v a="$allowed" 'BEGIN { printf "%.9g", w + 0.5 * a }')" 0.5 within \
  "GOT half an allowance off"
verdict "$(awk -v w="$want" -v a="$allowed" 'BEGIN { printf "%.9g", w - 2 * a }')" 2 OUTSIDE \
  "GOT two allowances off"
exit $status
