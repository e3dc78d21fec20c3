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
  // SO_PEEK_OFF: TCP supports it since Linux 6.10.
  bool EnablePeekOffset() override {
    int zero = 0;
    return setsockopt(socket_.fd(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) == 0;
  }
  std::string Describe() const override { return description_; }
  int fd() const override { return socket_.fd(); }

 private:
  Socket socket_;
  std::string description_;
};

}  // namespace ff::tcp
