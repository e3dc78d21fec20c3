#!/usr/bin/python3
"""Leaf-spine fabric emulator built from Linux network namespaces and veth links.

Hosts, leaves and spines are network namespaces; every link is a veth pair whose two
ends live in the two namespaces it joins.  Leaves pick the spine from the TCP/UDP
source (or destination) port, like ECMP hashing the RoCEv2 UDP source port, so a host
that chooses its source port chooses its spine.  Faults (carrier loss, random drop,
rate limit) are one command each.  See README.md in this folder for the full story.

Only the Python standard library is used; `ip`, `nft` and `tc` do the work.  Nothing
is ever created, changed or read in the root namespace except /run/netns entries.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

EXIT_SKIP = 77  # ctest SKIP_RETURN_CODE
SKIP_MESSAGE = "fabric: needs root (CAP_NET_ADMIN) to create network namespaces; skipping"
STATE_VERSION = 1
TOPOLOGY_VERSION = 1
NS_PREFIX = "ff"

# Address plan inside 10.<octet>.0.0/16 (one octet per run): host NIC i = h*nics+r gets
# 10.<octet>.<i>.0/24 (leaf .1, host .2); leaf-spine link k = l*spines+s gets a /30 in
# 10.<octet>.240.0/20 (leaf .1, spine .2).
MAX_HOST_NICS = 240
MAX_FABRIC_LINKS = 16 * 64
HOST_TABLE_BASE = 100   # host: table 100+r holds NIC r's routes (source-based)
SPINE_TABLE_BASE = 100  # leaf: table 100+s routes remote-leaf subnets via spine s
SPORT_RULE_PREF = 1000
DPORT_RULE_PREF = 2000
SOURCE_RULE_PREF = 100
MAX_RULE_PORT = 65534

RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)$", re.IGNORECASE)
RATE_SCALE = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
RUN_ID_RE = re.compile(r"^[a-z0-9]{1,8}$")


class FabricError(Exception):
    """An error with a message meant for the user (no traceback)."""


class NeedsRoot(FabricError):
    pass


# ----------------------------------------------------------------------------------
# Running tools


def run_cmd(argv: list[str], stdin: str | None = None) -> str:
    """Runs one command; raises FabricError naming the command on a non-zero exit."""
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise FabricError(f"command not found: {argv[0]} ({exc})") from exc
    if proc.returncode != 0:
        err = proc.stderr.strip() or proc.stdout.strip()
        if "Operation not permitted" in err or "Permission denied" in err:
            raise NeedsRoot(SKIP_MESSAGE)
        detail = ""
        if stdin is not None:
            detail = _failed_batch_line(err, stdin)
        raise FabricError(f"command failed (rc={proc.returncode}): {' '.join(argv)}\n  {err}{detail}")
    return proc.stdout


def _failed_batch_line(err: str, script: str) -> str:
    # `ip -batch -` reports "Command failed -:N"; show the offending line itself.
    m = re.search(r"-:(\d+)", err)
    if not m:
        return ""
    lines = script.splitlines()
    n = int(m.group(1))
    return f"\n  failing batch line {n}: {lines[n - 1]}" if 0 < n <= len(lines) else ""


def run_parallel(jobs: list[tuple[list[str], str | None]]) -> list[str]:
    """Runs independent commands concurrently (one per namespace); raises the first error."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
        futures = [pool.submit(run_cmd, argv, stdin) for argv, stdin in jobs]
        results, errors = [], []
        for fut in futures:
            try:
                results.append(fut.result())
            except FabricError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return results


def ip_batch(netns: str | None, lines: list[str]) -> tuple[list[str], str]:
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    return argv, "\n".join(lines) + "\n"


def list_netns() -> list[str]:
    out = run_cmd(["ip", "-j", "netns", "list"]).strip()
    return [entry["name"] for entry in json.loads(out)] if out else []


def require_root() -> None:
    if os.geteuid() != 0:
        raise NeedsRoot(SKIP_MESSAGE)


# ----------------------------------------------------------------------------------
# The plan: a pure function of the parameters (no side effects, testable without root)


def spine_port_ranges(spines: int, lo: int, hi: int) -> list[dict]:
    """Splits [lo, hi] into one contiguous range per spine; the last takes the remainder."""
    total = hi - lo + 1
    if total < spines:
        raise FabricError(f"port range {lo}-{hi} is smaller than the number of spines ({spines})")
    size = total // spines
    ranges = []
    for s in range(spines):
        r_lo = lo + s * size
        r_hi = hi if s == spines - 1 else r_lo + size - 1
        # The kernel rejects FIB rule port ranges ending at 65535 (end must be < 0xffff).
        r_hi = min(r_hi, MAX_RULE_PORT)
        if r_lo > r_hi:
            raise FabricError(f"port range {lo}-{hi} leaves spine{s} no port below {MAX_RULE_PORT + 1}")
        ranges.append({"lo": r_lo, "hi": r_hi, "via": f"spine{s}"})
    return ranges


