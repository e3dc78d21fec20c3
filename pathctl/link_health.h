// Per-link health state machine: hard signals act at once, soft ones after debouncing, and a
// link returns to service only after a stable period.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "pathctl/topology.h"

namespace ff::pathctl {

enum class HealthSignalKind : uint8_t {
  kCarrierDown,  // hard: the link is down now
  kCarrierUp,    // carrier is back; the link recovers after the stable period
  kFecErrorRate, // soft when value > fec_error_rate_threshold
  kLoss,         // soft when value (loss fraction) > loss_threshold
  kClean,        // an observation with nothing wrong (lets callers feed periodic samples)
  kErrorCounters,  // soft when value > 0: the caller already judged its counters against its
                   // own thresholds (NicHealthMonitor: FEC, CRC, RDMA, PCIe) and saw a problem
};

struct HealthSignal {
  HealthSignalKind kind = HealthSignalKind::kClean;
  double value = 0;
};

struct HealthPolicy {
  double fec_error_rate_threshold = 1e-6;
  double loss_threshold = 0.0;  // any loss counts
  int soft_detections = 3;      // detections on one link ...
  std::chrono::nanoseconds soft_window = std::chrono::milliseconds(500);  // ... within this window
  std::chrono::nanoseconds recovery_stable = std::chrono::milliseconds(2000);
};

struct HealthTransition {
  uint32_t link;
  LinkState from;
  LinkState to;
};

class LinkHealthTracker {
 public:
  LinkHealthTracker(size_t links, const Clock& clock, HealthPolicy policy = {});

  // Feeds one observation; returns the transition it caused, if any.
  std::optional<HealthTransition> Report(uint32_t link, HealthSignal signal);
  // Moves links whose stable period has elapsed back to up; call periodically.
  std::vector<HealthTransition> Tick();

  LinkState state(uint32_t link) const { return links_[link].state; }
  const HealthPolicy& policy() const { return policy_; }

 private:
  struct Entry {
    LinkState state = LinkState::kUp;
    bool carrier = true;
    std::deque<std::chrono::nanoseconds> detections;  // soft detections inside the window
    std::chrono::nanoseconds last_bad{0};             // last hard or soft problem
  };
  bool IsSoftProblem(const HealthSignal& s) const;

  const Clock& clock_;
  HealthPolicy policy_;
  std::vector<Entry> links_;
};

}  // namespace ff::pathctl
