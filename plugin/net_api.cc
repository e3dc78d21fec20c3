// Entry-point logic: argument checks, object lookups, and dispatch to listen/connect/communicators.
#include "plugin/net_api.h"

#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <utility>

#include "plugin/connector.h"
#include "plugin/listen_comm.h"
#include "base/logging.h"
#include "plugin/plugin_state.h"
#include "core/recv_comm.h"
#include "core/send_comm.h"
#if FF_WITH_VERBS
#include "verbs/gpu_memory.h"
#include "verbs/rdma_path.h"
#endif

namespace ff::net {
namespace {

#if FF_WITH_VERBS
using verbs::MrCache;
using verbs::MrRef;
using verbs::FlushQp;
using verbs::RdmaDevice;
#else
struct MrCache;
struct MrRef {
  uint64_t id = 0;
};
struct FlushQp {
  static constexpr int kSlots = 1;
};
struct RdmaDevice;
#endif

// An iflush in progress: a 1-byte RDMA READ on the receive comm's flush queue pair (verbs/gpu_memory.h).
// qp == nullptr: nothing to flush, complete at once (one shared object, never freed).
struct FlushRequest : Request {
  FlushQp* qp = nullptr;
  int slot = -1;
};

// Wrapper objects NCCL holds; the magic catches a comm of the wrong kind or a stale pointer.
// Verbs: the registration caches of the ports a connection's QPs use, by key slot (null over TCP).
using Caches = std::array<MrCache*, 4>;

struct SendHandle {
  static constexpr uint32_t kMagic = 0x46465343;
  uint32_t magic = kMagic;
  std::unique_ptr<SendComm> comm;
  Caches mrs{};
};
struct RecvHandle {
  static constexpr uint32_t kMagic = 0x46465243;
  uint32_t magic = kMagic;
  std::unique_ptr<RecvComm> comm;
  Caches mrs{};
  // Verbs: the registrations each outstanding receive's buffers hold until it completes, per key slot
  // (a hit on regMr's registration, which NCCL keeps for the buffer's life; a registration of their
  // own for buffers nobody registered). Fixed slots: nothing allocated per receive.
  struct Held {
    const RecvRequest* req = nullptr;
    int n = 0;
    std::array<std::array<MrRef, 4>, kMaxRecvs> refs{};
  };
  std::array<Held, kMaxRequests> held{};
  // Verbs: the device of the connection's first port, where GPU-buffer flushes run; the flush QP
  // is made at the first iflush that needs one.
  RdmaDevice* flush_dev = nullptr;
#if FF_WITH_VERBS
  std::unique_ptr<FlushQp> flush;
#endif
  std::array<FlushRequest, FlushQp::kSlots> flushes{};
};
struct MemoryRegion {
  static constexpr uint32_t kMagic = 0x46464d52;
  uint32_t magic = kMagic;
  void* data;
  size_t size;
  Caches mrs{};  // verbs: the registrations below belong to these caches, by slot
  std::array<MrRef, 4> refs{};
  bool gpu = false;  // NCCL_PTR_CUDA (by address or DMA-BUF): receives into it need iflush's read
  MemHandle mem;     // what the communicator and the transports see: the bytes, the keys per cache
};

// A handle NCCL passed back: nullptr for none, an error for anything regMr did not return.
Status RegionOf(const char* call, void* mhandle, const MemoryRegion** out) {
  *out = static_cast<const MemoryRegion*>(mhandle);
  if (*out != nullptr && (*out)->magic != MemoryRegion::kMagic)
    return InvalidArgument(std::string(call) + ": not a memory handle returned by regMr");
  return Status::Ok();
}

bool Any(const Caches& c) { return c[0] != nullptr; }

Caches CachesFor(int dev, int npaths) {
  Caches out{};
#if FF_WITH_VERBS
  PluginState& st = PluginState::Get();
  if (st.verbs() && dev >= 0 && dev < st.device_count()) {
    const std::vector<int> slots = st.VerbsSlots(dev, npaths);
    for (size_t k = 0; k < slots.size(); ++k) out[k] = st.verbs_devices()[static_cast<size_t>(slots[k])].rdma->mrs.get();
  }
#else
  (void)dev;
  (void)npaths;
#endif
  return out;
}

RdmaDevice* FirstDevice(int dev, int npaths) {
#if FF_WITH_VERBS
  PluginState& st = PluginState::Get();
  if (st.verbs() && dev >= 0 && dev < st.device_count()) {
    const std::vector<int> slots = st.VerbsSlots(dev, npaths);
    if (!slots.empty()) return st.verbs_devices()[static_cast<size_t>(slots[0])].rdma;
  }
#else
  (void)dev;
  (void)npaths;
#endif
  return nullptr;
}

void ReleaseRefs(const Caches& mrs, std::array<MrRef, 4>& refs) {
#if FF_WITH_VERBS
  for (size_t k = 0; k < 4; ++k)
    if (mrs[k] != nullptr && refs[k].id != 0) (void)mrs[k]->Release(refs[k]);
#else
  (void)mrs;
#endif
  refs = {};
}

void ReleaseHeld(const Caches& mrs, RecvHandle::Held& h) {
  for (int i = 0; i < h.n; ++i) ReleaseRefs(mrs, h.refs[static_cast<size_t>(i)]);
  h = RecvHandle::Held{};
}

#if FF_WITH_VERBS
// One reference per slot's cache on [data, data + size); on failure none is kept.
Status AcquireRefs(const Caches& mrs, void* data, size_t size, std::array<MrRef, 4>* refs) {
  for (size_t k = 0; k < 4 && mrs[k] != nullptr; ++k) {
    Status s = mrs[k]->Acquire(data, size, &(*refs)[k]);
    if (!s.ok()) {
      ReleaseRefs(mrs, *refs);
      return s;
    }
  }
  return Status::Ok();
}

// GPU memory: one exact registration per slot's cache (by address through nvidia-peermem when fd <
// 0, else the DMA-BUF); on failure none is kept.
Status AcquireDeviceRefs(const Caches& mrs, void* data, size_t size, int fd, uint64_t offset,
                         std::array<MrRef, 4>* refs) {
  for (size_t k = 0; k < 4 && mrs[k] != nullptr; ++k) {
    Status s = mrs[k]->AcquireDevice(data, size, fd, offset, &(*refs)[k]);
    if (!s.ok()) {
      ReleaseRefs(mrs, *refs);
      return s;
    }
  }
  return Status::Ok();
}
#endif

FlushRequest g_flush_done = [] {
  FlushRequest r;
  r.kind = RequestKind::kFlush;
  return r;
}();

NetContext* ContextOf(void* ctx) {
  if (ctx == nullptr) return &PluginState::Get().default_context();
  auto* c = static_cast<NetContext*>(ctx);
  return c->magic == NetContext::kMagic ? c : nullptr;
}

Status RequireInit() {
  if (!PluginState::Get().initialized()) return InvalidUsage("the plugin was used before init()");
  return Status::Ok();
}

}  // namespace

Status Init(ncclDebugLogger_t logger) { return PluginState::Get().Init(logger); }

Status CreateContext(uint64_t comm_id, const ncclNetCommConfig_t* config, void** ctx) {
  if (ctx == nullptr) return InvalidArgument("init: ctx pointer is NULL");
  auto* c = new NetContext;
  c->comm_id = comm_id;
  if (config != nullptr) c->traffic_class = config->trafficClass;
  std::memset(&c->attr, 0xff, sizeof(c->attr));
  *ctx = c;
  return Status::Ok();
}

Status Finalize(void* ctx) {
  NetContext* c = static_cast<NetContext*>(ctx);
  if (c == nullptr || c == &PluginState::Get().default_context()) return Status::Ok();
  if (c->magic != NetContext::kMagic) return InvalidArgument("finalize: not a context returned by init");
  DropPendingConnects(c);  // they point at the context, and NCCL will not call connect with it again
  if (PluginState::Get().initialized()) ExpireAbandonedConnects();
  c->magic = 0;
  delete c;
  return Status::Ok();
}

Status SetNetAttr(void* ctx, const ncclNetAttr_t* attr) {
  NetContext* c = ContextOf(ctx);
  if (c == nullptr) return InvalidArgument("setNetAttr: not a context returned by init");
  if (attr == nullptr) return InvalidArgument("setNetAttr: attr is NULL");
  // NCCL calls this from its service thread while the proxy thread classifies messages with the
  // same fields (core/comm.cc): every field is stored, and op/algo read, as an atomic word.
  auto put = [](auto& dst, auto v) { std::atomic_ref(dst).store(v, std::memory_order_relaxed); };
  for (auto [d, a] : {std::pair{&c->attr.sendCommAttr, &attr->sendCommAttr},
                      std::pair{&c->attr.recvCommAttr, &attr->recvCommAttr}}) {
    put(d->maxConcurrentPeers, a->maxConcurrentPeers);
    put(d->minConcurrentPeers, a->minConcurrentPeers);
    put(d->maxFlowsPerPeer, a->maxFlowsPerPeer);
    put(d->minFlowsPerPeer, a->minFlowsPerPeer);
  }
  put(c->attr.proto, attr->proto);
  put(c->attr.algo, attr->algo);
  put(c->attr.op, attr->op);
  return Status::Ok();
}

Status Devices(int* ndev) {
  if (Status s = RequireInit(); !s.ok()) return s;
  if (ndev == nullptr) return InvalidArgument("devices: ndev is NULL");
  *ndev = PluginState::Get().device_count();
  return Status::Ok();
}

Status GetProperties(int dev, Properties* props) {
  if (Status s = RequireInit(); !s.ok()) return s;
  PluginState& st = PluginState::Get();
  if (dev < 0 || dev >= st.device_count())
    return InvalidArgument("getProperties: device " + std::to_string(dev) + " out of range 0.." +
                           std::to_string(st.device_count() - 1));
  props->latency_us = 0;
  props->max_comms = 65536;
  props->max_recvs = kMaxRecvs;
  props->max_p2p_bytes = kMaxMessageSize;
  props->max_coll_bytes = kMaxMessageSize;
  props->ptr_support = NCCL_PTR_HOST;
  if (st.verbs()) {
    const VerbsDevice& v = st.verbs_devices()[static_cast<size_t>(dev)];
    props->ptr_support = v.ptr_support;
    props->name = const_cast<char*>(v.name.c_str());
    props->pci_path = v.pci_path.empty() ? nullptr : const_cast<char*>(v.pci_path.c_str());
    props->guid = v.guid;
    props->speed_mbps = v.speed_mbps;
    props->port = v.port;
    return Status::Ok();
  }
  const auto& d = st.devices()[static_cast<size_t>(dev)];
  props->port = 0;
  props->name = const_cast<char*>(d.name.c_str());
  props->pci_path = d.pci_path.empty() ? nullptr : const_cast<char*>(d.pci_path.c_str());
  uint64_t guid = 1469598103934665603ull;  // FNV of the name: stable across runs, distinct per interface
  for (char ch : d.name) guid = (guid ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  props->guid = guid;
  props->speed_mbps = d.speed_mbps;
  return Status::Ok();
}

Status Listen(void* ctx, int dev, void* handle, void** listen_comm) {
  if (Status s = RequireInit(); !s.ok()) return s;
  ExpireAbandonedConnects();
  NetContext* c = ContextOf(ctx);
  if (c == nullptr) return InvalidArgument("listen: not a context returned by init");
  if (handle == nullptr || listen_comm == nullptr) return InvalidArgument("listen: handle and listenComm must not be NULL");
  std::unique_ptr<ListenComm> lc;
  Status s = ListenComm::Create(c, dev, handle, &lc);
  if (!s.ok()) return s;
  *listen_comm = lc.release();
  return Status::Ok();
}

Status Connect(void* ctx, int dev, const ncclNetCommConfig_t* config, void* handle, void** send_comm) {
  if (Status s = RequireInit(); !s.ok()) return s;
  if (send_comm == nullptr) return InvalidArgument("connect: sendComm must not be NULL");
  *send_comm = nullptr;
  NetContext* c = ContextOf(ctx);
  if (c == nullptr) return InvalidArgument("connect: not a context returned by init");
  if (handle == nullptr) return InvalidArgument("connect: handle must not be NULL");
  std::unique_ptr<SendComm> comm;
  Status s = ConnectStep(c, config ? config->trafficClass : FF_NCCL_NET_TRAFFIC_CLASS_UNDEF, dev, handle, &comm);
  // A peer's failure is otherwise logged by the communicator it failed; before one exists (the
  // listener gone, refused, a timeout) nobody else would say why connect returned an error.
  if (s.code() == ErrorCode::kRemote) FF_WARN("connect: %s", s.message().c_str());
  if (!s.ok() || !comm) return s;
  auto* h = new SendHandle;
  h->comm = std::move(comm);
  h->mrs = CachesFor(dev, h->comm->path_count());
  h->comm->owner = h;
  *send_comm = h;
  return Status::Ok();
}

Status Accept(void* listen_comm, void** recv_comm) {
  if (recv_comm == nullptr) return InvalidArgument("accept: recvComm must not be NULL");
  *recv_comm = nullptr;
  auto* lc = static_cast<ListenComm*>(listen_comm);
  if (lc == nullptr || lc->magic != ListenComm::kMagic) return InvalidArgument("accept: not a listen comm");
  std::unique_ptr<RecvComm> comm;
  Status s = lc->Accept(&comm);
  if (s.code() == ErrorCode::kRemote) FF_WARN("accept: %s", s.message().c_str());
  if (!s.ok() || !comm) return s;
  auto* h = new RecvHandle;
  h->comm = std::move(comm);
  h->mrs = CachesFor(lc->dev(), h->comm->path_count());
  h->flush_dev = FirstDevice(lc->dev(), h->comm->path_count());
  h->comm->owner = h;
  *recv_comm = h;
  return Status::Ok();
}

namespace {

const char* PtrTypeName(int type) {
  return type == NCCL_PTR_HOST ? "NCCL_PTR_HOST" : type == NCCL_PTR_CUDA ? "NCCL_PTR_CUDA" : "NCCL_PTR_DMABUF";
}

// regMr and regMrDmaBuf: `fd` < 0 registers by address.
Status Register(const char* call, void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                void** mhandle) {
  const std::string c = call;
  if (comm == nullptr) return InvalidArgument(c + ": comm is NULL");
  if (mhandle == nullptr) return InvalidArgument(c + ": mhandle is NULL");
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA)
    return InvalidArgument(c + ": memory type " + std::to_string(type) +
                           " unsupported; accepted NCCL_PTR_HOST (1) or NCCL_PTR_CUDA (2)");
  // A send or a receive comm (NCCL registers on both); the magic says which.
  Caches mrs{};
  const uint32_t magic = *static_cast<const uint32_t*>(comm);
  if (magic == SendHandle::kMagic) mrs = static_cast<SendHandle*>(comm)->mrs;
  else if (magic == RecvHandle::kMagic) mrs = static_cast<RecvHandle*>(comm)->mrs;
  else return InvalidArgument(c + ": not a send or receive comm");
  // GPU memory and DMA-BUFs only over verbs: the NIC reads and writes them itself, where TCP would
  // need the CPU to touch them (its devices report ptrSupport NCCL_PTR_HOST, so NCCL never asks).
  if ((type == NCCL_PTR_CUDA || fd >= 0) && !Any(mrs))
    return InvalidArgument(c + ": " + PtrTypeName(type) + (fd >= 0 ? " DMA-BUF" : "") +
                           " memory needs the RDMA verbs transport (GPUDirect RDMA); this connection is TCP, "
                           "which carries host memory only (ptrSupport NCCL_PTR_HOST)");
  auto region = std::make_unique<MemoryRegion>();
  region->data = data;
  region->size = size;
  region->mrs = mrs;
  region->gpu = type == NCCL_PTR_CUDA;
  region->mem.data = static_cast<const char*>(data);
  region->mem.size = size;
  region->mem.type = type;
#if FF_WITH_VERBS
  // Verbs: pin and register now, on every port the connection uses (NCCL calls this outside the data
  // path); every later send of, or receive into, this buffer finds the registration in the cache.
  if (Any(mrs) && size > 0) {
    if (data == nullptr) return InvalidArgument(c + ": data is NULL with size " + std::to_string(size));
    Status s = type == NCCL_PTR_CUDA || fd >= 0 ? AcquireDeviceRefs(mrs, data, size, fd, offset, &region->refs)
                                                : AcquireRefs(mrs, data, size, &region->refs);
    if (!s.ok()) return Status(s.code(), c + ": " + s.message());
    // Each cache is a key domain: the sender's path on that port takes its local key from here.
    // The registration may be larger than the buffer (page-rounded, or shared): the handle covers
    // exactly what NCCL registered.
    for (size_t k = 0; k < 4 && mrs[k] != nullptr; ++k)
      region->mem.keys[k] = MemKey{mrs[k], region->refs[k].handle.lkey, region->refs[k].handle.rkey};
  }
#else
  (void)offset;
#endif
  *mhandle = region.release();
  return Status::Ok();
}

}  // namespace

Status RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return Register("regMr", comm, data, size, type, 0, -1, mhandle);
}