def parse_port_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)-(\d+)", text)
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2)) <= 65535):
        raise FabricError(f"bad port range '{text}': expected LO-HI with 1 <= LO <= HI <= 65535")
    return int(m.group(1)), int(m.group(2))


def build_plan(run_id: str, octet: int, hosts: int, leaves: int, spines: int, nics: int,
               mtu: int = 1500, port_lo: int = 49152, port_hi: int = 65535,
               capacity_gbps: float = 10.0) -> dict:
    """Returns the state document describing namespaces, links, addresses and entropy."""
    if not RUN_ID_RE.match(run_id):
        raise FabricError(f"bad run id '{run_id}': expected 1-8 characters of [a-z0-9]")
    for name, value, lo in (("hosts", hosts, 1), ("leaves", leaves, 1), ("spines", spines, 1),
                            ("nics", nics, 1)):
        if value < lo:
            raise FabricError(f"--{name} must be >= {lo}, got {value}")
    if hosts * nics > MAX_HOST_NICS:
        raise FabricError(f"hosts*nics = {hosts * nics} exceeds {MAX_HOST_NICS} (one /24 each)")
    if leaves * spines > MAX_FABRIC_LINKS:
        raise FabricError(f"leaves*spines = {leaves * spines} exceeds {MAX_FABRIC_LINKS}")
    if not 1 <= octet <= 254:
        raise FabricError(f"address octet {octet} out of range 1..254")
    if not 576 <= mtu <= 65535:
        raise FabricError(f"--mtu {mtu} out of range 576..65535")

    prefix = f"{NS_PREFIX}{run_id}-"
    nodes, nics_out, links = [], [], []

    def node(node_id: str, kind: str) -> None:
        nodes.append({"id": node_id, "kind": kind, "netns": prefix + node_id})

    for h in range(hosts):
        node(f"h{h}", "host")
    for l in range(leaves):
        node(f"leaf{l}", "leaf")
    for s in range(spines):
        node(f"spine{s}", "spine")

    for h in range(hosts):
        leaf = f"leaf{h % leaves}"
        for r in range(nics):
            i = h * nics + r
            nic_id = f"h{h}-nic{r}"
            host_ip, leaf_ip = f"10.{octet}.{i}.2", f"10.{octet}.{i}.1"
            nics_out.append({"id": nic_id, "host": f"h{h}", "rail": r, "ifname": f"eth{r}",
                             "ip": host_ip, "prefixlen": 24, "subnet": f"10.{octet}.{i}.0/24",
                             "gateway": leaf_ip, "leaf": leaf, "table": HOST_TABLE_BASE + r})
            links.append({"id": f"{nic_id}--{leaf}", "kind": "access",
                          "a": {"node": nic_id, "netns": prefix + f"h{h}", "ifname": f"eth{r}",
                                "ip": host_ip, "prefixlen": 24},
                          "b": {"node": leaf, "netns": prefix + leaf, "ifname": f"h{h}n{r}",
                                "ip": leaf_ip, "prefixlen": 24}})
    for l in range(leaves):
        for s in range(spines):
            k = l * spines + s
            base = ipaddress.ip_address(f"10.{octet}.240.0") + k * 4
            links.append({"id": f"leaf{l}--spine{s}", "kind": "fabric",
                          "a": {"node": f"leaf{l}", "netns": prefix + f"leaf{l}", "ifname": f"sp{s}",
                                "ip": str(base + 1), "prefixlen": 30},
                          "b": {"node": f"spine{s}", "netns": prefix + f"spine{s}",
                                "ifname": f"lf{l}", "ip": str(base + 2), "prefixlen": 30}})
    return {
        "version": STATE_VERSION,
        "run_id": run_id,
        "prefix": prefix,
        "octet": octet,
        "params": {"hosts": hosts, "leaves": leaves, "spines": spines, "nics": nics, "mtu": mtu,
                   "port_lo": port_lo, "port_hi": port_hi, "capacity_gbps": capacity_gbps},
        "nodes": nodes,
        "nics": nics_out,
        "links": links,
        "entropy": {"kind": "sport-ranges", "ranges": spine_port_ranges(spines, port_lo, port_hi),
                    "default_via": "spine0"},
        "faults": {},
    }


def node_by_id(state: dict, node_id: str) -> dict:
    for n in state["nodes"]:
        if n["id"] == node_id:
            return n
    known = ", ".join(n["id"] for n in state["nodes"])
    raise FabricError(f"unknown node '{node_id}': expected one of {known}")


def _leaf_of_host(state: dict, host: str) -> str:
    return f"leaf{int(host[1:]) % state['params']['leaves']}"


