// The statistics writer: one shared-memory file per process, claimed slots, lock-free counters.
#include "sla/task_stats.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "sla/stats_file_format.h"

namespace ff::sla {
using namespace stats_format;
namespace {

template <size_t N>
std::string_view Truncated(std::string_view s) {
  return s.substr(0, std::min(s.size(), N - 1));
}

template <size_t N>
void CopyName(char (&dst)[N], std::string_view src) {
  const std::string_view t = Truncated<N>(src);
  if (!t.empty()) std::memcpy(dst, t.data(), t.size());  // an empty view may have no data pointer
  dst[t.size()] = '\0';
}

template <size_t N>
bool NameEquals(const char (&stored)[N], std::string_view s) {
  const std::string_view t = Truncated<N>(s);
  return (t.empty() || std::strncmp(stored, t.data(), t.size()) == 0) && stored[t.size()] == '\0';
}

uint64_t Hash(std::string_view a, uint8_t c, std::string_view b, uint32_t path, std::string_view path_name) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<const unsigned char*>(p)[i];
      h *= 0x100000001b3ull;
    }
  };
  a = Truncated<kStatsNameCapacity>(a);
  b = Truncated<kStatsNameCapacity>(b);
  path_name = Truncated<kStatsPathNameCapacity>(path_name);
  mix(a.data(), a.size());
  mix(&c, 1);
  mix(b.data(), b.size());
  mix(&path, sizeof(path));
  mix(path_name.data(), path_name.size());
  return h;
}

void WaitReady(const std::atomic<uint32_t>& state) {
  // A slot being claimed by another thread becomes ready within a few stores.
  while (state.load(std::memory_order_acquire) == kClaiming) {
  }
}

// Gives the file real blocks now. ftruncate alone leaves it sparse, and on a full tmpfs (Docker's
// default /dev/shm is 64 MB) the first store to a page without a block raises SIGBUS in the job,
// far from here. Returns 0 or an errno value.
int ReserveFileSpace(int fd, size_t size) {
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (err != EOPNOTSUPP) return err;
  // No fallocate on this file system (glibc already emulates it for most): write the zeros
  // ourselves, which allocates every block or fails with ENOSPC here.
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return errno;
  static const char zeros[4096] = {};
  for (size_t off = 0; off < size;) {
    const size_t n = std::min(sizeof(zeros), size - off);
    const ssize_t w = ::pwrite(fd, zeros, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    off += static_cast<size_t>(w);
  }
  return 0;
}

// A file already under our final name whose writer is gone (its lock is free): a dead process
// with our pid number left it. A file that is locked, or that we cannot safely open (a FIFO, a
// symlink, another user's), is not ours to replace.
bool ExistingFileIsStale(const std::string& path) {
  UniqueFd fd;
  struct stat st {};
  if (!OpenStatsFileForReading(path, &fd, &st, nullptr)) return false;
  return ProbeWriterLock(fd.get(), LOCK_EX) == WriterLock::kFree;
}

// Removes the hidden temporary file unless it was published.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, size);
  }
};

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

