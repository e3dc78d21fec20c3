#!/usr/bin/env bash
# Checks that the plugin carries one stapsdt note with a semaphore for every USDT probe
# `flexiforce probe` attaches to. Usage: usdt_notes.sh LIBRARY
set -euo pipefail
lib="$1"
notes="$(readelf -n "$lib")"
fail=0
# "Provider: P" / "Name: N" / "Location: ..., Semaphore: 0x..." -> "P:N SEMAPHORE" per note.
table="$(awk '/Provider:/ {p=$2} /Name:/ {n=$2} /Semaphore:/ {print p ":" n " " $NF}' <<<"$notes")"
for p in send_post send_done recv_post recv_done msgs_done connect accept path_choice failover drain failback pause resume path_up; do
  sem="$(awk -v k="flexiforce:$p" '$1 == k {print $2; exit}' <<<"$table")"
  if [ -z "$sem" ]; then
    echo "missing stapsdt note flexiforce:$p"; fail=1; continue
  fi
  # A probe without a semaphore would cost its argument set-up even when nobody listens.
  if [ $((sem)) -eq 0 ]; then echo "probe flexiforce:$p has no semaphore"; fail=1; fi
done
# On x86-64 every probe site is a 5-byte nop, which kernels with optimized uprobes attach to
# without a trap (core/probes.h); a 1-byte nop would cost several times as much once attached.
if [ "$(uname -m)" = x86_64 ]; then
  bad="$(python3 - "$lib" <<'PY'
import re, subprocess, sys
lib = sys.argv[1]
notes = subprocess.run(["readelf", "-n", lib], capture_output=True, text=True, check=True).stdout
sites = [(n, int(a, 16)) for n, a in re.findall(r"Name: (\S+)\s+Location: (0x[0-9a-f]+)", notes)]
segs = []
for line in subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True, check=True).stdout.splitlines():
    f = line.split()
    if f and f[0] == "LOAD":
        segs.append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))  # vaddr, offset, filesz
data = open(lib, "rb").read()
found = 0
for name, va in sites:
    off = next((o + va - v for v, o, sz in segs if v <= va < v + sz), None)
    found += 1
    if off is None or data[off:off + 5] != bytes.fromhex("0f1f440000"):
        got = data[off:off + 5].hex() if off is not None else "unmapped"
        print(f"probe site flexiforce:{name} at {va:#x} is {got}, not a 5-byte nop")
if not found:
    print("no probe sites found")
PY
)"
  if [ -n "$bad" ]; then echo "$bad"; fail=1; fi
fi
# The plugin must not depend on libbpf: only the probe tool does.
if grep -q "libbpf" <<<"$(readelf -d "$lib")"; then echo "plugin links libbpf"; fail=1; fi
[ $fail -eq 0 ] && echo "all 13 probes present with semaphores"
exit $fail
