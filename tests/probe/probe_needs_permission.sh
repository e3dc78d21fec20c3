#!/usr/bin/env bash
# `probe watch` and `probe report` without permission for BPF (as root: run as nobody with no
# capabilities, via setpriv; as another user: run as that user) must each print one line saying what
# is missing (root, or CAP_BPF + CAP_PERFMON), exit 1, print no stack trace or abort, and write no report.
# Skips (77) when this cannot be arranged: root without setpriv, a user who may load BPF, no BPF tool.
# usage: probe_needs_permission.sh FLEXIFORCE
set -u
ff="$1"
"$ff" probe --help | grep -q watch || { echo "SKIP: built without BPF support"; exit 77; }
copy_dir="$(mktemp -d /tmp/ff-probe-nobody.XXXXXX)"
trap 'rm -rf "$copy_dir"' EXIT
chmod 755 "$copy_dir"
if [ "$(id -u)" -eq 0 ]; then
  command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
  # The build tree may sit where nobody cannot read (a clone under /root): run a copy nobody can.
  cp "$ff" "$copy_dir/flexiforce" && chmod 755 "$copy_dir/flexiforce"
  run=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all --bounding-set=-all
       "$copy_dir/flexiforce")
  who="nobody, no capabilities"
else
  # CapEff bits 21 (CAP_SYS_ADMIN), 38 (CAP_PERFMON), 39 (CAP_BPF).
  eff=$((16#$(awk '/^CapEff:/ {print $2}' /proc/self/status)))
  if (( (eff >> 21 & 1) || ((eff >> 38 & 1) && (eff >> 39 & 1)) )); then
    echo "SKIP: this user may load BPF; nothing to drop without root"; exit 77
  fi
  run=("$ff")
  who="$(id -un)"
fi

fail=0
check() {  # check NAME ARGS...: runs `flexiforce probe ARGS` without permission
  local name="$1"; shift
  local out rc
  out="$(cd / && "${run[@]}" probe "$@" 2>&1)"
  rc=$?
  echo "[$name as $who] exit $rc: $out"
  if [ $rc -eq 126 ] || [ $rc -eq 127 ]; then echo "SKIP: cannot run $ff as $who"; exit 77; fi
  [ $rc -eq 1 ] || { echo "FAIL: $name exit $rc, expected 1"; fail=1; }
  grep -q "run as root, or grant CAP_BPF + CAP_PERFMON (missing: CAP_BPF and CAP_PERFMON)" <<<"$out" ||
    { echo "FAIL: $name does not say what is missing"; fail=1; }
  [ "$(grep -c . <<<"$out")" -eq 1 ] || { echo "FAIL: $name printed more than the one line"; fail=1; }
  if grep -Eqi "terminate called|what\(\)|traceback|abort|segmentation|core dumped|libbpf:" <<<"$out"; then
    echo "FAIL: $name printed a crash or a stack trace"; fail=1
  fi
}
check watch watch --duration 1
mkdir -m 777 "$copy_dir/out"
check report report --duration 1 --out "$copy_dir/out"
if [ -n "$(ls -A "$copy_dir/out")" ]; then echo "FAIL: report wrote files without permission"; fail=1; fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
