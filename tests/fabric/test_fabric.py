#!/usr/bin/python3
"""Root tests of the namespace fabric: lifecycle, reachability, path entropy and faults.

Usage: test_fabric.py CASE   (CASE is a TestCase class name below; ctest runs one each).
Exits 77 (ctest skip) with a message when not root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.join(HERE, "fabric.py")
TRAFFIC = os.path.join(HERE, "traffic.py")
PY = "/usr/bin/python3"
SERVER_PORT = 5201  # below the entropy ranges, so the client's source port alone picks the spine


def fabric(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([PY, FABRIC, *args], capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"fabric.py {' '.join(args)} failed rc={proc.returncode}: {proc.stderr}")
    return proc


def netns_with_prefix(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [n["name"] for n in json.loads(out or "[]") if n["name"].startswith(prefix)]


class Fabric:
    """One fabric built for one test, torn down by the test's cleanup."""

    def __init__(self, tc: unittest.TestCase, *up_args: str):
        self.state_path = f"/tmp/flexiforce-fabric-test-{os.getpid()}-{id(self)}.json"
        out = fabric("up", "--json", "--state", self.state_path, *up_args).stdout
        self.info = json.loads(out)
        tc.addCleanup(self.down)
        with open(self.state_path) as f:
            self.state = json.load(f)
        self.ns = {n["id"]: n["netns"] for n in self.state["nodes"]}
        self.nic_ip = {n["id"]: n["ip"] for n in self.state["nics"]}
        self.procs: list[subprocess.Popen] = []
        self.ranges = self.state["entropy"]["ranges"]

    def down(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()  # reaps it and closes its pipes
        if os.path.exists(self.state_path):
            fabric("down", "--state", self.state_path)

    def fault(self, *args: str) -> None:
        fabric(args[0], "--state", self.state_path, *args[1:])

    def counters(self) -> dict[str, dict]:
        rows = json.loads(fabric("counters", "--state", self.state_path, "--json").stdout)
        return {r["id"]: r for r in rows}

    def traffic(self, node: str, *args: str, timeout: float = 30) -> dict:
        proc = subprocess.run(["ip", "netns", "exec", self.ns[node], PY, TRAFFIC, *args],
                              capture_output=True, text=True, timeout=timeout)
        lines = proc.stdout.strip().splitlines()
        if not lines:
            raise AssertionError(f"traffic.py {' '.join(args)} in {node} printed nothing: {proc.stderr}")
        doc = json.loads(lines[-1])
        doc["rc"] = proc.returncode
        return doc

    def server(self, node: str, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[node], PY, TRAFFIC, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        line = proc.stdout.readline().strip()
        if line != "READY":
            raise AssertionError(f"server {args} in {node} did not start: {line} {proc.stderr.read()}")
        return proc

    @staticmethod
    def result(proc: subprocess.Popen, timeout: float = 30) -> dict:
        out, err = proc.communicate(timeout=timeout)
        lines = out.strip().splitlines()
        if not lines:
            raise AssertionError(f"server printed no result: {err}")
        return json.loads(lines[-1])

    def port_in(self, spine: str) -> int:
        r = next(r for r in self.ranges if r["via"] == spine)
        return (r["lo"] + r["hi"]) // 2


def delta(before: dict, after: dict, link: str, direction: str) -> int:
    return after[link][direction]["bytes"] - before[link][direction]["bytes"]


class LifecycleTest(unittest.TestCase):
    """(a) up/down and run leave no namespace behind, also after SIGTERM and on error."""

    def test_up_then_down_leaves_no_namespace_or_state_file(self):
        state = f"/tmp/flexiforce-fabric-test-{os.getpid()}-life.json"
        info = json.loads(fabric("up", "--json", "--state", state).stdout)
        prefix = f"ff{info['run_id']}-"
        try:
            self.assertEqual(len(netns_with_prefix(prefix)), 4 + 2 + 2)
            with open(state) as f:
                h2_nic1 = next(n["ip"] for n in json.load(f)["nics"] if n["id"] == "h2-nic1")
            out = fabric("exec", "--state", state, "h2", "--", "ip", "-4", "-o", "addr", "show", "dev", "eth1").stdout
            self.assertIn(f"inet {h2_nic1}/24", out)
        finally:
            fabric("down", "--state", state)
        self.assertEqual(netns_with_prefix(prefix), [])
        self.assertFalse(os.path.exists(state))

    def test_run_tears_down_after_command_fails(self):
        proc = fabric("run", "--name", f"t{os.getpid() % 100000}", "--", "sh", "-c",
                      'test -s "$FF_FABRIC_STATE" && test -s "$FF_FABRIC_TOPOLOGY" && exit 3', check=False)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertEqual(netns_with_prefix(f"fft{os.getpid() % 100000}-"), [])

    def test_run_tears_down_on_sigterm(self):
        run_id = f"s{os.getpid() % 100000}"
        proc = subprocess.Popen([PY, FABRIC, "run", "--name", run_id, "--", "sleep", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 20
            while len(netns_with_prefix(f"ff{run_id}-")) < 8 and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(len(netns_with_prefix(f"ff{run_id}-")), 8)
            time.sleep(0.3)  # let run reach its wait on the command
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertEqual(netns_with_prefix(f"ff{run_id}-"), [])

    def test_a_signal_during_the_commands_start_still_reaches_the_command(self):
        # The race behind a rare hang of the SIGTERM test above, made certain: the signal arrives
        # inside Popen, after the fork, before run knows its child. Run used to leave the command
        # running, unseen, holding run's stdout/stderr; now the signal waits until it knows it.
        run_id = f"p{os.getpid() % 100000}"
        marker = "29.25"  # a `sleep` no other test runs
        script = (
            "import os, signal, subprocess, sys\n"
            f"sys.path.insert(0, {HERE!r})\n"
            "import fabric\n"
            "Real = subprocess.Popen\n"
            "class Popen(Real):\n"
            "    def __init__(self, argv, *a, **kw):\n"
            "        super().__init__(argv, *a, **kw)\n"
            f"        if list(argv) == ['sleep', {marker!r}]:\n"
            "            os.kill(os.getpid(), signal.SIGTERM)\n"
            "subprocess.Popen = Popen\n"
            f"sys.exit(fabric.main(['run', '--name', {run_id!r}, '--', 'sleep', {marker!r}]))\n")
        proc = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.fail("run did not finish: its command kept run's output open")
        finally:
            left = subprocess.run(["pgrep", "-f", f"^sleep {marker}$"], capture_output=True, text=True).stdout.split()
            subprocess.run(["pkill", "-f", f"^sleep {marker}$"], check=False)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertEqual(left, [], "the command outlived run")
        self.assertEqual(netns_with_prefix(f"ff{run_id}-"), [])

    def test_the_command_starts_with_no_signal_blocked(self):
        proc = fabric("run", "--name", f"b{os.getpid() % 100000}", "--", "grep", "^SigBlk", "/proc/self/status")
        self.assertRegex(proc.stdout, r"SigBlk:\s+0+\n")

    def test_down_by_name_removes_stale_namespaces_of_that_run_only(self):
        mine, other = f"m{os.getpid() % 100000}", f"o{os.getpid() % 100000}"
        for rid in (mine, other):
            subprocess.run(["ip", "netns", "add", f"ff{rid}-h0"], check=True)
        try:
            fabric("down", "--name", mine)
            self.assertEqual(netns_with_prefix(f"ff{mine}-"), [])
            self.assertEqual(netns_with_prefix(f"ff{other}-"), [f"ff{other}-h0"])
        finally:
            subprocess.run(["ip", "netns", "del", f"ff{other}-h0"], check=False)
            subprocess.run(["ip", "netns", "del", f"ff{mine}-h0"], capture_output=True, check=False)


class ReachabilityTest(unittest.TestCase):
    """(b) every host reaches every other host's every NIC, by ICMP and by TCP."""

    def test_every_host_pair_exchanges_icmp_and_tcp_echo(self):
        fab = Fabric(self)
        hosts = [n["id"] for n in fab.state["nodes"] if n["kind"] == "host"]
        for h in hosts:
            fab.server(h, "tcp-echo-server", "--port", str(SERVER_PORT))
        for h in hosts:
            mine = [n["ip"] for n in fab.state["nics"] if n["host"] == h]
            theirs = [n["ip"] for n in fab.state["nics"] if n["host"] != h]
            args = ["tcp-echo-client", "--size", "20000"]
            for ip in mine:
                args += ["--bind", ip]
            for ip in theirs:
                args += ["--to", f"{ip}:{SERVER_PORT}"]
            doc = fab.traffic(h, *args)
            self.assertTrue(doc["ok"], f"{h}: {[r for r in doc['results'] if not r['ok']]}")
            self.assertEqual(len(doc["results"]), len(mine) * len(theirs))
            for nic in (n for n in fab.state["nics"] if n["host"] == h):
                for other in (n for n in fab.state["nics"] if n["host"] != h and n["rail"] == nic["rail"]):
                    ping = fab.traffic(h, "ping", "--bind", nic["ip"], "--to", other["ip"], "--count", "2")
                    self.assertEqual(ping["received"], 2, f"ping {nic['id']} -> {other['id']}")

    def test_socket_bound_to_nic_leaves_through_that_nic(self):
        fab = Fabric(self)
        sink = fab.server("h1", "tcp-sink", "--port", str(SERVER_PORT))
        before = fab.counters()
        doc = fab.traffic("h0", "tcp-send", "--bind", fab.nic_ip["h0-nic1"],
                          "--to", f"{fab.nic_ip['h1-nic0']}:{SERVER_PORT}", "--bytes", "1000000")
        self.assertTrue(doc["ok"], doc)
        self.assertEqual(Fabric.result(sink)["bytes"], 1000000)
        after = fab.counters()
        self.assertGreater(delta(before, after, "h0-nic1--leaf0", "a_to_b"), 1000000)
        self.assertLess(delta(before, after, "h0-nic0--leaf0", "a_to_b"), 10000)


class EntropyTest(unittest.TestCase):
    """(c) the TCP source port picks the spine, in both directions of the flow."""

    def send_via(self, fab: Fabric, spine: str, nbytes: int) -> tuple[dict, dict]:
        sink = fab.server("h1", "tcp-sink", "--port", str(SERVER_PORT))
        before = fab.counters()
        doc = fab.traffic("h0", "tcp-send", "--bind", fab.nic_ip["h0-nic0"], "--sport",
                          str(fab.port_in(spine)), "--to", f"{fab.nic_ip['h1-nic0']}:{SERVER_PORT}",
                          "--bytes", str(nbytes))
        self.assertTrue(doc["ok"], doc)
        self.assertEqual(Fabric.result(sink)["bytes"], nbytes)
        return before, fab.counters()

    def test_source_port_in_spine1_range_crosses_spine1_not_spine0(self):
        fab = Fabric(self)
        n = 2_000_000
        before, after = self.send_via(fab, "spine1", n)
        self.assertGreater(delta(before, after, "leaf0--spine1", "a_to_b"), n)
        self.assertGreater(delta(before, after, "leaf1--spine1", "b_to_a"), n)
        self.assertGreater(delta(before, after, "leaf1--spine1", "a_to_b"), 0, "ACKs return via spine1")
        for link in ("leaf0--spine0", "leaf1--spine0"):
            for d in ("a_to_b", "b_to_a"):
                self.assertEqual(delta(before, after, link, d), 0, f"{link} {d}")

        before, after = self.send_via(fab, "spine0", n)
        self.assertGreater(delta(before, after, "leaf0--spine0", "a_to_b"), n)
        self.assertEqual(delta(before, after, "leaf0--spine1", "a_to_b"), 0)

    def test_topology_file_lists_nodes_links_and_port_ranges(self):
        fab = Fabric(self)
        topo = f"{fab.state_path}.topo.json"
        self.addCleanup(lambda: os.path.exists(topo) and os.unlink(topo))
        fabric("topology", "--state", fab.state_path, "-o", topo)
        with open(topo) as f:
            doc = json.load(f)
        self.assertEqual(doc["version"], 1)
        kinds = [n["kind"] for n in doc["nodes"]]
        self.assertEqual((kinds.count("host"), kinds.count("nic"), kinds.count("leaf"), kinds.count("spine")),
                         (4, 8, 2, 2))
        self.assertEqual(len(doc["links"]), 8 + 4)
        self.assertEqual([(r["lo"], r["hi"], r["via"]) for r in doc["entropy"]["ranges"]],
                         [(49152, 57343, "spine0"), (57344, 65534, "spine1")])


class LinkDownTest(unittest.TestCase):
    """(d) link-down stops traffic on that link (peer sees NO-CARRIER); link-up restores it."""

    def tcp_ok(self, fab: Fabric, src_nic: str, dst_nic: str, sport: int = 0) -> bool:
        sink = fab.server(dst_nic.split("-")[0], "tcp-sink", "--port", str(SERVER_PORT))
        doc = fab.traffic(src_nic.split("-")[0], "tcp-send", "--bind", fab.nic_ip[src_nic], "--sport",
                          str(sport), "--to", f"{fab.nic_ip[dst_nic]}:{SERVER_PORT}", "--bytes", "100000",
                          "--timeout", "1")
        if doc["ok"]:
            return Fabric.result(sink, timeout=10)["bytes"] == 100000
        sink.kill()
        sink.communicate()
        return False

    def wait_tcp_ok(self, fab: Fabric, *args, within: float = 8.0) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.tcp_ok(fab, *args):
                return True
        return False

    def test_access_link_down_stops_traffic_and_up_restores_it(self):
        fab = Fabric(self)
        link = "h0-nic0--leaf0"
        self.assertTrue(self.tcp_ok(fab, "h0-nic0", "h1-nic0"))
        fab.fault("link-down", link)
        c = fab.counters()
        self.assertTrue(c[link]["a"]["no_carrier"], "host end must see carrier loss")
        self.assertFalse(self.tcp_ok(fab, "h0-nic0", "h1-nic0"))
        self.assertEqual(fab.counters()[link]["a_to_b"], c[link]["a_to_b"], "no bytes cross a down link")
        self.assertTrue(self.tcp_ok(fab, "h0-nic1", "h1-nic1"), "the other rail is unaffected")
        with open(fab.state_path) as f:
            self.assertEqual(json.load(f)["faults"][link]["down_end"], "B")
        fab.fault("link-up", "h0-nic0", "leaf0")  # the two-node-name form
        self.assertTrue(self.wait_tcp_ok(fab, "h0-nic0", "h1-nic0"))
        self.assertFalse(fab.counters()[link]["a"]["no_carrier"])

    def test_spine_link_down_stops_only_that_spines_port_range(self):
        fab = Fabric(self)
        fab.fault("link-down", "leaf0--spine0")
        self.assertFalse(self.tcp_ok(fab, "h0-nic0", "h1-nic0", fab.port_in("spine0")))
        self.assertTrue(self.tcp_ok(fab, "h0-nic0", "h1-nic0", fab.port_in("spine1")))
        fab.fault("link-up", "leaf0--spine0")
        # The spine end was set down, which flushed the spine's routes; link-up restores them.
        self.assertTrue(self.wait_tcp_ok(fab, "h0-nic0", "h1-nic0", fab.port_in("spine0")))


class LossTest(unittest.TestCase):
    """(e) loss 50 drops about half the packets at the link's receiving end; 0 removes it."""

    def udp_received(self, fab: Fabric, count: int) -> int:
        sink = fab.server("h1", "udp-sink", "--port", str(SERVER_PORT), "--idle", "0.5")
        fab.traffic("h0", "udp-send", "--bind", fab.nic_ip["h0-nic0"], "--to",
                    f"{fab.nic_ip['h1-nic0']}:{SERVER_PORT}", "--count", str(count), "--pps", "5000")
        return Fabric.result(sink)["packets"]

    def test_loss_50_drops_about_half_of_udp_and_icmp(self):
        fab = Fabric(self)
        self.assertEqual(self.udp_received(fab, 500), 500)
        fab.fault("loss", "h0-nic0--leaf0", "50", "--at-end", "B")
        got = self.udp_received(fab, 2000)
        # Binomial(2000, 0.5): sd = 22, so 800..1200 is +-9 sd.
        self.assertTrue(800 <= got <= 1200, f"received {got} of 2000 at 50% loss")
        ping = fab.traffic("h0", "ping", "--bind", fab.nic_ip["h0-nic0"], "--to", fab.nic_ip["h1-nic0"],
                           "--count", "200", "--interval", "0.002", "--timeout", "0.5")
        self.assertTrue(60 <= ping["received"] <= 140, f"ping received {ping['received']} of 200")
        fab.fault("loss", "h0-nic0--leaf0", "0")
        self.assertEqual(self.udp_received(fab, 500), 500)

    def test_loss_at_end_a_leaves_the_other_direction_intact(self):
        fab = Fabric(self)
        fab.fault("loss", "h0-nic0--leaf0", "100", "--at-end", "A")  # drop only what h0 receives
        self.assertEqual(self.udp_received(fab, 300), 300)  # h0 -> h1 passes end B untouched
        ping = fab.traffic("h0", "ping", "--bind", fab.nic_ip["h0-nic0"], "--to", fab.nic_ip["h1-nic0"],
                           "--count", "5", "--timeout", "0.3")
        self.assertEqual(ping["received"], 0, "replies into h0 are dropped")


class RateTest(unittest.TestCase):
    """(f) rate limits throughput to about the set rate; off removes the limit."""

    def throughput(self, fab: Fabric, seconds: float) -> float:
        sink = fab.server("h1", "tcp-sink", "--port", str(SERVER_PORT))
        doc = fab.traffic("h0", "tcp-send", "--bind", fab.nic_ip["h0-nic0"], "--to",
                          f"{fab.nic_ip['h1-nic0']}:{SERVER_PORT}", "--seconds", str(seconds))
        self.assertTrue(doc["ok"], doc)
        return Fabric.result(sink)["mbit_per_s"]

    def test_rate_limits_throughput_to_about_the_set_rate(self):
        fab = Fabric(self)
        free = self.throughput(fab, 0.5)
        self.assertGreater(free, 300, "an unlimited veth path should be far above the limit")
        fab.fault("rate", "h0-nic0--leaf0", "50mbit", "--at-end", "A")
        limited = self.throughput(fab, 1.5)
        self.assertTrue(35 <= limited <= 55, f"throughput {limited} Mbit/s at a 50mbit limit")
        with open(fab.state_path) as f:
            self.assertEqual(json.load(f)["faults"]["h0-nic0--leaf0"]["rate_bps"], {"A": 50e6})
        fab.fault("rate", "h0-nic0--leaf0", "off")
        self.assertGreater(self.throughput(fab, 0.5), 150)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("fabric: needs root (CAP_NET_ADMIN) to create network namespaces; skipping")
        sys.exit(77)
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} CASE  (e.g. LifecycleTest)")
    result = unittest.main(argv=[sys.argv[0], sys.argv[1]], exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
