// The join of retransmitting sockets with the plugin's tasks and paths (bpf/socket_owners.h).
#include "bpf/socket_owners.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ff::probe {
namespace {

TEST(ProbeSocketOwners, ParsesProcNetTcpBothFamilies) {
  const std::string v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:1F90 0100007F:A2B4 01 00000000:00000000 00:00000000 00000000     0        0 12345 1 0 20 4 30 10 -1\n"
      "   1: 0A00000A:C350 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0 20 4 30 10 -1\n"
      "   2: garbage\n";
  auto m = ParseProcNetTcp(v4, false);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ((m[SocketId{"127.0.0.1:8080", "127.0.0.1:41652"}]), 12345u);
  EXPECT_EQ((m[SocketId{"10.0.0.10:50000", "0.0.0.0:0"}]), 777u);
  const std::string v6 =
      "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
      "tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:D431 01 00000000:00000000 "
      "00:00000000 00000000     0        0 999 1 0 20 4 30 10 -1\n";
  auto m6 = ParseProcNetTcp(v6, true);
  ASSERT_EQ(m6.size(), 1u);
  EXPECT_EQ(m6.begin()->first.local, "[::1]:8080");
  EXPECT_EQ(m6.begin()->first.remote, "[::1]:54321");
  EXPECT_EQ(m6.begin()->second, 999u);
}

TimelineEvent Event(int pid, const std::string& task, const std::string& kind, const std::string& peer) {
  TimelineEvent e;
  e.pid = pid;
  e.task = task;
  e.event = kind;
  e.peer = peer;
  return e;
}

TimelineEvent PathUp(int pid, const std::string& task, const std::string& peer, int path, const std::string& ends) {
  TimelineEvent e = Event(pid, task, "path_up", peer);
  e.path = path;
  e.details = {{"ends", ends}};
  return e;
}

TEST(ProbeSocketOwners, JoinsRetransmitsToTaskPeerAndPath) {
  const SocketId sent{"10.0.0.2:41300", "10.0.0.3:50001"};      // connecting side of path 1
  const SocketId received{"10.0.0.1:50000", "10.0.0.2:41234"};  // accepting side of path 0
  const SocketId unnamed{"10.0.0.2:41301", "10.0.0.3:50001"};   // owned, remote = a connect's peer
  const SocketId other{"10.0.0.2:41400", "10.0.0.9:22"};        // owned, nothing else known
  const SocketId stranger{"10.0.0.5:1", "10.0.0.6:2"};
  const std::map<SocketId, uint64_t> rt = {{sent, 5}, {received, 3}, {unnamed, 2}, {other, 1}, {stranger, 7}};
  // `sent` is not in the owners (its process ended before /proc was read): path_up alone names it.
  const std::map<SocketId, int> owners = {{received, 100}, {unnamed, 200}, {other, 200}};
  const std::vector<TimelineEvent> tl = {
      Event(200, "train-b", "connect", "10.0.0.3:50001"),
      PathUp(200, "train-b", "10.0.0.3:50001", 0, "10.0.0.2:41299->10.0.0.3:50001"),
      PathUp(200, "train-b", "10.0.0.3:50001", 1, "10.0.0.2:41300->10.0.0.3:50001"),
      Event(100, "train-a", "accept", "10.0.0.2:41234"),
      PathUp(100, "train-a", "10.0.0.2:41234", 0, "10.0.0.2:41234"),
      PathUp(100, "train-a", "10.0.0.2:41234", 1, "10.0.0.2:41235"),
      // Another process whose event would match `other` by peer: not its owner.
      Event(300, "train-c", "connect", "10.0.0.9:22"),
      // The same ends in another process: only the owner's path_up counts.
      PathUp(300, "train-c", "10.0.0.1:50000", 4, "10.0.0.2:41234"),
  };
  const nlohmann::json rows = JoinRetransmits(rt, owners, tl);
  ASSERT_EQ(rows.size(), 5u);
  std::map<std::string, nlohmann::json> by_local;
  for (const auto& r : rows) by_local[r["local"].get<std::string>()] = r;
  const auto& s = by_local[sent.local];
  EXPECT_EQ(s["count"], 5);
  EXPECT_EQ(s["pid"], 200);
  EXPECT_EQ(s["task"], "train-b");
  EXPECT_EQ(s["peer"], "10.0.0.3:50001");
  EXPECT_EQ(s["path"], 1);
  EXPECT_EQ(s["match"], "path");
  const auto& r = by_local[received.local];
  EXPECT_EQ(r["pid"], 100);
  EXPECT_EQ(r["task"], "train-a");
  EXPECT_EQ(r["path"], 0);
  EXPECT_EQ(r["match"], "path");
  const auto& u = by_local[unnamed.local];
  EXPECT_EQ(u["task"], "train-b");
  EXPECT_EQ(u["peer"], "10.0.0.3:50001");
  EXPECT_EQ(u["path"], -1);
  EXPECT_EQ(u["match"], "peer");
  const auto& o = by_local[other.local];
  EXPECT_EQ(o["pid"], 200);
  EXPECT_EQ(o["task"], "train-b");
  EXPECT_EQ(o["match"], "process");
  EXPECT_EQ(o["peer"], "");
  const auto& x = by_local[stranger.local];
  EXPECT_EQ(x["count"], 7);
  EXPECT_FALSE(x.contains("pid"));
}

// A real socket of this process is found in /proc with this pid.
TEST(ProbeSocketOwners, FindsThisProcessesConnectedSocket) {
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(l, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(l, 1), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  sockaddr_in local{};
  len = sizeof(local);
  ASSERT_EQ(getsockname(c, reinterpret_cast<sockaddr*>(&local), &len), 0);
  std::map<SocketId, int> owners;
  ScanSocketOwners(getpid(), "/proc", &owners);
  const SocketId want{"127.0.0.1:" + std::to_string(ntohs(local.sin_port)),
                      "127.0.0.1:" + std::to_string(ntohs(a.sin_port))};
  auto it = owners.find(want);
  ASSERT_NE(it, owners.end()) << want.local << " -> " << want.remote;
  EXPECT_EQ(it->second, getpid());
  // A process that does not exist adds nothing.
  std::map<SocketId, int> none;
  ScanSocketOwners(999999999, "/proc", &none);
  EXPECT_TRUE(none.empty());
  close(c);
  close(l);
}

}  // namespace
}  // namespace ff::probe
