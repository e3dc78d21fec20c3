#include "sla/sla_level.h"

#include <cmath>

namespace ff::sla {

std::string SlaLevelPolicy::Validate() const {
  if (level1_below_ns == 0) return "the Level 1 threshold must be above 0";
  if (level2_up_to_ns < level1_below_ns) return "the Level 2 upper bound must not be below the Level 1 threshold";
  if (!(level3_bandwidth_cap > 0.0 && level3_bandwidth_cap <= 1.0))
    return "the Level 3 bandwidth cap must be in (0, 1]";
  return {};
}

SlaLevel ClassifySla(std::optional<uint64_t> latency_ns, const SlaLevelPolicy& policy) {
  if (!latency_ns) return SlaLevel::kLevel3;
  if (*latency_ns < policy.level1_below_ns) return SlaLevel::kLevel1;
  if (*latency_ns <= policy.level2_up_to_ns) return SlaLevel::kLevel2;
  return SlaLevel::kLevel3;
}

LevelPermits PermitsFor(SlaLevel level, const SlaLevelPolicy& policy) {
  switch (level) {
    case SlaLevel::kLevel1:
      return {MaxTier::kSingleHop, 1.0};
    case SlaLevel::kLevel2:
      return {MaxTier::kCrossLeafNoTop, 1.0};
    case SlaLevel::kLevel3:
      break;
  }
  return {MaxTier::kAny, policy.level3_bandwidth_cap};
}

const char* SlaLevelName(SlaLevel level) {
  switch (level) {
    case SlaLevel::kLevel1:
      return "level1";
    case SlaLevel::kLevel2:
      return "level2";
    case SlaLevel::kLevel3:
      break;
  }
  return "level3";
}

const char* MaxTierName(MaxTier tier) {
  switch (tier) {
    case MaxTier::kSingleHop:
      return "single-hop";
    case MaxTier::kCrossLeafNoTop:
      return "cross-leaf-no-top-tier";
    case MaxTier::kAny:
      break;
  }
  return "any";
}

}  // namespace ff::sla
