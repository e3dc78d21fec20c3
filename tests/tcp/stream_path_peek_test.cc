// Lone receives (Path::HintLoneReceive): over TCP a small frame is peeked and left in the socket until
// a later read drops it, so the kernel's acknowledgement of it is not sent inside the read a reply
// waits on. Where the kernel continues each peek behind the last (SO_PEEK_OFF, TCP since Linux 6.10)
// several peeked frames wait together and one read drops them; elsewhere the next read does.
// What matters here: every frame arrives once, exact and in order, whatever follows it (small
// frames, a large payload read straight into its buffer), and nothing is left behind.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tcp/tcp_stream.h"

namespace ff {
namespace {

// A connected loopback TCP pair, non-blocking, TCP_NODELAY: {sending fd, receiving fd}.
std::pair<int, int> TcpLoopbackPair() {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(lfd, 1), 0);
  EXPECT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int cfd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(connect(cfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const int afd = accept(lfd, nullptr, nullptr);
  EXPECT_GE(afd, 0);
  close(lfd);
  const int one = 1;
  for (int fd : {cfd, afd}) {
    EXPECT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fd).ok());
  }
  return {cfd, afd};
}

// Bytes the kernel holds for reading on fd.
int Unread(int fd) {
  int n = -1;
  EXPECT_EQ(ioctl(fd, FIONREAD, &n), 0);
  return n;
}

// Writes one data frame (message `seq`, its payload filled from `seed`) whole, blocking until it is out.
void SendFrame(int fd, uint64_t seq, uint32_t bytes, int seed) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kData);
  h.length = bytes;
  h.total = bytes;
  h.seq = seq;
  SealHeader(&h);
  std::vector<char> frame(sizeof(h) + bytes);
  std::memcpy(frame.data(), &h, sizeof(h));
  for (uint32_t i = 0; i < bytes; ++i) frame[sizeof(h) + i] = static_cast<char>('a' + (seed * 7 + i) % 26);
  size_t off = 0;
  while (off < frame.size()) {
    const ssize_t w = send(fd, frame.data() + off, frame.size() - off, MSG_DONTWAIT);
    if (w > 0) off += static_cast<size_t>(w);
  }
}

// Gives each data frame its own buffer and records what arrived.
class Collector final : public FrameSink {
 public:
  HeaderVerdict OnHeader(Path&, const FrameHeader& h, char** dest) override {
    bufs.emplace_back(h.length);
    seqs.push_back(h.seq);
    *dest = bufs.back().data();
    return HeaderVerdict::kAccept;
  }
  void OnFrameComplete(Path&, const FrameHeader&) override { ++complete; }
  std::vector<std::vector<char>> bufs;
  std::vector<uint64_t> seqs;
  size_t complete = 0;
};

// Polls until `frames` frames are complete (or 5 s).
void PollUntil(StreamPath& path, Collector& sink, size_t frames) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (sink.complete < frames && std::chrono::steady_clock::now() < deadline) {
    const PumpResult r = path.Poll(sink);
    ASSERT_TRUE(r == PumpResult::kIdle) << "poll failed: " << static_cast<int>(r) << " " << path.rx_error();
  }
  ASSERT_EQ(sink.complete, frames);
}

// A TCP stream whose peeks always start at the first unread byte (as before Linux 6.10).
class NoPeekOffsetStream final : public ByteStream {
 public:
  explicit NoPeekOffsetStream(int fd) : tcp_(tcp::Socket(fd), "loopback recv, no peek offset") {}
  ssize_t Send(const iovec* iov, int iovcnt) override { return tcp_.Send(iov, iovcnt); }
  ssize_t Recv(void* buf, size_t len) override { return tcp_.Recv(buf, len); }
  ssize_t RecvV(const iovec* iov, int iovcnt) override { return tcp_.RecvV(iov, iovcnt); }
  bool CanPeek() const override { return true; }
  ssize_t Peek(void* buf, size_t len) override { return tcp_.Peek(buf, len); }
  ssize_t Skip(size_t len) override { return tcp_.Skip(len); }
  std::string Describe() const override { return tcp_.Describe(); }
  int fd() const override { return tcp_.fd(); }

 private:
  tcp::TcpStream tcp_;
};

// Whether this kernel continues TCP peeks behind the last one (SO_PEEK_OFF on a TCP socket).
bool KernelHasTcpPeekOffset() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  int zero = 0;
  const bool ok = setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) == 0;
  close(fd);
  return ok;
}

