// A driver's misuse of the v11 table, as NCCL itself never commits it but other drivers and fault
// injectors do: NULL out-pointers, a message above what getProperties promises, a connect whose
// listener is gone. Each is an error naming the input - never a crash - and a connect that fails
// says why in a WARN even though no communicator exists yet to report it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "cli/plugin_loader.h"
#include "plugin/net_api.h"

namespace ff::testing {
namespace {

std::mutex g_mu;
std::vector<std::string> g_warns;

void CaptureLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_mu);
  g_warns.emplace_back(buf);
}

std::string WarnsContaining(const std::string& needle) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::string all;
  for (const auto& w : g_warns)
    if (w.find(needle) != std::string::npos) all += w + "\n";
  return all;
}

class DriverMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    // Read at the plugin's first init in this process (ctest runs each test in a process of its own).
    setenv("FLEXIFORCE_CONNECT_TIMEOUT_MS", "500", 1);
    setenv("NCCL_DEBUG", "WARN", 1);
    unsetenv("AI_FLEXIFORCE_ENABLE");  // observe only
    setenv("FLEXIFORCE_TOPOLOGY", "/nonexistent/flexiforce-topology.json", 1);
    net_ = lib_.V11();
    ncclNetCommConfig_t cfg{-1};
    ASSERT_EQ(net_->init(&ctx_, 1, &cfg, CaptureLogger, nullptr), ncclSuccess);
  }
  void TearDown() override { net_->finalize(ctx_); }

  // A connected pair within this process: connect and accept alternate, as NCCL's proxy would run them.
  void Connect(void** sc, void** rc, void** lc) {
    char handle[128];
    ASSERT_EQ(net_->listen(ctx_, 0, handle, lc), ncclSuccess);
    ncclNetDeviceHandle_t* dc = nullptr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    *sc = *rc = nullptr;
    while ((*sc == nullptr || *rc == nullptr) && std::chrono::steady_clock::now() < deadline) {
      if (*sc == nullptr) {
        ASSERT_EQ(net_->connect(ctx_, 0, handle, sc, &dc), ncclSuccess);
      }
      if (*rc == nullptr) {
        ASSERT_EQ(net_->accept(*lc, rc, &dc), ncclSuccess);
      }
    }
    ASSERT_NE(*sc, nullptr);
    ASSERT_NE(*rc, nullptr);
  }

  PluginLibrary lib_;
  const ncclNet_v11_t* net_ = nullptr;
  void* ctx_ = nullptr;
};

