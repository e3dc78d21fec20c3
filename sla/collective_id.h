// Which NCCL operation a message belongs to: decoding setNetAttr's masks and NCCL's names.
#pragma once

#include <cstdint>
#include <string_view>

namespace ff::sla {

// Values 0..10 equal NCCL's ncclFunc_t, so (1 << value) is the setNetAttr op bit.
enum class Collective : uint8_t {
  kBroadcast = 0,
  kReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllReduce = 4,
  kSendRecv = 5,
  kSend = 6,
  kRecv = 7,
  kAllToAll = 8,
  kScatter = 9,
  kGather = 10,
  kMixed = 254,    // several op bits at once (NCCL's connect-time hint for p2p-only connections)
  kUnknown = 255,  // neither the profiler nor setNetAttr told us
};

inline constexpr uint32_t kNetAttrUndefined = 0xFFFFFFFFu;  // NCCL_NET_ATTR_UNDEF
inline constexpr int kNumNcclFuncs = 11;

// One bit -> that operation; several -> kMixed; 0 or undefined -> kUnknown.
Collective CollectiveFromOpMask(uint32_t op_mask);

// NCCL's own spelling ("AllReduce", "SendRecv", ...) -> enum; kUnknown when unrecognised.
// NCCL's profiler passes these strings as coll.func / p2p.func.
Collective CollectiveFromName(std::string_view name);

// "AllReduce", ..., "mixed", "unknown".
const char* CollectiveName(Collective c);

// NCCL's algorithm ids (bit positions in setNetAttr's algo mask) and protocol ids.
// Single bit -> name ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT";
// "LL", "LL128", "Simple"); several bits -> "mixed"; none or undefined -> "unknown".
const char* AlgorithmNameFromMask(uint32_t algo_mask);
const char* ProtocolNameFromMask(uint32_t proto_mask);

// What the communicator knows about a message's operation, from the best source available.
struct CollectiveAttribution {
  Collective collective = Collective::kUnknown;
  uint64_t seq_number = 0;        // the collective's sequence number in its communicator (profiler only)
  uint64_t count = 0;             // element count (profiler only)
  const char* datatype = nullptr; // NCCL's datatype name, e.g. "ncclFloat32" (profiler only)
  const char* algorithm = nullptr;// "Ring", "Tree", ... (profiler, or setNetAttr's algo bit)
  int peer = -1;                  // peer rank for point-to-point (profiler only)
  enum class Source : uint8_t { kNone, kNetAttr, kProfiler } source = Source::kNone;
};

// The fallback order: profiler attribution > setNetAttr bits > unknown.
// `profiler` is the result of ProfilerEventPool::AttributeNetEvent (source kProfiler when found).
CollectiveAttribution ChooseAttribution(const CollectiveAttribution& profiler, uint32_t net_attr_op,
                                        uint32_t net_attr_algo);

}  // namespace ff::sla
