#!/usr/bin/python3
"""Two jobs with different SLAs at once on the fabric emulator: DSCP marking and Level-3 pacing.

Usage: fabric_sla_pacing.py FF_COLLECTIVE [--size BYTES] [--iters N] [--link-mbps M] [--cap-pct P]

Builds 2 hosts on one leaf (tests/fabric/fabric.py run) unless FF_FABRIC_STATE is set, puts an
nftables table with one counter per DSCP value in the leaf's forward chain, then runs two 2-rank
ff-collective AllReduce jobs between the same two hosts at the same time, both steering
(AI_FLEXIFORCE_ENABLE=1) with FLEXIFORCE_LINK_SPEED_MBPS=M:
  job A: AI_SLA_LATENCY=40 (Level 1, EF 46, unpaced)
  job B: no SLA (Level 3, AF11 10, paced to P% of M per connection)
and asserts
  (a) the leaf forwarded at least each job's payload in its own DSCP (46 and 10), different values;
  (b) job B's per-connection rate (bytes one rank sends per iteration / slowest rank's iteration
      time, i.e. busbw for 2 ranks) is <= the cap + 10%, and job A's is above the cap.
A control run of job B observe-only (AI_FLEXIFORCE_ENABLE=0) must exceed the cap and carry DSCP 0,
so the pacing check is shown able to fail and observe-only is shown to change nothing.
Exit 0 pass, 1 fail, 77 skipped (not root).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.join(HERE, "..", "fabric", "fabric.py")
SKIP = 77
DSCPS = (0, 10, 34, 46)
# nft -j prints well-known code points by name.
DSCP_NAMES = {"cs0": 0, "af11": 10, "af41": 34, "ef": 46}
TABLE = "ffdscp"


def nft(netns, script):
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=script.encode(), check=True)


def install_counters(netns):
    rules = "\n".join(f"    ip dscp {d} counter" for d in DSCPS)
    nft(netns, f"table inet {TABLE} {{\n  chain count_dscp {{\n    type filter hook forward priority 0; policy accept;\n"
               f"{rules}\n  }}\n}}\n")


def read_counters(netns):
    """{dscp: (packets, bytes)} from the leaf's forward chain."""
    out = subprocess.run(["ip", "netns", "exec", netns, "nft", "-j", "list", "table", "inet", TABLE],
                         stdout=subprocess.PIPE, check=True).stdout
    res = {}
    for item in json.loads(out)["nftables"]:
        rule = item.get("rule")
        if not rule:
            continue
        dscp = counter = None
        for e in rule["expr"]:
            if "match" in e and e["match"]["left"].get("payload", {}).get("field") == "dscp":
                dscp = e["match"]["right"]
            if "counter" in e:
                counter = (e["counter"]["packets"], e["counter"]["bytes"])
        if dscp is not None and counter is not None:
            res[DSCP_NAMES.get(dscp, dscp) if isinstance(dscp, str) else int(dscp)] = counter
    return res


def start_job(binary, state, env_extra, port, size, iters, warmup, result_dir, name):
    hosts = [n for n in state["nodes"] if n["kind"] == "host"][:2]
    nic0 = {n["host"]: n for n in state["nics"] if n["rail"] == 0}
    root_ip = nic0[hosts[0]["id"]]["ip"]
    env = dict(os.environ, NCCL_SOCKET_IFNAME=nic0[hosts[0]["id"]]["ifname"], **env_extra)
    if state.get("topology_file"):
        env["FLEXIFORCE_TOPOLOGY"] = state["topology_file"]
    procs = []
    for rank, host in enumerate(hosts):
        cmd = ["ip", "netns", "exec", host["netns"], binary, "--rank", str(rank), "--nranks", "2",
               "--rendezvous", f"{root_ip}:{port}", "--bind-ip", nic0[host["id"]]["ip"], "--coll", "allreduce",
               "--min-bytes", str(size), "--max-bytes", str(size), "--iters", str(iters), "--warmup", str(warmup),
               "--timeout-s", "60"]
        if rank == 0:
            cmd += ["--result-file", os.path.join(result_dir, name + ".json")]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL))
    return procs


def finish_job(procs, result_dir, name):
    codes = [p.wait(timeout=120) for p in procs]
    if any(codes):
        raise RuntimeError(f"job {name}: ranks exited {codes}")
    with open(os.path.join(result_dir, name + ".json")) as f:
        r = json.load(f)["results"][0]
    # 2 ranks: each rank sends size bytes per AllReduce iteration over its one connection; busbw is that rate.
    return r["busbw_gbps"] * 8000.0  # Mbit/s


