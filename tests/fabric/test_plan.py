#!/usr/bin/python3
"""Fabric plan tests that need no root: names, addresses, routes, port ranges, topology
format, link names, argument errors, and the exit-77 skip when not root."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fabric  # noqa: E402


def plan(**kw) -> dict:
    args = dict(run_id="ab12cd", octet=7, hosts=4, leaves=2, spines=2, nics=2)
    args.update(kw)
    return fabric.build_plan(**args)


class PlanTest(unittest.TestCase):
    def test_every_namespace_carries_the_run_id_and_ifnames_fit_15_chars(self):
        st = plan(hosts=40, leaves=8, spines=4, nics=4)
        self.assertTrue(all(n["netns"].startswith("ffab12cd-") for n in st["nodes"]))
        for link in st["links"]:
            for end in (link["a"], link["b"]):
                self.assertLessEqual(len(end["ifname"]), 15, end)

    def test_hosts_spread_round_robin_and_all_nics_of_a_host_share_its_leaf(self):
        st = plan(hosts=5, leaves=2, nics=3)
        for nic in st["nics"]:
            self.assertEqual(nic["leaf"], f"leaf{int(nic['host'][1:]) % 2}")
        self.assertEqual(len(st["links"]), 5 * 3 + 2 * 2)

    def test_addresses_are_unique_and_inside_the_runs_10_x_block(self):
        st = plan(hosts=16, leaves=4, spines=4, nics=2)
        ips = [e["ip"] for l in st["links"] for e in (l["a"], l["b"])]
        self.assertEqual(len(ips), len(set(ips)))
        block = ipaddress.ip_network("10.7.0.0/16")
        self.assertTrue(all(ipaddress.ip_address(ip) in block for ip in ips))
        for link in st["links"]:  # both ends of a link share one subnet
            a = ipaddress.ip_interface(f"{link['a']['ip']}/{link['a']['prefixlen']}")
            b = ipaddress.ip_interface(f"{link['b']['ip']}/{link['b']['prefixlen']}")
            self.assertEqual(a.network, b.network, link["id"])

    def test_default_port_ranges_split_the_ephemeral_range_per_spine(self):
        self.assertEqual(plan()["entropy"]["ranges"],
                         [{"lo": 49152, "hi": 57343, "via": "spine0"},
                          {"lo": 57344, "hi": 65534, "via": "spine1"}])
        r = fabric.spine_port_ranges(3, 10000, 10299)
        self.assertEqual([(x["lo"], x["hi"]) for x in r], [(10000, 10099), (10100, 10199), (10200, 10299)])
        with self.assertRaises(fabric.FabricError):
            fabric.spine_port_ranges(4, 10, 12)

    def test_leaf_spine_tables_hold_only_remote_subnets(self):
        st = plan()
        leaf0 = fabric.node_by_id(st, "leaf0")
        lines = fabric.route_lines(st, leaf0)
        local = {n["subnet"] for n in st["nics"] if n["leaf"] == "leaf0"}
        self.assertTrue(lines)
        # A local subnet in a spine table would bounce same-leaf traffic off the spine.
        self.assertFalse(any(line.split()[2] in local for line in lines))
        rules = fabric.rule_lines(st, leaf0)
        self.assertIn("rule add pref 1001 sport 57344-65534 lookup 101", rules)
        self.assertIn("rule add pref 2001 dport 57344-65534 lookup 101", rules)

    def test_host_rules_send_each_nic_address_out_of_its_own_nic(self):
        st = plan()
        h0 = fabric.node_by_id(st, "h0")
        self.assertEqual(fabric.rule_lines(st, h0), ["rule add pref 100 from 10.7.0.2 lookup 100",
                                                     "rule add pref 101 from 10.7.1.2 lookup 101"])
        lines = fabric.route_lines(st, h0)
        self.assertIn("route replace default via 10.7.1.1 dev eth1 table 101", lines)
        self.assertIn("route replace 10.7.3.0/24 via 10.7.1.1 dev eth1 src 10.7.1.2", lines)

    def test_topology_has_exactly_the_oracle_fields(self):
        st = plan()
        st["faults"]["leaf0--spine1"] = {"down_end": "B", "rate_bps": {"A": 2.5e9}}
        doc = json.loads(json.dumps(fabric.topology_doc(st)))
        self.assertEqual(set(doc), {"version", "nodes", "links", "entropy"})
        nic = next(n for n in doc["nodes"] if n["id"] == "h0-nic0")
        self.assertEqual(nic, {"id": "h0-nic0", "kind": "nic", "host": "h0", "ip": "10.7.0.2", "ifname": "eth0"})
        link = next(l for l in doc["links"] if (l["a"], l["b"]) == ("leaf0", "spine1"))
        self.assertEqual(set(link), {"a", "b", "capacity_gbps", "latency_us", "utilization",
                                     "free_buffer_bytes", "fec_error_rate", "state"})
        self.assertEqual((link["state"], link["capacity_gbps"]), ("down", 2.5))
        self.assertEqual(doc["entropy"]["kind"], "sport-ranges")
        ids = {n["id"] for n in doc["nodes"]}
        self.assertTrue(all(l["a"] in ids and l["b"] in ids for l in doc["links"]))

    def test_links_resolve_by_id_or_node_names_and_ambiguity_is_an_error(self):
        st = plan()
        self.assertEqual(fabric.resolve_link(st, ["h0-nic1--leaf0"])["id"], "h0-nic1--leaf0")
        self.assertEqual(fabric.resolve_link(st, ["spine1", "leaf0"])["id"], "leaf0--spine1")
        self.assertEqual(fabric.resolve_link(st, ["h0-nic0", "leaf0"])["id"], "h0-nic0--leaf0")
        with self.assertRaisesRegex(fabric.FabricError, "several links"):
            fabric.resolve_link(st, ["h0", "leaf0"])
        with self.assertRaisesRegex(fabric.FabricError, "no link between"):
            fabric.resolve_link(st, ["h0-nic0", "leaf1"])

    def test_bad_inputs_are_rejected_with_the_accepted_form(self):
        with self.assertRaisesRegex(fabric.FabricError, "mbit"):
            fabric.parse_rate("100mbps")
        self.assertEqual(fabric.parse_rate("2.5gbit"), 2.5e9)
        with self.assertRaisesRegex(fabric.FabricError, "LO-HI"):
            fabric.parse_port_range("70000-1")
        with self.assertRaisesRegex(fabric.FabricError, "run id"):
            plan(run_id="Bad-Id")
        with self.assertRaisesRegex(fabric.FabricError, "hosts"):
            plan(hosts=0)


class CliTest(unittest.TestCase):
    def run_fabric(self, *args: str, as_nobody: bool = False) -> subprocess.CompletedProcess:
        argv = ["/usr/bin/python3", os.path.join(HERE, "fabric.py"), *args]
        if as_nobody and os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if not setpriv:
                self.skipTest("setpriv not found; cannot drop root to test the skip path")
            # The checkout may sit where nobody cannot read (a clone under /root): run a copy of the
            # script from a directory nobody can read, from a working directory it can enter.
            copy_dir = tempfile.mkdtemp(prefix="ff-fabric-nobody-")
            self.addCleanup(shutil.rmtree, copy_dir, True)
            os.chmod(copy_dir, 0o755)
            script = os.path.join(copy_dir, "fabric.py")
            shutil.copyfile(os.path.join(HERE, "fabric.py"), script)
            os.chmod(script, 0o644)
            argv = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", script, *args]
            return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd="/")
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    def test_up_without_root_says_so_and_exits_77(self):
        proc = self.run_fabric("up", "--name", "nr1", as_nobody=True)
        self.assertEqual(proc.returncode, 77, proc.stderr)
        self.assertIn("needs root (CAP_NET_ADMIN)", proc.stderr)

    def test_every_subcommand_has_help(self):
        for cmd in ("up", "down", "run", "exec", "link-down", "link-up", "loss", "rate", "counters",
                    "topology", "plan"):
            proc = self.run_fabric(cmd, "--help")
            self.assertEqual(proc.returncode, 0, cmd)
            self.assertIn("usage", proc.stdout)

    def test_plan_prints_topology_json(self):
        proc = self.run_fabric("plan", "--hosts", "2", "--leaves", "1", "--spines", "1", "--nics", "1",
                               "--topology")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual([l["a"] + "--" + l["b"] for l in doc["links"]],
                         ["h0-nic0--leaf0", "h1-nic0--leaf0", "leaf0--spine0"])

    def test_loss_rejects_a_bad_percentage(self):
        proc = self.run_fabric("loss", "--state", "/nonexistent.json", "h0-nic0--leaf0", "150")
        self.assertIn(proc.returncode, (1, 77))
        if proc.returncode == 1:
            self.assertIn("expected a number 0..100", proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
