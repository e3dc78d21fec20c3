// Unit tests of `probe check`'s pieces on fixture trees: RDMA GID choice, NCCL_IB_HCA, capabilities, env.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "bpf/bpf_permission.h"
#include "bpf/preflight.h"
#include "bpf/rdma_devices.h"

namespace fs = std::filesystem;
using namespace ff::probe;

namespace {

class SysfsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ff-probe-sysfs-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  // A RoCE port: GID 0 link-local v1, 1 link-local v2, 2 IPv4 v1, 3 IPv4 v2.
  void RocePort(const std::string& dev, int port, const std::string& state) {
    const std::string base = "class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/";
    Write(base + "state", state);
    Write(base + "link_layer", "Ethernet");
    const char* gids[] = {"fe80:0000:0000:0000:0202:c9ff:fe00:0001", "fe80:0000:0000:0000:0202:c9ff:fe00:0001",
                          "0000:0000:0000:0000:0000:ffff:0a00:0001", "0000:0000:0000:0000:0000:ffff:0a00:0001"};
    const char* types[] = {"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"};
    for (int i = 0; i < 4; ++i) {
      Write(base + "gids/" + std::to_string(i), gids[i]);
      Write(base + "gid_attrs/types/" + std::to_string(i), types[i]);
      Write(base + "gid_attrs/ndevs/" + std::to_string(i), "eth0");
    }
    Write(base + "gids/4", "0000:0000:0000:0000:0000:0000:0000:0000");  // unpopulated entry
  }
  fs::path root_;
};

TEST_F(SysfsFixture, RoceV2Ipv4GidIsTheLowestRoceV2EntryWithAnIpv4Address) {
  RocePort("mlx5_0", 1, "4: ACTIVE");
  auto devs = ListRdmaDevices(root_.string());
  ASSERT_EQ(devs.size(), 1u);
  ASSERT_EQ(devs[0].ports.size(), 1u);
  const RdmaPort& p = devs[0].ports[0];
  EXPECT_EQ(p.state, "ACTIVE");
  ASSERT_TRUE(p.selected.has_value());
  EXPECT_EQ(p.selected->index, 3);
  EXPECT_EQ(p.selected->type, "RoCE v2");
  EXPECT_EQ(p.selected->ndev, "eth0");
}

TEST_F(SysfsFixture, NcclIbGidIndexForcesTheEntry) {
  RocePort("mlx5_0", 1, "4: ACTIVE");
  auto devs = ListRdmaDevices(root_.string(), 1);
  ASSERT_TRUE(devs[0].ports[0].selected.has_value());
  EXPECT_EQ(devs[0].ports[0].selected->index, 1);
}

TEST_F(SysfsFixture, NoRdmaDeviceIsReportedAsNone) {
  fs::create_directories(root_ / "class/net");
  PreflightInputs in;
  in.sysfs_root = root_.string();
  in.env = [](const char*) -> const char* { return nullptr; };
  Findings f;
  CheckRdma(in, &f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kOk);
  EXPECT_NE(f[0].message.find("none"), std::string::npos);
}

TEST_F(SysfsFixture, HcaFilterSelectingOnlyADownPortWarns) {
  RocePort("mlx5_0", 1, "1: DOWN");
  RocePort("mlx5_1", 1, "4: ACTIVE");
  PreflightInputs in;
  in.sysfs_root = root_.string();
  in.env = [](const char* n) -> const char* { return std::string(n) == "NCCL_IB_HCA" ? "=mlx5_0" : nullptr; };
  Findings f;
  CheckRdma(in, &f);
  bool warned = false;
  for (const auto& x : f) warned |= x.severity == Severity::kWarn && x.message.find("selects no active port") != std::string::npos;
  EXPECT_TRUE(warned);
}

