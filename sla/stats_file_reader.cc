// The statistics reader and --gc: files from other processes are opened and parsed as untrusted input.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <ctime>
#include <memory>
#include <tuple>
#include <type_traits>

#include "sla/stats_file_format.h"
#include "sla/task_identity.h"
#include "sla/task_stats.h"
#include "sla/utf8_text.h"

namespace ff::sla {
using namespace stats_format;

namespace stats_format {

uint64_t ReadStartTicks(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  return std::getline(in, line) ? ParseStatStartTicks(line) : 0;
}

bool OpenStatsFileForReading(const std::string& path, UniqueFd* fd, struct stat* st, std::string* error) {
  auto fail = [&](const std::string& what) {
    if (error) *error = path + ": " + what;
    return false;
  };
  // O_NOFOLLOW: a symlink planted under a stats name must not lead us elsewhere. O_NONBLOCK: a
  // FIFO under a stats name would block open() forever (it is rejected by fstat below).
  fd->reset(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd->valid()) {
    const int err = errno;
    return fail(err == ELOOP ? "a symbolic link, not a statistics file: skipped" : std::strerror(err));
  }
  if (::fstat(fd->get(), st) != 0) return fail(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st->st_mode)) return fail("not a regular file (a FIFO, device or directory): skipped");
  // Trusted writers are ourselves and root: a file we wrote, or one root wrote (root can change
  // anything of ours anyway). Another unprivileged user could craft a file to mislead us, and
  // --gc must never act on such a file.
  const uid_t me = ::geteuid();
  if (st->st_uid != me && st->st_uid != 0)
    return fail("owned by uid " + std::to_string(st->st_uid) + ", neither you (uid " + std::to_string(me) +
                ") nor root: skipped");
  const uint64_t max_size = FileSize(kMaxSlots, kMaxTasks);
  if (st->st_size < static_cast<off_t>(sizeof(Header)) || static_cast<uint64_t>(st->st_size) > max_size)
    return fail("size " + std::to_string(st->st_size) + " bytes is not that of a FlexiForce statistics file (" +
                std::to_string(sizeof(Header)) + " to " + std::to_string(max_size) + ")");
  return true;
}

WriterLock ProbeWriterLock(int fd, int how) {
  if (::flock(fd, how | LOCK_NB) == 0) {
    if (how == LOCK_SH) ::flock(fd, LOCK_UN);
    return WriterLock::kFree;
  }
  return errno == EWOULDBLOCK ? WriterLock::kHeld : WriterLock::kUnknown;
}

}  // namespace stats_format

namespace {

// A NUL-terminated name within its field, as valid UTF-8; nullopt when the field has no NUL.
template <size_t N>
std::optional<std::string> StoredName(const char (&field)[N]) {
  const void* nul = std::memchr(field, '\0', N);
  if (nul == nullptr) return std::nullopt;
  return SanitizedUtf8(std::string_view(field, static_cast<const char*>(nul) - field));
}

// The fields that say which key a slot holds, copied raw: a re-keyed slot differs in them.
template <typename SlotT>
struct RawKey {
  uint8_t collective;
  uint32_t path_id;
  char task[kStatsNameCapacity];
  char peer[kStatsNameCapacity];
  char path_name[kStatsPathNameCapacity];  // version 3 only; zeros for version 2

