// Zero loss with eager sends: a path fails while only eager messages - already completed to the
// caller, their buffers reused - are in flight; the communicator re-sends them from its retransmit
// ring on the path left, and every message arrives exact and in order.
#include <sys/socket.h>
#include <unistd.h>

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

namespace ff {
namespace {

// A stream over one end of a socketpair that the test can cut: after Cut() every call fails as a
// reset connection would, and what the kernel still held for it is never read.
class CuttableStream final : public ByteStream {
 public:
  CuttableStream(int fd, std::shared_ptr<bool> cut) : fd_(fd), cut_(std::move(cut)) {}
  ~CuttableStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override {
    if (*cut_) {
      errno = EPIPE;
      return -1;
    }
    return tcp::SendSome(fd_, iov, n);
  }
  ssize_t Recv(void* buf, size_t len) override {
    if (*cut_) {
      errno = ECONNRESET;
      return -1;
    }
    return tcp::RecvSome(fd_, buf, len);
  }
  std::string Describe() const override { return "socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }  // no TCP_INFO on a socketpair

 private:
  int fd_;
  std::shared_ptr<bool> cut_;
};

struct Pair {
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
  std::vector<std::shared_ptr<bool>> cuts;
};

Pair MakePair(int npaths, const CommOptions& opts) {
  Pair p;
  std::vector<std::unique_ptr<Path>> s, r;
  for (int i = 0; i < npaths; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    EXPECT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    EXPECT_TRUE(tcp::SetNonBlocking(fds[1]).ok());
    auto cut = std::make_shared<bool>(false);
    p.cuts.push_back(cut);
    s.push_back(std::make_unique<StreamPath>(i, std::make_unique<CuttableStream>(fds[0], cut)));
    r.push_back(std::make_unique<StreamPath>(i, std::make_unique<CuttableStream>(fds[1], cut)));
  }
  p.send = std::make_unique<SendComm>(std::move(s), opts, "receiver");
  p.recv = std::make_unique<RecvComm>(std::move(r), opts, "sender");
  return p;
}

CommOptions EagerOptions() {
  CommOptions o;
  o.chunk_bytes = 512 * 1024;
  o.stripe_min_bytes = 256 * 1024;
  o.max_queued_chunks = 64;
  o.eager_bytes = 4096;
  o.eager_ring_bytes = 1 << 20;
  return o;
}

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

}  // namespace
}  // namespace ff