Status RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  // fd -1 is a plain registration (NCCL's own transports treat it so).
  if (fd < -1) return InvalidArgument("regMrDmaBuf: fd " + std::to_string(fd) + " is not a file descriptor (or -1)");
  return Register("regMrDmaBuf", comm, data, size, type, offset, fd, mhandle);
}

Status DeregMr(void*, void* mhandle) {
  auto* region = static_cast<MemoryRegion*>(mhandle);
  if (region == nullptr) return Status::Ok();
  if (region->magic != MemoryRegion::kMagic)
    return InvalidArgument("deregMr: not a memory handle returned by regMr");
  ReleaseRefs(region->mrs, region->refs);
  region->magic = 0;
  delete region;
  return Status::Ok();
}

Status Isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  auto* h = static_cast<SendHandle*>(send_comm);
  if (h == nullptr || h->magic != SendHandle::kMagic) return InvalidArgument("isend: not a send comm");
  if (request == nullptr) return InvalidArgument("isend: request must not be NULL");
  // What getProperties promises NCCL (maxP2pBytes, maxCollBytes); test() reports sizes as int.
  if (size > kMaxMessageSize)
    return InvalidArgument("isend: size " + std::to_string(size) + " above the largest message, " +
                           std::to_string(kMaxMessageSize) + " bytes (maxP2pBytes/maxCollBytes)");
  const MemoryRegion* region = nullptr;
  if (Status s = RegionOf("isend", mhandle, &region); !s.ok()) return s;
  SendRequest* r = nullptr;
  Status s = h->comm->Isend(data, size, tag, phandle, &r, region != nullptr ? &region->mem : nullptr);
  *request = r;
  return s;
}

