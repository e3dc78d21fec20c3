// Opens libibverbs with dlopen and resolves the entry points the verbs backend calls.
#include "verbs/ibverbs_loader.h"

#include <dlfcn.h>

#include <cstring>

#include "base/logging.h"

namespace ff::verbs {
namespace {

// dlsym binds a symbol's default version: the one a program linked today would bind (IBVERBS_1.1
// for the calls that also keep a 1.0 compat version), so the struct layouts match verbs.h.
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out) {
  dlerror();
  void* sym = dlsym(handle, name);
  *out = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

}  // namespace

const IbverbsLoader& IbverbsLoader::Get() {
  // A function-local static is initialised once even when several threads race here (NCCL's init
  // and a service thread may both ask first).
  static const IbverbsLoader* loader = [] {
    auto* l = new IbverbsLoader(kDefaultLibrary);  // intentionally never freed (see header)
    if (!l->available()) {
      FF_INFO(NCCL_INIT | NCCL_NET, "RDMA verbs unavailable (%s): 0 verbs devices, TCP only",
              l->error().c_str());
    }
    return l;
  }();
  return *loader;
}

IbverbsLoader::IbverbsLoader(const std::string& library) : library_(library) {
  dlerror();
  handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    error_ = why ? why : (library + ": dlopen failed");
    return;
  }
  std::string missing;
  auto need = [&](const char* name, auto* slot) {
    if (!Resolve(handle_, name, slot)) missing += missing.empty() ? name : std::string(", ") + name;
  };
  need("ibv_get_device_list", &api_.get_device_list);
  need("ibv_free_device_list", &api_.free_device_list);
  need("ibv_get_device_name", &api_.get_device_name);
  need("ibv_get_device_guid", &api_.get_device_guid);
  need("ibv_open_device", &api_.open_device);
  need("ibv_close_device", &api_.close_device);
  need("ibv_query_device", &api_.query_device);
  need("ibv_query_port", &api_.query_port_compat);
  need("ibv_query_gid", &api_.query_gid);
  need("ibv_alloc_pd", &api_.alloc_pd);
  need("ibv_dealloc_pd", &api_.dealloc_pd);
  need("ibv_reg_mr", &api_.reg_mr);
  need("ibv_dereg_mr", &api_.dereg_mr);
  need("ibv_create_comp_channel", &api_.create_comp_channel);
  need("ibv_destroy_comp_channel", &api_.destroy_comp_channel);
  need("ibv_create_cq", &api_.create_cq);
  need("ibv_destroy_cq", &api_.destroy_cq);
  need("ibv_get_cq_event", &api_.get_cq_event);
  need("ibv_ack_cq_events", &api_.ack_cq_events);
  need("ibv_create_qp", &api_.create_qp);
  need("ibv_modify_qp", &api_.modify_qp);
  need("ibv_query_qp", &api_.query_qp);
  need("ibv_destroy_qp", &api_.destroy_qp);
  need("ibv_get_async_event", &api_.get_async_event);
  need("ibv_ack_async_event", &api_.ack_async_event);
  need("ibv_event_type_str", &api_.event_type_str);
  need("ibv_wc_status_str", &api_.wc_status_str);
  // Newer registration calls: absent on old rdma-core, and the backend then falls back (no dmabuf,
  // no relaxed ordering) instead of refusing verbs altogether.
  Resolve(handle_, "ibv_reg_mr_iova2", &api_.reg_mr_iova2);
  Resolve(handle_, "ibv_reg_dmabuf_mr", &api_.reg_dmabuf_mr);
  if (!missing.empty()) {
    error_ = library + " lacks required symbols: " + missing;
    api_ = IbvApi{};
    return;
  }
  available_ = true;
}

IbverbsLoader::~IbverbsLoader() {
  if (handle_ != nullptr) dlclose(handle_);
}

int IbverbsLoader::QueryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  if (!available_ || context == nullptr || attr == nullptr) return EINVAL;
  // Same decision as verbs.h's inline wrapper, without referencing the symbol at link time.
  if (verbs_context* vctx = verbs_get_ctx_op(context, query_port)) {
    return vctx->query_port(context, port, attr, sizeof(*attr));
  }
  std::memset(attr, 0, sizeof(*attr));
  return api_.query_port_compat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

int IbverbsLoader::DeviceCount() const {
  if (!available_) return 0;
  int n = 0;
  ibv_device** list = api_.get_device_list(&n);
  if (list == nullptr) return 0;  // errno ENOSYS: kernel without uverbs; still "no devices"
  api_.free_device_list(list);
  return n;
}

}  // namespace ff::verbs
