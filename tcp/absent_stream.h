// Stand-in stream for a path whose setup did not complete: the communicator starts without it and
// the path joins later through the failback (rejoin) mechanism.
#pragma once

#include <cerrno>
#include <string>
#include <utility>

#include "tcp/byte_stream.h"

namespace ff {

class AbsentStream final : public ByteStream {
 public:
  explicit AbsentStream(std::string description) : description_(std::move(description)) {}
  ssize_t Send(const iovec*, int) override {
    errno = ENOTCONN;
    return -1;
  }
  ssize_t Recv(void*, size_t) override {
    errno = ENOTCONN;
    return -1;
  }
  std::string Describe() const override { return description_; }
  int fd() const override { return -1; }

 private:
  std::string description_;
};

}  // namespace ff
