#!/usr/bin/env bash
# `probe watch` run as an unprivileged user (nobody, no capabilities) must say what is missing and exit 1.
# Skips (77) when this cannot be arranged: not root, or setpriv missing.
# usage: watch_needs_permission.sh FLEXIFORCE
set -u
ff="$1"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to switch to nobody"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
"$ff" probe --help | grep -q watch || { echo "SKIP: built without BPF support"; exit 77; }
# The build tree may sit where nobody cannot read (a clone under /root): run a copy nobody can.
copy_dir="$(mktemp -d /tmp/ff-probe-nobody.XXXXXX)"
trap 'rm -rf "$copy_dir"' EXIT
chmod 755 "$copy_dir"
cp "$ff" "$copy_dir/flexiforce" && chmod 755 "$copy_dir/flexiforce"
out="$(cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all --bounding-set=-all \
        "$copy_dir/flexiforce" probe watch --duration 1 2>&1)"
rc=$?
echo "$out"
if [ $rc -eq 126 ] || [ $rc -eq 127 ]; then echo "SKIP: nobody cannot run $ff"; exit 77; fi
[ $rc -eq 1 ] || { echo "FAIL: exit $rc, expected 1"; exit 1; }
grep -q "root, or grant CAP_BPF + CAP_PERFMON" <<<"$out" || { echo "FAIL: message does not name what is missing"; exit 1; }
echo "PASS"
