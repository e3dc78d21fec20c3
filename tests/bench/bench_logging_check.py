#!/usr/bin/env python3
"""`flexiforce bench` prints the plugin's log as NCCL would: NCCL_DEBUG=INFO (or TRACE) shows the
plugin's INFO lines, unset or WARN shows none of them, NONE shows nothing from the plugin, and an
unknown value falls back to WARN. NCCL_DEBUG_SUBSYS filters every line by subsystem as in NCCL
(default INIT,BOOTSTRAP,ENV; '^' for all but the names): the plugin's NET-only lines need NET there,
its INIT lines do not, and its warnings show whatever the mask (they carry every subsystem bit, as
NCCL's own). FF_TEST_VERBOSE (the tests' switch) shows every INFO line.

Usage: bench_logging_check.py FLEXIFORCE"""
import os
import subprocess
import sys

ARGS = ["bench", "--min-bytes", "8", "--max-bytes", "8", "--iters", "20", "--runs", "1", "--measure", "rtt",
        "--mode", "plugin"]
INIT_LINE = "Using [0:"               # INIT|NET: shown under NCCL's default mask
NET_LINE = "failback listener on port"  # NET only: needs NET in NCCL_DEBUG_SUBSYS
BAD_VALUE = "FLEXIFORCE_CHUNK_SIZE='banana' is not valid"


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(flexiforce, **env_over):
    env = {k: v for k, v in os.environ.items() if k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "FF_TEST_VERBOSE")}
    env.update(env_over)
    p = subprocess.run([flexiforce] + ARGS, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        fail(f"{env_over}: exit {p.returncode}: {p.stderr.strip()[-1500:]}")
    return [line for line in p.stderr.splitlines() if "NET/FlexiForce" in line]


def count(lines, text, level=" INFO "):
    return len([ln for ln in lines if level in ln and text in ln])


def main():
    ff = sys.argv[1]
    for env in ({"NCCL_DEBUG": "INFO"}, {"NCCL_DEBUG": "info"}, {"NCCL_DEBUG": "TRACE"}, {"FF_TEST_VERBOSE": "1"}):
        lines = run(ff, **env)
        # Each of the two processes says which transport it chose and which device it uses.
        if count(lines, "transport:") < 2 or count(lines, INIT_LINE) < 2:
            fail(f"{env}: expected the plugin's INFO lines (transport, device) from both processes, got {lines[:6]}")
        want_net = "FF_TEST_VERBOSE" in env
        if (count(lines, NET_LINE) >= 2) != want_net:
            fail(f"{env}: NET-only INFO lines {'missing' if want_net else 'shown under the default mask'}: {lines[:8]}")
    for env in ({}, {"NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG": "NONE"}, {"NCCL_DEBUG": "loud"}):
        lines = run(ff, **env)
        if any(" INFO " in ln for ln in lines):
            fail(f"{env}: INFO lines shown: {lines[:4]}")
    # NCCL_DEBUG_SUBSYS: (mask, INIT|NET lines shown, NET-only lines shown)
    for subsys, init_shown, net_shown in (("net", True, True), ("INIT,NET", True, True), ("^NET", True, False),
                                          ("ENV", False, False), ("^INIT,NET", False, False), ("ALL", True, True)):
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": subsys}
        lines = run(ff, **env)
        if (count(lines, INIT_LINE) >= 2) != init_shown or (count(lines, NET_LINE) >= 2) != net_shown:
            fail(f"{env}: expected INIT lines {'shown' if init_shown else 'hidden'} and NET-only lines "
                 f"{'shown' if net_shown else 'hidden'}, got {lines[:8]}")
    # A bad value's warning reaches the user whatever the subsystem mask (NCCL drops warnings too when
    # their flags miss the mask).
    for env in ({}, {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "ENV"}, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL"}):
        lines = run(ff, FLEXIFORCE_CHUNK_SIZE="banana", **env)
        if count(lines, BAD_VALUE, " WARN ") < 2:
            fail(f"{env}: the bad FLEXIFORCE_CHUNK_SIZE's warning is not shown by both processes: {lines[:6]}")
    print("ok: NCCL_DEBUG INFO/TRACE (any case) and FF_TEST_VERBOSE show the plugin's INFO lines; unset, WARN, NONE "
          "and an unknown value do not; NCCL_DEBUG_SUBSYS filters them as NCCL does; warnings pass any mask")


if __name__ == "__main__":
    main()
