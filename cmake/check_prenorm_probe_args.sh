#!/bin/sh
# check_prenorm_probe_args.sh PROBE: the pre-norm probe (fused/tools/prenorm_probe.cu)
# refuses a bad NF_PROBE_FLUSH, NF_PROBE_GEMM, NF_PROBE_INPUTS or NF_PROBE_CEILINGS before it
# touches the device, so on any host: exit 2 and one line on stderr naming the variable and the
# value.
set -u
probe="${1:?usage: check_prenorm_probe_args.sh PROBE}"
status=0
# refuses VAR VALUE 'ALLOWED': VAR=VALUE is refused with the one line naming ALLOWED
refuses() {
  err="$(env "$1=$2" "$probe" 2>&1 > /dev/null)"
  rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL: $1=$2: exit $rc, not 2"; status=1; fi
  if [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] ||
     ! printf '%s\n' "$err" | grep -qxF "prenorm_probe: $1 must be $3, got '$2'"; then
    echo "FAIL: $1=$2: stderr is not the one line naming it:"; printf '%s\n' "$err"; status=1
  fi
}
for bad in bogus Read memset; do refuses NF_PROBE_FLUSH "$bad" "'read' or 'write'"; done
for bad in cublas Ref own2; do refuses NF_PROBE_GEMM "$bad" "'ref' or 'own'"; done
for bad in normal Bench uniform; do refuses NF_PROBE_INPUTS "$bad" "'spread' or 'bench'"; done
for bad in no 2 true; do refuses NF_PROBE_CEILINGS "$bad" "'0' or '1'"; done
exit "$status"
