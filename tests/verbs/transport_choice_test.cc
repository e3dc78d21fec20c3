// FLEXIFORCE_TRANSPORT: the decision (ChooseTransport) on the fake libibverbs and the fixture host, and
// the plugin's init, devices() and getProperties() under each setting (the built .so, one forked
// process per case, since the plugin reads its environment once).
#include "verbs/transport_choice.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "cli/plugin_loader.h"
#include "tests/verbs/fake_verbs.h"
#include "tests/verbs/verbs_fixture.h"

namespace ff::verbs {
namespace {

TEST(TransportSetting, ParsesTheThreeWordsOnly) {
  TransportSetting t = TransportSetting::kTcp;
  ASSERT_TRUE(ParseTransportSetting("auto", &t));
  EXPECT_EQ(t, TransportSetting::kAuto);
  ASSERT_TRUE(ParseTransportSetting("verbs", &t));
  EXPECT_EQ(t, TransportSetting::kVerbs);
  ASSERT_TRUE(ParseTransportSetting("tcp", &t));
  EXPECT_EQ(t, TransportSetting::kTcp);
  EXPECT_FALSE(ParseTransportSetting("rdma", &t));
  EXPECT_FALSE(ParseTransportSetting("", &t));
}

class TransportChoiceTest : public ::testing::Test {
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

TEST_F(TransportChoiceTest, AutoPicksVerbsWhenAnActivePortExists) {
  testing::FakeVerbs fake("mlx5_0=A,rxe0=A");
  TransportChoice c;
  ASSERT_TRUE(ChooseTransport(TransportSetting::kAuto, fake.loader(), Options(), &c).ok());
  EXPECT_TRUE(c.verbs);
  ASSERT_EQ(c.discovery.ports.size(), 2u);
  EXPECT_EQ(c.reason, "FLEXIFORCE_TRANSPORT=auto: RDMA verbs on 2 ACTIVE port(s) (mlx5_0:1, rxe0:1)");
}

TEST_F(TransportChoiceTest, AutoFallsBackToTcpWhenEveryPortIsDown) {
  testing::FakeVerbs fake("mlx5_0=D,rxe0=D");
  TransportChoice c;
  ASSERT_TRUE(ChooseTransport(TransportSetting::kAuto, fake.loader(), Options(), &c).ok());
  EXPECT_FALSE(c.verbs);
  EXPECT_NE(c.reason.find("TCP, since no ACTIVE RDMA port"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("2 verbs device(s) seen"), std::string::npos) << c.reason;
}

TEST_F(TransportChoiceTest, AutoFallsBackToTcpWithoutTheLibrary) {
  IbverbsLoader missing("libibverbs-absent.so.1");
  TransportChoice c;
  ASSERT_TRUE(ChooseTransport(TransportSetting::kAuto, missing, Options(), &c).ok());
  EXPECT_FALSE(c.verbs);
  EXPECT_NE(c.reason.find("libibverbs-absent.so.1 cannot be used"), std::string::npos) << c.reason;
}

TEST_F(TransportChoiceTest, VerbsWithoutTheLibraryIsAnErrorNamingTheVariableAndTheAcceptedForms) {
  IbverbsLoader missing("libibverbs-absent.so.1");
  TransportChoice c;
  Status s = ChooseTransport(TransportSetting::kVerbs, missing, Options(), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("FLEXIFORCE_TRANSPORT=verbs but libibverbs-absent.so.1 cannot be used"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("accepted: auto, verbs or tcp"), std::string::npos) << s.message();
}

TEST_F(TransportChoiceTest, VerbsWhenTheHcaFilterLeavesNoPortIsAnErrorNamingTheFilter) {
  testing::FakeVerbs fake("mlx5_0=A,rxe0=A");
  TransportChoice c;
  Status s = ChooseTransport(TransportSetting::kVerbs, fake.loader(), Options("=mlx5_9"), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no ACTIVE RDMA port with a usable GID matches NCCL_IB_HCA"), std::string::npos)
      << s.message();
}

TEST_F(TransportChoiceTest, TcpNeverTouchesTheLibrary) {
  testing::FakeVerbs fake("mlx5_0=A");
  TransportChoice c;
  ASSERT_TRUE(ChooseTransport(TransportSetting::kTcp, fake.loader(), Options(), &c).ok());
  EXPECT_FALSE(c.verbs);
  EXPECT_EQ(c.reason, "FLEXIFORCE_TRANSPORT=tcp");
  EXPECT_EQ(fake.log().find("get_device_list"), std::string::npos) << fake.log();
}

// --- the plugin itself ---------------------------------------------------------------------------

std::string g_log;
void CaptureLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  g_log += std::string(level == NCCL_LOG_WARN ? "WARN " : "INFO ") + buf + "\n";
}

// Runs `body` in a child with `env` set; the child's gtest failures make it exit 1.
void InChild(const std::vector<std::pair<std::string, std::string>>& env, const std::function<void()>& body) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    body();
    std::fflush(stdout);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's checks failed (see above)";
}

class PluginTransport : public TransportChoiceTest {};

TEST_F(PluginTransport, AutoWithAnActivePortMakesTheRdmaPortsTheDevicesWithTheirProperties) {
  InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", FF_FAKE_IBVERBS_PATH}, {"FLEXIFORCE_SYSFS_ROOT", fixture_.root()},
           {"FLEXIFORCE_TRANSPORT", "auto"}, {"FLEXIFORCE_STATS", "0"}},
          [&] {
            testing::FakeVerbs fake("mlx5_0=A,mlx5_3=I,rxe0=A");  // the plugin's dlopen gets this library
            ff::testing::PluginLibrary lib;
            const ncclNet_v11_t* net = lib.V11();
            void* ctx = nullptr;
            ncclNetCommConfig_t cfg{-1};
            ASSERT_EQ(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess) << g_log;
            int n = 0;
            ASSERT_EQ(net->devices(&n), ncclSuccess);
            ASSERT_EQ(n, 3) << g_log;
            ncclNetProperties_v11_t p{};
            ASSERT_EQ(net->getProperties(0, &p), ncclSuccess);
            EXPECT_STREQ(p.name, "mlx5_0");
            EXPECT_EQ(p.port, 1);
            EXPECT_EQ(p.speed, 100000);
            EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
            ASSERT_NE(p.pciPath, nullptr);
            EXPECT_EQ(std::string(p.pciPath), fixture_.Real("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"));
            EXPECT_NE(p.guid, 0u);
            ASSERT_EQ(net->getProperties(1, &p), ncclSuccess);
            EXPECT_STREQ(p.name, "mlx5_3");
            EXPECT_EQ(p.speed, 200000);
            EXPECT_EQ(net->getProperties(3, &p), ncclInvalidArgument);
            // Logged once, naming the setting and the ports.
            const std::string line = "transport: RDMA verbs (FLEXIFORCE_TRANSPORT=auto: RDMA verbs on 3 ACTIVE port(s)";
            const size_t at = g_log.find(line);
            EXPECT_NE(at, std::string::npos) << g_log;
            EXPECT_EQ(g_log.find("transport: ", at + 1), std::string::npos) << g_log;
            // A second init (another communicator) neither rediscovers nor logs again.
            void* ctx2 = nullptr;
            ASSERT_EQ(net->init(&ctx2, 2, &cfg, CaptureLogger, nullptr), ncclSuccess);
            EXPECT_EQ(g_log.find("transport: ", at + 1), std::string::npos) << g_log;
          });
}

// GPUDirect: ptrSupport adds NCCL_PTR_CUDA only where nvidia-peermem is loaded (the NIC can pin GPU
// memory by address) and NCCL_PTR_DMABUF only where the device answers the DMA-BUF probe; each
// port says so once at init.
TEST_F(PluginTransport, PtrSupportAddsCudaWithPeermemAndDmabufWhereTheDeviceRegistersIt) {
  // One child per case: init with the dmabuf-capable fake (its probe answering `probe_errno`), then
  // device 0's ptrSupport and the init line that says it.
  auto expect = [&](int probe_errno, int ptr_support, const std::string& line) {
    InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", FF_FAKE_IBVERBS_DMABUF_PATH}, {"FLEXIFORCE_SYSFS_ROOT", fixture_.root()},
             {"FLEXIFORCE_TRANSPORT", "verbs"}, {"FLEXIFORCE_STATS", "0"}},
            [&] {
              testing::FakeVerbs fake("mlx5_0=A", FF_FAKE_IBVERBS_DMABUF_PATH);
              fake.SetDmabufProbeErrno(probe_errno);
              ff::testing::PluginLibrary lib;
              const ncclNet_v11_t* net = lib.V11();
              void* ctx = nullptr;
              ncclNetCommConfig_t cfg{-1};
              ASSERT_EQ(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess) << g_log;
              ncclNetProperties_v11_t p{};
              ASSERT_EQ(net->getProperties(0, &p), ncclSuccess);
              EXPECT_EQ(p.ptrSupport, ptr_support);
              EXPECT_NE(g_log.find(line), std::string::npos) << g_log;
            });
  };
  std::filesystem::create_directories(fixture_.root() + "/sys/module/nvidia_peermem");
  std::ofstream(fixture_.root() + "/sys/module/nvidia_peermem/version") << "535.104.05\n";
  expect(EBADF, NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF,
         "verbs: mlx5_0:1 memory: host, CUDA (nvidia-peermem), DMA-BUF");
  // Without the module, and with a provider that refuses DMA-BUFs: host memory only.
  std::filesystem::remove_all(fixture_.root() + "/sys/module/nvidia_peermem");
  expect(EOPNOTSUPP, NCCL_PTR_HOST, "verbs: mlx5_0:1 memory: host\n");
}

