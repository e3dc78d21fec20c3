#!/usr/bin/env python3
"""What the plugin's USDT probes cost: ff-collective AllReduce busbw (>= 1 MiB, loopback) through
  off     the plugin with its probes compiled in, nothing attached (the state of every job);
  on      the same plugin with `flexiforce probe watch` attached (started before the job, --lib);
  nousdt  (with --no-usdt-plugin) a plugin built with -DFF_USDT=OFF: every FF_PROBE compiled to nothing.
Each trial runs every arm once, in an order rotated from trial to trial, so drift on a shared machine
hits all arms alike (a run is short: take many trials). Printed per size: each arm's median busbw
[quartiles], and the per-trial ratios on/off (attached cost) and off/nousdt (unattached cost) as
median [quartiles] (min..max); then the CPU seconds the job's processes used per run (user + system
of the launcher and its ranks: a BPF program runs in the traced rank's context, so its cost lands
there), which a busy machine disturbs less than wall-clock busbw. Every ratio reads alike: below 1
is a cost. Every run's results are checked by the driver; in attached runs the probe must count
exactly the sends the driver made (else exit 1), which is what --check (one short trial, a ctest)
relies on. With --microbench (ff-probe-microbench; FF_PROBE_MICROBENCH in ctest) it also measures
one probe site in CPU ns per call: compiled out, compiled in and not attached, attached (and the probe
must count every call), and relates that to the job's CPU per message. Needs root for `on`.

usage: bench_probe_overhead.py FLEXIFORCE FF_COLLECTIVE PLUGIN_SO [--no-usdt-plugin SO] [--trials N]
       [--ranks N] [--min-bytes 1M] [--max-bytes 16M] [--iters N] [--microbench EXE] [--json FILE] [--pin]
       [--check]"""
import argparse
import atexit
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_testlib as lib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("flexiforce")
ap.add_argument("driver")
ap.add_argument("plugin")
ap.add_argument("--no-usdt-plugin", help="the plugin built with -DFF_USDT=OFF (e.g. build-nousdt/lib/...)")
ap.add_argument("--trials", type=int, default=7)
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--min-bytes", default="1M")
ap.add_argument("--max-bytes", default="16M")
ap.add_argument("--iters", type=int, default=50)
ap.add_argument("--microbench", default=os.environ.get("FF_PROBE_MICROBENCH"),
                help="ff-probe-microbench: also measure one probe site's CPU cost, attached and not")
ap.add_argument("--json", help="also write every sample here")
ap.add_argument("--pin", action="store_true",
                help="launch each rank on its own, pinned to CPU rank mod ncpu (taskset), instead of --launch-local")
ap.add_argument("--check", action="store_true", help="one short trial; exit 1 unless every count is exact")
a = ap.parse_args()
if a.check:
    a.trials, a.iters, a.max_bytes = 1, 3, "2M"
lib.skip_unless_bpf(a.flexiforce)
# Every arm loads a private copy of its plugin under another file name: a `flexiforce probe` of
# someone else on a shared host finds plugins by name in /proc/*/maps and would attach to the
# "not attached" arms too (as happened here while another tree ran its probe tests).
private = tempfile.mkdtemp(prefix="ff-probe-bench-")
atexit.register(shutil.rmtree, private, True)
for attr in ("plugin", "no_usdt_plugin"):
    if getattr(a, attr):
        copy = os.path.join(private, f"ff-bench-{attr}.so")
        shutil.copyfile(getattr(a, attr), copy)
        setattr(a, attr, copy)
if a.no_usdt_plugin:
    notes = subprocess.run(["readelf", "-n", a.no_usdt_plugin], capture_output=True, text=True).stdout
    if "stapsdt" in notes:
        sys.exit(f"{a.no_usdt_plugin} carries USDT notes: build it with -DFF_USDT=OFF")

run_no = 0


