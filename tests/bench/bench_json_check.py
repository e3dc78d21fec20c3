#!/usr/bin/env python3
"""Checks `flexiforce bench --json`: one row per power-of-two size from --min-bytes to --max-bytes,
every figure measured (positive and finite) for both transports, round trips up to rtt_max_bytes and
none above, every figure the median of the runs listed under "runs" (5 per transport, each positive;
--runs N: N, an even count's median the mean of its middle two, and a --runs outside 1-99 refused),
TCP segments per round trip for plugin, raw and raw pair (at least 2: the two messages), TCP
segments per streamed message for plugin and raw (at least the message's bytes over loopback's
64 KiB segments),
the TCP congestion control both transports ran (config.tcp_congestion_control: the system's default;
--congestion NAME: NAME, a bad name refused), and a verdict for each of the five targets with the ratio it was judged on - recomputed here from the
rows, so a verdict that does not follow from the figures fails the test.
Speed itself is not asserted: the targets are reported, not required (a benchmark reports what it measured).

Usage: bench_json_check.py FLEXIFORCE"""
import json
import math
import subprocess
import sys

MIN, MAX = 8, 4 << 20
TARGETS = {  # key -> (min size, max size or None, min ratio)
    "throughput": (1 << 20, None, 0.90),
    "throughput_large_strict": (1 << 20, None, 0.95),
    "throughput_1k": (1024, 1024, 0.80),
    "throughput_64k": (64 << 10, 64 << 10, 0.80),
}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def positive(row, key):
    v = row.get(key)
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        fail(f"size {row.get('size')}: {key} is {v!r}, expected a positive number")
    return v


RUNS = 5