// The receiving path over rx: with the kernel's peek offsets where it has them (offsets = true), or
// without them whatever the kernel.
std::unique_ptr<StreamPath> ReceivingPath(int rx, bool offsets) {
  std::unique_ptr<ByteStream> s;
  if (offsets)
    s = std::make_unique<tcp::TcpStream>(tcp::Socket(rx), "loopback recv");
  else
    s = std::make_unique<NoPeekOffsetStream>(rx);
  return std::make_unique<StreamPath>(0, std::move(s));
}

class StreamPathPeekModes : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !KernelHasTcpPeekOffset())
      GTEST_SKIP() << "this kernel has no SO_PEEK_OFF for TCP (Linux 6.10 or later): the peek-offset mode is not used here";
  }
};

void ExpectPayload(const std::vector<char>& got, int seed) {
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], static_cast<char>('a' + (seed * 7 + i) % 26)) << "byte " << i;
}

TEST(StreamPathPeek, ALoneSmallFrameStaysInTheSocketUntilTheNextReadAndArrivesOnce) {
  auto [tx, rx] = TcpLoopbackPair();
  auto path_owner = ReceivingPath(rx, false);
  StreamPath& path = *path_owner;
  path.HintLoneReceive(true);
  Collector sink;
  SendFrame(tx, 0, 8, 1);
  PollUntil(path, sink, 1);
  ExpectPayload(sink.bufs[0], 1);
  // Delivered, yet still in the socket: only peeked.
  EXPECT_EQ(path.peeked_bytes(), sizeof(FrameHeader) + 8);
  EXPECT_EQ(Unread(rx), static_cast<int>(sizeof(FrameHeader) + 8));
  // The next read drops it first and delivers nothing twice.
  EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
  EXPECT_EQ(sink.complete, 1u);
  EXPECT_EQ(Unread(rx), 0);
  EXPECT_EQ(path.peeked_bytes(), 0u);
  close(tx);
}

TEST(StreamPathPeek, WithPeekOffsetsPeekedFramesAddUpInTheSocketAndOneReadDropsThem) {
  if (!KernelHasTcpPeekOffset())
    GTEST_SKIP() << "this kernel has no SO_PEEK_OFF for TCP (Linux 6.10 or later)";
  auto [tx, rx] = TcpLoopbackPair();
  auto path_owner = ReceivingPath(rx, true);
  StreamPath& path = *path_owner;
  path.HintLoneReceive(true);
  Collector sink;
  constexpr uint32_t kFrame = sizeof(FrameHeader) + 8;
  // A ping-pong's messages, one at a time: each delivered once, all of them left in the socket.
  const uint64_t kept = (StreamPath::kPeekKeepBytes + kFrame - 1) / kFrame;  // frames until the limit
  for (uint64_t s = 0; s < kept; ++s) {
    SendFrame(tx, s, 8, static_cast<int>(s));
    PollUntil(path, sink, s + 1);
    EXPECT_EQ(path.peeked_bytes(), (s + 1) * kFrame);
    EXPECT_EQ(Unread(rx), static_cast<int>((s + 1) * kFrame));
  }
  // At the limit, the next read drops them all in one go and peeks at what came since.
  SendFrame(tx, kept, 8, static_cast<int>(kept));
  PollUntil(path, sink, kept + 1);
  EXPECT_EQ(path.peeked_bytes(), kFrame);
  EXPECT_EQ(Unread(rx), static_cast<int>(kFrame));
  // An idle path drops what it peeked after kIdlePeeksBeforeConsume empty reads, and never before.
  for (int i = 0; i < StreamPath::kIdlePeeksBeforeConsume; ++i) {
    EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
    EXPECT_EQ(Unread(rx), static_cast<int>(kFrame)) << "dropped after " << i + 1 << " empty reads";
  }
  EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
  EXPECT_EQ(Unread(rx), 0);
  EXPECT_EQ(path.peeked_bytes(), 0u);
  ASSERT_EQ(sink.seqs.size(), kept + 1);
  for (uint64_t s = 0; s <= kept; ++s) {
    EXPECT_EQ(sink.seqs[s], s) << "frames out of order or repeated";
    ExpectPayload(sink.bufs[s], static_cast<int>(s));
  }
  // Peeked frames, then the path stops peeking (several receives posted): the read drops them
  // first and delivers only what is new.
  for (uint64_t s = kept + 1; s < kept + 4; ++s) {
    SendFrame(tx, s, 8, static_cast<int>(s));
    PollUntil(path, sink, s + 1);
  }
  EXPECT_EQ(Unread(rx), static_cast<int>(3 * kFrame));
  path.HintLoneReceive(false);
  SendFrame(tx, kept + 4, 300, 77);
  PollUntil(path, sink, kept + 5);
  EXPECT_EQ(Unread(rx), 0);
  EXPECT_EQ(path.peeked_bytes(), 0u);
  ASSERT_EQ(sink.seqs.size(), kept + 5);
  EXPECT_EQ(sink.seqs.back(), kept + 4);
  ExpectPayload(sink.bufs.back(), 77);
  close(tx);
}

