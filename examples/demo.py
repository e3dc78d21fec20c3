#!/usr/bin/python3
"""FlexiForce demo: real collective traffic through the plugin, SLA tagging, the oracle's path
choice, a link failure with failover, and the per-task statistics report.

Usage: examples/demo.py [--build DIR] [--loopback] [--keep]
As root it builds a 4-host leaf-spine fabric of network namespaces (tests/fabric/fabric.py) and
runs one rank per emulated host; without root it runs the ranks on loopback (no link cut).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FABRIC = os.path.join(ROOT, "tests", "fabric", "fabric.py")
RENDEZVOUS_PORT = 5301


def banner(text):
    print(f"\n=== {text} ===", flush=True)


def run(cmd, **kw):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, **kw)


def fabric(*args, capture=False):
    r = subprocess.run(["/usr/bin/python3", FABRIC, *args], capture_output=capture, text=True)
    if r.returncode != 0:
        raise SystemExit(f"demo: fabric.py {' '.join(args)} failed ({r.returncode}): {r.stderr if capture else ''}")
    return r.stdout if capture else None


def plugin_env(stats_dir, topology=None):
    env = dict(os.environ)
    env.update({
        "AI_SLA_LATENCY": "50",          # the job's declared latency SLA: 50 us (train.py sets it)
        "AI_TASK_ID": "demo-llm-pretrain",
        "AI_FLEXIFORCE_ENABLE": "1",     # steer: choose paths and traffic classes
        "FLEXIFORCE_STATS_DIR": stats_dir,
        "FLEXIFORCE_STATS_KEEP": "1",
        "NCCL_DEBUG": "INFO",
        "FF_TEST_VERBOSE": "1",        # the driver stands in for NCCL: print INFO lines like NCCL_DEBUG=INFO
    })
    if topology:
        env["FLEXIFORCE_TOPOLOGY"] = topology
    return env


def show_plugin_log(path):
    interesting = ("task ", "connect to", "failover", "is down", "SLA", "dev 0", "rejected", "failed", "rank", "error",
                   "failback", "reconnected", "NIC", "draining", "dual-path")
    with open(path) as f:
        lines = [l.rstrip() for l in f if ("FlexiForce" in l or "ff-collective" in l or "rank" in l) and any(k in l for k in interesting)]
    seen = set()
    for l in lines:
        key = l.split("NET/FlexiForce : ", 1)[-1]
        if key in seen:
            continue
        seen.add(key)
        print("  " + l)


def demo_fabric(build, stats_dir):
    ffc = os.path.join(build, "bin", "ff-collective")
    ff = os.path.join(build, "bin", "flexiforce")
    tmp = tempfile.mkdtemp(prefix="ff-demo-")
    state, topo = os.path.join(tmp, "state.json"), os.path.join(tmp, "topology.json")
    banner("1. Fabric: 4 hosts x 2 NICs, 2 leaves, 2 spines (network namespaces, veth)")
    fabric("up", "--hosts", "4", "--leaves", "2", "--spines", "2", "--nics", "2", "--state", state,
           "--topology-out", topo)
    try:
        st = json.load(open(state))
        hosts = [n for n in st["nodes"] if n["kind"] == "host"]
        nics = {(n["host"], n["rail"]): n for n in st["nics"]}
        print(f"  hosts: " + ", ".join(f"{h['id']}={nics[(h['id'], 0)]['ip']},{nics[(h['id'], 1)]['ip']}" for h in hosts))

        banner("2. Path oracle: rank the paths h0 -> h1 under a 50 us SLA (Level 1) and with no SLA")
        run([ff, "path", "rank", "--topology", topo, "--src", nics[("h0", 0)]["ip"], "--dst", nics[("h1", 0)]["ip"],
             "--sla-us", "50", "--k", "4"])
        run([ff, "path", "rank", "--topology", topo, "--src", nics[("h0", 0)]["ip"], "--dst", nics[("h1", 0)]["ip"],
             "--sla-us", "0", "--k", "4"])

        banner("3. Training traffic: 4 ranks, AllReduce + AllGather + Broadcast through the plugin; "
               "a spine link is cut mid-run, then restored")
        env = plugin_env(stats_dir, topo)
        env["NCCL_SOCKET_IFNAME"] = "eth"
        env["FLEXIFORCE_PATHS"] = "2"
        env["FLEXIFORCE_FAILBACK_MS"] = "500"  # carrier stable this long -> reconnect the failed path
        root_ip = nics[("h0", 0)]["ip"]
        log = os.path.join(tmp, "ranks.log")
        procs = []
        with open(log, "w") as lf:
            for rank, h in enumerate(hosts):
                cmd = ["ip", "netns", "exec", h["netns"], ffc, "--rank", str(rank), "--nranks", str(len(hosts)),
                       "--rendezvous", f"{root_ip}:{RENDEZVOUS_PORT}", "--bind-ip", nics[(h["id"], 0)]["ip"],
                       "--coll", "all", "--min-bytes", "1M", "--max-bytes", "32M", "--iters", "40", "--timeout-s", "120"]
                procs.append(subprocess.Popen(cmd, env=env, stdout=None if rank == 0 else subprocess.DEVNULL,
                                              stderr=lf))
            time.sleep(1.5)
            # spine1: the driver's own rendezvous (ephemeral ports, below the entropy ranges) rides
            # spine0, so the cut hits only traffic the plugin steered.
            cut = [l["id"] for l in st["links"] if l["id"].endswith("--spine1")][-1]
            print(f"\n  >>> cutting link {cut} (carrier loss) while the collectives run", flush=True)
            fabric("link-down", "--state", state, cut)
            time.sleep(1.5)
            print(f"\n  >>> restoring link {cut}: the failed paths reconnect once it is stable (failback)",
                  flush=True)
            fabric("link-up", "--state", state, cut)
            codes = [p.wait() for p in procs]
        print(f"\n  rank exit codes: {codes} ({'all results exact' if not any(codes) else 'FAILED'})")
        banner("4. What the plugin logged (NCCL_DEBUG=INFO, FlexiForce lines)")
        show_plugin_log(log)
        banner("5. Per-link counters: bytes carried by each spine link")
        counters = json.loads(fabric("counters", "--state", state, "--json", capture=True))
        rows = counters if isinstance(counters, list) else counters.get("links", [])
        for c in rows:
            if "spine" in c["id"]:
                up = c["a_to_b"]["bytes"] / 2**20
                down = c["b_to_a"]["bytes"] / 2**20
                print(f"  {c['id']:18s} leaf->spine {up:9.1f} MiB   spine->leaf {down:9.1f} MiB")
        return max(codes)
    finally:
        fabric("down", "--state", state)


def demo_loopback(build, stats_dir):
    ffc = os.path.join(build, "bin", "ff-collective")
    banner("Training traffic on loopback (not root: no fabric emulator, no link cut)")
    env = plugin_env(stats_dir)
    r = run([ffc, "--ranks", "4", "--launch-local", "--coll", "all", "--min-bytes", "1M", "--max-bytes", "16M",
             "--iters", "10"], env=env)
    return r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--loopback", action="store_true", help="run on loopback even as root")
    args = ap.parse_args()
    ff = os.path.join(args.build, "bin", "flexiforce")
    stats_dir = tempfile.mkdtemp(prefix="ff-demo-stats-")
    print("FlexiForce demo: the job declares AI_SLA_LATENCY=50 (us), AI_TASK_ID=demo-llm-pretrain, "
          "AI_FLEXIFORCE_ENABLE=1")
    if os.geteuid() == 0 and not args.loopback:
        rc = demo_fabric(args.build, stats_dir)
    else:
        rc = demo_loopback(args.build, stats_dir)
    banner("6. Statistics report: bytes per task, collective, peer and path (flexiforce stats)")
    run([ff, "stats", "--dir", stats_dir, "--include-stale"])
    subprocess.run(["rm", "-rf", stats_dir])
    print("\nThe probe report (flexiforce probe) comes with the probe issue; see README.")
    return rc


if __name__ == "__main__":
    sys.exit(main())
