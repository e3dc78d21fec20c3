#!/usr/bin/env python3
"""Root test: `probe report` started before a 2-rank loopback ff-collective job writes an event
timeline from the BPF ring buffer. Passes when:
  - report.json's timeline holds connect and accept events from each of the job's two rank processes
    (their pids, seen in /proc while the job ran), named with the job's task id, and no event of
    that task from another process;
  - each event's peer is an "address:port", its time lies within the test's run and the events are in
    time order; path_choice events name a path below the connection's path count;
  - with nothing dropped, the timeline holds exactly as many events of each kind as the event
    counters (every event the probe saw, of every process: the counters and the ring are fed by one
    program);
  - report.md and report.html carry the timeline section with the job's task.
Exit 77 (skip) without BPF permission.

usage: probe_report_timeline.py FLEXIFORCE FF_COLLECTIVE PLUGIN_SO"""
import calendar
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_testlib as lib  # noqa: E402

flexiforce, driver, plugin = sys.argv[1:4]
lib.skip_unless_bpf(flexiforce)

TASK = f"probe-timeline-{os.getpid()}"
CONTROL = ["connect", "accept", "path_choice", "failover", "drain", "failback", "pause", "resume", "path_up"]


def fail(msg, *procs):
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
    print("FAIL:", msg)
    sys.exit(1)


with tempfile.TemporaryDirectory() as tmp:
    out_dir = os.path.join(tmp, "report")
    t_start = time.time()
    report = lib.start_probe([flexiforce, "probe", "report", "--duration", "300", "--out", out_dir,
                              "--lib", plugin, "--no-scan"], os.path.join(tmp, "ready"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Long enough to find the ranks in /proc while it runs (a few seconds on this machine).
    job = subprocess.Popen([driver, "--ranks", "2", "--launch-local", "--backend", "plugin", "--plugin", plugin,
                            "--coll", "allreduce", "--min-bytes", str(1 << 20), "--max-bytes", str(1 << 20),
                            "--step-bytes", str(256 << 10), "--warmup", "400", "--iters", "1", "--timeout-s", "120"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, AI_TASK_ID=TASK, FLEXIFORCE_STATS="0"))
    ranks = set()
    while job.poll() is None:
        ranks.update(lib.plugin_processes(plugin, parent=job.pid))
        time.sleep(0.01)
    jout, jerr = job.communicate()
    if job.returncode != 0:
        fail(f"the job failed (exit {job.returncode}): {jout[-1000:]} {jerr[-2000:]}", report)
    if len(ranks) != 2:
        fail(f"found {sorted(ranks)} as the job's ranks in /proc, want 2 (job too short to see?)", report)
    time.sleep(0.3)
    report.send_signal(signal.SIGINT)
    rout, rerr = report.communicate(timeout=60)
    t_end = time.time()
    if report.returncode != 0:
        fail(f"report exited {report.returncode}: {rerr}")
    with open(os.path.join(out_dir, "report.json")) as f:
        rep = json.load(f)
    timeline = rep["timeline"]
    print(f"ranks {sorted(ranks)}; {len(timeline)} event(s), {rep['timeline_dropped']} dropped; counters",
          {k: rep["events"][k] for k in CONTROL})
    ok = True
    mine = [e for e in timeline if e["task"] == TASK]
    for e in mine[:12]:
        print("  ", e)
    for kind in ("connect", "accept"):
        pids = {e["pid"] for e in mine if e["event"] == kind}
        print(f"{kind}: from pids {sorted(pids)}")
        if pids != ranks:
            print(f"FAIL: {kind} events of task {TASK} came from {sorted(pids)}, want each rank {sorted(ranks)}")
            ok = False
    strays = [e for e in mine if e["pid"] not in ranks]
    if strays:
        print("FAIL: events of our task from other processes:", strays[:5])
        ok = False
    for e in timeline:
        if e["event"] not in CONTROL:
            print("FAIL: unknown event", e)
            ok = False
        # connect: the peer's listening address; accept: the remote end of the first path's socket.
        if not re.fullmatch(r"(\d+\.\d+\.\d+\.\d+|\[[0-9a-fA-F:.]+\]):\d+", e["peer"]):
            print("FAIL: peer is not address:port:", e)
            ok = False
    # Times: ISO 8601 UTC, within the run (1 s slack for the clock conversion), in order.
    walls = []
    for e in mine:
        m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{6})Z", e["time"])
        if not m:
            print("FAIL: time is not ISO 8601 UTC:", e["time"])
            ok = False
            continue
        walls.append(calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + int(m.group(2)) / 1e6)
    if walls and not (t_start - 1 <= min(walls) and max(walls) <= t_end + 1):
        print(f"FAIL: event times {min(walls)}..{max(walls)} outside the run {t_start}..{t_end}")
        ok = False
    monos = [e["mono_ns"] for e in timeline]
    if monos != sorted(monos):
        # The ring keeps commit order; several CPUs may commit slightly out of time order, never by much.
        if any(b < a - 10_000_000 for a, b in zip(monos, monos[1:])):
            print("FAIL: events out of time order by more than 10 ms")
            ok = False
    paths = {}
    for e in mine:
        if e["event"] == "connect":
            paths[e["pid"]] = max(paths.get(e["pid"], 0), e["details"]["paths"])
    for e in mine:
        if e["event"] == "path_choice" and not (0 <= e["path"] < max(1, paths.get(e["pid"], 64))):
            print("FAIL: path_choice path out of range:", e)
            ok = False
    if not any(e["event"] == "path_choice" for e in mine):
        print("FAIL: no path_choice event of our task")
        ok = False
    # path_up: one per path of each connect and accept, indices 0..paths-1; the connecting side names
    # "local->remote", the accepting side the remote end, so each connecting socket's local end is an
    # accepting path's remote end (one socket seen from both ranks), path index for path index.
    ups = [e for e in mine if e["event"] == "path_up"]
    for pid in sorted(ranks):
        for kind in ("connect", "accept"):
            want = sorted(i for e in mine if e["pid"] == pid and e["event"] == kind
                          for i in range(e["details"]["paths"]))
            side = [e for e in ups if e["pid"] == pid and ("->" in e["details"]["ends"]) == (kind == "connect")]
            if sorted(e["path"] for e in side) != want or not want:
                print(f"FAIL: pid {pid}: path_up paths {sorted(e['path'] for e in side)} for its {kind}, want {want}")
                ok = False
    sent = {(e["details"]["ends"].split("->")[0], e["path"]) for e in ups if "->" in e["details"]["ends"]}
    got = {(e["details"]["ends"], e["path"]) for e in ups if "->" not in e["details"]["ends"]}
    print(f"path_up: {len(sent)} connecting socket(s), {len(got)} accepted")
    if not sent or sent != got:
        print(f"FAIL: connecting path sockets {sorted(sent)} != accepted ones {sorted(got)}")
        ok = False
    if rep["timeline_dropped"] == 0:
        for kind in CONTROL:
            n = sum(1 for e in timeline if e["event"] == kind)
            if n != rep["events"][kind]:
                print(f"FAIL: {n} {kind} event(s) in the timeline, the counter says {rep['events'][kind]}")
                ok = False
    for name in ("report.md", "report.html"):
        with open(os.path.join(out_dir, name)) as f:
            text = f.read()
        if "Event timeline" not in text or TASK not in text.split("Event timeline", 1)[1]:
            print(f"FAIL: {name} has no timeline section naming {TASK}")
            ok = False
    sys.exit(0 if ok else 1)
