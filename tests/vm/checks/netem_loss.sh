#!/usr/bin/env bash
# VM lane check (in the VM): netem on va1 is available and acts - "loss 100%" stops traffic to vb1, "loss 1%" installs.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$fixture" up 2
# 20 UDP datagrams from va1's side to vb1 (locally generated: the fixture routes them over the veth).
send20() { for _ in $(seq 20); do echo x >/dev/udp/10.99.1.2/9; done; }

rx0="$(counter vb1 rx_packets)"; send20
clean=$(($(counter vb1 rx_packets) - rx0))
((clean >= 20)) || fail "without netem only $clean of 20 datagrams reached vb1"

timeout 10 tc qdisc add dev va1 root netem loss 100% || fail "tc qdisc add ... netem loss 100% failed"
rx0="$(counter vb1 rx_packets)"; send20
lossy=$(($(counter vb1 rx_packets) - rx0))
((lossy == 0)) || fail "netem loss 100% let $lossy of 20 datagrams through"
timeout 10 tc qdisc del dev va1 root

timeout 10 tc qdisc add dev va1 root netem loss 1% || fail "tc qdisc add dev va1 root netem loss 1% failed"
grep -q 'netem.*loss 1%' <<<"$(timeout 10 tc qdisc show dev va1)" || fail "tc does not show netem loss 1% on va1"
pass "netem: $clean/20 through clean, 0/20 at loss 100%, loss 1% installed on va1"
"$fixture" down
