// NCCL_SOCKET_IFNAME syntax and NCCL's default interface preference.
#include <gtest/gtest.h>

#include "tcp/interfaces.h"

#include <filesystem>

#include "tests/pcie/fixture_tree.h"

namespace ff::tcp {
namespace {

TEST(IfnameFilter, PrefixListMatchesPrefixes) {
  IfnameFilter f("eth,ib");
  EXPECT_TRUE(f.Matches("eth0"));
  EXPECT_TRUE(f.Matches("ib1"));
  EXPECT_FALSE(f.Matches("lo"));
}

TEST(IfnameFilter, CaretExcludes) {
  IfnameFilter f("^docker,lo");
  EXPECT_FALSE(f.Matches("docker0"));
  EXPECT_FALSE(f.Matches("lo"));
  EXPECT_TRUE(f.Matches("eth0"));
}

TEST(IfnameFilter, EqualsMatchesExactNamesOnly) {
  IfnameFilter f("=eth0");
  EXPECT_TRUE(f.Matches("eth0"));
  EXPECT_FALSE(f.Matches("eth01"));
  IfnameFilter g("^=eth0");
  EXPECT_FALSE(g.Matches("eth0"));
  EXPECT_TRUE(g.Matches("eth01"));
}

NetInterface Iface(const char* name, bool loopback = false) {
  NetInterface n;
  n.name = name;
  n.loopback = loopback;
  n.addr.ss_family = AF_INET;
  return n;
}

TEST(SelectInterfaces, DefaultPrefersRealInterfacesOverDockerAndLoopback) {
  std::vector<NetInterface> all = {Iface("lo", true), Iface("docker0"), Iface("eth0"), Iface("eth1")};
  auto sel = SelectInterfaces(all, "");
  ASSERT_EQ(sel.size(), 2u);
  EXPECT_EQ(sel[0].name, "eth0");
  EXPECT_EQ(sel[1].name, "eth1");
}

TEST(SelectInterfaces, LoopbackOnlyAsLastResort) {
  auto sel = SelectInterfaces({Iface("lo", true)}, "");
  ASSERT_EQ(sel.size(), 1u);
  EXPECT_EQ(sel[0].name, "lo");
}

TEST(SelectInterfaces, UserFilterWins) {
  auto sel = SelectInterfaces({Iface("lo", true), Iface("eth0")}, "lo");
  ASSERT_EQ(sel.size(), 1u);
  EXPECT_EQ(sel[0].name, "lo");
}

TEST(ListInterfaces, ReadsSpeedAndPciPathFromTheSysfsRoot) {
  auto all = ListInterfaces("", "/nonexistent-root");
  for (const auto& n : all) {
    EXPECT_EQ(n.speed_mbps, kDefaultSpeedMbps) << n.name;
    EXPECT_TRUE(n.pci_path.empty()) << n.name;
  }
}

// getProperties().pciPath: the resolved device link, read through the PCIe component. The real
// lo gets a fixture device link, so the real getifaddrs list meets a known sysfs.
TEST(ListInterfaces, PciPathIsTheResolvedDeviceLinkUnderTheSysfsRoot) {
  ff::testing::FixtureTree t;
  t.AddPciDevice("0000:00:01.0", "0000:3b:00.0");
  t.AddNetInterface("lo", "0000:00:01.0", "0000:3b:00.0");
  bool saw_lo = false;
  for (const auto& n : ListInterfaces("AF_INET", t.Path("sys"))) {
    if (n.name != "lo") continue;
    saw_lo = true;
    EXPECT_EQ(n.pci_path, std::filesystem::canonical(t.root()).string() +
                              "/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0");
  }
  if (!saw_lo) GTEST_SKIP() << "lo has no running IPv4 address here";
}

}  // namespace
}  // namespace ff::tcp
