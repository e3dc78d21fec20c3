// Listen handle layout (version 2): magic(4) version(1) naddrs(1) pad(2) secret(16) connect-state(8)
// then per address: family(1) port(2, network order) address(4 or 16). Version 1 had an 8-byte secret.
#include "plugin/listen_handle.h"

#include <cstring>
#include <string>

namespace ff {
namespace {

constexpr uint32_t kHandleMagic = 0x31484646;  // "FFH1"
constexpr uint8_t kHandleVersion = 2;
constexpr size_t kSecretOffset = 8;
constexpr size_t kAddrStart = kConnectStateOffset + 8;
static_assert(kSecretOffset + kSecretBytes <= kConnectStateOffset, "the secret ends before connect()'s state");

}  // namespace

Status EncodeHandle(const ListenHandle& h, void* out) {
  auto* b = static_cast<unsigned char*>(out);
  std::memset(b, 0, kHandleBytes);
  if (h.addrs.empty() || h.addrs.size() > kMaxHandleAddrs)
    return InvalidArgument("listen handle needs 1 to " + std::to_string(kMaxHandleAddrs) + " addresses");
  std::memcpy(b, &kHandleMagic, 4);
  b[4] = kHandleVersion;
  std::memcpy(b + kSecretOffset, h.secret.data(), kSecretBytes);
  size_t pos = kAddrStart;
  uint8_t n = 0;
  for (const auto& a : h.addrs) {
    size_t alen = a.ss_family == AF_INET ? 4 : 16;
    if (pos + 3 + alen > kHandleBytes) break;  // what does not fit is left out; addrs[0] always fits
    b[pos] = static_cast<unsigned char>(a.ss_family == AF_INET ? 4 : 6);
    if (a.ss_family == AF_INET) {
      auto* s = reinterpret_cast<const sockaddr_in*>(&a);
      std::memcpy(b + pos + 1, &s->sin_port, 2);
      std::memcpy(b + pos + 3, &s->sin_addr, 4);
    } else {
      auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
      std::memcpy(b + pos + 1, &s->sin6_port, 2);
      std::memcpy(b + pos + 3, &s->sin6_addr, 16);
    }
    pos += 3 + alen;
    ++n;
  }
  b[5] = n;
  return Status::Ok();
}

Status DecodeHandle(const void* in, ListenHandle* h) {
  if (in == nullptr) return InvalidArgument("listen handle is NULL");
  auto* b = static_cast<const unsigned char*>(in);
  uint32_t magic = 0;
  std::memcpy(&magic, b, 4);
  if (magic != kHandleMagic)
    return InvalidArgument("malformed listen handle: not a FlexiForce handle (bad magic); it must come from "
                           "this plugin's listen()");
  if (b[4] != kHandleVersion)
    return InvalidArgument("listen handle version " + std::to_string(b[4]) + " unsupported (expected " +
                           std::to_string(kHandleVersion) + ")");
  uint8_t n = b[5];
  if (n == 0 || n > kMaxHandleAddrs)
    return InvalidArgument("malformed listen handle: " + std::to_string(n) + " addresses (accepted 1 to " +
                           std::to_string(kMaxHandleAddrs) + ")");
  std::memcpy(h->secret.data(), b + kSecretOffset, kSecretBytes);
  h->addrs.clear();
  size_t pos = kAddrStart;
  for (uint8_t i = 0; i < n; ++i) {
    if (pos >= kHandleBytes) return InvalidArgument("malformed listen handle: address list overruns 128 bytes");
    uint8_t fam = b[pos];
    size_t alen = fam == 4 ? 4 : fam == 6 ? 16 : 0;
    if (alen == 0)
      return InvalidArgument("malformed listen handle: address " + std::to_string(i) + " has family " +
                             std::to_string(fam) + " (accepted 4 or 6)");
    if (pos + 3 + alen > kHandleBytes)
      return InvalidArgument("malformed listen handle: address list overruns 128 bytes");
    sockaddr_storage a{};
    if (fam == 4) {
      auto* s = reinterpret_cast<sockaddr_in*>(&a);
      s->sin_family = AF_INET;
      std::memcpy(&s->sin_port, b + pos + 1, 2);
      std::memcpy(&s->sin_addr, b + pos + 3, 4);
      if (s->sin_port == 0) return InvalidArgument("malformed listen handle: port 0");
    } else {
      auto* s = reinterpret_cast<sockaddr_in6*>(&a);
      s->sin6_family = AF_INET6;
      std::memcpy(&s->sin6_port, b + pos + 3 - 2, 2);
      std::memcpy(&s->sin6_addr, b + pos + 3, 16);
      if (s->sin6_port == 0) return InvalidArgument("malformed listen handle: port 0");
    }
    h->addrs.push_back(a);
    pos += 3 + alen;
  }
  return Status::Ok();
}

}  // namespace ff
