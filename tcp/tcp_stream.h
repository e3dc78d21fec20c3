// ByteStream over one connected, non-blocking TCP socket.
#pragma once

#include <string>
#include <utility>

#include "tcp/byte_stream.h"
#include "tcp/socket.h"

namespace ff::tcp {

class TcpStream final : public ByteStream {
 public:
  TcpStream(Socket s, std::string description) : socket_(std::move(s)), description_(std::move(description)) {}
  ssize_t Send(const iovec* iov, int iovcnt) override { return SendSome(socket_.fd(), iov, iovcnt); }
  ssize_t Recv(void* buf, size_t len) override { return RecvSome(socket_.fd(), buf, len); }
  ssize_t RecvV(const iovec* iov, int iovcnt) override { return RecvSomeV(socket_.fd(), iov, iovcnt); }
  bool CanPeek() const override { return true; }
  ssize_t Peek(void* buf, size_t len) override { return PeekSome(socket_.fd(), buf, len); }
  ssize_t Skip(size_t len) override { return SkipSome(socket_.fd(), len); }
  std::string Describe() const override { return description_; }
  int fd() const override { return socket_.fd(); }

 private:
  Socket socket_;
  std::string description_;
};

}  // namespace ff::tcp
