// Listening side: one socket per local interface; admits only paths that present the handle's secret.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "plugin/pending_hello.h"
#include "core/recv_comm.h"
#include "tcp/byte_stream.h"
#include "core/wire_format.h"
#include "tcp/socket.h"

namespace ff {

struct NetContext;

class ListenComm {
 public:
  static constexpr uint32_t kMagic = 0x4646434c;
  uint32_t magic = kMagic;

  // Opens listeners for `dev` (and the other devices when paths spread) and fills the 128-byte handle.
  static Status Create(NetContext* ctx, int dev, void* handle, std::unique_ptr<ListenComm>* out);

  // Non-blocking: *out stays nullptr until every path of one connection has arrived.
  Status Accept(std::unique_ptr<RecvComm>* out);
  uint64_t rejected() const { return rejected_; }

 private:
  struct Group {
    int npaths = 0;
    int arrived = 0;
    uint64_t chunk_bytes = 0;
    uint32_t sla_us = 0;
    uint64_t task_hash = 0;
    std::vector<std::unique_ptr<ByteStream>> streams;
    std::vector<tcp::Socket> sockets;
    uint64_t first_ns = 0;  // first path's arrival: the others get the setup grace from here
  };

  void Reject(PendingHello& p, const std::string& why);

  NetContext* ctx_ = nullptr;
  uint64_t secret_ = 0;
  std::vector<tcp::Socket> listeners_;
  std::vector<PendingHello> pending_;
  std::map<uint64_t, Group> groups_;
  // Connections accepted without some of their paths: a late hello for one of them is refused (the
  // sender then reconnects that path through failback), never taken for a new connection.
  std::array<uint64_t, 64> started_partial_{};
  size_t started_partial_count_ = 0;  // entries written (the ring holds the last 64)
  uint64_t rejected_ = 0;
};

}  // namespace ff
