// The statistics file's shared-memory layout, shared by the writer (task_stats.cc) and the reader
// (stats_file_reader.cc); private to sla/.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <sys/stat.h>

#include <string>

#include "base/unique_fd.h"
#include "sla/task_stats.h"

namespace ff::sla::stats_format {

inline constexpr char kMagic[8] = {'F', 'F', 'S', 'T', 'A', 'T', 'S', '1'};
// 2: the writer holds flock(LOCK_EX) on the file for its whole life; liveness is that lock, not
// the pid (which another pid namespace cannot see). A v1 file carries no lock.
// 3: each slot also names its path ("eth0 10.0.0.1 -> 10.0.0.2 via spine1"), so a report says what
// a path is instead of printing the oracle's hash. The reader still reads version 2 (SlotV2).
inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kVersionNoPathName = 2;
// Bounds the reader accepts before trusting a header: Linux's PID_MAX_LIMIT, and capacities far
// above anything the writer creates, so a corrupt header cannot make the reader walk gigabytes.
inline constexpr int64_t kMaxPid = 4194304;
inline constexpr uint32_t kMaxSlots = 1u << 20;
inline constexpr uint32_t kMaxTasks = 1u << 12;

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
  char path_name[kStatsPathNameCapacity];  // version 3
  DirectionCounters dir[2];
};
static_assert(sizeof(Slot) == 960, "the stats file format: a version-3 slot is fifteen cache lines");

// A version-2 slot: the same fields without the path's name. Only the reader uses it.
struct alignas(64) SlotV2 {
  std::atomic<uint32_t> state;
  uint32_t path_id;
  uint8_t collective;
  char task[kStatsNameCapacity];
  char peer[kStatsNameCapacity];
  DirectionCounters dir[2];
};
static_assert(sizeof(SlotV2) == 832, "the stats file format: a version-2 slot is thirteen cache lines");

struct alignas(64) TaskEntry {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> level;
  char task[kStatsNameCapacity];
  std::atomic<uint64_t> sla_ns;     // 0: none declared
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

// Test seam: the reader calls this (when set) after copying slot `index`'s counters and before
// re-checking that the slot still holds the key it copied, so a test can reclaim the slot there.
inline void (*g_slot_copied_hook)(uint32_t index) = nullptr;

// 64-bit arithmetic: a reader computing this from a corrupt header must not overflow. slot_size is
// that of the file's version (sizeof(Slot) for files this build writes).
inline uint64_t FileSize(uint64_t slots, uint64_t tasks, uint64_t slot_size = sizeof(Slot)) {
  return sizeof(Header) + slots * slot_size + tasks * sizeof(TaskEntry);
}

inline Slot* Slots(void* base) { return reinterpret_cast<Slot*>(static_cast<char*>(base) + sizeof(Header)); }
template <typename SlotT = Slot>
inline const SlotT* Slots(const void* base) {
  return reinterpret_cast<const SlotT*>(static_cast<const char*>(base) + sizeof(Header));
}
inline TaskEntry* Tasks(void* base, uint32_t slots) {
  return reinterpret_cast<TaskEntry*>(static_cast<char*>(base) + sizeof(Header) + size_t{slots} * sizeof(Slot));
}
inline const TaskEntry* Tasks(const void* base, uint32_t slots, size_t slot_size = sizeof(Slot)) {
  return reinterpret_cast<const TaskEntry*>(static_cast<const char*>(base) + sizeof(Header) +
                                            size_t{slots} * slot_size);
}

// Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22); 0 if unknown.
uint64_t ReadStartTicks(int64_t pid);

// Opens a statistics file without trusting its name: no symlink followed, no blocking on a FIFO,
// a regular file owned by us or root, of a size a writer could have made. False with `error`.
bool OpenStatsFileForReading(const std::string& path, UniqueFd* fd, struct stat* st, std::string* error);

enum class WriterLock { kHeld, kFree, kUnknown };
// Whether the file's writer still holds its lock. kFree with LOCK_EX leaves the lock taken on
// `fd` (the caller removes the file under it; closing `fd` releases it); with LOCK_SH it is released.
WriterLock ProbeWriterLock(int fd, int how);

}  // namespace ff::sla::stats_format