TEST_F(DriverMisuse, NullOutPointersAreInvalidArguments) {
  char handle[128];
  ncclNetDeviceHandle_t* dc = nullptr;
  EXPECT_EQ(net_->listen(ctx_, 0, handle, nullptr), ncclInvalidArgument);
  EXPECT_EQ(net_->listen(ctx_, 0, nullptr, nullptr), ncclInvalidArgument);
  void *sc = nullptr, *rc = nullptr, *lc = nullptr;
  Connect(&sc, &rc, &lc);
  ASSERT_FALSE(HasFatalFailure());
  char other[128];
  void* lc2 = nullptr;
  ASSERT_EQ(net_->listen(ctx_, 0, other, &lc2), ncclSuccess);
  EXPECT_EQ(net_->connect(ctx_, 0, other, nullptr, &dc), ncclInvalidArgument);
  void* unused = nullptr;
  EXPECT_EQ(net_->connect(ctx_, 0, nullptr, &unused, &dc), ncclInvalidArgument);
  EXPECT_EQ(unused, nullptr);
  EXPECT_EQ(net_->accept(lc2, nullptr, &dc), ncclInvalidArgument);

  std::vector<char> buf(64, 'm');
  EXPECT_EQ(net_->isend(sc, buf.data(), buf.size(), 1, nullptr, nullptr, nullptr), ncclInvalidArgument);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 1;
  EXPECT_EQ(net_->irecv(rc, 1, &data, &size, &tag, nullptr, nullptr, nullptr), ncclInvalidArgument);
  const std::string named = WarnsContaining("must not be NULL");
  for (const char* call : {"listen:", "connect:", "accept:", "isend:", "irecv:"})
    EXPECT_NE(named.find(call), std::string::npos) << call << " gave no WARN naming the NULL argument:\n" << named;

  // The connection still carries a message, and test() with a NULL `done` is refused, not followed.
  void* sreq = nullptr;
  void* rreq = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sreq == nullptr && std::chrono::steady_clock::now() < deadline)
    ASSERT_EQ(net_->isend(sc, buf.data(), buf.size(), 1, nullptr, nullptr, &sreq), ncclSuccess);
  std::vector<char> rbuf(64, 0);
  data = rbuf.data();
  while (rreq == nullptr && std::chrono::steady_clock::now() < deadline)
    ASSERT_EQ(net_->irecv(rc, 1, &data, &size, &tag, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  ASSERT_NE(rreq, nullptr);
  EXPECT_EQ(net_->test(rreq, nullptr, nullptr), ncclInvalidArgument);
  int sdone = 0, rdone = 0;
  int sizes[1] = {0};
  while ((!sdone || !rdone) && std::chrono::steady_clock::now() < deadline) {
    if (!sdone) {
      ASSERT_EQ(net_->test(sreq, &sdone, nullptr), ncclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(net_->test(rreq, &rdone, sizes), ncclSuccess);
    }
  }
  ASSERT_TRUE(sdone && rdone);
  EXPECT_EQ(sizes[0], 64);
  EXPECT_EQ(rbuf[63], 'm');
  EXPECT_EQ(net_->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net_->closeListen(lc), ncclSuccess);
  EXPECT_EQ(net_->closeListen(lc2), ncclSuccess);
}

TEST_F(DriverMisuse, AMessageAboveMaxP2pBytesIsRefusedNamingTheLimit) {
  ncclNetProperties_v11_t props{};
  ASSERT_EQ(net_->getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.maxP2pBytes, net::kMaxMessageSize);
  EXPECT_EQ(props.maxCollBytes, net::kMaxMessageSize);
  ASSERT_LE(props.maxP2pBytes, size_t{INT_MAX}) << "test() could not report a message this large";
  void *sc = nullptr, *rc = nullptr, *lc = nullptr;
  Connect(&sc, &rc, &lc);
  ASSERT_FALSE(HasFatalFailure());
  char byte = 0;  // never read: the size is refused first
  void* req = nullptr;
  EXPECT_EQ(net_->isend(sc, &byte, props.maxP2pBytes + 1, 1, nullptr, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(net_->isend(sc, &byte, size_t{5} << 30, 1, nullptr, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(req, nullptr);
  EXPECT_NE(WarnsContaining(std::to_string(props.maxP2pBytes) + " bytes (maxP2pBytes").find("isend: size"),
            std::string::npos)
      << "no WARN naming the limit";
  EXPECT_EQ(net_->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net_->closeListen(lc), ncclSuccess);
}

// Observing only, the topology file serves the route-fate rule, read at the first accept: one that
// cannot be read was ignored without a word.
TEST_F(DriverMisuse, AnUnreadableTopologyFileIsReportedWhenOnlyObserving) {
  void *sc = nullptr, *rc = nullptr, *lc = nullptr;
  Connect(&sc, &rc, &lc);
  ASSERT_FALSE(HasFatalFailure());
  const std::string w = WarnsContaining("FLEXIFORCE_TOPOLOGY");
  EXPECT_NE(w.find("/nonexistent/flexiforce-topology.json"), std::string::npos)
      << "no WARN naming the unreadable topology file:\n" << w;
  EXPECT_NE(w.find("embedded default graph"), std::string::npos) << w;
  EXPECT_EQ(net_->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net_->closeListen(lc), ncclSuccess);
}

TEST_F(DriverMisuse, AConnectWhoseListenerIsGoneFailsWithAWarnSayingWhy) {
  char handle[128];
  void* lc = nullptr;
  ASSERT_EQ(net_->listen(ctx_, 0, handle, &lc), ncclSuccess);
  ASSERT_EQ(net_->closeListen(lc), ncclSuccess);  // its port now refuses connections
  void* sc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  ncclResult_t r = ncclSuccess;
  const auto t0 = std::chrono::steady_clock::now();
  while (r == ncclSuccess && sc == nullptr && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    r = net_->connect(ctx_, 0, handle, &sc, &dc);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r, ncclRemoteError);
  EXPECT_EQ(sc, nullptr);
  EXPECT_LT(waited, 10.0) << "FLEXIFORCE_CONNECT_TIMEOUT_MS=500 was not honoured";
  const std::string why = WarnsContaining("connect: ");
  EXPECT_NE(why.find("FLEXIFORCE_CONNECT_TIMEOUT_MS"), std::string::npos)
      << "the failed connect left no WARN naming the cause and the knob; WARNs:\n" << why;
}

// Killed jobs leave their statistics files in /dev/shm (about 1 MB each, in memory); a CI run left
// 66, this machine had 172. The plugin's init removes those beyond the newest
// FLEXIFORCE_STATS_KEEP_CRASHED. Not a DriverMisuse test: the environment differs before init.
TEST(StatsSweep, ThePluginsInitRemovesKilledProcessesFilesBeyondTheNewest) {
  // The plugin reads its environment once per process (and forked children inherit what it read):
  // after another test of this binary loaded it, the settings below would not apply.
  if (void* h = ::dlopen(DefaultPluginPath().c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(h);
    GTEST_SKIP() << "the plugin is already loaded in this process, its environment read; run this test in a "
                    "process of its own (--gtest_filter=StatsSweep.*), as ctest does";
  }
  char tmpl[] = "/tmp/ff-stats-sweep-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  setenv("FLEXIFORCE_STATS_DIR", dir.c_str(), 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  unsetenv("FLEXIFORCE_STATS_KEEP");
  unsetenv("FLEXIFORCE_STATS_KEEP_CRASHED");  // the children sweep with the default (8): none of 3
  // Three processes that load the plugin and are gone without exiting cleanly, as a SIGKILL leaves them.
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      PluginLibrary lib;
      void* ctx = nullptr;
      ncclNetCommConfig_t cfg{-1};
      if (lib.V11()->init(&ctx, 1, &cfg, CaptureLogger, nullptr) != ncclSuccess) ::_exit(2);
      ::_exit(0);  // no atexit handlers: the file stays
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const std::string path = dir + "/flexiforce-stats-" + std::to_string(child);
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    const timespec t[2] = {{1'700'000'000 + i * 60, 0}, {1'700'000'000 + i * 60, 0}};  // oldest first
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0);
    files.push_back(path);
  }
  setenv("FLEXIFORCE_STATS_KEEP_CRASHED", "1", 1);
  PluginLibrary lib;
  const ncclNet_v11_t* net = lib.V11();
  void* ctx = nullptr;
  ncclNetCommConfig_t cfg{-1};
  ASSERT_EQ(net->init(&ctx, 1, &cfg, CaptureLogger, nullptr), ncclSuccess);
  EXPECT_FALSE(std::filesystem::exists(files[0]));
  EXPECT_FALSE(std::filesystem::exists(files[1]));
  EXPECT_TRUE(std::filesystem::exists(files[2])) << "the newest killed process's file went";
  EXPECT_TRUE(std::filesystem::exists(dir + "/flexiforce-stats-" + std::to_string(::getpid())))
      << "this process has no statistics file";
  net->finalize(ctx);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  unsetenv("FLEXIFORCE_STATS_DIR");
  unsetenv("FLEXIFORCE_STATS_KEEP_CRASHED");
}

}  // namespace
}  // namespace ff::testing
