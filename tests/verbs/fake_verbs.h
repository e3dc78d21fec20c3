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
    reset_();
    set_devices_(devices);
  }
  ~FakeVerbs() { dlclose(handle_); }
  FakeVerbs(const FakeVerbs&) = delete;
  FakeVerbs& operator=(const FakeVerbs&) = delete;

  const verbs::IbverbsLoader& loader() const { return loader_; }
  std::string log() const { return log_(); }
  void ResetLog() const { reset_(); }
  void FailNext(const char* call, int err) const { fail_next_(call, err); }

 private:
  verbs::IbverbsLoader loader_;
  void* handle_ = nullptr;
  void (*set_devices_)(const char*) = nullptr;
  const char* (*log_)() = nullptr;
  void (*reset_)() = nullptr;
  void (*fail_next_)(const char*, int) = nullptr;
};

}  // namespace ff::testing
