// Yen's algorithm with an exact A* heuristic and Lawler's spur-node pruning.
#include "pathctl/k_shortest_paths.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace ff::pathctl {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint32_t kNoLink = std::numeric_limits<uint32_t>::max();
}  // namespace

double PathCost(const Path& path, std::span<const double> weight) {
  double c = 0;
  for (uint32_t l : path.links) c += weight[l];
  return c;
}

KShortestPaths::KShortestPaths(const Topology& topology) : topo_(topology) {
  const size_t n = topo_.nodes().size();
  h_.assign(n, kInf);
  h_gen_.assign(n, 0);
  next_link_.assign(n, kNoLink);
  g_.assign(n, kInf);
  g_gen_.assign(n, 0);
  parent_link_.assign(n, kNoLink);
  closed_gen_.assign(n, 0);
  node_block_.assign(n, 0);
  link_block_.assign(topo_.links().size(), 0);
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

void KShortestPaths::ReverseTree(uint32_t dst, uint32_t src) {
  ++tree_gen_;
  heap_.clear();
  h_[dst] = 0;
  h_gen_[dst] = tree_gen_;
  next_link_[dst] = kNoLink;
  heap_.push_back({0, dst});
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end());
    HeapEntry e = heap_.back();
    heap_.pop_back();
    if (e.key > h_[e.node]) continue;
    ++stats_.nodes_settled;
    if (e.node != dst && !transit_[e.node]) continue;  // endpoints do not forward
    for (const Arc& arc : topo_.Neighbors(e.node)) {
      if (!(transit_[arc.to] || arc.to == src) || arc.to == dst) continue;
      double w = weight_[arc.link];
      if (!(w >= 0 && w < kInf)) continue;
      double d = e.key + w;
      if (h_gen_[arc.to] != tree_gen_ || d < h_[arc.to]) {
        h_gen_[arc.to] = tree_gen_;
        h_[arc.to] = d;
        next_link_[arc.to] = arc.link;
        heap_.push_back({d, arc.to});
        std::push_heap(heap_.begin(), heap_.end());
      }
    }
  }
}

bool KShortestPaths::SpurSearch(uint32_t spur, uint32_t dst, Path* out) {
  ++stats_.spur_searches;
  ++gen_;
  heap_.clear();
  g_[spur] = 0;
  g_gen_[spur] = gen_;
  parent_link_[spur] = kNoLink;
  heap_.push_back({h_[spur], spur});
  bool found = false;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end());
    HeapEntry e = heap_.back();
    heap_.pop_back();
    uint32_t u = e.node;
    if (closed_gen_[u] == gen_) continue;
    closed_gen_[u] = gen_;
    ++stats_.nodes_settled;
    if (u == dst) {
      found = true;
      break;
    }
    if (u != spur && !transit_[u]) continue;
    for (const Arc& arc : topo_.Neighbors(u)) {
      uint32_t v = arc.to;
      if (closed_gen_[v] == gen_ || node_block_[v] == block_gen_ || h_gen_[v] != tree_gen_) continue;
      if (!(transit_[v] || v == dst) || !Usable(arc.link)) continue;
      double d = g_[u] + weight_[arc.link];
      if (g_gen_[v] != gen_ || d < g_[v]) {
        g_gen_[v] = gen_;
        g_[v] = d;
        parent_link_[v] = arc.link;
        heap_.push_back({d + h_[v], v});
        std::push_heap(heap_.begin(), heap_.end());
      }
    }
  }
  if (!found) return false;
  size_t base_nodes = out->nodes.size(), base_links = out->links.size();
  for (uint32_t v = dst; v != spur;) {
    uint32_t l = parent_link_[v];
    out->nodes.push_back(v);
    out->links.push_back(l);
    v = topo_.link(l).Other(v);
  }
  out->nodes.push_back(spur);
  std::reverse(out->nodes.begin() + base_nodes, out->nodes.end());
  std::reverse(out->links.begin() + base_links, out->links.end());
  return true;
}

std::vector<Path> KShortestPaths::Find(uint32_t src, uint32_t dst, size_t k, std::span<const double> weight,
                                       std::span<const uint8_t> transit) {
  stats_ = {};
  std::vector<Path> result;
  if (k == 0 || src == dst || src >= topo_.nodes().size() || dst >= topo_.nodes().size()) return result;
  weight_ = weight;
  transit_ = transit;
  src_ = src;
  ReverseTree(dst, src);
  if (h_gen_[src] != tree_gen_) return result;

  // The first path follows the reverse tree.
  Path first;
  for (uint32_t v = src; v != dst;) {
    first.nodes.push_back(v);
    first.links.push_back(next_link_[v]);
    v = topo_.link(next_link_[v]).Other(v);
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
  std::unordered_multimap<uint64_t, std::vector<uint32_t>> seen;
  auto insert_seen = [&seen](const std::vector<uint32_t>& links) {
    uint64_t hsh = Hash(links);
    auto [b, e] = seen.equal_range(hsh);
    for (auto it = b; it != e; ++it)
      if (it->second == links) return false;
    seen.emplace(hsh, links);
    return true;
  };
  insert_seen(first.links);
  result.push_back(std::move(first));

  while (result.size() < k) {
    const Path& prev = result.back();
    const size_t dev = deviation.back();
    for (size_t j = dev; j + 1 < prev.nodes.size(); ++j) {
      ++block_gen_;
      for (size_t r = 0; r < j; ++r) node_block_[prev.nodes[r]] = block_gen_;
      for (const Path& p : result) {
        if (p.links.size() > j && std::equal(p.links.begin(), p.links.begin() + j, prev.links.begin()))
          link_block_[p.links[j]] = block_gen_;
      }
      Path cand;
      cand.nodes.assign(prev.nodes.begin(), prev.nodes.begin() + j);
      cand.links.assign(prev.links.begin(), prev.links.begin() + j);
      if (!SpurSearch(prev.nodes[j], dst, &cand)) continue;
      if (!insert_seen(cand.links)) continue;
      cand.cost = PathCost(cand, weight);
      pool.push_back({std::move(cand), j, pool.size()});
      frontier.push(pool.size() - 1);
    }
    if (frontier.empty()) break;
    size_t best = frontier.top();
    frontier.pop();
    deviation.push_back(pool[best].deviation);
    result.push_back(std::move(pool[best].path));
  }
  return result;
}

}  // namespace ff::pathctl
