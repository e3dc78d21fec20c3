// NCCL profiler-plugin tables (v4, v5) exported by the FlexiForce .so: they feed the event pool
// that attributes every network message to its collective.
#include <new>

#include "base/abi_guard.h"
#include "sla/net_event_probe.h"
#include "nccl/profiler_abi.h"
#include "sla/profiler_event_pool.h"

namespace ff::sla {
namespace {

constexpr int kActivationMask = static_cast<int>(ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                                                 ncclProfileProxyStep | ncclProfileNetPlugin);

struct ProfilerContext {
  uint64_t comm_hash = 0;
  int rank = -1;
};

ncclResult_t InitCommon(void** context, int* activation_mask, uint64_t comm_hash, int rank, ncclDebugLogger_t log) {
  if (context == nullptr || activation_mask == nullptr) return ncclInvalidArgument;
  ProfilerEventPool& pool = EnsureGlobalProfilerPool();  // first: if it throws, nothing is leaked
  auto* ctx = new (std::nothrow) ProfilerContext{comm_hash, rank};
  if (ctx == nullptr) return ncclSystemError;  // NCCL then disables the profiler: no attribution, no harm
  *context = ctx;
  *activation_mask = kActivationMask;
  if (log != nullptr) {
    log(NCCL_LOG_INFO, NCCL_INIT | NCCL_PROFILE, __FILE__, __LINE__,
        "FlexiForce profiler: collective attribution on for comm %lx rank %d (event pool %u)",
        static_cast<unsigned long>(comm_hash), rank, pool.Capacity());
  }
  return ncclSuccess;
}

// Shared start logic once the versioned descriptor is translated.
ncclResult_t StartCommon(void** handle, const ProfilerEventInfo& info, int64_t net_id, void* net_data) {
  if (handle == nullptr) return ncclSuccess;
  *handle = nullptr;
  ProfilerEventPool* pool = GlobalProfilerPool();
  if (pool == nullptr) return ncclSuccess;
  if (info.type == ncclProfileNetPlugin && net_id == kFlexiForceNetEventId && net_data != nullptr) {
    auto* probe = static_cast<NetEventProbe*>(net_data);
    if (probe->magic == kNetEventProbeMagic) probe->result = pool->Attribute(info.parent);
    return ncclSuccess;  // an answer, not an event to keep
  }
  *handle = pool->Start(info);
  return ncclSuccess;
}

ncclResult_t Stop(void* handle) {
  if (ProfilerEventPool* pool = GlobalProfilerPool()) pool->Stop(handle);
  return ncclSuccess;
}

ncclResult_t RecordState(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v4_t*) {
  return ncclSuccess;  // attribution needs only the hierarchy, not state transitions
}

ncclResult_t Finalize(void* context) {
  delete static_cast<ProfilerContext*>(context);
  return ncclSuccess;
}

template <typename Coll, typename P2p>
void FillTask(ProfilerEventInfo& info, uint64_t type, const Coll& coll, const P2p& p2p) {
  if (type == ncclProfileColl) {
    info.func = coll.func;
    info.datatype = coll.datatype;
    info.algo = coll.algo;
    info.seq_number = coll.seqNumber;
    info.count = coll.count;
  } else if (type == ncclProfileP2p) {
    info.func = p2p.func;
    info.datatype = p2p.datatype;
    info.count = p2p.count;
    info.peer = p2p.peer;
  }
}

// ---- v4 ----
ncclResult_t InitV4(void** context, int* mask, const char*, uint64_t comm_hash, int, int, int rank,
                    ncclDebugLogger_t log) {
  return InitCommon(context, mask, comm_hash, rank, log);
}

ncclResult_t StartV4(void*, void** handle, ncclProfilerEventDescr_v4_t* d) {
  if (d == nullptr) return ncclSuccess;
  ProfilerEventInfo info;
  info.type = d->type;
  info.parent = d->parentObj;
  info.rank = d->rank;
  FillTask(info, d->type, d->coll, d->p2p);
  if (d->type == ncclProfileProxyOp) {
    info.channel = d->proxyOp.channelId;
    info.is_send = d->proxyOp.isSend;
    info.peer = d->proxyOp.peer;
  } else if (d->type == ncclProfileProxyStep) {
    info.step = d->proxyStep.step;
  }
  const bool net = d->type == ncclProfileNetPlugin;
  return StartCommon(handle, info, net ? d->netPlugin.id : 0, net ? d->netPlugin.data : nullptr);
}

// ---- v5 ----
ncclResult_t InitV5(void** context, uint64_t comm_id, int* mask, const char*, int, int, int rank,
                    ncclDebugLogger_t log) {
  return InitCommon(context, mask, comm_id, rank, log);
}

ncclResult_t StartV5(void*, void** handle, ncclProfilerEventDescr_v5_t* d) {
  if (d == nullptr) return ncclSuccess;
  ProfilerEventInfo info;
  info.type = d->type;
  info.parent = d->parentObj;
  info.rank = d->rank;
  FillTask(info, d->type, d->coll.base, d->p2p.base);
  if (d->type == ncclProfileProxyOp) {
    info.channel = d->proxyOp.channelId;
    info.is_send = d->proxyOp.isSend;
    info.peer = d->proxyOp.peer;
  } else if (d->type == ncclProfileProxyStep) {
    info.step = d->proxyStep.step;
  }
  const bool net = d->type == ncclProfileNetPlugin;
  return StartCommon(handle, info, net ? d->netPlugin.id : 0, net ? d->netPlugin.data : nullptr);
}

// The exported entry points: every one behind the exception barrier, as the net entry points are.
ncclResult_t GuardedInitV4(void** context, int* mask, const char* name, uint64_t comm_hash, int nodes, int ranks,
                           int rank, ncclDebugLogger_t log) {
  return GuardAbi([&] { return InitV4(context, mask, name, comm_hash, nodes, ranks, rank, log); });
}
ncclResult_t GuardedInitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nodes, int ranks,
                           int rank, ncclDebugLogger_t log) {
  return GuardAbi([&] { return InitV5(context, comm_id, mask, name, nodes, ranks, rank, log); });
}
ncclResult_t GuardedStartV4(void* context, void** handle, ncclProfilerEventDescr_v4_t* d) {
  return GuardAbi([&] { return StartV4(context, handle, d); });
}
ncclResult_t GuardedStartV5(void* context, void** handle, ncclProfilerEventDescr_v5_t* d) {
  return GuardAbi([&] { return StartV5(context, handle, d); });
}
ncclResult_t GuardedStop(void* handle) {
  return GuardAbi([&] { return Stop(handle); });
}
ncclResult_t GuardedRecordState(void* handle, ncclProfilerEventState_t state, ncclProfilerEventStateArgs_v4_t* args) {
  return GuardAbi([&] { return RecordState(handle, state, args); });
}
ncclResult_t GuardedFinalize(void* context) {
  return GuardAbi([&] { return Finalize(context); });
}

}  // namespace
}  // namespace ff::sla

extern "C" {

__attribute__((visibility("default"))) ncclProfiler_v4_t ncclProfiler_v4 = {
    "FlexiForce",        ff::sla::GuardedInitV4,      ff::sla::GuardedStartV4,   ff::sla::GuardedStop,
    ff::sla::GuardedRecordState, ff::sla::GuardedFinalize,
};

__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
    "FlexiForce",        ff::sla::GuardedInitV5,      ff::sla::GuardedStartV5,   ff::sla::GuardedStop,
    ff::sla::GuardedRecordState, ff::sla::GuardedFinalize,
};

}  // extern "C"
