#!/bin/sh
# Runs a command that must fail: passes only if it exits with EXPECTED_RC (not a hang, not success)
# and its output matches REGEX. Used to prove the driver reports corruption and dead ranks.
# usage: expect_failure.sh EXPECTED_RC REGEX CMD [ARGS...]
set -u
if [ $# -lt 3 ]; then
  echo "usage: expect_failure.sh EXPECTED_RC REGEX CMD [ARGS...]" >&2
  exit 2
fi
want_rc=$1; regex=$2; shift 2
out=$(mktemp /tmp/ff-collective-expect.XXXXXX)
trap 'rm -f "$out"' EXIT
timeout 90 "$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -eq 124 ]; then
  echo "FAIL: command hung (killed by timeout after 90 s)" >&2
  exit 1
fi
if [ "$rc" -ne "$want_rc" ]; then
  echo "FAIL: exit status $rc, expected $want_rc" >&2
  exit 1
fi
if ! grep -Eq "$regex" "$out"; then
  echo "FAIL: output does not match /$regex/" >&2
  exit 1
fi
echo "PASS: exit status $rc and output matches /$regex/"
