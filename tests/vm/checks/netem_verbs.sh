#!/usr/bin/env bash
# VM lane check (in the VM): netem loss on one NIC under a running job over verbs - a soft signal.
# Two ranks, each on two ports (rank 0 rxe_a0 + rxe_a1, rank 1 rxe_b0 + rxe_b1), one QP per port
# (FLEXIFORCE_PATHS=2), AllReduce 1-4 MiB, every iteration checked. Once the job runs,
# `tc qdisc add dev va0 root netem loss 1%` makes pair 0 lossy: rxe retransmits (go-back-N), and the
# ports' transport loss counters (hw_counters: rcvd_seq_err, out_of_seq_request, completer_retry_err,
# duplicate_request) rise against the interface's packets. The plugin's NIC health monitor must call
# va0 (or vb0) degraded and drain the QPs on it, without an error: exact results, the drain line
# naming the hidden loss, and va1 carrying the traffic. Prints `NETEM detect_ms= va1_tx_after=`:
# the time from the qdisc's stamp to the first drain line, and va1's packets after it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin="${FF_BUILD_DIR:-build}/bin/ff-collective"
[ -x "$bin" ] || { echo "SKIP: $bin not built (cmake --build build --target ff-collective)"; exit 77; }

"$fixture" up 2
export FLEXIFORCE_TRANSPORT=verbs FLEXIFORCE_PATHS=2 NCCL_SOCKET_IFNAME="=va0,=vb0" FLEXIFORCE_STATS=0
export FLEXIFORCE_NIC_HEALTH=1
# TCG: a healthy QP can go 100+ ms without a completion (see tests/vm/README.md).
export FLEXIFORCE_PATH_STALL_MS="${FLEXIFORCE_PATH_STALL_MS:-500}"
# The drained path stays drained while the loss lasts (its return needs the NIC healthy again).
out="$(mktemp)"
stamps="$(mktemp)"
(
  for ((i = 0; i < 1200; i++)); do grep -q '^[0-9.]* *allreduce' "$out" 2>/dev/null && break; sleep 0.1; done
  tc -V >/dev/null 2>&1 || true  # load tc over 9p before the stamp
  sleep 0.5
  echo "$EPOCHREALTIME" >"$stamps"
  timeout 10 tc qdisc add dev va0 root netem loss "${FF_NETEM_LOSS:-1%}"
  for ((i = 0; i < 300; i++)); do grep -q "draining path" "$out" && break; sleep 0.1; done
  counter va1 tx_packets >>"$stamps"
) &
cutter=$!
set +e
# Each line stamped as it is written (bash's clock, microseconds), for the detection time.
timeout 600 "$bin" --ranks 2 --launch-local --backend plugin --dev-cycle 4 --dev-step 2 --coll allreduce \
  --min-bytes 1M --max-bytes 4M --step-bytes 512K --iters "${FF_NETEM_ITERS:-20}" --warmup 1 --timeout-s 500 2>&1 |
  while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$out"
rc=${PIPESTATUS[0]}
set -e
wait "$cutter" || true
tx_end=$(counter va1 tx_packets)
tc qdisc del dev va0 root 2>/dev/null || true
cut -d' ' -f2- "$out"
mapfile -t s <"$stamps"
rm -f "$stamps"
[ "$rc" -eq 0 ] || fail "the job failed under 1% loss on va0 (exit $rc): a soft signal must never fail a job"
grep -q "all checks passed" "$out" || fail "no exact-result confirmation"
first="$(grep -m1 "draining path" "$out" || true)"
[ -n "$first" ] || fail "no path was drained: the loss on va0 went unnoticed"
grep -q "hidden loss" <<<"$(grep "draining path" "$out")" ||
  fail "the drains do not name the ports' hidden loss: $(grep "draining path" "$out" | cut -c1-300)"
[ "${#s[@]}" -ge 2 ] || fail "the netem helper did not record its stamps"
detect_ms="$(awk -v a="${s[0]}" -v b="${first%% *}" 'BEGIN { printf "%.0f", (b - a) * 1000 }')"
tx_after=$((tx_end - s[1]))
echo "NETEM detect_ms=$detect_ms va1_tx_after=$tx_after"
# Quiet before the fault: a drain stamped before the qdisc went in is a false positive.
[ "${detect_ms#-}" = "$detect_ms" ] || fail "a path was drained ${detect_ms#-} ms before any loss was injected: $first"
grep "draining path\|back in service\|degraded" "$out" | cut -d' ' -f2- | sed 's/^/TIMELINE /' | cut -c1-400
grep -q "is down\|failover to" "$out" && echo "NOTE: a hard failover happened too (the loss also ran a QP out of retries)"
[ "$tx_after" -gt 1000 ] || fail "va1 sent only $tx_after packets after the drain: the traffic did not move"
rm -f "$out"
"$fixture" down
pass "netem loss over verbs: pair 0's QPs drained on its ports' hidden loss after ${detect_ms} ms, results exact"
