// The exported ncclNetPlugin_v8..v12 tables: thin C shells over ff::net, one per ABI version.
#include <cstring>

#include "plugin/net_api.h"
#include "nccl/net_abi.h"
#include "core/requests.h"

#define FF_EXPORT __attribute__((visibility("default")))

namespace ff::net {
namespace {

template <typename P>
void FillCommon(const Properties& in, P* out) {
  out->name = in.name;
  out->pciPath = in.pci_path;
  out->guid = in.guid;
  out->ptrSupport = in.ptr_support;
  out->regIsGlobal = 0;
  out->speed = in.speed_mbps;
  out->port = in.port;
  out->latency = in.latency_us;
  out->maxComms = in.max_comms;
  out->maxRecvs = in.max_recvs;
  out->netDeviceType = NCCL_NET_DEVICE_HOST;
  out->netDeviceVersion = 0;
}

template <typename P>
void FillV9Plus(const Properties& in, P* out) {
  std::memset(out, 0, sizeof(*out));
  FillCommon(in, out);
  out->forceFlush = 0;
  out->vProps.ndevs = 0;
  out->maxP2pBytes = in.max_p2p_bytes;
  out->maxCollBytes = in.max_coll_bytes;
}

template <typename P>
ncclResult_t GetPropsV9Plus(int dev, P* props) {
  return Guard([&] {
    if (props == nullptr) return InvalidArgument("getProperties: props is NULL");
    Properties p{};
    Status s = GetProperties(dev, &p);
    if (s.ok()) FillV9Plus(p, props);
    return s;
  });
}

ncclResult_t GetPropsV8(int dev, ncclNetProperties_v8_t* props) {
  return Guard([&] {
    if (props == nullptr) return InvalidArgument("getProperties: props is NULL");
    Properties p{};
    Status s = GetProperties(dev, &p);
    if (s.ok()) {
      std::memset(props, 0, sizeof(*props));
      FillCommon(p, props);
    }
    return s;
  });
}

ncclResult_t GetPropsV11(int dev, ncclNetProperties_v11_t* props) {
  ncclResult_t r = GetPropsV9Plus(dev, props);
  if (r == ncclSuccess) props->maxMultiRequestSize = 1;
  return r;
}

ncclResult_t GetPropsV12(int dev, ncclNetProperties_v12_t* props) {
  ncclResult_t r = GetPropsV9Plus(dev, props);
  if (r == ncclSuccess) {
    props->maxMultiRequestSize = 1;
    props->railId = -1;
    props->planeId = -1;
  }
  return r;
}

ncclResult_t InitLegacy(ncclDebugLogger_t logger) { return Guard([&] { return Init(logger); }); }
ncclResult_t InitV10(ncclDebugLogger_t logger, ncclProfilerCallback_t) {
  return Guard([&] { return Init(logger); });
}
ncclResult_t InitV11(void** ctx, uint64_t comm_id, ncclNetCommConfig_t* config, ncclDebugLogger_t logger,
                     ncclProfilerCallback_t) {
  return Guard([&] {
    Status s = Init(logger);
    return s.ok() ? CreateContext(comm_id, config, ctx) : s;
  });
}
ncclResult_t FinalizeV11(void* ctx) { return Guard([&] { return Finalize(ctx); }); }
ncclResult_t SetNetAttrV11(void* ctx, ncclNetAttr_t* attr) { return Guard([&] { return SetNetAttr(ctx, attr); }); }

ncclResult_t DevicesAny(int* ndev) { return Guard([&] { return Devices(ndev); }); }
ncclResult_t ListenLegacy(int dev, void* handle, void** lc) {
  return Guard([&] { return Listen(nullptr, dev, handle, lc); });
}
ncclResult_t ListenV11(void* ctx, int dev, void* handle, void** lc) {
  return Guard([&] { return Listen(ctx, dev, handle, lc); });
}
ncclResult_t ConnectLegacy(int dev, void* handle, void** sc, ncclNetDeviceHandle_t** dc) {
  if (dc) *dc = nullptr;
  return Guard([&] { return Connect(nullptr, dev, nullptr, handle, sc); });
}
ncclResult_t ConnectV10(int dev, ncclNetCommConfig_t* config, void* handle, void** sc, ncclNetDeviceHandle_t** dc) {
  if (dc) *dc = nullptr;
  return Guard([&] { return Connect(nullptr, dev, config, handle, sc); });
}
ncclResult_t ConnectV11(void* ctx, int dev, void* handle, void** sc, ncclNetDeviceHandle_t** dc) {
  if (dc) *dc = nullptr;
  return Guard([&] { return Connect(ctx, dev, nullptr, handle, sc); });
}
ncclResult_t AcceptAny(void* lc, void** rc, ncclNetDeviceHandle_t** dc) {
  if (dc) *dc = nullptr;
  return Guard([&] { return Accept(lc, rc); });
}
ncclResult_t RegMrAny(void* comm, void* data, size_t size, int type, void** mh) {
  return Guard([&] { return RegMr(comm, data, size, type, mh); });
}
ncclResult_t RegMrDmaBufAny(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mh) {
  return Guard([&] { return RegMrDmaBuf(comm, data, size, type, offset, fd, mh); });
}
ncclResult_t DeregMrAny(void* comm, void* mh) { return Guard([&] { return DeregMr(comm, mh); }); }

ncclResult_t IsendV8(void* sc, void* data, int size, int tag, void* mh, void** req) {
  return Guard([&] {
    if (size < 0) return InvalidArgument("isend: negative size " + std::to_string(size));
    return Isend(sc, data, static_cast<size_t>(size), tag, mh, nullptr, req);
  });
}
ncclResult_t IsendV9(void* sc, void* data, size_t size, int tag, void* mh, void** req) {
  return Guard([&] { return Isend(sc, data, size, tag, mh, nullptr, req); });
}
ncclResult_t IsendV10(void* sc, void* data, size_t size, int tag, void* mh, void* ph, void** req) {
  return Guard([&] { return Isend(sc, data, size, tag, mh, ph, req); });
}

ncclResult_t IrecvV8(void* rc, int n, void** data, int* sizes, int* tags, void** mh, void** req) {
  return Guard([&] {
    if (n < 1 || n > kMaxRecvs || sizes == nullptr)
      return InvalidArgument("irecv: n=" + std::to_string(n) + "; accepted 1 to " + std::to_string(kMaxRecvs));
    size_t s[kMaxRecvs];
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) return InvalidArgument("irecv: negative size " + std::to_string(sizes[i]));
      s[i] = static_cast<size_t>(sizes[i]);
    }
    return Irecv(rc, n, data, s, tags, mh, nullptr, req);
  });
}
ncclResult_t IrecvV9(void* rc, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) {
  return Guard([&] { return Irecv(rc, n, data, sizes, tags, mh, nullptr, req); });
}
ncclResult_t IrecvV10(void* rc, int n, void** data, size_t* sizes, int* tags, void** mh, void** ph, void** req) {
  return Guard([&] { return Irecv(rc, n, data, sizes, tags, mh, ph, req); });
}
ncclResult_t IflushAny(void* rc, int n, void** data, int* sizes, void** mhandles, void** req) {
  return Guard([&] { return Iflush(rc, n, data, sizes, mhandles, req); });
}
ncclResult_t TestAny(void* req, int* done, int* sizes) { return Guard([&] { return Test(req, done, sizes); }); }
ncclResult_t CloseSendAny(void* c) { return Guard([&] { return CloseSend(c); }); }
ncclResult_t CloseRecvAny(void* c) { return Guard([&] { return CloseRecv(c); }); }
ncclResult_t CloseListenAny(void* c) { return Guard([&] { return CloseListen(c); }); }
ncclResult_t GetDeviceMrAny(void*, void*, void** dptr) {
  if (dptr) *dptr = nullptr;
  return ncclSuccess;
}
ncclResult_t IrecvConsumedAny(void*, int, void*) { return ncclSuccess; }
template <typename VP>
ncclResult_t MakeVDeviceAny(int*, VP*) {
  return Guard([&] { return InvalidUsage("makeVDevice: virtual NIC fusion is not supported; use FLEXIFORCE_PATHS"); });
}

}  // namespace
}  // namespace ff::net

