// Per-path liveness: finds a path that silently stopped delivering (TCP_INFO) or lost its carrier (rtnetlink).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/stream_path.h"

namespace ff {

// kSilent: the relative rule - silent while another path of the connection is acknowledged. It is
// acted on at once but not trusted alone: the path's data is re-sent and the path drained, and only
// the absolute rule (kStalled) or a hard signal declares it dead.
enum class PathFault { kNone, kStalled, kCarrierLost, kSocketError, kPeerReported, kRetransmits, kSilent };
// Soft faults move traffic away from a path (drain) instead of killing it.
inline bool IsSoftFault(PathFault f) { return f == PathFault::kRetransmits; }
const char* PathFaultName(PathFault f);

struct PathFaultReport {
  int path = -1;
  PathFault cause = PathFault::kNone;
  uint64_t silent_ns = 0;  // how long the path had made no progress when it was declared dead
  std::string detail;      // kernel evidence for the log line
};

// What the kernel says about one TCP socket; filled by a TCP_INFO probe (or by tests).
struct TcpProgress {
  bool valid = false;
  uint32_t unacked_segments = 0;  // sent, not yet acknowledged
  uint64_t bytes_acked = 0;       // cumulative, grows with every new acknowledgement
  uint32_t ms_since_ack = 0;      // kernel's age of the last acknowledgement (jiffy resolution)
  uint32_t retransmits = 0;
  uint32_t rto_us = 0;
  uint64_t segs_out = 0;  // segments sent, retransmissions included
  uint32_t rtt_us = 0;    // smoothed round-trip time
  uint32_t sacked = 0;    // segments the peer holds out of order (selective acknowledgements)
  uint8_t ca_state = 0;   // congestion-avoidance state (TCP_CA_*): 3 = fast recovery
};
TcpProgress ProbeTcp(int fd);

// Samples the paths of one communicator. A path is stalled when the kernel has two or more segments
// in flight on it and no acknowledgement at all (neither cumulative progress nor a duplicate/SACK) has arrived
// for `stall_ns`. Only kernel counters are compared, so a proxy thread that was descheduled for a
// while never mistakes its own absence for a dead link.
class PathWatchdog {
 public:
  PathWatchdog(uint64_t stall_ns, bool carrier_events, uint64_t fast_stall_ns = 0)
      : stall_ns_(stall_ns), carrier_events_(carrier_events), fast_stall_ns_(fast_stall_ns) {}

  // Soft signal: retransmissions rose in a window of kSoftWindowNs; kSoftDetections such windows on
  // one path within kSoftSpanNs (the oracle's link-health debounce: 3 within 500 ms) degrade it.
  static constexpr uint64_t kSoftWindowNs = 50'000'000;
  static constexpr uint64_t kSoftSpanNs = 500'000'000;
  static constexpr int kSoftDetections = 3;
  // A drained path returns after this long without a new retransmission; each repeated drain
  // doubles the wait (up to 16x), so a path that stays lossy is probed ever more rarely.
  static constexpr uint64_t kFailbackNs = 500'000'000;
  // Feeds one retransmit counter sample; true when the debounce rule declares the path degraded.
  bool JudgeSoft(int path, uint32_t retransmits, uint64_t now_ns, PathFaultReport* out);
  // Whether a drained path has been clean long enough to carry traffic again.
  bool ReadyToReadmit(int path, uint64_t now_ns) const;
  void NoteDrained(int path, uint64_t now_ns);
  void NoteReadmitted(int path);
  // A reconnected path starts with a clean history.
  void ResetPath(int path);

  bool enabled() const { return stall_ns_ > 0 || carrier_events_; }
  // Looks at each live path at most once per sample interval; true and *out filled for the first
  // failed path found. `probe` is injectable so the decision logic is tested without sockets.
  bool Check(const std::vector<std::unique_ptr<StreamPath>>& paths, uint64_t now_ns, PathFaultReport* out);
  // The decision for one path given a fresh sample; public for tests.
  bool Judge(int path, const TcpProgress& tp, uint64_t now_ns, PathFaultReport* out);
  // Relative rule, for a link that dies silently (a cut behind a switch): after `fast_stall_ns` of
  // silence (or 8 of the path's measured round trips, if longer: a live peer answers within one), a path whose peer is not recovering a loss (no selective acknowledgements) is dead when
  // another path of the same connection had its cumulative acknowledgement advance meanwhile - the
  // peer and this host's stack are evidently working, so the silence is this path's. A host too
  // busy to process acknowledgements stalls every path alike and never triggers it.
  bool JudgeRelative(int path, uint64_t now_ns, PathFaultReport* out);
  // Time since path `i` last showed progress (0 if never sampled).
  uint64_t SilentFor(int path, uint64_t now_ns) const;

  static constexpr uint64_t kSampleNs = 1'000'000;
  static constexpr uint8_t kCaRecovery = 3;  // TCP_CA_Recovery

 private:
  struct State {
    int ifindex = -1;  // -1: not resolved yet, 0: unknown
    uint64_t bytes_acked = 0;
    uint64_t last_progress_ns = 0;
    uint64_t last_advance_ns = 0;  // last time the cumulative acknowledgement moved
    uint32_t unacked = 0;          // from the last sample
    uint32_t ms_since_ack = 0;
    uint32_t rtt_us = 0;           // smoothed round trip from the last sample
    bool recovering = false;       // the last sample showed SACKs or fast recovery
    bool alive = false;            // sampled in the current round
    // soft (retransmit) tracking
    bool retrans_seen = false;
    uint32_t retrans = 0;
    uint64_t window_start_ns = 0;
    bool window_dirty = false;
    uint64_t detections[kSoftDetections] = {};
    int ndetections = 0;
    uint64_t last_retrans_ns = 0;
    uint64_t drained_ns = 0;
    int drains = 0;
  };
  State& StateOf(int path);

  uint64_t stall_ns_;
  bool carrier_events_;
  uint64_t fast_stall_ns_;
  uint64_t last_sample_ns_ = 0;
  uint64_t link_generation_ = ~uint64_t{0};
  std::vector<State> states_;
};

}  // namespace ff
