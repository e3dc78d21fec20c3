// Send coalescing (SendComm::Isend): small eager sends posted in a burst leave in one write, a held
// send is written by the caller's next test(), a lone send is written at once, and a path that dies
// under held sends loses nothing.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tcp/byte_stream.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

// Counts the writes that carried bytes; after Cut() every call fails as a reset connection would.
struct StreamState {
  std::atomic<int> writes{0};
  bool cut = false;
};

class CountingStream final : public ByteStream {
 public:
  CountingStream(int fd, std::shared_ptr<StreamState> st) : fd_(fd), st_(std::move(st)) {}
  ~CountingStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override {
    if (st_->cut) {
      errno = EPIPE;
      return -1;
    }
    const ssize_t r = tcp::SendSome(fd_, iov, n);
    if (r > 0) ++st_->writes;
    return r;
  }
  ssize_t Recv(void* buf, size_t len) override {
    if (st_->cut) {
      errno = ECONNRESET;
      return -1;
    }
    return tcp::RecvSome(fd_, buf, len);
  }
  std::string Describe() const override { return "socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }

 private:
  int fd_;
  std::shared_ptr<StreamState> st_;
};

struct Pair {
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  std::vector<std::shared_ptr<StreamState>> out;  // the sender's end of each path
  std::vector<std::shared_ptr<StreamState>> in;   // the receiver's end
  int writes() const {
    int n = 0;
    for (const auto& s : out) n += s->writes.load();
    return n;
  }
};

CommOptions CoalescingOptions(uint64_t coalesce_ns) {
  CommOptions o = testing::EagerOptions();
  o.coalesce_ns = coalesce_ns;
  return o;
}

Pair MakePair(int npaths, const CommOptions& opts) {
  Pair p;
  std::vector<std::unique_ptr<Path>> s, r;
  for (int i = 0; i < npaths; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    EXPECT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    auto out = std::make_shared<StreamState>();
    auto in = std::make_shared<StreamState>();
    p.out.push_back(out);
    p.in.push_back(in);
    s.push_back(std::make_unique<StreamPath>(i, std::make_unique<CountingStream>(fds[0], out)));
    r.push_back(std::make_unique<StreamPath>(i, std::make_unique<CountingStream>(fds[1], in)));
  }
  p.send = std::make_unique<SendComm>(std::move(s), opts, "receiver");
  p.recv = std::make_unique<RecvComm>(std::move(r), opts, "sender");
  return p;
}

std::vector<char> Message(int i, size_t size) {
  std::vector<char> b(size);
  for (size_t k = 0; k < size; ++k) b[k] = static_cast<char>('a' + (i * 11 + k) % 26);
  return b;
}

SendRequest* Post(SendComm& s, const std::vector<char>& b) {
  SendRequest* r = nullptr;
  for (int tries = 0; r == nullptr && tries < 1000; ++tries) EXPECT_TRUE(s.Isend(b.data(), b.size(), 5, nullptr, &r).ok());
  return r;
}

bool TestSend(SendComm& s, SendRequest* r) {
  int done = 0;
  EXPECT_TRUE(s.Test(r, &done, nullptr).ok()) << s.error().message();
  return done != 0;
}

// Receives `want` messages in order (receives posted one at a time) and checks every byte.
void ReceiveAll(Pair& p, const std::vector<std::vector<char>>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<char> rb(8192, 0);
    void* d = rb.data();
    uint64_t cap = rb.size(), size = 0;
    int tag = 5, done = 0;
    RecvRequest* rr = nullptr;
    ASSERT_TRUE(p.recv->Irecv(1, &d, &cap, &tag, &rr).ok());
    ASSERT_NE(rr, nullptr);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      ASSERT_TRUE(p.send->Progress().ok()) << p.send->error().message();
      ASSERT_TRUE(p.recv->Test(rr, &done, &size).ok()) << p.recv->error().message();
    }
    ASSERT_TRUE(done) << "message " << i << " never arrived";
    ASSERT_EQ(size, want[i].size()) << "message " << i;
    ASSERT_TRUE(std::equal(want[i].begin(), want[i].end(), rb.begin())) << "message " << i << " corrupt";
  }
}

constexpr uint64_t kLongHold = 60'000'000'000;  // the time limit never ends a hold in these tests

