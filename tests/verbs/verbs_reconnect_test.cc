// Failback over verbs (plugin/verbs_reconnect.h) on the fake libibverbs: the sender's reconnector and
// the receiver's inbox bring a new queue pair up over a real rejoin stream through the process's
// rejoin hub on loopback, each end on its recipe's port; the port's readiness follows the device's
// async events; a stream that never finishes the exchange fails within the setup time.
#include "plugin/verbs_reconnect.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "plugin/hello_auth.h"
#include "plugin/plugin_state.h"
#include "tcp/socket.h"
#include "tests/verbs/fake_verbs.h"

namespace ff {
namespace {

uint64_t Now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

sockaddr_storage Loopback() {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ss;
}

class VerbsReconnect : public ::testing::Test {
 protected:
  void SetUp() override {
    // The rejoin hub listens on the plugin's TCP devices: loopback only, no verbs, no side files.
    setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
    setenv("FLEXIFORCE_TRANSPORT", "tcp", 1);
    setenv("FLEXIFORCE_STATS", "0", 1);
    setenv("FLEXIFORCE_NIC_HEALTH", "0", 1);
    ASSERT_TRUE(PluginState::Get().Init(nullptr).ok());
    ASSERT_FALSE(PluginState::Get().devices().empty()) << "no loopback device";
    ASSERT_TRUE(verbs::OpenRdmaDevice(fake_.loader(), "rxe0", 1, 0, &sender_dev_).ok());
    ASSERT_TRUE(verbs::OpenRdmaDevice(fake_.loader(), "rxe1", 1, 0, &receiver_dev_).ok());
    HandleSecret secret{};
    secret[0] = 7;
    key_ = DeriveConnectionKey(secret, kConnId, 99);
  }

