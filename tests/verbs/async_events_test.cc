// Async events over the fake libibverbs: the fd is made non-blocking, reads are paced to once per
// millisecond, every event is acknowledged, and each kind fails exactly the paths it concerns.
#include "verbs/async_events.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include "tests/verbs/fake_verbs.h"
#include "verbs/rdma_path.h"

namespace ff::verbs {
namespace {

class NullSink : public FrameSink {
 public:
  HeaderVerdict OnHeader(Path&, const FrameHeader&, char**) override { return HeaderVerdict::kAccept; }
  void OnFrameComplete(Path&, const FrameHeader&) override {}
};

std::unique_ptr<RdmaDevice> Open(const testing::FakeVerbs& fake, const char* name, int port) {
  std::unique_ptr<RdmaDevice> dev;
  Status s = OpenRdmaDevice(fake.loader(), name, port, 0, &dev);
  EXPECT_TRUE(s.ok()) << s.message();
  return dev;
}

std::unique_ptr<RdmaPath> MakePath(RdmaDevice& dev, int index) {
  std::unique_ptr<RdmaPath> p;
  Status s = RdmaPath::Create(index, dev, RdmaPathOptions{}, &p);
  EXPECT_TRUE(s.ok()) << s.message();
  RdmaEndpoint remote;
  remote.qpn = 0x777;
  remote.mtu = IBV_MTU_1024;
  s = p->Connect(remote);
  EXPECT_TRUE(s.ok()) << s.message();
  return p;
}

// Polls until the path reports something other than idle, for at most 200 ms (reads are paced).
PumpResult PollFor(RdmaPath& p, int ms = 200) {
  NullSink sink;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  PumpResult r = PumpResult::kIdle;
  while (std::chrono::steady_clock::now() < end) {
    r = p.Poll(sink);
    if (r != PumpResult::kIdle) return r;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return r;
}

TEST(AsyncEvents, TheFdIsNonBlockingAndReadsArePacedToOncePerMillisecond) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0", 1);
  ASSERT_NE(dev->events, nullptr);
  EXPECT_TRUE(fcntl(dev->context->async_fd, F_GETFL) & O_NONBLOCK);
  const uint64_t t0 = 1'000'000'000;
  dev->events->PollIfDue(t0);
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_PORT_ERR, 1);
  dev->events->PollIfDue(t0 + AsyncEvents::kPollIntervalNs / 2);  // too soon: not read
  EXPECT_EQ(fake.PendingAsyncEvents(), 1);
  EXPECT_FALSE(dev->events->PortDown(1));
  dev->events->PollIfDue(t0 + AsyncEvents::kPollIntervalNs);
  EXPECT_EQ(fake.PendingAsyncEvents(), 0);
  EXPECT_TRUE(dev->events->PortDown(1));
  EXPECT_EQ(fake.AsyncEventAcks(), 1);
  EXPECT_EQ(fake.AsyncReadsThatWouldBlock(), 0);
}

TEST(AsyncEvents, PortErrorFailsThePathsOnThatPortAtOnceAndPortActiveReadmitsThePort) {
  testing::FakeVerbs fake("rxe0=AA");
  auto dev = Open(fake, "rxe0", 1);
  auto a = MakePath(*dev, 0);
  auto b = MakePath(*dev, 1);
  EXPECT_EQ(PollFor(*a, 5), PumpResult::kIdle);

  // Another port's error concerns neither path.
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_PORT_ERR, 2);
  EXPECT_EQ(PollFor(*a, 20), PumpResult::kIdle);
  EXPECT_EQ(a->PendingError(), 0);
  EXPECT_EQ(fake.AsyncEventAcks(), 1);

  fake.InjectAsyncEvent("rxe0", IBV_EVENT_PORT_ERR, 1);
  EXPECT_EQ(PollFor(*a), PumpResult::kIoError);
  EXPECT_EQ(a->PendingError(), ENETDOWN);
  EXPECT_NE(a->rx_error().find("async event IBV_EVENT_PORT_ERR on rxe0 port 1"), std::string::npos) << a->rx_error();
  // The QP went to ERR at once, so nothing it holds is sent if the port comes back.
  ibv_qp_attr attr{};
  int mask = 0;
  ASSERT_TRUE(fake.LastModify(IBV_QPS_ERR, &attr, &mask));
  EXPECT_EQ(mask, IBV_QP_STATE);
  // The other path on the port learns it from the same read.
  EXPECT_EQ(PollFor(*b), PumpResult::kIoError);
  EXPECT_EQ(b->PendingError(), ENETDOWN);
  EXPECT_EQ(fake.AsyncEventAcks(), 2);

