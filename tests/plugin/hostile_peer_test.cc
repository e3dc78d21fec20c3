// Hostile peers against the built .so: forged, replayed, misdirected and foreign rejoins; partial
// connection groups that never complete; floods of silent connections under a low descriptor limit.
#include <fcntl.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/reconnect.h"
#include "plugin/listen_handle.h"
#include "tests/plugin/raw_peer.h"
#include "tests/plugin/two_process.h"

namespace ff::testing {
namespace {

constexpr uint64_t kConnId = 0xc0ffee;

// Tests the receive request until `pred` holds or `seconds` pass.
template <typename Pred>
bool DriveUntil(NetPeer& peer, void* req, int* done, Pred pred, int seconds = 5) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int sizes[1];
  while (std::chrono::steady_clock::now() < deadline) {
    if (!*done && peer.net()->test(req, done, sizes) != ncclSuccess) return false;
    if (pred()) return true;
    usleep(1000);
  }
  return false;
}

bool ReadExactly(int fd, void* p, size_t n) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// A two-path connection made of raw sockets (the test is the sender), accepted by the plugin, with
// one 16-byte receive posted and the rejoin listener's address read from the connection.
class TwoPathConnection : public ::testing::Test {
 protected:
  void SetUp() override {
    lc_ = peer_.Listen(handle_);
    for (int i = 0; i < 2; ++i) {
      fd_[i] = RawConnect(handle_);
      ASSERT_GE(fd_[i], 0);
      ASSERT_TRUE(SendHello(fd_[i], SignedHello(handle_, kConnId, 2, i)));
    }
    rc_ = peer_.Accept(lc_);
    void* data = buf_.data();
    size_t cap = buf_.size();
    int tag = 0;
    ASSERT_EQ(peer_.net()->irecv(rc_, 1, &data, &cap, &tag, nullptr, nullptr, &req_), ncclSuccess);
    ASSERT_NE(req_, nullptr);
    // The first frame on path 0 is the receiver's kReconnectInfo (it publishes descriptors later).
    int done = 0;
    ASSERT_TRUE(DriveUntil(peer_, req_, &done, [] { return true; }));
    FrameHeader h{};
    ASSERT_TRUE(ReadExactly(fd_[0], &h, sizeof(h)));
    ASSERT_EQ(h.type, static_cast<uint8_t>(FrameType::kReconnectInfo));
    ReconnectInfo ri;
    ASSERT_TRUE(ReadExactly(fd_[0], &ri, sizeof(ri)));
    ASSERT_GT(ri.port, 0u);
    rejoin_ = FirstAddress(handle_);
    rejoin_.sin_port = htons(ri.port);
  }
  void TearDown() override {
    for (int fd : fd_)
      if (fd >= 0) close(fd);
    for (int fd : extra_) close(fd);
    if (rc_) peer_.net()->closeRecv(rc_);
    if (lc_) peer_.net()->closeListen(lc_);
  }
  // Opens a rejoin connection (from `source` when given) and sends `w`.
  int Rejoin(const HelloWire& w, const char* source = nullptr) {
    int fd = Dial(rejoin_, source);
    EXPECT_GE(fd, 0) << "cannot connect to the rejoin listener" << (source ? std::string(" from ") + source : "");
    if (fd >= 0) {
      EXPECT_TRUE(SendHello(fd, w));
      extra_.push_back(fd);
    }
    return fd;
  }
  // Resets path 0, as a sender's fence does, and waits until the receiver has noticed.
  void FailPath0() {
    ResetAndClose(fd_[0]);
    fd_[0] = -1;
    usleep(20000);
    int done = 0;
    (void)DriveUntil(peer_, req_, &done, [] { return false; }, 0);
    for (int i = 0; i < 20; ++i) peer_.net()->test(req_, &done, nullptr), usleep(1000);
  }
  // Sends the posted message on `fd` as path `index` and waits for it.
  bool DeliverOn(int fd, int index) {
    FrameHeader d{};
    d.type = static_cast<uint8_t>(FrameType::kData);
    d.path = static_cast<uint16_t>(index);
    d.length = 16;
    d.total = 16;
    SealHeader(&d);
    if (write(fd, &d, sizeof(d)) != 64 || write(fd, "0123456789abcdef", 16) != 16) return false;
    int done = 0;
    return DriveUntil(peer_, req_, &done, [&] { return done != 0; }) &&
           std::string(buf_.begin(), buf_.end()) == "0123456789abcdef";
  }
  // Whether the receiver closed `fd` within `seconds` while being progressed.
  bool ClosedWithin(int fd, int seconds) {
    int done = 0;
    return DriveUntil(peer_, req_, &done, [&] { return PeerClosed(fd); }, seconds);
  }

