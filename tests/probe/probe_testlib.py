"""Shared pieces of the root probe tests: skip checks, starting `flexiforce probe` and waiting for it to
attach, the counts a ring collective of ff-collective sends, and reading a USDT semaphore of a process."""
import json
import os
import re
import subprocess
import sys
import time

SKIP = 77


def skip_unless_bpf(flexiforce):
    """Exits 77 (ctest: skipped) with a message unless this process may load BPF and the tool can."""
    if os.geteuid() != 0:
        print("SKIP: needs root (BPF)")
        sys.exit(SKIP)
    check = json.loads(subprocess.run([flexiforce, "probe", "check", "--json"], capture_output=True,
                                      text=True).stdout)
    bpf = [f for f in check["findings"] if f["topic"] == "bpf"][0]
    if not bpf["detail"]["permitted"]:
        print("SKIP: BPF not permitted here:", bpf["message"])
        sys.exit(SKIP)
    if b"watch" not in subprocess.run([flexiforce, "probe", "--help"], capture_output=True).stdout:
        print("SKIP: the probe tool was built without BPF support")
        sys.exit(SKIP)


def start_probe(args, ready, timeout=60, **popen):
    """Starts `flexiforce probe ...` (args without --ready-file) and returns it once its probes are attached."""
    p = subprocess.Popen(args + ["--ready-file", ready], **popen)
    deadline = time.time() + timeout
    while not os.path.exists(ready):
        if p.poll() is not None or time.time() > deadline:
            if p.poll() is None:
                p.kill()
            out, err = p.communicate()
            sys.exit(f"FAIL: probe did not attach (exit {p.returncode}): {out} {err}")
        time.sleep(0.02)
    return p


# --- what ff-collective's ring schedule sends (tests/collective/ring_schedule.cc), computed independently ---

def _blocks(count, n):
    return [(count * b // n, count * (b + 1) // n) for b in range(n)]


def _slices(begin, end, step, k):
    out = []
    for j in range(k):
        b = min(end, begin + j * step)
        out.append(min(end, b + step) - b)
    return out


def ring_sends(coll, nranks, size, step_bytes, elem=4, root=0):
    """(messages, bytes) one iteration of `coll` sends over all ranks, for ff-collective's `size`
    (nccl-tests: AllGather's size is the gathered output). Zero-byte trailing slices are messages too."""
    step = max(1, step_bytes // elem)
    msgs = nbytes = 0
    if coll == "allreduce":
        count = size // elem
        blocks = _blocks(count, nranks)
        k = max(1, -(-max(e - b for b, e in blocks) // step))
        for rank in range(nranks):
            for r in range(nranks - 1):  # reduce-scatter, then all-gather: one block per round each
                for blk in ((rank - r) % nranks, (rank + 1 - r) % nranks):
                    sl = _slices(blocks[blk][0], blocks[blk][1], step, k)
                    msgs += len(sl)
                    nbytes += sum(sl) * elem
    elif coll == "allgather":
        count = size // elem // nranks
        k = max(1, -(-count // step))
        for rank in range(nranks):
            for r in range(nranks - 1):
                sl = _slices(0, count, step, k)
                msgs += len(sl)
                nbytes += sum(sl) * elem
    elif coll == "broadcast":
        count = size // elem
        k = max(1, -(-count // step))
        sl = _slices(0, count, step, k)
        for rank in range(nranks):
            if (rank + 1) % nranks == root:  # the last rank of the chain only receives
                continue
            msgs += len(sl)
            nbytes += sum(sl) * elem
    else:
        raise ValueError(coll)
    return msgs, nbytes


# --- USDT semaphores: the kernel raises them while a probe is attached ---

def semaphore_vaddr(lib, probe):
    """File virtual address of the semaphore of USDT flexiforce:`probe` in `lib` (from its stapsdt note)."""
    notes = subprocess.run(["readelf", "-n", lib], capture_output=True, text=True, check=True).stdout
    name = None
    for line in notes.splitlines():
        m = re.search(r"Name: (\S+)", line)
        if m:
            name = m.group(1)
        m = re.search(r"Semaphore: (0x[0-9a-f]+)", line)
        if m and name == probe:
            return int(m.group(1), 16)
    raise RuntimeError(f"no semaphore for flexiforce:{probe} in {lib}")


def read_semaphore(pid, lib, vaddr):
    """The semaphore's current value in process `pid` (reads /proc/PID/mem at the library's load bias)."""
    real = os.path.realpath(lib)
    base = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == real and int(parts[2], 16) == 0:
                base = int(parts[0].split("-")[0], 16)
                break
    if base is None:
        raise RuntimeError(f"process {pid} does not map {lib}")
    # A shared library's first PT_LOAD has virtual address 0, so the mapping of file offset 0 is the bias.
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(base + vaddr)
        return int.from_bytes(mem.read(2), "little")


def plugin_processes(lib, parent=None):
    """Pids of the processes that map `lib` (children of `parent` only, when given)."""
    real = os.path.realpath(lib)
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if parent is not None:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) != parent:
                        continue
            with open(f"/proc/{d}/maps") as f:
                if any(real in line for line in f):
                    out.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(out)
