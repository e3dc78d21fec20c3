// A ByteStream over one connected descriptor (a socketpair end in the tests): it owns and closes the
// descriptor. Hidden by default (fd() is -1, so nothing reads TCP_INFO, SO_ERROR or SIOCOUTQ from it);
// visible, fd() shows it and those readers see it as they see a TCP socket's.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <string>

#include "tcp/byte_stream.h"
#include "tcp/socket.h"

namespace ff::testing {

class FdStream final : public ByteStream {
 public:
  explicit FdStream(int fd, bool visible = false) : fd_(fd), visible_(visible) {}
  ~FdStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override { return tcp::SendSome(fd_, iov, n); }
  ssize_t Recv(void* buf, size_t len) override { return tcp::RecvSome(fd_, buf, len); }
  std::string Describe() const override { return "socketpair fd " + std::to_string(fd_); }
  int fd() const override { return visible_ ? fd_ : -1; }

 private:
  int fd_;
  bool visible_;
};

}  // namespace ff::testing
