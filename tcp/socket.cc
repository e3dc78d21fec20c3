// Non-blocking TCP socket operations; every descriptor is held by a Socket.
#include "tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "base/logging.h"
#include "tcp/interfaces.h"

namespace ff::tcp {

void Socket::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

socklen_t AddrLen(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

void SetPort(sockaddr_storage* a, uint16_t port) {
  if (a->ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
}

// socket() failed: with EMFILE/ENFILE the message says which limit and what uses it.
Status SocketCreateError(int err) { return SystemError(ErrnoMessage("socket", err) + DescriptorLimitHint(err)); }

}  // namespace

std::string DescriptorLimitHint(int err) {
  if (err == EMFILE) {
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    return ": this process has used its " + std::to_string(static_cast<unsigned long long>(lim.rlim_cur)) +
           " file descriptors (RLIMIT_NOFILE, `ulimit -n`); each communicator holds one socket per path "
           "(FLEXIFORCE_PATHS) - raise the limit";
  }
  if (err == ENFILE) return ": the system's file table is full (fs.file-max)";
  return "";
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return SystemError(ErrnoMessage("fcntl", errno));
  return Status::Ok();
}

Status Listen(const sockaddr_storage& local, Socket* out, uint16_t* port, uint16_t want_port) {
  Socket s(::socket(local.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return SocketCreateError(errno);
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage a = local;
  SetPort(&a, want_port);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), AddrLen(a)) != 0)
    return SystemError(ErrnoMessage("bind to " + AddressToString(a) + " port " + std::to_string(want_port), errno));
  if (::listen(s.fd(), 1024) != 0) return SystemError(ErrnoMessage("listen", errno));
  *port = LocalPort(s.fd());
  *out = std::move(s);
  return Status::Ok();
}

Status StartConnect(const sockaddr_storage& remote, const sockaddr_storage* local, uint16_t sport_lo,
                    uint16_t sport_hi, Socket* out) {
  const int tries = sport_lo != 0 && sport_hi >= sport_lo ? sport_hi - sport_lo + 1 : 1;
  // Start at a pseudo-random point of the range so parallel connects rarely collide.
  const uint32_t start = static_cast<uint32_t>(getpid() * 2654435761u + reinterpret_cast<uintptr_t>(out));
  int last_err = 0;
  for (int i = 0; i < tries && i < 4096; ++i) {
    Socket s(::socket(remote.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) return SocketCreateError(errno);
    if (local != nullptr || sport_lo != 0) {
      sockaddr_storage b{};
      if (local != nullptr) {
        b = *local;
      } else {
        b.ss_family = remote.ss_family;
      }
      uint16_t port = sport_lo != 0 ? static_cast<uint16_t>(sport_lo + (start + i) % tries) : 0;
      SetPort(&b, port);
      int one = 1;
      if (sport_lo != 0) {
        setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      } else {
        // Only the address is pinned: let connect() pick the port against the full 4-tuple. A bind
        // to port 0 must find a port no other socket of this address holds, TIME_WAIT included,
        // and scans the ephemeral range for it: after some thousands of connections each connect
        // spent milliseconds in the kernel's search (tests/plugin/soak_test.cc). Best effort:
        // without the option (Linux < 4.2) bind picks the port as before.
        setsockopt(s.fd(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
      }
      if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&b), AddrLen(b)) != 0) {
        last_err = errno;
        if (last_err == EADDRINUSE && sport_lo != 0) continue;
        return SystemError(ErrnoMessage("bind to " + AddressToString(b), last_err));
      }
    }
    sockaddr_storage r = remote;
    if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&r), AddrLen(r)) != 0 && errno != EINPROGRESS) {
      last_err = errno;
      if (last_err == EADDRNOTAVAIL && sport_lo != 0) continue;
      return SystemError(ErrnoMessage("connect to " + PeerToString(remote), last_err));
    }
    *out = std::move(s);
    return Status::Ok();
  }
  return SystemError(ErrnoMessage("no free source port in " + std::to_string(sport_lo) + "-" +
                                      std::to_string(sport_hi),
                                  last_err));
}

ConnectProgress PollConnect(int fd, int* err) {
  pollfd p{fd, POLLOUT, 0};
  int r = ::poll(&p, 1, 0);
  if (r == 0) return ConnectProgress::kPending;
  if (r < 0) {
    *err = errno;
    return errno == EINTR ? ConnectProgress::kPending : ConnectProgress::kFailed;
  }
  int soerr = 0;
  socklen_t len = sizeof(soerr);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) {
    *err = errno;
    return ConnectProgress::kFailed;
  }
  if (soerr != 0) {
    *err = soerr;
    return ConnectProgress::kFailed;
  }
  return ConnectProgress::kConnected;
}

