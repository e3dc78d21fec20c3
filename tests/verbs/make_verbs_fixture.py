#!/usr/bin/env python3
"""Builds a sysfs fixture of an RDMA host for the verbs unit tests: the PCI tree from
fixtures/rdma_host.topo (through tests/pcie/make_sysfs_fixture.py), then each RDMA device's ports,
state, link layer, rate and GID table as the kernel lays them out under /sys/class/infiniband.

usage: make_verbs_fixture.py OUTDIR

Devices (GID tables as mlx5 and rxe fill them: for each address a v1 entry then a v2 entry):
  mlx5_0  RoCE, ACTIVE, 100 Gb/s, ens1f0np0: link-local, 10.1.0.11, fd00:1::11 (GIDs 0-5), 6-7 unset
  mlx5_1  RoCE, DOWN, 100 Gb/s, ens1f1np1: link-local, 10.2.0.11
  mlx5_2  RoCE, ACTIVE, 25 Gb/s, ens1f2np2: link-local only (no address configured)
  mlx5_3  InfiniBand, ACTIVE, 200 Gb/s (4X HDR): port GID fe80::...:e617
  rxe0    Soft-RoCE over eth0 (virtio), ACTIVE, no PCI device link (a virtual device)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PCIE_SCRIPT = os.path.join(HERE, "..", "pcie", "make_sysfs_fixture.py")
TOPO = os.path.join(HERE, "fixtures", "rdma_host.topo")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def v4_gid(a, b, c, d):
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % (a, b, c, d)


def link_local(mac_suffix):
    return "fe80:0000:0000:0000:" + mac_suffix


ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


def roce_pairs(addrs, ndev):
    """[(gid, type, ndev)]: a v1 and a v2 entry per address, as RoCE drivers populate the table."""
    out = []
    for gid in addrs:
        out.append((gid, "IB/RoCE v1", ndev))
        out.append((gid, "RoCE v2", ndev))
    return out


def add_port(dev_dir, port, state, link_layer, rate, gids, unset=0):
    p = os.path.join(dev_dir, "ports", str(port))
    write(os.path.join(p, "state"), {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT"}[state])
    write(os.path.join(p, "phys_state"), "5: LinkUp" if state != "DOWN" else "3: Disabled")
    write(os.path.join(p, "link_layer"), link_layer)
    write(os.path.join(p, "rate"), rate)
    write(os.path.join(p, "lid"), "0x0" if link_layer == "Ethernet" else "0x%x" % (port + 10))
    for i, (gid, gid_type, ndev) in enumerate(gids):
        write(os.path.join(p, "gids", str(i)), gid)
        write(os.path.join(p, "gid_attrs", "types", str(i)), gid_type)
        if ndev:
            write(os.path.join(p, "gid_attrs", "ndevs", str(i)), ndev)
    # Unpopulated entries read as zeros; their type and ndev files do not read (absent here).
    for i in range(len(gids), len(gids) + unset):
        write(os.path.join(p, "gids", str(i)), ZERO)


def build(out):
    subprocess.check_call([sys.executable, PCIE_SCRIPT, TOPO, out])
    ib = os.path.join(out, "sys", "class", "infiniband")

    def dev_dir(name, guid):
        d = os.path.realpath(os.path.join(ib, name))
        write(os.path.join(d, "node_guid"), guid)
        write(os.path.join(d, "node_type"), "1: CA")
        return d

    d = dev_dir("mlx5_0", "b83f:d203:006a:e616")
    add_port(d, 1, "ACTIVE", "Ethernet", "100 Gb/sec (2X HDR)",
             roce_pairs([link_local("ba3f:d2ff:fe6a:e616"), v4_gid(10, 1, 0, 11),
                         "fd00:0001:0000:0000:0000:0000:0000:0011"], "ens1f0np0"), unset=2)
    d = dev_dir("mlx5_1", "b83f:d203:006a:e617")
    add_port(d, 1, "DOWN", "Ethernet", "100 Gb/sec (2X HDR)",
             roce_pairs([link_local("ba3f:d2ff:fe6a:e617"), v4_gid(10, 2, 0, 11)], "ens1f1np1"))
    d = dev_dir("mlx5_2", "b83f:d203:006a:e618")
    add_port(d, 1, "ACTIVE", "Ethernet", "25 Gb/sec (1X EDR)",
             roce_pairs([link_local("ba3f:d2ff:fe6a:e618")], "ens1f2np2"), unset=4)
    d = dev_dir("mlx5_3", "9c63:c003:0045:1a20")
    add_port(d, 1, "ACTIVE", "InfiniBand", "200 Gb/sec (4X HDR)",
             [("fe80:0000:0000:0000:9c63:c003:0045:1a21", "IB/RoCE v1", "")], unset=1)

    # Soft-RoCE: a virtual device (no `device` link); its GIDs name the netdev it rides on.
    rel = os.path.join("sys", "devices", "virtual", "infiniband", "rxe0")
    os.makedirs(os.path.join(out, rel))
    os.symlink("../../devices/virtual/infiniband/rxe0", os.path.join(ib, "rxe0"))
    d = dev_dir("rxe0", "5054:00ff:fe12:3456")
    add_port(d, 1, "ACTIVE", "Ethernet", "10 Gb/sec (1X QDR)",
             roce_pairs([link_local("5054:00ff:fe12:3456"), v4_gid(192, 168, 122, 10)], "eth0"), unset=28)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_verbs_fixture.py OUTDIR")
    build(sys.argv[1])
