// ff-probe-microbench: CPU nanoseconds per message completion's probe work, compiled out, compiled in and not
// attached, and (run under `flexiforce probe watch --lib THIS_BINARY`) attached. Prints one JSON object.
// usage: ff-probe-microbench [--calls N] [--rounds R] [--task T] [--wait-attached]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/probe/probe_microbench.h"

namespace {

double ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

template <typename F>
double NsPerCall(F loop, uint64_t calls, int rounds, uint64_t* sink) {
  std::vector<double> v;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = ThreadCpuNs();
    *sink += loop(calls);
    v.push_back((ThreadCpuNs() - t0) / static_cast<double>(calls));
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];  // median of the rounds
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t calls = 2000000;
  int rounds = 5;
  std::string task = "probe-microbench";
  bool wait_attached = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--calls" && i + 1 < argc) calls = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--task" && i + 1 < argc) task = argv[++i];
    else if (a == "--wait-attached") wait_attached = true;
    else {
      std::fprintf(stderr, "usage: ff-probe-microbench [--calls N] [--rounds R] [--task T] [--wait-attached]\n");
      return 2;
    }
  }
  if (calls == 0 || rounds < 1) return 2;
  if (argc > 1000) ff::probe_bench::OtherProbeSites(task.c_str(), "");  // never: keeps the sites
  if (wait_attached) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ff::probe_bench::AttachedSemaphore() == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "ff-probe-microbench: no probe attached within 30 s\n");
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const char* peer = "127.0.0.1:40000";
  uint64_t sink = 0;
  const unsigned sem = ff::probe_bench::AttachedSemaphore();
  // Interleaved so drift hits both; in the attached case only the "in" loop fires probes.
  const double out_ns = NsPerCall([&](uint64_t n) { return ff::probe_bench::LoopWithoutProbes(n, task.c_str(), peer); },
                                  calls, rounds, &sink);
  const double in_ns = NsPerCall([&](uint64_t n) { return ff::probe_bench::LoopWithProbes(n, task.c_str(), peer); },
                                 calls, rounds, &sink);
  std::printf("{\"calls\": %llu, \"rounds\": %d, \"fired\": %llu, \"semaphore\": %u, \"compiled_out_ns\": %.3f, "
              "\"compiled_in_ns\": %.3f, \"checksum\": %llu}\n",
              static_cast<unsigned long long>(calls), rounds,
              static_cast<unsigned long long>(sem ? calls * static_cast<uint64_t>(rounds) : 0), sem, out_ns, in_ns,
              static_cast<unsigned long long>(sink));
  return 0;
}
