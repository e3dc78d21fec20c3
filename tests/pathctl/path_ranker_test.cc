// SLA-aware ranking against hand-computed penalties, constraints, levels and entropy.
#include <gtest/gtest.h>

#include <cmath>

#include "pathctl/path_ranker.h"
#include "pathctl/topology_generators.h"
#include "pathctl/topology_json.h"

namespace ff::pathctl {
namespace {

// a,c on leaf0; b on leaf1; leaf0 and leaf1 joined through spine0 and spine1.
Topology Diamond(const std::string& extra_link_fields_s0l1 = "", const std::string& a_l0_fields = "") {
  std::string text = R"({"version":1,"nodes":[
    {"id":"a","kind":"nic","ip":"10.0.0.1"},{"id":"b","kind":"nic","ip":"10.0.1.1"},{"id":"c","kind":"nic","ip":"10.0.0.2"},
    {"id":"L0","kind":"leaf"},{"id":"L1","kind":"leaf"},{"id":"S0","kind":"spine"},{"id":"S1","kind":"spine"}],
   "links":[{"a":"a","b":"L0","latency_us":2)" + a_l0_fields + R"(},{"a":"c","b":"L0","latency_us":3},
            {"a":"L0","b":"S0","latency_us":10},{"a":"S0","b":"L1","latency_us":10)" + extra_link_fields_s0l1 + R"(},
            {"a":"L0","b":"S1","latency_us":50},{"a":"S1","b":"L1","latency_us":5},{"a":"L1","b":"b","latency_us":2}],
   "entropy":{"kind":"sport-ranges","ranges":[{"lo":50000,"hi":50999,"via":"S0"},{"lo":51000,"hi":51999,"via":"S1"}]}})";
  std::string err;
  auto t = ParseTopologyJson(text, &err);
  EXPECT_TRUE(t) << err;
  return std::move(*t);
}

std::string Via(const Topology& t, const RankedPath& p) { return t.node(p.path.nodes[2]).id; }

TEST(PathRanker, LatencyPenaltyAppliesPerLinkAboveEightyPercentOfSla) {
  Topology t = Diamond();
  PathRanker r(t, Policy{});
  Ranking rk = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 60, 0);  // 0.8*60 = 48 us per link
  EXPECT_EQ(rk.level, SlaLevel::kLevel2);
  ASSERT_EQ(rk.paths.size(), 2u);
  EXPECT_TRUE(rk.sla_attainable);
  EXPECT_EQ(Via(t, rk.paths[0]), "S0");
  EXPECT_DOUBLE_EQ(rk.paths[0].latency_us, 24);
  EXPECT_DOUBLE_EQ(rk.paths[0].penalty, 0);
  EXPECT_DOUBLE_EQ(rk.paths[1].latency_us, 59);
  EXPECT_DOUBLE_EQ(rk.paths[1].penalty, (50 - 48) * 1000.0);
  EXPECT_DOUBLE_EQ(rk.paths[1].score, 59 + 2000.0);
  EXPECT_EQ(rk.paths[0].entropy.sport_lo, 50000);
  EXPECT_EQ(rk.paths[1].entropy.sport_hi, 51999);
}

TEST(PathRanker, LowBufferAddsExponentialPenaltyAndFailsBufferConstraint) {
  Topology t = Diamond(R"(,"free_buffer_bytes":1468006)");  // 1.4 MiB
  PathRanker r(t, Policy{});
  Ranking rk = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 60, 0);
  ASSERT_EQ(rk.paths.size(), 2u);
  // The S1 path is slower but meets every constraint, so it ranks first.
  EXPECT_EQ(Via(t, rk.paths[0]), "S1");
  EXPECT_TRUE(rk.paths[0].feasible);
  const RankedPath& s0 = rk.paths[1];
  EXPECT_FALSE(s0.feasible);
  EXPECT_FALSE(s0.verdicts.buffer);
  double expect = 10000.0 * std::exp((1.5 * 1048576 - 1468006) / 102400.0);
  EXPECT_NEAR(s0.penalty, expect, 1e-6);
  EXPECT_NEAR(expect, 27845, 5);  // hand check: exp(1.024) * 1e4
}

