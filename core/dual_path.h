// Dual-path canary: before traffic leaves a degraded path, or returns to a reconnected one, compare the paths.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/path_health.h"

namespace ff {

// What one path did during the comparison window (deltas of its TCP counters).
struct PathWindow {
  bool valid = false;
  uint64_t segs_out = 0;
  uint64_t retrans = 0;
  uint32_t rtt_us = 0;  // lowest smoothed RTT seen during the window (at its end if none was observed)
  double loss() const { return segs_out == 0 ? 0.0 : static_cast<double>(retrans) / static_cast<double>(segs_out); }
};

struct DualPathVerdict {
  bool subject_worse = false;
  bool conclusive = true;  // false: a side carried too little traffic, subject_worse is the caller's default
  std::string why;  // the numbers behind the verdict, for the log line
};

// The subject is worse when it lost clearly more (2x the best other path's retransmission ratio
// plus 1 point: a healthy TCP path retransmits a few tenths of a percent in tail-loss probes, and
// losses come in bursts, so two equally lossy paths differ by that much in a short window), and the
// difference is significant (z >= kLossZ in a two-proportion test that counts loss events, not
// segments: one dropped packet under segmentation offload takes up to kSegmentsPerLossEvent
// segments with it, so 20,000 segments are only ~450 independent chances to lose), or its
// round trip stayed clearly longer (its lowest smoothed RTT in the window 3x and 5 ms above the best
// other path's: one sample is not evidence - a reconnected path's first burst, or a rank descheduled
// for a few ms on a busy host, lifts a single srtt reading 10x for a moment).
// A subject that sent fewer than kMinSegments gives no evidence: `assume_worse` decides.
DualPathVerdict JudgeDualPath(const PathWindow& subject, const PathWindow& best_other, bool assume_worse);
constexpr double kSegmentsPerLossEvent = 45;  // a 64 KiB GSO packet of 1448-byte segments
// One-sided 3.5 sigma: a false move once in ~4,000 comparisons of equally lossy paths, where the
// ratio rule alone moved in ~1 of 70 on the emulator (both NICs at 3% loss: 4.54% vs 1.73%).
constexpr double kLossZ = 3.5;

// One comparison at a time per communicator. Start() snapshots every live path; Finish() (after the
// window) takes the deltas and judges the subject against the best other usable path.
class DualPathCompare {
 public:
  enum class Kind { kLeave, kReturn };  // degraded path about to lose traffic / reconnected path on probation
  // TCP counts MSS-sized segments, but a link drops whole packets, which under segmentation
  // offload carry up to ~45 of them: a window needs this many segments to say anything about loss.
  static constexpr uint64_t kMinSegments = 20000;

  bool active() const { return active_; }
  int subject() const { return subject_; }
  Kind kind() const { return kind_; }
  bool Due(uint64_t now_ns) const { return active_ && now_ns >= until_ns_; }
  void Start(int subject, Kind kind, uint64_t now_ns, uint64_t window_ns,
             const std::vector<std::unique_ptr<Path>>& paths);
  DualPathVerdict Finish(const std::vector<std::unique_ptr<Path>>& paths);
  void Cancel() { active_ = false; }
  // One smoothed-RTT reading of path `path` during the window (the watchdog samples every path each
  // millisecond); the judged RTT is the lowest one.
  void ObserveRtt(int path, uint32_t rtt_us) {
    if (!active_ || rtt_us == 0 || path < 0 || static_cast<size_t>(path) >= min_rtt_.size()) return;
    uint32_t& m = min_rtt_[static_cast<size_t>(path)];
    if (m == 0 || rtt_us < m) m = rtt_us;
  }
  // Windows already spent on this comparison without enough traffic to judge.
  int extensions() const { return extensions_; }
  // Starts another window for the same subject (the last one was inconclusive).
  void Extend(uint64_t now_ns, uint64_t window_ns, const std::vector<std::unique_ptr<Path>>& paths);
  static constexpr int kMaxExtensions = 4;

 private:
  bool active_ = false;
  int subject_ = -1;
  Kind kind_ = Kind::kLeave;
  uint64_t until_ns_ = 0;
  int extensions_ = 0;
  std::vector<PathSample> start_;
  std::vector<uint32_t> min_rtt_;  // 0: nothing observed yet
};

}  // namespace ff
