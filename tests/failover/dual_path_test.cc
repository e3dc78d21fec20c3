// Dual-path canary verdicts: which path counters make the compared path "worse".
#include "core/dual_path.h"

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
  DualPathVerdict v = JudgeDualPath(W(100000, 10000, 300), W(100000, 0, 300), false);
  EXPECT_TRUE(v.subject_worse) << v.why;
  EXPECT_NE(v.why.find("10.00%"), std::string::npos) << v.why;
}

TEST(DualPath, EquallyLossyPathsAreNotWorse) {
  // Common-cause loss (e.g. at the receiving host): moving traffic would not help.
  EXPECT_FALSE(JudgeDualPath(W(100000, 3040, 300), W(100000, 1260, 300), true).subject_worse);
  EXPECT_FALSE(JudgeDualPath(W(100000, 10000, 300), W(100000, 9000, 300), true).subject_worse);
}

TEST(DualPath, SmallLossDifferencesAreNoise) {
  EXPECT_FALSE(JudgeDualPath(W(100000, 150, 300), W(100000, 50, 300), true).subject_worse);
}

TEST(DualPath, MuchLongerRoundTripIsWorse) {
  EXPECT_TRUE(JudgeDualPath(W(100000, 0, 20000), W(100000, 0, 400), false).subject_worse);
  // 3x but only 1 ms apart: queueing noise, not a worse path.
  EXPECT_FALSE(JudgeDualPath(W(100000, 0, 1500), W(100000, 0, 400), false).subject_worse);
}

TEST(DualPath, WithoutEnoughTrafficTheCallerDecides) {
  EXPECT_TRUE(JudgeDualPath(W(10, 5, 300), W(100000, 0, 300), true).subject_worse);
  EXPECT_FALSE(JudgeDualPath(W(10, 5, 300), W(100000, 0, 300), false).subject_worse);
  // 1,500 segments without a retransmission is ~30 packets under segmentation offload: no evidence.
  EXPECT_TRUE(JudgeDualPath(W(100000, 3000, 300), W(1500, 0, 300), true).subject_worse);
  EXPECT_FALSE(JudgeDualPath(W(100000, 3000, 300), W(1500, 0, 300), false).subject_worse);
  EXPECT_FALSE(JudgeDualPath(W(100000, 10000, 300), PathWindow{}, false).subject_worse);
}

}  // namespace
}  // namespace ff
