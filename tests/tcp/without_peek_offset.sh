#!/usr/bin/env bash
# Runs a command as on a kernel without TCP peek offsets (Linux before 6.10, Debian 12's stock 6.1):
# no_peek_offset_preload.so refuses SO_PEEK_OFF on TCP sockets in every process the command starts.
# Passes only if the command passes and the plugin asked for peek offsets at least once - otherwise
# the lone-receive peek never ran and the run says nothing about that mode.
# Usage: without_peek_offset.sh SHIM.so COMMAND [ARGS...]
set -uo pipefail
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
  echo "usage: $0 SHIM.so COMMAND [ARGS...] (SHIM.so: the built no_peek_offset_preload library)" >&2
  exit 2
fi
shim="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
rc=0
LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}" FF_NO_PEEK_OFF_REPORT="$report" "$@" || rc=$?
refused=$(awk '{s += $1} END {print s + 0}' "$report")
echo "without_peek_offset: SO_PEEK_OFF refused $refused times (processes reporting: $(wc -l <"$report"))"
if [ "$rc" != 0 ]; then
  echo "without_peek_offset: FAILED - the command exited $rc" >&2
  exit "$rc"
fi
if [ "$refused" -lt 1 ]; then
  echo "without_peek_offset: FAILED - nothing asked for SO_PEEK_OFF, so the peek mode this checks never ran" >&2
  exit 1
fi
