#include "sla/task_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <tuple>

#include "sla/task_identity.h"

namespace ff::sla {
namespace {

constexpr char kMagic[8] = {'F', 'F', 'S', 'T', 'A', 'T', 'S', '1'};
constexpr uint32_t kVersion = 1;

enum SlotState : uint32_t { kEmpty = 0, kClaiming = 1, kReady = 2 };

struct DirectionCounters {
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> messages;
  std::atomic<uint64_t> latency_sum_ns;
  std::atomic<uint64_t> histogram[kLatencyBuckets];
};

struct alignas(64) Slot {
  std::atomic<uint32_t> state;
  uint32_t path_id;
  uint8_t collective;
  char task[kStatsNameCapacity];
  char peer[kStatsNameCapacity];
  DirectionCounters dir[2];
};

struct alignas(64) TaskEntry {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> level;
  char task[kStatsNameCapacity];
  std::atomic<uint64_t> sla_ns;  // 0: none declared
  std::atomic<uint64_t> heat_bits;  // IEEE double
  std::atomic<uint64_t> sla_unattainable;
  std::atomic<uint64_t> failover_events;
  std::atomic<uint64_t> failover_bytes_resent;
  std::atomic<uint64_t> failover_paused_ns;
  std::atomic<uint64_t> failbacks;
};
static_assert(sizeof(TaskEntry) == 128, "the stats file format: a task entry is two cache lines");

struct alignas(64) Header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint32_t slot_size;
  uint32_t task_size;
  uint32_t slot_capacity;
  uint32_t task_capacity;
  int64_t pid;
  uint64_t start_ticks;
  std::atomic<uint64_t> dropped;
  std::atomic<uint32_t> ready;  // set last, after the header is complete
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters must be address-free atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "states must be address-free atomics");

size_t FileSize(uint32_t slots, uint32_t tasks) {
  return sizeof(Header) + size_t{slots} * sizeof(Slot) + size_t{tasks} * sizeof(TaskEntry);
}

Slot* Slots(void* base) { return reinterpret_cast<Slot*>(static_cast<char*>(base) + sizeof(Header)); }
TaskEntry* Tasks(void* base, uint32_t slots) {
  return reinterpret_cast<TaskEntry*>(static_cast<char*>(base) + sizeof(Header) + size_t{slots} * sizeof(Slot));
}

void CopyName(char (&dst)[kStatsNameCapacity], std::string_view src) {
  const size_t n = std::min(src.size(), kStatsNameCapacity - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

std::string_view Truncated(std::string_view s) { return s.substr(0, std::min(s.size(), kStatsNameCapacity - 1)); }

bool NameEquals(const char (&stored)[kStatsNameCapacity], std::string_view s) {
  const std::string_view t = Truncated(s);
  return std::strncmp(stored, t.data(), t.size()) == 0 && stored[t.size()] == '\0';
}

uint64_t Hash(std::string_view a, uint8_t c, std::string_view b, uint32_t path) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<const unsigned char*>(p)[i];
      h *= 0x100000001b3ull;
    }
  };
  a = Truncated(a);
  b = Truncated(b);
  mix(a.data(), a.size());
  mix(&c, 1);
  mix(b.data(), b.size());
  mix(&path, sizeof(path));
  return h;
}

void WaitReady(const std::atomic<uint32_t>& state) {
  // A slot being claimed by another thread becomes ready within a few stores.
  while (state.load(std::memory_order_acquire) == kClaiming) {
  }
}

uint64_t ReadStartTicks(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  return std::getline(in, line) ? ParseStatStartTicks(line) : 0;
}

}  // namespace

struct StatsTable::Layout {
  Header* header;
  Slot* slots;
  TaskEntry* tasks;
};

int LatencyBucket(uint64_t latency_ns) {
  if (latency_ns <= 1) return 0;
  const int b = std::bit_width(latency_ns - 1);  // smallest b with latency <= 2^b
  return std::min(b, kLatencyBuckets - 1);
}

std::string StatsFilePath(const std::string& dir, int64_t pid) {
  return dir + "/" + kStatsFilePrefix + std::to_string(pid);
}

std::unique_ptr<StatsTable> StatsTable::Open(const StatsTableOptions& options, std::string* error) {
  auto fail = [&](const std::string& what) -> std::unique_ptr<StatsTable> {
    if (error) *error = what;
    return nullptr;
  };
  if (options.slots == 0 || options.tasks == 0) return fail("stats table: slots and tasks must be above 0");
  const int64_t pid = getpid();
  const std::string path = StatsFilePath(options.dir, pid);
  // A file with our pid is a dead process's leftover (pids are reused): replace it.
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("stats table: cannot create " + path + ": " + std::strerror(errno));
  const size_t size = FileSize(options.slots, options.tasks);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return fail("stats table: cannot size " + path + ": " + std::strerror(err));
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (base == MAP_FAILED) {
    ::unlink(path.c_str());
    return fail("stats table: cannot map " + path + ": " + std::strerror(err));
  }
  // ftruncate zero-fills: every state is kEmpty and every counter 0 before the header is published.
  auto* h = static_cast<Header*>(base);
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  h->version = kVersion;
  h->header_size = sizeof(Header);
  h->slot_size = sizeof(Slot);
  h->task_size = sizeof(TaskEntry);
  h->slot_capacity = options.slots;
  h->task_capacity = options.tasks;
  h->pid = pid;
  h->start_ticks = ReadStartTicks(pid);
  h->ready.store(1, std::memory_order_release);

  std::unique_ptr<StatsTable> t(new StatsTable());
  t->path_ = path;
  t->base_ = base;
  t->size_ = size;
  t->remove_on_close_ = options.remove_on_close;
  t->layout_ = new Layout{h, Slots(base), Tasks(base, options.slots)};
  return t;
}

