// Connection key derivation, hello MACs and the rejoin replay window.
#include "plugin/hello_auth.h"

#include <cstring>

namespace ff {
namespace {

constexpr char kKeyLabel[] = "flexiforce-v4 connection key";

Sha256Digest ComputeMac(const ConnectionKey& key, const HelloWire& w) {
  HmacSha256 mac(key.data(), key.size());
  mac.Update(&w.header, sizeof(w.header));
  mac.Update(&w.auth, offsetof(HelloAuth, mac));
  return mac.Finish();
}

}  // namespace

ConnectionKey DeriveConnectionKey(const HandleSecret& secret, uint64_t conn_id, uint64_t conn_nonce) {
  HmacSha256 h(secret.data(), secret.size());
  h.Update(kKeyLabel, sizeof(kKeyLabel) - 1);
  h.Update(&conn_id, sizeof(conn_id));
  h.Update(&conn_nonce, sizeof(conn_nonce));
  return h.Finish();
}

void SignHello(const ConnectionKey& key, HelloWire* w) {
  const Sha256Digest d = ComputeMac(key, *w);
  std::memcpy(w->auth.mac, d.data(), sizeof(w->auth.mac));
}

bool VerifyHelloMac(const ConnectionKey& key, const HelloWire& w) {
  const Sha256Digest d = ComputeMac(key, w);
  return ConstantTimeEqual(d.data(), w.auth.mac, sizeof(w.auth.mac));
}

HelloWire MakeSignedHello(const ConnectionKey& key, uint64_t conn_id, uint64_t conn_nonce, int path_count,
                          int path_index, uint64_t chunk_bytes, uint32_t sla_us, uint16_t flags,
                          uint32_t eager_bytes) {
  HelloWire w{};
  w.header = MakeHello(conn_id, path_count, path_index, chunk_bytes, sla_us, flags, eager_bytes);
  w.auth.nonce = conn_nonce;
  w.auth.counter = 0;
  SignHello(key, &w);
  return w;
}

HelloWire MakeSignedRejoin(const ConnectionKey& key, uint64_t conn_id, int path_count, int path_index,
                           uint64_t chunk_bytes, uint32_t sla_us, uint64_t counter, uint64_t nonce) {
  HelloWire w{};
  w.header = MakeHello(conn_id, path_count, path_index, chunk_bytes, sla_us, kHelloFlagRejoin);
  w.auth.nonce = nonce;
  w.auth.counter = counter;
  SignHello(key, &w);
  return w;
}

bool ReplayWindow::Accept(uint64_t counter) {
  if (counter == 0) return false;
  if (counter > highest_) {
    const uint64_t shift = counter - highest_;
    seen_ = shift >= kWidth ? 0 : seen_ << shift;
    seen_ |= 1;
    highest_ = counter;
    return true;
  }
  const uint64_t age = highest_ - counter;
  if (age >= kWidth) return false;  // too old to tell from a replay
  const uint64_t bit = uint64_t{1} << age;
  if (seen_ & bit) return false;
  seen_ |= bit;
  return true;
}

}  // namespace ff
