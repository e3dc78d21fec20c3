#!/usr/bin/env bash
# VM lane check (in the VM): RdmaPath rxe_a0 -> rxe_b0 (tests/verbs/rdma_path_vm_test.cc), and its 1 MiB write bandwidth next to ib_write_bw's in the same boot.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin="${FF_BUILD_DIR:-build}/bin/ff_rdma_path_vm_test"
[ -x "$bin" ] || { echo "SKIP: $bin not built (cmake --build build --target ff_rdma_path_vm_test)"; exit 77; }
size=1048576
iters="${FF_RDMA_BW_ITERS:-64}"

"$fixture" up 1
ga="$("$fixture" gid rxe_a0)"
gb="$("$fixture" gid rxe_b0)"

# perftest first, on the same devices and sizes, as the reference.
out="$(mktemp)"
timeout 120 ib_write_bw -d rxe_b0 -x "$gb" -s "$size" -n "$iters" -F >/dev/null 2>&1 &
server=$!
wait_listen 18515
timeout 120 ib_write_bw -d rxe_a0 -x "$ga" -s "$size" -n "$iters" -F 10.99.0.2 >"$out" 2>&1 ||
  { cat "$out"; fail "ib_write_bw client exited non-zero"; }
wait "$server" || fail "ib_write_bw server exited $?"
perf="$(awk -v s="$size" '$1 == s && NF >= 5 { print $4 }' "$out")"
[ -n "$perf" ] || { cat "$out"; fail "no result row in ib_write_bw's output"; }
rm -f "$out"

out="$(mktemp)"
timeout 240 "$bin" --dev-a rxe_a0 --gid-a "$ga" --dev-b rxe_b0 --gid-b "$gb" --bw-iters "$iters" --bw-size "$size" --lossy-netdev va0 \
  >"$out" 2>&1 || { cat "$out"; fail "rdma_path_vm_test exited non-zero"; }
cat "$out"
ours="$(sed -n 's/^RESULT rdma_path_write_bw .* avg=\([0-9.]*\) MB\/s.*/\1/p' "$out")"
rm -f "$out"
[ -n "$ours" ] || fail "no RESULT line from rdma_path_vm_test"
echo "BASELINE ib_write_bw rxe_a0->rxe_b0 size=$size iters=$iters avg=${perf} MB/s"
echo "RDMAPATH rdma_path   rxe_a0->rxe_b0 size=$size iters=$iters avg=${ours} MB/s ratio=$(awk -v a="$ours" -v b="$perf" 'BEGIN { printf "%.2f", a / b }')"
"$fixture" down
pass "RdmaPath on Soft-RoCE"
