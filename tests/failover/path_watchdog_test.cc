// PathWatchdog's stall decision, driven with synthetic TCP_INFO samples (no sockets, no sleeps).
#include <gtest/gtest.h>

#include "plugin/path_health.h"

namespace ff {
namespace {

constexpr uint64_t kMs = 1'000'000;

TcpProgress Sample(uint32_t unacked, uint64_t bytes_acked, uint32_t ms_since_ack) {
  TcpProgress tp;
  tp.valid = true;
  tp.unacked_segments = unacked;
  tp.bytes_acked = bytes_acked;
  tp.ms_since_ack = ms_since_ack;
  return tp;
}

TEST(PathWatchdog, DeclaresStallWhenBytesInFlightGetNoAckForTheStallTime) {
  PathWatchdog w(20 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 0), 100 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 19), 119 * kMs, &rep));
  ASSERT_TRUE(w.Judge(0, Sample(10, 1000, 21), 121 * kMs, &rep));
  EXPECT_EQ(rep.path, 0);
  EXPECT_EQ(rep.cause, PathFault::kStalled);
  EXPECT_EQ(rep.silent_ns, 21 * kMs);
}

TEST(PathWatchdog, PeerThatSelectivelyAcknowledgedGetsTwiceTheRetransmissionTimeout) {
  // A lost retransmission: the window is full of segments the peer holds out of order, so no
  // acknowledgement can arrive until TCP's own timeout (204 ms) re-sends. Not a dead link.
  PathWatchdog w(100 * kMs, false);
  PathFaultReport rep;
  TcpProgress tp = Sample(135, 5000, 0);
  tp.sacked = 120;
  tp.ca_state = PathWatchdog::kCaRecovery;
  tp.rto_us = 204'000;
  EXPECT_FALSE(w.Judge(0, tp, 1000 * kMs, &rep));
  tp.ms_since_ack = 104;
  EXPECT_FALSE(w.Judge(0, tp, 1104 * kMs, &rep));
  tp.ms_since_ack = 400;
  EXPECT_FALSE(w.Judge(0, tp, 1400 * kMs, &rep));
  tp.ms_since_ack = 410;
  ASSERT_TRUE(w.Judge(0, tp, 1410 * kMs, &rep));
  EXPECT_NE(rep.detail.find("120 selectively acknowledged"), std::string::npos) << rep.detail;
  // The same silence without selective acknowledgements is a dead path after the stall time.
  PathWatchdog fresh(100 * kMs, false);
  TcpProgress dead = Sample(135, 5000, 0);
  dead.rto_us = 204'000;
  EXPECT_FALSE(fresh.Judge(0, dead, 1000 * kMs, &rep));
  dead.ms_since_ack = 104;
  EXPECT_TRUE(fresh.Judge(0, dead, 1104 * kMs, &rep));
}

TEST(PathWatchdog, SilentPathIsDeadEarlyWhenAnotherPathIsBeingAcknowledged) {
  PathWatchdog w(100 * kMs, false, 10 * kMs);
  PathFaultReport rep;
  // Both paths busy; at t=1000 ms path 0 goes silent, path 1 keeps advancing.
  EXPECT_FALSE(w.Judge(0, Sample(50, 1000, 0), 1000 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 1000, 0), 1000 * kMs, &rep));
  uint64_t acked1 = 1000;
  for (uint64_t t = 1001; t <= 1009; ++t) {
    EXPECT_FALSE(w.Judge(0, Sample(50, 1000, static_cast<uint32_t>(t - 1000)), t * kMs, &rep));
    EXPECT_FALSE(w.Judge(1, Sample(50, acked1 += 100, 0), t * kMs, &rep));
    // Judge() only updates state; JudgeRelative() is what Check() runs after sampling every path.
    EXPECT_FALSE(w.JudgeRelative(0, t * kMs, &rep)) << "at " << t << " ms";
  }
  EXPECT_FALSE(w.Judge(0, Sample(50, 1000, 10), 1010 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, acked1 += 100, 0), 1010 * kMs, &rep));
  ASSERT_TRUE(w.JudgeRelative(0, 1010 * kMs, &rep));
  EXPECT_EQ(rep.cause, PathFault::kSilent);
  EXPECT_NE(rep.detail.find("while path 1 was acknowledged"), std::string::npos) << rep.detail;
  EXPECT_FALSE(w.JudgeRelative(1, 1010 * kMs, &rep));
}

