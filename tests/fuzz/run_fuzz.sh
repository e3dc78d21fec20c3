#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz (clang, FF_FUZZ=ON) and runs each for SECONDS; fails on a crash.
# Usage: bash tests/fuzz/run_fuzz.sh SECONDS. Skips (exit 0) with a message when clang or libFuzzer is missing.
set -euo pipefail
secs="${1:-}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: $0 SECONDS (a whole number of seconds per target, at least 1)" >&2
  exit 2
fi
# FF_FUZZ_JOBS (default: the CPUs this shell may use): compile jobs, and how many targets fuzz side by
# side. Each target still gets its SECONDS; the runs take about SECONDS x targets / FF_FUZZ_JOBS.
jobs="${FF_FUZZ_JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "run_fuzz: FF_FUZZ_JOBS must be a positive whole number, got '$jobs'" >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/tests/fuzz"
build="$root/build-fuzz"
targets=(fuzz_frame_header fuzz_listen_handle fuzz_hello fuzz_topology_json fuzz_stats_file fuzz_comm_stream)

if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "run_fuzz: skipped - clang/clang++ not found (Debian: apt-get install clang)"
  exit 0
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cc"
if ! clang++ -fsanitize=fuzzer,address "$probe/p.cc" -o "$probe/p" 2>"$probe/err"; then
  echo "run_fuzz: skipped - clang++ cannot link libFuzzer ($(head -1 "$probe/err"))"
  exit 0
fi

mkdir -p "$build"
# Warnings are not errors here: this build exists to find crashes, with another compiler than CI's.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFF_FUZZ=ON \
  -DFF_WERROR=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"$jobs" --target "${targets[@]}"

run_one() {
  local t="$1" work="$build/fuzz-work/$1"
  mkdir -p "$work/corpus" "$work/artifacts"
  # New inputs go to a scratch corpus; the committed seeds are read only. A crash leaves
  # crash-<sha1> under artifacts/: replay it with "$build/bin/$t <file>".
  local rc=0
  "$build/bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" "$here/corpus/$t" \
    >"$work/log" 2>&1 || rc=$?
  echo "$rc" >"$work/rc"
}
for t in "${targets[@]}"; do
  rm -f "$build/fuzz-work/$t/rc"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  echo "== $t: ${secs} s (seeds: tests/fuzz/corpus/$t)"
  run_one "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  if [ "$(cat "$work/rc" 2>/dev/null)" != 0 ]; then
    echo "$t: FAILED - see $work/log and $work/artifacts/"
    tail -40 "$work/log"
    failed=1
  else
    echo "$t: ok, $(grep -E "^stat::number_of_executed_units" "$work/log" | tail -1 | tr -s " ")"
  fi
done
exit "$failed"
