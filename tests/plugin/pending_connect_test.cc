// Connects NCCL abandons mid-handshake: connect() returned a NULL comm (the peer's listener is not
// up, or the handshake is still going), then NCCL never calls it again (its communicator aborted or
// was destroyed). The plugin must free what such a connect holds: after FLEXIFORCE_CONNECT_TIMEOUT_MS
// without a call, or at once when its context is finalized.
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin/listen_handle.h"
#include "tests/plugin/two_process.h"

namespace ff::testing {
namespace {

constexpr int kTimeoutMs = 300;  // FLEXIFORCE_CONNECT_TIMEOUT_MS of this binary (the knob's minimum is 100)

// Set before the plugin reads its configuration (its first init).
const bool g_env = [] {
  setenv("FLEXIFORCE_CONNECT_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
  setenv("FLEXIFORCE_STATS", "0", 1);
  return true;
}();

int OpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

// One complete connection, opened and closed: whatever the plugin creates once per process (the
// rejoin listener, samplers) exists afterwards, so descriptor counts compare like with like.
void WarmUp(NetPeer& peer) {
  char handle[128];
  void* lc = peer.Listen(handle);
  void* sc = nullptr;
  void* rc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sc == nullptr || rc == nullptr) {
    if (sc == nullptr) {
      ASSERT_EQ(peer.net()->connect(peer.ctx(), 0, handle, &sc, &dc), ncclSuccess);
    }
    if (rc == nullptr) {
      ASSERT_EQ(peer.net()->accept(lc, &rc, &dc), ncclSuccess);
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "warm-up connection timed out";
  }
  ASSERT_EQ(peer.net()->closeSend(sc), ncclSuccess);
  ASSERT_EQ(peer.net()->closeRecv(rc), ncclSuccess);
  ASSERT_EQ(peer.net()->closeListen(lc), ncclSuccess);
}

// A listen handle whose listener is gone: every connect to it is refused, and the plugin keeps
// retrying (the listener may not be up yet), returning a NULL comm each time. Its ports stay bound
// by plain sockets that never listen, so a listener the test (or the plugin) opens later cannot be
// handed one of them: with the port free again, a later ephemeral listener could take it and the
// "dead" connect would reach a live listener (seen once under TSan: the connect ended in 23 ms).
class DeadListener {
 public:
  explicit DeadListener(NetPeer& peer) : handle_(128) {
    void* lc = peer.Listen(handle_.data());
    ListenHandle h;
    EXPECT_TRUE(DecodeHandle(handle_.data(), &h).ok());
    // Each port is held by its own socket from the moment the listener closes; closeListen frees
    // the port, and nothing in this process opens a listener in between.
    std::vector<sockaddr_storage> addrs = h.addrs;
    EXPECT_EQ(peer.net()->closeListen(lc), ncclSuccess);
    for (const sockaddr_storage& a : addrs) {
      int fd = socket(a.ss_family, SOCK_STREAM, 0);
      const socklen_t len = a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
        ADD_FAILURE() << "cannot hold the dead listener's port: " << std::strerror(errno);
        if (fd >= 0) close(fd);
        continue;
      }
      fds_.push_back(fd);
    }
  }
  ~DeadListener() {
    for (int fd : fds_) close(fd);
  }
  DeadListener(const DeadListener&) = delete;
  DeadListener& operator=(const DeadListener&) = delete;
  const std::vector<char>& handle() const { return handle_; }
  int held_fds() const { return static_cast<int>(fds_.size()); }

 private:
  std::vector<char> handle_;
  std::vector<int> fds_;
};

// Starts `n` connects with `ctx`, each called once and left in progress, on copies of `handle`.
std::vector<std::vector<char>> Abandon(NetPeer& peer, void* ctx, const std::vector<char>& handle, int n) {
  std::vector<std::vector<char>> copies(static_cast<size_t>(n), handle);
  for (auto& h : copies) {
    void* sc = nullptr;
    ncclNetDeviceHandle_t* dc = nullptr;
    EXPECT_EQ(peer.net()->connect(ctx, 0, h.data(), &sc, &dc), ncclSuccess);
    EXPECT_EQ(sc, nullptr) << "a refused connect is retried, not finished, within its timeout";
  }
  return copies;
}

TEST(PendingConnect, AbandonedConnectIsFreedAfterTheConnectTimeout) {
  NetPeer peer;
  WarmUp(peer);
  if (HasFatalFailure()) return;
  DeadListener dead_listener(peer);
  const std::vector<char>& dead = dead_listener.handle();
  const int before = OpenFds();
  constexpr int kAbandoned = 16;
  auto handles = Abandon(peer, peer.ctx(), dead, kAbandoned);
  const int holding = OpenFds();
  ASSERT_GE(holding, before + kAbandoned) << "each connect in progress holds at least one socket";

  // NCCL never calls those connects again. After the timeout, the next plugin call sweeps them.
  std::this_thread::sleep_for(std::chrono::milliseconds(kTimeoutMs + 200));
  char handle[128];
  void* lc = peer.Listen(handle);
  ASSERT_EQ(peer.net()->closeListen(lc), ncclSuccess);
  EXPECT_EQ(OpenFds(), before) << "abandoned connects still hold " << OpenFds() - before << " descriptor(s)";

  // Coming back with an expired handle is an error that says so, not a silent new connection.
  void* sc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  EXPECT_EQ(peer.net()->connect(peer.ctx(), 0, handles[0].data(), &sc, &dc), ncclInvalidUsage);
  EXPECT_EQ(sc, nullptr);
}

TEST(PendingConnect, ConnectStillCalledIsNotExpiredAndTimesOutWithAClearError) {
  NetPeer peer;
  WarmUp(peer);
  if (HasFatalFailure()) return;
  // A listener that never comes up: NCCL calls connect all along, other calls sweep meanwhile, and
  // the connect must stay until its own deadline, then fail with the timeout (not "abandoned").
  DeadListener dead_listener(peer);
  const std::vector<char>& dead = dead_listener.handle();
  // The connect's deadline runs from its first call (in Abandon): the clock starts before it, or a
  // slow first call (ASan, busy CPUs) makes an on-time expiry look early (296.7 of 300 ms, seen).
  const auto start = std::chrono::steady_clock::now();
  auto handles = Abandon(peer, peer.ctx(), dead, 1);
  void* sc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  ncclResult_t r = ncclSuccess;
  int calls = 0;
  while (r == ncclSuccess && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    r = peer.net()->connect(peer.ctx(), 0, handles[0].data(), &sc, &dc);
    ++calls;
    char other[128];
    void* lc = peer.Listen(other);  // listen and closeListen sweep abandoned connects
    ASSERT_EQ(peer.net()->closeListen(lc), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(r, ncclRemoteError) << "after " << calls << " calls";
  EXPECT_EQ(sc, nullptr);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(kTimeoutMs))
      << "the connect ended before its timeout";
}

TEST(PendingConnect, FinalizeFreesItsContextsConnectsAtOnce) {
  NetPeer peer;
  WarmUp(peer);
  if (HasFatalFailure()) return;
  DeadListener dead_listener(peer);
  const std::vector<char>& dead = dead_listener.handle();
  const int before = OpenFds();
  void* ctx = nullptr;
  ncclNetCommConfig_t cfg{-1};
  ASSERT_EQ(peer.net()->init(&ctx, 42, &cfg, StderrLogger, nullptr), ncclSuccess);
  constexpr int kAbandoned = 8;
  auto mine = Abandon(peer, ctx, dead, kAbandoned);
  auto others = Abandon(peer, peer.ctx(), dead, 1);  // another communicator's connect: not finalized
  ASSERT_GE(OpenFds(), before + kAbandoned + 1);
  ASSERT_EQ(peer.net()->finalize(ctx), ncclSuccess);
  const int after = OpenFds();
  EXPECT_LT(after, before + kAbandoned) << "finalize left the context's connects holding their sockets";
  EXPECT_GE(after, before + 1) << "finalize freed another context's connect";
  // The other context's connect goes on: called again, it is still a refused retry, not an error.
  void* sc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  EXPECT_EQ(peer.net()->connect(peer.ctx(), 0, others[0].data(), &sc, &dc), ncclSuccess);
  EXPECT_EQ(sc, nullptr);
}

// NCCL's proxy threads connect for different communicators at once while other calls sweep: the
// registry of connects in progress is shared (the TSan lane runs this).
TEST(PendingConnect, ThreadsConnectAbandonAndSweepAtOnce) {
  NetPeer peer;
  WarmUp(peer);
  if (HasFatalFailure()) return;
  DeadListener dead_listener(peer);
  const std::vector<char>& dead = dead_listener.handle();
  const int before = OpenFds();
  constexpr int kThreads = 3;
  constexpr int kCycles = 40;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads + 1);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCycles && errors[t].empty(); ++i) {
        char handle[128];
        void* lc = nullptr;
        if (peer.net()->listen(peer.ctx(), 0, handle, &lc) != ncclSuccess) {
          errors[t] = "listen failed";
          break;
        }
        void* sc = nullptr;
        void* rc = nullptr;
        ncclNetDeviceHandle_t* dc = nullptr;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while ((sc == nullptr || rc == nullptr) && errors[t].empty()) {
          if (sc == nullptr && peer.net()->connect(peer.ctx(), 0, handle, &sc, &dc) != ncclSuccess)
            errors[t] = "connect failed";
          if (rc == nullptr && peer.net()->accept(lc, &rc, &dc) != ncclSuccess) errors[t] = "accept failed";
          if (std::chrono::steady_clock::now() > deadline) errors[t] = "connect/accept timed out";
        }
        if (sc) peer.net()->closeSend(sc);
        if (rc) peer.net()->closeRecv(rc);
        peer.net()->closeListen(lc);
      }
    });
  }
  // Meanwhile connects are abandoned on another thread; they expire while the others run.
  threads.emplace_back([&] {
    for (int i = 0; i < 20; ++i) {
      std::vector<char> h = dead;
      void* sc = nullptr;
      ncclNetDeviceHandle_t* dc = nullptr;
      if (peer.net()->connect(peer.ctx(), 0, h.data(), &sc, &dc) != ncclSuccess || sc != nullptr) {
        errors[kThreads] = "a refused connect did not return a NULL comm";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e;
  std::this_thread::sleep_for(std::chrono::milliseconds(kTimeoutMs + 200));
  char handle[128];
  void* lc = peer.Listen(handle);
  ASSERT_EQ(peer.net()->closeListen(lc), ncclSuccess);
  EXPECT_EQ(OpenFds(), before) << "descriptors left after every connect ended or expired";
}

}  // namespace
}  // namespace ff::testing
