// Raw-socket peers for conformance and hostile-peer tests: connect from a chosen address, sign hellos and rejoins.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/wire_format.h"
#include "plugin/hello_auth.h"

namespace ff::testing {

// The first address in a handle, for raw sockets that impersonate peers.
inline sockaddr_in FirstAddress(const char* handle) {
  ListenHandle h;
  sockaddr_in a{};
  if (DecodeHandle(handle, &h).ok() && h.addrs[0].ss_family == AF_INET) std::memcpy(&a, &h.addrs[0], sizeof(a));
  return a;
}

inline HandleSecret SecretOf(const char* handle) {
  ListenHandle h;
  (void)DecodeHandle(handle, &h);
  return h.secret;
}

// A blocking TCP connection to `to`, bound first to `source` (e.g. "127.0.0.2") when given; -1 on failure.
inline int Dial(sockaddr_in to, const char* source = nullptr) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (source != nullptr) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    inet_pton(AF_INET, source, &s.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&s), sizeof(s)) != 0) {
      close(fd);
      return -1;
    }
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline int RawConnect(const char* handle, const char* source = nullptr) { return Dial(FirstAddress(handle), source); }

// What a real sender's first hello on path `index` looks like (nonce fixed per test connection): by
// default one with the default eager threshold and ring, which may send small messages unsolicited.
inline HelloWire SignedHello(const char* handle, uint64_t conn_id, int npaths, int index, uint64_t nonce = 77,
                             uint32_t eager_bytes = 64 * 1024) {
  const ConnectionKey key = DeriveConnectionKey(SecretOf(handle), conn_id, nonce);
  return MakeSignedHello(key, conn_id, nonce, npaths, index, 512 * 1024, 0, 0, eager_bytes);
}

inline HelloWire SignedRejoin(const char* handle, uint64_t conn_id, int npaths, int index, uint64_t counter,
                              uint64_t conn_nonce = 77) {
  const ConnectionKey key = DeriveConnectionKey(SecretOf(handle), conn_id, conn_nonce);
  return MakeSignedRejoin(key, conn_id, npaths, index, 512 * 1024, 0, counter, counter * 1000 + 1);
}

inline bool SendHello(int fd, const HelloWire& w) { return write(fd, &w, sizeof(w)) == static_cast<ssize_t>(sizeof(w)); }

// Closes with a reset (SO_LINGER 0), as a sender's fence does: the receiver sees ECONNRESET.
inline void ResetAndClose(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

// Whether the peer closed or reset `fd`; frames it sent before that are read and dropped.
inline bool PeerClosed(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0) continue;
    return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

}  // namespace ff::testing
