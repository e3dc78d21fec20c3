"""Shared by the failover tests and benchmark: ranks of ff-collective in emulated hosts, link faults.

One rank per host of a fabric built by tests/fabric/fabric.py, each in its host's namespace; the
plugin's log (stderr) of every rank is kept in a file so failover lines can be parsed. The files
are removed when the test exits (a failing test prints the ranks' logs first); FF_KEEP_LOGS=1
keeps them.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.normpath(os.path.join(HERE, "..", "fabric", "fabric.py"))
PYTHON = "/usr/bin/python3"
RENDEZVOUS_PORT = 5302  # below the entropy port range, so it never selects a spine
SKIP = 77

FAILOVER_RE = re.compile(
    r"failover to (?P<peer>\S+): path (?P<old>.*?); detected after (?P<silent>[\d.]+) ms without progress, "
    r"paused (?P<paused>[\d.]+) ms, re-sent (?P<resent>\d+) bytes; now on (?P<new>.*) "
    r"\(detected at unix (?P<at>[\d.]+)\)")


def load_state(path):
    with open(path) as f:
        return json.load(f)


def fabric(state_file, *args):
    """Runs a fabric.py sub-command on the live fabric; raises on failure."""
    cmd = [PYTHON, FABRIC] + list(args[:1]) + ["--state", state_file] + list(args[1:])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def access_link(state, host, rail):
    for link in state["links"]:
        if link["kind"] == "access" and link["a"]["node"] == f"{host}-nic{rail}":
            return link["id"]
    raise KeyError(f"no access link for {host} nic {rail}")


def fabric_link(state, leaf, spine):
    for link in state["links"]:
        if link["kind"] == "fabric" and {link["a"]["node"], link["b"]["node"]} == {leaf, spine}:
            return link["id"]
    raise KeyError(f"no link {leaf}--{spine}")


def link_bytes(state_file, link_id):
    out = subprocess.run([PYTHON, FABRIC, "counters", "--state", state_file, "--json"], check=True,
                         capture_output=True, text=True).stdout
    for row in json.loads(out):
        if row["id"] == link_id:
            return row["a_to_b"]["bytes"] + row["b_to_a"]["bytes"]
    raise KeyError(link_id)


class Ranks:
    """ff-collective ranks, one per emulated host; stderr of rank i goes to self.logs[i]."""

    def __init__(self, binary, state_file, args, env=None, unset=(), control_rail=0, rank_env=None):
        # The driver's own rendezvous/barrier sockets use NIC `control_rail`; a test that cuts a NIC
        # puts them on another one, so only the plugin's traffic sees the fault.
        self.state = load_state(state_file)
        hosts = [n for n in self.state["nodes"] if n["kind"] == "host"]
        nic0 = {n["host"]: n for n in self.state["nics"] if n["rail"] == control_rail}
        root_ip = nic0[hosts[0]["id"]]["ip"]
        base = dict(os.environ)
        for k in unset:
            base.pop(k, None)
        base.update(env or {})
        self.dir = tempfile.mkdtemp(prefix="ff-failover-")
        if os.environ.get("FF_KEEP_LOGS", "0") in ("", "0"):
            atexit.register(shutil.rmtree, self.dir, True)
        self.logs, self.procs, self.hosts = [], [], hosts
        self.started = time.monotonic()
        self.started_unix = time.time() - (time.monotonic() - self.started)
        for rank, host in enumerate(hosts):
            log = os.path.join(self.dir, f"rank{rank}.log")
            self.logs.append(log)
            cmd = ["ip", "netns", "exec", host["netns"], binary, "--rank", str(rank), "--nranks", str(len(hosts)),
                   "--rendezvous", f"{root_ip}:{RENDEZVOUS_PORT}", "--bind-ip", nic0[host["id"]]["ip"]] + args
            env_r = dict(base, **(rank_env or {}).get(rank, {}))
            with open(log, "w") as f:
                self.procs.append(subprocess.Popen(cmd, env=env_r, stdout=f, stderr=subprocess.STDOUT))

    def wait(self, timeout_s):
        """Exit codes (None for a rank killed at the deadline) and per-rank exit times since start."""
        deadline = time.monotonic() + timeout_s
        codes, ends = [None] * len(self.procs), [None] * len(self.procs)
        while None in ends:
            for i, p in enumerate(self.procs):
                if ends[i] is None and p.poll() is not None:
                    codes[i], ends[i] = p.returncode, time.monotonic() - self.started
            if time.monotonic() > deadline:
                for i, p in enumerate(self.procs):
                    if ends[i] is None:
                        p.kill()
                        p.wait()
                        ends[i] = time.monotonic() - self.started
                break
            time.sleep(0.02)
        return codes, ends

    def kill(self, rank):
        self.procs[rank].send_signal(signal.SIGKILL)

    def text(self, rank):
        with open(self.logs[rank]) as f:
            return f.read()

    def failovers(self):
        events = []
        for r in range(len(self.procs)):
            for m in FAILOVER_RE.finditer(self.text(r)):
                events.append(dict(rank=r, silent_ms=float(m["silent"]), paused_ms=float(m["paused"]),
                                   resent=int(m["resent"]), at=float(m["at"]), old=m["old"], new=m["new"]))
        return events

    def dump(self, limit=30):
        for r in range(len(self.procs)):
            lines = self.text(r).splitlines()
            print(f"--- rank {r} ({len(lines)} lines, last {limit})")
            for line in lines[-limit:]:
                print(line)


def reenter_in_fabric(script, argv, extra=(), hosts=4):
    """Builds a fabric of `hosts` hosts around `script` (fabric.py run); returns its exit status."""
    cmd = [PYTHON, FABRIC, "run", "--hosts", str(hosts)] + list(extra) + ["--", PYTHON, script] + argv
    return subprocess.call(cmd)


def netns_of(state, node):
    for n in state["nodes"]:
        if n["id"] == node:
            return n["netns"]
    raise KeyError(node)


def link_by_id(state, link_id):
    for link in state["links"]:
        if link["id"] == link_id:
            return link
    raise KeyError(link_id)


def cut_link(state, link_id, end="b"):
    """Carrier loss like `fabric.py link-down` (end B by default), without its Python start-up and
    carrier polling, so the returned unix times bracket the moment of the cut within a few ms."""
    e = link_by_id(state, link_id)[end]
    # A running `ip -batch` executes each line as it arrives: no process start inside the measurement.
    ip = subprocess.Popen(["ip", "-n", e["netns"], "-batch", "-"], stdin=subprocess.PIPE, text=True)
    time.sleep(0.02)
    t0 = time.time()
    ip.stdin.write(f"link set dev {e['ifname']} down\n")
    ip.stdin.flush()
    ip.stdin.close()
    if ip.wait() != 0:
        raise RuntimeError(f"could not set {e['ifname']} down in {e['netns']}")
    return t0, time.time()


class NetnsAnchor:
    """A sleeping process inside a namespace: /proc/<pid>/net/dev then shows that namespace's counters."""

    def __init__(self, netns):
        self.proc = subprocess.Popen(["ip", "netns", "exec", netns, "sleep", "100000"])
        time.sleep(0.05)

    @property
    def pid(self):
        return self.proc.pid

    def close(self):
        self.proc.kill()
        self.proc.wait()


