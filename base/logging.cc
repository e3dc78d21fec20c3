// Routes our log lines to NCCL's logger, or to stderr when NCCL did not give one.
#include "base/logging.h"

#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/status.h"

namespace ff {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

// Mirrors NCCL_DEBUG's levels for the fallback path.
int FallbackLevel() {
  static const int level = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    if (!v) return static_cast<int>(NCCL_LOG_WARN);
    if (!strcasecmp(v, "VERSION")) return static_cast<int>(NCCL_LOG_VERSION);
    if (!strcasecmp(v, "INFO")) return static_cast<int>(NCCL_LOG_INFO);
    if (!strcasecmp(v, "TRACE")) return static_cast<int>(NCCL_LOG_TRACE);
    if (!strcasecmp(v, "NONE")) return static_cast<int>(NCCL_LOG_NONE);
    return static_cast<int>(NCCL_LOG_WARN);
  }();
  return level;
}

}  // namespace

void SetNcclLogger(ncclDebugLogger_t logger) { g_logger.store(logger); }

void LogMessage(ncclDebugLogLevel level, unsigned long subsys, const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (ncclDebugLogger_t logger = g_logger.load()) {
    logger(level, subsys, file, line, "NET/FlexiForce : %s", buf);
    return;
  }
  if (static_cast<int>(level) > FallbackLevel()) return;
  const char* tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
  std::fprintf(stderr, "flexiforce[%d] %s NET/FlexiForce : %s\n", static_cast<int>(getpid()), tag, buf);
}

}  // namespace ff
