#include "sla/collective_id.h"

#include <bit>

namespace ff::sla {
namespace {

constexpr const char* kFuncNames[kNumNcclFuncs] = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
    "Send",      "Recv",   "AllToAll",  "Scatter",       "Gather",
};
constexpr const char* kAlgoNames[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr const char* kProtoNames[] = {"LL", "LL128", "Simple"};

template <size_t N>
const char* NameFromMask(uint32_t mask, const char* const (&names)[N]) {
  if (mask == 0 || mask == kNetAttrUndefined) return "unknown";
  if (std::popcount(mask) > 1) return "mixed";
  const int bit = std::countr_zero(mask);
  return static_cast<size_t>(bit) < N ? names[bit] : "unknown";
}

}  // namespace

Collective CollectiveFromOpMask(uint32_t op_mask) {
  if (op_mask == 0 || op_mask == kNetAttrUndefined) return Collective::kUnknown;
  if (std::popcount(op_mask) > 1) return Collective::kMixed;
  const int bit = std::countr_zero(op_mask);
  return bit < kNumNcclFuncs ? static_cast<Collective>(bit) : Collective::kUnknown;
}

Collective CollectiveFromName(std::string_view name) {
  if (name == "AlltoAll") return Collective::kAllToAll;  // NCCL's own spelling in profiler descriptors
  for (int i = 0; i < kNumNcclFuncs; ++i) {
    if (name == kFuncNames[i]) return static_cast<Collective>(i);
  }
  return Collective::kUnknown;
}

const char* CollectiveName(Collective c) {
  const auto i = static_cast<int>(c);
  if (i < kNumNcclFuncs) return kFuncNames[i];
  return c == Collective::kMixed ? "mixed" : "unknown";
}

const char* AlgorithmNameFromMask(uint32_t algo_mask) { return NameFromMask(algo_mask, kAlgoNames); }
const char* ProtocolNameFromMask(uint32_t proto_mask) { return NameFromMask(proto_mask, kProtoNames); }

CollectiveAttribution ChooseAttribution(const CollectiveAttribution& profiler, uint32_t net_attr_op,
                                        uint32_t net_attr_algo) {
  if (profiler.source == CollectiveAttribution::Source::kProfiler && profiler.collective != Collective::kUnknown)
    return profiler;
  CollectiveAttribution a;
  a.collective = CollectiveFromOpMask(net_attr_op);
  if (a.collective == Collective::kUnknown) return a;
  a.source = CollectiveAttribution::Source::kNetAttr;
  const char* algo = AlgorithmNameFromMask(net_attr_algo);
  if (std::string_view(algo) != "unknown") a.algorithm = algo;
  return a;
}

}  // namespace ff::sla