bool SameAddressIgnoringPort(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  if (a.ss_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

bool PeerHasClosed(int fd) {
  if (fd < 0) return true;
  char c;
  const ssize_t r = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0) return false;
  if (r == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

bool IsResourceAcceptError(int err) { return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM; }

bool IsTransientAcceptError(int err) {
  switch (err) {
    case ECONNABORTED:
    case ENETDOWN:
    case EPROTO:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return true;
    default:
      return IsResourceAcceptError(err);
  }
}

Status AcceptOne(int listen_fd, Socket* out, sockaddr_storage* peer, int* transient_errno) {
  socklen_t len = sizeof(*peer);
  if (transient_errno != nullptr) *transient_errno = 0;
  int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    out->reset();
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return Status::Ok();
    if (IsTransientAcceptError(err)) {
      if (transient_errno != nullptr) *transient_errno = err;
      return Status::Ok();
    }
    return SystemError(ErrnoMessage("accept", err));
  }
  out->reset(fd);
  return Status::Ok();
}

namespace {

// First line of a /proc file, "?" when it cannot be read.
std::string ProcLine(const char* path) {
  std::string line = "?";
  if (FILE* f = std::fopen(path, "re")) {
    char buf[256];
    if (std::fgets(buf, sizeof(buf), f) != nullptr) {
      line = buf;
      while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    }
    std::fclose(f);
  }
  return line;
}

void SetCongestion(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return;
  const int err = errno;
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  // ENOENT: not built or loadable; EPERM: not in the allowed list for this unprivileged process.
  FF_WARN("FLEXIFORCE_TCP_CONGESTION='%s' was refused by the kernel (%s); paths keep the default %s. "
          "Accepted here: %s (loaded), %s (allowed without CAP_NET_ADMIN)",
          name.c_str(), std::strerror(err), ProcLine("/proc/sys/net/ipv4/tcp_congestion_control").c_str(),
          ProcLine("/proc/sys/net/ipv4/tcp_available_congestion_control").c_str(),
          ProcLine("/proc/sys/net/ipv4/tcp_allowed_congestion_control").c_str());
}

}  // namespace

std::string CongestionControlOf(int fd) {
  char name[32] = {};
  socklen_t len = sizeof(name) - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, strnlen(name, len));
}

Status ApplyPathOptions(int fd, int family, const PathSocketOptions& opts) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return SystemError(ErrnoMessage("TCP_NODELAY", errno));
  if (opts.tos >= 0) {
    int tos = opts.tos;
    int r = family == AF_INET6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos))
                               : setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
    if (r != 0) return SystemError(ErrnoMessage("IP_TOS", errno));
  }
  if (opts.max_pacing_bytes_per_s > 0) {
    // The 64-bit form (Linux 5.x+ reads an unsigned long when optlen allows) so rates above
    // 4 GB/s are not truncated; older kernels read the low 32 bits, same value below 4 GB/s.
    uint64_t rate = opts.max_pacing_bytes_per_s;
    if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate)) != 0)
      return SystemError(ErrnoMessage("SO_MAX_PACING_RATE", errno));
  }
  if (!opts.congestion.empty()) SetCongestion(fd, opts.congestion);
  if (opts.buffer_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opts.buffer_bytes, sizeof(opts.buffer_bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opts.buffer_bytes, sizeof(opts.buffer_bytes));
  }
  if (opts.user_timeout_ms > 0) {
    unsigned int t = static_cast<unsigned int>(opts.user_timeout_ms);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &t, sizeof(t));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    int idle = std::max(1, opts.user_timeout_ms / 3000), intvl = 1, cnt = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  }
  return Status::Ok();
}

ssize_t SendSome(int fd, const iovec* iov, int iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t RecvSome(int fd, void* buf, size_t len) {
  for (;;) {
    ssize_t n = ::recv(fd, buf, len, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0) return len == 0 ? 0 : -2;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t PeekSome(int fd, void* buf, size_t len) {
  for (;;) {
    ssize_t n = ::recv(fd, buf, len, MSG_DONTWAIT | MSG_PEEK);
    if (n > 0) return n;
    if (n == 0) return len == 0 ? 0 : -2;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t SkipSome(int fd, size_t len) {
  // A TCP socket drops the bytes without copying them under MSG_TRUNC. The buffer still holds what
  // is asked for: another socket type copies into it, and sanitizers mark it written.
  char scratch[4096];
  len = std::min(len, sizeof(scratch));
  for (;;) {
    ssize_t n = ::recv(fd, scratch, len, MSG_DONTWAIT | MSG_TRUNC);
    if (n > 0) return n;
    if (n == 0) return len == 0 ? 0 : -2;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t RecvSomeV(int fd, const iovec* iov, int iovcnt) {
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t n = ::recvmsg(fd, &m, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0) return want == 0 ? 0 : -2;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

uint16_t LocalPort(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
}

std::string PeerToString(const sockaddr_storage& addr) {
  uint16_t port = addr.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port)
                                            : ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  std::string ip = AddressToString(addr);
  return addr.ss_family == AF_INET6 ? "[" + ip + "]:" + std::to_string(port) : ip + ":" + std::to_string(port);
}

}  // namespace ff::tcp
