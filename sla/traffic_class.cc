#include "sla/traffic_class.h"

namespace ff::sla {
namespace {

bool IsByte(int v) { return v >= 0 && v <= 255; }

TrafficClassDecision FromByte(TrafficClassSource source, int tos) { return {source, tos, tos >> 2, -1}; }

}  // namespace

TrafficClassDecision DecideTrafficClass(const TrafficClassInputs& in, const TrafficClassMap& map) {
  // The communicator's own request is honoured even when observing: NCCL's built-in transports
  // apply it too, so honouring it is "what stock NCCL puts on the wire", not a FlexiForce change.
  if (IsByte(in.comm_config)) return FromByte(TrafficClassSource::kCommConfig, in.comm_config);
  if (!in.steer) return {};
  if (IsByte(in.knob)) return FromByte(TrafficClassSource::kKnob, in.knob);
  const int i = static_cast<int>(in.level) - 1;
  const int dscp = map.dscp[i] & 0x3f;
  return {TrafficClassSource::kLevel, dscp << 2, dscp, map.sl[i] & 0x0f};
}

const char* TrafficClassSourceName(TrafficClassSource source) {
  switch (source) {
    case TrafficClassSource::kLeaveDefault:
      return "leave-default";
    case TrafficClassSource::kCommConfig:
      return "ncclConfig.trafficClass";
    case TrafficClassSource::kKnob:
      return "FLEXIFORCE_TRAFFIC_CLASS";
    case TrafficClassSource::kLevel:
      break;
  }
  return "sla-level";
}

}  // namespace ff::sla