TEST_F(PluginTransport, AutoWithoutAnActivePortKeepsTheTcpDevicesAndSaysWhy) {
  InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", FF_FAKE_IBVERBS_PATH}, {"FLEXIFORCE_SYSFS_ROOT", fixture_.root()},
           {"FLEXIFORCE_STATS", "0"}},
          [&] {
            testing::FakeVerbs fake("mlx5_0=D");
            ff::testing::PluginLibrary lib;
            const ncclNet_v11_t* net = lib.V11();
            void* ctx = nullptr;
            ncclNetCommConfig_t cfg{-1};
            ASSERT_EQ(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess) << g_log;
            ncclNetProperties_v11_t p{};
            ASSERT_EQ(net->getProperties(0, &p), ncclSuccess);
            EXPECT_STRNE(p.name, "mlx5_0");
            EXPECT_EQ(p.port, 0);
            EXPECT_NE(g_log.find("transport: TCP (FLEXIFORCE_TRANSPORT=auto: TCP, since no ACTIVE RDMA port"),
                      std::string::npos)
                << g_log;
          });
}

TEST_F(PluginTransport, VerbsWithoutAnActivePortFailsInitWithTheReason) {
  InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", FF_FAKE_IBVERBS_PATH}, {"FLEXIFORCE_SYSFS_ROOT", fixture_.root()},
           {"FLEXIFORCE_TRANSPORT", "verbs"}, {"FLEXIFORCE_STATS", "0"}},
          [&] {
            testing::FakeVerbs fake("");
            ff::testing::PluginLibrary lib;
            const ncclNet_v11_t* net = lib.V11();
            void* ctx = nullptr;
            ncclNetCommConfig_t cfg{-1};
            EXPECT_NE(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess);
            EXPECT_NE(g_log.find("WARN NET/FlexiForce : FLEXIFORCE_TRANSPORT=verbs but no ACTIVE RDMA port with a usable GID (0 verbs "
                                 "device(s) seen); set FLEXIFORCE_TRANSPORT=tcp or auto (accepted: auto, verbs or tcp)"),
                      std::string::npos)
                << g_log;
          });
}

