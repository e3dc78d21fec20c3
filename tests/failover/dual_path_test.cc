// Dual-path canary verdicts: which path counters make the compared path "worse".
#include "core/dual_path.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

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

// Seen in a stress run (both NICs at 3% loss, CPUs saturated): one window's bursts put 4.54% on one
// path and 1.73% on the other. Past the ratio rule, but in loss events (~470 chances per path) the
// difference is 2.5 sigma: noise, not a worse path.
TEST(DualPath, ABurstyDifferenceBetweenEquallyLossyPathsIsNotSignificant) {
  DualPathVerdict v = JudgeDualPath(W(21272, 966, 280), W(20820, 360, 700), true);
  EXPECT_FALSE(v.subject_worse) << v.why;
  EXPECT_NE(v.why.find("(z 2."), std::string::npos) << v.why;
  // The same ratios over four times the traffic are evidence.
  EXPECT_TRUE(JudgeDualPath(W(4 * 21272, 4 * 966, 280), W(4 * 20820, 4 * 360, 700), false).subject_worse);
  // One NIC at 3% against a clean one, in one 30,000-segment window (the dual_one scenario): worse.
  EXPECT_TRUE(JudgeDualPath(W(30000, 900, 300), W(30000, 6, 300), false).subject_worse);
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

// A path whose counters the test sets; only Sample() and alive() matter to the comparison.
class CountersPath final : public Path {
 public:
  explicit CountersPath(int index) : Path(index) { s_.valid = true; }
  void Set(uint64_t segs, uint32_t retrans, uint32_t rtt_us) {
    s_.segs_out = segs;
    s_.retransmits = retrans;
    s_.rtt_us = rtt_us;
  }
  bool CanQueue() const override { return false; }
  void Queue(const FrameHeader&, const char*) override {}
  int queued_frames() const override { return 0; }
  uint64_t queued_payload_bytes() const override { return 0; }
  int queued_data_frames() const override { return 0; }
  bool Flush() override { return true; }
  void DropQueued() override {}
  void Fence() override {}
  void DiscardCurrentPayload() override {}
  PumpResult Poll(FrameSink&) override { return PumpResult::kIdle; }
  const std::string& rx_error() const override { return none_; }
  int last_errno() const override { return 0; }
  int64_t InFlightBytes() const override { return 0; }
  PathSample Sample() const override { return s_; }
  int PendingError() const override { return 0; }
  int LocalIfindex() const override { return 0; }
  std::string Describe() const override { return "counters"; }
  std::string DebugState() const override { return {}; }

 private:
  PathSample s_;
  std::string none_;
};

struct TwoPaths {
  std::vector<std::unique_ptr<Path>> paths;
  CountersPath& at(int i) { return static_cast<CountersPath&>(*paths[static_cast<size_t>(i)]); }
  TwoPaths() {
    paths.push_back(std::make_unique<CountersPath>(0));
    paths.push_back(std::make_unique<CountersPath>(1));
  }
};

// The CI failure this guards against: a path returning to service, during a window in which both
// paths lost alike, read a 5.33 ms srtt once at the window's end (vs 0.32 ms) and was drained again.
TEST(DualPath, OneHighRttReadingAtTheEndIsNotEvidence) {
  TwoPaths t;
  DualPathCompare c;
  c.Start(0, DualPathCompare::Kind::kReturn, 0, 400'000'000, t.paths);
  for (int ms = 0; ms < 400; ++ms) {
    c.ObserveRtt(0, 300 + ms % 50);
    c.ObserveRtt(1, 320 + ms % 40);
  }
  t.at(0).Set(58919, 141, 5330);
  t.at(1).Set(45373, 0, 320);
  const DualPathVerdict v = c.Finish(t.paths);
  EXPECT_TRUE(v.conclusive) << v.why;
  EXPECT_FALSE(v.subject_worse) << v.why;
}

TEST(DualPath, AConsistentlySlowerPathIsWorse) {
  TwoPaths t;
  DualPathCompare c;
  c.Start(0, DualPathCompare::Kind::kReturn, 0, 400'000'000, t.paths);
  for (int ms = 0; ms < 400; ++ms) {
    c.ObserveRtt(0, 9000 + ms);
    c.ObserveRtt(1, 400);
  }
  t.at(0).Set(50000, 0, 9500);
  t.at(1).Set(50000, 0, 400);
  const DualPathVerdict v = c.Finish(t.paths);
  EXPECT_TRUE(v.subject_worse) << v.why;
}

TEST(DualPath, WithoutObservationsTheEndReadingDecides) {
  TwoPaths t;
  DualPathCompare c;
  c.Start(0, DualPathCompare::Kind::kReturn, 0, 400'000'000, t.paths);
  t.at(0).Set(50000, 0, 20000);
  t.at(1).Set(50000, 0, 400);
  EXPECT_TRUE(c.Finish(t.paths).subject_worse);
  // Readings before Start() belong to no window.
  c.ObserveRtt(0, 100);
  c.Start(0, DualPathCompare::Kind::kReturn, 0, 400'000'000, t.paths);
  t.at(0).Set(100000, 0, 20000);
  t.at(1).Set(100000, 0, 400);
  EXPECT_TRUE(c.Finish(t.paths).subject_worse);
}

}  // namespace
}  // namespace ff
