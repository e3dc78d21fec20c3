// Yen's algorithm with an exact A* heuristic, early exit on intact tree paths, a k-th candidate
// bound, a per-destination reverse-tree cache and Lawler's spur-node pruning.
#include "pathctl/k_shortest_paths.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace ff::pathctl {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint32_t kNoLink = std::numeric_limits<uint32_t>::max();
// Reverse trees kept per instance: as many as fit in this many bytes, at least 4.
constexpr size_t kTreeCacheBytes = 16u << 20;
// Compact adjacencies kept: one per graph (weights and transit set) in use, e.g. per SLA level.
constexpr size_t kMaxArcSets = 4;

// a > b by more than rounding: sums of the same weights added in another order may differ in the
// last bits, and a bound must never cut a path that is really no costlier.
bool Exceeds(double a, double b) { return a > b + 1e-9 * std::max(1.0, std::fabs(b)); }
}  // namespace

double PathCost(const Path& path, std::span<const double> weight) {
  double c = 0;
  for (uint32_t l : path.links) c += weight[l];
  return c;
}

KShortestPaths::KShortestPaths(const Topology& topology) : topo_(topology) {
  const size_t n = topo_.nodes().size();
  g_.assign(n, kInf);
  g_gen_.assign(n, 0);
  parent_link_.assign(n, kNoLink);
  closed_gen_.assign(n, 0);
  free_gen_.assign(n, 0);
  free_val_.assign(n, 0);
  node_block_.assign(n, 0);
  link_block_.assign(topo_.links().size(), 0);
  const size_t tree_bytes = std::max<size_t>(1, n * (sizeof(double) + sizeof(uint32_t)));
  max_trees_ = std::max<size_t>(4, kTreeCacheBytes / tree_bytes);
  arc_sets_.reserve(kMaxArcSets);  // arcs_ points into it
}

bool KShortestPaths::Usable(uint32_t link) const {
  double w = weight_[link];
  return w >= 0 && w < kInf && link_block_[link] != block_gen_;
}

uint64_t KShortestPaths::Hash(const std::vector<uint32_t>& links) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t l : links) h = (h ^ l) * 1099511628211ull;
  return h;
}

const KShortestPaths::ArcSet& KShortestPaths::ArcsFor(uint64_t graph_key) {
  for (ArcSet& set : arc_sets_) {
    bool same = graph_key != 0 ? set.graph_key == graph_key
                               : set.graph_key == 0 && set.weight.size() == weight_.size() &&
                                     set.transit.size() == transit_.size() &&
                                     std::equal(weight_.begin(), weight_.end(), set.weight.begin()) &&
                                     std::equal(transit_.begin(), transit_.end(), set.transit.begin());
    if (same) {
      set.last_use = use_clock_;
      return set;
    }
  }
  ArcSet* set = arc_sets_.size() < kMaxArcSets
                    ? &arc_sets_.emplace_back()
                    : &*std::min_element(arc_sets_.begin(), arc_sets_.end(),
                                         [](const ArcSet& a, const ArcSet& b) { return a.last_use < b.last_use; });
  const size_t n = topo_.nodes().size();
  set->graph_key = graph_key;
  set->last_use = use_clock_;
  set->id = ++arc_set_builds_;
  set->slot.assign(n, kNoSlot);
  uint32_t m = 0;
  for (uint32_t u = 0; u < n; ++u)
    if (transit_[u]) set->slot[u] = m++;
  set->offsets.assign(m + 1, 0);
  set->arcs.clear();
  for (uint32_t u = 0; u < n; ++u) {
    if (!transit_[u]) continue;
    set->offsets[set->slot[u]] = static_cast<uint32_t>(set->arcs.size());
    for (const Arc& arc : topo_.Neighbors(u)) {
      double w = weight_[arc.link];
      if (transit_[arc.to] && w >= 0 && w < kInf) set->arcs.push_back({set->slot[arc.to], arc.link, w});
    }
  }
  set->offsets[m] = static_cast<uint32_t>(set->arcs.size());
  // Without a key the contents identify the graph (comparing them costs far less than a search).
  if (graph_key == 0) {
    set->weight.assign(weight_.begin(), weight_.end());
    set->transit.assign(transit_.begin(), transit_.end());
  } else {
    set->weight.clear();
    set->transit.clear();
  }
  return *set;
}

