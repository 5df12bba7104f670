#!/usr/bin/env bash
# gate.sh — set up, build, and run the gate (README's main command): the
# property suite and a time-boxed fuzz; non-zero exit on any violation.
# Options go to `normfuse gate` (see `normfuse gate --help`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
exec "$root/build/cli/normfuse" gate "$@"
