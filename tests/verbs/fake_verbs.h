// Test access to fake_ibverbs.c: a loader over the fake library plus the fake's controls.
#pragma once

#include <dlfcn.h>

#include <string>

#include "verbs/ibverbs_loader.h"

namespace ff::testing {

class FakeVerbs {
 public:
  // `library`: the fake's build (FF_FAKE_IBVERBS_DMABUF_PATH has ibv_reg_dmabuf_mr).
  explicit FakeVerbs(const char* devices = "", const char* library = FF_FAKE_IBVERBS_PATH) : loader_(library) {
    // Same path, same handle: the controls act on the library the loader resolved from.
    handle_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    set_devices_ = reinterpret_cast<void (*)(const char*)>(dlsym(handle_, "fake_ibv_set_devices"));
    log_ = reinterpret_cast<const char* (*)()>(dlsym(handle_, "fake_ibv_log"));
    reset_ = reinterpret_cast<void (*)()>(dlsym(handle_, "fake_ibv_reset"));
    fail_next_ = reinterpret_cast<void (*)(const char*, int)>(dlsym(handle_, "fake_ibv_fail_next"));
    inject_ = reinterpret_cast<void (*)(const char*, int, int)>(dlsym(handle_, "fake_ibv_inject_async_event"));
    pending_events_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_ibv_pending_async_events"));
    acks_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_ibv_async_acks"));
    would_block_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_ibv_async_would_block"));
    posted_sends_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_ibv_posted_send_wrs"));
    last_modify_ = reinterpret_cast<int (*)(int, ibv_qp_attr*, int*)>(dlsym(handle_, "fake_ibv_last_modify"));
    reset_events_ = reinterpret_cast<void (*)()>(dlsym(handle_, "fake_ibv_reset_events"));
    last_send_wr_ = reinterpret_cast<void (*)(ibv_send_wr*, ibv_sge*)>(dlsym(handle_, "fake_ibv_last_send_wr"));
    last_reg_access_ = reinterpret_cast<int (*)()>(dlsym(handle_, "fake_ibv_last_reg_access"));
    complete_sends_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "fake_ibv_complete_sends"));
    dmabuf_probe_errno_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "fake_ibv_set_dmabuf_probe_errno"));
    last_dmabuf_ =
        reinterpret_cast<int (*)(uint64_t*, size_t*, uint64_t*, int*, int*)>(dlsym(handle_, "fake_ibv_last_dmabuf"));
    reset_();
    reset_events_();
    set_devices_(devices);
  }
  ~FakeVerbs() { dlclose(handle_); }
  FakeVerbs(const FakeVerbs&) = delete;
  FakeVerbs& operator=(const FakeVerbs&) = delete;

  const verbs::IbverbsLoader& loader() const { return loader_; }
  std::string log() const { return log_(); }
  void ResetLog() const { reset_(); }
  void FailNext(const char* call, int err) const { fail_next_(call, err); }
  // Async events: queued per device name; `arg` is the port (port events) or the QP number (QP events).
  void InjectAsyncEvent(const char* device, ibv_event_type type, int arg) const { inject_(device, type, arg); }
  int PendingAsyncEvents() const { return pending_events_(); }
  int AsyncEventAcks() const { return acks_(); }
  // Reads of the async fd while it was still blocking (the real library would have hung there).
  int AsyncReadsThatWouldBlock() const { return would_block_(); }
  int PostedSendWrs() const { return posted_sends_(); }
  // The last ibv_modify_qp to `state`: false when none happened.
  bool LastModify(ibv_qp_state state, ibv_qp_attr* attr, int* mask) const { return last_modify_(state, attr, mask) != 0; }
  // The last send work request posted (its first SGE; next and sg_list cleared).
  void LastSendWr(ibv_send_wr* wr, ibv_sge* sge) const { last_send_wr_(wr, sge); }
  // The access flags of the last ibv_reg_mr; -1 when none happened.
  int LastRegAccess() const { return last_reg_access_(); }
  // From now on every signaled send work request completes at once with `status` (-1: never).
  void CompleteSends(int status) const { complete_sends_(status); }
  // The errno of ibv_reg_dmabuf_mr's fd -1 probe (dmabuf build only; default EBADF: supported).
  void SetDmabufProbeErrno(int err) const { dmabuf_probe_errno_(err); }
  struct DmabufReg {
    uint64_t offset = 0;
    size_t length = 0;
    uint64_t iova = 0;
    int fd = -1;
    int access = 0;
  };
  bool LastDmabuf(DmabufReg* r) const { return last_dmabuf_(&r->offset, &r->length, &r->iova, &r->fd, &r->access) != 0; }

 private:
  verbs::IbverbsLoader loader_;
  void* handle_ = nullptr;
  void (*set_devices_)(const char*) = nullptr;
  const char* (*log_)() = nullptr;
  void (*reset_)() = nullptr;
  void (*fail_next_)(const char*, int) = nullptr;
  void (*inject_)(const char*, int, int) = nullptr;
  int (*pending_events_)() = nullptr;
  int (*acks_)() = nullptr;
  int (*would_block_)() = nullptr;
  int (*posted_sends_)() = nullptr;
  int (*last_modify_)(int, ibv_qp_attr*, int*) = nullptr;
  void (*reset_events_)() = nullptr;
  void (*last_send_wr_)(ibv_send_wr*, ibv_sge*) = nullptr;
  int (*last_reg_access_)() = nullptr;
  void (*complete_sends_)(int) = nullptr;
  void (*dmabuf_probe_errno_)(int) = nullptr;
  int (*last_dmabuf_)(uint64_t*, size_t*, uint64_t*, int*, int*) = nullptr;
};

}  // namespace ff::testing
