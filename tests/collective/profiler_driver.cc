// ProfilerDriver: NCCL 2.28's profiler call sequence (profiler.cc, proxy.cc, transport/net.cc) on host buffers.
#include "tests/collective/profiler_driver.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "tests/collective/abort_context.h"
#include "cli/plugin_loader.h"

namespace ff::collective {

const char* NcclFuncString(NcclFunc f) {
  switch (f) {
    case NcclFunc::kBroadcast: return "Broadcast";
    case NcclFunc::kReduce: return "Reduce";
    case NcclFunc::kAllGather: return "AllGather";
    case NcclFunc::kReduceScatter: return "ReduceScatter";
    case NcclFunc::kAllReduce: return "AllReduce";
    case NcclFunc::kSendRecv: return "SendRecv";
    case NcclFunc::kSend: return "Send";
    case NcclFunc::kRecv: return "Recv";
    case NcclFunc::kAllToAll: return "AllToAll";
    case NcclFunc::kScatter: return "Scatter";
    case NcclFunc::kGather: return "Gather";
  }
  return "Unknown";
}

ProfilerDriver::ProfilerDriver(const ncclProfiler_v5_t* table, uint64_t comm_id, int nranks, int rank, int window)
    : table_(table), rank_(rank) {
  // NCCL never has more than NCCL_STEPS steps in flight; a deeper driver window gets more slots
  // so that a slot is never reused while its step is live.
  const size_t slots = static_cast<size_t>(std::max(kNcclSteps, window));
  for (auto& s : subs_) s.pHandles.resize(slots);
  const std::string name = "ff-collective";
  Require(table_->init(&context_, comm_id, &mask_, name.c_str(), nranks, nranks, rank, ff::testing::StderrLogger),
          "init");
}

ProfilerDriver::~ProfilerDriver() = default;

void ProfilerDriver::Require(ncclResult_t rc, const char* call) const {
  // NCCL ignores the profiler's return codes on events; init failing disables the profiler.
  // A test driver should notice any of them.
  if (rc != ncclSuccess) {
    throw DriverError(std::string("profiler ") + (table_->name ? table_->name : "?") + " " + call + "() returned " +
                      std::to_string(rc));
  }
}

std::string ProfilerDriver::Describe() const {
  return std::string("profiler ") + (table_->name ? table_->name : "?") + " v5, mask 0x" + [this] {
    char b[16];
    std::snprintf(b, sizeof b, "%x", static_cast<unsigned>(mask_));
    return std::string(b);
  }();
}

void ProfilerDriver::BeginCollective(const ProfiledCollective& c) {
  const auto fi = static_cast<size_t>(c.func);
  // ncclProfilerStartTaskEvents: a Coll event when any event under it is wanted.
  coll_handle_ = nullptr;
  if (mask_ & (ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh |
               ncclProfileNetPlugin)) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileColl;
    d.parentObj = nullptr;  // the CollApi event, not activated by a mask without ncclProfileCollApi
    d.rank = rank_;
    d.coll.parentGroup = nullptr;
    d.coll.base.seqNumber = seq_[fi];
    d.coll.base.func = NcclFuncString(c.func);
    d.coll.base.count = c.count;
    d.coll.base.root = c.root;
    d.coll.base.datatype = c.datatype;
    d.coll.base.nChannels = 1;
    d.coll.base.nWarps = 16;
    d.coll.base.algo = "Ring";
    d.coll.base.proto = "Simple";
    Require(table_->startEvent(context_, &coll_handle_, &d), "startEvent(Coll)");
  }
  ++seq_[fi];  // NCCL bumps it whether or not a profiler is loaded
  // ncclProxyStart hands the ops to the proxy thread, then ncclProfilerStopTaskEvents.
  if (coll_handle_ != nullptr) Require(table_->stopEvent(coll_handle_), "stopEvent(Coll)");
  // The proxy thread's ProxyAppend -> ncclProfilerStartProxyOpEvent, one per sub (direction).
  StartProxyOp(subs_[0], c.send_peer, c.send_steps, c.chunk_bytes, true);
  StartProxyOp(subs_[1], c.recv_peer, c.recv_steps, c.chunk_bytes, false);
}

