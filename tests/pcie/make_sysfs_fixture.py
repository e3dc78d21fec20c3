#!/usr/bin/env python3
"""Builds a sysfs-like fixture tree (real directories, real relative symlinks) from a compact,
indented description of a machine's PCI hierarchy; see fixtures/*.topo for the form.

usage: make_sysfs_fixture.py DESCRIPTION OUTDIR

Each non-comment line is one node, indented by its depth:
  hostbridge pci0000:15 numa=0 cpus=0-55,112-167   a root complex; numa/cpus are inherited
  0000:15:01.0 bridge speed=32 width=16            a PCI function: kind and attributes
  virtual net=lo                                   a net device with no device link
Kinds: bridge, gpu, vga, nic, nvme, other. Attributes: class= vendor= device= (hex),
speed=CUR[/MAX] (GT/s), width=CUR[/MAX], aer=COR/NONFATAL/FATAL, numa=, cpus=,
net=NAME[,NAME] rdma=NAME[,NAME] virtio=virtioN (the net device sits below that virtio node).
"""
import os
import sys

DEFAULTS = {  # kind -> (class, vendor, device)
    "bridge": ("0x060400", "0x10b5", "0xc030"),
    "gpu": ("0x030200", "0x10de", "0x2330"),
    "vga": ("0x030000", "0x1a03", "0x2000"),
    "nic": ("0x020000", "0x15b3", "0x1021"),
    "nvme": ("0x010802", "0x144d", "0xa80a"),
    "other": ("0x088000", "0x8086", "0x0b00"),
}


def fail(msg):
    sys.exit("make_sysfs_fixture.py: " + msg)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def symlink(target, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


def speed_text(gts):
    return "%s GT/s PCIe" % (gts if "." in gts else gts + ".0")


def parse(path):
    nodes = []  # (depth, words, lineno)
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip(" "))
            if indent % 2:
                fail("%s:%d: indent by two spaces per level" % (path, lineno))
            nodes.append((indent // 2, line.split(), lineno))
    return nodes


def attrs_of(words, where):
    attrs = {}
    for w in words:
        if "=" not in w:
            fail("%s: expected KEY=VALUE, got '%s'" % (where, w))
        k, v = w.split("=", 1)
        attrs[k] = v
    return attrs


def add_function(out, rel_dir, bdf, kind, attrs, inherited):
    d = os.path.join(out, rel_dir)
    cls, vendor, device = DEFAULTS[kind]
    write(os.path.join(d, "class"), attrs.get("class", cls))
    write(os.path.join(d, "vendor"), attrs.get("vendor", vendor))
    write(os.path.join(d, "device"), attrs.get("device", device))
    write(os.path.join(d, "numa_node"), attrs.get("numa", inherited.get("numa", "-1")))
    cpus = attrs.get("cpus", inherited.get("cpus"))
    if cpus:
        write(os.path.join(d, "local_cpulist"), cpus)
    for key, cur_file, max_file, fmt in (("speed", "current_link_speed", "max_link_speed", speed_text),
                                         ("width", "current_link_width", "max_link_width", str)):
        if key in attrs:
            cur, _, mx = attrs[key].partition("/")
            write(os.path.join(d, cur_file), fmt(cur))
            write(os.path.join(d, max_file), fmt(mx or cur))
    if "aer" in attrs:
        cor, nonfatal, fatal = attrs["aer"].split("/")
        write(os.path.join(d, "aer_dev_correctable"), "RxErr 0\nBadTLP %s\nBadDLLP 0\nTOTAL_ERR_COR %s" % (cor, cor))
        write(os.path.join(d, "aer_dev_nonfatal"), "Undefined 0\nCmpltTO %s\nTOTAL_ERR_NONFATAL %s" % (nonfatal, nonfatal))
        write(os.path.join(d, "aer_dev_fatal"), "Undefined 0\nTOTAL_ERR_FATAL %s" % fatal)
    # /sys/bus/pci/devices/<bdf> -> ../../../devices/pci..../<bdf>
    symlink(os.path.join("../../..", rel_dir[len("sys/"):]), os.path.join(out, "sys/bus/pci/devices", bdf))

    holder = rel_dir  # the device node class devices hang from (a virtio node below virtio NICs)
    if "virtio" in attrs:
        holder = os.path.join(rel_dir, attrs["virtio"])
        os.makedirs(os.path.join(out, holder))
    holder_name = os.path.basename(holder)
    for cls_name, key in (("net", "net"), ("infiniband", "rdma")):
        for name in filter(None, attrs.get(key, "").split(",")):
            node = os.path.join(holder, cls_name, name)
            os.makedirs(os.path.join(out, node))
            symlink("../../../" + holder_name, os.path.join(out, node, "device"))
            symlink("../../" + node[len("sys/"):], os.path.join(out, "sys/class", cls_name, name))
            if cls_name == "net":
                os.makedirs(os.path.join(out, node, "statistics"))


def build(description, out):
    os.makedirs(os.path.join(out, "sys/bus/pci/devices"), exist_ok=True)
    os.makedirs(os.path.join(out, "sys/class/net"), exist_ok=True)
    stack = []  # (depth, rel_dir, inherited attrs)
    for depth, words, lineno in parse(description):
        where = "%s:%d" % (description, lineno)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if words[0] == "hostbridge":
            if depth != 0 or len(words) < 2:
                fail("%s: 'hostbridge pciDDDD:BB ...' starts at column 0" % where)
            rel = os.path.join("sys/devices", words[1])
            os.makedirs(os.path.join(out, rel))
            stack.append((depth, rel, attrs_of(words[2:], where)))
        elif words[0] == "virtual":
            for name in attrs_of(words[1:], where).get("net", "").split(","):
                rel = os.path.join("sys/devices/virtual/net", name)
                os.makedirs(os.path.join(out, rel, "statistics"))
                symlink("../../" + rel[len("sys/"):], os.path.join(out, "sys/class/net", name))
        else:
            if not stack or len(words) < 2 or words[1] not in DEFAULTS:
                fail("%s: expected 'BDF KIND [KEY=VALUE...]' below a hostbridge, KIND one of %s" %
                     (where, ", ".join(DEFAULTS)))
            parent_depth, parent_rel, inherited = stack[-1]
            if depth != parent_depth + 1:
                fail("%s: indent one level below its parent" % where)
            rel = os.path.join(parent_rel, words[0])
            attrs = attrs_of(words[2:], where)
            add_function(out, rel, words[0], words[1], attrs, inherited)
            stack.append((depth, rel, dict(inherited, **{k: v for k, v in attrs.items() if k in ("numa", "cpus")})))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: make_sysfs_fixture.py DESCRIPTION OUTDIR")
    build(sys.argv[1], sys.argv[2])
