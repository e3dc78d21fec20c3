// Lone receives (Path::HintLoneReceive): over TCP a small frame is peeked and left in the socket until
// the next read drops it, so the kernel's acknowledgement of it is not sent inside the read a reply
// waits on. What matters here: every frame arrives once, exact and in order, whatever follows it
// (small frames, a large payload read straight into its buffer), and nothing is left behind.
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

void ExpectPayload(const std::vector<char>& got, int seed) {
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], static_cast<char>('a' + (seed * 7 + i) % 26)) << "byte " << i;
}

TEST(StreamPathPeek, ALoneSmallFrameStaysInTheSocketUntilTheNextReadAndArrivesOnce) {
  auto [tx, rx] = TcpLoopbackPair();
  StreamPath path(0, std::make_unique<tcp::TcpStream>(tcp::Socket(rx), "loopback recv"));
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
  // A ping-pong's next messages, then small frames back to back and a large payload read straight
  // into its buffer right behind a peeked frame: each once, exact, in order.
  uint64_t seq = 1;
  for (int i = 0; i < 20; ++i) {
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
  ExpectPayload(sink.bufs[seq - 4], 50);
  ExpectPayload(sink.bufs[seq - 3], 51);
  ExpectPayload(sink.bufs[seq - 2], 52);
  ExpectPayload(sink.bufs[seq - 1], 53);
  EXPECT_EQ(path.Poll(sink), PumpResult::kIdle);
  EXPECT_EQ(Unread(rx), 0) << "bytes left in the socket after every frame was delivered";
  EXPECT_EQ(sink.complete, seq);
  close(tx);
}

TEST(StreamPathPeek, WithoutTheHintOrWhenAPeekFillsItsRoomTheBytesAreConsumedAtOnce) {
  auto [tx, rx] = TcpLoopbackPair();
  StreamPath path(0, std::make_unique<tcp::TcpStream>(tcp::Socket(rx), "loopback recv"));
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

TEST(StreamPathPeek, APeerThatClosesAfterAPeekedFrameIsSeenAsClosed) {
  auto [tx, rx] = TcpLoopbackPair();
  StreamPath path(0, std::make_unique<tcp::TcpStream>(tcp::Socket(rx), "loopback recv"));
  path.HintLoneReceive(true);
  Collector sink;
  SendFrame(tx, 0, 16, 4);
  PollUntil(path, sink, 1);
  ExpectPayload(sink.bufs[0], 4);
  close(tx);
  PumpResult r = PumpResult::kIdle;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (r == PumpResult::kIdle && std::chrono::steady_clock::now() < deadline) r = path.Poll(sink);
  EXPECT_EQ(r, PumpResult::kClosed);
  EXPECT_EQ(sink.complete, 1u) << "the peeked frame was delivered again";
}

}  // namespace
}  // namespace ff
