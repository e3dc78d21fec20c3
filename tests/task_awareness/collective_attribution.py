#!/usr/bin/python3
"""Checks that every byte of a job is attributed to its task and collective, on both ends, exactly.

Usage: collective_attribution.py FF_COLLECTIVE FLEXIFORCE --attribution MODE [--ranks N] [sweep options]

Runs ff-collective (AllReduce, AllGather, Broadcast; N ranks over loopback through the plugin)
with FLEXIFORCE_STATS_DIR=<temp dir>, FLEXIFORCE_STATS_KEEP=1 and a unique AI_TASK_ID, then reads
`flexiforce stats --dir <temp dir> --include-stale --json` and compares, for every rank (its
process, from the driver's rank_pids), the send and receive bytes per {task, collective} with
what the ring algorithm moves for the sizes and iterations run (warmup included).

MODE: profiler   - NCCL 2.28 as it is: profiler events + setNetAttr (the profiler wins)
      profiler-only - the profiler alone (setNetAttr never called): proves the phandle walk
      net-attr   - --no-profiler: setNetAttr alone
      none       - neither (negative control): every byte must be "unknown"
Exit 0 when every number matches; 1 with one line per mismatch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid

ESZ = 4  # int32
COLL_NAMES = {"allreduce": "AllReduce", "allgather": "AllGather", "broadcast": "Broadcast"}


def block(count, n, b):
    return count * (b + 1) // n - count * b // n


def expected_bytes(coll, rank, n, root, count):
    """(send, recv) bytes of one iteration of the ring schedule on `rank`."""
    if coll == "allreduce":
        # Reduce-scatter then all-gather, n-1 rounds each, one block per round and direction.
        send = sum(block(count, n, (rank - r) % n) + block(count, n, (rank + 1 - r) % n) for r in range(n - 1))
        recv = sum(block(count, n, (rank - r - 1) % n) + block(count, n, (rank - r) % n) for r in range(n - 1))
        return send * ESZ, recv * ESZ
    if coll == "allgather":
        return (n - 1) * count * ESZ, (n - 1) * count * ESZ
    if coll == "broadcast":
        # A chain from the root: everyone but the root receives, everyone but the root's predecessor sends.
        send = 0 if (rank + 1) % n == root else count
        recv = 0 if rank == root else count
        return send * ESZ, recv * ESZ
    raise ValueError(coll)


def expected_table(args):
    """{rank: {CollectiveName: [send, recv]}} for the whole sweep."""
    n = args.ranks
    out = {r: {} for r in range(n)}
    for coll in ("allreduce", "allgather", "broadcast"):
        last = None
        b = args.min_bytes
        while b <= args.max_bytes:
            # nccl-tests sizes: AllGather's is the gathered output; the driver runs a repeated count once.
            count = max(b // (ESZ * n), 1) if coll == "allgather" else max(b // ESZ, 1)
            b *= 2
            if count == last:
                continue
            last = count
            for r in range(n):
                s, v = expected_bytes(coll, r, n, args.root, count)
                e = out[r].setdefault(COLL_NAMES[coll], [0, 0])
                e[0] += s * (args.warmup + args.iters)
                e[1] += v * (args.warmup + args.iters)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("driver")
    ap.add_argument("flexiforce")
    ap.add_argument("--attribution", choices=["profiler", "profiler-only", "net-attr", "none"], required=True)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--root", type=int, default=0)
    ap.add_argument("--min-bytes", type=int, default=4)
    ap.add_argument("--max-bytes", type=int, default=256 * 1024)
    ap.add_argument("--step-bytes", type=int, default=64 * 1024)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()

    mode_flags = {"profiler": ["--profiler"], "profiler-only": ["--profiler", "--no-net-attr"],
                  "net-attr": ["--no-profiler"], "none": ["--no-profiler", "--no-net-attr"]}[args.attribution]
    task = "attr-" + uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="ff-attr-") as d:
        env = dict(os.environ, FLEXIFORCE_STATS_DIR=d, FLEXIFORCE_STATS_KEEP="1", AI_TASK_ID=task,
                   FLEXIFORCE_STATS="1")
        cmd = [args.driver, "--ranks", str(args.ranks), "--launch-local", "--backend", "plugin", "--coll", "all",
               "--root", str(args.root), "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
               "--step-bytes", str(args.step_bytes), "--iters", str(args.iters), "--warmup", str(args.warmup),
               "--timeout-s", "60", "--json"] + mode_flags
        run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, timeout=150)
        if run.returncode != 0:
            print(f"collective_attribution: ff-collective exited {run.returncode}", file=sys.stderr)
            return 1
        report = json.loads(run.stdout)
        pids = report["rank_pids"]
        print(f"collective_attribution: task {task}, {report['transport']}")
        stats = subprocess.run([args.flexiforce, "stats", "--dir", d, "--include-stale", "--json"],
                               stdout=subprocess.PIPE, check=True, timeout=30)
        procs = {p["pid"]: p for p in json.loads(stats.stdout)["processes"]}

    want = expected_table(args)
    errors = []
    for rank, pid in enumerate(pids):
        if pid not in procs:
            errors.append(f"rank {rank} (pid {pid}): no statistics file")
            continue
        got = {}
        for f in procs[pid]["flows"]:
            if f["task"] != task:
                errors.append(f"rank {rank}: flow of task {f['task']!r}, expected only {task!r}")
            e = got.setdefault(f["collective"], [0, 0])
            e[0] += f["send"]["bytes"]
            e[1] += f["recv"]["bytes"]
        heat = [t.get("heat", 0) for t in procs[pid].get("tasks", []) if t.get("task") == task]
        if not heat or heat[0] <= 0:
            errors.append(f"rank {rank}: task {task} has no heat index in the statistics ({heat})")
        exp = want[rank]
        if args.attribution == "none":
            total = [sum(v[0] for v in exp.values()), sum(v[1] for v in exp.values())]
            exp = {"unknown": total}
        for coll in sorted(set(exp) | set(got)):
            e = exp.get(coll, [0, 0])
            g = got.get(coll, [0, 0])
            status = "ok" if e == g else "MISMATCH"
            print(f"  rank {rank} {coll:10s} send {g[0]:>9} recv {g[1]:>9}  expected send {e[0]:>9} "
                  f"recv {e[1]:>9}  {status}")
            if e != g:
                errors.append(f"rank {rank} {coll}: send/recv bytes {g}, expected {e}")
    for e in errors:
        print("collective_attribution: " + e, file=sys.stderr)
    print("collective_attribution: " + ("PASS" if not errors else f"FAIL ({len(errors)} mismatches)"))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
