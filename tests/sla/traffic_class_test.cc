#include "sla/traffic_class.h"

#include <gtest/gtest.h>

namespace ff::sla {
namespace {

TEST(TrafficClass, LevelMappingWhenNothingExplicit) {
  const auto l1 = DecideTrafficClass({true, -1, -1, SlaLevel::kLevel1});
  EXPECT_EQ(l1.source, TrafficClassSource::kLevel);
  EXPECT_EQ(l1.dscp, 46);
  EXPECT_EQ(l1.tos, 46 << 2);
  EXPECT_EQ(l1.sl, 2);
  EXPECT_EQ(DecideTrafficClass({true, -1, -1, SlaLevel::kLevel2}).dscp, 34);
  EXPECT_EQ(DecideTrafficClass({true, -1, -1, SlaLevel::kLevel3}).dscp, 10);
  EXPECT_EQ(DecideTrafficClass({true, -1, -1, SlaLevel::kLevel3}).sl, 0);
}

TEST(TrafficClass, CommConfigBeatsKnobBeatsLevel) {
  const auto a = DecideTrafficClass({true, 104, 72, SlaLevel::kLevel1});
  EXPECT_EQ(a.source, TrafficClassSource::kCommConfig);
  EXPECT_EQ(a.tos, 104);
  EXPECT_EQ(a.dscp, 26);
  EXPECT_EQ(a.sl, -1);
  const auto b = DecideTrafficClass({true, -1, 72, SlaLevel::kLevel1});
  EXPECT_EQ(b.source, TrafficClassSource::kKnob);
  EXPECT_EQ(b.tos, 72);
}

TEST(TrafficClass, ObserveOnlyLeavesDefaultUnlessCommConfigAsks) {
  const auto a = DecideTrafficClass({false, -1, 72, SlaLevel::kLevel1});
  EXPECT_EQ(a.source, TrafficClassSource::kLeaveDefault);
  EXPECT_EQ(a.tos, -1);
  EXPECT_EQ(a.sl, -1);
  EXPECT_EQ(DecideTrafficClass({false, 104, 72, SlaLevel::kLevel1}).source, TrafficClassSource::kCommConfig);
}

TEST(TrafficClass, OutOfRangeExplicitValuesCountAsUnset) {
  EXPECT_EQ(DecideTrafficClass({true, 256, -7, SlaLevel::kLevel2}).source, TrafficClassSource::kLevel);
}

TEST(TrafficClass, MapIsConfigurable) {
  TrafficClassMap m;
  m.dscp[0] = 26;
  m.sl[0] = 3;
  const auto d = DecideTrafficClass({true, -1, -1, SlaLevel::kLevel1}, m);
  EXPECT_EQ(d.dscp, 26);
  EXPECT_EQ(d.sl, 3);
}

}  // namespace
}  // namespace ff::sla
