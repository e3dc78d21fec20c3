// Zero loss with eager sends: a path fails while only eager messages - already completed to the
// caller, their buffers reused - are in flight; the communicator re-sends them from its retransmit
// ring on the path left, and every message arrives exact and in order.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tcp/byte_stream.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/failover/socketpair_pair.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

using Pair = testing::CommPair;

Pair MakePair(int npaths, const CommOptions& opts, int sndbuf0 = 0) {
  return testing::MakeCommPair(npaths, opts, sndbuf0);
}

using testing::EagerOptions;

TEST(EagerFailover, MessagesCompletedEagerlyAreResentFromTheRingWhenTheirPathDies) {
  constexpr int kMsgs = 24;
  constexpr size_t kSize = 1000;
  Pair p = MakePair(2, EagerOptions());
  // Every receive is posted first, and its descriptor reaches the sender.
  std::vector<std::vector<char>> rbuf(kMsgs, std::vector<char>(4096, 0));
  std::vector<RecvRequest*> rreq(kMsgs, nullptr);
  for (int i = 0; i < kMsgs; ++i) {
    void* d = rbuf[i].data();
    uint64_t cap = rbuf[i].size();
    int tag = 7;
    ASSERT_TRUE(p.recv->Irecv(1, &d, &cap, &tag, &rreq[i]).ok());
    ASSERT_NE(rreq[i], nullptr);
  }
  ASSERT_TRUE(p.recv->Progress().ok());
  // Eager sends complete at once, before the receiver has read a byte; their buffers are then reused.
  std::vector<char> sbuf(kSize);
  for (int i = 0; i < kMsgs; ++i) {
    for (size_t k = 0; k < kSize; ++k) sbuf[k] = static_cast<char>('a' + (i * 7 + k) % 26);
    SendRequest* r = nullptr;
    for (int tries = 0; r == nullptr && tries < 1000; ++tries) ASSERT_TRUE(p.send->Isend(sbuf.data(), kSize, 7, nullptr, &r).ok());
    ASSERT_NE(r, nullptr);
    int done = 0;
    uint64_t size = 0;
    ASSERT_TRUE(p.send->Test(r, &done, &size).ok());
    ASSERT_EQ(done, 1) << "eager message " << i << " did not complete once handed to the transport";
    EXPECT_EQ(size, kSize);
    std::memset(sbuf.data(), 'X', kSize);  // the caller reuses its buffer at once
  }
  EXPECT_EQ(p.send->eager_messages(), static_cast<uint64_t>(kMsgs));
  EXPECT_EQ(p.send->unacked_messages(), static_cast<uint64_t>(kMsgs));
  // Cut path 0: what it carried and the receiver had not read yet is gone.
  *p.cuts[0] = true;
  std::vector<int> done(kMsgs, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int complete = 0;
  while (complete < kMsgs && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(p.send->Progress().ok()) << p.send->error().message();
    for (int i = 0; i < kMsgs; ++i) {
      if (done[i]) continue;
      uint64_t size = 0;
      ASSERT_TRUE(p.recv->Test(rreq[i], &done[i], &size).ok()) << p.recv->error().message();
      if (done[i]) {
        EXPECT_EQ(size, kSize);
        ++complete;
      }
    }
  }
  ASSERT_EQ(complete, kMsgs) << "messages lost with the cut path";
  for (int i = 0; i < kMsgs; ++i)
    for (size_t k = 0; k < kSize; ++k)
      ASSERT_EQ(rbuf[i][k], static_cast<char>('a' + (i * 7 + k) % 26)) << "message " << i << " byte " << k;
  EXPECT_GT(p.send->resent_bytes(), 0u) << "nothing was re-sent: the cut path carried nothing";
  // The ring is released once the receiver acknowledges.
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (p.send->unacked_messages() > 0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(p.send->Progress().ok());
    ASSERT_TRUE(p.recv->Progress().ok());
    usleep(200);
  }
  EXPECT_EQ(p.send->unacked_messages(), 0u);
}

TEST(EagerFailover, LargeMessagesCompleteOnlyOnAcknowledgement) {
  Pair p = MakePair(1, EagerOptions());
  std::vector<char> rb(65536), sb(65536, 'q');
  void* d = rb.data();
  uint64_t cap = rb.size();
  int tag = 1;
  RecvRequest* rr = nullptr;
  ASSERT_TRUE(p.recv->Irecv(1, &d, &cap, &tag, &rr).ok());
  ASSERT_TRUE(p.recv->Progress().ok());
  SendRequest* sr = nullptr;
  while (sr == nullptr) ASSERT_TRUE(p.send->Isend(sb.data(), sb.size(), 1, nullptr, &sr).ok());
  int done = 0;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(p.send->Test(sr, &done, nullptr).ok());
    ASSERT_EQ(done, 0) << "a message above the eager threshold completed before the receiver had it";
  }
  int rdone = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(rdone && done) && std::chrono::steady_clock::now() < deadline) {
    if (!rdone) {
      ASSERT_TRUE(p.recv->Test(rr, &rdone, nullptr).ok());
    }
    if (!done) {
      ASSERT_TRUE(p.send->Test(sr, &done, nullptr).ok());
    }
  }
  EXPECT_TRUE(rdone && done);
  EXPECT_EQ(rb, sb);
}

