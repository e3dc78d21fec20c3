// Generators for common AI fabrics: two-tier leaf-spine, three-tier fat tree, rail-optimised.
#pragma once

#include <cstdint>

#include "pathctl/topology.h"

namespace ff::pathctl {

struct LinkDefaults {
  double capacity_gbps = 100.0;
  double latency_us = 1.0;
  uint64_t free_buffer_bytes = 16u << 20;
  // When > 0, each link's latency is latency_us * (1 + jitter * u), u uniform in [0,1) from a
  // fixed-seed generator, so path costs differ and k-shortest results are comparable.
  double latency_jitter = 0.0;
  uint64_t seed = 1;
};

// Every leaf connects to every spine; each host has `nics_per_host` NICs on its leaf.
// Declares sport-ranges entropy: the port range [49152, 65535] split evenly over the spines.
struct LeafSpineSpec {
  int leaves = 4;
  int spines = 2;
  int hosts_per_leaf = 4;
  int nics_per_host = 1;
  LinkDefaults link;
};
Topology GenerateLeafSpine(const LeafSpineSpec& spec);

// The classic k-ary fat tree: k pods of k/2 edge (leaf) and k/2 aggregation (spine) switches,
// (k/2)^2 core switches, k^3/4 hosts with one NIC each. k must be even, >= 2.
struct FatTreeSpec {
  int k = 4;
  LinkDefaults link;
};
Topology GenerateFatTree(const FatTreeSpec& spec);

// Rail-optimised: NIC r of every host connects to rail switch r (a leaf); every rail switch
// connects to every spine. Same-rail traffic is single hop; cross-rail traffic crosses a spine.
struct RailSpec {
  int hosts = 8;
  int rails = 4;
  int spines = 2;
  LinkDefaults link;
};
Topology GenerateRail(const RailSpec& spec);

}  // namespace ff::pathctl
