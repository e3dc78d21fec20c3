#!/usr/bin/env bash
# VM lane check (in the VM): an nftables drop rule on va1 stops RoCEv2-port traffic to vb1 (the per-NIC drop injector).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$fixture" up 2
# A dropped datagram fails the write with EPERM (the output hook says no): expected, not an error.
send20() { for _ in $(seq 20); do echo x 2>/dev/null >/dev/udp/10.99.1.2/4791 || true; done; }
rx0="$(counter vb1 rx_packets)"; send20
clean=$(($(counter vb1 rx_packets) - rx0))
((clean >= 20)) || fail "without a rule only $clean of 20 datagrams reached vb1"

timeout 10 nft -f - <<'NFT' || fail "nft could not load the drop rule (nf_tables modules missing?)"
table inet ff_vm_drop {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname "va1" udp dport 4791 counter drop
  }
}
NFT
rx0="$(counter vb1 rx_packets)"; send20
dropped=$(($(counter vb1 rx_packets) - rx0))
((dropped == 0)) || fail "the drop rule let $dropped of 20 datagrams through"
timeout 10 nft list table inet ff_vm_drop | grep -q 'packets 20 ' || fail "the rule's counter is not 20: $(nft list table inet ff_vm_drop)"
timeout 10 nft delete table inet ff_vm_drop
pass "nftables: $clean/20 through without the rule, 0/20 with 'oifname va1 udp dport 4791 drop'"
"$fixture" down