def run_driver(plugin):
    global run_no
    run_no += 1
    task = f"probe-bench-{os.getpid()}-{run_no}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    common = ["--backend", "plugin", "--plugin", plugin, "--coll", "allreduce", "--min-bytes", a.min_bytes,
              "--max-bytes", a.max_bytes, "--iters", str(a.iters), "--warmup", "2", "--json", "--timeout-s", "120"]
    env = dict(os.environ, AI_TASK_ID=task, FLEXIFORCE_STATS="0")
    if a.pin:
        # One process per rank, rank r pinned to CPU r mod n: the ranks busy-poll, and left to the
        # scheduler two of them sometimes share a CPU for a while, which moves busbw more than the
        # probes do. Rank 0's report counts every rank's messages, as the launcher's does.
        with socket.socket() as probe_port:
            probe_port.bind(("127.0.0.1", 0))
            port = probe_port.getsockname()[1]
        procs = [subprocess.Popen(["taskset", "-c", str(rank % os.cpu_count()), a.driver, "--rank", str(rank),
                                   "--nranks", str(a.ranks), "--rendezvous", f"127.0.0.1:{port}",
                                   "--bind-ip", "127.0.0.1"] + common,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for rank in range(a.ranks)]
        outs = [p.communicate() for p in procs]
        rc = next((p.returncode for p in procs if p.returncode != 0), 0)
        r = subprocess.CompletedProcess(procs[0].args, rc, outs[0][0], "".join(e for _, e in outs))
    else:
        r = subprocess.run([a.driver, "--ranks", str(a.ranks), "--launch-local"] + common,
                           capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the ranks were reaped (by the launcher) and it by us
    if r.returncode != 0:
        sys.exit(f"FAIL: ff-collective exited {r.returncode}: {r.stderr}")
    j = json.loads(r.stdout)
    res = {x["bytes"]: x["busbw_gbps"] for x in j["results"]}
    res["cpu_s"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return task, res, sum(x["messages"]["sends"] for x in j["results"])


def attached():
    with tempfile.TemporaryDirectory() as tmp:
        # --no-scan: only this plugin file, not other jobs' copies on a shared host.
        w = lib.start_probe([a.flexiforce, "probe", "watch", "--json", "--interval", "1", "--lib", a.plugin,
                             "--no-scan"], os.path.join(tmp, "ready"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            task, res, sends = run_driver(a.plugin)
        finally:
            w.send_signal(signal.SIGINT)
            out, err = w.communicate(timeout=60)
    if w.returncode != 0:
        sys.exit(f"FAIL: probe exited {w.returncode}: {err}")
    total = [json.loads(l) for l in out.splitlines() if l.strip()][-1]["total"]
    counted = sum(f["messages"] for f in total["flows"] if f["dir"] == "send" and f["task"] == task)
    if counted != sends:
        sys.exit(f"FAIL: the probe counted {counted} sends, the driver made {sends}")
    # The default leaves the post probes unattached (two hits per message fewer): no count is reported.
    if total.get("posts_counted") is not False or "send_post" in total["events"]:
        sys.exit(f"FAIL: without --posts the probe reports post counts: {total['events']}")
    return res


sends_per_run = 0


def unattached(plugin):
    global sends_per_run
    _, res, sends_per_run = run_driver(plugin)
    return res


arms = {"off": lambda: unattached(a.plugin), "on": attached}
if a.no_usdt_plugin:
    arms["nousdt"] = lambda: unattached(a.no_usdt_plugin)
names = list(arms)
samples = {n: [] for n in names}  # per arm: one {bytes: busbw} per trial
for t in range(a.trials):
    order = names[t % len(names):] + names[:t % len(names)]
    for n in order:
        samples[n].append(arms[n]())
    print(f"trial {t + 1}/{a.trials} ({' '.join(order)}) done", file=sys.stderr)

sizes = sorted(k for k in samples["off"][0] if k != "cpu_s")


def quartiles(v):
    q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
    return q[0], statistics.median(v), q[2]


def ratios(num, den, key):
    return [x[key] / y[key] for x, y in zip(samples[num], samples[den])]


def span(v, minmax=False):
    q1, m, q3 = quartiles(v)
    return f"{m:.3f} [{q1:.3f}, {q3:.3f}]" + (f" ({min(v):.2f}..{max(v):.2f})" if minmax else "")


comparisons = [("on", "off")] + ([("off", "nousdt")] if "nousdt" in names else [])
print(f"ff-collective AllReduce, {a.ranks} ranks, loopback, {a.iters} iterations per size, {a.trials} trials "
      f"(arms rotating); median [quartiles] (min..max)")
print(f"{'bytes':>10}" + "".join(f" {n + ' busbw GB/s':>22}" for n in names)
      + "".join(f" {n + '/' + d + ' busbw':>32}" for n, d in comparisons))
summary = {}
for s in sizes + ["cpu_s"]:
    label = "cpu s/run" if s == "cpu_s" else str(s)
    row = f"{label:>10}" + "".join(f" {span([x[s] for x in samples[n]]):>22}" for n in names)
    # Ratios read alike on both rows: below 1 is a cost (busbw num/den; CPU den/num).
    rs = {(n, d): ratios(d, n, s) if s == "cpu_s" else ratios(n, d, s) for n, d in comparisons}
    row += "".join(f" {span(rs[c], True):>32}" for c in comparisons)
    summary[label] = {f"{n}/{d}": quartiles(rs[(n, d)]) for n, d in comparisons}
    print(row)
# One busbw number per comparison: the median over every (trial, size) ratio, with its quartiles.
overall = {}
for n, d in comparisons:
    q1, m, q3 = quartiles([r for s in sizes for r in ratios(n, d, s)])
    overall[f"{n}/{d}"] = {"busbw": [q1, m, q3], "cpu": list(quartiles(ratios(d, n, "cpu_s")))}
    c1, cm, c3 = overall[f"{n}/{d}"]["cpu"]
    print(f"{n}/{d}: busbw ratio median {m:.4f} [{q1:.4f}, {q3:.4f}] over {len(sizes) * a.trials} (trial, size) "
          f"pairs, {100 * (1 - m):+.1f}% cost; CPU {d}/{n} median {cm:.4f} [{c1:.4f}, {c3:.4f}], "
          f"{100 * (1 - cm):+.1f}% cost")

# --- one probe site, measured in CPU time (a busy machine barely moves it) ---
micro = None
if a.microbench:
    calls, rounds, reps = (100000, 3, 1) if a.check else (2000000, 5, 5)

    def microbench(attach):
        task = f"probe-micro-{os.getpid()}-{len(micro['free']) + len(micro['attached'])}"
        cmd = [a.microbench, "--calls", str(calls), "--rounds", str(rounds), "--task", task]
        if not attach:
            return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        with tempfile.TemporaryDirectory() as tmp:
            w = lib.start_probe([a.flexiforce, "probe", "watch", "--json", "--interval", "1", "--lib",
                                 os.path.abspath(a.microbench), "--no-scan"], os.path.join(tmp, "ready"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                r = json.loads(subprocess.run(cmd + ["--wait-attached"], capture_output=True, text=True,
                                              check=True).stdout)
            finally:
                w.send_signal(signal.SIGINT)
                out, err = w.communicate(timeout=60)
        total = [json.loads(l) for l in out.splitlines() if l.strip()][-1]["total"]
        counted = sum(f["messages"] for f in total["flows"] if f["task"] == task)
        if w.returncode != 0 or counted != r["fired"] or r["fired"] != calls * rounds:
            sys.exit(f"FAIL: microbench fired {r['fired']} probes, the probe counted {counted} (exit {w.returncode})")
        return r

    micro = {"free": [], "attached": []}
    for _ in range(reps):
        micro["free"].append(microbench(False))
        micro["attached"].append(microbench(True))
    site = [x["compiled_in_ns"] - x["compiled_out_ns"] for x in micro["free"]]
    hit = [x["compiled_in_ns"] - x["compiled_out_ns"] for x in micro["attached"]]
    # The plugin passes 6 sites per message (post, completion and the batch, on each side); the probe
    # attaches the batch only (the posts too with --posts). CPU per message from the `off` arm: the job's
    # CPU seconds over the messages it sent (both ranks, every size).
    cpu_per_msg_ns = statistics.median(x["cpu_s"] for x in samples["off"]) * 1e9 / sends_per_run
    print(f"one message completion's probe work (send_done site, msgs_done batch of 32), CPU ns per message, "
          f"median [quartiles] (min..max) of {reps} runs x {rounds} rounds x {calls} messages:")
    print(f"  not attached, compiled in minus compiled out: {span(site, True)}")
    print(f"  attached (uprobe + BPF program), minus compiled out: {span(hit, True)}")
    print(f"  the job above: {cpu_per_msg_ns / 1e3:.0f} us of CPU per message (off arm, median); "
          f"2 completions per message (one per side), attached => {100 * 2 * statistics.median(hit) / cpu_per_msg_ns:.2f}% "
          f"of its CPU; 6 sites not attached {100 * 6 * statistics.median(site) / cpu_per_msg_ns:.4f}%")
    micro.update({"site_ns": site, "hit_ns": hit, "cpu_per_msg_ns": cpu_per_msg_ns})
if a.json:
    with open(a.json, "w") as f:
        json.dump({"args": vars(a), "samples": samples, "per_size": summary, "overall": overall, "micro": micro},
                  f, indent=1)
print("PASS" if a.check else "done")
