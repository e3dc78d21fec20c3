// Registration cache: page rounding, reuse of covering entries, separate entries for partial
// overlaps, reference counting, failure and misuse errors, teardown, and concurrent use.
#include "verbs/mr_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/verbs/fake_verbs.h"
#include "verbs/verbs_owners.h"

namespace ff::verbs {
namespace {

// Records every call; its own lock so that it would notice unserialised use as a torn count.
struct FakeDevice {
  std::mutex mu;
  std::map<uintptr_t, size_t> live;  // start -> length of live registrations
  std::vector<std::pair<uintptr_t, size_t>> registered;
  int deregistered = 0;
  bool fail = false;
  uint32_t next_key = 1;

  MrRegistrar Registrar() {
    return MrRegistrar{[this](uintptr_t start, size_t length, MrHandle* out) {
                         std::lock_guard<std::mutex> lock(mu);
                         if (fail) return SystemError("ibv_reg_mr: Cannot allocate memory (errno 12)");
                         registered.emplace_back(start, length);
                         live[start] += 1;
                         out->opaque = reinterpret_cast<void*>(start);
                         out->lkey = next_key;
                         out->rkey = next_key++ | 0x8000;
                         return Status::Ok();
                       },
                       [this](const MrHandle& h) {
                         std::lock_guard<std::mutex> lock(mu);
                         const uintptr_t start = reinterpret_cast<uintptr_t>(h.opaque);
                         if (--live[start] == 0) live.erase(start);
                         ++deregistered;
                       }};
  }
};

const void* At(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(MrCache, RangesAreRoundedOutToPages) {
  FakeDevice dev;
  MrCache cache(dev.Registrar(), 4096);
  MrRef r;
  ASSERT_TRUE(cache.Acquire(At(0x10010), 0x1000, &r).ok());  // spans two pages
  ASSERT_EQ(dev.registered.size(), 1u);
  EXPECT_EQ(dev.registered[0], std::make_pair(uintptr_t{0x10000}, size_t{0x2000}));
  EXPECT_EQ(r.start, 0x10000u);
  EXPECT_EQ(r.length, 0x2000u);
  EXPECT_EQ(r.handle.lkey, 1u);
  MrRef z;
  ASSERT_TRUE(cache.Acquire(At(0x30000), 0, &z).ok());  // zero length: the page holding the address
  EXPECT_EQ(dev.registered[1], std::make_pair(uintptr_t{0x30000}, size_t{0x1000}));
}

TEST(MrCache, CoveredRangesShareOneRegistrationUntilTheLastRelease) {
  FakeDevice dev;
  MrCache cache(dev.Registrar(), 4096);
  MrRef a, b;
  ASSERT_TRUE(cache.Acquire(At(0x100000), 0x10000, &a).ok());
  ASSERT_TRUE(cache.Acquire(At(0x104000), 0x100, &b).ok());  // inside a
  EXPECT_EQ(dev.registered.size(), 1u);
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.handle.rkey, a.handle.rkey);
  EXPECT_EQ(b.start, 0x100000u);  // the entry's range: the caller computes offsets from it
  ASSERT_TRUE(cache.Release(a).ok());
  EXPECT_EQ(dev.deregistered, 0);
  EXPECT_EQ(cache.entries(), 1u);
  ASSERT_TRUE(cache.Release(b).ok());
  EXPECT_EQ(dev.deregistered, 1);
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(MrCache, PartialOverlapGetsItsOwnEntryAndBothLiveIndependently) {
  FakeDevice dev;
  MrCache cache(dev.Registrar(), 4096);
  MrRef a, b;
  ASSERT_TRUE(cache.Acquire(At(0x200000), 0x4000, &a).ok());
  ASSERT_TRUE(cache.Acquire(At(0x202000), 0x4000, &b).ok());  // overlaps a's upper half, extends past it
  ASSERT_EQ(dev.registered.size(), 2u);
  EXPECT_EQ(dev.registered[1], std::make_pair(uintptr_t{0x202000}, size_t{0x4000}));
  EXPECT_NE(a.id, b.id);
  ASSERT_TRUE(cache.Release(a).ok());
  EXPECT_EQ(dev.deregistered, 1);
  // b is still usable, and a range inside b now reuses b.
  MrRef c;
  ASSERT_TRUE(cache.Acquire(At(0x203000), 0x10, &c).ok());
  EXPECT_EQ(c.id, b.id);
  EXPECT_EQ(dev.registered.size(), 2u);
}

TEST(MrCache, RegistrationFailureNamesTheRangeAndCachesNothing) {
  FakeDevice dev;
  dev.fail = true;
  MrCache cache(dev.Registrar(), 4096);
  MrRef r;
  Status s = cache.Acquire(At(0x5000), 100, &r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kSystem);
  EXPECT_NE(s.message().find("registering [0x5000, 0x6000): ibv_reg_mr: Cannot allocate memory"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(cache.entries(), 0u);
  dev.fail = false;
  ASSERT_TRUE(cache.Acquire(At(0x5000), 100, &r).ok());  // a later attempt registers for real
  EXPECT_EQ(cache.entries(), 1u);
}

TEST(MrCache, DoubleReleaseAndWrappingRangesAreErrors) {
  FakeDevice dev;
  MrCache cache(dev.Registrar(), 4096);
  MrRef r;
  ASSERT_TRUE(cache.Acquire(At(0x7000), 1, &r).ok());
  ASSERT_TRUE(cache.Release(r).ok());
  Status s = cache.Release(r);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidUsage);
  EXPECT_NE(s.message().find("released but not held"), std::string::npos) << s.message();
  EXPECT_EQ(dev.deregistered, 1);
  s = cache.Acquire(At(UINTPTR_MAX - 10), 100, &r);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("wraps the address space"), std::string::npos) << s.message();
}

TEST(MrCache, TeardownDeregistersWhatIsStillCached) {
  FakeDevice dev;
  {
    MrCache cache(dev.Registrar(), 4096);
    MrRef a, b;
    ASSERT_TRUE(cache.Acquire(At(0x10000), 10, &a).ok());
    ASSERT_TRUE(cache.Acquire(At(0x90000), 10, &b).ok());
  }
  EXPECT_EQ(dev.deregistered, 2);
  EXPECT_TRUE(dev.live.empty());
}

TEST(MrCache, ConcurrentAcquireReleaseNeverDropsARegistrationInUse) {
  FakeDevice dev;
  MrCache cache(dev.Registrar(), 4096);
  std::atomic<int> in_use_but_dead{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        // Four buffers; threads hit the same ones, sometimes with sub-ranges.
        const uintptr_t base = 0x1000000 + static_cast<uintptr_t>((i + t) % 4) * 0x100000;
        MrRef r;
        ASSERT_TRUE(cache.Acquire(At(base + ((i & 1) ? 0x2000 : 0)), 0x8000, &r).ok());
        {
          std::lock_guard<std::mutex> lock(dev.mu);
          if (dev.live.count(reinterpret_cast<uintptr_t>(r.handle.opaque)) == 0) in_use_but_dead++;
        }
        ASSERT_TRUE(cache.Release(r).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(in_use_but_dead.load(), 0);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(static_cast<size_t>(dev.deregistered), dev.registered.size());
}

TEST(MrCache, VerbsRegistrarRegistersOnThePdAndDeregistersOnLastRelease) {
  testing::FakeVerbs fake("mlx5_0=A");
  const auto& ib = fake.loader();
  DeviceListOwner list;
  int n = 0;
  ASSERT_TRUE(GetDeviceList(ib, &list, &n).ok());
  ContextOwner ctx;
  ASSERT_TRUE(OpenDevice(ib, list.get()[0], &ctx).ok());
  PdOwner pd;
  ASSERT_TRUE(AllocPd(ib, ctx.get(), &pd).ok());
  static char buffer[3 * 4096];
  {
    MrCache cache(VerbsRegistrar(ib, pd.get(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), 4096);
    MrRef a, b;
    ASSERT_TRUE(cache.Acquire(buffer + 100, 4096, &a).ok());
    ASSERT_TRUE(cache.Acquire(buffer + 200, 16, &b).ok());
    auto* mr = static_cast<ibv_mr*>(a.handle.opaque);
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(mr->pd, pd.get());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(mr->addr), a.start);
    EXPECT_EQ(mr->length, a.length);
    EXPECT_EQ(a.handle.lkey, mr->lkey);
    fake.ResetLog();
    ASSERT_TRUE(cache.Release(a).ok());
    ASSERT_TRUE(cache.Release(b).ok());
    EXPECT_EQ(fake.log(), "dereg_mr mlx5_0\n");
  }
}

}  // namespace
}  // namespace ff::verbs