void KShortestPaths::BuildTree(uint32_t dst, ReverseTree* tree) {
  const size_t m = arcs_->offsets.size() - 1;
  tree->dst = dst;
  tree->arcs_id = arcs_->id;
  tree->h.assign(m, kInf);
  tree->next.assign(m, kNoLink);
  double* h = tree->h.data();
  uint32_t* next = tree->next.data();
  const TreeArc* arcs = arcs_->arcs.data();
  const uint32_t* offsets = arcs_->offsets.data();
  const uint32_t dst_slot = arcs_->slot[dst];
  // Heap entries carry slots. dst may be an endpoint (no slot): seed its transit neighbours.
  heap_.clear();
  if (dst_slot != kNoSlot) {
    h[dst_slot] = 0;
    heap_.push_back({0, dst_slot});
  } else {
    for (const Arc& arc : topo_.Neighbors(dst)) {
      uint32_t s = arcs_->slot[arc.to];
      double w = weight_[arc.link];
      if (s == kNoSlot || !(w >= 0 && w < kInf) || !(w < h[s])) continue;
      h[s] = w;
      next[s] = arc.link;
      heap_.push_back({w, s});
      std::push_heap(heap_.begin(), heap_.end());
    }
  }
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end());
    HeapEntry e = heap_.back();
    heap_.pop_back();
    if (e.key > h[e.node]) continue;
    ++stats_.nodes_settled;
    for (const TreeArc* a = arcs + offsets[e.node], *end = arcs + offsets[e.node + 1]; a != end; ++a) {
      double d = e.key + a->w;
      if (d < h[a->to] && a->to != dst_slot) {
        h[a->to] = d;
        next[a->to] = a->link;
        heap_.push_back({d, a->to});
        std::push_heap(heap_.begin(), heap_.end());
      }
    }
  }
  if (dst_slot != kNoSlot) h[dst_slot] = 0;
}

const KShortestPaths::ReverseTree& KShortestPaths::TreeFor(uint32_t dst, uint64_t graph_key) {
  ++use_clock_;
  arcs_ = &ArcsFor(graph_key);
  ReverseTree* slot = nullptr;
  if (graph_key != 0) {
    for (ReverseTree& t : trees_) {
      if (t.graph_key == graph_key && t.dst == dst && t.arcs_id == arcs_->id) {
        t.last_use = use_clock_;
        stats_.tree_reused = true;
        return t;
      }
    }
  }
  if (trees_.size() < max_trees_) {
    slot = &trees_.emplace_back();
  } else {
    slot = &*std::min_element(trees_.begin(), trees_.end(),
                              [](const ReverseTree& a, const ReverseTree& b) { return a.last_use < b.last_use; });
  }
  BuildTree(dst, slot);
  slot->graph_key = graph_key;  // 0: never matched, so the slot is simply reused
  slot->last_use = graph_key != 0 ? use_clock_ : 0;
  return *slot;
}

bool KShortestPaths::TreePathFree(uint32_t v, uint32_t spur) {
  // Walk down until a node with a known answer (or dst), then write the answer back up the chain.
  chain_.clear();
  uint32_t dst = tree_->dst;
  bool free = true;
  for (uint32_t u = v;; ) {
    if (u == dst) break;
    if (free_gen_[u] == gen_) {
      free = free_val_[u] != 0;
      break;
    }
    chain_.push_back(u);
    uint32_t l = Next(u);
    if ((u != v && u == spur) || node_block_[u] == block_gen_ || l == kNoLink || link_block_[l] == block_gen_) {
      free = false;
      break;
    }
    u = topo_.link(l).Other(u);
  }
  for (uint32_t u : chain_) {
    free_gen_[u] = gen_;
    free_val_[u] = free;
  }
  return free;
}

bool KShortestPaths::SpurSearch(uint32_t spur, uint32_t dst, double g0, double max_cost, Path* out) {
  ++stats_.spur_searches;
  ++gen_;
  heap_.clear();
  g_[spur] = 0;
  g_gen_[spur] = gen_;
  parent_link_[spur] = kNoLink;
  heap_.push_back({H(spur), spur});
  uint32_t reached = kNoLink;  // the node whose tree path completes the spur path
  const bool bounded = max_cost < kInf;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end());
    HeapEntry e = heap_.back();
    heap_.pop_back();
    uint32_t u = e.node;
    if (closed_gen_[u] == gen_) continue;
    if (bounded && Exceeds(g0 + e.key, max_cost)) {
      ++stats_.spur_pruned;
      return false;
    }
    closed_gen_[u] = gen_;
    ++stats_.nodes_settled;
    // h is consistent, so e.key is a lower bound on every path still in the heap; when u's tree
    // path is intact, g(u) + h(u) = e.key is achieved, and the search is done.
    if (u == dst || TreePathFree(u, spur)) {
      reached = u;
      break;
    }
    if (u != spur && !transit_[u]) continue;
    for (const Arc& arc : topo_.Neighbors(u)) {
      uint32_t v = arc.to;
      if (closed_gen_[v] == gen_ || node_block_[v] == block_gen_) continue;
      if (!(transit_[v] || v == dst) || !Usable(arc.link)) continue;
      double hv = H(v);
      if (hv == kInf) continue;
      double d = g_[u] + weight_[arc.link];
      if (g_gen_[v] != gen_ || d < g_[v]) {
        g_gen_[v] = gen_;
        g_[v] = d;
        parent_link_[v] = arc.link;
        if (bounded && Exceeds(g0 + d + hv, max_cost)) continue;  // would only be popped to be pruned
        heap_.push_back({d + hv, v});
        std::push_heap(heap_.begin(), heap_.end());
      }
    }
  }
  if (reached == kNoLink) return false;
  size_t base_nodes = out->nodes.size(), base_links = out->links.size();
  for (uint32_t v = reached; v != spur;) {
    uint32_t l = parent_link_[v];
    out->nodes.push_back(v);
    out->links.push_back(l);
    v = topo_.link(l).Other(v);
  }
  out->nodes.push_back(spur);
  std::reverse(out->nodes.begin() + base_nodes, out->nodes.end());
  std::reverse(out->links.begin() + base_links, out->links.end());
  // Then the intact tree path from the reached node to dst.
  for (uint32_t v = reached; v != dst;) {
    uint32_t l = Next(v);
    out->links.push_back(l);
    v = topo_.link(l).Other(v);
    out->nodes.push_back(v);
  }
  return true;
}