  NetPeer peer_;
  char handle_[128];
  void* lc_ = nullptr;
  void* rc_ = nullptr;
  void* req_ = nullptr;
  int fd_[2] = {-1, -1};
  std::vector<int> extra_;
  std::vector<char> buf_ = std::vector<char>(16, 'k');
  sockaddr_in rejoin_{};
};

TEST_F(TwoPathConnection, RejoinWithAForgedMacIsRefused) {
  FailPath0();
  HelloWire w = SignedRejoin(handle_, kConnId, 2, 0, 1);
  w.auth.mac[5] ^= 0x01;  // one bit
  int forged = Rejoin(w);
  EXPECT_TRUE(ClosedWithin(forged, 3)) << "a rejoin with a forged MAC was kept";
  // A counter changed after signing is a forgery too.
  HelloWire bumped = SignedRejoin(handle_, kConnId, 2, 0, 1);
  bumped.auth.counter = 9;
  EXPECT_TRUE(ClosedWithin(Rejoin(bumped), 3)) << "a rejoin whose counter was altered was kept";
  // The real sender's rejoin still works afterwards.
  int good = Rejoin(SignedRejoin(handle_, kConnId, 2, 0, 2));
  EXPECT_TRUE(DeliverOn(good, 0));
}

TEST_F(TwoPathConnection, ReplayedRejoinIsRefused) {
  FailPath0();
  const HelloWire first = SignedRejoin(handle_, kConnId, 2, 0, 1);
  int a = Rejoin(first);
  int done = 0;
  ASSERT_TRUE(DriveUntil(peer_, req_, &done, [] { return false; }, 0) || true);
  usleep(50000);
  for (int i = 0; i < 50; ++i) peer_.net()->test(req_, &done, nullptr), usleep(1000);
  ASSERT_FALSE(PeerClosed(a)) << "the authentic rejoin was refused";
  // The rejoined path fails too; an eavesdropper replays the captured rejoin.
  ResetAndClose(a);
  extra_.erase(std::find(extra_.begin(), extra_.end(), a));
  usleep(20000);
  for (int i = 0; i < 50; ++i) peer_.net()->test(req_, &done, nullptr), usleep(1000);
  int replay = Rejoin(first);
  EXPECT_TRUE(ClosedWithin(replay, 3)) << "a replayed rejoin was admitted";
  // A fresh counter from the real sender is admitted.
  int fresh = Rejoin(SignedRejoin(handle_, kConnId, 2, 0, 2));
  EXPECT_TRUE(DeliverOn(fresh, 0));
}

TEST_F(TwoPathConnection, RejoinForALivePathIsRefusedAndTheLiveStreamKept) {
  // Path 1 is alive here: an authentic rejoin for it must not replace it.
  int intruder = Rejoin(SignedRejoin(handle_, kConnId, 2, 1, 1));
  EXPECT_TRUE(ClosedWithin(intruder, 4)) << "a rejoin replaced (or was held for) a live path";
  EXPECT_FALSE(PeerClosed(fd_[1])) << "the live path 1 was closed";
  EXPECT_TRUE(DeliverOn(fd_[1], 1)) << "the live path no longer delivers";
}

TEST_F(TwoPathConnection, RejoinFromAForeignAddressIsRefused) {
  FailPath0();
  int foreign = Rejoin(SignedRejoin(handle_, kConnId, 2, 0, 1), "127.0.0.2");
  ASSERT_GE(foreign, 0);
  EXPECT_TRUE(ClosedWithin(foreign, 3)) << "a rejoin from an address the connection never used was admitted";
  int good = Rejoin(SignedRejoin(handle_, kConnId, 2, 0, 2));
  EXPECT_TRUE(DeliverOn(good, 0));
}

// The real peer, in a child forked before the test lowers its own limits: waits for a byte on `r`,
// connects through the plugin and sends one 1 MiB message with pattern 9.
int RealSender(const char* handle, int r) {
  char go;
  if (read(r, &go, 1) != 1) return 60;
  char copy[128];
  std::memcpy(copy, handle, sizeof(copy));
  NetPeer p2;
  void* sc = p2.Connect(copy);
  std::vector<char> buf(1 << 20);
  FillPattern(buf.data(), 9, buf.size());
  void* req = nullptr;
  while (req == nullptr)
    if (p2.net()->isend(sc, buf.data(), buf.size(), 1, nullptr, nullptr, &req) != ncclSuccess) return 61;
  return p2.Wait(req) == ncclSuccess ? 0 : 62;
}

// Accepts (20 s bound) and checks that the connection carries RealSender's message.
void ExpectRealMessage(NetPeer& peer, void* lc) {
  void* rc = peer.Accept(lc);
  std::vector<char> buf(1 << 20, 0);
  void* data = buf.data();
  size_t cap = buf.size();
  int tag = 1;
  void* req = nullptr;
  while (req == nullptr) ASSERT_EQ(peer.net()->irecv(rc, 1, &data, &cap, &tag, nullptr, nullptr, &req), ncclSuccess);
  ASSERT_EQ(peer.Wait(req, nullptr, 20), ncclSuccess) << "the accepted connection is not the real peer's";
  EXPECT_EQ(CheckPattern(buf.data(), 9, buf.size()), -1);
  peer.net()->closeRecv(rc);
}

// A hello that declares two paths, from a peer that then goes away, is not a connection: accept
// never hands it out, its socket is freed once FLEXIFORCE_CONNECT_TIMEOUT_MS has passed, and the
// real peer that comes next is served.
// The plugin reads FLEXIFORCE_CONNECT_TIMEOUT_MS once, at its first init in the process: set here,
// before any test of this binary initializes it, so the test passes whichever tests ran before it
// in the same process (set inside the test, it was 1 s only when the test ran alone).
const bool kConnectTimeoutSet = ::setenv("FLEXIFORCE_CONNECT_TIMEOUT_MS", "1000", 1) == 0;

TEST(HostilePeer, PartialGroupWhosePathsClosedExpiresAndAcceptServesTheRealPeer) {
  ASSERT_TRUE(kConnectTimeoutSet);
  NetPeer peer;
  char handle[128];
  void* lc = peer.Listen(handle);
  ChildProcess real([&](int r, int) { return RealSender(handle, r); });
  int stray = RawConnect(handle);
  ASSERT_GE(stray, 0);
  ASSERT_TRUE(SendHello(stray, SignedHello(handle, 1, 2, 0)));
  shutdown(stray, SHUT_WR);  // gone for the listener; our end still tells whether it freed the socket
  void* rc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until && rc == nullptr) {
    ASSERT_EQ(peer.net()->accept(lc, &rc, &dc), ncclSuccess);
    usleep(1000);
  }
  EXPECT_EQ(rc, nullptr) << "accept handed out the half-arrived connection of a peer that left";
  EXPECT_TRUE(PeerClosed(stray)) << "the expired group still holds its socket";
  close(stray);
  WriteAll(real.to_child(), "g", 1);
  ExpectRealMessage(peer, lc);
  EXPECT_EQ(real.Wait(), 0);
  peer.net()->closeListen(lc);
}

