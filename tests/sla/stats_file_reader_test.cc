// The statistics reader and --gc facing files they must not trust: FIFOs, symlinks, other users'
// files, corrupt headers and names, and live writers whose pid we cannot see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sla/stats_file_format.h"
#include "sla/stats_render.h"
#include "sla/task_stats.h"

namespace ff {
int RunStatsCommand(int argc, char** argv);
}

namespace ff::sla {
namespace {

using ::testing::HasSubstr;
namespace fmt = stats_format;

// Runs `body` in a child with a deadline: a reader that blocks fails the test instead of hanging it.
::testing::AssertionResult FinishesWithin(int seconds, const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child < 0) return ::testing::AssertionFailure() << "fork failed";
  if (child == 0) {
    ::alarm(static_cast<unsigned>(seconds));
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status))
    return ::testing::AssertionFailure() << (WTERMSIG(status) == SIGALRM ? "hung (killed after the deadline)"
                                                                          : "killed by a signal");
  if (WEXITSTATUS(status) != 0) return ::testing::AssertionFailure() << "exit status " << WEXITSTATUS(status);
  return ::testing::AssertionSuccess();
}

int RunCli(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunStatsCommand(static_cast<int>(argv.size()), argv.data());
}

class StatsFileReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ff-stats-reader-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.dir = dir_;
    options_.slots = 8;
    options_.tasks = 2;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Maps a live table's file writable to corrupt it the way a stray writer could.
  template <typename Fn>
  void Corrupt(const std::string& path, Fn&& fn) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const auto size = static_cast<size_t>(std::filesystem::file_size(path));
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(base, MAP_FAILED);
    fn(static_cast<char*>(base));
    ::munmap(base, size);
  }

  std::string dir_;
  StatsTableOptions options_;
};

TEST_F(StatsFileReaderTest, FifoNamedLikeAStatsFileDoesNotHangStatsOrGc) {
  const std::string fifo = dir_ + "/flexiforce-stats-4242";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(FinishesWithin(5, [&] {
    std::string error;
    if (ReadStatsFile(fifo, &error)) return 1;
    return error.find("not a regular file") != std::string::npos ? 0 : 2;
  }));
  EXPECT_TRUE(FinishesWithin(5, [&] { return RunCli({"stats", "--dir", dir_, "--json"}); }));
  EXPECT_TRUE(FinishesWithin(5, [&] { return RunCli({"stats", "--dir", dir_, "--gc"}); }));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::symlink_status(fifo)));  // skipped, not removed
}

TEST_F(StatsFileReaderTest, SymlinkNamedLikeAStatsFileIsNotFollowed) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const std::string link = dir_ + "/flexiforce-stats-4243";
  ASSERT_EQ(::symlink(table->path().c_str(), link.c_str()), 0);
  EXPECT_FALSE(ReadStatsFile(link, &error));
  EXPECT_THAT(error, HasSubstr("symbolic link"));
}

TEST_F(StatsFileReaderTest, AnotherUsersFileIsSkipped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  ASSERT_EQ(::chown(table->path().c_str(), 65534, 65534), 0);
  EXPECT_FALSE(ReadStatsFile(table->path(), &error));
  EXPECT_THAT(error, HasSubstr("owned by uid 65534"));
}

TEST_F(StatsFileReaderTest, HeaderPidAndSlotCountAreValidated) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  Corrupt(table->path(), [](char* b) { reinterpret_cast<fmt::Header*>(b)->pid = -7; });
  EXPECT_FALSE(ReadStatsFile(table->path(), &error));
  EXPECT_THAT(error, HasSubstr("pid -7"));
  Corrupt(table->path(), [](char* b) {
    auto* h = reinterpret_cast<fmt::Header*>(b);
    h->pid = getpid();
    h->slot_capacity = 0xFFFFFFF0u;  // would walk 3.5 TB past the mapping if trusted
  });
  EXPECT_FALSE(ReadStatsFile(table->path(), &error));
  EXPECT_THAT(error, HasSubstr("slots"));
}

