// Per-path liveness rules over neutral path samples (core/path.h): a path that silently stopped delivering,
// lost its carrier, reports an error, or loses data. Every transport is judged by the same rules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/path.h"

namespace ff {

// kSilent: the relative rule - silent while another path of the connection is acknowledged. It is
// acted on at once but not trusted alone: the path's data is re-sent and the path drained, and only
// the absolute rule (kStalled) or a hard signal declares it dead.
// kRouteFate: silent since another path on the same route failed (JudgeRouteFate); handled like kSilent.
enum class PathFault { kNone, kStalled, kCarrierLost, kSocketError, kPeerReported, kRetransmits, kSilent, kRouteFate };
// Faults that hedge (drain and re-send, the verdict left to the absolute rule) rather than kill.
inline bool IsHedgeFault(PathFault f) { return f == PathFault::kSilent || f == PathFault::kRouteFate; }
// Soft faults move traffic away from a path (drain) instead of killing it.
inline bool IsSoftFault(PathFault f) { return f == PathFault::kRetransmits; }
const char* PathFaultName(PathFault f);

struct PathFaultReport {
  int path = -1;
  PathFault cause = PathFault::kNone;
  uint64_t silent_ns = 0;  // how long the path had made no progress when it was declared dead
  int err = 0;             // kSocketError: the transport's errno
  bool idle = false;       // kRouteFate: the path holds nothing unacknowledged (drain it, nothing to re-send)
  std::string detail;      // kernel evidence for the log line
};

// Whether a path that failed so condemns its route (the switch-to-switch links under it) and not
// only its own transport or NIC: nothing acknowledged for the absolute limit, or an error naming the
// route (network/host unreachable or down, the transport's own retransmission timeout). A reset or a
// refused connection says the far end answered, so the route works; a lost carrier is the NIC's own
// link, which the route's fabric links leave out.
bool IsRouteFailure(PathFault cause, int err);


// Samples the paths of one communicator. A path is stalled when the kernel has two or more segments
// in flight on it and no acknowledgement at all (neither cumulative progress nor a duplicate/SACK) has arrived
// for `stall_ns`. Only kernel counters are compared, so a proxy thread that was descheduled for a
// while never mistakes its own absence for a dead link.
class PathWatchdog {
 public:
  PathWatchdog(uint64_t stall_ns, bool carrier_events, uint64_t fast_stall_ns = 0)
      : stall_ns_(stall_ns), carrier_events_(carrier_events), fast_stall_ns_(fast_stall_ns) {}

  // Soft signal. Every kSoftWindowNs the connection's paths close a window together; a path's span is
  // its last kSoftSpanWindows windows (500 ms). A path is lossy when its span holds at least
  // kSoftMinSegments segments, it lost at least `loss_ratio` of them (retransmissions the peer did
  // not report as duplicates), and - when another path's span can be compared - at least twice that
  // path's ratio plus half the threshold, and the loss is spread over kSoftLossyWindows windows or more.
  // kSoftDetections lossy closes in a row degrade it (one: the span already spans 10 windows).
  // Why these numbers (measured on the fabric emulator, 2 cores, 4 ranks, 1-64 MiB collectives):
  // a healthy path retransmits now and then (tail-loss probes, fast retransmissions after
  // reordering between the CPUs' backlogs) and the peer reports nearly every copy as a duplicate,
  // often within the same window: those reports are credited to the retransmissions they follow,
  // wherever in the span they land. Counted so, a healthy span's loss stayed at or below 0.04%
  // (60 s of the quiet scenario, idle and with two busy loops beside it); crediting each window's
  // reports only to the window before had once counted 95% of them as loss and drained a healthy
  // path at 0.67%. 1% loss on a link shows 1.2-1.5%, and a window of ~270 offload packets escapes
  // 1% loss with probability 0.99^270 = 7%: loss in 6 of the 10 windows, at 0.5% or more, separates
  // the two, and detects 1% loss in about 350 ms (6 windows, judged one late). Asking for 7 windows
  // and two lossy closes in a row detected it 484-613 ms after the loss was in force (4 runs), the
  // second close adding nothing a 10-window span does not already debounce.
  // Heavy loss (2% and more at the default) needs 3 windows: no healthy span came near it.
  // Reordering does not excuse a window: the lossy path reorders in nearly every window too.
  static constexpr uint64_t kSoftWindowNs = 50'000'000;
  static constexpr int kSoftSpanWindows = 10;
  static constexpr int kSoftDetections = 1;
  static constexpr uint64_t kSoftMinSegments = 20000;
  static constexpr int kSoftLossyWindows = 6;
  static constexpr int kSoftHeavyLossyWindows = 3;  // for a span that lost 4x the threshold or more
  static constexpr uint32_t kDefaultLossPpm = 5000;
  void set_loss_ratio(double r) { loss_ratio_ = r; }
  double loss_ratio() const { return loss_ratio_; }
  // Feeds one path's cumulative counters (TCP_INFO) for the current window.
  void SampleSoft(int path, const PathSample& tp);
  // Closes the window once kSoftWindowNs have passed; true and *out filled for the first path (not
  // draining) that the debounce declares degraded.
  bool CloseSoftWindow(uint64_t now_ns, uint64_t draining_mask, PathFaultReport* out);
  // A drained path returns after this long without a lossy window; each repeated drain doubles the
  // wait (up to 16x), so a path that stays lossy is probed ever more rarely.
  static constexpr uint64_t kFailbackNs = 500'000'000;
  // Whether a drained path has been clean long enough to carry traffic again.
  bool ReadyToReadmit(int path, uint64_t now_ns) const;
  void NoteDrained(int path, uint64_t now_ns);
  void NoteReadmitted(int path);
  // A reconnected path starts with a clean history.
  void ResetPath(int path);

