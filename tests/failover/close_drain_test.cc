// Closing a send connection whose receiver already closed: a receiver that had every message and
// closed while a frame of the sender's sat unread on a path resets that connection (a close with
// unread data resets instead of ending in order). The sender, draining for its own close, must read
// the receiver's last acknowledgement wherever it waits and close quietly: no failover, no re-sent
// byte, no failed communicator, no warning.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "base/logging.h"
#include "core/send_comm.h"
#include "tests/failover/fd_pair.h"
#include "tests/failover/socketpair_pair.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

TEST(CloseDrain, APeerThatResetsAfterItHadEverythingIsAnOrderlyClose) {
  constexpr int kMsgs = 24;
  constexpr size_t kSize = 1000;
  for (int round = 0; round < 6; ++round) {
    const int unread_on = round % 3;  // path 0, path 1, both
    const bool watchdog = round >= 3;
    SCOPED_TRACE((unread_on == 2 ? std::string("unread frame on both paths")
                                 : "unread frame on path " + std::to_string(unread_on)) +
                 (watchdog ? ", path watchdog on" : ", path watchdog off"));
    testing::FdPair p = testing::MakeFdPair(watchdog);
    std::vector<std::vector<char>> rbuf(kMsgs, std::vector<char>(4096, 0));
    std::vector<RecvRequest*> rreq(kMsgs, nullptr);
    for (int i = 0; i < kMsgs; ++i) ASSERT_NE(rreq[i] = testing::PostRecv(*p.recv, rbuf[i], 3), nullptr);
    ASSERT_TRUE(p.recv->Progress().ok());
    std::vector<char> sbuf(kSize);
    for (int i = 0; i < kMsgs; ++i) {
      std::memset(sbuf.data(), 'a' + i % 26, kSize);
      SendRequest* r = nullptr;
      for (int tries = 0; r == nullptr && tries < 1000; ++tries)
        ASSERT_TRUE(p.send->Isend(sbuf.data(), kSize, 3, nullptr, &r).ok());
      ASSERT_NE(r, nullptr);
      int done = 0;
      ASSERT_TRUE(p.send->Test(r, &done, nullptr).ok());
      ASSERT_EQ(done, 1) << "eager message " << i << " did not complete at once";
    }
    // Only the receiver runs until it has every message.
    int got = 0;
    std::vector<int> rdone(kMsgs, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got < kMsgs && std::chrono::steady_clock::now() < deadline)
      for (int i = 0; i < kMsgs; ++i) {
        if (rdone[i]) continue;
        uint64_t sizes[kMaxRecvs];
        ASSERT_TRUE(p.recv->Test(rreq[i], &rdone[i], sizes).ok());
        got += rdone[i];
      }
    ASSERT_EQ(got, kMsgs);
    for (int i = 0; i < kMsgs; ++i) ASSERT_EQ(rbuf[i][kSize - 1], static_cast<char>('a' + i % 26)) << i;
    ASSERT_GT(p.send->unacked_messages(), 0u) << "acknowledged already: nothing left to drain";
    // A frame of the sender's that the receiver never reads (an acknowledgement request in flight).
    for (int path = 0; path < 2; ++path)
      if (unread_on == 2 || unread_on == path) {
        const char stray = 0;
        ASSERT_EQ(::send(p.send_fds[static_cast<size_t>(path)], &stray, 1, MSG_NOSIGNAL), 1);
      }
    p.recv->AcknowledgeBeforeClose();
    p.recv.reset();  // closes its ends: each with an unread byte resets
    usleep(2000);    // the watchdog's next sample is due: it sees the reset before the reads do
    EXPECT_EQ(p.send->DrainForClose(2'000'000'000ull), 0u);
    EXPECT_TRUE(p.send->error().ok()) << p.send->error().message();
    EXPECT_EQ(p.send->resent_bytes(), 0u) << "re-sent to a peer that had everything";
    EXPECT_EQ(p.send->unacked_messages(), 0u);
  }
}

std::mutex g_warn_mu;
std::vector<std::string> g_warns;

void CaptureWarns(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_warn_mu);
  g_warns.emplace_back(buf);
}

// The other side of the same close: a sender's eager messages complete before they are delivered,
// so it closes - resetting each path where a frame of its receiver's sat unread - while the
// receiver still reads the last of them. The receiver must deliver every one and let the paths go
// quietly: no failover, no failed communicator, no warning (about half the teardowns of a
// 300-message stream logged "path 1 is down: Connection reset by peer" and "communicator failed").
TEST(CloseDrain, ASenderThatClosesWhileItsReceiverReadsTheLastMessagesIsAnOrderlyClose) {
  SetNcclLogger(CaptureWarns);
  constexpr int kMsgs = 24;
  constexpr size_t kSize = 1000;
  for (int round = 0; round < 4; ++round) {
    const bool watchdog = round % 2 == 1;      // the reset seen by SO_ERROR first, or by a read
    const int early = round < 2 ? 0 : kMsgs / 2;  // receives completed before the sender closes
    SCOPED_TRACE(std::string(watchdog ? "path watchdog on" : "path watchdog off") + ", " + std::to_string(early) +
                 " received before the close");
    {
      std::lock_guard<std::mutex> lock(g_warn_mu);
      g_warns.clear();
    }
    testing::FdPair p = testing::MakeFdPair(watchdog);
    std::vector<std::vector<char>> rbuf(kMsgs, std::vector<char>(4096, 0));
    std::vector<RecvRequest*> rreq(kMsgs, nullptr);
    for (int i = 0; i < kMsgs; ++i) ASSERT_NE(rreq[i] = testing::PostRecv(*p.recv, rbuf[i], 3), nullptr);
    ASSERT_TRUE(p.recv->Progress().ok());
    std::vector<char> sbuf(kSize);
    for (int i = 0; i < kMsgs; ++i) {
      std::memset(sbuf.data(), 'A' + i % 26, kSize);
      SendRequest* r = nullptr;
      for (int tries = 0; r == nullptr && tries < 1000; ++tries)
        ASSERT_TRUE(p.send->Isend(sbuf.data(), kSize, 3, nullptr, &r).ok());
      ASSERT_NE(r, nullptr);
      int done = 0;
      ASSERT_TRUE(p.send->Test(r, &done, nullptr).ok());
      ASSERT_EQ(done, 1) << "eager message " << i << " did not complete at once";
    }
    std::vector<int> rdone(kMsgs, 0);
    int got = 0;
    auto drive = [&](int want) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (got < want && std::chrono::steady_clock::now() < deadline)
        for (int i = 0; i < kMsgs && got < want; ++i) {
          if (rdone[i]) continue;
          uint64_t sizes[kMaxRecvs];
          ASSERT_TRUE(p.recv->Test(rreq[i], &rdone[i], sizes).ok()) << p.recv->error().message();
          got += rdone[i];
        }
    };
    drive(early);
    ASSERT_EQ(got, early);
    // A frame of the receiver's that the sender never reads, on every path: its close resets them all.
    for (int fd : p.recv_fds) {
      const char stray = 0;
      ASSERT_EQ(::send(fd, &stray, 1, MSG_NOSIGNAL), 1);
    }
    p.send.reset();
    usleep(2000);  // the watchdog's next sample is due: it sees the reset before the reads do
    drive(kMsgs);
    ASSERT_EQ(got, kMsgs);
    for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(rbuf[i][kSize - 1], static_cast<char>('A' + i % 26)) << i;
    for (int k = 0; k < 10; ++k) {
      usleep(1000);
      (void)p.recv->Progress();
    }
    EXPECT_TRUE(p.recv->error().ok()) << p.recv->error().message();
    std::lock_guard<std::mutex> lock(g_warn_mu);
    std::string all;
    for (const auto& w : g_warns) all += w + "\n";
    EXPECT_TRUE(g_warns.empty()) << "warnings on an orderly close:\n" << all;
  }
  SetNcclLogger(nullptr);
}

