// Loads libnccl-net-flexiforce.so with dlopen and hands out its versioned tables, as NCCL's loader does.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <strings.h>
#include <unistd.h>

#include "nccl/net_abi.h"

namespace ff::testing {

// The level StderrLogger prints up to, read once: NCCL_DEBUG as NCCL reads it (NONE, VERSION, WARN,
// INFO, TRACE; case-insensitive), WARN when it is unset or unknown, and at least INFO when
// FF_TEST_VERBOSE is set (the tests' switch). NCCL prints nothing without NCCL_DEBUG; a driver
// standing in for NCCL keeps WARN on, since a warning is what its user runs it to see.
inline ncclDebugLogLevel StderrLogLevel() {
  static const ncclDebugLogLevel level = [] {
    ncclDebugLogLevel l = NCCL_LOG_WARN;
    if (const char* v = std::getenv("NCCL_DEBUG")) {
      if (!strcasecmp(v, "NONE")) l = NCCL_LOG_NONE;
      else if (!strcasecmp(v, "VERSION")) l = NCCL_LOG_VERSION;
      else if (!strcasecmp(v, "INFO")) l = NCCL_LOG_INFO;
      else if (!strcasecmp(v, "TRACE")) l = NCCL_LOG_TRACE;
    }
    if (std::getenv("FF_TEST_VERBOSE") != nullptr && l < NCCL_LOG_INFO) l = NCCL_LOG_INFO;
    return l;
  }();
  return level;
}

// NCCL_DEBUG_SUBSYS as NCCL reads it: comma-separated subsystem names (any case; unknown ones ignored),
// a leading '^' for all but those; INIT,BOOTSTRAP,ENV when unset. FF_TEST_VERBOSE shows every subsystem.
inline unsigned long ParseDebugSubsys(const char* v) {
  if (v == nullptr) return NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
  static constexpr struct {
    const char* name;
    unsigned long bit;
  } kNames[] = {{"INIT", NCCL_INIT},     {"COLL", NCCL_COLL},   {"P2P", NCCL_P2P},
                {"SHM", NCCL_SHM},       {"NET", NCCL_NET},     {"GRAPH", NCCL_GRAPH},
                {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},     {"ALLOC", NCCL_ALLOC},
                {"CALL", NCCL_CALL},     {"PROXY", NCCL_PROXY}, {"NVLS", NCCL_NVLS},
                {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG}, {"PROFILE", NCCL_PROFILE},
                {"RAS", NCCL_RAS},       {"ALL", NCCL_ALL}};
  const bool invert = *v == '^';
  if (invert) ++v;
  unsigned long mask = invert ? static_cast<unsigned long>(NCCL_ALL) : 0UL;
  for (const char* p = v; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    const size_t n = end != nullptr ? static_cast<size_t>(end - p) : std::strlen(p);
    for (const auto& e : kNames)
      if (std::strlen(e.name) == n && strncasecmp(p, e.name, n) == 0) mask = invert ? mask & ~e.bit : mask | e.bit;
    p += n;
    if (*p == ',') ++p;
  }
  return mask;
}

inline unsigned long StderrLogMask() {
  static const unsigned long mask =
      std::getenv("FF_TEST_VERBOSE") != nullptr ? static_cast<unsigned long>(NCCL_ALL) : ParseDebugSubsys(std::getenv("NCCL_DEBUG_SUBSYS"));
  return mask;
}

// Logger given to the plugin's init: prints what StderrLogLevel() and StderrLogMask() let through. As in
// NCCL, the subsystem mask applies to every level: a line whose flags share no bit with it is dropped.
inline void StderrLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                         const char* fmt, ...) {
  // ABORT (4 in the enum, between INFO and TRACE) is a warning's kind: shown wherever WARN is.
  const ncclDebugLogLevel rank = level == NCCL_LOG_ABORT ? NCCL_LOG_WARN : level;
  if (rank == NCCL_LOG_NONE || rank > StderrLogLevel() || (flags & StderrLogMask()) == 0) return;
  const char* tag = level == NCCL_LOG_WARN    ? "WARN"
                    : level == NCCL_LOG_ABORT ? "ABORT"
                    : level == NCCL_LOG_TRACE ? "TRACE"
                    : level == NCCL_LOG_VERSION ? "VERSION"
                                                : "INFO";
  // One write per line: the bench's two processes share stderr, and a line written in pieces (prefix,
  // message, newline) interleaved with the other's mid-line.
  char buf[2048];
  int n = std::snprintf(buf, sizeof(buf), "[pid %d] %s %s:%d ", static_cast<int>(getpid()), tag, file, line);
  if (n < 0) return;
  size_t len = std::min(static_cast<size_t>(n), sizeof(buf) - 1);
  va_list ap;
  va_start(ap, fmt);
  n = std::vsnprintf(buf + len, sizeof(buf) - len, fmt, ap);
  va_end(ap);
  if (n > 0) len = std::min(len + static_cast<size_t>(n), sizeof(buf) - 2);
  buf[len++] = '\n';
  std::fflush(stderr);
  for (size_t off = 0; off < len;) {
    const ssize_t w = ::write(STDERR_FILENO, buf + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
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
