// Failback seam: how a failed path is re-established, per transport. The core keeps the policy (when
// to try, back-off, relapses, what happens to traffic); the transport only connects.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/path.h"

namespace ff {

// What the receiver tells the sender once per connection so a failed path can come back
// (a typed control message, opaque to the core: a TCP port, or an RDMA endpoint).
struct ReconnectInfo {
  uint16_t port = 0;  // TCP: the receiving process's rejoin listener; 0: failback unavailable
  uint16_t reserved[3] = {};
  uint64_t data[3] = {};
};
static_assert(sizeof(ReconnectInfo) == 32, "ReconnectInfo is a wire format");

// Sender side: one per send communicator.
class Reconnector {
 public:
  enum class Step { kPending, kDone, kFailed };
  virtual ~Reconnector() = default;
  virtual void OnPeerInfo(const ReconnectInfo& info) = 0;
  // The receiver said where to reconnect: failback is possible.
  virtual bool Available() const = 0;
  // Whether path `index`'s local side is ready for an attempt (its interface stably up for stable_ns).
  virtual bool Ready(int index, uint64_t now_ns, uint64_t stable_ns) = 0;
  // Starts or continues one attempt. kDone: *out holds the new path (and *detail its description);
  // kFailed: *detail says why. Never blocks.
  virtual Step Advance(int index, uint64_t now_ns, std::unique_ptr<Path>* out, std::string* detail) = 0;
  // Gives up the attempt in progress on `index`, if any.
  virtual void Abandon(int index) = 0;
};

// Receiver side: paths the sender re-established, delivered by the transport's listener.
class ReconnectInbox {
 public:
  struct Arrival {
    int index = -1;
    std::unique_ptr<Path> path;
    std::string peer;
  };
  virtual ~ReconnectInbox() = default;
  // What to tell the sender (ReconnectInfo::port == 0: nothing to tell).
  virtual ReconnectInfo Info() const = 0;
  // Lets the transport's listener run; never blocks.
  virtual void Poll(uint64_t now_ns) = 0;
  // Moves the paths that arrived since the last call into *out; false when there were none.
  virtual bool Take(std::vector<Arrival>* out) = 0;
};

}  // namespace ff