  explicit RawKey(const SlotT& s) : collective(s.collective), path_id(s.path_id), task{}, peer{}, path_name{} {
    std::memcpy(task, s.task, sizeof(task));
    std::memcpy(peer, s.peer, sizeof(peer));
    if constexpr (std::is_same_v<SlotT, Slot>) std::memcpy(path_name, s.path_name, sizeof(path_name));
  }
  bool operator==(const RawKey& o) const {
    return collective == o.collective && path_id == o.path_id && std::memcmp(task, o.task, sizeof(task)) == 0 &&
           std::memcmp(peer, o.peer, sizeof(peer)) == 0 && std::memcmp(path_name, o.path_name, sizeof(path_name)) == 0;
  }
  // The key of a closed-connections slot (SlotSnapshot::closed_connections), judged on the raw fields.
  bool closed_connections() const {
    auto is = [](const char* field, size_t size, std::string_view want) {
      return want.size() < size && std::memcmp(field, want.data(), want.size()) == 0 && field[want.size()] == '\0';
    };
    return path_id == 0 && is(peer, sizeof(peer), kStatsClosedPeer) &&
           is(path_name, sizeof(path_name), kStatsClosedPathName);
  }
};

enum class SlotRead { kRead, kSkipped, kCorrupt };

// One slot's key and counters as of one moment it held that key, like a seqlock: the writer marks a
// slot it reclaims not ready before it moves the counters (with release stores), so counters read
// while it moved them show up as a changed state or key on the re-check and the slot is read
// again. A slot not ready, or one that keeps changing, is skipped (its traffic is in the
// closed-connections slot or soon will be). Only slots whose key is (`closed`) or is not
// (`!closed`) a closed-connections key are read.
template <typename SlotT>
SlotRead ReadSlot(const SlotT& s, uint32_t index, bool closed, SlotSnapshot* snap, std::string* error) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (s.state.load(std::memory_order_acquire) != kReady) return SlotRead::kSkipped;
    const RawKey<SlotT> key(s);
    if (key.closed_connections() != closed) return SlotRead::kSkipped;
    DirectionSnapshot* dirs[2] = {&snap->send, &snap->recv};
    for (int d = 0; d < 2; ++d) {
      // Acquire: a count the writer moved (a release store) comes with the slot's not-ready mark.
      dirs[d]->bytes = s.dir[d].bytes.load(std::memory_order_acquire);
      dirs[d]->messages = s.dir[d].messages.load(std::memory_order_acquire);
      dirs[d]->latency_sum_ns = s.dir[d].latency_sum_ns.load(std::memory_order_acquire);
      for (int b = 0; b < kLatencyBuckets; ++b)
        dirs[d]->histogram[b] = s.dir[d].histogram[b].load(std::memory_order_acquire);
    }
    if (g_slot_copied_hook != nullptr) g_slot_copied_hook(index);
    if (s.state.load(std::memory_order_acquire) != kReady || !(RawKey<SlotT>(s) == key)) continue;
    auto task = StoredName(key.task);
    auto peer = StoredName(key.peer);
    // Version 3 stores the path's name, version 2 none.
    auto path_name = std::is_same_v<SlotT, Slot> ? StoredName(key.path_name) : std::optional<std::string>("");
    if (!task || !peer || !path_name) {
      *error = "corrupt slot " + std::to_string(index) + ": " +
               (path_name ? "a name is not NUL-terminated within " + std::to_string(kStatsNameCapacity) + " bytes"
                          : "its path name is not NUL-terminated within " + std::to_string(kStatsPathNameCapacity) +
                                " bytes");
      return SlotRead::kCorrupt;
    }
    snap->task = std::move(*task);
    snap->peer = std::move(*peer);
    snap->path_name = std::move(*path_name);
    snap->collective = static_cast<Collective>(key.collective);  // CollectiveName maps unknown values to "unknown"
    snap->path_id = key.path_id;
    return SlotRead::kRead;
  }
  return SlotRead::kSkipped;
}

// Copies every ready slot of a file whose slots have layout SlotT. False with `error` on a name
// that is not NUL-terminated within its field.
//
// Closed-connections slots are read first, every other slot after: the writer moves a reclaimed
// slot's counters into its closed-connections slot only after marking it not ready, so a victim
// read after the closed slot is either not yet moved (and not yet in what we read of the closed
// slot) or already gone. Read the other way round, a slot moved between the two reads would count
// twice. The cost is a momentary undercount, never a double count.
template <typename SlotT>
bool ReadSlots(const void* base, uint32_t capacity, std::vector<SlotSnapshot>* out, std::string* error) {
  const SlotT* slots = Slots<SlotT>(base);
  for (const bool closed_pass : {true, false}) {
    for (uint32_t i = 0; i < capacity; ++i) {
      SlotSnapshot snap;
      const SlotRead r = ReadSlot(slots[i], i, closed_pass, &snap, error);
      if (r == SlotRead::kCorrupt) return false;
      if (r == SlotRead::kRead) out->push_back(std::move(snap));
    }
  }
  return true;
}

struct ReadOnlyMapping {
  const void* base = MAP_FAILED;
  size_t size = 0;
  ~ReadOnlyMapping() {
    if (base != MAP_FAILED) ::munmap(const_cast<void*>(base), size);
  }
};

// Whether `path` (already opened as `fd`) is a format-2 file, whose liveness is its lock alone.
bool HasWriterLockFormat(int fd, size_t size) {
  Header h;
  if (size < sizeof(Header) || ::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) return false;
  return std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && (h.version == kVersion || h.version == kVersionNoPathName);
}

