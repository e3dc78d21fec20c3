// FlexiForce's own declaration of NCCL's profiler-plugin C ABI, versions 4 (NCCL 2.27) and 5 (2.28+).
// Written from NCCL's documented layout (plugins/profiler/README.md); member order and types
// must match NCCL exactly, since NCCL reads these structs by offset.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "nccl/net_abi.h"  // ncclResult_t, ncclDebugLogger_t (shared with the net ABI)

extern "C" {

// Event type bits; a plugin's init returns the OR of the ones it wants (eActivationMask).
enum : uint64_t {
  ncclProfileGroup = 1u << 0,
  ncclProfileColl = 1u << 1,
  ncclProfileP2p = 1u << 2,
  ncclProfileProxyOp = 1u << 3,
  ncclProfileProxyStep = 1u << 4,
  ncclProfileProxyCtrl = 1u << 5,
  ncclProfileKernelCh = 1u << 6,
  ncclProfileNetPlugin = 1u << 7,
  ncclProfileGroupApi = 1u << 8,      // v5
  ncclProfileCollApi = 1u << 9,       // v5
  ncclProfileP2pApi = 1u << 10,       // v5
  ncclProfileKernelLaunch = 1u << 11, // v5
};

// State transitions passed to recordEventState (one enum for v4 and v5; values are NCCL's).
typedef enum {
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,  // v5
  ncclProfilerGroupEndApiStart = 24,   // v5
} ncclProfilerEventState_t;

// Payloads shared by v4 and v5 (same members in the same order).
typedef struct {
  uint64_t seqNumber;     // per-communicator sequence number of this operation kind
  const char* func;       // "AllReduce", "AllGather", "AlltoAll", ... (NCCL's static strings)
  void const* sendBuff;
  void* recvBuff;
  size_t count;           // elements
  int root;
  const char* datatype;   // "ncclFloat32", ...
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;       // "Ring", "Tree", ...
  const char* proto;      // "LL", "LL128", "Simple"
} ffProfCollV4;

typedef struct {
  const char* func;       // "Send" or "Recv"
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
} ffProfP2pV4;

typedef struct {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
} ffProfProxyOp;

typedef struct {
  int step;
} ffProfProxyStep;

typedef struct {
  uint8_t channelId;
  uint64_t pTimer;
} ffProfKernelCh;

typedef struct {
  int64_t id;    // the network plugin's event family and version
  void* data;    // the network plugin's own event descriptor
} ffProfNetPlugin;

// ---- v4 (NCCL 2.27) --------------------------------------------------------
typedef struct {
  uint8_t type;     // one ncclProfile* bit
  void* parentObj;  // the parent event's handle as this plugin returned it (Coll: its group)
  int rank;
  union {
    ffProfCollV4 coll;
    ffProfP2pV4 p2p;
    ffProfProxyOp proxyOp;
    ffProfProxyStep proxyStep;
    ffProfKernelCh kernelCh;
    ffProfNetPlugin netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

// ---- v5 (NCCL 2.28+) -------------------------------------------------------
// v5 widens `type`, adds API-level events at the front of the union and a parentGroup member
// at the end of coll and p2p (the v4-style group parent; parentObj now points to the API event).
typedef struct {
  ffProfCollV4 base;
  void* parentGroup;
} ffProfCollV5;

typedef struct {
  ffProfP2pV4 base;
  void* parentGroup;
} ffProfP2pV5;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured; } collApi;
    struct { const char* func; size_t count; const char* datatype; void* stream; bool graphCaptured; } p2pApi;
    struct { void* stream; } kernelLaunch;
    ffProfCollV5 coll;
    ffProfP2pV5 p2p;
    ffProfProxyOp proxyOp;
    ffProfProxyStep proxyStep;
    ffProfKernelCh kernelCh;
    ffProfNetPlugin netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;  // unchanged in v5

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

// Start/stop codes the network plugin passes to NCCL's ncclProfilerCallback_t (`type` argument).
enum { ncclProfilerNetEventStart = 0, ncclProfilerNetEventStop, ncclProfilerNetEventUpdate,
       ncclProfilerNetEventUpdateAndStop };

}  // extern "C"

// Layout checks against NCCL's x86-64/aarch64 LP64 layout: a mismatch here would make NCCL read garbage.
static_assert(offsetof(ncclProfilerEventDescr_v4_t, parentObj) == 8);
static_assert(offsetof(ncclProfilerEventDescr_v4_t, coll) == 24);
static_assert(sizeof(ffProfCollV4) == 80);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll) == 24);
static_assert(offsetof(ffProfCollV5, parentGroup) == 80);
static_assert(offsetof(ffProfP2pV5, parentGroup) == 40);