def route_lines(state: dict, node: dict) -> list[str]:
    """All `ip route`/`ip rule` commands of one namespace, idempotent (replace)."""
    kind, nid = node["kind"], node["id"]
    lines: list[str] = []
    if kind == "host":
        mine = [n for n in state["nics"] if n["host"] == nid]
        by_rail = {n["rail"]: n for n in mine}
        for n in mine:
            t = n["table"]
            lines.append(f"route replace {n['subnet']} dev {n['ifname']} src {n['ip']} table {t}")
            lines.append(f"route replace default via {n['gateway']} dev {n['ifname']} table {t}")
        for other in state["nics"]:
            if other["host"] == nid:
                continue
            own = by_rail.get(other["rail"])
            if own is not None:  # reach rail r of another host out of our own rail r
                lines.append(f"route replace {other['subnet']} via {own['gateway']} "
                             f"dev {own['ifname']} src {own['ip']}")
    elif kind == "leaf":
        fabric = {l["b"]["node"]: l for l in state["links"] if l["a"]["node"] == nid}
        remote = [n for n in state["nics"] if n["leaf"] != nid]
        for s_idx in range(state["params"]["spines"]):
            link = fabric[f"spine{s_idx}"]
            for n in remote:
                lines.append(f"route replace {n['subnet']} via {link['b']['ip']} "
                             f"dev {link['a']['ifname']} table {SPINE_TABLE_BASE + s_idx}")
        spine0 = fabric[state["entropy"]["default_via"]]
        for n in remote:  # traffic outside every entropy range (ICMP, low ports) uses spine0
            lines.append(f"route replace {n['subnet']} via {spine0['b']['ip']} dev {spine0['a']['ifname']}")
    elif kind == "spine":
        for link in state["links"]:
            if link["b"]["node"] != nid:
                continue
            for n in state["nics"]:
                if n["leaf"] == link["a"]["node"]:
                    lines.append(f"route replace {n['subnet']} via {link['a']['ip']} "
                                 f"dev {link['b']['ifname']}")
    return lines


def rule_lines(state: dict, node: dict) -> list[str]:
    lines = []
    if node["kind"] == "host":
        for n in state["nics"]:
            if n["host"] == node["id"]:
                lines.append(f"rule add pref {SOURCE_RULE_PREF + n['rail']} from {n['ip']} "
                             f"lookup {n['table']}")
    elif node["kind"] == "leaf":
        # Source-port rules come first, so a flow whose both ports fall in ranges follows
        # the client's (source) choice in the forward direction; see README.
        for s_idx, r in enumerate(state["entropy"]["ranges"]):
            lines.append(f"rule add pref {SPORT_RULE_PREF + s_idx} sport {r['lo']}-{r['hi']} "
                         f"lookup {SPINE_TABLE_BASE + s_idx}")
            lines.append(f"rule add pref {DPORT_RULE_PREF + s_idx} dport {r['lo']}-{r['hi']} "
                         f"lookup {SPINE_TABLE_BASE + s_idx}")
    return lines


