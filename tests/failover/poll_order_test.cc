// Where a communicator's reads go in a ping-pong of small messages: the sender answers before it
// looks at the peer's frames, and the receiver reads a path that stays empty less and less often -
// yet still reads it, so a message that comes on it arrives.
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
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {

// One event per call that reached the kernel: 'W' a write, 'R' a read (empty or not), per path, with
// what the call returned.
struct Event {
  int path;
  char op;
  ssize_t result;
};
using EventLog = std::vector<Event>;

class LoggingStream final : public ByteStream {
 public:
  LoggingStream(int fd, int path, std::shared_ptr<EventLog> log) : fd_(fd), path_(path), log_(std::move(log)) {}
  ~LoggingStream() override { close(fd_); }
  ssize_t Send(const iovec* iov, int n) override {
    const ssize_t r = tcp::SendSome(fd_, iov, n);
    log_->push_back({path_, 'W', r});
    return r;
  }
  ssize_t Recv(void* buf, size_t len) override {
    const ssize_t r = tcp::RecvSome(fd_, buf, len);
    log_->push_back({path_, 'R', r});
    return r;
  }
  std::string Describe() const override { return "logging socketpair fd " + std::to_string(fd_); }
  int fd() const override { return -1; }

 private:
  int fd_;
  int path_;
  std::shared_ptr<EventLog> log_;
};

struct LoggedPair {
  std::shared_ptr<EventLog> send_log = std::make_shared<EventLog>();
  std::shared_ptr<EventLog> recv_log = std::make_shared<EventLog>();
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
};

LoggedPair MakeLoggedPair(int npaths, const CommOptions& opts) {
  LoggedPair lp;
  std::vector<std::unique_ptr<Path>> sp, rp;
  for (int i = 0; i < npaths; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    sp.push_back(std::make_unique<StreamPath>(i, std::make_unique<LoggingStream>(fds[0], i, lp.send_log)));
    rp.push_back(std::make_unique<StreamPath>(i, std::make_unique<LoggingStream>(fds[1], i, lp.recv_log)));
  }
  lp.send = std::make_unique<SendComm>(std::move(sp), opts, "receiver");
  lp.recv = std::make_unique<RecvComm>(std::move(rp), opts, "sender");
  return lp;
}

// Posts one receive, sends one message of `size` bytes, and drives both ends until both complete.
// Returns the receiver's size; `payload` is checked byte for byte.
void OneMessage(LoggedPair& lp, size_t size, char fill, bool clear_send_log_before_isend,
                std::vector<EventLog>* isend_logs) {
  std::vector<char> rbuf(size + 64, 0);
  void* d = rbuf.data();
  uint64_t cap = rbuf.size();
  int tag = 9;
  RecvRequest* rr = nullptr;
  ASSERT_TRUE(lp.recv->Irecv(1, &d, &cap, &tag, &rr).ok());
  ASSERT_NE(rr, nullptr);
  std::vector<char> sbuf(size, fill);
  SendRequest* sr = nullptr;
  if (clear_send_log_before_isend) lp.send_log->clear();
  for (int tries = 0; sr == nullptr && tries < 100000; ++tries) {
    ASSERT_TRUE(lp.send->Isend(sbuf.data(), size, 9, nullptr, &sr).ok()) << lp.send->error().message();
    if (sr == nullptr) {
      ASSERT_TRUE(lp.recv->Progress().ok());
    }
  }
  ASSERT_NE(sr, nullptr);
  if (isend_logs) isend_logs->push_back(*lp.send_log);
  int sdone = 0, rdone = 0;
  uint64_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!sdone || !rdone) && std::chrono::steady_clock::now() < deadline) {
    if (!sdone) {
      ASSERT_TRUE(lp.send->Test(sr, &sdone, nullptr).ok()) << lp.send->error().message();
    }
    if (!rdone) {
      ASSERT_TRUE(lp.recv->Test(rr, &rdone, &got).ok()) << lp.recv->error().message();
    }
  }
  ASSERT_TRUE(sdone && rdone) << "a " << size << "-byte message did not complete within 10 s";
  ASSERT_EQ(got, size);
  for (size_t k = 0; k < size; ++k) ASSERT_EQ(rbuf[k], fill) << "byte " << k << " of a " << size << "-byte message";
}

