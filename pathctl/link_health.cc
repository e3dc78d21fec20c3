// Link health state machine (see link_health.h for the rules).
#include "pathctl/link_health.h"

namespace ff::pathctl {

LinkHealthTracker::LinkHealthTracker(size_t links, const Clock& clock, HealthPolicy policy)
    : clock_(clock), policy_(policy), links_(links) {}

bool LinkHealthTracker::IsSoftProblem(const HealthSignal& s) const {
  if (s.kind == HealthSignalKind::kFecErrorRate) return s.value > policy_.fec_error_rate_threshold;
  if (s.kind == HealthSignalKind::kLoss) return s.value > policy_.loss_threshold;
  if (s.kind == HealthSignalKind::kErrorCounters) return s.value > 0;
  return false;
}

std::optional<HealthTransition> LinkHealthTracker::Report(uint32_t link, HealthSignal signal) {
  if (link >= links_.size()) return std::nullopt;
  Entry& e = links_[link];
  const auto now = clock_.Now();
  const LinkState before = e.state;
  switch (signal.kind) {
    case HealthSignalKind::kCarrierDown:
      e.carrier = false;
      e.last_bad = now;
      e.state = LinkState::kDown;
      break;
    case HealthSignalKind::kCarrierUp:
      // Recovery clock starts now; Tick() brings the link back once it stayed clean.
      if (!e.carrier) e.last_bad = now;
      e.carrier = true;
      break;
    case HealthSignalKind::kFecErrorRate:
    case HealthSignalKind::kLoss:
    case HealthSignalKind::kErrorCounters:
      if (!IsSoftProblem(signal)) break;
      e.last_bad = now;
      e.detections.push_back(now);
      while (!e.detections.empty() && now - e.detections.front() > policy_.soft_window) e.detections.pop_front();
      if (e.state == LinkState::kUp && static_cast<int>(e.detections.size()) >= policy_.soft_detections) {
        e.state = LinkState::kDegraded;
        e.detections.clear();
      }
      break;
    case HealthSignalKind::kClean:
      break;
  }
  if (e.state == before) return std::nullopt;
  return HealthTransition{link, before, e.state};
}

std::vector<HealthTransition> LinkHealthTracker::Tick() {
  std::vector<HealthTransition> out;
  const auto now = clock_.Now();
  for (uint32_t i = 0; i < links_.size(); ++i) {
    Entry& e = links_[i];
    if (e.state == LinkState::kUp || !e.carrier) continue;
    if (now - e.last_bad >= policy_.recovery_stable) {
      out.push_back({i, e.state, LinkState::kUp});
      e.state = LinkState::kUp;
      e.detections.clear();
    }
  }
  return out;
}

}  // namespace ff::pathctl