def sysctl_argv(node: dict, port_lo: int = 49152) -> list[str]:
    forward = "0" if node["kind"] == "host" else "1"
    # IPv6 off: no DAD/ND/MLD chatter that would blur the per-link counters.
    argv = ["ip", "netns", "exec", node["netns"], "sysctl", "-q", "-w",
            f"net.ipv4.ip_forward={forward}",
            "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
            "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]
    if node["kind"] == "host" and port_lo > 1025:
        # Ephemeral ports stay below the entropy ranges: traffic that does not choose its source
        # port (a test's control connection, say) always takes the default spine, never a random
        # one that a fault scenario then cuts.
        argv.append(f"net.ipv4.ip_local_port_range={min(32768, port_lo - 1024)} {port_lo - 1}")
    return argv


def topology_doc(state: dict) -> dict:
    """The path oracle's topology JSON (format documented in README.md)."""
    nodes = []
    for n in state["nodes"]:
        nodes.append({"id": n["id"], "kind": n["kind"]})
        if n["kind"] == "host":
            for nic in state["nics"]:
                if nic["host"] == n["id"]:
                    nodes.append({"id": nic["id"], "kind": "nic", "host": nic["host"],
                                  "ip": nic["ip"], "ifname": nic["ifname"]})
    links = []
    for link in state["links"]:
        fault = state["faults"].get(link["id"], {})
        rates = [v for v in fault.get("rate_bps", {}).values() if v]
        capacity = min(rates) / 1e9 if rates else state["params"]["capacity_gbps"]
        capacity = int(capacity) if float(capacity).is_integer() else capacity
        links.append({"a": link["a"]["node"], "b": link["b"]["node"],
                      "capacity_gbps": capacity, "latency_us": 2, "utilization": 0,
                      "free_buffer_bytes": 4194304, "fec_error_rate": 0,
                      "state": "down" if fault.get("down_end") else "up"})
    ranges = [{"lo": r["lo"], "hi": r["hi"], "via": r["via"]} for r in state["entropy"]["ranges"]]
    return {"version": TOPOLOGY_VERSION, "nodes": nodes, "links": links,
            "entropy": {"kind": "sport-ranges", "ranges": ranges}}


# ----------------------------------------------------------------------------------
# State file


def load_state(path: str) -> dict:
    try:
        with open(path) as f:
            state = json.load(f)
    except FileNotFoundError as exc:
        raise FabricError(f"state file not found: {path} (written by `fabric.py up --state FILE`)") from exc
    except json.JSONDecodeError as exc:
        raise FabricError(f"state file {path} is not valid JSON: {exc}") from exc
    if state.get("version") != STATE_VERSION:
        raise FabricError(f"state file {path} has version {state.get('version')}, expected {STATE_VERSION}")
    return state


def write_json_atomic(path: str, doc: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".fabric-")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


@contextlib.contextmanager
def locked_state(path: str):
    """Loads the state under an exclusive lock so concurrent fault commands do not race."""
    lock_path = path + ".lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = load_state(path)
        yield state
        write_json_atomic(path, state)


def resolve_link(state: dict, tokens: list[str]) -> dict:
    """Accepts a link id (`h0-nic0--leaf0`), the two node names in any order, or a
    host name instead of its NIC when that host has exactly one link to the other node."""
    if len(tokens) == 1 and "--" in tokens[0]:
        tokens = tokens[0].split("--", 1)
    if len(tokens) != 2:
        raise FabricError(f"bad link '{' '.join(tokens)}': expected a link id like h0-nic0--leaf0 "
                          "or leaf0--spine1, or two node names")
    x, y = tokens
    matches = []
    for link in state["links"]:
        a, b = link["a"]["node"], link["b"]["node"]
        owners = {a, a.split("-nic")[0]}, {b}
        if (x in owners[0] and y in owners[1]) or (y in owners[0] and x in owners[1]):
            matches.append(link)
    if len(matches) == 1:
        return matches[0]
    ids = ", ".join(l["id"] for l in state["links"])
    if not matches:
        raise FabricError(f"no link between '{x}' and '{y}': known links are {ids}")
    raise FabricError(f"'{x} {y}' matches several links ({', '.join(l['id'] for l in matches)}); "
                      f"name the NIC, e.g. {matches[-1]['id']}")


def ends_for(link: dict, at_end: str | None) -> list[dict]:
    return [link["a"], link["b"]] if at_end is None else [link[at_end.lower()]]


def parse_rate(text: str) -> float:
    m = RATE_RE.match(text)
    if not m:
        raise FabricError(f"bad rate '{text}': expected NUMBER followed by bit|kbit|mbit|gbit|tbit "
                          "(e.g. 100mbit), or 'off'")
    bps = float(m.group(1)) * RATE_SCALE[m.group(2).lower()]
    if bps < 8000:
        raise FabricError(f"rate '{text}' below 8kbit is not useful for a fabric link")
    return bps


# ----------------------------------------------------------------------------------
# Building and tearing down


def pick_octet() -> int:
    """Chooses a second address octet not used by another live fabric run."""
    used = set()
    for name in list_netns():
        if name.startswith(NS_PREFIX) and name.endswith("-leaf0"):
            try:
                out = run_cmd(["ip", "-n", name, "-j", "-4", "addr", "show"])
            except FabricError:
                continue  # being torn down
            for dev in json.loads(out or "[]"):
                for a in dev.get("addr_info", []):
                    parts = a.get("local", "").split(".")
                    if len(parts) == 4 and parts[0] == "10":
                        used.add(int(parts[1]))
    free = [o for o in range(1, 255) if o not in used]
    if not free:
        raise FabricError("all 254 fabric address blocks 10.1-254.0.0/16 are in use by live runs")
    return secrets.choice(free)


def new_run_id() -> str:
    existing = {n.split("-")[0] for n in list_netns() if n.startswith(NS_PREFIX)}
    while True:
        rid = secrets.token_hex(3)
        if NS_PREFIX + rid not in existing:
            return rid


def build_fabric(state: dict) -> None:
    """Creates namespaces, veth pairs, addresses, routes and rules described by state."""
    prefix = state["prefix"]
    if any(n.startswith(prefix) for n in list_netns()):
        raise FabricError(f"run id '{state['run_id']}' is in use: namespaces {prefix}* exist "
                          f"(tear them down with `fabric.py down --name {state['run_id']}`)")
    mtu = state["params"]["mtu"]
    run_cmd(*ip_batch(None, [f"netns add {n['netns']}" for n in state["nodes"]]))

    # veth pairs are created from inside the A-end namespace with the peer placed straight
    # into the B-end namespace, so no interface ever appears in the root namespace.
    creators: dict[str, list[str]] = {}
    for link in state["links"]:
        a, b = link["a"], link["b"]
        creators.setdefault(a["netns"], []).append(
            f"link add name {a['ifname']} mtu {mtu} type veth peer name {b['ifname']} "
            f"mtu {mtu} netns {b['netns']}")
    run_parallel([ip_batch(ns, lines) for ns, lines in creators.items()])

    jobs = [(sysctl_argv(n, state["params"]["port_lo"]), None) for n in state["nodes"]]
    run_parallel(jobs)

    jobs = []
    for n in state["nodes"]:
        lines = ["link set dev lo up"]
        for link in state["links"]:
            for end in (link["a"], link["b"]):
                if end["netns"] == n["netns"]:
                    lines.append(f"addr add {end['ip']}/{end['prefixlen']} dev {end['ifname']}")
                    lines.append(f"link set dev {end['ifname']} up")
        lines += rule_lines(state, n) + route_lines(state, n)
        jobs.append(ip_batch(n["netns"], lines))
    run_parallel(jobs)


def teardown(run_id: str, names: list[str] | None = None) -> list[str]:
    """Deletes the namespaces of one run (those named plus any stale ff<id>-*)."""
    prefix = f"{NS_PREFIX}{run_id}-"
    present = [n for n in list_netns() if n.startswith(prefix)]
    doomed = sorted(set(present) | {n for n in (names or []) if n in present})
    if doomed:
        # -force: keep going past one failure so the rest still disappears.
        argv, stdin = ip_batch(None, [f"netns del {n}" for n in doomed])
        subprocess.run(["ip", "-force"] + argv[1:], input=stdin, capture_output=True, text=True)
    left = [n for n in list_netns() if n.startswith(prefix)]
    if left:
        raise FabricError(f"could not delete namespaces: {', '.join(left)}")
    return doomed


# ----------------------------------------------------------------------------------
# Faults


def set_link_state(state: dict, link: dict, up: bool, at_end: str | None) -> None:
    fault = state["faults"].setdefault(link["id"], {})
    if up:
        ends = ends_for(link, at_end) if at_end else [link["a"], link["b"]]
        for end in ends:
            run_cmd(["ip", "-n", end["netns"], "link", "set", "dev", end["ifname"], "up"])
        # Setting a device down flushes the routes through it in that namespace; put them back.
        for end in ends:
            node_id = end["node"].split("-nic")[0]
            lines = route_lines(state, node_by_id(state, node_id))
            if lines:
                run_cmd(*ip_batch(end["netns"], lines))
        fault.pop("down_end", None)
        wait_carrier(link, True)
    else:
        end_name = (at_end or "B").upper()
        end = link[end_name.lower()]
        run_cmd(["ip", "-n", end["netns"], "link", "set", "dev", end["ifname"], "down"])
        fault["down_end"] = end_name
        wait_carrier(link, False)


def wait_carrier(link: dict, up: bool, timeout: float = 3.0) -> None:
    """Returns once both ends show the carrier state (linkwatch updates it asynchronously),
    so a fault command has taken effect when it returns."""
    deadline = time.monotonic() + timeout
    while True:
        ok = True
        for end in (link["a"], link["b"]):
            dev = json.loads(run_cmd(["ip", "-n", end["netns"], "-j", "link", "show", "dev", end["ifname"]]))[0]
            flags = dev.get("flags", [])
            lower_up = "LOWER_UP" in flags
            ok &= lower_up if up else not lower_up
        if ok:
            return
        if time.monotonic() > deadline:
            raise FabricError(f"link {link['id']}: carrier still {'down' if up else 'up'} after {timeout}s")
        time.sleep(0.02)


def set_loss(state: dict, link: dict, pct: float, at_end: str | None) -> None:
    fault = state["faults"].setdefault(link["id"], {})
    loss = fault.setdefault("loss_pct", {})
    for name, end in (("A", link["a"]), ("B", link["b"])):
        if at_end and at_end.upper() != name:
            continue
        table = f"ffloss_{end['ifname']}"
        # Declaring the table first makes the delete valid even when it did not exist.
        script = f"table netdev {table}\ndelete table netdev {table}\n"
        if pct > 0:
            threshold = int(round(pct * 100))
            # ARP is exempt: N% loss should hit IP traffic at N%, not also stall neighbour
            # resolution (a dead link is what link-down is for).
            match = "meta protocol { ip, ip6 } "
            match += f"numgen random mod 10000 < {threshold} " if threshold < 10000 else ""
            script += (f"table netdev {table} {{\n chain ingress {{\n"
                       f"  type filter hook ingress device \"{end['ifname']}\" priority -500; policy accept;\n"
                       f"  {match}counter drop\n }}\n}}\n")
        run_cmd(["ip", "netns", "exec", end["netns"], "nft", "-f", "-"], stdin=script)
        if pct > 0:
            loss[name] = pct
        else:
            loss.pop(name, None)


def set_rate(state: dict, link: dict, rate: str, at_end: str | None) -> None:
    fault = state["faults"].setdefault(link["id"], {})
    rates = fault.setdefault("rate_bps", {})
    for name, end in (("A", link["a"]), ("B", link["b"])):
        if at_end and at_end.upper() != name:
            continue
        base = ["tc", "-n", end["netns"], "qdisc"]
        if rate == "off":
            current = json.loads(run_cmd(["tc", "-j", "-n", end["netns"], "qdisc", "show", "dev",
                                          end["ifname"]]) or "[]")
            if any(q.get("kind") == "tbf" and q.get("root") for q in current):
                run_cmd(base + ["del", "dev", end["ifname"], "root"])
            rates.pop(name, None)
            continue
        bps = parse_rate(rate)
        # Burst: 5 ms worth of bytes, at least a few MTU-sized (and GSO) packets.
        burst = max(int(bps / 8 * 0.005), 3 * 65536 if bps >= 1e8 else 16 * 1514)
        run_cmd(base + ["replace", "dev", end["ifname"], "root", "tbf", "rate", f"{int(bps)}bit",
                        "burst", str(burst), "latency", "50ms"])
        rates[name] = bps


def read_counters(state: dict) -> list[dict]:
    namespaces = sorted({n["netns"] for n in state["nodes"]})
    outs = run_parallel([(["ip", "-n", ns, "-s", "-j", "link", "show"], None) for ns in namespaces])
    stats = {}
    for ns, out in zip(namespaces, outs):
        for dev in json.loads(out or "[]"):
            stats[(ns, dev["ifname"])] = dev
    result = []
    for link in state["links"]:
        row = {"id": link["id"]}
        for name in ("a", "b"):
            end = link[name]
            dev = stats.get((end["netns"], end["ifname"]))
            if dev is None:
                raise FabricError(f"interface {end['ifname']} missing in {end['netns']} "
                                  f"(link {link['id']}); was the fabric torn down?")
            s = dev.get("stats64", dev.get("stats", {}))
            row[name] = {"node": end["node"], "netns": end["netns"], "ifname": end["ifname"],
                         "state": dev.get("operstate"), "no_carrier": "NO-CARRIER" in dev.get("flags", []),
                         "rx_bytes": s["rx"]["bytes"], "rx_packets": s["rx"]["packets"],
                         "rx_dropped": s["rx"]["dropped"], "tx_bytes": s["tx"]["bytes"],
                         "tx_packets": s["tx"]["packets"], "tx_dropped": s["tx"]["dropped"]}
        row["a_to_b"] = {"bytes": row["a"]["tx_bytes"], "packets": row["a"]["tx_packets"]}
        row["b_to_a"] = {"bytes": row["b"]["tx_bytes"], "packets": row["b"]["tx_packets"]}
        result.append(row)
    return result


# ----------------------------------------------------------------------------------
# Subcommands


class Terminated(BaseException):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


CAUGHT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def raise_on_signals() -> None:
    """Turns SIGINT/SIGTERM/SIGHUP into Terminated so try/finally blocks tear down."""
    def on_signal(signum, _frame):
        raise Terminated(signum)

    for s in CAUGHT_SIGNALS:
        signal.signal(s, on_signal)


def unblock_caught_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, CAUGHT_SIGNALS)


