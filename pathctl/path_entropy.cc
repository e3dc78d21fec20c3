// Entropy mapping: a path crossing via switch V gets V's port range (or V's hash residue).
#include "pathctl/path_entropy.h"

namespace ff::pathctl {

EntropyMap::EntropyMap(const Topology& topology)
    : topo_(topology), kind_(topology.entropy.kind), via_of_node_(topology.nodes().size(), -1), choice_kind_(8, 0) {
  const EntropySpec& e = topology.entropy;
  if (kind_ == EntropySpec::Kind::kSportRanges) {
    ranges_ = e.ranges;
  } else if (kind_ == EntropySpec::Kind::kLinearHash) {
    // Port base+i goes through vias[i] (and every base+i+m*N); the lowest such port is the answer.
    for (size_t i = 0; i < e.vias.size(); ++i) {
      uint16_t p = static_cast<uint16_t>(e.base + i);
      ranges_.push_back({p, p, e.vias[i]});
    }
  }
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (auto n = topology.FindNode(ranges_[i].via)) {
      via_of_node_[*n] = static_cast<int>(i);
      choice_kind_[static_cast<size_t>(topology.node(*n).kind)] = 1;
    }
  }
}

EntropyChoice EntropyMap::For(const Path& path) const {
  EntropyChoice c;
  if (kind_ == EntropySpec::Kind::kNone) return c;
  int chosen = -1;
  for (uint32_t n : path.nodes) {
    int v = via_of_node_[n];
    if (v < 0) {
      // A switch of a hashed tier that owns no ports cannot be reached on purpose.
      if (choice_kind_[static_cast<size_t>(topo_.node(n).kind)]) c.steerable = false;
      continue;
    }
    if (chosen >= 0 && chosen != v) c.steerable = false;  // two vias whose ports never overlap
    chosen = v;
  }
  if (!c.steerable) return c;
  c.pinned = true;
  if (chosen >= 0) {
    c.sport_lo = ranges_[chosen].lo;
    c.sport_hi = ranges_[chosen].hi;
  }
  return c;
}

}  // namespace ff::pathctl