  std::unique_ptr<VerbsReconnectInbox> MakeInbox(uint64_t setup_ns = 2'000'000'000) {
    std::vector<VerbsPathRecipe> recipes(2, VerbsPathRecipe{receiver_dev_.get(), {}});
    recipes[1].options.key_slot = 1;
    return std::make_unique<VerbsReconnectInbox>(kConnId, key_, 2, std::vector<sockaddr_storage>{Loopback()},
                                                 tcp::PathSocketOptions{}, std::move(recipes), setup_ns);
  }
  std::unique_ptr<VerbsReconnector> MakeReconnector(const ReconnectInfo& info) {
    std::vector<VerbsPathRecipe> recipes(2, VerbsPathRecipe{sender_dev_.get(), {}});
    recipes[1].options.qp.flow_label = 0x12345;
    PathEndpoint bootstrap{Loopback(), Loopback(), 0, 0};
    auto rc = std::make_unique<VerbsReconnector>(kConnId, key_, 2, 1 << 20, 50, bootstrap, std::move(recipes),
                                                 tcp::PathSocketOptions{}, /*link_events=*/false, 2'000'000'000);
    rc->OnPeerInfo(info);
    return rc;
  }
  // Drives both ends until the sender has its path and the receiver its arrival (or 5 s pass).
  void Rejoin(VerbsReconnector& rc, VerbsReconnectInbox& inbox, int index, std::unique_ptr<Path>* sent,
              ReconnectInbox::Arrival* got, std::string* detail) {
    std::vector<ReconnectInbox::Arrival> arrivals;
    bool sender_done = false;
    const uint64_t end = Now() + 5'000'000'000;
    while ((!sender_done || arrivals.empty()) && Now() < end) {
      if (!sender_done) {
        const Reconnector::Step step = rc.Advance(index, Now(), sent, detail);
        ASSERT_NE(step, Reconnector::Step::kFailed) << *detail;
        sender_done = step == Reconnector::Step::kDone;
      }
      inbox.Poll(Now());
      inbox.Take(&arrivals);
    }
    ASSERT_TRUE(sender_done) << "the sender's rejoin did not complete";
    ASSERT_EQ(arrivals.size(), 1u) << "the receiver adopted no new queue pair";
    *got = std::move(arrivals[0]);
  }

  static constexpr uint64_t kConnId = 0xfeedbeef12345678ull;
  testing::FakeVerbs fake_{"rxe0=A,rxe1=A"};
  std::unique_ptr<verbs::RdmaDevice> sender_dev_, receiver_dev_;
  ConnectionKey key_{};
};

TEST_F(VerbsReconnect, AFailedPathComesBackAsANewQueuePairOnItsPortEachTime) {
  auto inbox = MakeInbox();
  const ReconnectInfo info = inbox->Info();
  ASSERT_NE(info.port, 0) << "the rejoin hub did not open a listener on loopback";
  auto rc = MakeReconnector(info);
  ASSERT_TRUE(rc->Available());
  EXPECT_TRUE(rc->Ready(1, Now(), 0));

  std::unique_ptr<Path> sent;
  ReconnectInbox::Arrival got;
  std::string detail;
  ASSERT_NO_FATAL_FAILURE(Rejoin(*rc, *inbox, 1, &sent, &got, &detail));
  ASSERT_NE(sent, nullptr);
  ASSERT_NE(got.path, nullptr);
  EXPECT_EQ(got.index, 1);
  EXPECT_EQ(sent->index(), 1);
  EXPECT_TRUE(sent->alive());
  EXPECT_TRUE(got.path->alive());
  EXPECT_NE(detail.find("rxe0:1"), std::string::npos) << detail;
  EXPECT_NE(detail.find("set up over 127.0.0.1"), std::string::npos) << detail;
  auto* s = dynamic_cast<verbs::RdmaPath*>(sent.get());
  auto* r = dynamic_cast<verbs::RdmaPath*>(got.path.get());
  ASSERT_NE(s, nullptr);
  ASSERT_NE(r, nullptr);
  // The sender connected last (it reads the acceptor's endpoint after the acceptor's RTS): its RTR
  // names the receiver's new QP, with the path's flow label kept.
  ibv_qp_attr rtr{};
  int mask = 0;
  ASSERT_TRUE(fake_.LastModify(IBV_QPS_RTR, &rtr, &mask));
  EXPECT_EQ(rtr.dest_qp_num, r->qpn());
  EXPECT_EQ(rtr.ah_attr.grh.flow_label, 0x12345u);
  // The receiver's endpoint told the sender which descriptor key slot its port's keys sit in (the
  // receiver's recipe says 1 for path 1; the sender's said 0).
  EXPECT_EQ(s->local().key_slot, 1);

  // The same path failing again comes back as yet another QP: QPNs are never reused by a rejoin.
  const uint32_t first_sender_qpn = s->qpn(), first_receiver_qpn = r->qpn();
  std::unique_ptr<Path> sent2;
  ReconnectInbox::Arrival got2;
  ASSERT_NO_FATAL_FAILURE(Rejoin(*rc, *inbox, 1, &sent2, &got2, &detail));
  EXPECT_NE(dynamic_cast<verbs::RdmaPath*>(sent2.get())->qpn(), first_sender_qpn);
  EXPECT_NE(dynamic_cast<verbs::RdmaPath*>(got2.path.get())->qpn(), first_receiver_qpn);
  EXPECT_EQ(inbox->in_setup(), 0u);
}

TEST_F(VerbsReconnect, APortDownByAsyncEventIsNotReadyUntilItIsActiveAgain) {
  EXPECT_TRUE(VerbsPortReady(*sender_dev_, false, Now(), 0));
  fake_.InjectAsyncEvent("rxe0", IBV_EVENT_PORT_ERR, 1);
  sender_dev_->events->PollNow();
  EXPECT_FALSE(VerbsPortReady(*sender_dev_, false, Now(), 0));
  auto rc = MakeReconnector(ReconnectInfo{});
  EXPECT_FALSE(rc->Available()) << "no rejoin port announced";
  EXPECT_FALSE(rc->Ready(0, Now(), 0)) << "the port is down";
  fake_.InjectAsyncEvent("rxe0", IBV_EVENT_PORT_ACTIVE, 1);
  sender_dev_->events->PollNow();
  EXPECT_TRUE(VerbsPortReady(*sender_dev_, false, Now(), 0));
  EXPECT_TRUE(rc->Ready(0, Now(), 0));
  EXPECT_FALSE(rc->Ready(5, Now(), 0)) << "no such path";
}

TEST_F(VerbsReconnect, AnExchangeThatStopsMidwayFailsWithinTheSetupTimeOnBothEnds) {
  auto inbox = MakeInbox(/*setup_ns=*/200'000'000);
  const ReconnectInfo info = inbox->Info();
  ASSERT_NE(info.port, 0);
  // A sender that signs a valid rejoin hello and then says nothing: the receiver's exchange waits for
  // an endpoint that never comes, and gives up after its setup time without adopting anything.
  tcp::Socket sock;
  sockaddr_storage listener = Loopback();
  reinterpret_cast<sockaddr_in*>(&listener)->sin_port = htons(info.port);
  ASSERT_TRUE(tcp::StartConnect(listener, nullptr, 0, 0, &sock).ok());
  HelloWire hello = NewRejoinHello(key_, kConnId, 2, 0, 1 << 20, 50, 1, 1);
  std::vector<ReconnectInbox::Arrival> arrivals;
  bool sent = false;
  bool started = false;
  const uint64_t end = Now() + 3'000'000'000;
  while (Now() < end) {
    if (!sent) {
      int err = 0;
      if (tcp::PollConnect(sock.fd(), &err) == tcp::ConnectProgress::kConnected) {
        ASSERT_EQ(::send(sock.fd(), &hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
        sent = true;
      }
    }
    inbox->Poll(Now());
    started |= inbox->in_setup() == 1;
    if (started && inbox->in_setup() == 0) break;
  }
  EXPECT_TRUE(started) << "the hub never admitted the rejoin";
  EXPECT_EQ(inbox->in_setup(), 0u) << "the half-done exchange was not given up";
  EXPECT_FALSE(inbox->Take(&arrivals));

  // The sender's side: a receiver that admits the stream but never answers (no inbox polls here)
  // fails the attempt after the setup time, naming the step; the path can be tried again.
  auto rc = std::make_unique<VerbsReconnector>(kConnId, key_, 2, 1 << 20, 50, PathEndpoint{Loopback(), Loopback(), 0, 0},
                                               std::vector<VerbsPathRecipe>(2, VerbsPathRecipe{sender_dev_.get(), {}}),
                                               tcp::PathSocketOptions{}, false, 200'000'000);
  rc->OnPeerInfo(info);
  std::unique_ptr<Path> out;
  std::string detail;
  Reconnector::Step step = Reconnector::Step::kPending;
  while (step == Reconnector::Step::kPending && Now() < end + 2'000'000'000) step = rc->Advance(0, Now(), &out, &detail);
  EXPECT_EQ(step, Reconnector::Step::kFailed);
  EXPECT_NE(detail.find("did not complete within 200 ms"), std::string::npos) << detail;
  EXPECT_EQ(out, nullptr);
}

TEST_F(VerbsReconnect, ARejoinNotSignedWithTheConnectionsKeyGetsNoQueuePair) {
  auto inbox = MakeInbox();
  const ReconnectInfo info = inbox->Info();
  ASSERT_NE(info.port, 0);
  sockaddr_storage listener = Loopback();
  reinterpret_cast<sockaddr_in*>(&listener)->sin_port = htons(info.port);
  HandleSecret other{};
  other[0] = 8;  // not the connection's secret
  const ConnectionKey wrong = DeriveConnectionKey(other, kConnId, 99);
  tcp::Socket sock;
  ASSERT_TRUE(tcp::StartConnect(listener, nullptr, 0, 0, &sock).ok());
  const HelloWire forged = NewRejoinHello(wrong, kConnId, 2, 0, 1 << 20, 50, 1, 1);
  bool sent = false, closed = false;
  const uint64_t end = Now() + 3'000'000'000;
  while (!closed && Now() < end) {
    int err = 0;
    if (!sent && tcp::PollConnect(sock.fd(), &err) == tcp::ConnectProgress::kConnected) {
      ASSERT_EQ(::send(sock.fd(), &forged, sizeof(forged), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(forged)));
      sent = true;
    }
    inbox->Poll(Now());
    EXPECT_EQ(inbox->in_setup(), 0u) << "a forged rejoin started a queue pair exchange";
    char byte;
    closed = sent && ::recv(sock.fd(), &byte, 1, MSG_DONTWAIT) == 0;
  }
  EXPECT_TRUE(closed) << "the hub left the forger's stream open";
  std::vector<ReconnectInbox::Arrival> arrivals;
  EXPECT_FALSE(inbox->Take(&arrivals));
}

}  // namespace
}  // namespace ff
