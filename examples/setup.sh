#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks, then configures and builds FlexiForce.
# FF_BUILD_DIR (default build) and FF_CMAKE_ARGS select the build; re-running is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ make libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev
          iproute2 nftables python3 python3-networkx procps
          systemtap-sdt-dev clang llvm bpftool libbpf-dev pkg-config libibverbs-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build="${FF_BUILD_DIR:-build}"
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${FF_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
