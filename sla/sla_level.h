// SLA levels: which paths and how much bandwidth a job's latency SLA permits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ff::sla {

enum class SlaLevel : uint8_t { kLevel1 = 1, kLevel2 = 2, kLevel3 = 3 };

// The highest fabric tier a path may climb.
enum class MaxTier : uint8_t {
  kSingleHop,        // same leaf (one switch hop) or NVLink-direct
  kCrossLeafNoTop,   // may cross leaves (ToRs) through the aggregation tier, never the top tier
  kAny,              // any path
};

// Thresholds and the Level-3 cap are knobs (FLEXIFORCE_SLA_*), defaults from the source article.
struct SlaLevelPolicy {
  uint64_t level1_below_ns = 50'000;     // SLA < 50 us -> Level 1
  uint64_t level2_up_to_ns = 100'000;    // 50 us <= SLA <= 100 us -> Level 2; above -> Level 3
  double level3_bandwidth_cap = 0.80;    // fraction of link rate Level 3 traffic is paced to

  // Empty when consistent, else what is wrong (thresholds out of order, cap outside (0, 1]).
  std::string Validate() const;
};

struct LevelPermits {
  MaxTier max_tier;
  double bandwidth_cap;  // fraction of the link rate; 1.0 means unpaced
};

// No SLA declared means Level 3: the job asked for nothing, so it gets any path and is paced.
SlaLevel ClassifySla(std::optional<uint64_t> latency_ns, const SlaLevelPolicy& policy = {});

LevelPermits PermitsFor(SlaLevel level, const SlaLevelPolicy& policy = {});

const char* SlaLevelName(SlaLevel level);  // "level1", "level2", "level3"
const char* MaxTierName(MaxTier tier);     // "single-hop", "cross-leaf-no-top-tier", "any"

}  // namespace ff::sla
