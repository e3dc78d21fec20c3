// `flexiforce bench`: the plugin against raw TCP sockets, same streams, two processes, one run.
//
// The parent forks a peer. Both load the plugin through its v11 C ABI, as NCCL's proxy does, and
// also open raw loopback sockets, one per plugin path. For every size the parent measures, in
// alternation so that machine drift touches both alike: streaming throughput (a window of
// messages in flight, receiver posting ahead) and ping-pong round trip. Every message carries
// its index in its first and last bytes, and the receiver checks it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugin/config_registry.h"
#include "nccl/net_abi.h"
#include "tcp/socket.h"
#include "cli/plugin_loader.h"
#include "cli/tcp_segments.h"

namespace ff {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kMaxBenchBytes = 1024 * kMiB;
constexpr uint64_t kMaxBufferBytes = 4096 * kMiB;  // window x max size, per process
constexpr uint64_t kRttMaxBytes = 1 * kMiB;        // larger round trips say nothing new and cost time
constexpr int kReps = 5;  // default alternating runs per measurement and transport (--runs); the median is reported
constexpr int kMaxReps = 99;
constexpr double kTargetSeconds = 0.25;            // auto --iters aims kReps runs of a measurement at this
constexpr uint64_t kMinAutoIters = 20;
constexpr uint64_t kMaxAutoIters = 2000000;
constexpr auto kStallLimit = std::chrono::seconds(30);  // no progress for this long = failure
constexpr int kTag = 7;

// ---------------------------------------------------------------------------------------------
// Options

enum class Mode { kBoth, kPlugin, kRaw };

struct Options {
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 64 * kMiB;
  uint64_t iters = 0;  // 0: automatic
  int window = 8;
  int runs = kReps;  // alternating runs per measurement and transport
  int paths = 0;  // 0: the plugin's configured value
  std::string congestion;  // --congestion: sets FLEXIFORCE_TCP_CONGESTION; empty: the system's default
  Mode mode = Mode::kBoth;
  bool throughput = true;  // --measure
  bool rtt = true;
  std::string plugin_path;
  bool json = false;
  bool pin = false;  // --pin: this process and the peer each on its own CPU
};

const char kUsage[] =
    "usage: flexiforce bench [options]\n\n"
    "Benchmarks the FlexiForce plugin, driven through its NCCL v11 C ABI, against raw TCP sockets\n"
    "with the same number of streams, between this process and a forked peer, in one run.\n"
    "For every power-of-two size it measures streaming throughput (a window of messages in\n"
    "flight; the plugin's send completion is acknowledged by the receiver, so the time is\n"
    "end-to-end) and, up to 1 MiB, ping-pong round-trip time. Each figure is the median of 5 runs\n"
    "(--runs), plugin and raw alternating, so a stall in one run (a descheduled process) does not\n"
    "move it.\n"
    "The \"run pairs\" column gives the lowest and highest throughput ratio of plugin run k against\n"
    "raw run k (it ran right after); with --json every run's figure is under \"runs\".\n"
    "Raw sockets bind 127.0.0.1, use TCP_NODELAY and busy-poll non-blocking sendmsg/recvmsg;\n"
    "like the plugin they stripe a message evenly over the streams from FLEXIFORCE_STRIPE_MIN\n"
    "on, send smaller ones whole, round-robin, and move at most 960 KiB per stream per system\n"
    "call, raw's best on loopback (512 KiB ran up to 40% slower, 1 MiB and more as slow as 512 KiB:\n"
    "Linux processes acknowledgements inside a write every 16 socket buffers), whatever the\n"
    "plugin's FLEXIFORCE_CHUNK_SIZE. Every message is checked (its index sits in its first and\n"
    "last 8 bytes); a failed or corrupt transfer exits with status 1.\n"
    "With 2 or more streams the round trip is also measured over a raw socket pair (\"pair\"): the\n"
    "ping on one socket, the echo on another, as NCCL connects one send and one receive\n"
    "communicator per peer. On one socket each direction's data carries the other's TCP\n"
    "acknowledgement; on a pair the receiver answers small segments with bare acknowledgements.\n"
    "The smallest size's TCP segments per round trip (both directions, counted with TCP_INFO over\n"
    "every connection of this process outside the timed loop) are printed for plugin, raw and\n"
    "pair after the targets; with --json every round-trip row has them (*_rtt_segments).\n"
    "Every streamed size's segments per message, plugin and raw, follow on one line (counted\n"
    "the same way; with --json *_stream_segments): a segment is a pass through both ends' TCP\n"
    "stacks, so a count well above raw's is what a message costs beyond its bytes.\n\n"
    "options:\n"
    "  --min-bytes N     smallest message (default 8; suffixes K, M, G)\n"
    "  --max-bytes N     largest message (default 64M, at most 1G)\n"
    "  --iters N         messages per measurement, shared by its runs (default: automatic,\n"
    "                    ~0.25 s per 5 runs, >= 20)\n"
    "  --window N        messages in flight while streaming, 1..32 (default 8)\n"
    "  --runs N          alternating runs per measurement and transport, 1..99 (default 5); each\n"
    "                    run as long as with 5, so 15 runs take three times as long. On a host\n"
    "                    whose speed drifts between runs, more runs steady the medians\n"
    "  --paths N         plugin paths and raw streams, 1..16; sets FLEXIFORCE_PATHS\n"
    "                    (default: the plugin's configured value)\n"
    "  --congestion NAME TCP congestion control of both transports' connections (cubic, bbr, reno,\n"
    "                    ...); sets FLEXIFORCE_TCP_CONGESTION, which the raw sockets follow too\n"
    "                    (default: the system's net.ipv4.tcp_congestion_control, printed in the\n"
    "                    header). On loopback bbr paces both to a few GB/s and its rate swings by\n"
    "                    20-40% between runs; cubic runs at the copy speed, steadily\n"
    "  --mode M          both, plugin or raw (default both)\n"
    "  --measure W       throughput, rtt or both (default both)\n"
    "  --plugin PATH     plugin shared object (default $FF_PLUGIN_PATH, else the built one)\n"
    "  --pin             run this process and the peer each on its own CPU (the first two this\n"
    "                    process may use); on a small host the scheduler otherwise moves busy-polling\n"
    "                    processes onto one CPU for a while, which moves a figure more than the\n"
    "                    transports differ\n"
    "  --json            print the results and configuration as JSON\n"
    "  --help            this text\n\n"
    "The plugin logs as under NCCL: its warnings always, its INFO lines with NCCL_DEBUG=INFO, filtered by\n"
    "NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV; add NET for each connection and its close).\n\n"
    "targets (each printed MET, MISSED or not measured; under \"targets\" with --json):\n"
    "  DESIGN.md:           throughput >= 0.90x raw for messages >= 1 MiB; 8 B round trip <= 1.3x raw\n"
    "  small-message issue: 1 KiB and 64 KiB throughput >= 0.80x raw; >= 1 MiB >= 0.95x raw\n";

bool ParseSize(const std::string& name, const std::string& text, uint64_t lo, uint64_t hi, uint64_t* out,
               std::string* error) {
  KnobSpec spec{name.c_str(), KnobType::kBytes, "", static_cast<int64_t>(lo), static_cast<int64_t>(hi), ""};
  int64_t v = 0;
  if (!ConfigRegistry::ParseValue(spec, text, &v, error)) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

bool ParseInt(const std::string& name, const std::string& text, int64_t lo, int64_t hi, int64_t* out,
              std::string* error) {
  KnobSpec spec{name.c_str(), KnobType::kInt, "", lo, hi, ""};
  return ConfigRegistry::ParseValue(spec, text, out, error);
}

// Returns std::nullopt after printing help (exit 0) or an error (exit 2) as `*exit_code`.
std::optional<Options> ParseOptions(int argc, char** argv, int* exit_code) {
  Options o;
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "flexiforce bench: %s\n", msg.c_str());
    *exit_code = 2;
    return std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      *exit_code = 0;
      return std::nullopt;
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (arg == "--pin") {
      o.pin = true;
      continue;
    }
    std::string value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    static const char* kValued[] = {"--min-bytes", "--max-bytes", "--iters",   "--window", "--runs",
                                    "--paths",     "--mode",      "--measure", "--plugin", "--congestion"};
    if (std::find_if(std::begin(kValued), std::end(kValued), [&](const char* k) { return arg == k; }) ==
        std::end(kValued)) {
      return fail("unknown option '" + arg +
                  "' (accepted: --min-bytes, --max-bytes, --iters, --window, --runs, --paths, --congestion, --mode, "
                  "--measure, --plugin, --pin, --json, --help)");
    }
    if (eq == std::string::npos) {
      if (i + 1 >= argc) return fail(arg + " needs a value");
      value = argv[++i];
    }
    std::string err;
    int64_t n = 0;
    if (arg == "--min-bytes") {
      if (!ParseSize(arg, value, 1, kMaxBenchBytes, &o.min_bytes, &err)) return fail(err);
    } else if (arg == "--max-bytes") {
      if (!ParseSize(arg, value, 1, kMaxBenchBytes, &o.max_bytes, &err)) return fail(err);
    } else if (arg == "--iters") {
      if (!ParseInt(arg, value, 1, 100000000, &n, &err)) return fail(err);
      o.iters = static_cast<uint64_t>(n);
    } else if (arg == "--window") {
      if (!ParseInt(arg, value, 1, FF_NCCL_NET_MAX_REQUESTS, &n, &err)) return fail(err);
      o.window = static_cast<int>(n);
    } else if (arg == "--runs") {
      if (!ParseInt(arg, value, 1, kMaxReps, &n, &err)) return fail(err);
      o.runs = static_cast<int>(n);
    } else if (arg == "--paths") {
      const KnobSpec* spec = nullptr;
      for (const auto& s : ConfigRegistry::Specs())
        if (!std::strcmp(s.name, "FLEXIFORCE_PATHS")) spec = &s;
      if (spec == nullptr) return fail("this plugin build has no FLEXIFORCE_PATHS knob");
      if (!ParseInt(arg, value, spec->min, spec->max, &n, &err)) return fail(err);
      o.paths = static_cast<int>(n);
    } else if (arg == "--congestion") {
      const KnobSpec* spec = nullptr;
      for (const auto& s : ConfigRegistry::Specs())
        if (!std::strcmp(s.name, "FLEXIFORCE_TCP_CONGESTION")) spec = &s;
      if (spec == nullptr) return fail("this plugin build has no FLEXIFORCE_TCP_CONGESTION knob");
      if (value.empty() || !ConfigRegistry::ParseValue(*spec, value, &n, &err))
        return fail("--congestion='" + value + "' is not valid; accepted: a congestion control name (cubic, bbr, "
                    "reno, ...: /proc/sys/net/ipv4/tcp_available_congestion_control)");
      o.congestion = value;
    } else if (arg == "--mode") {
      if (value == "both") {
        o.mode = Mode::kBoth;
      } else if (value == "plugin") {
        o.mode = Mode::kPlugin;
      } else if (value == "raw") {
        o.mode = Mode::kRaw;
      } else {
        return fail("--mode='" + value + "' is not valid; accepted: both, plugin or raw");
      }
    } else if (arg == "--measure") {
      if (value == "both" || value == "throughput" || value == "rtt") {
        o.throughput = value != "rtt";
        o.rtt = value != "throughput";
      } else {
        return fail("--measure='" + value + "' is not valid; accepted: both, throughput or rtt");
      }
    } else if (arg == "--plugin") {
      if (value.empty()) return fail("--plugin needs a path to libnccl-net-flexiforce.so");
      o.plugin_path = value;
    }
  }
  if (o.min_bytes > o.max_bytes)
    return fail("--min-bytes (" + std::to_string(o.min_bytes) + ") is larger than --max-bytes (" +
                std::to_string(o.max_bytes) + ")");
  if (o.max_bytes * static_cast<uint64_t>(o.window) > kMaxBufferBytes)
    return fail("--window x --max-bytes = " + std::to_string(o.max_bytes * o.window) +
                " bytes of buffers per process; accepted: at most " + std::to_string(kMaxBufferBytes));
  *exit_code = 0;
  return o;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// The median of the runs that were counted (NaN ones dropped); NaN when none was.
double MedianCounted(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  return Median(std::move(v));
}

bool UsesPlugin(Mode m) { return m != Mode::kRaw; }
bool UsesRaw(Mode m) { return m != Mode::kPlugin; }

// ---------------------------------------------------------------------------------------------
// Message content: the index in the first and last 8 bytes, a fixed fill elsewhere.

uint64_t StampWord(uint64_t index) { return (index + 1) * 0x9E3779B97F4A7C15ull; }

void Stamp(char* buf, uint64_t size, uint64_t index) {
  uint64_t w = StampWord(index);
  std::memcpy(buf, &w, std::min<uint64_t>(8, size));
  if (size >= 16) {
    w = ~w;
    std::memcpy(buf + size - 8, &w, 8);
  }
}

bool CheckStamp(const char* buf, uint64_t size, uint64_t index) {
  uint64_t w = StampWord(index);
  if (std::memcmp(buf, &w, std::min<uint64_t>(8, size)) != 0) return false;
  if (size >= 16) {
    w = ~w;
    if (std::memcmp(buf + size - 8, &w, 8) != 0) return false;
  }
  return true;
}

std::string Corrupt(const char* what, uint64_t size, uint64_t index) {
  return std::string(what) + ": message " + std::to_string(index) + " of " + std::to_string(size) +
         " bytes arrived with wrong content (its index stamp does not match)";
}

// Window-many message buffers of the largest size, touched once so page faults stay out of timing.
class Slots {
 public:
  Slots(int count, uint64_t bytes) : bytes_(bytes) {
    for (int i = 0; i < count; ++i) {
      buffers_.emplace_back(new char[bytes]);
      std::memset(buffers_.back().get(), 0xA5, bytes);
    }
  }
  char* at(uint64_t i) { return buffers_[i % buffers_.size()].get(); }
  int count() const { return static_cast<int>(buffers_.size()); }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_;
  std::vector<std::unique_ptr<char[]>> buffers_;
};

// Throws when nothing moved for kStallLimit; cheap enough to call in every busy-poll iteration.
class StallGuard {
 public:
  explicit StallGuard(std::string what) : what_(std::move(what)), last_(Clock::now()) {}
  // No clock read here: the plugin's loops call it once per message, raw's once per pass that moved
  // bytes (several messages), and a clock read per message (25 ns on this VM's kvm-clock, 1-1.5% of a
  // 1 KiB message) was the harness's own cost inside the plugin's timed loop more than inside raw's.
  void Progress() { progressed_ = true; }
  void Poll() {
    if (++polls_ % 4096 != 0) return;
    const Clock::time_point now = Clock::now();
    if (progressed_) {
      progressed_ = false;
      last_ = now;
      return;
    }
    if (now - last_ > kStallLimit)
      throw std::runtime_error(what_ + ": no progress for " +
                               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kStallLimit).count()) +
                               " s");
  }

 private:
  std::string what_;
  Clock::time_point last_;
  uint64_t polls_ = 0;
  bool progressed_ = false;
};

