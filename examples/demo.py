#!/usr/bin/python3
"""FlexiForce demo: two training tasks with different latency SLAs run collectives through the
plugin at the same time; each task's messages are tagged, the oracle chooses each task's paths, a
link is cut mid-run (failover, then failback), the results are checked exactly, and the probe
writes its baseline report of the traffic.

Usage: examples/demo.py [--build DIR] [--loopback]
As root it builds a 4-host leaf-spine fabric of network namespaces (tests/fabric/fabric.py) and
runs one rank of each task per emulated host; without root (or with --loopback) the ranks run on
loopback and there is no link to cut. A step that cannot run here says what is missing and the
demo goes on.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FABRIC = os.path.join(ROOT, "tests", "fabric", "fabric.py")

# The two jobs. Each is its own 4-rank group with its own rendezvous port (below the fabric's
# entropy port ranges, so the rendezvous is not steered). Sizes differ as the jobs would: the
# training job moves gradient-sized buffers, the inference job smaller ones.
TASKS = [
    {"id": "train-a", "sla_us": 50, "port": 5301, "coll": "allreduce,allgather",
     "min": "1M", "max": "8M", "iters": 12},
    {"id": "infer-b", "sla_us": 500, "port": 5302, "coll": "allreduce,broadcast",
     "min": "256K", "max": "2M", "iters": 40},
]
CUT_AFTER_CONNECTED_S = 0.5  # after every rank of both tasks has connected: traffic is under way
CONNECT_WAIT_S = 30.0        # cut anyway after this long
RESTORE_AFTER_S = 1.5
PROBE_READY_WAIT_S = 20.0
LOG_LINE_WIDTH = 150

_T0 = time.monotonic()


def banner(n, text):
    print(f"\n{'=' * 100}\n  {n}. {text}\n{'=' * 100}", flush=True)


def note(text):
    print(f"  {text}", flush=True)


def unavailable(what, why):
    print(f"  [not available] {what}: {why}", flush=True)


def trim(line, width=LOG_LINE_WIDTH):
    return line if len(line) <= width else line[:width - 3] + "..."


def run_shown(cmd, **kw):
    print("  $ " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd), flush=True)
    return subprocess.run(cmd, **kw)


def fabric(*args, capture=False):
    r = subprocess.run(["/usr/bin/python3", FABRIC, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"fabric.py {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout if capture else None


def task_env(task, stats_dir, topology=None, extra=None):
    env = dict(os.environ)
    env.update({
        "AI_TASK_ID": task["id"],
        "AI_SLA_LATENCY": str(task["sla_us"]),   # the job's declared latency SLA, microseconds
        "AI_FLEXIFORCE_ENABLE": "1",             # steer: oracle paths and SLA traffic classes
        "FLEXIFORCE_STATS_DIR": stats_dir,
        "FLEXIFORCE_STATS_KEEP": "1",            # keep the files after exit for the report below
        "FLEXIFORCE_FAILBACK_MS": "500",         # carrier stable this long -> reconnect a failed path
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,ENV,NET",     # as under NCCL: the plugin's NET lines need NET here
    })
    if topology:
        env["FLEXIFORCE_TOPOLOGY"] = topology
    env.update(extra or {})
    return env


class Events:
    """Every rank's log line, stamped with the time since the traffic started and its task."""

    # "[pid 123] WARN core/comm.cc:110 path 1 (...) is down ..." -> level and message
    LINE = re.compile(r"^\[pid \d+\] (WARN|INFO) \S+:\d+ (?:NET/FlexiForce : )?(.*)$")

    def __init__(self, raw_log):
        self.t_start = time.monotonic()
        self.items = []  # (t, task, rank, level, message)
        self.lock = threading.Lock()
        self.raw = open(raw_log, "w")

    def mark(self, text):
        with self.lock:
            self.items.append((time.monotonic() - self.t_start, "demo", "-", "----", text))

    def follow(self, stream, task, rank):
        for line in iter(stream.readline, ""):
            t = time.monotonic() - self.t_start
            line = line.rstrip("\n")
            m = self.LINE.match(line)
            level, msg = (m.group(1), m.group(2)) if m else ("", line)
            with self.lock:
                self.raw.write(f"{t:8.3f} {task} r{rank} {line}\n")
                self.items.append((t, task, rank, level, msg))
        stream.close()

    def select(self, keys, task=None):
        with self.lock:
            return [e for e in self.items if (task is None or e[1] == task) and any(k in e[4] for k in keys)]


