#!/usr/bin/env python3
"""The README's main job (examples/demo.py) end to end: it exits 0 and its output shows what the
README promises - both tasks' results exact, each task's tagged connection and SLA level, the oracle's
paths, the failover timeline after the cut (on the fabric), the statistics with named paths, and the
probe report or a line saying why it is not available. Prints the measured duration."""
import os
import re
import subprocess
import sys
import time


def main():
    if len(sys.argv) != 3:
        print("usage: demo_check.py DEMO_PY BUILD_DIR", file=sys.stderr)
        return 2
    demo, build = sys.argv[1], sys.argv[2]
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, demo, "--build", build], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=600)
    took = time.monotonic() - t0
    out = run.stdout
    failures = []

    def need(cond, what):
        print(("ok:   " if cond else "FAIL: ") + what)
        if not cond:
            failures.append(what)

    need(run.returncode == 0, f"the demo exited 0 (exit {run.returncode})")
    for task in ("train-a", "infer-b"):
        need(re.search(rf"{task}: rank exit codes \[0(, 0)*\]: every result exact", out) is not None,
             f"{task}: every rank's results exact")
        need(re.search(rf"connect to \S+: task {task} level\d", out) is not None,
             f"{task}: a connection tagged with the task and its SLA level")
    fabric = os.geteuid() == 0 and "on loopback" not in out
    if fabric:
        need("primary " in out and "backup " in out, "the oracle's primary and backup paths per task")
        need(re.search(r">>> demo +cut ", out) is not None and "failover to " in out,
             "a link cut mid-run and failover events in the timeline")
        need(" via spine" in out, "statistics name the oracle's spine for steered paths")
    need("probe" in out and ("HTML report" in out or "[not available]" in out),
         "the probe's baseline report, or why it is not available")
    print(f"demo took {took:.1f} s ({'fabric' if fabric else 'loopback'})")
    if failures:
        print(out[-6000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
