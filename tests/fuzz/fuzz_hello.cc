// libFuzzer target: hello and rejoin parsing (header checks, HelloFrame view, MAC verification, replay window).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plugin/hello_auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ff::HelloWire w{};
  std::memcpy(&w, data, size < sizeof(w) ? size : sizeof(w));
  const bool well_formed = ff::ValidateHeader(w.header).empty();
  const ff::HelloFrame hf = ff::AsHello(w.header);
  const ff::ConnectionKey key = ff::DeriveConnectionKey(ff::HandleSecret{0x12, 0x34}, hf.conn_id, w.auth.nonce);
  if (ff::VerifyHelloMac(key, w) && size < sizeof(w)) __builtin_trap();  // a MAC guessed from zeros
  // A hello signed here must verify, and must stop verifying when any byte changes.
  ff::HelloWire signed_w = w;
  ff::SignHello(key, &signed_w);
  if (!ff::VerifyHelloMac(key, signed_w)) __builtin_trap();
  if (size > sizeof(w)) {
    const size_t at = data[sizeof(w)] % sizeof(w);  // any byte, the MAC's own included
    reinterpret_cast<uint8_t*>(&signed_w)[at] ^= 0x01;
    if (ff::VerifyHelloMac(key, signed_w)) __builtin_trap();
  }
  // The replay window: counters from the rest of the input; none is accepted twice.
  ff::ReplayWindow window;
  uint64_t accepted[64];
  size_t n = 0;
  for (size_t off = sizeof(w) + 1; off + 2 <= size && n < 64; off += 2) {
    uint64_t c = uint64_t{data[off]} | uint64_t{data[off + 1]} << 8;
    if (!window.Accept(c)) continue;
    for (size_t i = 0; i < n; ++i)
      if (accepted[i] == c) __builtin_trap();
    accepted[n++] = c;
  }
  (void)well_formed;
  return 0;
}