StatsTable::~StatsTable() {
  if (base_ != nullptr) ::munmap(base_, size_);
  if (remove_on_close_ && !path_.empty()) ::unlink(path_.c_str());
  delete layout_;
}

uint32_t StatsTable::Resolve(const StatsKey& key) {
  const uint32_t capacity = layout_->header->slot_capacity;
  const auto c = static_cast<uint8_t>(key.collective);
  const uint64_t h = Hash(key.task, c, key.peer, key.path_id);
  for (uint32_t probe = 0; probe < capacity; ++probe) {
    const uint32_t i = static_cast<uint32_t>((h + probe) % capacity);
    Slot& s = layout_->slots[i];
    uint32_t state = s.state.load(std::memory_order_acquire);
    if (state == kEmpty) {
      if (s.state.compare_exchange_strong(state, kClaiming, std::memory_order_acq_rel)) {
        CopyName(s.task, key.task);
        CopyName(s.peer, key.peer);
        s.collective = c;
        s.path_id = key.path_id;
        s.state.store(kReady, std::memory_order_release);
        return i;
      }
      // Lost the race; `state` now holds the winner's state.
    }
    WaitReady(s.state);
    if (s.collective == c && s.path_id == key.path_id && NameEquals(s.task, key.task) && NameEquals(s.peer, key.peer))
      return i;
  }
  layout_->header->dropped.fetch_add(1, std::memory_order_relaxed);
  return kInvalid;
}

void StatsTable::Record(uint32_t slot, uint64_t bytes, uint64_t latency_ns, Direction direction) {
  if (slot >= layout_->header->slot_capacity) {
    if (slot != kInvalid) layout_->header->dropped.fetch_add(1, std::memory_order_relaxed);
    return;  // Resolve already counted the drop
  }
  DirectionCounters& d = layout_->slots[slot].dir[static_cast<int>(direction)];
  d.bytes.fetch_add(bytes, std::memory_order_relaxed);
  d.messages.fetch_add(1, std::memory_order_relaxed);
  d.latency_sum_ns.fetch_add(latency_ns, std::memory_order_relaxed);
  d.histogram[LatencyBucket(latency_ns)].fetch_add(1, std::memory_order_relaxed);
}

uint32_t StatsTable::ResolveTask(std::string_view task) {
  const uint32_t capacity = layout_->header->task_capacity;
  for (uint32_t i = 0; i < capacity; ++i) {
    TaskEntry& t = layout_->tasks[i];
    uint32_t state = t.state.load(std::memory_order_acquire);
    if (state == kEmpty && t.state.compare_exchange_strong(state, kClaiming, std::memory_order_acq_rel)) {
      CopyName(t.task, task);
      t.state.store(kReady, std::memory_order_release);
      return i;
    }
    WaitReady(t.state);
    if (NameEquals(t.task, task)) return i;
  }
  return kInvalid;
}

void StatsTable::SetTaskSla(uint32_t task, std::optional<uint64_t> sla_ns, int level) {
  if (task >= layout_->header->task_capacity) return;
  layout_->tasks[task].sla_ns.store(sla_ns.value_or(0), std::memory_order_relaxed);
  layout_->tasks[task].level.store(static_cast<uint32_t>(level), std::memory_order_relaxed);
}

void StatsTable::SetTaskHeat(uint32_t task, double heat) {
  if (task >= layout_->header->task_capacity) return;
  layout_->tasks[task].heat_bits.store(std::bit_cast<uint64_t>(heat), std::memory_order_relaxed);
}

void StatsTable::AddSlaUnattainable(uint32_t task, uint64_t n) {
  if (task >= layout_->header->task_capacity) return;
  layout_->tasks[task].sla_unattainable.fetch_add(n, std::memory_order_relaxed);
}

void StatsTable::AddFailover(uint32_t task, uint64_t events, uint64_t bytes_resent, uint64_t paused_ns) {
  if (task >= layout_->header->task_capacity) return;
  TaskEntry& t = layout_->tasks[task];
  t.failover_events.fetch_add(events, std::memory_order_relaxed);
  t.failover_bytes_resent.fetch_add(bytes_resent, std::memory_order_relaxed);
  t.failover_paused_ns.fetch_add(paused_ns, std::memory_order_relaxed);
}

void StatsTable::AddFailback(uint32_t task) {
  if (task >= layout_->header->task_capacity) return;
  layout_->tasks[task].failbacks.fetch_add(1, std::memory_order_relaxed);
}

