#!/usr/bin/env bash
# GPU end-to-end check on one NVIDIA GPU: two NCCL ranks as two "hosts" through FlexiForce, exact results, busbw vs NCCL's socket transport.
set -uo pipefail

usage() {
  cat <<'USAGE'
usage: examples/gpu-e2e.sh [--build DIR] [--max-bytes B] [--iters N] [--compile-only] [--help]

On a machine with one NVIDIA GPU, runs two ranks on that GPU with different NCCL_HOSTID, so NCCL
sees two hosts and must send through the network plugin (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
NCCL_NVLS_ENABLE=0). It checks that:
  - NCCL's log (NCCL_DEBUG=INFO) says it uses the net plugin "FlexiForce";
  - AllReduce, AllGather and Broadcast results are exact for every size from 1 KiB to --max-bytes
    (default 256M), in a warm-up and after the timed iterations;
  - `flexiforce stats` attributes bytes to AllReduce, AllGather and Broadcast for the run's task,
    at least the bytes the ring algorithm must send (and at most 4x that);
and prints busbw beside NCCL's own socket transport (NCCL_NET=Socket, no plugin), same run.

Needs: an NVIDIA GPU, the CUDA runtime (libcudart), NCCL (nccl.h, libnccl), g++, python3 and a
built plugin (build/lib/libnccl-net-flexiforce.so, build/bin/flexiforce). The rank driver,
examples/gpu_e2e/gpu_e2e.cc, is compiled with g++ against NCCL and CUDA (no device code).
CUDA_HOME (default /usr/local/cuda, then /usr/local/cuda-*) and NCCL_HOME locate them.

  --build DIR     the CMake build folder (default: build next to examples/)
  --max-bytes B   largest message, K/M/G suffix (default 256M)
  --iters N       timed iterations per size (default 5)
  --compile-only  compile the driver and stop (needs the headers and libraries, no GPU)

Exit status: 0 passed, 1 failed, 2 bad usage, 77 skipped (no GPU, or CUDA/NCCL missing; the
message says what is missing).
USAGE
}

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build"
max_bytes=256M
iters=5
compile_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build) build="${2:?--build needs a folder}"; shift 2 ;;
    --max-bytes) max_bytes="${2:?--max-bytes needs a size}"; shift 2 ;;
    --iters) iters="${2:?--iters needs a count}"; shift 2 ;;
    --compile-only) compile_only=1; shift ;;
    *) echo "gpu-e2e.sh: unknown option '$1' (accepted: --build DIR, --max-bytes B, --iters N, --compile-only, --help)" >&2
       exit 2 ;;
  esac
done
if ! [[ "$max_bytes" =~ ^[1-9][0-9]*[KMG]?$ ]]; then
  echo "gpu-e2e.sh: --max-bytes '$max_bytes' is not valid; accepted: a positive integer with an optional K, M or G suffix (e.g. 256M)" >&2
  exit 2
