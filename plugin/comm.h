// Transport-independent communicator core shared by the send and receive sides: paths, errors, pause gate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/pause_gate.h"
#include "plugin/status.h"
#include "plugin/stream_path.h"

namespace ff {

// What a communicator stamps on every frame and how it chunks (fixed at connect time).
struct CommOptions {
  uint64_t chunk_bytes = 512 * 1024;
  uint64_t stripe_min_bytes = 256 * 1024;
  int max_queued_chunks = 2;
  uint64_t task_hash = 0;
  uint32_t sla_us = 0;
};

class Comm : public FrameSink {
 public:
  Comm(std::vector<std::unique_ptr<StreamPath>> paths, const CommOptions& opts, std::string peer);
  ~Comm() override = default;

  // Moves bytes on every path; returns the communicator's sticky error once one happened.
  virtual Status Progress() = 0;
  const Status& error() const { return error_; }
  PauseGate& gate() { return gate_; }
  int path_count() const { return static_cast<int>(paths_.size()); }
  int alive_paths() const;
  const std::string& peer() const { return peer_; }

 protected:
  // Records the first fatal error and logs it once.
  void Fail(Status s);
  // A path failed: mark it dead. Returns false when no path is left (the communicator has failed).
  bool PathDown(StreamPath& p, const std::string& why);
  StreamPath* FirstAlive();
  // Called after a path died while others remain: the sender re-sends what was not acknowledged.
  virtual void OnPathLost() {}
  // Handles a PumpRx result; false when the communicator must stop processing this round.
  bool HandlePump(StreamPath& p, PumpResult r);
  // Whether bytes are still owed on this communicator: EOF is an error only then.
  virtual bool ExpectingTraffic() const = 0;
  bool FlushAll();

  std::vector<std::unique_ptr<StreamPath>> paths_;
  CommOptions opts_;
  std::string peer_;
  PauseGate gate_;
  Status error_;
  std::string reject_reason_;  // set by OnHeader when it rejects a frame
};

}  // namespace ff
