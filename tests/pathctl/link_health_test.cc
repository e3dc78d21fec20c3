// Link health debounce and recovery timing, driven by a fake clock.
#include <gtest/gtest.h>

#include "pathctl/link_health.h"

namespace ff::pathctl {
namespace {

using std::chrono::milliseconds;

class FakeClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() const override { return now; }
  void Advance(std::chrono::nanoseconds d) { now += d; }
  std::chrono::nanoseconds now{std::chrono::seconds(100)};
};

const HealthSignal kFecBad{HealthSignalKind::kFecErrorRate, 1e-5};

TEST(LinkHealth, CarrierDownActsImmediately) {
  FakeClock clock;
  LinkHealthTracker h(2, clock);
  auto t = h.Report(1, {HealthSignalKind::kCarrierDown});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, LinkState::kDown);
  EXPECT_EQ(h.state(0), LinkState::kUp);
}

TEST(LinkHealth, SoftSignalNeedsThreeDetectionsWithin500ms) {
  FakeClock clock;
  LinkHealthTracker h(1, clock);
  EXPECT_FALSE(h.Report(0, kFecBad));
  clock.Advance(milliseconds(200));
  EXPECT_FALSE(h.Report(0, kFecBad));
  clock.Advance(milliseconds(200));
  auto t = h.Report(0, kFecBad);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, LinkState::kDegraded);
}

TEST(LinkHealth, DetectionsSpreadOverMoreThan500msDoNotDegrade) {
  FakeClock clock;
  LinkHealthTracker h(1, clock);
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(h.Report(0, kFecBad)) << i;
    clock.Advance(milliseconds(260));  // never three inside one 500 ms window
  }
  EXPECT_EQ(h.state(0), LinkState::kUp);
}

TEST(LinkHealth, BelowThresholdFecAndDetectionsOnOtherLinksDoNotCount) {
  FakeClock clock;
  LinkHealthTracker h(2, clock);
  EXPECT_FALSE(h.Report(0, {HealthSignalKind::kFecErrorRate, 1e-7}));
  EXPECT_FALSE(h.Report(0, {HealthSignalKind::kFecErrorRate, 1e-7}));
  EXPECT_FALSE(h.Report(1, kFecBad));
  EXPECT_FALSE(h.Report(0, kFecBad));
  EXPECT_FALSE(h.Report(1, kFecBad));
  EXPECT_EQ(h.state(0), LinkState::kUp);
  EXPECT_TRUE(h.Report(1, {HealthSignalKind::kLoss, 0.01}));  // loss counts as a soft detection too
}

TEST(LinkHealth, RecoveryWaitsForStablePeriodAfterCarrierUp) {
  FakeClock clock;
  HealthPolicy p;
  p.recovery_stable = milliseconds(1000);
  LinkHealthTracker h(1, clock, p);
  h.Report(0, {HealthSignalKind::kCarrierDown});
  clock.Advance(milliseconds(5000));
  EXPECT_TRUE(h.Tick().empty());  // carrier still down: no recovery however long
  h.Report(0, {HealthSignalKind::kCarrierUp});
  clock.Advance(milliseconds(999));
  EXPECT_TRUE(h.Tick().empty());
  clock.Advance(milliseconds(1));
  auto ts = h.Tick();
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].from, LinkState::kDown);
  EXPECT_EQ(h.state(0), LinkState::kUp);
}

TEST(LinkHealth, SoftProblemDuringRecoveryRestartsTheStablePeriod) {
  FakeClock clock;
  LinkHealthTracker h(1, clock);  // default stable period 2 s
  for (int i = 0; i < 3; ++i) h.Report(0, kFecBad);
  ASSERT_EQ(h.state(0), LinkState::kDegraded);
  clock.Advance(milliseconds(1500));
  h.Report(0, kFecBad);
  clock.Advance(milliseconds(1500));
  EXPECT_TRUE(h.Tick().empty());
  clock.Advance(milliseconds(500));
  EXPECT_EQ(h.Tick().size(), 1u);
}

}  // namespace
}  // namespace ff::pathctl
