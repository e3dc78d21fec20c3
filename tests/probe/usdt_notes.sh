#!/usr/bin/env bash
# Checks that the plugin carries one stapsdt note with a semaphore for every USDT probe
# `flexiforce probe` attaches to. Usage: usdt_notes.sh LIBRARY
set -euo pipefail
lib="$1"
notes="$(readelf -n "$lib")"
fail=0
# "Provider: P" / "Name: N" / "Location: ..., Semaphore: 0x..." -> "P:N SEMAPHORE" per note.
table="$(awk '/Provider:/ {p=$2} /Name:/ {n=$2} /Semaphore:/ {print p ":" n " " $NF}' <<<"$notes")"
for p in send_post send_done recv_post recv_done connect accept path_choice failover drain failback pause resume path_up; do
  sem="$(awk -v k="flexiforce:$p" '$1 == k {print $2}' <<<"$table")"
  if [ -z "$sem" ]; then
    echo "missing stapsdt note flexiforce:$p"; fail=1; continue
  fi
  # A probe without a semaphore would cost its argument set-up even when nobody listens.
  if [ $((sem)) -eq 0 ]; then echo "probe flexiforce:$p has no semaphore"; fail=1; fi
done
# The plugin must not depend on libbpf: only the probe tool does.
if readelf -d "$lib" | grep -q "libbpf"; then echo "plugin links libbpf"; fail=1; fi
[ $fail -eq 0 ] && echo "all 13 probes present with semaphores"
exit $fail
