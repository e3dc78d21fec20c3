// The memory registration cache: page-rounded ranges, reference-counted, shared by the threads NCCL
// calls regMr/deregMr from (service thread) and sends from (proxy thread). Registering is slow (it
// pins pages), so a buffer registered once is reused by every later request it covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "verbs/ibverbs_loader.h"

namespace ff::verbs {

// What a registration yields; `opaque` is the backend's object (an ibv_mr* for verbs).
struct MrHandle {
  void* opaque = nullptr;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// The seam to the device: the verbs backend passes ibv_reg_mr/ibv_dereg_mr on its PD; tests pass fakes.
struct MrRegistrar {
  std::function<Status(uintptr_t start, size_t length, MrHandle* out)> reg;
  std::function<void(const MrHandle& handle)> dereg;
  // GPU memory (optional; an empty function refuses it). `fd` < 0: a CUDA buffer registered by its
  // address (ibv_reg_mr through nvidia-peermem); else a DMA-BUF file descriptor and the buffer's
  // offset in it (ibv_reg_dmabuf_mr), mapped at iova `start`. Both also allow remote READ: the
  // receiver's flush (iflush) reads its own GPU buffer over a loopback queue pair.
  std::function<Status(uintptr_t start, size_t length, int fd, uint64_t offset, MrHandle* out)> reg_device;
};

// The device registrar: ibv_reg_mr on `pd` with `access`, ibv_dereg_mr on release; GPU memory with
// ibv_reg_mr / ibv_reg_dmabuf_mr and `access` | remote read. `ib` and `pd` must outlive the cache.
MrRegistrar VerbsRegistrar(const IbverbsLoader& ib, ibv_pd* pd, int access);

// One acquired registration: pass it back to Release exactly once.
struct MrRef {
  uint64_t id = 0;  // 0: none
  uintptr_t start = 0;
  size_t length = 0;
  MrHandle handle;
};

class MrCache {
 public:
  // page_size: a power of two (sysconf(_SC_PAGESIZE) when 0).
  MrCache(MrRegistrar registrar, size_t page_size = 0);
  // Deregisters whatever is still cached (NCCL may close without deregistering).
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // A registration covering [addr, addr + length): an existing one when some entry covers the
  // page-rounded range, else a new one of exactly that range. A range that only partly overlaps
  // cached ones gets its own entry: entries in use cannot be grown or merged.
  // The covering test uses the exact bytes asked for, so a GPU entry (registered exactly, see
  // AcquireDevice) serves the host-style lookups the data path makes by address.
  Status Acquire(const void* addr, size_t length, MrRef* out);
  // GPU memory (regMr with NCCL_PTR_CUDA, regMrDmaBuf): a registration of exactly [addr, addr +
  // length) through the registrar's reg_device (never page-rounded: the bytes around a DMA-BUF range
  // are not ours to map), shared with any entry that already covers the range.
  Status AcquireDevice(const void* addr, size_t length, int fd, uint64_t offset, MrRef* out);
  // Drops one reference; the last one deregisters. Unknown or already released refs are an error.
  Status Release(const MrRef& ref);

  size_t entries() const;
  size_t page_size() const { return page_size_; }

 private:
  struct Entry {
    uint64_t id;
    uintptr_t start;
    uintptr_t end;  // exclusive
    MrHandle handle;
    int refs;
    bool device;  // GPU memory (AcquireDevice)
  };
  // A covering entry gets one more reference; under mu_.
  bool Share(uintptr_t start, uintptr_t end, MrRef* out);

  MrRegistrar registrar_;
  size_t page_size_;
  mutable std::mutex mu_;
  // Every registrar call runs under mu_: two threads asking for the same buffer must not pin it
  // twice, the registrar need not be thread-safe, and regMr is not on the data path, so serialising
  // it costs the proxy thread nothing.
  std::vector<Entry> entries_;  // few (one per NCCL buffer); a scan beats a tree at this size
  uint64_t next_id_ = 1;
};

}  // namespace ff::verbs
