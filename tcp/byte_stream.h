// The seam between the communicator and a stream transport: move bytes, report would-block and errors.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <string>

namespace ff {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Both return bytes moved, 0 for would-block, -1 for an error (errno set); Recv returns -2 on EOF.
  virtual ssize_t Send(const iovec* iov, int iovcnt) = 0;
  virtual ssize_t Recv(void* buf, size_t len) = 0;
  // Scatter read, same returns: fills the buffers in order and returns fewer bytes than they hold
  // only when the stream had no more. This default reads each buffer in turn (a system call each);
  // a socket does it in one (recvmsg).
  virtual ssize_t RecvV(const iovec* iov, int iovcnt) {
    ssize_t total = 0;
    for (int i = 0; i < iovcnt; ++i) {
      if (iov[i].iov_len == 0) continue;
      const ssize_t r = Recv(iov[i].iov_base, iov[i].iov_len);
      if (r <= 0) return total > 0 ? total : r;  // what came before an empty read, EOF or error counts
      total += r;
      if (static_cast<size_t>(r) < iov[i].iov_len) break;
    }
    return total;
  }
  // Peek: reads like Recv (same returns) but leaves the bytes in the stream; Skip then drops `len`
  // bytes a Peek already returned (bytes dropped, 0, -1 or -2 as Recv). Only where CanPeek().
  virtual bool CanPeek() const { return false; }
  virtual ssize_t Peek(void* buf, size_t len) {
    (void)buf;
    (void)len;
    return -1;
  }
  virtual ssize_t Skip(size_t len) {
    (void)len;
    return -1;
  }
  // Makes each Peek continue behind the bytes earlier peeks returned (until Skip drops them), so a
  // reader can peek at several messages before dropping them in one Skip; true when it does.
  virtual bool EnablePeekOffset() { return false; }
  virtual std::string Describe() const = 0;  // "10.0.0.1:50000->10.0.0.2:41234" for logs
  virtual int fd() const = 0;                // for poll-based waiting and probes; -1 if none
};

}  // namespace ff
