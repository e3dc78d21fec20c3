// A send and a receive communicator joined by socketpair paths whose descriptors are visible, so
// the path watchdog reads a path's pending error (SO_ERROR) and its unread bytes (SIOCOUTQ) as it does
// a TCP socket's (close-drain and unsolicited-message tests).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

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

namespace ff::testing {

struct FdPair {
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  std::vector<int> send_fds;
  std::vector<int> recv_fds;
};

inline FdPair MakeFdPair(bool watchdog, CommOptions o = EagerOptions()) {
  if (watchdog) o.path_stall_ms = 2000;  // the watchdog samples each path's pending error every 1 ms
  FdPair p;
  std::vector<std::unique_ptr<Path>> s, r;
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    EXPECT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    p.send_fds.push_back(fds[0]);
    p.recv_fds.push_back(fds[1]);
    s.push_back(std::make_unique<StreamPath>(i, std::make_unique<FdStream>(fds[0], true)));
    r.push_back(std::make_unique<StreamPath>(i, std::make_unique<FdStream>(fds[1], true)));
  }
  p.send = std::make_unique<SendComm>(std::move(s), o, "receiver");
  p.recv = std::make_unique<RecvComm>(std::move(r), o, "sender");
  return p;
}

}  // namespace ff::testing