// In a ping-pong the sender's isend sends the reply: reading the peer's frames there (acknowledgements
// nothing waits on, a read per path) delayed it. Those reads still happen - every 16th call - but
// after the write, never before it.
TEST(PollOrder, AnEagerSendWritesBeforeItReadsThePeersFrames) {
  CommOptions opts = testing::EagerOptions();
  LoggedPair lp = MakeLoggedPair(2, opts);
  constexpr int kMsgs = 96;
  std::vector<EventLog> logs;
  for (int i = 0; i < kMsgs; ++i) {
    OneMessage(lp, 8, static_cast<char>('a' + i % 26), true, &logs);
    if (::testing::Test::HasFatalFailure()) return;
  }
  int reading_calls = 0;
  for (size_t i = 0; i < logs.size(); ++i) {
    const EventLog& log = logs[i];
    bool wrote = false, read = false;
    for (const Event& e : log) {
      if (e.op == 'W') wrote = true;
      if (e.op == 'R') {
        read = true;
        EXPECT_TRUE(wrote) << "isend " << i << " read path " << e.path << " before it wrote its message";
      }
    }
    EXPECT_TRUE(wrote) << "isend " << i << " did not write its 8-byte message";
    reading_calls += read ? 1 : 0;
  }
  // Every 16th call still reads (peer reports, acknowledgements that free the ring).
  EXPECT_GE(reading_calls, kMsgs / 16 - 1) << "the sender stopped reading its peer's frames";
}

// A path that delivered nothing is read after a gap that doubles while it stays empty (10 us up to
// 160 us): a receiver waiting on a ping-pong's next message read the idle one every 10 us, a system
// call that delayed the message on the other. A message that then does come on the idle path arrives.
TEST(PollOrder, AnIdlePathIsReadLessOftenButStillDeliversWhatComesOnIt) {
  CommOptions opts = testing::EagerOptions();
  LoggedPair lp = MakeLoggedPair(2, opts);
  // Small messages stay on one path.
  for (int i = 0; i < 8; ++i) {
    OneMessage(lp, 8, 'p', false, nullptr);
    if (::testing::Test::HasFatalFailure()) return;
  }
  int busy = -1;
  for (auto it = lp.recv_log->rbegin(); it != lp.recv_log->rend() && busy < 0; ++it) busy = it->path;
  ASSERT_GE(busy, 0);
  const int idle = 1 - busy;
  // The receiver waits 20 ms on a receive nothing is sent for, calling in as fast as it can.
  std::vector<char> rbuf(256 * 1024 + 64, 0);
  void* d = rbuf.data();
  uint64_t cap = rbuf.size();
  int tag = 9;
  RecvRequest* rr = nullptr;
  ASSERT_TRUE(lp.recv->Irecv(1, &d, &cap, &tag, &rr).ok());
  lp.recv_log->clear();
  int calls = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until) {
    int done = 0;
    ASSERT_TRUE(lp.recv->Test(rr, &done, nullptr).ok());
    ASSERT_EQ(done, 0);
    ++calls;
  }
  int busy_reads = 0, idle_reads = 0;
  for (const Event& e : *lp.recv_log) (e.path == busy ? busy_reads : idle_reads) += e.op == 'R';
  // With a fixed 10 us gap the idle path took about 2000 reads in 20 ms; doubling to 160 us, about 130.
  EXPECT_LT(idle_reads, 600) << "idle path read " << idle_reads << " times in 20 ms (" << calls << " calls)";
  EXPECT_GE(idle_reads, 5) << "idle path no longer read (" << calls << " calls)";
  EXPECT_GE(busy_reads, calls / 2) << "the path that delivered last must be read every call";
  // A 128 KiB message takes the next path in turn: the idle one. It arrives, exact.
  std::vector<char> sbuf(128 * 1024);
  for (size_t k = 0; k < sbuf.size(); ++k) sbuf[k] = static_cast<char>(k * 7 + 3);
  SendRequest* sr = nullptr;
  lp.recv_log->clear();
  for (int tries = 0; sr == nullptr && tries < 100000; ++tries) {
    ASSERT_TRUE(lp.send->Isend(sbuf.data(), sbuf.size(), 9, nullptr, &sr).ok());
    int done = 0;
    if (sr == nullptr) {
      ASSERT_TRUE(lp.recv->Test(rr, &done, nullptr).ok());
    }
  }
  ASSERT_NE(sr, nullptr);
  int sdone = 0, rdone = 0;
  uint64_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!sdone || !rdone) && std::chrono::steady_clock::now() < deadline) {
    if (!sdone) {
      ASSERT_TRUE(lp.send->Test(sr, &sdone, nullptr).ok());
    }
    if (!rdone) {
      ASSERT_TRUE(lp.recv->Test(rr, &rdone, &got).ok());
    }
  }
  ASSERT_TRUE(sdone && rdone) << "the message on the idle path did not arrive within 10 s";
  ASSERT_EQ(got, sbuf.size());
  EXPECT_EQ(std::memcmp(rbuf.data(), sbuf.data(), sbuf.size()), 0);
  bool idle_delivered = false;
  for (const Event& e : *lp.recv_log) idle_delivered |= e.path == idle && e.op == 'R' && e.result > 0;
  EXPECT_TRUE(idle_delivered) << "the 128 KiB message was expected on the idle path " << idle;
}

}  // namespace
}  // namespace ff
