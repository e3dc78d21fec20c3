#!/usr/bin/python3
"""Failover benchmark on the fabric emulator (root only; exit 77 = skipped).

Usage: bench_failover.py --collective FF_COLLECTIVE [--trials 20] [--baseline-trials 3] [--bytes 32M]
                         [--scenarios nic_down,spine_down] [--json]

Each trial runs a 2-rank AllReduce (exact checks on every iteration) and cuts one link mid-transfer:
  nic_down    host h1's NIC 0 loses carrier; both NICs carry paths (FLEXIFORCE_SPREAD_NICS=1).
  spine_down  leaf1--spine1 goes down; steering on, FLEXIFORCE_TOPOLOGY = the emulator topology,
              one NIC per host, the two paths on the two spines.
Per trial, from the plugin's one-line failover log (one line per sending rank that lost data):
  detect_ms   cut -> failover decided (the log's unix timestamp minus the time before the cut command;
              the cut command's own duration, cut_cmd_ms, is included, so this is an upper bound)
  paused_ms   failover decided -> the receiver acknowledged past the cut (completions held meanwhile)
  resent      bytes re-sent (only the dead path's unacknowledged chunks)
  resume_ms   cut -> every direction acknowledged again = max(detect + paused) over the events
  flow_ms     cut -> the backup link (sampled every 2 ms from /proc/<pid>/net/dev) carried 256 KiB
              after the last failover decision: traffic verifiably on the backup path
  stuck_ms    the longest a chunk on the dead path waited: its path's time without progress when judged
              plus the pause (a path that carried nothing for a while after the cut waited for nothing)
Beside it, the same cut with failover disabled (FLEXIFORCE_PATHS=1, FLEXIFORCE_PEER_TIMEOUT_MS=2000,
a bound chosen for the benchmark): what the job sees - error after N s, or a hang until the driver's
timeout. The table prints median and p99 (nearest rank) of each metric.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import failover_harness as fh  # noqa: E402

PEER_TIMEOUT_MS = 2000
DRIVER_TIMEOUT_S = 20
FLOW_BYTES = 256 << 10
SETUP_S = 1.0  # connections of a 2-rank job are up within ~100 ms on this machine kind


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q / 100.0 * len(v) + 0.5)) - 1))]


def scenario_setup(state, name, failover):
    """(env, unset, control_rail, cut link id, {sampler name: (netns node, ifname)}) for a scenario."""
    if name == "nic_down":
        cut = fh.access_link(state, "h1", 0)
        watch = {"cut": ("h1", "eth0"), "backup": ("h1", "eth1")}
        if failover:
            env = {"FLEXIFORCE_SPREAD_NICS": "1", "FLEXIFORCE_PATHS": "2"}
            return env, ("NCCL_SOCKET_IFNAME",), 1, cut, watch
        env = {"NCCL_SOCKET_IFNAME": "eth0", "FLEXIFORCE_PATHS": "1", "FLEXIFORCE_PEER_TIMEOUT_MS": str(PEER_TIMEOUT_MS)}
        return env, (), 1, cut, watch
    topo = os.environ.get("FF_FABRIC_TOPOLOGY", "")
    env = {"NCCL_SOCKET_IFNAME": "eth0", "AI_FLEXIFORCE_ENABLE": "1", "FLEXIFORCE_TOPOLOGY": topo,
           "FLEXIFORCE_PATHS": "2" if failover else "1"}
    if not failover:
        env["FLEXIFORCE_PEER_TIMEOUT_MS"] = str(PEER_TIMEOUT_MS)
    watch = {"cut": ("leaf1", "sp1"), "backup": ("leaf1", "sp0")}
    return env, (), 0, fh.fabric_link(state, "leaf1", "spine1"), watch


def run_trial(binary, state_file, name, nbytes, warmup, failover):
    state = fh.load_state(state_file)
    env, unset, rail, cut, watch = scenario_setup(state, name, failover)
    anchors = {node: fh.NetnsAnchor(fh.netns_of(state, node)) for node in {n for n, _ in watch.values()}}
    args = ["--backend", "plugin", "--coll", "allreduce", "--min-bytes", nbytes, "--max-bytes", nbytes, "--iters", "1",
            "--warmup", str(warmup), "--timeout-s", str(DRIVER_TIMEOUT_S)]
    ranks = fh.Ranks(binary, state_file, args, env, unset, control_rail=rail)
    sources = {k: (anchors[node].pid, ifn) for k, (node, ifn) in watch.items()}
    sampler = fh.CounterSampler(sources)
    out = {"scenario": name, "failover": failover}
    try:
        # Cut once the plugin's traffic is flowing (32 MiB crossed the links watched) and the ranks have
        # had SETUP_S to finish connecting, at a random phase. The driver connects its channels one
        # after another: 32 MiB can cross within 60 ms of the start while a later channel's second
        # path is still connecting, and a cut then tests the setup grace (a partial start), not failover.
        start = time.monotonic()
        base = sampler.latest("cut") + sampler.latest("backup")
        while (sampler.latest("cut") + sampler.latest("backup") - base < (32 << 20) or
               time.monotonic() - start < SETUP_S):
            if time.monotonic() - start > 15 or any(p.poll() is not None for p in ranks.procs):
                raise RuntimeError("no traffic before the cut")
            time.sleep(0.005)
        time.sleep(random.uniform(0.0, 0.05))
        if not failover and name == "spine_down":
            # One path: cut the spine it actually uses.
            b0 = (sampler.latest("cut"), sampler.latest("backup"))
            time.sleep(0.05)
            if sampler.latest("backup") - b0[1] > sampler.latest("cut") - b0[0]:
                cut = fh.fabric_link(state, "leaf1", "spine0")
        t0, t1 = fh.cut_link(state, cut)
        out["cut_cmd_ms"] = 1000 * (t1 - t0)
        out["t0"] = t0
        try:
            codes, ends = ranks.wait(DRIVER_TIMEOUT_S + 10)
        finally:
            fh.fabric(state_file, "link-up", cut)
            # Let the restored link settle (neighbour entries, a SYN retransmission timer) before the
            # next trial connects: a trial must start on a whole fabric, not test the setup grace.
            time.sleep(3.0)
    finally:
        samples = sampler.stop()
        for a in anchors.values():
            a.close()
    t_end = ranks.started_unix + max(ends)
    out["codes"] = codes
    out["end_after_cut_s"] = t_end - t0
    if not failover:
        first = ranks.started_unix + min(e for e in ends)
        out["first_exit_after_cut_s"] = first - t0
        out["errors"] = sum(1 for c in codes if c not in (0, None))
        out["hung"] = any(c is None for c in codes) or out["end_after_cut_s"] > DRIVER_TIMEOUT_S
        return out, ranks
    events = ranks.failovers()
    out["events"] = len(events)
    # A trial passes when every rank's results were exact and the cut was seen: a failover, or the cut
    # path declared down while it held nothing unacknowledged (no failover line: nothing to re-send),
    # or - cut during setup - the connection started on the surviving path.
    out["exact"] = all(c == 0 for c in codes)
    out["down_idle"] = sum(ranks.text(r).count(" is down: ") for r in range(len(codes))) if not events else 0
    # Counted, never dropped: a trial whose ranks never finished connecting, and events decided
    # before the cut (a false alarm on a healthy path).
    out["setup_hung"] = any("connection setup" in ranks.text(r) for r in range(len(codes)))
    out["partial_start"] = any(" of 2 path(s)" in ranks.text(r) for r in range(len(codes)))
    out["early_events"] = sum(1 for e in events if e["at"] < t0)
    out["ok"] = out["exact"] and (len(events) > 0 or out["down_idle"] > 0 or out["partial_start"])
    if not events:
        return out, ranks
    out["causes"] = [f"{1000 * (e['at'] - t0):.1f} ms: {e['old']}" for e in events]
    out["detect_ms"] = max(1000 * (e["at"] - t0) for e in events)
    out["detect_first_ms"] = min(1000 * (e["at"] - t0) for e in events)
    out["paused_ms"] = max(e["paused_ms"] for e in events)
    # How long a chunk on the dead path waited: the path's time without progress when it was judged,
    # plus the pause until the re-sent data was acknowledged. Unlike the times counted from the cut,
    # it leaves out a path that carried nothing for a while after the cut (nothing was waiting).
    out["stuck_ms"] = max(e["silent_ms"] + e["paused_ms"] for e in events)
    out["resent_bytes"] = sum(e["resent"] for e in events)
    out["resume_ms"] = max(1000 * (e["at"] - t0) + e["paused_ms"] for e in events)
    last = max(e["at"] for e in events)
    at_switch = next((b["backup"] for t, b in samples if t >= last), None)
    flow = next((t for t, b in samples if t >= last and at_switch is not None and b["backup"] - at_switch >= FLOW_BYTES),
                None)
    out["flow_ms"] = 1000 * (flow - t0) if flow else None
    return out, ranks


def table(rows, name):
    ok = [r for r in rows if r["scenario"] == name and r["failover"]]
    lines = [f"{name}: {len(ok)} trials, {sum(1 for r in ok if r.get('ok'))} passed (exact, cut seen); "
             f"{sum(1 for r in ok if r.get('events'))} failed over; "
             f"{sum(1 for r in ok if r.get('down_idle'))} saw the cut path go down holding nothing to re-send; "
             f"{sum(1 for r in ok if r.get('setup_hung'))} hung in connection setup; "
             f"{sum(1 for r in ok if r.get('partial_start'))} started without a path (setup grace); "
             f"{sum(1 for r in ok if r.get('error'))} never got traffic flowing; "
             f"{sum(r.get('early_events', 0) for r in ok)} failover(s) decided before the cut"]
    lines.append(f"  {'metric':<16}{'median':>12}{'p99':>12}{'max':>12}")
    for key, unit in (("detect_first_ms", "ms"), ("detect_ms", "ms"), ("paused_ms", "ms"), ("resume_ms", "ms"),
                      ("flow_ms", "ms"), ("stuck_ms", "ms"), ("resent_bytes", "B"), ("cut_cmd_ms", "ms")):
        vals = [r[key] for r in ok if r.get(key) is not None]
        if vals:
            lines.append(f"  {key:<16}{statistics.median(vals):>12.1f}{percentile(vals, 99):>12.1f}{max(vals):>12.1f}")
    base = [r for r in rows if r["scenario"] == name and not r["failover"]]
    for r in base:
        what = "hang until the driver timeout" if r["hung"] else f"error on {r['errors']} rank(s)"
        lines.append(f"  failover off (PATHS=1, PEER_TIMEOUT_MS={PEER_TIMEOUT_MS}): {what}; first rank ended "
                     f"{r['first_exit_after_cut_s']:.2f} s, last {r['end_after_cut_s']:.2f} s after the cut "
                     f"(exit {r['codes']})")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collective", required=True, help="path of the ff-collective binary")
    ap.add_argument("--trials", type=int, default=20, help="failover trials per scenario (default 20)")
    ap.add_argument("--baseline-trials", type=int, default=2, help="failover-off trials per scenario (default 2)")
    ap.add_argument("--bytes", default="32M", help="AllReduce size (default 32M)")
    ap.add_argument("--warmup", type=int, default=30, help="checked iterations per trial (default 30)")
    ap.add_argument("--scenarios", default="nic_down,spine_down", help="comma-separated: nic_down,spine_down")
    ap.add_argument("--json", action="store_true", help="print every trial and the summary as JSON")
    ap.add_argument("--verbose", action="store_true", help="print the rank logs of failed trials")
    ap.add_argument("--dump-slower-than", type=float, default=0, metavar="MS",
                    help="also print the rank logs of trials whose last detection took longer than MS")
    a = ap.parse_args()
    names = [s for s in a.scenarios.split(",") if s]
    for s in names:
        if s not in ("nic_down", "spine_down"):
            ap.error(f"unknown scenario '{s}': expected nic_down or spine_down")
    if os.geteuid() != 0:
        print("bench_failover: SKIP: needs root to create network namespaces", file=sys.stderr)
        return fh.SKIP
    state = os.environ.get("FF_FABRIC_STATE")
    if not state:
        return fh.reenter_in_fabric(os.path.abspath(__file__), sys.argv[1:], hosts=2)
    binary = os.path.abspath(a.collective)
    rows = []
    for name in names:
        for failover, n in ((True, a.trials), (False, a.baseline_trials)):
            for i in range(n):
                try:
                    r, ranks = run_trial(binary, state, name, a.bytes, a.warmup, failover)
                except RuntimeError as e:
                    r, ranks = {"scenario": name, "failover": failover, "error": str(e)}, None
                rows.append(r)
                if not a.json:
                    print(f"{name} failover={'on' if failover else 'off'} trial {i}: " +
                          ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
                                    if k not in ("scenario", "failover", "t0")), flush=True)
                if a.verbose and ranks and failover:
                    for e in ranks.failovers():
                        print(f"    rank {e['rank']} at +{1000 * (e['at'] - r.get('t0', 0)):.1f} ms: {e['old']}")
                    if not r.get("ok") or (a.dump_slower_than and r.get("detect_ms", 0) > a.dump_slower_than):
                        ranks.dump()
    summary = {}
    for name in names:
        ok = [r for r in rows if r["scenario"] == name and r["failover"]]
        summary[name] = {k: {"median": statistics.median(v), "p99": percentile(v, 99), "max": max(v)}
                         for k in ("detect_first_ms", "detect_ms", "paused_ms", "resume_ms", "flow_ms", "stuck_ms",
                                   "resent_bytes")
                         for v in [[r[k] for r in ok if r.get(k) is not None]] if v}
    if a.json:
        print(json.dumps({"trials": rows, "summary": summary}, indent=1))
    else:
        for name in names:
            print(table(rows, name))
    failed = [r for r in rows if r["failover"] and not r.get("ok")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
