// StreamPath::InFlightEstimate: the figure a sender's path choice weighs chunks by. The kernel's own
// (SIOCOUTQ) costs a system call, so it is read at most once per kInFlightRefreshNs; in between the
// estimate is that reading plus every byte written since - never less than what the path may still
// hold, so a path that stopped draining never looks emptier than it is.
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tcp/byte_stream.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/tcp/fd_stream.h"

namespace ff {
namespace {

struct Rig {
  std::unique_ptr<StreamPath> path;
  int peer = -1;
  std::vector<std::vector<char>> payloads;

  explicit Rig(bool visible = true) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    EXPECT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    path = std::make_unique<StreamPath>(0, std::make_unique<testing::FdStream>(fds[0], visible));
    peer = fds[1];
  }
  ~Rig() { close(peer); }

  // Queues and writes one data frame of `bytes` payload; returns what went on the wire.
  uint64_t Write(uint32_t bytes) {
    payloads.emplace_back(bytes, 'x');
    FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::kData);
    h.length = bytes;
    h.total = bytes;
    h.seq = payloads.size();
    SealHeader(&h);
    const uint64_t before = path->bytes_sent();
    path->Queue(h, payloads.back().data());
    EXPECT_TRUE(path->Flush());
    EXPECT_EQ(path->queued_frames(), 0) << "the socketpair did not take the whole frame";
    return path->bytes_sent() - before;
  }
  // Reads everything the path wrote so far.
  void Drain() {
    char buf[65536];
    while (read(peer, buf, sizeof(buf)) > 0) {
    }
  }
};

constexpr uint64_t kT0 = 5'000'000'000;  // any clock value; the estimate only compares them

TEST(StreamPathInFlight, TheFirstAskReadsTheKernel) {
  Rig r;
  r.Write(10000);
  const int64_t kernel = r.path->InFlightBytes();
  ASSERT_GT(kernel, 0) << "the peer read nothing, yet the kernel holds nothing for it";
  EXPECT_EQ(r.path->InFlightEstimate(kT0), kernel);
}

TEST(StreamPathInFlight, WithinTheRefreshIntervalTheReadingGrowsByWhatWasWritten) {
  Rig r;
  r.Write(10000);
  const int64_t first = r.path->InFlightEstimate(kT0);
  ASSERT_GT(first, 0);
  // The peer takes everything: the kernel's figure falls to 0, the estimate does not see it.
  r.Drain();
  ASSERT_EQ(r.path->InFlightBytes(), 0);
  EXPECT_EQ(r.path->InFlightEstimate(kT0 + 1), first);
  const uint64_t wrote = r.Write(5000);
  EXPECT_EQ(wrote, sizeof(FrameHeader) + 5000);
  EXPECT_EQ(r.path->InFlightEstimate(kT0 + StreamPath::kInFlightRefreshNs - 1), first + static_cast<int64_t>(wrote));
}

TEST(StreamPathInFlight, AnOlderReadingIsReplacedByAFreshOne) {
  Rig r;
  r.Write(10000);
  ASSERT_GT(r.path->InFlightEstimate(kT0), 0);
  r.Drain();
  EXPECT_EQ(r.path->InFlightEstimate(kT0 + StreamPath::kInFlightRefreshNs), 0);
  // The new reading is the base from now on.
  const uint64_t wrote = r.Write(3000);
  EXPECT_EQ(r.path->InFlightEstimate(kT0 + StreamPath::kInFlightRefreshNs + 10), static_cast<int64_t>(wrote));
}

TEST(StreamPathInFlight, AClockThatWentBackReadsTheKernelAgain) {
  Rig r;
  r.Write(10000);
  ASSERT_GT(r.path->InFlightEstimate(kT0), 0);
  r.Drain();
  EXPECT_EQ(r.path->InFlightEstimate(kT0 - 1), 0);
}

TEST(StreamPathInFlight, AnUnreadableFigureIsReportedAndNeverCached) {
  Rig r(/*visible=*/false);
  r.Write(1000);
  EXPECT_EQ(r.path->InFlightEstimate(kT0), -1);
  r.Write(1000);
  EXPECT_EQ(r.path->InFlightEstimate(kT0 + 1), -1) << "an unknown figure was taken as a reading";
}

}  // namespace
}  // namespace ff