TEST_F(StatsFileReaderTest, NamesWithoutTerminatorAreRejected) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  const uint32_t slot = table->Resolve({"job", Collective::kAllReduce, "10.0.0.2", 0});
  ASSERT_NE(slot, StatsTable::kInvalid);
  Corrupt(table->path(), [slot](char* b) {
    auto* s = reinterpret_cast<fmt::Slot*>(b + sizeof(fmt::Header)) + slot;
    std::memset(s->peer, 'A', sizeof(s->peer));
  });
  EXPECT_FALSE(ReadStatsFile(table->path(), &error));
  EXPECT_THAT(error, HasSubstr("not NUL-terminated"));
}

TEST_F(StatsFileReaderTest, InvalidUtf8NamesAreReplacedSoJsonNeverThrows) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  table->Record({"job\xff\xfe", Collective::kAllReduce, "peer\xc3", 0}, 1, 1, Direction::kSend);
  table->ResolveTask("task\x80\x1b[31m");
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  ASSERT_EQ(snap->slots.size(), 1u);
  EXPECT_EQ(snap->slots[0].task, "job\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(snap->slots[0].peer, "peer\xEF\xBF\xBD");
  ASSERT_EQ(snap->tasks.size(), 1u);
  EXPECT_EQ(snap->tasks[0].task, "task\xEF\xBF\xBD?[31m");
  std::string json;
  EXPECT_NO_THROW(json = RenderStatsJson({*snap}));
  EXPECT_THAT(json, HasSubstr("job"));
}

TEST_F(StatsFileReaderTest, PathNameWithoutTerminatorIsRejectedAndInvalidUtf8Replaced) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  table->Record({"job", Collective::kAllReduce, "10.0.0.2", 7, "eth0\xff -> 10.0.0.2"}, 1, 1, Direction::kSend);
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  ASSERT_EQ(snap->slots.size(), 1u);
  EXPECT_EQ(snap->slots[0].path_name, "eth0\xEF\xBF\xBD -> 10.0.0.2");
  EXPECT_EQ(snap->slots[0].path_id, 7u);
  const uint32_t slot = table->Resolve({"job", Collective::kAllReduce, "10.0.0.2", 7, "eth0\xff -> 10.0.0.2"});
  ASSERT_NE(slot, StatsTable::kInvalid);
  Corrupt(table->path(), [slot](char* b) {
    auto* s = reinterpret_cast<fmt::Slot*>(b + sizeof(fmt::Header)) + slot;
    std::memset(s->path_name, 'A', sizeof(s->path_name));
  });
  EXPECT_FALSE(ReadStatsFile(table->path(), &error));
  EXPECT_THAT(error, HasSubstr("path name is not NUL-terminated within 128 bytes"));
}

