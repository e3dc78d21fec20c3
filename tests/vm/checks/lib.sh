# VM lane: helpers the in-VM checks source (refuse to run on the host, fail with a message, read counters).
[ "${FF_IN_VM:-0}" = 1 ] || { echo "$0: runs inside the VM (tests/vm/run.sh -- bash $0)" >&2; exit 2; }
checks_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fixture="$checks_dir/../rxe_fixture.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
# Packets a netdev has counted (rx_packets / tx_packets).
counter() { cat "/sys/class/net/$1/statistics/$2"; }
# Waits until a TCP port listens (perftest and the pingpong exchange their QP numbers over TCP).
wait_listen() {
  local port="$1" i
  for ((i = 0; i < 300; i++)); do
    [ -n "$(ss -Hltn "sport = :$port")" ] && return 0
    sleep 0.1
  done
  fail "nothing listens on TCP port $port after 30 s"
}