def run(args, state_file):
    with open(state_file) as f:
        state = json.load(f)
    leaf = next(n for n in state["nodes"] if n["kind"] == "leaf")["netns"]
    install_counters(leaf)
    common = {"AI_FLEXIFORCE_ENABLE": "1", "FLEXIFORCE_LINK_SPEED_MBPS": str(args.link_mbps),
              "FLEXIFORCE_LEVEL3_CAP_PCT": str(args.cap_pct), "FLEXIFORCE_STATS": "0"}
    env_a = dict(common, AI_SLA_LATENCY="40", AI_TASK_ID="sla-job-a")
    env_b = dict(common, AI_TASK_ID="bulk-job-b")
    env_b.pop("AI_SLA_LATENCY", None)
    os.environ.pop("AI_SLA_LATENCY", None)
    cap = args.link_mbps * args.cap_pct / 100.0
    result_dir = os.path.dirname(os.path.abspath(state_file))
    payload = args.size * (args.iters + args.warmup) * 2  # job B: both ranks' sends over the run
    payload_a = args.size * (args.iters * 4 + args.warmup) * 2  # job A runs 4x the iterations, to overlap B

    t0 = time.monotonic()
    b = start_job(args.driver, state, env_b, 5311, args.size, args.iters, args.warmup, result_dir, "job-b")
    a = start_job(args.driver, state, env_a, 5312, args.size, args.iters * 4, args.warmup, result_dir, "job-a")
    rate_a = finish_job(a, result_dir, "job-a")
    rate_b = finish_job(b, result_dir, "job-b")
    wall = time.monotonic() - t0
    counters = read_counters(leaf)

    # Control: job B observe-only.
    before = read_counters(leaf)
    c = start_job(args.driver, state, dict(env_b, AI_FLEXIFORCE_ENABLE="0"), 5313, args.size, args.iters,
                  args.warmup, result_dir, "job-b-observe")
    rate_c = finish_job(c, result_dir, "job-b-observe")
    after = read_counters(leaf)
    delta = {d: (after[d][0] - before[d][0], after[d][1] - before[d][1]) for d in DSCPS}

    print(f"fabric_sla_pacing: cap {cap:.0f} Mbit/s per connection ({args.cap_pct}% of {args.link_mbps}); "
          f"both jobs done in {wall:.2f} s")
    print(f"  job A (SLA 40 us, level 1): {rate_a:8.1f} Mbit/s per connection")
    print(f"  job B (no SLA, level 3)   : {rate_b:8.1f} Mbit/s per connection")
    print(f"  job B observe-only        : {rate_c:8.1f} Mbit/s per connection")
    print("  leaf forward counters during A+B: " +
          ", ".join(f"dscp {d}: {counters[d][0]} pkts {counters[d][1]} B" for d in DSCPS))
    print("  during the observe-only run   : " +
          ", ".join(f"dscp {d}: {delta[d][0]} pkts {delta[d][1]} B" for d in DSCPS))
    errors = []
    if counters[46][1] < payload_a:
        errors.append(f"job A: only {counters[46][1]} B forwarded with DSCP 46 (EF), its payload alone is {payload_a} B")
    if counters[10][1] < payload:
        errors.append(f"job B: only {counters[10][1]} B forwarded with DSCP 10 (AF11), its payload alone is {payload} B")
    if rate_b > cap * 1.10:
        errors.append(f"job B ran at {rate_b:.1f} Mbit/s per connection, above the Level-3 cap {cap:.0f} + 10%")
    if rate_a <= cap:
        errors.append(f"job A ran at {rate_a:.1f} Mbit/s, not above the cap {cap:.0f}: Level 1 must not be paced")
    if rate_c <= cap * 1.10:
        errors.append(f"observe-only job B ran at {rate_c:.1f} Mbit/s, not above the cap: the pacing check "
                      f"cannot tell paced from unpaced here")
    if delta[0][1] < payload or delta[10][1] > delta[0][1] // 100:
        errors.append(f"observe-only job B must keep the default DSCP 0: {delta}")
    for e in errors:
        print("fabric_sla_pacing: " + e, file=sys.stderr)
    print("fabric_sla_pacing: " + ("PASS" if not errors else "FAIL"))
    return 0 if not errors else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("driver")
    ap.add_argument("--size", type=int, default=4 << 20)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--link-mbps", type=int, default=400)
    ap.add_argument("--cap-pct", type=int, default=80)
    args = ap.parse_args()
    args.driver = os.path.abspath(args.driver)
    if os.geteuid() != 0:
        print("fabric_sla_pacing: SKIP: needs root to create network namespaces", file=sys.stderr)
        return SKIP
    state = os.environ.get("FF_FABRIC_STATE")
    if state:
        return run(args, state)
    cmd = ["/usr/bin/python3", FABRIC, "run", "--hosts", "2", "--leaves", "1", "--spines", "1", "--nics", "1", "--",
           "/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
