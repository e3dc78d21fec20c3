// The network-plugin event FlexiForce's net side hands to NCCL's profiler callback to ask its
// own profiler side which collective a message belongs to (the documented route, no NCCL internals).
#pragma once

#include <cstdint>

#include "sla/collective_id.h"

namespace ff::sla {

// Plugin id as NCCL's profiler ABI lays it out: high 16 bits the event family, low 16 the
// version. NCCL's own families are 1 (IB) and 2 (socket); 0x4646 ("FF") is ours.
inline constexpr int64_t kFlexiForceNetEventId = (int64_t{0x4646} << 16) | 1;
inline constexpr uint32_t kNetEventProbeMagic = 0x46464e50;  // "FFNP"

// Usage in isend/irecv (net v10+ gives init a ncclProfilerCallback_t `cb`):
//   NetEventProbe probe;  void* ev = nullptr;
//   cb(&ev, ncclProfilerNetEventStart, phandle, kFlexiForceNetEventId, &probe);
//   cb(&ev, ncclProfilerNetEventStop, phandle, kFlexiForceNetEventId, nullptr);
// NCCL forwards the start to our startEvent with the ProxyStep handle as parent; our profiler
// fills `result` synchronously and keeps no event (the stop receives a null handle).
struct NetEventProbe {
  uint32_t magic = kNetEventProbeMagic;
  uint32_t reserved = 0;
  CollectiveAttribution result;
};

}  // namespace ff::sla
