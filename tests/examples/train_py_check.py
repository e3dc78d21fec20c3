#!/usr/bin/env python3
# Checks examples/train.py without PyTorch: it compiles, --help works, the job variables are set, a clear error.
import importlib.util
import os
import py_compile
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in examples/
TRAIN = sys.argv[1]


def expect(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:  ", what)


with tempfile.TemporaryDirectory() as tmp:
    py_compile.compile(TRAIN, cfile=os.path.join(tmp, "train.pyc"), doraise=True)
print("ok:   python3 -m py_compile passes")

env = {k: v for k, v in os.environ.items() if not k.startswith(("AI_", "TORCHELASTIC_"))}
h = subprocess.run([sys.executable, TRAIN, "--help"], capture_output=True, text=True, env=env, timeout=60)
expect(h.returncode == 0, f"--help exits 0 (got {h.returncode}: {h.stderr.strip()})")
expect("--steps" in h.stdout and "torchrun" in h.stdout, "--help lists the options and names torchrun")

bad = subprocess.run([sys.executable, TRAIN, "--steps", "0"], capture_output=True, text=True, env=env, timeout=60)
expect(bad.returncode == 2 and "--steps" in bad.stderr, "--steps 0 is refused naming the option")

# The variables the plugin reads, set by the script before torch.distributed starts.
spec = importlib.util.spec_from_file_location("train_example", TRAIN)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
for k in ("AI_SLA_LATENCY", "AI_TASK_ID", "AI_FLEXIFORCE_ENABLE", "NCCL_NET_PLUGIN", "TORCHELASTIC_RUN_ID"):
    os.environ.pop(k, None)
mod.declare_job(mod.parse_args([]))
expect(os.environ["AI_SLA_LATENCY"] == "50", "AI_SLA_LATENCY=50 by default")
expect(os.environ["AI_FLEXIFORCE_ENABLE"] == "1", "AI_FLEXIFORCE_ENABLE=1 by default")
expect(os.environ["NCCL_NET_PLUGIN"] == "flexiforce", "NCCL_NET_PLUGIN=flexiforce")
expect(os.environ["AI_TASK_ID"] == "train-py-example", "AI_TASK_ID has a default")
os.environ["TORCHELASTIC_RUN_ID"] = "rdzv-42"
mod.declare_job(mod.parse_args(["--observe", "--sla", "80"]))
expect(os.environ["AI_TASK_ID"] == "rdzv-42", "AI_TASK_ID follows torchrun's --rdzv-id")
expect(os.environ["AI_FLEXIFORCE_ENABLE"] == "0" and os.environ["AI_SLA_LATENCY"] == "80",
       "--observe and --sla reach the environment")

if importlib.util.find_spec("torch") is None:
    r = subprocess.run([sys.executable, TRAIN, "--steps", "1"], capture_output=True, text=True, env=env, timeout=60)
    expect(r.returncode != 0 and "PyTorch is not installed" in r.stderr,
           f"without torch it exits non-zero with a clear message (rc {r.returncode}: {r.stderr.strip()})")
else:
    print("skip: torch is installed here; the missing-torch message is not checked")
