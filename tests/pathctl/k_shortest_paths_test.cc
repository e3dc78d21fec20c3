// Yen's k-shortest paths against a brute-force enumeration of all simple paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "pathctl/k_shortest_paths.h"
#include "pathctl/topology_generators.h"

namespace ff::pathctl {
namespace {

// Every simple path src->dst whose intermediate nodes are transit nodes, sorted by cost.
std::vector<Path> BruteForce(const Topology& t, uint32_t src, uint32_t dst, const std::vector<double>& w,
                             const std::vector<uint8_t>& transit) {
  std::vector<Path> all;
  std::vector<uint8_t> on(t.nodes().size(), 0);
  Path cur;
  std::function<void(uint32_t)> dfs = [&](uint32_t u) {
    if (u == dst) {
      Path p = cur;
      p.nodes.push_back(dst);
      p.cost = PathCost(p, w);
      all.push_back(std::move(p));
      return;
    }
    if (u != src && !transit[u]) return;
    on[u] = 1;
    cur.nodes.push_back(u);
    for (const Arc& a : t.Neighbors(u)) {
      if (on[a.to] || w[a.link] < 0) continue;
      cur.links.push_back(a.link);
      dfs(a.to);
      cur.links.pop_back();
    }
    cur.nodes.pop_back();
    on[u] = 0;
  };
  dfs(src);
  std::stable_sort(all.begin(), all.end(), [](const Path& a, const Path& b) { return a.cost < b.cost; });
  return all;
}

Topology RandomGraph(std::mt19937& rng, int n, double p) {
  Topology t;
  std::string err;
  for (int i = 0; i < n; ++i)
    t.AddNode({"n" + std::to_string(i), i < 2 ? NodeKind::kNic : NodeKind::kSpine, "", "", "", -1}, &err);
  std::uniform_real_distribution<double> u(0, 1);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (u(rng) < p) {
        Link l;
        l.a = a;
        l.b = b;
        // Small integers make equal-cost ties common, which is where implementations differ.
        l.latency_us = 1 + static_cast<int>(u(rng) * 4);
        t.AddLink(l, &err);
      }
  t.Finalize();
  return t;
}

void ExpectLoopless(const Path& p, const Topology& t) {
  std::vector<uint32_t> nodes = p.nodes;
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(std::adjacent_find(nodes.begin(), nodes.end()), nodes.end());
  ASSERT_EQ(p.links.size() + 1, p.nodes.size());
  for (size_t i = 0; i < p.links.size(); ++i) {
    const Link& l = t.link(p.links[i]);
    EXPECT_TRUE((l.a == p.nodes[i] && l.b == p.nodes[i + 1]) || (l.b == p.nodes[i] && l.a == p.nodes[i + 1]));
  }
}

TEST(KShortestPaths, MatchesBruteForceCostsOnRandomGraphs) {
  std::mt19937 rng(12345);
  int compared = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Topology t = RandomGraph(rng, 4 + trial % 6, 0.3 + 0.1 * (trial % 5));
    std::vector<double> w(t.links().size());
    for (uint32_t l = 0; l < w.size(); ++l) w[l] = (trial % 7 == 0 && l % 5 == 0) ? -1 : t.link(l).latency_us;
    std::vector<uint8_t> transit(t.nodes().size());
    for (uint32_t n = 0; n < transit.size(); ++n) transit[n] = IsSwitch(t.node(n).kind) && !(trial % 3 == 0 && n == 2);
    auto expect = BruteForce(t, 0, 1, w, transit);
    KShortestPaths ksp(t);
    for (size_t k : {1u, 3u, 8u, 50u}) {
      auto got = ksp.Find(0, 1, k, w, transit);
      ASSERT_EQ(got.size(), std::min(k, expect.size())) << "trial " << trial << " k " << k;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i].cost, expect[i].cost, 1e-9) << "trial " << trial << " rank " << i;
        ExpectLoopless(got[i], t);
        for (size_t n = 1; n + 1 < got[i].nodes.size(); ++n) EXPECT_TRUE(transit[got[i].nodes[n]]);
        for (uint32_t l : got[i].links) EXPECT_GE(w[l], 0);
      }
      // No path twice.
      for (size_t i = 0; i < got.size(); ++i)
        for (size_t j = i + 1; j < got.size(); ++j) EXPECT_NE(got[i].links, got[j].links);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 800);
}

TEST(KShortestPaths, FindsAllSpinePathsInLeafSpineInCostOrder) {
  LeafSpineSpec spec;
  spec.leaves = 3;
  spec.spines = 4;
  spec.hosts_per_leaf = 1;
  spec.link.latency_jitter = 0.7;
  Topology t = GenerateLeafSpine(spec);
  std::vector<double> w(t.links().size());
  for (uint32_t l = 0; l < w.size(); ++l) w[l] = t.link(l).latency_us;
  std::vector<uint8_t> transit(t.nodes().size());
  for (uint32_t n = 0; n < transit.size(); ++n) transit[n] = IsSwitch(t.node(n).kind);
  uint32_t a = *t.FindNode("h0-nic0"), b = *t.FindNode("h2-nic0");
  auto expect = BruteForce(t, a, b, w, transit);
  KShortestPaths ksp(t);
  auto got = ksp.Find(a, b, 20, w, transit);
  // 4 direct paths plus 4*3 detours spine -> leaf1 -> other spine: 16 in all.
  ASSERT_EQ(expect.size(), 16u);
  ASSERT_EQ(got.size(), 16u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i].cost, expect[i].cost, 1e-9);
  // The four cheapest are the direct leaf-spine-leaf paths, one per spine.
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i].nodes.size(), 5u);
}

TEST(KShortestPaths, NoPathWhenDisconnectedOrEndpointsEqual) {
  std::mt19937 rng(1);
  Topology t = RandomGraph(rng, 4, 0.0);
  std::vector<double> w;
  std::vector<uint8_t> transit(4, 1);
  KShortestPaths ksp(t);
  EXPECT_TRUE(ksp.Find(0, 1, 5, w, transit).empty());
  EXPECT_TRUE(ksp.Find(0, 0, 5, w, transit).empty());
}

}  // namespace
}  // namespace ff::pathctl