// A socketpair stream that records where each write's buffers lay, and can be cut like CuttableStream.
class RecordingStream final : public ByteStream {
 public:
  RecordingStream(int fd, std::shared_ptr<bool> cut, std::shared_ptr<std::vector<const void*>> bases)
      : fd_(fd), cut_(std::move(cut)), bases_(std::move(bases)) {}
  ~RecordingStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override {
    if (*cut_) {
      errno = EPIPE;
      return -1;
    }
    for (int i = 0; i < n; ++i) bases_->push_back(iov[i].iov_base);
    return tcp::SendSome(fd_, iov, n);
  }
  ssize_t Recv(void* buf, size_t len) override {
    if (*cut_) {
      errno = ECONNRESET;
      return -1;
    }
    return tcp::RecvSome(fd_, buf, len);
  }
  std::string Describe() const override { return "recording socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }

 private:
  int fd_;
  std::shared_ptr<bool> cut_;
  std::shared_ptr<std::vector<const void*>> bases_;
};

// On a stream an eager message is written from the caller's buffer, and copied into the retransmit
// ring only after (off the receiver's critical path) - at the latest when its request completes:
// every completed message, its buffer scribbled over at once, is re-sent exact from the ring when
// the path it went on is cut before the receiver read a byte. A burst is posted before any test,
// so coalescing holds some sends and they are written (and completed) inside test().
TEST(EagerFailover, AnEagerMessageIsWrittenFromTheCallersBufferAndCopiedIntoTheRingBeforeItCompletes) {
  constexpr int kMsgs = 16;
  constexpr size_t kSize = 3000;
  CommOptions opts = EagerOptions();
  opts.coalesce_ns = 1'000'000'000;  // hold every send it may: they are written in test()
  std::vector<std::shared_ptr<bool>> cuts;
  std::vector<std::shared_ptr<std::vector<const void*>>> bases;
  std::vector<std::unique_ptr<Path>> sp, rp;
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ASSERT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    ASSERT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    cuts.push_back(std::make_shared<bool>(false));
    bases.push_back(std::make_shared<std::vector<const void*>>());
    auto unused = std::make_shared<std::vector<const void*>>();
    sp.push_back(std::make_unique<StreamPath>(i, std::make_unique<RecordingStream>(fds[0], cuts[i], bases[i])));
    rp.push_back(std::make_unique<StreamPath>(i, std::make_unique<RecordingStream>(fds[1], cuts[i], unused)));
  }
  SendComm send(std::move(sp), opts, "receiver");
  RecvComm recv(std::move(rp), opts, "sender");
  std::vector<std::vector<char>> rbuf(kMsgs, std::vector<char>(4096, 0));
  std::vector<RecvRequest*> rreq(kMsgs, nullptr);
  for (int i = 0; i < kMsgs; ++i) {
    void* d = rbuf[i].data();
    uint64_t cap = rbuf[i].size();
    int tag = 3;
    ASSERT_TRUE(recv.Irecv(1, &d, &cap, &tag, &rreq[i]).ok());
    ASSERT_NE(rreq[i], nullptr);
  }
  ASSERT_TRUE(recv.Progress().ok());
  std::vector<std::vector<char>> sbuf(kMsgs, std::vector<char>(kSize));
  std::vector<SendRequest*> sreq(kMsgs, nullptr);
  for (int i = 0; i < kMsgs; ++i) {
    for (size_t k = 0; k < kSize; ++k) sbuf[i][k] = static_cast<char>('a' + (i * 5 + k) % 26);
    for (int tries = 0; sreq[i] == nullptr && tries < 1000; ++tries)
      ASSERT_TRUE(send.Isend(sbuf[i].data(), kSize, 3, nullptr, &sreq[i]).ok());
    ASSERT_NE(sreq[i], nullptr);
  }
  int completed = 0;
  for (int round = 0; round < 1000 && completed < kMsgs; ++round) {
    for (int i = 0; i < kMsgs; ++i) {
      if (sreq[i] == nullptr) continue;
      int done = 0;
      ASSERT_TRUE(send.Test(sreq[i], &done, nullptr).ok()) << send.error().message();
      if (!done) continue;
      sreq[i] = nullptr;
      ++completed;
      std::memset(sbuf[i].data(), 'X', kSize);  // the caller reuses its buffer at once
    }
  }
  ASSERT_EQ(completed, kMsgs) << "eager sends did not complete once handed to the transport";
  ASSERT_EQ(send.eager_messages(), static_cast<uint64_t>(kMsgs));
  // Every payload left from the caller's buffers, none from a copy.
  std::vector<bool> written_from_caller(kMsgs, false);
  for (const auto& b : bases)
    for (const void* base : *b)
      for (int i = 0; i < kMsgs; ++i)
        if (base == sbuf[i].data()) written_from_caller[static_cast<size_t>(i)] = true;
  for (int i = 0; i < kMsgs; ++i)
    EXPECT_TRUE(written_from_caller[static_cast<size_t>(i)]) << "message " << i << " was not written from the caller's buffer";
  // Cut the path most of them took before the receiver read anything: they are re-sent from the ring.
  const int cut = bases[0]->size() >= bases[1]->size() ? 0 : 1;
  *cuts[static_cast<size_t>(cut)] = true;
  std::vector<int> rdone(kMsgs, 0);
  int received = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (received < kMsgs && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(send.Progress().ok()) << send.error().message();
    for (int i = 0; i < kMsgs; ++i) {
      if (rdone[i]) continue;
      uint64_t size = 0;
      ASSERT_TRUE(recv.Test(rreq[i], &rdone[i], &size).ok()) << recv.error().message();
      if (rdone[i]) {
        EXPECT_EQ(size, kSize);
        ++received;
      }
    }
  }
  ASSERT_EQ(received, kMsgs) << "messages lost with the cut path";
  EXPECT_GT(send.resent_bytes(), 0u) << "nothing was re-sent: the cut path carried nothing";
  for (int i = 0; i < kMsgs; ++i)
    for (size_t k = 0; k < kSize; ++k)
      ASSERT_EQ(rbuf[i][k], static_cast<char>('a' + (i * 5 + k) % 26)) << "message " << i << " byte " << k;
}

