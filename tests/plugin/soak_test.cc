// Soak: thousands of listen/connect/accept/send/receive/close cycles through the built .so's v11
// table over loopback, in one process (connect and accept are non-blocking, so one thread drives
// both ends). What a months-long job with many communicators must not do: leak descriptors, grow
// its memory, or use up the statistics table (one slot per {task, collective, peer address, path},
// never per connection). Each cycle's traffic is labelled with another collective (setNetAttr), and
// the table has 16 slots: 22 keys take turns in it, so closing connections must give slots back
// (reclaimed into the closed-connections slots) with every message still counted.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sla/task_stats.h"
#include "tests/plugin/two_process.h"

namespace ff::testing {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizedBuild = true;
#else
constexpr bool kSanitizedBuild = false;
#endif

// Sanitized builds (ASan keeps freed memory in quarantine, TSan shadows it) run a tenth of the
// cycles and do not judge RSS; FF_SANITIZED says so for lanes that set it, the macros for the rest.
bool Sanitized() { return kSanitizedBuild || std::getenv("FF_SANITIZED") != nullptr; }

// 11 collectives x 2 directions = 22 keys, more than the table holds; up to 11 closed-connections
// slots and the 2 of the open connections fit.
constexpr int kStatsSlots = 16;
constexpr int kCollectives = 11;

// The statistics file goes to a directory of this process's own, set before the plugin reads its
// configuration (at the first init).
std::string StatsDir() {
  static const std::string dir = [] {
    std::string d = "/tmp/ff-soak-" + std::to_string(getpid());
    mkdir(d.c_str(), 0700);
    setenv("FLEXIFORCE_STATS_DIR", d.c_str(), 1);
    setenv("FLEXIFORCE_STATS", "1", 1);
    setenv("FLEXIFORCE_STATS_SLOTS", std::to_string(kStatsSlots).c_str(), 1);
    return d;
  }();
  return dir;
}
const std::string g_stats_dir = StatsDir();
// Destroyed after the plugin's exit handler removed the file (registered later, so it runs first).
struct RemoveStatsDir {
  ~RemoveStatsDir() { rmdir(g_stats_dir.c_str()); }
} g_remove_stats_dir;

int OpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

long RssKiB() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct StatsCount {
  long slots = -1;
  long closed_slots = 0;
  uint64_t dropped = 0;
  uint64_t messages = 0;  // both directions, every slot (closed connections included)
  uint64_t bytes = 0;
};

StatsCount UsedSlots() {
  StatsCount c;
  for (const auto& [pid, path] : sla::ListStatsFiles(g_stats_dir)) {
    if (pid != getpid()) continue;
    std::string error;
    auto snap = sla::ReadStatsFile(path, &error);
    if (!snap) {
      ADD_FAILURE() << path << ": " << error;
      return c;
    }
    c.slots = static_cast<long>(snap->slots.size());
    c.dropped = snap->dropped;
    for (const auto& s : snap->slots) {
      c.closed_slots += s.closed_connections();
      c.messages += s.send.messages + s.recv.messages;
      c.bytes += s.send.bytes + s.recv.bytes;
    }
  }
  return c;
}

struct Sample {
  int fds;
  long rss_kib;
  StatsCount stats;
};

Sample Take() { return Sample{OpenFds(), RssKiB(), UsedSlots()}; }

// One cycle: listen, connect and accept (driven alternately until both are done), one message each
// way, then close everything. Returns an empty string or what went wrong.
std::string Cycle(NetPeer& peer, int seq) {
  char handle[128];
  void* lc = peer.Listen(handle);
  void* sc = nullptr;
  void* rc = nullptr;
  ncclNetDeviceHandle_t* dc = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sc == nullptr || rc == nullptr) {
    if (sc == nullptr && peer.net()->connect(peer.ctx(), 0, handle, &sc, &dc) != ncclSuccess) return "connect failed";
    if (rc == nullptr && peer.net()->accept(lc, &rc, &dc) != ncclSuccess) return "accept failed";
    if (std::chrono::steady_clock::now() > deadline) return "connect/accept timed out";
  }
  // The context's collective for this cycle's messages (NCCL sets it per transfer).
  ncclNetAttr_t attr{};
  attr.op = 1u << (seq % kCollectives);
  attr.algo = 1;
  attr.proto = 1;
  if (peer.net()->setNetAttr(peer.ctx(), &attr) != ncclSuccess) return "setNetAttr failed";
  char out[256], in[512];
  FillPattern(out, static_cast<uint64_t>(seq), sizeof(out));
  void* rreq = nullptr;
  void* data = in;
  size_t cap = sizeof(in);
  int tag = 1;
  void* mh = nullptr;
  if (peer.net()->irecv(rc, 1, &data, &cap, &tag, &mh, nullptr, &rreq) != ncclSuccess || rreq == nullptr)
    return "irecv failed";
  void* sreq = nullptr;
  // NULL is "retry later": with nothing allowed unsolicited (FLEXIFORCE_EAGER_BYTES=0) until the
  // receive's descriptor, posted above, has arrived.
  const auto send_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sreq == nullptr) {
    if (peer.net()->isend(sc, out, sizeof(out), 1, nullptr, nullptr, &sreq) != ncclSuccess) return "isend failed";
    if (sreq == nullptr && std::chrono::steady_clock::now() > send_deadline) return "isend said retry later for 10 s";
  }
  int sdone = 0, rdone = 0, size = -1;
  while (!sdone || !rdone) {
    if (!sdone && peer.net()->test(sreq, &sdone, nullptr) != ncclSuccess) return "test(send) failed";
    if (!rdone && peer.net()->test(rreq, &rdone, &size) != ncclSuccess) return "test(recv) failed";
    if (std::chrono::steady_clock::now() > deadline) return "transfer timed out";
  }
  if (size != static_cast<int>(sizeof(out)) || CheckPattern(in, static_cast<uint64_t>(seq), sizeof(out)) >= 0)
    return "message " + std::to_string(seq) + " arrived with " + std::to_string(size) + " bytes or corrupt";
  if (peer.net()->closeSend(sc) != ncclSuccess) return "closeSend failed";
  if (peer.net()->closeRecv(rc) != ncclSuccess) return "closeRecv failed";
  if (peer.net()->closeListen(lc) != ncclSuccess) return "closeListen failed";
  return {};
}

