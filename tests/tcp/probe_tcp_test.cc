// ProbeTcp over a real loopback connection: the neutral sample's flow-control figures (the peer's
// advertised window, the bytes in flight) follow the socket, for the watchdog's log evidence.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "tcp/socket.h"
#include "tcp/stream_path.h"

namespace ff {
namespace {

struct LoopbackPair {
  int client = -1, server = -1;
  LoopbackPair() {
    const int lfd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(lfd, 1), 0);
    EXPECT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    server = accept(lfd, nullptr, nullptr);
    EXPECT_GE(server, 0);
    close(lfd);
  }
  ~LoopbackPair() {
    close(client);
    close(server);
  }
};

TEST(ProbeTcp, ReportsThePeersWindowAndWhatIsInFlight) {
  LoopbackPair c;
  const PathSample idle = ProbeTcp(c.client);
  ASSERT_TRUE(idle.valid);
  if (!idle.window_known) GTEST_SKIP() << "this kernel's tcp_info has no tcpi_snd_wnd (Linux 6.1 has it)";
  EXPECT_GT(idle.peer_window, 0u);
  EXPECT_EQ(idle.in_flight_bytes, 0u);

  // The peer reads nothing: write until the socket takes no more. Its advertised window closes, and
  // what was acknowledged is no longer in flight.
  ASSERT_TRUE(tcp::SetNonBlocking(c.client).ok());
  std::vector<char> block(64 * 1024, 'x');
  uint64_t written = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = send(c.client, block.data(), block.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      written += static_cast<uint64_t>(n);
      continue;
    }
    ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << errno;
    // The last segments' acknowledgements (with the closed window) arrive shortly after.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (send(c.client, block.data(), 1, MSG_DONTWAIT | MSG_NOSIGNAL) <= 0) break;
    ++written;
  }
  const PathSample full = ProbeTcp(c.client);
  ASSERT_TRUE(full.window_known);
  EXPECT_LT(full.peer_window, idle.peer_window);
  EXPECT_LE(full.in_flight_bytes, written);
  EXPECT_LE(full.bytes_acked + full.in_flight_bytes, written);
  EXPECT_GT(full.bytes_acked, 0u);
}

TEST(ProbeTcp, AClosedOrInvalidDescriptorGivesAnInvalidSample) {
  EXPECT_FALSE(ProbeTcp(-1).valid);
  EXPECT_FALSE(ProbeTcp(-1).window_known);
}

}  // namespace
}  // namespace ff
