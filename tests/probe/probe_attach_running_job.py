#!/usr/bin/env python3
"""Root test: `flexiforce probe watch` attaches to a job that is already running and detaches mid-run
(SIGINT), twice (every process that maps the plugin, found in /proc; then one rank by --pid), while a
3-rank loopback ff-collective checks every iteration's result. Passes when:
  - the job (its length sized from two short calibration runs) exits 0 with every check passed, and
    it was still running after both detaches;
  - each probe run exits 0 and counted messages of our task, more than none and fewer than the job sent
    (it saw only part of the run);
  - the msgs_done semaphore in the ranks is raised while a probe is attached and back to 0 after it
    detached (a detached probe leaves nothing behind);
  - the ranks' semaphores are 0 until the first attach;
  - then `probe report` started before a second job, finding it by /proc alone (no --lib), counts
    some of its messages (started before the job with --lib, counts are exact: probe_counts_* and
    probe_report_* tests).
Exit 77 (skip) without BPF permission.

usage: probe_attach_running_job.py FLEXIFORCE FF_COLLECTIVE PLUGIN_SO"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_testlib as lib  # noqa: E402

flexiforce, driver, plugin = sys.argv[1:4]
lib.skip_unless_bpf(flexiforce)

TASK = f"probe-attach-{os.getpid()}"
NRANKS, SIZE, STEP = 3, 3 * 1024 * 1024, 256 * 1024
# Every warmup iteration is checked on its own: the attaches and detaches fall on checked iterations.
# Three collectives one after the other; the run must outlast two attach/detach cycles (~1-2 s each
# here), on a fast machine as on a sanitized build: the iteration count is sized from two short runs
# for about JOB_S seconds of iterations, at least MIN_WARMUP.
JOB_S, MIN_WARMUP, ITERS = 10.0, 600, 1
COLLS = ["allreduce", "allgather", "broadcast"]
sem_vaddr = lib.semaphore_vaddr(plugin, "msgs_done")


def fail(msg, *procs):
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
    print("FAIL:", msg)
    sys.exit(1)


def semaphores(pids, until=None, within=2.0):
    """The msgs_done semaphores of `pids`; with `until` (a predicate), polled up to `within` seconds
    for it to hold (the kernel updates them on attach and detach, but need not before we look)."""
    deadline = time.time() + within
    while True:
        v = [lib.read_semaphore(p, plugin, sem_vaddr) for p in pids]
        if until is None or until(v) or time.time() > deadline:
            return v
        time.sleep(0.02)


def job_seconds(warmup):
    t0 = time.monotonic()
    r = subprocess.run([driver, "--ranks", str(NRANKS), "--launch-local", "--backend", "plugin", "--plugin", plugin,
                        "--coll", ",".join(COLLS), "--min-bytes", str(SIZE), "--max-bytes", str(SIZE), "--step-bytes",
                        str(STEP), "--warmup", str(warmup), "--iters", "1", "--timeout-s", "150"],
                       capture_output=True, text=True, env=dict(os.environ, FLEXIFORCE_STATS="0"))
    if r.returncode != 0:
        fail(f"calibration run failed (exit {r.returncode}): {r.stderr}")
    return time.monotonic() - t0


per_iter = max(1e-4, (job_seconds(120) - job_seconds(20)) / 100)  # setup cancels out
WARMUP = max(MIN_WARMUP, min(20000, int(JOB_S / per_iter)))
print(f"calibration: {per_iter * 1e3:.2f} ms per iteration of the three collectives; WARMUP {WARMUP}")


def task_messages(total):
    return sum(f["messages"] for f in total["flows"] if f["task"] == TASK and f["dir"] == "send")


with tempfile.TemporaryDirectory() as tmp:
    result_file = os.path.join(tmp, "result.json")
    job = subprocess.Popen([driver, "--ranks", str(NRANKS), "--launch-local", "--backend", "plugin", "--plugin", plugin,
                            "--coll", ",".join(COLLS), "--min-bytes", str(SIZE), "--max-bytes", str(SIZE),
                            "--step-bytes", str(STEP), "--warmup", str(WARMUP), "--iters", str(ITERS),
                            "--timeout-s", "150", "--result-file", result_file],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, AI_TASK_ID=TASK, FLEXIFORCE_STATS="0"))
    # Wait until every rank has loaded the plugin (then its connections are up or coming).
    deadline = time.time() + 60
    ranks = []
    while len(ranks) < NRANKS:
        if job.poll() is not None or time.time() > deadline:
            fail(f"the job's {NRANKS} ranks did not map the plugin", job)
        ranks = lib.plugin_processes(plugin, parent=job.pid)
        time.sleep(0.05)
    time.sleep(0.5)  # traffic under way
    if semaphores(ranks) != [0] * NRANKS:
        fail(f"semaphores raised before our probe attached: {semaphores(ranks)} (another tracer on this host, "
             "e.g. a probe of another build tree scanning /proc?)", job)

    counted = []
    for how, extra in (("every process", []), (f"--pid {ranks[0]}", ["--pid", str(ranks[0])])):
        ready = os.path.join(tmp, f"ready-{len(counted)}")
        watch = lib.start_probe([flexiforce, "probe", "watch", "--json", "--interval", "0.2", "--duration", "120"]
                                + extra, ready, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if job.poll() is not None:
            fail(f"the job ended before the probe ({how}) attached: raise JOB_S", watch)
        watched = [ranks[0]] if extra else ranks
        raised = semaphores(watched, until=lambda v: min(v) >= 1)
        if min(raised) < 1:
            fail(f"probe ({how}) attached but the ranks' msgs_done semaphores are {raised}", watch, job)
        # Detach once the probe has seen some of our messages (or after 20 s: then the count check fails).
        seen, t0 = 0, time.time()
        while seen == 0 and time.time() - t0 < 20:
            line = watch.stdout.readline()
            if not line:
                break
            seen += sum(f["messages"] for f in json.loads(line)["interval"]["flows"]
                        if f["task"] == TASK and f["dir"] == "send")
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=30)
        if watch.returncode != 0:
            fail(f"probe ({how}) exited {watch.returncode} after SIGINT: {err}", job)
        if job.poll() is not None:
            fail(f"the job ended before the probe ({how}) detached, so this was no mid-run detach: raise JOB_S")
        final = [json.loads(l) for l in out.splitlines() if l.strip() and json.loads(l).get("final")]
        if not final:
            fail(f"probe ({how}) printed no final totals: {out[-500:]}", job)
        n = task_messages(final[-1]["total"])
        after = semaphores(watched, until=lambda v: max(v) == 0)
        print(f"probe attached to {how}: counted {n} send completions of {TASK}; msgs_done semaphore "
              f"while attached {raised}, after detach {after}")
        if after != [0] * len(watched):
            fail(f"semaphores still raised after the probe ({how}) detached: {after}", job)
        if n <= 0:
            fail(f"probe ({how}) counted no message of the running job", job)
        counted.append(n)

    try:
        out, err = job.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        fail("the job did not finish after the probes detached", job)
    print(out.strip())
    if job.returncode != 0 or "all checks passed" not in out:
        print(err)
        fail(f"the job's results were not exact or it failed (exit {job.returncode})")
    report = json.load(open(result_file))
    total_sends = sum(r["messages"]["sends"] for r in report["results"])
    want = sum(lib.ring_sends(c, NRANKS, SIZE, STEP)[0] for c in COLLS) * (WARMUP + ITERS)
    print(f"job: {total_sends} sends in all ({want} by the ring schedule); probes counted {counted}")
    if total_sends != want:
        fail(f"the driver reports {total_sends} sends, its schedule makes {want}")
    # Attached after the start and detached before the end: each probe saw a part, never more than all.
    for n in counted:
        if not 0 < n < total_sends:
            fail(f"a probe counted {n} of {total_sends} messages: expected part of the run")

    # Started before the job, finding it only by scanning /proc (no --lib): `report`, whose one
    # interval is its whole duration, must still look for new processes while it waits.
    # As long as the first job (JOB_S): the report looks for new processes once a second, and
    # attaching to three ranks on a loaded host takes a while too.
    task2, warmup2 = TASK + "-later", WARMUP
    out_dir = os.path.join(tmp, "report")
    rep = lib.start_probe([flexiforce, "probe", "report", "--duration", "300", "--out", out_dir],
                          os.path.join(tmp, "ready-report"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r2 = subprocess.run([driver, "--ranks", str(NRANKS), "--launch-local", "--backend", "plugin", "--plugin", plugin,
                         "--coll", ",".join(COLLS), "--min-bytes", str(SIZE), "--max-bytes", str(SIZE), "--step-bytes",
                         str(STEP), "--warmup", str(warmup2), "--iters", str(ITERS), "--timeout-s", "150", "--json"],
                        capture_output=True, text=True, env=dict(os.environ, AI_TASK_ID=task2, FLEXIFORCE_STATS="0"))
    rep.send_signal(signal.SIGINT)
    rout, rerr = rep.communicate(timeout=60)
    if r2.returncode != 0:
        fail(f"the second job failed (exit {r2.returncode}): {r2.stderr}")
    if rep.returncode != 0:
        fail(f"probe report exited {rep.returncode}: {rerr}")
    sends2 = sum(x["messages"]["sends"] for x in json.loads(r2.stdout)["results"])
    n2 = sum(f["messages"] for f in json.load(open(os.path.join(out_dir, "report.json")))["flows"]
             if f["task"] == task2 and f["dir"] == "send")
    print(f"report started before a job it found in /proc: counted {n2} of its {sends2} sends")
    # It attaches within a second of the ranks mapping the plugin: maybe before their first message.
    if not 0 < n2 <= sends2:
        fail(f"the report counted {n2} of the later job's {sends2} sends")
    print("PASS")
