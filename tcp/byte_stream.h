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
  virtual std::string Describe() const = 0;  // "10.0.0.1:50000->10.0.0.2:41234" for logs
  virtual int fd() const = 0;                // for poll-based waiting and probes; -1 if none
};

}  // namespace ff