Status Irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles, void**,
             void** request) {
  // With verbs each buffer's remote keys come from its memory handle when NCCL passed one that
  // covers it (regMr's registration, held until deregMr); else from the device's cache (which also
  // serves buffers NCCL never registered).
  auto* h = static_cast<RecvHandle*>(recv_comm);
  if (h == nullptr || h->magic != RecvHandle::kMagic) return InvalidArgument("irecv: not a receive comm");
  if (n < 1 || n > kMaxRecvs)
    return InvalidArgument("irecv: n=" + std::to_string(n) + " (accepted 1 to " + std::to_string(kMaxRecvs) + ")");
  if (data == nullptr || sizes == nullptr || tags == nullptr || request == nullptr)
    return InvalidArgument("irecv: data, sizes, tags and request must not be NULL");
  uint64_t s64[kMaxRecvs];
  for (int i = 0; i < n; ++i) s64[i] = sizes[i];
  RecvRequest* r = nullptr;
  if (!Any(h->mrs)) {
    Status s = h->comm->Irecv(n, data, s64, tags, &r);
    *request = r;
    return s;
  }
#if FF_WITH_VERBS
  // Verbs: the sender writes into these buffers itself, so each needs its address and remote key
  // published; the request holds a reference on each buffer's registration until it completes. (A
  // retry-later answer releases them again: a hit in the cache for buffers regMr registered, as
  // NCCL's are; a registration each time for buffers nobody registered.)
  RecvHandle::Held* slot = nullptr;
  for (auto& held : h->held)
    if (held.req == nullptr) {
      slot = &held;
      break;
    }
  if (slot == nullptr) {  // every request slot in use: retry later, as the core would say
    *request = nullptr;
    return Status::Ok();
  }
  RecvHandle::Held mine;
  mine.n = n;
  std::array<uint32_t, 4> rkeys[kMaxRecvs] = {};
  for (int i = 0; i < n; ++i) {
    if (sizes[i] == 0 || data[i] == nullptr) continue;
    const MemoryRegion* region = nullptr;
    if (mhandles != nullptr) {
      Status s = RegionOf("irecv", mhandles[i], &region);
      if (!s.ok()) {
        ReleaseHeld(h->mrs, mine);
        return s;
      }
    }
    if (region != nullptr && region->mrs == h->mrs && region->mem.Covers(data[i], sizes[i])) {
      for (size_t k = 0; k < 4; ++k) rkeys[i][k] = region->refs[k].handle.rkey;
      continue;  // nothing held: NCCL keeps the buffer registered until the receive completed
    }
    auto& refs = mine.refs[static_cast<size_t>(i)];
    Status s = AcquireRefs(h->mrs, data[i], sizes[i], &refs);
    if (!s.ok()) {
      ReleaseHeld(h->mrs, mine);
      return s;
    }
    for (size_t k = 0; k < 4; ++k) rkeys[i][k] = refs[k].handle.rkey;
  }
  Status s = h->comm->Irecv(n, data, s64, tags, &r, rkeys);
  if (!s.ok() || r == nullptr) {
    ReleaseHeld(h->mrs, mine);
    *request = nullptr;
    return s;
  }
  mine.req = r;
  *slot = mine;
  *request = r;
  return Status::Ok();
#else
  return InternalError("irecv: a registration cache without the verbs backend");
#endif
}

