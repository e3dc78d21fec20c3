#!/usr/bin/env bash
# VM lane check (in the VM): ib_write_bw rxe_a0 -> rxe_b0 runs and prints its bandwidth (the verbs baseline; no speed asserted).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$fixture" up 1
ga="$("$fixture" gid rxe_a0)"
gb="$("$fixture" gid rxe_b0)"
for size in 4096 65536; do
  iters=$((size > 4096 ? 200 : 1000))
  out="$(mktemp)"
  timeout 120 ib_write_bw -d rxe_b0 -x "$gb" -s "$size" -n "$iters" -F >/dev/null 2>&1 &
  server=$!
  wait_listen 18515
  timeout 120 ib_write_bw -d rxe_a0 -x "$ga" -s "$size" -n "$iters" -F 10.99.0.2 >"$out" 2>&1 ||
    { cat "$out"; fail "ib_write_bw client (size $size) exited non-zero"; }
  wait "$server" || fail "ib_write_bw server (size $size) exited $?"
  cat "$out"
  # The result row: bytes, iterations, peak MB/s, average MB/s, Mpps.
  avg="$(awk -v s="$size" '$1 == s && NF >= 5 { print $4 }' "$out")"
  [ -n "$avg" ] || fail "no result row for size $size in ib_write_bw's output"
  echo "BASELINE ib_write_bw rxe_a0->rxe_b0 size=$size iters=$iters avg=${avg} MB/s"
  rm -f "$out"
done
"$fixture" down
