#include "sla/pacing.h"

namespace ff::sla {

PacingDecision DecidePacing(const PacingInputs& in) {
  PacingDecision d;
  if (!in.steer) {
    d.reason = "observe only";
    return d;
  }
  if (in.level != SlaLevel::kLevel3) {
    d.reason = "level 1/2 is never paced";
    return d;
  }
  if (in.level3_cap_pct <= 0 || in.level3_cap_pct >= 100) {
    // A cap at or above line rate would only add pacing jitter.
    d.reason = "level-3 cap is 100% (off)";
    return d;
  }
  if (in.link_mbps <= 0) {
    d.reason = "link speed unknown (set FLEXIFORCE_LINK_SPEED_MBPS)";
    return d;
  }
  const uint64_t link_bytes_per_s = static_cast<uint64_t>(in.link_mbps) * 1'000'000 / 8;
  d.connection_bytes_per_s = link_bytes_per_s * static_cast<uint64_t>(in.level3_cap_pct) / 100;
  const uint64_t n = in.npaths > 0 ? static_cast<uint64_t>(in.npaths) : 1;
  d.path_bytes_per_s = d.connection_bytes_per_s / n;
  if (d.path_bytes_per_s == 0) d.path_bytes_per_s = 1;  // 0 would mean "unpaced" to the socket layer
  d.reason = "level 3 capped";
  return d;
}

}  // namespace ff::sla