int64_t HeaderPid(int fd) {
  Header h;
  if (::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) return 0;
  return h.pid;
}

}  // namespace

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
  UniqueFd fd;
  struct stat st {};
  if (!OpenStatsFileForReading(path, &fd, &st, error)) return std::nullopt;
  const auto size = static_cast<size_t>(st.st_size);
  ReadOnlyMapping map;
  map.size = size;
  map.base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map.base == MAP_FAILED) return fail(std::string("cannot map: ") + std::strerror(errno));

  const auto* h = static_cast<const Header*>(map.base);
  if (std::memcmp(h->magic, kMagic, sizeof(kMagic)) != 0) return fail("not a FlexiForce statistics file");
  if (h->ready.load(std::memory_order_acquire) != 1) return fail("still being created");
  // This build writes version 3 and still reads version 2 (no path names), each with its own slot size.
  const bool v3 = h->version == kVersion && h->slot_size == sizeof(Slot);
  const bool v2 = h->version == kVersionNoPathName && h->slot_size == sizeof(SlotV2);
  if ((!v3 && !v2) || h->header_size != sizeof(Header) || h->task_size != sizeof(TaskEntry))
    return fail("written by an incompatible FlexiForce version (format " + std::to_string(h->version) +
                ", this reader reads " + std::to_string(kVersionNoPathName) + " and " + std::to_string(kVersion) + ")");
  const size_t slot_size = v3 ? sizeof(Slot) : sizeof(SlotV2);
  // Every header field is checked before it steers a loop or an offset.
  if (h->pid <= 0 || h->pid > kMaxPid)
    return fail("corrupt header: pid " + std::to_string(h->pid) + " outside 1.." + std::to_string(kMaxPid));
  if (h->slot_capacity == 0 || h->slot_capacity > kMaxSlots || h->task_capacity == 0 || h->task_capacity > kMaxTasks)
    return fail("corrupt header: " + std::to_string(h->slot_capacity) + " slots and " +
                std::to_string(h->task_capacity) + " tasks (accepted 1.." + std::to_string(kMaxSlots) + " and 1.." +
                std::to_string(kMaxTasks) + ")");
  const uint64_t expected = FileSize(h->slot_capacity, h->task_capacity, slot_size);
  if (expected != size)
    return fail("corrupt header: " + std::to_string(h->slot_capacity) + " slots and " +
                std::to_string(h->task_capacity) + " tasks need " + std::to_string(expected) +
                " bytes, the file has " + std::to_string(size));

  StatsSnapshot snap;
  snap.path = path;
  snap.pid = h->pid;
  // The writer's lock says it lives, in any pid namespace; our view of its pid cannot.
  snap.alive = ProbeWriterLock(fd.get(), LOCK_SH) != WriterLock::kFree;
  snap.dropped = h->dropped.load(std::memory_order_relaxed);
  std::string slot_error;
  const bool slots_ok = v3 ? ReadSlots<Slot>(map.base, h->slot_capacity, &snap.slots, &slot_error)
                           : ReadSlots<SlotV2>(map.base, h->slot_capacity, &snap.slots, &slot_error);
  if (!slots_ok) return fail(slot_error);
  const TaskEntry* tasks = Tasks(map.base, h->slot_capacity, slot_size);
  for (uint32_t i = 0; i < h->task_capacity; ++i) {
    const TaskEntry& t = tasks[i];
    if (t.state.load(std::memory_order_acquire) != kReady) continue;
    auto name = StoredName(t.task);
    if (!name)
      return fail("corrupt task entry " + std::to_string(i) + ": its name is not NUL-terminated within " +
                  std::to_string(kStatsNameCapacity) + " bytes");
    TaskSnapshot out;
    out.task = std::move(*name);
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
    return std::tie(a.task, a.collective, a.peer, a.path_id, a.path_name) <
           std::tie(b.task, b.collective, b.peer, b.path_id, b.path_name);
  });
  return snap;
}