void Fill(std::vector<char>& b, int seed) {
  for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<char>('a' + (seed * 7 + k) % 26);
}

SendRequest* SendOne(SendComm& s, const std::vector<char>& b, int tag) {
  SendRequest* r = nullptr;
  for (int tries = 0; r == nullptr && tries < 1000; ++tries) EXPECT_TRUE(s.Isend(b.data(), b.size(), tag, nullptr, &r).ok());
  return r;
}

bool WaitRecv(Pair& p, RecvRequest* r, uint64_t* size) {
  int done = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    EXPECT_TRUE(p.send->Progress().ok()) << p.send->error().message();
    EXPECT_TRUE(p.recv->Test(r, &done, size).ok()) << p.recv->error().message();
  }
  return done != 0;
}

// Wire v4: small eager messages leave before the receiver has posted their buffers; what arrives
// early is staged and copied into the buffer when the receive is posted - exact, in order.
TEST(Unsolicited, EagerMessagesSentBeforeTheirReceiveIsPostedArriveExact) {
  constexpr int kMsgs = 12;
  Pair p = MakePair(2, EagerOptions());
  std::vector<std::vector<char>> sent;
  for (int i = 0; i < kMsgs; ++i) {
    sent.emplace_back(100 + 300 * i);
    Fill(sent.back(), i);
    SendRequest* r = SendOne(*p.send, sent.back(), 3);
    ASSERT_NE(r, nullptr);
    int done = 0;
    ASSERT_TRUE(p.send->Test(r, &done, nullptr).ok());
    EXPECT_EQ(done, 1) << "an eager message waited for a descriptor";
  }
  EXPECT_EQ(p.send->unsolicited_messages(), static_cast<uint64_t>(kMsgs));
  for (int i = 0; i < kMsgs; ++i) {
    std::vector<char> rb(8192, 0);
    void* d = rb.data();
    uint64_t cap = rb.size(), size = 0;
    int tag = 3;
    RecvRequest* rr = nullptr;
    ASSERT_TRUE(p.recv->Irecv(1, &d, &cap, &tag, &rr).ok());
    ASSERT_NE(rr, nullptr);
    ASSERT_TRUE(WaitRecv(p, rr, &size)) << "message " << i;
    ASSERT_EQ(size, sent[i].size());
    ASSERT_TRUE(std::equal(sent[i].begin(), sent[i].end(), rb.begin())) << "message " << i;
  }
  EXPECT_GT(p.recv->staged_frames(), 0u) << "nothing arrived before its receive: the test proved nothing";
}

