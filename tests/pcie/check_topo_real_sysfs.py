#!/usr/bin/env python3
"""`flexiforce topo` (text and --json) on the live /sys: exit 0, GPUs = PCI class 0x03 devices;
the installed program lists the subcommand, --help exits 0 and a bad option exits 2."""
import glob
import json
import subprocess
import sys

flexiforce = sys.argv[1]
gpus = 0
for cls in glob.glob("/sys/bus/pci/devices/*/class"):
    with open(cls) as f:
        gpus += int(f.read(), 16) >> 16 == 0x03

text = subprocess.run([flexiforce, "topo"], capture_output=True, text=True, timeout=30)
assert text.returncode == 0, (text.returncode, text.stderr)
assert "Legend:" in text.stdout and "PIX" in text.stdout, text.stdout
assert ("no GPU found" in text.stdout) == (gpus == 0), text.stdout

js = subprocess.run([flexiforce, "topo", "--json"], capture_output=True, text=True, timeout=30)
assert js.returncode == 0, (js.returncode, js.stderr)
d = json.loads(js.stdout)
assert len(d["gpus"]) == gpus, (len(d["gpus"]), gpus)
for nic in d["nics"]:
    assert nic["netdevs"] or nic["rdma_devices"], nic
helped = subprocess.run([flexiforce, "topo", "--help"], capture_output=True, text=True, timeout=30)
assert helped.returncode == 0 and "--sysfs-root" in helped.stdout, (helped.returncode, helped.stdout)
bad = subprocess.run([flexiforce, "topo", "--sysfs-root"], capture_output=True, text=True, timeout=30)
assert bad.returncode == 2 and "--sysfs-root" in bad.stderr and "usage: flexiforce topo" in bad.stderr, (bad.returncode, bad.stderr)
listed = subprocess.run([flexiforce, "--help"], capture_output=True, text=True, timeout=30)
assert "  topo " in listed.stdout, listed.stdout
print("ok: %d GPU(s), %d NIC(s)" % (gpus, len(d["nics"])))
