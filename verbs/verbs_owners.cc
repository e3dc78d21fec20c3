// Factories for the verbs owner types: one call each, errors that name the call and errno.
#include "verbs/verbs_owners.h"

#include <cerrno>

#include "base/logging.h"

namespace ff::verbs {
namespace {

Status Unavailable(const IbverbsLoader& ib, const char* call) {
  return InvalidUsage(std::string(call) + ": libibverbs unavailable (" + ib.error() + ")");
}

// verbs calls returning a pointer set errno on failure; some providers leave it 0.
Status Failed(const char* call, const std::string& object) {
  const int err = errno != 0 ? errno : EIO;
  return SystemError(ErrnoMessage(std::string(call) + "(" + object + ")", err));
}

std::string ContextName(const IbverbsLoader& ib, ibv_context* context) {
  return context && context->device ? ib.api().get_device_name(context->device) : "?";
}

}  // namespace

void ReportDestroyFailure(const char* what, int rc) {
  // rdma-core returns either an errno value or -1 with errno set, depending on the call.
  const int err = rc > 0 ? rc : errno;
  FF_WARN("verbs: destroying %s failed: %s (errno %d); the device keeps it until exit", what,
          err ? strerror(err) : "unknown", err);
}

Status GetDeviceList(const IbverbsLoader& ib, DeviceListOwner* out, int* count) {
  *count = 0;
  if (!ib.available()) return Unavailable(ib, "ibv_get_device_list");
  errno = 0;
  ibv_device** list = ib.api().get_device_list(count);
  if (list == nullptr) {
    const int err = errno;
    Status s = Failed("ibv_get_device_list", "all devices");
    errno = err;  // kept for the caller (ENOSYS: no RDMA subsystem in this kernel)
    return s;
  }
  *out = DeviceListOwner(list, {&ib.api()});
  return Status::Ok();
}

Status OpenDevice(const IbverbsLoader& ib, ibv_device* device, ContextOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_open_device");
  errno = 0;
  ibv_context* c = ib.api().open_device(device);
  if (c == nullptr) return Failed("ibv_open_device", ib.api().get_device_name(device));
  *out = ContextOwner(c, {&ib.api()});
  return Status::Ok();
}

Status CreateCompChannel(const IbverbsLoader& ib, ibv_context* context, CompChannelOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_create_comp_channel");
  errno = 0;
  ibv_comp_channel* ch = ib.api().create_comp_channel(context);
  if (ch == nullptr) return Failed("ibv_create_comp_channel", ContextName(ib, context));
  *out = CompChannelOwner(ch, {&ib.api()});
  return Status::Ok();
}

Status AllocPd(const IbverbsLoader& ib, ibv_context* context, PdOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_alloc_pd");
  errno = 0;
  ibv_pd* pd = ib.api().alloc_pd(context);
  if (pd == nullptr) return Failed("ibv_alloc_pd", ContextName(ib, context));
  *out = PdOwner(pd, {&ib.api()});
  return Status::Ok();
}

Status CreateCq(const IbverbsLoader& ib, ibv_context* context, int cqe, ibv_comp_channel* channel,
                int comp_vector, CqOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_create_cq");
  errno = 0;
  ibv_cq* cq = ib.api().create_cq(context, cqe, nullptr, channel, comp_vector);
  if (cq == nullptr) {
    return Failed("ibv_create_cq", ContextName(ib, context) + ", " + std::to_string(cqe) + " entries");
  }
  *out = CqOwner(cq, {&ib.api()});
  return Status::Ok();
}

Status CreateQp(const IbverbsLoader& ib, ibv_pd* pd, ibv_qp_init_attr* attr, QpOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_create_qp");
  errno = 0;
  ibv_qp* qp = ib.api().create_qp(pd, attr);
  if (qp == nullptr) {
    return Failed("ibv_create_qp", ContextName(ib, pd ? pd->context : nullptr) + ", send/recv depth " +
                                       std::to_string(attr->cap.max_send_wr) + "/" +
                                       std::to_string(attr->cap.max_recv_wr));
  }
  *out = QpOwner(qp, {&ib.api()});
  return Status::Ok();
}

Status RegMr(const IbverbsLoader& ib, ibv_pd* pd, void* addr, size_t length, int access, MrOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_reg_mr");
  errno = 0;
  ibv_mr* mr = ib.api().reg_mr(pd, addr, length, access);
  if (mr == nullptr) return Failed("ibv_reg_mr", std::to_string(length) + " bytes");
  *out = MrOwner(mr, {&ib.api()});
  return Status::Ok();
}

Status RegDmabufMr(const IbverbsLoader& ib, ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                   int access, MrOwner* out) {
  if (!ib.available()) return Unavailable(ib, "ibv_reg_dmabuf_mr");
  if (ib.api().reg_dmabuf_mr == nullptr) {
    return InvalidUsage("ibv_reg_dmabuf_mr: " + ib.library() + " predates it (rdma-core >= 34 has it)");
  }
  errno = 0;
  ibv_mr* mr = ib.api().reg_dmabuf_mr(pd, offset, length, iova, fd, access);
  if (mr == nullptr) {
    return Failed("ibv_reg_dmabuf_mr", "fd " + std::to_string(fd) + ", " + std::to_string(length) + " bytes");
  }
  *out = MrOwner(mr, {&ib.api()});
  return Status::Ok();
}

}  // namespace ff::verbs