// A grouped receive binds staged messages to its buffers by tag, as it does live ones.
TEST(Unsolicited, StagedMessagesBindToAGroupedReceiveByTag) {
  Pair p = MakePair(1, EagerOptions());
  std::vector<char> a(700), b(900);
  Fill(a, 1);
  Fill(b, 2);
  ASSERT_NE(SendOne(*p.send, a, 11), nullptr);
  ASSERT_NE(SendOne(*p.send, b, 22), nullptr);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(p.send->Progress().ok());
  // Posted only now, buffers in the other order: tag 22 first.
  std::vector<char> r22(4096, 0), r11(4096, 0);
  void* d[2] = {r22.data(), r11.data()};
  uint64_t caps[2] = {r22.size(), r11.size()};
  int tags[2] = {22, 11};
  RecvRequest* rr = nullptr;
  ASSERT_TRUE(p.recv->Irecv(2, d, caps, tags, &rr).ok());
  ASSERT_NE(rr, nullptr);
  uint64_t sizes[2] = {};
  int done = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(p.send->Progress().ok());
    ASSERT_TRUE(p.recv->Test(rr, &done, sizes).ok()) << p.recv->error().message();
  }
  ASSERT_EQ(done, 1);
  EXPECT_EQ(sizes[0], b.size());
  EXPECT_EQ(sizes[1], a.size());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), r22.begin()));
  EXPECT_TRUE(std::equal(a.begin(), a.end(), r11.begin()));
}

// Zero loss, and no hang, when a chunk re-sent after a failover has to travel behind unsolicited
// messages whose receives are not posted: the receiver stages those and reaches the chunk it waits
// for. (A receiver that left them unread in the socket would wait forever: the caller posts the
// next receive only after this one completes.)
TEST(Unsolicited, AResentChunkBehindUnpostedMessagesStillArrives) {
  CommOptions o = EagerOptions();
  o.eager_bytes = 64 * 1024;
  Pair p = MakePair(2, o, 4096);
  std::vector<char> first(48 * 1024);
  Fill(first, 0);
  std::vector<char> rb0(first.size(), 0);
  void* d = rb0.data();
  uint64_t cap = rb0.size(), size = 0;
  int tag = 5;
  RecvRequest* r0 = nullptr;
  ASSERT_TRUE(p.recv->Irecv(1, &d, &cap, &tag, &r0).ok());
  ASSERT_TRUE(p.recv->Progress().ok());  // its descriptor reaches the sender
  ASSERT_NE(SendOne(*p.send, first, 5), nullptr);  // message 0: mostly still queued on path 0
  std::vector<std::vector<char>> later;
  for (int i = 1; i <= 5; ++i) {
    later.emplace_back(1000);
    Fill(later.back(), i);
    ASSERT_NE(SendOne(*p.send, later.back(), 5), nullptr);  // unsolicited, on the less loaded path 1
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.send->Progress().ok());
  *p.cuts[0] = true;  // message 0's bytes on path 0 are gone; its re-send goes to path 1, behind 1..5
  ASSERT_TRUE(WaitRecv(p, r0, &size)) << "the re-sent message never arrived (stuck behind unposted ones?)";
  EXPECT_EQ(size, first.size());
  EXPECT_EQ(rb0, first);
  EXPECT_GT(p.send->resent_bytes(), 0u) << "path 0 carried nothing: the scenario did not happen";
  for (int i = 0; i < 5; ++i) {
    std::vector<char> rb(4096, 0);
    void* di = rb.data();
    uint64_t ci = rb.size();
    RecvRequest* ri = nullptr;
    ASSERT_TRUE(p.recv->Irecv(1, &di, &ci, &tag, &ri).ok());
    ASSERT_TRUE(WaitRecv(p, ri, &size)) << "message " << i + 1;
    ASSERT_EQ(size, later[i].size());
    EXPECT_TRUE(std::equal(later[i].begin(), later[i].end(), rb.begin())) << "message " << i + 1;
  }
}