// GPUDirect RDMA: with RDMA devices present, the check says whether nvidia-peermem is loaded and
// counts the NVIDIA GPUs; a GPU host without the module gets a warning (it runs, but stages GPU
// buffers through host memory unless its NICs register DMA-BUFs).
TEST_F(SysfsFixture, GpuDirectNamesThePeermemModuleAndWarnsOnAGpuHostWithoutIt) {
  const std::string sys = (root_ / "sys").string();
  auto find = [](const Findings& f) -> const Finding* {
    for (const auto& x : f)
      if (x.message.rfind("GPUDirect RDMA:", 0) == 0) return &x;
    return nullptr;
  };
  auto check = [&] {
    PreflightInputs in;
    in.sysfs_root = sys;
    in.env = [](const char*) -> const char* { return nullptr; };
    Findings f;
    CheckRdma(in, &f);
    return f;
  };
  // RDMA port, no GPU, no module: said, not a warning.
  const std::string base = "sys/class/infiniband/mlx5_0/ports/1/";
  Write(base + "state", "4: ACTIVE");
  Write(base + "link_layer", "Ethernet");
  Write(base + "gids/0", "0000:0000:0000:0000:0000:ffff:0a00:0001");
  Write(base + "gid_attrs/types/0", "RoCE v2");
  Findings f = check();
  const Finding* g = find(f);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->severity, Severity::kOk);
  EXPECT_NE(g->message.find("no nvidia-peermem"), std::string::npos) << g->message;
  EXPECT_NE(g->message.find("(0 NVIDIA GPU(s))"), std::string::npos) << g->message;
  EXPECT_EQ(g->detail["peermem_module"], "");

  // Two NVIDIA GPUs and a VGA card of another vendor, still no module: a warning.
  Write("sys/bus/pci/devices/0000:18:00.0/class", "0x030200");
  Write("sys/bus/pci/devices/0000:18:00.0/vendor", "0x10de");
  Write("sys/bus/pci/devices/0000:3b:00.0/class", "0x030200");
  Write("sys/bus/pci/devices/0000:3b:00.0/vendor", "0x10de");
  Write("sys/bus/pci/devices/0000:00:02.0/class", "0x030000");
  Write("sys/bus/pci/devices/0000:00:02.0/vendor", "0x8086");
  f = check();
  g = find(f);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->severity, Severity::kWarn);
  EXPECT_NE(g->message.find("(2 NVIDIA GPU(s))"), std::string::npos) << g->message;
  EXPECT_EQ(g->detail["nvidia_gpus"], 2);

  // The module loaded: ok, named.
  Write("sys/module/nvidia_peermem/version", "535.104.05");
  f = check();
  g = find(f);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->severity, Severity::kOk);
  EXPECT_NE(g->message.find("nvidia_peermem loaded"), std::string::npos) << g->message;
  EXPECT_EQ(g->detail["peermem_module"], "nvidia_peermem");
}

TEST(HcaFilter, FollowsNcclSyntax) {
  EXPECT_TRUE(HcaFilterMatches("", "mlx5_0", 1));
  EXPECT_TRUE(HcaFilterMatches("mlx5", "mlx5_10", 1));
  EXPECT_FALSE(HcaFilterMatches("=mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(HcaFilterMatches("mlx5_0:1,mlx5_1:2", "mlx5_1", 2));
  EXPECT_FALSE(HcaFilterMatches("mlx5_0:1,mlx5_1:2", "mlx5_1", 1));
  EXPECT_FALSE(HcaFilterMatches("^mlx5_0", "mlx5_0", 1));
  EXPECT_TRUE(HcaFilterMatches("^mlx5_0", "mlx5_1", 1));
}

TEST(BpfPermission, NeedsSysAdminOrBothBpfAndPerfmon) {
  BpfPermission p;
  DecodeCapabilities(0, &p);
  EXPECT_FALSE(p.permitted);
  EXPECT_NE(p.missing.find("CAP_BPF and CAP_PERFMON"), std::string::npos);
  DecodeCapabilities(1ull << 39, &p);  // CAP_BPF alone cannot attach uprobes
  EXPECT_FALSE(p.permitted);
  EXPECT_NE(p.missing.find("CAP_PERFMON"), std::string::npos);
  DecodeCapabilities((1ull << 39) | (1ull << 38), &p);
  EXPECT_TRUE(p.permitted);
  DecodeCapabilities(1ull << 21, &p);
  EXPECT_TRUE(p.permitted);
}

TEST(Environment, BadSlaIsAnErrorAndAGoodOneGivesLevelAndClass) {
  std::map<std::string, std::string> env = {{"AI_SLA_LATENCY", "fast"}};
  PreflightInputs in;
  in.env = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Findings f;
  CheckEnvironment(in, &f);
  EXPECT_TRUE(AnyError(f));
  env = {{"AI_SLA_LATENCY", "40"}, {"AI_FLEXIFORCE_ENABLE", "1"}};
  f.clear();
  CheckEnvironment(in, &f);
  EXPECT_FALSE(AnyError(f));
  bool level1 = false;
  for (const auto& x : f) level1 |= x.message.find("level1") != std::string::npos && x.detail.value("dscp", -1) == 46;
  EXPECT_TRUE(level1);
}

}  // namespace