Status Iflush(void* recv_comm, int n, void** data, const int* sizes, void** mhandles, void** request) {
  auto* h = static_cast<RecvHandle*>(recv_comm);
  if (h == nullptr || h->magic != RecvHandle::kMagic) return InvalidArgument("iflush: not a receive comm");
  if (request == nullptr) return InvalidArgument("iflush: request is NULL");
  // Only a receive into GPU memory needs a flush: the NIC's writes must be visible to the GPU before
  // its kernel reads them. Host memory is coherent: a request that is already complete.
  int last = -1;
  const MemoryRegion* region = nullptr;
  if (data != nullptr && mhandles != nullptr)
    for (int i = 0; i < n && i < kMaxRecvs; ++i) {
      const auto* m = static_cast<const MemoryRegion*>(mhandles[i]);
      if (m != nullptr && m->magic != MemoryRegion::kMagic)
        return InvalidArgument("iflush: mhandles[" + std::to_string(i) + "] is not a memory handle returned by regMr");
      if (m == nullptr || !m->gpu || data[i] == nullptr || (sizes != nullptr && sizes[i] <= 0)) continue;
      last = i;
      region = m;
    }
  if (last < 0 || h->flush_dev == nullptr) {
    *request = &g_flush_done;
    return Status::Ok();
  }
#if FF_WITH_VERBS
  if (!h->flush) {
    Status s = FlushQp::Create(*h->flush_dev, &h->flush);
    if (!s.ok()) return s;
  }
  // One read of one byte of the last buffer: it completes only after every earlier write of this
  // NIC to the GPU is visible (PCIe ordering), which covers the group's other buffers too.
  int slot = -1;
  Status error;
  if (!h->flush->Post(reinterpret_cast<uintptr_t>(data[last]), region->refs[0].handle.rkey, &slot, &error)) {
    *request = nullptr;  // every flush slot busy: retry later, as NCCL does for a NULL request
    return error;
  }
  FlushRequest& r = h->flushes[static_cast<size_t>(slot)];
  r.kind = RequestKind::kFlush;
  r.comm = nullptr;
  r.qp = h->flush.get();
  r.slot = slot;
  *request = &r;
  return Status::Ok();
#else
  *request = &g_flush_done;
  return Status::Ok();
#endif
}

