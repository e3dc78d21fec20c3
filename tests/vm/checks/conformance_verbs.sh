#!/usr/bin/env bash
# VM lane check (in the VM): the plugin conformance suite (tests/plugin, the built .so through its C ABI,
# two processes) with FLEXIFORCE_TRANSPORT=verbs on Soft-RoCE. Both processes use plugin device 0
# (NCCL_IB_HCA=rxe_a0 leaves only rxe_a0), so their queue pairs meet on one rxe device (the kernel's
# loopback); the connection handshake runs over va0's address, so it crosses the veth pair.
# FF_CONFORMANCE_FILTER overrides the gtest filter (default: the tests that apply to a verbs
# transport and fit TCG's speed; see tests/vm/README.md for the ones left out and why).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin="${FF_BUILD_DIR:-build}/bin/ff_plugin_conformance_tests"
[ -x "$bin" ] || { echo "SKIP: $bin not built (cmake --build build --target ff_plugin_conformance_tests)"; exit 77; }
default_filter='Conformance.GroupedReceiveMatchesEachMessageToItsTag'
default_filter+=':Conformance.ThirtyTwoRequestsInFlightThenNullRequestUntilOneCompletes'
default_filter+=':Conformance.PingPongThatTestsTheSendOnlyAfterTheReplyNeverHangs'
default_filter+=':Conformance.PingPongAboveTheUnsolicitedBudgetThatTestsTheSendLastNeverHangs'
default_filter+=':Conformance.FourThreadsEachWithTheirOwnCommunicatorsStreamARingConcurrently'
default_filter+=':Conformance.AReceiverStoppedForThreeSecondsLosesNothingAndFailsNothing'
default_filter+=':Conformance.RunningOutOfFileDescriptorsIsAnErrorAndConnectedCommunicatorsKeepWorking'
default_filter+=':Conformance.MalformedHandleIsRejectedWithInvalidArgument'
default_filter+=':Conformance.GarbageFromAStrangerNeverReachesABufferAndTheRealPeerStillConnects'
default_filter+=':Conformance.MessageLargerThanThePostedBufferIsAnErrorOnBothSides'
default_filter+=':Conformance.ReceiverKilledMidTransferGivesTheSenderAnErrorNotAHang'
default_filter+=':Conformance.SenderKilledMidMessageGivesTheReceiverAnErrorNotAHang'
default_filter+=':Conformance.GpuRegistrationsAreRefusedOverTcpAndFlushedWithAnRdmaReadOverVerbs'
default_filter+=':LegacyTables.*'
filter="${FF_CONFORMANCE_FILTER:-$default_filter}"

"$fixture" up 1
export FLEXIFORCE_TRANSPORT=verbs NCCL_IB_HCA="=rxe_a0" NCCL_SOCKET_IFNAME="=va0" FLEXIFORCE_STATS=0
# One process per test: the suite forks its peers, and a child forked after its parent's init
# cannot use the parent's verbs resources (the plugin refuses that with an error); a fresh process
# per test keeps every child's init its own, as NCCL's ranks are.
mapfile -t tests < <("$bin" --gtest_filter="$filter" --gtest_list_tests |
  awk '/^[A-Za-z_0-9]+\.$/ { suite = $1; next } /^  [A-Za-z_0-9]/ && suite != "" { print suite $1 }')
[ "${#tests[@]}" -gt 0 ] || fail "no test matches $filter"
passed=0
failed=()
total_start=$(date +%s.%N)
for t in "${tests[@]}"; do
  start=$(date +%s.%N)
  rc=0
  timeout "${FF_CONFORMANCE_TIMEOUT:-120}" "$bin" --gtest_filter="$t" >/tmp/ff-conf.log 2>&1 || rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" -eq 0 ] && grep -q '^\[  PASSED  \] 1 test' /tmp/ff-conf.log; then
    passed=$((passed + 1))
    echo "ok   $t (${secs} s)"
  else
    failed+=("$t")
    echo "FAIL $t (exit $rc, ${secs} s):"
    grep -v '^\[ *RUN' /tmp/ff-conf.log | tail -25
  fi
done
echo "RESULT conformance_verbs passed=$passed failed=${#failed[@]} of=${#tests[@]} seconds=$(awk -v a="$total_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
[ "${#failed[@]}" -eq 0 ] || fail "over verbs: ${failed[*]}"
log="$(FF_TEST_VERBOSE=1 timeout 60 "$bin" --gtest_filter='Conformance.MalformedHandleIsRejectedWithInvalidArgument' 2>&1 || true)"
grep -qF 'transport: RDMA verbs (FLEXIFORCE_TRANSPORT=verbs: RDMA verbs on 1 ACTIVE port(s) (rxe_a0:1))' <<<"$log" ||
  { echo "$log"; fail "the plugin did not log that it chose verbs on rxe_a0"; }
# iflush of a receive into memory registered as CUDA ran a real RDMA READ on a loopback queue pair.
log="$(FF_TEST_VERBOSE=1 timeout 120 "$bin" --gtest_filter='Conformance.GpuRegistrationsAreRefusedOverTcpAndFlushedWithAnRdmaReadOverVerbs' 2>&1 || true)"
grep -q 'verbs: flush queue pair [0-9]* on rxe_a0:1' <<<"$log" && grep -q '^\[  PASSED  \] 1 test' <<<"$log" ||
  { echo "$log" | tail -30; fail "iflush did not create its loopback flush queue pair on rxe_a0"; }
echo "iflush: $(grep -o 'verbs: flush queue pair [0-9]* on rxe_a0:1' <<<"$log" | awk 'NR == 1')"
"$fixture" down
pass "plugin conformance over verbs (rxe_a0)"
