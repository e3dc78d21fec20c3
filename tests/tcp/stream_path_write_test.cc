// StreamPath's writes: none hands the kernel more than kMaxWriteBytes (Linux stops a larger write
// every 16 socket buffers to process acknowledgements, which on loopback ran the receiver's stack
// inside the write), frames queued together still leave in as few writes as that allows, and every
// byte goes out once, in order, whatever the socket accepts per write.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tcp/stream_path.h"

namespace ff {
namespace {

constexpr uint32_t kKiB = 1024;

// A socket that records what each write carried; it accepts at most the next cap of `caps` bytes
// (0: everything), or nothing once `budget` bytes are in (would block).
class RecordingStream final : public ByteStream {
 public:
  explicit RecordingStream(std::vector<size_t> caps = {}, size_t budget = SIZE_MAX)
      : caps_(std::move(caps)), budget_(budget) {}
  ssize_t Send(const iovec* iov, int iovcnt) override {
    size_t offered = 0;
    for (int i = 0; i < iovcnt; ++i) offered += iov[i].iov_len;
    offered_.push_back(offered);
    size_t take = std::min(offered, budget_ - bytes.size());
    if (!caps_.empty() && caps_[writes_ % caps_.size()] != 0) take = std::min(take, caps_[writes_ % caps_.size()]);
    ++writes_;
    const size_t before = bytes.size();
    for (int i = 0; i < iovcnt && take > 0; ++i) {
      const size_t n = std::min(take, iov[i].iov_len);
      bytes.append(static_cast<const char*>(iov[i].iov_base), n);
      take -= n;
    }
    return static_cast<ssize_t>(bytes.size() - before);  // 0: would block
  }
  ssize_t Recv(void*, size_t) override { return 0; }
  std::string Describe() const override { return "recording"; }
  int fd() const override { return -1; }
  void Unblock() { budget_ = SIZE_MAX; }

  std::string bytes;               // everything the socket accepted, in order
  std::vector<size_t> offered_;    // bytes offered per write

 private:
  std::vector<size_t> caps_;
  size_t budget_;
  size_t writes_ = 0;
};

struct Frames {
  std::vector<std::vector<char>> payloads;
  std::string expected;  // header + payload of every frame, in queue order

  void Add(uint32_t length, uint64_t seq) {
    FrameHeader h{};
    h.type = static_cast<uint8_t>(length ? FrameType::kData : FrameType::kAckRequest);
    h.length = length;
    h.total = length;
    h.seq = seq;
    SealHeader(&h);
    headers.push_back(h);
    payloads.emplace_back(length);
    for (uint32_t i = 0; i < length; ++i) payloads.back()[i] = static_cast<char>(seq * 31 + i * 7 + (i >> 10));
    expected.append(reinterpret_cast<const char*>(&h), sizeof(h));
    expected.append(payloads.back().data(), length);
  }
  void QueueAll(StreamPath& path) {
    for (size_t i = 0; i < headers.size(); ++i) path.Queue(headers[i], payloads[i].data());
  }
  std::vector<FrameHeader> headers;
};

TEST(StreamPathWrite, TwoQueuedHalfMegabyteChunksNeverMakeOneWriteOfAMegabyte) {
  auto owned = std::make_unique<RecordingStream>();
  RecordingStream& s = *owned;
  StreamPath path(0, std::move(owned));
  Frames f;
  for (uint64_t i = 0; i < 4; ++i) f.Add(512 * kKiB, i);  // two paths' worth of queued 512 KiB chunks
  f.QueueAll(path);
  ASSERT_TRUE(path.Flush());
  EXPECT_EQ(path.queued_frames(), 0);
  for (size_t w : s.offered_) EXPECT_LE(w, StreamPath::kMaxWriteBytes);
  // 2 MiB and four headers, in writes of at most 960 KiB: three writes, not four or more.
  EXPECT_EQ(s.offered_.size(), (f.expected.size() + StreamPath::kMaxWriteBytes - 1) / StreamPath::kMaxWriteBytes);
  EXPECT_TRUE(s.bytes == f.expected) << "the stream's bytes differ from the frames queued";
}

TEST(StreamPathWrite, SmallFramesStillLeaveTogether) {
  auto owned = std::make_unique<RecordingStream>();
  RecordingStream& s = *owned;
  StreamPath path(0, std::move(owned));
  Frames f;
  for (uint64_t i = 0; i < 20; ++i) f.Add(i % 3 == 0 ? 0 : 1 * kKiB, i);
  f.QueueAll(path);
  ASSERT_TRUE(path.Flush());
  EXPECT_EQ(s.offered_.size(), 1u);
  EXPECT_TRUE(s.bytes == f.expected);
}

TEST(StreamPathWrite, PartialWritesResumeMidHeaderAndMidPayloadWithinTheCap) {
  // The socket takes odd amounts: some writes end inside a header, some inside a payload.
  for (size_t cap : {size_t{13}, size_t{4099}, size_t{300 * kKiB}, size_t{700 * kKiB}}) {
    auto owned = std::make_unique<RecordingStream>(std::vector<size_t>{cap, cap / 2 + 1, 0});
    RecordingStream& s = *owned;
    StreamPath path(0, std::move(owned));
    Frames f;
    f.Add(600 * kKiB, 0);
    f.Add(0, 1);
    f.Add(512 * kKiB, 2);
    f.Add(40, 3);
    f.Add(1000 * kKiB, 4);
    f.QueueAll(path);
    ASSERT_TRUE(path.Flush()) << "cap " << cap;
    EXPECT_EQ(path.queued_frames(), 0) << "cap " << cap;
    for (size_t w : s.offered_) EXPECT_LE(w, StreamPath::kMaxWriteBytes) << "cap " << cap;
    EXPECT_TRUE(s.bytes == f.expected) << "cap " << cap;
  }
}

TEST(StreamPathWrite, ASocketThatFillsUpKeepsTheRestForTheNextFlush) {
  auto owned = std::make_unique<RecordingStream>(std::vector<size_t>{}, 700 * kKiB);
  RecordingStream& s = *owned;
  StreamPath path(0, std::move(owned));
  Frames f;
  for (uint64_t i = 0; i < 3; ++i) f.Add(512 * kKiB, i);
  f.QueueAll(path);
  ASSERT_TRUE(path.Flush());
  EXPECT_EQ(s.bytes.size(), 700 * kKiB);
  EXPECT_GT(path.queued_frames(), 0);
  s.Unblock();
  ASSERT_TRUE(path.Flush());
  EXPECT_EQ(path.queued_frames(), 0);
  for (size_t w : s.offered_) EXPECT_LE(w, StreamPath::kMaxWriteBytes);
  EXPECT_TRUE(s.bytes == f.expected);
}

}  // namespace
}  // namespace ff
