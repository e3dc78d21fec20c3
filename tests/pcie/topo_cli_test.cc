// `flexiforce topo` through its entry point: text and JSON on fixture trees, --help, bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/pcie/generated_tree.h"

namespace ff {
int RunTopoCommand(int argc, char** argv);
}

namespace {

using ff::testing::GeneratedTree;

int RunTopo(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
  args.insert(args.begin(), "topo");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = ff::RunTopoCommand(static_cast<int>(argv.size()), argv.data());
  *out = ::testing::internal::GetCapturedStdout();
  std::string e = ::testing::internal::GetCapturedStderr();
  if (err) *err = e;
  return rc;
}

TEST(TopoCli, TextShowsTheMatrixAffinityHealthAndLegend) {
  GeneratedTree t("two_socket.topo");
  ASSERT_TRUE(t.ok());
  std::string out;
  ASSERT_EQ(RunTopo({"--sysfs-root", t.root()}, &out), 0) << out;
  for (const char* want :
       {"NIC0", "NIC3", "CPU Affinity", "NUMA Affinity", "PCIe link", "GPU0  PXB   PXB   PHB   NODE",
        "GPU3  SYS   SYS   SYS   SYS   16-31,48-63",
        "Gen4 x8 DEGRADED (capable Gen4 x16) AER cor=4 nonfatal=1 fatal=0",
        "Gen3 x16 DEGRADED (capable Gen4 x16)", "0000:06:00.0  NVIDIA  Gen3 x16 (capable Gen4 x16, idle)",
        "AER cor=4 nonfatal=1 fatal=0", "mlx5_0 ens1f0np0", "ASPEED", "Legend:", "PIX  = ", "SYS  = "}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  }
}

TEST(TopoCli, JsonCarriesMatrixOrderAndHealth) {
  GeneratedTree t("dgx_h100.topo");
  ASSERT_TRUE(t.ok());
  std::string out;
  ASSERT_EQ(RunTopo({"--json", "--sysfs-root", t.root()}, &out), 0) << out;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["gpus"].size(), 8u);
  ASSERT_EQ(j["nics"].size(), 8u);
  const auto& g5 = j["gpus"][5];
  EXPECT_EQ(g5["pci"], "0000:ab:00.0");
  EXPECT_EQ(g5["vendor"], "0x10de");
  EXPECT_EQ(g5["numa_node"], 1);
  EXPECT_EQ(g5["distance"]["NIC5"], "PIX");
  EXPECT_EQ(g5["distance"]["NIC4"], "NODE");
  EXPECT_EQ(g5["distance"]["NIC0"], "SYS");
  EXPECT_EQ(g5["nics_by_distance"][0], "NIC5");
  EXPECT_EQ(g5["link"]["degraded"], false);
  EXPECT_EQ(g5["link"]["current_width"], 16);
  ASSERT_EQ(j["matrix"].size(), 8u);
  EXPECT_EQ(j["matrix"][5],
            (std::vector<std::string>{"SYS", "SYS", "SYS", "SYS", "NODE", "PIX", "NODE", "NODE"}));
  EXPECT_EQ(j["nics"][5]["rdma_devices"][0], "mlx5_5");
  EXPECT_EQ(j["nics"][5]["host_bridge"], "pci0000:a8");
  EXPECT_NE(j["legend"]["PXB"].get<std::string>().find("several PCIe switches"), std::string::npos);
}

TEST(TopoCli, VmReportsNoGpuAndItsVirtioNic) {
  GeneratedTree t("vm_virtio.topo");
  ASSERT_TRUE(t.ok());
  std::string out;
  ASSERT_EQ(RunTopo({"--sysfs-root", t.root()}, &out), 0) << out;
  EXPECT_NE(out.find("no GPU found"), std::string::npos) << out;
  EXPECT_NE(out.find("NIC0  eth0   0000:00:03.0  N/A           N/A            -"), std::string::npos) << out;
  ASSERT_EQ(RunTopo({"--sysfs-root", t.root(), "--json"}, &out), 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["gpus"].empty());
  EXPECT_TRUE(j["nics"][0]["numa_node"].is_null());
  EXPECT_TRUE(j["nics"][0]["link"].is_null());
}

TEST(TopoCli, HelpExitsZeroAndNamesTheOptions) {
  std::string out;
  EXPECT_EQ(RunTopo({"--help"}, &out), 0);
  EXPECT_NE(out.find("--sysfs-root"), std::string::npos) << out;
  EXPECT_NE(out.find("--json"), std::string::npos) << out;
}

TEST(TopoCli, BadInputExitsTwoNamingTheOptionAndForm) {
  std::string out, err;
  EXPECT_EQ(RunTopo({"--bogus"}, &out, &err), 2);
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  EXPECT_NE(err.find("usage: flexiforce topo [--json] [--sysfs-root DIR]"), std::string::npos) << err;
  EXPECT_TRUE(out.empty()) << out;

  EXPECT_EQ(RunTopo({"--sysfs-root", "/nonexistent/ff-topo"}, &out, &err), 2);
  EXPECT_NE(err.find("--sysfs-root '/nonexistent/ff-topo': expected a directory that contains sys/"),
            std::string::npos)
      << err;
  EXPECT_EQ(RunTopo({"--sysfs-root"}, &out, &err), 2);
  EXPECT_NE(err.find("--sysfs-root"), std::string::npos) << err;
  EXPECT_EQ(RunTopo({"extra"}, &out, &err), 2);
}

}  // namespace
