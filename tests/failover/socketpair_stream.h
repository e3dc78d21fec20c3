// Helpers for communicator tests over socketpairs: FdStream (tests/tcp/fd_stream.h), a stream the test
// can cut, and the options of a communicator with eager sends.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/comm.h"
#include "core/recv_comm.h"
#include "tcp/byte_stream.h"
#include "tcp/socket.h"
#include "tests/tcp/fd_stream.h"

namespace ff::testing {

// A stream over one end of a socketpair that the test can cut: after *cut is set every call fails as
// a reset connection would, and what the kernel still held for it is never read. `writes` (may be
// null) counts the writes that carried bytes.
class CuttableStream final : public ByteStream {
 public:
  CuttableStream(int fd, std::shared_ptr<bool> cut, std::shared_ptr<int> writes = nullptr)
      : fd_(fd), cut_(std::move(cut)), writes_(std::move(writes)) {}
  ~CuttableStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override {
    if (*cut_) {
      errno = EPIPE;
      return -1;
    }
    const ssize_t r = tcp::SendSome(fd_, iov, n);
    if (r > 0 && writes_) ++*writes_;
    return r;
  }
  ssize_t Recv(void* buf, size_t len) override {
    if (*cut_) {
      errno = ECONNRESET;
      return -1;
    }
    return tcp::RecvSome(fd_, buf, len);
  }
  std::string Describe() const override { return "socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }  // no TCP_INFO on a socketpair

 private:
  int fd_;
  std::shared_ptr<bool> cut_;
  std::shared_ptr<int> writes_;
};

// 512 KiB chunks, striping from 256 KiB, eager sends up to 4 KiB with a 1 MiB retransmit ring.
inline CommOptions EagerOptions() {
  CommOptions o;
  o.chunk_bytes = 512 * 1024;
  o.stripe_min_bytes = 256 * 1024;
  o.max_queued_chunks = 64;
  o.eager_bytes = 4096;
  o.eager_ring_bytes = 1 << 20;
  return o;
}

// Posts one receive of the whole buffer with `tag`; the request, or nullptr (and a test failure).
inline RecvRequest* PostRecv(RecvComm& rc, std::vector<char>& buf, int tag) {
  void* d = buf.data();
  uint64_t cap = buf.size();
  RecvRequest* r = nullptr;
  EXPECT_TRUE(rc.Irecv(1, &d, &cap, &tag, &r).ok());
  EXPECT_NE(r, nullptr);
  return r;
}

}  // namespace ff::testing
