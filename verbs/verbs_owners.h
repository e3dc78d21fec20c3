// Owner types for every verbs handle: unique_ptr with the loader's destroy call as deleter, so no
// handle is ever released by hand and an early return cannot leak a QP, CQ, MR, PD or context.
//
// Destroy order matters to the kernel (a CQ with a QP attached, a PD with an MR in it refuse with
// EBUSY): declare owners context, channel, PD, CQ, MR, QP so that members are destroyed QP first.
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include "base/status.h"
#include "verbs/ibverbs_loader.h"

namespace ff::verbs {

// Logs a failed destroy once per call; a deleter cannot report it otherwise, and a refused destroy
// means the device keeps the resource until the process exits.
void ReportDestroyFailure(const char* what, int rc);

// What a handle is called in log lines.
constexpr const char* HandleName(ibv_device**) { return "device list"; }
constexpr const char* HandleName(ibv_context*) { return "device context"; }
constexpr const char* HandleName(ibv_comp_channel*) { return "completion channel"; }
constexpr const char* HandleName(ibv_pd*) { return "protection domain"; }
constexpr const char* HandleName(ibv_cq*) { return "completion queue"; }
constexpr const char* HandleName(ibv_qp*) { return "queue pair"; }
constexpr const char* HandleName(ibv_mr*) { return "memory region"; }

template <typename T, auto Destroy>
struct VerbsDeleter {
  const IbvApi* api = nullptr;
  void operator()(T* p) const {
    if (p == nullptr || api == nullptr) return;
    if constexpr (std::is_void_v<decltype((api->*Destroy)(p))>) {
      (api->*Destroy)(p);
    } else {
      const int rc = (api->*Destroy)(p);
      if (rc != 0) ReportDestroyFailure(HandleName(p), rc);
    }
  }
};

using DeviceListOwner = std::unique_ptr<ibv_device*, VerbsDeleter<ibv_device*, &IbvApi::free_device_list>>;
using ContextOwner = std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, &IbvApi::close_device>>;
using CompChannelOwner =
    std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_comp_channel, &IbvApi::destroy_comp_channel>>;
using PdOwner = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, &IbvApi::dealloc_pd>>;
using CqOwner = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, &IbvApi::destroy_cq>>;
using QpOwner = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, &IbvApi::destroy_qp>>;
using MrOwner = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, &IbvApi::dereg_mr>>;

// Factories: each returns an owner or an error naming the call, the object and errno's text.
// The loader must be available() and outlive what it made.
Status GetDeviceList(const IbverbsLoader& ib, DeviceListOwner* out, int* count);
Status OpenDevice(const IbverbsLoader& ib, ibv_device* device, ContextOwner* out);
Status CreateCompChannel(const IbverbsLoader& ib, ibv_context* context, CompChannelOwner* out);
Status AllocPd(const IbverbsLoader& ib, ibv_context* context, PdOwner* out);
Status CreateCq(const IbverbsLoader& ib, ibv_context* context, int cqe, ibv_comp_channel* channel,
                int comp_vector, CqOwner* out);
Status CreateQp(const IbverbsLoader& ib, ibv_pd* pd, ibv_qp_init_attr* attr, QpOwner* out);
Status RegMr(const IbverbsLoader& ib, ibv_pd* pd, void* addr, size_t length, int access, MrOwner* out);
// dmabuf registration (GPU memory); an error when the library predates ibv_reg_dmabuf_mr.
Status RegDmabufMr(const IbverbsLoader& ib, ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                   int access, MrOwner* out);

}  // namespace ff::verbs
