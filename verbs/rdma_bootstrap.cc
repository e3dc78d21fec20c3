// Endpoint exchange over a file descriptor with poll(2) timeouts, then RdmaPath::Connect.
#include "verbs/rdma_bootstrap.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ff::verbs {
namespace {

Status WaitFd(int fd, short events, int timeout_ms, const char* what) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return Status::Ok();
    if (r == 0) return SystemError(std::string(what) + ": no progress within " + std::to_string(timeout_ms) + " ms");
    if (errno != EINTR) return SystemError(ErrnoMessage(std::string(what) + ": poll", errno));
  }
}

}  // namespace

Status SendEndpoint(int fd, const RdmaEndpoint& local, int timeout_ms) {
  const char* p = reinterpret_cast<const char*>(&local);
  size_t left = sizeof(local);
  while (left > 0) {
    Status s = WaitFd(fd, POLLOUT, timeout_ms, "sending the RDMA endpoint");
    if (!s.ok()) return s;
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return SystemError(ErrnoMessage("sending the RDMA endpoint", errno));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status RecvEndpoint(int fd, RdmaEndpoint* remote, int timeout_ms) {
  char* p = reinterpret_cast<char*>(remote);
  size_t left = sizeof(*remote);
  while (left > 0) {
    Status s = WaitFd(fd, POLLIN, timeout_ms, "receiving the peer's RDMA endpoint");
    if (!s.ok()) return s;
    const ssize_t r = ::read(fd, p, left);
    if (r == 0) return RemoteError("the peer closed the bootstrap stream before sending its RDMA endpoint");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return SystemError(ErrnoMessage("receiving the peer's RDMA endpoint", errno));
    }
    p += r;
    left -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status BootstrapPath(RdmaPath& path, int write_fd, int read_fd, int timeout_ms) {
  Status s = SendEndpoint(write_fd, path.local(), timeout_ms);
  if (!s.ok()) return s;
  RdmaEndpoint remote;
  s = RecvEndpoint(read_fd, &remote, timeout_ms);
  if (!s.ok()) return s;
  return path.Connect(remote);
}

}  // namespace ff::verbs