int OpenDescriptors() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd)
    if (fcntl(fd, F_GETFD) != -1) ++n;
  return n;
}

// Under a descriptor limit a few above what the listener holds, 300 silent connections must not fail
// the listen comm (EMFILE is transient: the oldest stranger is shed), and the real peer connects.
TEST(HostilePeer, SilentConnectionFloodUnderALowDescriptorLimitDoesNotStopTheRealPeer) {
#if defined(__SANITIZE_ADDRESS__)
  // UBSan's vptr check probes memory through a pipe, which it cannot open while this test holds the
  // descriptor table full: it then reports live objects as "invalid vptr". The plain and TSan lanes
  // run this test.
  GTEST_SKIP() << "descriptor exhaustion blinds UBSan's vptr check (runs in the plain and TSan lanes)";
#endif
  NetPeer peer;
  char handle[128];
  void* lc = peer.Listen(handle);
  ChildProcess real([&](int r, int) { return RealSender(handle, r); });
  ChildProcess strangers([&](int r, int w) {
    std::vector<int> fds;
    sockaddr_in to = FirstAddress(handle);
    for (int i = 0; i < 300; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      (void)connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
      fds.push_back(fd);
    }
    usleep(200000);
    WriteAll(w, "s", 1);
    char c;
    (void)read(r, &c, 1);  // silent until the test is over
    return 0;
  });
  char c;
  ReadAll(strangers.from_child(), &c, 1);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(OpenDescriptors() + 12);
  ASSERT_LT(low.rlim_cur, 300u);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  WriteAll(real.to_child(), "g", 1);
  ExpectRealMessage(peer, lc);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(real.Wait(), 0);
  WriteAll(strangers.to_child(), "x", 1);
  strangers.Wait();
  peer.net()->closeListen(lc);
}

}  // namespace
}  // namespace ff::testing
