// Owner of one socket file descriptor plus the non-blocking TCP operations the transport needs.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace ff::tcp {

// Move-only owner: the descriptor is closed exactly once, by the destructor or reset().
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct PathSocketOptions {
  int tos = -1;             // IP_TOS / IPV6_TCLASS byte; -1 leaves the default
  int buffer_bytes = 0;     // SO_SNDBUF/SO_RCVBUF; 0 keeps autotuning
  int user_timeout_ms = 0;  // TCP_USER_TIMEOUT; 0 keeps the kernel default
  // TCP_CONGESTION (FLEXIFORCE_TCP_CONGESTION); empty keeps the system's default. One the kernel
  // refuses is reported once per process (NCCL's logger) and the default stays: never an error.
  std::string congestion;
  // SO_MAX_PACING_RATE in bytes per second; 0 leaves the socket unpaced. TCP paces by itself
  // (no fq qdisc needed since Linux 4.13), so this caps the path's rate on any NIC.
  uint64_t max_pacing_bytes_per_s = 0;
};

// The congestion control a TCP socket uses (TCP_CONGESTION), empty when it cannot be read.
std::string CongestionControlOf(int fd);

// Listening socket on `local` at `want_port` (0 picks one); returns the bound port.
Status Listen(const sockaddr_storage& local, Socket* out, uint16_t* port, uint16_t want_port = 0);

// Starts a non-blocking connect. `local` (may be null) pins the source address; a non-zero
// [sport_lo, sport_hi] range pins the source port (path entropy), trying ports in the range.
Status StartConnect(const sockaddr_storage& remote, const sockaddr_storage* local, uint16_t sport_lo,
                    uint16_t sport_hi, Socket* out);

enum class ConnectProgress { kPending, kConnected, kFailed };
// Polls a connecting socket without blocking; on kFailed `*err` holds the errno.
ConnectProgress PollConnect(int fd, int* err);

// Accepts one pending connection without blocking; returns an invalid socket when none is waiting.
// An error that says nothing about the listener (IsTransientAcceptError) is Ok with an invalid
// socket and the errno in *transient_errno (when given); anything else is an error.
Status AcceptOne(int listen_fd, Socket* out, sockaddr_storage* peer, int* transient_errno = nullptr);
// Out of descriptors or buffers, or a network error that Linux reports from accept for the new
// connection (accept(2): "pass network errors as an error from accept"): the listener stays usable.
bool IsTransientAcceptError(int err);
// Whether the peer of a connected socket has closed it or it failed (EOF or an error pending), without
// consuming data.
bool PeerHasClosed(int fd);
// For an errno of EMFILE/ENFILE, what ran out and what to do, to append to an error message
// (": this process has used its 1024 file descriptors ..."); "" for any other errno.
std::string DescriptorLimitHint(int err);
// Out of a resource the process can free by closing connections it holds.
bool IsResourceAcceptError(int err);

Status ApplyPathOptions(int fd, int family, const PathSocketOptions& opts);
Status SetNonBlocking(int fd);

// Non-blocking I/O: bytes moved, 0 for "would block", -1 for an error (errno set), and for
// RecvSome -2 when the peer closed the connection.
ssize_t SendSome(int fd, const iovec* iov, int iovcnt);
ssize_t RecvSome(int fd, void* buf, size_t len);
ssize_t RecvSomeV(int fd, const iovec* iov, int iovcnt);  // one recvmsg into the buffers, in order
ssize_t PeekSome(int fd, void* buf, size_t len);  // RecvSome with MSG_PEEK: the bytes stay queued
ssize_t SkipSome(int fd, size_t len);  // drops up to min(len, 4 KiB) queued bytes (MSG_TRUNC); Skip loops

// Local port a socket is bound to (host order), 0 on error.
uint16_t LocalPort(int fd);
std::string PeerToString(const sockaddr_storage& addr);
// Same family and IP address; ports are not compared.
bool SameAddressIgnoringPort(const sockaddr_storage& a, const sockaddr_storage& b);

}  // namespace ff::tcp