def ignore_signals() -> None:
    for s in CAUGHT_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def add_up_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", help="run id, 1-8 of [a-z0-9] (default: random 6 hex digits)")
    p.add_argument("--hosts", type=int, default=4, help="number of hosts (default 4)")
    p.add_argument("--leaves", type=int, default=2, help="number of leaf switches (default 2)")
    p.add_argument("--spines", type=int, default=2, help="number of spine switches (default 2)")
    p.add_argument("--nics", type=int, default=2, help="NICs (rails) per host (default 2)")
    p.add_argument("--mtu", type=int, default=1500, help="MTU of every link (default 1500)")
    p.add_argument("--port-range", default="49152-65535",
                   help="ports split evenly into one range per spine (default 49152-65535)")
    p.add_argument("--capacity-gbps", type=float, default=10.0,
                   help="link capacity written to the topology file (default 10)")
    p.add_argument("--state", help="state file to write (default /tmp/flexiforce-fabric-<id>.json)")
    p.add_argument("--topology-out", help="also write the path-oracle topology JSON here")


def bring_up(args) -> tuple[dict, str, float]:
    require_root()
    run_id = args.name or new_run_id()
    port_lo, port_hi = parse_port_range(args.port_range)
    # Validate sizes before touching the system.
    build_plan(run_id, 1, args.hosts, args.leaves, args.spines, args.nics, args.mtu, port_lo, port_hi,
               args.capacity_gbps)
    state = build_plan(run_id, pick_octet(), args.hosts, args.leaves, args.spines, args.nics, args.mtu,
                       port_lo, port_hi, args.capacity_gbps)
    state_path = os.path.abspath(args.state or f"/tmp/flexiforce-fabric-{run_id}.json")
    state["state_file"] = state_path
    start = time.monotonic()
    try:
        build_fabric(state)
        write_json_atomic(state_path, state)
        if args.topology_out:
            write_json_atomic(args.topology_out, topology_doc(state))
    except BaseException:
        ignore_signals()
        with contextlib.suppress(Exception):
            teardown(run_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_path)
        raise
    return state, state_path, time.monotonic() - start


