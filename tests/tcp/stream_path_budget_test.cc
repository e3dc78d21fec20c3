// StreamPath::Poll has a per-call budget: a flood of control frames cannot pin one progress call.
#include "tcp/stream_path.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace ff {
namespace {

// A stream that always has more kAckRequest frames to give (up to `frames`), as a flooding peer would.
class FloodStream final : public ByteStream {
 public:
  explicit FloodStream(uint64_t frames) : left_bytes_(frames * sizeof(FrameHeader)) {
    frame_.type = static_cast<uint8_t>(FrameType::kAckRequest);
    SealHeader(&frame_);
  }
  ssize_t Send(const iovec*, int) override { return 0; }
  ssize_t Recv(void* buf, size_t len) override {
    size_t n = std::min<uint64_t>(len, left_bytes_);
    auto* out = static_cast<char*>(buf);
    for (size_t i = 0; i < n; ++i, ++pos_) out[i] = reinterpret_cast<const char*>(&frame_)[pos_ % sizeof(frame_)];
    left_bytes_ -= n;
    return static_cast<ssize_t>(n);  // 0 once the flood is over: would block
  }
  std::string Describe() const override { return "flood"; }
  int fd() const override { return -1; }

 private:
  FrameHeader frame_{};
  uint64_t left_bytes_;
  uint64_t pos_ = 0;
};

class CountingSink final : public FrameSink {
 public:
  HeaderVerdict OnHeader(Path&, const FrameHeader&, char** dest) override {
    *dest = nullptr;
    return HeaderVerdict::kAccept;
  }
  void OnFrameComplete(Path&, const FrameHeader&) override { ++frames; }
  uint64_t frames = 0;
};

TEST(StreamPathBudget, FloodOfControlFramesIsDeliveredAtMostABudgetPerPoll) {
  constexpr uint64_t kFlood = 1'000'000;
  StreamPath path(0, std::make_unique<FloodStream>(kFlood));
  CountingSink sink;
  EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
  EXPECT_GT(sink.frames, 0u);
  EXPECT_LE(sink.frames, static_cast<uint64_t>(StreamPath::kMaxFramesPerPoll))
      << "one Poll call consumed the flood: a peer can pin the caller";
  // Nothing is lost: later calls deliver the rest.
  int calls = 1;
  while (sink.frames < kFlood && calls < 10'000) {
    (void)path.Poll(sink);
    ++calls;
  }
  EXPECT_EQ(sink.frames, kFlood);
}

}  // namespace
}  // namespace ff