namespace {

// flexiforce-stats-<pid> or flexiforce-stats-<pid>-<n>; the pid, or -1 for another name.
int64_t PidOfStatsName(const std::string& name) {
  const std::string prefix = kStatsFilePrefix;
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::string rest = name.substr(prefix.size());
  if (const size_t dash = rest.find('-'); dash != std::string::npos) {
    const std::string n = rest.substr(dash + 1);
    if (n.empty() || n.size() > 2 || n.find_first_not_of("0123456789") != std::string::npos) return -1;
    rest.resize(dash);
  }
  if (rest.empty() || rest.size() > 18 || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(rest);
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

}  // namespace

std::vector<std::pair<int64_t, std::string>> ListStatsFiles(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) return out;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (const int64_t pid = PidOfStatsName(name); pid >= 0) out.emplace_back(pid, dir + "/" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// A statistics file whose writer is gone, held open (and locked) while the caller decides.
struct StaleFile {
  std::string path;
  bool hidden = false;  // a writer died while creating it (a file is published only when complete)
  struct stat st {};
  UniqueFd fd;
};

// Every file in `dir` whose writer is gone: nobody holds its lock (format 2 and later), or its pid
// no longer runs (format 1). Young hidden files are left alone: a writer locks them right after
// creating them.
std::vector<StaleFile> FindStaleStatsFiles(const std::string& dir, std::vector<std::string>* skipped) {
  struct Candidate {
    std::string path;
    bool hidden;
  };
  std::vector<Candidate> candidates;
  for (const auto& entry : ListStatsFiles(dir)) candidates.push_back({entry.second, false});
  if (std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str())); d) {
    const std::string hidden = std::string(".") + kStatsFilePrefix;
    while (const dirent* e = ::readdir(d.get()))
      if (std::strncmp(e->d_name, hidden.c_str(), hidden.size()) == 0)
        candidates.push_back({dir + "/" + e->d_name, true});
  }
  std::vector<StaleFile> stale;
  for (const auto& [path, hidden] : candidates) {
    StaleFile f;
    f.path = path;
    f.hidden = hidden;
    if (::lstat(path.c_str(), &f.st) != 0) continue;  // gone meanwhile
    std::string error;
    if (!OpenStatsFileForReading(path, &f.fd, &f.st, &error)) {
      if (skipped) skipped->push_back(error);
      continue;
    }
    if (hidden && f.st.st_mtime + 60 > ::time(nullptr)) continue;
    // Taken exclusively: a live writer holds it (in whatever pid namespace), so failing means alive.
    if (ProbeWriterLock(f.fd.get(), LOCK_EX) != WriterLock::kFree) continue;
    // A format-1 file carries no lock: fall back to its pid, as format 1 did.
    if (!HasWriterLockFormat(f.fd.get(), static_cast<size_t>(f.st.st_size)) && !hidden &&
        StatsOwnerAlive(HeaderPid(f.fd.get()), 0))
      continue;
    stale.push_back(std::move(f));
  }
  return stale;
}

// Unlinks `f` - only the file checked, not one a new writer published under the same name since.
bool UnlinkStale(const StaleFile& f) {
  struct stat now {};
  if (::lstat(f.path.c_str(), &now) != 0 || now.st_ino != f.st.st_ino || now.st_dev != f.st.st_dev) return false;
  return ::unlink(f.path.c_str()) == 0;
}

}  // namespace

std::vector<std::string> RemoveStaleStatsFiles(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<std::string> removed;
  for (const auto& f : FindStaleStatsFiles(dir, skipped))
    if (UnlinkStale(f)) removed.push_back(f.path);
  return removed;
}

std::vector<std::string> RemoveCrashedStatsFiles(const std::string& dir, size_t keep_newest) {
  std::vector<StaleFile> crashed;
  std::vector<std::string> removed;
  for (auto& f : FindStaleStatsFiles(dir, nullptr)) {
    if (f.hidden) {  // never complete: nothing to read in it
      if (UnlinkStale(f)) removed.push_back(f.path);
      continue;
    }
    // A writer that exited cleanly with FLEXIFORCE_STATS_KEEP=1 left its file read-only: kept on purpose.
    if ((f.st.st_mode & S_IWUSR) == 0) continue;
    crashed.push_back(std::move(f));
  }
  std::sort(crashed.begin(), crashed.end(), [](const StaleFile& a, const StaleFile& b) {
    return std::tie(a.st.st_mtim.tv_sec, a.st.st_mtim.tv_nsec) > std::tie(b.st.st_mtim.tv_sec, b.st.st_mtim.tv_nsec);
  });
  for (size_t i = keep_newest; i < crashed.size(); ++i)
    if (UnlinkStale(crashed[i])) removed.push_back(crashed[i].path);
  return removed;
}

}  // namespace ff::sla
