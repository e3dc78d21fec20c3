#!/usr/bin/env python3
"""Root test: `flexiforce probe watch` attached to the plugin counts exactly the messages that a
2-rank loopback run of ff-collective sends, per collective. Exit 77 (skip) without BPF permission.

usage: probe_counts_messages.py FLEXIFORCE FF_COLLECTIVE PLUGIN_SO"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
flexiforce, driver, plugin = sys.argv[1:4]

if os.geteuid() != 0:
    print("SKIP: needs root (BPF)")
    sys.exit(SKIP)
check = json.loads(subprocess.run([flexiforce, "probe", "check", "--json"], capture_output=True, text=True).stdout)
bpf = [f for f in check["findings"] if f["topic"] == "bpf"][0]
if not bpf["detail"]["permitted"]:
    print("SKIP: BPF not permitted here:", bpf["message"])
    sys.exit(SKIP)
if b"watch" not in subprocess.run([flexiforce, "probe", "--help"], capture_output=True).stdout:
    print("SKIP: the probe tool was built without BPF support")
    sys.exit(SKIP)

# 2 ranks, 1 MiB, 256 KiB steps: a ring of two has one step per phase, so per rank and iteration
# AllReduce sends its two 512 KiB blocks (reduce-scatter + all-gather) as 4 messages, AllGather
# (1 MiB gathered: 512 KiB per rank) 2 messages, and Broadcast 4 messages from the root only.
ITERS, WARMUP, STEP, SIZE = 5, 1, 256 * 1024, 1024 * 1024
per_iter = {"allreduce": 2 * 4, "allgather": 2 * 2, "broadcast": 4}
# Other jobs on this host may use the plugin meanwhile (the probe sees every process): count ours only.
TASK = f"probe-count-{os.getpid()}"

with tempfile.TemporaryDirectory() as tmp:
    ready = os.path.join(tmp, "ready")
    # --lib names the plugin by another path (a symlink) than the one /proc/PID/maps shows: the probe
    # must see that both are one file and attach once (it counted every message twice after its first
    # rescan of /proc when they differed).
    alias = os.path.join(tmp, "libnccl-net-flexiforce.so")
    os.symlink(os.path.abspath(plugin), alias)
    watch = subprocess.Popen([flexiforce, "probe", "watch", "--json", "--interval", "0.05", "--duration", "300",
                              "--lib", alias, "--ready-file", ready, "--posts"], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not os.path.exists(ready):
        if watch.poll() is not None or time.time() > deadline:
            print("FAIL: probe did not attach")
            watch.kill()
            sys.exit(1)
        time.sleep(0.05)
    counts = {}
    for coll in per_iter:
        r = subprocess.run([driver, "--ranks", "2", "--launch-local", "--backend", "plugin", "--coll", coll,
                            "--min-bytes", str(SIZE), "--max-bytes", str(SIZE), "--step-bytes", str(STEP),
                            "--iters", str(ITERS), "--warmup", str(WARMUP), "--timeout-s", "60"],
                           capture_output=True, text=True, env=dict(os.environ, AI_TASK_ID=TASK))
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            print("FAIL: the driver failed")
            watch.kill()
            sys.exit(1)
        time.sleep(0.2)
    time.sleep(0.7)  # one more sample
    watch.send_signal(signal.SIGINT)
    out, _ = watch.communicate(timeout=30)
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    final = [l for l in lines if l.get("final")]
    if not final:
        print("FAIL: no final report from the probe:", out[-2000:])
        sys.exit(1)
    total = final[-1]["total"]
    for f in total["flows"]:
        if f["dir"] == "send" and f["task"] == TASK:
            counts[f["collective"].lower()] = counts.get(f["collective"].lower(), 0) + f["messages"]
    print("probe counted (send side):", counts, "events:", total["events"])
    ok = True
    for coll, n in per_iter.items():
        want = n * (ITERS + WARMUP)
        got = counts.get(coll, 0)
        print(f"{coll}: driver sent {want}, probe counted {got}")
        ok &= got == want
    # Posts (counted with --posts only) are counted for all processes together: at least ours must be there.
    ok &= total.get("posts_counted") is True
    posts = total["events"].get("send_post", 0)
    want_posts = sum(n * (ITERS + WARMUP) for n in per_iter.values())
    print(f"send_post events {posts}, at least {want_posts} expected")
    ok &= posts >= want_posts
    sys.exit(0 if ok else 1)