TEST(PathWatchdog, RelativeRuleWaitsEightRoundTripsOnALongPath) {
  // 5 ms round trip (a long fabric): 10 ms of silence is two round trips, not a dead path; 40 ms is.
  PathWatchdog w(100 * kMs, false, 10 * kMs);
  PathFaultReport rep;
  TcpProgress far = Sample(50, 1000, 0);
  far.rtt_us = 5000;
  EXPECT_FALSE(w.Judge(0, far, 1000 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 1000, 0), 1000 * kMs, &rep));
  far.ms_since_ack = 20;
  EXPECT_FALSE(w.Judge(0, far, 1020 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 9000, 0), 1020 * kMs, &rep));
  EXPECT_FALSE(w.JudgeRelative(0, 1020 * kMs, &rep));
  far.ms_since_ack = 40;
  EXPECT_FALSE(w.Judge(0, far, 1040 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 19000, 0), 1040 * kMs, &rep));
  EXPECT_TRUE(w.JudgeRelative(0, 1040 * kMs, &rep));
}

TEST(PathWatchdog, RelativeRuleNeedsAnotherPathMakingProgress) {
  // The whole host stalled (no path acknowledged): only the absolute rule may fire, later.
  PathWatchdog w(100 * kMs, false, 10 * kMs);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(0, Sample(50, 1000, 0), 1000 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 2000, 0), 1000 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(50, 1000, 30), 1030 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 2000, 30), 1030 * kMs, &rep));
  EXPECT_FALSE(w.JudgeRelative(0, 1030 * kMs, &rep));
  EXPECT_FALSE(w.JudgeRelative(1, 1030 * kMs, &rep));
}

TEST(PathWatchdog, RelativeRuleSparesAPathRecoveringALoss) {
  PathWatchdog w(100 * kMs, false, 10 * kMs);
  PathFaultReport rep;
  TcpProgress lossy = Sample(50, 1000, 0);
  lossy.sacked = 20;
  EXPECT_FALSE(w.Judge(0, lossy, 1000 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 1000, 0), 1000 * kMs, &rep));
  lossy.ms_since_ack = 30;
  EXPECT_FALSE(w.Judge(0, lossy, 1030 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(50, 5000, 0), 1030 * kMs, &rep));
  EXPECT_FALSE(w.JudgeRelative(0, 1030 * kMs, &rep));
}

TEST(PathWatchdog, CumulativeAckProgressKeepsPathAliveAfterALongGapBetweenSamples) {
  // The proxy thread was descheduled for 500 ms, but the kernel kept receiving acks meanwhile.
  PathWatchdog w(20 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 0), 100 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(10, 900000, 30), 600 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(10, 900000, 30), 610 * kMs, &rep));
}

TEST(PathWatchdog, DuplicateAcksWithoutCumulativeProgressKeepPathAlive) {
  // A lost segment awaiting fast retransmit: SACKs keep arriving, bytes_acked stands still.
  PathWatchdog w(20 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 0), 100 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 2), 150 * kMs, &rep));
}

TEST(PathWatchdog, IdleSocketIsNeverStalledHoweverOldItsLastAck) {
  PathWatchdog w(20 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(1, Sample(0, 5000, 60000), 100 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(0, 5000, 60000), 10000 * kMs, &rep));
  // Bytes go out after the long idle period: the clock starts from the last idle sample.
  EXPECT_FALSE(w.Judge(1, Sample(3, 5000, 60000), 10001 * kMs, &rep));
  EXPECT_FALSE(w.Judge(1, Sample(3, 5000, 60000), 10019 * kMs, &rep));
  EXPECT_TRUE(w.Judge(1, Sample(3, 5000, 60000), 10022 * kMs, &rep));
}

