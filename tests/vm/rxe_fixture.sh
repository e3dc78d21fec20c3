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
for tool in ip rdma; do command -v "$tool" >/dev/null || die "no $tool (package iproute2)"; done

addr_a() { echo "10.99.$1.1"; }
addr_b() { echo "10.99.$1.2"; }

# Every program start costs a 9p read under TCG (about half a second each on a busy 2-core host), so
# the fixture uses builtins where it can and feeds ip and rdma whole batches.

# The index of DEV's GID that is its IPv4 address (::ffff:a.b.c.d) of type RoCE v2.
gid_index() {
  local dev="$1" f n gid type
  for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
    n="${f##*/}"
    read -r gid <"$f" 2>/dev/null || continue
    read -r type <"/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$n" 2>/dev/null || continue
    if [[ "$gid" == 0000:0000:0000:0000:0000:ffff:* ]] && [ "$type" = "RoCE v2" ]; then
      echo "$n"
      return 0
    fi
  done
  return 1
}

pairs() {  # the pair numbers present now, from the va<i> interfaces
  local d
  for d in /sys/class/net/va[0-9]*; do
    [ -e "$d" ] && echo "${d##*/va}"
  done | sort -n
}

setsys() { echo "$2" >"/proc/sys/net/ipv4/conf/$1/$3"; }  # setsys IFACE VALUE KEY

down() {
  local line dev i batch=""
  while read -r line; do
    dev="${line#link }"; dev="${dev%%/*}"
    [[ "$dev" == rxe_[ab][0-9]* ]] && batch+="link delete $dev"$'\n'
  done < <(t rdma link show 2>/dev/null)
  [ -z "$batch" ] || t rdma -f -b - <<<"$batch" || echo "rxe_fixture: could not delete every rxe device" >&2
  batch=""
  for i in $(pairs); do batch+="link delete va$i"$'\n'; done
  # Put the local table back at pref 0 (the kernel's default) if it was moved.
  if ! grep -q 'lookup local' <<<"$(t ip rule show pref 0)"; then batch+="rule add pref 0 lookup local"$'\n'; fi
  grep -q 'lookup local' <<<"$(t ip rule show pref "$local_pref")" && batch+="rule del pref $local_pref lookup local"$'\n'
  [ -n "$(t ip rule show pref "$rule_pref")" ] && batch+="rule del pref $rule_pref"$'\n'
  batch+="route flush table $table"$'\n'
  # -force: keep going past a line that has nothing to do (an empty table, say).
  t ip -force -batch - <<<"$batch" 2>/dev/null || true
}

up() {
  local n="$1" i a b end links="" addrs="" rxe=""
  [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up takes a pair count 1..99, not '$n'"
  down
  for ((i = 0; i < n; i++)); do
    a="$(addr_a "$i")"; b="$(addr_b "$i")"
    links+="link add va$i type veth peer name vb$i"$'\n'
    addrs+="addr add $a/24 dev va$i"$'\n'"addr add $b/24 dev vb$i"$'\n'
    addrs+="link set va$i up"$'\n'"link set vb$i up"$'\n'
    addrs+="route add $b/32 dev va$i src $a table $table"$'\n'"route add $a/32 dev vb$i src $b table $table"$'\n'
    rxe+="link add rxe_a$i type rxe netdev va$i"$'\n'"link add rxe_b$i type rxe netdev vb$i"$'\n'
  done
  # Move the local table behind our rule: otherwise the kernel delivers traffic between two local
  # addresses through lo and the veth (and so netem or a link cut) is never on the path.
  t ip -batch - <<<"rule add pref $local_pref lookup local
rule del pref 0 lookup local
rule add pref $rule_pref iif lo lookup $table
$links" || die "ip could not set the rules or create the veth pairs"
  # A packet arriving on vbI from vaI's address has a local source address: accept it, and do not
  # let reverse-path filtering drop it.
  for end in all default $(for ((i = 0; i < n; i++)); do echo "va$i vb$i"; done); do
    setsys "$end" 1 accept_local
    setsys "$end" 0 rp_filter
  done
  t ip -batch - <<<"$addrs" || die "ip could not address or route the veth pairs"
  t rdma -b - <<<"$rxe" || die "rdma link add failed (crc32_generic loaded? rdma_rxe loaded?)"
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
