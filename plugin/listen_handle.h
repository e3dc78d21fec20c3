// Codec for the <= 128-byte listen handle NCCL carries between ranks: secret plus every listen address.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace ff {

constexpr size_t kHandleBytes = 128;
constexpr size_t kMaxHandleAddrs = 8;
// 128 random bits per listen handle (handle version 2; version 1 had 64): the key every hello and
// rejoin is signed with derives from it, so guessing it must be out of reach.
constexpr size_t kSecretBytes = 16;
using HandleSecret = std::array<uint8_t, kSecretBytes>;

struct ListenHandle {
  HandleSecret secret{};
  std::vector<sockaddr_storage> addrs;  // with ports; addrs[0] is the listening device's own
};

// Encodes into `out` (kHandleBytes). The bytes at kConnectStateOffset stay zero for connect()'s use.
Status EncodeHandle(const ListenHandle& h, void* out);
Status DecodeHandle(const void* in, ListenHandle* h);

// connect() may be called again with the same handle; it keeps its progress pointer in the handle.
constexpr size_t kConnectStateOffset = 24;

}  // namespace ff
