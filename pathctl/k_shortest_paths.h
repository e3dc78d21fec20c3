// Yen's k-shortest loopless paths over the fabric graph, with buffers reused across queries.
#pragma once

#include <cstdint>
#include <limits>
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

// Why fast:
// - One reverse Dijkstra from the destination over the switches gives the exact distance to dst
//   with nothing removed; it walks a compact adjacency (transit targets and usable links only,
//   weights inline) built once per graph. It does not depend on the source, so it is kept per destination (when
//   the caller names the graph version) and reused by later queries to the same destination.
// - Every spur search is an A* on that exact lower bound, and it stops as soon as it pops a node
//   whose reverse-tree path to dst avoids everything the spur removed (the root path's nodes and
//   the blocked links): that node's f is the exact cost of a complete path, and nothing cheaper
//   is left in the heap. On a fat tree this is usually the first or second node popped.
// - A spur search gives up when its cheapest possible completion cannot make the final k: when
//   the candidate pool already holds (k - found) paths no costlier, later paths of equal or
//   higher cost can never be chosen (ties go to the earlier candidate).
// - Only switches are expanded (endpoints never forward); Lawler's rule skips spur nodes before
//   the previous path's deviation point; per-node state lives in arrays stamped with a
//   generation counter, so nothing is cleared or allocated per search.
// Not thread-safe: use one instance per thread.
class KShortestPaths {
 public:
  explicit KShortestPaths(const Topology& topology);

  // Up to k loopless paths from src to dst in non-decreasing cost. weight[l] is the cost of
  // link l; a negative or infinite weight removes the link. A node other than src and dst is
  // used only when transit[node] != 0. Ties are broken by discovery order.
  std::vector<Path> Find(uint32_t src, uint32_t dst, size_t k, std::span<const double> weight,
                         std::span<const uint8_t> transit) {
    return Find(src, dst, k, weight, transit, 0);
  }
  // The same; graph_key != 0 names the contents of weight and transit (the caller changes the key
  // whenever either changes), so the reverse tree of dst is reused across calls with that key.
  std::vector<Path> Find(uint32_t src, uint32_t dst, size_t k, std::span<const double> weight,
                         std::span<const uint8_t> transit, uint64_t graph_key);

  // Counters for the last Find(), for benchmarks and tests of the pruning.
  struct Stats {
    size_t spur_searches = 0;
    size_t spur_pruned = 0;      // spur searches cut off by the k-th candidate bound
    size_t nodes_settled = 0;    // reverse tree (when built) plus spur searches
    bool tree_reused = false;    // the destination's reverse tree came from the cache
  };
  const Stats& last_stats() const { return stats_; }

 private:
  struct HeapEntry {
    double key;
    uint32_t node;
    bool operator<(const HeapEntry& o) const { return key > o.key; }  // min-heap via std::push_heap
  };
  // Distance to one destination over transit nodes, and the next link toward it (source-free).
  // Indexed by transit slot (see ArcSet), so a fabric of mostly endpoints keeps it small.
  struct ReverseTree {
    uint32_t dst = 0;
    uint64_t graph_key = 0;
    uint64_t last_use = 0;
    uint64_t arcs_id = 0;          // the ArcSet it was built on (its slot numbering)
    std::vector<double> h;         // +inf: cannot reach dst
    std::vector<uint32_t> next;    // next link toward dst
  };
  // Arc between transit nodes over a usable link, weight inline: what the reverse search walks.
  struct TreeArc {
    uint32_t to;    // transit slot
    uint32_t link;
    double w;
  };
  // Transit nodes numbered 0..m-1 (slot), with their adjacency among themselves.
  struct ArcSet {
    uint64_t graph_key = 0;           // 0: identified by the copies below
    uint64_t last_use = 0;
    uint64_t id = 0;                  // unique per build, so trees never outlive their numbering
    std::vector<double> weight;
    std::vector<uint8_t> transit;
    std::vector<uint32_t> slot;       // node -> slot, or kNoSlot
    std::vector<uint32_t> offsets;    // per slot
    std::vector<TreeArc> arcs;
  };
  // The compact adjacency of the current graph, from the small cache (one per SLA level's
  // transit set is typical) or built now.
  const ArcSet& ArcsFor(uint64_t graph_key);
  const ReverseTree& TreeFor(uint32_t dst, uint64_t graph_key);
  void BuildTree(uint32_t dst, ReverseTree* tree);
  double H(uint32_t v) const {
    if (v == src_) return src_h_;
    if (v == tree_->dst) return 0;
    uint32_t s = arcs_->slot[v];
    return s == kNoSlot ? kNoPath : tree_->h[s];
  }
  uint32_t Next(uint32_t v) const { return v == src_ ? src_next_ : tree_->next[arcs_->slot[v]]; }
  static constexpr uint32_t kNoSlot = 0xffffffffu;
  static constexpr double kNoPath = std::numeric_limits<double>::infinity();
  // True when v's reverse-tree path to dst uses no blocked node or link and not the spur node.
  bool TreePathFree(uint32_t v, uint32_t spur);
  // A* from spur to dst avoiding blocked nodes/links; appends the spur path to out on success.
  // Gives up (returns false) once no completion can cost less than max_cost.
  bool SpurSearch(uint32_t spur, uint32_t dst, double g0, double max_cost, Path* out);
  bool Usable(uint32_t link) const;
  static uint64_t Hash(const std::vector<uint32_t>& links);

  const Topology& topo_;
  std::span<const double> weight_;
  std::span<const uint8_t> transit_;
  uint32_t src_ = 0;
  double src_h_ = 0;
  uint32_t src_next_ = 0;

  std::vector<ArcSet> arc_sets_;  // at most kMaxArcSets, least recently used replaced
  const ArcSet* arcs_ = nullptr;
  uint64_t arc_set_builds_ = 0;

  std::vector<ReverseTree> trees_;  // per-destination cache, least recently used replaced
  size_t max_trees_ = 1;
  uint64_t use_clock_ = 0;
  const ReverseTree* tree_ = nullptr;

  // Forward search state, stamped per search.
  std::vector<double> g_;
  std::vector<uint32_t> g_gen_;
  std::vector<uint32_t> parent_link_;
  std::vector<uint32_t> closed_gen_;
  std::vector<uint32_t> free_gen_;   // TreePathFree memo: free_gen_ == gen_ -> free_val_ valid
  std::vector<uint8_t> free_val_;
  std::vector<uint32_t> node_block_;
  std::vector<uint32_t> link_block_;
  std::vector<HeapEntry> heap_;
  std::vector<uint32_t> chain_;
  uint32_t gen_ = 0;
  uint32_t block_gen_ = 0;
  Stats stats_;
};

// Sum of weight over the path's links, in order (the same rounding as Find()).
double PathCost(const Path& path, std::span<const double> weight);

}  // namespace ff::pathctl
