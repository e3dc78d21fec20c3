// GPU memory over verbs (GPUDirect RDMA): what a device can register, and the receiver's flush.
//
// NCCL learns from getProperties' ptrSupport which buffers it may hand the plugin:
//   - NCCL_PTR_CUDA: a CUDA buffer registered by address with ibv_reg_mr. The NIC can pin GPU memory
//     only through the nvidia-peermem kernel module (older: nv_peer_mem), so it is reported only
//     where that module is loaded (PeerMemLoaded);
//   - NCCL_PTR_DMABUF: a DMA-BUF file descriptor of the buffer, registered with ibv_reg_dmabuf_mr
//     (rdma-core >= 34 and a provider and kernel that implement it: DmabufSupported asks the device).
//
// After a receive lands in GPU memory, NCCL calls iflush before the GPU reads it: the NIC's writes
// may still sit in PCIe buffers, not yet visible to the GPU. An RDMA READ from that buffer, issued on
// a queue pair connected to itself, completes only after every earlier write to it is visible: that
// is FlushQp. Host memory needs no flush.
#pragma once

#include <infiniband/verbs.h>  // types only

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "verbs/verbs_owners.h"

namespace ff::verbs {

struct RdmaDevice;

// ibv_reg_dmabuf_mr exists in the library and the provider implements it: a probe registration of
// fd -1 fails with EBADF-like errors where it is implemented and EOPNOTSUPP / EPROTONOSUPPORT where
// not. A probe that unexpectedly succeeds is deregistered and counts as support.
bool DmabufSupported(const IbverbsLoader& ib, ibv_pd* pd);

// nvidia-peermem (or the older nv_peer_mem) is loaded: its version file exists under `sysfs_root`
// ("/" on a host; a fixture tree in tests).
bool PeerMemLoaded(const std::string& sysfs_root = "/");

// One loopback RC queue pair per receive connection that needs flushes, on the device of the
// connection's first port. Single-threaded (NCCL's proxy thread), like the receive comm it serves.
class FlushQp {
 public:
  static constexpr int kSlots = 32;  // flushes outstanding at once (NCCL_NET_MAX_REQUESTS)

  // CQ, QP and a registered 8-byte scratch; the QP is taken to RTS against itself. `dev` must
  // outlive the FlushQp.
  static Status Create(RdmaDevice& dev, std::unique_ptr<FlushQp>* out);
  ~FlushQp();
  FlushQp(const FlushQp&) = delete;
  FlushQp& operator=(const FlushQp&) = delete;

  // Posts a 1-byte RDMA READ of `addr` (registered with remote read under `rkey`) and returns its
  // slot in *slot; false with *slot -1 when every slot is busy (retry later), false with an error
  // in *error when the post failed.
  bool Post(uint64_t addr, uint32_t rkey, int* slot, Status* error);
  // Reaps completions; true once `slot`'s read completed (the slot is free again afterwards). A
  // failed read is an error naming the device and the completion status.
  Status Test(int slot, bool* done);

  uint32_t qpn() const;
  int busy() const { return busy_; }

 private:
  explicit FlushQp(RdmaDevice& dev);
  Status Init();
  Status Reap();

  RdmaDevice& dev_;
  CqOwner cq_;
  QpOwner qp_;
  std::unique_ptr<uint64_t> scratch_;
  MrOwner scratch_mr_;
  // Per slot: 0 free, 1 posted, 2 completed (not yet tested), 3 failed.
  std::array<uint8_t, kSlots> state_{};
  std::array<ibv_wc_status, kSlots> status_{};
  int busy_ = 0;
};

}  // namespace ff::verbs