TEST(SendCoalescing, ABurstOfSmallSendsPostedWhileAnOlderOneIsUntestedLeavesInOneWrite) {
  Pair p = MakePair(2, CoalescingOptions(kLongHold));
  std::vector<std::vector<char>> sent;
  sent.push_back(Message(0, 1000));
  const int before = p.writes();
  SendRequest* first = Post(*p.send, sent[0]);
  ASSERT_NE(first, nullptr);
  const int after_first = p.writes();
  EXPECT_GT(after_first, before) << "the first send (nothing older to test) was not written at once";
  std::vector<SendRequest*> burst;
  for (int i = 1; i <= 8; ++i) {
    sent.push_back(Message(i, 200 + 100 * i));
    burst.push_back(Post(*p.send, sent.back()));
    ASSERT_NE(burst.back(), nullptr);
  }
  EXPECT_EQ(p.writes(), after_first) << "a send of the burst was written on its own";
  // Testing the older send, the last one not held, writes the whole burst.
  EXPECT_TRUE(TestSend(*p.send, first));
  EXPECT_EQ(p.writes(), after_first + 1) << "the burst of 8 did not leave in one write";
  for (SendRequest* r : burst) EXPECT_TRUE(TestSend(*p.send, r)) << "a written eager send did not complete";
  ReceiveAll(p, sent);
}

TEST(SendCoalescing, AHeldSendIsWrittenByATestOfItself) {
  Pair p = MakePair(1, CoalescingOptions(kLongHold));
  std::vector<std::vector<char>> sent{Message(0, 64), Message(1, 64)};
  SendRequest* a = Post(*p.send, sent[0]);
  const int after_a = p.writes();
  SendRequest* b = Post(*p.send, sent[1]);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(p.writes(), after_a) << "the second send was not held";
  EXPECT_TRUE(TestSend(*p.send, b)) << "a held eager send was not written and completed by its own test";
  EXPECT_EQ(p.writes(), after_a + 1);
  EXPECT_TRUE(TestSend(*p.send, a));
  ReceiveAll(p, sent);
}

TEST(SendCoalescing, ASendWithNothingOlderOutstandingIsWrittenAtOnce) {
  Pair p = MakePair(1, CoalescingOptions(kLongHold));
  std::vector<std::vector<char>> sent;
  for (int i = 0; i < 4; ++i) {
    sent.push_back(Message(i, 300));
    const int before = p.writes();
    SendRequest* r = Post(*p.send, sent.back());
    ASSERT_NE(r, nullptr);
    // Written inside isend, although the last write was a moment ago: a caller that tests its
    // reply before this send (a ping-pong) must not wait on a hold.
    EXPECT_GT(p.writes(), before) << "send " << i << " was held with nothing older to test";
    EXPECT_TRUE(TestSend(*p.send, r));
  }
  ReceiveAll(p, sent);
}

TEST(SendCoalescing, AHoldEndsAfterTheCoalescingTime) {
  Pair p = MakePair(1, CoalescingOptions(200'000));  // 200 us
  std::vector<std::vector<char>> sent{Message(0, 100), Message(1, 100)};
  SendRequest* a = Post(*p.send, sent[0]);
  const int after_a = p.writes();
  SendRequest* b = Post(*p.send, sent[1]);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(p.writes(), after_a) << "the second send was not held";
  usleep(1000);
  // Testing a send that is complete already: past the time limit the held one is written too.
  EXPECT_TRUE(TestSend(*p.send, a));
  EXPECT_EQ(p.writes(), after_a + 1) << "a held send outlived the coalescing time";
  EXPECT_TRUE(TestSend(*p.send, b));
  ReceiveAll(p, sent);
}

TEST(SendCoalescing, APathThatDiesUnderHeldSendsLosesNothing) {
  Pair p = MakePair(2, CoalescingOptions(kLongHold));
  std::vector<std::vector<char>> sent;
  std::vector<SendRequest*> reqs;
  for (int i = 0; i < 10; ++i) {
    sent.push_back(Message(i, 500 + 37 * i));
    reqs.push_back(Post(*p.send, sent.back()));
    ASSERT_NE(reqs.back(), nullptr);
  }
  // Every small send sticks to one path; cut it before the held ones are written.
  const int sticky = p.out[0]->writes > 0 ? 0 : 1;
  p.out[static_cast<size_t>(sticky)]->cut = true;
  p.in[static_cast<size_t>(sticky)]->cut = true;
  // Receiving drives the sender too (its progress writes the held sends, finds the cut and fails
  // over); then every send completes.
  ReceiveAll(p, sent);
  for (size_t i = 0; i < reqs.size(); ++i) {
    bool done = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(done = TestSend(*p.send, reqs[i])) && std::chrono::steady_clock::now() < deadline)
      ASSERT_TRUE(p.recv->Progress().ok());
    EXPECT_TRUE(done) << "send " << i << " never completed";
  }
  EXPECT_GT(p.send->resent_bytes(), 0u) << "nothing was re-sent: the cut path carried nothing";
}

}  // namespace
}  // namespace ff