// ---------------------------------------------------------------------------------------------
// The plugin side: one send and one receive communicator per process, through the v11 table.

void CheckNcc(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("plugin ") + call + " failed (ncclResult " + std::to_string(r) + ")");
}

class PluginEndpoint {
 public:
  explicit PluginEndpoint(const std::string& path) : lib_(path), net_(lib_.V11()) {
    ncclNetCommConfig_t cfg{-1};
    CheckNcc(net_->init(&ctx_, 0xB37C4, &cfg, testing::StderrLogger, nullptr), "init");
    int ndev = 0;
    CheckNcc(net_->devices(&ndev), "devices");
    if (ndev < 1) throw std::runtime_error("the plugin found no network device");
    ncclNetProperties_v11_t props{};
    CheckNcc(net_->getProperties(0, &props), "getProperties");
    device_ = props.name ? props.name : "?";
  }
  ~PluginEndpoint() {
    for (void* mh : send_mhandles_) net_->deregMr(send_, mh);
    for (void* mh : recv_mhandles_) net_->deregMr(recv_, mh);
    if (send_) net_->closeSend(send_);
    if (recv_) net_->closeRecv(recv_);
    if (listen_) net_->closeListen(listen_);
    net_->finalize(ctx_);
  }
  PluginEndpoint(const PluginEndpoint&) = delete;
  PluginEndpoint& operator=(const PluginEndpoint&) = delete;

  const ncclNet_v11_t* net() const { return net_; }
  const std::string& device() const { return device_; }
  void* send_comm() const { return send_; }
  void* recv_comm() const { return recv_; }

  void Listen(char handle[FF_NCCL_NET_HANDLE_MAXSIZE]) { CheckNcc(net_->listen(ctx_, 0, handle, &listen_), "listen"); }
  void Connect(char handle[FF_NCCL_NET_HANDLE_MAXSIZE]) {
    ncclNetDeviceHandle_t* dev = nullptr;
    StallGuard guard("plugin connect");
    while (send_ == nullptr) {
      CheckNcc(net_->connect(ctx_, 0, handle, &send_, &dev), "connect");
      guard.Poll();
    }
  }
  void Accept() {
    ncclNetDeviceHandle_t* dev = nullptr;
    StallGuard guard("plugin accept");
    while (recv_ == nullptr) {
      CheckNcc(net_->accept(listen_, &recv_, &dev), "accept");
      guard.Poll();
    }
  }
  // Registers every slot with both communicators, as NCCL registers its buffers once.
  void Register(Slots& slots) {
    for (int i = 0; i < slots.count(); ++i) {
      void* mh = nullptr;
      CheckNcc(net_->regMr(send_, slots.at(i), slots.bytes(), NCCL_PTR_HOST, &mh), "regMr");
      send_mhandles_.push_back(mh);
      CheckNcc(net_->regMr(recv_, slots.at(i), slots.bytes(), NCCL_PTR_HOST, &mh), "regMr");
      recv_mhandles_.push_back(mh);
    }
  }
  void* send_mh(uint64_t i) const { return send_mhandles_[i % send_mhandles_.size()]; }
  void* recv_mh(uint64_t i) const { return recv_mhandles_[i % recv_mhandles_.size()]; }

