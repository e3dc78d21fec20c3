// ff-one-thread-pingpong: the CPU a round trip costs, with both ends in one thread.
//
// `flexiforce bench` measures a round trip between two processes that busy-poll, so its figure
// mixes what each message costs with how soon a polling loop notices it. Here one thread drives
// both ends - the ping's send and receive communicators and the echo's - so every microsecond is
// work on the critical path: the plugin's own code, its system calls, and the kernel's loopback
// stack that each write runs. Against the same loop over raw TCP sockets (one socket per direction,
// NCCL's connection model) the difference is what the plugin adds per message.
//
// Every message carries its index and is checked on arrival; a wrong byte, a wrong size or a
// round trip that does not finish within 10 s exits non-zero.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/plugin_loader.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStall = std::chrono::seconds(10);

const char* kUsage =
    "Usage: ff-one-thread-pingpong [--mode plugin|raw] [--size BYTES] [--iters N] [--json]\n"
    "\n"
    "Round trips of one message size with both ends driven by one thread, so the time per round trip\n"
    "is the CPU work on its critical path (no polling delay): the plugin's code, its system calls and\n"
    "the kernel's loopback stack. raw: the same loop over two TCP sockets (one per direction, as NCCL\n"
    "connects a send and a receive communicator). Each message is checked on arrival.\n"
    "\n"
    "  --mode M    plugin (default) or raw\n"
    "  --size N    message bytes, 1..1048576 (default 8)\n"
    "  --iters N   round trips, 1..100000000 (default 100000)\n"
    "  --json      print the result as one JSON object\n"
    "  --help      this text\n"
    "\n"
    "The plugin is $FF_PLUGIN_PATH, else the built one; FLEXIFORCE_PATHS and the plugin's other\n"
    "variables apply. Pin it to one CPU (taskset -c 0) for steadier figures.\n";

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "ff-one-thread-pingpong: %s\n", what.c_str());
  std::exit(1);
}

uint64_t ParseCount(const char* flag, const char* v, uint64_t lo, uint64_t hi) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || n < lo || n > hi)
    Fail(std::string(flag) + " takes a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
         ", got '" + v + "'");
  return n;
}

void Stamp(char* p, size_t n, uint64_t i) {
  for (size_t k = 0; k < n; ++k) p[k] = static_cast<char>((i * 131 + k * 7) & 0xff);
}

void Check(const char* p, size_t n, uint64_t i, const char* where) {
  for (size_t k = 0; k < n; ++k)
    if (p[k] != static_cast<char>((i * 131 + k * 7) & 0xff))
      Fail(std::string(where) + ": message " + std::to_string(i) + " differs at byte " + std::to_string(k));
}

struct CpuTime {
  double user_s = 0, sys_s = 0;
};

CpuTime Now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6, u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6};
}

struct Result {
  double wall_s = 0;
  CpuTime cpu;
};

// ---------------------------------------------------------------------------------------------
// Raw: two connected loopback TCP sockets, non-blocking.

int Connected(int* accepted) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (l < 0) Fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    Fail(std::string("loopback listener: ") + std::strerror(errno));
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    Fail(std::string("loopback connect: ") + std::strerror(errno));
  int s = accept(l, nullptr, nullptr);
  if (s < 0) Fail(std::string("loopback accept: ") + std::strerror(errno));
  close(l);
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *accepted = s;
  return c;
}

void SendAll(int fd, const char* p, size_t n) {
  const auto t0 = Clock::now();
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      Fail(std::string("raw send: ") + std::strerror(errno));
    } else if (Clock::now() - t0 > kStall) {
      Fail("raw send stalled for 10 s");
    }
  }
}

void RecvAll(int fd, char* p, size_t n) {
  const auto t0 = Clock::now();
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      Fail("raw receive: the peer closed");
    } else if (errno != EAGAIN && errno != EINTR) {
      Fail(std::string("raw receive: ") + std::strerror(errno));
    } else if (Clock::now() - t0 > kStall) {
      Fail("raw receive stalled for 10 s");
    }
  }
}

Result RunRaw(size_t size, uint64_t iters) {
  int fwd_in = -1, back_in = -1;
  const int fwd_out = Connected(&fwd_in), back_out = Connected(&back_in);
  std::vector<char> a(size), b(size);
  const CpuTime c0 = Now();
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    Stamp(a.data(), size, i);
    SendAll(fwd_out, a.data(), size);
    RecvAll(fwd_in, b.data(), size);
    Check(b.data(), size, i, "raw ping");
    std::memset(a.data(), 0, size);
    SendAll(back_out, b.data(), size);
    RecvAll(back_in, a.data(), size);
    Check(a.data(), size, i, "raw echo");
  }
  Result r;
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const CpuTime c1 = Now();
  r.cpu = {c1.user_s - c0.user_s, c1.sys_s - c0.sys_s};
  for (int fd : {fwd_in, fwd_out, back_in, back_out}) close(fd);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Plugin: a send and a receive communicator each way, all in this process.

void Nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) Fail(std::string("plugin ") + call + " failed (ncclResult " + std::to_string(r) + ")");
}

struct Direction {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  void* send_mh = nullptr;
  void* recv_mh = nullptr;
};

