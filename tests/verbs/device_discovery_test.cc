// Device discovery on the fixture host: ACTIVE ports only, link layer, rate in Mbps, netdev, pciPath
// (the device node, or the netdev's for virtual rxe), GUID, GID; NCCL_IB_HCA applied; with the fake
// libibverbs, port state comes from ibv_query_port rather than sysfs.
#include "verbs/device_discovery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sys/socket.h>

#include "pcie/device_inventory.h"
#include "pcie/net_device_path.h"
#include "tests/verbs/fake_verbs.h"
#include "tests/verbs/verbs_fixture.h"

namespace ff::verbs {
namespace {

std::vector<std::string> Names(const Discovery& d) {
  std::vector<std::string> out;
  for (const auto& p : d.ports) out.push_back(p.device + ":" + std::to_string(p.port));
  return out;
}

const VerbsPort* Find(const Discovery& d, const std::string& device) {
  for (const auto& p : d.ports) {
    if (p.device == device) return &p;
  }
  return nullptr;
}

class DeviceDiscovery : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fixture_.ok()); }
  DiscoveryOptions Options(const char* hca = "") {
    DiscoveryOptions o;
    o.root = fixture_.root();
    Status s = HcaFilter::Parse(hca, &o.filter);
    EXPECT_TRUE(s.ok()) << s.message();
    return o;
  }
  testing::VerbsFixture fixture_;
};

TEST_F(DeviceDiscovery, SysfsListsActiveUsablePortsWithTheirFacts) {
  Discovery d = DiscoverFromSysfs(Options());
  // mlx5_1 is DOWN; mlx5_2 is ACTIVE but has only link-local GIDs (a warning, not a port).
  EXPECT_EQ(Names(d), (std::vector<std::string>{"mlx5_0:1", "mlx5_3:1", "rxe0:1"}));
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_NE(d.warnings[0].find("mlx5_2 port 1: no usable RoCE GID"), std::string::npos) << d.warnings[0];

  const VerbsPort* m = Find(d, "mlx5_0");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->infiniband);
  EXPECT_EQ(m->speed_mbps, 100000);
  EXPECT_EQ(m->netdev, "ens1f0np0");
  EXPECT_EQ(m->pci_path, fixture_.Real("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"));
  EXPECT_EQ(m->guid, 0xb83fd203006ae616ull);
  EXPECT_EQ(m->gid.index, 3);

  const VerbsPort* ib = Find(d, "mlx5_3");
  ASSERT_NE(ib, nullptr);
  EXPECT_TRUE(ib->infiniband);
  EXPECT_EQ(ib->speed_mbps, 200000);
  EXPECT_EQ(ib->gid.index, 0);
  EXPECT_TRUE(ib->netdev.empty());
  EXPECT_EQ(ib->pci_path, fixture_.Real("sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0"));

  const VerbsPort* rxe = Find(d, "rxe0");
  ASSERT_NE(rxe, nullptr);
  EXPECT_EQ(rxe->speed_mbps, 10000);
  EXPECT_EQ(rxe->netdev, "eth0");
  // No device node: the virtio netdev's device, as NCCL's topology needs a PCI position.
  EXPECT_EQ(rxe->pci_path, fixture_.Real("sys/devices/pci0000:00/0000:00:03.0/virtio0"));
}

// getProperties().pciPath of a verbs device is the path the PCIe component resolved for the same
// NIC (its inventory, which also places it for distances), so NCCL pairs GPUs and NICs alike for
// both transports.
TEST_F(DeviceDiscovery, PciPathIsThePcieComponentsResolvedDevicePath) {
  Discovery d = DiscoverFromSysfs(Options());
  ASSERT_EQ(d.ports.size(), 3u);
  const pcie::Inventory inv = pcie::ScanInventory(fixture_.root());
  for (const VerbsPort& p : d.ports) {
    SCOPED_TRACE(p.device);
    const pcie::NicDevice* nic = nullptr;
    for (const auto& n : inv.nics) {
      const bool rdma = std::find(n.rdma_devices.begin(), n.rdma_devices.end(), p.device) != n.rdma_devices.end();
      // rxe0 has no device node of its own: the NIC is its netdev's.
      const bool carrier = n.rdma_devices.empty() &&
                           std::find(n.netdevs.begin(), n.netdevs.end(), p.netdev) != n.netdevs.end();
      if (rdma || carrier) nic = &n;
    }
    ASSERT_NE(nic, nullptr) << "the PCIe inventory does not list the NIC of " << p.device;
    EXPECT_EQ(p.pci_path, nic->sysfs_path);
    EXPECT_EQ(p.pci_path, pcie::RdmaDevicePath(fixture_.root() + "/sys", p.device, p.netdev));
    const pcie::PciPlacement where = pcie::PlaceDevicePath(p.pci_path);
    ASSERT_TRUE(where.chain.has_value()) << p.pci_path;
    EXPECT_EQ(where.chain->host_bridge, nic->placement.chain->host_bridge);
    EXPECT_EQ(where.numa_node, nic->placement.numa_node);
  }
  // Names that are no device: nothing resolves, nothing outside the class directory is read.
  const std::string sys = fixture_.root() + "/sys";
  EXPECT_EQ(pcie::RdmaDevicePath(sys, "nosuch"), "");
  EXPECT_EQ(pcie::RdmaDevicePath(sys, ".."), "");
  EXPECT_EQ(pcie::RdmaDevicePath(sys, "../infiniband/mlx5_0"), "");
  EXPECT_EQ(pcie::RdmaDevicePath(sys, "", "eth0"), fixture_.Real("sys/devices/pci0000:00/0000:00:03.0/virtio0"));
  EXPECT_EQ(pcie::RdmaDevicePath(sys, "rxe0", "../net/eth0"), "");
}