 private:
  testing::PluginLibrary lib_;
  const ncclNet_v11_t* net_;
  void* ctx_ = nullptr;
  void* listen_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::string device_;
  std::vector<void*> send_mhandles_, recv_mhandles_;
};

void* PostSend(PluginEndpoint& ep, Slots& slots, uint64_t i, uint64_t size) {
  void* req = nullptr;
  CheckNcc(ep.net()->isend(ep.send_comm(), slots.at(i), size, kTag, ep.send_mh(i), nullptr, &req), "isend");
  return req;  // NULL: retry later
}

void* PostRecv(PluginEndpoint& ep, Slots& slots, uint64_t i, uint64_t size) {
  void* data = slots.at(i);
  size_t cap = size;
  int tag = kTag;
  void* mh = ep.recv_mh(i);
  void* req = nullptr;
  CheckNcc(ep.net()->irecv(ep.recv_comm(), 1, &data, &cap, &tag, &mh, nullptr, &req), "irecv");
  return req;
}

// Returns true when the request completed; `*got` is the size test() reports.
bool TestDone(PluginEndpoint& ep, void* req, int* got) {
  int done = 0;
  CheckNcc(ep.net()->test(req, &done, got), "test");
  return done != 0;
}

// Streams `iters` messages with up to window in flight; returns seconds from first isend to last completion.
double PluginStreamSend(PluginEndpoint& ep, Slots& slots, uint64_t window, uint64_t size, uint64_t iters) {
  std::vector<void*> reqs(window, nullptr);
  uint64_t posted = 0, completed = 0;
  StallGuard guard("plugin stream send");
  Clock::time_point t0 = Clock::now();
  while (completed < iters) {
    while (posted < iters && posted - completed < window) {
      Stamp(slots.at(posted), size, posted);
      if (posted == 0) t0 = Clock::now();
      void* r = PostSend(ep, slots, posted, size);
      if (r == nullptr) break;
      reqs[posted % window] = r;
      ++posted;
    }
    int got = 0;
    if (posted > completed && TestDone(ep, reqs[completed % window], &got)) {
      if (static_cast<uint64_t>(got) != size)
        throw std::runtime_error("plugin send of message " + std::to_string(completed) + " reported " +
                                 std::to_string(got) + " bytes, expected " + std::to_string(size));
      ++completed;
      guard.Progress();
    }
    guard.Poll();
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Receives the stream with `window` receives posted ahead; returns an error text or "".
std::string PluginStreamRecv(PluginEndpoint& ep, Slots& slots, uint64_t window, uint64_t size, uint64_t iters) {
  std::vector<void*> reqs(window, nullptr);
  uint64_t posted = 0, completed = 0;
  std::string error;
  StallGuard guard("plugin stream receive");
  while (completed < iters) {
    while (posted < iters && posted - completed < window) {
      void* r = PostRecv(ep, slots, posted, size);
      if (r == nullptr) break;
      reqs[posted % window] = r;
      ++posted;
    }
    int got = 0;
    if (posted > completed && TestDone(ep, reqs[completed % window], &got)) {
      if (static_cast<uint64_t>(got) != size && error.empty())
        error = "plugin receive of message " + std::to_string(completed) + " got " + std::to_string(got) +
                " bytes, expected " + std::to_string(size);
      if (!CheckStamp(slots.at(completed), size, completed) && error.empty())
        error = Corrupt("plugin stream", size, completed);
      ++completed;
      guard.Progress();
    }
    guard.Poll();
  }
  return error;
}

// One message out, the echo back; returns the mean round trip in seconds.
double PluginPing(PluginEndpoint& ep, Slots& slots, uint64_t size, uint64_t iters) {
  StallGuard guard("plugin ping");
  Clock::time_point t0 = Clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    void* rr = nullptr;
    while ((rr = PostRecv(ep, slots, 1, size)) == nullptr) guard.Poll();
    Stamp(slots.at(0), size, i);
    void* sr = nullptr;
    while ((sr = PostSend(ep, slots, 0, size)) == nullptr) guard.Poll();
    bool sent = false, received = false;
    int got = 0, sent_bytes = 0;
    while (!sent || !received) {
      if (!sent) sent = TestDone(ep, sr, &sent_bytes);
      if (!received) received = TestDone(ep, rr, &got);
      guard.Poll();
    }
    guard.Progress();
    if (static_cast<uint64_t>(got) != size || !CheckStamp(slots.at(1), size, i))
      throw std::runtime_error(Corrupt("plugin ping-pong echo", size, i));
  }
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(iters);
}

// The echoing side: the next receive is posted before the echo goes out, so the ping never waits on us.
std::string PluginPong(PluginEndpoint& ep, Slots& slots, uint64_t size, uint64_t iters) {
  StallGuard guard("plugin pong");
  std::string error;
  void* rr = nullptr;
  while ((rr = PostRecv(ep, slots, 0, size)) == nullptr) guard.Poll();
  for (uint64_t i = 0; i < iters; ++i) {
    int got = 0;
    while (!TestDone(ep, rr, &got)) guard.Poll();
    if ((static_cast<uint64_t>(got) != size || !CheckStamp(slots.at(i), size, i)) && error.empty())
      error = Corrupt("plugin ping-pong", size, i);
    rr = nullptr;
    if (i + 1 < iters)
      while ((rr = PostRecv(ep, slots, i + 1, size)) == nullptr) guard.Poll();
    void* sr = nullptr;
    while ((sr = PostSend(ep, slots, i, size)) == nullptr) guard.Poll();
    int sent_bytes = 0;
    while (!TestDone(ep, sr, &sent_bytes)) guard.Poll();
    guard.Progress();
  }
  return error;
}

// ---------------------------------------------------------------------------------------------
// The raw side: P connected loopback sockets, non-blocking, busy-polled.

ssize_t RecvVec(int fd, iovec* iov, int n) {
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = static_cast<size_t>(n);
  for (;;) {
    ssize_t r = ::recvmsg(fd, &m, MSG_DONTWAIT);
    if (r > 0) return r;
    if (r == 0) return -2;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

// TCP_NODELAY, and the plugin's FLEXIFORCE_TCP_CONGESTION (set by --congestion, or by the caller)
// so that both transports run the same congestion control. The plugin keeps the default where the
// kernel refuses one; here that is an error, as the comparison would not be like for like.
void SetNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    throw std::runtime_error(ErrnoMessage("raw TCP_NODELAY", errno));
  const char* cc = std::getenv("FLEXIFORCE_TCP_CONGESTION");
  if (cc != nullptr && cc[0] != '\0' &&
      setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, static_cast<socklen_t>(std::strlen(cc))) != 0)
    throw std::runtime_error(ErrnoMessage(std::string("raw TCP_CONGESTION '") + cc + "'", errno) +
                             " (see /proc/sys/net/ipv4/tcp_available_congestion_control)");
}

void ThrowIf(const Status& s) {
  if (!s.ok()) throw std::runtime_error("raw socket: " + s.message());
}

sockaddr_storage Loopback(uint16_t port) {
  sockaddr_storage a{};
  auto* in = reinterpret_cast<sockaddr_in*>(&a);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  in->sin_port = htons(port);
  return a;
}

void SendAllRaw(int fd, const char* p, uint64_t n, StallGuard& guard) {
  while (n > 0) {
    iovec v{const_cast<char*>(p), n};
    ssize_t w = tcp::SendSome(fd, &v, 1);
    if (w < 0) throw std::runtime_error(ErrnoMessage("raw send", errno));
    p += w;
    n -= static_cast<uint64_t>(w);
    guard.Poll();
  }
}

void RecvAllRaw(int fd, char* p, uint64_t n, StallGuard& guard) {
  while (n > 0) {
    ssize_t r = tcp::RecvSome(fd, p, n);
    if (r == -2) throw std::runtime_error("raw receive: the peer closed the connection");
    if (r < 0) throw std::runtime_error(ErrnoMessage("raw receive", errno));
    p += r;
    n -= static_cast<uint64_t>(r);
    guard.Poll();
  }
}

class RawEndpoint {
 public:
  // Peer side: listens on 127.0.0.1 and reports the port.
  uint16_t Listen() {
    uint16_t port = 0;
    ThrowIf(tcp::Listen(Loopback(0), &listener_, &port));
    return port;
  }
  // Each connecting stream says its index first, so accept order does not matter.
  void AcceptAll(int streams) {
    socks_.resize(static_cast<size_t>(streams));
    StallGuard guard("raw accept");
    for (int got = 0; got < streams;) {
      tcp::Socket s;
      sockaddr_storage peer{};
      ThrowIf(tcp::AcceptOne(listener_.fd(), &s, &peer));
      if (!s.valid()) {
        guard.Poll();
        continue;
      }
      uint32_t index = 0;
      RecvAllRaw(s.fd(), reinterpret_cast<char*>(&index), sizeof(index), guard);
      if (index >= static_cast<uint32_t>(streams) || socks_[index].valid())
        throw std::runtime_error("raw accept: unexpected stream index " + std::to_string(index));
      SetNoDelay(s.fd());
      socks_[index] = std::move(s);
      ++got;
    }
    listener_.reset();
  }
  void ConnectAll(uint16_t port, int streams) {
    StallGuard guard("raw connect");
    for (uint32_t i = 0; i < static_cast<uint32_t>(streams); ++i) {
      tcp::Socket s;
      ThrowIf(tcp::StartConnect(Loopback(port), nullptr, 0, 0, &s));
      int err = 0;
      for (;;) {
        tcp::ConnectProgress p = tcp::PollConnect(s.fd(), &err);
        if (p == tcp::ConnectProgress::kConnected) break;
        if (p == tcp::ConnectProgress::kFailed) throw std::runtime_error(ErrnoMessage("raw connect", err));
        guard.Poll();
      }
      SetNoDelay(s.fd());
      SendAllRaw(s.fd(), reinterpret_cast<const char*>(&i), sizeof(i), guard);
      socks_.push_back(std::move(s));
    }
  }
  int streams() const { return static_cast<int>(socks_.size()); }
  int fd(int i) const { return socks_[static_cast<size_t>(i)].fd(); }

 private:
  tcp::Socket listener_;
  std::vector<tcp::Socket> socks_;
};

// The plugin's striping, mirrored by the raw side so that both spread a message alike. The system
// call size is raw's own best instead: the baseline must not slow down when the plugin's chunk size
// changes. Loopback, 2 streams, 256 KiB-64 MiB messages, two alternating rounds: 256 KiB per call ran
// at 3.7-5.0 GB/s, 512 KiB at 5.1-6.7, 1 MiB 5.2-6.7, 4 MiB 4.9-6.3; and 1-64 MiB, two more rounds:
// 960 KiB at 6.5-9.0 where 512 KiB ran at 5.3-7.2. Linux processes acknowledgements inside a write
// after every 16 socket buffers (1 MiB here), which on loopback costs the writer the receiver's work
// (StreamPath::kMaxWriteBytes): just below that is best, as for the plugin.
struct RawPolicy {
  uint64_t stripe_min;  // FLEXIFORCE_STRIPE_MIN: smaller messages travel whole on one stream
  uint64_t io_bytes;    // the most one sendmsg/recvmsg moves on one stream per pass (kRawIoBytes)
};
constexpr uint64_t kRawIoBytes = 15 * 64 * kKiB;  // as StreamPath::kMaxWriteBytes

// How a message maps onto the streams: striped evenly from `stripe_min` on (piece k on stream k),
// else whole on stream index % P - the plugin's own policy, so both sides do comparable work.
class RawLayout {
 public:
  RawLayout(int streams, uint64_t size, uint64_t stripe_min)
      : streams_(streams), size_(size), striped_(streams > 1 && size >= stripe_min && size >= static_cast<uint64_t>(streams)) {}
  bool striped() const { return striped_; }
  int pieces() const { return striped_ ? streams_ : 1; }
  uint64_t first_message(int stream) const { return striped_ ? 0 : static_cast<uint64_t>(stream); }
  uint64_t step() const { return striped_ ? 1 : static_cast<uint64_t>(streams_); }
  uint64_t offset(int stream) const { return striped_ ? size_ * static_cast<uint64_t>(stream) / streams_ : 0; }
  uint64_t length(int stream) const { return striped_ ? offset(stream + 1) - offset(stream) : size_; }

 private:
  int streams_;
  uint64_t size_;
  bool striped_;
};

// Moves a window-limited stream of messages over all streams: the sender may touch message m once
// it is stamped, the receiver once its slot is free (m < oldest unchecked + window). Each pass
// hands every stream one vectored sendmsg/recvmsg covering as many of its next pieces as allowed.
class RawStreamer {
 public:
  RawStreamer(RawEndpoint& ep, Slots& slots, uint64_t window, uint64_t size, uint64_t iters, const RawPolicy& policy,
              bool sending)
      : ep_(ep),
        slots_(slots),
        size_(size),
        iters_(iters),
        window_(window),
        io_cap_(policy.io_bytes),
        layout_(ep.streams(), size, policy.stripe_min),
        sending_(sending),
        cursor_(static_cast<size_t>(ep.streams())),
        pieces_left_(window_, 0) {
    for (int k = 0; k < ep.streams(); ++k) cursor_[static_cast<size_t>(k)] = {layout_.first_message(k), 0};
  }

  // Runs to the end; returns the first content error (receiver) or "".
  std::string Run() {
    StallGuard guard(sending_ ? "raw stream send" : "raw stream receive");
    while (floor_ < iters_) {
      Admit();
      bool moved = false;
      for (int k = 0; k < ep_.streams(); ++k) moved |= Pump(k);
      Retire();
      if (moved) guard.Progress();
      guard.Poll();
    }
    return error_;
  }

 private:
  struct Cursor {
    uint64_t msg;
    uint64_t done;  // bytes of this stream's piece of `msg` already moved
  };

  // Makes messages available: the sender stamps them, the receiver "posts" their slots.
  void Admit() {
    while (admitted_ < iters_ && admitted_ < floor_ + window_) {
      if (sending_) Stamp(slots_.at(admitted_), size_, admitted_);
      pieces_left_[admitted_ % window_] = layout_.pieces();
      ++admitted_;
    }
  }

  bool Pump(int k) {
    constexpr int kMaxIov = 64;
    iovec iov[kMaxIov];
    Cursor& c = cursor_[static_cast<size_t>(k)];
    const uint64_t off = layout_.offset(k), len = layout_.length(k);
    int n = 0;
    uint64_t first_done = c.done;
    uint64_t total = 0;
    for (uint64_t m = c.msg; m < admitted_ && n < kMaxIov && total < io_cap_; m += layout_.step()) {
      uint64_t skip = m == c.msg ? first_done : 0;
      uint64_t l = std::min(len - skip, io_cap_ - total);
      iov[n++] = {slots_.at(m) + off + skip, l};
      total += l;
    }
    if (n == 0) return false;
    ssize_t r = sending_ ? tcp::SendSome(ep_.fd(k), iov, n) : RecvVec(ep_.fd(k), iov, n);
    if (r == -2) throw std::runtime_error("raw stream: the peer closed the connection");
    if (r < 0) throw std::runtime_error(ErrnoMessage(sending_ ? "raw sendmsg" : "raw recvmsg", errno));
    uint64_t left = static_cast<uint64_t>(r);
    while (left > 0) {
      uint64_t take = std::min(left, len - c.done);
      c.done += take;
      left -= take;
      if (c.done == len) {
        --pieces_left_[c.msg % window_];
        c.msg += layout_.step();
        c.done = 0;
      }
    }
    return r > 0;
  }

  // Frees the oldest fully moved messages in order; the receiver checks each one first.
  void Retire() {
    while (floor_ < admitted_ && pieces_left_[floor_ % window_] == 0) {
      if (!sending_ && error_.empty() && !CheckStamp(slots_.at(floor_), size_, floor_))
        error_ = Corrupt("raw stream", size_, floor_);
      ++floor_;
    }
  }

  RawEndpoint& ep_;
  Slots& slots_;
  uint64_t size_, iters_, window_, io_cap_;
  RawLayout layout_;
  bool sending_;
  std::vector<Cursor> cursor_;
  std::vector<int> pieces_left_;
  uint64_t admitted_ = 0, floor_ = 0;
  std::string error_;
};

// The end-of-run acknowledgement byte travels on stream 0, which is otherwise idle in that direction.
double RawStreamSend(RawEndpoint& ep, Slots& slots, uint64_t window, uint64_t size, uint64_t iters,
                     const RawPolicy& policy) {
  Clock::time_point t0 = Clock::now();
  RawStreamer(ep, slots, window, size, iters, policy, true).Run();
  char ack = 0;
  StallGuard guard("raw stream final acknowledgement");
  RecvAllRaw(ep.fd(0), &ack, 1, guard);
  if (ack != 'A') throw std::runtime_error("raw stream: bad final acknowledgement byte");
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string RawStreamRecv(RawEndpoint& ep, Slots& slots, uint64_t window, uint64_t size, uint64_t iters,
                          const RawPolicy& policy) {
  std::string error = RawStreamer(ep, slots, window, size, iters, policy, false).Run();
  StallGuard guard("raw stream final acknowledgement");
  const char ack = 'A';
  SendAllRaw(ep.fd(0), &ack, 1, guard);
  return error;
}

// pair: the ping goes out on stream 0 and the echo comes back on stream 1, one socket per direction
// as NCCL connects a send and a receive communicator; otherwise both ride stream 0, where each
// direction's data carries the other's TCP acknowledgement.
double RawPing(RawEndpoint& ep, Slots& slots, uint64_t size, uint64_t iters, bool pair = false) {
  StallGuard guard(pair ? "raw ping (socket pair)" : "raw ping");
  const int back = pair ? ep.fd(1) : ep.fd(0);
  Clock::time_point t0 = Clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    Stamp(slots.at(0), size, i);
    SendAllRaw(ep.fd(0), slots.at(0), size, guard);
    RecvAllRaw(back, slots.at(1), size, guard);
    if (!CheckStamp(slots.at(1), size, i)) throw std::runtime_error(Corrupt("raw ping-pong echo", size, i));
    guard.Progress();
  }
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(iters);
}

std::string RawPong(RawEndpoint& ep, Slots& slots, uint64_t size, uint64_t iters, bool pair = false) {
  StallGuard guard(pair ? "raw pong (socket pair)" : "raw pong");
  std::string error;
  const int back = pair ? ep.fd(1) : ep.fd(0);
  for (uint64_t i = 0; i < iters; ++i) {
    RecvAllRaw(ep.fd(0), slots.at(0), size, guard);
    if (!CheckStamp(slots.at(0), size, i) && error.empty()) error = Corrupt("raw ping-pong", size, i);
    SendAllRaw(back, slots.at(0), size, guard);
    guard.Progress();
  }
  return error;
}

// ---------------------------------------------------------------------------------------------
// Parent <-> peer control over pipes: a command per measurement, a verdict after it.

enum class Op : uint32_t { kPluginStream = 1, kPluginPingPong, kRawStream, kRawPingPong, kQuit, kRawPairPingPong };

struct Command {
  Op op;
  uint32_t pad;
  uint64_t size;
  uint64_t iters;
};

struct Verdict {
  int32_t ok;
  char error[252];
};

void WriteFull(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(ErrnoMessage("control pipe write", errno));
    c += w;
    n -= static_cast<size_t>(w);
  }
}