TEST(PathRanker, HopLatencyAbove85usFailsConstraint) {
  Topology t = Diamond(R"(,"latency_us":86)");
  PathRanker r(t, Policy{});
  Ranking rk = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 0, 0);
  ASSERT_EQ(rk.paths.size(), 2u);
  EXPECT_EQ(Via(t, rk.paths[0]), "S1");
  EXPECT_FALSE(rk.paths[1].verdicts.hop_latency);
}

TEST(PathRanker, BandwidthConstraintUsesSizeOverTimeoutMinusOverhead) {
  // need = 1.2 * 1 MiB * 8 bit / (10000 - 300) us = 1.0378 Gb/s.
  Policy p;
  {
    Topology t = Diamond("", R"(,"capacity_gbps":1.04)");
    PathRanker r(t, p);
    EXPECT_TRUE(r.Rank(*t.FindNode("a"), *t.FindNode("b"), 0, 1 << 20).sla_attainable);
  }
  Topology t = Diamond("", R"(,"capacity_gbps":2,"utilization":0.5)");  // 1 Gb/s free
  PathRanker r(t, p);
  Ranking rk = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 0, 1 << 20);
  EXPECT_FALSE(rk.sla_attainable);
  ASSERT_FALSE(rk.paths.empty());  // best path anyway
  EXPECT_FALSE(rk.paths[0].verdicts.bandwidth);
  EXPECT_DOUBLE_EQ(rk.paths[0].bottleneck_gbps, 1.0);
  p.transfer_timeout_us = 20000;  // a knob, not a constant
  PathRanker relaxed(t, p);
  EXPECT_TRUE(relaxed.Rank(*t.FindNode("a"), *t.FindNode("b"), 0, 1 << 20).sla_attainable);
}

TEST(PathRanker, Level1AllowsOnlySingleHopAndFallsBackFlaggedUnattainable) {
  Topology t = Diamond();
  PathRanker r(t, Policy{});
  Ranking same_leaf = r.Rank(*t.FindNode("a"), *t.FindNode("c"), 40, 0);
  EXPECT_EQ(same_leaf.level, SlaLevel::kLevel1);
  EXPECT_TRUE(same_leaf.sla_attainable);
  ASSERT_EQ(same_leaf.paths.size(), 1u);
  EXPECT_EQ(same_leaf.paths[0].path.nodes.size(), 3u);
  EXPECT_EQ(same_leaf.paths[0].entropy.sport_lo, 0);  // nothing to choose: any port
  Ranking cross = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 40, 0);
  EXPECT_FALSE(cross.sla_attainable);
  ASSERT_EQ(cross.paths.size(), 2u);
  EXPECT_FALSE(cross.paths[0].verdicts.level);
  EXPECT_EQ(Via(t, cross.paths[0]), "S0");
}

TEST(PathRanker, Level2ExcludesCoreTierOfFatTree) {
  FatTreeSpec spec;
  spec.k = 4;
  Topology t = GenerateFatTree(spec);
  PathRanker r(t, Policy{});
  uint32_t h0 = *t.FindNode("h0-nic0"), h2 = *t.FindNode("h2-nic0"), h15 = *t.FindNode("h15-nic0");
  Ranking in_pod = r.Rank(h0, h2, 80, 0);  // h0 and h2 share pod 0, different edge switches
  EXPECT_EQ(in_pod.level, SlaLevel::kLevel2);
  EXPECT_TRUE(in_pod.sla_attainable);
  for (const auto& p : in_pod.paths)
    for (uint32_t n : p.path.nodes) EXPECT_NE(t.node(n).kind, NodeKind::kCore);
  Ranking cross = r.Rank(h0, h15, 80, 0);
  EXPECT_FALSE(cross.sla_attainable);
  ASSERT_FALSE(cross.paths.empty());
  EXPECT_TRUE(r.Rank(h0, h15, 150, 0).sla_attainable);  // Level 3 may use the core
}

