// Closing a send connection whose receiver already closed: a receiver that had every message and
// closed while a frame of the sender's sat unread on a path resets that connection (a close with
// unread data resets instead of ending in order). The sender, draining for its own close, must read
// the receiver's last acknowledgement wherever it waits and close quietly: no failover, no re-sent
// byte, no failed communicator, no warning.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tests/failover/fd_pair.h"

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

}  // namespace
}  // namespace ff
