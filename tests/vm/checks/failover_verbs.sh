#!/usr/bin/env bash
# VM lane check (in the VM): a port going down under a running job, over verbs. Two ranks, each with
# two ports (rank 0 rxe_a0 + rxe_a1, rank 1 rxe_b0 + rxe_b1: --dev-cycle 4 --dev-step 2), one QP per
# port and direction (FLEXIFORCE_PATHS=2). AllReduce 1-4 MiB, every iteration checked exactly, while
# `ip link set va0 down` takes rxe_a0's port away 3 s in. The job must finish with exact results on
# the other port, the plugin must log the failed QP, and va1 must carry traffic after the cut.
# Prints the plugin's failover lines (cause, detection time) for the timeline, and per trial
# `TRIAL t exact=0|1 cause=async|carrier|stall|silent|completion|other detect_ms= backup_ms=
# silent_plus_pause_ms= cut_window_ms=`: the first failed
# path's cause (async = a verbs async event, IBV_EVENT_PORT_ERR here; carrier = rtnetlink; stall =
# the watchdog's absolute rule; silent = its relative rule), the time from the cut to the detection,
# and the time from the cut until the re-sent data was acknowledged on the other port (detection +
# pause: traffic flows on the backup). Times count from the stamp taken just before the cut command;
# cut_window_ms is how long that command took (the cut happened within it). FF_FAILOVER_TRIALS=N runs N trials, every one to the end,
# then prints `SUMMARY trials=N exact=K` and the median/p99 (nearest rank) of both times.
# FF_FAILOVER_ITERS (default 20) must keep the job running past the cut: under TCG `ip link set va0
# down` itself takes 2-5 s, and with 10 iterations the job had finished before it.
# FF_FAULT=drop makes the cut silent instead: an nftables rule drops every RoCE packet leaving va0
# (no carrier event; the QP's retries or the plugin's stall rule, whichever comes first, decide).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

bin="${FF_BUILD_DIR:-build}/bin/ff-collective"
[ -x "$bin" ] || { echo "SKIP: $bin not built (cmake --build build --target ff-collective)"; exit 77; }