def cmd_up(args) -> int:
    raise_on_signals()  # bring_up tears a half-built fabric down on Terminated
    try:
        state, path, secs = bring_up(args)
    except Terminated as t:
        print(f"fabric: caught signal {t.signum} during up; torn down", file=sys.stderr)
        return 128 + t.signum
    ignore_signals()
    if args.json:
        print(json.dumps({"run_id": state["run_id"], "state": path, "topology": args.topology_out,
                          "seconds": round(secs, 3)}))
    else:
        p = state["params"]
        print(f"fabric {state['run_id']} up in {secs:.2f}s: {p['hosts']} hosts x {p['nics']} NICs, "
              f"{p['leaves']} leaves, {p['spines']} spines; state {path}")
    return 0


def cmd_down(args) -> int:
    require_root()
    if not args.state and not args.name:
        raise FabricError("down needs --state FILE or --name RUN_ID")
    names, run_id = [], args.name
    if args.state:
        state = load_state(args.state)
        run_id, names = state["run_id"], [n["netns"] for n in state["nodes"]]
    start = time.monotonic()
    deleted = teardown(run_id, names)
    secs = time.monotonic() - start
    if args.state and not args.keep_state:
        for path in (args.state, args.state + ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    if args.json:
        print(json.dumps({"run_id": run_id, "deleted": deleted, "seconds": round(secs, 3)}))
    else:
        print(f"fabric {run_id} down in {secs:.2f}s: deleted {len(deleted)} namespaces")
    return 0


def cmd_run(args, command: list[str]) -> int:
    if not command:
        raise FabricError("run needs a command after `--`, e.g. fabric.py run -- ./test.sh")
    require_root()
    raise_on_signals()
    tmpdir = tempfile.mkdtemp(prefix="flexiforce-fabric-")
    args.state = args.state or os.path.join(tmpdir, "state.json")
    args.topology_out = args.topology_out or os.path.join(tmpdir, "topology.json")
    if not args.name:
        args.name = new_run_id()
    child = None
    rc = 1
    try:
        state, path, secs = bring_up(args)
        print(f"fabric {state['run_id']} up in {secs:.2f}s; running: {' '.join(command)}",
              file=sys.stderr, flush=True)
        env = dict(os.environ, FF_FABRIC_STATE=path, FF_FABRIC_TOPOLOGY=os.path.abspath(args.topology_out))
        # A signal that lands inside Popen - after the fork, before `child` is set - raised Terminated
        # there and left the command running unseen: it was never signalled, and it held our caller's
        # stdout/stderr open long after the teardown (a SIGTERM test waited 20 s on `sleep 30`). The
        # caught signals wait until `child` is known; the command itself starts with them unblocked.
        signal.pthread_sigmask(signal.SIG_BLOCK, CAUGHT_SIGNALS)
        try:
            child = subprocess.Popen(command, env=env, preexec_fn=unblock_caught_signals)
        except OSError as exc:
            raise FabricError(f"cannot start {command[0]}: {exc}") from exc
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, CAUGHT_SIGNALS)
        rc = child.wait()
        rc = 128 - rc if rc < 0 else rc
    except Terminated as t:
        rc = 128 + t.signum
        print(f"fabric: caught signal {t.signum}; tearing down", file=sys.stderr, flush=True)
        if child is not None and child.poll() is None:
            child.send_signal(t.signum)
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    finally:
        ignore_signals()  # the teardown itself must not be interrupted
        try:
            teardown(args.name)
        finally:
            for f in (args.state, args.state + ".lock", args.topology_out):
                if f.startswith(tmpdir):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f)
            # The run's own scratch folder: what the command left there (result files written beside
            # the state file) goes with it; one folder a run was left in /tmp before.
            shutil.rmtree(tmpdir, ignore_errors=True)
    return rc