// NCCL closes with a send pending only when it aborts - typically because the peer never posted the
// receive. A send above the eager threshold completes only on its acknowledgement, so nothing was
// promised for it: the close must not wait for an acknowledgement that cannot come (it waited up to
// 5 s per connection, so tearing down 64 peers took minutes). The eager messages before it did
// complete, and the receiver still gets every one of them.
TEST(CloseDrain, ASendItsCallerNeverSawCompleteDoesNotHoldTheClose) {
  testing::FdPair p = testing::MakeFdPair(false);  // eager threshold 4 KiB
  constexpr int kEager = 3;
  std::vector<char> small(1000);
  for (int i = 0; i < kEager; ++i) {
    std::memset(small.data(), 'k' + i, small.size());
    SendRequest* r = nullptr;
    for (int tries = 0; r == nullptr && tries < 1000; ++tries)
      ASSERT_TRUE(p.send->Isend(small.data(), small.size(), 3, nullptr, &r).ok());
    ASSERT_NE(r, nullptr);
    // The last one stays untested: with no send outstanding isend says "retry later" to the big one
    // below until the receiver posts its buffer (it could go only at a test() of its own).
    if (i == kEager - 1) break;
    int done = 0;
    ASSERT_TRUE(p.send->Test(r, &done, nullptr).ok());
    ASSERT_EQ(done, 1) << "eager message " << i << " did not complete at once";
  }
  std::vector<char> big(1 << 20, 'B');  // above the threshold: completes on its acknowledgement only
  SendRequest* pending = nullptr;
  for (int tries = 0; pending == nullptr && tries < 1000; ++tries)
    ASSERT_TRUE(p.send->Isend(big.data(), big.size(), 4, nullptr, &pending).ok());
  ASSERT_NE(pending, nullptr);
  int done = 0;
  ASSERT_TRUE(p.send->Test(pending, &done, nullptr).ok());
  ASSERT_EQ(done, 0) << "a send above the eager threshold completed before any receive was posted";
  const auto t0 = std::chrono::steady_clock::now();
  p.send->DrainForClose(5'000'000'000ull);  // what closeSend allows at most
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 1.0) << "the close waited " << waited << " s for a send its caller had abandoned";
  EXPECT_TRUE(p.send->error().ok()) << p.send->error().message();
  // The messages that completed were handed over before the close: the receiver gets all of them.
  std::vector<std::vector<char>> rbuf(kEager, std::vector<char>(4096, 0));
  std::vector<RecvRequest*> rreq(kEager);
  for (int i = 0; i < kEager; ++i) ASSERT_NE(rreq[i] = testing::PostRecv(*p.recv, rbuf[i], 3), nullptr);
  int got = 0;
  std::vector<int> rdone(kEager, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got < kEager && std::chrono::steady_clock::now() < deadline)
    for (int i = 0; i < kEager; ++i) {
      if (rdone[i]) continue;
      uint64_t sizes[kMaxRecvs];
      ASSERT_TRUE(p.recv->Test(rreq[i], &rdone[i], sizes).ok()) << p.recv->error().message();
      got += rdone[i];
    }
  ASSERT_EQ(got, kEager);
  for (int i = 0; i < kEager; ++i) EXPECT_EQ(rbuf[i][999], static_cast<char>('k' + i)) << "message " << i;
}

