#!/usr/bin/python3
"""busbw of 4-rank AllReduce through the plugin beside the driver's raw TCP backend, on the
fabric emulator, in one run (sizes interleaved so machine drift hits both).

Usage: fabric_bench.py FF_COLLECTIVE [--min-bytes 1M] [--max-bytes 256M] [--iters N] [--warmup 5] [--runs 3]
       [--streams 2] [--pin] [--json]
Needs root (exit 77 otherwise). One rank per emulated host, all on rail 0 (NCCL_SOCKET_IFNAME=eth0);
the plugin uses FLEXIFORCE_PATHS=<streams> paths, the raw backend the same number of sockets.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.join(HERE, "..", "fabric", "fabric.py")
PORT = 5302
SKIP = 77


def parse_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def run_once(binary, state, backend, size, iters, streams, pin=False, test_all=False, warmup=5):
    st = json.load(open(state))
    hosts = [n for n in st["nodes"] if n["kind"] == "host"]
    nic0 = {n["host"]: n for n in st["nics"] if n["rail"] == 0}
    root_ip = nic0[hosts[0]["id"]]["ip"]
    env = dict(os.environ, NCCL_SOCKET_IFNAME="=" + nic0[hosts[0]["id"]]["ifname"], FLEXIFORCE_PATHS=str(streams))
    procs = []
    for rank, h in enumerate(hosts):
        taskset = ["taskset", "-c", str(rank % os.cpu_count())] if pin else []
        cmd = ["ip", "netns", "exec", h["netns"]] + taskset + [binary, "--rank", str(rank), "--nranks", str(len(hosts)),
               "--rendezvous", f"{root_ip}:{PORT}", "--bind-ip", nic0[h["id"]]["ip"], "--coll", "allreduce",
               "--min-bytes", str(size), "--max-bytes", str(size), "--iters", str(iters), "--warmup", str(warmup),
               "--backend", backend, "--raw-streams", str(streams), "--json", "--timeout-s", "300"] + (["--test-all"] if test_all else [])
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL))
    out = procs[0].communicate()[0]
    codes = [procs[0].returncode] + [p.wait() for p in procs[1:]]
    if any(codes):
        raise SystemExit(f"fabric_bench: {backend} {size} B failed: exit codes {codes}")
    return json.loads(out)["results"][0]["busbw_gbps"]


def default_iters(size):
    # 256 MiB of traffic per launch, 3 to 200 iterations: 200 at 1 MiB (~0.3 s), 3 from 128 MiB.
    # At 1 MiB the raw backend ran faster over its first ~25 iterations of a fresh connection than
    # later (0.76-0.84 GB/s over iterations 6-25, 0.56-0.63 over 51-70; the plugin 0.58-0.62 in both),
    # so 20 timed iterations after 5 warm-ups (the default before) measured raw's start, not its
    # steady state: plugin/raw 0.66-0.83x there, 0.83-1.02x at 200 iterations.
    return max(3, min(200, (256 << 20) // size))


def inside(args):
    state = os.environ["FF_FABRIC_STATE"]
    rows = []
    size = parse_bytes(args.min_bytes)
    while size <= parse_bytes(args.max_bytes):
        iters = args.iters or default_iters(size)
        plugin_runs, raw_runs = [], []
        for _ in range(args.runs):  # alternating, so the host's drift hits both arms alike
            plugin_runs.append(run_once(args.binary, state, "plugin", size, iters, args.streams, args.pin,
                                        args.test_all, args.warmup))
            raw_runs.append(run_once(args.binary, state, "raw", size, iters, args.streams, args.pin,
                                     args.test_all, args.warmup))
        plugin, raw = statistics.median(plugin_runs), statistics.median(raw_runs)
        pairs = [p / r for p, r in zip(plugin_runs, raw_runs) if r]
        rows.append({"bytes": size, "iters": iters, "warmup": args.warmup, "runs": args.runs,
                     "plugin_busbw_gbps": plugin, "raw_busbw_gbps": raw, "ratio": plugin / raw if raw else None,
                     "plugin_runs_gbps": plugin_runs, "raw_runs_gbps": raw_runs, "pair_ratios": pairs})
        if not args.json:
            spread = f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else "-"
            print(f"{size:>12} {plugin:>12.3f} {raw:>12.3f} {plugin / raw if raw else 0:>8.2f} {spread:>11}", flush=True)
        size *= 2
    if args.json:
        print(json.dumps({"ranks": 4, "streams": args.streams, "runs": args.runs,
                          "fabric": "4 hosts, 2 leaves, 2 spines", "rows": rows}, indent=2))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--min-bytes", default="1M")
    ap.add_argument("--max-bytes", default="256M")
    ap.add_argument("--iters", type=int, default=0, help="timed iterations per size (default: 256 MiB of traffic, 3 to 200: 200 at 1 MiB, "
                         "3 from 128 MiB)")
    ap.add_argument("--warmup", type=int, default=5,
                    help="untimed iterations per launch before the timed ones (default 5, as nccl-tests' -w); "
                         "a launch is a fresh connection, whose first iterations also pay its TCP slow start")
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3,
                    help="launches per backend and size, alternating plugin and raw (default 3); the figures "
                         "are the medians, the pairs column the lowest and highest plugin/raw ratio of launch k "
                         "against raw launch k, which ran right after it")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pin", action="store_true",
                    help="run rank r on CPU r mod ncpu (taskset), the same placement for both backends")
    ap.add_argument("--test-all", action="store_true",
                    help="the driver tests every outstanding request each pass (default: the oldest of each "
                         "direction, as NCCL's proxy does)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.warmup < 0 or args.iters < 0:
        ap.error("--warmup and --iters take a whole number >= 0 (--iters 0: scaled by size)")
    if args.runs < 1:
        ap.error("--runs takes a whole number >= 1")
    args.binary = os.path.abspath(args.binary)
    if args.inside:
        return inside(args)
    if os.geteuid() != 0:
        print("fabric_bench: SKIP: needs root to create network namespaces", file=sys.stderr)
        return SKIP
    if not args.json:
        print("# 4-rank ring AllReduce on the fabric emulator: busbw GB/s (nccl-tests definition)")
        print(f"# medians of {args.runs} launch(es) per backend, alternating; pairs: lowest-highest plugin/raw "
              "ratio of launch k against raw launch k")
        print(f"{'bytes':>12} {'plugin':>12} {'raw':>12} {'ratio':>8} {'pairs':>11}")
    cmd = ["/usr/bin/python3", FABRIC, "run", "--hosts", "4", "--", "/usr/bin/python3", os.path.abspath(__file__),
           "--inside"] + sys.argv[1:]
    return subprocess.call(cmd, stdout=None)


if __name__ == "__main__":
    sys.exit(main())
