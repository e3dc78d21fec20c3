// Distance classes between two placements, and NIC ordering by distance to a GPU.
#include "pcie/topo_distance.h"

#include <gtest/gtest.h>

namespace ff::pcie {
namespace {

PciPlacement At(const std::string& path, int numa) {
  PciPlacement p;
  p.chain = ParsePciChain(path);
  p.numa_node = numa;
  return p;
}

const std::string kSwitch = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0";

TEST(TopoDistance, SameSwitchIsPix) {
  auto gpu = At(kSwitch + "/0000:17:00.0/0000:18:00.0", 0);
  auto nic = At(kSwitch + "/0000:17:01.0/0000:19:00.0", 0);
  EXPECT_EQ(SwitchesBetween(*gpu.chain, *nic.chain), 1);
  EXPECT_EQ(ClassifyDistance(gpu, nic), PciDistance::kPix);
}

TEST(TopoDistance, FunctionsOfOneDeviceOnARootPortArePix) {
  auto a = At("/sys/devices/pci0000:00/0000:00:02.0/0000:08:00.0", 0);
  auto b = At("/sys/devices/pci0000:00/0000:00:02.0/0000:08:00.1", 0);
  EXPECT_EQ(SwitchesBetween(*a.chain, *b.chain), 0);
  EXPECT_EQ(ClassifyDistance(a, b), PciDistance::kPix);
}

TEST(TopoDistance, NestedSwitchIsPxb) {
  auto gpu = At(kSwitch + "/0000:17:00.0/0000:20:00.0/0000:21:00.0/0000:22:00.0", 0);
  auto nic = At(kSwitch + "/0000:17:01.0/0000:19:00.0", 0);
  EXPECT_EQ(SwitchesBetween(*gpu.chain, *nic.chain), 2);
  EXPECT_EQ(ClassifyDistance(gpu, nic), PciDistance::kPxb);
  EXPECT_EQ(ClassifyDistance(nic, gpu), PciDistance::kPxb);
}

TEST(TopoDistance, DifferentRootPortsOfOneHostBridgeArePhb) {
  auto gpu = At("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0);
  auto nic = At("/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", 0);
  EXPECT_EQ(ClassifyDistance(gpu, nic), PciDistance::kPhb);
}

TEST(TopoDistance, HostBridgesOnOneNodeAreNodeAndAcrossNodesSys) {
  auto gpu = At("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0", 0);
  auto same = At("/sys/devices/pci0000:27/0000:27:01.0/0000:28:00.0", 0);
  auto other = At("/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0", 1);
  EXPECT_EQ(ClassifyDistance(gpu, same), PciDistance::kNode);
  EXPECT_EQ(ClassifyDistance(gpu, other), PciDistance::kSys);
}

TEST(TopoDistance, UnknownNumaIsNotCalledACrossSocketPath) {
  auto gpu = At("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0", -1);
  auto nic = At("/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0", 1);
  EXPECT_EQ(ClassifyDistance(gpu, nic), PciDistance::kNode);
}

TEST(TopoDistance, DeviceOffPciIsSys) {
  auto gpu = At("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0", 0);
  PciPlacement nowhere;
  EXPECT_EQ(ClassifyDistance(gpu, nowhere), PciDistance::kSys);
}

TEST(TopoDistance, KnownDistanceIsNoneOnlyWhenNeitherDeviceIsOnPci) {
  auto gpu = At("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0", 0);
  auto same = At("/sys/devices/pci0000:27/0000:27:01.0/0000:28:00.0", 0);
  PciPlacement veth, lo;
  EXPECT_EQ(KnownDistance(veth, lo), std::nullopt) << "two virtual interfaces: nothing to rank by";
  EXPECT_EQ(KnownDistance(gpu, veth), PciDistance::kSys);
  EXPECT_EQ(KnownDistance(veth, gpu), PciDistance::kSys);
  EXPECT_EQ(KnownDistance(gpu, same), PciDistance::kNode);
}

TEST(TopoDistance, OrderByDistanceNearestFirstStableOnTies) {
  auto gpu = At(kSwitch + "/0000:17:00.0/0000:18:00.0", 0);
  std::vector<PciPlacement> nics = {
      At("/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0", 1),  // SYS
      At("/sys/devices/pci0000:27/0000:27:01.0/0000:28:00.0", 0),  // NODE
      At(kSwitch + "/0000:17:01.0/0000:19:00.0", 0),               // PIX
      At("/sys/devices/pci0000:37/0000:37:01.0/0000:38:00.0", 0),  // NODE
      At("/sys/devices/pci0000:15/0000:15:02.0/0000:1a:00.0", 0),  // PHB
  };
  EXPECT_EQ(OrderByDistance(gpu, nics), (std::vector<size_t>{2, 4, 1, 3, 0}));
  EXPECT_TRUE(OrderByDistance(gpu, {}).empty());
}

TEST(TopoDistance, NamesMatchNvidiaSmi) {
  EXPECT_EQ(DistanceName(PciDistance::kPix), "PIX");
  EXPECT_EQ(DistanceName(PciDistance::kPxb), "PXB");
  EXPECT_EQ(DistanceName(PciDistance::kPhb), "PHB");
  EXPECT_EQ(DistanceName(PciDistance::kNode), "NODE");
  EXPECT_EQ(DistanceName(PciDistance::kSys), "SYS");
}

}  // namespace
}  // namespace ff::pcie
