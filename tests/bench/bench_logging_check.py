#!/usr/bin/env python3
"""`flexiforce bench` prints the plugin's log as NCCL would: NCCL_DEBUG=INFO (or TRACE) shows the
plugin's INFO lines, unset or WARN shows none of them, NONE shows nothing from the plugin, and an
unknown value falls back to WARN. FF_TEST_VERBOSE (the tests' switch) still shows INFO.

Usage: bench_logging_check.py FLEXIFORCE"""
import os
import subprocess
import sys

ARGS = ["bench", "--min-bytes", "8", "--max-bytes", "8", "--iters", "20", "--runs", "1", "--measure", "rtt",
        "--mode", "plugin"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(flexiforce, **env_over):
    env = {k: v for k, v in os.environ.items() if k not in ("NCCL_DEBUG", "FF_TEST_VERBOSE")}
    env.update(env_over)
    p = subprocess.run([flexiforce] + ARGS, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        fail(f"{env_over}: exit {p.returncode}: {p.stderr.strip()[-1500:]}")
    return [line for line in p.stderr.splitlines() if "NET/FlexiForce" in line]


def main():
    ff = sys.argv[1]
    for env in ({"NCCL_DEBUG": "INFO"}, {"NCCL_DEBUG": "info"}, {"NCCL_DEBUG": "TRACE"}, {"FF_TEST_VERBOSE": "1"}):
        lines = run(ff, **env)
        info = [ln for ln in lines if " INFO " in ln]
        # Each of the two processes says which transport it chose and which device it uses.
        if len([ln for ln in info if "transport:" in ln]) < 2 or not any("Using [0:" in ln for ln in info):
            fail(f"{env}: expected the plugin's INFO lines (transport, device) from both processes, got {lines[:6]}")
    for env in ({}, {"NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG": "NONE"}, {"NCCL_DEBUG": "loud"}):
        lines = run(ff, **env)
        if any(" INFO " in ln for ln in lines):
            fail(f"{env}: INFO lines shown: {lines[:4]}")
    print("ok: NCCL_DEBUG INFO/TRACE (any case) and FF_TEST_VERBOSE show the plugin's INFO lines; unset, WARN, NONE "
          "and an unknown value do not")


if __name__ == "__main__":
    main()
