// SLA-aware ranking: candidates per level, article penalty, constraint verdicts, fallback.
#include "pathctl/path_ranker.h"

#include <algorithm>
#include <cmath>

namespace ff::pathctl {

PathRanker::PathRanker(const Topology& topology, const Policy& policy)
    : topo_(topology), policy_(policy), entropy_(topology), ksp_(topology) {
  const size_t n = topo_.nodes().size();
  for (auto& t : transit_) t.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    NodeKind k = topo_.node(static_cast<uint32_t>(i)).kind;
    transit_[2][i] = IsSwitch(k);
    transit_[1][i] = IsSwitch(k) && k != NodeKind::kCore;
    transit_[0][i] = k == NodeKind::kLeaf || k == NodeKind::kNvSwitch;
  }
  states_.resize(topo_.links().size());
  weight_.resize(topo_.links().size());
  for (uint32_t l = 0; l < topo_.links().size(); ++l) SetLinkState(l, topo_.link(l).state);
}

void PathRanker::SetLinkState(uint32_t link, LinkState state) {
  states_[link] = state;
  const Link& l = topo_.link(link);
  double w = state == LinkState::kDown       ? -1.0
             : state == LinkState::kDegraded ? l.latency_us + policy_.degraded_link_cost
                                             : l.latency_us;
  if (w != weight_[link]) ++weight_version_;
  weight_[link] = w;
}

bool PathRanker::LevelAllows(const Path& path, SlaLevel level) const {
  size_t switches = 0;
  for (size_t i = 1; i + 1 < path.nodes.size(); ++i) {
    NodeKind k = topo_.node(path.nodes[i]).kind;
    if (!transit_[static_cast<int>(level) - 1][path.nodes[i]]) return false;
    switches += IsSwitch(k);
  }
  return level != SlaLevel::kLevel1 || switches == 1;
}

RankedPath PathRanker::Evaluate(Path path, double sla_us, uint64_t size_bytes, SlaLevel level) const {
  RankedPath r;
  const Policy& p = policy_;
  r.bottleneck_gbps = path.links.empty() ? 0 : 1e300;
  for (uint32_t li : path.links) {
    const Link& l = topo_.link(li);
    r.latency_us += l.latency_us;
    if (sla_us > 0)
      r.penalty += std::max(0.0, l.latency_us - p.latency_penalty_sla_fraction * sla_us) * p.latency_penalty_weight;
    double buf = static_cast<double>(l.free_buffer_bytes);
    if (buf < p.buffer_penalty_threshold_bytes)
      r.penalty += p.buffer_penalty_scale * std::exp((p.buffer_penalty_threshold_bytes - buf) / p.buffer_penalty_decay_bytes);
    if (states_[li] != LinkState::kUp) {
      r.verdicts.healthy = false;
      r.penalty += p.degraded_link_cost;
    }
    if (l.latency_us > p.max_hop_latency_us) r.verdicts.hop_latency = false;
    if (buf < p.min_free_buffer_bytes) r.verdicts.buffer = false;
    r.bottleneck_gbps = std::min(r.bottleneck_gbps, l.AvailableGbps());
  }
  if (size_bytes > 0) {
    double window_us = p.transfer_timeout_us - p.timeout_overhead_us;
    // bits / us = Mb/s; / 1000 -> Gb/s. A non-positive window can never be met.
    double need_gbps = window_us > 0 ? p.bandwidth_headroom * static_cast<double>(size_bytes) * 8.0 / window_us / 1000.0
                                     : 1e300;
    r.verdicts.bandwidth = r.bottleneck_gbps >= need_gbps;
  }
  r.verdicts.level = LevelAllows(path, level);
  r.entropy = entropy_.For(path);
  r.verdicts.steerable = r.entropy.steerable;
  r.feasible = r.verdicts.All();
  r.score = r.latency_us + r.penalty;
  r.path = std::move(path);
  return r;
}

Ranking PathRanker::Rank(uint32_t src, uint32_t dst, double sla_us, uint64_t size_bytes) {
  Ranking out;
  out.level = LevelForSla(sla_us, policy_);
  const int li = static_cast<int>(out.level) - 1;
  for (Path& path : ksp_.Find(src, dst, policy_.k, weight_, transit_[li], GraphKey(li)))
    out.paths.push_back(Evaluate(std::move(path), sla_us, size_bytes, out.level));
  out.sla_attainable = std::any_of(out.paths.begin(), out.paths.end(), [](const RankedPath& r) { return r.feasible; });
  if (!out.sla_attainable && out.level != SlaLevel::kLevel3) {
    // Nothing meets the SLA inside the level's tiers: widen to any path so the caller still
    // gets the best one there is, flagged unattainable.
    for (Path& path : ksp_.Find(src, dst, policy_.k, weight_, transit_[2], GraphKey(2))) {
      bool dup = std::any_of(out.paths.begin(), out.paths.end(),
                             [&](const RankedPath& r) { return r.path.links == path.links; });
      if (!dup) out.paths.push_back(Evaluate(std::move(path), sla_us, size_bytes, out.level));
    }
  }
  std::stable_sort(out.paths.begin(), out.paths.end(), [](const RankedPath& a, const RankedPath& b) {
    if (a.feasible != b.feasible) return a.feasible;
    return a.score < b.score;
  });
  return out;
}

}  // namespace ff::pathctl
