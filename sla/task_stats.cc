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
#include <mutex>
#include <vector>

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

// A slot's key as stored: the peer already reduced to its address.
struct SlotKey {
  std::string_view task;
  uint8_t collective;
  std::string_view peer;
  uint32_t path_id;
  std::string_view path_name;
};

bool Matches(const Slot& s, const SlotKey& k) {
  return s.collective == k.collective && s.path_id == k.path_id && NameEquals(s.task, k.task) &&
         NameEquals(s.peer, k.peer) && NameEquals(s.path_name, k.path_name);
}

void WriteKey(Slot& s, const SlotKey& k) {
  CopyName(s.task, k.task);
  CopyName(s.peer, k.peer);
  s.collective = k.collective;
  s.path_id = k.path_id;
  CopyName(s.path_name, k.path_name);
}

// The closed-connections key of a task and collective.
SlotKey ClosedKey(std::string_view task, uint8_t collective) {
  return SlotKey{task, collective, kStatsClosedPeer, 0, kStatsClosedPathName};
}

bool IsClosedKey(const SlotKey& k) {
  return k.path_id == 0 && Truncated<kStatsNameCapacity>(k.peer) == kStatsClosedPeer &&
         Truncated<kStatsPathNameCapacity>(k.path_name) == kStatsClosedPathName;
}

// Moves every counter of `from` into `to` and leaves `from` at zero. Nothing records into `from`
// (it is unreferenced). Release stores: a reader that sees any of them (it loads counters with
// acquire) also sees `from` marked not ready, which was stored before.
void FoldCounters(Slot& from, Slot& to) {
  auto move = [](std::atomic<uint64_t>& src, std::atomic<uint64_t>& dst) {
    const uint64_t v = src.load(std::memory_order_relaxed);
    if (v != 0) dst.fetch_add(v, std::memory_order_release);
    src.store(0, std::memory_order_release);
  };
  for (int d = 0; d < 2; ++d) {
    move(from.dir[d].bytes, to.dir[d].bytes);
    move(from.dir[d].messages, to.dir[d].messages);
    move(from.dir[d].latency_sum_ns, to.dir[d].latency_sum_ns);
    for (int b = 0; b < kLatencyBuckets; ++b) move(from.dir[d].histogram[b], to.dir[d].histogram[b]);
  }
}

}  // namespace

// Process-local bookkeeping beside the mapping: who holds which slot. Not in the file. Lookups
// scan this (a few bytes a slot) and touch a shared slot only when its key's hash matches.
struct SlotUse {
  bool used = false;      // holds a key (slots are claimed only under the mutex)
  bool closed = false;    // a closed-connections slot: never reclaimed
  uint32_t refs = 0;
  uint64_t hash = 0;      // of the key it holds
  uint64_t released = 0;  // when the last reference went (a tick of StatsTable::Layout::clock)
};

struct StatsTable::Layout {
  Header* header;
  Slot* slots;
  TaskEntry* tasks;
  std::mutex mu;              // Resolve, Release and reclaiming; never Record
  std::vector<SlotUse> use;   // per slot, under mu
  uint64_t clock = 0;         // release ticks, under mu

  // The slot holding `k`, or (claim) a free one now holding it; kInvalid when neither exists.
  // Slots are never emptied, so a key sits before the first empty slot of its probe chain.
  uint32_t Find(const SlotKey& k, uint64_t hash, bool claim);
  // Re-keys an unreferenced slot for `k` (of `hash`) after folding its counters into its
  // closed-connections slot; kInvalid when none can be reclaimed.
  uint32_t Reclaim(const SlotKey& k, uint64_t hash);
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
  t->owner_pid_ = pid;
  t->layout_ = new Layout{h, Slots(t->base_), Tasks(t->base_, options.slots)};
  t->layout_->use.resize(options.slots);
  return t;
}

void StatsTable::RemoveFile() {
  if (path_.empty() || getpid() != owner_pid_ || removed_.exchange(true)) return;
  if (remove_on_close_)
    ::unlink(path_.c_str());
  else
    (void)::fchmod(lock_.get(), 0400);  // kept on purpose: the crashed-writer sweep leaves it
}

