#!/bin/sh
# check_prenorm_probe_args.sh PROBE: the pre-norm probe (fused/tools/prenorm_probe.cu)
# refuses a bad NF_PROBE_FLUSH before it touches the device, so on any host:
# exit 2 and one line on stderr naming the variable and the value.
set -u
probe="${1:?usage: check_prenorm_probe_args.sh PROBE}"
status=0
for bad in bogus Read memset; do
  err="$(NF_PROBE_FLUSH="$bad" "$probe" 2>&1 > /dev/null)"
  rc=$?
  if [ "$rc" -ne 2 ]; then echo "FAIL: NF_PROBE_FLUSH=$bad: exit $rc, not 2"; status=1; fi
  if [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] ||
     ! printf '%s\n' "$err" | grep -qx "prenorm_probe: NF_PROBE_FLUSH must be 'read' or 'write', got '$bad'"; then
    echo "FAIL: NF_PROBE_FLUSH=$bad: stderr is not the one line naming it:"; printf '%s\n' "$err"; status=1
  fi
done
exit "$status"
