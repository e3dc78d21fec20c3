// FLEXIFORCE_TCP_CONGESTION: every path's TCP connection, at both ends, runs the congestion control
// it names; one the kernel refuses leaves the default in place and the connection carries data.
// Each case runs in its own process: the plugin reads its knobs once, at its first init.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tcp/socket.h"
#include "tests/plugin/two_process.h"

namespace ff::testing {
namespace {

std::string ProcWord(const char* path) {
  std::ifstream f(path);
  std::string w;
  f >> w;
  return w;
}

std::vector<std::string> Available() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::vector<std::string> out;
  for (std::string w; f >> w;) out.push_back(w);
  return out;
}

// The congestion control of every connected TCP socket of this process.
std::vector<std::string> ConnectedCongestion() {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    int type = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t plen = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
    const std::string cc = tcp::CongestionControlOf(fd);
    if (!cc.empty()) out.push_back(cc);
  }
  closedir(d);
  return out;
}

// In a fresh process: sets the knob, connects the plugin to itself over loopback, moves one 1 MiB
// message, and returns the connected sockets' congestion controls through `report` (a pipe).
int ConnectAndReport(const std::string& knob, int report) {
  setenv("FLEXIFORCE_TCP_CONGESTION", knob.c_str(), 1);
  setenv("FLEXIFORCE_STATS", "0", 1);
  NetPeer peer;
  char handle[128] = {};
  void* lc = peer.Listen(handle);
  void* sc = nullptr;
  void* rc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sc == nullptr || rc == nullptr) {
    if (sc == nullptr && peer.net()->connect(peer.ctx(), 0, handle, &sc, &dc) != ncclSuccess) return 4;
    if (rc == nullptr && peer.net()->accept(lc, &rc, &dc) != ncclSuccess) return 5;
    if (std::chrono::steady_clock::now() > deadline) return 6;
  }
  std::vector<char> out(1 << 20), in(1 << 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7 + 3);
  void* rreq = nullptr;
  void* sreq = nullptr;
  void* data = in.data();
  size_t cap = in.size();
  int tag = 9;
  while (rreq == nullptr)
    if (peer.net()->irecv(rc, 1, &data, &cap, &tag, nullptr, nullptr, &rreq) != ncclSuccess) return 7;
  while (sreq == nullptr)
    if (peer.net()->isend(sc, out.data(), out.size(), 9, nullptr, nullptr, &sreq) != ncclSuccess) return 8;
  int done_s = 0, done_r = 0, sizes[1] = {0};
  while (!done_s || !done_r) {
    if (!done_s && peer.net()->test(sreq, &done_s, nullptr) != ncclSuccess) return 9;
    if (!done_r && peer.net()->test(rreq, &done_r, sizes) != ncclSuccess) return 10;
    if (std::chrono::steady_clock::now() > deadline) return 11;
  }
  if (sizes[0] != static_cast<int>(in.size()) || in != out) return 12;
  std::string line;
  for (const std::string& cc : ConnectedCongestion()) line += cc + " ";
  line += "\n";
  if (write(report, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 13;
  peer.net()->closeSend(sc);
  peer.net()->closeRecv(rc);
  peer.net()->closeListen(lc);
  return 0;
}

std::vector<std::string> RunChild(const std::string& knob, int* status) {
  ChildProcess child([&](int, int wfd) { return ConnectAndReport(knob, wfd); });
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(child.from_child(), buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  *status = child.Wait();
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(TcpCongestion, EveryPathAtBothEndsRunsTheNamedAlgorithm) {
  const std::string def = ProcWord("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string pick;
  for (const std::string& a : Available())
    if (a != def && (pick.empty() || a == "reno")) pick = a;
  if (pick.empty()) GTEST_SKIP() << "only one TCP congestion control is available here (" << def << "): nothing to tell apart";
  int status = -1;
  const std::vector<std::string> ccs = RunChild(pick, &status);
  ASSERT_EQ(status, 0) << "the child failed (exit status " << status << ")";
  // Both ends of each of the default 2 paths live in this one process.
  int named = 0;
  for (const std::string& cc : ccs) named += cc == pick;
  EXPECT_GE(named, 4) << "sockets: " << ::testing::PrintToString(ccs) << ", asked for " << pick << ", default " << def;
}

TEST(TcpCongestion, AnAlgorithmTheKernelRefusesKeepsTheDefaultAndCarriesData) {
  const std::string def = ProcWord("/proc/sys/net/ipv4/tcp_congestion_control");
  if (def.empty()) GTEST_SKIP() << "no /proc/sys/net/ipv4/tcp_congestion_control here";
  int status = -1;
  const std::vector<std::string> ccs = RunChild("no_such_cc", &status);
  ASSERT_EQ(status, 0) << "the child failed (exit status " << status << "): a refused algorithm must not fail the job";
  ASSERT_FALSE(ccs.empty());
  for (const std::string& cc : ccs) EXPECT_EQ(cc, def);
}

}  // namespace
}  // namespace ff::testing