class PluginPair {
 public:
  explicit PluginPair(size_t size) : net_(lib_.V11()), src_(size), dst_(size) {
    ncclNetCommConfig_t cfg{-1};
    Nccl(net_->init(&ctx_, 0x0E7A, &cfg, ff::testing::StderrLogger, nullptr), "init");
    int ndev = 0;
    Nccl(net_->devices(&ndev), "devices");
    if (ndev < 1) Fail("the plugin found no network device");
    Open(dir_[0], src_.data(), dst_.data());  // the ping: src -> dst
    Open(dir_[1], dst_.data(), src_.data());  // the echo: dst -> src
  }
  ~PluginPair() {
    for (Direction& d : dir_) {
      if (d.send_mh) net_->deregMr(d.send, d.send_mh);
      if (d.recv_mh) net_->deregMr(d.recv, d.recv_mh);
      if (d.send) net_->closeSend(d.send);
      if (d.recv) net_->closeRecv(d.recv);
      if (d.listen) net_->closeListen(d.listen);
    }
    net_->finalize(ctx_);
  }
  PluginPair(const PluginPair&) = delete;
  PluginPair& operator=(const PluginPair&) = delete;

  // One message over direction k: from `from` into `to`, tested until both ends completed.
  void Move(int k, char* from, char* to, size_t size) {
    Direction& d = dir_[k];
    void* rr = nullptr;
    void* sr = nullptr;
    void* data = to;
    size_t cap = size;
    int tag = 1;
    void* mh = d.recv_mh;
    const auto t0 = Clock::now();
    while (rr == nullptr) {
      Nccl(net_->irecv(d.recv, 1, &data, &cap, &tag, &mh, nullptr, &rr), "irecv");
      Stalled(t0, "irecv");
    }
    while (sr == nullptr) {
      Nccl(net_->isend(d.send, from, size, tag, d.send_mh, nullptr, &sr), "isend");
      Stalled(t0, "isend");
    }
    int sent = 0, received = 0, got = 0, n = 0;
    while (!sent || !received) {
      if (!sent) Nccl(net_->test(sr, &sent, &n), "test (send)");
      if (!received) Nccl(net_->test(rr, &received, &got), "test (receive)");
      Stalled(t0, "the round trip");
    }
    if (static_cast<size_t>(got) != size)
      Fail("received " + std::to_string(got) + " bytes, expected " + std::to_string(size));
  }

  char* src() { return src_.data(); }
  char* dst() { return dst_.data(); }

 private:
  static void Stalled(Clock::time_point t0, const char* what) {
    if (Clock::now() - t0 > kStall) Fail(std::string(what) + " did not complete within 10 s");
  }

  void Open(Direction& d, char* from, char* to) {
    char handle[FF_NCCL_NET_HANDLE_MAXSIZE] = {};
    Nccl(net_->listen(ctx_, 0, handle, &d.listen), "listen");
    ncclNetDeviceHandle_t* dev = nullptr;
    const auto t0 = Clock::now();
    while (d.send == nullptr || d.recv == nullptr) {
      if (d.send == nullptr) Nccl(net_->connect(ctx_, 0, handle, &d.send, &dev), "connect");
      if (d.recv == nullptr) Nccl(net_->accept(d.listen, &d.recv, &dev), "accept");
      Stalled(t0, "connecting");
    }
    // Registered once, as NCCL registers its buffers.
    Nccl(net_->regMr(d.send, from, src_.size(), NCCL_PTR_HOST, &d.send_mh), "regMr");
    Nccl(net_->regMr(d.recv, to, dst_.size(), NCCL_PTR_HOST, &d.recv_mh), "regMr");
  }

  ff::testing::PluginLibrary lib_;
  const ncclNet_v11_t* net_;
  void* ctx_ = nullptr;
  std::vector<char> src_, dst_;
  Direction dir_[2];
};

Result RunPlugin(size_t size, uint64_t iters) {
  PluginPair pair(size);
  const CpuTime c0 = Now();
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    Stamp(pair.src(), size, i);
    pair.Move(0, pair.src(), pair.dst(), size);
    Check(pair.dst(), size, i, "plugin ping");
    std::memset(pair.src(), 0, size);
    pair.Move(1, pair.dst(), pair.src(), size);
    Check(pair.src(), size, i, "plugin echo");
  }
  Result r;
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const CpuTime c1 = Now();
  r.cpu = {c1.user_s - c0.user_s, c1.sys_s - c0.sys_s};
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "plugin";
  uint64_t size = 8, iters = 100000;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Fail(a + " needs a value; see --help");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--mode") {
      mode = value();
      if (mode != "plugin" && mode != "raw") Fail("--mode takes plugin or raw, got '" + mode + "'");
    } else if (a == "--size") {
      size = ParseCount("--size", value(), 1, 1 << 20);
    } else if (a == "--iters") {
      iters = ParseCount("--iters", value(), 1, 100000000);
    } else if (a == "--json") {
      json = true;
    } else {
      Fail("unknown argument '" + a + "'; see --help");
    }
  }
  Result r;
  try {
    r = mode == "raw" ? RunRaw(size, iters) : RunPlugin(size, iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ff-one-thread-pingpong: %s\n", e.what());
    return 1;
  }
  const double n = static_cast<double>(iters);
  const double rtt = r.wall_s * 1e6 / n, user = r.cpu.user_s * 1e6 / n, sys = r.cpu.sys_s * 1e6 / n;
  if (json) {
    std::printf("{\"mode\": \"%s\", \"size\": %llu, \"iters\": %llu, \"round_trip_us\": %.3f, \"user_us\": %.3f, "
                "\"sys_us\": %.3f}\n",
                mode.c_str(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(iters), rtt, user,
                sys);
  } else {
    std::printf("%s, %llu B, %llu round trips in one thread: %.2f us per round trip (user %.2f us, system %.2f us)\n",
                mode.c_str(), static_cast<unsigned long long>(size), static_cast<unsigned long long>(iters), rtt, user,
                sys);
  }
  return 0;
}
