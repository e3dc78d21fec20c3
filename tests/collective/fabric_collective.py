#!/usr/bin/python3
"""Runs ff-collective with one rank per emulated host of the fabric emulator.

Usage: fabric_collective.py FF_COLLECTIVE [ff-collective options...]
Builds a fabric (tests/fabric/fabric.py run, 4 hosts by default) unless FF_FABRIC_STATE is
already set, then starts rank i in host i's namespace with `ip netns exec`, bound to the
host's first NIC; rank 0 (host h0) hosts the rendezvous. NCCL_SOCKET_IFNAME=eth0 is set so
the plugin uses the same rail. Exit: 0 all ranks passed; 77 not root (skip); otherwise the
first failing rank's status.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.join(HERE, "..", "fabric", "fabric.py")
RENDEZVOUS_PORT = 5301  # below the fabric's entropy port range, so it never selects a spine
SKIP = 77


def run_ranks(binary, args, state_file, timeout_s):
    with open(state_file) as f:
        state = json.load(f)
    hosts = [n for n in state["nodes"] if n["kind"] == "host"]
    nic0 = {n["host"]: n for n in state["nics"] if n["rail"] == 0}
    nranks = len(hosts)
    root_ip = nic0[hosts[0]["id"]]["ip"]
    procs = []
    env = dict(os.environ, NCCL_SOCKET_IFNAME=nic0[hosts[0]["id"]]["ifname"])
    for rank, host in enumerate(hosts):
        ip = nic0[host["id"]]["ip"]
        cmd = ["ip", "netns", "exec", host["netns"], binary, "--rank", str(rank), "--nranks", str(nranks),
               "--rendezvous", f"{root_ip}:{RENDEZVOUS_PORT}", "--bind-ip", ip] + args
        procs.append(subprocess.Popen(cmd, env=env))
    deadline = time.monotonic() + timeout_s + 30
    codes = [None] * nranks
    while None in codes:
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        if time.monotonic() > deadline:
            for i, p in enumerate(procs):
                if codes[i] is None:
                    print(f"fabric_collective: rank {i} still running past the deadline; killing it", file=sys.stderr)
                    p.kill()
                    codes[i] = p.wait()
        time.sleep(0.05)
    bad = [(i, c) for i, c in enumerate(codes) if c != 0]
    for i, c in bad:
        print(f"fabric_collective: rank {i} (host {hosts[i]['id']}) exited with {c}", file=sys.stderr)
    return bad[0][1] if bad else 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    binary = os.path.abspath(sys.argv[1])
    args = sys.argv[2:]
    if os.geteuid() != 0:
        print("fabric_collective: SKIP: needs root to create network namespaces", file=sys.stderr)
        return SKIP
    state = os.environ.get("FF_FABRIC_STATE")
    if state:
        return run_ranks(binary, args, state, 120)
    # Re-enter this script inside `fabric.py run`, which builds the fabric, sets
    # FF_FABRIC_STATE and tears everything down afterwards (also on error or signal).
    cmd = ["/usr/bin/python3", FABRIC, "run", "--hosts", "4", "--", "/usr/bin/python3", os.path.abspath(__file__),
           binary] + args
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
