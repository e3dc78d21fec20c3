// Dual-path canary verdicts: which path counters make the compared path "worse".
#include "plugin/dual_path.h"

#include <gtest/gtest.h>

namespace ff {
namespace {

PathWindow W(uint64_t segs, uint64_t retrans, uint32_t rtt_us) {
  PathWindow w;
  w.valid = true;
  w.segs_out = segs;
  w.retrans = retrans;
  w.rtt_us = rtt_us;
  return w;
}

TEST(DualPath, LossyPathIsWorseThanACleanOne) {
  DualPathVerdict v = JudgeDualPath(W(10000, 1000, 300), W(10000, 0, 300), false);
  EXPECT_TRUE(v.subject_worse) << v.why;
  EXPECT_NE(v.why.find("10.00%"), std::string::npos) << v.why;
}

TEST(DualPath, EquallyLossyPathsAreNotWorse) {
  // Common-cause loss (e.g. at the receiving host): moving traffic would not help.
  EXPECT_FALSE(JudgeDualPath(W(10000, 1000, 300), W(10000, 900, 300), true).subject_worse);
}

TEST(DualPath, SmallLossDifferencesAreNoise) {
  EXPECT_FALSE(JudgeDualPath(W(10000, 15, 300), W(10000, 5, 300), true).subject_worse);
}

TEST(DualPath, MuchLongerRoundTripIsWorse) {
  EXPECT_TRUE(JudgeDualPath(W(10000, 0, 20000), W(10000, 0, 400), false).subject_worse);
  // 3x but only 1 ms apart: queueing noise, not a worse path.
  EXPECT_FALSE(JudgeDualPath(W(10000, 0, 1500), W(10000, 0, 400), false).subject_worse);
}

TEST(DualPath, WithoutEnoughTrafficTheCallerDecides) {
  EXPECT_TRUE(JudgeDualPath(W(10, 5, 300), W(10000, 0, 300), true).subject_worse);
  EXPECT_FALSE(JudgeDualPath(W(10, 5, 300), W(10000, 0, 300), false).subject_worse);
  EXPECT_TRUE(JudgeDualPath(W(10000, 1000, 300), W(3, 0, 300), true).subject_worse);
  EXPECT_FALSE(JudgeDualPath(W(10000, 1000, 300), PathWindow{}, false).subject_worse);
}

}  // namespace
}  // namespace ff
