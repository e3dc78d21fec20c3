// `flexiforce health --json` on a fixture tree, through the subcommand's entry point.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/pcie/fixture_tree.h"

namespace ff {
int RunHealthCommand(int argc, char** argv);
}

namespace {

using ff::testing::FixtureTree;

int RunHealth(std::vector<std::string> args, std::string* out) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  int rc = ff::RunHealthCommand(static_cast<int>(argv.size()), argv.data());
  *out = ::testing::internal::GetCapturedStdout();
  return rc;
}

// eth0: RoCE NIC trained at x8 of x16 (degrades on its own); eth1: clean, no PCIe; lo: skipped.
void BuildTree(const FixtureTree& t) {
  t.AddPciDevice("0000:00:01.0", "0000:3b:00.0");
  t.AddNetInterface("eth0", "0000:00:01.0", "0000:3b:00.0");
  const std::string dev = t.PciDir("0000:00:01.0", "0000:3b:00.0");
  t.Write(dev + "/current_link_width", "8\n");
  t.Write(dev + "/max_link_width", "16\n");
  t.Write(dev + "/current_link_speed", "16.0 GT/s PCIe\n");
  t.Write(dev + "/max_link_speed", "16.0 GT/s PCIe\n");
  t.Write(dev + "/aer_dev_correctable", "RxErr 0\nTOTAL_ERR_COR 2\n");
  t.Write("sys/class/net/eth0/statistics/rx_packets", "1000\n");
  t.Write("ethtool/eth0/fec", "corrected_blocks 4\nuncorrectable_blocks 0\ncorrected_bits 17\n");
  t.Mkdir("sys/class/net/eth0/device/infiniband/mlx5_0");
  t.Write("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "3\n");
  t.Write("sys/class/net/eth1/statistics/rx_packets", "7\n");
  t.Write("sys/class/net/lo/statistics/rx_packets", "1\n");
}

TEST(HealthCli, JsonOnFixtureTreeReportsSourcesValuesAndVerdicts) {
  FixtureTree t;
  BuildTree(t);
  std::string out;
  ASSERT_EQ(RunHealth({"health", "--root", t.root(), "--interval-ms", "5", "--samples", "5", "--json"}, &out), 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["samples"], 5);
  ASSERT_EQ(j["interfaces"].size(), 2u) << "lo must be skipped: " << out;
  const auto& eth0 = j["interfaces"][0];
  const auto& eth1 = j["interfaces"][1];
  EXPECT_EQ(eth0["name"], "eth0");
  EXPECT_EQ(eth0["sources"]["fec"], "ok");
  EXPECT_EQ(eth0["sources"]["rdma"], true);
  EXPECT_EQ(eth0["sources"]["pcie_link"], true);
  EXPECT_EQ(eth0["sources"]["pcie_aer"], true);
  EXPECT_EQ(eth0["counters"]["rx_packets"], 1000);
  EXPECT_EQ(eth0["fec"]["corrected_bits"], 17);
  EXPECT_EQ(eth0["rdma"]["device"], "mlx5_0");
  EXPECT_EQ(eth0["rdma"]["counters"]["symbol_error"], 3);
  EXPECT_EQ(eth0["pcie"]["address"], "0000:3b:00.0");
  EXPECT_EQ(eth0["pcie"]["current_width"], 8);
  EXPECT_EQ(eth0["pcie"]["capable_width"], 16);
  EXPECT_EQ(eth0["pcie"]["aer_correctable"], 2);
  EXPECT_EQ(eth0["degraded"], true);
  ASSERT_EQ(eth0["changes"].size(), 1u);
  EXPECT_EQ(eth0["changes"][0]["sample"], 2);  // third sample = third detection
  EXPECT_NE(eth0["reason"].get<std::string>().find("x8 below x16"), std::string::npos);

  EXPECT_EQ(eth1["name"], "eth1");
  EXPECT_EQ(eth1["degraded"], false);
  EXPECT_EQ(eth1["sources"]["fec"], "unsupported");
  EXPECT_TRUE(eth1["fec"].is_null());
  EXPECT_TRUE(eth1["rdma"].is_null());
  EXPECT_TRUE(eth1["pcie"].is_null());
  EXPECT_TRUE(eth1["changes"].empty());
}

TEST(HealthCli, NamedInterfacesOnlyAndTextOutput) {
  FixtureTree t;
  BuildTree(t);
  std::string out;
  ASSERT_EQ(RunHealth({"health", "--root", t.root(), "--samples", "1", "eth1"}, &out), 0);
  EXPECT_NE(out.find("eth1: healthy; sources: counters[rx_packets=7]"), std::string::npos) << out;
  EXPECT_EQ(out.find("eth0"), std::string::npos) << out;
}

TEST(HealthCli, HelpAndBadArgumentsExit) {
  std::string out;
  EXPECT_EQ(RunHealth({"health", "--help"}, &out), 0);
  EXPECT_NE(out.find("--interval-ms"), std::string::npos) << out;
  EXPECT_NE(RunHealth({"health", "--interval-ms", "0"}, &out), 0);
  EXPECT_NE(RunHealth({"health", "--root", "/nonexistent/ff-root"}, &out), 0);
}

}  // namespace
