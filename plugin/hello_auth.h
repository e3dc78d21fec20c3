// Authenticated hellos (wire v3): a per-connection key from the listen handle's secret and the
// connection's nonce, an HMAC-SHA256 over every hello, and the replay window rejoins are checked against.
#pragma once

#include <array>
#include <cstdint>

#include "base/sha256.h"
#include "core/wire_format.h"
#include "plugin/listen_handle.h"

namespace ff {

// A hello as it travels: the 64-byte header, then its HelloAuth payload.
struct HelloWire {
  FrameHeader header;
  HelloAuth auth;
};
static_assert(sizeof(HelloWire) == 128, "HelloWire is a wire format");

using ConnectionKey = Sha256Digest;

// K = HMAC-SHA256(secret, "flexiforce-v4 connection key" | conn_id | conn_nonce), the secret being
// the listen handle's 128 random bits. The nonce makes two connections under one handle (and a
// connection id chosen by an attacker) use unrelated keys.
ConnectionKey DeriveConnectionKey(const HandleSecret& secret, uint64_t conn_id, uint64_t conn_nonce);

// A connection's first hello on path `path_index` (counter 0, the connection's nonce), signed.
HelloWire MakeSignedHello(const ConnectionKey& key, uint64_t conn_id, uint64_t conn_nonce, int path_count,
                          int path_index, uint64_t chunk_bytes, uint32_t sla_us, uint16_t flags = 0,
                          uint32_t eager_bytes = 0);
// A rejoin hello (kHelloFlagRejoin) with the sender's rejoin counter and a fresh nonce, signed.
HelloWire MakeSignedRejoin(const ConnectionKey& key, uint64_t conn_id, int path_count, int path_index,
                           uint64_t chunk_bytes, uint32_t sla_us, uint64_t counter, uint64_t nonce);

// Recomputes the MAC of `w` (header, nonce, counter, reserved) under `key` and compares in constant time.
bool VerifyHelloMac(const ConnectionKey& key, const HelloWire& w);
void SignHello(const ConnectionKey& key, HelloWire* w);

// Which rejoin counters a connection has already accepted: any counter above the highest seen, or
// one of the kWidth below it not seen yet (two paths' rejoins may cross on the wire). Counter 0 is
// never a rejoin. Same idea as IPsec's anti-replay window (RFC 4303 section 3.4.3).
class ReplayWindow {
 public:
  static constexpr uint64_t kWidth = 64;
  // True (and the counter is marked) when `counter` was not accepted before and is not too old.
  bool Accept(uint64_t counter);

 private:
  uint64_t highest_ = 0;
  uint64_t seen_ = 0;  // bit i: highest_ - i was accepted
};

}  // namespace ff