def iface_bytes(pid, ifname):
    """rx+tx bytes of `ifname` in the namespace of process `pid` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == ifname:
                    v = rest.split()
                    return int(v[0]) + int(v[8])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


class CounterSampler:
    """Samples interface byte counters every `period_s` in a thread: [(unix time, {name: bytes})]."""

    def __init__(self, sources, period_s=0.002):
        import threading
        self.sources, self.period, self.samples = sources, period_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.time(), {k: iface_bytes(pid, ifn) for k, (pid, ifn) in self.sources.items()}))
            time.sleep(self.period)

    def latest(self, key):
        return self.samples[-1][1][key] if self.samples else 0

    def stop(self):
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
        return self.samples


# TCP counters (nstat, per host namespace) that say what a path's retransmissions were: real drops
# in the fabric, tail-loss probes, or timeouts of a host too busy to acknowledge in time.
KERNEL_TCP_COUNTERS = ("TcpRetransSegs", "TcpExtTCPLossProbes", "TcpExtTCPLossProbeRecovery",
                       "TcpExtTCPTimeouts", "TcpExtTCPSpuriousRTOs", "TcpExtTCPDSACKRecv",
                       "TcpExtTCPDSACKRecvSegs", "TcpExtTCPSACKRecovery", "TcpExtTCPFastRetrans",
                       "TcpExtTCPLostRetransmit", "TcpExtTCPOFOQueue", "TcpExtTCPBacklogDrop",
                       "TcpExtTCPRcvQDrop", "TcpExtTCPOFODrop")


def kernel_evidence(state):
    """Sums, over the fabric's namespaces, of the TCP counters above, the interfaces' drops, and the
    host's softnet backlog drops (/proc/net/softnet_stat, all namespaces share it)."""
    totals = {k: 0 for k in KERNEL_TCP_COUNTERS}
    totals["if_rx_dropped"] = totals["if_tx_dropped"] = 0
    for n in state["nodes"]:
        ns = n["netns"]
        out = subprocess.run(["ip", "netns", "exec", ns, "nstat", "-az", "--json"], capture_output=True,
                             text=True).stdout
        try:
            doc = json.loads(out or "{}")
        except ValueError:
            doc = {}
        for table in doc.values():
            for k in KERNEL_TCP_COUNTERS:
                totals[k] += int(table.get(k, 0))
        out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show"], capture_output=True, text=True).stdout
        try:
            for dev in json.loads(out or "[]"):
                s = dev.get("stats64", dev.get("stats", {}))
                totals["if_rx_dropped"] += int(s.get("rx", {}).get("dropped", 0))
                totals["if_tx_dropped"] += int(s.get("tx", {}).get("dropped", 0))
        except ValueError:
            pass
    drops = 0
    try:
        with open("/proc/net/softnet_stat") as f:
            for line in f:
                drops += int(line.split()[1], 16)
    except OSError:
        pass
    totals["softnet_dropped"] = drops
    return totals


def evidence_delta(before, after):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
