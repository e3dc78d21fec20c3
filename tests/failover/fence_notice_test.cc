// Receive completions wait for the fence, on transports whose sender writes into the receiver's
// memory (RDMA: NeedsPostedBuffer). After a failover the sender queues a fence notice ahead of every
// chunk on each surviving path; the receiver fences its end of the dead path before it takes one
// more chunk, so a late write of the dead path (here: frames still sitting in its socket, written
// before the cut) cannot land after a re-sent copy completed the receive.
//
// The paths are stream paths over socketpairs dressed as RDMA paths: NeedsPostedBuffer, a Fence that
// (like a QP moved to ERR) takes nothing more, and a log of fences and delivered data frames.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tcp/byte_stream.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

using testing::FdStream;

struct Event {
  std::string what;  // "fence" or "data"
  int path;
  uint64_t seq;
  uint64_t offset;
};

class RdmaLikePath final : public Path {
 public:
  RdmaLikePath(int index, int fd, std::vector<Event>* log)
      : Path(index), inner_(index, std::make_unique<FdStream>(fd)), log_(log) {}

  void Cut() { cut_ = true; }  // the sender's side of a link that failed: nothing more goes out
  const std::set<std::pair<uint64_t, uint64_t>>& queued_chunks() const { return queued_; }

  bool NeedsPostedBuffer() const override { return true; }
  bool CanQueue() const override { return inner_.CanQueue(); }
  void Queue(const FrameHeader& h, const char* payload) override { inner_.Queue(h, payload); }
  void QueueData(const FrameHeader& h, const char* payload, const RecvDescriptor& dest,
                 const MemHandle* mem) override {
    queued_.emplace(h.seq, h.offset);
    inner_.QueueData(h, payload, dest, mem);
  }
  int queued_frames() const override { return inner_.queued_frames(); }
  uint64_t queued_payload_bytes() const override { return inner_.queued_payload_bytes(); }
  int queued_data_frames() const override { return inner_.queued_data_frames(); }
  bool Flush() override {
    if (cut_ || fenced_) {
      errno_ = EPIPE;
      return false;
    }
    return inner_.Flush();
  }
  void DropQueued() override { inner_.DropQueued(); }
  void Fence() override {
    log_->push_back({"fence", index(), 0, 0});
    fenced_ = true;  // a QP in ERR: what still arrives for it is dropped
    inner_.DropQueued();
  }
  void DiscardCurrentPayload() override { inner_.DiscardCurrentPayload(); }
  PumpResult Poll(FrameSink& sink) override {
    if (fenced_) return PumpResult::kClosed;
    if (cut_) return PumpResult::kIdle;
    Spy spy(sink, *this);
    return inner_.Poll(spy);
  }
  const std::string& rx_error() const override { return inner_.rx_error(); }
  int last_errno() const override { return errno_ != 0 ? errno_ : inner_.last_errno(); }
  int64_t InFlightBytes() const override { return inner_.InFlightBytes(); }
  PathSample Sample() const override { return PathSample{}; }
  int PendingError() const override { return 0; }
  int LocalIfindex() const override { return 0; }
  std::string Describe() const override { return "rdma-like " + inner_.Describe(); }
  std::string DebugState() const override { return inner_.DebugState(); }

 private:
  // Forwards to the communicator; logs every data frame it takes whole, as this path's.
  class Spy final : public FrameSink {
   public:
    Spy(FrameSink& s, RdmaLikePath& p) : sink_(s), path_(p) {}
    HeaderVerdict OnHeader(Path&, const FrameHeader& h, char** dest) override { return sink_.OnHeader(path_, h, dest); }
    void OnFrameComplete(Path&, const FrameHeader& h) override {
      if (h.type == static_cast<uint8_t>(FrameType::kData)) path_.log_->push_back({"data", path_.index(), h.seq, h.offset});
      sink_.OnFrameComplete(path_, h);
    }

   private:
    FrameSink& sink_;
    RdmaLikePath& path_;
  };

  StreamPath inner_;
  std::vector<Event>* log_;
  std::set<std::pair<uint64_t, uint64_t>> queued_;
  bool cut_ = false;
  bool fenced_ = false;
  int errno_ = 0;
};

