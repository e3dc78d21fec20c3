#include "sla/sla_level.h"

#include <gtest/gtest.h>

namespace ff::sla {
namespace {

TEST(SlaLevel, BoundariesFollowTheArticle) {
  EXPECT_EQ(ClassifySla(49'999), SlaLevel::kLevel1);
  EXPECT_EQ(ClassifySla(50'000), SlaLevel::kLevel2);
  EXPECT_EQ(ClassifySla(100'000), SlaLevel::kLevel2);
  EXPECT_EQ(ClassifySla(100'001), SlaLevel::kLevel3);
  EXPECT_EQ(ClassifySla(std::nullopt), SlaLevel::kLevel3);
}

TEST(SlaLevel, ThresholdsAreKnobs) {
  SlaLevelPolicy p;
  p.level1_below_ns = 10'000;
  p.level2_up_to_ns = 20'000;
  EXPECT_EQ(ClassifySla(15'000, p), SlaLevel::kLevel2);
  EXPECT_EQ(ClassifySla(25'000, p), SlaLevel::kLevel3);
  EXPECT_TRUE(p.Validate().empty());
  p.level2_up_to_ns = 5'000;
  EXPECT_FALSE(p.Validate().empty());
  p = {};
  p.level3_bandwidth_cap = 1.5;
  EXPECT_FALSE(p.Validate().empty());
}

TEST(SlaLevel, PermitsNarrowWithTighterSla) {
  EXPECT_EQ(PermitsFor(SlaLevel::kLevel1).max_tier, MaxTier::kSingleHop);
  EXPECT_EQ(PermitsFor(SlaLevel::kLevel2).max_tier, MaxTier::kCrossLeafNoTop);
  EXPECT_EQ(PermitsFor(SlaLevel::kLevel3).max_tier, MaxTier::kAny);
  EXPECT_DOUBLE_EQ(PermitsFor(SlaLevel::kLevel1).bandwidth_cap, 1.0);
  EXPECT_DOUBLE_EQ(PermitsFor(SlaLevel::kLevel3).bandwidth_cap, 0.8);
  SlaLevelPolicy p;
  p.level3_bandwidth_cap = 0.5;
  EXPECT_DOUBLE_EQ(PermitsFor(SlaLevel::kLevel3, p).bandwidth_cap, 0.5);
  EXPECT_STREQ(MaxTierName(MaxTier::kCrossLeafNoTop), "cross-leaf-no-top-tier");
  EXPECT_STREQ(SlaLevelName(SlaLevel::kLevel2), "level2");
}

}  // namespace
}  // namespace ff::sla
