// TCP helpers for the collective driver; every wait polls with a short timeout so deadlines hold.
#include "tests/collective/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace ff::collective {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

sockaddr_in MakeAddr(const std::string& ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    throw DriverError("invalid IPv4 address '" + ip + "' (expected dotted form such as 10.0.0.1)");
  }
  return addr;
}

// Waits until fd is ready for `events` or 20 ms pass; returns true when ready.
bool WaitReady(int fd, short events) {
  pollfd p{fd, events, 0};
  int rc = ::poll(&p, 1, 20);
  return rc > 0;
}

}  // namespace

HostPort ParseHostPort(const std::string& text, const std::string& what) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw DriverError(what + ": '" + text + "' is not of the form HOST:PORT (e.g. 10.0.0.1:29500)");
  }
  HostPort hp;
  hp.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(port.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 1 || v > 65535) {
    throw DriverError(what + ": port '" + port + "' in '" + text + "' is not an integer in 1..65535");
  }
  hp.port = static_cast<uint16_t>(v);
  return hp;
}

std::string ResolveIpv4(const std::string& host, const std::string& what) {
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw DriverError(what + ": cannot resolve '" + host + "' to an IPv4 address (" + gai_strerror(rc) + ")");
  }
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  freeaddrinfo(res);
  return buf;
}

UniqueFd ListenTcp(const std::string& ip, uint16_t port, int backlog) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.Valid()) throw DriverError(Errno("socket"));
  int one = 1;
  ::setsockopt(fd.Get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = MakeAddr(ip, port);
  if (::bind(fd.Get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw DriverError(Errno("bind to " + ip + ":" + std::to_string(port)));
  }
  if (::listen(fd.Get(), backlog) != 0) throw DriverError(Errno("listen on " + ip));
  return fd;
}

UniqueFd ConnectTcpWithRetry(const std::string& ip, uint16_t port, const std::string& bind_ip, AbortContext& ctx,
                             const std::string& peer) {
  sockaddr_in addr = MakeAddr(ip, port);
  for (;;) {
    ctx.Check("connecting to " + peer + " at " + ip + ":" + std::to_string(port));
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.Valid()) throw DriverError(Errno("socket"));
    if (!bind_ip.empty()) {
      sockaddr_in local = MakeAddr(bind_ip, 0);
      if (::bind(fd.Get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
        throw DriverError(ctx.Prefix() + Errno("bind to --bind-ip " + bind_ip));
      }
    }
    if (::connect(fd.Get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      SetNoDelay(fd.Get());
      return fd;
    }
    if (errno != ECONNREFUSED && errno != ENETUNREACH && errno != EHOSTUNREACH && errno != ETIMEDOUT &&
        errno != EINTR && errno != ECONNRESET) {
      throw DriverError(ctx.Prefix() + Errno("connect to " + peer + " at " + ip + ":" + std::to_string(port)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

UniqueFd AcceptTcp(int listen_fd, AbortContext& ctx, const std::string& what) {
  for (;;) {
    ctx.Check(what);
    if (!WaitReady(listen_fd, POLLIN)) continue;
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      SetNoDelay(fd);
      return UniqueFd(fd);
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) throw DriverError(ctx.Prefix() + Errno("accept"));
  }
}

void SendAll(int fd, const void* data, size_t bytes, AbortContext& ctx, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ctx.Check("sending to " + peer);
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      WaitReady(fd, POLLOUT);
      continue;
    }
    throw DriverError(ctx.Prefix() + Errno("send to " + peer + " during " + ctx.Phase()));
  }
}

void RecvAll(int fd, void* data, size_t bytes, AbortContext& ctx, const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ctx.Check("waiting for " + peer);
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw DriverError(ctx.Prefix() + peer + " closed its connection during " + ctx.Phase());
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      WaitReady(fd, POLLIN);
      continue;
    }
    throw DriverError(ctx.Prefix() + Errno("receive from " + peer + " during " + ctx.Phase()));
  }
}

std::string LocalIp(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) throw DriverError(Errno("getsockname"));
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof buf);
  return buf;
}

uint16_t LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) throw DriverError(Errno("getsockname"));
  return ntohs(addr.sin_port);
}

void SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw DriverError(Errno("fcntl O_NONBLOCK"));
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool PeerClosed(int fd) {
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  return false;
}

}  // namespace ff::collective
