// The exception barrier for C entry points that return ncclResult_t directly (the profiler tables).
#pragma once

#include <new>

#include "nccl/net_abi.h"

namespace ff {

// Runs `fn`; an exception that would cross the C ABI (undefined behaviour, in practice
// std::terminate inside NCCL) becomes an error code instead.
template <typename Fn>
ncclResult_t GuardAbi(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ncclSystemError;
  } catch (...) {
    return ncclInternalError;
  }
}

}  // namespace ff
