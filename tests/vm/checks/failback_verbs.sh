#!/usr/bin/env bash
# VM lane check (in the VM): failback over verbs. Two ranks, each on two ports (rank 0 rxe_a0 + rxe_a1,
# rank 1 rxe_b0 + rxe_b1), one QP per port (FLEXIFORCE_PATHS=2), AllReduce 1-4 MiB with every
# iteration checked. Mid-run `ip link set va0 down` fails rxe_a0's QP (traffic moves to rxe_a1), then
# `ip link set va0 up` brings the port back: once it has been ACTIVE with carrier for
# FLEXIFORCE_FAILBACK_MS, the sender reconnects the path as a new QP (a new QPN) over a rejoin stream,
# the receiver adopts it, and RoCE traffic leaves va0 again. Checked: exact results, the sender's
# "failback to" and the receiver's "reconnected (failback)" lines, a new QPN on the returned path, and
# va1 carrying the traffic while va0 is down, va0 sending packets after the failback. Prints
# `FAILBACK down_ms= up_to_failback_ms= va1_tx_while_down= va0_tx_after=`. (It covers the lane's port-down
# failover too: checks/failover_verbs.sh stays for its trials and the silent-drop variant.)
# FF_FAILBACK_ITERS (default 60) must keep the job running past the failback (the check says so if
# the job ended first).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin="${FF_BUILD_DIR:-build}/bin/ff-collective"
[ -x "$bin" ] || { echo "SKIP: $bin not built (cmake --build build --target ff-collective)"; exit 77; }

"$fixture" up 2
export FLEXIFORCE_TRANSPORT=verbs FLEXIFORCE_PATHS=2 NCCL_SOCKET_IFNAME="=va0,=vb0" FLEXIFORCE_STATS=0
# TCG: a healthy QP can go 100+ ms without a completion (see tests/vm/README.md).
export FLEXIFORCE_PATH_STALL_MS="${FLEXIFORCE_PATH_STALL_MS:-500}"
export FLEXIFORCE_FAILBACK_MS="${FLEXIFORCE_FAILBACK_MS:-1000}"
out="$(mktemp)"
stamps="$(mktemp)"
(
  for ((i = 0; i < 1200; i++)); do grep -q '^ *allreduce' "$out" 2>/dev/null && break; sleep 0.1; done
  ip link show va0 >/dev/null
  sleep 0.5
  date +%s.%N >"$stamps"
  counter va1 tx_packets >"$stamps.va1"
  ip link set va0 down
  # Down until the plugin has failed the QP over (or 10 s), then 1 s more.
  for ((i = 0; i < 100; i++)); do grep -q "is down" "$out" && break; sleep 0.1; done
  sleep 1
  date +%s.%N >>"$stamps"
  echo $(($(counter va1 tx_packets) - $(cat "$stamps.va1"))) >"$stamps.va1"  # while va0 was down
  ip link set va0 up
  for ((i = 0; i < 100; i++)); do grep -q ACTIVE /sys/class/infiniband/rxe_a0/ports/1/state && break; sleep 0.1; done
  # The sender logs its failback; va0's packets from then on are the new QP's (and a few TCP acks).
  for ((i = 0; i < 600; i++)); do grep -q "failback to" "$out" && break; sleep 0.1; done
  date +%s.%N >>"$stamps"
  counter va0 tx_packets >>"$stamps"
) &
cutter=$!
set +e
timeout 600 "$bin" --ranks 2 --launch-local --backend plugin --dev-cycle 4 --dev-step 2 \
  --coll allreduce --min-bytes 1M --max-bytes 4M --step-bytes 512K --iters "${FF_FAILBACK_ITERS:-60}" --warmup 1 \
  --timeout-s 500 >"$out" 2>&1
rc=$?
set -e
wait "$cutter" || true
tx_end=$(counter va0 tx_packets)
ip link set va0 up
cat "$out"
mapfile -t s <"$stamps"
va1_during="$(cat "$stamps.va1" 2>/dev/null || echo 0)"
rm -f "$stamps" "$stamps.va1"
[ "$rc" -eq 0 ] || fail "the job did not survive the port going down and coming back (exit $rc)"
grep -q "all checks passed" "$out" || fail "no exact-result confirmation"
grep -q "is down" "$out" || fail "the plugin logged no failed QP: did the cut hit the job?"
grep -q "failback to" "$out" ||
  fail "no failback logged: the job ended first (raise FF_FAILBACK_ITERS) or the path never came back"
grep -q "reconnected (failback)" "$out" || fail "the receiver logged no adopted path"
[ "${#s[@]}" -ge 4 ] || fail "the cutter did not record its stamps (${#s[@]} of 4)"
tx_after=$((tx_end - s[3]))
down_ms="$(awk -v a="${s[0]}" -v b="${s[1]}" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
back_ms="$(awk -v a="${s[1]}" -v b="${s[2]}" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
echo "FAILBACK down_ms=$down_ms up_to_failback_ms=$back_ms va1_tx_while_down=$va1_during va0_tx_after=$tx_after"
[ "$va1_during" -gt 1000 ] || fail "va1 sent only $va1_during packets while va0 was down: the traffic did not fail over"
grep "failback to\|reconnected (failback)" "$out" | sed 's/^/TIMELINE /'
# The returned path is a new QP: rxe_a0's queue pairs named by the failback lines are none of those
# named by the failed paths' lines.
new_qps="$(grep "failback to" "$out" | grep -o 'rxe_a0:1 qp [0-9]*' | sort -u | tr '\n' ',' || true)"
old_qps="$(grep "is down" "$out" | grep -o 'rxe_a0:1 qp [0-9]*' | sort -u | tr '\n' ',' || true)"
echo "FAILBACK failed=[$old_qps] returned=[$new_qps]"
[ -n "$new_qps" ] || fail "no failback line names an rxe_a0 queue pair"
while IFS= read -r q; do
  [ -z "$q" ] || ! grep -q "$q," <<<"$old_qps" || fail "the returned path reuses a failed QP ($q)"
done < <(tr ',' '\n' <<<"$new_qps")
# RoCE at MTU 1024: each remaining 1-4 MiB step on the returned QP is thousands of packets.
[ "$tx_after" -gt 1000 ] || fail "va0 sent only $tx_after packets after the failback: the returned path carried no data"
rm -f "$out"
"$fixture" down
pass "failback over verbs: the port came back, a new QP rejoined and carried data, results exact"
