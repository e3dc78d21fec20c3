// Request objects and their fixed-size pools: sized at connect time, nothing allocated per message.
#pragma once

#include <array>
#include <cstdint>

#include "core/mem_handle.h"
#include "core/wire_format.h"

namespace ff {

class Comm;

enum class RequestKind : uint8_t { kFree = 0, kSend, kRecv, kFlush };

constexpr int kMaxRequests = 32;  // NCCL_NET_MAX_REQUESTS
constexpr int kMaxRecvs = 8;      // grouped receives per irecv
constexpr int kChunkBitmapBits = 256;

struct Request {
  RequestKind kind = RequestKind::kFree;
  Comm* comm = nullptr;
};

// One message on a send connection, from isend until the receiver acknowledges it. Eager messages
// outlive their NCCL request: it completes once the bytes are copied into the retransmit ring.
struct SendMsg {
  uint64_t seq = 0;
  const char* data = nullptr;  // the caller's buffer, or the eager ring's copy
  uint64_t size = 0;
  uint64_t chunk = 0;
  uint64_t next_offset = 0;  // first byte not yet queued on a path
  bool zero_queued = false;  // a 0-byte message still sends one frame
  bool matched = false;      // the receiver's descriptor was checked against it
  RecvDescriptor dest{};     // that descriptor, once matched: where an RDMA path writes the chunks
  const MemHandle* mem = nullptr;  // NCCL's handle of the caller's buffer (not of an eager copy)
  bool eager = false;
  bool ack_soon = false;     // eager, but the ring or the message slots run low: asks for a prompt acknowledgement
  int home_path = -1;        // unstriped messages keep one path
  int tag = 0;
  uint16_t collective = 0xffff;
  uint64_t start_ns = 0;
  uint64_t ring_end = 0;  // eager: the ring position that frees when this message is acknowledged
  // Eager, its ring copy not made yet: `data` is still the caller's buffer, written from there first
  // (SendComm::SecureEagerCopy copies it here before the request can complete).
  char* ring_copy = nullptr;
  // Failover: the path each queued chunk went to, and the chunks to queue again because their
  // path died. Only those are re-sent; chunks on live paths are still delivered by the transport.
  std::array<uint8_t, kChunkBitmapBits> chunk_path{};
  std::array<uint64_t, kChunkBitmapBits / 64> resend{};
  int resend_count = 0;
  uint64_t bytes_end = 0;  // bytes of this message and every one posted before it on this comm
};

// NCCL's handle for one isend.
struct SendRequest : Request {
  uint64_t seq = 0;
  uint64_t size = 0;
  bool eager = false;  // completes (and is counted in the statistics) when handed to the transport
  uint16_t collective = 0xffff;
  uint64_t start_ns = 0;
};

struct RecvEntry {
  char* data = nullptr;
  uint64_t capacity = 0;
  int tag = 0;
  bool bound = false;
  uint64_t seq = 0;
  bool size_known = false;
  uint64_t total = 0;
  uint64_t chunk = 0;
  uint64_t received = 0;
  bool done = false;
  uint16_t collective = 0xffff;  // from the sender's frame header
  // RDMA: the buffer's remote key per device slot (published with its address); all 0 on a stream.
  std::array<uint32_t, 4> rkeys{};
  std::array<uint64_t, kChunkBitmapBits / 64> chunks_seen{};  // duplicates after a re-send are dropped
};

struct RecvRequest : Request {
  int n = 0;
  uint64_t seq_base = 0;  // messages seq_base .. seq_base+n-1 belong to this request
  int done_count = 0;
  std::array<RecvEntry, kMaxRecvs> entries{};
  uint64_t start_ns = 0;
};

// Fixed pool of T; Acquire returns nullptr when all kMaxRequests are in use.
// A request taken from its pool starts blank. A receive request's entries (1 KiB) are left to
// irecv, which clears the n it uses: clearing all eight cost a small message more than its framing.
inline void Clear(SendRequest& r) { r = SendRequest{}; }
inline void Clear(RecvRequest& r) {
  r.n = 0;
  r.seq_base = 0;
  r.done_count = 0;
  r.start_ns = 0;
}

template <typename T>
class RequestPool {
 public:
  T* Acquire(RequestKind kind, Comm* comm) {
    for (auto& r : items_) {
      if (r.kind == RequestKind::kFree) {
        Clear(r);
        r.kind = kind;
        r.comm = comm;
        ++in_use_;
        return &r;
      }
    }
    return nullptr;
  }
  void Release(T* r) {
    r->kind = RequestKind::kFree;
    --in_use_;
  }
  int in_use() const { return in_use_; }
  bool Owns(const void* p) const {
    auto* b = reinterpret_cast<const char*>(items_.data());
    auto* c = reinterpret_cast<const char*>(p);
    return c >= b && c < b + sizeof(items_);
  }

 private:
  std::array<T, kMaxRequests> items_{};
  int in_use_ = 0;
};

// Chunk size for a message: the configured size, grown so no message has more than 256 chunks.
inline uint64_t ChunkBytesFor(uint64_t total, uint64_t base) {
  uint64_t need = (total + kChunkBitmapBits - 1) / kChunkBitmapBits;
  need = (need + 4095) & ~uint64_t{4095};
  return need > base ? need : base;
}

}  // namespace ff
