// libibverbs opened with dlopen at first use: the plugin never links it, so a host without RDMA
// packages still loads the plugin, sees 0 verbs devices and carries traffic over TCP.
#pragma once

#include <infiniband/verbs.h>  // types and the inline data-path ops only; nothing here links against it

#include <string>

namespace ff::verbs {

// The exported entry points we call. Data-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq,
// ibv_req_notify_cq) are not here: verbs.h implements them inline through the context's ops table,
// so they cost no symbol and no indirection of ours.
struct IbvApi {
  ibv_device** (*get_device_list)(int* num_devices) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  __be64 (*get_device_guid)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  // The exported ibv_query_port takes the pre-extension attribute layout; use
  // IbverbsLoader::QueryPort, which prefers the provider's extended op as verbs.h's inline does.
  int (*query_port_compat)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  // Optional (rdma-core >= 1.8 / 1.12 ABI): null when the installed library predates them.
  ibv_mr* (*reg_mr_iova2)(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) = nullptr;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel* channel) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) = nullptr;
  void (*ack_cq_events)(ibv_cq* cq, unsigned int nevents) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) = nullptr;
  int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;
  int (*get_async_event)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ack_async_event)(ibv_async_event* event) = nullptr;
  const char* (*event_type_str)(ibv_event_type event) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status status) = nullptr;
};

class IbverbsLoader {
 public:
  static constexpr const char* kDefaultLibrary = "libibverbs.so.1";

  // The process-wide loader: opens kDefaultLibrary on the first call (thread-safe, once) and logs
  // one INFO line when it is unavailable. Never unloaded: providers keep state until exit.
  static const IbverbsLoader& Get();

  // Opens `library` (a soname or a path) now; tests use it with fakes and bogus names.
  explicit IbverbsLoader(const std::string& library);
  ~IbverbsLoader();
  IbverbsLoader(const IbverbsLoader&) = delete;
  IbverbsLoader& operator=(const IbverbsLoader&) = delete;

  // True when the library opened and every required symbol resolved.
  bool available() const { return available_; }
  // Why it is unavailable: the dlerror text, or the first required symbol that is missing.
  const std::string& error() const { return error_; }
  const std::string& library() const { return library_; }
  // Only meaningful when available(); every required pointer is non-null then.
  const IbvApi& api() const { return api_; }

  // ibv_query_port with the extended attribute layout: the provider's query_port op when the
  // context is an extended one, else the exported compat symbol on a zeroed struct.
  int QueryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;

  // Number of verbs devices; 0 when unavailable (not an error: a host without RDMA).
  int DeviceCount() const;

 private:
  std::string library_;
  void* handle_ = nullptr;
  bool available_ = false;
  std::string error_;
  IbvApi api_;
};

}  // namespace ff::verbs