// A failover pauses completions until the re-sent data is acknowledged. When it loses the last path
// instead, the pause never ends: test() of a send the failover held - even an eager one whose bytes
// were all written - reports the communicator's error, never "not done yet" forever (a caller that
// tested it first after the failure hung until its own timeout).
TEST(EagerFailover, ASendHeldByAFailoverThatLostTheLastPathReportsTheError) {
  Pair p = MakePair(2, EagerOptions());
  // An eager message on one path, a 128 KiB one (not eager, taken in turn) on the other; the
  // receiver reads nothing, so neither is acknowledged.
  std::vector<char> a(100, 'a'), c(128 * 1024, 'c');
  auto post = [&](std::vector<char>& buf, SendRequest** r) {
    for (int tries = 0; *r == nullptr && tries < 1000; ++tries) ASSERT_TRUE(p.send->Isend(buf.data(), buf.size(), 1, nullptr, r).ok());
    ASSERT_NE(*r, nullptr);
  };
  SendRequest* ra = nullptr;
  SendRequest* rc = nullptr;
  post(a, &ra);
  if (::testing::Test::HasFatalFailure()) return;
  const int a_path = *p.writes_out[0] > 0 ? 0 : 1;
  ASSERT_EQ(*p.writes_out[static_cast<size_t>(a_path)], 1);
  post(c, &rc);
  if (::testing::Test::HasFatalFailure()) return;
  for (int i = 0; i < 100 && *p.writes_out[static_cast<size_t>(1 - a_path)] == 0; ++i) ASSERT_TRUE(p.send->Progress().ok());
  ASSERT_GT(*p.writes_out[static_cast<size_t>(1 - a_path)], 0) << "the 128 KiB message did not take the other path";
  // The 128 KiB message's path dies: a failover re-sends it on the eager message's path and holds
  // completions until it is acknowledged.
  *p.cuts[static_cast<size_t>(1 - a_path)] = true;
  for (int i = 0; i < 1000 && !p.send->gate().paused(); ++i) ASSERT_TRUE(p.send->Progress().ok());
  ASSERT_TRUE(p.send->gate().paused()) << "losing a path with data in flight did not start a failover";
  // Then the last path dies before anything was acknowledged.
  *p.cuts[static_cast<size_t>(a_path)] = true;
  for (int i = 0; i < 1000 && p.send->error().ok(); ++i) (void)p.send->Progress();
  ASSERT_FALSE(p.send->error().ok()) << "losing both paths did not fail the communicator";
  // The eager message was written whole and is re-sent nowhere: without the failover it would be
  // complete. Its test() must say the communicator failed.
  bool failed = false;
  for (int i = 0; i < 1000 && !failed; ++i) {
    int done = 0;
    failed = !p.send->Test(ra, &done, nullptr).ok();
    ASSERT_EQ(done, 0) << "a send held by a failover that never ended was reported complete";
  }
  EXPECT_TRUE(failed) << "test() of the eager send said \"not done yet\" 1000 times after the communicator failed";
  int done = 0;
  EXPECT_FALSE(p.send->Test(rc, &done, nullptr).ok());
}

}  // namespace
}  // namespace ff

