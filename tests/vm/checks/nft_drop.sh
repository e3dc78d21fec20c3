#!/usr/bin/env bash
# VM lane check (in the VM): an nftables drop rule on va1 stops RoCEv2-port traffic to vb1 (the per-NIC drop injector).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$fixture" up 2
# A dropped datagram fails the write with EPERM (the output hook says no): expected, not an error.
send20() { for _ in $(seq 20); do echo x 2>/dev/null >/dev/udp/10.99.1.2/4791 || true; done; }
# What reaches vb1 is counted by an input-hook rule, not by vb1's rx_packets: a fresh veth also
# carries IPv6 neighbour and router solicitations that no rule here is about.
arrived() { timeout 10 nft list chain inet ff_vm_count in | sed -n 's/.*counter packets \([0-9]*\) .*/\1/p'; }
timeout 10 nft -f - <<'NFT' || fail "nft could not load a counting rule (nf_tables modules missing?)"
table inet ff_vm_count {
  chain in {
    type filter hook input priority 0; policy accept;
    iifname "vb1" udp dport 4791 counter
  }
}
NFT

send20
clean="$(arrived)"
[ "$clean" = 20 ] || fail "without a drop rule $clean of 20 datagrams reached vb1"

timeout 10 nft -f - <<'NFT' || fail "nft could not load the drop rule"
table inet ff_vm_drop {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname "va1" udp dport 4791 counter drop
  }
}
NFT
send20
[ "$(arrived)" = 20 ] || fail "the drop rule let $(($(arrived) - 20)) of 20 datagrams through"
drop_table="$(timeout 10 nft list table inet ff_vm_drop)"
[[ "$drop_table" == *'counter packets 20 '* ]] || fail "the drop rule's counter is not 20: $drop_table"
timeout 10 nft delete table inet ff_vm_drop
timeout 10 nft delete table inet ff_vm_count
pass "nftables: 20/20 reached vb1 without the rule, 0/20 with 'oifname va1 udp dport 4791 drop'"
"$fixture" down
