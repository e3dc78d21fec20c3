// Test access to fake_ibverbs.c: a loader over the fake library plus the fake's controls.
#pragma once

#include <dlfcn.h>

#include <string>

#include "verbs/ibverbs_loader.h"

namespace ff::testing {

class FakeVerbs {
 public:
  explicit FakeVerbs(const char* devices = "") : loader_(FF_FAKE_IBVERBS_PATH) {
    // Same path, same handle: the controls act on the library the loader resolved from.
    handle_ = dlopen(FF_FAKE_IBVERBS_PATH, RTLD_NOW | RTLD_LOCAL);
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
};

}  // namespace ff::testing
