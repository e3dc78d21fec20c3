// Maps a path to the source ports that make the fabric's hashing send traffic along it.
#pragma once

#include <cstdint>
#include <vector>

#include "pathctl/k_shortest_paths.h"
#include "pathctl/topology.h"

namespace ff::pathctl {

struct EntropyChoice {
  uint16_t sport_lo = 0;  // 0,0: any port (no choice point on the path, or no entropy declared)
  uint16_t sport_hi = 0;
  bool steerable = true;  // false: no source port makes traffic take this path
  bool pinned = false;    // true: the ports (or the absence of a choice) force exactly this path
};

class EntropyMap {
 public:
  explicit EntropyMap(const Topology& topology);
  EntropyChoice For(const Path& path) const;

 private:
  const Topology& topo_;
  EntropySpec::Kind kind_;
  std::vector<int> via_of_node_;      // index into ranges/vias, -1 when the node is no via
  std::vector<uint8_t> choice_kind_;  // node kinds that hold a via: a node of such a kind is a choice point
  std::vector<EntropyRange> ranges_;
};

}  // namespace ff::pathctl
