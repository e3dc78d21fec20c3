// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): authenticates rejoining paths without a crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ff {

using Sha256Digest = std::array<uint8_t, 32>;

// Streaming SHA-256. Small and allocation-free; speed does not matter (a few hashes per connection).
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t len);
  Sha256Digest Finish();  // the object must not be updated afterwards

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

Sha256Digest Sha256Of(const void* data, size_t len);

// HMAC-SHA256 with an incremental message: Init with the key, Update with each part, Finish.
class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t key_len);
  void Update(const void* data, size_t len) { inner_.Update(data, len); }
  Sha256Digest Finish();

 private:
  Sha256 inner_;
  uint8_t opad_key_[64];
};

Sha256Digest HmacSha256Of(const void* key, size_t key_len, const void* data, size_t len);

// Compares in time independent of where the inputs differ, so a MAC cannot be guessed byte by byte.
bool ConstantTimeEqual(const void* a, const void* b, size_t len);

}  // namespace ff
