#include "sla/heat_index.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace ff::sla {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(HeatIndex, FormulaWithStatedUnits) {
  // 10 GB/s = 10000 MB/s at a 100 us SLA.
  EXPECT_DOUBLE_EQ(HeatIndex::HeatOf(10000.0, 100.0), 10000.0);
  EXPECT_DOUBLE_EQ(HeatIndex::HeatOf(1.0, 50.0), 2.0);
}

TEST(HeatIndex, WindowRateAndHeatWithFakeClock) {
  FakeClock clock(5 * 1000 * kMs);
  HeatIndex heat(100'000, clock);  // SLA 100 us, 1 s window
  for (int i = 0; i < 10; ++i) {
    heat.Add(100'000'000);  // 100 MB per 100 ms bucket = 1000 MB/s
    clock.Advance(100 * kMs);
  }
  clock.Set(clock.NowNs() - 1);  // still inside the 10th bucket
  EXPECT_EQ(heat.WindowBytes(), 1'000'000'000u);
  EXPECT_DOUBLE_EQ(heat.WindowMegabytesPerSecond(), 1000.0);
  EXPECT_DOUBLE_EQ(heat.Heat(), 1000.0);
}

TEST(HeatIndex, OldBucketsSlideOut) {
  FakeClock clock(0);
  HeatIndex heat(50'000, clock);
  heat.Add(1000);
  clock.Advance(500 * kMs);
  heat.Add(2000);
  EXPECT_EQ(heat.WindowBytes(), 3000u);
  clock.Advance(600 * kMs);  // first add is now 1.1 s old
  EXPECT_EQ(heat.WindowBytes(), 2000u);
  clock.Advance(1000 * kMs);
  EXPECT_EQ(heat.WindowBytes(), 0u);
  heat.Add(7);  // a reused bucket restarts from zero
  EXPECT_EQ(heat.WindowBytes(), 7u);
}

TEST(HeatIndex, NoSlaUsesConfiguredDefault) {
  FakeClock clock(0);
  HeatConfig c;
  c.no_sla_us = 200;
  HeatIndex heat(std::nullopt, clock, c);
  heat.Add(2'000'000);  // 2 MB in a 1 s window = 2 MB/s
  EXPECT_DOUBLE_EQ(heat.Heat(), 1.0);
}

TEST(HeatIndex, ConcurrentAddsLoseNothing) {
  FakeClock clock(0);
  HeatIndex heat(100'000, clock);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) heat.Add(3);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(heat.WindowBytes(), 4u * 100000u * 3u);
}

TEST(HeatIndex, InvalidConfigIsRejected) {
  HeatConfig c;
  c.buckets = 0;
  EXPECT_FALSE(c.Validate().empty());
  c.buckets = HeatIndex::kMaxBuckets + 1;
  EXPECT_FALSE(c.Validate().empty());
}

}  // namespace
}  // namespace ff::sla
