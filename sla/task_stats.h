// Always-on per-process statistics in a shared-memory file that `flexiforce stats` reads from
// another process: bytes, messages and latency per {task, collective, peer, path}, plus per-task
// heat, SLA misses and failover counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "sla/collective_id.h"

namespace ff::sla {

inline constexpr const char* kStatsDefaultDir = "/dev/shm";
inline constexpr const char* kStatsFilePrefix = "flexiforce-stats-";
inline constexpr size_t kStatsNameCapacity = 64;  // task id and peer, NUL included
// A path's name, NUL included: room for "<ifname> <v6 address> -> <v6 address> via <spine>".
inline constexpr size_t kStatsPathNameCapacity = 128;
// Latency histogram: bucket 0 holds <= 1 ns, bucket b (1..38) holds (2^(b-1), 2^b] ns, so its
// Prometheus upper bound is exactly 2^b ns; bucket 39 holds everything above 2^38 ns (~275 s).
inline constexpr int kLatencyBuckets = 40;

enum class Direction : uint8_t { kSend = 0, kRecv = 1 };

// The slot that holds a task's and collective's closed connections once their own slots were
// reclaimed for new keys (see StatsTable::Resolve): this peer, path id 0 and this path name.
inline constexpr std::string_view kStatsClosedPeer = "(closed)";
inline constexpr std::string_view kStatsClosedPathName = "closed connections";

struct StatsKey {
  std::string_view task;
  Collective collective = Collective::kUnknown;
  std::string_view peer;  // e.g. "10.0.0.2:43117" or "rank3"; stored as StatsPeerAddress, truncated to 63 bytes
  uint32_t path_id = 0;
  // What the path is, for people: "eth0 10.0.0.1 -> 10.0.0.2 via spine1"; truncated to 127 bytes.
  // Part of the key: unsteered paths all have id 0 and differ only by their name.
  std::string_view path_name;
};

// The part of a peer description a slot is keyed by: the address without its port
// ("10.0.0.2:43117" -> "10.0.0.2", "[fe80::1]:5000" -> "fe80::1", "a:1->10.0.0.2:7" -> "10.0.0.2");
// anything else ("rank3") unchanged.
std::string_view StatsPeerAddress(std::string_view peer);

// Histogram bucket of a latency, as described above.
int LatencyBucket(uint64_t latency_ns);

struct StatsTableOptions {
  std::string dir = kStatsDefaultDir;
  uint32_t slots = 1024;     // distinct {task, collective, peer, path} keys
  uint32_t tasks = 16;       // distinct tasks (normally one per process)
  bool remove_on_close = true;  // a clean exit removes the file (else leaves it read-only); a crash leaves it for --gc
};

// The writer side, one per process. Record paths are lock-free and allocate nothing: keys
// live in an open-addressing table of fixed slots, and every counter is a 64-bit atomic in the
// shared mapping (address-free, so the reading process sees them too). Resolve and Release keep
// a per-slot reference count in this process (not in the file) under a mutex; they run at
// connection setup and teardown, not per message.
class StatsTable {
 public:
  static constexpr uint32_t kInvalid = 0xFFFFFFFFu;

  // Creates <dir>/flexiforce-stats-<pid> (replacing a stale one; -<n> appended when a live process
  // of another pid namespace has that name), its blocks reserved, mode 0600, locked while this
  // object lives. nullptr with `error` set on failure (a full directory included).
  static std::unique_ptr<StatsTable> Open(const StatsTableOptions& options, std::string* error);
  ~StatsTable();
  StatsTable(const StatsTable&) = delete;
  StatsTable& operator=(const StatsTable&) = delete;

  const std::string& path() const { return path_; }
  // Removes the file's name now if the options asked for removal on close, else makes the file
  // read-only: a clean exit kept it on purpose, which the automatic sweep of crashed writers' files
  // respects (RemoveCrashedStatsFiles). The mapping and the counters stay valid (for a process that
  // exits while other threads still record).
  // Only the process that opened the table does this: a child forked after it (a data-loader
  // worker) that exits normally runs the same exit handlers, and the file is its parent's.
  void RemoveFile();

