// Path names: the local interface, both addresses and the spine the oracle steered through, and
// that a re-steered path gets the new spine's name (not a number).
#include <gtest/gtest.h>

#include <string>

#include "pathctl/path_name.h"
#include "pathctl/path_oracle.h"
#include "pathctl/topology_generators.h"

namespace ff::pathctl {
namespace {

// 2 leaves x 2 spines, 2 hosts per leaf: h0 10.0.0.2 and h1 10.0.1.2 on leaf0, h2 10.0.2.2 on leaf1.
std::shared_ptr<PathOracle> SmallFabric() {
  LeafSpineSpec spec;
  spec.leaves = 2;
  spec.spines = 2;
  spec.hosts_per_leaf = 2;
  return PathOracle::FromTopology(GenerateLeafSpine(spec));
}

TEST(PathName, CrossLeafPathNamesInterfaceAddressesAndTheChosenSpine) {
  auto o = SmallFabric();
  auto c = o->Query({"10.0.0.2"}, "10.0.2.2", 0, 0);
  ASSERT_TRUE(c->routed);
  ASSERT_EQ(c->hops.size(), 5u);  // nic, leaf, spine, leaf, nic
  const std::string spine = c->hops[2];
  EXPECT_EQ(SteeredSwitches(o->topology(), c->hops), std::vector<std::string>{spine});
  EXPECT_EQ(SteeredPathName(o->topology(), *c, "ens1f0"), "ens1f0 10.0.0.2 -> 10.0.2.2 via " + spine);
  // No interface name from the host: the topology's name for the NIC stands in.
  EXPECT_EQ(SteeredPathName(o->topology(), *c, ""), "eth0 10.0.0.2 -> 10.0.2.2 via " + spine);
  EXPECT_EQ(SteeredPathName(o->topology(), *c, "").find(std::to_string(c->path_id)), std::string::npos);
}

TEST(PathName, ReSteeredPathNamesTheOtherSpine) {
  auto o = SmallFabric();
  auto before = o->Query({"10.0.0.2"}, "10.0.2.2", 0, 0);
  const std::string first_spine = before->hops[2];
  ASSERT_TRUE(o->ReportLinkHealth("leaf0~" + first_spine, {HealthSignalKind::kCarrierDown}));
  auto after = o->Query({"10.0.0.2"}, "10.0.2.2", 0, 0);
  const std::string name = SteeredPathName(o->topology(), *after, "eth0");
  EXPECT_NE(name, SteeredPathName(o->topology(), *before, "eth0"));
  EXPECT_EQ(name.find(first_spine), std::string::npos) << name;
  EXPECT_EQ(name, "eth0 10.0.0.2 -> 10.0.2.2 via " + after->hops[2]);
}

TEST(PathName, SameLeafPathCrossesNoSpineAndSaysNone) {
  auto o = SmallFabric();
  auto c = o->Query({"10.0.0.2"}, "10.0.1.2", 0, 0);
  ASSERT_TRUE(c->routed);
  EXPECT_TRUE(SteeredSwitches(o->topology(), c->hops).empty());
  EXPECT_EQ(SteeredPathName(o->topology(), *c, "eth0"), "eth0 10.0.0.2 -> 10.0.1.2");
}

TEST(PathName, EmbeddedGraphHasNoSpinesAndNoInterfaceNames) {
  // The graph built from interfaces alone has one synthetic switch: not worth naming.
  auto o = PathOracle::FromInterfaces({"10.0.0.1"}, {"10.0.1.1"});
  auto c = o->Query({"10.0.0.1"}, "10.0.1.1", 0, 0);
  EXPECT_EQ(SteeredPathName(o->topology(), *c, ""), "10.0.0.1 -> 10.0.1.1");
}

TEST(PathName, UnsteeredAndReceivedNames) {
  EXPECT_EQ(UnsteeredPathName("eth1", "10.0.0.1", "10.0.0.2"), "eth1 -> 10.0.0.2");
  EXPECT_EQ(UnsteeredPathName("", "10.0.0.1", "10.0.0.2"), "10.0.0.1 -> 10.0.0.2");
  EXPECT_EQ(ReceivedPathName("eth0", "10.0.0.2", "10.0.0.1"), "eth0 <- 10.0.0.1");
  EXPECT_EQ(ReceivedPathName("", "10.0.0.2", "10.0.0.1"), "10.0.0.2 <- 10.0.0.1");
}

}  // namespace
}  // namespace ff::pathctl