  // PORT_ACTIVE: the port takes new paths again; the failed ones stay failed (failback replaces them with new QPs).
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_PORT_ACTIVE, 1);
  dev->events->PollNow();
  auto c = MakePath(*dev, 2);
  EXPECT_EQ(PollFor(*c, 20), PumpResult::kIdle);
  EXPECT_FALSE(dev->events->PortDown(1));
  EXPECT_EQ(c->PendingError(), 0);
  EXPECT_EQ(a->PendingError(), ENETDOWN);
  EXPECT_EQ(fake.AsyncEventAcks(), 3);
  EXPECT_EQ(fake.AsyncReadsThatWouldBlock(), 0);
}

TEST(AsyncEvents, QpEventsFailOnlyThatQpsPath) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0", 1);
  auto a = MakePath(*dev, 0);
  auto b = MakePath(*dev, 1);
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_QP_ACCESS_ERR, static_cast<int>(a->qpn()));
  EXPECT_EQ(PollFor(*a), PumpResult::kIoError);
  EXPECT_EQ(a->PendingError(), EACCES);
  EXPECT_NE(a->rx_error().find("IBV_EVENT_QP_ACCESS_ERR"), std::string::npos) << a->rx_error();
  EXPECT_EQ(PollFor(*b, 20), PumpResult::kIdle);
  EXPECT_EQ(b->PendingError(), 0);
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_QP_FATAL, static_cast<int>(b->qpn()));
  EXPECT_EQ(PollFor(*b), PumpResult::kIoError);
  EXPECT_EQ(b->PendingError(), EIO);
  EXPECT_EQ(fake.AsyncEventAcks(), 2);
}

TEST(AsyncEvents, CqErrorAndDeviceFatalFailEveryPathOnTheDevice) {
  for (ibv_event_type type : {IBV_EVENT_CQ_ERR, IBV_EVENT_DEVICE_FATAL}) {
    testing::FakeVerbs fake("rxe0=AA,rxe1=A");
    auto dev = Open(fake, "rxe0", 1);
    auto dev2 = Open(fake, "rxe0", 2);
    auto other = Open(fake, "rxe1", 1);
    auto a = MakePath(*dev, 0);
    auto b = MakePath(*dev, 1);
    auto c = MakePath(*dev2, 2);  // another context: its own events
    auto d = MakePath(*other, 3);
    fake.InjectAsyncEvent("rxe1", type, 0);
    EXPECT_EQ(PollFor(*d), PumpResult::kIoError) << AsyncEventName(type);
    EXPECT_EQ(d->PendingError(), type == IBV_EVENT_DEVICE_FATAL ? ENODEV : EIO);
    EXPECT_EQ(PollFor(*a, 20), PumpResult::kIdle);
    EXPECT_EQ(PollFor(*b, 5), PumpResult::kIdle);
    EXPECT_EQ(PollFor(*c, 5), PumpResult::kIdle);
    fake.InjectAsyncEvent("rxe0", type, 0);
    EXPECT_EQ(PollFor(*a), PumpResult::kIoError);
    EXPECT_EQ(PollFor(*b), PumpResult::kIoError);
    EXPECT_EQ(fake.AsyncEventAcks(), 2);
  }
}

TEST(AsyncEvents, GidChangeAndUnknownEventsAreLoggedAndAcknowledgedOnly) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0", 1);
  auto a = MakePath(*dev, 0);
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_GID_CHANGE, 1);
  fake.InjectAsyncEvent("rxe0", static_cast<ibv_event_type>(99), 1);
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_LID_CHANGE, 1);
  EXPECT_EQ(PollFor(*a, 20), PumpResult::kIdle);
  EXPECT_EQ(fake.PendingAsyncEvents(), 0);
  EXPECT_EQ(fake.AsyncEventAcks(), 3);
  EXPECT_EQ(a->PendingError(), 0);
  EXPECT_EQ(dev->events->events_read(), 3u);
  EXPECT_EQ(AsyncEventName(99), "IBV_EVENT_99");
}

