// Executes a ring schedule over a transport the way NCCL's proxy does: a window of steps in flight per peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/collective/abort_context.h"
#include "tests/collective/collective_data.h"
#include "tests/collective/ring_schedule.h"
#include "tests/collective/ring_transport.h"

namespace ff::collective {

struct EngineBuffers {
  std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::byte* staging = nullptr;  // window slots of slot_bytes each, for reducing receives
  size_t slot_bytes = 0;
  int send_region = -1;
  int recv_region = -1;
  int staging_region = -1;
};

// What the engine moved through the transport since the last ResetTraffic(): completed steps and their bytes.
struct Traffic {
  uint64_t sends = 0;
  uint64_t send_bytes = 0;
  uint64_t recvs = 0;
  uint64_t recv_bytes = 0;
};

class StepEngine {
 public:
  // window: steps in flight per direction (NCCL_STEPS is 8); corrupt: flip a bit in the
  // first non-empty received step (to prove the checker catches a wrong result); test_all: test every
  // outstanding request each pass instead of only the oldest of each direction (NCCL's proxy).
  StepEngine(RingTransport& transport, AbortContext& ctx, const EngineBuffers& buffers, int window, DataType dtype,
             bool corrupt, bool test_all = false);

  // Runs one collective to completion; throws DriverError naming the step on failure or timeout.
  void Run(const RingSchedule& schedule);

  // Completed sends and receives (each one isend/irecv through the transport) and their bytes.
  const Traffic& traffic() const { return traffic_; }
  void ResetTraffic() { traffic_ = {}; }

 private:
  RingTransport& transport_;
  AbortContext& ctx_;
  EngineBuffers buffers_;
  int window_;
  DataType dtype_;
  bool corrupt_;
  bool test_all_;
  Traffic traffic_;
};

}  // namespace ff::collective
