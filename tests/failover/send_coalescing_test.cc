// Send coalescing (SendComm::Isend): sends posted in a burst (eager ones, and ones above the eager
// threshold up to a bound in bytes) leave in one write, a held send is written by the caller's next
// test(), a lone send is written at once, and a path that dies under held sends loses nothing.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
#include "tests/failover/socketpair_pair.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

using Pair = testing::CommPair;

Pair MakePair(int npaths, const CommOptions& opts, int sndbuf0 = 0) {
  return testing::MakeCommPair(npaths, opts, sndbuf0);
}

CommOptions CoalescingOptions(uint64_t coalesce_ns) {
  CommOptions o = testing::EagerOptions();
  o.coalesce_ns = coalesce_ns;
  return o;
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

// Sends above the eager threshold complete on their acknowledgement, but their writes cost the
// same system call each: a burst of them leaves together too, written by the test of the older send.
TEST(SendCoalescing, ABurstOfSendsAboveTheEagerThresholdLeavesInOneWrite) {
  CommOptions o = CoalescingOptions(kLongHold);
  Pair p = MakePair(2, o);
  constexpr size_t kSize = 6000;
  static_assert(kSize > 4096, "above EagerOptions' eager threshold");
  std::vector<std::vector<char>> sent;
  sent.push_back(Message(0, kSize));
  SendRequest* first = Post(*p.send, sent[0]);
  ASSERT_NE(first, nullptr);
  ASSERT_FALSE(first->eager);
  const int after_first = p.writes();
  EXPECT_GT(after_first, 0) << "the first send (nothing older to test) was not written at once";
  std::vector<SendRequest*> burst;
  for (int i = 1; i <= 6; ++i) {
    sent.push_back(Message(i, kSize + 100 * i));
    burst.push_back(Post(*p.send, sent.back()));
    ASSERT_NE(burst.back(), nullptr);
  }
  EXPECT_EQ(p.writes(), after_first) << "a send of the burst was written on its own";
  EXPECT_FALSE(TestSend(*p.send, first)) << "a send above the eager threshold completed before its acknowledgement";
  EXPECT_EQ(p.writes(), after_first + 1) << "the burst of 6 did not leave in one write";
  ReceiveAll(p, sent);
  std::vector<SendRequest*> all{first};
  all.insert(all.end(), burst.begin(), burst.end());
  for (size_t i = 0; i < all.size(); ++i) {
    bool done = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(done = TestSend(*p.send, all[i])) && std::chrono::steady_clock::now() < deadline)
      ASSERT_TRUE(p.recv->Progress().ok());
    EXPECT_TRUE(done) << "send " << i << " never completed";
  }
}

// The bytes held for one write are bounded (SendComm::kMaxHeldRendezvousBytes): the send that would
// pass the bound is written at once, with the ones held before it.
TEST(SendCoalescing, HeldSendsAboveTheEagerThresholdAreBoundedInBytes) {
  Pair p = MakePair(1, CoalescingOptions(kLongHold));
  constexpr size_t kSize = SendComm::kMaxHeldRendezvousBytes * 2 / 5;
  static_assert(2 * kSize <= SendComm::kMaxHeldRendezvousBytes && 3 * kSize > SendComm::kMaxHeldRendezvousBytes,
                "two sends fit the bound, three do not");
  // Receives posted first, so the sender holds a descriptor for each message.
  std::vector<std::vector<char>> bufs(4, std::vector<char>(kSize, 0));
  std::vector<RecvRequest*> rr;
  for (auto& b : bufs) rr.push_back(testing::PostRecv(*p.recv, b, 5));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(p.recv->Progress().ok());
    ASSERT_TRUE(p.send->Progress().ok());
  }
  std::vector<std::vector<char>> sent{Message(0, 5000), Message(1, kSize), Message(2, kSize), Message(3, kSize)};
  std::vector<SendRequest*> reqs;
  reqs.push_back(Post(*p.send, sent[0]));
  const int after_first = p.writes();
  EXPECT_GT(after_first, 0) << "the first send (nothing older to test) was not written at once";
  reqs.push_back(Post(*p.send, sent[1]));
  reqs.push_back(Post(*p.send, sent[2]));
  for (SendRequest* r : reqs) ASSERT_NE(r, nullptr);
  EXPECT_EQ(p.writes(), after_first) << "the second and third sends (4/5 of the bound together) were not held";
  reqs.push_back(Post(*p.send, sent[3]));
  ASSERT_NE(reqs.back(), nullptr);
  EXPECT_GT(p.writes(), after_first) << "held bytes passed their bound: 6/5 of it waited for a test";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  size_t done_recv = 0;
  std::vector<int> rdone(rr.size(), 0);
  while (done_recv < rr.size() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(p.send->Progress().ok()) << p.send->error().message();
    for (size_t i = 0; i < rr.size(); ++i) {
      if (rdone[i]) continue;
      uint64_t size = 0;
      ASSERT_TRUE(p.recv->Test(rr[i], &rdone[i], &size).ok()) << p.recv->error().message();
      if (rdone[i]) {
        ++done_recv;
        ASSERT_EQ(size, sent[i].size()) << "message " << i;
        EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(), bufs[i].begin())) << "message " << i << " corrupt";
      }
    }
  }
  ASSERT_EQ(done_recv, rr.size()) << "a message never arrived";
  for (size_t i = 0; i < reqs.size(); ++i) {
    bool done = false;
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(done = TestSend(*p.send, reqs[i])) && std::chrono::steady_clock::now() < deadline)
      ASSERT_TRUE(p.recv->Progress().ok());
    EXPECT_TRUE(done) << "send " << i << " never completed";
  }
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
  const int sticky = *p.writes_out[0] > 0 ? 0 : 1;
  *p.cuts[static_cast<size_t>(sticky)] = true;
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