TEST(FenceNotice, ReSentChunksCompleteAReceiveOnlyAfterTheReceiverFencedTheDeadPath) {
  std::vector<Event> send_log, recv_log;
  std::vector<std::unique_ptr<Path>> s, r;
  std::vector<RdmaLikePath*> sp, rp;
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ASSERT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    ASSERT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    auto a = std::make_unique<RdmaLikePath>(i, fds[0], &send_log);
    auto b = std::make_unique<RdmaLikePath>(i, fds[1], &recv_log);
    sp.push_back(a.get());
    rp.push_back(b.get());
    s.push_back(std::move(a));
    r.push_back(std::move(b));
  }
  CommOptions o;
  o.chunk_bytes = 64 * 1024;
  o.stripe_min_bytes = 64 * 1024;
  o.max_queued_chunks = 2;
  o.eager_bytes = 0;
  SendComm send(std::move(s), o, "receiver");
  RecvComm recv(std::move(r), o, "sender");

  constexpr size_t kSize = 4 << 20;  // 64 chunks, striped over both paths
  std::vector<char> rbuf(kSize, 0), sbuf(kSize);
  for (size_t k = 0; k < kSize; ++k) sbuf[k] = static_cast<char>('a' + (k * 13) % 26);
  void* d = rbuf.data();
  uint64_t cap = kSize;
  int tag = 3;
  RecvRequest* rr = nullptr;
  ASSERT_TRUE(recv.Irecv(1, &d, &cap, &tag, &rr).ok());
  ASSERT_TRUE(recv.Progress().ok());  // the descriptor goes to the sender
  SendRequest* sr = nullptr;
  for (int tries = 0; sr == nullptr && tries < 1000; ++tries) {
    ASSERT_TRUE(send.Isend(sbuf.data(), kSize, 3, nullptr, &sr).ok());
    ASSERT_TRUE(send.Progress().ok());
  }
  ASSERT_NE(sr, nullptr);
  // Chunks go out on both paths; the receiver reads none of them yet, so path 0's sit in its socket.
  for (int i = 0; i < 20 && sp[0]->queued_chunks().size() < 4; ++i) ASSERT_TRUE(send.Progress().ok());
  ASSERT_GE(sp[0]->queued_chunks().size(), 2u) << "path 0 carried nothing before the cut";
  sp[0]->Cut();

  int rdone = 0, sdone = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(rdone && sdone) && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(send.Progress().ok()) << send.error().message();
    if (!sdone) {
      ASSERT_TRUE(send.Test(sr, &sdone, nullptr).ok()) << send.error().message();
    }
    if (!rdone) {
      ASSERT_TRUE(recv.Test(rr, &rdone, nullptr).ok()) << recv.error().message();
    } else {
      ASSERT_TRUE(recv.Progress().ok());
    }
  }
  ASSERT_TRUE(rdone && sdone) << "the message did not complete after the failover";
  EXPECT_EQ(rbuf, sbuf);
  EXPECT_GE(send.fence_notices(), 1u);
  EXPECT_EQ(recv.fences_on_notice(), 1u);

  // The receiver fenced path 0 once, and every chunk that had gone out on path 0 and then arrived on
  // path 1 (a re-sent copy) was taken after that fence.
  size_t fence_at = recv_log.size();
  for (size_t i = 0; i < recv_log.size(); ++i)
    if (recv_log[i].what == "fence" && recv_log[i].path == 0) {
      fence_at = i;
      break;
    }
  ASSERT_LT(fence_at, recv_log.size()) << "the receiver never fenced the dead path";
  size_t resent_taken = 0;
  for (size_t i = 0; i < recv_log.size(); ++i) {
    const Event& e = recv_log[i];
    if (e.what != "data" || e.path != 1 || !sp[0]->queued_chunks().count({e.seq, e.offset})) continue;
    ++resent_taken;
    EXPECT_GT(i, fence_at) << "a re-sent chunk (offset " << e.offset << ") was taken before the receiver's fence";
  }
  EXPECT_GT(resent_taken, 0u) << "nothing was re-sent on path 1: the test saw no failover";
  // Nothing reached the receiver on path 0 after its fence.
  for (size_t i = fence_at; i < recv_log.size(); ++i) EXPECT_FALSE(recv_log[i].what == "data" && recv_log[i].path == 0);
}

}  // namespace
}  // namespace ff
