#!/usr/bin/env python3
"""Root test: `flexiforce probe watch` attaches to a job that is already running and detaches mid-run
(SIGINT), twice (every process that maps the plugin, found in /proc; then one rank by --pid), while a
3-rank loopback ff-collective checks every iteration's result. Passes when:
  - the job exits 0 with every check passed, and it was still running after both detaches;
  - each probe run exits 0 and counted messages of our task, more than none and fewer than the job sent
    (it saw only part of the run);
  - the send_done semaphore in the ranks is raised while a probe is attached and back to 0 after it
    detached (a detached probe leaves nothing behind);
  - the ranks stay at 0 until the first attach (probe started before job is probe_counts_* / report tests).
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
# Three collectives one after the other; the run must outlast two attach/detach cycles (~1-2 s each here).
WARMUP, ITERS = 600, 1
COLLS = ["allreduce", "allgather", "broadcast"]
sem_vaddr = lib.semaphore_vaddr(plugin, "send_done")


def fail(msg, *procs):
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
    print("FAIL:", msg)
    sys.exit(1)


def semaphores(pids):
    return [lib.read_semaphore(p, plugin, sem_vaddr) for p in pids]


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
        fail(f"semaphores raised before any probe attached: {semaphores(ranks)}", job)

    counted = []
    for how, extra in (("every process", []), (f"--pid {ranks[0]}", ["--pid", str(ranks[0])])):
        ready = os.path.join(tmp, f"ready-{len(counted)}")
        watch = lib.start_probe([flexiforce, "probe", "watch", "--json", "--interval", "0.2", "--duration", "120"]
                                + extra, ready, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if job.poll() is not None:
            fail(f"the job ended before the probe ({how}) attached: raise WARMUP", watch)
        watched = [ranks[0]] if extra else ranks
        raised = semaphores(watched)
        if min(raised) < 1:
            fail(f"probe ({how}) attached but the ranks' send_done semaphores are {raised}", watch, job)
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
            fail(f"the job ended before the probe ({how}) detached, so this was no mid-run detach: raise WARMUP")
        final = [json.loads(l) for l in out.splitlines() if l.strip() and json.loads(l).get("final")]
        if not final:
            fail(f"probe ({how}) printed no final totals: {out[-500:]}", job)
        n = task_messages(final[-1]["total"])
        after = semaphores(watched)
        print(f"probe attached to {how}: counted {n} send completions of {TASK}; send_done semaphore "
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
    print("PASS")
