// How a striped message's chunks pick their path: the least loaded, where the load counts what the
// transport still holds (a stream's SIOCOUTQ, a system call). That reading is taken at most once per
// path per scheduling pass, and not at all when only one path can take a chunk - it used to cost one
// call per path for every chunk (two per 512 KiB on two paths).
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

using testing::FdStream;

// A stream path over a socketpair end (SIOCOUTQ works there) that counts the transport-load reads
// and the data chunks queued on it.
class CountingPath final : public Path {
 public:
  CountingPath(int index, int fd) : Path(index), inner_(index, std::make_unique<FdStream>(fd, true)) {}

  int load_reads() const { return load_reads_; }
  int chunks() const { return chunks_; }

  bool CanQueue() const override { return inner_.CanQueue(); }
  void Queue(const FrameHeader& h, const char* payload) override { inner_.Queue(h, payload); }
  void QueueData(const FrameHeader& h, const char* payload, const RecvDescriptor& dest,
                 const MemHandle* mem) override {
    ++chunks_;
    inner_.QueueData(h, payload, dest, mem);
  }
  int queued_frames() const override { return inner_.queued_frames(); }
  uint64_t queued_payload_bytes() const override { return inner_.queued_payload_bytes(); }
  int queued_data_frames() const override { return inner_.queued_data_frames(); }
  bool Flush() override { return inner_.Flush(); }
  void DropQueued() override { inner_.DropQueued(); }
  void Fence() override { inner_.Fence(); }
  void DiscardCurrentPayload() override { inner_.DiscardCurrentPayload(); }
  PumpResult Poll(FrameSink& sink) override {
    Forward fwd(sink, *this);
    return inner_.Poll(fwd);
  }
  const std::string& rx_error() const override { return inner_.rx_error(); }
  int last_errno() const override { return inner_.last_errno(); }
  int64_t InFlightBytes() const override {
    ++load_reads_;
    return inner_.InFlightBytes();
  }
  PathSample Sample() const override { return PathSample{}; }
  int PendingError() const override { return 0; }
  int LocalIfindex() const override { return 0; }
  std::string Describe() const override { return "counting " + inner_.Describe(); }
  std::string DebugState() const override { return inner_.DebugState(); }

 private:
  // The communicator sees this path, not the inner one, as the frames' path.
  class Forward final : public FrameSink {
   public:
    Forward(FrameSink& s, Path& p) : sink_(s), path_(p) {}
    HeaderVerdict OnHeader(Path&, const FrameHeader& h, char** dest) override { return sink_.OnHeader(path_, h, dest); }
    void OnFrameComplete(Path&, const FrameHeader& h) override { sink_.OnFrameComplete(path_, h); }

   private:
    FrameSink& sink_;
    Path& path_;
  };

  StreamPath inner_;
  mutable int load_reads_ = 0;
  int chunks_ = 0;
};

struct Pair {
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  std::vector<CountingPath*> sp;
};

Pair MakePair(const CommOptions& o, int npaths) {
  Pair p;
  std::vector<std::unique_ptr<Path>> s, r;
  for (int i = 0; i < npaths; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    EXPECT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    auto a = std::make_unique<CountingPath>(i, fds[0]);
    p.sp.push_back(a.get());
    s.push_back(std::move(a));
    r.push_back(std::make_unique<StreamPath>(i, std::make_unique<FdStream>(fds[1])));
  }
  p.send = std::make_unique<SendComm>(std::move(s), o, "receiver");
  p.recv = std::make_unique<RecvComm>(std::move(r), o, "sender");
  return p;
}

CommOptions StripedOptions() {
  CommOptions o;
  o.chunk_bytes = 64 * 1024;
  o.stripe_min_bytes = 64 * 1024;
  o.max_queued_chunks = 2;
  o.eager_bytes = 0;
  return o;
}

std::vector<char> Pattern(size_t n, int salt) {
  std::vector<char> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<char>('a' + (k * 7 + static_cast<size_t>(salt)) % 26);
  return v;
}

// Sends `sbuf` and receives it whole.
void Transfer(Pair& p, const std::vector<char>& sbuf, std::vector<char>& rbuf, int tag) {
  RecvRequest* rr = testing::PostRecv(*p.recv, rbuf, tag);
  ASSERT_TRUE(p.recv->Progress().ok());
  SendRequest* sr = nullptr;
  for (int tries = 0; sr == nullptr && tries < 1000; ++tries) {
    ASSERT_TRUE(p.send->Isend(sbuf.data(), sbuf.size(), tag, nullptr, &sr).ok());
    if (sr == nullptr) {
      ASSERT_TRUE(p.recv->Progress().ok());
    }
  }
  ASSERT_NE(sr, nullptr);
  int sdone = 0, rdone = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(sdone && rdone) && std::chrono::steady_clock::now() < deadline) {
    if (!sdone) {
      ASSERT_TRUE(p.send->Test(sr, &sdone, nullptr).ok()) << p.send->error().message();
    }
    if (!rdone) {
      ASSERT_TRUE(p.recv->Test(rr, &rdone, nullptr).ok()) << p.recv->error().message();
    }
  }
  ASSERT_TRUE(sdone && rdone) << "the transfer did not complete";
  EXPECT_EQ(rbuf, sbuf);
}