Status Test(void* request, int* done, int* sizes) {
  if (request == nullptr) return InvalidArgument("test: request is NULL");
  if (done == nullptr) return InvalidArgument("test: done must not be NULL");
  auto* base = static_cast<Request*>(request);
  switch (base->kind) {
    case RequestKind::kFlush: {
      auto* f = static_cast<FlushRequest*>(base);
      if (f->qp == nullptr) {
        *done = 1;
        return Status::Ok();
      }
#if FF_WITH_VERBS
      bool finished = false;
      Status s = f->qp->Test(f->slot, &finished);
      if (finished) {
        f->kind = RequestKind::kFree;
        f->qp = nullptr;
        *done = 1;
        if (sizes) *sizes = 0;
      }
      return s;
#else
      return InternalError("test: a flush request without the verbs backend");
#endif
    }
    case RequestKind::kSend: {
      auto* comm = static_cast<SendComm*>(base->comm);
      uint64_t size = 0;
      Status s = comm->Test(static_cast<SendRequest*>(base), done, &size);
      if (s.ok() && *done && sizes) *sizes = static_cast<int>(std::min<uint64_t>(size, INT_MAX));
      return s;
    }
    case RequestKind::kRecv: {
      auto* r = static_cast<RecvRequest*>(base);
      auto* comm = static_cast<RecvComm*>(base->comm);
      const int n = r->n;
      uint64_t s64[kMaxRecvs];
      Status s = comm->Test(r, done, s64);
      if (s.ok() && *done && sizes)
        for (int i = 0; i < n; ++i) sizes[i] = static_cast<int>(std::min<uint64_t>(s64[i], INT_MAX));
      if (s.ok() && *done) {
        // The request is complete (and already back in the pool): its buffers' registrations go.
        auto* h = static_cast<RecvHandle*>(comm->owner);
        if (h != nullptr && Any(h->mrs))
          for (auto& held : h->held)
            if (held.req == r) ReleaseHeld(h->mrs, held);
      }
      return s;
    }
    case RequestKind::kFree:
      return InvalidUsage("test: request already completed or never issued");
  }
  return InvalidUsage("test: unknown request");
}