std::vector<Path> KShortestPaths::Find(uint32_t src, uint32_t dst, size_t k, std::span<const double> weight,
                                       std::span<const uint8_t> transit, uint64_t graph_key) {
  stats_ = {};
  std::vector<Path> result;
  if (k == 0 || src == dst || src >= topo_.nodes().size() || dst >= topo_.nodes().size()) return result;
  weight_ = weight;
  transit_ = transit;
  src_ = src;
  tree_ = &TreeFor(dst, graph_key);
  // The tree holds transit nodes only; a source that does not forward joins it here.
  const uint32_t src_slot = arcs_->slot[src];
  src_h_ = src_slot != kNoSlot ? tree_->h[src_slot] : kInf;
  src_next_ = src_slot != kNoSlot ? tree_->next[src_slot] : kNoLink;
  for (const Arc& arc : topo_.Neighbors(src)) {
    if (!(transit_[arc.to] || arc.to == dst)) continue;
    double w = weight_[arc.link];
    double hv = arc.to == dst ? 0.0 : tree_->h[arcs_->slot[arc.to]];
    if (!(w >= 0 && w < kInf) || hv == kInf) continue;
    if (w + hv < src_h_) {
      src_h_ = w + hv;
      src_next_ = arc.link;
    }
  }
  if (src_h_ == kInf) return result;

  // The first path follows the reverse tree.
  Path first;
  for (uint32_t v = src; v != dst;) {
    first.nodes.push_back(v);
    first.links.push_back(Next(v));
    v = topo_.link(Next(v)).Other(v);
  }
  first.nodes.push_back(dst);
  first.cost = PathCost(first, weight);

  struct Candidate {
    Path path;
    size_t deviation;
    size_t order;
  };
  std::vector<Candidate> pool;
  std::vector<size_t> deviation{0};
  auto cmp = [&pool](size_t x, size_t y) {
    if (pool[x].path.cost != pool[y].path.cost) return pool[x].path.cost > pool[y].path.cost;
    return pool[x].order > pool[y].order;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)> frontier(cmp);
  std::vector<double> open_costs;  // costs of the candidates still in the frontier
  std::vector<double> scratch;
  std::unordered_multimap<uint64_t, std::vector<uint32_t>> seen;
  auto insert_seen = [&seen](const std::vector<uint32_t>& links) {
    uint64_t hsh = Hash(links);
    auto [b, e] = seen.equal_range(hsh);
    for (auto it = b; it != e; ++it)
      if (it->second == links) return false;
    seen.emplace(hsh, links);
    return true;
  };
  // The cost a new candidate must beat to be chosen at all: with `need` more paths to pick and
  // `need` open candidates no costlier than B, anything costing B or more loses (ties go to the
  // earlier candidate).
  auto bound = [&](size_t need) {
    if (open_costs.size() < need) return kInf;
    scratch = open_costs;
    std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(need - 1), scratch.end());
    return scratch[need - 1];
  };
  insert_seen(first.links);
  result.push_back(std::move(first));

  while (result.size() < k) {
    const Path& prev = result.back();
    const size_t dev = deviation.back();
    const size_t need = k - result.size();
    double root_cost = 0;
    for (size_t r = 0; r < dev; ++r) root_cost += weight[prev.links[r]];
    for (size_t j = dev; j + 1 < prev.nodes.size(); root_cost += weight[prev.links[j]], ++j) {
      ++block_gen_;
      for (size_t r = 0; r < j; ++r) node_block_[prev.nodes[r]] = block_gen_;
      for (const Path& p : result) {
        if (p.links.size() > j && std::equal(p.links.begin(), p.links.begin() + j, prev.links.begin()))
          link_block_[p.links[j]] = block_gen_;
      }
      Path cand;
      cand.nodes.assign(prev.nodes.begin(), prev.nodes.begin() + j);
      cand.links.assign(prev.links.begin(), prev.links.begin() + j);
      if (!SpurSearch(prev.nodes[j], dst, root_cost, bound(need), &cand)) continue;
      if (!insert_seen(cand.links)) continue;
      cand.cost = PathCost(cand, weight);
      open_costs.push_back(cand.cost);
      pool.push_back({std::move(cand), j, pool.size()});
      frontier.push(pool.size() - 1);
    }
    if (frontier.empty()) break;
    size_t best = frontier.top();
    frontier.pop();
    open_costs.erase(std::find(open_costs.begin(), open_costs.end(), pool[best].path.cost));
    deviation.push_back(pool[best].deviation);
    result.push_back(std::move(pool[best].path));
  }
  return result;
}

}  // namespace ff::pathctl
