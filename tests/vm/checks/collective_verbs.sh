#!/usr/bin/env bash
# VM lane check (in the VM): ff-collective, 4 ranks through the plugin with FLEXIFORCE_TRANSPORT=verbs,
# AllReduce, AllGather and Broadcast, every result checked exactly. Ranks alternate between rxe_a0
# and rxe_b0 (--dev-cycle 2), so every ring step crosses the veth pair va0 <-> vb0; each rank's
# connection handshakes run over its device's own netdev.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin="${FF_BUILD_DIR:-build}/bin/ff-collective"
[ -x "$bin" ] || { echo "SKIP: $bin not built (cmake --build build --target ff-collective)"; exit 77; }
max="${FF_COLL_MAX_BYTES:-2M}"

"$fixture" up 1
export FLEXIFORCE_TRANSPORT=verbs NCCL_IB_HCA="rxe_a0,rxe_b0" NCCL_SOCKET_IFNAME="=va0,=vb0" FLEXIFORCE_STATS=0
rx_before=$(counter va0 rx_packets)
out="$(mktemp)"
start=$(date +%s.%N)
rc=0
timeout 400 "$bin" --ranks 4 --launch-local --backend plugin --dev-cycle 2 --coll all \
  --min-bytes 4 --max-bytes "$max" --step-bytes 64K --iters 2 --warmup 1 --timeout-s 300 2>&1 | tee "$out" || true
rc=${PIPESTATUS[0]}
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
rx_after=$(counter va0 rx_packets)
echo "RESULT collective_verbs exit=$rc seconds=$secs va0_rx_packets=$((rx_after - rx_before))"
[ "$rc" -eq 0 ] || fail "ff-collective over verbs exited $rc"
grep -q "(rxe_a0, " "$out" || fail "rank 0 did not report rxe_a0 as its plugin device"
# Ranks 1 and 3 sit on rxe_b0: their ring steps to and from rxe_a0 cross the veth as RoCE packets.
[ $((rx_after - rx_before)) -gt 1000 ] || fail "va0 saw only $((rx_after - rx_before)) packets: the traffic did not cross the veth"
rm -f "$out"
"$fixture" down
pass "4-rank collectives over verbs (rxe_a0 <-> rxe_b0), exact"