  // Finds or claims the slot of `key` and takes a reference to it; Release gives it back.
  // Callers on hot paths resolve once per connection and collective and keep the handle.
  // When no slot is free, the unreferenced slot released longest ago is reclaimed: its counters
  // are added to its task's and collective's closed-connections slot (kStatsClosedPeer; the
  // victim itself becomes that slot when there is none yet) and it is re-keyed with zeroed
  // counters, so per-task totals are kept. kInvalid (counted as dropped) only when every slot is
  // referenced or holds closed connections.
  uint32_t Resolve(const StatsKey& key);
  // Drops a reference taken by Resolve (kInvalid: nothing). An unreferenced slot keeps its
  // counters and key until it is reclaimed; a later Resolve of the same key finds it again.
  void Release(uint32_t slot);
  // `slot` must hold a reference (from Resolve) while this runs.
  void Record(uint32_t slot, uint64_t bytes, uint64_t latency_ns, Direction direction);
  // Resolve, record, release: for callers without a connection to keep a handle in.
  void Record(const StatsKey& key, uint64_t bytes, uint64_t latency_ns, Direction direction);

  // Per-task values. ResolveTask returns kInvalid when the task table is full.
  uint32_t ResolveTask(std::string_view task);
  void SetTaskSla(uint32_t task, std::optional<uint64_t> sla_ns, int level);
  void SetTaskHeat(uint32_t task, double heat);
  void AddSlaUnattainable(uint32_t task, uint64_t n = 1);
  void AddFailover(uint32_t task, uint64_t events, uint64_t bytes_resent, uint64_t paused_ns);
  void AddFailback(uint32_t task);  // a failed path was reconnected and carries traffic again

  struct Layout;  // the shared-memory format, defined in task_stats.cc

 private:
  StatsTable() = default;
  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  UniqueFd lock_;  // holds flock(LOCK_EX): the writer lives
  bool remove_on_close_ = true;
  int64_t owner_pid_ = 0;  // the process that opened it
  std::atomic<bool> removed_{false};
  Layout* layout_ = nullptr;
};

// ---- reader side -----------------------------------------------------------

struct DirectionSnapshot {
  uint64_t bytes = 0;
  uint64_t messages = 0;
  uint64_t latency_sum_ns = 0;
  uint64_t histogram[kLatencyBuckets] = {};
};

struct SlotSnapshot {
  std::string task;
  Collective collective = Collective::kUnknown;
  std::string peer;
  uint32_t path_id = 0;
  std::string path_name;  // empty in version-2 files
  DirectionSnapshot send, recv;
  // The totals of the task's and collective's closed connections whose slots were reclaimed.
  bool closed_connections() const {
    return peer == kStatsClosedPeer && path_id == 0 && path_name == kStatsClosedPathName;
  }
};

struct TaskSnapshot {
  std::string task;
  std::optional<uint64_t> sla_ns;
  int level = 0;
  double heat = 0;
  uint64_t sla_unattainable = 0;
  uint64_t failover_events = 0;
  uint64_t failover_bytes_resent = 0;
  uint64_t failover_paused_ns = 0;
  uint64_t failbacks = 0;
};

struct StatsSnapshot {
  std::string path;
  int64_t pid = 0;
  bool alive = false;  // the writer holds the file's lock
  uint64_t dropped = 0;  // records lost because the slot table was full
  std::vector<SlotSnapshot> slots;
  std::vector<TaskSnapshot> tasks;
};

// Reads one statistics file. nullopt with `error` set when it is missing, not a regular file
// owned by us or root, or not a valid stats file. Names are returned as valid UTF-8.
std::optional<StatsSnapshot> ReadStatsFile(const std::string& path, std::string* error);

// Path of process `pid`'s file in `dir`.
std::string StatsFilePath(const std::string& dir, int64_t pid);

// Every stats file in `dir` (sorted by pid) as {pid, path}: flexiforce-stats-<pid>[-<n>].
std::vector<std::pair<int64_t, std::string>> ListStatsFiles(const std::string& dir);

// True when `pid` runs in our pid namespace and is the same process that created the file (start
// time matches). Only for files without a writer lock (format 1); see StatsSnapshot::alive.
bool StatsOwnerAlive(int64_t pid, uint64_t start_ticks);

// Removes files whose writer is gone (nobody holds the file's lock); returns the paths removed.
// Files it will not touch (not regular, a symlink, another user's) are named in `skipped`.
std::vector<std::string> RemoveStaleStatsFiles(const std::string& dir, std::vector<std::string>* skipped = nullptr);

// The automatic sweep (at a process's first statistics file): removes files of writers that died
// without a clean exit - killed, crashed - except the newest `keep_newest` of them (by modification
// time), so a job's leftovers do not pile up in /dev/shm. Files a clean exit kept on purpose
// (FLEXIFORCE_STATS_KEEP=1: left read-only) stay; `flexiforce stats --gc` removes those. Returns the
// paths removed.
std::vector<std::string> RemoveCrashedStatsFiles(const std::string& dir, size_t keep_newest);

}  // namespace ff::sla