void ProfilerDriver::StartProxyOp(Sub& sub, int peer, int nsteps, size_t chunk, bool is_send) {
  if (sub.opEventHandle != nullptr) {
    // The previous collective's op never finished (an error path): NCCL would not start a new one.
    Require(table_->stopEvent(sub.opEventHandle), "stopEvent(ProxyOp)");
  }
  sub.opEventHandle = nullptr;
  sub.nsteps = nsteps;
  sub.posted = sub.done = 0;
  sub.pending = nullptr;
  if (nsteps == 0) return;  // no proxy op for a direction without transfers (Broadcast's ends)
  if ((mask_ & (ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin)) == 0) return;
  ncclProfilerEventDescr_v5_t d{};
  d.type = ncclProfileProxyOp;
  d.parentObj = coll_handle_;
  d.rank = rank_;
  d.proxyOp.pid = getpid();
  d.proxyOp.channelId = 0;
  d.proxyOp.peer = peer;
  d.proxyOp.nSteps = nsteps;
  d.proxyOp.chunkSize = static_cast<int>(chunk);
  d.proxyOp.isSend = is_send ? 1 : 0;
  Require(table_->startEvent(context_, &sub.opEventHandle, &d), "startEvent(ProxyOp)");
}

void* ProfilerDriver::StartStep(ProxyDir dir) {
  Sub& sub = subs_[static_cast<int>(dir)];
  if (sub.pending != nullptr) return sub.pending;
  const int step = sub.posted++;
  ProxyEventHandle& ph = sub.pHandles[static_cast<size_t>(step) % sub.pHandles.size()];
  ph.stepEventHandle = nullptr;
  if (mask_ & (ncclProfileProxyStep | ncclProfileNetPlugin)) {
    ncclProfilerEventDescr_v5_t d{};
    d.type = ncclProfileProxyStep;
    d.parentObj = sub.opEventHandle;
    d.rank = rank_;
    d.proxyStep.step = step;
    Require(table_->startEvent(context_, &ph.stepEventHandle, &d), "startEvent(ProxyStep)");
  }
  ph.subArgPtr = &sub;
  sub.pending = &ph;
  return &ph;
}

void ProfilerDriver::Posted(ProxyDir dir, size_t bytes) {
  Sub& sub = subs_[static_cast<int>(dir)];
  ProxyEventHandle* ph = sub.pending;
  sub.pending = nullptr;
  if (ph == nullptr || ph->stepEventHandle == nullptr) return;
  ncclProfilerEventStateArgs_v5_t a{};
  a.proxyStep.transSize = bytes;
  const auto state = dir == ProxyDir::kSend ? ncclProfilerProxyStepSendWait : ncclProfilerProxyStepRecvWait;
  Require(table_->recordEventState(ph->stepEventHandle, state, &a), "recordEventState(ProxyStep)");
}

void ProfilerDriver::StopStep(ProxyDir dir, void* phandle) {
  Sub& sub = subs_[static_cast<int>(dir)];
  auto* ph = static_cast<ProxyEventHandle*>(phandle);
  if (ph->stepEventHandle != nullptr) {
    Require(table_->stopEvent(ph->stepEventHandle), "stopEvent(ProxyStep)");
    ph->stepEventHandle = nullptr;
  }
  if (++sub.done == sub.nsteps && sub.opEventHandle != nullptr) {
    Require(table_->stopEvent(sub.opEventHandle), "stopEvent(ProxyOp)");
    sub.opEventHandle = nullptr;
  }
}

void ProfilerDriver::Finalize() {
  if (finalized_) return;
  finalized_ = true;
  Require(table_->finalize(context_), "finalize");
  context_ = nullptr;
}

}  // namespace ff::collective