TEST(PathRanker, DownLinksAreAvoidedAndDegradedOnesRankLast) {
  Topology t = Diamond();
  PathRanker r(t, Policy{});
  r.SetLinkState(*t.FindLink("L0", "S0"), LinkState::kDegraded);
  Ranking rk = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 0, 0);
  ASSERT_EQ(rk.paths.size(), 2u);
  EXPECT_EQ(Via(t, rk.paths[0]), "S1");
  EXPECT_FALSE(rk.paths[1].verdicts.healthy);
  r.SetLinkState(*t.FindLink("L0", "S0"), LinkState::kDown);
  rk = r.Rank(*t.FindNode("a"), *t.FindNode("b"), 0, 0);
  ASSERT_EQ(rk.paths.size(), 1u);
  EXPECT_EQ(Via(t, rk.paths[0]), "S1");
}

TEST(PathEntropy, LinearHashMapsViaIndexToPortAndUnlistedSpineIsUnsteerable) {
  std::string err;
  auto t = ParseTopologyJson(R"({"version":1,"nodes":[
    {"id":"a","kind":"nic"},{"id":"b","kind":"nic"},{"id":"L0","kind":"leaf"},{"id":"L1","kind":"leaf"},
    {"id":"S0","kind":"spine"},{"id":"S1","kind":"spine"},{"id":"S2","kind":"spine"}],
   "links":[{"a":"a","b":"L0"},{"a":"b","b":"L1"},{"a":"L0","b":"S0"},{"a":"L1","b":"S0"},
            {"a":"L0","b":"S1","latency_us":2},{"a":"L1","b":"S1","latency_us":2},
            {"a":"L0","b":"S2","latency_us":3},{"a":"L1","b":"S2","latency_us":3}],
   "entropy":{"kind":"linear-hash","base":60000,"vias":["S0","S1"]}})", &err);
  ASSERT_TRUE(t) << err;
  PathRanker r(*t, Policy{});
  Ranking rk = r.Rank(*t->FindNode("a"), *t->FindNode("b"), 0, 0);
  ASSERT_EQ(rk.paths.size(), 3u);
  EXPECT_EQ(Via(*t, rk.paths[0]), "S0");
  EXPECT_EQ(rk.paths[0].entropy.sport_lo, 60000);
  EXPECT_EQ(Via(*t, rk.paths[1]), "S1");
  EXPECT_EQ(rk.paths[1].entropy.sport_lo, 60001);
  EXPECT_EQ(rk.paths[1].entropy.sport_hi, 60001);
  EXPECT_EQ(Via(*t, rk.paths[2]), "S2");
  EXPECT_FALSE(rk.paths[2].verdicts.steerable);
  EXPECT_FALSE(rk.paths[2].feasible);
}

TEST(Generators, ProduceTheDocumentedShapes) {
  FatTreeSpec ft;
  ft.k = 8;
  Topology f = GenerateFatTree(ft);
  size_t hosts = 0, core = 0;
  for (const auto& n : f.nodes()) {
    hosts += n.kind == NodeKind::kHost;
    core += n.kind == NodeKind::kCore;
  }
  EXPECT_EQ(hosts, 8u * 8 * 8 / 4);
  EXPECT_EQ(core, 16u);
  EXPECT_EQ(f.links().size(), 128u + 128 + 128);  // host, edge-agg, agg-core
  LeafSpineSpec ls;
  ls.leaves = 3;
  ls.spines = 5;
  Topology l = GenerateLeafSpine(ls);
  ASSERT_EQ(l.entropy.ranges.size(), 5u);
  EXPECT_EQ(l.entropy.ranges.front().lo, 49152);
  EXPECT_EQ(l.entropy.ranges.back().hi, 65535);
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(l.entropy.ranges[i].lo, l.entropy.ranges[i - 1].hi + 1);
  RailSpec rs;
  rs.hosts = 4;
  rs.rails = 3;
  Topology r = GenerateRail(rs);
  // NIC r of each host hangs off rail switch r.
  for (int h = 0; h < 4; ++h)
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(r.FindLink("h" + std::to_string(h) + "-nic" + std::to_string(k), "rail" + std::to_string(k)));
  EXPECT_THROW(GenerateFatTree(FatTreeSpec{3, {}}), std::invalid_argument);
}

}  // namespace
}  // namespace ff::pathctl
