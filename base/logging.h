// Logging through the logger NCCL hands to init (NET subsystem); stderr fallback honours NCCL_DEBUG.
#pragma once

#include "nccl/net_abi.h"

namespace ff {

// Installs NCCL's logger; nullptr selects the stderr fallback used by the CLI and tests.
void SetNcclLogger(ncclDebugLogger_t logger);

// printf-style; do not call directly, use the macros.
void LogMessage(ncclDebugLogLevel level, unsigned long subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace ff

// Warnings carry every subsystem bit, as NCCL's own: NCCL filters all levels by NCCL_DEBUG_SUBSYS, whose
// default (INIT,BOOTSTRAP,ENV) has no NET bit, so a warning tagged NET alone would never be shown.
#define FF_WARN(...) ::ff::LogMessage(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define FF_INFO(subsys, ...) ::ff::LogMessage(NCCL_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#ifdef FF_ENABLE_TRACE
#define FF_TRACE(...) ::ff::LogMessage(NCCL_LOG_TRACE, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)
#else
#define FF_TRACE(...) \
  do {                \
  } while (0)
#endif
