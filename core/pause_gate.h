// The communicator's pause point: while paused, new requests get "retry later" and completions are held.
#pragma once

#include <cstdint>

namespace ff {

// Single-threaded (the proxy thread owns the communicator); counts nested pauses.
class PauseGate {
 public:
  void Pause() { ++depth_; }
  void Resume() {
    if (depth_ > 0) --depth_;
  }
  bool paused() const { return depth_ > 0; }

 private:
  uint32_t depth_ = 0;
};

}  // namespace ff
