#include "sla/pacing.h"

#include <gtest/gtest.h>

namespace ff::sla {
namespace {

PacingInputs Steered(SlaLevel level, int64_t mbps, int npaths) {
  PacingInputs in;
  in.steer = true;
  in.level = level;
  in.link_mbps = mbps;
  in.npaths = npaths;
  return in;
}

TEST(PacingTest, Level3IsCappedAtEightyPercentSplitOverPaths) {
  PacingDecision d = DecidePacing(Steered(SlaLevel::kLevel3, 400, 2));
  EXPECT_EQ(d.connection_bytes_per_s, 40'000'000u);  // 320 Mbit/s
  EXPECT_EQ(d.path_bytes_per_s, 20'000'000u);
}

TEST(PacingTest, CapPercentKnobChangesTheRate) {
  PacingInputs in = Steered(SlaLevel::kLevel3, 10'000, 1);
  in.level3_cap_pct = 50;
  EXPECT_EQ(DecidePacing(in).path_bytes_per_s, 625'000'000u);
}

TEST(PacingTest, Level1And2AreNeverPaced) {
  EXPECT_EQ(DecidePacing(Steered(SlaLevel::kLevel1, 400, 2)).path_bytes_per_s, 0u);
  EXPECT_EQ(DecidePacing(Steered(SlaLevel::kLevel2, 400, 2)).path_bytes_per_s, 0u);
}

TEST(PacingTest, ObserveOnlyChangesNothing) {
  PacingInputs in = Steered(SlaLevel::kLevel3, 400, 2);
  in.steer = false;
  EXPECT_EQ(DecidePacing(in).path_bytes_per_s, 0u);
  EXPECT_STREQ(DecidePacing(in).reason, "observe only");
}

TEST(PacingTest, UnknownLinkSpeedOrFullCapLeavesUnpaced) {
  EXPECT_EQ(DecidePacing(Steered(SlaLevel::kLevel3, 0, 2)).path_bytes_per_s, 0u);
  PacingInputs in = Steered(SlaLevel::kLevel3, 400, 2);
  in.level3_cap_pct = 100;
  EXPECT_EQ(DecidePacing(in).path_bytes_per_s, 0u);
}

TEST(PacingTest, TinyRateNeverRoundsToUnpaced) {
  PacingInputs in = Steered(SlaLevel::kLevel3, 1, 16);
  in.level3_cap_pct = 1;
  EXPECT_GT(DecidePacing(in).path_bytes_per_s, 0u);
}

}  // namespace
}  // namespace ff::sla