def start_ranks(task, env, hosts, launch, events):
    procs = []
    for rank in range(hosts):
        p = subprocess.Popen(launch(task, rank), env=env, stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        threading.Thread(target=events.follow, args=(p.stderr, task["id"], rank), daemon=True).start()
        procs.append(p)
    return procs


def start_probe(ff, lib, out_dir, duration_s):
    """Starts `flexiforce probe report` and waits until its probes are attached. Returns the
    process, or None after printing why the probe cannot run here."""
    if os.geteuid() != 0:
        unavailable("probe report", "needs root (or CAP_BPF + CAP_PERFMON); run the demo as root")
        return None
    if subprocess.run([ff, "probe", "report", "--help"], capture_output=True).returncode != 0:
        unavailable("probe report", "this build has no BPF probe (clang, bpftool or libbpf-dev was missing at "
                    "configure time; `bash examples/setup.sh` installs them)")
        return None
    ready = os.path.join(out_dir, "attached")
    cmd = [ff, "probe", "report", "--duration", f"{duration_s:.0f}", "--out", out_dir, "--lib", lib,
           "--ready-file", ready]
    print("  $ " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + PROBE_READY_WAIT_S
    while time.monotonic() < deadline and p.poll() is None and not os.path.exists(ready):
        time.sleep(0.05)
    if os.path.exists(ready):
        note(f"probes attached to {os.path.relpath(lib, ROOT)}; observing for {duration_s:.0f} s while the tasks run")
        return p
    if p.poll() is None:
        p.terminate()
        p.wait()
        unavailable("probe report", f"its probes were not attached within {PROBE_READY_WAIT_S:.0f} s")
        return None
    err = (p.stderr.read() or p.stdout.read()).strip().splitlines()
    unavailable("probe report", f"exited with {p.returncode}: " + (err[-1] if err else "no message"))
    return None


def show_connect_choices(events):
    """The plugin's per-connection line: task, SLA level, traffic class, the oracle's paths."""
    for task in TASKS:
        lines = events.select(["connect to "], task["id"])
        note(f"{task['id']} (AI_SLA_LATENCY={task['sla_us']}): {len(lines)} connection(s); rank 0's:")
        for _, _, rank, _, msg in [l for l in lines if l[2] == 0][:1] or lines[:1]:
            # One line per part: the tags, then each of the oracle's paths (primary, backups).
            head, _, paths = msg.partition("; paths: ")
            note("    " + trim(head))
            for part in paths.split("; "):
                if part:
                    note("      " + trim(part))
        for _, _, _, _, msg in events.select(["SLA ", "unattainable"], task["id"])[:1]:
            if "unattainable" in msg:
                note("    " + trim(msg))


def show_timeline(events, max_per_task=8):
    keys = ["is down", "failover to", "draining", "back in service", "reconnected", "failback to", "cutting",
            "restoring", "restored", "cut "]
    rows = events.select(keys)
    if not rows:
        note("no failover events (no link was cut, or no path crossed it)")
        return
    shown = {}
    hidden = {}
    for t, task, rank, level, msg in sorted(rows, key=lambda r: r[0]):
        if task != "demo":
            shown[task] = shown.get(task, 0) + 1
            if shown[task] > max_per_task:
                hidden[task] = hidden.get(task, 0) + 1
                continue
        who = ">>> demo" if task == "demo" else f"{task} r{rank}"
        note(trim(f"t={t:6.3f}s  {who:11s} {msg}"))
    for task, n in hidden.items():
        note(f"(and {n} more {task} event(s); the whole log is in the demo's ranks.log)")


def show_results(task, procs, outputs):
    codes = [p.returncode for p in procs]
    ok = not any(codes)
    note(f"{task['id']}: rank exit codes {codes}: {'every result exact' if ok else 'FAILED'}")
    # Rank 0 prints one line per collective and size (nccl-tests style); keep the table rows.
    rows = [l for l in outputs.splitlines() if l.strip() and not l.startswith("#")]
    for l in rows[:8]:
        note("    " + trim(l))
    if len(rows) > 8:
        note(f"    ({len(rows) - 8} more rows)")
    return ok


def run_tasks(build, stats_dir, tmp, hosts, launch, topology, cut=None, extra_env=None):
    """Runs both tasks at once; `cut` (optional) is called with the event log once they started."""
    events = Events(os.path.join(tmp, "ranks.log"))
    groups = []
    for task in TASKS:
        env = task_env(task, stats_dir, topology, extra_env)
        procs = start_ranks(task, env, hosts, launch, events)
        out = {}
        threading.Thread(target=lambda p=procs[0], o=out: o.setdefault("text", p.stdout.read()), daemon=True).start()
        groups.append((task, procs, out))
    if cut:
        cut(events)
    for _, procs, _ in groups:
        for p in procs:
            p.wait()
    time.sleep(0.1)  # let the readers drain the last lines
    return events, groups, time.monotonic() - events.t_start


def demo_fabric(build, stats_dir, tmp, probe_dir):
    ffc = os.path.join(build, "bin", "ff-collective")
    ff = os.path.join(build, "bin", "flexiforce")
    state, topo = os.path.join(tmp, "state.json"), os.path.join(tmp, "topology.json")
    banner(1, "Fabric: 4 hosts x 2 NICs, 2 leaves, 2 spines (network namespaces, veth)")
    try:
        fabric("up", "--hosts", "4", "--leaves", "2", "--spines", "2", "--nics", "2", "--state", state,
               "--topology-out", topo)
    except RuntimeError as e:
        unavailable("fabric emulator", f"{e}; running on loopback instead")
        return None
    try:
        st = json.load(open(state))
        hosts = [n for n in st["nodes"] if n["kind"] == "host"]
        nics = {(n["host"], n["rail"]): n for n in st["nics"]}
        note("hosts: " + ", ".join(f"{h['id']}={nics[(h['id'], 0)]['ip']},{nics[(h['id'], 1)]['ip']}" for h in hosts))

        banner(2, "Path oracle: the ranking h0 -> h1 for each task's SLA")
        for task in TASKS:
            note(f"{task['id']}: AI_SLA_LATENCY={task['sla_us']} us")
            r = subprocess.run([ff, "path", "rank", "--topology", topo, "--src", nics[("h0", 0)]["ip"],
                                "--dst", nics[("h1", 0)]["ip"], "--sla-us", str(task["sla_us"]), "--k", "3"],
                               capture_output=True, text=True)
            for l in (r.stdout or r.stderr).strip().splitlines()[:6]:
                note("    " + trim(l))

        banner(3, "Probe: attach `flexiforce probe report` before the traffic starts")
        duration = 12
        probe = start_probe(ff, os.path.join(build, "lib", "libnccl-net-flexiforce.so"), probe_dir, duration)

        banner(4, "Traffic: train-a and infer-b run collectives at the same time (4 ranks each); a spine link "
                  "is cut mid-run, then restored")
        root_ip = nics[("h0", 0)]["ip"]

        def launch(task, rank):
            h = hosts[rank]
            return ["ip", "netns", "exec", h["netns"], ffc, "--rank", str(rank), "--nranks", str(len(hosts)),
                    "--rendezvous", f"{root_ip}:{task['port']}", "--bind-ip", nics[(h["id"], 0)]["ip"],
                    "--coll", task["coll"], "--min-bytes", task["min"], "--max-bytes", task["max"],
                    "--iters", str(task["iters"]), "--timeout-s", "90"]

        # spine1: the drivers' own rendezvous (ports below the entropy ranges) rides spine0, so the
        # cut hits only traffic the plugin steered.
        link = [l["id"] for l in st["links"] if l["id"].endswith("--spine1")][-1]

        def cut(events):
            # A fixed time from the start missed train-a on a fast host (its traffic had ended 0.1 s
            # after a cut at 1.5 s): wait for every rank's connection, then cut while both run.
            deadline = time.monotonic() + CONNECT_WAIT_S
            while time.monotonic() < deadline and any(len(events.select(["connected to"], t["id"])) < len(hosts)
                                                      for t in TASKS):
                time.sleep(0.02)
            time.sleep(CUT_AFTER_CONNECTED_S)
            events.mark(f"cut {link} (carrier loss)")
            note(f">>> t={time.monotonic() - events.t_start:.2f}s cutting link {link} while both tasks run")
            fabric("link-down", "--state", state, link)
            time.sleep(RESTORE_AFTER_S)
            fabric("link-up", "--state", state, link)
            events.mark(f"restored {link}: failed paths reconnect once it is stable")
            note(f">>> t={time.monotonic() - events.t_start:.2f}s restored link {link}")

        env_line = "  ".join(f"[{t['id']}] AI_TASK_ID={t['id']} AI_SLA_LATENCY={t['sla_us']} AI_FLEXIFORCE_ENABLE=1"
                             for t in TASKS)
        note(env_line)
        # Both NICs of every host, two paths per connection (primary and backup on the other spine).
        extra = {"NCCL_SOCKET_IFNAME": "eth", "FLEXIFORCE_PATHS": "2"}
        events, groups, took = run_tasks(build, stats_dir, tmp, len(hosts), launch, topo, cut, extra)
        note(f"both tasks finished after {took:.1f} s")
        report_after(events, groups)

        banner(8, "Per-link counters: bytes carried by each spine link")
        counters = json.loads(fabric("counters", "--state", state, "--json", capture=True))
        rows = counters if isinstance(counters, list) else counters.get("links", [])
        for c in rows:
            if "spine" in c["id"]:
                note(f"{c['id']:18s} leaf->spine {c['a_to_b']['bytes'] / 2**20:9.1f} MiB   "
                     f"spine->leaf {c['b_to_a']['bytes'] / 2**20:9.1f} MiB")
        return groups, probe
    finally:
        try:
            fabric("down", "--state", state)
        except RuntimeError as e:
            note(f"fabric teardown: {e}")


def demo_loopback(build, stats_dir, tmp, probe_dir, why):
    ffc = os.path.join(build, "bin", "ff-collective")
    ff = os.path.join(build, "bin", "flexiforce")
    banner(1, "Loopback: " + why)
    unavailable("fabric emulator and link cut", why)
    banner(2, "Path oracle")
    unavailable("oracle ranking over a fabric", "no fabric topology on loopback; the plugin builds its graph from "
                "the interfaces (one hop), so both tasks get the same path")
    banner(3, "Probe: attach `flexiforce probe report` before the traffic starts")
    probe = start_probe(ff, os.path.join(build, "lib", "libnccl-net-flexiforce.so"), probe_dir, 8)
    banner(4, "Traffic: train-a and infer-b run collectives at the same time (4 ranks each) on loopback")
    ports = {t["id"]: t["port"] for t in TASKS}

    def launch(task, rank):
        return [ffc, "--rank", str(rank), "--nranks", "4", "--rendezvous", f"127.0.0.1:{ports[task['id']]}",
                "--bind-ip", "127.0.0.1", "--coll", task["coll"], "--min-bytes", task["min"],
                "--max-bytes", task["max"], "--iters", str(task["iters"]), "--timeout-s", "90"]

    events, groups, took = run_tasks(build, stats_dir, tmp, 4, launch, None)
    note(f"both tasks finished after {took:.1f} s")
    report_after(events, groups)
    banner(8, "Per-link counters")
    unavailable("per-link counters", "they come from the fabric emulator (root)")
    return groups, probe


def report_after(events, groups):
    banner(5, "Each task's messages, tagged by the plugin (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV,NET): task, SLA level, traffic class, "
              "the oracle's paths")
    show_connect_choices(events)
    banner(6, "Failover timeline (times since the tasks started; WARN lines of the plugin)")
    show_timeline(events)
    banner(7, "Results: every rank checks every element exactly")
    for task, procs, out in groups:
        show_results(task, procs, out.get("text", ""))


def show_probe_report(probe, probe_dir):
    if probe is None:
        note("(no probe report: see step 3)")
        return
    try:
        out, err = probe.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        probe.terminate()
        out, err = probe.communicate()
        unavailable("probe report", "did not finish within 30 s of its duration")
        return
    if probe.returncode != 0:
        unavailable("probe report", f"exited with {probe.returncode}: {trim((err or out).strip())}")
        return
    for l in out.strip().splitlines():
        note(trim(l))
    md = os.path.join(probe_dir, "report.md")
    if os.path.exists(md):
        # The probe sees every process on the host that maps the plugin; other jobs' table rows
        # (other tasks) are left out here, not from the files.
        ours = tuple(f"| {t['id']} |" for t in TASKS)
        lines, others = [], 0
        for l in open(md).read().splitlines():
            if not l.strip():
                continue
            if l.startswith("| ") and not l.startswith(("| task ", "|---")) and not l.startswith(ours):
                others += 1
                continue
            lines.append(l)
        if others:
            note(f"({others} row(s) of other processes on this host that load the plugin are left out)")
        for l in lines[:16]:
            note("    " + trim(l))
        if len(lines) > 16:
            note(f"    ({len(lines) - 16} more lines in {md})")
    html = os.path.join(probe_dir, "report.html")
    note(f"HTML report (latency histograms with the SLA line, peer heat map): {html}"
         if os.path.exists(html) else f"no HTML report in {probe_dir}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--loopback", action="store_true", help="run on loopback even as root")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    ff = os.path.join(build, "bin", "flexiforce")
    for exe in (ff, os.path.join(build, "bin", "ff-collective"), os.path.join(build, "lib", "libnccl-net-flexiforce.so")):
        if not os.path.exists(exe):
            raise SystemExit(f"demo: {exe} is missing; build first (bash examples/demo.sh builds it)")
    stats_dir = tempfile.mkdtemp(prefix="ff-demo-stats-")
    # One logs folder, replaced by every run (a fresh mkdtemp per run left one behind each time).
    tmp = os.path.join(tempfile.gettempdir(), "ff-demo-logs")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    probe_dir = os.path.join(tempfile.gettempdir(), "ff-demo-probe-report")
    shutil.rmtree(probe_dir, ignore_errors=True)
    os.makedirs(probe_dir)
    print("FlexiForce demo: two tasks share the fabric; " +
          ", ".join(f"{t['id']} declares AI_SLA_LATENCY={t['sla_us']} us" for t in TASKS) +
          "; both set AI_FLEXIFORCE_ENABLE=1", flush=True)
    result = None
    if os.geteuid() == 0 and not args.loopback:
        result = demo_fabric(build, stats_dir, tmp, probe_dir)
    if result is None:
        why = ("--loopback given" if args.loopback else
               "not root: no network namespaces" if os.geteuid() != 0 else "the fabric emulator failed")
        result = demo_loopback(build, stats_dir, tmp, probe_dir, why)
    groups, probe = result

    banner(9, "Statistics per task, collective, peer and path (flexiforce stats)")
    r = subprocess.run([ff, "stats", "--dir", stats_dir, "--include-stale"], capture_output=True, text=True)
    for l in r.stdout.splitlines():
        note(trim(l, 170))
    if r.returncode != 0:
        unavailable("flexiforce stats", r.stderr.strip())
    shutil.rmtree(stats_dir, ignore_errors=True)

    banner(10, "Probe baseline report (flexiforce probe report)")
    show_probe_report(probe, probe_dir)
    ok = all(not any(p.returncode for p in procs) for _, procs, _ in groups)
    print(f"\nFlexiForce demo {'done' if ok else 'FAILED'} in {time.monotonic() - _T0:.1f} s "
          f"(logs of every rank: {os.path.join(tmp, 'ranks.log')})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
