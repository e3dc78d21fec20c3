// SLA-aware ranking of k-shortest candidate paths: the article's penalty, its constraints and
// the SLA levels' tier restrictions, with a best-effort fallback when nothing satisfies them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pathctl/k_shortest_paths.h"
#include "pathctl/path_entropy.h"
#include "pathctl/ranking_policy.h"
#include "pathctl/topology.h"

namespace ff::pathctl {

struct Verdicts {
  bool hop_latency = true;  // every link <= max_hop_latency_us
  bool buffer = true;       // every link's free buffer >= min_free_buffer_bytes
  bool bandwidth = true;    // bottleneck >= headroom * size / (timeout - overhead)
  bool level = true;        // the path's tiers are allowed at the SLA level
  bool healthy = true;      // no degraded or down link
  bool steerable = true;    // some entropy value makes traffic take the path
  bool All() const { return hop_latency && buffer && bandwidth && level && healthy && steerable; }
};

struct RankedPath {
  Path path;
  double latency_us = 0;       // sum of link latencies
  double penalty = 0;          // the article's penalty (+ degraded-link cost)
  double score = 0;            // latency_us + penalty; lower is better
  double bottleneck_gbps = 0;  // min over links of capacity * (1 - utilization)
  Verdicts verdicts;
  bool feasible = false;
  EntropyChoice entropy;
};

struct Ranking {
  SlaLevel level = SlaLevel::kLevel3;
  bool sla_attainable = false;     // at least one candidate met every constraint
  std::vector<RankedPath> paths;   // feasible first, each group by score
};

// Holds per-level transit masks and the current link weights; not thread-safe.
class PathRanker {
 public:
  PathRanker(const Topology& topology, const Policy& policy);

  // Link health as the oracle sees it (initially the topology's state field).
  void SetLinkState(uint32_t link, LinkState state);
  LinkState link_state(uint32_t link) const { return states_[link]; }

  Ranking Rank(uint32_t src, uint32_t dst, double sla_us, uint64_t size_bytes);
  // Scores one path under the policy (exposed for tests and the CLI).
  RankedPath Evaluate(Path path, double sla_us, uint64_t size_bytes, SlaLevel level) const;

  const Policy& policy() const { return policy_; }
  const KShortestPaths::Stats& last_search_stats() const { return ksp_.last_stats(); }

 private:
  bool LevelAllows(const Path& path, SlaLevel level) const;
  uint64_t GraphKey(int level_index) const { return weight_version_ * 4 + static_cast<uint64_t>(level_index) + 1; }

  const Topology& topo_;
  Policy policy_;
  EntropyMap entropy_;
  KShortestPaths ksp_;
  std::vector<LinkState> states_;
  std::vector<double> weight_;
  // Changes whenever weight_ does; with the level it names the graph a cached reverse tree
  // belongs to (KShortestPaths keeps one per destination).
  uint64_t weight_version_ = 1;
  std::vector<uint8_t> transit_[3];  // index level-1
};

}  // namespace ff::pathctl
