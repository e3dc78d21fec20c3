#!/usr/bin/env bash
# Runs examples/gpu-e2e.sh: --help must work; without a GPU it must skip (77) naming the missing GPU.
# Usage: gpu_e2e_check.sh GPU_E2E_SH BUILD_DIR
set -uo pipefail
script="${1:?usage: gpu_e2e_check.sh GPU_E2E_SH BUILD_DIR}"
build="${2:?usage: gpu_e2e_check.sh GPU_E2E_SH BUILD_DIR}"
help="$(bash "$script" --help)" || { echo "FAIL: --help exited $?"; exit 1; }
grep -q "NCCL_HOSTID" <<<"$help" || { echo "FAIL: --help does not explain the two-host trick"; exit 1; }
bash "$script" --max-bytes lots >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: a bad --max-bytes is not refused with status 2"; exit 1; }
out="$(bash "$script" --build "$build" 2>&1)"
rc=$?
echo "$out"
has_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && has_gpu=1
if [ $has_gpu = 0 ]; then
  [ $rc -eq 77 ] || { echo "FAIL: no GPU here, but gpu-e2e.sh exited $rc instead of 77 (skip)"; exit 1; }
  grep -q "an NVIDIA GPU" <<<"$out" || { echo "FAIL: the skip message does not say the GPU is missing"; exit 1; }
fi
exit $rc
