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
# Under TCG one 512 KiB write takes 20+ ms and rxe serves its QPs unevenly: a QP can go 100+ ms
# without a completion while healthy, which the default stall rule (100 ms) would fence.
export FLEXIFORCE_PATH_STALL_MS="${FLEXIFORCE_PATH_STALL_MS:-2000}"
rx_before=$(counter va0 rx_packets)
out="$(mktemp)"
start=$(date +%s.%N)
set +e
timeout 400 "$bin" --ranks 4 --launch-local --backend plugin --dev-cycle 2 --coll all \
  --min-bytes 4 --max-bytes "$max" --step-bytes 64K --iters 2 --warmup 1 --timeout-s 300 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
rx_after=$(counter va0 rx_packets)
echo "RESULT collective_verbs exit=$rc seconds=$secs va0_rx_packets=$((rx_after - rx_before))"
[ "$rc" -eq 0 ] || fail "ff-collective over verbs exited $rc"
grep -q "all checks passed" "$out" || fail "ff-collective did not confirm exact results"
grep -q "(rxe_a0, " "$out" || fail "rank 0 did not report rxe_a0 as its plugin device"
# Ranks 1 and 3 sit on rxe_b0: their ring steps to and from rxe_a0 cross the veth as RoCE packets.
[ $((rx_after - rx_before)) -gt 1000 ] || fail "va0 saw only $((rx_after - rx_before)) packets: the traffic did not cross the veth"
rm -f "$out"

# Bandwidth next to perftest in the same boot: 2 ranks, Broadcast of 8 MiB (rank 0 -> rank 1 over
# rxe_a0 -> rxe_b0, 1 MiB ring steps; for 2 ranks busbw = algbw = the one link's rate), beside
# ib_write_bw's 1 MiB writes on the same devices. Both in decimal Gbit/s; no speed is asserted (TCG).
ga="$("$fixture" gid rxe_a0)"
gb="$("$fixture" gid rxe_b0)"
perf_out="$(mktemp)"
timeout 120 ib_write_bw -d rxe_b0 -x "$gb" -s 1048576 -n 64 -F --report_gbits >/dev/null 2>&1 &
server=$!
wait_listen 18515
timeout 120 ib_write_bw -d rxe_a0 -x "$ga" -s 1048576 -n 64 -F --report_gbits 10.99.0.2 >"$perf_out" 2>&1 ||
  { cat "$perf_out"; fail "ib_write_bw client exited non-zero"; }
wait "$server" || fail "ib_write_bw server exited $?"
perf="$(awk '$1 == 1048576 && NF >= 5 { print $4 }' "$perf_out")"
[ -n "$perf" ] || { cat "$perf_out"; fail "no result row in ib_write_bw's output"; }
bw_out="$(mktemp)"
timeout 300 "$bin" --ranks 2 --launch-local --backend plugin --dev-cycle 2 --coll broadcast \
  --min-bytes 8M --max-bytes 8M --step-bytes 1M --iters 5 --warmup 1 --timeout-s 240 >"$bw_out" 2>&1 ||
  { cat "$bw_out"; fail "2-rank broadcast over verbs failed"; }
cat "$bw_out"
ours="$(awk '$1 == "broadcast" && $2 == 8388608 && $7 == "ok" { print $5 * 8 }' "$bw_out")"
[ -n "$ours" ] || fail "no checked broadcast row in ff-collective's output"
echo "BASELINE ib_write_bw rxe_a0->rxe_b0 size=1048576 avg=${perf} Gbit/s"
echo "PLUGIN   broadcast 2 ranks rxe_a0->rxe_b0 size=8388608 step=1M busbw=${ours} Gbit/s ratio=$(awk -v a="$ours" -v b="$perf" 'BEGIN { printf "%.2f", a / b }')"
rm -f "$perf_out" "$bw_out"
"$fixture" down
pass "4-rank collectives over verbs (rxe_a0 <-> rxe_b0), exact; bandwidth beside ib_write_bw"
