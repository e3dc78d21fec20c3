#!/usr/bin/env bash
# VM lane check (host side): run.sh hands back the command's exit status - "true" gives 0 and "false" gives 1.
set -uo pipefail
run="$(dirname "$0")/../run.sh"
bash "$run" --timeout 180 -- true
rc=$?
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || { echo "FAIL: run.sh -- true exited $rc, want 0" >&2; exit 1; }
bash "$run" --timeout 180 -- false
rc=$?
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 1 ] || { echo "FAIL: run.sh -- false exited $rc, want 1" >&2; exit 1; }
echo "PASS: true -> 0, false -> 1"
