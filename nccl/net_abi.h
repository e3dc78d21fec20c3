// FlexiForce's own declaration of NCCL's network-plugin C ABI (net v8..v12).
// Written from NCCL's documented layout; field order and types must match exactly.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Result codes share values with ncclResult_t in nccl.h.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

// Subsystem flags used with the logger. NCCL drops any line, warnings included, whose flags share no
// bit with NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV); its own warnings pass NCCL_ALL.
enum : unsigned long {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0UL,
};

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                               int64_t pluginId, void* extData);

enum { NCCL_PTR_HOST = 0x1, NCCL_PTR_CUDA = 0x2, NCCL_PTR_DMABUF = 0x4 };
enum { FF_NCCL_NET_HANDLE_MAXSIZE = 128, FF_NCCL_NET_MAX_REQUESTS = 32 };
enum { FF_NCCL_NET_TRAFFIC_CLASS_UNDEF = -1 };

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_t;

// ---- properties ----------------------------------------------------------
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

#define FF_DECLARE_VPROPS(V, N) \
  typedef struct {              \
    int ndevs;                  \
    int devs[N];                \
  } ncclNetVDeviceProps_##V##_t;
FF_DECLARE_VPROPS(v9, 4)
FF_DECLARE_VPROPS(v10, 4)
FF_DECLARE_VPROPS(v11, 4)
FF_DECLARE_VPROPS(v12, 8)
#undef FF_DECLARE_VPROPS

// v9, v10 and v11 share the same property layout apart from the trailing field
// v11 appended; v12 adds rail/plane ids.
#define FF_PROPS_COMMON(V)                 \
  char* name;                              \
  char* pciPath;                           \
  uint64_t guid;                           \
  int ptrSupport;                          \
  int regIsGlobal;                         \
  int forceFlush;                          \
  int speed;                               \
  int port;                                \
  float latency;                           \
  int maxComms;                            \
  int maxRecvs;                            \
  ncclNetDeviceType netDeviceType;         \
  int netDeviceVersion;                    \
  ncclNetVDeviceProps_##V##_t vProps;      \
  size_t maxP2pBytes;                      \
  size_t maxCollBytes;

typedef struct { FF_PROPS_COMMON(v9) } ncclNetProperties_v9_t;
typedef struct { FF_PROPS_COMMON(v10) } ncclNetProperties_v10_t;
typedef struct {
  FF_PROPS_COMMON(v11)
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;
typedef struct {
  FF_PROPS_COMMON(v12)
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} ncclNetProperties_v12_t;
#undef FF_PROPS_COMMON

typedef struct {
  int trafficClass;
} ncclNetCommConfig_t;  // identical in v10, v11, v12

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_t;

typedef struct {
  ncclNetCommAttr_t sendCommAttr;
  ncclNetCommAttr_t recvCommAttr;
  uint32_t op;     // bit mask of (1 << ncclFunc_t), NCCL_NET_ATTR_UNDEF when unknown
  uint32_t algo;   // bit mask of algorithms
  uint32_t proto;  // bit mask of protocols
} ncclNetAttr_t;   // identical in v11 and v12

// ---- tables --------------------------------------------------------------
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

// v11 and v12 differ only in their property and vdevice types.
#define FF_DECLARE_NET_V11_PLUS(V)                                                                       \
  typedef struct {                                                                                       \
    const char* name;                                                                                    \
    ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_t* config,                       \
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);            \
    ncclResult_t (*devices)(int* ndev);                                                                  \
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_##V##_t* props);                            \
    ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);                         \
    ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,                           \
                            ncclNetDeviceHandle_t** sendDevComm);                                        \
    ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);      \
    ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);                \
    ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,  \
                                void** mhandle);                                                         \
    ncclResult_t (*deregMr)(void* comm, void* mhandle);                                                  \
    ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,               \
                          void* phandle, void** request);                                                \
    ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, \
                          void** phandles, void** request);                                              \
    ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,              \
                           void** request);                                                              \
    ncclResult_t (*test)(void* request, int* done, int* sizes);                                          \
    ncclResult_t (*closeSend)(void* sendComm);                                                           \
    ncclResult_t (*closeRecv)(void* recvComm);                                                           \
    ncclResult_t (*closeListen)(void* listenComm);                                                       \
    ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);                         \
    ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);                                 \
    ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_##V##_t* props);                             \
    ncclResult_t (*finalize)(void* ctx);                                                                 \
    ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_t* netAttr);                                       \
  } ncclNet_##V##_t;
FF_DECLARE_NET_V11_PLUS(v11)
FF_DECLARE_NET_V11_PLUS(v12)
#undef FF_DECLARE_NET_V11_PLUS

}  // extern "C"

// NCCL's collective ids (ncclFunc_t), used to decode setNetAttr's op mask.
enum class NcclFunc : int {
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
};
