// No exception crosses the profiler's C ABI: an allocation failure inside init becomes an error code.
// Its own binary: it replaces operator new, and needs a process whose event pool does not exist yet.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "nccl/profiler_abi.h"
#include "sla/profiler_event_pool.h"

extern "C" ncclProfiler_v4_t ncclProfiler_v4;
extern "C" ncclProfiler_v5_t ncclProfiler_v5;

namespace {
// While set, large allocations (the event pool's arrays) fail; small ones (a context) succeed.
bool g_fail_allocations = false;
}

void* operator new(size_t n) {
  if (g_fail_allocations && n >= 1024) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The replacement operator new above allocates with malloc, so free is the matching release. GCC 12
// at -O1 (CI's ThreadSanitizer build) inlines gtest's `new TestClass` into these and still calls it
// mismatched: a false -Wmismatched-new-delete, silenced for these two definitions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace ff::sla {
namespace {

TEST(ProfilerAbiGuard, AllocationFailureInInitIsAnErrorCodeNotAnException) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "sanitizer runtimes supply their own operator new, so this replacement is not called";
#endif
  ASSERT_EQ(GlobalProfilerPool(), nullptr) << "the event pool must not exist yet in this process";
  void* ctx = nullptr;
  int mask = 0;
  ncclResult_t v5 = ncclSuccess, v4 = ncclSuccess;
  g_fail_allocations = true;  // creating the event pool in init throws std::bad_alloc
  EXPECT_NO_THROW(v5 = ncclProfiler_v5.init(&ctx, 1, &mask, "comm", 1, 2, 0, nullptr));
  EXPECT_NO_THROW(v4 = ncclProfiler_v4.init(&ctx, &mask, "comm", 1, 1, 2, 0, nullptr));
  g_fail_allocations = false;
  EXPECT_EQ(v5, ncclSystemError);
  EXPECT_EQ(v4, ncclSystemError);
  // Once memory is back, the profiler works.
  ASSERT_EQ(ncclProfiler_v5.init(&ctx, 1, &mask, "comm", 1, 2, 0, nullptr), ncclSuccess);
  EXPECT_EQ(ncclProfiler_v5.finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace ff::sla
