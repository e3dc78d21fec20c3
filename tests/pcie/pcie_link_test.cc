// PCIe link state and AER readers against fixture trees.
#include "pcie/pcie_link.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/pcie/fixture_tree.h"

namespace ff::pcie {
namespace {

using ff::testing::FixtureTree;

constexpr char kPort[] = "0000:00:01.0";
constexpr char kBdf[] = "0000:3b:00.0";

TEST(PcieLinkParse, SpeedAcceptsKernelFormsAndRejectsOthers) {
  EXPECT_DOUBLE_EQ(*ParseLinkSpeedGts("16.0 GT/s PCIe\n"), 16.0);
  EXPECT_DOUBLE_EQ(*ParseLinkSpeedGts("8 GT/s"), 8.0);
  EXPECT_DOUBLE_EQ(*ParseLinkSpeedGts("2.5 GT/s PCIe"), 2.5);
  EXPECT_FALSE(ParseLinkSpeedGts("Unknown"));
  EXPECT_FALSE(ParseLinkSpeedGts("16.0 Gb/s"));
  EXPECT_FALSE(ParseLinkSpeedGts("fast"));
}

TEST(PcieLinkParse, WidthAcceptsLaneCounts) {
  EXPECT_EQ(*ParseLinkWidth("16\n"), 16u);
  EXPECT_EQ(*ParseLinkWidth("x8"), 8u);
  EXPECT_FALSE(ParseLinkWidth("sixteen"));
  EXPECT_FALSE(ParseLinkWidth("16 lanes"));
}

TEST(PcieLinkParse, AerTotalFindsOnlyTheExactKey) {
  const std::string cor = "RxErr 1\nBadTLP 2\nBadDLLP 0\nTOTAL_ERR_COR 3\n";
  EXPECT_EQ(*ParseAerTotal(cor, "TOTAL_ERR_COR"), 3u);
  EXPECT_FALSE(ParseAerTotal(cor, "TOTAL_ERR_FATAL"));
  EXPECT_FALSE(ParseAerTotal("TOTAL_ERR_CORX 4\n", "TOTAL_ERR_COR"));
}

TEST(PcieLinkParse, PciAddressShape) {
  EXPECT_TRUE(IsPciAddress("0000:3b:00.0"));
  EXPECT_FALSE(IsPciAddress("pci0000:00"));
  EXPECT_FALSE(IsPciAddress("virtio2"));
  EXPECT_FALSE(IsPciAddress("0000:3b:00:0"));
}

TEST(PcieNetResolve, FollowsRelativeDeviceLinkToPciFunction) {
  FixtureTree t;
  t.AddPciDevice(kPort, kBdf);
  t.AddNetInterface("eth0", kPort, kBdf);
  EXPECT_EQ(ResolveNetInterfacePciAddress(t.root(), "eth0"), std::optional<std::string>(kBdf));
}

TEST(PcieNetResolve, WalksUpFromVirtioDeviceToItsPciFunction) {
  FixtureTree t;
  t.AddPciDevice(kPort, "0000:00:03.0");
  t.Mkdir(t.PciDir(kPort, "0000:00:03.0") + "/virtio2");
  t.Mkdir("sys/class/net/eth0");
  t.Symlink("../../../devices/pci0000:00/0000:00:01.0/0000:00:03.0/virtio2", "sys/class/net/eth0/device");
  EXPECT_EQ(ResolveNetInterfacePciAddress(t.root(), "eth0"), std::optional<std::string>("0000:00:03.0"));
}

TEST(PcieNetResolve, InterfaceWithoutDeviceHasNoPciAddress) {
  FixtureTree t;
  t.Mkdir("sys/class/net/veth0/statistics");
  EXPECT_FALSE(ResolveNetInterfacePciAddress(t.root(), "veth0"));
  EXPECT_FALSE(ResolveNetInterfacePciAddress(t.root(), "nosuch"));
}

void WriteLink(const FixtureTree& t, const std::string& dir, const std::string& cur_speed, const std::string& cur_width,
               const std::string& max_speed, const std::string& max_width) {
  t.Write(dir + "/current_link_speed", cur_speed + "\n");
  t.Write(dir + "/current_link_width", cur_width + "\n");
  t.Write(dir + "/max_link_speed", max_speed + "\n");
  t.Write(dir + "/max_link_width", max_width + "\n");
}

TEST(PcieLinkReader, ReadsLinkStateAerAndUpstreamMaxima) {
  FixtureTree t;
  t.AddPciDevice(kPort, kBdf);
  WriteLink(t, t.PciDir(kPort, kBdf), "16.0 GT/s PCIe", "8", "32.0 GT/s PCIe", "16");
  t.Write(std::string("sys/devices/pci0000:00/") + kPort + "/max_link_speed", "16.0 GT/s PCIe\n");
  t.Write(std::string("sys/devices/pci0000:00/") + kPort + "/max_link_width", "16\n");
  t.Write(t.PciDir(kPort, kBdf) + "/aer_dev_correctable", "RxErr 0\nBadTLP 4\nTOTAL_ERR_COR 4\n");
  t.Write(t.PciDir(kPort, kBdf) + "/aer_dev_nonfatal", "Undefined 0\nTOTAL_ERR_NONFATAL 1\n");
  t.Write(t.PciDir(kPort, kBdf) + "/aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 0\n");

  PcieLinkReader r(t.root(), kBdf);
  EXPECT_TRUE(r.has_link());
  EXPECT_TRUE(r.has_aer());
  PcieLinkState s;
  std::vector<std::string> warnings;
  r.Read(&s, [&](const std::string& m) { warnings.push_back(m); });
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(*s.current_width, 8u);
  EXPECT_EQ(*s.max_width, 16u);
  EXPECT_DOUBLE_EQ(*s.current_speed_gts, 16.0);
  EXPECT_DOUBLE_EQ(*s.max_speed_gts, 32.0);
  // A Gen5 device in a Gen4 slot can reach only Gen4: the smaller maximum wins.
  EXPECT_DOUBLE_EQ(*s.capable_speed_gts(), 16.0);
  EXPECT_EQ(*s.capable_width(), 16u);
  EXPECT_EQ(*s.aer_correctable, 4u);
  EXPECT_EQ(*s.aer_nonfatal, 1u);
  EXPECT_EQ(*s.aer_fatal, 0u);

  // Values are re-read through the open files.
  t.Write(t.PciDir(kPort, kBdf) + "/current_link_width", "4\n");
  r.Read(&s, nullptr);
  EXPECT_EQ(*s.current_width, 4u);
}

TEST(PcieLinkReader, DeviceWithoutLinkFilesIsAbsentNotAnError) {
  FixtureTree t;
  t.AddPciDevice(kPort, kBdf);  // like a virtio function: no PCIe capability files
  PcieLinkReader r(t.root(), kBdf);
  EXPECT_FALSE(r.present());
  PcieLinkState s;
  int warnings = 0;
  r.Read(&s, [&](const std::string&) { ++warnings; });
  EXPECT_EQ(warnings, 0);
  EXPECT_FALSE(s.current_width);
  EXPECT_FALSE(s.capable_speed_gts());
}

TEST(PcieLinkReader, UnknownSpeedIsEmptyWithoutWarning) {
  FixtureTree t;
  t.AddPciDevice(kPort, kBdf);
  WriteLink(t, t.PciDir(kPort, kBdf), "Unknown", "0", "8.0 GT/s PCIe", "16");
  PcieLinkReader r(t.root(), kBdf);
  PcieLinkState s;
  int warnings = 0;
  r.Read(&s, [&](const std::string&) { ++warnings; });
  EXPECT_EQ(warnings, 0);
  EXPECT_FALSE(s.current_speed_gts);
  EXPECT_EQ(*s.current_width, 0u);
}

TEST(PcieLinkReader, MalformedFileWarnsOnceNamingFileAndForm) {
  FixtureTree t;
  t.AddPciDevice(kPort, kBdf);
  WriteLink(t, t.PciDir(kPort, kBdf), "16.0 GT/s PCIe", "wide", "16.0 GT/s PCIe", "16");
  t.Write(t.PciDir(kPort, kBdf) + "/aer_dev_fatal", "garbage\n");
  PcieLinkReader r(t.root(), kBdf);
  PcieLinkState s;
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& m) { warnings.push_back(m); };
  r.Read(&s, warn);
  r.Read(&s, warn);
  ASSERT_EQ(warnings.size(), 2u) << "one warning per malformed file, not per read";
  EXPECT_NE(warnings[0].find("current_link_width"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("'wide'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("lane count"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("aer_dev_fatal"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[1].find("TOTAL_ERR_FATAL"), std::string::npos) << warnings[1];
  EXPECT_FALSE(s.current_width);
  EXPECT_DOUBLE_EQ(*s.current_speed_gts, 16.0);
}

}  // namespace
}  // namespace ff::pcie