TEST(Soak, TenThousandConnectCloseCyclesKeepFdsRssAndStatsSlotsFlat) {
  int cycles = Sanitized() ? 1000 : 10000;
  if (const char* c = std::getenv("FF_SOAK_CYCLES")) cycles = std::atoi(c);
  ASSERT_GE(cycles, 20) << "FF_SOAK_CYCLES must be at least 20";
  const int warmup = cycles / 10;  // allocator pools, the rejoin hub and first-use state settle here
  NetPeer peer;
  const Sample start = Take();
  Sample after_warmup{};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= cycles; ++i) {
    const std::string err = Cycle(peer, i);
    ASSERT_TRUE(err.empty()) << "cycle " << i << ": " << err;
    if (i == warmup) after_warmup = Take();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Sample end = Take();
  std::printf("soak: %d cycles in %.2f s (%.0f us per cycle)\n", cycles, seconds, seconds * 1e6 / cycles);
  std::printf("soak: fds %d -> %d (after cycle %d) -> %d; RSS %ld -> %ld -> %ld KiB; stats slots %ld -> %ld -> %ld "
              "(%ld closed-connections), dropped %llu, messages %llu\n",
              start.fds, after_warmup.fds, warmup, end.fds, start.rss_kib, after_warmup.rss_kib, end.rss_kib,
              start.stats.slots, after_warmup.stats.slots, end.stats.slots, end.stats.closed_slots,
              static_cast<unsigned long long>(end.stats.dropped), static_cast<unsigned long long>(end.stats.messages));
  ASSERT_GT(after_warmup.stats.slots, 0) << "no statistics file found in " << g_stats_dir;
  EXPECT_EQ(end.fds, after_warmup.fds) << "descriptors leak across connect/close cycles";
  EXPECT_EQ(end.stats.slots, after_warmup.stats.slots) << "statistics slots grow with the number of connections";
  EXPECT_EQ(end.stats.dropped, 0u) << "statistics records were dropped (slot table full)";
  // Every message, one each way per cycle, is still counted once: in its key's slot or, once that
  // was reclaimed, in its task's and collective's closed connections.
  EXPECT_EQ(end.stats.messages, 2u * static_cast<uint64_t>(cycles));
  EXPECT_EQ(end.stats.bytes, 2u * 256u * static_cast<uint64_t>(cycles));
  EXPECT_GT(end.stats.closed_slots, 0) << "no slot was reclaimed: the test no longer exercises reclaiming";
  if (!Sanitized()) {
    // Allocator noise is a few hundred KiB; a leak of even 100 bytes a cycle would be ~900 KiB more.
    EXPECT_LE(end.rss_kib - after_warmup.rss_kib, 2048) << "RSS grows with the number of cycles";
  }
}

}  // namespace
}  // namespace ff::testing
