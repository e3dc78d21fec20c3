// Yen's k-shortest loopless paths over the fabric graph, with buffers reused across queries.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "pathctl/topology.h"

namespace ff::pathctl {

struct Path {
  std::vector<uint32_t> nodes;  // src ... dst
  std::vector<uint32_t> links;  // links[i] joins nodes[i] and nodes[i+1]
  double cost = 0;              // sum of the search weights, added in path order
};

// Why fast: one reverse Dijkstra from the destination gives an exact lower bound (distance to
// dst with nothing removed), so every spur search is an A* that walks almost straight to the
// destination; only switches are expanded (endpoints never forward); Lawler's rule skips spur
// nodes before the previous path's deviation point; all per-node state lives in arrays stamped
// with a generation counter, so nothing is cleared or allocated per search.
// Not thread-safe: use one instance per thread.
class KShortestPaths {
 public:
  explicit KShortestPaths(const Topology& topology);

  // Up to k loopless paths from src to dst in non-decreasing cost. weight[l] is the cost of
  // link l; a negative or infinite weight removes the link. A node other than src and dst is
  // used only when transit[node] != 0. Ties are broken by discovery order.
  std::vector<Path> Find(uint32_t src, uint32_t dst, size_t k, std::span<const double> weight,
                         std::span<const uint8_t> transit);

  // Counters for the last Find(), for benchmarks and tests of the pruning.
  struct Stats {
    size_t spur_searches = 0;
    size_t nodes_settled = 0;
  };
  const Stats& last_stats() const { return stats_; }

 private:
  struct HeapEntry {
    double key;
    uint32_t node;
    bool operator<(const HeapEntry& o) const { return key > o.key; }  // min-heap via std::push_heap
  };
  void ReverseTree(uint32_t dst, uint32_t src);
  // A* from spur to dst avoiding blocked nodes/links; appends the spur path to out on success.
  bool SpurSearch(uint32_t spur, uint32_t dst, Path* out);
  bool Usable(uint32_t link) const;
  static uint64_t Hash(const std::vector<uint32_t>& links);

  const Topology& topo_;
  std::span<const double> weight_;
  std::span<const uint8_t> transit_;
  uint32_t src_ = 0;

  // Reverse tree: distance to dst and next link toward it.
  std::vector<double> h_;
  std::vector<uint32_t> h_gen_;
  std::vector<uint32_t> next_link_;
  // Forward search state, stamped per search.
  std::vector<double> g_;
  std::vector<uint32_t> g_gen_;
  std::vector<uint32_t> parent_link_;
  std::vector<uint32_t> closed_gen_;
  std::vector<uint32_t> node_block_;
  std::vector<uint32_t> link_block_;
  std::vector<HeapEntry> heap_;
  uint32_t gen_ = 0;
  uint32_t block_gen_ = 0;
  uint32_t tree_gen_ = 0;
  Stats stats_;
};

// Sum of weight over the path's links, in order (the same rounding as Find()).
double PathCost(const Path& path, std::span<const double> weight);

}  // namespace ff::pathctl
