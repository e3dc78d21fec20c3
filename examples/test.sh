#!/usr/bin/env bash
# Set up, build, and run every test; then build again with AddressSanitizer + UndefinedBehaviorSanitizer
# and run the suite once more; then a ThreadSanitizer build runs the unit, conformance and loopback
# collective tests. Tests that need root skip (with a message) when not root.
# FF_BUILD_ONLY=1 installs and builds every lane's build (plain, ASan+UBSan, TSan) and runs nothing
# (tests/stress_suite.sh builds first, so its rounds time the tests, not the compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
# One line per lane with the seconds since the start, so a CI log shows where its time went.
lane() { echo "test.sh: +${SECONDS}s $*"; }
lane "setup and plain build"
# Line tables only (-g1) in every CI build: stack traces (sanitizer reports included) keep function,
# file and line, and full DWARF took a third of the -O2 builds' compile time and 6-10% of the -O0
# ASan build's (README's demo command builds with -g).
FF_CMAKE_ARGS="-DFF_LINE_TABLES_ONLY=ON ${FF_CMAKE_ARGS:-}" bash examples/setup.sh
if [ "${FF_BUILD_ONLY:-0}" = 1 ]; then
  [ "${FF_SKIP_SANITIZERS:-0}" != 1 ] &&
    FF_BUILD_DIR=build-asan FF_CMAKE_ARGS="-DFF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DFF_LINE_TABLES_ONLY=ON" bash examples/setup.sh
  [ "${FF_SKIP_TSAN:-0}" != 1 ] &&
    FF_BUILD_DIR=build-tsan FF_CMAKE_ARGS="-DFF_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFF_LINE_TABLES_ONLY=ON -DFF_OPT_LEVEL=1" bash examples/setup.sh
  exit 0
fi
lane "plain tests"
ctest --test-dir "${FF_BUILD_DIR:-build}" -j2 --output-on-failure --timeout 600

if [ "${FF_SKIP_SANITIZERS:-0}" != 1 ]; then
  lane "ASan+UBSan build"
  FF_BUILD_DIR=build-asan FF_CMAKE_ARGS="-DFF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DFF_LINE_TABLES_ONLY=ON" bash examples/setup.sh
  # Sanitized binaries are slower: the long random-size conformance test is covered by the plain
  # build above. FF_SANITIZED tells the dual-path scenarios that a comparison window will not see
  # the 20,000 segments a verdict needs, so there they check exact results and that comparisons ran.
  # Three emulator scenarios run only in the plain lane: each repeats code another scenario already
  # takes under the sanitizers (quiet: 60 s of fault-free traffic; loss_1pct: the drain soft_loss
  # takes; dual_both: the comparison dual_one takes), and together they cost ~2.5 min here. Also
  # plain-only: nic_down (its failover is spine_down's and setup_cut's, 24 s under ASan) and
  # bench_json_targets (bench_smoke runs the same bench code under the sanitizers; 40 s).
  lane "ASan+UBSan tests"
  FF_SANITIZED=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan -j2 --output-on-failure --timeout 900 \
      -E "ThousandsOfRandomSized|bench_json_targets|failover_fabric_(quiet|loss_1pct|dual_both|nic_down)$"
fi

if [ "${FF_SKIP_TSAN:-0}" != 1 ]; then
  # ThreadSanitizer: NCCL calls a communicator from its proxy thread and regMr/setNetAttr/profiler
  # hooks from others, and process-wide state (link monitor, NIC verdicts, rejoin hub, statistics)
  # is shared. Unit, conformance and loopback collective tests; the emulator's timing-bound
  # scenarios stay in the plain and ASan lanes. -O1 (FF_OPT_LEVEL): ThreadSanitizer's recommended level;
  # it compiles in ~320 s here against ~400 s at -O2, and the lane's tests took as long (88 s vs 90 s).
  lane "TSan build"
  FF_BUILD_DIR=build-tsan FF_CMAKE_ARGS="-DFF_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFF_LINE_TABLES_ONLY=ON -DFF_OPT_LEVEL=1" bash examples/setup.sh
  lane "TSan tests"
  # The soak's connect/close cycles (10,000 plain, 1,000 under ASan) take ~83 ms each under TSan: 300
  # here (its warm-up and slot reclaiming still run) keep the lane's races in view at a third of 83 s.
  FF_SOAK_CYCLES=300 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan -j2 --output-on-failure --timeout 900 \
      -LE "root|fabric|failover|bench|probe" -E "ThousandsOfRandomSized"
fi

# ---------------------------------------------------------------------------------------------------
# VM lane (tests/vm): real RDMA verbs on Soft-RoCE in a QEMU VM booting Debian's stock kernel; the
# baseline for the verbs backend. FF_VM_LANE=0 leaves it out. Its own tiny standalone CMake project
# (no compiler, FF_VM_TESTS stays off in the builds above), so the lanes above never boot a VM. Where
# qemu or the kernel package cannot be had (or not root), its tests exit 77 and ctest lists them as
# skipped, not failed.
if [ "${FF_VM_LANE:-1}" != 0 ]; then
  lane "VM lane"
  cmake -S tests/vm -B "${FF_VM_BUILD_DIR:-build-vm}" >/dev/null
  ctest --test-dir "${FF_VM_BUILD_DIR:-build-vm}" -L vm --output-on-failure --timeout 900
fi

if [ "${FF_SKIP_FUZZ:-0}" != 1 ]; then
  # libFuzzer (clang): frame headers, listen handles, hellos/rejoins, topology JSON, statistics files,
  # 10 s each (CI's time is bounded); skips with a message where clang or libFuzzer is missing.
  lane "fuzz lane"
  bash tests/fuzz/run_fuzz.sh 10
fi
lane "done"
