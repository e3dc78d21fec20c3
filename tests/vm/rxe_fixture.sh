#!/usr/bin/env bash
# VM lane: Soft-RoCE fixture inside the VM - N veth pairs, an rxe device on each end, traffic forced onto the wire.
#
# Usage (as root, inside the VM: tests/vm/run.sh -- tests/vm/rxe_fixture.sh up 2 ...):
#   rxe_fixture.sh up N      pairs i = 0..N-1: vaI 10.99.I.1/24 <-> vbI 10.99.I.2/24, rxe_aI on vaI, rxe_bI on vbI
#   rxe_fixture.sh down [N]  removes them and restores the routing rules (N is ignored: removes every pair)
#   rxe_fixture.sh gid DEV   prints DEV's GID index of its IPv4 RoCEv2 address (for -g / ibv_query_gid)
#   rxe_fixture.sh show      one line per pair
# Each pair is one "NIC" on each side; `ip link set vaI down`, `tc qdisc add dev vaI root netem loss 1%`
# or an nftables drop on vaI are the fault injectors.
# Everything stays in the initial network namespace: rdma_rxe (Linux 6.1) opens its UDP socket there
# only, so an rxe device on a netdev in another namespace never answers.
set -euo pipefail

table=77       # routing table holding the per-pair routes that force traffic through the veth
rule_pref=10   # "iif lo lookup $table", ahead of the local table
local_pref=100 # where the local table moves (it normally sits at pref 0, ahead of everything)

die() { echo "rxe_fixture: $*" >&2; exit 1; }
t() { timeout 10 "$@"; }   # nothing here may hang the VM

[ "$(id -u)" -eq 0 ] || die "needs root"
# It rewrites the policy routing rules: on the host that would cut the machine's own local delivery.
[ "${FF_IN_VM:-0}" = 1 ] || [ "${1:-}" = gid ] || [ "${1:-}" = show ] ||
  die "runs inside the VM only (tests/vm/run.sh -- tests/vm/rxe_fixture.sh ...); FF_IN_VM=1 is not set"
for tool in ip rdma sysctl; do command -v "$tool" >/dev/null || die "no $tool (packages iproute2, procps)"; done

addr_a() { echo "10.99.$1.1"; }
addr_b() { echo "10.99.$1.2"; }

# The index of DEV's GID that is its IPv4 address (::ffff:a.b.c.d) of type RoCE v2.
gid_index() {
  local dev="$1" f n gid type
  for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
    n="${f##*/}"
    gid="$(cat "$f" 2>/dev/null)" || continue
    type="$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$n" 2>/dev/null)" || continue
    if [[ "$gid" == 0000:0000:0000:0000:0000:ffff:* ]] && [ "$type" = "RoCE v2" ]; then
      echo "$n"
      return 0
    fi
  done
  return 1
}

pairs() {  # the pair numbers present now
  ip -o link show type veth 2>/dev/null | sed -n 's/^[0-9]*: va\([0-9]*\)@.*/\1/p' | sort -n
}

down() {
  local dev i
  for dev in $(t rdma link show 2>/dev/null | sed -n 's|^link \(rxe_[ab][0-9]*\)/.*|\1|p'); do
    t rdma link delete "$dev" || echo "rxe_fixture: could not delete $dev" >&2
  done
  for i in $(pairs); do t ip link delete "va$i" 2>/dev/null || true; done
  t ip rule del pref "$rule_pref" 2>/dev/null || true
  t ip route flush table "$table" 2>/dev/null || true
  # Put the local table back at pref 0 (the kernel's default) if it was moved.
  if ! ip rule show pref 0 | grep -q 'lookup local'; then t ip rule add pref 0 lookup local; fi
  while ip rule show pref "$local_pref" | grep -q 'lookup local'; do t ip rule del pref "$local_pref" lookup local; done
}

up() {
  local n="$1" i a b
  [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up takes a pair count 1..99, not '$n'"
  down
  # Move the local table behind our rule: otherwise the kernel delivers traffic between two local
  # addresses through lo and the veth (and so netem or a link cut) is never on the path.
  t ip rule add pref "$local_pref" lookup local
  t ip rule del pref 0 lookup local
  t ip rule add pref "$rule_pref" iif lo lookup "$table"
  # A packet arriving on vbI from vaI's address has a local source address: accept it, and do not
  # let reverse-path filtering drop it.
  t sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.default.accept_local=1 \
               net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  for ((i = 0; i < n; i++)); do
    a="$(addr_a "$i")"; b="$(addr_b "$i")"
    t ip link add "va$i" type veth peer name "vb$i"
    for end in "va$i" "vb$i"; do
      t sysctl -qw "net.ipv4.conf.$end.accept_local=1" "net.ipv4.conf.$end.rp_filter=0"
    done
    t ip addr add "$a/24" dev "va$i"
    t ip addr add "$b/24" dev "vb$i"
    t ip link set "va$i" up
    t ip link set "vb$i" up
    t ip route add "$b/32" dev "va$i" src "$a" table "$table"
    t ip route add "$a/32" dev "vb$i" src "$b" table "$table"
    t rdma link add "rxe_a$i" type rxe netdev "va$i" || die "rdma link add rxe_a$i failed (crc32_generic loaded?)"
    t rdma link add "rxe_b$i" type rxe netdev "vb$i" || die "rdma link add rxe_b$i failed"
  done
  # The GID table fills asynchronously after the address and the device exist.
  for ((i = 0; i < n; i++)); do
    for dev in "rxe_a$i" "rxe_b$i"; do
      local tries=0
      until gid_index "$dev" >/dev/null; do
        ((++tries < 100)) || die "$dev has no IPv4 RoCEv2 GID after 10 s"
        sleep 0.1
      done
    done
  done
  show
}

show() {
  local i
  for i in $(pairs); do
    echo "pair $i: va$i $(addr_a "$i") rxe_a$i gid $(gid_index "rxe_a$i" || echo '?')" \
         "<-> vb$i $(addr_b "$i") rxe_b$i gid $(gid_index "rxe_b$i" || echo '?')"
  done
}

case "${1:-}" in
  up) up "${2:?up needs a pair count}" ;;
  down) down ;;
  gid) gid_index "${2:?gid needs a device}" || die "${2} has no IPv4 RoCEv2 GID" ;;
  show) show ;;
  *) sed -n '3,8s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