fi
if ! [[ "$iters" =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu-e2e.sh: --iters '$iters' is not valid; accepted: a positive integer" >&2
  exit 2
fi

missing=()
first_file() {  # first_file NAME DIR... : prints the first DIR/NAME that exists
  local name="$1" d
  shift
  for d in "$@"; do
    [ -e "$d/$name" ] && { echo "$d"; return 0; }
  done
  return 1
}
cuda_dirs=()
[ -n "${CUDA_HOME:-}" ] && cuda_dirs+=("$CUDA_HOME")
cuda_dirs+=(/usr/local/cuda $(ls -d /usr/local/cuda-* 2>/dev/null | sort -rV))
nccl_dirs=()
[ -n "${NCCL_HOME:-}" ] && nccl_dirs+=("$NCCL_HOME")
nccl_dirs+=("${cuda_dirs[@]}" /usr)

cuda_inc=""; nccl_inc=""; nccl_lib=""; cudart_lib=""
for d in "${cuda_dirs[@]}"; do
  [ -z "$cuda_inc" ] && cuda_inc="$(first_file cuda_runtime.h "$d/include" "$d/targets/x86_64-linux/include")"
  [ -z "$cudart_lib" ] && cudart_lib="$(first_file libcudart.so "$d/lib64" "$d/lib" "$d/targets/x86_64-linux/lib")"
done
for d in "${nccl_dirs[@]}"; do
  [ -z "$nccl_inc" ] && nccl_inc="$(first_file nccl.h "$d/include")"
  [ -z "$nccl_lib" ] && nccl_lib="$(first_file libnccl.so "$d/lib" "$d/lib64" "$d/lib/x86_64-linux-gnu")"
done
[ -n "$cuda_inc" ] || missing+=("the CUDA runtime headers (cuda_runtime.h under \$CUDA_HOME/include or /usr/local/cuda*)")
[ -n "$cudart_lib" ] || missing+=("the CUDA runtime library (libcudart.so under \$CUDA_HOME/lib64)")
[ -n "$nccl_inc" ] || missing+=("NCCL's header (nccl.h; set NCCL_HOME)")
[ -n "$nccl_lib" ] || missing+=("NCCL's library (libnccl.so; set NCCL_HOME)")
command -v g++ >/dev/null || missing+=("g++")

driver="$build/examples/ff-gpu-e2e"
compile_driver() {
  mkdir -p "$build/examples" || return 1
  g++ -O2 -std=c++17 "$root/examples/gpu_e2e/gpu_e2e.cc" -I"$cuda_inc" -I"$nccl_inc" \
    -L"$nccl_lib" -L"$cudart_lib" -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cudart_lib" -lnccl -lcudart -o "$driver"
}

if [ "$compile_only" = 1 ]; then
  if [ ${#missing[@]} -gt 0 ]; then
    echo "SKIP: cannot compile the driver; missing:"; printf '  - %s\n' "${missing[@]}"; exit 77
  fi
  compile_driver || { echo "FAIL: the driver examples/gpu_e2e/gpu_e2e.cc did not compile"; exit 1; }
  echo "ok: compiled $driver against $nccl_inc/nccl.h and $cuda_inc/cuda_runtime.h"
  exit 0
fi

gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu="$(nvidia-smi -L 2>/dev/null | grep -m1 '^GPU ' || true)"
  [ -n "$gpu" ] || missing+=("an NVIDIA GPU: nvidia-smi -L lists none")
else
  missing+=("an NVIDIA GPU: nvidia-smi is not installed and no driver answers")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP: examples/gpu-e2e.sh needs what this machine lacks:"
  printf '  - %s\n' "${missing[@]}"
  exit 77
fi

ff="$build/bin/flexiforce"
plugin="$build/lib/libnccl-net-flexiforce.so"
for f in "$ff" "$plugin"; do
  [ -e "$f" ] || { echo "FAIL: $f is missing; build first: cmake -S . -B build -G Ninja && cmake --build build"; exit 1; }
done
command -v python3 >/dev/null || { echo "FAIL: python3 is missing (it reads flexiforce stats --json)"; exit 1; }
compile_driver || { echo "FAIL: the driver examples/gpu_e2e/gpu_e2e.cc did not compile"; exit 1; }
echo "GPU: $gpu"
echo "NCCL: $nccl_lib/libnccl.so  driver: $driver"

work="$(mktemp -d /tmp/ff-gpu-e2e.XXXXXX)"
trap 'rm -rf "$work"' EXIT
task="gpu-e2e-$$"

# run_pair LABEL ENV... : both ranks on GPU 0 as two hosts; logs in $work/LABEL.rank*.log
run_pair() {
  local label="$1" r pids=() rc=0
  shift
  rm -f "$work/$label.id"
  for r in 0 1; do
    env NCCL_HOSTID="ff-e2e-host$r" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
      LD_LIBRARY_PATH="$build/lib:$nccl_lib:$cudart_lib:${LD_LIBRARY_PATH:-}" "$@" \
      timeout 600 "$driver" --rank "$r" --nranks 2 --id-file "$work/$label.id" --max-bytes "$max_bytes" \
      --iters "$iters" --label "$label" > "$work/$label.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  if [ $rc -ne 0 ]; then
    echo "FAIL: the $label run failed; last lines of each rank's log:"
    for r in 0 1; do echo "--- rank $r"; grep -v ' INFO ' "$work/$label.rank$r.log" | tail -20; done
    exit 1
  fi
}

echo "== FlexiForce (NCCL_NET_PLUGIN=flexiforce)"
run_pair flexiforce NCCL_NET_PLUGIN=flexiforce NCCL_PROFILER_PLUGIN="$plugin" AI_TASK_ID="$task" \
  AI_SLA_LATENCY=50 AI_FLEXIFORCE_ENABLE=1 FLEXIFORCE_STATS_DIR="$work" FLEXIFORCE_STATS_KEEP=1
if ! grep -qE 'Using (network|net plugin)[^A-Za-z]*FlexiForce' "$work"/flexiforce.rank*.log; then
  echo "FAIL: NCCL's log does not say it uses the net plugin FlexiForce; its NET lines:"
  grep -E 'NET|net plugin' "$work/flexiforce.rank0.log" | head -20
  exit 1
fi
echo "ok: NCCL uses the net plugin FlexiForce ($(grep -hoE 'Using (network|net plugin)[^A-Za-z]*FlexiForce' "$work/flexiforce.rank0.log" | head -1))"

echo "== NCCL's socket transport (NCCL_NET=Socket, no plugin)"
run_pair socket NCCL_NET=Socket NCCL_NET_PLUGIN=none
if ! grep -qE 'Using network[^A-Za-z]*Socket' "$work"/socket.rank*.log; then
  echo "FAIL: the baseline did not run on NCCL's socket transport; its NET lines:"
  grep -E 'NET' "$work/socket.rank0.log" | head -20
  exit 1
fi

"$ff" stats --json --include-stale --dir "$work" > "$work/stats.json" || { echo "FAIL: flexiforce stats failed"; exit 1; }
python3 - "$work" "$task" "$iters" <<'PY'
import collections, json, sys
work, task = sys.argv[1], sys.argv[2]
results = collections.defaultdict(dict)
for label in ("flexiforce", "socket"):
    for line in open(f"{work}/{label}.rank0.log"):
        if line.startswith("RESULT "):
            _, lab, coll, size, us, alg, bus, state = line.split()
            results[(coll, int(size))][lab] = (float(bus), state)
if not results:
    sys.exit("FAIL: no RESULT lines from rank 0")
print(f"{'collective':<10} {'bytes':>11} {'FlexiForce busbw':>17} {'Socket busbw':>13} {'ratio':>6}  (GB/s)")
expected = collections.Counter()
for (coll, size), by in sorted(results.items()):
    ff, so = by.get("flexiforce"), by.get("socket")
    ratio = f"{ff[0] / so[0]:.2f}" if ff and so and so[0] > 0 else "-"
    print(f"{coll:<10} {size:>11} {ff[0] if ff else float('nan'):>17.3f} {so[0] if so else float('nan'):>13.3f} {ratio:>6}")
    if not ff or ff[1] != "exact":
        sys.exit(f"FAIL: {coll} {size} B has no exact FlexiForce result")
# Bytes the ring must send over the network, summed over both ranks, per operation of `size`:
# AllReduce 2(n-1)/n*S per rank, AllGather (n-1)/n*S per rank, Broadcast (n-1)*S in all (n = 2).
factor = {"AllReduce": 2.0, "AllGather": 1.0, "Broadcast": 1.0}
iters = int(sys.argv[3]) + 1  # the warm-up and the timed iterations
stats = json.load(open(f"{work}/stats.json"))
got = collections.Counter()
for proc in stats["processes"]:
    for flow in proc["flows"]:
        if flow["task"] == task:
            got[flow["collective"]] += flow["send"]["bytes"]
total = sum(got.values())
print("flexiforce stats, bytes sent per collective for task", task, dict(got))
if total == 0:
    sys.exit("FAIL: flexiforce stats shows no bytes for the task")
for coll, f in factor.items():
    want = sum(f * size * iters for (c, size) in results if c == coll)
    have = got.get(coll, 0)
    if not (0.9 * want <= have <= 4 * want):
        sys.exit(f"FAIL: flexiforce stats attributes {have} bytes to {coll}; the ring must send about {int(want)} "
                 "(accepted 0.9x to 4x)")
    print(f"ok: {coll}: {have} bytes attributed, ring minimum {int(want)}")
other = total - sum(got.get(c, 0) for c in factor)
if other > 0.05 * total:
    sys.exit(f"FAIL: {other} of {total} bytes attributed to neither AllReduce, AllGather nor Broadcast: {dict(got)}")
print("PASS: exact results, plugin named in NCCL's log, bytes attributed to the right collectives")
PY