def check_runs(row, key, count=RUNS):
    """row[key] must be the median of row["runs"][key], `count` positive finite figures."""
    runs = row.get("runs", {}).get(key)
    if not isinstance(runs, list) or len(runs) != count:
        fail(f"size {row['size']}: runs.{key} is {runs!r}, expected {count} figures")
    for v in runs:
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            fail(f"size {row['size']}: runs.{key} holds {v!r}, expected positive numbers")
    ordered = sorted(runs)
    median = ordered[count // 2] if count % 2 else (ordered[count // 2 - 1] + ordered[count // 2]) / 2
    if abs(row[key] - median) > 1e-12 * median:
        fail(f"size {row['size']}: {key} {row[key]} is not the median of its runs {runs}")


def check_run_count(flexiforce):
    """--runs N: N alternating runs per figure; out of range: refused, naming the option and its range."""
    cmd = [flexiforce, "bench", "--min-bytes", "1K", "--max-bytes", "2K", "--iters", "24", "--runs", "4", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    out = json.loads(p.stdout)
    if out["config"].get("runs") != 4:
        fail(f"--runs 4: config.runs is {out['config'].get('runs')!r}")
    for r in out["results"]:
        for k in ("plugin_gbps", "raw_gbps", "plugin_rtt_us", "raw_rtt_us", "raw_pair_rtt_us"):
            check_runs(r, k, 4)
    for bad in ("0", "100", "x"):
        p = subprocess.run([flexiforce, "bench", "--runs", bad], capture_output=True, text=True, timeout=30)
        if p.returncode != 2 or "--runs" not in p.stderr or "1 to 99" not in p.stderr:
            fail(f"--runs {bad}: exit {p.returncode}, stderr {p.stderr.strip()!r}; expected 2 and the accepted range")


def check_congestion(flexiforce, default):
    """config.tcp_congestion_control is what the connections ran: the default, or --congestion's name."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            available = f.read().split()
    except OSError:
        available = []
    if default not in available and available:
        fail(f"config.tcp_congestion_control is {default!r}, not one of the kernel's {available}")
    other = next((a for a in available if a != default), None)
    if other is not None:
        cmd = [flexiforce, "bench", "--min-bytes", "64K", "--max-bytes", "64K", "--iters", "24", "--runs", "1",
               "--congestion", other, "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
        got = json.loads(p.stdout)["config"].get("tcp_congestion_control")
        if got != other:
            fail(f"--congestion {other}: config.tcp_congestion_control is {got!r}")
    for bad in ("Cubic", "x;y", ""):
        p = subprocess.run([flexiforce, "bench", "--congestion", bad], capture_output=True, text=True, timeout=30)
        if p.returncode != 2 or "--congestion" not in p.stderr:
            fail(f"--congestion {bad!r}: exit {p.returncode}, stderr {p.stderr.strip()!r}; expected 2 naming the option")


def main():
    cmd = [sys.argv[1], "bench", "--min-bytes", str(MIN), "--max-bytes", "4M", "--iters", "20", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        fail(f"stdout is not JSON ({e}): {p.stdout[:500]!r}")
    if out.get("ok") is not True:
        fail(f"ok is {out.get('ok')!r}")
    rows = out["results"]
    sizes = [r["size"] for r in rows]
    want = [1 << i for i in range(MIN.bit_length() - 1, MAX.bit_length())]
    if sizes != want:
        fail(f"sizes {sizes}, expected {want}")
    rtt_max = out["config"]["rtt_max_bytes"]
    for r in rows:
        for k in ("plugin_gbps", "raw_gbps", "throughput_ratio"):
            positive(r, k)
        if abs(r["throughput_ratio"] - r["plugin_gbps"] / r["raw_gbps"]) > 1e-9 * r["throughput_ratio"]:
            fail(f"size {r['size']}: throughput_ratio {r['throughput_ratio']} is not plugin/raw")
        for k in ("plugin_gbps", "raw_gbps"):
            check_runs(r, k)
        # A loopback segment carries at most 64 KiB (the interface's MTU), so a streamed message costs at
        # least size / 64 KiB segments: fewer means the count (TCP_INFO over the bench's connections,
        # around each run) missed a connection or broke.
        for k in ("plugin_stream_segments", "raw_stream_segments"):
            if positive(r, k) < r["size"] / 65536:
                fail(f"size {r['size']}: {k} is {r[k]}, below the {r['size'] / 65536:.4f} segments its bytes need")
        if r["size"] <= rtt_max:
            for k in ("plugin_rtt_us", "raw_rtt_us", "rtt_ratio", "raw_pair_rtt_us"):
                positive(r, k)
            for k in ("plugin_rtt_us", "raw_rtt_us", "raw_pair_rtt_us"):
                check_runs(r, k)
            # Every round trip carries at least its two messages, one segment each way: fewer means the
            # count (TCP_INFO over the bench's connections) missed a connection or broke.
            for k in ("plugin_rtt_segments", "raw_rtt_segments", "raw_pair_rtt_segments"):
                if positive(r, k) < 2.0:
                    fail(f"size {r['size']}: {k} is {r[k]}, below the 2 data segments of a round trip")
        elif r["plugin_rtt_us"] is not None or r["runs"]["plugin_rtt_us"]:
            fail(f"size {r['size']} above rtt_max_bytes {rtt_max} has a round trip")
    t = out["targets"]
    for key, (lo, hi, ratio) in TARGETS.items():
        if key not in t:
            fail(f"no target {key!r} in {sorted(t)}")
        covered = [r for r in rows if r["size"] >= lo and (hi is None or r["size"] <= hi)]
        worst = min(covered, key=lambda r: r["throughput_ratio"])
        got = t[key]
        if got["min_ratio"] != ratio or got["worst_size"] != worst["size"] or \
                abs(got["worst_ratio"] - worst["throughput_ratio"]) > 1e-12 or \
                got["met"] is not (worst["throughput_ratio"] >= ratio):
            fail(f"target {key}: {got}, expected worst {worst['throughput_ratio']} at {worst['size']} against {ratio}")
    r8 = rows[0]
    got = t["rtt_8b"]
    if abs(got["ratio"] - r8["rtt_ratio"]) > 1e-12 or got["met"] is not (r8["rtt_ratio"] <= 1.3):
        fail(f"target rtt_8b: {got}, expected ratio {r8['rtt_ratio']} against 1.3")
    check_run_count(sys.argv[1])
    check_congestion(sys.argv[1], out["config"].get("tcp_congestion_control"))
    verdicts = ", ".join(f"{k} {'met' if v['met'] else 'missed'}" for k, v in t.items())
    print(f"ok: {len(rows)} sizes, every figure measured; targets recomputed and consistent ({verdicts})")


if __name__ == "__main__":
    main()
