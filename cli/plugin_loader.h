// Loads libnccl-net-flexiforce.so with dlopen and hands out its versioned tables, as NCCL's loader does.
#pragma once

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "nccl/net_abi.h"

namespace ff::testing {

// Logger given to the plugin's init: prints WARN always and INFO when FF_TEST_VERBOSE is set.
inline void StderrLogger(ncclDebugLogLevel level, unsigned long, const char* file, int line, const char* fmt,
                         ...) {
  static const bool verbose = std::getenv("FF_TEST_VERBOSE") != nullptr;
  if (level > NCCL_LOG_WARN && !verbose) return;
  std::fprintf(stderr, "[pid %d] %s %s:%d ", static_cast<int>(getpid()), level == NCCL_LOG_WARN ? "WARN" : "INFO",
               file, line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

// Default location of the built plugin: $FF_PLUGIN_PATH, else next to the test binary's build tree.
inline std::string DefaultPluginPath() {
  if (const char* p = std::getenv("FF_PLUGIN_PATH")) return p;
#ifdef FF_PLUGIN_BUILD_PATH
  return FF_PLUGIN_BUILD_PATH;
#else
  return "libnccl-net-flexiforce.so";
#endif
}

// Owns the dlopen handle; the tables stay valid while this object lives.
class PluginLibrary {
 public:
  explicit PluginLibrary(const std::string& path = DefaultPluginPath()) {
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);  // as NCCL: never unmapped
    if (!handle_) throw std::runtime_error(std::string("dlopen failed: ") + dlerror());
  }
  ~PluginLibrary() {
    if (handle_) dlclose(handle_);
  }
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  template <typename Table>
  const Table* Table_(const char* symbol) const {
    auto* t = static_cast<const Table*>(dlsym(handle_, symbol));
    if (!t) throw std::runtime_error(std::string("missing symbol ") + symbol);
    return t;
  }
  const ncclNet_v8_t* V8() const { return Table_<ncclNet_v8_t>("ncclNetPlugin_v8"); }
  const ncclNet_v9_t* V9() const { return Table_<ncclNet_v9_t>("ncclNetPlugin_v9"); }
  const ncclNet_v10_t* V10() const { return Table_<ncclNet_v10_t>("ncclNetPlugin_v10"); }
  const ncclNet_v11_t* V11() const { return Table_<ncclNet_v11_t>("ncclNetPlugin_v11"); }
  const ncclNet_v12_t* V12() const { return Table_<ncclNet_v12_t>("ncclNetPlugin_v12"); }

 private:
  void* handle_ = nullptr;
};

}  // namespace ff::testing