using namespace ff::net;

extern "C" {

FF_EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    "FlexiForce", InitLegacy, DevicesAny, GetPropsV8, ListenLegacy, ConnectLegacy, AcceptAny, RegMrAny,
    RegMrDmaBufAny, DeregMrAny, IsendV8, IrecvV8, IflushAny, TestAny, CloseSendAny, CloseRecvAny, CloseListenAny,
    GetDeviceMrAny, IrecvConsumedAny};

FF_EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    "FlexiForce", InitLegacy, DevicesAny, GetPropsV9Plus<ncclNetProperties_v9_t>, ListenLegacy, ConnectLegacy,
    AcceptAny, RegMrAny, RegMrDmaBufAny, DeregMrAny, IsendV9, IrecvV9, IflushAny, TestAny, CloseSendAny,
    CloseRecvAny, CloseListenAny, GetDeviceMrAny, IrecvConsumedAny, MakeVDeviceAny<ncclNetVDeviceProps_v9_t>};

FF_EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    "FlexiForce", InitV10, DevicesAny, GetPropsV9Plus<ncclNetProperties_v10_t>, ListenLegacy, ConnectV10,
    AcceptAny, RegMrAny, RegMrDmaBufAny, DeregMrAny, IsendV10, IrecvV10, IflushAny, TestAny, CloseSendAny,
    CloseRecvAny, CloseListenAny, GetDeviceMrAny, IrecvConsumedAny, MakeVDeviceAny<ncclNetVDeviceProps_v10_t>};

FF_EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    "FlexiForce", InitV11, DevicesAny, GetPropsV11, ListenV11, ConnectV11, AcceptAny, RegMrAny, RegMrDmaBufAny,
    DeregMrAny, IsendV10, IrecvV10, IflushAny, TestAny, CloseSendAny, CloseRecvAny, CloseListenAny, GetDeviceMrAny,
    IrecvConsumedAny, MakeVDeviceAny<ncclNetVDeviceProps_v11_t>, FinalizeV11, SetNetAttrV11};

FF_EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
    "FlexiForce", InitV11, DevicesAny, GetPropsV12, ListenV11, ConnectV11, AcceptAny, RegMrAny, RegMrDmaBufAny,
    DeregMrAny, IsendV10, IrecvV10, IflushAny, TestAny, CloseSendAny, CloseRecvAny, CloseListenAny, GetDeviceMrAny,
    IrecvConsumedAny, MakeVDeviceAny<ncclNetVDeviceProps_v12_t>, FinalizeV11, SetNetAttrV11};

}  // extern "C"