"$fixture" up 2
export FLEXIFORCE_TRANSPORT=verbs FLEXIFORCE_PATHS=2 NCCL_SOCKET_IFNAME="=va0,=vb0" FLEXIFORCE_STATS=0
# TCG: a healthy QP can go 100+ ms without a completion (see tests/vm/README.md).
export FLEXIFORCE_PATH_STALL_MS="${FLEXIFORCE_PATH_STALL_MS:-500}"
trials="${FF_FAILOVER_TRIALS:-1}"
fault="${FF_FAULT:-down}"
case "$fault" in down|drop) ;; *) fail "FF_FAULT=$fault; accepted: down (ip link set va0 down) or drop (nftables)" ;; esac
all="$(mktemp)"
per_trial="$(mktemp)"
failed=0
for ((t = 1; t <= trials; t++)); do
  out="$(mktemp)"
  cutfile="$(mktemp)"
  # The cut comes once the job runs (its first result row: connections up, one size done), plus 0.5 s.
  (
    for ((i = 0; i < 1200; i++)); do grep -q '^ *allreduce' "$out" 2>/dev/null && break; sleep 0.1; done
    # ip and nft load over 9p (a second or more under TCG): load them once before the clock starts.
    ip link show va0 >/dev/null
    nft --version >/dev/null 2>&1 || true
    sleep 0.5
    date +%s.%N >"$cutfile"
    if [ "$fault" = drop ]; then
      nft -f - <<'NFT'
table inet ff_vm_drop {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname "va0" udp dport 4791 counter drop
  }
}
NFT
    else
      ip link set va0 down
    fi
    date +%s.%N >>"$cutfile"  # the cut happened between the two stamps
  ) &
  cutter=$!
  tx1_before=$(counter va1 tx_packets)
  set +e
  timeout 400 "$bin" --ranks 2 --launch-local --backend plugin --dev-cycle 4 --dev-step 2 --coll allreduce \
    --min-bytes 1M --max-bytes 4M --step-bytes 512K --iters "${FF_FAILOVER_ITERS:-20}" --warmup 1 --timeout-s "${FF_FAILOVER_TIMEOUT_S:-300}" \
    >"$out" 2>&1
  rc=$?
  set -e
  wait "$cutter" || true
  tx1_after=$(counter va1 tx_packets)
  ip link set va0 up
  ip link set vb0 up
  nft delete table inet ff_vm_drop 2>/dev/null || true
  # rxe's port follows its netdev back to ACTIVE; the next trial's init needs it.
  for ((i = 0; i < 100; i++)); do grep -q ACTIVE /sys/class/infiniband/rxe_a0/ports/1/state && break; sleep 0.1; done
  [ "$trials" -gt 1 ] || cat "$out"
  echo "RESULT failover_verbs trial=$t exit=$rc va1_tx_packets=$((tx1_after - tx1_before))"
  exact=1
  if [ "$rc" -ne 0 ]; then
    echo "TRIAL $t: the job did not survive rxe_a0's port going down (exit $rc)"; exact=0
  elif ! grep -q "all checks passed" "$out"; then
    echo "TRIAL $t: no exact-result confirmation"; exact=0
  elif ! grep -Eq "is down|failover" "$out"; then
    echo "TRIAL $t: the plugin logged no failed QP: did the cut hit the job?"; exact=0
  fi
  [ "$exact" -eq 1 ] || { cat "$out"; failed=$((failed + 1)); }
  # (|| true: a trial the cut missed has no such line, and the remaining trials still run)
  { grep -E "is down|failover|async event|IBV_EVENT" "$out" || true; } | sed "s/^/TIMELINE trial=$t /" | tee -a "$all"
  # The first path declared down names the cause; every failover line gives its detection time (unix)
  # and pause; the trial's figures are the slowest sender's.
  first="$(grep -m1 "is down" "$out" || true)"
  case "$first" in
    *"async event"*) cause=async ;;
    *"carrier lost"*) cause=carrier ;;
    *"no acknowledgement"*) cause=stall ;;
    *"silent while"*) cause=silent ;;
    *"completion failed"*) cause=completion ;;  # the QP's own retries ran out (or its peer's did)
    "") cause=none ;;
    *) cause=other ;;
  esac
  cut="$(head -n1 "$cutfile" 2>/dev/null || echo 0)"
  cut_window="$(awk 'NR == 1 { a = $1 } NR == 2 { printf "%.1f", ($1 - a) * 1000 }' "$cutfile" 2>/dev/null)"
  times="$(sed -n 's/.*paused \([0-9.]*\) ms.*detected at unix \([0-9.]*\)).*/\2 \1/p' "$out" |
    awk -v cut="$cut" 'BEGIN { d = -1; b = -1 }
      { dm = ($1 - cut) * 1000; bm = dm + $2; if (dm > d) d = dm; if (bm > b) b = bm }
      END { if (d < 0) print "nan nan"; else printf "%.1f %.1f\n", d, b }')"
  # The plugin's own measure, free of the cut command's duration: how long the path had been silent
  # when judged, plus the pause until the re-sent data was acknowledged on the backup.
  judged="$(sed -n 's/.*detected after \([0-9.]*\) ms without progress, paused \([0-9.]*\) ms.*/\1 \2/p' "$out" |
    awk 'BEGIN { m = -1 } { if ($1 + $2 > m) m = $1 + $2 } END { if (m < 0) print "nan"; else printf "%.1f\n", m }')"
  echo "TRIAL $t exact=$exact cause=$cause detect_ms=${times% *} backup_ms=${times#* } silent_plus_pause_ms=$judged cut_window_ms=${cut_window:-nan}" | tee -a "$per_trial"
  rm -f "$out" "$cutfile"
done
# Per trial: each sender's failover line gives how long the path had been without progress when it
# was judged, and how long the communicator paused; summarised over every failover line.
summary() {  # summary WHAT REGEX
  sed -n "s/.*$2 \([0-9.]*\) ms.*/\1/p" "$all" | sort -n |
    awk -v w="$1" '{ v[NR] = $1 } END { if (NR) printf "SUMMARY %s n=%d median=%.1f ms max=%.1f ms\n", w, NR, v[int((NR + 1) / 2)], v[NR] }'
}
summary "detected_after" "detected after"
summary "paused" "paused"
grep -o "carrier lost\|no acknowledgement\|async event IBV_EVENT_[A-Z_]*\|send failed[^;(]*\|receive failed[^;(]*" "$all" | sort | uniq -c | sed 's/^/CAUSES /'
pct() {  # pct FIELD: median and p99 (nearest rank) of a TRIAL field
  sed -n "s/.* $1=\([0-9.]*\)\( .*\)\?$/\1/p" "$per_trial" | sort -n |
    awk -v w="$1" '{ v[NR] = $1 } END { if (NR) { r = int(0.99 * NR); if (r < 0.99 * NR) r++; printf "SUMMARY %s n=%d median=%.1f ms p99=%.1f ms max=%.1f ms\n", w, NR, v[int((NR + 1) / 2)], v[r], v[NR] } }'
}
pct detect_ms
pct backup_ms
pct silent_plus_pause_ms
pct cut_window_ms
echo "SUMMARY trials=$trials exact=$((trials - failed)) causes: $(sed -n 's/.* cause=\([a-z]*\) .*/\1/p' "$per_trial" | sort | uniq -c | tr -s ' \n' ' ')"
rm -f "$all" "$per_trial"
[ "$failed" -eq 0 ] || fail "$failed of $trials trial(s) did not finish exactly"
"$fixture" down
pass "port down over verbs: the job finished exactly on the other port"
