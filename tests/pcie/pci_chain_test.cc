// PCI chain parsing from resolved sysfs device paths.
#include "pcie/pci_chain.h"

#include <gtest/gtest.h>

namespace ff::pcie {
namespace {

using Functions = std::vector<std::string>;

TEST(PciChain, SwitchedEndpointYieldsRootPortToDevice) {
  auto c = ParsePciChain("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host_bridge, "pci0000:15");
  EXPECT_EQ(c->functions, (Functions{"0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"}));
  EXPECT_EQ(c->device(), "0000:18:00.0");
}

TEST(PciChain, VirtioAndClassNodesBelowTheFunctionAreIgnored) {
  auto c = ParsePciChain("/tmp/x/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host_bridge, "pci0000:00");
  EXPECT_EQ(c->functions, (Functions{"0000:00:03.0"}));
}

TEST(PciChain, VmdDomainKeepsTheOuterHostBridge) {
  auto c = ParsePciChain("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1d.0/10000:e1:00.0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host_bridge, "pci0000:00");
  EXPECT_EQ(c->functions, (Functions{"0000:00:0e.0", "10000:e0:1d.0", "10000:e1:00.0"}));
}

TEST(PciChain, VirtualAndPlatformDevicesHaveNoChain) {
  EXPECT_FALSE(ParsePciChain("/sys/devices/virtual/net/lo"));
  EXPECT_FALSE(ParsePciChain("/sys/devices/platform/soc/fe300000.ethernet"));
  EXPECT_FALSE(ParsePciChain("/sys/devices/pci0000:00"));
  EXPECT_FALSE(ParsePciChain(""));
}

TEST(PciChain, FunctionNameShape) {
  EXPECT_TRUE(IsPciFunctionName("0000:3b:00.0"));
  EXPECT_TRUE(IsPciFunctionName("10000:e0:1d.7"));
  EXPECT_FALSE(IsPciFunctionName("pci0000:00"));
  EXPECT_FALSE(IsPciFunctionName("000:3b:00.0"));
  EXPECT_FALSE(IsPciFunctionName("0000:3b:00:0"));
  EXPECT_FALSE(IsPciFunctionName("virtio2"));
}

}  // namespace
}  // namespace ff::pcie