// A failover's WARN went out only when it ended - when the receiver acknowledged past the cut. One
// that never ended (a receiver that stopped, then lost its other path) left no line: an operator
// saw "communicator failed", or a drained path "back in service", with no failover before it (a
// SIGSTOPped receiver showed just that). Now the line goes out, saying it did not resume, before
// the communicator's failure.
TEST(CloseDrain, AFailoverThatNeverResumesIsReportedBeforeTheCommunicatorFails) {
  SetNcclLogger(CaptureWarns);
  {
    std::lock_guard<std::mutex> lock(g_warn_mu);
    g_warns.clear();
  }
  testing::CommPair p = testing::MakeCommPair(2, testing::EagerOptions());
  constexpr int kMsgs = 8;
  std::vector<std::vector<char>> rbuf(kMsgs, std::vector<char>(4096, 0));
  for (int i = 0; i < kMsgs; ++i) ASSERT_NE(testing::PostRecv(*p.recv, rbuf[i], 5), nullptr);
  ASSERT_TRUE(p.recv->Progress().ok());
  std::vector<char> sbuf(1000, 'q');
  for (int i = 0; i < kMsgs; ++i) {
    SendRequest* r = nullptr;
    for (int tries = 0; r == nullptr && tries < 1000; ++tries)
      ASSERT_TRUE(p.send->Isend(sbuf.data(), sbuf.size(), 5, nullptr, &r).ok());
    ASSERT_NE(r, nullptr);
  }
  // Path 0 fails; the receiver, stopped, never acknowledges the re-sent messages.
  *p.cuts[0] = true;
  for (int i = 0; i < 50 && p.send->failover_events() == 0 && p.send->resent_bytes() == 0; ++i)
    ASSERT_TRUE(p.send->Progress().ok()) << p.send->error().message();
  ASSERT_GT(p.send->resent_bytes(), 0u) << "the cut went unnoticed: the scenario did not happen";
  EXPECT_EQ(p.send->failover_events(), 0u) << "the failover ended without the receiver";
  // Then the last path goes too.
  *p.cuts[1] = true;
  for (int i = 0; i < 50 && p.send->error().ok(); ++i) (void)p.send->Progress();
  ASSERT_FALSE(p.send->error().ok()) << "the communicator outlived its last path";
  SetNcclLogger(nullptr);
  std::lock_guard<std::mutex> lock(g_warn_mu);
  std::string all;
  int failover_line = -1, failed_line = -1;
  for (size_t i = 0; i < g_warns.size(); ++i) {
    all += g_warns[i] + "\n";
    if (failover_line < 0 && g_warns[i].find("failover to ") != std::string::npos) failover_line = static_cast<int>(i);
    if (failed_line < 0 && g_warns[i].find("communicator with") != std::string::npos) failed_line = static_cast<int>(i);
  }
  ASSERT_GE(failover_line, 0) << "no failover line:\n" << all;
  ASSERT_GE(failed_line, 0) << all;
  EXPECT_LT(failover_line, failed_line) << all;
  EXPECT_NE(g_warns[failover_line].find("not resumed: the communicator failed"), std::string::npos) << all;
  EXPECT_NE(g_warns[failover_line].find("path 0"), std::string::npos) << all;
}

}  // namespace
}  // namespace ff