def cmd_exec(args, command: list[str]) -> int:
    if not command:
        raise FabricError("exec needs a command after `--`, e.g. fabric.py exec --state F h0 -- ping 10.1.2.2")
    require_root()
    state = load_state(args.state)
    node = node_by_id(state, args.node)
    os.environ["FF_FABRIC_STATE"] = os.path.abspath(args.state)
    os.execvp("ip", ["ip", "netns", "exec", node["netns"]] + command)
    return 127  # not reached


def cmd_link(args, up: bool) -> int:
    require_root()
    with locked_state(args.state) as state:
        link = resolve_link(state, args.link)
        set_link_state(state, link, up, args.at_end)
    print(f"{link['id']}: {'up' if up else 'down'}")
    return 0


def cmd_loss(args) -> int:
    require_root()
    tokens, value = args.link[:-1], args.link[-1]
    try:
        pct = float(value)
    except ValueError:
        pct = -1.0
    if not 0 <= pct <= 100:
        raise FabricError(f"bad loss percentage '{value}': expected a number 0..100 (0 removes the loss)")
    with locked_state(args.state) as state:
        link = resolve_link(state, tokens)
        set_loss(state, link, pct, args.at_end)
    print(f"{link['id']}: loss {pct:g}% at {args.at_end or 'both ends'}")
    return 0


def cmd_rate(args) -> int:
    require_root()
    tokens, value = args.link[:-1], args.link[-1].lower()
    if value != "off":
        parse_rate(value)
    with locked_state(args.state) as state:
        link = resolve_link(state, tokens)
        set_rate(state, link, value, args.at_end)
    print(f"{link['id']}: rate {value} at {args.at_end or 'both ends'}")
    return 0