TEST(PathWatchdog, SingleSegmentWaitingForDelayedAckIsNotAStall) {
  PathWatchdog w(20 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(0, Sample(1, 1000, 0), 100 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(1, 1000, 45), 145 * kMs, &rep));
}

TEST(PathWatchdog, StallDetectionOffWhenStallTimeIsZero) {
  PathWatchdog w(0, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.enabled());
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 0), 1 * kMs, &rep));
  EXPECT_FALSE(w.Judge(0, Sample(10, 1000, 99999), 100000 * kMs, &rep));
}

TEST(PathWatchdog, InvalidProbeIsIgnored) {
  PathWatchdog w(20 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.Judge(0, TcpProgress{}, 1000 * kMs, &rep));
}

TEST(PathWatchdogSoft, ThreeRetransmitWindowsWithin500msDegradeThePath) {
  PathWatchdog w(100 * kMs, false);
  PathFaultReport rep;
  uint32_t retrans = 0;
  EXPECT_FALSE(w.JudgeSoft(0, retrans, 0, &rep));  // first sample: baseline only
  bool degraded = false;
  uint64_t at = 0;
  for (uint64_t t = kMs; t <= 400 * kMs && !degraded; t += kMs) {
    if (t % (10 * kMs) == 0) ++retrans;  // a few retransmissions in every 50 ms window
    degraded = w.JudgeSoft(0, retrans, t, &rep);
    at = t;
  }
  ASSERT_TRUE(degraded);
  EXPECT_EQ(rep.cause, PathFault::kRetransmits);
  EXPECT_TRUE(IsSoftFault(rep.cause));
  EXPECT_EQ(at, 150 * kMs);  // the third 50 ms window with a retransmission
}

TEST(PathWatchdogSoft, RetransmitWindowsSpreadOverMoreThan500msNeverDegrade) {
  PathWatchdog w(100 * kMs, false);
  PathFaultReport rep;
  uint32_t retrans = 0;
  EXPECT_FALSE(w.JudgeSoft(0, retrans, 0, &rep));
  // One retransmission every 300 ms: never 3 detections inside 500 ms.
  for (uint64_t t = kMs; t <= 5000 * kMs; t += kMs) {
    if (t % (300 * kMs) == 0) ++retrans;
    ASSERT_FALSE(w.JudgeSoft(0, retrans, t, &rep)) << "at " << t / kMs << " ms";
  }
}

TEST(PathWatchdogSoft, DrainedPathIsReadmittedOnlyAfterTheFailbackTimeWithoutRetransmissions) {
  PathWatchdog w(100 * kMs, false);
  PathFaultReport rep;
  EXPECT_FALSE(w.JudgeSoft(1, 0, 0, &rep));
  w.NoteDrained(1, 10 * kMs);
  EXPECT_FALSE(w.ReadyToReadmit(1, 400 * kMs));
  // A retransmission at 300 ms (the drained path still finishes its queued chunks) restarts the clock.
  (void)w.JudgeSoft(1, 1, 300 * kMs, &rep);
  EXPECT_FALSE(w.ReadyToReadmit(1, 700 * kMs));
  EXPECT_TRUE(w.ReadyToReadmit(1, 800 * kMs));
}

TEST(PathWatchdogSoft, RepeatedDrainsDoubleTheFailbackTime) {
  PathWatchdog w(100 * kMs, false);
  w.NoteDrained(0, 0);
  EXPECT_TRUE(w.ReadyToReadmit(0, 500 * kMs));
  w.NoteReadmitted(0);
  w.NoteDrained(0, 1000 * kMs);
  EXPECT_FALSE(w.ReadyToReadmit(0, 1500 * kMs));
  EXPECT_TRUE(w.ReadyToReadmit(0, 2000 * kMs));
}

}  // namespace
}  // namespace ff