  bool enabled() const { return stall_ns_ > 0 || carrier_events_; }
  // Looks at each live path at most once per sample interval; true and *out filled for the first
  // failed path found. `probe` is injectable so the decision logic is tested without sockets.
  bool Check(const std::vector<std::unique_ptr<Path>>& paths, uint64_t now_ns, PathFaultReport* out);
  // The decision for one path given a fresh sample; public for tests.
  bool Judge(int path, const PathSample& tp, uint64_t now_ns, PathFaultReport* out);
  // The relative rule's silence limit: FLEXIFORCE_PATH_STALL_FAST_MS, 8 round trips, kAckGapMargin
  // times the longest healthy acknowledgement gap this process saw lately, the CPU-pressure allowance
  // (RelativePressureAllowance)
  // or TCP's tail-loss probe time (TailProbeAllowance), whichever is longest. A
  // healthy but busy host (2 cores, ranks and softirqs competing) lets one connection's
  // acknowledgements lag 10-70 ms while another's flow; on an idle host gaps stay ~1 ms and the limit
  // stays at the configured 10 ms.
  uint64_t RelativeLimit(uint32_t rtt_us, uint64_t now_ns) const;
  // TCP's tail-loss probe. When the last segments of a flight are lost (a full switch queue drops
  // them; healthy congestion does this), nothing - not even a duplicate or selective acknowledgement
  // - comes back until the sender's probe timer fires and the probe is answered. Linux arms that
  // timer at twice the smoothed round trip plus two kernel ticks (more than one segment in flight),
  // rounds it up to whole ticks and fires it on a tick: at CONFIG_HZ=250 (Debian's kernels) that is
  // 12-16 ms of silence on a healthy path, past the 10 ms floor. The emulator's quiet scenario hedged
  // healthy paths on silences of 12-17 ms this way in 3 of 25 short runs, each early in a process
  // (before its acknowledgement-gap history had learned any). The relative limit is at least this
  // allowance: four round trips and five ticks - the timer's 2 RTT, rounded up to a tick, plus its 2
  // ticks; the tick it fires on; the probe's answer (an RTT); the last transmission, which arms the
  // timer, up to an RTT after the last acknowledgement (pacing); and TCP_INFO's last-acknowledgement
  // age, counted in ticks. 3 RTT + 4 ticks still let a 26 ms silence through (limit 25 ms, a 2-rank
  // AllReduce on the emulator, 3 ms RTT). A silent cut is then found in ~24 ms instead of 10 at
  // HZ=250 (with a topology file route fate finds a cut's silent direction in 3-6 ms); at HZ=1000
  // (9 ms at a 1 ms RTT) the floor still rules.
  static uint64_t TailProbeAllowance(uint32_t rtt_us);
  // The kernel's tick, 1/CONFIG_HZ: the resolution of CLOCK_MONOTONIC_COARSE (clamped to 1-10 ms).
  static uint64_t KernelTickNs();
  static void OverrideKernelTickForTest(uint64_t ns);  // 0: the kernel's again
  static constexpr uint64_t kAckGapMargin = 3;
  // On an oversubscribed host (Linux PSI: tasks waited for a CPU kPressureFloor of the last 10 s or
  // more) the softirq work that acknowledges one connection can lag behind another's, which from
  // TCP_INFO looks like a silent cut: the limit grows with the pressure. Healthy silences seen under
  // load: 11-41 ms while another path flowed, the 41 ms one at ~80% pressure (the 4-rank emulator on
  // 2 cores: PSI avg10 43-82% over a 60 s run, not saturated), where the old 50 ms scale allowed only
  // 40 ms; then 78 ms at 77% (below). PSI cannot tell the job's own busy-polling ranks from other load,
  // so a silent cut on such a host is found in at most pressure x kRelativePressureScaleNs instead of
  // 10 ms. The absolute rule waits at least three times PressureAllowance (pressure x 100 ms). On a
  // host with spare CPUs (< 5%) nothing changes, and up to ~6% the 10 ms floor still rules.
  static constexpr double kPressureFloor = 0.05;
  static constexpr uint64_t kPressureScaleNs = 100'000'000;
  static uint64_t PressureAllowance(uint64_t now_ns);
  // The relative rule's own pressure term, pressure x kRelativePressureScaleNs: the quiet scenario
  // later hedged a healthy path silent for 78 ms at 77% pressure (one of 4 clean 60 s runs; limit
  // 77 ms) while the other path's bulk data was acknowledged. 150 ms gives that silence half as much
  // again; a silent cut on a saturated host is found in at most 150 ms. The absolute rule and the
  // re-send timeout keep PressureAllowance's scale.
  static constexpr uint64_t kRelativePressureScaleNs = 150'000'000;
  static uint64_t RelativePressureAllowance(uint64_t now_ns);
  static constexpr uint64_t kAckGapFloorNs = 2'000'000;        // shorter gaps are sampling noise
  static constexpr uint64_t kAckGapCeilingNs = 1'000'000'000;  // longer ones are outages, not delays
  static constexpr uint64_t kAckGapHalfLifeNs = 10'000'000'000ull;
  static constexpr uint64_t kAckGapSampleSpacingNs = 5'000'000;  // samples closer than this watch a gap
  // Process-wide history of healthy gaps (what a gap ending in progress looked like).
  static void NoteHealthyAckGap(uint64_t gap_ns, uint64_t now_ns);
  static uint64_t RecentAckGap(uint64_t now_ns);
  static void ResetAckGapHistory();  // tests
  // Relative rule, for a link that dies silently (a cut behind a switch): after `fast_stall_ns` of
  // silence (or 8 of the path's measured round trips, if longer: a live peer answers within one), a path whose peer is not recovering a loss (no selective acknowledgements) is dead when
  // another path of the same connection had its cumulative acknowledgement advance meanwhile - the
  // peer and this host's stack are evidently working, so the silence is this path's. A host too
  // busy to process acknowledgements stalls every path alike and never triggers it.
  bool JudgeRelative(int path, uint64_t now_ns, PathFaultReport* out);
  // The relative rule's witness is another path acknowledged during the silence. When every other
  // path is idle (nothing in flight, so nothing to acknowledge) there is none, and a silent cut
  // waited for the absolute rule (100 ms and more). Once a path has been silent for a quarter of the
  // relative limit, this names an idle path in `usable_mask` to send a small frame on: the peer's
  // kernel acknowledges it within a round trip, and that acknowledgement is the witness (it arrives
  // after the silence began, as the rule demands). -1 when none is wanted. At most one frame per
  // idle path per half limit, so a path silent for long costs a few small frames. Evidence asked for
  // this way (an idle path's acknowledgement) counts only after twice the relative limit (JudgeRelative).
  int WitnessWanted(uint64_t now_ns, uint64_t usable_mask);
  // Route fate. A path that failed in a way that condemns its route (IsRouteFailure) has its fabric
  // links (Path::route, the switch-to-switch links under it) recorded process-wide
  // (RecordRouteFailure); every other path of this process crossing one of them - the reverse
  // direction of the same cut, the next hop of a ring over the same spine - is then suspect.
  // JudgeRouteFate flags such a path (kRouteFate) when it is not recovering a loss and has received no
  // acknowledgement since the latest failure recorded on its links (by the kernel's clock, give or
  // take a jiffy):
  //   - with two or more segments unacknowledged, once it has been silent for kRouteFateSilenceNs
  //     (or 4 round trips, if longer): hedged like kSilent (re-sent elsewhere and drained, never
  //     killed on this evidence alone);
  //   - idle (fewer than two in flight) and every one of its links recorded: at once, with `idle`
  //     set. Nothing is stuck on it yet, but new chunks must go elsewhere (the communicator drains it
  //     and asks it for an acknowledgement, which only a working route returns).
  // On the emulator's spine cut one direction sees an ICMP error within ~2 ms while the other sees
  // only silence, which the relative rule, scaled to this host's healthy acknowledgement lag, judged
  // after 30-110 ms; the failure recorded by the first direction (at this host, or at the peer, which
  // says so over a surviving path: PathEvent::kRouteDown) convicts the second within a few ms. Off
  // with the relative rule (FLEXIFORCE_PATH_STALL_FAST_MS=0).
  // A link's failure is forgotten when a path crossing it shows it works again - its acknowledgement
  // advanced, received more than kRouteAliveMarginNs after the failure (NoteRouteAlive), or failback connected a path over it, or a drained path answered its
  // probe (ClearRouteFailure) - and in any case after kRouteFailureWindowNs.
  static constexpr uint64_t kRouteFateSilenceNs = 3'000'000;
  static constexpr uint64_t kRouteFailureWindowNs = 10'000'000'000ull;
  static constexpr uint64_t kRouteAliveMarginNs = 20'000'000;
  static void RecordRouteFailure(const RouteLinks& route, uint64_t now_ns);
  static void ClearRouteFailure(const RouteLinks& route);
  static void NoteRouteAlive(const RouteLinks& route, uint64_t advance_ns);
  // The latest failure within kRouteFailureWindowNs recorded on any of `route`'s links (`every`: only
  // when all of them have one); 0: none.
  static uint64_t RouteFailedAt(const RouteLinks& route, uint64_t now_ns, bool every = false);
  static void ResetRouteFailures();  // tests
  bool JudgeRouteFate(int path, const RouteLinks& route, uint64_t now_ns, PathFaultReport* out);
  // When a sample last saw path `i`'s cumulative acknowledgement advance (0: never).
  uint64_t LastAdvanceNs(int path) const;
  // Time since path `i` last showed progress (0 if never sampled).
  uint64_t SilentFor(int path, uint64_t now_ns) const;
  // Smoothed round trip of path `i` at its last sample (0 if never sampled).
  uint32_t LastRttUs(int path) const;