namespace ff {
namespace {

// A stream whose incoming direction the test can silence: what the peer writes stays unread, as if
// lost behind a cut the writer does not know of yet. The outgoing direction keeps working.
class DeafStream final : public ByteStream {
 public:
  DeafStream(int fd, std::shared_ptr<bool> deaf) : fd_(fd), deaf_(std::move(deaf)) {}
  ~DeafStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override { return tcp::SendSome(fd_, iov, n); }
  ssize_t Recv(void* buf, size_t len) override { return *deaf_ ? 0 : tcp::RecvSome(fd_, buf, len); }
  std::string Describe() const override { return "socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }

 private:
  int fd_;
  std::shared_ptr<bool> deaf_;
};

// Seen in a stress run of the demo: a link cut right after the last chunks of an iteration crossed
// it. The receiver completed every message it had posted and acknowledged them on the path that
// last delivered data - the cut one - and then its application called nothing more on that comm
// until the next iteration, which waited on the sender. The sender never completed its last sends
// (48 s, then "lost the last path"). An acknowledgement that leaves the receiver with nothing more
// posted may be the last one for a long time, so it goes on every live path.
TEST(AckDelivery, TheAcknowledgementOfTheLastPostedMessageReachesTheSenderOverEveryLivePath) {
  CommOptions o = EagerOptions();
  o.eager_bytes = 0;  // every send completes on its acknowledgement
  o.chunk_bytes = 32 * 1024;
  o.stripe_min_bytes = 16 * 1024;
  constexpr int kTrials = 8;
  constexpr int kMsgs = 4;
  constexpr size_t kSize = 64 * 1024;  // two chunks, striped over both paths; all fits the socket buffers
  int stuck_trials = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<std::unique_ptr<Path>> s, r;
    auto deaf = std::make_shared<bool>(false);
    for (int i = 0; i < 2; ++i) {
      int fds[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
      ASSERT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
      ASSERT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
      // The sender does not hear path 1 (the cut); path 0 works both ways.
      s.push_back(std::make_unique<StreamPath>(
          i, std::make_unique<DeafStream>(fds[0], i == 1 ? deaf : std::make_shared<bool>(false))));
      r.push_back(std::make_unique<StreamPath>(i, std::make_unique<DeafStream>(fds[1], std::make_shared<bool>(false))));
    }
    SendComm send(std::move(s), o, "receiver");
    RecvComm recv(std::move(r), o, "sender");
    std::vector<std::vector<char>> rbuf(kMsgs, std::vector<char>(kSize));
    std::vector<RecvRequest*> rreq(kMsgs, nullptr);
    for (int i = 0; i < kMsgs; ++i) {
      void* d = rbuf[i].data();
      uint64_t cap = kSize;
      int tag = 5;
      ASSERT_TRUE(recv.Irecv(1, &d, &cap, &tag, &rreq[i]).ok());
      ASSERT_NE(rreq[i], nullptr);
    }
    ASSERT_TRUE(recv.Progress().ok());
    std::vector<char> sbuf(kSize, static_cast<char>('a' + trial));
    std::vector<SendRequest*> sreq(kMsgs, nullptr);
    std::vector<int> sent_done(kMsgs, 0), recv_done(kMsgs, 0);
    // The descriptors reached the sender while both directions worked; now, before the receiver
    // reads any data, the way back on path 1 goes silent.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int i = 0; i < kMsgs; ++i)
      while (sreq[i] == nullptr && std::chrono::steady_clock::now() < deadline) {
        ASSERT_TRUE(send.Isend(sbuf.data(), kSize, 5, nullptr, &sreq[i]).ok());
        ASSERT_TRUE(send.Progress().ok());
      }
    for (int k = 0; k < 10; ++k) ASSERT_TRUE(send.Progress().ok());  // every chunk handed to the kernel
    *deaf = true;
    // Only the receiver runs: its application tests its receives until all are complete, then stops.
    int got = 0;
    while (got < kMsgs && std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < kMsgs; ++i) {
        if (recv_done[i]) continue;
        uint64_t sizes[kMaxRecvs];
        ASSERT_TRUE(recv.Test(rreq[i], &recv_done[i], sizes).ok());
        got += recv_done[i];
      }
    }
    ASSERT_EQ(got, kMsgs) << "trial " << trial << ": the receiver did not get every message";
    // Only the sender runs now: its last sends must complete on what already reached it.
    int completed = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (completed < kMsgs && std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < kMsgs; ++i) {
        if (sent_done[i]) continue;
        uint64_t size = 0;
        ASSERT_TRUE(send.Test(sreq[i], &sent_done[i], &size).ok());
        completed += sent_done[i];
      }
    }
    if (completed < kMsgs) ++stuck_trials;
  }
  EXPECT_EQ(stuck_trials, 0) << stuck_trials << " of " << kTrials
                             << " trials left sends waiting on an acknowledgement that went only to the silent path";
}

}  // namespace
}  // namespace ff
