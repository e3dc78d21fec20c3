// Traffic-class policy: the DSCP (TCP) and SL/TC (verbs) a communicator's packets carry.
#pragma once

#include <cstdint>
#include <string>

#include "sla/sla_level.h"

namespace ff::sla {

// ncclNetCommConfig_t::trafficClass when the communicator's ncclConfig did not set one.
inline constexpr int kTrafficClassUndefined = -1;

// Per-level code points. Defaults follow RFC 4594's service classes (see sla/README.md):
// Level 1 EF (46, low-latency), Level 2 AF41 (34, latency-sensitive elastic),
// Level 3 AF11 (10, high-throughput data; not CS1, which many fabrics treat as scavenger).
// Sites whose switches map DSCP to lossless (PFC) queues differently set these knobs.
struct TrafficClassMap {
  uint8_t dscp[3] = {46, 34, 10};  // index: level - 1
  // InfiniBand service levels; Level 3 keeps NCCL's default SL 0 so bulk traffic is unchanged.
  uint8_t sl[3] = {2, 1, 0};
};

enum class TrafficClassSource : uint8_t {
  kLeaveDefault,  // the backend keeps its default (NCCL_IB_TC/SL, the OS's TOS)
  kCommConfig,    // the communicator's ncclConfig trafficClass
  kKnob,          // FLEXIFORCE_TRAFFIC_CLASS
  kLevel,         // the SLA level's mapping
};

struct TrafficClassDecision {
  TrafficClassSource source = TrafficClassSource::kLeaveDefault;
  // IP traffic-class byte (DSCP << 2, ECN bits 0): IP_TOS for TCP, GRH traffic_class for RoCE.
  // -1 with kLeaveDefault.
  int tos = -1;
  int dscp = -1;  // tos >> 2, -1 with kLeaveDefault
  int sl = -1;    // InfiniBand SL; -1 leaves the backend's default (explicit values carry only a TC)
};

struct TrafficClassInputs {
  bool steer = false;                          // AI_FLEXIFORCE_ENABLE=1
  int comm_config = kTrafficClassUndefined;    // ncclNetCommConfig_t::trafficClass (net v10+)
  int knob = kTrafficClassUndefined;           // FLEXIFORCE_TRAFFIC_CLASS, -1 when unset
  SlaLevel level = SlaLevel::kLevel3;
};

// Precedence, most specific first: ncclConfig trafficClass > FLEXIFORCE_TRAFFIC_CLASS > level.
// Observe-only (steer == false) changes nothing FlexiForce would choose: the knob and the level
// are ignored (kLeaveDefault); an explicit ncclConfig trafficClass is still honoured, as NCCL's
// own transports honour it.
// Explicit values are traffic-class bytes, the same convention as NCCL_IB_TC; values outside
// 0..255 count as unset.
TrafficClassDecision DecideTrafficClass(const TrafficClassInputs& in, const TrafficClassMap& map = {});

const char* TrafficClassSourceName(TrafficClassSource source);

}  // namespace ff::sla
