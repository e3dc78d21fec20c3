#!/usr/bin/env python3
"""`flexiforce bench` ends both of its processes as a training process ends, so the plugin's exit
handlers run: no statistics file is left behind (its forked peer used to _exit, leaving a ~1 MB file in
/dev/shm per run). With FLEXIFORCE_STATS_KEEP=1 both processes' files stay, read-only, which shows the
check sees the files the bench writes.

Usage: bench_stats_file_check.py FLEXIFORCE"""
import os
import subprocess
import sys
import tempfile

ARGS = ["bench", "--min-bytes", "8", "--max-bytes", "1K", "--iters", "20", "--runs", "1", "--mode", "plugin"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(flexiforce, stats_dir, **env_over):
    env = {k: v for k, v in os.environ.items() if k != "FLEXIFORCE_STATS_KEEP"}
    env.update(FLEXIFORCE_STATS="1", FLEXIFORCE_STATS_DIR=stats_dir, **env_over)
    p = subprocess.run([flexiforce] + ARGS, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        fail(f"{env_over}: exit {p.returncode}: {p.stderr.strip()[-1500:]}")
    return sorted(f for f in os.listdir(stats_dir) if f.startswith("flexiforce-stats-"))


def main():
    ff = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ff-bench-stats-") as d:
        left = run(ff, d)
        if left:
            fail(f"a bench run left statistics file(s) behind in {d}: {left}")
        kept = run(ff, d, FLEXIFORCE_STATS_KEEP="1")
        if len(kept) != 2:
            fail(f"with FLEXIFORCE_STATS_KEEP=1 expected the two processes' files, found {kept}")
        for f in kept:
            if os.stat(os.path.join(d, f)).st_mode & 0o222:
                fail(f"{f}: a kept file should be read-only")
    print("ok: the bench's two processes remove their statistics files at exit (and keep them, read-only, "
          "under FLEXIFORCE_STATS_KEEP=1)")


if __name__ == "__main__":
    main()