Status CloseSend(void* send_comm) {
  auto* h = static_cast<SendHandle*>(send_comm);
  if (h == nullptr) return Status::Ok();
  if (h->magic != SendHandle::kMagic) return InvalidArgument("closeSend: not a send comm");
  // Eager sends completed before the receiver had them: let it finish before the sockets close.
  h->comm->DrainForClose(std::min<uint64_t>(uint64_t(PluginState::Get().config().peer_timeout_ms), 5000) * 1'000'000);
  h->magic = 0;
  delete h;
  return Status::Ok();
}

Status CloseRecv(void* recv_comm) {
  auto* h = static_cast<RecvHandle*>(recv_comm);
  if (h == nullptr) return Status::Ok();
  if (h->magic != RecvHandle::kMagic) return InvalidArgument("closeRecv: not a receive comm");
  h->magic = 0;
  // Bounded: a dead sender never completes what was posted to it (its queue pair's retries do, later).
  h->comm->AcknowledgeBeforeClose(std::min<uint64_t>(uint64_t(PluginState::Get().config().peer_timeout_ms), 1000) *
                                  1'000'000);
  // The queue pairs go with the comm first, so no write can land once the registrations are released.
  const Caches mrs = h->mrs;
  h->comm.reset();
  if (Any(mrs))
    for (auto& held : h->held)
      if (held.req != nullptr) ReleaseHeld(mrs, held);
  delete h;
  return Status::Ok();
}

Status CloseListen(void* listen_comm) {
  auto* lc = static_cast<ListenComm*>(listen_comm);
  if (lc == nullptr) return Status::Ok();
  if (lc->magic != ListenComm::kMagic) return InvalidArgument("closeListen: not a listen comm");
  lc->magic = 0;
  delete lc;
  ExpireAbandonedConnects();
  return Status::Ok();
}

}  // namespace ff::net
