// Listening side: one socket per local interface; admits only paths whose hello is signed with a key derived from the handle's secret.
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
class VerbsPathSetup;

class ListenComm {
 public:
  static constexpr uint32_t kMagic = 0x4646434c;
  uint32_t magic = kMagic;

  // Opens listeners for `dev` (and the other devices when paths spread) and fills the 128-byte handle.
  static Status Create(NetContext* ctx, int dev, void* handle, std::unique_ptr<ListenComm>* out);

  // Non-blocking: *out stays nullptr until every path of one connection has arrived. An error when
  // a connection has waited kAcceptStarvedErrorNs for a descriptor this process cannot free.
  Status Accept(std::unique_ptr<RecvComm>* out);
  static constexpr uint64_t kAcceptStarvedErrorNs = 2'000'000'000;
  uint64_t rejected() const { return rejected_; }
  size_t groups_waiting() const { return groups_.size(); }
  int dev() const { return dev_; }
  ~ListenComm();

 private:
  struct Group {
    int npaths = 0;
    int arrived = 0;
    uint64_t conn_nonce = 0;
    ConnectionKey key{};
    std::vector<sockaddr_storage> peers;  // where the arrived paths came from: rejoins must too
    uint64_t chunk_bytes = 0;
    uint32_t eager_bytes = 0;  // the sender's, from its hello: 0 when it sends nothing unsolicited
    uint32_t sla_us = 0;
    uint64_t task_hash = 0;
    std::vector<std::unique_ptr<ByteStream>> streams;
    std::vector<tcp::Socket> sockets;
    std::vector<std::unique_ptr<VerbsPathSetup>> verbs;  // verbs: each arrived path's QP bring-up
    uint64_t first_ns = 0;  // first path's arrival: the others get the setup grace from here
  };

  void Reject(PendingHello& p, const std::string& why);
  // Admits one complete hello into its connection's group, or rejects it.
  void Admit(PendingHello& p, uint64_t now_ns);
  // A partial group all of whose arrived paths have closed is no connection: it is never started,
  // and it is dropped (sockets freed, one WARN) FLEXIFORCE_CONNECT_TIMEOUT_MS after its first path.
  bool ExpireIfDead(std::map<uint64_t, Group>::iterator it, uint64_t now_ns);
  void RememberStarted(uint64_t conn_id);

  // Verbs: moves every arrived path's RDMA setup on; false while one is still in progress.
  Status StepVerbs(Group& g, bool* ready);

  NetContext* ctx_ = nullptr;
  int dev_ = 0;
  bool verbs_ = false;
  HandleSecret secret_{};
  std::vector<tcp::Socket> listeners_;
  PendingHellos pending_{"listener"};
  std::map<uint64_t, Group> groups_;
  // Connections accepted or dropped here: a late (or replayed) hello for one of them is refused (the
  // sender reconnects a missing path through failback), never taken for a new connection.
  std::array<uint64_t, 64> started_{};
  size_t started_count_ = 0;  // entries written (the ring holds the last 64)
  uint64_t rejected_ = 0;
};

}  // namespace ff
