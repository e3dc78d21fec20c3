#!/usr/bin/env bash
# Runs the whole suite (README's test command: plain build, ASan+UBSan, TSan) several times in a row
# while busy loops compete for the CPUs, from a fresh clone under /root (where an unprivileged user
# cannot read the checkout). A flaky test shows up here; the summary gives the counts per round.
# Every lane is built once first, without the busy loops, so the rounds time tests, not compilers.
# The VM lane and the fuzz lane are left out unless --all-lanes: neither has timing-bound checks on
# the host, and the VM lane alone takes longer than a round of the rest under load.
#
# usage: tests/stress_suite.sh [--rounds N] [--busy N] [--dir DIR] [--keep-going] [--plain-only]
#                              [--all-lanes] [--reuse]
#   --rounds N     rounds of the whole suite (default 5)
#   --busy N       busy loops competing for the CPUs (default 2)
#   --dir DIR      where to clone the checkout's HEAD (default /root/flexiforce-stress)
#   --keep-going   run every round even after a failed one (default: stop at the first failure)
#   --plain-only   skip the sanitizer builds (FF_SKIP_SANITIZERS=1 FF_SKIP_TSAN=1)
#   --all-lanes    also run the VM lane and the fuzz lane in every round
#   --reuse        keep DIR's clone and builds when it has them: fetch HEAD into it and rebuild only
#                  what changed (a fresh clone builds all three lanes, ~25 min on 2 cores)
# Exit status: 0 when every round passed, 1 otherwise, 2 on bad usage.
set -uo pipefail

rounds=5 busy=2 dir=/root/flexiforce-stress keep_going=0 plain_only=0 all_lanes=0 reuse=0
while (($#)); do
  case "$1" in
    --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
    --busy) busy="${2:?--busy needs a number}"; shift 2 ;;
    --dir) dir="${2:?--dir needs a directory}"; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    --plain-only) plain_only=1; shift ;;
    --all-lanes) all_lanes=1; shift ;;
    --reuse) reuse=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stress_suite: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "stress_suite: --rounds must be a positive integer, got '$rounds'" >&2; exit 2; }
[[ "$busy" =~ ^[0-9]+$ ]] || { echo "stress_suite: --busy must be a non-negative integer, got '$busy'" >&2; exit 2; }

src="$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)" || exit 2
if ((reuse)) && [ -d "$dir/.git" ]; then
  git -C "$dir" fetch -q "$src" HEAD && git -C "$dir" reset -q --hard FETCH_HEAD && git -C "$dir" clean -qfd ||
    { echo "stress_suite: cannot update $dir from $src" >&2; exit 2; }
else
  rm -rf "$dir"
  git clone -q "$src" "$dir" || { echo "stress_suite: cannot clone $src into $dir" >&2; exit 2; }
fi
echo "stress_suite: $rounds round(s) of the whole suite at $(git -C "$dir" rev-parse --short HEAD) in $dir," \
     "with $busy busy loop(s) on $(nproc) CPU(s)"

lanes=(FF_SKIP_SANITIZERS="$plain_only" FF_SKIP_TSAN="$plain_only")
((all_lanes)) || lanes+=(FF_VM_LANE=0 FF_SKIP_FUZZ=1)
logs="$dir/stress-logs"
mkdir -p "$logs"
start=$SECONDS
if ! env "${lanes[@]}" FF_BUILD_ONLY=1 bash "$dir/examples/test.sh" >"$logs/build.log" 2>&1; then
  echo "stress_suite: the build failed; see $logs/build.log" >&2
  tail -20 "$logs/build.log" >&2
  exit 1
fi
echo "stress_suite: every lane built in $((SECONDS - start)) s (no busy loops yet)"

pids=()
stop_busy() { ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop_busy EXIT
for ((i = 0; i < busy; i++)); do
  ( while :; do :; done ) &
  pids+=($!)
done

passed=0
summary=()
for ((r = 1; r <= rounds; r++)); do
  start=$SECONDS
  env "${lanes[@]}" bash "$dir/examples/test.sh" >"$logs/round$r.log" 2>&1
  rc=$?
  # ctest prints one "N% tests passed, F tests failed out of T" line per build.
  counts="$(grep -E 'tests passed|tests failed' "$logs/round$r.log" | sed 's/^/    /')"
  failed="$(grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)' "$logs/round$r.log")"
  line="round $r: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - start)) s"
  summary+=("$line" "$counts")
  [ -n "$failed" ] && summary+=("$(sed 's/^/    failed: /' <<<"$failed")")
  printf '%s\n%s\n' "$line" "$counts"
  [ -n "$failed" ] && sed 's/^/    failed: /' <<<"$failed"
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
  elif [ $keep_going -eq 0 ]; then
    break
  fi
done
echo
echo "stress_suite: $passed of $rounds round(s) passed in a row with $busy busy loop(s); logs in $logs"
[ "$passed" -eq "$rounds" ]