TEST(PathChoice, OneSchedulingPassReadsEachPathsTransportLoadOnce) {
  Pair p = MakePair(StripedOptions(), 2);
  // 4 chunks: the first pass queues two on each path (the queue limit), the receiver reads nothing yet.
  const std::vector<char> sbuf = Pattern(256 * 1024, 1);
  std::vector<char> rbuf(sbuf.size(), 0);
  RecvRequest* rr = testing::PostRecv(*p.recv, rbuf, 5);
  ASSERT_TRUE(p.recv->Progress().ok());  // the descriptor goes to the sender
  SendRequest* sr = nullptr;
  for (int tries = 0; sr == nullptr && tries < 1000; ++tries)
    ASSERT_TRUE(p.send->Isend(sbuf.data(), sbuf.size(), 5, nullptr, &sr).ok());
  ASSERT_NE(sr, nullptr);
  for (int i = 0; i < 100 && p.sp[0]->chunks() + p.sp[1]->chunks() < 4; ++i) ASSERT_TRUE(p.send->Progress().ok());
  ASSERT_EQ(p.sp[0]->chunks() + p.sp[1]->chunks(), 4);
  EXPECT_EQ(p.sp[0]->chunks(), 2);
  EXPECT_EQ(p.sp[1]->chunks(), 2);
  // Each of the four choices compared both paths; one reading per path served them all (it was 2
  // per chunk: 8). A pass may come before the descriptor arrives and read nothing.
  EXPECT_LE(p.sp[0]->load_reads(), 1);
  EXPECT_LE(p.sp[1]->load_reads(), 1);

  int sdone = 0, rdone = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(sdone && rdone) && std::chrono::steady_clock::now() < deadline) {
    if (!sdone) {
      ASSERT_TRUE(p.send->Test(sr, &sdone, nullptr).ok()) << p.send->error().message();
    }
    if (!rdone) {
      ASSERT_TRUE(p.recv->Test(rr, &rdone, nullptr).ok()) << p.recv->error().message();
    }
  }
  ASSERT_TRUE(sdone && rdone);
  EXPECT_EQ(rbuf, sbuf);
}

TEST(PathChoice, AStreamOfStripedMessagesReadsTheLoadAtMostOncePerChunk) {
  Pair p = MakePair(StripedOptions(), 2);
  int chunks = 0;
  for (int i = 0; i < 8; ++i) {
    const std::vector<char> sbuf = Pattern(4 << 20, i);  // 64 chunks each
    std::vector<char> rbuf(sbuf.size(), 0);
    Transfer(p, sbuf, rbuf, 10 + i);
    if (HasFatalFailure()) return;
  }
  chunks = p.sp[0]->chunks() + p.sp[1]->chunks();
  EXPECT_EQ(chunks, 8 * 64);
  // A reading is taken only where two paths have room, and such a pass queues a chunk on each.
  EXPECT_LE(p.sp[0]->load_reads() + p.sp[1]->load_reads(), chunks + 2 * 8)
      << p.sp[0]->load_reads() << " + " << p.sp[1]->load_reads() << " readings for " << chunks << " chunks";
  // Both paths carried the stream.
  EXPECT_GE(p.sp[0]->chunks(), chunks / 4);
  EXPECT_GE(p.sp[1]->chunks(), chunks / 4);
}

TEST(PathChoice, ASinglePathIsNeverAskedForItsLoad) {
  Pair p = MakePair(StripedOptions(), 1);
  const std::vector<char> sbuf = Pattern(1 << 20, 3);
  std::vector<char> rbuf(sbuf.size(), 0);
  Transfer(p, sbuf, rbuf, 7);
  EXPECT_EQ(p.sp[0]->chunks(), 16);
  EXPECT_EQ(p.sp[0]->load_reads(), 0);
}

// Whole messages (below the striping size): from kRoundRobinMinBytes on they take the paths in turn
// (one socket each, as a raw baseline would); smaller ones stay on one path, where a burst leaves
// in one write. Every message arrives intact either way.
TEST(PathChoice, WholeMessagesFromTheRoundRobinSizeTakeThePathsInTurn) {
  CommOptions o;
  o.chunk_bytes = 512 * 1024;
  o.stripe_min_bytes = 256 * 1024;
  o.eager_bytes = 0;
  {
    Pair p = MakePair(o, 2);
    for (int i = 0; i < 8; ++i) {
      const std::vector<char> sbuf = Pattern(kRoundRobinMinBytes, i);
      std::vector<char> rbuf(sbuf.size(), 0);
      Transfer(p, sbuf, rbuf, 20 + i);
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(p.sp[0]->chunks(), 4) << "messages of " << kRoundRobinMinBytes << " bytes stayed on one path";
    EXPECT_EQ(p.sp[1]->chunks(), 4);
  }
  Pair p = MakePair(o, 2);
  for (int i = 0; i < 8; ++i) {
    const std::vector<char> sbuf = Pattern(kRoundRobinMinBytes / 2, i);
    std::vector<char> rbuf(sbuf.size(), 0);
    Transfer(p, sbuf, rbuf, 30 + i);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(p.sp[0]->chunks() + p.sp[1]->chunks(), 8);
  EXPECT_TRUE(p.sp[0]->chunks() == 8 || p.sp[1]->chunks() == 8) << "smaller messages left their path";
}

}  // namespace
}  // namespace ff
