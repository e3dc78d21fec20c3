#!/usr/bin/python3
"""Link failures under a running 4-rank AllReduce on the fabric emulator (root only; 77 = skipped).

Usage: fabric_failover.py --collective FF_COLLECTIVE --scenario NAME [--keep-logs]
Scenarios:
  nic_down        host h1's NIC 0 loses carrier mid-AllReduce; the plugin spreads its paths over both
                  NICs, so every rank must finish with exact results and h1 logs a failover.
  spine_down      leaf1--spine1 goes down mid-AllReduce (steering on, one NIC per host, paths in both
                  spines' port ranges): exact results, a failover, and traffic on leaf1--spine0 afterwards.
  all_paths_down  h1's only used NIC goes down: ranks must end with an error, within a bound set by
                  FLEXIFORCE_PEER_TIMEOUT_MS, never hang.
  peer_killed     rank 2 is killed with SIGKILL: the others end with an error within a bound.
Builds its own fabric (tests/fabric/fabric.py run) unless FF_FABRIC_STATE is set.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import failover_harness as fh  # noqa: E402

# 64 MiB AllReduce steps: 4 ranks x 2*(3/4) x 64 MiB = 384 MiB on the wire per iteration. Warmup
# iterations are checked one by one, so every iteration's result is verified exactly.
ALLREDUCE = ["--backend", "plugin", "--coll", "allreduce", "--min-bytes", "64M", "--max-bytes", "64M",
             "--iters", "1"]
CUT_AFTER_S = 1.5
ERROR_BOUND_S = 20.0  # all_paths_down: 2 s peer timeout + detection slack; peer_killed: immediate


def check(cond, msg, failures):
    print(("ok:   " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def scenario_survives(binary, state_file, name):
    state = fh.load_state(state_file)
    failures = []
    if name == "nic_down":
        link = fh.access_link(state, "h1", 0)
        env = {"FLEXIFORCE_SPREAD_NICS": "1", "FLEXIFORCE_PATHS": "2"}
        unset = ("NCCL_SOCKET_IFNAME",)
        watch = None
    else:
        # spine1: the driver's own rendezvous (port below the entropy ranges) always crosses spine0,
        # so only the plugin's paths are hit by this cut.
        link = fh.fabric_link(state, "leaf1", "spine1")
        watch = fh.fabric_link(state, "leaf1", "spine0")
        env = {"NCCL_SOCKET_IFNAME": "eth0", "AI_FLEXIFORCE_ENABLE": "1", "FLEXIFORCE_PATHS": "2",
               "FLEXIFORCE_TOPOLOGY": os.environ.get("FF_FABRIC_TOPOLOGY", "")}
        unset = ()
    ranks = fh.Ranks(binary, state_file, ALLREDUCE + ["--warmup", "8", "--timeout-s", "120"], env, unset,
                     control_rail=1 if name == "nic_down" else 0)
    time.sleep(CUT_AFTER_S)
    before = fh.link_bytes(state_file, watch) if watch else 0
    cut_at = time.time()  # just before the command: the carrier drops while it runs
    fh.fabric(state_file, "link-down", link)
    try:
        codes, ends = ranks.wait(150)
    finally:
        after = fh.link_bytes(state_file, watch) if watch else 0
        fh.fabric(state_file, "link-up", link)
    events = ranks.failovers()
    check(all(c == 0 for c in codes), f"every rank passed its exact checks after {link} went down (exit {codes})",
          failures)
    check(max(ends) > CUT_AFTER_S + 0.2, f"the run was still going when the link went down (ended {max(ends):.1f} s)",
          failures)
    check(len(events) > 0, f"a failover was logged ({len(events)} event(s))", failures)
    for e in events:
        print(f"      rank {e['rank']}: detected {1000 * (e['at'] - cut_at):.1f} ms after the cut, "
              f"paused {e['paused_ms']:.2f} ms, re-sent {e['resent']} B; {e['old']} -> {e['new']}")
    if watch:
        check(after - before > 64 << 20, f"{watch} carried {(after - before) >> 20} MiB after the cut", failures)
    if failures:
        ranks.dump()
    return 1 if failures else 0


def scenario_errors(binary, state_file, name):
    state = fh.load_state(state_file)
    failures = []
    env = {"NCCL_SOCKET_IFNAME": "eth0", "FLEXIFORCE_PEER_TIMEOUT_MS": "2000"}
    ranks = fh.Ranks(binary, state_file, ALLREDUCE + ["--warmup", "40", "--timeout-s", "90"], env)
    time.sleep(CUT_AFTER_S)
    link = None
    if name == "all_paths_down":
        link = fh.access_link(state, "h1", 0)
        fh.fabric(state_file, "link-down", link)
    else:
        ranks.kill(2)
    t0 = time.monotonic() - ranks.started
    try:
        codes, ends = ranks.wait(80)
    finally:
        if link:
            fh.fabric(state_file, "link-up", link)
    others = [r for r in range(len(codes)) if name == "all_paths_down" or r != 2]
    worst = max(ends[r] for r in others) - t0
    check(all(codes[r] not in (0, None) for r in others), f"every surviving rank reported an error (exit {codes})",
          failures)
    check(worst < ERROR_BOUND_S, f"all ranks ended {worst:.1f} s after the fault (bound {ERROR_BOUND_S} s)",
          failures)
    named = any("lost the last path" in ranks.text(r) or "rank" in ranks.text(r) for r in others)
    check(named, "the error message names the lost path or the failed rank", failures)
    if failures:
        ranks.dump()
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collective", required=True, help="path of the ff-collective binary")
    ap.add_argument("--scenario", required=True, choices=["nic_down", "spine_down", "all_paths_down", "peer_killed"])
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("fabric_failover: SKIP: needs root to create network namespaces", file=sys.stderr)
        return fh.SKIP
    state = os.environ.get("FF_FABRIC_STATE")
    if not state:
        return fh.reenter_in_fabric(os.path.abspath(__file__), sys.argv[1:])
    binary = os.path.abspath(a.collective)
    if a.scenario in ("nic_down", "spine_down"):
        return scenario_survives(binary, state, a.scenario)
    return scenario_errors(binary, state, a.scenario)


if __name__ == "__main__":
    sys.exit(main())
