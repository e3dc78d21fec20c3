// TCP socket helpers for the driver's bootstrap and raw backend: parse, listen, connect, send/receive under a deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/collective/abort_context.h"
#include "tests/collective/unique_fd.h"

namespace ff::collective {

struct HostPort {
  std::string host;  // IPv4 address or host name
  uint16_t port = 0;
};

// Parses "HOST:PORT"; throws DriverError naming `what` and the accepted form.
HostPort ParseHostPort(const std::string& text, const std::string& what);

// Resolves an IPv4 address or name to dotted form; throws DriverError naming `what`.
std::string ResolveIpv4(const std::string& host, const std::string& what);

// A listening socket on ip:port (port 0 picks one), SO_REUSEADDR set.
UniqueFd ListenTcp(const std::string& ip, uint16_t port, int backlog);

// Connects to ip:port, optionally from bind_ip, retrying refused/unreachable attempts every
// 50 ms until the context's deadline; `peer` names the target in errors.
UniqueFd ConnectTcpWithRetry(const std::string& ip, uint16_t port, const std::string& bind_ip, AbortContext& ctx,
                             const std::string& peer);

// Accepts one connection, waiting under the context's deadline.
UniqueFd AcceptTcp(int listen_fd, AbortContext& ctx, const std::string& what);

// Blocking-style full send/receive on a socket, polling so the deadline and liveness checks run.
// RecvAll throws DriverError with `peer` named when the peer closed the connection.
void SendAll(int fd, const void* data, size_t bytes, AbortContext& ctx, const std::string& peer);
void RecvAll(int fd, void* data, size_t bytes, AbortContext& ctx, const std::string& peer);

// The local and remote IPv4 address of a connected socket, dotted form, and a bound socket's port.
std::string LocalIp(int fd);
uint16_t LocalPort(int fd);

void SetNonBlocking(int fd);
void SetNoDelay(int fd);

// True when the peer closed the connection (non-consuming check; pending data means alive).
bool PeerClosed(int fd);

}  // namespace ff::collective
