// libFuzzer target: listen-handle decoding (plugin/listen_handle), and encode(decode(x)) decoding to the same addresses.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plugin/listen_handle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  unsigned char in[ff::kHandleBytes] = {};
  std::memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  ff::ListenHandle h;
  if (!ff::DecodeHandle(in, &h).ok()) return 0;
  unsigned char out[ff::kHandleBytes];
  if (!ff::EncodeHandle(h, out).ok()) __builtin_trap();  // what decodes must encode
  ff::ListenHandle again;
  if (!ff::DecodeHandle(out, &again).ok() || again.secret != h.secret || again.addrs.size() != h.addrs.size())
    __builtin_trap();
  for (size_t i = 0; i < h.addrs.size(); ++i)
    if (std::memcmp(&again.addrs[i], &h.addrs[i], sizeof(sockaddr_storage)) != 0) __builtin_trap();
  return 0;
}