  static constexpr uint64_t kSampleNs = 1'000'000;
  static constexpr uint8_t kCaRecovery = 3;  // TCP_CA_Recovery

 private:
  struct SoftCounters {
    uint32_t retrans = 0;
    uint32_t dsacks = 0;
    uint32_t reord = 0;
    uint64_t segs = 0;
  };
  struct SoftWindow {
    uint64_t lost = 0;
    uint64_t segs = 0;
  };
  static constexpr size_t kMaxPaths = 64;
  struct State {
    int ifindex = -1;  // -1: not resolved yet, 0: unknown
    uint64_t bytes_acked = 0;
    uint64_t last_progress_ns = 0;
    uint64_t last_advance_ns = 0;  // last time the cumulative acknowledgement moved
    uint64_t last_busy_advance_ns = 0;  // ... while two or more segments were in flight (bulk data)
    uint64_t last_sample_ns = 0;
    uint32_t unacked = 0;          // from the last sample
    uint32_t ms_since_ack = 0;
    uint32_t rtt_us = 0;           // smoothed round trip from the last sample
    bool recovering = false;       // the last sample showed SACKs or fast recovery
    bool window_known = false;     // the last sample's flow-control figures (PathSample)
    uint32_t peer_window = 0;
    uint64_t in_flight_bytes = 0;
    uint32_t mss = 0;
    // The right edge of the peer's window (acknowledged bytes + advertised window) moves only as the
    // peer's application frees receive space: when it last moved, and the acknowledged bytes then.
    uint64_t right_edge = 0;
    uint64_t edge_advance_ns = 0;
    uint64_t acked_at_edge_advance = 0;
    bool alive = false;            // sampled in the current round
    // soft (loss ratio) tracking: counters at the start of the previous and current windows, and now
    bool soft_seen = false;
    bool soft_sampled = false;  // sampled in the current window
    bool have_prev = false;     // the previous window was sampled too
    SoftCounters prev, cur, now;
    SoftWindow span[kSoftSpanWindows] = {};
    int span_len = 0;
    int span_next = 0;
    uint64_t dsack_credit = 0;  // duplicate reports kept for the retransmissions of the window after
    int soft_streak = 0;  // consecutive lossy closes
    uint64_t last_retrans_ns = 0;
    uint64_t drained_ns = 0;
    int drains = 0;
    uint64_t witness_ns = 0;  // when a witness frame was last asked for on this (idle) path
  };
  State& StateOf(int path);
  // When the kernel last received an acknowledgement on the path, from its last sample (the age has
  // jiffy granularity: up to kAckAgeSlackNs off).
  static uint64_t AckReceivedNs(const State& s);
  static constexpr uint64_t kAckAgeSlackNs = 5'000'000;

  uint64_t stall_ns_;
  bool carrier_events_;
  uint64_t fast_stall_ns_;
  uint64_t last_sample_ns_ = 0;
  uint64_t link_generation_ = ~uint64_t{0};
  double loss_ratio_ = kDefaultLossPpm / 1e6;
  uint64_t soft_window_start_ns_ = 0;
  std::vector<State> states_;
};

}  // namespace ff