TEST(AsyncEvents, ADestroyedQpsFailureDoesNotFollowItsNumber) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0", 1);
  auto a = MakePath(*dev, 0);
  const uint32_t qpn = a->qpn();
  fake.InjectAsyncEvent("rxe0", IBV_EVENT_QP_FATAL, static_cast<int>(qpn));
  EXPECT_EQ(PollFor(*a), PumpResult::kIoError);
  EXPECT_NE(dev->events->ForPath(1, qpn).err, 0);
  a.reset();
  EXPECT_EQ(dev->events->ForPath(1, qpn).err, 0);
}

// The bootstrap-stream watch: EOF is the peer process gone (the path ends); an error of the stream's
// own network (here ECONNREFUSED on a connected UDP socket; in the VM, an unreachable route while the
// stream's interface is down) only ends the watch, and the QP carries on. The failed stream stays
// open until the path goes: closing it would send a live peer the FIN it reads as this process's exit.
TEST(RdmaPathPeerWatch, EofEndsThePathAStreamErrorOnlyEndsTheWatch) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0", 1);
  auto a = MakePath(*dev, 0);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  a->WatchPeer(sv[0]);
  EXPECT_EQ(PollFor(*a, 30), PumpResult::kIdle);
  ::close(sv[1]);
  EXPECT_EQ(PollFor(*a, 100), PumpResult::kClosed);
  EXPECT_NE(a->rx_error().find("its process exited"), std::string::npos) << a->rx_error();

  auto b = MakePath(*dev, 1);
  const int u = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(u, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  {
    // A port nobody listens on: bind one, learn it, close it.
    const int tmp = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_EQ(bind(tmp, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    socklen_t len = sizeof(to);
    ASSERT_EQ(getsockname(tmp, reinterpret_cast<sockaddr*>(&to), &len), 0);
    ::close(tmp);
  }
  ASSERT_EQ(connect(u, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  ASSERT_EQ(send(u, "x", 1, 0), 1);  // the ICMP port unreachable leaves ECONNREFUSED pending
  b->WatchPeer(u);
  EXPECT_EQ(PollFor(*b, 100), PumpResult::kIdle);
  EXPECT_EQ(b->PendingError(), 0);
  EXPECT_NE(fcntl(u, F_GETFD), -1) << "the failed stream was closed while the path lives";
  EXPECT_EQ(PollFor(*b, 30), PumpResult::kIdle);
  b.reset();
  EXPECT_EQ(fcntl(u, F_GETFD), -1) << "the path's end did not close its stream";
}

// The watch stream has no keepalive and no TCP_USER_TIMEOUT once watched, whatever the bootstrap set:
// an outage of the interface it rides must not abort it (the abort's reset, arriving once the link is
// back, would read at the peer as this process's exit and fail a healthy path there; seen in the VM's
// failback run before this).
TEST(RdmaPathPeerWatch, TheWatchedStreamCannotTimeOutDuringAnOutage) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0", 1);
  auto a = MakePath(*dev, 0);
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  ASSERT_EQ(listen(l, 1), 0);
  socklen_t len = sizeof(at);
  ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr*>(&at), &len), 0);
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  const int one = 1;
  const unsigned int timeout_ms = 10000;
  ASSERT_EQ(setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), 0);
  ASSERT_EQ(setsockopt(c, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms)), 0);
  a->WatchPeer(c);
  int keepalive = -1;
  unsigned int user_timeout = 1;
  socklen_t ilen = sizeof(keepalive), ulen = sizeof(user_timeout);
  ASSERT_EQ(getsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &keepalive, &ilen), 0);
  ASSERT_EQ(getsockopt(c, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, &ulen), 0);
  EXPECT_EQ(keepalive, 0);
  EXPECT_EQ(user_timeout, 0u);
  EXPECT_EQ(PollFor(*a, 30), PumpResult::kIdle);
  ::close(l);
}

}  // namespace
}  // namespace ff::verbs