// A job started with the previous release (format 2, no path names) is still read: its flows
// come back with their numeric ids and no name, and its task entries after the shorter slots.
TEST_F(StatsFileReaderTest, ReadsFormatTwoFilesWithoutPathNames) {
  constexpr uint32_t kSlots = 4, kTasks = 2;
  const size_t size = sizeof(fmt::Header) + kSlots * sizeof(fmt::SlotV2) + kTasks * sizeof(fmt::TaskEntry);
  const std::string path = StatsFilePath(dir_, 4242);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(base, MAP_FAILED);
  auto* h = static_cast<fmt::Header*>(base);
  std::memcpy(h->magic, fmt::kMagic, sizeof(fmt::kMagic));
  h->version = 2;
  h->header_size = sizeof(fmt::Header);
  h->slot_size = sizeof(fmt::SlotV2);
  h->task_size = sizeof(fmt::TaskEntry);
  h->slot_capacity = kSlots;
  h->task_capacity = kTasks;
  h->pid = 4242;
  auto* slot = reinterpret_cast<fmt::SlotV2*>(static_cast<char*>(base) + sizeof(fmt::Header)) + 1;
  slot->path_id = 1622425797;
  slot->collective = static_cast<uint8_t>(Collective::kAllGather);
  std::strcpy(slot->task, "old-job");
  std::strcpy(slot->peer, "10.0.0.9");
  slot->dir[0].bytes = 4096;
  slot->dir[0].messages = 2;
  slot->state.store(fmt::kReady);
  auto* task = reinterpret_cast<fmt::TaskEntry*>(static_cast<char*>(base) + sizeof(fmt::Header) +
                                                 kSlots * sizeof(fmt::SlotV2));
  std::strcpy(task->task, "old-job");
  task->failover_events.store(3);
  task->state.store(fmt::kReady);
  h->ready.store(1);
  ::munmap(base, size);

  std::string error;
  auto snap = ReadStatsFile(path, &error);
  ASSERT_TRUE(snap) << error;
  ASSERT_EQ(snap->slots.size(), 1u);
  EXPECT_EQ(snap->slots[0].task, "old-job");
  EXPECT_EQ(snap->slots[0].peer, "10.0.0.9");
  EXPECT_EQ(snap->slots[0].path_id, 1622425797u);
  EXPECT_EQ(snap->slots[0].path_name, "");
  EXPECT_EQ(snap->slots[0].send.bytes, 4096u);
  ASSERT_EQ(snap->tasks.size(), 1u);
  EXPECT_EQ(snap->tasks[0].failover_events, 3u);
  EXPECT_THAT(RenderStatsText({*snap}), HasSubstr("id 1622425797"));

  // A version-3 header over version-2 slots is a mismatch, not something to guess at.
  const int wfd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(wfd, 0);
  const uint32_t v3 = fmt::kVersion;
  ASSERT_EQ(::pwrite(wfd, &v3, sizeof(v3), offsetof(fmt::Header, version)), static_cast<ssize_t>(sizeof(v3)));
  ::close(wfd);
  EXPECT_FALSE(ReadStatsFile(path, &error));
  EXPECT_THAT(error, HasSubstr("incompatible"));
}

// Containers sharing /dev/shm see each other's files but not each other's pids. A live writer
// whose pid is not ours to see (here: its header says a pid nobody has) must survive --gc.
TEST_F(StatsFileReaderTest, GcKeepsALiveWriterWhosePidIsNotVisible) {
  std::string error;
  auto table = StatsTable::Open(options_, &error);
  ASSERT_TRUE(table) << error;
  Corrupt(table->path(), [](char* b) { reinterpret_cast<fmt::Header*>(b)->pid = fmt::kMaxPid; });
  auto snap = ReadStatsFile(table->path(), &error);
  ASSERT_TRUE(snap) << error;
  EXPECT_TRUE(snap->alive);
  EXPECT_TRUE(RemoveStaleStatsFiles(dir_).empty());
  EXPECT_TRUE(std::filesystem::exists(table->path()));
}

