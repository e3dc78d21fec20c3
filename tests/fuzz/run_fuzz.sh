#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz (clang, FF_FUZZ=ON) and runs each for SECONDS; fails on a crash.
# Usage: bash tests/fuzz/run_fuzz.sh SECONDS. Skips (exit 0) with a message when clang or libFuzzer is missing.
set -euo pipefail
secs="${1:-}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: $0 SECONDS (a whole number of seconds per target, at least 1)" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/tests/fuzz"
build="$root/build-fuzz"
targets=(fuzz_frame_header fuzz_listen_handle fuzz_hello fuzz_topology_json fuzz_stats_file)

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
cmake --build "$build" -j"${FF_FUZZ_JOBS:-2}" --target "${targets[@]}"

failed=0
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  echo "== $t: ${secs} s (seeds: tests/fuzz/corpus/$t)"
  # New inputs go to a scratch corpus; the committed seeds are read only. A crash leaves
  # crash-<sha1> under artifacts/: replay it with "$build/bin/$t <file>".
  if ! "$build/bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" "$here/corpus/$t" \
      >"$work/log" 2>&1; then
    echo "$t: FAILED - see $work/log and $work/artifacts/"
    tail -40 "$work/log"
    failed=1
  else
    grep -E "^stat::number_of_executed_runs|^#[0-9]+.*DONE" "$work/log" | tail -2 || true
  fi
done
exit "$failed"