// ---- reader side -----------------------------------------------------------

bool StatsOwnerAlive(int64_t pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // The pid runs; it is the owner only if it started when the owner did (pids are reused).
  const uint64_t now_ticks = ReadStartTicks(pid);
  return start_ticks == 0 || now_ticks == 0 || now_ticks == start_ticks;
}

std::optional<StatsSnapshot> ReadStatsFile(const std::string& path, std::string* error) {
  auto fail = [&](const std::string& what) -> std::optional<StatsSnapshot> {
    if (error) *error = path + ": " + what;
    return std::nullopt;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Header)) {
    ::close(fd);
    return fail("too small to be a FlexiForce statistics file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return fail(std::string("cannot map: ") + std::strerror(errno));
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { ::munmap(p, n); }
  } unmap{base, size};

  const auto* h = static_cast<const Header*>(base);
  if (std::memcmp(h->magic, kMagic, sizeof(kMagic)) != 0) return fail("not a FlexiForce statistics file");
  if (h->ready.load(std::memory_order_acquire) != 1) return fail("still being created");
  if (h->version != kVersion || h->header_size != sizeof(Header) || h->slot_size != sizeof(Slot) ||
      h->task_size != sizeof(TaskEntry))
    return fail("written by an incompatible FlexiForce version (format " + std::to_string(h->version) + ")");
  if (FileSize(h->slot_capacity, h->task_capacity) != size) return fail("size does not match its header");

  StatsSnapshot snap;
  snap.path = path;
  snap.pid = h->pid;
  snap.alive = StatsOwnerAlive(h->pid, h->start_ticks);
  snap.dropped = h->dropped.load(std::memory_order_relaxed);
  const Slot* slots = Slots(base);
  for (uint32_t i = 0; i < h->slot_capacity; ++i) {
    const Slot& s = slots[i];
    if (s.state.load(std::memory_order_acquire) != kReady) continue;
    SlotSnapshot out;
    out.task.assign(s.task, strnlen(s.task, kStatsNameCapacity));
    out.peer.assign(s.peer, strnlen(s.peer, kStatsNameCapacity));
    out.collective = static_cast<Collective>(s.collective);
    out.path_id = s.path_id;
    DirectionSnapshot* dirs[2] = {&out.send, &out.recv};
    for (int d = 0; d < 2; ++d) {
      dirs[d]->bytes = s.dir[d].bytes.load(std::memory_order_relaxed);
      dirs[d]->messages = s.dir[d].messages.load(std::memory_order_relaxed);
      dirs[d]->latency_sum_ns = s.dir[d].latency_sum_ns.load(std::memory_order_relaxed);
      for (int b = 0; b < kLatencyBuckets; ++b)
        dirs[d]->histogram[b] = s.dir[d].histogram[b].load(std::memory_order_relaxed);
    }
    snap.slots.push_back(std::move(out));
  }
  const TaskEntry* tasks = Tasks(base, h->slot_capacity);
  for (uint32_t i = 0; i < h->task_capacity; ++i) {
    const TaskEntry& t = tasks[i];
    if (t.state.load(std::memory_order_acquire) != kReady) continue;
    TaskSnapshot out;
    out.task.assign(t.task, strnlen(t.task, kStatsNameCapacity));
    const uint64_t sla = t.sla_ns.load(std::memory_order_relaxed);
    if (sla != 0) out.sla_ns = sla;
    out.level = static_cast<int>(t.level.load(std::memory_order_relaxed));
    out.heat = std::bit_cast<double>(t.heat_bits.load(std::memory_order_relaxed));
    out.sla_unattainable = t.sla_unattainable.load(std::memory_order_relaxed);
    out.failover_events = t.failover_events.load(std::memory_order_relaxed);
    out.failover_bytes_resent = t.failover_bytes_resent.load(std::memory_order_relaxed);
    out.failover_paused_ns = t.failover_paused_ns.load(std::memory_order_relaxed);
    out.failbacks = t.failbacks.load(std::memory_order_relaxed);
    snap.tasks.push_back(std::move(out));
  }
  // Stable output order regardless of hash placement.
  std::sort(snap.slots.begin(), snap.slots.end(), [](const SlotSnapshot& a, const SlotSnapshot& b) {
    return std::tie(a.task, a.collective, a.peer, a.path_id) < std::tie(b.task, b.collective, b.peer, b.path_id);
  });
  return snap;
}

std::vector<std::pair<int64_t, std::string>> ListStatsFiles(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  const std::string prefix = kStatsFilePrefix;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) continue;
    out.emplace_back(std::stoll(digits), dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> RemoveStaleStatsFiles(const std::string& dir) {
  std::vector<std::string> removed;
  for (const auto& [pid, path] : ListStatsFiles(dir)) {
    std::string error;
    auto snap = ReadStatsFile(path, &error);
    // Unreadable files are left alone unless their pid is gone: they may be mid-creation.
    const bool dead = snap ? !snap->alive : !StatsOwnerAlive(pid, 0);
    if (dead && ::unlink(path.c_str()) == 0) removed.push_back(path);
  }
  return removed;
}

}  // namespace ff::sla