// The same in a real pid namespace: the writer is pid 1 there, and its file flexiforce-stats-1.
TEST_F(StatsFileReaderTest, GcKeepsALiveWriterInAnotherPidNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a pid namespace";
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t outer = ::fork();
  ASSERT_GE(outer, 0);
  if (outer == 0) {
    if (::unshare(CLONE_NEWPID) != 0) ::_exit(3);
    const pid_t inner = ::fork();  // pid 1 of the new namespace
    if (inner == 0) {
      std::string e;
      auto t = StatsTable::Open(options_, &e);
      char c = t ? 'y' : 'n';
      if (::write(ready[1], &c, 1) != 1 || ::read(done[0], &c, 1) != 1) ::_exit(4);
      ::_exit(0);
    }
    int st = 0;
    ::waitpid(inner, &st, 0);
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 5);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  const auto files = ListStatsFiles(dir_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(RemoveStaleStatsFiles(dir_).empty()) << "removed a live writer's file";
  EXPECT_TRUE(std::filesystem::exists(files[0].second));
  ASSERT_EQ(::write(done[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(outer, &status, 0), outer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Its writer is gone now (exited without closing its table, as a crash does): --gc removes it.
  EXPECT_EQ(RemoveStaleStatsFiles(dir_).size(), 1u);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

// A process killed (a scheduler's SIGKILL, a crash) leaves its ~1 MB file in /dev/shm for good: a
// node that ran many such jobs had hundreds. The sweep at a process's first file removes those beyond
// the newest `keep`, and leaves live writers' files and those a clean exit kept on purpose
// (FLEXIFORCE_STATS_KEEP=1, made read-only at exit); --gc still removes every leftover.
TEST_F(StatsFileReaderTest, TheSweepRemovesCrashedWritersFilesBeyondTheNewestAndKeepsTheRest) {
  // A writer in a child process that ends without closing its table (as a kill does), or after the
  // clean exit's step for a kept file. Returns its file's path.
  auto writer = [&](bool clean_keep) -> std::string {
    int fds[2];
    if (::pipe(fds) != 0) return "";
    const pid_t child = ::fork();
    if (child == 0) {
      StatsTableOptions o = options_;
      o.remove_on_close = !clean_keep;
      std::string e;
      auto t = StatsTable::Open(o, &e);
      if (!t) ::_exit(2);
      if (clean_keep) t->RemoveFile();  // what the plugin's atexit handler does
      const std::string path = t->path();
      if (::write(fds[1], path.data(), path.size()) != static_cast<ssize_t>(path.size())) ::_exit(3);
      ::_exit(0);  // no destructor, no atexit: the file stays as a killed process leaves it
    }
    ::close(fds[1]);
    char buf[512] = {};
    const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    return n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  };
  std::vector<std::string> crashed;
  for (int i = 0; i < 5; ++i) {
    crashed.push_back(writer(false));
    ASSERT_FALSE(crashed.back().empty());
    // Distinct modification times, oldest first.
    const timespec times[2] = {{1'700'000'000 + i * 60, 0}, {1'700'000'000 + i * 60, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, crashed.back().c_str(), times, 0), 0);
  }
  const std::string kept = writer(true);
  ASSERT_FALSE(kept.empty());
  const timespec old[2] = {{1'600'000'000, 0}, {1'600'000'000, 0}};  // older than every crashed one
  ASSERT_EQ(::utimensat(AT_FDCWD, kept.c_str(), old, 0), 0);
  std::string error;
  auto live = StatsTable::Open(options_, &error);  // this process's own, live
  ASSERT_TRUE(live) << error;

  auto removed = RemoveCrashedStatsFiles(dir_, 2);
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> want = {crashed[0], crashed[1], crashed[2]};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(removed, want) << "not the three oldest crashed writers' files";
  for (int i = 3; i < 5; ++i) EXPECT_TRUE(std::filesystem::exists(crashed[i])) << "a newest crashed file went";
  EXPECT_TRUE(std::filesystem::exists(kept)) << "a file a clean exit kept on purpose went";
  EXPECT_TRUE(std::filesystem::exists(live->path())) << "a live writer's file went";
  auto snap = ReadStatsFile(kept, &error);
  ASSERT_TRUE(snap) << "the kept file no longer reads: " << error;
  EXPECT_FALSE(snap->alive);
  EXPECT_TRUE(RemoveCrashedStatsFiles(dir_, 2).empty()) << "a second sweep removed more";
  EXPECT_EQ(RemoveCrashedStatsFiles(dir_, 0).size(), 2u);
  // --gc removes every leftover, the kept one included; the live file stays.
  EXPECT_EQ(RemoveStaleStatsFiles(dir_), std::vector<std::string>{kept});
  EXPECT_TRUE(std::filesystem::exists(live->path()));
}

}  // namespace
}  // namespace ff::sla
