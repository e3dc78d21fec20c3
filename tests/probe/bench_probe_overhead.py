#!/usr/bin/env python3
"""Busbw of ff-collective through the plugin with `flexiforce probe watch` attached vs not, in one run
(alternating rounds, so drift in a shared machine hits both sides). Needs root for the attached rounds.

usage: bench_probe_overhead.py FLEXIFORCE FF_COLLECTIVE PLUGIN_SO [ROUNDS]"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

flexiforce, driver, plugin = sys.argv[1:4]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
SIZES = ("1M", "16M")


def run_driver():
    r = subprocess.run([driver, "--ranks", "2", "--launch-local", "--backend", "plugin", "--coll", "allreduce",
                        "--min-bytes", SIZES[0], "--max-bytes", SIZES[1], "--iters", "20", "--warmup", "2",
                        "--json", "--timeout-s", "120"], capture_output=True, text=True, check=True)
    return {x["bytes"]: x["busbw_gbps"] for x in json.loads(r.stdout)["results"]}


def attached():
    tmp = tempfile.mkdtemp()
    ready = os.path.join(tmp, "ready")
    w = subprocess.Popen([flexiforce, "probe", "watch", "--json", "--interval", "1", "--lib", plugin,
                          "--ready-file", ready], stdout=subprocess.PIPE, text=True)
    while not os.path.exists(ready):
        if w.poll() is not None:
            sys.exit("probe failed to attach")
        time.sleep(0.05)
    try:
        res = run_driver()
    finally:
        w.send_signal(signal.SIGINT)
        out, _ = w.communicate(timeout=30)
    final = [json.loads(l) for l in out.splitlines() if l.strip()][-1]["total"]
    msgs = sum(f["messages"] for f in final["flows"] if f["dir"] == "send")
    return res, msgs


off, on, counted = {}, {}, []
for _ in range(rounds):
    for k, v in run_driver().items():
        off.setdefault(k, []).append(v)
    res, msgs = attached()
    counted.append(msgs)
    for k, v in res.items():
        on.setdefault(k, []).append(v)
print(f"{'bytes':>10} {'busbw off GB/s':>15} {'busbw on GB/s':>14} {'cost':>7}   (median of {rounds} rounds)")
for k in sorted(off):
    a, b = statistics.median(off[k]), statistics.median(on[k])
    print(f"{k:>10} {a:15.3f} {b:14.3f} {100 * (a - b) / a:6.1f}%")
print("messages counted by the probe per attached round:", counted)