TEST_F(DeviceDiscovery, HcaFilterSelectsDevicesAndPorts) {
  EXPECT_EQ(Names(DiscoverFromSysfs(Options("mlx5"))), (std::vector<std::string>{"mlx5_0:1", "mlx5_3:1"}));
  EXPECT_EQ(Names(DiscoverFromSysfs(Options("^mlx5"))), (std::vector<std::string>{"rxe0:1"}));
  EXPECT_EQ(Names(DiscoverFromSysfs(Options("=mlx5_0:2"))), std::vector<std::string>{});
  Discovery d = DiscoverFromSysfs(Options("^=mlx5_2,mlx5_3:1"));
  EXPECT_EQ(Names(d), (std::vector<std::string>{"mlx5_0:1", "rxe0:1"}));
  EXPECT_TRUE(d.warnings.empty());  // the link-local-only port was filtered out before selection
}

TEST_F(DeviceDiscovery, GidPolicyApplies) {
  DiscoveryOptions o = Options("=mlx5_0");
  o.gid.addr_family = AF_INET6;
  Discovery d = DiscoverFromSysfs(o);
  ASSERT_EQ(d.ports.size(), 1u);
  EXPECT_EQ(d.ports[0].gid.index, 5);
}

TEST_F(DeviceDiscovery, VerbsStateWinsOverSysfsAndUnknownDevicesAreSkipped) {
  // The fake says mlx5_1 port 1 is ACTIVE (sysfs says DOWN) and mlx5_0 has a DOWN second port.
  testing::FakeVerbs fake("mlx5_1=A,mlx5_0=AD,mlx5_3=I");
  ASSERT_TRUE(fake.loader().available());
  Discovery d = DiscoverWithVerbs(fake.loader(), Options());
  EXPECT_EQ(Names(d), (std::vector<std::string>{"mlx5_0:1", "mlx5_1:1", "mlx5_3:1"}));
  const VerbsPort* m1 = Find(d, "mlx5_1");
  ASSERT_NE(m1, nullptr);
  EXPECT_EQ(m1->gid.index, 3);
  EXPECT_EQ(m1->active_mtu, IBV_MTU_1024);
  EXPECT_EQ(m1->speed_mbps, 100000);
  EXPECT_EQ(m1->guid, 0x0002c90300a0b000ull);  // ibv_get_device_guid, byte order converted
  const VerbsPort* ib = Find(d, "mlx5_3");
  ASSERT_NE(ib, nullptr);
  EXPECT_TRUE(ib->infiniband);
  EXPECT_EQ(ib->lid, 11);
  // Every context opened for discovery was closed again, and the list freed.
  const std::string log = fake.log();
  for (const char* dev : {"mlx5_0", "mlx5_1", "mlx5_3"}) {
    EXPECT_NE(log.find(std::string("open_device ") + dev), std::string::npos) << log;
    EXPECT_NE(log.find(std::string("close_device ") + dev), std::string::npos) << log;
  }
  EXPECT_NE(log.find("free_device_list"), std::string::npos) << log;
}

TEST_F(DeviceDiscovery, VerbsFilterSkipsDevicesWithoutOpeningThem) {
  testing::FakeVerbs fake("mlx5_0=A,rxe0=A");
  Discovery d = DiscoverWithVerbs(fake.loader(), Options("rxe"));
  EXPECT_EQ(Names(d), std::vector<std::string>{"rxe0:1"});
  EXPECT_EQ(fake.log().find("open_device mlx5_0"), std::string::npos) << fake.log();
}

TEST_F(DeviceDiscovery, MissingLibraryMeansNoPortsAndNoWarnings) {
  IbverbsLoader missing("libibverbs-absent.so.1");
  Discovery d = DiscoverWithVerbs(missing, Options());
  EXPECT_TRUE(d.ports.empty());
  EXPECT_TRUE(d.warnings.empty());
}

TEST(DeviceDiscoveryParsing, RateAndGuid) {
  EXPECT_EQ(ParseRateMbps("100 Gb/sec (4X EDR)"), 100000);
  EXPECT_EQ(ParseRateMbps("2.5 Gb/sec (1X SDR)"), 2500);
  EXPECT_EQ(ParseRateMbps("53.125 Gb/sec (1X HDR)"), 53125);
  EXPECT_EQ(ParseRateMbps("fast"), -1);
  EXPECT_EQ(ParseRateMbps("100 Mb/sec"), -1);
  EXPECT_EQ(ParseRateMbps("x Gb/sec (4X)"), -1);
  uint64_t g = 0;
  EXPECT_TRUE(ParseNodeGuid("b83f:d203:006a:E616", &g));
  EXPECT_EQ(g, 0xb83fd203006ae616ull);
  EXPECT_FALSE(ParseNodeGuid("b83f:d203:006a", &g));
  EXPECT_FALSE(ParseNodeGuid("b83f-d203-006a-e616", &g));
  EXPECT_FALSE(ParseNodeGuid("g83f:d203:006a:e616", &g));
}

}  // namespace
}  // namespace ff::verbs
