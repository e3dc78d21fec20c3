// The version-independent C++ implementation behind every ncclNet_vN table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl/net_abi.h"
#include "base/status.h"

namespace ff::net {

// The largest message isend takes, and what getProperties reports as maxP2pBytes and maxCollBytes
// (NCCL splits larger transfers); test() reports sizes as int, so it must stay below INT_MAX.
constexpr size_t kMaxMessageSize = size_t{1} << 30;

// Properties common to all table versions; each table copies what its layout has.
struct Properties {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed_mbps;
  int port;  // the RDMA port number with verbs; 0 over TCP
  float latency_us;
  int max_comms;
  int max_recvs;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
};

ncclResult_t ToNcclResult(const Status& s);

Status Init(ncclDebugLogger_t logger);
Status CreateContext(uint64_t comm_id, const ncclNetCommConfig_t* config, void** ctx);
Status Finalize(void* ctx);
Status SetNetAttr(void* ctx, const ncclNetAttr_t* attr);
Status Devices(int* ndev);
Status GetProperties(int dev, Properties* props);
Status Listen(void* ctx, int dev, void* handle, void** listen_comm);
Status Connect(void* ctx, int dev, const ncclNetCommConfig_t* config, void* handle, void** send_comm);
Status Accept(void* listen_comm, void** recv_comm);
Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
Status RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
Status DeregMr(void* comm, void* mhandle);
// `mhandle(s)`: what regMr returned for the buffers (nullptr where none); a handle regMr never
// returned is an error.
Status Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
Status Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
             void** phandles, void** request);
Status Iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request);
Status Test(void* request, int* done, int* sizes);
Status CloseSend(void* send_comm);
Status CloseRecv(void* recv_comm);
Status CloseListen(void* listen_comm);

// Runs `fn` and converts any escaping exception: no exception crosses the C ABI.
template <typename Fn>
ncclResult_t Guard(Fn&& fn) noexcept {
  try {
    return ToNcclResult(fn());
  } catch (const std::bad_alloc&) {
    return ToNcclResult(SystemError("out of memory"));
  } catch (...) {
    return ToNcclResult(InternalError("unexpected exception"));
  }
}

}  // namespace ff::net
