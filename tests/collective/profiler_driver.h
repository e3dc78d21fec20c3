// Drives the plugin's ncclProfiler_v5 table the way NCCL 2.28 does, so the net side's collective
// attribution (phandle -> ProxyStep -> ProxyOp -> Coll) is exercised without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl/net_abi.h"
#include "nccl/profiler_abi.h"

namespace ff::collective {

// NCCL_STEPS: NCCL keeps one profiler record per step slot and reuses it modulo this.
inline constexpr int kNcclSteps = 8;

// What NCCL 2.28 hands the net plugin as `phandle` in isend/irecv: a pointer to this record in its
// per-sub proxy arguments (struct ncclProxyEventHandle: the ProxyStep event handle the profiler
// returned, then the owning ncclProxySubArgs). Same member order and types, so the plugin reads it
// exactly as it would read NCCL's.
struct ProxyEventHandle {
  void* stepEventHandle = nullptr;
  void* subArgPtr = nullptr;
};

// One collective as NCCL's profiler describes it.
struct ProfiledCollective {
  NcclFunc func;
  size_t count = 0;            // elements (nccl-tests' per-rank count)
  const char* datatype = "";  // NCCL's name, "ncclInt32"
  int root = 0;
  int send_peer = -1;
  int recv_peer = -1;
  int send_steps = 0;  // isends this rank posts to send_peer
  int recv_steps = 0;
  size_t chunk_bytes = 0;
};

enum class ProxyDir { kSend = 0, kRecv = 1 };

// Call order (NCCL 2.28): init at communicator creation; per collective, Coll start and stop on
// the host thread (hostStreamPlanTask stops task events right after handing the ops to the proxy,
// usually before the proxy thread starts them: the profiler must keep the stopped Coll alive);
// then per direction a ProxyOp with the Coll as parent; per posted step a ProxyStep with the
// ProxyOp as parent, started before isend/irecv; a step stops when test() reports it done, the
// ProxyOp when its last step is done; finalize at communicator destruction.
class ProfilerDriver {
 public:
  ProfilerDriver(const ncclProfiler_v5_t* table, uint64_t comm_id, int nranks, int rank, int window);
  ~ProfilerDriver();
  ProfilerDriver(const ProfilerDriver&) = delete;
  ProfilerDriver& operator=(const ProfilerDriver&) = delete;

  std::string Describe() const;

  void BeginCollective(const ProfiledCollective& c);
  // Starts the ProxyStep event of this direction's next step; returns the phandle for isend/irecv.
  // Until Posted() is called the same step is returned again (isend/irecv said "retry later").
  void* StartStep(ProxyDir dir);
  // isend/irecv accepted the step: records its wait state with the transfer size.
  void Posted(ProxyDir dir, size_t bytes);
  // The step `phandle` belongs to completed (test() said done).
  void StopStep(ProxyDir dir, void* phandle);

  void Finalize();

 private:
  // NCCL's ncclProxySubArgs, reduced to what the profiler path touches.
  struct Sub {
    void* opEventHandle = nullptr;
    int nsteps = 0;
    int posted = 0;
    int done = 0;
    ProxyEventHandle* pending = nullptr;  // started, not yet accepted by isend/irecv
    std::vector<ProxyEventHandle> pHandles;
  };

  void StartProxyOp(Sub& sub, int peer, int nsteps, size_t chunk, bool is_send);
  void Require(ncclResult_t rc, const char* call) const;

  const ncclProfiler_v5_t* table_;
  void* context_ = nullptr;
  int mask_ = 0;
  int rank_;
  uint64_t seq_[11] = {};  // per ncclFunc_t, as comm->seqNumber
  void* coll_handle_ = nullptr;
  Sub subs_[2];
  bool finalized_ = false;
};

const char* NcclFuncString(NcclFunc f);  // ncclFuncToString's spelling: "AllReduce", ...

}  // namespace ff::collective
