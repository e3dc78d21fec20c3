// The topology view on generated fixture trees of real layouts: whole GPU x NIC matrices,
// NUMA/CPU affinity, link degradation and AER, and the NIC device paths NCCL gets as pciPath.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "pcie/net_device_path.h"
#include "pcie/topo_report.h"
#include "tests/pcie/generated_tree.h"

namespace ff::pcie {
namespace {

using ff::testing::GeneratedTree;
using Matrix = std::vector<std::vector<std::string>>;

Matrix Names(const TopoReport& r) {
  Matrix m;
  for (const auto& row : r.matrix) {
    m.emplace_back();
    for (auto d : row) m.back().emplace_back(DistanceName(d));
  }
  return m;
}

std::vector<std::string> Addresses(const TopoReport& r, bool gpus) {
  std::vector<std::string> out;
  if (gpus) {
    for (const auto& g : r.inventory.gpus) out.push_back(g.address);
  } else {
    for (const auto& n : r.inventory.nics) out.push_back(n.address);
  }
  return out;
}

TEST(TopoFixture, DgxH100PairsEachGpuWithTheNicOnItsSwitch) {
  GeneratedTree t("dgx_h100.topo");
  ASSERT_TRUE(t.ok());
  TopoReport r = BuildTopoReport(t.root());
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_EQ(r.inventory.gpus.size(), 8u);
  ASSERT_EQ(r.inventory.nics.size(), 8u) << "lo and docker0 are virtual, NVMe is no NIC";
  EXPECT_EQ(Addresses(r, true),
            (std::vector<std::string>{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                      "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}));
  Matrix expected;
  for (int g = 0; g < 8; ++g) {
    expected.emplace_back();
    for (int n = 0; n < 8; ++n) expected.back().push_back(g == n ? "PIX" : g / 4 == n / 4 ? "NODE" : "SYS");
  }
  EXPECT_EQ(Names(r), expected);
  for (int i = 0; i < 8; ++i) {
    const auto& nic = r.inventory.nics[i];
    EXPECT_EQ(nic.rdma_devices, std::vector<std::string>{"mlx5_" + std::to_string(i)});
    ASSERT_EQ(nic.netdevs.size(), 1u);
    EXPECT_EQ(nic.name(), "mlx5_" + std::to_string(i));
    const int numa = i / 4;
    EXPECT_EQ(nic.placement.numa_node, numa);
    EXPECT_EQ(r.inventory.gpus[i].placement.numa_node, numa);
    EXPECT_EQ(r.inventory.gpus[i].cpulist, numa == 0 ? "0-55,112-167" : "56-111,168-223");
    EXPECT_EQ(r.inventory.gpus[i].vendor, kVendorNvidia);
    EXPECT_TRUE(r.gpu_health[i].present);
    EXPECT_FALSE(r.gpu_health[i].degraded);
    EXPECT_FALSE(r.nic_health[i].degraded);
    EXPECT_FALSE(r.nic_health[i].aer_errors);
    EXPECT_DOUBLE_EQ(*r.gpu_health[i].link.current_speed_gts, 32.0);
    // The nearest NIC first, then the other three on the socket, then the far socket.
    ASSERT_EQ(r.nics_by_distance[i].size(), 8u);
    EXPECT_EQ(r.nics_by_distance[i][0], static_cast<size_t>(i));
    for (int k = 1; k < 4; ++k) EXPECT_EQ(static_cast<int>(r.nics_by_distance[i][k]) / 4, i / 4);
    for (int k = 4; k < 8; ++k) EXPECT_NE(static_cast<int>(r.nics_by_distance[i][k]) / 4, i / 4);
  }
}

TEST(TopoFixture, TwoSocketServerHasEveryDistanceClass) {
  GeneratedTree t("two_socket.topo");
  ASSERT_TRUE(t.ok());
  TopoReport r = BuildTopoReport(t.root());
  EXPECT_TRUE(r.warnings.empty());
  // NVIDIA first by address, then the BMC's VGA.
  EXPECT_EQ(Addresses(r, true), (std::vector<std::string>{"0000:05:00.0", "0000:06:00.0", "0000:43:00.0",
                                                          "0000:81:00.0", "0000:09:00.0"}));
  EXPECT_EQ(r.inventory.gpus[4].vendor, 0x1a03u);
  EXPECT_EQ(r.inventory.gpus[4].class_code, 0x030000u);
  EXPECT_EQ(Addresses(r, false),
            (std::vector<std::string>{"0000:07:00.0", "0000:07:00.1", "0000:08:00.0", "0000:44:00.0"}));
  EXPECT_EQ(r.inventory.nics[0].netdevs, std::vector<std::string>{"ens1f0np0"});
  EXPECT_EQ(r.inventory.nics[1].rdma_devices, std::vector<std::string>{"mlx5_1"});
  EXPECT_TRUE(r.inventory.nics[2].rdma_devices.empty());
  EXPECT_EQ(r.inventory.nics[2].name(), "ens2f0");
  EXPECT_EQ(r.inventory.nics[3].name(), "mlx5_2");
  EXPECT_EQ(Names(r), (Matrix{{"PXB", "PXB", "PHB", "NODE"},
                              {"PXB", "PXB", "PHB", "NODE"},
                              {"NODE", "NODE", "NODE", "PIX"},
                              {"SYS", "SYS", "SYS", "SYS"},
                              {"PHB", "PHB", "PHB", "NODE"}}));
  EXPECT_EQ(r.inventory.gpus[3].placement.numa_node, 1);
  EXPECT_EQ(r.inventory.gpus[3].cpulist, "16-31,48-63");
  EXPECT_EQ(r.inventory.gpus[0].placement.chain->host_bridge, "pci0000:00");
  EXPECT_EQ(r.nics_by_distance[0], (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(r.nics_by_distance[2], (std::vector<size_t>{3, 0, 1, 2}));
}

TEST(TopoFixture, TwoSocketServerFlagsNarrowAndSlowLinksAndAer) {
  GeneratedTree t("two_socket.topo");
  ASSERT_TRUE(t.ok());
  TopoReport r = BuildTopoReport(t.root());
  ASSERT_EQ(r.gpu_health.size(), 5u);
  ASSERT_EQ(r.nic_health.size(), 4u);
  // NIC2 trained at x8 of x16, with AER errors.
  const auto& nic2 = r.nic_health[2];
  EXPECT_TRUE(nic2.degraded);
  EXPECT_EQ(*nic2.link.current_width, 8u);
  EXPECT_EQ(*nic2.link.capable_width(), 16u);
  EXPECT_TRUE(nic2.aer_errors);
  EXPECT_EQ(*nic2.link.aer_correctable, 4u);
  EXPECT_EQ(*nic2.link.aer_nonfatal, 1u);
  EXPECT_EQ(*nic2.link.aer_fatal, 0u);
  // NIC1 trained at Gen3 of Gen4: a NIC keeps its speed, so slower is a fault.
  EXPECT_TRUE(r.nic_health[1].degraded);
  EXPECT_DOUBLE_EQ(*r.nic_health[1].link.current_speed_gts, 8.0);
  EXPECT_DOUBLE_EQ(*r.nic_health[1].link.capable_speed_gts(), 16.0);
  EXPECT_FALSE(r.nic_health[1].aer_errors);
  // GPU1 at Gen3 of Gen4 and full width: GPUs slow idle links, no fault.
  EXPECT_FALSE(r.gpu_health[1].degraded);
  EXPECT_TRUE(r.gpu_health[1].slow_at_idle);
  // GPU2 trained at x8 of x16: narrow is a fault for a GPU too.
  EXPECT_TRUE(r.gpu_health[2].degraded);
  EXPECT_EQ(*r.gpu_health[2].link.current_width, 8u);
  EXPECT_FALSE(r.gpu_health[2].aer_errors);
  // GPU3: full link, AER errors only.
  EXPECT_FALSE(r.gpu_health[3].degraded);
  EXPECT_TRUE(r.gpu_health[3].aer_errors);
  EXPECT_EQ(*r.gpu_health[3].link.aer_correctable, 5u);
  EXPECT_EQ(*r.gpu_health[3].link.aer_nonfatal, 1u);
  for (size_t i : {0u, 4u}) {
    EXPECT_FALSE(r.gpu_health[i].degraded) << i;
    EXPECT_FALSE(r.gpu_health[i].slow_at_idle) << i;
    EXPECT_FALSE(r.gpu_health[i].aer_errors) << i;
  }
  for (size_t i : {0u, 3u}) {
    EXPECT_FALSE(r.nic_health[i].degraded) << i;
    EXPECT_FALSE(r.nic_health[i].aer_errors) << i;
  }
}

TEST(TopoFixture, JudgeLinkSeparatesFixedAndIdleScaledSpeeds) {
  PcieLinkState l;
  l.current_speed_gts = 2.5;
  l.max_speed_gts = 32.0;
  l.current_width = 16;
  l.max_width = 16;
  EXPECT_TRUE(JudgeLink(true, l, LinkSpeedPolicy::kFixed).degraded);
  auto gpu = JudgeLink(true, l, LinkSpeedPolicy::kIdleScaled);
  EXPECT_FALSE(gpu.degraded);
  EXPECT_TRUE(gpu.slow_at_idle);
  // A Gen5 device in a Gen4 slot trained at Gen4 is what the link can do.
  l.current_speed_gts = 16.0;
  l.upstream_max_speed_gts = 16.0;
  EXPECT_FALSE(JudgeLink(true, l, LinkSpeedPolicy::kFixed).degraded);
  // A link that is down (width 0) is degraded whatever the device is.
  l.current_width = 0;
  EXPECT_TRUE(JudgeLink(true, l, LinkSpeedPolicy::kIdleScaled).degraded);
}

TEST(TopoFixture, VmWithVirtioOnlyHasNoGpuAndOneNicWithoutLinkFiles) {
  GeneratedTree t("vm_virtio.topo");
  ASSERT_TRUE(t.ok());
  TopoReport r = BuildTopoReport(t.root());
  EXPECT_TRUE(r.inventory.gpus.empty());
  EXPECT_TRUE(r.matrix.empty());
  ASSERT_EQ(r.inventory.nics.size(), 1u) << "lo and ifb0 are virtual";
  const auto& nic = r.inventory.nics[0];
  EXPECT_EQ(nic.address, "0000:00:03.0");
  EXPECT_EQ(nic.netdevs, std::vector<std::string>{"eth0"});
  EXPECT_TRUE(nic.rdma_devices.empty());
  EXPECT_EQ(nic.placement.numa_node, -1);
  EXPECT_EQ(nic.cpulist, "");
  EXPECT_EQ(nic.sysfs_path, t.Real("sys/devices/pci0000:00/0000:00:03.0/virtio2"));
  EXPECT_FALSE(r.nic_health[0].present);
  EXPECT_FALSE(r.nic_health[0].degraded);
}

TEST(TopoFixture, NetDevicePathIsTheResolvedDeviceLinkAsNcclReadsIt) {
  GeneratedTree vm("vm_virtio.topo");
  GeneratedTree dgx("dgx_h100.topo");
  ASSERT_TRUE(vm.ok() && dgx.ok());
  EXPECT_EQ(NetDevicePath(vm.root() + "/sys", "eth0"),
            vm.Real("sys/devices/pci0000:00/0000:00:03.0/virtio2"));
  EXPECT_EQ(NetDevicePath(vm.root() + "/sys", "lo"), "");
  EXPECT_EQ(NetDevicePath(vm.root() + "/sys", "nosuch"), "");
  EXPECT_EQ(NetDevicePath(dgx.root() + "/sys", "ibp25s0"),
            dgx.Real("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0"));
}

TEST(TopoFixture, RdmaDevicePathIsTheSameDeviceAsItsNetdevs) {
  GeneratedTree dgx("dgx_h100.topo");
  GeneratedTree vm("vm_virtio.topo");
  ASSERT_TRUE(dgx.ok() && vm.ok());
  const std::string sys = dgx.root() + "/sys";
  // A ConnectX function carries both names: one device, one pciPath, whichever transport asks.
  EXPECT_EQ(RdmaDevicePath(sys, "mlx5_0"),
            dgx.Real("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0"));
  EXPECT_EQ(RdmaDevicePath(sys, "mlx5_0"), NetDevicePath(sys, "ibp25s0"));
  EXPECT_EQ(RdmaDevicePath(sys, "mlx5_5", "ibp25s0"), RdmaDevicePath(sys, "mlx5_5")) << "its own node first";
  // No such RDMA device (a virtual one): the netdev it runs over places it.
  EXPECT_EQ(RdmaDevicePath(vm.root() + "/sys", "rxe0", "eth0"),
            vm.Real("sys/devices/pci0000:00/0000:00:03.0/virtio2"));
  EXPECT_EQ(RdmaDevicePath(vm.root() + "/sys", "rxe0"), "");
  EXPECT_EQ(RdmaDevicePath(sys, "../net/ibp25s0"), "");
  EXPECT_EQ(NetDevicePath(sys, "../infiniband/mlx5_0"), "");
  EXPECT_EQ(NetDevicePath(sys, ""), "");
}

TEST(TopoFixture, GeneratedTreesUseRealRelativeSymlinksLikeTheKernel) {
  GeneratedTree dgx("dgx_h100.topo");
  ASSERT_TRUE(dgx.ok());
  namespace fs = std::filesystem;
  const fs::path sys = fs::path(dgx.root()) / "sys";
  const std::string dev = "devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0";
  ASSERT_TRUE(fs::is_symlink(sys / "class/net/ibp25s0"));
  EXPECT_EQ(fs::read_symlink(sys / "class/net/ibp25s0"), fs::path("../../" + dev + "/net/ibp25s0"));
  EXPECT_EQ(fs::read_symlink(sys / dev / "net/ibp25s0/device"), fs::path("../../../0000:19:00.0"));
  EXPECT_EQ(fs::read_symlink(sys / "class/infiniband/mlx5_0"),
            fs::path("../../" + dev + "/infiniband/mlx5_0"));
  EXPECT_EQ(fs::read_symlink(sys / "bus/pci/devices/0000:19:00.0"), fs::path("../../../" + dev));
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(sys / dev)));
}

TEST(TopoFixture, EmptyOrMissingRootYieldsAnEmptyInventory) {
  TopoReport r = BuildTopoReport("/nonexistent/ff-topo-root");
  EXPECT_TRUE(r.inventory.gpus.empty());
  EXPECT_TRUE(r.inventory.nics.empty());
}

// A connection's further paths (plugin/plugin_state.cc PathOrder) take the NICs nearest the one
// NCCL chose, from the same placements PlaceDevicePath reads off the pciPath we report.
TEST(TopoFixture, NicsOrderedByDistanceFromTheChosenNic) {
  GeneratedTree t("dgx_h100.topo");
  ASSERT_TRUE(t.ok());
  TopoReport r = BuildTopoReport(t.root());
  ASSERT_EQ(r.inventory.nics.size(), 8u);
  std::vector<PciPlacement> where;
  for (const auto& nic : r.inventory.nics) {
    where.push_back(PlaceDevicePath(NetDevicePath(t.root() + "/sys", nic.netdevs.front())));
    ASSERT_TRUE(where.back().chain.has_value()) << nic.netdevs.front();
  }
  EXPECT_EQ(where[5].numa_node, 1);
  // From NIC 5: itself, its socket's NICs (NODE), then the other socket's (SYS).
  EXPECT_EQ(OrderByDistance(where[5], where), (std::vector<size_t>{5, 4, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(OrderByDistance(where[2], where), (std::vector<size_t>{2, 0, 1, 3, 4, 5, 6, 7}));
  // Virtual interfaces (veth, lo) have no placement: they keep their order.
  const PciPlacement none = PlaceDevicePath("");
  EXPECT_FALSE(none.chain.has_value());
  EXPECT_EQ(OrderByDistance(none, std::vector<PciPlacement>(3, none)), (std::vector<size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace ff::pcie
