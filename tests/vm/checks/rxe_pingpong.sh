#!/usr/bin/env bash
# VM lane check (in the VM): 2 pairs give 4 rxe devices, and an RC ping-pong rxe_a0 <-> rxe_b0 crosses the veth.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
iters=50

"$fixture" up 2
devices="$(timeout 30 ibv_devices | awk '$1 ~ /^rxe_/ { print $1 }' | sort | tr '\n' ' ')"
[ "$devices" = "rxe_a0 rxe_a1 rxe_b0 rxe_b1 " ] || fail "ibv_devices lists '$devices', want the 4 rxe devices"
pass "ibv_devices: $devices"

ga="$("$fixture" gid rxe_a0)"
gb="$("$fixture" gid rxe_b0)"
tx0="$(counter va0 tx_packets)"
rx0="$(counter vb0 rx_packets)"
# -e: wait on completion events; busy polling under TCG starves the other side.
timeout 120 ibv_rc_pingpong -d rxe_b0 -g "$gb" -n "$iters" -e &
server=$!
wait_listen 18515
timeout 120 ibv_rc_pingpong -d rxe_a0 -g "$ga" -n "$iters" -e 10.99.0.2 || fail "ibv_rc_pingpong client exited $?"
wait "$server" || fail "ibv_rc_pingpong server exited $?"
# The fixture's routing must have put the RoCE packets on the wire, not through lo.
sent=$(($(counter va0 tx_packets) - tx0))
got=$(($(counter vb0 rx_packets) - rx0))
((sent >= iters && got >= iters)) || fail "only $sent packets left va0 and $got reached vb0 for $iters iterations"
pass "ibv_rc_pingpong rxe_a0 (gid $ga) <-> rxe_b0 (gid $gb): $iters iterations, $sent packets over va0"
"$fixture" down