TEST_P(StreamPathPeekModes, LoneFramesSmallAndLargeArriveOnceExactAndInOrderAndNothingIsLeftBehind) {
  auto [tx, rx] = TcpLoopbackPair();
  auto path_owner = ReceivingPath(rx, GetParam());
  StreamPath& path = *path_owner;
  path.HintLoneReceive(true);
  Collector sink;
  // A ping-pong's messages, then small frames back to back and a large payload read straight into
  // its buffer right behind peeked frames: each once, exact, in order.
  uint64_t seq = 0;
  for (int i = 0; i < 60; ++i) {
    SendFrame(tx, seq, static_cast<uint32_t>(1 + i * 9), static_cast<int>(seq));
    PollUntil(path, sink, seq + 1);
    ++seq;
  }
  SendFrame(tx, seq++, 100, 50);
  PollUntil(path, sink, seq);
  SendFrame(tx, seq++, 3, 51);
  SendFrame(tx, seq++, 256 * 1024, 52);
  SendFrame(tx, seq++, 40, 53);
  PollUntil(path, sink, seq);
  ASSERT_EQ(sink.seqs.size(), seq);
  for (uint64_t s = 0; s < seq; ++s) EXPECT_EQ(sink.seqs[s], s) << "frames out of order or repeated";
  for (uint64_t s = 0; s + 4 < seq; ++s) ExpectPayload(sink.bufs[s], static_cast<int>(s));
  ExpectPayload(sink.bufs[seq - 4], 50);
  ExpectPayload(sink.bufs[seq - 3], 51);
  ExpectPayload(sink.bufs[seq - 2], 52);
  ExpectPayload(sink.bufs[seq - 1], 53);
  for (int i = 0; i <= StreamPath::kIdlePeeksBeforeConsume; ++i) EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
  EXPECT_EQ(Unread(rx), 0) << "bytes left in the socket after every frame was delivered";
  EXPECT_EQ(sink.complete, seq);
  close(tx);
}

TEST_P(StreamPathPeekModes, WithoutTheHintOrWhenAPeekFillsItsRoomTheBytesAreConsumedAtOnce) {
  auto [tx, rx] = TcpLoopbackPair();
  auto path_owner = ReceivingPath(rx, GetParam());
  StreamPath& path = *path_owner;
  Collector sink;
  SendFrame(tx, 0, 8, 1);
  PollUntil(path, sink, 1);
  EXPECT_EQ(path.peeked_bytes(), 0u);
  EXPECT_EQ(Unread(rx), 0);
  // Hinted, but a burst more than one peek holds: a stream, read (consumed) as it comes.
  path.HintLoneReceive(true);
  for (uint64_t s = 1; s <= 40; ++s) SendFrame(tx, s, 200, static_cast<int>(s));
  PollUntil(path, sink, 41);
  EXPECT_LE(path.peeked_bytes(), StreamPath::kPeekMaxBytes);
  EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
  EXPECT_EQ(Unread(rx), 0);
  for (uint64_t s = 1; s <= 40; ++s) ExpectPayload(sink.bufs[s], static_cast<int>(s));
  close(tx);
}

TEST_P(StreamPathPeekModes, APeerThatClosesAfterPeekedFramesIsSeenAsClosed) {
  auto [tx, rx] = TcpLoopbackPair();
  auto path_owner = ReceivingPath(rx, GetParam());
  StreamPath& path = *path_owner;
  path.HintLoneReceive(true);
  Collector sink;
  SendFrame(tx, 0, 16, 4);
  PollUntil(path, sink, 1);
  ExpectPayload(sink.bufs[0], 4);
  SendFrame(tx, 1, 24, 5);
  PollUntil(path, sink, 2);
  ExpectPayload(sink.bufs[1], 5);
  close(tx);
  PumpResult r = PumpResult::kIdle;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (r == PumpResult::kIdle && std::chrono::steady_clock::now() < deadline) r = path.Poll(sink);
  EXPECT_EQ(r, PumpResult::kClosed);
  EXPECT_EQ(sink.complete, 2u) << "a peeked frame was delivered again";
}

INSTANTIATE_TEST_SUITE_P(PeekOffsets, StreamPathPeekModes, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "WithPeekOffsets" : "WithoutPeekOffsets"; });

}  // namespace
}  // namespace ff
