// NCCL's memory handle (what regMr returns and isend/irecv/iflush get back), as the communicator and
// the transports see it: the bytes it covers and, per registration domain, the keys a transport that
// reads or writes the memory itself needs. Host memory over TCP has no keys; over RDMA each port's
// registration cache is a domain (an opaque token here: the core knows no transport).
#pragma once

#include <array>
#include <cstdint>

namespace ff {

struct MemKey {
  const void* domain = nullptr;  // nullptr: an empty slot
  uint32_t lkey = 0;             // local access (the sender's payload)
  uint32_t rkey = 0;             // remote access (the receiver's buffer, published in its descriptor)
};

struct MemHandle {
  const char* data = nullptr;
  uint64_t size = 0;
  int type = 1;  // NCCL_PTR_HOST (1), NCCL_PTR_CUDA (2)
  std::array<MemKey, 4> keys{};

  // [p, p + n) lies inside the registered bytes.
  bool Covers(const void* p, uint64_t n) const {
    const char* c = static_cast<const char*>(p);
    return data != nullptr && c >= data && n <= size && static_cast<uint64_t>(c - data) <= size - n;
  }
  // The keys of `domain`, nullptr when the handle has none there.
  const MemKey* For(const void* domain) const {
    if (domain == nullptr) return nullptr;
    for (const MemKey& k : keys)
      if (k.domain == domain) return &k;
    return nullptr;
  }
};

}  // namespace ff