TEST_F(PluginTransport, VerbsWithoutTheLibraryFailsInitNamingIt) {
  InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1"}, {"FLEXIFORCE_TRANSPORT", "verbs"},
           {"FLEXIFORCE_STATS", "0"}},
          [&] {
            ff::testing::PluginLibrary lib;
            const ncclNet_v11_t* net = lib.V11();
            void* ctx = nullptr;
            ncclNetCommConfig_t cfg{-1};
            EXPECT_NE(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess);
            EXPECT_NE(g_log.find("FLEXIFORCE_TRANSPORT=verbs but /nonexistent/libibverbs.so.1 cannot be used"),
                      std::string::npos)
                << g_log;
          });
}

TEST_F(PluginTransport, TcpIgnoresActivePortsAndABadValueIsNamedAndMeansAuto) {
  InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", FF_FAKE_IBVERBS_PATH}, {"FLEXIFORCE_SYSFS_ROOT", fixture_.root()},
           {"FLEXIFORCE_TRANSPORT", "tcp"}, {"FLEXIFORCE_STATS", "0"}},
          [&] {
            testing::FakeVerbs fake("mlx5_0=A");
            ff::testing::PluginLibrary lib;
            const ncclNet_v11_t* net = lib.V11();
            void* ctx = nullptr;
            ncclNetCommConfig_t cfg{-1};
            ASSERT_EQ(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess) << g_log;
            ncclNetProperties_v11_t p{};
            ASSERT_EQ(net->getProperties(0, &p), ncclSuccess);
            EXPECT_STRNE(p.name, "mlx5_0");
            EXPECT_NE(g_log.find("transport: TCP (FLEXIFORCE_TRANSPORT=tcp)"), std::string::npos) << g_log;
            EXPECT_EQ(fake.log().find("get_device_list"), std::string::npos) << fake.log();
          });
  InChild({{"FLEXIFORCE_IBVERBS_LIBRARY", FF_FAKE_IBVERBS_PATH}, {"FLEXIFORCE_SYSFS_ROOT", fixture_.root()},
           {"FLEXIFORCE_TRANSPORT", "rdma"}, {"FLEXIFORCE_STATS", "0"}},
          [&] {
            testing::FakeVerbs fake("mlx5_0=A");
            ff::testing::PluginLibrary lib;
            const ncclNet_v11_t* net = lib.V11();
            void* ctx = nullptr;
            ncclNetCommConfig_t cfg{-1};
            ASSERT_EQ(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess) << g_log;
            EXPECT_NE(g_log.find("WARN NET/FlexiForce : FLEXIFORCE_TRANSPORT='rdma' is not valid; accepted: auto, verbs or tcp; using "
                                 "the default auto"),
                      std::string::npos)
                << g_log;
            EXPECT_NE(g_log.find("transport: RDMA verbs (FLEXIFORCE_TRANSPORT=auto"), std::string::npos) << g_log;
          });
}

}  // namespace
}  // namespace ff::verbs
