#!/usr/bin/env bash
# Runs the plugin's conformance suite and a 4-rank loopback collective (every collective, 1 KiB to
# 4 MiB, each element checked) under combinations of FLEXIFORCE_* knobs at the edges of their
# ranges: 1, 3 and 16 paths; tiny and huge chunks; no eager sends and a 4 MiB eager size; no eager
# ring; acknowledgements one by one and batched 1024 deep with a second's delay; no striping with one
# queued chunk; 64 KiB socket buffers; the watchdog, the canary and the health readers off or on.
# The default suite runs only the defaults; a knob combination that hangs or corrupts shows up here.
# No root needed. About 8 minutes for the whole matrix on 2 cores (20-40 s a row).
#
# usage: tests/knob_sweep.sh [--build DIR] [--only N[,N...]] [--list] [--json] [--keep-going]
#   --build DIR    the build folder holding bin/ff_plugin_conformance_tests and bin/ff-collective
#                  (default: build)
#   --only N,...   run only these rows of the matrix (numbers from --list)
#   --list         print the matrix and exit
#   --json         one JSON object on stdout: each row's knobs, drivers' exit codes and seconds
#   --keep-going   run every row even after a failure (default: stop at the first)
# Exit status: 0 every row passed, 1 a row failed, 2 bad usage or missing binaries.
set -uo pipefail

build=build only="" list=0 json=0 keep_going=0
while (($#)); do
  case "$1" in
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    --only) only="${2:?--only needs row numbers, e.g. 1,4}"; shift 2 ;;
    --list) list=1; shift ;;
    --json) json=1; shift ;;
    --keep-going) keep_going=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "knob_sweep: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -z "$only" || "$only" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  { echo "knob_sweep: --only takes comma-separated row numbers (see --list), got '$only'" >&2; exit 2; }

rows=(
  ""
  "FLEXIFORCE_PATHS=1"
  "FLEXIFORCE_PATHS=3"
  "FLEXIFORCE_PATHS=16"
  "FLEXIFORCE_CHUNK_SIZE=4K"
  "FLEXIFORCE_CHUNK_SIZE=8K FLEXIFORCE_PATHS=3"
  "FLEXIFORCE_CHUNK_SIZE=64M"
  "FLEXIFORCE_EAGER_BYTES=0"
  "FLEXIFORCE_EAGER_BYTES=4M"
  "FLEXIFORCE_EAGER_RING=0"
  "FLEXIFORCE_ACK_BATCH=1 FLEXIFORCE_ACK_DELAY_US=0"
  "FLEXIFORCE_ACK_BATCH=1024 FLEXIFORCE_ACK_DELAY_US=1000000"
  "FLEXIFORCE_STRIPE_MIN=0 FLEXIFORCE_QUEUED_CHUNKS=1"
  "FLEXIFORCE_STRIPE_MIN=0 FLEXIFORCE_QUEUED_CHUNKS=64"
  "FLEXIFORCE_SOCKET_BUFFER=64K"
  "FLEXIFORCE_TCP_CONGESTION=reno"
  "FLEXIFORCE_PATH_STALL_MS=0 FLEXIFORCE_DUAL_PATH_MS=100"
  "FLEXIFORCE_STATS=0 FLEXIFORCE_NIC_HEALTH=0 FLEXIFORCE_LINK_EVENTS=0"
)

if ((list)); then
  for i in "${!rows[@]}"; do printf '%2d  %s\n' "$i" "${rows[$i]:-(defaults)}"; done
  exit 0
fi

conf="$build/bin/ff_plugin_conformance_tests" coll="$build/bin/ff-collective" cli="$build/bin/flexiforce"
for b in "$conf" "$coll" "$cli"; do
  [ -x "$b" ] || { echo "knob_sweep: $b is missing: build first (bash examples/setup.sh), or pass --build DIR" >&2; exit 2; }
done

selected() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

failed=0 out_json=""
for i in "${!rows[@]}"; do
  selected "$i" || continue
  knobs="${rows[$i]}"
  # A value the plugin rejects would fall back to its default and test nothing new: refuse the row.
  if bad=$(env $knobs "$cli" config --json | python3 -c '
import json, sys
errs = [k["error"] for k in json.load(sys.stdin)["knobs"] if k.get("error")]
print("; ".join(errs)); sys.exit(1 if errs else 0)'); then :; else
    echo "knob_sweep: row $i: $bad" >&2; exit 2
  fi
  t0=$(date +%s.%N)
  # A hang is a failure: each driver runs under a timeout well above its normal time.
  env $knobs timeout 600 "$conf" --gtest_brief=1 > "/tmp/knob_sweep.$$.conf.log" 2>&1
  c_rc=$?
  env $knobs timeout 300 "$coll" --ranks 4 --launch-local --coll all --min-bytes 1K --max-bytes 4M \
    --iters 3 --warmup 1 > "/tmp/knob_sweep.$$.coll.log" 2>&1
  k_rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  verdict=pass
  if [ "$c_rc" != 0 ] || [ "$k_rc" != 0 ]; then verdict=FAIL; failed=1; fi
  if ((json)); then
    out_json+="${out_json:+,}{\"row\":$i,\"knobs\":\"$knobs\",\"conformance_rc\":$c_rc,\"collective_rc\":$k_rc,\"seconds\":$secs,\"pass\":$([ $verdict = pass ] && echo true || echo false)}"
  else
    printf '%2d  %-4s conformance rc %-3s collective rc %-3s %6.1f s  %s\n' "$i" "$verdict" "$c_rc" "$k_rc" "$secs" \
      "${knobs:-(defaults)}"
  fi
  if [ $verdict = FAIL ]; then
    { echo "--- row $i (${knobs:-defaults}): conformance (rc $c_rc), last lines:"
      grep -E "FAILED|Failure|Expected|Which is|timed out|error" "/tmp/knob_sweep.$$.conf.log" | head -20
      echo "--- collective (rc $k_rc), last lines:"
      tail -5 "/tmp/knob_sweep.$$.coll.log"; } >&2
    ((keep_going)) || break
  fi
done
rm -f "/tmp/knob_sweep.$$.conf.log" "/tmp/knob_sweep.$$.coll.log"
((json)) && echo "{\"rows\":[${out_json}],\"pass\":$([ $failed = 0 ] && echo true || echo false)}"
exit $failed