StatsTable::~StatsTable() {
  if (base_ != nullptr) ::munmap(base_, size_);
  RemoveFile();
  delete layout_;
}

uint32_t StatsTable::Layout::Find(const SlotKey& k, uint64_t hash, bool claim) {
  const uint32_t capacity = header->slot_capacity;
  for (uint32_t probe = 0; probe < capacity; ++probe) {
    const uint32_t i = static_cast<uint32_t>((hash + probe) % capacity);
    Slot& s = slots[i];
    if (!use[i].used) {
      if (!claim) return kInvalid;
      s.state.store(kClaiming, std::memory_order_relaxed);
      WriteKey(s, k);
      s.state.store(kReady, std::memory_order_release);
      use[i] = SlotUse{true, IsClosedKey(k), 0, hash, 0};
      return i;
    }
    if (use[i].hash == hash && Matches(s, k)) return i;
  }
  return kInvalid;
}

uint32_t StatsTable::Layout::Reclaim(const SlotKey& k, uint64_t hash) {
  const uint32_t capacity = header->slot_capacity;
  for (;;) {
    // The victim: unreferenced, not a closed-connections slot, released longest ago.
    uint32_t v = kInvalid;
    for (uint32_t i = 0; i < capacity; ++i) {
      const SlotUse& u = use[i];
      if (!u.used || u.refs != 0 || u.closed) continue;
      if (v == kInvalid || u.released < use[v].released) v = i;
    }
    if (v == kInvalid) return kInvalid;
    Slot& s = slots[v];
    const std::string task(s.task);  // `s` is re-keyed below
    const SlotKey closed_key = ClosedKey(task, s.collective);
    const uint64_t closed_hash = Hash(closed_key.task, closed_key.collective, closed_key.peer, 0, closed_key.path_name);
    // The table is full (no empty slot ends a probe chain): this scans until it finds the slot.
    const uint32_t a = Find(closed_key, closed_hash, false);
    // A reader must never count the victim's traffic twice (in the victim and in the closed slot)
    // nor see it half-moved: the victim is not ready while it changes, and the counters change
    // with release stores after that, so a reader that saw any moved count re-checks and skips it.
    s.state.store(kClaiming, std::memory_order_relaxed);
    if (a == kInvalid) {
      // No closed-connections slot for this task and collective yet: the victim becomes it, its
      // counters kept, and another victim is sought.
      WriteKey(s, closed_key);
      use[v].closed = true;
      use[v].hash = closed_hash;
      s.state.store(kReady, std::memory_order_release);
      continue;
    }
    FoldCounters(s, slots[a]);
    WriteKey(s, k);
    use[v] = SlotUse{true, IsClosedKey(k), 0, hash, 0};
    s.state.store(kReady, std::memory_order_release);
    return v;
  }
}

uint32_t StatsTable::Resolve(const StatsKey& key) {
  // Keyed by the peer's address: its ephemeral port differs per connection, and a long job opens
  // thousands, which would fill the table and drop every later connection's numbers.
  const SlotKey k{key.task, static_cast<uint8_t>(key.collective), StatsPeerAddress(key.peer), key.path_id,
                  key.path_name};
  const uint64_t h = Hash(k.task, k.collective, k.peer, k.path_id, k.path_name);
  std::lock_guard<std::mutex> lock(layout_->mu);
  uint32_t i = layout_->Find(k, h, true);
  if (i == kInvalid) i = layout_->Reclaim(k, h);
  if (i == kInvalid) {
    layout_->header->dropped.fetch_add(1, std::memory_order_relaxed);
    return kInvalid;
  }
  ++layout_->use[i].refs;
  return i;
}

void StatsTable::Release(uint32_t slot) {
  if (slot >= layout_->header->slot_capacity) return;
  std::lock_guard<std::mutex> lock(layout_->mu);
  SlotUse& u = layout_->use[slot];
  if (u.refs == 0) return;  // not held: a caller's bug, never a reason to reclaim a held slot
  if (--u.refs == 0) u.released = ++layout_->clock;
}

void StatsTable::Record(const StatsKey& key, uint64_t bytes, uint64_t latency_ns, Direction direction) {
  const uint32_t slot = Resolve(key);
  Record(slot, bytes, latency_ns, direction);
  Release(slot);
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
