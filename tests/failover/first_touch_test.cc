// A connection's own buffers are faulted in when it is made, not page by page by its first
// messages: the eager ring is written sequentially, so an untouched ring took one page fault per
// 4 KiB of the first eager bytes sent (a collective's first iterations).
#include <sys/resource.h>

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "core/recv_comm.h"
#include "core/send_comm.h"
#include "tests/failover/socketpair_pair.h"
#include "tests/failover/socketpair_stream.h"

// ThreadSanitizer faults in shadow memory of its own for the addresses a program first writes.
#if defined(__SANITIZE_THREAD__)
#define FF_FIRST_TOUCH_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FF_FIRST_TOUCH_UNDER_TSAN 1
#endif
#endif

namespace ff {
namespace {

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Sends one eager message and receives it into `rb`; false (and a test failure) if it never arrives.
bool RoundTrip(testing::CommPair& p, const std::vector<char>& msg, std::vector<char>& rb) {
  SendRequest* s = nullptr;
  for (int tries = 0; s == nullptr && tries < 1000; ++tries) {
    EXPECT_TRUE(p.send->Isend(msg.data(), msg.size(), 3, nullptr, &s).ok());
    if (s == nullptr) (void)p.recv->Progress();
  }
  if (s == nullptr) return false;
  RecvRequest* r = testing::PostRecv(*p.recv, rb, 3);
  if (r == nullptr) return false;
  int sent = 0, received = 0;
  uint64_t size = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!sent || !received) && std::chrono::steady_clock::now() < deadline) {
    if (!sent) {
      EXPECT_TRUE(p.send->Test(s, &sent, nullptr).ok()) << p.send->error().message();
    }
    if (!received) {
      EXPECT_TRUE(p.recv->Test(r, &received, &size).ok()) << p.recv->error().message();
    }
  }
  EXPECT_TRUE(sent && received) << "an eager message never completed";
  EXPECT_EQ(size, msg.size());
  return sent && received;
}

TEST(FirstTouch, AFreshConnectionsFirstMegabyteOfEagerSendsTakesFewPageFaults) {
#ifdef FF_FIRST_TOUCH_UNDER_TSAN
  GTEST_SKIP() << "under ThreadSanitizer, whose shadow memory takes page faults of its own (284 here)";
#endif
  CommOptions o = testing::EagerOptions();  // 4 KiB eager threshold, 1 MiB ring
  o.coalesce_ns = 0;
  testing::CommPair p = testing::MakeCommPair(1, o);
  std::vector<char> msg(4000, 'f');
  std::vector<char> rb(4096, 0);
  ASSERT_TRUE(RoundTrip(p, msg, rb));  // the test's own first calls fault in what they touch
  constexpr int kMessages = 250;       // 1,000,000 bytes through the 1 MiB ring
  const long before = MinorFaults();
  for (int i = 0; i < kMessages; ++i) {
    msg[0] = static_cast<char>(i);
    ASSERT_TRUE(RoundTrip(p, msg, rb)) << "message " << i;
    ASSERT_EQ(rb[0], msg[0]) << "message " << i;
  }
  const long faults = MinorFaults() - before;
  // An untouched ring takes about 244 here, one per page the messages reach.
  EXPECT_LT(faults, 40) << faults << " page faults while 1 MB of eager sends went through a fresh connection";
}

}  // namespace
}  // namespace ff
