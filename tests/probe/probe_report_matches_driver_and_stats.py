#!/usr/bin/env python3
"""Root test: `flexiforce probe report --duration 300 --out DIR` started before two jobs (two tasks
at once on loopback, the plugin's eager path and its acknowledged path), stopped by SIGINT once they
ended (Ctrl-C ends the observation early and writes the report; waiting out a fixed duration would
only race the jobs). For every task, collective and direction, report.json must equal, in messages
and bytes:
  - the ring schedule's count for the run (computed here from sizes, ranks and step);
  - what the driver itself moved (ff-collective's JSON: completed isend/irecv steps and bytes, all ranks);
  - `flexiforce stats --json` for the same processes (their statistics files, kept after exit).
Latency: the plugin records a send's statistics and fires its send_done probe with the same measured
value, so the send-side latency sums must be equal to the nanosecond. A receive's statistics are
recorded first and the probe's clock is read after that, so the probe's receive sum is at least the
statistics' and at most RECV_SKEW_NS per message (on average) above it: the cost of one Record call,
0.2-0.4 us here, plus whatever preemption fell between the two clock reads on a busy 2-core host.
The two log2 histograms use different bucket edges ([2^b, 2^(b+1)) vs (2^(b-1), 2^b]), so only their
totals are compared (each must hold every message).
Exit 77 (skip) without BPF permission.

usage: probe_report_matches_driver_and_stats.py FLEXIFORCE FF_COLLECTIVE PLUGIN_SO"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_testlib as lib  # noqa: E402

flexiforce, driver, plugin = sys.argv[1:4]
lib.skip_unless_bpf(flexiforce)

RECV_SKEW_NS = 20_000
WARMUP, ITERS = 2, 3
# Task A: 4 ranks, 1-2 MiB in 128 KiB steps (above FLEXIFORCE_EAGER_BYTES: each send completes on its
# acknowledgement). Task B: 3 ranks, 3 MiB in 48 KiB steps (eager sends, completed when handed over),
# AllReduce's 1 MiB blocks end in a partial step.
JOBS = {
    f"probe-report-a-{os.getpid()}": dict(ranks=4, colls=["allreduce", "allgather"], sizes=[1 << 20, 2 << 20],
                                          step=128 << 10),
    f"probe-report-b-{os.getpid()}": dict(ranks=3, colls=["broadcast", "allreduce"], sizes=[3 << 20], step=48 << 10),
}

failures = []


def check(what, got, want):
    ok = got == want
    print(f"  {'ok  ' if ok else 'FAIL'} {what}: {got}" + ("" if ok else f", expected {want}"))
    if not ok:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    out_dir, stats_dir = os.path.join(tmp, "report"), os.path.join(tmp, "stats")
    os.mkdir(stats_dir)
    # --no-scan: this build's plugin file only, not other jobs' copies on a shared host.
    report = lib.start_probe([flexiforce, "probe", "report", "--duration", "300", "--out", out_dir, "--lib", plugin,
                              "--no-scan"], os.path.join(tmp, "ready"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jobs = {}
    for task, j in JOBS.items():
        jobs[task] = subprocess.Popen(
            [driver, "--ranks", str(j["ranks"]), "--launch-local", "--backend", "plugin", "--plugin", plugin,
             "--coll", ",".join(j["colls"]), "--min-bytes", str(min(j["sizes"])), "--max-bytes", str(max(j["sizes"])),
             "--step-bytes", str(j["step"]), "--warmup", str(WARMUP), "--iters", str(ITERS), "--timeout-s", "120",
             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, AI_TASK_ID=task, FLEXIFORCE_STATS_DIR=stats_dir, FLEXIFORCE_STATS_KEEP="1"))
    results = {}
    for task, p in jobs.items():
        out, err = p.communicate(timeout=180)
        if p.returncode != 0:
            print(err)
            report.kill()
            sys.exit(f"FAIL: job {task} exited {p.returncode}")
        results[task] = json.loads(out)
    report.send_signal(signal.SIGINT)
    rout, rerr = report.communicate(timeout=60)
    print(rout.strip())
    if report.returncode != 0:
        sys.exit(f"FAIL: probe report exited {report.returncode}: {rerr}")
    probe = json.load(open(os.path.join(out_dir, "report.json")))
    md = open(os.path.join(out_dir, "report.md")).read()
    html = open(os.path.join(out_dir, "report.html")).read()
    stats_run = subprocess.run([flexiforce, "stats", "--json", "--include-stale", "--dir", stats_dir],
                               capture_output=True, text=True)
    if stats_run.returncode != 0:
        sys.exit(f"FAIL: flexiforce stats exited {stats_run.returncode}: {stats_run.stderr}")
    stats = json.loads(stats_run.stdout)

# Sums per (task, collective, direction).
def acc(table, key, messages, nbytes, lat, hist):
    a = table.setdefault(key, [0, 0, 0, 0])
    a[0] += messages
    a[1] += nbytes
    a[2] += lat
    a[3] += hist


from_probe, from_stats = {}, {}
for f in probe["flows"]:
    if f["task"] in JOBS:
        acc(from_probe, (f["task"], f["collective"].lower(), f["dir"]), f["messages"], f["bytes"], f["latency_sum_ns"],
            sum(f["latency_hist_log2_ns"]))
stats_pids = set()
for proc in stats["processes"]:
    if proc["dropped_records"] != 0:
        failures.append(f"pid {proc['pid']} dropped {proc['dropped_records']} statistics records")
    for f in proc["flows"]:
        if f["task"] not in JOBS:
            continue
        stats_pids.add(proc["pid"])
        for d in ("send", "recv"):
            x = f[d]
            acc(from_stats, (f["task"], f["collective"].lower(), d), x["messages"], x["bytes"], x["latency_sum_ns"],
                sum(b["count"] for b in x["latency_histogram"]))

for task, j in JOBS.items():
    r = results[task]
    check(f"{task}: statistics files are the job's ranks", sorted(p for p in stats_pids if p in r["rank_pids"]),
          sorted(r["rank_pids"]))
    for coll in j["colls"]:
        print(f"{task} {coll} ({j['ranks']} ranks, {WARMUP}+{ITERS} iterations per size):")
        rows = [x for x in r["results"] if x["coll"] == coll]
        check(f"{coll}: all results exact", all(x["ok"] for x in rows), True)
        sched = [sum(lib.ring_sends(coll, j["ranks"], s, j["step"])[i] for s in j["sizes"]) * (WARMUP + ITERS)
                 for i in (0, 1)]
        drv = {"send": (sum(x["messages"]["sends"] for x in rows), sum(x["messages"]["send_bytes"] for x in rows)),
               "recv": (sum(x["messages"]["recvs"] for x in rows), sum(x["messages"]["recv_bytes"] for x in rows))}
        for d in ("send", "recv"):
            p = from_probe.get((task, coll, d), [0, 0, 0, 0])
            s = from_stats.get((task, coll, d), [0, 0, 0, 0])
            check(f"{d} messages/bytes, driver = schedule", list(drv[d]), sched)
            check(f"{d} messages/bytes, probe report = driver", p[:2], list(drv[d]))
            check(f"{d} messages/bytes, flexiforce stats = driver", s[:2], list(drv[d]))
            check(f"{d} histogram totals (probe, stats) = messages", [p[3], s[3]], [drv[d][0]] * 2)
            if d == "send":
                check("send latency sum ns, probe = stats", p[2], s[2])
            else:
                skew = p[2] - s[2]
                ok = 0 <= skew <= RECV_SKEW_NS * max(1, p[0])
                print(f"  {'ok  ' if ok else 'FAIL'} recv latency sum: probe - stats = {skew} ns "
                      f"({skew / max(1, p[0]):.0f} ns per message; bound 0..{RECV_SKEW_NS})")
                if not ok:
                    failures.append(f"{task} {coll} recv latency skew {skew}")
    check(f"{task} named in report.md and report.html", [task in md, task in html], [True, True])

if failures:
    print("FAIL:", len(failures), "mismatch(es)")
    sys.exit(1)
print("PASS")
