// A send and a receive communicator joined by socketpair paths that a test can cut, with the
// sender's writes counted per path (tests of eager sends, unsolicited frames and send coalescing).
#pragma once

#include <sys/socket.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/failover/socketpair_stream.h"

namespace ff::testing {

struct CommPair {
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  std::vector<std::shared_ptr<bool>> cuts;       // *cuts[i] = true cuts path i at both ends
  std::vector<std::shared_ptr<int>> writes_out;  // writes by the sender's end of each path
  std::vector<std::shared_ptr<int>> writes_back;  // writes by the receiver's end (its control frames)
  int receiver_writes() const {
    int n = 0;
    for (const auto& w : writes_back) n += *w;
    return n;
  }
  int writes() const {
    int n = 0;
    for (const auto& w : writes_out) n += *w;
    return n;
  }
};

// `sndbuf0` > 0 shrinks path 0's send buffer, so a message larger than it stays partly queued there.
inline CommPair MakeCommPair(int npaths, const CommOptions& opts, int sndbuf0 = 0) {
  CommPair p;
  std::vector<std::unique_ptr<Path>> s, r;
  for (int i = 0; i < npaths; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    EXPECT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    if (i == 0 && sndbuf0 > 0) {
      EXPECT_EQ(setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf0, sizeof(sndbuf0)), 0);
    }
    auto cut = std::make_shared<bool>(false);
    auto writes = std::make_shared<int>(0);
    auto back = std::make_shared<int>(0);
    p.cuts.push_back(cut);
    p.writes_out.push_back(writes);
    p.writes_back.push_back(back);
    s.push_back(std::make_unique<StreamPath>(i, std::make_unique<CuttableStream>(fds[0], cut, writes)));
    r.push_back(std::make_unique<StreamPath>(i, std::make_unique<CuttableStream>(fds[1], cut, back)));
  }
  p.send = std::make_unique<SendComm>(std::move(s), opts, "receiver");
  p.recv = std::make_unique<RecvComm>(std::move(r), opts, "sender");
  return p;
}

}  // namespace ff::testing