// Returns false on end of file (the other process is gone).
bool ReadFull(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error(ErrnoMessage("control pipe read", errno));
    if (r == 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct SharedSetup {
  Options opts;
  int streams;  // plugin paths = raw streams
  RawPolicy raw;
  int cpus[2] = {-1, -1};  // --pin: this process's CPU and the peer's
};

// Binds the calling process (every thread it starts later too) to one CPU.
void PinTo(int cpu, const char* who) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    throw std::runtime_error(std::string("--pin: binding ") + who + " to CPU " + std::to_string(cpu) + ": " +
                             std::strerror(errno));
}

// The forked peer: receives streams, echoes pings, reports a verdict per command.
int PeerMain(const SharedSetup& setup, int from_parent, int to_parent) {
  const Options& o = setup.opts;
  Slots slots(std::max(o.window, 2), o.max_bytes);
  std::unique_ptr<PluginEndpoint> plugin;
  RawEndpoint raw;
  if (UsesPlugin(o.mode)) {
    plugin = std::make_unique<PluginEndpoint>(o.plugin_path);
    char mine[FF_NCCL_NET_HANDLE_MAXSIZE] = {}, theirs[FF_NCCL_NET_HANDLE_MAXSIZE] = {};
    plugin->Listen(mine);
    WriteFull(to_parent, mine, sizeof(mine));
    if (!ReadFull(from_parent, theirs, sizeof(theirs))) return 1;
    plugin->Accept();
    plugin->Connect(theirs);
    plugin->Register(slots);
  }
  if (UsesRaw(o.mode)) {
    uint16_t port = raw.Listen();
    WriteFull(to_parent, &port, sizeof(port));
    raw.AcceptAll(setup.streams);
  }
  // Stream receives cycle through the window's slots; the pong double-buffers over them.
  const uint64_t window = static_cast<uint64_t>(o.window);
  for (;;) {
    Command c{};
    if (!ReadFull(from_parent, &c, sizeof(c))) return 1;
    if (c.op == Op::kQuit) return 0;
    std::string error;
    switch (c.op) {
      case Op::kPluginStream:
        error = PluginStreamRecv(*plugin, slots, window, c.size, c.iters);
        break;
      case Op::kPluginPingPong:
        error = PluginPong(*plugin, slots, c.size, c.iters);
        break;
      case Op::kRawStream:
        error = RawStreamRecv(raw, slots, window, c.size, c.iters, setup.raw);
        break;
      case Op::kRawPingPong:
        error = RawPong(raw, slots, c.size, c.iters);
        break;
      case Op::kRawPairPingPong:
        error = RawPong(raw, slots, c.size, c.iters, /*pair=*/true);
        break;
      default:
        error = "unknown command " + std::to_string(static_cast<uint32_t>(c.op));
    }
    Verdict v{};
    v.ok = error.empty();
    std::snprintf(v.error, sizeof(v.error), "%s", error.c_str());
    WriteFull(to_parent, &v, sizeof(v));
  }
}

// Owns the forked peer: kills and reaps it unless it was reaped after a clean exit.
class PeerProcess {
 public:
  explicit PeerProcess(const SharedSetup& setup) {
    int down[2], up[2];
    if (pipe(down) != 0) throw std::runtime_error(ErrnoMessage("pipe", errno));
    if (pipe(up) != 0) {
      int e = errno;
      close(down[0]);
      close(down[1]);
      throw std::runtime_error(ErrnoMessage("pipe", e));
    }
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error(ErrnoMessage("fork", errno));
    if (pid_ == 0) {
      close(down[1]);
      close(up[0]);
      int rc = 1;
      try {
        if (setup.cpus[1] >= 0) PinTo(setup.cpus[1], "the peer");
        rc = PeerMain(setup, down[0], up[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "flexiforce bench (peer): %s\n", e.what());
        rc = 3;
      }
      // exit, not _exit: the plugin's exit handlers run, as at the end of a training process (its
      // statistics file is removed; _exit left one in /dev/shm per bench run).
      std::exit(rc);
    }
    close(down[0]);
    close(up[1]);
    to_peer_ = down[1];
    from_peer_ = up[0];
  }
  ~PeerProcess() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(to_peer_);
    close(from_peer_);
  }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  int to_peer() const { return to_peer_; }
  int from_peer() const { return from_peer_; }
  void Read(void* p, size_t n) {
    if (!ReadFull(from_peer_, p, n)) throw std::runtime_error("the peer process exited unexpectedly");
  }
  void Send(const Command& c) { WriteFull(to_peer_, &c, sizeof(c)); }
  // Waits for the peer's verdict on the last command; throws with its error.
  void Expect(const char* what, uint64_t size) {
    Verdict v{};
    Read(&v, sizeof(v));
    if (!v.ok) throw std::runtime_error(std::string(what) + " at " + std::to_string(size) + " bytes: " + v.error);
  }
  int Finish() {
    Command c{Op::kQuit, 0, 0, 0};
    Send(c);
    int st = 0;
    waitpid(pid_, &st, 0);
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  int to_peer_ = -1, from_peer_ = -1;
  bool reaped_ = false;
};

// ---------------------------------------------------------------------------------------------
// The driver (parent side).

struct Row {
  uint64_t size = 0;
  uint64_t stream_iters = 0, rtt_iters = 0;
  double plugin_gbps = NAN, raw_gbps = NAN;
  double plugin_rtt_us = NAN, raw_rtt_us = NAN;
  double raw_pair_rtt_us = NAN;  // raw, one socket per direction (needs 2 or more streams)
  // TCP segments per round trip, both directions, data and bare acknowledgements (medians over the
  // runs; NaN where not counted): one socket carries each reply with the acknowledgement of the
  // message it answers, two connections - NCCL's send and receive communicators - cannot.
  double plugin_rtt_segs = NAN, raw_rtt_segs = NAN, raw_pair_rtt_segs = NAN;
  // TCP segments per streamed message, both directions (data, the receiver's control frames and
  // every bare acknowledgement), medians over the runs: a framed protocol's per-message costs that
  // the throughput alone does not show - small writes' tail segments, descriptors and their acks.
  double plugin_stream_segs = NAN, raw_stream_segs = NAN;
  // Every run behind the medians above, in the order they ran (plugin run k, then raw run k): the
  // spread tells a real difference from the host's run-to-run drift.
  std::vector<double> plugin_gbps_runs, raw_gbps_runs;
  std::vector<double> plugin_rtt_us_runs, raw_rtt_us_runs, raw_pair_rtt_us_runs;
};

double Ratio(double a, double b) { return std::isnan(a) || std::isnan(b) || b == 0 ? NAN : a / b; }

std::string HumanBytes(uint64_t n) {
  if (n >= kMiB && n % kMiB == 0) return std::to_string(n / kMiB) + " MiB";
  if (n >= kKiB && n % kKiB == 0) return std::to_string(n / kKiB) + " KiB";
  return std::to_string(n) + " B";
}

class Driver {
 public:
  Driver(const SharedSetup& setup, PeerProcess& peer)
      : setup_(setup), o_(setup.opts), peer_(peer), slots_(std::max(o_.window, 2), o_.max_bytes) {}

  std::string Connect() {
    std::string device;
    if (UsesPlugin(o_.mode)) {
      plugin_ = std::make_unique<PluginEndpoint>(o_.plugin_path);
      device = plugin_->device();
      char theirs[FF_NCCL_NET_HANDLE_MAXSIZE] = {}, mine[FF_NCCL_NET_HANDLE_MAXSIZE] = {};
      peer_.Read(theirs, sizeof(theirs));
      plugin_->Listen(mine);
      WriteFull(peer_.to_peer(), mine, sizeof(mine));
      plugin_->Connect(theirs);
      plugin_->Accept();
      plugin_->Register(slots_);
    }
    if (UsesRaw(o_.mode)) {
      uint16_t port = 0;
      peer_.Read(&port, sizeof(port));
      raw_.ConnectAll(port, setup_.streams);
    }
    return device;
  }

  // The congestion control both transports run: a raw socket's own, else that of a fresh socket
  // given FLEXIFORCE_TCP_CONGESTION as the plugin gives its paths (the default where refused).
  std::string Congestion() const {
    std::string cc = raw_.streams() > 0 ? tcp::CongestionControlOf(raw_.fd(0)) : std::string();
    if (cc.empty()) {
      tcp::Socket probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      const char* knob = std::getenv("FLEXIFORCE_TCP_CONGESTION");
      const bool asked = knob != nullptr && knob[0] != '\0';
      if (probe.valid() && asked)
        (void)setsockopt(probe.fd(), IPPROTO_TCP, TCP_CONGESTION, knob, static_cast<socklen_t>(std::strlen(knob)));
      if (probe.valid()) cc = tcp::CongestionControlOf(probe.fd());
      if (asked && cc != knob) cc += std::string(" (FLEXIFORCE_TCP_CONGESTION='") + knob + "' refused)";
    }
    return cc.empty() ? "unknown" : cc;
  }

  // `segs`, when given: TCP segments per message on every connection of this process, counted
  // outside the timed loop (as for PingPong).
  double Stream(bool plugin, uint64_t size, uint64_t iters, double* segs = nullptr) {
    peer_.Send({plugin ? Op::kPluginStream : Op::kRawStream, 0, size, iters});
    const std::optional<uint64_t> before = segs ? cli::ProcessTcpSegments() : std::nullopt;
    const uint64_t window = static_cast<uint64_t>(o_.window);
    double secs = plugin ? PluginStreamSend(*plugin_, slots_, window, size, iters)
                         : RawStreamSend(raw_, slots_, window, size, iters, setup_.raw);
    peer_.Expect(plugin ? "plugin stream" : "raw stream", size);
    if (segs) *segs = SegmentsPer(before, iters);
    return secs;
  }

  // `segs`, when given: TCP segments per round trip on every connection of this process (the peer's
  // ends are the same connections), counted outside the timed loop; NaN where they cannot be.
  double PingPong(bool plugin, uint64_t size, uint64_t iters, double* segs = nullptr) {
    peer_.Send({plugin ? Op::kPluginPingPong : Op::kRawPingPong, 0, size, iters});
    const std::optional<uint64_t> before = segs ? cli::ProcessTcpSegments() : std::nullopt;
    double secs = plugin ? PluginPing(*plugin_, slots_, size, iters) : RawPing(raw_, slots_, size, iters);
    peer_.Expect(plugin ? "plugin ping-pong" : "raw ping-pong", size);
    if (segs) *segs = SegmentsPer(before, iters);
    return secs;
  }
  bool MeasuresPair() const { return UsesRaw(o_.mode) && setup_.streams >= 2; }
  double PairPingPong(uint64_t size, uint64_t iters, double* segs = nullptr) {
    peer_.Send({Op::kRawPairPingPong, 0, size, iters});
    const std::optional<uint64_t> before = segs ? cli::ProcessTcpSegments() : std::nullopt;
    double secs = RawPing(raw_, slots_, size, iters, /*pair=*/true);
    peer_.Expect("raw ping-pong (socket pair)", size);
    if (segs) *segs = SegmentsPer(before, iters);
    return secs;
  }
  // After the peer said it is done: its last acknowledgements have been sent (loopback delivers
  // them within the send), a stray delayed one may still come - a fraction of one segment per run.
  static double SegmentsPer(std::optional<uint64_t> before, uint64_t iters) {
    const std::optional<uint64_t> after = cli::ProcessTcpSegments();
    if (!before || !after || *after < *before || iters == 0) return NAN;  // a counter wrapped, a socket closed
    return static_cast<double>(*after - *before) / static_cast<double>(iters);
  }

  // Picks iterations so the slower transport runs ~kTargetSeconds; the probes double as warm-up.
  // `probe(plugin, n)` runs n iterations on one transport and returns their total seconds.
  template <typename Probe>
  uint64_t Calibrate(uint64_t start, Probe probe) {
    uint64_t n = start;
    for (;;) {
      double worst = 0;
      for (bool plugin : Transports()) worst = std::max(worst, probe(plugin, n));
      if (worst >= 0.05 || n >= kMaxAutoIters) {
        // Once more at this size: a probe that a descheduled process stalled for milliseconds
        // would otherwise shrink the measurement to a few dozen iterations, which the next stall
        // then dominates.
        double again = 0;
        for (bool plugin : Transports()) again = std::max(again, probe(plugin, n));
        worst = std::min(worst, again);
        double per = worst / static_cast<double>(n);
        double want = per > 0 ? kTargetSeconds / per : static_cast<double>(kMaxAutoIters);
        return std::clamp<uint64_t>(static_cast<uint64_t>(want), kMinAutoIters, kMaxAutoIters);
      }
      n *= 8;
    }
  }

  // Calibrated iterations last ~kTargetSeconds over kReps runs; --runs N keeps each run that long.
  uint64_t AutoIters(uint64_t calibrated) const {
    return std::max<uint64_t>(calibrated * static_cast<uint64_t>(o_.runs) / kReps, kMinAutoIters);
  }

  Row Measure(uint64_t size) {
    Row row;
    row.size = size;
    const uint64_t window = static_cast<uint64_t>(o_.window);
    auto stream_probe = [&](bool plugin, uint64_t n) { return Stream(plugin, size, n); };
    // Large messages start with a short probe: a few already take tens of milliseconds. It still
    // covers the whole window, so both transports have used every buffer slot at this size before
    // the first measured run. On this VM memory not touched for a while is slow to touch again: with
    // 4-message probes and a window of 8, the plugin's first run at 32-64 MiB (the first to reach
    // slots 4-7 there) ran at 1.7-2.8 GB/s against 4.3-5.5 for its other runs; with a window of 4,
    // 4.4-5.0 in every run.
    const uint64_t first_probe =
        std::clamp<uint64_t>(16 * kMiB / size, std::max<uint64_t>(4, window), std::max<uint64_t>(2 * window, 8));
    if (o_.throughput) {
      row.stream_iters = o_.iters ? o_.iters : AutoIters(Calibrate(first_probe, stream_probe));
      if (o_.iters) {
        for (bool plugin : Transports()) Stream(plugin, size, std::min<uint64_t>(o_.iters, 2 * window));  // warm-up
      }
      // --runs alternating runs per transport, each sharing the iterations equally; the median of each
      // transport's runs is reported, so one stall (a descheduled process) moves neither figure.
      const uint64_t runs = static_cast<uint64_t>(o_.runs);
      const uint64_t per_rep = std::max<uint64_t>(row.stream_iters / runs, std::min<uint64_t>(row.stream_iters, 2 * window));
      std::vector<double> plugin_gbps, raw_gbps, plugin_segs, raw_segs;
      for (uint64_t rep = 0; rep < runs; ++rep)
        for (bool plugin : Transports()) {
          double segs = NAN;
          double secs = Stream(plugin, size, per_rep, &segs);
          (plugin ? plugin_gbps : raw_gbps).push_back(static_cast<double>(size) * static_cast<double>(per_rep) / secs / 1e9);
          (plugin ? plugin_segs : raw_segs).push_back(segs);
        }
      row.plugin_stream_segs = MedianCounted(plugin_segs);
      row.raw_stream_segs = MedianCounted(raw_segs);
      row.stream_iters = per_rep * runs;
      row.plugin_gbps = Median(plugin_gbps);
      row.raw_gbps = Median(raw_gbps);
      row.plugin_gbps_runs = std::move(plugin_gbps);
      row.raw_gbps_runs = std::move(raw_gbps);
    }
    if (o_.rtt && size <= kRttMaxBytes) {
      auto rtt_probe = [&](bool plugin, uint64_t n) { return PingPong(plugin, size, n) * static_cast<double>(n); };
      row.rtt_iters = o_.iters ? o_.iters : AutoIters(Calibrate(16, rtt_probe));
      if (o_.iters) {
        for (bool plugin : Transports()) PingPong(plugin, size, std::min<uint64_t>(o_.iters, 16));
      }
      if (MeasuresPair()) PairPingPong(size, std::min<uint64_t>(row.rtt_iters, 16));  // warm-up
      const uint64_t runs = static_cast<uint64_t>(o_.runs);
      const uint64_t per_rep = std::max<uint64_t>(row.rtt_iters / runs, std::min<uint64_t>(row.rtt_iters, 16));
      std::vector<double> plugin_us, raw_us, pair_us, plugin_segs, raw_segs, pair_segs;
      for (uint64_t rep = 0; rep < runs; ++rep) {
        for (bool plugin : Transports()) {
          double segs = NAN;
          (plugin ? plugin_us : raw_us).push_back(PingPong(plugin, size, per_rep, &segs) * 1e6);
          (plugin ? plugin_segs : raw_segs).push_back(segs);
        }
        if (MeasuresPair()) {
          double segs = NAN;
          pair_us.push_back(PairPingPong(size, per_rep, &segs) * 1e6);
          pair_segs.push_back(segs);
        }
      }
      row.rtt_iters = per_rep * runs;
      row.plugin_rtt_us = Median(plugin_us);
      row.raw_rtt_us = Median(raw_us);
      if (!pair_us.empty()) row.raw_pair_rtt_us = Median(pair_us);
      row.plugin_rtt_segs = MedianCounted(plugin_segs);
      row.raw_rtt_segs = MedianCounted(raw_segs);
      row.raw_pair_rtt_segs = MedianCounted(pair_segs);
      row.plugin_rtt_us_runs = std::move(plugin_us);
      row.raw_rtt_us_runs = std::move(raw_us);
      row.raw_pair_rtt_us_runs = std::move(pair_us);
    }
    return row;
  }

 private:
  // Plugin first, then raw, for every measurement: the alternation that keeps drift fair.
  std::vector<bool> Transports() const {
    std::vector<bool> t;
    if (UsesPlugin(o_.mode)) t.push_back(true);
    if (UsesRaw(o_.mode)) t.push_back(false);
    return t;
  }

  const SharedSetup& setup_;
  const Options& o_;
  PeerProcess& peer_;
  Slots slots_;
  std::unique_ptr<PluginEndpoint> plugin_;
  RawEndpoint raw_;
};

std::string Cell(double v, const char* fmt) {
  if (std::isnan(v)) return "-";
  char b[32];
  std::snprintf(b, sizeof(b), fmt, v);
  return b;
}

// The lowest and highest plugin/raw throughput ratio of the paired runs (plugin run k against raw
// run k, which ran right after it), "-" unless both transports ran.
std::string RunSpread(const Row& r) {
  if (r.plugin_gbps_runs.empty() || r.plugin_gbps_runs.size() != r.raw_gbps_runs.size()) return "-";
  double lo = INFINITY, hi = -INFINITY;
  for (size_t k = 0; k < r.plugin_gbps_runs.size(); ++k) {
    const double q = Ratio(r.plugin_gbps_runs[k], r.raw_gbps_runs[k]);
    if (std::isnan(q)) return "-";
    lo = std::min(lo, q);
    hi = std::max(hi, q);
  }
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f-%.2f", lo, hi);
  return b;
}

void PrintRow(const Row& r) {
  std::printf("%10s | %11s | %8s | %6s | %9s | %13s | %10s | %6s | %11s | %6s\n", HumanBytes(r.size).c_str(),
              Cell(r.plugin_gbps, "%.3f").c_str(), Cell(r.raw_gbps, "%.3f").c_str(),
              Cell(Ratio(r.plugin_gbps, r.raw_gbps), "%.2f").c_str(), RunSpread(r).c_str(),
              Cell(r.plugin_rtt_us, "%.1f").c_str(),
              Cell(r.raw_rtt_us, "%.1f").c_str(), Cell(Ratio(r.plugin_rtt_us, r.raw_rtt_us), "%.2f").c_str(),
              Cell(r.raw_pair_rtt_us, "%.1f").c_str(), Cell(Ratio(r.plugin_rtt_us, r.raw_pair_rtt_us), "%.2f").c_str());
  std::fflush(stdout);
}

nlohmann::json JsonNumber(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

// Target verdicts over the measured rows; "met" is null when the run did not cover a target.
// DESIGN.md's two (>= 0.90x at >= 1 MiB, 8 B round trip <= 1.3x) and the small-message issue's
// stricter three (1 KiB and 64 KiB >= 0.80x, >= 1 MiB >= 0.95x). A throughput target over a range
// of sizes is judged on its worst size.
struct ThroughputTarget {
  const char* key;
  const char* description;
  uint64_t min_size, max_size;
  double min_ratio;
};
constexpr ThroughputTarget kThroughputTargets[] = {
    {"throughput", "plugin throughput >= 0.90x raw for messages >= 1 MiB (DESIGN.md)", kMiB, UINT64_MAX, 0.90},
    {"throughput_large_strict", "plugin throughput >= 0.95x raw for messages >= 1 MiB (small-message issue)", kMiB,
     UINT64_MAX, 0.95},
    {"throughput_1k", "plugin throughput >= 0.80x raw at 1 KiB (small-message issue)", 1024, 1024, 0.80},
    {"throughput_64k", "plugin throughput >= 0.80x raw at 64 KiB (small-message issue)", 64 * 1024, 64 * 1024, 0.80},
};
constexpr double kRtt8bMaxRatio = 1.3;

nlohmann::json Targets(const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::object();
  for (const ThroughputTarget& t : kThroughputTargets) {
    double worst = NAN;
    uint64_t worst_size = 0;
    for (const Row& r : rows) {
      double q = Ratio(r.plugin_gbps, r.raw_gbps);
      if (r.size >= t.min_size && r.size <= t.max_size && !std::isnan(q) && (std::isnan(worst) || q < worst))
        worst = q, worst_size = r.size;
    }
    nlohmann::json j = {{"description", t.description}, {"min_ratio", t.min_ratio}};
    j["worst_ratio"] = JsonNumber(worst);
    j["worst_size"] = std::isnan(worst) ? nlohmann::json(nullptr) : nlohmann::json(worst_size);
    j["met"] = std::isnan(worst) ? nlohmann::json(nullptr) : nlohmann::json(worst >= t.min_ratio);
    out[t.key] = j;
  }
  nlohmann::json rtt = {{"description", "plugin 8 B round trip <= 1.3x raw"}, {"max_ratio", kRtt8bMaxRatio}};
  double q8 = NAN;
  for (const Row& r : rows)
    if (r.size == 8) q8 = Ratio(r.plugin_rtt_us, r.raw_rtt_us);
  rtt["ratio"] = JsonNumber(q8);
  rtt["met"] = std::isnan(q8) ? nlohmann::json(nullptr) : nlohmann::json(q8 <= kRtt8bMaxRatio);
  out["rtt_8b"] = rtt;
  return out;
}

void PrintTargets(const nlohmann::json& t) {
  auto verdict = [](const nlohmann::json& met) { return met.is_null() ? "not measured" : met.get<bool>() ? "MET" : "MISSED"; };
  for (const ThroughputTarget& tt : kThroughputTargets) {
    const auto& tp = t[tt.key];
    const std::string range = tt.max_size == UINT64_MAX ? ">= " + HumanBytes(tt.min_size)
                              : tt.min_size == tt.max_size ? "at " + HumanBytes(tt.min_size)
                                                           : HumanBytes(tt.min_size) + "-" + HumanBytes(tt.max_size);
    std::printf("target throughput >= %.2fx raw %s: %s", tt.min_ratio, range.c_str(), verdict(tp["met"]));
    if (!tp["worst_ratio"].is_null())
      std::printf(" (%s %.2fx at %s)", tt.min_size == tt.max_size ? "measured" : "worst", tp["worst_ratio"].get<double>(),
                  HumanBytes(tp["worst_size"].get<uint64_t>()).c_str());
    std::printf("\n");
  }
  const auto& rt = t["rtt_8b"];
  std::printf("target 8 B round trip <= %.2fx raw: %s", kRtt8bMaxRatio, verdict(rt["met"]));
  if (!rt["ratio"].is_null()) std::printf(" (%.2fx)", rt["ratio"].get<double>());
  std::printf("\n");
}

// The smallest round trip's TCP segments: what the 8 B target's ratio is made of. With one socket
// per direction the receiving end acknowledges with segments of its own (the reply goes on the
// other socket): a raw pair took 3.5-4 where one socket takes 2; the plugin, whose receiver defers
// that acknowledgement past the reply (StreamPath::kPeekMaxBytes), about 3.
void PrintSegments(const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    if (std::isnan(r.plugin_rtt_segs) && std::isnan(r.raw_rtt_segs) && std::isnan(r.raw_pair_rtt_segs)) continue;
    std::printf("TCP segments per %s round trip (both directions, acknowledgements included): plugin %s, raw %s, "
                "raw pair %s\n",
                HumanBytes(r.size).c_str(), Cell(r.plugin_rtt_segs, "%.2f").c_str(), Cell(r.raw_rtt_segs, "%.2f").c_str(),
                Cell(r.raw_pair_rtt_segs, "%.2f").c_str());
    return;
  }
}

// Segments per streamed message at every size, plugin against raw: where the plugin's count is well
// above raw's, its writes, control frames or acknowledgements are what a message costs beyond the
// bytes (each segment is a pass through both ends' TCP stacks).
void PrintStreamSegments(const std::vector<Row>& rows) {
  std::string line;
  for (const Row& r : rows) {
    if (std::isnan(r.plugin_stream_segs) && std::isnan(r.raw_stream_segs)) continue;
    line += (line.empty() ? "" : ", ") + HumanBytes(r.size) + " " + Cell(r.plugin_stream_segs, "%.2f") + " / " +
            Cell(r.raw_stream_segs, "%.2f");
  }
  if (!line.empty())
    std::printf("TCP segments per streamed message (both directions, acknowledgements included), plugin / raw: %s\n",
                line.c_str());
}

}  // namespace

int RunBenchCommand(int argc, char** argv) {
  int exit_code = 0;
  std::optional<Options> parsed = ParseOptions(argc, argv, &exit_code);
  if (!parsed) return exit_code;
  SharedSetup setup{*parsed, 0, {0, 0}};
  Options& o = setup.opts;
  if (o.plugin_path.empty()) o.plugin_path = testing::DefaultPluginPath();
  // The plugin reads its knobs at init in each process; set ours before the fork so both see it.
  if (o.paths > 0) setenv("FLEXIFORCE_PATHS", std::to_string(o.paths).c_str(), 1);
  if (!o.congestion.empty()) setenv("FLEXIFORCE_TCP_CONGESTION", o.congestion.c_str(), 1);
  auto knobs = ConfigRegistry::Resolve([](const char* n) { return std::getenv(n); });
  for (const auto& k : knobs)
    if (!k.error.empty()) std::fprintf(stderr, "flexiforce bench: warning: %s\n", k.error.c_str());
  Config cfg = ConfigRegistry::ToConfig(knobs);
  setup.streams = cfg.paths_per_connection;
  setup.raw = {static_cast<uint64_t>(cfg.stripe_min_bytes), kRawIoBytes};

  std::vector<Row> rows;
  std::string device;
  std::string congestion;  // what the raw sockets run, or what the plugin's are asked to
  Clock::time_point start = Clock::now();
  try {
    if (o.pin) {
      cpu_set_t allowed;
      CPU_ZERO(&allowed);
      if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        throw std::runtime_error(std::string("--pin: reading this process's CPUs: ") + std::strerror(errno));
      int found = 0;
      for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
        if (CPU_ISSET(c, &allowed)) setup.cpus[found++] = c;
      if (found < 2)
        throw std::runtime_error("--pin needs two CPUs, and this process may use only " + std::to_string(found));
      PinTo(setup.cpus[0], "this process");
    }
    PeerProcess peer(setup);
    Driver driver(setup, peer);
    device = driver.Connect();
    congestion = driver.Congestion();
    if (!o.json) {
      std::printf("flexiforce bench: plugin %s (device %s), %d path(s) = %d raw stream(s) on 127.0.0.1, window %d, "
                  "iters %s%s, TCP congestion control %s\n\n",
                  UsesPlugin(o.mode) ? o.plugin_path.c_str() : "(not used)", device.empty() ? "-" : device.c_str(),
                  setup.streams, setup.streams, o.window, o.iters ? std::to_string(o.iters).c_str() : "auto",
                  o.pin ? (", pinned to CPUs " + std::to_string(setup.cpus[0]) + " and " + std::to_string(setup.cpus[1]))
                              .c_str()
                        : "",
                  congestion.c_str());
      std::printf("%10s | %11s | %8s | %6s | %9s | %13s | %10s | %6s | %11s | %6s\n", "size", "plugin GB/s",
                  "raw GB/s", "ratio", "run pairs", "plugin RTT us", "raw RTT us", "ratio", "pair RTT us", "ratio");
      std::printf("-----------+-------------+----------+--------+-----------+---------------+------------+--------+"
                  "-------------+-------\n");
    }
    for (uint64_t size = o.min_bytes; size <= o.max_bytes; size *= 2) {
      rows.push_back(driver.Measure(size));
      if (!o.json) PrintRow(rows.back());
    }
    int rc = peer.Finish();
    if (rc != 0) throw std::runtime_error("the peer process exited with status " + std::to_string(rc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flexiforce bench: FAILED: %s\n", e.what());
    return 1;
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  nlohmann::json targets = Targets(rows);
  if (!o.json) {
    std::printf("\n");
    if (o.mode == Mode::kBoth) PrintTargets(targets);
    PrintSegments(rows);
    PrintStreamSegments(rows);
    std::printf("all %zu sizes transferred and checked in %.1f s\n", rows.size(), elapsed);
    return 0;
  }
  static const char* kModes[] = {"both", "plugin", "raw"};
  nlohmann::json out;
  out["config"] = {{"min_bytes", o.min_bytes},
                   {"max_bytes", o.max_bytes},
                   {"iters", o.iters ? nlohmann::json(o.iters) : nlohmann::json("auto")},
                   {"window", o.window},
                   {"runs", o.runs},
                   {"paths", setup.streams},
                   {"raw_streams", setup.streams},
                   {"raw_stripe_min_bytes", setup.raw.stripe_min},
                   {"raw_io_bytes", setup.raw.io_bytes},
                   {"mode", kModes[static_cast<int>(o.mode)]},
                   {"plugin", UsesPlugin(o.mode) ? nlohmann::json(o.plugin_path) : nlohmann::json(nullptr)},
                   {"plugin_device", device.empty() ? nlohmann::json(nullptr) : nlohmann::json(device)},
                   {"raw_address", "127.0.0.1"},
                   {"tcp_congestion_control", congestion},
                   {"pinned_cpus", o.pin ? nlohmann::json::array({setup.cpus[0], setup.cpus[1]}) : nlohmann::json(nullptr)},
                   {"rtt_max_bytes", kRttMaxBytes}};
  nlohmann::json results = nlohmann::json::array();
  for (const Row& r : rows) {
    results.push_back({{"size", r.size},
                       {"stream_iters", r.stream_iters},
                       {"rtt_iters", r.rtt_iters ? nlohmann::json(r.rtt_iters) : nlohmann::json(nullptr)},
                       {"plugin_gbps", JsonNumber(r.plugin_gbps)},
                       {"raw_gbps", JsonNumber(r.raw_gbps)},
                       {"throughput_ratio", JsonNumber(Ratio(r.plugin_gbps, r.raw_gbps))},
                       {"plugin_rtt_us", JsonNumber(r.plugin_rtt_us)},
                       {"raw_rtt_us", JsonNumber(r.raw_rtt_us)},
                       {"rtt_ratio", JsonNumber(Ratio(r.plugin_rtt_us, r.raw_rtt_us))},
                       {"raw_pair_rtt_us", JsonNumber(r.raw_pair_rtt_us)},
                       {"plugin_rtt_segments", JsonNumber(r.plugin_rtt_segs)},
                       {"raw_rtt_segments", JsonNumber(r.raw_rtt_segs)},
                       {"raw_pair_rtt_segments", JsonNumber(r.raw_pair_rtt_segs)},
                       {"plugin_stream_segments", JsonNumber(r.plugin_stream_segs)},
                       {"raw_stream_segments", JsonNumber(r.raw_stream_segs)},
                       {"rtt_ratio_vs_pair", JsonNumber(Ratio(r.plugin_rtt_us, r.raw_pair_rtt_us))},
                       {"runs", {{"plugin_gbps", r.plugin_gbps_runs},
                                 {"raw_gbps", r.raw_gbps_runs},
                                 {"plugin_rtt_us", r.plugin_rtt_us_runs},
                                 {"raw_rtt_us", r.raw_rtt_us_runs},
                                 {"raw_pair_rtt_us", r.raw_pair_rtt_us_runs}}}});
  }
  out["results"] = results;
  out["targets"] = targets;
  out["ok"] = true;
  out["elapsed_s"] = elapsed;
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace ff