def cmd_counters(args) -> int:
    require_root()
    rows = read_counters(load_state(args.state))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'link':<22} {'a->b bytes':>14} {'pkts':>9} {'b->a bytes':>14} {'pkts':>9}  state")
    for r in rows:
        st = "down" if r["a"]["state"] != "UP" or r["b"]["state"] != "UP" else "up"
        print(f"{r['id']:<22} {r['a_to_b']['bytes']:>14} {r['a_to_b']['packets']:>9} "
              f"{r['b_to_a']['bytes']:>14} {r['b_to_a']['packets']:>9}  {st}")
    return 0


def cmd_topology(args) -> int:
    doc = topology_doc(load_state(args.state))
    if args.output == "-":
        print(json.dumps(doc, indent=1))
    else:
        write_json_atomic(args.output, doc)
    return 0


def cmd_plan(args) -> int:
    """Prints the state a given `up` would build, without root and without side effects."""
    lo, hi = parse_port_range(args.port_range)
    state = build_plan(args.name or "plan", 1, args.hosts, args.leaves, args.spines, args.nics, args.mtu,
                       lo, hi, args.capacity_gbps)
    print(json.dumps(topology_doc(state) if args.topology else state, indent=1))
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabric.py", description="Leaf-spine fabric of network namespaces for FlexiForce tests.",
        epilog="Exit code 77 means: not root, nothing done (ctest treats it as a skip).")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p = sub.add_parser("up", help="build a fabric and write its state file")
    add_up_options(p)
    p.add_argument("--json", action="store_true", help="print run id, state path and seconds as JSON")

    p = sub.add_parser("down", help="tear a fabric down")
    p.add_argument("--state", help="state file written by up")
    p.add_argument("--name", help="run id, to clean up a run whose state file is lost")
    p.add_argument("--keep-state", action="store_true", help="do not delete the state file")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("run", help="up, run CMD (after --) with FF_FABRIC_STATE/FF_FABRIC_TOPOLOGY, down",
                       usage="fabric.py run [up options] -- CMD [ARGS...]")
    add_up_options(p)

    p = sub.add_parser("exec", help="run CMD (after --) inside a node's namespace",
                       usage="fabric.py exec --state FILE NODE -- CMD [ARGS...]")
    p.add_argument("--state", required=True)
    p.add_argument("node", help="node id: h0, leaf1, spine0 ...")

    for name, text in (("link-down", "carrier loss: set one end of a link down (default end B)"),
                       ("link-up", "undo link-down and restore the routes it flushed")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--state", required=True)
        p.add_argument("--at-end", choices=["A", "B", "a", "b"],
                       help="end to set down/up (A is the host or leaf side of the link id)")
        p.add_argument("link", nargs="+", help="link id (h0-nic0--leaf0, leaf0--spine1) or two node names")

    p = sub.add_parser("loss", help="drop PCT%% of packets at the receiving end(s) (nftables); 0 removes")
    p.add_argument("--state", required=True)
    p.add_argument("--at-end", choices=["A", "B", "a", "b"],
                   help="receiving end where packets are dropped (default: both ends)")
    p.add_argument("link", nargs="+", metavar="LINK... PCT", help="link then percentage 0..100")

    p = sub.add_parser("rate", help="limit a link's rate with tbf on the sending end(s); 'off' removes")
    p.add_argument("--state", required=True)
    p.add_argument("--at-end", choices=["A", "B", "a", "b"],
                   help="sending end whose egress is limited (default: both ends)")
    p.add_argument("link", nargs="+", metavar="LINK... RATE", help="link then rate (100mbit, 1gbit) or off")

    p = sub.add_parser("counters", help="per-link byte/packet counters, both directions")
    p.add_argument("--state", required=True)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("topology", help="write the path-oracle topology JSON")
    p.add_argument("--state", required=True)
    p.add_argument("-o", "--output", required=True, help="output file, '-' for stdout")

    p = sub.add_parser("plan", help="print the state (or --topology) that up would build; no root needed")
    add_up_options(p)
    p.add_argument("--topology", action="store_true", help="print the topology JSON instead")
    return parser


def main(argv: list[str]) -> int:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    args = make_parser().parse_args(argv)
    handlers = {
        "up": cmd_up, "down": cmd_down, "counters": cmd_counters, "topology": cmd_topology,
        "loss": cmd_loss, "rate": cmd_rate, "plan": cmd_plan,
        "link-down": lambda a: cmd_link(a, False), "link-up": lambda a: cmd_link(a, True),
        "run": lambda a: cmd_run(a, command), "exec": lambda a: cmd_exec(a, command),
    }
    if command and args.cmd not in ("run", "exec"):
        raise FabricError(f"`--` followed by a command is only accepted by run and exec, not {args.cmd}")
    if args.cmd in ("loss", "rate") and len(args.link) < 2:
        raise FabricError(f"{args.cmd} needs a link and a value, e.g. {args.cmd} --state F h0-nic0--leaf0 "
                          f"{'50' if args.cmd == 'loss' else '100mbit'}")
    return handlers[args.cmd](args)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except NeedsRoot as exc:
        print(exc, file=sys.stderr)
        sys.exit(EXIT_SKIP)
    except FabricError as exc:
        print(f"fabric: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
