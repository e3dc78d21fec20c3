// A ByteStream over one end of a socketpair, for communicator tests without TCP (no TCP_INFO:
// fd() is -1). It owns and closes the descriptor.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <string>

#include "tcp/byte_stream.h"
#include "tcp/socket.h"

namespace ff::testing {

class FdStream final : public ByteStream {
 public:
  explicit FdStream(int fd) : fd_(fd) {}
  ~FdStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override { return tcp::SendSome(fd_, iov, n); }
  ssize_t Recv(void* buf, size_t len) override { return tcp::RecvSome(fd_, buf, len); }
  std::string Describe() const override { return "socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }

 private:
  int fd_;
};

}  // namespace ff::testing