std::string_view StatsPeerAddress(std::string_view peer) {
  // A path description "local:port->remote:port" names the peer after the arrow.
  if (const size_t arrow = peer.rfind("->"); arrow != std::string_view::npos) peer.remove_prefix(arrow + 2);
  if (!peer.empty() && peer.front() == '[') {  // [v6]:port
    const size_t close = peer.find(']');
    return close == std::string_view::npos ? peer : peer.substr(1, close - 1);
  }
  const size_t colon = peer.find(':');
  // One colon: v4:port or host:port. None or several (a bare IPv6 address): no port to strip.
  if (colon == std::string_view::npos || peer.find(':', colon + 1) != std::string_view::npos) return peer;
  const std::string_view port = peer.substr(colon + 1);
  const bool numeric = !port.empty() && port.find_first_not_of("0123456789") == std::string_view::npos;
  return numeric ? peer.substr(0, colon) : peer;
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
  if (options.slots > kMaxSlots || options.tasks > kMaxTasks)
    return fail("stats table: at most " + std::to_string(kMaxSlots) + " slots and " + std::to_string(kMaxTasks) +
                " tasks");
  const int64_t pid = getpid();
  const size_t size = FileSize(options.slots, options.tasks);

  // Built under a hidden name and published with link() only once complete and locked, so a
  // reader never sees a half-made file and --gc never sees a published file without its lock.
  TempFile temp{options.dir + "/." + kStatsFilePrefix + std::to_string(pid) + "-XXXXXX"};
  UniqueFd fd(::mkostemp(temp.path.data(), O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    temp.path.clear();
    return fail("stats table: cannot create a file in " + options.dir + ": " + std::strerror(err));
  }
  // Per-job numbers (task ids, peers, traffic) are for the job's user and root only.
  if (::fchmod(fd.get(), 0600) != 0) return fail("stats table: cannot chmod " + temp.path + ": " + std::strerror(errno));
  // Held for the process's life: its presence, not the pid, says the writer lives, which also
  // holds across pid namespaces sharing the directory. A fresh file: nobody else can hold it.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0)
    return fail("stats table: cannot lock " + temp.path + ": " + std::strerror(errno));
  if (const int err = ReserveFileSpace(fd.get(), size); err != 0)
    return fail("stats table: cannot reserve " + std::to_string(size) + " bytes in " + options.dir + ": " +
                std::strerror(err) + " (a full /dev/shm? FLEXIFORCE_STATS_DIR moves the file, FLEXIFORCE_STATS=0 " +
                "turns statistics off)");
  Mapping map;
  map.size = size;
  map.base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map.base == MAP_FAILED) return fail("stats table: cannot map " + temp.path + ": " + std::strerror(errno));
  // The reserved blocks read as zeros: every state is kEmpty and every counter 0 before the
  // header is published.
  auto* h = static_cast<Header*>(map.base);
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

  // flexiforce-stats-<pid>; if a live process of another pid namespace already has that name,
  // flexiforce-stats-<pid>-<n>.
  std::string published;
  for (int n = 0; n < 16 && published.empty(); ++n) {
    const std::string name = StatsFilePath(options.dir, pid) + (n == 0 ? "" : "-" + std::to_string(n));
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (::link(temp.path.c_str(), name.c_str()) == 0) {
        published = name;
        break;
      }
      if (errno != EEXIST) return fail("stats table: cannot create " + name + ": " + std::strerror(errno));
      if (attempt > 0 || !ExistingFileIsStale(name)) break;
      ::unlink(name.c_str());
    }
  }
  if (published.empty()) return fail("stats table: 16 live files already carry pid " + std::to_string(pid));

  std::unique_ptr<StatsTable> t(new StatsTable());
  t->path_ = published;
  t->base_ = std::exchange(map.base, MAP_FAILED);
  t->size_ = size;
  t->lock_ = std::move(fd);
  t->remove_on_close_ = options.remove_on_close;
  t->layout_ = new Layout{h, Slots(t->base_), Tasks(t->base_, options.slots)};
  return t;
}

void StatsTable::RemoveFile() {
  if (remove_on_close_ && !path_.empty() && !removed_.exchange(true)) ::unlink(path_.c_str());
}

StatsTable::~StatsTable() {
  if (base_ != nullptr) ::munmap(base_, size_);
  RemoveFile();
  delete layout_;
}

uint32_t StatsTable::Resolve(const StatsKey& key) {
  const uint32_t capacity = layout_->header->slot_capacity;
  const auto c = static_cast<uint8_t>(key.collective);
  // Keyed by the peer's address: its ephemeral port differs per connection, and a long job opens
  // thousands, which would fill the table and drop every later connection's numbers.
  const std::string_view peer = StatsPeerAddress(key.peer);
  const uint64_t h = Hash(key.task, c, peer, key.path_id, key.path_name);
  for (uint32_t probe = 0; probe < capacity; ++probe) {
    const uint32_t i = static_cast<uint32_t>((h + probe) % capacity);
    Slot& s = layout_->slots[i];
    uint32_t state = s.state.load(std::memory_order_acquire);
    if (state == kEmpty) {
      if (s.state.compare_exchange_strong(state, kClaiming, std::memory_order_acq_rel)) {
        CopyName(s.task, key.task);
        CopyName(s.peer, peer);
        s.collective = c;
        s.path_id = key.path_id;
        CopyName(s.path_name, key.path_name);
        s.state.store(kReady, std::memory_order_release);
        return i;
      }
      // Lost the race; `state` now holds the winner's state.
    }
    WaitReady(s.state);
    if (s.collective == c && s.path_id == key.path_id && NameEquals(s.task, key.task) && NameEquals(s.peer, peer) &&
        NameEquals(s.path_name, key.path_name))
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

}  // namespace ff::sla
