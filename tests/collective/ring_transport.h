// The driver's view of a transport: one send channel to the next rank and one receive channel from the previous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "nccl/net_abi.h"
#include "tests/collective/abort_context.h"
#include "tests/collective/collective_data.h"
#include "tests/collective/rendezvous.h"

namespace ff::collective {

// Opaque id of a posted send or receive; meaning is private to the transport.
using RequestId = uintptr_t;

// The collective about to run, as NCCL knows it when it tells the network (setNetAttr) and the
// profiler (Coll and ProxyOp events) about it.
struct CollectiveCall {
  NcclFunc func;
  size_t count = 0;  // elements per rank (nccl-tests' count)
  DataType dtype = DataType::kInt32;
  int root = 0;
  int send_steps = 0;  // isends this rank will post to the next rank
  int recv_steps = 0;  // irecvs it will post from the previous rank
  size_t step_bytes = 0;
};

// Both backends (the plugin through its C ABI, raw sockets) implement this, so the
// step engine drives them with identical pipelining and the benchmark is fair.
class RingTransport {
 public:
  virtual ~RingTransport() = default;

  // One line for the report header, e.g. "plugin flexiforce dev 0 (eth0, 10000 Mbps)".
  virtual std::string Describe() const = 0;

  // Opens the ring: publishes a handle through the rendezvous, connects to the next rank
  // and accepts the previous one.
  virtual void Connect(Rendezvous& rdv, int rank, int nranks) = 0;

  // Registers a buffer for sends and receives; returns its region index.
  virtual int RegisterBuffer(void* data, size_t bytes) = 0;

  // Announces the collective that follows, as NCCL does before it (plugin: setNetAttr, profiler events).
  virtual void BeginCollective(const CollectiveCall& call) = 0;

  // Posting may be refused for now (nullopt), as a plugin returns a NULL request; retry later.
  virtual std::optional<RequestId> PostSend(int region, const void* data, size_t bytes) = 0;
  virtual std::optional<RequestId> PostRecv(int region, void* data, size_t bytes) = 0;

  // True when done; *bytes receives the size actually transferred. Throws DriverError on failure.
  virtual bool Test(RequestId request, size_t* bytes) = 0;

  // Gives a transport without its own progress thread a chance to move bytes.
  virtual void Progress() {}

  // Deregisters the buffers and closes the channels (and the plugin context).
  virtual void Close() = 0;
};

}  // namespace ff::collective
