// The oracle's topo_distance: the PCIe distance between the GPU and each local NIC, read from
// generated sysfs fixture trees of real layouts (tests/pcie/fixtures), changes which NIC's path the
// oracle picks and the score it reports; a fabric path better by more than the distance's cost
// still wins.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pathctl/path_oracle.h"
#include "pcie/device_inventory.h"
#include "tests/pcie/generated_tree.h"

namespace ff::pathctl {
namespace {

using ff::testing::GeneratedTree;
using pcie::PciDistance;

constexpr const char* kRemote = "10.9.0.1";

// Local NIC i of the fixture gets address 10.0.0.<i+1>.
std::string NicIp(size_t i) { return "10.0.0." + std::to_string(i + 1); }

struct Host {
  pcie::Inventory inv;
  std::vector<std::string> ips;  // of inv.nics, in the inventory's order
};

Host Load(const GeneratedTree& t) {
  Host h;
  h.inv = pcie::ScanInventory(t.root());
  for (size_t i = 0; i < h.inv.nics.size(); ++i) h.ips.push_back(NicIp(i));
  return h;
}

// The query's locals listed farthest NIC first (as a PathOrder that knew nothing of PCIe might),
// with each one's distance from `gpu`.
void FarthestFirst(const Host& h, size_t gpu, std::vector<std::string>* locals, TopoDistances* topo) {
  std::vector<size_t> order(h.inv.nics.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto dist = [&](size_t n) { return pcie::ClassifyDistance(h.inv.gpus[gpu].placement, h.inv.nics[n].placement); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist(a) > dist(b); });
  locals->clear();
  topo->clear();
  for (size_t n : order) {
    locals->push_back(h.ips[n]);
    topo->push_back(pcie::KnownDistance(h.inv.gpus[gpu].placement, h.inv.nics[n].placement));
  }
}

size_t NicOf(const Host& h, const std::string& ip) {
  return static_cast<size_t>(std::find(h.ips.begin(), h.ips.end(), ip) - h.ips.begin());
}

TEST(TopoDistanceOracle, DgxH100EachGpuGetsTheNicOnItsSwitchAndSameSocketBackups) {
  GeneratedTree t("dgx_h100.topo");
  ASSERT_TRUE(t.ok());
  const Host h = Load(t);
  ASSERT_EQ(h.inv.gpus.size(), 8u);
  ASSERT_EQ(h.inv.nics.size(), 8u);
  // Every NIC's path to the peer is alike in the fabric: only PCIe tells them apart.
  auto oracle = PathOracle::FromInterfaces(h.ips, {kRemote});
  for (size_t g = 0; g < 8; ++g) {
    SCOPED_TRACE("GPU " + std::to_string(g));
    std::vector<std::string> locals;
    TopoDistances topo;
    FarthestFirst(h, g, &locals, &topo);

    auto blind = oracle->Query(locals, kRemote, 0, 0);
    ASSERT_TRUE(blind->routed);
    EXPECT_EQ(blind->local_ip, locals[0]) << "without distances a tie goes to the first listed NIC";
    EXPECT_FALSE(blind->topo_distance);

    auto c = oracle->Query(locals, kRemote, 0, 0, topo);
    ASSERT_TRUE(c->routed);
    EXPECT_EQ(NicOf(h, c->local_ip), g) << "GPU i and NIC i share a PCIe switch";
    ASSERT_TRUE(c->topo_distance);
    EXPECT_EQ(*c->topo_distance, PciDistance::kPix);
    EXPECT_DOUBLE_EQ(c->score, blind->score) << "PIX costs nothing";
    ASSERT_EQ(c->backups.size(), 2u);
    for (const auto& b : c->backups) {
      EXPECT_EQ(NicOf(h, b.local_ip) / 4, g / 4) << "a backup NIC on the GPU's socket before one across it";
      ASSERT_TRUE(b.topo_distance);
      EXPECT_EQ(*b.topo_distance, PciDistance::kNode);
    }
  }
}

TEST(TopoDistanceOracle, ScoreGrowsWithTheDistanceOfTheOnlyNic) {
  GeneratedTree t("dgx_h100.topo");
  ASSERT_TRUE(t.ok());
  const Host h = Load(t);
  ASSERT_EQ(h.inv.nics.size(), 8u);
  auto oracle = PathOracle::FromInterfaces(h.ips, {kRemote});
  const Policy policy;
  const auto& gpu0 = h.inv.gpus[0].placement;
  const double base = oracle->Query({h.ips[0]}, kRemote, 0, 0)->score;
  // NIC 0: PIX, NIC 1: NODE, NIC 4: SYS from GPU 0.
  for (size_t n : {size_t{0}, size_t{1}, size_t{4}}) {
    const auto d = pcie::KnownDistance(gpu0, h.inv.nics[n].placement);
    ASSERT_TRUE(d);
    auto c = oracle->Query({h.ips[n]}, kRemote, 0, 0, {d});
    EXPECT_DOUBLE_EQ(c->score, base + policy.topo_distance_cost_us[static_cast<int>(*d)])
        << "NIC " << n << " at " << pcie::DistanceName(*d);
  }
  EXPECT_LT(policy.topo_distance_cost_us[static_cast<int>(PciDistance::kPix)],
            policy.topo_distance_cost_us[static_cast<int>(PciDistance::kSys)]);
}

TEST(TopoDistanceOracle, TwoSocketServerPicksTheNearestClassForEveryGpu) {
  GeneratedTree t("two_socket.topo");
  ASSERT_TRUE(t.ok());
  const Host h = Load(t);
  ASSERT_EQ(h.inv.nics.size(), 4u);
  auto oracle = PathOracle::FromInterfaces(h.ips, {kRemote});
  // GPU0: PXB to the dual-port NIC, PHB, NODE; GPU2: PIX to NIC3; GPU3 (other socket): SYS to all.
  const std::vector<PciDistance> nearest = {PciDistance::kPxb, PciDistance::kPxb, PciDistance::kPix,
                                            PciDistance::kSys};
  for (size_t g = 0; g < 4; ++g) {
    SCOPED_TRACE("GPU " + std::to_string(g) + " " + h.inv.gpus[g].address);
    std::vector<std::string> locals;
    TopoDistances topo;
    FarthestFirst(h, g, &locals, &topo);
    auto c = oracle->Query(locals, kRemote, 0, 0, topo);
    ASSERT_TRUE(c->topo_distance);
    EXPECT_EQ(pcie::DistanceName(*c->topo_distance), pcie::DistanceName(nearest[g]));
    EXPECT_EQ(*c->topo_distance,
              pcie::ClassifyDistance(h.inv.gpus[g].placement, h.inv.nics[NicOf(h, c->local_ip)].placement));
  }
}

// Two local NICs into one leaf: `near` (PIX) on a link of `near_us`, `far` (SYS) on 1 us.
std::shared_ptr<PathOracle> TwoNics(double near_us) {
  Topology t;
  std::string err;
  t.AddNode({"local", NodeKind::kHost, "", "", "", -1}, &err);
  t.AddNode({"remote", NodeKind::kHost, "", "", "", -1}, &err);
  t.AddNode({"near", NodeKind::kNic, "local", "10.0.0.1", "", -1}, &err);
  t.AddNode({"far", NodeKind::kNic, "local", "10.0.0.2", "", -1}, &err);
  t.AddNode({"leaf", NodeKind::kLeaf, "", "", "", -1}, &err);
  t.AddNode({"peer", NodeKind::kNic, "remote", kRemote, "", -1}, &err);
  Link l;
  l.a = 2, l.b = 4, l.latency_us = near_us;
  EXPECT_TRUE(t.AddLink(l, &err)) << err;
  l = Link{};
  l.a = 3, l.b = 4, l.latency_us = 1;
  EXPECT_TRUE(t.AddLink(l, &err)) << err;
  l = Link{};
  l.a = 4, l.b = 5, l.latency_us = 1;
  EXPECT_TRUE(t.AddLink(l, &err)) << err;
  t.Finalize();
  return PathOracle::FromTopology(std::move(t));
}

TEST(TopoDistanceOracle, ABetterFabricPathOutweighsTheDistanceOnlyWhenBetterByMoreThanItsCost) {
  const TopoDistances topo = {PciDistance::kPix, PciDistance::kSys};
  const std::vector<std::string> locals = {"10.0.0.1", "10.0.0.2"};
  // Near NIC's link 2 us slower: the SYS cost (4 us) is larger, the near NIC wins with distances.
  auto slightly = TwoNics(3);
  EXPECT_EQ(slightly->Query(locals, kRemote, 0, 0)->local_ip, "10.0.0.2");
  EXPECT_EQ(slightly->Query(locals, kRemote, 0, 0, topo)->local_ip, "10.0.0.1");
  // 9 us slower: the far NIC's path is still the better one.
  auto much = TwoNics(10);
  auto c = much->Query(locals, kRemote, 0, 0, topo);
  EXPECT_EQ(c->local_ip, "10.0.0.2");
  ASSERT_TRUE(c->topo_distance);
  EXPECT_EQ(*c->topo_distance, PciDistance::kSys);
  ASSERT_EQ(c->backups.size(), 1u);
  EXPECT_EQ(c->backups[0].local_ip, "10.0.0.1");
  EXPECT_EQ(c->backups[0].topo_distance, PciDistance::kPix);
}

TEST(TopoDistanceOracle, DistancesArePartOfTheCachedQuery) {
  auto o = TwoNics(3);
  const std::vector<std::string> locals = {"10.0.0.1", "10.0.0.2"};
  auto blind = o->Query(locals, kRemote, 0, 0);
  auto seen = o->Query(locals, kRemote, 0, 0, {PciDistance::kPix, PciDistance::kSys});
  EXPECT_NE(blind->local_ip, seen->local_ip) << "a cached answer without distances was returned for one with them";
  // Unknown distances are no distances: the same cached answer.
  EXPECT_EQ(o->Query(locals, kRemote, 0, 0, {std::nullopt, std::nullopt}), blind);
  EXPECT_EQ(o->Query(locals, kRemote, 0, 0, {PciDistance::kPix, PciDistance::kSys}), seen);
}

}  // namespace
}  // namespace ff::pathctl
