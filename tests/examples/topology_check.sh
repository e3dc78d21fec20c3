#!/usr/bin/env bash
# The example topology files validate with `flexiforce path check` and equal what their generators write now.
# Usage: topology_check.sh FLEXIFORCE SOURCE_DIR
set -uo pipefail
ff="${1:?usage: topology_check.sh FLEXIFORCE SOURCE_DIR}"
src="${2:?usage: topology_check.sh FLEXIFORCE SOURCE_DIR}"
dir="$src/examples/topologies"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check FILE EXPECTED_HOSTS EXPECTED_NICS EXPECTED_SPINES
  local f="$dir/$1"
  if ! "$ff" path check --json "$f" > "$tmp/check.json"; then
    echo "FAIL: flexiforce path check rejects $f:"; cat "$tmp/check.json"; fail=1; return
  fi
  python3 - "$tmp/check.json" "$1" "$2" "$3" "$4" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
name, hosts, nics, spines = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
k = doc["kinds"]
problems = []
if not doc.get("ok"): problems.append("not ok")
if doc.get("warnings"): problems.append(f"warnings {doc['warnings']}")
if (k.get("host"), k.get("nic"), k.get("spine")) != (hosts, nics, spines):
    problems.append(f"kinds {k}, want {hosts} hosts, {nics} NICs, {spines} spines")
if doc.get("entropy") != "sport-ranges": problems.append("no source-port entropy ranges")
if problems:
    sys.exit(f"FAIL: {name}: " + "; ".join(problems))
print(f"ok: {name} validates: {doc['nodes']} nodes, {doc['links']} links, {k}")
PY
}
same() {  # same FILE GENERATED
  if ! diff -u "$dir/$1" "$2" > "$tmp/diff"; then
    echo "FAIL: examples/topologies/$1 differs from its generator's output (see examples/topologies/README.md):"
    head -40 "$tmp/diff"; fail=1
  else
    echo "ok: $1 equals its generator's output"
  fi
}
check emulator-4x2.json 4 8 2
python3 "$src/tests/fabric/fabric.py" plan --name emu --topology > "$tmp/emu.json" && same emulator-4x2.json "$tmp/emu.json"
check roce-two-tier.json 32 64 4
"$ff" path gen leaf-spine --leaves 4 --spines 4 --hosts-per-leaf 8 --nics-per-host 2 --capacity-gbps 400 \
  --latency-us 1 -o "$tmp/roce.json" > /dev/null && same roce-two-tier.json "$tmp/roce.json"
# The oracle finds one path per spine between hosts on different leaves of the RoCE fabric.
n=$("$ff" path rank --json --topology "$dir/roce-two-tier.json" --src h0-nic0 --dst h31-nic0 --sla-us 50 --k 8 |
    python3 -c 'import json,sys; d=json.load(sys.stdin); r=d["paths"]; print(sum(1 for p in r if p.get("feasible")))')
[ "$n" = 4 ] && echo "ok: 4 feasible paths h0-nic0 -> h31-nic0, one per spine" || { echo "FAIL: $n feasible paths, want 4"; fail=1; }
exit $fail
